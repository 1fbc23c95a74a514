#if defined(__linux__)
#define _GNU_SOURCE
#endif
#include "CTinyStorageShims.h"

#include <fcntl.h>

#include <errno.h>
#include <stdio.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#include <stdatomic.h>
#include <string.h>

#if defined(__linux__)
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#endif

int ts_inotify_init(void) {
#if defined(__linux__)
    return inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int ts_inotify_add_watch(int fd, const char *path, uint32_t mask) {
#if defined(__linux__)
    return inotify_add_watch(fd, path, mask);
#else
    (void)fd; (void)path; (void)mask;
    errno = ENOSYS;
    return -1;
#endif
}

int ts_inotify_rm_watch(int fd, int wd) {
#if defined(__linux__)
    return inotify_rm_watch(fd, wd);
#else
    (void)fd; (void)wd;
    errno = ENOSYS;
    return -1;
#endif
}

uint32_t ts_inotify_mask_names_and_attributes(void) {
#if defined(__linux__)
    // NB: no IN_MODIFY: every commit writes the data file, and the kernel would queue an event
    // (and wake this process's reader) for each one. Commits are signalled through the shared page.
    // IN_DONT_FOLLOW: a link planted at a watched name is never followed (issue 14).
    return IN_ATTRIB | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF | IN_MOVE_SELF
        | IN_DONT_FOLLOW;
#else
    return 0;
#endif
}

int ts_inotify_classify(uint32_t mask) {
#if defined(__linux__)
    if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT)) return 2;
    if (mask & IN_Q_OVERFLOW) return 3;
    if (mask & (IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE)) return 1;
    return 0;
#else
    (void)mask;
    return 0;
#endif
}

uint32_t ts_inotify_mask_vnode(bool folder) {
#if defined(__linux__)
    // NB: as NOTE_WRITE on a folder, entries added, removed or renamed; NOTE_LINK, a folder made
    // inside; on a file, writes (NOTE_WRITE, NOTE_EXTEND) and attributes. IN_DONT_FOLLOW: a link
    // planted at the name is never watched through (O_NOFOLLOW on Apple platforms).
    uint32_t common = IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_DONT_FOLLOW;
    return folder ? common | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO : common | IN_MODIFY;
#else
    (void)folder;
    return 0;
#endif
}

uint32_t ts_inotify_vnode_flags(uint32_t mask, bool folder) {
#if defined(__linux__)
    uint32_t flags = 0;
    if (folder && (mask & (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO))) flags |= 1;
    if (folder && (mask & IN_CREATE) && (mask & IN_ISDIR)) flags |= 8;
    if (!folder && (mask & IN_MODIFY)) flags |= 1 | 2;
    if (mask & IN_ATTRIB) flags |= 4;
    if (mask & IN_MOVE_SELF) flags |= 16;
    if (mask & IN_DELETE_SELF) flags |= 32;
    if (mask & (IN_IGNORED | IN_UNMOUNT)) flags |= 64;
    return flags;
#else
    (void)mask;
    (void)folder;
    return 0;
#endif
}

int ts_open_path_flag(void) {
#if defined(__linux__)
    return O_PATH;
#else
    return 0;
#endif
}

// Per-thread counts of the store locks this thread holds (0: the engine's in-process lock,
// 1: the cross-process lock), so tests can check a written contract: no logger, user closure or
// flush ever runs while one is held.
static _Thread_local int ts_lock_depths[2];

void ts_lock_witness_enter(int lock) { ts_lock_depths[lock & 1] += 1; }
void ts_lock_witness_leave(int lock) { ts_lock_depths[lock & 1] -= 1; }
int ts_lock_witness_depth(int lock) { return ts_lock_depths[lock & 1]; }

long ts_get_attribute(const char *path, const char *name, void *value, size_t size) {
#if defined(__linux__)
    return (long)lgetxattr(path, name, value, size);
#else
    (void)path; (void)name; (void)value; (void)size;
    errno = ENOTSUP;
    return -1;
#endif
}

int ts_set_attribute(const char *path, const char *name, const void *value, size_t size) {
#if defined(__linux__)
    return lsetxattr(path, name, value, size, 0);
#else
    (void)path; (void)name; (void)value; (void)size;
    errno = ENOTSUP;
    return -1;
#endif
}

int ts_set_attribute_fd(int fd, const char *name, const void *value, size_t size) {
#if defined(__linux__)
    return fsetxattr(fd, name, value, size, 0);
#else
    (void)fd; (void)name; (void)value; (void)size;
    errno = ENOTSUP;
    return -1;
#endif
}

int64_t ts_file_system_type(int fd) {
#if defined(__linux__)
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return -1;
    return (int64_t)info.f_type;
#else
    (void)fd;
    errno = ENOTSUP;
    return -1;
#endif
}

int ts_prefault_for_writing(void *address, size_t length) {
#if defined(__linux__)
    // NB: the number, not the name: C libraries older than glibc 2.35 do not define it, and the
    // kernel answers EINVAL where it does not know it, which callers take as "not here".
    return madvise(address, length, 23 /* MADV_POPULATE_WRITE */);
#else
    (void)address; (void)length;
    errno = ENOTSUP;
    return -1;
#endif
}

int ts_rename_noreplace(int directory, const char *from, const char *to) {
#if defined(__linux__)
    // renameat2(2) with RENAME_NOREPLACE (1); called through syscall(2) so older C libraries work.
    return (int)syscall(SYS_renameat2, directory, from, directory, to, 1);
#elif defined(__APPLE__)
    return renameatx_np(directory, from, directory, to, RENAME_EXCL);
#else
    (void)directory; (void)from; (void)to;
    errno = ENOSYS;
    return -1;
#endif
}

#if defined(__linux__)
#include <limits.h>
#include <linux/futex.h>
#include <time.h>
#endif

#include <sched.h>

// The calling thread's cooperative wait: set only on the threads of the tests' simulation.
static _Thread_local void (*cooperative_wait)(void *);
_Thread_local void *ts_cooperative_wait_context_value;

void ts_set_cooperative_wait(void (*wait)(void *), void *context) {
    cooperative_wait = wait;
    ts_cooperative_wait_context_value = context;
}

// Marks the mutex waited for, so that its holder wakes a sleeper when it unlocks, and sleeps until
// the exchange finds it unlocked. It is then held marked 2: at worst one wake-up too many. A
// simulated thread lets the others run instead of sleeping, then looks again.
// See: man 2 futex (FUTEX_WAIT returns at once, EAGAIN, when the word is no longer 2).
void ts_mutex_lock_contended(uint32_t *word) {
    if (cooperative_wait) {
        while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) cooperative_wait(ts_cooperative_wait_context_value);
        return;
    }
    while (__atomic_exchange_n(word, 2, __ATOMIC_ACQUIRE) != 0) {
#if defined(__linux__)
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
#else
        sched_yield();
#endif
    }
}

void ts_mutex_wake(uint32_t *word) {
#if defined(__linux__)
    syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
    (void)word;
#endif
}

// The change signal in a lock file's shared page: a 32-bit counter writers bump after each
// commit, and a flag a thread (in any process) raises before it sleeps on the counter. A writer
// that finds the flag raised lowers it and wakes every sleeper, which raise it again before they
// sleep again; a writer that finds it lowered makes no system call. A sleeper that dies leaves the
// flag raised, which costs the next writer one wasted wake-up, not every writer forever (a count
// of sleepers would). Sequentially consistent on both sides, so no sleeper misses a bump: it
// raises the flag before it checks the counter, and the writer bumps before it checks the flag.
void ts_change_signal(void *counter, void *sleepers) {
    atomic_fetch_add_explicit((_Atomic uint32_t *)counter, 1, memory_order_seq_cst);
    if (atomic_load_explicit((_Atomic uint32_t *)sleepers, memory_order_seq_cst) == 0) return;
    if (atomic_exchange_explicit((_Atomic uint32_t *)sleepers, 0, memory_order_seq_cst) == 0) return;
#if defined(__linux__)
    syscall(SYS_futex, counter, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#endif
}

void ts_change_wake(void *counter) {
#if defined(__linux__)
    syscall(SYS_futex, counter, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
#else
    (void)counter;
#endif
}

uint32_t ts_change_counter(const void *counter) {
    return atomic_load_explicit((const _Atomic uint32_t *)counter, memory_order_seq_cst);
}

int ts_change_wait(void *counter, void *sleepers, uint32_t seen, int timeout_ms) {
#if defined(__linux__)
    atomic_store_explicit((_Atomic uint32_t *)sleepers, 1, memory_order_seq_cst);
    if (atomic_load_explicit((_Atomic uint32_t *)counter, memory_order_seq_cst) != seen) return 0;
    struct timespec timeout = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};
    return (int)syscall(SYS_futex, counter, FUTEX_WAIT, seen, &timeout, NULL, 0);
#else
    (void)counter; (void)sleepers; (void)seen; (void)timeout_ms;
    errno = ENOSYS;
    return -1;
#endif
}

static _Atomic int ts_lock_hold_recording_flag;

void ts_set_lock_hold_recording(int on) {
    atomic_store_explicit(&ts_lock_hold_recording_flag, on, memory_order_relaxed);
}

int ts_lock_hold_recording(void) {
    return atomic_load_explicit(&ts_lock_hold_recording_flag, memory_order_relaxed);
}

// The commit lock on Linux: a robust, process-shared pthread mutex in the lock file's shared page.
// Robust: when its owner dies, the next `pthread_mutex_lock` returns EOWNERDEAD instead of waiting
// forever, and the new owner repairs what the dead one left, then calls `pthread_mutex_consistent`.
// Error-checking: a thread that locks it twice gets EDEADLK instead of hanging.
#if defined(__linux__)
#include <pthread.h>

size_t ts_shared_mutex_size(void) { return sizeof(pthread_mutex_t); }

int ts_shared_mutex_init(void *memory) {
    pthread_mutexattr_t attributes;
    int result = pthread_mutexattr_init(&attributes);
    if (result != 0) return result;
    result = pthread_mutexattr_setpshared(&attributes, PTHREAD_PROCESS_SHARED);
    if (result == 0) result = pthread_mutexattr_setrobust(&attributes, PTHREAD_MUTEX_ROBUST);
    if (result == 0) result = pthread_mutexattr_settype(&attributes, PTHREAD_MUTEX_ERRORCHECK);
    if (result == 0) result = pthread_mutex_init((pthread_mutex_t *)memory, &attributes);
    pthread_mutexattr_destroy(&attributes);
    return result;
}

int ts_shared_mutex_lock(void *memory) { return pthread_mutex_lock((pthread_mutex_t *)memory); }
int ts_shared_mutex_consistent(void *memory) { return pthread_mutex_consistent((pthread_mutex_t *)memory); }
int ts_shared_mutex_unlock(void *memory) { return pthread_mutex_unlock((pthread_mutex_t *)memory); }
#else
// No robust mutex: the commit lock is `flock` (see CommitLock.swift).
size_t ts_shared_mutex_size(void) { return 0; }
int ts_shared_mutex_init(void *memory) { (void)memory; return ENOTSUP; }
int ts_shared_mutex_lock(void *memory) { (void)memory; return ENOTSUP; }
int ts_shared_mutex_consistent(void *memory) { (void)memory; return ENOTSUP; }
int ts_shared_mutex_unlock(void *memory) { (void)memory; return ENOTSUP; }
#endif

int ts_errno_owner_dead(void) { return EOWNERDEAD; }

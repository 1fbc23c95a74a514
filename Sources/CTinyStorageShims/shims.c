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
#endif

uint64_t ts_atomic_load_u64(const void *address) {
    return atomic_load_explicit((const _Atomic uint64_t *)address, memory_order_acquire);
}

void ts_atomic_store_u64(void *address, uint64_t value) {
    atomic_store_explicit((_Atomic uint64_t *)address, value, memory_order_release);
}

uint64_t ts_atomic_fetch_add_u64(void *address, uint64_t delta) {
    return atomic_fetch_add_explicit((_Atomic uint64_t *)address, delta, memory_order_acq_rel);
}

bool ts_atomic_compare_exchange_u64(void *address, uint64_t expected, uint64_t desired) {
    return atomic_compare_exchange_strong_explicit(
        (_Atomic uint64_t *)address, &expected, desired, memory_order_acq_rel, memory_order_acquire);
}

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

uint32_t ts_inotify_mask_modify_and_moves(void) {
#if defined(__linux__)
    return IN_MODIFY | IN_MOVED_TO | IN_CREATE | IN_DELETE_SELF | IN_MOVE_SELF | IN_ATTRIB;
#else
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

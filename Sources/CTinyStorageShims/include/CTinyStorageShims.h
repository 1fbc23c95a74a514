#ifndef CTINYSTORAGE_SHIMS_H
#define CTINYSTORAGE_SHIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Atomic 64-bit accesses on memory shared between processes (a MAP_SHARED mapping of the lock file).
// Swift's Synchronization.Atomic cannot point at foreign memory and needs macOS 15 / iOS 18.
// NB: inline, so Swift compiles them into its callers: a cached read makes one of these, and a
// call to another object file cost it about as much as the load itself.
static inline uint64_t ts_atomic_load_u64(const void *address) {
    return __atomic_load_n((const uint64_t *)address, __ATOMIC_ACQUIRE);
}

static inline void ts_atomic_store_u64(void *address, uint64_t value) {
    __atomic_store_n((uint64_t *)address, value, __ATOMIC_RELEASE);
}

// NB: sequentially consistent, not only acquire-release (the same instruction on x86-64 and
// arm64): a commit's publish ends with one, and `DataFile.requestBackgroundSync` relies on it
// being ordered before the commit's next sequentially consistent load.
static inline uint64_t ts_atomic_fetch_add_u64(void *address, uint64_t delta) {
    return __atomic_fetch_add((uint64_t *)address, delta, __ATOMIC_SEQ_CST);
}

// Sequentially consistent load and store, and fence: for the few places where a store must be
// ordered before a later load of another word (see `DataFile.requestBackgroundSync`).
static inline uint64_t ts_atomic_load_seq_cst_u64(const void *address) {
    return __atomic_load_n((const uint64_t *)address, __ATOMIC_SEQ_CST);
}

static inline void ts_atomic_store_seq_cst_u64(void *address, uint64_t value) {
    __atomic_store_n((uint64_t *)address, value, __ATOMIC_SEQ_CST);
}

static inline void ts_atomic_fence_seq_cst(void) {
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

static inline bool ts_atomic_compare_exchange_u64(void *address, uint64_t expected, uint64_t desired) {
    return __atomic_compare_exchange_n(
        (uint64_t *)address, &expected, desired, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

// The in-process mutex of `Locked` (off Apple platforms): a 32-bit word, 0 unlocked, 1 locked,
// 2 locked and perhaps waited for (Drepper's "Futexes Are Tricky", mutex 3). Uncontended, taking
// and releasing it is one atomic instruction each, inline in the caller; only a thread that finds
// it taken, and the unlock that must wake it, call into shims.c (Linux futex; a yield loop
// elsewhere). NB: glibc's pthread_mutex_lock/unlock are two calls through the PLT that also check
// the mutex kind and keep its owner and user count: a cached read spent about a fifth of its time
// in them.
void ts_mutex_lock_contended(uint32_t *word);
void ts_mutex_wake(uint32_t *word);

// The calling thread's cooperative wait (see `CooperativeWaiting` in Swift): when set, a thread
// that finds `Locked`'s mutex taken calls `wait(context)` until it is free, instead of sleeping.
// Set only by the tests' deterministic simulation, for its own threads; NULL everywhere else.
void ts_set_cooperative_wait(void (*wait)(void *), void *context);
extern _Thread_local void *ts_cooperative_wait_context_value;
// Inline: asked at every publish, where a call into shims.c cost a commit about 5 ns.
static inline void *ts_cooperative_wait_context(void) { return ts_cooperative_wait_context_value; }

static inline void ts_mutex_lock(uint32_t *word) {
    uint32_t expected = 0;
    if (!__atomic_compare_exchange_n(word, &expected, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        ts_mutex_lock_contended(word);
    }
}

static inline void ts_mutex_unlock(uint32_t *word) {
    if (__atomic_exchange_n(word, 0, __ATOMIC_RELEASE) == 2) ts_mutex_wake(word);
}

// The word's state now (0, 1 or 2, as above): for tests that must see a thread wait for the lock.
static inline uint32_t ts_mutex_state(const uint32_t *word) {
    return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

// CRC-32C (Castagnoli). Uses the SSE4.2 / ARMv8 CRC instructions when the CPU has them, a
// slicing-by-8 table otherwise; both produce the same value. Pass 0 as `crc` to start.
uint32_t ts_crc32c(uint32_t crc, const void *bytes, size_t count);
uint32_t ts_crc32c_portable(uint32_t crc, const void *bytes, size_t count);

// Whether UTF-8 `bytes` hold a byte JSON escapes in a string: below 0x20, a quote or a backslash.
// SSE2 on x86-64; elsewhere (and as the reference the tests compare with) eight bytes at a time.
bool ts_json_needs_escape(const void *bytes, size_t count);
bool ts_json_needs_escape_portable(const void *bytes, size_t count);

// Linux change monitoring: thin wrappers so Swift needs no Glibc module for inotify. The
// descriptor is non-blocking and close-on-exec.
// Return -1 and set errno on other platforms.
int ts_inotify_init(void);
int ts_inotify_add_watch(int fd, const char *path, uint32_t mask);
int ts_inotify_rm_watch(int fd, int wd);
// The events a store's folder is watched for: names created, moved or removed, attributes
// changed (a file made readable again), the folder itself gone. Not writes: see shims.c.
uint32_t ts_inotify_mask_names_and_attributes(void);
// What an inotify event's mask means: 0 a file was written, 1 a name was created, moved or
// removed, 2 the watched directory itself is gone (the watch ended), 3 events were dropped.
int ts_inotify_classify(uint32_t mask);

// Apple semantics on Linux: inotify standing in for kqueue's vnode events. The mask that watches
// a folder (`folder` true) or a file for what EVFILT_VNODE reports, and an event's mask as vnode
// flags: 1 write, 2 extend, 4 attrib, 8 link, 16 rename, 32 delete, 64 revoke (the watch ended).
// 0 elsewhere.
uint32_t ts_inotify_mask_vnode(bool folder);
uint32_t ts_inotify_vnode_flags(uint32_t mask, bool folder);

// Linux's O_PATH (a descriptor usable only as the base of *at calls, needing search permission
// only), which Swift's Glibc module does not export. 0 elsewhere.
int ts_open_path_flag(void);

// Extended attributes, for the stand-in for Apple's data protection classes on Linux
// (SimulatedDataProtection.swift): Linux lgetxattr(2) and lsetxattr(2) on `path` itself (a symbolic
// link there is not followed), fsetxattr(2) on an open file. The value's length (get) or 0 (set),
// or -1 with errno; -1 with ENOTSUP elsewhere, where nothing calls them.
long ts_get_attribute(const char *path, const char *name, void *value, size_t size);
int ts_set_attribute(const char *path, const char *name, const void *value, size_t size);
int ts_set_attribute_fd(int fd, const char *name, const void *value, size_t size);

// The type of the file system holding the file open on `fd` (Linux `fstatfs(2)`'s `f_type`), or
// -1 with errno; -1 with ENOTSUP elsewhere.
int64_t ts_file_system_type(int fd);

// Faults in the pages of `length` bytes at `address` (page-aligned, in a shared mapping) as a write
// would, without changing a byte: Linux madvise(MADV_POPULATE_WRITE), kernel 5.14 and later. 0, or
// -1 with errno (EINVAL where the kernel has no such advice, EFAULT for pages past the file's end);
// -1 with ENOTSUP elsewhere.
int ts_prefault_for_writing(void *address, size_t length);

// Renames `from` to `to` inside `directory` only if `to` does not exist (EEXIST otherwise):
// Linux renameat2(RENAME_NOREPLACE), Apple renameatx_np(RENAME_EXCL). -1 and errno on failure;
// EINVAL or ENOTSUP when the file system cannot do it.
int ts_rename_noreplace(int directory, const char *from, const char *to);

// The change signal in a lock file's shared page (Linux futex; elsewhere the counter moves but
// nobody sleeps on it). `ts_change_signal` bumps the counter and wakes sleepers, with a system
// call only when some thread, in any process, raised the `sleepers` flag since the last wake-up.
// `ts_change_wait` raises the flag and sleeps while the counter is `seen`, at most `timeout_ms`;
// -1 with errno (ETIMEDOUT, EAGAIN, EINTR) or ENOSYS.
void ts_change_signal(void *counter, void *sleepers);
uint32_t ts_change_counter(const void *counter);
// Wakes the sleepers without moving the counter (they look, see nothing new, and sleep again).
void ts_change_wake(void *counter);
int ts_change_wait(void *counter, void *sleepers, uint32_t seen, int timeout_ms);

// Whether the time each cross-process lock is held is being recorded (benchmarks only): one
// relaxed load per commit when off.
void ts_set_lock_hold_recording(int on);
int ts_lock_hold_recording(void);

// Per-thread counts of the store locks the calling thread holds (lock 0: the engine's in-process
// lock; lock 1: the cross-process lock). Used to check, in tests, that no logger, user closure or
// flush runs while one is held.
void ts_lock_witness_enter(int lock);
void ts_lock_witness_leave(int lock);
int ts_lock_witness_depth(int lock);

// The commit lock on Linux: a robust (PTHREAD_MUTEX_ROBUST), process-shared, error-checking
// pthread mutex placed in shared memory (the lock file's page). `ts_shared_mutex_lock` returns 0,
// EOWNERDEAD (the lock is taken, its previous owner died holding it: repair, then call
// `ts_shared_mutex_consistent`), or another error number. Every call returns ENOTSUP elsewhere;
// `ts_shared_mutex_size` is then 0.
size_t ts_shared_mutex_size(void);
int ts_shared_mutex_init(void *memory);
int ts_shared_mutex_lock(void *memory);
int ts_shared_mutex_consistent(void *memory);
int ts_shared_mutex_unlock(void *memory);
int ts_errno_owner_dead(void);

#endif

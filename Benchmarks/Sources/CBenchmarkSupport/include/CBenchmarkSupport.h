#ifndef CBENCHMARK_SUPPORT_H
#define CBENCHMARK_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

// Floors for the benchmarks, written for them: nothing here is the library's code.

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as the store checksums its records.
// Uses the CPU's CRC-32C instruction when it has one (SSE4.2 on x86-64, the CRC extension on
// ARMv8), a byte-at-a-time table otherwise. Pass 0 as `crc` to start; the result can be passed
// back in to continue over more bytes.
uint32_t bench_crc32c(uint32_t crc, const void *bytes, size_t count);
// The same value computed with the table only, to check the fast path against.
uint32_t bench_crc32c_table(uint32_t crc, const void *bytes, size_t count);
// 1 when bench_crc32c uses a CPU instruction, 0 when it falls back to the table.
int bench_crc32c_is_hardware(void);

// Initializes a robust, process-shared pthread mutex at `memory` (which must be at least
// bench_mutex_size() bytes, suitably aligned, typically in a MAP_SHARED file mapping).
// Returns 0, or an errno value; ENOTSUP where robust mutexes do not exist (Apple platforms).
int bench_robust_mutex_init(void *memory);
size_t bench_mutex_size(void);

// The uncontended path of a lock on a 32-bit word (0 free, 1 held, 2 held and waited for), as
// the store's in-process lock is on Linux: one compare-and-swap to take it, one exchange to
// release it. For the floor only: a contended take spins (the floor never contends).
static inline void bench_word_lock(uint32_t *word) {
    uint32_t expected = 0;
    while (!__atomic_compare_exchange_n(word, &expected, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) expected = 0;
}
static inline uint32_t bench_word_unlock(uint32_t *word) { return __atomic_exchange_n(word, 0, __ATOMIC_RELEASE); }

// Publishes `value` to other threads and processes that read `word` (in a shared mapping) with
// an acquire load: a release store, so the bytes written before it are seen before it. On
// x86-64 this compiles to a plain store; on ARMv8 to `stlr`.
static inline void bench_store_release(uint64_t *word, uint64_t value) {
    __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

#endif

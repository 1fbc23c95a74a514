#include "CBenchmarkSupport.h"

#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
#include <arm_acle.h>
#endif

// The table for one byte at a time: entry i is the CRC of byte i, computed bit by bit.
static uint32_t crc_table[256];
static int crc_table_ready = 0;

static void build_table(void) {
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t crc = byte;
        for (int bit = 0; bit < 8; bit++) {
            crc = (crc & 1) ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
        }
        crc_table[byte] = crc;
    }
    __atomic_store_n(&crc_table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t bench_crc32c_table(uint32_t crc, const void *bytes, size_t count) {
    // NB: building the table twice from two threads is harmless: both write the same values.
    if (!__atomic_load_n(&crc_table_ready, __ATOMIC_ACQUIRE)) build_table();
    const uint8_t *p = bytes;
    crc = ~crc;
    while (count--) crc = crc_table[(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_instruction(uint32_t crc, const uint8_t *p, size_t count) {
    uint64_t wide = ~crc;
    for (; count >= 8; p += 8, count -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        wide = _mm_crc32_u64(wide, word);
    }
    uint32_t narrow = (uint32_t)wide;
    while (count--) narrow = _mm_crc32_u8(narrow, *p++);
    return ~narrow;
}

int bench_crc32c_is_hardware(void) { return __builtin_cpu_supports("sse4.2") ? 1 : 0; }
#elif defined(__aarch64__) && defined(__ARM_FEATURE_CRC32)
static uint32_t crc32c_instruction(uint32_t crc, const uint8_t *p, size_t count) {
    crc = ~crc;
    for (; count >= 8; p += 8, count -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __crc32cd(crc, word);
    }
    while (count--) crc = __crc32cb(crc, *p++);
    return ~crc;
}

int bench_crc32c_is_hardware(void) { return 1; }
#else
int bench_crc32c_is_hardware(void) { return 0; }
#endif

uint32_t bench_crc32c(uint32_t crc, const void *bytes, size_t count) {
#if defined(__x86_64__) || (defined(__aarch64__) && defined(__ARM_FEATURE_CRC32))
    if (bench_crc32c_is_hardware()) return crc32c_instruction(crc, bytes, count);
#endif
    return bench_crc32c_table(crc, bytes, count);
}

#include "CTinyStorageShims.h"

#include <pthread.h>
#include <string.h>

// CRC-32C, reflected polynomial 0x82F63B78. The table path is the portable reference; the
// hardware paths must agree with it bit for bit (the unit tests check known vectors).

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = table[0][n];
        for (int s = 1; s < 8; s++) {
            c = table[0][c & 0xFF] ^ (c >> 8);
            table[s][n] = c;
        }
    }
}

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t n) {
    pthread_once(&table_once, build_table);
    crc = ~crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
#endif
        uint32_t lo = (uint32_t)word ^ crc, hi = (uint32_t)(word >> 32);
        crc = table[7][lo & 0xFF] ^ table[6][(lo >> 8) & 0xFF] ^ table[5][(lo >> 16) & 0xFF] ^
              table[4][lo >> 24] ^ table[3][hi & 0xFF] ^ table[2][(hi >> 8) & 0xFF] ^
              table[1][(hi >> 16) & 0xFF] ^ table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) crc = table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

#if defined(__x86_64__)
#include <cpuid.h>

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n) {
    uint64_t c = ~crc;
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    // NB: the last 0-7 bytes in at most three steps rather than one per byte (a record's
    // length field and most records' last bytes).
    if (n & 4) {
        uint32_t word;
        memcpy(&word, p, 4);
        c32 = __builtin_ia32_crc32si(c32, word);
        p += 4;
    }
    if (n & 2) {
        uint16_t half;
        memcpy(&half, p, 2);
        c32 = __builtin_ia32_crc32hi(c32, half);
        p += 2;
    }
    if (n & 1) c32 = __builtin_ia32_crc32qi(c32, *p);
    return ~c32;
}

static int has_sse42(void) {
    static int cached = -1;
    int value = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (value < 0) {
        unsigned a, b, c, d;
        value = (__get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2)) ? 1 : 0;
        __atomic_store_n(&cached, value, __ATOMIC_RELAXED);
    }
    return value;
}

uint32_t ts_crc32c(uint32_t crc, const void *bytes, size_t count) {
    if (has_sse42()) return crc32c_sse42(crc, (const uint8_t *)bytes, count);
    return crc32c_table(crc, (const uint8_t *)bytes, count);
}

#elif defined(__aarch64__)
#include <arm_acle.h>
#if defined(__APPLE__)
#include <sys/sysctl.h>
#elif defined(__linux__)
#include <sys/auxv.h>
#endif

// NB: compiled for the CRC instructions whatever the target's baseline says (an iOS build's
// default CPU does not promise them, so __ARM_FEATURE_CRC32 is not defined there), and called
// only where the CPU reports them: every iPhone, Watch and Mac that runs iOS 17, watchOS 10 or
// macOS 14 has them; an Apple TV HD (A8) running tvOS 17 does not.
__attribute__((target("crc"))) static uint32_t crc32c_arm(uint32_t crc, const uint8_t *p, size_t count) {
    uint32_t c = ~crc;
    while (count >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __crc32cd(c, word);
        p += 8;
        count -= 8;
    }
    if (count & 4) {
        uint32_t word;
        memcpy(&word, p, 4);
        c = __crc32cw(c, word);
        p += 4;
    }
    if (count & 2) {
        uint16_t half;
        memcpy(&half, p, 2);
        c = __crc32ch(c, half);
        p += 2;
    }
    if (count & 1) c = __crc32cb(c, *p);
    return ~c;
}

// Whether this CPU has the CRC instructions: Apple's `hw.optional.armv8_crc32` ("Determining
// instruction set characteristics", sysctlbyname), Linux's HWCAP_CRC32.
static int has_crc(void) {
#if defined(__ARM_FEATURE_CRC32)
    return 1;
#else
    static int cached = -1;
    int value = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (value < 0) {
#if defined(__APPLE__)
        int present = 0;
        size_t size = sizeof(present);
        value = sysctlbyname("hw.optional.armv8_crc32", &present, &size, NULL, 0) == 0 && present != 0;
#elif defined(__linux__) && defined(AT_HWCAP)
        value = (getauxval(AT_HWCAP) & (1UL << 7)) != 0;  // HWCAP_CRC32
#else
        value = 0;
#endif
        __atomic_store_n(&cached, value, __ATOMIC_RELAXED);
    }
    return value;
#endif
}

uint32_t ts_crc32c(uint32_t crc, const void *bytes, size_t count) {
    if (has_crc()) return crc32c_arm(crc, (const uint8_t *)bytes, count);
    return crc32c_table(crc, (const uint8_t *)bytes, count);
}

#else

uint32_t ts_crc32c(uint32_t crc, const void *bytes, size_t count) {
    return crc32c_table(crc, (const uint8_t *)bytes, count);
}

#endif

// Exposed for tests so the portable path is checked on machines whose CPU takes the fast path.
uint32_t ts_crc32c_portable(uint32_t crc, const void *bytes, size_t count) {
    return crc32c_table(crc, (const uint8_t *)bytes, count);
}

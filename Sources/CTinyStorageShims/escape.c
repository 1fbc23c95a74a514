#include "CTinyStorageShims.h"

#include <string.h>

// Whether a string's UTF-8 holds a byte JSON must escape inside a string: a control character
// (below 0x20), a quote or a backslash. Most stored strings hold none, and then their JSON is
// their bytes in quotes; this scan is most of what encoding one costs.

// Eight bytes at a time, no branch but the loop's. A word has a zero byte when
// (w - 0x01..01) & ~w & 0x80..80 is not zero; a byte below 0x20 is a zero byte of w & 0xE0..E0,
// a quote or backslash one of w ^ 0x22..22 or w ^ 0x5C..5C. The last partial word is read again
// as the last eight bytes, overlapping the one before.
static inline uint64_t zero_bytes(uint64_t word) {
    return (word - 0x0101010101010101ull) & ~word & 0x8080808080808080ull;
}

static inline uint64_t escapes(uint64_t word) {
    return zero_bytes(word & 0xE0E0E0E0E0E0E0E0ull) | zero_bytes(word ^ 0x2222222222222222ull) |
           zero_bytes(word ^ 0x5C5C5C5C5C5C5C5Cull);
}

static bool needs_escape_short(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] == '"' || p[i] == '\\') return true;
    }
    return false;
}

bool ts_json_needs_escape_portable(const void *bytes, size_t count) {
    const uint8_t *p = (const uint8_t *)bytes;
    if (count < 8) return needs_escape_short(p, count);
    uint64_t found = 0, word;
    size_t offset = 0;
    for (; offset + 8 <= count; offset += 8) {
        memcpy(&word, p + offset, 8);
        found |= escapes(word);
    }
    if (offset < count) {
        memcpy(&word, p + count - 8, 8);
        found |= escapes(word);
    }
    return found != 0;
}

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>

// Sixteen bytes at a time with SSE2 (every x86-64 CPU has it), two blocks a loop: 107
// instructions for a 111-byte string (callgrind), where one block a loop with three compares
// took 127 and the word scan about 340. Flipping bit 1 (x ^ 0x02) turns a quote (0x22) into 0x20 and
// keeps every byte below 0x20 below it, while no other byte lands at or below 0x20; so one
// unsigned minimum against 0x20 finds controls and quotes together (a byte is at most 0x20 when
// min(byte, 0x20) equals it), and only the backslash needs a compare of its own.
static inline __m128i escapes_in_block(const uint8_t *p) {
    const __m128i flip = _mm_set1_epi8(0x02), limit = _mm_set1_epi8(0x20), backslash = _mm_set1_epi8('\\');
    __m128i block = _mm_loadu_si128((const __m128i *)p);
    __m128i flipped = _mm_xor_si128(block, flip);
    __m128i controls_and_quotes = _mm_cmpeq_epi8(_mm_min_epu8(flipped, limit), flipped);
    return _mm_or_si128(controls_and_quotes, _mm_cmpeq_epi8(block, backslash));
}

bool ts_json_needs_escape(const void *bytes, size_t count) {
    const uint8_t *p = (const uint8_t *)bytes;
    if (count < 16) return ts_json_needs_escape_portable(p, count);
    __m128i found = _mm_setzero_si128();
    size_t offset = 0;
    for (; offset + 32 <= count; offset += 32) {
        found = _mm_or_si128(found, _mm_or_si128(escapes_in_block(p + offset), escapes_in_block(p + offset + 16)));
    }
    if (offset + 16 <= count) {
        found = _mm_or_si128(found, escapes_in_block(p + offset));
        offset += 16;
    }
    // The last partial block, read as the last sixteen bytes, overlapping the one before.
    if (offset < count) found = _mm_or_si128(found, escapes_in_block(p + count - 16));
    return _mm_movemask_epi8(found) != 0;
}

#else

bool ts_json_needs_escape(const void *bytes, size_t count) { return ts_json_needs_escape_portable(bytes, count); }

#endif

#include "CCRC32C.h"

#include <pthread.h>
#include <string.h>

// Portable path: slicing-by-8 over tables built once (pthread_once, so concurrent first calls are safe).
// The tables are built at run time rather than spelled out, so the polynomial is the only constant to check.

#define JB_CRC32C_POLY 0x82F63B78u

static uint32_t jb_table[8][256];
static pthread_once_t jb_once = PTHREAD_ONCE_INIT;
static int jb_hardware = 0;

#if defined(__x86_64__) || defined(__i386__)
#define JB_HAVE_SSE42_PATH 1
#include <nmmintrin.h>
#endif

static void jb_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++) {
            crc = (crc & 1u) ? (crc >> 1) ^ JB_CRC32C_POLY : crc >> 1;
        }
        jb_table[0][n] = crc;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t crc = jb_table[0][n];
        for (int k = 1; k < 8; k++) {
            crc = jb_table[0][crc & 0xFFu] ^ (crc >> 8);
            jb_table[k][n] = crc;
        }
    }
#ifdef JB_HAVE_SSE42_PATH
    __builtin_cpu_init();
    jb_hardware = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

static inline uint64_t jb_load_le64(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static uint32_t jb_crc32c_table(uint32_t crc, const unsigned char *p, size_t length) {
    while (length > 0 && ((uintptr_t)p & 7u) != 0) {
        crc = jb_table[0][(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
        length--;
    }
    while (length >= 8) {
        uint64_t word = jb_load_le64(p) ^ crc;
        crc = jb_table[7][word & 0xFFu] ^ jb_table[6][(word >> 8) & 0xFFu] ^ jb_table[5][(word >> 16) & 0xFFu] ^
              jb_table[4][(word >> 24) & 0xFFu] ^ jb_table[3][(word >> 32) & 0xFFu] ^
              jb_table[2][(word >> 40) & 0xFFu] ^ jb_table[1][(word >> 48) & 0xFFu] ^ jb_table[0][word >> 56];
        p += 8;
        length -= 8;
    }
    while (length > 0) {
        crc = jb_table[0][(crc ^ *p++) & 0xFFu] ^ (crc >> 8);
        length--;
    }
    return crc;
}

#ifdef JB_HAVE_SSE42_PATH
__attribute__((target("sse4.2"))) static uint32_t jb_crc32c_sse42(uint32_t crc, const unsigned char *p,
                                                                   size_t length) {
    while (length > 0 && ((uintptr_t)p & 7u) != 0) {
        crc = _mm_crc32_u8(crc, *p++);
        length--;
    }
#if defined(__x86_64__)
    uint64_t crc64 = crc;
    while (length >= 8) {
        uint64_t word;
        memcpy(&word, p, sizeof word);
        crc64 = _mm_crc32_u64(crc64, word);
        p += 8;
        length -= 8;
    }
    crc = (uint32_t)crc64;
#endif
    while (length >= 4) {
        uint32_t word;
        memcpy(&word, p, sizeof word);
        crc = _mm_crc32_u32(crc, word);
        p += 4;
        length -= 4;
    }
    while (length > 0) {
        crc = _mm_crc32_u8(crc, *p++);
        length--;
    }
    return crc;
}
#endif

uint32_t jb_crc32c(uint32_t crc, const void *data, size_t length) {
    pthread_once(&jb_once, jb_init);
    const unsigned char *p = (const unsigned char *)data;
#ifdef JB_HAVE_SSE42_PATH
    if (jb_hardware) {
        return ~jb_crc32c_sse42(~crc, p, length);
    }
#endif
    return ~jb_crc32c_table(~crc, p, length);
}

uint32_t jb_crc32c_portable(uint32_t crc, const void *data, size_t length) {
    pthread_once(&jb_once, jb_init);
    return ~jb_crc32c_table(~crc, (const unsigned char *)data, length);
}

int jb_crc32c_is_hardware(void) {
    pthread_once(&jb_once, jb_init);
    return jb_hardware;
}

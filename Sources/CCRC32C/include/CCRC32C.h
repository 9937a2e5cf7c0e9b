#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of `length` bytes at `data`.
///
/// `crc` is the value returned for the preceding bytes (0 to start), so a checksum can be
/// computed in pieces: `jb_crc32c(jb_crc32c(0, a, n), b, m)` equals the checksum of `a` then `b`.
/// Uses the SSE4.2 `crc32` instruction when the CPU has it, a slicing-by-8 table otherwise.
uint32_t jb_crc32c(uint32_t crc, const void *data, size_t length);

/// The same checksum, always computed with the portable table (for tests and comparisons).
uint32_t jb_crc32c_portable(uint32_t crc, const void *data, size_t length);

/// 1 when `jb_crc32c` uses a hardware instruction on this machine, 0 when it uses the table.
int jb_crc32c_is_hardware(void);

#ifdef __cplusplus
}
#endif

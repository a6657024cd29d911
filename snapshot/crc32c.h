/*
 * crc32c.h - the checksum of a .cmh file's bytes and of each flight-record payload
 * (docs/FORMAT.md): CRC-32C, the Castagnoli polynomial (iSCSI, ext4, Btrfs, SCTP).
 *
 * Why CRC-32C and not zlib's crc32 (CRC-32, the one Debian's zlib already gives us): x86-64
 * has an instruction for CRC-32C (SSE4.2's crc32, since 2008), so the recorder's hot path pays
 * about a nanosecond per 8 bytes for it, and a reader checks gigabytes a second, where zlib's
 * table-driven CRC-32 runs several times slower; the Castagnoli polynomial also detects more
 * of the errors a 32-bit check can (all bursts up to 32 bits, every odd number of flipped bits,
 * a larger minimum distance at the lengths we use).  Any other reader can compute it: it is
 * Python's crc32c package, Go's hash/crc32.Castagnoli, Rust's crc32c crate.
 *
 * Convention as zlib's: start from 0, feed the bytes in any number of pieces, each call
 * returning the checksum so far.  cmh_crc32c(0, "123456789", 9) == 0xe3069283.  Thread-safe.
 */
#ifndef CMH_CRC32C_H
#define CMH_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t cmh_crc32c(uint32_t crc, const void *buf, size_t len);
/* The same in software only, whatever the CPU has: for the tests, which check both agree. */
uint32_t cmh_crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* Whether this CPU has the instruction (what cmh_crc32c uses), for cmh_crc32c_words' callers to
 * ask once. */
int cmh_crc32c_hw(void);

/* cmh_crc32c(0, w, 8 * n) of n whole words, with the instruction inline where hw (the caller's
 * kept answer of cmh_crc32c_hw()) says the CPU has it: the recorder's hot path sums two or three
 * words an entry (its flight record's tiny records), where the call into cmh_crc32c and its
 * loops for any length took some 50 instructions an entry for 3 crc32. */
static inline uint32_t cmh_crc32c_words(int hw, const uint64_t *w, unsigned n)
{
#if defined(__x86_64__)
    if (hw) {
        uint64_t c = 0xffffffffu;
        for (unsigned i = 0; i < n; i++) __asm__("crc32q %1, %0" : "+r"(c) : "rm"(w[i]));
        return ~(uint32_t)c;
    }
#endif
    return cmh_crc32c(0, w, 8 * (size_t)n);
}

#endif

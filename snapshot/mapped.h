/*
 * mapped.h - reading a snapshot from a private, read-only mapping of its file (load.c): the
 * pages behind the reader's cursor are given back to the kernel as it advances, so peak memory
 * is the model being built, not the model plus the whole file.  Nothing is lost: a page of such
 * a mapping that is touched again is read back from the file.  Never for a buffer in memory,
 * whose pages MADV_DONTNEED would zero.
 */
#ifndef CMH_MAPPED_H
#define CMH_MAPPED_H

#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>

#include "cumemhist/snapshot.h"

#define CMH_DROP_STEP ((size_t)256 << 10) /* give back in steps of 256 KiB (4096 madvise calls for a GiB): what is
                                           * mapped behind the cursor counts in peak memory, ~8% of a 3 MB file */

/* base: page-aligned start of the mapping; pos: the cursor; *dropped: given back so far */
static inline void cmh_drop_behind(const uint8_t *base, size_t pos, size_t *dropped)
{
    size_t a = pos & ~(size_t)4095;
    if (a > *dropped) {
        madvise((void *)(base + *dropped), a - *dropped, MADV_DONTNEED);
        *dropped = a;
    }
}

int cmh_cmh_read_mapped(const void *map, size_t len, unsigned flags, cmh_snapshot *s, char *err, size_t errlen);
int cmh_pickle_read_mapped(const void *map, size_t len, unsigned flags, cmh_snapshot *s, char *err, size_t errlen);

#endif

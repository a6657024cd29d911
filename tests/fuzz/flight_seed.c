/*
 * flight_seed.c FLIGHT OUT - a fuzzing seed from a real flight record: the same header and
 * records, with each extent cut to what was appended to it and packed after the header (a
 * recorder's extents are megabytes of mostly unwritten space, too big for a fuzzer's input).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight_format.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: flight_seed FLIGHT OUT\n");
        return 2;
    }
    FILE *in = fopen(argv[1], "rb");
    if (!in) {
        perror(argv[1]);
        return 1;
    }
    fseek(in, 0, SEEK_END);
    long n = ftell(in);
    rewind(in);
    if (n < CMH_FLIGHT_HEADER) {
        fprintf(stderr, "%s: not a flight record\n", argv[1]);
        return 1;
    }
    unsigned char *m = malloc((size_t)n), *o = calloc(1, (size_t)n);
    if (!m || !o || fread(m, 1, (size_t)n, in) != (size_t)n) return 1;
    fclose(in);
    cmh_flight_header *h = (cmh_flight_header *)(void *)o;
    memcpy(o, m, CMH_FLIGHT_HEADER);
    uint64_t at = CMH_FLIGHT_HEADER;
    for (uint32_t a = 0; a < h->nareas && a < CMH_FLIGHT_EXTENTS; a++) {
        cmh_flight_area *ar = &h->area[a];
        if (ar->dropped || !ar->size || ar->offset + ar->size > (uint64_t)n) continue;
        uint64_t len = ar->cursor < ar->size ? ar->cursor : ar->size;
        if (ar->sealed && ar->sealed < len) len = ar->sealed;
        len = (len + 7) & ~(uint64_t)7;
        memcpy(o + at, m + ar->offset, len);
        ar->offset = at;
        ar->size = len;
        at += len;
    }
    FILE *out = fopen(argv[2], "wb");
    if (!out || fwrite(o, 1, at, out) != at || fclose(out)) {
        perror(argv[2]);
        return 1;
    }
    printf("%s: %llu bytes (from %ld)\n", argv[2], (unsigned long long)at, n);
    return 0;
}

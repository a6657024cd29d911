/*
 * fuzz_pickle.c - libFuzzer target for the PyTorch pickle reader (and what runs on its output:
 * the replay, the what-if allocator model at a small capacity, and the pickle writer).  Build and run with scripts/fuzz.sh.
 * Every input is read twice, with the fast path for trace entries (pickle_fast.c) and by the
 * generic machine alone (CMH_LOAD_GENERIC): the same verdict, the same message, the same model
 * (as the pickle writer puts it), or it aborts.
 */
#include "fuzz_util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/snapshot.h"
#include "cumemhist/whatif.h"

static char *written(const cmh_snapshot *s, size_t *n)
{
    char *buf = NULL;
    FILE *fp = open_memstream(&buf, n);
    if (!fp) abort();
    cmh_pickle_write(s, fp);
    fclose(fp);
    return buf;
}

/* The fast and the generic reading agree on everything the model holds. */
static void same_as_generic(const uint8_t *data, size_t size, int rc, const cmh_snapshot *s, const char *err)
{
    cmh_snapshot g;
    char gerr[256];
    int grc = cmh_pickle_read_ex(data, size, CMH_LOAD_GENERIC, &g, gerr, sizeof gerr);
    if (grc != rc) abort();
    if (rc != CMH_OK) {
        if (strcmp(err, gerr)) abort();
        return;
    }
    if (g.nentries != s->nentries || g.nframes != s->nframes || g.nstacks != s->nstacks || g.ntraces != s->ntraces ||
        g.skipped_entries != s->skipped_entries || g.pt_fields != s->pt_fields || g.strings.n != s->strings.n)
        abort();
    /* field by field: the two may number the entries' sets of rarer fields differently (a fast
     * run the machine took back leaves its sets interned) */
    for (uint32_t i = 0; i < s->nentries; i++) {
        cmh_entry_full x, y;
        cmh_entry_get(s, &s->entries[i], &x);
        cmh_entry_get(&g, &g.entries[i], &y);
        if (memcmp(&x, &y, sizeof x)) abort(); /* cmh_entry_get zeroes the padding */
    }
    size_t na, nb;
    char *a = written(s, &na), *b = written(&g, &nb);
    if (na != nb || memcmp(a, b, na)) abort();
    free(a);
    free(b);
    cmh_snapshot_free(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cmh_snapshot s;
    char err[256];
    int rc = cmh_pickle_read(data, size, &s, err, sizeof err);
    same_as_generic(data, size, rc, &s, err);
    if (rc != CMH_OK) return 0;
    fuzz_whatif_devices(&s, 1);
    FILE *fp = fopen("/dev/null", "wb");
    if (fp) {
        cmh_pickle_write(&s, fp);
        fclose(fp);
    }
    cmh_snapshot_free(&s);
    return 0;
}

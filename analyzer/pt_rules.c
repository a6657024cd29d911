/*
 * pt_rules.c - PyTorch's caching-allocator rules, once (see pt_rules.h).
 */
#include <stdlib.h>
#include <string.h>

#include "cumemhist/analyzer.h"
#include "cumemhist/sites.h"
#include "pt_rules.h"

const char *cmh_pt_setting(const cmh_snapshot *s, const char *key)
{
    for (uint32_t i = 0; i < s->nsettings; i++)
        if (strcmp(cmh_str(s, s->settings[i].key), key) == 0) return cmh_str(s, s->settings[i].value);
    return NULL;
}

void cmh_pt_parse_divisions(cmh_pt_rules *r, const char *text)
{
    for (const char *p = text; p && (p = strchr(p, '"'));) {
        long mib = strtol(p + 1, NULL, 10);
        const char *colon = strchr(p + 1, ':');
        if (!colon) break;
        long d = strtol(colon + 1, NULL, 10);
        if (mib > 0) {
            int idx = 63 - __builtin_clzll((unsigned long long)mib);
            if (idx < 16) r->div[idx] = (int)d;
        }
        p = strchr(colon, ',');
    }
}

void cmh_pt_rules_from_snapshot(const cmh_snapshot *s, cmh_pt_rules *r)
{
    memset(r, 0, sizeof *r);
    const char *ms = cmh_pt_setting(s, "max_split_size");
    long long v = ms ? atoll(ms) : 0; /* -1: unlimited */
    r->max_split = v > 0 ? (uint64_t)v : 0;
    cmh_pt_parse_divisions(r, cmh_pt_setting(s, "roundup_power2_divisions"));
    int assumed;
    r->pad = cmh_allocator_pad(s, &assumed);
}

uint64_t cmh_allocator_pad(const cmh_snapshot *s, int *assumed)
{
    *assumed = 0;
    if (s->source != CMH_SRC_PYTORCH) return 0;
    cmh_pt_rules cuda, npu;
    memset(&cuda, 0, sizeof cuda);
    cmh_pt_parse_divisions(&cuda, cmh_pt_setting(s, "roundup_power2_divisions"));
    npu = cuda;
    npu.pad = CMH_PT_NPU_PAD;
    uint64_t as_npu = 0, as_cuda = 0;
    for (uint32_t i = 0; i < s->nsegments; i++) {
        const cmh_segment *g = &s->segments[i];
        if (g->pool != CMH_POOL_SMALL && !(g->flags & CMH_SEG_EXPANDABLE)) continue; /* may hold a block unsplit */
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s->blocks[g->first_block + k];
            if (b->state != CMH_BLOCK_ACTIVE_ALLOCATED || !b->requested) continue;
            uint64_t c = cmh_pt_round(&cuda, b->requested), n = cmh_pt_round(&npu, b->requested);
            as_npu += b->size == n && n != c;
            as_cuda += b->size == c && n != c;
        }
    }
    if (as_npu || as_cuda) return as_npu > as_cuda ? CMH_PT_NPU_PAD : 0;
    /* no block tells: torch_npu's own Python or library in a stack says an NPU, whose pad is
     * then the common chips' */
    char norm[1024];
    for (uint32_t i = 0; i < s->nframes; i++) {
        const char *file = cmh_str(s, s->frames[i].filename);
        if (!strstr(file, "torch_npu")) continue;
        cmh_sites_normpath(file, norm, sizeof norm);
        if (strstr(norm, "/torch_npu/") || !strncmp(norm, "torch_npu/", 10) || strstr(norm, "libtorch_npu")) {
            *assumed = 1;
            return CMH_PT_NPU_PAD;
        }
    }
    return 0;
}

uint64_t cmh_pt_round(const cmh_pt_rules *r, uint64_t size)
{
    size += r->pad;
    if (size < CMH_PT_MIN_BLOCK) return CMH_PT_MIN_BLOCK;
    int lg = 63 - __builtin_clzll(size);
    int idx = lg > 20 ? lg - 20 : 0;
    if (idx > 15) idx = 15;
    uint64_t d = r->div[idx] > 0 ? (uint64_t)r->div[idx] : 0;
    if (d > 1 && size > CMH_PT_MIN_BLOCK * d) {
        if (!(size & (size - 1))) return size;
        uint64_t floor2 = 1ull << lg;
        uint64_t step = floor2 >> (63 - __builtin_clzll(d));
        if (!step) return floor2 << 1;
        uint64_t f = size & ~(step - 1);
        return f == size ? size : f + step;
    }
    return (size + CMH_PT_MIN_BLOCK - 1) / CMH_PT_MIN_BLOCK * CMH_PT_MIN_BLOCK;
}

int cmh_pt_should_split(const cmh_pt_rules *r, int pool, int expandable, uint64_t rounded, uint64_t remaining)
{
    if (pool == CMH_POOL_SMALL || expandable) return remaining >= CMH_PT_MIN_BLOCK;
    return (!r->max_split || rounded < r->max_split) && remaining > CMH_PT_SMALL_SIZE;
}

uint64_t cmh_pt_segment_size(uint64_t rounded)
{
    if (rounded <= CMH_PT_SMALL_SIZE) return CMH_PT_SMALL_BUFFER;
    if (rounded < CMH_PT_MIN_LARGE_ALLOC) return CMH_PT_LARGE_BUFFER;
    return (rounded + CMH_PT_ROUND_LARGE - 1) / CMH_PT_ROUND_LARGE * CMH_PT_ROUND_LARGE;
}

/*
 * pt_rules.c - PyTorch's caching-allocator rules, once (see pt_rules.h).
 */
#include <stdlib.h>
#include <string.h>

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
}

uint64_t cmh_pt_round(const cmh_pt_rules *r, uint64_t size)
{
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

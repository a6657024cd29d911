/*
 * model.c - building and freeing the in-memory snapshot (include/cumemhist/snapshot.h).
 *
 * Every table grows by doubling.  Strings and stacks are interned through open-addressing hash
 * tables so that a snapshot holds each distinct string and stack once, whichever codec filled it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/snapshot.h"
#include "grow.h"
#include "oatab.h"

static const char *const action_names[CMH_ACT_COUNT] = {
    "alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map", "segment_unmap", "oom", "snapshot", "mark", "pool_sample",
};

static const char *const kind_names[CMH_KIND_COUNT] = {"device", "pitch", "managed", "async", "vmm", "host"};

/* One clone suffix ending at n: its start, or n when there is none. */
static size_t clone_suffix(const char *name, size_t n)
{
    static const char *const tags[] = {".isra", ".constprop", ".part", ".cold", ".lto_priv", ".localalias", ".llvm", ".clone"};
    size_t d = n;
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9') d--; /* a number: ".isra.0" */
    size_t end = d < n && d > 0 && name[d - 1] == '.' ? d - 1 : n;
    for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
        size_t l = strlen(tags[i]);
        if (end > l && !strncmp(name + end - l, tags[i], l)) return end - l;
    }
    return n;
}

size_t cmh_name_base_len(const char *name)
{
    size_t n = strlen(name);
    for (;;) { /* a demangled name's " [clone .isra.0]", perhaps several */
        if (n > 9 && name[n - 1] == ']') {
            const char *o = NULL;
            for (size_t i = n; i-- > 0;)
                if (name[i] == '[') {
                    o = name + i;
                    break;
                }
            if (o && o > name && o[-1] == ' ' && !strncmp(o, "[clone .", 8)) {
                n = (size_t)(o - name) - 1;
                continue;
            }
        }
        size_t k = clone_suffix(name, n);
        if (k == n || k == 0) return n;
        n = k;
    }
}

int cmh_strtab_intern_bytes(cmh_strtab *t, const char *str, size_t len, uint32_t *id)
{
    size_t nul = 0;
    for (const char *p = str; (p = memchr(p, 0, len - (size_t)(p - str))); p++) nul++;
    if (!nul) return cmh_strtab_intern(t, str, len, id);
    char *b = malloc(len + nul);
    if (!b) return CMH_ENOMEM;
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (str[i]) b[k++] = str[i];
        else b[k++] = (char)0xC0, b[k++] = (char)0x80;
    }
    int rc = cmh_strtab_intern(t, b, k, id);
    free(b);
    return rc;
}

char *cmh_str_escape(const char *in, char *out, size_t cap)
{
    size_t k = 0;
    if (!cap) return out;
    for (const char *p = in; *p && k + 1 < cap; p++) {
        unsigned c = (unsigned char)*p;
        if (CMH_IS_NUL_PAIR(p) || c < 0x20 || c == 0x7f) {
            if (k + 5 > cap) break;
            snprintf(out + k, 5, "\\x%02x", CMH_IS_NUL_PAIR(p) ? 0 : c);
            k += 4;
            p += CMH_IS_NUL_PAIR(p);
        } else out[k++] = (char)c;
    }
    out[k] = 0;
    return out;
}

const char *cmh_action_name(int a) { return a >= 0 && a < CMH_ACT_COUNT ? action_names[a] : "unknown"; }

int cmh_action_from_name(const char *name)
{
    for (int i = 0; i < CMH_ACT_COUNT; i++)
        if (strcmp(name, action_names[i]) == 0) return i;
    return -1;
}

const char *cmh_kind_name(int k) { return k >= 0 && k < CMH_KIND_COUNT ? kind_names[k] : "unknown"; }

#define GROW(s, field, n, capf) (CMH_GROW((s)->field, (s)->capf, (n), 16) ? CMH_ENOMEM : CMH_OK)

static uint64_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

typedef struct id_slot {
    uint64_t hash; /* key: the content's hash, never 0 */
    uint64_t id;
} id_slot;

int cmh_strtab_intern(cmh_strtab *t, const char *str, size_t len, uint32_t *id)
{
    if (len == 0) {
        *id = 0;
        return CMH_OK;
    }
    if (!t->index.esize) cmh_oa_init(&t->index, sizeof(id_slot));
    uint64_t h = cmh_oa_hashkey(hash_bytes(str, len));
    uint32_t pos = UINT32_MAX;
    for (id_slot *sl; (sl = cmh_oa_next(&t->index, h, &pos));) {
        const char *s = t->str[sl->id];
        if (strncmp(s, str, len) == 0 && s[len] == 0) {
            *id = (uint32_t)sl->id;
            return CMH_OK;
        }
    }
    if (CMH_GROW(t->str, t->cap, (uint64_t)t->n + 1, 16)) return CMH_ENOMEM;
    char *copy = malloc(len + 1);
    if (!copy) return CMH_ENOMEM;
    id_slot *sl = cmh_oa_add(&t->index, h);
    if (!sl) {
        free(copy);
        return CMH_ENOMEM;
    }
    memcpy(copy, str, len);
    copy[len] = 0;
    t->str[t->n] = copy;
    sl->id = t->n;
    *id = t->n++;
    return CMH_OK;
}

int cmh_snapshot_init(cmh_snapshot *s)
{
    memset(s, 0, sizeof *s);
    s->version = CMH_FORMAT_VERSION;
    s->rank = s->local_rank = s->world_size = -1;
    /* id 0: the empty string, the empty stack */
    if (CMH_GROW(s->strings.str, s->strings.cap, 1, 16) ||
        !(s->strings.str[0] = calloc(1, 1))) {
        cmh_snapshot_free(s);
        return CMH_ENOMEM;
    }
    s->strings.n = 1;
    if (GROW(s, stacks, 1, cap_stacks) != CMH_OK) {
        cmh_snapshot_free(s);
        return CMH_ENOMEM;
    }
    s->stacks[0].first = 0;
    s->stacks[0].count = 0;
    s->nstacks = 1;
    return CMH_OK;
}

void cmh_snapshot_free(cmh_snapshot *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->strings.n; i++) free(s->strings.str[i]);
    free(s->strings.str);
    cmh_oa_free(&s->strings.index);
    free(s->frames);
    free(s->stack_frames);
    free(s->stacks);
    free(s->modules);
    free(s->segments);
    free(s->blocks);
    free(s->entries);
    free(s->pairs);
    cmh_oa_free(&s->pair_index);
    free(s->thighs);
    free(s->xsets);
    for (int k = 0; k < CMH_X_COUNT; k++) free(s->extras[k]);
    cmh_oa_free(&s->xset_index);
    free(s->pool_ids);
    cmh_oa_free(&s->pool_index);
    free(s->xmap);
    free(s->traces);
    free(s->annotations);
    free(s->settings);
    free(s->kernels);
    free(s->meminfo);
    free(s->vmm_unmapped);
    free(s->vmm_maps);
    free(s->vmm_released);
    free(s->threads);
    free(s->idents);
    free(s->drv_errors);
    for (uint32_t i = 0; i < s->nchildren; i++) free(s->children[i].path);
    free(s->children);
    cmh_oa_free(&s->stack_index);
    if (s->torch) {
        cmh_snapshot_free(s->torch);
        free(s->torch);
    }
    memset(s, 0, sizeof *s);
}

int cmh_snapshot_add_child(cmh_snapshot *s, int64_t pid, const char *path)
{
    char *p = path ? strdup(path) : NULL;
    cmh_forked_child *v = realloc(s->children, ((size_t)s->nchildren + 1) * sizeof *v);
    if (!v || (path && !p)) {
        free(p);
        if (v) s->children = v;
        return CMH_ENOMEM;
    }
    s->children = v;
    v[s->nchildren].pid = pid;
    v[s->nchildren].path = p;
    s->nchildren++;
    return CMH_OK;
}

int cmh_snapshot_add_vmm_unmapped(cmh_snapshot *s, const cmh_vmm_handle *h)
{
    if (GROW(s, vmm_unmapped, s->nvmm_unmapped + 1, cap_vmm_unmapped) != CMH_OK) return CMH_ENOMEM;
    s->vmm_unmapped[s->nvmm_unmapped++] = *h;
    return CMH_OK;
}

int cmh_snapshot_add_drv_error(cmh_snapshot *s, const cmh_drv_error *e)
{
    if (GROW(s, drv_errors, s->ndrv_errors + 1, cap_drv_errors) != CMH_OK) return CMH_ENOMEM;
    s->drv_errors[s->ndrv_errors++] = *e;
    return CMH_OK;
}

const char *cmh_cuda_error_name(int32_t result, char *buf, size_t n)
{
    static const struct {
        int32_t code;
        const char *name;
    } k[] = {{0, "CUDA_SUCCESS"},
             {1, "CUDA_ERROR_INVALID_VALUE"},
             {2, "CUDA_ERROR_OUT_OF_MEMORY"},
             {3, "CUDA_ERROR_NOT_INITIALIZED"},
             {4, "CUDA_ERROR_DEINITIALIZED"},
             {100, "CUDA_ERROR_NO_DEVICE"},
             {101, "CUDA_ERROR_INVALID_DEVICE"},
             {201, "CUDA_ERROR_INVALID_CONTEXT"},
             {208, "CUDA_ERROR_ALREADY_MAPPED"},
             {211, "CUDA_ERROR_NOT_MAPPED"},
             {400, "CUDA_ERROR_INVALID_HANDLE"},
             {500, "CUDA_ERROR_NOT_FOUND"},
             {700, "CUDA_ERROR_ILLEGAL_ADDRESS"},
             {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED"},
             {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED"},
             {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED"},
             {719, "CUDA_ERROR_LAUNCH_FAILED"},
             {801, "CUDA_ERROR_NOT_SUPPORTED"},
             {802, "CUDA_ERROR_SYSTEM_NOT_READY"},
             {900, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"},
             {999, "CUDA_ERROR_UNKNOWN"}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].code == result) return k[i].name;
    snprintf(buf, n, "CUresult %d", (int)result);
    return buf;
}

int cmh_driver_error_judged(const char *call)
{
    return !strcmp(call, "cuMemFree") || !strcmp(call, "cuMemFreeAsync") || !strcmp(call, "cuMemFreeHost") || !strcmp(call, "cuMemUnmap");
}

const char *cmh_driver_error_what(const cmh_snapshot *s, uint64_t addr, int64_t t, char *buf, size_t n)
{
    /* through every trace up to t: the last event of a segment based at addr, and the live
     * segment (or mapped range) addr falls inside of, not at its base */
    int base_state = 0; /* 0 never seen, 1 live, 2 freed */
    uint64_t in_base = 0, in_size = 0;
    for (uint32_t i = 0; i < s->ntraces; i++) {
        const cmh_trace *tr = &s->traces[i];
        for (uint32_t j = 0; j < tr->nentries; j++) {
            const cmh_entry *e = &s->entries[tr->first_entry + j];
            if (e->action != CMH_ACT_SEGMENT_ALLOC && e->action != CMH_ACT_SEGMENT_FREE && e->action != CMH_ACT_SEGMENT_MAP &&
                e->action != CMH_ACT_SEGMENT_UNMAP)
                continue;
            int64_t et = cmh_entry_time(s, e);
            if (t && et > t) break;
            uint64_t a = cmh_entry_addr(s, e), z = cmh_entry_size(s, e);
            int made = e->action == CMH_ACT_SEGMENT_ALLOC || e->action == CMH_ACT_SEGMENT_MAP;
            if (a == addr) base_state = made ? 1 : 2;
            else if (made && addr > a && addr - a < z) in_base = a, in_size = z;
            else if (!made && a == in_base && in_size) in_base = in_size = 0;
        }
    }
    if (in_size)
        snprintf(buf, n, "inside the live %.1f MiB allocation at 0x%llx (+%llu bytes), not its base", (double)in_size / 1048576.0,
                 (unsigned long long)in_base, (unsigned long long)(addr - in_base));
    else if (base_state == 2) snprintf(buf, n, "freed already (a double free)");
    else if (base_state == 1) snprintf(buf, n, "live in the trace");
    else snprintf(buf, n, "never allocated while recorded");
    return buf;
}

int cmh_snapshot_add_vmm_map(cmh_snapshot *s, const cmh_vmm_map *m)
{
    if (GROW(s, vmm_maps, s->nvmm_maps + 1, cap_vmm_maps) != CMH_OK) return CMH_ENOMEM;
    s->vmm_maps[s->nvmm_maps++] = *m;
    return CMH_OK;
}

int cmh_snapshot_add_vmm_release(cmh_snapshot *s, const cmh_vmm_release *r)
{
    if (GROW(s, vmm_released, s->nvmm_released + 1, cap_vmm_released) != CMH_OK) return CMH_ENOMEM;
    s->vmm_released[s->nvmm_released++] = *r;
    return CMH_OK;
}

int cmh_snapshot_add_meminfo(cmh_snapshot *s, const cmh_meminfo *m)
{
    if (GROW(s, meminfo, s->nmeminfo + 1, cap_meminfo) != CMH_OK) return CMH_ENOMEM;
    s->meminfo[s->nmeminfo++] = *m;
    return CMH_OK;
}

int cmh_snapshot_add_frame(cmh_snapshot *s, const cmh_frame *f, uint32_t *id)
{
    if (GROW(s, frames, s->nframes + 1, cap_frames) != CMH_OK) return CMH_ENOMEM;
    s->frames[s->nframes] = *f;
    *id = s->nframes++;
    return CMH_OK;
}

int cmh_snapshot_add_stack(cmh_snapshot *s, const uint32_t *ids, uint32_t n, uint32_t *id)
{
    if (n == 0) {
        *id = 0;
        return CMH_OK;
    }
    if (!s->stack_index.esize) cmh_oa_init(&s->stack_index, sizeof(id_slot));
    uint64_t h = cmh_oa_hashkey(hash_bytes(ids, (size_t)n * 4));
    uint32_t pos = UINT32_MAX;
    for (id_slot *sl; (sl = cmh_oa_next(&s->stack_index, h, &pos));) {
        const cmh_stack *st = &s->stacks[sl->id];
        if (st->count == n && memcmp(s->stack_frames + st->first, ids, (size_t)n * 4) == 0) {
            *id = (uint32_t)sl->id;
            return CMH_OK;
        }
    }
    if (GROW(s, stack_frames, s->nstack_frames + n, cap_stack_frames) != CMH_OK) return CMH_ENOMEM;
    if (GROW(s, stacks, s->nstacks + 1, cap_stacks) != CMH_OK) return CMH_ENOMEM;
    id_slot *sl = cmh_oa_add(&s->stack_index, h);
    if (!sl) return CMH_ENOMEM;
    memcpy(s->stack_frames + s->nstack_frames, ids, (size_t)n * 4);
    s->stacks[s->nstacks].first = s->nstack_frames;
    s->stacks[s->nstacks].count = n;
    s->nstack_frames += n;
    sl->id = s->nstacks;
    *id = s->nstacks++;
    return CMH_OK;
}

int cmh_snapshot_reindex_stacks(cmh_snapshot *s)
{
    cmh_oa_free(&s->stack_index);
    cmh_oa_init(&s->stack_index, sizeof(id_slot));
    if (cmh_oa_reserve(&s->stack_index, s->nstacks) != 0) return CMH_ENOMEM;
    for (uint32_t i = 1; i < s->nstacks; i++) {
        const cmh_stack *st = &s->stacks[i];
        uint64_t h = cmh_oa_hashkey(hash_bytes(s->stack_frames + st->first, (size_t)st->count * 4));
        id_slot *sl = cmh_oa_add(&s->stack_index, h);
        sl->id = i;
    }
    return CMH_OK;
}

int cmh_snapshot_add_segment(cmh_snapshot *s, const cmh_segment *seg, cmh_segment **out)
{
    if (GROW(s, segments, s->nsegments + 1, cap_segments) != CMH_OK) return CMH_ENOMEM;
    cmh_segment *d = &s->segments[s->nsegments++];
    *d = *seg;
    d->first_block = s->nblocks;
    d->nblocks = 0;
    if (out) *out = d;
    return CMH_OK;
}

int cmh_snapshot_add_block(cmh_snapshot *s, const cmh_block *b)
{
    if (!s->nsegments) return CMH_EINVAL;
    if (GROW(s, blocks, s->nblocks + 1, cap_blocks) != CMH_OK) return CMH_ENOMEM;
    s->blocks[s->nblocks++] = *b;
    s->segments[s->nsegments - 1].nblocks++;
    return CMH_OK;
}

int cmh_snapshot_add_trace(cmh_snapshot *s, int32_t device, uint64_t dropped, cmh_trace **out)
{
    if (GROW(s, traces, s->ntraces + 1, cap_traces) != CMH_OK) return CMH_ENOMEM;
    cmh_trace *t = &s->traces[s->ntraces++];
    t->device = device;
    t->dropped = dropped;
    t->dropped_ooms = 0;
    t->first_entry = s->nentries;
    t->nentries = 0;
    if (out) *out = t;
    return CMH_OK;
}

int cmh_snapshot_reserve_entries(cmh_snapshot *s, uint32_t more)
{
    if ((uint64_t)s->nentries + more <= s->cap_entries) return CMH_OK;
    if ((uint64_t)s->nentries + more > UINT32_MAX) return CMH_ENOMEM;
    void *p = realloc(s->entries, ((size_t)s->nentries + more) * sizeof *s->entries);
    if (!p) return CMH_ENOMEM;
    s->entries = p;
    s->cap_entries = s->nentries + more;
    return CMH_OK;
}

/* Entries' rarer fields: each distinct set once (xsets[0] = all defaults), interned by content. */
const cmh_entry_xset cmh_xset_none;

/* A pool id's number in s->pool_ids, interned; 0 for (0, 0), the default pool.  A process has
 * few pools (one per CUDA graph pool or MemPool), but a hostile pickle may name a million: a
 * hash, not a search. */
static int pool_intern(cmh_snapshot *s, const uint64_t id[2], uint32_t *out)
{
    if (!id[0] && !id[1]) {
        *out = 0;
        return CMH_OK;
    }
    if (!s->pool_index.esize) cmh_oa_init(&s->pool_index, sizeof(id_slot));
    if (!s->npool_ids) {
        if (GROW(s, pool_ids, 1, cap_pool_ids) != CMH_OK) return CMH_ENOMEM;
        s->pool_ids[0] = (cmh_pool_id){{0, 0}};
        s->npool_ids = 1;
    }
    uint64_t h = cmh_oa_hashkey(cmh_oa_mix(id[0]) ^ cmh_oa_mix(id[1] + 0x9E3779B97F4A7C15ull));
    uint32_t pos = UINT32_MAX;
    for (id_slot *sl; (sl = cmh_oa_next(&s->pool_index, h, &pos));)
        if (s->pool_ids[sl->id].id[0] == id[0] && s->pool_ids[sl->id].id[1] == id[1]) {
            *out = (uint32_t)sl->id;
            return CMH_OK;
        }
    if (s->npool_ids == UINT32_MAX || GROW(s, pool_ids, s->npool_ids + 1, cap_pool_ids) != CMH_OK) return CMH_ENOMEM;
    id_slot *sl = cmh_oa_add(&s->pool_index, h);
    if (!sl) return CMH_ENOMEM;
    s->pool_ids[s->npool_ids] = (cmh_pool_id){{id[0], id[1]}};
    sl->id = s->npool_ids;
    *out = s->npool_ids++;
    return CMH_OK;
}

int cmh_snapshot_pool_number(cmh_snapshot *s, const uint64_t id[2], uint32_t *number) { return pool_intern(s, id, number); }

int cmh_snapshot_entry_pools(const cmh_snapshot *s)
{
    if (s->pt_fields & CMH_PT_POOL_ID) return 1;
    /* not s->npool_ids: a pool a reader interned for an entry it then skipped names no entry */
    for (uint32_t i = 1; i < s->nxsets; i++)
        if (s->xsets[i].pool) return 1;
    return 0;
}

static void xset_of(const cmh_entry_full *e, uint32_t extra, cmh_entry_xset *x)
{
    memset(x, 0, sizeof *x); /* no padding in the type, but its bytes are hashed and compared */
    x->slack = e->size - e->requested;
    x->stream = e->stream;
    x->thread = e->thread;
    x->name = e->name;
    x->compile_context = e->compile_context;
    x->user_metadata = e->user_metadata;
    x->extra = extra;
}

static int xset_intern(cmh_snapshot *s, const cmh_entry_xset *x, uint32_t *id)
{
    if (!memcmp(x, &cmh_xset_none, sizeof *x)) {
        *id = 0;
        return CMH_OK;
    }
    if (!s->xset_index.esize) cmh_oa_init(&s->xset_index, sizeof(id_slot));
    if (!s->nxsets) { /* set 0 first */
        if (GROW(s, xsets, 1, cap_xsets) != CMH_OK) return CMH_ENOMEM;
        s->xsets[0] = cmh_xset_none;
        s->nxsets = 1;
    }
    if (!memcmp(&s->xsets[s->xset_last], x, sizeof *x)) {
        *id = s->xset_last;
        return CMH_OK;
    }
    uint64_t h = cmh_oa_hashkey(hash_bytes(x, sizeof *x));
    uint32_t pos = UINT32_MAX;
    for (id_slot *sl; (sl = cmh_oa_next(&s->xset_index, h, &pos));)
        if (!memcmp(&s->xsets[sl->id], x, sizeof *x)) {
            *id = s->xset_last = (uint32_t)sl->id;
            return CMH_OK;
        }
    if (GROW(s, xsets, s->nxsets + 1, cap_xsets) != CMH_OK) return CMH_ENOMEM;
    id_slot *sl = cmh_oa_add(&s->xset_index, h);
    if (!sl) return CMH_ENOMEM;
    s->xsets[s->nxsets] = *x;
    sl->id = s->nxsets;
    *id = s->xset_last = s->nxsets++;
    return CMH_OK;
}

/* The interning index over s->xsets made again, after their contents changed in place. */
static int xset_reindex(cmh_snapshot *s)
{
    cmh_oa_free(&s->xset_index);
    s->xset_last = 0;
    if (s->nxsets <= 1) return CMH_OK;
    cmh_oa_init(&s->xset_index, sizeof(id_slot));
    for (uint32_t i = 1; i < s->nxsets; i++) {
        id_slot *sl = cmh_oa_add(&s->xset_index, cmh_oa_hashkey(hash_bytes(&s->xsets[i], sizeof s->xsets[i])));
        if (!sl) return CMH_ENOMEM;
        sl->id = i;
    }
    return CMH_OK;
}

_Static_assert(sizeof(cmh_entry) == 16, "the model's entry is 16 bytes");

/* The shortcut both tables of an entry's parts (pairs, upper halves of times) take before any
 * search: the value interned last, again, as the entry before often had it.  1 with its number
 * in *id when v (size bytes) is the table's value at last. */
static inline int same_as_last(const void *tab, uint32_t n, uint32_t last, const void *v, size_t size, uint32_t *id)
{
    if (!n || memcmp((const char *)tab + (size_t)last * size, v, size)) return 0;
    *id = last;
    return 1;
}

/* An (address, size) pair's number, interned. */
static int pair_intern(cmh_snapshot *s, uint64_t addr, uint64_t size, uint32_t *id)
{
    const cmh_entry_pair p = {addr, size};
    if (same_as_last(s->pairs, s->npairs, s->pair_last, &p, sizeof p, id)) return CMH_OK;
    if (!s->pair_index.esize) cmh_oa_init(&s->pair_index, sizeof(id_slot));
    uint64_t h = cmh_oa_hashkey(cmh_oa_mix(addr) ^ size);
    uint32_t pos = UINT32_MAX;
    for (id_slot *sl; (sl = cmh_oa_next(&s->pair_index, h, &pos));)
        if (s->pairs[sl->id].addr == addr && s->pairs[sl->id].size == size) {
            *id = s->pair_last = (uint32_t)sl->id;
            return CMH_OK;
        }
    if (s->npairs == UINT32_MAX || GROW(s, pairs, s->npairs + 1, cap_pairs) != CMH_OK) return CMH_ENOMEM;
    id_slot *sl = cmh_oa_add(&s->pair_index, h);
    if (!sl) return CMH_ENOMEM;
    s->pairs[s->npairs] = p;
    sl->id = s->npairs;
    *id = s->pair_last = s->npairs++;
    return CMH_OK;
}

/* The number of a time's upper half, interned; CMH_TH_FAR when the table is full. */
static int thigh_intern(cmh_snapshot *s, uint32_t hi, uint32_t *id)
{
    if (same_as_last(s->thighs, s->nthighs, s->thigh_last, &hi, sizeof hi, id)) return CMH_OK;
    /* few (a trace of an hour has ~840), and a trace's times mostly rise: from the last one down */
    for (uint32_t i = s->nthighs; i-- > 0;)
        if (s->thighs[i] == hi) {
            *id = s->thigh_last = i;
            return CMH_OK;
        }
    if (s->nthighs >= CMH_TH_FAR) {
        *id = CMH_TH_FAR;
        return CMH_OK;
    }
    if (GROW(s, thighs, s->nthighs + 1, cap_thighs) != CMH_OK) return CMH_ENOMEM;
    s->thighs[s->nthighs] = hi;
    *id = s->thigh_last = s->nthighs++;
    return CMH_OK;
}

int cmh_entry_pack(cmh_snapshot *s, const cmh_entry_full *e, cmh_entry *out, uint32_t *far) { return cmh_entry_pack_extra(s, e, 0, out, far); }

int cmh_entry_pack_extra(cmh_snapshot *s, const cmh_entry_full *e, uint32_t extra, cmh_entry *out, uint32_t *far)
{
    uint32_t hi = (uint32_t)((uint64_t)e->time_ns >> 32), th, pair, id = 0;
    if (thigh_intern(s, hi, &th) != CMH_OK || pair_intern(s, e->addr, e->size, &pair) != CMH_OK) return CMH_ENOMEM;
    /* most entries have every rarer field at its default: set 0, with no set to build */
    if (th == CMH_TH_FAR || e->requested != e->size || e->stream || e->thread || e->name || e->compile_context || e->user_metadata ||
        extra || e->pool_id[0] || e->pool_id[1]) {
        cmh_entry_xset x;
        xset_of(e, extra, &x);
        if (th == CMH_TH_FAR) x.thigh = hi;
        if (pool_intern(s, e->pool_id, &x.pool) != CMH_OK) return CMH_ENOMEM;
        if (xset_intern(s, &x, &id) != CMH_OK) return CMH_ENOMEM;
    }
    cmh_entry c = {0}; /* the bit fields made in a register, stored once */
    c.tlo = (uint32_t)e->time_ns;
    c.th = th;
    c.pair = pair;
    c.stack = e->stack;
    c.action = e->action;
    c.flags = e->flags;
    c.kind = e->kind;
    c.xs = id < CMH_XS_FAR ? id : CMH_XS_FAR;
    *out = c;
    *far = id < CMH_XS_FAR ? 0 : id;
    return CMH_OK;
}

static const cmh_entry_xref *xref_find(const cmh_entry_xref *xmap, uint32_t n, uint32_t index)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (xmap[mid].entry < index) lo = mid + 1;
        else hi = mid;
    }
    return lo < n && xmap[lo].entry == index ? &xmap[lo] : NULL;
}

const cmh_entry_xset *cmh_entry_xfar(const cmh_snapshot *s, const cmh_entry *e)
{
    /* not one of s's entries (a caller's mistake): the defaults */
    if (!s->entries || e < s->entries || e >= s->entries + s->nentries) return &cmh_xset_none;
    const cmh_entry_xref *r = xref_find(s->xmap, s->nxmap, (uint32_t)(e - s->entries));
    return r && r->xset < s->nxsets ? &s->xsets[r->xset] : &cmh_xset_none;
}

static void unpack(const cmh_snapshot *s, const cmh_entry *e, const cmh_entry_xset *x, cmh_entry_full *out)
{
    memset(out, 0, sizeof *out);
    uint32_t hi = e->th != CMH_TH_FAR ? s->thighs[e->th] : x->thigh;
    out->time_ns = (int64_t)(((uint64_t)hi << 32) | e->tlo);
    out->addr = s->pairs[e->pair].addr;
    out->size = s->pairs[e->pair].size;
    out->requested = out->size - x->slack;
    out->stream = x->stream;
    out->stack = e->stack;
    out->name = x->name;
    out->compile_context = x->compile_context;
    out->user_metadata = x->user_metadata;
    out->thread = x->thread;
    if (x->pool && x->pool < s->npool_ids) {
        out->pool_id[0] = s->pool_ids[x->pool].id[0];
        out->pool_id[1] = s->pool_ids[x->pool].id[1];
    }
    out->action = e->action;
    out->flags = e->flags;
    out->kind = e->kind;
}

void cmh_entry_get(const cmh_snapshot *s, const cmh_entry *e, cmh_entry_full *out) { unpack(s, e, cmh_entry_x(s, e), out); }

const cmh_entry_xset *cmh_entry_x_apart(const cmh_snapshot *s, const cmh_entry *e, const cmh_entry_xref *xmap, uint32_t nxmap,
                                        uint32_t index)
{
    if (e->xs && e->xs < CMH_XS_FAR) return &s->xsets[e->xs];
    if (e->xs == CMH_XS_FAR) {
        const cmh_entry_xref *r = xref_find(xmap, nxmap, index);
        if (r && r->xset < s->nxsets) return &s->xsets[r->xset];
    }
    return &cmh_xset_none;
}

void cmh_entry_unpack(const cmh_snapshot *s, const cmh_entry *e, const cmh_entry_xref *xmap, uint32_t nxmap, uint32_t index,
                      cmh_entry_full *out)
{
    unpack(s, e, cmh_entry_x_apart(s, e, xmap, nxmap, index), out);
}

static int entry_set(cmh_snapshot *s, uint32_t i, const cmh_entry_full *e, uint32_t extra);

int cmh_entry_set(cmh_snapshot *s, uint32_t i, const cmh_entry_full *e)
{
    if (i >= s->nentries) return CMH_EINVAL;
    /* the extra keys (cmh_extra), which the full form has no field for, stay the entry's */
    return entry_set(s, i, e, cmh_entry_extra(s, &s->entries[i]));
}

int cmh_entry_set_extra(cmh_snapshot *s, uint32_t i, uint32_t extra)
{
    if (i >= s->nentries) return CMH_EINVAL;
    cmh_entry_full e;
    cmh_entry_get(s, &s->entries[i], &e);
    return entry_set(s, i, &e, extra);
}

static int entry_set(cmh_snapshot *s, uint32_t i, const cmh_entry_full *e, uint32_t extra)
{
    cmh_entry c;
    uint32_t far;
    if (cmh_entry_pack_extra(s, e, extra, &c, &far) != CMH_OK) return CMH_ENOMEM;
    /* the entry's place in xmap: found, or where it would go */
    uint32_t lo = 0, hi = s->nxmap;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (s->xmap[mid].entry < i) lo = mid + 1;
        else hi = mid;
    }
    int there = lo < s->nxmap && s->xmap[lo].entry == i;
    if (far && there) s->xmap[lo].xset = far;
    else if (far) {
        if (GROW(s, xmap, s->nxmap + 1, cap_xmap) != CMH_OK) return CMH_ENOMEM;
        memmove(s->xmap + lo + 1, s->xmap + lo, (size_t)(s->nxmap - lo) * sizeof *s->xmap);
        s->xmap[lo] = (cmh_entry_xref){i, far};
        s->nxmap++;
    } else if (there) {
        memmove(s->xmap + lo, s->xmap + lo + 1, (size_t)(s->nxmap - lo - 1) * sizeof *s->xmap);
        s->nxmap--;
    }
    s->entries[i] = c;
    return CMH_OK;
}

int cmh_snapshot_append_entry(cmh_snapshot *s, const cmh_entry_full *e) { return cmh_snapshot_append_entry_extra(s, e, 0); }

int cmh_snapshot_append_entry_extra(cmh_snapshot *s, const cmh_entry_full *e, uint32_t extra)
{
    if (GROW(s, entries, s->nentries + 1, cap_entries) != CMH_OK) return CMH_ENOMEM;
    cmh_entry c;
    uint32_t far;
    if (cmh_entry_pack_extra(s, e, extra, &c, &far) != CMH_OK) return CMH_ENOMEM;
    if (far) {
        if (GROW(s, xmap, s->nxmap + 1, cap_xmap) != CMH_OK) return CMH_ENOMEM;
        s->xmap[s->nxmap++] = (cmh_entry_xref){s->nentries, far};
    }
    s->entries[s->nentries++] = c;
    return CMH_OK;
}

int cmh_snapshot_add_entry(cmh_snapshot *s, const cmh_entry_full *e) { return cmh_snapshot_add_entry_extra(s, e, 0); }

int cmh_snapshot_add_entry_extra(cmh_snapshot *s, const cmh_entry_full *e, uint32_t extra)
{
    if (!s->ntraces) return CMH_EINVAL;
    if (cmh_snapshot_append_entry_extra(s, e, extra) != CMH_OK) return CMH_ENOMEM;
    s->traces[s->ntraces - 1].nentries++;
    return CMH_OK;
}

int cmh_snapshot_add_module(cmh_snapshot *s, const cmh_module *m)
{
    if (GROW(s, modules, s->nmodules + 1, cap_modules) != CMH_OK) return CMH_ENOMEM;
    s->modules[s->nmodules++] = *m;
    return CMH_OK;
}

int cmh_snapshot_add_thread(cmh_snapshot *s, const cmh_thread_info *t)
{
    for (uint32_t i = 0; i < s->nthreads; i++) /* a checkpoint and the records after it may both say */
        if (s->threads[i].thread == t->thread) {
            s->threads[i] = *t;
            return CMH_OK;
        }
    if (GROW(s, threads, s->nthreads + 1, cap_threads) != CMH_OK) return CMH_ENOMEM;
    s->threads[s->nthreads++] = *t;
    return CMH_OK;
}

int cmh_snapshot_add_ident(cmh_snapshot *s, const cmh_device_ident *d)
{
    for (uint32_t i = 0; i < s->nidents; i++) /* a checkpoint and the records after it may both say */
        if (s->idents[i].device == d->device) {
            s->idents[i] = *d;
            return CMH_OK;
        }
    if (GROW(s, idents, s->nidents + 1, cap_idents) != CMH_OK) return CMH_ENOMEM;
    s->idents[s->nidents++] = *d;
    return CMH_OK;
}

const cmh_device_ident *cmh_snapshot_ident(const cmh_snapshot *s, int device)
{
    for (uint32_t i = 0; i < s->nidents; i++)
        if (s->idents[i].device == device && s->idents[i].uuid[0]) return &s->idents[i];
    return NULL;
}

void cmh_uuid_text(const unsigned char u[16], char out[48])
{
    char *o = out + snprintf(out, 48, "GPU-");
    for (int i = 0; i < 16; i++) o += snprintf(o, 8, "%s%02x", i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", u[i]);
}

const cmh_thread_info *cmh_snapshot_thread(const cmh_snapshot *s, uint32_t thread)
{
    for (uint32_t i = 0; thread && i < s->nthreads; i++)
        if (s->threads[i].thread == thread) return &s->threads[i];
    return NULL;
}

typedef struct thread_order {
    uint32_t old;
    int64_t tid; /* INT64_MAX: unknown */
} thread_order;

static int cmp_thread_order(const void *a, const void *b)
{
    const thread_order *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    return (x->old > y->old) - (x->old < y->old);
}

int cmh_snapshot_number_threads(cmh_snapshot *s)
{
    if (!s->nthreads) return CMH_OK; /* nothing known: the recorder's order stays */
    uint32_t max = 0;
    for (uint32_t i = 0; i < s->nxsets; i++) /* entries carry their thread in their set */
        if (s->xsets[i].thread > max) max = s->xsets[i].thread;
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].thread > max) max = s->threads[i].thread;
    for (uint32_t i = 0; i < s->nmeminfo; i++) /* a sample names its thread as entries do */
        if (s->meminfo[i].thread > max) max = s->meminfo[i].thread;
    for (uint32_t i = 0; i < s->ndrv_errors; i++) /* so does a failed driver call */
        for (uint32_t j = 0; j < s->drv_errors[i].nsites; j++)
            if (s->drv_errors[i].sites[j].thread > max) max = s->drv_errors[i].sites[j].thread;
    if (max > (1u << 24)) return CMH_OK; /* not a recorder's numbers: left alone */
    thread_order *o = calloc((size_t)max + 1, sizeof *o);
    uint32_t *to = calloc((size_t)max + 1, sizeof *to);
    if (!o || !to) {
        free(o);
        free(to);
        return CMH_ENOMEM;
    }
    for (uint32_t k = 0; k <= max; k++) o[k] = (thread_order){k, INT64_MAX};
    for (uint32_t i = 0; i < s->nthreads; i++)
        if (s->threads[i].tid > 0) o[s->threads[i].thread].tid = s->threads[i].tid;
    qsort(o + 1, max, sizeof *o, cmp_thread_order); /* 0 (unknown) stays 0 */
    for (uint32_t k = 1; k <= max; k++) to[o[k].old] = k;
    /* a permutation of the numbers 1..max (0 stays 0): the sets stay distinct and set 0 stays
     * all defaults, but each one's content hash changes, so the interning index is made again */
    for (uint32_t i = 0; i < s->nxsets; i++) s->xsets[i].thread = to[s->xsets[i].thread];
    for (uint32_t i = 0; i < s->nthreads; i++) s->threads[i].thread = to[s->threads[i].thread];
    for (uint32_t i = 0; i < s->nmeminfo; i++) s->meminfo[i].thread = to[s->meminfo[i].thread];
    for (uint32_t i = 0; i < s->ndrv_errors; i++)
        for (uint32_t j = 0; j < s->drv_errors[i].nsites; j++) s->drv_errors[i].sites[j].thread = to[s->drv_errors[i].sites[j].thread];
    free(o);
    free(to);
    return xset_reindex(s);
}

int cmh_snapshot_add_annotation(cmh_snapshot *s, const cmh_annotation *a)
{
    if (GROW(s, annotations, s->nannotations + 1, cap_annotations) != CMH_OK) return CMH_ENOMEM;
    s->annotations[s->nannotations++] = *a;
    return CMH_OK;
}

int cmh_snapshot_add_setting(cmh_snapshot *s, const char *key, const char *value, uint8_t type)
{
    cmh_setting st = {0, 0, type};
    if (cmh_strtab_intern(&s->strings, key, strlen(key), &st.key) != CMH_OK ||
        cmh_strtab_intern(&s->strings, value, strlen(value), &st.value) != CMH_OK)
        return CMH_ENOMEM;
    if (GROW(s, settings, s->nsettings + 1, cap_settings) != CMH_OK) return CMH_ENOMEM;
    s->settings[s->nsettings++] = st;
    return CMH_OK;
}

int cmh_snapshot_add_extra(cmh_snapshot *s, int what, uint32_t index, uint32_t text)
{
    if (what < 0 || what >= CMH_X_COUNT || !text) return CMH_OK;
    uint32_t n = s->nextras[what];
    if (n && s->extras[what][n - 1].index >= index) return CMH_EINVAL; /* ascending only */
    if (n == s->cap_extras[what]) {
        uint32_t nc = n ? n * 2 : 16;
        cmh_extra *nx = realloc(s->extras[what], (size_t)nc * sizeof *nx);
        if (!nx) return CMH_ENOMEM;
        s->extras[what] = nx;
        s->cap_extras[what] = nc;
    }
    s->extras[what][s->nextras[what]++] = (cmh_extra){index, text};
    return CMH_OK;
}

uint32_t cmh_snapshot_extra(const cmh_snapshot *s, int what, uint32_t index)
{
    if (what < 0 || what >= CMH_X_COUNT) return 0;
    uint32_t lo = 0, hi = s->nextras[what];
    const cmh_extra *x = s->extras[what];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (x[mid].index < index) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->nextras[what] && x[lo].index == index ? x[lo].text : 0;
}

int cmh_snapshot_add_kernel(cmh_snapshot *s, const cmh_kernel *k)
{
    if (GROW(s, kernels, s->nkernels + 1, cap_kernels) != CMH_OK) return CMH_ENOMEM;
    s->kernels[s->nkernels++] = *k;
    return CMH_OK;
}

/* ---- the record's clock (snapshot.h; analyzer/clock.c keeps the answer per snapshot) ---- */

static void clock_events(const cmh_snapshot *s, int64_t shift, int64_t *lo, int64_t *hi)
{
    for (uint32_t i = 0; i < s->nentries; i++) {
        int64_t t = cmh_entry_time(s, &s->entries[i]);
        if (!t) continue;
        t += shift;
        if (t < *lo) *lo = t;
        if (t > *hi) *hi = t;
    }
    for (uint32_t i = 0; i < s->nkernels; i++) {
        int64_t t = s->kernels[i].start_ns;
        if (!t) continue;
        if (t < *lo) *lo = t;
        if (t > *hi) *hi = t;
    }
}

void cmh_snapshot_clock_span(const cmh_snapshot *s, int64_t *lo, int64_t *hi)
{
    *lo = INT64_MAX, *hi = INT64_MIN;
    clock_events(s, 0, lo, hi);
    if (s->torch) clock_events(s->torch, s->torch_clock_ns, lo, hi);
    /* the origin of the record this one was exported from, whose earliest events the export may
     * have left out: the same instant reads the same "+N" in both (a pickle without pinned host
     * memory put every device's times 153 us earlier than its .cmh did) */
    if (s->clock_origin_ns > 0 && s->clock_origin_ns < *lo) *lo = s->clock_origin_ns;
}

int64_t cmh_snapshot_clock_origin(const cmh_snapshot *s)
{
    int64_t lo, hi;
    cmh_snapshot_clock_span(s, &lo, &hi);
    return lo == INT64_MAX ? 0 : lo;
}

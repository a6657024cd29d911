/*
 * marks.c - user annotations: named points (cmh_mark, SIGUSR2) and named ranges
 * (cmh_range_push / pop).
 *
 * A name is copied and interned when it is given, and referred to by its id from then on, so
 * the caller's string may be gone by the time it is used (a range's name built in a stack
 * buffer and popped later, a dump long after).  A point, and the start of a range, is also a
 * `mark` entry in the trace of every device the process has used (a checkpoint for the reports:
 * a step is the process's, whichever device was current); every range boundary is kept
 * as one of PyTorch's external annotations (START / END).
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "oatab.h"

typedef struct name_slot {
    uint64_t hash; /* key */
    uint64_t id;
} name_slot;

typedef struct rec_ann {
    int64_t ticks;
    uint32_t name;
    int16_t device;
    uint8_t stage; /* 0 START, 1 END */
} rec_ann;

static cmh_mutex g_lock = CMH_MUTEX_INITIALIZER;
static char **g_names; /* name id - 1 -> text */
static uint32_t g_nnames, g_cnames;
static cmh_oatab g_index = {NULL, 0, 0, sizeof(name_slot)};
static rec_ann *g_anns;
static uint32_t g_nanns, g_canns;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return cmh_oa_hashkey(h);
}

uint32_t cmh_marks_name_id(const char *name)
{
    if (!name) name = "";
    uint64_t h = hash_str(name);
    uint32_t id = 0;
    cmh_lock(&g_lock);
    uint32_t pos = UINT32_MAX;
    for (name_slot *n; (n = cmh_oa_next(&g_index, h, &pos));)
        if (!strcmp(g_names[n->id - 1], name)) {
            id = (uint32_t)n->id;
            goto out;
        }
    if (g_nnames == g_cnames) {
        uint32_t nc = g_cnames ? g_cnames * 2 : 64;
        char **nn = realloc(g_names, nc * sizeof *nn);
        if (!nn) goto out;
        g_names = nn;
        g_cnames = nc;
    }
    char *copy = strdup(name);
    name_slot *slot = copy ? cmh_oa_add(&g_index, h) : NULL;
    if (!slot) {
        free(copy);
        goto out;
    }
    g_names[g_nnames] = copy;
    id = ++g_nnames;
    slot->id = id;
    cmh_flight_name(id, copy);
out:
    cmh_unlock(&g_lock);
    if (!id) cmh_count_lost(1);
    return id;
}

/* A point mark, or a range's start: a checkpoint in the trace of the given device and of every
 * other device the process has used.  A step is the process's, not one device's: a program that
 * marks its steps from one thread, with device 0 current, steps device 1 too (its leak verdict
 * read 'steps: unknown' while device 0's had them).  Not the host's pinned memory (device -1),
 * as SIGUSR2's marks. */
static void mark_everywhere(int device, uint32_t id, int64_t t)
{
    cmh_device_stats st[CMH_MAX_DEVICES + 1];
    int n = cmh_hist_stats(st, CMH_MAX_DEVICES + 1);
    cmh_hist_record(device, CMH_ACT_MARK, CMH_KIND_DEVICE, 0, id, 0, 0, 0, 0, 0, 0, CMH_COUNT_NONE, t);
    for (int i = 0; i < n && i <= CMH_MAX_DEVICES; i++)
        if (st[i].device >= 0 && st[i].device != device)
            cmh_hist_record(st[i].device, CMH_ACT_MARK, CMH_KIND_DEVICE, 0, id, 0, 0, 0, 0, 0, 0, CMH_COUNT_NONE, t);
}

int cmh_marks_record(int device, uint32_t id, int stage)
{
    if (!cmh_rec_enabled()) return CMH_OK;
    if (!id) return CMH_ENOMEM;
    int64_t t = cmh_now_ticks();
    if (stage != 2) mark_everywhere(device, id, t);
    if (!stage) return CMH_OK;
    int rc = CMH_OK;
    cmh_lock(&g_lock);
    if (g_nanns == g_canns) {
        uint32_t nc = g_canns ? g_canns * 2 : 64;
        rec_ann *na = realloc(g_anns, nc * sizeof *na);
        if (na) g_anns = na, g_canns = nc;
    }
    if (g_nanns < g_canns) g_anns[g_nanns++] = (rec_ann){t, id, (int16_t)device, (uint8_t)(stage - 1)};
    else rc = CMH_ENOMEM;
    cmh_flight_annotation(t, id, device, stage - 1);
    cmh_unlock(&g_lock);
    if (rc) cmh_count_lost(1);
    return rc;
}

int cmh_marks_intern(cmh_snapshot *s, uint32_t id, uint32_t *out)
{
    cmh_lock(&g_lock);
    const char *nm = id && id <= g_nnames ? g_names[id - 1] : "";
    int rc = cmh_strtab_intern(&s->strings, nm, strlen(nm), out);
    cmh_unlock(&g_lock);
    return rc;
}

int cmh_marks_export(cmh_snapshot *s, int64_t now_ticks, int64_t now_ns)
{
    int rc = CMH_OK;
    cmh_lock(&g_lock);
    for (uint32_t i = 0; i < g_nanns && rc == CMH_OK; i++) {
        const rec_ann *r = &g_anns[i];
        cmh_annotation a = {0, r->stage, r->device, cmh_ticks_to_ns(r->ticks, now_ticks, now_ns)};
        const char *nm = r->name && r->name <= g_nnames ? g_names[r->name - 1] : "";
        if (cmh_strtab_intern(&s->strings, nm, strlen(nm), &a.name) != CMH_OK || cmh_snapshot_add_annotation(s, &a) != CMH_OK)
            rc = CMH_ENOMEM;
    }
    cmh_unlock(&g_lock);
    return rc;
}

void cmh_marks_atfork_prepare(void) { cmh_lock(&g_lock); }
void cmh_marks_atfork_parent(void) { cmh_unlock(&g_lock); }

/* the child keeps the names (ids stay valid), not the parent's ranges */
void cmh_marks_each(void (*fn)(uint32_t id, const char *name))
{
    cmh_lock(&g_lock);
    for (uint32_t i = 0; i < g_nnames; i++) fn(i + 1, g_names[i]);
    cmh_unlock(&g_lock);
}

void cmh_marks_reset_after_fork(void)
{
    cmh_mutex_init(&g_lock);
    g_nanns = 0;
}

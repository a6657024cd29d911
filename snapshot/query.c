/*
 * query.c - questions every reader of the model asks: which devices a snapshot has, a device's
 * trace, and a segment's pool by PyTorch's rule.
 */
#include "cumemhist/snapshot.h"

int cmh_pool_rule(uint64_t size, int whole)
{
    return size <= (whole ? 1ull << 20 : 2ull << 20) ? CMH_POOL_SMALL : CMH_POOL_LARGE;
}

int cmh_segment_pool(const cmh_segment *g)
{
    if (g->pool == CMH_POOL_SMALL || g->pool == CMH_POOL_LARGE) return g->pool;
    return cmh_pool_rule(g->size, (g->flags & CMH_SEG_WHOLE_BLOCK) != 0);
}

const cmh_trace *cmh_snapshot_trace(const cmh_snapshot *s, int device)
{
    for (uint32_t i = 0; i < s->ntraces; i++)
        if (s->traces[i].device == device) return &s->traces[i];
    return NULL;
}

/* cmh_memviz_shape writes such a block's implied free_requested / free_completed frameless just
 * before its segment_free, where frees carry their own stacks: the one mark of a block it never saw
 * allocated, read back from the pickle as written. */
int cmh_entry_free_stack_aside(const cmh_snapshot *s, const cmh_trace *tr, uint32_t i)
{
    if (!i || i >= tr->nentries) return 0;
    const cmh_entry *e = &s->entries[tr->first_entry + i];
    if ((e->action != CMH_ACT_SEGMENT_FREE && e->action != CMH_ACT_SEGMENT_UNMAP) || !(e->flags & CMH_EF_WHOLE_BLOCK) || !e->stack)
        return 0;
    const cmh_entry *p = &s->entries[tr->first_entry + i - 1];
    return p->action == CMH_ACT_FREE_COMPLETED && (p->flags & CMH_EF_IMPLIED) && !p->stack && cmh_entry_addr(s, p) == cmh_entry_addr(s, e);
}

/* ascending as unsigned numbers: -1 (host) sorts last */
static int before(int32_t a, int32_t b) { return (uint32_t)a < (uint32_t)b; }

/* d into the ascending set seen[0..*ns), once (256 at most) */
static void add_device(int32_t *seen, int *ns, int32_t d)
{
    for (int k = 0; k < *ns; k++)
        if (seen[k] == d) return;
    if (*ns == 256) return;
    int k = (*ns)++; /* insertion in order */
    while (k > 0 && before(d, seen[k - 1])) {
        seen[k] = seen[k - 1];
        k--;
    }
    seen[k] = d;
}

int cmh_snapshot_devices(const cmh_snapshot *s, int32_t *out, int cap)
{
    int32_t seen[256];
    int ns = 0;
    for (uint32_t i = 0; i < s->ntraces + s->nsegments + s->nvmm_unmapped; i++) { /* (held VMM memory names its device too) */
        int32_t d = i < s->ntraces ? s->traces[i].device
                    : i < s->ntraces + s->nsegments ? s->segments[i - s->ntraces].device
                                                    : s->vmm_unmapped[i - s->ntraces - s->nsegments].device;
        /* an empty ring names no device, unless it counts OOMs it does not hold (a record with no
         * history, enabled=state, still counts them: the device ran out of memory) */
        if (i < s->ntraces && s->traces[i].nentries == 0 && !s->traces[i].dropped_ooms) continue;
        add_device(seen, &ns, d);
    }
    for (int k = 0; k < ns && k < cap; k++) out[k] = seen[k];
    return ns;
}

int cmh_snapshot_listed_devices(const cmh_snapshot *s, int32_t *out, int cap)
{
    int32_t seen[256];
    int ns = 0;
    for (uint32_t i = 0; i < s->ntraces; i++) add_device(seen, &ns, s->traces[i].device);
    for (int k = 0; k < ns && k < cap; k++) out[k] = seen[k];
    return ns;
}

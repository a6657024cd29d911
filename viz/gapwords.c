/*
 * gapwords.c - the trace gap (cumemhist/gapwords.h) in words, once for every writer: a record
 * whose trace stops before its snapshot (history turned off, then the tensors freed, then the
 * dump) shows a peak, an end of 0 B and no leak, and nothing else tells the user why the blocks
 * the trace never freed are gone.
 */
#include <stdio.h>

#include "cumemhist/gapwords.h"
#include "svg.h"

static const char *blocks(uint64_t n) { return n == 1 ? "block" : "blocks"; }

const char *cmh_gap_stops_text(const cmh_trace_gap *g, int pytorch, const char *nl, char *buf, size_t cap)
{
    if (!g->unfreed_blocks && !g->unfreed_segments) return NULL;
    char what[256] = "", segs[160] = "";
    if (g->unfreed_blocks) {
        char sz[32];
        snprintf(sz, sizeof sz, "%s", cmh_svg_size((double)g->unfreed_bytes));
        snprintf(what, sizeof what, "%llu %s (%s) it allocated and never freed %s not active in the snapshot",
                 (unsigned long long)g->unfreed_blocks, blocks(g->unfreed_blocks), sz, g->unfreed_blocks == 1 ? "is" : "are");
    }
    if (g->unfreed_segments) {
        char sz[32];
        snprintf(sz, sizeof sz, "%s", cmh_svg_size((double)g->unfreed_reserved));
        snprintf(segs, sizeof segs, "%s%s%s%llu segment%s (%s reserved) it left %s not in the snapshot", g->unfreed_blocks ? "," : "",
                 g->unfreed_blocks ? nl : "", g->unfreed_blocks ? "and " : "", (unsigned long long)g->unfreed_segments, g->unfreed_segments == 1 ? "" : "s", sz,
                 g->unfreed_segments == 1 ? "is" : "are");
    }
    snprintf(buf, cap,
             "the trace stops before the snapshot: %s%s;%sthey were freed after its last entry: recording stopped before the "
             "snapshot was taken, or the entries that freed them were lost.%sThe end's figures are the snapshot's, where they count "
             "as freed (summary's Tot Freed too); none of them is a leak.%sTo keep those frees in the trace, take the snapshot "
             "while history is still recording%s.",
             what, segs, nl, nl, nl,
             pytorch ? " (_dump_snapshot before _record_memory_history(enabled=None))" : " (cmh_dump_snapshot before switching history to enabled=state or off)");
    return buf;
}

const char *cmh_gap_starts_text(const cmh_trace_gap *g, int pytorch, uint64_t dropped, const char *nl, char *buf, size_t cap)
{
    if (!g->untraced_blocks) return NULL;
    int one = g->untraced_blocks == 1;
    char what[96];
    snprintf(what, sizeof what, "%llu %s (%s) active at the snapshot %s", (unsigned long long)g->untraced_blocks, blocks(g->untraced_blocks),
             cmh_svg_size((double)g->untraced_bytes), one ? "was" : "were");
    if (dropped)
        snprintf(buf, cap,
                 "of the memory live at the end, %s allocated before the first kept entry%s(in the entries the ring dropped, past "
                 "max_entries), and count%s as live from its start.%sTo see %s made, record with a larger max_entries%s.",
                 what, nl, one ? "s" : "", nl, one ? "it" : "them",
                 pytorch ? " (_record_memory_history(max_entries=...))" : " (cumemhist record --max-entries)");
    else
        snprintf(buf, cap,
                 "the trace begins mid-run: %s allocated before its first entry%s(history turned on after %s made), and count%s "
                 "as live from its start.%sTo see %s made, turn history on%s before the program allocates.",
                 what, nl, one ? "it was" : "they were", one ? "s" : "", nl, one ? "it" : "them",
                 pytorch ? " (_record_memory_history)" : "");
    return buf;
}

const char *cmh_gap_pools_text(const cmh_trace_gap *g, const char *nl, char *buf, size_t cap)
{
    if (!g->pools_given_back) return NULL;
    char sz[32];
    snprintf(sz, sizeof sz, "%s", cmh_svg_size((double)g->pools_given_back));
    snprintf(buf, cap,
             "the stream-ordered pools' latest samples are older than the last cuMemGetInfo sample (after the trace's last entry), which says %s less in "
             "use than the record holds with them:%sa pool gives back what it keeps above its release threshold at a "
             "synchronize, which no hook sees, so the end counts those %s as given back, not as a pool's cache.%s(A recorder "
             "that reads every pool at the dump leaves nothing to reconcile.)",
             sz, nl, sz, nl);
    return buf;
}

const char *cmh_peak_bound_text(const cmh_peak_report *p, const char *nl, char *buf, size_t cap)
{
    if (cmh_peak_extent(p) != CMH_PEAK_AT_LEAST) return NULL;
    char why[160], a[32], r[32];
    if (p->base.dropped)
        snprintf(why, sizeof why, "the ring dropped the %llu oldest entr%s", (unsigned long long)p->base.dropped, p->base.dropped == 1 ? "y" : "ies");
    else
        snprintf(why, sizeof why, "the trace begins mid-run (%s allocated and %s reserved before its first entry)",
                 cmh_svg_size((double)p->alloc_start), cmh_svg_size((double)p->reserved_start));
    snprintf(a, sizeof a, "%s", cmh_svg_size((double)p->alloc_peak));
    snprintf(r, sizeof r, "%s", cmh_svg_size((double)p->reserved_peak));
    snprintf(buf, cap, "%s,%sso the true peaks may be higher than the trace's: allocated at least %s, reserved at least %s", why, nl, a, r);
    return buf;
}

const char *cmh_unsplit_text(const cmh_peak_report *p, char *buf, size_t cap)
{
    if (p->alloc_unsplit <= 0) return NULL;
    snprintf(buf, cap, "allocated counts whole blocks the allocator did not split: +%s over the requests at the peak",
             cmh_svg_size((double)p->alloc_unsplit));
    return buf;
}

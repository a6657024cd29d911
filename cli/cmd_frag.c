/*
 * cmd_frag.c - `cumemhist frag`: fragmentation of the reserved segments at the end of the
 * record, per device and per segment, and whether fragmentation explains the last OOM.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

/* g_top 0: not given; text lists 10, --json every segment (a script sums them: a cut list read as
 * the whole, 2.0 GiB of 13.2 GiB reserved) */
static int g_device = -2, g_top, g_json;

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPT_TOP(&g_top, "segments to list, most trapped bytes first, then most free, then the largest\n"
                        "(default 10; --json: every segment); a line counts the fully used ones, listed or not"),
    CLI_OPTS_ATTRIBUTION,
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_frag = {
    "frag", "[options] SNAPSHOT",
    "Fragmentation of the reserved segments at the end of the record, for every device and\n"
    "segment: reserved and allocated bytes, free bytes inside segments (reserved - allocated),\n"
    "split into releasable (what empty_cache() or a pool trim gives back: empty segments, the\n"
    "whole free pages of expandable segments, a pool's cache) and trapped (free gaps between\n"
    "live blocks that nothing gives back), the largest free gap, and fragmentation (trapped /\n"
    "reserved).  Each segment is named by what holds it: the site of its live blocks (the most\n"
    "bytes), which keep it from being given back, with the site that made it beside it where\n"
    "another.  Says when fragmentation rather than demand explains the last out-of-memory\n"
    "error, and which site's live blocks kept its free bytes apart, as oom says it.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist frag oom.pickle"};

/* "  (private pool (1, 3))" for a private pool's segment, "" for the default pool's */
static const char *pool_note(const cmh_frag_seg *g)
{
    static char buf[80];
    if (!g->private_pool) return "";
    snprintf(buf, sizeof buf, "  (private pool (%" PRIu64 ", %" PRIu64 "))", g->pool_id[0], g->pool_id[1]);
    return buf;
}

static int section(const rep_section *sec, void *arg)
{
    (void)arg;
    const cmh_snapshot *sp = sec->s;
    const cmh_sites *gs = sec->g;
    int dev = sec->device;
    cmh_frag_report p;
    int rc = cmh_frag_compute_sites(sp, dev, gs, &p); /* (its last OOM grouped as oom groups it) */
    if (rc != CMH_OK) return rc;
    cmh_frag_sort(&p); /* the order its header says */
    if (sec->w) {
        cmh_jw *w = sec->w;
        cmh_jw_obj(w);
        rep_json_base(w, sec, &p.base);
        cmh_jw_nl(w);
        cmh_jw_kuint(w, "reserved", p.reserved);
        cmh_jw_kuint(w, "allocated", p.allocated);
        cmh_jw_kuint(w, "free_in_segments", p.free);
        cmh_jw_kuint(w, "pending_free", p.pending_free);
        cmh_jw_kuint(w, "largest_gap", p.largest_gap);
        cmh_jw_kuint(w, "releasable", p.releasable);
        cmh_jw_kuint(w, "trapped", p.trapped);
        cmh_jw_kuint(w, "trapped_expandable", p.trapped_expandable);
        cmh_jw_kuint(w, "expandable_segments", p.expandable_segs);
        rep_json_vmm_ranges(w, &p);
        cmh_jw_kuint(w, "pool_cache", p.pool_cache);
        cmh_jw_kuint(w, "private_pools", p.private_free);
        cmh_jw_kdouble(w, "fragmentation", p.fragmentation, 4);
        rep_json_vmm_unmapped(w, sec->s, dev);
        rep_json_vmm_physical(w, sec->s, dev);
        if (p.has_oom) {
            const struct cmh_oom_event_state *o = &p.last_oom;
            cmh_jw_nl(w);
            cmh_jw_key(w, "last_oom"); /* at that moment, as `oom` says it */
            cmh_jw_obj(w);
            cmh_jw_kint(w, "index", o->index);
            rep_json_time(w, "time_ns", o->time_ns);
            cmh_jw_kuint(w, "request", o->request);
            cmh_jw_key(w, "number"); /* as `oom` numbers it: a retried one has none */
            if (o->number) cmh_jw_uint(w, o->number);
            else cmh_jw_null(w);
            cmh_jw_kbool(w, "retried", o->retried);
            if (o->retried) cmh_jw_kint(w, "retry_index", o->retry_index);
            rep_json_device_free(w, "device_free", o->device_free);
            cmh_jw_kuint(w, "allocated", o->allocated);
            cmh_jw_kuint(w, "reserved", o->reserved);
            cmh_jw_kuint(w, "free_in_segments", o->free_inside);
            cmh_jw_kuint(w, "largest_gap", o->largest_gap);
            cmh_jw_kuint(w, "largest_gap_unknown_in", o->gap_unknown_in);
            cmh_jw_kuint(w, "releasable", o->releasable);
            cmh_jw_kuint(w, "trapped", o->trapped);
            cmh_jw_kuint(w, "private_pools", o->private_free);
            cmh_jw_key(w, "request_pool");
            cmh_jw_arr(w);
            cmh_jw_uint(w, o->request_pool[0]);
            cmh_jw_uint(w, o->request_pool[1]);
            cmh_jw_end(w);
            cmh_jw_kuint(w, "own_pool", o->own_pool);
            cmh_jw_kuint(w, "usable", o->usable);
            cmh_jw_kuint(w, "unusable", o->unusable);
            cmh_jw_kstr(w, "verdict", cmh_oom_verdict_name(o->verdict));
            rep_json_trap(w, sp, gs, o->trap_stack, o->trap_group, o->trap_free, o->trap_segs, o->trap_sites);
            cmh_jw_end(w);
        }
        uint32_t shown = g_top && (uint32_t)g_top < p.nsegs ? (uint32_t)g_top : p.nsegs;
        cmh_jw_nl(w);
        cmh_frag_use u = cmh_frag_count_use(&p, 0, p.nsegs);
        cmh_jw_kuint(w, "segments_total", p.nsegs);
        cmh_jw_kuint(w, "segments_left_out", p.nsegs - shown); /* by --top: the list is not the whole */
        cmh_jw_kuint(w, "segments_fully_used", u.full);  /* no free byte */
        cmh_jw_kuint(w, "segments_partly_used", u.part);
        cmh_jw_kuint(w, "segments_empty", u.empty);      /* nothing allocated */
        cmh_jw_kstr(w, "segments_order", CMH_FRAG_ORDER);
        cmh_jw_key(w, "segments");
        cmh_jw_arr(w);
        for (uint32_t i = 0; i < shown; i++) {
            const cmh_frag_seg *g = &p.segs[i];
            cmh_jw_nl(w);
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "address", g->addr);
            cmh_jw_kuint(w, "reserved", g->reserved);
            cmh_jw_kuint(w, "allocated", g->allocated);
            cmh_jw_kuint(w, "free", g->free);
            cmh_jw_kuint(w, "pending_free", g->pending_free);
            cmh_jw_kuint(w, "largest_gap", g->largest_gap);
            cmh_jw_kuint(w, "releasable", g->releasable);
            cmh_jw_kuint(w, "trapped", g->trapped);
            cmh_jw_kdouble(w, "fragmentation", g->fragmentation, 4);
            cmh_jw_kbool(w, "expandable", g->expandable);
            cmh_jw_key(w, "vmm_owner"); /* another caller's cuMemMap range: whose (null: none) */
            if (g->vmm && g->vmm_owner < p.nvmm_owners) cmh_jw_str(w, p.vmm_owners[g->vmm_owner].name);
            else cmh_jw_null(w);
            cmh_jw_kuint(w, "private_pools", g->private_free);
            cmh_jw_key(w, "pool_id");
            cmh_jw_arr(w);
            cmh_jw_uint(w, g->pool_id[0]);
            cmh_jw_uint(w, g->pool_id[1]);
            cmh_jw_end(w);
            int from_blocks;
            uint32_t nsites, stack = cmh_sites_segment_stack(gs, g->index, &from_blocks, &nsites);
            const cmh_frame *f = cmh_sites_site_of(gs, stack);
            cmh_jw_key(w, "site"); /* who allocated the segment (or its blocks: site_from) */
            if (f) rep_json_frame(w, sp, f);
            else cmh_jw_null(w);
            cmh_jw_key(w, "site_from"); /* "segment": its own stack; "blocks": it has none, its blocks' site */
            if (f) cmh_jw_str(w, from_blocks ? "blocks" : "segment");
            else cmh_jw_null(w);
            if (from_blocks) cmh_jw_kuint(w, "block_sites", nsites);
            cmh_jw_kstr(w, "owner", cmh_sites_owner(gs, cmh_sites_group(gs, stack)));
            char oname[256];
            cmh_jw_kstr(w, "owner_name", rep_owner_name(gs, cmh_sites_group(gs, stack), oname, sizeof oname));
            /* what keeps it from being given back: its live blocks' site (not its creator's) */
            cmh_holder h;
            if ((rc = cmh_segment_holder(sp, gs, g->index, &h)) != CMH_OK) {
                cmh_frag_report_free(&p);
                return rc;
            }
            const cmh_frame *hf = h.nsites ? cmh_sites_site_of(gs, h.stack) : NULL;
            cmh_jw_key(w, "held_by");
            if (hf) rep_json_frame(w, sp, hf);
            else cmh_jw_null(w);
            cmh_jw_kuint(w, "held_bytes", h.bytes);
            cmh_jw_kuint(w, "held_by_sites", h.nsites);
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        /* what the stream-ordered pools keep, pool by pool: no segment above holds it; with the
         * segments it makes reserved (they summed to 37 MiB of 88 MiB, the rest unlisted) */
        cmh_jw_key(w, "pool_caches");
        cmh_jw_arr(w);
        for (uint32_t i = 0; i < p.npools; i++) {
            cmh_jw_nl(w);
            cmh_jw_obj(w);
            cmh_jw_kuint(w, "pool", p.pools[i].pool);
            cmh_jw_key(w, "kind");
            if (p.pools[i].kind & CMH_POOL_DEFAULT) cmh_jw_str(w, "default");
            else if (p.pools[i].kind & CMH_POOL_PRIVATE) cmh_jw_str(w, "private");
            else cmh_jw_null(w);
            cmh_jw_kuint(w, "reserved", p.pools[i].cache);
            cmh_jw_kuint(w, "allocated", 0);
            cmh_jw_kuint(w, "free", p.pools[i].cache);
            cmh_jw_kuint(w, "releasable", p.pools[i].cache);
            cmh_jw_kuint(w, "trapped", 0);
            cmh_jw_end(w);
        }
        cmh_jw_end(w);
        cmh_jw_end(w);
    } else if (!p.nsegs && !p.reserved) {
        printf("%s%s, %s: no segments at the end of the record\n", sec->index ? "\n" : "", sec->path, rep_device_name(dev));
        rep_gap_notes(&p.base, 0); /* (a pool's cache taken as given back: said) */
        rep_vmm_unmapped_note(sec->s, dev);
        rep_vmm_physical_note(sec->s, dev);
    } else {
        int top = g_top ? g_top : 10;
        if (sec->index) putchar('\n');
        if (p.nsegs)
            printf("%s, %s: %s at the end of the record\n", sec->path, rep_device_name(dev), rep_count(p.nsegs, "segment", "segments"));
        else /* only a stream-ordered pool's cache is reserved: the pool keeps it, no segment holds it */
            printf("%s, %s: no segments at the end of the record; stream-ordered pools keep %s reserved\n", sec->path,
                   rep_device_name(dev), rep_size((double)p.reserved));
        rep_vmm_unmapped_note(sec->s, dev);
        rep_vmm_physical_note(sec->s, dev);
        printf("  reserved                 %12s\n", rep_size((double)p.reserved));
        printf("  allocated                %12s\n", rep_size((double)p.allocated));
        printf("  free inside segments     %12s   (reserved - allocated)", rep_size((double)p.free));
        if (p.pending_free) printf(", of it %s freed with stream work pending", rep_size((double)p.pending_free));
        uint64_t pages = 0; /* expandable segments' free pages, in segments still holding blocks */
        for (uint32_t k = 0; k < p.nsegs; k++)
            if (p.segs[k].expandable && !p.segs[k].private_pool && p.segs[k].free + p.segs[k].pending_free < p.segs[k].reserved)
                pages += p.segs[k].releasable;
        printf("\n    releasable             %12s   (%s)\n", rep_size((double)p.releasable),
               rep_releasable_how(p.releasable, p.pool_cache, pages));
        if (p.pool_cache)
            printf("      of it a pool's cache %12s   (freed to a stream-ordered pool, kept: cuMemPoolTrimTo gives it back)\n",
                   rep_size((double)p.pool_cache));
        printf("    trapped                %12s   (gaps between live blocks)\n", rep_size((double)p.trapped));
        if (p.trapped_expandable) { /* (a free run short of a whole page of its segment: PyTorch's unmap() keeps it) */
            char pg[96];
            if (p.trapped_expandable_small && p.trapped_expandable_large && p.page_small != p.page_large)
                snprintf(pg, sizeof pg, "%s in the large pool, %s in the small", rep_size((double)p.page_large), rep_size((double)p.page_small));
            else snprintf(pg, sizeof pg, "%s", rep_size((double)(p.trapped_expandable_large ? p.page_large : p.page_small)));
            printf("      of it in expandable  %12s   (free runs, or their ends, short of a whole page: empty_cache() unmaps\n"
                   "                                         only whole pages, %s)\n",
                   rep_size((double)p.trapped_expandable), pg);
        }
        if (p.private_segs)
            printf("    in private pools       %12s   (%s of a CUDA graph or MemPool: only the pool's own requests use it,\n"
                   "                                            empty_cache() gives it back only once the pool is gone)\n",
                   rep_size((double)p.private_free), rep_count(p.private_segs, "segment", "segments"));
        printf("  largest free gap         %12s%s%s\n", rep_size((double)p.largest_gap), p.private_segs ? "   (outside private pools)" : "",
               p.pool_cache ? "   (outside the pools' cache: its pieces are not recorded, so the gaps inside it are not known)" : "");
        printf("  fragmentation            %11.1f%%   (trapped / reserved)\n", 100 * p.fragmentation);
        rep_gap_notes(&p.base, 0); /* (a pool's cache taken as given back: said) */
        rep_expandable_note(&p, 0); /* (summary's GPU reserved segments and Non-releasable memory read 0 for them) */
        rep_vmm_ranges_note(&p);    /* (NCCL's maps are none of PyTorch's: worded as theirs) */
        if (p.nsegs) {
            /* every segment counted by use, listed or not (a fully used one, 0 B free, fell under
             * '... N more' unsaid), and the list's order said */
            cmh_frag_use u = cmh_frag_count_use(&p, 0, p.nsegs);
            printf("\n  %s: %u fully used (no free bytes", rep_count(p.nsegs, "segment", "segments"), u.full);
            if (u.full) printf(", %s", rep_size((double)u.full_bytes));
            printf("), %u partly used, %u empty (nothing allocated)", u.part, u.empty);
            if (p.npools) /* the rest of reserved: listed under the segments */
                printf("; and %s, %s: no segment holds it", rep_count(p.npools, "stream-ordered pool's cache", "stream-ordered pools' caches"),
                       rep_size((double)p.pool_cache));
            putchar('\n');
            char cut[48] = "";
            if (p.nsegs > (uint32_t)top) snprintf(cut, sizeof cut, "; the first %d (--top N for more)", top);
            printf("  listed by " CMH_FRAG_ORDER_WORDS "%s:\n", cut);
            printf("  %-18s %11s %11s %11s %11s %11s %6s  %s\n", "segment", "reserved", "allocated", "free", "trapped", "largest gap", "frag",
                   "held by");
        }
        int by_blocks = 0, made_apart = 0;
        for (uint32_t i = 0; i < p.nsegs && (int)i < top; i++) {
            const cmh_frag_seg *g = &p.segs[i];
            int from_blocks;
            uint32_t nsites, stack = cmh_sites_segment_stack(gs, g->index, &from_blocks, &nsites);
            const cmh_frame *f = cmh_sites_site_of(gs, stack);
            /* held by: the site of its live blocks (what a user frees to have it back), not its
             * creator, whose block may be long gone; the creator said beside it where another */
            cmh_holder h;
            if ((rc = cmh_segment_holder(sp, gs, g->index, &h)) != CMH_OK) {
                cmh_frag_report_free(&p);
                return rc;
            }
            const cmh_frame *hf = h.nsites ? cmh_sites_site_of(gs, h.stack) : NULL;
            char whose[64] = ""; /* a segment without a stack of its own: its blocks' site */
            char made[600] = "";
            if (f && from_blocks) {
                by_blocks = 1;
                if (nsites > 1) snprintf(whose, sizeof whose, " (its blocks: the most bytes of %u sites)", nsites);
                else snprintf(whose, sizeof whose, " (its blocks)");
            } else if (f && hf && hf != f && strcmp(rep_frame(sp, f), rep_frame(sp, hf))) { /* (by what they say: two return addresses on one line are one site) */
                made_apart = 1;
                if (h.nsites > 1) snprintf(made, sizeof made, " (the most bytes of %u sites' live blocks; made by %.500s)", h.nsites, rep_frame(sp, f));
                else snprintf(made, sizeof made, " (made by %.500s)", rep_frame(sp, f));
            } else if (f && !h.nsites) {
                snprintf(made, sizeof made, " (nothing live in it; made by %.500s)", rep_frame(sp, f));
            }
            const cmh_frame *name = from_blocks || !f ? f : h.nsites ? hf : NULL;
            char tag[160];
            printf("  0x%-16" PRIx64 " %11s %11s %11s %11s %11s %5.1f%%  %s%s%s%s%s\n", g->addr, rep_size((double)g->reserved),
                   rep_size((double)g->allocated), rep_size((double)g->free), rep_size((double)g->trapped),
                   rep_size((double)g->largest_gap), 100 * g->fragmentation, name ? rep_frame(sp, name) : "-", whose, made,
                   rep_vmm_range_tag(&p, g, tag, sizeof tag), pool_note(g));
        }
        if (p.nsegs > (uint32_t)top) { /* what the cut holds: its free bytes, its fully used ones */
            cmh_frag_use rest = cmh_frag_count_use(&p, (uint32_t)top, p.nsegs);
            printf("  ... %s (--top): %s reserved, %s of it free; %u fully used, %u partly used, %u empty\n",
                   rep_count(p.nsegs - (uint32_t)top, "more segment", "more segments"), rep_size((double)rest.reserved), rep_size((double)rest.free),
                   rest.full, rest.part, rest.empty);
        }
        if (p.npools) { /* what the pools keep: reserved and free, no segment's; with the segments, reserved */
            if (!p.nsegs)
                printf("\n  %-18s %11s %11s %11s %11s %11s %6s  %s\n", "pool", "reserved", "allocated", "free", "trapped", "largest gap", "frag", "");
            for (uint32_t i = 0; i < p.npools; i++)
                printf("  pool 0x%-11" PRIx64 " %11s %11s %11s %11s %11s %6s  %s\n", p.pools[i].pool, rep_size((double)p.pools[i].cache),
                       rep_size(0), rep_size((double)p.pools[i].cache), rep_size(0), "-", "-",
                       p.pools[i].kind & CMH_POOL_DEFAULT   ? "the default pool's cache (freed to it, kept: cuMemPoolTrimTo gives it back)"
                       : p.pools[i].kind & CMH_POOL_PRIVATE ? "a private pool's cache (cuMemPoolCreate's; freed to it, kept: cuMemPoolTrimTo gives it back)"
                                                            : "a stream-ordered pool's cache (freed to it, kept: cuMemPoolTrimTo gives it back)");
        }
        if (made_apart)
            printf("  held by: the site of the segment's live blocks (the most bytes), which keep it and its free bytes from\n"
                   "  being given back; (made by ...): the site that made the segment, where another (its own blocks are gone)\n");
        if (by_blocks)
            printf("  (its blocks): the segment has no stack of its own (PyTorch <= 2.0 kept stacks on blocks only, and an\n"
                   "  expandable segment has none): the site of its blocks holding the most bytes (its live blocks; any of its\n"
                   "  blocks when none is live)\n");
        if (p.has_oom) {
            const struct cmh_oom_event_state *o = &p.last_oom;
            int64_t t0 = rep_trace_start(sp, dev);
            int mine = o->request_pool[0] || o->request_pool[1];
            char own[96] = "";
            if (mine)
                snprintf(own, sizeof own, ", in its own pool (%" PRIu64 ", %" PRIu64 ") %s", o->request_pool[0], o->request_pool[1],
                         rep_size((double)o->own_pool));
            char num[24] = ""; /* as `oom` numbers it: "out of memory #N", none for a retried one */
            if (o->number) snprintf(num, sizeof num, " #%u", o->number);
            printf("\n%s out-of-memory error%s (%s) asked for %s; at that moment, as `cumemhist oom` says:\n",
                   p.nooms > 1 ? "the last" : "the", num, rep_at(o->index, o->time_ns, t0), rep_size((double)o->request));
            if (o->retried) { /* the allocator's retry, not a failure the program saw: `oom` counts no OOM for it */
                /* the same stack, or the same function's other line (cmh_oom_same_call), as `oom` says */
                const cmh_trace *tr = cmh_snapshot_trace(sp, dev);
                int other = tr && o->index >= 0 && o->retry_index >= 0 && (uint64_t)o->index < tr->nentries &&
                            (uint64_t)o->retry_index < tr->nentries &&
                            sp->entries[tr->first_entry + o->index].stack != sp->entries[tr->first_entry + o->retry_index].stack;
                printf("  retried: not counted as an OOM (a cudaMalloc retry: %s asked again at entry %" PRId64
                       ", and that succeeded)\n",
                       o->retried != CMH_RETRY_SAME_STACK ? "the allocator"
                       : other                           ? "the same function (another line of it, from the same call)"
                                                         : "the same call stack",
                       o->retry_index);
            }
            printf("  free inside segments %s (%s trapped, %s releasable%s%s%s), largest gap %s%s\n",
                   rep_size((double)o->free_inside), rep_size((double)o->trapped), rep_size((double)o->releasable), own,
                   o->private_free ? (mine ? ", in other private pools " : ", in private pools ") : "",
                   o->private_free ? rep_size((double)o->private_free) : "", rep_size((double)o->largest_gap),
                   mine ? " (in its own pool)" : o->gap_unknown_in ? " (outside a pool's cache)" : "");
            if (o->gap_unknown_in)
                printf("  largest free gap: not known inside a pool's cache of %s; %s is the largest outside it\n",
                       rep_size((double)o->gap_unknown_in), rep_size((double)o->largest_gap));
            if (o->unusable)
                printf("  the request could use %s of it; %s not (other pools' memory)\n", rep_size((double)o->usable),
                       rep_size((double)o->unusable));
            printf("  verdict: %s\n", cmh_oom_verdict_advice(o->verdict, cmh_record_pytorch(sec->s)));
            rep_trap_print(sp, gs, o->trap_stack, o->trap_group, o->trap_free, o->trap_segs, o->trap_sites);
        }
        rep_notes(&p.base);
    }
    /* calls the driver refused (a double free...): no segment shows them, summary's note */
    if (!sec->w && sec->index + 1 == sec->ndevices) rep_driver_errors_note(sec->s);
    cmh_frag_report_free(&p);
    return CMH_OK;
}

int cmd_frag(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_frag, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    return rep_run(&path, 1, g_device, g_json, REP_SITES, section, NULL);
}

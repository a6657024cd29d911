/*
 * json.c - a snapshot as JSON, in the shape of PyTorch's snapshot dict (the same one the
 * memory_viz export writes), plus a "cumemhist" object with what that schema has no place for.
 * Every integer is written exactly; strings are escaped per RFC 8259.
 */
#include <inttypes.h>
#include <string.h>

#include "cumemhist/viz.h"

static void jstr(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", fp); break;
        case '\\': fputs("\\\\", fp); break;
        case '\n': fputs("\\n", fp); break;
        case '\r': fputs("\\r", fp); break;
        case '\t': fputs("\\t", fp); break;
        default:
            if (*p < 0x20) fprintf(fp, "\\u%04x", *p);
            else fputc(*p, fp);
        }
    }
    fputc('"', fp);
}

static void jframes(FILE *fp, const cmh_snapshot *s, uint32_t stack)
{
    const cmh_stack *st = &s->stacks[stack];
    fputc('[', fp);
    for (uint32_t i = 0; i < st->count; i++) {
        const cmh_frame *f = &s->frames[s->stack_frames[st->first + i]];
        fputs(i ? ", {\"name\": " : "{\"name\": ", fp);
        jstr(fp, cmh_str(s, f->name));
        fputs(", \"filename\": ", fp);
        jstr(fp, cmh_str(s, f->filename));
        fprintf(fp, ", \"line\": %" PRId64 "}", f->line);
    }
    fputc(']', fp);
}

static const char *state_name(int st)
{
    return st == CMH_BLOCK_ACTIVE_ALLOCATED ? "active_allocated" : st == CMH_BLOCK_ACTIVE_PENDING_FREE ? "active_pending_free" : "inactive";
}

int cmh_export_json(const cmh_snapshot *in, FILE *fp)
{
    cmh_snapshot s;
    uint64_t host = 0;
    int rc = cmh_memviz_shape(in, &s, &host);
    if (rc != CMH_OK) return rc;
    fputs("{\"segments\": [", fp);
    for (uint32_t i = 0; i < s.nsegments; i++) {
        const cmh_segment *g = &s.segments[i];
        uint64_t alloc = 0, active = 0, req = 0;
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s.blocks[g->first_block + k];
            if (b->state == CMH_BLOCK_ACTIVE_ALLOCATED) alloc += b->size;
            if (b->state != CMH_BLOCK_INACTIVE) active += b->size, req += b->requested;
        }
        fprintf(fp,
                "%s\n {\"device\": %d, \"address\": %" PRIu64 ", \"total_size\": %" PRIu64 ", \"allocated_size\": %" PRIu64
                ", \"active_size\": %" PRIu64 ", \"requested_size\": %" PRIu64 ", \"stream\": %" PRIu64
                ", \"segment_type\": \"%s\", \"segment_pool_id\": [%" PRIu64 ", %" PRIu64 "], \"is_expandable\": %s, \"frames\": ",
                i ? "," : "", g->device, g->addr, g->size, alloc, active, req, g->stream,
                cmh_segment_pool(g) == CMH_POOL_SMALL ? "small" : "large",
                g->pool_id[0], g->pool_id[1], g->flags & CMH_SEG_EXPANDABLE ? "true" : "false");
        jframes(fp, &s, g->stack);
        fputs(", \"blocks\": [", fp);
        for (uint32_t k = 0; k < g->nblocks; k++) {
            const cmh_block *b = &s.blocks[g->first_block + k];
            fprintf(fp, "%s\n  {\"address\": %" PRIu64 ", \"size\": %" PRIu64 ", \"requested_size\": %" PRIu64 ", \"state\": \"%s\", \"frames\": ",
                    k ? "," : "", b->addr, b->size, b->requested, state_name(b->state));
            jframes(fp, &s, b->state == CMH_BLOCK_INACTIVE ? 0 : b->stack);
            fputc('}', fp);
        }
        fputs("]}", fp);
    }
    fputs("],\n\"device_traces\": [", fp);
    int ndev = 0;
    for (uint32_t t = 0; t < s.ntraces; t++)
        if (s.traces[t].device >= ndev) ndev = s.traces[t].device + 1;
    for (uint32_t i = 0; i < s.nsegments; i++)
        if (s.segments[i].device >= ndev) ndev = s.segments[i].device + 1;
    for (int d = 0; d < (ndev ? ndev : 1); d++) {
        fputs(d ? ", [" : "[", fp);
        int first = 1;
        for (uint32_t t = 0; t < s.ntraces; t++) {
            if (s.traces[t].device != d) continue;
            for (uint32_t i = 0; i < s.traces[t].nentries; i++) {
                const cmh_entry *e = &s.entries[s.traces[t].first_entry + i];
                fprintf(fp, "%s\n {\"action\": \"%s\", \"%s\": %" PRIu64 ", \"size\": %" PRIu64 ", \"stream\": %" PRIu64
                            ", \"time_us\": %" PRId64,
                        first ? "" : ",", cmh_action_name(e->action), e->action == CMH_ACT_OOM ? "device_free" : "addr",
                        e->addr, e->size, e->stream, e->time_ns / 1000);
                first = 0;
                if (e->action == CMH_ACT_POOL_SAMPLE) fprintf(fp, ", \"used\": %" PRIu64, e->requested);
                if (s.pt_fields & CMH_PT_COMPILE_CONTEXT) {
                    fputs(", \"compile_context\": ", fp);
                    jstr(fp, cmh_str(&s, e->compile_context));
                }
                if (s.pt_fields & CMH_PT_USER_METADATA) {
                    fputs(", \"user_metadata\": ", fp);
                    jstr(fp, cmh_str(&s, e->user_metadata));
                }
                fputs(", \"frames\": ", fp);
                jframes(fp, &s, e->stack);
                fputc('}', fp);
            }
        }
        fputc(']', fp);
    }
    fputs("],\n\"external_annotations\": [", fp);
    for (uint32_t i = 0; i < s.nannotations; i++) {
        const cmh_annotation *a = &s.annotations[i];
        fputs(i ? ",\n {\"name\": " : "\n {\"name\": ", fp);
        jstr(fp, cmh_str(&s, a->name));
        fprintf(fp, ", \"stage\": \"%s\", \"device\": %d, \"time_us\": %" PRId64 "}", a->stage ? "END" : "START", a->device,
                a->time_ns / 1000);
    }
    fputs("],\n\"allocator_settings\": {", fp);
    for (uint32_t i = 0; i < s.nsettings; i++) {
        fputs(i ? ", " : "", fp);
        jstr(fp, cmh_str(&s, s.settings[i].key));
        fputs(": ", fp);
        const char *v = cmh_str(&s, s.settings[i].value);
        switch (s.settings[i].type) {
        case 1: case 2: case 4: fputs(v, fp); break;
        case 3: fputs(!strcmp(v, "True") ? "true" : "false", fp); break;
        default: jstr(fp, v);
        }
    }
    fprintf(fp, "},\n\"cumemhist\": {\"source\": \"%s\", \"pid\": %" PRId64 ", \"host_segments_left_out\": %" PRIu64
                ", \"skipped_entries\": %" PRIu64 ", \"dropped\": {",
            in->source == CMH_SRC_PYTORCH ? "pytorch" : "recorder", in->pid, host, in->skipped_entries);
    for (uint32_t t = 0; t < in->ntraces; t++)
        fprintf(fp, "%s\"%d\": %" PRIu64, t ? ", " : "", in->traces[t].device, in->traces[t].dropped);
    fputs("}}}\n", fp);
    cmh_snapshot_free(&s);
    return ferror(fp) ? CMH_EIO : CMH_OK;
}

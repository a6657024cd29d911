/*
 * steps.c - where the steps of a training loop begin: the one place a record is cut into
 * iterations, so that the leak verdict can ask what happened from one step to the next.
 *
 * In order of trust: the record's own boundaries (our marks, from cmh_mark, cumemhist.mark(),
 * a range's start or SIGUSR2; else PyTorch's annotations that name a step: ProfilerStep#N,
 * Optimizer.step#..., a record_function range named like a step), then the loop found in the
 * trace itself (a training step makes the same allocations in the same order every time), else
 * unknown.  A guess is never made from annotations that are not steps (torch.compile's
 * benchmarks, for one).
 *
 * The loop found in the trace is steps_loop.c's (cmh_steps_from_pattern()).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "cumemhist/reports.h"
#include "memo.h"
#include "grow.h"
#include "steps_loop.h"

/* ---- boundaries the record names ---- */

/* A name's family: without the step number it ends in ("step 12", "ProfilerStep#12",
 * "SIGUSR2 #3" -> "step", "ProfilerStep", "SIGUSR2"). */
static void family(const char *name, char *out, size_t cap)
{
    size_t n = strlen(name);
    while (n && (isdigit((unsigned char)name[n - 1]) || strchr(" #:-_/=.", name[n - 1]))) n--;
    if (n >= cap) n = cap - 1;
    memcpy(out, name, n);
    out[n] = 0;
}

static int has_word(const char *s, const char *w)
{
    for (; *s; s++) {
        size_t k = 0;
        while (w[k] && tolower((unsigned char)s[k]) == w[k]) k++;
        if (!w[k]) return 1;
    }
    return 0;
}

/* A name a user gives a step: it says step or iteration (or is the SIGUSR2 mark). */
static int steplike(const char *fam) { return has_word(fam, "step") || has_word(fam, "iter") || has_word(fam, "sigusr2"); }

typedef struct fam_count {
    char name[64];
    uint32_t count;
    int pref;
} fam_count;

#define MAX_FAMILIES 64

int cmh_steps_set_points(cmh_steps *st, const int64_t *p, uint32_t np)
{
    /* more steps than points: every stride-th boundary, the last one kept */
    uint32_t steps = np - 1, stride = (steps + CMH_STEPS_MAX_POINTS - 2) / (CMH_STEPS_MAX_POINTS - 1);
    if (!stride) stride = 1;
    uint32_t keep = steps / stride + 1;
    st->points = malloc(keep * sizeof *st->points);
    if (!st->points) return CMH_ENOMEM;
    for (uint32_t i = 0; i < keep; i++) st->points[i] = p[(size_t)i * stride];
    st->npoints = keep;
    st->stride = stride;
    st->count = (keep - 1) * stride; /* whole strides: the steps the points span */
    return CMH_OK;
}

int cmh_snapshot_running(const cmh_snapshot *s)
{
    static const char said[] = "was still running"; /* (cmd_snapshot.c, recorder/dump.c, live_snapshot.c) */
    return s->ending && !strncmp(cmh_str(s, s->ending), said, sizeof said - 1);
}

int cmh_steps_tail_whole(const cmh_snapshot *s, uint64_t tail, uint64_t step)
{
    return cmh_snapshot_running(s) ? tail >= step : tail * 2 >= step;
}

/* The median of the gaps between points, in entries. */
uint64_t cmh_steps_median_gap(const int64_t *p, uint32_t np)
{
    if (np < 2) return 0;
    int64_t *g = malloc((np - 1) * sizeof *g);
    if (!g) return (uint64_t)(p[np - 1] - p[0]) / (np - 1);
    /* (steps without entries, lent marks placed before this device's first entry, are no gap) */
    uint32_t n = 0;
    for (uint32_t i = 0; i + 1 < np; i++)
        if (p[i + 1] > p[i]) g[n++] = p[i + 1] - p[i];
    if (!n) {
        free(g);
        return 0;
    }
    /* insertion sort is enough for the few hundred steps a record has; a partial one for more */
    for (uint32_t i = 1; i < n && i < 4096; i++)
        for (uint32_t j = i; j && g[j - 1] > g[j]; j--) {
            int64_t t = g[j];
            g[j] = g[j - 1];
            g[j - 1] = t;
        }
    uint64_t m = (uint64_t)g[(n < 4096 ? n : 4096) / 2];
    free(g);
    return m;
}

/* The first entry at or after time t. */
static int64_t entry_at(const cmh_replay *r, int64_t t, int64_t from)
{
    int64_t n = cmh_replay_length(r);
    while (from < n && cmh_entry_time(cmh_replay_snapshot(r), cmh_replay_entry(r, from)) < t) from++;
    return from;
}

typedef struct mark_at {
    int64_t pos;   /* where in r's entries it falls */
    uint32_t name; /* string id */
    int64_t time;  /* (borrowed ones: for their order) */
    uint32_t k;
    int borrowed;  /* another device's, placed by time */
} mark_at;

static int cmp_mark_time(const void *a, const void *b)
{
    const mark_at *x = a, *y = b;
    if (x->time != y->time) return x->time < y->time ? -1 : 1;
    if (x->name != y->name) return x->name < y->name ? -1 : 1; /* (copies of one mark side by side) */
    return (x->k > y->k) - (x->k < y->k);
}

/* Families and the earliest time of each (marks or annotations a device has of its own). */
typedef struct fam_first {
    char name[64];
    int64_t first;
} fam_first;

/* Note name's family at time t (untimed: INT64_MIN, before anything); 0 when the table is full. */
static int note_family(fam_first *f, uint32_t *nf, const char *name, int64_t t)
{
    char buf[64];
    family(name, buf, sizeof buf);
    for (uint32_t k = 0; k < *nf; k++)
        if (!strcmp(f[k].name, buf)) {
            if (t < f[k].first) f[k].first = t;
            return 1;
        }
    if (*nf == MAX_FAMILIES) return 0;
    memcpy(f[*nf].name, buf, sizeof buf);
    f[(*nf)++].first = t;
    return 1;
}

/* The earliest time of family of name in f; INT64_MAX when f has none of it. */
static int64_t family_first(const fam_first *f, uint32_t nf, const char *name)
{
    char buf[64];
    family(name, buf, sizeof buf);
    for (uint32_t k = 0; k < nf; k++)
        if (!strcmp(f[k].name, buf)) return f[k].first;
    return INT64_MAX;
}

/* The marks of the series (every entry, or one thread's) as positions in r's entries: the
 * device's own, and before them the other devices' marks of a family this device's trace has
 * none of, or none of yet at their time, placed among its entries by time.  A mark is the
 * process's (recorder/marks.c writes it into every used device's trace), but only into the
 * traces of the devices used so far: a worker thread that used device 1 first after the first
 * mark read 'steps: 9' there and 'steps: 10' on device 0; and a record made before marks were
 * the process's has them only on the device the marking thread had current (the other read
 * 'steps: unknown').  One program, one count of steps on every device.  A mark of another
 * device is taken once however many devices have it (the same name and time).  m[k].borrowed:
 * another device's. */
static int marks_of(const cmh_snapshot *s, int device, const cmh_replay *r, uint32_t thread, mark_at **out, uint32_t *count)
{
    int64_t n = cmh_replay_length(r);
    mark_at *v = NULL;
    uint32_t nv = 0, cap = 0;
    fam_first ff[MAX_FAMILIES];
    uint32_t nff = 0;
    int full = 0; /* more families than the table holds: none lent (a family missing from it would be taken twice) */
    for (int64_t i = 0; i < n; i++) {
        const cmh_entry *e = cmh_replay_entry(r, i);
        if (!CMH_ENTRY_STEP_MARK(e) || !cmh_steps_mine(s, e, thread)) continue;
        if (CMH_GROW(v, cap, (uint64_t)nv + 1, 64)) goto oom;
        v[nv++] = (mark_at){i, cmh_entry_name(s, e), cmh_entry_time(s, e), nv, 0};
        int64_t tm = cmh_entry_time(s, e);
        full |= !note_family(ff, &nff, cmh_str(s, v[nv - 1].name), tm ? tm : INT64_MIN);
    }
    int have_time = 0;
    for (int64_t i = 0; i < n && !have_time; i++) have_time = cmh_entry_time(s, cmh_replay_entry(r, i)) != 0;
    if (have_time && !full) {
        uint32_t own = nv;
        for (uint32_t t = 0; t < s->ntraces; t++) {
            const cmh_trace *tr = &s->traces[t];
            if (tr->device == device || tr->device < 0) continue; /* (not pinned host memory's: no device's marks) */
            for (uint32_t i = 0; i < tr->nentries; i++) {
                const cmh_entry *e = &s->entries[tr->first_entry + i];
                int64_t tm = cmh_entry_time(s, e);
                if (!CMH_ENTRY_STEP_MARK(e) || !cmh_steps_mine(s, e, thread) || !tm) continue;
                uint32_t nm = cmh_entry_name(s, e);
                if (tm >= family_first(ff, nff, cmh_str(s, nm))) continue; /* this device has it, or has its family by then */
                if (CMH_GROW(v, cap, (uint64_t)nv + 1, 64)) goto oom;
                v[nv++] = (mark_at){0, nm, tm, nv, 1};
            }
        }
        if (nv > own) { /* theirs first, in time order (each once), each at the first of this device's entries at or after it; then its own */
            uint32_t lent = nv - own, kept = 0;
            mark_at *w = malloc((size_t)nv * sizeof *w);
            if (!w) goto oom;
            memcpy(w, v + own, (size_t)lent * sizeof *w);
            qsort(w, lent, sizeof *w, cmp_mark_time);
            int64_t at = 0;
            for (uint32_t k = 0; k < lent; k++) {
                if (kept && w[kept - 1].time == w[k].time && w[kept - 1].name == w[k].name) continue; /* another device's copy */
                w[kept] = w[k];
                w[kept++].pos = at = entry_at(r, w[k].time, at);
            }
            memcpy(w + kept, v, (size_t)own * sizeof *w);
            free(v);
            v = w;
            nv = kept + own;
        }
    }
    *out = v;
    *count = nv;
    return CMH_OK;
oom:
    free(v);
    return CMH_ENOMEM;
}

/* Is a mark of name at time t a range's start?  cmh_range_push writes both, at one instant: a mark
 * and a START annotation of the name.  starts: the START annotations' times, ascending. */
static int range_start(const cmh_snapshot *s, const cmh_annotation *const *starts, uint32_t n, uint32_t name, int64_t t)
{
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (starts[mid]->time_ns < t) lo = mid + 1;
        else hi = mid;
    }
    for (; lo < n && starts[lo]->time_ns == t; lo++)
        if (starts[lo]->name == name || !strcmp(cmh_str(s, starts[lo]->name), cmh_str(s, name))) return 1;
    return 0;
}

/* Are the entries from position a to b (a <= b), past a, marks alone: no allocation between? */
static int marks_only(const cmh_replay *r, int64_t a, int64_t b)
{
    for (int64_t i = a + 1; i < b; i++)
        if (cmh_replay_entry(r, i)->action != CMH_ACT_MARK) return 0;
    return 1;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static int cmp_start(const void *a, const void *b)
{
    const cmh_annotation *x = *(const cmh_annotation *const *)a, *y = *(const cmh_annotation *const *)b;
    return (x->time_ns > y->time_ns) - (x->time_ns < y->time_ns);
}

/* Steps at the program's marks: each mark of the chosen family starts a step; the last step
 * runs to the end of the record when it is as long as half a step.  One mark is one step when
 * its family says step (a program that ran one step read 'steps: unknown (no step marks...)').
 * Marks lent by other devices before this device's first entry start steps with none of its
 * entries: they are steps all the same, and its entries fall in the steps they were made in.
 * A mark and a range's start with no entry between them are one boundary (a 'step 0' mark and a
 * range 'step' opened 17 us later read 'steps: 2' of a one-step run).  Lent marks after this
 * series' last entry (pinned host memory, used before the loop) end the steps by the record's
 * entries: the last is whole as a device's is (it read 'steps: 7' where the devices read 8). */
static int from_marks(const cmh_snapshot *s, int device, const cmh_replay *r, uint32_t thread, cmh_steps *st, int *found)
{
    int64_t n = cmh_replay_length(r);
    mark_at *m;
    uint32_t nm;
    int rc = marks_of(s, device, r, thread, &m, &nm);
    if (rc != CMH_OK) return rc;
    fam_count fam[MAX_FAMILIES];
    int nf = 0;
    char buf[64];
    for (uint32_t j = 0; j < nm; j++) {
        family(cmh_str(s, m[j].name), buf, sizeof buf);
        int k = 0;
        while (k < nf && strcmp(fam[k].name, buf)) k++;
        if (k == nf) {
            if (nf == MAX_FAMILIES) continue;
            memcpy(fam[nf].name, buf, sizeof buf);
            fam[nf].count = 0;
            fam[nf].pref = steplike(buf);
            nf++;
        }
        fam[k].count++;
    }
    int best = -1;
    for (int k = 0; k < nf; k++) {
        if (fam[k].count < 2 && !fam[k].pref) continue; /* (one mark of another name: an event, not a loop) */
        if (best < 0 || fam[k].pref > fam[best].pref || (fam[k].pref == fam[best].pref && fam[k].count > fam[best].count)) best = k;
    }
    if (best < 0) {
        free(m);
        return CMH_OK;
    }
    int64_t *p = calloc((size_t)fam[best].count + 1, sizeof *p); /* (zeroed: gcc -O0 -fsanitize sees p[np - 1] unset) */
    int64_t *pt = calloc((size_t)fam[best].count + 1, sizeof *pt); /* the points' times */
    uint32_t nstarts = 0;
    for (uint32_t i = 0; i < s->nannotations; i++) nstarts += s->annotations[i].stage == 0;
    const cmh_annotation **starts = malloc(((size_t)nstarts + 1) * sizeof *starts);
    if (!p || !pt || !starts) {
        free(m), free(p), free(pt), free(starts);
        return CMH_ENOMEM;
    }
    nstarts = 0;
    for (uint32_t i = 0; i < s->nannotations; i++)
        if (s->annotations[i].stage == 0) starts[nstarts++] = &s->annotations[i];
    qsort(starts, nstarts, sizeof *starts, cmp_start);
    uint32_t np = 0, lent = 0;
    int last_range = 0, paired = 0, last_lent = 0; /* the last point's: a range's start; a mark and a range's start both */
    for (uint32_t j = 0; j < nm; j++) {
        family(cmh_str(s, m[j].name), buf, sizeof buf);
        /* (lent marks may share a position: steps before this device's first entry, or between two of its entries) */
        if (!strcmp(buf, fam[best].name) && (!np || m[j].pos >= p[np - 1])) {
            int rs = m[j].time && range_start(s, starts, nstarts, m[j].name, m[j].time);
            if (np && !paired && rs != last_range && marks_only(r, p[np - 1], m[j].pos)) {
                paired = 1; /* the other half of the boundary at this point */
                continue;
            }
            pt[np] = m[j].time;
            p[np++] = m[j].pos;
            lent += m[j].borrowed;
            last_range = rs, paired = 0, last_lent = m[j].borrowed;
        }
    }
    free(m);
    free(starts);
    uint64_t gap = cmh_steps_median_gap(p, np);
    uint32_t marks = np;
    if (np >= 1 && p[np - 1] < n && cmh_steps_tail_whole(s, (uint64_t)(n - p[np - 1]), gap)) p[np++] = n; /* the last step is whole */
    else if (np >= 1 && p[np - 1] >= n && last_lent && pt[np - 1]) {
        /* the last mark lent after this series' last entry: whole as the devices' is, when the
         * record's entries (every trace's, marks aside) after it are half a step's at least (the
         * median of the steps'); by entries, not time (a loaded machine's steps vary in length) */
        int64_t *cnt = calloc((size_t)np + 1, sizeof *cnt);
        if (!cnt) {
            free(p), free(pt);
            return CMH_ENOMEM;
        }
        for (uint32_t i = 0; i < s->nentries; i++) {
            int64_t t = cmh_entry_time(s, &s->entries[i]);
            if (!t || t < pt[0] || s->entries[i].action == CMH_ACT_MARK) continue;
            uint32_t lo = 0, hi = np; /* the last point at or before t */
            while (hi - lo > 1) {
                uint32_t mid = lo + (hi - lo) / 2;
                if (pt[mid] <= t) lo = mid;
                else hi = mid;
            }
            cnt[lo]++;
        }
        int64_t last = cnt[np - 1], med = 0;
        uint32_t ng = 0;
        for (uint32_t i = 0; i + 1 < np; i++)
            if (cnt[i]) cnt[ng++] = cnt[i];
        if (ng) {
            qsort(cnt, ng, sizeof *cnt, cmp_i64);
            med = cnt[ng / 2];
        }
        free(cnt);
        if (last && cmh_steps_tail_whole(s, (uint64_t)last, (uint64_t)med)) p[np++] = n;
    }
    free(pt);
    if (np >= 2) {
        rc = cmh_steps_set_points(st, p, np);
        if (rc == CMH_OK) {
            st->source = CMH_STEPS_MARKS;
            st->borrowed = lent;
            st->marks = marks;
            snprintf(st->label, sizeof st->label, "%s", fam[best].name);
            *found = 1;
        }
    }
    free(p);
    return rc;
}

typedef struct ann_at {
    const cmh_annotation *an;
    uint32_t k;
    int borrowed; /* another device's */
} ann_at;

static int cmp_ann(const void *a, const void *b)
{
    const ann_at *x = a, *y = b;
    if (x->an->time_ns != y->an->time_ns) return x->an->time_ns < y->an->time_ns ? -1 : 1;
    if (x->an->name != y->an->name) return x->an->name < y->an->name ? -1 : 1;
    if (x->an->stage != y->an->stage) return x->an->stage < y->an->stage ? -1 : 1;
    return (x->k > y->k) - (x->k < y->k);
}

/* The annotations that step device's entries, in time order: its own, and the other devices'
 * as marks are lent (marks_of): of a family it has none of, or none of yet at their time, each
 * once.  PyTorch records an annotation for the device current when it is made, so a one-process
 * two-GPU job has its steps annotated on device 0 only: device 1 read 'steps: unknown'. */
static int annotations_of(const cmh_snapshot *s, int device, ann_at **out, uint32_t *count)
{
    ann_at *v = malloc(((size_t)s->nannotations + 1) * sizeof *v);
    if (!v) return CMH_ENOMEM;
    fam_first ff[MAX_FAMILIES];
    uint32_t nff = 0, nv = 0;
    int full = 0;
    for (uint32_t a = 0; a < s->nannotations; a++) {
        const cmh_annotation *an = &s->annotations[a];
        if (an->device != device) continue;
        v[nv++] = (ann_at){an, a, 0};
        full |= !note_family(ff, &nff, cmh_str(s, an->name), an->time_ns);
    }
    for (uint32_t a = 0; a < s->nannotations && !full; a++) {
        const cmh_annotation *an = &s->annotations[a];
        if (an->device == device || an->device < 0) continue;
        if (an->time_ns >= family_first(ff, nff, cmh_str(s, an->name))) continue; /* this device has it, or has its family by then */
        v[nv++] = (ann_at){an, a, 1};
    }
    qsort(v, nv, sizeof *v, cmp_ann);
    uint32_t kept = 0;
    for (uint32_t k = 0; k < nv; k++) {
        const ann_at *w = kept ? &v[kept - 1] : NULL;
        if (v[k].borrowed && w && w->borrowed && w->an->time_ns == v[k].an->time_ns && w->an->name == v[k].an->name && w->an->stage == v[k].an->stage)
            continue; /* another device's copy */
        v[kept++] = v[k];
    }
    *out = v;
    *count = kept;
    return CMH_OK;
}

/* Steps at PyTorch's annotations that name one: ProfilerStep#N (each starts a step, the last
 * one's end closes it), else Optimizer.step (each one's end closes a step, the first step runs
 * from the record's start), else a range named like a step (one is one step).  Those of other
 * devices are lent by time (annotations_of). */
static int from_annotations(const cmh_snapshot *s, int device, const cmh_replay *r, cmh_steps *st, int *found)
{
    int64_t n = cmh_replay_length(r);
    if (!n || !s->nannotations) return CMH_OK;
    int have_time = 0;
    for (int64_t i = 0; i < n && !have_time; i++) have_time = cmh_entry_time(cmh_replay_snapshot(r), cmh_replay_entry(r, i)) != 0;
    if (!have_time) return CMH_OK; /* the annotations cannot be placed among the entries */
    ann_at *av;
    uint32_t na;
    int rc = annotations_of(s, device, &av, &na);
    if (rc != CMH_OK) return rc;
    static const struct {
        const char *prefix;
        int at_end;
    } kinds[] = {{"ProfilerStep", 0}, {"Optimizer.step", 1}, {NULL, 0}};
    char buf[64];
    for (int k = 0; k < 3; k++) {
        /* the family: given by the kind, or the first step-like range that recurs (or is the only one) */
        char want[64] = "";
        if (kinds[k].prefix) snprintf(want, sizeof want, "%s", kinds[k].prefix);
        else {
            char once[64] = "";
            for (uint32_t a = 0; a < na && !want[0]; a++) {
                const cmh_annotation *an = av[a].an;
                if (an->stage != 0) continue;
                const char *nm = cmh_str(s, an->name);
                if (strstr(nm, "dynamo_timed") || strstr(nm, "Optimizer.")) continue;
                family(nm, buf, sizeof buf);
                if (!steplike(buf)) continue;
                uint32_t c = 0;
                for (uint32_t b = 0; b < na && c < 2; b++) {
                    char f2[64];
                    if (av[b].an->stage != 0) continue;
                    family(cmh_str(s, av[b].an->name), f2, sizeof f2);
                    c += !strcmp(f2, buf);
                }
                if (c >= 2) memcpy(want, buf, sizeof want);
                else if (!once[0]) memcpy(once, buf, sizeof once);
            }
            if (!want[0]) memcpy(want, once, sizeof want);
            if (!want[0]) break;
        }
        int64_t *p = malloc(((size_t)na + 2) * sizeof *p);
        if (!p) {
            free(av);
            return CMH_ENOMEM;
        }
        uint32_t np = 0, lent = 0;
        int64_t last_end = -1, at = 0;
        if (kinds[k].at_end) p[np++] = 0;
        for (uint32_t a = 0; a < na; a++) {
            const cmh_annotation *an = av[a].an;
            const char *nm = cmh_str(s, an->name);
            if (kinds[k].prefix ? strncmp(nm, want, strlen(want)) != 0 : (family(nm, buf, sizeof buf), strcmp(buf, want) != 0)) continue;
            at = entry_at(r, an->time_ns, at);
            if (an->stage == 1) last_end = at;
            if (an->stage != (kinds[k].at_end ? 1 : 0)) continue;
            /* (lent ones may share a position: steps before this device's first entry) */
            if (!np || at > p[np - 1] || (av[a].borrowed && at == p[np - 1] && !(kinds[k].at_end && np == 1))) {
                p[np++] = at;
                lent += av[a].borrowed;
            }
        }
        uint32_t marks = kinds[k].at_end ? np - 1 : np;
        if (!kinds[k].at_end && last_end > p[np ? np - 1 : 0] && np) p[np++] = last_end;
        else if (!kinds[k].at_end && np && last_end < 0) { /* no ends recorded: the last step runs to the end when whole */
            uint64_t gap = cmh_steps_median_gap(p, np);
            if (cmh_steps_tail_whole(s, (uint64_t)(n - p[np - 1]), gap)) p[np++] = n;
        }
        if (np >= 2) {
            rc = cmh_steps_set_points(st, p, np);
            free(p);
            free(av);
            if (rc != CMH_OK) return rc;
            st->source = CMH_STEPS_ANNOTATIONS;
            st->borrowed = lent;
            st->marks = marks;
            snprintf(st->label, sizeof st->label, "%s", want);
            *found = 1;
            return CMH_OK;
        }
        free(p);
    }
    free(av);
    return CMH_OK;
}

int cmh_steps_find(const cmh_snapshot *s, int device, const cmh_replay *r, const cmh_sites *g, uint32_t thread, cmh_steps *st)
{
    memset(st, 0, sizeof *st);
    st->thread = thread;
    if (cmh_memo_steps_get(s, device, g, thread, st)) return CMH_OK; /* found already for this page */
    int found = 0, rc = from_marks(s, device, r, thread, st, &found);
    if (rc == CMH_OK && !found && !thread) rc = from_annotations(s, device, r, st, &found);
    if (rc == CMH_OK && !found) rc = cmh_steps_from_pattern(r, g, thread, st, &found);
    /* marks too few to judge growth by (one 'step 0' before the loop, a mark every 10th
     * iteration): the loop found in the trace, where it has steps enough, judges instead (marks
     * that give enough keep winning).  One mark hid a leak growing every iteration ('steady'). */
    else if (rc == CMH_OK && cmh_steps_active(st) < CMH_LEAK_MIN_STEPS) {
        cmh_steps pat;
        int pf = 0;
        memset(&pat, 0, sizeof pat);
        pat.thread = thread;
        rc = cmh_steps_from_pattern(r, g, thread, &pat, &pf);
        if (rc == CMH_OK && pf && pat.count >= CMH_LEAK_MIN_STEPS && pat.count > st->count) {
            pat.few_count = st->count;
            pat.few_source = st->source;
            memcpy(pat.few_label, st->label, sizeof pat.few_label);
            cmh_steps_free(st);
            *st = pat;
        } else cmh_steps_free(&pat);
    }
    if (rc != CMH_OK) cmh_steps_free(st);
    if (rc == CMH_OK && st->count) { /* the same figure whichever way it was found */
        if (!st->period) st->period = cmh_steps_median_gap(st->points, st->npoints) / st->stride;
    }
    if (rc == CMH_OK) cmh_memo_steps_put(s, device, g, st);
    return rc;
}

int cmh_steps_of(const cmh_snapshot *s, int device, const cmh_sites *g, cmh_steps *st)
{
    memset(st, 0, sizeof *st);
    if (cmh_memo_steps_get(s, device, g, 0, st)) return CMH_OK; /* no replay to make */
    cmh_replay *r = cmh_replay_new(s, device);
    if (!r) return CMH_ENOMEM;
    int rc = cmh_steps_find(s, device, r, g, 0, st);
    cmh_replay_free(r);
    return rc;
}

uint32_t cmh_steps_lead(const cmh_steps *st)
{
    uint32_t z = 0;
    while (st->points && z + 2 < st->npoints && st->points[z + 1] == st->points[0]) z++;
    return z;
}

uint32_t cmh_steps_active(const cmh_steps *st)
{
    uint32_t z = cmh_steps_lead(st), stride = st->stride ? st->stride : 1;
    return st->count > z * stride ? st->count - z * stride : 0;
}

void cmh_steps_free(cmh_steps *st)
{
    free(st->points);
    uint32_t thread = st->thread;
    memset(st, 0, sizeof *st);
    st->thread = thread;
}

/*
 * cmd_ranks.c - `cumemhist ranks FILES...|DIR`: the records of a multi-process job side by side.
 * One row per process and device (rank, host, device, peak allocated and reserved and when, OOMs,
 * leaked bytes, the top site at the peak), then the spread across ranks, whether it follows the
 * rank order, the ranks that leak, and the first OOM of the job.
 *
 * Files are read one at a time per worker (one per core): only the rows are kept, so a thousand
 * ranks cost the memory of a few snapshots.  Times are on the records' common clock (Unix ns:
 * every recorder stamps the wall clock), shown from the earliest first entry of the job.
 */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "fleet.h"
#include "report.h"

static int g_json, g_jobs, g_device = -2, g_rank_from;
enum { RANK_FROM_AUTO, RANK_FROM_RECORD, RANK_FROM_NAME };
static const char *const g_rank_froms[] = {"auto", "record", "name", NULL};

static const cli_option g_opts[] = {
    CLI_OPT_DEVICE_ALL(&g_device),
    CLI_OPTS_ATTRIBUTION,
    {"--jobs", "-j", CLI_INT, &g_jobs, "N", "files read at once (default: one per core)", NULL, 1, 256, NULL},
    {"--rank-from", NULL, CLI_CHOICE, &g_rank_from, "auto|record|name",
     "where a file's rank comes from: auto (default): the record's own, else the number after 'rank' in the file's name "
     "(snap_rank3.pickle, a PyTorch pickle says none); record: the record's only; name: the file's name only (after "
     "'rank', else its last number: snapshot_3.pickle)",
     g_rank_froms, 0, 0, NULL},
    CLI_OPT_JSON(&g_json),
};

const cli_command cli_cmd_ranks = {
    "ranks", "[options] FILES...|DIR",
    "The records of a multi-process job (one per rank: record -o run.%r.cmh -- torchrun ...)\n"
    "side by side: a row per process and device with its rank, host, peak allocated and reserved\n"
    "and when, OOMs, leaked bytes and the top site at the peak; then the spread of the peaks\n"
    "(min, median, max, the worst rank) and whether it follows the rank order, the ranks that\n"
    "leak, and which rank ran out of memory first, and when.  A directory stands for the .cmh\n"
    "and .pickle files in it.  Files are read one at a time on every core, in bounded memory.\n"
    "Records that are not one job's ranks (no rank, a rank twice, other programs, started far\n"
    "apart, two processes on one device of a host) are said to be, and compared as separate runs.\n"
    "A rank is the record's own (RANK when it was recorded), else the file name's: the number\n"
    "after 'rank' (snap_rank0.pickle ... snap_rank7.pickle, as PyTorch's _dump_snapshot per rank\n"
    "gives them: a pickle says no rank); --rank-from changes the rule.  Files of one process (a\n"
    ".cmh and its export as a pickle, a SIGUSR1 snapshot and its exit dump) are one row: the one\n"
    "holding the other's taken, both named on stderr (as export does).  A child a process forked\n"
    "(its record says so) is said to be its parent's child, not compared as a rank.  Whether\n"
    "the peaks follow the rank order is an exact permutation test of Kendall's tau (p < 0.05);\n"
    "with 4 ranks or fewer no order can pass it: too few ranks to tell.",
    g_opts, CLI_NOPTS(g_opts), 1, 1 << 20, 0, "cumemhist ranks runs/ --json"};

typedef struct rank_row {
    uint32_t file;
    int32_t rank, local_rank, world_size;
    int64_t pid;
    char host[256]; /* whole: the table's column is as wide as the longest (it cut them at 12) */
    int device;
    char uuid[48], pci_bus[24], gpu_name[64]; /* which GPU device was ("": the record does not say) */
    uint64_t entries, dropped;
    int64_t t_start; /* the device's first entry */
    int64_t alloc_peak, alloc_time_ns, reserved_peak, reserved_time_ns;
    int history;                    /* 0: only the end state is known (nohist_cause says why): no peak */
    const char *nohist_cause;       /* cmh_no_history_cause's words, when !history */
    int64_t alloc_end, reserved_end; /* the state at the end */
    uint32_t ooms;
    uint32_t ooms_gone; /* of them, the ring dropped: the first OOM kept, the one named, is #ooms_gone + 1 */
    int64_t first_oom_ns;
    uint64_t first_oom_request, first_oom_free;
    /* the first OOM's entry (oom's OOM #ooms_gone + 1, cmh_oom_first), and where its request first
     * failed when an allocator's failed retries led to it (else the same entry) */
    int64_t first_oom_entry, first_oom_asked, first_oom_asked_ns;
    uint64_t leaked_bytes, live_end;
    uint32_t leaking_sites;
    char *leak_site; /* whole, however long (a C++ template's name): the table's last column, and --json */
    char *site;      /* NULL: none */
    uint64_t site_bytes;
    char *ending; /* how the process ended (NULL: normally), whole: --json carries it */
    char prog[64];      /* the program: its command line's first word, without the directory */
    int64_t started_ns; /* the process's start (0: the record does not say) */
    int64_t forked_from; /* the pid this process was forked from (0: it was not) */
    int rank_from_name;  /* the rank is the file name's (the record says none, or --rank-from name) */
    const struct rank_row *parent; /* forked from a process whose record is among the files (NULL: not, or not here) */
} rank_row;

typedef struct file_slot {
    rank_row *rows;
    int nrows;
    int rc; /* the exit status its load gave (0: read) */
} file_slot;

typedef struct ranks_run {
    char **paths;
    uint32_t npaths;
    file_slot *slots;
    uint32_t next;
    pthread_mutex_t lock; /* symbolization and the report helpers' static buffers */
} ranks_run;

/* Before a row's first OOM's figures: which OOM they are when the ring dropped the earlier ones. */
static const char *gone_note(const rank_row *r)
{
    static char buf[96];
    if (!r->ooms_gone) return "";
    snprintf(buf, sizeof buf, "OOM #%u, the first the history kept (#1 to #%u fell out of it): ", r->ooms_gone + 1, r->ooms_gone);
    if (r->ooms_gone == 1) snprintf(buf, sizeof buf, "OOM #2, the first the history kept (#1 fell out of it): ");
    return buf;
}

static void oom_scan(const cmh_snapshot *s, int dev, rank_row *r)
{
    const cmh_trace *t = cmh_snapshot_trace(s, dev);
    /* the OOMs the ring dropped count (as summary's), the first named is then the first kept */
    r->ooms_gone = t && t->dropped_ooms < UINT32_MAX ? (uint32_t)t->dropped_ooms : t ? UINT32_MAX : 0;
    r->ooms = r->ooms_gone;
    for (uint32_t i = 0; t && i < t->nentries; i++) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        uint64_t freed;
        /* counted as oom and summary count them: a retried one is no OOM the rank saw */
        if (e->action != CMH_ACT_OOM || cmh_oom_retried(s, t, i, &freed)) continue;
        r->ooms++;
    }
    /* the first named is oom's: one definition (cmh_oom_first, as whatif, flamegraph and report
     * name it), its entry and time as oom prints them (ranks once took its own scan's) */
    int64_t asked = -1, i = r->ooms > r->ooms_gone ? cmh_oom_first(s, t, &asked) : -1;
    r->first_oom_entry = r->first_oom_asked = -1;
    if (i >= 0) {
        const cmh_entry *e = &s->entries[t->first_entry + i];
        r->first_oom_ns = cmh_entry_time(s, e), r->first_oom_request = cmh_entry_size(s, e), r->first_oom_free = cmh_entry_addr(s, e);
        r->first_oom_entry = i;
        r->first_oom_asked = asked >= 0 ? asked : i;
        r->first_oom_asked_ns = cmh_entry_time(s, &s->entries[t->first_entry + r->first_oom_asked]);
    }
}

/* The rank a file's name gives: the number after "rank" in its base name (snap_rank3.pickle,
 * rank-03.cmh, RANK_3.pickle; the last such), else, with anywhere, the base name's last number
 * (snapshot_3.pickle, run.3.cmh); -1: none. */
static int32_t rank_of_name(const char *path, int anywhere)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    int32_t after_word = -1, last = -1;
    for (const char *p = b; *p;) {
        if (!strncasecmp(p, "rank", 4)) {
            const char *q = p + 4;
            while (*q == '_' || *q == '-' || *q == '.') q++;
            if (*q >= '0' && *q <= '9') {
                long v = 0;
                for (; *q >= '0' && *q <= '9'; q++) v = v < 100000000 ? v * 10 + (*q - '0') : v;
                after_word = v < 100000000 ? (int32_t)v : -1;
                p = q;
                continue;
            }
        }
        if (*p >= '0' && *p <= '9') {
            long v = 0;
            for (; *p >= '0' && *p <= '9'; p++) v = v < 100000000 ? v * 10 + (*p - '0') : v;
            last = v < 100000000 ? (int32_t)v : -1;
            continue;
        }
        p++;
    }
    return after_word >= 0 || !anywhere ? after_word : last;
}

/* Every device of one file, into its slot.  Returns a CMH_* code for what failed after loading. */
static int one_device(ranks_run *run, const cmh_snapshot *s, const cmh_sites *g, int dev, rank_row *r)
{
    cmh_peak_report p;
    cmh_leak_report lk;
    int rc = cmh_peak_compute(s, dev, g, &p);
    if (rc != CMH_OK) return rc;
    if ((rc = cmh_leaks_compute(s, dev, g, 0, &lk)) != CMH_OK) {
        cmh_peak_report_free(&p);
        return rc;
    }
    r->device = dev;
    r->entries = p.base.entries;
    r->dropped = p.base.dropped;
    r->t_start = rep_trace_start(s, dev);
    r->alloc_peak = p.alloc_peak, r->alloc_time_ns = p.alloc_time_ns;
    r->reserved_peak = p.reserved_peak, r->reserved_time_ns = p.reserved_time_ns;
    r->history = p.base.history;
    r->nohist_cause = p.base.nohist_cause;
    r->alloc_end = p.alloc_end, r->reserved_end = p.reserved_end;
    oom_scan(s, dev, r);
    r->live_end = lk.live_bytes;
    const cmh_site *worst = NULL;
    for (uint32_t i = 0; i < lk.nsites; i++)
        if (lk.sites[i].growing) {
            r->leaked_bytes += lk.sites[i].bytes;
            r->leaking_sites++;
            if (!worst || lk.sites[i].bytes > worst->bytes) worst = &lk.sites[i];
        }
    pthread_mutex_lock(&run->lock);
    if (p.nsites) {
        if (!(r->site = strdup(rep_site_name(s, g, &p.sites[0])))) rc = CMH_ENOMEM;
        r->site_bytes = p.sites[0].bytes;
    }
    if (worst && rc == CMH_OK && !(r->leak_site = strdup(rep_site_name(s, g, worst)))) rc = CMH_ENOMEM;
    pthread_mutex_unlock(&run->lock);
    cmh_leak_report_free(&lk);
    cmh_peak_report_free(&p);
    return rc;
}

static void one_file(ranks_run *run, uint32_t f)
{
    file_slot *slot = &run->slots[f];
    cmh_snapshot s;
    int rc = rep_load_view(run->paths[f], &s);
    if (rc) {
        slot->rc = rc;
        return;
    }
    pthread_mutex_lock(&run->lock); /* libdw and the note it prints: one file at a time */
    rc = cli_symbolize(run->paths[f], &s);
    pthread_mutex_unlock(&run->lock);
    if (rc) {
        cmh_snapshot_free(&s);
        slot->rc = rc;
        return;
    }
    cmh_site_opts o = {rep_attribution.group_by, rep_attribution.no_default, rep_attribution.skips.v, rep_attribution.skips.n};
    char err[512];
    int src;
    cmh_sites *g = cmh_sites_new(&s, &o, &src, err, sizeof err);
    if (!g) {
        cli_error("%s", err);
        cmh_snapshot_free(&s);
        slot->rc = src == CMH_EINVAL ? CLI_EUSAGE : CLI_ENOMEM;
        return;
    }
    int32_t devs[64];
    int nd = cmh_snapshot_devices(&s, devs, 64), k = 0;
    slot->rows = calloc(nd > 0 ? (size_t)nd : 1, sizeof *slot->rows);
    if (!slot->rows) rc = CMH_ENOMEM;
    for (int d = 0; d < nd && d < 64 && rc == CMH_OK; d++) {
        if (devs[d] < 0 || (g_device >= -1 && devs[d] != g_device)) continue; /* ranks are about GPUs */
        rank_row *r = &slot->rows[k];
        r->file = f;
        r->rank = s.rank, r->local_rank = s.local_rank, r->world_size = s.world_size;
        if (g_rank_from == RANK_FROM_NAME || (g_rank_from == RANK_FROM_AUTO && s.rank < 0)) {
            int32_t nr = rank_of_name(run->paths[f], g_rank_from == RANK_FROM_NAME);
            if (nr >= 0 || g_rank_from == RANK_FROM_NAME) r->rank = nr, r->rank_from_name = nr >= 0;
        }
        r->pid = s.pid;
        snprintf(r->host, sizeof r->host, "%s", cmh_str(&s, s.hostname));
        if (s.ending && *cmh_str(&s, s.ending) && !(r->ending = strdup(cmh_str(&s, s.ending)))) rc = CMH_ENOMEM;
        const char *cmd = cmh_str(&s, s.cmdline), *sp = strchr(cmd, ' ');
        size_t len = sp ? (size_t)(sp - cmd) : strlen(cmd);
        for (size_t k = len; k > 0; k--)
            if (cmd[k - 1] == '/') {
                cmd += k, len -= k;
                break;
            }
        snprintf(r->prog, sizeof r->prog, "%.*s", (int)len, cmd);
        r->started_ns = s.start_time_ns;
        r->forked_from = s.forked_from;
        const cmh_device_ident *id = cmh_snapshot_ident(&s, devs[d]);
        if (id) {
            snprintf(r->uuid, sizeof r->uuid, "%s", id->uuid);
            snprintf(r->pci_bus, sizeof r->pci_bus, "%s", id->pci_bus);
            snprintf(r->gpu_name, sizeof r->gpu_name, "%s", id->name);
        }
        if (rc == CMH_OK && (rc = one_device(run, &s, g, devs[d], r)) == CMH_OK) k++;
        else free(r->ending), free(r->site), free(r->leak_site), r->ending = r->site = r->leak_site = NULL;
    }
    slot->nrows = k;
    if (rc != CMH_OK) slot->rc = cli_fail(run->paths[f], rc);
    cmh_sites_free(g);
    cmh_snapshot_free(&s);
}

static void *worker(void *arg)
{
    ranks_run *run = arg;
    for (uint32_t f; (f = __atomic_fetch_add(&run->next, 1, __ATOMIC_RELAXED)) < run->npaths;) one_file(run, f);
    return NULL;
}

static int cmp_row(const void *a, const void *b)
{
    const rank_row *x = *(const rank_row *const *)a, *y = *(const rank_row *const *)b;
    /* by rank, the unknown last; then file, device */
    if ((x->rank < 0) != (y->rank < 0)) return x->rank < 0 ? 1 : -1;
    if (x->rank != y->rank) return x->rank < y->rank ? -1 : 1;
    if (x->file != y->file) return x->file < y->file ? -1 : 1;
    return (x->device > y->device) - (x->device < y->device);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Whether two rows are one GPU: by its UUID where both records say it (a device's number is its
 * process's own: CUDA_VISIBLE_DEVICES=3 makes GPU 3 the process's device 0), else by host and
 * number.  Another host's GPU is never the same one. */
static int same_gpu(const rank_row *a, const rank_row *b)
{
    if (!a->host[0] || strcmp(a->host, b->host)) return 0;
    if (a->uuid[0] && b->uuid[0]) return !strcmp(a->uuid, b->uuid);
    return a->device == b->device;
}

/* Whether the rows are the ranks of one job, and if not, why not (each reason a phrase, joined
 * by "; " into why).  The ranks of one job say their rank (RANK, or SLURM's, Open MPI's), each a
 * different one, of one world size; run one program; start together (within 10 minutes: a
 * launcher starts them at once); and never share a device of one host.  Records that are not
 * are still compared side by side, but as separate runs, and said to be. */
#define RANKS_START_WINDOW_NS (600LL * 1000000000LL)
static int one_job(rank_row **rows, uint32_t n, uint32_t nfiles, char *why, size_t cap)
{
    size_t len = 0;
    why[0] = 0;
#define WHY(...) (len += (size_t)snprintf(why + len, len < cap ? cap - len : 0, "%s", len ? "; " : ""), \
                  len += (size_t)snprintf(why + len, len < cap ? cap - len : 0, __VA_ARGS__))
    if (nfiles < 2) return 1;
    int ranked = 0;
    for (uint32_t i = 0; i < n; i++) ranked += rows[i]->rank >= 0;
    if (!ranked) WHY("no record says which rank it was: RANK unset");
    else if ((uint32_t)ranked < n) WHY("%u of %u rows say no rank", n - (uint32_t)ranked, n);
    int dup = 0, ws = 0, prog = 0, shared = 0;
    int64_t first = 0, last = 0;
    for (uint32_t i = 0; i < n; i++) {
        const rank_row *a = rows[i];
        if (a->started_ns) first = !first || a->started_ns < first ? a->started_ns : first, last = a->started_ns > last ? a->started_ns : last;
        for (uint32_t j = 0; j < i; j++) {
            const rank_row *b = rows[j];
            if (a->file == b->file) continue; /* one process's devices */
            /* one process dumped twice, or a rank and a child it forked (a data loader that
             * touched the driver): one rank of the job, not two */
            int kin = !strcmp(a->host, b->host) && a->pid && (a->pid == b->pid || a->forked_from == b->pid || b->forked_from == a->pid ||
                                                              (a->forked_from && a->forked_from == b->forked_from));
            if (kin) continue;
            if (!dup && a->rank >= 0 && a->rank == b->rank) dup = 1, WHY("rank %d appears in two records", (int)a->rank);
            if (!ws && a->world_size >= 0 && b->world_size >= 0 && a->world_size != b->world_size)
                ws = 1, WHY("world sizes differ (%d and %d)", (int)b->world_size, (int)a->world_size);
            if (!prog && a->prog[0] && b->prog[0] && strcmp(a->prog, b->prog)) prog = 1, WHY("different programs (%s and %s)", b->prog, a->prog);
            if (!shared && same_gpu(a, b) && a->pid != b->pid) {
                shared = 1;
                if (a->device != b->device) WHY("two processes on one GPU of %s, %s, their devices %d and %d", a->host, a->uuid, b->device, a->device);
                else WHY("two processes on device %d of %s", a->device, a->host);
            }
        }
    }
    if (first && last - first > RANKS_START_WINDOW_NS) WHY("started %.1f h apart", (double)(last - first) / 3.6e12);
#undef WHY
    return !len;
}

static const char *who(const rank_row *r, const char *const *paths)
{
    static char ring[4][128];
    static int k;
    char *b = ring[k++ & 3];
    if (r->forked_from && r->parent && r->parent->rank >= 0) /* a child a rank forked: its own process, not a rank */
        snprintf(b, 128, "rank %d's forked child, pid %lld", (int)r->parent->rank, (long long)r->pid);
    else if (r->forked_from) snprintf(b, 128, "pid %lld, forked from pid %lld", (long long)r->pid, (long long)r->forked_from);
    else if (r->rank >= 0) snprintf(b, 128, "rank %d", (int)r->rank);
    else snprintf(b, 128, "%.80s", paths[r->file]);
    return b;
}

/* Whether the peaks follow the rank order: Kendall's tau between rank and peak over the rows
 * with a rank and a history (pairs of one rank, a process's two devices, left out), and its
 * exact two-sided permutation p-value: the share of the orders of the peaks among the ranks
 * whose |S| (concordant - discordant pairs) is as large, every order counted up to 9 ranks
 * (9! = 362880), past that the normal approximation with the ties' correction.  p_min: the
 * smallest p-value these ranks could give at all (the most extreme order's); with 4 ranks it is
 * 2/24 = 0.083: no order of 4 ranks tells a systematic imbalance from noise at 0.05. */
#define RANKS_TREND_ALPHA 0.05
#define RANKS_TREND_EXACT 9
typedef struct trend {
    double tau, p, p_min;
    uint32_t n; /* rows compared */
} trend;

static long trend_s(const int32_t *rk, const int64_t *v, uint32_t n, long *pairs)
{
    long sum = 0, np = 0;
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = i + 1; j < n; j++) {
            if (rk[i] == rk[j]) continue;
            int64_t d = (v[j] > v[i]) - (v[j] < v[i]);
            sum += rk[j] > rk[i] ? d : -d;
            np += d != 0;
        }
    if (pairs) *pairs = np;
    return sum;
}

static void rank_trend(rank_row **rows, uint32_t n, trend *t)
{
    memset(t, 0, sizeof *t);
    t->p = t->p_min = 1;
    int32_t *rk = malloc((n ? n : 1) * sizeof *rk);
    int64_t *v = malloc((n ? n : 1) * sizeof *v);
    uint32_t m = 0;
    for (uint32_t i = 0; rk && v && i < n; i++)
        if (rows[i]->rank >= 0 && rows[i]->history && !rows[i]->forked_from) rk[m] = rows[i]->rank, v[m] = rows[i]->alloc_peak, m++;
    t->n = m;
    long pairs = 0, s = m >= 2 ? trend_s(rk, v, m, &pairs) : 0;
    t->tau = pairs ? (double)s / (double)pairs : 0.0;
    if (m < 2 || !pairs) goto out;
    long as = s < 0 ? -s : s;
    if (m <= RANKS_TREND_EXACT) {
        /* every order of the peaks (Heap's algorithm), the ties among them as they are */
        uint32_t c[RANKS_TREND_EXACT] = {0};
        long total = 1, ge = 0, smax = 0, at_max = 0;
        int64_t w[RANKS_TREND_EXACT];
        memcpy(w, v, m * sizeof *w);
        for (;;) {
            long x = trend_s(rk, w, m, NULL);
            x = x < 0 ? -x : x;
            ge += x >= as;
            if (x > smax) smax = x, at_max = 1;
            else if (x == smax) at_max++;
            uint32_t i = 1;
            while (i < m && c[i] >= i) c[i++] = 0;
            if (i >= m) break;
            uint32_t j = i % 2 ? c[i] : 0;
            int64_t tmp = w[j];
            w[j] = w[i], w[i] = tmp;
            c[i]++, total++;
        }
        t->p = (double)ge / (double)total;
        t->p_min = (double)at_max / (double)total;
    } else {
        /* Var(S) = (n(n-1)(2n+5) - sum over tied groups t(t-1)(2t+5)) / 18; continuity-corrected */
        int64_t *u = malloc(m * sizeof *u);
        double var = (double)m * (m - 1) * (2.0 * m + 5);
        if (u) {
            memcpy(u, v, m * sizeof *u);
            qsort(u, m, sizeof *u, cmp_i64);
            for (uint32_t i = 0, j; i < m; i = j) {
                for (j = i + 1; j < m && u[j] == u[i];) j++;
                double tg = j - i;
                var -= tg * (tg - 1) * (2 * tg + 5);
            }
            free(u);
        }
        var /= 18;
        double z = var > 0 ? ((double)as - 1) / sqrt(var) : 0;
        t->p = z > 0 ? erfc(z / sqrt(2.0)) : 1.0;
        t->p_min = 0;
    }
out:
    free(rk);
    free(v);
}

/* The trend's verdict: "systematic" (p < 0.05), "not significant", or "too few ranks to tell"
 * (these ranks could give no p-value under 0.05, whatever their order) */
static const char *trend_verdict(const trend *t)
{
    if (t->n < 2 || t->p_min >= RANKS_TREND_ALPHA) return "too few ranks to tell";
    return t->p < RANKS_TREND_ALPHA ? "systematic" : "not significant";
}

/* The peaks' spread over the rows that have a history (n of them; none: no peak is known). */
typedef struct spread {
    int64_t min, median, max;
    const rank_row *min_row, *max_row;
    uint32_t n, unknown; /* rows with a peak; rows without a history (their peak not known) */
} spread;

static void spread_of(rank_row **rows, uint32_t n, int reserved, spread *sp)
{
    memset(sp, 0, sizeof *sp);
    if (!n) return;
    int64_t *v = malloc(n * sizeof *v);
    for (uint32_t i = 0; i < n; i++) {
        if (!rows[i]->history) {
            sp->unknown++;
            continue;
        }
        int64_t x = reserved ? rows[i]->reserved_peak : rows[i]->alloc_peak;
        if (v) v[sp->n] = x;
        sp->n++;
        if (!sp->min_row || x < sp->min) sp->min = x, sp->min_row = rows[i];
        if (!sp->max_row || x > sp->max) sp->max = x, sp->max_row = rows[i];
    }
    if (v && sp->n) {
        qsort(v, sp->n, sizeof *v, cmp_i64);
        sp->median = sp->n % 2 ? v[sp->n / 2] : (v[sp->n / 2 - 1] + v[sp->n / 2]) / 2;
    }
    free(v);
}

static void json_spread(cmh_jw *w, const char *key, const spread *sp, const char *const *paths)
{
    cmh_jw_key(w, key);
    if (!sp->n) { /* no record has a history: no peak to spread */
        cmh_jw_null(w);
        return;
    }
    cmh_jw_obj(w);
    cmh_jw_kint(w, "min", sp->min);
    cmh_jw_kstr(w, "min_of", sp->min_row ? who(sp->min_row, paths) : "");
    cmh_jw_kint(w, "median", sp->median);
    cmh_jw_kint(w, "max", sp->max);
    cmh_jw_kstr(w, "max_of", sp->max_row ? who(sp->max_row, paths) : "");
    cmh_jw_key(w, "max_over_median");
    cmh_jw_double(w, sp->median ? (double)sp->max / (double)sp->median : 0.0, 3);
    cmh_jw_end(w);
}

static void json_rows(cmh_jw *w, rank_row **rows, uint32_t n, const char *const *paths)
{
    cmh_jw_key(w, "processes");
    cmh_jw_arr(w);
    for (uint32_t i = 0; i < n; i++) {
        const rank_row *r = rows[i];
        cmh_jw_nl(w);
        cmh_jw_obj(w);
        cmh_jw_kstr(w, "file", paths[r->file]);
        if (r->rank >= 0) cmh_jw_kint(w, "rank", r->rank);
        else cmh_jw_key(w, "rank"), cmh_jw_null(w);
        if (r->rank >= 0) cmh_jw_kstr(w, "rank_from", r->rank_from_name ? "name" : "record");
        if (r->forked_from) {
            cmh_jw_kint(w, "forked_from", r->forked_from);
            cmh_jw_kstr(w, "child_of", r->parent ? (r->parent->rank >= 0 && !r->parent->forked_from ? who(r->parent, paths) : paths[r->parent->file]) : "");
        }
        if (r->local_rank >= 0) cmh_jw_kint(w, "local_rank", r->local_rank);
        if (r->world_size >= 0) cmh_jw_kint(w, "world_size", r->world_size);
        cmh_jw_kstr(w, "host", r->host);
        cmh_jw_kint(w, "pid", r->pid);
        cmh_jw_kint(w, "device", r->device);
        if (r->uuid[0]) { /* which GPU: the device number is the process's own */
            cmh_jw_kstr(w, "gpu_uuid", r->uuid);
            if (r->pci_bus[0]) cmh_jw_kstr(w, "gpu_pci_bus", r->pci_bus);
            if (r->gpu_name[0]) cmh_jw_kstr(w, "gpu_name", r->gpu_name);
        }
        cmh_jw_kuint(w, "trace_entries", r->entries);
        cmh_jw_kuint(w, "dropped_entries", r->dropped);
        cmh_jw_kbool(w, "history", r->history);
        if (r->history) {
            cmh_jw_kint(w, "peak_allocated", r->alloc_peak);
            rep_json_time(w, "peak_allocated_time_ns", r->alloc_time_ns);
            cmh_jw_kint(w, "peak_reserved", r->reserved_peak);
            rep_json_time(w, "peak_reserved_time_ns", r->reserved_time_ns);
        } else { /* no history: no peak to tell (null, not the end state dressed as one), as peak says */
            static const char *const unknown[] = {"peak_allocated", "peak_allocated_time_ns", "peak_reserved", "peak_reserved_time_ns"};
            for (int k = 0; k < 4; k++) cmh_jw_key(w, unknown[k]), cmh_jw_null(w);
            cmh_jw_kstr(w, "no_history_cause", r->nohist_cause ? r->nohist_cause : "");
        }
        cmh_jw_kint(w, "allocated_at_end", r->alloc_end);
        cmh_jw_kint(w, "reserved_at_end", r->reserved_end);
        if (r->history) cmh_jw_kuint(w, "ooms", r->ooms);
        else cmh_jw_knull(w, "ooms"); /* no history: not known, as oom --json says (it read 0) */
        if (r->ooms && r->ooms == r->ooms_gone) {
            cmh_jw_knull(w, "first_oom_number"); /* every one fell out of the ring: none to name */
        } else if (r->ooms) {
            cmh_jw_kuint(w, "first_oom_number", r->ooms_gone + 1); /* (the ones before it fell out of the ring) */
            rep_json_time(w, "first_oom_time_ns", r->first_oom_ns);
            cmh_jw_kint(w, "first_oom_entry", r->first_oom_entry);
            cmh_jw_kint(w, "first_oom_first_failed_entry", r->first_oom_asked);
            cmh_jw_kuint(w, "first_oom_requested", r->first_oom_request);
            rep_json_device_free(w, "first_oom_device_free", r->first_oom_free);
        }
        cmh_jw_kuint(w, "leaked_bytes", r->leaked_bytes);
        cmh_jw_kuint(w, "leaking_sites", r->leaking_sites);
        if (r->leak_site) cmh_jw_kstr(w, "leaking_site", r->leak_site);
        cmh_jw_kuint(w, "live_bytes_at_end", r->live_end);
        cmh_jw_kstr(w, r->history ? "top_site_at_peak" : "top_site_at_end", r->site ? r->site : "");
        cmh_jw_kuint(w, "top_site_bytes", r->site_bytes);
        if (r->ending) cmh_jw_kstr(w, "ending", r->ending);
        rep_json_time(w, "start_time_ns", r->t_start);
        cmh_jw_end(w);
    }
    cmh_jw_end(w);
}

int cmd_ranks(int argc, char **argv)
{
    char **args = malloc((size_t)(argc > 1 ? argc : 1) * sizeof *args);
    int nargs, rc = args ? cli_parse(&cli_cmd_ranks, argc, argv, args, &nargs) : CLI_ENOMEM;
    if (rc) {
        free(args);
        return rc < 0 ? cli_finish_stdout(0) : rc;
    }
    cmh_pathlist pl;
    rc = cmh_expand_paths(args, nargs, &pl);
    free(args);
    if (!rc && (rc = cmh_pathlist_one_per_process(&pl, "ranks"))) cmh_pathlist_free(&pl);
    if (rc) return rc;
    if (!pl.n) {
        cli_error("no .cmh or .pickle files in %s", nargs == 1 ? argv[argc - 1] : "the directories given");
        cmh_pathlist_free(&pl);
        return CLI_EFILE;
    }
    ranks_run run;
    memset(&run, 0, sizeof run);
    run.paths = pl.v;
    run.npaths = pl.n;
    pthread_mutex_init(&run.lock, NULL);
    run.slots = calloc(pl.n, sizeof *run.slots);
    if (!run.slots) {
        cmh_pathlist_free(&pl);
        return CLI_ENOMEM;
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int nt = g_jobs ? g_jobs : (int)(cores > 0 ? cores : 1);
    if ((uint32_t)nt > pl.n) nt = (int)pl.n;
    pthread_t th[256];
    int started = 0;
    for (; started < nt - 1; started++)
        if (pthread_create(&th[started], NULL, worker, &run) != 0) break;
    worker(&run);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);

    uint32_t nrows = 0, failed = 0, first_bad_rc = 0;
    for (uint32_t f = 0; f < pl.n; f++) {
        nrows += (uint32_t)run.slots[f].nrows;
        if (run.slots[f].rc) failed++, first_bad_rc = first_bad_rc ? first_bad_rc : (uint32_t)run.slots[f].rc;
    }
    if (!nrows && !failed) { /* nothing to compare (--device N none has): said, not "0 separate processes" */
        if (g_device == -1) cli_error("ranks: no record holds pinned host memory");
        else if (g_device >= 0) cli_error("ranks: no record has device %d", g_device);
        else cli_error("ranks: no record holds memory on a device");
        for (uint32_t f = 0; f < pl.n; f++) free(run.slots[f].rows);
        free(run.slots);
        pthread_mutex_destroy(&run.lock);
        cmh_pathlist_free(&pl);
        return CLI_EUSAGE;
    }
    rank_row **rows = malloc((nrows ? nrows : 1) * sizeof *rows);
    if (!rows) rc = CLI_ENOMEM;
    uint32_t k = 0;
    for (uint32_t f = 0; rows && f < pl.n; f++)
        for (int i = 0; i < run.slots[f].nrows; i++) rows[k++] = &run.slots[f].rows[i];
    if (rows) qsort(rows, nrows, sizeof *rows, cmp_row);
    const char *const *paths = (const char *const *)pl.v;
    /* a child a process forked without exec (its record says whose): its parent's, when the
     * parent's record is among the files; either way its own process, not a rank of the job:
     * listed and said to be, left out of the spread, the rank order and the job's checks (it
     * inherits its parent's RANK: it read as 'rank 0 appears in two records', or as a rank) */
    rank_row **cmp = malloc((nrows ? nrows : 1) * sizeof *cmp);
    uint32_t ncmp = 0, ncmp_files = 0, nchildren = 0;
    if (!cmp) rc = CLI_ENOMEM;
    for (uint32_t i = 0; rows && cmp && i < nrows; i++) {
        rank_row *r = rows[i];
        for (uint32_t j = 0; r->forked_from && !r->parent && j < nrows; j++)
            if (rows[j]->file != r->file && rows[j]->pid == r->forked_from && !strcmp(rows[j]->host, r->host)) r->parent = rows[j];
        if (r->forked_from) {
            nchildren++;
            continue;
        }
        int seen = 0;
        for (uint32_t j = 0; j < ncmp && !seen; j++) seen = cmp[j]->file == r->file;
        ncmp_files += !seen;
        cmp[ncmp++] = r;
    }
    if (!cmp) rows = (free(rows), NULL);

    int64_t t0 = 0;
    const rank_row *first_oom = NULL;
    uint32_t oom_ranks = 0, leak_ranks = 0;
    for (uint32_t i = 0; rows && i < nrows; i++) {
        const rank_row *r = rows[i];
        if (r->t_start && (!t0 || r->t_start < t0)) t0 = r->t_start;
        if (r->ooms) {
            oom_ranks++;
            /* a row whose OOMs all fell out of its history has no time: the first kept one's goes first */
            int none = r->ooms == r->ooms_gone, fnone = first_oom && first_oom->ooms == first_oom->ooms_gone;
            if (!first_oom || (fnone && !none) || (none == fnone && r->first_oom_ns < first_oom->first_oom_ns)) first_oom = r;
        }
        leak_ranks += r->leaking_sites > 0;
    }
    spread pa, pr;
    spread_of(cmp, rows ? ncmp : 0, 0, &pa);
    spread_of(cmp, rows ? ncmp : 0, 1, &pr);
    trend tr;
    rank_trend(cmp, rows ? ncmp : 0, &tr);
    char why[768];
    int job = rows ? one_job(cmp, ncmp, ncmp_files, why, sizeof why) : 1;
    if (!job && g_json) /* said where a script's reader sees it too (the text's first line says it) */
        fprintf(stderr, "cumemhist: ranks: these %u records are not the ranks of one job (%s): compared as separate runs\n", pl.n, why);

    if (rows && g_json) {
        cmh_jw w;
        cmh_jw_init(&w, stdout);
        cmh_jw_obj(&w);
        cmh_jw_kuint(&w, "files", pl.n);
        cmh_jw_kuint(&w, "unreadable", failed);
        cmh_jw_kbool(&w, "one_job", job);
        if (!job) cmh_jw_kstr(&w, "not_one_job_because", why);
        rep_json_time(&w, "time_origin_ns", t0);
        cmh_jw_nl(&w);
        json_rows(&w, rows, nrows, paths);
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "spread");
        cmh_jw_obj(&w);
        json_spread(&w, "peak_allocated", &pa, paths);
        json_spread(&w, "peak_reserved", &pr, paths);
        cmh_jw_kuint(&w, "peaks_not_known", pa.unknown); /* rows without a history, left out of the spread */
        cmh_jw_key(&w, "rank_trend");
        cmh_jw_double(&w, tr.tau, 3);
        cmh_jw_kuint(&w, "rank_trend_ranks", tr.n);
        cmh_jw_key(&w, "rank_trend_p"); /* the exact permutation p-value (two-sided) */
        cmh_jw_double(&w, tr.p, 4);
        cmh_jw_key(&w, "rank_trend_p_min"); /* the smallest these ranks could give */
        cmh_jw_double(&w, tr.p_min, 4);
        cmh_jw_kstr(&w, "rank_trend_verdict", trend_verdict(&tr));
        cmh_jw_end(&w);
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "forked_children");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < nrows; i++)
            if (rows[i]->forked_from) cmh_jw_str(&w, who(rows[i], paths));
        cmh_jw_end(&w);
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "leaking");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < nrows; i++)
            if (rows[i]->leaking_sites) cmh_jw_str(&w, who(rows[i], paths));
        cmh_jw_end(&w);
        cmh_jw_nl(&w);
        cmh_jw_key(&w, "first_oom");
        if (!first_oom) cmh_jw_null(&w);
        else {
            cmh_jw_obj(&w);
            cmh_jw_kstr(&w, "of", who(first_oom, paths));
            if (first_oom->rank >= 0) cmh_jw_kint(&w, "rank", first_oom->rank);
            cmh_jw_kstr(&w, "file", paths[first_oom->file]);
            cmh_jw_kstr(&w, "host", first_oom->host);
            cmh_jw_kint(&w, "device", first_oom->device);
            rep_json_time(&w, "time_ns", first_oom->first_oom_ns);
            cmh_jw_kint(&w, "entry", first_oom->first_oom_entry);
            cmh_jw_kint(&w, "first_failed_entry", first_oom->first_oom_asked);
            rep_json_time(&w, "first_failed_time_ns", first_oom->first_oom_asked_ns);
            cmh_jw_kuint(&w, "requested", first_oom->first_oom_request);
            rep_json_device_free(&w, "device_free", first_oom->first_oom_free);
            cmh_jw_kuint(&w, "ranks_that_ran_out", oom_ranks);
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
        putchar('\n');
    } else if (rows) {
        /* a row is a process and a device: count each process once (its file, host and pid) */
        uint32_t nprocs = 0;
        for (uint32_t i = 0; i < nrows; i++) {
            int seen = 0;
            for (uint32_t j = 0; j < i && !seen; j++)
                seen = rows[j]->file == rows[i]->file || /* one process dumped to two files counts once */
                       (rows[i]->pid && rows[j]->pid == rows[i]->pid && !strcmp(rows[j]->host, rows[i]->host));
            nprocs += !seen;
        }
        if (job) {
            /* devices: the GPUs (a row per process and device, the same GPU counted once) */
            uint32_t ndev = 0;
            for (uint32_t i = 0; i < nrows; i++) {
                int seen = 0;
                for (uint32_t j = 0; j < i && !seen; j++) seen = same_gpu(rows[j], rows[i]);
                ndev += !seen;
            }
            printf("%u record%s, %u process%s on %s", pl.n, pl.n == 1 ? "" : "s", nprocs, nprocs == 1 ? "" : "es",
                   rep_count(ndev, "device", "devices"));
            if (failed) printf(" (%u unreadable)", failed);
            uint32_t named = 0;
            for (uint32_t i = 0; i < nrows; i++) named += rows[i]->rank_from_name;
            if (named) printf("; %s the file names (--rank-from)", named == nrows ? "ranks from" : "some ranks from");
            printf("%s\n\n", t0 ? "; times from the job's first entry" : "; the records have no times");
        } else {
            printf("%u records, not the ranks of one job (%s): %u separate process%s, a row per process and device", pl.n, why, nprocs,
                   nprocs == 1 ? "" : "es");
            if (failed) printf(" (%u unreadable)", failed);
            printf("%s\n\n", t0 ? "; times from each record's own first entry" : "; the records have no times");
        }
        int hw = 4; /* the host column: as wide as the longest name, whole */
        for (uint32_t i = 0; i < nrows; i++)
            if ((int)strlen(rows[i]->host) > hw) hw = (int)strlen(rows[i]->host);
        /* device numbers that do not name GPUs (a process's own, CUDA_VISIBLE_DEVICES): one number
         * on one host for two GPUs, or one GPU under two numbers; the GPU's PCI bus id beside it */
        int renumbered = 0;
        for (uint32_t i = 0; i < nrows && !renumbered; i++)
            for (uint32_t j = 0; j < i && !renumbered; j++)
                renumbered = rows[i]->uuid[0] && rows[j]->uuid[0] && !strcmp(rows[i]->host, rows[j]->host) &&
                             (rows[i]->device == rows[j]->device) != (same_gpu(rows[i], rows[j]) != 0);
        printf("%6s  %-*s %4s  %s%10s %9s  %10s %9s  %4s  %10s  %s\n", "rank", hw, "host", "dev", renumbered ? "gpu (PCI bus)  " : "",
               "peak alloc", "when", "peak resv", "when", "OOMs", "leaked", "top site at the peak");
        for (uint32_t i = 0; i < nrows; i++) {
            const rank_row *r = rows[i];
            char rk[16];
            if (r->forked_from) snprintf(rk, sizeof rk, "child");
            else if (r->rank >= 0) snprintf(rk, sizeof rk, "%d", (int)r->rank);
            else snprintf(rk, sizeof rk, "-");
            char pa_s[32], pr_s[32]; /* rep_size's buffer is reused by the next call */
            snprintf(pa_s, sizeof pa_s, "%s", r->history ? rep_size((double)r->alloc_peak) : "not known");
            snprintf(pr_s, sizeof pr_s, "%s", r->history ? rep_size((double)r->reserved_peak) : "not known");
            char oo_s[16]; /* a record with no history: its OOMs are not known, as oom says (it read 0) */
            if (r->history) snprintf(oo_s, sizeof oo_s, "%u", r->ooms);
            else snprintf(oo_s, sizeof oo_s, "-");
            char gpu[40] = "";
            if (renumbered) snprintf(gpu, sizeof gpu, "%-13s  ", r->pci_bus[0] ? r->pci_bus : r->uuid[0] ? r->uuid + 4 : "-");
            const char *aw = r->history ? rep_when(r->alloc_time_ns, job ? t0 : r->t_start) : "-";
            const char *rw = r->history ? rep_when(r->reserved_time_ns, job ? t0 : r->t_start) : "-";
            printf("%6s  %-*s %4d  %s%10s %*s  %10s %*s  %4s  %10s  %s", rk, hw, r->host, r->device, gpu, pa_s, 9 + rep_wide(aw), aw, pr_s,
                   9 + rep_wide(rw), rw, oo_s,
                   r->leaking_sites ? rep_size((double)r->leaked_bytes) : "-", r->site ? r->site : "-");
            if (r->site_bytes) printf(", %s%s", rep_size((double)r->site_bytes), r->history ? "" : " at the end");
            if (r->rank < 0 || r->forked_from) printf("  [%s]", paths[r->file]);
            if (r->forked_from) printf("  (%s)", who(r, paths));
            /* how a rank ended, where that is news: a clean exit 0 (every rank's, now the exit dump
             * says it) would bury the one that died; --json has them all */
            if (r->ending && strncmp(r->ending, "exited with status 0;", 21)) printf("  (%s)", r->ending);
            if (!r->history) {
                printf("  (no history: the peak is not known; at the end %s allocated", rep_size((double)r->alloc_end));
                printf(", %s reserved; %s)", rep_size((double)r->reserved_end), r->nohist_cause ? r->nohist_cause : "");
            }
            putchar('\n');
        }
        if (nrows && !pa.n) {
            /* why, as the records say it (cmh_no_history_cause), not a guess: one cause when all
             * the rows share it, else each row says its own */
            const char *cause = rows[0]->nohist_cause;
            for (uint32_t i = 1; i < nrows && cause; i++)
                if (!rows[i]->nohist_cause || strcmp(rows[i]->nohist_cause, cause)) cause = NULL;
            printf("\npeak allocated: not known: no record has a history on any device (%s)\n",
                   cause ? cause : "the rows say why, each its own");
            printf("peak reserved:  not known\n");
        } else if (nrows) {
            printf("\npeak allocated: min %s (%s), median %s, max %s (%s)", rep_size((double)pa.min), who(pa.min_row, paths),
                   rep_size((double)pa.median), rep_size((double)pa.max), who(pa.max_row, paths));
            if (pa.median) printf(": the worst is %.2fx the median", (double)pa.max / (double)pa.median);
            printf("\npeak reserved:  min %s (%s), median %s, max %s (%s)\n", rep_size((double)pr.min), who(pr.min_row, paths),
                   rep_size((double)pr.median), rep_size((double)pr.max), who(pr.max_row, paths));
            if (pa.unknown)
                printf("(over the %s with a history; %u %s none, %s peak not known)\n", rep_count(pa.n, "row", "rows"), pa.unknown,
                       pa.unknown == 1 ? "has" : "have", pa.unknown == 1 ? "its" : "their");
            if (job && tr.n >= 3 && (tr.tau >= 0.5 || tr.tau <= -0.5)) {
                printf("the peaks %s with the rank (Kendall tau %+.2f over %u ranks", tr.tau > 0 ? "rise" : "fall", tr.tau, tr.n);
                if (tr.p_min >= RANKS_TREND_ALPHA) /* no order of so few ranks is significant */
                    printf("): too few ranks to tell a systematic imbalance from noise (the most extreme order of %u ranks has p = %.3f)\n",
                           tr.n, tr.p_min);
                else if (tr.p < RANKS_TREND_ALPHA)
                    printf(", p = %.3g): the imbalance is systematic, not noise\n", tr.p);
                else
                    printf(", p = %.3g): not significant, it may be noise\n", tr.p);
            }
        }
        for (uint32_t i = 0; i < nrows; i++)
            if (rows[i]->forked_from && (i == 0 || rows[i - 1]->file != rows[i]->file || !rows[i - 1]->forked_from)) {
                const rank_row *c = rows[i];
                printf("forked child: pid %lld", (long long)c->pid);
                if (c->parent) printf(", forked by %s (pid %lld)", c->parent->forked_from ? who(c->parent, paths) : c->parent->rank >= 0 ? who(c->parent, paths) : paths[c->parent->file], (long long)c->parent->pid);
                else printf(", forked from pid %lld (whose record is not among these)", (long long)c->forked_from);
                printf(": its own process, not a rank of the job; not in the spread%s\n", nchildren && tr.n ? " nor the rank order" : "");
            }
        if (leak_ranks) {
            printf("leaking: ");
            for (uint32_t i = 0, n = 0; i < nrows; i++)
                if (rows[i]->leaking_sites)
                    printf("%s%s, %s in %s (%s)", n++ ? "; " : "", who(rows[i], paths), rep_size((double)rows[i]->leaked_bytes),
                           rep_count(rows[i]->leaking_sites, "growing site", "growing sites"), rows[i]->leak_site ? rows[i]->leak_site : "-");
            putchar('\n');
        } else if (nrows) {
            printf("leaking: none\n");
        }
        if (first_oom && !job) { /* separate runs: no first of a job, each that ran out */
            printf("ran out of memory:");
            for (uint32_t i = 0, k = 0; i < nrows; i++)
                if (rows[i]->ooms && rows[i]->ooms == rows[i]->ooms_gone) /* none kept: no request to name */
                    printf("%s %s, device %d (%s, all fallen out of its history)", k++ ? ";" : "", who(rows[i], paths), rows[i]->device,
                           rep_count(rows[i]->ooms, "OOM", "OOMs"));
                else if (rows[i]->ooms)
                    printf("%s %s, device %d (%s%s requested, device free %s)", k++ ? ";" : "", who(rows[i], paths), rows[i]->device,
                           gone_note(rows[i]), rep_size((double)rows[i]->first_oom_request), rep_device_free(rows[i]->first_oom_free));
            printf(" (%u of %u)\n", oom_ranks, nrows);
        } else if (first_oom && first_oom->ooms == first_oom->ooms_gone)
            printf("first OOM: %s%s%s, device %d: its %u OOMs all fell out of its history (%u of %u ran out of memory)\n",
                   who(first_oom, paths), first_oom->host[0] ? " on " : "", first_oom->host, first_oom->device, first_oom->ooms, oom_ranks, nrows);
        else if (first_oom) {
            /* oom's OOM #n, at its entry and time as oom prints them (from the record's own
             * origin); the job's clock beside it when the job has several records */
            const rank_row *f = first_oom;
            char job_at[64] = "", began[128] = "";
            if (f->first_oom_ns && t0 && nrows > 1 && t0 != f->t_start)
                snprintf(job_at, sizeof job_at, "; %s from the job's first entry", rep_when(f->first_oom_ns, t0));
            if (f->first_oom_asked >= 0 && f->first_oom_asked != f->first_oom_entry)
                snprintf(began, sizeof began, "; its request first failed at %s, retried by the allocator",
                         rep_at(f->first_oom_asked, f->first_oom_asked_ns, f->t_start));
            printf("first OOM: %s%s%s, device %d, at %s (oom's out of memory #%u%s%s): %s%s requested, device free %s (%u of %u ran out of memory)\n",
                   who(f, paths), f->host[0] ? " on " : "", f->host, f->device, rep_at(f->first_oom_entry, f->first_oom_ns, f->t_start),
                   f->ooms_gone + 1, job_at, began, gone_note(f),
                   rep_size((double)f->first_oom_request), rep_device_free(f->first_oom_free), oom_ranks, nrows);
        }
        else if (nrows) {
            uint32_t unknown = 0;
            for (uint32_t i = 0; i < nrows; i++) unknown += !rows[i]->history;
            if (!unknown) printf("first OOM: none\n");
            else if (unknown == nrows) printf("first OOM: not known: no record has a history (their OOMs are not known)\n");
            else printf("first OOM: none in the %u with a history; %u %s none, so %s OOMs are not known\n", nrows - unknown, unknown,
                        unknown == 1 ? "has" : "have", unknown == 1 ? "its" : "their");
        }
    }
    free(rows);
    free(cmp);
    for (uint32_t f = 0; f < pl.n; f++) {
        for (int i = 0; run.slots[f].rows && i < run.slots[f].nrows; i++)
            free(run.slots[f].rows[i].ending), free(run.slots[f].rows[i].site), free(run.slots[f].rows[i].leak_site);
        free(run.slots[f].rows);
    }
    free(run.slots);
    pthread_mutex_destroy(&run.lock);
    uint32_t nfiles = pl.n;
    cmh_pathlist_free(&pl);
    if (rc) return rc;
    if (failed) {
        cli_error("%u of %u records could not be read (above)", failed, nfiles);
        rc = cli_finish_stdout(0);
        return rc ? rc : (int)first_bad_rc;
    }
    return cli_finish_stdout(0);
}

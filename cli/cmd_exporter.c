/*
 * cmd_exporter.c - `cumemhist exporter`: the recorded processes' memory as Prometheus metrics,
 * on /metrics over HTTP (libmicrohttpd; loopback unless --allow-remote) and/or as a textfile for
 * node_exporter's textfile collector (DIR/cumemhist.prom, written atomically by the output
 * rule of snapshot/atomic.c).
 *
 * One thread refreshes the live readers every --interval and renders the exposition into a
 * buffer, made into a ready response; the HTTP thread only queues the latest response, so a
 * scrape costs no render, no allocation and no copy, and never waits for a refresh.  The sites, owners and leak verdicts (a snapshot of each process, its
 * stacks symbolized, the analyzer's reports) are computed again every --analysis-interval.  The
 * OpenMetrics text goes to a client that asks for it (Prometheus does); the classic text format
 * (0.0.4) to any other and to the textfile.  Cardinality is bounded: per process and device, the
 * top --top sites and the owners (a few by nature).
 *
 * libmicrohttpd is opened (dlopen) when the exporter starts to listen, not linked: with it come
 * GnuTLS and its dependencies, megabytes of mappings every other command would load for nothing.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cumemhist/reports.h"
#include "live.h"

static const char *g_listen, *g_textfile;
static int g_remote, g_top = 10, g_interval = 1000, g_analysis = 60000, g_once, g_keep_ended = 300000;

static const cli_option g_opts[] = {
    {"--listen", NULL, CLI_STR, &g_listen, "ADDR:PORT", "serve /metrics there (default 127.0.0.1:9464 unless --textfile)", NULL, 0, 0, NULL},
    {"--allow-remote", NULL, CLI_FLAG, &g_remote, NULL, "allow a --listen address other than loopback", NULL, 0, 0, NULL},
    {"--textfile", NULL, CLI_STR, &g_textfile, "DIR", "write DIR/cumemhist.prom each interval (node_exporter's textfile collector)", NULL, 0, 0, NULL},
    {"--top", NULL, CLI_INT, &g_top, "N", "site series per process and device (default 10)", NULL, 0, 1000, NULL},
    {"--interval", NULL, CLI_INT, &g_interval, "MS", "refresh every MS milliseconds (default 1000)", NULL, 100, 3600000, NULL},
    {"--analysis-interval", NULL, CLI_INT, &g_analysis, "MS", "sites, owners and leak verdicts every MS (default 60000)", NULL, 100, 3600000, NULL},
    {"--keep-ended", NULL, CLI_INT, &g_keep_ended, "MS", "a process that ends keeps its final series, marked cumemhist_process_ended 1, for MS (default 300000: 5 minutes)", NULL, 0, 86400000, NULL},
    {"--once", NULL, CLI_FLAG, &g_once, NULL, "print the exposition once to standard output (or write the textfile once) and exit", NULL, 0, 0, NULL},
    CLI_FORCE_OPTION,
};

const cli_command cli_cmd_exporter = {
    "exporter", "[options] [PID|FLIGHT...]",
    "Export the CUDA memory of every process you run under cumemhist (or those named) as\n"
    "Prometheus metrics: per process and device allocated, reserved, peak and driver-used bytes,\n"
    "bytes by owner and by top site, out-of-memory errors and dropped entries as counters, and\n"
    "each growing site's growth per step.  A process that ends keeps its final series (its last\n"
    "OOM counted) for --keep-ended, marked cumemhist_process_ended 1; the exporter runs on until\n"
    "stopped (SIGINT, SIGTERM), named processes ended or not.  docs/OBSERVABILITY.md lists the\n"
    "metrics, a scrape configuration and alerting rules.",
    g_opts, CLI_NOPTS(g_opts), 0, 64, 0, "cumemhist exporter --listen 127.0.0.1:9464"};

/* ---- the exposition ---- */

typedef struct buf {
    char *p;
    size_t n, cap;
    int nomem;
} buf;

static void put(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0) return;
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t nc = b->cap ? b->cap * 2 : 65536;
        while (nc < b->n + (size_t)k + 1) nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->nomem = 1;
            return;
        }
        b->p = np, b->cap = nc;
    }
}

/* A label value as the format wants it: backslash, double quote and newline escaped; bytes a
 * label cannot hold (other control characters, invalid UTF-8 is passed as it is) as '?'. */
static void put_value(buf *b, const char *v, size_t max)
{
    char tmp[2200];
    size_t k = 0;
    for (size_t i = 0; v[i] && i < max && k + 3 < sizeof tmp; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '\\' || c == '"') tmp[k++] = '\\', tmp[k++] = (char)c;
        else if (c == '\n') tmp[k++] = '\\', tmp[k++] = 'n';
        else tmp[k++] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    tmp[k] = 0;
    put(b, "%s", tmp);
}

static void labels(buf *b, const cli_proc *p, int32_t device)
{
    const cmh_live_info *in = cmh_live_get_info(p->live);
    put(b, "{pid=\"%lld\",rank=\"", (long long)in->pid);
    if (in->rank >= 0) put(b, "%d", in->rank);
    put(b, "\",host=\"");
    put_value(b, in->host, 255);
    if (device >= 0) put(b, "\",device=\"%d\",command=\"", device);
    else put(b, "\",device=\"host\",command=\"");
    put_value(b, in->cmdline, 200);
    put(b, "\"");
}

typedef struct family {
    const char *name, *type, *unit, *help;
} family;

static void head(buf *b, const family *f, int om)
{
    /* OpenMetrics names a counter's family without _total; the classic format names the sample */
    if (om) {
        put(b, "# TYPE %s %s\n", f->name, f->type);
        if (f->unit) put(b, "# UNIT %s %s\n", f->name, f->unit);
        put(b, "# HELP %s %s\n", f->name, f->help);
    } else {
        const char *sfx = strcmp(f->type, "counter") ? "" : "_total";
        put(b, "# HELP %s%s %s\n# TYPE %s%s %s\n", f->name, sfx, f->help, f->name, sfx, f->type);
    }
}

enum { F_ALLOC, F_RESV, F_PEAK_A, F_PEAK_R, F_USED, F_TOTAL, F_USED_AGE, F_CHANGE, F_OWNER, F_SITE, F_GROWTH, F_OOMS, F_RETRIES, F_DROPPED, F_ENTRIES, F_ENDED, F_NF };
static const family g_fam[F_NF] = {
    {"cumemhist_allocated_bytes", "gauge", "bytes", "Bytes in blocks allocated now (blocks in state active_allocated)."},
    {"cumemhist_reserved_bytes", "gauge", "bytes", "Bytes in segments reserved from the driver now."},
    {"cumemhist_peak_allocated_bytes", "gauge", "bytes", "The most allocated bytes over the recorded history."},
    {"cumemhist_peak_reserved_bytes", "gauge", "bytes", "The most reserved bytes over the recorded history."},
    {"cumemhist_driver_used_bytes", "gauge", "bytes", "Device memory in use as cuMemGetInfo said at its latest sample (total - free), all processes; sampled cumemhist_driver_sample_age_seconds before the allocated and reserved figures."},
    {"cumemhist_driver_total_bytes", "gauge", "bytes", "Device memory as cuMemGetInfo said at its latest sample."},
    {"cumemhist_driver_sample_age_seconds", "gauge", "seconds", "How much earlier the latest cuMemGetInfo sample (driver_used, driver_total) was taken than the allocated and reserved figures hold for (the process's latest entry); 0 when it was taken at or after it."},
    {"cumemhist_allocated_change_bytes_per_minute", "gauge", NULL, "Change of allocated bytes per minute over the process's last minute (since its first allocation when younger)."},
    {"cumemhist_owner_bytes", "gauge", "bytes", "Device memory by owner now (PyTorch allocated and cached, each library, the program, not recorded)."},
    {"cumemhist_site_bytes", "gauge", "bytes", "Bytes held now by an allocation site, the top N per process and device."},
    {"cumemhist_site_growth_bytes_per_step", "gauge", NULL, "Growth per step of a site the leak verdict calls growing."},
    {"cumemhist_ooms", "counter", NULL, "Out-of-memory errors the program saw, as cumemhist oom and summary count them (a retry that succeeded is not one; those the ring dropped are)."},
    {"cumemhist_oom_retries", "counter", NULL, "Out-of-memory errors an allocator above the driver caught and asked again for (memory_summary's cudaMalloc retries), not ones the program saw."},
    {"cumemhist_dropped_entries", "counter", NULL, "Trace entries dropped past the ring's max_entries."},
    {"cumemhist_entries", "counter", NULL, "Trace entries recorded."},
    {"cumemhist_process_ended", "gauge", NULL, "1 once the process has ended: its series are its final figures, kept for --keep-ended, then gone; 0 while it runs."},
};

static const char *kind_name(int k)
{
    switch (k) {
    case CMH_OWN_TORCH_ALLOCATED: return "pytorch_allocated";
    case CMH_OWN_TORCH_CACHED: return "pytorch_cached";
    case CMH_OWN_TORCH_RESERVED: return "pytorch_reserved";
    case CMH_OWN_LIBRARY: return "library";
    case CMH_OWN_PROGRAM: return "program";
    case CMH_OWN_UNKNOWN: return "unknown";
    case CMH_OWN_PENDING_FREE: return "pending_free";
    case CMH_OWN_VMM_UNMAPPED: return "vmm_unmapped";
    case CMH_OWN_POOL_CACHE: return "pool_cache";
    case CMH_OWN_MANAGED: return "managed";
    default: return "not_recorded";
    }
}

static void render(cli_procs *ps, int om, int analyze, buf *b)
{
    b->n = 0;
    b->nomem = 0;
    if (b->p) b->p[0] = 0;
    uint32_t np = ps->n;
    cmh_live_device(*devs)[66] = malloc((np ? np : 1) * sizeof *devs);
    uint32_t *nd = malloc((np ? np : 1) * sizeof *nd);
    if (!devs || !nd) {
        free(devs), free(nd);
        b->nomem = 1;
        return;
    }
    for (uint32_t i = 0; i < np; i++) {
        nd[i] = cmh_live_devices(ps->v[i].live, devs[i], 66);
        if (nd[i] > 66) nd[i] = 66;
        /* (one that ended: once more on its final state, then kept: nothing new is read) */
        if (analyze || ps->v[i].ended) cli_proc_analyze(&ps->v[i], (uint32_t)g_top, 0);
    }
    put(b, "# HELP cumemhist_processes Recorded processes being read.\n# TYPE cumemhist_processes gauge\ncumemhist_processes %u\n", np);
    for (int f = 0; f < F_NF; f++) {
        head(b, &g_fam[f], om);
        for (uint32_t i = 0; i < np; i++) {
            cli_proc *p = &ps->v[i];
            for (uint32_t k = 0; k < nd[i]; k++) {
                const cmh_live_device *d = &devs[i][k];
                const char *sfx = strcmp(g_fam[f].type, "counter") ? "" : "_total";
                const cli_dev_analysis *a = NULL;
                for (uint32_t j = 0; p->analyzed && j < p->nan; j++)
                    if (p->an[j].device == d->device) a = &p->an[j];
                uint64_t v = 0;
                int64_t sv = 0;
                switch (f) {
                case F_ALLOC: v = d->allocated; break;
                case F_RESV: v = d->reserved; break;
                case F_PEAK_A: v = d->peak_allocated; break;
                case F_PEAK_R: v = d->peak_reserved; break;
                case F_USED: case F_TOTAL:
                    if (!d->meminfo_known) continue;
                    v = f == F_USED ? d->mem_total - d->mem_free : d->mem_total;
                    break;
                case F_USED_AGE: {
                    /* allocated and reserved hold as of the process's latest entry (they change
                     * only with an entry); the driver's figure is its sample's, taken earlier */
                    if (!d->meminfo_known || !d->mem_time_ns) continue;
                    int64_t last = cmh_live_get_info(p->live)->last_ns, age = last > d->mem_time_ns ? last - d->mem_time_ns : 0;
                    put(b, "%s", g_fam[f].name);
                    labels(b, p, d->device);
                    put(b, "} %" PRId64 ".%09" PRId64 "\n", age / 1000000000, age % 1000000000);
                    continue;
                }
                case F_CHANGE:
                    /* no rate yet: no sample, rather than a made-up one; one that ended changes no more (top: "ended") */
                    if (!d->change_known || p->ended) continue;
                    sv = d->change_per_min;
                    break;
                case F_OOMS: v = d->ooms; break;
                case F_RETRIES: v = d->oom_retries; break;
                case F_DROPPED: v = d->dropped; break;
                case F_ENTRIES: v = d->entries; break;
                case F_ENDED: v = p->ended ? 1 : 0; break;
                case F_OWNER:
                    for (uint32_t o = 0; a && o < a->nowners; o++) {
                        put(b, "%s", g_fam[f].name);
                        labels(b, p, d->device);
                        put(b, ",owner=\"");
                        put_value(b, a->owners[o].name, 95);
                        put(b, "\",kind=\"%s\"} %" PRIu64 "\n", kind_name(a->owners[o].kind), a->owners[o].bytes);
                    }
                    continue;
                case F_SITE: case F_GROWTH:
                    for (uint32_t s = 0; a && s < a->nsites; s++) {
                        if (f == F_GROWTH && (a->sites[s].verdict != CMH_LEAK_GROWING || a->sites[s].over_time)) continue; /* (a rate per step: none over time) */
                        put(b, "%s", g_fam[f].name);
                        labels(b, p, d->device);
                        put(b, ",site=\"");
                        put_value(b, a->sites[s].name, 300);
                        if (f == F_SITE) put(b, "\"} %" PRIu64 "\n", a->sites[s].bytes);
                        else put(b, "\"} %" PRId64 "\n", a->sites[s].rate);
                    }
                    continue;
                default: break;
                }
                put(b, "%s%s", g_fam[f].name, sfx);
                labels(b, p, d->device);
                if (f == F_CHANGE) put(b, "} %" PRId64 "\n", sv);
                else put(b, "} %" PRIu64 "\n", v);
            }
        }
    }
    if (om) put(b, "# EOF\n");
    free(devs);
    free(nd);
}

/* What an exposition shows, as one number: the processes, each device's figures (change per
 * minute included: it moves with the clock while a process is still) and when each was last
 * analyzed.  An equal number: the same exposition, not rendered again. */
static uint64_t fingerprint(cli_procs *ps)
{
    uint64_t f = 0xcbf29ce484222325ull;
#define MIX(p, n) for (size_t q_ = 0; q_ < (n); q_++) f = (f ^ ((const unsigned char *)(p))[q_]) * 0x100000001b3ull
    MIX(&ps->n, sizeof ps->n);
    for (uint32_t i = 0; i < ps->n; i++) {
        const cli_proc *p = &ps->v[i];
        const cmh_live_info *in = cmh_live_get_info(p->live);
        cmh_live_device d[66];
        uint32_t nd = cmh_live_devices(p->live, d, 66);
        if (nd > 66) nd = 66;
        MIX(&in->pid, sizeof in->pid);
        MIX(&in->bytes, sizeof in->bytes);
        MIX(&p->analyzed_ms, sizeof p->analyzed_ms);
        MIX(&p->ended, sizeof p->ended);
        MIX(&nd, sizeof nd);
        MIX(d, nd * sizeof *d); /* (cmh_live_devices zeroes each one first: no stray padding) */
    }
#undef MIX
    return f;
}

/* ---- serving ---- */

/* The few libmicrohttpd calls the exporter makes, found at run time. */
static struct {
    struct MHD_Daemon *(*start)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *, MHD_AccessHandlerCallback, void *, ...);
    void (*stop)(struct MHD_Daemon *);
    struct MHD_Response *(*from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
    enum MHD_Result (*add_header)(struct MHD_Response *, const char *, const char *);
    enum MHD_Result (*queue)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
    void (*destroy)(struct MHD_Response *);
    const char *(*lookup)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
} mhd;

static int load_mhd(char *why, size_t cap)
{
    void *h = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why, cap, "%s (install Debian's libmicrohttpd12)", dlerror());
        return -1;
    }
    *(void **)&mhd.start = dlsym(h, "MHD_start_daemon");
    *(void **)&mhd.stop = dlsym(h, "MHD_stop_daemon");
    *(void **)&mhd.from_buffer = dlsym(h, "MHD_create_response_from_buffer");
    *(void **)&mhd.add_header = dlsym(h, "MHD_add_response_header");
    *(void **)&mhd.queue = dlsym(h, "MHD_queue_response");
    *(void **)&mhd.destroy = dlsym(h, "MHD_destroy_response");
    *(void **)&mhd.lookup = dlsym(h, "MHD_lookup_connection_value");
    if (!mhd.start || !mhd.stop || !mhd.from_buffer || !mhd.add_header || !mhd.queue || !mhd.destroy || !mhd.lookup) {
        snprintf(why, cap, "libmicrohttpd.so.12 lacks a function the exporter calls");
        return -1;
    }
    return 0;
}

/*
 * The latest exposition, as two ready responses ([0] classic, [1] OpenMetrics) made by the
 * refreshing thread.  A scrape takes one under g_lock and queues it (MHD counts its references,
 * under the response's own lock): it allocates nothing, copies nothing and never waits for a
 * render, only for the swap of two pointers.  Allocating and copying the buffer in the HTTP
 * thread, as the first version did, also made a scrape wait on the address space's lock while
 * the refreshing thread remapped records or faulted pages in.
 */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct MHD_Response *g_resp[2];
static volatile sig_atomic_t g_stop;

static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* Hand the rendered buffers to MHD as the responses scrapes get from now on (the buffers are
 * MHD's then, freed when the last connection sending them is done; b[] is left empty).  When a
 * response cannot be made, the previous one stays. */
static void publish(buf b[2])
{
    struct MHD_Response *r[2], *old[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        r[i] = NULL;
        if (b[i].nomem || !b[i].p) continue;
        r[i] = mhd.from_buffer(b[i].n, b[i].p, MHD_RESPMEM_MUST_FREE);
        if (!r[i]) continue;
        b[i].p = NULL, b[i].n = b[i].cap = 0;
        mhd.add_header(r[i], "Content-Type", i ? "application/openmetrics-text; version=1.0.0; charset=utf-8" : "text/plain; version=0.0.4; charset=utf-8");
    }
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 2; i++)
        if (r[i]) old[i] = g_resp[i], g_resp[i] = r[i];
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; i < 2; i++)
        if (old[i]) mhd.destroy(old[i]); /* ours is dropped; a scrape still sending it keeps it */
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method, const char *version,
                              const char *data, size_t *size, void **state)
{
    (void)cls, (void)version, (void)data, (void)size, (void)state;
    struct MHD_Response *r;
    unsigned status = MHD_HTTP_OK;
    const char *type = "text/plain; charset=utf-8";
    if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
        static const char no[] = "only GET\n";
        r = mhd.from_buffer(sizeof no - 1, (void *)no, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_METHOD_NOT_ALLOWED;
    } else if (!strcmp(url, "/metrics")) {
        const char *accept = mhd.lookup(c, MHD_HEADER_KIND, "Accept");
        int om = accept && strstr(accept, "application/openmetrics-text");
        pthread_mutex_lock(&g_lock);
        enum MHD_Result ok = g_resp[om] ? mhd.queue(c, MHD_HTTP_OK, g_resp[om]) : MHD_NO;
        pthread_mutex_unlock(&g_lock);
        return ok;
    } else if (!strcmp(url, "/")) {
        static const char home[] = "cumemhist exporter: the metrics are at /metrics\n";
        r = mhd.from_buffer(sizeof home - 1, (void *)home, MHD_RESPMEM_PERSISTENT);
    } else {
        static const char nf[] = "not found: the metrics are at /metrics\n";
        r = mhd.from_buffer(sizeof nf - 1, (void *)nf, MHD_RESPMEM_PERSISTENT);
        status = MHD_HTTP_NOT_FOUND;
    }
    if (!r) return MHD_NO;
    mhd.add_header(r, "Content-Type", type);
    enum MHD_Result ok = mhd.queue(c, status, r);
    mhd.destroy(r);
    return ok;
}

/* "127.0.0.1:9464", "[::1]:9464", "localhost:9464", ":9464" (all addresses: not loopback). */
static int parse_listen(const char *s, struct sockaddr_storage *sa, int *v6, int *loopback)
{
    char host[256];
    const char *colon = s[0] == '[' ? strstr(s, "]:") : strrchr(s, ':');
    if (!colon) return -1;
    size_t hl = (size_t)(colon - s);
    if (s[0] == '[') {
        if (hl < 1 || hl - 1 >= sizeof host) return -1;
        memcpy(host, s + 1, hl - 1), host[hl - 1] = 0;
        colon++;
    } else {
        if (hl >= sizeof host) return -1;
        memcpy(host, s, hl), host[hl] = 0;
    }
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 1 || port > 65535) return -1;
    memset(sa, 0, sizeof *sa);
    if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
    struct sockaddr_in *a4 = (struct sockaddr_in *)sa;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)sa;
    if (!host[0]) {
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port), a4->sin_addr.s_addr = htonl(INADDR_ANY);
        *v6 = 0, *loopback = 0;
    } else if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET, a4->sin_port = htons((uint16_t)port);
        *v6 = 0, *loopback = (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6, a6->sin6_port = htons((uint16_t)port);
        *v6 = 1, *loopback = IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr);
    } else return -1;
    return 0;
}

static int write_textfile(const buf *b)
{
    char path[4200], err[4400];
    snprintf(path, sizeof path, "%s/cumemhist.prom", g_textfile);
    cmh_atomic a;
    /* node_exporter reads it, often as another user: a new file is 0666 less the umask */
    /* and, as every output, it replaces only its own earlier textfile (its first line, a comment
     * the collector skips) or with --force: another program's cumemhist.prom was replaced unasked */
    FILE *fp = cmh_output_open(&a, path, CMH_OUT_SHARED | CMH_OUT_PUBLIC | CMH_OUT_AS(CMH_KIND_METRICS), err, sizeof err);
    if (!fp) {
        cli_error("%s", err);
        return CLI_EFILE;
    }
    fputs(CMH_METRICS_MARK, fp);
    fwrite(b->p ? b->p : "", 1, b->n, fp);
    if (cmh_atomic_commit(&a, err, sizeof err) != CMH_OK) {
        cli_error("%s", err);
        return CLI_EFILE;
    }
    return 0;
}

/* The processes named on the command line that ended at this look, said once each: the
 * exporter goes on (a scrape target that went down with its job lost the job's last interval) */
static void say_ended(const cli_procs *ps)
{
    if (!ps->nnamed) return; /* (all processes: the metrics say it, cumemhist_process_ended) */
    for (uint32_t i = 0; i < ps->n; i++) {
        const cli_proc *p = &ps->v[i];
        if (!p->just_ended) continue;
        char keep[64];
        if (g_keep_ended % 60000 == 0) snprintf(keep, sizeof keep, "%d min", g_keep_ended / 60000);
        else if (g_keep_ended % 1000 == 0) snprintf(keep, sizeof keep, "%d s", g_keep_ended / 1000);
        else snprintf(keep, sizeof keep, "%d ms", g_keep_ended);
        fprintf(stderr, "cumemhist: pid %lld ended (it %s); its final figures stay in the metrics for %s (--keep-ended), "
                        "marked cumemhist_process_ended 1; the exporter goes on until stopped\n",
                (long long)p->pid, p->ending, keep);
    }
}

static int64_t mono_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int cmd_exporter(int argc, char **argv)
{
    char *args[64];
    int n, rc = cli_parse(&cli_cmd_exporter, argc, argv, args, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    struct sockaddr_storage sa;
    int v6 = 0, loop = 1;
    const char *listen = g_listen ? g_listen : g_textfile || g_once ? NULL : "127.0.0.1:9464";
    if (listen) {
        if (parse_listen(listen, &sa, &v6, &loop) != 0) {
            cli_error("exporter: --listen %s: not ADDR:PORT (a numeric address or localhost, e.g. 127.0.0.1:9464 or [::1]:9464)", listen);
            return CLI_EUSAGE;
        }
        if (!loop && !g_remote) {
            cli_error("exporter: --listen %s is not a loopback address: the metrics name your processes and their command lines; "
                      "add --allow-remote to serve them beyond this host", listen);
            return CLI_EUSAGE;
        }
    }
    cli_procs ps;
    memset(&ps, 0, sizeof ps);
    ps.named = args;
    ps.nnamed = n;
    ps.quiet = 1;
    ps.trace_cap = g_once ? 0 : CLI_LIVE_TRACE;
    ps.keep_ended_ms = g_keep_ended;
    /* a process that registers is opened at once, held until the next refresh reads it: one
     * that ends before then (an OOM at start-up) is still exported, ended, for --keep-ended */
    if (!g_once) cli_procs_watch(&ps);
    if ((rc = cli_procs_update(&ps))) return cli_procs_free(&ps), rc;
    buf b[2] = {{0}, {0}};
    if (g_once) {
        render(&ps, 0, 1, &b[0]);
        if (g_textfile) rc = write_textfile(&b[0]);
        else {
            fwrite(b[0].p ? b[0].p : "", 1, b[0].n, stdout);
            rc = cli_finish_stdout(0);
        }
        free(b[0].p);
        cli_procs_free(&ps);
        return rc;
    }
    /* the first exposition, sites and owners included (the slow one: before the port opens) */
    render(&ps, 0, 1, &b[0]);
    render(&ps, 1, 0, &b[1]);
    if (g_textfile && (rc = write_textfile(&b[0]))) {
        for (int i = 0; i < 2; i++) free(b[i].p);
        cli_procs_free(&ps);
        return rc;
    }
    struct MHD_Daemon *d = NULL;
    if (listen) {
        char why[512];
        if (load_mhd(why, sizeof why) != 0) {
            cli_error("exporter: no HTTP server: %s", why);
            for (int i = 0; i < 2; i++) free(b[i].p);
            cli_procs_free(&ps);
            return CLI_EFILE;
        }
        publish(b);
        /* (no MHD_USE_ERROR_LOG: its "Failed to bind to port 0" came before our own message, which says it) */
        d = mhd.start(MHD_USE_INTERNAL_POLLING_THREAD | (v6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, answer, NULL,
                             MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_CONNECTION_LIMIT, (unsigned)64,
                             MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10, MHD_OPTION_END);
        if (!d) {
            cli_error("exporter: cannot listen on %s: %s", listen, strerror(errno));
            for (int i = 0; i < 2; i++)
                if (g_resp[i]) mhd.destroy(g_resp[i]), g_resp[i] = NULL;
            cli_procs_free(&ps);
            return CLI_EFILE;
        }
        fprintf(stderr, "cumemhist: exporter: http://%s/metrics (%u process%s)\n", listen, ps.n, ps.n == 1 ? "" : "es");
    }
    signal(SIGINT, on_stop);
    signal(SIGTERM, on_stop);
    signal(SIGPIPE, SIG_IGN);
    /* Refreshes on a fixed cadence, not an interval after each one's work: the deadline moves
     * on by --interval each time (skipping any it already missed). */
    int64_t last_analysis = mono_ms();
    uint64_t last_fp = fingerprint(&ps);
    struct timespec due;
    clock_gettime(CLOCK_MONOTONIC, &due);
    while (!g_stop) {
        due.tv_sec += g_interval / 1000;
        due.tv_nsec += (long)(g_interval % 1000) * 1000000;
        if (due.tv_nsec >= 1000000000) due.tv_sec++, due.tv_nsec -= 1000000000;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec > due.tv_sec || (now.tv_sec == due.tv_sec && now.tv_nsec > due.tv_nsec)) due = now;
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR && !g_stop) {}
        if (g_stop) break;
        if ((rc = cli_procs_update(&ps))) break;
        say_ended(&ps);
        int analyze = mono_ms() - last_analysis >= g_analysis;
        if (analyze) last_analysis = mono_ms();
        uint64_t fp = analyze ? 0 : fingerprint(&ps);
        if (!analyze && fp == last_fp) continue; /* nothing to show that is not shown already */
        render(&ps, 0, analyze, &b[0]);
        render(&ps, 1, 0, &b[1]);
        last_fp = fingerprint(&ps);
        if (g_textfile && (rc = write_textfile(&b[0]))) break;
        if (d) publish(b);
    }
    if (d) mhd.stop(d);
    for (int i = 0; i < 2; i++) {
        free(b[i].p);
        if (g_resp[i]) mhd.destroy(g_resp[i]), g_resp[i] = NULL;
    }
    cli_procs_free(&ps);
    return rc;
}

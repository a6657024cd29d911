/*
 * cmd_kernels.c - `cumemhist kernels`: the kernel timing recorded with `record --kernels`, one
 * row per kernel, as torch.profiler's key_averages().table() shows it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "report.h"

static int g_top = 20, g_json, g_sort = CMH_KSORT_TOTAL, g_device = -2;
static const char *const g_sorts[] = {"total", "avg", "calls", "max", NULL}; /* the CMH_KSORT_* order */

static const cli_option g_opts[] = {
    {"--device", NULL, CLI_DEVICE, &g_device, "N", "only kernels that ran on device N (default: every device)", NULL, 0, 0, NULL},
    {"--sort", NULL, CLI_CHOICE, &g_sort, "total|avg|calls|max", "order of the rows (default total)", g_sorts, 0, 0, NULL},
    CLI_OPT_TOP(&g_top, "rows to print (default 20)"),
    {"--json", NULL, CLI_FLAG, &g_json, NULL, "machine-readable output (durations in ns)", NULL, 0, 0, NULL},
};

const cli_command cli_cmd_kernels = {
    "kernels", "[options] SNAPSHOT",
    "Kernel timing recorded with `cumemhist record --kernels` (CUPTI), one row per kernel, as in\n"
    "torch.profiler's key_averages().table(): calls, total, average, minimum and maximum\n"
    "duration, and the share of all kernel time.",
    g_opts, CLI_NOPTS(g_opts), 1, 1, 0, "cumemhist kernels run.cmh --sort avg --top 10"};

static void time_fmt(char *buf, size_t n, double ns)
{
    double us = ns / 1000.0; /* torch.autograd.profiler's format_time */
    if (us >= 1e6) snprintf(buf, n, "%.3fs", us / 1e6);
    else if (us >= 1e3) snprintf(buf, n, "%.3fms", us / 1e3);
    else snprintf(buf, n, "%.3fus", us);
}

int cmd_kernels(int argc, char **argv)
{
    char *path;
    int n, rc = cli_parse(&cli_cmd_kernels, argc, argv, &path, &n);
    if (rc) return rc < 0 ? cli_finish_stdout(0) : rc;
    cmh_snapshot s;
    if ((rc = cli_load(path, &s))) return rc;
    cmh_kernel_row *rows;
    uint32_t nr;
    int64_t total;
    int32_t dev;
    if (g_device != -2 && rep_devices(path, &s, g_device, 0, &dev, 1) < 0) { /* (a record without kernel timing too) */
        cmh_snapshot_free(&s);
        return CLI_EUSAGE;
    }
    int crc = cmh_kernel_table(&s, g_device == -2 ? CMH_ALL_DEVICES : g_device, g_sort, &rows, &nr, &total);
    if (crc != CMH_OK) {
        cmh_snapshot_free(&s);
        return cli_fail(path, crc);
    }
    const char *status = s.kernels_status ? cmh_str(&s, s.kernels_status) : "not recorded (cumemhist record --kernels)";
    if (g_json) {
        cmh_jw w;
        cmh_jw_init(&w, stdout);
        cmh_jw_obj(&w);
        cmh_jw_kstr(&w, "file", path);
        if (g_device == -2) cmh_jw_knull(&w, "device");
        else cmh_jw_kint(&w, "device", g_device);
        rep_json_process(&w, &s);
        cmh_jw_kstr(&w, "status", status);
        uint64_t launches = 0; /* of the device asked for, as the rows count them */
        for (uint32_t i = 0; i < nr; i++) launches += rows[i].calls;
        cmh_jw_kuint(&w, "kernels", g_device == -2 ? s.nkernels : launches);
        cmh_jw_kuint(&w, "dropped", s.kernels_dropped);
        cmh_jw_kint(&w, "gpu_time_ns", total);
        cmh_jw_key(&w, "rows");
        cmh_jw_arr(&w);
        for (uint32_t i = 0; i < nr && (int)i < g_top; i++) {
            cmh_jw_nl(&w);
            cmh_jw_obj(&w);
            cmh_jw_kstr(&w, "name", cmh_str(&s, rows[i].name));
            cmh_jw_kuint(&w, "calls", rows[i].calls);
            cmh_jw_kint(&w, "total_ns", rows[i].total_ns);
            cmh_jw_kdouble(&w, "avg_ns", rows[i].avg_ns, 1);
            cmh_jw_kint(&w, "min_ns", rows[i].min_ns);
            cmh_jw_kint(&w, "max_ns", rows[i].max_ns);
            cmh_jw_kdouble(&w, "pct", rows[i].pct, 4);
            cmh_jw_end(&w);
        }
        cmh_jw_end(&w);
        cmh_jw_end(&w);
        putchar('\n');
    } else if (!s.nkernels) {
        printf("%s: no kernel timing: %s\n", path, status);
    } else {
        rep_print_process(path, &s);
        if (g_device != -2) printf("%s:\n", rep_device_name(g_device));
        printf("%-60s %8s %12s %12s %12s %12s %9s\n", "Name", "Calls", "Total", "Avg", "Min", "Max", "GPU time");
        for (uint32_t i = 0; i < nr && (int)i < g_top; i++) {
            char t[4][32];
            time_fmt(t[0], 32, (double)rows[i].total_ns);
            time_fmt(t[1], 32, rows[i].avg_ns);
            time_fmt(t[2], 32, (double)rows[i].min_ns);
            time_fmt(t[3], 32, (double)rows[i].max_ns);
            printf("%-60.60s %8" PRIu64 " %12s %12s %12s %12s %8.2f%%\n", cmh_str(&s, rows[i].name), rows[i].calls, t[0], t[1],
                   t[2], t[3], rows[i].pct);
        }
        if (nr > (uint32_t)g_top) printf("... %s (--top)\n", rep_count(nr - (uint32_t)g_top, "more kernel", "more kernels"));
        char tt[32];
        time_fmt(tt, sizeof tt, (double)total);
        printf("Self CUDA time total: %s (%u kernel launches)\n", tt, s.nkernels);
        if (s.kernels_dropped) printf("note: CUPTI dropped %" PRIu64 " record%s; the table misses %s\n", s.kernels_dropped,
                                      s.kernels_dropped == 1 ? "" : "s", s.kernels_dropped == 1 ? "it" : "them");
    }
    free(rows);
    cmh_snapshot_free(&s);
    return cli_finish_stdout(0);
}

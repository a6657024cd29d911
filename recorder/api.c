/*
 * api.c - the recorder's public C API (include/cumemhist/recorder.h): recording options, dumps
 * on request, counters, the block API for allocators above the driver, marks and ranges.
 *
 * Every function is safe to call from any thread at any time, returns CMH_OK or a negative
 * CMH_E* code, and never aborts the program.
 */
#include <stdint.h>

#include "internal.h"

CMH_EXPORT int cmh_record_memory_history(const cmh_options *o)
{
    int rc = cmh_config_apply(o);
    if (rc == CMH_OK && o->clear_history && o->enabled != CMH_ENABLED_OFF) cmh_pools_resample();
    return rc;
}

CMH_EXPORT int cmh_dump_snapshot(const char *path) { return cmh_dump(path, "cmh_dump_snapshot"); }

CMH_EXPORT int cmh_output_path(char *buf, size_t cap)
{
    if (!buf || !cap) return CMH_EINVAL;
    return cmh_config_output_path(cmh_cfg.output, buf, cap) == 0 ? CMH_OK : CMH_EINVAL;
}

CMH_EXPORT int cmh_set_torch_snapshot_hook(int (*fn)(const char *path, void *arg), void *arg)
{
    return cmh_dump_set_torch_hook(fn, arg);
}

CMH_EXPORT int cmh_torch_snapshot_file(const char *path) { return cmh_dump_set_torch_file(path); }

CMH_EXPORT int cmh_set_python_stacks(int mode) { return cmh_pystack_set_mode(mode); }

CMH_EXPORT int cmh_memory_stats(cmh_device_stats *out, int cap)
{
    if (cap < 0 || (cap && !out)) return CMH_EINVAL;
    return cmh_hist_stats(out, cap);
}

CMH_EXPORT uint64_t cmh_lost_events(void) { return __atomic_load_n(&cmh_lost, __ATOMIC_RELAXED); }

/* ---- the block API: allocators above the driver ---- */

CMH_EXPORT int cmh_segment_managed(uint64_t ptr) { return cmh_blocks_segment_managed(ptr); }

CMH_EXPORT int cmh_block_alloc(uint64_t ptr, uint64_t size, uint64_t requested, uint64_t stream)
{
    if (!ptr || !size) return CMH_EINVAL;
    return cmh_blocks_alloc(cmh_current_device(), ptr, size, requested ? requested : size, stream);
}

CMH_EXPORT int cmh_block_free_requested(uint64_t ptr) { return cmh_blocks_free_requested(ptr); }

CMH_EXPORT int cmh_block_free_completed(uint64_t ptr) { return cmh_blocks_free_completed(ptr); }

/* ---- marks and ranges ---- */

CMH_EXPORT int cmh_thread_name(const char *name)
{
    if (!name) return CMH_EINVAL;
    cmh_hist_name_thread(name);
    return CMH_OK;
}

CMH_EXPORT int cmh_mark(const char *name)
{
    if (!cmh_rec_enabled()) return CMH_OK;
    return cmh_marks_record(cmh_current_device(), cmh_marks_name_id(name), 0);
}

/* Each thread's open ranges, by name id: the caller's string is copied at push (marks.c), so
 * one built in a stack buffer may be gone by the pop. */
#define MAX_DEPTH 64
static __thread uint32_t t_ranges[MAX_DEPTH];
static __thread int t_depth;

CMH_EXPORT int cmh_range_push(const char *name)
{
    uint32_t id = cmh_marks_name_id(name);
    if (t_depth < MAX_DEPTH) t_ranges[t_depth] = id;
    t_depth++;
    if (!cmh_rec_enabled()) return CMH_OK;
    return cmh_marks_record(cmh_current_device(), id, 1);
}

CMH_EXPORT int cmh_range_pop(void)
{
    if (t_depth <= 0) return CMH_EINVAL;
    t_depth--;
    if (!cmh_rec_enabled()) return CMH_OK;
    return cmh_marks_record(cmh_current_device(), t_depth < MAX_DEPTH ? t_ranges[t_depth] : cmh_marks_name_id(""), 2);
}

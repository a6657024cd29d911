/*
 * report_sites.h - (internal to the analyzer) live bytes grouped by site, as the reports build
 * them: the map reports.c keeps for the peak and cmh_live_sites, which leaks.c fills with the
 * blocks still live at the end.
 */
#ifndef CMH_REPORT_SITES_H
#define CMH_REPORT_SITES_H

#include "cumemhist/reports.h"
#include "oatab.h"

typedef struct cmh_site_map {
    cmh_site *v; /* dense, in order of appearance */
    uint32_t n, cap;
    cmh_oatab index; /* group + 1 -> index in v */
    cmh_oatab stacks; /* stack + 1 -> the bytes of the blocks with that stack (stack_slot) */
    const cmh_sites *sites; /* the grouping; NULL: every stack its own group */
    int failed;             /* out of memory: the map is incomplete */
} cmh_site_map;

void cmh_site_map_init(cmh_site_map *m, const cmh_sites *sites);
void cmh_site_map_free(cmh_site_map *m);
/* A block the program still holds (a cmh_replay_blocks / cmh_end_blocks visitor, arg the map).
 * One freed with stream work pending is not: the program let it go, only the allocator has yet
 * to reuse it (allocated, PyTorch's own figure, leaves it out too, so the sites at the allocated
 * peak and at the end sum to it). */
void cmh_site_map_add_block(void *arg, const cmh_live_block *b);
/* The sites, sorted, handed over to *out (the map is emptied); CMH_ENOMEM if it was incomplete. */
int cmh_site_map_finish(cmh_site_map *m, cmh_site **out, uint32_t *n);

#endif

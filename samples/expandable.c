/*
 * expandable.c - a growing buffer on the virtual memory API, the way PyTorch's expandable
 * segments work: reserve a large address range once, map physical chunks at its end as demand
 * grows, unmap them from the end when it shrinks.  The recorder shows one segment that grows
 * and shrinks, with segment_map / segment_unmap entries:
 *   cumemhist record -o exp.cmh -- ./expandable && cumemhist trace exp.cmh
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

#define MAX_CHUNKS 64

typedef struct growable {
    CUdeviceptr base;
    size_t chunk, mapped, reserved;
    CUmemGenericAllocationHandle h[MAX_CHUNKS];
    int n;
    CUmemAllocationProp prop;
} growable;

static void grow_to(growable *g, size_t bytes)
{
    while (g->mapped < bytes && g->n < MAX_CHUNKS) {
        CHECK(cuMemCreate(&g->h[g->n], g->chunk, &g->prop, 0));
        CHECK(cuMemMap(g->base + g->mapped, g->chunk, 0, g->h[g->n], 0));
        CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, g->prop.location.id}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
        CHECK(cuMemSetAccess(g->base + g->mapped, g->chunk, &acc, 1));
        g->mapped += g->chunk;
        g->n++;
    }
}

static void shrink_to(growable *g, size_t bytes)
{
    while (g->n > 0 && g->mapped - g->chunk >= bytes) {
        g->mapped -= g->chunk;
        CHECK(cuMemUnmap(g->base + g->mapped, g->chunk));
        CHECK(cuMemRelease(g->h[--g->n]));
    }
}

int main(void)
{
    CUdevice dev = sample_init(NULL);
    growable g;
    memset(&g, 0, sizeof g);
    g.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    g.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    g.prop.location.id = dev;
    CHECK(cuMemGetAllocationGranularity(&g.chunk, &g.prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    if (g.chunk < (2u << 20)) g.chunk = 2u << 20;
    g.reserved = MAX_CHUNKS * g.chunk;
    CHECK(cuMemAddressReserve(&g.base, g.reserved, 0, 0, 0));
    /* demand rises and falls over a few "steps" */
    static const int demand_mib[] = {5, 12, 30, 18, 40, 8, 22};
    size_t peak = 0;
    for (size_t i = 0; i < sizeof demand_mib / sizeof *demand_mib; i++) {
        size_t want = (size_t)demand_mib[i] << 20;
        if (want > g.mapped) grow_to(&g, want);
        else shrink_to(&g, want);
        if (g.mapped > peak) peak = g.mapped;
    }
    printf("expandable: chunk %zu mapped %zu peak %zu chunks %d\n", g.chunk, g.mapped, peak, g.n);
    int leave = getenv("EXPANDABLE_KEEP") != NULL; /* leave it mapped: the snapshot at exit shows it */
    if (!leave) {
        shrink_to(&g, 0);
        CHECK(cuMemAddressFree(g.base, g.reserved));
    }
    return 0;
}

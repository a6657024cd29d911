/*
 * cxx_host.c - loads libcxx_alloc.so RTLD_LOCAL (as Python loads extension modules), allocates
 * through it, dumps a snapshot to argv[1], and checks that the frame is demangled.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/recorder.h"
#include "cumemhist/snapshot.h"

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "%s\n", dlerror());
        return 2;
    }
    CUdeviceptr (*cxx_alloc)(size_t) = (CUdeviceptr(*)(size_t))dlsym(h, "cxx_alloc");
    CUdevice d;
    CUcontext c;
    if (!cxx_alloc || cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c)) return 2;
    if (!cxx_alloc(1 << 20)) return 2;
    if (cmh_dump_snapshot(argv[1]) != CMH_OK) return 2;
    cmh_snapshot s;
    char err[256];
    if (cmh_snapshot_load(argv[1], &s, err, sizeof err) != CMH_OK) return 2;
    int found = 0;
    for (uint32_t i = 0; i < s.nframes; i++) {
        const char *n = cmh_str(&s, s.frames[i].name);
        const char *want = "cumemhist_test::Pool::grow(unsigned long)"; /* gcc may add " [clone .isra.0]" */
        if (!strncmp(n, want, strlen(want))) found = 1;
    }
    printf("%s: the C++ frame is %s\n", argv[0], found ? "demangled" : "NOT demangled");
    cmh_snapshot_free(&s);
    return found ? 0 : 1;
}

/*
 * fixture_walk.h - every snapshot fixture, loaded, handed to a suite's check: the in-tree ones
 * (tests/fixtures/h200, h200b, h200c, memviz) and PyTorch's beside the checkout, when they are
 * there.  The suites that check a property on every fixture (test_invariants.c,
 * test_pagememo.c) share this walk instead of each keeping its own.
 *
 * The suite defines CMH_FIXTURES (and CMH_PYTORCH_FIXTURES, empty when absent) as
 * tests/CMakeLists.txt does.  A fixture that does not load fails the test; so does an in-tree
 * folder that cannot be read or holds no snapshot, so a wrong path cannot make the walk check
 * nothing and pass.
 */
#ifndef CMH_FIXTURE_WALK_H
#define CMH_FIXTURE_WALK_H

#include <CUnit/Basic.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "cumemhist/snapshot.h"

typedef void (*cmh_fixture_check)(const char *path, cmh_snapshot *s);

/* Loads each .cmh and .pickle in dir and runs check on it; returns how many loaded, -1 when the
 * folder cannot be read. */
static inline int cmh_fixture_dir(const char *dir, cmh_fixture_check check)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int loaded = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (!(n > 4 && !strcmp(de->d_name + n - 4, ".cmh")) && !(n > 7 && !strcmp(de->d_name + n - 7, ".pickle"))) continue;
        char path[4096], err[512];
        snprintf(path, sizeof path, "%.3800s/%.255s", dir, de->d_name);
        cmh_snapshot s;
        if (cmh_snapshot_load(path, &s, err, sizeof err) != CMH_OK) {
            fprintf(stderr, "\n  %s\n", err);
            CU_FAIL("a fixture does not load");
            continue;
        }
        check(path, &s);
        cmh_snapshot_free(&s);
        loaded++;
    }
    closedir(d);
    return loaded;
}

/* Every fixture through check. */
static inline void cmh_fixture_walk(cmh_fixture_check check)
{
    static const char *const dirs[] = {"h200", "h200b", "h200c", "memviz"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%.3800s/%.64s", CMH_FIXTURES, dirs[i]);
        if (cmh_fixture_dir(p, check) <= 0) {
            fprintf(stderr, "\n  %s: no fixture read\n", p);
            CU_FAIL("an in-tree fixture folder holds no snapshot that was read");
        }
    }
    if (*CMH_PYTORCH_FIXTURES) cmh_fixture_dir(CMH_PYTORCH_FIXTURES, check);
}

#endif

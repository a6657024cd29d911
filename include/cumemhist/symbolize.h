/*
 * cumemhist/symbolize.h - readable native frames after the fact (snapshot/symbolize.c, its own
 * library: it links elfutils' libdw and libstdc++'s demangler).
 *
 * cmh_symbolize_offline demangles C++ names and gives native frames their file:line from the
 * DWARF of the binaries named in the snapshot's module map, an inlined call becoming a frame of
 * its own.  A binary whose GNU build id differs from the recorded one is not used.  It changes
 * the snapshot in place (strings, frames, stacks) and does nothing to frames that already have
 * a line: running it twice is harmless.  Not thread-safe on one snapshot (it changes it).
 */
#ifndef CUMEMHIST_SYMBOLIZE_H
#define CUMEMHIST_SYMBOLIZE_H

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CMH_SYM_DEMANGLE 0x1
#define CMH_SYM_LINES 0x2
#define CMH_SYM_ALL 0x3
/* keep the binaries opened (their debug info read, their CUs indexed) for the next call with
 * the same module map: for a caller that symbolizes snapshots of the same processes again and
 * again (the live commands).  The 32 module maps used last are kept (each process has its own:
 * load addresses differ); calls with it are serialized. */
#define CMH_SYM_KEEP 0x4
#define CMH_SYM_MAX_NAMED 4

typedef struct cmh_symbolize_result {
    uint32_t demangled, lines, inlined; /* names demangled, frames given a line, inline frames added */
    uint32_t modules_used, modules_missing, modules_mismatched;
    char mismatched[CMH_SYM_MAX_NAMED][512]; /* the first binaries whose build id did not match */
} cmh_symbolize_result;

/* CMH_OK or CMH_ENOMEM (the snapshot stays valid, less symbolized). */
int cmh_symbolize_offline(cmh_snapshot *s, unsigned what, cmh_symbolize_result *r);

/* Whether cmh_symbolize_offline(s, what) could change anything: a native frame without a line
 * whose recorded binary is on this machine (CMH_SYM_LINES), a C++ name to demangle or a
 * compiler suffix to take off (CMH_SYM_DEMANGLE).  Reads the snapshot and stats files only:
 * it loads neither libdw nor the demangler, so a caller can leave both unloaded where there is
 * nothing for them to do (a record whose frames all have lines, or whose binaries are gone). */
int cmh_symbolize_wanted(const cmh_snapshot *s, unsigned what);

#ifdef __cplusplus
}
#endif
#endif

/*
 * cumemhist/sites.h - attribution: which frame of an allocation's stack is the user's own code
 * (its site), which shared object called the driver (its owner), and how reports group
 * allocations (by site, stack, owner module or source file).
 *
 * Every frame is classified once: the user's code, a third-party package, or machinery (the CUDA
 * driver or runtime, NVIDIA's libraries, cumemhist, PyTorch's C++, bindings or Python, CPython,
 * libstdc++/libgcc, libc, an unsymbolized placeholder); the rules are listed in
 * docs/ATTRIBUTION.md and in cmh_site_rule_names.  The site is the innermost user frame, else
 * the innermost package frame, else a framework's; failing all, the innermost frame.  Users add
 * rules (--skip REGEX, matched against a frame's function, file and module) or turn the
 * defaults off.
 *
 * A cmh_sites is built once over a snapshot and is read-only afterwards: any number of threads
 * may use it at once.  It must not outlive its snapshot.
 */
#ifndef CUMEMHIST_SITES_H
#define CUMEMHIST_SITES_H

#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum cmh_group_by {
    CMH_GROUP_SITE = 0,
    CMH_GROUP_STACK,
    CMH_GROUP_MODULE,
    CMH_GROUP_FILE,
    CMH_GROUP_PACKAGE
} cmh_group_by;

typedef struct cmh_site_opts {
    int group_by;              /* cmh_group_by */
    int no_default_rules;      /* only the user's --skip rules */
    const char *const *skips;  /* extended regular expressions, more machinery */
    int nskips;
} cmh_site_opts;

typedef struct cmh_sites cmh_sites;

/* Classify every frame and group every stack of s.  NULL with err set when a --skip expression
 * does not compile (CMH_EINVAL in *rc) or memory runs out (CMH_ENOMEM). */
cmh_sites *cmh_sites_new(const cmh_snapshot *s, const cmh_site_opts *o, int *rc, char *err, size_t errlen);
void cmh_sites_free(cmh_sites *g);

/* The group of an allocation made with this stack (0 .. cmh_sites_count - 1). */
uint32_t cmh_sites_group(const cmh_sites *g, uint32_t stack);
uint32_t cmh_sites_count(const cmh_sites *g);
/* The snapshot it was built over. */
const cmh_snapshot *cmh_sites_snapshot(const cmh_sites *g);
/* Why a block has no allocation stack, in the words every output gives it (owners' "unknown (no
 * stack: ...)", peak's and leaks' "<no stack: ...>", the flamegraph's frame), from what the record's
 * options say: a block whose allocation entry the ring dropped reads the same everywhere. */
const char *cmh_no_stack_reason(const cmh_snapshot *s);
/* Whether the record's free entries carry the free's own stack (the recorder's context "all"), not
 * the allocation's (PyTorch's "alloc"): then a block known only by its free has no allocation site,
 * and nothing (a report, an export) may name the free's line as one. */
int cmh_frees_carry_own_stacks(const cmh_snapshot *s);
/* How the groups were formed (cmh_group_by). */
int cmh_sites_group_by(const cmh_sites *g);
/* A group's site frame (NULL: no stack was recorded), a stack of its (the first seen), and its
 * owner: the module that called the driver ("PyTorch" for a PyTorch snapshot's blocks, "?"
 * when unknown). */
const cmh_frame *cmh_sites_frame(const cmh_sites *g, uint32_t group);
uint32_t cmh_sites_stack(const cmh_sites *g, uint32_t group);
const char *cmh_sites_owner(const cmh_sites *g, uint32_t group);
/* Whether a group's owner is a third-party package (a Python library under site-packages reached
 * through ctypes: "gpulib"), not the program's own code. */
int cmh_sites_owner_package(const cmh_sites *g, uint32_t group);
/* The site frame of one stack, and whether a frame is machinery. */
const cmh_frame *cmh_sites_site_of(const cmh_sites *g, uint32_t stack);
int cmh_sites_machinery(const cmh_sites *g, uint32_t frame_id);
/* The frame the recorder puts where it cut the middle of a Python stack deeper than max_frames
 * ("... N frames cut by --max-frames ...", file <cumemhist>): machinery, yet always shown. */
int cmh_sites_cut_marker(const cmh_sites *g, uint32_t frame_id);
/* A frame of the Python standard library's plumbing that runs the user's code (threading.py,
 * asyncio/, multiprocessing/, concurrent/futures/, runpy.py, selectors.py): kept in every
 * stack, left out of the lines a report prints under a row as the interpreter's frames are. */
int cmh_sites_stdlib_plumbing(const cmh_sites *g, uint32_t frame_id);
/* Who allocated segment seg of the snapshot, as a stack whose site names it: the segment's own
 * stack when that has a site.  Else (PyTorch <= 2.0 kept stacks on blocks only; a snapshot whose
 * segments carry no frames) the stack of the site that holds the most bytes of the segment's live
 * blocks (of any of its blocks when none is live), with *from_blocks set and *nsites the
 * distinct sites among those blocks.  0 when neither says (*from_blocks 0, *nsites 0). */
uint32_t cmh_sites_segment_stack(const cmh_sites *g, uint32_t seg, int *from_blocks, uint32_t *nsites);
/* How many of a stack's innermost frames lie inside its site: the machinery between the
 * allocation and the frame reports name (cumemhist, the driver and runtime, PyTorch's stack
 * walker, caching allocator, tensor factories and dispatcher, CPython's call frames).  Exports
 * that draw stacks (pprof, folded stacks, the flamegraph) start each stack at its site, as the
 * reports show it (rep_print_frames), so a profile's own ("flat") bytes are the site's bytes.
 * 0 for a stack whose site is its innermost frame, or that has no frame. */
uint32_t cmh_sites_leaf_machinery(const cmh_sites *g, uint32_t stack);
/* Whether the frame at position k of a stack (0 innermost) is drawn by the exports that draw
 * stacks (pprof, folded stacks, the flamegraph): the site; outward of it, the frames the
 * reports print (rep_print_frames): the user's and packages' frames, the machinery between and
 * beyond them left out (CPython's start and call frames, libc's _start), every frame where the
 * site itself is machinery (a stack with no user or package frame); inside the site a
 * third-party package's (not machinery: gpulib.device_alloc under site-packages, called from the
 * user's line, is the function that allocated); the machinery inside it not. */
int cmh_sites_drawn(const cmh_sites *g, uint32_t stack, uint32_t k);
/* Which default rule made a frame machinery (a name from cmh_site_rule_names), "skip" for a
 * user's rule, NULL when it is not machinery. */
const char *cmh_sites_rule(const cmh_sites *g, uint32_t frame_id);

/* Whether a frame is a third-party package's (installed Python, a native library the program
 * did not build): not machinery, but the site only of a stack without a user frame. */
int cmh_sites_package(const cmh_sites *g, uint32_t frame_id);
/* The frame of the user's (or a package's) code that called a stack's site: how one helper's
 * bytes split by the lines that called it.  NULL: none (a fallback site, the outermost frame). */
const cmh_frame *cmh_sites_caller_of(const cmh_sites *g, uint32_t stack);
/* Why a stack's site is not the user's code: NULL when it is (a user's or a package's frame);
 * else "no Python frame" (a snapshot with Python stacks, this stack without one: PyTorch's C++
 * alone, an autograd engine thread, a CUDA graph, NCCL) or "no user frame" (none of the user's
 * or a package's, a Python frame or not).  The reports say it before the site's name
 * (docs/ATTRIBUTION.md): "(no Python frame: at::_ops::mm::call ...)". */
const char *cmh_sites_no_user_frame(const cmh_sites *g, uint32_t stack);
/* --group-by package: a group's package ("torch", "einops", "cuBLAS (libcublas.so.13)", the program's own code as
 * "program (train.py)", by what the user ran: docs/ATTRIBUTION.md). */
const char *cmh_sites_package_name(const cmh_sites *g, uint32_t group);
/* A path as the rules read it: '\' as '/', no drive letter, "." and ".." resolved. */
void cmh_sites_normpath(const char *in, char *out, size_t cap);
/* Is the module at path (as recorded, any platform's) PyTorch's own binary: a library PyTorch
 * ships (libtorch*, libc10*, libshm*, libcaffe2*) or its extension module torch/_C*.so?
 * Another package's _C extension (torchvision/_C.so, apex's, the user's mypkg/_C.so) is not. */
int cmh_sites_torch_module(const char *path);

/* A group's identity as text, the same in any snapshot for the same code ("function@file:line@
 * module" for a site; every frame for a stack; the module; the file): how a diff matches sites
 * across runs.  Returns the length it needed (a truncated buf when cap is smaller). */
size_t cmh_sites_key(const cmh_sites *g, uint32_t group, char *buf, size_t cap);

/* A frame's module as a basename ("" when unknown). */
const char *cmh_frame_module(const cmh_snapshot *s, const cmh_frame *f);

extern const char *const cmh_site_rule_names[];

#ifdef __cplusplus
}
#endif
#endif

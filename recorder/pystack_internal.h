/*
 * pystack_internal.h - what the two reads of a Python stack share: pystack.c walks it through the
 * C API with the GIL held and owns the frame ids; pystack_nogil.c reads it without the GIL by the
 * interpreter's layout.  Both keep the frames they walk alike (a deep stack's two ends and a
 * marker between them) and give one id to one (file, function, line).  Private to the recorder.
 */
#ifndef CMH_RECORDER_PYSTACK_INTERNAL_H
#define CMH_RECORDER_PYSTACK_INTERNAL_H

#include "internal.h"
#include "oatab.h"

#define PY_KEEP_OUTER 8 /* a stack deeper than max_frames keeps its outermost this many */

/* A call site's hash key: the code object's address and where in it (never 0) */
static inline uint64_t py_site_key(uintptr_t code, int at)
{
    return cmh_oa_hashkey(cmh_oa_mix((uint64_t)code * 31 + (uint64_t)(uint32_t)at));
}

/* A stack's frames as walked, innermost first: a stack deeper than max keeps both ends, the
 * innermost frames (the site and its callers) and the outermost PY_KEEP_OUTER (the entry point, the
 * training loop), with a marker frame between them saying how many were cut; the outer ones are
 * kept in a ring while walking.  A frame is its code object's address and where it is in it. */
typedef struct pywalk {
    int inner, outer, n;
    uint32_t past; /* frames seen past the inner ones */
    void *code[CMH_MAX_FRAMES], *ring[PY_KEEP_OUTER];
    int at[CMH_MAX_FRAMES], ring_at[PY_KEEP_OUTER];
} pywalk;

static inline void pw_init(pywalk *w, int max)
{
    if (max > CMH_MAX_FRAMES) max = CMH_MAX_FRAMES;
    w->outer = max >= 2 * PY_KEEP_OUTER ? PY_KEEP_OUTER : 0;
    w->inner = w->outer ? max - w->outer - 1 : max;
    w->n = 0;
    w->past = 0;
}

static inline int pw_more(const pywalk *w) { return w->n < w->inner || w->outer; }

static inline void pw_add(pywalk *w, void *code, int at)
{
    if (w->n < w->inner) {
        w->at[w->n] = at;
        w->code[w->n++] = code;
    } else { /* the ring holds the last (outermost) seen */
        w->ring[w->past % (uint32_t)w->outer] = code;
        w->ring_at[w->past % (uint32_t)w->outer] = at;
        w->past++;
    }
}

/* The marker, then the ring's frames, innermost first; the marker's index (-1: none) */
static inline int pw_finish(pywalk *w, uint32_t *cut)
{
    uint32_t outer = (uint32_t)w->outer;
    *cut = w->past > outer ? w->past - outer : 0;
    int marker = -1;
    if (*cut) {
        marker = w->n;
        w->code[w->n] = NULL;
        w->at[w->n++] = 0;
    }
    for (uint32_t i = 0; i < w->past && i < outer; i++) {
        uint32_t slot = *cut ? (w->past + i) % outer : i;
        w->at[w->n] = w->ring_at[slot];
        w->code[w->n++] = w->ring[slot];
    }
    return marker;
}

/* ---- pystack.c: the frame ids ---- */
/* The id of (file, name, line), made on first sight (the strings are copied); 0 when out of
 * memory.  Takes the tables' lock. */
CMH_HIDDEN uint32_t cmh_py_content_id(const char *file, const char *name, int line);
/* The id of the marker frame for `cut` frames left out of a stack's middle; 0 when out of memory.
 * Takes the tables' lock. */
CMH_HIDDEN uint32_t cmh_py_cut_id(uint32_t cut);

/* ---- pystack_nogil.c: the GIL-free read ---- */
/* Find this Python's layout (real: the loader's dlsym); 1 when one is known, 0 when frames of a
 * thread without the GIL cannot be read here.  Once, before any walk. */
CMH_HIDDEN int cmh_pynogil_init(void *(*real)(void *, const char *));
/* The Python stack of this thread, whose thread state is tstate, read without the GIL as
 * cmh_pystack_capture writes it; -1 when something read was not as the layout says (then every
 * read is a system call from here on). */
CMH_HIDDEN int cmh_pynogil_walk(uintptr_t tstate, uintptr_t *out, int max);
CMH_HIDDEN void cmh_pynogil_atfork_prepare(void);
CMH_HIDDEN void cmh_pynogil_atfork_parent(void);
CMH_HIDDEN void cmh_pynogil_atfork_child(void);

#endif

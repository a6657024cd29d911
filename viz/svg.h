/*
 * svg.h - what the SVG pictures share (viz/svg.c): escaped text, sizes as people read them,
 * round tick steps.
 */
#ifndef CMH_VIZ_SVG_H
#define CMH_VIZ_SVG_H

#include <stdio.h>

/* s as XML character data or attribute text (& < > " ' escaped; NULL writes nothing). */
void cmh_svg_text(FILE *fp, const char *s);
/* "12.5 MiB" (a ring of 8 buffers) */
const char *cmh_svg_size(double bytes);
/* The smallest 1, 2 or 5 times a power of ten at least x (x > 0). */
double cmh_svg_nice(double x);

/* A frame as people read it: "function (file:line)", "function (module)", "function". */
#include "cumemhist/snapshot.h"
void cmh_svg_frame(const cmh_snapshot *s, const cmh_frame *f, char *buf, size_t cap);

/* The record's facts for device as data-* attributes of an empty element <tag> (peaks with their
 * entry and time, the end state, OOMs, annotations, marks, entries, the clock origin), each from
 * its analyzer function; hidden when tag is not an SVG "g". */
int cmh_svg_facts(FILE *fp, const cmh_snapshot *s, int device, const char *tag);

#endif

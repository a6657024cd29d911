/*
 * cumemhist/view.h - the interactive viewer (viz/view.c): the Active Memory Timeline of every
 * device as one offline page (inline script and style, no request), level-of-detail columns
 * computed here so the page only draws.  docs/VIEW.md says what the page does and how its data
 * is packed.  Each writer reads the snapshot without changing it and returns CMH_OK,
 * CMH_ENOMEM, or CMH_EIO when the stream failed.
 */
#ifndef CUMEMHIST_VIEW_H
#define CUMEMHIST_VIEW_H

#include <stdio.h>

#include "sites.h"
#include "snapshot.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole page for devices (g: the sites bands are coloured and searched by; NULL: by stack). */
int cmh_view_html(const cmh_snapshot *s, const cmh_sites *g, const int32_t *devices, int ndevices, const char *title, FILE *fp);
/* The same view as one <section> with its data and script, for a page that has the view's
 * style (cmh_view_css_text) and allows inline script: the HTML report. */
int cmh_view_embed(const cmh_snapshot *s, const cmh_sites *g, const int32_t *devices, int ndevices, const char *title, FILE *fp);
const char *cmh_view_css_text(void);

#ifdef __cplusplus
}
#endif
#endif

/*
 * svg.c - what the SVG pictures share (svg.h).
 */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "svg.h"

void cmh_svg_text(FILE *fp, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", fp); break;
        case '<': fputs("&lt;", fp); break;
        case '>': fputs("&gt;", fp); break;
        case '"': fputs("&quot;", fp); break;
        case '\'': fputs("&apos;", fp); break;
        default:
            /* XML 1.0 allows no control characters but tab, newline and return */
            if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r') fputc('?', fp);
            else fputc(*s, fp);
        }
    }
}

const char *cmh_svg_size(double v)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    static _Thread_local char ring[8][32];
    static _Thread_local int k;
    char *b = ring[k++ & 7];
    int i = 0;
    double a = v < 0 ? -v : v;
    while (a >= 1024 && i < 5) a /= 1024, v /= 1024, i++;
    if (i == 0) snprintf(b, 32, "%.0f B", v);
    else snprintf(b, 32, "%.1f %s", v, u[i]);
    return b;
}

double cmh_svg_nice(double x)
{
    if (!(x > 0)) return 1;
    double p = pow(10, floor(log10(x))), m = x / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
}

void cmh_svg_frame(const cmh_snapshot *s, const cmh_frame *f, char *buf, size_t cap)
{
    const char *name = cmh_str(s, f->name), *file = cmh_str(s, f->filename);
    if (!*name) name = "??";
    if (*file && f->line > 0) snprintf(buf, cap, "%s (%s:%" PRId64 ")", name, file, f->line);
    else if (*file) snprintf(buf, cap, "%s (%s)", name, file);
    else if (f->module >= 0 && (uint32_t)f->module < s->nmodules) {
        const char *m = cmh_str(s, s->modules[f->module].path), *b = strrchr(m, '/');
        snprintf(buf, cap, "%s (%s)", name, b ? b + 1 : m);
    } else snprintf(buf, cap, "%s", name);
}

/*
 * lazy_zlib.c - zlib, loaded when the pprof writer first compresses (lazylib.h).
 */
#include <zlib.h>

#include "lazylib.h"

static cmh_lazylib g_z = CMH_LAZYLIB("libz.so.1", "zlib1g");

CMH_LAZY(g_z, int, deflate, (z_streamp strm, int flush), (strm, flush))
CMH_LAZY(g_z, int, deflateSetHeader, (z_streamp strm, gz_headerp head), (strm, head))
CMH_LAZY(g_z, int, deflateEnd, (z_streamp strm), (strm))
CMH_LAZY(g_z, int, deflateInit2_, (z_streamp strm, int level, int method, int window_bits, int mem_level, int strategy, const char *version, int stream_size),
         (strm, level, method, window_bits, mem_level, strategy, version, stream_size))

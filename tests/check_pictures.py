"""check_pictures.py - read our pictures with real consumers and hold them to the reports.

  timeline SVG PEAK.json     XML-parse; per device a panel whose peak equals `peak --json`'s
                             allocated peak (bytes and label), both series drawn, their maxima
                             at least the peak; OOM markers as many as `oom` has
  folded FILE BYTES          folded-stack lines whose byte sum is BYTES
  flame SVG BYTES            XML-parse; the root frame's bytes = BYTES, every frame's children fit in it
  pprof FILE END PEAK        gunzip + decode profile.proto by its wire format; four sample types,
                             value sums = END (live_space) and PEAK (peak_space), every id resolves
  batch LIST                 the checks above, one a line of LIST ("ID<TAB>WHAT<TAB>ARG..."), in this
                             one process (a Python start is slow): ID.out gets what each printed,
                             ID.rc its exit status (0, 1 on its failure)
Exit 1 with a message on the first failure.
"""
import contextlib
import io
import gzip
import json
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def size(v):  # as cmh_svg_size / rep_size print it
    u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
    i = 0
    while abs(v) >= 1024 and i < 5:
        v /= 1024.0
        i += 1
    return "%.0f B" % v if i == 0 else "%.1f %s" % (v, u[i])


def timeline(svg, peak_json, oom_json=None):
    root = ET.parse(svg).getroot()
    panels = {int(g.get("data-device")): g for g in root.iter(NS + "g") if g.get("class") == "panel"}
    peaks = json.load(open(peak_json))
    for p in peaks:
        dev = p["device"]
        if dev not in panels:
            fail("%s: no panel for device %d (panels %s)" % (svg, dev, sorted(panels)))
        g = panels[dev]
        series = {e.get("data-series"): e for e in g.iter(NS + "path")}
        for name in ("allocated", "reserved"):
            if name not in series or not series[name].get("d", "").startswith("M"):
                fail("%s device %d: no %s series" % (svg, dev, name))
        want = p["peak_allocated"]["bytes"]
        if want <= 0:
            continue
        pk = [e for e in g.iter(NS + "g") if e.get("class") == "peak"]
        if len(pk) != 1 or int(pk[0].get("data-bytes")) != want:
            fail("%s device %d: peak %s, `peak` says %d" % (svg, dev, [e.get("data-bytes") for e in pk], want))
        label = "".join(pk[0].find(NS + "text").itertext())
        if size(want) not in label:
            fail("%s device %d: peak label %r lacks %s" % (svg, dev, label, size(want)))
        if int(series["allocated"].get("data-max")) < want:
            fail("%s device %d: the allocated series' maximum %s is below the peak %d" % (svg, dev, series["allocated"].get("data-max"), want))
    if oom_json:
        ooms = json.load(open(oom_json))
        if not all("ooms" in o for o in ooms):
            fail("%s: `oom --json` has no 'ooms'" % oom_json)
        for o in ooms:
            g = panels.get(o["device"])
            n = len([e for e in g.iter(NS + "g") if (e.get("class") or "").startswith("marker oom")]) if g is not None else 0
            if n != len(o.get("ooms", [])):
                fail("%s device %d: %d OOM markers, `oom` has %d" % (svg, o["device"], n, len(o.get("ooms", []))))
        print("ok: %s: OOM markers %s" % (svg, [len(o["ooms"]) for o in ooms]))
    print("ok: %s: %d panels, peaks as `peak` says" % (svg, len(panels)))


def folded(path, want):
    total = 0
    for line in open(path):
        line = line.rstrip("\n")
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            fail("%s: not a folded line: %r" % (path, line))
        total += int(n)
    if total != int(want):
        fail("%s: folded bytes %d, live bytes %s" % (path, total, want))
    print("ok: %s: %d bytes" % (path, total))


def flame(svg, want):
    root = ET.parse(svg).getroot()
    if int(root.get("data-bytes")) != int(want):
        fail("%s: %s bytes, live bytes %s" % (svg, root.get("data-bytes"), want))
    rects = [r for r in root.iter(NS + "rect") if r.get("data-bytes")]
    if int(want) and (not rects or int(rects[0].get("data-bytes")) != int(want)):
        fail("%s: the root frame holds %s, not %s" % (svg, rects[0].get("data-bytes") if rects else None, want))
    titles = [t for t in root.iter(NS + "title")]
    if int(want) and len(titles) < len(rects):
        fail("%s: a frame without a tooltip" % svg)
    print("ok: %s: %d frames, root %s bytes" % (svg, len(rects), want))


def pb_fields(buf):
    """(field, wire type, value) of one message: varints as ints, length-delimited as bytes."""
    i, out = 0, []
    while i < len(buf):
        key, i = varint(buf, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(buf, i)
        elif wt == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
            if i > len(buf):
                fail("pprof: a field runs past its message")
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            fail("pprof: wire type %d" % wt)
        out.append((f, wt, v))
    return out


def varint(buf, i):
    v = s = 0
    while True:
        if i >= len(buf):
            fail("pprof: a varint runs past the end")
        b = buf[i]
        i += 1
        v |= (b & 0x7f) << s
        s += 7
        if not b & 0x80:
            return v, i


def packed(b):
    i, out = 0, []
    while i < len(b):
        v, i = varint(b, i)
        out.append(v)
    return out


def pprof(path, end, peak):
    prof = pb_fields(gzip.open(path).read())
    strings = [v.decode() for f, wt, v in prof if f == 6]
    if not strings or strings[0] != "":
        fail("pprof: string_table[0] is not ''")
    types = [dict((f, v) for f, _, v in pb_fields(v)) for f, wt, v in prof if f == 1]
    names = [(strings[t.get(1, 0)], strings[t.get(2, 0)]) for t in types]
    if names != [("live_space", "bytes"), ("live_objects", "count"), ("peak_space", "bytes"), ("peak_objects", "count")]:
        fail("pprof: sample types %s" % names)
    funcs = {}
    for f, wt, v in prof:
        if f == 5:
            d = dict((k, x) for k, _, x in pb_fields(v))
            funcs[d[1]] = strings[d.get(2, 0)]
    locs = {}
    for f, wt, v in prof:
        if f == 4:
            d = pb_fields(v)
            lid = [x for k, _, x in d if k == 1][0]
            lines = [dict((k2, x2) for k2, _, x2 in pb_fields(x)) for k, _, x in d if k == 4]
            for ln in lines:
                if ln.get(1) not in funcs:
                    fail("pprof: location %d names function %s, not defined" % (lid, ln.get(1)))
            locs[lid] = lines
    sums = [0, 0, 0, 0]
    nsamples = 0
    for f, wt, v in prof:
        if f != 2:
            continue
        nsamples += 1
        d = pb_fields(v)
        ids = packed([x for k, _, x in d if k == 1][0])
        vals = packed([x for k, _, x in d if k == 2][0])
        if len(vals) != 4:
            fail("pprof: a sample with %d values" % len(vals))
        for lid in ids:
            if lid not in locs:
                fail("pprof: a sample names location %d, not defined" % lid)
        for j in range(4):
            sums[j] += vals[j]
    if sums[0] != int(end) or sums[2] != int(peak):
        fail("pprof: live_space %d (want %s), peak_space %d (want %s)" % (sums[0], end, sums[2], peak))
    print("ok: %s: %d samples, %d locations, %d functions; live %d, peak %d" % (path, nsamples, len(locs), len(funcs), sums[0], sums[2]))


CHECKS = {"timeline": timeline, "folded": folded, "flame": flame, "pprof": pprof}


def batch(listfile):
    for line in open(listfile):
        if not line.strip():
            continue
        ident, what, *args = line.rstrip("\n").split("\t")
        out, rc = io.StringIO(), 0
        with contextlib.redirect_stdout(out):
            try:
                CHECKS[what](*args)
            except SystemExit as e:  # fail()
                rc = 1 if e.code is None or e.code else 0
            except Exception as e:  # an unreadable file, as a lone run's traceback would fail it
                print("FAIL: %s: %r" % (what, e))
                rc = 1
        with open(ident + ".out", "w") as f:
            f.write(out.getvalue())
        with open(ident + ".rc", "w") as f:
            f.write("%d\n" % rc)


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    dict(CHECKS, batch=batch)[what](*args)

"""check_pictures.py - read our pictures with real consumers and hold them to the reports.

  timeline SVG PEAK.json     XML-parse; per device a panel whose peak equals `peak --json`'s
                             allocated peak (bytes and label), both series drawn, their maxima
                             at least the peak; OOM markers as many as `oom` has
  layout SVG...              the timeline's labels (the peak's, the unsplit note, the markers') clear
                             of every series, grid line, marker line, the peak's dot and each other,
                             inside the plot: their boxes measured with DejaVu Sans's own advance
                             widths (the font the SVG asks for first; read from its files)
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
import os
import re
import struct
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


FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf"
FONT_REGULAR = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def font_widths(path):
    """{codepoint: advance in em} from a TrueType file's cmap (format 4) and hmtx, or None."""
    try:
        data = open(path, "rb").read()
    except OSError:
        return None
    n = struct.unpack(">H", data[4:6])[0]
    tab = {}
    for i in range(n):
        tag, _, off, ln = struct.unpack(">4sIII", data[12 + 16 * i:28 + 16 * i])
        tab[tag.decode("latin-1")] = off
    upem = struct.unpack(">H", data[tab["head"] + 18:tab["head"] + 20])[0]
    nhm = struct.unpack(">H", data[tab["hhea"] + 34:tab["hhea"] + 36])[0]
    hm = tab["hmtx"]
    adv = [struct.unpack(">H", data[hm + 4 * i:hm + 4 * i + 2])[0] for i in range(nhm)]
    c = tab["cmap"]
    sub = None
    for i in range(struct.unpack(">H", data[c + 2:c + 4])[0]):
        pid, eid, off = struct.unpack(">HHI", data[c + 4 + 8 * i:c + 12 + 8 * i])
        if pid == 3 and eid == 1 and struct.unpack(">H", data[c + off:c + off + 2])[0] == 4:
            sub = c + off
    if sub is None:
        return None
    segx2 = struct.unpack(">H", data[sub + 6:sub + 8])[0]
    ends = struct.unpack(">%dH" % (segx2 // 2), data[sub + 14:sub + 14 + segx2])
    starts = struct.unpack(">%dH" % (segx2 // 2), data[sub + 16 + segx2:sub + 16 + 2 * segx2])
    deltas = struct.unpack(">%dh" % (segx2 // 2), data[sub + 16 + 2 * segx2:sub + 16 + 3 * segx2])
    ro_at = sub + 16 + 3 * segx2
    ros = struct.unpack(">%dH" % (segx2 // 2), data[ro_at:ro_at + segx2])
    w = {}
    for k, (a, b) in enumerate(zip(starts, ends)):
        for cp in range(a, min(b, 0x2FFF) + 1):
            if ros[k]:
                at = ro_at + 2 * k + ros[k] + 2 * (cp - a)
                g = struct.unpack(">H", data[at:at + 2])[0]
                g = (g + deltas[k]) & 0xFFFF if g else 0
            else:
                g = (cp + deltas[k]) & 0xFFFF
            w[cp] = adv[min(g, nhm - 1)] / upem
    return w


def layout(*svgs):
    bold, regular = font_widths(FONT), font_widths(FONT_REGULAR)
    if bold is None or regular is None:
        print("skip: no %s and %s to measure the labels with" % (FONT, FONT_REGULAR))
        return
    num = re.compile(r"-?[0-9.]+")
    for svg in svgs:
        root = ET.parse(svg).getroot()
        for g in (e for e in root.iter(NS + "g") if e.get("class") == "panel"):
            dev = g.get("data-device")
            area = next(e for e in g.iter(NS + "rect") if e.get("class") == "area")
            ax, ay, aw = float(area.get("x")), float(area.get("y")), float(area.get("width"))
            things = []  # (what, x0, y0, x1, y1): what a label must not touch
            for p in g.iter(NS + "path"):
                half = 2.0 if p.get("class") == "res" else 0.75  # (the stroke widths plot.c's style gives)
                v = [float(x) for x in num.findall(p.get("d", ""))]
                pts = list(zip(v[0::2], v[1::2]))
                for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                    things.append(("%s series" % p.get("data-series"), min(x0, x1) - half, min(y0, y1) - half, max(x0, x1) + half, max(y0, y1) + half))
            for ln in g.iter(NS + "line"):
                x0, y0, x1, y1 = (float(ln.get(k)) for k in ("x1", "y1", "x2", "y2"))
                things.append(("%s line" % (ln.get("class") or "marker"), min(x0, x1) - 0.5, min(y0, y1) - 0.5, max(x0, x1) + 0.5, max(y0, y1) + 0.5))
            boxes = []
            for pk in (e for e in g.iter(NS + "g") if e.get("class") == "peak" or (e.get("class") or "").startswith("marker")):
                c = pk.find(NS + "circle")
                if c is not None:
                    cx, cy, r = float(c.get("cx")), float(c.get("cy")), float(c.get("r"))
                    things.append(("peak dot", cx - r - 0.75, cy - r - 0.75, cx + r + 0.75, cy + r + 0.75))
                # (plot.c's style: the peak's words bold 12 px, an OOM's 12 px, a mark's or an annotation's 10 px)
                widths, px = (bold, 12) if pk.get("class") == "peak" else (regular, 12 if "oom" in pk.get("class") else 10)
                for t in pk.iter(NS + "text"):
                    text = "".join(t.itertext())
                    w = px * sum(widths.get(ord(ch), 1.0) for ch in text)
                    x, y = float(t.get("x")), float(t.get("y"))
                    x0 = x - w if t.get("text-anchor") == "end" else x - w / 2 if t.get("text-anchor") == "middle" else x
                    box = (text, x0, y - px * 0.93, x0 + w, y + px * 0.24)  # (DejaVu's ascent and descent, in em)
                    if box[1] < ax - 0.5 or box[3] > ax + aw + 0.5 or box[2] < ay - 0.5:
                        fail("%s device %s: %r (x %.0f..%.0f, top %.0f) outside the plot (x %.0f..%.0f, top %.0f)" % (svg, dev, text, box[1], box[3], box[2], ax, ax + aw, ay))
                    boxes.append(box)
            for i, b in enumerate(boxes):
                for o in things + boxes[i + 1:]:
                    if b[1] < o[3] and o[1] < b[3] and b[2] < o[4] and o[2] < b[4]:
                        fail("%s device %s: %r (%.0f,%.0f..%.0f,%.0f) overlaps %s (%.0f,%.0f..%.0f,%.0f)" % ((svg, dev, b[0]) + b[1:] + (o[0] if o in things else repr(o[0]),) + o[1:]))
            print("ok: %s device %s: %d label%s clear of %d series segments and lines" % (svg, dev, len(boxes), "" if len(boxes) == 1 else "s", len(things)))


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


CHECKS = {"timeline": timeline, "layout": layout, "folded": folded, "flame": flame, "pprof": pprof}


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

"""check_page.py PNG NETLOG CONSOLE PAGE - what headless Chromium saw of a page: a screenshot
that is not blank, no console message at error level, and no request but the page itself
(from Chromium's own net log)."""
import json
import struct
import sys
import zlib


def fail(m):
    print("FAIL:", m)
    sys.exit(1)


png, netlog, console, page = sys.argv[1:5]
data = open(png, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n":
    fail("%s is not a PNG" % png)
i, idat, w, h = 8, b"", 0, 0
while i < len(data):
    n, kind = struct.unpack(">I4s", data[i:i + 8])
    body = data[i + 8:i + 8 + n]
    if kind == b"IHDR":
        w, h = struct.unpack(">II", body[:8])
    elif kind == b"IDAT":
        idat += body
    i += 12 + n
raw = zlib.decompress(idat)
distinct = len(set(raw))
if w < 300 or h < 300 or distinct < 24:
    fail("%s looks blank (%dx%d, %d distinct byte values)" % (png, w, h, distinct))
errors = [l for l in open(console, errors="replace") if "CONSOLE" in l and ("ERROR" in l.upper() or ":error" in l.lower())]
if errors:
    fail("console errors: %s" % errors[:3])
log = json.load(open(netlog))
types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
# every request the page made: the browser's own (updates, time, accounts) have no origin
url_of, initiator_of = {}, {}
for ev in log["events"]:
    p = ev.get("params") or {}
    src = ev.get("source", {}).get("id")
    if isinstance(p.get("url"), str):
        url_of.setdefault(src, p["url"])
    if types.get(ev["type"]) == "URL_REQUEST_START_JOB" and "initiator" in p:
        initiator_of[src] = p["initiator"]
page_reqs = set(url_of.get(src, "?") for src, ini in initiator_of.items() if ini != "not an origin")
if page_reqs:
    fail("the page made requests: %s" % sorted(page_reqs)[:5])
urls = page_reqs
print("ok: %s %dx%d, %d distinct bytes, no console error, no request of the page's" % (png, w, h, distinct))

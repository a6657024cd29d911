#!/usr/bin/env python3
"""check_step_marks.py LEAKS_JSON PAGE.html... - the step marks a page's timeline draws (report,
view) are the steps `leaks` judges by.  Where the recording threads race, leaks judges by each
thread's own steps ('steps: each recording thread's own ...'): the page then draws those, thread
by thread, none of the record's (a pattern across the threads, the scheduler's), and says the
same steps sentence; a report page also says leaks' whole steps line.  Exit 1 with what differs."""
import html
import json
import re
import sys


def meta(path):
    t = open(path, encoding="utf-8").read()
    m = re.search(r'<script type="application/json" id="cmh-view-meta">(.*?)</script>', t, re.S)
    if not m:
        sys.exit("%s: no timeline meta" % path)
    return t, json.loads(m.group(1))


def main():
    leaks = {d["device"]: d for d in json.load(open(sys.argv[1]))}
    bad = []
    for page in sys.argv[2:]:
        text, m = meta(page)
        for dv in m["devices"]:
            lk = leaks.get(dv["device"])
            if lk is None:
                continue
            st = lk["steps"]
            where = "%s device %d" % (page, dv["device"])
            if st.get("threads_race"):
                ts = dv.get("thread_steps") or []
                want = st["thread_steps"]
                if dv["steps"]:
                    bad.append("%s: the record's steps drawn (%d marks) where leaks judges by each thread's own" % (where, len(dv["steps"])))
                if len(ts) != want["threads"]:
                    bad.append("%s: %d threads' steps drawn, leaks says %d" % (where, len(ts), want["threads"]))
                for x in ts:
                    if not want["min"] <= x["count"] <= want["max"] or len(x["points"]) < 2:
                        bad.append("%s: %s: %d steps (%d marks), leaks says %d to %d" % (where, x["label"], x["count"], len(x["points"]), want["min"], want["max"]))
                note = dv.get("steps_note") or ""
                if not note or not st["text"].startswith(note):
                    bad.append("%s: the timeline says %r, leaks %r" % (where, note, st["text"]))
            elif dv.get("thread_steps") or dv.get("steps_note"):
                bad.append("%s: per-thread steps drawn where leaks judges by the record's" % where)
            if "report" in page and st["text"] not in html.unescape(text):
                bad.append("%s: the report does not say leaks' steps line %r" % (where, st["text"]))
    for b in bad:
        print(b)
    sys.exit(1 if bad else 0)


main()

#!/bin/sh
# cutcmh_test.sh BUILD_DIR SOURCE_DIR - a .cmh cut at every offset (head -c N) is refused with one
# line whose figures hold: "truncated at byte N" is the cut; what the reader was reading starts at
# or before it and runs past it by the bytes it says are missing, that count never more than the
# cut took away; a container's own count and the bytes left add up; singular and plural agree
# with each number.  A cut at 1500 bytes said "(expected 1 more bytes)", and a map of 17 entries
# "cannot fit in the 29 bytes left" (17 would: its 34 keys and values cannot).  Over a fresh record
# (with its checksum) and a GPU's record written before checksums (tests/fixtures/h200/cudart.cmh).
TEST=cutcmh . "$(dirname "$0")/testlib.sh"
"$CMH" record -q -o pi.cmh -- "$B/tests/poolids" >pi.out 2>&1 && grep -q "poolids: ran" pi.out &&
    ok "poolids ran" || bad "poolids did not run as designed: $(cat pi.out)"
cp "$SRC/tests/fixtures/h200/cudart.cmh" old.cmh
cat >sweep.py <<'PY'
import re, subprocess, sys
cmh, f = sys.argv[1], sys.argv[2]
data = open(f, "rb").read()
size = len(data)
bad, seen = [], set()
def plural(n, word, m):
    # "1 byte", "2 bytes": the word agrees with its number
    return (m == word) if n == 1 else (m == word + "s")
for cut in range(size):
    open("cut.cmh", "wb").write(data[:cut])
    p = subprocess.run([cmh, "summary", "cut.cmh"], capture_output=True, text=True)
    lines = p.stderr.strip().split("\n")
    msg = lines[0]
    why = []
    if p.returncode == 0: why.append("read as whole")
    if len(lines) != 1: why.append("%d lines" % len(lines))
    m = re.match(r"cumemhist: cut\.cmh: (?:empty file \(truncated at byte (\d+)\)|truncated at byte (\d+) \((.*?)\))(;|$)", msg)
    if not m: why.append("no 'truncated at byte N (...)'")
    else:
        at = int(m.group(1) or m.group(2))
        if at != cut: why.append("truncated at byte %d, the file has %d" % (at, cut))
        inner = m.group(3) or ""
        r1 = re.fullmatch(r"reading byte (\d+): (\d+) more (bytes?) needed", inner)
        r2 = re.fullmatch(r"reading bytes (\d+)-(\d+): (\d+) more (bytes?) needed", inner)
        r3 = re.fullmatch(r"the (map|array) at byte (\d+) holds (\d+) (entry|entries|items?), (\d+) bytes at least, and (\d+) (bytes?) (is|are) left", inner)
        if m.group(1) is not None:
            seen.add("empty")
            if cut: why.append("'empty file' of %d bytes" % cut)
        elif r1:
            seen.add("byte")
            pos, more, w = int(r1.group(1)), int(r1.group(2)), r1.group(3)
            if pos != cut or more != 1 or w != "byte": why.append("one byte read past the end: %r" % inner)
        elif r2:
            seen.add("bytes")
            lo, hi, more, w = int(r2.group(1)), int(r2.group(2)), int(r2.group(3)), r2.group(4)
            if not (lo <= cut <= hi): why.append("reading %d-%d does not reach past the end %d" % (lo, hi, cut))
            if more != hi - cut + 1: why.append("%d more bytes, %d-%d past the end %d is %d" % (more, lo, hi, cut, hi - cut + 1))
            if not 1 <= more <= size - cut: why.append("%d more bytes, the cut took %d" % (more, size - cut))
            if not plural(more, "byte", w): why.append("'%d more %s'" % (more, w))
        elif r3:
            seen.add("container")
            kind, pos, n, noun, least, left, w, verb = r3.group(1), int(r3.group(2)), int(r3.group(3)), r3.group(4), int(r3.group(5)), int(r3.group(6)), r3.group(7), r3.group(8)
            if pos >= cut: why.append("the %s at byte %d, past the end %d" % (kind, pos, cut))
            if least != n * (2 if kind == "map" else 1): why.append("%d %s, %d bytes at least" % (n, noun, least))
            if not least > left or left >= cut - pos: why.append("%d bytes at least, %d left, the %s at byte %d of %d" % (least, left, kind, pos, cut))
            if noun != ({"map": "entry", "array": "item"}[kind] if n == 1 else {"map": "entries", "array": "items"}[kind]): why.append("'%d %s'" % (n, noun))
            if not plural(left, "byte", w) or verb != ("is" if left == 1 else "are"): why.append("'%d %s %s left'" % (left, w, verb))
        else:
            why.append("unknown shape")
        s = re.search(r"; byte (\d+) says the file ends with a checksum, and it does not: the file is truncated or damaged$", msg)
        if m.group(4) == ";" and (not s or int(s.group(1)) + 8 > cut or data[int(s.group(1)):int(s.group(1)) + 9] != b"\xa8checksum"):
            why.append("the checksum's announcement not at the byte said, or not within the cut")
    if why: bad.append("cut %d: %s: %s" % (cut, ", ".join(why), msg))
print("%d cuts, %d bad%s; %s" % (size, len(bad), ", e.g. " + " | ".join(bad[:3]) if bad else "", ",".join(sorted(seen))))
PY
for f in pi.cmh old.cmh; do
    py sweep.py "$CMH" $f >$f.sweep 2>&1
    check "$f cut at every offset: one line each, the offset the cut, the bytes said missing within what the cut took, plurals right: $(cat $f.sweep)" \
        "grep -q ', 0 bad;' $f.sweep && grep -q 'bytes,container' $f.sweep"
done
finish

#!/bin/sh
# vmm_kind_test.sh BUILD_DIR SOURCE_DIR - cuMemCreate memory that is not PyTorch's
# (tests/vmm_kind.c, beside a 100 MiB context of the fake driver's):
#  - a library's own VMM allocator (as NCCL's ncclCuMemAlloc: 194 maps, 388 MiB, on an H200):
#    frag called its ranges "expandable segments" that memory_summary() leaves out of its rows.
#    Now they are other callers' cuMemMap ranges, by owner as owners names them, in text and
#    --json, and the expandable-segment note is not printed for them.
TEST=vmm_kind . "$(dirname "$0")/testlib.sh"
M=1048576

rec() { # rec NAME MODE: record vmm_kind MODE as NAME.cmh, its output in NAME.out
    env FAKECUDA_CONTEXT=100M FAKECUDA_CAPACITY=1G "$CMH" record -q -o "$1.cmh" -- "$B/tests/vmm_kind" $2 >"$1.out" 2>"$1.err"
    check "vmm_kind $2 ran whole ($(cat "$1.err"))" "[ ! -s $1.err ] && grep -q '^end ' $1.out"
}

rec lib lib
"$CMH" frag lib.cmh >lib.frag.txt 2>&1
"$CMH" frag --json lib.cmh >lib.frag.json 2>&1
check "lib: frag names the 3 ranges another caller's cuMemMap, by owner, not expandable segments: $(grep -A2 'cuMemMap ranges' lib.frag.txt | tr -s ' ')" \
    "grep -q '^note: 3 segments are other callers. cuMemMap ranges, not PyTorch.s expandable segments' lib.frag.txt &&
     grep -q '^ *6.0 MiB  program (vmm_kind) (3 ranges)' lib.frag.txt && ! grep -q 'expandable segments neither' lib.frag.txt &&
     [ \$(grep -c '(cuMemMap: program (vmm_kind))' lib.frag.txt) = 3 ]"
py - lib.frag.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))[0]
v = d["vmm_ranges"]
assert v == {"segments": 3, "reserved": 6 << 20, "free": 0, "owners": [{"owner": "program (vmm_kind)", "segments": 3, "reserved": 6 << 20}]}, v
assert d["expandable_segments"] == 0, d["expandable_segments"]
segs = [s for s in d["segments"] if s["vmm_owner"]]
assert len(segs) == 3 and not any(s["expandable"] for s in d["segments"]), d["segments"]
PY
check "lib: frag --json: vmm_ranges by owner, no expandable segment" "[ $? -eq 0 ]"
"$CMH" owners --json lib.cmh >lib.owners.json 2>&1
py - lib.owners.json <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
assert [r["bytes"] for r in end["rows"] if r["owner"] == "program (vmm_kind)"] == [10 << 20], end["rows"]
PY
check "lib: owners' end: the program's 10 MiB (the 3 ranges and the cuMemAlloc), frag's owner name" "[ $? -eq 0 ]"

finish

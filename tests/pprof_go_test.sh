#!/bin/sh
# pprof_go_test.sh BUILD_DIR SOURCE_DIR - Go's own pprof reads our profiles as the reports read
# the record: file and line of the program's frames, names as written ("<module>", "(anonymous
# namespace)" kept: pprof must not demangle them again), one mapping per module.  Skipped (77)
# without `go` (Debian golang-go; scripts/deps.sh installs it).
TEST=pprof_go . "$(dirname "$0")/testlib.sh"
command -v go >/dev/null 2>&1 || { echo "skip: go is not installed (apt-get install golang-go)"; exit 77; }
export GOCACHE="$T/gocache" GOPATH="$T/go" HOME="$T"

"$CMH" record -q -o l.cmh -- "$B/samples/leaky" 4 >/dev/null
"$CMH" export -o l.pb.gz l.cmh
go tool pprof -top -lines l.pb.gz >top.txt 2>err.txt
grep -q 'load_batch .*leaky\.c:[0-9][0-9]*$' top.txt && grep -q 'main .*leaky\.c:[0-9][0-9]*$' top.txt &&
    ok "go tool pprof -top -lines: leaky.c:LINE" || bad "pprof lines: $(cat top.txt err.txt | head -12)"
go tool pprof -raw l.pb.gz >raw.txt 2>&1
sed -n '/^Mappings/,$p' raw.txt | grep '^[0-9]*:' >maps.txt
n=$(wc -l <maps.txt) u=$(awk '{print $2}' maps.txt | sort -u | wc -l)
[ "$n" -ge 1 ] && [ "$n" -eq "$u" ] && grep -q '/leaky ' maps.txt && ! grep -v '\[FN\]\[FL\]\[LN\]' maps.txt | grep -q . &&
    ok "one mapping per module ($n), the program's among them, already symbolized" || bad "mappings: $(cat raw.txt | tail -8)"

"$CMH" export -o t.pb.gz "$F/h200/torch_exp.pickle" 2>/dev/null
go tool pprof -top -lines -nodecount=1000 t.pb.gz >t.txt 2>&1
grep -q '<module> .*torch_train\.py:[0-9]' t.txt && ! grep -q '<unknown>' t.txt &&
    ok "Python's <module> keeps its name" || bad "pprof names: $(grep -E 'unknown|module' t.txt | head -3)"
"$CMH" export -o c.pb.gz "$F/h200/torch_exp.cmh" 2>/dev/null
# 8 of its rows name one (from each stack's site outward); pprof's demangler, given them as
# system names, leaves none
go tool pprof -top -nodecount=1000 c.pb.gz 2>/dev/null | grep -c '(anonymous namespace)' >got.txt
[ "$(cat got.txt)" -ge 8 ] && ok "C++ names keep (anonymous namespace) ($(cat got.txt) rows)" || bad "anonymous namespace: $(cat got.txt)"

# pprof's "flat" bytes are a stack's leaf's: each stack starts at its site, the machinery inside
# it (PyTorch's stack walker torch::unwind::unwind(), its caching allocator, tensor factories,
# dispatcher; the driver, the runtime) left out, so the largest flat row is the largest site of
# `leaks` with the same bytes, and the folded stacks end at the sites too.  The stacks outside
# the site stay (<module>, the interpreter's start).
PT=$SRC/../shared/fixtures/pytorch
for f in octree_nca_cpp_frames_snapshot_action cs336_kk_2.7b_forward_compile_annotations_cppframes; do
    [ -f "$PT/$f.pickle" ] || { echo "skip: $PT/$f.pickle is absent"; continue; }
    "$CMH" export -o "$f.pb.gz" "$PT/$f.pickle" 2>/dev/null
    go tool pprof -top -nodecount=100000 -nodefraction=0 -unit=B "$f.pb.gz" 2>/dev/null | awk '$1 ~ /^[0-9]+B$/ && $1 != "0B"' >"$f.flat"
    "$CMH" leaks --json --top 100000 "$PT/$f.pickle" >"$f.json"
    py - "$f.flat" "$f.json" <<'PY' && ok "$f: pprof's flat bytes on the sites leaks names ($(head -1 "$f.flat" | awk '{print $1, $NF}'))" || bad "$f: flat: $(head -4 "$f.flat")"
import json, sys
rows = [l.split(None, 5) for l in open(sys.argv[1])]
flat = {}
for r in rows:
    flat[r[5].strip()] = flat.get(r[5].strip(), 0) + int(r[0][:-1])
sites = {}
for d in json.load(open(sys.argv[2])):
    for x in d["sites"]:
        fn = (x.get("site") or {}).get("function") or "<no stack>"
        sites[fn] = sites.get(fn, 0) + x["bytes"]
bad = [n for n in flat if n.startswith(("torch::", "c10::", "at::", "_Py", "Py"))]
if bad:
    sys.exit("machinery with flat bytes: %s" % bad[:3])
if flat != sites:
    sys.exit("flat %s != sites %s" % (sorted(flat.items())[:4], sorted(sites.items())[:4]))
PY
    "$CMH" flamegraph --folded --at end -o "$f.folded" "$PT/$f.pickle"
    if awk '{sub(/ [0-9]+$/, ""); n = split($0, a, ";"); print a[n]}' "$f.folded" | grep -qE '^(torch::|c10::|at::|_?Py)'; then
        bad "$f: folded stacks end in machinery: $(awk '{sub(/ [0-9]+$/, ""); n = split($0, a, ";"); print a[n]}' "$f.folded" | sort | uniq -c | sort -rn | head -3)"
    else
        grep -q '<module>.*;forward' "$f.folded" && ok "$f: folded stacks end at the sites, the outer frames kept" ||
            bad "$f: folded: $(head -c 600 "$f.folded")"
    fi
done
finish

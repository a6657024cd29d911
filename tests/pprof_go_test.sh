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
# 34 of its rows name one; pprof's demangler, given them as system names, left 14
go tool pprof -top -nodecount=1000 c.pb.gz 2>/dev/null | grep -c '(anonymous namespace)' >got.txt
[ "$(cat got.txt)" -ge 34 ] && ok "C++ names keep (anonymous namespace) ($(cat got.txt) rows)" || bad "anonymous namespace: $(cat got.txt)"
finish

#!/bin/bash
# gpu-check.sh OUT [SECTIONS] - build cumemhist on a GPU host and check it against the real
# driver, cudart and PyTorch's own recorder.  Writes report.txt and the snapshots under OUT.
# SECTIONS is all (the default) or a comma-separated list of: steptime (9: a PyTorch loop's step
# time with and without the recorder, run first after the build), samples (1a-1d: driver-API and
# cudart samples, kernel timing, an OOM), torch (2-3 and 7: summaries against memory_summary(),
# co-recording), overhead (4-5), allocators (6: allocators above the driver), owners (7: owners
# against cuMemGetInfo), whatif (8: the allocator model's predictions against three settings),
# pynogil (10: Python frames read without the GIL on the host's python3, against the C API's).
# GPU_CHECK_REUSE_BUILD=1 builds into the existing build-gpu instead of starting it afresh.
#
# The host needs cmake, gcc, the CUDA toolkit, python3 with torch (and msgpack); the Debian
# packages cumemhist builds against may be unpacked under .deps/root (dpkg -x), used when
# pkg-config or the packages are missing there.
set -u
OUT=${1:?usage: gpu-check.sh OUT [all|steptime,samples,torch,overhead,allocators,owners,whatif,pynogil]}
ONLY=${2:-all}
# want SECTION: whether the list of sections asked for (comma-separated, or all) names it
want() { case ",$ONLY," in *,all,*|*,"$1",*) return 0 ;; esac; return 1; }
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
SRC=$PWD
B=$SRC/build-gpu
R=$OUT/report.txt
W=$(mktemp -d /tmp/cmh-gpu-XXXXXX)
: >"$R"
T0=$(date +%s)
# say TEXT: into the report and on stdout; a section's heading (== ...) with the seconds since the start
say() { case "$1" in "== "*) set -- "$* (+$(( $(date +%s) - T0 )) s)" ;; esac; echo "$@" | tee -a "$R"; }
run() { say "\$ $*"; "$@" >>"$R" 2>&1; local rc=$?; say "(exit $rc)"; return $rc; }
DEPS=$SRC/.deps/root/usr
DEPS_ONLY=
if [ -d "$DEPS" ]; then
    export CMAKE_PREFIX_PATH=$DEPS
    DEPS_ONLY=1   # its .pc files name /usr: look the files up under the prefix instead
    # only the libraries cumemhist loads go on the path: the unpacked libsqlite3, libtinfo and the
    # like stay off it, so that python3 and PyTorch keep the host's own
    mkdir -p "$W/rtlibs"
    for l in "$DEPS"/lib/x86_64-linux-gnu/lib{unwind,unwind-x86_64,dw,elf,msgpackc,cunit,microhttpd}.so.*; do
        [ -e "$l" ] && ln -sf "$l" "$W/rtlibs/"
    done
    export LD_LIBRARY_PATH=$W/rtlibs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export PATH=/usr/local/cuda/bin:$PATH

say "== host"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nvcc --version | tail -1
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'; uname -r; } >>"$R" 2>&1

say "== build"
t0=$(date +%s)
if [ -n "${GPU_CHECK_REUSE_BUILD:-}" ] && [ -x "$B/cumemhist" ]; then
    cmake --build "$B" -j"$(nproc)" >>"$W/cmake.log" 2>&1
else
rm -rf "$B"
cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMH_DRIVER=real ${DEPS_ONLY:+-DPKG_CONFIG_EXECUTABLE=/nonexistent} >>"$W/cmake.log" 2>&1 &&
    cmake --build "$B" -j"$(nproc)" >>"$W/cmake.log" 2>&1
fi
rc=$?
tail -5 "$W/cmake.log" >>"$R"
say "build exit $rc in $(( $(date +%s) - t0 )) s"
[ $rc -eq 0 ] || { cp "$W/cmake.log" "$OUT/"; exit 1; }
CMH=$B/cumemhist
export CUMEMHIST_DEBUG=1   # says when a cuGetProcAddress pointer is not one of the driver's exports

if want steptime; then
say "== 9. step time of a real PyTorch loop: without the recorder, with PyTorch's own recorder alone (context and stacks all),"
say "   under ours (no stacks, then the default context=all), with and without co-recording (PyTorch's own"
say "   history switched on inside); the six run in turn, three rounds, so that a drift of the machine falls on all"
for rep in 1 2 3; do
    for conf in without torch-alone none-alone all-alone none-corecord all-corecord; do
        case $conf in
        without) pre= ;;
        torch-alone) pre="env TORCH_TRAIN_HISTORY=all" ;;   # PyTorch's own recorder, as co-recording sets it
        none-alone) pre="env CUMEMHIST_TORCH=0 $CMH record -q --context none -o $W/st_$conf.cmh --" ;;
        all-alone) pre="env CUMEMHIST_TORCH=0 $CMH record -q -o $W/st_$conf.cmh --" ;;
        none-corecord) pre="$CMH record -q --context none -o $W/st_$conf.cmh --" ;;
        all-corecord) pre="$CMH record -q -o $W/st_$conf.cmh --" ;;
        esac
        # shellcheck disable=SC2086 # $pre is a command and its arguments
        env -u CUMEMHIST_DEBUG $pre python3 samples/torch_train.py bench 300 2>>"$R" | sed "s/^/$conf (run $rep): /" | tee -a "$R" "$W/steptime.txt"
    done
done
python3 - "$W/steptime.txt" <<'PY' | tee -a "$R"
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) \(run \d+\): median step ([\d.]+) us", line)
    if m:
        runs.setdefault(m.group(1), []).append(float(m.group(2)))
base = statistics.median(runs.get("without", [0])) or 0
print("%-14s %s" % ("setting", "median of the runs' median step (us), ratio to without"))
for k, v in runs.items():
    med = statistics.median(v)
    print("%-14s %8.1f us  x%.3f  (runs: %s)" % (k, med, med / base if base else 0, ", ".join("%.1f" % x for x in v)))
PY
fi # section 9

if want samples; then
say "== 1a. driver-API sample (leaky, 10 steps) under cumemhist record"
run "$CMH" record -o "$OUT/leaky.cmh" -- "$B/samples/leaky" 10
run "$CMH" summary --abbreviated "$OUT/leaky.cmh"
run python3 scripts/cmh_inspect.py "$OUT/leaky.cmh"

say "== 1b. cudart sample (cudaMalloc, cudaMallocAsync, cudaFree, a kernel)"
if nvcc -O2 -g -Xlinker -export-dynamic -o "$W/cudart_demo" samples/cudart_demo.cu >>"$R" 2>&1; then
    "$CMH" record -o "$OUT/cudart.cmh" -- "$W/cudart_demo" >"$W/cudart.out" 2>>"$R"
    say "(exit $?)"
    cat "$W/cudart.out" >>"$R"
    run python3 scripts/gpu_compare.py cudart "$W/cudart.out" "$OUT/cudart.cmh"
    run "$CMH" summary --abbreviated "$OUT/cudart.cmh"
else
    say "nvcc failed: cudart sample skipped"
fi

say "== 1d. kernel timing: cumemhist record --kernels against CUDA events"
if [ -x "$W/cudart_demo" ]; then
    "$CMH" record --kernels -o "$OUT/kernels.cmh" -- "$W/cudart_demo" kernels 20 >"$W/events.out" 2>>"$R"
    say "(exit $?)"
    run "$CMH" kernels "$OUT/kernels.cmh"
    "$CMH" kernels --json "$OUT/kernels.cmh" >"$W/kernels.json" 2>>"$R"
    run python3 scripts/gpu_compare.py kernels "$W/events.out" "$W/kernels.json"
    "$CMH" export --format chrome "$OUT/kernels.cmh" -o "$W/kernels.trace.json" 2>>"$R"
fi

say "== 1c. an out-of-memory on the real device (oom_demo)"
run "$CMH" record -q -o "$W/oom.cmh" -- "$B/samples/oom_demo"
run python3 scripts/cmh_inspect.py "$W/oom.cmh"

fi # sections 1a-1d
if want torch; then
say "== 2. PyTorch training loop: ours and _record_memory_history in one process"
run "$CMH" record -o "$W/torch_plain_exit.cmh" -- python3 samples/torch_train.py check "$W/torch_plain" 20
run python3 scripts/gpu_compare.py torch "$W/torch_plain"
cp "$W/torch_plain.pickle" "$W/torch_plain_summary.txt" "$OUT/" 2>/dev/null
say "-- cumemhist summary of PyTorch's pickle vs torch.cuda.memory_summary() of the same moment"
"$CMH" summary "$W/torch_plain.pickle" >"$W/ours_plain_summary.txt" 2>>"$R"
if diff "$W/ours_plain_summary.txt" "$W/torch_plain_summary.txt" >>"$R"; then say "IDENTICAL: every cell matches"; else say "DIFFERENT (diff above)"; fi
run "$CMH" leaks --top 3 --frames 4 "$W/torch_plain.pickle"
run "$CMH" peak --top 3 --frames 4 "$W/torch_plain.cmh"
say "-- attribution: the peak's sites are lines of samples/torch_train.py, not PyTorch's plumbing"
"$CMH" peak --json "$W/torch_plain.pickle" >"$W/torch_plain_peak.json" 2>>"$R"
if python3 - "$W/torch_plain_peak.json" >>"$R" 2>&1 <<'PY'
import json, sys
sites = json.load(open(sys.argv[1]))[0]["sites_at_peak"]  # one object per device
named = [x for x in sites if x.get("site") and x["site"].get("file", "").endswith("samples/torch_train.py")]
mangled = [x for x in sites if x.get("site") and x["site"].get("function", "").startswith("_Z")]
share = sum(x["bytes"] for x in named) / max(1, sum(x["bytes"] for x in sites))
print("sites %d, on torch_train.py lines %d (%.1f%% of the bytes), mangled %d"
      % (len(sites), len(named), 100 * share, len(mangled)))
sys.exit(0 if named and not mangled else 1)
PY
then say "ATTRIBUTION OK"; else say "ATTRIBUTION FAILED"; fi

say "== 3. the same with expandable segments"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    run "$CMH" record -o "$W/torch_exp_exit.cmh" -- python3 samples/torch_train.py check "$W/torch_exp" 20
run python3 scripts/gpu_compare.py torch "$W/torch_exp" expandable
"$CMH" summary "$W/torch_exp.pickle" >"$W/ours_exp_summary.txt" 2>>"$R"
if diff "$W/ours_exp_summary.txt" "$W/torch_exp_summary.txt" >>"$R"; then say "expandable: IDENTICAL summary"; else say "expandable: DIFFERENT summary (diff above)"; fi

say "== 3b. another workload (attention over random lengths, small tensors, a second stream)"
for conf in plain expandable; do
    ac=; [ "$conf" = expandable ] && ac=expandable_segments:True
    PYTORCH_CUDA_ALLOC_CONF=$ac TORCH_TRAIN_WORKLOAD=varied \
        run "$CMH" record -q -o "$W/torch_var_${conf}_exit.cmh" -- python3 samples/torch_train.py check "$W/torch_var_$conf" 25
    "$CMH" summary "$W/torch_var_$conf.pickle" >"$W/ours_var_${conf}_summary.txt" 2>>"$R"
    if diff "$W/ours_var_${conf}_summary.txt" "$W/torch_var_${conf}_summary.txt" >>"$R"; then
        say "varied $conf: IDENTICAL summary"; else say "varied $conf: DIFFERENT summary (diff above)"; fi
    cp "$W/torch_var_$conf.pickle" "$W/torch_var_${conf}_summary.txt" "$OUT/" 2>/dev/null
done
fi # sections 2-3
if want overhead; then
say "== 4. PyTorch under record --kernels"
run "$CMH" record -q --kernels -o "$W/torch_kernels.cmh" -- python3 samples/torch_train.py time 30
run "$CMH" kernels --top 8 "$W/torch_kernels.cmh"

say "== 5. overhead (interleaved runs; medians of 300 steps each)"
unset CUMEMHIST_DEBUG
for i in 1 2 3; do
    printf 'without recorder: ' | tee -a "$R"; python3 samples/torch_train.py time 300 2>&1 | tee -a "$R"
    printf 'with recorder:    ' | tee -a "$R"
    "$CMH" record -q -o "$W/t.%p.cmh" -- python3 samples/torch_train.py time 300 2>&1 | tee -a "$R"
done
if [ -x "$W/cudart_demo" ]; then
    say "-- cudaMalloc+cudaFree (1 MiB) tight loop, interleaved"
    for i in 1 2 3; do
        "$W/cudart_demo" bench 20000 2>&1 | sed 's/^/without:      /' | tee -a "$R"
        "$CMH" record -q --context none -o "$W/b1.cmh" -- "$W/cudart_demo" bench 20000 2>&1 | sed 's/^/context none: /' | tee -a "$R"
        "$CMH" record -q -o "$W/b2.cmh" -- "$W/cudart_demo" bench 20000 2>&1 | sed 's/^/context all:  /' | tee -a "$R"
    done
fi

fi # sections 4-5
if want allocators; then

say "== 6. allocators above the driver: the block API, pools, VMM, threads (tests/blocks_test.sh)"
unset CUMEMHIST_DEBUG
CMH_REAL_DRIVER=1 run sh tests/blocks_test.sh "$B"
for p in caching_demo pool_async expandable "multistream 8 3000"; do
    n=${p%% *}
    # shellcheck disable=SC2086 # $p is the sample and its arguments
    EXPANDABLE_KEEP=1 "$CMH" record -q -o "$OUT/$n.cmh" -- "$B/samples/$n" ${p#"$n"} >>"$R" 2>&1
    say "$n: exit $?"
    "$CMH" summary --abbreviated "$OUT/$n.cmh" 2>&1 | grep -E "Allocated memory|GPU reserved memory|Allocations" >>"$R"
done
"$CMH" record -q -o "$OUT/frag_oom.cmh" -- "$B/samples/frag_oom" >>"$R" 2>&1
say "frag_oom: exit $?"
run "$CMH" oom "$OUT/frag_oom.cmh"
say "-- PyTorch on the cudaMallocAsync backend: stream-ordered pool samples from a real driver"
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
    run "$CMH" record -o "$OUT/torch_async.cmh" -- python3 samples/torch_train.py time 30
run "$CMH" summary --abbreviated "$OUT/torch_async.cmh"
"$CMH" trace "$OUT/torch_async.cmh" 2>/dev/null | grep pool_sample | tail -3 >>"$R"
say "-- the leak verdict on the real driver: a threaded leak and its steady twin, 10 runs each"
for mode in steps free; do
    l=0 st=0
    for i in 1 2 3 4 5 6 7 8 9 10; do
        "$CMH" record -q -o "$W/tl.cmh" -- "$B/tests/threaded_leak" leak 300 $mode >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak "$W/tl.cmh" >/dev/null 2>&1; [ $? -eq 3 ] && l=$((l + 1))
        "$CMH" record -q -o "$W/ts.cmh" -- "$B/tests/threaded_leak" steady 300 $mode >/dev/null 2>&1
        "$CMH" leaks --fail-on-leak "$W/ts.cmh" >/dev/null 2>&1; [ $? -eq 0 ] && st=$((st + 1))
    done
    say "threaded leak ($mode): $l/10 runs say LEAK, steady twin: $st/10 say none"
done
fi # section 6

if want torch || want owners; then
say "== 7. co-recording: one record of a PyTorch job (cuBLAS, NCCL), owners vs cuMemGetInfo"
unset CUMEMHIST_DEBUG
# bounded: on the H200 (2026-12-04, PyTorch 2.11) this job made its tensors in 0.1 s and then wrote
# nothing for 5 minutes (no mid snapshot), until the check's own limit killed it
run timeout -s TERM 180 "$CMH" record -o "$OUT/owners_job.cmh" -- python3 samples/torch_owners.py "$W/owners.json"
[ -f "$W/owners.mid.cmh" ] || say "section 7: the job left no mid snapshot ($W/owners.mid.cmh): see its record's flight file"
cp "$W/owners.mid.cmh" "$OUT/" 2>/dev/null
run "$CMH" owners "$W/owners.mid.cmh"
"$CMH" owners --json "$W/owners.mid.cmh" >"$W/owners.mid.json" 2>>"$R"
"$CMH" owners --json "$OUT/owners_job.cmh" >"$W/owners_job.json" 2>>"$R"
"$CMH" summary "$W/owners.mid.cmh" >"$W/owners_mid_summary.txt" 2>>"$R"
python3 - "$W/owners.json" "$W/owners.mid.json" "$W/owners_job.json" "$W/owners_mid_summary.txt" >>"$R" 2>&1 <<'PY'
import json, sys
job = json.load(open(sys.argv[1])); o = json.load(open(sys.argv[2]))[0]; j = json.load(open(sys.argv[3]))[0]
end = [m for m in o["moments"] if m["moment"] == "end"][0]
rows = {r["owner"]: r["bytes"] for r in end["rows"]}
total = sum(rows.values())
print("nccl:", job["nccl"])
print("owners sum %d, torch mem_get_info used %d..%d: %s" % (total, job["used"], job["used_after"],
      "WITHIN 2 MiB" if min(abs(total - job["used"]), abs(total - job["used_after"])) <= 2 << 20 else "OFF"))
print("PyTorch allocated %d vs memory_stats %d: %s" % (rows.get("PyTorch allocated", -1), job["allocated"],
      "EQUAL" if rows.get("PyTorch allocated") == job["allocated"] else "DIFFERENT"))
print("PyTorch reserved %d vs memory_stats %d" % (rows.get("PyTorch allocated", 0) + rows.get("PyTorch reserved but free (cached)", 0), job["reserved"]))
print("summary of the record vs memory_summary():", "IDENTICAL" if open(sys.argv[4]).read().rstrip("\n") == job["summary"].rstrip("\n") else "DIFFERENT")
print("rows:", rows)
ooms = [m for m in j["moments"] if m["moment"].startswith("out of memory")]
print("induced OOM in the job's record: %d moment(s), PyTorch part %s" % (len(ooms), j["pytorch_part"]))
PY
fi # section 7

if want whatif; then
say "== 8. what-if: one fragmenting workload under three settings, predicted from the first"
for conf in plain expandable split128; do
    case $conf in plain) ac= ;; expandable) ac=expandable_segments:True ;; split128) ac=max_split_size_mb:128 ;; esac
    PYTORCH_CUDA_ALLOC_CONF=$ac TORCH_TRAIN_WORKLOAD=varied \
        run python3 samples/torch_train.py check "$W/wi_$conf" 25
    cp "$W/wi_$conf.pickle" "$OUT/" 2>/dev/null
done
"$CMH" whatif --json --conf expandable_segments:True --conf max_split_size_mb:128 "$W/wi_plain.pickle" >"$W/whatif.json" 2>>"$R"
for conf in expandable split128; do "$CMH" peak --json "$W/wi_$conf.pickle" >"$W/wi_$conf.peak.json" 2>>"$R"; done
python3 - "$W/whatif.json" "$W/wi_expandable.peak.json" "$W/wi_split128.peak.json" >>"$R" 2>&1 <<'PY'
import json, sys
w = json.load(open(sys.argv[1]))["settings"]
measured = {"expandable_segments:True": json.load(open(sys.argv[2]))[0], "max_split_size_mb:128": json.load(open(sys.argv[3]))[0]}
print("%-28s %16s %16s %10s %s" % ("setting", "predicted resv", "measured resv", "diff MiB", "OOM predicted"))
print("%-28s %16d %16s %10s %d (self-replay mismatches %d)" % ("recorded (defaults)", w[0]["peak_reserved"], "-", "-", w[0]["ooms"], w[0]["self_replay_mismatches"]))
for r in w[1:]:
    m = measured[r["setting"]]["peak_reserved"]["bytes"]
    print("%-28s %16d %16d %10.1f %d" % (r["setting"], r["peak_reserved"], m, (r["peak_reserved"] - m) / 1048576, r["ooms"]))
PY
fi # section 8

if want pynogil; then
say "== 10. Python frames read without the GIL (recorder/pystack.c's layout) on this python3, against the C API's"
run python3 -c "import sys; print(sys.version)"
for prog in pylines pyalloc reuse; do
    case $prog in pylines) args=tests/python/pylines.py ;; pyalloc) args="tests/python/pyalloc.py $B/tests/libpycallback.so" ;;
        reuse) args="tests/python/pylines.py reuse" ;; esac
    for m in held sys api wrong; do
        case $m in held) e="CUMEMHIST_PYSTACKS=held" ;; sys) e="CUMEMHIST_PYSTACKS=held CUMEMHIST_TEST_PYSYSCALLS=1" ;;
            api) e="CUMEMHIST_TEST_PYLAYOUT=none" ;; wrong) e="CUMEMHIST_PYSTACKS=held CUMEMHIST_TEST_PYLAYOUT=wrong" ;; esac
        run env $e timeout 60 "$CMH" record -q -o "$W/ng_$prog.$m.cmh" -- python3 $args
        "$CMH" export -o "$W/ng_$prog.$m.json" "$W/ng_$prog.$m.cmh" 2>>"$R"
    done
done
python3 - "$W" >>"$R" 2>&1 <<'PY'
import json, os, sys
sys.path.insert(0, "tests/python")
from pyframes import frames  # the Python frames of each allocation, by its size; the settings
w = sys.argv[1]
keys = ("python_stacks", "python_stacks_read_without_gil", "python_stacks_refused_layout", "python_stacks_refused_nogil")
for prog in "pylines", "pyalloc", "reuse":
    got = {}
    for m in "held", "sys", "api", "wrong":
        p = "%s/ng_%s.%s.json" % (w, prog, m)
        got[m] = frames(p) if os.path.exists(p) else ({}, {})
        print("%-8s %-6s %d sizes, %d Python frames; %s" % (prog, m, len(got[m][0]), sum(len(f) for v in got[m][0].values() for f in v),
              ", ".join("%s %s" % (k[14:] or "stacks", got[m][1].get(k, "-")) for k in keys)))
    api = got["api"][0]
    for m in "held", "sys":
        diff = [(k, got[m][0].get(k), api.get(k)) for k in api if got[m][0].get(k) != api.get(k)]
        print("%-8s %-6s against the C API's (GIL taken back): %s" % (prog, m, "IDENTICAL" if api and not diff else "DIFFERENT %s" % diff[:2]))
    wrong = got["wrong"][1]
    print("%-8s wrong layout: %s" % (prog, "REFUSED, counted" if wrong.get("python_stacks_refused_layout", 0) > 0 and not wrong.get("python_stacks_read_without_gil") else "NOT REFUSED %s" % wrong))
PY
# section 7's job (when it ran): NCCL's and cuBLAS's allocations come from threads that released
# the GIL; read without it, their site is the job's line (torch_owners.py:21, a matmul's line)
[ -f "$OUT/owners_job.cmh" ] && run "$CMH" oom "$OUT/owners_job.cmh"
fi # section 10

mv "$OUT/leaky.cmh" "$OUT/cudart.cmh" "$W/" 2>/dev/null
(cd "$W" && tar czf "$OUT/misc.tar.gz" ./*.json ./*.txt ./*.log ./*.out ./oom.cmh ./torch_exp.cmh ./torch_exp.pickle \
    ./torch_plain.cmh ./torch_kernels.cmh ./leaky.cmh ./cudart.cmh 2>/dev/null)
say "== done"

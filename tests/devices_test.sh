#!/bin/sh
# devices_test.sh BUILD_DIR SOURCE_DIR - --device N in every reading command: a device the record
# lacks is exit 2 with "no device N in this snapshot (it has ...)" (docs/CLI.md) and no half JSON
# document; pinned host memory (--device -1) is reported, or refused with a reason (exit 2),
# never an empty success.
TEST=devices . "$(dirname "$0")/testlib.sh"
"$CMH" record -q -o man.cmh -- "$B/tests/pinned_prog" >/dev/null 2>&1 || bad "record pinned_prog"
"$CMH" record -q -o frag.cmh -- "$B/samples/frag_oom" >/dev/null 2>&1

# the exports that leave pinned host memory out count its allocations, not its entries plus its
# segments ("2 pinned host allocations" for pinned_prog's one), and the entries they wrote
dev_entries=$("$CMH" peak --json --device 0 man.cmh | py -c 'import json, sys; print(json.load(sys.stdin)[0]["trace_entries"])')
for f in pickle json; do
    "$CMH" export -o "man.$f" man.cmh >/dev/null 2>"man_$f.err"
    # (the pickle: the entries its device_traces hold, its implied ones among them)
    w=$dev_entries; [ $f = pickle ] && w=$(py -c "import pickle, sys; print(sum(len(t) for t in pickle.load(open(sys.argv[1], 'rb'))['device_traces']))" man.pickle)
    check "export -o man.$f: 1 pinned host allocation left out, $w device entries written ($(cat "man_$f.err"))" \
        "grep -q '^cumemhist: export: 1 pinned host allocation left out (1 live at the end, 1 trace entry; ' man_$f.err &&
         grep -q 'wrote man.$f: 1 record, $w trace entr' man_$f.err"
done
# pprof holds every device, and pinned host memory apart as the reports keep it (its total added
# host bytes to the GPUs'); --device -1 gives it
"$CMH" export -f pprof -o man.pb.gz man.cmh >/dev/null 2>man_pp.err
"$CMH" export -f pprof --device -1 -o manh.pb.gz man.cmh >/dev/null 2>manh_pp.err
check "export -f pprof: device 0 only by default, said; --device -1 the pinned host memory ($(cat man_pp.err manh_pp.err | tr '\n' ' '))" \
    "grep -q '^cumemhist: export: 1 pinned host allocation left out (1 live at the end, 1 trace entry; the profile is the devices.*--device -1 for it)' man_pp.err &&
     grep -q 'wrote man.pb.gz: 1 record, 1 trace entry of device 0\$' man_pp.err && grep -q 'of device -1 (pinned host)' manh_pp.err &&
     ! grep -q 'left out' manh_pp.err"
# ... said with -q too, as every export says what it leaves out (-q: no progress), and in the
# profile itself, where go tool pprof -comments shows its words (it read 158 MB live of a record
# with a 4 MiB pinned block too, with no word in the file)
"$CMH" export -q -f pprof -o manq.pb.gz man.cmh >/dev/null 2>man_ppq.err
check "export -q -f pprof: the pinned host allocation left out, said ($(cat man_ppq.err))" \
    "grep -q '^cumemhist: export: 1 pinned host allocation left out' man_ppq.err"
check "export -f pprof: the profile's comment says pinned host memory is left out; --device -1's does not" "py -c '
import gzip
d = gzip.open(\"man.pb.gz\").read(); h = gzip.open(\"manh.pb.gz\").read()
assert b\"pinned host memory left out (1 allocation, 1 live at the end): export --device -1 for it\" in d, d[-600:]
assert b\"left out\" not in h'"
check "export -f json: the document counts 1 host allocation, 1 host segment" "py -c '
import json
d = json.load(open(\"man.json\"))[\"cumemhist\"]
assert d[\"host_allocations_left_out\"] == 1 and d[\"host_segments_left_out\"] == 1, d'"

# a device the record lacks: every command alike
for c in summary peak leaks oom frag owners whatif stats trace kernels plot flamegraph report export diff; do
    case $c in
    plot | flamegraph | report) args="-o out.$c" ;;
    export) args="-f pprof -o out.pb.gz" ;;
    diff) args="frag.cmh" ;;
    *) args="" ;;
    esac
    "$CMH" $c --device 5 $args frag.cmh >out.txt 2>err.txt
    rc=$?
    check "$c --device 5 of a one-device record: exit 2, 'no device 5 in this snapshot (it has device 0)' ($rc: $(head -c 200 err.txt))" \
        "[ $rc -eq 2 ] && grep -q 'frag.cmh: no device 5 in this snapshot (it has device 0)' err.txt"
done
# a PyTorch snapshot listing 4 devices, each empty (device_traces of 4 empty lists): a device
# past them is refused too ('summary --device 7' printed device 7's empty table, exit 0)
py -c "
import pickle
pickle.dump({'segments': [], 'device_traces': [[], [], [], []], 'allocator_settings': {}}, open('empty4.pickle', 'wb'), protocol=4)"
for c in summary peak oom owners; do
    "$CMH" $c --device 7 empty4.pickle >out.txt 2>err.txt
    rc=$?
    check "$c --device 7 of 4 empty devices: exit 2, 'it has 0, 1, 2, 3, each empty' ($rc: $(head -c 200 err.txt))" \
        "[ $rc -eq 2 ] && grep -q 'empty4.pickle: no device 7 in this snapshot (it has devices 0, 1, 2, 3, each empty)' err.txt && [ ! -s out.txt ]"
done
"$CMH" peak --device 2 empty4.pickle >out.txt 2>&1
check "peak --device 2 of 4 empty devices: its (empty) report, exit 0" "grep -q 'no allocations recorded' out.txt"
# ... and without --device every report says the snapshot lists 4 devices, each empty, as --device 7
# does (report's header read '1 device', the others device 0 alone); PyTorch's own layouts (summary,
# trace), the SVG and the pages on stderr, the text reports on stdout before their device's section
L='4 devices listed (0, 1, 2, 3), each empty: nothing allocated, no trace'
for c in peak leaks oom frag owners; do
    "$CMH" $c empty4.pickle >out.txt 2>err.txt
    check "$c of 4 empty devices: '$L' on stdout ($(head -c 300 out.txt))" \
        "grep -qx \"empty4.pickle: $L (device 0's report below; the others read the same)\" out.txt"
done
for c in summary plot view trace; do
    "$CMH" $c empty4.pickle >out.txt 2>err.txt
    check "$c of 4 empty devices: '$L' on stderr, stdout its own ($(head -c 300 err.txt))" \
        "grep -q \"^cumemhist: .*empty4.pickle: $L\" err.txt && ! grep -q 'devices listed' out.txt || [ $c = plot ]"
done
"$CMH" summary empty4.pickle 2>/dev/null | head -2 | tail -1 | grep -q 'PyTorch CUDA memory summary, device ID 0' &&
    ok "summary of 4 empty devices: PyTorch's table first on stdout, as memory_summary() prints it" || bad "summary of 4 empty devices: a line before the table"
"$CMH" report empty4.pickle -o empty4.html 2>/dev/null
check "report of 4 empty devices: its header lists them ($(grep -o 'r-listed[^<]*' empty4.html))" \
    "grep -q \"$L (device 0.s section below; the others read the same)\" empty4.html && ! grep -q '· 1 device<' empty4.html"
"$CMH" plot empty4.pickle 2>/dev/null | grep -q "nothing to plot: no memory allocated or reserved, no trace entries; $L<" &&
    ok "plot of 4 empty devices: its panel says so" || bad "plot of 4 empty devices: $("$CMH" plot empty4.pickle 2>/dev/null | grep -o 'class=.empty[^<]*')"
"$CMH" peak --device 2 empty4.pickle >out.txt 2>&1
check "peak --device 2 of 4 empty devices: no listing line (the device asked for)" "! grep -q 'devices listed' out.txt"
# export's other formats hold every device: --device is refused with the reason (it wrote both
# devices of a two-device record without a word)
for f in memviz json chrome sqlite; do
    "$CMH" export -f $f --device 0 -o out.$f frag.cmh >out.txt 2>err.txt
    rc=$?
    check "export -f $f --device 0: exit 2, '--device is for -f pprof' ($rc: $(head -c 200 err.txt))" \
        "[ $rc -eq 2 ] && grep -q 'export: --device is for -f pprof (a profile of that device alone); -f $f writes every device' err.txt && [ ! -e out.$f ]"
done
for c in summary peak leaks owners oom frag; do
    "$CMH" $c --json --device 5 frag.cmh >out.json 2>/dev/null
    check "$c --json --device 5: nothing on stdout, no half document" "[ ! -s out.json ]"
done
check "export --device 5 wrote no file" "[ ! -e out.pb.gz ]"

# pinned host memory: the commands that report it show its 6 MiB; the others say why not
for c in summary leaks peak frag; do
    "$CMH" $c --device -1 man.cmh >out.txt 2>err.txt
    rc=$?
    check "$c --device -1 reports the pinned memory ($rc)" "[ $rc -eq 0 ] && grep -q '6.0 MiB\|6144 KiB' out.txt"
done
for c in owners "owners --json" whatif stats trace; do
    "$CMH" $c --device -1 man.cmh >out.txt 2>err.txt
    rc=$?
    check "$c --device -1: exit 2 with a reason, nothing on stdout ($rc: $(head -c 200 err.txt))" \
        "[ $rc -eq 2 ] && grep -q '^cumemhist: .*--device -1 (pinned host memory): ' err.txt && [ ! -s out.txt ]"
done
finish

#!/bin/sh
# writers_test.sh BUILD_DIR SOURCE_DIR - every command that writes a file, against every kind of
# thing that can be at its output path: nothing, a regular file, a symlink, a FIFO, a character
# device, a directory, a read-only directory, a full disk (RLIMIT_FSIZE).  What is at the path is
# replaced atomically (a regular file, a link: never its target), written through (a FIFO, a
# device) or refused with the reason (a directory; SQLite on anything it cannot seek in); a
# device node and a symlink's target are never changed; no temporary file is left behind.
TEST=writers . "$(dirname "$0")/testlib.sh"
export XDG_RUNTIME_DIR="$T" # a recorder's flight record for a device output goes here, not to /tmp
export CUMEMHIST_REGISTRY="$T/cumemhist"

H=$F/h200
"$CMH" record -q -o l.cmh -- "$B/samples/leaky" >/dev/null 2>&1 || bad "record of samples/leaky failed"
cp "$F/flight/killed-150.flight" flight.orig

# A command line for writer $1 with output $2 (a shell word).  What was at the path before is
# text ("old"), not the command's own earlier output: --force replaces it (without it, it is kept:
# tests/clobber_test.sh); record refuses it before its run and takes an earlier .cmh.
cmdline() {
    case $1 in
    record) echo "\"$CMH\" record -q -o $2 -- \"$B/samples/leaky\"" ;;
    memviz | json | chrome | pprof) echo "\"$CMH\" export --force -f $1 \"$T/l.cmh\" -o $2" ;;
    sqlite) echo "\"$CMH\" export --force -f sqlite \"$T/l.cmh\" -o $2" ;;
    symbolize) echo "\"$CMH\" symbolize --force \"$T/l.cmh\" -o $2" ;;
    merge) echo "\"$CMH\" merge --force -o $2 \"$H/torch_exp.cmh\" \"$H/torch_exp.pickle\"" ;;
    recover) echo "cp \"$T/flight.orig\" \"$T/fl.flight\" && \"$CMH\" recover --force \"$T/fl.flight\" -o $2" ;;
    plot) echo "\"$CMH\" plot --force \"$T/l.cmh\" -o $2" ;;
    folded) echo "\"$CMH\" flamegraph --force --folded \"$T/l.cmh\" -o $2" ;;
    flamegraph) echo "\"$CMH\" flamegraph --force \"$T/l.cmh\" -o $2" ;;
    report) echo "\"$CMH\" report --force \"$T/l.cmh\" -o $2" ;;
    esac
}
writers="record memviz json chrome pprof sqlite symbolize merge recover plot flamegraph folded report"
# snapshots stay private; what is made to be shared keeps the replaced file's permissions
snapshot() { case $1 in record | memviz | symbolize | merge | recover) true ;; *) false ;; esac; }
# what was at the path before: text, or for record a recording (record -o refuses, before its run,
# a file that holds something else: a source file named by mistake)
"$CMH" record -q -o "$T/prev.cmh" -- "$B/samples/leaky" >/dev/null 2>&1 || echo "FAIL: record prev.cmh"
prev() { if [ "$1" = record ]; then cp "$T/prev.cmh" "$2"; else echo "${3:-old}" >"$2"; fi; }
was_prev() { if [ "$1" = record ]; then cmp -s "$T/prev.cmh" "$2"; else [ "$(cat "$2")" = "${3:-old}" ]; fi; }
streams() { [ "$1" != sqlite ]; } # every format but SQLite's can be streamed

# The directory holds only what it should: no temporary file, no claim, no flight record.
leftovers() { ls -a "$1" | grep -E '\.tmp\.|\.claim|\.flight$' ; }

# a character device of our own (the null device's numbers), where we may make one
cdev=""
if mknod "$T/cdev.probe" c 1 3 2>/dev/null; then cdev=1; rm -f "$T/cdev.probe"; fi
# a directory this user cannot write in: by mode, or for root an immutable one
rodir() {
    mkdir -p "$1" && chmod 555 "$1"
    if touch "$1/.probe" 2>/dev/null; then
        rm -f "$1/.probe"
        chmod 755 "$1"
        chattr +i "$1" 2>/dev/null && ! touch "$1/.probe" 2>/dev/null && return 0
        chattr -i "$1" 2>/dev/null
        return 1
    fi
}
rodir_cleanup() { chattr -i "$1" 2>/dev/null; chmod 755 "$1" 2>/dev/null; rm -rf "$1"; }
ro_ok=""
rodir "$T/roprobe" && ro_ok=1
rodir_cleanup "$T/roprobe"

for w in $writers; do
    d=$T/w-$w
    mkdir -p "$d"
    cd "$d" || exit 1
    case $w in record) ext=cmh ;; memviz) ext=pickle ;; json) ext=json ;; chrome) ext=trace.json ;; pprof) ext=pb.gz ;;
        sqlite) ext=db ;; symbolize | merge | recover) ext=cmh ;; plot | flamegraph) ext=svg ;; folded) ext=folded ;; report) ext=html ;; esac
    probs=""

    # nothing there: a new file, 0600
    eval "$(cmdline $w "out.$ext")" >/dev/null 2>err.txt
    rc=$?
    { [ $rc -eq 0 ] && [ -f out.$ext ] && [ -s out.$ext ] && [ "$(stat -c %a out.$ext)" = 600 ]; } ||
        probs="$probs [missing: exit $rc, $(stat -c %a out.$ext 2>&1), $(head -2 err.txt)]"

    # a regular file: replaced, with the permissions its owner gave it as the rule says (a
    # snapshot: 0600 plus the read access the old file gave the group and others; anything
    # else: the old file's bits)
    for m in 600 644 660 604 444; do
        prev $w old.$ext
        chmod $m old.$ext
        eval "$(cmdline $w "old.$ext")" >/dev/null 2>err.txt
        rc=$?
        if snapshot $w; then want=$(printf '%o' $((0600 | (0$m & 0044)))); else want=$m; fi
        { [ $rc -eq 0 ] && [ -f old.$ext ] && ! was_prev $w old.$ext && [ "$(stat -c %a old.$ext)" = $want ]; } ||
            probs="$probs [regular $m: exit $rc, mode $(stat -c %a old.$ext) (want $want), $(head -2 err.txt)]"
        chmod 600 old.$ext
    done
    # a file another user owns passes nothing on (a planted 0666 file must not make ours 0666)
    if [ "$(id -u)" = 0 ] && chown nobody old.$ext 2>/dev/null; then
        chmod 666 old.$ext
        eval "$(cmdline $w "old.$ext")" >/dev/null 2>err.txt
        rc=$?
        { [ $rc -eq 0 ] && [ "$(stat -c '%a %u' old.$ext)" = "600 0" ]; } ||
            probs="$probs [another's 0666 file: exit $rc, now $(stat -c '%a %U' old.$ext), $(head -2 err.txt)]"
    fi

    # a symlink: the link replaced by a file, its target untouched
    echo precious >target
    ln -s target link.$ext
    eval "$(cmdline $w "link.$ext")" >/dev/null 2>err.txt
    rc=$?
    { [ $rc -eq 0 ] && [ ! -L link.$ext ] && [ -f link.$ext ] && [ "$(cat target)" = precious ] && [ "$(stat -c %a link.$ext)" = 600 ] &&
        grep -q "^cumemhist: note: \(.*/\)\{0,1\}link.$ext was a symbolic link to target; it is now the file itself" err.txt; } ||
        probs="$probs [symlink: exit $rc, link $( [ -L link.$ext ] && echo kept || echo replaced), target '$(cat target)', mode $(stat -c %a link.$ext), said: $(head -2 err.txt)]"

    # a symlink to a directory: refused like the directory it names, the link kept
    mkdir -p linked_dir
    ln -s linked_dir dirlink.$ext
    eval "$(cmdline $w "dirlink.$ext")" >/dev/null 2>err.txt
    rc=$?
    { [ $rc -ne 0 ] && [ -L dirlink.$ext ] && [ -d linked_dir ] && grep -q 'directory' err.txt; } ||
        probs="$probs [symlink to a directory: exit $rc, link $( [ -L dirlink.$ext ] && echo kept || echo replaced), $(head -2 err.txt)]"

    # a FIFO: written through (a reader gets the whole output), or refused
    mkfifo fifo
    if streams $w; then
        (cat fifo >got) &
        reader=$!
        eval "$(cmdline $w fifo)" >/dev/null 2>err.txt
        rc=$?
        wait $reader
        { [ $rc -eq 0 ] && [ -p fifo ] && [ -s got ]; } || probs="$probs [fifo: exit $rc, read $(wc -c <got 2>/dev/null) bytes, $(head -2 err.txt)]"
        [ $w = record ] && ! "$CMH" summary got >/dev/null 2>&1 && probs="$probs [fifo: what record streamed does not load]"
    else
        eval "$(cmdline $w fifo)" >/dev/null 2>err.txt
        rc=$?
        { [ $rc -eq 1 ] && [ -p fifo ] && grep -q 'needs a regular file' err.txt; } ||
            probs="$probs [fifo: exit $rc (want 1, refused), $(head -2 err.txt)]"
    fi

    # a character device: written through, or refused; the node unchanged
    if [ -n "$cdev" ]; then
        mknod cdev c 1 3
        eval "$(cmdline $w cdev)" >/dev/null 2>err.txt
        rc=$?
        want=0
        streams $w || want=1
        { [ $rc -eq $want ] && [ -c cdev ] && [ "$(stat -c '%t:%T' cdev)" = 1:3 ]; } ||
            probs="$probs [device: exit $rc (want $want), node $(stat -c '%F %t:%T' cdev 2>&1), $(head -2 err.txt)]"
        [ $want = 1 ] && ! grep -q 'needs a regular file' err.txt && probs="$probs [device: no reason given: $(head -1 err.txt)]"
    fi

    # a directory: refused, untouched
    mkdir dir
    eval "$(cmdline $w dir)" >/dev/null 2>err.txt
    rc=$?
    { [ $rc -eq 1 ] && [ -d dir ] && [ -z "$(ls -A dir)" ] && grep -q 'directory' err.txt; } ||
        probs="$probs [directory: exit $rc, $(ls -A dir | head -3), $(head -2 err.txt)]"

    # a read-only directory: refused, nothing made in it
    if [ -n "$ro_ok" ]; then
        rodir ro
        eval "$(cmdline $w "ro/out.$ext")" >/dev/null 2>err.txt
        rc=$?
        { [ $rc -eq 1 ] && [ -z "$(ls -A ro)" ] && grep -q 'ro' err.txt; } || probs="$probs [read-only dir: exit $rc, $(ls -A ro), $(head -2 err.txt)]"
        rodir_cleanup ro
    fi

    # a full disk: the old file stays whole, the reason is said, nothing is left behind
    prev $w full.$ext "previous contents"
    # (stderr through a pipe: a file would be past the limit too)
    { sh -c "trap '' XFSZ; ulimit -f 0; $(cmdline $w "full.$ext")" 2>&1 >/dev/null; echo "status $?"; } | cat >err.txt
    rc=$(sed -n 's/^status //p' err.txt)
    { [ $rc -eq 1 ] && was_prev $w full.$ext "previous contents" && grep -Eq 'too large|No space|lost' err.txt; } ||
        probs="$probs [full disk: exit $rc, now '$(head -c 20 full.$ext)', $(head -2 err.txt)]"

    lo=$(leftovers "$d")
    [ -n "$lo" ] && probs="$probs [left behind: $lo]"
    [ -z "$probs" ] && ok "$w: missing, regular (its permissions: $(snapshot $w && echo 'snapshot: read bits' || echo shared: all)), symlink (said), FIFO${cdev:+, device}, directory${ro_ok:+, read-only dir}, full disk" ||
        bad "$w:$probs"
    cd "$T" || exit 1
done
[ -z "$cdev" ] && echo "note: no character device could be made here (not root): that column was not run"
[ -z "$ro_ok" ] && echo "note: no read-only directory could be made here: that column was not run"

# record: nothing made beside a device it streams through; the flight record in the runtime dir.
# The exit dump failed (ENOSPC): status 1, naming where the snapshot is (it once exited 0)
if [ -n "$cdev" ]; then
    mkdir -p "$T/dev" && mknod "$T/dev/full" c 1 7
    "$CMH" record -o "$T/dev/full" -- "$B/samples/leaky" >/dev/null 2>err.txt
    rc=$?
    saved=$(ls "$T"/cumemhist/full.*.cmh 2>/dev/null | head -1)
    { [ "$(ls -A "$T/dev")" = full ] && [ -c "$T/dev/full" ] && [ -n "$saved" ] && "$CMH" summary "$saved" >/dev/null 2>&1 &&
        grep -q "snapshot $saved" err.txt && [ $rc -eq 1 ] &&
        grep -q "^cumemhist: exit status 1: pid [0-9]* could not write its snapshot to $T/dev/full (its exit dump failed); it is in $saved (the program itself exited 0)$" err.txt; } &&
        ok "record -o a full device: nothing made beside it; the snapshot recovered into the runtime directory and named; exit 1" ||
        bad "record -o full device: exit $rc, beside it: $(ls -A "$T/dev"), saved '$saved', $(cat err.txt)"
    # the same through a shell that uses no CUDA itself: the device is nobody's to hand on
    rm -f "$T"/cumemhist/full.*
    "$CMH" record -o "$T/dev/full" -- sh -c "'$B/samples/leaky' >/dev/null; true" 2>err.txt
    rc=$?
    saved=$(ls "$T"/cumemhist/full.*.cmh 2>/dev/null | head -1)
    { [ $rc -eq 1 ] && [ -n "$saved" ] && [ -c "$T/dev/full" ] && ! grep -q 'holds pid' err.txt &&
        grep -q "^cumemhist: exit status 1: pid [0-9]* could not write its snapshot to $T/dev/full (its exit dump failed); it is in $saved (the program itself exited 0)$" err.txt; } &&
        ok "record -o a full device, through sh -c: exit 1, the snapshot named" || bad "record -o full device, sh -c: exit $rc, saved '$saved', $(cat err.txt)"
fi

# whatif --json > a file, > a full device: the shell makes the file; a failed write is status 1
"$CMH" whatif --json "$H/torch_exp.pickle" >w.json 2>err.txt && py -c "import json; json.load(open('w.json'))" &&
    "$CMH" whatif --json "$H/torch_exp.pickle" >/dev/full 2>err.txt
rc=$?
[ $rc -eq 1 ] && grep -q 'No space left' err.txt && ok "whatif --json: to a file; to a full device, exit 1 and the reason" ||
    bad "whatif --json > /dev/full: exit $rc, $(cat err.txt)"

# a closed pipe: quiet, by SIGPIPE, even when the caller ignored SIGPIPE (an output far larger
# than a pipe holds)
"$B/bench_codecs" --write blocks 20000 7 big.cmh >/dev/null 2>&1 || bad "bench_codecs --write failed"
py - "$CMH" "$T/big.cmh" <<'PY'
import signal, subprocess, sys
for ignore in (False, True):
    if ignore: signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    p = subprocess.Popen([sys.argv[1], "trace", sys.argv[2]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         restore_signals=not ignore)
    p.stdout.read(16); p.stdout.close()
    err = p.stderr.read(); rc = p.wait()
    if rc != -signal.SIGPIPE or err:
        print("closed pipe (SIGPIPE %s): status %d, stderr %r" % ("ignored" if ignore else "default", rc, err)); sys.exit(1)
PY
check "trace | head: ends quietly by SIGPIPE, whether the caller ignored it or not" "[ $? -eq 0 ]"

# record --lib that is not a shared library: refused before the program runs
"$CMH" record --lib /etc/passwd -- sh -c 'echo ran >ran.txt' 2>err.txt
rc=$?
[ $rc -eq 1 ] && [ ! -e ran.txt ] && grep -q 'not a shared library' err.txt && ok "record --lib /etc/passwd: exit 1 before the program runs" ||
    bad "record --lib /etc/passwd: exit $rc, ran: $( [ -e ran.txt ] && echo yes || echo no), $(cat err.txt)"
# a library that loads but is not the recorder: said, not "no process called CUDA"
lz=$(ls /usr/lib/*/libz.so.1 /lib/*/libz.so.1 2>/dev/null | head -1)
if [ -n "$lz" ]; then
    "$CMH" record --lib "$lz" -- "$B/samples/leaky" >/dev/null 2>err.txt
    rc=$?
    [ $rc -eq 1 ] && grep -q 'did not record' err.txt && ! grep -q 'no process called' err.txt &&
        ok "record --lib (another library): exit 1, 'did not record'" || bad "record --lib libz: exit $rc, $(cat err.txt)"
fi

# every file the recorder makes is 0600: the claim of a fixed path included (a plain preload's,
# which stays: under record only the launched process claims, and record removes it at the end)
env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$B/libcumemhist.so" CUMEMHIST_OUTPUT=fixed.cmh "$B/samples/leaky" >/dev/null 2>&1
ls -l fixed.cmh.claim* >claims.txt 2>&1
grep -q '^-rw-------' claims.txt && ! grep -q '^-rw-r' claims.txt && ok "the .claim file is 0600" || bad "claim mode: $(cat claims.txt)"

finish

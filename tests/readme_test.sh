#!/bin/sh
# readme_test.sh BUILD_DIR SOURCE_DIR - every example in README.md that shows a session
# ("$ cumemhist ..." and what it printed) is run here, from a directory that has the source's
# tests/ beside it as the README's paths assume, and what it prints now must be what the README
# says it prints, line for line (stderr before stdout, as a terminal shows a short run).  The
# README's outputs had drifted from the command's (an entry number, a wording, a section) and
# nothing noticed.
TEST=readme . "$(dirname "$0")/testlib.sh"
ln -s "$SRC/tests" tests
mkdir bin && ln -s "$CMH" bin/cumemhist
PATH=$T/bin:$PATH

# the sessions: a command line ("$ cumemhist ...") and the lines after it up to the next
# command or the end of its fenced block
mkdir -p "$T/ex"
awk -v dir="$T/ex" '
    /^```/ { if (inblock) inblock = 0; else { inblock = 1; out = "" } next }
    inblock && /^\$ cumemhist / { n++; out = sprintf("%s/%02d.expected", dir, n); cmd = sprintf("%s/%02d.cmd", dir, n)
                                 print substr($0, 3) > cmd; close(cmd); printf "" > out; next }
    inblock && out != "" { print >> out }
' "$SRC/README.md"

n=0
for c in "$T"/ex/*.cmd; do
    [ -e "$c" ] || break
    n=$((n + 1))
    line=$(cat "$c")
    # stderr first, then stdout: what a terminal shows of a command whose stdout is buffered
    sh -c "$line" >"${c%.cmd}.out" 2>"${c%.cmd}.err"
    rc=$?
    cat "${c%.cmd}.err" "${c%.cmd}.out" >"${c%.cmd}.got"
    if [ $rc -eq 0 ] && cmp -s "${c%.cmd}.expected" "${c%.cmd}.got"; then
        ok "README: \$ $line prints what the README shows"
    else
        bad "README: \$ $line (status $rc) prints otherwise than the README shows:
$(diff "${c%.cmd}.expected" "${c%.cmd}.got" | head -20)"
    fi
done
check "the README has sessions to check ($n)" "[ $n -ge 3 ]"

# the README's picture is today's plot of its sample record (docs/timeline.svg had kept an older
# plot's label layout and axis): made the way its commit says, the title line aside (plot titles
# by the file's name; the picture's names the sample)
"$CMH" merge -o torch_exp.merged.cmh "$F/h200/torch_exp.cmh" "$F/h200/torch_exp.pickle" >/dev/null 2>&1
"$CMH" plot torch_exp.merged.cmh -o timeline.svg >/dev/null 2>&1
grep -v '^<text class="t" ' timeline.svg >now.svg
grep -v '^<text class="t" ' "$SRC/docs/timeline.svg" >readme.svg
check "docs/timeline.svg is what plot draws of torch_exp merged now ($(diff now.svg readme.svg | wc -l) lines differ; make it again as git log -1 docs/timeline.svg says)" \
    "[ -s now.svg ] && cmp -s now.svg readme.svg"
finish

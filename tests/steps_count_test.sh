#!/bin/sh
# steps_count_test.sh BUILD_DIR SOURCE_DIR - loops of a known number of iterations, no marks
# (tests/steps_count.c): their steps are that number, neither one more (a buffer made once before
# the loop taken for a step's: swapbuf.c read 'steps: 121' for 120) nor one fewer (an op once a
# step mid-step, the ops before it never the same twice running: steady_var.c read 'steps: 299'
# for 300), with and without a warm-up, with a last unfinished iteration, in a thread of its own.
TEST=steps_count . "$(dirname "$0")/testlib.sh"
P=$B/tests/steps_count

# steps SHAPE N [THREADED]: the steps line of the recording's `leaks`
steps() {
    name=$1.$2.${3:-0}
    "$CMH" record -q -o "$name.cmh" -- "$P" "$@" >/dev/null 2>&1
    "$CMH" leaks "$name.cmh" 2>&1 | grep '^steps'
}

for shape in swap cycle partial plain; do
    for n in 40 120 300; do
        got=$(steps $shape $n)
        check "$shape, $n iterations: 'steps: $n' ($got)" "echo '$got' | grep -q '^steps: $n detected from the allocation pattern'"
    done
done
# in a thread of its own, the main thread waiting
for shape in swap cycle; do
    got=$(steps $shape 120 1)
    check "$shape, 120 iterations in a thread of its own: 'steps: 120' ($got)" "echo '$got' | grep -q '^steps: 120 detected from the allocation pattern'"
done
# the figures over the steps: swap's buffer replaced every step is no growth, its cache capped
"$CMH" leaks --json swap.120.0.cmh >swap.json 2>&1
check "swap, leaks --json: steps count 120" "grep -q '\"steps\": {\"count\": 120, \"source\": \"pattern\"' swap.json"
finish

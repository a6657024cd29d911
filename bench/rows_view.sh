#!/bin/sh
# rows_view.sh [BUILD_DIR] - the viewer's figures (`cumemhist view`), beside PyTorch's MemoryViz.js
# in the same harness (bench/view_bench.js: headless Chromium driven by playwright-core, input
# sent through the browser): the first frame after load, zoom and pan frame times (median, 99th
# percentile) from the page's first listener and from the input event's own timestamp, beside a
# blank-canvas page's (the browser's own floor), the browser's memory, and the page's size beside
# the pickle of the same 1M-entry record.  Figures only.
#
# The peer: $MEMVIZ_JS, a saved copy of pytorch/pytorch torch/utils/viz/MemoryViz.js (its
# skypack imports are swapped here for d3@5, the version it imports, from the npm registry).
# Without it the peer's rows say so.  playwright-core and d3@5 come from the npm registry into
# $CMH_BROWSER_CACHE (default ~/.cache/cumemhist-browser), never into the tree.
set -eu
B=$(cd "${1:-build-rel}" && pwd)
T=$(mktemp -d /tmp/cmh-rows-view-XXXXXX)
trap 'rm -rf "$T"' EXIT
CACHE=${CMH_BROWSER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cumemhist-browser}
CHROME=$(command -v chromium || command -v chromium-browser || true)
row() { printf '%-58s %s\n' "$1" "$2"; }
if [ -z "$CHROME" ] || ! command -v node >/dev/null; then row "view (browser figures)" "skipped: needs chromium and node"; exit 0; fi
[ -f "$CACHE/node_modules/playwright-core/package.json" ] && [ -f "$CACHE/node_modules/d3/dist/d3.min.js" ] ||
    (mkdir -p "$CACHE" && cd "$CACHE" && npm install --no-audit --no-fund --silent playwright-core@1.65.1 d3@5 >/dev/null 2>&1) || true
if [ ! -f "$CACHE/node_modules/playwright-core/package.json" ]; then row "view (browser figures)" "skipped: playwright-core not installable"; exit 0; fi
export PLAYWRIGHT_CORE=$CACHE/node_modules/playwright-core CHROME
J() { node -e "const o=JSON.parse(require('fs').readFileSync(0,'utf8')); const v=$1; console.log(v === undefined || v === null ? 'n/a' : v)"; }

"$B/bench_codecs" --write blocks 1000000 2 "$T/b1m.cmh" "$T/b1m.pickle" >/dev/null
t0=$(date +%s.%N)
"$B/cumemhist" view "$T/b1m.cmh" -o "$T/b1m.html"
t1=$(date +%s.%N)
ps=$(stat -c %s "$T/b1m.pickle") vs=$(stat -c %s "$T/b1m.html")
row "view, 1M-entry record: writing the page" "$(awk "BEGIN{printf \"%.2f\", $t1 - $t0}") s"
row "view, 1M-entry record: page size vs the pickle" "$vs B vs $ps B = $(awk "BEGIN{printf \"%.2f\", $vs / $ps}")x (target <= 1x)"
nice node "$(dirname "$0")/view_bench.js" "$T/b1m.html" ours >"$T/ours.json" || true
ff=$(J "Math.round(o.first_frame_ms)" <"$T/ours.json") med=$(J "Math.round(o.frame_ms.median)" <"$T/ours.json") p99=$(J "Math.round(o.frame_ms.p99)" <"$T/ours.json")
pss=$(J 'Math.round(o.pss_bytes/1048576)' <"$T/ours.json") heap=$(J 'Math.round(o.js_heap_bytes/1048576)' <"$T/ours.json")
row "view, 1M: first frame after load" "$ff ms (target <= 2000)"
row "view, 1M: zoom+pan frame, median / p99 (120 frames)" "$med / $p99 ms (targets <= 16 / <= 50)"
imed=$(J "Math.round(o.input_ms.median)" <"$T/ours.json") ip99=$(J "Math.round(o.input_ms.p99)" <"$T/ours.json")
row "view, 1M: the same from the input event's timestamp" "$imed / $ip99 ms"
dmed=$(J "o.draw_ms && o.draw_ms.median.toFixed(1)" <"$T/ours.json") dp99=$(J "o.draw_ms && o.draw_ms.p99.toFixed(1)" <"$T/ours.json")
row "view, 1M: the page's own time per frame, median / p99" "$dmed / $dp99 ms"
row "view, 1M: browser memory (PSS, all processes) / JS heap" "$pss MiB / $heap MiB (target <= 1024 MiB)"
nice node "$(dirname "$0")/view_bench.js" - blank >"$T/blank.json" || true
bmed=$(J "o.frame_ms.median.toFixed(1)" <"$T/blank.json") bp99=$(J "o.frame_ms.p99.toFixed(1)" <"$T/blank.json")
bimed=$(J "Math.round(o.input_ms.median)" <"$T/blank.json") bip99=$(J "Math.round(o.input_ms.p99)" <"$T/blank.json")
row "a blank canvas (the browser's floor): frame, median / p99" "$bmed / $bp99 ms; from the input's timestamp $bimed / $bip99 ms"

if [ -n "${MEMVIZ_JS:-}" ] && [ -f "$MEMVIZ_JS" ] && [ -f "$CACHE/node_modules/d3/dist/d3.min.js" ]; then
    { printf '<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>\n<script>'
      cat "$CACHE/node_modules/d3/dist/d3.min.js"
      printf '</script>\n<script type="application/octet-stream" id="b64">'
      base64 -w0 "$T/b1m.pickle"
      printf '</script>\n<script type="module">\n'
      grep -q 'window.d3' "$MEMVIZ_JS" || printf 'const d3 = window.d3; const {axisLeft, scaleLinear, zoom, zoomIdentity, brushX} = d3;\n'
      grep -v '^import .* from "https://cdn.skypack.dev/' "$MEMVIZ_JS"
      printf '\nadd_local_files([{name: "b1m.pickle", base64: document.getElementById("b64").textContent}], "Active Memory Timeline");\n</script></body></html>\n'
    } >"$T/memviz.html"
    nice node "$(dirname "$0")/view_bench.js" "$T/memviz.html" memviz >"$T/peer.json" || true
    pff=$(J "Math.round(o.first_frame_ms)" <"$T/peer.json") pmed=$(J "o.frame_ms && Math.round(o.frame_ms.median)" <"$T/peer.json") pp99=$(J "o.frame_ms && Math.round(o.frame_ms.p99)" <"$T/peer.json")
    ppss=$(J 'Math.round(o.pss_bytes/1048576)' <"$T/peer.json") note=$(J 'o.note || o.error || ""' <"$T/peer.json")
    row "MemoryViz.js, same 1M pickle: first frame" "$pff ms${note:+ ($note)}"
    row "MemoryViz.js, 1M: zoom+pan frame, median / p99" "$pmed / $pp99 ms"
    pimed=$(J "o.input_ms && Math.round(o.input_ms.median)" <"$T/peer.json") pip99=$(J "o.input_ms && Math.round(o.input_ms.p99)" <"$T/peer.json")
    row "MemoryViz.js, 1M: the same from the input's timestamp" "$pimed / $pip99 ms"
    row "MemoryViz.js, 1M: browser memory (PSS)" "$ppss MiB"
    [ "$pff" != n/a ] && row "ratio, first frame: MemoryViz.js / ours" "$(awk "BEGIN{printf \"%.1f\", $pff / $ff}")x"
    [ "$pmed" != n/a ] && row "ratio, median frame: MemoryViz.js / ours" "$(awk "BEGIN{printf \"%.1f\", $pmed / $med}")x"
    [ "$pimed" != n/a ] && row "ratio, median from the input's timestamp: MemoryViz.js / ours" "$(awk "BEGIN{printf \"%.1f\", $pimed / $imed}")x"
else
    row "MemoryViz.js, same 1M pickle" "peer not found: set MEMVIZ_JS=.../torch/utils/viz/MemoryViz.js"
fi

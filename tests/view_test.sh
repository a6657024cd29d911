#!/bin/sh
# view_test.sh BUILD_DIR SOURCE_DIR - `cumemhist view` driven in headless Chromium with
# playwright-core (tests/browser/view_check.js): at 1280 px and at phone width (390 px, PyTorch's
# snapshot), zoom into a step,
# hover and click a band, and the panel's size, site and stack are peak's for that instant; the
# bands at full zoom are peak's and flamegraph's live blocks at the same instants; every
# level-of-detail column keeps its instant's bytes; search; the device switcher on a two-device
# record; keyboard alone; no console error and no request.  Also `view`'s errors and `report`'s
# embedded view.  playwright-core comes from the npm registry into a cache outside the tree
# (CMH_BROWSER_CACHE), Chromium from Debian; without either the test is skipped.
TEST=view . "$(dirname "$0")/testlib.sh"
case "${LD_PRELOAD:-}" in *asan* | *ubsan*) echo "skipped: chromium under a sanitizer runtime"; exit 77 ;; esac
PWV=1.65.1
CACHE=${CMH_BROWSER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cumemhist-browser}
CHROME=$(command -v chromium || command -v chromium-browser || true)
if { [ -z "$CHROME" ] || ! command -v npm >/dev/null; } && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing chromium and npm (the view test drives the page in them)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium nodejs npm) >/dev/null 2>&1
    CHROME=$(command -v chromium || true)
fi
[ -n "$CHROME" ] && command -v node >/dev/null || { echo "skipped: no chromium or node"; exit 77; }
if [ ! -f "$CACHE/node_modules/playwright-core/package.json" ]; then
    mkdir -p "$CACHE" && (cd "$CACHE" && timeout 300 npm install --no-audit --no-fund --silent "playwright-core@$PWV") >/dev/null 2>&1
fi
[ -f "$CACHE/node_modules/playwright-core/package.json" ] || { echo "skipped: playwright-core could not be installed into $CACHE"; exit 77; }
export PLAYWRIGHT_CORE=$CACHE/node_modules/playwright-core CHROME

# the command as a stranger meets it
check "view --help names the command and its output option" '"$CMH" view --help 2>&1 | grep -q -- "--output"'
check "view of a missing file fails with a message" '! "$CMH" view nothere.cmh -o x.html 2>err.txt && grep -q "nothere.cmh" err.txt && [ ! -e x.html ]'
check "view without a snapshot is a usage error" '! "$CMH" view 2>/dev/null'

# the pages: PyTorch's own snapshot; a two-device record of our own (an OOM on the second)
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G env -u LD_PRELOAD "$CMH" record -q -o multi.cmh -- "$B/samples/multigpu" 4 >/dev/null 2>&1
# and, where the shared PyTorch fixtures are, two devices of 8132 and 9700 entries: past the
# page's live-set checkpoints (one every 4096 entries)
big=$SRC/../shared/fixtures/pytorch/memsnapdump_npu_multi_devices_expandable_segment_map_unmap.pickle
[ -f "$big" ] || { echo "note: no ../shared/fixtures/pytorch: no record past one checkpoint"; big=; }
for f in "$F/h200/torch_exp.pickle" multi.cmh $big; do
    n=$(basename "$f")
    "$CMH" view "$f" -o "$n.html" 2>err.txt
    check "view $n: one page, script inline, no external reference" \
        '[ -s "$n.html" ] && grep -q "<script>" "$n.html" && ! grep -Eqi "(src|href)=\"?(https?:)?//" "$n.html" && ! grep -qi "<script[^>]* src=" "$n.html"'
    # the facts the page is checked against, from the reports
    "$CMH" peak --json "$f" >peak.json 2>/dev/null
    "$CMH" leaks --json "$f" >leaks.json 2>/dev/null
    py - "$f" "$CMH" <<'PY' >facts.json
import json, subprocess, sys
f, cmh = sys.argv[1], sys.argv[2]
peak = json.load(open("peak.json")); leaks = json.load(open("leaks.json"))
folded = []
for p in peak:
    n, d, by = p["trace_entries"], p["device"], {}
    for e in sorted(set([0, n // 7, n // 3, n // 2, (2 * n) // 3, n - 1, max(p["peak_allocated"]["index"], 0)])):
        if e < 0 or e >= n: continue
        out = subprocess.run([cmh, "flamegraph", "--folded", "--device", str(d), "--at", str(e), f], capture_output=True, text=True).stdout
        by[e] = [l for l in out.splitlines() if l.strip()]
    folded.append(by)
site = next((s["site"] for s in peak[0]["sites_at_peak"] if s["site"]), None)
search = site["file"].rsplit("/", 1)[-1] if site else "<no"
print(json.dumps({"peak": peak, "leaks": leaks, "folded": folded, "search": search}))
PY
    widths="1280 390"
    [ "$n" = torch_exp.pickle ] || widths=1280 # the phone width once is enough (CI's time)
    for w in $widths; do
        SHOT=${CMH_KEEP_SHOTS:+$CMH_KEEP_SHOTS/view-$n-$w.png} timeout 120 node "$SRC/tests/browser/view_check.js" "$n.html" facts.json $w >check.txt 2>&1
        rc=$?
        sed "s/^/  [$n $w px] /" check.txt | grep -v '^  \[[^]]*\] [0-9]* passed' | grep -v ': ok: '
        check "view $n at $w px in Chromium: every check of view_check.js ($(grep -c '^ok:' check.txt) passed)" '[ $rc = 0 ]'
    done
done

# the checker is not blind: a page whose script misreads one allocation's size is caught
"$CMH" peak --json "$F/h200/torch_exp.pickle" >peak.json 2>/dev/null
"$CMH" leaks --json "$F/h200/torch_exp.pickle" >leaks.json 2>/dev/null
py -c "import json; print(json.dumps({'peak': json.load(open('peak.json')), 'leaks': json.load(open('leaks.json')), 'folded': [{}], 'search': 'torch_train.py'}))" >facts0.json
sed 's/d.size\[i\] = a\[q++\];/d.size[i] = a[q++]; if (i === 3) d.size[i] *= 2;/' torch_exp.pickle.html >lying.html
check "the lying page differs from the real one" '! cmp -s lying.html torch_exp.pickle.html'
timeout 120 node "$SRC/tests/browser/view_check.js" lying.html facts0.json 1280 >lying.txt 2>&1; lrc=$?
check "the checker catches a page whose bands misstate a size" '[ $lrc != 0 ] && grep -q "^FAIL" lying.txt'

# a record with no trace entries (enabled=state): the cursor has the end state, what leaks lists
FAKECUDA_CAPACITY=1G env -u LD_PRELOAD "$CMH" record -q --enabled state -o state.cmh -- "$B/samples/leaky" >/dev/null 2>&1
"$CMH" view state.cmh -o state.html 2>/dev/null
want=$("$CMH" leaks --json state.cmh | py -c 'import json, sys; d = json.load(sys.stdin)[0]; print(d["live_bytes"], d["live_blocks"])')
got=$(timeout 120 node -e '
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROME, args: ["--no-sandbox"] });
  const page = await browser.newPage();
  await page.goto("file://" + require("path").resolve("state.html"));
  await page.waitForSelector("#cmh-view[data-ready]", { timeout: 20000 });
  const live = await page.evaluate(() => window.cmhView.live(0, window.cmhView.view.cursor));
  const head = await page.evaluate(() => [...document.querySelectorAll("#cmh-view h3")].map(h => h.textContent).find(t => t.startsWith("Live at the cursor")));
  console.log(live.reduce((a, b) => a + b.size, 0) + " " + live.length + " | " + head);
  await browser.close();
})();' 2>&1)
check "view of a record with no trace entries: live at the cursor is the end state ($want: $got)" \
    '[ -n "$want" ] && [ "${got%% |*}" = "$want" ] && echo "$got" | grep -q "the end state: no trace entries): .* in ${want#* } blocks"'

# a trace that stops before its snapshot (transformer_nuggets: 24 blocks freed after its last
# entry): at the last entry the page's table is the trace's own end, 384.1 MiB, where every report
# says 0 B; the heading says why there, in the reports' words (a stranger's trial)
TN=$SRC/../shared/fixtures/pytorch/transformer_nuggets_mini_snapshot.pickle
if [ -f "$TN" ]; then
    "$CMH" view "$TN" -o tn.html 2>/dev/null
    got=$(timeout 120 node -e '
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROME, args: ["--no-sandbox"] });
  const page = await browser.newPage();
  await page.goto("file://" + require("path").resolve("tn.html"));
  await page.waitForSelector("#cmh-view[data-ready]", { timeout: 20000 });
  await page.focus("canvas").catch(() => {});
  await page.keyboard.press("End");
  const head = await page.evaluate(() => [...document.querySelectorAll("#cmh-view h3")].map(h => h.textContent).find(t => t.startsWith("Live at the cursor")));
  await page.keyboard.press("Home");
  const home = await page.evaluate(() => [...document.querySelectorAll("#cmh-view h3")].map(h => h.textContent).find(t => t.startsWith("Live at the cursor")));
  console.log(head + " | " + home);
  await browser.close();
})();' 2>&1)
    check "view at a trace's last entry says the trace stops before the snapshot, as peak does ($got)" \
        'echo "$got" | grep -q "384.1 MiB in 24 blocks. Note: the trace stops before the snapshot: 24 blocks (384.1 MiB) .* | " &&
         ! echo "${got#* | }" | grep -q "Note:"'
fi

# the gap note is where the gap is: above the timeline while the trace's end is in sight (the
# page opens on the whole record), not only in the heading at the last entry; zoomed in on the
# start, it goes (it showed only once the cursor reached the last entry)
if [ -f "$TN" ]; then
    got=$(timeout 120 node -e '
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROME, args: ["--no-sandbox"] });
  const page = await browser.newPage();
  await page.goto("file://" + require("path").resolve("tn.html"));
  await page.waitForSelector("#cmh-view[data-ready]", { timeout: 20000 });
  const gap = () => page.evaluate(() => { const e = document.getElementById("v-gap"); return e && !e.hidden ? e.textContent : "<hidden>"; });
  const open = await gap();
  await page.focus("canvas").catch(() => {});
  await page.keyboard.press("Home");
  for (let i = 0; i < 4; i++) await page.keyboard.press("+");
  // the note is drawn with the frame, in the next animation frame: wait for two, not a time
  await page.evaluate(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))));
  const zoomed = await gap();
  console.log(open + " | " + zoomed);
  await browser.close();
})();' 2>&1)
    check "view: the gap note stands above the timeline while the trace's end is in sight, not when zoomed away ($got)" \
        'echo "$got" | grep -q "^Note: the trace stops before the snapshot: 24 blocks (384.1 MiB) .* | <hidden>$"'
fi

# search counts the sites that allocated: a function named only by a free's stack is no site
# (release_weights frees what make_weights allocated at two lines: 2 sites, not 3)
py - <<'PY' || bad "writing search.pickle failed"
import pickle
MiB, base = 1 << 20, 1 << 40
def fr(fn, line): return [{'name': fn, 'filename': '/home/u/train.py', 'line': line}]
A1, A2, F = fr('make_weights', 10), fr('make_weights', 11), fr('release_weights', 20)
tr = [{'action': 'segment_alloc', 'addr': base, 'size': 8 * MiB, 'stream': 0, 'time_us': 1, 'frames': A1}]
def ent(a, addr, size, frames): tr.append({'action': a, 'addr': addr, 'size': size, 'stream': 0, 'time_us': len(tr) + 1, 'frames': frames})
ent('alloc', base, MiB, A1); ent('alloc', base + MiB, MiB, A2); ent('alloc', base + 2 * MiB, MiB, A1)
ent('free_requested', base + 2 * MiB, MiB, F); ent('free_completed', base + 2 * MiB, MiB, F)
blocks = [{'address': base, 'size': MiB, 'requested_size': MiB, 'state': 'active_allocated', 'frames': A1},
          {'address': base + MiB, 'size': MiB, 'requested_size': MiB, 'state': 'active_allocated', 'frames': A2},
          {'address': base + 2 * MiB, 'size': 6 * MiB, 'requested_size': 0, 'state': 'inactive', 'frames': []}]
seg = {'device': 0, 'address': base, 'total_size': 8 * MiB, 'allocated_size': 2 * MiB, 'active_size': 2 * MiB, 'requested_size': 2 * MiB,
       'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0), 'is_expandable': False, 'frames': A1, 'blocks': blocks}
pickle.dump({'segments': [seg], 'device_traces': [tr]}, open('search.pickle', 'wb'), protocol=4)
PY
"$CMH" view search.pickle -o search.html 2>/dev/null
got=$(timeout 120 node -e '
const { chromium } = require(process.env.PLAYWRIGHT_CORE);
(async () => {
  const browser = await chromium.launch({ executablePath: process.env.CHROME, args: ["--no-sandbox"] });
  const page = await browser.newPage();
  await page.goto("file://" + require("path").resolve("search.html"));
  await page.waitForSelector("#cmh-view[data-ready]", { timeout: 20000 });
  const said = [];
  for (const q of ["_weights", "release_weights"]) {
    await page.fill("#v-search", q);
    said.push(await page.evaluate(() => document.querySelector(".v-match").textContent));
  }
  console.log(said.join(" | "));
  await browser.close();
})();' 2>&1)
check "view: search counts allocation sites only, not a free's stack ($got)" \
    'echo "$got" | grep -q "^2 sites match, .* | 0 sites match, "'

# the same view inside the report
"$CMH" report "$F/h200/torch_exp.pickle" -o report.html 2>/dev/null
check "report embeds the interactive view (its data and script inline)" 'grep -q "id=\"cmh-view-meta\"" report.html && grep -q "<script>" report.html'
check "report --static leaves the view out (no script)" '"$CMH" report --static "$F/h200/torch_exp.pickle" -o static.html && ! grep -qi "<script" static.html'
finish

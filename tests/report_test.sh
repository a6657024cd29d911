#!/bin/sh
# report_test.sh BUILD_DIR SOURCE_DIR - the one-file HTML report opened in headless Chromium
# (installed when missing and this is root with apt): at 1280 px and at phone width the
# screenshot is not blank (its one script, the interactive timeline, inline), the page logs no console error and makes no request but itself
# (Chromium's own net log, tests/check_page.py); and the page's figures are the reports'.
TEST=report . "$(dirname "$0")/testlib.sh"
case "${LD_PRELOAD:-}" in *asan* | *ubsan*) echo "skipped: chromium under a sanitizer runtime"; exit 77 ;; esac
CHROME=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROME" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing chromium (the report test opens the page in it)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium) >/dev/null 2>&1
    CHROME=$(command -v chromium || true)
fi
[ -n "$CHROME" ] || { echo "skipped: no chromium"; exit 77; }
FAKECUDA_DEVICES=2 FAKECUDA_CAPACITY=1G env -u LD_PRELOAD "$CMH" record -q -o multi.cmh -- "$B/samples/multigpu" 4 >/dev/null 2>&1
"$CMH" merge -o merged.cmh "$F/h200/torch_exp.cmh" "$F/h200/torch_exp.pickle" 2>/dev/null
for f in multi.cmh merged.cmh "$F/h200/torch_exp.pickle"; do
    n=$(basename "$f")
    "$CMH" report "$f" -o "$n.html" 2>/dev/null
    check "report $n: written, one page, no external script or reference" \
        '[ -s "$n.html" ] && ! grep -qi "<script[^>]* src=" "$n.html" && ! grep -Eqi "(src|href)=\"?(https?:)?//" "$n.html"'
    peak=$("$CMH" peak --json "$f" 2>/dev/null | py -c "import json,sys; print(json.load(sys.stdin)[0]['peak_allocated']['bytes'])")
    check "report $n: its first timeline's peak is peak's ($peak)" 'grep -q "data-bytes=\"$peak\"" "$n.html"'
    for w in 1280 390; do
        rm -f shot.png net.json console.txt
        timeout 90 env -u LD_PRELOAD "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
            --disable-background-networking --disable-component-update --disable-sync --disable-default-apps \
            --enable-logging=stderr --v=0 --log-net-log="$T/net.json" --window-size=$w,2200 \
            --screenshot="$T/shot.png" "file://$T/$n.html" >/dev/null 2>console.txt
        cp shot.png "$n.$w.png" 2>/dev/null
        check "report $n at $w px in Chromium: not blank, no console error, no request but the page" \
            'py "$SRC/tests/check_page.py" shot.png net.json console.txt "$n.html"'
    done
done
# No horizontal overflow at phone width or on a desktop: the page (a copy with a measuring script
# and its CSP relaxed for it) in an iframe W px wide; the page's own width must be the frame's.
# One Chromium measures every page at every width, each in a frame of its own (it started once a
# page and width: 11 starts).
FAKECUDA_CAPACITY=1G env -u LD_PRELOAD "$CMH" record -q -o oom.cmh -- "$B/samples/oom_demo" >/dev/null 2>&1
"$CMH" report oom.cmh -o oom.cmh.html 2>/dev/null
measure_all() { # PAGE:WIDTH ... -> measures.txt, a line each: "PAGE WIDTH SW=.. CW=.. offenders"
    k=0
    {
        echo '<!doctype html><body style="margin:0">'
        for pw in "$@"; do
            sed 's/Content-Security-Policy/X-Not-CSP/' "${pw%:*}" >measured$k.html
            echo "<iframe data-what=\"${pw%:*} ${pw##*:}\" src=\"measured$k.html\" style=\"display:block;width:${pw##*:}px;height:900px;border:0\"></iframe>"
            k=$((k + 1))
        done
        cat <<'HTML'
<script>
// (the window's load comes after every frame's: a frame's own load may come before this runs)
window.addEventListener('load', function () { document.querySelectorAll('iframe').forEach(function (f) {
  var doc = f.contentDocument, d = doc.documentElement, r = [];
  doc.querySelectorAll('body *').forEach(function (e) {
    var b = e.getBoundingClientRect(), c = e.className; c = c && c.baseVal !== undefined ? c.baseVal : c;
    if (b.right > d.clientWidth + 1 && r.length < 6 && !e.closest('.r-wrap,.r-tl')) r.push(e.tagName + '.' + c + ':' + Math.round(b.right));
  });
  var q = document.createElement('pre'); q.className = 'measure';
  q.textContent = f.dataset.what + ' SW=' + d.scrollWidth + ' CW=' + d.clientWidth + ' ' + r.join(' '); document.body.appendChild(q);
}); });
</script>
HTML
    } >frame.html
    # (a bound for a stuck Chromium, for all the pages together: 90 s, each page's before, left
    # nothing measured at load 45)
    timeout 300 env -u LD_PRELOAD "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --allow-file-access-from-files \
        --disable-background-networking --disable-component-update --window-size=1400,1000 --virtual-time-budget=3000 \
        --dump-dom "file://$T/frame.html" 2>/dev/null | sed 's/<pre class="measure">/\n&/g' | sed -n 's/^<pre class="measure">\([^<]*\)<.*/\1/p' >measures.txt
}
# fits PAGE WIDTH: its measure (fit.txt) says the page is as wide as its frame, and nothing sticks out
fits() { m=$(grep -F "$1 $2 SW=" measures.txt | head -1); m=${m#"$1 $2 "}; echo "$m" >fit.txt; sw=${m#SW=}; sw=${sw%% *}; cw=${m#*CW=}; cw=${cw%% *}; [ -n "$sw" ] && [ "$sw" = "$cw" ] && [ "$m" = "SW=$sw CW=$cw " ]; }
# an OOM whose culprit has a long unbroken name and path (a C++ template, a deep checkout)
py - longoom.pickle <<'EOF2'
import pickle, sys
MIB = 1 << 20
name = "at::native::(anonymous namespace)::launch_vectorized_kernel<at::native::BinaryFunctor<float,float,float,at::native::binary_internal::MulFunctor<float>>>"
fr = [{"filename": "/home/a_user_with_a_long_name/checkouts/a-very-long-project-name/src/models/transformer_blocks_with_long_names.py", "line": 178, "name": name}]
a = 0x7f0000000000
tr = [{"action": "segment_alloc", "addr": a, "size": 64 * MIB, "stream": 0, "time_us": 1, "frames": fr},
      {"action": "alloc", "addr": a, "size": 64 * MIB, "stream": 0, "time_us": 2, "frames": fr},
      {"action": "oom", "addr": 0, "size": 4900 * MIB, "stream": 0, "time_us": 3, "frames": fr}]
seg = {"device": 0, "address": a, "total_size": 64 * MIB, "allocated_size": 64 * MIB, "active_size": 64 * MIB, "requested_size": 64 * MIB,
       "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0), "is_expandable": False, "frames": fr,
       "blocks": [{"address": a, "size": 64 * MIB, "requested_size": 64 * MIB, "state": "active_allocated", "frames": fr}]}
pickle.dump({"segments": [seg], "device_traces": [tr]}, open(sys.argv[1], "wb"), protocol=4)
EOF2
"$CMH" report longoom.pickle -o longoom.pickle.html 2>/dev/null
printf '<!DOCTYPE html><html><body><div style="width:600px">wide</div></body></html>' >wide.html
measure_all multi.cmh.html:390 multi.cmh.html:1280 merged.cmh.html:390 merged.cmh.html:1280 torch_exp.pickle.html:390 torch_exp.pickle.html:1280 \
    oom.cmh.html:390 oom.cmh.html:1280 longoom.pickle.html:390 longoom.pickle.html:1280 wide.html:390
for n in multi.cmh merged.cmh torch_exp.pickle oom.cmh longoom.pickle; do
    for w in 390 1280; do
        check "report $n at $w px: no horizontal overflow (tables and the timeline scroll in their own box)" 'fits "$n.html" $w || { cat fit.txt; false; }'
    done
done
check "the overflow check catches a page wider than the phone" '! fits wide.html 390 && grep -q "^SW=" fit.txt'
check "a multi-device report says at the top which device ran out of memory" 'sed -n "/<header/,/<\/header>/p" multi.cmh.html | grep -q "data-oom-device=\"1\""'
dot=$(printf '\302\267')
check "the header starts with what is known, no stray separator" '! grep -q "<p> $dot" torch_exp.pickle.html && grep -q "<p>PyTorch snapshot $dot 1 device" torch_exp.pickle.html'
# the checker is not blind: a page that loads an image from the network is caught
printf '<!DOCTYPE html><html><body><p>control</p><img src="http://127.0.0.1:9/x.png"></body></html>' >control.html
shoot() {
    rm -f shot.png net.json console.txt
    timeout 90 env -u LD_PRELOAD "$CHROME" --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync --disable-default-apps \
        --enable-logging=stderr --v=0 --log-net-log="$T/net.json" --window-size=$2,2200 \
        --screenshot="$T/shot.png" "file://$T/$1" >/dev/null 2>console.txt
}
shoot control.html 800
check "the request check catches a page that loads from the network" '! py "$SRC/tests/check_page.py" shot.png net.json console.txt control.html >/dev/null'
[ -n "${CMH_KEEP_SHOTS:-}" ] && cp ./*.png "$CMH_KEEP_SHOTS"/ 2>/dev/null
finish

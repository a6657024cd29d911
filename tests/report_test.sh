#!/bin/sh
# report_test.sh BUILD_DIR SOURCE_DIR - the one-file HTML report opened in headless Chromium
# (installed when missing and this is root with apt): at 1280 px and at phone width the
# screenshot is not blank, the page logs no console error and makes no request but itself
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
    check "report $n: written, one page, no script, no external reference" \
        '[ -s "$n.html" ] && ! grep -qi "<script" "$n.html" && ! grep -Eqi "(src|href)=\"?(https?:)?//" "$n.html"'
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

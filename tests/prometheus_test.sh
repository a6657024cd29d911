#!/bin/sh
# prometheus_test.sh BUILD_DIR SOURCE_DIR - the exporter scraped by a real Prometheus (Debian
# prometheus) on loopback: a leaking and a steady program under `record`, two scrapes, then
# Prometheus's HTTP API must give the allocated bytes and the leaking site's bytes that
# `cumemhist snapshot` of the same instant gives (the programs are at rest after their steps:
# within one refresh is exact), no growth for the steady one's sites, `promtool check metrics`
# accepting the exposition, and `promtool test rules` passing on docs/OBSERVABILITY.md's alerts.
# A job that dies of its OOM (live_prog oomexit): the documented alert's expression,
# increase(cumemhist_ooms_total[5m]) > 0, must see it after the job is gone.
# Exit 77 (skipped) without prometheus and promtool (scripts/deps.sh installs them).
TEST=prometheus . "$(dirname "$0")/testlib.sh"
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || { echo "skip: no prometheus/promtool"; exit 77; }
export XDG_RUNTIME_DIR=$T/run
export CUMEMHIST_REGISTRY=$T/run/cumemhist
mkdir -m 700 run
P=$B/tests/live_prog
port() { py -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"; }
EP=$(port)
PP=$(port)

LIVE_DONE=$T/done1 "$CMH" record -q -o leak.cmh -- "$P" leak 8 30 >/dev/null 2>&1 &
LIVE_DONE=$T/done2 "$CMH" record -q -o steady.cmh -- "$P" steady 8 30 >/dev/null 2>&1 &
LIVE_DONE=$T/done3 LIVE_GO=$T/go3 "$CMH" record -q -o oomexit.cmh -- "$P" oomexit 2 20 >/dev/null 2>&1 &
OE_REC=$!
wait_until 60 '[ -e done1 ] && [ -e done2 ] && [ -e done3 ]' # all their steps made: they hold still
oe_pid=$(grep -l "oomexit.cmh.flight" run/cumemhist/*.proc | xargs sed -n 's/^pid //p')
leak_pid=$(grep -l "leak.cmh.flight" run/cumemhist/*.proc | xargs sed -n 's/^pid //p')
steady_pid=$(grep -l "steady.cmh.flight" run/cumemhist/*.proc | xargs sed -n 's/^pid //p')

"$CMH" exporter --listen 127.0.0.1:$EP --interval 200 --analysis-interval 200 2>exporter.err &
EXP=$!
cat >prom.yml <<EOF2
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: cumemhist
    static_configs:
      - targets: ["127.0.0.1:$EP"]
EOF2
env -u LD_PRELOAD prometheus --config.file=prom.yml --storage.tsdb.path=$T/data --web.listen-address=127.0.0.1:$PP >prom.log 2>&1 &
PROM=$!
q() { py - "$PP" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
u = "http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(sys.argv[2]))
try:
    r = json.load(urllib.request.urlopen(u, timeout=5))["data"]["result"]
except Exception as e:
    print("error: %s" % e); sys.exit(0)
print(" ".join("%s=%s" % (x["metric"].get("pid", x["metric"].get("job", "")), x["value"][1]) for x in r))
PY
}
# two scrapes of the exporter with figures in them
i=0
while [ $i -lt 150 ]; do
    n=$(q "count_over_time(cumemhist_allocated_bytes{pid=\"$leak_pid\"}[1m])")
    case "$n" in *=[2-9]* | *=[1-9][0-9]*) break ;; esac
    sleep 0.2; i=$((i + 1))
done
check "Prometheus scraped the exporter twice ($n)" 'case "$n" in *=[2-9]* | *=[1-9][0-9]*) true ;; *) false ;; esac'

"$CMH" snapshot -q $leak_pid -o now.cmh
"$CMH" snapshot -q $steady_pid -o steady_now.cmh
want_alloc=$("$CMH" peak --json now.cmh | py -c "import json,sys; print(json.load(sys.stdin)[0]['end']['allocated'])")
want_site=$("$CMH" leaks --json now.cmh | py -c "import json,sys; print([s['bytes'] for s in json.load(sys.stdin)[0]['sites'] if s['site']['function'] == 'keep_cache'][0])")
want_steady=$("$CMH" peak --json steady_now.cmh | py -c "import json,sys; print(json.load(sys.stdin)[0]['end']['allocated'])")
# what Prometheus holds, asked again until a scrape after the analysis caught up with the same
# instant (one a second) has the snapshots' figures, or 30 s passed
scraped() {
    got_alloc=$(q "cumemhist_allocated_bytes{pid=\"$leak_pid\"}")
    got_site=$(q "cumemhist_site_bytes{pid=\"$leak_pid\",site=~\"keep_cache.*\"}")
    got_steady=$(q "cumemhist_allocated_bytes{pid=\"$steady_pid\"}")
    [ "$got_alloc" = "$leak_pid=$want_alloc" ] && [ "$got_site" = "$leak_pid=$want_site" ] && [ "$got_steady" = "$steady_pid=$want_steady" ]
}
wait_until 30 scraped
check "allocated bytes of the leaking program: Prometheus $got_alloc, snapshot $want_alloc" '[ "$got_alloc" = "$leak_pid=$want_alloc" ]'
check "its leaking site's bytes: Prometheus $got_site, snapshot $want_site" '[ "$got_site" = "$leak_pid=$want_site" ]'
check "allocated bytes of the steady program: Prometheus $got_steady, snapshot $want_steady" '[ "$got_steady" = "$steady_pid=$want_steady" ]'
g_leak=$(q "cumemhist_site_growth_bytes_per_step{pid=\"$leak_pid\"}")
g_steady=$(q "cumemhist_site_growth_bytes_per_step{pid=\"$steady_pid\"}")
check "the leaking site grows 2 MiB per step ($g_leak); the steady program's sites show no growth ($g_steady)" \
    '[ "$g_leak" = "$leak_pid=2097152" ] && [ -z "$g_steady" ]'
up=$(q 'up{job="cumemhist"}')
check "the target is up ($up)" '[ "$up" = "cumemhist=1" ]'

# the exposition itself: the classic format for promtool, OpenMetrics when asked
py - "$EP" <<'PY' >classic.txt
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode(), end="")
PY
env -u LD_PRELOAD promtool check metrics <classic.txt >lint.txt 2>&1
check "promtool check metrics accepts the exposition$(head -c 300 lint.txt)" '[ $? = 0 ] && [ -s classic.txt ]'
py - "$EP" <<'PY' >om.txt
import sys, urllib.request
r = urllib.request.Request("http://127.0.0.1:%s/metrics" % sys.argv[1], headers={"Accept": "application/openmetrics-text; version=1.0.0"})
x = urllib.request.urlopen(r, timeout=5)
print(x.headers["Content-Type"]); print(x.read().decode(), end="")
PY
check "OpenMetrics when asked: its content type, counters as families, # EOF last" \
    'head -1 om.txt | grep -q "application/openmetrics-text" && grep -q "^# TYPE cumemhist_ooms counter" om.txt && grep -q "^cumemhist_ooms_total{" om.txt && [ "$(tail -1 om.txt)" = "# EOF" ]'
code=$(py -c "
import urllib.request, urllib.error
try: urllib.request.urlopen('http://127.0.0.1:$EP/nothing', timeout=5); print(200)
except urllib.error.HTTPError as e: print(e.code)")
check "another path is 404 ($code)" '[ "$code" = 404 ]'

# the job that dies of its OOM, once Prometheus has its ooms_total at 0: the alert's expression
# sees the OOM after the job ended (its series vanished with it, the OOM never counted, before)
wait_until 60 '[ "$(q "cumemhist_ooms_total{pid=\"$oe_pid\"}")" = "$oe_pid=0" ]'
touch go3
wait $OE_REC
oe_rc=$?
# (asked again in one python until it gives a result, 90 s at most)
inc=$(py - "$PP" "increase(cumemhist_ooms_total{pid=\"$oe_pid\"}[5m]) > 0" <<'PY'
import json, sys, time, urllib.parse, urllib.request
u = "http://127.0.0.1:%s/api/v1/query?query=%s" % (sys.argv[1], urllib.parse.quote(sys.argv[2]))
until = time.monotonic() + 90
while True:
    try: r = json.load(urllib.request.urlopen(u, timeout=5))["data"]["result"]
    except Exception: r = []
    if r or time.monotonic() > until: break
    time.sleep(0.2)
print(" ".join("%s=%s" % (x["metric"].get("pid", ""), x["value"][1]) for x in r))
PY
)
ended=$(q "cumemhist_process_ended{pid=\"$oe_pid\"}")
check "a job that died of its OOM (rc $oe_rc): increase(cumemhist_ooms_total[5m]) > 0 fires ($inc), cumemhist_process_ended $ended" \
    '[ $oe_rc = 1 ] && [ -n "$inc" ] && [ "$ended" = "$oe_pid=1" ]'
py - "$EP" <<'PY' >ended.txt
import sys, urllib.request
print(urllib.request.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1], timeout=5).read().decode(), end="")
PY
env -u LD_PRELOAD promtool check metrics <ended.txt >lint2.txt 2>&1
check "promtool check metrics accepts the exposition with an ended process$(head -c 300 lint2.txt)" '[ $? = 0 ] && grep -q "^cumemhist_process_ended{pid=\"$oe_pid\".* 1$" ended.txt'

# the documented alerts
sed -n '/<!-- rules:begin -->/,/<!-- rules:end -->/p' "$SRC/docs/OBSERVABILITY.md" | sed '1,2d;$d' | sed '$d' >alerts.yml
cp "$F/alerts_test.yml" .
env -u LD_PRELOAD promtool test rules alerts_test.yml >rules.txt 2>&1
check "promtool test rules passes on docs/OBSERVABILITY.md's alerts$(grep -i fail rules.txt | head -3)" '[ $? = 0 ]'

kill $PROM $EXP 2>/dev/null
kill -TERM $leak_pid $steady_pid 2>/dev/null
wait
finish

#!/bin/sh
# gpus_test.sh BUILD_DIR SOURCE_DIR - device numbers are each process's own: CUDA_VISIBLE_DEVICES
# (SLURM's --gpus-per-task, Kubernetes, a launcher that gives each rank one GPU) makes every
# rank's GPU its device 0.  The recorder keeps which GPU each device was (its UUID and PCI bus
# id, as the driver says them), and `ranks` compares GPUs, not numbers: four ranks on four GPUs,
# each its device 0, are one job on 4 devices (not "two processes on device 0"), and two
# processes on one GPU under two numbers are said to share it.  The fake driver takes
# CUDA_VISIBLE_DEVICES as the real one does (numbers or UUIDs, up to the first that names none).
TEST=gpus . "$(dirname "$0")/testlib.sh"

run_rank() { # RANK CUDA_VISIBLE_DEVICES LOCAL_RANK
    RANK=$1 LOCAL_RANK=$3 WORLD_SIZE=4 FAKECUDA_DEVICES=4 FAKECUDA_CAPACITY=512M CUDA_VISIBLE_DEVICES=$2 \
        "$CMH" record -q -o "one/run.$1.cmh" -- "$B/samples/fleet_rank" 3 >/dev/null 2>&1 || bad "rank $1 (CUDA_VISIBLE_DEVICES=$2) failed"
}
mkdir one two
for r in 0 1 2 3; do run_rank $r $r 0; done
"$CMH" ranks one >ranks.txt 2>&1 || bad "ranks failed: $(cat ranks.txt)"
check "four ranks, each on its own GPU as its device 0: one job on 4 devices ($(head -1 ranks.txt))" \
    "head -1 ranks.txt | grep -q '^4 records, 4 processes on 4 devices; '"
check "the table shows each row's GPU (its PCI bus id) where the device numbers do not name them" \
    "grep -q 'dev  gpu (PCI bus)' ranks.txt && grep -q '^     2  .*  0  0000:38:00.0 ' ranks.txt"
"$CMH" ranks --json one >ranks.json 2>&1 || bad "ranks --json failed"
py - ranks.json <<'PY' || fail=$((fail + 1))
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["processes"]
assert [r["device"] for r in rows] == [0, 0, 0, 0], rows
assert [r["gpu_pci_bus"] for r in rows] == ["0000:18:00.0", "0000:28:00.0", "0000:38:00.0", "0000:48:00.0"], rows
assert len({r["gpu_uuid"] for r in rows}) == 4 and all(r["gpu_uuid"].startswith("GPU-") and len(r["gpu_uuid"]) == 40 for r in rows)
assert d.get("one_job", True) is not False, d
print("ok: ranks --json: 4 rows, each device 0, 4 GPUs by UUID and PCI bus")
PY

# the SQLite export keeps which GPU each row's device was: four device 0s, four GPUs
"$CMH" export one -o one.db >/dev/null 2>&1 || bad "export one/ -o one.db"
py - one.db <<'PY' && ok "sqlite: 4 rows of device 0, 4 distinct gpu_uuid, PCI bus 38 for rank 2" || bad "sqlite's devices and their GPUs"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
assert db.execute("SELECT count(*), count(DISTINCT gpu_uuid), sum(device) FROM devices").fetchone() == (4, 4, 0)
assert db.execute("SELECT d.gpu_pci_bus FROM devices d JOIN processes p USING (process_id) WHERE p.rank = 2").fetchone() == ("0000:38:00.0",)
PY

# exported to PyTorch's pickle (which cumemhist reads back): which GPU each device was goes with
# it, in the cumemhist dict memory_viz ignores.  The pickle kept none: ranks over the pickles had
# only the numbers, four device 0s, and sqlite's gpu_uuid was NULL
mkdir pk
for r in 0 1 2 3; do "$CMH" export --format memviz "one/run.$r.cmh" -o "pk/run.$r.pickle" >/dev/null 2>&1 || bad "export run.$r.cmh to its pickle"; done
"$CMH" ranks --json pk >pk.json 2>&1 || bad "ranks --json pk failed: $(cat pk.json)"
py - ranks.json pk.json <<'PY' && ok "ranks --json of the pickles: the same GPUs, by UUID and PCI bus, as of the .cmh's" || bad "ranks of the pickles: their GPUs"
import json, sys
a, b = (json.load(open(f))["processes"] for f in sys.argv[1:3])
key = lambda r: (r["device"], r["gpu_uuid"], r["gpu_pci_bus"])
assert [key(r) for r in a] == [key(r) for r in b] and len({r["gpu_uuid"] for r in b}) == 4, (a, b)
PY
py - one/run.2.cmh pk/run.2.pickle <<'PY' && ok "pickle.load reads it: cumemhist.device_ids (device, uuid, name, pci_bus)" || bad "the pickle's device_ids"
import pickle, sys
d = pickle.load(open(sys.argv[2], "rb"))["cumemhist"]["device_ids"]
assert len(d) == 1 and d[0][0] == 0 and d[0][1].startswith("GPU-") and d[0][2] and d[0][3] == "0000:38:00.0", d
PY
"$CMH" export pk -o pk.db >/dev/null 2>&1 || bad "export pk/ -o pk.db"
py - pk.db <<'PY' && ok "sqlite of the pickles: 4 distinct gpu_uuid, PCI bus 38 for rank 2" || bad "sqlite of the pickles: their GPUs"
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
assert db.execute("SELECT count(*), count(DISTINCT gpu_uuid), sum(device) FROM devices").fetchone() == (4, 4, 0)
assert db.execute("SELECT d.gpu_pci_bus FROM devices d JOIN processes p USING (process_id) WHERE p.rank = 2").fetchone() == ("0000:38:00.0",)
PY

# one GPU under two numbers: rank 0 sees only GPU 1 (its device 0, named by its UUID), rank 1
# sees GPUs 0 and 1 and uses its device 1 - the same GPU
uuid1=$(py -c "import json; print(json.load(open('ranks.json'))['processes'][1]['gpu_uuid'])")
run_rank 0 "$uuid1" 0
mv one/run.0.cmh two/
run_rank 1 0,1 1
mv one/run.1.cmh two/
"$CMH" ranks two >shared.txt 2>&1
check "two processes on one GPU under two numbers are said to share it ($(head -1 shared.txt))" \
    "head -1 shared.txt | grep -q 'not the ranks of one job (two processes on one GPU of [^,]*, $uuid1, their devices 0 and 1)'"
"$CMH" ranks --json two | py -c "import json,sys; r=json.load(sys.stdin)['processes']; assert r[0]['gpu_uuid'] == r[1]['gpu_uuid'] and r[0]['device'] != r[1]['device'], r" &&
    ok "ranks --json: one UUID under devices 0 and 1" || bad "ranks --json of two/"

# a record that does not say which GPU (one written before the recorder asked, a PyTorch
# snapshot): the numbers are all there is, as before
cp "$F/flight/killed-150.flight" old.flight
"$CMH" recover old.flight -o old.cmh >/dev/null 2>&1 || bad "recover of an older flight record"
"$CMH" ranks --json old.cmh one/run.2.cmh >old.json 2>old.err
py -c "import json,sys; r={x['file']: x for x in json.load(open('old.json'))['processes']}; assert 'gpu_uuid' not in r['old.cmh'] and r['one/run.2.cmh']['gpu_pci_bus'] == '0000:38:00.0', r" &&
    ok "an older record (no GPU identity) beside a new one: each row says what its record knows" || bad "ranks of an older record: $(cat old.json old.err)"
# a --device no record has: said, not a table of "0 separate processes"
"$CMH" ranks one --device 5 >none.txt 2>&1
check "ranks --device 5 of records on device 0: exit 2, 'no record has device 5'" "[ \$? -eq 2 ] && grep -q 'no record has device 5' none.txt && ! grep -q 'separate' none.txt"
finish

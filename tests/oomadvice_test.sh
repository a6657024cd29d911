#!/bin/sh
# oomadvice_test.sh BUILD_DIR SOURCE_DIR - a plain C program's out-of-memory advice names no
# PyTorch: holes_prog asks for 1 GiB with 4 GiB free in 512 MiB holes (the driver's refusal with
# room); oom, frag and report's verdict name the environment's limit (MPS), another process or
# the driver's fragmentation, never set_per_process_memory_fraction.
TEST=oomadvice . "$(dirname "$0")/testlib.sh"
FAKECUDA_DEVICES=1 FAKECUDA_CAPACITY=8G "$CMH" record -q -o oom.cmh -- "$B/tests/holes_prog" >/dev/null 2>&1
"$CMH" oom oom.cmh >oom.txt 2>&1
check "oom: the 1 GiB request refused with 4.0 GiB free ($(grep verdict oom.txt | head -c 80))" \
    "grep -q '^  device free (driver)  *4.0 GiB' oom.txt && grep -q '^  verdict: refused with room: ' oom.txt"
check "oom's verdict of a C program names no PyTorch" "! grep -q 'PyTorch\|set_per_process' oom.txt"
check "oom's verdict names MPS's limit, another process and the driver's fragmentation" \
    "grep -q 'CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), another process taking memory at that instant, or the driver.s own fragmentation' oom.txt"
"$CMH" frag oom.cmh >frag.txt 2>&1
check "frag's verdict of a C program names no PyTorch" "grep -q 'verdict: refused with room' frag.txt && ! grep -q 'set_per_process' frag.txt"
"$CMH" report -o r.html oom.cmh 2>/dev/null
check "report's verdict of a C program names no PyTorch" "grep -q 'refused with room' r.html && ! grep -q 'set_per_process' r.html"
finish

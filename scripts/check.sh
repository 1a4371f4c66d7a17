#!/bin/bash
# make check: build everything, then lint, host unit tests and guest/system
# tests; every stage runs even when an earlier one failed, and the last line
# is the summary from scripts/check.py.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
py=/usr/bin/python3
rm -rf build/results
mkdir -p build/results
t0=$(date +%s)

stage_time() { echo "== $1 took $(( $(date +%s) - $2 )) s"; }
# After each stage script: one that exited non-zero with no failure
# recorded (a traceback, a kill) is a failure of its stage, never a pass.
exited() { local rc=$?; $py scripts/results.py exited "$1" "$rc" "$2"; }

t=$(date +%s)
echo "== build (make all)"
if make --no-print-directory all; then
	build_ok=1
	echo '{"name": "make all", "status": "pass", "detail": ""}' > build/results/build.jsonl
else
	build_ok=
	echo '{"name": "make all", "status": "fail", "detail": "see the build output above"}' > build/results/build.jsonl
fi
stage_time build "$t"

t=$(date +%s)
echo "== lint"
$py scripts/lint.py; exited lint scripts/lint.py
stage_time lint "$t"

t=$(date +%s)
echo "== patches (the Linux series on a pristine linux-source-6.12: apply, checkpatch, W=1 C=1)"
$py scripts/patches.py --check; exited patches scripts/patches.py
stage_time patches "$t"

t=$(date +%s)
echo "== host unit tests"
$py scripts/unit.py; exited unit scripts/unit.py
stage_time unit "$t"

t=$(date +%s)
echo "== fuzz (replay the corpora, then FUZZ_CHECK_SECONDS per target)"
$py scripts/fuzz.py check; exited fuzz "scripts/fuzz.py check"
stage_time fuzz "$t"

t=$(date +%s)
echo "== sanitizers (host unit tests with ASan+UBSan, the provider with TSan and ASan+UBSan)"
$py scripts/fuzz.py unit-asan; exited sanitizers "scripts/fuzz.py unit-asan"
# The rdma-core provider on the host, kernel stubbed (issue 15): shared CQ
# under TSan, the kernel's ring geometry answers under ASan+UBSan.
$py tests/provider/tsan.py --check; exited sanitizers tests/provider/tsan.py
stage_time sanitizers "$t"

t=$(date +%s)
echo "== guest and system tests (two VMs, TCG)"
if [ -n "$build_ok" ]; then
	$py tests/system/guest_tests.py; exited guest tests/system/guest_tests.py
	# Two-vCPU guests under load (issue 14): its own pair of VMs.
	$py tests/system/load.py; exited load tests/system/load.py
	# VMs through vrnic-fabric (issue 28): two VMs booted once, four
	# topologies (tests/system/topologies).  The lint stage built it.
	make --no-print-directory fabric >/dev/null
	$py tests/system/fabric_tests.py; exited fabric tests/system/fabric_tests.py
	# vrnic-device's own: its sandbox, control channel and capture.
	$py tests/system/vfio_user.py; exited vfio-user tests/system/vfio_user.py
else
	echo '{"name": "all guest tests", "status": "skip", "detail": "the build failed, no image to boot"}' > build/results/guest.jsonl
fi
stage_time guest "$t"

echo "== make check took $(( $(date +%s) - t0 )) s"
$py scripts/check.py

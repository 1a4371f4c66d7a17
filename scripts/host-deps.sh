#!/bin/bash
# Install every host package the build and the tests need.  Idempotent: a
# stamp keyed on this file's contents skips the work on a second run.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
stamp=$top/build/stamps/host-deps.$(sha1sum "$0" | cut -c1-12)
[ -e "$stamp" ] && exit 0
mkdir -p "$top/build/stamps"
export DEBIAN_FRONTEND=noninteractive

# Plain bookworm packages.
pkgs=(
	build-essential pkg-config git ca-certificates xz-utils zstd cpio kmod
	# ss (tests/system/fabric_tests.py: a TCP wire's socket buffers)
	iproute2
	# QEMU build
	ninja-build flex bison libglib2.0-dev libpixman-1-dev zlib1g-dev libfdt-dev
	# QEMU's device trees
	device-tree-compiler
	python3-venv python3-setuptools python3-wheel
	# firmware that QEMU needs at run time (the +ds tarball has none)
	seabios qemu-system-data
	# engine and host tests
	cmake g++ libgtest-dev libgmock-dev googletest libbenchmark-dev clang-tidy
	libisal-dev
	# vrnic-device's sandbox
	libseccomp-dev
	# vrnic-fabric's topology files and control socket
	nlohmann-json3-dev
	# make fuzz: libFuzzer, ASan/UBSan, llvm-profdata/llvm-cov
	clang-14 libclang-rt-14-dev llvm-14
	# rdma-core 56.1 with pyverbs
	libnl-3-dev libnl-route-3-dev libudev-dev libsystemd-dev cython3 python3-dev
	python3-docutils
	# kernel module build and lint
	libelf-dev bc sparse perl
	# make patches: the kernel tree's make prepare (certs need OpenSSL),
	# rdma-core's buildlib/check-build (its ABI comparison)
	libssl-dev abi-dumper abi-compliance-checker
	# guest image and harness
	mmdebstrap socat busybox-static e2fsprogs tshark
	# make bench's plot
	gnuplot-nox
	# the guests' MPI and UCX test programs (Open MPI 4.1, UCX 1.13 as in the
	# image)
	libopenmpi-dev libucx-dev
)
echo "== host packages (apt)"
if ! apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null 2>&1; then
	apt-get update >/dev/null
	apt-get install -y --no-install-recommends "${pkgs[@]}" >/dev/null
fi

log=$top/build/host-deps.log
quiet() { "$@" >>"$log" 2>&1 || { tail -20 "$log" >&2; exit 1; }; }

# QEMU 10 wants meson >= 1.5 and pycotap, both in bookworm-backports.
quiet "$top/scripts/apt-private.sh" install -y --no-install-recommends \
	-t bookworm-backports meson python3-pycotap

# Host headers for the guest kernel (6.12 from bookworm-backports).
kver=$("$top/scripts/kernel-version.sh")
quiet "$top/scripts/apt-private.sh" install -y --no-install-recommends \
	"linux-headers-$kver"
touch "$stamp"

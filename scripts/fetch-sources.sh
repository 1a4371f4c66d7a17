#!/bin/bash
# Download the Debian source and binary packages vrnic builds from into
# build/dl, then unpack them into build/src.  Each step is skipped when its
# result is already there.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dl=$top/build/dl
src=$top/build/src
mkdir -p "$dl" "$src"
apt_priv=$top/scripts/apt-private.sh
kver=$("$top/scripts/kernel-version.sh")

RDMA_VER=56.1
RDMA_SHA256=63ce7f2baa7242c2dbc76375dac957c420187dd27f8c5e148efc07971ee522a8

fetch_source() { # package/suite, glob of the orig tarball
	local pkg=$1 glob=$2
	if ! compgen -G "$dl/$glob" >/dev/null; then
		(cd "$dl" && "$apt_priv" source --download-only "$pkg" >/dev/null 2>&1) || true
	fi
	compgen -G "$dl/$glob" >/dev/null || { echo "fetch: could not download $pkg" >&2; exit 1; }
}

# QEMU: scripts/build-qemu-stock.sh fetches its own.

# rdma-core 56.1 (trixie).
fetch_source rdma-core/trixie "rdma-core_${RDMA_VER}.orig.tar.gz"
echo "$RDMA_SHA256  $dl/rdma-core_${RDMA_VER}.orig.tar.gz" | sha256sum -c --quiet
if [ ! -e "$src/rdma-core-$RDMA_VER/.unpacked" ]; then
	rm -rf "$src/rdma-core-$RDMA_VER"
	tar -C "$src" -xzf "$dl/rdma-core_${RDMA_VER}.orig.tar.gz"
	touch "$src/rdma-core-$RDMA_VER/.unpacked"
fi

# Guest kernel image and the 6.12 source tree (for checkpatch and kselftest).
fetch_deb() { # package name
	if ! compgen -G "$dl/${1}_*.deb" >/dev/null; then
		(cd "$dl" && "$apt_priv" download "$1" >/dev/null 2>&1) || true
	fi
	compgen -G "$dl/${1}_*.deb" >/dev/null || { echo "fetch: could not download $1" >&2; exit 1; }
}
fetch_deb "linux-image-$kver"
fetch_deb linux-source-6.12
if [ ! -e "$src/guest-kernel/.unpacked" ]; then
	rm -rf "$src/guest-kernel"
	mkdir -p "$src/guest-kernel"
	dpkg-deb -x "$dl"/linux-image-"$kver"_*.deb "$src/guest-kernel"
	touch "$src/guest-kernel/.unpacked"
fi
if [ ! -e "$src/linux-tools/.unpacked" ]; then
	# Only the pieces the project uses: checkpatch and the kselftest headers.
	rm -rf "$src/linux-tools" "$src/linux-tools.tmp"
	mkdir -p "$src/linux-tools.tmp"
	dpkg-deb --fsys-tarfile "$dl"/linux-source-6.12_*.deb |
		tar -C "$src/linux-tools.tmp" -x --wildcards './usr/src/linux-source-6.12.tar.xz'
	tar -C "$src/linux-tools.tmp" -xJf "$src/linux-tools.tmp/usr/src/linux-source-6.12.tar.xz" \
		--strip-components=1 --wildcards \
		'linux-source-6.12/scripts/checkpatch.pl' \
		'linux-source-6.12/scripts/spelling.txt' \
		'linux-source-6.12/scripts/const_structs.checkpatch' \
		'linux-source-6.12/tools/testing/selftests/kselftest.h' \
		'linux-source-6.12/tools/testing/selftests/kselftest_harness.h' \
		'linux-source-6.12/Documentation/dev-tools/ktap.rst'
	rm -rf "$src/linux-tools.tmp/usr"
	mv "$src/linux-tools.tmp" "$src/linux-tools"
	touch "$src/linux-tools/.unpacked"
fi

#!/bin/bash
# Build unmodified QEMU 10.2.2 (qemu-system-x86_64, TCG only) into
# build/qemu-stock: the VMs' QEMU, which attaches vrnic-device with
# -device vfio-user-pci (Documentation/vfio-user.rst).
#
# Why 10.2.2: QEMU's vfio-user client came in 10.1 and needs 10.1.1 or
# later (10.1.0 gives the device a wrong class code).  The package
# registry lists 11.1.3 sources (trixie-backports, sid) but its pool
# answers 404 for them; sid's pool still holds 10.2.2.  No device or
# QEMU code is changed; the +ds tarball has no prebuilt blobs, so one
# line of pc-bios/meson.build skips the edk2 images, dtc (from
# scripts/host-deps.sh) compiles the few device trees the build wants,
# and configure installs its own bundled meson 1.9.  No debug info: it is
# the tool, not the thing debugged here, and -g costs make check minutes.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/lib.sh"
ver=10.2.2
sha256=be05230fe47a6937cd29f28f562932c8125f9c93c2a82c625198f7a4aa601dfb
dl=$top/build/dl
src=$top/build/src/qemu-$ver
bld=$top/build/qemu-stock
tarball=$dl/qemu_$ver+ds.orig.tar.xz
mkdir -p "$dl" "$top/build/src"

if [ ! -e "$tarball" ]; then
	(cd "$dl" && "$top/scripts/apt-private.sh" source --download-only \
		"qemu=1:$ver+ds-1" >/dev/null 2>&1) || true
fi
[ -e "$tarball" ] || { echo "build-qemu-stock: could not download QEMU $ver" >&2; exit 1; }
echo "$sha256  $tarball" | sha256sum -c --quiet
if [ ! -e "$src/.unpacked" ]; then
	rm -rf "$src" "$src+ds"
	tar -C "$top/build/src" -xJf "$tarball"
	[ -d "$src+ds" ] && mv "$src+ds" "$src"
	touch "$src/.unpacked"
fi
# The one edit: Debian's +ds tarball strips the edk2 firmware images that
# pc-bios/meson.build would unpack (the firmware comes from the seabios
# package).
patch_once "$src/pc-bios/meson.build" "if false # vrnic: no edk2 blobs" \
	"s|^if unpack_edk2_blobs|if false # vrnic: no edk2 blobs|"

conf_args=(
	--target-list=x86_64-softmmu
	--without-default-features
	--disable-install-blobs
	--disable-docs
	--disable-debug-info
	--disable-werror
	--python=/usr/bin/python3
)
qemu_build "$src" "$bld" "$top/build/qemu-stock-configure.log" "${conf_args[@]}" | tail -n 1

#!/bin/bash
# Build qemu-system-x86_64 10.0.2 with the vrnic device compiled in.
#
# qemu-device/ is copied into the QEMU tree as hw/net/vrnic (only files that
# changed are copied, so ninja rebuilds only what changed), QEMU's build
# files get four small edits, and only the x86_64 system emulator is built
# with a minimal feature set.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/lib.sh"
qsrc=$top/build/src/qemu-10.0.2
qbld=$top/build/qemu
dst=$qsrc/hw/net/vrnic

cd "$top/qemu-device"
for f in vrnic.c trace.h trace-events meson.build Kconfig engine/*.cpp engine/*.hpp engine/*.h; do
	sync_file "$top/qemu-device/$f" "$dst/$f"
done
cd "$top"
sync_file "$top/include/vrnic_hw.h" "$dst/include/vrnic_hw.h"

# The engine is C++20: let meson enable C++ on Linux too.
patch_once "$qsrc/meson.build" "vrnic: C++ engine" \
	"s|^if host_os == 'windows' and add_languages('cpp', required: false, native: false)|if (host_os == 'windows' or true) and add_languages('cpp', required: false, native: false) # vrnic: C++ engine|"
# Trace events of the device's own directory.
patch_once "$qsrc/meson.build" "'hw/net/vrnic'," \
	"s|^    'hw/net',|    'hw/net',\n    'hw/net/vrnic',|"
patch_once "$qsrc/hw/net/meson.build" "subdir('vrnic')" '$a subdir('"'"'vrnic'"'"')'
patch_once "$qsrc/hw/net/Kconfig" "source vrnic/Kconfig" '$a source vrnic/Kconfig'
# The +ds tarball has no firmware blobs to unpack.
patch_once "$qsrc/pc-bios/meson.build" "if false # vrnic: no edk2 blobs" \
	"s|^if unpack_edk2_blobs|if false # vrnic: no edk2 blobs|"

conf_args=(
	--target-list=x86_64-softmmu
	--without-default-features
	--disable-install-blobs
	--disable-docs
	--disable-werror
	--python=/usr/bin/python3
)
qemu_build "$qsrc" "$qbld" "$top/build/qemu-configure.log" "${conf_args[@]}"

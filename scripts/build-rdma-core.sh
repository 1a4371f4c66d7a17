#!/bin/bash
# Build rdma-core 56.1 with providers/vrnic and pyverbs, and install it into
# build/rdma-core-root (a DESTDIR tree that the guest image overlays on /).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/lib.sh"
rsrc=$top/build/src/rdma-core-56.1
rbld=$top/build/rdma-core
root=$top/build/rdma-core-root

for f in "$top"/userspace/*.c "$top"/userspace/*.h "$top"/userspace/*.map \
	 "$top"/userspace/CMakeLists.txt; do
	sync_file "$f" "$rsrc/providers/vrnic/$(basename "$f")"
done
sync_file "$top/include/vrnic-abi.h" "$rsrc/kernel-headers/rdma/vrnic-abi.h"

patch_once "$rsrc/kernel-headers/CMakeLists.txt" "rdma/vrnic-abi.h" \
	's|^  rdma/erdma-abi.h$|  rdma/erdma-abi.h\n  rdma/vrnic-abi.h|'
patch_once "$rsrc/CMakeLists.txt" "providers/vrnic" \
	's|^add_subdirectory(providers/erdma)$|add_subdirectory(providers/erdma)\nadd_subdirectory(providers/vrnic)|'

if [ ! -e "$rbld/build.ninja" ]; then
	mkdir -p "$rbld"
	(cd "$rbld" && cmake -G Ninja "$rsrc" \
		-DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DCMAKE_INSTALL_PREFIX=/usr \
		-DCMAKE_INSTALL_LIBDIR=lib/x86_64-linux-gnu \
		-DCMAKE_INSTALL_SYSCONFDIR=/etc \
		-DCMAKE_INSTALL_RUNDIR=/run \
		-DCMAKE_INSTALL_SYSTEMD_SERVICEDIR=/lib/systemd/system \
		-DNO_MAN_PAGES=1 \
		-DENABLE_STATIC=0 \
		-DPYTHON_EXECUTABLE=/usr/bin/python3) > "$top/build/rdma-core-configure.log" 2>&1 || {
		tail -30 "$top/build/rdma-core-configure.log" >&2
		exit 1
	}
fi
ninja -C "$rbld" > "$top/build/rdma-core-build.log" 2>&1 || {
	grep -E 'error|FAILED' -A3 "$top/build/rdma-core-build.log" | head -40 >&2
	exit 1
}
# Reinstall only when the build changed something.
if [ ! -e "$root/.stamp" ] || [ -n "$(find "$rbld" -newer "$root/.stamp" -name '*.so*' -print -quit)" ]; then
	rm -rf "$root"
	DESTDIR="$root" ninja -C "$rbld" install > "$top/build/rdma-core-install.log" 2>&1
	touch "$root/.stamp"
fi

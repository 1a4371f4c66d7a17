#!/bin/bash
# Build the guest boot files in build/image:
#   vmlinuz       the bookworm-backports 6.12 kernel
#   initrd.img    base.cpio (bookworm userland, cached) + overlay.cpio
#                 (kernel modules incl. vrnic.ko and vrnic_ib.ko,
#                 rdma-core 56.1, tests)
# The guest runs entirely from this initramfs; nothing is written back.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
img=$top/build/image
kver=$("$top/scripts/kernel-version.sh")
ksrc=$top/build/src/guest-kernel
mkdir -p "$img"

# ---------------------------------------------------------- base userland
pkgs=(
	bash coreutils util-linux mount kmod procps iproute2 iputils-ping ethtool
	pciutils psmisc less
	perftest qperf iperf3
	python3 libpython3.11 fio nvme-cli
	libnl-3-200 libnl-route-3-200 libudev1
	ucx-utils libucx0 openmpi-bin libopenmpi3
	libfabric-bin
)
base_key=$(printf '%s\n' "${pkgs[@]}" | sha1sum | cut -c1-12)
if [ ! -e "$img/base.cpio" ] || [ "$(cat "$img/base.key" 2>/dev/null)" != "$base_key" ]; then
	mirror=$("$top/scripts/apt-private.sh" mirror)
	rm -rf "$img/rootfs"
	mmdebstrap --mode=root --variant=essential \
		--include="$(IFS=,; echo "${pkgs[*]}")" \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		bookworm "$img/rootfs" \
		"deb $mirror bookworm main" "deb $mirror bookworm-updates main" \
		> "$img/mmdebstrap.log" 2>&1 || { tail -20 "$img/mmdebstrap.log" >&2; exit 1; }
	rm -rf "$img/rootfs/var/cache/apt" "$img/rootfs/var/lib/apt/lists"
	(cd "$img/rootfs" && find . -print0 | cpio --null -o -H newc --quiet) > "$img/base.cpio.tmp"
	mv "$img/base.cpio.tmp" "$img/base.cpio"
	echo "$base_key" > "$img/base.key"
	rm -rf "$img/rootfs"
fi

# ------------------------------------------------------------ overlay
ov=$img/overlay
rm -rf "$ov"
mkdir -p "$ov"

# Kernel modules: the closure of what the guests load, plus vrnic.ko and
# vrnic_ib.ko (depmod records its auxiliary alias and its use of vrnic.ko).
if [ ! -e "$ksrc/lib/modules/$kver/modules.dep" ]; then
	depmod -b "$ksrc" "$kver"
fi
mods=(ib_uverbs rdma_ucm ib_umad rdma_cm ib_cm iw_cm rdma_rxe virtio_net
      nvme_rdma nvmet_rdma nvme_fabrics nvmet null_blk configfs
      crc32_generic sch_netem 8021q bridge sch_tbf sch_red)
mkdir -p "$ov/lib/modules/$kver/extra"
for m in "${mods[@]}"; do
	modprobe -d "$ksrc" -S "$kver" --show-depends "$m" 2>/dev/null |
		awk '$1 == "insmod" { print $2 }'
done | sort -u | while read -r f; do
	rel=${f#"$ksrc"}
	mkdir -p "$ov/$(dirname "$rel")"
	cp "$f" "$ov/$rel"
done
cp "$ksrc/lib/modules/$kver"/modules.{order,builtin,builtin.modinfo} "$ov/lib/modules/$kver/"
cp "$top/vrnic.ko" "$top/vrnic_ib.ko" "$ov/lib/modules/$kver/extra/"
depmod -b "$ov" "$kver"

# rdma-core 56.1 over bookworm's 44 (same sonames, newer private ABI).
cp -a "$top/build/rdma-core-root/." "$ov/"
rm -f "$ov/.stamp"

# Guest init, agent and tests.
cp -a "$top/tests/guest/rootfs/." "$ov/"
mkdir -p "$ov/opt/vrnic/tests"
cp "$top"/build/guest-tests/* "$ov/opt/vrnic/tests/"
cp "$top"/tests/kmod/*.ko "$ov/opt/vrnic/tests/"
chmod 755 "$ov/init" "$ov"/usr/local/sbin/*

# bookworm is merged-/usr: /lib, /bin, ... are symlinks in the base.  An
# overlay directory of the same name would replace the symlink on unpack.
for d in bin sbin lib lib64; do
	if [ -d "$ov/$d" ] && [ ! -L "$ov/$d" ]; then
		mkdir -p "$ov/usr/$d"
		cp -a "$ov/$d/." "$ov/usr/$d/"
		rm -rf "${ov:?}/$d"
	fi
done

(cd "$ov" && find . -print0 | cpio --null -o -H newc --quiet --owner=0:0) > "$img/overlay.cpio"
cat "$img/base.cpio" "$img/overlay.cpio" > "$img/initrd.img.tmp"
mv "$img/initrd.img.tmp" "$img/initrd.img"
cp "$ksrc/boot/vmlinuz-$kver" "$img/vmlinuz"

# Firmware folder for QEMU's -L: SeaBIOS and the option ROMs it loads.
mkdir -p "$img/firmware"
cp /usr/share/seabios/* "$img/firmware/"
cp /usr/share/qemu/linuxboot_dma.bin /usr/share/qemu/kvmvapic.bin "$img/firmware/"
for f in /usr/share/qemu/vgabios*.bin /usr/share/qemu/efi-virtio.rom /usr/share/qemu/pxe-virtio.rom; do
	[ -e "$f" ] && cp -L "$f" "$img/firmware/"
done
true

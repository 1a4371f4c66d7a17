# vrnic: an emulated RoCEv2 RDMA NIC (vrnic-device, which unmodified QEMU
# attaches over vfio-user), its Linux driver and its rdma-core provider.
# See README.md.
#
#   make            install host packages, fetch sources, build everything
#   make run        boot two VMs, load vrnic, show rdma link / ibv_devinfo / ping
#   make shell      boot two VMs and attach to VM a's console (VM=b for b)
#   make run TOPO=incast   the VMs through vrnic-fabric (also make shell)
#   make check      lint + host unit tests + guest/system tests, with summary
#   make lint       checkpatch, sparse, W=1, -Werror, clang-tidy
#   make unit       host unit tests only
#   make fuzz       libFuzzer targets (tests/fuzz), FUZZ_SECONDS each, coverage
#   make fabric     build/fabric/vrnic-fabric, the switch (Documentation/fabric.rst)
#   make patches    build/patches/linux: the drivers as a series for the kernel tree
#   make device     build/device/vrnic-device: the device, a vfio-user server
#   make qemu       build/qemu-stock: unmodified QEMU 10.2.2, which attaches it
#                   (Documentation/vfio-user.rst)
#
# Builds are incremental: QEMU and rdma-core are rebuilt by ninja only where
# something changed, the guest userland is cached until its package list
# changes.

PY := /usr/bin/python3
KVER = $(shell scripts/kernel-version.sh)
KDIR = /usr/src/linux-headers-$(KVER)
B := $(CURDIR)/build
NPROC := $(shell nproc)
# Sub-makes run NPROC jobs, unless this make was given -j: then they share
# its jobserver (a -j of their own would turn it off).
JOBS = $(if $(findstring jobserver,$(MAKEFLAGS)),,-j$(NPROC))
VM ?= a

.PHONY: all deps qemu module rdma-core guest-tests image run shell check \
	lint unit fuzz bench fabric patches device qemu-stock clean distclean

# The guest image, and what runs the VMs: unmodified QEMU and vrnic-device.
all: image device qemu

deps:
	@scripts/host-deps.sh
	@scripts/fetch-sources.sh

# Unmodified QEMU, with its vfio-user client (vrnic-device is the device).
qemu: deps
	@echo "== QEMU 10.2.2, unmodified"
	@scripts/build-qemu-stock.sh

qemu-stock: qemu

module: deps
	@echo "== vrnic.ko and vrnic_ib.ko for $(KVER)"
	@$(MAKE) --no-print-directory $(JOBS) -C $(KDIR) M=$(CURDIR) modules >/dev/null

rdma-core: deps
	@echo "== rdma-core 56.1 with providers/vrnic and pyverbs"
	@scripts/build-rdma-core.sh

guest-tests: rdma-core
	@echo "== guest selftests"
	@$(MAKE) --no-print-directory -s $(JOBS) -C tests/guest OUT=$(B)/guest-tests \
		KSFT=$(B)/src/linux-tools/tools/testing/selftests \
		RDMA_ROOT=$(B)/rdma-core-root

image: module rdma-core guest-tests
	@echo "== guest image"
	@scripts/build-image.sh

# TOPO=pair|incast|leaf-spine: the VMs attach to vrnic-fabric on that
# topology (fabric/topologies) instead of one wire.
run: all $(if $(TOPO),fabric)
	@$(PY) scripts/vm.py run $(if $(TOPO),--topo $(TOPO))

shell: all $(if $(TOPO),fabric)
	@$(PY) scripts/vm.py shell $(VM) $(if $(TOPO),--topo $(TOPO))

check: deps
	@scripts/check.sh

lint: deps module rdma-core
	@$(PY) scripts/lint.py

unit: deps
	@$(PY) scripts/unit.py

fuzz: deps
	@$(PY) scripts/fuzz.py run

patches: deps
	@$(PY) scripts/patches.py

bench: all
	@$(PY) scripts/bench.py

fabric: deps
	@echo "== vrnic-fabric"
	@cmake -S fabric -B $(B)/fabric -G Ninja >/dev/null
	@nice ninja -C $(B)/fabric -j2 vrnic-fabric

# device/: vrnic-device, the engine as a vfio-user server
# (Documentation/vfio-user.rst).
device: deps
	@echo "== vrnic-device"
	@cmake -S device -B $(B)/device -G Ninja >/dev/null
	@nice ninja -C $(B)/device -j2 | tail -n 1

clean:
	rm -rf $(B)/device $(B)/host $(B)/host-asan $(B)/fabric $(B)/fabric-asan $(B)/host-release $(B)/bench $(B)/results $(B)/image $(B)/guest-tests $(B)/vm $(B)/provider-tsan
	rm -f kernel/*/*.o kernel/*/.*.cmd kernel/*/.*.o.d vrnic*.o vrnic*.ko vrnic*.mod* .vrnic*.cmd \
		tests/kmod/*.o tests/kmod/*.ko tests/kmod/*.mod* tests/kmod/.*.cmd tests/kmod/.*.o.d \
		Module.symvers modules.order .Module.symvers.cmd .modules.order.cmd

distclean:
	rm -rf $(B)
	$(MAKE) clean

// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_rogue_driver: a hostile guest "kernel" in user space.  With
 * vrnic.ko unbound, it drives the device itself through BAR0 (sysfs
 * resource0) and memory it pins and translates through /proc/self/pagemap
 * (the test VMs have no IOMMU): reset, admin queue and async EQ, enable,
 * then the review's MR page-list amplification (A.2), repeated:
 *
 *   CREATE_MR LEVEL2, page_shift 30, npages 2^20, length 2^50, with all
 *   2048 level-1 pointers at one zeroed guest page
 *
 * which costs the guest ~24 KiB and, without a budget, the host 8 MiB of
 * heap per MR.  Each command's status is printed; the harness measures
 * QEMU's RSS on the host around the run.  Must run as root.
 *
 *   vrnic_rogue_driver BDF MAX_MRS
 *
 * The review's exact command (level-1 lists pointing at page address 0)
 * goes first; a device may refuse it as BAD_PARAM, so the rest use one
 * level-1 page of 1 GiB-aligned non-zero addresses instead, the same
 * amplification.  Output lines: "mr N status S result R" (N from 1), then
 * "summary created C refused_at R last_status S"; exit 0 when the device
 * answered every
 * command (refusals included), 1 on a setup failure or a dead device.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vrnic_hw.h"

#define PAGE		4096ul
#define ARENA		(8ul << 20)
#define AQ_LOG		4
#define AEQ_LOG		4
#define CMD_WAIT_S	10
#define L1_FULL		2048	/* 2^20 pages / 512 per list page */

static volatile uint32_t *bar;
static uint8_t *arena;
static uint64_t *phys;		/* bus address of each arena page */
static struct vrnic_admin_cmd *aq;
static struct vrnic_admin_cqe *acq;
static uint32_t pi, ci;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint32_t rd(uint32_t off)
{
	return bar[off / 4];
}

static void wr(uint32_t off, uint32_t v)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	bar[off / 4] = v;
}

static int sysfs_write(const char *path, const char *val)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, val, strlen(val));
	close(fd);
	return n == (ssize_t)strlen(val) ? 0 : -1;
}

/* Memory decoding and bus mastering on, as pci_set_master() would. */
static int enable_device(const char *bdf)
{
	char path[256];
	uint16_t cmd;
	int fd;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/enable", bdf);
	sysfs_write(path, "1");	/* may already be enabled */
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/config", bdf);
	fd = open(path, O_RDWR);
	if (fd < 0 || pread(fd, &cmd, 2, 4) != 2)
		return -1;
	cmd |= 0x6;		/* MEMORY | MASTER */
	if (pwrite(fd, &cmd, 2, 4) != 2)
		return -1;
	close(fd);
	printf("PCI command register %#x\n", cmd);
	return 0;
}

static int map_bar0(const char *bdf)
{
	char path[256];
	void *p;
	int fd;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource0", bdf);
	fd = open(path, O_RDWR | O_SYNC);
	if (fd < 0)
		return -1;
	p = mmap(NULL, VRNIC_REG_BAR_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		 fd, 0);
	close(fd);
	if (p == MAP_FAILED)
		return -1;
	bar = p;
	return 0;
}

/* Pinned memory and the guest-physical (= bus) address of every page. */
static int dma_arena(void)
{
	size_t i, n = ARENA / PAGE;
	int fd;

	arena = mmap(NULL, ARENA, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (arena == MAP_FAILED || mlock(arena, ARENA))
		return -1;
	memset(arena, 0, ARENA);
	phys = calloc(n, sizeof(*phys));
	fd = open("/proc/self/pagemap", O_RDONLY);
	if (!phys || fd < 0)
		return -1;
	for (i = 0; i < n; i++) {
		uint64_t e;
		off_t off = (off_t)(((uintptr_t)arena / PAGE + i) * 8);

		if (pread(fd, &e, 8, off) != 8 || !(e >> 63) ||
		    !(e & ((1ull << 55) - 1))) {
			close(fd);
			return -1;
		}
		phys[i] = (e & ((1ull << 55) - 1)) * PAGE;
	}
	close(fd);
	return 0;
}

/* First run of `pages` physically contiguous arena pages from `from`. */
static long contiguous(size_t from, size_t pages)
{
	size_t i, j, n = ARENA / PAGE;

	for (i = from; i + pages <= n; i++) {
		for (j = 1; j < pages; j++)
			if (phys[i + j] != phys[i] + j * PAGE)
				break;
		if (j == pages)
			return (long)i;
	}
	return -1;
}

static int bring_up(void)
{
	double end;

	wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	for (end = now() + 2; !(rd(VRNIC_REG_STATUS) & VRNIC_STATUS_RESET_DONE);)
		if (now() > end)
			return -1;
	printf("version %#x caps %#x\n", rd(VRNIC_REG_VERSION),
	       rd(VRNIC_REG_CAPS));
	aq = (void *)(arena + 0 * PAGE);
	acq = (void *)(arena + 1 * PAGE);
	wr(VRNIC_REG_AQ_BASE_LO, (uint32_t)phys[0]);
	wr(VRNIC_REG_AQ_BASE_HI, (uint32_t)(phys[0] >> 32));
	wr(VRNIC_REG_ACQ_BASE_LO, (uint32_t)phys[1]);
	wr(VRNIC_REG_ACQ_BASE_HI, (uint32_t)(phys[1] >> 32));
	wr(VRNIC_REG_AQ_LOG_DEPTH, AQ_LOG);
	wr(VRNIC_REG_AEQ_BASE_LO, (uint32_t)phys[2]);
	wr(VRNIC_REG_AEQ_BASE_HI, (uint32_t)(phys[2] >> 32));
	wr(VRNIC_REG_AEQ_LOG_DEPTH, AEQ_LOG);
	wr(VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	for (end = now() + 2; !(rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);) {
		if ((rd(VRNIC_REG_STATUS) & VRNIC_STATUS_FATAL) || now() > end) {
			printf("enable failed: status %#x error %u\n",
			       rd(VRNIC_REG_STATUS), rd(VRNIC_REG_ERROR));
			return -1;
		}
	}
	pi = ci = 0;
	return 0;
}

/* Returns the completion status, or -1 when none came in time. */
static int admin(struct vrnic_admin_cmd *cmd, uint32_t *result)
{
	const uint32_t mask = (1u << AQ_LOG) - 1;
	struct vrnic_admin_cqe *cqe;
	uint8_t phase;
	double end;

	cmd->token = (uint16_t)pi;
	memcpy(&aq[pi & mask], cmd, sizeof(*cmd));
	pi++;
	wr(VRNIC_REG_AQ_DB, pi & 0xffff);
	cqe = &acq[ci & mask];
	phase = ((ci >> AQ_LOG) & 1) ? 0 : VRNIC_ACQE_PHASE;
	for (end = now() + CMD_WAIT_S;
	     (__atomic_load_n(&cqe->flags, __ATOMIC_ACQUIRE) & VRNIC_ACQE_PHASE) !=
	     phase;) {
		if (now() > end)
			return -1;
		usleep(100);
	}
	ci++;
	if (result)
		*result = cqe->result;
	return cqe->status;
}

int main(int argc, char **argv)
{
	struct vrnic_admin_cmd cmd;
	unsigned int i, max_mrs, nl1 = L1_FULL, created = 0, refused_at = 0;
	uint32_t pdn = 0, key;
	long l2;
	uint64_t *list;
	int st = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s BDF MAX_MRS\n", argv[0]);
		return 2;
	}
	max_mrs = (unsigned int)atoi(argv[2]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (enable_device(argv[1]) || map_bar0(argv[1])) {
		printf("setup: cannot enable or map %s: %s\n", argv[1],
		       strerror(errno));
		return 1;
	}
	if (dma_arena()) {
		printf("setup: no pinned memory with known addresses: %s\n",
		       strerror(errno));
		return 1;
	}
	/* Pages 0-5: AQ, ACQ, AEQ, the zero page, QUERY_DEVICE's result, a
	 * level-1 list of 1 GiB pages; the level-2 list needs
	 * 16 KiB of physically contiguous memory.
	 */
	l2 = contiguous(6, (L1_FULL * 8) / PAGE);
	if (l2 < 0) {
		nl1 = PAGE / 8;	/* one list page: 2^18 pages, 2 MiB each */
		l2 = 6;
	}
	list = (uint64_t *)(arena + (size_t)l2 * PAGE);
	for (i = 0; i < nl1; i++)
		list[i] = phys[3];	/* every level-1 list: the zero page */
	/* The same list with page addresses a device may not refuse: 1 GiB
	 * over and over (aligned, not zero; nothing is read there).
	 */
	for (i = 0; i < PAGE / 8; i++)
		((uint64_t *)(arena + 5 * PAGE))[i] = 1ull << 30;
	printf("level-2 list at %#" PRIx64 ": %u level-1 pointers at %#" PRIx64
	       "\n", phys[l2], nl1, phys[3]);
	if (bring_up())
		return 1;

	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = VRNIC_ADMIN_NOP;
	st = admin(&cmd, NULL);
	printf("nop status %d\n", st);
	/* The device's host-memory budget: QUERY_DEVICE offset 88 (spec 0.6,
	 * 0 when not reported).
	 */
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = VRNIC_ADMIN_QUERY_DEVICE;
	cmd.query.out_addr = phys[4];
	cmd.query.out_len = PAGE;
	st = admin(&cmd, NULL);
	printf("query_device status %d host_mem_budget %" PRIu64 "\n", st,
	       *(volatile uint64_t *)(arena + 4 * PAGE + 88));
	memset(&cmd, 0, sizeof(cmd));
	cmd.opcode = VRNIC_ADMIN_CREATE_PD;
	st = admin(&cmd, &pdn);
	printf("create_pd status %d pdn %#x\n", st, pdn);
	if (st)
		return 1;
	for (i = 0; i <= max_mrs; i++) {
		if (i == 1) {
			/* The review's exact command (page addresses 0) came
			 * first; from now on, the non-zero list.
			 */
			for (key = 0; key < nl1; key++)
				list[key] = phys[5];
		}
		memset(&cmd, 0, sizeof(cmd));
		cmd.opcode = VRNIC_ADMIN_CREATE_MR;
		cmd.create_mr.iova = 0;
		cmd.create_mr.length = (uint64_t)nl1 * 512 << 30;
		cmd.create_mr.pbl = phys[l2];
		cmd.create_mr.pdn = pdn;
		cmd.create_mr.access = VRNIC_ACCESS_LOCAL_WRITE;
		cmd.create_mr.npages = nl1 * 512;
		cmd.create_mr.page_shift = 30;
		cmd.create_mr.pbl_mode = VRNIC_PBL_LEVEL2;
		key = 0;
		st = admin(&cmd, &key);
		if (i == 0) {
			printf("review A.2 exact (level-1 lists of page address 0): "
			       "status %d result %#x\n", st, key);
			if (st < 0)
				break;
			if (st == VRNIC_ADMIN_ST_OK)
				created++;
			continue;
		}
		printf("mr %u status %d result %#x\n", i, st, key);
		if (st < 0)
			break;
		if (st == VRNIC_ADMIN_ST_OK) {
			created++;
		} else if (!refused_at) {
			refused_at = i;
			/* A few more: a refusal must stay a refusal. */
			if (i + 3 < max_mrs)
				max_mrs = i + 3;
		}
	}
	printf("summary created %u refused_at %u last_status %d status_reg %#x "
	       "bytes_per_mr %lu\n", created, refused_at, st,
	       rd(VRNIC_REG_STATUS), (unsigned long)nl1 * 512 * 8);
	return st < 0 ? 1 : 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * User MR page lists (issue 15, review B.12), over a loopback RC QP pair
 * on vrnic0.  Run as root (it reserves huge pages and uses tracefs).
 *
 * 1. Too large: 1 TiB of PROT_NONE address space, and 4 GiB + 1 byte,
 *    are refused with EINVAL at once, with nothing pinned (VmPin); 4 GiB
 *    exactly passes the size check (and fails only when pinning).
 * 2. Huge pages: a MAP_HUGETLB buffer of 8 2 MiB pages is described in
 *    pages of at least 2 MiB (rdma res show mr -dd: drv_page_size), also
 *    when registered at an iova other than its address, and RDMA WRITE
 *    (to it and from it) and READ move the right bytes, across huge page
 *    boundaries.
 * 3. Large MR: LARGE_MIB (default 256) of 4 KiB pages (65536 pages with
 *    256 MiB) registers with no page allocation of order 4 or more (the
 *    kmem:mm_page_alloc tracepoint; its page list used to be one
 *    coherent allocation of 8 bytes a page, order 7 for 256 MiB), and
 *    WRITE/READ move data at its start, across a level-1 list page and
 *    at its end.
 *
 *   vrnic_mr_pages [GID_INDEX [LARGE_MIB]]
 *
 * Output is TAP (kselftest).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vrnic_test_util.h"
#include "vrnic_verbs_util.h"

#define HUGE_SZ		(2UL << 20)
#define NHUGE		8
#define XFER_MAX	(128 * 1024)
#define WAIT_S		20
#define TFS		"/sys/kernel/tracing"
#define TI		TFS "/instances/vrnic_mr_pages"
#define PA		TI "/events/kmem/mm_page_alloc"
#define ACCESS		(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
			 IBV_ACCESS_REMOTE_READ)

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	uint8_t *src, *dst;		/* XFER_MAX each, 4 KiB pages */
	struct ibv_mr *src_mr, *dst_mr;
	union ibv_gid gid;
	int gid_index;
};

static int to_rts(struct env *e, struct ibv_qp *qp, uint32_t dest)
{
	static const struct vt_path path = {
		.mtu = IBV_MTU_4096, .rd_atomic = 4, .retry = 7,
		.access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	};

	return vt_to_rts(qp, dest, &e->gid, e->gid_index, &path);
}

static struct ibv_qp *make_qp(struct env *e)
{
	return vt_make_qp(e->pd, IBV_QPT_RC, e->cq, e->cq, 16, 0);
}

/* One RDMA WRITE or READ on QP a, waited for; 0 on success. */
static int rdma_op(struct env *e, enum ibv_wr_opcode op, uint64_t laddr,
		   uint32_t lkey, uint64_t raddr, uint32_t rkey, uint32_t len)
{
	struct ibv_sge sge = { .addr = laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = 7, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	int n;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(e->a, &wr, &bad)) {
		ksft_print_msg("post_send: %s\n", strerror(errno));
		return -1;
	}
	n = vt_poll_wait(e->cq, &wc, 1, WAIT_S);
	if (n != 1 || wc.status != IBV_WC_SUCCESS) {
		ksft_print_msg("%s of %u bytes: %s\n",
			       op == IBV_WR_RDMA_READ ? "READ" : "WRITE", len,
			       n == 1 ? ibv_wc_status_str(wc.status) :
			       "no completion");
		return -1;
	}
	return 0;
}

static void pattern(uint8_t *p, size_t len, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 9));
}

/*
 * Bytes [off, off + len) of buf (registered as mr at iova): WRITE a
 * pattern into them, READ them back into dst, WRITE them from mr into
 * dst.  1 when all three arrive intact.
 */
static int move_data(struct env *e, struct ibv_mr *mr, uint8_t *buf,
		     uint64_t iova, size_t off, uint32_t len)
{
	pattern(e->src, len, (unsigned int)off);
	if (rdma_op(e, IBV_WR_RDMA_WRITE, (uintptr_t)e->src, e->src_mr->lkey,
		    iova + off, mr->rkey, len))
		return 0;
	if (memcmp(buf + off, e->src, len)) {
		ksft_print_msg("WRITE to offset %zu: wrong bytes\n", off);
		return 0;
	}
	memset(e->dst, 0, len);
	if (rdma_op(e, IBV_WR_RDMA_READ, (uintptr_t)e->dst, e->dst_mr->lkey,
		    iova + off, mr->rkey, len))
		return 0;
	if (memcmp(e->dst, e->src, len)) {
		ksft_print_msg("READ from offset %zu: wrong bytes\n", off);
		return 0;
	}
	memset(e->dst, 0, len);
	if (rdma_op(e, IBV_WR_RDMA_WRITE, iova + off, mr->lkey,
		    (uintptr_t)e->dst, e->dst_mr->rkey, len))
		return 0;
	if (memcmp(e->dst, e->src, len)) {
		ksft_print_msg("WRITE from offset %zu: wrong bytes\n", off);
		return 0;
	}
	return 1;
}

/*
 * Pages of psz bytes that [addr, addr + len) touches: a page may be larger
 * than the region (physically contiguous huge pages), or straddle it.
 */
static unsigned long spanned(uint64_t addr, size_t len, unsigned long psz)
{
	return (addr + len - 1) / psz - addr / psz + 1;
}

/* The driver's page size and page count for mr (rdma res show mr -dd). */
static int mr_pages(struct ibv_mr *mr, unsigned long *page_size,
		    unsigned long *pages)
{
	char *out, *line, *save = NULL, key[32], *p;
	int found = 0;

	snprintf(key, sizeof(key), "lkey 0x%x ", mr->lkey);
	vt_run(&out, 0, "rdma res show mr -dd 2>&1");
	for (line = strtok_r(out, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strstr(line, key))
			continue;
		ksft_print_msg("%s\n", line);
		p = strstr(line, "drv_page_size ");
		if (p)
			*page_size = strtoul(p + 14, NULL, 0);
		p = strstr(line, "drv_pages ");
		if (p)
			*pages = strtoul(p + 10, NULL, 0);
		found = 1;
	}
	free(out);
	if (!found)
		ksft_print_msg("MR with %s not in rdma res show mr -dd\n", key);
	return found && *page_size && *pages ? 0 : -1;
}

static long vm_pin_kb(void)
{
	char *s = vt_read_file("/proc/self/status"), *p;
	long kb = -1;

	p = s ? strstr(s, "VmPin:") : NULL;
	if (p)
		kb = strtol(p + 6, NULL, 10);
	free(s);
	return kb;
}

/* reg_mr over [addr, addr + len): the errno it fails with (0: it worked). */
static int reg_errno(struct env *e, void *addr, size_t len, double *secs)
{
	double t0 = vt_now();
	struct ibv_mr *mr;

	errno = 0;
	mr = ibv_reg_mr(e->pd, addr, len, IBV_ACCESS_LOCAL_WRITE);
	*secs = vt_now() - t0;
	if (mr) {
		ibv_dereg_mr(mr);
		return 0;
	}
	return errno;
}

static void too_large(struct env *e)
{
	const size_t tib = 1UL << 40, g4 = 4UL << 30;
	long pin0 = vm_pin_kb(), pin1;
	double s1, s2, s3;
	int e1, e2, e3;
	void *va;

	/* Address space only: nothing behind it can be pinned. */
	va = mmap(NULL, tib, PROT_NONE,
		  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (va == MAP_FAILED) {
		ksft_test_result_fail("mmap 1 TiB PROT_NONE: %s\n",
				      strerror(errno));
		ksft_test_result_fail("(not run)\n");
		return;
	}
	e1 = reg_errno(e, va, tib, &s1);
	e2 = reg_errno(e, va, g4 + 1, &s2);
	e3 = reg_errno(e, va, g4, &s3);
	pin1 = vm_pin_kb();
	munmap(va, tib);
	ksft_print_msg("1 TiB: %s in %.3f s; 4 GiB + 1: %s in %.3f s\n",
		       strerror(e1), s1, strerror(e2), s2);
	ksft_print_msg("4 GiB: %s; VmPin %ld kB -> %ld kB\n", strerror(e3),
		       pin0, pin1);
	ksft_test_result(e1 == EINVAL && e2 == EINVAL && s1 < 1 && s2 < 1 &&
			 pin0 >= 0 && pin1 == pin0,
			 "reg_mr of 1 TiB and of 4 GiB + 1 byte: EINVAL at once, nothing pinned\n");
	ksft_test_result(e3 && e3 != EINVAL,
			 "reg_mr of 4 GiB (the limit) passes the size check (%s)\n",
			 strerror(e3));
}

static int set_hugepages(long want)
{
	char *s = vt_read_file("/proc/sys/vm/nr_hugepages");
	long have = s ? strtol(s, NULL, 10) : 0;

	free(s);
	if (have >= want)
		return 0;
	return vt_run(NULL, 1, "echo %ld > /proc/sys/vm/nr_hugepages; "
		      "grep -i huge /proc/meminfo", want);
}

static void huge_pages(struct env *e)
{
	static const struct { size_t off; uint32_t len; } xfer[] = {
		{ 0, 4096 },
		{ HUGE_SZ - 3000, 8192 },		/* across pages 0/1 */
		{ 5 * HUGE_SZ + 123, 70000 },
		{ NHUGE * HUGE_SZ - 5000, 5000 },	/* the last bytes */
	};
	const size_t len = NHUGE * HUGE_SZ;
	const uint64_t iova = 1ULL << 40;
	unsigned long psz = 0, np = 0, psz2 = 0, np2 = 0;
	struct ibv_mr *mr, *mr2;
	int ok = 1, moved = 1;
	uint8_t *buf;
	size_t i;

	set_hugepages(NHUGE + 8);
	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	if (buf == MAP_FAILED) {
		ksft_test_result_fail("mmap MAP_HUGETLB %zu bytes: %s\n", len,
				      strerror(errno));
		ksft_test_result_fail("(not run)\n");
		return;
	}
	memset(buf, 0, len);
	mr = ibv_reg_mr(e->pd, buf, len, ACCESS);
	mr2 = ibv_reg_mr_iova(e->pd, buf, len, iova, ACCESS);
	if (!mr || !mr2) {
		ksft_print_msg("reg_mr: %s\n", strerror(errno));
		ok = 0;
	}
	if (ok && (mr_pages(mr, &psz, &np) || mr_pages(mr2, &psz2, &np2)))
		ok = 0;
	ksft_print_msg("huge page MR: page size %#lx, %lu pages\n", psz, np);
	ksft_print_msg("at iova %#llx: page size %#lx, %lu pages\n",
		       (unsigned long long)iova, psz2, np2);
	ksft_test_result(ok && psz >= HUGE_SZ &&
			 np == spanned((uintptr_t)buf, len, psz) &&
			 psz2 >= HUGE_SZ && np2 == spanned(iova, len, psz2),
			 "MAP_HUGETLB MR is described in pages of 2 MiB or more\n");
	for (i = 0; ok && i < ARRAY_SIZE(xfer); i++)
		moved &= move_data(e, mr, buf, (uintptr_t)buf, xfer[i].off,
				   xfer[i].len) &&
			 move_data(e, mr2, buf, iova, xfer[i].off,
				   xfer[i].len);
	ksft_test_result(ok && moved,
			 "RDMA WRITE/READ through the huge page MR (at its address and at another iova)\n");
	if (mr2)
		ibv_dereg_mr(mr2);
	if (mr)
		ibv_dereg_mr(mr);
	munmap(buf, len);
}

/* Page allocations of order >= 4 by this process while tracing. */
static int trace_start(void)
{
	static const char *const steps[] = {
		"mountpoint -q " TFS " || mount -t tracefs nodev " TFS,
		"mkdir -p " TI,
		"echo 0 > " TI "/tracing_on",
		"echo > " TI "/trace",
		"echo 'order >= 4' > " PA "/filter",
		"echo 1 > " PA "/enable",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(steps); i++)
		if (vt_run(NULL, 1, "%s", steps[i]))
			return -1;
	return vt_run(NULL, 1, "echo %d > %s/set_event_pid && echo 1 > %s/tracing_on",
		      (int)getpid(), TI, TI);
}

/* The number of allocations traced, -1 if unknown. */
static int trace_stop(void)
{
	char *out;
	int n = -1, rc;

	vt_run(NULL, 0, "echo 0 > %s/tracing_on", TI);
	/* grep -c exits 1 when it counts none */
	rc = vt_run(&out, 1, "grep -c mm_page_alloc: %s/trace", TI);
	if (rc == 0 || (rc == 1 && out[0] == '0'))
		n = atoi(out);
	free(out);
	vt_run(NULL, 0, "echo 0 > %s/enable; rmdir %s", PA, TI);
	return n;
}

static void large_mr(struct env *e, size_t mib)
{
	const size_t len = mib << 20;
	const size_t off[] = { 0, 2 * 1024 * 1024 - 100, len / 2 + 4000,
			       len - XFER_MAX };
	unsigned long psz = 0, np = 0;
	int moved = 1, big = -1;
	struct ibv_mr *mr;
	uint8_t *buf;
	double t0;
	size_t i;

	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED) {
		ksft_test_result_fail("mmap %zu MiB: %s\n", mib,
				      strerror(errno));
		ksft_test_result_fail("(not run)\n");
		return;
	}
	/* 4 KiB pages (no THP), all present before the trace starts. */
	madvise(buf, len, MADV_NOHUGEPAGE);
	memset(buf, 1, len);
	if (trace_start())
		ksft_print_msg("cannot trace kmem:mm_page_alloc\n");
	t0 = vt_now();
	mr = ibv_reg_mr(e->pd, buf, len, ACCESS);
	ksft_print_msg("reg_mr %zu MiB: %s in %.2f s\n", mib,
		       mr ? "ok" : strerror(errno), vt_now() - t0);
	big = trace_stop();
	if (mr && !mr_pages(mr, &psz, &np))
		ksft_print_msg("page size %#lx, %lu pages; %d page allocations of order >= 4\n",
			       psz, np, big);
	ksft_test_result(mr && psz == 4096 && np == len / 4096 && big == 0,
			 "%zu MiB MR of 4 KiB pages, no allocation of 64 KiB or more\n",
			 mib);
	for (i = 0; mr && i < ARRAY_SIZE(off); i++)
		moved &= move_data(e, mr, buf, (uintptr_t)buf, off[i],
				   XFER_MAX);
	ksft_test_result(mr && moved,
			 "RDMA WRITE/READ at the large MR's start, level-1 page boundary, middle and end\n");
	if (mr)
		ibv_dereg_mr(mr);
	munmap(buf, len);
}

/*
 * ibv_query_device's page_size_cap names the page sizes the driver builds
 * MRs from: 4 KiB..1 GiB (page_shift 12..30), not PAGE_SIZE alone.
 */
static void check_page_size_cap(struct env *e)
{
	const uint64_t want = ((1ull << 31) - 1) & ~((1ull << 12) - 1);
	struct ibv_device_attr attr;
	int ret = ibv_query_device(e->ctx, &attr);

	if (ret)
		ksft_print_msg("query_device: %s\n", strerror(ret));
	else
		ksft_print_msg("page_size_cap %#llx\n",
			       (unsigned long long)attr.page_size_cap);
	ksft_test_result(!ret && attr.page_size_cap == want,
			 "page_size_cap is 4 KiB..1 GiB (%#llx)\n",
			 (unsigned long long)want);
}

int main(int argc, char **argv)
{
	size_t mib = argc > 2 ? strtoul(argv[2], NULL, 0) : 256;
	struct ibv_context *ctx = NULL;
	struct env e = {};

	e.gid_index = argc > 1 ? atoi(argv[1]) : 1;
	ksft_print_header();
	ksft_set_plan(7);
	ctx = vt_open_device("vrnic0");
	if (!ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	if (mib < 4 || mib > 1024)
		ksft_exit_fail_msg("LARGE_MIB %zu: 4 .. 1024\n", mib);
	e.ctx = ctx;
	e.pd = ibv_alloc_pd(ctx);
	e.cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	if (!e.pd || !e.cq || ibv_query_gid(ctx, 1, e.gid_index, &e.gid))
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));

	check_page_size_cap(&e);
	/* First, while nothing is pinned. */
	too_large(&e);

	e.src = aligned_alloc(4096, XFER_MAX);
	e.dst = aligned_alloc(4096, XFER_MAX);
	e.a = make_qp(&e);
	e.b = make_qp(&e);
	if (!e.src || !e.dst || !e.a || !e.b ||
	    to_rts(&e, e.a, e.b->qp_num) || to_rts(&e, e.b, e.a->qp_num))
		ksft_exit_fail_msg("QP setup: %s\n", strerror(errno));
	e.src_mr = ibv_reg_mr(e.pd, e.src, XFER_MAX, ACCESS);
	e.dst_mr = ibv_reg_mr(e.pd, e.dst, XFER_MAX, ACCESS);
	if (!e.src_mr || !e.dst_mr)
		ksft_exit_fail_msg("reg_mr: %s\n", strerror(errno));

	huge_pages(&e);
	large_mr(&e, mib);

	ibv_dereg_mr(e.src_mr);
	ibv_dereg_mr(e.dst_mr);
	ibv_destroy_qp(e.a);
	ibv_destroy_qp(e.b);
	ibv_destroy_cq(e.cq);
	ibv_dealloc_pd(e.pd);
	ibv_close_device(ctx);
	free(e.src);
	free(e.dst);
	ksft_finished();
	return 0;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the provider (userspace/) owes libibverbs and the application, from
 * the second review's Part 1 (issue 23, "Provider (Part C)"), against the
 * stub kernel and device (stub.c):
 *
 * 1. A create whose ring libibverbs cannot protect from fork
 *    (ibv_dontfork_range() returns -1) fails with madvise's errno, or
 *    ENOMEM when none is set: a positive errno, never -1.  Nothing stays
 *    protected.
 * 2. Every completion status the device writes comes out as its
 *    ibv_wc_status, every opcode as its ibv_wc_opcode, through
 *    ibv_poll_cq() and through ibv_start_poll()/ibv_next_poll(); a status
 *    or an opcode the provider does not know comes out as
 *    IBV_WC_GENERAL_ERR (never raw, never a successful SEND), with the
 *    device's bytes in vendor_err, and frees no WQE; so does REG_MR (the
 *    kernel's), which frees its send WQE.
 * 3. An async event does not write libibverbs' qp->state.  Posting goes by
 *    the last modify or query: a QP in ERR takes work (to flush it), as
 *    before.
 * 4. A CQ created IBV_CREATE_CQ_ATTR_SINGLE_THREADED is polled, armed and
 *    cleaned without taking a lock (pthread_spin_lock is wrapped and
 *    counted: tsan.py links this test with --wrap), and works; a CQ without
 *    the flag takes its lock.
 * 5. Closing a context frees the doorbell record pages of objects the
 *    application never destroyed (the kernel destroyed them with the
 *    context).
 * 6. On a host whose pages are not 4 KiB (sysconf is wrapped: tsan.py
 *    links this test with --wrap), opening the device fails with
 *    EOPNOTSUPP before any command reaches the kernel, and nothing
 *    crashes; with 4 KiB pages again it opens.
 *
 * Built with AddressSanitizer and UBSan (tsan.py).  Output: TAP.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "stub.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static int test_no;
static int failures;			/* in the current test */

static void check(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	failures++;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void result(const char *name)
{
	printf("%sok %d - %s\n", failures ? "not " : "", ++test_no, name);
	failures = 0;
}

/* pthread_spin_lock() calls, whoever makes them (-Wl,--wrap). */
static unsigned long spin_locks;
int __real_pthread_spin_lock(pthread_spinlock_t *lock);
int __wrap_pthread_spin_lock(pthread_spinlock_t *lock);

int __wrap_pthread_spin_lock(pthread_spinlock_t *lock)
{
	__atomic_fetch_add(&spin_locks, 1, __ATOMIC_RELAXED);
	return __real_pthread_spin_lock(lock);
}

/* sysconf(_SC_PAGESIZE) answers fake_page_size when it is set. */
static long fake_page_size;
long __real_sysconf(int name);
long __wrap_sysconf(int name);

long __wrap_sysconf(int name)
{
	if (name == _SC_PAGESIZE && fake_page_size)
		return fake_page_size;
	return __real_sysconf(name);
}

/* A fresh context and PD: no doorbell record page in its pool yet. */
static bool open_ctx(void)
{
	ctx = stub_open_device();
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd)
		printf("Bail out! no context or PD on the stub: %s\n",
		       strerror(errno));
	return pd;
}

static void close_ctx(void)
{
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

static struct ibv_qp *create_qp(struct ibv_cq *cq, uint32_t send_wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = send_wr, .max_send_sge = 1,
			.max_recv_wr = 4, .max_recv_sge = 1,
		},
	};

	return ibv_create_qp(pd, &a);
}

static char data[64];			/* what the work requests name */

static int move_qp(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

static int to_rts(struct ibv_qp *qp)
{
	return move_qp(qp, IBV_QPS_INIT) || move_qp(qp, IBV_QPS_RTR) ||
	       move_qp(qp, IBV_QPS_RTS);
}

static int post_send(struct ibv_qp *qp)
{
	struct ibv_sge sge = { (uintptr_t)data, 8, 1 };
	struct ibv_send_wr wr = {
		.wr_id = 7, .opcode = IBV_WR_SEND, .sg_list = &sge,
		.num_sge = 1, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp)
{
	struct ibv_sge sge = { (uintptr_t)data, 8, 1 };
	struct ibv_recv_wr wr = { .wr_id = 8, .sg_list = &sge, .num_sge = 1 },
			   *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* The device completes: status st, opcode op, on QPN qpn (0: no QP). */
static int dev_cqe(struct ibv_cq *cq, uint64_t wr_id, uint8_t st, uint8_t op,
		   uint32_t qpn, uint32_t wqe_idx)
{
	struct vrnic_cqe c = {
		.wr_id = htole64(wr_id), .status = st, .opcode = op,
		.qpn = htole32(qpn), .wqe_idx = htole32(wqe_idx),
		.byte_len = htole32(8),
	};

	return stub_dev_cqe(cq->handle, &c);
}

/* ------------------------------------------------------- 1. dontfork */

/*
 * Create what (a CQ, an SRQ, or a QP on a CQ made first) while the nth
 * ibv_dontfork_range() call fails with err: errno must be want.
 */
static void fail_create(const char *what, unsigned int nth, int err, int want)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	bool qp = !strcmp(what, "QP");
	struct ibv_cq *cq = NULL;
	void *obj = NULL;
	long ranges;

	if (!open_ctx())
		exit(1);
	if (qp) {
		cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		check(cq != NULL, "QP: no CQ: %s", strerror(errno));
	}
	ranges = stub_dontfork_ranges();
	stub_fail_dontfork(nth, err);
	errno = 0;
	if (!strcmp(what, "CQ"))
		obj = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	else if (!strcmp(what, "SRQ"))
		obj = ibv_create_srq(pd, &sa);
	else if (cq)
		obj = create_qp(cq, 4);
	stub_fail_dontfork(0, 0);
	check(!obj, "%s: created although ibv_dontfork_range() failed", what);
	check(errno == want, "%s, dontfork call %u fails (errno %d set): "
	      "errno %d (%s), want %d", what, nth, err, errno,
	      errno > 0 ? strerror(errno) : "not an errno", want);
	check(stub_dontfork_ranges() == ranges,
	      "%s: %ld ranges left protected", what,
	      stub_dontfork_ranges() - ranges);
	if (cq)
		ibv_destroy_cq(cq);
	close_ctx();
}

static void test_dontfork(void)
{
	/* The ring; then the doorbell record page (a fresh pool). */
	fail_create("CQ", 1, EAGAIN, EAGAIN);
	fail_create("CQ", 2, EAGAIN, EAGAIN);
	fail_create("CQ", 1, 0, ENOMEM);
	fail_create("SRQ", 1, EPERM, EPERM);
	/* SQ ring, RQ ring (the CQ's page holds the record). */
	fail_create("QP", 1, EAGAIN, EAGAIN);
	fail_create("QP", 2, EINVAL, EINVAL);
	fail_create("QP", 2, 0, ENOMEM);
	result("ibv_dontfork_range() failing: a positive errno (madvise's, "
	       "or ENOMEM), nothing left protected");
}

/* ----------------------------------------------------- 2. CQE fields */

static const struct {
	uint8_t dev;
	enum ibv_wc_status ibv;
} statuses[] = {
	{ VRNIC_WC_ST_SUCCESS, IBV_WC_SUCCESS },
	{ VRNIC_WC_ST_LOC_LEN_ERR, IBV_WC_LOC_LEN_ERR },
	{ VRNIC_WC_ST_LOC_QP_OP_ERR, IBV_WC_LOC_QP_OP_ERR },
	{ VRNIC_WC_ST_LOC_PROT_ERR, IBV_WC_LOC_PROT_ERR },
	{ VRNIC_WC_ST_WR_FLUSH_ERR, IBV_WC_WR_FLUSH_ERR },
	{ VRNIC_WC_ST_MW_BIND_ERR, IBV_WC_MW_BIND_ERR },
	{ VRNIC_WC_ST_BAD_RESP_ERR, IBV_WC_BAD_RESP_ERR },
	{ VRNIC_WC_ST_LOC_ACCESS_ERR, IBV_WC_LOC_ACCESS_ERR },
	{ VRNIC_WC_ST_REM_INV_REQ_ERR, IBV_WC_REM_INV_REQ_ERR },
	{ VRNIC_WC_ST_REM_ACCESS_ERR, IBV_WC_REM_ACCESS_ERR },
	{ VRNIC_WC_ST_REM_OP_ERR, IBV_WC_REM_OP_ERR },
	{ VRNIC_WC_ST_RETRY_EXC_ERR, IBV_WC_RETRY_EXC_ERR },
	{ VRNIC_WC_ST_RNR_RETRY_EXC_ERR, IBV_WC_RNR_RETRY_EXC_ERR },
	{ VRNIC_WC_ST_FATAL_ERR, IBV_WC_FATAL_ERR },
	{ VRNIC_WC_ST_GENERAL_ERR, IBV_WC_GENERAL_ERR },
};

static const struct {
	uint8_t dev;
	enum ibv_wc_opcode ibv;
} opcodes[] = {
	{ VRNIC_WC_SEND, IBV_WC_SEND },
	{ VRNIC_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE },
	{ VRNIC_WC_RDMA_READ, IBV_WC_RDMA_READ },
	{ VRNIC_WC_CMP_SWP, IBV_WC_COMP_SWAP },
	{ VRNIC_WC_FETCH_ADD, IBV_WC_FETCH_ADD },
	{ VRNIC_WC_LOCAL_INV, IBV_WC_LOCAL_INV },
	{ VRNIC_WC_ATOMIC_WRITE, IBV_WC_ATOMIC_WRITE },
	{ VRNIC_WC_FLUSH, IBV_WC_FLUSH },
	{ VRNIC_WC_BIND_MW, IBV_WC_BIND_MW },
	{ VRNIC_WC_RECV, IBV_WC_RECV },
	{ VRNIC_WC_RECV_RDMA_WITH_IMM, IBV_WC_RECV_RDMA_WITH_IMM },
};

/*
 * Not device statuses: the ibv_wc_status values between and after them
 * (LOC_EEC_OP_ERR, the RD and EEC ones, RESP_TIMEOUT, TM_*) and beyond.
 */
static const uint8_t bad_statuses[] = {
	3, 14, 15, 16, 17, 18, 20, 22, 23, 24, 0x7f, 0x80, 0xff,
};

/* REG_MR is the kernel's; the rest are no opcode at all. */
static const uint8_t bad_opcodes[] = {
	VRNIC_WC_REG_MR, 0x0a, 0x0b, 0x7f, 0x82, 0x83, 0xc0, 0xff,
};

struct got {
	int n;
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err;
};

/* Complete (st, op) on cq and read it back, one way or the other. */
static struct got one(struct ibv_cq *cq, bool ex, uint64_t wr_id,
		      uint8_t st, uint8_t op)
{
	struct got g = { 0 };

	if (dev_cqe(cq, wr_id, st, op, 0, 0)) {
		g.n = -1;
		return g;
	}
	if (!ex) {
		struct ibv_wc wc;

		g.n = ibv_poll_cq(cq, 1, &wc);
		g.wr_id = wc.wr_id;
		g.status = wc.status;
		g.opcode = wc.opcode;
		g.vendor_err = wc.vendor_err;
	} else {
		/* The same CQ (struct verbs_cq: a union of both). */
		struct ibv_cq_ex *cqx = (struct ibv_cq_ex *)cq;
		struct ibv_poll_cq_attr pa = {};

		if (ibv_start_poll(cqx, &pa))
			return g;
		g.n = 1;
		g.wr_id = cqx->wr_id;
		g.status = cqx->status;
		g.opcode = ibv_wc_read_opcode(cqx);
		g.vendor_err = ibv_wc_read_vendor_err(cqx);
		ibv_end_poll(cqx);
	}
	return g;
}

static void check_cqes(struct ibv_cq *cq, bool ex)
{
	const char *how = ex ? "ibv_start_poll" : "ibv_poll_cq";
	uint64_t id = 100;
	unsigned int i;
	struct got g;

	for (i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++, id++) {
		g = one(cq, ex, id, statuses[i].dev, VRNIC_WC_SEND);
		check(g.n == 1 && g.wr_id == id && g.status == statuses[i].ibv,
		      "%s: device status %u: n %d, status %d, want %d", how,
		      statuses[i].dev, g.n, g.status, statuses[i].ibv);
	}
	for (i = 0; i < sizeof(opcodes) / sizeof(opcodes[0]); i++, id++) {
		g = one(cq, ex, id, VRNIC_WC_ST_SUCCESS, opcodes[i].dev);
		check(g.n == 1 && g.wr_id == id && g.status == IBV_WC_SUCCESS &&
		      g.opcode == opcodes[i].ibv,
		      "%s: device opcode 0x%x: n %d, status %d, opcode %d, "
		      "want success and %d", how, opcodes[i].dev, g.n,
		      g.status, g.opcode, opcodes[i].ibv);
	}
	for (i = 0; i < sizeof(bad_statuses); i++, id++) {
		g = one(cq, ex, id, bad_statuses[i], VRNIC_WC_RDMA_WRITE);
		check(g.n == 1 && g.wr_id == id &&
		      g.status == IBV_WC_GENERAL_ERR &&
		      g.vendor_err == (bad_statuses[i] |
				       VRNIC_WC_RDMA_WRITE << 8),
		      "%s: unknown status %u: n %d, status %d, "
		      "vendor_err 0x%x, want GENERAL_ERR (%d)", how,
		      bad_statuses[i], g.n, g.status, g.vendor_err,
		      IBV_WC_GENERAL_ERR);
	}
	for (i = 0; i < sizeof(bad_opcodes) * 2; i++, id++) {
		uint8_t st = i & 1 ? VRNIC_WC_ST_WR_FLUSH_ERR :
				     VRNIC_WC_ST_SUCCESS;
		uint8_t op = bad_opcodes[i / 2];

		g = one(cq, ex, id, st, op);
		check(g.n == 1 && g.wr_id == id &&
		      g.status == IBV_WC_GENERAL_ERR &&
		      g.vendor_err == (st | (uint32_t)op << 8),
		      "%s: unknown opcode 0x%x (status %u): n %d, status %d, "
		      "opcode %d, vendor_err 0x%x, want GENERAL_ERR (%d)",
		      how, op, st, g.n, g.status, g.opcode, g.vendor_err,
		      IBV_WC_GENERAL_ERR);
	}
}

/*
 * A completion with an unknown opcode names no queue: it frees no send
 * WQE (a post into a full SQ still gets ENOMEM).  REG_MR is a send
 * queue's (the device writes it if a WQE asks for it, with an error for a
 * user QP): reported as GENERAL_ERR all the same, but it frees its WQE, as
 * a SEND completion does.
 */
static void check_unknown_frees_nothing(struct ibv_cq *cq)
{
	static const struct {
		uint8_t st, op;
		enum ibv_wc_status want;
		bool frees;
	} cases[] = {
		{ VRNIC_WC_ST_SUCCESS, 0x0a, IBV_WC_GENERAL_ERR, false },
		{ VRNIC_WC_ST_WR_FLUSH_ERR, 0xc0, IBV_WC_GENERAL_ERR, false },
		{ VRNIC_WC_ST_LOC_QP_OP_ERR, VRNIC_WC_REG_MR,
		  IBV_WC_GENERAL_ERR, true },
		{ VRNIC_WC_ST_SUCCESS, VRNIC_WC_SEND, IBV_WC_SUCCESS, true },
	};
	struct ibv_qp *qp = create_qp(cq, 1);
	uint32_t idx = 0;
	struct ibv_wc wc;
	unsigned int i;
	int r;

	if (!qp || to_rts(qp)) {
		check(0, "no QP in RTS: %s", strerror(errno));
		return;
	}
	check(!post_send(qp), "the first send");
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		check(post_send(qp) == ENOMEM, "a send into a full SQ");
		dev_cqe(cq, 7, cases[i].st, cases[i].op, qp->qp_num, idx);
		r = ibv_poll_cq(cq, 1, &wc);
		check(r == 1 && wc.status == cases[i].want,
		      "opcode 0x%x, status %u on the QP: n %d, status %d, "
		      "want %d", cases[i].op, cases[i].st, r, wc.status,
		      cases[i].want);
		r = post_send(qp);
		check(r == (cases[i].frees ? 0 : ENOMEM),
		      "after a completion with opcode 0x%x a send gets %d "
		      "(%s): want %s", cases[i].op, r, strerror(r),
		      cases[i].frees ? "0, its WQE freed" :
				       "ENOMEM, no WQE freed");
		idx += cases[i].frees;
	}
	ibv_destroy_qp(qp);
}

static void test_cqe(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 64,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_cq_ex *cqx;
	struct ibv_cq *cq;

	if (!open_ctx())
		exit(1);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	cqx = ibv_create_cq_ex(ctx, &ca);
	check(cq && cqx, "no CQs: %s", strerror(errno));
	if (cq && cqx) {
		check_cqes(cq, false);
		check_cqes(ibv_cq_ex_to_cq(cqx), true);
		check_unknown_frees_nothing(cq);
	}
	if (cqx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
	if (cq)
		ibv_destroy_cq(cq);
	close_ctx();
	result("CQE status and opcode mapped value by value; unknown ones "
	       "are IBV_WC_GENERAL_ERR and free no WQE");
}

/* ---------------------------------------------------- 3. QP state */

static void test_qp_state(void)
{
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_qp *qp, *rtr;
	struct ibv_cq *cq;

	if (!open_ctx())
		exit(1);
	cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	qp = cq ? create_qp(cq, 4) : NULL;
	rtr = cq ? create_qp(cq, 4) : NULL;
	if (!qp || !rtr || to_rts(qp) || move_qp(rtr, IBV_QPS_INIT) ||
	    move_qp(rtr, IBV_QPS_RTR)) {
		check(0, "no QPs: %s", strerror(errno));
		goto out;
	}
	stub_dev_qp_error(qp);
	stub_async_event(qp, IBV_EVENT_QP_FATAL);
	stub_dev_qp_error(rtr);
	stub_async_event(rtr, IBV_EVENT_QP_FATAL);
	check(qp->state == IBV_QPS_RTS && rtr->state == IBV_QPS_RTR,
	      "after QP_FATAL libibverbs' qp->state is %d and %d, want RTS "
	      "(%d) and RTR (%d) as the application left them", qp->state,
	      rtr->state, IBV_QPS_RTS, IBV_QPS_RTR);
	check(!post_send(qp) && !post_recv(qp),
	      "posting on an RTS QP after its QP_FATAL");
	check(post_send(rtr) == EINVAL,
	      "a send on an RTR QP not queried since its QP_FATAL");

	/* A query learns ERR; ERR takes work, to flush it. */
	check(!ibv_query_qp(rtr, &qa, IBV_QP_STATE, &qia) &&
	      qa.qp_state == IBV_QPS_ERR, "query after the device's ERR");
	check(!post_send(rtr) && !post_recv(rtr),
	      "posting on a QP a query found in ERR");
	check(!move_qp(qp, IBV_QPS_ERR) && !post_send(qp) && !post_recv(qp),
	      "posting on a QP moved to ERR");
	check(!move_qp(qp, IBV_QPS_RESET) && post_send(qp) == EINVAL &&
	      post_recv(qp) == EINVAL, "posting on a QP moved to RESET");
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (rtr)
		ibv_destroy_qp(rtr);
	if (cq)
		ibv_destroy_cq(cq);
	close_ctx();
	result("async events leave qp->state alone; posting goes by modify "
	       "and query, ERR still flushes");
}

/* ---------------------------------------------- 4. SINGLE_THREADED */

/* Polls, arms and purges on cq: the pthread_spin_lock() calls made. */
static unsigned long use_cq(struct ibv_cq_ex *cqx, uint64_t base)
{
	struct ibv_cq *cq = ibv_cq_ex_to_cq(cqx);
	struct ibv_poll_cq_attr pa = {};
	struct ibv_qp *qp = create_qp(cq, 4);
	unsigned long before;
	struct ibv_wc wc[4];
	int i, n;

	if (!qp || to_rts(qp)) {
		check(0, "no QP: %s", strerror(errno));
		return 0;
	}
	for (i = 0; i < 6; i++)
		check(!dev_cqe(cq, base + i, VRNIC_WC_ST_SUCCESS,
			       i < 3 ? VRNIC_WC_RECV : VRNIC_WC_SEND,
			       i & 1 ? qp->qp_num : 0, 0),
		      "the device's completion %d", i);
	before = __atomic_load_n(&spin_locks, __ATOMIC_RELAXED);
	check(!ibv_start_poll(cqx, &pa) && cqx->wr_id == base &&
	      ibv_wc_read_opcode(cqx) == IBV_WC_RECV,
	      "start_poll: wr_id %llu", (unsigned long long)cqx->wr_id);
	check(!ibv_next_poll(cqx) && cqx->wr_id == base + 1,
	      "next_poll: wr_id %llu", (unsigned long long)cqx->wr_id);
	ibv_end_poll(cqx);
	n = ibv_poll_cq(cq, 1, wc);
	check(n == 1 && wc[0].wr_id == base + 2 && wc[0].opcode == IBV_WC_RECV,
	      "poll_cq: %d", n);
	check(!ibv_req_notify_cq(cq, 0), "req_notify_cq");
	/* Its completions (3 and 5) are purged, 4 stays. */
	check(!ibv_destroy_qp(qp), "destroy_qp");
	n = ibv_poll_cq(cq, 4, wc);
	check(n == 1 && wc[0].wr_id == base + 4 && wc[0].opcode == IBV_WC_SEND,
	      "poll_cq after destroy_qp: %d (wr_id %llu)", n,
	      n > 0 ? (unsigned long long)wc[0].wr_id : 0ull);
	return __atomic_load_n(&spin_locks, __ATOMIC_RELAXED) - before;
}

static void test_single_threaded(void)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 32,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_cq_ex *single, *shared;
	unsigned long locks;

	if (!open_ctx())
		exit(1);
	single = ibv_create_cq_ex(ctx, &ca);
	ca.comp_mask = 0;
	shared = ibv_create_cq_ex(ctx, &ca);
	check(single && shared, "no CQs: %s", strerror(errno));
	if (single && shared) {
		locks = use_cq(single, 1000);
		check(!locks, "a SINGLE_THREADED CQ took a spinlock %lu times",
		      locks);
		locks = use_cq(shared, 2000);
		check(locks, "a CQ without SINGLE_THREADED took no spinlock");
	}
	if (single)
		ibv_destroy_cq(ibv_cq_ex_to_cq(single));
	if (shared)
		ibv_destroy_cq(ibv_cq_ex_to_cq(shared));
	close_ctx();
	result("IBV_CREATE_CQ_ATTR_SINGLE_THREADED: no lock, and the CQ works");
}

/* ------------------------------------------- 5. close frees the pool */

static void test_close(void)
{
	long before, made;
	struct ibv_cq *cq;
	struct ibv_qp *qp;

	before = stub_dontfork_ranges();
	if (!open_ctx())
		exit(1);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	qp = cq ? create_qp(cq, 4) : NULL;
	check(qp != NULL, "no CQ or QP: %s", strerror(errno));
	made = stub_dontfork_ranges() - before;
	/* The CQ ring, SQ and RQ rings, and one record page for both. */
	check(made == 4, "%ld ranges protected for a CQ and a QP", made);
	close_ctx();	/* the application never destroys them */
	made = stub_dontfork_ranges() - before;
	check(made == 3, "after close %ld ranges protected, want 3 (the "
	      "rings of the objects the application leaked)", made);
	result("closing a context frees the doorbell record pages it holds");
}

/* ------------------------------------------- 6. pages other than 4 KiB */

static void test_page_size(void)
{
	struct ibv_context *c;

	fake_page_size = 65536;
	errno = 0;
	c = stub_open_device();
	check(!c && errno == EOPNOTSUPP,
	      "64 KiB pages: open gave %p, errno %d (want NULL, EOPNOTSUPP)",
	      (void *)c, errno);
	if (c)
		ibv_close_device(c);
	fake_page_size = 0;
	c = stub_open_device();
	check(c != NULL, "4 KiB pages again: no context: %s", strerror(errno));
	if (c)
		ibv_close_device(c);
	result("pages other than 4 KiB: the context is refused with EOPNOTSUPP");
}

/* ----------------------------------------------------------- 7. ECE */

/*
 * The stub's kernel grants no VRNIC_ALLOC_UCTX_RESP_ECE (as one from
 * before ECE): the provider has no ECE to offer, and every modify_qp on
 * the way to RTS is the plain command, which such a kernel takes (fcc367d:
 * a QP that reached RTR was marked agreed-to-nothing and sent the
 * extended command from then on).
 */
int vrnic_query_ece(struct ibv_qp *qp, struct ibv_ece *ece);	/* provider */

static void test_ece_old_kernel(void)
{
	struct ibv_ece ece = {};
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	long before;

	if (!open_ctx())
		exit(1);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	qp = cq ? create_qp(cq, 4) : NULL;
	before = stub_modify_qp_ex_calls();
	if (!qp || to_rts(qp)) {
		check(0, "no QP at RTS: %s", strerror(errno));
	} else {
		check(stub_modify_qp_ex_calls() == before,
		      "%ld extended modify_qp commands, want none",
		      stub_modify_qp_ex_calls() - before);
		check(vrnic_query_ece(qp, &ece) == EOPNOTSUPP,
		      "query_ece without the kernel's ECE: not EOPNOTSUPP");
	}
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	close_ctx();
	result("ECE on a kernel without it: plain modify_qp only, "
	       "query_ece EOPNOTSUPP");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..7\n");
	test_dontfork();
	test_cqe();
	test_qp_state();
	test_single_threaded();
	test_close();
	test_page_size();
	test_ece_old_kernel();
	return 0;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The kernel's ring geometry answer (include/vrnic-abi.h, "Ring geometry
 * is the kernel's answer"): the provider (userspace/)
 * against the stub kernel (stub.c), whose create CQ/QP/SRQ answers this
 * test rewrites with stub_set_answer().
 *
 * 1. The honest answer: CQ, QP and SRQ are created, the caps returned and
 *    those of ibv_query_qp() are the answer's; posts of up to max SGEs /
 *    inline bytes and up to the answered depth work, one more SGE or
 *    inline byte gives EINVAL, one more WQE ENOMEM.  QPs and CQs are made
 *    both ways (ibv_create_qp/_ex, ibv_create_cq/_ex), and the ibv_wr_*
 *    sends of a QP ex have the same limits.
 * 2. A valid answer below the common response's caps (but above what was
 *    asked): the provider goes by the driver answer.
 * 3-5. Hostile CQ, QP and SRQ answers (rings larger than the provider's,
 *    strides too small for the limits, limits above the device's, less
 *    than asked, RQ fields for a QP without an RQ, shifts of 32 and more):
 *    create fails with EINVAL (EOPNOTSUPP for an unknown CQE size), after
 *    the provider destroyed the object in the kernel (no leak).  A QP or
 *    SRQ accepted all the same gets its rings filled by the answer.
 * 6. comp_mask: the geometry fields are always there (ABI version 1), so
 *    a response with comp_mask 0 is checked as any other; a bit the
 *    provider does not know (a newer kernel's optional field) changes
 *    nothing.
 *
 * Built with AddressSanitizer and UBSan (tsan.py): the rings are whole
 * pages, so a post beyond the ring the provider allocated, or a shift by
 * an answered 32 or more, is reported.  Output: TAP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "stub.h"

/* RC: 64-byte header; 2 SGEs or 16 inline bytes ask for a 128-byte stride. */
#define SEND_WR		32		/* 32 << 7: one page */
#define SEND_SGE	2
#define INLINE		16
#define RECV_WR		64		/* 64 << 6: one page */
#define RECV_SGE	2
#define SRQ_WR		64
#define SRQ_SGE		2
#define CQE		128		/* 128 * 32: one page */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;		/* the QPs' */
static struct ibv_srq *srq;		/* for QPs without an RQ */
static int test_no;
static int failures;			/* in the current test */
static char data[1024];

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

/* ------------------------------------------------------------ answers */

/* The last answers the stub kernel sent (after any rewrite). */
static struct vrnic_create_cq_resp cq_ans;
static struct vrnic_create_qp_resp qp_ans;
static struct vrnic_create_srq_resp srq_ans;
static struct ib_uverbs_create_qp_resp qp_common;

/* A rewrite: field (byte offset into the response) set to or moved by. */
enum op { NONE, SET, ADD, SEND_SGE_FILL, INLINE_FILL, RECV_SGE_FILL,
	  SRQ_SGE_FILL, CLEAR_MASK };

struct rewrite {
	const char *what;
	size_t off;
	enum op op;
	uint32_t val;
	int err;			/* expected errno, 0: accepted */
};

static const struct rewrite *rw;	/* the current one */

static uint32_t *field(void *resp, size_t off)
{
	return (uint32_t *)((char *)resp + off);
}

static void apply(void *resp, uint32_t fill)
{
	uint32_t *f;

	if (!rw || rw->op == NONE)
		return;
	f = field(resp, rw->off);
	switch (rw->op) {
	case SET:
		*f = rw->val;
		break;
	case ADD:
		*f += rw->val;
		break;
	case CLEAR_MASK:
		*field(resp, 4) = 0;		/* comp_mask */
		*f = rw->val;
		break;
	default:
		*f = fill;
		break;
	}
}

static void cq_hook(struct vrnic_create_cq_resp *r, void *arg)
{
	apply(r, 0);
	cq_ans = *r;
}

static void qp_hook(struct vrnic_create_qp_resp *r,
		    struct ib_uverbs_create_qp_resp *common, void *arg)
{
	uint32_t fill = 0;

	if (rw && rw->op == SEND_SGE_FILL)	/* one SGE beyond the stride */
		fill = ((1u << r->sq_wqe_shift) - 64) / 16 + 1;
	if (rw && rw->op == INLINE_FILL)
		fill = (1u << r->sq_wqe_shift) - 64 + 1;
	if (rw && rw->op == RECV_SGE_FILL)
		fill = ((1u << r->rq_wqe_shift) - 16) / 16 + 1;
	apply(r, fill);
	qp_ans = *r;
	qp_common = *common;
}

static void srq_hook(struct vrnic_create_srq_resp *r,
		     struct ib_uverbs_create_srq_resp *common, void *arg)
{
	apply(r, ((1u << r->wqe_shift) - 16) / 16 + 1);
	srq_ans = *r;
}

static struct stub_answer answer = {
	.cq = cq_hook, .qp = qp_hook, .srq = srq_hook,
};

/* ------------------------------------------------------------ objects */

static struct ibv_qp *create_qp(bool with_srq, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .srq = with_srq ? srq : NULL,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = SEND_WR, .max_send_sge = SEND_SGE,
			.max_inline_data = INLINE,
			.max_recv_wr = with_srq ? 0 : RECV_WR,
			.max_recv_sge = with_srq ? 0 : RECV_SGE,
		},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);

	if (cap)
		*cap = a.cap;
	return qp;
}

/* The same through ibv_create_qp_ex(), with the ibv_wr_* send API. */
static struct ibv_qp *create_qp_ex(bool with_srq, struct ibv_qp_cap *cap)
{
	struct ibv_qp_init_attr_ex a = {
		.send_cq = cq, .recv_cq = cq, .srq = with_srq ? srq : NULL,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = SEND_WR, .max_send_sge = SEND_SGE,
			.max_inline_data = INLINE,
			.max_recv_wr = with_srq ? 0 : RECV_WR,
			.max_recv_sge = with_srq ? 0 : RECV_SGE,
		},
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	struct ibv_qp *qp = ibv_create_qp_ex(ctx, &a);

	if (cap)
		*cap = a.cap;
	return qp;
}

static struct ibv_srq *create_srq(struct ibv_srq_attr *out)
{
	struct ibv_srq_init_attr a = {
		.attr = { .max_wr = SRQ_WR, .max_sge = SRQ_SGE },
	};
	struct ibv_srq *s = ibv_create_srq(pd, &a);

	if (out)
		*out = a.attr;
	return s;
}

static int to_rts(struct ibv_qp *qp)
{
	static const enum ibv_qp_state path[] = {
		IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS
	};
	struct ibv_qp_attr a = {};
	unsigned int i;

	for (i = 0; i < 3; i++) {
		a.qp_state = path[i];
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return -1;
	}
	return 0;
}

static struct ibv_sge sges[VRNIC_MAX_SGE + 2];

static int post_send(struct ibv_qp *qp, int num_sge, bool inl, uint32_t len)
{
	struct ibv_send_wr wr = {
		.opcode = IBV_WR_SEND, .sg_list = sges, .num_sge = num_sge,
		.send_flags = inl ? IBV_SEND_INLINE : 0,
	}, *bad;
	int i;

	for (i = 0; i < num_sge; i++)
		sges[i] = (struct ibv_sge){ (uintptr_t)data, 8, 1 };
	if (inl)
		sges[0].length = len;
	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, struct ibv_srq *s, int num_sge)
{
	struct ibv_recv_wr wr = { .sg_list = sges, .num_sge = num_sge }, *bad;
	int i;

	for (i = 0; i < num_sge; i++)
		sges[i] = (struct ibv_sge){ (uintptr_t)data, 8, 1 };
	return s ? ibv_post_srq_recv(s, &wr, &bad) :
		   ibv_post_recv(qp, &wr, &bad);
}

/* Posts of one SGE until one fails: how many went; *err its error. */
static unsigned int fill(struct ibv_qp *qp, struct ibv_srq *s, int dir,
			 int *err)
{
	unsigned int n = 0;

	while (n < 1u << 16) {
		*err = dir ? post_recv(qp, s, 1) : post_send(qp, 1, false, 0);
		if (*err)
			break;
		n++;
	}
	return n;
}

/* ------------------------------------------------------------ 1, 2, 6 */

/*
 * A QP created on the current answer, its caps against want (the answer
 * the provider should go by), and its posts by them.
 */
/* The caps a create returned are the answer's. */
static void check_caps(const char *how, const char *what,
		       const struct ibv_qp_cap *cap,
		       const struct ibv_qp_cap *want)
{
	check(!memcmp(cap, want, sizeof(*cap)),
	      "%s: %scaps %u/%u wr %u/%u sge %u inline, the answer %u/%u %u/%u %u",
	      how, what, cap->max_send_wr, cap->max_recv_wr,
	      cap->max_send_sge, cap->max_recv_sge, cap->max_inline_data,
	      want->max_send_wr, want->max_recv_wr, want->max_send_sge,
	      want->max_recv_sge, want->max_inline_data);
}

static void check_qp(const char *how, const struct ibv_qp_cap *want)
{
	struct ibv_qp_init_attr qia;
	struct ibv_qp_attr qa;
	struct ibv_qp_cap cap;
	struct ibv_qp *qp = create_qp(false, &cap);
	unsigned int n;
	int err;

	check(qp != NULL, "%s: create QP: %s", how, strerror(errno));
	if (!qp)
		return;
	check_caps(how, "", &cap, want);
	if (!rw) {	/* the kernel's own caps: honest answers only */
		check(!ibv_query_qp(qp, &qa, IBV_QP_CAP, &qia) &&
		      !memcmp(&qia.cap, want, sizeof(*want)) &&
		      !memcmp(&qa.cap, want, sizeof(*want)),
		      "%s: ibv_query_qp caps differ from the answer", how);
	}
	check(!to_rts(qp), "%s: to RTS", how);
	err = post_send(qp, want->max_send_sge, false, 0);
	check(!err, "%s: post_send of %u SGEs: %d", how, want->max_send_sge,
	      err);
	err = post_send(qp, want->max_send_sge + 1, false, 0);
	check(err == EINVAL, "%s: post_send of %u SGEs: %d, not EINVAL", how,
	      want->max_send_sge + 1, err);
	err = post_send(qp, 1, true, want->max_inline_data);
	check(!err, "%s: %u inline bytes: %d", how, want->max_inline_data, err);
	err = post_send(qp, 1, true, want->max_inline_data + 1);
	check(err == EINVAL, "%s: %u inline bytes: %d, not EINVAL", how,
	      want->max_inline_data + 1, err);
	n = fill(qp, NULL, 0, &err) + 2;
	check(n == want->max_send_wr && err == ENOMEM,
	      "%s: %u sends before %d, the answer's depth %u", how, n, err,
	      want->max_send_wr);
	err = post_recv(qp, NULL, want->max_recv_sge);
	check(!err, "%s: post_recv of %u SGEs: %d", how, want->max_recv_sge,
	      err);
	err = post_recv(qp, NULL, want->max_recv_sge + 1);
	check(err == EINVAL, "%s: post_recv of %u SGEs: %d, not EINVAL", how,
	      want->max_recv_sge + 1, err);
	n = fill(qp, NULL, 1, &err) + 1;
	check(n == want->max_recv_wr && err == ENOMEM,
	      "%s: %u receives before %d, the answer's depth %u", how, n, err,
	      want->max_recv_wr);
	check(!ibv_destroy_qp(qp), "%s: destroy QP", how);
}

/* One send by ibv_wr_*: nsge SGEs, or inline bytes if nsge is 0. */
static int wr_send(struct ibv_qp_ex *qpx, size_t nsge, size_t inl)
{
	struct ibv_data_buf b = { data, inl };
	size_t i;

	for (i = 0; i < nsge; i++)
		sges[i] = (struct ibv_sge){ (uintptr_t)data, 8, 1 };
	ibv_wr_start(qpx);
	ibv_wr_send(qpx);
	if (nsge)
		ibv_wr_set_sge_list(qpx, nsge, sges);
	else
		ibv_wr_set_inline_data_list(qpx, 1, &b);
	return ibv_wr_complete(qpx);
}

static void check_qp_ex(const char *how, const struct ibv_qp_cap *want)
{
	struct ibv_qp_cap cap;
	struct ibv_qp *qp = create_qp_ex(false, &cap);
	struct ibv_qp_ex *qpx;
	int err;

	check(qp != NULL, "%s: create QP ex: %s", how, strerror(errno));
	if (!qp)
		return;
	check_caps(how, "QP ex ", &cap, want);
	qpx = ibv_qp_to_qp_ex(qp);
	check(qpx && !to_rts(qp), "%s: QP ex to RTS", how);
	if (qpx) {
		err = wr_send(qpx, want->max_send_sge, 0);
		check(!err, "%s: wr_set_sge_list of %u: %d", how,
		      want->max_send_sge, err);
		err = wr_send(qpx, want->max_send_sge + 1, 0);
		check(err == EINVAL, "%s: wr_set_sge_list of %u: %d, not EINVAL",
		      how, want->max_send_sge + 1, err);
		err = wr_send(qpx, 0, want->max_inline_data);
		check(!err, "%s: wr_set_inline_data of %u: %d", how,
		      want->max_inline_data, err);
		err = wr_send(qpx, 0, want->max_inline_data + 1);
		check(err == EINVAL,
		      "%s: wr_set_inline_data of %u: %d, not EINVAL", how,
		      want->max_inline_data + 1, err);
	}
	check(!ibv_destroy_qp(qp), "%s: destroy QP ex", how);
}

static void check_srq(const char *how, uint32_t max_wr, uint32_t max_sge)
{
	struct ibv_srq_attr a;
	struct ibv_srq *s = create_srq(&a);
	unsigned int n;
	int err;

	check(s != NULL, "%s: create SRQ: %s", how, strerror(errno));
	if (!s)
		return;
	check(a.max_wr == max_wr && a.max_sge == max_sge,
	      "%s: SRQ max_wr %u max_sge %u, the answer %u %u", how, a.max_wr,
	      a.max_sge, max_wr, max_sge);
	err = post_recv(NULL, s, max_sge);
	check(!err, "%s: SRQ post of %u SGEs: %d", how, max_sge, err);
	err = post_recv(NULL, s, max_sge + 1);
	check(err == EINVAL, "%s: SRQ post of %u SGEs: %d, not EINVAL", how,
	      max_sge + 1, err);
	n = fill(NULL, s, 1, &err) + 1;
	check(n == max_wr && err == ENOMEM,
	      "%s: %u SRQ receives before %d, the answer's depth %u", how, n,
	      err, max_wr);
	check(!ibv_destroy_srq(s), "%s: destroy SRQ", how);
}

static void check_cq(const char *how, uint32_t depth)
{
	struct ibv_cq_init_attr_ex ax = { .cqe = CQE };
	struct ibv_cq *c = ibv_create_cq(ctx, CQE, NULL, NULL, 0);
	struct ibv_cq_ex *cx;

	check(c && (uint32_t)c->cqe == depth, "%s: CQ of %d, the answer %u",
	      how, c ? c->cqe : -1, depth);
	if (c)
		ibv_destroy_cq(c);
	cx = ibv_create_cq_ex(ctx, &ax);
	check(cx && (uint32_t)ibv_cq_ex_to_cq(cx)->cqe == depth,
	      "%s: CQ ex of %d, the answer %u", how,
	      cx ? ibv_cq_ex_to_cq(cx)->cqe : -1, depth);
	if (cx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cx));
}

static struct ibv_qp_cap answered_caps(void)
{
	return (struct ibv_qp_cap) {
		.max_send_wr = 1u << qp_ans.sq_log_depth,
		.max_recv_wr = 1u << qp_ans.rq_log_depth,
		.max_send_sge = qp_ans.max_send_sge,
		.max_recv_sge = qp_ans.max_recv_sge,
		.max_inline_data = qp_ans.max_inline,
	};
}

static void test_honest(void)
{
	struct ibv_qp_cap want;
	struct ibv_qp *qp;

	rw = NULL;
	/* What the kernel answers for these asks (as kernel/ib computes). */
	qp = create_qp(false, NULL);
	check(qp && qp_ans.comp_mask == 0,
	      "honest: no QP or a comp_mask bit");
	if (qp)
		ibv_destroy_qp(qp);
	want = answered_caps();
	check(want.max_send_wr == SEND_WR && want.max_send_sge == 4 &&
	      want.max_inline_data == 64 && want.max_recv_wr == RECV_WR &&
	      want.max_recv_sge == 3,
	      "honest: the stub kernel's answer is not kernel/ib's");
	check_qp("honest", &want);
	check_qp_ex("honest", &want);
	check_srq("honest", SRQ_WR, 3);
	check_cq("honest", CQE);
	check(srq_ans.log_depth == 6 && srq_ans.wqe_shift == 6 &&
	      cq_ans.log_depth == 7 && cq_ans.cqe_size == 32,
	      "honest: SRQ %u/%u CQ %u/%u", srq_ans.log_depth,
	      srq_ans.wqe_shift, cq_ans.log_depth, cq_ans.cqe_size);
	result("the honest answer: caps, ibv_query_qp and posts by it");
}

static void qp_lower(struct vrnic_create_qp_resp *r,
		     struct ib_uverbs_create_qp_resp *common, void *arg)
{
	r->max_send_sge = SEND_SGE;
	r->max_inline = INLINE;
	r->max_recv_sge = RECV_SGE;
	qp_ans = *r;
}

static void srq_lower(struct vrnic_create_srq_resp *r,
		      struct ib_uverbs_create_srq_resp *common, void *arg)
{
	r->max_sge = SRQ_SGE;
}

static void test_lower(void)
{
	struct stub_answer lower = { .qp = qp_lower, .srq = srq_lower };
	struct ibv_qp_cap want = {
		.max_send_wr = SEND_WR, .max_recv_wr = RECV_WR,
		.max_send_sge = SEND_SGE, .max_recv_sge = RECV_SGE,
		.max_inline_data = INLINE,
	};
	static const struct rewrite mark = { "lower", 0, NONE, 0, 0 };

	rw = &mark;	/* ibv_query_qp answers the kernel's, not this */
	stub_set_answer(&lower);
	check_qp("lower", &want);
	check_qp_ex("lower", &want);
	check_srq("lower", SRQ_WR, SRQ_SGE);
	stub_set_answer(&answer);
	rw = NULL;
	result("limits below the common response's: the driver answer rules");
}

/* ------------------------------------------------------------ 3, 4, 5 */

#define QPF(f)	offsetof(struct vrnic_create_qp_resp, f)
#define CQF(f)	offsetof(struct vrnic_create_cq_resp, f)
#define SRQF(f)	offsetof(struct vrnic_create_srq_resp, f)

static const struct rewrite cq_cases[] = {
	{ "log_depth + 1: beyond the ring", CQF(log_depth), ADD, 1, EINVAL },
	{ "log_depth - 1: fewer than asked", CQF(log_depth), ADD, -1, EINVAL },
	{ "log_depth 0", CQF(log_depth), SET, 0, EINVAL },
	{ "log_depth 16", CQF(log_depth), SET, 16, EINVAL },
	{ "log_depth 32", CQF(log_depth), SET, 32, EINVAL },
	{ "log_depth 0xffffffff", CQF(log_depth), SET, ~0u, EINVAL },
	{ "cqe_size 64", CQF(cqe_size), SET, 64, EOPNOTSUPP },
	{ "cqe_size 16", CQF(cqe_size), SET, 16, EOPNOTSUPP },
	{ "cqe_size 0", CQF(cqe_size), SET, 0, EOPNOTSUPP },
};

static const struct rewrite qp_cases[] = {
	{ "sq_log_depth + 1: beyond the ring", QPF(sq_log_depth), ADD, 1, EINVAL },
	{ "sq_wqe_shift + 1: beyond the ring", QPF(sq_wqe_shift), ADD, 1, EINVAL },
	{ "rq_log_depth + 1: beyond the ring", QPF(rq_log_depth), ADD, 1, EINVAL },
	{ "rq_wqe_shift + 1: beyond the ring", QPF(rq_wqe_shift), ADD, 1, EINVAL },
	{ "sq_log_depth - 1: fewer than asked", QPF(sq_log_depth), ADD, -1, EINVAL },
	{ "rq_log_depth - 1: fewer than asked", QPF(rq_log_depth), ADD, -1, EINVAL },
	{ "sq_log_depth 32", QPF(sq_log_depth), SET, 32, EINVAL },
	{ "sq_log_depth 0xffffffff", QPF(sq_log_depth), SET, ~0u, EINVAL },
	{ "sq_wqe_shift 64", QPF(sq_wqe_shift), SET, 64, EINVAL },
	{ "rq_wqe_shift 40", QPF(rq_wqe_shift), SET, 40, EINVAL },
	{ "sq_wqe_shift 0", QPF(sq_wqe_shift), SET, 0, EINVAL },
	{ "rq_wqe_shift 0", QPF(rq_wqe_shift), SET, 0, EINVAL },
	{ "max_send_sge one beyond the stride", QPF(max_send_sge), SEND_SGE_FILL, 0, EINVAL },
	{ "max_inline one byte beyond the stride", QPF(max_inline), INLINE_FILL, 0, EINVAL },
	{ "max_recv_sge one beyond the stride", QPF(max_recv_sge), RECV_SGE_FILL, 0, EINVAL },
	{ "max_send_sge 17", QPF(max_send_sge), SET, VRNIC_MAX_SGE + 1, EINVAL },
	{ "max_send_sge 0x10000001", QPF(max_send_sge), SET, 0x10000001, EINVAL },
	{ "max_recv_sge 0xffffffff", QPF(max_recv_sge), SET, ~0u, EINVAL },
	{ "max_inline 0xffffffff", QPF(max_inline), SET, ~0u, EINVAL },
	{ "max_send_sge 1: fewer than asked", QPF(max_send_sge), SET, 1, EINVAL },
	{ "max_recv_sge 1: fewer than asked", QPF(max_recv_sge), SET, 1, EINVAL },
	{ "max_inline 8: fewer than asked", QPF(max_inline), SET, 8, EINVAL },
};

/* A QP on an SRQ: no RQ, and its RQ fields must be 0. */
static const struct rewrite no_rq_cases[] = {
	{ "no RQ, rq_log_depth 6", QPF(rq_log_depth), SET, 6, EINVAL },
	{ "no RQ, rq_wqe_shift 6", QPF(rq_wqe_shift), SET, 6, EINVAL },
	{ "no RQ, max_recv_sge 3", QPF(max_recv_sge), SET, 3, EINVAL },
	{ "no RQ, rq_log_depth 0xffffffff", QPF(rq_log_depth), SET, ~0u, EINVAL },
	{ "no RQ, sq_log_depth + 1", QPF(sq_log_depth), ADD, 1, EINVAL },
};

static const struct rewrite srq_cases[] = {
	{ "log_depth + 1: beyond the ring", SRQF(log_depth), ADD, 1, EINVAL },
	{ "wqe_shift + 1: beyond the ring", SRQF(wqe_shift), ADD, 1, EINVAL },
	{ "log_depth - 1: fewer than asked", SRQF(log_depth), ADD, -1, EINVAL },
	{ "log_depth 32", SRQF(log_depth), SET, 32, EINVAL },
	{ "wqe_shift 64", SRQF(wqe_shift), SET, 64, EINVAL },
	{ "wqe_shift 4: below a receive WQE", SRQF(wqe_shift), SET, 4, EINVAL },
	{ "max_sge one beyond the stride", SRQF(max_sge), SRQ_SGE_FILL, 0, EINVAL },
	{ "max_sge 17", SRQF(max_sge), SET, VRNIC_MAX_SGE + 1, EINVAL },
	{ "max_sge 0xffffffff", SRQF(max_sge), SET, ~0u, EINVAL },
	{ "max_sge 1: fewer than asked", SRQF(max_sge), SET, 1, EINVAL },
};

enum kind { K_CQ, K_CQ_EX, K_QP, K_QP_NO_RQ, K_QP_EX, K_QP_EX_NO_RQ,
	    K_SRQ };

/* Create one object of kind on the answer rewritten by c: refused? */
static void refuse(enum kind kind, const struct rewrite *rc)
{
	static const char *const names[] = {
		"CQ", "CQ ex", "QP", "QP on an SRQ", "QP ex",
		"QP ex on an SRQ", "SRQ"
	};
	enum stub_obj obj = kind <= K_CQ_EX ? STUB_CQ :
			    kind == K_SRQ ? STUB_SRQ : STUB_QP;
	unsigned long destroys = stub_destroys(obj);
	unsigned int live = stub_live(obj);
	struct ibv_cq_init_attr_ex ax = { .cqe = CQE };
	struct ibv_cq_ex *cx = NULL;
	struct ibv_cq *c = NULL;
	struct ibv_srq *s = NULL;
	struct ibv_qp *qp = NULL;
	void *made;
	int err;

	rw = rc;
	errno = 0;
	switch (kind) {
	case K_CQ:
		made = c = ibv_create_cq(ctx, CQE, NULL, NULL, 0);
		break;
	case K_CQ_EX:
		made = cx = ibv_create_cq_ex(ctx, &ax);
		break;
	case K_QP:
	case K_QP_NO_RQ:
		made = qp = create_qp(kind == K_QP_NO_RQ, NULL);
		break;
	case K_QP_EX:
	case K_QP_EX_NO_RQ:
		made = qp = create_qp_ex(kind == K_QP_EX_NO_RQ, NULL);
		break;
	default:
		made = s = create_srq(NULL);
		break;
	}
	err = errno;
	rw = NULL;
	check(!made && err == rc->err, "%s %s: %s (%s), not %s", names[kind],
	      rc->what, made ? "accepted" : "refused", strerror(err),
	      strerror(rc->err));
	check(stub_destroys(obj) == destroys + !made &&
	      stub_live(obj) == live + !!made,
	      "%s %s: %lu destroy commands, %u objects left, not %lu and %u",
	      names[kind], rc->what, stub_destroys(obj) - destroys,
	      stub_live(obj), rc->err ? 1ul : 0ul, live + !rc->err);
	/* Accepted: fill its rings by the answer (ASan: beyond the ring?). */
	if (qp && !to_rts(qp)) {
		fill(qp, NULL, 0, &err);
		if (kind == K_QP || kind == K_QP_EX)
			fill(qp, NULL, 1, &err);
	}
	if (s)
		fill(NULL, s, 1, &err);
	if (cx)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cx));
	if (c)
		ibv_destroy_cq(c);
	if (qp)
		ibv_destroy_qp(qp);
	if (s)
		ibv_destroy_srq(s);
}

#define N(a)	(sizeof(a) / sizeof((a)[0]))

static void test_hostile(void)
{
	unsigned int i;

	for (i = 0; i < N(cq_cases); i++) {
		refuse(K_CQ, &cq_cases[i]);
		refuse(K_CQ_EX, &cq_cases[i]);
	}
	result("hostile CQ answers refused (EINVAL/EOPNOTSUPP), CQ destroyed");
	for (i = 0; i < N(qp_cases); i++) {
		refuse(K_QP, &qp_cases[i]);
		refuse(K_QP_EX, &qp_cases[i]);
	}
	for (i = 0; i < N(no_rq_cases); i++) {
		refuse(K_QP_NO_RQ, &no_rq_cases[i]);
		refuse(K_QP_EX_NO_RQ, &no_rq_cases[i]);
	}
	result("hostile QP answers refused (EINVAL), QP destroyed");
	for (i = 0; i < N(srq_cases); i++)
		refuse(K_SRQ, &srq_cases[i]);
	result("hostile SRQ answers refused (EINVAL), SRQ destroyed");
}

/* ------------------------------------------------------------ 6 */

static void test_comp_mask(void)
{
	/* comp_mask 0, all of ABI 1: the geometry is the answer all the same. */
	static const struct rewrite zero[] = {
		{ "comp_mask 0, sq_log_depth 30", QPF(sq_log_depth),
		  CLEAR_MASK, 30, EINVAL },
		{ "comp_mask 0, log_depth 30", CQF(log_depth), CLEAR_MASK, 30,
		  EINVAL },
		{ "comp_mask 0, log_depth 30", SRQF(log_depth), CLEAR_MASK, 30,
		  EINVAL },
	};
	/* A newer kernel's bit covers fields the provider does not read. */
	static const struct rewrite newer_qp = {
		"unknown comp_mask bit", QPF(comp_mask), SET, 1u << 31, 0
	};
	static const struct rewrite newer_cq = {
		"unknown comp_mask bit", CQF(comp_mask), SET, 1u << 31, 0
	};
	static const struct rewrite newer_srq = {
		"unknown comp_mask bit", SRQF(comp_mask), SET, 1u << 31, 0
	};
	struct ibv_qp_cap want = {
		.max_send_wr = SEND_WR, .max_recv_wr = RECV_WR,
		.max_send_sge = 4, .max_recv_sge = 3, .max_inline_data = 64,
	};

	refuse(K_QP, &zero[0]);
	refuse(K_QP_EX, &zero[0]);
	refuse(K_CQ, &zero[1]);
	refuse(K_CQ_EX, &zero[1]);
	refuse(K_SRQ, &zero[2]);
	rw = &newer_qp;
	check_qp("newer kernel", &want);
	check_qp_ex("newer kernel", &want);
	rw = &newer_srq;
	check_srq("newer kernel", SRQ_WR, 3);
	rw = &newer_cq;
	check_cq("newer kernel", CQE);
	rw = NULL;
	result("comp_mask: the geometry is always the answer, unknown bits ignored");
}

int main(void)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..6\n");
	stub_set_answer(&answer);
	ctx = stub_open_device();
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	cq = pd ? ibv_create_cq(ctx, 256, NULL, NULL, 0) : NULL;
	srq = cq ? ibv_create_srq(pd, &sa) : NULL;
	if (!srq) {
		printf("Bail out! no context, PD, CQ or SRQ on the stub: %s\n",
		       strerror(errno));
		return 1;
	}
	test_honest();
	test_lower();
	test_hostile();
	test_comp_mask();
	ibv_destroy_srq(srq);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return 0;
}

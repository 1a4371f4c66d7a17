// SPDX-License-Identifier: GPL-2.0
/*
 * Verbs conformance of the provider and the driver at the edges middleware
 * reaches (issue 15, review B.9, B.10, B.15, C.3-C.5, C.7-C.9), from one
 * guest process over loopback QPs on vrnic0.  Each test runs in a child
 * process, so that a crash (a write through NULL, a memcpy overrun) is one
 * failed result and not the end of the run.
 *
 *   vrnic_conformance [GID_INDEX]
 *
 * Output is TAP (kselftest).
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/netlink.h>

#include <infiniband/verbs.h>
#include <infiniband/vrnicdv.h>
#include <rdma/ib_user_verbs.h>

#include "vrnic-abi.h"
#include "vrnic.h"	/* the provider's private QP, for vrnicdv's checks */

#include "kselftest.h"
#include "vrnic_verbs_util.h"

#define BUF		(64 * 1024)
#define MSG		64
#define GRH		40
#define QKEY		0x11111111u
#define WAIT_S		20
#define CHILD_S		300

/* rdma_netlink.h of Linux 6.12 (the build host's may be older). */
#define VT_NL_TYPE(client, op)			(((client) << 10) + (op))
#define VT_RDMA_NL_NLDEV			5
#define VT_RDMA_NLDEV_CMD_SYS_SET		7
#define VT_RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE	96

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
};

static int gid_index = 1;

#define FAIL(...) do { ksft_print_msg(__VA_ARGS__); return 0; } while (0)

static int env_open(struct env *e)
{
	memset(e, 0, sizeof(*e));
	e->gid_index = gid_index;
	e->ctx = vt_open_device("vrnic0");
	if (!e->ctx)
		FAIL("cannot open vrnic0: %s\n", strerror(errno));
	e->buf = calloc(1, BUF);
	e->pd = ibv_alloc_pd(e->ctx);
	if (!e->buf || !e->pd || ibv_query_gid(e->ctx, 1, e->gid_index, &e->gid))
		FAIL("setup: %s\n", strerror(errno));
	e->mr = ibv_reg_mr(e->pd, e->buf, BUF, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC);
	if (!e->mr)
		FAIL("reg_mr: %s\n", strerror(errno));
	return 1;
}

/* INIT -> RTR -> RTS; dest is the peer QPN (ignored for UD). */
static int to_rts(struct env *e, struct ibv_qp *qp, uint32_t dest)
{
	struct vt_path path = {
		.mtu = IBV_MTU_1024, .rd_atomic = 1, .retry = 3, .qkey = QKEY,
		.access = qp->qp_type == IBV_QPT_UC ? IBV_ACCESS_REMOTE_WRITE :
			  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			  IBV_ACCESS_REMOTE_ATOMIC,
	};

	return vt_to_rts(qp, dest, &e->gid, e->gid_index, &path);
}

static struct ibv_qp *make_qp(struct env *e, enum ibv_qp_type type,
			      struct ibv_cq *scq, struct ibv_cq *rcq,
			      uint32_t depth, uint32_t inline_len)
{
	return vt_make_qp(e->pd, type, scq, rcq, depth, inline_len);
}

/* Poll cq until n completions arrived (all successful) or WAIT_S passed. */
static int poll_n(struct ibv_cq *cq, int n)
{
	double end = vt_now() + WAIT_S;
	struct ibv_wc wc[16];
	int got = 0, i, k;

	while (got < n && vt_now() < end) {
		k = ibv_poll_cq(cq, 16, wc);
		if (k < 0)
			FAIL("poll_cq: %d\n", k);
		for (i = 0; i < k; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				FAIL("completion %d: %s\n", got + i,
				     ibv_wc_status_str(wc[i].status));
		got += k;
		if (!k)
			usleep(1000);
	}
	if (got != n)
		FAIL("%d of %d completions\n", got, n);
	return 1;
}

/* ------------------------------------------------------- CQ depth --- */

/*
 * A CQ holds at least what was asked for, and ibv_create_cq reports its
 * true depth (review B.15, C.4: 256 gave 255).  Then a CQ is filled to its
 * reported depth by a UD QP sending to itself, unpolled: every completion
 * must be there, and none in error.
 */
static int cq_depth(struct env *e)
{
	static const int asks[] = { 1, 2, 3, 255, 256, 257, 1000, 4096 };
	struct ibv_qp *qp = NULL;
	struct ibv_cq *cq, *rcq;
	struct ibv_ah *ah;
	unsigned int i;
	int n;

	for (i = 0; i < ARRAY_SIZE(asks); i++) {
		cq = ibv_create_cq(e->ctx, asks[i], NULL, NULL, 0);
		if (!cq)
			FAIL("create_cq(%d): %s\n", asks[i], strerror(errno));
		n = cq->cqe;
		ibv_destroy_cq(cq);
		if (n < asks[i])
			FAIL("create_cq(%d) reports %d entries\n", asks[i], n);
	}

	cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	rcq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	if (!cq || !rcq)
		FAIL("create_cq: %s\n", strerror(errno));
	n = cq->cqe;
	qp = make_qp(e, IBV_QPT_UD, cq, rcq, n, 0);
	if (!qp || to_rts(e, qp, 0))
		FAIL("UD QP: %s\n", strerror(errno));
	{
		struct ibv_ah_attr aa = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = e->gid, .sgid_index = e->gid_index,
				 .hop_limit = 64 },
		};

		ah = ibv_create_ah(e->pd, &aa);
		if (!ah)
			FAIL("create_ah: %s\n", strerror(errno));
	}
	for (i = 0; i < (unsigned int)n; i++) {
		struct ibv_sge rs = {
			.addr = (uintptr_t)e->buf + 4096 + i * (GRH + MSG),
			.length = GRH + MSG, .lkey = e->mr->lkey,
		};
		struct ibv_recv_wr rwr = { .wr_id = i, .sg_list = &rs,
					   .num_sge = 1 }, *rbad;
		struct ibv_sge ss = { .addr = (uintptr_t)e->buf, .length = MSG,
				      .lkey = e->mr->lkey };
		struct ibv_send_wr swr = {
			.wr_id = i, .sg_list = &ss, .num_sge = 1,
			.opcode = IBV_WR_SEND,
			.wr.ud = { .ah = ah, .remote_qpn = qp->qp_num,
				   .remote_qkey = QKEY },
		}, *sbad;

		if (ibv_post_recv(qp, &rwr, &rbad))
			FAIL("post_recv %u\n", i);
		if (ibv_post_send(qp, &swr, &sbad))
			FAIL("post_send %u\n", i);
	}
	/* All receives done means all sends completed into the unpolled CQ. */
	if (!poll_n(rcq, n))
		FAIL("receives of a CQ filled to its reported depth %d\n", n);
	if (!poll_n(cq, n))
		FAIL("a CQ of reported depth %d did not hold %d completions\n",
		     n, n);
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	ibv_destroy_cq(cq);
	ibv_destroy_cq(rcq);
	return 1;
}

/* ------------------------------------------------------- SRQ SGEs --- */

/*
 * ibv_create_srq reports the SGE limit the kernel gave it (review C.3:
 * asking for 2 was told 3, then a post of 3 SGEs failed; asking for 0
 * failed every post).  A receive with exactly the reported number of SGEs
 * is accepted, one more is refused with EINVAL and *bad_wr set.
 */
static int srq_sge(struct env *e)
{
	static const uint32_t asks[] = { 0, 1, 2, 5 };
	struct ibv_sge sge[64];
	unsigned int i;
	uint32_t k;

	for (k = 0; k < 64; k++) {
		sge[k].addr = (uintptr_t)e->buf + k * 64;
		sge[k].length = 64;
		sge[k].lkey = e->mr->lkey;
	}
	for (i = 0; i < ARRAY_SIZE(asks); i++) {
		struct ibv_srq_init_attr ia = {
			.attr = { .max_wr = 8, .max_sge = asks[i] },
		};
		struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = sge }, *bad = NULL;
		struct ibv_srq_attr qa;
		struct ibv_srq *srq;
		int ret;

		srq = ibv_create_srq(e->pd, &ia);
		if (!srq)
			FAIL("create_srq(max_sge %u): %s\n", asks[i],
			     strerror(errno));
		if (ia.attr.max_sge < asks[i] || ia.attr.max_sge < 1 ||
		    ia.attr.max_sge > 64)
			FAIL("create_srq(max_sge %u) reports %u\n", asks[i],
			     ia.attr.max_sge);
		if (ibv_query_srq(srq, &qa) || qa.max_sge != ia.attr.max_sge)
			FAIL("query_srq: max_sge %u, create said %u\n",
			     qa.max_sge, ia.attr.max_sge);
		wr.num_sge = ia.attr.max_sge;
		ret = ibv_post_srq_recv(srq, &wr, &bad);
		if (ret)
			FAIL("max_sge %u (asked %u): a receive of %u SGEs: %s\n",
			     ia.attr.max_sge, asks[i], ia.attr.max_sge,
			     strerror(ret));
		wr.num_sge = ia.attr.max_sge + 1;
		ret = ibv_post_srq_recv(srq, &wr, &bad);
		if (ret != EINVAL || bad != &wr)
			FAIL("max_sge %u: a receive of %u SGEs: %d, bad_wr %s\n",
			     ia.attr.max_sge, wr.num_sge, ret,
			     bad == &wr ? "set" : "not set");
		/* No QP takes them: exactly the reported max_wr fit. */
		wr.num_sge = 1;
		for (k = 1; k <= 4 * ia.attr.max_wr; k++)
			if (ibv_post_srq_recv(srq, &wr, &bad))
				break;
		if (k != ia.attr.max_wr || qa.max_wr != ia.attr.max_wr)
			FAIL("max_wr %u (query %u): %u receives fit\n",
			     ia.attr.max_wr, qa.max_wr, k);
		ibv_destroy_srq(srq);
	}
	return 1;
}

/* -------------------------------------------- opcodes per QP type --- */

static int send_wr(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad = NULL;
	int ret = ibv_post_send(qp, wr, &bad);

	if (ret && bad != wr) {
		ksft_print_msg("post_send %d: *bad_wr not the refused WR\n", ret);
		return -1;
	}
	return ret;
}

/* One SEND from a to b, received and completed on both sides. */
static int moves(struct env *e, struct ibv_qp *a, struct ibv_qp *b,
		 struct ibv_cq *cq)
{
	struct ibv_sge rs = { .addr = (uintptr_t)e->buf + 8192, .length = MSG,
			      .lkey = e->mr->lkey };
	struct ibv_recv_wr rwr = { .wr_id = 7, .sg_list = &rs, .num_sge = 1 },
			   *rbad;
	struct ibv_sge ss = { .addr = (uintptr_t)e->buf, .length = MSG,
			      .lkey = e->mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 8, .sg_list = &ss, .num_sge = 1,
				   .opcode = IBV_WR_SEND };

	if (ibv_post_recv(b, &rwr, &rbad) || send_wr(a, &swr))
		FAIL("a SEND: post failed\n");
	return poll_n(cq, 2);
}

/* ------------------------------------------------------- QP caps --- */

/* Post n receives of num_sge SGEs on qp; how many were taken. */
static uint32_t fill_rq(struct ibv_qp *qp, struct ibv_sge *sge, int num_sge,
			uint32_t n)
{
	struct ibv_recv_wr wr = { .wr_id = 2, .sg_list = sge,
				  .num_sge = num_sge }, *bad;
	uint32_t k;

	for (k = 0; k < n; k++)
		if (ibv_post_recv(qp, &wr, &bad))
			break;
	return k;
}

/*
 * Odd caps (issue 15): the caps ibv_create_qp returns are at least the
 * request and are the kernel's (ibv_query_qp agrees), for RC and UD.  On
 * the UD QP they are the post-time limits: max_recv_sge and max_send_sge
 * SGEs, max_inline bytes inline pass, one more is EINVAL with *bad_wr
 * set; exactly max_recv_wr receives and max_send_wr sends fit (nothing is
 * polled; the sends carry a wrong Q_Key, so the QP's own receives stay).
 */
static int qp_caps(struct env *e)
{
	static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UD };
	const struct ibv_qp_cap want = {
		.max_send_wr = 100, .max_recv_wr = 10, .max_send_sge = 3,
		.max_recv_sge = 3, .max_inline_data = 70,
	};
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = e->gid, .sgid_index = e->gid_index,
			 .hop_limit = 64 },
	};
	struct ibv_qp_init_attr ia, qi;
	struct ibv_send_wr swr;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge[64];
	struct ibv_qp_attr qa;
	struct ibv_qp *qp = NULL;
	struct ibv_cq *cq;
	struct ibv_ah *ah;
	struct ibv_qp_cap *c = &ia.cap;
	unsigned int i;
	uint32_t k;
	int ret;

	for (k = 0; k < 64; k++) {
		sge[k].addr = (uintptr_t)e->buf + k * 128;
		sge[k].length = 8;
		sge[k].lkey = e->mr->lkey;
	}
	cq = ibv_create_cq(e->ctx, 512, NULL, NULL, 0);
	if (!cq)
		FAIL("create_cq: %s\n", strerror(errno));
	for (i = 0; i < ARRAY_SIZE(types); i++) {
		memset(&ia, 0, sizeof(ia));
		ia.qp_type = types[i];
		ia.send_cq = cq;
		ia.recv_cq = cq;
		ia.cap = want;
		ia.sq_sig_all = 1;
		if (qp)
			ibv_destroy_qp(qp);
		qp = ibv_create_qp(e->pd, &ia);
		if (!qp)
			FAIL("create_qp(type %d): %s\n", types[i], strerror(errno));
		ksft_print_msg("type %d: send_wr %u recv_wr %u send_sge %u recv_sge %u inline %u\n",
			       types[i], c->max_send_wr, c->max_recv_wr,
			       c->max_send_sge, c->max_recv_sge,
			       c->max_inline_data);
		if (c->max_send_wr < want.max_send_wr ||
		    c->max_recv_wr < want.max_recv_wr ||
		    c->max_send_sge < want.max_send_sge ||
		    c->max_recv_sge < want.max_recv_sge ||
		    c->max_inline_data < want.max_inline_data ||
		    c->max_send_sge > 64 || c->max_recv_sge > 64)
			FAIL("caps below the request or above the device's\n");
		if (ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi))
			FAIL("query_qp: %s\n", strerror(errno));
		if (memcmp(&qa.cap, c, sizeof(*c)) ||
		    memcmp(&qi.cap, c, sizeof(*c)))
			FAIL("query_qp caps: send_wr %u recv_wr %u send_sge %u recv_sge %u inline %u\n",
			     qa.cap.max_send_wr, qa.cap.max_recv_wr,
			     qa.cap.max_send_sge, qa.cap.max_recv_sge,
			     qa.cap.max_inline_data);
	}

	/* The last one, UD: the caps are the post-time limits. */
	ah = ibv_create_ah(e->pd, &aa);
	if (!ah || to_rts(e, qp, 0))
		FAIL("UD QP to RTS, AH: %s\n", strerror(errno));
	memset(&rwr, 0, sizeof(rwr));
	rwr.sg_list = sge;
	rwr.num_sge = c->max_recv_sge + 1;
	rbad = NULL;
	ret = ibv_post_recv(qp, &rwr, &rbad);
	if (ret != EINVAL || rbad != &rwr)
		FAIL("a receive of max_recv_sge + 1 SGEs: %d\n", ret);
	k = fill_rq(qp, sge, c->max_recv_sge, 4 * c->max_recv_wr);
	if (k != c->max_recv_wr)
		FAIL("%u receives of %u SGEs fit, not max_recv_wr %u\n", k,
		     c->max_recv_sge, c->max_recv_wr);

	memset(&swr, 0, sizeof(swr));
	swr.sg_list = sge;
	swr.opcode = IBV_WR_SEND;
	swr.wr.ud.ah = ah;
	swr.wr.ud.remote_qpn = qp->qp_num;
	swr.wr.ud.remote_qkey = QKEY ^ 1;	/* dropped by the receiver */
	swr.num_sge = c->max_send_sge + 1;
	if (send_wr(qp, &swr) != EINVAL)
		FAIL("a send of max_send_sge + 1 SGEs not refused\n");
	swr.send_flags = IBV_SEND_INLINE;
	swr.num_sge = 1;
	sge[0].length = c->max_inline_data + 1;
	if (send_wr(qp, &swr) != EINVAL)
		FAIL("%u bytes inline not refused\n", sge[0].length);
	sge[0].length = c->max_inline_data;
	ret = send_wr(qp, &swr);
	if (ret)
		FAIL("%u bytes inline: %d\n", sge[0].length, ret);
	sge[0].length = 8;
	swr.send_flags = 0;
	swr.num_sge = c->max_send_sge;
	ret = send_wr(qp, &swr);
	if (ret)
		FAIL("a send of max_send_sge %u SGEs: %d\n", c->max_send_sge, ret);
	swr.num_sge = 1;
	for (k = 2; k < 4 * c->max_send_wr; k++)
		if (send_wr(qp, &swr))
			break;
	if (k != c->max_send_wr)
		FAIL("%u sends fit, not max_send_wr %u\n", k, c->max_send_wr);
	ibv_destroy_qp(qp);
	ibv_destroy_ah(ah);
	ibv_destroy_cq(cq);
	return 1;
}

static int refused(struct ibv_qp *qp, const char *what,
		   enum ibv_wr_opcode op, unsigned int flags, uint64_t raddr,
		   uint32_t rkey, uint64_t laddr, uint32_t lkey)
{
	struct ibv_sge sge = { .addr = laddr, .length = 8, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = 0xbad, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = flags,
	};
	int ret;

	if (op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ret = send_wr(qp, &wr);
	if (ret != EINVAL)
		FAIL("%s: post_send returned %d, not EINVAL\n", what, ret);
	return 1;
}

/*
 * ibv_bind_mw() goes through the same post-time check: a UD QP has no
 * window binds, and a bind takes only SIGNALED and FENCE.  (Before, it
 * posted both; the device failed the bind and the QP went to ERR.)
 */
static int bind_refused(struct env *e, struct ibv_cq *cq)
{
	struct ibv_mw_bind b = {
		.wr_id = 0xb1, .send_flags = IBV_SEND_SIGNALED,
		.bind_info = { .mr = e->mr, .addr = (uintptr_t)e->buf,
			       .length = 64,
			       .mw_access_flags = IBV_ACCESS_REMOTE_WRITE },
	};
	struct ibv_qp *ud = make_qp(e, IBV_QPT_UD, cq, cq, 8, 0), *rc;
	struct ibv_mw *mw = ibv_alloc_mw(e->pd, IBV_MW_TYPE_1);
	int ret, ok = 1;

	rc = make_qp(e, IBV_QPT_RC, cq, cq, 8, 0);
	if (!mw)
		FAIL("alloc_mw type 1: %s\n", strerror(errno));
	if (!ud || !rc || to_rts(e, ud, 0) || to_rts(e, rc, rc->qp_num))
		FAIL("QPs for bind_mw: %s\n", strerror(errno));
	ret = ibv_bind_mw(ud, mw, &b);
	if (ret != EINVAL) {
		ksft_print_msg("ud bind_mw: %d, not EINVAL\n", ret);
		ok = 0;
	}
	b.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ret = ibv_bind_mw(rc, mw, &b);
	if (ret != EINVAL) {
		ksft_print_msg("rc bind_mw with INLINE: %d, not EINVAL\n", ret);
		ok = 0;
	}
	ibv_destroy_qp(ud);
	ibv_destroy_qp(rc);
	ibv_dealloc_mw(mw);
	return ok;
}

/*
 * Review C.5: operations a QP type cannot carry, and IBV_SEND_INLINE on
 * anything but SEND and RDMA WRITE, were accepted at post time; the device
 * then failed the WQE and the QP went to ERR.  IBA and rxe refuse them
 * with EINVAL and *bad_wr set.  Afterwards both QPs still move a SEND.
 * A chain stops at its first bad WR: the good one before it is posted.
 */
static int opcodes(struct env *e)
{
	uint64_t la = (uintptr_t)e->buf + 1024, ra = (uintptr_t)e->buf + 2048;
	uint32_t lk = e->mr->lkey, rk = e->mr->rkey;
	struct ibv_qp *rc[2], *uc[2];
	struct ibv_cq *cq;
	int ok = 1;

	cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	if (!cq)
		FAIL("create_cq: %s\n", strerror(errno));
	rc[0] = make_qp(e, IBV_QPT_RC, cq, cq, 8, 64);
	rc[1] = make_qp(e, IBV_QPT_RC, cq, cq, 8, 64);
	uc[0] = make_qp(e, IBV_QPT_UC, cq, cq, 8, 64);
	uc[1] = make_qp(e, IBV_QPT_UC, cq, cq, 8, 64);
	if (!rc[0] || !rc[1] || !uc[0] || !uc[1] ||
	    to_rts(e, rc[0], rc[1]->qp_num) || to_rts(e, rc[1], rc[0]->qp_num) ||
	    to_rts(e, uc[0], uc[1]->qp_num) || to_rts(e, uc[1], uc[0]->qp_num))
		FAIL("QPs: %s\n", strerror(errno));

	ok &= refused(uc[0], "uc READ", IBV_WR_RDMA_READ, 0, ra, rk, la, lk);
	ok &= refused(uc[0], "uc CMP_SWP", IBV_WR_ATOMIC_CMP_AND_SWP, 0, ra,
		      rk, la, lk);
	ok &= refused(uc[0], "uc FETCH_ADD", IBV_WR_ATOMIC_FETCH_AND_ADD, 0,
		      ra, rk, la, lk);
	ok &= refused(uc[0], "uc SEND_WITH_INV", IBV_WR_SEND_WITH_INV, 0, 0, 0,
		      la, lk);
	ok &= refused(rc[0], "rc READ|INLINE", IBV_WR_RDMA_READ,
		      IBV_SEND_INLINE, ra, rk, la, lk);
	ok &= refused(rc[0], "rc CMP_SWP|INLINE", IBV_WR_ATOMIC_CMP_AND_SWP,
		      IBV_SEND_INLINE, ra, rk, la, lk);
	ok &= refused(rc[0], "rc FETCH_ADD|INLINE",
		      IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_SEND_INLINE, ra, rk,
		      la, lk);
	ok &= refused(rc[0], "rc LOCAL_INV|INLINE", IBV_WR_LOCAL_INV,
		      IBV_SEND_INLINE, 0, 0, la, lk);
	ok &= refused(rc[0], "rc SEND|IP_CSUM", IBV_WR_SEND, IBV_SEND_IP_CSUM,
		      0, 0, la, lk);
	ok &= refused(rc[0], "rc opcode 0x7f", (enum ibv_wr_opcode)0x7f, 0, 0,
		      0, la, lk);
	ok &= bind_refused(e, cq);
	if (!ok)
		return 0;
	{
		/* A good SEND, then a READ: the SEND goes, the READ is bad. */
		struct ibv_sge rs = { .addr = (uintptr_t)e->buf + 8192,
				      .length = MSG, .lkey = lk };
		struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &rs,
					   .num_sge = 1 }, *rbad;
		struct ibv_sge s1 = { .addr = (uintptr_t)e->buf, .length = MSG,
				      .lkey = lk };
		struct ibv_sge s2 = { .addr = la, .length = 8, .lkey = lk };
		struct ibv_send_wr w2 = { .wr_id = 11, .sg_list = &s2,
					  .num_sge = 1,
					  .opcode = IBV_WR_RDMA_READ,
					  .wr.rdma = { ra, rk } };
		struct ibv_send_wr w1 = { .wr_id = 10, .sg_list = &s1,
					  .num_sge = 1, .opcode = IBV_WR_SEND,
					  .next = &w2 }, *bad = NULL;
		int ret;

		if (ibv_post_recv(uc[1], &rwr, &rbad))
			FAIL("post_recv\n");
		ret = ibv_post_send(uc[0], &w1, &bad);
		if (ret != EINVAL || bad != &w2)
			FAIL("uc chain SEND, READ: %d, bad_wr %s\n", ret,
			     bad == &w2 ? "the READ" :
			     bad == &w1 ? "the SEND" : "other");
		if (!poll_n(cq, 2))
			FAIL("uc chain: the SEND before the bad WR did not move\n");
	}
	if (!moves(e, rc[0], rc[1], cq) || !moves(e, uc[0], uc[1], cq))
		FAIL("a QP that refused WRs no longer moves a SEND\n");
	ibv_destroy_qp(rc[0]);
	ibv_destroy_qp(rc[1]);
	ibv_destroy_qp(uc[0]);
	ibv_destroy_qp(uc[1]);
	ibv_destroy_cq(cq);
	return 1;
}

/* The same through ibv_wr_*: at create time and at wr_complete. */
static int opcodes_ex(struct env *e)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = e->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND |
				  IBV_QP_EX_WITH_RDMA_READ,
	};
	struct ibv_qp_ex *qx;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	int ret;

	cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	if (!cq)
		FAIL("create_cq: %s\n", strerror(errno));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	qp = ibv_create_qp_ex(e->ctx, &ia);
	if (qp)
		FAIL("a UC QP with IBV_QP_EX_WITH_RDMA_READ was created\n");
	if (errno != EOPNOTSUPP && errno != EINVAL)
		FAIL("UC QP with READ: errno %d\n", errno);

	ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
	qp = ibv_create_qp_ex(e->ctx, &ia);
	if (!qp || to_rts(e, qp, qp->qp_num))
		FAIL("UC QP ex: %s\n", strerror(errno));
	qx = ibv_qp_to_qp_ex(qp);
	/* READ on UC: not an operation of the type. */
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = 0;
	ibv_wr_rdma_read(qx, e->mr->rkey, (uintptr_t)e->buf);
	ibv_wr_set_sge(qx, e->mr->lkey, (uintptr_t)e->buf + 64, 8);
	ret = ibv_wr_complete(qx);
	if (ret != EINVAL)
		FAIL("ibv_wr_rdma_read on UC: wr_complete %d\n", ret);
	/* Inline data on a READ: refused (on RC, where READ is valid). */
	ibv_destroy_qp(qp);
	ia.qp_type = IBV_QPT_RC;
	ia.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
	qp = ibv_create_qp_ex(e->ctx, &ia);
	if (!qp || to_rts(e, qp, qp->qp_num))
		FAIL("RC QP ex: %s\n", strerror(errno));
	qx = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(qx);
	qx->wr_id = 2;
	qx->wr_flags = 0;
	ibv_wr_rdma_read(qx, e->mr->rkey, (uintptr_t)e->buf);
	ibv_wr_set_inline_data(qx, e->buf + 64, 8);
	ret = ibv_wr_complete(qx);
	if (ret != EINVAL)
		FAIL("ibv_wr_set_inline_data on a READ: wr_complete %d\n", ret);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	return 1;
}

/* --------------------------------------------- XRC receive QPs --- */

/*
 * Review C.8: ibv_post_send on an XRC receive QP, or on an ibv_open_qp
 * handle of one, wrote through NULL (it has no send queue in the
 * process).  Both post_send and post_recv return EINVAL with *bad_wr set,
 * in RTS too; so does post_recv on an XRC send QP (no receive queue).
 */
static int xrc_recv_post(struct env *e)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1, .oflags = O_CREAT,
	};
	struct ibv_sge sge = { .addr = (uintptr_t)e->buf, .length = MSG,
			       .lkey = e->mr->lkey };
	struct ibv_send_wr swr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				   .opcode = IBV_WR_SEND }, *sbad;
	struct ibv_recv_wr rwr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1 },
			   *rbad;
	struct ibv_qp *tgt, *handle, *ini, *qps[2];
	struct ibv_qp_init_attr_ex ia;
	struct ibv_qp_open_attr oa;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct ibv_xrcd *xrcd;
	struct ibv_cq *cq;
	int i, ret;

	cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	xrcd = ibv_open_xrcd(e->ctx, &xa);
	if (!cq || !xrcd)
		FAIL("cq/xrcd: %s\n", strerror(errno));
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_RECV;
	ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	ia.xrcd = xrcd;
	tgt = ibv_create_qp_ex(e->ctx, &ia);
	if (!tgt || to_rts(e, tgt, tgt->qp_num))
		FAIL("XRC receive QP to RTS: %s\n", strerror(errno));
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
		       IBV_QP_OPEN_ATTR_TYPE;
	oa.qp_num = tgt->qp_num;
	oa.xrcd = xrcd;
	oa.qp_type = IBV_QPT_XRC_RECV;
	handle = ibv_open_qp(e->ctx, &oa);
	/* Learn the state through the handle: it is RTS. */
	if (!handle || ibv_query_qp(handle, &qa, IBV_QP_STATE, &qia) ||
	    handle->state != IBV_QPS_RTS)
		FAIL("open_qp: %s\n", strerror(errno));
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_SEND;
	ia.comp_mask = IBV_QP_INIT_ATTR_PD;
	ia.pd = e->pd;
	ia.send_cq = cq;
	ia.cap.max_send_wr = 4;
	ia.cap.max_send_sge = 1;
	ini = ibv_create_qp_ex(e->ctx, &ia);
	if (!ini)
		FAIL("XRC send QP: %s\n", strerror(errno));

	qps[0] = tgt;
	qps[1] = handle;
	for (i = 0; i < 2; i++) {
		sbad = NULL;
		ret = ibv_post_send(qps[i], &swr, &sbad);
		if (ret != EINVAL || sbad != &swr)
			FAIL("post_send on an XRC receive QP%s: %d\n",
			     i ? " handle" : "", ret);
		rbad = NULL;
		ret = ibv_post_recv(qps[i], &rwr, &rbad);
		if (ret != EINVAL || rbad != &rwr)
			FAIL("post_recv on an XRC receive QP%s: %d\n",
			     i ? " handle" : "", ret);
	}
	rbad = NULL;
	ret = ibv_post_recv(ini, &rwr, &rbad);
	if (ret != EINVAL || rbad != &rwr)
		FAIL("post_recv on an XRC send QP: %d\n", ret);
	ibv_destroy_qp(ini);
	ibv_destroy_qp(handle);
	ibv_destroy_qp(tgt);
	ibv_close_xrcd(xrcd);
	ibv_destroy_cq(cq);
	return 1;
}

/*
 * Cold review of S2: modify_qp and query_qp take the QP's state mutex,
 * which create_qp set up only after the XRC target path had returned.
 * Two processes modifying and querying one XRC receive QP at once then
 * contended on an uninitialised mutex (a NULL wait list: an oops).
 */
static int xrc_recv_modify_query(struct env *e)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1, .oflags = O_CREAT,
	};
	struct ibv_qp_init_attr_ex ia;
	struct ibv_xrcd *xrcd;
	struct ibv_qp *tgt;
	pid_t pids[2];
	int i, st, ok = 1;

	xrcd = ibv_open_xrcd(e->ctx, &xa);
	if (!xrcd)
		FAIL("xrcd: %s\n", strerror(errno));
	memset(&ia, 0, sizeof(ia));
	ia.qp_type = IBV_QPT_XRC_RECV;
	ia.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	ia.xrcd = xrcd;
	tgt = ibv_create_qp_ex(e->ctx, &ia);
	if (!tgt || to_rts(e, tgt, tgt->qp_num))
		FAIL("XRC receive QP to RTS: %s\n", strerror(errno));
	for (i = 0; i < 2; i++) {
		pids[i] = fork();
		if (pids[i] < 0)
			FAIL("fork: %s\n", strerror(errno));
		if (!pids[i]) {
			struct ibv_qp_attr qa = {
				.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
			};
			struct ibv_qp_init_attr qia;
			double end = vt_now() + 3;
			int ret = 0;

			while (!ret && vt_now() < end)
				ret = i ? ibv_query_qp(tgt, &qa, IBV_QP_STATE, &qia) :
					  ibv_modify_qp(tgt, &qa, IBV_QP_ACCESS_FLAGS);
			_exit(ret ? 1 : 0);
		}
	}
	for (i = 0; i < 2; i++) {
		if (waitpid(pids[i], &st, 0) != pids[i] || !WIFEXITED(st) ||
		    WEXITSTATUS(st)) {
			ksft_print_msg("%s failed\n", i ? "query_qp" : "modify_qp");
			ok = 0;
		}
	}
	ibv_destroy_qp(tgt);
	ibv_close_xrcd(xrcd);
	return ok;
}

/* ---------------------------------------------------- inline sums --- */

/*
 * Review C.9: the inline length check added lengths in 32 bits, so
 * { 8, 0xfffffffc } summed to 4, passed, and memcpy ran off the buffer.
 * Both post_send and ibv_wr_set_inline_data_list must say EINVAL.
 */
static int inline_wrap(struct env *e)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 2,
			 .max_recv_sge = 1, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = e->pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND,
	};
	struct ibv_sge sge[2] = {
		{ .addr = (uintptr_t)e->buf, .length = 8, .lkey = e->mr->lkey },
		{ .addr = (uintptr_t)e->buf + 8, .length = 0xfffffffcu,
		  .lkey = e->mr->lkey },
	};
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = sge, .num_sge = 2,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_INLINE };
	struct ibv_data_buf db[2] = {
		{ .addr = e->buf, .length = 8 },
		{ .addr = e->buf + 8, .length = SIZE_MAX - 3 },
	};
	struct ibv_qp_ex *qx;
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	int ret;

	cq = ibv_create_cq(e->ctx, 16, NULL, NULL, 0);
	if (!cq)
		FAIL("create_cq: %s\n", strerror(errno));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	qp = ibv_create_qp_ex(e->ctx, &ia);
	if (!qp || to_rts(e, qp, qp->qp_num))
		FAIL("RC QP: %s\n", strerror(errno));
	ret = send_wr(qp, &wr);
	if (ret != EINVAL)
		FAIL("inline { 8, 0xfffffffc }: post_send %d\n", ret);
	sge[0].length = 0xffffffffu;
	sge[1].length = 2;
	ret = send_wr(qp, &wr);
	if (ret != EINVAL)
		FAIL("inline { 0xffffffff, 2 }: post_send %d\n", ret);
	qx = ibv_qp_to_qp_ex(qp);
	ibv_wr_start(qx);
	qx->wr_id = 2;
	qx->wr_flags = 0;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data_list(qx, 2, db);
	ret = ibv_wr_complete(qx);
	if (ret != EINVAL)
		FAIL("ibv_wr_set_inline_data_list { 8, SIZE_MAX - 3 }: %d\n",
		     ret);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	return 1;
}

/* ------------------------------------------- create_cq_ex, errno --- */

/*
 * Review C.7, C.11: ibv_create_cq_ex refused the hint
 * IBV_CREATE_CQ_ATTR_SINGLE_THREADED (comp_mask FLAGS).  It is accepted
 * and the CQ works; IGNORE_OVERRUN, which vrnic does not do, is refused
 * with errno set.  Every refusal below sets errno.
 */
static int cq_ex_flags(struct env *e)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 32,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS,
		.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
	};
	struct ibv_poll_cq_attr pa = {};
	struct ibv_qp_init_attr qa = {};
	struct ibv_srq_init_attr sa = {};
	struct ibv_cq_ex *cqx;
	struct ibv_qp *qp;

	cqx = ibv_create_cq_ex(e->ctx, &ca);
	if (!cqx)
		FAIL("create_cq_ex(SINGLE_THREADED): %s\n", strerror(errno));
	if (ibv_cq_ex_to_cq(cqx)->cqe < 32)
		FAIL("create_cq_ex(32) reports %d\n", ibv_cq_ex_to_cq(cqx)->cqe);
	if (ibv_start_poll(cqx, &pa) != ENOENT)
		FAIL("an empty CQ polled something\n");
	ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));

	ca.flags = IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
	errno = 0;
	cqx = ibv_create_cq_ex(e->ctx, &ca);
	if (cqx || !errno)
		FAIL("create_cq_ex(IGNORE_OVERRUN): %p, errno %d\n",
		     (void *)cqx, errno);

	errno = 0;
	if (ibv_create_cq(e->ctx, 0, NULL, NULL, 0) || errno != EINVAL)
		FAIL("create_cq(0): errno %d\n", errno);
	errno = 0;
	if (ibv_create_cq(e->ctx, 1 << 30, NULL, NULL, 0) || !errno)
		FAIL("create_cq(2^30): errno %d\n", errno);
	qa.qp_type = IBV_QPT_RC;
	qa.send_cq = ibv_create_cq(e->ctx, 4, NULL, NULL, 0);
	qa.recv_cq = qa.send_cq;
	if (!qa.send_cq)
		FAIL("create_cq: %s\n", strerror(errno));
	qa.cap.max_send_wr = 1u << 30;
	qa.cap.max_send_sge = 1;
	errno = 0;
	qp = ibv_create_qp(e->pd, &qa);
	if (qp || !errno)
		FAIL("create_qp(2^30 WRs): errno %d\n", errno);
	errno = 0;
	sa.attr.max_wr = 0;
	if (ibv_create_srq(e->pd, &sa) || !errno)
		FAIL("create_srq(0 WRs): errno %d\n", errno);
	ibv_destroy_cq(qa.send_cq);
	return 1;
}

/* ------------------------------------------------------------ uAPI --- */

struct raw_ctx {
	int fd;
	int async_fd;
	struct vrnic_alloc_ucontext_resp resp;
};

/* The uverbs character device of vrnic0, opened anew (no context yet). */
static int open_uverbs(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	char path[128] = "";
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "vrnic0"))
			snprintf(path, sizeof(path), "/dev/infiniband/%s",
				 list[i]->dev_name);
	if (list)
		ibv_free_device_list(list);
	return path[0] ? open(path, O_RDWR | O_CLOEXEC) : -1;
}

/*
 * GET_CONTEXT by hand, with the driver request req and, when extra is
 * set, 8 more request bytes holding *extra.  0 or the errno of write().
 */
static int raw_get_context(struct raw_ctx *c,
			   const struct vrnic_alloc_ucontext_req *req,
			   const uint64_t *extra)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_get_context cmd;
		struct vrnic_alloc_ucontext_req req;
		uint64_t extra;
	} m;
	struct {
		struct ib_uverbs_get_context_resp r;
		struct vrnic_alloc_ucontext_resp d;
	} r;
	size_t len = extra ? sizeof(m) : offsetof(typeof(m), extra);

	memset(&m, 0, sizeof(m));
	memset(&r, 0, sizeof(r));
	m.hdr.command = IB_USER_VERBS_CMD_GET_CONTEXT;
	m.hdr.in_words = len / 4;
	m.hdr.out_words = sizeof(r) / 4;
	m.cmd.response = (uintptr_t)&r;
	m.req = *req;
	if (extra)
		m.extra = *extra;
	c->async_fd = -1;
	c->fd = open_uverbs();
	if (c->fd < 0)
		return -1;
	if (write(c->fd, &m, len) != (ssize_t)len)
		return errno;
	c->async_fd = r.r.async_fd;
	c->resp = r.d;
	return 0;
}

static void raw_close(struct raw_ctx *c)
{
	if (c->async_fd >= 0)
		close(c->async_fd);
	if (c->fd >= 0)
		close(c->fd);
}

/*
 * CREATE_CQ by hand on c with driver command cq (+ 8 bytes *extra); with
 * out set, the driver response is read into *out, offering the kernel
 * out_len bytes for it (an older provider offered 8).
 */
static int raw_create_cq_out(struct raw_ctx *c,
			     const struct vrnic_create_cq_cmd *cq,
			     const uint64_t *extra, uint32_t *cqe,
			     struct vrnic_create_cq_resp *out, size_t out_len)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_cq cmd;
		struct vrnic_create_cq_cmd drv;
		uint64_t extra;
	} m;
	struct {
		struct ib_uverbs_create_cq_resp r;
		struct vrnic_create_cq_resp d;
	} r;
	size_t len = extra ? sizeof(m) : offsetof(typeof(m), extra);

	memset(&m, 0, sizeof(m));
	memset(&r, 0, sizeof(r));
	m.hdr.command = IB_USER_VERBS_CMD_CREATE_CQ;
	m.hdr.in_words = len / 4;
	m.hdr.out_words = (sizeof(r.r) + (out ? out_len : sizeof(r.d))) / 4;
	m.cmd.response = (uintptr_t)&r;
	m.cmd.cqe = 2;
	m.cmd.comp_channel = -1;
	m.drv = *cq;
	if (extra)
		m.extra = *extra;
	if (write(c->fd, &m, len) != (ssize_t)len)
		return errno;
	if (out) {
		*cqe = r.r.cqe;
		*out = r.d;
	}
	return 0;
}

static int raw_create_cq(struct raw_ctx *c, const struct vrnic_create_cq_cmd *cq,
			 const uint64_t *extra)
{
	return raw_create_cq_out(c, cq, extra, NULL, NULL, 0);
}

/*
 * Review B.10: the ucontext request had no comp_mask, requests were read
 * with min(sizeof, inlen) and trailing bytes and reserved fields never
 * checked, so no field could ever be added.  Now: an unknown comp_mask
 * bit or non-zero trailing bytes are EOPNOTSUPP, a reserved field EINVAL;
 * zero trailing bytes (a newer provider asking nothing new) are accepted,
 * and the response carries comp_mask 0 (no device spec version: optional
 * features are comp_mask bits).
 */
static int uapi_checks(struct env *e)
{
	struct vrnic_alloc_ucontext_req req = {};
	struct vrnic_create_cq_cmd cq = {};
	uint64_t one = 1, zero = 0;
	struct raw_ctx c;
	void *ring;
	int ret;

	(void)e;
	req.comp_mask = 1u << 31;
	ret = raw_get_context(&c, &req, NULL);
	raw_close(&c);
	if (ret != EOPNOTSUPP)
		FAIL("ucontext comp_mask bit 31: %d, not EOPNOTSUPP\n", ret);
	req.comp_mask = 0;
	req.reserved = 1;
	ret = raw_get_context(&c, &req, NULL);
	raw_close(&c);
	if (ret != EINVAL)
		FAIL("ucontext reserved 1: %d, not EINVAL\n", ret);
	req.reserved = 0;
	ret = raw_get_context(&c, &req, &one);
	raw_close(&c);
	if (ret != EOPNOTSUPP)
		FAIL("ucontext trailing bytes 1: %d, not EOPNOTSUPP\n", ret);
	ret = raw_get_context(&c, &req, &zero);
	if (ret)
		FAIL("ucontext with zero trailing bytes: %s\n", strerror(ret));
	if (c.resp.comp_mask & ~VRNIC_ALLOC_UCTX_RESP_MASK_ALL ||
	    c.resp.reserved || c.resp.reserved1 || !c.resp.db_page_size)
		FAIL("ucontext response: comp_mask 0x%x reserved 0x%x 0x%x "
		     "page %u\n", c.resp.comp_mask, c.resp.reserved,
		     c.resp.reserved1, c.resp.db_page_size);

	/* A CQ whose rings would be fine: only the ABI checks refuse it. */
	if (posix_memalign(&ring, 4096, 8192))
		FAIL("posix_memalign\n");
	memset(ring, 0, 8192);
	cq.buf_addr = (uintptr_t)ring;
	cq.dbrec_addr = (uintptr_t)ring + 4096;
	cq.log_depth = 1;
	cq.reserved = 1;
	ret = raw_create_cq(&c, &cq, NULL);
	if (ret != EINVAL)
		FAIL("create_cq reserved 1: %d, not EINVAL\n", ret);
	cq.reserved = 0;
	ret = raw_create_cq(&c, &cq, &one);
	if (ret != EOPNOTSUPP)
		FAIL("create_cq trailing bytes 1: %d, not EOPNOTSUPP\n", ret);
	ret = raw_create_cq(&c, &cq, &zero);
	if (ret)
		FAIL("create_cq, zero trailing bytes: %s\n", strerror(ret));
	raw_close(&c);
	free(ring);
	return 1;
}

/*
 * The create responses carry the geometry the kernel programmed (issue 15:
 * the provider no longer recomputes it).  By hand: a CQ's response has
 * comp_mask 0 (the geometry is always there), its log depth and CQE size,
 * and agrees with the common response's cqe; a shorter response buffer
 * gets its CQ and no byte beyond it.
 */
static int uapi_geometry(struct env *e)
{
	struct vrnic_alloc_ucontext_req req = {};
	struct vrnic_create_cq_cmd cq = {};
	struct vrnic_create_cq_resp d;
	struct raw_ctx c;
	uint32_t cqe;
	uint8_t *ring;
	int ret;

	(void)e;
	ring = aligned_alloc(4096, 3 * 4096);
	if (!ring)
		FAIL("aligned_alloc\n");
	memset(ring, 0, 3 * 4096);
	ret = raw_get_context(&c, &req, NULL);
	if (ret)
		FAIL("get_context: %s\n", strerror(ret));
	cq.buf_addr = (uintptr_t)ring;
	cq.dbrec_addr = (uintptr_t)ring + 2 * 4096;
	cq.log_depth = 7;	/* 128 CQEs, 4 KiB, for 2 asked */
	ret = raw_create_cq_out(&c, &cq, NULL, &cqe, &d, sizeof(d));
	if (ret)
		FAIL("create_cq: %s\n", strerror(ret));
	ksft_print_msg("create_cq: comp_mask 0x%x log_depth %u cqe_size %u, cqe %u\n",
		       d.comp_mask, d.log_depth, d.cqe_size, cqe);
	if (d.comp_mask || d.log_depth != 7 || d.cqe_size != 32 || cqe != 128)
		FAIL("create_cq: not the geometry programmed\n");
	/* raw_create_cq_out() zeroes the response before the command. */
	cq.buf_addr = (uintptr_t)ring + 4096;
	ret = raw_create_cq_out(&c, &cq, NULL, &cqe, &d, 8);
	if (ret)
		FAIL("create_cq with an 8-byte response: %s\n", strerror(ret));
	if (d.comp_mask || d.log_depth || d.cqe_size || cqe != 128)
		FAIL("create_cq, 8-byte response: comp_mask 0x%x, wrote past it (%u %u) or cqe %u\n",
		     d.comp_mask, d.log_depth, d.cqe_size, cqe);
	raw_close(&c);
	free(ring);
	return 1;
}

/* A raw uverbs write command: 0 or errno. */
static int raw_write(struct raw_ctx *c, void *m, size_t len)
{
	return write(c->fd, m, len) == (ssize_t)len ? 0 : errno;
}

static int raw_alloc_pd(struct raw_ctx *c, uint32_t *pd)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_alloc_pd cmd;
	} m = {};
	struct ib_uverbs_alloc_pd_resp r = {};
	int ret;

	m.hdr.command = IB_USER_VERBS_CMD_ALLOC_PD;
	m.hdr.in_words = sizeof(m) / 4;
	m.hdr.out_words = sizeof(r) / 4;
	m.cmd.response = (uintptr_t)&r;
	ret = raw_write(c, &m, sizeof(m));
	*pd = r.pd_handle;
	return ret;
}

/* CREATE_CQ of 2 entries on ring (8 KiB); its handle in *cq. */
static int raw_cq_handle(struct raw_ctx *c, uint8_t *ring, uint32_t *cq)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_cq cmd;
		struct vrnic_create_cq_cmd drv;
	} m = {};
	struct {
		struct ib_uverbs_create_cq_resp r;
		struct vrnic_create_cq_resp d;
	} r = {};
	int ret;

	m.hdr.command = IB_USER_VERBS_CMD_CREATE_CQ;
	m.hdr.in_words = sizeof(m) / 4;
	m.hdr.out_words = sizeof(r) / 4;
	m.cmd.response = (uintptr_t)&r;
	m.cmd.cqe = 2;
	m.cmd.comp_channel = -1;
	m.drv.buf_addr = (uintptr_t)ring;
	m.drv.dbrec_addr = (uintptr_t)ring + 4096 - 64;
	m.drv.log_depth = 1;
	ret = raw_write(c, &m, sizeof(m));
	*cq = r.r.cq_handle;
	return ret;
}

/*
 * A command m of len bytes (the last 8 of them a driver request that the
 * verb does not take) with those 8 bytes set to extra, and a response of
 * resp_len bytes: 0 or errno.
 */
static int raw_trailing(struct raw_ctx *c, void *m, size_t len,
			size_t resp_len, uint32_t command, uint64_t extra)
{
	struct ib_uverbs_cmd_hdr *hdr = m;

	hdr->command = command;
	hdr->in_words = len / 4;
	hdr->out_words = resp_len / 4;
	memcpy((char *)m + len - sizeof(extra), &extra, sizeof(extra));
	return raw_write(c, m, len);
}

/*
 * M3 of the second review: verbs that take no driver request (alloc_pd,
 * reg_mr, alloc_mw, open_xrcd; create_ah and modify_srq the same way, and
 * modify_qp did until ECE gave it one) ignored whatever a provider sent in its place, so no request
 * could ever be defined for them.  Now non-zero bytes there are
 * EOPNOTSUPP and zero bytes are accepted.
 */
static int uapi_no_request(struct env *e)
{
	struct vrnic_alloc_ucontext_req req = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_alloc_pd cmd;
		uint64_t extra;
	} mpd;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_reg_mr cmd;
		uint64_t extra;
	} mmr;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_alloc_mw cmd;
		uint64_t extra;
	} mmw;
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_open_xrcd cmd;
		uint64_t extra;
	} mxrcd;
	struct ib_uverbs_alloc_pd_resp rpd;
	struct ib_uverbs_reg_mr_resp rmr;
	struct ib_uverbs_alloc_mw_resp rmw;
	struct ib_uverbs_open_xrcd_resp rxrcd;
	const uint64_t extras[] = { 1ull << 63, 0 };
	struct raw_ctx c;
	uint32_t pd;
	void *buf;
	int i, ret;

	(void)e;
	buf = aligned_alloc(4096, 4096);
	if (!buf)
		FAIL("aligned_alloc\n");
	memset(buf, 0, 4096);
	ret = raw_get_context(&c, &req, NULL);
	if (ret)
		FAIL("get_context: %s\n", strerror(ret));
	ret = raw_alloc_pd(&c, &pd);
	if (ret)
		FAIL("alloc_pd: %s\n", strerror(ret));
	for (i = 0; i < 2; i++) {
		int want = extras[i] ? EOPNOTSUPP : 0;

		memset(&mpd, 0, sizeof(mpd));
		mpd.cmd.response = (uintptr_t)&rpd;
		ret = raw_trailing(&c, &mpd, sizeof(mpd), sizeof(rpd),
				   IB_USER_VERBS_CMD_ALLOC_PD, extras[i]);
		if (ret != want)
			FAIL("alloc_pd, request bytes %#llx: %d, not %d\n",
			     (unsigned long long)extras[i], ret, want);

		memset(&mmr, 0, sizeof(mmr));
		mmr.cmd.response = (uintptr_t)&rmr;
		mmr.cmd.start = (uintptr_t)buf;
		mmr.cmd.length = 4096;
		mmr.cmd.hca_va = (uintptr_t)buf;
		mmr.cmd.pd_handle = pd;
		mmr.cmd.access_flags = IBV_ACCESS_LOCAL_WRITE;
		ret = raw_trailing(&c, &mmr, sizeof(mmr), sizeof(rmr),
				   IB_USER_VERBS_CMD_REG_MR, extras[i]);
		if (ret != want)
			FAIL("reg_mr, request bytes %#llx: %d, not %d\n",
			     (unsigned long long)extras[i], ret, want);

		memset(&mmw, 0, sizeof(mmw));
		mmw.cmd.response = (uintptr_t)&rmw;
		mmw.cmd.pd_handle = pd;
		mmw.cmd.mw_type = IBV_MW_TYPE_1;
		ret = raw_trailing(&c, &mmw, sizeof(mmw), sizeof(rmw),
				   IB_USER_VERBS_CMD_ALLOC_MW, extras[i]);
		if (ret != want)
			FAIL("alloc_mw, request bytes %#llx: %d, not %d\n",
			     (unsigned long long)extras[i], ret, want);

		memset(&mxrcd, 0, sizeof(mxrcd));
		mxrcd.cmd.response = (uintptr_t)&rxrcd;
		mxrcd.cmd.fd = -1;
		mxrcd.cmd.oflags = O_CREAT;
		ret = raw_trailing(&c, &mxrcd, sizeof(mxrcd),
				   sizeof(rxrcd), IB_USER_VERBS_CMD_OPEN_XRCD,
				   extras[i]);
		if (ret != want)
			FAIL("open_xrcd, request bytes %#llx: %d, not %d\n",
			     (unsigned long long)extras[i], ret, want);
	}
	/* Closing the context destroys what the zero-byte round made. */
	raw_close(&c);
	free(buf);
	return 1;
}

/*
 * The QP and SRQ words of the answer (review of the geometry change): a
 * kernel answering a stride or depth other than the one it programmed
 * would pass every verbs-level test while the provider indexed its rings
 * differently from the device.  CREATE_SRQ and CREATE_QP by hand: the
 * answer is the proposal (larger than the request needs), the limits
 * match the common response, and a QP on an SRQ answers no RQ.
 */
static int uapi_geometry_qp(struct env *e)
{
	struct vrnic_alloc_ucontext_req req = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_srq cmd;
		struct vrnic_create_srq_cmd drv;
	} ms = {};
	struct {
		struct ib_uverbs_create_srq_resp r;
		struct vrnic_create_srq_resp d;
	} rs = {};
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_create_qp cmd;
		struct vrnic_create_qp_cmd drv;
	} mq = {};
	struct {
		struct ib_uverbs_create_qp_resp r;
		struct vrnic_create_qp_resp d;
	} rq = {};
	uint32_t pd, cq;
	struct raw_ctx c;
	uint8_t *mem;
	int ret, i;

	(void)e;
	mem = aligned_alloc(4096, 16 * 4096);
	if (!mem)
		FAIL("aligned_alloc\n");
	memset(mem, 0, 16 * 4096);
	ret = raw_get_context(&c, &req, NULL);
	if (ret)
		FAIL("get_context: %s\n", strerror(ret));
	ret = raw_alloc_pd(&c, &pd);
	if (!ret)
		ret = raw_cq_handle(&c, mem, &cq);
	if (ret)
		FAIL("alloc_pd/create_cq: %s\n", strerror(ret));

	/* SRQ: 4 WRs of 2 SGEs asked, 32 x 128 B proposed (4 KiB). */
	ms.hdr.command = IB_USER_VERBS_CMD_CREATE_SRQ;
	ms.hdr.in_words = sizeof(ms) / 4;
	ms.hdr.out_words = sizeof(rs) / 4;
	ms.cmd.response = (uintptr_t)&rs;
	ms.cmd.pd_handle = pd;
	ms.cmd.max_wr = 4;
	ms.cmd.max_sge = 2;
	ms.drv.buf_addr = (uintptr_t)mem + 4096;
	ms.drv.dbrec_addr = (uintptr_t)mem + 4096 - 32;
	ms.drv.log_depth = 5;
	ms.drv.wqe_shift = 7;
	ret = raw_write(&c, &ms, sizeof(ms));
	if (ret)
		FAIL("create_srq: %s\n", strerror(ret));
	ksft_print_msg("create_srq: comp_mask 0x%x log %u shift %u max_sge %u; common max_wr %u max_sge %u\n",
		       rs.d.comp_mask, rs.d.log_depth, rs.d.wqe_shift,
		       rs.d.max_sge, rs.r.max_wr, rs.r.max_sge);
	if (rs.d.comp_mask || rs.d.log_depth != 5 || rs.d.wqe_shift != 7 || rs.d.reserved ||
	    rs.d.max_sge != rs.r.max_sge || rs.r.max_wr != 32 ||
	    rs.d.max_sge < 2 ||
	    16 + 16 * rs.d.max_sge > 128)
		FAIL("create_srq: not the geometry programmed\n");

	/* UD QPs: one with an RQ, one on the SRQ (no RQ). */
	for (i = 0; i < 2; i++) {
		memset(&mq, 0, sizeof(mq));
		memset(&rq, 0, sizeof(rq));
		mq.hdr.command = IB_USER_VERBS_CMD_CREATE_QP;
		mq.hdr.in_words = sizeof(mq) / 4;
		mq.hdr.out_words = sizeof(rq) / 4;
		mq.cmd.response = (uintptr_t)&rq;
		mq.cmd.pd_handle = pd;
		mq.cmd.send_cq_handle = cq;
		mq.cmd.recv_cq_handle = cq;
		mq.cmd.max_send_wr = 4;
		mq.cmd.max_send_sge = 1;
		mq.cmd.max_inline_data = 16;
		mq.cmd.qp_type = IBV_QPT_UD;
		mq.drv.sq_addr = (uintptr_t)mem + (2 + 4 * i) * 4096;
		mq.drv.dbrec_addr = (uintptr_t)mem + 4096 - 96 - 16 * i;
		mq.drv.sq_log_depth = 4;	/* 16 x 256 B: 4 KiB */
		mq.drv.sq_wqe_shift = 8;
		if (i == 0) {
			mq.cmd.max_recv_wr = 4;
			mq.cmd.max_recv_sge = 1;
			mq.drv.rq_addr = (uintptr_t)mem + 4 * 4096;
			mq.drv.rq_log_depth = 6;	/* 64 x 64 B: 4 KiB */
			mq.drv.rq_wqe_shift = 6;
		} else {
			mq.cmd.is_srq = 1;
			mq.cmd.srq_handle = rs.r.srq_handle;
			/* no RQ, but the check of the proposal asks the
			 * smallest stride, 32 B, as libvrnic proposes it
			 */
			mq.drv.rq_wqe_shift = 5;
		}
		ret = raw_write(&c, &mq, sizeof(mq));
		if (ret)
			FAIL("create_qp %d: %s\n", i, strerror(ret));
		ksft_print_msg("create_qp %s: comp_mask 0x%x sq %u/%u rq %u/%u sge %u/%u inline %u; common wr %u/%u sge %u/%u inline %u\n",
			       i ? "on the SRQ" : "with an RQ", rq.d.comp_mask,
			       rq.d.sq_log_depth, rq.d.sq_wqe_shift,
			       rq.d.rq_log_depth, rq.d.rq_wqe_shift,
			       rq.d.max_send_sge, rq.d.max_recv_sge,
			       rq.d.max_inline, rq.r.max_send_wr,
			       rq.r.max_recv_wr, rq.r.max_send_sge,
			       rq.r.max_recv_sge, rq.r.max_inline_data);
		if (rq.d.comp_mask || rq.d.sq_log_depth != 4 || rq.d.sq_wqe_shift != 8 ||
		    rq.d.reserved || rq.r.max_send_wr != 16 ||
		    rq.d.max_send_sge != rq.r.max_send_sge ||
		    rq.d.max_recv_sge != rq.r.max_recv_sge ||
		    rq.d.max_inline != rq.r.max_inline_data ||
		    rq.d.max_send_sge < 1 || rq.d.max_inline < 16 ||
		    rq.d.max_inline > 256 || 16 * rq.d.max_send_sge > 256)
			FAIL("create_qp %d: not the send geometry programmed\n",
			     i);
		if (i == 0 && (rq.d.rq_log_depth != 6 ||
			       rq.d.rq_wqe_shift != 6 ||
			       rq.r.max_recv_wr != 64 ||
			       rq.d.max_recv_sge < 1 ||
			       16 + 16 * rq.d.max_recv_sge > 64))
			FAIL("create_qp: not the RQ geometry programmed\n");
		if (i == 1 && (rq.d.rq_log_depth || rq.d.rq_wqe_shift ||
			       rq.d.max_recv_sge))
			FAIL("create_qp on an SRQ: RQ fields not 0\n");
	}
	raw_close(&c);
	free(mem);
	return 1;
}

/* ----------------------------------------------------------- Q_Key --- */

/*
 * Set ib_core's privileged-qkey mode (RDMA_NLDEV_CMD_SYS_SET; the guest's
 * iproute2 predates "rdma system set privileged-qkey").  0 or -errno.
 */
static int set_privileged_qkey(uint8_t on)
{
	struct {
		struct nlmsghdr h;
		struct nlattr a;
		uint8_t v;
		uint8_t pad[3];
	} m;
	struct {
		struct nlmsghdr h;
		struct nlmsgerr e;
		uint8_t more[256];
	} r;
	int fd, ret;

	memset(&m, 0, sizeof(m));
	m.h.nlmsg_len = sizeof(m);
	m.h.nlmsg_type = VT_NL_TYPE(VT_RDMA_NL_NLDEV, VT_RDMA_NLDEV_CMD_SYS_SET);
	m.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	m.h.nlmsg_seq = 1;
	m.a.nla_len = NLA_HDRLEN + 1;
	m.a.nla_type = VT_RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE;
	m.v = on;
	fd = socket(AF_NETLINK, SOCK_RAW, NETLINK_RDMA);
	if (fd < 0)
		return -errno;
	if (send(fd, &m, sizeof(m), 0) != sizeof(m)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ret = recv(fd, &r, sizeof(r), 0);
	close(fd);
	if (ret < (int)(sizeof(r.h) + sizeof(r.e)) || r.h.nlmsg_type != NLMSG_ERROR)
		return -EIO;
	return r.e.error;
}

/* Drop CAP_NET_RAW (the capability ib_core asks for) from this process. */
static int drop_net_raw(void)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2];
	const uint32_t bit = 1u << (CAP_NET_RAW % 32);

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_NET_RAW / 32].effective &= ~bit;
	d[CAP_NET_RAW / 32].permitted &= ~bit;
	d[CAP_NET_RAW / 32].inheritable &= ~bit;
	return syscall(SYS_capset, &h, d);
}

/*
 * In a child without CAP_NET_RAW: set Q_Key qkey on a fresh UD QP.  The
 * device is opened after the drop (uverbs refuses a file used with other
 * credentials than it was opened with).  0, an errno, or >= 100 when the
 * setup failed.
 */
static int unprivileged_qkey(uint32_t qkey)
{
	int st = 0;
	pid_t pid;

	pid = fork();
	if (pid < 0)
		return 100;
	if (!pid) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
					 .port_num = 1, .qkey = qkey };
		struct ibv_cq *cq;
		struct ibv_qp *qp;
		struct env e;

		if (drop_net_raw())
			_exit(101);
		if (!env_open(&e))
			_exit(102);
		cq = ibv_create_cq(e.ctx, 4, NULL, NULL, 0);
		qp = cq ? make_qp(&e, IBV_QPT_UD, cq, cq, 4, 0) : NULL;
		if (!qp)
			_exit(103);
		_exit(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				    IBV_QP_PORT | IBV_QP_QKEY));
	}
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return 104;
	return WEXITSTATUS(st);
}

/*
 * Review B.9: the driver refused controlled Q_Keys (bit 31) to processes
 * without CAP_NET_RAW itself, overriding ib_core's privileged-qkey
 * setting.  With the setting on, an unprivileged process may set one;
 * with it off ib_core refuses (EPERM), and a privileged one always may.
 */
static int qkey_policy(struct env *e)
{
	const uint32_t qkey = 0x80010011u;
	int on, off;

	if (geteuid())
		FAIL("must run as root to set privileged-qkey\n");
	if (set_privileged_qkey(1))
		FAIL("setting privileged-qkey on failed\n");
	on = unprivileged_qkey(qkey);
	if (set_privileged_qkey(0))
		FAIL("setting privileged-qkey off failed\n");
	off = unprivileged_qkey(qkey);
	if (on >= 100 || off >= 100)
		FAIL("unprivileged child: setup failed (%d, %d)\n", on, off);
	if (on)
		FAIL("privileged-qkey on: an unprivileged Q_Key 0x%x: %s\n",
		     qkey, strerror(on));
	if (off != EPERM)
		FAIL("privileged-qkey off: an unprivileged Q_Key 0x%x: %d, not EPERM\n",
		     qkey, off);
	{
		struct ibv_cq *cq = ibv_create_cq(e->ctx, 4, NULL, NULL, 0);
		struct ibv_qp *qp = cq ? make_qp(e, IBV_QPT_UD, cq, cq, 4, 0) :
				    NULL;
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT,
					 .port_num = 1, .qkey = qkey };

		if (!qp || ibv_modify_qp(qp, &a, IBV_QP_STATE |
					 IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_QKEY))
			FAIL("privileged: Q_Key 0x%x: %s\n", qkey,
			     strerror(errno));
		ibv_destroy_qp(qp);
		ibv_destroy_cq(cq);
	}
	return 1;
}

/* ------------------------------------------------ doorbell records --- */

/* This process's pinned memory (VmPin), in 4 KiB pages; -1 if unknown. */
static long pinned_pages(void)
{
	char line[256];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / 4;
}

#define NOBJ	1000

/*
 * Review C.10: every CQ, QP and SRQ pinned a whole page for its 8-byte
 * doorbell record, so 1000 QPs and 1000 CQs pinned 2000 pages besides
 * their rings.  The provider now packs records into shared pages and the
 * kernel pins each page once per context.  1000 CQs of 2 entries (one
 * ring page each) and 1000 UD QPs of one WR (an SQ and an RQ page each)
 * may pin their rings and at most 8 pages more.
 */
static int dbrec_pool(struct env *e)
{
	static struct ibv_cq *cq[NOBJ];
	static struct ibv_qp *qp[NOBJ];
	long p0, p1, p2;
	int i, ok = 1;

	p0 = pinned_pages();
	if (p0 < 0)
		FAIL("no VmPin in /proc/self/status\n");
	for (i = 0; i < NOBJ; i++) {
		cq[i] = ibv_create_cq(e->ctx, 2, NULL, NULL, 0);
		if (!cq[i])
			FAIL("create_cq %d: %s\n", i, strerror(errno));
	}
	p1 = pinned_pages();
	for (i = 0; i < NOBJ; i++) {
		qp[i] = make_qp(e, IBV_QPT_UD, cq[i], cq[i], 1, 0);
		if (!qp[i])
			FAIL("create_qp %d: %s\n", i, strerror(errno));
	}
	p2 = pinned_pages();
	ksft_print_msg("%d CQs pinned %ld pages, %d QPs %ld pages\n", NOBJ,
		       p1 - p0, NOBJ, p2 - p1);
	if (p1 - p0 > NOBJ + 8) {
		ksft_print_msg("CQs: %ld pages for %d ring pages\n", p1 - p0,
			       NOBJ);
		ok = 0;
	}
	if (p2 - p1 > 2 * NOBJ + 8) {
		ksft_print_msg("QPs: %ld pages for %d ring pages\n", p2 - p1,
			       2 * NOBJ);
		ok = 0;
	}
	/* The records still work: the last QP moves a datagram to itself. */
	if (ok && !to_rts(e, qp[NOBJ - 1], 0)) {
		struct ibv_ah_attr aa = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = e->gid, .sgid_index = e->gid_index,
				 .hop_limit = 64 },
		};
		struct ibv_ah *ah = ibv_create_ah(e->pd, &aa);
		struct ibv_sge rs = { .addr = (uintptr_t)e->buf + 4096,
				      .length = GRH + MSG, .lkey = e->mr->lkey };
		struct ibv_recv_wr rwr = { .sg_list = &rs, .num_sge = 1 }, *rb;
		struct ibv_sge ss = { .addr = (uintptr_t)e->buf, .length = MSG,
				      .lkey = e->mr->lkey };
		struct ibv_send_wr swr = {
			.sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
			.wr.ud = { .ah = ah, .remote_qpn = qp[NOBJ - 1]->qp_num,
				   .remote_qkey = QKEY },
		}, *sb;

		if (!ah || ibv_post_recv(qp[NOBJ - 1], &rwr, &rb) ||
		    ibv_post_send(qp[NOBJ - 1], &swr, &sb) ||
		    !poll_n(cq[NOBJ - 1], 2)) {
			ksft_print_msg("a datagram on QP %d did not move\n",
				       NOBJ - 1);
			ok = 0;
		}
		if (ah)
			ibv_destroy_ah(ah);
	}
	for (i = 0; i < NOBJ; i++)
		if (ibv_destroy_qp(qp[i]) || ibv_destroy_cq(cq[i]))
			FAIL("destroy %d: %s\n", i, strerror(errno));
	if (pinned_pages() != p0)
		FAIL("%ld pages still pinned after destroy\n",
		     pinned_pages() - p0);
	return ok;
}

/* -------------------------------------------------------- harness --- */

/* ------------------------------------------------------------ ECE --- */

#define ECE_SR	(VRNIC_ECE_VERSION_SR << VRNIC_ECE_VERSION_SHIFT | \
		 VRNIC_ECE_SELECTIVE_REPEAT)

static int ece_is(struct ibv_qp *qp, uint32_t want, const char *what)
{
	struct ibv_ece ece = { .comp_mask = 7 };
	int ret = ibv_query_ece(qp, &ece);

	if (ret)
		FAIL("%s: ibv_query_ece: %s\n", what, strerror(ret));
	if (ece.vendor_id != 0x1af4 || ece.options != want || ece.comp_mask)
		FAIL("%s: vendor %#x options %#x comp_mask %u, not %#x\n", what,
		     ece.vendor_id, ece.options, ece.comp_mask, want);
	return 1;
}

static int ece_set(struct ibv_qp *qp, uint32_t vendor, uint32_t options,
		   uint32_t comp_mask)
{
	struct ibv_ece ece = { .vendor_id = vendor, .options = options,
			       .comp_mask = comp_mask };

	return ibv_set_ece(qp, &ece);
}

/*
 * The extended modify_qp with struct vrnic_modify_qp_cmd, by hand, on
 * the provider's QP: attr_mask 0 changes nothing but the checks run.
 */
static int raw_modify(struct ibv_qp *qp, const struct vrnic_modify_qp_cmd *drv)
{
	struct {
		struct ib_uverbs_cmd_hdr hdr;
		struct ib_uverbs_ex_cmd_hdr ex;
		struct ib_uverbs_ex_modify_qp cmd;
		struct vrnic_modify_qp_cmd drv;
	} m;
	struct ib_uverbs_ex_modify_qp_resp resp;

	memset(&m, 0, sizeof(m));
	m.hdr.command = IB_USER_VERBS_CMD_FLAG_EXTENDED |
			IB_USER_VERBS_EX_CMD_MODIFY_QP;
	m.hdr.in_words = sizeof(m.cmd) / 8;
	m.hdr.out_words = sizeof(resp) / 8;
	m.ex.response = (uintptr_t)&resp;
	m.ex.provider_in_words = sizeof(m.drv) / 8;
	m.cmd.base.qp_handle = qp->handle;
	m.drv = *drv;
	if (write(qp->context->cmd_fd, &m, sizeof(m)) == (ssize_t)sizeof(m))
		return 0;
	return errno;
}

static int raw_modify_ece(struct ibv_qp *qp, uint32_t comp_mask,
			  uint32_t options)
{
	struct vrnic_modify_qp_cmd drv = {
		.comp_mask = comp_mask,
		.ece_options = options,
	};

	return raw_modify(qp, &drv);
}

/*
 * Selective repeat negotiated through ECE (issue 25), as librdmacm drives
 * it: a reliable QP offers version 2 with bit 0 (the debugfs default), a
 * UD QP nothing; ibv_set_ece keeps what both offer at the lower version
 * and refuses another vendor or a comp_mask; two QPs that agreed connect
 * and move data.  The driver's checks of the modify_qp request, by hand.
 */
static int ece(struct env *e)
{
	static const struct {
		uint32_t peer, agreed;
	} agree[] = {
		{ ECE_SR, ECE_SR },
		{ 0, 0 },
		{ 1u << VRNIC_ECE_VERSION_SHIFT | 1, 0 },   /* version 1 */
		{ 2u << VRNIC_ECE_VERSION_SHIFT, 0 },       /* no bit */
		{ 3u << VRNIC_ECE_VERSION_SHIFT | 3, ECE_SR }, /* newer */
		{ 0xffffffffu, ECE_SR },
	};
	struct ibv_qp *a, *b, *c, *d, *ud;
	struct ibv_qp_attr reset;
	struct ibv_cq *cq;
	unsigned int i;
	int ret;

	cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	a = cq ? make_qp(e, IBV_QPT_RC, cq, cq, 8, 0) : NULL;
	b = a ? make_qp(e, IBV_QPT_RC, cq, cq, 8, 0) : NULL;
	ud = b ? make_qp(e, IBV_QPT_UD, cq, cq, 8, 0) : NULL;
	if (!ud)
		FAIL("setup: %s\n", strerror(errno));
	if (!ece_is(a, ECE_SR, "RC offer") || !ece_is(ud, 0, "UD offer"))
		return 0;
	ret = ece_set(a, 0x15b3, ECE_SR, 0);
	if (ret != EINVAL)
		FAIL("set_ece, vendor 0x15b3: %d, not EINVAL\n", ret);
	ret = ece_set(a, 0x1af4, ECE_SR, 1);
	if (ret != EINVAL)
		FAIL("set_ece, comp_mask 1: %d, not EINVAL\n", ret);
	for (i = 0; i < ARRAY_SIZE(agree); i++) {
		ret = ece_set(a, 0x1af4, agree[i].peer, 0);
		if (ret)
			FAIL("set_ece %#x: %s\n", agree[i].peer, strerror(ret));
		if (!ece_is(a, agree[i].agreed, "after set_ece"))
			return 0;
	}
	if (ece_set(ud, 0x1af4, ECE_SR, 0) || !ece_is(ud, 0, "UD set"))
		FAIL("UD: set_ece SR is not nothing agreed\n");

	/* the driver's checks */
	ret = raw_modify_ece(a, 1u << 31, 0);
	if (ret != EOPNOTSUPP)
		FAIL("modify_qp comp_mask bit 31: %d, not EOPNOTSUPP\n", ret);
	ret = raw_modify_ece(a, 0, ECE_SR);
	if (ret != EINVAL)
		FAIL("modify_qp options without the bit: %d, not EINVAL\n", ret);
	ret = raw_modify_ece(a, VRNIC_MODIFY_QP_CMD_ECE, ECE_SR | 2);
	if (ret != EINVAL)
		FAIL("modify_qp options bit 1: %d, not EINVAL\n", ret);
	ret = raw_modify_ece(a, VRNIC_MODIFY_QP_CMD_ECE,
			     1u << VRNIC_ECE_VERSION_SHIFT | 1);
	if (ret != EINVAL)
		FAIL("modify_qp version 1 with bit 0: %d, not EINVAL\n", ret);
	ret = raw_modify_ece(ud, VRNIC_MODIFY_QP_CMD_ECE, ECE_SR);
	if (ret != EINVAL)
		FAIL("modify_qp SR on a UD QP: %d, not EINVAL\n", ret);
	ret = raw_modify_ece(a, VRNIC_MODIFY_QP_CMD_ECE, ECE_SR);
	if (ret)
		FAIL("modify_qp with SR agreed: %s\n", strerror(ret));
	ret = raw_modify_ece(a, VRNIC_MODIFY_QP_CMD_ECE, 0);
	if (ret)
		FAIL("modify_qp with nothing agreed: %s\n", strerror(ret));

	/* both agreed: they connect (INIT to RTR with the options) */
	if (ece_set(b, 0x1af4, ECE_SR, 0) || !ece_is(b, ECE_SR, "b") ||
	    !ece_is(a, ECE_SR, "a"))
		return 0;
	if (to_rts(e, a, b->qp_num) || to_rts(e, b, a->qp_num))
		FAIL("to_rts with selective repeat agreed: %s\n",
		     strerror(errno));
	for (i = 0; i < 16; i++)
		if (!moves(e, a, b, cq))
			return 0;

	/*
	 * A QP that reaches RTR without set_ece agreed to nothing (a passive
	 * side whose peer sent no ECE); RESET forgets an agreement.
	 */
	c = make_qp(e, IBV_QPT_RC, cq, cq, 8, 0);
	d = c ? make_qp(e, IBV_QPT_RC, cq, cq, 8, 0) : NULL;
	if (!d || to_rts(e, c, d->qp_num) || to_rts(e, d, c->qp_num))
		FAIL("c, d: %s\n", strerror(errno));
	if (!ece_is(c, 0, "RTR without set_ece"))
		return 0;
	memset(&reset, 0, sizeof(reset));
	reset.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(a, &reset, IBV_QP_STATE) ||
	    ibv_modify_qp(c, &reset, IBV_QP_STATE))
		FAIL("to RESET: %s\n", strerror(errno));
	return ece_is(a, ECE_SR, "a after RESET") &&
	       ece_is(c, ECE_SR, "c after RESET");
}

static int dv_set(struct ibv_qp *qp, uint64_t mask, uint32_t flags,
		  unsigned int window, unsigned int paths, unsigned int reserved)
{
	struct vrnicdv_qp_transport t = {
		.comp_mask = mask,
		.flags = flags,
		.send_window = (uint16_t)window,
		.spray_paths = (uint8_t)paths,
		.reserved = (uint8_t)reserved,
	};

	return vrnicdv_set_qp_transport(qp, &t);
}

static int qp_state_is(struct ibv_qp *qp, enum ibv_qp_state want)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	return !ibv_query_qp(qp, &a, IBV_QP_STATE, &init) &&
	       a.qp_state == want;
}

/* RESET or INIT -> INIT, then INIT -> RTR: the latter's result. */
static int init_rtr(struct env *e, struct ibv_qp *qp, uint32_t dest)
{
	struct vt_path path = {
		.mtu = IBV_MTU_1024, .rd_atomic = 1,
		.access = IBV_ACCESS_REMOTE_WRITE,
	};

	if (vt_to_init(qp, &path))
		return -1;
	return vt_to_rtr(qp, dest, &e->gid, e->gid_index, &path);
}

static int write_knob(const char *path, const char *val)
{
	ssize_t n = (ssize_t)strlen(val);
	int fd = open(path, O_WRONLY);
	int ok = fd >= 0 && write(fd, val, (size_t)n) == n;

	if (fd >= 0)
		close(fd);
	return ok ? 0 : -1;
}

/*
 * The administrator's gate, in the driver: a context opened while the
 * debugfs user_transport is 0 is refused a QP's own transport
 * (EOPNOTSUPP) by the provider, and by the driver when a process writes
 * the provider's private QP to send it anyway; the QP stays in INIT.
 */
static int dv_gate(struct env *e)
{
	struct ibv_context *ctx;
	struct ibv_qp *qp = NULL;
	struct ibv_cq *cq = NULL;
	struct ibv_pd *pd = NULL;
	struct vrnic_qp *vq;
	char knob[128];
	int ret, ok = 0;

	snprintf(knob, sizeof(knob), "/sys/kernel/debug/vrnic/%s/user_transport",
		 ibv_get_device_name(e->ctx->device));
	if (write_knob(knob, "0"))
		FAIL("%s: %s\n", knob, strerror(errno));
	ctx = ibv_open_device(e->ctx->device);
	if (write_knob(knob, "1"))
		FAIL("%s back to 1: %s\n", knob, strerror(errno));
	if (!ctx)
		FAIL("ibv_open_device: %s\n", strerror(errno));
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	qp = cq ? vt_make_qp(pd, IBV_QPT_RC, cq, cq, 8, 0) : NULL;
	if (!qp) {
		ksft_print_msg("setup: %s\n", strerror(errno));
		goto out;
	}
	ret = dv_set(qp, 0, VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT, 0, 0, 0);
	if (ret != EOPNOTSUPP) {
		ksft_print_msg("vrnicdv, user_transport 0: %d\n", ret);
		goto out;
	}
	vq = to_vqp(qp);
	vq->dv_transport = true;
	vq->transport_flags = VRNIC_MODIFY_QP_TRANSPORT_SR;
	vq->send_window = 0;
	vq->spray_paths = 0;
	ret = init_rtr(e, qp, qp->qp_num);
	if (ret != EOPNOTSUPP || !qp_state_is(qp, IBV_QPS_INIT)) {
		ksft_print_msg("INIT->RTR past the provider, user_transport "
			       "0: %d, not EOPNOTSUPP in INIT\n", ret);
		goto out;
	}
	ok = 1;
out:
	if (qp)
		ibv_destroy_qp(qp);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	return ok;
}

#define SR VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT

/*
 * A QP's own transport through the provider's direct verbs (vrnicdv.h,
 * issue 25): refused for unknown bits, values beyond what the kernel
 * answered, spraying without selective repeat, a UD QP and a QP past
 * INIT; ibv_query_ece reports what the QP will use.  Two RC QPs that set
 * selective repeat, a window of 64 and 8 paths connect and move data.
 * The driver's own checks, by hand: the transport only with the move
 * from INIT to RTR and its fields only with its bit; and, as a process
 * that writes the provider's private QP (userspace/vrnic.h) would send
 * them, each out-of-range value with a real move to RTR: EINVAL, and
 * the QP stays in INIT.  Last, the administrator's gate (dv_gate()).
 */
static int dv_transport(struct env *e)
{
	static const struct {
		uint64_t mask;
		uint32_t flags;
		unsigned int window, paths, reserved;
		int err;
		const char *what;
	} bad[] = {
		{ 1, SR, 0, 0, 0, EOPNOTSUPP, "comp_mask bit 0" },
		{ 0, 2, 0, 0, 0, EINVAL, "flags bit 1" },
		{ 0, SR, 0, 0, 1, EINVAL, "reserved" },
		{ 0, SR, 513, 0, 0, EINVAL, "send_window 513" },
		{ 0, SR, 0, 65, 0, EINVAL, "spray_paths 65" },
		{ 0, 0, 0, 8, 0, EINVAL, "spray_paths 8 without SR" },
	};
	/*
	 * What the driver must refuse with a real INIT -> RTR.  The device
	 * refuses the first three too (MODIFY_QP's BAD_PARAM), a backstop;
	 * spraying without selective repeat only the driver does.
	 */
	static const struct {
		uint32_t flags;
		unsigned int window, paths;
		const char *what;
	} poke[] = {
		{ 2, 0, 0, "an unknown flag" },
		{ VRNIC_MODIFY_QP_TRANSPORT_SR, 513, 0, "send_window 513" },
		{ VRNIC_MODIFY_QP_TRANSPORT_SR, 0, 65, "spray_paths 65" },
		{ 0, 0, 8, "spraying without selective repeat" },
	};
	struct vrnic_modify_qp_cmd drv;
	struct ibv_qp *a, *b, *c, *ud;
	struct ibv_qp_attr reset;
	struct vrnic_qp *vc;
	struct ibv_ece ece;
	struct ibv_cq *cq;
	unsigned int i;
	int ret;

	if (!vrnicdv_is_supported(e->ctx->device))
		FAIL("vrnicdv_is_supported: false on a vrnic\n");
	cq = ibv_create_cq(e->ctx, 64, NULL, NULL, 0);
	a = cq ? make_qp(e, IBV_QPT_RC, cq, cq, 8, 0) : NULL;
	b = a ? make_qp(e, IBV_QPT_RC, cq, cq, 8, 0) : NULL;
	c = b ? make_qp(e, IBV_QPT_RC, cq, cq, 8, 0) : NULL;
	ud = c ? make_qp(e, IBV_QPT_UD, cq, cq, 8, 0) : NULL;
	if (!ud)
		FAIL("setup: %s\n", strerror(errno));
	for (i = 0; i < ARRAY_SIZE(bad); i++) {
		ret = dv_set(a, bad[i].mask, bad[i].flags, bad[i].window,
			     bad[i].paths, bad[i].reserved);
		if (ret != bad[i].err)
			FAIL("vrnicdv %s: %d, not %d\n", bad[i].what, ret,
			     bad[i].err);
	}
	ret = dv_set(ud, 0, SR, 0, 0, 0);
	if (ret != EINVAL)
		FAIL("vrnicdv on a UD QP: %d, not EINVAL\n", ret);

	/* the driver's checks, by hand */
	memset(&drv, 0, sizeof(drv));
	drv.comp_mask = VRNIC_MODIFY_QP_CMD_TRANSPORT;
	drv.transport_flags = VRNIC_MODIFY_QP_TRANSPORT_SR;
	ret = raw_modify(a, &drv);
	if (ret != EINVAL)
		FAIL("modify_qp TRANSPORT without INIT->RTR: %d, not EINVAL\n",
		     ret);
	drv.comp_mask = 0;
	ret = raw_modify(a, &drv);
	if (ret != EINVAL)
		FAIL("modify_qp transport_flags without the bit: %d, not "
		     "EINVAL\n", ret);
	drv.transport_flags = 0;
	drv.spray_paths = 2;
	ret = raw_modify(a, &drv);
	if (ret != EINVAL)
		FAIL("modify_qp spray_paths without the bit: %d, not EINVAL\n",
		     ret);
	/* ... and with a real move to RTR, past the provider's checks */
	if (dv_set(c, 0, SR, 0, 0, 0))
		FAIL("vrnicdv on c\n");
	vc = to_vqp(c);
	for (i = 0; i < ARRAY_SIZE(poke); i++) {
		vc->transport_flags = poke[i].flags;
		vc->send_window = (uint16_t)poke[i].window;
		vc->spray_paths = (uint8_t)poke[i].paths;
		ret = init_rtr(e, c, c->qp_num);
		if (ret != EINVAL)
			FAIL("INIT->RTR with %s: %d, not EINVAL\n",
			     poke[i].what, ret);
		if (!qp_state_is(c, IBV_QPS_INIT))
			FAIL("after INIT->RTR with %s: not in INIT\n",
			     poke[i].what);
	}
	/* the same move with what the provider would send passes */
	vc->transport_flags = VRNIC_MODIFY_QP_TRANSPORT_SR;
	vc->send_window = 0;
	vc->spray_paths = 0;
	ret = init_rtr(e, c, c->qp_num);
	if (ret || !qp_state_is(c, IBV_QPS_RTR))
		FAIL("INIT->RTR with valid settings: %d\n", ret);
	memset(&reset, 0, sizeof(reset));
	reset.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(c, &reset, IBV_QP_STATE))
		FAIL("c to RESET: %s\n", strerror(errno));

	/* set, report through ECE, connect, move data */
	ret = dv_set(a, 0, SR, 64, 8, 0);
	if (!ret)
		ret = dv_set(b, 0, SR, 64, 8, 0);
	if (ret)
		FAIL("vrnicdv_set_qp_transport: %s\n", strerror(ret));
	if (ibv_query_ece(a, &ece) || ece.options != ECE_SR)
		FAIL("query_ece with SR set: %#x\n", ece.options);
	if (to_rts(e, a, b->qp_num) || to_rts(e, b, a->qp_num))
		FAIL("to_rts with the QPs' own transport: %s\n",
		     strerror(errno));
	for (i = 0; i < 16; i++)
		if (!moves(e, a, b, cq))
			return 0;
	ret = dv_set(a, 0, SR, 64, 8, 0);
	if (ret != EINVAL)
		FAIL("vrnicdv in RTS: %d, not EINVAL\n", ret);
	/* go-back-N chosen: ECE says so; NULL gives c back to the defaults */
	if (dv_set(c, 0, 0, 0, 0, 0) || ibv_query_ece(c, &ece) ||
	    ece.options != 0)
		FAIL("query_ece with go-back-N set: %#x\n", ece.options);
	if (vrnicdv_set_qp_transport(c, NULL) || ibv_query_ece(c, &ece) ||
	    ece.options != ECE_SR)
		FAIL("query_ece after NULL: %#x, not the offer\n",
		     ece.options);
	return dv_gate(e);
}

struct test {
	int (*fn)(struct env *e);
	const char *name;
};

static const struct test tests[] = {
	{ cq_depth, "cq: holds at least the requested entries, reports its true depth" },
	{ srq_sge, "srq: max_sge and max_wr are the kernel's answer, posts up to them work" },
	{ qp_caps, "qp: odd caps are the kernel's answer, posts up to them work, beyond EINVAL" },
	{ opcodes, "post_send: bad opcode for the QP type, INLINE, flags: EINVAL" },
	{ opcodes_ex, "ibv_wr_*: bad operation for the QP type, inline READ refused" },
	{ xrc_recv_post, "xrc: posts on an XRC receive QP or its open_qp handle: EINVAL" },
	{ xrc_recv_modify_query, "xrc: modify and query of an XRC receive QP from two processes at once" },
	{ inline_wrap, "inline: a length sum that wraps 32 or 64 bits is EINVAL, no overrun" },
	{ cq_ex_flags, "create_cq_ex: SINGLE_THREADED taken; errno on every refusal" },
	{ uapi_checks, "uapi: comp_mask, reserved and trailing bytes are checked" },
	{ uapi_geometry, "uapi: create responses carry the programmed geometry; 8-byte ones still work" },
	{ uapi_no_request, "uapi: verbs without a driver request refuse non-zero request bytes" },
	{ uapi_geometry_qp, "uapi: SRQ and QP responses carry the programmed depths, strides and limits" },
	{ qkey_policy, "qkey: ib_core's privileged-qkey setting rules controlled Q_Keys" },
	{ dbrec_pool, "dbrec: 1000 QPs and CQs pin their records in a few pages" },
	{ ece, "ece: reliable QPs offer selective repeat, set_ece agrees, the driver checks" },
	{ dv_transport, "vrnicdv: a QP's own transport, checked by the provider and the driver" },
};

/* Run one test in a child; a crash or a hang is a failure. */
static int run(const struct test *t)
{
	double end = vt_now() + CHILD_S;
	struct env e;
	int st = 0;
	pid_t pid, w;

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (!pid) {
		alarm(CHILD_S);
		_exit(env_open(&e) && t->fn(&e) ? 0 : 1);
	}
	do {
		w = waitpid(pid, &st, WNOHANG);
		if (!w)
			usleep(10000);
	} while (!w && vt_now() < end + 5);
	if (!w) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		ksft_print_msg("%s: hung\n", t->name);
		return 0;
	}
	if (WIFSIGNALED(st)) {
		ksft_print_msg("%s: killed by signal %d\n", t->name,
			       WTERMSIG(st));
		return 0;
	}
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv)
{
	unsigned int i;

	if (argc > 1)
		gid_index = atoi(argv[1]);
	ksft_print_header();
	ksft_set_plan(ARRAY_SIZE(tests));
	for (i = 0; i < ARRAY_SIZE(tests); i++)
		ksft_test_result(run(&tests[i]), "%s\n", tests[i].name);
	ksft_finished();
	return 0;
}

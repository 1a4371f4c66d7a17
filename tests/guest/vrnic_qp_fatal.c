// SPDX-License-Identifier: GPL-2.0
/*
 * QP error tracking (issue 15): an RC loopback pair on vrnic0; the
 * requester RDMA WRITEs with an rkey that names no MR.  The responder
 * NAKs (remote access error), so the requester's WQE completes with
 * IBV_WC_REM_ACCESS_ERR and the device moves the QP to ERR and reports
 * QP_FATAL.  Then:
 *
 * 1. The async event IBV_EVENT_QP_FATAL arrives, naming the requester.
 * 2. Reading the event leaves the state libibverbs caches for the QP
 *    (qp->state) alone: RTS, as the application left it (issue 23: only
 *    libibverbs writes it, in ibv_modify_qp() and ibv_query_qp()).
 * 3. ibv_query_qp() reports IBV_QPS_ERR (state and cur_qp_state).
 * 4. The QP can be taken RESET -> RTS again and a good RDMA WRITE then
 *    completes with success and its data lands.
 *
 *   vrnic_qp_fatal [GID_INDEX]
 *
 * Output is TAP (kselftest).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest.h"
#include "vrnic_verbs_util.h"

#define LEN		256
#define WAIT_S		10

static const struct vt_path path = {
	.mtu = IBV_MTU_1024, .rd_atomic = 1, .retry = 3,
	.access = IBV_ACCESS_REMOTE_WRITE,
};

static int write_wr(struct ibv_qp *qp, struct ibv_mr *src, uint64_t raddr,
		    uint32_t rkey, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)src->addr, .length = LEN, .lkey = src->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(qp, &wr, &bad);
}

/*
 * Read async events until one of type for qp arrived (1) or WAIT_S
 * passed (0).  Other events are acknowledged and reported.
 */
static int wait_event(struct ibv_context *ctx, struct ibv_qp *qp,
		      enum ibv_event_type type, enum ibv_qp_state *state)
{
	double end = vt_now() + WAIT_S;
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	while (vt_now() < end) {
		if (poll(&p, 1, 100) <= 0)
			continue;
		if (ibv_get_async_event(ctx, &ev))
			continue;
		if (ev.event_type == type && ev.element.qp == qp) {
			/* Untouched by the provider, before any query. */
			*state = qp->state;
			ibv_ack_async_event(&ev);
			return 1;
		}
		ksft_print_msg("other async event: %s\n",
			       ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
	return 0;
}

int main(int argc, char **argv)
{
	int gid_index = argc > 1 ? atoi(argv[1]) : 1;
	struct ibv_qp_attr qa = {};
	struct ibv_qp_init_attr qia = {};
	enum ibv_qp_state cached = IBV_QPS_UNKNOWN;
	struct ibv_mr *smr, *dmr;
	struct ibv_context *ctx;
	struct ibv_qp *a, *b;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_wc wc;
	union ibv_gid gid;
	uint8_t *src, *dst;
	int n, ok, flags;

	ksft_print_header();
	ksft_set_plan(4);
	ctx = vt_open_device("vrnic0");
	if (!ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	flags = fcntl(ctx->async_fd, F_GETFL);
	if (flags < 0 || fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK))
		ksft_exit_fail_msg("async_fd: %s\n", strerror(errno));
	src = calloc(1, LEN);
	dst = calloc(1, LEN);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!src || !dst || !pd || !cq || ibv_query_gid(ctx, 1, gid_index, &gid))
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));
	smr = ibv_reg_mr(pd, src, LEN, IBV_ACCESS_LOCAL_WRITE);
	dmr = ibv_reg_mr(pd, dst, LEN, IBV_ACCESS_LOCAL_WRITE |
			 IBV_ACCESS_REMOTE_WRITE);
	a = vt_make_qp(pd, IBV_QPT_RC, cq, cq, 4, 0);
	b = vt_make_qp(pd, IBV_QPT_RC, cq, cq, 4, 0);
	if (!smr || !dmr || !a || !b ||
	    vt_to_rts(a, b->qp_num, &gid, gid_index, &path) ||
	    vt_to_rts(b, a->qp_num, &gid, gid_index, &path))
		ksft_exit_fail_msg("QPs: %s\n", strerror(errno));
	memset(src, 0x5a, LEN);

	/* An rkey no MR has: the responder NAKs with a remote access error. */
	if (write_wr(a, smr, (uintptr_t)dst, dmr->rkey ^ 0x00ffff00, 1))
		ksft_exit_fail_msg("post_send: %s\n", strerror(errno));
	n = vt_poll_wait(cq, &wc, 1, WAIT_S);
	if (n != 1)
		ksft_exit_fail_msg("no completion for the bad WRITE (%d)\n", n);
	ksft_print_msg("bad WRITE: %s on QP 0x%x\n", ibv_wc_status_str(wc.status),
		       wc.qp_num);
	if (wc.status != IBV_WC_REM_ACCESS_ERR || wc.qp_num != a->qp_num)
		ksft_exit_fail_msg("expected IBV_WC_REM_ACCESS_ERR on the requester\n");

	ok = wait_event(ctx, a, IBV_EVENT_QP_FATAL, &cached);
	ksft_test_result(ok, "IBV_EVENT_QP_FATAL arrives for the requester\n");
	if (ok)
		ksft_print_msg("qp->state after the event: %d (RTS is %d)\n",
			       cached, IBV_QPS_RTS);
	ksft_test_result(ok && cached == IBV_QPS_RTS,
			 "reading the event leaves the QP's cached state RTS\n");
	ok = !ibv_query_qp(a, &qa, IBV_QP_STATE | IBV_QP_CUR_STATE, &qia);
	if (ok)
		ksft_print_msg("ibv_query_qp: state %d cur_qp_state %d\n",
			       qa.qp_state, qa.cur_qp_state);
	ksft_test_result(ok && qa.qp_state == IBV_QPS_ERR &&
			 qa.cur_qp_state == IBV_QPS_ERR && a->state == IBV_QPS_ERR,
			 "ibv_query_qp reports IBV_QPS_ERR\n");

	/* Back to life: drain the flushes, RESET -> RTS, a good WRITE. */
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		ksft_print_msg("drained: %s\n", ibv_wc_status_str(wc.status));
	qa.qp_state = IBV_QPS_RESET;
	ok = !ibv_modify_qp(a, &qa, IBV_QP_STATE) &&
	     !ibv_modify_qp(b, &qa, IBV_QP_STATE) &&
	     !vt_to_rts(a, b->qp_num, &gid, gid_index, &path) &&
	     !vt_to_rts(b, a->qp_num, &gid, gid_index, &path) &&
	     !write_wr(a, smr, (uintptr_t)dst, dmr->rkey, 2);
	if (!ok)
		ksft_print_msg("back to RTS: %s\n", strerror(errno));
	n = ok ? vt_poll_wait(cq, &wc, 1, WAIT_S) : 0;
	if (n == 1)
		ksft_print_msg("good WRITE: %s wr_id %llu\n",
			       ibv_wc_status_str(wc.status),
			       (unsigned long long)wc.wr_id);
	ksft_test_result(n == 1 && wc.status == IBV_WC_SUCCESS && wc.wr_id == 2 &&
			 !memcmp(src, dst, LEN),
			 "after RESET -> RTS a good RDMA WRITE completes and lands\n");

	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(smr);
	ibv_dereg_mr(dmr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(src);
	free(dst);
	ksft_finished();
}

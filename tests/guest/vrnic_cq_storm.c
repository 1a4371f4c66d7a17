// SPDX-License-Identifier: GPL-2.0
/*
 * Many armed CQs complete at once, and every waiter wakes (issue 14).
 *
 * N UD QPs (default 1000), each with a CQ of its own, all CQs on one
 * completion channel and one completion vector, so every CQ event goes
 * through one completion EQ (256 entries in the driver).  Every QP posts one
 * receive and is attached to one multicast group; every CQ is armed.  Then
 * one multicast send reaches all N QPs in one go: the device completes N
 * receives back to back and owes N CQ events to one EQ at once.  Each CQ's
 * event must arrive within the bound, exactly one per CQ, and each CQ must
 * hold its receive with the sent bytes.  Before the device held events back
 * for a full EQ, all but about 256 of them were lost and those CQs stayed
 * disarmed forever.
 *
 * Usage: vrnic_cq_storm [gid_index (an IPv4 GID) [n [seconds]]]
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrnic_verbs_util.h"

#define QKEY	0x11111111u
#define MSG	64
#define GRH	40
#define SLOT	(GRH + MSG)
#define MAX_N	1000

struct storm {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_mr *mr;
	uint8_t *buf;		/* n receive slots, then the send buffer */
	union ibv_gid gid, mgid;
	int gid_index, n;
	struct ibv_cq *cq[MAX_N];
	struct ibv_qp *qp[MAX_N];
	int events[MAX_N];
};

static uint8_t *slot(struct storm *s, int i)
{
	return s->buf + (size_t)i * SLOT;
}

static int setup(struct storm *s)
{
	struct vt_path path = { .qkey = QKEY };
	size_t len = (size_t)(s->n + 1) * SLOT;
	int i;

	s->pd = ibv_alloc_pd(s->ctx);
	s->ch = ibv_create_comp_channel(s->ctx);
	s->buf = calloc(1, len);
	if (!s->pd || !s->ch || !s->buf ||
	    ibv_query_gid(s->ctx, 1, s->gid_index, &s->gid))
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		return -1;
	/*
	 * ::ffff:239.118.114.1, a group of its own, IPv4-mapped as the
	 * source GID is (an IPv6 group from an IPv4 GID is a bad SGID).
	 */
	memset(&s->mgid, 0, sizeof(s->mgid));
	s->mgid.raw[10] = 0xff;
	s->mgid.raw[11] = 0xff;
	s->mgid.raw[12] = 239;
	s->mgid.raw[13] = 118;
	s->mgid.raw[14] = 114;
	s->mgid.raw[15] = 1;
	for (i = 0; i < s->n; i++) {
		struct ibv_sge sge = {
			.addr = (uintptr_t)slot(s, i), .length = SLOT,
			.lkey = s->mr->lkey,
		};
		struct ibv_recv_wr wr = {
			.wr_id = i, .sg_list = &sge, .num_sge = 1,
		}, *bad;
		struct ibv_qp_init_attr ia = {
			.qp_type = IBV_QPT_UD,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		/* comp_vector 0 for all: one EQ takes every event. */
		s->cq[i] = ibv_create_cq(s->ctx, 2, (void *)(uintptr_t)i,
					 s->ch, 0);
		if (!s->cq[i]) {
			ksft_print_msg("create_cq %d: %s\n", i, strerror(errno));
			return -1;
		}
		ia.send_cq = s->cq[i];
		ia.recv_cq = s->cq[i];
		s->qp[i] = ibv_create_qp(s->pd, &ia);
		if (!s->qp[i]) {
			ksft_print_msg("create_qp %d: %s\n", i, strerror(errno));
			return -1;
		}
		if (vt_to_rts(s->qp[i], 0, &s->gid, s->gid_index, &path) ||
		    ibv_attach_mcast(s->qp[i], &s->mgid, 0) ||
		    ibv_post_recv(s->qp[i], &wr, &bad)) {
			ksft_print_msg("qp %d setup: %s\n", i, strerror(errno));
			return -1;
		}
	}
	return 0;
}

/* One unsignalled multicast send from QP 0 to the group. */
static int send_to_group(struct storm *s)
{
	struct ibv_ah_attr aa = {
		.is_global = 1, .port_num = 1,
		.grh = { .dgid = s->mgid, .sgid_index = s->gid_index,
			 .hop_limit = 1 },
	};
	uint8_t *msg = slot(s, s->n);
	struct ibv_sge sge = {
		.addr = (uintptr_t)msg, .length = MSG, .lkey = s->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND,
	}, *bad;
	struct ibv_ah *ah = ibv_create_ah(s->pd, &aa);
	int i;

	if (!ah) {
		ksft_print_msg("create_ah: %s\n", strerror(errno));
		return -1;
	}
	for (i = 0; i < MSG; i++)
		msg[i] = (uint8_t)(0xc5 ^ i);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = QKEY;
	return ibv_post_send(s->qp[0], &wr, &bad);
}

/*
 * Take events until every CQ had one or secs passed.  Returns the number
 * of CQs that got one; *dups counts events beyond the first per CQ.
 */
static int wait_events(struct storm *s, double secs, int *dups,
		       double *took)
{
	double t0 = vt_now(), end = t0 + secs;
	int woken = 0;

	*dups = 0;
	while (woken < s->n) {
		struct pollfd pfd = { .fd = s->ch->fd, .events = POLLIN };
		int ms = (int)((end - vt_now()) * 1000);
		struct ibv_cq *cq;
		void *cq_ctx;
		int i;

		if (ms <= 0 || poll(&pfd, 1, ms) <= 0)
			break;
		if (ibv_get_cq_event(s->ch, &cq, &cq_ctx))
			break;
		ibv_ack_cq_events(cq, 1);
		i = (int)(uintptr_t)cq_ctx;
		if (i < 0 || i >= s->n || cq != s->cq[i])
			continue;
		if (s->events[i]++)
			(*dups)++;
		else
			woken++;
	}
	*took = vt_now() - t0;
	return woken;
}

/*
 * Every CQ holds exactly its receive, with the sent bytes after the GRH.
 * No waiting: a CQ's event comes after its completion was written.
 */
static int check_data(struct storm *s, int *bad_cq)
{
	int i, k, ok = 0;

	*bad_cq = -1;
	for (i = 0; i < s->n; i++) {
		struct ibv_wc wc[2];
		int n = ibv_poll_cq(s->cq[i], 2, wc);	/* 2: one too many */
		if (n != 1 || wc[0].status != IBV_WC_SUCCESS ||
		    wc[0].opcode != IBV_WC_RECV || wc[0].wr_id != (uint64_t)i ||
		    wc[0].byte_len != GRH + MSG) {
			if (*bad_cq < 0)
				*bad_cq = i;
			continue;
		}
		for (k = 0; k < MSG; k++)
			if (slot(s, i)[GRH + k] != (uint8_t)(0xc5 ^ k))
				break;
		if (k == MSG)
			ok++;
		else if (*bad_cq < 0)
			*bad_cq = i;
	}
	return ok;
}

int main(int argc, char **argv)
{
	static struct storm s;
	double secs, took;
	int i, woken, dups, ok, bad_cq;

	s.gid_index = argc > 1 ? atoi(argv[1]) : 1;
	s.n = argc > 2 ? atoi(argv[2]) : MAX_N;
	secs = argc > 3 ? atof(argv[3]) : 30.0;
	if (s.n < 1 || s.n > MAX_N)
		s.n = MAX_N;
	ksft_print_header();
	ksft_set_plan(2);
	s.ctx = vt_open_device("vrnic0");
	if (!s.ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	if (setup(&s))
		ksft_exit_fail_msg("setup of %d CQs and QPs failed\n", s.n);
	for (i = 0; i < s.n; i++)
		if (ibv_req_notify_cq(s.cq[i], 0))
			ksft_exit_fail_msg("req_notify_cq %d: %s\n", i,
					   strerror(errno));
	if (send_to_group(&s))
		ksft_exit_fail_msg("multicast send: %s\n", strerror(errno));
	woken = wait_events(&s, secs, &dups, &took);
	ksft_print_msg("%d of %d armed CQs got their event in %.2f s (bound %.0f s), %d extra events\n",
		       woken, s.n, took, secs, dups);
	ksft_test_result(woken == s.n && dups == 0,
			 "every one of %d armed CQs on one vector wakes its waiter once\n",
			 s.n);
	ok = check_data(&s, &bad_cq);
	if (bad_cq >= 0)
		ksft_print_msg("first CQ without its data-checked receive: %d\n",
			       bad_cq);
	ksft_test_result(ok == s.n,
			 "every CQ holds its receive with the sent bytes (%d of %d)\n",
			 ok, s.n);
	for (i = s.n - 1; i >= 0; i--) {
		ibv_detach_mcast(s.qp[i], &s.mgid, 0);
		ibv_destroy_qp(s.qp[i]);
		ibv_destroy_cq(s.cq[i]);
	}
	ibv_dereg_mr(s.mr);
	ibv_destroy_comp_channel(s.ch);
	ibv_dealloc_pd(s.pd);
	ibv_close_device(s.ctx);
	free(s.buf);
	ksft_finished();
	return 0;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * QP lifecycle in the provider (issue 15, review B.7, C.1, C.2), from an
 * unprivileged guest process over loopback QP pairs on vrnic0:
 *
 * 1. Reuse after RESET, for RC and for UD: a pair moves one message and
 *    leaves a second one's completions unpolled in the CQ; both QPs go to
 *    RESET and back to RTS; a third message must then move exactly once:
 *    its two completions and nothing else (no stale CQE of the second
 *    message, no replay of an old WQE whose slot the device restarted at),
 *    its data in its own buffer and no other buffer written.
 * 2. destroy_qp purges: completions left unpolled are gone with the QP.
 * 3. destroy_qp against poll_cq: two threads poll a shared CQ (slowly, so
 *    that completions are still queued) while a third destroys the QPs
 *    whose completions they are.  No crash, and no poll started after
 *    ibv_destroy_qp() returned may report a completion of that QP.
 *
 *   vrnic_qp_lifecycle [GID_INDEX [ROUNDS]]
 *
 * Output is TAP (kselftest).
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest.h"
#include "vrnic_verbs_util.h"

#define MSG		64
#define GRH		40
#define SLOT		(GRH + MSG)
#define NSLOT		64
#define QKEY		0x11111111u
#define WAIT_S		10
#define NPAIR		4
#define NMSG		8

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;			/* NSLOT slots of SLOT bytes */
	union ibv_gid gid;
	int gid_index;
};

static uint8_t *slot(struct env *e, int i)
{
	return e->buf + (size_t)i * SLOT;
}

static int to_rts(struct env *e, struct ibv_qp *qp, uint32_t dest)
{
	static const struct vt_path path = {
		.mtu = IBV_MTU_1024, .rd_atomic = 1, .retry = 3, .qkey = QKEY,
	};

	return vt_to_rts(qp, dest, &e->gid, e->gid_index, &path);
}

static struct ibv_qp *make_qp(struct env *e, enum ibv_qp_type type)
{
	return vt_make_qp(e->pd, type, e->cq, e->cq, 16, 0);
}

static int pair_rts(struct env *e, struct ibv_qp *a, struct ibv_qp *b)
{
	return to_rts(e, a, b->qp_num) || to_rts(e, b, a->qp_num) ? -1 : 0;
}

static int reset(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	return ibv_modify_qp(qp, &a, IBV_QP_STATE);
}

/* Receive into slot rs (wr_id 0x100 + rs); send slot ss's pattern. */
static int post_recv(struct env *e, struct ibv_qp *qp, int rs)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot(e, rs), .length = SLOT,
		.lkey = e->mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = 0x100 + rs, .sg_list = &sge, .num_sge = 1,
	}, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

static int post_send(struct env *e, struct ibv_qp *qp, struct ibv_ah *ah,
		     uint32_t dqpn, int ss, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)slot(e, ss), .length = MSG,
		.lkey = e->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;

	if (ah) {
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = dqpn;
		wr.wr.ud.remote_qkey = QKEY;
	}
	return ibv_post_send(qp, &wr, &bad);
}

/* The received message's first byte: after the GRH for UD. */
static uint8_t *rx(struct env *e, int rs, int ud)
{
	return slot(e, rs) + (ud ? GRH : 0);
}

/* Wait until the message sent from slot ss has landed in slot rs. */
static int landed(struct env *e, int rs, int ss, int ud)
{
	double end = vt_now() + WAIT_S;

	while (vt_now() < end) {
		if (!memcmp(rx(e, rs, ud), slot(e, ss), MSG))
			return 1;
		usleep(1000);
	}
	return 0;
}

/*
 * Test 1.  Slots: 0..2 send patterns, 10..12 receive buffers.  Returns
 * 1 pass, 0 fail (reason printed).
 */
static int reuse_after_reset(struct env *e, enum ibv_qp_type type)
{
	int ud = type == IBV_QPT_UD, ok = 0, i, n, got_s = 0, got_r = 0;
	const char *name = ud ? "ud" : "rc";
	struct ibv_qp *a = NULL, *b = NULL;
	struct ibv_ah *ah = NULL;
	struct ibv_wc wc[16];
	double end;

	memset(e->buf, 0, (size_t)NSLOT * SLOT);
	for (i = 0; i < 3; i++)
		memset(slot(e, i), 0xa1 + i, MSG);
	a = make_qp(e, type);
	b = make_qp(e, type);
	if (!a || !b || pair_rts(e, a, b)) {
		ksft_print_msg("%s: setup: %s\n", name, strerror(errno));
		goto out;
	}
	if (ud) {
		struct ibv_ah_attr aa = {
			.is_global = 1, .port_num = 1,
			.grh = { .dgid = e->gid, .sgid_index = e->gid_index,
				 .hop_limit = 64 },
		};

		ah = ibv_create_ah(e->pd, &aa);
		if (!ah) {
			ksft_print_msg("%s: create_ah: %s\n", name, strerror(errno));
			goto out;
		}
	}
	/* Message 1, polled; message 2, left in the CQ. */
	for (i = 0; i < 2; i++) {
		if (post_recv(e, b, 10 + i) ||
		    post_send(e, a, ah, b->qp_num, i, 1 + i) ||
		    !landed(e, 10 + i, i, ud)) {
			ksft_print_msg("%s: message %d did not move\n", name, i + 1);
			goto out;
		}
		if (i)
			break;
		n = vt_poll_wait(e->cq, wc, 2, WAIT_S);
		if (n != 2) {
			ksft_print_msg("%s: message 1: %d completions\n", name, n);
			goto out;
		}
	}
	usleep(200 * 1000);	/* message 2's CQEs follow its data */
	if (reset(a) || reset(b) || pair_rts(e, a, b)) {
		ksft_print_msg("%s: RESET and back to RTS: %s\n", name,
			       strerror(errno));
		goto out;
	}
	memset(slot(e, 10), 0, (size_t)3 * SLOT);
	if (post_recv(e, b, 12) || post_send(e, a, ah, b->qp_num, 2, 3)) {
		ksft_print_msg("%s: post after RESET: %s\n", name, strerror(errno));
		goto out;
	}
	/* Collect everything for a while; only message 3 may show up. */
	ok = 1;
	for (end = vt_now() + 2; vt_now() < end;) {
		n = ibv_poll_cq(e->cq, 16, wc);
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id == 3 && wc[i].qp_num == a->qp_num &&
			    wc[i].status == IBV_WC_SUCCESS) {
				got_s++;
			} else if (wc[i].wr_id == 0x10c &&
				   wc[i].qp_num == b->qp_num &&
				   wc[i].status == IBV_WC_SUCCESS) {
				got_r++;
			} else {
				ksft_print_msg("%s: unexpected completion wr_id 0x%llx qp 0x%x %s\n",
					       name,
					       (unsigned long long)wc[i].wr_id,
					       wc[i].qp_num,
					       ibv_wc_status_str(wc[i].status));
				ok = 0;
			}
		}
		if (!n)
			usleep(1000);
	}
	if (got_s != 1 || got_r != 1) {
		ksft_print_msg("%s: message 3: %d send and %d receive completions\n",
			       name, got_s, got_r);
		ok = 0;
	}
	if (memcmp(rx(e, 12, ud), slot(e, 2), MSG)) {
		ksft_print_msg("%s: message 3's data is not in its buffer\n", name);
		ok = 0;
	}
	for (i = 10; i < 12; i++) {
		if (rx(e, i, ud)[0]) {
			ksft_print_msg("%s: buffer %d written after RESET (replay)\n",
				       name, i);
			ok = 0;
		}
	}
out:
	if (ah)
		ibv_destroy_ah(ah);
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	while (ibv_poll_cq(e->cq, 16, wc) > 0)
		;
	return ok;
}

/* Test 2 */
struct race {
	struct env *e;
	uint32_t qpn[2 * NPAIR];
	int destroyed[2 * NPAIR];	/* set after ibv_destroy_qp returned */
	int go, done, stale, polled;
	pthread_mutex_t lock;
};

static void *poller(void *arg)
{
	struct race *r = arg;
	int snap[2 * NPAIR], i, j, n;
	struct ibv_wc wc;
	double idle = 0;

	while (!__atomic_load_n(&r->go, __ATOMIC_ACQUIRE))
		usleep(100);
	for (;;) {
		for (i = 0; i < 2 * NPAIR; i++)
			snap[i] = __atomic_load_n(&r->destroyed[i],
						  __ATOMIC_ACQUIRE);
		n = ibv_poll_cq(r->e->cq, 1, &wc);
		if (n < 0)
			break;
		if (n) {
			idle = 0;
			__atomic_add_fetch(&r->polled, 1, __ATOMIC_RELAXED);
			for (j = 0; j < 2 * NPAIR; j++)
				if (snap[j] && wc.qp_num == r->qpn[j])
					__atomic_add_fetch(&r->stale, 1,
							   __ATOMIC_RELAXED);
		} else if (__atomic_load_n(&r->done, __ATOMIC_ACQUIRE)) {
			if (!idle)
				idle = vt_now();
			else if (vt_now() - idle > 0.2)
				break;
		}
		usleep(1000);	/* keep completions queued while QPs go */
	}
	return NULL;
}

static int destroy_race(struct env *e, int round, int *stale, int *polled)
{
	struct ibv_qp *qp[2 * NPAIR] = {};
	struct race r = { .e = e };
	pthread_t th[2];
	int i, k, ok = 0;

	memset(e->buf, 0, (size_t)NSLOT * SLOT);
	for (i = 0; i < NPAIR * NMSG; i++)
		memset(slot(e, i), 1 + i + round, MSG);
	for (i = 0; i < 2 * NPAIR; i++) {
		qp[i] = make_qp(e, IBV_QPT_RC);
		if (!qp[i])
			goto out;
		r.qpn[i] = qp[i]->qp_num;
	}
	for (i = 0; i < NPAIR; i++)
		if (pair_rts(e, qp[2 * i], qp[2 * i + 1]))
			goto out;
	/* NMSG messages on each pair, landed, none polled. */
	for (i = 0; i < NPAIR; i++) {
		for (k = 0; k < NMSG; k++) {
			if (post_recv(e, qp[2 * i + 1], NPAIR * NMSG + i * NMSG + k) ||
			    post_send(e, qp[2 * i], NULL, 0, i * NMSG + k, i * NMSG + k))
				goto out;
		}
	}
	for (i = 0; i < NPAIR * NMSG; i++)
		if (!landed(e, NPAIR * NMSG + i, i, 0))
			goto out;
	usleep(500 * 1000);
	if (pthread_create(&th[0], NULL, poller, &r) ||
	    pthread_create(&th[1], NULL, poller, &r))
		ksft_exit_fail_msg("pthread_create\n");
	__atomic_store_n(&r.go, 1, __ATOMIC_RELEASE);
	for (i = 2 * NPAIR - 1; i >= 0; i--) {
		if (ibv_destroy_qp(qp[i]))
			ksft_print_msg("destroy_qp: %s\n", strerror(errno));
		qp[i] = NULL;
		__atomic_store_n(&r.destroyed[i], 1, __ATOMIC_RELEASE);
		usleep(2000);	/* let the pollers reach the next QP's */
	}
	__atomic_store_n(&r.done, 1, __ATOMIC_RELEASE);
	pthread_join(th[0], NULL);
	pthread_join(th[1], NULL);
	*stale += r.stale;
	*polled += r.polled;
	ok = 1;
out:
	if (!ok)
		ksft_print_msg("round %d: setup: %s\n", round, strerror(errno));
	for (i = 0; i < 2 * NPAIR; i++)
		if (qp[i])
			ibv_destroy_qp(qp[i]);
	return ok;
}

/* Test 4: an RC pair's completions left unpolled; destroy; CQ empty. */
static int destroy_purges(struct env *e)
{
	struct ibv_qp *a = make_qp(e, IBV_QPT_RC), *b = make_qp(e, IBV_QPT_RC);
	struct ibv_wc wc[16];
	int i, n, ok = 0;

	memset(e->buf, 0, (size_t)NSLOT * SLOT);
	for (i = 0; i < 4; i++)
		memset(slot(e, i), 0x51 + i, MSG);
	if (!a || !b || pair_rts(e, a, b))
		goto out;
	for (i = 0; i < 4; i++)
		if (post_recv(e, b, 10 + i) ||
		    post_send(e, a, NULL, 0, i, 0x40 + i))
			goto out;
	for (i = 0; i < 4; i++)
		if (!landed(e, 10 + i, i, 0))
			goto out;
	usleep(200 * 1000);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	a = NULL;
	b = NULL;
	n = ibv_poll_cq(e->cq, 16, wc);
	if (n)
		ksft_print_msg("%d completions of destroyed QPs polled (first wr_id 0x%llx)\n",
			       n, n > 0 ? (unsigned long long)wc[0].wr_id : 0ULL);
	ok = n == 0;
out:
	if (!ok && (a || b))
		ksft_print_msg("%s: setup: %s\n", __func__, strerror(errno));
	if (a)
		ibv_destroy_qp(a);
	if (b)
		ibv_destroy_qp(b);
	while (ibv_poll_cq(e->cq, 16, wc) > 0)
		;
	return ok;
}

int main(int argc, char **argv)
{
	int rounds = argc > 2 ? atoi(argv[2]) : 10;
	struct ibv_context *ctx = NULL;
	int i, stale = 0, polled = 0, setup = 0;
	struct env e = {};

	e.gid_index = argc > 1 ? atoi(argv[1]) : 1;
	ksft_print_header();
	ksft_set_plan(4);
	ctx = vt_open_device("vrnic0");
	if (!ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	e.ctx = ctx;
	e.buf = calloc(NSLOT, SLOT);
	e.pd = ibv_alloc_pd(ctx);
	e.cq = ibv_create_cq(ctx, 256, NULL, NULL, 0);
	if (!e.buf || !e.pd || !e.cq ||
	    ibv_query_gid(ctx, 1, e.gid_index, &e.gid))
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));
	e.mr = ibv_reg_mr(e.pd, e.buf, (size_t)NSLOT * SLOT,
			  IBV_ACCESS_LOCAL_WRITE);
	if (!e.mr)
		ksft_exit_fail_msg("reg_mr: %s\n", strerror(errno));

	ksft_test_result(reuse_after_reset(&e, IBV_QPT_RC),
			 "rc: after RESET -> RTS the next message moves exactly once, no stale completion\n");
	ksft_test_result(reuse_after_reset(&e, IBV_QPT_UD),
			 "ud: after RESET -> RTS the next message moves exactly once, no stale completion\n");
	for (i = 0; i < rounds; i++)
		setup += !destroy_race(&e, i, &stale, &polled);
	ksft_print_msg("destroy race: %d rounds, %d completions polled, %d after their QP was destroyed\n",
		       rounds, polled, stale);
	ksft_test_result(setup == 0 && stale == 0,
			 "no completion of a destroyed QP while others poll the shared CQ (%d stale, %d setup failures)\n",
			 stale, setup);
	ksft_test_result(destroy_purges(&e),
			 "destroy_qp removes the QP's unpolled completions from its CQ\n");
	ibv_dereg_mr(e.mr);
	ibv_destroy_cq(e.cq);
	ibv_dealloc_pd(e.pd);
	ibv_close_device(ctx);
	free(e.buf);
	ksft_finished();
	return 0;
}

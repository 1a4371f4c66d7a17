// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Issue 15: threads poll a CQ shared by many QPs while other threads
 * destroy some of those QPs and others post on the QPs still alive.  Run
 * on the host against the provider (userspace/) with the kernel and the
 * device stubbed (stub.c), under ThreadSanitizer.
 *
 * Each round: NQP RC QPs on one CQ, K sends and K receives posted on each,
 * and the device's K completions per direction and QP written into the CQ
 * beforehand, interleaved, from a random ring index on (they may wrap).
 * The CQ is an ibv_cq_ex.  Then at once: 2 pollers (one with ibv_poll_cq(),
 * one with ibv_start_poll() and ibv_next_poll()), 2 destroyers (each
 * destroys a quarter of the QPs, one at a time, and creates a QP on the CQ
 * after each, which it moves through RTS back to RESET), 2 posters
 * (post_send and post_recv on QPs not destroyed yet), and a thread that
 * receives QP_FATAL events for the QPs nobody destroys.  Checked:
 * - no completion of a QP comes out of a poll_cq call that started after
 *   ibv_destroy_qp() of that QP returned (stale completion);
 * - every completion comes out at most once, with its QP's number, its
 *   opcode and its work request;
 * - every completion of the QPs nobody destroys comes out (none lost by the
 *   purge of the destroyed QPs' completions);
 * - posting on a live QP meanwhile gives 0 or ENOMEM (ring full).
 * ThreadSanitizer reports the data races (TSAN_OPTIONS halt_on_error=1,
 * exitcode=66).  Output: TAP.
 *
 *   shared_cq [rounds]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "stub.h"

#define NQP		48
#define K		16		/* completions per QP and direction */
#define QP_DEPTH	32
#define CQ_DEPTH	2048		/* >= NQP * 2 * K */
#define POLLERS		2
#define DESTROYERS	2		/* QP i: destroyer i % 4, if < 2 */
#define POSTERS		2
#define EVENTS		1		/* an ibv_get_async_event() thread */

enum { DIR_SEND, DIR_RECV };

struct slot {
	struct ibv_qp *qp;
	uint32_t qpn;
	pthread_mutex_t app;	/* the application's: no post during destroy */
	bool dead;		/* under app */
	uint64_t destroyed;	/* epoch after ibv_destroy_qp() returned */
	struct ibv_qp *next;	/* created by the destroyer after that */
	uint8_t seen[2][K];
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq_ex *cqx;		/* the shared CQ */
static struct ibv_cq *cq;		/* the same, for ibv_poll_cq() */
static struct ibv_qp *warm_qp;		/* warm_up() */
static struct slot slots[NQP];
static uint32_t round_no;
static uint64_t epoch;			/* destroys completed */
static int destroyers_done, pollers_done;
static pthread_barrier_t start;
static char buf[64];

/* Failures, counted across rounds. */
static unsigned long stale, dup, wrong, lost, bad_post, bad_destroy,
	bad_create;
static unsigned long polled, polled_ex, destroyed, posted, post_full,
	fatal_events;

static uint64_t wr_id(uint32_t i, int dir, uint32_t idx)
{
	return (uint64_t)round_no << 32 | i << 16 | (uint32_t)dir << 15 | idx;
}

static bool destroyed_qp(uint32_t i)
{
	return i % 4 < DESTROYERS;
}

static void count(unsigned long *c)
{
	__atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}

static void check_wc(const struct ibv_wc *wc, uint64_t before)
{
	uint32_t i = (wc->wr_id >> 16) & 0xffff, idx = wc->wr_id & 0x7fff;
	int dir = (wc->wr_id >> 15) & 1;
	uint64_t d;

	if (wc->wr_id >> 32 != round_no || i >= NQP || idx >= K ||
	    wc->qp_num != slots[i].qpn || wc->status != IBV_WC_SUCCESS ||
	    wc->opcode != (dir == DIR_SEND ? IBV_WC_SEND : IBV_WC_RECV) ||
	    wc->byte_len != i * 100 + idx) {
		if (__atomic_fetch_add(&wrong, 1, __ATOMIC_RELAXED) < 5)
			printf("# wrong completion: wr_id %#llx qpn %#x status %d opcode %d len %u\n",
			       (unsigned long long)wc->wr_id, wc->qp_num,
			       wc->status, wc->opcode, wc->byte_len);
		return;
	}
	d = __atomic_load_n(&slots[i].destroyed, __ATOMIC_ACQUIRE);
	if (d && d <= before) {
		if (__atomic_fetch_add(&stale, 1, __ATOMIC_RELAXED) < 5)
			printf("# stale: round %u QP %u (qpn %#x) %s %u after its destroy\n",
			       round_no, i, wc->qp_num,
			       dir == DIR_SEND ? "send" : "recv", idx);
	}
	if (__atomic_exchange_n(&slots[i].seen[dir][idx], 1, __ATOMIC_RELAXED))
		count(&dup);
}

/* ibv_start_poll()/ibv_next_poll()/ibv_end_poll(): up to ne into wc. */
static int poll_ex(int ne, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = {};
	int n = 0, ret = ibv_start_poll(cqx, &attr);

	if (ret == ENOENT)
		return 0;
	while (!ret) {
		memset(&wc[n], 0, sizeof(wc[n]));
		wc[n].wr_id = cqx->wr_id;
		wc[n].status = cqx->status;
		wc[n].opcode = ibv_wc_read_opcode(cqx);
		wc[n].qp_num = ibv_wc_read_qp_num(cqx);
		wc[n].byte_len = ibv_wc_read_byte_len(cqx);
		if (++n == ne)
			break;
		ret = ibv_next_poll(cqx);
	}
	ibv_end_poll(cqx);
	return ret && ret != ENOENT ? -1 : n;
}

/* Poller 1 polls with ibv_poll_cq(), poller 2 with the ibv_cq_ex calls. */
static void *poller(void *arg)
{
	unsigned int seed = (uintptr_t)arg;
	bool ex = (uintptr_t)arg == 2;
	struct ibv_wc wc[8];
	int n, k, ne;

	pthread_barrier_wait(&start);
	for (;;) {
		/* What was destroyed before this poll started. */
		uint64_t before = __atomic_load_n(&epoch, __ATOMIC_SEQ_CST);
		bool last = __atomic_load_n(&destroyers_done, __ATOMIC_SEQ_CST) ==
			    DESTROYERS;

		ne = 1 + rand_r(&seed) % 8;
		n = ex ? poll_ex(ne, wc) : ibv_poll_cq(cq, ne, wc);
		if (n < 0) {
			count(&wrong);
			break;
		}
		for (k = 0; k < n; k++)
			check_wc(&wc[k], before);
		__atomic_fetch_add(&polled, n, __ATOMIC_RELAXED);
		if (ex)
			__atomic_fetch_add(&polled_ex, n, __ATOMIC_RELAXED);
		if (!n && last)
			break;	/* nothing more will come: no device writes */
		sched_yield();	/* let destroys land between polls */
	}
	__atomic_fetch_add(&pollers_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/* An RC QP on cq, moved to state (through INIT and RTR to RTS). */
static struct ibv_qp *new_qp(enum ibv_qp_state state)
{
	struct ibv_qp_init_attr init = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = QP_DEPTH, .max_recv_wr = QP_DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	static const enum ibv_qp_state states[] = {
		IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_RESET,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &init);
	unsigned int i;

	for (i = 0; qp && i < 4; i++) {
		struct ibv_qp_attr a = { .qp_state = states[i] };

		if (ibv_modify_qp(qp, &a, IBV_QP_STATE)) {
			ibv_destroy_qp(qp);
			return NULL;
		}
		if (states[i] == state)
			break;
	}
	return qp;
}

/*
 * Destroy a quarter of the QPs, one at a time, and after each create a
 * QP (it may take the same QPN index, another generation) and move it
 * through RTS back to RESET (a purge of its completions, under the CQ
 * lock too): object numbers reused and RESET while pollers read the table.
 */
static void *destroyer(void *arg)
{
	uint32_t d = (uintptr_t)arg, order[NQP], n = 0, i, j, t;
	unsigned int seed = d * 7919 + round_no;

	for (i = 0; i < NQP; i++)
		if (i % 4 == d)
			order[n++] = i;
	for (i = n - 1; i > 0; i--) {
		j = rand_r(&seed) % (i + 1);
		t = order[i];
		order[i] = order[j];
		order[j] = t;
	}
	pthread_barrier_wait(&start);
	for (i = 0; i < n; i++) {
		struct slot *s = &slots[order[i]];

		for (j = rand_r(&seed) % 4; j; j--)
			sched_yield();
		pthread_mutex_lock(&s->app);
		if (ibv_destroy_qp(s->qp))
			count(&bad_destroy);
		s->dead = true;
		__atomic_store_n(&s->destroyed,
				 __atomic_add_fetch(&epoch, 1, __ATOMIC_SEQ_CST),
				 __ATOMIC_RELEASE);
		pthread_mutex_unlock(&s->app);
		count(&destroyed);
		s->next = new_qp(IBV_QPS_RESET);
		if (!s->next)
			count(&bad_create);
	}
	__atomic_fetch_add(&destroyers_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

/*
 * QP_FATAL on the QPs nobody destroys (an event holds its QP), while the
 * posters post on them: libibverbs hands the event to the provider in this
 * thread (which no longer does anything with it: issue 23).
 */
static void *events(void *arg)
{
	unsigned int seed = round_no;
	uint32_t i;

	pthread_barrier_wait(&start);
	while (__atomic_load_n(&pollers_done, __ATOMIC_SEQ_CST) < POLLERS) {
		i = rand_r(&seed) % NQP;
		if (!destroyed_qp(i)) {
			stub_async_event(slots[i].qp, IBV_EVENT_QP_FATAL);
			count(&fatal_events);
		}
		sched_yield();
	}
	return NULL;
}

static void *poster(void *arg)
{
	unsigned int seed = (uintptr_t)arg + round_no;
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8 };

	pthread_barrier_wait(&start);
	while (__atomic_load_n(&pollers_done, __ATOMIC_SEQ_CST) < POLLERS) {
		struct slot *s = &slots[rand_r(&seed) % NQP];
		struct ibv_send_wr swr = {
			.wr_id = ~0ull, .sg_list = &sge, .num_sge = 1,
			.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
		}, *sbad;
		struct ibv_recv_wr rwr = {
			.wr_id = ~0ull, .sg_list = &sge, .num_sge = 1,
		}, *rbad;
		int r[2];

		pthread_mutex_lock(&s->app);
		if (s->dead) {
			pthread_mutex_unlock(&s->app);
			continue;
		}
		r[0] = ibv_post_send(s->qp, &swr, &sbad);
		r[1] = ibv_post_recv(s->qp, &rwr, &rbad);
		pthread_mutex_unlock(&s->app);
		for (int k = 0; k < 2; k++) {
			if (!r[k])
				count(&posted);
			else if (r[k] == ENOMEM)
				count(&post_full);
			else
				count(&bad_post);
		}
		if (r[0] || r[1])
			sched_yield();
	}
	return NULL;
}

/*
 * Move the CQ's consumer and producer indexes to a random place, so that
 * the round's completions wrap the ring (phase bit flip) here or there:
 * sends on another QP, completed and polled.
 */
static int warm_up(void)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8 };
	unsigned int seed = round_no * 31, skip = rand_r(&seed) % CQ_DEPTH;
	uint32_t head = 0, b, k;
	struct ibv_wc wc[QP_DEPTH];

	warm_qp = new_qp(IBV_QPS_RTS);
	if (!warm_qp)
		return -1;
	while (skip) {
		b = skip < QP_DEPTH ? skip : QP_DEPTH;
		for (k = 0; k < b; k++, head++) {
			struct ibv_send_wr wr = {
				.wr_id = ~0ull, .sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
			}, *bad;
			struct vrnic_cqe cqe = {
				.wr_id = htole64(~0ull),
				.qpn = htole32(warm_qp->qp_num),
				.wqe_idx = htole32(head),
				.opcode = VRNIC_WC_SEND,
			};

			if (ibv_post_send(warm_qp, &wr, &bad) ||
			    stub_dev_cqe(cq->handle, &cqe))
				return -1;
		}
		if (ibv_poll_cq(cq, QP_DEPTH, wc) != (int)b)
			return -1;
		skip -= b;
	}
	return 0;
}

/* NQP QPs in RTS on cq, K sends and K receives posted on each. */
static int setup_round(void)
{
	struct ibv_cq_init_attr_ex cq_attr = {
		.cqe = CQ_DEPTH,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_QP_NUM,
	};
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = 8 };
	uint32_t i, idx;

	cqx = ibv_create_cq_ex(ctx, &cq_attr);
	if (!cqx)
		return -1;
	cq = ibv_cq_ex_to_cq(cqx);
	for (i = 0; i < NQP; i++) {
		struct slot *s = &slots[i];

		memset(s, 0, sizeof(*s));
		pthread_mutex_init(&s->app, NULL);
		s->qp = new_qp(IBV_QPS_RTS);
		if (!s->qp)
			return -1;
		s->qpn = s->qp->qp_num;
		for (idx = 0; idx < K; idx++) {
			struct ibv_send_wr swr = {
				.wr_id = wr_id(i, DIR_SEND, idx),
				.sg_list = &sge, .num_sge = 1,
				.opcode = IBV_WR_SEND,
				.send_flags = IBV_SEND_SIGNALED,
			}, *sbad;
			struct ibv_recv_wr rwr = {
				.wr_id = wr_id(i, DIR_RECV, idx),
				.sg_list = &sge, .num_sge = 1,
			}, *rbad;

			if (ibv_post_send(s->qp, &swr, &sbad) ||
			    ibv_post_recv(s->qp, &rwr, &rbad))
				return -1;
		}
	}
	if (warm_up())
		return -1;
	/* The device completes them all, QPs and directions interleaved. */
	for (idx = 0; idx < K; idx++) {
		for (uint32_t n = 0; n < 2 * NQP; n++) {
			uint32_t q = (n * 7 + idx * 5) % (2 * NQP);
			int dir = q & 1;
			struct vrnic_cqe cqe = {
				.wr_id = htole64(wr_id(q / 2, dir, idx)),
				.byte_len = htole32(q / 2 * 100 + idx),
				.qpn = htole32(slots[q / 2].qpn),
				.src_qp = htole32(0x40),
				.wqe_idx = htole32(idx),
				.opcode = dir == DIR_SEND ? VRNIC_WC_SEND :
							    VRNIC_WC_RECV,
				.status = VRNIC_WC_ST_SUCCESS,
			};

			if (stub_dev_cqe(cq->handle, &cqe))
				return -1;
		}
	}
	epoch = 0;
	destroyers_done = 0;
	pollers_done = 0;
	return 0;
}

static int run_round(void)
{
	pthread_t t[POLLERS + DESTROYERS + POSTERS + EVENTS];
	uint32_t n = 0, i, idx;
	int dir;

	for (i = 0; i < POLLERS; i++)
		pthread_create(&t[n++], NULL, poller, (void *)(uintptr_t)(i + 1));
	for (i = 0; i < DESTROYERS; i++)
		pthread_create(&t[n++], NULL, destroyer, (void *)(uintptr_t)i);
	for (i = 0; i < POSTERS; i++)
		pthread_create(&t[n++], NULL, poster, (void *)(uintptr_t)(i + 11));
	for (i = 0; i < EVENTS; i++)
		pthread_create(&t[n++], NULL, events, NULL);
	for (i = 0; i < n; i++)
		pthread_join(t[i], NULL);

	for (i = 0; i < NQP; i++) {
		if (slots[i].next && ibv_destroy_qp(slots[i].next))
			count(&bad_destroy);
		if (destroyed_qp(i))
			continue;
		for (dir = 0; dir < 2; dir++)
			for (idx = 0; idx < K; idx++)
				if (!slots[i].seen[dir][idx] && lost++ < 5)
					printf("# lost: round %u QP %u %s %u\n",
					       round_no, i,
					       dir == DIR_SEND ? "send" : "recv",
					       idx);
		if (ibv_destroy_qp(slots[i].qp))
			count(&bad_destroy);
	}
	for (i = 0; i < NQP; i++)
		pthread_mutex_destroy(&slots[i].app);
	if (ibv_destroy_qp(warm_qp))
		count(&bad_destroy);
	return ibv_destroy_cq(cq);
}

int main(int argc, char **argv)
{
	unsigned int rounds = argc > 1 ? strtoul(argv[1], NULL, 0) : 100;
	int ok;

	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..4\n");
	ctx = stub_open_device();
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd) {
		printf("not ok 1 - open the provider on the stub kernel: %s\n",
		       strerror(errno));
		return 1;
	}
	pthread_barrier_init(&start, NULL,
			     POLLERS + DESTROYERS + POSTERS + EVENTS);
	for (round_no = 1; round_no <= rounds; round_no++) {
		if (setup_round() || run_round()) {
			printf("not ok 1 - round %u set-up: %s\n", round_no,
			       strerror(errno));
			return 1;
		}
	}
	pthread_barrier_destroy(&start);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);

	printf("# %u rounds of %d QPs on one CQ: %lu completions polled (%lu with ibv_start_poll), %lu purged by %lu destroys meanwhile, %lu posts (%lu more on full rings)\n",
	       rounds, NQP, polled, polled_ex,
	       (unsigned long)rounds * NQP * 2 * K - polled, destroyed, posted,
	       post_full);
	printf("# %lu QP_FATAL events meanwhile\n", fatal_events);
	printf("# %lu stale, %lu twice, %lu wrong, %lu lost, %lu other post results, %lu destroy errors, %lu create/modify errors\n",
	       stale, dup, wrong, lost, bad_post, bad_destroy, bad_create);
	ok = !stale;
	printf("%sok 1 - no completion of a QP after its destroy returned\n",
	       ok ? "" : "not ");
	ok = !dup && !wrong;
	printf("%sok 2 - each completion once, with its QP, opcode and work request\n",
	       ok ? "" : "not ");
	ok = !lost && polled >= (unsigned long)rounds * (NQP / 2) * 2 * K &&
	     polled_ex && polled_ex < polled;
	printf("%sok 3 - every completion of the QPs left alive polled, by both pollers\n",
	       ok ? "" : "not ");
	ok = !bad_post && !bad_destroy && !bad_create && posted;
	printf("%sok 4 - meanwhile post_send/post_recv give 0 or ENOMEM, create, RESET and destroy succeed\n",
	       ok ? "" : "not ");
	return stale || dup || wrong || lost || bad_post || bad_destroy ||
	       bad_create || !posted;
}

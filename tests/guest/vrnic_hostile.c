// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_hostile: an unprivileged process attacking the device through what
 * it owns.  Like a real attacker who read the provider's source, it reaches
 * the provider's private QP/CQ/context structures (userspace/vrnic.h) and
 * writes its SQ/RQ rings, doorbell records, CQ ring and doorbell page
 * directly: garbage WQEs, out-of-range producer indices, huge num_sge and
 * lengths, foreign QPNs/CQNs on its doorbells, and WQEs naming another
 * process's lkeys and rkeys.  The device must refuse all of it (error
 * completions, counted doorbell violations) and nothing may reach the
 * victim.
 *
 *   vrnic_hostile rings SECONDS GID_INDEX KEYS [QPNS]
 *     KEYS: comma-separated lkey:rkey:iova of the victim's MRs (hex)
 *     QPNS: comma-separated QPNs of other processes (hex)
 *   vrnic_hostile sgid GID_INDEX PEER_IP PEER_MAC
 *     a UD WQE whose address vector names an sgid index the port does
 *     not have, written straight into the SQ: it must complete in error.
 *
 * Output is TAP (kselftest).
 */
#include <endian.h>
#include <errno.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* All of the device's header, before the provider's part of it. */
#include "../../include/vrnic_hw.h"
#include "vrnic.h"	/* the provider's private structures */

#include "kselftest.h"

#define MAX_VICTIM_KEYS 64
#define BUF_SIZE	(64 * 1024)
#define CQ_DEPTH	256
#define WR_VICTIM	(1ull << 63)	/* wr_id tag: names a victim's key */

struct victim_key {
	uint32_t lkey, rkey;
	uint64_t iova;
};

static struct victim_key vkeys[MAX_VICTIM_KEYS];
static unsigned int nvkeys;
static uint32_t vqpns[MAX_VICTIM_KEYS];
static unsigned int nvqpns;

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64*: reproducible from the seed printed at start */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Edge values first, then random ones. */
static uint32_t edge32(void)
{
	static const uint32_t e[] = { 0, 1, 2, 0x7fffffff, 0x80000000,
				      0xfffffffe, 0xffffffff, 0x10000,
				      0xffff, 1u << 24, 1u << 31 };

	if (rnd() & 1)
		return e[rnd() % ARRAY_SIZE(e)];
	return (uint32_t)rnd();
}

static uint64_t edge64(void)
{
	static const uint64_t e[] = { 0, 1, ~0ull, 1ull << 63, 0xfffffffffffff000ull,
				      0x1000, 1ull << 48 };

	if (rnd() & 1)
		return e[rnd() % ARRAY_SIZE(e)];
	return rnd();
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void db_write(struct vrnic_context *vctx, uint32_t off, uint32_t val)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	*(volatile uint32_t *)((uint8_t *)vctx->db_page + (off & 0xffc)) =
		htole32(val);
}

struct set {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp[2];
	struct ibv_mr *mr;
	void *buf;
	union ibv_gid gid;
	int gid_index;
};

static int qp_to_rts(struct set *s, int i)
{
	struct ibv_qp_attr a;
	struct ibv_qp *qp = s->qp[i];
	struct vrnic_qp *vqp = to_vqp(qp);

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	/* The device restarts its indices at 0 after RESET: so do we. */
	vqp->sq_head = vqp->sq_tail = vqp->rq_head = vqp->rq_tail = 0;
	vqp->dbrec->sq_pi = 0;
	vqp->dbrec->rq_pi = 0;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = s->qp[!i]->qp_num;
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = s->gid;
	a.ah_attr.grh.sgid_index = s->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	a.timeout = 10;		/* ~4 ms: a lost request errors out fast */
	a.retry_cnt = 1;
	a.rnr_retry = 1;
	a.max_rd_atomic = 4;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
			     IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			     IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int set_create(struct set *s, struct ibv_context *ctx, int gid_index)
{
	struct ibv_qp_init_attr ia;
	int i;

	memset(s, 0, sizeof(*s));
	s->ctx = ctx;
	s->gid_index = gid_index;
	if (ibv_query_gid(ctx, 1, gid_index, &s->gid))
		return -1;
	s->pd = ibv_alloc_pd(ctx);
	s->cq = s->pd ? ibv_create_cq(ctx, CQ_DEPTH, NULL, NULL, 0) : NULL;
	s->buf = aligned_alloc(4096, BUF_SIZE);
	if (!s->cq || !s->buf)
		return -1;
	memset(s->buf, 0x5a, BUF_SIZE);
	s->mr = ibv_reg_mr(s->pd, s->buf, BUF_SIZE, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			   IBV_ACCESS_REMOTE_ATOMIC);
	if (!s->mr)
		return -1;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 32;
	ia.cap.max_recv_wr = 32;
	ia.cap.max_send_sge = 4;
	ia.cap.max_recv_sge = 4;
	for (i = 0; i < 2; i++) {
		s->qp[i] = ibv_create_qp(s->pd, &ia);
		if (!s->qp[i])
			return -1;
	}
	for (i = 0; i < 2; i++)
		if (qp_to_rts(s, i))
			return -1;
	return 0;
}

/* Returns the number of destroy calls that failed. */
static int set_destroy(struct set *s)
{
	int bad = 0, i;

	for (i = 0; i < 2; i++)
		if (s->qp[i] && ibv_destroy_qp(s->qp[i]))
			bad++;
	if (s->mr && ibv_dereg_mr(s->mr))
		bad++;
	if (s->cq && ibv_destroy_cq(s->cq))
		bad++;
	if (s->pd && ibv_dealloc_pd(s->pd))
		bad++;
	free(s->buf);
	memset(s, 0, sizeof(*s));
	return bad;
}

static struct vrnic_send_wqe *sq_slot(struct vrnic_qp *q, uint32_t idx)
{
	return (struct vrnic_send_wqe *)(q->sq +
		((size_t)(idx & ((1u << q->sq_log) - 1)) << q->sq_shift));
}

/* Post one WQE at the head the honest way (ring + dbrec + doorbell). */
static void post_raw(struct set *s, int i, const struct vrnic_send_wqe *w,
		     const struct vrnic_sge *sge, unsigned int nsge)
{
	struct vrnic_context *vctx = to_vctx(s->ctx);
	struct vrnic_qp *q = to_vqp(s->qp[i]);
	uint8_t *slot = (uint8_t *)sq_slot(q, q->sq_head);
	size_t room = (size_t)1 << q->sq_shift;

	memcpy(slot, w, sizeof(*w));
	if (nsge && q->data_off + nsge * sizeof(*sge) <= room)
		memcpy(slot + q->data_off, sge, nsge * sizeof(*sge));
	q->sq_head++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	q->dbrec->sq_pi = htole32(q->sq_head);
	db_write(vctx, VRNIC_DB_SQ, q->qpn);
}

struct tally {
	unsigned long rounds, wc, wc_err, victim_wc, victim_ok, destroy_bad,
		      recreate, resets, stray;
	unsigned long status[32];
};

static void drain(struct set *s, struct tally *t)
{
	struct ibv_wc wc[32];
	int n, i, loops = 0;

	while (loops++ < 16 && (n = ibv_poll_cq(s->cq, 32, wc)) > 0) {
		for (i = 0; i < n; i++) {
			t->wc++;
			t->status[wc[i].status & 31]++;
			if (wc[i].status != IBV_WC_SUCCESS)
				t->wc_err++;
			if (wc[i].wr_id & WR_VICTIM) {
				t->victim_wc++;
				if (wc[i].status == IBV_WC_SUCCESS)
					t->victim_ok++;
			}
		}
	}
}

/* One WQE naming a victim's key: lkey in the SGE or rkey remotely. */
static void victim_wqe(struct set *s, struct vrnic_send_wqe *w,
		       struct vrnic_sge *sge, int use_rkey)
{
	const struct victim_key *k = &vkeys[rnd() % nvkeys];
	static const uint8_t ops[] = { VRNIC_WR_RDMA_WRITE, VRNIC_WR_RDMA_READ,
				       VRNIC_WR_ATOMIC_FETCH_ADD,
				       VRNIC_WR_ATOMIC_CMP_SWP, VRNIC_WR_SEND };

	memset(w, 0, sizeof(*w));
	w->wr_id = htole64(WR_VICTIM | rnd() >> 8);
	w->flags = VRNIC_WQE_SIGNALED;
	w->num_sge = 1;
	sge->addr = htole64((uintptr_t)s->buf);
	sge->length = htole32(8);
	sge->lkey = htole32(s->mr->lkey);
	if (use_rkey) {
		w->opcode = ops[rnd() % 4];
		w->remote_addr = htole64((k->iova & ~7ull) +
					 ((rnd() & 1) ? 0 : 8 * (rnd() % 64)));
		w->rkey = htole32(k->rkey);
	} else {
		w->opcode = ops[rnd() % 5];
		w->remote_addr = htole64((uintptr_t)s->buf);
		w->rkey = htole32(s->mr->rkey);
		sge->addr = htole64(k->iova);
		sge->lkey = htole32(k->lkey);
	}
}

static void attack(struct set *s, struct tally *t)
{
	struct vrnic_context *vctx = to_vctx(s->ctx);
	int i = rnd() & 1;
	struct vrnic_qp *q = to_vqp(s->qp[i]);
	struct vrnic_cq *cq = to_vcq(s->cq);
	struct vrnic_send_wqe w;
	struct vrnic_sge sge[4];
	unsigned int n, k;
	uint8_t *p;

	switch (rnd() % 9) {
	case 0:	/* garbage in SQ slots, then a wild producer index */
		for (n = rnd() % 8 + 1; n; n--) {
			p = (uint8_t *)sq_slot(q, (uint32_t)rnd());
			for (k = 0; k < (1u << q->sq_shift); k += 8)
				*(uint64_t *)(p + k) = rnd();
		}
		q->dbrec->sq_pi = htole32(rnd() & 1 ? edge32() :
					  q->sq_head + (uint32_t)(rnd() % 70000));
		db_write(vctx, VRNIC_DB_SQ, q->qpn);
		break;
	case 1:	/* a well-formed header with edge-value fields */
		memset(&w, 0, sizeof(w));
		w.wr_id = htole64(rnd() >> 1);
		w.opcode = rnd() & 1 ? (uint8_t)rnd() : (uint8_t)(rnd() % 13);
		w.flags = (uint8_t)rnd();
		w.num_sge = rnd() & 1 ? (uint8_t)rnd() : VRNIC_MAX_SGE + 1;
		w.remote_addr = htole64(edge64());
		w.rkey = htole32(rnd() & 1 ? s->mr->rkey : edge32());
		w.inline_len = htole32(edge32());
		w.compare_add = htole64(edge64());
		w.swap = htole64(edge64());
		for (k = 0; k < 4; k++) {
			sge[k].addr = htole64(rnd() & 1 ? (uintptr_t)s->buf :
					      edge64());
			sge[k].length = htole32(edge32());
			sge[k].lkey = htole32(rnd() & 1 ? s->mr->lkey : edge32());
		}
		post_raw(s, i, &w, sge, 4);
		break;
	case 2:	/* a victim's lkey */
	case 3:	/* a victim's rkey */
		if (!nvkeys)
			break;
		victim_wqe(s, &w, sge, (rnd() & 1));
		post_raw(s, i, &w, sge, 1);
		break;
	case 4:	/* garbage in the RQ and a wild producer index */
		for (n = rnd() % 8 + 1; n; n--) {
			p = q->rq + (((size_t)rnd() & ((1u << q->rq_log) - 1))
				     << q->rq_shift);
			for (k = 0; k < (1u << q->rq_shift); k += 8)
				*(uint64_t *)(p + k) = rnd();
		}
		q->dbrec->rq_pi = htole32(edge32());
		db_write(vctx, VRNIC_DB_RQ, q->qpn);
		break;
	case 5:	/* CQ: consumer index and entries */
		cq->dbrec->ci = htole32(rnd() & 1 ? edge32() :
					cq->ci - (uint32_t)(rnd() % 1024));
		for (n = rnd() % 4; n; n--)
			memset(&cq->ring[rnd() & ((1u << cq->log_depth) - 1)],
			       (int)rnd(), sizeof(struct vrnic_cqe) - 1);
		db_write(vctx, VRNIC_DB_CQ_ARM, (uint32_t)rnd());
		db_write(vctx, VRNIC_DB_CQ_ARM, cq->cqn | (uint32_t)(rnd() % 16) <<
			 __builtin_ctz(VRNIC_CQ_ARM_CMD));
		break;
	case 6:	/* anywhere on the doorbell page, any value and width */
		for (n = rnd() % 16 + 1; n; n--) {
			uint32_t off = (uint32_t)rnd() % vctx->db_page_size;
			volatile uint8_t *b = (volatile uint8_t *)vctx->db_page;

			if (rnd() % 4 == 0)
				b[off] = (uint8_t)rnd();
			else if (rnd() % 4 == 0)
				(void)*(volatile uint32_t *)(b + (off & ~3u));
			else
				*(volatile uint32_t *)(b + (off & ~3u)) =
					edge32();
		}
		break;
	case 7:	/* other processes' QPNs, QP1, random ones on our doorbells */
		for (n = 0; n < 8; n++) {
			uint32_t qpn = nvqpns && (rnd() & 1) ?
				vqpns[rnd() % nvqpns] :
				(rnd() & 1 ? 1 : edge32());

			db_write(vctx, rnd() & 1 ? VRNIC_DB_SQ : VRNIC_DB_RQ, qpn);
			db_write(vctx, VRNIC_DB_CQ_ARM,
				 VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CQN, qpn) |
				 VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CMD,
						  VRNIC_CQ_ARM_NEXT));
		}
		break;
	case 8:	/* producer index far behind or lapping the ring */
		q->dbrec->sq_pi = htole32(q->sq_head - (uint32_t)(rnd() % 4096) -
					  (1u << q->sq_log));
		db_write(vctx, VRNIC_DB_SQ, q->qpn);
		q->dbrec->sq_pi = htole32(q->sq_head + (2u << q->sq_log));
		db_write(vctx, VRNIC_DB_SQ, q->qpn);
		break;
	}
	t->rounds++;
}

/*
 * One clean probe per victim key kind: a fresh QP pair, one WQE naming the
 * victim's key, and its completion within a bounded wait.
 */
static int probe_victim(struct set *s, int use_rkey, enum ibv_wc_status *st)
{
	struct vrnic_send_wqe w;
	struct vrnic_sge sge;
	struct ibv_wc wc;
	double end;
	int n;

	if (qp_to_rts(s, 0) || qp_to_rts(s, 1))
		return -1;
	while (ibv_poll_cq(s->cq, 1, &wc) > 0)
		;
	victim_wqe(s, &w, &sge, use_rkey);
	if (use_rkey)
		w.opcode = VRNIC_WR_RDMA_WRITE;
	post_raw(s, 0, &w, &sge, 1);
	end = now() + 10;
	while (now() < end) {
		n = ibv_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			return -1;
		if (n && (wc.wr_id & WR_VICTIM)) {
			*st = wc.status;
			return 0;
		}
		if (!n)
			usleep(1000);
	}
	return -2;	/* no completion: a hang */
}

static struct ibv_context *open_vrnic(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "vrnic0"))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

static void parse_keys(char *arg)
{
	char *save = NULL, *tok;

	for (tok = strtok_r(arg, ",", &save); tok && nvkeys < MAX_VICTIM_KEYS;
	     tok = strtok_r(NULL, ",", &save)) {
		struct victim_key k = { 0 };
		unsigned long long iova = 0;

		if (sscanf(tok, "%x:%x:%llx", &k.lkey, &k.rkey, &iova) >= 2) {
			k.iova = iova;
			vkeys[nvkeys++] = k;
		}
	}
}

static void parse_qpns(char *arg)
{
	char *save = NULL, *tok;

	for (tok = strtok_r(arg, ",", &save); tok && nvqpns < MAX_VICTIM_KEYS;
	     tok = strtok_r(NULL, ",", &save))
		vqpns[nvqpns++] = (uint32_t)strtoul(tok, NULL, 16);
}

static const char *st_name(int st)
{
	return ibv_wc_status_str((enum ibv_wc_status)st);
}

static int cmd_rings(int argc, char **argv)
{
	double secs = atof(argv[2]), end;
	int gid_index = atoi(argv[3]);
	struct ibv_context *ctx;
	enum ibv_wc_status st;
	struct tally t;
	struct set s;
	int r, i;

	memset(&t, 0, sizeof(t));
	if (strcmp(argv[4], "-"))
		parse_keys(argv[4]);
	if (argc > 5)
		parse_qpns(argv[5]);
	rng_state ^= (uint64_t)time(NULL) * 2654435761u ^ (uint64_t)getpid();
	ksft_print_header();
	ksft_set_plan(5);
	ksft_print_msg("seed %#" PRIx64 ", %u victim keys, %u foreign QPNs, %.0f s\n",
		       rng_state, nvkeys, nvqpns, secs);
	ctx = open_vrnic();
	if (!ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	if (set_create(&s, ctx, gid_index))
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));

	/* Deterministic probes first: each victim key kind is refused. */
	for (i = 0; i < 2; i++) {
		if (!nvkeys) {
			ksft_test_result_skip("victim %s refused: no victim keys given\n",
					      i ? "rkey" : "lkey");
			continue;
		}
		r = probe_victim(&s, i, &st);
		if (r)
			ksft_test_result_fail("victim %s: %s\n", i ? "rkey" : "lkey",
					      r == -2 ? "no completion in 10 s" :
					      "QP setup failed");
		else
			ksft_test_result(st != IBV_WC_SUCCESS,
					 "victim %s refused (%s)\n",
					 i ? "rkey" : "lkey", st_name(st));
	}

	end = now() + secs;
	while (now() < end) {
		for (i = 0; i < 8; i++)
			attack(&s, &t);
		/* Leave the victims on this vCPU some time to run. */
		usleep(2000);
		drain(&s, &t);
		if (t.rounds % 400 == 0) {
			/* Tear everything down mid-attack and start over. */
			t.destroy_bad += set_destroy(&s);
			t.recreate++;
			if (set_create(&s, ctx, gid_index)) {
				ksft_print_msg("recreate failed: %s\n",
					       strerror(errno));
				break;
			}
		} else if (t.rounds % 40 == 0) {
			t.resets++;
			if (qp_to_rts(&s, 0) || qp_to_rts(&s, 1))
				t.stray++;
		}
	}
	drain(&s, &t);
	t.destroy_bad += set_destroy(&s);
	ksft_print_msg("%lu rounds, %lu recreations, %lu resets (%lu failed), "
		       "%lu completions (%lu errors), %lu naming a victim's key "
		       "(%lu succeeded)\n", t.rounds, t.recreate, t.resets,
		       t.stray, t.wc, t.wc_err, t.victim_wc, t.victim_ok);
	for (i = 0; i < 32; i++)
		if (t.status[i])
			ksft_print_msg("  %-30s %lu\n", st_name(i), t.status[i]);
	ksft_test_result(t.rounds > 0, "hostile rounds ran (%lu)\n", t.rounds);
	ksft_test_result(t.victim_ok == 0,
			 "no WQE naming a victim's key succeeded (%lu of %lu)\n",
			 t.victim_ok, t.victim_wc);
	ksft_test_result(t.destroy_bad == 0 && ibv_close_device(ctx) == 0,
			 "every object destroyed cleanly after corruption\n");
	ksft_finished();
	return 0;
}

/*
 * UD WQEs with a forged source: the address vector names a source GID
 * index the port does not have (past the table, 255, an empty entry),
 * written straight into the SQ since the provider would never build them.
 * Each must complete in error; then a control WQE with our real index
 * must succeed (the harness checks that exactly one frame reached the
 * peer).  Needs the sgid-index address vector (spec 0.6).
 */
#ifdef VRNIC_GID_TABLE_LEN
static int ud_to_rts(struct ibv_qp *qp)
{
	struct vrnic_qp *q = to_vqp(qp);
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RESET;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	q->sq_head = q->sq_tail = q->rq_head = q->rq_tail = 0;
	q->dbrec->sq_pi = 0;
	q->dbrec->rq_pi = 0;
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qkey = 0x11111111;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_QKEY))
		return -1;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/* Returns the completion status, or -1 when none came in 10 s. */
static int ud_send_forged(struct ibv_context *ctx, struct ibv_qp *qp,
			  struct ibv_cq *cq, struct ibv_mr *mr,
			  const struct vrnic_ud_av *av)
{
	struct vrnic_qp *q = to_vqp(qp);
	struct vrnic_send_wqe w;
	struct vrnic_sge sge;
	struct ibv_wc wc;
	uint8_t *slot;
	double end;

	if (ud_to_rts(qp))
		return -2;
	while (ibv_poll_cq(cq, 1, &wc) > 0)
		;
	memset(&w, 0, sizeof(w));
	w.wr_id = htole64(0x5ead);
	w.opcode = VRNIC_WR_SEND;
	w.flags = VRNIC_WQE_SIGNALED;
	w.num_sge = 1;
	sge.addr = htole64(mr->addr ? (uintptr_t)mr->addr : 0);
	sge.length = htole32(64);
	sge.lkey = htole32(mr->lkey);
	slot = q->sq + (((size_t)q->sq_head & ((1u << q->sq_log) - 1)) << q->sq_shift);
	memcpy(slot, &w, sizeof(w));
	memcpy(slot + sizeof(w), av, sizeof(*av));
	memcpy(slot + q->data_off, &sge, sizeof(sge));
	q->sq_head++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	q->dbrec->sq_pi = htole32(q->sq_head);
	db_write(to_vctx(ctx), VRNIC_DB_SQ, q->qpn);
	for (end = now() + 10; now() < end;) {
		if (ibv_poll_cq(cq, 1, &wc) > 0 && wc.wr_id == 0x5ead)
			return wc.status;
		usleep(1000);
	}
	return -1;
}

static int cmd_sgid(int argc, char **argv)
{
	static const uint8_t zero_gid[16];
	int gid_index = atoi(argv[2]), empty = -1, i, st;
	struct ibv_qp_init_attr ia;
	struct ibv_context *ctx;
	struct vrnic_ud_av av;
	union ibv_gid gid, g;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	unsigned int mac[6];
	int forged[3];
	void *buf;

	if (argc < 5 || sscanf(argv[4], "%x:%x:%x:%x:%x:%x", &mac[0], &mac[1],
			       &mac[2], &mac[3], &mac[4], &mac[5]) != 6)
		ksft_exit_fail_msg("usage: sgid GID_INDEX PEER_IP PEER_MAC\n");
	ksft_print_header();
	ksft_set_plan(4);
	ctx = open_vrnic();
	if (!ctx || ibv_query_gid(ctx, 1, gid_index, &gid))
		ksft_exit_fail_msg("cannot open vrnic0 or read its GID\n");
	/* The first empty entry of the table, if any. */
	for (i = 0; i < VRNIC_GID_TABLE_LEN; i++) {
		if (ibv_query_gid(ctx, 1, i, &g) ||
		    !memcmp(g.raw, zero_gid, sizeof(zero_gid))) {
			empty = i;
			break;
		}
	}
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	buf = aligned_alloc(4096, 4096);
	mr = cq && buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	qp = mr ? ibv_create_qp(pd, &ia) : NULL;
	if (!qp)
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));

	/* To the peer's QP1 (wrong Q_Key: it would count and drop it). */
	memset(&av, 0, sizeof(av));
	av.dest_qpn = htole32(1);
	av.qkey = htole32(0x11111111);
	memcpy(av.dgid, gid.raw, 16);
	if (inet_pton(AF_INET, argv[3], av.dgid + 12) != 1)
		ksft_exit_fail_msg("bad peer IP %s\n", argv[3]);
	for (i = 0; i < 6; i++)
		av.dmac[i] = (uint8_t)mac[i];
	av.hop_limit = 64;
	/* A forged source, ::ffff:6.6.6.6, where the raw sgid used to be. */
	av.rsvd_sgid[9] = 0xff;
	av.rsvd_sgid[10] = 0xff;
	memset(&av.rsvd_sgid[11], 6, 4);

	forged[0] = VRNIC_GID_TABLE_LEN;
	forged[1] = 255;
	forged[2] = empty;
	for (i = 0; i < 3; i++) {
		if (forged[i] < 0) {
			ksft_test_result_skip("forged sgid: no empty GID entry\n");
			continue;
		}
		av.sgid_index = (uint8_t)forged[i];
		st = ud_send_forged(ctx, qp, cq, mr, &av);
		if (st < 0)
			ksft_test_result_fail("forged sgid index %d: %s\n", forged[i],
					      st == -1 ? "no completion in 10 s" :
					      "QP reset failed");
		else
			ksft_test_result(st != IBV_WC_SUCCESS,
					 "forged sgid index %d refused (%s)\n",
					 forged[i], st_name(st));
	}
	av.sgid_index = (uint8_t)gid_index;
	memset(av.rsvd_sgid, 0, sizeof(av.rsvd_sgid));
	st = ud_send_forged(ctx, qp, cq, mr, &av);
	ksft_test_result(st == IBV_WC_SUCCESS,
			 "control: our own sgid index %d sends (%s)\n", gid_index,
			 st < 0 ? "no completion" : st_name(st));
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	free(buf);
	ksft_finished();
	return 0;
}
#else
static int cmd_sgid(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	ksft_print_header();
	ksft_set_plan(1);
	ksft_test_result_skip("forged sgid: include/vrnic_hw.h has no sgid-index address vector yet\n");
	ksft_finished();
	return 0;
}
#endif

int main(int argc, char **argv)
{
	if (argc >= 5 && !strcmp(argv[1], "rings"))
		return cmd_rings(argc, argv);
	if (argc >= 3 && !strcmp(argv[1], "sgid"))
		return cmd_sgid(argc, argv);
	fprintf(stderr, "usage: %s rings SECONDS GID_INDEX KEYS|- [QPNS]\n"
		"       %s sgid GID_INDEX PEER_IP PEER_MAC\n", argv[0], argv[0]);
	return 2;
}

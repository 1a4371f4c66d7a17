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
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest.h"

#define BUF		(64 * 1024)
#define MSG		64
#define GRH		40
#define QKEY		0x11111111u
#define WAIT_S		20
#define CHILD_S		60

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

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int env_open(struct env *e)
{
	struct ibv_device **list;
	int i;

	memset(e, 0, sizeof(*e));
	e->gid_index = gid_index;
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "vrnic0"))
			e->ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
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
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = QKEY;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				  IBV_QP_PORT | IBV_QP_QKEY))
			return -1;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTR;
		if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
			return -1;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_RTS;
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	}
	a.qp_access_flags = qp->qp_type == IBV_QPT_UC ? IBV_ACCESS_REMOTE_WRITE :
			    IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			    IBV_ACCESS_REMOTE_ATOMIC;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = e->gid;
	a.ah_attr.grh.sgid_index = e->gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, qp->qp_type == IBV_QPT_UC ?
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN :
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, qp->qp_type == IBV_QPT_UC ?
			     IBV_QP_STATE | IBV_QP_SQ_PSN :
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_MAX_QP_RD_ATOMIC);
}

static struct ibv_qp *make_qp(struct env *e, enum ibv_qp_type type,
			      struct ibv_cq *scq, struct ibv_cq *rcq,
			      uint32_t depth, uint32_t inline_len)
{
	struct ibv_qp_init_attr ia;

	memset(&ia, 0, sizeof(ia));
	ia.qp_type = type;
	ia.send_cq = scq;
	ia.recv_cq = rcq;
	ia.cap.max_send_wr = depth;
	ia.cap.max_recv_wr = depth;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = inline_len;
	ia.sq_sig_all = 1;
	return ibv_create_qp(e->pd, &ia);
}

/* Poll cq until n completions arrived (all successful) or WAIT_S passed. */
static int poll_n(struct ibv_cq *cq, int n)
{
	double end = now() + WAIT_S;
	struct ibv_wc wc[16];
	int got = 0, i, k;

	while (got < n && now() < end) {
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

	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
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
	for (i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
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
		ibv_destroy_srq(srq);
	}
	return 1;
}

/* -------------------------------------------------------- harness --- */

struct test {
	int (*fn)(struct env *e);
	const char *name;
};

static const struct test tests[] = {
	{ cq_depth, "cq: holds at least the requested entries and reports its true depth" },
	{ srq_sge, "srq: max_sge is the kernel's answer and posts up to it are accepted" },
};

/* Run one test in a child; a crash or a hang is a failure. */
static int run(const struct test *t)
{
	double end = now() + CHILD_S;
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
	} while (!w && now() < end + 5);
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
	ksft_set_plan(sizeof(tests) / sizeof(tests[0]));
	for (i = 0; i < sizeof(tests) / sizeof(tests[0]); i++)
		ksft_test_result(run(&tests[i]), "%s\n", tests[i].name);
	ksft_finished();
	return 0;
}

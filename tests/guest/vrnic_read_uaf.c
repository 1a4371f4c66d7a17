// SPDX-License-Identifier: GPL-2.0
/*
 * The READ-response use-after-free of the 2026-11-23 review (A.1), from an
 * unprivileged guest process: a loopback RC pair on one device at path MTU
 * 256, nine small READs and one 1 MiB READ, one poll, then the responder's
 * MR (the READ source) is deregistered while the responses are being
 * generated, then a bounded poll.  The 1 MiB READ must end in an error
 * completion, not success and not a hang, and the round's first error must
 * be the responder's remote access NAK, not silence (a transport retry
 * error).  With the engine bug, the responder's resource list is cleared
 * under its own iteration (heap use-after-free in QEMU; it may or may not
 * crash without ASan).
 *
 *   vrnic_read_uaf GID_INDEX [ROUNDS]
 *
 * If the big READ completes before the MR goes away (the device can be
 * faster than the guest's system call), the race was lost and nothing was
 * tested: the next round doubles the READ, up to 64 MiB.
 *
 * Output is TAP (kselftest).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest.h"
#include "vrnic_verbs_util.h"

#define BIG_MIN		(1u << 20)
#define BIG_MAX		(64u << 20)
#define SMALL		64
#define NSMALL		9
#define WAIT_S		20

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dest, union ibv_gid *gid,
		      int gid_index)
{
	/* 256-byte MTU, 16 READs in flight, a 67 ms ack timeout */
	struct vt_path path = {
		.mtu = IBV_MTU_256, .rd_atomic = 16, .retry = 3,
		.access = IBV_ACCESS_REMOTE_READ,
	};

	return vt_to_rts(qp, dest, gid, gid_index, &path);
}

/* One round; returns the big READ's status, or -1 (setup), -2 (hang). */
static int round_once(struct ibv_context *ctx, int gid_index, uint32_t big_len,
		      int *early, int *first_err, int *first_wr)
{
	struct ibv_qp_init_attr ia;
	struct ibv_mr *src = NULL, *dst = NULL;
	struct ibv_qp *req = NULL, *rsp = NULL;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc[16];
	union ibv_gid gid;
	struct ibv_cq *cq;
	struct ibv_pd *pd;
	char *sbuf = NULL, *dbuf = NULL;
	int i, n, ret = -1, big = -2;
	double end;

	*early = 0;
	*first_err = -1;
	*first_wr = -1;
	if (ibv_query_gid(ctx, 1, gid_index, &gid))
		return -1;
	pd = ibv_alloc_pd(ctx);
	cq = pd ? ibv_create_cq(ctx, 64, NULL, NULL, 0) : NULL;
	sbuf = aligned_alloc(4096, big_len);
	dbuf = aligned_alloc(4096, big_len + NSMALL * SMALL);
	if (!cq || !sbuf || !dbuf)
		goto out_free;
	memset(sbuf, 0xab, big_len);
	src = ibv_reg_mr(pd, sbuf, big_len, IBV_ACCESS_REMOTE_READ);
	dst = ibv_reg_mr(pd, dbuf, big_len + NSMALL * SMALL, IBV_ACCESS_LOCAL_WRITE);
	if (!src || !dst)
		goto out_mr;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = 16;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	req = ibv_create_qp(pd, &ia);
	rsp = req ? ibv_create_qp(pd, &ia) : NULL;
	if (!rsp || connect_qp(req, rsp->qp_num, &gid, gid_index) ||
	    connect_qp(rsp, req->qp_num, &gid, gid_index))
		goto out_qp;

	for (i = 0; i <= NSMALL; i++) {
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = i;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		sge.lkey = dst->lkey;
		if (i < NSMALL) {
			sge.addr = (uintptr_t)dbuf + big_len + i * SMALL;
			sge.length = SMALL;
			wr.wr.rdma.remote_addr = (uintptr_t)sbuf + i * SMALL;
		} else {
			sge.addr = (uintptr_t)dbuf;
			sge.length = big_len;
			wr.wr.rdma.remote_addr = (uintptr_t)sbuf;
		}
		wr.wr.rdma.rkey = src->rkey;
		if (ibv_post_send(req, &wr, &bad)) {
			ksft_print_msg("post READ %d: %s\n", i, strerror(errno));
			goto out_qp;
		}
	}
	/* Poll once, then the responder's MR goes away mid-response. */
	n = ibv_poll_cq(cq, 16, wc);
	for (i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS && *first_err < 0) {
			*first_err = wc[i].status;
			*first_wr = (int)wc[i].wr_id;
		}
		if (wc[i].wr_id == NSMALL) {
			big = wc[i].status;
			*early = 1;
		}
	}
	if (ibv_dereg_mr(src))
		ksft_print_msg("dereg_mr of the READ source: %s\n",
			       strerror(errno));
	src = NULL;
	end = now() + WAIT_S;
	while (big == -2 && now() < end) {
		n = ibv_poll_cq(cq, 16, wc);
		if (n < 0)
			break;
		for (i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS && *first_err < 0) {
				*first_err = wc[i].status;
				*first_wr = (int)wc[i].wr_id;
			}
			if (wc[i].wr_id == NSMALL)
				big = wc[i].status;
		}
		if (!n)
			usleep(1000);
	}
	ret = big;
out_qp:
	if (rsp)
		ibv_destroy_qp(rsp);
	if (req)
		ibv_destroy_qp(req);
out_mr:
	if (src)
		ibv_dereg_mr(src);
	if (dst)
		ibv_dereg_mr(dst);
out_free:
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	free(sbuf);
	free(dbuf);
	return ret;
}

int main(int argc, char **argv)
{
	int gid_index = argc > 1 ? atoi(argv[1]) : 1;
	int rounds = argc > 2 ? atoi(argv[2]) : 4;
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, st, early, errors = 0, hangs = 0, setup = 0, ferr, fwr;
	int naks = 0;
	uint32_t big = BIG_MIN;

	ksft_print_header();
	ksft_set_plan(3);
	list = ibv_get_device_list(NULL);
	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "vrnic0"))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	for (i = 0; i < rounds; i++) {
		st = round_once(ctx, gid_index, big, &early, &ferr, &fwr);
		if (st == -1) {
			setup++;
			ksft_print_msg("round %d: setup failed: %s\n", i,
				       strerror(errno));
		} else if (st == -2) {
			hangs++;
			ksft_print_msg("round %d: no completion for the %u KiB READ in %d s\n",
				       i, big >> 10, WAIT_S);
		} else if (st == IBV_WC_SUCCESS || early) {
			ksft_print_msg("round %d: the %u KiB READ completed (%s)%s: race lost\n",
				       i, big >> 10, ibv_wc_status_str(st),
				       early ? " at the first poll" : "");
			if (big < BIG_MAX)
				big <<= 1;
		} else {
			errors++;
			if (ferr == IBV_WC_REM_ACCESS_ERR)
				naks++;
			ksft_print_msg("round %d: the %u KiB READ from a deregistered MR ended in %s; first error: READ %d, %s\n",
				       i, big >> 10, ibv_wc_status_str(st), fwr,
				       ferr < 0 ? "none" :
				       ibv_wc_status_str((enum ibv_wc_status)ferr));
		}
	}
	ksft_test_result(hangs == 0 && setup == 0,
			 "no READ hung, every round set up (%d hung, %d failed setup)\n",
			 hangs, setup);
	ksft_test_result(errors > 0,
			 "a READ whose source MR went away ended in an error completion (%d of %d rounds)\n",
			 errors, rounds);
	/* The responder must say why: a remote access NAK, not silence
	 * (a transport retry error means no NAK came back).
	 */
	ksft_test_result(errors > 0 && naks == errors,
			 "each such round's first error is the responder's remote access NAK (%d of %d)\n",
			 naks, errors);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	ksft_finished();
	return 0;
}

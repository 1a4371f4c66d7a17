/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Verbs scaffolding shared by the vrnic guest selftests: creating a QP and
 * moving it to RTS on a loopback (both ends on the same port and GID).
 */
#ifndef VRNIC_VERBS_UTIL_H
#define VRNIC_VERBS_UTIL_H

#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "vrnic_test_util.h"

/* Open the RDMA device called name; NULL if there is none or it fails. */
static inline struct ibv_context *vt_open_device(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int i;

	for (i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

/* What the tests' loopback QPs differ in. */
struct vt_path {
	enum ibv_mtu mtu;
	uint8_t rd_atomic;	/* max_rd_atomic and max_dest_rd_atomic */
	uint8_t retry;		/* retry_cnt and rnr_retry */
	unsigned int access;	/* qp_access_flags (not UD) */
	uint32_t qkey;		/* UD only */
};

/*
 * A connected QP (not UD) from RESET or INIT to INIT on port 1, then to
 * RTR: dest is the peer QPN, gid/gid_index the loopback address; UC takes
 * no RDMA READ/atomic attributes.  0 or ibv_modify_qp()'s result.
 */
static inline int vt_to_init(struct ibv_qp *qp, const struct vt_path *p)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = p->access;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static inline int vt_to_rtr(struct ibv_qp *qp, uint32_t dest,
			    const union ibv_gid *gid, int gid_index,
			    const struct vt_path *p)
{
	int uc = qp->qp_type == IBV_QPT_UC;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = p->mtu;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = p->rd_atomic;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = 1;
	return ibv_modify_qp(qp, &a, uc ?
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN :
			     IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

/*
 * RESET -> INIT -> RTR -> RTS on port 1; dest is the peer QPN (ignored for
 * UD), gid/gid_index the loopback address.  UC takes no RDMA READ/atomic
 * or retry attributes, an XRC receive QP no retry attributes.
 * 0 or the failing ibv_modify_qp()'s result.
 */
static inline int vt_to_rts(struct ibv_qp *qp, uint32_t dest,
			    const union ibv_gid *gid, int gid_index,
			    const struct vt_path *p)
{
	int uc = qp->qp_type == IBV_QPT_UC;
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (qp->qp_type == IBV_QPT_UD) {
		a.qkey = p->qkey;
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
	if (vt_to_init(qp, p) || vt_to_rtr(qp, dest, gid, gid_index, p))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	if (qp->qp_type == IBV_QPT_XRC_RECV)	/* no retry attributes */
		return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
				     IBV_QP_TIMEOUT);
	a.retry_cnt = p->retry;
	a.rnr_retry = p->retry;
	a.max_rd_atomic = p->rd_atomic;
	return ibv_modify_qp(qp, &a, uc ? IBV_QP_STATE | IBV_QP_SQ_PSN :
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_MAX_QP_RD_ATOMIC);
}

/* A QP with depth send and receive WRs of one SGE each, all signalled. */
static inline struct ibv_qp *vt_make_qp(struct ibv_pd *pd,
					enum ibv_qp_type type,
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
	return ibv_create_qp(pd, &ia);
}

/*
 * Poll cq into wc[0..n) until n completions arrived or secs passed,
 * sleeping 1 ms whenever the CQ is empty.  Returns how many arrived, or
 * ibv_poll_cq()'s negative result on an error.
 */
static inline int vt_poll_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n,
			       double secs)
{
	double end = vt_now() + secs;
	int got = 0, k;

	while (got < n) {
		k = ibv_poll_cq(cq, n - got, wc + got);
		if (k < 0)
			return k;
		got += k;
		if (got < n && vt_now() >= end)
			break;
		if (!k)
			usleep(1000);
	}
	return got;
}

#endif /* VRNIC_VERBS_UTIL_H */

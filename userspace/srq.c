// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic provider: shared receive queues, basic and XRC.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <util/mmio.h>
#include <util/udma_barrier.h>
#include <util/util.h>

#include <infiniband/driver.h>

#include "vrnic.h"
#include "vrnic_abi.h"

/* ----------------------------------------------------------------- SRQ */

/* Write one receive WQE (RQ and SRQ layout) into its ring slot. */
void vrnic_fill_recv_wqe(uint8_t *slot, struct ibv_recv_wr *wr)
{
	struct vrnic_recv_wqe *w = (struct vrnic_recv_wqe *)slot;
	struct vrnic_sge *sge = (struct vrnic_sge *)(w + 1);
	int i;

	memset(w, 0, sizeof(*w));
	w->wr_id = htole64(wr->wr_id);
	w->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = htole64(wr->sg_list[i].addr);
		sge[i].length = htole32(wr->sg_list[i].length);
		sge[i].lkey = htole32(wr->sg_list[i].lkey);
	}
}

static void vrnic_srq_free(struct vrnic_srq *srq)
{
	pthread_spin_destroy(&srq->lock);
	vrnic_free_queue(srq->ring, srq->ring_size);
	vrnic_dbrec_free(srq->vctx, srq->dbrec);
	free(srq);
}

/* The SRQ's ring and doorbell record, and what the kernel is told of them. */
static struct vrnic_srq *vrnic_srq_alloc(struct vrnic_context *ctx,
					 struct ibv_srq_attr *attr,
					 struct vrnic_create_srq_cmd *cmd)
{
	struct vrnic_srq *srq;
	int ret;

	if (attr->max_wr < 1 || attr->max_wr > (1u << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    attr->max_sge > VRNIC_MAX_SGE) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;
	ret = pthread_spin_init(&srq->lock, PTHREAD_PROCESS_PRIVATE);
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	srq->log = vrnic_log2(attr->max_wr);
	srq->shift = vrnic_rq_shift(attr->max_sge ? attr->max_sge : 1);
	srq->ring_size = (size_t)1 << (srq->log + srq->shift);
	srq->ring = vrnic_alloc_queue(srq->ring_size);
	srq->vctx = ctx;
	srq->dbrec = srq->ring ? vrnic_dbrec_alloc(ctx) : NULL;
	if (!srq->dbrec) {
		int err = errno;

		vrnic_srq_free(srq);
		errno = err;
		return NULL;
	}
	cmd->buf_addr = (uintptr_t)srq->ring;
	cmd->dbrec_addr = (uintptr_t)srq->dbrec;
	cmd->log_depth = srq->log;
	cmd->wqe_shift = srq->shift;
	return srq;
}

/*
 * The kernel's answer (spec "User ABI"): the depth, stride and SGE limit
 * it programmed.  It must fit the ring, the stride must hold max_sge
 * SGEs and the SRQ what was asked (want); then it is the SRQ's and the
 * caller's attr.  0 or an errno.
 */
static int vrnic_srq_answer(struct vrnic_srq *srq,
			    const struct ibv_srq_attr *want,
			    const struct vrnic_create_srq_resp *resp,
			    struct ibv_srq_attr *attr)
{
	uint32_t log = resp->log_depth, shift = resp->wqe_shift;
	uint32_t max_sge = resp->max_sge;

	if (log > VRNIC_MAX_WQ_LOG_DEPTH || shift < 5 || shift > 9 ||
	    (size_t)1 << (log + shift) > srq->ring_size ||
	    max_sge > VRNIC_MAX_SGE ||
	    sizeof(struct vrnic_recv_wqe) +
	    max_sge * sizeof(struct vrnic_sge) > 1u << shift ||
	    1u << log < want->max_wr || max_sge < want->max_sge)
		return EINVAL;
	srq->log = log;
	srq->shift = shift;
	srq->max_sge = max_sge;
	attr->max_wr = 1u << log;
	attr->max_sge = max_sge;
	return 0;
}

/* Take the kernel's answer for a created SRQ, or destroy it (NULL). */
static struct ibv_srq *vrnic_srq_ready(struct vrnic_srq *srq,
				       const struct ibv_srq_attr *want,
				       const struct vrnic_create_srq_resp *resp,
				       struct ibv_srq_attr *attr)
{
	int err = vrnic_srq_answer(srq, want, resp, attr);

	if (err) {
		ibv_cmd_destroy_srq(&srq->vsrq.srq);
		vrnic_srq_free(srq);
		errno = err;
		return NULL;
	}
	return &srq->vsrq.srq;
}

struct ibv_srq *vrnic_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	struct uvrnic_create_srq_resp resp = {};
	struct uvrnic_create_srq cmd = {};
	struct ibv_srq_attr want = attr->attr;
	struct vrnic_srq *srq;

	srq = vrnic_srq_alloc(to_vctx(pd->context), &attr->attr,
			      &cmd.drv_payload);
	if (!srq)
		return NULL;
	if (ibv_cmd_create_srq(pd, &srq->vsrq.srq, attr, &cmd.ibv_cmd,
			       sizeof(cmd), &resp.ibv_resp, sizeof(resp))) {
		vrnic_srq_free(srq);
		return NULL;
	}
	return vrnic_srq_ready(srq, &want, &resp.drv_payload, &attr->attr);
}

/* Basic SRQs, and XRC SRQs: in an XRC domain, completing on their CQ. */
struct ibv_srq *vrnic_create_srq_ex(struct ibv_context *ctx,
				    struct ibv_srq_init_attr_ex *attr)
{
	const uint32_t need = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			      IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	struct uvrnic_create_xsrq_resp resp = {};
	struct uvrnic_create_xsrq cmd = {};
	struct ibv_srq_attr want = attr->attr;
	struct vrnic_srq *srq;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ||
	    attr->srq_type == IBV_SRQT_BASIC) {
		struct ibv_srq_init_attr basic = {
			.srq_context = attr->srq_context,
			.attr = attr->attr,
		};
		struct ibv_srq *s;

		if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ||
		    (attr->comp_mask & ~(IBV_SRQ_INIT_ATTR_TYPE |
					 IBV_SRQ_INIT_ATTR_PD))) {
			errno = EOPNOTSUPP;
			return NULL;
		}
		s = vrnic_create_srq(attr->pd, &basic);
		if (s)
			attr->attr = basic.attr;
		return s;
	}
	if (attr->srq_type != IBV_SRQT_XRC ||
	    (attr->comp_mask & need) != need ||
	    (attr->comp_mask & ~need)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	srq = vrnic_srq_alloc(to_vctx(ctx), &attr->attr, &cmd.drv_payload);
	if (!srq)
		return NULL;
	if (ibv_cmd_create_srq_ex(ctx, &srq->vsrq, attr, &cmd.ibv_cmd,
				  sizeof(cmd), &resp.ibv_resp, sizeof(resp))) {
		vrnic_srq_free(srq);
		return NULL;
	}
	return vrnic_srq_ready(srq, &want, &resp.drv_payload, &attr->attr);
}

int vrnic_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num)
{
	*srq_num = to_vsrq(srq)->vsrq.srq_num;
	return 0;
}

int vrnic_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		     int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

int vrnic_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

int vrnic_destroy_srq(struct ibv_srq *ibsrq)
{
	struct vrnic_srq *srq = to_vsrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;
	vrnic_srq_free(srq);
	return 0;
}

/* A slot is free again once the device has copied its WQE (ci). */
int vrnic_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	struct vrnic_srq *srq = to_vsrq(ibsrq);
	uint32_t start;
	int ret = 0;

	pthread_spin_lock(&srq->lock);
	start = srq->head;
	for (; wr; wr = wr->next) {
		uint32_t *cip = (__force uint32_t *)&srq->dbrec->ci;
		uint32_t ci = le32toh((__force __le32)__atomic_load_n(cip,
						__ATOMIC_ACQUIRE));

		if (srq->head - ci >= (1u << srq->log)) {
			ret = ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > srq->max_sge) {
			ret = EINVAL;
			break;
		}
		vrnic_fill_recv_wqe(srq->ring + ((size_t)(srq->head &
			((1u << srq->log) - 1)) << srq->shift), wr);
		srq->head++;
	}
	if (ret)
		*bad_wr = wr;
	if (srq->head != start) {
		udma_to_device_barrier();
		srq->dbrec->pi = htole32(srq->head);
	}
	pthread_spin_unlock(&srq->lock);
	return ret;
}

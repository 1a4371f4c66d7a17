// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic provider: completion queues.  poll_cq and req_notify_cq run here,
 * reading the CQEs the device writes into this process's ring.
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

/* ------------------------------------------------------------------ CQ */

static void vrnic_cq_free(struct vrnic_cq *cq);

/* need_lock false: the application's single thread alone uses the CQ. */
static struct vrnic_cq *vrnic_cq_alloc(struct vrnic_context *ctx, int cqe,
				       bool need_lock)
{
	struct vrnic_cq *cq;
	int ret;

	if (cqe < 1 || cqe > (1 << VRNIC_MAX_CQ_LOG_DEPTH)) {
		errno = EINVAL;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	ret = vrnic_spinlock_init(&cq->lock, need_lock);
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	cq->log_depth = vrnic_log2(cqe < 2 ? 2 : cqe);
	cq->ring_size = sizeof(struct vrnic_cqe) << cq->log_depth;
	cq->ring = vrnic_alloc_queue(cq->ring_size);
	cq->vctx = ctx;
	cq->dbrec = cq->ring ? vrnic_dbrec_alloc(ctx) : NULL;
	if (!cq->dbrec) {
		int err = errno;

		vrnic_cq_free(cq);
		errno = err;
		return NULL;
	}
	return cq;
}

static void vrnic_cq_free(struct vrnic_cq *cq)
{
	vrnic_spinlock_destroy(&cq->lock);
	vrnic_free_queue(cq->ring, cq->ring_size);
	vrnic_dbrec_free(cq->vctx, cq->dbrec);
	free(cq);
}

/*
 * The kernel's answer (spec "User ABI"): the geometry it programmed into
 * the device.  It must fit the ring sized from our proposal and hold cqe
 * entries; then it is the CQ's, for indexing and for cq->cqe.  0 or an
 * errno.
 */
static int vrnic_cq_answer(struct vrnic_cq *cq, int cqe,
			   const struct vrnic_create_cq_resp *resp)
{
	if (resp->cqe_size != sizeof(struct vrnic_cqe))
		return EOPNOTSUPP;
	if (resp->log_depth < 1 || resp->log_depth > VRNIC_MAX_CQ_LOG_DEPTH ||
	    (sizeof(struct vrnic_cqe) << resp->log_depth) > cq->ring_size ||
	    (1u << resp->log_depth) < (unsigned int)cqe)
		return EINVAL;
	cq->log_depth = resp->log_depth;
	cq->vcq.cq.cqe = 1 << cq->log_depth;
	return 0;
}

/* The CQ was created but the answer is unusable: undo it, fail with err. */
static void vrnic_cq_refuse(struct vrnic_cq *cq, int err)
{
	ibv_cmd_destroy_cq(&cq->vcq.cq);
	vrnic_cq_free(cq);
	errno = err;
}

struct ibv_cq *vrnic_create_cq(struct ibv_context *ctx, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector)
{
	int err;
	struct uvrnic_create_cq_resp resp = {};
	struct uvrnic_create_cq cmd = {};
	struct vrnic_cq *cq = vrnic_cq_alloc(to_vctx(ctx), cqe, true);

	if (!cq)
		return NULL;
	cmd.buf_addr = (uintptr_t)cq->ring;
	cmd.dbrec_addr = (uintptr_t)cq->dbrec;
	cmd.log_depth = cq->log_depth;
	if (ibv_cmd_create_cq(ctx, cqe, channel, comp_vector, &cq->vcq.cq,
			      &cmd.ibv_cmd, sizeof(cmd), &resp.ibv_resp,
			      sizeof(resp))) {
		vrnic_cq_free(cq);
		return NULL;
	}
	cq->cqn = resp.cqn;
	err = vrnic_cq_answer(cq, cqe, &resp.drv_payload);
	if (err) {
		vrnic_cq_refuse(cq, err);
		return NULL;
	}
	return &cq->vcq.cq;
}

int vrnic_destroy_cq(struct ibv_cq *ibcq)
{
	struct vrnic_cq *cq = to_vcq(ibcq);
	int ret = ibv_cmd_destroy_cq(ibcq);

	if (ret)
		return ret;
	vrnic_cq_free(cq);
	return 0;
}

/*
 * The device's completion status and opcode, value by value (spec
 * "Completion queues").  A value this provider does not know, from a
 * newer or a broken device, is not handed on raw as an enum ibv_wc_status
 * nor read as a successful SEND: false, and the completion is reported as
 * IBV_WC_GENERAL_ERR.  REG_MR is the kernel's alone (no user QP can post
 * it), so it is unknown here too.
 */
static bool vrnic_wc_status(uint8_t st, enum ibv_wc_status *out)
{
	switch (st) {
	case VRNIC_WC_ST_SUCCESS:
		*out = IBV_WC_SUCCESS;
		break;
	case VRNIC_WC_ST_LOC_LEN_ERR:
		*out = IBV_WC_LOC_LEN_ERR;
		break;
	case VRNIC_WC_ST_LOC_QP_OP_ERR:
		*out = IBV_WC_LOC_QP_OP_ERR;
		break;
	case VRNIC_WC_ST_LOC_PROT_ERR:
		*out = IBV_WC_LOC_PROT_ERR;
		break;
	case VRNIC_WC_ST_WR_FLUSH_ERR:
		*out = IBV_WC_WR_FLUSH_ERR;
		break;
	case VRNIC_WC_ST_MW_BIND_ERR:
		*out = IBV_WC_MW_BIND_ERR;
		break;
	case VRNIC_WC_ST_BAD_RESP_ERR:
		*out = IBV_WC_BAD_RESP_ERR;
		break;
	case VRNIC_WC_ST_LOC_ACCESS_ERR:
		*out = IBV_WC_LOC_ACCESS_ERR;
		break;
	case VRNIC_WC_ST_REM_INV_REQ_ERR:
		*out = IBV_WC_REM_INV_REQ_ERR;
		break;
	case VRNIC_WC_ST_REM_ACCESS_ERR:
		*out = IBV_WC_REM_ACCESS_ERR;
		break;
	case VRNIC_WC_ST_REM_OP_ERR:
		*out = IBV_WC_REM_OP_ERR;
		break;
	case VRNIC_WC_ST_RETRY_EXC_ERR:
		*out = IBV_WC_RETRY_EXC_ERR;
		break;
	case VRNIC_WC_ST_RNR_RETRY_EXC_ERR:
		*out = IBV_WC_RNR_RETRY_EXC_ERR;
		break;
	case VRNIC_WC_ST_FATAL_ERR:
		*out = IBV_WC_FATAL_ERR;
		break;
	case VRNIC_WC_ST_GENERAL_ERR:
		*out = IBV_WC_GENERAL_ERR;
		break;
	default:
		return false;
	}
	return true;
}

static bool vrnic_wc_opcode(uint8_t op, enum ibv_wc_opcode *out)
{
	switch (op) {
	case VRNIC_WC_SEND:
		*out = IBV_WC_SEND;
		break;
	case VRNIC_WC_RDMA_WRITE:
		*out = IBV_WC_RDMA_WRITE;
		break;
	case VRNIC_WC_RDMA_READ:
		*out = IBV_WC_RDMA_READ;
		break;
	case VRNIC_WC_CMP_SWP:
		*out = IBV_WC_COMP_SWAP;
		break;
	case VRNIC_WC_FETCH_ADD:
		*out = IBV_WC_FETCH_ADD;
		break;
	case VRNIC_WC_LOCAL_INV:
		*out = IBV_WC_LOCAL_INV;
		break;
	case VRNIC_WC_ATOMIC_WRITE:
		*out = IBV_WC_ATOMIC_WRITE;
		break;
	case VRNIC_WC_FLUSH:
		*out = IBV_WC_FLUSH;
		break;
	case VRNIC_WC_BIND_MW:
		*out = IBV_WC_BIND_MW;
		break;
	case VRNIC_WC_RECV:
		*out = IBV_WC_RECV;
		break;
	case VRNIC_WC_RECV_RDMA_WITH_IMM:
		*out = IBV_WC_RECV_RDMA_WITH_IMM;
		break;
	default:
		return false;
	}
	return true;
}

/* Read the next CQE into w; ENOENT when there is none.  Lock held. */
static int vrnic_poll_one(struct vrnic_context *ctx, struct vrnic_cq *cq,
			  struct ibv_wc *w)
{
	struct vrnic_cqe *cqe = &cq->ring[cq->ci & ((1u << cq->log_depth) - 1)];
	uint8_t phase = ((cq->ci >> cq->log_depth) & 1) ? 0 : VRNIC_CQE_OWNER;
	bool status_ok, opcode_ok;
	struct vrnic_qp *qp;
	uint32_t qpn;

	if ((cqe->owner & VRNIC_CQE_OWNER) != phase)
		return ENOENT;
	udma_from_device_barrier();
	memset(w, 0, sizeof(*w));
	w->wr_id = le64toh(cqe->wr_id);
	status_ok = vrnic_wc_status(cqe->status, &w->status);
	opcode_ok = vrnic_wc_opcode(cqe->opcode, &w->opcode);
	if (!status_ok || !opcode_ok) {
		/* What the device wrote, for whoever debugs it. */
		w->status = IBV_WC_GENERAL_ERR;
		w->vendor_err = cqe->status | (uint32_t)cqe->opcode << 8;
	}
	w->byte_len = le32toh(cqe->byte_len);
	qpn = le32toh(cqe->qpn);
	w->qp_num = qpn;
	w->src_qp = le32toh(cqe->src_qp);
	if (cqe->wc_flags & VRNIC_CQE_WITH_IMM) {
		w->wc_flags |= IBV_WC_WITH_IMM;
		w->imm_data = (__force __be32)cqe->imm_data;
	}
	if (cqe->wc_flags & VRNIC_CQE_WITH_INV) {
		w->wc_flags |= IBV_WC_WITH_INV;
		w->invalidated_rkey = le32toh(cqe->imm_data);
	}
	if (cqe->wc_flags & VRNIC_CQE_GRH)
		w->wc_flags |= IBV_WC_GRH;
	/*
	 * A completion frees its WQE and every WQE before it.  With an
	 * opcode the spec does not define it is not known which queue's:
	 * free none rather than let a poster overwrite WQEs the device may
	 * still read.  REG_MR (a WQE asked for it) is the send queue's.
	 */
	qp = vrnic_qp_lookup(ctx, qpn);
	if (qp && qp->qpn == qpn &&
	    (opcode_ok || cqe->opcode == VRNIC_WC_REG_MR)) {
		if (cqe->opcode & VRNIC_WC_RECV)
			vrnic_set_tail(&qp->rq_tail, le32toh(cqe->wqe_idx) + 1);
		else
			vrnic_set_tail(&qp->sq_tail, le32toh(cqe->wqe_idx) + 1);
	}
	cq->ci++;
	return 0;
}

int vrnic_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct vrnic_context *ctx = to_vctx(ibcq->context);
	struct vrnic_cq *cq = to_vcq(ibcq);
	int n = 0;

	vrnic_spin_lock(&cq->lock);
	while (n < ne && !vrnic_poll_one(ctx, cq, &wc[n]))
		n++;
	if (n)
		cq->dbrec->ci = htole32(cq->ci);
	vrnic_spin_unlock(&cq->lock);
	return n;
}

/*
 * Drop QP qpn's completions from cq, as mlx5's __mlx5_cq_clean does: find
 * the producer end (the first entry the device still owns), walk back to
 * the consumer index, and move every other QP's entry up over the dropped
 * ones; the consumer index then skips the freed slots.  Lock held.  The
 * device never writes the slots between ci and the producer end (they are
 * the consumer's until ci passes them).
 */
static void vrnic_cq_clean(struct vrnic_cq *cq, uint32_t qpn)
{
	uint32_t mask = (1u << cq->log_depth) - 1, pi, i, nfreed = 0;
	struct vrnic_cqe *src, *dst;
	uint8_t owner;

	for (pi = cq->ci; pi - cq->ci <= mask; pi++) {
		src = &cq->ring[pi & mask];
		owner = ((pi >> cq->log_depth) & 1) ? 0 : VRNIC_CQE_OWNER;
		if ((src->owner & VRNIC_CQE_OWNER) != owner)
			break;
	}
	udma_from_device_barrier();
	for (i = pi; i-- != cq->ci;) {
		src = &cq->ring[i & mask];
		if (le32toh(src->qpn) == qpn) {
			nfreed++;
		} else if (nfreed) {
			dst = &cq->ring[(i + nfreed) & mask];
			owner = (((i + nfreed) >> cq->log_depth) & 1) ?
				0 : VRNIC_CQE_OWNER;
			*dst = *src;
			dst->owner = (src->owner & ~VRNIC_CQE_OWNER) | owner;
		}
	}
	if (nfreed) {
		cq->ci += nfreed;
		udma_to_device_barrier();
		cq->dbrec->ci = htole32(cq->ci);
	}
}

/* Purge qp's completions from its CQs, one CQ lock at a time. */
void vrnic_qp_clean_cqs(struct vrnic_qp *qp)
{
	struct ibv_cq *cqs[2] = { qp->vqp.qp.send_cq, qp->vqp.qp.recv_cq };
	int i;

	for (i = 0; i < 2; i++) {
		struct vrnic_cq *cq;

		if (!cqs[i] || (i == 1 && cqs[1] == cqs[0]))
			continue;
		cq = to_vcq(cqs[i]);
		vrnic_spin_lock(&cq->lock);
		vrnic_cq_clean(cq, qp->qpn);
		vrnic_spin_unlock(&cq->lock);
	}
}

/* ibv_cq_ex: start_poll/next_poll/end_poll over the same CQEs. */
static struct vrnic_cq *cqx_to_vcq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct vrnic_cq, vcq.cq_ex);
}

static int vrnic_cqx_fill(struct ibv_cq_ex *cqx)
{
	struct vrnic_cq *cq = cqx_to_vcq(cqx);
	int ret = vrnic_poll_one(to_vctx(cqx->context), cq, &cq->cur);

	if (ret)
		return ret;
	cqx->wr_id = cq->cur.wr_id;
	cqx->status = cq->cur.status;
	return 0;
}

static int vrnic_cqx_start_poll(struct ibv_cq_ex *cqx,
				struct ibv_poll_cq_attr *attr)
{
	struct vrnic_cq *cq = cqx_to_vcq(cqx);
	int ret;

	if (attr->comp_mask)
		return EINVAL;
	vrnic_spin_lock(&cq->lock);
	ret = vrnic_cqx_fill(cqx);
	if (ret)
		vrnic_spin_unlock(&cq->lock);
	return ret;
}

static int vrnic_cqx_next_poll(struct ibv_cq_ex *cqx)
{
	return vrnic_cqx_fill(cqx);
}

static void vrnic_cqx_end_poll(struct ibv_cq_ex *cqx)
{
	struct vrnic_cq *cq = cqx_to_vcq(cqx);

	cq->dbrec->ci = htole32(cq->ci);
	vrnic_spin_unlock(&cq->lock);
}

static enum ibv_wc_opcode vrnic_cqx_read_opcode(struct ibv_cq_ex *cqx)
{
	return cqx_to_vcq(cqx)->cur.opcode;
}

static uint32_t vrnic_cqx_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return cqx_to_vcq(cqx)->cur.vendor_err;
}

static unsigned int vrnic_cqx_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return cqx_to_vcq(cqx)->cur.wc_flags;
}

static uint32_t vrnic_cqx_read_byte_len(struct ibv_cq_ex *cqx)
{
	return cqx_to_vcq(cqx)->cur.byte_len;
}

static __be32 vrnic_cqx_read_imm_data(struct ibv_cq_ex *cqx)
{
	struct vrnic_cq *cq = cqx_to_vcq(cqx);

	/* ibv_wc_read_invalidated_rkey() byte-swaps what this returns. */
	if (cq->cur.wc_flags & IBV_WC_WITH_INV)
		return htobe32(cq->cur.invalidated_rkey);
	return cq->cur.imm_data;
}

static uint32_t vrnic_cqx_read_qp_num(struct ibv_cq_ex *cqx)
{
	return cqx_to_vcq(cqx)->cur.qp_num;
}

static uint32_t vrnic_cqx_read_src_qp(struct ibv_cq_ex *cqx)
{
	return cqx_to_vcq(cqx)->cur.src_qp;
}

static uint32_t vrnic_cqx_read_zero32(struct ibv_cq_ex *cqx)
{
	return 0;
}

static uint8_t vrnic_cqx_read_zero8(struct ibv_cq_ex *cqx)
{
	return 0;
}

#define VRNIC_CQX_WC_FLAGS (IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | \
			    IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP | \
			    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL | \
			    IBV_WC_EX_WITH_DLID_PATH_BITS)

struct ibv_cq_ex *vrnic_create_cq_ex(struct ibv_context *ctx,
				     struct ibv_cq_init_attr_ex *attr)
{
	struct uvrnic_create_cq_ex_resp resp = {};
	struct uvrnic_create_cq_ex cmd = {};
	struct ibv_cq_ex *cqx;
	struct vrnic_cq *cq;
	bool single;
	int err;

	/*
	 * SINGLE_THREADED: the CQ goes without its lock.  IGNORE_OVERRUN
	 * and parent domains are not supported.
	 */
	if ((attr->wc_flags & ~VRNIC_CQX_WC_FLAGS) ||
	    (attr->comp_mask & ~IBV_CQ_INIT_ATTR_MASK_FLAGS) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~IBV_CREATE_CQ_ATTR_SINGLE_THREADED))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	single = (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
		 (attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	cq = vrnic_cq_alloc(to_vctx(ctx), attr->cqe, !single);
	if (!cq)
		return NULL;
	cmd.buf_addr = (uintptr_t)cq->ring;
	cmd.dbrec_addr = (uintptr_t)cq->dbrec;
	cmd.log_depth = cq->log_depth;
	if (ibv_cmd_create_cq_ex(ctx, attr, &cq->vcq, &cmd.ibv_cmd, sizeof(cmd),
				 &resp.ibv_resp, sizeof(resp), 0)) {
		vrnic_cq_free(cq);
		return NULL;
	}
	cq->cqn = resp.cqn;
	err = vrnic_cq_answer(cq, attr->cqe, &resp.drv_payload);
	if (err) {
		vrnic_cq_refuse(cq, err);
		return NULL;
	}
	cqx = &cq->vcq.cq_ex;
	cqx->start_poll = vrnic_cqx_start_poll;
	cqx->next_poll = vrnic_cqx_next_poll;
	cqx->end_poll = vrnic_cqx_end_poll;
	cqx->read_opcode = vrnic_cqx_read_opcode;
	cqx->read_vendor_err = vrnic_cqx_read_vendor_err;
	cqx->read_wc_flags = vrnic_cqx_read_wc_flags;
	cqx->read_byte_len = vrnic_cqx_read_byte_len;
	cqx->read_imm_data = vrnic_cqx_read_imm_data;
	cqx->read_qp_num = vrnic_cqx_read_qp_num;
	cqx->read_src_qp = vrnic_cqx_read_src_qp;
	cqx->read_slid = vrnic_cqx_read_zero32;
	cqx->read_sl = vrnic_cqx_read_zero8;
	cqx->read_dlid_path_bits = vrnic_cqx_read_zero8;
	return cqx;
}

int vrnic_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct vrnic_context *ctx = to_vctx(ibcq->context);
	struct vrnic_cq *cq = to_vcq(ibcq);
	uint32_t cmd = solicited_only ? VRNIC_CQ_ARM_SOLICITED :
					VRNIC_CQ_ARM_NEXT;

	/*
	 * The device reads dbrec->ci at the arm (spec, "Doorbells"): under
	 * the CQ's lock, the ci a poll on another thread stored is in it.
	 */
	vrnic_spin_lock(&cq->lock);
	udma_to_device_barrier();
	mmio_write32_le((uint8_t *)ctx->db_page + VRNIC_DB_CQ_ARM,
			htole32(VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CQN, cq->cqn) |
				VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CMD, cmd)));
	vrnic_spin_unlock(&cq->lock);
	return 0;
}

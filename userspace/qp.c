// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic provider: queue pairs.  post_send and post_recv (and the ibv_wr_*
 * API) write WQEs into rings in this process's memory, the producer index
 * into the doorbell record and the QP number into this context's doorbell
 * page.
 */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ccan/array_size.h>
#include <ccan/minmax.h>
#include <util/mmio.h>
#include <util/udma_barrier.h>
#include <util/util.h>

#include <infiniband/driver.h>

#include "vrnic.h"
#include "vrnic_abi.h"

/*
 * The work requests each QP type carries (bit per enum vrnic_wr_opcode),
 * the device's own table (spec, "Queue pairs"): anything else is refused
 * at post time with EINVAL, as IBA and rxe do, rather than completing with
 * LOC_QP_OP_ERR and moving the QP to ERR.  REG_MR is the kernel's.
 */
#define VRNIC_OP(op)	(1u << (op))
#define VRNIC_OPS_UD	(VRNIC_OP(VRNIC_WR_SEND) | VRNIC_OP(VRNIC_WR_SEND_IMM))
#define VRNIC_OPS_UC	(VRNIC_OPS_UD | VRNIC_OP(VRNIC_WR_RDMA_WRITE) | \
			 VRNIC_OP(VRNIC_WR_RDMA_WRITE_IMM) | \
			 VRNIC_OP(VRNIC_WR_LOCAL_INV) | VRNIC_OP(VRNIC_WR_BIND_MW))
#define VRNIC_OPS_RC	((VRNIC_OP(VRNIC_WR_BIND_MW + 1) - 1) & \
			 ~VRNIC_OP(VRNIC_WR_REG_MR))
#define VRNIC_OPS_XRC	(VRNIC_OPS_RC & ~(VRNIC_OP(VRNIC_WR_ATOMIC_WRITE) | \
					  VRNIC_OP(VRNIC_WR_FLUSH)))
/* IBV_SEND_INLINE carries the data of a SEND or an RDMA WRITE only. */
#define VRNIC_OPS_INLINE (VRNIC_OP(VRNIC_WR_SEND) | \
			  VRNIC_OP(VRNIC_WR_SEND_IMM) | \
			  VRNIC_OP(VRNIC_WR_SEND_INV) | \
			  VRNIC_OP(VRNIC_WR_RDMA_WRITE) | \
			  VRNIC_OP(VRNIC_WR_RDMA_WRITE_IMM))
#define VRNIC_SEND_FLAGS (IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | \
			  IBV_SEND_FENCE | IBV_SEND_INLINE)

/* The operations a QP type takes. */
static uint32_t vrnic_qp_type_ops(uint8_t type)
{
	uint32_t ops = VRNIC_OPS_RC;

	switch (type) {
	case VRNIC_QPT_RC:
		return ops;
	case VRNIC_QPT_XRC_INI:
		return ops & VRNIC_OPS_XRC;
	case VRNIC_QPT_UC:
		return ops & VRNIC_OPS_UC;
	case VRNIC_QPT_UD:
		return ops & VRNIC_OPS_UD;
	default:		/* XRC_TGT: no send queue here */
		return 0;
	}
}

/* ------------------------------------------------------------------ QP */

static uint32_t vrnic_sq_shift(uint8_t type, uint32_t max_sge,
			       uint32_t max_inline)
{
	uint32_t sge = max_sge * sizeof(struct vrnic_sge);
	uint32_t need = vrnic_send_wqe_data_off(type) +
			(sge > max_inline ? sge : max_inline);
	uint32_t s = vrnic_log2(need);

	return s < 6 ? 6 : s;
}

uint32_t vrnic_rq_shift(uint32_t max_sge)
{
	uint32_t s = vrnic_log2(sizeof(struct vrnic_recv_wqe) +
				max_sge * sizeof(struct vrnic_sge));

	return s < 5 ? 5 : s;
}

/* Both spin locks of a QP, or neither (errno set). */
static int vrnic_qp_init_locks(struct vrnic_qp *qp)
{
	int ret = pthread_spin_init(&qp->sq_lock, PTHREAD_PROCESS_PRIVATE);

	if (!ret) {
		ret = pthread_spin_init(&qp->rq_lock, PTHREAD_PROCESS_PRIVATE);
		if (ret)
			pthread_spin_destroy(&qp->sq_lock);
	}
	if (ret)
		errno = ret;
	return ret;
}

/* Free a QP whose locks vrnic_qp_init_locks() initialised. */
static void vrnic_qp_free(struct vrnic_qp *qp)
{
	pthread_spin_destroy(&qp->sq_lock);
	pthread_spin_destroy(&qp->rq_lock);
	vrnic_free_queue(qp->sq, qp->sq_size);
	vrnic_free_queue(qp->rq, qp->rq_size);
	if (qp->dbrec)
		vrnic_dbrec_free(qp->vctx, qp->dbrec);
	free(qp);
}

/* Size and allocate the rings for cap; fill the create command. */
static struct vrnic_qp *vrnic_qp_alloc(struct ibv_context *ctx,
				       enum ibv_qp_type type, struct ibv_srq *srq,
				       struct ibv_qp_cap *cap, int sq_sig_all,
				       struct vrnic_create_qp_cmd *cmd)
{
	struct vrnic_qp *qp;
	uint8_t hw_type;
	bool no_rq = srq;

	switch (type) {
	case IBV_QPT_RC:
		hw_type = VRNIC_QPT_RC;
		break;
	case IBV_QPT_XRC_SEND:	/* an RC requester without a receive side */
		hw_type = VRNIC_QPT_XRC_INI;
		no_rq = true;
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
		break;
	case IBV_QPT_UC:
		hw_type = VRNIC_QPT_UC;
		break;
	case IBV_QPT_UD:
		hw_type = VRNIC_QPT_UD;
		break;
	default:
		errno = EOPNOTSUPP;
		return NULL;
	}

	if (cap->max_send_wr > (1u << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    cap->max_recv_wr > (1u << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    cap->max_send_sge > VRNIC_MAX_SGE ||
	    cap->max_recv_sge > VRNIC_MAX_SGE ||
	    cap->max_inline_data > VRNIC_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;
	if (vrnic_qp_init_locks(qp)) {
		free(qp);
		return NULL;
	}
	qp->sq_log = vrnic_log2(cap->max_send_wr ? cap->max_send_wr : 1);
	qp->rq_log = vrnic_log2(cap->max_recv_wr ? cap->max_recv_wr : 1);
	qp->vctx = to_vctx(ctx);
	qp->type = hw_type;
	qp->ops = vrnic_qp_type_ops(hw_type);
	qp->data_off = vrnic_send_wqe_data_off(hw_type);
	qp->sq_shift = vrnic_sq_shift(hw_type, cap->max_send_sge,
				      cap->max_inline_data);
	qp->rq_shift = vrnic_rq_shift(cap->max_recv_sge);
	qp->sq_size = (size_t)1 << (qp->sq_log + qp->sq_shift);
	qp->rq_size = no_rq ? 0 : (size_t)1 << (qp->rq_log + qp->rq_shift);
	qp->sq = vrnic_alloc_queue(qp->sq_size);
	if (qp->sq && !no_rq)
		qp->rq = vrnic_alloc_queue(qp->rq_size);
	if (qp->sq && (qp->rq || no_rq))
		qp->dbrec = vrnic_dbrec_alloc(qp->vctx);
	if (!qp->dbrec) {
		int err = errno;

		vrnic_qp_free(qp);
		errno = err;
		return NULL;
	}
	qp->sig_all = sq_sig_all;
	cmd->sq_addr = (uintptr_t)qp->sq;
	cmd->rq_addr = (uintptr_t)qp->rq;
	cmd->dbrec_addr = (uintptr_t)qp->dbrec;
	cmd->sq_log_depth = qp->sq_log;
	cmd->rq_log_depth = qp->rq_log;
	cmd->sq_wqe_shift = qp->sq_shift;
	cmd->rq_wqe_shift = qp->rq_shift;
	return qp;
}

/*
 * Whether 1 << (log + shift) bytes fit a ring of size bytes, with the
 * stride within the kernel's limit (1 KiB send WQEs, 512-byte receive).
 */
static bool vrnic_ring_fits(uint32_t log, uint32_t shift, uint32_t max_shift,
			    size_t size)
{
	return log <= VRNIC_MAX_WQ_LOG_DEPTH && shift <= max_shift &&
	       (size_t)1 << (log + shift) <= size;
}

/*
 * The kernel's answer (spec "User ABI"): the depths, strides and limits it
 * programmed.  It must fit the rings sized from the proposal, each stride
 * must hold its limits, and the QP must hold what was asked (want).  Then it is the
 * QP's, for indexing and post-time checks, and the caller's cap.  0 or an
 * errno.
 */
static int vrnic_qp_answer(struct vrnic_qp *qp, const struct ibv_qp_cap *want,
			   const struct vrnic_create_qp_resp *resp,
			   struct ibv_qp_cap *cap)
{
	const struct vrnic_create_qp_resp a = *resp;
	bool rq = qp->rq;

	/* No RQ: its fields are 0, not a ring we lack. */
	if (!rq && (a.rq_log_depth || a.rq_wqe_shift || a.max_recv_sge))
		return EINVAL;
	if (!vrnic_ring_fits(a.sq_log_depth, a.sq_wqe_shift, 10,
			     qp->sq_size) ||
	    a.max_send_sge > VRNIC_MAX_SGE || a.max_inline > VRNIC_MAX_INLINE ||
	    qp->data_off + a.max_send_sge * sizeof(struct vrnic_sge) >
	    1u << a.sq_wqe_shift ||
	    qp->data_off + a.max_inline > 1u << a.sq_wqe_shift ||
	    1u << a.sq_log_depth < want->max_send_wr ||
	    a.max_send_sge < want->max_send_sge ||
	    a.max_inline < want->max_inline_data)
		return EINVAL;
	if (rq && (!vrnic_ring_fits(a.rq_log_depth, a.rq_wqe_shift, 9,
				    qp->rq_size) ||
		   a.max_recv_sge > VRNIC_MAX_SGE ||
		   sizeof(struct vrnic_recv_wqe) +
		   a.max_recv_sge * sizeof(struct vrnic_sge) >
		   1u << a.rq_wqe_shift ||
		   1u << a.rq_log_depth < want->max_recv_wr ||
		   a.max_recv_sge < want->max_recv_sge))
		return EINVAL;
	qp->sq_log = a.sq_log_depth;
	qp->sq_shift = a.sq_wqe_shift;
	qp->max_send_sge = a.max_send_sge;
	qp->max_inline = a.max_inline;
	qp->rq_log = rq ? a.rq_log_depth : 0;
	qp->rq_shift = rq ? a.rq_wqe_shift : 0;
	qp->max_recv_sge = rq ? a.max_recv_sge : 0;
	cap->max_send_wr = 1u << qp->sq_log;
	cap->max_send_sge = qp->max_send_sge;
	cap->max_inline_data = qp->max_inline;
	cap->max_recv_wr = rq ? 1u << qp->rq_log : 0;
	cap->max_recv_sge = qp->max_recv_sge;
	return 0;
}

/*
 * qpn's qp_table slot, under qp_table_mutex; with make, its page is
 * allocated and published if it has none yet.  NULL: no page (or no
 * memory for one).
 */
static struct vrnic_qp **vrnic_qp_slot(struct vrnic_context *ctx,
				       uint32_t qpn, bool make)
{
	uint32_t idx = qpn & VRNIC_OBJ_INDEX_MASK;
	struct vrnic_qp ***page = &ctx->qp_table[idx >> VRNIC_QP_TABLE_SHIFT];

	if (!*page && make) {
		struct vrnic_qp **p = calloc(VRNIC_QP_TABLE_MASK + 1, sizeof(*p));

		if (!p)
			return NULL;
		__atomic_store_n(page, p, __ATOMIC_RELEASE);
	}
	return *page ? &(*page)[idx & VRNIC_QP_TABLE_MASK] : NULL;
}

/*
 * The kernel created the QP: take its answer and publish the QP, or
 * destroy it (errno set, NULL).
 */
static struct vrnic_qp *vrnic_qp_ready(struct vrnic_context *ctx,
				       struct vrnic_qp *qp,
				       const struct ibv_qp_cap *want,
				       const struct vrnic_create_qp_resp *resp,
				       struct ibv_qp_cap *cap)
{
	int err = vrnic_qp_answer(qp, want, resp, cap);
	struct vrnic_qp **slot;

	if (err) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		vrnic_qp_free(qp);
		errno = err;
		return NULL;
	}
	qp->qpn = resp->qpn;
	pthread_mutex_lock(&ctx->qp_table_mutex);
	slot = vrnic_qp_slot(ctx, qp->qpn, true);
	if (slot)
		__atomic_store_n(slot, qp, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ctx->qp_table_mutex);
	if (!slot) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		vrnic_qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	return qp;
}

struct ibv_qp *vrnic_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr)
{
	struct uvrnic_create_qp_resp resp = {};
	struct uvrnic_create_qp cmd = {};
	struct ibv_qp_cap want;
	struct vrnic_qp *qp;

	qp = vrnic_qp_alloc(pd->context, attr->qp_type, attr->srq, &attr->cap,
			    attr->sq_sig_all, &cmd.drv_payload);
	if (!qp)
		return NULL;
	want = attr->cap;
	if (ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd.ibv_cmd, sizeof(cmd),
			      &resp.ibv_resp, sizeof(resp))) {
		vrnic_qp_free(qp);
		return NULL;
	}
	qp = vrnic_qp_ready(to_vctx(pd->context), qp, &want, &resp.drv_payload,
			    &attr->cap);
	return qp ? &qp->vqp.qp : NULL;
}

/* WQEs, then the producer index, then the doorbell.  SQ lock held. */
static void vrnic_ring_sq(struct vrnic_context *ctx, struct vrnic_qp *qp)
{
	udma_to_device_barrier();
	qp->dbrec->sq_pi = htole32(qp->sq_head);
	udma_to_device_barrier();
	mmio_write32_le((uint8_t *)ctx->db_page + VRNIC_DB_SQ, htole32(qp->qpn));
}

/* ----------------------------------------------------- ibv_wr_* API */

static struct vrnic_qp *qpx_to_vqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct vrnic_qp, vqp.qp_ex);
}

static void vrnic_wr_start(struct ibv_qp_ex *qpx)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	pthread_spin_lock(&qp->sq_lock);
	qp->wr_start_head = qp->sq_head;
	qp->wr_cur = NULL;
	qp->wr_err = 0;
}

/* Open the next WQE of opcode op; NULL (and wr_err) when the SQ is full. */
static struct vrnic_send_wqe *vrnic_wr_new(struct vrnic_qp *qp, uint8_t op)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct vrnic_send_wqe *w;

	qp->wr_cur = NULL;
	if (qp->wr_err)
		return NULL;
	if (!(qp->ops & VRNIC_OP(op)) || (qpx->wr_flags & ~VRNIC_SEND_FLAGS)) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	if (qp->sq_head - vrnic_tail(&qp->sq_tail) >= (1u << qp->sq_log)) {
		qp->wr_err = ENOMEM;
		return NULL;
	}
	w = (struct vrnic_send_wqe *)(qp->sq +
		((size_t)(qp->sq_head & ((1u << qp->sq_log) - 1)) << qp->sq_shift));
	memset(w, 0, sizeof(*w));
	w->wr_id = htole64(qpx->wr_id);
	w->opcode = op;
	if ((qpx->wr_flags & IBV_SEND_SIGNALED) || qp->sig_all)
		w->flags |= VRNIC_WQE_SIGNALED;
	if (qpx->wr_flags & IBV_SEND_SOLICITED)
		w->flags |= VRNIC_WQE_SOLICITED;
	if (qpx->wr_flags & IBV_SEND_FENCE)
		w->flags |= VRNIC_WQE_FENCE;
	qp->sq_head++;
	qp->wr_cur = w;
	return w;
}

static void vrnic_wr_send(struct ibv_qp_ex *qpx)
{
	vrnic_wr_new(qpx_to_vqp(qpx), VRNIC_WR_SEND);
}

static void vrnic_wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm)
{
	struct vrnic_send_wqe *w = vrnic_wr_new(qpx_to_vqp(qpx),
						VRNIC_WR_SEND_IMM);

	if (w)
		w->imm_data = (__force __le32)imm;
}

static void vrnic_wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct vrnic_send_wqe *w = vrnic_wr_new(qpx_to_vqp(qpx),
						VRNIC_WR_SEND_INV);

	if (w)
		w->rkey = htole32(invalidate_rkey);
}

static void vrnic_wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct vrnic_send_wqe *w = vrnic_wr_new(qpx_to_vqp(qpx),
						VRNIC_WR_LOCAL_INV);

	if (w)
		w->rkey = htole32(invalidate_rkey);
}

static void vrnic_wr_rdma(struct ibv_qp_ex *qpx, uint8_t op, uint32_t rkey,
			  uint64_t raddr)
{
	struct vrnic_send_wqe *w = vrnic_wr_new(qpx_to_vqp(qpx), op);

	if (w) {
		w->remote_addr = htole64(raddr);
		w->rkey = htole32(rkey);
	}
}

static void vrnic_wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t raddr)
{
	vrnic_wr_rdma(qpx, VRNIC_WR_RDMA_WRITE, rkey, raddr);
}

static void vrnic_wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
				    uint64_t raddr, __be32 imm)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	vrnic_wr_rdma(qpx, VRNIC_WR_RDMA_WRITE_IMM, rkey, raddr);
	if (qp->wr_cur)
		qp->wr_cur->imm_data = (__force __le32)imm;
}

static void vrnic_wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			       uint64_t raddr)
{
	vrnic_wr_rdma(qpx, VRNIC_WR_RDMA_READ, rkey, raddr);
}

static void vrnic_wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
				    uint64_t raddr, uint64_t compare,
				    uint64_t swap)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	vrnic_wr_rdma(qpx, VRNIC_WR_ATOMIC_CMP_SWP, rkey, raddr);
	if (qp->wr_cur) {
		qp->wr_cur->compare_add = htole64(compare);
		qp->wr_cur->swap = htole64(swap);
	}
}

static void vrnic_wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				      uint64_t raddr, uint64_t add)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	vrnic_wr_rdma(qpx, VRNIC_WR_ATOMIC_FETCH_ADD, rkey, raddr);
	if (qp->wr_cur)
		qp->wr_cur->compare_add = htole64(add);
}

/* The 8 bytes travel in the WQE, in memory order; no SGE follows. */
static void vrnic_wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
				  uint64_t raddr, const void *atomic_wr)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	vrnic_wr_rdma(qpx, VRNIC_WR_ATOMIC_WRITE, rkey, raddr);
	if (qp->wr_cur)
		memcpy(&qp->wr_cur->compare_add, atomic_wr, 8);
}

static void vrnic_wr_flush(struct ibv_qp_ex *qpx, uint32_t rkey,
			   uint64_t raddr, size_t len, uint8_t type,
			   uint8_t level)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	vrnic_wr_rdma(qpx, VRNIC_WR_FLUSH, rkey, raddr);
	if (qp->wr_cur) {
		qp->wr_cur->compare_add = htole64(len);
		qp->wr_cur->swap = htole64(type |
					   (uint64_t)level << VRNIC_FLUSH_LEVEL_SHIFT);
	}
}

/*
 * Fill the BIND_MW part of a WQE whose wr_id, opcode and flags are set:
 * window mw gets rkey (same index, the consumer's new key byte) over
 * info's range.  The device checks the rest against its own tables.
 */
static int vrnic_fill_bind(struct vrnic_send_wqe *w, struct ibv_mw *mw,
			   uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct vrnic_bind_mw_wqe *b = (struct vrnic_bind_mw_wqe *)w;
	uint32_t access = 0;

	if ((rkey ^ mw->rkey) & ~0xffu)
		return EINVAL;
	if (!info->mr && (info->addr || info->length))
		return EINVAL;
	if (info->mw_access_flags & ~(IBV_ACCESS_LOCAL_WRITE |
				      IBV_ACCESS_REMOTE_WRITE |
				      IBV_ACCESS_REMOTE_READ |
				      IBV_ACCESS_REMOTE_ATOMIC))
		return EINVAL;	/* zero-based windows among them */
	if (info->mw_access_flags & IBV_ACCESS_REMOTE_WRITE)
		access |= VRNIC_ACCESS_REMOTE_WRITE;
	if (info->mw_access_flags & IBV_ACCESS_REMOTE_READ)
		access |= VRNIC_ACCESS_REMOTE_READ;
	if (info->mw_access_flags & IBV_ACCESS_REMOTE_ATOMIC)
		access |= VRNIC_ACCESS_REMOTE_ATOMIC;
	b->mw_type = mw->type == IBV_MW_TYPE_1 ? VRNIC_MW_TYPE_1 :
						 VRNIC_MW_TYPE_2;
	b->new_key = rkey & 0xff;
	b->access = htole32(access);
	b->addr = htole64(info->addr);
	b->mw_key = htole32(mw->rkey);
	b->mr_key = htole32(info->mr ? info->mr->lkey : 0);
	b->length = htole64(info->length);
	return 0;
}

/* ibv_wr_bind_mw() and IBV_WR_BIND_MW bind type 2 windows only. */
static void vrnic_wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
			     uint32_t rkey,
			     const struct ibv_mw_bind_info *bind_info)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);
	struct vrnic_send_wqe *w = vrnic_wr_new(qp, VRNIC_WR_BIND_MW);

	if (!w)
		return;
	if (mw->type != IBV_MW_TYPE_2)
		qp->wr_err = EINVAL;
	else
		qp->wr_err = vrnic_fill_bind(w, mw, rkey, bind_info);
}

static void vrnic_wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
				  const struct ibv_sge *sg)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);
	struct vrnic_send_wqe *w = qp->wr_cur;
	struct vrnic_sge *sge;
	size_t i;

	if (!w)
		return;
	if (num_sge > qp->max_send_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	sge = (struct vrnic_sge *)((uint8_t *)w + qp->data_off);
	for (i = 0; i < num_sge; i++) {
		sge[i].addr = htole64(sg[i].addr);
		sge[i].length = htole32(sg[i].length);
		sge[i].lkey = htole32(sg[i].lkey);
	}
	w->num_sge = num_sge;
}

static void vrnic_wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey,
			     uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	vrnic_wr_set_sge_list(qpx, 1, &sge);
}

static void vrnic_wr_set_inline_data_list(struct ibv_qp_ex *qpx,
					  size_t num_buf,
					  const struct ibv_data_buf *buf)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);
	struct vrnic_send_wqe *w = qp->wr_cur;
	uint8_t *dst;
	size_t i, len = 0;

	if (!w)
		return;
	if (!(VRNIC_OPS_INLINE & VRNIC_OP(w->opcode))) {
		qp->wr_err = EINVAL;
		return;
	}
	dst = (uint8_t *)w + qp->data_off;
	for (i = 0; i < num_buf; i++) {
		if (buf[i].length > qp->max_inline - len) {	/* no wrap */
			qp->wr_err = EINVAL;
			return;
		}
		memcpy(dst + len, buf[i].addr, buf[i].length);
		len += buf[i].length;
	}
	w->flags |= VRNIC_WQE_INLINE;
	w->inline_len = htole32(len);
}

static void vrnic_wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
				     size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	vrnic_wr_set_inline_data_list(qpx, 1, &buf);
}

/*
 * The QP state post_send and post_recv go by: the provider's copy, from
 * the last successful modify_qp or query_qp (vrnic.h).  libibverbs'
 * qp->state is not written here; a QP the device moved to ERR is flushed
 * all the same, as ERR is postable.
 */
static enum ibv_qp_state vrnic_qp_state(struct ibv_qp *qp)
{
	return atomic_load_explicit(&to_vqp(qp)->state, memory_order_relaxed);
}

static void vrnic_qp_set_state(struct vrnic_qp *qp, enum ibv_qp_state s)
{
	atomic_store_explicit(&qp->state, s, memory_order_relaxed);
}

/*
 * IBA C10-97.2.1 and C10-49: the send queue takes work from RTS on (and is
 * flushed in ERR), the receive queue from INIT on.  Posting earlier is an
 * immediate error, as on every RNIC.
 */
static bool vrnic_sq_postable(struct ibv_qp *qp)
{
	enum ibv_qp_state s = vrnic_qp_state(qp);

	return s != IBV_QPS_RESET && s != IBV_QPS_INIT && s != IBV_QPS_RTR;
}

static int vrnic_wr_complete(struct ibv_qp_ex *qpx)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);
	struct vrnic_context *ctx = to_vctx(qpx->qp_base.context);
	int err = qp->wr_err;

	if (!err && qp->sq_head != qp->wr_start_head &&
	    !vrnic_sq_postable(&qpx->qp_base))
		err = EINVAL;

	if (err)
		qp->sq_head = qp->wr_start_head;	/* post nothing */
	else if (qp->sq_head != qp->wr_start_head)
		vrnic_ring_sq(ctx, qp);
	pthread_spin_unlock(&qp->sq_lock);
	return err;
}

static void vrnic_wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	if (qp->wr_cur && qp->type == VRNIC_QPT_XRC_INI)
		qp->wr_cur->xrc_srqn = htole32(remote_srqn);
}

static void vrnic_wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
				 uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);
	struct vrnic_ud_av *av;

	if (!qp->wr_cur || qp->type != VRNIC_QPT_UD)
		return;
	av = (struct vrnic_ud_av *)(qp->wr_cur + 1);
	*av = to_vah(ah)->av;
	av->dest_qpn = htole32(remote_qpn);
	av->qkey = htole32(remote_qkey);
}

static void vrnic_wr_abort(struct ibv_qp_ex *qpx)
{
	struct vrnic_qp *qp = qpx_to_vqp(qpx);

	qp->sq_head = qp->wr_start_head;
	pthread_spin_unlock(&qp->sq_lock);
}

#define VRNIC_SEND_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
			IBV_QP_EX_WITH_RDMA_WRITE | \
			IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
			IBV_QP_EX_WITH_RDMA_READ | \
			IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | \
			IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | \
			IBV_QP_EX_WITH_SEND_WITH_INV | \
			IBV_QP_EX_WITH_LOCAL_INV | \
			IBV_QP_EX_WITH_ATOMIC_WRITE | \
			IBV_QP_EX_WITH_FLUSH | \
			IBV_QP_EX_WITH_BIND_MW)

/* The device opcodes of send_ops_flags: they must be the QP type's. */
static uint32_t vrnic_send_ops(uint64_t flags)
{
	static const struct {
		uint64_t flag;
		uint8_t op;
	} map[] = {
		{ IBV_QP_EX_WITH_SEND, VRNIC_WR_SEND },
		{ IBV_QP_EX_WITH_SEND_WITH_IMM, VRNIC_WR_SEND_IMM },
		{ IBV_QP_EX_WITH_RDMA_WRITE, VRNIC_WR_RDMA_WRITE },
		{ IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, VRNIC_WR_RDMA_WRITE_IMM },
		{ IBV_QP_EX_WITH_RDMA_READ, VRNIC_WR_RDMA_READ },
		{ IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, VRNIC_WR_ATOMIC_CMP_SWP },
		{ IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, VRNIC_WR_ATOMIC_FETCH_ADD },
		{ IBV_QP_EX_WITH_SEND_WITH_INV, VRNIC_WR_SEND_INV },
		{ IBV_QP_EX_WITH_LOCAL_INV, VRNIC_WR_LOCAL_INV },
		{ IBV_QP_EX_WITH_ATOMIC_WRITE, VRNIC_WR_ATOMIC_WRITE },
		{ IBV_QP_EX_WITH_FLUSH, VRNIC_WR_FLUSH },
		{ IBV_QP_EX_WITH_BIND_MW, VRNIC_WR_BIND_MW },
	};
	uint32_t ops = 0;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(map); i++)
		if (flags & map[i].flag)
			ops |= VRNIC_OP(map[i].op);
	return ops;
}

/*
 * The receive side of XRC is a kernel QP with nothing in this process:
 * no rings, no doorbells.  This struct is only the handle.
 */
static struct vrnic_qp *vrnic_xrc_recv_alloc(void)
{
	struct vrnic_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	if (vrnic_qp_init_locks(qp)) {
		free(qp);
		return NULL;
	}
	qp->type = VRNIC_QPT_XRC_TGT;
	return qp;
}

static struct ibv_qp *vrnic_create_xrc_recv(struct ibv_context *ctx,
					    struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_create_qp cmd = {};
	struct vrnic_qp *qp;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) ||
	    (attr->comp_mask & ~(IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_PD))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = vrnic_xrc_recv_alloc();
	if (!qp)
		return NULL;
	if (ibv_cmd_create_qp_ex(ctx, &qp->vqp, attr, &cmd, sizeof(cmd), &resp,
				 sizeof(resp))) {
		vrnic_qp_free(qp);
		return NULL;
	}
	qp->qpn = resp.qpn;
	return &qp->vqp.qp;
}

struct ibv_qp *vrnic_open_qp(struct ibv_context *ctx,
			     struct ibv_qp_open_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp = {};
	struct ibv_open_qp cmd = {};
	struct vrnic_qp *qp;

	qp = vrnic_xrc_recv_alloc();
	if (!qp)
		return NULL;
	if (ibv_cmd_open_qp(ctx, &qp->vqp, sizeof(qp->vqp), attr, &cmd,
			    sizeof(cmd), &resp, sizeof(resp))) {
		vrnic_qp_free(qp);
		return NULL;
	}
	qp->qpn = resp.qpn;
	return &qp->vqp.qp;
}

struct ibv_qp *vrnic_create_qp_ex(struct ibv_context *ctx,
				  struct ibv_qp_init_attr_ex *attr)
{
	struct uvrnic_create_qp_resp resp = {};
	struct uvrnic_create_qp cmd = {};
	struct ibv_qp_cap want;
	struct ibv_qp_ex *qpx;
	struct vrnic_qp *qp;
	uint32_t mask;
	int ret;

	if (attr->qp_type == IBV_QPT_XRC_RECV)
		return vrnic_create_xrc_recv(ctx, attr);
	/* No creation flag is supported; asking for none is fine. */
	if ((attr->comp_mask & ~(IBV_QP_INIT_ATTR_PD |
				 IBV_QP_INIT_ATTR_SEND_OPS_FLAGS |
				 IBV_QP_INIT_ATTR_CREATE_FLAGS)) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	     attr->create_flags) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	     (attr->send_ops_flags & ~VRNIC_SEND_OPS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = vrnic_qp_alloc(ctx, attr->qp_type, attr->srq, &attr->cap,
			    attr->sq_sig_all, &cmd.drv_payload);
	if (!qp)
		return NULL;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
	    (vrnic_send_ops(attr->send_ops_flags) & ~qp->ops)) {
		vrnic_qp_free(qp);
		errno = EOPNOTSUPP;	/* an operation the QP type lacks */
		return NULL;
	}
	want = attr->cap;
	/* The legacy command has no room for (zero) creation flags. */
	mask = attr->comp_mask;
	attr->comp_mask &= ~IBV_QP_INIT_ATTR_CREATE_FLAGS;
	ret = ibv_cmd_create_qp_ex(ctx, &qp->vqp, attr, &cmd.ibv_cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp));
	attr->comp_mask = mask;
	if (ret) {
		vrnic_qp_free(qp);
		return NULL;
	}
	qp = vrnic_qp_ready(to_vctx(ctx), qp, &want, &resp.drv_payload,
			    &attr->cap);
	if (!qp)
		return NULL;
	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qpx = &qp->vqp.qp_ex;
		qpx->wr_start = vrnic_wr_start;
		qpx->wr_complete = vrnic_wr_complete;
		qpx->wr_abort = vrnic_wr_abort;
		qpx->wr_send = vrnic_wr_send;
		qpx->wr_send_imm = vrnic_wr_send_imm;
		qpx->wr_send_inv = vrnic_wr_send_inv;
		qpx->wr_local_inv = vrnic_wr_local_inv;
		qpx->wr_rdma_write = vrnic_wr_rdma_write;
		qpx->wr_rdma_write_imm = vrnic_wr_rdma_write_imm;
		qpx->wr_rdma_read = vrnic_wr_rdma_read;
		qpx->wr_atomic_cmp_swp = vrnic_wr_atomic_cmp_swp;
		qpx->wr_atomic_fetch_add = vrnic_wr_atomic_fetch_add;
		qpx->wr_atomic_write = vrnic_wr_atomic_write;
		qpx->wr_flush = vrnic_wr_flush;
		qpx->wr_bind_mw = vrnic_wr_bind_mw;
		qpx->wr_set_sge = vrnic_wr_set_sge;
		qpx->wr_set_sge_list = vrnic_wr_set_sge_list;
		qpx->wr_set_inline_data = vrnic_wr_set_inline_data;
		qpx->wr_set_inline_data_list = vrnic_wr_set_inline_data_list;
		qpx->wr_set_ud_addr = vrnic_wr_set_ud_addr;
		qpx->wr_set_xrc_srqn = vrnic_wr_set_xrc_srqn;
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	return &qp->vqp.qp;
}

/*
 * The device restarts a QP's SQ and RQ at index 0 on a move to RESET and
 * forgets its WQEs: purge the QP's completions, then start the rings and
 * the doorbell record again at zero.
 */
static void vrnic_qp_reset(struct vrnic_qp *qp)
{
	vrnic_qp_clean_cqs(qp);
	pthread_spin_lock(&qp->sq_lock);
	pthread_spin_lock(&qp->rq_lock);
	qp->sq_head = 0;
	qp->rq_head = 0;
	vrnic_set_tail(&qp->sq_tail, 0);
	vrnic_set_tail(&qp->rq_tail, 0);
	if (qp->dbrec) {
		qp->dbrec->sq_pi = 0;
		qp->dbrec->rq_pi = 0;
	}
	pthread_spin_unlock(&qp->rq_lock);
	pthread_spin_unlock(&qp->sq_lock);
}

int vrnic_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	struct vrnic_qp *vqp = to_vqp(qp);
	int ret;

	/*
	 * Only an agreement to something, or the QP's own transport on its
	 * move to RTR, needs the extended command: an agreement to nothing
	 * is what a plain modify_qp means, and a kernel without
	 * VRNIC_ALLOC_UCTX_RESP_ECE takes only that.
	 */
	bool ece = vqp->ece_set && vqp->ece_options;
	bool transport = vqp->dv_transport && (mask & IBV_QP_STATE) &&
			 attr->qp_state == IBV_QPS_RTR;

	if (ece || transport) {
		struct ib_uverbs_ex_modify_qp_resp resp = {};
		struct uvrnic_modify_qp_ex cmd_ex = {};

		if (ece) {
			cmd_ex.comp_mask |= VRNIC_MODIFY_QP_CMD_ECE;
			cmd_ex.ece_options = vqp->ece_options;
		}
		if (transport) {
			cmd_ex.comp_mask |= VRNIC_MODIFY_QP_CMD_TRANSPORT;
			cmd_ex.transport_flags = vqp->transport_flags;
			cmd_ex.send_window = vqp->send_window;
			cmd_ex.spray_paths = vqp->spray_paths;
		}
		ret = ibv_cmd_modify_qp_ex(qp, attr, mask, &cmd_ex.ibv_cmd,
					   sizeof(cmd_ex), &resp, sizeof(resp));
	} else {
		struct ibv_modify_qp cmd;

		ret = ibv_cmd_modify_qp(qp, attr, mask, &cmd, sizeof(cmd));
	}
	if (ret || !(mask & IBV_QP_STATE))
		return ret;
	/*
	 * ECE: a QP that reached RTR without ibv_set_ece agreed to nothing
	 * (a peer without ECE: librdmacm's passive side then sets nothing),
	 * and one moved to RESET starts over, as a new connection.
	 */
	if (attr->qp_state == IBV_QPS_RTR && !vqp->ece_set) {
		vqp->ece_set = true;
		vqp->ece_options = 0;
	} else if (attr->qp_state == IBV_QPS_RESET) {
		vqp->ece_set = false;
		vqp->ece_options = 0;
	}
	if (attr->qp_state == IBV_QPS_RESET &&
	    to_vqp(qp)->type != VRNIC_QPT_XRC_TGT)
		vrnic_qp_reset(to_vqp(qp));
	vrnic_qp_set_state(to_vqp(qp), attr->qp_state);
	return 0;
}

int vrnic_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;
	int ret;

	ret = ibv_cmd_query_qp(qp, attr, mask, init_attr, &cmd, sizeof(cmd));
	/* The kernel's state: ERR once the device moved the QP there. */
	if (!ret && (mask & IBV_QP_STATE))
		vrnic_qp_set_state(to_vqp(qp), attr->qp_state);
	return ret;
}

/* What a QP offers through ECE: the context's offer, on reliable QPs. */
static uint32_t vrnic_ece_offer(struct vrnic_qp *qp)
{
	struct vrnic_context *ctx = to_vctx(qp->vqp.qp.context);

	if (qp->type != VRNIC_QPT_RC && qp->type != VRNIC_QPT_XRC_INI &&
	    qp->type != VRNIC_QPT_XRC_TGT)
		return 0;
	return ctx->ece_offer;
}

/*
 * Both ends agree on the feature bits both offer, at the lower version;
 * selective repeat needs version 2 (vrnic-abi.h).  Nothing agreed is 0.
 */
static uint32_t vrnic_ece_agree(uint32_t offer, uint32_t peer)
{
	uint32_t ver = min(offer >> VRNIC_ECE_VERSION_SHIFT,
			   peer >> VRNIC_ECE_VERSION_SHIFT);
	uint32_t bits = offer & peer & ~VRNIC_ECE_VERSION_MASK;

	if (ver < VRNIC_ECE_VERSION_SR)
		bits &= ~VRNIC_ECE_SELECTIVE_REPEAT;
	return bits ? ver << VRNIC_ECE_VERSION_SHIFT | bits : 0;
}

/*
 * ibv_set_ece: the peer's options (rdma_cm passes those of the REQ or
 * REP, or 0 for a peer of another vendor or none).  What this QP offers
 * too is what it uses from its move to RTR; ibv_query_ece reports it.
 */
int vrnic_set_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	struct vrnic_context *ctx = to_vctx(ibqp->context);
	struct vrnic_qp *qp = to_vqp(ibqp);

	if (!ctx->has_ece)
		return errno = EOPNOTSUPP;
	if (ece->comp_mask || ece->vendor_id != VRNIC_PCI_VENDOR_ID)
		return errno = EINVAL;
	qp->ece_options = vrnic_ece_agree(vrnic_ece_offer(qp), ece->options);
	qp->ece_set = true;
	return 0;
}

/*
 * ibv_query_ece: what the QP offers, or once set (or moved to RTR), what
 * was agreed; for a QP with its own transport (vrnicdv), what it will
 * use (librdmacm reads it at rdma_create_qp, before vrnicdv can be
 * called, but an application that exchanges ECE itself is told the
 * truth).  The driver's debugfs
 * selective_repeat forces selective repeat beyond what ECE agreed;
 * restrack shows what is in effect.
 */
int vrnic_query_ece(struct ibv_qp *ibqp, struct ibv_ece *ece)
{
	struct vrnic_context *ctx = to_vctx(ibqp->context);
	struct vrnic_qp *qp = to_vqp(ibqp);

	if (!ctx->has_ece)
		return errno = EOPNOTSUPP;
	ece->vendor_id = VRNIC_PCI_VENDOR_ID;
	if (qp->dv_transport)
		ece->options = qp->transport_flags & VRNIC_MODIFY_QP_TRANSPORT_SR ?
			       VRNIC_ECE_VERSION_SR << VRNIC_ECE_VERSION_SHIFT |
			       VRNIC_ECE_SELECTIVE_REPEAT : 0;
	else
		ece->options = qp->ece_set ? qp->ece_options :
			       vrnic_ece_offer(qp);
	ece->comp_mask = 0;
	return 0;
}

int vrnic_destroy_qp(struct ibv_qp *ibqp)
{
	struct vrnic_context *ctx = to_vctx(ibqp->context);
	struct vrnic_qp *qp = to_vqp(ibqp);
	struct vrnic_qp **slot;
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	pthread_mutex_lock(&ctx->qp_table_mutex);
	slot = vrnic_qp_slot(ctx, qp->qpn, false);
	if (slot && *slot == qp)
		__atomic_store_n(slot, NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ctx->qp_table_mutex);
	/* After this no poller holds qp (locking order: vrnic.h). */
	if (qp->type != VRNIC_QPT_XRC_TGT)
		vrnic_qp_clean_cqs(qp);
	vrnic_qp_free(qp);
	return 0;
}

static int vrnic_wr_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return VRNIC_WR_SEND;
	case IBV_WR_SEND_WITH_IMM:
		return VRNIC_WR_SEND_IMM;
	case IBV_WR_RDMA_WRITE:
		return VRNIC_WR_RDMA_WRITE;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return VRNIC_WR_RDMA_WRITE_IMM;
	case IBV_WR_RDMA_READ:
		return VRNIC_WR_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return VRNIC_WR_ATOMIC_CMP_SWP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return VRNIC_WR_ATOMIC_FETCH_ADD;
	case IBV_WR_SEND_WITH_INV:
		return VRNIC_WR_SEND_INV;
	case IBV_WR_LOCAL_INV:
		return VRNIC_WR_LOCAL_INV;
	case IBV_WR_BIND_MW:
		return VRNIC_WR_BIND_MW;
	default:
		/* ATOMIC_WRITE, FLUSH: ibv_send_wr has no room for their
		 * operands; they are posted with ibv_wr_atomic_write() and
		 * ibv_wr_flush().
		 */
		return -1;
	}
}

static int vrnic_build_send(struct vrnic_qp *qp, struct ibv_send_wr *wr,
			    uint8_t *slot)
{
	struct vrnic_send_wqe *w = (struct vrnic_send_wqe *)slot;
	struct vrnic_sge *sge = (struct vrnic_sge *)(slot + qp->data_off);
	int op = vrnic_wr_opcode(wr->opcode);
	int i;

	if (op < 0 || !(qp->ops & VRNIC_OP(op)) ||
	    (wr->send_flags & ~VRNIC_SEND_FLAGS) ||
	    ((wr->send_flags & IBV_SEND_INLINE) &&
	     !(VRNIC_OPS_INLINE & VRNIC_OP(op))))
		return EINVAL;
	if (qp->type == VRNIC_QPT_UD) {
		struct vrnic_ud_av *av = (struct vrnic_ud_av *)(w + 1);

		if (!wr->wr.ud.ah)
			return EINVAL;
		*av = to_vah(wr->wr.ud.ah)->av;
		av->dest_qpn = htole32(wr->wr.ud.remote_qpn);
		av->qkey = htole32(wr->wr.ud.remote_qkey);
	}
	memset(w, 0, sizeof(*w));
	w->wr_id = htole64(wr->wr_id);
	w->opcode = op;
	if (qp->type == VRNIC_QPT_XRC_INI)
		w->xrc_srqn = htole32(wr->qp_type.xrc.remote_srqn);
	if ((wr->send_flags & IBV_SEND_SIGNALED) || qp->sig_all)
		w->flags |= VRNIC_WQE_SIGNALED;
	if (wr->send_flags & IBV_SEND_SOLICITED)
		w->flags |= VRNIC_WQE_SOLICITED;
	if (wr->send_flags & IBV_SEND_FENCE)
		w->flags |= VRNIC_WQE_FENCE;
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		w->imm_data = (__force __le32)wr->imm_data;
	switch (wr->opcode) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		w->remote_addr = htole64(wr->wr.rdma.remote_addr);
		w->rkey = htole32(wr->wr.rdma.rkey);
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = htole64(wr->wr.atomic.remote_addr);
		w->rkey = htole32(wr->wr.atomic.rkey);
		w->compare_add = htole64(wr->wr.atomic.compare_add);
		w->swap = htole64(wr->wr.atomic.swap);
		break;
	case IBV_WR_LOCAL_INV:
		w->rkey = htole32(wr->invalidate_rkey);
		return 0;
	case IBV_WR_SEND_WITH_INV:
		w->rkey = htole32(wr->invalidate_rkey);
		break;
	case IBV_WR_BIND_MW:
		if (wr->bind_mw.mw->type != IBV_MW_TYPE_2)
			return EINVAL;
		return vrnic_fill_bind(w, wr->bind_mw.mw, wr->bind_mw.rkey,
				       &wr->bind_mw.bind_info);
	default:
		break;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		uint8_t *dst = slot + qp->data_off;
		uint32_t len = 0;

		for (i = 0; i < wr->num_sge; i++) {
			if (wr->sg_list[i].length > qp->max_inline - len)
				return EINVAL;	/* len <= max_inline: no wrap */
			memcpy(dst + len, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		w->flags |= VRNIC_WQE_INLINE;
		w->inline_len = htole32(len);
		return 0;
	}
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_send_sge)
		return EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = htole64(wr->sg_list[i].addr);
		sge[i].length = htole32(wr->sg_list[i].length);
		sge[i].lkey = htole32(wr->sg_list[i].lkey);
	}
	w->num_sge = wr->num_sge;
	return 0;
}

int vrnic_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr)
{
	struct vrnic_context *ctx = to_vctx(ibqp->context);
	struct vrnic_qp *qp = to_vqp(ibqp);
	uint32_t start;
	int ret = 0;

	/* An XRC receive QP (or an ibv_open_qp handle of one) has no SQ. */
	if (!qp->sq || !vrnic_sq_postable(ibqp)) {
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->sq_lock);
	start = qp->sq_head;
	for (; wr; wr = wr->next) {
		uint8_t *slot;

		if (qp->sq_head - vrnic_tail(&qp->sq_tail) >= (1u << qp->sq_log)) {
			ret = ENOMEM;
			break;
		}
		slot = qp->sq + ((size_t)(qp->sq_head & ((1u << qp->sq_log) - 1))
				 << qp->sq_shift);
		ret = vrnic_build_send(qp, wr, slot);
		if (ret)
			break;
		qp->sq_head++;
	}
	if (ret)
		*bad_wr = wr;
	if (qp->sq_head != start)
		vrnic_ring_sq(ctx, qp);
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

int vrnic_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr)
{
	struct vrnic_context *ctx = to_vctx(ibqp->context);
	struct vrnic_qp *qp = to_vqp(ibqp);
	uint32_t start;
	int ret = 0;

	if (!qp->rq || vrnic_qp_state(ibqp) == IBV_QPS_RESET) {	/* or SRQ's */
		*bad_wr = wr;
		return EINVAL;
	}
	pthread_spin_lock(&qp->rq_lock);
	start = qp->rq_head;
	for (; wr; wr = wr->next) {
		if (qp->rq_head - vrnic_tail(&qp->rq_tail) >= (1u << qp->rq_log)) {
			ret = ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->max_recv_sge) {
			ret = EINVAL;
			break;
		}
		vrnic_fill_recv_wqe(qp->rq + ((size_t)(qp->rq_head &
			((1u << qp->rq_log) - 1)) << qp->rq_shift), wr);
		qp->rq_head++;
	}
	if (ret)
		*bad_wr = wr;
	if (qp->rq_head != start) {
		udma_to_device_barrier();
		qp->dbrec->rq_pi = htole32(qp->rq_head);
		udma_to_device_barrier();
		mmio_write32_le((uint8_t *)ctx->db_page + VRNIC_DB_RQ,
				htole32(qp->qpn));
	}
	pthread_spin_unlock(&qp->rq_lock);
	return ret;
}

/* ibv_bind_mw(): a type 1 window, bound through the QP's send queue. */
int vrnic_bind_mw(struct ibv_qp *ibqp, struct ibv_mw *mw,
		  struct ibv_mw_bind *mw_bind)
{
	struct vrnic_context *ctx = to_vctx(ibqp->context);
	struct vrnic_qp *qp = to_vqp(ibqp);
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct vrnic_send_wqe *w;
	int ret;

	if (mw->type != IBV_MW_TYPE_1 || mw->pd != ibqp->pd)
		return EINVAL;
	if (!qp->sq || !vrnic_sq_postable(ibqp))
		return EINVAL;
	/* As post_send: an operation the QP type lacks, or an unknown flag. */
	if (!(qp->ops & VRNIC_OP(VRNIC_WR_BIND_MW)) ||
	    (mw_bind->send_flags & ~(IBV_SEND_SIGNALED | IBV_SEND_FENCE)))
		return EINVAL;
	pthread_spin_lock(&qp->sq_lock);
	if (qp->sq_head - vrnic_tail(&qp->sq_tail) >= (1u << qp->sq_log)) {
		pthread_spin_unlock(&qp->sq_lock);
		return ENOMEM;
	}
	w = (struct vrnic_send_wqe *)(qp->sq +
		((size_t)(qp->sq_head & ((1u << qp->sq_log) - 1)) << qp->sq_shift));
	memset(w, 0, sizeof(*w));
	w->wr_id = htole64(mw_bind->wr_id);
	w->opcode = VRNIC_WR_BIND_MW;
	if ((mw_bind->send_flags & IBV_SEND_SIGNALED) || qp->sig_all)
		w->flags |= VRNIC_WQE_SIGNALED;
	if (mw_bind->send_flags & IBV_SEND_FENCE)
		w->flags |= VRNIC_WQE_FENCE;
	ret = vrnic_fill_bind(w, mw, rkey, &mw_bind->bind_info);
	if (!ret) {
		qp->sq_head++;
		vrnic_ring_sq(ctx, qp);
		/* The consumer undoes this if the bind completes in error. */
		mw->rkey = rkey;
	}
	pthread_spin_unlock(&qp->sq_lock);
	return ret;
}

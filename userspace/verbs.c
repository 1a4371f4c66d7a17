// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic provider verbs.  Control verbs go through the kernel; the data path
 * (post_send, post_recv, poll_cq, req_notify_cq) runs here: WQEs are
 * written into rings in this process's memory, the producer index into the
 * doorbell record, and the QP number into this context's doorbell page.
 */
#include <assert.h>
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <ccan/array_size.h>
#include <util/mmio.h>
#include <util/udma_barrier.h>
#include <util/util.h>

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
#include <rdma/vrnic-abi.h>
#include <kernel-abi/vrnic-abi.h>

#include "vrnic.h"

DECLARE_DRV_CMD(uvrnic_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		vrnic_create_cq_cmd, vrnic_create_cq_resp);
DECLARE_DRV_CMD(uvrnic_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ,
		vrnic_create_cq_cmd, vrnic_create_cq_resp);
DECLARE_DRV_CMD(uvrnic_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		vrnic_create_qp_cmd, vrnic_create_qp_resp);
DECLARE_DRV_CMD(uvrnic_create_ah, IB_USER_VERBS_CMD_CREATE_AH,
		empty, vrnic_create_ah_resp);
DECLARE_DRV_CMD(uvrnic_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		vrnic_create_srq_cmd, vrnic_create_srq_resp);
DECLARE_DRV_CMD(uvrnic_create_xsrq, IB_USER_VERBS_CMD_CREATE_XSRQ,
		vrnic_create_srq_cmd, vrnic_create_srq_resp);

#define VRNIC_PAGE	4096

/* NULL with errno set on failure, as every allocation here. */
static void *vrnic_alloc_queue(size_t size)
{
	void *p;
	int ret;

	size = align(size, VRNIC_PAGE);
	ret = posix_memalign(&p, VRNIC_PAGE, size);
	if (ret) {
		errno = ret;	/* posix_memalign does not set errno */
		return NULL;
	}
	memset(p, 0, size);
	/*
	 * ibv_dontfork_range() returns -1, not an errno: the errno is
	 * madvise()'s, or malloc()'s in libibverbs' range tree.
	 */
	errno = 0;
	if (ibv_dontfork_range(p, size)) {
		ret = errno > 0 ? errno : ENOMEM;
		free(p);
		errno = ret;
		return NULL;
	}
	return p;
}

static void vrnic_free_queue(void *p, size_t size)
{
	if (!p)
		return;
	ibv_dofork_range(p, align(size, VRNIC_PAGE));
	free(p);
}

/*
 * Doorbell records come from a per-context pool of pages, 512 records of
 * 8 bytes each (review C.10: a page per record pinned thousands of pages
 * for thousands of QPs).  The kernel pins each page once per context and
 * counts its users.  A page goes back when its last record is freed,
 * which is after the kernel destroyed the last object using it.  Pages
 * of objects never destroyed stay allocated, like their rings: the device
 * may write them until the context is closed, and then they go
 * (vrnic_dbrec_pool_free()).
 */
#define VRNIC_DBREC_SIZE	8
#define VRNIC_DBRECS		(VRNIC_PAGE / VRNIC_DBREC_SIZE)

static_assert(sizeof(struct vrnic_qp_dbrec) <= VRNIC_DBREC_SIZE, "dbrec");
static_assert(sizeof(struct vrnic_cq_dbrec) <= VRNIC_DBREC_SIZE, "dbrec");
static_assert(sizeof(struct vrnic_srq_dbrec) <= VRNIC_DBREC_SIZE, "dbrec");

struct vrnic_dbrec_page {
	struct vrnic_dbrec_page *next;
	uint8_t *page;
	unsigned int used;
	uint64_t free[VRNIC_DBRECS / 64];	/* bit set: record free */
};

/* A zeroed 8-byte doorbell record; NULL with errno set. */
static void *vrnic_dbrec_alloc(struct vrnic_context *ctx)
{
	struct vrnic_dbrec_page *p;
	unsigned int i, b;
	uint8_t *rec;

	pthread_mutex_lock(&ctx->dbrec_mutex);
	for (p = ctx->dbrec_pages; p; p = p->next)
		if (p->used < VRNIC_DBRECS)
			break;
	if (!p) {
		p = calloc(1, sizeof(*p));
		if (!p)
			goto err;
		p->page = vrnic_alloc_queue(VRNIC_PAGE);
		if (!p->page) {
			int err = errno;

			free(p);
			errno = err;
			goto err;
		}
		memset(p->free, 0xff, sizeof(p->free));
		p->next = ctx->dbrec_pages;
		ctx->dbrec_pages = p;
	}
	for (i = 0; !p->free[i]; i++)
		;
	b = __builtin_ctzll(p->free[i]);
	p->free[i] &= ~(1ULL << b);
	p->used++;
	rec = p->page + (size_t)(i * 64 + b) * VRNIC_DBREC_SIZE;
	memset(rec, 0, VRNIC_DBREC_SIZE);
	pthread_mutex_unlock(&ctx->dbrec_mutex);
	return rec;
err:
	pthread_mutex_unlock(&ctx->dbrec_mutex);
	return NULL;
}

static void vrnic_dbrec_free(struct vrnic_context *ctx, void *rec)
{
	struct vrnic_dbrec_page **pp, *p;
	size_t n;

	if (!rec)
		return;
	pthread_mutex_lock(&ctx->dbrec_mutex);
	for (pp = &ctx->dbrec_pages; (p = *pp); pp = &p->next) {
		if ((uint8_t *)rec < p->page ||
		    (uint8_t *)rec >= p->page + VRNIC_PAGE)
			continue;
		n = ((uint8_t *)rec - p->page) / VRNIC_DBREC_SIZE;
		p->free[n / 64] |= 1ULL << (n % 64);
		if (!--p->used) {
			*pp = p->next;
			vrnic_free_queue(p->page, VRNIC_PAGE);
			free(p);
		}
		break;
	}
	pthread_mutex_unlock(&ctx->dbrec_mutex);
}

/*
 * Context close: the pages still holding records of objects the application
 * never destroyed.  Only once the command file is closed (the kernel has
 * destroyed those objects with the context, so the device writes no more).
 */
void vrnic_dbrec_pool_free(struct vrnic_context *ctx)
{
	struct vrnic_dbrec_page *p;

	while ((p = ctx->dbrec_pages)) {
		ctx->dbrec_pages = p->next;
		vrnic_free_queue(p->page, VRNIC_PAGE);
		free(p);
	}
}

static uint32_t vrnic_log2(uint32_t v)
{
	uint32_t l = 0;

	while ((1u << l) < v)
		l++;
	return l;
}

/* sq_tail/rq_tail: written by pollers, read by posters (vrnic.h). */
static inline uint32_t vrnic_tail(const uint32_t *tail)
{
	return __atomic_load_n(tail, __ATOMIC_ACQUIRE);
}

static inline void vrnic_set_tail(uint32_t *tail, uint32_t v)
{
	__atomic_store_n(tail, v, __ATOMIC_RELEASE);
}

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

/* ------------------------------------------------------------------ MR */

struct ibv_mr *vrnic_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
			    uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	if (ibv_cmd_reg_mr(pd, addr, len, hca_va, access, vmr, &cmd,
			   sizeof(cmd), &resp, sizeof(resp))) {
		free(vmr);
		return NULL;
	}
	return &vmr->ibv_mr;
}

int vrnic_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (ret)
		return ret;
	free(vmr);
	return 0;
}

struct ibv_mw *vrnic_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp = {};
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	if (ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			     sizeof(resp))) {
		free(mw);
		return NULL;
	}
	return mw;
}

int vrnic_dealloc_mw(struct ibv_mw *mw)
{
	int ret = ibv_cmd_dealloc_mw(mw);

	if (ret)
		return ret;
	free(mw);
	return 0;
}

/* ------------------------------------------------------------------ AH */

/*
 * The device has no AH objects; the kernel resolves the destination MAC
 * once, and the address vector built from it and the attributes goes into
 * every UD WQE.  The vector names its source by GID table index only: the
 * device takes the source GID, MAC and VLAN from the table the kernel
 * programs, so nothing a process writes can choose its source address.
 */
struct ibv_ah *vrnic_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct uvrnic_create_ah_resp resp = {};
	struct vrnic_ah *ah;
	uint32_t fl;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	if (ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
			      sizeof(resp))) {
		free(ah);
		return NULL;
	}
	memcpy(ah->av.dgid, attr->grh.dgid.raw, sizeof(ah->av.dgid));
	ah->av.sgid_index = attr->grh.sgid_index;
	memcpy(ah->av.dmac, resp.dmac, sizeof(ah->av.dmac));
	ah->av.traffic_class = attr->grh.traffic_class;
	ah->av.hop_limit = attr->grh.hop_limit;
	fl = attr->grh.flow_label;
	ah->av.flow_label = htole32(fl);
	if (fl)
		ah->av.udp_sport = htole16(ibv_flow_label_to_udp_sport(fl));
	return &ah->ibv_ah;
}

int vrnic_destroy_ah(struct ibv_ah *ibah)
{
	int ret = ibv_cmd_destroy_ah(ibah);

	if (ret)
		return ret;
	free(to_vah(ibah));
	return 0;
}

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
	qp = __atomic_load_n(&ctx->qp_table[qpn & VRNIC_OBJ_INDEX_MASK],
			     __ATOMIC_ACQUIRE);
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
static void vrnic_qp_clean_cqs(struct vrnic_qp *qp)
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

	vrnic_spin_lock(&cq->lock);
	cq->arm_sn++;
	mmio_write32_le((uint8_t *)ctx->db_page + VRNIC_DB_CQ_ARM,
			htole32(cq->cqn | cmd << VRNIC_CQ_ARM_CMD_SHIFT |
				(uint32_t)(cq->arm_sn & 0xf)
					<< VRNIC_CQ_ARM_SN_SHIFT));
	vrnic_spin_unlock(&cq->lock);
	return 0;
}

/* ----------------------------------------------------------------- SRQ */

static uint32_t vrnic_rq_shift(uint32_t max_sge);

/* Write one receive WQE (RQ and SRQ layout) into its ring slot. */
static void vrnic_fill_recv_wqe(uint8_t *slot, struct ibv_recv_wr *wr)
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
	srq->srqn = resp->srqn;
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

struct ibv_xrcd *vrnic_open_xrcd(struct ibv_context *ctx,
				 struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp = {};
	struct ibv_open_xrcd cmd = {};
	struct verbs_xrcd *xrcd;

	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd)
		return NULL;
	if (ibv_cmd_open_xrcd(ctx, xrcd, sizeof(*xrcd), attr, &cmd, sizeof(cmd),
			      &resp, sizeof(resp))) {
		free(xrcd);
		return NULL;
	}
	return &xrcd->xrcd;
}

int vrnic_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct verbs_xrcd *xrcd = container_of(ibxrcd, struct verbs_xrcd, xrcd);
	int ret = ibv_cmd_close_xrcd(xrcd);

	if (ret)
		return ret;
	free(xrcd);
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

static uint32_t vrnic_rq_shift(uint32_t max_sge)
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

	if (err) {
		ibv_cmd_destroy_qp(&qp->vqp.qp);
		vrnic_qp_free(qp);
		errno = err;
		return NULL;
	}
	qp->qpn = resp->qpn;
	pthread_mutex_lock(&ctx->qp_table_mutex);
	__atomic_store_n(&ctx->qp_table[qp->qpn & VRNIC_OBJ_INDEX_MASK], qp,
			 __ATOMIC_RELEASE);
	pthread_mutex_unlock(&ctx->qp_table_mutex);
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
	return __atomic_load_n(&to_vqp(qp)->state, __ATOMIC_RELAXED);
}

static void vrnic_qp_set_state(struct vrnic_qp *qp, enum ibv_qp_state s)
{
	__atomic_store_n(&qp->state, s, __ATOMIC_RELAXED);
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
	struct ibv_modify_qp cmd;
	int ret;

	ret = ibv_cmd_modify_qp(qp, attr, mask, &cmd, sizeof(cmd));
	if (ret || !(mask & IBV_QP_STATE))
		return ret;
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

int vrnic_destroy_qp(struct ibv_qp *ibqp)
{
	struct vrnic_context *ctx = to_vctx(ibqp->context);
	struct vrnic_qp *qp = to_vqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	pthread_mutex_lock(&ctx->qp_table_mutex);
	if (ctx->qp_table[qp->qpn & VRNIC_OBJ_INDEX_MASK] == qp)
		__atomic_store_n(&ctx->qp_table[qp->qpn & VRNIC_OBJ_INDEX_MASK],
				 NULL, __ATOMIC_RELEASE);
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

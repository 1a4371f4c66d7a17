// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the vrnic provider (userspace/) needs around it on the host, so that
 * it runs without a device, a kernel or libibverbs (tests/provider/, under
 * ThreadSanitizer):
 *
 * - "kernel": the ibv_cmd_* the provider calls answer as kernel/ib does
 *   (vrnic_cq.c, vrnic_qp.c, vrnic_srq.c create paths): the same checks of
 *   the driver command, the same ring geometry and capabilities, object
 *   numbers index | generation << 12, and the same driver responses with
 *   their geometry answers, min(outlen, sizeof) bytes of them.  A test may
 *   rewrite those answers: stub_set_answer().  The doorbell page is a memfd page the
 *   provider really maps.
 * - "libibverbs": context set-up, verbs_set_ops, and the ibv_* entry points
 *   this test uses, doing what libibverbs does around the provider's ops.
 * - "device": stub_dev_cqe() writes a completion into a CQ ring the way the
 *   device does (phase bit last, never over the consumer index).
 *
 * One context at a time.  The provider's other commands are not used here
 * and fail with EOPNOTSUPP.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/driver.h>
#include <infiniband/kern-abi.h>
#include <rdma/vrnic-abi.h>

#include "vrnic_hw.h"
#include "stub.h"

extern const struct verbs_device_ops verbs_provider_vrnic;

static const struct verbs_context_ops *stub_ops;	/* the provider's */
static pthread_mutex_t stub_lock = PTHREAD_MUTEX_INITIALIZER;	/* "kernel" */

/* ------------------------------------------------------------ device */

#define STUB_MAX_OBJ	65536	/* of the device's 2^20: enough for these tests */

struct stub_cq {
	struct vrnic_cqe *ring;
	struct vrnic_cq_dbrec *dbrec;
	uint32_t log_depth;
	uint32_t pi;
};

static struct stub_cq cqs[STUB_MAX_OBJ];
static struct ibv_qp_cap qp_caps[STUB_MAX_OBJ];	/* the kernel's */
static enum ibv_qp_state qp_states[STUB_MAX_OBJ];	/* the kernel's */
static bool cq_live[STUB_MAX_OBJ], qp_live[STUB_MAX_OBJ];
static bool srq_live[STUB_MAX_OBJ];
static uint16_t cq_gen[STUB_MAX_OBJ], qp_gen[STUB_MAX_OBJ];
static uint16_t srq_gen[STUB_MAX_OBJ];
static unsigned long destroys[STUB_NOBJ];
static const struct stub_answer *answer;	/* stub_set_answer() */

void stub_set_answer(const struct stub_answer *a)
{
	answer = a;
}

unsigned int stub_live(enum stub_obj kind)
{
	bool *live = kind == STUB_CQ ? cq_live : kind == STUB_QP ? qp_live :
		     srq_live;
	unsigned int i, n = 0;

	pthread_mutex_lock(&stub_lock);
	for (i = 0; i < STUB_MAX_OBJ; i++)
		n += live[i];
	pthread_mutex_unlock(&stub_lock);
	return n;
}

unsigned long stub_destroys(enum stub_obj kind)
{
	unsigned long n;

	pthread_mutex_lock(&stub_lock);
	n = destroys[kind];
	pthread_mutex_unlock(&stub_lock);
	return n;
}

/* A free object index, its next generation: the object's number. */
static int stub_alloc_index(bool *live, uint16_t *gen, uint32_t first,
			    uint32_t *num)
{
	uint32_t i;

	for (i = first; i < STUB_MAX_OBJ; i++) {
		if (live[i])
			continue;
		live[i] = true;
		gen[i] = (gen[i] + 1) & VRNIC_OBJ_GEN_MASK;
		*num = i | (uint32_t)gen[i] << VRNIC_OBJ_INDEX_BITS;
		return 0;
	}
	return ENOSPC;
}

int stub_dev_cqe(uint32_t cqn, const struct vrnic_cqe *src)
{
	struct stub_cq *cq;
	uint32_t mask, ci;
	struct vrnic_cqe *dst;
	uint8_t owner;

	/* Handles the stub gave have indices below STUB_MAX_OBJ. */
	if ((cqn & VRNIC_OBJ_INDEX_MASK) >= STUB_MAX_OBJ)
		return ENOENT;
	cq = &cqs[cqn & VRNIC_OBJ_INDEX_MASK];
	pthread_mutex_lock(&stub_lock);
	if (!cq_live[cqn & VRNIC_OBJ_INDEX_MASK]) {
		pthread_mutex_unlock(&stub_lock);
		return ENOENT;
	}
	mask = (1u << cq->log_depth) - 1;
	ci = le32toh(__atomic_load_n(&cq->dbrec->ci, __ATOMIC_ACQUIRE));
	if (cq->pi - ci > mask) {	/* full: the device would overflow */
		pthread_mutex_unlock(&stub_lock);
		return ENOSPC;
	}
	dst = &cq->ring[cq->pi & mask];
	owner = ((cq->pi >> cq->log_depth) & 1) ? 0 : VRNIC_CQE_OWNER;
	memcpy(dst, src, offsetof(struct vrnic_cqe, owner));
	__atomic_store_n(&dst->owner, (src->owner & ~VRNIC_CQE_OWNER) | owner,
			 __ATOMIC_RELEASE);
	cq->pi++;
	pthread_mutex_unlock(&stub_lock);
	return 0;
}

/* ------------------------------------------------------------ kernel */

/* The driver part of a command: what the kernel reads from udata. */
#define DRV_IN(cmd)	((const void *)((cmd) + 1))
#define DRV_IN_LEN(cmd, size)	((size) - sizeof(*(cmd)))
#define DRV_OUT(resp)	((void *)((resp) + 1))
#define DRV_OUT_LEN(resp, size)	((size) - sizeof(*(resp)))

/*
 * vrnic_ib_udata_req(): a shorter request is zero-extended, a longer one is
 * refused unless its unknown trailing bytes are zero.
 */
static int drv_req(void *dst, size_t dst_len, const void *src, size_t len)
{
	size_t i;

	for (i = dst_len; i < len; i++)
		if (((const uint8_t *)src)[i])
			return errno = EOPNOTSUPP;
	memset(dst, 0, dst_len);
	memcpy(dst, src, len < dst_len ? len : dst_len);
	return 0;
}

static void drv_resp(void *dst, size_t outlen, const void *src, size_t len)
{
	memcpy(dst, src, len < outlen ? len : outlen);
}

static uint32_t order_base_2(uint32_t v)
{
	uint32_t l = 0;

	while ((1u << l) < v)
		l++;
	return l;
}

int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size)
{
	struct vrnic_alloc_ucontext_resp uresp = {};

	uresp.db_mmap_key = 0;
	uresp.db_page_index = 1;
	uresp.db_page_size = VRNIC_DB_PAGE_SIZE;
	resp->async_fd = -1;
	resp->num_comp_vectors = 1;
	context->context.num_comp_vectors = 1;
	drv_resp(DRV_OUT(resp), DRV_OUT_LEN(resp, resp_size), &uresp,
		 sizeof(uresp));
	return 0;
}

int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size)
{
	pd->context = context;
	pd->handle = 1;
	return 0;
}

int ibv_cmd_dealloc_pd(struct ibv_pd *pd)
{
	return 0;
}

/* vrnic_ib_create_cq(): check the driver request, make the CQ; its cqn. */
static int kern_create_cq(int cqe, const void *req, size_t req_len,
			  void *uresp_out, size_t outlen, uint32_t *cqn,
			  uint32_t *depth)
{
	struct vrnic_create_cq_resp uresp = {};
	struct vrnic_create_cq_cmd ucmd;
	uint32_t log = order_base_2(cqe < 2 ? 2 : cqe);
	struct stub_cq *c;

	if (drv_req(&ucmd, sizeof(ucmd), req, req_len))
		return errno;
	/* More than asked is fine, never less. */
	if (cqe < 1 || cqe > (1 << VRNIC_MAX_CQ_LOG_DEPTH) || ucmd.reserved ||
	    ucmd.log_depth < log || ucmd.log_depth > VRNIC_MAX_CQ_LOG_DEPTH ||
	    (ucmd.buf_addr & 4095) || !ucmd.buf_addr ||
	    !ucmd.dbrec_addr || (ucmd.dbrec_addr & 7))
		return errno = EINVAL;
	pthread_mutex_lock(&stub_lock);
	if (stub_alloc_index(cq_live, cq_gen, 0, cqn)) {
		pthread_mutex_unlock(&stub_lock);
		return errno = ENOSPC;
	}
	c = &cqs[*cqn & VRNIC_OBJ_INDEX_MASK];
	c->ring = (struct vrnic_cqe *)(uintptr_t)ucmd.buf_addr;
	c->dbrec = (struct vrnic_cq_dbrec *)(uintptr_t)ucmd.dbrec_addr;
	c->log_depth = ucmd.log_depth;
	c->pi = 0;
	pthread_mutex_unlock(&stub_lock);

	*depth = 1u << ucmd.log_depth;
	/* What the device was given: the provider indexes by it. */
	uresp.cqn = *cqn;
	uresp.log_depth = ucmd.log_depth;
	uresp.cqe_size = sizeof(struct vrnic_cqe);
	if (answer && answer->cq)
		answer->cq(&uresp, answer->arg);
	drv_resp(uresp_out, outlen, &uresp, sizeof(uresp));
	return 0;
}

/* libibverbs: what ibv_cmd_create_cq*() and verbs_init_cq() set. */
static void lib_init_cq(struct ibv_cq *cq, struct ibv_context *context,
			struct ibv_comp_channel *channel, uint32_t cqn,
			uint32_t depth)
{
	cq->context = context;
	cq->handle = cqn;
	cq->cqe = depth;
	cq->channel = channel;
	cq->comp_events_completed = 0;
	cq->async_events_completed = 0;
	pthread_mutex_init(&cq->mutex, NULL);
	pthread_cond_init(&cq->cond, NULL);
}

int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size)
{
	uint32_t cqn, depth;

	if (kern_create_cq(cqe, DRV_IN(cmd), DRV_IN_LEN(cmd, cmd_size),
			   DRV_OUT(resp), DRV_OUT_LEN(resp, resp_size), &cqn,
			   &depth))
		return errno;
	resp->cq_handle = cqn;
	resp->cqe = depth;
	lib_init_cq(cq, context, channel, cqn, depth);
	return 0;
}

int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags)
{
	uint32_t cqn, depth;

	if (cq_attr->cqe > INT32_MAX)
		return errno = EINVAL;
	if (kern_create_cq(cq_attr->cqe, DRV_IN(cmd),
			   DRV_IN_LEN(cmd, cmd_size), DRV_OUT(resp),
			   DRV_OUT_LEN(resp, resp_size), &cqn, &depth))
		return errno;
	resp->base.cq_handle = cqn;
	resp->base.cqe = depth;
	lib_init_cq(&cq->cq, context, cq_attr->channel, cqn, depth);
	return 0;
}

int ibv_cmd_destroy_cq(struct ibv_cq *cq)
{
	pthread_mutex_lock(&stub_lock);
	cq_live[cq->handle & VRNIC_OBJ_INDEX_MASK] = false;
	destroys[STUB_CQ]++;
	pthread_mutex_unlock(&stub_lock);
	return 0;
}

int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
		      size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		      size_t resp_size)
{
	struct vrnic_create_qp_resp uresp = {};
	struct vrnic_create_qp_cmd ucmd;
	struct ibv_qp_cap *cap = &attr->cap;
	uint32_t sq_log, rq_log, sq_shift, rq_shift, need, qpn;
	uint32_t data_off, max_send_sge, max_recv_sge, max_inline;
	bool no_rq = attr->srq;
	uint8_t type;

	switch (attr->qp_type) {
	case IBV_QPT_RC:
		type = VRNIC_QPT_RC;
		break;
	case IBV_QPT_UC:
		type = VRNIC_QPT_UC;
		break;
	case IBV_QPT_UD:
		type = VRNIC_QPT_UD;
		break;
	default:
		return errno = EOPNOTSUPP;
	}
	if (no_rq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
	if (cap->max_send_wr > (1u << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    cap->max_recv_wr > (1u << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    cap->max_send_sge > VRNIC_MAX_SGE ||
	    cap->max_recv_sge > VRNIC_MAX_SGE ||
	    cap->max_inline_data > VRNIC_MAX_INLINE || !attr->send_cq ||
	    (!no_rq && !attr->recv_cq))
		return errno = EINVAL;
	/* vrnic_ib_sq_shift(), vrnic_ib_rq_shift() of kernel/ib/vrnic_qp.c */
	data_off = vrnic_send_wqe_data_off(type);
	need = cap->max_send_sge * sizeof(struct vrnic_sge);
	need = data_off + (need > cap->max_inline_data ?
			   need : cap->max_inline_data);
	sq_shift = order_base_2(need) < 6 ? 6 : order_base_2(need);
	need = sizeof(struct vrnic_recv_wqe) +
	       cap->max_recv_sge * sizeof(struct vrnic_sge);
	rq_shift = order_base_2(need) < 5 ? 5 : order_base_2(need);
	sq_log = order_base_2(cap->max_send_wr ? cap->max_send_wr : 1);
	rq_log = order_base_2(cap->max_recv_wr ? cap->max_recv_wr : 1);

	if (drv_req(&ucmd, sizeof(ucmd), DRV_IN(cmd), DRV_IN_LEN(cmd, cmd_size)))
		return errno;
	/* The provider may ask for more, never for less. */
	if (ucmd.sq_log_depth < sq_log || ucmd.rq_log_depth < rq_log ||
	    ucmd.sq_wqe_shift < sq_shift || ucmd.rq_wqe_shift < rq_shift ||
	    ucmd.sq_log_depth > VRNIC_MAX_WQ_LOG_DEPTH ||
	    ucmd.rq_log_depth > VRNIC_MAX_WQ_LOG_DEPTH ||
	    ucmd.sq_wqe_shift > 10 || ucmd.rq_wqe_shift > 9 ||
	    (ucmd.dbrec_addr & 7) || !ucmd.dbrec_addr ||
	    !ucmd.sq_addr || (ucmd.sq_addr & 4095) ||
	    (!no_rq && (!ucmd.rq_addr || (ucmd.rq_addr & 4095))))
		return errno = EINVAL;
	sq_log = ucmd.sq_log_depth;
	rq_log = ucmd.rq_log_depth;
	sq_shift = ucmd.sq_wqe_shift;
	rq_shift = ucmd.rq_wqe_shift;

	pthread_mutex_lock(&stub_lock);
	/* QPN indexes 0 and 1 are reserved. */
	if (stub_alloc_index(qp_live, qp_gen, 2, &qpn)) {
		pthread_mutex_unlock(&stub_lock);
		return errno = ENOSPC;
	}
	pthread_mutex_unlock(&stub_lock);

	max_send_sge = ((1u << sq_shift) - data_off) / sizeof(struct vrnic_sge);
	if (max_send_sge > VRNIC_MAX_SGE)
		max_send_sge = VRNIC_MAX_SGE;
	max_recv_sge = ((1u << rq_shift) - sizeof(struct vrnic_recv_wqe)) /
		       sizeof(struct vrnic_sge);
	if (max_recv_sge > VRNIC_MAX_SGE)
		max_recv_sge = VRNIC_MAX_SGE;
	if (no_rq)
		max_recv_sge = 0;
	max_inline = (1u << sq_shift) - data_off;
	if (max_inline > VRNIC_MAX_INLINE)
		max_inline = VRNIC_MAX_INLINE;

	resp->qp_handle = qpn;
	resp->qpn = qpn;
	resp->max_send_wr = 1u << sq_log;
	resp->max_recv_wr = no_rq ? 0 : 1u << rq_log;
	resp->max_send_sge = max_send_sge;
	resp->max_recv_sge = max_recv_sge;
	resp->max_inline_data = max_inline;
	/* What the device was given: the provider posts by it. */
	uresp.qpn = qpn;
	uresp.sq_log_depth = sq_log;
	uresp.sq_wqe_shift = sq_shift;
	uresp.max_send_sge = max_send_sge;
	uresp.max_inline = max_inline;
	if (!no_rq) {
		uresp.rq_log_depth = rq_log;
		uresp.rq_wqe_shift = rq_shift;
		uresp.max_recv_sge = max_recv_sge;
	}
	pthread_mutex_lock(&stub_lock);
	qp_states[qpn & VRNIC_OBJ_INDEX_MASK] = IBV_QPS_RESET;
	qp_caps[qpn & VRNIC_OBJ_INDEX_MASK] = (struct ibv_qp_cap) {
		.max_send_wr = resp->max_send_wr,
		.max_recv_wr = resp->max_recv_wr,
		.max_send_sge = resp->max_send_sge,
		.max_recv_sge = resp->max_recv_sge,
		.max_inline_data = resp->max_inline_data,
	};
	pthread_mutex_unlock(&stub_lock);
	if (answer && answer->qp)
		answer->qp(&uresp, resp, answer->arg);
	drv_resp(DRV_OUT(resp), DRV_OUT_LEN(resp, resp_size), &uresp,
		 sizeof(uresp));

	/* libibverbs: ibv_cmd_create_qp() */
	qp->context = pd->context;
	qp->qp_context = attr->qp_context;
	qp->pd = pd;
	qp->send_cq = attr->send_cq;
	qp->recv_cq = attr->recv_cq;
	qp->srq = attr->srq;
	qp->qp_type = attr->qp_type;
	qp->state = IBV_QPS_RESET;
	qp->events_completed = 0;
	pthread_mutex_init(&qp->mutex, NULL);
	pthread_cond_init(&qp->cond, NULL);
	qp->handle = resp->qp_handle;
	qp->qp_num = resp->qpn;
	cap->max_send_wr = resp->max_send_wr;
	cap->max_recv_wr = resp->max_recv_wr;
	cap->max_send_sge = resp->max_send_sge;
	cap->max_recv_sge = resp->max_recv_sge;
	cap->max_inline_data = resp->max_inline_data;
	return 0;
}

/* The legacy command of ibv_create_qp_ex(): the same as ibv_create_qp(). */
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size)
{
	struct ibv_qp_init_attr attr = {
		.qp_context = attr_ex->qp_context,
		.send_cq = attr_ex->send_cq,
		.recv_cq = attr_ex->recv_cq,
		.srq = attr_ex->srq,
		.cap = attr_ex->cap,
		.qp_type = attr_ex->qp_type,
		.sq_sig_all = attr_ex->sq_sig_all,
	};
	int ret;

	if (attr_ex->comp_mask & ~(IBV_QP_INIT_ATTR_PD |
				   IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ||
	    !(attr_ex->comp_mask & IBV_QP_INIT_ATTR_PD))
		return errno = EOPNOTSUPP;
	ret = ibv_cmd_create_qp(attr_ex->pd, &qp->qp, &attr, cmd, cmd_size,
				resp, resp_size);
	if (!ret)
		attr_ex->cap = attr.cap;
	return ret;
}

int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd,
		      size_t cmd_size)
{
	if (attr_mask & IBV_QP_STATE) {
		pthread_mutex_lock(&stub_lock);
		qp_states[qp->handle & VRNIC_OBJ_INDEX_MASK] = attr->qp_state;
		pthread_mutex_unlock(&stub_lock);
	}
	return 0;
}

static long modify_qp_ex_calls;

long stub_modify_qp_ex_calls(void)
{
	return __atomic_load_n(&modify_qp_ex_calls, __ATOMIC_RELAXED);
}

int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask, struct ibv_modify_qp_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_modify_qp_resp *resp,
			 size_t resp_size)
{
	/* The ECE options (the driver's part) are the kernel's business. */
	__atomic_add_fetch(&modify_qp_ex_calls, 1, __ATOMIC_RELAXED);
	(void)cmd;
	(void)cmd_size;
	(void)resp;
	(void)resp_size;
	return ibv_cmd_modify_qp(qp, attr, attr_mask, NULL, 0);
}

void stub_dev_qp_error(struct ibv_qp *qp)
{
	pthread_mutex_lock(&stub_lock);
	qp_states[qp->handle & VRNIC_OBJ_INDEX_MASK] = IBV_QPS_ERR;
	pthread_mutex_unlock(&stub_lock);
}

/* From here on the device writes no completion for the QP. */
int ibv_cmd_destroy_qp(struct ibv_qp *qp)
{
	pthread_mutex_lock(&stub_lock);
	qp_live[qp->handle & VRNIC_OBJ_INDEX_MASK] = false;
	destroys[STUB_QP]++;
	pthread_mutex_unlock(&stub_lock);
	return 0;
}

/* vrnic_ib_query_qp(): the caps the kernel programmed. */
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		     int attr_mask, struct ibv_qp_init_attr *init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size)
{
	memset(attr, 0, sizeof(*attr));
	memset(init_attr, 0, sizeof(*init_attr));
	pthread_mutex_lock(&stub_lock);
	attr->cap = qp_caps[qp->handle & VRNIC_OBJ_INDEX_MASK];
	attr->qp_state = qp_states[qp->handle & VRNIC_OBJ_INDEX_MASK];
	pthread_mutex_unlock(&stub_lock);
	attr->cur_qp_state = attr->qp_state;
	init_attr->cap = attr->cap;
	init_attr->qp_type = qp->qp_type;
	init_attr->send_cq = qp->send_cq;
	init_attr->recv_cq = qp->recv_cq;
	init_attr->srq = qp->srq;
	return 0;
}

/* vrnic_ib_create_srq() (basic SRQs) */
int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp,
		       size_t resp_size)
{
	struct vrnic_create_srq_resp uresp = {};
	struct vrnic_create_srq_cmd ucmd;
	struct ibv_srq_attr *a = &attr->attr;
	uint32_t log, shift, max_sge, srqn;

	if (a->max_wr < 1 || a->max_wr > (1u << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    a->max_sge > VRNIC_MAX_SGE || a->srq_limit > a->max_wr)
		return errno = EINVAL;
	log = order_base_2(a->max_wr);
	shift = order_base_2(sizeof(struct vrnic_recv_wqe) +
			     (a->max_sge ? a->max_sge : 1) *
			     sizeof(struct vrnic_sge));
	if (shift < 5)
		shift = 5;
	if (drv_req(&ucmd, sizeof(ucmd), DRV_IN(cmd), DRV_IN_LEN(cmd, cmd_size)))
		return errno;
	if (ucmd.log_depth < log || ucmd.wqe_shift < shift ||
	    ucmd.log_depth > VRNIC_MAX_WQ_LOG_DEPTH || ucmd.wqe_shift > 9 ||
	    !ucmd.buf_addr || (ucmd.buf_addr & 4095) ||
	    !ucmd.dbrec_addr || (ucmd.dbrec_addr & 7))
		return errno = EINVAL;
	log = ucmd.log_depth;
	shift = ucmd.wqe_shift;
	pthread_mutex_lock(&stub_lock);
	if (stub_alloc_index(srq_live, srq_gen, 0, &srqn)) {
		pthread_mutex_unlock(&stub_lock);
		return errno = ENOSPC;
	}
	pthread_mutex_unlock(&stub_lock);
	max_sge = ((1u << shift) - sizeof(struct vrnic_recv_wqe)) /
		  sizeof(struct vrnic_sge);
	if (max_sge > VRNIC_MAX_SGE)
		max_sge = VRNIC_MAX_SGE;

	resp->srq_handle = srqn;
	resp->max_wr = 1u << log;
	resp->max_sge = max_sge;
	resp->srqn = srqn;
	/* What the device was given: the provider posts by it. */
	uresp.srqn = srqn;
	uresp.log_depth = log;
	uresp.wqe_shift = shift;
	uresp.max_sge = max_sge;
	if (answer && answer->srq)
		answer->srq(&uresp, resp, answer->arg);
	drv_resp(DRV_OUT(resp), DRV_OUT_LEN(resp, resp_size), &uresp,
		 sizeof(uresp));

	/* libibverbs: ibv_cmd_create_srq() */
	srq->context = pd->context;
	srq->handle = resp->srq_handle;
	pthread_mutex_init(&srq->mutex, NULL);
	pthread_cond_init(&srq->cond, NULL);
	a->max_wr = resp->max_wr;
	a->max_sge = resp->max_sge;
	return 0;
}

int ibv_cmd_destroy_srq(struct ibv_srq *srq)
{
	pthread_mutex_lock(&stub_lock);
	srq_live[srq->handle & VRNIC_OBJ_INDEX_MASK] = false;
	destroys[STUB_SRQ]++;
	pthread_mutex_unlock(&stub_lock);
	return 0;
}

/* libibverbs' fork protection: its failures, and the ranges it holds. */
static pthread_mutex_t mm_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int dontfork_nth;	/* stub_fail_dontfork() */
static int dontfork_errno;
static long dontfork_ranges;

void stub_fail_dontfork(unsigned int nth, int err)
{
	pthread_mutex_lock(&mm_lock);
	dontfork_nth = nth;
	dontfork_errno = err;
	pthread_mutex_unlock(&mm_lock);
}

long stub_dontfork_ranges(void)
{
	long n;

	pthread_mutex_lock(&mm_lock);
	n = dontfork_ranges;
	pthread_mutex_unlock(&mm_lock);
	return n;
}

/*
 * As libibverbs after ibv_fork_init(): 0, or -1 (not an errno) with errno
 * set by madvise() or malloc() -- or, err 0, left alone.
 */
int ibv_dontfork_range(void *base, size_t size)
{
	int ret = 0;

	pthread_mutex_lock(&mm_lock);
	if (dontfork_nth && !--dontfork_nth) {
		dontfork_nth = 1;	/* and every later one */
		ret = -1;
		if (dontfork_errno)
			errno = dontfork_errno;
	} else {
		dontfork_ranges++;
	}
	pthread_mutex_unlock(&mm_lock);
	return ret;
}

int ibv_dofork_range(void *base, size_t size)
{
	pthread_mutex_lock(&mm_lock);
	dontfork_ranges--;
	pthread_mutex_unlock(&mm_lock);
	return 0;
}

/* Not used by this test. */
#define NOT_HERE { errno = EOPNOTSUPP; return EOPNOTSUPP; }

int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size) NOT_HERE
int ibv_cmd_close_xrcd(struct verbs_xrcd *xrcd) NOT_HERE
int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp,
		      size_t resp_size) NOT_HERE
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex,
			  struct ibv_create_xsrq *cmd, size_t cmd_size,
			  struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size) NOT_HERE
int ibv_cmd_dealloc_mw(struct ibv_mw *mw) NOT_HERE
int ibv_cmd_dereg_mr(struct verbs_mr *vmr) NOT_HERE
int ibv_cmd_destroy_ah(struct ibv_ah *ah) NOT_HERE
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size) NOT_HERE
int ibv_cmd_open_qp(struct ibv_context *context, struct verbs_qp *qp,
		    int vqp_sz, struct ibv_qp_open_attr *attr,
		    struct ibv_open_qp *cmd, size_t cmd_size,
		    struct ib_uverbs_create_qp_resp *resp,
		    size_t resp_size) NOT_HERE
int ibv_cmd_open_xrcd(struct ibv_context *context, struct verbs_xrcd *xrcd,
		      int vxrcd_size, struct ibv_xrcd_init_attr *attr,
		      struct ibv_open_xrcd *cmd, size_t cmd_size,
		      struct ib_uverbs_open_xrcd_resp *resp,
		      size_t resp_size) NOT_HERE
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size) NOT_HERE
int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp,
		   size_t resp_size) NOT_HERE
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid) NOT_HERE
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid) NOT_HERE
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size) NOT_HERE
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size) NOT_HERE

/* -------------------------------------------------------- libibverbs */

void verbs_register_driver(const struct verbs_device_ops *ops)
{
	/* PROVIDER_DRIVER's constructor; stub_open_device() uses the ops. */
}

void __verbs_log(struct verbs_context *ctx, uint32_t level,
		 const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
}

void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id)
{
	void *drv = calloc(1, alloc_size);
	struct verbs_context *vctx;

	if (!drv) {
		close(cmd_fd);
		return NULL;
	}
	vctx = (struct verbs_context *)((char *)drv + (uintptr_t)context_offset);
	vctx->context.device = device;
	vctx->context.cmd_fd = cmd_fd;
	vctx->context.async_fd = -1;
	pthread_mutex_init(&vctx->context.mutex, NULL);
	vctx->context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	vctx->sz = sizeof(*vctx);
	return drv;
}

/*
 * Closing the command file destroys what the context still holds, as
 * uverbs does (one context at a time: all of it).
 */
void verbs_uninit_context(struct verbs_context *vctx)
{
	close(vctx->context.cmd_fd);
	pthread_mutex_destroy(&vctx->context.mutex);
	pthread_mutex_lock(&stub_lock);
	memset(cq_live, 0, sizeof(cq_live));
	memset(qp_live, 0, sizeof(qp_live));
	memset(srq_live, 0, sizeof(srq_live));
	pthread_mutex_unlock(&stub_lock);
}

/* libibverbs' __lib_ibv_create_cq_ex(), behind ibv_create_cq_ex(). */
static struct ibv_cq_ex *lib_create_cq_ex(struct ibv_context *ctx,
					  struct ibv_cq_init_attr_ex *attr)
{
	struct ibv_cq_ex *cqx;

	if (attr->wc_flags & ~IBV_CREATE_CQ_SUP_WC_FLAGS) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cqx = stub_ops->create_cq_ex(ctx, attr);
	if (cqx)
		ibv_cq_ex_to_cq(cqx)->cq_context = attr->cq_context;
	return cqx;
}

void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops)
{
	stub_ops = ops;
	vctx->create_cq_ex = lib_create_cq_ex;
	vctx->create_qp_ex = ops->create_qp_ex;
	vctx->context.ops.poll_cq = ops->poll_cq;
	vctx->context.ops.req_notify_cq = ops->req_notify_cq;
	vctx->context.ops.post_send = ops->post_send;
	vctx->context.ops.post_recv = ops->post_recv;
	vctx->context.ops.post_srq_recv = ops->post_srq_recv;
}

/* verbs_open_device(): a memfd page stands for the uverbs file's BAR. */
struct ibv_context *stub_open_device(void)
{
	const struct verbs_device_ops *dops = &verbs_provider_vrnic;
	struct verbs_context *vctx;
	struct verbs_device *vdev;
	int fd;

	vdev = dops->alloc_device(NULL);
	if (!vdev)
		return NULL;
	vdev->ops = dops;
	fd = memfd_create("vrnic-uverbs", 0);
	if (fd < 0 || ftruncate(fd, VRNIC_DB_PAGE_SIZE)) {
		dops->uninit_device(vdev);
		return NULL;
	}
	vctx = dops->alloc_context(&vdev->device, fd, NULL);
	if (!vctx) {
		dops->uninit_device(vdev);
		return NULL;
	}
	return &vctx->context;
}

int ibv_close_device(struct ibv_context *ctx)
{
	struct verbs_device *vdev = verbs_get_device(ctx->device);

	stub_ops->free_context(ctx);
	vdev->ops->uninit_device(vdev);
	return 0;
}

struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct ibv_pd *pd = stub_ops->alloc_pd(ctx);

	if (pd)
		pd->context = ctx;
	return pd;
}

int ibv_dealloc_pd(struct ibv_pd *pd)
{
	return stub_ops->dealloc_pd(pd);
}

struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe,
			     void *cq_context, struct ibv_comp_channel *channel,
			     int comp_vector)
{
	struct ibv_cq *cq = stub_ops->create_cq(ctx, cqe, channel,
						comp_vector);

	if (cq)
		cq->cq_context = cq_context;
	return cq;
}

int ibv_destroy_cq(struct ibv_cq *cq)
{
	return stub_ops->destroy_cq(cq);
}

struct ibv_qp *ibv_create_qp(struct ibv_pd *pd,
			     struct ibv_qp_init_attr *attr)
{
	return stub_ops->create_qp(pd, attr);
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int ret = stub_ops->modify_qp(qp, attr, mask);

	if (!ret && (mask & IBV_QP_STATE))
		qp->state = attr->qp_state;
	return ret;
}

int ibv_destroy_qp(struct ibv_qp *qp)
{
	return stub_ops->destroy_qp(qp);
}

struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	struct verbs_qp *vqp = container_of(qp, struct verbs_qp, qp);

	return vqp->comp_mask & VERBS_QP_EX ? &vqp->qp_ex : NULL;
}

int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		 struct ibv_qp_init_attr *init_attr)
{
	int ret = stub_ops->query_qp(qp, attr, mask, init_attr);

	if (!ret && (mask & IBV_QP_STATE))
		qp->state = attr->qp_state;
	return ret;
}

struct ibv_srq *ibv_create_srq(struct ibv_pd *pd,
			       struct ibv_srq_init_attr *attr)
{
	struct ibv_srq *srq = stub_ops->create_srq(pd, attr);

	if (srq) {
		srq->context = pd->context;
		srq->srq_context = attr->srq_context;
		srq->pd = pd;
		srq->events_completed = 0;
	}
	return srq;
}

int ibv_destroy_srq(struct ibv_srq *srq)
{
	return stub_ops->destroy_srq(srq);
}

/*
 * The kernel raised event type on qp, and ibv_get_async_event() returns
 * it to the application: libibverbs first hands it to the provider, in
 * the thread that called ibv_get_async_event().
 */
void stub_async_event(struct ibv_qp *qp, enum ibv_event_type type)
{
	struct ibv_async_event ev = { .element.qp = qp, .event_type = type };

	if (stub_ops->async_event)	/* else libibverbs' no-op */
		stub_ops->async_event(qp->context, &ev);
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic queue pairs: RC, UC, UD and the GSI QP1 (for ib_mad).  The device
 * runs the transport; the driver creates QPs, drives their state machine
 * with MODIFY_QP and, for kernel QPs, writes WQEs into the rings and rings
 * the doorbells.  User QPs' rings are in user memory and never touched
 * here.
 */
#include <linux/dma-mapping.h>
#include <rdma/ib_cache.h>

#include "vrnic.h"
#include "vrnic-abi.h"
#include "vrnic_ib_trace.h"

#define VRNIC_SEND_WQE_HDR	sizeof(struct vrnic_send_wqe)
#define VRNIC_RECV_WQE_HDR	sizeof(struct vrnic_recv_wqe)

static_assert(sizeof(struct vrnic_qp_attr) <= VRNIC_CMD_BUF_SIZE);

static u32 vrnic_ib_sq_shift(u8 type, u32 max_sge, u32 max_inline)
{
	u32 need = vrnic_send_wqe_data_off(type) +
		   max_t(u32, max_sge * sizeof(struct vrnic_sge), max_inline);

	return max_t(u32, 6, order_base_2(need));
}

static u32 vrnic_ib_rq_shift(u32 max_sge)
{
	u32 need = VRNIC_RECV_WQE_HDR + max_sge * sizeof(struct vrnic_sge);

	return max_t(u32, 5, order_base_2(need));
}

static void vrnic_ib_qp_free_mem(struct vrnic_dev *vdev, struct vrnic_qp *qp)
{
	struct device *dev = &vdev->pdev->dev;

	vrnic_ib_kring_free(vdev, &qp->sq);
	vrnic_ib_kring_free(vdev, &qp->rq);
	if (qp->dbrec)
		dma_free_coherent(dev, sizeof(*qp->dbrec), qp->dbrec,
				  qp->dbrec_dma);
	ib_umem_release(qp->sq_umem);
	ib_umem_release(qp->rq_umem);
	vrnic_ib_unpin_dbrec(qp->dbrec_page);
}

/*
 * An XRC target QP is the kernel's (ib_core creates it without udata and
 * shares it between processes): no rings, CQs or PD; each request takes
 * those of the XRC SRQ it names.
 */
static int vrnic_ib_create_xrc_tgt(struct vrnic_dev *vdev, struct vrnic_qp *qp,
				   struct ib_qp_init_attr *init)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_QP };
	u32 qpn;
	int ret;

	if (init->create_flags || !init->xrcd)
		return -EINVAL;
	qp->type = VRNIC_QPT_XRC_TGT;
	qp->no_rq = true;
	cmd.create_qp.type = VRNIC_QPT_XRC_TGT;
	cmd.create_qp.xrcdn = cpu_to_le32(to_vxrcd(init->xrcd)->xrcdn);
	ret = vrnic_ib_admin_exec(vdev, &cmd, &qpn);
	if (ret)
		return ret;
	qp->qpn = qpn;
	qp->ibqp.qp_num = qpn;
	qp->state = IB_QPS_RESET;
	memset(&init->cap, 0, sizeof(init->cap));
	ret = xa_insert_irq(&vdev->qp_xa, qpn, qp, GFP_KERNEL);
	if (ret)
		vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_QP, qpn, "QP");
	return ret;
}

/* The page lists of a QP's rings: the device copies them at create. */
struct vrnic_qp_lists {
	__le64 *sq, *rq;
	dma_addr_t sq_dma, rq_dma;
	size_t sq_size, rq_size;
};

static void vrnic_ib_qp_lists_free(struct device *dev, struct vrnic_qp_lists *l)
{
	if (l->sq)
		dma_free_coherent(dev, l->sq_size, l->sq, l->sq_dma);
	if (l->rq)
		dma_free_coherent(dev, l->rq_size, l->rq, l->rq_dma);
	memset(l, 0, sizeof(*l));
}

/* The QP's type and its rings' geometry from what was asked for. */
static int vrnic_ib_qp_init_geometry(struct vrnic_qp *qp,
				     struct ib_qp_init_attr *init, bool user)
{
	struct ib_qp_cap *cap = &init->cap;

	switch (init->qp_type) {
	case IB_QPT_RC:
		qp->type = VRNIC_QPT_RC;
		break;
	case IB_QPT_UC:
		qp->type = VRNIC_QPT_UC;
		break;
	case IB_QPT_UD:
		qp->type = VRNIC_QPT_UD;
		break;
	case IB_QPT_GSI:
		if (user)
			return -EINVAL;
		qp->type = VRNIC_QPT_GSI;
		break;
	case IB_QPT_XRC_INI:
		/* No kernel work request names a remote XRC SRQ. */
		if (!user)
			return -EOPNOTSUPP;
		qp->type = VRNIC_QPT_XRC_INI;
		qp->no_rq = true;
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags || (init->srq && qp->type == VRNIC_QPT_GSI))
		return -EOPNOTSUPP;
	if (init->srq) {
		qp->no_rq = true;
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
	if (cap->max_send_wr > (1U << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    cap->max_recv_wr > (1U << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    cap->max_send_sge > VRNIC_MAX_SGE ||
	    cap->max_recv_sge > VRNIC_MAX_SGE ||
	    cap->max_inline_data > VRNIC_MAX_INLINE)
		return -EINVAL;

	qp->sq_log = order_base_2(max(cap->max_send_wr, 1U));
	qp->rq_log = order_base_2(max(cap->max_recv_wr, 1U));
	qp->sq_shift = vrnic_ib_sq_shift(qp->type, cap->max_send_sge,
					 cap->max_inline_data);
	qp->rq_shift = vrnic_ib_rq_shift(cap->max_recv_sge);
	qp->sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	return 0;
}

/* A user QP: its rings and doorbell record are in the process's memory. */
static int vrnic_ib_create_qp_user(struct vrnic_dev *vdev, struct vrnic_qp *qp,
				   struct ib_udata *udata,
				   struct vrnic_admin_create_qp *cmd,
				   struct vrnic_qp_lists *l)
{
	struct vrnic_create_qp_cmd ucmd = {};
	int ret;

	ret = vrnic_ib_udata_req(udata, &ucmd, sizeof(ucmd));
	if (ret)
		return ret;
	/* The provider may ask for more, never for less. */
	if (ucmd.sq_log_depth < qp->sq_log || ucmd.rq_log_depth < qp->rq_log ||
	    ucmd.sq_wqe_shift < qp->sq_shift ||
	    ucmd.rq_wqe_shift < qp->rq_shift ||
	    ucmd.sq_log_depth > VRNIC_MAX_WQ_LOG_DEPTH ||
	    ucmd.rq_log_depth > VRNIC_MAX_WQ_LOG_DEPTH ||
	    ucmd.sq_wqe_shift > 10 || ucmd.rq_wqe_shift > 9 ||
	    (ucmd.dbrec_addr & 7))
		return -EINVAL;
	qp->sq_log = ucmd.sq_log_depth;
	qp->rq_log = ucmd.rq_log_depth;
	qp->sq_shift = ucmd.sq_wqe_shift;
	qp->rq_shift = ucmd.rq_wqe_shift;
	ret = vrnic_ib_ring_pin(vdev, ucmd.sq_addr,
				1UL << (qp->sq_log + qp->sq_shift), &qp->sq_umem,
				&l->sq, &l->sq_dma, &l->sq_size);
	if (ret)
		return ret;
	if (!qp->no_rq) {
		ret = vrnic_ib_ring_pin(vdev, ucmd.rq_addr,
					1UL << (qp->rq_log + qp->rq_shift),
					&qp->rq_umem, &l->rq, &l->rq_dma,
					&l->rq_size);
		if (ret)
			return ret;
	}
	ret = vrnic_ib_pin_dbrec(udata, ucmd.dbrec_addr, &qp->dbrec_page,
				 &qp->dbrec_dma);
	if (ret)
		return ret;
	cmd->sq_base = cpu_to_le64(l->sq_dma);
	cmd->rq_base = cpu_to_le64(l->rq_dma);
	cmd->sq_flags = VRNIC_RING_PAGED;
	cmd->rq_flags = VRNIC_RING_PAGED;
	return 0;
}

/* A kernel QP: paged rings and a doorbell record in coherent memory. */
static int vrnic_ib_create_qp_kernel(struct vrnic_dev *vdev, struct vrnic_qp *qp,
				     struct vrnic_admin_create_qp *cmd,
				     struct vrnic_qp_lists *l)
{
	struct device *dev = &vdev->pdev->dev;
	int ret;

	ret = vrnic_ib_kring_alloc(vdev, &qp->sq, qp->sq_log, qp->sq_shift,
				   &l->sq, &l->sq_dma, &l->sq_size);
	if (ret)
		return ret;
	if (!qp->no_rq) {
		ret = vrnic_ib_kring_alloc(vdev, &qp->rq, qp->rq_log,
					   qp->rq_shift, &l->rq, &l->rq_dma,
					   &l->rq_size);
		if (ret)
			return ret;
	}
	qp->dbrec = dma_alloc_coherent(dev, sizeof(*qp->dbrec),
				       &qp->dbrec_dma, GFP_KERNEL);
	if (!qp->dbrec)
		return -ENOMEM;
	cmd->sq_base = cpu_to_le64(l->sq_dma);
	cmd->rq_base = cpu_to_le64(l->rq_dma);
	cmd->sq_flags = VRNIC_RING_PAGED;
	cmd->rq_flags = VRNIC_RING_PAGED;
	return 0;
}

/* What the rings the device accepted hold, back into the caller's caps. */
static void vrnic_ib_qp_set_caps(struct vrnic_qp *qp, struct ib_qp_cap *cap)
{
	u32 send_room = BIT(qp->sq_shift) - vrnic_send_wqe_data_off(qp->type);

	qp->max_send_sge = min_t(u32, send_room / sizeof(struct vrnic_sge),
				 VRNIC_MAX_SGE);
	qp->max_recv_sge = min_t(u32, (BIT(qp->rq_shift) - VRNIC_RECV_WQE_HDR) /
				 sizeof(struct vrnic_sge), VRNIC_MAX_SGE);
	qp->max_inline = min_t(u32, send_room, VRNIC_MAX_INLINE);
	if (qp->no_rq)
		qp->max_recv_sge = 0;
	cap->max_send_wr = BIT(qp->sq_log);
	cap->max_recv_wr = qp->no_rq ? 0 : BIT(qp->rq_log);
	cap->max_send_sge = qp->max_send_sge;
	cap->max_recv_sge = qp->max_recv_sge;
	cap->max_inline_data = qp->max_inline;
}

/* What the device was given: the provider posts by it. */
static int vrnic_ib_create_qp_resp(struct vrnic_qp *qp, struct ib_udata *udata)
{
	struct vrnic_create_qp_resp uresp = {
		.qpn = qp->qpn,
		.sq_log_depth = qp->sq_log,
		.sq_wqe_shift = qp->sq_shift,
		.max_send_sge = qp->max_send_sge,
		.max_inline = qp->max_inline,
	};

	if (!qp->no_rq) {
		uresp.rq_log_depth = qp->rq_log;
		uresp.rq_wqe_shift = qp->rq_shift;
		uresp.max_recv_sge = qp->max_recv_sge;
	}
	return ib_copy_to_udata(udata, &uresp,
				min(sizeof(uresp), udata->outlen));
}

static void vrnic_ib_qp_link_cqs(struct vrnic_qp *qp);

int vrnic_ib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		       struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibqp->device);
	struct vrnic_qp *qp = to_vqp(ibqp);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_QP };
	struct vrnic_admin_create_qp *c = &cmd.create_qp;
	struct device *dev = &vdev->pdev->dev;
	struct vrnic_qp_lists lists = {};
	u32 qpn;
	int ret;

	/* Every type, XRC targets included: modify and query take it. */
	mutex_init(&qp->state_lock);
	INIT_LIST_HEAD(&qp->send_cq_node);
	INIT_LIST_HEAD(&qp->recv_cq_node);
	if (init->qp_type == IB_QPT_XRC_TGT)
		return vrnic_ib_create_xrc_tgt(vdev, qp, init);
	ret = vrnic_ib_qp_init_geometry(qp, init, udata);
	if (ret)
		return ret;
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->rq_lock);

	c->type = qp->type;
	c->uctx = cpu_to_le32(vrnic_ib_uctx_of(udata));
	c->pdn = cpu_to_le32(to_vpd(ibqp->pd)->pdn);
	c->send_cqn = cpu_to_le32(to_vcq(init->send_cq)->cqn);
	if (init->recv_cq)
		c->recv_cqn = cpu_to_le32(to_vcq(init->recv_cq)->cqn);
	if (init->srq)
		c->srqn = cpu_to_le32(to_vsrq(init->srq)->srqn);
	if (udata)
		ret = vrnic_ib_create_qp_user(vdev, qp, udata, c, &lists);
	else
		ret = vrnic_ib_create_qp_kernel(vdev, qp, c, &lists);
	if (ret)
		goto err_mem;
	c->dbrec = cpu_to_le64(qp->dbrec_dma);
	c->sq_log_depth = qp->sq_log;
	c->rq_log_depth = qp->rq_log;
	c->sq_wqe_shift = qp->sq_shift;
	c->rq_wqe_shift = qp->rq_shift;
	ret = vrnic_ib_admin_exec(vdev, &cmd, &qpn);
	vrnic_ib_qp_lists_free(dev, &lists);
	if (ret)
		goto err_mem;

	qp->qpn = qpn;
	ibqp->qp_num = qpn;
	qp->state = IB_QPS_RESET;
	vrnic_ib_qp_set_caps(qp, &init->cap);
	if (udata) {
		ret = vrnic_ib_create_qp_resp(qp, udata);
		if (ret)
			goto err_destroy;
	}
	ret = xa_insert_irq(&vdev->qp_xa, qpn, qp, GFP_KERNEL);
	if (ret)
		goto err_destroy;
	if (!udata)
		vrnic_ib_qp_link_cqs(qp);
	return 0;

err_destroy:
	vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_QP, qpn, "QP");
err_mem:
	vrnic_ib_qp_lists_free(dev, &lists);
	vrnic_ib_qp_free_mem(vdev, qp);
	return ret;
}

/*
 * A kernel QP joins its CQs' lists, which a dead device's poll_cq flushes
 * (vrnic_ib_cq_flush()); each list under its CQ's lock.
 */
static void vrnic_ib_qp_link_cqs(struct vrnic_qp *qp)
{
	struct ib_cq *scq = qp->ibqp.send_cq, *rcq = qp->ibqp.recv_cq;
	unsigned long flags;

	if (scq) {
		spin_lock_irqsave(&to_vcq(scq)->lock, flags);
		list_add_tail(&qp->send_cq_node, &to_vcq(scq)->send_qps);
		spin_unlock_irqrestore(&to_vcq(scq)->lock, flags);
	}
	if (rcq && !qp->no_rq) {
		spin_lock_irqsave(&to_vcq(rcq)->lock, flags);
		list_add_tail(&qp->recv_cq_node, &to_vcq(rcq)->recv_qps);
		spin_unlock_irqrestore(&to_vcq(rcq)->lock, flags);
	}
}

/*
 * Purge qp's completions from its kernel CQs, one CQ lock at a time.  Lock
 * order: a CQ lock, then a QP's sq_lock or rq_lock (vrnic_ib_qp_flush()).
 */
static void vrnic_ib_qp_clean_cqs(struct vrnic_qp *qp)
{
	struct ib_cq *scq = qp->ibqp.send_cq, *rcq = qp->ibqp.recv_cq;

	if (scq)
		vrnic_ib_cq_clean(to_vcq(scq), qp->qpn);
	if (rcq && rcq != scq)
		vrnic_ib_cq_clean(to_vcq(rcq), qp->qpn);
}

/*
 * Destroy: leave the CQs' lists, each under its CQ's lock, so that no
 * poller of either CQ reaches qp once it is freed.  A QP taken through
 * RESET stays on them (vrnic_ib_qp_restart() only purges).
 */
static void vrnic_ib_qp_unlink_cqs(struct vrnic_qp *qp)
{
	struct ib_cq *scq = qp->ibqp.send_cq, *rcq = qp->ibqp.recv_cq;
	unsigned long flags;

	if (scq) {
		spin_lock_irqsave(&to_vcq(scq)->lock, flags);
		list_del_init(&qp->send_cq_node);
		spin_unlock_irqrestore(&to_vcq(scq)->lock, flags);
	}
	if (rcq) {
		spin_lock_irqsave(&to_vcq(rcq)->lock, flags);
		list_del_init(&qp->recv_cq_node);
		spin_unlock_irqrestore(&to_vcq(rcq)->lock, flags);
	}
}

int vrnic_ib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibqp->device);
	struct vrnic_qp *qp = to_vqp(ibqp);

	mutex_destroy(&qp->state_lock);
	/*
	 * Refused: the function is quiesced first (vrnic_pf_destroy()), so
	 * neither the rings nor the buffers the posted WQEs name (a kernel
	 * ULP's, which it frees once this returns) are touched any more.
	 */
	vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_QP, qp->qpn, "QP");
	xa_erase_irq(&vdev->qp_xa, qp->qpn);
	vrnic_pf_sync_events(vdev->pf, 0);	/* QP events: async EQ */
	/* Out of the table and the CQs' lists: no poller holds qp. */
	vrnic_ib_qp_clean_cqs(qp);
	vrnic_ib_qp_unlink_cqs(qp);
	vrnic_ib_qp_free_mem(vdev, qp);
	return 0;
}

void vrnic_ib_qp_completed(struct vrnic_qp *qp, bool send, u32 idx)
{
	if (send)
		WRITE_ONCE(qp->sq_tail, idx + 1);
	else
		WRITE_ONCE(qp->rq_tail, idx + 1);
}

/*
 * The device is dead (vdev->dead): no CQE will come for the WQEs still
 * outstanding on this queue.  Complete them, oldest first, with
 * IB_WC_WR_FLUSH_ERR, as a QP in ERR would (mlx5's software completions),
 * so that kernel ULPs' drains and teardowns end.  Every WQE keeps its
 * wr_id first.  Under the lock of the queue's CQ; how many were written.
 */
int vrnic_ib_qp_flush(struct vrnic_qp *qp, bool send, struct ib_wc *wc, int max)
{
	spinlock_t *lock = send ? &qp->sq_lock : &qp->rq_lock;
	struct vrnic_ib_kring *ring = send ? &qp->sq : &qp->rq;
	u32 *tail = send ? &qp->sq_tail : &qp->rq_tail;
	int n = 0;

	if (!ring->va)
		return 0;
	spin_lock(lock);
	while (n < max && *tail != (send ? qp->sq_head : qp->rq_head)) {
		const __le64 *wr_id = vrnic_ib_kring_slot(ring, *tail);
		struct ib_wc *w = &wc[n++];

		memset(w, 0, sizeof(*w));
		w->wr_id = le64_to_cpu(*wr_id);
		w->status = IB_WC_WR_FLUSH_ERR;
		w->opcode = send ? IB_WC_SEND : IB_WC_RECV;
		w->qp = &qp->ibqp;
		w->port_num = 1;
		WRITE_ONCE(*tail, *tail + 1);
	}
	spin_unlock(lock);
	return n;
}

static void vrnic_ib_cq_kick(struct ib_cq *ibcq)
{
	if (ibcq && ibcq->comp_handler && ibcq->poll_ctx != IB_POLL_DIRECT)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
}

/*
 * vdev->flush_work, on DEVICE_FATAL and after every post to a dead
 * device: call the completion handler of each CQ a kernel QP with
 * outstanding work uses, so that its ULP polls the flushed completions.
 * Process context, no ULP lock held; under the QP table's lock, so that
 * no QP found can be destroyed (and its CQs freed) meanwhile.  The owner
 * of an IB_POLL_DIRECT CQ polls it itself.
 */
void vrnic_ib_qp_kick_flush(struct work_struct *work)
{
	struct vrnic_dev *vdev = container_of(work, struct vrnic_dev,
					      flush_work);
	struct vrnic_qp *qp;
	unsigned long qpn;

	xa_lock_irq(&vdev->qp_xa);
	xa_for_each(&vdev->qp_xa, qpn, qp) {
		if (qp->sq.va &&
		    READ_ONCE(qp->sq_tail) != READ_ONCE(qp->sq_head))
			vrnic_ib_cq_kick(qp->ibqp.send_cq);
		if (qp->rq.va &&
		    READ_ONCE(qp->rq_tail) != READ_ONCE(qp->rq_head))
			vrnic_ib_cq_kick(qp->ibqp.recv_cq);
	}
	xa_unlock_irq(&vdev->qp_xa);
}

/*
 * An async event for a QP: QP_FATAL, LAST_WQE_REACHED (SRQ QPs) or
 * SQ_DRAINED (asked for at RTS->SQD).  The
 * device moved a QP_FATAL QP to ERR (from RTR, RTS, SQD or SQE only, spec
 * "QP state"): so does the state the driver tracks, or the next
 * modify_qp would be checked against a state the QP is no longer in.  A
 * QP already taken back to RESET or INIT keeps its state: the event was
 * for its previous life.
 */
void vrnic_ib_qp_event(struct vrnic_dev *vdev, u32 qpn, enum ib_event_type type)
{
	struct vrnic_qp *qp;
	u8 state;

	/* Under RCU, no lock: vrnic_ib_destroy_qp() syncs with this handler. */
	qp = xa_load(&vdev->qp_xa, qpn);
	if (qp && type == IB_EVENT_QP_FATAL) {
		state = READ_ONCE(qp->state);
		if (state == IB_QPS_RTR || state == IB_QPS_RTS ||
		    state == IB_QPS_SQD || state == IB_QPS_SQE)
			WRITE_ONCE(qp->state, IB_QPS_ERR);
	}
	if (qp && qp->ibqp.event_handler) {
		struct ib_event ev = {
			.device = qp->ibqp.device,
			.element.qp = &qp->ibqp,
			.event = type,
		};

		qp->ibqp.event_handler(&ev, qp->ibqp.qp_context);
	}
}

#define VRNIC_QP_SUPPORTED_MASK (IB_QP_STATE | IB_QP_CUR_STATE | \
	IB_QP_ACCESS_FLAGS | IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_AV | \
	IB_QP_PATH_MTU | IB_QP_TIMEOUT | IB_QP_RETRY_CNT | IB_QP_RNR_RETRY | \
	IB_QP_RQ_PSN | IB_QP_MAX_QP_RD_ATOMIC | IB_QP_MIN_RNR_TIMER | \
	IB_QP_SQ_PSN | IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_DEST_QPN | IB_QP_QKEY | \
	IB_QP_EN_SQD_ASYNC_NOTIFY)

static int vrnic_ib_qp_av(struct vrnic_qp *qp, struct ib_qp_attr *attr,
			  int mask, struct vrnic_qp_attr *a)
{
	const struct ib_global_route *grh = rdma_ah_read_grh(&attr->ah_attr);
	const struct ib_gid_attr *sgid_attr = grh->sgid_attr;
	u32 dqpn = (mask & IB_QP_DEST_QPN) ? attr->dest_qp_num :
		   le32_to_cpu(qp->attr.dest_qpn);

	if (!(rdma_ah_get_ah_flags(&attr->ah_attr) & IB_AH_GRH) || !sgid_attr ||
	    sgid_attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
		return -EINVAL;
	memcpy(a->dgid, grh->dgid.raw, sizeof(a->dgid));
	a->sgid_index = sgid_attr->index;	/* the device's GID table */
	memcpy(a->dmac, attr->ah_attr.roce.dmac, ETH_ALEN);
	a->traffic_class = grh->traffic_class;
	a->hop_limit = grh->hop_limit;
	a->flow_label = cpu_to_le32(grh->flow_label);
	a->udp_sport = cpu_to_le16(rdma_get_udp_sport(grh->flow_label,
						      qp->qpn, dqpn));
	return 0;
}

/*
 * The device restarts the SQ and RQ at index 0 on a move to RESET and
 * forgets their WQEs: purge the QP's completions first (a poller could
 * otherwise move a tail after the restart), then start the rings and the
 * doorbell record again at zero.
 */
static void vrnic_ib_qp_restart(struct vrnic_qp *qp)
{
	unsigned long flags;

	vrnic_ib_qp_clean_cqs(qp);
	spin_lock_irqsave(&qp->sq_lock, flags);
	qp->sq_head = 0;
	WRITE_ONCE(qp->sq_tail, 0);
	if (qp->dbrec)
		qp->dbrec->sq_pi = 0;
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	spin_lock_irqsave(&qp->rq_lock, flags);
	qp->rq_head = 0;
	WRITE_ONCE(qp->rq_tail, 0);
	if (qp->dbrec)
		qp->dbrec->rq_pi = 0;
	spin_unlock_irqrestore(&qp->rq_lock, flags);
}

/* Acknowledged and retransmitted: what selective repeat applies to. */
static bool vrnic_ib_qp_type_reliable(enum ib_qp_type type)
{
	return type == IB_QPT_RC || type == IB_QPT_XRC_INI ||
	       type == IB_QPT_XRC_TGT;
}

/*
 * ucmd: what user space told (vrnic-abi.h), checked by
 * vrnic_ib_modify_qp(): the options the QP's peer agreed to through ECE,
 * the QP's own transport settings; NULL for a kernel consumer.
 */
static int __vrnic_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			     int mask, const struct vrnic_modify_qp_cmd *ucmd)
{
	struct vrnic_dev *vdev = to_vdev(ibqp->device);
	struct vrnic_qp *qp = to_vqp(ibqp);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_MODIFY_QP };
	enum ib_qp_state cur = READ_ONCE(qp->state), next;
	struct vrnic_qp_attr *a;
	dma_addr_t a_dma;
	u32 vmask = 0;
	int ret;

	lockdep_assert_held(&qp->state_lock);
	/*
	 * Controlled Q_Keys (IBA 10.2.5) are ib_core's policy: uverbs refuses
	 * them to processes without CAP_NET_RAW unless the administrator set
	 * "rdma system set privileged-qkey on".
	 */
	if (mask & IB_QP_CUR_STATE)
		cur = attr->cur_qp_state;
	next = (mask & IB_QP_STATE) ? attr->qp_state : cur;
	if (!ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask)) {
		ibdev_dbg(ibqp->device,
			  "QP %u: %d -> %d with mask 0x%x is not allowed\n",
			  qp->qpn, cur, next, mask);
		return -EINVAL;
	}
	if ((mask & IB_QP_PATH_MTU) &&
	    (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096))
		return -EINVAL;
	/* A QP's transport settings go with its move to RTR, never later. */
	if (ucmd && (ucmd->comp_mask & VRNIC_MODIFY_QP_CMD_TRANSPORT) &&
	    (cur != IB_QPS_INIT || next != IB_QPS_RTR))
		return -EINVAL;
	/* The responder depth is a promise of resources: no more than exist. */
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > VRNIC_MAX_RD_ATOMIC)
		return -EINVAL;

	a = vrnic_pf_cmd_buf_alloc(vdev->pf, &a_dma);
	if (!a)
		return -ENOMEM;
	*a = qp->attr;
	if (mask & IB_QP_STATE) {
		a->state = next;	/* same numbering as enum ib_qp_state */
		vmask |= VRNIC_QP_ATTR_STATE;
	}
	if (mask & IB_QP_ACCESS_FLAGS) {
		a->access = cpu_to_le32(vrnic_ib_access(attr->qp_access_flags) &
					~VRNIC_ACCESS_LOCAL_WRITE);
		vmask |= VRNIC_QP_ATTR_ACCESS;
	}
	if (mask & IB_QP_AV) {
		ret = vrnic_ib_qp_av(qp, attr, mask, a);
		if (ret)
			goto out;
		vmask |= VRNIC_QP_ATTR_AV;
	}
	if (mask & IB_QP_PATH_MTU) {
		a->path_mtu = attr->path_mtu;
		vmask |= VRNIC_QP_ATTR_PATH_MTU;
	}
	if (mask & IB_QP_TIMEOUT) {
		a->timeout = attr->timeout;
		vmask |= VRNIC_QP_ATTR_TIMEOUT;
	}
	if (mask & IB_QP_RETRY_CNT) {
		a->retry_cnt = attr->retry_cnt;
		vmask |= VRNIC_QP_ATTR_RETRY_CNT;
	}
	if (mask & IB_QP_RNR_RETRY) {
		a->rnr_retry = attr->rnr_retry;
		vmask |= VRNIC_QP_ATTR_RNR_RETRY;
	}
	if (mask & IB_QP_MIN_RNR_TIMER) {
		a->min_rnr_timer = attr->min_rnr_timer;
		vmask |= VRNIC_QP_ATTR_MIN_RNR_TIMER;
	}
	if (mask & IB_QP_MAX_QP_RD_ATOMIC) {
		/* An upper bound: clamped, and query_qp reports the value used. */
		a->max_rd_atomic = min_t(u32, attr->max_rd_atomic,
					 VRNIC_MAX_RD_ATOMIC);
		vmask |= VRNIC_QP_ATTR_MAX_RD_ATOMIC;
	}
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC) {
		a->max_dest_rd_atomic = attr->max_dest_rd_atomic;
		vmask |= VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC;
	}
	if (mask & IB_QP_SQ_PSN) {
		a->sq_psn = cpu_to_le32(attr->sq_psn & 0xffffff);
		vmask |= VRNIC_QP_ATTR_SQ_PSN;
	}
	if (mask & IB_QP_RQ_PSN) {
		a->rq_psn = cpu_to_le32(attr->rq_psn & 0xffffff);
		vmask |= VRNIC_QP_ATTR_RQ_PSN;
	}
	if (mask & IB_QP_DEST_QPN) {
		a->dest_qpn = cpu_to_le32(attr->dest_qp_num);
		vmask |= VRNIC_QP_ATTR_DEST_QPN;
	}
	if (mask & IB_QP_QKEY) {
		a->qkey = cpu_to_le32(attr->qkey);
		vmask |= VRNIC_QP_ATTR_QKEY;
	}
	/* IB_EVENT_SQ_DRAINED once the SQ is drained in SQD (RTS->SQD). */
	if (mask & IB_QP_EN_SQD_ASYNC_NOTIFY) {
		a->sqd_notify = !!attr->en_sqd_async_notify;
		vmask |= VRNIC_QP_ATTR_SQD_NOTIFY;
	}
	/*
	 * The QP's own settings (vrnicdv_set_qp_transport); else selective
	 * repeat when the peer agreed through ECE, or the device defaults
	 * for every peer (spec 1.1).
	 */
	if (cur == IB_QPS_INIT && next == IB_QPS_RTR &&
	    vrnic_ib_qp_type_reliable(ibqp->qp_type)) {
		u32 cm = ucmd ? ucmd->comp_mask : 0;
		bool sr = READ_ONCE(vdev->selective_repeat) ||
			  ((cm & VRNIC_MODIFY_QP_CMD_ECE) &&
			   (ucmd->ece_options & VRNIC_ECE_SELECTIVE_REPEAT));
		u16 window = min_t(u16, READ_ONCE(vdev->send_window),
				   VRNIC_SEND_WINDOW_MAX);
		u8 spray = min_t(u8, READ_ONCE(vdev->spray_paths),
				 VRNIC_SPRAY_PATHS_MAX);

		if (cm & VRNIC_MODIFY_QP_CMD_TRANSPORT) {
			sr = ucmd->transport_flags &
			     VRNIC_MODIFY_QP_TRANSPORT_SR;
			window = ucmd->send_window;
			spray = ucmd->spray_paths;
		}

		if (sr || window || spray) {
			a->transport_flags =
				cpu_to_le32(sr ? VRNIC_QP_TF_SELECTIVE_REPEAT : 0);
			a->send_window = cpu_to_le16(window);
			a->spray_paths = spray;
			vmask |= VRNIC_QP_ATTR_TRANSPORT;
		}
	}
	cmd.modify_qp.attr_addr = cpu_to_le64(a_dma);
	cmd.modify_qp.qpn = cpu_to_le32(qp->qpn);
	cmd.modify_qp.attr_mask = cpu_to_le32(vmask);
	ret = vrnic_ib_admin_exec(vdev, &cmd, NULL);
	/* A dead device has no QP left to ask: ERR and RESET are ours. */
	if (ret == -ENODEV && READ_ONCE(vdev->dead) &&
	    (next == IB_QPS_ERR || next == IB_QPS_RESET))
		ret = 0;
	trace_vrnic_modify_qp(dev_name(&ibqp->device->dev), qp->qpn, cur, next,
			      vmask, ret);
	if (!ret) {
		qp->attr = *a;
		WRITE_ONCE(qp->state, next);
		if (next == IB_QPS_RESET && cur != IB_QPS_RESET)
			vrnic_ib_qp_restart(qp);
	}
out:
	vrnic_pf_cmd_buf_free(vdev->pf, a, a_dma);
	return ret;
}

/*
 * ECE options a provider passes on (vrnic-abi.h): version 2's selective
 * repeat, on a reliable QP of a device that has it, and only what the
 * context offered (the administrator's ece_selective_repeat when it was
 * opened), or nothing.
 */
static int vrnic_ib_qp_ece_check(struct vrnic_qp *qp, u32 options,
				 struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(qp->ibqp.device);
	u32 bits = options & ~VRNIC_ECE_VERSION_MASK;
	struct vrnic_ucontext *uctx;

	if (!bits)
		return 0;
	uctx = rdma_udata_to_drv_context(udata, struct vrnic_ucontext,
					 ibucontext);
	if (bits & ~VRNIC_ECE_SELECTIVE_REPEAT ||
	    options >> VRNIC_ECE_VERSION_SHIFT != VRNIC_ECE_VERSION_SR ||
	    !uctx || (bits & ~uctx->ece_offer))
		return -EINVAL;
	if (!vrnic_ib_qp_type_reliable(qp->ibqp.qp_type))
		return -EINVAL;
	if (!(le32_to_cpu(vdev->attr.caps) & VRNIC_CAP_SELECTIVE_REPEAT))
		return -EOPNOTSUPP;
	return 0;
}

/*
 * A QP's own transport settings (vrnicdv_set_qp_transport): on a reliable
 * QP of a context that was granted them (a device with selective repeat,
 * the administrator's user_transport when it was opened), each within
 * what the device takes, and spraying only with selective repeat (whose
 * receiver takes what arrives out of order).  Without
 * VRNIC_MODIFY_QP_CMD_TRANSPORT every field is 0.
 */
static int vrnic_ib_qp_transport_check(struct vrnic_qp *qp,
				       const struct vrnic_modify_qp_cmd *ucmd,
				       struct ib_udata *udata)
{
	struct vrnic_ucontext *uctx;

	if (!(ucmd->comp_mask & VRNIC_MODIFY_QP_CMD_TRANSPORT)) {
		if (ucmd->transport_flags || ucmd->send_window ||
		    ucmd->spray_paths || ucmd->reserved)
			return -EINVAL;
		return 0;
	}
	if (ucmd->transport_flags & ~VRNIC_MODIFY_QP_TRANSPORT_ALL ||
	    ucmd->send_window > VRNIC_SEND_WINDOW_MAX ||
	    ucmd->spray_paths > VRNIC_SPRAY_PATHS_MAX || ucmd->reserved ||
	    (ucmd->spray_paths > 1 &&
	     !(ucmd->transport_flags & VRNIC_MODIFY_QP_TRANSPORT_SR)) ||
	    !vrnic_ib_qp_type_reliable(qp->ibqp.qp_type))
		return -EINVAL;
	/* Granted when the context was opened (debugfs user_transport). */
	uctx = rdma_udata_to_drv_context(udata, struct vrnic_ucontext,
					 ibucontext);
	if (!uctx || !uctx->user_transport)
		return -EOPNOTSUPP;
	return 0;
}

/*
 * uverbs takes the QP shared for modify: two callers at once would race on
 * the state checked, qp->attr and the restart of the rings.
 */
int vrnic_ib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		       struct ib_udata *udata)
{
	struct vrnic_qp *qp = to_vqp(ibqp);
	struct vrnic_modify_qp_cmd ucmd = {};
	int ret;

	if (udata) {
		ret = vrnic_ib_udata_req(udata, &ucmd, sizeof(ucmd));
		if (ret)
			return ret;
	}
	if (ucmd.comp_mask & ~VRNIC_MODIFY_QP_CMD_MASK_ALL)
		return -EOPNOTSUPP;
	if (ucmd.comp_mask & VRNIC_MODIFY_QP_CMD_ECE) {
		ret = vrnic_ib_qp_ece_check(qp, ucmd.ece_options, udata);
		if (ret)
			return ret;
	} else if (ucmd.ece_options) {
		return -EINVAL;
	}
	ret = vrnic_ib_qp_transport_check(qp, &ucmd, udata);
	if (ret)
		return ret;
	if (mask & ~VRNIC_QP_SUPPORTED_MASK)
		return -EOPNOTSUPP;
	mutex_lock(&qp->state_lock);
	ret = __vrnic_modify_qp(ibqp, attr, mask, udata ? &ucmd : NULL);
	mutex_unlock(&qp->state_lock);
	return ret;
}

/* The device's view of a QP: state, current PSNs, attributes. */
struct vrnic_qp_hw {
	struct vrnic_qp_attr *a;
	dma_addr_t dma;
};

static int vrnic_ib_qp_hw_query(struct vrnic_dev *vdev, u32 qpn,
				struct vrnic_qp_hw *hw)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_QUERY_QP };
	int ret;

	hw->a = vrnic_pf_cmd_buf_alloc(vdev->pf, &hw->dma);
	if (!hw->a)
		return -ENOMEM;
	cmd.query_qp.out_addr = cpu_to_le64(hw->dma);
	cmd.query_qp.qpn = cpu_to_le32(qpn);
	ret = vrnic_ib_admin_exec(vdev, &cmd, NULL);
	if (ret)
		vrnic_pf_cmd_buf_free(vdev->pf, hw->a, hw->dma);
	return ret;
}

static void vrnic_ib_qp_hw_put(struct vrnic_dev *vdev, struct vrnic_qp_hw *hw)
{
	vrnic_pf_cmd_buf_free(vdev->pf, hw->a, hw->dma);
}

static const char *const vrnic_qp_state_name[] = {
	"RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR",
};

/* rdma res show qp -dd: what the device holds for the QP. */
int vrnic_ib_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp)
{
	struct vrnic_dev *vdev = to_vdev(ibqp->device);
	struct vrnic_qp *qp = to_vqp(ibqp);
	struct nlattr *table;
	struct vrnic_qp_hw hw;
	struct vrnic_qp_attr *a;
	u8 state, spray;
	bool sr;
	int ret;

	ret = vrnic_ib_qp_hw_query(vdev, qp->qpn, &hw);
	if (ret)
		return ret;
	a = hw.a;
	/* Once: the device can still write the buffer it answered in. */
	state = READ_ONCE(a->state);
	sr = le32_to_cpu(READ_ONCE(a->transport_flags)) &
	     VRNIC_QP_TF_SELECTIVE_REPEAT;
	spray = READ_ONCE(a->spray_paths);
	table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);
	if (!table ||
	    rdma_nl_put_driver_string(msg, "hw_state",
				      state < ARRAY_SIZE(vrnic_qp_state_name) ?
				      vrnic_qp_state_name[state] : "?") ||
	    rdma_nl_put_driver_u32_hex(msg, "next_send_psn",
				       le32_to_cpu(a->sq_psn)) ||
	    rdma_nl_put_driver_u32_hex(msg, "expected_psn",
				       le32_to_cpu(a->rq_psn)) ||
	    rdma_nl_put_driver_u32(msg, "sq_depth", BIT(qp->sq_log)) ||
	    rdma_nl_put_driver_u32(msg, "sq_wqe_size", BIT(qp->sq_shift)) ||
	    rdma_nl_put_driver_u32(msg, "rq_depth",
				   qp->no_rq ? 0 : BIT(qp->rq_log)) ||
	    rdma_nl_put_driver_u32(msg, "rq_wqe_size",
				   qp->no_rq ? 0 : BIT(qp->rq_shift)) ||
	    rdma_nl_put_driver_u32(msg, "max_rd_atomic", a->max_rd_atomic) ||
	    rdma_nl_put_driver_u32(msg, "max_dest_rd_atomic",
				   a->max_dest_rd_atomic) ||
	    rdma_nl_put_driver_u32(msg, "cc_rate_mbps",
				   le32_to_cpu(a->cc_rate_mbps)) ||
	    rdma_nl_put_driver_u32(msg, "selective_repeat", sr) ||
	    rdma_nl_put_driver_u32(msg, "send_window",
				   le16_to_cpu(a->send_window) ?:
				   VRNIC_SEND_WINDOW_MAX) ||
	    rdma_nl_put_driver_u32(msg, "spray_paths",
				   sr && spray > 1 ? spray : 1)) {
		if (table)
			nla_nest_cancel(msg, table);
		ret = -EMSGSIZE;
	} else {
		nla_nest_end(msg, table);
	}
	vrnic_ib_qp_hw_put(vdev, &hw);
	return ret;
}

/*
 * A connected QP's address vector, as modify_qp gave it to the device
 * (sgid_attr stays NULL: ib_core does not take a reference for a query).
 */
static void vrnic_ib_qp_read_av(struct vrnic_qp *qp, u8 state,
				struct rdma_ah_attr *ah)
{
	const struct vrnic_qp_attr *a = &qp->attr;
	union ib_gid dgid;

	/* A path is given on the way to RTR; RESET forgets it. */
	if (vrnic_ib_qp_is_ud(qp) || state == IB_QPS_RESET ||
	    state == IB_QPS_INIT || !memchr_inv(a->dgid, 0, sizeof(a->dgid)))
		return;
	memcpy(dgid.raw, a->dgid, sizeof(dgid.raw));
	ah->type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(ah, 1);
	rdma_ah_set_grh(ah, &dgid, le32_to_cpu(a->flow_label), a->sgid_index,
			a->hop_limit, a->traffic_class);
	memcpy(ah->roce.dmac, a->dmac, ETH_ALEN);
}

int vrnic_ib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		      struct ib_qp_init_attr *init_attr)
{
	struct vrnic_dev *vdev = to_vdev(ibqp->device);
	struct vrnic_qp *qp = to_vqp(ibqp);
	struct vrnic_qp_hw hw;
	struct vrnic_qp_attr *a;
	u8 state;
	int ret;

	ret = vrnic_ib_qp_hw_query(vdev, qp->qpn, &hw);
	if (ret)
		return ret;
	a = hw.a;
	/* Once, and bounded: the device can still write the buffer. */
	state = READ_ONCE(a->state);
	if (state > IB_QPS_ERR) {
		vrnic_ib_qp_hw_put(vdev, &hw);
		return -EIO;
	}
	/* The device's word is the last: an event may still be queued. */
	if (state == IB_QPS_ERR)
		WRITE_ONCE(qp->state, IB_QPS_ERR);
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = state;
	attr->cur_qp_state = state;
	attr->path_mtu = a->path_mtu ? a->path_mtu : IB_MTU_1024;
	attr->path_mig_state = IB_MIG_MIGRATED;
	attr->qp_access_flags = vrnic_ib_to_ib_access(le32_to_cpu(a->access));
	attr->timeout = a->timeout;
	attr->retry_cnt = a->retry_cnt;
	attr->rnr_retry = a->rnr_retry;
	attr->min_rnr_timer = a->min_rnr_timer;
	attr->max_rd_atomic = a->max_rd_atomic;
	attr->max_dest_rd_atomic = a->max_dest_rd_atomic;
	attr->sq_psn = le32_to_cpu(a->sq_psn);
	attr->rq_psn = le32_to_cpu(a->rq_psn);
	attr->dest_qp_num = le32_to_cpu(a->dest_qpn);
	attr->qkey = le32_to_cpu(a->qkey);
	attr->port_num = 1;
	/* Only in SQD: the device finishes what the SQ began (spec). */
	attr->sq_draining = state == IB_QPS_SQD && READ_ONCE(a->sq_draining);
	attr->en_sqd_async_notify = state == IB_QPS_SQD &&
				    READ_ONCE(a->sqd_notify);
	mutex_lock(&qp->state_lock);
	vrnic_ib_qp_read_av(qp, state, &attr->ah_attr);
	mutex_unlock(&qp->state_lock);
	attr->cap.max_send_wr = BIT(qp->sq_log);
	attr->cap.max_recv_wr = qp->no_rq ? 0 : BIT(qp->rq_log);
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_recv_sge = qp->max_recv_sge;
	attr->cap.max_inline_data = qp->max_inline;
	init_attr->cap = attr->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->sq_sig_type = qp->sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	vrnic_ib_qp_hw_put(vdev, &hw);
	return 0;
}

/* ----------------------------------------------- kernel QP data path */

static int vrnic_ib_wr_opcode(enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_SEND:
		return VRNIC_WR_SEND;
	case IB_WR_SEND_WITH_IMM:
		return VRNIC_WR_SEND_IMM;
	case IB_WR_RDMA_WRITE:
		return VRNIC_WR_RDMA_WRITE;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return VRNIC_WR_RDMA_WRITE_IMM;
	case IB_WR_RDMA_READ:
		return VRNIC_WR_RDMA_READ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return VRNIC_WR_ATOMIC_CMP_SWP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return VRNIC_WR_ATOMIC_FETCH_ADD;
	case IB_WR_SEND_WITH_INV:
		return VRNIC_WR_SEND_INV;
	case IB_WR_LOCAL_INV:
		return VRNIC_WR_LOCAL_INV;
	case IB_WR_REG_MR:
		return VRNIC_WR_REG_MR;
	default:
		/*
		 * Also IB_WR_ATOMIC_WRITE, IB_WR_FLUSH and IB_WR_BIND_MW: no
		 * kernel work request carries their operands; user space
		 * posts them.
		 */
		return -EINVAL;
	}
}

static u8 vrnic_ib_wqe_flags(struct vrnic_qp *qp, const struct ib_send_wr *wr)
{
	u8 flags = 0;

	if ((wr->send_flags & IB_SEND_SIGNALED) || qp->sig_all)
		flags |= VRNIC_WQE_SIGNALED;
	if (wr->send_flags & IB_SEND_SOLICITED)
		flags |= VRNIC_WQE_SOLICITED;
	if (wr->send_flags & IB_SEND_FENCE)
		flags |= VRNIC_WQE_FENCE;
	return flags;
}

/* IB_WR_REG_MR: hand the page list map_mr_sg built to the device. */
static int vrnic_ib_build_reg_mr(struct vrnic_qp *qp, const struct ib_reg_wr *wr,
				 void *slot)
{
	struct vrnic_mr *mr = container_of(wr->mr, struct vrnic_mr, ibmr);
	struct vrnic_reg_mr_wqe *w = slot;

	/* One of the page sizes advertised in page_size_cap, no other. */
	if (!mr->pbl || !is_power_of_2(wr->mr->page_size) ||
	    !(wr->mr->page_size & VRNIC_MR_PGSZ_BITMAP))
		return -EINVAL;
	memset(w, 0, sizeof(*w));
	w->wr_id = cpu_to_le64(wr->wr.wr_id);
	w->opcode = VRNIC_WR_REG_MR;
	w->flags = vrnic_ib_wqe_flags(qp, &wr->wr);
	w->page_shift = ilog2(wr->mr->page_size);
	w->access = cpu_to_le32(vrnic_ib_access(wr->access));
	w->iova = cpu_to_le64(wr->mr->iova);
	w->key = cpu_to_le32(wr->key);
	w->npages = cpu_to_le32(mr->npages);
	w->length = cpu_to_le64(wr->mr->length);
	w->pbl = cpu_to_le64(mr->pbl_dma);
	return 0;
}

static int vrnic_ib_build_send(struct vrnic_qp *qp, const struct ib_send_wr *wr,
			       void *slot)
{
	struct vrnic_send_wqe *w = slot;
	void *data = slot + vrnic_send_wqe_data_off(qp->type);
	struct vrnic_sge *sge = data;
	int op = vrnic_ib_wr_opcode(wr->opcode);
	int i;

	if (op < 0)
		return op;
	if (op == VRNIC_WR_REG_MR)
		return vrnic_ib_build_reg_mr(qp, reg_wr(wr), slot);
	if (vrnic_ib_qp_is_ud(qp)) {
		const struct ib_ud_wr *ud = ud_wr(wr);
		struct vrnic_ud_av *av = slot + sizeof(*w);

		if (op > VRNIC_WR_SEND_IMM || !ud->ah)
			return -EINVAL;
		*av = to_vah(ud->ah)->av;
		av->dest_qpn = cpu_to_le32(ud->remote_qpn);
		av->qkey = cpu_to_le32(ud->remote_qkey);
	}
	memset(w, 0, sizeof(*w));
	w->wr_id = cpu_to_le64(wr->wr_id);
	w->opcode = op;
	w->flags = vrnic_ib_wqe_flags(qp, wr);
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		w->imm_data = (__force __le32)wr->ex.imm_data;
	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
		w->remote_addr = cpu_to_le64(rdma_wr(wr)->remote_addr);
		w->rkey = cpu_to_le32(rdma_wr(wr)->rkey);
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		w->remote_addr = cpu_to_le64(atomic_wr(wr)->remote_addr);
		w->rkey = cpu_to_le32(atomic_wr(wr)->rkey);
		w->compare_add = cpu_to_le64(atomic_wr(wr)->compare_add);
		w->swap = cpu_to_le64(atomic_wr(wr)->swap);
		break;
	case IB_WR_LOCAL_INV:
		w->rkey = cpu_to_le32(wr->ex.invalidate_rkey);
		return 0;
	case IB_WR_SEND_WITH_INV:
		w->rkey = cpu_to_le32(wr->ex.invalidate_rkey);
		break;
	default:
		break;
	}
	if (wr->send_flags & IB_SEND_INLINE) {
		u8 *dst = data;
		u32 len = 0;

		for (i = 0; i < wr->num_sge; i++) {
			/* len <= max_inline: this cannot wrap */
			if (wr->sg_list[i].length > qp->max_inline - len)
				return -EINVAL;
			memcpy(dst + len, (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			len += wr->sg_list[i].length;
		}
		w->flags |= VRNIC_WQE_INLINE;
		w->inline_len = cpu_to_le32(len);
		return 0;
	}
	if (wr->num_sge > qp->max_send_sge)
		return -EINVAL;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = cpu_to_le64(wr->sg_list[i].addr);
		sge[i].length = cpu_to_le32(wr->sg_list[i].length);
		sge[i].lkey = cpu_to_le32(wr->sg_list[i].lkey);
	}
	w->num_sge = wr->num_sge;
	return 0;
}

int vrnic_ib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr)
{
	struct vrnic_dev *vdev = to_vdev(ibqp->device);
	struct vrnic_qp *qp = to_vqp(ibqp);
	unsigned long flags;
	int ret = 0;

	if (!qp->sq.va)
		return -EINVAL;
	spin_lock_irqsave(&qp->sq_lock, flags);
	for (; wr; wr = wr->next) {
		void *slot;

		if (qp->sq_head - READ_ONCE(qp->sq_tail) >= BIT(qp->sq_log)) {
			ret = -ENOMEM;
			break;
		}
		slot = vrnic_ib_kring_slot(&qp->sq, qp->sq_head);
		ret = vrnic_ib_build_send(qp, wr, slot);
		if (ret)
			break;
		qp->sq_head++;
	}
	if (ret)
		*bad_wr = wr;
	/* WQEs before the producer index, the index before the doorbell. */
	dma_wmb();
	qp->dbrec->sq_pi = cpu_to_le32(qp->sq_head);
	vrnic_ib_db(vdev, VRNIC_DB_SQ, qp->qpn);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	/* Dead: only a software flush completes it (a ULP's drain WR). */
	if (unlikely(READ_ONCE(vdev->dead)))
		schedule_work(&vdev->flush_work);
	return ret;
}

/* Write one receive WQE (RQ and SRQ layout) into its ring slot. */
void vrnic_ib_fill_recv_wqe(void *slot, const struct ib_recv_wr *wr)
{
	struct vrnic_recv_wqe *w = slot;
	struct vrnic_sge *sge = slot + sizeof(*w);
	int i;

	memset(w, 0, sizeof(*w));
	w->wr_id = cpu_to_le64(wr->wr_id);
	w->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = cpu_to_le64(wr->sg_list[i].addr);
		sge[i].length = cpu_to_le32(wr->sg_list[i].length);
		sge[i].lkey = cpu_to_le32(wr->sg_list[i].lkey);
	}
}

int vrnic_ib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr)
{
	struct vrnic_dev *vdev = to_vdev(ibqp->device);
	struct vrnic_qp *qp = to_vqp(ibqp);
	unsigned long flags;
	int ret = 0;

	if (!qp->rq.va)
		return -EINVAL;
	spin_lock_irqsave(&qp->rq_lock, flags);
	for (; wr; wr = wr->next) {
		if (qp->rq_head - READ_ONCE(qp->rq_tail) >= BIT(qp->rq_log) ||
		    wr->num_sge > qp->max_recv_sge) {
			ret = wr->num_sge > qp->max_recv_sge ? -EINVAL : -ENOMEM;
			break;
		}
		vrnic_ib_fill_recv_wqe(vrnic_ib_kring_slot(&qp->rq, qp->rq_head),
				       wr);
		qp->rq_head++;
	}
	if (ret)
		*bad_wr = wr;
	dma_wmb();
	qp->dbrec->rq_pi = cpu_to_le32(qp->rq_head);
	vrnic_ib_db(vdev, VRNIC_DB_RQ, qp->qpn);
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	if (unlikely(READ_ONCE(vdev->dead)))
		schedule_work(&vdev->flush_work);
	return ret;
}

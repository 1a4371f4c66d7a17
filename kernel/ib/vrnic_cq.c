// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic completion queues.  A CQ is a ring of 32-byte CQEs with an owner
 * (phase) bit and a doorbell record holding the consumer index.  User CQs
 * live in user memory (pinned, described by a page list); kernel CQs in
 * single coherent pages (also a page list), polled here.  Completion
 * events arrive on the CQ's EQ and are passed to comp_handler.
 */
#include <linux/dma-mapping.h>
#include <linux/if_vlan.h>

#include "vrnic.h"
#include "vrnic-abi.h"

/* A kernel CQ's ring holds 2^n CQEs of 2^m bytes (vrnic_ib_kring). */
static_assert(!(sizeof(struct vrnic_cqe) & (sizeof(struct vrnic_cqe) - 1)));

/* Release whatever memory a CQ holds; fields never set are NULL. */
static void vrnic_ib_cq_free_mem(struct vrnic_dev *vdev, struct vrnic_cq *cq)
{
	struct device *dev = &vdev->pdev->dev;

	vrnic_ib_kring_free(vdev, &cq->ring);
	if (cq->dbrec)
		dma_free_coherent(dev, sizeof(*cq->dbrec), cq->dbrec,
				  cq->dbrec_dma);
	vrnic_ib_unpin_dbrec(cq->dbrec_page);
	ib_umem_release(cq->umem);
}

int vrnic_ib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		       struct uverbs_attr_bundle *attrs)
{
	struct ib_udata *udata = &attrs->driver_udata;
	struct vrnic_dev *vdev = to_vdev(ibcq->device);
	struct vrnic_cq *cq = to_vcq(ibcq);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_CQ };
	struct device *dev = &vdev->pdev->dev;
	dma_addr_t list_dma = 0;
	size_t list_size = 0;
	__le64 *list = NULL;
	u32 cqn;
	int ret;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > (1 << VRNIC_MAX_CQ_LOG_DEPTH))
		return -EINVAL;
	cq->log_depth = order_base_2(max(attr->cqe, 2));
	cq->eqn = 1 + attr->comp_vector % max(vdev->num_ceqs, 1U);
	spin_lock_init(&cq->lock);
	INIT_LIST_HEAD(&cq->send_qps);
	INIT_LIST_HEAD(&cq->recv_qps);

	cmd.create_cq.uctx = cpu_to_le32(vrnic_ib_uctx_of(udata));
	cmd.create_cq.eqn = cq->eqn;
	if (udata) {
		struct vrnic_create_cq_cmd ucmd = {};
		struct vrnic_create_cq_resp uresp = {};

		ret = vrnic_ib_udata_req(udata, &ucmd, sizeof(ucmd));
		if (ret)
			return ret;
		if (ucmd.reserved || ucmd.log_depth < cq->log_depth ||
		    ucmd.log_depth > VRNIC_MAX_CQ_LOG_DEPTH ||
		    ucmd.buf_addr & (SZ_4K - 1))
			return -EINVAL;
		cq->log_depth = ucmd.log_depth;
		cq->umem = ib_umem_get(ibcq->device, ucmd.buf_addr,
				       sizeof(struct vrnic_cqe) << cq->log_depth,
				       IB_ACCESS_LOCAL_WRITE);
		if (IS_ERR(cq->umem)) {
			ret = PTR_ERR(cq->umem);
			cq->umem = NULL;
			return ret;
		}
		ret = vrnic_ib_pin_dbrec(udata, ucmd.dbrec_addr, &cq->dbrec_page,
					 &cq->dbrec_dma);
		if (ret)
			goto err_mem;
		ret = vrnic_ib_umem_page_list(vdev, cq->umem, &list, &list_dma,
					      &list_size);
		if (ret)
			goto err_mem;
		cmd.create_cq.base = cpu_to_le64(list_dma);
		cmd.create_cq.ring_flags = VRNIC_RING_PAGED;
		cmd.create_cq.dbrec = cpu_to_le64(cq->dbrec_dma);
		cmd.create_cq.log_depth = cq->log_depth;
		ret = vrnic_ib_admin_exec(vdev, &cmd, &cqn);
		dma_free_coherent(dev, list_size, list, list_dma);
		if (ret)
			goto err_mem;
		/* What the device was given: the provider indexes by it. */
		uresp.cqn = cqn;
		uresp.log_depth = cq->log_depth;
		uresp.cqe_size = sizeof(struct vrnic_cqe);
		ret = ib_copy_to_udata(udata, &uresp,
				       min(sizeof(uresp), udata->outlen));
		if (ret)
			goto err_destroy;
	} else {
		ret = vrnic_ib_kring_alloc(vdev, &cq->ring, cq->log_depth,
					   ilog2(sizeof(struct vrnic_cqe)), &list,
					   &list_dma, &list_size);
		if (ret)
			goto err_mem;
		cq->dbrec = dma_alloc_coherent(dev, sizeof(*cq->dbrec),
					       &cq->dbrec_dma, GFP_KERNEL);
		if (!cq->dbrec) {
			dma_free_coherent(dev, list_size, list, list_dma);
			ret = -ENOMEM;
			goto err_mem;
		}
		cmd.create_cq.base = cpu_to_le64(list_dma);
		cmd.create_cq.ring_flags = VRNIC_RING_PAGED;
		cmd.create_cq.dbrec = cpu_to_le64(cq->dbrec_dma);
		cmd.create_cq.log_depth = cq->log_depth;
		ret = vrnic_ib_admin_exec(vdev, &cmd, &cqn);
		dma_free_coherent(dev, list_size, list, list_dma);
		if (ret)
			goto err_mem;
	}
	cq->cqn = cqn;
	/* The device fills all 2^n entries before it overflows (spec). */
	ibcq->cqe = 1 << cq->log_depth;
	ret = xa_insert_irq(&vdev->cq_xa, cqn, cq, GFP_KERNEL);
	if (ret)
		goto err_destroy;
	return 0;

err_destroy:
	vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_CQ, cqn, "CQ");
err_mem:
	vrnic_ib_cq_free_mem(vdev, cq);
	return ret;
}

int vrnic_ib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibcq->device);
	struct vrnic_cq *cq = to_vcq(ibcq);

	/* Refused: the function is quiesced first (vrnic_pf_destroy()). */
	vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_CQ, cq->cqn, "CQ");
	xa_erase_irq(&vdev->cq_xa, cq->cqn);
	/* No event handler may still be looking at this CQ. */
	vrnic_pf_sync_events(vdev->pf, cq->eqn);
	vrnic_pf_sync_events(vdev->pf, 0);
	vrnic_ib_cq_free_mem(vdev, cq);
	return 0;
}

/* Called from EQ interrupt handlers. */
void vrnic_ib_cq_event(struct vrnic_dev *vdev, u32 cqn, bool error)
{
	struct vrnic_cq *cq;

	/*
	 * Under RCU, no lock: vrnic_ib_destroy_cq() takes the CQ out of the
	 * table and waits for these handlers before it frees it.
	 */
	cq = xa_load(&vdev->cq_xa, cqn);
	if (cq && !error && cq->ibcq.comp_handler)
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	if (cq && error && cq->ibcq.event_handler) {
		struct ib_event ev = {
			.device = cq->ibcq.device,
			.element.cq = &cq->ibcq,
			.event = IB_EVENT_CQ_ERR,
		};

		cq->ibcq.event_handler(&ev, cq->ibcq.cq_context);
	}
}

/* rdma res show cq -dd: the device's CQ number, depth and event queue. */
int vrnic_ib_fill_res_cq_entry(struct sk_buff *msg, struct ib_cq *ibcq)
{
	struct vrnic_cq *cq = to_vcq(ibcq);
	struct nlattr *table = nla_nest_start(msg, RDMA_NLDEV_ATTR_DRIVER);

	if (!table)
		return -EMSGSIZE;
	if (rdma_nl_put_driver_u32_hex(msg, "hw_cqn", cq->cqn) ||
	    rdma_nl_put_driver_u32(msg, "depth", BIT(cq->log_depth)) ||
	    rdma_nl_put_driver_u32(msg, "eqn", cq->eqn)) {
		nla_nest_cancel(msg, table);
		return -EMSGSIZE;
	}
	nla_nest_end(msg, table);
	return 0;
}

/* The CQE's opcode as ib_core's; false for one this driver does not know. */
static bool vrnic_ib_wc_opcode(u8 op, enum ib_wc_opcode *out)
{
	switch (op) {
	case VRNIC_WC_SEND:
		*out = IB_WC_SEND;
		return true;
	case VRNIC_WC_RDMA_WRITE:
		*out = IB_WC_RDMA_WRITE;
		return true;
	case VRNIC_WC_RDMA_READ:
		*out = IB_WC_RDMA_READ;
		return true;
	case VRNIC_WC_CMP_SWP:
		*out = IB_WC_COMP_SWAP;
		return true;
	case VRNIC_WC_FETCH_ADD:
		*out = IB_WC_FETCH_ADD;
		return true;
	case VRNIC_WC_LOCAL_INV:
		*out = IB_WC_LOCAL_INV;
		return true;
	case VRNIC_WC_REG_MR:
		*out = IB_WC_REG_MR;
		return true;
	case VRNIC_WC_ATOMIC_WRITE:
		*out = IB_WC_ATOMIC_WRITE;
		return true;
	case VRNIC_WC_FLUSH:
		*out = IB_WC_FLUSH;
		return true;
	case VRNIC_WC_BIND_MW:
		*out = IB_WC_BIND_MW;
		return true;
	case VRNIC_WC_RECV:
		*out = IB_WC_RECV;
		return true;
	case VRNIC_WC_RECV_RDMA_WITH_IMM:
		*out = IB_WC_RECV_RDMA_WITH_IMM;
		return true;
	default:
		return false;
	}
}

/* The CQE's status as ib_core's; an unknown one is a general error. */
static enum ib_wc_status vrnic_ib_wc_status(u8 status)
{
	switch (status) {
	case VRNIC_WC_ST_SUCCESS:
		return IB_WC_SUCCESS;
	case VRNIC_WC_ST_LOC_LEN_ERR:
		return IB_WC_LOC_LEN_ERR;
	case VRNIC_WC_ST_LOC_QP_OP_ERR:
		return IB_WC_LOC_QP_OP_ERR;
	case VRNIC_WC_ST_LOC_PROT_ERR:
		return IB_WC_LOC_PROT_ERR;
	case VRNIC_WC_ST_WR_FLUSH_ERR:
		return IB_WC_WR_FLUSH_ERR;
	case VRNIC_WC_ST_MW_BIND_ERR:
		return IB_WC_MW_BIND_ERR;
	case VRNIC_WC_ST_BAD_RESP_ERR:
		return IB_WC_BAD_RESP_ERR;
	case VRNIC_WC_ST_LOC_ACCESS_ERR:
		return IB_WC_LOC_ACCESS_ERR;
	case VRNIC_WC_ST_REM_INV_REQ_ERR:
		return IB_WC_REM_INV_REQ_ERR;
	case VRNIC_WC_ST_REM_ACCESS_ERR:
		return IB_WC_REM_ACCESS_ERR;
	case VRNIC_WC_ST_REM_OP_ERR:
		return IB_WC_REM_OP_ERR;
	case VRNIC_WC_ST_RETRY_EXC_ERR:
		return IB_WC_RETRY_EXC_ERR;
	case VRNIC_WC_ST_RNR_RETRY_EXC_ERR:
		return IB_WC_RNR_RETRY_EXC_ERR;
	case VRNIC_WC_ST_FATAL_ERR:
		return IB_WC_FATAL_ERR;
	default:
		return IB_WC_GENERAL_ERR;
	}
}

/*
 * The device is dead: complete the outstanding WQEs of every kernel QP
 * on this CQ's lists (vrnic_ib_qp_flush()).  Under cq->lock, which a QP's
 * destroy takes to leave the lists before it is freed.
 */
static int vrnic_ib_cq_flush(struct vrnic_cq *cq, struct ib_wc *wc, int max)
{
	struct vrnic_qp *qp;
	int n = 0;

	list_for_each_entry(qp, &cq->send_qps, send_cq_node) {
		if (n == max)
			return n;
		n += vrnic_ib_qp_flush(qp, true, wc + n, max - n);
	}
	list_for_each_entry(qp, &cq->recv_qps, recv_cq_node) {
		if (n == max)
			return n;
		n += vrnic_ib_qp_flush(qp, false, wc + n, max - n);
	}
	return n;
}

int vrnic_ib_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct vrnic_dev *vdev = to_vdev(ibcq->device);
	struct vrnic_cq *cq = to_vcq(ibcq);
	unsigned long flags;
	int n = 0;

	if (!cq->ring.va)
		return -EOPNOTSUPP;	/* a user CQ: its ring is in user memory */
	spin_lock_irqsave(&cq->lock, flags);
	while (n < num_entries) {
		struct vrnic_cqe *cqe = vrnic_ib_kring_slot(&cq->ring, cq->ci);
		u8 phase = ((cq->ci >> cq->log_depth) & 1) ? 0 : VRNIC_CQE_OWNER;
		struct ib_wc *w = &wc[n];
		struct vrnic_qp *qp;

		if ((READ_ONCE(cqe->owner) & VRNIC_CQE_OWNER) != phase)
			break;
		dma_rmb();
		memset(w, 0, sizeof(*w));
		w->wr_id = le64_to_cpu(cqe->wr_id);
		w->status = vrnic_ib_wc_status(cqe->status);
		w->byte_len = le32_to_cpu(cqe->byte_len);
		if (!vrnic_ib_wc_opcode(cqe->opcode, &w->opcode)) {
			ibdev_warn_ratelimited(ibcq->device,
					       "CQ %u: unknown CQE opcode 0x%x\n",
					       cq->cqn, cqe->opcode);
			w->status = IB_WC_GENERAL_ERR;
		}
		if (cqe->wc_flags & VRNIC_CQE_WITH_IMM) {
			w->wc_flags |= IB_WC_WITH_IMM;
			w->ex.imm_data = (__force __be32)cqe->imm_data;
		}
		if (cqe->wc_flags & VRNIC_CQE_WITH_INV) {
			w->wc_flags |= IB_WC_WITH_INVALIDATE;
			w->ex.invalidate_rkey = le32_to_cpu(cqe->imm_data);
		}
		if (cqe->wc_flags & VRNIC_CQE_WITH_VLAN) {
			/* ib_mad finds the VLAN's GID for the reply by it */
			w->wc_flags |= IB_WC_WITH_VLAN;
			w->vlan_id = le32_to_cpu(cqe->imm_data) & VLAN_VID_MASK;
		}
		if (cqe->wc_flags & VRNIC_CQE_GRH) {
			/* ib_mad/ib_cm build reply AHs from the header */
			w->wc_flags |= IB_WC_GRH | IB_WC_WITH_NETWORK_HDR_TYPE;
			w->network_hdr_type =
				(cqe->wc_flags & VRNIC_CQE_NET_IPV4) ?
				RDMA_NETWORK_IPV4 : RDMA_NETWORK_IPV6;
		}
		w->src_qp = le32_to_cpu(cqe->src_qp);
		w->port_num = 1;
		qp = xa_load(&vdev->qp_xa, le32_to_cpu(cqe->qpn));
		if (qp) {
			w->qp = &qp->ibqp;
			vrnic_ib_qp_completed(qp, !(cqe->opcode & VRNIC_WC_RECV),
					      le32_to_cpu(cqe->wqe_idx));
		}
		cq->ci++;
		n++;
	}
	if (n)
		cq->dbrec->ci = cpu_to_le32(cq->ci);
	/* The device wrote its last CQE before it was quiesced. */
	if (n < num_entries && READ_ONCE(vdev->dead))
		n += vrnic_ib_cq_flush(cq, wc + n, num_entries - n);
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}

/*
 * Drop QP qpn's completions from a kernel CQ (mlx5's __mlx5_cq_clean):
 * find the producer end, the first entry the device still owns, walk back
 * to the consumer index and move the other QPs' entries up over the
 * dropped ones; the consumer index then skips the freed slots.  The device
 * does not write the slots between ci and the producer end.  Taking the
 * CQ lock also waits out a poller that found the QP before it left the
 * QP table.
 */
void vrnic_ib_cq_clean(struct vrnic_cq *cq, u32 qpn)
{
	u32 mask = (1U << cq->log_depth) - 1, pi, i, nfreed = 0;
	struct vrnic_cqe *src, *dst;
	unsigned long flags;
	u8 owner;

	if (!cq->ring.va)
		return;		/* a user CQ: the provider cleans it */
	spin_lock_irqsave(&cq->lock, flags);
	for (pi = cq->ci; pi - cq->ci <= mask; pi++) {
		src = vrnic_ib_kring_slot(&cq->ring, pi);
		owner = ((pi >> cq->log_depth) & 1) ? 0 : VRNIC_CQE_OWNER;
		if ((READ_ONCE(src->owner) & VRNIC_CQE_OWNER) != owner)
			break;
	}
	dma_rmb();
	for (i = pi; i-- != cq->ci;) {
		src = vrnic_ib_kring_slot(&cq->ring, i);
		if (le32_to_cpu(src->qpn) == qpn) {
			nfreed++;
		} else if (nfreed) {
			dst = vrnic_ib_kring_slot(&cq->ring, i + nfreed);
			owner = (((i + nfreed) >> cq->log_depth) & 1) ?
				0 : VRNIC_CQE_OWNER;
			*dst = *src;
			dst->owner = (src->owner & ~VRNIC_CQE_OWNER) | owner;
		}
	}
	if (nfreed) {
		cq->ci += nfreed;
		dma_wmb();
		cq->dbrec->ci = cpu_to_le32(cq->ci);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
}

int vrnic_ib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct vrnic_dev *vdev = to_vdev(ibcq->device);
	struct vrnic_cq *cq = to_vcq(ibcq);
	u32 cmd = (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
		  VRNIC_CQ_ARM_SOLICITED : VRNIC_CQ_ARM_NEXT;
	unsigned long irqflags;
	int ret = 0;

	spin_lock_irqsave(&cq->lock, irqflags);
	vrnic_ib_db(vdev, VRNIC_DB_CQ_ARM,
		    FIELD_PREP(VRNIC_CQ_ARM_CQN, cq->cqn) |
		    FIELD_PREP(VRNIC_CQ_ARM_CMD, cmd));
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && cq->ring.va) {
		struct vrnic_cqe *cqe = vrnic_ib_kring_slot(&cq->ring, cq->ci);
		u8 phase = ((cq->ci >> cq->log_depth) & 1) ? 0 : VRNIC_CQE_OWNER;

		ret = (READ_ONCE(cqe->owner) & VRNIC_CQE_OWNER) == phase;
	}
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return ret;
}

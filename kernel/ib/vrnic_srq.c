// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic shared receive queues.  An SRQ is a ring of receive WQEs that QPs
 * created with it take their receives from, in ring order.  The device
 * writes its consumer index to the doorbell record as it takes each WQE, so
 * a slot can be posted again as soon as the device has copied it; the
 * completion carries the wr_id.  Limit events (IB_EVENT_SRQ_LIMIT_REACHED)
 * arrive on the async EQ.
 */
#include <linux/dma-mapping.h>

#include "vrnic.h"
#include "vrnic-abi.h"

static void vrnic_ib_srq_free_mem(struct vrnic_dev *vdev, struct vrnic_srq *srq)
{
	struct device *dev = &vdev->pdev->dev;

	vrnic_ib_kring_free(vdev, &srq->ring);
	if (srq->dbrec)
		dma_free_coherent(dev, sizeof(*srq->dbrec), srq->dbrec,
				  srq->dbrec_dma);
	ib_umem_release(srq->umem);
	vrnic_ib_unpin_dbrec(srq->dbrec_page);
}

static int vrnic_ib_srq_arm(struct vrnic_dev *vdev, struct vrnic_srq *srq,
			    u32 limit)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_MODIFY_SRQ };
	int ret;

	cmd.modify_srq.srqn = cpu_to_le32(srq->srqn);
	cmd.modify_srq.limit = cpu_to_le32(limit);
	ret = vrnic_ib_admin_exec(vdev, &cmd, NULL);
	if (!ret)
		srq->limit = limit;
	return ret;
}

int vrnic_ib_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibsrq->device);
	struct vrnic_srq *srq = to_vsrq(ibsrq);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_SRQ };
	struct device *dev = &vdev->pdev->dev;
	struct ib_srq_attr *attr = &init->attr;
	dma_addr_t list_dma = 0;
	size_t list_size = 0;
	__le64 *list = NULL;
	u32 srqn;
	int ret;

	if (init->srq_type != IB_SRQT_BASIC && init->srq_type != IB_SRQT_XRC)
		return -EOPNOTSUPP;
	if (attr->max_wr < 1 || attr->max_wr > (1U << VRNIC_MAX_WQ_LOG_DEPTH) ||
	    attr->max_sge > VRNIC_MAX_SGE || attr->srq_limit > attr->max_wr)
		return -EINVAL;
	srq->log = order_base_2(attr->max_wr);
	srq->shift = max_t(u32, 5, order_base_2(sizeof(struct vrnic_recv_wqe) +
						 max(attr->max_sge, 1U) *
						 sizeof(struct vrnic_sge)));
	spin_lock_init(&srq->lock);
	cmd.create_srq.uctx = cpu_to_le32(vrnic_ib_uctx_of(udata));
	cmd.create_srq.pdn = cpu_to_le32(to_vpd(ibsrq->pd)->pdn);
	if (init->srq_type == IB_SRQT_XRC) {
		/* Its receives complete on its own CQ, whatever QP they came by. */
		cmd.create_srq.srq_type = VRNIC_SRQT_XRC;
		cmd.create_srq.cqn = cpu_to_le32(to_vcq(init->ext.cq)->cqn);
		cmd.create_srq.xrcdn =
			cpu_to_le32(to_vxrcd(init->ext.xrc.xrcd)->xrcdn);
	}

	if (udata) {
		struct vrnic_create_srq_cmd ucmd = {};

		ret = vrnic_ib_udata_req(udata, &ucmd, sizeof(ucmd));
		if (ret)
			return ret;
		if (ucmd.log_depth < srq->log || ucmd.wqe_shift < srq->shift ||
		    ucmd.log_depth > VRNIC_MAX_WQ_LOG_DEPTH || ucmd.wqe_shift > 9)
			return -EINVAL;
		srq->log = ucmd.log_depth;
		srq->shift = ucmd.wqe_shift;
		ret = vrnic_ib_ring_pin(vdev, ucmd.buf_addr,
					1UL << (srq->log + srq->shift), &srq->umem,
					&list, &list_dma, &list_size);
		if (ret)
			goto err_mem;
		ret = vrnic_ib_pin_dbrec(udata, ucmd.dbrec_addr, &srq->dbrec_page,
					 &srq->dbrec_dma);
		if (ret)
			goto err_mem;
	} else {
		ret = vrnic_ib_kring_alloc(vdev, &srq->ring, srq->log,
					   srq->shift, &list, &list_dma,
					   &list_size);
		if (ret)
			goto err_mem;
		srq->dbrec = dma_alloc_coherent(dev, sizeof(*srq->dbrec),
						&srq->dbrec_dma, GFP_KERNEL);
		if (!srq->dbrec) {
			ret = -ENOMEM;
			goto err_mem;
		}
	}
	cmd.create_srq.base = cpu_to_le64(list_dma);
	cmd.create_srq.ring_flags = VRNIC_RING_PAGED;
	cmd.create_srq.dbrec = cpu_to_le64(srq->dbrec_dma);
	cmd.create_srq.log_depth = srq->log;
	cmd.create_srq.wqe_shift = srq->shift;
	ret = vrnic_ib_admin_exec(vdev, &cmd, &srqn);
	if (list)
		dma_free_coherent(dev, list_size, list, list_dma);
	list = NULL;
	if (ret)
		goto err_mem;
	srq->srqn = srqn;
	if (init->srq_type == IB_SRQT_XRC)
		ibsrq->ext.xrc.srq_num = srqn;	/* what XRCETHs name */
	srq->max_sge = min_t(u32, (BIT(srq->shift) - sizeof(struct vrnic_recv_wqe)) /
			     sizeof(struct vrnic_sge), VRNIC_MAX_SGE);
	attr->max_wr = BIT(srq->log);
	attr->max_sge = srq->max_sge;
	if (udata) {
		/* What the device was given: the provider posts by it. */
		struct vrnic_create_srq_resp uresp = {
			.srqn = srqn,
			.log_depth = srq->log,
			.wqe_shift = srq->shift,
			.max_sge = srq->max_sge,
		};

		ret = ib_copy_to_udata(udata, &uresp,
				       min(sizeof(uresp), udata->outlen));
		if (ret)
			goto err_destroy;
	}
	if (attr->srq_limit) {
		ret = vrnic_ib_srq_arm(vdev, srq, attr->srq_limit);
		if (ret)
			goto err_destroy;
	}
	ret = xa_insert_irq(&vdev->srq_xa, srqn, srq, GFP_KERNEL);
	if (ret)
		goto err_destroy;
	return 0;

err_destroy:
	vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_SRQ, srqn, "SRQ");
err_mem:
	if (list)
		dma_free_coherent(dev, list_size, list, list_dma);
	vrnic_ib_srq_free_mem(vdev, srq);
	return ret;
}

int vrnic_ib_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct vrnic_srq *srq = to_vsrq(ibsrq);
	int ret;

	ret = vrnic_ib_udata_no_req(udata);
	if (ret)
		return ret;
	if (mask & IB_SRQ_MAX_WR)
		return -EOPNOTSUPP;	/* SRQs are not resizable */
	if (!(mask & IB_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit > BIT(srq->log))
		return -EINVAL;
	return vrnic_ib_srq_arm(to_vdev(ibsrq->device), srq, attr->srq_limit);
}

int vrnic_ib_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct vrnic_srq *srq = to_vsrq(ibsrq);

	attr->max_wr = BIT(srq->log);
	attr->max_sge = srq->max_sge;
	attr->srq_limit = srq->limit;
	return 0;
}

int vrnic_ib_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibsrq->device);
	struct vrnic_srq *srq = to_vsrq(ibsrq);

	/* Refused: the function is quiesced first (vrnic_pf_destroy()). */
	vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_SRQ, srq->srqn, "SRQ");
	xa_erase_irq(&vdev->srq_xa, srq->srqn);
	vrnic_pf_sync_events(vdev->pf, 0);	/* SRQ events: async EQ */
	vrnic_ib_srq_free_mem(vdev, srq);
	return 0;
}

int vrnic_ib_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad_wr)
{
	struct vrnic_srq *srq = to_vsrq(ibsrq);
	unsigned long flags;
	int ret = 0;

	if (!srq->ring.va)
		return -EINVAL;
	spin_lock_irqsave(&srq->lock, flags);
	for (; wr; wr = wr->next) {
		/* A slot is free once the device has taken its WQE. */
		if (srq->head - le32_to_cpu(READ_ONCE(srq->dbrec->ci)) >=
		    BIT(srq->log) || wr->num_sge > srq->max_sge) {
			ret = wr->num_sge > srq->max_sge ? -EINVAL : -ENOMEM;
			break;
		}
		vrnic_ib_fill_recv_wqe(vrnic_ib_kring_slot(&srq->ring, srq->head),
				       wr);
		srq->head++;
	}
	if (ret)
		*bad_wr = wr;
	dma_wmb();
	WRITE_ONCE(srq->dbrec->pi, cpu_to_le32(srq->head));
	spin_unlock_irqrestore(&srq->lock, flags);
	return ret;
}

/* Called from the async EQ handler. */
void vrnic_ib_srq_event(struct vrnic_dev *vdev, u32 srqn)
{
	struct vrnic_srq *srq;

	/* Under RCU, no lock: vrnic_ib_destroy_srq() syncs with this handler. */
	srq = xa_load(&vdev->srq_xa, srqn);
	if (srq) {
		srq->limit = 0;		/* the device disarmed it */
		if (srq->ibsrq.event_handler) {
			struct ib_event ev = {
				.device = srq->ibsrq.device,
				.element.srq = &srq->ibsrq,
				.event = IB_EVENT_SRQ_LIMIT_REACHED,
			};

			srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
		}
	}
}

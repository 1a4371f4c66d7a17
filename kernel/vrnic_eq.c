// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic event queues.  EQ 0 (the AEQ) is set up through registers and
 * carries admin completions, port events and fatal errors on MSI-X vector
 * 0.  Completion EQs 1..n are created with admin commands, one per vector,
 * and carry Ethernet ring events (and, later, CQ events).  Every EQ is
 * armed one-shot: the driver consumes its entries and re-arms it with the
 * consumer index in the same doorbell write.
 */
#include <linux/dma-mapping.h>

#include "vrnic.h"
#include "vrnic_trace.h"

static int vrnic_eq_alloc_ring(struct vrnic_dev *vdev, struct vrnic_eq *eq,
			       u8 eqn, u32 log_depth, u16 vector)
{
	eq->ring = dma_alloc_coherent(&vdev->pdev->dev,
				      sizeof(*eq->ring) << log_depth,
				      &eq->dma, GFP_KERNEL);
	if (!eq->ring)
		return -ENOMEM;
	eq->vdev = vdev;
	eq->eqn = eqn;
	eq->log_depth = log_depth;
	eq->vector = vector;
	eq->ci = 0;
	return 0;
}

static void vrnic_eq_free_ring(struct vrnic_dev *vdev, struct vrnic_eq *eq)
{
	dma_free_coherent(&vdev->pdev->dev, sizeof(*eq->ring) << eq->log_depth,
			  eq->ring, eq->dma);
	eq->ring = NULL;
}

static struct vrnic_eqe *vrnic_eq_next(struct vrnic_eq *eq)
{
	struct vrnic_eqe *eqe = &eq->ring[eq->ci & ((1U << eq->log_depth) - 1)];
	u8 phase = ((eq->ci >> eq->log_depth) & 1) ? 0 : VRNIC_EQE_PHASE;

	if ((READ_ONCE(eqe->flags) & VRNIC_EQE_PHASE) != phase)
		return NULL;
	dma_rmb();	/* read the body only after the phase bit */
	return eqe;
}

void vrnic_eq_arm(struct vrnic_eq *eq)
{
	u32 v = eq->ci | VRNIC_EQ_DB_ARM;

	if (eq->eqn == 0) {
		vrnic_wr(eq->vdev, VRNIC_REG_AEQ_DB, v);
	} else {
		v |= (u32)eq->eqn << VRNIC_EQ_DB_EQN_SHIFT;
		vrnic_db(eq->vdev, VRNIC_DB_EQ, v);
	}
}

static irqreturn_t vrnic_aeq_irq(int irq, void *data)
{
	struct vrnic_eq *eq = data;
	struct vrnic_dev *vdev = eq->vdev;
	struct vrnic_eqe *eqe;
	bool admin = false;

	atomic_inc(&vdev->test_irqs);
	if (!eq->ring)
		return IRQ_HANDLED;	/* self-test interrupt before setup */

	while ((eqe = vrnic_eq_next(eq))) {
		if (eqe->type != VRNIC_EQE_ADMIN_DONE)
			trace_vrnic_async_event(dev_name(&vdev->pdev->dev),
						eqe->type,
						le32_to_cpu(eqe->id));
		switch (eqe->type) {
		case VRNIC_EQE_ADMIN_DONE:
			admin = true;
			break;
		case VRNIC_EQE_PORT_UP:
		case VRNIC_EQE_PORT_DOWN:
			if (!READ_ONCE(vdev->port_events))
				break;	/* probe or remove in progress */
			vrnic_eth_link_change(vdev,
					      eqe->type == VRNIC_EQE_PORT_UP);
			vrnic_ib_port_event(vdev,
					    eqe->type == VRNIC_EQE_PORT_UP);
			break;
		case VRNIC_EQE_FATAL:
			dev_err(&vdev->pdev->dev, "device fatal error %u\n",
				le32_to_cpu(eqe->id));
			break;
		case VRNIC_EQE_CQ_ERROR:
			vrnic_cq_event(vdev, le32_to_cpu(eqe->id), true);
			break;
		case VRNIC_EQE_QP_FATAL:
			vrnic_qp_event(vdev, le32_to_cpu(eqe->id),
				       IB_EVENT_QP_FATAL);
			break;
		case VRNIC_EQE_QP_LAST_WQE:
			vrnic_qp_event(vdev, le32_to_cpu(eqe->id),
				       IB_EVENT_QP_LAST_WQE_REACHED);
			break;
		case VRNIC_EQE_SRQ_LIMIT:
			vrnic_srq_event(vdev, le32_to_cpu(eqe->id));
			break;
		default:
			dev_warn_ratelimited(&vdev->pdev->dev,
					     "unexpected async event 0x%x\n",
					     eqe->type);
			break;
		}
		eq->ci++;
	}
	if (admin)
		vrnic_aq_poll(vdev);
	vrnic_eq_arm(eq);
	return IRQ_HANDLED;
}

static irqreturn_t vrnic_ceq_irq(int irq, void *data)
{
	struct vrnic_eq *eq = data;
	struct vrnic_dev *vdev = eq->vdev;
	struct vrnic_eqe *eqe;

	atomic_inc(&vdev->test_irqs);
	if (!eq->ring)
		return IRQ_HANDLED;

	while ((eqe = vrnic_eq_next(eq))) {
		switch (eqe->type) {
		case VRNIC_EQE_ETH_TX:
		case VRNIC_EQE_ETH_RX:
			vrnic_eth_event(vdev, eqe->type);
			break;
		case VRNIC_EQE_CQ:
			vrnic_cq_event(vdev, le32_to_cpu(eqe->id), false);
			break;
		default:
			dev_warn_ratelimited(&vdev->pdev->dev,
					     "unexpected event 0x%x on EQ %u\n",
					     eqe->type, eq->eqn);
			break;
		}
		eq->ci++;
	}
	vrnic_eq_arm(eq);
	return IRQ_HANDLED;
}

/* Allocate the AEQ, program it and hook vector 0 (before CTRL.ENABLE). */
int vrnic_aeq_alloc(struct vrnic_dev *vdev)
{
	struct vrnic_eq *eq = &vdev->aeq;
	int ret;

	ret = vrnic_eq_alloc_ring(vdev, eq, 0, VRNIC_AEQ_LOG_DEPTH,
				  VRNIC_AEQ_VECTOR);
	if (ret)
		return ret;
	vrnic_wr(vdev, VRNIC_REG_AEQ_BASE_LO, lower_32_bits(eq->dma));
	vrnic_wr(vdev, VRNIC_REG_AEQ_BASE_HI, upper_32_bits(eq->dma));
	vrnic_wr(vdev, VRNIC_REG_AEQ_LOG_DEPTH, VRNIC_AEQ_LOG_DEPTH);
	return 0;
}

void vrnic_aeq_free(struct vrnic_dev *vdev)
{
	vrnic_eq_free_ring(vdev, &vdev->aeq);
}

/* Interrupt handlers are installed once at probe for every vector. */
int vrnic_eq_request_irqs(struct vrnic_dev *vdev)
{
	unsigned int i;
	int ret;

	snprintf(vdev->aeq.name, sizeof(vdev->aeq.name), "vrnic-aeq@%s",
		 pci_name(vdev->pdev));
	vdev->aeq.vdev = vdev;
	ret = request_irq(pci_irq_vector(vdev->pdev, VRNIC_AEQ_VECTOR),
			  vrnic_aeq_irq, 0, vdev->aeq.name, &vdev->aeq);
	if (ret)
		return ret;
	for (i = 1; i < vdev->num_vectors; i++) {
		struct vrnic_eq *eq = &vdev->ceq[i];

		eq->vdev = vdev;
		snprintf(eq->name, sizeof(eq->name), "vrnic-ceq%u@%s", i,
			 pci_name(vdev->pdev));
		ret = request_irq(pci_irq_vector(vdev->pdev, i), vrnic_ceq_irq,
				  0, eq->name, eq);
		if (ret)
			goto err;
	}
	return 0;
err:
	while (--i > 0)
		free_irq(pci_irq_vector(vdev->pdev, i), &vdev->ceq[i]);
	free_irq(pci_irq_vector(vdev->pdev, VRNIC_AEQ_VECTOR), &vdev->aeq);
	return ret;
}

void vrnic_eq_free_irqs(struct vrnic_dev *vdev)
{
	unsigned int i;

	for (i = 1; i < vdev->num_vectors; i++)
		free_irq(pci_irq_vector(vdev->pdev, i), &vdev->ceq[i]);
	free_irq(pci_irq_vector(vdev->pdev, VRNIC_AEQ_VECTOR), &vdev->aeq);
}

static int vrnic_ceq_create(struct vrnic_dev *vdev, unsigned int i)
{
	struct vrnic_eq *eq = &vdev->ceq[i];
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_EQ };
	struct vrnic_eq tmp = *eq;
	int ret;

	/* Build the ring off to the side: the IRQ handler may look at eq. */
	ret = vrnic_eq_alloc_ring(vdev, &tmp, i, VRNIC_CEQ_LOG_DEPTH, i);
	if (ret)
		return ret;
	cmd.create_eq.base = cpu_to_le64(tmp.dma);
	cmd.create_eq.log_depth = VRNIC_CEQ_LOG_DEPTH;
	cmd.create_eq.eqn = i;
	cmd.create_eq.vector = cpu_to_le16(i);
	ret = vrnic_admin_exec(vdev, &cmd, NULL);
	if (ret) {
		vrnic_eq_free_ring(vdev, &tmp);
		return ret;
	}
	disable_irq(pci_irq_vector(vdev->pdev, i));
	*eq = tmp;
	enable_irq(pci_irq_vector(vdev->pdev, i));
	vrnic_eq_arm(eq);
	return 0;
}

static void vrnic_ceq_destroy(struct vrnic_dev *vdev, unsigned int i)
{
	struct vrnic_eq *eq = &vdev->ceq[i];
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_DESTROY_EQ };
	int irq = pci_irq_vector(vdev->pdev, i);
	int ret;

	cmd.destroy.id = cpu_to_le32(i);
	ret = vrnic_admin_exec(vdev, &cmd, NULL);
	if (ret)
		dev_warn(&vdev->pdev->dev, "destroy EQ %u failed: %d\n", i, ret);
	/* Wait out a running handler before the ring goes away. */
	disable_irq(irq);
	vrnic_eq_free_ring(vdev, eq);
	enable_irq(irq);
}

int vrnic_ceqs_create(struct vrnic_dev *vdev)
{
	unsigned int i;
	int ret;

	for (i = 1; i <= vdev->num_ceqs; i++) {
		ret = vrnic_ceq_create(vdev, i);
		if (ret)
			goto err;
	}
	return 0;
err:
	while (--i > 0)
		vrnic_ceq_destroy(vdev, i);
	return ret;
}

void vrnic_ceqs_destroy(struct vrnic_dev *vdev)
{
	unsigned int i;

	for (i = vdev->num_ceqs; i > 0; i--)
		vrnic_ceq_destroy(vdev, i);
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic event queues.  EQ 0 (the AEQ) is set up through registers and
 * carries admin completions, port events and fatal errors on MSI-X vector
 * 0.  Completion EQs 1..n are created with admin commands, one per vector,
 * and carry Ethernet ring events and CQ events.  Every EQ is armed
 * one-shot: the driver consumes its entries and re-arms it with the
 * consumer index in the same doorbell write.
 *
 * No event is lost to a full EQ: the device holds events back (one per type
 * and object) and writes them into the room that doorbell frees, then, as
 * they are unconsumed, signals the vector at once.  So 1024 armed CQs on one
 * 256-entry CEQ all get their event; each handler run stays bounded by the
 * ring depth.
 */
#include <linux/dma-mapping.h>
#include <linux/slab.h>

#include "vrnic_core.h"
#include "vrnic_trace.h"

static int vrnic_eq_alloc_ring(struct vrnic_pf *pf, struct vrnic_eq *eq,
			       u8 eqn, u32 log_depth, u16 vector)
{
	eq->ring = dma_alloc_coherent(&pf->pdev->dev,
				      sizeof(*eq->ring) << log_depth,
				      &eq->dma, GFP_KERNEL);
	if (!eq->ring)
		return -ENOMEM;
	eq->pf = pf;
	eq->eqn = eqn;
	eq->log_depth = log_depth;
	eq->vector = vector;
	eq->ci = 0;
	return 0;
}

static void vrnic_eq_free_ring(struct vrnic_pf *pf, struct vrnic_eq *eq)
{
	if (eq->ring)
		dma_free_coherent(&pf->pdev->dev,
				  sizeof(*eq->ring) << eq->log_depth, eq->ring,
				  eq->dma);
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
	u32 v = FIELD_PREP(VRNIC_EQ_DB_CI, eq->ci) | VRNIC_EQ_DB_ARM;

	if (eq->eqn == 0) {
		vrnic_wr(eq->pf, VRNIC_REG_AEQ_DB, v);
	} else {
		v |= FIELD_PREP(VRNIC_EQ_DB_EQN, eq->eqn);
		vrnic_db(eq->pf, VRNIC_DB_EQ, v);
	}
}

static irqreturn_t vrnic_aeq_irq(int irq, void *data)
{
	struct vrnic_eq *eq = data;
	struct vrnic_pf *pf = eq->pf;
	struct vrnic_eqe *eqe;
	bool admin = false;

	atomic_inc(&pf->test_irqs);
	/* The ring exists while the handler is installed (probe ladder). */
	while ((eqe = vrnic_eq_next(eq))) {
		if (eqe->type != VRNIC_EQE_ADMIN_DONE)
			trace_vrnic_async_event(dev_name(&pf->pdev->dev),
						eqe->type,
						le32_to_cpu(eqe->id));
		switch (eqe->type) {
		case VRNIC_EQE_ADMIN_DONE:
			admin = true;
			break;
		case VRNIC_EQE_PORT_UP:
		case VRNIC_EQE_PORT_DOWN:
			/* The carrier; vrnic_ib follows the netdev. */
			if (READ_ONCE(pf->port_events))	/* not in probe/remove */
				vrnic_eth_link_change(pf,
						      eqe->type == VRNIC_EQE_PORT_UP);
			break;
		case VRNIC_EQE_FATAL:	/* quiesce, then tell everyone */
			vrnic_pf_fatal_irq(pf, le32_to_cpu(eqe->id));
			break;
		case VRNIC_EQE_CQ_ERROR:
		case VRNIC_EQE_QP_FATAL:
		case VRNIC_EQE_QP_LAST_WQE:
		case VRNIC_EQE_QP_SQ_DRAINED:
		case VRNIC_EQE_SRQ_LIMIT:
			vrnic_rdma_async_event(pf, eqe->type,
					       le32_to_cpu(eqe->id));
			break;
		default:
			dev_warn_ratelimited(&pf->pdev->dev,
					     "unexpected async event 0x%x\n",
					     eqe->type);
			break;
		}
		eq->ci++;
	}
	if (admin)
		vrnic_aq_poll(pf);
	vrnic_eq_arm(eq);
	return IRQ_HANDLED;
}

static irqreturn_t vrnic_ceq_irq(int irq, void *data)
{
	struct vrnic_eq *eq = data;
	struct vrnic_pf *pf = eq->pf;
	struct vrnic_eqe *eqe;

	atomic_inc(&pf->test_irqs);
	if (!eq->ring)
		return IRQ_HANDLED;

	while ((eqe = vrnic_eq_next(eq))) {
		switch (eqe->type) {
		case VRNIC_EQE_ETH_TX:
		case VRNIC_EQE_ETH_RX:
			vrnic_eth_event(pf, eqe->type);
			break;
		case VRNIC_EQE_CQ:
			vrnic_rdma_comp_event(pf, le32_to_cpu(eqe->id));
			break;
		default:
			dev_warn_ratelimited(&pf->pdev->dev,
					     "unexpected event 0x%x on EQ %u\n",
					     eqe->type, eq->eqn);
			break;
		}
		eq->ci++;
	}
	vrnic_eq_arm(eq);
	return IRQ_HANDLED;
}

/* Allocate the AEQ's ring; vrnic_aeq_program() shows it to the device. */
int vrnic_aeq_alloc(struct vrnic_pf *pf)
{
	return vrnic_eq_alloc_ring(pf, &pf->aeq, 0, VRNIC_AEQ_LOG_DEPTH,
				   VRNIC_AEQ_VECTOR);
}

/* Tell the device where the AEQ lives (before CTRL.ENABLE). */
void vrnic_aeq_program(struct vrnic_pf *pf)
{
	struct vrnic_eq *eq = &pf->aeq;

	vrnic_wr(pf, VRNIC_REG_AEQ_BASE_LO, lower_32_bits(eq->dma));
	vrnic_wr(pf, VRNIC_REG_AEQ_BASE_HI, upper_32_bits(eq->dma));
	vrnic_wr(pf, VRNIC_REG_AEQ_LOG_DEPTH, eq->log_depth);
}

/*
 * After a reset, with the device not enabled: empty the AEQ and program it
 * again.  The handler may still run for an interrupt of before the reset.
 */
void vrnic_aeq_restart(struct vrnic_pf *pf)
{
	struct vrnic_eq *eq = &pf->aeq;
	int irq = pci_irq_vector(pf->pdev, VRNIC_AEQ_VECTOR);

	disable_irq(irq);
	memset(eq->ring, 0, sizeof(*eq->ring) << eq->log_depth);
	eq->ci = 0;
	enable_irq(irq);
	vrnic_aeq_program(pf);
}

void vrnic_aeq_free(struct vrnic_pf *pf)
{
	vrnic_eq_free_ring(pf, &pf->aeq);
}

/*
 * Interrupt handlers are installed once at probe for every vector, after
 * vrnic_aeq_alloc(); a CEQ's ring comes later (vrnic_ceq_create()).
 */
int vrnic_eq_request_irqs(struct vrnic_pf *pf)
{
	unsigned int i;
	int ret;

	snprintf(pf->aeq.name, sizeof(pf->aeq.name), "vrnic-aeq@%s",
		 pci_name(pf->pdev));
	ret = request_irq(pci_irq_vector(pf->pdev, VRNIC_AEQ_VECTOR),
			  vrnic_aeq_irq, 0, pf->aeq.name, &pf->aeq);
	if (ret)
		return ret;
	for (i = 1; i < pf->num_vectors; i++) {
		struct vrnic_eq *eq = &pf->ceq[i];

		eq->pf = pf;
		snprintf(eq->name, sizeof(eq->name), "vrnic-ceq%u@%s", i,
			 pci_name(pf->pdev));
		ret = request_irq(pci_irq_vector(pf->pdev, i), vrnic_ceq_irq,
				  0, eq->name, eq);
		if (ret)
			goto err;
	}
	return 0;
err:
	while (--i > 0)
		free_irq(pci_irq_vector(pf->pdev, i), &pf->ceq[i]);
	free_irq(pci_irq_vector(pf->pdev, VRNIC_AEQ_VECTOR), &pf->aeq);
	return ret;
}

void vrnic_eq_free_irqs(struct vrnic_pf *pf)
{
	unsigned int i;

	for (i = 1; i < pf->num_vectors; i++)
		free_irq(pci_irq_vector(pf->pdev, i), &pf->ceq[i]);
	free_irq(pci_irq_vector(pf->pdev, VRNIC_AEQ_VECTOR), &pf->aeq);
}

static int vrnic_ceq_create(struct vrnic_pf *pf, unsigned int i)
{
	struct vrnic_eq *eq = &pf->ceq[i];
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_EQ };
	struct vrnic_eq tmp = *eq;
	int ret;

	/* Build the ring off to the side: the IRQ handler may look at eq. */
	ret = vrnic_eq_alloc_ring(pf, &tmp, i, VRNIC_CEQ_LOG_DEPTH, i);
	if (ret)
		return ret;
	cmd.create_eq.base = cpu_to_le64(tmp.dma);
	cmd.create_eq.log_depth = VRNIC_CEQ_LOG_DEPTH;
	cmd.create_eq.eqn = i;
	cmd.create_eq.vector = cpu_to_le16(i);
	ret = vrnic_pf_admin_exec(pf, &cmd, NULL);
	if (ret) {
		vrnic_eq_free_ring(pf, &tmp);
		return ret;
	}
	disable_irq(pci_irq_vector(pf->pdev, i));
	*eq = tmp;
	enable_irq(pci_irq_vector(pf->pdev, i));
	vrnic_eq_arm(eq);
	return 0;
}

/* A refusal makes the function dead first (vrnic_pf_destroy()). */
static void vrnic_ceq_destroy(struct vrnic_pf *pf, unsigned int i)
{
	struct vrnic_eq *eq = &pf->ceq[i];
	int irq = pci_irq_vector(pf->pdev, i);

	vrnic_pf_destroy(pf, VRNIC_ADMIN_DESTROY_EQ, i, "EQ");
	/* Wait out a running handler before the ring goes away. */
	disable_irq(irq);
	vrnic_eq_free_ring(pf, eq);
	eq->ring = NULL;
	enable_irq(irq);
}

int vrnic_ceqs_create(struct vrnic_pf *pf)
{
	unsigned int i;
	int ret;

	for (i = 1; i <= pf->num_ceqs; i++) {
		ret = vrnic_ceq_create(pf, i);
		if (ret)
			goto err;
	}
	return 0;
err:
	while (--i > 0)
		vrnic_ceq_destroy(pf, i);
	return ret;
}

void vrnic_ceqs_destroy(struct vrnic_pf *pf)
{
	unsigned int i;

	for (i = pf->num_ceqs; i > 0; i--)
		vrnic_ceq_destroy(pf, i);
}

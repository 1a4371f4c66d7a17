// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic admin queue: commands are written to a ring in host memory, the
 * device is told through the AQ doorbell register and completes each one
 * with a phase-tagged entry in the completion ring, then posts an
 * ADMIN_DONE event on the async EQ.  Callers sleep until their token
 * completes or the command times out.
 *
 * A timeout is a device fault: vrnic_pf_fatal() quiesces the device (reset,
 * bus mastering off) before the command returns, so that its caller may
 * free what the command pointed the device at.  From then on every command
 * fails at once with -ENODEV, including the one that timed out and any
 * other that was waiting.
 */
#include <linux/dma-mapping.h>
#include <linux/dmapool.h>
#include <linux/errno.h>
#include <linux/module.h>

#include "vrnic_core.h"
#include "vrnic_trace.h"

/* Tell the device where the admin queue lives (its rings, allocated). */
void vrnic_aq_program(struct vrnic_pf *pf)
{
	struct vrnic_aq *aq = &pf->aq;

	vrnic_wr(pf, VRNIC_REG_AQ_BASE_LO, lower_32_bits(aq->sq_dma));
	vrnic_wr(pf, VRNIC_REG_AQ_BASE_HI, upper_32_bits(aq->sq_dma));
	vrnic_wr(pf, VRNIC_REG_ACQ_BASE_LO, lower_32_bits(aq->cq_dma));
	vrnic_wr(pf, VRNIC_REG_ACQ_BASE_HI, upper_32_bits(aq->cq_dma));
	vrnic_wr(pf, VRNIC_REG_AQ_LOG_DEPTH, VRNIC_AQ_LOG_DEPTH);
}

/* No waiter still holds a slot: each has read its (-ENODEV) completion. */
static bool vrnic_aq_idle(struct vrnic_aq *aq)
{
	bool idle = true;
	u32 i;

	spin_lock_irq(&aq->lock);
	for (i = 0; i < aq->depth; i++)
		idle &= !aq->waits[i].busy;
	spin_unlock_irq(&aq->lock);
	return idle;
}

/**
 * vrnic_aq_restart - make a dead admin queue new again, after a reset
 * @pf: the function; its queue is dead, the device reset and not enabled
 *
 * Waits until every waiter of the dead queue has let go of its slot (each
 * returns -ENODEV and never looks at its slot again), so that no waiter
 * of before the reset can read a completion of after it.  Then empties
 * both rings and points the device at them.  The queue stays dead: the
 * caller revives it once the device is enabled.
 */
void vrnic_aq_restart(struct vrnic_pf *pf)
{
	struct vrnic_aq *aq = &pf->aq;

	WARN_ON_ONCE(!READ_ONCE(aq->dead));
	wait_event(aq->slot_wq, vrnic_aq_idle(aq));
	spin_lock_irq(&aq->lock);
	memset(aq->sq, 0, aq->depth * sizeof(*aq->sq));
	memset(aq->cq, 0, aq->depth * sizeof(*aq->cq));
	aq->pi = 0;
	aq->ci = 0;
	spin_unlock_irq(&aq->lock);
	vrnic_aq_program(pf);
}

/* Allocate the admin queue; vrnic_aq_program() shows it to the device. */
int vrnic_aq_alloc(struct vrnic_pf *pf)
{
	struct vrnic_aq *aq = &pf->aq;
	struct device *dev = &pf->pdev->dev;
	u32 i;

	aq->depth = 1U << VRNIC_AQ_LOG_DEPTH;
	aq->sq = dma_alloc_coherent(dev, aq->depth * sizeof(*aq->sq),
				    &aq->sq_dma, GFP_KERNEL);
	if (!aq->sq)
		return -ENOMEM;
	aq->cq = dma_alloc_coherent(dev, aq->depth * sizeof(*aq->cq),
				    &aq->cq_dma, GFP_KERNEL);
	if (!aq->cq)
		goto err_free;
	aq->waits = kcalloc(aq->depth, sizeof(*aq->waits), GFP_KERNEL);
	if (!aq->waits)
		goto err_free;
	for (i = 0; i < aq->depth; i++)
		init_completion(&aq->waits[i].done);
	spin_lock_init(&aq->lock);
	aq->pi = 0;
	aq->ci = 0;
	aq->dead = false;
	return 0;

err_free:
	vrnic_aq_free(pf);
	return -ENOMEM;
}

/* Frees what vrnic_aq_alloc() allocated; safe on a part or none of it. */
void vrnic_aq_free(struct vrnic_pf *pf)
{
	struct vrnic_aq *aq = &pf->aq;
	struct device *dev = &pf->pdev->dev;

	kfree(aq->waits);
	aq->waits = NULL;
	if (aq->cq)
		dma_free_coherent(dev, aq->depth * sizeof(*aq->cq), aq->cq,
				  aq->cq_dma);
	aq->cq = NULL;
	if (aq->sq)
		dma_free_coherent(dev, aq->depth * sizeof(*aq->sq), aq->sq,
				  aq->sq_dma);
	aq->sq = NULL;
}

/* Reap completions; called from the async EQ handler and on timeouts. */
void vrnic_aq_poll(struct vrnic_pf *pf)
{
	struct vrnic_aq *aq = &pf->aq;
	u32 mask = aq->depth - 1;
	unsigned long flags;

	spin_lock_irqsave(&aq->lock, flags);
	/*
	 * Dead: vrnic_pf_fatal() completed every waiter.  A completion
	 * past the last command issued (ci == pi) is not trusted, however
	 * its phase bit reads: no slot beyond pi has a waiter.
	 */
	while (!aq->dead && aq->ci != aq->pi) {
		struct vrnic_admin_cqe *cqe = &aq->cq[aq->ci & mask];
		u8 phase = ((aq->ci >> VRNIC_AQ_LOG_DEPTH) & 1) ?
			   0 : VRNIC_ACQE_PHASE;
		struct vrnic_aq_wait *w;
		u16 token;

		if ((READ_ONCE(cqe->flags) & VRNIC_ACQE_PHASE) != phase)
			break;
		dma_rmb();
		token = le16_to_cpu(cqe->token);
		if (token != aq->ci) {
			dev_err_ratelimited(&pf->pdev->dev,
					    "admin completion token %u, expected %u\n",
					    token, aq->ci);
		}
		w = &aq->waits[aq->ci & mask];
		w->status = cqe->status;
		w->result = le32_to_cpu(cqe->result);
		aq->ci++;
		complete(&w->done);
	}
	spin_unlock_irqrestore(&aq->lock, flags);
}

static int vrnic_admin_errno(u8 status)
{
	switch (status) {
	case VRNIC_ADMIN_ST_OK:
		return 0;
	case VRNIC_ADMIN_ST_BAD_OPCODE:
		return -EOPNOTSUPP;
	case VRNIC_ADMIN_ST_NO_RESOURCE:
		return -ENOSPC;
	case VRNIC_ADMIN_ST_BUSY:
		return -EBUSY;
	case VRNIC_ADMIN_ST_NOT_FOUND:
		return -ENOENT;
	case VRNIC_ADMIN_ST_DMA_ERROR:
		return -EIO;
	case VRNIC_ADMIN_ST_UNSUPPORTED:
		return -EOPNOTSUPP;
	default:
		return -EINVAL;
	}
}

/*
 * Commands a dying process may stop waiting for a slot for: each creates
 * or reads, and nothing has been issued while it waits.  Destroys,
 * modifies and the port's settings always run: teardown happens with a
 * fatal signal pending.
 */
static bool vrnic_admin_killable(u8 opcode)
{
	switch (opcode) {
	case VRNIC_ADMIN_CREATE_UCTX:
	case VRNIC_ADMIN_CREATE_PD:
	case VRNIC_ADMIN_CREATE_MR:
	case VRNIC_ADMIN_CREATE_CQ:
	case VRNIC_ADMIN_CREATE_QP:
	case VRNIC_ADMIN_CREATE_SRQ:
	case VRNIC_ADMIN_ALLOC_MW:
	case VRNIC_ADMIN_ALLOC_XRCD:
	case VRNIC_ADMIN_QUERY_QP:
	case VRNIC_ADMIN_QUERY_PORT:
	case VRNIC_ADMIN_QUERY_STATS:
	case VRNIC_ADMIN_QUERY_CC:
		return true;
	default:
		return false;
	}
}

/*
 * Issue cmd if its slot is free.  Returns true when the caller is done
 * waiting: cmd issued (*token is its token), or the queue dead (*token is
 * -ENODEV).  Slots are taken in token order, and one is free only once
 * the waiter of the command depth tokens earlier has read its completion:
 * a waiter woken late must never find its completion re-armed by a newer
 * command (which it would then wait out, and take for a timeout).  This
 * also keeps at most depth commands ahead of the device.
 */
static bool vrnic_aq_try_issue(struct vrnic_pf *pf, struct vrnic_admin_cmd *cmd,
			       int *token)
{
	struct vrnic_aq *aq = &pf->aq;
	struct vrnic_aq_wait *w;
	unsigned long flags;
	bool done = true;

	spin_lock_irqsave(&aq->lock, flags);
	w = &aq->waits[aq->pi & (aq->depth - 1)];
	if (aq->dead) {
		*token = -ENODEV;
	} else if (w->busy) {
		done = false;
	} else {
		*token = aq->pi;
		cmd->token = cpu_to_le16(aq->pi);
		w->busy = true;
		reinit_completion(&w->done);
		memcpy(&aq->sq[aq->pi & (aq->depth - 1)], cmd, sizeof(*cmd));
		aq->pi++;
		/* writel orders the command write before the doorbell. */
		vrnic_wr(pf, VRNIC_REG_AQ_DB, aq->pi);
	}
	spin_unlock_irqrestore(&aq->lock, flags);
	return done;
}

/* Worth another vrnic_aq_try_issue(): the next slot is free or the queue dead. */
static bool vrnic_aq_slot_ready(struct vrnic_aq *aq)
{
	bool ready;

	spin_lock_irq(&aq->lock);
	ready = aq->dead || !aq->waits[aq->pi & (aq->depth - 1)].busy;
	spin_unlock_irq(&aq->lock);
	return ready;
}

/* The waiter of token has read its completion: its slot may be reused. */
static void vrnic_aq_release(struct vrnic_aq *aq, u16 token)
{
	spin_lock_irq(&aq->lock);
	aq->waits[token & (aq->depth - 1)].busy = false;
	spin_unlock_irq(&aq->lock);
	wake_up(&aq->slot_wq);
}

/**
 * vrnic_pf_admin_exec - run one admin command and wait for its completion
 * @pf: device
 * @cmd: command; token is filled in here
 * @result: optional, receives the completion's result field
 *
 * Sleeps, first for a free slot, then for the completion.
 *
 * Return: 0 or a negative errno derived from the device status; -ENODEV
 * once the function is dead; -EINTR only for a command that creates or
 * reads (vrnic_admin_killable()) when the caller got a fatal signal while
 * waiting for a slot: the command was not issued, nothing to undo.
 */
int vrnic_pf_admin_exec(struct vrnic_pf *pf, struct vrnic_admin_cmd *cmd,
			u32 *result)
{
	struct vrnic_aq *aq = &pf->aq;
	struct vrnic_aq_wait *w;
	ktime_t start = ktime_get();
	unsigned long left;
	int token = -ENODEV;
	int ret;

	might_sleep();
	if (READ_ONCE(aq->dead))
		return -ENODEV;
	/*
	 * No timeout here: waiting for a slot says nothing about the device
	 * (many callers, a slow device).  Each command in flight has its own
	 * timeout, and a dead device wakes every slot waiter.  A dying
	 * process stops waiting only for a command that creates or reads:
	 * nothing is issued yet, and teardown never gives up.
	 */
	while (!vrnic_aq_try_issue(pf, cmd, &token)) {
		if (!vrnic_admin_killable(cmd->opcode))
			wait_event(aq->slot_wq, vrnic_aq_slot_ready(aq));
		else if (wait_event_killable(aq->slot_wq,
					     vrnic_aq_slot_ready(aq)))
			return -EINTR;
	}
	if (token < 0)
		return token;
	w = &aq->waits[token & (aq->depth - 1)];

	left = wait_for_completion_timeout(&w->done,
					   msecs_to_jiffies(VRNIC_ADMIN_TIMEOUT_MS));
	if (!left) {
		/* The event may have been lost: look once more. */
		vrnic_aq_poll(pf);
		if (!completion_done(&w->done)) {
			dev_err(&pf->pdev->dev,
				"admin command 0x%x timed out, status 0x%x\n",
				cmd->opcode, vrnic_rd(pf, VRNIC_REG_STATUS));
			/* Returns with the device quiesced and w completed. */
			vrnic_pf_fatal(pf, "admin command timeout");
		}
	}
	if (READ_ONCE(aq->dead)) {
		vrnic_aq_release(aq, token);
		return -ENODEV;
	}
	ret = vrnic_admin_errno(w->status);
	trace_vrnic_admin_cmd(dev_name(&pf->pdev->dev), cmd->opcode, token,
			      w->status, w->result,
			      ktime_us_delta(ktime_get(), start));
	if (ret)
		dev_dbg(&pf->pdev->dev, "admin command 0x%x status %u\n",
			cmd->opcode, w->status);
	if (result)
		*result = w->result;
	vrnic_aq_release(aq, token);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_admin_exec, VRNIC);

static_assert(sizeof(struct vrnic_stats) <= VRNIC_CMD_BUF_SIZE);
static_assert(sizeof(struct vrnic_device_attr) <= VRNIC_CMD_BUF_SIZE);

void *vrnic_pf_cmd_buf_alloc(struct vrnic_pf *pf, dma_addr_t *dma)
{
	return dma_pool_zalloc(pf->cmd_pool, GFP_KERNEL, dma);
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_cmd_buf_alloc, VRNIC);

void vrnic_pf_cmd_buf_free(struct vrnic_pf *pf, void *buf, dma_addr_t dma)
{
	dma_pool_free(pf->cmd_pool, buf, dma);
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_cmd_buf_free, VRNIC);

/*
 * Run a QUERY_* command into a bounce buffer and copy out len bytes.  The
 * device writes the prefix that fits (spec "Admin queue"), so a result
 * that grew past what this driver knows costs nothing; a result shorter
 * than len is not this device's (-EPROTO).
 */
int vrnic_pf_admin_query(struct vrnic_pf *pf, u8 opcode, void *out,
			 size_t len)
{
	struct vrnic_admin_cmd cmd = { .opcode = opcode };
	dma_addr_t dma;
	u32 size = 0;
	void *buf;
	int ret;

	if (WARN_ON_ONCE(len > VRNIC_CMD_BUF_SIZE))
		return -EINVAL;
	buf = vrnic_pf_cmd_buf_alloc(pf, &dma);
	if (!buf)
		return -ENOMEM;
	cmd.query.out_addr = cpu_to_le64(dma);
	cmd.query.out_len = cpu_to_le32(VRNIC_CMD_BUF_SIZE);
	ret = vrnic_pf_admin_exec(pf, &cmd, &size);
	if (!ret) {
		/* The device's result outgrew the buffer: say so, once. */
		if (size > VRNIC_CMD_BUF_SIZE)
			dev_warn_once(&pf->pdev->dev,
				      "query 0x%x: %u-byte result, %u read\n",
				      opcode, size, VRNIC_CMD_BUF_SIZE);
		/*
		 * One device ABI: a result shorter than this driver's layout
		 * would read as zeros, which are not the device's limits.
		 */
		if (size < len) {
			dev_err_ratelimited(&pf->pdev->dev,
					    "query 0x%x: %u-byte result, %zu expected\n",
					    opcode, size, len);
			ret = -EPROTO;
		} else {
			memcpy(out, buf, len);
		}
	}
	vrnic_pf_cmd_buf_free(pf, buf, dma);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_admin_query, VRNIC);

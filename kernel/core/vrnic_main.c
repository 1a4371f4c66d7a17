// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic: PCI function driver for the vrnic RoCEv2 RDMA NIC (vrnic-device,
 * attached to QEMU over vfio-user).  The RDMA part is vrnic_ib.ko, bound to
 * an auxiliary device.
 *
 * Probe order: map the BARs, reset the device, take the MSI-X vectors,
 * bring up the admin queue and the async EQ, query the device, create the
 * completion EQs, register the netdev and, on top of it, add the auxiliary
 * device "vrnic.rdma.<n>" that vrnic_ib.ko registers the ib_device for,
 * and register the devlink instance.  Remove undoes it in reverse:
 * the auxiliary device goes first, so the ib_device is gone before any of
 * what it uses.
 *
 * vrnic_ib.ko is loaded by the auxiliary device's modalias
 * (auxiliary:vrnic.rdma, MODULE_DEVICE_TABLE) as udev does for any device.
 * It uses this module's symbols: it goes first on unload ("rmmod vrnic_ib
 * vrnic", or "modprobe -r vrnic_ib", which takes vrnic along).
 */
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/dmapool.h>
#include <linux/module.h>
#include <linux/rtnetlink.h>
#include <linux/sizes.h>
#include <linux/slab.h>

#include "vrnic_core.h"
#define CREATE_TRACE_POINTS
#include "vrnic_trace.h"

#define VRNIC_RESET_TIMEOUT_MS	1000
#define VRNIC_TEST_TIMEOUT_MS	1000
#define VRNIC_TEST_DMA_LEN	256

static int vrnic_reset(struct vrnic_pf *pf)
{
	unsigned long end = jiffies + msecs_to_jiffies(VRNIC_RESET_TIMEOUT_MS);

	vrnic_wr(pf, VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	while (!(vrnic_rd(pf, VRNIC_REG_STATUS) & VRNIC_STATUS_RESET_DONE)) {
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		usleep_range(100, 200);
	}
	return 0;
}

/*
 * Stop all device DMA: a reset, then bus mastering off whatever the reset
 * reported (a device that says RESET_DONE and keeps writing is stopped
 * too).  Every path that frees memory the device knew of calls this first.
 */
static void vrnic_stop_dma(struct vrnic_pf *pf)
{
	if (vrnic_reset(pf))
		dev_warn(&pf->pdev->dev, "device reset timed out\n");
	pci_clear_master(pf->pdev);
}

/*
 * The context table given to a device with a limited QP-context cache:
 * 65536 contexts (4 MiB), not the VRNIC_MAX_QP (2^20, 64 MiB) the device
 * could take.  The device then creates QPs only in the slots the table
 * holds, and QUERY_DEVICE's max_qp says so (queried again once given).
 */
#define VRNIC_QPC_ENTRIES	65536
#define VRNIC_QPC_PAGE_SIZE	SZ_4K
#define VRNIC_QPC_PAGES \
	(VRNIC_QPC_ENTRIES * VRNIC_QPC_SIZE / VRNIC_QPC_PAGE_SIZE)

/*
 * Only after vrnic_stop_dma(): the device may write any of it until then.
 * The pages are freed by the driver's own copy of their addresses, not by
 * the list the device can write.
 */
static void vrnic_qpc_mem_free(struct vrnic_pf *pf)
{
	struct vrnic_qpc_mem *q = &pf->qpc;
	struct device *dev = &pf->pdev->dev;
	unsigned int i;

	for (i = 0; i < q->npages; i++)
		dma_free_coherent(dev, VRNIC_QPC_PAGE_SIZE, q->pages[i],
				  q->dma[i]);
	if (q->list)
		dma_free_coherent(dev, VRNIC_QPC_PAGES * sizeof(__le64),
				  q->list, q->list_dma);
	kfree(q->dma);
	kfree(q->pages);
	memset(q, 0, sizeof(*q));
}

static int vrnic_qpc_mem_alloc(struct vrnic_pf *pf)
{
	struct vrnic_qpc_mem *q = &pf->qpc;
	struct device *dev = &pf->pdev->dev;
	void *page;

	q->pages = kcalloc(VRNIC_QPC_PAGES, sizeof(*q->pages), GFP_KERNEL);
	q->dma = kcalloc(VRNIC_QPC_PAGES, sizeof(*q->dma), GFP_KERNEL);
	q->list = dma_alloc_coherent(dev, VRNIC_QPC_PAGES * sizeof(__le64),
				     &q->list_dma, GFP_KERNEL);
	if (!q->pages || !q->dma || !q->list)
		return -ENOMEM;
	for (; q->npages < VRNIC_QPC_PAGES; q->npages++) {
		page = dma_alloc_coherent(dev, VRNIC_QPC_PAGE_SIZE,
					  &q->dma[q->npages], GFP_KERNEL);
		if (!page)
			return -ENOMEM;
		q->pages[q->npages] = page;
		q->list[q->npages] = cpu_to_le64(q->dma[q->npages]);
	}
	return 0;
}

/*
 * A device that models a QP-context cache (spec "QP-context cache") gets
 * the memory for every QP's context before the first QP, at probe and
 * after every function reset (a reset forgets it).  The memory is made
 * once.  Without it the device still models the misses' cost, so a
 * failure here is reported and not fatal.
 */
static void vrnic_qpc_mem_give(struct vrnic_pf *pf)
{
	struct vrnic_qpc_mem *q = &pf->qpc;
	struct device *dev = &pf->pdev->dev;
	struct vrnic_admin_cmd cmd = {};
	unsigned int i;
	int ret;

	if (!le32_to_cpu(pf->attr.qpc_cache))
		return;
	if (!q->list && vrnic_qpc_mem_alloc(pf)) {
		dev_warn(dev, "no memory for QP contexts: the cache reads none\n");
		/* The device never saw it: free at once. */
		vrnic_qpc_mem_free(pf);
		return;
	}
	/* The device may have written the list: give it the driver's own. */
	for (i = 0; i < q->npages; i++)
		q->list[i] = cpu_to_le64(q->dma[i]);
	cmd.opcode = VRNIC_ADMIN_SET_QPC_MEM;
	cmd.set_qpc_mem.base = cpu_to_le64(q->list_dma);
	cmd.set_qpc_mem.entries = cpu_to_le32(VRNIC_QPC_ENTRIES);
	cmd.set_qpc_mem.flags = VRNIC_RING_PAGED;
	ret = vrnic_pf_admin_exec(pf, &cmd, NULL);
	if (ret) {
		dev_warn(dev, "QP-context memory refused: %d\n", ret);
		return;
	}
	/* max_qp is now what the table holds. */
	ret = vrnic_pf_admin_query(pf, VRNIC_ADMIN_QUERY_DEVICE, &pf->attr,
				   sizeof(pf->attr));
	if (ret) {
		dev_warn(dev, "QUERY_DEVICE after SET_QPC_MEM failed: %d\n", ret);
		pf->attr.max_qp = cpu_to_le32(min_t(u32, le32_to_cpu(pf->attr.max_qp),
						    VRNIC_QPC_ENTRIES - 2));
	}
}

/*
 * Stop the device's DMA (vrnic_stop_dma()), and only then mark the admin
 * queue dead and complete the waiters: -ENODEV from a command means the
 * device can no longer DMA.  Under fatal_lock.
 */
static void vrnic_pf_quiesce(struct vrnic_pf *pf)
{
	struct vrnic_aq *aq = &pf->aq;
	u16 i;

	lockdep_assert_held(&pf->fatal_lock);
	vrnic_stop_dma(pf);

	spin_lock_irq(&aq->lock);
	aq->dead = true;
	if (aq->waits)
		for (i = aq->ci; i != aq->pi; i++)
			complete(&aq->waits[i & (aq->depth - 1)].done);
	aq->ci = aq->pi;
	spin_unlock_irq(&aq->lock);
	/* Issuers waiting for a slot fail at once. */
	wake_up_all(&aq->slot_wq);
}

/*
 * The function is dead (an admin command timed out, FATAL, a refused
 * destroy, no answer).  Quiesce the device before marking the admin queue
 * dead, so no caller frees memory the device may still write; complete
 * every waiting command with -ENODEV; detach the netdev; raise
 * IB_EVENT_DEVICE_FATAL through vrnic_ib; and tell the devlink reporter,
 * whose recover resets and re-initialises the function.
 *
 * Sleeps; may run under RTNL (from an admin command).
 */
static void __vrnic_pf_fatal(struct vrnic_pf *pf, const char *why,
			     bool report)
{
	struct vrnic_aq *aq = &pf->aq;

	mutex_lock(&pf->fatal_lock);
	if (READ_ONCE(aq->dead)) {
		mutex_unlock(&pf->fatal_lock);
		return;
	}
	dev_err(&pf->pdev->dev, "%s: device fatal, quiescing it\n", why);
	vrnic_pf_quiesce(pf);
	/* A PORT_UP handled before aq.dead was set lands before carrier off. */
	synchronize_irq(pci_irq_vector(pf->pdev, VRNIC_AEQ_VECTOR));
	strscpy(pf->fatal_why, why, sizeof(pf->fatal_why));
	if (report && pf->fatal_reporter && !READ_ONCE(pf->removing))
		schedule_work(&pf->health_work);

	/* pf->netdev lives while port_events is set (vrnic_netdev_events_off()). */
	if (READ_ONCE(pf->port_events)) {
		netif_carrier_off(pf->netdev);
		netif_device_detach(pf->netdev);
	}
	vrnic_rdma_async_event(pf, VRNIC_EQE_FATAL, 0);
	mutex_unlock(&pf->fatal_lock);
}

void vrnic_pf_fatal(struct vrnic_pf *pf, const char *why)
{
	__vrnic_pf_fatal(pf, why, true);
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_fatal, VRNIC);

/**
 * vrnic_pf_destroy - destroy a device object before its memory is freed
 * @pf: the function
 * @opcode: the DESTROY_* or DEALLOC_* admin opcode
 * @id: the object's handle
 * @what: the object, for the log ("QP", "Ethernet ring")
 *
 * One policy for every object (EQs, Ethernet rings, user contexts, PDs,
 * CQs, QPs, SRQs, MRs, MWs, XRCDs; the create paths' error unwinds too):
 * DESTROY of a valid handle succeeds (spec, "Errors"), and the
 * driver only ever destroys handles it created.  So a refusal means
 * the device has failed: vrnic_pf_fatal() quiesces it (reset, then bus
 * mastering off) before this returns, and the function is dead until it
 * is probed again.  Either way the device no longer touches the object
 * when this returns, and the caller frees its memory (rings, doorbell
 * records, page lists, pinned user memory, buffers) as usual.  A function
 * already dead (-ENODEV) was quiesced before it was marked so.
 *
 * The one answer that is not a failure is BUSY from DESTROY_MR, which the
 * spec gives while a memory window is bound to the MR: a process can ask
 * for that, and gets -EBUSY with the MR still registered.
 *
 * Context: process, sleeps (the admin command, and vrnic_pf_fatal()).
 * Return: 0, the caller may free; -EBUSY only for DESTROY_MR as above.
 */
int vrnic_pf_destroy(struct vrnic_pf *pf, u8 opcode, u32 id,
		     const char *what)
{
	struct vrnic_admin_cmd cmd = { .opcode = opcode };
	char why[64];
	int ret;

	cmd.destroy.id = cpu_to_le32(id);
	ret = vrnic_pf_admin_exec(pf, &cmd, NULL);
	if (!ret || ret == -ENODEV)
		return 0;
	if (opcode == VRNIC_ADMIN_DESTROY_MR && ret == -EBUSY)
		return -EBUSY;
	dev_err(&pf->pdev->dev, "destroy %s %u refused (%d)\n", what, id, ret);
	snprintf(why, sizeof(why), "%s destroy refused", what);
	vrnic_pf_fatal(pf, why);
	return 0;
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_destroy, VRNIC);

static void vrnic_fatal_work(struct work_struct *work)
{
	struct vrnic_pf *pf = container_of(work, struct vrnic_pf, fatal_work);

	vrnic_pf_fatal(pf, "FATAL event");
}

/*
 * A device can fail without a FATAL event: a surprise removal, or the
 * vrnic-device process gone (vfio-user), after which every register reads
 * as all ones; or a FATAL whose event was lost.  So the status register
 * is read every VRNIC_STATUS_POLL_MS, as mlx5 polls its health counter,
 * and either makes the function dead as a FATAL event does.
 */
#define VRNIC_STATUS_POLL_MS	2000

static void vrnic_status_poll(struct work_struct *work)
{
	struct vrnic_pf *pf = container_of(to_delayed_work(work),
					   struct vrnic_pf, status_poll);
	u32 status;

	if (READ_ONCE(pf->removing))
		return;
	/*
	 * Not while a reset or a recovery holds the function: the status of
	 * a function being reset proves nothing, and a verdict reached
	 * before vrnic_pf_up() must not kill what it brought back.
	 */
	if (mutex_trylock(&pf->reset_lock)) {
		if (!READ_ONCE(pf->aq.dead)) {
			status = vrnic_rd(pf, VRNIC_REG_STATUS);
			if (status == U32_MAX)
				vrnic_pf_fatal(pf, "device not responding");
			else if (status & VRNIC_STATUS_FATAL)
				vrnic_pf_fatal(pf, "FATAL status");
		}
		mutex_unlock(&pf->reset_lock);
	}
	schedule_delayed_work(&pf->status_poll,
			      msecs_to_jiffies(VRNIC_STATUS_POLL_MS));
}

/* A FATAL event on the AEQ (hard interrupt): quiesce from a work item. */
void vrnic_pf_fatal_irq(struct vrnic_pf *pf, u32 error)
{
	dev_err(&pf->pdev->dev, "device fatal error %u\n", error);
	if (READ_ONCE(pf->port_events))	/* not in probe or remove */
		schedule_work(&pf->fatal_work);
}

static int vrnic_wait_test_dma(struct vrnic_pf *pf)
{
	unsigned long end = jiffies + msecs_to_jiffies(VRNIC_TEST_TIMEOUT_MS);
	u32 st;

	while ((st = vrnic_rd(pf, VRNIC_REG_TEST_DMA_STATUS)) ==
	       VRNIC_TEST_DMA_ST_BUSY) {
		if (time_after(jiffies, end))
			return -ETIMEDOUT;
		usleep_range(50, 100);
	}
	return st == VRNIC_TEST_DMA_ST_DONE ? 0 : -EIO;
}

static int vrnic_test_scratch(struct vrnic_pf *pf)
{
	static const u32 patterns[] = { 0, 0xffffffff, 0xa5a55a5a, 0x12345678 };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(patterns); i++) {
		vrnic_wr(pf, VRNIC_REG_SCRATCH, patterns[i]);
		if (vrnic_rd(pf, VRNIC_REG_SCRATCH) != patterns[i])
			return -EIO;
	}
	return 0;
}

/* The handler of every vector counts the interrupt, whatever else it does. */
static int vrnic_test_irqs(struct vrnic_pf *pf)
{
	unsigned long end;
	unsigned int i;

	for (i = 0; i < pf->num_vectors; i++) {
		int before = atomic_read(&pf->test_irqs);

		vrnic_wr(pf, VRNIC_REG_TEST_IRQ, i);
		end = jiffies + msecs_to_jiffies(VRNIC_TEST_TIMEOUT_MS);
		while (atomic_read(&pf->test_irqs) == before) {
			if (time_after(jiffies, end))
				return -ETIMEDOUT;
			usleep_range(50, 100);
		}
	}
	return 0;
}

static int vrnic_test_dma(struct vrnic_pf *pf)
{
	struct device *dev = &pf->pdev->dev;
	dma_addr_t dma;
	unsigned int i;
	u8 *buf;
	int ret;

	buf = dma_alloc_coherent(dev, VRNIC_TEST_DMA_LEN, &dma, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	vrnic_wr(pf, VRNIC_REG_TEST_DMA_ADDR_LO, lower_32_bits(dma));
	vrnic_wr(pf, VRNIC_REG_TEST_DMA_ADDR_HI, upper_32_bits(dma));
	vrnic_wr(pf, VRNIC_REG_TEST_DMA_LEN, VRNIC_TEST_DMA_LEN);
	vrnic_wr(pf, VRNIC_REG_TEST_DMA_CTRL, VRNIC_TEST_DMA_FILL);
	ret = vrnic_wait_test_dma(pf);
	for (i = 0; !ret && i < VRNIC_TEST_DMA_LEN; i++)
		if (buf[i] != (u8)(i ^ 0x5a))
			ret = -EIO;
	if (!ret) {
		vrnic_wr(pf, VRNIC_REG_TEST_DMA_CTRL, VRNIC_TEST_DMA_INVERT);
		ret = vrnic_wait_test_dma(pf);
	}
	for (i = 0; !ret && i < VRNIC_TEST_DMA_LEN; i++)
		if (buf[i] != (u8)~(i ^ 0x5a))
			ret = -EIO;
	/*
	 * A test DMA may still be in flight: the function is dead (quiesced)
	 * before the buffer goes; devlink health recovers it.
	 */
	if (ret)
		vrnic_pf_fatal(pf, "self-test DMA failed");
	dma_free_coherent(dev, VRNIC_TEST_DMA_LEN, buf, dma);
	return ret;
}

/**
 * vrnic_pf_self_test - exercise the test registers (ethtool -t)
 * @pf: the function, enabled
 * @res: VRNIC_SELF_TESTS results, 0 for a pass, 1 for a failure
 *
 * The scratch register, an interrupt on every vector, and a test DMA
 * (spec, "Test registers").  The device answers the rest of its work
 * meanwhile.  Only with VRNIC_CAP_TEST_REGS (vrnic_pf_has_self_test()).
 *
 * Context: process, sleeps; under RTNL (one at a time).
 * Return: true if every test passed.
 */
bool vrnic_pf_self_test(struct vrnic_pf *pf, u64 *res)
{
	struct device *dev = &pf->pdev->dev;
	int ret[VRNIC_SELF_TESTS];
	unsigned int i;
	bool ok = true;

	ret[0] = vrnic_test_scratch(pf);
	ret[1] = vrnic_test_irqs(pf);
	ret[2] = vrnic_test_dma(pf);
	for (i = 0; i < VRNIC_SELF_TESTS; i++) {
		res[i] = !!ret[i];
		if (ret[i]) {
			dev_err(dev, "self-test %u failed: %d\n", i, ret[i]);
			ok = false;
		}
	}
	return ok;
}

bool vrnic_pf_has_self_test(struct vrnic_pf *pf)
{
	return pf->caps & VRNIC_CAP_TEST_REGS;
}

static int vrnic_enable(struct vrnic_pf *pf)
{
	u32 status;

	vrnic_wr(pf, VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	status = vrnic_rd(pf, VRNIC_REG_STATUS);
	if (!(status & VRNIC_STATUS_READY)) {
		dev_err(&pf->pdev->dev, "device not ready: status 0x%x error %u\n",
			status, vrnic_rd(pf, VRNIC_REG_ERROR));
		return -EIO;
	}
	vrnic_eq_arm(&pf->aeq);
	return 0;
}

/**
 * vrnic_pf_down - take the function apart for a reset, keeping the netdev
 * @pf: the function
 *
 * First half of a recovery (devlink health) or a PCI reset
 * (pci_error_handlers): the function is made dead as on a fatal error
 * (quiesced: reset, bus mastering off; every admin command fails), with
 * no health report, since this is the remedy.  The RDMA auxiliary device
 * is deleted (vrnic_ib frees its objects: the device no longer touches
 * them), the netdev is detached and its rings freed, and the completion
 * EQs are freed.  The admin queue and the AEQ keep their memory.
 *
 * Context: process, under reset_lock; takes RTNL.
 */
void vrnic_pf_down(struct vrnic_pf *pf)
{
	lockdep_assert_held(&pf->reset_lock);
	__vrnic_pf_fatal(pf, "function reset", false);
	if (pf->adev)
		vrnic_aux_del(pf);
	rtnl_lock();
	vrnic_eth_detach(pf);
	rtnl_unlock();
	vrnic_ceqs_destroy(pf);
}

/**
 * vrnic_pf_up - re-initialise the function after vrnic_pf_down()
 * @pf: the function, dead, its completion EQs and rings freed
 *
 * Resets the device and brings it up as probe does, on the admin queue's
 * and the AEQ's memory of before: enable, QUERY_DEVICE, the completion
 * EQs, the netdev's port settings and rings, and a new RDMA auxiliary
 * device.  On failure the function is dead again, and vrnic_pf_down()
 * and vrnic_pf_up() may be tried again.
 *
 * Context: process, under reset_lock; takes RTNL.
 * Return: 0 or a negative errno.
 */
int vrnic_pf_up(struct vrnic_pf *pf)
{
	struct vrnic_aq *aq = &pf->aq;
	int ret;

	lockdep_assert_held(&pf->reset_lock);
	/* A FATAL event of the function before the reset must not end it. */
	cancel_work_sync(&pf->fatal_work);
	ret = vrnic_reset(pf);
	if (ret)
		goto err;
	pci_set_master(pf->pdev);
	vrnic_aq_restart(pf);
	vrnic_aeq_restart(pf);
	ret = vrnic_enable(pf);
	if (ret)
		goto err;
	mutex_lock(&pf->fatal_lock);
	spin_lock_irq(&aq->lock);
	aq->dead = false;
	spin_unlock_irq(&aq->lock);
	mutex_unlock(&pf->fatal_lock);

	ret = vrnic_pf_admin_query(pf, VRNIC_ADMIN_QUERY_DEVICE, &pf->attr,
				   sizeof(pf->attr));
	if (ret)
		goto err;
	vrnic_qpc_mem_give(pf);
	ret = vrnic_ceqs_create(pf);
	if (ret)
		goto err;
	rtnl_lock();
	ret = vrnic_eth_attach(pf);
	rtnl_unlock();
	if (ret)
		goto err;
	if (pf->caps & VRNIC_CAP_ROCE_V2) {
		ret = vrnic_aux_add(pf);
		if (ret)
			goto err;
	}
	dev_info(&pf->pdev->dev, "function reset: %s back\n",
		 netdev_name(pf->netdev));
	return 0;

err:
	dev_err(&pf->pdev->dev, "function did not come back: %d\n", ret);
	__vrnic_pf_fatal(pf, "function reset failed", false);
	return ret;
}

static int vrnic_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct irq_affinity affd = { .pre_vectors = 1 };
	struct vrnic_pf *pf;
	u32 version;
	int nvec;
	int ret;

	ret = pci_enable_device_mem(pdev);
	if (ret)
		return ret;
	ret = pci_request_mem_regions(pdev, DRV_NAME);
	if (ret)
		goto err_disable;
	pci_set_master(pdev);
	ret = dma_set_mask_and_coherent(&pdev->dev, DMA_BIT_MASK(64));
	if (ret)
		goto err_regions;

	pf = vrnic_devlink_alloc(pdev);
	if (!pf) {
		ret = -ENOMEM;
		goto err_regions;
	}
	pf->pdev = pdev;
	pci_set_drvdata(pdev, pf);
	spin_lock_init(&pf->rdma_lock);
	mutex_init(&pf->fatal_lock);
	INIT_WORK(&pf->fatal_work, vrnic_fatal_work);
	mutex_init(&pf->reset_lock);
	INIT_WORK(&pf->health_work, vrnic_health_work);
	INIT_DELAYED_WORK(&pf->status_poll, vrnic_status_poll);
	init_waitqueue_head(&pf->aq.slot_wq);	/* vrnic_pf_quiesce() wakes it */
	atomic_set(&pf->test_irqs, 0);
	pf->cmd_pool = dma_pool_create("vrnic_cmd", &pdev->dev,
				       VRNIC_CMD_BUF_SIZE, 64, 0);
	if (!pf->cmd_pool) {
		ret = -ENOMEM;
		goto err_free_pf;
	}

	pf->regs = pci_iomap(pdev, VRNIC_REG_BAR, VRNIC_REG_BAR_SIZE);
	if (!pf->regs) {
		ret = -ENOMEM;
		goto err_pool;
	}
	pf->db = pci_iomap(pdev, VRNIC_DB_BAR, VRNIC_DB_PAGE_SIZE);
	if (!pf->db) {
		ret = -ENOMEM;
		goto err_unmap_regs;
	}
	pf->db_bar_start = pci_resource_start(pdev, VRNIC_DB_BAR);
	/* User contexts map doorbell pages 1..VRNIC_NUM_DB_PAGES-1 of BAR2. */
	if (pci_resource_len(pdev, VRNIC_DB_BAR) <
	    (resource_size_t)VRNIC_NUM_DB_PAGES * VRNIC_DB_PAGE_SIZE) {
		dev_err(&pdev->dev, "doorbell BAR too small: %llu bytes\n",
			(u64)pci_resource_len(pdev, VRNIC_DB_BAR));
		ret = -ENODEV;
		goto err_unmap_db;
	}
	BUILD_BUG_ON(VRNIC_DB_PAGE_SIZE != PAGE_SIZE);

	/*
	 * A new major version may change any layout; a new minor one only
	 * adds what CAPS and the query answers announce.
	 */
	version = vrnic_rd(pf, VRNIC_REG_VERSION);
	if (version >> 16 != VRNIC_SPEC_VERSION_MAJOR) {
		dev_err(&pdev->dev,
			"device spec version %u.%u, this driver supports %u.x only\n",
			version >> 16, version & 0xffff,
			VRNIC_SPEC_VERSION_MAJOR);
		ret = -ENODEV;
		goto err_unmap_db;
	}
	pf->caps = vrnic_rd(pf, VRNIC_REG_CAPS);
	if (!(pf->caps & VRNIC_CAP_ETH)) {
		dev_err(&pdev->dev, "device has no Ethernet function (caps %#x)\n",
			pf->caps);
		ret = -ENODEV;
		goto err_unmap_db;
	}
	ret = vrnic_reset(pf);
	if (ret) {
		dev_err(&pdev->dev, "device reset timed out\n");
		goto err_unmap_db;
	}

	/*
	 * Vector n serves EQ n: never more than VRNIC_MAX_EQS of them.  The
	 * completion vectors are spread over the CPUs, as erdma and mlx5
	 * spread theirs; vector 0, the async EQ's, is left out of the spread.
	 */
	nvec = pci_alloc_irq_vectors_affinity(pdev, 2,
					      min3(vrnic_rd(pf, VRNIC_REG_NUM_MSIX),
						   num_online_cpus() + 1U,
						   (u32)VRNIC_MAX_EQS),
					      PCI_IRQ_MSIX | PCI_IRQ_AFFINITY,
					      &affd);
	if (nvec < 0) {
		ret = nvec;
		goto err_unmap_db;
	}
	pf->num_vectors = nvec;
	pf->num_ceqs = nvec - 1;

	/*
	 * The rings the interrupt handlers read exist before the handlers
	 * and outlive them; the device learns of the rings only once both
	 * are in place, and its DMA stops before either goes.
	 */
	ret = vrnic_aq_alloc(pf);
	if (ret)
		goto err_vectors;
	ret = vrnic_aeq_alloc(pf);
	if (ret)
		goto err_aq;
	ret = vrnic_eq_request_irqs(pf);
	if (ret)
		goto err_aeq;
	vrnic_aq_program(pf);
	vrnic_aeq_program(pf);
	ret = vrnic_enable(pf);
	if (ret)
		goto err_stop;
	ret = vrnic_pf_admin_query(pf, VRNIC_ADMIN_QUERY_DEVICE, &pf->attr,
				   sizeof(pf->attr));
	if (ret)
		goto err_stop;
	vrnic_qpc_mem_give(pf);
	ret = vrnic_ceqs_create(pf);
	if (ret)
		goto err_stop;
	ret = vrnic_netdev_register(pf);
	if (ret)
		goto err_ceqs;
	if (pf->caps & VRNIC_CAP_ROCE_V2) {
		ret = vrnic_aux_add(pf);
		if (ret)
			goto err_netdev;
	}
	ret = vrnic_devlink_register(pf);
	if (ret)
		goto err_aux;

	schedule_delayed_work(&pf->status_poll,
			      msecs_to_jiffies(VRNIC_STATUS_POLL_MS));
	return 0;

err_aux:
	if (pf->adev)
		vrnic_aux_del(pf);
err_netdev:
	vrnic_netdev_unregister(pf);
err_ceqs:
	vrnic_ceqs_destroy(pf);
err_stop:
	vrnic_stop_dma(pf);
	vrnic_qpc_mem_free(pf);
	vrnic_eq_free_irqs(pf);
err_aeq:
	vrnic_aeq_free(pf);
err_aq:
	vrnic_aq_free(pf);
err_vectors:
	pci_free_irq_vectors(pdev);
err_unmap_db:
	pci_iounmap(pdev, pf->db);
err_unmap_regs:
	pci_iounmap(pdev, pf->regs);
err_pool:
	dma_pool_destroy(pf->cmd_pool);
err_free_pf:
	cancel_work_sync(&pf->health_work);
	vrnic_devlink_free(pf);
err_regions:
	pci_release_mem_regions(pdev);
err_disable:
	pci_disable_device(pdev);
	return ret;
}

static void vrnic_remove(struct pci_dev *pdev)
{
	struct vrnic_pf *pf = pci_get_drvdata(pdev);

	/* No recovery runs or starts from here on, nor a status poll. */
	vrnic_devlink_unregister(pf);
	cancel_delayed_work_sync(&pf->status_poll);
	/* The RDMA driver unbinds first: the ib_device uses all below. */
	if (pf->adev)	/* a failed recovery, or no RoCE, leaves none */
		vrnic_aux_del(pf);
	vrnic_netdev_unregister(pf);
	vrnic_ceqs_destroy(pf);
	/* All DMA stops before the rings are freed. */
	vrnic_stop_dma(pf);
	vrnic_qpc_mem_free(pf);
	vrnic_eq_free_irqs(pf);
	vrnic_aeq_free(pf);
	vrnic_aq_free(pf);
	pci_free_irq_vectors(pdev);
	pci_iounmap(pdev, pf->db);
	pci_iounmap(pdev, pf->regs);
	/* Its users, the netdev and vrnic_ib, are gone; so is the device's DMA. */
	dma_pool_destroy(pf->cmd_pool);
	/* A fatal error during the teardown above queued a report. */
	cancel_work_sync(&pf->health_work);
	vrnic_devlink_free(pf);
	pci_release_mem_regions(pdev);
	pci_disable_device(pdev);
}

/*
 * Reboot, power-off or kexec: the next kernel (or firmware) owns the memory
 * the device's rings and queues live in, so the device must stop DMA and
 * interrupts now.  The netdev stops transmitting, the reset quiesces the
 * device, later admin commands fail at once, and bus mastering goes off.
 * Nothing is freed: the system is going down.
 */
static void vrnic_shutdown(struct pci_dev *pdev)
{
	struct vrnic_pf *pf = pci_get_drvdata(pdev);

	if (!pf)
		return;
	rtnl_lock();
	netif_device_detach(pf->netdev);
	rtnl_unlock();
	/*
	 * Quiesce as vrnic_pf_fatal() does, never marking the queue dead
	 * before the device has stopped: a destroy running meanwhile frees
	 * on -ENODEV (vrnic_pf_destroy()).
	 */
	cancel_work_sync(&pf->fatal_work);
	WRITE_ONCE(pf->removing, true);
	cancel_delayed_work_sync(&pf->status_poll);
	/* A report under way recovers nothing now (vrnic_fatal_recover()). */
	cancel_work_sync(&pf->health_work);
	mutex_lock(&pf->reset_lock);	/* a recovery under way finishes */
	mutex_lock(&pf->fatal_lock);
	if (!READ_ONCE(pf->aq.dead))
		vrnic_pf_quiesce(pf);
	mutex_unlock(&pf->fatal_lock);
	mutex_unlock(&pf->reset_lock);
}

/*
 * A reset of the function (FLR through sysfs "reset", or a bus reset)
 * loses the device's state as a fatal error does: take the function down
 * as a recovery does, before, and bring it up again after.  reset_lock is
 * held from one to the other, so that no devlink recovery runs between.
 */
static void vrnic_reset_prepare(struct pci_dev *pdev)
{
	struct vrnic_pf *pf = pci_get_drvdata(pdev);

	mutex_lock(&pf->reset_lock);
	vrnic_pf_down(pf);
}

static void vrnic_reset_done(struct pci_dev *pdev)
{
	struct vrnic_pf *pf = pci_get_drvdata(pdev);
	int ret = vrnic_pf_up(pf);

	mutex_unlock(&pf->reset_lock);
	/* The reporter follows: healthy again, or a fatal error to report. */
	if (!ret)
		vrnic_devlink_healthy(pf);
	else if (pf->fatal_reporter && !READ_ONCE(pf->removing))
		schedule_work(&pf->health_work);
}

static const struct pci_error_handlers vrnic_err_handlers = {
	.reset_prepare = vrnic_reset_prepare,
	.reset_done = vrnic_reset_done,
};

static const struct pci_device_id vrnic_pci_ids[] = {
	{ PCI_DEVICE(VRNIC_PCI_VENDOR_ID, VRNIC_PCI_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, vrnic_pci_ids);

static struct pci_driver vrnic_pci_driver = {
	.name = DRV_NAME,
	.id_table = vrnic_pci_ids,
	.probe = vrnic_probe,
	.remove = vrnic_remove,
	.shutdown = vrnic_shutdown,
	.err_handler = &vrnic_err_handlers,
};
module_pci_driver(vrnic_pci_driver);

MODULE_AUTHOR("vrnic developers");
MODULE_DESCRIPTION("vrnic RoCEv2 NIC PCI function driver");
MODULE_LICENSE("Dual BSD/GPL");

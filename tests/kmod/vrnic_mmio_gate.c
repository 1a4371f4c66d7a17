// SPDX-License-Identifier: GPL-2.0
/*
 * The transport costs that decide issue 27's gate, measured from inside a
 * guest on whatever PCI function it is bound to: today's in-QEMU vrnic
 * (1af4:10f0, through driver_override) or the vfio-user stub
 * (1af4:10ff, device/vfio_user_stub.cpp) under stock QEMU.  Both expose
 * vrnic's BAR layout and these registers (include/vrnic_hw.h):
 *
 *   read     a BAR0 read (VRNIC_REG_VERSION): a round trip to the device;
 *   write    a doorbell (VRNIC_DB_USER_PING on BAR2 page 0): the vCPU's
 *            cost per posted write, from a burst of nwrite, and the burst
 *            with the read that flushes it;
 *   irq      VRNIC_REG_TEST_IRQ raises MSI-X vector 0: the time from the
 *            write to the handler.
 *
 * With live=1 the module binds nothing: it times doorbells on a vrnic
 * that vrnic.ko runs (enabled, so that the engine takes them), through
 * its own mapping of BAR2 page 0 (the kernel's):
 *
 *   write_ready  VRNIC_DB_USER_PING, which an enabled device accepts
 *                and does nothing with;
 *   doorbell_bh  VRNIC_DB_ETH_TX naming no ring: the engine refuses the
 *                ring but schedules its bottom half, as every real TX,
 *                SQ or RQ doorbell does.  This is what a doorbell costs
 *                the vCPU in today's device.
 * The load then fails with -EAGAIN on purpose (nothing stays loaded).
 *
 * Each figure is printed as
 *   vrnic_mmio_gate: <what> n=<n> mean_ns=<m> p50_ns=<p> p99_ns=<q>
 * and the time ktime_get_ns() itself costs as "clock".  The stub also
 * counts the doorbells it received (BAR0 VRNIC_REG_TEST_IRQ reads back
 * the count there), so that a lost posted write shows.  The
 * measurement runs at probe; the probe fails with -EIO when a check
 * failed (an interrupt that never came, a lost doorbell).
 */
#include <linux/delay.h>
#include <linux/interrupt.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/slab.h>
#include <linux/sort.h>

#include "vrnic_hw.h"

#define STUB_DEVICE_ID	0x10ff

static unsigned int nread = 2000;
module_param(nread, uint, 0444);
MODULE_PARM_DESC(nread, "BAR reads to time");
static unsigned int nwrite = 20000;
module_param(nwrite, uint, 0444);
MODULE_PARM_DESC(nwrite, "doorbells to time");
static bool live;
module_param(live, bool, 0444);
MODULE_PARM_DESC(live, "time doorbells on a running vrnic, bind nothing");
static unsigned int nirq = 500;
module_param(nirq, uint, 0444);
MODULE_PARM_DESC(nirq, "interrupts to time");

struct gate {
	void __iomem *regs;
	void __iomem *db;
	u64 irq_at;		/* ktime of the last interrupt, 0: none yet */
	u64 *samples;
};

static irqreturn_t gate_irq(int irq, void *data)
{
	struct gate *g = data;

	WRITE_ONCE(g->irq_at, ktime_get_ns());
	return IRQ_HANDLED;
}

static int cmp_u64(const void *a, const void *b)
{
	const u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static void report(const char *what, u64 *s, unsigned int n)
{
	u64 sum = 0;
	unsigned int i;

	if (!n)
		return;
	for (i = 0; i < n; i++)
		sum += s[i];
	sort(s, n, sizeof(*s), cmp_u64, NULL);
	pr_info("vrnic_mmio_gate: %s n=%u mean_ns=%llu p50_ns=%llu p99_ns=%llu\n",
		what, n, div_u64(sum, n), s[n / 2], s[(n * 99) / 100]);
}

static int gate_measure(struct pci_dev *pdev, struct gate *g)
{
	unsigned int i, n = max3(nread, nirq, 64u);
	u64 t0, t1;
	int bad = 0;

	g->samples = kcalloc(n, sizeof(u64), GFP_KERNEL);
	if (!g->samples)
		return -ENOMEM;

	for (i = 0; i < 64; i++) {
		t0 = ktime_get_ns();
		t1 = ktime_get_ns();
		g->samples[i] = t1 - t0;
	}
	report("clock", g->samples, 64);

	if (readl(g->regs + VRNIC_REG_VERSION) != VRNIC_SPEC_VERSION) {
		pr_info("vrnic_mmio_gate: # VERSION reads %#x\n",
			readl(g->regs + VRNIC_REG_VERSION));
		bad = 1;
	}
	for (i = 0; i < nread; i++) {
		t0 = ktime_get_ns();
		readl(g->regs + VRNIC_REG_VERSION);
		g->samples[i] = ktime_get_ns() - t0;
	}
	report("read", g->samples, nread);

	if (nwrite) {
		u32 before = 0, after;

		if (pdev->device == STUB_DEVICE_ID)
			before = readl(g->regs + VRNIC_REG_TEST_IRQ);
		t0 = ktime_get_ns();
		for (i = 0; i < nwrite; i++)
			writel(i, g->db + VRNIC_DB_USER_PING);
		t1 = ktime_get_ns();
		after = readl(g->regs + VRNIC_REG_SCRATCH);
		g->samples[0] = div_u64(t1 - t0, nwrite);
		report("write", g->samples, 1);
		g->samples[0] = div_u64(ktime_get_ns() - t0, nwrite);
		report("write_flushed", g->samples, 1);
		if (pdev->device == STUB_DEVICE_ID) {
			after = readl(g->regs + VRNIC_REG_TEST_IRQ);
			if (after - before != nwrite) {
				pr_info("vrnic_mmio_gate: # %u of %u doorbells arrived\n",
					after - before, nwrite);
				bad = 1;
			}
		}
	}

	for (i = 0; i < nirq; i++) {
		u64 end;

		WRITE_ONCE(g->irq_at, 0);
		t0 = ktime_get_ns();
		writel(0, g->regs + VRNIC_REG_TEST_IRQ);
		end = t0 + NSEC_PER_SEC;
		while (!READ_ONCE(g->irq_at) && ktime_get_ns() < end)
			cpu_relax();
		if (!READ_ONCE(g->irq_at)) {
			pr_info("vrnic_mmio_gate: # interrupt %u never came\n", i);
			bad = 1;
			break;
		}
		g->samples[i] = READ_ONCE(g->irq_at) - t0;
	}
	report("irq", g->samples, i);
	return bad ? -EIO : 0;
}

static void time_writes(const char *what, void __iomem *db, u32 off, u32 v)
{
	u64 t0, per;
	unsigned int i;

	t0 = ktime_get_ns();
	for (i = 0; i < nwrite; i++)
		writel(v, db + off);
	per = div_u64(ktime_get_ns() - t0, nwrite);
	report(what, &per, 1);
}

static int gate_live(void)
{
	struct pci_dev *pdev;
	void __iomem *db;

	pdev = pci_get_device(VRNIC_PCI_VENDOR_ID, VRNIC_PCI_DEVICE_ID, NULL);
	if (!pdev)
		return -ENODEV;
	db = pci_iomap_range(pdev, VRNIC_DB_BAR, 0, VRNIC_DB_PAGE_SIZE);
	if (db && nwrite) {
		time_writes("write_ready", db, VRNIC_DB_USER_PING, 0);
		time_writes("doorbell_bh", db, VRNIC_DB_ETH_TX,
			    VRNIC_ETH_DB_QID_MASK << VRNIC_ETH_DB_QID_SHIFT);
	}
	if (db)
		pci_iounmap(pdev, db);
	pci_dev_put(pdev);
	pr_info("vrnic_mmio_gate: done %d\n", db ? 0 : -ENOMEM);
	return db ? -EAGAIN : -ENOMEM;
}

static int gate_probe(struct pci_dev *pdev, const struct pci_device_id *id)
{
	struct gate *g;
	int ret;

	g = devm_kzalloc(&pdev->dev, sizeof(*g), GFP_KERNEL);
	if (!g)
		return -ENOMEM;
	ret = pcim_enable_device(pdev);
	if (ret)
		return ret;
	pci_set_master(pdev);
	g->regs = pcim_iomap(pdev, VRNIC_REG_BAR, VRNIC_REG_BAR_SIZE);
	g->db = pcim_iomap(pdev, VRNIC_DB_BAR, VRNIC_DB_PAGE_SIZE);
	if (!g->regs || !g->db)
		return -ENOMEM;
	ret = pci_alloc_irq_vectors(pdev, 1, 1, PCI_IRQ_MSIX);
	if (ret < 0)
		return ret;
	ret = request_irq(pci_irq_vector(pdev, 0), gate_irq, 0, "vrnic_mmio_gate", g);
	if (ret)
		goto out_vectors;
	ret = gate_measure(pdev, g);
	kfree(g->samples);
	free_irq(pci_irq_vector(pdev, 0), g);
out_vectors:
	pci_free_irq_vectors(pdev);
	pr_info("vrnic_mmio_gate: done %d\n", ret);
	return ret;
}

static void gate_remove(struct pci_dev *pdev)
{
}

static const struct pci_device_id gate_ids[] = {
	{ PCI_DEVICE(VRNIC_PCI_VENDOR_ID, STUB_DEVICE_ID) },
	{ }
};
MODULE_DEVICE_TABLE(pci, gate_ids);

static struct pci_driver gate_driver = {
	.name = "vrnic_mmio_gate",
	.id_table = gate_ids,
	.probe = gate_probe,
	.remove = gate_remove,
};

static int __init gate_init(void)
{
	if (live)
		return gate_live();
	return pci_register_driver(&gate_driver);
}
module_init(gate_init);

static void __exit gate_exit(void)
{
	pci_unregister_driver(&gate_driver);
}
module_exit(gate_exit);

MODULE_DESCRIPTION("vrnic: BAR read, doorbell and MSI-X costs (issue 27's gate)");
MODULE_LICENSE("GPL");

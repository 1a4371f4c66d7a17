// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_modload_test: take the two modules (vrnic.ko, the PCI function,
 * and vrnic_ib.ko, the RDMA driver on its auxiliary device) away and back
 * N times, in turn in the three ways they can go:
 *   - rmmod vrnic_ib, then rmmod vrnic (vrnic0 goes first, then the
 *     netdev), then modprobe vrnic;
 *   - modprobe -r vrnic_ib, which takes vrnic along once it is unused,
 *     then modprobe vrnic;
 *   - the function first: the PCI device is unbound from vrnic while
 *     vrnic_ib is loaded (its auxiliary device goes, and vrnic0 with it),
 *     rmmod vrnic_ib, then the device is bound again.
 * Every time, vrnic_ib comes back by the auxiliary device's modalias
 * (vrnic-uevent does what udev would), and vrnic0 and the netdev with it.
 * Before the cycles, rmmod vrnic and modprobe -r vrnic while vrnic_ib uses
 * vrnic must be refused and change nothing.  The cycles must leak nothing
 * visible: unreclaimable slab and interrupt vectors return to where they
 * were, and the kernel logs no warning.
 *
 * Usage: vrnic_modload_test [cycles]   (default 20)
 */
#include "vrnic_test_util.h"

#define SLAB_SLACK_KB	2048	/* noise allowance over all cycles */

static long meminfo_kb(const char *key)
{
	char *m = vt_read_file("/proc/meminfo"), *p;
	long v = -1;

	if (m && (p = strstr(m, key)))
		v = strtol(p + strlen(key) + 1, NULL, 10);
	free(m);
	return v;
}

static int count_lines(const char *path, const char *needle)
{
	char *buf = vt_read_file(path), *p;
	int n = 0;

	for (p = buf; p && (p = strstr(p, needle)); p++)
		n++;
	free(buf);
	return n;
}

static int wait_for_device(double timeout)
{
	double end = vt_now() + timeout;

	while (vt_now() < end) {
		if (!access("/sys/class/infiniband/vrnic0", F_OK) &&
		    !system("vrnic-netdev >/dev/null"))
			return 0;
		usleep(20000);
	}
	return -1;
}

static int module_loaded(const char *name)
{
	char *mods = vt_read_file("/proc/modules");
	char key[64];
	int found;

	snprintf(key, sizeof(key), "\n%s ", name);
	found = mods && (!strncmp(mods, key + 1, strlen(key + 1)) ||
			 strstr(mods, key));
	free(mods);
	return found;
}

static int ib_gone(void)
{
	return access("/sys/class/infiniband/vrnic0", F_OK) &&
	       !module_loaded("vrnic_ib");
}

static int netdev_there(void)
{
	return !system("vrnic-netdev >/dev/null");
}

static char bdf[64];	/* the vrnic PCI function */

static int find_bdf(void)
{
	char *out = NULL;
	int rc = vt_run(&out, 0, "cd /sys/bus/pci/drivers/vrnic && ls -d 0000:*");

	if (!rc && out && sscanf(out, "%63s", bdf) == 1) {
		free(out);
		return 0;
	}
	free(out);
	return -1;
}

static int cycle(int i)
{
	switch (i % 3) {
	case 0:		/* the RDMA driver first, then the function */
		if (system("rmmod vrnic_ib") || !ib_gone() || !netdev_there())
			return -1;
		if (system("rmmod vrnic") || module_loaded("vrnic") ||
		    netdev_there())
			return -1;
		if (system("modprobe vrnic"))
			return -1;
		break;
	case 1:		/* both with one command */
		if (system("modprobe -r vrnic_ib") || !ib_gone() ||
		    module_loaded("vrnic") || netdev_there())
			return -1;
		if (system("modprobe vrnic"))
			return -1;
		break;
	default:	/* the function's device first, vrnic_ib still loaded */
		if (vt_run(NULL, 0, "echo %s > /sys/bus/pci/drivers/vrnic/unbind",
			   bdf) ||
		    !access("/sys/class/infiniband/vrnic0", F_OK) ||
		    !module_loaded("vrnic_ib") || netdev_there())
			return -1;
		if (system("rmmod vrnic_ib") || !ib_gone())
			return -1;
		if (vt_run(NULL, 0, "echo %s > /sys/bus/pci/drivers/vrnic/bind",
			   bdf))
			return -1;
		break;
	}
	return wait_for_device(30);
}

/* vrnic_ib uses vrnic's symbols: vrnic alone cannot be unloaded. */
static int refused_while_used(void)
{
	return system("rmmod vrnic 2>/dev/null") &&
	       system("modprobe -r vrnic 2>/dev/null") &&
	       module_loaded("vrnic") && module_loaded("vrnic_ib") &&
	       !wait_for_device(5);
}

static int count_warnings(void)
{
	char *log = vt_dmesg(), *p;
	int n = 0;
	const char *bad[] = { "WARNING:", "BUG:", "Oops", "leak", "refcount_t" };

	for (size_t i = 0; log && i < sizeof(bad) / sizeof(bad[0]); i++)
		for (p = log; (p = strstr(p, bad[i])); p++)
			n++;
	free(log);
	return n;
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 20;
	long slab0, slab1;
	int irq0, irq1, warn0, warn1, i, ok = 1;

	ksft_print_header();
	ksft_set_plan(5);
	if (wait_for_device(30))
		ksft_exit_fail_msg("vrnic0 is not there to start with\n");
	if (find_bdf())
		ksft_exit_fail_msg("no PCI device bound to vrnic\n");
	ksft_test_result(refused_while_used(),
			 "rmmod/modprobe -r vrnic refused while vrnic_ib uses it\n");

	/* Warm-up cycles, one of each kind, fill caches that are not leaks. */
	for (i = 0; i < 3; i++)
		if (cycle(i))
			ksft_exit_fail_msg("warm-up cycle %d failed\n", i + 1);
	system("sync; echo 3 > /proc/sys/vm/drop_caches");
	slab0 = meminfo_kb("SUnreclaim:");
	irq0 = count_lines("/proc/interrupts", "vrnic-");
	warn0 = count_warnings();

	for (i = 0; i < cycles && ok; i++)
		if (cycle(i)) {
			ok = 0;
			ksft_print_msg("cycle %d failed\n", i + 1);
		}
	ksft_test_result(ok, "unload/reload x%d, both orders: vrnic0 and its netdev come back\n",
			 cycles);

	system("sync; echo 3 > /proc/sys/vm/drop_caches");
	slab1 = meminfo_kb("SUnreclaim:");
	irq1 = count_lines("/proc/interrupts", "vrnic-");
	warn1 = count_warnings();
	ksft_print_msg("SUnreclaim %ld kB -> %ld kB, vrnic irqs %d -> %d\n",
		       slab0, slab1, irq0, irq1);
	ksft_test_result(slab1 - slab0 < SLAB_SLACK_KB,
			 "unreclaimable slab grew %ld kB over %d cycles (< %d)\n",
			 slab1 - slab0, cycles, SLAB_SLACK_KB);
	ksft_test_result(irq0 > 0 && irq0 == irq1,
			 "interrupt vectors released and re-taken (%d)\n", irq1);
	ksft_test_result(warn1 == warn0, "no kernel warnings during the cycles\n");
	ksft_finished();
}

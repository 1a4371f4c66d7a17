// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_modload_test: rmmod/modprobe vrnic N times.  Every cycle must bring
 * vrnic0 and its netdev back, and the cycles must leak nothing visible:
 * unreclaimable slab, interrupt vectors and module references return to
 * where they were, and the kernel logs no warning.
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

static int cycle(void)
{
	if (system("rmmod vrnic") || !access("/sys/class/infiniband/vrnic0", F_OK))
		return -1;
	if (system("modprobe vrnic"))
		return -1;
	return wait_for_device(30);
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
	ksft_set_plan(4);
	if (wait_for_device(30))
		ksft_exit_fail_msg("vrnic0 is not there to start with\n");

	/* One warm-up cycle fills caches that are not leaks. */
	if (cycle())
		ksft_exit_fail_msg("warm-up cycle failed\n");
	system("sync; echo 3 > /proc/sys/vm/drop_caches");
	slab0 = meminfo_kb("SUnreclaim:");
	irq0 = count_lines("/proc/interrupts", "vrnic-");
	warn0 = count_warnings();

	for (i = 0; i < cycles && ok; i++)
		if (cycle()) {
			ok = 0;
			ksft_print_msg("cycle %d failed\n", i + 1);
		}
	ksft_test_result(ok, "rmmod/modprobe x%d: vrnic0 and its netdev come back\n",
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

// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_ping_test: 1000 pings to the peer VM over the vrnic netdevs with
 * full-size, unfragmented packets for the current MTU; no loss allowed.
 * The harness sets the MTU on both VMs first.
 *
 * Usage: vrnic_ping_test <peer ipv4> <mtu> [count]
 */
#include "vrnic_test_util.h"

int main(int argc, char **argv)
{
	int mtu, count, tx = -1, rx = -1, rc;
	char *out = NULL, *p;

	if (argc < 3)
		ksft_exit_fail_msg("usage: %s <peer> <mtu> [count]\n", argv[0]);
	mtu = atoi(argv[2]);
	count = argc > 3 ? atoi(argv[3]) : 1000;
	ksft_print_header();
	ksft_set_plan(1);
	/* -f paces by replies; -W bounds a lost reply; -M do forbids
	 * fragmentation, so every request is one full MTU frame.
	 */
	rc = vt_run(&out, 0, "ping -q -f -c %d -W 2 -M do -s %d %s 2>&1",
		    count, mtu - 28, argv[1]);
	p = strstr(out, "packets transmitted");
	if (p) {
		while (p > out && p[-1] != '\n')
			p--;
		sscanf(p, "%d packets transmitted, %d received", &tx, &rx);
	}
	ksft_print_msg("%s", out);
	ksft_test_result(rc == 0 && tx == count && rx == count,
			 "ping %s MTU %d: %d/%d replies, 0%% loss\n", argv[1], mtu,
			 rx, count);
	free(out);
	ksft_finished();
}

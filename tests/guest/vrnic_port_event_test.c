// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_port_event_test: the link of the vrnic NIC is taken down and up
 * from outside (QEMU set_link, driven by the harness).  The device reports
 * it on its async EQ and the driver turns it into IB port events, seen
 * here through libibverbs' async event channel.
 *
 * The test writes /tmp/port_event.ready once it listens, then waits (at
 * most 120 s) for PORT_ERR followed by PORT_ACTIVE.
 */
#include <poll.h>
#include <infiniband/verbs.h>

#include "vrnic_test_util.h"

static int wait_event(struct ibv_context *ctx, enum ibv_event_type want,
		      double timeout)
{
	double end = vt_now() + timeout;
	struct ibv_async_event ev;

	while (vt_now() < end) {
		struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
		int got;

		if (poll(&pfd, 1, 500) <= 0)
			continue;
		if (ibv_get_async_event(ctx, &ev))
			return -1;
		got = ev.event_type;
		ibv_ack_async_event(&ev);
		ksft_print_msg("async event: %s\n", ibv_event_type_str(got));
		if (got == (int)want)
			return 0;
	}
	return -1;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct ibv_context *ctx = NULL;
	int n, i, flags, down, up;
	FILE *f;

	ksft_print_header();
	ksft_set_plan(2);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "vrnic0"))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	flags = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK);

	f = fopen("/tmp/port_event.ready", "w");
	if (f)
		fclose(f);

	down = !wait_event(ctx, IBV_EVENT_PORT_ERR, 120) &&
	       !ibv_query_port(ctx, 1, &pa) && pa.state == IBV_PORT_DOWN;
	ksft_test_result(down, "link down: IBV_EVENT_PORT_ERR, port DOWN\n");
	up = !wait_event(ctx, IBV_EVENT_PORT_ACTIVE, 120) &&
	     !ibv_query_port(ctx, 1, &pa) && pa.state == IBV_PORT_ACTIVE;
	ksft_test_result(up, "link up: IBV_EVENT_PORT_ACTIVE, port ACTIVE\n");
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	ksft_finished();
}

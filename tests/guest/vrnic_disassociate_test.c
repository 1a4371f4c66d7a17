// SPDX-License-Identifier: GPL-2.0
/*
 * vrnic_disassociate_test: the PCI function is removed (unbound from
 * vrnic) while this process holds a user context with a PD, an MR, a CQ,
 * an RC QP and its mapped doorbell page.  Review B.8 / issue 14: without
 * .disassociate_ucontext, ib_unregister_device waits for every user
 * context to be closed, so the removal blocks until the process exits.
 * With it, the removal returns, the process gets IBV_EVENT_DEVICE_FATAL,
 * can still tear down what it holds, and the device comes back on rebind.
 *
 * The removal runs in a child, so a blocked removal fails the test
 * instead of hanging it: the parent then closes its context, which lets
 * the removal finish, and rebinds the device either way.
 */
#include <poll.h>
#include <sys/wait.h>
#include <infiniband/verbs.h>

#include "vrnic_test_util.h"

#define REMOVE_TIMEOUT	60.0	/* s; a blocked removal never returns */

static char bdf[64];

static int find_bdf(void)
{
	char *out = NULL;
	int rc = vt_run(&out, 0, "cd /sys/bus/pci/drivers/vrnic && ls -d 0000:*");

	rc = rc || !out || sscanf(out, "%63s", bdf) != 1;
	free(out);
	return rc ? -1 : 0;
}

static int wait_child(pid_t pid, double timeout, int *status)
{
	double end = vt_now() + timeout;

	while (vt_now() < end) {
		if (waitpid(pid, status, WNOHANG) == pid)
			return 0;
		usleep(50000);
	}
	return -1;
}

static int wait_fatal(struct ibv_context *ctx, double timeout)
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
		if (got == IBV_EVENT_DEVICE_FATAL)
			return 0;
	}
	return -1;
}

static int count_warnings(void)
{
	char *log = vt_dmesg(), *p;
	int n = 0;
	const char *bad[] = { "WARNING:", "BUG:", "Oops", "refcount_t" };

	for (size_t i = 0; log && i < sizeof(bad) / sizeof(bad[0]); i++)
		for (p = log; (p = strstr(p, bad[i])); p++)
			n++;
	free(log);
	return n;
}

int main(void)
{
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_context *ctx = NULL;
	struct ibv_device **list;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int n, i, status = -1, removed, fatal, warn0, back = 0;
	double t0;
	void *buf;
	pid_t pid;

	ksft_print_header();
	ksft_set_plan(4);
	if (find_bdf())
		ksft_exit_fail_msg("no PCI device bound to vrnic\n");
	warn0 = count_warnings();
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "vrnic0"))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		ksft_exit_fail_msg("cannot open vrnic0\n");
	buf = calloc(1, 4096);
	pd = ibv_alloc_pd(ctx);
	mr = pd && buf ? ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qp = pd && cq ? ibv_create_qp(pd, &qa) : NULL;
	if (!mr || !qp)
		ksft_exit_fail_msg("cannot create PD/MR/CQ/QP: %s\n",
				   strerror(errno));

	fflush(stdout);
	pid = fork();
	if (pid < 0)
		ksft_exit_fail_msg("fork: %s\n", strerror(errno));
	if (pid == 0) {
		/* The child must not hold the uverbs file open itself. */
		for (i = 3; i < 1024; i++)
			close(i);
		_exit(vt_run(NULL, 0,
			     "echo %s > /sys/bus/pci/drivers/vrnic/unbind",
			     bdf));
	}
	t0 = vt_now();
	removed = !wait_child(pid, REMOVE_TIMEOUT, &status);
	ksft_test_result(removed && WIFEXITED(status) && !WEXITSTATUS(status),
			 "PCI remove returns with a live user context (%.1f s)\n",
			 vt_now() - t0);
	fatal = removed && !wait_fatal(ctx, 10);
	ksft_test_result(fatal, "the process gets IBV_EVENT_DEVICE_FATAL\n");

	/* Tear down what the process holds: on a dead device too. */
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(mr);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	free(buf);
	if (!removed && wait_child(pid, REMOVE_TIMEOUT, &status))
		ksft_print_msg("the removal is still blocked\n");

	vt_run(NULL, 1, "echo %s > /sys/bus/pci/drivers/vrnic/bind", bdf);
	for (t0 = vt_now(); vt_now() < t0 + 30 && !back; usleep(100000))
		back = !access("/sys/class/infiniband/vrnic0", F_OK);
	ksft_test_result(back, "vrnic0 is back after the rebind\n");
	ksft_test_result(count_warnings() == warn0,
			 "no kernel warnings\n");
	ksft_finished();
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * What the provider (userspace/) owes libibverbs and the application, from
 * the second review's Part 1 (issue 23, "Provider (Part C)"), against the
 * stub kernel and device (stub.c):
 *
 * 1. A create whose ring libibverbs cannot protect from fork
 *    (ibv_dontfork_range() returns -1) fails with madvise's errno, or
 *    ENOMEM when none is set: a positive errno, never -1.  Nothing stays
 *    protected.
 *
 * Built with AddressSanitizer and UBSan (tsan.py).  Output: TAP.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "stub.h"

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static int test_no;
static int failures;			/* in the current test */

static void check(int ok, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void check(int ok, const char *fmt, ...)
{
	va_list ap;

	if (ok)
		return;
	failures++;
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void result(const char *name)
{
	printf("%sok %d - %s\n", failures ? "not " : "", ++test_no, name);
	failures = 0;
}

/* A fresh context and PD: no doorbell record page in its pool yet. */
static bool open_ctx(void)
{
	ctx = stub_open_device();
	pd = ctx ? ibv_alloc_pd(ctx) : NULL;
	if (!pd)
		printf("Bail out! no context or PD on the stub: %s\n",
		       strerror(errno));
	return pd;
}

static void close_ctx(void)
{
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
}

static struct ibv_qp *create_qp(struct ibv_cq *cq, uint32_t send_wr)
{
	struct ibv_qp_init_attr a = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = send_wr, .max_send_sge = 1,
			.max_recv_wr = 4, .max_recv_sge = 1,
		},
	};

	return ibv_create_qp(pd, &a);
}

/* ------------------------------------------------------- 1. dontfork */

/*
 * Create what (a CQ, an SRQ, or a QP on a CQ made first) while the nth
 * ibv_dontfork_range() call fails with err: errno must be want.
 */
static void fail_create(const char *what, unsigned int nth, int err, int want)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	bool qp = !strcmp(what, "QP");
	struct ibv_cq *cq = NULL;
	void *obj = NULL;
	long ranges;

	if (!open_ctx())
		exit(1);
	if (qp) {
		cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
		check(cq != NULL, "QP: no CQ: %s", strerror(errno));
	}
	ranges = stub_dontfork_ranges();
	stub_fail_dontfork(nth, err);
	errno = 0;
	if (!strcmp(what, "CQ"))
		obj = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	else if (!strcmp(what, "SRQ"))
		obj = ibv_create_srq(pd, &sa);
	else if (cq)
		obj = create_qp(cq, 4);
	stub_fail_dontfork(0, 0);
	check(!obj, "%s: created although ibv_dontfork_range() failed", what);
	check(errno == want, "%s, dontfork call %u fails (errno %d set): "
	      "errno %d (%s), want %d", what, nth, err, errno,
	      errno > 0 ? strerror(errno) : "not an errno", want);
	check(stub_dontfork_ranges() == ranges,
	      "%s: %ld ranges left protected", what,
	      stub_dontfork_ranges() - ranges);
	if (cq)
		ibv_destroy_cq(cq);
	close_ctx();
}

static void test_dontfork(void)
{
	/* The ring; then the doorbell record page (a fresh pool). */
	fail_create("CQ", 1, EAGAIN, EAGAIN);
	fail_create("CQ", 2, EAGAIN, EAGAIN);
	fail_create("CQ", 1, 0, ENOMEM);
	fail_create("SRQ", 1, EPERM, EPERM);
	/* SQ ring, RQ ring (the CQ's page holds the record). */
	fail_create("QP", 1, EAGAIN, EAGAIN);
	fail_create("QP", 2, EINVAL, EINVAL);
	fail_create("QP", 2, 0, ENOMEM);
	result("ibv_dontfork_range() failing: a positive errno (madvise's, "
	       "or ENOMEM), nothing left protected");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("1..1\n");
	test_dontfork();
	return 0;
}

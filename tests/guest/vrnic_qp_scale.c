// SPDX-License-Identifier: GPL-2.0
/*
 * One process creates N RC QPs and destroys them (issue 29): more than the
 * 2^16 QP slots the device had, so QP numbers past 16 bits of index.
 *
 * The QPs share one PD, one CQ and one SRQ (the shape of a server with a
 * QP per peer), each with a one-entry SQ.  The program checks that
 * ibv_query_device's max_qp covers N, that every QP number is distinct,
 * that the last QP made still moves to INIT (its handle works), and that
 * every destroy succeeds; it prints the time to create and to destroy,
 * the first and the last thousand creates apart (the millionth create
 * must cost about what the first did), and what the QPs cost the guest:
 * MemAvailable before and with them, per QP.
 *
 * Usage: vrnic_qp_scale [n [device]]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vrnic_verbs_util.h"

#define BATCH	1000

/* MemAvailable from /proc/meminfo, in KiB; 0 if unreadable. */
static long mem_available_kib(void)
{
	char *s = vt_read_file("/proc/meminfo");
	char *p = s ? strstr(s, "MemAvailable:") : NULL;
	long kib = p ? strtol(p + strlen("MemAvailable:"), NULL, 10) : 0;

	free(s);
	return kib;
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100000;
	const char *name = argc > 2 ? argv[2] : "vrnic0";
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_send_sge = 1 },
	};
	struct vt_path path = { .access = IBV_ACCESS_LOCAL_WRITE };
	double t0, t_first = 0, t_last = 0, t_made, t_gone;
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	struct ibv_qp **qps;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	long avail0, avail1;
	uint32_t *nums;
	int i, made = 0, past16 = 0, dup = 0, gone = 0;

	if (n < 2 * BATCH)
		n = 2 * BATCH;
	ksft_print_header();
	ksft_set_plan(4);
	ctx = vt_open_device(name);
	if (!ctx)
		ksft_exit_fail_msg("cannot open %s\n", name);
	if (ibv_query_device(ctx, &da))
		ksft_exit_fail_msg("query_device: %s\n", strerror(errno));
	ksft_test_result(da.max_qp >= n, "max_qp %d covers %d QPs\n",
			 da.max_qp, n);
	qps = calloc(n, sizeof(*qps));
	nums = calloc(n, sizeof(*nums));
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	srq = pd ? ibv_create_srq(pd, &sa) : NULL;
	if (!qps || !nums || !cq || !srq)
		ksft_exit_fail_msg("setup: %s\n", strerror(errno));
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.srq = srq;

	avail0 = mem_available_kib();
	t0 = vt_now();
	for (i = 0; i < n; i++) {
		qps[i] = ibv_create_qp(pd, &qa);
		if (!qps[i]) {
			ksft_print_msg("create_qp %d: %s\n", i, strerror(errno));
			break;
		}
		nums[i] = qps[i]->qp_num;
		past16 += (qps[i]->qp_num & 0xfffff) > 0xffff;
		made++;
		if (i + 1 == BATCH)
			t_first = vt_now() - t0;
		if (i == n - BATCH)
			t_last = vt_now();
	}
	t_made = vt_now() - t0;
	if (made == n)
		t_last = vt_now() - t_last;
	avail1 = mem_available_kib();
	qsort(nums, made, sizeof(*nums), cmp_u32);
	for (i = 1; i < made; i++)
		dup += nums[i] == nums[i - 1];
	ksft_print_msg("%d QPs created in %.1f s (%.0f us each); the first %d in %.2f s, the last %d in %.2f s\n",
		       made, t_made, made ? t_made * 1e6 / made : 0.0, BATCH,
		       t_first, BATCH, t_last);
	ksft_print_msg("guest memory: MemAvailable %ld KiB before, %ld KiB with them: %.0f B per QP\n",
		       avail0, avail1,
		       made ? (avail0 - avail1) * 1024.0 / made : 0.0);
	ksft_test_result(made == n && !dup && (n <= 65534 || past16 > 0),
			 "%d of %d RC QPs created, numbers distinct, %d past 16 bits of index\n",
			 made, n, past16);
	ksft_test_result(made == n && !vt_to_init(qps[n - 1], &path),
			 "the last QP made (0x%x) moves to INIT\n",
			 made == n ? qps[n - 1]->qp_num : 0);
	t0 = vt_now();
	for (i = 0; i < made; i++)
		gone += !ibv_destroy_qp(qps[i]);
	t_gone = vt_now() - t0;
	ksft_print_msg("%d QPs destroyed in %.1f s\n", gone, t_gone);
	ksft_test_result(gone == made && !ibv_destroy_srq(srq) &&
			 !ibv_destroy_cq(cq) && !ibv_dealloc_pd(pd),
			 "every QP destroyed, then the SRQ, CQ and PD\n");
	ibv_close_device(ctx);
	free(nums);
	free(qps);
	ksft_finished();
	return 0;
}

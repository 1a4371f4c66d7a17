// SPDX-License-Identifier: GPL-2.0
/*
 * MPI collectives across the test VMs (issue 16): MPI_Allreduce,
 * MPI_Alltoall and MPI_Bcast from 8 B to 32 MiB, every element of every
 * result checked.  Built on the host with mpicc (libopenmpi-dev, Open MPI
 * 4.1 as in the guest image) and run by tests/system/middleware.py with
 * mpirun across the two VMs.
 *
 *   vrnic_mpi_collectives              check mode: one line per size and
 *                                      collective, then "RESULT PASS" or
 *                                      "RESULT FAIL"; exit 1 on any mismatch
 *   vrnic_mpi_collectives --bench N SIZE[:ITERS]...
 *                                      MPI_Allreduce timing (make bench):
 *                                      N (or ITERS) iterations per SIZE
 *                                      (bytes), the slowest rank's average,
 *                                      bus bandwidth 2 * (n - 1) / n * bytes
 *                                      / time; the last result is checked
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_BYTES	8UL
#define MAX_BYTES	(32UL << 20)
#define MAX_ITERS	100000L
#define MAX_REPORTS	4	/* mismatches printed per check */

static int rank, nranks;

static unsigned int reduce_in(size_t i, int r)
{
	return (unsigned int)(i * 7 + (size_t)r);
}

static unsigned int alltoall_in(size_t i, int r)
{
	return (unsigned int)((size_t)r * 1000003 + i);
}

static unsigned int bcast_in(size_t i)
{
	return (unsigned int)(i ^ 0x5a5a5a5aUL);
}

static long report(const char *what, size_t bytes, size_t i,
		   unsigned int got, unsigned int want, long bad)
{
	if (bad < MAX_REPORTS)
		fprintf(stderr,
			"rank %d: %s %zu B: element %zu is %u, expected %u\n",
			rank, what, bytes, i, got, want);
	return bad + 1;
}

static long check_allreduce(const unsigned int *r, size_t n, size_t bytes)
{
	unsigned int want;
	long bad = 0;
	size_t i;
	int k;

	for (i = 0; i < n; i++) {
		want = 0;
		for (k = 0; k < nranks; k++)
			want += reduce_in(i, k);
		if (r[i] != want)
			bad = report("allreduce", bytes, i, r[i], want, bad);
	}
	return bad;
}

static long run_allreduce(unsigned int *s, unsigned int *r, size_t n,
			  size_t bytes)
{
	size_t i;

	for (i = 0; i < n; i++) {
		s[i] = reduce_in(i, rank);
		r[i] = 0xdeadbeef;
	}
	if (MPI_Allreduce(s, r, (int)n, MPI_UNSIGNED, MPI_SUM,
			  MPI_COMM_WORLD) != MPI_SUCCESS)
		return 1;
	return check_allreduce(r, n, bytes);
}

static long run_alltoall(unsigned int *s, unsigned int *r, size_t n,
			 size_t bytes)
{
	size_t per = n / (size_t)nranks, i, src, off;
	unsigned int want;
	long bad = 0;

	if (!per)
		return 0;
	for (i = 0; i < per * (size_t)nranks; i++) {
		s[i] = alltoall_in(i, rank);
		r[i] = 0xdeadbeef;
	}
	if (MPI_Alltoall(s, (int)per, MPI_UNSIGNED, r, (int)per, MPI_UNSIGNED,
			 MPI_COMM_WORLD) != MPI_SUCCESS)
		return 1;
	/* Block src of r is block `rank` of src's send buffer. */
	for (i = 0; i < per * (size_t)nranks; i++) {
		src = i / per;
		off = i % per;
		want = alltoall_in((size_t)rank * per + off, (int)src);
		if (r[i] != want)
			bad = report("alltoall", bytes, i, r[i], want, bad);
	}
	return bad;
}

static long run_bcast(unsigned int *s, size_t n, size_t bytes)
{
	long bad = 0;
	size_t i;

	for (i = 0; i < n; i++)
		s[i] = rank == 0 ? bcast_in(i) : 0xdeadbeef;
	if (MPI_Bcast(s, (int)n, MPI_UNSIGNED, 0, MPI_COMM_WORLD) !=
	    MPI_SUCCESS)
		return 1;
	for (i = 0; i < n; i++)
		if (s[i] != bcast_in(i))
			bad = report("bcast", bytes, i, s[i], bcast_in(i), bad);
	return bad;
}

/* Sum of a count over all ranks, so that every rank agrees on the verdict. */
static long all_sum(long v)
{
	long sum = 0;

	MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
	return sum;
}

static int check_mode(unsigned int *s, unsigned int *r)
{
	static const char * const names[] = { "allreduce", "alltoall",
					      "bcast" };
	long bad, total = 0;
	size_t bytes, n;
	double t0;
	int c;

	for (bytes = MIN_BYTES; bytes <= MAX_BYTES; bytes *= 4) {
		n = bytes / sizeof(*s);
		for (c = 0; c < 3; c++) {
			MPI_Barrier(MPI_COMM_WORLD);
			t0 = MPI_Wtime();
			if (c == 0)
				bad = run_allreduce(s, r, n, bytes);
			else if (c == 1)
				bad = run_alltoall(s, r, n, bytes);
			else
				bad = run_bcast(s, n, bytes);
			bad = all_sum(bad);
			total += bad;
			if (rank == 0)
				printf("%-9s %9zu B: %s (%.3f s, %zu elements checked per rank)\n",
				       names[c], bytes,
				       bad ? "MISMATCH" : "ok",
				       MPI_Wtime() - t0, n);
			fflush(stdout);
		}
	}
	if (rank == 0)
		printf("RESULT %s (%d ranks)\n", total ? "FAIL" : "PASS",
		       nranks);
	return total ? 1 : 0;
}

static int bench_mode(unsigned int *s, unsigned int *r, long iters,
		      char **sizes, int nsizes)
{
	double t, slowest, busbw;
	long bad = 0, it, n_it;
	size_t bytes, n, i;
	char *end;
	int k;

	for (k = 0; k < nsizes; k++) {
		bytes = strtoul(sizes[k], &end, 0);
		n_it = *end == ':' ? strtol(end + 1, NULL, 0) : iters;
		if (bytes < sizeof(*s) || bytes > MAX_BYTES || n_it < 1 ||
		    n_it > MAX_ITERS) {
			if (rank == 0)
				fprintf(stderr, "bad size or count: %s\n",
					sizes[k]);
			return 2;
		}
		n = bytes / sizeof(*s);
		bytes = n * sizeof(*s);
		for (i = 0; i < n; i++)
			s[i] = reduce_in(i, rank);
		/* One untimed round to set up the connections. */
		MPI_Allreduce(s, r, (int)n, MPI_UNSIGNED, MPI_SUM,
			      MPI_COMM_WORLD);
		MPI_Barrier(MPI_COMM_WORLD);
		t = MPI_Wtime();
		for (it = 0; it < n_it; it++)
			MPI_Allreduce(s, r, (int)n, MPI_UNSIGNED, MPI_SUM,
				      MPI_COMM_WORLD);
		t = (MPI_Wtime() - t) / (double)n_it;
		MPI_Reduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0,
			   MPI_COMM_WORLD);
		bad += all_sum(check_allreduce(r, n, bytes));
		busbw = 2.0 * (nranks - 1) / nranks * (double)bytes;
		if (rank == 0)
			printf("BENCH allreduce %zu B: %ld iters avg %.2f us busbw %.3f MiB/s%s\n",
			       bytes, n_it, slowest * 1e6,
			       busbw / slowest / (1 << 20),
			       bad ? " MISMATCH" : "");
		fflush(stdout);
	}
	if (rank == 0)
		printf("RESULT %s (%d ranks)\n", bad ? "FAIL" : "PASS",
		       nranks);
	return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	unsigned int *s, *r;
	long iters = 0;
	int ret;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc > 1 && strcmp(argv[1], "--bench") == 0) {
		if (argc > 2)
			iters = strtol(argv[2], NULL, 0);
		if (argc < 4 || iters < 1 || iters > MAX_ITERS) {
			if (rank == 0)
				fprintf(stderr,
					"usage: %s [--bench ITERS SIZE...]\n",
					argv[0]);
			MPI_Finalize();
			return 2;
		}
	}
	s = malloc(MAX_BYTES);
	r = malloc(MAX_BYTES);
	if (!s || !r) {
		fprintf(stderr, "rank %d: out of memory\n", rank);
		MPI_Abort(MPI_COMM_WORLD, 1);
		return 1;
	}
	if (iters)
		ret = bench_mode(s, r, iters, argv + 3, argc - 3);
	else
		ret = check_mode(s, r);
	free(s);
	free(r);
	MPI_Finalize();
	return ret;
}

// SPDX-License-Identifier: GPL-2.0
/*
 * UCX client-server wire-up by socket address (issue 16): the server
 * listens with ucp_listener_create() on an IP address, the client creates
 * its endpoint from that address (UCP_EP_PARAMS_FLAGS_CLIENT_SERVER), so
 * UCX connects through a connection manager (rdmacm when
 * UCX_SOCKADDR_TLS_PRIORITY=rdmacm) instead of exchanging worker
 * addresses out of band.  Then tagged messages of 8 B..1 MiB go to the
 * server and back; both sides check every byte.
 *
 *   vrnic_ucx_sockaddr -l IP [-p PORT]     server: prints "listening"
 *   vrnic_ucx_sockaddr -c IP [-p PORT]     client: prints the endpoint's
 *                                          lanes (ucp_ep_print_info)
 * With -n EPS (client), many endpoints (issue 29): the client gets the
 * server's worker address over that first endpoint and opens EPS more
 * endpoints to it with ucp_ep_create(), each with its own RC QPs over
 * rc_verbs.  Each endpoint carries a 64 B (eager) and a 64 KiB
 * (rendezvous) message, all in flight at once; the server checks every
 * byte of all of them.  -w SECONDS: the client then prints "holding" and
 * keeps the endpoints open that long (progressing), for the harness to
 * count the QPs.
 *
 * Each prints "RESULT PASS" or "RESULT FAIL"; exit 1 on any failure.  Every
 * wait is bounded (TIMEOUT_S for the whole run, plus a second per 4
 * endpoints).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <ucp/api/ucp.h>

#define TIMEOUT_S	90
#define MAX_SIZE	1048576UL
#define ROUNDS		3	/* messages per size */
#define TAG_DATA	0x1000ULL
#define TAG_ECHO	0x2000ULL
#define TAG_DONE	0x3000ULL
#define TAG_MANY_N	0x4000ULL
#define TAG_ADDR_LEN	0x5000ULL
#define TAG_ADDR	0x6000ULL
#define TAG_MANY	(1ULL << 32)	/* | endpoint << 1 | big */
#define MAX_EPS		4096
#define SMALL		64UL
#define BIG		65536UL
#define MAX_ADDR	65536UL
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static const size_t sizes[] = { 8, 64, 512, 4096, 8192, 65536, 262144,
				 MAX_SIZE };
static ucp_worker_h worker;
static ucp_listener_h listener;
static ucp_conn_request_h conn_request;
static time_t deadline;
static int peer_error;

static int expired(void)
{
	if (time(NULL) <= deadline)
		return 0;
	fprintf(stderr, "timed out after %d s\n", TIMEOUT_S);
	return 1;
}

static unsigned char pattern(size_t i, size_t size, int round)
{
	return (unsigned char)(i * 31 + size + (size_t)round * 7);
}

static void fill(unsigned char *buf, size_t size, int round)
{
	size_t i;

	for (i = 0; i < size; i++)
		buf[i] = pattern(i, size, round);
}

static long check(const char *who, const unsigned char *buf, size_t size,
		  int round)
{
	long bad = 0;
	size_t i;

	for (i = 0; i < size; i++) {
		if (buf[i] == pattern(i, size, round))
			continue;
		if (!bad)
			fprintf(stderr, "%s: %zu B round %d: byte %zu is 0x%02x, expected 0x%02x\n",
				who, size, round, i, buf[i],
				pattern(i, size, round));
		bad++;
	}
	return bad;
}

/* Progress until the request completes; 0 on success. */
static int wait_req(void *req, const char *what)
{
	ucs_status_t st;

	if (!req)
		return 0;
	if (UCS_PTR_IS_ERR(req)) {
		fprintf(stderr, "%s: %s\n", what,
			ucs_status_string(UCS_PTR_STATUS(req)));
		return -1;
	}
	while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS) {
		ucp_worker_progress(worker);
		if (expired()) {
			ucp_request_cancel(worker, req);
			while (ucp_request_check_status(req) == UCS_INPROGRESS)
				ucp_worker_progress(worker);
			ucp_request_free(req);
			return -1;
		}
	}
	ucp_request_free(req);
	if (st != UCS_OK) {
		fprintf(stderr, "%s: %s\n", what, ucs_status_string(st));
		return -1;
	}
	return 0;
}

/* Progress until every request of reqs completes; 0 if all succeeded. */
static int wait_all(void **reqs, size_t n, const char *what)
{
	int ret = 0;
	size_t i;

	for (i = 0; i < n; i++)
		if (wait_req(reqs[i], what))
			ret = -1;
	return ret;
}

static int send_msg(ucp_ep_h ep, void *buf, size_t size, ucp_tag_t tag)
{
	ucp_request_param_t param = { 0 };

	return wait_req(ucp_tag_send_nbx(ep, buf, size, tag, &param),
			"ucp_tag_send_nbx");
}

static int recv_msg(void *buf, size_t size, ucp_tag_t tag)
{
	ucp_request_param_t param = { 0 };

	return wait_req(ucp_tag_recv_nbx(worker, buf, size, tag, (ucp_tag_t)-1,
					 &param), "ucp_tag_recv_nbx");
}

static void on_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
	(void)arg;
	(void)ep;
	fprintf(stderr, "peer error: %s\n", ucs_status_string(status));
	peer_error = 1;
}

static void on_conn(ucp_conn_request_h req, void *arg)
{
	(void)arg;
	if (conn_request)
		ucp_listener_reject(listener, req);	/* one client only */
	else
		conn_request = req;
}

static void close_ep(ucp_ep_h ep, int force)
{
	ucp_request_param_t param = {
		.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
		.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0,
	};
	void *req = ucp_ep_close_nbx(ep, &param);

	if (req && !UCS_PTR_IS_ERR(req))
		wait_req(req, "ucp_ep_close_nbx");
}

static ucp_tag_t many_tag(size_t i, int big)
{
	return TAG_MANY | (ucp_tag_t)i << 1 | (ucp_tag_t)big;
}

/*
 * The server's side of -n: the count, its worker address out, then every
 * endpoint's two messages received (on endpoints UCX made for the
 * client's) and checked.  bad counts the bytes that differ.
 */
static int many_server(ucp_ep_h ep, long *bad)
{
	ucp_request_param_t param = { 0 };
	ucp_address_t *addr;
	uint64_t n, len;
	unsigned char *bufs;
	void **reqs;
	size_t addr_len, i;
	int ret = -1;

	if (recv_msg(&n, sizeof(n), TAG_MANY_N))
		return -1;
	if (!n)
		return 0;
	if (n > MAX_EPS) {
		fprintf(stderr, "server: %lu endpoints asked, at most %d\n",
			(unsigned long)n, MAX_EPS);
		return -1;
	}
	deadline += (time_t)n / 4;	/* the client's allowance */
	if (ucp_worker_get_address(worker, &addr, &addr_len) != UCS_OK) {
		fprintf(stderr, "ucp_worker_get_address failed\n");
		return -1;
	}
	len = addr_len;
	bufs = calloc(n, SMALL + BIG);
	reqs = calloc(2 * n, sizeof(*reqs));
	if (!bufs || !reqs || send_msg(ep, &len, sizeof(len), TAG_ADDR_LEN) ||
	    send_msg(ep, addr, addr_len, TAG_ADDR))
		goto out;
	for (i = 0; i < n; i++) {
		unsigned char *b = bufs + i * (SMALL + BIG);

		reqs[2 * i] = ucp_tag_recv_nbx(worker, b, SMALL, many_tag(i, 0),
					       (ucp_tag_t)-1, &param);
		reqs[2 * i + 1] = ucp_tag_recv_nbx(worker, b + SMALL, BIG,
						   many_tag(i, 1),
						   (ucp_tag_t)-1, &param);
	}
	if (wait_all(reqs, 2 * n, "many: ucp_tag_recv_nbx"))
		goto out;
	for (i = 0; i < n; i++) {
		unsigned char *b = bufs + i * (SMALL + BIG);

		*bad += check("server (many)", b, SMALL, (int)i);
		*bad += check("server (many)", b + SMALL, BIG, (int)i);
	}
	printf("server: %lu endpoints' messages received, %s\n",
	       (unsigned long)n, *bad ? "MISMATCH" : "every byte ok");
	fflush(stdout);
	ret = 0;
out:
	ucp_worker_release_address(worker, addr);
	free(bufs);
	free(reqs);
	return ret;
}

/*
 * The client's side of -n: n endpoints to the server's worker address,
 * two messages on each, all in flight at once; hold them open for hold
 * seconds.  0 on success.
 */
static int many_client(ucp_ep_h ep, uint64_t n, int hold)
{
	ucp_request_param_t param = { 0 };
	unsigned char addr[MAX_ADDR];
	unsigned char *bufs = NULL;
	ucp_ep_h *eps = NULL;
	void **reqs = NULL;
	uint64_t len = 0;
	size_t i, made = 0;
	int ret = -1;

	if (send_msg(ep, &n, sizeof(n), TAG_MANY_N))
		return -1;
	if (!n)
		return 0;
	if (recv_msg(&len, sizeof(len), TAG_ADDR_LEN) || !len || len > MAX_ADDR ||
	    recv_msg(addr, len, TAG_ADDR))
		return -1;
	eps = calloc(n, sizeof(*eps));
	reqs = calloc(2 * n, sizeof(*reqs));
	bufs = calloc(n, SMALL + BIG);
	if (!eps || !reqs || !bufs)
		goto out;
	for (made = 0; made < n; made++) {
		ucp_ep_params_t p = {
			.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
			.address = (const ucp_address_t *)addr,
		};

		if (ucp_ep_create(worker, &p, &eps[made]) != UCS_OK) {
			fprintf(stderr, "ucp_ep_create #%zu by address failed\n",
				made);
			goto out;
		}
	}
	for (i = 0; i < n; i++) {
		unsigned char *b = bufs + i * (SMALL + BIG);

		fill(b, SMALL, (int)i);
		fill(b + SMALL, BIG, (int)i);
		reqs[2 * i] = ucp_tag_send_nbx(eps[i], b, SMALL, many_tag(i, 0),
					       &param);
		reqs[2 * i + 1] = ucp_tag_send_nbx(eps[i], b + SMALL, BIG,
						   many_tag(i, 1), &param);
	}
	if (wait_all(reqs, 2 * n, "many: ucp_tag_send_nbx"))
		goto out;
	printf("%lu endpoints by worker address: 64 B and 64 KiB sent on each\n",
	       (unsigned long)n);
	/* The last one's lanes: its own RC QPs, not the first endpoint's. */
	ucp_ep_print_info(eps[n - 1], stdout);
	if (hold > 0) {
		time_t until = time(NULL) + hold;

		printf("holding %lu endpoints for %d s\n", (unsigned long)n, hold);
		fflush(stdout);
		while (time(NULL) < until && !expired())
			ucp_worker_progress(worker);
	}
	ret = 0;
out:
	for (i = 0; i < made; i++)
		close_ep(eps[i], 1);
	free(eps);
	free(reqs);
	free(bufs);
	return ret;
}

static int server(struct sockaddr_in *sin, unsigned char *buf)
{
	ucp_listener_params_t lp = {
		.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR |
			      UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
		.sockaddr = { (struct sockaddr *)sin, sizeof(*sin) },
		.conn_handler = { on_conn, NULL },
	};
	ucp_ep_params_t ep_params = {
		.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST |
			      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			      UCP_EP_PARAM_FIELD_ERR_HANDLER,
		.err_mode = UCP_ERR_HANDLING_MODE_PEER,
		.err_handler = { on_error, NULL },
	};
	unsigned long done;
	long bad = 0;
	ucp_ep_h ep;
	size_t size, k;
	int round;

	if (ucp_listener_create(worker, &lp, &listener) != UCS_OK) {
		fprintf(stderr, "ucp_listener_create failed\n");
		return -1;
	}
	printf("listening on %s:%u\n", inet_ntoa(sin->sin_addr),
	       ntohs(sin->sin_port));
	fflush(stdout);
	while (!conn_request) {
		ucp_worker_progress(worker);
		if (expired())
			return -1;
	}
	ep_params.conn_request = conn_request;
	if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) {
		fprintf(stderr, "ucp_ep_create from the request failed\n");
		return -1;
	}
	for (k = 0; k < ARRAY_SIZE(sizes); k++) {
		size = sizes[k];
		for (round = 0; round < ROUNDS; round++) {
			memset(buf, 0, size);
			if (recv_msg(buf, size, TAG_DATA) ||
			    send_msg(ep, buf, size, TAG_ECHO))
				return -1;
			bad += check("server", buf, size, round);
		}
	}
	if (many_server(ep, &bad))
		return -1;
	/*
	 * Done, and its answer.  A send completes once its data is buffered,
	 * not delivered, so the listener closes gracefully (flushing the
	 * answer); the client closes once it has the answer.
	 */
	if (recv_msg(&done, sizeof(done), TAG_DONE) ||
	    send_msg(ep, &done, sizeof(done), TAG_DONE))
		return -1;
	close_ep(ep, 0);
	ucp_listener_destroy(listener);
	printf("listener: %s, every byte checked\n", bad ? "MISMATCH" : "ok");
	return bad ? -1 : 0;
}

static int client(struct sockaddr_in *sin, unsigned char *buf,
		  unsigned char *echo, uint64_t neps, int hold)
{
	ucp_ep_params_t ep_params = {
		.field_mask = UCP_EP_PARAM_FIELD_FLAGS |
			      UCP_EP_PARAM_FIELD_SOCK_ADDR |
			      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
			      UCP_EP_PARAM_FIELD_ERR_HANDLER,
		.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
		.sockaddr = { (struct sockaddr *)sin, sizeof(*sin) },
		.err_mode = UCP_ERR_HANDLING_MODE_PEER,
		.err_handler = { on_error, NULL },
	};
	unsigned long done = 1;
	long bad = 0, n = 0;
	ucp_ep_h ep;
	size_t size, k;
	int round;

	if (ucp_ep_create(worker, &ep_params, &ep) != UCS_OK) {
		fprintf(stderr, "ucp_ep_create to %s failed\n", inet_ntoa(sin->sin_addr));
		return -1;
	}
	for (k = 0; k < ARRAY_SIZE(sizes); k++) {
		size = sizes[k];
		for (round = 0; round < ROUNDS; round++) {
			fill(buf, size, round);
			memset(echo, 0, size);
			if (send_msg(ep, buf, size, TAG_DATA) ||
			    recv_msg(echo, size, TAG_ECHO))
				return -1;
			bad += check("client", echo, size, round);
		}
		printf("%8zu B x %d: %s\n", size, ROUNDS,
		       bad > n ? "MISMATCH" : "ok");
		n = bad;
		fflush(stdout);
	}
	/* The lanes the endpoint ended up with, after the wire-up. */
	ucp_ep_print_info(ep, stdout);
	if (many_client(ep, neps, hold))
		return -1;
	if (send_msg(ep, &done, sizeof(done), TAG_DONE) ||
	    recv_msg(&done, sizeof(done), TAG_DONE))
		return -1;
	close_ep(ep, 1);
	return bad ? -1 : 0;
}

int main(int argc, char **argv)
{
	ucp_params_t params = {
		.field_mask = UCP_PARAM_FIELD_FEATURES,
		.features = UCP_FEATURE_TAG,
	};
	ucp_worker_params_t wparams = {
		.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
		.thread_mode = UCS_THREAD_MODE_SINGLE,
	};
	struct sockaddr_in sin = { .sin_family = AF_INET };
	unsigned char *buf, *echo;
	const char *ip = NULL;
	ucp_context_h ctx;
	uint64_t neps = 0;
	int listen = 0;
	int port = 13340;
	int hold = 0;
	int opt, ret;

	while ((opt = getopt(argc, argv, "l:c:p:n:w:")) != -1) {
		if (opt == 'l' || opt == 'c') {
			ip = optarg;
			listen = opt == 'l';
		} else if (opt == 'p') {
			port = atoi(optarg);
		} else if (opt == 'n') {
			neps = strtoull(optarg, NULL, 0);
		} else if (opt == 'w') {
			hold = atoi(optarg);
		} else {
			ip = NULL;
			break;
		}
	}
	if (!ip || inet_pton(AF_INET, ip, &sin.sin_addr) != 1 || port < 1 ||
	    port > 65535 || neps > MAX_EPS || hold < 0 || hold > TIMEOUT_S) {
		fprintf(stderr, "usage: %s -l IP | -c IP [-n EPS (at most %d)] [-w SECONDS] [-p PORT]\n",
			argv[0], MAX_EPS);
		return 2;
	}
	sin.sin_port = htons((uint16_t)port);
	deadline = time(NULL) + TIMEOUT_S + hold + (time_t)neps / 4;
	buf = malloc(MAX_SIZE);
	echo = malloc(MAX_SIZE);
	if (!buf || !echo)
		return 1;
	if (ucp_init(&params, NULL, &ctx) != UCS_OK) {
		fprintf(stderr, "ucp_init failed\n");
		return 1;
	}
	if (ucp_worker_create(ctx, &wparams, &worker) != UCS_OK) {
		fprintf(stderr, "ucp_worker_create failed\n");
		return 1;
	}
	ret = listen ? server(&sin, buf) : client(&sin, buf, echo, neps, hold);
	if (peer_error)
		fprintf(stderr, "(the endpoint reported a peer error)\n");
	printf("RESULT %s\n", ret ? "FAIL" : "PASS");
	ucp_worker_destroy(worker);
	ucp_cleanup(ctx);
	free(buf);
	free(echo);
	return ret ? 1 : 0;
}

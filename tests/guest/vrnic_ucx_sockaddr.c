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
 * Each prints "RESULT PASS" or "RESULT FAIL"; exit 1 on any failure.  Every
 * wait is bounded (TIMEOUT_S for the whole run).
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
		  unsigned char *echo)
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
	int listen = 0;
	int port = 13340;
	int opt, ret;

	while ((opt = getopt(argc, argv, "l:c:p:")) != -1) {
		if (opt == 'l' || opt == 'c') {
			ip = optarg;
			listen = opt == 'l';
		} else if (opt == 'p') {
			port = atoi(optarg);
		} else {
			ip = NULL;
			break;
		}
	}
	if (!ip || inet_pton(AF_INET, ip, &sin.sin_addr) != 1 || port < 1 ||
	    port > 65535) {
		fprintf(stderr, "usage: %s -l IP | -c IP [-p PORT]\n", argv[0]);
		return 2;
	}
	sin.sin_port = htons((uint16_t)port);
	deadline = time(NULL) + TIMEOUT_S;
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
	ret = listen ? server(&sin, buf) : client(&sin, buf, echo);
	if (peer_error)
		fprintf(stderr, "(the endpoint reported a peer error)\n");
	printf("RESULT %s\n", ret ? "FAIL" : "PASS");
	ucp_worker_destroy(worker);
	ucp_cleanup(ctx);
	free(buf);
	free(echo);
	return ret ? 1 : 0;
}

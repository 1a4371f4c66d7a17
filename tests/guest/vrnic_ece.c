// SPDX-License-Identifier: GPL-2.0
/*
 * An rdma_cm client and server whose QPs negotiate through ECE, as any
 * librdmacm application's do (rdma_create_qp queries the QP's offer, the
 * REQ and REP carry it, the passive side sets the peer's options): what
 * each end agreed to is printed, then a data-checked exchange runs over
 * the connection.
 *
 *   server: vrnic_ece -s -a ADDR [-p PORT] [-n MSGS] [-z BYTES] [-t SR:WIN:N]
 *   client: vrnic_ece -c -a SERVER [-b LOCAL] [-p PORT] [-n MSGS] [-z BYTES]
 *           [-w SEC [-f FILE]] [-t SR:WIN:N]
 *
 * -t sets the QP's own transport with vrnicdv_set_qp_transport (the vrnic
 * direct verbs of libvrnic) before it connects: selective repeat 0 or 1,
 * the send window, the paths sprayed over; that takes the place of what
 * ECE agrees, and ibv_query_ece (so the REQ or REP) reports it.
 *
 * The client writes a region of the server's memory with RDMA WRITE,
 * reads it back with RDMA READ and compares, then sends MSGS messages of
 * BYTES each, and last a SEND that tells the server the region is
 * complete.  The server checks every message and the region.  Each side
 * prints, in this order:
 *   remote ece: vendor V options O     (server: from the REQ)
 *   ece: vendor V options O            (ibv_query_ece once connected, or
 *                                       "ece: not supported")
 *   transport: selective_repeat S send_window W spray_paths N  (-t only)
 *   qpn N
 *   data: ok ...                       (or "data: FAIL ...", exit 1)
 *   linger                             (the client then waits -w seconds,
 *                                       0 by default, or until FILE
 *                                       exists, before it disconnects:
 *                                       time to read restrack; the server
 *                                       waits for that)
 * and exits 0 only if everything held.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>
#include <infiniband/vrnicdv.h>
#include <rdma/rdma_cma.h>

#define REGION		(4u << 20)	/* bytes written, then read back */
#define CHUNK		65536u		/* per RDMA WRITE or READ */
#define DEPTH		32		/* receives posted, sends in flight */
#define TIMEOUT_MS	60000

struct conn_info {		/* the server's accept private data */
	uint64_t addr;
	uint32_t rkey;
	uint32_t len;
};

struct ctx {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen, *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;		/* region, then DEPTH message slots */
	size_t size;		/* message bytes */
	unsigned int msgs;
	int dv;			/* -t: set the QP's transport (vrnicdv) */
	struct vrnicdv_qp_transport transport;
};

static int fail(const char *what)
{
	printf("data: FAIL %s: %s\n", what, strerror(errno));
	fflush(stdout);
	return 1;
}

static uint8_t pat(uint32_t seed, size_t i)
{
	return (uint8_t)(seed * 131u + i * 7u + (i >> 8));
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = pat(seed, i);
}

static long bad_at(const uint8_t *p, size_t n, uint32_t seed)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] != pat(seed, i))
			return (long)i;
	return -1;
}

static int wait_event(struct ctx *c, enum rdma_cm_event_type want,
		      struct rdma_cm_event **out)
{
	struct pollfd pfd = { .fd = c->ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, TIMEOUT_MS) != 1) {
		printf("data: FAIL no %s in %d ms\n", rdma_event_str(want),
		       TIMEOUT_MS);
		return 1;
	}
	if (rdma_get_cm_event(c->ch, &ev))
		return fail("rdma_get_cm_event");
	if (ev->event != want) {
		printf("data: FAIL event %s (status %d), wanted %s\n",
		       rdma_event_str(ev->event), ev->status,
		       rdma_event_str(want));
		rdma_ack_cm_event(ev);
		return 1;
	}
	if (out) {
		*out = ev;
		return 0;
	}
	rdma_ack_cm_event(ev);
	return 0;
}

/* One completion, bounded in time; it must be a success of opcode op. */
static int poll_one(struct ctx *c, enum ibv_wc_opcode op, struct ibv_wc *wc)
{
	int i, n;

	for (i = 0; i < TIMEOUT_MS * 10; i++) {
		n = ibv_poll_cq(c->cq, 1, wc);
		if (n < 0)
			return fail("ibv_poll_cq");
		if (n == 0) {
			usleep(100);
			continue;
		}
		if (wc->status != IBV_WC_SUCCESS || wc->opcode != op) {
			printf("data: FAIL completion %s, opcode %d (wanted %d)\n",
			       ibv_wc_status_str(wc->status), wc->opcode, op);
			return 1;
		}
		return 0;
	}
	printf("data: FAIL no completion in %d ms\n", TIMEOUT_MS);
	return 1;
}

static int setup(struct ctx *c, struct rdma_cm_id *id)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	/* the region, then the message slots, which the READ-back reuses */
	size_t len = REGION + (2 * (size_t)DEPTH * c->size > CHUNK ?
			       2 * (size_t)DEPTH * c->size : CHUNK);

	c->pd = ibv_alloc_pd(id->verbs);
	c->cq = c->pd ? ibv_create_cq(id->verbs, 4 * DEPTH, NULL, NULL, 0) :
			NULL;
	if (!c->cq)
		return fail("ibv_alloc_pd/ibv_create_cq");
	c->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!c->buf)
		return fail("aligned_alloc");
	memset(c->buf, 0, len);
	c->mr = ibv_reg_mr(c->pd, c->buf, len, IBV_ACCESS_LOCAL_WRITE |
			   IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
	if (!c->mr)
		return fail("ibv_reg_mr");
	qa.send_cq = qa.recv_cq = c->cq;
	if (rdma_create_qp(id, c->pd, &qa))
		return fail("rdma_create_qp");
	if (c->dv) {
		int ret = vrnicdv_set_qp_transport(id->qp, &c->transport);

		if (ret) {
			errno = ret;
			return fail("vrnicdv_set_qp_transport");
		}
		printf("transport: selective_repeat %u send_window %u "
		       "spray_paths %u\n", !!(c->transport.flags &
			VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT),
		       c->transport.send_window, c->transport.spray_paths);
	}
	return 0;
}

static int post_recv(struct ctx *c, unsigned int slot)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(c->buf + REGION + slot * c->size),
		.length = (uint32_t)c->size, .lkey = c->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	return ibv_post_recv(c->id->qp, &wr, &bad) ? fail("ibv_post_recv") :
						      0;
}

static int post_send(struct ctx *c, enum ibv_wr_opcode op, uint8_t *local,
		     uint32_t len, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)local, .length = len,
			       .lkey = c->mr->lkey };
	struct ibv_send_wr wr = { .sg_list = &sge, .num_sge = len ? 1 : 0,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(c->id->qp, &wr, &bad) ? fail("ibv_post_send") : 0;
}

static void report_ece(struct ctx *c)
{
	struct ibv_ece ece = {};
	int ret = ibv_query_ece(c->id->qp, &ece);

	if (ret)
		printf("ece: not supported (%s)\n", strerror(ret));
	else
		printf("ece: vendor %#x options %#x\n", ece.vendor_id,
		       ece.options);
	printf("qpn %#x\n", c->id->qp->qp_num);
	fflush(stdout);
}

static int server(struct ctx *c, struct addrinfo *ai)
{
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1,
				      .rnr_retry_count = 7 };
	struct rdma_cm_event *ev;
	struct conn_info info;
	struct ibv_ece ece = {};
	struct ibv_wc wc;
	unsigned int i;
	long bad;

	if (rdma_create_id(c->ch, &c->listen, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(c->listen, ai->ai_addr) || rdma_listen(c->listen, 1))
		return fail("rdma_create_id/bind/listen");
	printf("listening\n");
	fflush(stdout);
	if (wait_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, &ev))
		return 1;
	c->id = ev->id;
	rdma_ack_cm_event(ev);
	if (!rdma_get_remote_ece(c->id, &ece))
		printf("remote ece: vendor %#x options %#x\n", ece.vendor_id,
		       ece.options);
	if (setup(c, c->id))
		return 1;
	for (i = 0; i < DEPTH; i++)
		if (post_recv(c, i))
			return 1;
	info.addr = (uintptr_t)c->buf;
	info.rkey = c->mr->rkey;
	info.len = REGION;
	cp.private_data = &info;
	cp.private_data_len = sizeof(info);
	if (rdma_accept(c->id, &cp))
		return fail("rdma_accept");
	if (wait_event(c, RDMA_CM_EVENT_ESTABLISHED, NULL))
		return 1;
	report_ece(c);
	/* msgs messages, then the one that says the region is written */
	for (i = 0; i <= c->msgs; i++) {
		uint8_t *slot;

		if (poll_one(c, IBV_WC_RECV, &wc))
			return 1;
		slot = c->buf + REGION + wc.wr_id * c->size;
		if (i < c->msgs) {
			bad = bad_at(slot, c->size, i);
			if (wc.byte_len != c->size || bad >= 0) {
				printf("data: FAIL message %u: %u bytes, "
				       "byte %ld differs\n", i, wc.byte_len,
				       bad);
				return 1;
			}
		}
		if (post_recv(c, (unsigned int)wc.wr_id))
			return 1;
	}
	bad = bad_at(c->buf, REGION, 0xece);
	if (bad >= 0) {
		printf("data: FAIL region byte %ld differs\n", bad);
		return 1;
	}
	printf("data: ok %u messages of %zu bytes and a %u-byte region "
	       "checked\nlinger\n", c->msgs, c->size, REGION);
	fflush(stdout);
	/* The client disconnects after its own linger. */
	return wait_event(c, RDMA_CM_EVENT_DISCONNECTED, NULL);
}

static int resolve(struct ctx *c, struct addrinfo *src, struct addrinfo *dst)
{
	if (rdma_create_id(c->ch, &c->id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(c->id, src ? src->ai_addr : NULL, dst->ai_addr,
			      5000))
		return fail("rdma_create_id/rdma_resolve_addr");
	if (wait_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, NULL))
		return 1;
	if (rdma_resolve_route(c->id, 5000))
		return fail("rdma_resolve_route");
	return wait_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, NULL);
}

static int client(struct ctx *c, struct addrinfo *src, struct addrinfo *dst,
		  int linger, const char *go)
{
	struct rdma_conn_param cp = { .responder_resources = 1,
				      .initiator_depth = 1,
				      .retry_count = 7, .rnr_retry_count = 7 };
	uint8_t *back, *msg;
	struct rdma_cm_event *ev;
	struct conn_info info;
	struct ibv_wc wc;
	unsigned int i, inflight = 0, n = REGION / CHUNK;

	if (resolve(c, src, dst) || setup(c, c->id))
		return 1;
	if (rdma_connect(c->id, &cp))
		return fail("rdma_connect");
	if (wait_event(c, RDMA_CM_EVENT_ESTABLISHED, &ev))
		return 1;
	if (ev->param.conn.private_data_len < sizeof(info)) {
		printf("data: FAIL no region from the server\n");
		return 1;
	}
	memcpy(&info, ev->param.conn.private_data, sizeof(info));
	rdma_ack_cm_event(ev);
	if (info.len != REGION) {
		printf("data: FAIL region of %u bytes\n", info.len);
		return 1;
	}
	report_ece(c);
	fill(c->buf, REGION, 0xece);
	/* WRITE the region, then READ it back into the message slots' room */
	for (i = 0; i < n; i++) {
		if (inflight == DEPTH / 2) {
			if (poll_one(c, IBV_WC_RDMA_WRITE, &wc))
				return 1;
			inflight--;
		}
		if (post_send(c, IBV_WR_RDMA_WRITE, c->buf + i * CHUNK, CHUNK,
			      info.addr + i * CHUNK, info.rkey))
			return 1;
		inflight++;
	}
	for (; inflight; inflight--)
		if (poll_one(c, IBV_WC_RDMA_WRITE, &wc))
			return 1;
	back = c->buf + REGION;
	for (i = 0; i < n; i++) {
		memset(back, 0, CHUNK);
		/* one READ at a time: the QP allows one outstanding */
		if (post_send(c, IBV_WR_RDMA_READ, back, CHUNK,
			      info.addr + i * CHUNK, info.rkey) ||
		    poll_one(c, IBV_WC_RDMA_READ, &wc))
			return 1;
		if (memcmp(back, c->buf + i * CHUNK, CHUNK)) {
			printf("data: FAIL READ of chunk %u differs\n", i);
			return 1;
		}
	}
	/* Messages: DEPTH slots of size, at most DEPTH / 2 in flight. */
	for (i = 0; i <= c->msgs; i++) {
		msg = c->buf + REGION + (i % DEPTH) * c->size;
		if (inflight == DEPTH / 2) {
			if (poll_one(c, IBV_WC_SEND, &wc))
				return 1;
			inflight--;
		}
		if (i < c->msgs)
			fill(msg, c->size, i);
		if (post_send(c, IBV_WR_SEND, msg, i < c->msgs ?
			      (uint32_t)c->size : 0, 0, 0))
			return 1;
		inflight++;
	}
	for (; inflight; inflight--)
		if (poll_one(c, IBV_WC_SEND, &wc))
			return 1;
	printf("data: ok %u-byte region written and read back, %u messages "
	       "of %zu bytes sent\nlinger\n", REGION, c->msgs, c->size);
	fflush(stdout);
	for (; linger > 0 && (!go || access(go, F_OK)); linger--)
		sleep(1);
	rdma_disconnect(c->id);
	return wait_event(c, RDMA_CM_EVENT_DISCONNECTED, NULL);
}

static struct addrinfo *addr(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_flags = AI_NUMERICHOST };
	struct addrinfo *ai;

	return getaddrinfo(host, port, &hints, &ai) ? NULL : ai;
}

int main(int argc, char **argv)
{
	struct addrinfo *dst = NULL, *src = NULL;
	const char *a = NULL, *b = NULL, *port = "7471", *go = NULL;
	struct ctx c = { .size = 65536, .msgs = 200 };
	unsigned int sr, win, paths;
	int opt, srv = -1, linger = 0, bad = 0, ret;

	while ((opt = getopt(argc, argv, "sca:b:p:n:z:w:f:t:")) != -1) {
		switch (opt) {
		case 's': srv = 1; break;
		case 'c': srv = 0; break;
		case 'a': a = optarg; break;
		case 'b': b = optarg; break;
		case 'p': port = optarg; break;
		case 'n': c.msgs = (unsigned int)atoi(optarg); break;
		case 'z': c.size = (size_t)atol(optarg); break;
		case 'w': linger = atoi(optarg); break;
		case 'f': go = optarg; break;
		case 't':
			if (sscanf(optarg, "%u:%u:%u", &sr, &win, &paths) != 3 ||
			    sr > 1 || win > 65535 || paths > 255) {
				bad = 1;
				break;
			}
			c.dv = 1;
			c.transport.flags = sr ?
				VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT : 0;
			c.transport.send_window = (uint16_t)win;
			c.transport.spray_paths = (uint8_t)paths;
			break;
		default: bad = 1; break;
		}
	}
	if (bad || srv < 0 || !a || c.size < 1 || c.size > (1u << 20) ||
	    c.msgs > 1000000) {
		fprintf(stderr, "usage: %s -s|-c -a ADDR [-b LOCAL] [-p PORT] "
			"[-n MSGS] [-z BYTES (1..1M)] [-w SEC [-f FILE]] "
			"[-t SR:WINDOW:PATHS]\n",
			argv[0]);
		return 2;
	}
	dst = addr(a, port);
	if (b)
		src = addr(b, NULL);
	if (!dst || (b && !src)) {
		fprintf(stderr, "bad address\n");
		return 2;
	}
	c.ch = rdma_create_event_channel();
	if (!c.ch)
		return fail("rdma_create_event_channel");
	ret = srv ? server(&c, dst) : client(&c, src, dst, linger, go);
	fflush(stdout);
	/* Teardown is the kernel's on exit: this program's job is done. */
	return ret ? 1 : 0;
}

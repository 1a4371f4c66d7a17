// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel QP reuse after RESET on vrnic (issue 15), as a kernel ULP sees it:
 * two QPs of one PD on vrnic0 sending to each other through the port's own
 * GID (loopback), one CQ polled directly; first two RC QPs (tests 1-3),
 * then two UD QPs and an address handle (tests 5-7):
 *
 *   1. message 1 moves: its send and receive completions, its data.
 *   2. message 2 moves, its data lands, its completions are left in the CQ.
 *   3. both QPs go to RESET and back to RTS; message 3 moves.  Exactly its
 *      two completions come (none of message 2, no replay of an old WQE
 *      from a slot the device restarted at), its data is in its own
 *      buffer and the buffers of messages 1 and 2 (cleared before the
 *      RESET) stay untouched.
 *
 * and the checks of the second review (test 4, then 8-10):
 *
 *   4. ib_query_qp(IB_QP_AV) of the connected RC QP returns the address
 *      vector it was given (S12), not zeros.
 *   8. a REG_MR whose page size is a power of two >= 4 KiB but outside
 *      page_size_cap (2 GiB) is refused by ib_post_send (S10).
 *   9. an inline send whose SGE lengths add up past 2^32 is refused
 *      (-EINVAL), not copied (S10: the length check wrapped on u32).
 *  10. a QP with the largest SQ, 2^14 WQEs of 1 KiB (16 MiB), is created:
 *      its ring is single pages, where one block needs an order-12
 *      allocation the page allocator does not make (S5).
 *
 * insmod vrnic_kqp_test.ko [gid_index=1]: the result goes to the kernel
 * log as TAP lines prefixed "vrnic_kqp_test: "; the load fails (-EIO) when
 * a test failed, and succeeds (the module stays loaded) when all passed.
 */
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/module.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#define MSG		64
#define NSLOT		8
#define GRH		40	/* in front of every UD receive */
#define UDSLOT		(GRH + MSG)
#define UDOFF		(NSLOT * MSG)	/* UD receive slots 0..3 */
#define BUFSZ		(UDOFF + 4 * UDSLOT)
#define QKEY		0x11111111
#define WAIT_MS		10000

static int gid_index = 1;
module_param(gid_index, int, 0444);
MODULE_PARM_DESC(gid_index, "GID index of port 1 to loop back through");

struct kqp {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *a, *b;	/* the pair under test: a sends to b */
	struct ib_ah *ah;	/* UD: the address of the port's own GID */
	bool ud;
	u8 *buf;		/* NSLOT slots of MSG bytes, UD receive slots */
	u64 dma;
	union ib_gid gid;
	u8 mac[ETH_ALEN];
};

#define tap(ok, n, fmt, ...) \
	pr_info("vrnic_kqp_test: %s %d " fmt "\n", (ok) ? "ok" : "not ok", \
		n, ##__VA_ARGS__)
#define diag(fmt, ...) pr_info("vrnic_kqp_test: # " fmt "\n", ##__VA_ARGS__)

static u8 *slot(struct kqp *t, int i)
{
	return t->buf + i * MSG;
}

/* Where message n is received. */
static u8 *rslot(struct kqp *t, int n)
{
	return t->ud ? t->buf + UDOFF + n * UDSLOT + GRH : slot(t, 4 + n);
}

static void ah_attr_init(struct kqp *t, struct rdma_ah_attr *ah)
{
	ah->type = rdma_ah_find_type(t->dev, 1);
	rdma_ah_set_port_num(ah, 1);
	rdma_ah_set_grh(ah, &t->gid, 0, gid_index, 64, 0);
	memcpy(ah->roce.dmac, t->mac, ETH_ALEN);
}

static int ud_to_rts(struct ib_qp *qp)
{
	struct ib_qp_attr a = {};
	int ret;

	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	a.qkey = QKEY;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_QKEY);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN);
}

static int to_rts(struct kqp *t, struct ib_qp *qp, u32 dest)
{
	struct ib_qp_attr a = {};
	int ret;

	if (t->ud)
		return ud_to_rts(qp);

	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = 0;
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTR;
	a.path_mtu = IB_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	ah_attr_init(t, &a.ah_attr);
	ret = ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_AV | IB_QP_PATH_MTU |
			   IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (ret)
		return ret;
	memset(&a, 0, sizeof(a));
	a.qp_state = IB_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 3;
	a.rnr_retry = 3;
	a.max_rd_atomic = 1;
	return ib_modify_qp(qp, &a, IB_QP_STATE | IB_QP_SQ_PSN |
			    IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			    IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}

static int reset(struct ib_qp *qp)
{
	struct ib_qp_attr a = { .qp_state = IB_QPS_RESET };

	return ib_modify_qp(qp, &a, IB_QP_STATE);
}

/*
 * Receive message n into rslot(n) (UD: its GRH in front); send it from
 * slot n (wr_id n).
 */
static int post_msg(struct kqp *t, int n)
{
	struct ib_sge rs = {
		.addr = t->dma + (rslot(t, n) - t->buf) - (t->ud ? GRH : 0),
		.length = t->ud ? UDSLOT : MSG,
		.lkey = t->pd->local_dma_lkey,
	};
	struct ib_sge ss = {
		.addr = t->dma + n * MSG, .length = MSG,
		.lkey = t->pd->local_dma_lkey,
	};
	struct ib_recv_wr rwr = { .wr_id = 0x100 + n, .sg_list = &rs,
				  .num_sge = 1 };
	struct ib_ud_wr swr = {
		.wr = { .wr_id = n, .sg_list = &ss, .num_sge = 1,
			.opcode = IB_WR_SEND, .send_flags = IB_SEND_SIGNALED },
		.ah = t->ah, .remote_qpn = t->b->qp_num, .remote_qkey = QKEY,
	};
	int ret;

	ib_dma_sync_single_for_device(t->dev, t->dma, BUFSZ,
				      DMA_BIDIRECTIONAL);
	ret = ib_post_recv(t->b, &rwr, NULL);
	return ret ? ret : ib_post_send(t->a, &swr.wr, NULL);
}

/* Poll up to n completions into wc within ms; how many came. */
static int kqp_poll(struct kqp *t, struct ib_wc *wc, int n, int ms)
{
	unsigned long end = jiffies + msecs_to_jiffies(ms);
	int got = 0, k;

	while (got < n) {
		k = ib_poll_cq(t->cq, n - got, wc + got);
		if (k < 0)
			return k;
		got += k;
		if (got < n && time_after(jiffies, end))
			break;
		if (!k)
			usleep_range(1000, 2000);
	}
	return got;
}

/* Wait until message n's data is in its receive slot. */
static bool landed(struct kqp *t, int n)
{
	unsigned long end = jiffies + msecs_to_jiffies(WAIT_MS);

	do {
		ib_dma_sync_single_for_cpu(t->dev, t->dma, BUFSZ,
					   DMA_BIDIRECTIONAL);
		if (!memcmp(rslot(t, n), slot(t, n), MSG))
			return true;
		usleep_range(1000, 2000);
	} while (!time_after(jiffies, end));
	return false;
}

/* Exactly message n's send and receive completions, successful. */
static bool completions_of(struct kqp *t, int n, struct ib_wc *wc, int got)
{
	bool s = false, r = false;
	int i;

	for (i = 0; i < got; i++) {
		if (wc[i].status != IB_WC_SUCCESS) {
			diag("completion wr_id 0x%llx: %s", wc[i].wr_id,
			     ib_wc_status_msg(wc[i].status));
			return false;
		}
		if (wc[i].wr_id == n && wc[i].qp == t->a && !s)
			s = true;
		else if (wc[i].wr_id == 0x100 + n && wc[i].qp == t->b && !r &&
			 wc[i].byte_len == (t->ud ? UDSLOT : MSG))
			r = true;
		else
			diag("unexpected completion wr_id 0x%llx qpn %u len %u",
			     wc[i].wr_id, wc[i].qp->qp_num, wc[i].byte_len);
	}
	return s && r && got == 2;
}

/* Tests first..first + 2 on the pair t->a, t->b; how many failed. */
static int reuse_after_reset(struct kqp *t, int first, const char *type)
{
	struct ib_wc wc[8];
	int i, got, fails = 0;
	bool ok;

	if (to_rts(t, t->a, t->b->qp_num) || to_rts(t, t->b, t->a->qp_num)) {
		diag("%s: RESET -> RTS failed", type);
		return -EIO;
	}
	/* 1 */
	got = post_msg(t, 1) ? -1 : kqp_poll(t, wc, 2, WAIT_MS);
	ok = got == 2 && completions_of(t, 1, wc, got) && landed(t, 1);
	fails += !ok;
	tap(ok, first, "%s: message 1 moves once (%d completions)", type, got);

	/* 2: its completions stay in the CQ */
	ok = !post_msg(t, 2) && landed(t, 2);
	msleep(100);	/* both completions written by now */
	/* 3 */
	memset(rslot(t, 1), 0, MSG);
	memset(rslot(t, 2), 0, MSG);
	if (!ok || reset(t->a) || reset(t->b) ||
	    to_rts(t, t->a, t->b->qp_num) || to_rts(t, t->b, t->a->qp_num)) {
		diag("message 2 or RESET -> RTS failed");
		ok = false;
	}
	tap(ok, first + 1, "%s: message 2 moves, both QPs RESET and back to RTS",
	    type);
	fails += !ok;
	got = !ok || post_msg(t, 3) ? -1 : kqp_poll(t, wc, 8, 2000);
	ok = got == 2 && completions_of(t, 3, wc, got) && landed(t, 3);
	for (i = 1; ok && i <= 2; i++)
		if (memchr_inv(rslot(t, i), 0, MSG)) {
			diag("receive buffer of message %d written again (replay)",
			     i);
			ok = false;
		}
	tap(ok, first + 2, "%s: after RESET message 3 moves once, no stale completion (%d)",
	    type, got);
	fails += !ok;
	return fails;
}

/* 4: the AV to_rts() gave t->a comes back from ib_query_qp(IB_QP_AV). */
static bool query_av(struct kqp *t)
{
	struct ib_qp_init_attr ia = {};
	struct ib_qp_attr qa = {};
	const struct ib_global_route *grh;

	if (ib_query_qp(t->a, &qa, IB_QP_STATE | IB_QP_AV, &ia)) {
		diag("ib_query_qp failed");
		return false;
	}
	grh = rdma_ah_read_grh(&qa.ah_attr);
	diag("query_qp: state %d ah_flags 0x%x sgid_index %u hop_limit %u dgid %pI6 dmac %pM",
	     qa.qp_state, rdma_ah_get_ah_flags(&qa.ah_attr), grh->sgid_index,
	     grh->hop_limit, grh->dgid.raw, qa.ah_attr.roce.dmac);
	return (rdma_ah_get_ah_flags(&qa.ah_attr) & IB_AH_GRH) &&
	       qa.ah_attr.type == RDMA_AH_ATTR_TYPE_ROCE &&
	       rdma_ah_get_port_num(&qa.ah_attr) == 1 &&
	       !memcmp(grh->dgid.raw, t->gid.raw, sizeof(t->gid.raw)) &&
	       grh->sgid_index == gid_index && grh->hop_limit == 64 &&
	       ether_addr_equal(qa.ah_attr.roce.dmac, t->mac);
}

/*
 * 8 and 9 on a QP of their own (left in RESET: nothing it is given can
 * reach the wire): work requests ib_post_send must refuse with -EINVAL.
 */
static int refused_wrs(struct kqp *t, int first)
{
	struct ib_qp_init_attr ia = {};
	struct ib_sge sge[2] = {
		{ .addr = (uintptr_t)t->buf, .length = 8 },
		/* 8 + (2^32 - 4) wraps to 4 */
		{ .addr = (uintptr_t)t->buf, .length = U32_MAX - 3 },
	};
	struct ib_send_wr wr = {
		.wr_id = 8, .sg_list = sge, .num_sge = 2, .opcode = IB_WR_SEND,
		.send_flags = IB_SEND_INLINE | IB_SEND_SIGNALED,
	};
	struct ib_reg_wr reg = {
		.wr = { .wr_id = 9, .opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED },
		.access = IB_ACCESS_LOCAL_WRITE,
	};
	const struct ib_send_wr *bad = NULL;
	struct scatterlist sg;
	struct ib_qp *qp;
	struct ib_mr *mr;
	int ret, fails = 0;

	ia.qp_type = IB_QPT_RC;
	ia.send_cq = t->cq;
	ia.recv_cq = t->cq;
	ia.sq_sig_type = IB_SIGNAL_REQ_WR;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 2;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 32;
	qp = ib_create_qp(t->pd, &ia);
	if (IS_ERR(qp))
		return PTR_ERR(qp);

	mr = ib_alloc_mr(t->pd, IB_MR_TYPE_MEM_REG, 1);
	if (IS_ERR(mr)) {
		ret = PTR_ERR(mr);
		goto out;
	}
	sg_init_table(&sg, 1);
	sg_dma_address(&sg) = t->dma;
	sg_dma_len(&sg) = MSG;
	ret = ib_map_mr_sg(mr, &sg, 1, NULL, SZ_2G);
	if (ret == 1) {
		reg.mr = mr;
		reg.key = mr->rkey;
		ret = ib_post_send(qp, &reg.wr, &bad);
		tap(ret == -EINVAL && bad == &reg.wr, first,
		    "REG_MR with a 2 GiB page (not in page_size_cap 0x%llx) refused (%d)",
		    t->dev->attrs.page_size_cap, ret);
		fails += ret != -EINVAL;
		ret = 0;
	} else {
		diag("ib_map_mr_sg with 2 GiB pages: %d", ret);
		ret = ret < 0 ? ret : -EIO;
	}
	ib_dereg_mr(mr);
	if (ret)
		goto out;

	/* Last: without the check this copies 4 GiB over kernel memory. */
	bad = NULL;
	ret = ib_post_send(qp, &wr, &bad);
	tap(ret == -EINVAL && bad == &wr, first + 1,
	    "inline SGE lengths 8 + 0x%x (wrap past 2^32) refused (%d)",
	    sge[1].length, ret);
	fails += ret != -EINVAL;
	ret = 0;
out:
	ib_destroy_qp(qp);
	return ret ? ret : fails;
}

/* Test n: a kernel QP with the largest SQ the device takes. */
static int big_ring(struct kqp *t, int n)
{
	struct ib_qp_init_attr ia = {};
	struct ib_qp *qp;
	bool ok;

	ia.qp_type = IB_QPT_RC;
	ia.send_cq = t->cq;
	ia.recv_cq = t->cq;
	ia.sq_sig_type = IB_SIGNAL_REQ_WR;
	ia.cap.max_send_wr = t->dev->attrs.max_qp_wr;
	ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	ia.cap.max_inline_data = 512;
	qp = ib_create_qp(t->pd, &ia);
	ok = !IS_ERR(qp) && ia.cap.max_send_wr >= 16384 &&
	     ia.cap.max_inline_data >= 512;
	tap(ok, n, "a kernel QP with %u send WRs of %u inline bytes is created (%ld)",
	    ia.cap.max_send_wr, ia.cap.max_inline_data,
	    IS_ERR(qp) ? PTR_ERR(qp) : 0L);
	if (!IS_ERR(qp))
		ib_destroy_qp(qp);
	return !ok;
}

static void destroy_pair(struct kqp *t)
{
	if (!IS_ERR_OR_NULL(t->b))
		ib_destroy_qp(t->b);
	if (!IS_ERR_OR_NULL(t->a))
		ib_destroy_qp(t->a);
	t->a = NULL;
	t->b = NULL;
}

static int create_pair(struct kqp *t, enum ib_qp_type type)
{
	struct ib_qp_init_attr ia = {};

	ia.qp_type = type;
	ia.send_cq = t->cq;
	ia.recv_cq = t->cq;
	ia.sq_sig_type = IB_SIGNAL_REQ_WR;
	ia.cap.max_send_wr = 4;
	ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	t->ud = type == IB_QPT_UD;
	t->a = ib_create_qp(t->pd, &ia);
	if (IS_ERR(t->a))
		return PTR_ERR(t->a);
	t->b = ib_create_qp(t->pd, &ia);
	return PTR_ERR_OR_ZERO(t->b);
}

static int run(struct kqp *t)
{
	struct rdma_ah_attr ah = {};
	int i, ret, fails;
	bool ok;

	pr_info("vrnic_kqp_test: TAP version 13\n");
	pr_info("vrnic_kqp_test: 1..10\n");
	for (i = 0; i < 4; i++)
		memset(slot(t, i), 0xa0 + i, MSG);
	ret = create_pair(t, IB_QPT_RC);
	if (ret)
		return ret;
	fails = reuse_after_reset(t, 1, "RC");
	if (fails >= 0) {
		/* 4: the pair is connected (RTS) again */
		ok = query_av(t);
		tap(ok, 4, "RC: ib_query_qp(IB_QP_AV) returns the path it was given");
		fails += !ok;
	}
	destroy_pair(t);
	if (fails < 0)
		return fails;

	ah_attr_init(t, &ah);
	t->ah = rdma_create_ah(t->pd, &ah, RDMA_CREATE_AH_SLEEPABLE);
	if (IS_ERR(t->ah)) {
		ret = PTR_ERR(t->ah);
		t->ah = NULL;
		return ret;
	}
	ret = create_pair(t, IB_QPT_UD);
	if (!ret) {
		ret = reuse_after_reset(t, 5, "UD");
		if (ret >= 0) {
			fails += ret;
			ret = 0;
		}
	}
	destroy_pair(t);
	rdma_destroy_ah(t->ah, RDMA_DESTROY_AH_SLEEPABLE);
	if (ret)
		return ret;
	ret = refused_wrs(t, 8);
	if (ret < 0)
		return ret;
	fails += ret;
	fails += big_ring(t, 10);
	return fails ? -EIO : 0;
}

static int __init vrnic_kqp_test_init(void)
{
	const struct ib_gid_attr *ga;
	struct kqp t = {};
	int ret;

	t.dev = ib_device_get_by_name("vrnic0", RDMA_DRIVER_UNKNOWN);
	if (!t.dev) {
		pr_err("vrnic_kqp_test: no vrnic0\n");
		return -ENODEV;
	}
	ga = rdma_get_gid_attr(t.dev, 1, gid_index);
	if (IS_ERR(ga)) {
		ret = PTR_ERR(ga);
		goto put_dev;
	}
	t.gid = ga->gid;
	ret = rdma_read_gid_l2_fields(ga, NULL, t.mac);
	rdma_put_gid_attr(ga);
	if (ret)
		goto put_dev;
	t.buf = kzalloc(BUFSZ, GFP_KERNEL);
	if (!t.buf) {
		ret = -ENOMEM;
		goto put_dev;
	}
	t.dma = ib_dma_map_single(t.dev, t.buf, BUFSZ, DMA_BIDIRECTIONAL);
	if (ib_dma_mapping_error(t.dev, t.dma)) {
		ret = -ENOMEM;
		goto free_buf;
	}
	t.pd = ib_alloc_pd(t.dev, 0);
	if (IS_ERR(t.pd)) {
		ret = PTR_ERR(t.pd);
		goto unmap;
	}
	t.cq = ib_alloc_cq(t.dev, NULL, 64, 0, IB_POLL_DIRECT);
	if (IS_ERR(t.cq)) {
		ret = PTR_ERR(t.cq);
		goto free_pd;
	}
	ret = run(&t);
	destroy_pair(&t);
	ib_free_cq(t.cq);
free_pd:
	ib_dealloc_pd(t.pd);
unmap:
	ib_dma_unmap_single(t.dev, t.dma, BUFSZ, DMA_BIDIRECTIONAL);
free_buf:
	kfree(t.buf);
put_dev:
	ib_device_put(t.dev);
	if (ret)
		pr_info("vrnic_kqp_test: # result %d\n", ret);
	return ret;
}

static void __exit vrnic_kqp_test_exit(void)
{
}

module_init(vrnic_kqp_test_init);
module_exit(vrnic_kqp_test_exit);
MODULE_DESCRIPTION("vrnic kernel QP reuse after RESET test");
MODULE_LICENSE("GPL");

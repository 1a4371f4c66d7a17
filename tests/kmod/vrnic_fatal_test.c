// SPDX-License-Identifier: GPL-2.0
/*
 * DEVICE_FATAL with a kernel ULP's work outstanding (second review, M4),
 * as NVMe-oF, iSER or NFS/RDMA see it: two RC QPs of one PD on vrnic0,
 * connected through the port's own GID, one IB_POLL_WORKQUEUE CQ, and
 * NRECV receives posted on b that no send will match; b is taken through
 * RESET and back to RTS first, as a ULP reusing a QP does (a QP once
 * reset fell off its CQ's flush list: the cold review of M4).  It then
 * logs "# waiting for DEVICE_FATAL" and waits up to wait_s seconds for
 * it; the harness makes the device fatal (QEMU's x-fault-internal).  Then
 * the module tears down as a ULP does:
 *
 *   1. IB_EVENT_DEVICE_FATAL arrives.
 *   2. ib_drain_qp() of both QPs returns: the move to ERR succeeds and
 *      the drain work requests complete (no "failed to drain" WARN, no
 *      wait for ever).
 *   3. every outstanding receive completes, with IB_WC_WR_FLUSH_ERR.
 *
 * insmod vrnic_fatal_test.ko [gid_index=1] [wait_s=60]: TAP lines
 * prefixed "vrnic_fatal_test: " in the kernel log; the load fails (-EIO)
 * when a test failed.  Afterwards vrnic must be reloaded.
 */
#include <linux/completion.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>

#define NRECV		4
#define MSG		64

static int gid_index = 1;
module_param(gid_index, int, 0444);
MODULE_PARM_DESC(gid_index, "GID index of port 1 to loop back through");
static int wait_s = 60;
module_param(wait_s, int, 0444);
MODULE_PARM_DESC(wait_s, "seconds to wait for DEVICE_FATAL");

#define tap(ok, n, fmt, ...) \
	pr_info("vrnic_fatal_test: %s %d " fmt "\n", (ok) ? "ok" : "not ok", \
		n, ##__VA_ARGS__)
#define diag(fmt, ...) pr_info("vrnic_fatal_test: # " fmt "\n", ##__VA_ARGS__)

struct ftest {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *a, *b;
	union ib_gid gid;
	u8 mac[ETH_ALEN];
	u8 *buf;
	u64 dma;
	struct ib_event_handler eh;
	struct completion fatal;
	struct ib_cqe cqe;
	atomic_t flushed, other;
};

static void fatal_handler(struct ib_event_handler *eh, struct ib_event *ev)
{
	struct ftest *t = container_of(eh, struct ftest, eh);

	if (ev->event == IB_EVENT_DEVICE_FATAL)
		complete(&t->fatal);
}

static void recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct ftest *t = cq->cq_context;

	if (wc->status == IB_WC_WR_FLUSH_ERR)
		atomic_inc(&t->flushed);
	else
		atomic_inc(&t->other);
}

static int to_rts(struct ftest *t, struct ib_qp *qp, u32 dest)
{
	struct ib_qp_attr a = {};
	int ret;

	a.qp_state = IB_QPS_INIT;
	a.port_num = 1;
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
	a.ah_attr.type = rdma_ah_find_type(t->dev, 1);
	rdma_ah_set_port_num(&a.ah_attr, 1);
	rdma_ah_set_grh(&a.ah_attr, &t->gid, 0, gid_index, 64, 0);
	memcpy(a.ah_attr.roce.dmac, t->mac, ETH_ALEN);
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

static struct ib_qp *create_qp(struct ftest *t)
{
	struct ib_qp_init_attr ia = {};

	ia.qp_type = IB_QPT_RC;
	ia.send_cq = t->cq;
	ia.recv_cq = t->cq;
	ia.sq_sig_type = IB_SIGNAL_REQ_WR;
	ia.cap.max_send_wr = 8;
	ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	return ib_create_qp(t->pd, &ia);
}

static int run(struct ftest *t)
{
	struct ib_sge sge = {
		.addr = t->dma, .length = MSG, .lkey = t->pd->local_dma_lkey,
	};
	struct ib_recv_wr rwr = { .wr_cqe = &t->cqe, .sg_list = &sge,
				  .num_sge = 1 };
	unsigned long t0;
	bool ok;
	int i, ret;

	t->a = create_qp(t);
	if (IS_ERR(t->a))
		return PTR_ERR(t->a);
	t->b = create_qp(t);
	if (IS_ERR(t->b))
		return PTR_ERR(t->b);
	ret = to_rts(t, t->a, t->b->qp_num);
	if (!ret)
		ret = to_rts(t, t->b, t->a->qp_num);
	if (!ret) {
		struct ib_qp_attr r = { .qp_state = IB_QPS_RESET };

		ret = ib_modify_qp(t->b, &r, IB_QP_STATE);
	}
	if (!ret)
		ret = to_rts(t, t->b, t->a->qp_num);
	for (i = 0; !ret && i < NRECV; i++)
		ret = ib_post_recv(t->b, &rwr, NULL);
	if (ret) {
		diag("setup failed: %d", ret);
		return ret;
	}

	diag("waiting for DEVICE_FATAL");
	ok = wait_for_completion_timeout(&t->fatal, wait_s * HZ);
	tap(ok, 1, "IB_EVENT_DEVICE_FATAL arrives");
	if (!ok)
		return -EIO;

	t0 = jiffies;
	ib_drain_qp(t->a);
	ib_drain_qp(t->b);
	diag("drained in %u ms", jiffies_to_msecs(jiffies - t0));
	tap(true, 2, "ib_drain_qp() of both QPs returns");

	ok = atomic_read(&t->flushed) == NRECV && !atomic_read(&t->other);
	tap(ok, 3, "%d outstanding receives: %d flushed, %d other completions",
	    NRECV, atomic_read(&t->flushed), atomic_read(&t->other));
	return ok ? 0 : -EIO;
}

static int __init vrnic_fatal_test_init(void)
{
	const struct ib_gid_attr *ga;
	struct ftest *t;
	int ret;

	t = kzalloc(sizeof(*t), GFP_KERNEL);
	if (!t)
		return -ENOMEM;
	init_completion(&t->fatal);
	t->cqe.done = recv_done;
	pr_info("vrnic_fatal_test: TAP version 13\n");
	pr_info("vrnic_fatal_test: 1..3\n");
	t->dev = ib_device_get_by_name("vrnic0", RDMA_DRIVER_UNKNOWN);
	if (!t->dev) {
		pr_err("vrnic_fatal_test: no vrnic0\n");
		ret = -ENODEV;
		goto free_t;
	}
	ga = rdma_get_gid_attr(t->dev, 1, gid_index);
	if (IS_ERR(ga)) {
		ret = PTR_ERR(ga);
		goto put_dev;
	}
	t->gid = ga->gid;
	ret = rdma_read_gid_l2_fields(ga, NULL, t->mac);
	rdma_put_gid_attr(ga);
	if (ret)
		goto put_dev;
	t->buf = kzalloc(MSG, GFP_KERNEL);
	if (!t->buf) {
		ret = -ENOMEM;
		goto put_dev;
	}
	t->dma = ib_dma_map_single(t->dev, t->buf, MSG, DMA_FROM_DEVICE);
	if (ib_dma_mapping_error(t->dev, t->dma)) {
		ret = -ENOMEM;
		goto free_buf;
	}
	INIT_IB_EVENT_HANDLER(&t->eh, t->dev, fatal_handler);
	ib_register_event_handler(&t->eh);
	t->pd = ib_alloc_pd(t->dev, 0);
	if (IS_ERR(t->pd)) {
		ret = PTR_ERR(t->pd);
		goto unregister;
	}
	t->cq = ib_alloc_cq(t->dev, t, 64, 0, IB_POLL_WORKQUEUE);
	if (IS_ERR(t->cq)) {
		ret = PTR_ERR(t->cq);
		goto free_pd;
	}
	ret = run(t);
	if (!IS_ERR_OR_NULL(t->b))
		ib_destroy_qp(t->b);
	if (!IS_ERR_OR_NULL(t->a))
		ib_destroy_qp(t->a);
	ib_free_cq(t->cq);
free_pd:
	ib_dealloc_pd(t->pd);
unregister:
	ib_unregister_event_handler(&t->eh);
	ib_dma_unmap_single(t->dev, t->dma, MSG, DMA_FROM_DEVICE);
free_buf:
	kfree(t->buf);
put_dev:
	ib_device_put(t->dev);
free_t:
	kfree(t);
	if (ret)
		pr_info("vrnic_fatal_test: # result %d\n", ret);
	return ret;
}

static void __exit vrnic_fatal_test_exit(void)
{
}

module_init(vrnic_fatal_test_init);
module_exit(vrnic_fatal_test_exit);
MODULE_DESCRIPTION("vrnic DEVICE_FATAL with kernel work outstanding test");
MODULE_LICENSE("GPL");

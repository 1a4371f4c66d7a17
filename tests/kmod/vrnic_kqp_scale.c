// SPDX-License-Identifier: GPL-2.0
/*
 * A kernel ULP creates and destroys many QPs on vrnic0 (issue 29), the
 * kernel's counterpart of tests/guest/vrnic_qp_scale.c: nqp RC QPs (100000
 * unless told) on one PD, one CQ and one SRQ, each with a one-entry SQ.
 *
 *   1. max_qp of the device covers nqp.
 *   2. every QP is created, their numbers distinct (an xarray of them),
 *      some past 16 bits of index when nqp is over 65534.
 *   3. the last QP made moves to INIT.
 *   4. every QP is destroyed, then the SRQ, the CQ and the PD.
 *
 * The times to create and destroy, and the first and the last thousand
 * creates apart, go to the log beside the TAP lines.
 *
 * insmod vrnic_kqp_scale.ko [nqp=N]: the result goes to the kernel log
 * as TAP lines prefixed "vrnic_kqp_scale: "; the load fails (-EIO) when a
 * test failed, and succeeds (the module stays loaded, holding nothing)
 * when all passed.
 */
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>

#define BATCH	1000

static int nqp = 100000;
module_param(nqp, int, 0444);
MODULE_PARM_DESC(nqp, "RC QPs to create (at least 2000)");

static int tap(int n, bool ok, const char *what)
{
	pr_info("vrnic_kqp_scale: %s %d %s\n", ok ? "ok" : "not ok", n, what);
	return ok ? 0 : 1;
}

static u64 ms_since(ktime_t t)
{
	return ktime_ms_delta(ktime_get(), t);
}

static int run(struct ib_pd *pd, struct ib_cq *cq, struct ib_srq *srq,
	       struct ib_qp **qps, bool *all_gone)
{
	struct ib_qp_init_attr ia = {
		.qp_type = IB_QPT_RC,
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.sq_sig_type = IB_SIGNAL_REQ_WR,
		.cap = { .max_send_wr = 1, .max_send_sge = 1 },
	};
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IB_ACCESS_LOCAL_WRITE,
	};
	u64 first = 0, last = 0, made_ms, gone_ms;
	int i, made = 0, past16 = 0, dup = 0, gone = 0, fails = 0;
	ktime_t t0, tl = 0;
	struct xarray nums;

	xa_init(&nums);
	t0 = ktime_get();
	for (i = 0; i < nqp; i++) {
		qps[i] = ib_create_qp(pd, &ia);
		if (IS_ERR(qps[i])) {
			pr_info("vrnic_kqp_scale: # create_qp %d: %ld\n", i,
				PTR_ERR(qps[i]));
			qps[i] = NULL;
			break;
		}
		if (xa_insert(&nums, qps[i]->qp_num, qps[i], GFP_KERNEL))
			dup++;
		past16 += (qps[i]->qp_num & 0xfffff) > 0xffff;
		made++;
		if (i + 1 == BATCH)
			first = ms_since(t0);
		if (i == nqp - BATCH)
			tl = ktime_get();
	}
	made_ms = ms_since(t0);
	if (made == nqp)
		last = ms_since(tl);
	xa_destroy(&nums);
	pr_info("vrnic_kqp_scale: # %d QPs created in %llu ms; the first %d in %llu ms, the last %d in %llu ms\n",
		made, made_ms, BATCH, first, BATCH, last);
	fails += tap(2, made == nqp && !dup && (nqp <= 65534 || past16),
		     "every RC QP created, numbers distinct, some past 16 bits of index");
	pr_info("vrnic_kqp_scale: # %d of %d made, %d duplicate numbers, %d past 16 bits\n",
		made, nqp, dup, past16);
	fails += tap(3, made == nqp &&
		     !ib_modify_qp(qps[nqp - 1], &attr, IB_QP_STATE |
				   IB_QP_PKEY_INDEX | IB_QP_PORT |
				   IB_QP_ACCESS_FLAGS),
		     "the last QP made moves to INIT");
	t0 = ktime_get();
	for (i = 0; i < made; i++)
		gone += !ib_destroy_qp(qps[i]);
	gone_ms = ms_since(t0);
	pr_info("vrnic_kqp_scale: # %d QPs destroyed in %llu ms\n", gone,
		gone_ms);
	*all_gone = gone == made;
	return fails;
}

static int __init vrnic_kqp_scale_init(void)
{
	struct ib_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ib_qp **qps = NULL;
	struct ib_device *dev;
	struct ib_srq *srq;
	struct ib_pd *pd;
	struct ib_cq *cq;
	bool all_gone = false;
	int fails = 0, ret = 0;

	if (nqp < 2 * BATCH)
		nqp = 2 * BATCH;
	dev = ib_device_get_by_name("vrnic0", RDMA_DRIVER_UNKNOWN);
	if (!dev) {
		pr_err("vrnic_kqp_scale: no vrnic0\n");
		return -ENODEV;
	}
	pr_info("vrnic_kqp_scale: 1..4\n");
	fails += tap(1, dev->attrs.max_qp >= nqp, "max_qp covers the QPs");
	qps = vcalloc(nqp, sizeof(*qps));
	if (!qps) {
		ret = -ENOMEM;
		goto put_dev;
	}
	pd = ib_alloc_pd(dev, 0);
	if (IS_ERR(pd)) {
		ret = PTR_ERR(pd);
		goto free_qps;
	}
	cq = ib_alloc_cq(dev, NULL, 16, 0, IB_POLL_DIRECT);
	if (IS_ERR(cq)) {
		ret = PTR_ERR(cq);
		goto free_pd;
	}
	srq = ib_create_srq(pd, &sa);
	if (IS_ERR(srq)) {
		ret = PTR_ERR(srq);
		goto free_cq;
	}
	fails += run(pd, cq, srq, qps, &all_gone);
	ret = ib_destroy_srq_user(srq, NULL);
	fails += tap(4, all_gone && !ret,
		     "every QP destroyed, then the SRQ, CQ and PD");
free_cq:
	ib_free_cq(cq);
free_pd:
	ib_dealloc_pd(pd);
free_qps:
	vfree(qps);
put_dev:
	ib_device_put(dev);
	if (ret)
		pr_info("vrnic_kqp_scale: # result %d\n", ret);
	return ret ? ret : fails ? -EIO : 0;
}

static void __exit vrnic_kqp_scale_exit(void)
{
}

module_init(vrnic_kqp_scale_init);
module_exit(vrnic_kqp_scale_exit);
MODULE_DESCRIPTION("vrnic kernel QP scale test");
MODULE_LICENSE("GPL");

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic_ib: the RDMA driver of the vrnic RoCEv2 NIC.  It binds to the
 * auxiliary device "vrnic.rdma.<n>" of the PCI function driver (vrnic.ko,
 * ../core) and registers the ib_device.  Admin commands go through the
 * function's exported calls (vrnic_aux.h); its EQ handlers call back here.
 */
#ifndef _VRNIC_H_
#define _VRNIC_H_

#include <linux/bitfield.h>
#include <linux/mutex.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/spinlock.h>
#include <linux/workqueue.h>
#include <linux/xarray.h>
#include <rdma/ib_umem.h>
/* Some 6.12 stable trees moved the umem block iterator here (Kbuild). */
#ifdef VRNIC_HAVE_RDMA_ITER_H
#include <rdma/iter.h>
#endif
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "vrnic_hw.h"
#include "vrnic_aux.h"

/* The RDMA device: what it needs of the function is copied at probe. */
/*
 * Page sizes the device takes for an MR (page_shift 12..30), reported as
 * page_size_cap.  A user MR uses the largest one its pages allow (huge
 * pages: 2 MiB or 1 GiB), so its page list is that much shorter.
 */
#define VRNIC_MR_PGSZ_BITMAP	GENMASK_ULL(30, 12)

/* A cc_params file: what it shows (vrnic_cc.c). */
struct vrnic_cc_file {
	struct vrnic_dev *vdev;
	u8 kind;
	u8 index;		/* knob, or priority */
};

struct vrnic_cc_debugfs {
	struct dentry *dir;	/* <debugfs>/vrnic/<ibdev>, NULL if none */
	struct mutex lock;	/* read-modify-write of the enable masks */
	/* cc_algo, the DCQCN and Swift knobs, np_enable/ and rp_enable/ */
	struct vrnic_cc_file files[1 + VRNIC_CC_NUM_DCQCN + VRNIC_CC_NUM_SWIFT +
				   2 * VRNIC_NUM_PRIOS];
};

struct vrnic_dev {
	struct ib_device ibdev;
	struct vrnic_pf *pf;	/* the function, for admin commands */
	struct pci_dev *pdev;	/* DMA device */
	void __iomem *db;	/* doorbell page 0 */
	resource_size_t db_bar_start;
	struct net_device *netdev;
	unsigned int num_ceqs;	/* completion EQs 1..num_ceqs */
	struct vrnic_device_attr attr;
	struct vrnic_rdma_client client;	/* EQ events from the function */
	bool port_events;	/* the ib_device may see port events */
	/*
	 * Port events come from the netdev (its notifier), and port_active
	 * is what was last reported, written under RTNL by the notifier.
	 * query_port reports it too (vrnic_ib_port_state()), so that the port
	 * is DOWN exactly when PORT_ERR was raised: the notifier hears of a
	 * carrier change only when linkwatch runs, up to a second later, and
	 * a flap shorter than that raises nothing.
	 */
	struct notifier_block netdev_nb;
	bool port_active;
	/*
	 * The function went FATAL and is quiesced: no CQE will come any
	 * more.  Kernel QPs' outstanding work is flushed in software
	 * (vrnic_ib_qp_flush()), moves to ERR or RESET succeed without the
	 * device, and flush_work kicks the CQs of the QPs with work left.
	 */
	bool dead;
	struct work_struct flush_work;
	struct xarray cq_xa;	/* cqn -> struct vrnic_cq, for events */
	struct xarray qp_xa;	/* qpn -> struct vrnic_qp, for events */
	struct xarray srq_xa;	/* srqn -> struct vrnic_srq, for events */
	struct vrnic_cc_debugfs cc_dbg;
	/*
	 * debugfs selective_repeat: RC and XRC QPs moved to RTR from now on
	 * tell the device their peer agreed to selective repeat (both ends
	 * must set it; off by default, as a standard peer only knows
	 * go-back-N).
	 */
	bool selective_repeat;
	/*
	 * debugfs send_window: the PSNs in flight at most for RC and XRC QPs
	 * moved to RTR from now on (IRN's BDP cap); 0, the default, is the
	 * device's maximum, and more is taken as the maximum.
	 */
	u16 send_window;
	/*
	 * debugfs spray_paths: the UDP source ports RC and XRC QPs moved to
	 * RTR from now on spread their request packets over when they use
	 * selective repeat (ECMP multipath); 0, the default, and 1 are one port, more
	 * than VRNIC_SPRAY_PATHS_MAX is taken as the maximum.
	 */
	u8 spray_paths;
	/*
	 * debugfs ece_selective_repeat: user contexts opened from now on
	 * offer selective repeat through ECE (on by default with the
	 * capability); a QP uses it only once its peer agreed.
	 */
	bool ece_selective_repeat;
	/*
	 * debugfs user_transport: user contexts opened from now on may give
	 * their reliable QPs their own transport (vrnicdv: selective repeat,
	 * send window, spray paths), in place of the defaults above; on by
	 * default with the capability.  Off, those defaults and ECE are
	 * policy: no process can spray over more ports than spray_paths.
	 */
	bool user_transport;
};

struct vrnic_ucontext {
	struct ib_ucontext ibucontext;
	struct rdma_user_mmap_entry *db_entry;
	u32 page;		/* doorbell page = device context id */
	struct mutex dbrec_lock;	/* dbrec_pages */
	struct list_head dbrec_pages;	/* struct vrnic_dbrec_page */
	u32 ece_offer;		/* what its QPs offer: all they may agree to */
	bool user_transport;	/* its QPs may choose their transport */
};

/*
 * A pinned page of a process's doorbell records, shared by every object of
 * the context whose record lies in it (the provider packs them), so that
 * a thousand QPs pin a few pages, not a thousand.
 */
struct vrnic_dbrec_page {
	struct list_head list;
	struct vrnic_ucontext *uctx;
	struct ib_umem *umem;
	unsigned long user_virt;	/* page-aligned */
	dma_addr_t dma;
	unsigned int refcnt;		/* under uctx->dbrec_lock */
};

struct vrnic_user_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	struct vrnic_dev *vdev;
	u32 page;
};

struct vrnic_pd {
	struct ib_pd ibpd;
	u32 pdn;
};

/* An XRC domain: one device object however many processes open it. */
struct vrnic_xrcd {
	struct ib_xrcd ibxrcd;
	u32 xrcdn;
};

static inline struct vrnic_xrcd *to_vxrcd(struct ib_xrcd *ibxrcd)
{
	return container_of(ibxrcd, struct vrnic_xrcd, ibxrcd);
}

/* A memory window: its rkey (ib_mw.rkey) names it to the device. */
struct vrnic_mw {
	struct ib_mw ibmw;
};

/* An address handle is the UD address vector the WQEs carry. */
struct vrnic_ah {
	struct ib_ah ibah;
	struct vrnic_ud_av av;	/* dest_qpn and qkey filled per WQE */
};

struct vrnic_mr {
	struct ib_mr ibmr;
	struct ib_umem *umem;
	/* fast-register MRs: the page list REG_MR points the device at */
	__le64 *pbl;
	dma_addr_t pbl_dma;
	u32 max_pages;
	u32 npages;
};

/*
 * A kernel ring: 4 KiB coherent pages, so that the ring itself needs no
 * allocation above order 0, shown to the device as a page list
 * (VRNIC_RING_PAGED; the list is freed after create, and above order 2
 * only for a ring over 8 MiB).  An entry is a power of two of at most a
 * page: none straddles two.
 */
struct vrnic_ib_kring {
	void **va;		/* NULL: not a kernel ring */
	dma_addr_t *dma;
	u32 npages;
	u32 shift;		/* log2 of the entry size */
	u32 mask;		/* entries - 1 */
};

static inline void *vrnic_ib_kring_slot(const struct vrnic_ib_kring *r,
					u32 idx)
{
	size_t off = (size_t)(idx & r->mask) << r->shift;

	return r->va[off / VRNIC_RING_PAGE_SIZE] + off % VRNIC_RING_PAGE_SIZE;
}

struct vrnic_cq {
	struct ib_cq ibcq;
	u32 cqn;
	u32 log_depth;
	u8 eqn;
	spinlock_t lock;	/* kernel CQs: ci, polling, the QP lists */
	u32 ci;
	/* kernel QPs on this CQ, flushed by a dead device's poll_cq */
	struct list_head send_qps, recv_qps;
	/* kernel CQs */
	struct vrnic_ib_kring ring;
	struct vrnic_cq_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	/* user CQs */
	struct ib_umem *umem;
	struct vrnic_dbrec_page *dbrec_page;
};

struct vrnic_srq {
	struct ib_srq ibsrq;
	u32 srqn;
	u32 log, shift;
	u32 max_sge;
	u32 limit;		/* as last armed */
	/* kernel SRQs */
	struct vrnic_ib_kring ring;
	struct vrnic_srq_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	spinlock_t lock;	/* head */
	u32 head;
	/* user SRQs */
	struct ib_umem *umem;
	struct vrnic_dbrec_page *dbrec_page;
};

struct vrnic_qp {
	struct ib_qp ibqp;
	u32 qpn;
	u8 type;		/* enum vrnic_qp_type */
	u8 state;		/* enum ib_qp_state */
	bool no_rq;		/* receives come from an SRQ, or none (XRC) */
	u32 sq_log, rq_log, sq_shift, rq_shift;
	u32 max_send_sge, max_recv_sge, max_inline;
	bool sig_all;
	struct mutex state_lock;	/* modify_qp, attr */
	struct vrnic_qp_attr attr;	/* what the device was last told */
	/* kernel QPs */
	struct vrnic_ib_kring sq, rq;
	struct vrnic_qp_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	struct list_head send_cq_node, recv_cq_node;	/* on the CQs' lists */
	spinlock_t sq_lock;	/* sq_head, sq_tail */
	spinlock_t rq_lock;	/* rq_head, rq_tail */
	u32 sq_head, sq_tail, rq_head, rq_tail;
	/* user QPs */
	struct ib_umem *sq_umem, *rq_umem;
	struct vrnic_dbrec_page *dbrec_page;
};

static inline struct vrnic_cq *to_vcq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct vrnic_cq, ibcq);
}

static inline struct vrnic_qp *to_vqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct vrnic_qp, ibqp);
}

static inline struct vrnic_srq *to_vsrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct vrnic_srq, ibsrq);
}

static inline struct vrnic_ah *to_vah(struct ib_ah *ibah)
{
	return container_of(ibah, struct vrnic_ah, ibah);
}

static inline bool vrnic_ib_qp_is_ud(const struct vrnic_qp *qp)
{
	return vrnic_qpt_is_datagram(qp->type);
}

static inline struct vrnic_pd *to_vpd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct vrnic_pd, ibpd);
}

static inline u32 vrnic_ib_uctx_of(struct ib_udata *udata)
{
	struct vrnic_ucontext *uctx;

	if (!udata)
		return 0;
	uctx = rdma_udata_to_drv_context(udata, struct vrnic_ucontext,
					 ibucontext);
	return uctx ? uctx->page : 0;
}

/*
 * Read a provider's request of size bytes (spec, "User ABI"): a shorter
 * one, from an older provider, is zero-extended; the bytes of a longer one
 * beyond what this driver knows must be zero.
 */
static inline int vrnic_ib_udata_req(struct ib_udata *udata, void *req,
				     size_t size)
{
	int ret = ib_copy_from_udata(req, udata, min(size, udata->inlen));

	if (ret)
		return ret;
	if (udata->inlen > size &&
	    !ib_is_udata_cleared(udata, size, udata->inlen - size))
		return -EOPNOTSUPP;
	return 0;
}

/*
 * A verb that takes no driver request: whatever a provider sends must be
 * zero, so that a request can be defined later without guessing what old
 * providers sent.
 */
static inline int vrnic_ib_udata_no_req(struct ib_udata *udata)
{
	if (udata && udata->inlen &&
	    !ib_is_udata_cleared(udata, 0, udata->inlen))
		return -EOPNOTSUPP;
	return 0;
}

/* The port is ACTIVE while its netdev is up and has a carrier. */
static inline bool vrnic_ib_port_active(struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

static inline struct vrnic_dev *to_vdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct vrnic_dev, ibdev);
}

/*
 * The port's state for query_port: what the last port event said (see
 * port_active), DOWN once the function is dead, and the netdev's own
 * state while no events are raised (in probe, before port_events).
 */
static inline bool vrnic_ib_port_state(struct vrnic_dev *vdev)
{
	if (READ_ONCE(vdev->dead))
		return false;
	if (!READ_ONCE(vdev->port_events))
		return vrnic_ib_port_active(vdev->netdev);
	return READ_ONCE(vdev->port_active);
}

static inline void vrnic_ib_db(struct vrnic_dev *vdev, u32 off, u32 val)
{
	writel(val, vdev->db + off);
}

/* Admin commands run on the function's admin queue (sleeps). */
static inline int vrnic_ib_admin_exec(struct vrnic_dev *vdev,
				      struct vrnic_admin_cmd *cmd, u32 *result)
{
	return vrnic_pf_admin_exec(vdev->pf, cmd, result);
}

static inline int vrnic_ib_admin_query(struct vrnic_dev *vdev, u8 opcode,
				       void *out, size_t len)
{
	return vrnic_pf_admin_query(vdev->pf, opcode, out, len);
}

/* vrnic_mr.c */
struct ib_mr *vrnic_ib_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *vrnic_ib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 virt, int access, struct ib_udata *udata);
int vrnic_ib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
int vrnic_ib_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp);
int vrnic_ib_fill_res_cq_entry(struct sk_buff *msg, struct ib_cq *ibcq);
int vrnic_ib_fill_res_mr_entry(struct sk_buff *msg, struct ib_mr *ibmr);
int vrnic_ib_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int vrnic_ib_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int vrnic_ib_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int vrnic_ib_dealloc_mw(struct ib_mw *ibmw);
struct ib_mr *vrnic_ib_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
				u32 max_num_sg);
int vrnic_ib_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		       unsigned int *sg_offset);
u32 vrnic_ib_access(int ib_access);
int vrnic_ib_to_ib_access(u32 access);

/* vrnic_queue.c */
int vrnic_ib_kring_alloc(struct vrnic_dev *vdev, struct vrnic_ib_kring *r,
			 u32 log_depth, u32 shift, __le64 **list,
			 dma_addr_t *list_dma, size_t *list_size);
void vrnic_ib_kring_free(struct vrnic_dev *vdev, struct vrnic_ib_kring *r);
int vrnic_ib_umem_page_list(struct vrnic_dev *vdev, struct ib_umem *umem,
			    __le64 **list, dma_addr_t *list_dma, size_t *list_size);
int vrnic_ib_ring_pin(struct vrnic_dev *vdev, u64 addr, size_t size,
		      struct ib_umem **umem, __le64 **list, dma_addr_t *dma,
		      size_t *list_size);
int vrnic_ib_pin_dbrec(struct ib_udata *udata, u64 addr,
		       struct vrnic_dbrec_page **page, dma_addr_t *dma);
void vrnic_ib_unpin_dbrec(struct vrnic_dbrec_page *page);

/* vrnic_cq.c */
int vrnic_ib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		       struct uverbs_attr_bundle *attrs);
int vrnic_ib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int vrnic_ib_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int vrnic_ib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
void vrnic_ib_cq_clean(struct vrnic_cq *cq, u32 qpn);
void vrnic_ib_cq_event(struct vrnic_dev *vdev, u32 cqn, bool error);

/* vrnic_srq.c */
int vrnic_ib_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			struct ib_udata *udata);
int vrnic_ib_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			enum ib_srq_attr_mask mask, struct ib_udata *udata);
int vrnic_ib_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int vrnic_ib_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int vrnic_ib_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad_wr);
void vrnic_ib_srq_event(struct vrnic_dev *vdev, u32 srqn);

/* vrnic_qp.c */
int vrnic_ib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		       struct ib_udata *udata);
int vrnic_ib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		       struct ib_udata *udata);
int vrnic_ib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		      struct ib_qp_init_attr *init_attr);
int vrnic_ib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int vrnic_ib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr);
int vrnic_ib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr);
void vrnic_ib_fill_recv_wqe(void *slot, const struct ib_recv_wr *wr);
void vrnic_ib_qp_event(struct vrnic_dev *vdev, u32 qpn, enum ib_event_type type);
void vrnic_ib_qp_completed(struct vrnic_qp *qp, bool send, u32 idx);
int vrnic_ib_qp_flush(struct vrnic_qp *qp, bool send, struct ib_wc *wc, int max);
void vrnic_ib_qp_kick_flush(struct work_struct *work);

/* vrnic_cc.c */
void vrnic_ib_cc_debugfs_init(struct vrnic_dev *vdev);
void vrnic_ib_cc_debugfs_cleanup(struct vrnic_dev *vdev);
void vrnic_ib_cc_debugfs_register(void);
void vrnic_ib_cc_debugfs_unregister(void);

/* vrnic_verbs.c */
int vrnic_ib_register(struct vrnic_dev *vdev);
void vrnic_ib_unregister(struct vrnic_dev *vdev);
void vrnic_ib_port_event(struct vrnic_dev *vdev, bool up);

#endif /* _VRNIC_H_ */

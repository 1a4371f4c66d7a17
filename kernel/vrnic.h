/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic: Linux driver for the vrnic RoCEv2 RDMA NIC.
 */
#ifndef _VRNIC_H_
#define _VRNIC_H_

#include <linux/completion.h>
#include <linux/interrupt.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/semaphore.h>
#include <linux/spinlock.h>
#include <linux/xarray.h>
#include <rdma/ib_umem.h>
/* Some 6.12 stable trees moved the umem block iterator here (Kbuild). */
#ifdef VRNIC_HAVE_RDMA_ITER_H
#include <rdma/iter.h>
#endif
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "vrnic_hw.h"

#define DRV_NAME		"vrnic"

#define VRNIC_AQ_LOG_DEPTH	5
#define VRNIC_AEQ_LOG_DEPTH	7
#define VRNIC_CEQ_LOG_DEPTH	8
#define VRNIC_ADMIN_TIMEOUT_MS	5000
#define VRNIC_ETH_LOG_DEPTH	8

struct vrnic_dev;

/* Admin queue: commands in, phase-tagged completions out. */
struct vrnic_aq_wait {
	struct completion done;
	u8 status;
	u32 result;
};

struct vrnic_aq {
	struct vrnic_admin_cmd *sq;
	dma_addr_t sq_dma;
	struct vrnic_admin_cqe *cq;
	dma_addr_t cq_dma;
	u32 depth;
	u16 pi;			/* next command slot */
	u16 ci;			/* next completion to look at */
	spinlock_t lock;	/* protects pi, ci and the waits */
	struct semaphore slots;	/* free submission slots */
	struct vrnic_aq_wait *waits;
	bool dead;		/* a command timed out: device unusable */
};

/* Event queue: the AEQ (eqn 0) or a completion EQ. */
struct vrnic_eq {
	struct vrnic_dev *vdev;
	struct vrnic_eqe *ring;
	dma_addr_t dma;
	u32 log_depth;
	u16 ci;
	u8 eqn;
	u16 vector;
	char name[32];
};

struct vrnic_eth_buf {
	struct sk_buff *skb;
	dma_addr_t dma;
	u32 len;
};

struct vrnic_eth_ring {
	struct vrnic_eth_desc *desc;
	dma_addr_t dma;
	struct vrnic_eth_buf *bufs;
	u32 depth;
	u16 pi;			/* next descriptor the driver posts */
	u16 ci;			/* next descriptor the driver reaps */
};

struct vrnic_netdev_priv {
	struct vrnic_dev *vdev;
	struct napi_struct napi;
	struct vrnic_eth_ring tx;
	struct vrnic_eth_ring rx;
	u32 rx_buf_len;
	bool rings_live;
};

struct vrnic_dev {
	struct ib_device ibdev;
	struct pci_dev *pdev;
	void __iomem *regs;
	void __iomem *db;	/* doorbell page 0 */
	resource_size_t db_bar_start;
	struct net_device *netdev;
	struct vrnic_aq aq;
	struct vrnic_eq aeq;
	struct vrnic_eq ceq[VRNIC_MAX_EQS];
	unsigned int num_ceqs;	/* ceq[1..num_ceqs] */
	unsigned int num_vectors;
	struct vrnic_device_attr attr;
	atomic_t test_irqs;
	bool port_events;	/* netdev and ib_device may see port events */
	struct xarray cq_xa;	/* cqn -> struct vrnic_cq, for events */
	struct xarray qp_xa;	/* qpn -> struct vrnic_qp, for events */
	struct xarray srq_xa;	/* srqn -> struct vrnic_srq, for events */
};

struct vrnic_ucontext {
	struct ib_ucontext ibucontext;
	struct rdma_user_mmap_entry *db_entry;
	u32 page;		/* doorbell page = device context id */
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

struct vrnic_cq {
	struct ib_cq ibcq;
	u32 cqn;
	u32 log_depth;
	u8 eqn;
	u8 arm_sn;
	spinlock_t lock;	/* kernel CQs: ci and polling */
	u32 ci;
	/* kernel CQs */
	struct vrnic_cqe *ring;
	dma_addr_t ring_dma;
	struct vrnic_cq_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	/* user CQs */
	struct ib_umem *umem;
	struct ib_umem *dbrec_umem;
};

struct vrnic_srq {
	struct ib_srq ibsrq;
	u32 srqn;
	u32 log, shift;
	u32 max_sge;
	u32 limit;		/* as last armed */
	/* kernel SRQs */
	void *ring;
	dma_addr_t ring_dma;
	struct vrnic_srq_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	spinlock_t lock;	/* head */
	u32 head;
	/* user SRQs */
	struct ib_umem *umem, *dbrec_umem;
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
	struct vrnic_qp_attr attr;	/* what the device was last told */
	/* kernel QPs */
	void *sq;
	dma_addr_t sq_dma;
	void *rq;
	dma_addr_t rq_dma;
	struct vrnic_qp_dbrec *dbrec;
	dma_addr_t dbrec_dma;
	spinlock_t sq_lock;	/* sq_head, sq_tail */
	spinlock_t rq_lock;	/* rq_head, rq_tail */
	u32 sq_head, sq_tail, rq_head, rq_tail;
	/* user QPs */
	struct ib_umem *sq_umem, *rq_umem, *dbrec_umem;
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

static inline bool vrnic_qp_is_ud(const struct vrnic_qp *qp)
{
	return vrnic_qpt_is_datagram(qp->type);
}

static inline struct vrnic_pd *to_vpd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct vrnic_pd, ibpd);
}

static inline u32 vrnic_uctx_of(struct ib_udata *udata)
{
	struct vrnic_ucontext *uctx;

	if (!udata)
		return 0;
	uctx = rdma_udata_to_drv_context(udata, struct vrnic_ucontext,
					 ibucontext);
	return uctx ? uctx->page : 0;
}

static inline struct vrnic_dev *to_vdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct vrnic_dev, ibdev);
}

static inline u32 vrnic_rd(struct vrnic_dev *vdev, u32 reg)
{
	return readl(vdev->regs + reg);
}

static inline void vrnic_wr(struct vrnic_dev *vdev, u32 reg, u32 val)
{
	writel(val, vdev->regs + reg);
}

static inline void vrnic_db(struct vrnic_dev *vdev, u32 off, u32 val)
{
	writel(val, vdev->db + off);
}

/* vrnic_admin.c */
int vrnic_aq_init(struct vrnic_dev *vdev);
void vrnic_aq_free(struct vrnic_dev *vdev);
void vrnic_aq_poll(struct vrnic_dev *vdev);
int vrnic_admin_exec(struct vrnic_dev *vdev, struct vrnic_admin_cmd *cmd,
		     u32 *result);
int vrnic_admin_query(struct vrnic_dev *vdev, u8 opcode, void *out,
		      size_t len);

/* vrnic_eq.c */
int vrnic_aeq_alloc(struct vrnic_dev *vdev);
void vrnic_aeq_free(struct vrnic_dev *vdev);
int vrnic_eq_request_irqs(struct vrnic_dev *vdev);
void vrnic_eq_free_irqs(struct vrnic_dev *vdev);
int vrnic_ceqs_create(struct vrnic_dev *vdev);
void vrnic_ceqs_destroy(struct vrnic_dev *vdev);
void vrnic_eq_arm(struct vrnic_eq *eq);

/* vrnic_eth.c */
int vrnic_netdev_register(struct vrnic_dev *vdev);
void vrnic_netdev_unregister(struct vrnic_dev *vdev);
void vrnic_eth_event(struct vrnic_dev *vdev, u8 type);
void vrnic_eth_link_change(struct vrnic_dev *vdev, bool up);

/* vrnic_mr.c */
struct ib_mr *vrnic_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *vrnic_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				u64 virt, int access, struct ib_udata *udata);
int vrnic_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
int vrnic_fill_res_qp_entry(struct sk_buff *msg, struct ib_qp *ibqp);
int vrnic_fill_res_cq_entry(struct sk_buff *msg, struct ib_cq *ibcq);
int vrnic_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int vrnic_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int vrnic_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata);
int vrnic_dealloc_mw(struct ib_mw *ibmw);
struct ib_mr *vrnic_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			     u32 max_num_sg);
int vrnic_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		    unsigned int *sg_offset);
int vrnic_umem_page_list(struct vrnic_dev *vdev, struct ib_umem *umem,
			 __le64 **list, dma_addr_t *list_dma, size_t *list_size);
u32 vrnic_ib_access(int ib_access);
int vrnic_to_ib_access(u32 access);

/* vrnic_cq.c */
int vrnic_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		    struct uverbs_attr_bundle *attrs);
int vrnic_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int vrnic_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int vrnic_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
void vrnic_cq_clean(struct vrnic_cq *cq, u32 qpn);
void vrnic_cq_event(struct vrnic_dev *vdev, u32 cqn, bool error);
int vrnic_pin_dbrec(struct vrnic_dev *vdev, u64 addr, struct ib_umem **umem,
		    dma_addr_t *dma);

/* vrnic_srq.c */
int vrnic_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
		     struct ib_udata *udata);
int vrnic_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
		     enum ib_srq_attr_mask mask, struct ib_udata *udata);
int vrnic_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int vrnic_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int vrnic_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			const struct ib_recv_wr **bad_wr);
void vrnic_srq_event(struct vrnic_dev *vdev, u32 srqn);

/* vrnic_qp.c */
int vrnic_ring_pin(struct vrnic_dev *vdev, u64 addr, size_t size,
		   struct ib_umem **umem, __le64 **list, dma_addr_t *dma,
		   size_t *list_size);
int vrnic_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		    struct ib_udata *udata);
int vrnic_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		    struct ib_udata *udata);
int vrnic_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		   struct ib_qp_init_attr *init_attr);
int vrnic_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
int vrnic_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr);
int vrnic_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr);
void vrnic_fill_recv_wqe(void *slot, const struct ib_recv_wr *wr);
void vrnic_qp_event(struct vrnic_dev *vdev, u32 qpn, enum ib_event_type type);
void vrnic_qp_completed(struct vrnic_qp *qp, bool send, u32 idx);

/* vrnic_verbs.c */
int vrnic_ib_register(struct vrnic_dev *vdev);
void vrnic_ib_unregister(struct vrnic_dev *vdev);
void vrnic_ib_port_event(struct vrnic_dev *vdev, bool up);

#endif /* _VRNIC_H_ */

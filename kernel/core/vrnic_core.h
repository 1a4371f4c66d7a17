/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic: the PCI function driver (vrnic.ko).  It owns the PCI device, the
 * admin queue, the event queues and the Ethernet netdev, and creates the
 * auxiliary device the RDMA driver (vrnic_ib.ko) binds to.
 */
#ifndef _VRNIC_CORE_H_
#define _VRNIC_CORE_H_

#include <linux/bitfield.h>
#include <linux/completion.h>
#include <linux/mutex.h>
#include <linux/workqueue.h>
#include <linux/interrupt.h>
#include <linux/netdevice.h>
#include <linux/pci.h>
#include <linux/spinlock.h>
#include <linux/u64_stats_sync.h>
#include <linux/wait.h>

#include "vrnic_hw.h"
#include "vrnic_aux.h"

#define DRV_NAME		"vrnic"

#define VRNIC_AQ_LOG_DEPTH	5
#define VRNIC_AEQ_LOG_DEPTH	7
#define VRNIC_CEQ_LOG_DEPTH	8
#define VRNIC_ADMIN_TIMEOUT_MS	5000
#define VRNIC_ETH_LOG_DEPTH	8

struct vrnic_pf;

/* Admin queue: commands in, phase-tagged completions out. */
struct vrnic_aq_wait {
	struct completion done;
	u8 status;
	bool busy;		/* issued, and its waiter has not let go */
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
	wait_queue_head_t slot_wq;	/* issuers waiting for a slot */
	struct vrnic_aq_wait *waits;
	bool dead;		/* vrnic_pf_fatal() ran: commands fail at once */
};

/* Event queue: the AEQ (eqn 0) or a completion EQ. */
struct vrnic_eq {
	struct vrnic_pf *pf;
	struct vrnic_eqe *ring;
	dma_addr_t dma;
	u32 log_depth;
	u16 ci;
	u8 eqn;
	u16 vector;
	char name[32];
};

struct vrnic_eth_buf {
	struct sk_buff *skb;	/* TX */
	struct page *page;	/* RX, from the ring's page_pool */
	dma_addr_t dma;
	u32 len;
};

struct vrnic_eth_ring {
	struct vrnic_eth_desc *desc;
	dma_addr_t dma;
	struct vrnic_eth_buf *bufs;
	struct page_pool *pp;	/* RX: the buffers' pages */
	u32 depth;
	u16 pi;			/* next descriptor the driver posts */
	u16 ci;			/* next descriptor the driver reaps */
	bool live;		/* the device has it: created, not destroyed */
};

/* Written by the NAPI poll only (one writer), read by ndo_get_stats64. */
struct vrnic_ring_stats {
	struct u64_stats_sync syncp;
	u64_stats_t packets;
	u64_stats_t bytes;
	u64_stats_t errors;
};

struct vrnic_netdev_priv {
	struct vrnic_pf *pf;
	struct napi_struct napi;
	struct vrnic_ring_stats tx_stats;
	struct vrnic_ring_stats rx_stats;
	struct vrnic_eth_ring tx;
	struct vrnic_eth_ring rx;
	u32 rx_buf_len;
	bool rings_live;
	bool rings_up;		/* rings allocated, NAPI enabled (RTNL) */
	struct work_struct rx_mode_work;	/* ndo_set_rx_mode, can sleep */
	struct delayed_work refill_work;	/* RX refill after an OOM */
};

/*
 * The memory the device writes evicted QP contexts to when it models a
 * QP-context cache (attr.qpc_cache): VRNIC_QPC_ENTRIES contexts in 4 KiB pages
 * and their list.  Kept over function resets, freed after the last DMA.
 */
struct vrnic_qpc_mem {
	__le64 *list;		/* the device's copy of the page addresses */
	dma_addr_t list_dma;
	void **pages;
	dma_addr_t *dma;	/* the driver's own, to free by */
	unsigned int npages;
};

/* One PCI function. */
struct vrnic_pf {
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
	u32 caps;		/* VRNIC_REG_CAPS: VRNIC_CAP_* */
	struct vrnic_device_attr attr;
	struct vrnic_qpc_mem qpc;
	struct dma_pool *cmd_pool;	/* VRNIC_CMD_BUF_SIZE command buffers */
	atomic_t test_irqs;
	bool port_events;	/* the netdev may see port events */
	bool eth_events;	/* the netdev may see ETH_TX/ETH_RX events */
	struct vrnic_adev *adev;	/* the RDMA auxiliary device */
	spinlock_t rdma_lock;	/* serializes (un)registering rdma */
	struct vrnic_rdma_client __rcu *rdma;	/* bound RDMA driver */
	struct mutex fatal_lock;	/* one vrnic_pf_fatal() at a time */
	struct work_struct fatal_work;	/* a FATAL event from the AEQ */
	struct mutex reset_lock;	/* one recovery or PCI reset at a time */
	struct devlink_health_reporter *fatal_reporter;
	struct work_struct health_work;	/* reports a fatal error to devlink */
	struct delayed_work status_poll; /* a device that stopped answering */
	char fatal_why[64];		/* what vrnic_pf_fatal() was told */
	bool removing;			/* no more health reports */
};

static inline u32 vrnic_rd(struct vrnic_pf *pf, u32 reg)
{
	return readl(pf->regs + reg);
}

static inline void vrnic_wr(struct vrnic_pf *pf, u32 reg, u32 val)
{
	writel(val, pf->regs + reg);
}

static inline void vrnic_db(struct vrnic_pf *pf, u32 off, u32 val)
{
	writel(val, pf->db + off);
}

/* vrnic_main.c */
void vrnic_pf_fatal_irq(struct vrnic_pf *pf, u32 error);
void vrnic_pf_down(struct vrnic_pf *pf);
int vrnic_pf_up(struct vrnic_pf *pf);
#define VRNIC_SELF_TESTS	3	/* scratch, interrupts, DMA */
bool vrnic_pf_self_test(struct vrnic_pf *pf, u64 *res);
bool vrnic_pf_has_self_test(struct vrnic_pf *pf);

/* vrnic_devlink.c */
struct vrnic_pf *vrnic_devlink_alloc(struct pci_dev *pdev);
void vrnic_devlink_free(struct vrnic_pf *pf);
int vrnic_devlink_register(struct vrnic_pf *pf);
void vrnic_devlink_unregister(struct vrnic_pf *pf);
void vrnic_health_work(struct work_struct *work);
void vrnic_devlink_healthy(struct vrnic_pf *pf);

/* vrnic_admin.c */
int vrnic_aq_alloc(struct vrnic_pf *pf);
void vrnic_aq_program(struct vrnic_pf *pf);
void vrnic_aq_restart(struct vrnic_pf *pf);
void vrnic_aq_free(struct vrnic_pf *pf);
void vrnic_aq_poll(struct vrnic_pf *pf);

/* vrnic_eq.c */
int vrnic_aeq_alloc(struct vrnic_pf *pf);
void vrnic_aeq_program(struct vrnic_pf *pf);
void vrnic_aeq_restart(struct vrnic_pf *pf);
void vrnic_aeq_free(struct vrnic_pf *pf);
int vrnic_eq_request_irqs(struct vrnic_pf *pf);
void vrnic_eq_free_irqs(struct vrnic_pf *pf);
int vrnic_ceqs_create(struct vrnic_pf *pf);
void vrnic_ceqs_destroy(struct vrnic_pf *pf);
void vrnic_eq_arm(struct vrnic_eq *eq);

/* vrnic_eth.c */
int vrnic_netdev_register(struct vrnic_pf *pf);
void vrnic_netdev_unregister(struct vrnic_pf *pf);
void vrnic_eth_event(struct vrnic_pf *pf, u8 type);
void vrnic_eth_link_change(struct vrnic_pf *pf, bool up);
void vrnic_eth_detach(struct vrnic_pf *pf);
int vrnic_eth_attach(struct vrnic_pf *pf);

/* vrnic_aux.c */
int vrnic_aux_add(struct vrnic_pf *pf);
void vrnic_aux_del(struct vrnic_pf *pf);
void vrnic_rdma_async_event(struct vrnic_pf *pf, u8 type, u32 id);
void vrnic_rdma_comp_event(struct vrnic_pf *pf, u32 cqn);

#endif /* _VRNIC_CORE_H_ */

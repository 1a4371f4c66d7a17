/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic: the interface between the PCI function driver (vrnic.ko, owns the
 * device, the admin queue, the event queues and the netdev) and the RDMA
 * driver (vrnic_ib.ko, binds to the auxiliary device "vrnic.rdma.<n>" that
 * vrnic.ko creates once the netdev is registered).
 *
 * Calls from the RDMA driver into the function are exported symbols in the
 * VRNIC namespace: the module loader resolves them and keeps vrnic.ko
 * loaded while vrnic_ib.ko is, so no call can outlive the code behind it.
 * Events go the other way through one registered client (struct
 * vrnic_rdma_client), read under RCU in the EQ interrupt handlers.
 */
#ifndef _VRNIC_AUX_H_
#define _VRNIC_AUX_H_

#include <linux/auxiliary_bus.h>
#include <linux/pci.h>
#include <linux/netdevice.h>

#include "vrnic_hw.h"

/* The auxiliary device is KBUILD_MODNAME "." VRNIC_AUX_RDMA ".<id>". */
#define VRNIC_AUX_RDMA		"rdma"

struct vrnic_pf;

/*
 * What the function gives the RDMA driver.  Every field stays valid from
 * the auxiliary device's probe until its remove returns.
 */
struct vrnic_adev {
	struct auxiliary_device adev;
	struct vrnic_pf *pf;
	struct pci_dev *pdev;		/* parent and DMA device */
	struct net_device *netdev;	/* the port's netdev */
	void __iomem *db;		/* doorbell page 0 of BAR2 */
	resource_size_t db_bar_start;
	unsigned int num_ceqs;		/* completion EQs 1..num_ceqs */
	const struct vrnic_device_attr *attr;
};

static inline struct vrnic_adev *to_vrnic_adev(struct auxiliary_device *adev)
{
	return container_of(adev, struct vrnic_adev, adev);
}

struct vrnic_rdma_client;

/*
 * Called under rcu_read_lock(), must not sleep.  Object events come in
 * hard interrupt context, from the handler of the EQ they came on: the
 * async EQ (eqn 0) for async_event, the CQ's completion EQ for
 * comp_event; FATAL also from vrnic_pf_fatal().  An RDMA driver
 * that takes an object out of what these look it up in calls
 * vrnic_pf_sync_events() for each EQ that can name it before it frees
 * the object.
 */
struct vrnic_rdma_ops {
	/* An AEQ event for the RDMA side: enum vrnic_eqe_type, object id. */
	void (*async_event)(struct vrnic_rdma_client *client, u8 type, u32 id);
	/* A completion event for CQ cqn. */
	void (*comp_event)(struct vrnic_rdma_client *client, u32 cqn);
};

struct vrnic_rdma_client {
	const struct vrnic_rdma_ops *ops;
};

int vrnic_pf_destroy(struct vrnic_pf *pf, u8 opcode, u32 id,
		     const char *what);
void vrnic_pf_fatal(struct vrnic_pf *pf, const char *why);

int vrnic_pf_register_rdma(struct vrnic_pf *pf,
			   struct vrnic_rdma_client *client);
void vrnic_pf_unregister_rdma(struct vrnic_pf *pf);
void vrnic_pf_sync_events(struct vrnic_pf *pf, unsigned int eqn);
const struct cpumask *vrnic_pf_eq_affinity(struct vrnic_pf *pf,
					   unsigned int eqn);
int vrnic_pf_admin_exec(struct vrnic_pf *pf, struct vrnic_admin_cmd *cmd,
			u32 *result);
int vrnic_pf_admin_query(struct vrnic_pf *pf, u8 opcode, void *out,
			 size_t len);

/*
 * A zeroed, coherent buffer for one command's input or output (QP
 * attributes, query results), from a pool rather than a page per call.
 */
#define VRNIC_CMD_BUF_SIZE	512
void *vrnic_pf_cmd_buf_alloc(struct vrnic_pf *pf, dma_addr_t *dma);
void vrnic_pf_cmd_buf_free(struct vrnic_pf *pf, void *buf, dma_addr_t dma);

#endif /* _VRNIC_AUX_H_ */

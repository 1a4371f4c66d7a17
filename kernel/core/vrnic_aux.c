// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic: the auxiliary device "vrnic.rdma.<n>" that the RDMA driver
 * (vrnic_ib.ko) binds to, and the one event client it registers.
 *
 * The EQ handlers hand RDMA events to the client under rcu_read_lock();
 * unregistering waits for a grace period, so once vrnic_pf_unregister_rdma()
 * returns no handler is inside the client any more.
 */
#include <linux/idr.h>
#include <linux/module.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>

#include "vrnic_core.h"

static DEFINE_IDA(vrnic_aux_ida);

static void vrnic_adev_release(struct device *dev)
{
	struct vrnic_adev *vadev = to_vrnic_adev(to_auxiliary_dev(dev));

	ida_free(&vrnic_aux_ida, vadev->adev.id);
	kfree(vadev);
}

/* After the netdev is registered: the RDMA side's probe may run in here. */
int vrnic_aux_add(struct vrnic_pf *pf)
{
	struct vrnic_adev *vadev;
	int id, ret;

	vadev = kzalloc(sizeof(*vadev), GFP_KERNEL);
	if (!vadev)
		return -ENOMEM;
	id = ida_alloc(&vrnic_aux_ida, GFP_KERNEL);
	if (id < 0) {
		kfree(vadev);
		return id;
	}
	vadev->pf = pf;
	vadev->pdev = pf->pdev;
	vadev->netdev = pf->netdev;
	vadev->db = pf->db;
	vadev->db_bar_start = pf->db_bar_start;
	vadev->num_ceqs = pf->num_ceqs;
	vadev->attr = &pf->attr;
	vadev->adev.name = VRNIC_AUX_RDMA;
	vadev->adev.id = id;
	vadev->adev.dev.parent = &pf->pdev->dev;
	vadev->adev.dev.release = vrnic_adev_release;

	ret = auxiliary_device_init(&vadev->adev);
	if (ret) {
		ida_free(&vrnic_aux_ida, id);
		kfree(vadev);
		return ret;
	}
	ret = auxiliary_device_add(&vadev->adev);
	if (ret) {
		auxiliary_device_uninit(&vadev->adev);	/* releases it */
		return ret;
	}
	pf->adev = vadev;
	return 0;
}

/* First thing on remove: unbinds the RDMA driver, which drops its client. */
void vrnic_aux_del(struct vrnic_pf *pf)
{
	auxiliary_device_delete(&pf->adev->adev);
	auxiliary_device_uninit(&pf->adev->adev);
	pf->adev = NULL;
	WARN_ON(rcu_access_pointer(pf->rdma));
}

/**
 * vrnic_pf_register_rdma - let the RDMA driver receive the function's events
 * @pf: the function, from struct vrnic_adev
 * @client: ops for RDMA async and completion events; lives until unregister
 *
 * Returns 0, or -EBUSY if a client is already registered.
 */
int vrnic_pf_register_rdma(struct vrnic_pf *pf,
			   struct vrnic_rdma_client *client)
{
	int ret = 0;

	spin_lock(&pf->rdma_lock);
	if (rcu_access_pointer(pf->rdma))
		ret = -EBUSY;
	else
		rcu_assign_pointer(pf->rdma, client);
	spin_unlock(&pf->rdma_lock);
	return ret;
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_register_rdma, VRNIC);

/**
 * vrnic_pf_unregister_rdma - stop events to the RDMA driver
 * @pf: the function
 *
 * Sleeps: returns once no EQ handler can be in the client's ops.
 */
void vrnic_pf_unregister_rdma(struct vrnic_pf *pf)
{
	spin_lock(&pf->rdma_lock);
	RCU_INIT_POINTER(pf->rdma, NULL);
	spin_unlock(&pf->rdma_lock);
	synchronize_rcu();
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_unregister_rdma, VRNIC);

/**
 * vrnic_pf_sync_events - wait for the RDMA event handlers of one EQ
 * @pf: the function
 * @eqn: the EQ: 0 for the async EQ, 1..num_ceqs for a completion EQ
 *
 * Returns once no call into the RDMA client's ops (struct vrnic_rdma_ops)
 * for an event of EQ @eqn that began before it was called is running.
 * An RDMA driver calls it after it took an object out of the table its
 * handlers look in, before it frees the object.  Vector n serves EQ n.
 *
 * Context: process, sleeps.
 */
void vrnic_pf_sync_events(struct vrnic_pf *pf, unsigned int eqn)
{
	if (WARN_ON_ONCE(eqn > pf->num_ceqs))
		return;
	synchronize_irq(pci_irq_vector(pf->pdev, eqn));
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_sync_events, VRNIC);

/**
 * vrnic_pf_eq_affinity - the CPUs the interrupt of one EQ is spread to
 * @pf: the function
 * @eqn: 1..num_ceqs, a completion EQ
 *
 * For ib_device_ops.get_vector_affinity: the RDMA driver maps its
 * completion vectors to EQs, the function owns the vectors.
 *
 * Return: the mask, or NULL if @eqn is not a completion EQ.
 */
const struct cpumask *vrnic_pf_eq_affinity(struct vrnic_pf *pf,
					   unsigned int eqn)
{
	if (eqn < 1 || eqn > pf->num_ceqs)
		return NULL;
	return pci_irq_get_affinity(pf->pdev, eqn);
}
EXPORT_SYMBOL_NS_GPL(vrnic_pf_eq_affinity, VRNIC);

void vrnic_rdma_async_event(struct vrnic_pf *pf, u8 type, u32 id)
{
	struct vrnic_rdma_client *client;

	rcu_read_lock();
	client = rcu_dereference(pf->rdma);
	if (client)
		client->ops->async_event(client, type, id);
	rcu_read_unlock();
}

void vrnic_rdma_comp_event(struct vrnic_pf *pf, u32 cqn)
{
	struct vrnic_rdma_client *client;

	rcu_read_lock();
	client = rcu_dereference(pf->rdma);
	if (client)
		client->ops->comp_event(client, cqn);
	rcu_read_unlock();
}

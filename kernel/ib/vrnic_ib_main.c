// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic_ib: the RDMA driver of the vrnic RoCEv2 NIC, an auxiliary driver.
 *
 * The PCI function driver (vrnic.ko) creates the auxiliary device
 * "vrnic.rdma.<n>" once its netdev is registered and deletes it first on
 * remove.  Probe registers for the function's RDMA events, then the
 * ib_device; remove unregisters the ib_device (its clients still get
 * completions while they drain), then the events.
 */
#include <linux/auxiliary_bus.h>
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/rtnetlink.h>

#include "vrnic.h"
#define CREATE_TRACE_POINTS
#include "vrnic_ib_trace.h"

static struct vrnic_dev *to_vdev_client(struct vrnic_rdma_client *client)
{
	return container_of(client, struct vrnic_dev, client);
}

/*
 * Tell every user of the ib_device that it is gone for good: user contexts
 * see IBV_EVENT_DEVICE_FATAL; their later commands fail with -ENODEV.
 */
static void vrnic_ib_fatal_event(struct vrnic_dev *vdev)
{
	struct ib_event ev = {
		.device = &vdev->ibdev,
		.event = IB_EVENT_DEVICE_FATAL,
		.element.port_num = 1,
	};

	dev_err(&vdev->ibdev.dev, "device fatal: raising DEVICE_FATAL\n");
	ib_dispatch_event(&ev);
}

static void vrnic_ib_async_event(struct vrnic_rdma_client *client, u8 type,
				 u32 id)
{
	struct vrnic_dev *vdev = to_vdev_client(client);

	switch (type) {
	case VRNIC_EQE_CQ_ERROR:
		vrnic_ib_cq_event(vdev, id, true);
		break;
	case VRNIC_EQE_QP_FATAL:
		vrnic_ib_qp_event(vdev, id, IB_EVENT_QP_FATAL);
		break;
	case VRNIC_EQE_QP_LAST_WQE:
		vrnic_ib_qp_event(vdev, id, IB_EVENT_QP_LAST_WQE_REACHED);
		break;
	case VRNIC_EQE_QP_SQ_DRAINED:
		vrnic_ib_qp_event(vdev, id, IB_EVENT_SQ_DRAINED);
		break;
	case VRNIC_EQE_SRQ_LIMIT:
		vrnic_ib_srq_event(vdev, id);
		break;
	case VRNIC_EQE_FATAL:
		/*
		 * The function is dead and quiesced (vrnic_pf_fatal): kernel
		 * QPs' work completes in software from now on.
		 */
		WRITE_ONCE(vdev->dead, true);
		schedule_work(&vdev->flush_work);
		if (READ_ONCE(vdev->port_events))
			vrnic_ib_fatal_event(vdev);
		break;
	default:
		break;
	}
}

static void vrnic_ib_comp_event(struct vrnic_rdma_client *client, u32 cqn)
{
	vrnic_ib_cq_event(to_vdev_client(client), cqn, false);
}

/*
 * The port's state and events have one source, the netdev: it is ACTIVE
 * while the netdev is up with a carrier, and a change of that, by "ip
 * link set" or by the device's link (which vrnic.ko turns into carrier
 * changes), raises PORT_ACTIVE or PORT_ERR here, and query_port reports
 * the state last raised.  A link change
 * of a netdev that is down changes nothing, so raises nothing.  A dead
 * function has said DEVICE_FATAL, which says it all: its carrier loss
 * raises nothing more.  Netdev notifiers run under RTNL, which
 * serialises port_active.
 */
static int vrnic_ib_netdev_event(struct notifier_block *nb,
				 unsigned long event, void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct vrnic_dev *vdev = container_of(nb, struct vrnic_dev, netdev_nb);
	bool active;

	if (ndev != vdev->netdev || !READ_ONCE(vdev->port_events) ||
	    READ_ONCE(vdev->dead))
		return NOTIFY_DONE;
	switch (event) {
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		active = vrnic_ib_port_active(ndev);
		if (active != vdev->port_active) {
			WRITE_ONCE(vdev->port_active, active);
			vrnic_ib_port_event(vdev, active);
		}
		break;
	default:
		break;
	}
	return NOTIFY_DONE;
}

static const struct vrnic_rdma_ops vrnic_ib_rdma_ops = {
	.async_event = vrnic_ib_async_event,
	.comp_event = vrnic_ib_comp_event,
};

static int vrnic_ib_probe(struct auxiliary_device *adev,
			  const struct auxiliary_device_id *id)
{
	struct vrnic_adev *vadev = to_vrnic_adev(adev);
	struct vrnic_dev *vdev;
	int ret;

	vdev = ib_alloc_device(vrnic_dev, ibdev);
	if (!vdev)
		return -ENOMEM;
	vdev->pf = vadev->pf;
	vdev->pdev = vadev->pdev;
	vdev->db = vadev->db;
	vdev->db_bar_start = vadev->db_bar_start;
	vdev->netdev = vadev->netdev;
	vdev->num_ceqs = vadev->num_ceqs;
	vdev->attr = *vadev->attr;
	vdev->ece_selective_repeat = le32_to_cpu(vdev->attr.caps) &
				     VRNIC_CAP_SELECTIVE_REPEAT;
	vdev->user_transport = vdev->ece_selective_repeat;
	vdev->client.ops = &vrnic_ib_rdma_ops;
	INIT_WORK(&vdev->flush_work, vrnic_ib_qp_kick_flush);
	xa_init_flags(&vdev->cq_xa, XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&vdev->qp_xa, XA_FLAGS_LOCK_IRQ);
	xa_init_flags(&vdev->srq_xa, XA_FLAGS_LOCK_IRQ);

	ret = vrnic_pf_register_rdma(vdev->pf, &vdev->client);
	if (ret)
		goto err_dealloc;
	vdev->netdev_nb.notifier_call = vrnic_ib_netdev_event;
	ret = register_netdevice_notifier(&vdev->netdev_nb);
	if (ret)
		goto err_client;
	ret = vrnic_ib_register(vdev);
	if (ret)
		goto err_notifier;
	/* Under RTNL: no netdev event in between goes unseen. */
	rtnl_lock();
	WRITE_ONCE(vdev->port_active, vrnic_ib_port_active(vdev->netdev));
	WRITE_ONCE(vdev->port_events, true);
	rtnl_unlock();
	auxiliary_set_drvdata(adev, vdev);
	return 0;

err_notifier:
	unregister_netdevice_notifier(&vdev->netdev_nb);
err_client:
	vrnic_pf_unregister_rdma(vdev->pf);
	cancel_work_sync(&vdev->flush_work);
err_dealloc:
	ib_dealloc_device(&vdev->ibdev);
	return ret;
}

static void vrnic_ib_remove(struct auxiliary_device *adev)
{
	struct vrnic_dev *vdev = auxiliary_get_drvdata(adev);

	/*
	 * Port and FATAL events stop first: the FATAL handler runs under
	 * RCU, the netdev notifier under RTNL (its unregister waits).
	 */
	WRITE_ONCE(vdev->port_events, false);
	synchronize_rcu();
	unregister_netdevice_notifier(&vdev->netdev_nb);
	vrnic_ib_unregister(vdev);
	vrnic_pf_unregister_rdma(vdev->pf);
	/* No more posts (unregistered) and no more events. */
	cancel_work_sync(&vdev->flush_work);
	WARN_ON(!xa_empty(&vdev->cq_xa) || !xa_empty(&vdev->qp_xa) ||
		!xa_empty(&vdev->srq_xa));
	ib_dealloc_device(&vdev->ibdev);
}

static const struct auxiliary_device_id vrnic_ib_id_table[] = {
	{ .name = "vrnic." VRNIC_AUX_RDMA },
	{ }
};
MODULE_DEVICE_TABLE(auxiliary, vrnic_ib_id_table);

static struct auxiliary_driver vrnic_ib_driver = {
	.name = "rdma",
	.probe = vrnic_ib_probe,
	.remove = vrnic_ib_remove,
	.id_table = vrnic_ib_id_table,
};

static int __init vrnic_ib_init(void)
{
	int ret;

	vrnic_ib_cc_debugfs_register();
	ret = auxiliary_driver_register(&vrnic_ib_driver);
	if (ret)
		vrnic_ib_cc_debugfs_unregister();
	return ret;
}

static void __exit vrnic_ib_exit(void)
{
	auxiliary_driver_unregister(&vrnic_ib_driver);
	vrnic_ib_cc_debugfs_unregister();
}

module_init(vrnic_ib_init);
module_exit(vrnic_ib_exit);

MODULE_IMPORT_NS(VRNIC);
MODULE_AUTHOR("vrnic developers");
MODULE_DESCRIPTION("vrnic RoCEv2 NIC RDMA driver (auxiliary)");
MODULE_LICENSE("Dual BSD/GPL");

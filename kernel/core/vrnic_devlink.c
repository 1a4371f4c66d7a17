// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic: the function's devlink instance.  "devlink dev info" shows the
 * device's identity and versions; the health reporter "fatal" counts the
 * times the function went dead (vrnic_pf_fatal()) and its recover
 * resets and re-initialises the function (vrnic_pf_down(), then
 * vrnic_pf_up()): the netdev keeps its name and configuration, and the
 * RDMA auxiliary device is created again.
 */
#include <net/devlink.h>

#include "vrnic_core.h"

/*
 * Automatic recoveries at most once a minute, as mlx5's firmware fatal
 * reporter: a device that dies again at once is left dead for user space
 * ("devlink health recover") instead of cycling its RDMA users forever.
 */
#define VRNIC_FATAL_GRACE_PERIOD_MS	60000

static int vrnic_devlink_info_get(struct devlink *devlink,
				  struct devlink_info_req *req,
				  struct netlink_ext_ack *extack)
{
	struct vrnic_pf *pf = devlink_priv(devlink);
	u32 spec = vrnic_rd(pf, VRNIC_REG_VERSION);
	char buf[32];
	int ret;

	snprintf(buf, sizeof(buf), "0x%04x", pf->pdev->device);
	ret = devlink_info_version_fixed_put(req,
					     DEVLINK_INFO_VERSION_GENERIC_ASIC_ID,
					     buf);
	if (ret)
		return ret;
	snprintf(buf, sizeof(buf), "%u", pf->pdev->revision);
	ret = devlink_info_version_fixed_put(req,
					     DEVLINK_INFO_VERSION_GENERIC_ASIC_REV,
					     buf);
	if (ret)
		return ret;
	/* The register, not the QUERY_DEVICE answer: a dead function too. */
	snprintf(buf, sizeof(buf), "%u.%u", spec >> 16, spec & 0xffff);
	ret = devlink_info_version_running_put(req, "fw.spec", buf);
	if (ret)
		return ret;
	snprintf(buf, sizeof(buf), "%llu",
		 le64_to_cpu(pf->attr.fw_version));
	return devlink_info_version_running_put(req,
						DEVLINK_INFO_VERSION_GENERIC_FW,
						buf);
}

static const struct devlink_ops vrnic_devlink_ops = {
	.info_get = vrnic_devlink_info_get,
};

static int vrnic_fatal_recover(struct devlink_health_reporter *reporter,
			       void *priv_ctx, struct netlink_ext_ack *extack)
{
	struct vrnic_pf *pf = devlink_health_reporter_priv(reporter);
	int ret;

	mutex_lock(&pf->reset_lock);
	/*
	 * Not after shutdown or remove began (the device must stay off),
	 * and not if a PCI reset already brought the function back.
	 */
	if (READ_ONCE(pf->removing) || !READ_ONCE(pf->aq.dead)) {
		mutex_unlock(&pf->reset_lock);
		return READ_ONCE(pf->removing) ? -ENODEV : 0;
	}
	vrnic_pf_down(pf);
	ret = vrnic_pf_up(pf);
	mutex_unlock(&pf->reset_lock);
	if (ret)
		NL_SET_ERR_MSG_MOD(extack, "function did not come back");
	return ret;
}

static int vrnic_fatal_diagnose(struct devlink_health_reporter *reporter,
				struct devlink_fmsg *fmsg,
				struct netlink_ext_ack *extack)
{
	struct vrnic_pf *pf = devlink_health_reporter_priv(reporter);

	devlink_fmsg_bool_pair_put(fmsg, "dead", READ_ONCE(pf->aq.dead));
	devlink_fmsg_u32_pair_put(fmsg, "status",
				  vrnic_rd(pf, VRNIC_REG_STATUS));
	devlink_fmsg_u32_pair_put(fmsg, "error", vrnic_rd(pf, VRNIC_REG_ERROR));
	return 0;
}

static const struct devlink_health_reporter_ops vrnic_fatal_reporter_ops = {
	.name = "fatal",
	.recover = vrnic_fatal_recover,
	.diagnose = vrnic_fatal_diagnose,
};

/*
 * Reports from a work item: vrnic_pf_fatal() runs in callers (admin
 * commands of vrnic_ib, under RTNL) that an automatic recovery, which
 * unbinds vrnic_ib and takes RTNL, would deadlock with.
 */
void vrnic_health_work(struct work_struct *work)
{
	struct vrnic_pf *pf = container_of(work, struct vrnic_pf, health_work);
	char why[sizeof(pf->fatal_why)];

	if (READ_ONCE(pf->removing))
		return;
	mutex_lock(&pf->fatal_lock);
	strscpy(why, pf->fatal_why, sizeof(why));
	mutex_unlock(&pf->fatal_lock);
	devlink_health_report(pf->fatal_reporter, why, NULL);
}

/* The function came back without the reporter (a PCI reset). */
void vrnic_devlink_healthy(struct vrnic_pf *pf)
{
	if (pf->fatal_reporter)
		devlink_health_reporter_state_update(pf->fatal_reporter,
						     DEVLINK_HEALTH_REPORTER_STATE_HEALTHY);
}

/* The function's private data is the devlink instance's. */
struct vrnic_pf *vrnic_devlink_alloc(struct pci_dev *pdev)
{
	struct devlink *devlink;

	devlink = devlink_alloc(&vrnic_devlink_ops, sizeof(struct vrnic_pf),
				&pdev->dev);
	return devlink ? devlink_priv(devlink) : NULL;
}

void vrnic_devlink_free(struct vrnic_pf *pf)
{
	devlink_free(priv_to_devlink(pf));
}

/* Last in probe: user space may recover the function from here on. */
int vrnic_devlink_register(struct vrnic_pf *pf)
{
	struct devlink *devlink = priv_to_devlink(pf);
	struct devlink_health_reporter *rep;

	rep = devlink_health_reporter_create(devlink,
					     &vrnic_fatal_reporter_ops,
					     VRNIC_FATAL_GRACE_PERIOD_MS, pf);
	if (IS_ERR(rep))
		return PTR_ERR(rep);
	pf->fatal_reporter = rep;
	devlink_register(devlink);
	return 0;
}

/*
 * First in remove: waits for a recovery user space started, and for a
 * report (with its automatic recovery) under way; none starts later.
 */
void vrnic_devlink_unregister(struct vrnic_pf *pf)
{
	devlink_unregister(priv_to_devlink(pf));
	WRITE_ONCE(pf->removing, true);
	cancel_work_sync(&pf->health_work);
	devlink_health_reporter_destroy(pf->fatal_reporter);
	pf->fatal_reporter = NULL;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Congestion control knobs in debugfs, the way mlx5 shows its own
 * (drivers/infiniband/hw/mlx5/cong.c): <debugfs>/vrnic/<ibdev>/cc_params/
 * holds a file per DCQCN knob by its mlx5 name, swift_<knob> per Swift
 * knob, cc_algo, and np_enable/<prio> and rp_enable/<prio>.  A read is a
 * QUERY_CC, a write a SET_CC (spec "Congestion control"); numbers are
 * decimal.  The device refuses what is out of range (-EINVAL).
 *
 * The files exist from the ib_device's registration until just before
 * its unregistration: debugfs_remove_recursive() waits for the handlers
 * running, so none touches the device after it is gone.
 */
#include <linux/debugfs.h>
#include <linux/kstrtox.h>
#include <linux/string.h>
#include <linux/uaccess.h>

#include "vrnic.h"

enum vrnic_cc_kind {
	VRNIC_CC_FILE_ALGO,
	VRNIC_CC_FILE_DCQCN,
	VRNIC_CC_FILE_SWIFT,
	VRNIC_CC_FILE_NP,
	VRNIC_CC_FILE_RP,
};

static struct dentry *vrnic_debugfs_root;

/* mlx5_ib_dbg_cc_name[], in its order: the device's index. */
static const char * const vrnic_cc_dcqcn_name[VRNIC_CC_NUM_DCQCN] = {
	[VRNIC_CC_RP_CLAMP_TGT_RATE] = "rp_clamp_tgt_rate",
	[VRNIC_CC_RP_CLAMP_TGT_RATE_ATI] = "rp_clamp_tgt_rate_ati",
	[VRNIC_CC_RP_TIME_RESET] = "rp_time_reset",
	[VRNIC_CC_RP_BYTE_RESET] = "rp_byte_reset",
	[VRNIC_CC_RP_THRESHOLD] = "rp_threshold",
	[VRNIC_CC_RP_AI_RATE] = "rp_ai_rate",
	[VRNIC_CC_RP_MAX_RATE] = "rp_max_rate",
	[VRNIC_CC_RP_HAI_RATE] = "rp_hai_rate",
	[VRNIC_CC_RP_MIN_DEC_FAC] = "rp_min_dec_fac",
	[VRNIC_CC_RP_MIN_RATE] = "rp_min_rate",
	[VRNIC_CC_RP_RATE_TO_SET_ON_FIRST_CNP] = "rp_rate_to_set_on_first_cnp",
	[VRNIC_CC_RP_DCE_TCP_G] = "rp_dce_tcp_g",
	[VRNIC_CC_RP_DCE_TCP_RTT] = "rp_dce_tcp_rtt",
	[VRNIC_CC_RP_RATE_REDUCE_MONITOR_PERIOD] = "rp_rate_reduce_monitor_period",
	[VRNIC_CC_RP_INITIAL_ALPHA_VALUE] = "rp_initial_alpha_value",
	[VRNIC_CC_RP_GD] = "rp_gd",
	[VRNIC_CC_NP_MIN_TIME_BETWEEN_CNPS] = "np_min_time_between_cnps",
	[VRNIC_CC_NP_CNP_DSCP] = "np_cnp_dscp",
	[VRNIC_CC_NP_CNP_PRIO_MODE] = "np_cnp_prio_mode",
	[VRNIC_CC_NP_CNP_PRIO] = "np_cnp_prio",
};

static const char * const vrnic_cc_swift_name[VRNIC_CC_NUM_SWIFT] = {
	[VRNIC_CC_SWIFT_MTU] = "swift_mtu",
	[VRNIC_CC_SWIFT_BASE_TARGET_US] = "swift_base_target_us",
	[VRNIC_CC_SWIFT_AI_MILLI] = "swift_ai_milli",
	[VRNIC_CC_SWIFT_BETA_MILLI] = "swift_beta_milli",
	[VRNIC_CC_SWIFT_MAX_MDF_MILLI] = "swift_max_mdf_milli",
	[VRNIC_CC_SWIFT_MIN_CWND_Q10] = "swift_min_cwnd_q10",
	[VRNIC_CC_SWIFT_MAX_CWND_PKTS] = "swift_max_cwnd_pkts",
	[VRNIC_CC_SWIFT_INIT_CWND_PKTS] = "swift_init_cwnd_pkts",
};

static const char * const vrnic_cc_algo_name[] = {
	[VRNIC_CC_ALGO_NONE] = "none",
	[VRNIC_CC_ALGO_DCQCN] = "dcqcn",
	[VRNIC_CC_ALGO_SWIFT] = "swift",
};

static_assert(sizeof(struct vrnic_cc_params) <= VRNIC_CMD_BUF_SIZE);

static int vrnic_ib_cc_query(struct vrnic_dev *vdev, struct vrnic_cc_params *p)
{
	return vrnic_ib_admin_query(vdev, VRNIC_ADMIN_QUERY_CC, p, sizeof(*p));
}

static int vrnic_ib_cc_set(struct vrnic_dev *vdev, u8 op, u32 index, u32 value)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_SET_CC };

	cmd.set_cc.op = op;
	cmd.set_cc.index = cpu_to_le32(index);
	cmd.set_cc.value = cpu_to_le32(value);
	return vrnic_ib_admin_exec(vdev, &cmd, NULL);
}

/* A priority's enable: read, change the bit, write, under the lock. */
static int vrnic_ib_cc_set_prio(struct vrnic_cc_file *f, bool on)
{
	struct vrnic_dev *vdev = f->vdev;
	struct vrnic_cc_params p;
	bool np = f->kind == VRNIC_CC_FILE_NP;
	u32 mask;
	int ret;

	mutex_lock(&vdev->cc_dbg.lock);
	ret = vrnic_ib_cc_query(vdev, &p);
	if (ret)
		goto out;
	mask = le32_to_cpu(np ? p.np_enable : p.rp_enable) & 0xff;
	if (on)
		mask |= BIT(f->index);
	else
		mask &= ~BIT(f->index);
	ret = vrnic_ib_cc_set(vdev, np ? VRNIC_CC_OP_SET_NP_ENABLE :
			      VRNIC_CC_OP_SET_RP_ENABLE, 0, mask);
out:
	mutex_unlock(&vdev->cc_dbg.lock);
	return ret;
}

static ssize_t vrnic_ib_cc_read(struct file *filp, char __user *buf,
				size_t count, loff_t *pos)
{
	struct vrnic_cc_file *f = filp->private_data;
	struct vrnic_cc_params p;
	char lbuf[16];
	int len, ret;
	u32 v = 0;

	ret = vrnic_ib_cc_query(f->vdev, &p);
	if (ret)
		return ret;
	switch (f->kind) {
	case VRNIC_CC_FILE_ALGO:
		v = le32_to_cpu(p.algo);
		len = scnprintf(lbuf, sizeof(lbuf), "%s\n",
				v < ARRAY_SIZE(vrnic_cc_algo_name) ?
				vrnic_cc_algo_name[v] : "unknown");
		return simple_read_from_buffer(buf, count, pos, lbuf, len);
	case VRNIC_CC_FILE_DCQCN:
		v = le32_to_cpu(p.dcqcn[f->index]);
		break;
	case VRNIC_CC_FILE_SWIFT:
		v = le32_to_cpu(p.swift[f->index]);
		break;
	case VRNIC_CC_FILE_NP:
		v = !!(le32_to_cpu(p.np_enable) & BIT(f->index));
		break;
	case VRNIC_CC_FILE_RP:
		v = !!(le32_to_cpu(p.rp_enable) & BIT(f->index));
		break;
	}
	len = scnprintf(lbuf, sizeof(lbuf), "%u\n", v);
	return simple_read_from_buffer(buf, count, pos, lbuf, len);
}

static ssize_t vrnic_ib_cc_write(struct file *filp, const char __user *buf,
				 size_t count, loff_t *pos)
{
	struct vrnic_cc_file *f = filp->private_data;
	char lbuf[16];
	bool on;
	int ret;
	u32 v;

	switch (f->kind) {
	case VRNIC_CC_FILE_ALGO:
		if (count >= sizeof(lbuf))
			return -EINVAL;
		if (copy_from_user(lbuf, buf, count))
			return -EFAULT;
		lbuf[count] = '\0';
		ret = sysfs_match_string(vrnic_cc_algo_name, lbuf);
		if (ret < 0)
			return ret;
		ret = vrnic_ib_cc_set(f->vdev, VRNIC_CC_OP_SET_ALGO, 0, ret);
		break;
	case VRNIC_CC_FILE_DCQCN:
	case VRNIC_CC_FILE_SWIFT:
		ret = kstrtou32_from_user(buf, count, 10, &v);
		if (ret)
			return ret;
		ret = vrnic_ib_cc_set(f->vdev, f->kind == VRNIC_CC_FILE_DCQCN ?
				      VRNIC_CC_OP_SET_DCQCN : VRNIC_CC_OP_SET_SWIFT,
				      f->index, v);
		break;
	default:
		ret = kstrtobool_from_user(buf, count, &on);
		if (ret)
			return ret;
		ret = vrnic_ib_cc_set_prio(f, on);
		break;
	}
	return ret ? ret : count;
}

static const struct file_operations vrnic_cc_fops = {
	.owner = THIS_MODULE,
	.open = simple_open,
	.read = vrnic_ib_cc_read,
	.write = vrnic_ib_cc_write,
	.llseek = default_llseek,
};

static void vrnic_ib_cc_file(struct vrnic_dev *vdev, unsigned int *n,
			     struct dentry *dir, const char *name, u8 kind,
			     u8 index)
{
	struct vrnic_cc_file *f;

	if (WARN_ON_ONCE(*n >= ARRAY_SIZE(vdev->cc_dbg.files)))
		return;
	f = &vdev->cc_dbg.files[(*n)++];
	f->vdev = vdev;
	f->kind = kind;
	f->index = index;
	debugfs_create_file(name, 0600, dir, f, &vrnic_cc_fops);
}

/**
 * vrnic_ib_cc_debugfs_init - create the device's cc_params directory
 * @vdev: a registered ib_device (its name is the directory's)
 *
 * Like every debugfs user, a failure here leaves the files out and the
 * device working.  A device that does not know QUERY_CC gets none.
 */
void vrnic_ib_cc_debugfs_init(struct vrnic_dev *vdev)
{
	struct vrnic_cc_debugfs *d = &vdev->cc_dbg;
	struct dentry *cc, *np, *rp;
	struct vrnic_cc_params p;
	unsigned int i, n = 0;
	char name[4];

	if (vrnic_ib_cc_query(vdev, &p))
		return;
	mutex_init(&d->lock);
	d->dir = debugfs_create_dir(dev_name(&vdev->ibdev.dev),
				    vrnic_debugfs_root);
	/* All go in MODIFY_QP's TRANSPORT attribute, which comes with it. */
	if (le32_to_cpu(vdev->attr.caps) & VRNIC_CAP_SELECTIVE_REPEAT) {
		debugfs_create_bool("selective_repeat", 0600, d->dir,
				    &vdev->selective_repeat);
		debugfs_create_u16("send_window", 0600, d->dir,
				   &vdev->send_window);
		debugfs_create_bool("ece_selective_repeat", 0600, d->dir,
				    &vdev->ece_selective_repeat);
		debugfs_create_u8("spray_paths", 0600, d->dir,
				  &vdev->spray_paths);
		debugfs_create_bool("user_transport", 0600, d->dir,
				    &vdev->user_transport);
	}
	cc = debugfs_create_dir("cc_params", d->dir);
	vrnic_ib_cc_file(vdev, &n, cc, "cc_algo", VRNIC_CC_FILE_ALGO, 0);
	for (i = 0; i < VRNIC_CC_NUM_DCQCN; i++)
		vrnic_ib_cc_file(vdev, &n, cc, vrnic_cc_dcqcn_name[i],
				 VRNIC_CC_FILE_DCQCN, i);
	for (i = 0; i < VRNIC_CC_NUM_SWIFT; i++)
		vrnic_ib_cc_file(vdev, &n, cc, vrnic_cc_swift_name[i],
				 VRNIC_CC_FILE_SWIFT, i);
	np = debugfs_create_dir("np_enable", cc);
	rp = debugfs_create_dir("rp_enable", cc);
	for (i = 0; i < VRNIC_NUM_PRIOS; i++) {
		snprintf(name, sizeof(name), "%u", i);
		vrnic_ib_cc_file(vdev, &n, np, name, VRNIC_CC_FILE_NP, i);
		vrnic_ib_cc_file(vdev, &n, rp, name, VRNIC_CC_FILE_RP, i);
	}
}

/* Before ib_unregister_device(): waits for the handlers in progress. */
void vrnic_ib_cc_debugfs_cleanup(struct vrnic_dev *vdev)
{
	struct vrnic_cc_debugfs *d = &vdev->cc_dbg;

	if (!d->dir)
		return;
	debugfs_remove_recursive(d->dir);
	d->dir = NULL;
	mutex_destroy(&d->lock);
}

void vrnic_ib_cc_debugfs_register(void)
{
	vrnic_debugfs_root = debugfs_create_dir("vrnic", NULL);
}

void vrnic_ib_cc_debugfs_unregister(void)
{
	debugfs_remove_recursive(vrnic_debugfs_root);
	vrnic_debugfs_root = NULL;
}

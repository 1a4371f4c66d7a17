// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic verbs: the ib_device registered with ib_core: device and port
 * queries, user contexts (each owns a doorbell page of BAR2), PDs, and the
 * ops table.  MRs, CQs and QPs are in their own files.
 */
#include <linux/etherdevice.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_user_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "vrnic.h"
#include "vrnic-abi.h"

/*
 * A device-reported limit as ib_device_attr's int: never negative, and
 * never more than this driver accepts (cap).
 */
static int vrnic_ib_attr_int(__le32 v, u32 cap)
{
	return min3(le32_to_cpu(v), cap, (u32)INT_MAX);
}

static int vrnic_ib_query_device(struct ib_device *ibdev,
				 struct ib_device_attr *attr,
				 struct ib_udata *udata)
{
	struct vrnic_dev *vdev = to_vdev(ibdev);
	const struct vrnic_device_attr *a = &vdev->attr;

	if (udata->inlen || udata->outlen)
		return -EINVAL;
	memset(attr, 0, sizeof(*attr));
	attr->fw_ver = le64_to_cpu(a->fw_version);
	attr->sys_image_guid = cpu_to_be64(le64_to_cpu(a->sys_image_guid));
	attr->max_mr_size = le64_to_cpu(a->max_mr_size);
	attr->page_size_cap = VRNIC_MR_PGSZ_BITMAP;
	attr->vendor_id = vdev->pdev->vendor;
	attr->vendor_part_id = vdev->pdev->device;
	attr->hw_ver = vdev->pdev->revision;
	attr->max_qp = vrnic_ib_attr_int(a->max_qp, INT_MAX);
	attr->max_qp_wr = vrnic_ib_attr_int(a->max_qp_wr,
					    1U << VRNIC_MAX_WQ_LOG_DEPTH);
	attr->max_send_sge = vrnic_ib_attr_int(a->max_sge, VRNIC_MAX_SGE);
	attr->max_recv_sge = vrnic_ib_attr_int(a->max_sge, VRNIC_MAX_SGE);
	attr->max_sge_rd = vrnic_ib_attr_int(a->max_sge, VRNIC_MAX_SGE);
	attr->max_cq = vrnic_ib_attr_int(a->max_cq, INT_MAX);
	attr->max_cqe = vrnic_ib_attr_int(a->max_cqe,
					  1U << VRNIC_MAX_CQ_LOG_DEPTH);
	attr->max_mr = vrnic_ib_attr_int(a->max_mr, INT_MAX);
	attr->max_mw = attr->max_mr;	/* one table for both */
	attr->max_pd = vrnic_ib_attr_int(a->max_pd, INT_MAX);
	attr->max_qp_rd_atom = vrnic_ib_attr_int(a->max_qp_rd_atom,
						 VRNIC_MAX_RD_ATOMIC);
	attr->max_qp_init_rd_atom = attr->max_qp_rd_atom;
	if (check_mul_overflow(attr->max_qp, attr->max_qp_rd_atom,
			       &attr->max_res_rd_atom))
		attr->max_res_rd_atom = INT_MAX;
	attr->atomic_cap = attr->max_qp ? IB_ATOMIC_HCA : IB_ATOMIC_NONE;
	/* No FLUSH_PERSISTENT: the device has no persistent memory domain. */
	attr->device_cap_flags = IB_DEVICE_RC_RNR_NAK_GEN |
				 IB_DEVICE_MEM_MGT_EXTENSIONS |
				 IB_DEVICE_FLUSH_GLOBAL |
				 IB_DEVICE_ATOMIC_WRITE |
				 IB_DEVICE_MEM_WINDOW |
				 IB_DEVICE_MEM_WINDOW_TYPE_2B |
				 IB_DEVICE_XRC;
	attr->max_fast_reg_page_list_len = VRNIC_MAX_FAST_REG_PAGES;
	attr->max_pkeys = 1;
	attr->max_ah = INT_MAX;		/* AHs live in host memory only */
	attr->max_srq = vrnic_ib_attr_int(a->max_srq, INT_MAX);
	attr->max_srq_wr = attr->max_qp_wr;
	attr->max_srq_sge = attr->max_recv_sge;
	/* One device-wide table of (GID, QP) pairs. */
	attr->max_total_mcast_qp_attach = vrnic_ib_attr_int(a->max_mcast_attach,
							    INT_MAX);
	attr->max_mcast_grp = attr->max_total_mcast_qp_attach;
	attr->max_mcast_qp_attach = attr->max_total_mcast_qp_attach;
	/*
	 * 4.096 us << 15, about 134 ms, as rxe reports
	 * (RXE_LOCAL_CA_ACK_DELAY): the responder runs in a guest whose
	 * vCPU a TCG host stalls for tens of milliseconds.  ib_cm adds it
	 * to the ACK timeout of the connections it sets up (cm_ack_timeout()).
	 */
	attr->local_ca_ack_delay = 15;
	return 0;
}

static int vrnic_ib_query_port(struct ib_device *ibdev, u32 port,
			       struct ib_port_attr *attr)
{
	struct vrnic_dev *vdev = to_vdev(ibdev);
	struct net_device *ndev = vdev->netdev;
	bool active = vrnic_ib_port_state(vdev);

	/* ib_core zeroes *attr before calling us. */
	attr->state = active ? IB_PORT_ACTIVE : IB_PORT_DOWN;
	attr->phys_state = active ? IB_PORT_PHYS_STATE_LINK_UP :
				    IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = IB_MTU_4096;
	/* What fits a frame with the biggest RoCEv2 headers (spec: UD MTU). */
	attr->active_mtu = iboe_get_mtu(READ_ONCE(ndev->mtu));
	/* The device's table, never more than the ABI's index. */
	attr->gid_tbl_len = min_t(u32, le16_to_cpu(vdev->attr.gid_tbl_len),
				  VRNIC_GID_TABLE_LEN);
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = VRNIC_MAX_MSG_SIZE;
	attr->pkey_tbl_len = 1;
	/* The netdev's link speed (get_link_ksettings: the device's). */
	ib_get_eth_speed(ibdev, port, &attr->active_speed, &attr->active_width);
	return 0;
}

static int vrnic_ib_get_port_immutable(struct ib_device *ibdev, u32 port,
				       struct ib_port_immutable *immutable)
{
	struct ib_port_attr attr;
	int ret;

	ret = ib_query_port(ibdev, port, &attr);
	if (ret)
		return ret;
	immutable->pkey_tbl_len = attr.pkey_tbl_len;
	immutable->gid_tbl_len = attr.gid_tbl_len;
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer vrnic_ib_get_link_layer(struct ib_device *ibdev,
						    u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int vrnic_ib_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			       u16 *pkey)
{
	if (index > 0)
		return -EINVAL;
	*pkey = 0xffff;
	return 0;
}

/* Completion vector v is served by EQ 1 + v (vrnic_ib_create_cq()). */
static const struct cpumask *vrnic_ib_get_vector_affinity(struct ib_device *ibdev,
							  int comp_vector)
{
	struct vrnic_dev *vdev = to_vdev(ibdev);

	if (comp_vector < 0 || comp_vector >= ibdev->num_comp_vectors)
		return NULL;
	return vrnic_pf_eq_affinity(vdev->pf, 1 + comp_vector);
}

/* sysfs fw_ver: the device's firmware version, as QUERY_DEVICE gave it. */
static void vrnic_ib_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	struct vrnic_dev *vdev = to_vdev(ibdev);

	snprintf(str, IB_FW_VERSION_NAME_MAX, "%llu",
		 le64_to_cpu(vdev->attr.fw_version));
}

void vrnic_ib_port_event(struct vrnic_dev *vdev, bool up)
{
	struct ib_event ev = {
		.device = &vdev->ibdev,
		.element.port_num = 1,
		.event = up ? IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR,
	};

	ib_dispatch_event(&ev);
}

/* ---------------------------------------------------- user contexts --- */

static int vrnic_ib_alloc_ucontext(struct ib_ucontext *ibuctx,
				   struct ib_udata *udata)
{
	struct vrnic_ucontext *uctx =
		container_of(ibuctx, struct vrnic_ucontext, ibucontext);
	struct vrnic_dev *vdev = to_vdev(ibuctx->device);
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_UCTX };
	struct vrnic_alloc_ucontext_resp resp = {};
	struct vrnic_alloc_ucontext_req req = {};
	struct vrnic_user_mmap_entry *entry;
	u32 page;
	int ret;

	/* No request bit is defined yet: a provider asking for one is newer. */
	ret = vrnic_ib_udata_req(udata, &req, sizeof(req));
	if (ret)
		return ret;
	if (req.comp_mask & ~VRNIC_ALLOC_UCTX_REQ_MASK_ALL)
		return -EOPNOTSUPP;
	if (req.reserved)
		return -EINVAL;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
	if (!entry)
		return -ENOMEM;
	ret = vrnic_ib_admin_exec(vdev, &cmd, &page);
	if (ret)
		goto err_free;
	if (page == 0 || page >= VRNIC_NUM_DB_PAGES) {
		ret = -EIO;
		goto err_free;
	}
	entry->vdev = vdev;
	entry->page = page;
	/* From here on, mmap_free owns the page and the entry. */
	ret = rdma_user_mmap_entry_insert(ibuctx, &entry->rdma_entry,
					  VRNIC_DB_PAGE_SIZE);
	if (ret) {
		vrnic_pf_destroy(vdev->pf, VRNIC_ADMIN_DESTROY_UCTX, page,
				 "user context");
		goto err_free;
	}
	uctx->db_entry = &entry->rdma_entry;
	uctx->page = page;
	mutex_init(&uctx->dbrec_lock);
	INIT_LIST_HEAD(&uctx->dbrec_pages);

	resp.db_mmap_key = rdma_user_mmap_get_offset(uctx->db_entry);
	resp.db_page_index = page;
	resp.db_page_size = VRNIC_DB_PAGE_SIZE;
	/* What this context's QPs offer a peer through ECE (rdma_cm). */
	resp.comp_mask = VRNIC_ALLOC_UCTX_RESP_ECE;
	/*
	 * ... and each may choose its own transport (vrnicdv), unless the
	 * administrator said otherwise (debugfs user_transport).
	 */
	if (READ_ONCE(vdev->user_transport) &&
	    (le32_to_cpu(vdev->attr.caps) & VRNIC_CAP_SELECTIVE_REPEAT)) {
		resp.comp_mask |= VRNIC_ALLOC_UCTX_RESP_TRANSPORT;
		resp.max_send_window = VRNIC_SEND_WINDOW_MAX;
		resp.max_spray_paths = VRNIC_SPRAY_PATHS_MAX;
		uctx->user_transport = true;
	}
	if (READ_ONCE(vdev->ece_selective_repeat) &&
	    (le32_to_cpu(vdev->attr.caps) & VRNIC_CAP_SELECTIVE_REPEAT))
		resp.ece_options = VRNIC_ECE_VERSION_SR <<
				   VRNIC_ECE_VERSION_SHIFT |
				   VRNIC_ECE_SELECTIVE_REPEAT;
	uctx->ece_offer = resp.ece_options;
	ret = ib_copy_to_udata(udata, &resp, min(sizeof(resp), udata->outlen));
	if (ret) {
		rdma_user_mmap_entry_remove(uctx->db_entry);
		return ret;
	}
	return 0;

err_free:
	kfree(entry);
	return ret;
}

static void vrnic_ib_dealloc_ucontext(struct ib_ucontext *ibuctx)
{
	struct vrnic_ucontext *uctx =
		container_of(ibuctx, struct vrnic_ucontext, ibucontext);

	/* ib_core destroyed every object first: no record page is left. */
	WARN_ON(!list_empty(&uctx->dbrec_pages));
	mutex_destroy(&uctx->dbrec_lock);
	rdma_user_mmap_entry_remove(uctx->db_entry);
}

static int vrnic_ib_mmap(struct ib_ucontext *ibuctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rentry;
	struct vrnic_user_mmap_entry *entry;
	struct vrnic_dev *vdev = to_vdev(ibuctx->device);
	unsigned long pfn;
	int ret;

	rentry = rdma_user_mmap_entry_get(ibuctx, vma);
	if (!rentry)
		return -EINVAL;
	entry = container_of(rentry, struct vrnic_user_mmap_entry, rdma_entry);
	pfn = (vdev->db_bar_start + (u64)entry->page * VRNIC_DB_PAGE_SIZE) >>
	      PAGE_SHIFT;
	ret = rdma_user_mmap_io(ibuctx, vma, pfn, VRNIC_DB_PAGE_SIZE,
				pgprot_noncached(vma->vm_page_prot), rentry);
	rdma_user_mmap_entry_put(rentry);
	return ret;
}

/*
 * The doorbell page goes back to the device only when no mapping of it is
 * left, so a page is never handed to a new context while an old process
 * can still ring it.
 */
static void vrnic_ib_mmap_free(struct rdma_user_mmap_entry *rentry)
{
	struct vrnic_user_mmap_entry *entry =
		container_of(rentry, struct vrnic_user_mmap_entry, rdma_entry);

	/* A refusal quiesces the function (vrnic_pf_destroy()). */
	vrnic_pf_destroy(entry->vdev->pf, VRNIC_ADMIN_DESTROY_UCTX, entry->page,
			 "user context");
	kfree(entry);
}

/*
 * The device is going away (PCI remove, rmmod) while a process still holds
 * this context.  ib_core has already zapped its only mapping, the doorbell
 * page (rdma_user_mmap_io), and next destroys every object of the context
 * through the usual verbs while the device is still there, then sends the
 * process IB_EVENT_DEVICE_FATAL.  Nothing else points the process at the
 * device: its rings and CQ buffers are its own memory.  Having the op lets
 * ib_unregister_device return without waiting for the process to exit.
 */
static void vrnic_ib_disassociate_ucontext(struct ib_ucontext *ibuctx)
{
}

/* ------------------------------------------------------------- PDs --- */

static int vrnic_ib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_CREATE_PD };
	int ret;

	ret = vrnic_ib_udata_no_req(udata);
	if (ret)
		return ret;
	cmd.create_pd.uctx = cpu_to_le32(vrnic_ib_uctx_of(udata));
	return vrnic_ib_admin_exec(to_vdev(ibpd->device), &cmd,
				   &to_vpd(ibpd)->pdn);
}

int vrnic_ib_alloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_ALLOC_XRCD };
	int ret;

	ret = vrnic_ib_udata_no_req(udata);
	if (ret)
		return ret;
	return vrnic_ib_admin_exec(to_vdev(ibxrcd->device), &cmd,
				   &to_vxrcd(ibxrcd)->xrcdn);
}

int vrnic_ib_dealloc_xrcd(struct ib_xrcd *ibxrcd, struct ib_udata *udata)
{
	/* A refusal quiesces the function (vrnic_pf_destroy()). */
	vrnic_pf_destroy(to_vdev(ibxrcd->device)->pf, VRNIC_ADMIN_DEALLOC_XRCD,
			 to_vxrcd(ibxrcd)->xrcdn, "XRCD");
	return 0;
}

static int vrnic_ib_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	/* A refusal quiesces the function (vrnic_pf_destroy()). */
	vrnic_pf_destroy(to_vdev(ibpd->device)->pf, VRNIC_ADMIN_DESTROY_PD,
			 to_vpd(ibpd)->pdn, "PD");
	return 0;
}

/* ------------------------------------------------ address handles --- */

/*
 * AHs are not device objects: the address vector lives here and goes into
 * every UD WQE.  Never sleeps (no RDMA_CREATE_AH_SLEEPABLE needed).
 */
static int vrnic_ib_create_ah(struct ib_ah *ibah,
			      struct rdma_ah_init_attr *init_attr,
			      struct ib_udata *udata)
{
	struct rdma_ah_attr *ah_attr = init_attr->ah_attr;
	const struct ib_global_route *grh;
	struct vrnic_ah *ah = to_vah(ibah);
	struct vrnic_ud_av *av = &ah->av;
	int ret;

	ret = vrnic_ib_udata_no_req(udata);
	if (ret)
		return ret;
	if (!(rdma_ah_get_ah_flags(ah_attr) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(ah_attr);
	if (!grh->sgid_attr ||
	    grh->sgid_attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
		return -EINVAL;
	memset(av, 0, sizeof(*av));
	memcpy(av->dgid, grh->dgid.raw, sizeof(av->dgid));
	/* The source: an entry of the device's GID table, by index only. */
	av->sgid_index = grh->sgid_attr->index;
	memcpy(av->dmac, ah_attr->roce.dmac, ETH_ALEN);
	av->traffic_class = grh->traffic_class;
	av->hop_limit = grh->hop_limit;
	av->flow_label = cpu_to_le32(grh->flow_label);
	if (grh->flow_label)
		av->udp_sport = cpu_to_le16(rdma_flow_label_to_udp_sport(grh->flow_label));
	if (udata) {
		struct vrnic_create_ah_resp resp = {};

		memcpy(resp.dmac, av->dmac, sizeof(resp.dmac));
		return ib_copy_to_udata(udata, &resp,
					min(sizeof(resp), udata->outlen));
	}
	return 0;
}

static int vrnic_ib_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *ah_attr)
{
	struct vrnic_ah *ah = to_vah(ibah);
	union ib_gid dgid;

	memcpy(dgid.raw, ah->av.dgid, sizeof(dgid.raw));
	memset(ah_attr, 0, sizeof(*ah_attr));
	ah_attr->type = ibah->type;
	rdma_ah_set_port_num(ah_attr, 1);
	rdma_ah_set_grh(ah_attr, &dgid, le32_to_cpu(ah->av.flow_label),
			ibah->sgid_attr ? ibah->sgid_attr->index : 0,
			ah->av.hop_limit, ah->av.traffic_class);
	memcpy(ah_attr->roce.dmac, ah->av.dmac, ETH_ALEN);
	return 0;
}

static int vrnic_ib_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

/* ------------------------------------------------------- GID table --- */

/*
 * ib_core's RoCE GID cache calls these for every address of the netdev
 * (and its VLAN uppers); the device takes every packet's source GID, MAC
 * and VLAN from the entry an address vector names.
 */
static int vrnic_ib_set_gid(const struct ib_gid_attr *attr, bool set)
{
	struct vrnic_admin_cmd cmd = { .opcode = VRNIC_ADMIN_SET_GID };
	struct vrnic_admin_set_gid *g = &cmd.set_gid;
	u16 vlan_id = VRNIC_VLAN_NONE;
	int ret;

	if (attr->index >= VRNIC_GID_TABLE_LEN)
		return -EINVAL;
	g->index = attr->index;
	g->op = VRNIC_GID_OP_CLEAR;
	if (set) {
		if (attr->gid_type != IB_GID_TYPE_ROCE_UDP_ENCAP)
			return -EINVAL;
		ret = rdma_read_gid_l2_fields(attr, &vlan_id, g->smac);
		if (ret)
			return ret;
		memcpy(g->gid, attr->gid.raw, sizeof(g->gid));
		g->vlan_id = cpu_to_le16(vlan_id);
		g->op = VRNIC_GID_OP_SET;
		g->type = ipv6_addr_v4mapped((const struct in6_addr *)attr->gid.raw) ?
			  VRNIC_GID_TYPE_ROCE_V2_IPV4 : VRNIC_GID_TYPE_ROCE_V2_IPV6;
	}
	ret = vrnic_ib_admin_exec(to_vdev(attr->device), &cmd, NULL);
	if (ret == -EOPNOTSUPP && vlan_id != VRNIC_VLAN_NONE)
		ibdev_warn_ratelimited(attr->device,
				       "GID %u: VLAN %u not supported by the device\n",
				       attr->index, vlan_id);
	return ret;
}

static int vrnic_ib_add_gid(const struct ib_gid_attr *attr, void **context)
{
	return vrnic_ib_set_gid(attr, true);
}

static int vrnic_ib_del_gid(const struct ib_gid_attr *attr, void **context)
{
	int ret = vrnic_ib_set_gid(attr, false);

	return ret == -ENODEV ? 0 : ret;
}

/* ------------------------------------------------------- multicast --- */

/*
 * The device delivers a UD packet for the multicast QPN to every QP
 * attached to its destination GID.  ib_core already joined the IP group
 * on the netdev (rdma_cm) and maps the GID to its multicast MAC in AHs.
 */
static int vrnic_ib_mcast(struct ib_qp *ibqp, union ib_gid *gid, u8 opcode)
{
	struct vrnic_admin_cmd cmd = { .opcode = opcode };

	if (ibqp->qp_type != IB_QPT_UD)
		return -EINVAL;
	memcpy(cmd.mcast.gid, gid->raw, sizeof(cmd.mcast.gid));
	cmd.mcast.qpn = cpu_to_le32(ibqp->qp_num);
	return vrnic_ib_admin_exec(to_vdev(ibqp->device), &cmd, NULL);
}

static int vrnic_ib_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return vrnic_ib_mcast(ibqp, gid, VRNIC_ADMIN_ATTACH_MCAST);
}

static int vrnic_ib_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	return vrnic_ib_mcast(ibqp, gid, VRNIC_ADMIN_DETACH_MCAST);
}

/* ------------------------------------------------- hardware counters --- */

/*
 * The RoCE counters of QUERY_STATS: roce_rx_frames (the RoCE frames the
 * port took in, which a peer's sent_pkts is checked against), then
 * sent_pkts to the end of struct vrnic_stats.  The function's and the
 * Ethernet counters before them (eth_*, db_violations, eq_overflows,
 * dma_errors, admin_cmds) are ethtool -S's (vrnic_eth.c), not repeated
 * here.
 */
#define VRNIC_ROCE_STATS_FIRST \
	(offsetof(struct vrnic_stats, sent_pkts) / sizeof(__le64))

static const struct rdma_stat_desc vrnic_hw_stat_descs[] = {
	{ .name = "roce_rx_frames" },
	{ .name = "sent_pkts" }, { .name = "rcvd_pkts" },
	{ .name = "sent_bytes" }, { .name = "rcvd_bytes" },
	{ .name = "icrc_errors" }, { .name = "malformed_pkts" },
	{ .name = "bad_qp_pkts" }, { .name = "duplicate_request" },
	{ .name = "out_of_seq_request" }, { .name = "rcvd_rnr_err" },
	{ .name = "send_rnr_err" }, { .name = "rcvd_seq_err" },
	{ .name = "ack_timeouts" }, { .name = "retry_exceeded_err" },
	{ .name = "retry_rnr_exceeded_err" }, { .name = "remote_access_err" },
	{ .name = "cq_overflows" }, { .name = "qkey_violations" },
	{ .name = "ud_no_recv" }, { .name = "uc_dropped" },
	{ .name = "srq_limit_events" }, { .name = "fast_reg" },
	{ .name = "local_inv" }, { .name = "remote_inv" },
	{ .name = "mw_binds" }, { .name = "bad_sgid" },
	{ .name = "vlan_drops" },
	{ .name = "np_ecn_marked_roce_packets" }, { .name = "np_cnp_sent" },
	{ .name = "rp_cnp_handled" }, { .name = "rp_cnp_ignored" },
	{ .name = "roce_adp_retrans" }, { .name = "roce_adp_retrans_to" },
	{ .name = "sack_sent" }, { .name = "sack_rcvd" },
	{ .name = "ooo_placed" }, { .name = "ooo_dropped" },
	{ .name = "implied_nak_seq_err" },
	{ .name = "qpc_cache_hits" }, { .name = "qpc_cache_misses" },
	{ .name = "qpc_cache_evictions" },
};

static struct rdma_hw_stats *vrnic_ib_alloc_hw_port_stats(struct ib_device *ibdev,
							  u32 port)
{
	BUILD_BUG_ON((VRNIC_ROCE_STATS_FIRST + ARRAY_SIZE(vrnic_hw_stat_descs) -
		      1) * sizeof(u64) != sizeof(struct vrnic_stats));
	return rdma_alloc_hw_stats_struct(vrnic_hw_stat_descs,
					  ARRAY_SIZE(vrnic_hw_stat_descs),
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int vrnic_ib_get_hw_stats(struct ib_device *ibdev,
				 struct rdma_hw_stats *stats, u32 port, int index)
{
	struct vrnic_stats st;
	const __le64 *v = (const __le64 *)&st;
	unsigned int i;
	int ret;

	ret = vrnic_ib_admin_query(to_vdev(ibdev), VRNIC_ADMIN_QUERY_STATS, &st,
				   sizeof(st));
	if (ret)
		return ret;
	stats->value[0] = le64_to_cpu(st.roce_rx_frames);
	for (i = 1; i < ARRAY_SIZE(vrnic_hw_stat_descs); i++)
		stats->value[i] = le64_to_cpu(v[VRNIC_ROCE_STATS_FIRST + i - 1]);
	return ARRAY_SIZE(vrnic_hw_stat_descs);
}

static const struct ib_device_ops vrnic_dev_ops = {
	.owner = THIS_MODULE,
	/* Not in 6.12's enum rdma_driver_id: see vrnic-abi.h. */
	.driver_id = (enum rdma_driver_id)RDMA_DRIVER_VRNIC,
	.uverbs_abi_ver = VRNIC_UVERBS_ABI_VERSION,

	.add_gid = vrnic_ib_add_gid,
	.alloc_hw_port_stats = vrnic_ib_alloc_hw_port_stats,
	.alloc_mr = vrnic_ib_alloc_mr,
	.alloc_mw = vrnic_ib_alloc_mw,
	.alloc_pd = vrnic_ib_alloc_pd,
	.alloc_xrcd = vrnic_ib_alloc_xrcd,
	.alloc_ucontext = vrnic_ib_alloc_ucontext,
	.attach_mcast = vrnic_ib_attach_mcast,
	.create_ah = vrnic_ib_create_ah,
	.create_cq = vrnic_ib_create_cq,
	.create_qp = vrnic_ib_create_qp,
	.create_srq = vrnic_ib_create_srq,
	.create_user_ah = vrnic_ib_create_ah,
	.dealloc_pd = vrnic_ib_dealloc_pd,
	.del_gid = vrnic_ib_del_gid,
	.dealloc_ucontext = vrnic_ib_dealloc_ucontext,
	.dealloc_mw = vrnic_ib_dealloc_mw,
	.dealloc_xrcd = vrnic_ib_dealloc_xrcd,
	.dereg_mr = vrnic_ib_dereg_mr,
	.fill_res_cq_entry = vrnic_ib_fill_res_cq_entry,
	.fill_res_mr_entry = vrnic_ib_fill_res_mr_entry,
	.fill_res_qp_entry = vrnic_ib_fill_res_qp_entry,
	.destroy_ah = vrnic_ib_destroy_ah,
	.query_ah = vrnic_ib_query_ah,
	.destroy_cq = vrnic_ib_destroy_cq,
	.destroy_qp = vrnic_ib_destroy_qp,
	.destroy_srq = vrnic_ib_destroy_srq,
	.detach_mcast = vrnic_ib_detach_mcast,
	.disassociate_ucontext = vrnic_ib_disassociate_ucontext,
	.get_dev_fw_str = vrnic_ib_get_dev_fw_str,
	.get_dma_mr = vrnic_ib_get_dma_mr,
	.get_hw_stats = vrnic_ib_get_hw_stats,
	.get_link_layer = vrnic_ib_get_link_layer,
	.get_vector_affinity = vrnic_ib_get_vector_affinity,
	.get_port_immutable = vrnic_ib_get_port_immutable,
	.map_mr_sg = vrnic_ib_map_mr_sg,
	.mmap = vrnic_ib_mmap,
	.mmap_free = vrnic_ib_mmap_free,
	.modify_qp = vrnic_ib_modify_qp,
	.modify_srq = vrnic_ib_modify_srq,
	.poll_cq = vrnic_ib_poll_cq,
	.post_recv = vrnic_ib_post_recv,
	.post_send = vrnic_ib_post_send,
	.post_srq_recv = vrnic_ib_post_srq_recv,
	.query_device = vrnic_ib_query_device,
	.query_pkey = vrnic_ib_query_pkey,
	.query_port = vrnic_ib_query_port,
	.query_qp = vrnic_ib_query_qp,
	.query_srq = vrnic_ib_query_srq,
	.reg_user_mr = vrnic_ib_reg_user_mr,
	.req_notify_cq = vrnic_ib_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, vrnic_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, vrnic_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, vrnic_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, vrnic_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, vrnic_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, vrnic_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, vrnic_ucontext, ibucontext),
	INIT_RDMA_OBJ_SIZE(ib_xrcd, vrnic_xrcd, ibxrcd),
};

int vrnic_ib_register(struct vrnic_dev *vdev)
{
	struct ib_device *ibdev = &vdev->ibdev;
	int ret;

	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = max_t(unsigned int, vdev->num_ceqs, 1);
	ibdev->node_guid = cpu_to_be64(le64_to_cpu(vdev->attr.sys_image_guid));
	ibdev->dev.parent = &vdev->pdev->dev;
	strscpy(ibdev->node_desc, "vrnic RoCEv2 NIC", sizeof(ibdev->node_desc));
	ib_set_device_ops(ibdev, &vrnic_dev_ops);

	ret = ib_device_set_netdev(ibdev, vdev->netdev, 1);
	if (ret)
		return ret;
	ret = ib_register_device(ibdev, "vrnic%d", &vdev->pdev->dev);
	if (ret)
		return ret;
	vrnic_ib_cc_debugfs_init(vdev);
	return 0;
}

void vrnic_ib_unregister(struct vrnic_dev *vdev)
{
	/* No cc_params handler runs once this returns. */
	vrnic_ib_cc_debugfs_cleanup(vdev);
	ib_unregister_device(&vdev->ibdev);
}

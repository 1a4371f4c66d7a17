// SPDX-License-Identifier: GPL-2.0-or-later
// Admin queue: commands are copied out of guest memory once, validated,
// executed and completed in order with a phase-tagged completion entry.
#include <algorithm>
#include <cstring>

#include "device.hpp"

namespace vrnic {

void Device::process_admin()
{
	const uint32_t mask = (1u << aq_log_depth_) - 1;
	unsigned int budget = kAdminBudget;
	bool completed = false;
	// Page lists copied in this pass: each was charged to the budget
	// first, so what was charged is what was copied.
	const uint64_t copied = budget_.charged_total();

	admin_pending_ = false;
	while (aq_ci_ != aq_pi_ &&
	       budget_.charged_total() - copied < kAdminCopyBudget &&
	       budget-- > 0) {
		const uint16_t idx = aq_ci_;
		vrnic_admin_cmd cmd;

		if (!plat_.read(aq_base_ + uint64_t(idx & mask) * sizeof(cmd),
				cmd)) {
			cnt_.dma_errors++;
			guest_error("admin queue read failed");
			fatal(VRNIC_ERR_DMA);
			return;
		}
		plat_.trace(VRNIC_TRACE_ADMIN_CMD, cmd.opcode, le(cmd.token), idx);
		uint32_t result = 0;
		const uint8_t st = exec_admin(cmd, result);
		aq_ci_++;

		vrnic_admin_cqe cqe{};
		cqe.token = cmd.token;
		cqe.status = st;
		cqe.flags = ((idx >> aq_log_depth_) & 1) ? 0 : VRNIC_ACQE_PHASE;
		cqe.result = le(result);
		cqe.sq_head = le(aq_ci_);
		if (!plat_.write_entry(acq_base_ + uint64_t(idx & mask) *
						   sizeof(cqe), cqe)) {
			cnt_.dma_errors++;
			guest_error("admin completion write failed");
			fatal(VRNIC_ERR_DMA);
			return;
		}
		plat_.trace(VRNIC_TRACE_ADMIN_DONE, cmd.opcode, le(cmd.token), st);
		cnt_.admin_cmds++;
		completed = true;
	}
	if (aq_ci_ != aq_pi_)
		admin_pending_ = true;
	if (completed)
		post_async(VRNIC_EQE_ADMIN_DONE, 0, aq_ci_);
}

uint8_t Device::exec_admin(const vrnic_admin_cmd &cmd, uint32_t &result)
{
	if (cmd.flags != 0)
		return VRNIC_ADMIN_ST_BAD_PARAM;

	switch (cmd.opcode) {
	case VRNIC_ADMIN_NOP:
		return VRNIC_ADMIN_ST_OK;
	case VRNIC_ADMIN_QUERY_DEVICE: {
		const vrnic_device_attr attr = device_attr();
		return admin_query(cmd.query, &attr, sizeof(attr), result);
	}
	case VRNIC_ADMIN_QUERY_PORT: {
		vrnic_port_attr attr{};
		attr.link = le(link_up_ ? VRNIC_LINK_UP : 0u);
		attr.mtu = le(mtu_);
		attr.max_mtu = le(uint32_t(VRNIC_ETH_MAX_MTU));
		attr.speed_mbps = le(cfg_.speed_mbps);
		return admin_query(cmd.query, &attr, sizeof(attr), result);
	}
	case VRNIC_ADMIN_QUERY_STATS: {
		const vrnic_stats st = stats();
		return admin_query(cmd.query, &st, sizeof(st), result);
	}
	case VRNIC_ADMIN_QUERY_PORT_STATS: {
		const vrnic_port_stats st = port_stats();
		return admin_query(cmd.query, &st, sizeof(st), result);
	}
	case VRNIC_ADMIN_QUERY_CC: {
		const vrnic_cc_params p = cc_params();
		return admin_query(cmd.query, &p, sizeof(p), result);
	}
	case VRNIC_ADMIN_SET_CC:
		return admin_set_cc(cmd);
	case VRNIC_ADMIN_SET_QPC_MEM:
		return rdma_.set_qpc_mem(cmd.set_qpc_mem);
	case VRNIC_ADMIN_SET_PORT:
		return admin_set_port(cmd.set_port);
	case VRNIC_ADMIN_SET_MAC:
		return admin_set_mac(cmd.set_mac);
	case VRNIC_ADMIN_SET_RX_FILTER:
		return admin_set_rx_filter(cmd.set_rx_filter);
	case VRNIC_ADMIN_CREATE_EQ:
		return admin_create_eq(cmd.create_eq);
	case VRNIC_ADMIN_DESTROY_EQ:
		return admin_destroy_eq(le(cmd.destroy.id));
	case VRNIC_ADMIN_CREATE_ETH_RING:
		return admin_create_eth_ring(cmd.create_eth_ring);
	case VRNIC_ADMIN_DESTROY_ETH_RING:
		return admin_destroy_eth_ring(le(cmd.destroy.id));
	case VRNIC_ADMIN_CREATE_UCTX:
		return admin_create_uctx(result);
	case VRNIC_ADMIN_DESTROY_UCTX:
		return admin_destroy_uctx(le(cmd.destroy.id));
	default: {
		uint8_t st = VRNIC_ADMIN_ST_OK;
		if (rdma_.admin(cmd, st, result))
			return st;
		guest_error("unknown admin opcode " + std::to_string(cmd.opcode));
		return VRNIC_ADMIN_ST_BAD_OPCODE;
	}
	}
}

// Results only ever grow at the end, so a driver that knows an older,
// shorter layout gets the prefix it knows (out_len bytes), and the result
// word tells a driver with a short buffer how much there was.
uint8_t Device::admin_query(const vrnic_admin_query &q, const void *data,
			    size_t len, uint32_t &result)
{
	if (le(q.out_len) == 0 || le(q.out_addr) == 0)
		return VRNIC_ADMIN_ST_BAD_PARAM;
	result = uint32_t(len);
	len = std::min<size_t>(len, le(q.out_len));
	if (!plat_.dma_write(le(q.out_addr), data, len)) {
		cnt_.dma_errors++;
		return VRNIC_ADMIN_ST_DMA_ERROR;
	}
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Device::admin_set_port(const vrnic_admin_set_port &c)
{
	const uint32_t mtu = le(c.mtu);

	if (mtu < VRNIC_ETH_MIN_MTU || mtu > VRNIC_ETH_MAX_MTU)
		return VRNIC_ADMIN_ST_BAD_PARAM;
	mtu_ = mtu;
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Device::admin_set_mac(const vrnic_admin_set_mac &c)
{
	const uint8_t zero[6] = {};

	if ((c.mac[0] & 1) || std::memcmp(c.mac, zero, sizeof(zero)) == 0 ||
	    c.rsvd[0] || c.rsvd[1])
		return VRNIC_ADMIN_ST_BAD_PARAM;
	std::memcpy(mac_.data(), c.mac, mac_.size());
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Device::admin_set_rx_filter(const vrnic_admin_set_rx_filter &c)
{
	const uint32_t flags = le(c.flags);
	const unsigned int n = c.mc_count;

	if (flags & ~uint32_t(VRNIC_RX_FILTER_PROMISC | VRNIC_RX_FILTER_ALLMULTI) ||
	    n > VRNIC_RX_FILTER_MAX_MC || c.rsvd[0] || c.rsvd[1] || c.rsvd[2])
		return VRNIC_ADMIN_ST_BAD_PARAM;
	for (unsigned int i = 0; i < VRNIC_RX_FILTER_MAX_MC; i++) {
		bool bad = false;
		if (i < n)
			bad = !(c.mc[i][0] & 1);	// not a group address
		else
			bad = std::any_of(std::begin(c.mc[i]), std::end(c.mc[i]),
					  [](uint8_t b) { return b != 0; });
		if (bad)
			return VRNIC_ADMIN_ST_BAD_PARAM;
	}
	rx_flags_ = flags;
	rx_mc_count_ = n;
	rx_mc_ = {};
	for (unsigned int i = 0; i < n; i++)
		std::memcpy(rx_mc_[i].data(), c.mc[i], 6);
	return VRNIC_ADMIN_ST_OK;
}

static_assert(cc::kDcqcnParamTable.size() == VRNIC_CC_NUM_DCQCN);
static_assert(cc::kSwiftParamTable.size() == VRNIC_CC_NUM_SWIFT);

// One setting per command; anything refused changes nothing.  The
// payload past struct vrnic_admin_set_cc, its rsvd bytes and an index
// the op does not use must be 0.
uint8_t Device::admin_set_cc(const vrnic_admin_cmd &cmd)
{
	const vrnic_admin_set_cc &c = cmd.set_cc;
	const uint32_t index = le(c.index);
	const uint32_t value = le(c.value);
	const bool indexed = c.op == VRNIC_CC_OP_SET_DCQCN ||
			     c.op == VRNIC_CC_OP_SET_SWIFT;

	if (!all_zero(c.rsvd) ||
	    std::any_of(std::begin(cmd.raw) + sizeof(c), std::end(cmd.raw),
			[](uint8_t b) { return b != 0; }) ||
	    (!indexed && index != 0))
		return VRNIC_ADMIN_ST_BAD_PARAM;

	CcSettings &cc = rdma_.cc_settings();
	switch (c.op) {
	case VRNIC_CC_OP_SET_ALGO:
		if (value > VRNIC_CC_ALGO_SWIFT)
			return VRNIC_ADMIN_ST_BAD_PARAM;
		cc.cfg.algo = cc::Algo(value);
		break;
	case VRNIC_CC_OP_SET_NP_ENABLE:
	case VRNIC_CC_OP_SET_RP_ENABLE:
		if (value > 0xff)
			return VRNIC_ADMIN_ST_BAD_PARAM;
		(c.op == VRNIC_CC_OP_SET_NP_ENABLE ? cc.np_enable : cc.rp_enable) =
			uint8_t(value);
		break;
	case VRNIC_CC_OP_SET_DCQCN:
		if (cc::set_param(cc.cfg.dcqcn, size_t(index), value) != cc::ParamResult::Ok)
			return VRNIC_ADMIN_ST_BAD_PARAM;
		break;
	case VRNIC_CC_OP_SET_SWIFT:
		if (cc::set_param(cc.cfg.swift, size_t(index), value) != cc::ParamResult::Ok)
			return VRNIC_ADMIN_ST_BAD_PARAM;
		break;
	default:
		return VRNIC_ADMIN_ST_BAD_PARAM;
	}
	cc.gen++;
	return VRNIC_ADMIN_ST_OK;
}

vrnic_cc_params Device::cc_params() const
{
	const CcSettings &cc = rdma_.cc_settings();
	vrnic_cc_params p{};

	p.algo = le(uint32_t(cc.cfg.algo));
	p.np_enable = le(uint32_t(cc.np_enable));
	p.rp_enable = le(uint32_t(cc.rp_enable));
	p.gen = le(cc.gen);
	for (size_t i = 0; i < cc::kDcqcnParamTable.size(); i++)
		p.dcqcn[i] = le(cc.cfg.dcqcn.*(cc::kDcqcnParamTable[i].field));
	for (size_t i = 0; i < cc::kSwiftParamTable.size(); i++)
		p.swift[i] = le(cc.cfg.swift.*(cc::kSwiftParamTable[i].field));
	return p;
}

uint8_t Device::admin_create_eq(const vrnic_admin_create_eq &c)
{
	const unsigned int eqn = c.eqn;
	const unsigned int vector = le(c.vector);

	if (eqn == 0 || eqn >= eqs_.size() || vector >= cfg_.num_msix ||
	    !EventQueue::valid_config(le(c.base), c.log_depth))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	if (eqs_[eqn].enabled())
		return VRNIC_ADMIN_ST_BUSY;
	eqs_[eqn].configure(eqn, le(c.base), c.log_depth, vector);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Device::admin_destroy_eq(uint32_t eqn)
{
	if (eqn == 0 || eqn >= eqs_.size())
		return VRNIC_ADMIN_ST_BAD_PARAM;
	if (!eqs_[eqn].enabled())
		return VRNIC_ADMIN_ST_NOT_FOUND;
	for (const auto *rings : {tx_.data(), rx_.data()})
		for (size_t q = 0; q < VRNIC_MAX_ETH_QUEUES; q++)
			if (rings[q].enabled && rings[q].eqn == eqn)
				return VRNIC_ADMIN_ST_BUSY;
	eqs_[eqn].disable();
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Device::admin_create_eth_ring(const vrnic_admin_create_eth_ring &c)
{
	const uint64_t base = le(c.base);
	const unsigned int log_depth = c.log_depth;

	if (c.type > VRNIC_ETH_RING_RX || c.qid >= VRNIC_MAX_ETH_QUEUES ||
	    log_depth < VRNIC_ETH_MIN_LOG_DEPTH ||
	    log_depth > VRNIC_ETH_MAX_LOG_DEPTH || base == 0 ||
	    base % VRNIC_RING_ALIGN ||
	    base + (uint64_t(sizeof(vrnic_eth_desc)) << log_depth) < base ||
	    c.eqn == 0 || c.eqn >= eqs_.size() || !eqs_[c.eqn].enabled())
		return VRNIC_ADMIN_ST_BAD_PARAM;

	EthRing &r = (c.type == VRNIC_ETH_RING_TX ? tx_ : rx_)[c.qid];
	if (r.enabled)
		return VRNIC_ADMIN_ST_BUSY;
	r = EthRing();
	r.enabled = true;
	r.base = base;
	r.log_depth = log_depth;
	r.eqn = c.eqn;
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Device::admin_destroy_eth_ring(uint32_t id)
{
	const uint32_t type = id >> 8, qid = id & 0xff;

	if (type > VRNIC_ETH_RING_RX || qid >= VRNIC_MAX_ETH_QUEUES)
		return VRNIC_ADMIN_ST_BAD_PARAM;
	EthRing &r = (type == VRNIC_ETH_RING_TX ? tx_ : rx_)[qid];
	if (!r.enabled)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	r = EthRing();
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Device::admin_create_uctx(uint32_t &result)
{
	for (uint32_t page = 1; page < uctx_used_.size(); page++) {
		if (!uctx_used_[page]) {
			uctx_used_[page] = true;
			result = page;
			return VRNIC_ADMIN_ST_OK;
		}
	}
	return VRNIC_ADMIN_ST_NO_RESOURCE;
}

uint8_t Device::admin_destroy_uctx(uint32_t id)
{
	if (id == 0 || id >= uctx_used_.size())
		return VRNIC_ADMIN_ST_BAD_PARAM;
	if (!uctx_used_[id])
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (rdma_.uctx_in_use(id))
		return VRNIC_ADMIN_ST_BUSY;
	uctx_used_[id] = false;
	return VRNIC_ADMIN_ST_OK;
}

vrnic_device_attr Device::device_attr() const
{
	vrnic_device_attr a{};
	const uint8_t *m = cfg_.mac;

	a.spec_version = le(uint32_t(VRNIC_SPEC_VERSION));
	a.caps = le(kCaps);
	a.fw_version = le(uint64_t(VRNIC_SPEC_VERSION));
	// EUI-64 from the MAC, as RoCE devices derive their node GUID.
	a.sys_image_guid = le(uint64_t(m[0] ^ 2) << 56 | uint64_t(m[1]) << 48 |
			      uint64_t(m[2]) << 40 | uint64_t(0xfffe) << 24 |
			      uint64_t(m[3]) << 16 | uint64_t(m[4]) << 8 | m[5]);
	a.max_mr_size = le(uint64_t(VRNIC_MAX_MR_PAGES) << 12);
	a.max_qp = le(rdma_.qp_slots() - 2);
	a.max_qp_wr = le(uint32_t(1u << VRNIC_MAX_WQ_LOG_DEPTH));
	a.max_cq = le(uint32_t(VRNIC_MAX_CQ - 1));
	a.max_cqe = le(uint32_t(1u << VRNIC_MAX_CQ_LOG_DEPTH));
	a.max_mr = le(uint32_t(VRNIC_MAX_MR));
	a.max_pd = le(uint32_t(VRNIC_MAX_PD - 1));
	a.max_sge = le(uint32_t(VRNIC_MAX_SGE));
	a.max_qp_rd_atom = le(uint32_t(VRNIC_MAX_RD_ATOMIC));
	a.max_uctx = le(uint32_t(VRNIC_NUM_DB_PAGES - 1));
	a.max_eqs = le(uint32_t(VRNIC_MAX_EQS));
	a.max_eth_queues = le(uint32_t(VRNIC_MAX_ETH_QUEUES));
	a.max_mtu = le(uint32_t(VRNIC_ETH_MAX_MTU));
	std::memcpy(a.mac, cfg_.mac, sizeof(a.mac));
	a.gid_tbl_len = le(uint16_t(VRNIC_GID_TABLE_LEN));
	a.host_mem_budget = le(budget_.limit());
	a.max_srq = le(uint32_t(VRNIC_MAX_SRQ - 1));
	a.max_mcast_attach = le(uint32_t(VRNIC_MAX_MCAST_ATTACH));
	a.qpc_cache = le(rdma_.qpc().capacity());
	a.qpc_miss_ns = le(rdma_.qpc_miss_ns());
	return a;
}

vrnic_stats Device::stats() const
{
	vrnic_stats s{};

	s.eth_tx_frames = le(cnt_.eth_tx_frames);
	s.eth_tx_bytes = le(cnt_.eth_tx_bytes);
	s.eth_rx_frames = le(cnt_.eth_rx_frames);
	s.eth_rx_bytes = le(cnt_.eth_rx_bytes);
	s.eth_rx_drops = le(cnt_.eth_rx_drops);
	s.roce_rx_frames = le(cnt_.roce_rx_frames);
	s.db_violations = le(cnt_.db_violations);
	s.eq_overflows = le(cnt_.eq_overflows);
	s.dma_errors = le(cnt_.dma_errors);
	s.admin_cmds = le(cnt_.admin_cmds);
	const RdmaCounters &r = rdma_.counters();
	s.sent_pkts = le(r.sent_pkts);
	s.rcvd_pkts = le(r.rcvd_pkts);
	s.sent_bytes = le(r.sent_bytes);
	s.rcvd_bytes = le(r.rcvd_bytes);
	s.icrc_errors = le(r.icrc_errors);
	s.malformed_pkts = le(r.malformed);
	s.bad_qp_pkts = le(r.bad_qp);
	s.duplicate_request = le(r.duplicate_request);
	s.out_of_seq_request = le(r.out_of_seq_request);
	s.rcvd_rnr_err = le(r.rcvd_rnr_err);
	s.send_rnr_err = le(r.send_rnr_err);
	s.rcvd_seq_err = le(r.rcvd_seq_err);
	s.ack_timeouts = le(r.retry_timeouts);
	s.retry_exceeded_err = le(r.retry_exceeded_err);
	s.retry_rnr_exceeded_err = le(r.retry_rnr_exceeded_err);
	s.remote_access_err = le(r.remote_access_err);
	s.cq_overflows = le(r.cq_overflows);
	s.qkey_violations = le(r.qkey_violations);
	s.ud_no_recv = le(r.ud_no_recv);
	s.uc_dropped = le(r.uc_dropped);
	s.srq_limit_events = le(r.srq_limit_events);
	s.fast_reg = le(r.fast_reg);
	s.local_inv = le(r.local_inv);
	s.remote_inv = le(r.remote_inv);
	s.mw_binds = le(r.mw_binds);
	s.bad_sgid = le(r.bad_sgid);
	s.vlan_drops = le(r.vlan_drops);
	s.np_ecn_marked_roce_packets = le(r.np_ecn_marked_roce_packets);
	s.np_cnp_sent = le(r.np_cnp_sent);
	s.rp_cnp_handled = le(r.rp_cnp_handled);
	s.rp_cnp_ignored = le(r.rp_cnp_ignored);
	s.roce_adp_retrans = le(r.roce_adp_retrans);
	s.roce_adp_retrans_to = le(r.roce_adp_retrans_to);
	s.sack_sent = le(r.sack_sent);
	s.sack_rcvd = le(r.sack_rcvd);
	s.ooo_placed = le(r.ooo_placed);
	s.ooo_dropped = le(r.ooo_dropped);
	s.implied_nak_seq_err = le(r.implied_nak_seq_err);
	s.qpc_cache_hits = le(r.qpc_cache_hits);
	s.qpc_cache_misses = le(r.qpc_cache_misses);
	s.qpc_cache_evictions = le(r.qpc_cache_evictions);
	return s;
}

vrnic_port_stats Device::port_stats() const
{
	const PfcCounters c = pfc_counters();
	vrnic_port_stats s{};

	for (unsigned int p = 0; p < VRNIC_NUM_PRIOS; p++) {
		s.rx_pause[p] = le(c.rx_pause[p]);
		s.rx_pause_duration_us[p] = le(c.rx_pause_duration_ns[p] / 1000);
		s.rx_pause_transition[p] = le(c.rx_pause_transition[p]);
	}
	s.mac_control_unknown = le(c.mac_control_unknown);
	s.mac_control_malformed = le(c.mac_control_malformed);
	s.tx_pause_storm_error_events = le(c.tx_pause_storm_error_events);
	return s;
}

} // namespace vrnic

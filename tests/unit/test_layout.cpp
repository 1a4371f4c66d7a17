// SPDX-License-Identifier: GPL-2.0-or-later
// Layout of every structure in include/vrnic_hw.h, as the spec states it.
#include <cstddef>

#include <gtest/gtest.h>

#include "vrnic_hw.h"

extern "C" size_t vrnic_c_sizeof_admin_cmd(void);

#define CHECK_OFF(type, field, off) \
	static_assert(offsetof(type, field) == (off), #type "." #field)

CHECK_OFF(vrnic_admin_cmd, opcode, 0);
CHECK_OFF(vrnic_admin_cmd, flags, 1);
CHECK_OFF(vrnic_admin_cmd, token, 2);
CHECK_OFF(vrnic_admin_cmd, query, 8);
CHECK_OFF(vrnic_admin_cmd, raw, 8);
CHECK_OFF(vrnic_admin_query, out_addr, 0);
CHECK_OFF(vrnic_admin_query, out_len, 8);
CHECK_OFF(vrnic_admin_create_eq, base, 0);
CHECK_OFF(vrnic_admin_create_eq, log_depth, 8);
CHECK_OFF(vrnic_admin_create_eq, eqn, 9);
CHECK_OFF(vrnic_admin_create_eq, vector, 10);
CHECK_OFF(vrnic_admin_create_eth_ring, base, 0);
CHECK_OFF(vrnic_admin_create_eth_ring, type, 8);
CHECK_OFF(vrnic_admin_create_eth_ring, log_depth, 9);
CHECK_OFF(vrnic_admin_create_eth_ring, qid, 10);
CHECK_OFF(vrnic_admin_create_eth_ring, eqn, 11);
CHECK_OFF(vrnic_admin_cqe, token, 0);
CHECK_OFF(vrnic_admin_cqe, status, 2);
CHECK_OFF(vrnic_admin_cqe, flags, 3);
CHECK_OFF(vrnic_admin_cqe, result, 4);
CHECK_OFF(vrnic_admin_cqe, sq_head, 8);
CHECK_OFF(vrnic_eqe, type, 0);
CHECK_OFF(vrnic_eqe, flags, 1);
CHECK_OFF(vrnic_eqe, id, 4);
CHECK_OFF(vrnic_eqe, data, 8);
CHECK_OFF(vrnic_eth_desc, addr, 0);
CHECK_OFF(vrnic_eth_desc, len, 8);
CHECK_OFF(vrnic_eth_desc, flags, 10);
CHECK_OFF(vrnic_eth_desc, wb_len, 12);
CHECK_OFF(vrnic_eth_desc, wb_status, 14);
CHECK_OFF(vrnic_device_attr, max_mr_size, 24);
CHECK_OFF(vrnic_device_attr, max_qp, 32);
CHECK_OFF(vrnic_device_attr, max_mtu, 76);
CHECK_OFF(vrnic_device_attr, mac, 80);
CHECK_OFF(vrnic_device_attr, gid_tbl_len, 86);
CHECK_OFF(vrnic_device_attr, max_srq, 96);
CHECK_OFF(vrnic_device_attr, max_mcast_attach, 100);
CHECK_OFF(vrnic_device_attr, host_mem_budget, 88);
CHECK_OFF(vrnic_device_attr, qpc_cache, 104);
CHECK_OFF(vrnic_device_attr, qpc_miss_ns, 108);
CHECK_OFF(vrnic_port_attr, speed_mbps, 12);
CHECK_OFF(vrnic_stats, admin_cmds, 72);
CHECK_OFF(vrnic_stats, sent_pkts, 80);
CHECK_OFF(vrnic_stats, remote_inv, 264);
CHECK_OFF(vrnic_stats, bad_sgid, 280);
CHECK_OFF(vrnic_stats, vlan_drops, 288);
CHECK_OFF(vrnic_stats, np_ecn_marked_roce_packets, 296);
CHECK_OFF(vrnic_stats, rp_cnp_ignored, 320);
CHECK_OFF(vrnic_stats, roce_adp_retrans, 328);
CHECK_OFF(vrnic_stats, ooo_dropped, 368);
CHECK_OFF(vrnic_stats, implied_nak_seq_err, 376);
CHECK_OFF(vrnic_stats, qpc_cache_hits, 384);
CHECK_OFF(vrnic_stats, qpc_cache_evictions, 400);
CHECK_OFF(vrnic_admin_set_qpc_mem, entries, 8);
CHECK_OFF(vrnic_admin_set_qpc_mem, flags, 12);
CHECK_OFF(vrnic_qpc, dbrec, 56);
CHECK_OFF(vrnic_port_stats, rx_pause_duration_us, 64);
CHECK_OFF(vrnic_port_stats, tx_pause, 192);
CHECK_OFF(vrnic_port_stats, mac_control_malformed, 264);
CHECK_OFF(vrnic_admin_create_mr, pbl, 16);
CHECK_OFF(vrnic_admin_create_mr, page_shift, 36);
CHECK_OFF(vrnic_admin_create_mr, inline_pages, 40);
CHECK_OFF(vrnic_admin_create_cq, dbrec, 8);
CHECK_OFF(vrnic_admin_create_cq, ring_flags, 22);
CHECK_OFF(vrnic_admin_create_qp, recv_cqn, 36);
CHECK_OFF(vrnic_admin_create_qp, sq_flags, 45);
CHECK_OFF(vrnic_qp_attr, sq_psn, 8);
CHECK_OFF(vrnic_qp_attr, dgid, 24);
CHECK_OFF(vrnic_qp_attr, sgid_index, 40);
CHECK_OFF(vrnic_qp_attr, dmac, 56);
CHECK_OFF(vrnic_qp_attr, flow_label, 72);
CHECK_OFF(vrnic_qp_attr, cc_rate_mbps, 80);
CHECK_OFF(vrnic_qp_attr, transport_flags, 84);
CHECK_OFF(vrnic_qp_attr, send_window, 88);
CHECK_OFF(vrnic_qp_attr, spray_paths, 90);
CHECK_OFF(vrnic_qp_attr, sqd_notify, 91);
CHECK_OFF(vrnic_qp_attr, sq_draining, 92);
CHECK_OFF(vrnic_qp_attr, rsvd, 93);
CHECK_OFF(vrnic_admin_set_cc, op, 0);
CHECK_OFF(vrnic_admin_set_cc, index, 4);
CHECK_OFF(vrnic_admin_set_cc, value, 8);
CHECK_OFF(vrnic_admin_cmd, set_cc, 8);
CHECK_OFF(vrnic_cc_params, algo, 0);
CHECK_OFF(vrnic_cc_params, np_enable, 4);
CHECK_OFF(vrnic_cc_params, rp_enable, 8);
CHECK_OFF(vrnic_cc_params, gen, 12);
CHECK_OFF(vrnic_cc_params, dcqcn, 16);
CHECK_OFF(vrnic_cc_params, swift, 96);
CHECK_OFF(vrnic_ud_av, sgid_index, 24);
CHECK_OFF(vrnic_ud_av, dmac, 40);
CHECK_OFF(vrnic_admin_set_gid, smac, 16);
CHECK_OFF(vrnic_admin_set_gid, vlan_id, 22);
CHECK_OFF(vrnic_admin_set_gid, index, 24);
CHECK_OFF(vrnic_send_wqe, imm_data, 12);
CHECK_OFF(vrnic_send_wqe, remote_addr, 16);
CHECK_OFF(vrnic_send_wqe, compare_add, 32);
CHECK_OFF(vrnic_reg_mr_wqe, opcode, 8);
CHECK_OFF(vrnic_reg_mr_wqe, page_shift, 10);
CHECK_OFF(vrnic_reg_mr_wqe, access, 12);
CHECK_OFF(vrnic_reg_mr_wqe, iova, 16);
CHECK_OFF(vrnic_reg_mr_wqe, key, 24);
CHECK_OFF(vrnic_reg_mr_wqe, npages, 28);
CHECK_OFF(vrnic_reg_mr_wqe, length, 32);
CHECK_OFF(vrnic_reg_mr_wqe, pbl, 40);
CHECK_OFF(vrnic_bind_mw_wqe, opcode, 8);
CHECK_OFF(vrnic_bind_mw_wqe, mw_type, 10);
CHECK_OFF(vrnic_bind_mw_wqe, new_key, 11);
CHECK_OFF(vrnic_bind_mw_wqe, access, 12);
CHECK_OFF(vrnic_bind_mw_wqe, addr, 16);
CHECK_OFF(vrnic_bind_mw_wqe, mw_key, 24);
CHECK_OFF(vrnic_bind_mw_wqe, mr_key, 28);
CHECK_OFF(vrnic_bind_mw_wqe, length, 32);
CHECK_OFF(vrnic_sge, lkey, 12);
CHECK_OFF(vrnic_cqe, wqe_idx, 24);
CHECK_OFF(vrnic_cqe, owner, 31);

TEST(Layout, SizesMatchSpec)
{
	EXPECT_EQ(sizeof(vrnic_admin_cmd), 64u);
	EXPECT_EQ(vrnic_c_sizeof_admin_cmd(), 64u);
	EXPECT_EQ(sizeof(vrnic_admin_cqe), 16u);
	EXPECT_EQ(sizeof(vrnic_eqe), 16u);
	EXPECT_EQ(sizeof(vrnic_eth_desc), 16u);
	EXPECT_EQ(sizeof(vrnic_device_attr), 112u);
	EXPECT_EQ(sizeof(vrnic_port_attr), 16u);
	EXPECT_EQ(sizeof(vrnic_stats), 408u);
	EXPECT_EQ(sizeof(vrnic_port_stats), 280u);
	EXPECT_EQ(sizeof(vrnic_admin_set_cc), 12u);
	EXPECT_EQ(sizeof(vrnic_cc_params), 128u);
	EXPECT_EQ(sizeof(vrnic_qp_attr), 128u);
	EXPECT_EQ(sizeof(vrnic_admin_set_qpc_mem), 16u);
	EXPECT_EQ(sizeof(vrnic_qpc), 64u);
}

TEST(Layout, RegisterMapIsAlignedAndInsideBar0)
{
	const unsigned regs[] = {
		VRNIC_REG_VERSION, VRNIC_REG_CAPS, VRNIC_REG_STATUS,
		VRNIC_REG_CTRL, VRNIC_REG_ERROR, VRNIC_REG_NUM_MSIX,
		VRNIC_REG_NUM_DB_PAGES, VRNIC_REG_MAX_MTU, VRNIC_REG_MAC_LO,
		VRNIC_REG_MAC_HI, VRNIC_REG_LINK, VRNIC_REG_SCRATCH,
		VRNIC_REG_TEST_IRQ, VRNIC_REG_TEST_DMA_ADDR_LO,
		VRNIC_REG_TEST_DMA_ADDR_HI, VRNIC_REG_TEST_DMA_LEN,
		VRNIC_REG_TEST_DMA_CTRL, VRNIC_REG_TEST_DMA_STATUS,
		VRNIC_REG_AQ_BASE_LO, VRNIC_REG_AQ_BASE_HI,
		VRNIC_REG_ACQ_BASE_LO, VRNIC_REG_ACQ_BASE_HI,
		VRNIC_REG_AQ_LOG_DEPTH, VRNIC_REG_AQ_DB,
		VRNIC_REG_AEQ_BASE_LO, VRNIC_REG_AEQ_BASE_HI,
		VRNIC_REG_AEQ_LOG_DEPTH, VRNIC_REG_AEQ_DB,
		VRNIC_REG_CNT_DB_VIOLATIONS, VRNIC_REG_CNT_DMA_ERRORS,
	};
	for (size_t i = 0; i < std::size(regs); i++) {
		EXPECT_EQ(regs[i] % 4, 0u) << regs[i];
		EXPECT_LT(regs[i], unsigned(VRNIC_REG_BAR_SIZE));
		for (size_t j = 0; j < i; j++)
			EXPECT_NE(regs[i], regs[j]) << "duplicate offset";
	}
}

TEST(Layout, DoorbellsFitInOnePage)
{
	EXPECT_LT(VRNIC_DB_USER_PING, VRNIC_DB_PAGE_SIZE);
	EXPECT_EQ(VRNIC_DB_BAR_SIZE, VRNIC_DB_PAGE_SIZE * VRNIC_NUM_DB_PAGES);
	// The EQ doorbell's EQ number field must name every EQ.
	EXPECT_GE(VRNIC_FIELD_GET(VRNIC_EQ_DB_EQN, ~0u) + 1u, unsigned(VRNIC_MAX_EQS));
	// 16-bit ring indices need rings of at most 2^15 entries.
	EXPECT_LE(VRNIC_EQ_MAX_LOG_DEPTH, 15);
	EXPECT_LE(VRNIC_AQ_MAX_LOG_DEPTH, 15);
	EXPECT_LE(VRNIC_ETH_MAX_LOG_DEPTH, 15);
}

TEST(Layout, MaxFrameHoldsMaxMtu)
{
	EXPECT_GE(VRNIC_ETH_MAX_FRAME, VRNIC_ETH_MAX_MTU + 14 + 4);
	EXPECT_LE(VRNIC_ETH_MAX_FRAME, 0xffff);	// fits wb_len
}

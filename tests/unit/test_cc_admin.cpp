// SPDX-License-Identifier: GPL-2.0-or-later
// The congestion-control control plane: SET_CC and QUERY_CC (spec
// "Congestion control"), and the per-QP rate QUERY_QP reports.
#include <cstring>

#include <gtest/gtest.h>

#include "cc.hpp"
#include "engine_internal.hpp"
#include "fake_platform.hpp"
#include "rdma.hpp"
#include "rdma_node.hpp"

namespace cc = vrnic::cc;

namespace {

constexpr uint64_t kOut = FakePlatform::kMemBase + 0x8000;

vrnic_admin_cmd set_cc(uint8_t op, uint32_t index, uint32_t value)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_CC;
	c.set_cc.op = op;
	c.set_cc.index = index;
	c.set_cc.value = value;
	return c;
}

uint8_t set(FakePlatform &p, uint8_t op, uint32_t index, uint32_t value)
{
	return p.admin(set_cc(op, index, value)).status;
}

vrnic_cc_params query(FakePlatform &p)
{
	std::memset(p.ptr(kOut), 0xa5, 512);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_QUERY_CC;
	c.query.out_addr = kOut;
	c.query.out_len = 512;
	const auto cqe = p.admin(c);
	EXPECT_EQ(cqe.status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(cqe.result, uint32_t(sizeof(vrnic_cc_params)));
	// Nothing written past the result.
	EXPECT_EQ(p.ptr(kOut)[sizeof(vrnic_cc_params)], 0xa5);
	return p.load<vrnic_cc_params>(kOut);
}

bool same(const vrnic_cc_params &a, const vrnic_cc_params &b)
{
	return std::memcmp(&a, &b, sizeof(a)) == 0;
}

// mlx5's names in mlx5_ib_dbg_cc_name[] order, as the header numbers them.
const char *const kMlx5Names[VRNIC_CC_NUM_DCQCN] = {
	"rp_clamp_tgt_rate", "rp_clamp_tgt_rate_ati", "rp_time_reset",
	"rp_byte_reset", "rp_threshold", "rp_ai_rate", "rp_max_rate",
	"rp_hai_rate", "rp_min_dec_fac", "rp_min_rate",
	"rp_rate_to_set_on_first_cnp", "rp_dce_tcp_g", "rp_dce_tcp_rtt",
	"rp_rate_reduce_monitor_period", "rp_initial_alpha_value", "rp_gd",
	"np_min_time_between_cnps", "np_cnp_dscp", "np_cnp_prio_mode",
	"np_cnp_prio",
};

} // namespace

TEST(CcAdmin, TablesFollowTheHeader)
{
	for (size_t i = 0; i < VRNIC_CC_NUM_DCQCN; i++)
		EXPECT_EQ(cc::kDcqcnParamTable[i].name, kMlx5Names[i]) << i;
	EXPECT_EQ(cc::kDcqcnParamTable[VRNIC_CC_NP_CNP_PRIO].name, "np_cnp_prio");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_MTU].name, "mtu");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_BASE_TARGET_US].name,
		  "base_target_us");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_AI_MILLI].name, "ai_milli");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_BETA_MILLI].name, "beta_milli");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_MAX_MDF_MILLI].name,
		  "max_mdf_milli");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_MIN_CWND_Q10].name,
		  "min_cwnd_q10");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_MAX_CWND_PKTS].name,
		  "max_cwnd_pkts");
	EXPECT_EQ(cc::kSwiftParamTable[VRNIC_CC_SWIFT_INIT_CWND_PKTS].name,
		  "init_cwnd_pkts");
	// Every default is inside its knob's range.
	const cc::DcqcnParams d{};
	const cc::SwiftParams s{};
	for (const auto &i : cc::kDcqcnParamTable) {
		EXPECT_GE(d.*(i.field), i.min) << i.name;
		EXPECT_LE(d.*(i.field), i.max) << i.name;
	}
	for (const auto &i : cc::kSwiftParamTable) {
		EXPECT_GE(s.*(i.field), i.min) << i.name;
		EXPECT_LE(s.*(i.field), i.max) << i.name;
	}
}

TEST(CcAdmin, DefaultsAreMlx5s)
{
	FakePlatform p;
	p.enable();
	const auto q = query(p);
	EXPECT_EQ(q.algo, uint32_t(VRNIC_CC_ALGO_NONE));
	EXPECT_EQ(q.np_enable, 0xffu);
	EXPECT_EQ(q.rp_enable, 0xffu);
	EXPECT_EQ(q.gen, 0u);
	// ConnectX-5's values, by hand rather than from DcqcnParams.
	const uint32_t mlx5[VRNIC_CC_NUM_DCQCN] = {
		0, 1, 300, 32767, 1, 5, 0, 50, 50, 1, 0, 1019, 1, 4, 1023, 11,
		4, 48, 0, 6,
	};
	for (size_t i = 0; i < VRNIC_CC_NUM_DCQCN; i++)
		EXPECT_EQ(q.dcqcn[i], mlx5[i]) << kMlx5Names[i];
	const uint32_t swift[VRNIC_CC_NUM_SWIFT] = {
		4096, 100, 1000, 800, 500, 1, 1024, 16,
	};
	for (size_t i = 0; i < VRNIC_CC_NUM_SWIFT; i++)
		EXPECT_EQ(q.swift[i], swift[i]) << cc::kSwiftParamTable[i].name;
}

TEST(CcAdmin, QueryIntoAShortBufferWritesThePrefix)
{
	FakePlatform p;
	p.enable();
	std::memset(p.ptr(kOut), 0xa5, 512);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_QUERY_CC;
	c.query.out_addr = kOut;
	c.query.out_len = 8;
	const auto cqe = p.admin(c);
	ASSERT_EQ(cqe.status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(cqe.result, uint32_t(sizeof(vrnic_cc_params)));
	EXPECT_EQ(p.load<uint32_t>(kOut + 4), 0xffu);	// np_enable
	EXPECT_EQ(p.ptr(kOut)[8], 0xa5);
	c.query.out_len = 0;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
}

TEST(CcAdmin, EveryKnobRoundTripsByIndex)
{
	FakePlatform p;
	p.enable();
	uint32_t gen = 0;
	auto prev = query(p);
	for (size_t i = 0; i < VRNIC_CC_NUM_DCQCN; i++) {
		const auto &k = cc::kDcqcnParamTable[i];
		// A value other than the current one, inside the range and
		// consistent with the defaults (rp_max_rate 0 binds nothing).
		const uint32_t v = prev.dcqcn[i] == k.max ? k.min : k.max;
		ASSERT_EQ(set(p, VRNIC_CC_OP_SET_DCQCN, uint32_t(i), v),
			  VRNIC_ADMIN_ST_OK) << k.name;
		auto q = query(p);
		EXPECT_EQ(q.gen, ++gen) << k.name;
		EXPECT_EQ(q.dcqcn[i], v) << k.name;
		// Only that knob moved.
		prev.dcqcn[i] = v;
		prev.gen = gen;
		EXPECT_TRUE(same(q, prev)) << k.name;
		// And back to the default.
		const uint32_t d = cc::DcqcnParams{}.*(k.field);
		ASSERT_EQ(set(p, VRNIC_CC_OP_SET_DCQCN, uint32_t(i), d),
			  VRNIC_ADMIN_ST_OK) << k.name;
		prev = query(p);
		EXPECT_EQ(prev.gen, ++gen);
		EXPECT_EQ(prev.dcqcn[i], d);
	}
	for (size_t i = 0; i < VRNIC_CC_NUM_SWIFT; i++) {
		const auto &k = cc::kSwiftParamTable[i];
		const uint32_t d = cc::SwiftParams{}.*(k.field);
		// min and max cwnd bound each other and init: a value one step
		// away in the direction the defaults allow.
		const uint32_t v = d > k.min ? d - 1 : d + 1;
		ASSERT_EQ(set(p, VRNIC_CC_OP_SET_SWIFT, uint32_t(i), v),
			  VRNIC_ADMIN_ST_OK) << k.name;
		auto q = query(p);
		EXPECT_EQ(q.gen, ++gen);
		EXPECT_EQ(q.swift[i], v) << k.name;
		prev.swift[i] = v;
		prev.gen = gen;
		EXPECT_TRUE(same(q, prev)) << k.name;
		// The engine's settings are what QUERY_CC said.
		uint32_t got = 0;
		EXPECT_TRUE(cc::get_param(p.eng->dev.rdma().cc_settings().cfg.swift,
					  i, got));
		EXPECT_EQ(got, v);
		ASSERT_EQ(set(p, VRNIC_CC_OP_SET_SWIFT, uint32_t(i), d),
			  VRNIC_ADMIN_ST_OK);
		prev = query(p);
		EXPECT_EQ(prev.gen, ++gen);
	}
	const auto &s = p.eng->dev.rdma().cc_settings();
	EXPECT_EQ(s.gen, gen);
	EXPECT_TRUE(cc::valid(s.cfg.dcqcn));
	EXPECT_TRUE(cc::valid(s.cfg.swift));
}

TEST(CcAdmin, AlgoAndEnables)
{
	FakePlatform p;
	p.enable();
	const auto &s = p.eng->dev.rdma().cc_settings();
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_ALGO, 0, VRNIC_CC_ALGO_DCQCN), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(s.cfg.algo, cc::Algo::Dcqcn);
	EXPECT_EQ(query(p).algo, uint32_t(VRNIC_CC_ALGO_DCQCN));
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_ALGO, 0, VRNIC_CC_ALGO_SWIFT), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(s.cfg.algo, cc::Algo::Swift);
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_ALGO, 0, VRNIC_CC_ALGO_NONE), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(s.cfg.algo, cc::Algo::None);

	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_NP_ENABLE, 0, 0x41), VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_RP_ENABLE, 0, 0x08), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(s.np_enable, 0x41);
	EXPECT_EQ(s.rp_enable, 0x08);
	auto q = query(p);
	EXPECT_EQ(q.np_enable, 0x41u);
	EXPECT_EQ(q.rp_enable, 0x08u);
	EXPECT_EQ(q.gen, 5u);
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_NP_ENABLE, 0, 0), VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_RP_ENABLE, 0, 0xff), VRNIC_ADMIN_ST_OK);
	q = query(p);
	EXPECT_EQ(q.np_enable, 0u);
	EXPECT_EQ(q.rp_enable, 0xffu);
	// Setting the value it already has is a successful command too.
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_RP_ENABLE, 0, 0xff), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(query(p).gen, 8u);
}

TEST(CcAdmin, RefusedCommandsChangeNothing)
{
	FakePlatform p;
	p.enable();
	// Move a few knobs off their defaults first, so that a refusal that
	// reset something would show.
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_ALGO, 0, VRNIC_CC_ALGO_DCQCN), VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_DCQCN, VRNIC_CC_RP_MAX_RATE, 40000),
		  VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_NP_ENABLE, 0, 0x40), VRNIC_ADMIN_ST_OK);
	const auto before = query(p);
	ASSERT_EQ(before.gen, 3u);

	struct Bad {
		const char *why;
		vrnic_admin_cmd cmd;
	};
	std::vector<Bad> bad = {
		{"op 0", set_cc(0, 0, 0)},
		{"unknown op", set_cc(VRNIC_CC_OP_SET_SWIFT + 1, 0, 0)},
		{"op 255", set_cc(255, 0, 1)},
		{"algo 3", set_cc(VRNIC_CC_OP_SET_ALGO, 0, 3)},
		{"algo ~0", set_cc(VRNIC_CC_OP_SET_ALGO, 0, ~0u)},
		{"algo with an index", set_cc(VRNIC_CC_OP_SET_ALGO, 1, 1)},
		{"np mask > 0xff", set_cc(VRNIC_CC_OP_SET_NP_ENABLE, 0, 0x100)},
		{"rp mask > 0xff", set_cc(VRNIC_CC_OP_SET_RP_ENABLE, 0, 0x1ff)},
		{"np with an index", set_cc(VRNIC_CC_OP_SET_NP_ENABLE, 3, 1)},
		{"dcqcn index 20", set_cc(VRNIC_CC_OP_SET_DCQCN, VRNIC_CC_NUM_DCQCN, 1)},
		{"dcqcn index ~0", set_cc(VRNIC_CC_OP_SET_DCQCN, ~0u, 1)},
		{"swift index 8", set_cc(VRNIC_CC_OP_SET_SWIFT, VRNIC_CC_NUM_SWIFT, 4096)},
		{"rp_min_rate above rp_max_rate",
		 set_cc(VRNIC_CC_OP_SET_DCQCN, VRNIC_CC_RP_MIN_RATE, 40001)},
		{"rp_gd 9",
		 set_cc(VRNIC_CC_OP_SET_DCQCN, VRNIC_CC_RP_GD, 9)},
		{"swift init above max",
		 set_cc(VRNIC_CC_OP_SET_SWIFT, VRNIC_CC_SWIFT_INIT_CWND_PKTS, 1025)},
		{"swift max below init",
		 set_cc(VRNIC_CC_OP_SET_SWIFT, VRNIC_CC_SWIFT_MAX_CWND_PKTS, 15)},
		{"swift mtu 255", set_cc(VRNIC_CC_OP_SET_SWIFT, VRNIC_CC_SWIFT_MTU, 255)},
	};
	// Every knob just past each end of its range.
	for (size_t i = 0; i < VRNIC_CC_NUM_DCQCN; i++) {
		const auto &k = cc::kDcqcnParamTable[i];
		if (k.min > 0)
			bad.push_back({k.name.data(),
				       set_cc(VRNIC_CC_OP_SET_DCQCN, uint32_t(i), k.min - 1)});
		bad.push_back({k.name.data(),
			       set_cc(VRNIC_CC_OP_SET_DCQCN, uint32_t(i), k.max + 1)});
	}
	for (size_t i = 0; i < VRNIC_CC_NUM_SWIFT; i++) {
		const auto &k = cc::kSwiftParamTable[i];
		bad.push_back({k.name.data(),
			       set_cc(VRNIC_CC_OP_SET_SWIFT, uint32_t(i), k.min - 1)});
		bad.push_back({k.name.data(),
			       set_cc(VRNIC_CC_OP_SET_SWIFT, uint32_t(i), k.max + 1)});
	}
	// Reserved bytes: in the payload's rsvd, and past it.
	for (size_t off : {size_t(1), size_t(3), size_t(12), size_t(55)}) {
		auto c = set_cc(VRNIC_CC_OP_SET_ALGO, 0, VRNIC_CC_ALGO_SWIFT);
		c.raw[off] = 1;
		bad.push_back({"reserved byte", c});
	}
	for (const auto &b : bad) {
		EXPECT_EQ(p.admin(b.cmd).status, VRNIC_ADMIN_ST_BAD_PARAM) << b.why;
		EXPECT_TRUE(same(query(p), before)) << b.why;
	}
	EXPECT_EQ(p.eng->dev.rdma().cc_settings().cfg.algo, cc::Algo::Dcqcn);
	// The same commands without the fault go through.
	EXPECT_EQ(set(p, VRNIC_CC_OP_SET_DCQCN, VRNIC_CC_RP_MIN_RATE, 40000),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(query(p).gen, before.gen + 1);
}

TEST(CcAdmin, QueryQpReportsTheRate)
{
	Node n{1};
	const uint64_t out = Node::kAttr + 0x200;
	vrnic_admin_cmd qq{};
	qq.opcode = VRNIC_ADMIN_QUERY_QP;
	qq.query_qp.out_addr = out;
	qq.query_qp.qpn = n.qp;
	ASSERT_EQ(n.p.admin(qq).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(n.p.load<vrnic_qp_attr>(out).cc_rate_mbps, 0u);	// not limited
	// The data path keeps the field up to date; here the test plays it.
	const auto *q = n.p.eng->dev.rdma().qp(n.qp);
	ASSERT_NE(q, nullptr);
	const_cast<vrnic::Qp *>(q)->cc_rate_mbps = 12345;
	ASSERT_EQ(n.p.admin(qq).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(n.p.load<vrnic_qp_attr>(out).cc_rate_mbps, 12345u);
}

TEST(CcAdmin, AQpStateSeesAChangeAtItsNextEvent)
{
	FakePlatform p;
	p.enable();
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_ALGO, 0, VRNIC_CC_ALGO_DCQCN), VRNIC_ADMIN_ST_OK);
	// A QP's reaction point made from the device's settings, as the
	// data path makes it.
	const auto &s = p.eng->dev.rdma().cc_settings();
	cc::CcSlot slot;
	ASSERT_TRUE(slot.init(s.cfg));
	ASSERT_EQ(slot->algo(), cc::Algo::Dcqcn);
	const auto &d = static_cast<const cc::Dcqcn &>(*slot);
	EXPECT_EQ(d.max_rate(), s.cfg.line_rate_Bps);
	ASSERT_EQ(set(p, VRNIC_CC_OP_SET_DCQCN, VRNIC_CC_RP_MAX_RATE, 25000),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(d.max_rate(), cc::mbps_to_Bps(25000));
	// The first CNP cuts from the new maximum.
	EXPECT_TRUE(slot->on_cnp(1000));
	EXPECT_LE(d.current_rate(), cc::mbps_to_Bps(25000));
	EXPECT_GE(d.current_rate(), cc::mbps_to_Bps(12500));
}

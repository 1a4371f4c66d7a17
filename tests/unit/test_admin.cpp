// SPDX-License-Identifier: GPL-2.0-or-later
// Admin queue, completions with phase bits, and event queues.
#include <cstring>

#include <gtest/gtest.h>

#include "fake_platform.hpp"

namespace {

vrnic_admin_cmd op(uint8_t opcode)
{
	vrnic_admin_cmd c{};
	c.opcode = opcode;
	return c;
}

} // namespace

TEST(Admin, NopCompletesWithPhaseAndToken)
{
	FakePlatform p;
	p.enable();
	const auto cqe = p.admin(op(VRNIC_ADMIN_NOP));
	EXPECT_EQ(cqe.status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(cqe.token, 0);
	EXPECT_EQ(cqe.flags & VRNIC_ACQE_PHASE, VRNIC_ACQE_PHASE);
	EXPECT_EQ(cqe.sq_head, 1);
	// An ADMIN_DONE event went to the armed async EQ and raised vector 0.
	const auto eqe = p.load<vrnic_eqe>(FakePlatform::kAeq);
	EXPECT_EQ(eqe.type, VRNIC_EQE_ADMIN_DONE);
	EXPECT_EQ(eqe.flags & VRNIC_EQE_PHASE, VRNIC_EQE_PHASE);
	ASSERT_EQ(p.irqs.size(), 1u);
	EXPECT_EQ(p.irqs[0], unsigned(VRNIC_AEQ_VECTOR));
}

TEST(Admin, PhaseFlipsOnEveryWrap)
{
	FakePlatform p;
	p.enable();
	const unsigned depth = 1u << FakePlatform::kAqLog;
	for (unsigned i = 0; i < 3 * depth; i++) {
		const auto cqe = p.admin(op(VRNIC_ADMIN_NOP));
		const unsigned expect = ((i / depth) % 2) ? 0 : VRNIC_ACQE_PHASE;
		ASSERT_EQ(cqe.flags & VRNIC_ACQE_PHASE, expect) << i;
		ASSERT_EQ(cqe.token, uint16_t(i));
	}
}

TEST(Admin, QueryDeviceReportsAttributes)
{
	FakePlatform p;
	p.enable();
	const uint64_t out = FakePlatform::kMemBase + 0x8000;
	auto cmd = op(VRNIC_ADMIN_QUERY_DEVICE);
	cmd.query.out_addr = out;
	cmd.query.out_len = sizeof(vrnic_device_attr);
	ASSERT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
	const auto attr = p.load<vrnic_device_attr>(out);
	EXPECT_EQ(attr.spec_version, uint32_t(VRNIC_SPEC_VERSION));
	EXPECT_EQ(attr.max_mtu, uint32_t(VRNIC_ETH_MAX_MTU));
	EXPECT_EQ(attr.mac[5], 0x56);
	EXPECT_EQ(attr.sys_image_guid, 0x505400fffe123456ull);
	// What the driver reports to ib_core instead of its own constants.
	EXPECT_EQ(attr.max_srq, uint32_t(VRNIC_MAX_SRQ - 1));
	EXPECT_EQ(attr.max_mcast_attach, uint32_t(VRNIC_MAX_MCAST_ATTACH));
	EXPECT_EQ(attr.max_cqe, 1u << 22) << "mlx5 reports 2^22; libfabric needs 2^18";
	// Issue 29: 2^20 QP, CQ and SRQ slots (QPN indices 0 and 1
	// reserved), 2^16 PDs.
	EXPECT_EQ(attr.max_qp, (1u << 20) - 2);
	EXPECT_EQ(attr.max_cq, (1u << 20) - 1);
	EXPECT_EQ(attr.max_srq, (1u << 20) - 1);
	EXPECT_EQ(attr.max_mr, 1u << 20);
	EXPECT_EQ(attr.max_pd, (1u << 16) - 1);

	cmd.query.out_len = 0;
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_BAD_PARAM);
	cmd.query.out_len = sizeof(vrnic_device_attr);
	cmd.query.out_addr = 0x10;	// not guest memory
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_DMA_ERROR);
}

// A driver built for an older, shorter result gets the prefix it knows
// (a 0.6 driver passed exactly the 288 stats bytes it knew and, before,
// QUERY_STATS failed); result says how long the whole result is.
TEST(Admin, QueryIntoAShortBufferWritesThePrefix)
{
	FakePlatform p;
	p.enable();
	const uint64_t out = FakePlatform::kMemBase + 0x8000;
	std::memset(p.ptr(out), 0xa5, 512);
	auto cmd = op(VRNIC_ADMIN_QUERY_STATS);
	cmd.query.out_addr = out;
	cmd.query.out_len = 288;
	const auto cqe = p.admin(cmd);
	ASSERT_EQ(cqe.status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(cqe.result, uint32_t(sizeof(vrnic_stats)));
	EXPECT_NE(p.load<uint64_t>(out), 0xa5a5a5a5a5a5a5a5ull);
	for (unsigned i = 288; i < 512; i++)
		ASSERT_EQ(*p.ptr(out + i), 0xa5) << i;

	// A larger buffer gets the whole result and nothing beyond it.
	cmd.query.out_len = 4096;
	ASSERT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
	EXPECT_NE(p.load<uint64_t>(out + 288), 0xa5a5a5a5a5a5a5a5ull);
	for (unsigned i = sizeof(vrnic_stats); i < 512; i++)
		ASSERT_EQ(*p.ptr(out + i), 0xa5) << i;

	std::memset(p.ptr(out), 0xa5, 512);
	cmd = op(VRNIC_ADMIN_QUERY_DEVICE);
	cmd.query.out_addr = out;
	cmd.query.out_len = 8;
	ASSERT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(p.load<uint32_t>(out), uint32_t(VRNIC_SPEC_VERSION));
	EXPECT_EQ(*p.ptr(out + 8), 0xa5);
}

TEST(Admin, UnknownOpcodeAndFlagsRejected)
{
	FakePlatform p;
	p.enable();
	EXPECT_EQ(p.admin(op(0xee)).status, VRNIC_ADMIN_ST_BAD_OPCODE);
	auto cmd = op(VRNIC_ADMIN_NOP);
	cmd.flags = 1;
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_BAD_PARAM);
}

TEST(Admin, DoorbellBeyondRingIsRefused)
{
	FakePlatform p;
	p.enable();
	p.wr(VRNIC_REG_AQ_DB, 100);	// ring has 8 entries
	p.run();
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 1u);
	EXPECT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
}

TEST(Admin, WorkPerPollIsBounded)
{
	FakePlatform p;
	// Large AQ so that one doorbell names more commands than the budget.
	p.wr(VRNIC_REG_AQ_BASE_LO, uint32_t(FakePlatform::kMemBase + 0x20000));
	p.wr(VRNIC_REG_ACQ_BASE_LO, uint32_t(FakePlatform::kMemBase + 0x40000));
	p.wr(VRNIC_REG_AQ_LOG_DEPTH, 8);
	p.wr(VRNIC_REG_AEQ_BASE_LO, uint32_t(FakePlatform::kAeq));
	p.wr(VRNIC_REG_AEQ_LOG_DEPTH, 4);
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	p.wr(VRNIC_REG_AQ_DB, 200);	// 200 zeroed entries: NOPs
	vrnic_engine_poll(p.eng);
	const auto last = p.load<vrnic_admin_cqe>(FakePlatform::kMemBase + 0x40000 +
						 63 * sizeof(vrnic_admin_cqe));
	const auto next = p.load<vrnic_admin_cqe>(FakePlatform::kMemBase + 0x40000 +
						 64 * sizeof(vrnic_admin_cqe));
	EXPECT_EQ(last.flags & VRNIC_ACQE_PHASE, VRNIC_ACQE_PHASE);
	EXPECT_EQ(next.flags, 0) << "more than the budget ran in one poll";
	p.run();
	const auto end = p.load<vrnic_admin_cqe>(FakePlatform::kMemBase + 0x40000 +
						199 * sizeof(vrnic_admin_cqe));
	EXPECT_EQ(end.sq_head, 200);
}

TEST(Admin, AqReadFailureIsFatal)
{
	FakePlatform p;
	p.enable();
	p.fail_dma = true;
	p.wr(VRNIC_REG_AQ_DB, 1);
	p.run();
	EXPECT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_FATAL);
	EXPECT_EQ(p.rd(VRNIC_REG_ERROR), uint32_t(VRNIC_ERR_DMA));
}

TEST(EventQueues, CreateValidatesAndOverflowIsCounted)
{
	FakePlatform p;
	p.enable();
	const uint64_t eq = FakePlatform::kMemBase + 0x10000;
	auto cmd = op(VRNIC_ADMIN_CREATE_EQ);
	cmd.create_eq.base = eq;
	cmd.create_eq.log_depth = VRNIC_EQ_MIN_LOG_DEPTH;
	cmd.create_eq.eqn = 0;	// the AEQ is not for the driver to create
	cmd.create_eq.vector = 1;
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_BAD_PARAM);
	cmd.create_eq.eqn = 1;
	cmd.create_eq.vector = VRNIC_NUM_MSIX;
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_BAD_PARAM);
	cmd.create_eq.vector = 1;
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_BUSY);

	// The async EQ has 16 entries and the driver never consumes: after
	// 16 admin completions the next events are lost and counted.
	for (int i = 0; i < 20; i++)
		p.admin(op(VRNIC_ADMIN_NOP));
	EXPECT_GT(p.rd(VRNIC_REG_CNT_EQ_OVERFLOWS), 0u);

	auto d = op(VRNIC_ADMIN_DESTROY_EQ);
	d.destroy.id = 1;
	EXPECT_EQ(p.admin(d).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(p.admin(d).status, VRNIC_ADMIN_ST_NOT_FOUND);
}

TEST(EventQueues, ArmWithPendingEventsFiresAtOnce)
{
	FakePlatform p;
	p.enable();	// AEQ armed
	p.admin(op(VRNIC_ADMIN_NOP));	// event 0, irq, disarmed
	p.admin(op(VRNIC_ADMIN_NOP));	// event 1, no irq
	ASSERT_EQ(p.irqs.size(), 1u);
	// Driver consumed only one event and re-arms: must fire immediately.
	p.wr(VRNIC_REG_AEQ_DB, 1 | VRNIC_EQ_DB_ARM);
	EXPECT_EQ(p.irqs.size(), 2u);
	// Consumer index beyond the producer is rejected.
	p.wr(VRNIC_REG_AEQ_DB, 50);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 1u);
}

TEST(EventQueues, LinkChangesArePortEvents)
{
	FakePlatform p;
	p.enable();
	vrnic_engine_set_link(p.eng, false);
	EXPECT_EQ(p.rd(VRNIC_REG_LINK), 0u);
	vrnic_engine_set_link(p.eng, true);
	EXPECT_EQ(p.load<vrnic_eqe>(FakePlatform::kAeq).type, VRNIC_EQE_PORT_DOWN);
	EXPECT_EQ(p.load<vrnic_eqe>(FakePlatform::kAeq + 16).type, VRNIC_EQE_PORT_UP);
}

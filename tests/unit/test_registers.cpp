// SPDX-License-Identifier: GPL-2.0-or-later
// Register file, enable/reset, test registers and doorbell ownership.
#include <gtest/gtest.h>

#include "fake_platform.hpp"

TEST(Registers, IdentityAndMac)
{
	FakePlatform p;
	EXPECT_EQ(p.rd(VRNIC_REG_VERSION), uint32_t(VRNIC_SPEC_VERSION));
	EXPECT_EQ(p.rd(VRNIC_REG_VERSION), 0x10001u) << "spec 1.1";
	// Spec "Versions and discovery": every optional part of 1.1.
	EXPECT_EQ(p.rd(VRNIC_REG_CAPS),
		  VRNIC_CAP_ETH | VRNIC_CAP_ROCE_V2 | VRNIC_CAP_TEST_REGS |
		  VRNIC_CAP_SELECTIVE_REPEAT);
	EXPECT_EQ(p.rd(VRNIC_REG_NUM_MSIX), uint32_t(VRNIC_NUM_MSIX));
	EXPECT_EQ(p.rd(VRNIC_REG_NUM_DB_PAGES), uint32_t(VRNIC_NUM_DB_PAGES));
	EXPECT_EQ(p.rd(VRNIC_REG_MAX_MTU), uint32_t(VRNIC_ETH_MAX_MTU));
	EXPECT_EQ(p.rd(VRNIC_REG_MAC_LO), 0x12005452u);
	EXPECT_EQ(p.rd(VRNIC_REG_MAC_HI), 0x5634u);
	EXPECT_EQ(p.rd(VRNIC_REG_LINK), uint32_t(VRNIC_LINK_UP));
	EXPECT_EQ(p.rd(VRNIC_REG_STATUS), uint32_t(VRNIC_STATUS_RESET_DONE));
	EXPECT_EQ(p.rd(0x3ffc), 0u) << "reserved reads as zero";
}

TEST(Registers, ScratchHoldsValues)
{
	FakePlatform p;
	for (uint32_t v : {0u, 0xffffffffu, 0xa5a55a5au, 0x12345678u}) {
		p.wr(VRNIC_REG_SCRATCH, v);
		EXPECT_EQ(p.rd(VRNIC_REG_SCRATCH), v);
	}
}

TEST(Registers, BadAccessesAreLoggedAndIgnored)
{
	FakePlatform p;
	vrnic_engine_reg_write(p.eng, VRNIC_REG_SCRATCH, 0x55, 2);
	vrnic_engine_reg_write(p.eng, VRNIC_REG_SCRATCH + 1, 0x55, 4);
	EXPECT_EQ(p.rd(VRNIC_REG_SCRATCH), 0u);
	EXPECT_EQ(vrnic_engine_reg_read(p.eng, VRNIC_REG_SCRATCH, 8), 0u);
	p.wr(VRNIC_REG_VERSION, 7);	// read-only
	EXPECT_EQ(p.rd(VRNIC_REG_VERSION), uint32_t(VRNIC_SPEC_VERSION));
	EXPECT_EQ(p.guest_errors.size(), 4u);
}

TEST(Registers, TestIrqRaisesOnlyValidVectors)
{
	FakePlatform p;
	p.wr(VRNIC_REG_TEST_IRQ, 3);
	p.wr(VRNIC_REG_TEST_IRQ, VRNIC_NUM_MSIX);
	ASSERT_EQ(p.irqs.size(), 1u);
	EXPECT_EQ(p.irqs[0], 3u);
	EXPECT_EQ(p.guest_errors.size(), 1u);
}

TEST(Registers, TestDmaFillAndInvert)
{
	FakePlatform p;
	const uint64_t buf = FakePlatform::kMemBase + 0x10000;
	p.wr(VRNIC_REG_TEST_DMA_ADDR_LO, uint32_t(buf));
	p.wr(VRNIC_REG_TEST_DMA_ADDR_HI, 0);
	p.wr(VRNIC_REG_TEST_DMA_LEN, 256);
	p.wr(VRNIC_REG_TEST_DMA_CTRL, VRNIC_TEST_DMA_FILL);
	EXPECT_EQ(p.rd(VRNIC_REG_TEST_DMA_STATUS), uint32_t(VRNIC_TEST_DMA_ST_BUSY))
		<< "the write must not do the work on the caller's path";
	p.run();
	EXPECT_EQ(p.rd(VRNIC_REG_TEST_DMA_STATUS), uint32_t(VRNIC_TEST_DMA_ST_DONE));
	for (unsigned i = 0; i < 256; i++)
		ASSERT_EQ(p.ptr(buf)[i], uint8_t(i ^ 0x5a));
	EXPECT_EQ(p.ptr(buf)[256], 0) << "wrote past the length";
	p.wr(VRNIC_REG_TEST_DMA_CTRL, VRNIC_TEST_DMA_INVERT);
	p.run();
	for (unsigned i = 0; i < 256; i++)
		ASSERT_EQ(p.ptr(buf)[i], uint8_t(~(i ^ 0x5a)));
}

TEST(Registers, TestDmaRejectsBadLengthAndAddress)
{
	FakePlatform p;
	p.wr(VRNIC_REG_TEST_DMA_ADDR_LO, 0x1000);	// outside guest memory
	p.wr(VRNIC_REG_TEST_DMA_LEN, 16);
	p.wr(VRNIC_REG_TEST_DMA_CTRL, VRNIC_TEST_DMA_FILL);
	p.run();
	EXPECT_EQ(p.rd(VRNIC_REG_TEST_DMA_STATUS), uint32_t(VRNIC_TEST_DMA_ST_ERROR));
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DMA_ERRORS), 1u);
	p.wr(VRNIC_REG_TEST_DMA_LEN, VRNIC_TEST_DMA_MAX + 1);
	p.wr(VRNIC_REG_TEST_DMA_CTRL, VRNIC_TEST_DMA_FILL);
	p.run();
	EXPECT_EQ(p.rd(VRNIC_REG_TEST_DMA_STATUS), uint32_t(VRNIC_TEST_DMA_ST_ERROR));
}

TEST(Registers, EnableRejectsBadQueueConfig)
{
	FakePlatform p;
	p.wr(VRNIC_REG_AQ_BASE_LO, uint32_t(FakePlatform::kAq + 8));	// unaligned
	p.wr(VRNIC_REG_ACQ_BASE_LO, uint32_t(FakePlatform::kAcq));
	p.wr(VRNIC_REG_AQ_LOG_DEPTH, 3);
	p.wr(VRNIC_REG_AEQ_BASE_LO, uint32_t(FakePlatform::kAeq));
	p.wr(VRNIC_REG_AEQ_LOG_DEPTH, 4);
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	EXPECT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_FATAL);
	EXPECT_FALSE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
	EXPECT_EQ(p.rd(VRNIC_REG_ERROR), uint32_t(VRNIC_ERR_AQ_CONFIG));

	// Reset recovers; a depth out of range is refused as well.
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	EXPECT_EQ(p.rd(VRNIC_REG_STATUS), uint32_t(VRNIC_STATUS_RESET_DONE));
	p.wr(VRNIC_REG_AQ_BASE_LO, uint32_t(FakePlatform::kAq));
	p.wr(VRNIC_REG_ACQ_BASE_LO, uint32_t(FakePlatform::kAcq));
	p.wr(VRNIC_REG_AQ_LOG_DEPTH, 30);
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	EXPECT_EQ(p.rd(VRNIC_REG_ERROR), uint32_t(VRNIC_ERR_AQ_CONFIG));
}

TEST(Registers, QueueConfigFrozenWhileEnabled)
{
	FakePlatform p;
	p.enable();
	ASSERT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
	p.wr(VRNIC_REG_AQ_BASE_LO, 0x5000);
	EXPECT_EQ(p.rd(VRNIC_REG_AQ_BASE_LO), uint32_t(FakePlatform::kAq));
	EXPECT_FALSE(p.guest_errors.empty());
}

TEST(Registers, ResetForgetsEverything)
{
	FakePlatform p;
	p.enable();
	p.wr(VRNIC_REG_SCRATCH, 1234);
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	EXPECT_EQ(p.rd(VRNIC_REG_SCRATCH), 0u);
	EXPECT_EQ(p.rd(VRNIC_REG_STATUS), uint32_t(VRNIC_STATUS_RESET_DONE));
	// Doorbells after reset do nothing but count.
	p.wr(VRNIC_REG_AQ_DB, 1);
	p.run();
	EXPECT_EQ(p.load<uint32_t>(FakePlatform::kAcq), 0u);
}

TEST(Doorbells, UserPagesNeedAContext)
{
	FakePlatform p;
	p.enable();
	p.db(5, VRNIC_DB_USER_PING, 1);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 1u);

	vrnic_admin_cmd cmd{};
	cmd.opcode = VRNIC_ADMIN_CREATE_UCTX;
	auto cqe = p.admin(cmd);
	ASSERT_EQ(cqe.status, VRNIC_ADMIN_ST_OK);
	const uint32_t page = cqe.result;
	EXPECT_GE(page, 1u);
	EXPECT_LT(page, uint32_t(VRNIC_NUM_DB_PAGES));
	p.db(page, VRNIC_DB_USER_PING, 1);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 1u);
	// Kernel-only doorbells on a user page are refused.
	p.db(page, VRNIC_DB_ETH_TX, 1);
	p.db(page, VRNIC_DB_EQ, 1);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 3u);
	// Out-of-BAR and sub-word accesses are refused too.
	vrnic_engine_db_write(p.eng, VRNIC_DB_BAR_SIZE, 0, 4);
	vrnic_engine_db_write(p.eng, 0, 0, 2);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 5u);

	cmd.opcode = VRNIC_ADMIN_DESTROY_UCTX;
	cmd.destroy.id = page;
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
	p.db(page, VRNIC_DB_USER_PING, 1);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 6u);
}

TEST(Doorbells, UserContextsRunOut)
{
	FakePlatform p;
	p.enable();
	vrnic_admin_cmd cmd{};
	cmd.opcode = VRNIC_ADMIN_CREATE_UCTX;
	for (unsigned i = 1; i < VRNIC_NUM_DB_PAGES; i++)
		ASSERT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_NO_RESOURCE);
}

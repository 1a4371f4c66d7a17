// SPDX-License-Identifier: GPL-2.0-or-later
// Event queues never lose an event: a full ring holds events back (one per
// type and id) and writes them, in order, into the room a doorbell frees.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "device.hpp"
#include "eq.hpp"
#include "fake_platform.hpp"

namespace {

// Just enough platform for one EventQueue: guest memory and interrupts.
struct EqBench {
	static constexpr uint64_t kBase = 0x10000;
	static constexpr unsigned kLog = VRNIC_EQ_MIN_LOG_DEPTH;	// 16
	static constexpr uint32_t kDepth = 1u << kLog;

	EqBench() : mem(kDepth * sizeof(vrnic_eqe)), plat(&ops, this, out)
	{
		eq.configure(3, kBase, kLog, 3);
	}

	static int dma_write(void *o, uint64_t addr, const void *buf, size_t len)
	{
		auto *b = static_cast<EqBench *>(o);
		if (addr < kBase || addr - kBase + len > b->mem.size())
			return -1;
		std::memcpy(&b->mem[addr - kBase], buf, len);
		b->writes++;
		return 0;
	}
	static int dma_read(void *, uint64_t, void *, size_t) { return -1; }
	static void irq(void *o, unsigned int v)
	{
		static_cast<EqBench *>(o)->irqs.push_back(v);
	}
	static void nothing(void *) {}
	static int send(void *, const void *, size_t) { return 0; }
	static uint64_t now(void *) { return 0; }
	static void timer(void *, uint64_t) {}
	static void error(void *, const char *) {}
	static void trace(void *, vrnic_trace_id, uint64_t, uint64_t, uint64_t) {}

	vrnic_eqe entry(uint32_t i) const
	{
		vrnic_eqe e;
		std::memcpy(&e, &mem[(i % kDepth) * sizeof(e)], sizeof(e));
		return e;
	}
	// Consume as the driver does: every entry with the expected phase.
	std::vector<vrnic_eqe> consume()
	{
		std::vector<vrnic_eqe> got;
		for (;;) {
			const vrnic_eqe e = entry(ci);
			const uint8_t phase = ((ci >> kLog) & 1) ? 0 : VRNIC_EQE_PHASE;
			if ((e.flags & VRNIC_EQE_PHASE) != phase)
				break;
			got.push_back(e);
			ci++;
		}
		return got;
	}
	bool doorbell(bool arm = true) { return eq.doorbell(plat, cnt, ci, arm); }

	vrnic_platform_ops ops{dma_read, dma_write, send, irq, nothing, nothing,
			       now, timer, error, trace};
	std::vector<uint8_t> mem;
	std::vector<unsigned> irqs;
	unsigned writes = 0;
	uint16_t ci = 0;
	vrnic::Outbox out{4096};
	vrnic::Platform plat;
	vrnic::DeviceCounters cnt;
	vrnic::EventQueue eq;
};

TEST(EventQueueHold, FullRingHoldsEventsAndWritesNothingPastTheConsumer)
{
	EqBench b;
	ASSERT_TRUE(b.doorbell());	// armed, empty
	for (uint32_t i = 0; i < EqBench::kDepth; i++)
		EXPECT_TRUE(b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, i));
	const unsigned writes = b.writes;
	EXPECT_EQ(b.eq.held(), 0u);
	// Full: nothing more reaches guest memory.
	for (uint32_t i = EqBench::kDepth; i < 40; i++)
		EXPECT_TRUE(b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, i));
	EXPECT_EQ(b.writes, writes);
	EXPECT_EQ(b.eq.held(), 24u);
	EXPECT_EQ(b.cnt.eq_overflows, 24u);
	EXPECT_EQ(b.irqs.size(), 1u);
	// The ring still holds the first pass, untouched.
	for (uint32_t i = 0; i < EqBench::kDepth; i++) {
		EXPECT_EQ(b.entry(i).id, i);
		EXPECT_EQ(b.entry(i).flags & VRNIC_EQE_PHASE, VRNIC_EQE_PHASE);
	}
}

TEST(EventQueueHold, DoorbellReleasesHeldEventsInOrderExactlyOnce)
{
	EqBench b;
	ASSERT_TRUE(b.doorbell());
	for (uint32_t i = 0; i < 40; i++)
		b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, i);
	std::vector<uint32_t> seen;
	size_t irqs = b.irqs.size();
	for (int round = 0; round < 10 && seen.size() < 41; round++) {
		for (const auto &e : b.consume())
			seen.push_back(e.id);
		// Room freed: held events are written and, being unconsumed,
		// signalled at once.
		ASSERT_TRUE(b.doorbell());
		if (seen.size() < 41) {
			EXPECT_EQ(b.irqs.size(), ++irqs);
		}
		// A new event queues behind the held ones.
		if (round == 0)
			b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, 40);
	}
	ASSERT_EQ(seen.size(), 41u);
	for (uint32_t i = 0; i < 41; i++)
		EXPECT_EQ(seen[i], i);
	EXPECT_EQ(b.eq.held(), 0u);
	// All consumed and armed: the next event signals once.
	irqs = b.irqs.size();
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, 41);
	EXPECT_EQ(b.irqs.size(), irqs + 1);
}

TEST(EventQueueHold, HeldEventOfTheSameObjectIsReplacedAndMovesBack)
{
	EqBench b;
	for (uint32_t i = 0; i < EqBench::kDepth; i++)
		b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, 100 + i);
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_ADMIN_DONE, 0, 7);
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_PORT_UP, 1);
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_PORT_DOWN, 1);
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, 5);
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_PORT_UP, 1);
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_ADMIN_DONE, 0, 9);
	b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, 5);
	EXPECT_EQ(b.eq.held(), 4u);
	EXPECT_EQ(b.cnt.eq_overflows, 7u);
	EXPECT_EQ(b.consume().size(), EqBench::kDepth);
	ASSERT_TRUE(b.doorbell());
	const auto got = b.consume();
	ASSERT_EQ(got.size(), 4u);
	// The link ends up, as it last was; the admin event has the newest data.
	EXPECT_EQ(got[0].type, VRNIC_EQE_PORT_DOWN);
	EXPECT_EQ(got[1].type, VRNIC_EQE_PORT_UP);
	EXPECT_EQ(got[2].type, VRNIC_EQE_ADMIN_DONE);
	EXPECT_EQ(got[2].data, 9u);
	EXPECT_EQ(got[3].type, VRNIC_EQE_CQ);
	EXPECT_EQ(got[3].id, 5u);
}

TEST(EventQueueHold, HoldingIsBoundedAndDisableForgets)
{
	// The real bound (6 x 2^20 + 64) takes about 600 MiB to reach: the
	// same code with a smaller one.
	static_assert(vrnic::EventQueue::kMaxHeld >= 6ull * VRNIC_MAX_QP);
	constexpr uint32_t kMax = 70000;
	EqBench b;
	b.eq.limit_held(kMax);
	for (uint32_t i = 0; i < EqBench::kDepth; i++)
		b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, i);
	for (uint32_t i = 0; i < kMax; i++)
		ASSERT_TRUE(b.eq.post(b.plat, b.cnt, VRNIC_EQE_QP_FATAL, i));
	EXPECT_FALSE(b.eq.post(b.plat, b.cnt, VRNIC_EQE_QP_FATAL, kMax));
	EXPECT_EQ(b.eq.held(), kMax);
	// An event already held is still replaced at the limit.
	EXPECT_TRUE(b.eq.post(b.plat, b.cnt, VRNIC_EQE_QP_FATAL, 3));
	b.eq.disable();
	EXPECT_EQ(b.eq.held(), 0u);
	EXPECT_FALSE(b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, 1));
}

TEST(EventQueueHold, ConsumerBeyondTheProducerIsRefusedAndReleasesNothing)
{
	EqBench b;
	for (uint32_t i = 0; i < EqBench::kDepth + 3; i++)
		b.eq.post(b.plat, b.cnt, VRNIC_EQE_CQ, i);
	b.ci = EqBench::kDepth + 1;	// more than was written
	EXPECT_FALSE(b.doorbell());
	EXPECT_EQ(b.eq.held(), 3u);
	b.ci = 2;	// two consumed: two written, one still held
	EXPECT_TRUE(b.doorbell(false));
	EXPECT_EQ(b.eq.held(), 1u);
	EXPECT_TRUE(b.irqs.empty());	// never armed
}

// Through the device: the async EQ (16 entries) is full when admin
// completions go on; the ADMIN_DONE that found it full used to be lost
// (a 5 s stall for the driver), now it arrives after the doorbell.
TEST(EventQueueHold, AdminDoneOnAFullAsyncEqArrivesAfterTheDoorbell)
{
	FakePlatform p;
	p.enable();
	vrnic_admin_cmd nop{};
	nop.opcode = VRNIC_ADMIN_NOP;
	for (int i = 0; i < 20; i++)
		p.admin(nop);
	const auto first = p.drain_aeq();
	ASSERT_EQ(first.size(), 1u << FakePlatform::kAeqLog);
	EXPECT_GT(p.rd(VRNIC_REG_CNT_EQ_OVERFLOWS), 0u);
	const auto rest = p.drain_aeq();
	ASSERT_EQ(rest.size(), 1u);
	EXPECT_EQ(rest[0].type, VRNIC_EQE_ADMIN_DONE);
	EXPECT_GT(rest[0].data, first.back().data);
	EXPECT_TRUE(p.drain_aeq().empty());
}

} // namespace

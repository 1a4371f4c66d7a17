// SPDX-License-Identifier: GPL-2.0-or-later
// The engine's entry rules (review 2026-11-23, A3, A6 and the C
// boundary): it is never re-entered from a platform callback, and no C++
// exception leaves an extern "C" entry point.
#include <algorithm>

#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"
#include "roce.hpp"

namespace {

vrnic_send_wqe wqe(uint8_t opcode, uint64_t wr_id, uint64_t raddr = 0,
		   uint32_t rkey = 0)
{
	vrnic_send_wqe w{};
	w.wr_id = wr_id;
	w.opcode = opcode;
	w.flags = VRNIC_WQE_SIGNALED;
	w.remote_addr = raddr;
	w.rkey = rkey;
	return w;
}

bool is_nak_seq(const std::vector<uint8_t> &f)
{
	vrnic::roce::Packet p;
	return vrnic::roce::parse(f, p) == vrnic::roce::ParseResult::Ok &&
	       p.h.opcode == vrnic::roce::ACK &&
	       p.h.syndrome == vrnic::roce::kAethNakSeq;
}

const vrnic::Qp &qp_of(const Node &n, uint32_t qpn)
{
	const vrnic::Qp *q = n.p.eng->dev.rdma().qp(qpn);
	if (!q)
		throw std::runtime_error("no such QP");
	return *q;
}

bool has_error(const FakePlatform &p, const std::string &what)
{
	return std::any_of(p.guest_errors.begin(), p.guest_errors.end(),
			   [&](const std::string &e) {
				   return e.find(what) != std::string::npos;
			   });
}

// Fire every timer that is due after moving the clock to it.
void fire_timer(FakePlatform &p)
{
	if (!p.deadline)
		return;
	p.now = std::max(p.now, p.deadline);
	p.deadline = 0;
	vrnic_engine_timer(p.eng);
}

} // namespace

// ------------------------------------------------------------ re-entry

// A3: the peer's sequence NAK arrives while the requester is sending (a
// synchronous wire: two NICs on one QEMU hub).  It rewinds to the next
// WQE, a 1-byte inline SEND; the sender must not then resume that WQE at
// the offset of the packet it was sending (256 bytes past its data).
TEST(Reentry, NakDeliveredInsideSendFrameDoesNotRewindUnderTheSender)
{
	Node a{1}, b{2};
	Wire wire;
	a.connect(b, 1, 0, 0);		// MTU 256, PSNs from 0
	b.connect(a, 1, 0, 0);
	for (uint64_t i = 0; i < 3; i++)
		b.post_recv(100 + i, {b.sge(0x100000 + i * 0x1000, 4096)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 512)});	// PSN 0, 1
	a.post_send(wqe(VRNIC_WR_SEND, 2), {}, {0xab});		// PSN 2
	a.post_send(wqe(VRNIC_WR_SEND, 3), {}, {0xcd});		// PSN 3
	vrnic_engine_poll(a.p.eng);
	ASSERT_EQ(a.p.frames.size(), 4u);

	// PSN 2 is lost: b acknowledges PSN 1 and NAKs the gap at PSN 2.
	for (size_t i : {0, 1, 3})
		vrnic_engine_receive(b.p.eng, a.p.frames[i].data(), a.p.frames[i].size());
	ASSERT_FALSE(b.p.frames.empty());
	const std::vector<uint8_t> nak = b.p.frames.back();
	ASSERT_TRUE(is_nak_seq(nak));
	b.p.frames.clear();
	a.p.frames.clear();

	// The ACK is lost too; a's timer sends everything again from PSN 0,
	// and the NAK comes in while it sends PSN 0.
	fire_timer(a.p);
	bool delivered = false;
	a.p.on_send = [&](const uint8_t *, size_t) {
		if (delivered)
			return;
		delivered = true;
		vrnic_engine_receive(a.p.eng, nak.data(), nak.size());
	};
	vrnic_engine_poll(a.p.eng);
	a.p.on_send = nullptr;
	EXPECT_TRUE(delivered);
	// Every frame a sent carries at most its WQE's bytes.
	for (const auto &f : a.p.frames) {
		vrnic::roce::Packet p;
		ASSERT_EQ(vrnic::roce::parse(f, p), vrnic::roce::ParseResult::Ok);
		if (p.h.psn >= 2) {
			EXPECT_EQ(p.payload.size(), 1u) << "PSN " << p.h.psn;
		}
	}

	// And the three messages arrive intact.
	const auto sc = wire.completions(a, b, a, 3);
	ASSERT_EQ(sc.size(), 3u);
	for (const auto &c : sc)
		EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
	const auto rc = wire.completions(a, b, b, 3);
	ASSERT_EQ(rc.size(), 3u);
	EXPECT_EQ(rc[0].byte_len, 512u);
	EXPECT_EQ(rc[1].byte_len, 1u);
	EXPECT_EQ(rc[2].byte_len, 1u);
	EXPECT_EQ(*b.data(0x101000), 0xab);
	EXPECT_EQ(*b.data(0x102000), 0xcd);
}

// A register write or a frame that comes in from inside a platform
// callback (an MSI-X message aimed at the device's own BAR, a net layer
// that delivers queued frames synchronously) is refused, not executed.
TEST(Reentry, RegisterWriteAndReceiveFromACallbackAreRefused)
{
	FakePlatform p;
	p.enable();
	ASSERT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
	std::vector<uint8_t> frame(64, 0xff);	// broadcast, not RoCE
	size_t took = 1;
	unsigned calls = 0;
	p.on_irq = [&](unsigned) {
		if (calls++)
			return;
		vrnic_engine_reg_write(p.eng, VRNIC_REG_CTRL, VRNIC_CTRL_RESET, 4);
		took = vrnic_engine_receive(p.eng, frame.data(), frame.size());
	};
	const unsigned rx_ready = p.rx_ready_calls;
	p.wr(VRNIC_REG_TEST_IRQ, 0);
	EXPECT_EQ(calls, 1u);
	EXPECT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY) << "reset ran";
	EXPECT_EQ(took, 0u);			// held back by the platform
	EXPECT_EQ(p.rx_ready_calls, rx_ready + 1);	// and asked for again
	EXPECT_TRUE(has_error(p, "re-entrant"));
	EXPECT_EQ(p.eng->dev.counters().reentry_refused, 2u);
}

// A6: the retransmission timer moves a QP to ERR, whose QP_FATAL event
// raises an interrupt; a reset written from there is refused while the
// timer runs (in QEMU the timer also runs under the device's guard).
TEST(Reentry, ResetFromTheTimersInterruptIsRefused)
{
	Node a{1}, b{2};
	a.connect(b, 3, 0, 0, 0);	// no retries
	b.connect(a, 3, 0, 0);
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 1, Node::kIova, b.mr), {a.sge(0, 64)});
	vrnic_engine_poll(a.p.eng);
	a.p.frames.clear();		// lost
	a.p.drain_aeq();		// armed
	bool tried = false;
	a.p.on_irq = [&](unsigned v) {
		if (v != VRNIC_AEQ_VECTOR || tried)
			return;
		tried = true;
		vrnic_engine_reg_write(a.p.eng, VRNIC_REG_CTRL, VRNIC_CTRL_RESET, 4);
	};
	fire_timer(a.p);
	a.p.on_irq = nullptr;
	EXPECT_TRUE(tried);
	EXPECT_TRUE(a.p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
	EXPECT_EQ(qp_of(a, a.qp).attr.state, VRNIC_QPS_ERR);
	a.p.run();
	vrnic_cqe c;
	ASSERT_TRUE(a.poll_cq(c));
	EXPECT_EQ(c.status, VRNIC_WC_ST_RETRY_EXC_ERR);
}

// Two engines whose wires deliver synchronously into each other: every
// frame is handed over when the sender's entry point returns, so the
// nesting stays shallow and the traffic is intact.
TEST(Reentry, SynchronousWireBothWays)
{
	Node a{1}, b{2};
	a.connect(b, 1, 10, 20);
	b.connect(a, 1, 20, 10);
	int depth = 0, max_depth = 0;
	auto deliver = [&](Node &to) {
		return [&](const uint8_t *f, size_t len) {
			max_depth = std::max(max_depth, ++depth);
			vrnic_engine_receive(to.p.eng, f, len);
			depth--;
		};
	};
	a.p.on_send = deliver(b);
	b.p.on_send = deliver(a);
	for (uint64_t i = 0; i < 8; i++)
		b.post_recv(i, {b.sge(0x400000 + i * 0x10000, 0x10000)});
	for (uint64_t i = 0; i < 8; i++) {
		a.post_send(wqe(VRNIC_WR_SEND, i), {a.sge(i * 0x10000, 0x8000)});
		a.post_send(wqe(VRNIC_WR_RDMA_READ, 100 + i,
				Node::kIova + 0x800000 + i * 0x10000, b.mr),
			    {a.sge(0x200000 + i * 0x10000, 0x6000)});
	}
	std::vector<vrnic_cqe> sc, rc;
	for (int round = 0; round < 10000 && (sc.size() < 16 || rc.size() < 8); round++) {
		vrnic_engine_poll(a.p.eng);
		vrnic_engine_poll(b.p.eng);
		vrnic_cqe c;
		while (a.poll_cq(c))
			sc.push_back(c);
		while (b.poll_cq(c))
			rc.push_back(c);
		a.p.frames.clear();
		b.p.frames.clear();
	}
	ASSERT_EQ(sc.size(), 16u);
	ASSERT_EQ(rc.size(), 8u);
	for (const auto &c : sc)
		EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
	for (uint64_t i = 0; i < 8; i++) {
		EXPECT_EQ(std::memcmp(b.data(0x400000 + i * 0x10000), a.data(i * 0x10000), 0x8000), 0);
		EXPECT_EQ(std::memcmp(a.data(0x200000 + i * 0x10000),
				      b.data(0x800000 + i * 0x10000), 0x6000), 0);
	}
	EXPECT_LE(max_depth, 2);
	EXPECT_EQ(a.counters().rcvd_seq_err + b.counters().out_of_seq_request, 0u);
}

// ---------------------------------------------------- C boundary

// An exception inside the engine (here: the platform's DMA runs out of
// memory) never reaches the C caller: the device goes FATAL with an
// internal error, later calls do nothing harmful, a reset recovers.
TEST(CBoundary, ExceptionMakesTheDeviceFatalAndResetRecovers)
{
	FakePlatform p;
	p.enable();
	p.drain_aeq();
	p.throw_on_dma_read = true;
	vrnic_admin_cmd cmd{};
	cmd.opcode = VRNIC_ADMIN_CREATE_PD;
	p.store(FakePlatform::kAq, cmd);
	p.wr(VRNIC_REG_AQ_DB, 1);
	EXPECT_NO_THROW(vrnic_engine_poll(p.eng));
	const uint32_t st = p.rd(VRNIC_REG_STATUS);
	EXPECT_TRUE(st & VRNIC_STATUS_FATAL);
	EXPECT_FALSE(st & VRNIC_STATUS_READY);
	EXPECT_EQ(p.rd(VRNIC_REG_ERROR), uint32_t(VRNIC_ERR_INTERNAL));
	p.throw_on_dma_read = false;
	const auto ev = p.drain_aeq();
	ASSERT_EQ(ev.size(), 1u);
	EXPECT_EQ(ev[0].type, VRNIC_EQE_FATAL);
	EXPECT_EQ(ev[0].id, uint32_t(VRNIC_ERR_INTERNAL));

	// Stopped: guest work is not processed, nothing throws.
	p.throw_on_dma_read = true;
	std::vector<uint8_t> frame(64, 0xff);
	EXPECT_NO_THROW({
		p.wr(VRNIC_REG_AQ_DB, 2);
		p.db(0, VRNIC_DB_SQ, 0x1000002);
		vrnic_engine_poll(p.eng);
		vrnic_engine_timer(p.eng);
		vrnic_engine_receive(p.eng, frame.data(), frame.size());
	});
	p.throw_on_dma_read = false;
	EXPECT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_FATAL);

	// A reset brings it back.
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	EXPECT_EQ(p.rd(VRNIC_REG_STATUS), uint32_t(VRNIC_STATUS_RESET_DONE));
	p.aq_pi = 0;
	p.aeq_ci = 0;
	std::fill(p.mem.begin(), p.mem.begin() + 0x4000, 0);
	p.enable();
	ASSERT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
}

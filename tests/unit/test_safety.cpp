// SPDX-License-Identifier: GPL-2.0-or-later
// The engine's entry rules (review 2026-11-23, A1, A3, A6 and the C
// boundary): it is never re-entered from a platform callback, no reference
// into a QP's containers survives a call that can move the QP to ERR, and
// no C++ exception leaves an extern "C" entry point.
#include <algorithm>
#include <deque>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "frame_queue.hpp"
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

// A reset asked for while the engine runs (here from the completion
// interrupt of a UD send whose frame is already queued) is deferred until
// the engine is left; it must drop that frame all the same: nothing
// queued before a reset may leave after it.
TEST(Reentry, ADeferredResetDropsTheFramesQueuedBeforeIt)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_UD}, b{2, false, Node::kCqLog, VRNIC_QPT_UD};
	a.ud_ready(0x1234, 10);
	b.ud_ready(0x1234, 20);
	a.p.db(0, VRNIC_DB_EQ, VRNIC_FIELD_PREP(VRNIC_EQ_DB_EQN, 1) | VRNIC_EQ_DB_ARM);
	a.p.db(0, VRNIC_DB_CQ_ARM, a.cq | VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CMD, VRNIC_CQ_ARM_NEXT));
	bool fired = false;
	a.p.on_irq = [&](unsigned v) {
		if (v == VRNIC_AEQ_VECTOR || fired)
			return;
		fired = true;
		vrnic_engine_reset(a.p.eng);	// refused now, runs on the way out
	};
	const auto av = b.av(0x1234);
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 64)}, {}, &av);
	a.p.run();
	a.p.on_irq = nullptr;
	ASSERT_TRUE(fired) << "no completion interrupt";
	EXPECT_FALSE(a.p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY) << "the reset did not run";
	EXPECT_TRUE(a.p.frames.empty()) << "a frame queued before the reset left after it";
}

// The same for a reset from the platform's send callback (the engine is
// handing frames over): the frame being sent goes, the rest do not.
TEST(Reentry, AResetWhileFramesAreHandedOverDropsTheRest)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_UD}, b{2, false, Node::kCqLog, VRNIC_QPT_UD};
	a.ud_ready(0x1234, 10);
	b.ud_ready(0x1234, 20);
	unsigned sent = 0;
	a.p.on_send = [&](const uint8_t *, size_t) {
		if (sent++ == 0)
			vrnic_engine_reset(a.p.eng);
	};
	const auto av = b.av(0x1234);
	for (int i = 0; i < 4; i++) {	// four WQEs, one doorbell
		if (i)
			a.sq_pi++;
		vrnic_send_wqe w = wqe(VRNIC_WR_SEND, i);
		w.flags = 0;
		const uint64_t slot = a.next_sq_slot();
		a.p.store(slot, w);
		a.p.store(slot + sizeof(w), av);
		a.p.store(slot + sizeof(w) + sizeof(av), a.sge(0, 64));
		auto hdr = a.p.load<vrnic_send_wqe>(slot);
		hdr.num_sge = 1;
		a.p.store(slot, hdr);
	}
	a.ring_sq();
	a.p.run();
	a.p.on_send = nullptr;
	EXPECT_EQ(sent, 1u) << "frames queued before the reset were sent after it";
	EXPECT_FALSE(a.p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
}

// Two engines whose wires deliver synchronously into each other: every
// frame is handed over when the sender's entry point returns, so the
// nesting stays shallow and the traffic is intact.
TEST(Reentry, SynchronousWireBothWays)
{
	Node a{1}, b{2};
	a.connect(b, 1, 10, 20);
	b.connect(a, 1, 20, 10);
	int depth = 0, max_depth = 0, while_running = 0;
	auto deliver = [&](Node &from, Node &to) {
		return [&](const uint8_t *f, size_t len) {
			// Frames leave only once the sender stopped running.
			if (from.p.eng->dev.state() == vrnic::Device::Run::Running)
				while_running++;
			max_depth = std::max(max_depth, ++depth);
			vrnic_engine_receive(to.p.eng, f, len);
			depth--;
		};
	};
	a.p.on_send = deliver(a, b);
	b.p.on_send = deliver(b, a);
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
	EXPECT_EQ(while_running, 0);
	EXPECT_EQ(a.p.eng->dev.outbox().dropped + b.p.eng->dev.outbox().dropped, 0u);
	EXPECT_EQ(a.counters().rcvd_seq_err + b.counters().out_of_seq_request, 0u);
}

// ------------------------------------------------ container lifetimes

namespace {

// A second RC QP on n's engine, connected to n's own QP through the
// device's loopback (same MAC, same GID).
uint32_t loopback_pair(Node &n, uint32_t mtu_code)
{
	constexpr uint64_t B = FakePlatform::kMemBase;
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.sq_base = B + 0x1200000;
	c.create_qp.rq_base = B + 0x1300000;
	c.create_qp.dbrec = Node::kQpDb + 0x40;
	c.create_qp.pdn = n.pd;
	c.create_qp.send_cqn = c.create_qp.recv_cqn = n.cq;
	c.create_qp.sq_log_depth = Node::kSqLog;
	c.create_qp.rq_log_depth = Node::kRqLog;
	c.create_qp.sq_wqe_shift = Node::kSqShift;
	c.create_qp.rq_wqe_shift = Node::kRqShift;
	c.create_qp.type = VRNIC_QPT_RC;
	const uint32_t y = n.admin_ok(c);

	auto modify = [&n](uint32_t qpn, uint32_t mask, const vrnic_qp_attr &a) {
		n.p.store(Node::kAttr, a);
		vrnic_admin_cmd m{};
		m.opcode = VRNIC_ADMIN_MODIFY_QP;
		m.modify_qp.attr_addr = Node::kAttr;
		m.modify_qp.qpn = qpn;
		m.modify_qp.attr_mask = mask;
		if (n.p.admin(m).status != VRNIC_ADMIN_ST_OK)
			throw std::runtime_error("modify");
	};
	for (auto [qpn, dest] : {std::pair{n.qp, y}, std::pair{y, n.qp}}) {
		vrnic_qp_attr a{};
		a.state = VRNIC_QPS_INIT;
		a.access = VRNIC_ACCESS_REMOTE_WRITE | VRNIC_ACCESS_REMOTE_READ;
		modify(qpn, VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_ACCESS, a);
		a.state = VRNIC_QPS_RTR;
		a.path_mtu = uint8_t(mtu_code);
		a.dest_qpn = dest;
		a.max_dest_rd_atomic = 16;
		a.min_rnr_timer = 1;
		const auto g = n.gid();
		std::memcpy(a.dgid, g.data(), 16);
		a.sgid_index = Node::kGid4;
		const uint8_t mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, n.id};
		std::memcpy(a.dmac, mac, 6);
		modify(qpn, VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV |
			    VRNIC_QP_ATTR_PATH_MTU | VRNIC_QP_ATTR_DEST_QPN |
			    VRNIC_QP_ATTR_RQ_PSN | VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC |
			    VRNIC_QP_ATTR_MIN_RNR_TIMER, a);
		a.state = VRNIC_QPS_RTS;
		a.timeout = 14;
		a.retry_cnt = 2;
		a.rnr_retry = 2;
		a.max_rd_atomic = 16;
		modify(qpn, VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_SQ_PSN |
			    VRNIC_QP_ATTR_TIMEOUT | VRNIC_QP_ATTR_RETRY_CNT |
			    VRNIC_QP_ATTR_RNR_RETRY | VRNIC_QP_ATTR_MAX_RD_ATOMIC, a);
	}
	return y;
}

// Run n until idle, firing timers, until pred() or the bound.
template <typename Pred>
void run_with_timers(Node &n, Pred pred)
{
	for (int i = 0; i < 100 && !pred(); i++) {
		n.p.run();
		fire_timer(n.p);
	}
	n.p.run();
}

} // namespace

// A1, the review's sequence on one engine: nine small READs and a 1 MiB
// one at MTU 256 over the loopback, then the MR they read goes away while
// the responder is still sending the big one.  Its QP goes to ERR; the
// resources it was iterating stay valid until the flush.
TEST(Lifetimes, DestroyMrUnderAReadResponseOnTheLoopback)
{
	Node n{1};
	const uint32_t y = loopback_pair(n, 1);
	const uint64_t src_iova = 0x40000000;
	const uint32_t src = n.create_mr(src_iova, 0x800000, 2 << 20,
					 VRNIC_ACCESS_ALL);
	for (uint64_t i = 0; i < 9; i++)
		n.post_send(wqe(VRNIC_WR_RDMA_READ, i + 1, src_iova + i * 64, src),
			    {n.sge(i * 64, 64)});
	n.post_send(wqe(VRNIC_WR_RDMA_READ, 10, src_iova, src),
		    {n.sge(0x100000, 1 << 20)});
	for (int i = 0; i < 10 && qp_of(n, y).resources.size() < 10; i++)
		vrnic_engine_poll(n.p.eng);
	ASSERT_EQ(qp_of(n, y).resources.size(), 10u);
	ASSERT_TRUE(qp_of(n, y).resources.back().pending);

	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_DESTROY_MR;
	c.destroy.id = src;
	ASSERT_EQ(n.p.admin(c).status, VRNIC_ADMIN_ST_OK);
	std::vector<vrnic_cqe> got;
	run_with_timers(n, [&] {
		vrnic_cqe cqe;
		while (n.poll_cq(cqe))
			got.push_back(cqe);
		return got.size() >= 10;
	});
	EXPECT_EQ(qp_of(n, y).attr.state, VRNIC_QPS_ERR);
	EXPECT_TRUE(qp_of(n, y).resources.empty());	// released by the flush
	ASSERT_EQ(got.size(), 10u);
	const auto big = std::find_if(got.begin(), got.end(),
				      [](const vrnic_cqe &e) { return e.wr_id == 10; });
	ASSERT_NE(big, got.end());
	EXPECT_NE(big->status, VRNIC_WC_ST_SUCCESS);
	// The responder's NAK names the READ, so the requester fails it with
	// the remote access error at once instead of timing out into
	// RETRY_EXC_ERR (a NAK carrying epsn == next_psn was dropped).
	EXPECT_EQ(big->status, VRNIC_WC_ST_REM_ACCESS_ERR);
	EXPECT_EQ(n.counters().retry_timeouts, 0u);
}

// A1 from a wire peer: a READ of a fast-register MR, then a SEND with
// invalidate naming that MR, unfenced; the responder's READ response
// loses its MR in the middle.
TEST(Lifetimes, SendWithInvalidateUnderAReadResponse)
{
	Node a{1}, b{2};
	Wire wire;
	a.connect(b, 1, 0, 0, 1);
	b.connect(a, 1, 0, 0, 1);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_MR;
	c.create_mr.pdn = b.pd;
	c.create_mr.npages = 300;
	c.create_mr.pbl_mode = VRNIC_PBL_FAST;
	const uint32_t key = (b.admin_ok(c) & ~0xffu) | 9;
	const uint64_t iova = 0x60000000, pbl = Node::kData + 0xfe0000;
	for (uint32_t i = 0; i < 256; i++)
		b.p.store<uint64_t>(pbl + i * 8, Node::kData + 0x300000 + i * 4096ull);
	vrnic_reg_mr_wqe r{};
	r.wr_id = 1;
	r.opcode = VRNIC_WR_REG_MR;
	r.flags = VRNIC_WQE_SIGNALED;
	r.page_shift = 12;
	r.access = VRNIC_ACCESS_LOCAL_WRITE | VRNIC_ACCESS_REMOTE_READ;
	r.iova = iova;
	r.key = key;
	r.npages = 256;
	r.length = 1 << 20;
	r.pbl = pbl;
	b.post_raw(&r);
	ASSERT_EQ(wire.completions(a, b, b, 1).at(0).status, VRNIC_WC_ST_SUCCESS);

	b.post_recv(50, {b.sge(0x200000, 4096)});
	for (uint64_t i = 0; i < 9; i++)
		a.post_send(wqe(VRNIC_WR_RDMA_READ, i + 1, Node::kIova + i * 64, b.mr),
			    {a.sge(i * 64, 64)});
	// 400 packets: the SEND after it is inside the send window.
	a.post_send(wqe(VRNIC_WR_RDMA_READ, 10, iova, key), {a.sge(0x100000, 400 * 256)});
	a.post_send(wqe(VRNIC_WR_SEND_INV, 11, 0, key), {a.sge(0, 16)});
	const auto sc = wire.completions(a, b, a, 11);
	EXPECT_EQ(qp_of(b, b.qp).attr.state, VRNIC_QPS_ERR);
	EXPECT_EQ(b.counters().remote_inv, 1u);
	ASSERT_EQ(sc.size(), 11u);
	const auto big = std::find_if(sc.begin(), sc.end(),
				      [](const vrnic_cqe &e) { return e.wr_id == 10; });
	ASSERT_NE(big, sc.end());
	EXPECT_NE(big->status, VRNIC_WC_ST_SUCCESS);
}

// ---------------------------------------------------- C boundary

// An exception inside the engine (here: the platform's DMA runs out of
// memory) never reaches the C caller: the device goes FATAL with an
// internal error, later calls do nothing harmful, a reset recovers.
namespace {

// After FATAL: CTRL.RESET, then the driver's rings again from scratch.
// True when the device reports RESET_DONE, then READY.
bool reset_to_ready(FakePlatform &p)
{
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	if (p.rd(VRNIC_REG_STATUS) != uint32_t(VRNIC_STATUS_RESET_DONE))
		return false;
	p.aq_pi = 0;
	p.aeq_ci = 0;
	std::fill(p.mem.begin(), p.mem.begin() + 0x4000, 0);
	p.enable();
	return p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY;
}

} // namespace

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
	ASSERT_TRUE(reset_to_ready(p));
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
}

// The test-only injection (QEMU's x-fault-internal) takes the same path:
// FATAL with VRNIC_ERR_INTERNAL, the FATAL event on the async EQ, QEMU's
// caller untouched, and a reset brings the device back.
TEST(CBoundary, InjectedInternalErrorPostsFatalAndResetRecovers)
{
	FakePlatform p;
	p.enable();
	p.drain_aeq();
	EXPECT_NO_THROW(vrnic_engine_inject_internal_error(p.eng));
	const uint32_t st = p.rd(VRNIC_REG_STATUS);
	EXPECT_TRUE(st & VRNIC_STATUS_FATAL);
	EXPECT_FALSE(st & VRNIC_STATUS_READY);
	EXPECT_EQ(p.rd(VRNIC_REG_ERROR), uint32_t(VRNIC_ERR_INTERNAL));
	const auto ev = p.drain_aeq();
	ASSERT_EQ(ev.size(), 1u);
	EXPECT_EQ(ev[0].type, VRNIC_EQE_FATAL);
	EXPECT_EQ(ev[0].id, uint32_t(VRNIC_ERR_INTERNAL));
	// A second injection while FATAL posts nothing more.
	vrnic_engine_inject_internal_error(p.eng);
	EXPECT_TRUE(p.drain_aeq().empty());

	ASSERT_TRUE(reset_to_ready(p));
	vrnic_admin_cmd cmd{};
	cmd.opcode = VRNIC_ADMIN_CREATE_PD;
	EXPECT_EQ(p.admin(cmd).status, VRNIC_ADMIN_ST_OK);
}

// ------------------------------------------------------- frame queue

// The outbox and loopback FIFO: frames come out whole and in order, a
// push that does not fit is refused (never overwrites), and the oldest
// frame stays untouched while others are pushed behind it.
TEST(FrameQueue, FifoOrderWrapAroundAndBound)
{
	vrnic::FrameQueue q(4096);
	std::deque<std::vector<uint8_t>> model;
	std::mt19937 rng(7);
	size_t pushed = 0, refused = 0, sum = 0;

	for (int i = 0; i < 20000; i++) {
		if (rng() % 3 != 0) {
			std::vector<uint8_t> f(rng() % 1500);
			for (size_t k = 0; k < f.size(); k++)
				f[k] = uint8_t(i * 7 + k);
			std::vector<uint8_t> oldest;
			if (!q.empty())
				oldest.assign(q.front().begin(), q.front().end());
			if (q.push(f)) {
				sum += f.size();
				model.push_back(std::move(f));
				pushed++;
			} else {
				refused++;
			}
			if (!oldest.empty()) {
				ASSERT_TRUE(std::equal(oldest.begin(), oldest.end(),
						       q.front().begin(), q.front().end()));
			}
		} else if (!model.empty()) {
			const auto f = q.front();
			ASSERT_TRUE(std::equal(f.begin(), f.end(), model.front().begin(),
					       model.front().end()));
			sum -= f.size();
			q.pop();
			model.pop_front();
		}
		ASSERT_EQ(q.frames(), model.size());
		ASSERT_EQ(q.bytes(), sum);
		ASSERT_LE(q.room(), q.capacity());
		ASSERT_LE(q.bytes() + 4 * q.frames(), q.capacity() - q.room());
	}
	EXPECT_GT(refused, 100u);
	EXPECT_GT(pushed, 5000u);
	while (!q.empty())
		q.pop();
	EXPECT_EQ(q.room(), q.capacity());
	EXPECT_FALSE(q.push(std::vector<uint8_t>(4096)));	// never fits
	EXPECT_TRUE(q.push(std::vector<uint8_t>(4092)));
	EXPECT_FALSE(q.push(std::vector<uint8_t>(0)));	// full
}

// Review F1: a handle never comes back.  Before, each slot had a 12-bit
// generation and the lowest free slot was taken, so the 4096th PD, CQ or
// SRQ created after one was destroyed got the destroyed one's handle.
TEST(Handles, ADestroyedHandleIsNotHandedOutAgain)
{
	Node n{1};
	auto cycle = [&n](const char *what, vrnic_admin_cmd create, uint8_t destroy) {
		std::set<uint32_t> seen;
		for (int i = 0; i < 5000; i++) {
			const uint32_t h = n.admin_ok(create);
			if (!seen.insert(h).second) {
				ADD_FAILURE() << what << " handle " << std::hex << h
					      << " handed out again after " << std::dec << i
					      << " cycles";
				return;
			}
			vrnic_admin_cmd d{};
			d.opcode = destroy;
			d.destroy.id = h;
			ASSERT_EQ(n.p.admin(d).status, VRNIC_ADMIN_ST_OK);
		}
	};
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_PD;
	cycle("PD", c, VRNIC_ADMIN_DESTROY_PD);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_CQ;
	c.create_cq.base = Node::kData + 0xf00000;
	c.create_cq.dbrec = Node::kData + 0xf10000;
	c.create_cq.log_depth = 4;
	c.create_cq.eqn = 1;
	cycle("CQ", c, VRNIC_ADMIN_DESTROY_CQ);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_SRQ;
	c.create_srq.base = Node::kData + 0xf00000;
	c.create_srq.dbrec = Node::kData + 0xf10000;
	c.create_srq.pdn = n.pd;
	c.create_srq.log_depth = 4;
	c.create_srq.wqe_shift = 8;
	cycle("SRQ", c, VRNIC_ADMIN_DESTROY_SRQ);
}

// A slot whose generation is spent is passed over while another slot is
// free, and starts again when none is: a process that cycles one CQ
// while the table is otherwise full cannot leave the device without CQs
// (the cold review of F1: retiring spent slots until reset was a denial
// of service for every context).
TEST(Handles, ASpentSlotIsRenewedWhenNothingElseIsFree)
{
	Node n{1};
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_CQ;
	c.create_cq.base = Node::kData + 0xf00000;	// rings may share memory
	c.create_cq.dbrec = Node::kData + 0xf10000;
	c.create_cq.log_depth = 1;
	c.create_cq.eqn = 1;
	std::vector<uint32_t> held;
	for (;;) {
		const auto r = n.p.admin(c);
		if (r.status != VRNIC_ADMIN_ST_OK)
			break;
		held.push_back(r.result);
	}
	ASSERT_GT(held.size(), 1000u);
	vrnic_admin_cmd d{};
	d.opcode = VRNIC_ADMIN_DESTROY_CQ;
	d.destroy.id = held.back();
	held.pop_back();
	ASSERT_EQ(n.p.admin(d).status, VRNIC_ADMIN_ST_OK);
	// One free slot, cycled past its 255 generations.
	const std::set<uint32_t> live(held.begin(), held.end());
	for (int i = 0; i < 300; i++) {
		const auto r = n.p.admin(c);
		ASSERT_EQ(r.status, VRNIC_ADMIN_ST_OK) << "after " << i << " cycles";
		ASSERT_FALSE(live.count(r.result));
		d.destroy.id = r.result;
		ASSERT_EQ(n.p.admin(d).status, VRNIC_ADMIN_ST_OK);
	}
}

// SPDX-License-Identifier: GPL-2.0-or-later
// The active-QP scheduler: a poll visits the QPs that have work and a
// timer pops the deadlines that are due, however many QPs are idle (both
// counted in visits and heap entries, never timed); a stale entry never
// acts on the QP that reuses its slot; the per-QP pacer spaces a QP's
// packets at its rate without holding up the other QPs.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <random>

#include "engine_internal.hpp"
#include "rdma_node.hpp"
#include "sched.hpp"

namespace {

using vrnic::Rdma;

Rdma &rdma(Node &n) { return n.p.eng->dev.rdma_for_test(); }

// The admin command for one more RC QP of node a, on a's rings.
vrnic_admin_cmd qp_cmd(const Node &a)
{
	vrnic_admin_cmd c = a.srq_qp_cmd(0);
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.rq_log_depth = Node::kRqLog;
	c.create_qp.rq_wqe_shift = Node::kRqShift;
	return c;
}

// n more RC QPs of node a, connected to peer's QP and in RTS: idle,
// nothing is ever posted on them.
std::vector<uint32_t> idle_qps(Node &a, const Node &peer, unsigned n)
{
	std::vector<uint32_t> v;
	const uint32_t main = a.qp;
	const vrnic_admin_cmd c = qp_cmd(a);
	for (unsigned i = 0; i < n; i++) {
		a.qp = a.admin_ok(c);
		a.connect(peer, 5, 100, 5000);
		v.push_back(a.qp);
	}
	a.qp = main;
	return v;
}

void write_wqes(Node &a, const Node &b, unsigned count, uint32_t len,
		uint64_t first_wr = 0)
{
	for (unsigned i = 0; i < count; i++) {
		const uint64_t off = uint64_t(i % 64) * len;
		a.post_send(send_wqe(first_wr + i, VRNIC_WR_RDMA_WRITE,
				     Node::kIova + 0x800000 + off, b.mr),
			    {a.sge(off, len)});
	}
}

// Two nodes on a wire that takes no time; when both are idle the clock
// jumps to the earliest timer.  frame_bytes: what a sent.
struct Clocked {
	Node &a, &b;
	uint64_t frame_bytes = 0;
	unsigned timer_jumps = 0;

	static void settle(Node &n)
	{
		for (int i = 0; i < 100000; i++) {
			const unsigned s = n.p.schedules;
			vrnic_engine_poll(n.p.eng);
			if (n.p.schedules == s)
				break;
		}
	}
	// One exchange; false when nothing moved.
	bool step()
	{
		settle(a);
		settle(b);
		if (a.p.frames.empty() && b.p.frames.empty())
			return false;
		auto fa = std::move(a.p.frames);
		auto fb = std::move(b.p.frames);
		a.p.frames.clear();
		b.p.frames.clear();
		for (auto &f : fa) {
			frame_bytes += f.size();
			vrnic_engine_receive(b.p.eng, f.data(), f.size());
		}
		for (auto &f : fb)
			vrnic_engine_receive(a.p.eng, f.data(), f.size());
		return true;
	}
	// The next timer of either node, the clock moved to it; false if none.
	bool jump()
	{
		uint64_t next = 0;
		for (Node *n : {&a, &b})
			if (n->p.deadline && (!next || n->p.deadline < next))
				next = n->p.deadline;
		if (!next)
			return false;
		for (Node *n : {&a, &b})
			n->p.now = std::max(n->p.now, next);
		for (Node *n : {&a, &b})
			if (n->p.deadline && n->p.deadline <= next) {
				n->p.deadline = 0;
				vrnic_engine_timer(n->p.eng);
			}
		timer_jumps++;
		return true;
	}
	// Run until pred() holds, jumping to timers when idle.
	bool run(const std::function<bool()> &pred, bool timers = true)
	{
		for (int r = 0; r < 1000000; r++) {
			if (pred())
				return true;
			if (!step() && (!timers || !jump()))
				return pred();
		}
		return pred();
	}
};

// Completions of node n's CQ, counted per QP.
struct Cqes {
	std::map<uint32_t, unsigned> per_qp;
	unsigned total = 0;
	void drain(Node &n)
	{
		vrnic_cqe c;
		while (n.poll_cq(c)) {
			EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
			per_qp[c.qpn]++;
			total++;
		}
	}
};

TEST(Sched, IdleQpsAreNotVisited)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	idle_qps(a, b, 1000);
	// Connecting them made each active once: one pass, and they leave.
	Clocked::settle(a);
	const auto &sc = rdma(a).sched_counters();
	EXPECT_EQ(rdma(a).active_qps(), 0u);
	const uint64_t polls = sc.polls, visits = sc.visits;

	constexpr unsigned kMsgs = 64;
	write_wqes(a, b, kMsgs, 64 << 10);
	Clocked w{a, b};
	uint64_t most = 0;
	Cqes got;
	while (got.total < kMsgs) {
		const uint64_t v = sc.visits, p = sc.polls;
		vrnic_engine_poll(a.p.eng);
		if (sc.polls > p)
			most = std::max(most, sc.visits - v);
		ASSERT_TRUE(w.step() || got.total == kMsgs);
		got.drain(a);
	}
	EXPECT_EQ(got.per_qp[a.qp], kMsgs);
	EXPECT_GE(sc.polls - polls, 8u);
	// One QP with work: one visit a pass, at most two (a stale entry).
	EXPECT_LE(most, 2u);
	EXPECT_LE(sc.visits - visits, 2 * (sc.polls - polls));
	Clocked::settle(a);
	EXPECT_EQ(rdma(a).active_qps(), 0u);
}

TEST(Sched, TimerPopsOnlyDueEntries)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	idle_qps(a, b, 1000);
	Clocked::settle(a);
	const auto &sc = rdma(a).sched_counters();
	// A WRITE whose packets are lost: the busy QP's ack timer, the only
	// deadline of the 1001 QPs.
	write_wqes(a, b, 1, 8192);
	Clocked::settle(a);
	ASSERT_EQ(a.p.frames.size(), 2u);
	a.p.frames.clear();
	EXPECT_EQ(rdma(a).timer_entries(), 1u);
	ASSERT_NE(a.p.deadline, 0u);
	const uint64_t pops = sc.timer_pops;
	a.p.now = a.p.deadline;
	a.p.deadline = 0;
	vrnic_engine_timer(a.p.eng);
	EXPECT_EQ(sc.timer_pops - pops, 1u);
	EXPECT_EQ(a.counters().retry_timeouts, 1u);
	// The retransmission, and the timer armed again for it.
	Clocked::settle(a);
	EXPECT_EQ(a.p.frames.size(), 2u);
	EXPECT_NE(a.p.deadline, 0u);
	// A timer call with nothing due pops nothing.
	vrnic_engine_timer(a.p.eng);
	EXPECT_EQ(sc.timer_pops - pops, 1u);
	// Acknowledged: the entry that remains finds no deadline and goes.
	Clocked w{a, b};
	Cqes got;
	ASSERT_TRUE(w.run([&] { got.drain(a); return got.total == 1; }, false));
	a.p.now = a.p.deadline;
	vrnic_engine_timer(a.p.eng);
	EXPECT_EQ(rdma(a).timer_entries(), 0u);
	EXPECT_EQ(a.counters().retry_timeouts, 1u);
}

// A QP with an ack timer running and a turn queued is destroyed; its slot
// goes to a new QP, whose own timer runs later.  The old QP's deadline
// passing does nothing to the new one.
TEST(Sched, StaleEntriesNeverActOnAReusedSlot)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	write_wqes(a, b, 1, 8192);
	vrnic_engine_poll(a.p.eng);	// the frames, and a turn still queued
	ASSERT_EQ(a.p.frames.size(), 2u);
	a.p.frames.clear();
	const uint32_t old = a.qp;
	const uint64_t old_deadline = a.p.deadline;
	ASSERT_NE(old_deadline, 0u);
	EXPECT_EQ(rdma(a).active_qps(), 1u);
	vrnic_admin_cmd d{};
	d.opcode = VRNIC_ADMIN_DESTROY_QP;
	d.destroy.id = old;
	ASSERT_EQ(a.p.admin(d).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(rdma(a).timer_entries(), 0u);

	// Allocation goes round robin: every other slot first.
	a.sq_pi = 0;
	a.p.store<uint32_t>(Node::kQpDb, 0);
	vrnic_admin_cmd c = qp_cmd(a);
	c.create_qp.dbrec = Node::kQpDb;
	uint32_t fresh = 0;
	for (unsigned i = 0; i < VRNIC_MAX_QP; i++) {
		const uint32_t h = a.admin_ok(c);
		if (vrnic::handle_slot(h) == vrnic::handle_slot(old)) {
			fresh = h;
			break;
		}
	}
	ASSERT_NE(fresh, 0u);
	ASSERT_NE(fresh, old);
	// The new QP sends later than the old one did: its deadline is later.
	a.p.now = old_deadline / 2;
	a.qp = fresh;
	a.connect(b, 5, 700, 5000);
	write_wqes(a, b, 1, 4096);
	Clocked::settle(a);
	ASSERT_EQ(a.p.frames.size(), 1u);
	a.p.frames.clear();
	const uint64_t new_deadline = a.p.deadline;
	ASSERT_GT(new_deadline, old_deadline);
	// A QP that sent stays for one more turn, which finds nothing: the
	// old QP's entry went when it came up.
	vrnic_engine_poll(a.p.eng);
	EXPECT_EQ(rdma(a).active_qps(), 0u);

	a.p.now = old_deadline;
	vrnic_engine_timer(a.p.eng);
	Clocked::settle(a);
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
	EXPECT_TRUE(a.p.frames.empty());
	EXPECT_EQ(rdma(a).qp(fresh)->attr.state, VRNIC_QPS_RTS);

	a.p.now = new_deadline;
	vrnic_engine_timer(a.p.eng);
	Clocked::settle(a);
	EXPECT_EQ(a.counters().retry_timeouts, 1u);
	EXPECT_EQ(a.p.frames.size(), 1u);
}

// A QP whose send window is full did nothing in its turn and leaves the
// list; the ACKs that open the window bring it back.
TEST(Sched, WindowBlockedQpLeavesAndAckBringsItBack)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	constexpr unsigned kMsgs = 64;	// 1024 packets, twice the window
	write_wqes(a, b, kMsgs, 64 << 10);
	Clocked::settle(a);
	vrnic_engine_poll(a.p.eng);
	EXPECT_EQ(a.p.frames.size(), size_t(Rdma::kWindow));
	EXPECT_EQ(rdma(a).active_qps(), 0u);
	Clocked w{a, b};
	Cqes got;
	ASSERT_TRUE(w.run([&] { got.drain(a); return got.total == kMsgs; }, false));
	EXPECT_EQ(a.counters().sent_pkts, kMsgs * 16u);
}

// 2 MiB of WRITEs through a QP paced at 100 MB/s: the time the transfer
// takes on the simulated clock gives the rate to within 2% (the bucket
// starts full, so 16 KiB of it leave at once), and to within 0.5% once
// that burst is taken out.  The rate counts frames as they leave
// (Ethernet header to ICRC).
TEST(Sched, PacerHoldsTheRateThroughTransmit)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	constexpr uint64_t kRate = 100'000'000;
	ASSERT_TRUE(rdma(a).set_qp_rate(a.qp, kRate));
	constexpr unsigned kMsgs = 32;
	write_wqes(a, b, kMsgs, 64 << 10);
	Clocked w{a, b};
	Cqes got;
	ASSERT_TRUE(w.run([&] { got.drain(a); return got.total == kMsgs; }));
	const double secs = double(a.p.now) / 1e9;
	ASSERT_GT(secs, 0);
	const double rate = double(w.frame_bytes) / secs;
	EXPECT_NEAR(rate / double(kRate), 1.0, 0.02)
		<< w.frame_bytes << " bytes in " << a.p.now << " ns";
	// Past the first burst, the bucket's arithmetic is exact: the rest
	// left at the rate to within the last packet's spacing.
	const double burst = double(vrnic::cc::Pacer::default_burst(kRate));
	EXPECT_NEAR((double(w.frame_bytes) - burst) / secs / double(kRate), 1.0, 0.005);
	EXPECT_GT(rdma(a).sched_counters().paced, 100u);
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
	EXPECT_GE(w.frame_bytes, uint64_t(kMsgs) * (64 << 10));

	// Unpaced again: the next messages leave at once.
	ASSERT_TRUE(rdma(a).set_qp_rate(a.qp, 0));
	const uint64_t t = a.p.now;
	write_wqes(a, b, kMsgs, 64 << 10, 100);
	got.total = 0;
	ASSERT_TRUE(w.run([&] { got.drain(a); return got.total == kMsgs; }, false));
	EXPECT_EQ(a.p.now, t);
}

// Pacing off (the default): no wait, no pacing timer, the same frames.
TEST(Sched, UnpacedQpIsUnaffected)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	constexpr unsigned kMsgs = 32;
	write_wqes(a, b, kMsgs, 64 << 10);
	Clocked w{a, b};
	Cqes got;
	ASSERT_TRUE(w.run([&] { got.drain(a); return got.total == kMsgs; }, false));
	EXPECT_EQ(a.p.now, 0u);
	EXPECT_EQ(rdma(a).sched_counters().paced, 0u);
	EXPECT_EQ(rdma(a).qp(a.qp)->pace_at, 0u);
	EXPECT_EQ(a.counters().sent_pkts, kMsgs * 16u);
}

// Two requester QPs of one device, one paced at 10 MB/s, the other not:
// the unpaced one's WRITEs all complete before the clock moves at all;
// the paced one takes its time, and both complete.
TEST(Sched, PacedQpDoesNotStallOthers)
{
	Node a{1}, b{2};
	const uint32_t a1 = a.qp, b1 = b.qp;
	// a's second QP on its own SQ ring and doorbell record.
	constexpr uint64_t kSq2 = Node::B + 0x1200000, kDb2 = Node::kQpDb + 0x40;
	vrnic_admin_cmd c = qp_cmd(a);
	c.create_qp.sq_base = kSq2;
	c.create_qp.dbrec = kDb2;
	const uint32_t a2 = a.admin_ok(c);
	const uint32_t b2 = b.admin_ok(qp_cmd(b));
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	a.qp = a2;
	b.qp = b2;
	a.connect(b, 5, 300, 7000);
	b.connect(a, 5, 7000, 300);
	a.qp = a1;
	b.qp = b1;
	ASSERT_TRUE(rdma(a).set_qp_rate(a1, 10'000'000));

	constexpr unsigned kMsgs = 8;
	constexpr uint32_t kLen = 64 << 10;
	write_wqes(a, b, kMsgs, kLen);
	for (unsigned i = 0; i < kMsgs; i++) {
		const uint64_t slot = kSq2 + uint64_t(i) * (1u << Node::kSqShift);
		std::memset(a.p.ptr(slot), 0, 1u << Node::kSqShift);
		vrnic_send_wqe h = send_wqe(1000 + i, VRNIC_WR_RDMA_WRITE,
					    Node::kIova + 0xc00000 + uint64_t(i) * kLen, b.mr);
		h.num_sge = 1;
		a.p.store(slot, h);
		a.p.store(slot + sizeof(h), a.sge(0x400000 + uint64_t(i) * kLen, kLen));
	}
	a.p.store<uint32_t>(kDb2, kMsgs);
	a.p.db(0, VRNIC_DB_SQ, a2);

	Clocked w{a, b};
	Cqes got;
	// No timer: time stands still, the paced QP sends its burst only.
	w.run([&] { got.drain(a); return got.per_qp[a2] == kMsgs; }, false);
	EXPECT_EQ(got.per_qp[a2], kMsgs);
	EXPECT_EQ(a.p.now, 0u);
	EXPECT_LT(got.per_qp[a1], 1u);
	ASSERT_NE(a.p.deadline, 0u);
	// Waiting for its tokens, the paced QP is off the active list: only
	// its pacing deadline (and ack timer) stand for it.
	vrnic_engine_poll(a.p.eng);
	EXPECT_EQ(rdma(a).active_qps(), 0u);
	EXPECT_GE(rdma(a).timer_entries(), 1u);
	ASSERT_TRUE(w.run([&] { got.drain(a); return got.per_qp[a1] == kMsgs; }));
	// 512 KiB at 10 MB/s, less the first burst: about 51 ms.
	EXPECT_GT(a.p.now, 45'000'000u);
	EXPECT_LT(a.p.now, 56'000'000u);
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
	EXPECT_EQ(std::memcmp(b.data(0xc00000), a.data(0x400000), kMsgs * kLen), 0);
}

// The heap against a reference: random arms (earlier, later, another
// QP in the slot), forgets and pops, always the earliest first and never
// more than one entry per slot and kind.
TEST(Sched, TimerHeapOrder)
{
	using vrnic::TimerHeap;
	constexpr unsigned kSlots = 64;
	TimerHeap h;
	std::map<std::pair<uint32_t, unsigned>, std::pair<uint32_t, uint64_t>> ref;
	std::mt19937 rng(7);
	for (int i = 0; i < 20000; i++) {
		const uint32_t slot = 2 + rng() % (kSlots - 2);
		const auto kind = vrnic::TimerKind(rng() % vrnic::kTimerKinds);
		const uint32_t gen = rng() % 3;
		const uint32_t handle = gen << VRNIC_OBJ_INDEX_BITS | slot;
		const unsigned op = rng() % 10;
		if (op < 6) {
			const uint64_t at = 1 + rng() % 100000;
			h.arm(handle, kind, at);
			auto it = ref.find({slot, kind});
			if (it == ref.end() || it->second.first != handle ||
			    at < it->second.second)
				ref[{slot, kind}] = {handle, at};
		} else if (op < 7) {
			h.forget(slot);
			for (unsigned k = 0; k < vrnic::kTimerKinds; k++)
				ref.erase({slot, k});
		} else if (!h.empty()) {
			const auto e = h.pop();
			uint64_t least = ~0ull;
			for (const auto &[k, v] : ref)
				least = std::min(least, v.second);
			ASSERT_EQ(e.at, least);
			const auto it = ref.find({vrnic::handle_slot(e.handle), e.kind});
			ASSERT_NE(it, ref.end());
			EXPECT_EQ(it->second.first, e.handle);
			EXPECT_EQ(it->second.second, e.at);
			ref.erase(it);
		}
		ASSERT_EQ(h.size(), ref.size());
	}
}

// The cost of a poll with 1000 idle QPs, in time (for the record, not a
// pass/fail check): --gtest_also_run_disabled_tests.
TEST(Sched, DISABLED_IdlePollTime)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	idle_qps(a, b, 1000);
	Clocked::settle(a);
	constexpr int kPolls = 20000;
	const auto t0 = std::chrono::steady_clock::now();
	for (int i = 0; i < kPolls; i++)
		vrnic_engine_poll(a.p.eng);
	const auto t1 = std::chrono::steady_clock::now();
	std::printf("idle poll, 1001 QPs: %.1f ns/poll\n",
		    double(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()) /
			    kPolls);
}

} // namespace

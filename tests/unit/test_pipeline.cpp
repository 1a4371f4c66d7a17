// SPDX-License-Identifier: GPL-2.0-or-later
// How much the transport moves per poll: a QP with many large WRITEs
// posted keeps its send window full (a throughput guard, counted in
// frames and polls, never timed).
#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"

namespace {

using vrnic::Rdma;

struct Pipeline : ::testing::Test {
	Node a{1}, b{2};

	void SetUp() override
	{
		a.connect(b, 5, 100, 5000);	// path MTU 4096
		b.connect(a, 5, 5000, 100);
	}
	// Poll n until it stops asking to be called again; the frames it
	// emitted meanwhile.  Each poll is one call from the platform.
	size_t poll_idle(Node &n, unsigned &polls)
	{
		const size_t before = n.p.frames.size();
		for (unsigned i = 0; i < 1000; i++) {
			const unsigned s = n.p.schedules;
			vrnic_engine_poll(n.p.eng);
			polls++;
			if (n.p.schedules == s)
				break;
		}
		return n.p.frames.size() - before;
	}
	// Hand every frame from -> to, one receive call each.
	static size_t deliver(Node &from, Node &to)
	{
		auto f = std::move(from.p.frames);
		from.p.frames.clear();
		for (auto &x : f)
			vrnic_engine_receive(to.p.eng, x.data(), x.size());
		return f.size();
	}
};

TEST_F(Pipeline, LargeWritesKeepTheWindowFull)
{
	constexpr uint32_t kLen = 64 << 10, kMsgs = 64;
	constexpr unsigned kPkts = kLen / 4096;		// per message
	for (uint32_t i = 0; i < kMsgs; i++) {
		vrnic_send_wqe w{};
		w.wr_id = i;
		w.opcode = VRNIC_WR_RDMA_WRITE;
		w.flags = VRNIC_WQE_SIGNALED;
		w.remote_addr = Node::kIova + 0x800000 + uint64_t(i % 64) * kLen;
		w.rkey = b.mr;
		a.post_send(w, {a.sge(uint64_t(i % 64) * kLen, kLen)});
	}
	// One poll: its work budget (a unit per WQE fetched, per frame
	// sent) goes to frames once the WQEs are fetched.
	vrnic_engine_poll(a.p.eng);
	EXPECT_EQ(a.p.frames.size(), size_t(Rdma::kPktBudget - kMsgs));
	// Polled until idle, the window is full and nothing more leaves.
	unsigned polls = 1;
	poll_idle(a, polls);
	EXPECT_EQ(a.p.frames.size(), size_t(Rdma::kWindow));
	EXPECT_LE(polls, Rdma::kWindow / Rdma::kPktBudget + 1);

	// Round trips: the responder acknowledges every message, and each
	// round of ACKs refills the window at once.
	size_t sent = a.p.frames.size(), done = 0;
	vrnic_cqe c;
	for (unsigned round = 0; round < 16 && done < kMsgs; round++) {
		const size_t in_flight = sent - done * kPkts;
		EXPECT_EQ(in_flight, std::min<size_t>(Rdma::kWindow,
						      (kMsgs - done) * kPkts))
			<< "round " << round;
		deliver(a, b);
		unsigned bp = 0;
		poll_idle(b, bp);
		EXPECT_EQ(b.p.frames.size(), in_flight / kPkts)
			<< "one ACK per message";
		deliver(b, a);
		unsigned ap = 0;
		sent += poll_idle(a, ap);
		while (a.poll_cq(c)) {
			EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
			EXPECT_EQ(c.wr_id, done);
			done++;
		}
	}
	EXPECT_EQ(done, kMsgs);
	EXPECT_EQ(sent, size_t(kMsgs) * kPkts);
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
}

// A network that is full (QEMU's queue towards a busy peer) takes the
// frame it is given and says so: the engine then hands over nothing more
// until vrnic_engine_tx_resume(), holds the rest in its outbox, does not
// ask to be polled in a loop meanwhile, and loses nothing.  Before, the
// glue used qemu_send_packet(), whose queue drops frames past 10000:
// under ten flows a fifth of one direction's frames were lost.
TEST_F(Pipeline, AFullNetworkHoldsFramesInsteadOfLosingThem)
{
	constexpr uint32_t kLen = 64 << 10, kMsgs = 64;
	constexpr unsigned kPkts = kLen / 4096;
	a.p.net_full = true;
	for (uint32_t i = 0; i < kMsgs; i++) {
		vrnic_send_wqe w{};
		w.wr_id = i;
		w.opcode = VRNIC_WR_RDMA_WRITE;
		w.flags = VRNIC_WQE_SIGNALED;
		w.remote_addr = Node::kIova + 0x800000 + uint64_t(i) * kLen;
		w.rkey = b.mr;
		a.post_send(w, {a.sge(uint64_t(i) * kLen, kLen)});
	}
	unsigned polls = 0;
	poll_idle(a, polls);
	EXPECT_EQ(a.p.frames.size(), 1u) << "one frame, then the engine waits";
	EXPECT_LT(polls, 100u) << "blocked, it must not spin";
	// Each resume into a still-full network lets exactly one more go.
	vrnic_engine_tx_resume(a.p.eng);
	EXPECT_EQ(a.p.frames.size(), 2u);
	a.p.net_full = false;
	vrnic_engine_tx_resume(a.p.eng);
	poll_idle(a, polls);
	EXPECT_EQ(a.p.frames.size(), size_t(Rdma::kWindow));

	size_t done = 0;
	vrnic_cqe c;
	for (unsigned round = 0; round < 64 && done < kMsgs; round++) {
		deliver(a, b);
		unsigned bp = 0;
		poll_idle(b, bp);
		deliver(b, a);
		unsigned ap = 0;
		poll_idle(a, ap);
		while (a.poll_cq(c)) {
			EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
			EXPECT_EQ(c.wr_id, done);
			done++;
		}
	}
	EXPECT_EQ(done, kMsgs);
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
	EXPECT_EQ(b.counters().rcvd_seq_err, 0u) << "no frame was lost";
	(void)kPkts;
}

} // namespace

namespace {

// Two requesters READ from two QPs of one responder, each with more
// response packets queued than one poll's budget.  Each poll must start
// where the last one ran out: before, every poll began at the lowest QP
// slot, which took the whole budget while its requester kept READs
// outstanding, and the other QP sent nothing until its peer timed out
// (ib_read_bw -q 4 under load ended in retry exhaustion with no loss).
TEST(Fairness, ResponderQpsShareThePollBudget)
{
	Node a1{1}, b{2}, a2{3};
	vrnic_admin_cmd c = b.srq_qp_cmd(0);
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.rq_log_depth = Node::kRqLog;
	c.create_qp.rq_wqe_shift = Node::kRqShift;
	const uint32_t qp1 = b.qp, qp2 = b.admin_ok(c);

	b.connect(a1, 5, 100, 5000);
	a1.connect(b, 5, 5000, 100);
	b.qp = qp2;
	b.connect(a2, 5, 200, 6000);
	a2.connect(b, 5, 6000, 200);
	b.qp = qp1;

	// 16 READs of 256 KiB each: 1024 response packets per QP.
	constexpr uint32_t kLen = 256 << 10;
	for (Node *a : {&a1, &a2}) {
		for (uint32_t i = 0; i < 16; i++) {
			vrnic_send_wqe w{};
			w.wr_id = i;
			w.opcode = VRNIC_WR_RDMA_READ;
			w.flags = VRNIC_WQE_SIGNALED;
			w.remote_addr = Node::kIova + uint64_t(i % 8) * kLen;
			w.rkey = b.mr;
			a->post_send(w, {a->sge(uint64_t(i % 8) * kLen, kLen)});
		}
		for (int k = 0; k < 8; k++)
			vrnic_engine_poll(a->p.eng);
		for (auto &f : a->p.frames)
			vrnic_engine_receive(b.p.eng, f.data(), f.size());
		a->p.frames.clear();
	}
	b.p.frames.clear();
	// Two polls of the responder: both QPs must have sent responses.
	size_t to[2] = {0, 0};
	for (int k = 0; k < 2; k++) {
		vrnic_engine_poll(b.p.eng);
		for (auto &f : b.p.frames)
			to[f[5] == a1.id ? 0 : 1]++;
		b.p.frames.clear();
	}
	EXPECT_GT(to[0], 0u);
	EXPECT_GT(to[1], 0u) << "the second QP waited behind the first";
	EXPECT_EQ(to[0] + to[1], 2u * Rdma::kPktBudget);
}

} // namespace

// SPDX-License-Identifier: GPL-2.0-or-later
// The active-QP scheduler: a poll visits the QPs that have work and a
// timer pops the deadlines that are due, however many QPs are idle; a
// stale entry never acts on the QP that reuses its slot; the per-QP
// pacer spaces a QP's packets without holding up the others.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>

#include "engine_internal.hpp"
#include "rdma_node.hpp"

namespace {

// n more RC QPs of node a, each connected (to peer's QP) and in RTS,
// sharing a's rings: they stay idle, nothing is posted on them.
std::vector<uint32_t> idle_qps(Node &a, const Node &peer, unsigned n)
{
	std::vector<uint32_t> v;
	const uint32_t main = a.qp;
	vrnic_admin_cmd c = a.srq_qp_cmd(0);
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.rq_log_depth = Node::kRqLog;
	c.create_qp.rq_wqe_shift = Node::kRqShift;
	for (unsigned i = 0; i < n; i++) {
		a.qp = a.admin_ok(c);
		a.connect(peer, 5, 100, 5000);
		v.push_back(a.qp);
	}
	a.qp = main;
	return v;
}

TEST(SchedBench, IdlePollCost)
{
	Node a{1}, b{2};
	a.connect(b, 5, 100, 5000);
	b.connect(a, 5, 5000, 100);
	idle_qps(a, b, 1000);
	for (int i = 0; i < 4; i++)
		vrnic_engine_poll(a.p.eng);
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

// SPDX-License-Identifier: GPL-2.0-or-later
// UD, the GSI QP1 and UC between two engines over a simulated wire.
#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"

namespace {

constexpr uint32_t kQkey = 0x11223344;



struct Ud : ::testing::Test {
	Node a{1, false, Node::kCqLog, VRNIC_QPT_UD};
	Node b{2, true, Node::kCqLog, VRNIC_QPT_UD};
	Wire wire;

	void SetUp() override
	{
		a.ud_ready(kQkey, 10);
		b.ud_ready(kQkey, 20);
	}
};

} // namespace

TEST_F(Ud, DeliversWithTheNetworkHeaderFirst)
{
	const auto av = b.av(kQkey);
	b.post_recv(1, {b.sge(0x1000, 40 + 1024)});
	b.post_recv(2, {b.sge(0x3000, 16), b.sge(0x4000, 200)});
	a.post_send(send_wqe(7), {a.sge(0x8000, 1024)}, {}, &av);
	auto w = send_wqe(8, VRNIC_WR_SEND_IMM);
	w.imm_data = 0xdeadbeef;
	a.post_send(w, {}, {'h', 'e', 'l', 'l', 'o'}, &av);

	const auto sent = wire.completions(a, b, a, 2);
	ASSERT_EQ(sent.size(), 2u);
	EXPECT_EQ(sent[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(sent[1].wr_id, 8u);
	const auto got = wire.completions(a, b, b, 2);
	ASSERT_EQ(got.size(), 2u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(got[0].byte_len, 40u + 1024);
	EXPECT_EQ(got[0].src_qp, a.qp);
	EXPECT_EQ(got[0].wc_flags, VRNIC_CQE_GRH | VRNIC_CQE_NET_IPV4);
	EXPECT_EQ(std::memcmp(b.data(0x1000 + 40), a.data(0x8000), 1024), 0);
	// 20 zero bytes, then the IPv4 header: 10.10.0.1 -> 10.10.0.2.
	const uint8_t *grh = b.data(0x1000);
	for (int i = 0; i < 20; i++)
		EXPECT_EQ(grh[i], 0) << i;
	EXPECT_EQ(grh[20], 0x45);
	const uint8_t src[4] = {10, 10, 0, 1}, dst[4] = {10, 10, 0, 2};
	EXPECT_EQ(std::memcmp(grh + 20 + 12, src, 4), 0);
	EXPECT_EQ(std::memcmp(grh + 20 + 16, dst, 4), 0);
	// Second: the GRH spans two SGEs, then the payload.
	EXPECT_EQ(got[1].byte_len, 45u);
	EXPECT_EQ(got[1].imm_data, 0xdeadbeefu);
	EXPECT_EQ(got[1].wc_flags,
		  VRNIC_CQE_GRH | VRNIC_CQE_NET_IPV4 | VRNIC_CQE_WITH_IMM);
	EXPECT_EQ(std::memcmp(b.data(0x4000 + 24), "hello", 5), 0);
}

TEST_F(Ud, WrongQkeyIsDroppedAndControlledQkeyMeansTheQps)
{
	b.post_recv(1, {b.sge(0x1000, 200)});
	auto bad = b.av(kQkey + 1);
	a.post_send(send_wqe(1), {a.sge(0, 10)}, {}, &bad);
	ASSERT_EQ(wire.completions(a, b, a, 1).size(), 1u);	// sent, and lost
	EXPECT_EQ(b.counters().qkey_violations, 1u);
	vrnic_cqe c;
	EXPECT_FALSE(b.poll_cq(c));

	// A controlled Q_Key in the WQE: the sender's QP Q_Key is used.
	auto ctl = b.av(VRNIC_QKEY_PRIVILEGED | 0x1234);
	a.post_send(send_wqe(2), {a.sge(0, 10)}, {}, &ctl);
	const auto got = wire.completions(a, b, b, 1);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(b.counters().qkey_violations, 1u);
}

TEST_F(Ud, MessageLargerThanTheMtuFailsLocally)
{
	const auto av = b.av(kQkey);
	// Port MTU 1500: the UD MTU is 1024.
	a.post_send(send_wqe(1), {a.sge(0, 1025)}, {}, &av);
	a.post_send(send_wqe(2), {a.sge(0, 10)}, {}, &av);
	const auto got = wire.completions(a, b, a, 2);
	ASSERT_EQ(got.size(), 2u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_LOC_LEN_ERR);
	EXPECT_EQ(got[1].status, VRNIC_WC_ST_WR_FLUSH_ERR);
	EXPECT_EQ(a.counters().sent_pkts, 0u);
}

TEST_F(Ud, ShortReceiveBufferCompletesInErrorAndTheQpGoesOn)
{
	const auto av = b.av(kQkey);
	b.post_recv(1, {b.sge(0x1000, 40 + 99)});
	b.post_recv(2, {b.sge(0x2000, 40 + 100)});
	a.post_send(send_wqe(1), {a.sge(0, 100)}, {}, &av);
	a.post_send(send_wqe(2), {a.sge(0, 100)}, {}, &av);
	const auto got = wire.completions(a, b, b, 2);
	ASSERT_EQ(got.size(), 2u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_LOC_LEN_ERR);
	EXPECT_EQ(got[1].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(got[1].byte_len, 140u);
}

TEST_F(Ud, NoReceiveWqeDropsWithoutStallingTheSender)
{
	const auto av = b.av(kQkey);
	for (int i = 0; i < 4; i++)
		a.post_send(send_wqe(uint64_t(i)), {a.sge(0, 64)}, {}, &av);
	const auto sent = wire.completions(a, b, a, 4);
	ASSERT_EQ(sent.size(), 4u);
	for (const auto &c : sent)
		EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(b.counters().ud_no_recv, 4u);
}

TEST_F(Ud, RcOpcodesAreNotForUdQps)
{
	const auto av = b.av(kQkey);
	auto w = send_wqe(1, VRNIC_WR_RDMA_WRITE);
	a.post_send(w, {a.sge(0, 8)}, {}, &av);
	const auto got = wire.completions(a, b, a, 1);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_LOC_QP_OP_ERR);
}

TEST(Gsi, IsQp1AndTakesTheGsiQkeyOnly)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_GSI};
	Node g{2, false, Node::kCqLog, VRNIC_QPT_GSI};
	Wire wire;
	EXPECT_EQ(g.qp, uint32_t(VRNIC_GSI_QPN));
	a.ud_ready(VRNIC_GSI_QKEY);
	g.ud_ready(VRNIC_GSI_QKEY);
	g.post_recv(1, {g.sge(0, 296)});
	g.post_recv(2, {g.sge(0x1000, 296)});
	auto av = g.av(kQkey);	// not the GSI Q_Key: dropped
	a.post_send(send_wqe(1), {a.sge(0, 256)}, {}, &av);
	av = g.av(VRNIC_GSI_QKEY);
	a.post_send(send_wqe(2), {a.sge(0, 256)}, {}, &av);
	const auto got = wire.completions(a, g, g, 1);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].byte_len, 296u);
	EXPECT_EQ(got[0].src_qp, uint32_t(VRNIC_GSI_QPN));
	EXPECT_EQ(g.counters().qkey_violations, 1u);

	// A second GSI QP does not exist.
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.type = VRNIC_QPT_UD;
	c.create_qp.sq_base = Node::kSq;
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.dbrec = Node::kQpDb;
	c.create_qp.pdn = g.pd;
	c.create_qp.send_cqn = c.create_qp.recv_cqn = g.cq;
	c.create_qp.sq_wqe_shift = 6;	// no room for the address vector
	c.create_qp.rq_wqe_shift = 8;
	EXPECT_EQ(g.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.type = VRNIC_QPT_GSI;
	c.create_qp.sq_base = Node::kSq;
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.dbrec = Node::kQpDb;
	c.create_qp.pdn = g.pd;
	c.create_qp.send_cqn = c.create_qp.recv_cqn = g.cq;
	c.create_qp.sq_wqe_shift = 9;
	c.create_qp.rq_wqe_shift = 8;
	EXPECT_EQ(g.p.admin(c).status, VRNIC_ADMIN_ST_NO_RESOURCE);
}

TEST(UdState, UdTakesOnlyUdAttributes)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_UD};
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_INIT;
	// No Q_Key: refused.
	EXPECT_NE(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
	at.qkey = 1;
	at.path_mtu = 3;
	EXPECT_NE(a.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_QKEY |
			   VRNIC_QP_ATTR_PATH_MTU, at), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_QKEY, at),
		  VRNIC_ADMIN_ST_OK);
}

// ------------------------------------------------------------------- UC

struct Uc : ::testing::Test {
	Node a{1, false, Node::kCqLog, VRNIC_QPT_UC};
	Node b{2, false, Node::kCqLog, VRNIC_QPT_UC};
	Wire wire;

	void connect()
	{
		uc_connect(a, b, 100, 900);
		uc_connect(b, a, 900, 100);
	}
	static void uc_connect(Node &n, const Node &peer, uint32_t sq_psn,
			       uint32_t rq_psn)
	{
		vrnic_qp_attr at{};
		at.state = VRNIC_QPS_INIT;
		at.access = VRNIC_ACCESS_REMOTE_WRITE;
		ASSERT_EQ(n.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_ACCESS, at), 0);
		at.state = VRNIC_QPS_RTR;
		at.path_mtu = 1;	// 256: messages of several packets
		at.dest_qpn = peer.qp;
		at.rq_psn = rq_psn;
		const auto dg = peer.gid();
		std::memcpy(at.dgid, dg.data(), 16);
		at.sgid_index = Node::kGid4;
		const uint8_t dmac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, peer.id};
		std::memcpy(at.dmac, dmac, 6);
		// RC-only attributes are refused for UC.
		at.max_dest_rd_atomic = 1;
		ASSERT_NE(n.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV |
				   VRNIC_QP_ATTR_PATH_MTU | VRNIC_QP_ATTR_DEST_QPN |
				   VRNIC_QP_ATTR_RQ_PSN |
				   VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC, at), 0);
		ASSERT_EQ(n.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV |
				   VRNIC_QP_ATTR_PATH_MTU | VRNIC_QP_ATTR_DEST_QPN |
				   VRNIC_QP_ATTR_RQ_PSN, at), 0);
		at.state = VRNIC_QPS_RTS;
		at.sq_psn = sq_psn;
		ASSERT_EQ(n.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_SQ_PSN, at), 0);
	}
};

TEST_F(Uc, SendAndWriteWithoutAcknowledgements)
{
	connect();
	b.post_recv(1, {b.sge(0x10000, 4096)});
	a.post_send(send_wqe(1), {a.sge(0, 1000)});
	auto w = send_wqe(2, VRNIC_WR_RDMA_WRITE_IMM);
	w.remote_addr = Node::kIova + 0x20000;
	w.rkey = b.mr;
	w.imm_data = 77;
	b.post_recv(2, {});
	a.post_send(w, {a.sge(0x3000, 3000)});
	const auto sent = wire.completions(a, b, a, 2);
	ASSERT_EQ(sent.size(), 2u);
	EXPECT_EQ(sent[1].status, VRNIC_WC_ST_SUCCESS);
	const auto got = wire.completions(a, b, b, 2);
	ASSERT_EQ(got.size(), 2u);
	EXPECT_EQ(got[0].byte_len, 1000u);
	EXPECT_EQ(got[1].opcode, VRNIC_WC_RECV_RDMA_WITH_IMM);
	EXPECT_EQ(std::memcmp(b.data(0x10000), a.data(0), 1000), 0);
	EXPECT_EQ(std::memcmp(b.data(0x20000), a.data(0x3000), 3000), 0);
	// Nothing came back: no ACKs on UC.
	EXPECT_EQ(a.counters().rcvd_pkts, 0u);

	// READ is not a UC operation.
	auto r = send_wqe(3, VRNIC_WR_RDMA_READ);
	a.post_send(r, {a.sge(0, 8)});
	const auto err = wire.completions(a, b, a, 1);
	ASSERT_EQ(err.size(), 1u);
	EXPECT_EQ(err[0].status, VRNIC_WC_ST_LOC_QP_OP_ERR);
}

TEST_F(Uc, LossDropsWholeMessagesAndNeverCorruptsOne)
{
	connect();
	wire.drop = 0.05;
	constexpr int kMsgs = 200;
	constexpr uint32_t kLen = 1000;	// 4 packets at MTU 256
	for (int i = 0; i < kMsgs; i++)
		b.post_recv(uint64_t(i), {b.sge(0x10000 + uint64_t(i) * 4096, kLen)});
	for (int i = 0; i < kMsgs; i++) {
		a.post_send(send_wqe(uint64_t(i)), {a.sge(uint64_t(i) * 64, kLen)});
		ASSERT_EQ(wire.completions(a, b, a, 1).size(), 1u) << i;
	}
	std::vector<vrnic_cqe> got;
	vrnic_cqe c;
	wire.run(a, b, [] { return false; }, 1000);
	while (b.poll_cq(c))
		got.push_back(c);
	EXPECT_GT(got.size(), size_t(kMsgs) / 2);
	EXPECT_LT(got.size(), size_t(kMsgs));
	EXPECT_GT(b.counters().uc_dropped + b.counters().out_of_seq_request, 0u);
	// Receive WQEs are consumed in order, each holding one whole message
	// (the one sent as message k, for some k at or after it).
	for (size_t i = 0; i < got.size(); i++) {
		ASSERT_EQ(got[i].status, VRNIC_WC_ST_SUCCESS);
		ASSERT_EQ(got[i].byte_len, kLen);
		ASSERT_EQ(got[i].wr_id, i);
		bool match = false;
		for (int k = int(i); k < kMsgs && !match; k++)
			match = std::memcmp(b.data(0x10000 + i * 4096),
					    a.data(uint64_t(k) * 64), kLen) == 0;
		EXPECT_TRUE(match) << "receive " << i << " holds a torn message";
	}
}

// ------------------------------------------------------------------ SRQ

namespace {
constexpr uint64_t kSrqRing = Node::B + 0x44000, kSrqDb = Node::B + 0x40200;
} // namespace

TEST(Srq, QpTakesReceivesFromItsSrqAndTheLimitFiresOnce)
{
	Node a{1}, b{2};
	Wire wire;
	const uint32_t srqn = b.create_srq(kSrqRing, kSrqDb);

	// A second RC QP on b, receiving from the SRQ (b's first QP idles).
	vrnic_admin_cmd c = b.srq_qp_cmd(srqn + 1);	// no such SRQ
	EXPECT_EQ(b.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	b.qp = b.admin_ok(b.srq_qp_cmd(srqn));
	a.connect(b, 3, 10, 20);
	b.connect(a, 3, 20, 10);

	// 8 WQEs; arm the limit at 4.
	b.post_srq(kSrqRing, kSrqDb, 8, 100, 0x10000);
	c = {};
	c.opcode = VRNIC_ADMIN_MODIFY_SRQ;
	c.modify_srq.srqn = srqn;
	c.modify_srq.limit = 17;	// deeper than the SRQ
	EXPECT_EQ(b.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.modify_srq.limit = 4;
	b.admin_ok(c);
	// Destroying an SRQ in use is refused.
	c = {};
	c.opcode = VRNIC_ADMIN_DESTROY_SRQ;
	c.destroy.id = srqn;
	EXPECT_EQ(b.p.admin(c).status, VRNIC_ADMIN_ST_BUSY);

	vrnic_send_wqe w{};
	w.opcode = VRNIC_WR_SEND;
	w.flags = VRNIC_WQE_SIGNALED;
	for (uint32_t i = 0; i < 6; i++) {
		w.wr_id = i;
		a.post_send(w, {a.sge(i * 100, 1000 + i)});
	}
	std::vector<vrnic_cqe> got;
	wire.run(a, b, [&] {
		vrnic_cqe e;
		while (b.poll_cq(e))
			got.push_back(e);
		return got.size() >= 6;
	});
	ASSERT_EQ(got.size(), 6u);
	for (uint32_t i = 0; i < 6; i++) {
		EXPECT_EQ(got[i].wr_id, 100u + i);
		EXPECT_EQ(got[i].wqe_idx, i);
		EXPECT_EQ(got[i].byte_len, 1000u + i);
		EXPECT_EQ(std::memcmp(b.data(0x10000 + i * 0x1000), a.data(i * 100),
				      1000 + i), 0);
	}
	// The device's consumer index, and one limit event (at 3 left).
	EXPECT_EQ(b.p.load<uint32_t>(kSrqDb + 4), 6u);
	EXPECT_EQ(b.counters().srq_limit_events, 1u);
}

TEST(Srq, AnSrqQpInErrorReportsLastWqeReachedOnce)
{
	Node a{1}, b{2};
	Wire wire;
	b.qp = b.admin_ok(b.srq_qp_cmd(b.create_srq(kSrqRing, kSrqDb)));
	a.connect(b, 3, 10, 20);
	b.connect(a, 3, 20, 10);
	b.post_srq(kSrqRing, kSrqDb, 2, 100, 0x10000);
	vrnic_send_wqe w{};
	w.opcode = VRNIC_WR_SEND;
	w.flags = VRNIC_WQE_SIGNALED;
	a.post_send(w, {a.sge(0, 100)});
	ASSERT_EQ(wire.completions(a, b, b, 1).size(), 1u);
	b.p.drain_aeq();

	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_ERR;
	ASSERT_EQ(b.modify(VRNIC_QP_ATTR_STATE, at), 0);
	b.p.run();
	auto count = [&b] {
		unsigned n = 0;
		for (const auto &e : b.p.drain_aeq())
			if (e.type == VRNIC_EQE_QP_LAST_WQE && e.id == b.qp)
				n++;
		return n;
	};
	EXPECT_EQ(count(), 1u);
	// Nothing more is taken from the SRQ, and the event is not repeated.
	a.post_send(w, {a.sge(0, 100)});
	wire.run(a, b, [] { return false; }, 2000);
	EXPECT_EQ(count(), 0u);
	EXPECT_EQ(b.p.load<uint32_t>(kSrqDb + 4), 1u);
}

// ------------------------------------------------------------ multicast

namespace {

uint8_t mcast_cmd(Node &n, uint8_t opcode, const std::array<uint8_t, 16> &gid,
		  uint32_t qpn)
{
	vrnic_admin_cmd c{};
	c.opcode = opcode;
	std::memcpy(c.mcast.gid, gid.data(), 16);
	c.mcast.qpn = qpn;
	return n.p.admin(c).status;
}

// ::ffff:239.1.2.3, sent to 01:00:5e:01:02:03 with the multicast QPN.
constexpr std::array<uint8_t, 16> kGroup = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					    0xff, 0xff, 239, 1, 2, 3};

vrnic_ud_av group_av()
{
	vrnic_ud_av av{};
	av.dest_qpn = VRNIC_MCAST_QPN;
	av.qkey = kQkey;
	std::memcpy(av.dgid, kGroup.data(), 16);
	const uint8_t mac[6] = {0x01, 0x00, 0x5e, 0x01, 0x02, 0x03};
	std::memcpy(av.dmac, mac, 6);
	return av;
}

} // namespace

TEST_F(Ud, MulticastReachesAttachedQpsOnlyUntilDetached)
{
	const auto av = group_av();
	b.post_recv(1, {b.sge(0x1000, 40 + 512)});
	b.post_recv(2, {b.sge(0x2000, 40 + 512)});

	// Not attached yet: dropped.
	a.post_send(send_wqe(1), {a.sge(0x8000, 100)}, {}, &av);
	ASSERT_EQ(wire.completions(a, b, a, 1).size(), 1u);
	wire.run(a, b, [] { return false; });
	vrnic_cqe c;
	EXPECT_FALSE(b.poll_cq(c));

	ASSERT_EQ(mcast_cmd(b, VRNIC_ADMIN_ATTACH_MCAST, kGroup, b.qp),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(mcast_cmd(b, VRNIC_ADMIN_ATTACH_MCAST, kGroup, b.qp),
		  VRNIC_ADMIN_ST_OK);	// twice is once
	a.post_send(send_wqe(2), {a.sge(0x8000, 300)}, {}, &av);
	auto got = wire.completions(a, b, b, 1);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(got[0].byte_len, 40u + 300);
	EXPECT_EQ(got[0].src_qp, a.qp);
	EXPECT_EQ(std::memcmp(b.data(0x1000 + 40), a.data(0x8000), 300), 0);
	// The network header names the group as destination.
	EXPECT_EQ(std::memcmp(b.data(0x1000 + 20 + 16), kGroup.data() + 12, 4), 0);

	ASSERT_EQ(mcast_cmd(b, VRNIC_ADMIN_DETACH_MCAST, kGroup, b.qp),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(mcast_cmd(b, VRNIC_ADMIN_DETACH_MCAST, kGroup, b.qp),
		  VRNIC_ADMIN_ST_NOT_FOUND);
	a.post_send(send_wqe(3), {a.sge(0x8000, 100)}, {}, &av);
	ASSERT_EQ(wire.completions(a, b, a, 2).size(), 2u);
	wire.run(a, b, [] { return false; });
	EXPECT_FALSE(b.poll_cq(c));
}

TEST_F(Ud, MulticastLoopsBackToThisDevicesOwnMembers)
{
	const auto av = group_av();
	a.post_recv(1, {a.sge(0x1000, 40 + 512)});
	ASSERT_EQ(mcast_cmd(a, VRNIC_ADMIN_ATTACH_MCAST, kGroup, a.qp),
		  VRNIC_ADMIN_ST_OK);
	a.post_send(send_wqe(7), {a.sge(0x8000, 200)}, {}, &av);
	// One send completion and one receive, both on a's CQ; b is not in
	// the group and gets nothing.
	auto got = wire.completions(a, b, a, 2);
	ASSERT_EQ(got.size(), 2u);
	const auto &rc = got[0].opcode == VRNIC_WC_RECV ? got[0] : got[1];
	EXPECT_EQ(rc.opcode, VRNIC_WC_RECV);
	EXPECT_EQ(rc.status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(rc.byte_len, 40u + 200);
	EXPECT_EQ(rc.src_qp, a.qp);
	EXPECT_EQ(std::memcmp(a.data(0x1000 + 40), a.data(0x8000), 200), 0);
	vrnic_cqe c;
	EXPECT_FALSE(b.poll_cq(c));
}

TEST(Multicast, OnlyUdQpsAndMulticastGids)
{
	Node rc{3};
	Node ud{4, false, Node::kCqLog, VRNIC_QPT_UD};
	auto unicast = kGroup;
	unicast[12] = 10;
	EXPECT_EQ(mcast_cmd(rc, VRNIC_ADMIN_ATTACH_MCAST, kGroup, rc.qp),
		  VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(mcast_cmd(ud, VRNIC_ADMIN_ATTACH_MCAST, unicast, ud.qp),
		  VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(mcast_cmd(ud, VRNIC_ADMIN_ATTACH_MCAST, kGroup, ud.qp + 1),
		  VRNIC_ADMIN_ST_BAD_PARAM);
	std::array<uint8_t, 16> v6{0xff, 0x0e};
	EXPECT_EQ(mcast_cmd(ud, VRNIC_ADMIN_ATTACH_MCAST, v6, ud.qp),
		  VRNIC_ADMIN_ST_OK);
}

// Review F4: SET_MAC moves the address RoCE loopback compares with (the
// engine kept a copy of the permanent one).  After a MAC change, a frame
// to the new address loops back and one to the old address leaves.
TEST_F(Ud, SetMacMovesTheRoceLoopbackAddress)
{
	const std::array<uint8_t, 6> mac2 = {0x02, 0x00, 0x00, 0xab, 0xcd, 0xef};
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_MAC;
	std::memcpy(c.set_mac.mac, mac2.data(), 6);
	ASSERT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(a.set_gid(Node::kGid4, a.gid(), mac2), VRNIC_ADMIN_ST_OK);
	a.post_recv(1, {a.sge(0x1000, 40 + 512)});

	auto av = a.av(kQkey);
	std::memcpy(av.dmac, mac2.data(), 6);
	a.post_send(send_wqe(1), {a.sge(0x8000, 100)}, {}, &av);
	run_alone(a);
	EXPECT_TRUE(a.p.frames.empty()) << "a frame to the station address left";
	vrnic_cqe e{};
	int recvs = 0;
	while (a.poll_cq(e))
		recvs += e.opcode == VRNIC_WC_RECV && e.status == VRNIC_WC_ST_SUCCESS;
	EXPECT_EQ(recvs, 1) << "not looped back";

	const auto old = a.mac();
	std::memcpy(av.dmac, old.data(), 6);
	a.post_send(send_wqe(2), {a.sge(0x8000, 100)}, {}, &av);
	run_alone(a);
	EXPECT_EQ(a.p.frames.size(), 1u) << "a frame to the old address was swallowed";
}

namespace {

// n - 1 more UD QPs on b beside its own, all attached to kGroup, with no
// receive WQEs (each copy is counted in ud_no_recv).
void attach_many(Node &b, unsigned n)
{
	const uint32_t first = b.qp;
	ASSERT_EQ(mcast_cmd(b, VRNIC_ADMIN_ATTACH_MCAST, kGroup, b.qp), VRNIC_ADMIN_ST_OK);
	for (unsigned i = 1; i < n; i++) {
		vrnic_admin_cmd c{};
		c.opcode = VRNIC_ADMIN_CREATE_QP;
		c.create_qp.type = VRNIC_QPT_UD;
		c.create_qp.sq_base = Node::B + 0xa0000;	// shared, never used
		c.create_qp.rq_base = Node::B + 0xc0000;	// empty: no WQEs
		c.create_qp.dbrec = Node::B + 0x40400;
		c.create_qp.pdn = b.pd;
		c.create_qp.send_cqn = c.create_qp.recv_cqn = b.cq;
		c.create_qp.sq_log_depth = c.create_qp.rq_log_depth = 4;
		c.create_qp.sq_wqe_shift = Node::kSqShift;
		c.create_qp.rq_wqe_shift = Node::kRqShift;
		b.qp = b.admin_ok(c);
		b.ud_ready(kQkey, 20);
		ASSERT_EQ(mcast_cmd(b, VRNIC_ADMIN_ATTACH_MCAST, kGroup, b.qp),
			  VRNIC_ADMIN_ST_OK);
	}
	b.qp = first;
}

// kFrames multicast frames from a, received by b (not yet fanned out).
void multicast_to(Node &a, Node &b, unsigned frames)
{
	const auto av = group_av();
	for (unsigned i = 0; i < frames; i++)
		a.post_send(send_wqe(i), {a.sge(0x8000, 100)}, {}, &av);
	run_alone(a);
	ASSERT_EQ(a.p.frames.size(), frames);
	for (const auto &f : a.p.frames)
		vrnic_engine_receive(b.p.eng, f.data(), f.size());
	a.p.frames.clear();
}

} // namespace

// Review F3: a multicast frame's copies count against the poll's budget.
// 64 attached QPs and 16 frames were 1024 deliveries inside the calls
// that received the frames; now a poll makes at most half its budget of
// them and the rest follow in the next polls.
TEST_F(Ud, MulticastFanOutIsBoundedPerPoll)
{
	constexpr unsigned kQps = 64, kFrames = 16;
	attach_many(b, kQps);
	multicast_to(a, b, kFrames);
	const auto &cnt = b.counters();
	EXPECT_EQ(cnt.ud_no_recv, 0u) << "copies made inside vrnic_engine_receive()";
	vrnic_engine_poll(b.p.eng);
	EXPECT_GT(cnt.ud_no_recv, 0u);
	EXPECT_LE(cnt.ud_no_recv, vrnic::Rdma::kPktBudget / 2) << "copies made by one poll";
	run_alone(b);
	EXPECT_EQ(cnt.ud_no_recv, uint64_t(kQps) * kFrames);
}

// The cold review of F3: with the fan-out first in every poll and free to
// use the whole budget, a stream of multicast frames kept every QP from
// sending.  The QPs keep at least half of each poll.
TEST_F(Ud, MulticastFanOutLeavesTheQpsTheirShare)
{
	attach_many(b, 64);
	multicast_to(a, b, 64);	// 4096 copies: 32 polls' worth
	const auto av = a.av(kQkey);
	b.post_send(send_wqe(99), {b.sge(0x8000, 100)}, {}, &av);
	vrnic_engine_poll(b.p.eng);
	EXPECT_EQ(b.p.frames.size(), 1u) << "the unicast send waited for the fan-out";
}

// SPDX-License-Identifier: GPL-2.0-or-later
// The device owns the GID table (spec 0.6): SET_GID, and address vectors
// that name an entry instead of carrying a source GID or MAC.
#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"

namespace {

constexpr uint32_t kQkey = 0x11223344;
const std::array<uint8_t, 16> kOtherIp = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
					  10, 20, 30, 40};
const std::array<uint8_t, 6> kOtherMac = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};


uint8_t qp_state(const Node &n)
{
	const auto *q = n.p.eng->dev.rdma().qp(n.qp);
	return q ? q->attr.state : 0xff;
}

vrnic_admin_cmd set_gid_cmd(uint8_t index, const std::array<uint8_t, 16> &g,
			    const std::array<uint8_t, 6> &mac)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_GID;
	c.set_gid.index = index;
	c.set_gid.op = VRNIC_GID_OP_SET;
	std::memcpy(c.set_gid.gid, g.data(), 16);
	std::memcpy(c.set_gid.smac, mac.data(), 6);
	c.set_gid.vlan_id = VRNIC_VLAN_NONE;
	c.set_gid.type = VRNIC_GID_TYPE_ROCE_V2_IPV4;
	return c;
}

struct GidUd : ::testing::Test {
	Node a{1, false, Node::kCqLog, VRNIC_QPT_UD};
	Node b{2, false, Node::kCqLog, VRNIC_QPT_UD};
	Wire wire;

	void SetUp() override
	{
		a.ud_ready(kQkey, 10);
		b.ud_ready(kQkey, 20);
	}
	// A UD send from a naming sgid_index; forge: with a source GID in
	// the bytes that carried one before spec 0.6 (reserved since).
	void send(uint8_t sgid_index, const std::array<uint8_t, 16> &dgid,
		  bool forge = false, uint8_t rsvd = 0)
	{
		auto av = b.av(kQkey);
		std::memcpy(av.dgid, dgid.data(), 16);
		av.sgid_index = sgid_index;
		const uint8_t forged[15] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
					    1, 2, 3, 4};
		if (forge)
			std::memcpy(av.rsvd_sgid, forged, sizeof(forged));
		av.rsvd[9] = rsvd;
		a.post_send(send_wqe(7), {a.sge(0x8000, 64)}, {}, &av);
		run_alone(a);
	}
	void expect_refused(uint64_t bad_before)
	{
		EXPECT_TRUE(a.p.frames.empty()) << "no frame may leave";
		vrnic_cqe c{};
		ASSERT_TRUE(a.poll_cq(c));
		EXPECT_EQ(c.wr_id, 7u);
		EXPECT_EQ(c.status, VRNIC_WC_ST_LOC_QP_OP_ERR);
		EXPECT_EQ(qp_state(a), VRNIC_QPS_ERR);
		EXPECT_EQ(a.counters().bad_sgid, bad_before + 1);
	}
};

} // namespace

TEST(Gid, TableIsProgrammedAndChecked)
{
	Node n{1};
	// Reported in the device attributes.
	vrnic_admin_cmd q{};
	q.opcode = VRNIC_ADMIN_QUERY_DEVICE;
	q.query.out_addr = Node::kAttr;
	q.query.out_len = sizeof(vrnic_device_attr);
	ASSERT_EQ(n.p.admin(q).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(n.p.load<vrnic_device_attr>(Node::kAttr).gid_tbl_len,
		  VRNIC_GID_TABLE_LEN);

	EXPECT_EQ(n.set_gid(VRNIC_GID_TABLE_LEN - 1, kOtherIp, kOtherMac),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(n.set_gid(VRNIC_GID_TABLE_LEN, kOtherIp, kOtherMac),
		  VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(n.set_gid(255, kOtherIp, kOtherMac), VRNIC_ADMIN_ST_BAD_PARAM);
	// A multicast or unspecified address, a zero or multicast MAC.
	auto mc = kOtherIp;
	mc[12] = 224;
	EXPECT_EQ(n.set_gid(2, mc, kOtherMac), VRNIC_ADMIN_ST_BAD_PARAM);
	std::array<uint8_t, 16> zero4{};
	zero4[10] = zero4[11] = 0xff;
	EXPECT_EQ(n.set_gid(2, zero4, kOtherMac), VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(n.set_gid(2, {}, kOtherMac), VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(n.set_gid(2, kOtherIp, {}), VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(n.set_gid(2, kOtherIp, {1, 2, 3, 4, 5, 6}),
		  VRNIC_ADMIN_ST_BAD_PARAM);
	// The type must match the GID; reserved bytes must be 0; bad op.
	auto c = set_gid_cmd(2, kOtherIp, kOtherMac);
	c.set_gid.type = VRNIC_GID_TYPE_ROCE_V2_IPV6;
	EXPECT_EQ(n.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c = set_gid_cmd(2, kOtherIp, kOtherMac);
	c.set_gid.rsvd[4] = 1;
	EXPECT_EQ(n.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c = set_gid_cmd(2, kOtherIp, kOtherMac);
	c.set_gid.op = 2;
	EXPECT_EQ(n.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	// VLANs (spec 0.7, test_vlan.cpp): a VID is taken, a bad one refused.
	EXPECT_EQ(n.set_gid(2, kOtherIp, kOtherMac, VRNIC_GID_OP_SET, 100),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(n.set_gid(2, kOtherIp, kOtherMac, VRNIC_GID_OP_SET, 4096),
		  VRNIC_ADMIN_ST_BAD_PARAM);
	// Clearing names nothing else.
	c = set_gid_cmd(2, kOtherIp, kOtherMac);
	c.set_gid.op = VRNIC_GID_OP_CLEAR;
	EXPECT_EQ(n.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(n.set_gid(VRNIC_GID_TABLE_LEN - 1, {}, {}, VRNIC_GID_OP_CLEAR),
		  VRNIC_ADMIN_ST_OK);

	// MODIFY_QP refuses an empty, out-of-range or other-family entry.
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_INIT;
	ASSERT_EQ(n.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_ACCESS, at), 0);
	at.state = VRNIC_QPS_RTR;
	at.path_mtu = 3;
	at.dest_qpn = 0x12;
	const auto dg = Node{2}.gid();
	std::memcpy(at.dgid, dg.data(), 16);
	const uint32_t mask = VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV |
			      VRNIC_QP_ATTR_PATH_MTU | VRNIC_QP_ATTR_DEST_QPN |
			      VRNIC_QP_ATTR_RQ_PSN | VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC |
			      VRNIC_QP_ATTR_MIN_RNR_TIMER;
	for (uint8_t idx : {uint8_t(VRNIC_GID_TABLE_LEN - 1),
			    uint8_t(VRNIC_GID_TABLE_LEN), uint8_t(200),
			    Node::kGid6}) {
		at.sgid_index = idx;
		EXPECT_EQ(n.modify(mask, at), VRNIC_ADMIN_ST_BAD_PARAM) << int(idx);
		EXPECT_EQ(qp_state(n), VRNIC_QPS_INIT);
	}
	at.sgid_index = Node::kGid4;
	EXPECT_EQ(n.modify(mask, at), VRNIC_ADMIN_ST_OK);
	const auto *q4 = n.p.eng->dev.rdma().qp(n.qp);
	ASSERT_NE(q4, nullptr);
	EXPECT_EQ(q4->path.sgid, n.gid());
	EXPECT_EQ(q4->path.smac, n.mac());

	// QUERY_QP reports the index, not an address.
	vrnic_admin_cmd qq{};
	qq.opcode = VRNIC_ADMIN_QUERY_QP;
	qq.query_qp.out_addr = Node::kAttr + 0x200;
	qq.query_qp.qpn = n.qp;
	ASSERT_EQ(n.p.admin(qq).status, VRNIC_ADMIN_ST_OK);
	const auto got = n.p.load<vrnic_qp_attr>(Node::kAttr + 0x200);
	EXPECT_EQ(got.sgid_index, Node::kGid4);
	for (uint8_t x : got.rsvd_av)
		EXPECT_EQ(x, 0);
}

TEST(Gid, ResetEmptiesTheTable)
{
	Node n{1, false, Node::kCqLog, VRNIC_QPT_UD};
	n.p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	n.p.aq_pi = 0;
	n.p.aeq_ci = 0;
	n.p.enable();	// the admin queue again, and everything from scratch
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_EQ;
	c.create_eq.base = Node::kEq;
	c.create_eq.log_depth = 8;
	c.create_eq.eqn = 1;
	c.create_eq.vector = 1;
	ASSERT_EQ(n.p.admin(c).status, VRNIC_ADMIN_ST_OK);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_PD;
	const auto pd = n.p.admin(c);
	ASSERT_EQ(pd.status, VRNIC_ADMIN_ST_OK);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_CQ;
	c.create_cq.base = Node::kCq;
	c.create_cq.dbrec = Node::kCqDb;
	c.create_cq.log_depth = 4;
	c.create_cq.eqn = 1;
	const auto cq = n.p.admin(c);
	ASSERT_EQ(cq.status, VRNIC_ADMIN_ST_OK);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.sq_base = Node::kSq;
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.dbrec = Node::kQpDb;
	c.create_qp.pdn = pd.result;
	c.create_qp.send_cqn = c.create_qp.recv_cqn = cq.result;
	c.create_qp.sq_log_depth = c.create_qp.rq_log_depth = 4;
	c.create_qp.sq_wqe_shift = 9;
	c.create_qp.rq_wqe_shift = 8;
	c.create_qp.type = VRNIC_QPT_RC;
	const auto qp = n.p.admin(c);
	ASSERT_EQ(qp.status, VRNIC_ADMIN_ST_OK);
	n.qp = qp.result;
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_INIT;
	ASSERT_EQ(n.modify(VRNIC_QP_ATTR_STATE, at), 0);
	at.state = VRNIC_QPS_RTR;
	at.path_mtu = 3;
	const auto dg = Node{2}.gid();
	std::memcpy(at.dgid, dg.data(), 16);
	at.sgid_index = Node::kGid4;	// was valid before the reset
	EXPECT_EQ(n.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV |
			   VRNIC_QP_ATTR_PATH_MTU | VRNIC_QP_ATTR_DEST_QPN |
			   VRNIC_QP_ATTR_RQ_PSN | VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC |
			   VRNIC_QP_ATTR_MIN_RNR_TIMER, at),
		  VRNIC_ADMIN_ST_BAD_PARAM);
}

TEST_F(GidUd, SendTakesSourceIpAndMacFromTheEntry)
{
	ASSERT_EQ(a.set_gid(3, kOtherIp, kOtherMac), VRNIC_ADMIN_ST_OK);
	send(3, b.gid());
	ASSERT_EQ(a.p.frames.size(), 1u);
	const auto &f = a.p.frames[0];
	ASSERT_GE(f.size(), 14u + 20);
	EXPECT_EQ(std::memcmp(f.data() + 6, kOtherMac.data(), 6), 0);
	EXPECT_EQ(f[12], 0x08);
	EXPECT_EQ(f[13], 0x00);		// IPv4, no VLAN tag
	EXPECT_EQ(std::memcmp(f.data() + 14 + 12, kOtherIp.data() + 12, 4), 0)
		<< "source IP is the entry's, not the WQE's";
	const auto dg = b.gid();
	EXPECT_EQ(std::memcmp(f.data() + 14 + 16, dg.data() + 12, 4), 0);
	vrnic_cqe c{};
	ASSERT_TRUE(a.poll_cq(c));
	EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(qp_state(a), VRNIC_QPS_RTS);
	EXPECT_EQ(a.counters().bad_sgid, 0u);
}

// The bytes that held the source GID before spec 0.6 are reserved: a
// WQE with anything in them is refused, even with a valid entry, so that
// they stay free for a later use.
TEST_F(GidUd, ASourceGidInTheReservedBytesIsRefused)
{
	send(Node::kGid4, b.gid(), true);
	expect_refused(0);
}

TEST_F(GidUd, AnAddressVectorWithReservedBytesSetIsRefused)
{
	send(Node::kGid4, b.gid(), false, 1);
	EXPECT_TRUE(a.p.frames.empty()) << "no frame may leave";
	vrnic_cqe c{};
	ASSERT_TRUE(a.poll_cq(c));
	EXPECT_EQ(c.status, VRNIC_WC_ST_LOC_QP_OP_ERR);
	EXPECT_EQ(qp_state(a), VRNIC_QPS_ERR);
}

TEST_F(GidUd, EmptyEntryErrorsTheWqeAndTheQp)
{
	send(7, b.gid());	// never programmed
	expect_refused(0);
}

TEST_F(GidUd, OutOfRangeEntryErrorsTheWqeAndTheQp)
{
	send(VRNIC_GID_TABLE_LEN, b.gid());
	expect_refused(0);
}

TEST_F(GidUd, OtherFamilyEntryErrorsTheWqeAndTheQp)
{
	send(Node::kGid6, b.gid());	// IPv6 source, IPv4 destination
	expect_refused(0);
}

TEST_F(GidUd, ClearedEntryErrorsTheNextWqe)
{
	ASSERT_EQ(a.set_gid(Node::kGid4, {}, {}, VRNIC_GID_OP_CLEAR),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(qp_state(a), VRNIC_QPS_RTS);	// UD QPs name no entry
	send(Node::kGid4, b.gid());
	expect_refused(0);
}

TEST_F(GidUd, Ipv6EntryWorks)
{
	b.post_recv(1, {b.sge(0x1000, 40 + 64)});
	auto av = b.av(kQkey);
	const auto dg = b.gid6();
	std::memcpy(av.dgid, dg.data(), 16);
	av.sgid_index = Node::kGid6;
	a.post_send(send_wqe(7), {a.sge(0x8000, 64)}, {}, &av);
	const auto sent = wire.completions(a, b, a, 1);
	ASSERT_EQ(sent.size(), 1u);
	EXPECT_EQ(sent[0].status, VRNIC_WC_ST_SUCCESS);
	const auto got = wire.completions(a, b, b, 1);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(got[0].wc_flags, VRNIC_CQE_GRH);	// IPv6
	// The GRH is the IPv6 header: source a's IPv6 GID, destination b's.
	const auto sg = a.gid6();
	EXPECT_EQ(std::memcmp(b.data(0x1000) + 8, sg.data(), 16), 0);
	EXPECT_EQ(std::memcmp(b.data(0x1000) + 24, dg.data(), 16), 0);
	EXPECT_EQ(std::memcmp(b.data(0x1000 + 40), a.data(0x8000), 64), 0);
}

TEST(GidRc, ClearingAnEntryInUseErrorsItsQps)
{
	Node a{1}, b{2};
	Wire wire;
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	a.p.drain_aeq();
	// Rewriting the same entry changes nothing.
	ASSERT_EQ(a.set_gid(Node::kGid4, a.gid(), a.mac()), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(qp_state(a), VRNIC_QPS_RTS);
	// Another entry changes nothing either.
	ASSERT_EQ(a.set_gid(Node::kGid6, {}, {}, VRNIC_GID_OP_CLEAR),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(qp_state(a), VRNIC_QPS_RTS);
	// The QP's own: ERR, with a QP_FATAL event.
	ASSERT_EQ(a.set_gid(Node::kGid4, {}, {}, VRNIC_GID_OP_CLEAR),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(qp_state(a), VRNIC_QPS_ERR);
	bool fatal = false;
	for (const auto &e : a.p.drain_aeq())
		fatal |= e.type == VRNIC_EQE_QP_FATAL && e.id == a.qp;
	EXPECT_TRUE(fatal);
	EXPECT_EQ(qp_state(b), VRNIC_QPS_RTS);
}

TEST(GidRc, Ipv6PathUsesTheEntry)
{
	Node a{1}, b{2};
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_INIT;
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), 0);
	at.state = VRNIC_QPS_RTR;
	at.path_mtu = 3;
	at.dest_qpn = b.qp;
	const auto dg = b.gid6();
	std::memcpy(at.dgid, dg.data(), 16);
	at.sgid_index = Node::kGid6;
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV |
			   VRNIC_QP_ATTR_PATH_MTU | VRNIC_QP_ATTR_DEST_QPN |
			   VRNIC_QP_ATTR_RQ_PSN | VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC |
			   VRNIC_QP_ATTR_MIN_RNR_TIMER, at),
		  VRNIC_ADMIN_ST_OK);
	const auto *q = a.p.eng->dev.rdma().qp(a.qp);
	ASSERT_NE(q, nullptr);
	EXPECT_TRUE(q->path.ipv6);
	EXPECT_EQ(q->path.sgid, a.gid6());
	EXPECT_EQ(q->path.smac, a.mac());
}

// MODIFY_QP: the reserved bytes of the address vector (source GID and
// source MAC before spec 0.6) must be 0.
TEST(GidRc, ReservedAddressVectorBytesAreBadParam)
{
	Node a{1}, b{2};
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_INIT;
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), 0);
	at.state = VRNIC_QPS_RTR;
	at.path_mtu = 3;
	at.dest_qpn = b.qp;
	const auto dg = b.gid();
	std::memcpy(at.dgid, dg.data(), 16);
	at.sgid_index = Node::kGid4;
	const auto dm = b.mac();
	std::memcpy(at.dmac, dm.data(), 6);
	const uint32_t mask = VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV | VRNIC_QP_ATTR_PATH_MTU |
			      VRNIC_QP_ATTR_DEST_QPN | VRNIC_QP_ATTR_RQ_PSN |
			      VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC | VRNIC_QP_ATTR_MIN_RNR_TIMER;
	at.rsvd_av[14] = 1;
	EXPECT_EQ(a.modify(mask, at), VRNIC_ADMIN_ST_BAD_PARAM);
	at.rsvd_av[14] = 0;
	at.rsvd_smac[0] = 0x52;
	EXPECT_EQ(a.modify(mask, at), VRNIC_ADMIN_ST_BAD_PARAM);
	at.rsvd_smac[0] = 0;
	EXPECT_EQ(a.modify(mask, at), VRNIC_ADMIN_ST_OK);
}

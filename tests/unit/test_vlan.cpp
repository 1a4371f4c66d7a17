// SPDX-License-Identifier: GPL-2.0-or-later
// 802.1Q VLANs (spec 0.7): a GID entry with a VLAN ID has the device tag
// the frames sent from it, and a received RoCE frame must carry the VLAN
// of a GID entry holding its destination.
#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"

namespace {

constexpr uint32_t kQkey = 0x11223344;
constexpr uint8_t kVlanGid = 3;		// the entries these tests program

// The node's address on VLAN 10's subnet: ::ffff:10.20.0.<id>.
std::array<uint8_t, 16> vlan_ip(const Node &n)
{
	return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 20, 0, n.id};
}


uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

struct VlanUd : ::testing::Test {
	Node a{1, false, Node::kCqLog, VRNIC_QPT_UD};
	Node b{2, false, Node::kCqLog, VRNIC_QPT_UD};
	Wire wire;

	void SetUp() override
	{
		a.ud_ready(kQkey, 10);
		b.ud_ready(kQkey, 20);
	}
	// b's entry for its VLAN address, on VLAN vlan_b.
	void program(uint16_t vlan_a, uint16_t vlan_b)
	{
		ASSERT_EQ(a.set_gid(kVlanGid, vlan_ip(a), a.mac(),
				    VRNIC_GID_OP_SET, vlan_a),
			  VRNIC_ADMIN_ST_OK);
		ASSERT_EQ(b.set_gid(kVlanGid, vlan_ip(b), b.mac(),
				    VRNIC_GID_OP_SET, vlan_b),
			  VRNIC_ADMIN_ST_OK);
	}
	// A 64-byte UD send from a's entry sgid_index to b's VLAN address.
	void send(uint8_t sgid_index, uint8_t traffic_class = 0)
	{
		auto av = b.av(kQkey);
		const auto dg = vlan_ip(b);
		std::memcpy(av.dgid, dg.data(), 16);
		av.sgid_index = sgid_index;
		av.traffic_class = traffic_class;
		for (int i = 0; i < 64; i++)
			*a.data(0x8000 + i) = uint8_t(i * 7);
		a.post_send(send_wqe(7), {a.sge(0x8000, 64)}, {}, &av);
		run_alone(a);
	}
};

} // namespace

TEST(Vlan, EntryVlanIdsAreChecked)
{
	Node n{1};
	const auto g = vlan_ip(n);
	for (uint16_t v : {1, 10, 4094})
		EXPECT_EQ(n.set_gid(kVlanGid, g, n.mac(), VRNIC_GID_OP_SET, v),
			  VRNIC_ADMIN_ST_OK) << v;
	// VID 0 is a priority tag, 4095 reserved; above is no VID.
	for (uint16_t v : {0, 4095, 4096, 0x8000})
		EXPECT_EQ(n.set_gid(kVlanGid, g, n.mac(), VRNIC_GID_OP_SET, v),
			  VRNIC_ADMIN_ST_BAD_PARAM) << v;
}

// The codec: a tagged frame parses, with its VLAN and PCP, and its ICRC
// is that of the same frame untagged (the ICRC covers no L2 header).
TEST(Vlan, TaggedFrameRoundTripsAndKeepsTheIcrc)
{
	using namespace vrnic::roce;
	for (bool ipv6 : {false, true}) {
		Path p;
		p.ipv6 = ipv6;
		p.sgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 20, 0, 1};
		p.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 20, 0, 2};
		if (ipv6)
			p.sgid[0] = p.dgid[0] = 0xfe;
		p.traffic_class = 0xa0;		// PCP 5
		Headers h;
		h.opcode = SEND_ONLY;
		h.dqpn = 0x42;
		h.psn = 7;
		std::vector<uint8_t> frames[2];
		for (int tagged = 0; tagged < 2; tagged++) {
			p.vlan = tagged ? 10 : kNoVlan;
			auto &f = frames[tagged];
			f.assign(kMaxFrame, 0);
			const size_t hl = build_headers(f.data(), p, h);
			EXPECT_EQ(hl, header_len(p, RC, SEND_ONLY));
			for (size_t i = 0; i < 33; i++)
				f[hl + i] = uint8_t(i);
			f.resize(finish(f.data(), p, hl, 33));
			Packet pkt;
			ASSERT_EQ(parse(f, pkt), ParseResult::Ok);
			EXPECT_EQ(pkt.path.vlan, p.vlan);
			EXPECT_EQ(pkt.payload.size(), 33u);
			EXPECT_EQ(pkt.payload[32], 32);
			EXPECT_EQ(pkt.l3.size(), ipv6 ? kIp6Len : kIp4Len);
			EXPECT_EQ(pkt.l3[0] >> 4, ipv6 ? 6 : 4);
			if (tagged) {
				EXPECT_EQ(be16(f.data() + 12), 0x8100);
				EXPECT_EQ(be16(f.data() + 14), 5 << 13 | 10);
				EXPECT_EQ(be16(f.data() + 16), ipv6 ? 0x86dd : 0x0800);
				EXPECT_EQ(pkt.path.pcp, 5);
			}
		}
		ASSERT_EQ(frames[1].size(), frames[0].size() + kVlanLen);
		EXPECT_EQ(std::memcmp(frames[1].data() + frames[1].size() - 4,
				      frames[0].data() + frames[0].size() - 4, 4),
			  0) << "the tag must not change the ICRC";
		// A priority tag (VID 0) is no VLAN.
		auto f = frames[1];
		f[14] = 0xa0;
		f[15] = 0;
		Packet pkt;
		ASSERT_EQ(parse(f, pkt), ParseResult::Ok);
		EXPECT_EQ(pkt.path.vlan, kNoVlan);
	}
}

TEST_F(VlanUd, SendFromAVlanEntryIsTaggedAndReceived)
{
	program(10, 10);
	b.post_recv(1, {b.sge(0x1000, 40 + 64)});
	send(kVlanGid, 0x60);	// PCP 3
	ASSERT_EQ(a.p.frames.size(), 1u);
	const auto f = a.p.frames[0];
	ASSERT_GE(f.size(), 18u + 20);
	EXPECT_EQ(be16(f.data() + 12), 0x8100);
	EXPECT_EQ(be16(f.data() + 14), 3 << 13 | 10);
	EXPECT_EQ(be16(f.data() + 16), 0x0800);
	EXPECT_EQ(std::memcmp(f.data() + 6, a.mac().data(), 6), 0);
	EXPECT_EQ(std::memcmp(f.data() + 18 + 12, vlan_ip(a).data() + 12, 4), 0);
	const auto got = wire.completions(a, b, b, 1);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_SUCCESS);
	// The VLAN is reported (ib_mad needs it to answer on the VLAN).
	EXPECT_EQ(got[0].wc_flags, VRNIC_CQE_GRH | VRNIC_CQE_NET_IPV4 |
				   VRNIC_CQE_WITH_VLAN);
	EXPECT_EQ(got[0].imm_data, 10u);
	// The GRH carries the IPv4 header (last 20 bytes), then the data.
	EXPECT_EQ(std::memcmp(b.data(0x1000) + 20 + 12, vlan_ip(a).data() + 12, 4), 0);
	EXPECT_EQ(std::memcmp(b.data(0x1000 + 40), a.data(0x8000), 64), 0);
	EXPECT_EQ(b.counters().vlan_drops, 0u);
}

TEST_F(VlanUd, UntaggedEntryStillSendsUntagged)
{
	program(10, 10);
	auto av = b.av(kQkey);
	av.sgid_index = Node::kGid4;
	a.post_send(send_wqe(7), {a.sge(0x8000, 64)}, {}, &av);
	run_alone(a);
	ASSERT_EQ(a.p.frames.size(), 1u);
	EXPECT_EQ(be16(a.p.frames[0].data() + 12), 0x0800);
}

TEST_F(VlanUd, FrameOnAnotherVlanIsDroppedAndCounted)
{
	program(10, 20);	// b has its address on VLAN 20, a sends on 10
	b.post_recv(1, {b.sge(0x1000, 40 + 64)});
	send(kVlanGid);
	ASSERT_EQ(a.p.frames.size(), 1u);
	wire.run(a, b, [] { return false; });
	vrnic_cqe c{};
	EXPECT_FALSE(b.poll_cq(c)) << "nothing may arrive from another VLAN";
	EXPECT_EQ(b.counters().vlan_drops, 1u);
}

TEST_F(VlanUd, UntaggedFrameForAVlanAddressIsDropped)
{
	program(10, 10);
	b.post_recv(1, {b.sge(0x1000, 40 + 64)});
	send(Node::kGid4);	// untagged, to b's VLAN 10 address
	ASSERT_EQ(a.p.frames.size(), 1u);
	EXPECT_EQ(be16(a.p.frames[0].data() + 12), 0x0800);
	wire.run(a, b, [] { return false; });
	vrnic_cqe c{};
	EXPECT_FALSE(b.poll_cq(c));
	EXPECT_EQ(b.counters().vlan_drops, 1u);
}

// Connected QPs: the VLAN comes from the entry the address vector names,
// and the peer's frames must come on the same VLAN.
TEST(VlanRc, ConnectedTrafficIsTaggedBothWays)
{
	Node a{1}, b{2};
	Wire wire;
	ASSERT_EQ(a.set_gid(Node::kGid4, a.gid(), a.mac(), VRNIC_GID_OP_SET, 10),
		  VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(b.set_gid(Node::kGid4, b.gid(), b.mac(), VRNIC_GID_OP_SET, 10),
		  VRNIC_ADMIN_ST_OK);
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	for (int i = 0; i < 3000; i++)
		*a.data(i) = uint8_t(i * 13);
	b.post_recv(1, {b.sge(0x10000, 3000)});
	a.post_send(send_wqe(9), {a.sge(0, 3000)});
	run_alone(a);
	ASSERT_FALSE(a.p.frames.empty());
	for (const auto &f : a.p.frames) {
		EXPECT_EQ(be16(f.data() + 12), 0x8100);
		EXPECT_EQ(be16(f.data() + 14) & 0xfff, 10);
	}
	const auto got = wire.completions(a, b, b, 1);
	ASSERT_EQ(got.size(), 1u);
	EXPECT_EQ(got[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(got[0].byte_len, 3000u);
	EXPECT_EQ(std::memcmp(b.data(0x10000), a.data(0), 3000), 0);
	const auto sent = wire.completions(a, b, a, 1);	// b's ACKs, tagged
	ASSERT_EQ(sent.size(), 1u);
	EXPECT_EQ(sent[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(a.counters().vlan_drops + b.counters().vlan_drops, 0u);
}

TEST(VlanRc, PeerOnAnotherVlanIsDropped)
{
	Node a{1}, b{2};
	Wire wire;
	ASSERT_EQ(a.set_gid(Node::kGid4, a.gid(), a.mac(), VRNIC_GID_OP_SET, 10),
		  VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(b.set_gid(Node::kGid4, b.gid(), b.mac(), VRNIC_GID_OP_SET, 20),
		  VRNIC_ADMIN_ST_OK);
	a.connect(b, 3, 100, 200, 1, 1, 1);
	b.connect(a, 3, 200, 100);
	b.post_recv(1, {b.sge(0x10000, 64)});
	a.post_send(send_wqe(9), {a.sge(0, 64)});
	run_alone(a);
	ASSERT_EQ(a.p.frames.size(), 1u);
	wire.deliver(a, b);
	vrnic_cqe c{};
	EXPECT_FALSE(b.poll_cq(c));
	EXPECT_EQ(b.counters().vlan_drops, 1u);
}

// SPDX-License-Identifier: GPL-2.0-or-later
// Congestion control on the wire: CE-marked packets, the CNPs the
// notification point sends for them (IBA annex A17), and CNPs received.
#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"
#include "roce.hpp"

namespace {

using namespace vrnic::roce;

struct Congestion : ::testing::Test {
	Node a{1}, b{2};
	Wire wire;

	void connect(uint8_t tclass = 2, uint32_t psn_a = 100)	// ECT(0)
	{
		a.connect(b, 5, psn_a, 5000, 7, 7, 14, tclass);
		b.connect(a, 5, 5000, psn_a, 7, 7, 14, tclass);
	}
	// One WRITE packet of a, taken off the wire.
	std::vector<uint8_t> write_packet(uint64_t wr_id)
	{
		auto w = send_wqe(wr_id, VRNIC_WR_RDMA_WRITE,
				  Node::kIova + 0x200000, b.mr);
		a.post_send(w, {a.sge(0, 64)});
		run_alone(a);
		EXPECT_EQ(a.p.frames.size(), 1u);
		auto f = a.p.frames.back();
		a.p.frames.clear();
		return f;
	}
	// What a switch does: CE in the IPv4 ECN bits, the header checksum
	// updated (the ICRC masks the ECN bits).
	static void mark_ce(std::vector<uint8_t> &f)
	{
		f[15] |= 3;
		f[24] = f[25] = 0;
		uint32_t sum = 0;
		for (size_t i = 14; i < 34; i += 2)
			sum += uint32_t(f[i] << 8 | f[i + 1]);
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		f[24] = uint8_t(~sum >> 8);
		f[25] = uint8_t(~sum);
	}
	void deliver(Node &n, const std::vector<uint8_t> &f)
	{
		vrnic_engine_receive(n.p.eng, f.data(), f.size());
		run_alone(n);
	}
	static std::vector<std::vector<uint8_t>> cnps(Node &n)
	{
		std::vector<std::vector<uint8_t>> out;
		for (const auto &f : n.p.frames) {
			Packet p;
			if (parse(f, p) == ParseResult::Ok &&
			    p.h.transport == CNP_GROUP)
				out.push_back(f);
		}
		return out;
	}
};

TEST_F(Congestion, ACeMarkedPacketGetsACnpInAnnexA17Format)
{
	connect();
	auto f = write_packet(1);
	mark_ce(f);
	deliver(b, f);
	const auto c = cnps(b);
	ASSERT_EQ(c.size(), 1u);
	const auto &x = c[0];
	// Ethernet 14, IPv4 20, UDP 8, BTH 12, 16 reserved, ICRC 4.
	ASSERT_EQ(x.size(), 14u + 20 + 8 + 12 + 16 + 4);
	EXPECT_EQ(std::memcmp(x.data(), a.mac().data(), 6), 0);	// to a
	EXPECT_EQ(x[15], 48 << 2) << "DSCP np_cnp_dscp, Not-ECT";
	EXPECT_EQ(x[36], 0x12);
	EXPECT_EQ(x[37], 0xb7);			// UDP 4791
	const uint8_t *bth = x.data() + 42;
	EXPECT_EQ(bth[0], 0x81);
	EXPECT_EQ(bth[1], 0x00);			// SE, M, pad, TVer 0
	EXPECT_EQ(bth[2], 0xff);
	EXPECT_EQ(bth[3], 0xff);			// P_Key 0xFFFF
	EXPECT_EQ(bth[4], 0x40);			// BECN
	EXPECT_EQ(uint32_t(bth[5] << 16 | bth[6] << 8 | bth[7]), a.qp);
	for (int i = 8; i < 12 + 16; i++)
		EXPECT_EQ(bth[i], 0) << i;		// A 0, PSN 0, reserved
	Packet p;
	ASSERT_EQ(parse(x, p), ParseResult::Ok);	// the ICRC holds
	EXPECT_TRUE(p.h.becn);
	const auto &cnt = b.counters();
	EXPECT_EQ(cnt.np_ecn_marked_roce_packets, 1u);
	EXPECT_EQ(cnt.np_cnp_sent, 1u);
	// The write itself was taken as usual.
	EXPECT_EQ(b.counters().rcvd_pkts, 1u);
}

TEST_F(Congestion, AtMostOneCnpPerQpPerMinTimeBetweenCnps)
{
	connect();
	b.p.now = 1000000;
	for (int i = 0; i < 3; i++) {
		auto f = write_packet(uint64_t(i));
		mark_ce(f);
		deliver(b, f);
		b.p.now += 1000;	// 1 µs apart: within 4 µs
	}
	EXPECT_EQ(cnps(b).size(), 1u);
	b.p.now += 4000;
	auto f = write_packet(9);
	mark_ce(f);
	deliver(b, f);
	EXPECT_EQ(cnps(b).size(), 2u);
	EXPECT_EQ(b.counters().np_ecn_marked_roce_packets, 4u);
	EXPECT_EQ(b.counters().np_cnp_sent, 2u);
}

TEST_F(Congestion, UnmarkedPacketsAndDisabledPrioritiesGetNoCnp)
{
	connect();
	deliver(b, write_packet(1));		// ECT(0), not CE
	EXPECT_TRUE(cnps(b).empty());
	// Priority 0's notification point off (the packets' priority).
	auto &cc = b.p.eng->dev.rdma_for_test().cc_settings();
	cc.np_enable = 0xfe;
	cc.gen++;
	auto f = write_packet(2);
	mark_ce(f);
	deliver(b, f);
	EXPECT_TRUE(cnps(b).empty());
	EXPECT_EQ(b.counters().np_ecn_marked_roce_packets, 1u);
	EXPECT_EQ(b.counters().np_cnp_sent, 0u);
}

TEST_F(Congestion, ACnpIsTakenOnlyFromTheQpsPeer)
{
	connect();
	auto f = write_packet(1);
	mark_ce(f);
	deliver(b, f);
	auto c = cnps(b);
	ASSERT_EQ(c.size(), 1u);
	deliver(a, c[0]);
	EXPECT_EQ(a.counters().rp_cnp_handled + a.counters().rp_cnp_ignored, 1u);
	EXPECT_EQ(a.counters().bad_qp, 0u);
	// From another source address: not the peer's, ignored.
	auto forged = c[0];
	forged[29] ^= 1;			// IPv4 source
	mark_ce(forged);			// (fixes the header checksum)
	const uint32_t crc = icrc(forged, false);
	std::memcpy(forged.data() + forged.size() - 4, &crc, 4);
	deliver(a, forged);
	EXPECT_EQ(a.counters().rp_cnp_ignored + a.counters().rp_cnp_handled, 2u);
	EXPECT_EQ(a.counters().np_cnp_sent, 0u);
}

} // namespace

namespace {

using vrnic::cc::Algo;

// The reaction point: a CNP cuts the QP's rate (DCQCN with mlx5's
// defaults), its packets carry ECT(0), and the rate climbs back to
// unlimited when no CNP comes.
struct ReactionPoint : Congestion {
	void algo(Node &n, Algo a)
	{
		auto &cc = n.p.eng->dev.rdma_for_test().cc_settings();
		cc.cfg.algo = a;
		cc.gen++;
	}
	const vrnic::Qp &qp(Node &n) { return *n.p.eng->dev.rdma().qp(n.qp); }
};

TEST_F(ReactionPoint, ACnpCutsTheRateAndTheRateRecovers)
{
	algo(a, Algo::Dcqcn);
	connect(0);		// traffic class 0: ECT(0) comes from DCQCN
	auto f = write_packet(1);
	EXPECT_EQ(f[15] & 3, 2) << "DCQCN's packets are ECT(0)";
	EXPECT_EQ(qp(a).pacer.rate(), 0u) << "limited before any CNP";
	mark_ce(f);
	deliver(b, f);
	auto c = cnps(b);
	ASSERT_EQ(c.size(), 1u);
	deliver(a, c[0]);
	EXPECT_EQ(a.counters().rp_cnp_handled, 1u);
	EXPECT_EQ(a.counters().rp_cnp_ignored, 0u);
	// The first CNP: α = 1023/1024, Rc = line - line·α/2 (rp_gd 11).
	const uint64_t line = vrnic::cc::mbps_to_Bps(100000);
	const uint64_t r = qp(a).pacer.rate();
	EXPECT_GT(r, line / 2 - line / 1000);
	EXPECT_LT(r, line / 2 + line / 1000);
	EXPECT_EQ(qp(a).cc_rate_mbps, (r + 124999) / 125000);
	EXPECT_NE(qp(a).cc_at, 0u) << "no rate-increase timer";
	// No more CNPs: the timer brings the rate back up to the line rate,
	// where the QP is unlimited again.
	for (int i = 0; i < 2000 && qp(a).pacer.rate(); i++) {
		a.p.now = std::max(a.p.now, a.p.deadline);
		a.p.deadline = 0;
		vrnic_engine_timer(a.p.eng);
		run_alone(a);
	}
	EXPECT_EQ(qp(a).pacer.rate(), 0u);
	EXPECT_LT(a.p.now, 100000000u) << "took over 100 ms";
	// The write still completes.
	wire.deliver(b, a);
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
}

TEST_F(ReactionPoint, WithCcOffCnpsAreIgnoredAndPacketsKeepTheirClass)
{
	connect(0);
	auto f = write_packet(1);
	EXPECT_EQ(f[15], 0) << "Not-ECT without congestion control";
	mark_ce(f);	// (a switch would not mark Not-ECT; the NP answers CE)
	deliver(b, f);
	auto c = cnps(b);
	ASSERT_EQ(c.size(), 1u);
	deliver(a, c[0]);
	EXPECT_EQ(a.counters().rp_cnp_ignored, 1u);
	EXPECT_EQ(qp(a).pacer.rate(), 0u);
}

// Review: a CNP for a QP that no longer sends (SQE, ERR) or does not
// send yet (RTR) cuts nothing; only RTS and SQD (which drains what is
// in flight) take one.
TEST_F(ReactionPoint, ACnpForAQpThatCannotSendIsIgnored)
{
	algo(a, Algo::Dcqcn);
	connect(0);
	auto f = write_packet(1);
	mark_ce(f);
	deliver(b, f);
	auto c = cnps(b);
	ASSERT_EQ(c.size(), 1u);
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_ERR;
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
	deliver(a, c[0]);
	EXPECT_EQ(a.counters().rp_cnp_handled, 0u);
	EXPECT_EQ(a.counters().rp_cnp_ignored, 1u);
	EXPECT_EQ(qp(a).pacer.rate(), 0u);
}

// The other side of that rule: SQD still drains what is in flight, so a
// CNP for a draining QP cuts its rate as in RTS.
TEST_F(ReactionPoint, ACnpForADrainingQpInSqdIsTaken)
{
	algo(a, Algo::Dcqcn);
	connect(0);
	auto f = write_packet(1);
	mark_ce(f);
	deliver(b, f);
	auto c = cnps(b);
	ASSERT_EQ(c.size(), 1u);
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_SQD;
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(qp(a).attr.state, VRNIC_QPS_SQD);
	deliver(a, c[0]);
	EXPECT_EQ(a.counters().rp_cnp_handled, 1u);
	EXPECT_EQ(a.counters().rp_cnp_ignored, 0u);
	EXPECT_NE(qp(a).pacer.rate(), 0u);
}

TEST_F(ReactionPoint, TheRpEnableMaskSelectsPriorities)
{
	algo(a, Algo::Dcqcn);
	auto &cc = a.p.eng->dev.rdma_for_test().cc_settings();
	cc.rp_enable = uint8_t(~(1u << 3));
	cc.gen++;
	connect(106);	// priority 3: off
	auto f = write_packet(1);
	EXPECT_EQ(f[15], 106) << "the class's own ECN bits";
	EXPECT_FALSE(qp(a).cc_on);
}

// Round trips from the device's own send and ACK times, whatever the
// initial PSN (one at or above 2^23 once had every probe refused).
struct SwiftRtt : ReactionPoint, ::testing::WithParamInterface<uint32_t> {};

TEST_P(SwiftRtt, SwiftTakesRoundTripsFromAcks)
{
	algo(a, Algo::Swift);
	connect(0, GetParam());
	for (uint64_t i = 0; i < 4; i++) {
		auto w = send_wqe(i, VRNIC_WR_RDMA_WRITE, Node::kIova + 0x200000,
				  b.mr);
		a.post_send(w, {a.sge(0, 16384)});
	}
	wire.ns_per_frame = 2000;	// 2 µs a frame each way
	const auto sc = wire.completions(a, b, a, 4);
	ASSERT_EQ(sc.size(), 4u);
	EXPECT_TRUE(qp(a).cc_on);
	const auto &swift = static_cast<const vrnic::cc::Swift &>(*qp(a).rp);
	EXPECT_GT(swift.srtt_ns(), 0u) << "no round-trip sample";
	EXPECT_GT(qp(a).cc_window, 0u) << "Swift gave no window";
	EXPECT_EQ(qp(a).pacer.rate(), 0u) << "a window, not a rate, at this cwnd";
}

// Swift's window (16 packets to start) is below the 32 packets between ACK
// requests: the packet that fills it asks for one, as for a small
// send_window.  Before, a 64-packet WRITE filled Swift's window with no
// packet asking, the responder acknowledged nothing, and each window
// waited for the ack timer (67 ms).
TEST_F(ReactionPoint, ASwiftWindowIsAnsweredWithoutTheAckTimer)
{
	algo(a, Algo::Swift);
	connect(0);
	a.post_send(send_wqe(1, VRNIC_WR_RDMA_WRITE, Node::kIova + 0x200000,
			     b.mr),
		    {a.sge(0, 64 * 4096)});
	wire.ns_per_frame = 2000;
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_GT(qp(a).cc_window, 0u) << "Swift gave no window";
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
}

INSTANTIATE_TEST_SUITE_P(Psn, SwiftRtt,
			 ::testing::Values(100u, 0x7fffffu, 0x900000u, 0xfffff0u));

TEST_F(ReactionPoint, AnApplicationCannotSendCe)
{
	connect(107);	// DSCP 26 with CE
	auto f = write_packet(1);
	EXPECT_EQ(f[15], 106) << "CE from the application went out";
}

} // namespace

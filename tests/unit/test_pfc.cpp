// SPDX-License-Identifier: GPL-2.0-or-later
// PFC (802.1Qbb) and PAUSE (802.3x) on the device's port: the frames it
// honours, what it stops sending and for how long, and its counters.
#include <gtest/gtest.h>

#include "fake_platform.hpp"
#include "pfc.hpp"
#include "rdma_node.hpp"

using vrnic::PortPause;

namespace {

// A PFC frame: priorities in `enable`, every priority's time `quanta`.
std::vector<uint8_t> pfc_frame(uint8_t enable, uint16_t quanta)
{
	std::vector<uint8_t> f(60, 0);
	const uint8_t dst[6] = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
	const uint8_t src[6] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x99};
	std::memcpy(f.data(), dst, 6);
	std::memcpy(f.data() + 6, src, 6);
	f[12] = 0x88;
	f[13] = 0x08;
	f[14] = 0x01;
	f[15] = 0x01;
	f[17] = enable;
	for (unsigned p = 0; p < 8; p++) {
		f[18 + 2 * p] = uint8_t(quanta >> 8);
		f[19 + 2 * p] = uint8_t(quanta);
	}
	return f;
}

std::vector<uint8_t> pause_frame(uint16_t quanta)
{
	auto f = pfc_frame(0, 0);
	f[15] = 0x01;
	f[14] = 0x00;
	f[16] = uint8_t(quanta >> 8);
	f[17] = uint8_t(quanta);
	return f;
}

vrnic_port_stats port_stats(FakePlatform &p)
{
	return p.query<vrnic_port_stats>(VRNIC_ADMIN_QUERY_PORT_STATS);
}

void receive(FakePlatform &p, const std::vector<uint8_t> &f)
{
	EXPECT_EQ(vrnic_engine_receive(p.eng, f.data(), f.size()), f.size());
}

size_t roce_frames(const FakePlatform &p)
{
	size_t n = 0;
	for (const auto &f : p.frames)
		n += f.size() > 42 && f[12] == 0x08 && f[36] == 0x12 && f[37] == 0xb7;
	return n;
}

} // namespace

TEST(PortPause, QuantaAreTimedAtThePortSpeed)
{
	// 512 bit times: 5.12 ns at 100 Gb/s, 51.2 ns at 10 Gb/s.
	EXPECT_EQ(PortPause::quanta_ns(1, 100000), 6u);	// rounded up
	EXPECT_EQ(PortPause::quanta_ns(100, 100000), 512u);
	EXPECT_EQ(PortPause::quanta_ns(65535, 10000), 3355392u);
	EXPECT_EQ(PortPause::quanta_ns(65535, 0), PortPause::quanta_ns(65535, 100000));
	EXPECT_EQ(PortPause::quanta_ns(0, 1000), 0u);
}

TEST(PortPause, PfcPausesTheNamedPrioritiesForTheirQuanta)
{
	PortPause pp;
	auto f = pfc_frame(1u << 3 | 1u << 5, 1000);
	f[19 + 2 * 5] = 10;	// priority 5: 10 quanta only
	f[18 + 2 * 5] = 0;
	EXPECT_EQ(pp.receive(f, 1000, 10000), PortPause::Rx::Pfc);
	for (unsigned p = 0; p < 8; p++)
		EXPECT_EQ(pp.paused(p, 1000), p == 3 || p == 5) << p;
	// 1000 quanta at 10 Gb/s: 51.2 us; 10 quanta: 512 ns.
	EXPECT_EQ(pp.next_expiry(), 1000u + 512u);
	EXPECT_TRUE(pp.paused(5, 1000 + 511));
	EXPECT_FALSE(pp.paused(5, 1000 + 512));
	EXPECT_TRUE(pp.paused(3, 1000 + 51199));
	EXPECT_FALSE(pp.paused(3, 1000 + 51200));
	EXPECT_FALSE(pp.any());
	const auto c = pp.counters(100000);
	EXPECT_EQ(c.rx_pause[3], 1u);
	EXPECT_EQ(c.rx_pause[5], 1u);
	EXPECT_EQ(c.rx_pause[0], 0u);
	EXPECT_EQ(c.rx_pause_transition[3], 1u);
	EXPECT_EQ(c.rx_pause_duration_ns[3], 51200u);
	EXPECT_EQ(c.rx_pause_duration_ns[5], 512u);
}

TEST(PortPause, XonResumesAndARefreshRestartsTheTime)
{
	PortPause pp;
	pp.receive(pfc_frame(1u << 3, 1000), 0, 100000);	// 5.12 us
	pp.receive(pfc_frame(1u << 3, 1000), 4000, 100000);	// refresh
	EXPECT_TRUE(pp.paused(3, 9000));
	EXPECT_EQ(pp.next_expiry(), 4000u + 5120u);
	pp.receive(pfc_frame(1u << 3, 0), 6000, 100000);	// XON
	EXPECT_FALSE(pp.paused(3, 6000));
	EXPECT_EQ(pp.next_expiry(), 0u);
	const auto c = pp.counters(7000);
	EXPECT_EQ(c.rx_pause[3], 3u);		// every frame naming it
	EXPECT_EQ(c.rx_pause_transition[3], 1u);	// one pause
	EXPECT_EQ(c.rx_pause_duration_ns[3], 6000u);
	// A pause still on counts up to now.
	pp.receive(pfc_frame(1u << 3, 1000), 10000, 100000);
	EXPECT_EQ(pp.counters(11000).rx_pause_duration_ns[3], 7000u);
	EXPECT_EQ(pp.counters(11000).rx_pause_transition[3], 2u);
}

TEST(PortPause, PausePausesEveryPriorityAndOtherFramesPassOrAreDropped)
{
	PortPause pp;
	EXPECT_EQ(pp.receive(pause_frame(100), 0, 100000), PortPause::Rx::Pause);
	for (unsigned p = 0; p < 8; p++)
		EXPECT_TRUE(pp.paused(p, 100)) << p;

	PortPause q;
	auto f = pfc_frame(0xff, 100);
	f[15] = 0x03;	// GATE (802.3 annex 31B): not ours
	EXPECT_EQ(q.receive(f, 0, 100000), PortPause::Rx::Unknown);
	EXPECT_EQ(q.receive(std::span(f).first(15), 0, 100000),
		  PortPause::Rx::Malformed);
	auto g = pfc_frame(0xff, 100);
	EXPECT_EQ(q.receive(std::span(g).first(PortPause::kPfcLen - 1), 0, 100000),
		  PortPause::Rx::Malformed);
	EXPECT_FALSE(q.any());
	EXPECT_EQ(q.counters(0).mac_control_unknown, 1u);
	EXPECT_EQ(q.counters(0).mac_control_malformed, 2u);
	auto ip = pfc_frame(0xff, 100);
	ip[12] = 0x08;
	ip[13] = 0x00;
	EXPECT_EQ(q.receive(ip, 0, 100000), PortPause::Rx::NotControl);
	// The reserved high byte of the class-enable vector names nothing.
	auto hi = pfc_frame(0, 100);
	hi[16] = 0xff;
	EXPECT_EQ(q.receive(hi, 0, 100000), PortPause::Rx::Pfc);
	EXPECT_FALSE(q.any());
}

TEST(PortPause, FramePriorityIsPcpOrDscpOver8)
{
	std::vector<uint8_t> v4(60, 0);
	v4[12] = 0x08;
	v4[14] = 0x45;
	v4[15] = 106;		// DSCP 26, ECT(0)
	EXPECT_EQ(vrnic::frame_prio(v4), 3u);
	std::vector<uint8_t> v6(80, 0);
	v6[12] = 0x86;
	v6[13] = 0xdd;
	v6[14] = 0x60 | (184 >> 4);	// traffic class 184: DSCP 46
	v6[15] = uint8_t(184 << 4);
	EXPECT_EQ(vrnic::frame_prio(v6), 5u);
	std::vector<uint8_t> tag(64, 0);
	tag[12] = 0x81;
	tag[14] = 6 << 5;	// PCP 6
	tag[16] = 0x08;
	EXPECT_EQ(vrnic::frame_prio(tag), 6u);
	std::vector<uint8_t> arp(60, 0);
	arp[12] = 0x08;
	arp[13] = 0x06;
	EXPECT_EQ(vrnic::frame_prio(arp), 0u);
	EXPECT_EQ(vrnic::frame_prio(std::span(v4).first(15)), 0u);
}

// The transport: a QP on a paused priority sends nothing (requests, and
// the ACKs of its responder side) until the pause ends, then resumes by
// itself; a QP on another priority is not held.
struct PfcPair : ::testing::Test {
	Node a{1}, b{2};
	Wire wire;

	void connect(uint8_t tclass)
	{
		// Path MTU 4096 (code 5): one packet per 4 KiB.
		a.connect(b, 5, 100, 5000, 7, 7, 14, tclass);
		b.connect(a, 5, 5000, 100, 7, 7, 14, tclass);
	}
	void write(uint64_t wr_id, uint32_t len)
	{
		std::memset(a.data(0), 0x5a, len);
		auto w = send_wqe(wr_id, VRNIC_WR_RDMA_WRITE,
				  Node::kIova + 0x200000, b.mr);
		a.post_send(w, {a.sge(0, len)});
	}
};

TEST_F(PfcPair, APausedPrioritySendsNothingUntilThePauseEnds)
{
	connect(106);	// priority 3
	receive(a.p, pfc_frame(1u << 3, 65535));	// 335.54 us at 100 Gb/s
	const uint64_t until = a.p.now + PortPause::quanta_ns(65535, 100000);
	write(1, 8192);
	run_alone(a);
	EXPECT_EQ(roce_frames(a.p), 0u) << "sent on a paused priority";
	// The timer comes back when the pause ends (no ack timer yet: no
	// packet left).
	EXPECT_EQ(a.p.deadline, until);
	a.p.now = until;
	a.p.deadline = 0;
	vrnic_engine_timer(a.p.eng);
	run_alone(a);
	EXPECT_EQ(roce_frames(a.p), 2u);	// 8 KiB at MTU 4096
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(std::memcmp(b.data(0x200000), a.data(0), 8192), 0);
	const auto st = port_stats(a.p);
	EXPECT_EQ(st.rx_pause[3], 1u);
	EXPECT_EQ(st.rx_pause_transition[3], 1u);
	EXPECT_EQ(st.rx_pause_duration_us[3], 335u);
	EXPECT_EQ(st.rx_pause[0], 0u);
}

TEST_F(PfcPair, XonResumesAtOnce)
{
	connect(106);
	receive(a.p, pfc_frame(1u << 3, 65535));
	write(1, 4096);
	run_alone(a);
	EXPECT_EQ(roce_frames(a.p), 0u);
	a.p.now += 1000;
	const unsigned before = a.p.schedules;
	receive(a.p, pfc_frame(1u << 3, 0));
	EXPECT_GT(a.p.schedules, before) << "XON did not schedule a poll";
	run_alone(a);
	EXPECT_EQ(roce_frames(a.p), 1u);
	EXPECT_EQ(port_stats(a.p).rx_pause_duration_us[3], 1u);
}

TEST_F(PfcPair, OtherPrioritiesKeepSending)
{
	connect(0);	// priority 0
	receive(a.p, pfc_frame(0xfe, 65535));	// every priority but 0
	write(1, 4096);
	run_alone(a);
	EXPECT_EQ(roce_frames(a.p), 1u);
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
}

TEST_F(PfcPair, AcknowledgementsWaitForThePauseToo)
{
	connect(106);
	write(1, 4096);
	run_alone(a);
	ASSERT_EQ(roce_frames(a.p), 1u);
	receive(b.p, pfc_frame(1u << 3, 65535));	// b's priority 3 held
	wire.deliver(a, b);
	run_alone(b);
	EXPECT_EQ(roce_frames(b.p), 0u) << "ACK sent on a paused priority";
	EXPECT_EQ(std::memcmp(b.data(0x200000), a.data(0), 4096), 0);
	receive(b.p, pfc_frame(1u << 3, 0));
	run_alone(b);
	EXPECT_EQ(roce_frames(b.p), 1u);	// the ACK
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
}

TEST_F(PfcPair, PauseFramesNeverReachTheRxRingAndResetForgetsThem)
{
	connect(0);
	receive(a.p, pause_frame(65535));
	write(1, 4096);
	run_alone(a);
	EXPECT_EQ(roce_frames(a.p), 0u);
	EXPECT_EQ(port_stats(a.p).rx_pause[0], 1u);
	EXPECT_EQ(port_stats(a.p).rx_pause[7], 1u);
	// A device reset (the driver's recovery) forgets the pause and the
	// counters.
	a.p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	a.p.aq_pi = 0;
	a.p.enable();
	EXPECT_EQ(port_stats(a.p).rx_pause[0], 0u);
}

// The Ethernet TX ring stops at a frame of a paused priority (it is one
// queue: the frames behind it wait too) and goes on when the pause ends.
TEST(PfcEth, TxRingHoldsAtAPausedFrameAndResumes)
{
	FakePlatform p;
	p.enable();
	constexpr uint64_t kEq = FakePlatform::kMemBase + 0x10000;
	constexpr uint64_t kTx = FakePlatform::kMemBase + 0x20000;
	constexpr uint64_t kBufs = FakePlatform::kMemBase + 0x100000;
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_EQ;
	c.create_eq.base = kEq;
	c.create_eq.log_depth = 6;
	c.create_eq.eqn = 1;
	c.create_eq.vector = 1;
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_ETH_RING;
	c.create_eth_ring.base = kTx;
	c.create_eth_ring.type = VRNIC_ETH_RING_TX;
	c.create_eth_ring.log_depth = 6;
	c.create_eth_ring.eqn = 1;
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	// Frame 0: IPv4 DSCP 26 (priority 3); frame 1: DSCP 0.
	for (uint16_t i = 0; i < 2; i++) {
		std::vector<uint8_t> f(100, 0);
		f[12] = 0x08;
		f[14] = 0x45;
		f[15] = i == 0 ? 104 : 0;
		std::memcpy(p.ptr(kBufs + i * 0x1000), f.data(), f.size());
		vrnic_eth_desc d{};
		d.addr = kBufs + i * 0x1000;
		d.len = uint16_t(f.size());
		d.flags = VRNIC_ETH_DESC_EOP;
		p.store(kTx + i * sizeof(d), d);
	}
	receive(p, pfc_frame(1u << 3, 1000));	// 5.12 us
	p.db(0, VRNIC_DB_ETH_TX, 2);
	p.run();
	EXPECT_TRUE(p.frames.empty());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kTx).wb_status, 0) << "completed while held";
	EXPECT_EQ(p.deadline, 5120u);
	p.now = 5120;
	vrnic_engine_timer(p.eng);
	p.run();
	ASSERT_EQ(p.frames.size(), 2u);
	EXPECT_EQ(p.frames[0][15], 104);	// in ring order
	EXPECT_EQ(p.frames[1][15], 0);
}

// A pause of a priority nothing is sent on ends at its time: the timer
// is not armed again for the past (which would fire without end).
TEST_F(PfcPair, AnUnusedPrioritysPauseEndsQuietly)
{
	connect(0);
	receive(a.p, pfc_frame(1u << 5, 1000));	// 5.12 us
	EXPECT_EQ(a.p.deadline, 5120u);
	a.p.now = 6000;
	a.p.deadline = 0;
	vrnic_engine_timer(a.p.eng);
	run_alone(a);
	EXPECT_EQ(a.p.deadline, 0u) << "timer re-armed for an ended pause";
	EXPECT_EQ(port_stats(a.p).rx_pause_duration_us[5], 5u);
	write(1, 4096);
	run_alone(a);
	EXPECT_EQ(roce_frames(a.p), 1u);
}

// A peer that never lets go: after 8 s of pauses without a break the
// port stops honouring that priority for 8 s (mlx5's pause storm
// prevention), so a stuck or hostile switch cannot hold it forever.
TEST(PortPause, AStormIsCutOffAfterEightSeconds)
{
	PortPause pp;
	// At 10 Gb/s 65535 quanta hold 3.36 ms; a refresh every 1 ms.
	const uint64_t step = 1000000;
	uint64_t now = 1;
	for (; now < 8000000000ull; now += step) {
		pp.receive(pfc_frame(1u << 3, 65535), now, 10000);
		ASSERT_TRUE(pp.paused(3, now));
	}
	pp.receive(pfc_frame(1u << 3, 65535), now, 10000);
	EXPECT_FALSE(pp.paused(3, now)) << "still honoured after 8 s";
	EXPECT_EQ(pp.counters(now).tx_pause_storm_error_events, 1u);
	// Ignored for the next 8 s, honoured again after.
	pp.receive(pfc_frame(1u << 3, 65535), now + 4000000000ull, 10000);
	EXPECT_FALSE(pp.paused(3, now + 4000000000ull));
	pp.receive(pfc_frame(1u << 3, 65535), now + 8000000001ull, 10000);
	EXPECT_TRUE(pp.paused(3, now + 8000000001ull));
	// Other priorities were never affected; pauses with breaks longer
	// than the gap are no storm.
	PortPause q;
	for (uint64_t t = 1; t < 20000000000ull; t += 10000000) {
		q.receive(pfc_frame(1u << 3, 10000), t, 100000);	// 51 us
		EXPECT_TRUE(q.paused(3, t));
	}
	EXPECT_EQ(q.counters(0).tx_pause_storm_error_events, 0u);
	// An XON right before each refresh is no break: still a storm.
	PortPause x;
	uint64_t t = 1;
	for (; t < 8100000000ull; t += 1000000) {
		x.receive(pfc_frame(1u << 3, 0), t, 10000);
		x.receive(pfc_frame(1u << 3, 65535), t, 10000);
	}
	EXPECT_EQ(x.counters(t).tx_pause_storm_error_events, 1u);
}

// Review #4: a QP connected to a QP of the same device sends to its own
// MAC; those frames loop back and never reach the wire, so a pause of
// the wire does not hold them.
TEST(PfcLoopback, FramesToTheDevicesOwnMacAreNotHeld)
{
	Node a{1};
	Wire wire;
	a.connect(a, 5, 100, 100);	// to itself: its own MAC and GID
	receive(a.p, pfc_frame(0xff, 65535));
	std::memset(a.data(0), 0x3c, 4096);
	a.post_send(send_wqe(1, VRNIC_WR_RDMA_WRITE, Node::kIova + 0x200000, a.mr),
		    {a.sge(0, 4096)});
	run_alone(a);
	vrnic_cqe cqe;
	ASSERT_TRUE(a.poll_cq(cqe)) << "a loopback WRITE waited for the wire's pause";
	EXPECT_EQ(cqe.status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(std::memcmp(a.data(0x200000), a.data(0), 4096), 0);
	EXPECT_EQ(roce_frames(a.p), 0u);
}

// Review #5: the responder completed the message (its CQE is visible)
// while PFC held its ACK; when the QP is destroyed the ACK still leaves,
// or the requester would retry into a QP that is gone.
TEST_F(PfcPair, AnAckOwedAtDestroyLeavesDespiteThePause)
{
	connect(106);
	write(1, 4096);
	run_alone(a);
	receive(b.p, pfc_frame(1u << 3, 65535));
	wire.deliver(a, b);
	run_alone(b);
	ASSERT_EQ(roce_frames(b.p), 0u);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_DESTROY_QP;
	c.destroy.id = b.qp;
	ASSERT_EQ(b.p.admin(c).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(roce_frames(b.p), 1u) << "the owed ACK was dropped";
}

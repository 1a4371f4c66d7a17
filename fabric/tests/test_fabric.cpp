// SPDX-License-Identifier: GPL-2.0-or-later
// The switch model in simulated time: forwarding, line rate and delay,
// scheduling, the buffer, ECN, PFC, ECMP, impairments and injection.
#include "helpers.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "telemetry.hpp"

namespace vrnic::fabric::test {

namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * kUs;

std::string pair_topo(const std::string &link_to_b, const std::string &sw = "",
		      const std::string &link_a = "")
{
	return R"({"switches":[{"name":"sw0")" + (sw.empty() ? "" : "," + sw) +
	       R"(}], "hosts":[{"name":"a","switch":"sw0")" +
	       (link_a.empty() ? "" : "," + link_a) +
	       R"(},{"name":"b","switch":"sw0")" +
	       (link_to_b.empty() ? "" : "," + link_to_b) + "}]}";
}

Bytes from_to(int src, int dst, FrameSpec s = {})
{
	s.src = host_mac(src);
	s.dst = host_mac(dst);
	return roce_frame(s);
}

uint64_t drops(const QueueStats &st, Drop d)
{
	return st.drops[static_cast<size_t>(d)];
}

} // namespace

TEST(FabricSwitch, LearnsAndFloods)
{
	Sim sim(R"({"switches":[{"name":"sw0"}],"hosts":[{"name":"a","switch":"sw0"},
		{"name":"b","switch":"sw0"},{"name":"c","switch":"sw0"}]})");
	// b is unknown: flooded to b and c, never back to a.
	sim.send(0, from_to(1, 2));
	EXPECT_EQ(sim.sink.to(0).size(), 0U);
	EXPECT_EQ(sim.sink.to(1).size(), 1U);
	EXPECT_EQ(sim.sink.to(2).size(), 1U);
	// b answers: a is known now, so only a gets it.
	sim.send(1, from_to(2, 1));
	EXPECT_EQ(sim.sink.to(0).size(), 1U);
	EXPECT_EQ(sim.sink.to(2).size(), 1U);
	sim.send(0, from_to(1, 2));
	EXPECT_EQ(sim.sink.to(1).size(), 2U);
	EXPECT_EQ(sim.sink.to(2).size(), 1U);
	// The frame arrives unchanged.
	EXPECT_EQ(sim.sink.to(1).back().data, from_to(1, 2));
}

TEST(FabricSwitch, DownPortCountsDrops)
{
	Sim sim(pair_topo(""));
	sim.send(1, from_to(2, 1));	// learn b
	sim.fabric.set_host_up(1, false);
	sim.send(0, from_to(1, 2));
	EXPECT_TRUE(sim.sink.to(1).empty());
	EXPECT_EQ(drops(sim.fabric.stats("sw0", 1, 0), Drop::PortDown), 1U);
}

TEST(FabricSwitch, LineRateAndDelay)
{
	// 1 Gb/s and 10 µs towards b: 1000-byte frames leave every 8 µs.
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":1,"delay_us":10})"));
	sim.send(1, from_to(2, 1));
	for (int i = 0; i < 20; i++)
		sim.send(0, from_to(1, 2));
	sim.run_until(10 * kMs);
	const auto got = sim.sink.to(1);
	ASSERT_EQ(got.size(), 20U);
	// Each leaves when the one before has been sent, 8 µs apart; arrival
	// = departure + 8 µs serialisation + 10 µs propagation.
	for (size_t i = 0; i < got.size(); i++) {
		const uint64_t expect = 8 * kUs * i + 8 * kUs + 10 * kUs;
		EXPECT_NEAR(static_cast<double>(got[i].t), static_cast<double>(expect), 100.0) << i;
	}
}

TEST(FabricSwitch, StrictPriorityServesTheHighestFirst)
{
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":1})"));
	sim.send(1, from_to(2, 1));
	FrameSpec lo, hi;
	hi.dscp = 24;	// priority 3
	hi.psn = 1;
	for (int i = 0; i < 5; i++)
		sim.send(0, from_to(1, 2, lo));
	for (int i = 0; i < 5; i++)
		sim.send(0, from_to(1, 2, hi));
	sim.run_until(kMs);
	const auto got = sim.sink.to(1);
	ASSERT_EQ(got.size(), 10U);
	// The first low frame was already on the wire; then all five high.
	EXPECT_EQ(parse_frame(got[0].data).info.dscp, 0);
	for (size_t i = 1; i < 6; i++)
		EXPECT_EQ(parse_frame(got[i].data).info.dscp, 24) << i;
}

TEST(FabricSwitch, ClassifiesByPcp)
{
	Sim sim(pair_topo("", R"("classify":"pcp")"));
	sim.send(1, from_to(2, 1));
	FrameSpec tagged;
	tagged.vlan = true;
	tagged.pcp = 5;
	tagged.dscp = 24;	// ignored with "pcp"
	sim.send(0, from_to(1, 2, tagged));
	FrameSpec untagged;
	untagged.dscp = 24;
	sim.send(0, from_to(1, 2, untagged));
	EXPECT_EQ(sim.fabric.stats("sw0", 0, 5).rx_packets, 1U);
	EXPECT_EQ(sim.fabric.stats("sw0", 0, 0).rx_packets, 1U);
	EXPECT_EQ(sim.fabric.stats("sw0", 0, 3).rx_packets, 0U);
}

TEST(FabricSwitch, DwrrSharesByWeight)
{
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":1})",
			  R"("scheduler":"dwrr","weights":[1000,1000,1000,3000,1000,1000,1000,1000])"));
	sim.send(1, from_to(2, 1));
	FrameSpec lo, hi;
	hi.dscp = 24;
	for (int i = 0; i < 400; i++) {
		sim.send(0, from_to(1, 2, lo));
		sim.send(0, from_to(1, 2, hi));
	}
	sim.run_until(2 * kMs);	// 250 frames at 8 µs: both still backlogged
	size_t n_hi = 0, n_lo = 0;
	for (const auto &d : sim.sink.to(1))
		(parse_frame(d.data).info.dscp == 24 ? n_hi : n_lo)++;
	EXPECT_NEAR(static_cast<double>(n_hi) / static_cast<double>(n_lo), 3.0, 0.2)
		<< n_hi << " " << n_lo;
}

TEST(FabricEcn, ProbabilityFollowsKminKmaxPmax)
{
	EcnConfig c{true, 100'000, 300'000, 0.4};
	EXPECT_EQ(ecn_probability(c, 0), 0.0);
	EXPECT_EQ(ecn_probability(c, 100'000), 0.0);
	EXPECT_DOUBLE_EQ(ecn_probability(c, 200'000), 0.2);
	EXPECT_DOUBLE_EQ(ecn_probability(c, 250'000), 0.3);
	EXPECT_EQ(ecn_probability(c, 300'000), 1.0);
	EXPECT_EQ(ecn_probability(c, 1'000'000), 1.0);
	c.enabled = false;
	EXPECT_EQ(ecn_probability(c, 1'000'000), 0.0);
}

// Hold the egress towards b with a PFC pause from b, fill the queue to a
// known depth with not-ECT frames, then count the marks among ECT frames.
static double measured_mark_rate(uint64_t depth, uint64_t kmin, uint64_t kmax, double pmax,
				 uint64_t *ce_counter = nullptr)
{
	const std::string ecn = R"("b_to_a":{"ecn":{"kmin":)" + std::to_string(kmin) +
				R"(,"kmax":)" + std::to_string(kmax) + R"(,"pmax":)" +
				std::to_string(pmax) + "}}";
	Sim sim(pair_topo(ecn, R"("buffer":33554432)"));
	sim.send(1, from_to(2, 1));
	Pfc pause;
	pause.enable = 0xff;
	pause.quanta.fill(0xffff);
	sim.send(1, build_pfc(host_mac(2), pause));
	FrameSpec filler;
	filler.size = 1000;
	for (uint64_t b = 0; b + 1000 <= depth; b += 1000)
		sim.send(0, from_to(1, 2, filler));
	FrameSpec ect;
	ect.ecn = Ecn::Ect0;
	ect.size = 64;
	const int n = 4000;
	for (int i = 0; i < n; i++)
		sim.send(0, from_to(1, 2, ect));
	const QueueStats &st = sim.fabric.stats("sw0", 1, 0);
	if (ce_counter)
		*ce_counter = st.ce_marked;
	return static_cast<double>(st.ce_marked) / n;
}

TEST(FabricEcn, MarkingRateInTheSwitch)
{
	// 4000 × 64 B move the depth by 256 KB: the expected rate is the mean
	// of the probability over that span.
	EXPECT_EQ(measured_mark_rate(50'000, 1'000'000, 3'000'000, 0.5), 0.0);
	EXPECT_EQ(measured_mark_rate(3'000'000, 1'000'000, 3'000'000, 0.5), 1.0);
	const double mid = measured_mark_rate(2'000'000, 1'000'000, 3'000'000, 0.5);
	const double expect = 0.5 * (2'000'000 + 128'000 - 1'000'000) / 2'000'000.0;
	EXPECT_NEAR(mid, expect, 0.025);
}

TEST(FabricEcn, MarkedPacketsAreCeWithAValidChecksum)
{
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":1,"ecn":{"kmin":0,"kmax":1,"pmax":1}})"));
	sim.send(1, from_to(2, 1));
	FrameSpec s;
	s.ecn = Ecn::Ect0;
	FrameSpec n;	// not ECT: never marked, never dropped for it
	for (int i = 0; i < 5; i++) {
		sim.send(0, from_to(1, 2, s));
		sim.send(0, from_to(1, 2, n));
	}
	sim.run_until(kMs);
	const auto got = sim.sink.to(1);
	ASSERT_EQ(got.size(), 10U);
	int ce = 0, not_ect = 0;
	for (const auto &d : got) {
		const FrameInfo i = parse_frame(d.data).info;
		ce += i.ecn == Ecn::Ce;
		not_ect += i.ecn == Ecn::NotEct;
		EXPECT_EQ(ipv4_checksum(std::span(d.data).subspan(14, 20)), 0);
	}
	EXPECT_EQ(ce, 4);	// the first found an empty queue
	EXPECT_EQ(not_ect, 5);
	EXPECT_EQ(sim.fabric.stats("sw0", 1, 0).ce_marked, 4U);
}

namespace {

// s1, s2 -> r over a 1 Gb/s port; priority 3 lossless with static
// thresholds.
const char *kIncast = R"({"switches":[{"name":"sw0","buffer":1048576}],
	"defaults":{"pfc":{"priorities":[3],"xoff":20000,"xon":10000,"headroom":60000}},
	"hosts":[{"name":"s1","switch":"sw0"},{"name":"s2","switch":"sw0"},
		 {"name":"r","switch":"sw0","b_to_a":{"rate_gbps":1}}]})";

} // namespace

TEST(FabricPfc, XoffThenXonAndNoDrop)
{
	Sim sim(kIncast);
	sim.send(2, from_to(3, 1));
	sim.send(2, from_to(3, 2));
	FrameSpec s;
	s.dscp = 24;
	for (int i = 0; i < 50; i++) {
		sim.send(0, from_to(1, 3, s));
		sim.send(1, from_to(2, 3, s));
	}
	// Both senders got an XOFF for priority 3 with the full quanta.
	for (size_t h : {0U, 1U}) {
		const auto p = sim.sink.pfc_to(h);
		ASSERT_EQ(p.size(), 1U) << h;
		EXPECT_EQ(p[0].enable, 0x08);
		EXPECT_EQ(p[0].quanta[3], 0xffff);
		EXPECT_EQ(sim.fabric.stats("sw0", h, 3).pfc_tx, 1U);
	}
	EXPECT_TRUE(sim.sink.pfc_to(2).empty());
	sim.run_until(5 * kMs);
	// Drained: XON (quanta 0) followed, nothing was dropped.
	for (size_t h : {0U, 1U}) {
		const auto p = sim.sink.pfc_to(h);
		ASSERT_GE(p.size(), 2U);
		EXPECT_EQ(p.back().quanta[3], 0);
		for (size_t d = 0; d < static_cast<size_t>(Drop::Count); d++)
			EXPECT_EQ(sim.fabric.stats("sw0", h, 3).drops[d], 0U) << drop_name(static_cast<Drop>(d));
	}
	EXPECT_EQ(sim.sink.to(2).size(), 100U);
	EXPECT_EQ(sim.fabric.buffer_used("sw0"), 0U);
	// What arrived after XOFF went to the headroom, which is empty again.
	for (size_t h : {0U, 1U}) {
		EXPECT_GT(sim.fabric.stats("sw0", h, 3).headroom_max, 0U) << h;
		const auto c = sim.fabric.counters(sim.now);
		EXPECT_EQ(c.at("switches").at(0).at("ports").at(h).at("prio").at(3).at("headroom"), 0) << h;
	}
}

TEST(FabricPfc, XoffIsRefreshedEightTimesPerPause)
{
	// XOFF, refreshes at 42 and 84 µs, XON at about 96 µs, XOFF again at
	// 110 µs while the first chain's next refresh (126 µs) is pending;
	// then r pauses its own port so XOFF holds for 10 ms.  s1's link has
	// no rate (100 Gb/s nominal): 65535 quanta are 335.5 µs, refreshed
	// every eighth: about 240 frames, not twice that from two chains.
	Sim sim(kIncast);
	sim.send(2, from_to(3, 1));
	FrameSpec s;
	s.dscp = 24;
	for (int i = 0; i < 27; i++)
		sim.send(0, from_to(1, 3, s));
	ASSERT_EQ(sim.sink.pfc_to(0).size(), 1U);
	sim.run_until(30 * kUs);
	EXPECT_EQ(sim.sink.pfc_to(0).size(), 1U);	// the first refresh is at 42 µs
	sim.run_until(110 * kUs);
	ASSERT_EQ(sim.sink.pfc_to(0).size(), 4U);	// two refreshes, then XON
	EXPECT_EQ(sim.sink.pfc_to(0)[1].quanta[3], 0xffff);
	EXPECT_EQ(sim.sink.pfc_to(0)[2].quanta[3], 0xffff);
	EXPECT_EQ(sim.sink.pfc_to(0).back().quanta[3], 0);
	Pfc hold;
	hold.enable = 0x08;
	hold.quanta[3] = 0xffff;
	sim.send(2, build_pfc(host_mac(3), hold));
	const size_t before = sim.sink.pfc_to(0).size();
	for (int i = 0; i < 27; i++)
		sim.send(0, from_to(1, 3, s));
	ASSERT_EQ(sim.sink.pfc_to(0).size(), before + 1);	// XOFF again
	EXPECT_NE(sim.sink.pfc_to(0).back().quanta[3], 0);
	sim.run_until(sim.now + 10 * kMs);
	const auto &sent = sim.sink.pfc_to(0);
	const double refreshes = static_cast<double>(sent.size() - before - 1);
	EXPECT_NEAR(refreshes, 10.0 * kMs / (335.5 * kUs / 8), 3.0);
	for (size_t i = before; i < sent.size(); i++)
		EXPECT_EQ(sent[i].quanta[3], 0xffff) << "frame " << i;
}

TEST(FabricPfc, HeadroomOverflowDropsAndLossyTailDrops)
{
	Sim sim(kIncast);
	sim.send(2, from_to(3, 1));
	FrameSpec s;
	s.dscp = 24;
	for (int i = 0; i < 200; i++)	// a sender that ignores PFC
		sim.send(0, from_to(1, 3, s));
	const QueueStats &st = sim.fabric.stats("sw0", 0, 3);
	EXPECT_GT(drops(st, Drop::Headroom), 0U);
	// The watermark reached the headroom (within a frame) and no further.
	EXPECT_GT(st.headroom_max, 60000U - 1000U);
	EXPECT_LE(st.headroom_max, 60000U);
	const auto c = sim.fabric.counters(sim.now);
	EXPECT_EQ(c.at("switches").at(0).at("ports").at(0).at("prio").at(3).at("headroom_max"),
		  st.headroom_max);
	EXPECT_LE(sim.fabric.buffer_used("sw0"), 20000U + 60000U + 8 * 4096U + 1000U);
	// Priority 0 is lossy: the small queue_limit tail-drops instead.
	Sim lossy(pair_topo(R"("b_to_a":{"rate_gbps":1,"queue_limit":10000})"));
	lossy.send(1, from_to(2, 1));
	for (int i = 0; i < 50; i++)
		lossy.send(0, from_to(1, 2));
	EXPECT_EQ(drops(lossy.fabric.stats("sw0", 0, 0), Drop::QueueLimit), 50U - 11U);
}

TEST(FabricPfc, BufferNeverExceedsItsSize)
{
	Sim sim(R"({"switches":[{"name":"sw0","buffer":65536}],
		"hosts":[{"name":"a","switch":"sw0"},{"name":"b","switch":"sw0","b_to_a":{"rate_mbps":10}}]})");
	sim.send(1, from_to(2, 1));
	for (int i = 0; i < 1000; i++) {
		sim.send(0, from_to(1, 2));
		ASSERT_LE(sim.fabric.buffer_used("sw0"), 65536U);
	}
	EXPECT_GT(drops(sim.fabric.stats("sw0", 0, 0), Drop::Buffer), 900U);
}

TEST(FabricPfc, ReceivedPauseHoldsThePriorityForItsQuanta)
{
	// 10 Gb/s: one quantum is 512 bit times = 51.2 ns.
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":10})"));
	sim.send(1, from_to(2, 1));
	Pfc pause;
	pause.enable = 0x08;
	pause.quanta[3] = 10000;	// 512 µs
	sim.send(1, build_pfc(host_mac(2), pause));
	FrameSpec p3, p0;
	p3.dscp = 24;
	sim.send(0, from_to(1, 2, p3));
	sim.send(0, from_to(1, 2, p0));
	sim.run_until(kMs);
	auto got = sim.sink.to(1);
	ASSERT_EQ(got.size(), 2U);
	// Priority 0 is not paused and passes at once; priority 3 waits.
	EXPECT_EQ(parse_frame(got[0].data).info.dscp, 0);
	EXPECT_LT(got[0].t, 2 * kUs);
	EXPECT_NEAR(static_cast<double>(got[1].t), 512.0 * kUs + 0.8 * kUs, 2.0 * kUs);
	EXPECT_EQ(sim.fabric.stats("sw0", 1, 3).pfc_rx, 1U);
	EXPECT_NEAR(static_cast<double>(sim.fabric.paused_ns("sw0", 1, 3, sim.now)),
		    512.0 * kUs, 100.0);
	// XON ends a pause early.
	sim.send(1, build_pfc(host_mac(2), pause));
	sim.send(0, from_to(1, 2, p3));
	sim.now += 100 * kUs;
	pause.quanta[3] = 0;
	sim.send(1, build_pfc(host_mac(2), pause));
	sim.run_until(sim.now + 10 * kUs);
	got = sim.sink.to(1);
	ASSERT_EQ(got.size(), 3U);
	EXPECT_NEAR(static_cast<double>(got[2].t), static_cast<double>(sim.now - 10 * kUs), 2000.0);
}

TEST(FabricPfc, WatchdogBreaksAStuckPause)
{
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":10,"pfc":{"priorities":[3],"watchdog_ms":1,"watchdog_restore_ms":5}})"));
	sim.send(1, from_to(2, 1));
	Pfc pause;
	pause.enable = 0x08;
	pause.quanta[3] = 0xffff;	// 3.36 ms at 10 Gb/s
	FrameSpec p3;
	p3.dscp = 24;
	sim.send(1, build_pfc(host_mac(2), pause));
	sim.send(0, from_to(1, 2, p3));
	// A storm: b re-pauses every 200 µs.
	for (int i = 0; i < 20; i++) {
		sim.run_until(sim.now + 200 * kUs);
		sim.send(1, build_pfc(host_mac(2), pause));
	}
	const auto got = sim.sink.to(1);
	ASSERT_EQ(got.size(), 1U);
	EXPECT_NEAR(static_cast<double>(got[0].t), 1.0 * kMs, 210.0 * kUs);
	EXPECT_EQ(sim.fabric.stats("sw0", 1, 3).pfc_watchdog, 1U);
}

TEST(FabricPfc, PauseStormSpreadsUpstreamAcrossSwitches)
{
	// a -> sw0 -> sw1 -> b; b pauses priority 3 and never resumes: sw1's
	// queue to b fills, sw1 pauses sw0, sw0 pauses a.  Head-of-line
	// blocking: a's frames to c (on sw0, same priority from the same
	// ingress) still pass, since sw0's queue to c is not paused.
	Sim sim(R"({"switches":[{"name":"sw0"},{"name":"sw1"}],
		"defaults":{"rate_gbps":10,"pfc":{"priorities":[3],"xoff":20000,"xon":10000,"headroom":60000}},
		"hosts":[{"name":"a","switch":"sw0"},{"name":"c","switch":"sw0"},{"name":"b","switch":"sw1"}],
		"links":[{"a":"sw0","b":"sw1"}]})");
	sim.send(2, from_to(2, 1));
	sim.send(1, from_to(3, 1));
	sim.run_until(10 * kUs);
	Pfc pause;
	pause.enable = 0x08;
	pause.quanta[3] = 0xffff;
	sim.send(2, build_pfc(host_mac(2), pause));
	FrameSpec s;
	s.dscp = 24;
	for (int i = 0; i < 100; i++) {
		sim.send(0, from_to(1, 2, s));
		sim.run_until(sim.now + kUs);
	}
	sim.run_until(sim.now + 100 * kUs);
	const long sw1_up = sim.fabric.port_to("sw1", "sw0");
	const long sw0_down = sim.fabric.port_to("sw0", "sw1");
	EXPECT_GE(sim.fabric.stats("sw1", static_cast<size_t>(sw1_up), 3).pfc_tx, 1U);
	EXPECT_GE(sim.fabric.stats("sw0", static_cast<size_t>(sw0_down), 3).pfc_rx, 1U);
	EXPECT_GE(sim.fabric.stats("sw0", 0, 3).pfc_tx, 1U);
	EXPECT_GE(sim.sink.pfc_to(0).size(), 1U);
}

namespace {

const char *kLeafSpine = R"({"switches":[{"name":"leaf0","seed":11},{"name":"leaf1","seed":12},
	{"name":"spine0"},{"name":"spine1"}],
	"hosts":[{"name":"a","switch":"leaf0"},{"name":"c","switch":"leaf1"}],
	"links":[{"a":"leaf0","b":"spine0"},{"a":"leaf0","b":"spine1"},
		 {"a":"leaf1","b":"spine0"},{"a":"leaf1","b":"spine1"}]})";

}

TEST(FabricEcmp, FlowsSpreadOverSpinesAndStayOnTheirPath)
{
	Sim sim(kLeafSpine);
	sim.send(1, from_to(3, 1));	// c is known now
	const long to0 = sim.fabric.port_to("leaf0", "spine0");
	const long to1 = sim.fabric.port_to("leaf0", "spine1");
	sim.run_until(kUs);
	const uint64_t base0 = sim.fabric.stats("leaf0", static_cast<size_t>(to0), 0).tx_packets;
	const uint64_t base1 = sim.fabric.stats("leaf0", static_cast<size_t>(to1), 0).tx_packets;
	const int flows = 400;
	for (int f = 0; f < flows; f++) {
		FrameSpec s;
		s.sport = static_cast<uint16_t>(49152 + f);
		for (int k = 0; k < 3; k++)
			sim.send(0, from_to(1, 3, s));
	}
	sim.run_until(kMs);
	EXPECT_EQ(sim.sink.to(1).size(), static_cast<size_t>(3 * flows));
	// Less what c's first frame left there, flooded along the tree.
	const uint64_t n0 = sim.fabric.stats("leaf0", static_cast<size_t>(to0), 0).tx_packets - base0;
	const uint64_t n1 = sim.fabric.stats("leaf0", static_cast<size_t>(to1), 0).tx_packets - base1;
	EXPECT_EQ(n0 + n1, 3U * flows);
	EXPECT_EQ(n0 % 3, 0U);	// the three frames of a flow share a path
	EXPECT_NEAR(static_cast<double>(n0), 1.5 * flows, 0.15 * flows);
	// One flow alone takes one path only.
	Sim one(kLeafSpine);
	one.send(1, from_to(3, 1));
	one.run_until(kUs);
	const uint64_t before = one.fabric.stats("leaf0", static_cast<size_t>(to0), 0).tx_packets;
	for (int k = 0; k < 50; k++)
		one.send(0, from_to(1, 3));
	const uint64_t a = one.fabric.stats("leaf0", static_cast<size_t>(to0), 0).tx_packets - before;
	EXPECT_TRUE(a == 0 || a == 50) << a;
}

TEST(FabricEcmp, SprayAlternatesPackets)
{
	std::string topo = kLeafSpine;
	topo.replace(topo.find(R"("seed":11)"), 9, R"("seed":11,"multipath":"spray")");
	Sim sim(topo);
	sim.send(1, from_to(3, 1));
	sim.run_until(kUs);
	const auto &s0 = sim.fabric.stats("leaf0", static_cast<size_t>(sim.fabric.port_to("leaf0", "spine0")), 0);
	const uint64_t base = s0.tx_packets;
	for (int k = 0; k < 50; k++)
		sim.send(0, from_to(1, 3));
	sim.run_until(2 * kUs);
	EXPECT_EQ(s0.tx_packets - base, 25U);
	EXPECT_EQ(sim.sink.to(1).size(), 50U);
}

namespace {

// n frames a -> b through an impaired a -> switch direction; returns what
// b received, in order of arrival.
std::vector<Delivered> impaired(const std::string &impair, int n, uint64_t seed = 1,
				uint64_t spacing = kUs)
{
	Sim sim(R"({"seed":)" + std::to_string(seed) +
		R"(,"switches":[{"name":"sw0"}],"hosts":[{"name":"a","switch":"sw0","a_to_b":{"delay_us":10,"impair":)" +
		impair + R"(}},{"name":"b","switch":"sw0"}]})");
	sim.send(1, from_to(2, 1));
	for (int i = 0; i < n; i++) {
		FrameSpec s;
		s.psn = static_cast<uint32_t>(i);
		sim.send(0, from_to(1, 2, s));
		sim.run_until(sim.now + spacing);
	}
	sim.run_until(sim.now + 100 * kMs);
	return sim.sink.to(1);
}

std::vector<uint32_t> psns(const std::vector<Delivered> &d)
{
	std::vector<uint32_t> out;
	for (const auto &x : d)
		out.push_back(parse_frame(x.data).info.psn);
	return out;
}

} // namespace

TEST(FabricImpair, BernoulliLoss)
{
	const int n = 20000;
	const auto got = impaired(R"({"loss":0.1})", n);
	EXPECT_NEAR(1.0 - static_cast<double>(got.size()) / n, 0.1, 0.01);
	// Seeded: the same run loses the same packets, another seed others.
	EXPECT_EQ(psns(impaired(R"({"loss":0.1})", 2000)), psns(impaired(R"({"loss":0.1})", 2000)));
	EXPECT_NE(psns(impaired(R"({"loss":0.1})", 2000, 1)),
		  psns(impaired(R"({"loss":0.1})", 2000, 2)));
}

TEST(FabricImpair, GilbertElliottBursts)
{
	const int n = 40000;
	const auto got = psns(impaired(R"({"burst":{"p":0.01,"r":0.2,"k":0,"h":0.8}})", n));
	// Stationary loss = p/(p+r) * h; losses come in runs.
	const double expect = 0.01 / 0.21 * 0.8;
	EXPECT_NEAR(1.0 - static_cast<double>(got.size()) / n, expect, 0.008);
	std::set<uint32_t> have(got.begin(), got.end());
	int runs = 0, lost = 0;
	for (uint32_t i = 0; i < static_cast<uint32_t>(n); i++) {
		if (have.contains(i))
			continue;
		lost++;
		runs += i == 0 || have.contains(i - 1);
	}
	// Mean burst length: 1/(1 - h(1-r)) for runs inside a bad period,
	// well above Bernoulli's ~1.
	EXPECT_GT(static_cast<double>(lost) / runs, 2.0);
}

TEST(FabricImpair, Duplication)
{
	const int n = 20000;
	const auto got = psns(impaired(R"({"duplicate":0.05})", n));
	EXPECT_NEAR(static_cast<double>(got.size()) / n - 1.0, 0.05, 0.006);
	std::map<uint32_t, int> count;
	for (auto p : got)
		count[p]++;
	EXPECT_EQ(count.size(), static_cast<size_t>(n));
}

TEST(FabricImpair, CorruptionFlipsOneBit)
{
	const int n = 20000;
	const auto got = impaired(R"({"corrupt":0.05})", n);
	ASSERT_EQ(got.size(), static_cast<size_t>(n));
	int corrupted = 0;
	for (const auto &d : got) {
		FrameSpec s;
		s.src = host_mac(1);
		s.dst = host_mac(2);
		s.psn = parse_frame(d.data).info.psn;
		const Bytes orig = roce_frame(s);
		int bits = 0;
		for (size_t k = 0; k < orig.size(); k++)
			bits += std::popcount(static_cast<unsigned>(orig[k] ^ d.data[k]));
		ASSERT_LE(bits, 1);
		corrupted += bits;
	}
	EXPECT_NEAR(static_cast<double>(corrupted) / n, 0.05, 0.006);
}

TEST(FabricImpair, Reordering)
{
	const int n = 20000;
	// 1 µs apart, 10% held back 20 µs: each overtaken by about 20 others.
	const auto got = psns(impaired(R"({"reorder":0.1,"reorder_delay_us":20})", n, 1, kUs));
	ASSERT_EQ(got.size(), static_cast<size_t>(n));
	int late = 0;
	uint32_t highest = 0;
	for (auto p : got) {
		late += p < highest;
		highest = std::max(highest, p);
	}
	EXPECT_NEAR(static_cast<double>(late) / n, 0.1, 0.01);
}

TEST(FabricImpair, JitterIsUniform)
{
	Sim sim(R"({"switches":[{"name":"sw0"}],"hosts":[{"name":"a","switch":"sw0",
		"a_to_b":{"delay_us":10,"impair":{"jitter_us":20}}},{"name":"b","switch":"sw0"}]})");
	sim.send(1, from_to(2, 1));
	const int n = 10000;
	double sum = 0;
	uint64_t lo = kNever, hi = 0;
	for (int i = 0; i < n; i++) {
		const uint64_t t0 = sim.now;
		sim.sink.frames.clear();
		sim.send(0, from_to(1, 2));
		sim.run_until(t0 + 100 * kUs);
		ASSERT_EQ(sim.sink.frames.size(), 1U);
		const uint64_t d = sim.sink.frames.back().t - t0;
		sum += static_cast<double>(d);
		lo = std::min(lo, d);
		hi = std::max(hi, d);
	}
	EXPECT_GE(lo, 10 * kUs);
	EXPECT_LE(hi, 30 * kUs);
	EXPECT_NEAR(sum / n, 20.0 * kUs, 0.3 * kUs);
}

TEST(FabricInject, DropsExactlyTheNthOccurrence)
{
	Sim sim(pair_topo("", "", R"("a_to_b":{})"));
	sim.fabric.add_injection({Injection::Action::Drop, 0x11, 5, 2, "a"});
	sim.send(1, from_to(2, 1));
	std::vector<uint32_t> sent;
	for (int round = 0; round < 3; round++)	// go-back-N resends 0..9
		for (uint32_t psn = 0; psn < 10; psn++) {
			FrameSpec s;
			s.psn = psn;
			sim.send(0, from_to(1, 2, s));
			sent.push_back(psn);
		}
	// Other QPs with the same PSN are never touched.
	FrameSpec other;
	other.qpn = 0x12;
	other.psn = 5;
	for (int i = 0; i < 3; i++)
		sim.send(0, from_to(1, 2, other));
	const auto got = psns(sim.sink.to(1));
	ASSERT_EQ(got.size(), sent.size() + 3 - 1);
	sent.erase(sent.begin() + 15);	// the second PSN 5 of QP 0x11
	sent.insert(sent.end(), {5, 5, 5});
	EXPECT_EQ(got, sent);
	EXPECT_EQ(drops(sim.fabric.stats("sw0", 0, 0), Drop::Inject), 1U);
}

TEST(FabricInject, MarksAndCorruptsExactlyOnePacket)
{
	Sim sim(pair_topo(""));
	sim.fabric.add_injection({Injection::Action::Ecn, 0x11, 3, 1, ""});
	sim.fabric.add_injection({Injection::Action::Corrupt, 0x11, 7, 1, ""});
	sim.send(1, from_to(2, 1));
	for (uint32_t psn = 0; psn < 10; psn++) {
		FrameSpec s;
		s.psn = psn;
		s.ecn = Ecn::Ect0;
		sim.send(0, from_to(1, 2, s));
	}
	const auto got = sim.sink.to(1);
	ASSERT_EQ(got.size(), 10U);
	for (uint32_t psn = 0; psn < 10; psn++) {
		FrameSpec s;
		s.psn = psn;
		s.ecn = Ecn::Ect0;
		const Bytes orig = from_to(1, 2, s);
		const FrameInfo i = parse_frame(got[psn].data).info;
		EXPECT_EQ(i.ecn, psn == 3 ? Ecn::Ce : Ecn::Ect0) << psn;
		EXPECT_EQ(ipv4_checksum(std::span(got[psn].data).subspan(14, 20)), 0);
		int bits = 0;
		for (size_t k = 34; k < orig.size(); k++)	// past the IP header
			bits += std::popcount(static_cast<unsigned>(orig[k] ^ got[psn].data[k]));
		EXPECT_EQ(bits, psn == 7 ? 1 : 0) << psn;
	}
}

TEST(FabricHostile, BadFramesAreCountedAndDropped)
{
	Sim sim(pair_topo(""));
	sim.send(1, from_to(2, 1));
	sim.send(0, Bytes(5, 0));			// truncated
	sim.send(0, Bytes(20000, 0));			// oversized
	Bytes bad = from_to(1, 2);
	bad[14] = 0x41;					// IHL 1
	sim.send(0, bad);
	Bytes mc = from_to(1, 2);
	mc[6] = 0xff;					// multicast source
	sim.send(0, mc);
	const QueueStats &st = sim.fabric.stats("sw0", 0, 0);
	EXPECT_EQ(drops(st, Drop::Truncated), 1U);
	EXPECT_EQ(drops(st, Drop::Oversized), 1U);
	EXPECT_EQ(drops(st, Drop::Malformed), 2U);
	EXPECT_TRUE(sim.sink.to(1).empty());
	// Random garbage from both hosts: no crash, memory stays bounded.
	Rng rng(11);
	for (int i = 0; i < 50000; i++) {
		Bytes r(rng.next() % 1600);
		for (auto &b : r)
			b = static_cast<uint8_t>(rng.next());
		if (r.size() > 14 && (i % 3) == 0) {
			r[6] &= 0xfe;
			r[12] = (i % 2) ? 0x88 : 0x08;
			r[13] = (i % 2) ? 0x08 : 0x00;
		}
		sim.send(i & 1, r);
		ASSERT_LE(sim.fabric.buffer_used("sw0"), sim.fabric.config().switches[0].buffer);
		if ((i % 1000) == 0)
			sim.run_until(sim.now + kMs);
	}
	sim.run_until(sim.now + 10 * kMs);
	(void)sim.fabric.counters(sim.now).dump();
}

TEST(FabricTelemetry, CountersAndSamplesAreJson)
{
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":1})"));
	sim.send(1, from_to(2, 1));
	for (int i = 0; i < 10; i++)
		sim.send(0, from_to(1, 2));
	const auto sample = sim.fabric.sample(sim.now);
	ASSERT_EQ(sample["q"].size(), 1U);
	EXPECT_EQ(sample["q"][0][3], 9000);
	sim.run_until(kMs);
	const auto c = sim.fabric.counters(sim.now);
	const auto &port_b = c["switches"][0]["ports"][1];
	EXPECT_EQ(port_b["peer"], "b");
	EXPECT_EQ(port_b["prio"][0]["tx_packets"], 10);
	EXPECT_EQ(port_b["prio"][0]["tx_bytes"], 10000);
	EXPECT_EQ(port_b["prio"][0]["depth_max"], 9000);
	EXPECT_EQ(c["switches"][0]["ports"][0]["prio"][0]["rx_packets"], 10);
}

TEST(FabricTelemetry, CsvRowsCarryTheSameValues)
{
	Sim sim(pair_topo(R"("b_to_a":{"rate_gbps":1})"));
	sim.send(1, from_to(2, 1));
	for (int i = 0; i < 10; i++)
		sim.send(0, from_to(1, 2));
	const std::string t = std::to_string(sim.now);
	EXPECT_EQ(telemetry_csv(sim.fabric.sample(sim.now)),
		  t + ",,,,sample,1\n" + t + ",sw0,1,0,sampled_depth,9000\n");
	sim.run_until(kMs);
	const std::string csv =
		telemetry_csv({{"t_ns", sim.now}, {"counters", sim.fabric.counters(sim.now)}});
	const std::string c = std::to_string(sim.now);
	EXPECT_NE(csv.find(c + ",sw0,1,0,tx_packets,10\n"), std::string::npos) << csv;
	EXPECT_NE(csv.find(c + ",sw0,1,0,tx_bytes,10000\n"), std::string::npos);
	EXPECT_NE(csv.find(c + ",sw0,0,0,rx_packets,10\n"), std::string::npos);
	EXPECT_NE(csv.find(c + ",sw0,1,,up,"), std::string::npos);
	EXPECT_NE(csv.find(c + ",sw0,,,buffer_used,0\n"), std::string::npos);
	EXPECT_NE(csv.find(c + ",sw0,1,,peer,b\n"), std::string::npos);
	// Every row has six fields and ends in a number (a name for peer).
	size_t rows = 0;
	for (size_t at = 0; at < csv.size();) {
		const size_t end = csv.find('\n', at);
		ASSERT_NE(end, std::string::npos);
		const std::string r = csv.substr(at, end - at);
		EXPECT_EQ(std::count(r.begin(), r.end(), ','), 5) << r;
		const bool name = r.find(",peer,") != std::string::npos;
		EXPECT_TRUE(name || std::isdigit(static_cast<unsigned char>(r.back()))) << r;
		at = end + 1;
		rows++;
	}
	EXPECT_GT(rows, 2U * 8U * 10U);
	// Names are quoted as RFC 4180 wants; anything else gives no rows.
	EXPECT_EQ(telemetry_csv(nlohmann::json::parse(R"({"t_ns":5,"q":[["a,\"b",0,3,7]]})")),
		  "5,,,,sample,1\n5,\"a,\"\"b\",0,3,sampled_depth,7\n");
	// 64-bit values stay whole; a record of the wrong shape throws nothing.
	EXPECT_EQ(telemetry_csv(nlohmann::json::parse(
			  R"({"t_ns":5,"counters":{"switches":[{"name":"s","buffer_used":5000000000}]}})")),
		  "5,s,,,buffer_used,5000000000\n5,s,,,shared_used,0\n");
	EXPECT_EQ(telemetry_csv(nlohmann::json::parse(
			  R"({"t_ns":5,"counters":{"switches":[{"name":1,"ports":[7,{"prio":3}]}],
			      "injections":5}})")),
		  "5,1,,,buffer_used,0\n5,1,,,shared_used,0\n5,1,0,,peer,0\n5,1,0,,peer,0\n");
	EXPECT_EQ(telemetry_csv(nlohmann::json::parse(R"({"t_ns":5,"late_ns":3000000,"q":[]})")),
		  "5,,,,sample,0\n5,,,,late_ns,3000000\n");
	EXPECT_EQ(telemetry_csv(nlohmann::json::parse(R"({"t_ns":5})")), "");
	EXPECT_EQ(telemetry_csv(nlohmann::json::parse("[1,2]")), "");
}

TEST(FabricControl, ImpairmentsChangeAtRunTime)
{
	Sim sim(pair_topo(""));
	sim.send(1, from_to(2, 1));
	for (int i = 0; i < 100; i++)
		sim.send(0, from_to(1, 2));
	LinkParams *p = sim.fabric.link_params("a", "a_to_b");
	ASSERT_NE(p, nullptr);
	EXPECT_EQ(update_link(nlohmann::json::parse(R"({"impair":{"loss":1}})"), *p), "");
	for (int i = 0; i < 100; i++)
		sim.send(0, from_to(1, 2));
	EXPECT_EQ(sim.sink.to(1).size(), 100U);
	EXPECT_EQ(drops(sim.fabric.stats("sw0", 0, 0), Drop::Loss), 100U);
	EXPECT_NE(update_link(nlohmann::json::parse(R"({"impair":{"loss":2}})"), *p), "");
	EXPECT_EQ(p->impair.loss, 1.0);	// a bad update changes nothing
}

} // namespace vrnic::fabric::test

// SPDX-License-Identifier: GPL-2.0-or-later
// Late turns (backdate.hpp): the frames a switch that was not run read all
// at once are handed to the model spread over the time it was away.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "backdate.hpp"
#include "helpers.hpp"

namespace vrnic::fabric::test {
namespace {

constexpr uint64_t kUs = 1000, kMs = 1000 * kUs;

struct Got {
	size_t host;
	uint8_t tag;
	uint64_t t;
};

std::vector<Got> drain(Backdate &b, uint64_t floor)
{
	std::vector<Got> got;
	b.drain(floor, [&got](size_t host, std::span<const uint8_t> f, uint64_t t) {
		got.push_back({host, f[0], t});
	});
	return got;
}

} // namespace

// Each port's k-th of n frames at from + (k + 1) (to - from) / n, every
// port's order kept, all of them in time order.
TEST(Backdate, SpreadsEachPortsFramesOverTheGapInTimeOrder)
{
	Backdate b;
	EXPECT_FALSE(b.active());
	b.begin(1000, 5000);
	ASSERT_TRUE(b.active());
	for (uint8_t i = 0; i < 4; i++)
		b.add(0, std::vector<uint8_t>{i, 0xaa});
	for (uint8_t i = 10; i < 12; i++)
		b.add(1, std::vector<uint8_t>{i});
	const auto got = drain(b, 0);
	const std::vector<Got> want = {{0, 0, 2000}, {0, 1, 3000}, {1, 10, 3000},
				       {0, 2, 4000}, {0, 3, 5000}, {1, 11, 5000}};
	ASSERT_EQ(got.size(), want.size());
	for (size_t i = 0; i < want.size(); i++) {
		EXPECT_EQ(got[i].host, want[i].host) << i;
		EXPECT_EQ(got[i].tag, want[i].tag) << i;
		EXPECT_EQ(got[i].t, want[i].t) << i;
	}
	EXPECT_FALSE(b.active());
	EXPECT_TRUE(drain(b, 0).empty()) << "a drained turn keeps nothing";
}

// Never before what the model was already given.
TEST(Backdate, NeverHandsTheModelAnEarlierTime)
{
	Backdate b;
	b.begin(0, 8000);
	for (uint8_t i = 0; i < 8; i++)
		b.add(i % 2, std::vector<uint8_t>{i});
	uint64_t last = 0;
	for (const Got &g : drain(b, 5000)) {
		EXPECT_GE(g.t, 5000u);
		EXPECT_GE(g.t, last);
		last = g.t;
	}
	EXPECT_EQ(last, 8000u);
}

// What it is for: two senders whose frames reach a 1 Gb/s port at its rate
// while the switch is not run for 2 ms.  Handed to the model in one burst
// at wake-up they fill the queue past XOFF and pause both senders; spread
// over the 2 ms, as a running switch would have seen them, the port sends
// them on as they come and pauses nobody.  (At once, the headroom also
// overflows: the model's senders cannot honour a pause for frames they
// sent already.)
TEST(Backdate, FramesThatCameAtLineRateDoNotPauseWhenSpread)
{
	const char *incast = R"({"switches":[{"name":"sw0","buffer":1048576}],
		"defaults":{"pfc":{"priorities":[3],"xoff":20000,"xon":10000,"headroom":60000}},
		"hosts":[{"name":"s1","switch":"sw0"},{"name":"s2","switch":"sw0"},
			 {"name":"r","switch":"sw0","b_to_a":{"rate_gbps":1}}]})";
	// 2 ms at 0.5 Gb/s from each sender: 125 frames of 1000 B.
	constexpr int kFrames = 125;
	constexpr uint64_t kWake = 3 * kMs, kGap = 2 * kMs;
	auto frame = [](int src) {
		FrameSpec s;
		s.src = host_mac(src);
		s.dst = host_mac(3);
		s.dscp = 24;
		return roce_frame(s);
	};
	for (const bool spread : {false, true}) {
		Sim sim(incast);
		sim.send(2, frame(3));	// r's MAC is learnt
		sim.run_until(kWake - kGap);
		if (spread) {
			Backdate b;
			b.begin(kWake - kGap, kWake);
			for (int i = 0; i < kFrames; i++) {
				b.add(0, frame(1));
				b.add(1, frame(2));
			}
			b.drain(sim.now, [&sim](size_t host, std::span<const uint8_t> f, uint64_t t) {
				sim.run_until(t);
				sim.send(host, Bytes(f.begin(), f.end()));
			});
		} else {
			sim.run_until(kWake);
			for (int i = 0; i < kFrames; i++) {
				sim.send(0, frame(1));
				sim.send(1, frame(2));
			}
		}
		sim.run_until(kWake + 10 * kMs);
		const uint64_t depth = sim.fabric.stats("sw0", 2, 3).depth_max;
		const size_t pauses = sim.sink.pfc_to(0).size() + sim.sink.pfc_to(1).size();
		const size_t got = sim.sink.to(2).size();
		std::printf("%s: queue at most %llu B, %zu PFC frames, %zu of %d frames through\n",
			    spread ? "spread" : "one burst", static_cast<unsigned long long>(depth),
			    pauses, got, 2 * kFrames);
		if (spread) {
			EXPECT_LT(depth, 20000u) << "the queue stayed below XOFF";
			EXPECT_EQ(pauses, 0u);
			EXPECT_EQ(got, 2u * kFrames);
		} else {
			// Past XOFF, and past the headroom: the burst came before
			// any pause could stop it.
			EXPECT_GT(depth, 20000u);
			EXPECT_GT(pauses, 0u);
			EXPECT_LT(got, 2u * kFrames);
		}
	}
}

} // namespace vrnic::fabric::test

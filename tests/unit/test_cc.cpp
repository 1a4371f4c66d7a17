// SPDX-License-Identifier: GPL-2.0-or-later
// Congestion control, the algorithm layer (engine/cc.hpp):
// DCQCN against the paper's equations evaluated tick by tick with mlx5's
// defaults, its byte-counter and timer paths, floor and clamps; the NP's
// CNP rate limit; the pacer over a long run; Swift reacting to RTT; and
// a QP with CC off left alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <queue>
#include <random>
#include <vector>

#include "cc.hpp"

using namespace vrnic::cc;

namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kLine = mbps_to_Bps(100000);	// 12.5e9 B/s

// The DCQCN reaction point as the paper writes it, in doubles, with the
// timers firing on time (every rp_dce_tcp_rtt for α, every rp_time_reset
// for the rate): the reference the lazily evaluated engine must follow.
struct PaperModel {
	const DcqcnParams &p;
	double line;
	double rc, rt, alpha = 0;
	bool limited = false, cnp_flag = false;
	double bytes = 0;
	uint32_t t = 0, bc = 0;
	uint64_t alpha_next = 0, timer_next = 0, last_cut = 0;

	PaperModel(const DcqcnParams &pp, double l) : p(pp), line(l), rc(l), rt(l) {}

	[[nodiscard]] double rmin() const { return double(mbps_to_Bps(p.rp_min_rate)); }
	[[nodiscard]] double g() const { return p.rp_dce_tcp_g / 1024.0; }

	void increase(bool timer)
	{
		(timer ? t : bc)++;
		const uint32_t f = p.rp_threshold;
		if (std::max(t, bc) <= f) {
		} else if (std::min(t, bc) > f) {
			rt += (std::min(t, bc) - f) * double(mbps_to_Bps(p.rp_hai_rate));
		} else {
			rt += double(mbps_to_Bps(p.rp_ai_rate));
		}
		rt = std::min(rt, line);
		rc = (rc + rt) / 2;
		if (line - rc < 1.0 && rt >= line) {
			limited = false;
			rc = rt = line;
		}
	}
	void fire(uint64_t now)
	{
		while (limited && alpha_next <= now) {
			alpha = cnp_flag ? g() * alpha + (1 - g()) : g() * alpha;
			cnp_flag = false;
			alpha_next += p.rp_dce_tcp_rtt * kUs;
		}
		while (limited && timer_next <= now) {
			timer_next += p.rp_time_reset * kUs;
			increase(true);
		}
	}
	void cut(uint64_t now)
	{
		if (p.rp_clamp_tgt_rate || (p.rp_clamp_tgt_rate_ati && t > 0))
			rt = rc;
		const double a = alpha * 2048.0 / double(1u << p.rp_gd);	// α/2 at rp_gd 11
		rc = std::max({rc * (1 - a / 2), rc * p.rp_min_dec_fac / 100.0, rmin()});
		t = bc = 0;
		bytes = 0;
		timer_next = now + p.rp_time_reset * kUs;
		last_cut = now;
	}
	bool cnp(uint64_t now)
	{
		fire(now);
		if (!limited) {
			limited = true;
			rc = rt = line;
			alpha = p.rp_initial_alpha_value / 1024.0;
			alpha_next = now + p.rp_dce_tcp_rtt * kUs;
			cnp_flag = true;
			t = 0;
			cut(now);
			return true;
		}
		cnp_flag = true;
		if (now - last_cut < p.rp_rate_reduce_monitor_period * kUs)
			return false;
		cut(now);
		return true;
	}
	void sent(uint64_t now, uint32_t b)
	{
		fire(now);
		if (!limited)
			return;
		bytes += b;
		while (limited && bytes >= p.rp_byte_reset) {
			bytes -= p.rp_byte_reset;
			increase(false);
		}
	}
};

void expect_close(double model, uint64_t got, const char *what, uint64_t t)
{
	EXPECT_NEAR(double(got), model, model * 1e-7 + 2) << what << " at " << t << " ns";
}

struct TraceResult {
	std::vector<std::pair<uint64_t, uint64_t>> cuts;	// (time, rate after)
	uint64_t recovered_at = 0;	// engine back to line rate
	uint64_t model_recovered_at = 0;
	uint64_t min_rate = ~uint64_t(0);
	uint32_t handled = 0, ignored = 0;
	double max_rel_err = 0;		// engine vs model, rate
	double max_alpha_err = 0;
};

// A sender at its current rate (4 KiB packets) and a CE burst: one CNP
// every cnp_every µs from 0 to burst_us.  Engine and model see the same
// events; their rates are compared at every event.
TraceResult run_burst(const DcqcnParams &p, uint64_t burst_us, uint64_t cnp_every_us,
		      uint64_t horizon_us)
{
	TraceResult r;
	Dcqcn d(p, kLine);
	PaperModel m(p, double(kLine));
	double credit = 0;
	for (uint64_t us = 0; us < horizon_us; us++) {
		const uint64_t now = us * kUs;
		if (us <= burst_us && us % cnp_every_us == 0) {
			const bool h = d.on_cnp(now);
			EXPECT_EQ(h, m.cnp(now)) << now;
			(h ? r.handled : r.ignored)++;
			if (h)
				r.cuts.emplace_back(now, d.current_rate());
		}
		d.on_timer(now);
		m.fire(now);
		if (d.limited() || m.limited) {
			expect_close(m.rc, d.current_rate(), "rate", now);
			r.max_rel_err = std::max(r.max_rel_err,
						 std::fabs(double(d.current_rate()) - m.rc) / m.rc);
		}
		if (d.limited() && m.limited) {
			const double a = double(d.alpha_q32()) / double(Dcqcn::kAlphaOne);
			EXPECT_NEAR(a, m.alpha, 1e-8);
			r.max_alpha_err = std::max(r.max_alpha_err, std::fabs(a - m.alpha));
		}
		r.min_rate = std::min(r.min_rate, d.current_rate());
		// Send for one µs at the engine's rate.
		credit += double(d.current_rate()) / 1e6;
		while (credit >= 4096) {
			credit -= 4096;
			d.on_bytes_sent(now, 4096);
			m.sent(now, 4096);
		}
		if (!d.limited() && r.recovered_at == 0 && us > burst_us)
			r.recovered_at = now;
		if (!m.limited && r.model_recovered_at == 0 && us > burst_us)
			r.model_recovered_at = now;
		if (r.recovered_at && r.model_recovered_at)
			break;
	}
	return r;
}

} // namespace

// ---------------------------------------------------------------------------
// Parameters

TEST(CcParams, Mlx5NamesAndDefaults)
{
	static const char *const names[] = {
		"rp_clamp_tgt_rate", "rp_clamp_tgt_rate_ati", "rp_time_reset",
		"rp_byte_reset", "rp_threshold", "rp_ai_rate", "rp_max_rate",
		"rp_hai_rate", "rp_min_dec_fac", "rp_min_rate",
		"rp_rate_to_set_on_first_cnp", "rp_dce_tcp_g", "rp_dce_tcp_rtt",
		"rp_rate_reduce_monitor_period", "rp_initial_alpha_value", "rp_gd",
		"np_min_time_between_cnps", "np_cnp_dscp", "np_cnp_prio_mode",
		"np_cnp_prio",
	};
	static const uint32_t defaults[] = {
		0, 1, 300, 32767, 1, 5, 0, 50, 50, 1, 0, 1019, 1, 4, 1023, 11,
		4, 48, 0, 6,
	};
	ASSERT_EQ(kDcqcnParamTable.size(), std::size(names));
	const DcqcnParams p;
	EXPECT_TRUE(valid(p));
	for (size_t i = 0; i < std::size(names); i++) {
		EXPECT_EQ(kDcqcnParamTable[i].name, names[i]);
		uint32_t v = ~0u;
		ASSERT_TRUE(get_param(p, names[i], v)) << names[i];
		EXPECT_EQ(v, defaults[i]) << names[i];
	}
}

TEST(CcParams, SetterRefusesOutOfRange)
{
	DcqcnParams p;
	const DcqcnParams before = p;
	auto same = [&] { return std::memcmp(&p, &before, sizeof(p)) == 0; };

	EXPECT_EQ(set_param(p, "rp_no_such_knob", 1), ParamResult::UnknownName);
	EXPECT_EQ(set_param(p, "np_cnp_dscp", 64), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "np_cnp_prio", 8), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_dce_tcp_g", 1024), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_initial_alpha_value", 1024), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_min_dec_fac", 0), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_min_dec_fac", 101), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_min_rate", 0), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_time_reset", 0), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_gd", 9), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_clamp_tgt_rate", 2), ParamResult::OutOfRange);
	EXPECT_EQ(set_param(p, "rp_ai_rate", kMaxRateMbps + 1), ParamResult::OutOfRange);
	EXPECT_TRUE(same()) << "a refused value changed nothing";

	// rp_min_rate above a non-zero rp_max_rate, either way round.
	ASSERT_EQ(set_param(p, "rp_max_rate", 1000), ParamResult::Ok);
	EXPECT_EQ(set_param(p, "rp_min_rate", 1001), ParamResult::Inconsistent);
	ASSERT_EQ(set_param(p, "rp_min_rate", 1000), ParamResult::Ok);
	EXPECT_EQ(set_param(p, "rp_max_rate", 999), ParamResult::Inconsistent);
	EXPECT_EQ(p.rp_max_rate, 1000u);
	EXPECT_EQ(set_param(p, "rp_max_rate", 0), ParamResult::Ok);

	// The bounds themselves are accepted.
	EXPECT_EQ(set_param(p, "np_cnp_dscp", 63), ParamResult::Ok);
	EXPECT_EQ(set_param(p, "rp_dce_tcp_g", 0), ParamResult::Ok);
	EXPECT_EQ(set_param(p, "rp_byte_reset", 0), ParamResult::Ok);
	EXPECT_EQ(set_param(p, "rp_rate_reduce_monitor_period", 0), ParamResult::Ok);
	EXPECT_TRUE(valid(p));
	p.np_cnp_prio = 9;	// behind the setter's back
	EXPECT_FALSE(valid(p));
}

// ---------------------------------------------------------------------------
// DCQCN

// The first CNP with mlx5's defaults: α = 1023/1024, Rc = line·(1 - α/2),
// Rt stays at the line rate.  Numbers worked by hand.
TEST(CcDcqcn, FirstCnpByHand)
{
	const DcqcnParams p;
	Dcqcn d(p, kLine);
	EXPECT_FALSE(d.limited());
	EXPECT_EQ(d.output(), Output{});
	ASSERT_TRUE(d.on_cnp(1000 * kUs));
	EXPECT_TRUE(d.limited());
	EXPECT_EQ(d.alpha(), 1023u);
	// 12.5e9 - 12.5e9·1023/2048 = 6,256,103,515.6 (rounded up by the floor of the cut)
	EXPECT_EQ(d.current_rate(), kLine - kLine * 1023 / 2048);
	EXPECT_EQ(d.target_rate(), kLine);
	EXPECT_EQ(d.output().rate_Bps, d.current_rate());
	EXPECT_EQ(d.stage(), Dcqcn::Stage::FastRecovery);
	EXPECT_EQ(d.next_timer_ns(), 1000 * kUs + 300 * kUs);

	// 4 µs later: α went through one period with a CNP and three without:
	// ((1019·α + 5)/1024)·(1019/1024)^3, then the second cut.
	const double a1 = (1019.0 * 1023 / 1024 + 5) / 1024;
	const double a4 = a1 * std::pow(1019.0 / 1024, 3);
	const uint64_t rc1 = d.current_rate();
	ASSERT_TRUE(d.on_cnp(1004 * kUs));
	EXPECT_NEAR(double(d.alpha_q32()) / 4294967296.0, a4, 2e-6);
	EXPECT_NEAR(double(d.current_rate()), rc1 * (1 - a4 / 2), 2);
	EXPECT_EQ(d.target_rate(), kLine) << "no timer increase in between: no clamp (ati)";
}

// A CE burst (a CNP every 4 µs for 20 µs, the NP's limit) and the
// recovery to line rate, mlx5's defaults, engine vs the paper's model at
// every µs.
TEST(CcDcqcn, CeBurstThenRecoveryMatchesPaper)
{
	const DcqcnParams p;
	const TraceResult r = run_burst(p, 20, 4, 100000);
	ASSERT_EQ(r.cuts.size(), 6u);
	EXPECT_EQ(r.ignored, 0u);
	for (auto [t, rate] : r.cuts)
		std::printf("  cut at %3llu us: %.3f Gb/s\n",
			    (unsigned long long)(t / kUs), rate * 8 / 1e9);
	std::printf("  lowest %.3f Gb/s; line rate again after %llu us (model %llu us); "
		    "largest difference %.2e of the rate, %.2e in alpha\n",
		    r.min_rate * 8 / 1e9,
		    (unsigned long long)((r.recovered_at) / kUs),
		    (unsigned long long)((r.model_recovered_at) / kUs),
		    r.max_rel_err, r.max_alpha_err);
	// Rates strictly fall through the burst.
	for (size_t i = 1; i < r.cuts.size(); i++)
		EXPECT_LT(r.cuts[i].second, r.cuts[i - 1].second);
	ASSERT_NE(r.recovered_at, 0u);
	ASSERT_NE(r.model_recovered_at, 0u);
	EXPECT_LE(std::max(r.recovered_at, r.model_recovered_at) -
		  std::min(r.recovered_at, r.model_recovered_at), 10 * kUs);
}

// The paper's own simulator clamps the target on every cut
// (CLAMP_TARGET_RATE 1): recovery then needs additive and hyper increase.
TEST(CcDcqcn, ClampedTargetRecoveryMatchesPaper)
{
	DcqcnParams p;
	ASSERT_EQ(set_param(p, "rp_clamp_tgt_rate", 1), ParamResult::Ok);
	const TraceResult r = run_burst(p, 20, 4, 200000);
	ASSERT_EQ(r.cuts.size(), 6u);
	std::printf("  clamped: lowest %.3f Gb/s; line rate after %llu us (model %llu us); "
		    "largest difference %.2e of the rate\n",
		    r.min_rate * 8 / 1e9,
		    (unsigned long long)(r.recovered_at / kUs),
		    (unsigned long long)(r.model_recovered_at / kUs), r.max_rel_err);
	ASSERT_NE(r.recovered_at, 0u);
	EXPECT_LE(std::max(r.recovered_at, r.model_recovered_at) -
		  std::min(r.recovered_at, r.model_recovered_at), 10 * kUs);
}

// Byte counter only (the timer 10 s away): each rp_byte_reset bytes is an
// event; F = 1 fast-recovery step, then additive increase (the timer
// stage stays 0, so never hyper).
TEST(CcDcqcn, ByteCounterPath)
{
	DcqcnParams p;
	ASSERT_EQ(set_param(p, "rp_time_reset", kMaxTimeUs), ParamResult::Ok);
	ASSERT_EQ(set_param(p, "rp_clamp_tgt_rate", 1), ParamResult::Ok);
	Dcqcn d(p, kLine);
	ASSERT_TRUE(d.on_cnp(0));
	ASSERT_TRUE(d.on_cnp(4 * kUs));
	uint64_t rc = d.current_rate(), rt = d.target_rate();
	EXPECT_EQ(rt, d.target_rate());

	d.on_bytes_sent(5 * kUs, 32766);
	EXPECT_EQ(d.byte_stage(), 0u);
	EXPECT_EQ(d.current_rate(), rc);
	d.on_bytes_sent(5 * kUs, 1);	// 32767: fast recovery
	EXPECT_EQ(d.byte_stage(), 1u);
	EXPECT_EQ(d.stage(), Dcqcn::Stage::FastRecovery);
	EXPECT_EQ(d.target_rate(), rt);
	rc = (rc + rt + 1) / 2;
	EXPECT_EQ(d.current_rate(), rc);
	d.on_bytes_sent(6 * kUs, 32767);	// additive increase
	EXPECT_EQ(d.stage(), Dcqcn::Stage::Additive);
	rt += mbps_to_Bps(5);
	rc = (rc + rt + 1) / 2;
	EXPECT_EQ(d.target_rate(), rt);
	EXPECT_EQ(d.current_rate(), rc);
	// Three events in one call (a large send).
	d.on_bytes_sent(7 * kUs, 3 * 32767 + 100);
	for (int i = 0; i < 3; i++) {
		rt += mbps_to_Bps(5);
		rc = (rc + rt + 1) / 2;
	}
	EXPECT_EQ(d.byte_stage(), 5u);
	EXPECT_EQ(d.timer_stage(), 0u);
	EXPECT_EQ(d.current_rate(), rc);
	// A cut resets the stages and the partial byte count.
	ASSERT_TRUE(d.on_cnp(20 * kUs));
	EXPECT_EQ(d.byte_stage(), 0u);
	d.on_bytes_sent(21 * kUs, 32766);
	EXPECT_EQ(d.byte_stage(), 0u);
}

// Timer only (nothing sent): an event every rp_time_reset from the last
// cut; once hyper needs both counters past F, the timer alone stays
// additive.  Calling once late gives the same state as calling on time.
TEST(CcDcqcn, TimerPathAndLazyCatchUp)
{
	DcqcnParams p;
	ASSERT_EQ(set_param(p, "rp_clamp_tgt_rate", 1), ParamResult::Ok);
	Dcqcn on_time(p, kLine), late(p, kLine);
	// Two cuts, so that the clamped target is below the line rate.
	const uint64_t t0 = 4 * kUs, tr = 300 * kUs;
	for (Dcqcn *d : {&on_time, &late}) {
		ASSERT_TRUE(d->on_cnp(0));
		ASSERT_TRUE(d->on_cnp(t0));
	}
	uint64_t rc = on_time.current_rate(), rt = on_time.target_rate();
	ASSERT_LT(rt, kLine);
	for (uint32_t k = 1; k <= 20; k++) {
		EXPECT_EQ(on_time.next_timer_ns(), t0 + k * tr);
		on_time.on_timer(t0 + k * tr - 1);
		EXPECT_EQ(on_time.timer_stage(), k - 1) << "not before its time";
		on_time.on_timer(t0 + k * tr);
		EXPECT_EQ(on_time.timer_stage(), k);
		if (k > 1)
			rt += mbps_to_Bps(5);
		rc = (rc + rt + 1) / 2;
		EXPECT_EQ(on_time.target_rate(), rt);
		EXPECT_EQ(on_time.current_rate(), rc) << k;
		EXPECT_EQ(on_time.stage(), k == 1 ? Dcqcn::Stage::FastRecovery
						 : Dcqcn::Stage::Additive);
	}
	late.on_timer(t0 + 20 * tr + 7);
	EXPECT_EQ(late.timer_stage(), 20u);
	EXPECT_EQ(late.current_rate(), on_time.current_rate());
	EXPECT_EQ(late.alpha_q32(), on_time.alpha_q32()) << "α decays the same";

	// Far more events owed than one call processes: bounded per call,
	// the rest on the next calls (next_timer_ns() says "now").
	Dcqcn slow(p, kLine);
	ASSERT_TRUE(slow.on_cnp(0));
	ASSERT_TRUE(slow.on_cnp(t0));
	slow.on_timer(t0 + 1000 * tr);
	EXPECT_EQ(slow.timer_stage(), Dcqcn::kMaxCatchUp);
	EXPECT_LE(slow.next_timer_ns(), t0 + 1000 * tr);
	slow.on_timer(t0 + 1000 * tr);
	EXPECT_EQ(slow.timer_stage(), 2 * Dcqcn::kMaxCatchUp);
}

// With the byte counter and the timer both past F: hyper increase by
// i·rp_hai_rate, i = min(T, BC) - F.
TEST(CcDcqcn, HyperIncrease)
{
	DcqcnParams p;
	ASSERT_EQ(set_param(p, "rp_clamp_tgt_rate", 1), ParamResult::Ok);
	Dcqcn d(p, kLine);
	ASSERT_TRUE(d.on_cnp(0));
	ASSERT_TRUE(d.on_cnp(4 * kUs));
	const uint64_t t0 = 4 * kUs;
	d.on_timer(t0 + 300 * kUs);			// T=1: FR
	d.on_timer(t0 + 600 * kUs);			// T=2: AI
	d.on_bytes_sent(t0 + 600 * kUs, 32767);	// BC=1: AI (max 2 > F, min 1)
	EXPECT_EQ(d.stage(), Dcqcn::Stage::Additive);
	uint64_t rt = d.target_rate(), rc = d.current_rate();
	d.on_bytes_sent(t0 + 601 * kUs, 32767);	// BC=2: HAI, i = 1
	EXPECT_EQ(d.stage(), Dcqcn::Stage::Hyper);
	rt += mbps_to_Bps(50);
	rc = (rc + rt + 1) / 2;
	EXPECT_EQ(d.target_rate(), rt);
	EXPECT_EQ(d.current_rate(), rc);
	d.on_timer(t0 + 900 * kUs);			// T=3, BC=2: i = 1
	rt += mbps_to_Bps(50);
	rc = (rc + rt + 1) / 2;
	EXPECT_EQ(d.target_rate(), rt);
	d.on_bytes_sent(t0 + 901 * kUs, 32767);	// T=3, BC=3: i = 2
	rt += 2 * mbps_to_Bps(50);
	rc = (rc + rt + 1) / 2;
	EXPECT_EQ(d.target_rate(), rt);
	EXPECT_EQ(d.current_rate(), rc);
}

// rp_min_rate is the floor however long the congestion lasts; a cut
// never takes more than (100 - rp_min_dec_fac)%.
TEST(CcDcqcn, RateFloorAndMinDecFac)
{
	const DcqcnParams p;
	Dcqcn d(p, kLine);
	for (uint64_t us = 0; us <= 2000; us += 4)
		ASSERT_TRUE(d.on_cnp(us * kUs));
	EXPECT_EQ(d.current_rate(), mbps_to_Bps(1));	// 1 Mb/s = 125000 B/s
	EXPECT_EQ(d.output().rate_Bps, 125000u);

	DcqcnParams q;
	ASSERT_EQ(set_param(q, "rp_min_rate", 20000), ParamResult::Ok);
	Dcqcn e(q, kLine);
	for (uint64_t us = 0; us <= 400; us += 4)
		ASSERT_TRUE(e.on_cnp(us * kUs));
	EXPECT_EQ(e.current_rate(), mbps_to_Bps(20000));

	// rp_gd 10 makes the cut Rc·α (≈ all of it): rp_min_dec_fac holds it
	// to half, or to 80% left with rp_min_dec_fac 80.
	DcqcnParams r;
	ASSERT_EQ(set_param(r, "rp_gd", 10), ParamResult::Ok);
	Dcqcn f(r, kLine);
	ASSERT_TRUE(f.on_cnp(0));
	EXPECT_EQ(f.current_rate(), kLine / 2);
	ASSERT_EQ(set_param(r, "rp_min_dec_fac", 80), ParamResult::Ok);
	ASSERT_TRUE(f.on_cnp(10 * kUs));
	EXPECT_EQ(f.current_rate(), kLine / 2 * 80 / 100);

	// rp_max_rate below the line rate caps recovery.
	DcqcnParams m;
	ASSERT_EQ(set_param(m, "rp_max_rate", 40000), ParamResult::Ok);
	Dcqcn g(m, kLine);
	EXPECT_EQ(g.max_rate(), mbps_to_Bps(40000));
	ASSERT_TRUE(g.on_cnp(0));
	EXPECT_EQ(g.target_rate(), mbps_to_Bps(40000));
	for (uint64_t k = 1; k < 200 && g.limited(); k++)
		g.on_timer(k * 300 * kUs);
	EXPECT_FALSE(g.limited());
	EXPECT_EQ(g.current_rate(), mbps_to_Bps(40000));
}

// Target clamping: rp_clamp_tgt_rate on every cut; rp_clamp_tgt_rate_ati
// only after a timer increase; neither keeps the target.
TEST(CcDcqcn, TargetClamps)
{
	auto second_cut_target = [](uint32_t clamp, uint32_t ati, bool timer_between,
				    uint64_t &rc_before) {
		DcqcnParams p;
		EXPECT_EQ(set_param(p, "rp_clamp_tgt_rate", clamp), ParamResult::Ok);
		EXPECT_EQ(set_param(p, "rp_clamp_tgt_rate_ati", ati), ParamResult::Ok);
		Dcqcn d(p, kLine);
		EXPECT_TRUE(d.on_cnp(0));
		if (timer_between)
			d.on_timer(300 * kUs);
		else
			d.on_bytes_sent(100 * kUs, 32767);
		rc_before = d.current_rate();
		EXPECT_TRUE(d.on_cnp(299 * kUs + (timer_between ? 2 * kUs : 0)));
		return d.target_rate();
	};
	uint64_t rc = 0;
	EXPECT_EQ(second_cut_target(1, 0, false, rc), rc);
	EXPECT_EQ(second_cut_target(1, 1, false, rc), rc);
	EXPECT_EQ(second_cut_target(0, 1, true, rc), rc);
	EXPECT_EQ(second_cut_target(0, 1, false, rc), kLine) << "byte increase only";
	EXPECT_EQ(second_cut_target(0, 0, true, rc), kLine);
}

// rp_rate_to_set_on_first_cnp, and CNPs inside the monitor period.
TEST(CcDcqcn, FirstCnpRateAndMonitorPeriod)
{
	DcqcnParams p;
	ASSERT_EQ(set_param(p, "rp_rate_to_set_on_first_cnp", 1000), ParamResult::Ok);
	Dcqcn d(p, kLine);
	ASSERT_TRUE(d.on_cnp(0));
	EXPECT_EQ(d.current_rate(), mbps_to_Bps(1000));
	EXPECT_EQ(d.target_rate(), kLine);
	EXPECT_EQ(d.alpha(), 1023u);

	const DcqcnParams q;
	Dcqcn e(q, kLine);
	ASSERT_TRUE(e.on_cnp(0));
	const uint64_t rc = e.current_rate();
	EXPECT_FALSE(e.on_cnp(1 * kUs));
	EXPECT_FALSE(e.on_cnp(3999));
	EXPECT_EQ(e.current_rate(), rc);
	EXPECT_TRUE(e.on_cnp(4 * kUs));
	EXPECT_LT(e.current_rate(), rc);
	// An ignored CNP still counts for α: compare with a QP that got none.
	Dcqcn a(q, kLine), b(q, kLine);
	ASSERT_TRUE(a.on_cnp(0));
	ASSERT_TRUE(b.on_cnp(0));
	EXPECT_FALSE(a.on_cnp(2500));	// in α period [2 µs, 3 µs)
	a.on_timer(10 * kUs);
	b.on_timer(10 * kUs);
	EXPECT_GT(a.alpha_q32(), b.alpha_q32());
}

// α decays by (rp_dce_tcp_g/1024) per rp_dce_tcp_rtt without CNPs,
// evaluated in closed form however late the next event comes.
TEST(CcDcqcn, AlphaDecay)
{
	const DcqcnParams p;
	Dcqcn d(p, kLine);
	ASSERT_TRUE(d.on_cnp(0));
	d.on_timer(999 * kUs + 500);	// 999 periods elapsed
	const double a1 = (1019.0 * 1023 / 1024 + 5) / 1024;
	const double want = a1 * std::pow(1019.0 / 1024, 998);
	EXPECT_NEAR(double(d.alpha_q32()) / 4294967296.0, want, 1e-6);
	EXPECT_GT(d.alpha_q32(), 0u);
	// After a long quiet spell α is ~0 and the next cut is ~nothing.
	DcqcnParams q;
	ASSERT_EQ(set_param(q, "rp_time_reset", kMaxTimeUs), ParamResult::Ok);
	Dcqcn e(q, kLine);
	ASSERT_TRUE(e.on_cnp(0));
	const uint64_t rc = e.current_rate();
	ASSERT_TRUE(e.on_cnp(5000 * kUs));
	EXPECT_EQ(e.alpha_q32(), 0u);
	EXPECT_EQ(e.current_rate(), rc);
}

// ---------------------------------------------------------------------------
// Notification point

TEST(CcNp, CnpRateLimitPerQp)
{
	const DcqcnParams p;
	EXPECT_EQ(p.np_cnp_dscp, 48u);
	EXPECT_EQ(p.np_cnp_prio, 6u);
	EXPECT_EQ(p.np_min_time_between_cnps, 4u);
	CnpLimiter a, b;
	unsigned sent_a = 0, sent_b = 0;
	std::vector<uint64_t> times;
	// A CE-marked packet every 1 µs on QP a, every 3 µs on QP b, 100 µs.
	for (uint64_t us = 0; us < 100; us++) {
		if (a.on_ce(us * kUs + 17, p)) {
			sent_a++;
			times.push_back(us);
		}
		if (us % 3 == 0 && b.on_ce(us * kUs + 17, p))
			sent_b++;
	}
	EXPECT_EQ(sent_a, 25u);
	for (size_t i = 1; i < times.size(); i++)
		EXPECT_EQ(times[i] - times[i - 1], 4u);
	// b: CE at 0,3,6,9,...: a CNP at 0, 6, 12, ... (every 6 µs), 17 of them.
	EXPECT_EQ(sent_b, 17u);
	// Exactly at the boundary.
	CnpLimiter c;
	EXPECT_TRUE(c.on_ce(1000, p));
	EXPECT_FALSE(c.on_ce(1000 + 4 * kUs - 1, p));
	EXPECT_TRUE(c.on_ce(1000 + 4 * kUs, p));
	// 0: every CE packet gets a CNP.
	DcqcnParams q;
	ASSERT_EQ(set_param(q, "np_min_time_between_cnps", 0), ParamResult::Ok);
	CnpLimiter d;
	for (int i = 0; i < 10; i++)
		EXPECT_TRUE(d.on_ce(5, q));
}

// ---------------------------------------------------------------------------
// Pacer

TEST(CcPacer, LongRunIsExact)
{
	Pacer pc;
	const uint64_t rate = 1234567891;	// an awkward rate, bytes/s
	const uint64_t burst = Pacer::default_burst(rate);
	EXPECT_EQ(burst, rate / 20000);	// 50 µs worth
	pc.set_rate(0, rate, burst);
	const uint32_t pkt = 4096 + 58;
	uint64_t now = 0, sent = 0, n = 0;
	const uint64_t horizon = 10 * kNsPerSec;	// 10 s, ~3 million packets
	while (true) {
		now = pc.next_eligible_ns(now, pkt);
		if (now > horizon)
			break;
		ASSERT_TRUE(pc.eligible(now, pkt));
		if (now > 0) {
			ASSERT_FALSE(pc.eligible(now - 1, pkt)) << "eligible as soon as allowed, no sooner";
		}
		pc.consume(now, pkt);
		sent += pkt;
		n++;
	}
	// Bytes allowed by time T: the burst plus rate·T.  Sent as early as
	// allowed, the sender is never more than one packet behind it.
	const double allowed = double(burst) + double(rate) * double(horizon) / 1e9;
	std::printf("  %llu packets in 10 s at %llu B/s: %.9f of the allowance\n",
		    (unsigned long long)n, (unsigned long long)rate, double(sent) / allowed);
	EXPECT_LE(double(sent), allowed);
	EXPECT_GE(double(sent), allowed - pkt);
}

// A late scheduler (woken 0-40 µs after the eligible time) still gets the
// rate, because the burst covers its lateness; and the burst bounds what
// leaves back to back after an idle time.
TEST(CcPacer, LateWakeupsAndBurstBound)
{
	Pacer pc;
	const uint64_t rate = mbps_to_Bps(8000);	// 1e9 B/s
	pc.set_rate(0, rate, Pacer::default_burst(rate));
	std::mt19937_64 rng(7);
	const uint32_t pkt = 4154;
	uint64_t now = 0, sent = 0;
	const uint64_t horizon = kNsPerSec;
	while (now <= horizon) {
		now = pc.next_eligible_ns(now, pkt) + rng() % (40 * kUs);
		// A late pass sends everything it is owed.
		while (pc.eligible(now, pkt) && now <= horizon) {
			pc.consume(now, pkt);
			sent += pkt;
		}
	}
	EXPECT_GT(double(sent), 0.999 * double(rate));
	EXPECT_LE(double(sent), double(rate) + double(pc.burst()) + pkt);

	// After 1 s idle: exactly burst/pkt packets back to back.
	now += kNsPerSec;
	unsigned back_to_back = 0;
	while (pc.eligible(now, pkt)) {
		pc.consume(now, pkt);
		back_to_back++;
	}
	EXPECT_EQ(back_to_back, pc.burst() / pkt);
	EXPECT_EQ(pc.next_eligible_ns(now, pkt),
		  now + ((pkt - pc.burst() % pkt) * kNsPerSec + rate - 1) / rate);
}

TEST(CcPacer, RateChangesAndOversizedPackets)
{
	Pacer pc;
	pc.set_rate(0, 1000000, 1000);	// 1 MB/s, 1000-byte bucket
	pc.consume(0, 1000);
	// 500 B earned at 1 MB/s by 500 µs, then the rate doubles: the next
	// 500 take 250 µs.
	pc.set_rate(500 * kUs, 2000000, 1000);
	EXPECT_EQ(pc.next_eligible_ns(500 * kUs, 1000), 750 * kUs);
	// A packet larger than the bucket waits for a full bucket and leaves
	// a debt.
	EXPECT_FALSE(pc.eligible(749 * kUs, 3000));
	EXPECT_TRUE(pc.eligible(750 * kUs, 3000));
	pc.consume(750 * kUs, 3000);
	EXPECT_EQ(pc.next_eligible_ns(750 * kUs, 1), 750 * kUs + 1000 * kUs + 500);
	// Rate 0: not paced.
	pc.set_rate(800 * kUs, 0, 1000);
	EXPECT_TRUE(pc.eligible(800 * kUs, 65536));
	EXPECT_EQ(pc.next_eligible_ns(800 * kUs, 65536), 800 * kUs);
	// Back to paced: the bucket starts full.
	pc.set_rate(900 * kUs, 1000000, 1000);
	EXPECT_TRUE(pc.eligible(900 * kUs, 1000));
}

// ---------------------------------------------------------------------------
// Swift

TEST(CcSwift, ReactsToRtt)
{
	const SwiftParams p;
	ASSERT_TRUE(valid(p));
	Swift s(p, kLine);
	const uint64_t one = 1 << Swift::kQ;
	EXPECT_EQ(s.cwnd_q10(), 16 * one);
	EXPECT_EQ(s.output().window_bytes, 16u * 4096);
	EXPECT_FALSE(s.on_cnp(0)) << "no switch support needed, CNPs ignored";

	// A window of ACKs below the target: +1 packet per RTT.
	uint64_t now = 0;
	for (int i = 0; i < 16; i++)
		s.on_ack(now += kUs, 50 * kUs, 4096);
	EXPECT_NEAR(double(s.cwnd_q10()) / one, 17.0, 0.05);

	// Above the target (150 µs vs 100): cwnd·(1 - 0.8·50/150), once per RTT.
	const uint64_t before = s.cwnd_q10();
	s.on_ack(now += kUs, 150 * kUs, 4096);
	EXPECT_EQ(s.decreases(), 1u);
	EXPECT_NEAR(double(s.cwnd_q10()), double(before) * (1 - 0.8 * 50 / 150), 2);
	const uint64_t after = s.cwnd_q10();
	s.on_ack(now += kUs, 150 * kUs, 4096);
	EXPECT_EQ(s.cwnd_q10(), after) << "at most one decrease per RTT";
	s.on_ack(now += 150 * kUs, 150 * kUs, 4096);
	EXPECT_EQ(s.decreases(), 2u);

	// A huge delay: the decrease is capped at max_mdf (half).
	const uint64_t c = s.cwnd_q10();
	s.on_ack(now += 10 * kNsPerSec / 1000, 10000 * kUs, 4096);
	EXPECT_EQ(s.cwnd_q10(), c / 2);

	// Below one packet the window becomes a pacing rate: cwnd·mtu/RTT.
	for (int i = 0; i < 40; i++)
		s.on_ack(now += 100000 * kUs, 10000 * kUs, 4096);
	EXPECT_LT(s.cwnd_q10(), one);
	const Output o = s.output();
	EXPECT_EQ(o.window_bytes, 4096u);
	EXPECT_NEAR(double(o.rate_Bps),
		    double(s.cwnd_q10()) / one * 4096 * 1e9 / double(s.srtt_ns()), 2);
	EXPECT_GE(s.cwnd_q10(), p.min_cwnd_q10);
}

// One flow into a bottleneck with a standing queue of (window - BDP):
// Swift settles with the delay around its target.
TEST(CcSwift, ConvergesToTargetDelay)
{
	const SwiftParams p;
	Swift s(p, kLine);
	const double c = 1e9;			// bottleneck, bytes/s
	const double base = 20e3;		// base RTT, ns
	const double bdp = c * base / 1e9;	// 20 KB
	uint64_t now = 0;
	double rtt = base;
	std::vector<double> tail;
	for (int round = 0; round < 3000; round++) {
		const double w = double(s.output().window_bytes);
		rtt = base + std::max(0.0, w - bdp) / c * 1e9;
		const int acks = std::max(1, int(w / p.mtu));
		for (int i = 0; i < acks; i++)
			s.on_ack(now += uint64_t(rtt / acks), uint64_t(rtt), p.mtu);
		if (round >= 2000)
			tail.push_back(rtt);
	}
	const double mean = std::accumulate(tail.begin(), tail.end(), 0.0) / double(tail.size());
	std::printf("  Swift: mean RTT %.1f us in the last 1000 rounds (target %u us)\n",
		    mean / 1e3, p.base_target_us);
	EXPECT_NEAR(mean, p.base_target_us * 1e3, 0.15 * p.base_target_us * 1e3);
}

// ---------------------------------------------------------------------------
// Closed loops: senders into one 25 Gb/s bottleneck, a fluid queue drained
// every µs.  Not the bench (no switch, no wire): a check that the
// algorithms, as coded, share a bottleneck and keep it busy.

namespace {

struct Lcg {
	uint64_t s = 1;
	double next()
	{
		s = s * 6364136223846793005ULL + 1442695040888963407ULL;
		return double(s >> 11) * 0x1.0p-53;
	}
};

struct LoopResult {
	double goodput = 0;	// of the bottleneck, second half of the run
	double jain = 0;
	double q_p50 = 0, q_p99 = 0;
};

LoopResult summarize(const std::vector<double> &sent, std::vector<double> &qs, double c,
		     uint64_t us)
{
	LoopResult r;
	double a = 0, b = 0;
	for (double x : sent) {
		a += x;
		b += x * x;
	}
	r.goodput = a / (c * double(us) / 1e6);
	r.jain = a * a / (double(sent.size()) * b);
	std::sort(qs.begin(), qs.end());
	r.q_p50 = qs[qs.size() / 2];
	r.q_p99 = qs[qs.size() * 99 / 100];
	return r;
}

} // namespace

// Two DCQCN senders at 25 Gb/s into 25 Gb/s; RED marking between 100 and
// 400 KB with pmax 0.2 (the HPCC simulator's 25G setting); the NP limit
// per QP; CNPs back after 10 µs.  mlx5's defaults.
TEST(CcLoop, DcqcnTwoSenderIncast)
{
	const DcqcnParams p;
	const double c = 25e9 / 8, kmin = 100e3, kmax = 400e3, pmax = 0.2;
	const uint64_t line = mbps_to_Bps(25000), horizon = 200000, delay = 10 * kUs;
	std::vector<Dcqcn> rp;
	rp.reserve(2);
	rp.emplace_back(p, line);
	rp.emplace_back(p, line);
	std::vector<CnpLimiter> np(2);
	std::vector<double> credit(2, 0), sent(2, 0), qs;
	std::vector<std::pair<uint64_t, int>> cnps;	// in time order
	size_t next_cnp = 0;
	Lcg rng;
	double q = 0;
	for (uint64_t us = 0; us < horizon; us++) {
		const uint64_t now = us * kUs;
		for (; next_cnp < cnps.size() && cnps[next_cnp].first <= now; next_cnp++)
			rp[cnps[next_cnp].second].on_cnp(now);
		for (size_t i = 0; i < 2; i++) {
			rp[i].on_timer(now);
			const uint64_t r = rp[i].output().rate_Bps;
			credit[i] += double(r != 0 ? r : line) / 1e6;
			for (; credit[i] >= 4096; credit[i] -= 4096) {
				rp[i].on_bytes_sent(now, 4096);
				q += 4096;
				const double pm = q <= kmin ? 0 : q >= kmax ? 1 : pmax * (q - kmin) / (kmax - kmin);
				if (rng.next() < pm && np[i].on_ce(now, p))
					cnps.emplace_back(now + delay, int(i));
				if (us >= horizon / 2)
					sent[i] += 4096;
			}
		}
		q = std::max(0.0, q - c / 1e6);
		if (us >= horizon / 2)
			qs.push_back(q);
	}
	const LoopResult r = summarize(sent, qs, c, horizon / 2);
	std::printf("  DCQCN 2 senders: goodput %.3f, Jain %.3f, queue p50 %.0f KB p99 %.0f KB\n",
		    r.goodput, r.jain, r.q_p50 / 1e3, r.q_p99 / 1e3);
	EXPECT_GE(r.goodput, 0.95);
	EXPECT_GE(r.jain, 0.95);
}

// Eight Swift senders, 20 µs base RTT, window-limited, ACK per packet
// after base + queue/C: the queue settles at target - base (80 µs, 250 KB)
// and the flows share it evenly.
TEST(CcLoop, SwiftEightSenders)
{
	const SwiftParams p;
	const double c = 25e9 / 8, base = 20e3;
	const uint64_t line = mbps_to_Bps(25000), horizon = 200000;
	const size_t n = 8;
	std::vector<Swift> s;
	s.reserve(n);
	for (size_t i = 0; i < n; i++)
		s.emplace_back(p, line);
	std::vector<double> inflight(n, 0), credit(n, 0), sent(n, 0), qs;
	struct Ack {
		uint64_t at, rtt;
		size_t flow;
		bool operator>(const Ack &o) const { return at > o.at; }
	};
	std::priority_queue<Ack, std::vector<Ack>, std::greater<>> acks;
	double q = 0;
	for (uint64_t us = 0; us < horizon; us++) {
		const uint64_t now = us * kUs;
		for (; !acks.empty() && acks.top().at <= now; acks.pop()) {
			inflight[acks.top().flow] -= 4096;
			s[acks.top().flow].on_ack(now, acks.top().rtt, 4096);
		}
		for (size_t i = 0; i < n; i++) {
			const Output o = s[i].output();
			credit[i] = std::min(credit[i] + double(o.rate_Bps ? o.rate_Bps : line) / 1e6,
					     65536.0);
			while (credit[i] >= 4096 && inflight[i] + 4096 <= double(o.window_bytes)) {
				credit[i] -= 4096;
				inflight[i] += 4096;
				q += 4096;
				const auto rtt = uint64_t(base + q / c * 1e9);
				acks.push({now + rtt, rtt, i});
				if (us >= horizon / 2)
					sent[i] += 4096;
			}
		}
		q = std::max(0.0, q - c / 1e6);
		if (us >= horizon / 2)
			qs.push_back(q);
	}
	const LoopResult r = summarize(sent, qs, c, horizon / 2);
	const double qdelay = r.q_p50 / c * 1e6;
	std::printf("  Swift 8 senders: goodput %.3f, Jain %.3f, queue p50 %.0f KB (%.1f us) "
		    "p99 %.0f KB\n", r.goodput, r.jain, r.q_p50 / 1e3, qdelay, r.q_p99 / 1e3);
	EXPECT_GE(r.goodput, 0.95);
	EXPECT_GE(r.jain, 0.95);
	EXPECT_NEAR(qdelay, p.base_target_us - base / 1e3, 15);
}

// ---------------------------------------------------------------------------
// CC off, and the per-QP slot

TEST(CcSlot, OffLeavesQpAlone)
{
	Config cfg;	// Algo::None
	CcSlot s(cfg);
	EXPECT_EQ(s->algo(), Algo::None);
	for (uint64_t us = 0; us < 1000; us++) {
		EXPECT_FALSE(s->on_cnp(us * kUs));
		s->on_bytes_sent(us * kUs, 4096);
		s->on_ack(us * kUs, 10000 * kUs, 4096);
		s->on_timer(us * kUs);
	}
	EXPECT_EQ(s->output(), Output{});
	EXPECT_EQ(s->next_timer_ns(), kNever);
	// Not paced: a pacer at rate 0 never delays a packet.
	Pacer pc;
	pc.set_rate(0, s->output().rate_Bps, 0);
	for (uint64_t i = 0; i < 1000; i++) {
		EXPECT_EQ(pc.next_eligible_ns(i, 65535), i);
		pc.consume(i, 65535);
	}

	// A DCQCN QP that never sees a CNP is never limited either.
	cfg.algo = Algo::Dcqcn;
	ASSERT_TRUE(s.init(cfg));
	for (uint64_t us = 0; us < 1000; us++) {
		s->on_bytes_sent(us * kUs, 4096);
		s->on_timer(us * kUs);
	}
	EXPECT_EQ(s->output(), Output{});
	EXPECT_EQ(s->next_timer_ns(), kNever);
}

// QPs live in a vector and are reset by assignment: the slot copies and
// moves with its state.
TEST(CcSlot, CopiesAndMovesWithState)
{
	struct FakeQp {
		bool valid = false;
		CcSlot cc;
	};
	Config cfg;
	cfg.algo = Algo::Dcqcn;
	std::vector<FakeQp> qps(4);
	qps[1].cc.init(cfg);
	ASSERT_TRUE(qps[1].cc->on_cnp(0));
	const Output o = qps[1].cc->output();
	qps.resize(1000);	// moves the elements
	EXPECT_EQ(qps[1].cc->algo(), Algo::Dcqcn);
	EXPECT_EQ(qps[1].cc->output(), o);
	qps[2] = qps[1];
	EXPECT_EQ(qps[2].cc->output(), o);
	qps[2].cc->on_timer(300 * kUs);
	EXPECT_NE(qps[2].cc->output(), o) << "copies are independent";
	EXPECT_EQ(qps[1].cc->output(), o);
	qps[1] = FakeQp();
	EXPECT_EQ(qps[1].cc->algo(), Algo::None);
	EXPECT_EQ(qps[1].cc->output(), Output{});
}

// A clock that steps back is taken as no time passing.
TEST(CcDcqcn, TimeBackwards)
{
	const DcqcnParams p;
	Dcqcn d(p, kLine);
	ASSERT_TRUE(d.on_cnp(1000 * kUs));
	const uint64_t rc = d.current_rate(), a = d.alpha_q32();
	d.on_timer(5 * kUs);
	d.on_bytes_sent(5 * kUs, 100);
	EXPECT_EQ(d.current_rate(), rc);
	EXPECT_EQ(d.alpha_q32(), a);
	EXPECT_FALSE(d.on_cnp(10 * kUs)) << "inside the monitor period";
	EXPECT_EQ(d.current_rate(), rc);
	CnpLimiter l;
	EXPECT_TRUE(l.on_ce(1000 * kUs, p));
	EXPECT_FALSE(l.on_ce(10 * kUs, p));
	Pacer pc;
	pc.set_rate(1000 * kUs, 1000000, 1000);
	pc.consume(1000 * kUs, 1000);
	EXPECT_FALSE(pc.eligible(10 * kUs, 1000));
	EXPECT_EQ(pc.next_eligible_ns(1000 * kUs, 1000), 2000 * kUs);
}

TEST(CcSlot, ChooseAlgorithm)
{
	Config cfg;
	cfg.algo = Algo::Dcqcn;
	CcSlot a(cfg);
	EXPECT_EQ(a->algo(), Algo::Dcqcn);
	EXPECT_TRUE(a->on_cnp(0));
	EXPECT_NE(a->output().rate_Bps, 0u);
	cfg.algo = Algo::Swift;
	ASSERT_TRUE(a.init(cfg));	// replaced in place
	EXPECT_EQ(a->algo(), Algo::Swift);
	EXPECT_EQ(a->output().window_bytes, 16u * 4096);
	// Parameters that are not valid: the QP gets no CC, and init says so.
	cfg.swift.mtu = 1;
	EXPECT_FALSE(a.init(cfg));
	EXPECT_EQ(a->algo(), Algo::None);
	cfg.algo = Algo::Dcqcn;
	cfg.dcqcn.rp_gd = 3;
	EXPECT_FALSE(a.init(cfg));
	EXPECT_EQ(a->algo(), Algo::None);
	// The QP follows the device's parameters live.
	cfg.dcqcn = DcqcnParams{};
	CcSlot b(cfg);
	ASSERT_TRUE(b->on_cnp(0));
	cfg.dcqcn.rp_min_rate = 50000;
	ASSERT_TRUE(b->on_cnp(10 * kUs));
	EXPECT_EQ(b->output().rate_Bps, mbps_to_Bps(50000));
	// A lowered rp_max_rate binds from the next cut or increase (and,
	// as in QCN, reaching it frees the QP's rate limiter).
	cfg.dcqcn.rp_min_rate = 1;
	cfg.dcqcn.rp_max_rate = 20000;
	ASSERT_TRUE(b->on_cnp(20 * kUs));
	EXPECT_LE(b->output().rate_Bps, mbps_to_Bps(20000));
	EXPECT_NE(b->output().rate_Bps, 0u);
}

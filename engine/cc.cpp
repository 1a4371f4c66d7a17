// SPDX-License-Identifier: GPL-2.0-or-later
// Congestion control, the algorithm layer: see cc.hpp for the interface
// and the time constants this model chose.
//
// DCQCN's reaction point (Zhu et al., SIGCOMM 2015, figure 7 and
// section 3), with mlx5's knobs; Rc is the current rate, Rt the target,
// α the congestion estimate, F = rp_threshold:
//
//   first CNP (the QP was not limited):  α = rp_initial_alpha_value;
//       Rt = Rc; Rc = rp_rate_to_set_on_first_cnp if it is not 0,
//       else the cut below.
//   CNP, at most one cut per rp_rate_reduce_monitor_period (a CNP inside
//   the period is ignored: rp_cnp_ignored):
//       Rt = Rc if rp_clamp_tgt_rate, or if rp_clamp_tgt_rate_ati and a
//            timer increase came since the last cut;
//       Rc = max(Rc - Rc·α/2, Rc·rp_min_dec_fac/100, rp_min_rate)
//            (α/2 is α·2^-rp_gd with α in 1/1024 and rp_gd = 11);
//       T = BC = 0; the increase timer and the byte counter restart.
//   α, every rp_dce_tcp_rtt (g = rp_dce_tcp_g/1024):
//       α = g·α + (1 - g)   if a CNP arrived in the period,
//       α = g·α             otherwise.
//   Increase event, every rp_time_reset (T += 1) and every rp_byte_reset
//   bytes sent (BC += 1):
//       max(T, BC) <= F:  fast recovery  Rc = (Rt + Rc)/2
//       min(T, BC) >  F:  hyper increase Rt += i·rp_hai_rate, i = min(T, BC) - F;
//                         Rc = (Rt + Rc)/2
//       otherwise:        additive increase Rt += rp_ai_rate; Rc = (Rt + Rc)/2
//   Rt and Rc never exceed rp_max_rate (or the line rate); when both are
//   back at it the QP is no longer limited and the next CNP is a first.
//
// Swift (Kumar et al., SIGCOMM 2020, algorithm 1), per ACK with delay d
// and target t:
//       d < t:  cwnd += ai·acked/cwnd (cwnd >= 1), cwnd += ai·acked (< 1)
//       d >= t, no decrease in the last RTT:
//               cwnd = cwnd·max(1 - β·(d - t)/d, 1 - max_mdf)
//       cwnd within [min_cwnd, max_cwnd]; below 1 packet the QP is paced
//       at cwnd·mtu/RTT.
#include "cc.hpp"

#include <algorithm>

namespace vrnic::cc {

namespace {

using u128 = unsigned __int128;
constexpr unsigned kPowShift = 62;
constexpr uint64_t kPowOne = uint64_t(1) << kPowShift;

// (x/2^62)^n for x <= 2^62, by squaring (at most 64 rounds), rounded to
// nearest at each step.
uint64_t pow_q62(uint64_t x, uint64_t n)
{
	constexpr u128 half = u128(1) << (kPowShift - 1);
	uint64_t r = kPowOne;
	while (n != 0 && r != 0) {
		if (n & 1)
			r = uint64_t((u128(r) * x + half) >> kPowShift);
		x = uint64_t((u128(x) * x + half) >> kPowShift);
		n >>= 1;
	}
	return r;
}

} // namespace

// ---------------------------------------------------------------------------
// Parameters

const std::array<DcqcnParamInfo, 20> kDcqcnParamTable = {
	DcqcnParamInfo{"rp_clamp_tgt_rate", &DcqcnParams::rp_clamp_tgt_rate, 0, 1},
	DcqcnParamInfo{"rp_clamp_tgt_rate_ati", &DcqcnParams::rp_clamp_tgt_rate_ati, 0, 1},
	DcqcnParamInfo{"rp_time_reset", &DcqcnParams::rp_time_reset, 1, kMaxTimeUs},
	// 0 turns the byte counter off (a timer-only RP, as in the HPCC
	// simulator); 1 GiB is far beyond any useful value.
	DcqcnParamInfo{"rp_byte_reset", &DcqcnParams::rp_byte_reset, 0, 1u << 30},
	DcqcnParamInfo{"rp_threshold", &DcqcnParams::rp_threshold, 0, 255},
	DcqcnParamInfo{"rp_ai_rate", &DcqcnParams::rp_ai_rate, 1, kMaxRateMbps},
	DcqcnParamInfo{"rp_max_rate", &DcqcnParams::rp_max_rate, 0, kMaxRateMbps},
	DcqcnParamInfo{"rp_hai_rate", &DcqcnParams::rp_hai_rate, 1, kMaxRateMbps},
	// A percentage of the rate a cut leaves; 0 would allow a rate of 0.
	DcqcnParamInfo{"rp_min_dec_fac", &DcqcnParams::rp_min_dec_fac, 1, 100},
	// At least 1 Mb/s, so that a QP can always send again.
	DcqcnParamInfo{"rp_min_rate", &DcqcnParams::rp_min_rate, 1, kMaxRateMbps},
	DcqcnParamInfo{"rp_rate_to_set_on_first_cnp", &DcqcnParams::rp_rate_to_set_on_first_cnp, 0, kMaxRateMbps},
	// g/1024 is the weight of the old α; 1024 would freeze it.
	DcqcnParamInfo{"rp_dce_tcp_g", &DcqcnParams::rp_dce_tcp_g, 0, 1023},
	DcqcnParamInfo{"rp_dce_tcp_rtt", &DcqcnParams::rp_dce_tcp_rtt, 1, kMaxTimeUs},
	DcqcnParamInfo{"rp_rate_reduce_monitor_period", &DcqcnParams::rp_rate_reduce_monitor_period, 0, kMaxTimeUs},
	DcqcnParamInfo{"rp_initial_alpha_value", &DcqcnParams::rp_initial_alpha_value, 0, 1023},
	// Below 10 a cut could exceed the rate itself (α/2^gd > 1).
	DcqcnParamInfo{"rp_gd", &DcqcnParams::rp_gd, 10, 31},
	DcqcnParamInfo{"np_min_time_between_cnps", &DcqcnParams::np_min_time_between_cnps, 0, kMaxTimeUs},
	DcqcnParamInfo{"np_cnp_dscp", &DcqcnParams::np_cnp_dscp, 0, 63},
	DcqcnParamInfo{"np_cnp_prio_mode", &DcqcnParams::np_cnp_prio_mode, 0, 1},
	DcqcnParamInfo{"np_cnp_prio", &DcqcnParams::np_cnp_prio, 0, 7},
};

namespace {

const DcqcnParamInfo *find_param(std::string_view name)
{
	for (const auto &i : kDcqcnParamTable)
		if (i.name == name)
			return &i;
	return nullptr;
}

bool consistent(const DcqcnParams &p)
{
	return p.rp_max_rate == 0 || p.rp_min_rate <= p.rp_max_rate;
}

} // namespace

ParamResult set_param(DcqcnParams &p, std::string_view name, uint32_t value)
{
	const DcqcnParamInfo *i = find_param(name);
	if (!i)
		return ParamResult::UnknownName;
	if (value < i->min || value > i->max)
		return ParamResult::OutOfRange;
	DcqcnParams n = p;
	n.*(i->field) = value;
	if (!consistent(n))
		return ParamResult::Inconsistent;
	p = n;
	return ParamResult::Ok;
}

bool get_param(const DcqcnParams &p, std::string_view name, uint32_t &value)
{
	const DcqcnParamInfo *i = find_param(name);
	if (!i)
		return false;
	value = p.*(i->field);
	return true;
}

bool valid(const DcqcnParams &p)
{
	return std::all_of(kDcqcnParamTable.begin(), kDcqcnParamTable.end(),
			   [&p](const DcqcnParamInfo &i) {
				   const uint32_t v = p.*(i.field);
				   return v >= i.min && v <= i.max;
			   }) &&
	       consistent(p);
}

ParamResult set_param(DcqcnParams &p, size_t index, uint32_t value)
{
	if (index >= kDcqcnParamTable.size())
		return ParamResult::UnknownName;
	return set_param(p, kDcqcnParamTable[index].name, value);
}

bool get_param(const DcqcnParams &p, size_t index, uint32_t &value)
{
	if (index >= kDcqcnParamTable.size())
		return false;
	value = p.*(kDcqcnParamTable[index].field);
	return true;
}

// The ranges of valid(const SwiftParams &) knob by knob; the bounds that
// depend on another knob are checked on the whole set.
const std::array<SwiftParamInfo, 8> kSwiftParamTable = {
	SwiftParamInfo{"mtu", &SwiftParams::mtu, 256, 65536},
	SwiftParamInfo{"base_target_us", &SwiftParams::base_target_us, 1, kMaxTimeUs},
	SwiftParamInfo{"ai_milli", &SwiftParams::ai_milli, 1, 100000},
	SwiftParamInfo{"beta_milli", &SwiftParams::beta_milli, 1, 1000},
	SwiftParamInfo{"max_mdf_milli", &SwiftParams::max_mdf_milli, 1, 999},
	SwiftParamInfo{"min_cwnd_q10", &SwiftParams::min_cwnd_q10, 1, 1u << 30},
	SwiftParamInfo{"max_cwnd_pkts", &SwiftParams::max_cwnd_pkts, 1, 1u << 20},
	SwiftParamInfo{"init_cwnd_pkts", &SwiftParams::init_cwnd_pkts, 1, 1u << 20},
};

namespace {

const SwiftParamInfo *find_swift_param(std::string_view name)
{
	for (const auto &i : kSwiftParamTable)
		if (i.name == name)
			return &i;
	return nullptr;
}

} // namespace

ParamResult set_param(SwiftParams &p, std::string_view name, uint32_t value)
{
	const SwiftParamInfo *i = find_swift_param(name);
	if (!i)
		return ParamResult::UnknownName;
	if (value < i->min || value > i->max)
		return ParamResult::OutOfRange;
	SwiftParams n = p;
	n.*(i->field) = value;
	if (!valid(n))
		return ParamResult::Inconsistent;
	p = n;
	return ParamResult::Ok;
}

bool get_param(const SwiftParams &p, std::string_view name, uint32_t &value)
{
	const SwiftParamInfo *i = find_swift_param(name);
	if (!i)
		return false;
	value = p.*(i->field);
	return true;
}

ParamResult set_param(SwiftParams &p, size_t index, uint32_t value)
{
	if (index >= kSwiftParamTable.size())
		return ParamResult::UnknownName;
	return set_param(p, kSwiftParamTable[index].name, value);
}

bool get_param(const SwiftParams &p, size_t index, uint32_t &value)
{
	if (index >= kSwiftParamTable.size())
		return false;
	value = p.*(kSwiftParamTable[index].field);
	return true;
}

bool valid(const SwiftParams &p)
{
	return p.mtu >= 256 && p.mtu <= 65536 &&
	       p.base_target_us >= 1 && p.base_target_us <= kMaxTimeUs &&
	       p.ai_milli >= 1 && p.ai_milli <= 100000 &&
	       p.beta_milli >= 1 && p.beta_milli <= 1000 &&
	       p.max_mdf_milli >= 1 && p.max_mdf_milli <= 999 &&
	       p.max_cwnd_pkts >= 1 && p.max_cwnd_pkts <= (1u << 20) &&
	       p.min_cwnd_q10 >= 1 &&
	       p.min_cwnd_q10 <= uint64_t(p.max_cwnd_pkts) << Swift::kQ &&
	       p.init_cwnd_pkts >= 1 && p.init_cwnd_pkts <= p.max_cwnd_pkts &&
	       (uint64_t(p.init_cwnd_pkts) << Swift::kQ) >= p.min_cwnd_q10;
}

// ---------------------------------------------------------------------------
// DCQCN

uint64_t Dcqcn::max_rate() const
{
	if (p_->rp_max_rate == 0)
		return line_;
	return std::min(line_, mbps_to_Bps(p_->rp_max_rate));
}

uint64_t Dcqcn::min_rate() const
{
	return std::min(mbps_to_Bps(p_->rp_min_rate), max_rate());
}

Dcqcn::Stage Dcqcn::stage() const
{
	if (!limited_)
		return Stage::Unlimited;
	const uint32_t f = p_->rp_threshold;
	if (std::max(t_, bc_) <= f)
		return Stage::FastRecovery;
	if (std::min(t_, bc_) > f)
		return Stage::Hyper;
	return Stage::Additive;
}

void Dcqcn::advance_alpha(uint64_t now)
{
	const uint64_t k = uint64_t(p_->rp_dce_tcp_rtt) * kNsPerUs;
	if (now < alpha_epoch_ || now - alpha_epoch_ < k)
		return;
	uint64_t n = (now - alpha_epoch_) / k;
	alpha_epoch_ += n * k;
	const uint64_t g = p_->rp_dce_tcp_g;
	if (cnp_in_period_) {
		alpha_ = (g * alpha_ + (1024 - g) * kAlphaOne + 512) / 1024;
		cnp_in_period_ = false;
		n--;
	}
	if (n != 0) {
		const uint64_t f = pow_q62(g << (kPowShift - 10), n);
		alpha_ = uint64_t((u128(alpha_) * f + (u128(1) << (kPowShift - 1))) >> kPowShift);
	}
}

void Dcqcn::increase(Event e)
{
	if (e == Event::Timer)
		t_ = std::min(t_ + 1, kStageCap);
	else
		bc_ = std::min(bc_ + 1, kStageCap);
	const uint32_t f = p_->rp_threshold;
	const uint64_t rmax = max_rate();
	if (std::max(t_, bc_) <= f) {
		// fast recovery: Rt stays
	} else if (std::min(t_, bc_) > f) {
		const uint64_t i = std::min(t_, bc_) - f;
		rt_ += std::min(rmax, i * mbps_to_Bps(p_->rp_hai_rate));
	} else {
		rt_ += std::min(rmax, mbps_to_Bps(p_->rp_ai_rate));
	}
	rt_ = std::min(rt_, rmax);
	rc_ = std::min((rc_ + rt_ + 1) / 2, rmax);
	if (rc_ == rmax && rt_ == rmax)
		limited_ = false;
}

void Dcqcn::advance_timer(uint64_t now)
{
	const uint64_t tr = uint64_t(p_->rp_time_reset) * kNsPerUs;
	if (now < timer_epoch_ || now - timer_epoch_ < tr)
		return;
	const uint64_t n = std::min<uint64_t>((now - timer_epoch_) / tr, kMaxCatchUp);
	for (uint64_t i = 0; i < n && limited_; i++) {
		timer_epoch_ += tr;
		increase(Event::Timer);
	}
}

void Dcqcn::drain_bytes()
{
	const uint64_t b = p_->rp_byte_reset;
	for (uint32_t i = 0; b != 0 && bytes_ >= b && i < kMaxCatchUp && limited_; i++) {
		bytes_ -= b;
		increase(Event::Bytes);
	}
	if (b == 0 || !limited_)
		bytes_ = 0;
}

void Dcqcn::advance(uint64_t now)
{
	if (!limited_)
		return;
	advance_alpha(now);
	advance_timer(now);
	drain_bytes();
}

void Dcqcn::cut(uint64_t now)
{
	if (p_->rp_clamp_tgt_rate || (p_->rp_clamp_tgt_rate_ati && t_ > 0))
		rt_ = rc_;
	// Rc·α/2^rp_gd with α in 1/1024, i.e. Rc·α_q32/2^(rp_gd + 22).
	const auto dec = uint64_t(std::min<u128>(
		rc_, (u128(rc_) * alpha_) >> (p_->rp_gd + kAlphaShift - 10)));
	const uint64_t keep = rc_ * p_->rp_min_dec_fac / 100;
	// min_rate() <= max_rate(); the latter binds after a lowered rp_max_rate.
	rc_ = std::min(std::max({rc_ - dec, keep, min_rate()}), max_rate());
	rt_ = std::clamp(rt_, rc_, max_rate());
	t_ = 0;
	bc_ = 0;
	bytes_ = 0;
	timer_epoch_ = now;
	last_cut_ = now;
}

bool Dcqcn::on_cnp(uint64_t now)
{
	if (!limited_) {
		limited_ = true;
		rc_ = rt_ = max_rate();
		alpha_ = uint64_t(p_->rp_initial_alpha_value) << (kAlphaShift - 10);
		alpha_epoch_ = now;
		cnp_in_period_ = true;
		t_ = 0;
		if (p_->rp_rate_to_set_on_first_cnp != 0) {
			rc_ = std::clamp(mbps_to_Bps(p_->rp_rate_to_set_on_first_cnp),
					 min_rate(), max_rate());
			bc_ = 0;
			bytes_ = 0;
			timer_epoch_ = now;
			last_cut_ = now;
		} else {
			cut(now);
		}
		return true;
	}
	advance(now);
	if (!limited_)
		return on_cnp(now);	// the increases just made it a first CNP
	cnp_in_period_ = true;
	if (now < last_cut_ ||
	    now - last_cut_ < uint64_t(p_->rp_rate_reduce_monitor_period) * kNsPerUs)
		return false;
	cut(now);
	return true;
}

void Dcqcn::on_timer(uint64_t now)
{
	advance(now);
}

void Dcqcn::on_bytes_sent(uint64_t now, uint32_t bytes)
{
	if (!limited_)
		return;
	advance(now);
	if (!limited_)
		return;
	bytes_ += bytes;
	drain_bytes();
}

uint64_t Dcqcn::next_timer_ns() const
{
	if (!limited_)
		return kNever;
	if (p_->rp_byte_reset != 0 && bytes_ >= p_->rp_byte_reset)
		return timer_epoch_;	// owed byte events: now
	return timer_epoch_ + uint64_t(p_->rp_time_reset) * kNsPerUs;
}

// ---------------------------------------------------------------------------
// Swift

Swift::Swift(const SwiftParams &p, uint64_t line_rate_Bps)
	: p_(&p), line_(line_rate_Bps),
	  cwnd_(uint64_t(p.init_cwnd_pkts) << kQ)
{
}

void Swift::on_ack(uint64_t now, uint64_t rtt_ns, uint32_t acked_bytes)
{
	// 1 ns to 10 s: a sample outside is a broken clock, not a delay.
	const uint64_t rtt = std::clamp<uint64_t>(rtt_ns, 1, 10 * kNsPerSec);
	srtt_ = srtt_ == 0 ? rtt : (7 * srtt_ + rtt) / 8;
	const uint64_t target = uint64_t(p_->base_target_us) * kNsPerUs;
	// Packets acknowledged, Q10; an ACK acknowledges at least a byte.
	const uint64_t acked = (uint64_t(std::max<uint32_t>(acked_bytes, 1)) << kQ) / p_->mtu;
	const uint64_t one = uint64_t(1) << kQ;

	if (rtt < target) {
		if (cwnd_ >= one)
			cwnd_ += (uint64_t(p_->ai_milli) << kQ) * acked / (1000 * cwnd_);
		else
			cwnd_ += p_->ai_milli * acked / 1000;
	} else if (!decreased_ || (now >= last_decrease_ && now - last_decrease_ >= rtt)) {
		// 1 - β·(d - t)/d, at most max_mdf off: in 1/2^16.
		const uint64_t excess = (uint64_t(p_->beta_milli) << 16) * (rtt - target) /
					(1000 * rtt);
		const uint64_t cap = (uint64_t(p_->max_mdf_milli) << 16) / 1000;
		cwnd_ = (cwnd_ * ((uint64_t(1) << 16) - std::min(excess, cap))) >> 16;
		last_decrease_ = now;
		decreased_ = true;
		decreases_++;
	}
	cwnd_ = std::clamp<uint64_t>(cwnd_, p_->min_cwnd_q10,
				     uint64_t(p_->max_cwnd_pkts) << kQ);
}

Output Swift::output() const
{
	const uint64_t one = uint64_t(1) << kQ;
	if (cwnd_ >= one)
		return {0, (cwnd_ * p_->mtu) >> kQ};
	// One packet per RTT/cwnd.
	const uint64_t rtt = srtt_ != 0 ? srtt_ : uint64_t(p_->base_target_us) * kNsPerUs;
	const uint64_t rate = cwnd_ * p_->mtu * kNsPerSec / (rtt << kQ);
	return {std::clamp<uint64_t>(rate, 1, line_), p_->mtu};
}

// ---------------------------------------------------------------------------
// The per-QP slot

void CcSlot::init_none()
{
	make<NoCc>();
}

bool CcSlot::init(const Config &cfg)
{
	switch (cfg.algo) {
	case Algo::Dcqcn:
		if (cfg.line_rate_Bps == 0 || !valid(cfg.dcqcn))
			break;
		make<Dcqcn>(cfg.dcqcn, cfg.line_rate_Bps);
		return true;
	case Algo::Swift:
		if (cfg.line_rate_Bps == 0 || !valid(cfg.swift))
			break;
		make<Swift>(cfg.swift, cfg.line_rate_Bps);
		return true;
	case Algo::None:
		init_none();
		return true;
	}
	init_none();
	return false;
}

// ---------------------------------------------------------------------------
// Notification point

bool CnpLimiter::on_ce(uint64_t now, const DcqcnParams &p)
{
	if (sent_ && (now < last_ ||
		      now - last_ < uint64_t(p.np_min_time_between_cnps) * kNsPerUs))
		return false;
	sent_ = true;
	last_ = now;
	return true;
}

// ---------------------------------------------------------------------------
// Pacer

namespace {

constexpr int64_t kMinTokens = -(int64_t(1) << 62);

} // namespace

uint64_t Pacer::default_burst(uint64_t rate_Bps)
{
	const uint64_t b = rate_Bps / (kNsPerSec / kDefaultBurstNs);
	return std::clamp<uint64_t>(b, kMinDefaultBurst, kMaxBurst);
}

int64_t Pacer::need(uint32_t bytes) const
{
	return int64_t(std::min<uint64_t>(bytes, burst_) * kNsPerSec);
}

int64_t Pacer::tokens_at(uint64_t now) const
{
	const auto cap = int64_t(burst_ * kNsPerSec);
	if (rate_ == 0 || tokens_ >= cap)
		return cap;
	const uint64_t dt = now > last_ ? now - last_ : 0;
	const auto room = uint64_t(cap - tokens_);
	// dt·rate could overflow only when it is far more than room.
	if (dt > room / rate_)
		return cap;
	return std::min(cap, tokens_ + int64_t(dt * rate_));
}

void Pacer::set_rate(uint64_t now, uint64_t rate_Bps, uint64_t burst_bytes)
{
	const bool was_paced = rate_ != 0;
	const int64_t t = tokens_at(now);
	rate_ = std::min(rate_Bps, kMaxRate);
	burst_ = std::clamp<uint64_t>(burst_bytes, 1, kMaxBurst);
	const auto cap = int64_t(burst_ * kNsPerSec);
	tokens_ = was_paced ? std::min(t, cap) : cap;
	last_ = std::max(last_, now);
}

bool Pacer::eligible(uint64_t now, uint32_t bytes) const
{
	return rate_ == 0 || tokens_at(now) >= need(bytes);
}

uint64_t Pacer::next_eligible_ns(uint64_t now, uint32_t bytes) const
{
	if (eligible(now, bytes))
		return now;
	// From the last consume at the earliest, should the clock step back.
	const uint64_t t = std::max(now, last_);
	const auto deficit = uint64_t(need(bytes) - tokens_at(t));
	return t + (deficit + rate_ - 1) / rate_;
}

void Pacer::consume(uint64_t now, uint32_t bytes)
{
	if (rate_ == 0) {
		last_ = std::max(last_, now);
		return;
	}
	const int64_t t = tokens_at(now);
	const auto b = int64_t(uint64_t(bytes) * kNsPerSec);
	tokens_ = t - kMinTokens < b ? kMinTokens : t - b;
	last_ = std::max(last_, now);
}

} // namespace vrnic::cc

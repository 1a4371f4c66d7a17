// SPDX-License-Identifier: GPL-2.0-or-later
// Congestion control, the algorithm layer (issue 24): a pluggable per-QP
// reaction point (DCQCN as mlx5 implements it, and Swift, a delay-based
// algorithm that needs no switch), the notification point's CNP rate
// limit, and a token-bucket pacer.  Pure arithmetic: no platform, no
// wire, no heap after a QP's state is created, no exceptions, and every
// call runs in bounded time.  The transport (which QP sends when, the CNP
// bytes, the counters, the admin command) is built on top of this.
//
// Time is the platform clock in ns (now_ns()); every call takes it.  A
// time earlier than one already seen counts as no time passing (no timer
// fires, no CNP interval or monitor period ends).  Rates are bytes
// per second, 0 meaning "not limited".  The mlx5 knobs keep mlx5's units:
// rates in Mb/s (10^6 bit/s, 125000 bytes/s), times in µs, α in 1/1024.
//
// Time constants and choices this model had to make (also in
// Documentation/vrnic-spec.rst, "Congestion control (engine model)"):
//
// * Every mlx5 DCQCN default is kept, time constants included.  The
//   engine cannot tick every µs (QEMU timers and bottom halves are late
//   by tens of µs), so nothing here is tick-driven: the α timer
//   (rp_dce_tcp_rtt, 1 µs) and the rate-increase timer (rp_time_reset,
//   300 µs) are evaluated in closed form at the next event for every
//   period that has elapsed, exactly as if they had fired on time.  The
//   owner only needs to call on_timer() at or after next_timer_ns() for
//   a rate increase to become visible; calling late delays it, it does
//   not change it.
// * np_min_time_between_cnps: 4 µs.  ConnectX-5 dumps show 2 and 4; 4 is
//   the more common one and equals rp_rate_reduce_monitor_period, so one
//   CNP per period reaches a reaction point that cuts at most once per
//   period.
// * np_cnp_prio_mode: 0, i.e. CNPs take np_cnp_prio (writing np_cnp_prio
//   in mlx5's debugfs sets the mode to 0 as well); 1 would mean the CE
//   packet's own priority.
// * A rate-increase event is processed at most kMaxCatchUp (256) at a
//   time; more owed events (a QP not called for a long time, or a tiny
//   rp_byte_reset) are kept and processed by the next calls.  Once the
//   rate is back at the maximum the QP is unlimited and owes nothing.
// * The stage counters T and BC saturate at kStageCap (65535), so the
//   hyper-increase step i·rp_hai_rate stays bounded.
// * Fast recovery and increases average with rounding up, so the current
//   rate reaches the target exactly instead of stopping one byte/s short.
// * Swift's target delay is 100 µs: above the device-to-device round trip
//   of two QEMU processes on one host (tens of µs) with room for host
//   scheduling jitter.  The bench is where it gets calibrated.
// * Pacer burst helper: rate × 50 µs, at least 16 KiB (two 4 KiB-MTU
//   frames with headers).  Host timers are late by tens of µs; a burst
//   that covers the lateness lets a late scheduler pass send what it is
//   owed instead of losing rate.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>
#include <type_traits>

namespace vrnic::cc {

inline constexpr uint64_t kNsPerUs = 1000;
inline constexpr uint64_t kNsPerSec = 1000000000;
inline constexpr uint64_t kBytesPerSecPerMbps = 125000;
inline constexpr uint64_t kNever = ~uint64_t(0);

constexpr uint64_t mbps_to_Bps(uint64_t mbps) { return mbps * kBytesPerSecPerMbps; }

// ---------------------------------------------------------------------------
// Parameters: mlx5's upstream debugfs names (drivers/infiniband/hw/mlx5/
// cong.c, cc_params/), mlx5's defaults (ConnectX-5) and units.

struct DcqcnParams {
	uint32_t rp_clamp_tgt_rate = 0;		// 1: target := current on every cut
	uint32_t rp_clamp_tgt_rate_ati = 1;	// 1: ... if a timer increase came since the last cut
	uint32_t rp_time_reset = 300;		// µs, rate-increase timer
	uint32_t rp_byte_reset = 32767;		// bytes per byte-counter event; 0: no byte counter
	uint32_t rp_threshold = 1;		// F: fast-recovery steps
	uint32_t rp_ai_rate = 5;		// Mb/s, additive increase
	uint32_t rp_max_rate = 0;		// Mb/s, 0: the line rate
	uint32_t rp_hai_rate = 50;		// Mb/s, hyper increase
	uint32_t rp_min_dec_fac = 50;		// %, a cut leaves at least this much
	uint32_t rp_min_rate = 1;		// Mb/s, floor
	uint32_t rp_rate_to_set_on_first_cnp = 0; // Mb/s, 0: cut as any CNP
	uint32_t rp_dce_tcp_g = 1019;		// /1024, weight of the old α
	uint32_t rp_dce_tcp_rtt = 1;		// µs, α update period
	uint32_t rp_rate_reduce_monitor_period = 4; // µs, at most one cut per period
	uint32_t rp_initial_alpha_value = 1023;	// /1024, α on the first CNP
	uint32_t rp_gd = 11;			// cut = Rc·α/2^rp_gd (α in 1/1024): 11 is Rc·α/2
	uint32_t np_min_time_between_cnps = 4;	// µs, per QP
	uint32_t np_cnp_dscp = 48;
	uint32_t np_cnp_prio_mode = 0;		// 0: np_cnp_prio; 1: the CE packet's priority
	uint32_t np_cnp_prio = 6;		// 802.1p PCP of CNPs
};

// One knob: its mlx5 name, where it lives and the values accepted.
struct DcqcnParamInfo {
	std::string_view name;
	uint32_t DcqcnParams::*field;
	uint32_t min;
	uint32_t max;
};

// Bounds of the knobs (the PRM fields are 32 bits; these are the values
// that make sense for the model, see cc.cpp).
inline constexpr uint32_t kMaxRateMbps = 1000000;	// 1 Tb/s
inline constexpr uint32_t kMaxTimeUs = 10000000;	// 10 s

// In mlx5's debugfs order (mlx5_ib_dbg_cc_name[]).
extern const std::array<DcqcnParamInfo, 20> kDcqcnParamTable;

enum class ParamResult : uint8_t { Ok, UnknownName, OutOfRange, Inconsistent };

// Set one knob by its mlx5 name.  A value outside the knob's range, or
// one that would make rp_min_rate exceed a non-zero rp_max_rate, is
// refused and nothing changes.
ParamResult set_param(DcqcnParams &p, std::string_view name, uint32_t value);
[[nodiscard]] bool get_param(const DcqcnParams &p, std::string_view name,
			     uint32_t &value);
// Whether every knob is in range and the set is consistent.
[[nodiscard]] bool valid(const DcqcnParams &p);
// The same by position in kDcqcnParamTable (SET_CC and QUERY_CC use it);
// an index past the table is UnknownName.
ParamResult set_param(DcqcnParams &p, size_t index, uint32_t value);
[[nodiscard]] bool get_param(const DcqcnParams &p, size_t index,
			     uint32_t &value);

// Swift (Kumar et al., SIGCOMM 2020), the delay-based algorithm.  The
// window is in packets of mtu bytes, in 1/1024 packet.
struct SwiftParams {
	uint32_t mtu = 4096;			// bytes per packet (payload the window counts)
	uint32_t base_target_us = 100;		// target delay
	uint32_t ai_milli = 1000;		// additive increase, 1/1000 packet per RTT
	uint32_t beta_milli = 800;		// multiplicative decrease gain
	uint32_t max_mdf_milli = 500;		// largest decrease in one RTT
	uint32_t min_cwnd_q10 = 1;		// 1/1024 packet (paced below 1)
	uint32_t max_cwnd_pkts = 1024;
	uint32_t init_cwnd_pkts = 16;
};
[[nodiscard]] bool valid(const SwiftParams &p);

// Swift's knobs, as kDcqcnParamTable: the order is SET_CC's index (and
// the debugfs files swift_<name>).  Beyond each knob's range the set
// must be consistent: min_cwnd_q10 <= max_cwnd_pkts packets, and
// min_cwnd_q10 <= init_cwnd_pkts packets <= max_cwnd_pkts.
struct SwiftParamInfo {
	std::string_view name;
	uint32_t SwiftParams::*field;
	uint32_t min;
	uint32_t max;
};
extern const std::array<SwiftParamInfo, 8> kSwiftParamTable;

ParamResult set_param(SwiftParams &p, std::string_view name, uint32_t value);
[[nodiscard]] bool get_param(const SwiftParams &p, std::string_view name,
			     uint32_t &value);
ParamResult set_param(SwiftParams &p, size_t index, uint32_t value);
[[nodiscard]] bool get_param(const SwiftParams &p, size_t index,
			     uint32_t &value);

// ---------------------------------------------------------------------------
// The reaction point interface.

enum class Algo : uint8_t {
	None = 0,	// congestion control off: never limited
	Dcqcn = 1,
	Swift = 2,
};

// What the QP may send: a rate (bytes/s) for the pacer and/or a window
// of bytes in flight.  0 means that limit does not apply.
struct Output {
	uint64_t rate_Bps = 0;
	uint64_t window_bytes = 0;
	bool operator==(const Output &) const = default;
};

// The device-wide choice and settings; QP states point at it, so a
// change of parameters applies to every QP from its next event.
struct Config {
	Algo algo = Algo::None;
	uint64_t line_rate_Bps = mbps_to_Bps(100000);	// QUERY_PORT's 100 Gb/s
	DcqcnParams dcqcn{};
	SwiftParams swift{};
};

class ReactionPoint {
public:
	virtual ~ReactionPoint() = default;

	// A CNP for this QP: true if it was handled (rp_cnp_handled), false
	// if ignored (rp_cnp_ignored).
	virtual bool on_cnp(uint64_t now) = 0;
	// Time passes (the owner calls it at next_timer_ns() or later).
	virtual void on_timer(uint64_t now) = 0;
	// A packet of `bytes` left the QP.
	virtual void on_bytes_sent(uint64_t now, uint32_t bytes) = 0;
	// An ACK of `acked_bytes`, and the round trip measured from the
	// device's own send time of the acknowledged packet.
	virtual void on_ack(uint64_t now, uint64_t rtt_ns, uint32_t acked_bytes) = 0;
	// When on_timer() next has something to do; kNever if nothing.
	[[nodiscard]] virtual uint64_t next_timer_ns() const = 0;
	[[nodiscard]] virtual Output output() const = 0;
	[[nodiscard]] virtual Algo algo() const = 0;
	// Copy-construct this state at buf (CcSlot's storage).
	virtual void clone_into(void *buf) const = 0;

protected:
	ReactionPoint() = default;
	ReactionPoint(const ReactionPoint &) = default;
	ReactionPoint &operator=(const ReactionPoint &) = default;
	ReactionPoint(ReactionPoint &&) = default;
	ReactionPoint &operator=(ReactionPoint &&) = default;
};

// Congestion control off.
class NoCc final : public ReactionPoint {
public:
	bool on_cnp(uint64_t) override { return false; }
	void on_timer(uint64_t) override {}
	void on_bytes_sent(uint64_t, uint32_t) override {}
	void on_ack(uint64_t, uint64_t, uint32_t) override {}
	[[nodiscard]] uint64_t next_timer_ns() const override { return kNever; }
	[[nodiscard]] Output output() const override { return {}; }
	[[nodiscard]] Algo algo() const override { return Algo::None; }
	void clone_into(void *buf) const override { new (buf) NoCc(*this); }
};

// DCQCN's reaction point (Zhu et al., SIGCOMM 2015) as mlx5 implements
// it; see cc.cpp for the equations.
class Dcqcn final : public ReactionPoint {
public:
	// α is kept in Q32 (1.0 = 2^32) so that its decay stays exponential
	// down to small values and follows the real-valued equations to
	// ~1e-9; alpha() reports it in mlx5's 1/1024.
	static constexpr unsigned kAlphaShift = 32;
	static constexpr uint64_t kAlphaOne = uint64_t(1) << kAlphaShift;
	static constexpr uint32_t kMaxCatchUp = 256;
	static constexpr uint32_t kStageCap = 65535;

	enum class Stage : uint8_t { Unlimited, FastRecovery, Additive, Hyper };

	Dcqcn(const DcqcnParams &p, uint64_t line_rate_Bps)
		: p_(&p), line_(line_rate_Bps), rc_(max_rate()), rt_(rc_) {}

	bool on_cnp(uint64_t now) override;
	void on_timer(uint64_t now) override;
	void on_bytes_sent(uint64_t now, uint32_t bytes) override;
	void on_ack(uint64_t, uint64_t, uint32_t) override {}
	[[nodiscard]] uint64_t next_timer_ns() const override;
	[[nodiscard]] Output output() const override
	{
		return {limited_ ? rc_ : 0, 0};
	}
	[[nodiscard]] Algo algo() const override { return Algo::Dcqcn; }
	void clone_into(void *buf) const override { new (buf) Dcqcn(*this); }

	// State, for tests, restrack and the bench.
	[[nodiscard]] bool limited() const { return limited_; }
	[[nodiscard]] uint64_t current_rate() const { return rc_; }
	[[nodiscard]] uint64_t target_rate() const { return rt_; }
	[[nodiscard]] uint64_t alpha_q32() const { return alpha_; }
	[[nodiscard]] uint32_t alpha() const { return uint32_t(alpha_ >> (kAlphaShift - 10)); }
	[[nodiscard]] uint32_t timer_stage() const { return t_; }
	[[nodiscard]] uint32_t byte_stage() const { return bc_; }
	[[nodiscard]] Stage stage() const;
	[[nodiscard]] uint64_t max_rate() const;
	[[nodiscard]] uint64_t min_rate() const;

private:
	enum class Event : uint8_t { Timer, Bytes };
	void advance(uint64_t now);
	void advance_alpha(uint64_t now);
	void advance_timer(uint64_t now);
	void drain_bytes();
	void increase(Event e);
	void cut(uint64_t now);

	const DcqcnParams *p_;
	uint64_t line_;
	uint64_t rc_;			// current rate, bytes/s
	uint64_t rt_;			// target rate
	uint64_t alpha_ = 0;		// Q32
	uint64_t alpha_epoch_ = 0;	// start of the current α period
	uint64_t timer_epoch_ = 0;	// start of the current increase period
	uint64_t last_cut_ = 0;
	uint64_t bytes_ = 0;		// toward the next byte-counter event
	uint32_t t_ = 0;		// timer events since the last cut
	uint32_t bc_ = 0;		// byte-counter events since the last cut
	bool limited_ = false;
	bool cnp_in_period_ = false;	// a CNP arrived in the current α period
};

// Swift's sender (Kumar et al., SIGCOMM 2020, algorithm 1): additive
// increase below the target delay, multiplicative decrease in
// proportion to the excess delay above it, at most once per RTT; below
// one packet the window becomes a pacing rate.
class Swift final : public ReactionPoint {
public:
	static constexpr unsigned kQ = 10;	// window fraction bits
	Swift(const SwiftParams &p, uint64_t line_rate_Bps);

	bool on_cnp(uint64_t) override { return false; }
	void on_timer(uint64_t) override {}
	void on_bytes_sent(uint64_t, uint32_t) override {}
	void on_ack(uint64_t now, uint64_t rtt_ns, uint32_t acked_bytes) override;
	[[nodiscard]] uint64_t next_timer_ns() const override { return kNever; }
	[[nodiscard]] Output output() const override;
	[[nodiscard]] Algo algo() const override { return Algo::Swift; }
	void clone_into(void *buf) const override { new (buf) Swift(*this); }

	[[nodiscard]] uint64_t cwnd_q10() const { return cwnd_; }
	[[nodiscard]] uint64_t srtt_ns() const { return srtt_; }
	[[nodiscard]] uint64_t decreases() const { return decreases_; }

private:
	const SwiftParams *p_;
	uint64_t line_;
	uint64_t cwnd_;			// packets, Q10
	uint64_t srtt_ = 0;
	uint64_t last_decrease_ = 0;
	uint64_t decreases_ = 0;
	bool decreased_ = false;
};

// A QP's reaction point, stored inline (no heap).  Created from the
// device's Config when the QP is made (or its algorithm chosen);
// replaced with Algo::None when CC is off.  To add an algorithm: a class
// derived from ReactionPoint, a value in Algo, its parameters in Config,
// and one case in CcSlot::init(); kStorage must hold it (static_assert).
class CcSlot {
public:
	CcSlot() { init_none(); }
	explicit CcSlot(const Config &cfg) { init(cfg); }
	// Copies and moves copy the state (a QP is reset by assignment).
	CcSlot(const CcSlot &o) { copy(o); }
	CcSlot &operator=(const CcSlot &o)
	{
		if (this != &o)
			copy(o);
		return *this;
	}
	CcSlot(CcSlot &&o) noexcept { copy(o); }
	CcSlot &operator=(CcSlot &&o) noexcept
	{
		if (this != &o)
			copy(o);
		return *this;
	}
	~CcSlot() { destroy(); }

	// (Re)create the state for cfg.algo; an algorithm whose parameters
	// are invalid falls back to None (and init returns false).
	bool init(const Config &cfg);
	void init_none();

	ReactionPoint &operator*() { return *rp(); }
	ReactionPoint *operator->() { return rp(); }
	const ReactionPoint &operator*() const { return *rp(); }
	const ReactionPoint *operator->() const { return rp(); }

private:
	static constexpr size_t kStorage = 128;
	// The algorithms hold 64-bit integers and pointers: 8 is enough,
	// and keeps the QP that embeds the slot free of 16-byte padding.
	static constexpr size_t kAlign = alignof(uint64_t);
	void copy(const CcSlot &o)
	{
		destroy();
		o.rp()->clone_into(buf_);
		live_ = true;
	}
	void destroy()
	{
		if (live_)
			rp()->~ReactionPoint();
		live_ = false;
	}
	ReactionPoint *rp()
	{
		return std::launder(reinterpret_cast<ReactionPoint *>(buf_));
	}
	[[nodiscard]] const ReactionPoint *rp() const
	{
		return std::launder(reinterpret_cast<const ReactionPoint *>(buf_));
	}
	template <typename T, typename... A> void make(A &&...a)
	{
		static_assert(sizeof(T) <= kStorage, "CcSlot::kStorage too small");
		static_assert(alignof(T) <= kAlign, "CcSlot::kAlign too small");
		static_assert(std::is_base_of_v<ReactionPoint, T>);
		destroy();
		new (buf_) T(static_cast<A &&>(a)...);
		live_ = true;
	}

	alignas(kAlign) unsigned char buf_[kStorage];
	bool live_ = false;
};

// ---------------------------------------------------------------------------
// Notification point: at most one CNP per QP per np_min_time_between_cnps.

class CnpLimiter {
public:
	// A CE-marked packet arrived for this QP at now: true if a CNP is to
	// be sent (and the interval starts again), false if one was sent
	// less than np_min_time_between_cnps ago.
	bool on_ce(uint64_t now, const DcqcnParams &p);
	void reset() { sent_ = false; }

private:
	uint64_t last_ = 0;
	bool sent_ = false;
};

// ---------------------------------------------------------------------------
// Token-bucket pacer.  Tokens are kept in byte·ns (one byte = 10^9), so a
// rate in bytes/s adds exactly `rate` of them per ns: integer arithmetic
// with no rounding, and no drift over any run.  A packet may leave when
// the bucket holds its size (or is full, for a packet larger than the
// burst); the bucket then goes down by its size, negative for an
// oversized packet.  Rate 0: not paced.

class Pacer {
public:
	static constexpr uint64_t kMaxRate = mbps_to_Bps(kMaxRateMbps) * 8;
	static constexpr uint64_t kMaxBurst = uint64_t(16) << 20;
	static constexpr uint32_t kMinDefaultBurst = 16384;
	static constexpr uint64_t kDefaultBurstNs = 50 * kNsPerUs;

	// The burst this model suggests for a rate (see the top comment).
	static uint64_t default_burst(uint64_t rate_Bps);

	// Change rate and burst at now; tokens earned so far at the old rate
	// are kept (up to the new burst).  A bucket starts full.
	void set_rate(uint64_t now, uint64_t rate_Bps, uint64_t burst_bytes);
	[[nodiscard]] uint64_t rate() const { return rate_; }
	[[nodiscard]] uint64_t burst() const { return burst_; }
	[[nodiscard]] bool eligible(uint64_t now, uint32_t bytes) const;
	// The earliest time >= now at which a packet of `bytes` may leave.
	[[nodiscard]] uint64_t next_eligible_ns(uint64_t now, uint32_t bytes) const;
	// A packet of `bytes` leaves at now (whether or not it was eligible).
	void consume(uint64_t now, uint32_t bytes);

private:
	[[nodiscard]] int64_t tokens_at(uint64_t now) const;
	[[nodiscard]] int64_t need(uint32_t bytes) const;

	uint64_t rate_ = 0;
	uint64_t burst_ = 0;
	int64_t tokens_ = 0;		// byte·ns at last_
	uint64_t last_ = 0;
};

} // namespace vrnic::cc

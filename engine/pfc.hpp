// SPDX-License-Identifier: GPL-2.0-or-later
// The port's MAC control receiver: 802.1Qbb PFC and 802.3x PAUSE frames
// pause the device's own transmission per priority (IEEE 802.1Q-2018
// clause 36; 802.3 annex 31B/31D).
//
// A MAC control frame goes to 01-80-C2-00-00-01 with EtherType 0x8808.
// After the EtherType: a 16-bit opcode, then
//   0x0001 PAUSE: one 16-bit pause time, for every priority;
//   0x0101 PFC:   a 16-bit class-enable vector (bit p: priority p, the
//                 high byte reserved) and eight 16-bit pause times.
// A time is in quanta of 512 bit times at the port's speed; 0 resumes.
// The frame is consumed by the MAC: it never reaches the RX ring.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <span>

namespace vrnic {

struct PfcCounters {
	// Per priority, named after mlx5's ethtool counters.
	std::array<uint64_t, 8> rx_pause{};		// rx_prio%d_pause
	std::array<uint64_t, 8> rx_pause_transition{};	// ..._transition
	std::array<uint64_t, 8> rx_pause_duration_ns{};	// ended pauses
	uint64_t mac_control_unknown = 0;	// other opcodes, dropped
	uint64_t mac_control_malformed = 0;	// too short, dropped
	// A priority held without a break for kStallNs: its pauses are
	// ignored for the next kStallNs (mlx5's pause storm prevention).
	uint64_t tx_pause_storm_error_events = 0;
};

class PortPause {
public:
	static constexpr unsigned int kPrios = 8;
	static constexpr uint16_t kEthTypeMacControl = 0x8808;
	static constexpr uint16_t kOpPause = 0x0001;
	static constexpr uint16_t kOpPfc = 0x0101;
	// Destination, EtherType, opcode, vector, 8 times.
	static constexpr size_t kPfcLen = 14 + 2 + 2 + 16;
	static constexpr size_t kPauseLen = 14 + 2 + 2;
	// Pause storm prevention, as mlx5's pfc-prevention-tout (default
	// 8 s): a peer that holds a priority without a break this long is
	// stuck or hostile, and the port stops honouring it for as long.
	// Pauses less than kStallGapNs apart count as one.
	static constexpr uint64_t kStallNs = 8000000000ull;
	static constexpr uint64_t kStallGapNs = 100000;

	enum class Rx : uint8_t { NotControl, Pfc, Pause, Unknown, Malformed };

	// Is this a MAC control frame?  Only untagged ones are: 802.1Q
	// never tags them.
	[[nodiscard]] static bool is_control(std::span<const uint8_t> f)
	{
		return f.size() >= 14 && f[12] == 0x88 && f[13] == 0x08;
	}

	// Take a received frame.  NotControl: not a MAC control frame, the
	// caller carries on with it; every other result: consumed.
	Rx receive(std::span<const uint8_t> f, uint64_t now, uint32_t speed_mbps)
	{
		if (!is_control(f))
			return Rx::NotControl;
		if (f.size() < 16) {
			cnt_.mac_control_malformed++;
			return Rx::Malformed;
		}
		const uint16_t op = be16(&f[14]);
		if (op == kOpPfc) {
			if (f.size() < kPfcLen) {
				cnt_.mac_control_malformed++;
				return Rx::Malformed;
			}
			const uint8_t enable = f[17];
			for (unsigned int p = 0; p < kPrios; p++)
				if (enable & (1u << p))
					pause(p, be16(&f[18 + 2 * p]), now,
					      speed_mbps);
			return Rx::Pfc;
		}
		if (op == kOpPause) {
			if (f.size() < kPauseLen) {
				cnt_.mac_control_malformed++;
				return Rx::Malformed;
			}
			for (unsigned int p = 0; p < kPrios; p++)
				pause(p, be16(&f[16]), now, speed_mbps);
			return Rx::Pause;
		}
		cnt_.mac_control_unknown++;
		return Rx::Unknown;
	}

	// May the port send on priority prio at now?  An expired pause ends
	// here (and its time is counted).
	[[nodiscard]] bool paused(unsigned int prio, uint64_t now)
	{
		prio &= kPrios - 1;
		if (!until_[prio])
			return false;
		if (now < until_[prio])
			return true;
		end(prio, until_[prio]);
		return false;
	}

	// Is any priority paused (or was, with its end not yet seen)?
	[[nodiscard]] bool any() const
	{
		for (uint64_t u : until_)
			if (u)
				return true;
		return false;
	}

	// End the pauses whose time ran out by now; true if any did.
	bool expire(uint64_t now)
	{
		bool ended = false;

		for (unsigned int p = 0; p < kPrios; p++)
			if (until_[p] && until_[p] <= now) {
				end(p, until_[p]);
				ended = true;
			}
		return ended;
	}

	// The earliest time a pause ends, 0 if none is on.
	[[nodiscard]] uint64_t next_expiry() const
	{
		uint64_t next = 0;

		for (uint64_t u : until_)
			if (u && (!next || u < next))
				next = u;
		return next;
	}

	// Counters, with the time of pauses still on counted up to now.
	[[nodiscard]] PfcCounters counters(uint64_t now) const
	{
		PfcCounters c = cnt_;

		for (unsigned int p = 0; p < kPrios; p++)
			if (until_[p])
				c.rx_pause_duration_ns[p] +=
					std::min(now, until_[p]) - since_[p];
		return c;
	}

	void reset()
	{
		until_ = {};
		since_ = {};
		last_end_ = {};
		storm_since_ = {};
		ignore_until_ = {};
		cnt_ = {};
	}

	// Quanta (512 bit times) to ns at speed_mbps; 0 Mb/s reads as
	// 100 Gb/s, the device's default port speed.
	[[nodiscard]] static uint64_t quanta_ns(uint16_t quanta,
						uint32_t speed_mbps)
	{
		const uint64_t mbps = speed_mbps ? speed_mbps : 100000;

		return (uint64_t(quanta) * 512 * 1000 + mbps - 1) / mbps;
	}

private:
	static uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

	void pause(unsigned int p, uint16_t quanta, uint64_t now,
		   uint32_t speed_mbps)
	{
		cnt_.rx_pause[p]++;
		// A pause that ran out before this frame ends at its time.
		if (until_[p] && until_[p] <= now)
			end(p, until_[p]);
		if (!quanta) {
			if (until_[p])
				end(p, now);
			return;
		}
		if (now < ignore_until_[p])
			return;		// storm: not honoured for now
		if (!until_[p]) {
			since_[p] = now;
			cnt_.rx_pause_transition[p]++;
			if (!storm_since_[p] || now - last_end_[p] > kStallGapNs)
				storm_since_[p] = now;
		}
		if (now - storm_since_[p] >= kStallNs) {
			end(p, now);
			storm_since_[p] = 0;
			ignore_until_[p] = now + kStallNs;
			cnt_.tx_pause_storm_error_events++;
			return;
		}
		// A refresh replaces the time left (802.1Qbb 36.1.3.3).
		until_[p] = now + quanta_ns(quanta, speed_mbps);
	}

	void end(unsigned int p, uint64_t at)
	{
		cnt_.rx_pause_duration_ns[p] += at - since_[p];
		until_[p] = 0;
		since_[p] = 0;
		last_end_[p] = at;
	}

	std::array<uint64_t, kPrios> until_{};	// 0: not paused
	std::array<uint64_t, kPrios> since_{};
	std::array<uint64_t, kPrios> last_end_{};
	std::array<uint64_t, kPrios> storm_since_{};	// 0: none
	std::array<uint64_t, kPrios> ignore_until_{};
	PfcCounters cnt_;
};

// The priority of a frame the device sends: 802.1Q PCP if tagged, else
// DSCP >> 3 (mlx5's default DSCP-to-priority map, and vrnic-fabric's), 0
// for anything else.  A RoCE packet's is its traffic class >> 5 either
// way (the device tags with PCP = traffic class >> 5).
[[nodiscard]] inline unsigned int frame_prio(std::span<const uint8_t> f)
{
	if (f.size() < 14)
		return 0;
	if (f[12] == 0x81 && f[13] == 0x00)
		return f.size() < 18 ? 0 : f[14] >> 5;
	const size_t off = 14;
	if (f[12] == 0x08 && f[13] == 0x00 && f.size() >= off + 2)
		return f[off + 1] >> 5;			// TOS: DSCP << 2 | ECN
	if (f[12] == 0x86 && f[13] == 0xdd && f.size() >= off + 2)
		return (f[off] & 0x0f) >> 1;		// traffic class bits 7..5
	return 0;
}

} // namespace vrnic

// SPDX-License-Identifier: GPL-2.0-or-later
// Frames that waited in the sockets while the host did not run the switch.
//
// The daemon stamps a frame with the time it reads it.  When the host has
// not run vrnic-fabric for milliseconds (two TCG guests and their devices
// share two cores), every frame the senders wrote meanwhile is read at
// once, and the model would see them arrive as one burst: the bottleneck
// queue jumps by what arrived while the switch was away, past Kmax and the
// PFC threshold, though a switch that had been running would have sent
// most of it on in the meantime.  The stream sockets carry no arrival
// times, so a late turn spreads each port's frames evenly, in their order,
// over the time the switch was away, and hands all of them to the model
// in time order.  Documentation/fabric.rst ("Late wake-ups") says more.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace vrnic::fabric {

class Backdate {
public:
	// A late turn: the frames added next arrived over (from, to].
	void begin(uint64_t from, uint64_t to)
	{
		from_ = from;
		to_ = std::max(from, to);
		active_ = true;
	}
	[[nodiscard]] bool active() const { return active_; }
	// A frame read from host port `host`, copied (the caller counts a
	// frame shorter than an Ethernet header as truncated instead: at 5
	// bytes on the wire each, they would cost the most to stage).
	void add(size_t host, std::span<const uint8_t> frame)
	{
		if (host >= count_.size())
			count_.resize(host + 1, 0);
		ents_.push_back({host, buf_.size(), frame.size(), 0, count_[host]++});
		buf_.insert(buf_.end(), frame.begin(), frame.end());
	}
	// f(host, frame, t) for every frame added, in time order: a port's
	// k-th of n frames at from + (k + 1) (to - from) / n, never before
	// floor or an earlier call's t.  Then the turn is over.
	// The turn is over before f first runs: if f throws, the frames not
	// handed over yet are lost, never handed over twice.
	template <typename F> void drain(uint64_t floor, F &&f)
	{
		const uint64_t span = to_ - from_;
		std::vector<Entry> ents;
		std::vector<uint8_t> buf;
		ents.swap(ents_);
		buf.swap(buf_);
		for (Entry &e : ents) {
			const uint64_t n = count_[e.host];
			// (k + 1) span / n, without overflow for any span.
			e.t = from_ + span / n * (e.k + 1) + span % n * (e.k + 1) / n;
		}
		std::fill(count_.begin(), count_.end(), 0);
		active_ = false;
		std::stable_sort(ents.begin(), ents.end(),
				 [](const Entry &a, const Entry &b) { return a.t < b.t; });
		uint64_t t = floor;
		for (const Entry &e : ents) {
			t = std::max(t, e.t);
			f(e.host, std::span<const uint8_t>(buf).subspan(e.off, e.len), t);
		}
		// The buffers come back for the next late turn, unless a big
		// turn grew them.
		if (buf.capacity() <= kKeep) {
			buf.clear();
			ents.clear();
			buf_.swap(buf);
			ents_.swap(ents);
		}
	}
	// How many frames a port has staged this turn.
	[[nodiscard]] uint64_t staged(size_t host) const
	{
		return host < count_.size() ? count_[host] : 0;
	}

private:
	static constexpr size_t kKeep = size_t{4} << 20;
	struct Entry {
		size_t host;
		size_t off, len;	// in buf_
		uint64_t t;
		uint64_t k;		// its place among its port's frames
	};
	std::vector<uint8_t> buf_;
	std::vector<Entry> ents_;
	std::vector<uint64_t> count_;	// frames per port
	uint64_t from_ = 0, to_ = 0;
	bool active_ = false;
};

} // namespace vrnic::fabric

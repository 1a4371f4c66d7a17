// SPDX-License-Identifier: GPL-2.0-or-later
// Reused frame buffers: a frame the daemon has written to a port gives its
// buffer back to the model (Fabric::recycle), the next frame received takes
// one, so the forwarding path neither allocates nor zero-fills per frame.
//
// Bounded twice over: at most max_bytes of capacity are kept, and a buffer
// is handed out only for a frame of at least half its capacity, so a queue
// that counts its frames' sizes against a limit (the switch's buffer, a
// link's in-flight bytes, a port's tx_limit) holds at most twice that
// (a jumbo frame's buffer never carries an ACK to a port that stopped
// reading).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace vrnic::fabric {

class FramePool {
public:
	explicit FramePool(size_t max_bytes) : max_(max_bytes) {}

	// An empty buffer with room for need bytes.
	[[nodiscard]] std::vector<uint8_t> take(size_t need)
	{
		auto &pool = spare_[size_class(need)];
		std::vector<uint8_t> out;
		if (!pool.empty() && pool.back().capacity() >= need &&
		    pool.back().capacity() <= 2 * need) {
			out = std::move(pool.back());
			pool.pop_back();
			bytes_ -= out.capacity();
			out.clear();
		} else {
			out.reserve(need);
		}
		return out;
	}

	// A buffer whose bytes have been written; kept if there is room.
	void give(std::vector<uint8_t> &&buf)
	{
		const size_t cap = buf.capacity();
		if (cap == 0 || bytes_ + cap > max_)
			return;
		bytes_ += cap;
		spare_[size_class(cap)].push_back(std::move(buf));
	}

	[[nodiscard]] size_t bytes() const { return bytes_; }

private:
	// Small (ACKs, CNPs, PFC, ARP) or not, so that one kind of traffic
	// does not leave only the other's buffers at the top.
	static size_t size_class(size_t bytes) { return bytes <= 512 ? 0 : 1; }

	std::array<std::vector<std::vector<uint8_t>>, 2> spare_;
	size_t bytes_ = 0;
	size_t max_;
};

} // namespace vrnic::fabric

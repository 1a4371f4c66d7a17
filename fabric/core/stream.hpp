// SPDX-License-Identifier: GPL-2.0-or-later
// QEMU's stream netdev framing (net/stream.c): each frame is a 4-byte
// big-endian length and then the frame.  The decoder takes bytes as they
// come from a socket, in any split, and keeps at most one frame buffered.
// A length of 0 or above the limit is reported and its bytes are skipped,
// so the stream stays in step.  A frame that arrived whole in one call is
// passed where it lies in the caller's bytes; only a frame split across
// calls is copied.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace vrnic::fabric {

class StreamDecoder {
public:
	enum class Event : uint8_t { Frame, Empty, Oversized };

	explicit StreamDecoder(uint32_t max_frame) : max_(max_frame) {}

	// Calls fn(Event, std::span<const uint8_t> frame) for each complete
	// frame and each bad length in `bytes`.  The span is valid only
	// during the call: it may point into `bytes` or into the decoder.
	template <typename Fn>
	void feed(std::span<const uint8_t> bytes, Fn &&fn)
	{
		size_t off = 0;
		while (off < bytes.size()) {
			// A whole frame at the start of what is left, with nothing
			// of it buffered: handed over where it lies, not copied.
			if (!skip_ && len_have_ == 0 && bytes.size() - off >= 4) {
				const uint32_t n = length(&bytes[off]);
				if (n != 0 && n <= max_ && bytes.size() - off - 4 >= n) {
					fn(Event::Frame, bytes.subspan(off + 4, n));
					off += 4 + size_t{n};
					continue;
				}
			}
			if (skip_) {
				const auto k = static_cast<size_t>(
					std::min<uint64_t>(skip_, bytes.size() - off));
				skip_ -= k;
				off += k;
				continue;
			}
			if (len_have_ < 4) {
				len_[len_have_++] = bytes[off++];
				if (len_have_ < 4)
					continue;
				const uint32_t n = length(len_.data());
				if (n == 0 || n > max_) {
					len_have_ = 0;
					skip_ = n;
					fn(n ? Event::Oversized : Event::Empty, std::span<const uint8_t>{});
					continue;
				}
				frame_.resize(n);
				have_ = 0;
				continue;
			}
			const size_t k = std::min(frame_.size() - have_, bytes.size() - off);
			std::copy_n(bytes.begin() + static_cast<long>(off), k,
				    frame_.begin() + static_cast<long>(have_));
			have_ += k;
			off += k;
			if (have_ == frame_.size()) {
				len_have_ = 0;
				fn(Event::Frame, std::span<const uint8_t>(frame_));
			}
		}
	}

	// A new connection starts a new stream.
	void reset()
	{
		len_have_ = 0;
		have_ = 0;
		skip_ = 0;
	}

	static std::array<uint8_t, 4> header(uint32_t len)
	{
		return {static_cast<uint8_t>(len >> 24), static_cast<uint8_t>(len >> 16),
			static_cast<uint8_t>(len >> 8), static_cast<uint8_t>(len)};
	}

private:
	static uint32_t length(const uint8_t *b)
	{
		return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
	}

	uint32_t max_;
	std::array<uint8_t, 4> len_{};
	size_t len_have_ = 0;
	std::vector<uint8_t> frame_;
	size_t have_ = 0;
	uint64_t skip_ = 0;
};

} // namespace vrnic::fabric

// SPDX-License-Identifier: GPL-2.0-or-later
// A bounded FIFO of frames in one buffer allocated once: no allocation per
// frame, and the bytes it holds can never exceed its capacity.  The buffer
// is not cleared, so the host only commits the pages traffic touches.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>

namespace vrnic {

class FrameQueue {
public:
	explicit FrameQueue(size_t capacity)
		: cap_(capacity & ~size_t(3)),
		  buf_(std::make_unique_for_overwrite<uint8_t[]>(cap_)) {}

	// Append a copy of f; false (nothing stored) when it does not fit.
	bool push(std::span<const uint8_t> f)
	{
		const size_t rec = record(f.size());
		if (count_ == 0)
			head_ = tail_ = 0;
		// The writer never catches up with the reader exactly, so
		// tail_ == head_ only ever means empty.
		if (tail_ >= head_ && tail_ + rec > cap_) {
			// No room at the end: wrap to the front, if the oldest
			// record leaves room there.
			if (count_ == 0 || rec >= head_)
				return false;
			if (cap_ - tail_ >= kHdr)
				put_hdr(tail_, kWrap);
			used_ += cap_ - tail_;	// the end stays unused
			tail_ = 0;
		} else if (tail_ < head_ && tail_ + rec >= head_) {
			return false;
		}
		put_hdr(tail_, uint32_t(f.size()));
		if (!f.empty())
			std::memcpy(&buf_[tail_ + kHdr], f.data(), f.size());
		tail_ += rec;
		used_ += rec;
		count_++;
		bytes_ += f.size();
		return true;
	}
	[[nodiscard]] bool empty() const { return count_ == 0; }
	[[nodiscard]] size_t frames() const { return count_; }
	// Frame bytes held (headers and padding not counted).
	[[nodiscard]] size_t bytes() const { return bytes_; }
	[[nodiscard]] size_t capacity() const { return cap_; }
	// Buffer space not taken (it may be in two pieces).
	[[nodiscard]] size_t room() const { return cap_ - used_; }
	// The oldest frame; valid until pop() or clear(), whatever is pushed
	// meanwhile.
	[[nodiscard]] std::span<const uint8_t> front() const
	{
		const size_t at = start();
		return {buf_.get() + at + kHdr, get_hdr(at)};
	}
	void pop()
	{
		const size_t at = start();
		const uint32_t len = get_hdr(at);
		if (at != head_)
			used_ -= cap_ - head_;	// past the wrap
		head_ = at + record(len);
		used_ -= record(len);
		count_--;
		bytes_ -= len;
		if (count_ == 0)
			clear();
	}
	void clear() { head_ = tail_ = count_ = bytes_ = used_ = 0; }

private:
	static constexpr size_t kHdr = 4;
	static constexpr uint32_t kWrap = 0xffffffff;

	static size_t record(size_t len) { return kHdr + ((len + 3) & ~size_t(3)); }
	void put_hdr(size_t at, uint32_t v) { std::memcpy(&buf_[at], &v, kHdr); }
	[[nodiscard]] uint32_t get_hdr(size_t at) const
	{
		uint32_t v;
		std::memcpy(&v, &buf_[at], kHdr);
		return v;
	}
	// Where the oldest record starts: past a wrap mark, at the front.
	[[nodiscard]] size_t start() const
	{
		if (cap_ - head_ < kHdr || get_hdr(head_) == kWrap)
			return 0;
		return head_;
	}

	size_t cap_;
	std::unique_ptr<uint8_t[]> buf_;
	size_t head_ = 0, tail_ = 0, count_ = 0, bytes_ = 0, used_ = 0;
};

} // namespace vrnic

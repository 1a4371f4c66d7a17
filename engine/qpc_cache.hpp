// SPDX-License-Identifier: GPL-2.0-or-later
// The QP-context cache a real RNIC keeps on chip (issue 29), as a model:
// which QP slots are "cached", in least-recently-used order, at most
// capacity() of them.  It only keeps the order; Rdma does what a miss
// costs (the context read back from guest memory, the evicted one
// written there, and the modelled delay).  capacity() 0 is unlimited:
// nothing is tracked and every access is a hit.
//
// Slots, not handles: a destroyed QP's slot is forgotten at once, so an
// entry always stands for the slot's live QP.  Every operation is O(1);
// clear() is O(entries).  The per-slot links grow with the highest slot
// used (doubling, up to what a handle can name), like the scheduler's.
#pragma once

#include <cstdint>
#include <vector>

#include "sched.hpp"

namespace vrnic {

class QpcCache {
public:
	static constexpr uint32_t kNone = ~0u;

	[[nodiscard]] uint32_t capacity() const { return cap_; }
	[[nodiscard]] bool limited() const { return cap_ != 0; }
	[[nodiscard]] uint32_t size() const { return n_; }
	// A new capacity starts empty.
	void set_capacity(uint32_t n)
	{
		clear();
		cap_ = n;
	}
	[[nodiscard]] bool cached(uint32_t s) const { return s < in_.size() && in_[s]; }

	// An access to slot s: true on a hit (s becomes the most recent).  On
	// a miss s is cached, and evicted is the least recent slot it pushed
	// out, or kNone.
	bool touch(uint32_t s, uint32_t &evicted)
	{
		evicted = kNone;
		if (cached(s)) {
			unlink(s);
			push_front(s);
			return true;
		}
		if (s >= in_.size()) {
			const size_t n = grown(s, in_.size());
			in_.resize(n, 0);
			prev_.resize(n, kNone);
			next_.resize(n, kNone);
		}
		if (n_ >= cap_ && tail_ != kNone) {
			evicted = tail_;
			unlink(tail_);
			in_[evicted] = 0;
			n_--;
		}
		in_[s] = 1;
		n_++;
		push_front(s);
		return false;
	}
	// The slot's QP is gone: no write-back, no entry.
	void forget(uint32_t s)
	{
		if (!cached(s))
			return;
		unlink(s);
		in_[s] = 0;
		n_--;
	}
	void clear()
	{
		while (head_ != kNone)
			forget(head_);
	}

private:
	void unlink(uint32_t s)
	{
		const uint32_t p = prev_[s], n = next_[s];

		if (p != kNone)
			next_[p] = n;
		else
			head_ = n;
		if (n != kNone)
			prev_[n] = p;
		else
			tail_ = p;
		prev_[s] = next_[s] = kNone;
	}
	void push_front(uint32_t s)
	{
		prev_[s] = kNone;
		next_[s] = head_;
		if (head_ != kNone)
			prev_[head_] = s;
		head_ = s;
		if (tail_ == kNone)
			tail_ = s;
	}

	uint32_t cap_ = 0, n_ = 0;
	uint32_t head_ = kNone, tail_ = kNone;	// most and least recent
	std::vector<uint8_t> in_;
	std::vector<uint32_t> prev_, next_;
};

} // namespace vrnic

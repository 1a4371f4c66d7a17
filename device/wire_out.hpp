// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-device's wire output: the stream records (QEMU's stream netdev
// framing: a 4-byte big-endian length, then the frame) that wait for the
// socket, in one contiguous buffer that send() takes from in place.
// Kept apart from the socket so that it can be tested alone
// (tests/unit/test_wire_out.cpp).
//
// The peer parses the stream by those lengths, so a record the socket has
// taken part of must be finished whatever happens to the device: dropping
// its tail would make the peer read frame bytes as the next length.  Only
// a new connection starts a new stream.
#pragma once

#include <arpa/inet.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace wire {

class Out {
public:
	// Bytes queued and not yet sent, in place for send().
	size_t pending() const { return buf_.size() - head_; }
	bool empty() const { return head_ == buf_.size(); }
	const uint8_t *data() const { return buf_.data() + head_; }
	// The buffer's size, sent bytes not yet reclaimed included (tests).
	size_t footprint() const { return buf_.size(); }

	// One record for frame[0, len); len fits the 4-byte length (the
	// caller bounds it by the largest frame).
	void push(const void *frame, size_t len)
	{
		compact();
		const uint32_t be = htonl(uint32_t(len));
		const auto *b = reinterpret_cast<const uint8_t *>(&be);
		const auto *f = static_cast<const uint8_t *>(frame);
		buf_.insert(buf_.end(), b, b + 4);
		buf_.insert(buf_.end(), f, f + len);
	}

	// The socket took n bytes (n <= pending()).
	void sent(size_t n)
	{
		head_ += n;
		while (rec_ < head_) {
			const size_t end = rec_ + 4 + length_at(rec_);
			if (end > head_)
				break;
			rec_ = end;
		}
		if (head_ == buf_.size())
			clear();
	}

	// A device reset: the records not begun are dropped; the one the
	// socket has taken part of stays, to be finished.
	void drop_unsent()
	{
		if (head_ == rec_)
			buf_.resize(head_);
		else
			buf_.resize(rec_ + 4 + length_at(rec_));
		if (head_ == buf_.size())
			clear();
	}

	// A new connection: nothing of the old stream goes to it.
	void clear()
	{
		buf_.clear();
		head_ = rec_ = 0;
	}

private:
	// buf_ holds whole records from its start; rec_ is the start of the
	// first one not sent whole, head_ the first byte not sent.
	std::vector<uint8_t> buf_;
	size_t head_ = 0, rec_ = 0;

	size_t length_at(size_t at) const
	{
		uint32_t be;
		std::memcpy(&be, buf_.data() + at, 4);
		return ntohl(be);
	}

	// Reclaims the records sent whole once they are at least half of the
	// buffer: each byte moves at most once on average, and the buffer
	// stays within twice what is pending.
	void compact()
	{
		if (rec_ == 0 || rec_ < buf_.size() - rec_)
			return;
		buf_.erase(buf_.begin(), buf_.begin() + long(rec_));
		head_ -= rec_;
		rec_ = 0;
	}
};

}	// namespace wire

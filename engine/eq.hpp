// SPDX-License-Identifier: GPL-2.0-or-later
// Event queues: a ring of vrnic_eqe in guest memory with a phase bit, a
// consumer index reported by the driver through a doorbell and a one-shot
// arm flag that gates the MSI-X vector.  No event is lost to a full ring:
// the device holds it back (one per type and id) until a doorbell frees
// room.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <unordered_map>

#include "platform.hpp"
#include "vrnic_hw.h"

namespace vrnic {

struct DeviceCounters;

class EventQueue {
public:
	// Events one EQ holds back at most.  An event per (type, id) is held
	// once, and this is more than every CQ, QP and SRQ can post at once
	// (a CQ event and a CQ error per CQ, a fatal error and a last WQE per
	// QP, a limit event per SRQ), so no event is lost to it.  A
	// destroyed object's held events go with it (Rdma's destroys), so
	// what is held is bounded by live objects, which the budget pays for.
	// Each held event costs the host about 100 bytes (a list node and an
	// index entry), at most 3 per live QP, 2 per CQ and 1 per SRQ: each
	// object is charged kHeldBytes for each when it is created (Rdma), so
	// holding never needs the budget and no event is ever dropped for it.
	static constexpr size_t kMaxHeld = VRNIC_EQ_MAX_HELD;
	static constexpr uint64_t kHeldBytes = 128;

	EventQueue() = default;
	// Unit tests: a smaller bound than kMaxHeld, to reach it.
	void limit_held(size_t n) { max_held_ = std::min(n, kMaxHeld); }
	// Not copyable: where_ points into held_.
	EventQueue(const EventQueue &) = delete;
	EventQueue &operator=(const EventQueue &) = delete;
	EventQueue(EventQueue &&) = default;
	EventQueue &operator=(EventQueue &&) = default;

	// Validate and take a configuration; false when it is unusable.
	[[nodiscard]] static bool valid_config(uint64_t base,
					       unsigned int log_depth);
	void configure(unsigned int eqn, uint64_t base, unsigned int log_depth,
		       unsigned int vector);
	void disable() { *this = EventQueue(); }
	[[nodiscard]] bool enabled() const { return enabled_; }
	[[nodiscard]] unsigned int vector() const { return vector_; }
	[[nodiscard]] size_t held() const { return held_.size(); }

	// Write one event, raising the vector if the EQ is armed.  When the
	// ring is full (or events are already held, so that none overtakes
	// them) the event is held back and counted in eq_overflows; a held
	// event of the same type and id is replaced (it moves to the back
	// with the new data).  False only when the EQ is disabled, the event
	// had to be dropped past kMaxHeld, or DMA failed.
	bool post(const Platform &plat, DeviceCounters &cnt, uint8_t type,
		  uint32_t id, uint64_t data = 0);
	// Doorbell: new consumer index and optional arm.  Held events are
	// written into the room the index frees, then the arm is handled as
	// for any unconsumed entry.  False if the index is outside the window
	// of posted events.
	bool doorbell(const Platform &plat, DeviceCounters &cnt, uint16_t ci,
		      bool arm);
	// Drop the held events of one of the types in `types` (a bit per
	// enum vrnic_eqe_type) about object `id`: its handle is being given
	// to a new object.
	void forget(uint64_t types, uint32_t id);

private:
	struct Held {
		uint8_t type;
		uint32_t id;
		uint64_t data;
	};
	static uint64_t key(uint8_t type, uint32_t id) { return uint64_t(type) << 32 | id; }

	[[nodiscard]] bool full() const
	{
		return uint16_t(pi_ - ci_) >= (1u << log_depth_);
	}
	bool write(const Platform &plat, DeviceCounters &cnt, const Held &e);
	bool hold(const Platform &plat, DeviceCounters &cnt, const Held &e);

	bool enabled_ = false;
	bool armed_ = false;
	unsigned int eqn_ = 0;
	unsigned int vector_ = 0;
	unsigned int log_depth_ = 0;
	uint64_t base_ = 0;
	uint32_t pi_ = 0;	// events written, free running
	uint16_t ci_ = 0;	// consumer index from the last doorbell
	// Held events, oldest first, at most kMaxHeld, and where each
	// (type, id) is in that list: holding, replacing and forgetting one
	// are O(1), however many are held.
	std::list<Held> held_;
	size_t max_held_ = kMaxHeld;
	std::unordered_map<uint64_t, std::list<Held>::iterator> where_;
};

} // namespace vrnic

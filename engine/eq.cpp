// SPDX-License-Identifier: GPL-2.0-or-later
#include "eq.hpp"

#include <algorithm>
#include <iterator>

#include "device.hpp"

namespace vrnic {

bool EventQueue::valid_config(uint64_t base, unsigned int log_depth)
{
	return base != 0 && base % VRNIC_RING_ALIGN == 0 &&
	       log_depth >= VRNIC_EQ_MIN_LOG_DEPTH &&
	       log_depth <= VRNIC_EQ_MAX_LOG_DEPTH &&
	       base + (uint64_t(sizeof(vrnic_eqe)) << log_depth) > base;
}

void EventQueue::configure(unsigned int eqn, uint64_t base,
			   unsigned int log_depth, unsigned int vector)
{
	*this = EventQueue();
	enabled_ = true;
	eqn_ = eqn;
	base_ = base;
	log_depth_ = log_depth;
	vector_ = vector;
}

bool EventQueue::write(const Platform &plat, DeviceCounters &cnt,
		       const Held &e)
{
	const uint32_t depth = 1u << log_depth_;
	vrnic_eqe eqe{};

	eqe.type = e.type;
	// The phase bit is 1 on the first pass over the ring, then flips.
	eqe.flags = ((pi_ >> log_depth_) & 1) ? 0 : VRNIC_EQE_PHASE;
	eqe.id = le(e.id);
	eqe.data = le(e.data);
	const uint64_t addr = base_ + uint64_t(pi_ & (depth - 1)) * sizeof(eqe);
	if (!plat.write_entry(addr, eqe)) {
		cnt.dma_errors++;
		return false;
	}
	pi_++;
	plat.trace(VRNIC_TRACE_EQ_POST, eqn_, e.type, e.id);
	if (armed_) {
		armed_ = false;
		plat.raise_irq(vector_);
	}
	return true;
}

bool EventQueue::hold(const Platform &plat, DeviceCounters &cnt,
		      const Held &e)
{
	cnt.eq_overflows++;
	const auto same = where_.find(key(e.type, e.id));
	if (same != where_.end()) {
		// Replaced: it moves to the back with the new data, no
		// allocation (the index stays valid across the splice).
		held_.splice(held_.end(), held_, same->second);
		same->second->data = e.data;
		plat.trace(VRNIC_TRACE_EQ_OVERFLOW, eqn_, e.type, 0);
		return true;
	}
	if (held_.size() >= max_held_) {
		plat.trace(VRNIC_TRACE_EQ_OVERFLOW, eqn_, e.type, 1);
		return false;
	}
	plat.trace(VRNIC_TRACE_EQ_OVERFLOW, eqn_, e.type, 0);
	held_.push_back(e);
	where_.emplace(key(e.type, e.id), std::prev(held_.end()));
	return true;
}

void EventQueue::forget(uint64_t types, uint32_t id)
{
	for (unsigned int t = 0; t < 64; t++) {
		if (!(types >> t & 1))
			continue;
		const auto it = where_.find(key(uint8_t(t), id));
		if (it != where_.end()) {
			held_.erase(it->second);
			where_.erase(it);
		}
	}
}

bool EventQueue::post(const Platform &plat, DeviceCounters &cnt, uint8_t type,
		      uint32_t id, uint64_t data)
{
	if (!enabled_)
		return false;
	const Held e{type, id, data};
	// Held events go first: a new one never overtakes them.
	if (!held_.empty() || full())
		return hold(plat, cnt, e);
	return write(plat, cnt, e);
}

bool EventQueue::doorbell(const Platform &plat, DeviceCounters &cnt,
			  uint16_t ci, bool arm)
{
	if (!enabled_)
		return false;
	// The consumer can never pass the producer.
	if (uint16_t(uint16_t(pi_) - ci) > (1u << log_depth_))
		return false;
	ci_ = ci;
	// Room freed: write what was held, oldest first, never past ci.
	while (!held_.empty() && !full()) {
		const Held e = held_.front();
		where_.erase(key(e.type, e.id));
		held_.pop_front();
		write(plat, cnt, e);	// a DMA error is counted; go on
	}
	if (arm) {
		if (ci_ != uint16_t(pi_)) {
			// Events the driver has not seen yet: signal at once.
			armed_ = false;
			plat.raise_irq(vector_);
		} else {
			armed_ = true;
		}
	}
	return true;
}

} // namespace vrnic

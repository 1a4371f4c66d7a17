// SPDX-License-Identifier: GPL-2.0-or-later
// Event queues: a ring of vrnic_eqe in guest memory with a phase bit, a
// consumer index reported by the driver through a doorbell and a one-shot
// arm flag that gates the MSI-X vector.
#pragma once

#include <cstdint>

#include "platform.hpp"
#include "vrnic_hw.h"

namespace vrnic {

struct DeviceCounters;

class EventQueue {
public:
	// Validate and take a configuration; false when it is unusable.
	[[nodiscard]] static bool valid_config(uint64_t base,
					       unsigned int log_depth);
	void configure(unsigned int eqn, uint64_t base, unsigned int log_depth,
		       unsigned int vector);
	void disable() { *this = EventQueue(); }
	[[nodiscard]] bool enabled() const { return enabled_; }
	[[nodiscard]] unsigned int vector() const { return vector_; }

	// Write one event; raises the vector if the EQ is armed.  Returns false
	// when the EQ is full (the event is lost and counted) or DMA failed.
	bool post(const Platform &plat, DeviceCounters &cnt, uint8_t type,
		  uint32_t id, uint64_t data = 0);
	// Doorbell: new consumer index and optional arm.  False if the index
	// is outside the window of posted events.
	bool doorbell(const Platform &plat, uint16_t ci, bool arm);

private:
	bool enabled_ = false;
	bool armed_ = false;
	unsigned int eqn_ = 0;
	unsigned int vector_ = 0;
	unsigned int log_depth_ = 0;
	uint64_t base_ = 0;
	uint32_t pi_ = 0;	// events written, free running
	uint16_t ci_ = 0;	// consumer index from the last doorbell
};

} // namespace vrnic

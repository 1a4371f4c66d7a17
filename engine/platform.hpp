// SPDX-License-Identifier: GPL-2.0-or-later
// C++ view of the platform layer (DMA, wire, interrupts, clock, tracing).
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>

#include "frame_queue.hpp"
#include "vrnic_engine.h"

namespace vrnic {

// What the engine hands to the platform only when its outermost entry
// point returns, because the platform may call straight back into the
// engine from it: frames for the wire, and the rx_ready() signal.
struct Outbox {
	explicit Outbox(size_t bytes) : frames(bytes) {}
	FrameQueue frames;
	bool rx_ready = false;
	uint64_t dropped = 0;		// frames that found the queue full
};

static_assert(std::endian::native == std::endian::little,
	      "the engine stores hardware structures in host order; "
	      "add byte swapping before building on a big-endian host");

// Little-endian field access.  Hardware structures are little-endian and
// so is every supported host, so these are plain loads and stores; they
// exist to mark where a wire or guest value is read.
template <typename T>
constexpr T le(T v) { return v; }

class Platform {
public:
	Platform(const vrnic_platform_ops *ops, void *opaque, Outbox &out)
		: ops_(ops), opaque_(opaque), out_(&out) {}

	[[nodiscard]] bool dma_read(uint64_t addr, void *buf, size_t len) const
	{
		return ops_->dma_read(opaque_, addr, buf, len) == 0;
	}
	[[nodiscard]] bool dma_write(uint64_t addr, const void *buf,
				     size_t len) const
	{
		return ops_->dma_write(opaque_, addr, buf, len) == 0;
	}
	// Copy one trivially copyable structure out of guest memory.
	template <typename T>
	[[nodiscard]] bool read(uint64_t addr, T &out) const
	{
		static_assert(std::is_trivially_copyable_v<T>);
		return dma_read(addr, &out, sizeof(T));
	}
	template <typename T>
	[[nodiscard]] bool write(uint64_t addr, const T &in) const
	{
		static_assert(std::is_trivially_copyable_v<T>);
		return dma_write(addr, &in, sizeof(T));
	}
	// Write a ring entry whose phase/valid bit lives in the dword at
	// phase_off: everything else first, that dword last, so the consumer
	// never sees a valid flag in front of stale contents.
	template <typename T>
	[[nodiscard]] bool write_entry(uint64_t addr, const T &in,
				       size_t phase_off = 0) const
	{
		static_assert(std::is_trivially_copyable_v<T> && sizeof(T) > 4 &&
			      sizeof(T) % 4 == 0);
		const auto *p = reinterpret_cast<const uint8_t *>(&in);
		const size_t tail = phase_off + 4;
		return (phase_off == 0 || dma_write(addr, p, phase_off)) &&
		       (tail == sizeof(T) ||
			dma_write(addr + tail, p + tail, sizeof(T) - tail)) &&
		       dma_write(addr + phase_off, p + phase_off, 4);
	}
	// Queue one frame for the wire (see Outbox); a full queue drops it,
	// as a full FIFO of a NIC does.
	void send_frame(std::span<const uint8_t> frame) const
	{
		if (!out_->frames.push(frame))
			out_->dropped++;
	}
	void raise_irq(unsigned int vector) const
	{
		trace(VRNIC_TRACE_IRQ, vector);
		ops_->raise_irq(opaque_, vector);
	}
	void schedule() const { ops_->schedule(opaque_); }
	// Deferred like frames: signalled when the engine is left.
	void rx_ready() const { out_->rx_ready = true; }
	// Only for the engine's exit path, with the engine not running.
	// True: the network is full, send no more until tx_resume.
	[[nodiscard]] bool send_now(std::span<const uint8_t> frame) const
	{
		return ops_->send_frame(opaque_, frame.data(), frame.size()) != 0;
	}
	void rx_ready_now() const { ops_->rx_ready(opaque_); }
	[[nodiscard]] uint64_t now_ns() const { return ops_->now_ns(opaque_); }
	void timer_arm(uint64_t deadline) const
	{
		ops_->timer_arm(opaque_, deadline);
	}
	void guest_error(const std::string &msg) const
	{
		ops_->guest_error(opaque_, msg.c_str());
	}
	void trace(vrnic_trace_id id, uint64_t a = 0, uint64_t b = 0,
		   uint64_t c = 0) const
	{
		ops_->trace(opaque_, id, a, b, c);
	}

private:
	const vrnic_platform_ops *ops_;
	void *opaque_;
	Outbox *out_;
};

} // namespace vrnic

// SPDX-License-Identifier: GPL-2.0-or-later
// extern "C" entry points of the engine (see vrnic_engine.h).  Each one is
// a single entry into the device under its entry rules (Device::enter):
// never re-entered, frames handed to the platform on the way out, and no
// C++ exception ever crosses into the C caller.
#include <new>
#include <stdexcept>

#include "engine_internal.hpp"

namespace {

using vrnic::Device;

// refused: the result of a refused call; failed: of one that threw.
template <typename R, typename Body>
R entry(vrnic_engine *e, Device::Call what, R refused, R failed, Body body,
	bool link_up = false) noexcept
{
	Device &d = e->dev;
	const Device::Run prev = d.state();

	if (!d.enter(what, link_up))
		return refused;
	R r = refused;
	try {
		r = body(d);
	} catch (...) {
		d.internal_error();
		r = failed;
	}
	d.leave(prev);
	return r;
}

} // namespace

extern "C" {

struct vrnic_engine *vrnic_engine_new(const struct vrnic_engine_config *cfg,
				      const struct vrnic_platform_ops *ops,
				      void *opaque)
{
	try {
		return new vrnic_engine{vrnic::Device(*cfg, ops, opaque)};
	} catch (...) {
		return nullptr;
	}
}

void vrnic_engine_free(struct vrnic_engine *e)
{
	delete e;
}

void vrnic_engine_reset(struct vrnic_engine *e)
{
	entry(e, Device::Call::Reset, 0, 0, [](Device &d) {
		d.reset();
		return 0;
	});
}

uint64_t vrnic_engine_reg_read(struct vrnic_engine *e, uint64_t offset,
			       unsigned int size)
{
	return entry(e, Device::Call::RegRead, uint64_t(0), uint64_t(0),
		     [=](Device &d) {
		return uint64_t(d.reg_read(offset, size));
	});
}

void vrnic_engine_reg_write(struct vrnic_engine *e, uint64_t offset,
			    uint64_t value, unsigned int size)
{
	entry(e, Device::Call::RegWrite, 0, 0, [=](Device &d) {
		d.reg_write(offset, value, size);
		return 0;
	});
}

void vrnic_engine_db_write(struct vrnic_engine *e, uint64_t offset,
			   uint64_t value, unsigned int size)
{
	entry(e, Device::Call::DbWrite, 0, 0, [=](Device &d) {
		d.db_write(offset, value, size);
		return 0;
	});
}

void vrnic_engine_poll(struct vrnic_engine *e)
{
	entry(e, Device::Call::Poll, 0, 0, [](Device &d) {
		d.poll();
		return 0;
	});
}

void vrnic_engine_timer(struct vrnic_engine *e)
{
	entry(e, Device::Call::Timer, 0, 0, [](Device &d) {
		d.timer();
		return 0;
	});
}

bool vrnic_engine_can_receive(struct vrnic_engine *e)
{
	// Reads nothing that a running engine changes; always true.
	return e->dev.can_receive();
}

size_t vrnic_engine_receive(struct vrnic_engine *e, const uint8_t *frame,
			    size_t len)
{
	// Refused: the platform keeps the frame until rx_ready(); failed:
	// dropped, the device is stopped.
	return entry(e, Device::Call::Receive, size_t(0), len, [=](Device &d) {
		return d.receive({frame, len});
	});
}

void vrnic_engine_set_link(struct vrnic_engine *e, bool up)
{
	entry(e, Device::Call::Link, 0, 0, [=](Device &d) {
		d.set_link(up);
		return 0;
	}, up);
}

bool vrnic_engine_set_qpc(struct vrnic_engine *e, uint32_t entries,
			  uint32_t miss_ns)
{
	return entry(e, Device::Call::Config, false, false, [=](Device &d) {
		d.set_qpc(entries, miss_ns);
		return true;
	});
}

void vrnic_engine_tx_resume(struct vrnic_engine *e)
{
	entry(e, Device::Call::TxResume, 0, 0, [](Device &d) {
		d.tx_resume();	// leave() hands over what waited
		return 0;
	});
}

void vrnic_engine_inject_internal_error(struct vrnic_engine *e)
{
	// A Poll entry: if it were ever refused (re-entered), the platform
	// only gets a schedule() and nothing is injected.
	entry(e, Device::Call::Poll, 0, 0, [](Device &) -> int {
		throw std::runtime_error("injected internal error (test only)");
	});
}

} // extern "C"

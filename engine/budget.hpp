// SPDX-License-Identifier: GPL-2.0-or-later
// The device-wide host-memory budget: every host allocation whose size the
// guest chooses (MR and ring page lists, copied WQEs, responder resources)
// is charged here first and refused, or deferred, when the budget is spent.
// Copied send WQEs beyond each QP's own reserved ones are also counted per
// user context (doorbell page), and no context may hold more than half of
// the budget in them: one process cannot stall every other QP.
#pragma once

#include <array>
#include <cstdint>
#include <functional>

#include "vrnic_engine.h"
#include "vrnic_hw.h"

namespace vrnic {

class HostBudget {
public:
	// The default of vrnic-device's --host-mem-budget, and the bounds
	// on what it may be set to (vrnic_engine.h, shared with it).
	static constexpr uint64_t kDefault = VRNIC_HOST_MEM_BUDGET_DEFAULT;
	static constexpr uint64_t kMin = VRNIC_HOST_MEM_BUDGET_MIN;
	static constexpr uint64_t kMax = VRNIC_HOST_MEM_BUDGET_MAX;

	explicit HostBudget(uint64_t limit);

	// Take n bytes; false (nothing taken) if that would pass the limit.
	[[nodiscard]] bool charge(uint64_t n);
	void release(uint64_t n);
	// The same for WQE copies of user context ctx (< VRNIC_NUM_DB_PAGES,
	// 0 the kernel's): also false if the context's copies would pass
	// ctx_cap().
	[[nodiscard]] bool charge(uint64_t n, uint32_t ctx);
	void release(uint64_t n, uint32_t ctx);
	[[nodiscard]] uint64_t ctx_cap() const { return limit_ / 2; }
	[[nodiscard]] uint64_t ctx_used(uint32_t ctx) const
	{
		return ctx < ctx_used_.size() ? ctx_used_[ctx] : 0;
	}

	[[nodiscard]] uint64_t limit() const { return limit_; }
	[[nodiscard]] uint64_t used() const { return used_; }
	[[nodiscard]] uint64_t peak() const { return peak_; }
	[[nodiscard]] uint64_t refused() const { return refused_; }
	// Releases of more than is held: a charge given back twice.  Never
	// expected; counted (not asserted, QEMU must not abort) so that the
	// tests can check it stays 0.
	[[nodiscard]] uint64_t over_released() const { return over_; }
	// Bytes ever charged: the admin queue's per-poll copy budget is
	// measured in it (every page list copied was charged first).
	[[nodiscard]] uint64_t charged_total() const { return total_; }
	// Called once after a release that follows a refused charge, so
	// work that waited for memory is retried.
	void on_release(std::function<void()> f) { wake_ = std::move(f); }

private:
	uint64_t limit_;
	uint64_t used_ = 0;
	uint64_t peak_ = 0;
	uint64_t refused_ = 0;
	uint64_t over_ = 0;
	uint64_t total_ = 0;
	bool waiting_ = false;
	std::function<void()> wake_;
	std::array<uint64_t, VRNIC_NUM_DB_PAGES> ctx_used_{};
};

// Bytes charged to a HostBudget on behalf of the object that holds this;
// released when that object is destroyed or overwritten.  Move-only.
class Charge {
public:
	Charge() = default;
	Charge(const Charge &) = delete;
	Charge &operator=(const Charge &) = delete;
	Charge(Charge &&o) noexcept : b_(o.b_), n_(o.n_), ctx_(o.ctx_)
	{
		o.b_ = nullptr;
		o.n_ = 0;
	}
	Charge &operator=(Charge &&o) noexcept
	{
		if (this != &o) {
			reset();
			b_ = o.b_;
			n_ = o.n_;
			ctx_ = o.ctx_;
			o.b_ = nullptr;
			o.n_ = 0;
		}
		return *this;
	}
	~Charge() { reset(); }

	// Charge n bytes (after releasing what this held); false if refused.
	[[nodiscard]] bool take(HostBudget &b, uint64_t n)
	{
		reset();
		if (!b.charge(n))
			return false;
		b_ = &b;
		n_ = n;
		ctx_ = kNoCtx;
		return true;
	}
	// Charge n bytes of WQE copies of user context ctx.
	[[nodiscard]] bool take(HostBudget &b, uint64_t n, uint32_t ctx)
	{
		reset();
		if (!b.charge(n, ctx))
			return false;
		b_ = &b;
		n_ = n;
		ctx_ = ctx;
		return true;
	}
	void reset()
	{
		if (b_ && ctx_ != kNoCtx)
			b_->release(n_, ctx_);
		else if (b_)
			b_->release(n_);
		b_ = nullptr;
		n_ = 0;
		ctx_ = kNoCtx;
	}
	[[nodiscard]] uint64_t bytes() const { return n_; }

private:
	static constexpr uint32_t kNoCtx = ~0u;
	HostBudget *b_ = nullptr;
	uint64_t n_ = 0;
	uint32_t ctx_ = kNoCtx;
};

} // namespace vrnic

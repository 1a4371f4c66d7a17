// SPDX-License-Identifier: GPL-2.0-or-later
#include "budget.hpp"

#include <algorithm>

namespace vrnic {

HostBudget::HostBudget(uint64_t limit)
	: limit_(limit == 0 ? kDefault : std::clamp(limit, kMin, kMax))
{
}

bool HostBudget::charge(uint64_t n)
{
	if (n > limit_ - used_) {
		refused_++;
		waiting_ = true;
		return false;
	}
	used_ += n;
	total_ += n;
	peak_ = std::max(peak_, used_);
	return true;
}

void HostBudget::release(uint64_t n)
{
	if (n > used_)
		over_++;
	used_ -= std::min(n, used_);
	if (waiting_ && wake_) {
		waiting_ = false;
		wake_();
	}
}

bool HostBudget::charge(uint64_t n, uint32_t ctx)
{
	if (ctx >= ctx_used_.size() || n > ctx_cap() - std::min(ctx_cap(), ctx_used_[ctx])) {
		refused_++;
		waiting_ = true;
		return false;
	}
	if (!charge(n))
		return false;
	ctx_used_[ctx] += n;
	return true;
}

void HostBudget::release(uint64_t n, uint32_t ctx)
{
	if (ctx < ctx_used_.size()) {
		if (n > ctx_used_[ctx])
			over_++;
		ctx_used_[ctx] -= std::min(n, ctx_used_[ctx]);
	}
	release(n);
}

} // namespace vrnic

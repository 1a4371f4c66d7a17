// SPDX-License-Identifier: GPL-2.0-or-later
// A table of device objects by slot index that grows with use (issue 29).
// Its slots come in chunks of kChunk, each made when an allocation first
// needs it and charged to the host-memory budget then, so a device with a
// few QPs holds a few chunks, not 2^20 slots.  A chunk stays until the
// device goes away, over resets too: the generations in its slots must
// outlive every object, so that no old handle names a new one.  Objects
// never move; a pointer to one is good for as long as its object is.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "budget.hpp"

namespace vrnic {

template <typename T> class SlotTable {
public:
	static constexpr uint32_t kChunk = 256;

	explicit SlotTable(uint32_t slots)
		: slots_(slots), chunks_((slots + kChunk - 1) / kChunk) {}

	[[nodiscard]] uint32_t size() const { return slots_; }
	[[nodiscard]] static constexpr uint64_t chunk_bytes() { return sizeof(Chunk); }
	// Host memory held, and charged, for the chunks made.
	[[nodiscard]] uint64_t bytes() const { return uint64_t(made_) * sizeof(Chunk); }

	// Slot i, or nullptr when its chunk was never made.
	T *find(uint32_t i)
	{
		if (i >= slots_ || !chunks_[i / kChunk])
			return nullptr;
		return &chunks_[i / kChunk]->slot[i % kChunk];
	}
	const T *find(uint32_t i) const
	{
		if (i >= slots_ || !chunks_[i / kChunk])
			return nullptr;
		return &chunks_[i / kChunk]->slot[i % kChunk];
	}
	[[nodiscard]] bool has(uint32_t i) const
	{
		return i < slots_ && chunks_[i / kChunk];
	}
	// Slot i, its chunk made and charged first if need be; nullptr when
	// the budget refuses it.
	T *make(uint32_t i, HostBudget &budget)
	{
		if (i >= slots_)
			return nullptr;
		auto &c = chunks_[i / kChunk];
		if (!c) {
			Charge charge;
			if (!charge.take(budget, sizeof(Chunk)))
				return nullptr;
			c = std::make_unique<Chunk>();
			c->charge = std::move(charge);
			made_++;
		}
		return &c->slot[i % kChunk];
	}
	// Per chunk, kept by the table's owner: its live objects, and its
	// free slots whose generations are spent.  taken() when it makes
	// slot i's object valid, freed() when it ends it (spent: the slot's
	// next generation cannot be given), renewed() when a spent slot
	// starts its generations again, recount() after a reset ended every
	// object.  An allocation steps over a chunk with no slot to give
	// (every one live or spent) without looking at its slots, so that
	// creating the millionth object costs what the first did, and churn
	// that spends slots does not make every create walk them.
	void taken(uint32_t i)
	{
		if (has(i)) {
			chunks_[i / kChunk]->live++;
			live_++;
		}
	}
	void freed(uint32_t i, bool spent)
	{
		if (!has(i))
			return;
		Chunk &c = *chunks_[i / kChunk];
		if (c.live) {
			c.live--;
			live_--;
		}
		if (spent)
			c.spent++;
	}
	void renewed(uint32_t i)
	{
		if (has(i) && chunks_[i / kChunk]->spent)
			chunks_[i / kChunk]->spent--;
	}
	// No slot of i's chunk can be given without renewing one.
	[[nodiscard]] bool chunk_full(uint32_t i) const
	{
		return has(i) && chunks_[i / kChunk]->live + chunks_[i / kChunk]->spent >= kChunk;
	}
	// No slot of i's chunk is spent and free.
	[[nodiscard]] bool none_spent(uint32_t i) const
	{
		return !has(i) || chunks_[i / kChunk]->spent == 0;
	}
	// After a reset (no object valid) that touched the slots below n:
	// their chunks' spent slots counted again, spent(index, object)
	// telling which (the chunks past n were untouched since the last
	// reset: nothing live, their spent counts unchanged).
	template <typename S> void recount(uint32_t n, S &&spent)
	{
		live_ = 0;
		for (uint32_t c = 0; c * kChunk < std::min(n, slots_); c++) {
			if (!chunks_[c])
				continue;
			Chunk &ch = *chunks_[c];
			ch.live = 0;
			ch.spent = 0;
			for (uint32_t k = 0; k < kChunk; k++)
				ch.spent += spent(c * kChunk + k, ch.slot[k]);
		}
	}
	// The same for a table whose slots are never spent (MR keys wrap).
	void none_live(uint32_t n)
	{
		live_ = 0;
		for (uint32_t c = 0; c * kChunk < std::min(n, slots_); c++)
			if (chunks_[c])
				chunks_[c]->live = 0;
	}
	// Valid objects in the whole table.
	[[nodiscard]] uint32_t live() const { return live_; }
	// Slots any() and each() have looked at, for tests: what a walk
	// cost, counted rather than timed.
	[[nodiscard]] uint64_t scanned() const { return scanned_; }
	// pred(object) for the slots below n in chunks with a live object
	// (only those can hold one), until it holds.
	template <typename P> bool any(uint32_t n, P &&pred) const
	{
		return scan(*this, n, pred);
	}
	// f(object) for the slots below n in chunks with a live object.
	template <typename F> void each(uint32_t n, F &&f)
	{
		scan(*this, n, [&f](T &o) {
			f(o);
			return false;
		});
	}

private:
	struct Chunk {
		std::array<T, kChunk> slot{};
		Charge charge;		// sizeof(Chunk), to the host budget
		uint32_t live = 0;	// valid objects
		uint32_t spent = 0;	// free slots with no generation left
	};
	// The one walk of any() and each(), const or not.
	template <typename Self, typename P> static bool scan(Self &self, uint32_t n, P &&pred)
	{
		n = std::min(n, self.slots_);
		for (uint32_t c = 0; c * kChunk < n; c++) {
			if (!self.chunks_[c] || !self.chunks_[c]->live)
				continue;
			for (uint32_t k = 0; k < std::min(kChunk, n - c * kChunk); k++) {
				self.scanned_++;
				if (pred(self.chunks_[c]->slot[k]))
					return true;
			}
		}
		return false;
	}

	uint32_t slots_;
	uint32_t made_ = 0;
	uint32_t live_ = 0;
	mutable uint64_t scanned_ = 0;
	std::vector<std::unique_ptr<Chunk>> chunks_;
};

} // namespace vrnic

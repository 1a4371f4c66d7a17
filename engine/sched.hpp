// SPDX-License-Identifier: GPL-2.0-or-later
// The active-QP scheduler's two structures, kept apart from the QPs so
// that a QP going back to RESET (a fresh Qp in its slot) or being
// destroyed cannot leave them inconsistent:
// - ActiveList: the QPs that may have work, in FIFO order, each at most
//   once.  poll() visits only these, so an idle QP costs nothing.
// - TimerHeap: the deadlines (ack, RNR, pacing), one entry per QP slot
//   and kind at most, ordered by time.  timer() pops the due ones and
//   the platform timer is armed for the top, without a scan.
//
// Entries name a QP by handle (slot and generation), never by pointer: a
// slot can be destroyed and reused, and an entry of the old QP must not
// act on the new one.  The active list keeps, per slot, the handle it
// queued; an entry whose handle is not that (the slot was destroyed, or
// reused and queued again) is dropped when it comes up.  The timer heap
// is indexed (each slot and kind knows its position), so a destroy
// removes its entries at once and the heap never holds more than
// kTimerKinds entries per slot.  A timing wheel was the other choice:
// the deadlines span from a microsecond (pacing) to hours (the ack
// timeout goes to 4.096 µs << 31), which a single wheel cannot cover at
// pacing resolution, and a hierarchical one is more code than a heap of
// at most a few thousand entries, each push or pop O(log n).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "vrnic_hw.h"

namespace vrnic {

inline uint32_t handle_slot(uint32_t handle) { return handle & VRNIC_OBJ_INDEX_MASK; }

// How many slots a per-slot record of `have` grows to so that it holds
// `slot`: at least double, never past what a handle can name.
inline size_t grown(uint32_t slot, size_t have)
{
	return std::min<size_t>(VRNIC_OBJ_INDEX_MASK + 1, std::max<size_t>(slot + 1, 2 * have));
}

class ActiveList {
public:
	// Its per-slot record grows with the highest slot queued (doubling,
	// up to the 2^20 a handle can name).

	// Queue the QP unless its handle is queued already: true if added.
	bool push(uint32_t handle)
	{
		const uint32_t s = handle_slot(handle);
		if (s >= queued_.size())
			queued_.resize(grown(s, queued_.size()), 0);
		uint32_t &q = queued_[s];
		if (q == handle)
			return false;
		q = handle;
		list_.push_back(handle);
		return true;
	}
	[[nodiscard]] size_t size() const { return list_.size(); }
	[[nodiscard]] bool empty() const { return list_.empty(); }
	// The next entry; live() says whether it still stands for its QP.
	uint32_t pop()
	{
		const uint32_t h = list_.front();
		list_.pop_front();
		return h;
	}
	[[nodiscard]] bool live(uint32_t handle) const
	{
		const uint32_t s = handle_slot(handle);
		return s < queued_.size() && queued_[s] == handle;
	}
	// After a live entry's turn: back to the end, or out of the list.
	void requeue(uint32_t handle) { list_.push_back(handle); }
	void leave(uint32_t handle) { queued_[handle_slot(handle)] = 0; }
	// The slot's QP is gone: an entry still in the list is stale.
	void forget(uint32_t slot)
	{
		if (slot < queued_.size())
			queued_[slot] = 0;
	}
	// Empty, in O(entries): only slots with an entry can be marked.
	void clear()
	{
		for (uint32_t h : list_)
			queued_[handle_slot(h)] = 0;
		list_.clear();
	}

private:
	std::deque<uint32_t> list_;
	std::vector<uint32_t> queued_;	// per slot: the handle queued, 0 none
};

// kTimerCc: the QP's congestion-control algorithm asked to be woken
// (DCQCN's rate-increase timer, for one).  kTimerSr: a selective-repeat
// QP's resent holes are still missing (its resends may be lost too).
enum TimerKind : uint8_t {
	kTimerAck, kTimerRnr, kTimerPace, kTimerCc, kTimerSr, kTimerKinds
};

class TimerHeap {
public:
	struct Entry {
		uint64_t at;
		uint32_t handle;
		uint8_t kind;
	};

	// Its per-slot positions grow with the highest slot armed (doubling,
	// up to the 2^20 a handle can name).

	[[nodiscard]] bool empty() const { return heap_.empty(); }
	[[nodiscard]] size_t size() const { return heap_.size(); }
	[[nodiscard]] const Entry &top() const { return heap_.front(); }

	// The QP's deadline of this kind is at (or later): make sure an
	// entry fires no later than at.  An entry of the same QP that fires
	// earlier stays (its pop finds the deadline later and comes back
	// here), so pushing a deadline further out, as every ACK does to the
	// ack timer, costs nothing.  An entry of another QP in the slot (a
	// destroyed one) is replaced.
	void arm(uint32_t handle, TimerKind kind, uint64_t at)
	{
		const size_t id = index(handle, kind);
		if (id >= pos_.size())
			pos_.resize(grown(handle_slot(handle), pos_.size() / kTimerKinds) * kTimerKinds,
				    kNone);
		if (pos_[id] != kNone) {
			Entry &e = heap_[pos_[id]];
			if (e.handle == handle && e.at <= at)
				return;
			e.handle = handle;
			const bool earlier = at < e.at;
			e.at = at;
			if (earlier)
				up(pos_[id]);
			else
				down(pos_[id]);
			return;
		}
		pos_[id] = uint32_t(heap_.size());
		heap_.push_back({at, handle, kind});
		up(heap_.size() - 1);
	}
	Entry pop()
	{
		const Entry e = heap_.front();
		remove_at(0);
		return e;
	}
	// A destroyed QP's slot: its entries go.
	void forget(uint32_t slot)
	{
		for (unsigned k = 0; k < kTimerKinds; k++) {
			const size_t id = size_t(slot) * kTimerKinds + k;
			if (id < pos_.size() && pos_[id] != kNone)
				remove_at(pos_[id]);
		}
	}
	void clear()
	{
		for (const Entry &e : heap_)
			pos_[index(e.handle, TimerKind(e.kind))] = kNone;
		heap_.clear();
	}

private:
	static constexpr uint32_t kNone = ~0u;

	static size_t index(uint32_t handle, TimerKind kind)
	{
		return size_t(handle_slot(handle)) * kTimerKinds + kind;
	}
	void place(size_t i, const Entry &e)
	{
		heap_[i] = e;
		pos_[index(e.handle, TimerKind(e.kind))] = uint32_t(i);
	}
	void up(size_t i)
	{
		const Entry e = heap_[i];
		while (i > 0) {
			const size_t parent = (i - 1) / 2;
			if (heap_[parent].at <= e.at)
				break;
			place(i, heap_[parent]);
			i = parent;
		}
		place(i, e);
	}
	void down(size_t i)
	{
		const Entry e = heap_[i];
		const size_t n = heap_.size();
		for (;;) {
			size_t c = 2 * i + 1;
			if (c >= n)
				break;
			if (c + 1 < n && heap_[c + 1].at < heap_[c].at)
				c++;
			if (e.at <= heap_[c].at)
				break;
			place(i, heap_[c]);
			i = c;
		}
		place(i, e);
	}
	void remove_at(size_t i)
	{
		pos_[index(heap_[i].handle, TimerKind(heap_[i].kind))] = kNone;
		const Entry last = heap_.back();
		heap_.pop_back();
		if (i == heap_.size())
			return;
		place(i, last);
		up(i);
		down(pos_[index(last.handle, TimerKind(last.kind))]);
	}

	std::vector<Entry> heap_;
	std::vector<uint32_t> pos_;	// per slot and kind: index in heap_
};

} // namespace vrnic

// SPDX-License-Identifier: GPL-2.0-or-later
// Memory regions and memory windows: the device's own copy of each MR's
// page list, the windows bound to MR ranges, and the checks (key, PD,
// access, bounds) every DMA through an MR or a window goes through.
#pragma once

#include <cstdint>
#include <vector>

#include "budget.hpp"
#include "platform.hpp"
#include "slot_table.hpp"
#include "vrnic_hw.h"

namespace vrnic {

struct Mr {
	bool valid = false;
	uint8_t key = 0;		// low 8 bits of lkey/rkey, bumped on reuse
	uint32_t pdn = 0;
	uint32_t access = 0;
	uint64_t iova = 0;
	uint64_t length = 0;
	unsigned int page_shift = 12;
	bool phys = false;		// iova is the bus address (kernel only)
	bool fast = false;		// fast-register MR (REG_MR / LOCAL_INV)
	bool live = true;		// fast: registered, keys usable
	uint32_t capacity = 0;		// fast: most pages a REG_MR may give
	std::vector<uint64_t> pages;	// bus address of each page
	Charge charge;			// pages' host memory (capacity, fast)
	uint32_t windows = 0;		// region: windows bound to it
	// A memory window (type 1 or 2; 0: this is a region).  live means
	// bound; iova, length and access are then the window's own, onto
	// region index `region` (and, type 2, for QP `qpn` only).
	uint8_t mw_type = 0;
	uint32_t region = 0;
	uint32_t qpn = 0;
};

enum class MrCheck { Ok, BadKey, BadPd, Access, Bounds };

class MrTable {
public:
	explicit MrTable(HostBudget &budget)
		: budget_(budget), mrs_(VRNIC_MAX_MR) {}
	// Host memory held for the table's chunks (charged to the budget).
	[[nodiscard]] uint64_t table_bytes() const { return mrs_.bytes(); }
	// Slots walks looked at (tests).
	[[nodiscard]] uint64_t scanned() const { return mrs_.scanned(); }

	// Copy the page list out of guest memory once and validate it.
	// kernel: the caller is the kernel driver (PHYS mode allowed).
	uint8_t create(const Platform &plat, const vrnic_admin_create_mr &c,
		       bool kernel, uint32_t &key);
	// DESTROY_MR (window false) or DEALLOC_MW (window true); pdn: the
	// PD it was made in, on success.
	uint8_t destroy(uint32_t key, bool window, uint32_t &pdn);
	// REG_MR: make an invalid fast-register MR of PD pdn valid with the
	// WQE's key, rights and page list (read from guest memory now).
	// False if refused; the MR is then left invalid.
	bool fast_register(const Platform &plat, const vrnic_reg_mr_wqe &w,
			   uint32_t pdn);
	// LOCAL_INV and SEND_WITH_INV: invalidate the fast-register MR or
	// the bound type 2 window with this key in PD pdn; remote_qpn (the
	// QP a SEND_WITH_INV arrived on, 0 for LOCAL_INV) must be the one a
	// window is bound to.  False if there is none.
	bool invalidate(uint32_t key, uint32_t pdn, uint32_t remote_qpn = 0);
	// Memory windows: ALLOC_MW, and BIND_MW from a QP of PD pdn.
	uint8_t alloc_mw(uint32_t pdn, uint8_t type, uint32_t &key);
	bool bind_mw(const vrnic_bind_mw_wqe &w, uint32_t pdn, uint32_t qpn);
	void reset();

	// Look up key and check PD and access (the whole MR).
	MrCheck check_key(uint32_t key, uint32_t pdn, uint32_t access,
			  const Mr **out) const;
	// Look up key and check PD, access and [addr, addr + len).  Local
	// keys: a window's key is refused.
	MrCheck check(uint32_t key, uint32_t pdn, uint64_t addr, uint64_t len,
		      uint32_t access, const Mr **out) const;
	// The same for an rkey on QP qpn, which may also name a bound window:
	// its range and rights are checked, *out is the region under it.
	MrCheck check_remote(uint32_t key, uint32_t pdn, uint32_t qpn,
			     uint64_t addr, uint64_t len, uint32_t access,
			     const Mr **out) const;

	// DMA between a local buffer and [addr, addr + len) of a checked MR,
	// page by page.  False if a transfer failed.
	static bool read(const Platform &plat, const Mr &mr, uint64_t addr,
			 void *buf, size_t len);
	static bool write(const Platform &plat, const Mr &mr, uint64_t addr,
			  const void *buf, size_t len);

private:
	uint8_t insert(Mr &&m, uint32_t &key);
	void unbind(Mr &window);
	// Call f(bus_addr, offset_in_buffer, n) for each page-sized piece.
	template <typename F>
	static bool for_each_piece(const Mr &mr, uint64_t addr, size_t len, F f);

	// Slot idx, or nullptr when its chunk was never made.
	Mr *at(uint32_t idx) { return mrs_.find(idx); }
	const Mr *at(uint32_t idx) const { return mrs_.find(idx); }

	HostBudget &budget_;
	// 2^20 slots in chunks made with use (issue 29), as the QP table's.
	SlotTable<Mr> mrs_;
	uint32_t next_ = 0;	// where the free slot search starts
	// Slots used since the last reset are [0, used_); the others are as
	// the constructor or the last reset left them.
	uint32_t used_ = 0;
};

} // namespace vrnic

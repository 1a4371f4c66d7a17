// SPDX-License-Identifier: GPL-2.0-or-later
#include "mr.hpp"

#include <algorithm>
#include <array>

namespace vrnic {

namespace {

constexpr unsigned int kMinPageShift = 12;
constexpr unsigned int kMaxPageShift = 30;

// What every MR's range and rights must be: known rights, remote write or
// atomic only with local write (as in the IB spec), a range that is not
// empty and does not wrap.
bool valid_region(uint64_t iova, uint64_t length, uint32_t access)
{
	if ((access & ~VRNIC_ACCESS_ALL) || length == 0 || iova + length < iova)
		return false;
	return !(access & (VRNIC_ACCESS_REMOTE_WRITE | VRNIC_ACCESS_REMOTE_ATOMIC)) ||
	       (access & VRNIC_ACCESS_LOCAL_WRITE);
}

// Pages of 1 << shift bytes that a valid_region() spans; 0 if the page
// size is not one the device takes.
uint64_t pages_spanned(uint64_t iova, uint64_t length, unsigned int shift)
{
	if (shift < kMinPageShift || shift > kMaxPageShift)
		return 0;
	return ((iova + length - 1) >> shift) - (iova >> shift) + 1;
}

// A page list as read from guest memory: little-endian, each address
// non-zero, aligned to the page size and not wrapping.  The same page may
// appear more than once (each entry is charged all the same).
bool decode_pages(std::vector<uint64_t> &pages, unsigned int shift)
{
	const uint64_t psz = 1ull << shift;

	for (auto &p : pages) {
		p = le(p);
		if (p == 0 || p & (psz - 1) || p + psz < p)
			return false;
	}
	return true;
}

} // namespace

void MrTable::reset()
{
	// Slots past used_ are untouched since the last reset.
	mrs_.each(used_, [](Mr &m) {
		const uint8_t key = m.key;
		m = Mr();
		m.key = key;	// keys keep moving across resets
	});
	mrs_.none_live(used_);
	next_ = 0;
	used_ = 0;
}

uint8_t MrTable::create(const Platform &plat, const vrnic_admin_create_mr &c,
			bool kernel, uint32_t &key)
{
	const uint64_t iova = le(c.iova), length = le(c.length);
	const unsigned int shift = c.page_shift;
	const uint32_t access = le(c.access);
	const uint32_t npages = le(c.npages);
	Mr m;

	if (c.pbl_mode == VRNIC_PBL_FAST) {
		// Invalid until a REG_MR; only its capacity is known now.
		if (!kernel || iova || length || access || shift ||
		    npages == 0 || npages > VRNIC_MAX_FAST_REG_PAGES)
			return VRNIC_ADMIN_ST_BAD_PARAM;
		m.pdn = le(c.pdn);
		m.fast = true;
		m.live = false;
		m.capacity = npages;
		if (!m.charge.take(budget_, uint64_t(npages) * sizeof(uint64_t)))
			return VRNIC_ADMIN_ST_NO_RESOURCE;
		m.pages.reserve(npages);
		return insert(std::move(m), key);
	}
	if (!valid_region(iova, length, access))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	m.iova = iova;
	m.length = length;
	m.access = access;
	m.pdn = le(c.pdn);

	if (c.pbl_mode == VRNIC_PBL_PHYS) {
		if (!kernel)
			return VRNIC_ADMIN_ST_BAD_PARAM;
		m.phys = true;
	} else {
		const uint64_t need = pages_spanned(iova, length, shift);
		if (npages == 0 || npages != need || npages > VRNIC_MAX_MR_PAGES)
			return VRNIC_ADMIN_ST_BAD_PARAM;
		m.page_shift = shift;
		// Charged before it is allocated: the budget, not the guest,
		// bounds what page lists hold.
		if (!m.charge.take(budget_, uint64_t(npages) * sizeof(uint64_t)))
			return VRNIC_ADMIN_ST_NO_RESOURCE;
		m.pages.resize(npages);
		switch (c.pbl_mode) {
		case VRNIC_PBL_INLINE: {
			if (npages > 3)
				return VRNIC_ADMIN_ST_BAD_PARAM;
			const uint64_t in[3] = {le(c.pbl), le(c.inline_pages[0]),
						le(c.inline_pages[1])};
			std::copy_n(in, npages, m.pages.begin());
			break;
		}
		case VRNIC_PBL_LEVEL1:
			if (!plat.dma_read(le(c.pbl), m.pages.data(),
					   size_t(npages) * sizeof(uint64_t)))
				return VRNIC_ADMIN_ST_DMA_ERROR;
			break;
		case VRNIC_PBL_LEVEL2: {
			const uint32_t nl1 = (npages + VRNIC_PBL_PER_PAGE - 1) /
					     VRNIC_PBL_PER_PAGE;
			// The level 1 list is held only during this command.
			Charge l1_charge;
			if (!l1_charge.take(budget_, uint64_t(nl1) * sizeof(uint64_t)))
				return VRNIC_ADMIN_ST_NO_RESOURCE;
			std::vector<uint64_t> l1(nl1);
			if (!plat.dma_read(le(c.pbl), l1.data(),
					   l1.size() * sizeof(uint64_t)))
				return VRNIC_ADMIN_ST_DMA_ERROR;
			for (uint32_t i = 0; i < nl1; i++) {
				const uint32_t n = std::min<uint32_t>(
					VRNIC_PBL_PER_PAGE,
					npages - i * VRNIC_PBL_PER_PAGE);
				if (!plat.dma_read(le(l1[i]),
						   &m.pages[size_t(i) * VRNIC_PBL_PER_PAGE],
						   size_t(n) * sizeof(uint64_t)))
					return VRNIC_ADMIN_ST_DMA_ERROR;
			}
			break;
		}
		default:
			return VRNIC_ADMIN_ST_BAD_PARAM;
		}
		if (!decode_pages(m.pages, shift))
			return VRNIC_ADMIN_ST_BAD_PARAM;
	}
	return insert(std::move(m), key);
}

// A free slot, round robin from next_: first among the chunks made
// (stepping over full ones without looking at their slots), then in a
// new chunk, charged to the budget.  Keys are 8 bits that wrap: a slot
// is never spent.
uint8_t MrTable::insert(Mr &&m, uint32_t &key)
{
	constexpr uint32_t kChunk = SlotTable<Mr>::kChunk;
	const uint32_t n = mrs_.size();

	static_assert(VRNIC_MAX_MR % kChunk == 0);
	for (const bool made : {true, false}) {
		for (uint32_t k = 0; k < n; k++) {
			const uint32_t idx = (next_ + k) % n;
			if (mrs_.has(idx) != made || mrs_.chunk_full(idx)) {
				k += kChunk - 1 - idx % kChunk;
				continue;
			}
			Mr *slot = mrs_.make(idx, budget_);
			if (!slot)
				return VRNIC_ADMIN_ST_NO_RESOURCE;
			if (slot->valid)
				continue;
			used_ = std::max(used_, idx + 1);
			m.key = uint8_t(slot->key + 1);
			m.valid = true;
			*slot = std::move(m);
			mrs_.taken(idx);
			next_ = idx + 1;
			key = idx << VRNIC_MR_KEY_BITS | slot->key;
			return VRNIC_ADMIN_ST_OK;
		}
	}
	return VRNIC_ADMIN_ST_NO_RESOURCE;
}

uint8_t MrTable::destroy(uint32_t key, bool window, uint32_t &pdn)
{
	const uint32_t idx = key >> VRNIC_MR_KEY_BITS;

	// A fast-register MR's and a window's key byte is the consumer's to
	// change with each REG_MR or bind, so the index alone names them.
	Mr *m = at(idx);
	if (!m || !m->valid || window != (m->mw_type != 0) ||
	    (!m->fast && !window && m->key != uint8_t(key)))
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (m->windows)
		return VRNIC_ADMIN_ST_BUSY;	// windows are bound to it
	if (m->mw_type)
		unbind(*m);
	pdn = m->pdn;
	const uint8_t k = m->key;
	*m = Mr();	// its page list goes back to the budget
	m->key = k;
	mrs_.freed(idx, false);
	return VRNIC_ADMIN_ST_OK;
}

bool MrTable::fast_register(const Platform &plat, const vrnic_reg_mr_wqe &w,
			    uint32_t pdn)
{
	const uint32_t key = le(w.key), idx = key >> VRNIC_MR_KEY_BITS;
	const uint64_t iova = le(w.iova), length = le(w.length);
	const uint32_t access = le(w.access), npages = le(w.npages);
	const unsigned int shift = w.page_shift;

	if (!at(idx))
		return false;
	Mr &m = *at(idx);
	// Only an invalid fast-register MR of the QP's PD, and only the low
	// 8 bits of its key may change (IBA 10.7.2.2; rxe does the same).
	if (!m.valid || !m.fast || m.live || m.pdn != pdn)
		return false;
	if (!valid_region(iova, length, access))
		return false;
	const uint64_t need = pages_spanned(iova, length, shift);
	if (need == 0 || need > npages || npages > m.capacity)
		return false;
	// Within the capacity reserved at creation: no allocation here.
	m.pages.resize(need);
	if (!plat.dma_read(le(w.pbl), m.pages.data(),
			   size_t(need) * sizeof(uint64_t)) ||
	    !decode_pages(m.pages, shift))
		return false;
	m.iova = iova;
	m.length = length;
	m.access = access;
	m.page_shift = shift;
	m.key = uint8_t(key);
	m.live = true;
	return true;
}

bool MrTable::invalidate(uint32_t key, uint32_t pdn, uint32_t remote_qpn)
{
	const uint32_t idx = key >> VRNIC_MR_KEY_BITS;

	if (!at(idx))
		return false;
	Mr &m = *at(idx);
	if (!m.valid || m.key != uint8_t(key) || m.pdn != pdn)
		return false;
	if (m.mw_type) {
		// Only a bound type 2 window (IBA o10-37.2.26), and remotely
		// only through the QP it is bound to.
		if (m.mw_type != VRNIC_MW_TYPE_2 || !m.live ||
		    (remote_qpn && m.qpn != remote_qpn))
			return false;
		unbind(m);
		return true;
	}
	// A region windows are bound to stays valid (rxe's rule too): a new
	// REG_MR could otherwise move it from under them.
	if (!m.fast || m.windows)
		return false;
	m.live = false;
	return true;
}

uint8_t MrTable::alloc_mw(uint32_t pdn, uint8_t type, uint32_t &key)
{
	if (type != VRNIC_MW_TYPE_1 && type != VRNIC_MW_TYPE_2)
		return VRNIC_ADMIN_ST_BAD_PARAM;
	Mr w;
	w.pdn = pdn;
	w.mw_type = type;
	w.live = false;		// unbound
	return insert(std::move(w), key);
}

void MrTable::unbind(Mr &w)
{
	Mr *r = at(w.region);
	if (w.live && w.length && r && r->windows)
		r->windows--;
	w.live = false;
	w.iova = w.length = 0;
	w.access = 0;
	w.qpn = 0;
}

// IBA 10.6.7.2 and the checks rxe makes (rxe_check_bind_mw).
bool MrTable::bind_mw(const vrnic_bind_mw_wqe &b, uint32_t pdn, uint32_t qpn)
{
	const uint32_t key = le(b.mw_key), idx = key >> VRNIC_MR_KEY_BITS;
	const uint64_t addr = le(b.addr), length = le(b.length);
	const uint32_t access = le(b.access) & ~uint32_t(VRNIC_ACCESS_LOCAL_WRITE);

	if (!at(idx))
		return false;
	Mr &w = *at(idx);
	if (!w.valid || !w.mw_type || w.mw_type != b.mw_type ||
	    w.key != uint8_t(key) || w.pdn != pdn ||
	    (access & ~uint32_t(VRNIC_ACCESS_MW_RIGHTS)))
		return false;
	// A type 2 window is bound once, until invalidated.
	if (w.mw_type == VRNIC_MW_TYPE_2 && w.live)
		return false;
	uint32_t region = 0;
	if (length || w.mw_type == VRNIC_MW_TYPE_2) {
		const Mr *mr = nullptr;
		const uint32_t mr_key = le(b.mr_key);
		// The region: this PD's, MW_BIND, and local write under
		// remote write or atomic rights (C10-74, C10-75, C10-76).
		if (check(mr_key, pdn, addr, length, VRNIC_ACCESS_MW_BIND, &mr) !=
			    MrCheck::Ok ||
		    ((access & (VRNIC_ACCESS_REMOTE_WRITE |
				VRNIC_ACCESS_REMOTE_ATOMIC)) &&
		     !(mr->access & VRNIC_ACCESS_LOCAL_WRITE)))
			return false;
		region = mr_key >> VRNIC_MR_KEY_BITS;
	}
	unbind(w);		// a type 1 window may be bound again
	w.key = b.new_key;
	if (length == 0 && w.mw_type == VRNIC_MW_TYPE_1)
		return true;	// bound to nothing: unbound
	w.iova = addr;
	w.length = length;
	w.access = access;
	w.region = region;
	w.qpn = w.mw_type == VRNIC_MW_TYPE_2 ? qpn : 0;
	w.live = true;
	if (length)
		at(region)->windows++;	// check() found it
	return true;
}

MrCheck MrTable::check_key(uint32_t key, uint32_t pdn, uint32_t access,
			   const Mr **out) const
{
	const uint32_t idx = key >> VRNIC_MR_KEY_BITS;

	const Mr *mp = at(idx);
	if (!mp || !mp->valid || !mp->live || mp->key != uint8_t(key) ||
	    mp->mw_type)
		return MrCheck::BadKey;
	const Mr &m = *mp;
	if (m.pdn != pdn)
		return MrCheck::BadPd;
	if ((m.access & access) != access)
		return MrCheck::Access;
	*out = &m;
	return MrCheck::Ok;
}

MrCheck MrTable::check(uint32_t key, uint32_t pdn, uint64_t addr,
		       uint64_t len, uint32_t access, const Mr **out) const
{
	const Mr *m = nullptr;
	const MrCheck r = check_key(key, pdn, access, &m);

	if (r != MrCheck::Ok)
		return r;
	if (addr < m->iova || addr + len < addr ||
	    addr + len > m->iova + m->length)
		return MrCheck::Bounds;
	*out = m;
	return MrCheck::Ok;
}

MrCheck MrTable::check_remote(uint32_t key, uint32_t pdn, uint32_t qpn,
			      uint64_t addr, uint64_t len, uint32_t access,
			      const Mr **out) const
{
	const uint32_t idx = key >> VRNIC_MR_KEY_BITS;

	const Mr *wp = at(idx);
	if (!wp || !wp->mw_type)
		return check(key, pdn, addr, len, access, out);
	const Mr &w = *wp;
	if (!w.valid || !w.live || w.key != uint8_t(key) || w.length == 0)
		return MrCheck::BadKey;
	if (w.pdn != pdn || (w.mw_type == VRNIC_MW_TYPE_2 && w.qpn != qpn))
		return MrCheck::BadPd;
	if ((w.access & access) != access)
		return MrCheck::Access;
	if (addr < w.iova || addr + len < addr || addr + len > w.iova + w.length)
		return MrCheck::Bounds;
	// The bind kept the window inside its region, and a region with
	// windows cannot be destroyed; a fast-register one can be
	// invalidated under it, which ends the window's use too.
	const Mr *m = at(w.region);
	if (!m || !m->valid || !m->live)
		return MrCheck::BadKey;
	*out = m;
	return MrCheck::Ok;
}

template <typename F>
bool MrTable::for_each_piece(const Mr &mr, uint64_t addr, size_t len, F f)
{
	if (mr.phys)
		return f(addr, size_t(0), len);
	const uint64_t psz = 1ull << mr.page_shift;
	const uint64_t base = mr.iova & ~(psz - 1);
	size_t done = 0;
	while (done < len) {
		const uint64_t off = addr + done - base;
		const uint64_t page = off >> mr.page_shift;
		const uint64_t in_page = off & (psz - 1);
		const size_t n = size_t(std::min<uint64_t>(len - done, psz - in_page));
		if (page >= mr.pages.size())
			return false;	// check() guarantees this never happens
		if (!f(mr.pages[page] + in_page, done, n))
			return false;
		done += n;
	}
	return true;
}

bool MrTable::read(const Platform &plat, const Mr &mr, uint64_t addr,
		   void *buf, size_t len)
{
	auto *p = static_cast<uint8_t *>(buf);
	return for_each_piece(mr, addr, len, [&](uint64_t bus, size_t o, size_t n) {
		return plat.dma_read(bus, p + o, n);
	});
}

bool MrTable::write(const Platform &plat, const Mr &mr, uint64_t addr,
		    const void *buf, size_t len)
{
	const auto *p = static_cast<const uint8_t *>(buf);
	return for_each_piece(mr, addr, len, [&](uint64_t bus, size_t o, size_t n) {
		return plat.dma_write(bus, p + o, n);
	});
}

} // namespace vrnic

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
// aligned to the page size and not wrapping.
bool decode_pages(std::vector<uint64_t> &pages, unsigned int shift)
{
	const uint64_t psz = 1ull << shift;

	for (auto &p : pages) {
		p = le(p);
		if (p & (psz - 1) || p + psz < p)
			return false;
	}
	return true;
}

} // namespace

void MrTable::reset()
{
	for (auto &m : mrs_) {
		const uint8_t key = m.key;
		m = Mr();
		m.key = key;	// keys keep moving across resets
	}
	next_ = 0;
}

bool MrTable::pd_in_use(uint32_t pdn) const
{
	return std::any_of(mrs_.begin(), mrs_.end(), [pdn](const Mr &m) {
		return m.valid && m.pdn == pdn;
	});
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

uint8_t MrTable::insert(Mr &&m, uint32_t &key)
{
	for (uint32_t n = 0; n < mrs_.size(); n++) {
		const uint32_t idx = (next_ + n) % uint32_t(mrs_.size());
		if (mrs_[idx].valid)
			continue;
		m.key = uint8_t(mrs_[idx].key + 1);
		m.valid = true;
		mrs_[idx] = std::move(m);
		next_ = idx + 1;
		key = idx << VRNIC_MR_KEY_BITS | mrs_[idx].key;
		return VRNIC_ADMIN_ST_OK;
	}
	return VRNIC_ADMIN_ST_NO_RESOURCE;
}

uint8_t MrTable::destroy(uint32_t key)
{
	const uint32_t idx = key >> VRNIC_MR_KEY_BITS;

	// A fast-register MR's key byte is the consumer's to change with
	// each REG_MR, so its index alone names it here.
	if (idx >= mrs_.size() || !mrs_[idx].valid ||
	    (!mrs_[idx].fast && mrs_[idx].key != uint8_t(key)))
		return VRNIC_ADMIN_ST_NOT_FOUND;
	const uint8_t k = mrs_[idx].key;
	mrs_[idx] = Mr();
	mrs_[idx].key = k;
	return VRNIC_ADMIN_ST_OK;
}

bool MrTable::fast_register(const Platform &plat, const vrnic_reg_mr_wqe &w,
			    uint32_t pdn)
{
	const uint32_t key = le(w.key), idx = key >> VRNIC_MR_KEY_BITS;
	const uint64_t iova = le(w.iova), length = le(w.length);
	const uint32_t access = le(w.access), npages = le(w.npages);
	const unsigned int shift = w.page_shift;

	if (idx >= mrs_.size())
		return false;
	Mr &m = mrs_[idx];
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

bool MrTable::invalidate(uint32_t key, uint32_t pdn)
{
	const uint32_t idx = key >> VRNIC_MR_KEY_BITS;

	if (idx >= mrs_.size())
		return false;
	Mr &m = mrs_[idx];
	if (!m.valid || !m.fast || m.key != uint8_t(key) || m.pdn != pdn)
		return false;
	m.live = false;
	return true;
}

MrCheck MrTable::check_key(uint32_t key, uint32_t pdn, uint32_t access,
			   const Mr **out) const
{
	const uint32_t idx = key >> VRNIC_MR_KEY_BITS;

	if (idx >= mrs_.size() || !mrs_[idx].valid || !mrs_[idx].live ||
	    mrs_[idx].key != uint8_t(key))
		return MrCheck::BadKey;
	const Mr &m = mrs_[idx];
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

// SPDX-License-Identifier: GPL-2.0-or-later
#include "frame.hpp"

#include <algorithm>

namespace vrnic::fabric {

namespace {

uint16_t be16(std::span<const uint8_t> b, size_t off)
{
	return static_cast<uint16_t>((b[off] << 8) | b[off + 1]);
}

uint32_t be24(std::span<const uint8_t> b, size_t off)
{
	return (uint32_t{b[off]} << 16) | (uint32_t{b[off + 1]} << 8) | b[off + 2];
}

void put16(std::span<uint8_t> b, size_t off, uint16_t v)
{
	b[off] = static_cast<uint8_t>(v >> 8);
	b[off + 1] = static_cast<uint8_t>(v);
}

// FNV-1a, then a 32-bit finaliser (murmur3's fmix32) to spread the bits.
struct Hasher {
	uint32_t h = 2166136261U;
	void add(std::span<const uint8_t> b)
	{
		for (uint8_t c : b) {
			h ^= c;
			h *= 16777619U;
		}
	}
	void add16(uint16_t v)
	{
		const std::array<uint8_t, 2> b{static_cast<uint8_t>(v >> 8),
					       static_cast<uint8_t>(v)};
		add(b);
	}
	uint32_t finish() const
	{
		uint32_t x = h;
		x ^= x >> 16;
		x *= 0x85ebca6bU;
		x ^= x >> 13;
		x *= 0xc2b2ae35U;
		x ^= x >> 16;
		return x;
	}
};

bool parse_l4(std::span<const uint8_t> f, FrameInfo &info, size_t l4_end)
{
	if (info.proto != 17 && info.proto != 6)
		return true;
	const size_t need = info.proto == 17 ? 8 : 20;
	if (info.l4 + need > l4_end)
		return false;
	info.sport = be16(f, info.l4);
	info.dport = be16(f, info.l4 + 2);
	if (info.proto == 17) {
		const uint16_t ulen = be16(f, info.l4 + 4);
		if (ulen < 8 || info.l4 + ulen > l4_end)
			return false;
		info.payload = info.l4 + 8;
		if (info.dport == kRoceUdpPort && info.l4 + ulen >= info.payload + 12) {
			info.bth = true;
			info.bth_opcode = f[info.payload];
			info.dest_qpn = be24(f, info.payload + 5);
			info.psn = be24(f, info.payload + 9);
		}
	} else {
		const size_t off = static_cast<size_t>(f[info.l4 + 12] >> 4) * 4;
		if (off < 20 || info.l4 + off > l4_end)
			return false;
		info.payload = info.l4 + off < l4_end ? info.l4 + off : 0;
	}
	return true;
}

} // namespace

bool is_multicast(const Mac &m)
{
	return (m[0] & 1) != 0;
}

uint16_t ipv4_checksum(std::span<const uint8_t> header)
{
	uint32_t sum = 0;
	for (size_t i = 0; i + 1 < header.size(); i += 2)
		sum += be16(header, i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return static_cast<uint16_t>(~sum);
}

Parsed parse_frame(std::span<const uint8_t> f)
{
	Parsed p;
	FrameInfo &info = p.info;
	if (f.size() < kEthHeader) {
		p.error = ParseError::Truncated;
		return p;
	}
	std::copy_n(f.begin(), 6, info.dst.begin());
	std::copy_n(f.begin() + 6, 6, info.src.begin());
	if (is_multicast(info.src)) {
		p.error = ParseError::Malformed;
		return p;
	}
	size_t off = 12;
	info.ethertype = be16(f, off);
	if (info.ethertype == kEtherVlan) {
		if (f.size() < kEthHeader + kVlanTag) {
			p.error = ParseError::Truncated;
			return p;
		}
		info.vlan = true;
		info.pcp = f[off + 2] >> 5;
		off += kVlanTag;
		info.ethertype = be16(f, off);
	}
	off += 2;
	if (info.ethertype == kEtherMacControl) {
		info.mac_control = true;
		if (f.size() < off + 2)
			p.error = ParseError::Truncated;
		return p;
	}
	if (info.ethertype == kEtherIpv4) {
		if (f.size() < off + 20) {
			p.error = ParseError::Truncated;
			return p;
		}
		const size_t ihl = size_t{f[off] & 0xfU} * 4;
		const size_t total = be16(f, off + 2);
		if ((f[off] >> 4) != 4 || ihl < 20 || total < ihl) {
			p.error = ParseError::Malformed;
			return p;
		}
		if (off + total > f.size()) {
			p.error = ParseError::Truncated;
			return p;
		}
		info.ipv4 = true;
		info.l3 = off;
		info.dscp = f[off + 1] >> 2;
		info.ecn = static_cast<Ecn>(f[off + 1] & 3);
		info.proto = f[off + 9];
		std::copy_n(f.begin() + static_cast<long>(off + 12), 4, info.sip.begin());
		std::copy_n(f.begin() + static_cast<long>(off + 16), 4, info.dip.begin());
		const bool first_fragment = (be16(f, off + 6) & 0x1fff) == 0;
		const bool more = (be16(f, off + 6) & 0x2000) != 0;
		if (first_fragment && !more) {
			info.l4 = off + ihl;
			if (!parse_l4(f, info, off + total)) {
				p.error = ParseError::Truncated;
				return p;
			}
		}
		if (info.payload == 0)
			info.l4 = 0;
		return p;
	}
	if (info.ethertype == kEtherIpv6) {
		if (f.size() < off + 40) {
			p.error = ParseError::Truncated;
			return p;
		}
		if ((f[off] >> 4) != 6) {
			p.error = ParseError::Malformed;
			return p;
		}
		const size_t plen = be16(f, off + 4);
		if (off + 40 + plen > f.size()) {
			p.error = ParseError::Truncated;
			return p;
		}
		info.ipv6 = true;
		info.l3 = off;
		const auto tclass = static_cast<uint8_t>(
			((f[off] & 0xfU) << 4) | (f[off + 1] >> 4));
		info.dscp = tclass >> 2;
		info.ecn = static_cast<Ecn>(tclass & 3);
		info.proto = f[off + 6];
		std::copy_n(f.begin() + static_cast<long>(off + 8), 16, info.sip.begin());
		std::copy_n(f.begin() + static_cast<long>(off + 24), 16, info.dip.begin());
		info.l4 = off + 40;
		if (!parse_l4(f, info, off + 40 + plen)) {
			p.error = ParseError::Truncated;
			return p;
		}
		if (info.payload == 0)
			info.l4 = 0;
	}
	return p;
}

bool mark_ce(std::span<uint8_t> f, const FrameInfo &info)
{
	if (info.ecn == Ecn::NotEct || info.ecn == Ecn::Ce)
		return false;
	const size_t l3 = info.l3;
	if (info.ipv4) {
		if (l3 + 20 > f.size())
			return false;
		// RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') over the 16-bit word
		// holding version/IHL and TOS.
		const uint16_t old_word = be16(f, l3);
		f[l3 + 1] |= 3;
		const uint16_t new_word = be16(f, l3);
		uint32_t sum = static_cast<uint16_t>(~be16(f, l3 + 10));
		sum += static_cast<uint16_t>(~old_word);
		sum += new_word;
		while (sum >> 16)
			sum = (sum & 0xffff) + (sum >> 16);
		put16(f, l3 + 10, static_cast<uint16_t>(~sum));
		return true;
	}
	if (info.ipv6) {
		if (l3 + 40 > f.size())
			return false;
		f[l3 + 1] |= 0x30;	// the ECN bits are tclass bits 1..0
		return true;
	}
	return false;
}

Bytes build_pfc(const Mac &src, const Pfc &pfc)
{
	Bytes f(60, 0);	// minimum frame without FCS
	std::copy(kPfcDestination.begin(), kPfcDestination.end(), f.begin());
	std::copy(src.begin(), src.end(), f.begin() + 6);
	put16(f, 12, kEtherMacControl);
	put16(f, 14, kOpcodePfc);
	put16(f, 16, pfc.enable);
	for (int i = 0; i < kPriorities; i++)
		put16(f, 18 + 2 * static_cast<size_t>(i), pfc.quanta[static_cast<size_t>(i)]);
	return f;
}

std::optional<Pfc> parse_pfc(std::span<const uint8_t> f, const FrameInfo &info)
{
	if (!info.mac_control)
		return std::nullopt;
	const size_t op = info.vlan ? 18 : 14;
	if (f.size() < op + 4)
		return std::nullopt;
	const uint16_t opcode = be16(f, op);
	Pfc pfc;
	if (opcode == kOpcodePause) {
		pfc.enable = 0xff;
		pfc.quanta.fill(be16(f, op + 2));
		return pfc;
	}
	if (opcode != kOpcodePfc || f.size() < op + 4 + size_t{2} * kPriorities)
		return std::nullopt;
	pfc.enable = static_cast<uint8_t>(be16(f, op + 2));
	for (int i = 0; i < kPriorities; i++)
		pfc.quanta[static_cast<size_t>(i)] = be16(f, op + 4 + 2 * static_cast<size_t>(i));
	return pfc;
}

uint32_t flow_hash(const FrameInfo &info, uint32_t salt)
{
	Hasher h;
	h.add16(static_cast<uint16_t>(salt >> 16));
	h.add16(static_cast<uint16_t>(salt));
	if (info.ipv4 || info.ipv6) {
		const size_t alen = info.ipv4 ? 4 : 16;
		h.add(std::span(info.sip).first(alen));
		h.add(std::span(info.dip).first(alen));
		h.add16(info.proto);
		h.add16(info.sport);
		h.add16(info.dport);
	} else {
		h.add(info.src);
		h.add(info.dst);
		h.add16(info.ethertype);
	}
	return h.finish();
}

size_t flip_bit(std::span<uint8_t> f, const FrameInfo &info, uint64_t bit)
{
	size_t start = info.payload != 0 && info.payload < f.size() ? info.payload
								    : kEthHeader;
	if (start >= f.size())
		start = 0;
	const uint64_t bits = uint64_t{f.size() - start} * 8;
	const uint64_t b = bit % bits;
	const size_t off = start + static_cast<size_t>(b / 8);
	f[off] ^= static_cast<uint8_t>(1U << (b % 8));
	return off;
}

} // namespace vrnic::fabric

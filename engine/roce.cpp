// SPDX-License-Identifier: GPL-2.0-or-later
#include "roce.hpp"

#include <cstring>

#include <isa-l/crc.h>

namespace vrnic::roce {

namespace {

constexpr uint16_t kEthTypeVlan = 0x8100;
constexpr uint16_t kEthTypeIpv4 = 0x0800;
constexpr uint16_t kEthTypeIpv6 = 0x86dd;
constexpr uint16_t kRocePort = 4791;
constexpr uint8_t kIpProtoUdp = 17;

uint16_t get16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t get24(const uint8_t *p) { return uint32_t(p[0]) << 16 | p[1] << 8 | p[2]; }
uint32_t get32(const uint8_t *p) { return uint32_t(get16(p)) << 16 | get16(p + 2); }
uint64_t get64(const uint8_t *p) { return uint64_t(get32(p)) << 32 | get32(p + 4); }
void put16(uint8_t *p, uint16_t v) { p[0] = uint8_t(v >> 8); p[1] = uint8_t(v); }
void put24(uint8_t *p, uint32_t v) { p[0] = uint8_t(v >> 16); put16(p + 1, uint16_t(v)); }
void put32(uint8_t *p, uint32_t v) { put16(p, uint16_t(v >> 16)); put16(p + 2, uint16_t(v)); }
void put64(uint8_t *p, uint64_t v) { put32(p, uint32_t(v >> 32)); put32(p + 4, uint32_t(v)); }

uint16_t ip4_checksum(const uint8_t *h)
{
	uint32_t sum = 0;

	for (size_t i = 0; i < kIp4Len; i += 2)
		sum += get16(h + i);
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return uint16_t(~sum);
}

size_t ext_len(uint16_t f)
{
	size_t n = 0;

	if (f & H_RETH) n += kRethLen;
	if (f & H_AETH) n += kAethLen;
	if (f & H_ATOMIC) n += kAtomicLen;
	if (f & H_ATOMIC_ACK) n += kAtomicAckLen;
	if (f & H_IMM) n += kImmLen;
	if (f & H_IETH) n += kIethLen;
	if (f & H_DETH) n += kDethLen;
	if (f & H_FETH) n += kFethLen;
	if (f & H_XRCETH) n += kXrcethLen;
	if (f & H_CNP) n += kCnpRsvdLen;
	if (f & H_SACK) n += kSackLen;
	return n;
}

size_t l3_len(bool ipv6) { return ipv6 ? kIp6Len : kIp4Len; }

// The Ethernet header's length, with its 802.1Q tag if it has one; the
// caller guarantees the frame holds it.
size_t frame_l2_len(const uint8_t *frame)
{
	return get16(frame + 12) == kEthTypeVlan ? kEthLen + kVlanLen : kEthLen;
}

} // namespace

namespace {

uint16_t rc_headers(uint8_t op)
{
	switch (op) {
	case SEND_FIRST: case SEND_MIDDLE: case SEND_LAST: case SEND_ONLY:
		return H_VALID | H_PAYLOAD;
	case SEND_LAST_IMM: case SEND_ONLY_IMM:
		return H_VALID | H_PAYLOAD | H_IMM;
	case SEND_LAST_INV: case SEND_ONLY_INV:
		return H_VALID | H_PAYLOAD | H_IETH;
	case WRITE_FIRST: case WRITE_ONLY:
		return H_VALID | H_PAYLOAD | H_RETH;
	case WRITE_MIDDLE: case WRITE_LAST:
		return H_VALID | H_PAYLOAD;
	case WRITE_LAST_IMM:
		return H_VALID | H_PAYLOAD | H_IMM;
	case WRITE_ONLY_IMM:
		return H_VALID | H_PAYLOAD | H_RETH | H_IMM;
	case READ_REQUEST:
		return H_VALID | H_RETH;
	case READ_RESP_FIRST: case READ_RESP_LAST: case READ_RESP_ONLY:
		return H_VALID | H_PAYLOAD | H_AETH;
	case READ_RESP_MIDDLE:
		return H_VALID | H_PAYLOAD;
	case ACK:
		return H_VALID | H_AETH;
	case ATOMIC_ACK:
		return H_VALID | H_AETH | H_ATOMIC_ACK;
	case CMP_SWAP: case FETCH_ADD:
		return H_VALID | H_ATOMIC;
	case FLUSH:
		return H_VALID | H_FETH | H_RETH;
	case ATOMIC_WRITE:
		return H_VALID | H_RETH | H_PAYLOAD;
	default:
		return 0;
	}
}

} // namespace

uint16_t opcode_headers(uint8_t full)
{
	const uint8_t op = full & ~kTransportMask;

	switch (full & kTransportMask) {
	case RC:
		return rc_headers(op);
	case UC:
		return op <= WRITE_ONLY_IMM ? rc_headers(op) : 0;
	case UD:
		return op == SEND_ONLY || op == SEND_ONLY_IMM ?
		       uint16_t(rc_headers(op) | H_DETH) : 0;
	case XRC:
		// The RC operations up to SEND with invalidate; requests
		// (not responses) name the target's XRC SRQ.
		if (op > SEND_ONLY_INV)
			return 0;
		return op >= READ_RESP_FIRST && op <= ATOMIC_ACK ?
		       rc_headers(op) : uint16_t(rc_headers(op) | H_XRCETH);
	case CNP_GROUP:
		return op == kCnpOp ? uint16_t(H_VALID | H_CNP) : 0;
	case VENDOR:
		return op == kSackOp ? uint16_t(H_VALID | H_AETH | H_SACK) : 0;
	default:
		return 0;
	}
}

bool is_ipv4_mapped(const std::array<uint8_t, 16> &gid)
{
	static constexpr uint8_t prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
					       0xff, 0xff};
	return std::memcmp(gid.data(), prefix, sizeof(prefix)) == 0;
}

bool is_multicast(const std::array<uint8_t, 16> &gid)
{
	return is_ipv4_mapped(gid) ? (gid[12] & 0xf0) == 0xe0 : gid[0] == 0xff;
}

uint32_t icrc(std::span<const uint8_t> frame, bool ipv6)
{
	// The CRC of the 8 leading 0xff bytes (RoCEv2's stand-in for the
	// LRH) is a constant: computed once, not per frame.
	static const uint32_t ones_crc = [] {
		static const uint8_t ones[8] = {0xff, 0xff, 0xff, 0xff,
						0xff, 0xff, 0xff, 0xff};
		return crc32_gzip_refl(0, ones, sizeof(ones));
	}();
	const size_t l3 = l3_len(ipv6);
	const size_t l2 = frame_l2_len(frame.data());
	const size_t masked_len = l3 + kUdpLen + kBthLen;
	std::array<uint8_t, kIp6Len + kUdpLen + kBthLen> m{};

	// Caller guarantees frame holds Ethernet (and tag) + masked_len + ICRC.
	std::memcpy(m.data(), frame.data() + l2, masked_len);
	if (ipv6) {
		m[0] |= 0x0f;		// traffic class (high nibble) ...
		m[1] = m[2] = m[3] = 0xff;	// ... and flow label
		m[7] = 0xff;		// hop limit
	} else {
		m[1] = 0xff;		// TOS
		m[8] = 0xff;		// TTL
		m[10] = m[11] = 0xff;	// header checksum
	}
	m[l3 + 6] = m[l3 + 7] = 0xff;	// UDP checksum
	m[l3 + kUdpLen + 4] = 0xff;	// BTH: FECN, BECN, reserved

	// ISA-L's crc32_gzip_refl is zlib's crc32() (same polynomial,
	// reflection, seed and chaining), with PCLMULQDQ: ~10x faster than
	// zlib's table-driven loop, which was a third of the device model's
	// time at line rate.  The unit tests check it against zlib.
	uint32_t crc = crc32_gzip_refl(ones_crc, m.data(), masked_len);
	const size_t rest = l2 + masked_len;
	return crc32_gzip_refl(crc, frame.data() + rest,
			       frame.size() - rest - kIcrcLen);
}

size_t header_len(const Path &p, uint8_t transport, uint8_t opcode)
{
	return p.l2_len() + l3_len(p.ipv6) + kUdpLen + kBthLen +
	       ext_len(opcode_headers(transport | opcode));
}

size_t build_headers(uint8_t *b, const Path &p, const Headers &h)
{
	const uint16_t f = opcode_headers(h.transport | h.opcode);
	uint8_t *q;

	std::memcpy(b, p.dmac.data(), 6);
	std::memcpy(b + 6, p.smac.data(), 6);
	q = b + 12;
	if (p.tagged()) {
		// 802.1Q: PCP from the traffic class's top 3 bits, DEI 0.
		put16(q, kEthTypeVlan);
		const unsigned int pcp = p.tx_pcp < 8 ? p.tx_pcp :
					 p.traffic_class >> 5;
		put16(q + 2, uint16_t(pcp << 13 | (p.vlan & 0xfff)));
		q += kVlanLen;
	}
	put16(q, p.ipv6 ? kEthTypeIpv6 : kEthTypeIpv4);
	q = b + p.l2_len();
	if (p.ipv6) {
		put32(q, 6u << 28 | uint32_t(p.traffic_class) << 20 |
			 (p.flow_label & 0xfffff));
		q[6] = kIpProtoUdp;
		q[7] = p.hop_limit;
		std::memcpy(q + 8, p.sgid.data(), 16);
		std::memcpy(q + 24, p.dgid.data(), 16);
		q += kIp6Len;
	} else {
		std::memset(q, 0, kIp4Len);
		q[0] = 0x45;
		q[1] = p.traffic_class;
		put16(q + 6, 0x4000);	// DF; the ID stays 0
		q[8] = p.hop_limit;
		q[9] = kIpProtoUdp;
		std::memcpy(q + 12, p.sgid.data() + 12, 4);
		std::memcpy(q + 16, p.dgid.data() + 12, 4);
		q += kIp4Len;
	}
	put16(q, p.udp_sport);
	put16(q + 2, kRocePort);
	q[6] = q[7] = 0;		// no UDP checksum, as rxe
	q += kUdpLen;

	q[0] = uint8_t(h.transport | h.opcode);
	q[1] = uint8_t((h.solicited ? 0x80 : 0) | (h.pad & 3) << 4);
	put16(q + 2, 0xffff);		// default P_Key
	q[4] = h.becn ? 0x40 : 0;	// F (FECN) 0, B (BECN)
	put24(q + 5, h.dqpn);
	q[8] = h.ackreq ? 0x80 : 0;
	put24(q + 9, h.psn & kPsnMask);
	q += kBthLen;

	// Extended headers in IBA order: XRCETH, DETH, FETH, RETH/AtomicETH,
	// AETH, ...
	if (f & H_XRCETH) {
		put32(q, h.xrc_srqn & kPsnMask);	// byte 0 reserved
		q += kXrcethLen;
	}
	if (f & H_DETH) {
		put32(q, h.qkey);
		put32(q + 4, h.src_qp & kPsnMask);	// byte 4 reserved
		q += kDethLen;
	}
	if (f & H_FETH) {
		put32(q, h.feth & 0x3f);
		q += kFethLen;
	}
	if (f & H_RETH) {
		put64(q, h.va);
		put32(q + 8, h.rkey);
		put32(q + 12, h.dma_len);
		q += kRethLen;
	}
	if (f & H_AETH) {
		q[0] = h.syndrome;
		put24(q + 1, h.msn);
		q += kAethLen;
	}
	if (f & H_ATOMIC) {
		put64(q, h.va);
		put32(q + 8, h.rkey);
		put64(q + 12, h.swap_add);
		put64(q + 20, h.compare);
		q += kAtomicLen;
	}
	if (f & H_ATOMIC_ACK) {
		put64(q, h.orig);
		q += kAtomicAckLen;
	}
	if (f & H_IMM) {
		std::memcpy(q, &h.imm, 4);
		q += kImmLen;
	}
	if (f & H_IETH) {
		put32(q, h.ieth);
		q += kIethLen;
	}
	if (f & H_CNP) {
		std::memset(q, 0, kCnpRsvdLen);
		q += kCnpRsvdLen;
	}
	if (f & H_SACK) {
		put32(q, h.sack_base & kPsnMask);
		for (size_t i = 0; i < h.sack.size(); i++)
			put64(q + 4 + 8 * i, h.sack[i]);
		q += kSackLen;
	}
	return size_t(q - b);
}

size_t finish(uint8_t *b, const Path &p, size_t hdr_len, size_t payload_len)
{
	const size_t l3 = l3_len(p.ipv6);
	const size_t pad = (4 - payload_len % 4) % 4;
	const size_t l4_len = hdr_len - p.l2_len() - l3 + payload_len + pad +
			      kIcrcLen;
	uint8_t *ip = b + p.l2_len();
	uint8_t *bth = ip + l3 + kUdpLen;

	std::memset(b + hdr_len + payload_len, 0, pad);
	bth[1] = uint8_t((bth[1] & ~0x30) | pad << 4);
	if (p.ipv6) {
		put16(ip + 4, uint16_t(l4_len));
	} else {
		put16(ip + 2, uint16_t(l3 + l4_len));
		put16(ip + 10, 0);
		put16(ip + 10, ip4_checksum(ip));
	}
	put16(ip + l3 + 4, uint16_t(l4_len));
	const size_t len = hdr_len + payload_len + pad + kIcrcLen;
	const uint32_t crc = icrc({b, len}, p.ipv6);
	b[len - 4] = uint8_t(crc);
	b[len - 3] = uint8_t(crc >> 8);
	b[len - 2] = uint8_t(crc >> 16);
	b[len - 1] = uint8_t(crc >> 24);
	return len;
}

ParseResult parse(std::span<const uint8_t> f, Packet &out, bool check_icrc)
{
	const uint8_t *b = f.data();
	size_t off = kEthLen;

	if (f.size() < kEthLen)
		return ParseResult::NotRoce;
	uint16_t type = get16(b + 12);
	Packet p{};
	if (type == kEthTypeVlan) {
		if (f.size() < kEthLen + kVlanLen)
			return ParseResult::NotRoce;
		const uint16_t tci = get16(b + 14);
		type = get16(b + 16);
		off += kVlanLen;
		// VID 0 is a priority tag: the frame is on no VLAN.
		if ((tci & 0xfff) != 0)
			p.path.vlan = tci & 0xfff;
		p.path.pcp = uint8_t(tci >> 13);
	}
	std::memcpy(p.path.dmac.data(), b, 6);
	std::memcpy(p.path.smac.data(), b + 6, 6);
	size_t l4, end;
	if (type == kEthTypeIpv4) {
		if (f.size() < off + kIp4Len || b[off] != 0x45)
			return ParseResult::NotRoce;
		if (b[off + 9] != kIpProtoUdp || (get16(b + off + 6) & 0x3fff))
			return ParseResult::NotRoce;
		end = off + get16(b + off + 2);
		p.path.ipv6 = false;
		p.path.traffic_class = b[off + 1];
		p.path.hop_limit = b[off + 8];
		p.path.sgid[10] = p.path.sgid[11] = 0xff;
		p.path.dgid[10] = p.path.dgid[11] = 0xff;
		std::memcpy(p.path.sgid.data() + 12, b + off + 12, 4);
		std::memcpy(p.path.dgid.data() + 12, b + off + 16, 4);
		l4 = off + kIp4Len;
	} else if (type == kEthTypeIpv6) {
		if (f.size() < off + kIp6Len || (b[off] >> 4) != 6 ||
		    b[off + 6] != kIpProtoUdp)
			return ParseResult::NotRoce;
		end = off + kIp6Len + get16(b + off + 4);
		p.path.ipv6 = true;
		p.path.traffic_class = uint8_t(get16(b + off) >> 4);
		p.path.flow_label = get32(b + off) & 0xfffff;
		p.path.hop_limit = b[off + 7];
		std::memcpy(p.path.sgid.data(), b + off + 8, 16);
		std::memcpy(p.path.dgid.data(), b + off + 24, 16);
		l4 = off + kIp6Len;
	} else {
		return ParseResult::NotRoce;
	}
	if (end > f.size() || end < l4 + kUdpLen)
		return ParseResult::Malformed;
	if (get16(b + l4 + 2) != kRocePort)
		return ParseResult::NotRoce;
	if (get16(b + l4 + 4) != end - l4)
		return ParseResult::Malformed;
	p.path.udp_sport = get16(b + l4);

	const size_t bth = l4 + kUdpLen;
	if (end < bth + kBthLen + kIcrcLen)
		return ParseResult::Malformed;
	Headers &h = p.h;
	const uint16_t flags = opcode_headers(b[bth]);
	h.transport = b[bth] & kTransportMask;
	h.opcode = b[bth] & ~kTransportMask;
	if (!(flags & H_VALID) || (b[bth + 1] & 0x0f) != 0)
		return ParseResult::Malformed;	// unknown opcode, BTH version != 0
	h.solicited = b[bth + 1] & 0x80;
	h.pad = (b[bth + 1] >> 4) & 3;
	h.dqpn = get24(b + bth + 5);
	h.becn = b[bth + 4] & 0x40;
	h.ackreq = b[bth + 8] & 0x80;
	h.psn = get24(b + bth + 9);

	size_t q = bth + kBthLen;
	const size_t hdrs_end = q + ext_len(flags);
	if (hdrs_end + h.pad + kIcrcLen > end)
		return ParseResult::Malformed;
	if (flags & H_XRCETH) {
		h.xrc_srqn = get24(b + q + 1);
		q += kXrcethLen;
	}
	if (flags & H_DETH) {
		h.qkey = get32(b + q);
		h.src_qp = get24(b + q + 5);
		q += kDethLen;
	}
	if (flags & H_FETH) {
		h.feth = get32(b + q) & 0x3f;	// the rest is reserved
		q += kFethLen;
	}
	if (flags & H_RETH) {
		h.va = get64(b + q);
		h.rkey = get32(b + q + 8);
		h.dma_len = get32(b + q + 12);
		q += kRethLen;
	}
	if (flags & H_AETH) {
		h.syndrome = b[q];
		h.msn = get24(b + q + 1);
		q += kAethLen;
	}
	if (flags & H_ATOMIC) {
		h.va = get64(b + q);
		h.rkey = get32(b + q + 8);
		h.swap_add = get64(b + q + 12);
		h.compare = get64(b + q + 20);
		q += kAtomicLen;
	}
	if (flags & H_ATOMIC_ACK) {
		h.orig = get64(b + q);
		q += kAtomicAckLen;
	}
	if (flags & H_IMM) {
		std::memcpy(&h.imm, b + q, 4);
		q += kImmLen;
	}
	if (flags & H_IETH) {
		h.ieth = get32(b + q);
		q += kIethLen;
	}
	if (flags & H_CNP)
		q += kCnpRsvdLen;	// reserved: ignored on receipt
	if (flags & H_SACK) {
		// Bit 0 is the PSN after the first one missing, and the top
		// byte is reserved: anything else is no SACK of this format.
		h.sack_base = get32(b + q);
		for (size_t i = 0; i < h.sack.size(); i++)
			h.sack[i] = get64(b + q + 4 + 8 * i);
		q += kSackLen;
	}
	const size_t payload_len = end - q - h.pad - kIcrcLen;
	if (!(flags & H_PAYLOAD) && payload_len != 0)
		return ParseResult::Malformed;

	if (check_icrc) {
		const uint32_t want = icrc(f.first(end), p.path.ipv6);
		const uint8_t *ic = b + end - kIcrcLen;
		const uint32_t got = ic[0] | ic[1] << 8 | ic[2] << 16 |
				     uint32_t(ic[3]) << 24;
		if (want != got)
			return ParseResult::BadIcrc;
	}
	// Checked after the ICRC, so that damage counts as damage.
	if ((flags & H_SACK) && h.sack_base != ((h.psn + 2) & kPsnMask))
		return ParseResult::Malformed;
	p.payload = f.subspan(q, payload_len);
	p.l3 = f.subspan(off, l3_len(p.path.ipv6));
	out = p;
	return ParseResult::Ok;
}

} // namespace vrnic::roce

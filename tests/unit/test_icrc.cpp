// SPDX-License-Identifier: GPL-2.0-or-later
// The codec's ICRC (ISA-L) against an independent one written with zlib
// from the RoCEv2 rules: 8 bytes of 0xff, then the IP, UDP and BTH headers
// with the variant fields masked to 1s, then the rest up to the ICRC.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "device.hpp"
#include "roce.hpp"

using namespace vrnic::roce;

namespace {

uint32_t zlib_icrc(const std::vector<uint8_t> &f, bool ipv6)
{
	const size_t l3 = ipv6 ? kIp6Len : kIp4Len;
	std::vector<uint8_t> m(8, 0xff);
	m.insert(m.end(), f.begin() + kEthLen, f.end() - kIcrcLen);
	uint8_t *ip = m.data() + 8;
	if (ipv6) {
		ip[0] |= 0x0f;
		ip[1] = ip[2] = ip[3] = 0xff;
		ip[7] = 0xff;
	} else {
		ip[1] = 0xff;
		ip[8] = 0xff;
		ip[10] = ip[11] = 0xff;
	}
	ip[l3 + 6] = ip[l3 + 7] = 0xff;
	ip[l3 + kUdpLen + 4] = 0xff;
	return uint32_t(crc32(0L, m.data(), uInt(m.size())));
}

} // namespace

TEST(Icrc, MatchesZlibOverRandomFrames)
{
	std::mt19937 rng(42);
	for (bool ipv6 : {false, true}) {
		for (size_t payload : {0u, 1u, 4u, 63u, 256u, 1024u, 4096u}) {
			Path p;
			p.ipv6 = ipv6;
			p.sgid[15] = 1;
			p.dgid[15] = 2;
			if (!ipv6)
				p.sgid[10] = p.sgid[11] = p.dgid[10] =
					p.dgid[11] = 0xff;
			Headers h;
			h.opcode = payload ? WRITE_MIDDLE : SEND_ONLY;
			h.dqpn = rng() & 0xffffff;
			h.psn = rng() & kPsnMask;
			std::vector<uint8_t> f(payload + 256);
			const size_t hl = build_headers(f.data(), p, h);
			for (size_t i = 0; i < payload; i++)
				f[hl + i] = uint8_t(rng());
			f.resize(finish(f.data(), p, hl, payload));
			const uint32_t want = zlib_icrc(f, ipv6);
			EXPECT_EQ(icrc(f, ipv6), want)
				<< (ipv6 ? "IPv6" : "IPv4") << " payload " << payload;
			uint32_t wire;
			std::memcpy(&wire, f.data() + f.size() - kIcrcLen, 4);
			EXPECT_EQ(wire, want);	// little-endian on the wire
			Packet pkt;
			EXPECT_EQ(parse(f, pkt), ParseResult::Ok);
		}
	}
}

// No opcode's frame is larger than roce::kMaxFrame (what the device keeps
// room for in its outbox per packet of a round), and the path MTUs the
// device takes stay within kMaxPathMtu.
TEST(Roce, EveryOpcodeFitsTheLargestFrame)
{
	using namespace vrnic::roce;
	Path p;
	p.ipv6 = true;
	p.vlan = 4094;		// and an 802.1Q tag
	size_t largest = 0;
	for (uint8_t t : {RC, UC, UD, XRC}) {
		for (unsigned op = 0; op < 32; op++) {
			const uint16_t f = opcode_headers(uint8_t(t | op));
			if (!f)
				continue;
			const size_t n = header_len(p, t, uint8_t(op)) +
					 ((f & H_PAYLOAD) ? kMaxPathMtu : 0) + kIcrcLen;
			EXPECT_LE(n, kMaxFrame) << std::hex << unsigned(t | op);
			largest = std::max(largest, n);
		}
	}
	EXPECT_GT(largest + 64, kMaxFrame) << "kMaxFrame is far from any real frame";
	EXPECT_EQ(128u << 5, kMaxPathMtu);	// path_mtu 5, the largest MODIFY_QP takes
	EXPECT_GE(vrnic::Device::kRdmaRoom,
		  2 * size_t(vrnic::Rdma::kPktBudget) * kMaxFrame);
}

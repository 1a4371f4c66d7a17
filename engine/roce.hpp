// SPDX-License-Identifier: GPL-2.0-or-later
// RoCEv2 packet codec: Ethernet / IPv4 or IPv6 / UDP 4791 / BTH and the
// extended transport headers, with the ICRC computed and checked the way
// Linux rxe does (CRC-32 over a masked pseudo-header; ISA-L computes it).
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace vrnic::roce {

// Transport bases (the opcode's top three bits).
enum Transport : uint8_t {
	RC = 0x00, UC = 0x20, UD = 0x60, CNP_GROUP = 0x80, XRC = 0xa0,
	VENDOR = 0xc0,		// IBA's manufacturer-specific opcodes
};
// The congestion notification packet (IBA annex A17): opcode 0x81, BECN
// set, PSN 0, 16 reserved bytes, no payload.
constexpr uint8_t kCnpOp = 0x01;
constexpr uint8_t kCnpOpcode = CNP_GROUP | kCnpOp;
constexpr uint8_t kTransportMask = 0xe0;
// vrnic's selective acknowledgement (spec: "Selective repeat"), sent only
// to a peer that negotiated it: opcode 0xc0, the BTH PSN the last one
// received in order (as an ACK's), an AETH, then the SACK extended header:
// the PSN of bit 0 (the BTH PSN + 2; the top byte 0) and a bitmap of
// kSackBits packets from it, 1 = held by the receiver.
constexpr uint8_t kSackOp = 0x00;
constexpr uint8_t kSackOpcode = VENDOR | kSackOp;
constexpr unsigned int kSackBits = 512;

// Operations, as the RC opcodes (transport base 0x00); UC uses the SEND
// and WRITE ones, UD only SEND_ONLY and SEND_ONLY_IMM.
enum Opcode : uint8_t {
	SEND_FIRST = 0x00, SEND_MIDDLE = 0x01, SEND_LAST = 0x02,
	SEND_LAST_IMM = 0x03, SEND_ONLY = 0x04, SEND_ONLY_IMM = 0x05,
	WRITE_FIRST = 0x06, WRITE_MIDDLE = 0x07, WRITE_LAST = 0x08,
	WRITE_LAST_IMM = 0x09, WRITE_ONLY = 0x0a, WRITE_ONLY_IMM = 0x0b,
	READ_REQUEST = 0x0c, READ_RESP_FIRST = 0x0d, READ_RESP_MIDDLE = 0x0e,
	READ_RESP_LAST = 0x0f, READ_RESP_ONLY = 0x10, ACK = 0x11,
	ATOMIC_ACK = 0x12, CMP_SWAP = 0x13, FETCH_ADD = 0x14,
	SEND_LAST_INV = 0x16, SEND_ONLY_INV = 0x17,
	FLUSH = 0x1c, ATOMIC_WRITE = 0x1d,	// IBA annex A19, as rxe
};

// Which extended headers follow the BTH for an opcode.
enum HdrFlags : uint16_t {
	H_RETH = 1 << 0, H_AETH = 1 << 1, H_ATOMIC = 1 << 2,
	H_ATOMIC_ACK = 1 << 3, H_IMM = 1 << 4, H_IETH = 1 << 5,
	H_PAYLOAD = 1 << 6, H_DETH = 1 << 7, H_FETH = 1 << 8,
	H_XRCETH = 1 << 9, H_CNP = 1 << 10, H_SACK = 1 << 11,
	H_VALID = 1 << 15,
};
// For a full opcode byte (transport | operation); 0 if invalid.
uint16_t opcode_headers(uint8_t opcode);

constexpr size_t kEthLen = 14, kIp4Len = 20, kIp6Len = 40, kUdpLen = 8;
constexpr size_t kBthLen = 12, kRethLen = 16, kAethLen = 4, kAtomicLen = 28;
constexpr size_t kAtomicAckLen = 8, kImmLen = 4, kIethLen = 4, kIcrcLen = 4;
constexpr size_t kDethLen = 8, kFethLen = 4, kXrcethLen = 4;
constexpr size_t kCnpRsvdLen = 16;
constexpr size_t kSackLen = 4 + kSackBits / 8;
// An 802.1Q tag (TPID 0x8100, then PCP/DEI/VID), after the source MAC.
constexpr size_t kVlanLen = 4;
constexpr uint16_t kNoVlan = 0xffff;	// VRNIC_VLAN_NONE: untagged
// The largest RoCEv2 frame the device builds: an 802.1Q tag, IPv6, the most extended
// headers an opcode has (XRCETH and AtomicETH; those with a payload have
// fewer), a payload of the largest path MTU, the ICRC.  test_icrc checks
// every opcode against it.
constexpr size_t kMaxPathMtu = 4096;
constexpr size_t kMaxFrame = kEthLen + kVlanLen + kIp6Len + kUdpLen + kBthLen +
			     kXrcethLen + kAtomicLen + kMaxPathMtu + kIcrcLen;
constexpr uint32_t kPsnMask = 0xffffff;

// AETH syndromes.
constexpr uint8_t kAethAck = 0x00;		// | credits (0x1f: invalid)
constexpr uint8_t kAethRnr = 0x20;		// | RNR timer code
constexpr uint8_t kAethNakSeq = 0x60;
constexpr uint8_t kAethNakInvReq = 0x61;
constexpr uint8_t kAethNakRemAccess = 0x62;
constexpr uint8_t kAethNakRemOp = 0x63;

// Network addressing of one packet (both ends).
struct Path {
	bool ipv6 = false;
	std::array<uint8_t, 6> smac{}, dmac{};
	std::array<uint8_t, 16> sgid{}, dgid{};	// IPv4 as ::ffff:a.b.c.d
	uint8_t traffic_class = 0;
	uint8_t hop_limit = 64;
	uint32_t flow_label = 0;
	uint16_t udp_sport = 0xc000;
	// 802.1Q: VID 0..4095 or kNoVlan (untagged).  Sent tagged with the
	// PCP of the traffic class's top 3 bits; on receive, a priority tag
	// (VID 0) reads as untagged.
	uint16_t vlan = kNoVlan;
	uint8_t pcp = 0;		// received frames only
	// Sent tagged with this PCP instead of traffic class >> 5 (CNPs:
	// np_cnp_prio); kNoPcp: the traffic class's.
	static constexpr uint8_t kNoPcp = 0xff;
	uint8_t tx_pcp = kNoPcp;
	[[nodiscard]] bool tagged() const { return vlan != kNoVlan; }
	[[nodiscard]] size_t l2_len() const
	{
		return tagged() ? kEthLen + kVlanLen : kEthLen;
	}
};

struct Headers {
	uint8_t transport = RC;	// Transport
	uint8_t opcode = 0;	// operation, without the transport bits
	bool solicited = false;
	bool ackreq = false;
	bool becn = false;	// BTH B bit (CNPs)
	uint8_t pad = 0;
	uint32_t dqpn = 0;
	uint32_t psn = 0;
	// RETH
	uint64_t va = 0;
	uint32_t rkey = 0;
	uint32_t dma_len = 0;
	// AETH
	uint8_t syndrome = 0;
	uint32_t msn = 0;
	// AtomicETH (va, rkey above) and AtomicAckETH
	uint64_t swap_add = 0;
	uint64_t compare = 0;
	uint64_t orig = 0;
	// ImmDt / IETH (kept in wire byte order as a 32-bit value)
	uint32_t imm = 0;
	uint32_t ieth = 0;
	// FETH (FLUSH): placement type in bits 0-3, level in bits 4-5
	uint32_t feth = 0;
	// XRCETH (XRC requests): the XRC SRQ at the target
	uint32_t xrc_srqn = 0;
	// DETH
	uint32_t qkey = 0;
	uint32_t src_qp = 0;
	// SACK extended header: bit i of sack[i / 64] is PSN sack_base + i
	uint32_t sack_base = 0;
	std::array<uint64_t, kSackBits / 64> sack{};
};

struct Packet {
	Path path;		// as seen on the wire (s* = sender)
	Headers h;
	std::span<const uint8_t> payload;	// without pad and ICRC
	std::span<const uint8_t> l3;		// the IPv4 or IPv6 header
};

enum class ParseResult { Ok, NotRoce, Malformed, BadIcrc };

// Validate and decode one frame; checks lengths, the UDP port, the BTH
// version and opcode, and (unless told it was checked already: a frame
// held since it passed) the ICRC.
ParseResult parse(std::span<const uint8_t> frame, Packet &out,
		  bool check_icrc = true);

// Size of the headers (Ethernet to the last extended header).
size_t header_len(const Path &p, uint8_t transport, uint8_t opcode);

// Write the headers for h into buf (which must hold header_len() +
// payload + pad + ICRC); the caller places payload_len bytes of payload
// right after them.  finish() then fills lengths, the IPv4 checksum, the
// pad and the ICRC, and returns the frame length.
size_t build_headers(uint8_t *buf, const Path &p, const Headers &h);
size_t finish(uint8_t *buf, const Path &p, size_t hdr_len,
	      size_t payload_len);

// The ICRC of a frame (everything from the IP header to the byte before
// the ICRC, masked as the spec says); the IP header follows the Ethernet
// header, or its 802.1Q tag if the frame has one.
uint32_t icrc(std::span<const uint8_t> frame, bool ipv6);

// 24-bit PSN arithmetic: a - b as a signed distance.
constexpr int32_t psn_diff(uint32_t a, uint32_t b)
{
	return int32_t((a - b) << 8) >> 8;
}
constexpr uint32_t psn_add(uint32_t a, uint32_t n)
{
	return (a + n) & kPsnMask;
}

// A traffic class as sent: ECN CE (both bits) becomes ECT(0), since
// only a switch marks congestion.
constexpr uint8_t no_ce(uint8_t traffic_class)
{
	return (traffic_class & 3) == 3 ? uint8_t(traffic_class & ~1u) : traffic_class;
}

bool is_ipv4_mapped(const std::array<uint8_t, 16> &gid);
// ff00::/8, or IPv4-mapped 224.0.0.0/4.
bool is_multicast(const std::array<uint8_t, 16> &gid);

} // namespace vrnic::roce

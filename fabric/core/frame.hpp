// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-fabric: parsing and rewriting of the Ethernet frames a switch sees.
// Every function here takes hostile bytes: it reads only inside the span it
// is given and reports what it could not parse instead of guessing.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace vrnic::fabric {

using Mac = std::array<uint8_t, 6>;
using Bytes = std::vector<uint8_t>;

inline constexpr size_t kEthHeader = 14;
inline constexpr size_t kVlanTag = 4;
inline constexpr uint16_t kEtherVlan = 0x8100;
inline constexpr uint16_t kEtherIpv4 = 0x0800;
inline constexpr uint16_t kEtherIpv6 = 0x86dd;
inline constexpr uint16_t kEtherMacControl = 0x8808;
inline constexpr uint16_t kOpcodePause = 0x0001;
inline constexpr uint16_t kOpcodePfc = 0x0101;
inline constexpr uint16_t kRoceUdpPort = 4791;
inline constexpr Mac kPfcDestination = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x01};
inline constexpr int kPriorities = 8;

enum class Ecn : uint8_t { NotEct = 0, Ect1 = 1, Ect0 = 2, Ce = 3 };

// What the switch needs from a frame, read once at ingress.
struct FrameInfo {
	Mac dst{};
	Mac src{};
	uint16_t ethertype = 0;	// after an optional 802.1Q tag
	bool vlan = false;
	uint8_t pcp = 0;	// 802.1Q priority code point
	size_t l3 = 0;		// offset of the IP header, 0 if none
	bool ipv4 = false;
	bool ipv6 = false;
	uint8_t dscp = 0;
	Ecn ecn = Ecn::NotEct;
	uint8_t proto = 0;
	std::array<uint8_t, 16> sip{};	// IPv4 in the first four bytes
	std::array<uint8_t, 16> dip{};
	size_t l4 = 0;		// offset of the UDP/TCP header, 0 if none
	uint16_t sport = 0;
	uint16_t dport = 0;
	size_t payload = 0;	// first byte after the L4 header (0: none)
	bool bth = false;	// RoCEv2: UDP 4791 with a whole BTH
	uint8_t bth_opcode = 0;
	uint32_t dest_qpn = 0;
	uint32_t psn = 0;
	bool mac_control = false;	// EtherType 0x8808
};

enum class ParseError : uint8_t {
	None,
	Truncated,	// shorter than its headers say
	Malformed,	// a header field no sender may put there
};

struct Parsed {
	ParseError error = ParseError::None;
	FrameInfo info;
};

// Parse the headers of one frame.  A frame with an L3/L4 header that is cut
// short or inconsistent is an error; a frame of an unknown EtherType is not.
Parsed parse_frame(std::span<const uint8_t> frame);

bool is_multicast(const Mac &m);

// Set CE on an ECT packet (IPv4: the header checksum is updated
// incrementally, RFC 1624; IPv6 has none).  False if the packet is not ECT
// or is already CE.  The ICRC masks the ECN bits, so RoCE stays valid.
bool mark_ce(std::span<uint8_t> frame, const FrameInfo &info);

// RFC 1071 checksum of an IPv4 header (for tests and validation).
uint16_t ipv4_checksum(std::span<const uint8_t> header);

// 802.1Qbb PFC frame: class-enable vector and eight pause times in quanta
// of 512 bit times; quanta 0 resumes.
struct Pfc {
	uint8_t enable = 0;
	std::array<uint16_t, kPriorities> quanta{};
};

Bytes build_pfc(const Mac &src, const Pfc &pfc);
// A MAC control frame's PFC content, or nothing if it is not a PFC frame.
// Link-level PAUSE (opcode 0x0001) comes back as all eight classes.
std::optional<Pfc> parse_pfc(std::span<const uint8_t> frame,
			     const FrameInfo &info);

// The flow hash for ECMP over the IP/UDP 5-tuple (MACs and EtherType for
// non-IP frames), salted per switch so that tiers do not polarise.
uint32_t flow_hash(const FrameInfo &info, uint32_t salt);

// Flip one bit, chosen by `bit` modulo the bits of the L4 payload when there
// is one (so that the ICRC, not the IP checksum, catches it), else of the
// bytes after the Ethernet header.  Returns the byte offset flipped.
size_t flip_bit(std::span<uint8_t> frame, const FrameInfo &info, uint64_t bit);

} // namespace vrnic::fabric

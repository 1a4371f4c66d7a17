// SPDX-License-Identifier: GPL-2.0-or-later
// The port's GID table (spec 0.6): the source addresses the device lets
// its QPs use.  Only the kernel programs it (SET_GID); address vectors
// name an entry by index, and the device takes the source GID, MAC and
// VLAN from it, so no consumer can choose its own source address.
#pragma once

#include <array>
#include <cstdint>

#include "roce.hpp"
#include "vrnic_hw.h"

namespace vrnic {

struct GidEntry {
	bool valid = false;
	std::array<uint8_t, 16> gid{};	// IPv4 as ::ffff:a.b.c.d
	std::array<uint8_t, 6> smac{};
	uint16_t vlan_id = VRNIC_VLAN_NONE;
	[[nodiscard]] bool ipv4() const { return roce::is_ipv4_mapped(gid); }
	bool operator==(const GidEntry &) const = default;
};

class GidTable {
public:
	// Validate and apply one SET_GID; on OK, `changed` says whether the
	// entry at c.index was valid before and is now different or gone
	// (connected QPs using it must then stop).
	uint8_t set(const vrnic_admin_set_gid &c, bool &changed);
	// The valid entry at index, or nullptr (empty or out of range).
	[[nodiscard]] const GidEntry *find(uint32_t index) const;
	// A path's source fields from entry index for destination dgid:
	// false if the entry is empty, out of range or of the other family.
	bool source(uint32_t index, roce::Path &p) const;
	// Whether a frame for dgid may arrive on VLAN vlan (VRNIC_VLAN_NONE:
	// untagged): a valid entry holds dgid with that VLAN; an untagged
	// frame may also be for an address in no entry; a multicast dgid
	// needs an entry of that VLAN (or no tag).
	[[nodiscard]] bool on_vlan(const std::array<uint8_t, 16> &dgid,
				   uint16_t vlan) const;
	void reset() { entries_ = {}; }

private:
	std::array<GidEntry, VRNIC_GID_TABLE_LEN> entries_{};
};

} // namespace vrnic

// SPDX-License-Identifier: GPL-2.0-or-later
// The port's GID table: SET_GID and the lookups of the send paths.
#include "gid.hpp"

#include <algorithm>
#include <cstring>

#include "platform.hpp"

namespace vrnic {

uint8_t GidTable::set(const vrnic_admin_set_gid &c, bool &changed)
{
	changed = false;
	if (c.index >= entries_.size() ||
	    std::any_of(std::begin(c.rsvd), std::end(c.rsvd),
			[](uint8_t b) { return b != 0; }))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	GidEntry e;
	if (c.op == VRNIC_GID_OP_CLEAR) {
		const bool zero =
			std::all_of(std::begin(c.gid), std::end(c.gid),
				    [](uint8_t b) { return b == 0; }) &&
			std::all_of(std::begin(c.smac), std::end(c.smac),
				    [](uint8_t b) { return b == 0; });
		if (!zero || le(c.vlan_id) != 0 || c.type != 0)
			return VRNIC_ADMIN_ST_BAD_PARAM;
	} else if (c.op == VRNIC_GID_OP_SET) {
		e.valid = true;
		std::memcpy(e.gid.data(), c.gid, e.gid.size());
		std::memcpy(e.smac.data(), c.smac, e.smac.size());
		e.vlan_id = le(c.vlan_id);
		const bool mac_zero = std::all_of(e.smac.begin(), e.smac.end(),
						  [](uint8_t b) { return b == 0; });
		// The type must say what the GID is; a multicast or
		// unspecified address is no source.
		const uint8_t type = e.ipv4() ? VRNIC_GID_TYPE_ROCE_V2_IPV4 :
						VRNIC_GID_TYPE_ROCE_V2_IPV6;
		const bool unspecified =
			std::all_of(e.gid.begin() + (e.ipv4() ? 12 : 0),
				    e.gid.end(), [](uint8_t b) { return b == 0; });
		if (c.type != type || roce::is_multicast(e.gid) || unspecified ||
		    mac_zero || (e.smac[0] & 1) ||
		    (e.vlan_id != VRNIC_VLAN_NONE &&
		     (e.vlan_id < VRNIC_VLAN_MIN || e.vlan_id > VRNIC_VLAN_MAX)))
			return VRNIC_ADMIN_ST_BAD_PARAM;
	} else {
		return VRNIC_ADMIN_ST_BAD_PARAM;
	}
	GidEntry &cur = entries_[c.index];
	changed = cur.valid && !(cur == e);
	cur = e;
	return VRNIC_ADMIN_ST_OK;
}

const GidEntry *GidTable::find(uint32_t index) const
{
	if (index >= entries_.size() || !entries_[index].valid)
		return nullptr;
	return &entries_[index];
}

bool GidTable::source(uint32_t index, roce::Path &p) const
{
	const GidEntry *e = find(index);

	if (!e || e->ipv4() != roce::is_ipv4_mapped(p.dgid))
		return false;
	p.ipv6 = !e->ipv4();
	p.sgid = e->gid;
	p.smac = e->smac;
	p.vlan = e->vlan_id;
	return true;
}

bool GidTable::on_vlan(const std::array<uint8_t, 16> &dgid,
		       uint16_t vlan) const
{
	bool known = false;

	if (roce::is_multicast(dgid)) {
		// A group GID is in no entry: the port must be on the VLAN.
		return vlan == VRNIC_VLAN_NONE ||
		       std::any_of(entries_.begin(), entries_.end(),
				   [vlan](const GidEntry &e) {
					   return e.valid && e.vlan_id == vlan;
				   });
	}
	for (const GidEntry &e : entries_) {
		if (!e.valid || e.gid != dgid)
			continue;
		if (e.vlan_id == vlan)
			return true;
		known = true;
	}
	// An untagged frame for an address the table does not hold is left
	// to the QP's own checks, as before VLANs.
	return vlan == VRNIC_VLAN_NONE && !known;
}

} // namespace vrnic

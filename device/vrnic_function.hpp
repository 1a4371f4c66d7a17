// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic's PCI function as the vfio-user server presents it, from the
// shared hardware header (the spec's IDs and BARs), and an MSI-X BAR of
// one page, laid out as QEMU's msix_init_exclusive_bar() lays out
// VRNIC_NUM_MSIX vectors.
#pragma once

#include "vfio_user.hpp"
#include "vrnic_hw.h"

namespace vfu {

inline Function vrnic_function(uint16_t device_id, uint32_t class_code)
{
	static_assert(VRNIC_NUM_MSIX * 16 <= 4096 / 2, "MSI-X table overlaps the PBA");
	Function fn;
	fn.vendor = VRNIC_PCI_VENDOR_ID;
	fn.device = device_id;
	fn.subsys_vendor = VRNIC_PCI_VENDOR_ID;
	fn.subsys = device_id;
	fn.revision = VRNIC_PCI_REVISION;
	fn.class_code = class_code;
	fn.bar_size[VRNIC_REG_BAR] = VRNIC_REG_BAR_SIZE;
	fn.bar_size[VRNIC_DB_BAR] = uint64_t(VRNIC_DB_PAGE_SIZE) * VRNIC_NUM_DB_PAGES;
	fn.bar_size[VRNIC_MSIX_BAR] = 4096;
	fn.msix_bar = VRNIC_MSIX_BAR;
	fn.msix_vectors = VRNIC_NUM_MSIX;
	return fn;
}

} // namespace vfu

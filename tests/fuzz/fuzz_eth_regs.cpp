// SPDX-License-Identifier: GPL-2.0-or-later
// libFuzzer target: BAR0 register accesses, Ethernet descriptors and frames.
#include "fuzz_world.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz::run_input(data, size, fz::OP_REG | fz::OP_ETH_TX | fz::OP_ETH_RX | fz::OP_ETH_FRAME | fz::OP_LINK | fz::OP_DOORBELL | fz::OP_POLL | fz::OP_MEMWRITE, fz::Mode::Single, true);
	return 0;
}

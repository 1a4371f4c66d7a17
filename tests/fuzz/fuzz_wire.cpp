// SPDX-License-Identifier: GPL-2.0-or-later
// libFuzzer target: RoCEv2 frames from the wire, fixed up toward live QPs, keys and PSNs.
#include "fuzz_world.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz::run_input(data, size, fz::OP_FRAME | fz::OP_RAW_FRAME | fz::OP_POLL | fz::OP_TIME | fz::OP_CQ, fz::Mode::Single, false);
	return 0;
}

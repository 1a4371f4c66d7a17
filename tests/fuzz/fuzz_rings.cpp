// SPDX-License-Identifier: GPL-2.0-or-later
// libFuzzer target: SQ/RQ/SRQ ring contents, doorbell records and doorbells.
#include "fuzz_world.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz::run_input(data, size, fz::OP_SEND_WQE | fz::OP_RECV_WQE | fz::OP_DBREC | fz::OP_DOORBELL | fz::OP_CQ | fz::OP_MEMWRITE | fz::OP_POLL | fz::OP_TIME, fz::Mode::Single, false);
	return 0;
}

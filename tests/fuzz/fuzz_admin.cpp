// SPDX-License-Identifier: GPL-2.0-or-later
// libFuzzer target: the admin command stream, with the memory it names.
#include "fuzz_world.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz::run_input(data, size, fz::OP_ADMIN | fz::OP_MEMWRITE | fz::OP_PAGELIST | fz::OP_POLL, fz::Mode::Single, false);
	return 0;
}

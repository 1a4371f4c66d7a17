// SPDX-License-Identifier: GPL-2.0-or-later
// libFuzzer target: everything interleaved, on two engines joined by a wire, with time jumping.
#include "fuzz_world.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fz::run_input(data, size, (1u << 20) - 1, fz::Mode::Pair, true);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-or-later
// C++ access to the engine behind the C handle, for tests and benchmarks.
#pragma once

#include "device.hpp"
#include "vrnic_engine.h"

struct vrnic_engine {
	vrnic::Device dev;
};

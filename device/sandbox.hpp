// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-device's sandbox: once its sockets are set up, the process can
// make only the system calls the device loop needs (a seccomp allow-list;
// anything else kills the process), cannot gain privileges, and maps no
// executable memory.
#pragma once

#include <string>

namespace vfu {

// Enter the sandbox; false (why set) if the kernel refused it.  connects:
// the process still opens UNIX sockets (the wire's reconnects).
bool sandbox_enter(bool connects, std::string &why);

} // namespace vfu

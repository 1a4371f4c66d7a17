// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-device's sandbox: once its sockets are set up, the process can
// make only the system calls the device loop needs (a seccomp allow-list;
// anything else kills the process), cannot gain privileges, and maps no
// executable memory.
#pragma once

#include <string>

namespace vfu {

// Enter the sandbox; false (why set) if the kernel refused it.
// connect_family: 0, or the address family (AF_UNIX, AF_INET, AF_INET6)
// of the sockets the process still opens and connects (the wire's
// reconnects); for TCP it may also set TCP_NODELAY and the two buffer
// sizes on them.
bool sandbox_enter(int connect_family, std::string &why);

} // namespace vfu

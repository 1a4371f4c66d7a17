// SPDX-License-Identifier: GPL-2.0-or-later
// The seccomp allow-list of vrnic-device: see sandbox.hpp.
#include "sandbox.hpp"

#include <fcntl.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace vfu {

bool sandbox_enter(int connect_family, std::string &why)
{
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) {
		why = std::string("no_new_privs: ") + std::strerror(errno);
		return false;
	}
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_KILL_PROCESS);
	if (!ctx) {
		why = "seccomp_init failed";
		return false;
	}
	// The loop (epoll, timerfd, the sockets), DMA_MAP (fstat, fcntl
	// for the seals, mmap, munmap), memory for the engine, and exit.
	// accept4: the wire's listening socket (--wire-listen) and the
	// control channel's (--control), both made before the filter, take
	// their clients later.  recvmsg also takes capture-start's fd
	// (SCM_RIGHTS), which writev then writes the capture to: the device
	// never opens a file itself.
	static const int plain[] = {
		SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev),
		SCMP_SYS(close), SCMP_SYS(recvmsg), SCMP_SYS(sendmsg),
		SCMP_SYS(recvfrom), SCMP_SYS(sendto), SCMP_SYS(epoll_wait),
		SCMP_SYS(epoll_pwait), SCMP_SYS(epoll_ctl), SCMP_SYS(timerfd_settime),
		SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(brk), SCMP_SYS(madvise),
		SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(futex),
		SCMP_SYS(clock_gettime), SCMP_SYS(clock_nanosleep), SCMP_SYS(nanosleep),
		SCMP_SYS(exit), SCMP_SYS(exit_group), SCMP_SYS(rt_sigreturn),
		SCMP_SYS(rt_sigprocmask), SCMP_SYS(accept4),
		SCMP_SYS(getsockopt), SCMP_SYS(restart_syscall), SCMP_SYS(gettid),
		SCMP_SYS(getpid), SCMP_SYS(lseek), SCMP_SYS(getrandom),
		SCMP_SYS(sched_yield),
	};
	int rc = 0;
	for (const int nr : plain)
		rc = rc ? rc : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
	// No executable memory; sockets only of the wire's family, and only
	// for a device that connects its wire (reconnects).
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mmap), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (!rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(mprotect), 1,
				      SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	// fcntl: DMA_MAP's seals, and the MSI-X eventfds made non-blocking.
	for (const int cmd : {F_GET_SEALS, F_GETFL, F_SETFL})
		if (!rc)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(fcntl), 1,
					      SCMP_A1(SCMP_CMP_EQ, scmp_datum_t(cmd)));
	const bool connects = connect_family != 0;
	// socket(): the wire's family, a stream (SOCK_NONBLOCK and
	// SOCK_CLOEXEC aside) and the default protocol: no raw, datagram
	// or ICMP socket for a device taken over.
	if (connects && !rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
				      SCMP_A0(SCMP_CMP_EQ, scmp_datum_t(connect_family)),
				      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM),
				      SCMP_A2(SCMP_CMP_EQ, 0));
	if (connects && !rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(connect), 0);
	if (connects && connect_family != AF_UNIX && !rc)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setsockopt), 2,
				      SCMP_A1(SCMP_CMP_EQ, IPPROTO_TCP),
				      SCMP_A2(SCMP_CMP_EQ, TCP_NODELAY));
	for (const int opt : {SO_SNDBUF, SO_RCVBUF})
		if (connects && connect_family != AF_UNIX && !rc)
			rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(setsockopt), 2,
					      SCMP_A1(SCMP_CMP_EQ, SOL_SOCKET),
					      SCMP_A2(SCMP_CMP_EQ, scmp_datum_t(opt)));
	if (!rc)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc) {
		why = std::string("seccomp: ") + std::strerror(-rc);
		return false;
	}
	return true;
}

} // namespace vfu

// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-vfio-stub: the measuring stick of issue 27's gate.  A vfio-user
// server (vfio_user.hpp) for one PCI function with vrnic's BAR layout and
// the few BAR0 registers a transport measurement needs, and nothing of
// the engine:
//   BAR0 VRNIC_REG_VERSION, NUM_MSIX (read), SCRATCH (read/write),
//        TEST_IRQ (write: signal that MSI-X vector's eventfd at once;
//        read: the count of doorbells received, which a read flushes
//        the posted writes before, so a lost one shows);
//   BAR2 VRNIC_DB_USER_PING on any page (write: counted);
//   BAR4 the MSI-X table and PBA (QEMU emulates both).
// Its PCI ID is 1af4:10ff, in the range QEMU leaves for lab devices, so
// that vrnic.ko never binds it; tests/kmod/vrnic_mmio_gate.ko does.
//
//   vrnic-vfio-stub <socket path>
// It serves until the client goes away, then exits 0.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "vfio_user.hpp"
#include "vrnic_function.hpp"
#include "vrnic_hw.h"

namespace {

constexpr uint16_t kStubDeviceId = 0x10ff;

class Stub final : public vfu::Backend {
public:
	uint64_t bar_read(unsigned int bar, uint64_t off, unsigned int /*size*/) override
	{
		if (bar != VRNIC_REG_BAR)
			return 0;
		switch (off) {
		case VRNIC_REG_VERSION: return VRNIC_SPEC_VERSION;
		case VRNIC_REG_NUM_MSIX: return VRNIC_NUM_MSIX;
		case VRNIC_REG_NUM_DB_PAGES: return VRNIC_NUM_DB_PAGES;
		case VRNIC_REG_SCRATCH: return scratch_;
		case VRNIC_REG_TEST_IRQ: return uint32_t(pings_);
		default: return 0;
		}
	}
	void bar_write(unsigned int bar, uint64_t off, uint64_t v, unsigned int /*size*/) override
	{
		if (bar == VRNIC_DB_BAR && off % VRNIC_DB_PAGE_SIZE == VRNIC_DB_USER_PING)
			pings_++;
		else if (bar == VRNIC_REG_BAR && off == VRNIC_REG_SCRATCH)
			scratch_ = uint32_t(v);
		else if (bar == VRNIC_REG_BAR && off == VRNIC_REG_TEST_IRQ && srv_)
			srv_->signal(unsigned(v));
	}
	void reset() override { scratch_ = 0; }
	vfu::Server *srv_ = nullptr;
	uint32_t scratch_ = 0;
	uint64_t pings_ = 0;
};

} // namespace

int main(int argc, char **argv)
{
	if (argc != 2) {
		(void)std::fprintf(stderr, "usage: %s <socket path>\n", argv[0]);
		return 2;
	}
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	if (std::strlen(argv[1]) >= sizeof(sa.sun_path)) {
		(void)std::fprintf(stderr, "vrnic-vfio-stub: socket path too long\n");
		return 2;
	}
	std::memcpy(sa.sun_path, argv[1], std::strlen(argv[1]) + 1);
	unlink(argv[1]);
	const int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) ||
	    listen(lfd, 1)) {
		std::perror("vrnic-vfio-stub: listen");
		return 1;
	}
	const int cfd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (cfd < 0) {
		std::perror("vrnic-vfio-stub: accept");
		return 1;
	}
	close(lfd);
	unlink(argv[1]);
	const vfu::Function fn = vfu::vrnic_function(kStubDeviceId, 0xff0000);
	Stub stub;
	vfu::Server srv(cfd, fn, stub);
	stub.srv_ = &srv;
	for (;;) {
		pollfd p{cfd, short(POLLIN | (srv.want_write() ? POLLOUT : 0)), 0};
		if (poll(&p, 1, -1) < 0)
			continue;
		if (!srv.serve() || !srv.flush())
			break;
	}
	(void)std::fprintf(stderr, "vrnic-vfio-stub: %s after %llu pings\n",
			   srv.why().c_str(), static_cast<unsigned long long>(stub.pings_));
	close(cfd);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-or-later
// libFuzzer target: vrnic-device's vfio-user server (device/vfio_user.cpp)
// against a hostile client.  The input is a sequence of chunks
//   [flags u8][len u16 little-endian][len bytes]
// each sent with one sendmsg on the client's end of a socket pair, so the
// fuzzer picks how messages are cut and which carry an fd (flags bit 0: a
// 64 KiB sealed memfd, bit 1: an eventfd, bit 2: a plain 8 KiB file);
// after every chunk the server serves and flushes, and the replies are
// read and dropped.  Then the DMA space is exercised at the addresses the
// input's first bytes name, and everything is torn down: the sanitizers
// and the fd count catch what leaks.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "vfio_user.hpp"

namespace {

struct NullBackend : vfu::Backend {
	uint64_t bar_read(unsigned int bar, uint64_t off, unsigned int size) override
	{
		return bar ^ off ^ size;
	}
	void bar_write(unsigned int, uint64_t, uint64_t, unsigned int) override {}
	void reset() override {}
};

int make_fd(uint8_t flags)
{
	if (flags & 1) {
		const int f = memfd_create("fuzz", MFD_ALLOW_SEALING);
		if (f >= 0 && ftruncate(f, 64 * 1024) == 0 &&
		    fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0)
			return f;
		if (f >= 0)
			close(f);
		return -1;
	}
	if (flags & 2)
		return eventfd(0, EFD_NONBLOCK);
	char path[] = "/tmp/vrnic-fuzz-XXXXXX";
	const int f = mkstemp(path);
	if (f >= 0) {
		unlink(path);
		if (ftruncate(f, 8192) != 0) {
			close(f);
			return -1;
		}
	}
	return f;
}

bool send_chunk(int fd, const uint8_t *p, size_t n, uint8_t flags)
{
	iovec iov{const_cast<uint8_t *>(p), n};
	msghdr mh{};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
	int extra = -1;
	if (flags & 7) {
		extra = make_fd(flags);
		if (extra >= 0) {
			mh.msg_control = cbuf;
			mh.msg_controllen = sizeof(cbuf);
			cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			std::memcpy(CMSG_DATA(c), &extra, sizeof(int));
		}
	}
	const ssize_t r = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (extra >= 0)
		close(extra);	// the server has its own copy now
	return r == ssize_t(n);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv))
		return 0;
	vfu::Function fn;
	fn.vendor = 0x1af4;
	fn.device = 0x10f0;
	fn.bar_size[0] = 0x4000;
	fn.bar_size[2] = 0x100000;
	fn.bar_size[4] = 0x1000;
	fn.msix_bar = 4;
	fn.msix_vectors = 9;
	NullBackend be;
	{
		vfu::Server srv(sv[1], fn, be);
		size_t pos = 0;
		bool alive = true;
		std::vector<uint8_t> sink(1 << 16);
		while (alive && size - pos >= 3) {
			const uint8_t flags = data[pos];
			size_t n = data[pos + 1] | size_t(data[pos + 2]) << 8;
			pos += 3;
			n = std::min(n, size - pos);
			if (n == 0)
				break;
			if (!send_chunk(sv[0], data + pos, n, flags))
				break;
			pos += n;
			alive = srv.serve() && srv.flush();
			while (recv(sv[0], sink.data(), sink.size(), MSG_DONTWAIT) > 0) {
			}
		}
		uint64_t addr = 0;
		std::memcpy(&addr, data, std::min(size, sizeof(addr)));
		uint8_t buf[64] = {};
		(void)srv.dma().read(addr, buf, sizeof(buf));
		(void)srv.dma().write(addr, buf, sizeof(buf));
		(void)srv.dma().read(0, buf, sizeof(buf));
		for (unsigned int v = 0; v < 10; v++)
			(void)srv.signal(v);
	}
	close(sv[0]);
	close(sv[1]);
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-vfio-stub: the measuring stick of issue 27's gate.  A vfio-user
// server (QEMU docs/interop/vfio-user.rst) for one PCI function with
// vrnic's BAR layout and the few BAR0 registers a transport measurement
// needs, and nothing of the engine:
//   BAR0 VRNIC_REG_VERSION, NUM_MSIX (read), SCRATCH (read/write),
//        TEST_IRQ (write: signal that MSI-X vector's eventfd at once);
//   BAR2 VRNIC_DB_USER_PING on any page (write: counted), and the count of
//        pings received readable at VRNIC_REG_SCRATCH + 4 (BAR0 0x044
//        reads back the ping count; a read flushes the posted writes
//        before it, so the count says whether any were lost);
//   BAR4 the MSI-X table and PBA (QEMU emulates both).
// Its PCI ID is 1af4:10ff, in the range QEMU leaves for lab devices, so
// that vrnic.ko never binds it; tests/kmod/vrnic_mmio_gate.ko does.
//
// One client, one thread, every message checked against its size before
// use.  Guest RAM is not mapped: the stub does no DMA, so DMA_MAP only
// takes (and closes) the fd.
//
//   vrnic-vfio-stub <socket path>
// It serves until the client goes away, then exits 0.
#include <linux/vfio.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "vrnic_hw.h"

namespace {

constexpr uint16_t kStubDeviceId = 0x10ff;
constexpr uint32_t kMaxMsg = 1u << 20;	// what the stub accepts, body included
constexpr unsigned int kMaxFds = 16;
constexpr uint32_t kConfigSize = 256;
constexpr uint32_t kMsixBarSize = 0x1000;
constexpr uint32_t kMsixPbaOffset = 0x800;
constexpr uint8_t kMsixCap = 0x40;
constexpr uint64_t kDbBarSize = uint64_t(VRNIC_DB_PAGE_SIZE) * VRNIC_NUM_DB_PAGES;

enum Command : uint16_t {
	kVersion = 1,
	kDmaMap = 2,
	kDmaUnmap = 3,
	kDeviceGetInfo = 4,
	kRegionInfo = 5,
	kIrqInfo = 7,
	kSetIrqs = 8,
	kRegionRead = 9,
	kRegionWrite = 10,
	kDeviceReset = 13,
};

constexpr uint32_t kFlagReply = 0x1;
constexpr uint32_t kFlagTypeMask = 0xf;
constexpr uint32_t kFlagNoReply = 0x10;
constexpr uint32_t kFlagError = 0x20;

struct Hdr {
	uint16_t id;
	uint16_t command;
	uint32_t size;
	uint32_t flags;
	uint32_t error_reply;
};
static_assert(sizeof(Hdr) == 16);

struct RegionRw {
	uint64_t offset;
	uint32_t region;
	uint32_t count;
};
static_assert(sizeof(RegionRw) == 16);

template <typename T> T load(const std::vector<uint8_t> &b, size_t off = 0)
{
	T v;
	std::memcpy(&v, b.data() + off, sizeof(v));
	return v;
}

class Stub {
public:
	explicit Stub(int fd) : fd_(fd) { build_config(); }
	~Stub()
	{
		for (int &e : irq_fd_)
			close_fd(e);
	}
	Stub(const Stub &) = delete;
	Stub &operator=(const Stub &) = delete;
	// false: the client went away or broke the protocol.
	bool serve_one();
	[[nodiscard]] uint64_t pings() const { return pings_; }

private:
	static void close_fd(int &f)
	{
		if (f >= 0)
			close(f);
		f = -1;
	}
	void build_config();
	bool recv_msg(Hdr &h, std::vector<uint8_t> &body, std::vector<int> &fds);
	bool reply(const Hdr &req, const void *body, size_t len);
	bool error(const Hdr &req, int err);
	bool handle(const Hdr &h, const std::vector<uint8_t> &b,
		    std::vector<int> &fds);
	bool region_read(const Hdr &h, const std::vector<uint8_t> &b);
	bool region_write(const Hdr &h, const std::vector<uint8_t> &b);
	bool set_irqs(const Hdr &h, const std::vector<uint8_t> &b,
		      std::vector<int> &fds);
	uint32_t bar0_read(uint64_t off) const;
	void bar0_write(uint64_t off, uint32_t v);
	void signal(uint32_t vector);

	int fd_;
	std::array<uint8_t, kConfigSize> cfg_{};
	std::array<int, VRNIC_NUM_MSIX> irq_fd_{-1, -1, -1, -1, -1, -1, -1, -1, -1};
	uint32_t scratch_ = 0;
	uint64_t pings_ = 0;
	uint64_t dropped_irqs_ = 0;
};

void Stub::build_config()
{
	auto w16 = [this](unsigned int off, uint16_t v) { std::memcpy(&cfg_[off], &v, 2); };
	auto w32 = [this](unsigned int off, uint32_t v) { std::memcpy(&cfg_[off], &v, 4); };
	w16(0x00, VRNIC_PCI_VENDOR_ID);
	w16(0x02, kStubDeviceId);
	w16(0x06, 0x0010);			// status: capability list
	cfg_[0x08] = 1;				// revision
	cfg_[0x0a] = 0x00;			// class 0xff00: unassigned
	cfg_[0x0b] = 0xff;
	w32(0x10, 0x4);				// BAR0: 64-bit memory
	w32(0x18, 0x4);				// BAR2
	w32(0x20, 0x4);				// BAR4
	w16(0x2c, VRNIC_PCI_VENDOR_ID);
	w16(0x2e, kStubDeviceId);
	cfg_[0x34] = kMsixCap;
	cfg_[kMsixCap] = 0x11;			// MSI-X, last capability
	w16(kMsixCap + 2, VRNIC_NUM_MSIX - 1);
	w32(kMsixCap + 4, VRNIC_MSIX_BAR);	// table at offset 0 of BAR4
	w32(kMsixCap + 8, kMsixPbaOffset | VRNIC_MSIX_BAR);
}

bool Stub::recv_msg(Hdr &h, std::vector<uint8_t> &body, std::vector<int> &fds)
{
	alignas(cmsghdr) char cbuf[CMSG_SPACE(kMaxFds * sizeof(int))];
	iovec iov{&h, sizeof(h)};
	msghdr m{};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = cbuf;
	m.msg_controllen = sizeof(cbuf);
	ssize_t n;
	do {
		n = recvmsg(fd_, &m, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	fds.clear();
	for (cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int f;
			std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
			fds.push_back(f);
		}
	}
	if (n != ssize_t(sizeof(h)) || (m.msg_flags & MSG_CTRUNC) ||
	    h.size < sizeof(h) || h.size > kMaxMsg) {
		for (int f : fds)
			close(f);
		fds.clear();
		return false;
	}
	body.resize(h.size - sizeof(h));
	size_t got = 0;
	while (got < body.size()) {
		n = recv(fd_, body.data() + got, body.size() - got, MSG_WAITALL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		got += size_t(n);
	}
	return true;
}

bool Stub::reply(const Hdr &req, const void *body, size_t len)
{
	if (req.flags & kFlagNoReply)
		return true;
	std::vector<uint8_t> out(sizeof(Hdr) + len);
	Hdr h{req.id, req.command, uint32_t(out.size()), kFlagReply, 0};
	std::memcpy(out.data(), &h, sizeof(h));
	if (len)
		std::memcpy(out.data() + sizeof(h), body, len);
	size_t sent = 0;
	while (sent < out.size()) {
		const ssize_t n = send(fd_, out.data() + sent, out.size() - sent,
				       MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		sent += size_t(n);
	}
	return true;
}

bool Stub::error(const Hdr &req, int err)
{
	if (req.flags & kFlagNoReply)
		return true;
	const Hdr h{req.id, req.command, sizeof(Hdr), kFlagReply | kFlagError,
		    uint32_t(err)};
	return send(fd_, &h, sizeof(h), MSG_NOSIGNAL) == ssize_t(sizeof(h));
}

void Stub::signal(uint32_t vector)
{
	const uint64_t one = 1;
	if (vector >= irq_fd_.size() || irq_fd_[vector] < 0 ||
	    write(irq_fd_[vector], &one, sizeof(one)) != ssize_t(sizeof(one)))
		dropped_irqs_++;
}

uint32_t Stub::bar0_read(uint64_t off) const
{
	switch (off) {
	case VRNIC_REG_VERSION: return VRNIC_SPEC_VERSION;
	case VRNIC_REG_NUM_MSIX: return VRNIC_NUM_MSIX;
	case VRNIC_REG_NUM_DB_PAGES: return VRNIC_NUM_DB_PAGES;
	case VRNIC_REG_SCRATCH: return scratch_;
	case VRNIC_REG_TEST_IRQ: return uint32_t(pings_);
	default: return 0;
	}
}

void Stub::bar0_write(uint64_t off, uint32_t v)
{
	if (off == VRNIC_REG_SCRATCH)
		scratch_ = v;
	else if (off == VRNIC_REG_TEST_IRQ)
		signal(v);
}

bool Stub::region_read(const Hdr &h, const std::vector<uint8_t> &b)
{
	if (b.size() != sizeof(RegionRw))
		return error(h, EINVAL);
	const auto rw = load<RegionRw>(b);
	std::vector<uint8_t> out(sizeof(RegionRw) + rw.count);
	uint8_t *data = out.data() + sizeof(RegionRw);
	if (rw.region == VFIO_PCI_CONFIG_REGION_INDEX) {
		if (rw.offset > kConfigSize || rw.count > kConfigSize - rw.offset)
			return error(h, EINVAL);
		std::memcpy(data, &cfg_[rw.offset], rw.count);
	} else if (rw.region == VRNIC_REG_BAR) {
		if (rw.count != 4 || rw.offset % 4 || rw.offset >= VRNIC_REG_BAR_SIZE)
			return error(h, EINVAL);
		const uint32_t v = bar0_read(rw.offset);
		std::memcpy(data, &v, 4);
	} else if (rw.region == VRNIC_DB_BAR || rw.region == VRNIC_MSIX_BAR) {
		const uint64_t size = rw.region == VRNIC_DB_BAR ? kDbBarSize :
								  kMsixBarSize;
		if (rw.count > 8 || rw.offset > size || rw.count > size - rw.offset)
			return error(h, EINVAL);
		// Doorbells read as 0; QEMU forwards PBA reads: nothing pending.
	} else {
		return error(h, EINVAL);
	}
	std::memcpy(out.data(), &rw, sizeof(rw));
	return reply(h, out.data(), out.size());
}

bool Stub::region_write(const Hdr &h, const std::vector<uint8_t> &b)
{
	if (b.size() < sizeof(RegionRw))
		return error(h, EINVAL);
	const auto rw = load<RegionRw>(b);
	if (rw.count != b.size() - sizeof(RegionRw))
		return error(h, EINVAL);
	const uint8_t *data = b.data() + sizeof(RegionRw);
	if (rw.region == VFIO_PCI_CONFIG_REGION_INDEX) {
		if (rw.offset > kConfigSize || rw.count > kConfigSize - rw.offset)
			return error(h, EINVAL);
		// Only the command register is the stub's to keep; QEMU
		// emulates the BARs and the MSI-X control bits itself.
		for (uint32_t i = 0; i < rw.count; i++)
			if (rw.offset + i == 0x04 || rw.offset + i == 0x05)
				cfg_[rw.offset + i] = data[i];
	} else if (rw.region == VRNIC_REG_BAR) {
		if (rw.count != 4 || rw.offset % 4 || rw.offset >= VRNIC_REG_BAR_SIZE)
			return error(h, EINVAL);
		uint32_t v;
		std::memcpy(&v, data, 4);
		bar0_write(rw.offset, v);
	} else if (rw.region == VRNIC_DB_BAR) {
		if (rw.count != 4 || rw.offset >= kDbBarSize)
			return error(h, EINVAL);
		if (rw.offset % VRNIC_DB_PAGE_SIZE == VRNIC_DB_USER_PING)
			pings_++;
	} else if (rw.region != VRNIC_MSIX_BAR) {
		return error(h, EINVAL);
	}
	return reply(h, &rw, sizeof(rw));
}

bool Stub::set_irqs(const Hdr &h, const std::vector<uint8_t> &b, std::vector<int> &fds)
{
	vfio_irq_set s;
	if (b.size() != sizeof(s))
		return error(h, EINVAL);
	std::memcpy(&s, b.data(), sizeof(s));
	if (s.index != VFIO_PCI_MSIX_IRQ_INDEX)
		return error(h, EINVAL);
	if (s.start > irq_fd_.size() || s.count > irq_fd_.size() - s.start)
		return error(h, EINVAL);
	const uint32_t data = s.flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
	const uint32_t action = s.flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
	if (action != VFIO_IRQ_SET_ACTION_TRIGGER)
		return error(h, EINVAL);
	if (data == VFIO_IRQ_SET_DATA_EVENTFD) {
		// All fds or none (QEMU sends none to unassign the vectors).
		if (!fds.empty() && fds.size() != s.count)
			return error(h, EINVAL);
		for (uint32_t i = 0; i < s.count; i++) {
			close_fd(irq_fd_[s.start + i]);
			if (!fds.empty())
				irq_fd_[s.start + i] = fds[i];
		}
		fds.clear();
	} else if (data == VFIO_IRQ_SET_DATA_NONE) {
		if (s.count == 0)
			for (int &f : irq_fd_)
				close_fd(f);
		else
			for (uint32_t i = 0; i < s.count; i++)
				signal(s.start + i);
	} else {
		return error(h, EINVAL);
	}
	return reply(h, nullptr, 0);
}

bool Stub::handle(const Hdr &h, const std::vector<uint8_t> &b, std::vector<int> &fds)
{
	switch (h.command) {
	case kVersion: {
		if (b.size() < 4)
			return error(h, EINVAL);
		static const char caps[] =
			"{\"capabilities\":{\"max_msg_fds\":16,"
			"\"max_data_xfer_size\":1048576}}";
		std::vector<uint8_t> out(4 + sizeof(caps));
		std::memset(out.data(), 0, 4);	// version 0.0
		std::memcpy(out.data() + 4, caps, sizeof(caps));
		return reply(h, out.data(), out.size());
	}
	case kDmaMap:
		// Taken, not used: the stub does no DMA.
		return reply(h, nullptr, 0);
	case kDmaUnmap:
		return reply(h, b.data(), b.size());
	case kDeviceGetInfo: {
		vfio_device_info d{};
		d.argsz = sizeof(d);
		d.flags = VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET;
		d.num_regions = VFIO_PCI_NUM_REGIONS;
		d.num_irqs = VFIO_PCI_NUM_IRQS;
		return reply(h, &d, 16);
	}
	case kRegionInfo: {
		vfio_region_info r{};
		if (b.size() < sizeof(r))
			return error(h, EINVAL);
		std::memcpy(&r, b.data(), sizeof(r));
		const uint32_t index = r.index;
		r = {};
		r.argsz = sizeof(r);
		r.index = index;
		switch (index) {
		case VRNIC_REG_BAR: r.size = VRNIC_REG_BAR_SIZE; break;
		case VRNIC_DB_BAR: r.size = kDbBarSize; break;
		case VRNIC_MSIX_BAR: r.size = kMsixBarSize; break;
		case VFIO_PCI_CONFIG_REGION_INDEX: r.size = kConfigSize; break;
		default:
			if (index >= VFIO_PCI_NUM_REGIONS)
				return error(h, EINVAL);
			break;
		}
		if (r.size)
			r.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
		return reply(h, &r, sizeof(r));
	}
	case kIrqInfo: {
		vfio_irq_info i{};
		if (b.size() < sizeof(i))
			return error(h, EINVAL);
		std::memcpy(&i, b.data(), sizeof(i));
		if (i.index >= VFIO_PCI_NUM_IRQS)
			return error(h, EINVAL);
		i.argsz = sizeof(i);
		i.flags = i.index == VFIO_PCI_MSIX_IRQ_INDEX ?
			  VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE : 0;
		i.count = i.index == VFIO_PCI_MSIX_IRQ_INDEX ? VRNIC_NUM_MSIX : 0;
		return reply(h, &i, sizeof(i));
	}
	case kSetIrqs:
		return set_irqs(h, b, fds);
	case kRegionRead:
		return region_read(h, b);
	case kRegionWrite:
		return region_write(h, b);
	case kDeviceReset:
		scratch_ = 0;
		return reply(h, nullptr, 0);
	default:
		return error(h, ENOSYS);
	}
}

bool Stub::serve_one()
{
	Hdr h{};
	std::vector<uint8_t> body;
	std::vector<int> fds;
	if (!recv_msg(h, body, fds))
		return false;
	bool ok = true;
	if ((h.flags & kFlagTypeMask) != 0)	// a reply: the stub sends no requests
		ok = false;
	else
		ok = handle(h, body, fds);
	for (int f : fds)	// every fd not kept (DMA_MAP's, a refused SET_IRQS)
		close(f);
	return ok;
}

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
	const int cfd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
	if (cfd < 0) {
		std::perror("vrnic-vfio-stub: accept");
		return 1;
	}
	close(lfd);
	unlink(argv[1]);
	Stub stub(cfd);
	while (stub.serve_one()) {
	}
	(void)std::fprintf(stderr, "vrnic-vfio-stub: client gone after %llu pings\n",
		     static_cast<unsigned long long>(stub.pings()));
	close(cfd);
	return 0;
}

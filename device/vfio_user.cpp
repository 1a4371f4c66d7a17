// SPDX-License-Identifier: GPL-2.0-or-later
// vfio-user, server side: see vfio_user.hpp.
#include "vfio_user.hpp"

#include <linux/vfio.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace vfu {

namespace {

constexpr uint8_t kMsixCap = 0x40;
constexpr uint16_t kCmdBusMaster = 0x4;

template <typename T> T load(std::span<const uint8_t> b, size_t off = 0)
{
	T v;
	std::memcpy(&v, b.data() + off, sizeof(v));
	return v;
}

void close_all(std::vector<int> &fds)
{
	for (const int f : fds)
		close(f);
	fds.clear();
}

} // namespace

// ------------------------------------------------------------- DmaSpace --

DmaSpace::~DmaSpace() { clear(); }

void DmaSpace::clear()
{
	for (const Map &m : maps_)
		munmap(m.host, m.size);
	maps_.clear();
}

bool DmaSpace::map(int fd, uint64_t offset, uint64_t iova, uint64_t size, bool writable)
{
	const uint64_t page = 4096;
	if (size == 0 || iova % page || offset % page || size % page ||
	    iova + size < iova || offset + size < offset || maps_.size() >= kMaxDmaMaps)
		return false;
	for (const Map &m : maps_)
		if (iova < m.iova + m.size && m.iova < iova + size)
			return false;
	// Past the file's end a mapping faults on access (SIGBUS): only what
	// the file holds may be mapped, and only from a memfd sealed so that
	// it can never shrink (QEMU's memory-backend-memfd, seal=on, its
	// default).  The client's memory is not changed here.
	const int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK))
		return false;
	struct stat st {};
	if (fstat(fd, &st) || st.st_size < 0 || offset + size > uint64_t(st.st_size))
		return false;
	void *p = mmap(nullptr, size, PROT_READ | (writable ? PROT_WRITE : 0),
		       MAP_SHARED, fd, static_cast<off_t>(offset));
	if (p == MAP_FAILED)
		return false;
	const Map m{iova, size, static_cast<uint8_t *>(p), writable};
	maps_.insert(std::upper_bound(maps_.begin(), maps_.end(), m,
				      [](const Map &a, const Map &b) { return a.iova < b.iova; }),
		     m);
	return true;
}

bool DmaSpace::unmap(uint64_t iova, uint64_t size)
{
	if (iova + size < iova)
		return false;
	for (const Map &m : maps_)
		if (m.iova < iova + size && iova < m.iova + m.size &&
		    (m.iova < iova || m.iova + m.size > iova + size))
			return false;
	std::erase_if(maps_, [&](const Map &m) {
		if (m.iova >= iova && m.iova + m.size <= iova + size) {
			munmap(m.host, m.size);
			return true;
		}
		return false;
	});
	return true;
}

const DmaSpace::Map *DmaSpace::find(uint64_t iova) const
{
	auto it = std::upper_bound(maps_.begin(), maps_.end(), iova,
				   [](uint64_t a, const Map &m) { return a < m.iova; });
	if (it == maps_.begin())
		return nullptr;
	--it;
	return iova - it->iova < it->size ? &*it : nullptr;
}

// The guest's memory is shared with another process: order the copies as
// QEMU's dma_barrier() orders a device's DMA (an entry's body before its
// owner or phase dword, a doorbell record read after the doorbell).
bool DmaSpace::read(uint64_t iova, void *buf, size_t len) const
{
	std::atomic_thread_fence(std::memory_order_acquire);
	auto *dst = static_cast<uint8_t *>(buf);
	while (len) {
		const Map *m = find(iova);
		if (!m)
			return false;
		const size_t n = std::min<uint64_t>(len, m->iova + m->size - iova);
		std::memcpy(dst, m->host + (iova - m->iova), n);
		dst += n;
		iova += n;
		len -= n;
	}
	return true;
}

bool DmaSpace::write(uint64_t iova, const void *buf, size_t len)
{
	// Check the whole range first: a refused write changes nothing.
	for (uint64_t a = iova, left = len; left;) {
		const Map *m = find(a);
		if (!m || !m->writable)
			return false;
		const uint64_t n = std::min<uint64_t>(left, m->iova + m->size - a);
		a += n;
		left -= n;
	}
	std::atomic_thread_fence(std::memory_order_release);
	const auto *src = static_cast<const uint8_t *>(buf);
	while (len) {
		const Map *m = find(iova);
		const size_t n = std::min<uint64_t>(len, m->iova + m->size - iova);
		std::memcpy(m->host + (iova - m->iova), src, n);
		src += n;
		iova += n;
		len -= n;
	}
	return true;
}

// --------------------------------------------------------------- Server --

Server::Server(int fd, const Function &fn, Backend &be)
	: fd_(fd), fn_(fn), be_(be), irq_fd_(fn.msix_vectors, -1)
{
	build_config();
	in_.reserve(sizeof(Hdr));
}

Server::~Server()
{
	close_irqs();
	close_all(in_fds_);
}

void Server::close_irqs()
{
	for (int &f : irq_fd_) {
		if (f >= 0)
			close(f);
		f = -1;
	}
}

void Server::build_config()
{
	auto w16 = [this](unsigned int off, uint16_t v) { std::memcpy(&cfg_[off], &v, 2); };
	auto w32 = [this](unsigned int off, uint32_t v) { std::memcpy(&cfg_[off], &v, 4); };
	w16(0x00, fn_.vendor);
	w16(0x02, fn_.device);
	w16(0x06, 0x0010);				// status: capability list
	cfg_[0x08] = fn_.revision;
	cfg_[0x09] = uint8_t(fn_.class_code);
	cfg_[0x0a] = uint8_t(fn_.class_code >> 8);
	cfg_[0x0b] = uint8_t(fn_.class_code >> 16);
	for (unsigned int i = 0; i < kNumBars; i += 2)
		if (fn_.bar_size[i])
			w32(0x10 + 4 * i, 0x4);		// 64-bit memory
	w16(0x2c, fn_.subsys_vendor);
	w16(0x2e, fn_.subsys);
	// The command register: I/O, memory, bus master, INTx disable.
	cfg_wmask_[0x04] = 0x07;
	cfg_wmask_[0x05] = 0x04;
	if (fn_.msix_vectors) {
		cfg_[0x34] = kMsixCap;
		cfg_[kMsixCap] = 0x11;			// MSI-X, the last capability
		w16(kMsixCap + 2, uint16_t(fn_.msix_vectors - 1));
		w32(kMsixCap + 4, fn_.msix_bar);
		w32(kMsixCap + 8, uint32_t(fn_.bar_size[fn_.msix_bar] / 2) | fn_.msix_bar);
		cfg_wmask_[kMsixCap + 3] = 0xc0;	// enable, function mask
	}
}

bool Server::bus_master() const
{
	return cfg_[0x04] & kCmdBusMaster;
}

bool Server::signal(unsigned int vector)
{
	const uint64_t one = 1;
	return vector < irq_fd_.size() && irq_fd_[vector] >= 0 &&
	       ::write(irq_fd_[vector], &one, sizeof(one)) == ssize_t(sizeof(one));
}

bool Server::fail(const std::string &why)
{
	if (why_.empty())
		why_ = why;
	return false;
}

void Server::reply2(const Hdr &req, const void *a, size_t alen, const void *b, size_t blen)
{
	if (req.flags & kFlagNoReply)
		return;
	const Hdr h{req.id, req.command, uint32_t(sizeof(Hdr) + alen + blen), kFlagReply, 0};
	const auto *hp = reinterpret_cast<const uint8_t *>(&h);
	out_.insert(out_.end(), hp, hp + sizeof(h));
	if (alen)
		out_.insert(out_.end(), static_cast<const uint8_t *>(a),
			    static_cast<const uint8_t *>(a) + alen);
	if (blen)
		out_.insert(out_.end(), static_cast<const uint8_t *>(b),
			    static_cast<const uint8_t *>(b) + blen);
}

void Server::reply(const Hdr &req, const void *body, size_t len)
{
	reply2(req, body, len, nullptr, 0);
}

void Server::error(const Hdr &req, int err)
{
	if (req.flags & kFlagNoReply)
		return;
	const Hdr h{req.id, req.command, sizeof(Hdr), kFlagReply | kFlagError, uint32_t(err)};
	const auto *hp = reinterpret_cast<const uint8_t *>(&h);
	out_.insert(out_.end(), hp, hp + sizeof(h));
}

void Server::config_write(uint32_t off, const uint8_t *data, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++) {
		const uint8_t m = cfg_wmask_[off + i];
		cfg_[off + i] = uint8_t((cfg_[off + i] & ~m) | (data[i] & m));
	}
}

bool Server::region_read(const Hdr &h, std::span<const uint8_t> b)
{
	if (b.size() != sizeof(RegionRw)) {
		error(h, EINVAL);
		return true;
	}
	const auto rw = load<RegionRw>(b);
	std::array<uint8_t, 8> small{};
	if (rw.region == VFIO_PCI_CONFIG_REGION_INDEX) {
		if (rw.offset > kConfigSize || rw.count > kConfigSize - rw.offset) {
			error(h, EINVAL);
			return true;
		}
		reply2(h, &rw, sizeof(rw), &cfg_[rw.offset], rw.count);
		return true;
	}
	if (rw.region >= kNumBars || !fn_.bar_size[rw.region] ||
	    (rw.count != 1 && rw.count != 2 && rw.count != 4 && rw.count != 8) ||
	    rw.offset % rw.count || rw.offset >= fn_.bar_size[rw.region]) {
		error(h, EINVAL);
		return true;
	}
	const uint64_t v = be_.bar_read(rw.region, rw.offset, rw.count);
	std::memcpy(small.data(), &v, rw.count);
	reply2(h, &rw, sizeof(rw), small.data(), rw.count);
	return true;
}

bool Server::region_write(const Hdr &h, std::span<const uint8_t> b)
{
	if (b.size() < sizeof(RegionRw)) {
		error(h, EINVAL);
		return true;
	}
	const auto rw = load<RegionRw>(b);
	if (rw.count != b.size() - sizeof(RegionRw)) {
		error(h, EINVAL);
		return true;
	}
	const uint8_t *data = b.data() + sizeof(RegionRw);
	if (rw.region == VFIO_PCI_CONFIG_REGION_INDEX) {
		if (rw.offset > kConfigSize || rw.count > kConfigSize - rw.offset) {
			error(h, EINVAL);
			return true;
		}
		config_write(uint32_t(rw.offset), data, rw.count);
	} else {
		if (rw.region >= kNumBars || !fn_.bar_size[rw.region] ||
		    (rw.count != 1 && rw.count != 2 && rw.count != 4 && rw.count != 8) ||
		    rw.offset % rw.count || rw.offset >= fn_.bar_size[rw.region]) {
			error(h, EINVAL);
			return true;
		}
		uint64_t v = 0;
		std::memcpy(&v, data, rw.count);
		be_.bar_write(rw.region, rw.offset, v, rw.count);
	}
	reply(h, &rw, sizeof(rw));
	return true;
}

bool Server::set_irqs(const Hdr &h, std::span<const uint8_t> b, std::vector<int> &fds)
{
	vfio_irq_set s;
	if (b.size() != sizeof(s)) {
		error(h, EINVAL);
		return true;
	}
	std::memcpy(&s, b.data(), sizeof(s));
	const uint32_t data = s.flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
	const uint32_t action = s.flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
	if (s.index != VFIO_PCI_MSIX_IRQ_INDEX) {
		// No INTx, MSI, error or request interrupts: "none of them" is
		// the only setting there is.
		if (s.count == 0 && data == VFIO_IRQ_SET_DATA_NONE)
			reply(h, nullptr, 0);
		else
			error(h, EINVAL);
		return true;
	}
	if (s.start > irq_fd_.size() || s.count > irq_fd_.size() - s.start ||
	    action != VFIO_IRQ_SET_ACTION_TRIGGER) {
		error(h, EINVAL);
		return true;
	}
	if (data == VFIO_IRQ_SET_DATA_EVENTFD) {
		// All the vectors' fds, or none (QEMU sends none to unassign).
		if (!fds.empty() && fds.size() != s.count) {
			error(h, EINVAL);
			return true;
		}
		// A signal must never block the loop: an fd that is not an
		// eventfd (a full pipe) would.
		for (const int f : fds) {
			const int fl = fcntl(f, F_GETFL);
			if (fl < 0 || fcntl(f, F_SETFL, fl | O_NONBLOCK) < 0) {
				error(h, EINVAL);
				return true;
			}
		}
		for (uint32_t i = 0; i < s.count; i++) {
			int &slot = irq_fd_[s.start + i];
			if (slot >= 0)
				close(slot);
			slot = fds.empty() ? -1 : fds[i];
		}
		fds.clear();
	} else if (data == VFIO_IRQ_SET_DATA_NONE) {
		if (s.count == 0)
			close_irqs();
		else
			for (uint32_t i = 0; i < s.count; i++)
				signal(s.start + i);
	} else {
		error(h, EINVAL);
		return true;
	}
	reply(h, nullptr, 0);
	return true;
}

bool Server::dma_map(const Hdr &h, std::span<const uint8_t> b, std::vector<int> &fds)
{
	if (b.size() != sizeof(DmaMap) || fds.size() > 1) {
		error(h, EINVAL);
		return true;
	}
	const auto m = load<DmaMap>(b);
	if (m.flags & ~uint32_t(VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE) ||
	    !(m.flags & VFIO_DMA_MAP_FLAG_READ)) {
		error(h, EINVAL);
		return true;
	}
	if (!fds.empty() && !dma_.map(fds[0], m.offset, m.iova, m.size,
				      m.flags & VFIO_DMA_MAP_FLAG_WRITE)) {
		if (!map_refused_) {
			map_refused_ = true;
			why_map_ = "a DMA_MAP refused: guest RAM must be a sealed "
				   "memory-backend-memfd, mapped whole and aligned";
		}
		error(h, EINVAL);
		return true;
	}
	// Without an fd the memory is reachable only through DMA_READ and
	// DMA_WRITE messages, which the device does not use: it stays
	// unmapped, and DMA to it fails.
	if (fds.empty() && !map_unbacked_) {
		map_unbacked_ = true;
		why_map_ = "a DMA_MAP without an fd (firmware ROM, or RAM that is "
			   "not a memfd): DMA there fails";
	}
	reply(h, nullptr, 0);
	return true;
}

bool Server::dma_unmap(const Hdr &h, std::span<const uint8_t> b)
{
	if (b.size() != sizeof(DmaUnmap)) {
		error(h, EINVAL);
		return true;
	}
	const auto u = load<DmaUnmap>(b);
	if (u.flags & ~uint32_t(VFIO_DMA_UNMAP_FLAG_ALL)) {	// no dirty bitmaps
		error(h, EINVAL);
		return true;
	}
	if (u.flags & VFIO_DMA_UNMAP_FLAG_ALL)
		dma_.clear();
	else if (!dma_.unmap(u.iova, u.size)) {
		error(h, EINVAL);
		return true;
	}
	reply(h, &u, sizeof(u));
	return true;
}

bool Server::handle(const Hdr &h, std::span<const uint8_t> b, std::vector<int> &fds)
{
	if ((h.flags & kFlagTypeMask) != 0)
		return fail("a reply where a request was due");
	if (!versioned_ && h.command != kVersion)
		return fail("a request before VERSION");
	switch (h.command) {
	case kVersion: {
		if (b.size() < 4 || versioned_)
			return fail("a bad VERSION");
		const auto major = load<uint16_t>(b);
		if (major != 0) {
			error(h, ENOTSUP);
			return fail("vfio-user major version " + std::to_string(major));
		}
		static const char caps[] = "{\"capabilities\":{\"max_msg_fds\":16,"
					   "\"max_data_xfer_size\":1048576,"
					   "\"max_dma_maps\":1024}}";
		const std::array<uint16_t, 2> ver{0, 0};
		reply2(h, ver.data(), sizeof(ver), caps, sizeof(caps));
		versioned_ = true;
		return true;
	}
	case kDmaMap:
		return dma_map(h, b, fds);
	case kDmaUnmap:
		return dma_unmap(h, b);
	case kDeviceGetInfo: {
		vfio_device_info d{};
		d.argsz = 16;
		d.flags = VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET;
		d.num_regions = VFIO_PCI_NUM_REGIONS;
		d.num_irqs = VFIO_PCI_NUM_IRQS;
		reply(h, &d, 16);
		return true;
	}
	case kRegionInfo: {
		vfio_region_info r{};
		if (b.size() < sizeof(r)) {
			error(h, EINVAL);
			return true;
		}
		std::memcpy(&r, b.data(), sizeof(r));
		const uint32_t index = r.index;
		if (index >= VFIO_PCI_NUM_REGIONS) {
			error(h, EINVAL);
			return true;
		}
		r = {};
		r.argsz = sizeof(r);
		r.index = index;
		if (index < kNumBars)
			r.size = fn_.bar_size[index];
		else if (index == VFIO_PCI_CONFIG_REGION_INDEX)
			r.size = kConfigSize;
		if (r.size)
			r.flags = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
		reply(h, &r, sizeof(r));
		return true;
	}
	case kIrqInfo: {
		vfio_irq_info i{};
		if (b.size() < sizeof(i)) {
			error(h, EINVAL);
			return true;
		}
		std::memcpy(&i, b.data(), sizeof(i));
		if (i.index >= VFIO_PCI_NUM_IRQS) {
			error(h, EINVAL);
			return true;
		}
		const bool msix = i.index == VFIO_PCI_MSIX_IRQ_INDEX;
		i.argsz = sizeof(i);
		i.flags = msix ? VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE : 0;
		i.count = msix ? fn_.msix_vectors : 0;
		reply(h, &i, sizeof(i));
		return true;
	}
	case kSetIrqs:
		return set_irqs(h, b, fds);
	case kRegionRead:
		return region_read(h, b);
	case kRegionWrite:
		return region_write(h, b);
	case kDeviceReset:
		// The function's own state: the command register (bus
		// mastering) and the MSI-X control bits, as after power-on.
		cfg_ = {};
		build_config();
		be_.reset();
		reply(h, nullptr, 0);
		return true;
	default:
		error(h, ENOSYS);
		return true;
	}
}

bool Server::serve()
{
	for (;;) {
		if (out_.size() > kMaxOutBytes)
			return fail("the client does not read its replies");
		const size_t have = in_.size();
		in_.resize(in_want_);
		alignas(cmsghdr) char cbuf[CMSG_SPACE(kMaxFds * sizeof(int))];
		iovec iov{in_.data() + have, in_want_ - have};
		msghdr m{};
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = cbuf;
		m.msg_controllen = sizeof(cbuf);
		const ssize_t n = recvmsg(fd_, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		const bool truncated = (m.msg_flags & MSG_CTRUNC) != 0;
		for (cmsghdr *c = CMSG_FIRSTHDR(&m); n >= 0 && c; c = CMSG_NXTHDR(&m, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int f;
				std::memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
				in_fds_.push_back(f);
			}
		}
		if (n < 0) {
			in_.resize(have);
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return true;
			if (errno == EINTR)
				continue;
			return fail(std::string("recvmsg: ") + std::strerror(errno));
		}
		if (n == 0) {
			in_.resize(have);
			return fail("the client closed the socket");
		}
		in_.resize(have + size_t(n));
		if (truncated || in_fds_.size() > kMaxFds)
			return fail("too many fds with a message");
		if (in_.size() < in_want_)
			continue;
		Hdr h;
		std::memcpy(&h, in_.data(), sizeof(h));
		if (!in_body_) {
			if (h.size < sizeof(Hdr) || h.size > kMaxMsg)
				return fail("a message of " + std::to_string(h.size) + " bytes");
			in_body_ = true;
			in_want_ = h.size;
			if (in_.size() < in_want_)
				continue;
		}
		const bool ok = handle(h, std::span<const uint8_t>(in_).subspan(sizeof(Hdr)),
				       in_fds_);
		close_all(in_fds_);	// every fd not kept
		in_.clear();
		in_want_ = sizeof(Hdr);
		in_body_ = false;
		if (!ok)
			return false;
	}
}

bool Server::flush()
{
	while (!out_.empty()) {
		const ssize_t n = send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return true;
		if (n <= 0)
			return fail("the client is gone");
		out_.erase(out_.begin(), out_.begin() + n);
	}
	return true;
}

} // namespace vfu

// SPDX-License-Identifier: GPL-2.0-or-later
// device/vfio_user: the server side of vfio-user, driven through a real
// socket pair as QEMU would drive it, and by hostile messages.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <linux/vfio.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "vfio_user.hpp"

namespace {

struct FakeBackend : vfu::Backend {
	uint64_t bar_read(unsigned int bar, uint64_t off, unsigned int size) override
	{
		reads++;
		return uint64_t(bar) << 32 | off | uint64_t(size) << 24;
	}
	void bar_write(unsigned int bar, uint64_t off, uint64_t v, unsigned int size) override
	{
		last_bar = bar;
		last_off = off;
		last_val = v;
		last_size = size;
		writes++;
	}
	void reset() override { resets++; }
	unsigned int reads = 0, writes = 0, resets = 0, last_bar = 0, last_size = 0;
	uint64_t last_off = 0, last_val = 0;
};

vfu::Function function()
{
	vfu::Function fn;
	fn.vendor = 0x1af4;
	fn.device = 0x10f0;
	fn.class_code = 0x020000;
	fn.bar_size[0] = 0x4000;
	fn.bar_size[2] = 0x100000;
	fn.bar_size[4] = 0x1000;
	fn.msix_bar = 4;
	fn.msix_vectors = 9;
	return fn;
}

class VfioUser : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv_), 0);
		srv_ = std::make_unique<vfu::Server>(sv_[1], function(), be_);
	}
	void TearDown() override
	{
		srv_.reset();
		close(sv_[0]);
		close(sv_[1]);
	}
	// Send one message (its header's size set here) with optional fds.
	void send_msg(uint16_t cmd, const std::vector<uint8_t> &body,
		      std::vector<int> fds = {}, uint32_t flags = 0, uint16_t id = 1)
	{
		vfu::Hdr h{id, cmd, uint32_t(sizeof(vfu::Hdr) + body.size()), flags, 0};
		std::vector<uint8_t> m(sizeof(h));
		std::memcpy(m.data(), &h, sizeof(h));
		m.insert(m.end(), body.begin(), body.end());
		send_raw(m, fds);
	}
	void send_raw(const std::vector<uint8_t> &m, const std::vector<int> &fds = {})
	{
		iovec iov{const_cast<uint8_t *>(m.data()), m.size()};
		msghdr mh{};
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		alignas(cmsghdr) char cbuf[CMSG_SPACE(16 * sizeof(int))];
		if (!fds.empty()) {
			mh.msg_control = cbuf;
			mh.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
			cmsghdr *c = CMSG_FIRSTHDR(&mh);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
			std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
		}
		ASSERT_EQ(sendmsg(sv_[0], &mh, 0), ssize_t(m.size()));
	}
	// Serve, flush, and read one reply: its header and body.
	bool reply(vfu::Hdr &h, std::vector<uint8_t> &body)
	{
		if (!srv_->serve() || !srv_->flush())
			return false;
		std::vector<uint8_t> buf(1 << 16);
		const ssize_t n = recv(sv_[0], buf.data(), sizeof(vfu::Hdr), MSG_DONTWAIT);
		if (n != ssize_t(sizeof(vfu::Hdr)))
			return false;
		std::memcpy(&h, buf.data(), sizeof(h));
		body.resize(h.size - sizeof(h));
		return body.empty() ||
		       recv(sv_[0], body.data(), body.size(), MSG_DONTWAIT) == ssize_t(body.size());
	}
	void handshake()
	{
		const char caps[] = "{\"capabilities\":{}}";
		std::vector<uint8_t> b(4, 0);
		b.insert(b.end(), caps, caps + sizeof(caps));
		send_msg(vfu::kVersion, b);
		vfu::Hdr h{};
		std::vector<uint8_t> body;
		ASSERT_TRUE(reply(h, body));
		ASSERT_EQ(h.flags, vfu::kFlagReply);
		ASSERT_GT(body.size(), 4u);
		EXPECT_EQ(body.back(), 0);	// the capabilities string ends in NUL
	}
	template <typename T> static std::vector<uint8_t> bytes(const T &v)
	{
		std::vector<uint8_t> b(sizeof(v));
		std::memcpy(b.data(), &v, sizeof(v));
		return b;
	}
	static std::vector<uint8_t> rw(uint32_t region, uint64_t off, uint32_t count,
				       const std::vector<uint8_t> &data = {})
	{
		vfu::RegionRw r{off, region, count};
		auto b = bytes(r);
		b.insert(b.end(), data.begin(), data.end());
		return b;
	}

	int sv_[2] = {-1, -1};
	FakeBackend be_;
	std::unique_ptr<vfu::Server> srv_;
};

TEST_F(VfioUser, RequestBeforeVersionEndsTheSession)
{
	send_msg(vfu::kRegionRead, rw(0, 0, 4));
	EXPECT_FALSE(srv_->serve());
	EXPECT_EQ(be_.reads, 0u);
}

TEST_F(VfioUser, ConfigSpaceSaysWhatTheFunctionIs)
{
	handshake();
	send_msg(vfu::kRegionRead, rw(VFIO_PCI_CONFIG_REGION_INDEX, 0, 64));
	vfu::Hdr h{};
	std::vector<uint8_t> b;
	ASSERT_TRUE(reply(h, b));
	ASSERT_EQ(b.size(), sizeof(vfu::RegionRw) + 64);
	const uint8_t *cfg = b.data() + sizeof(vfu::RegionRw);
	EXPECT_EQ(cfg[0] | cfg[1] << 8, 0x1af4);
	EXPECT_EQ(cfg[2] | cfg[3] << 8, 0x10f0);
	EXPECT_EQ(cfg[0x0b], 0x02);	// network controller
	EXPECT_EQ(cfg[0x10] & 0x7, 0x4);	// BAR0: 64-bit memory
	EXPECT_EQ(cfg[0x34], 0x40);
	// Past the end of config space: refused, the session goes on.
	send_msg(vfu::kRegionRead, rw(VFIO_PCI_CONFIG_REGION_INDEX, 250, 8));
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(h.flags, vfu::kFlagReply | vfu::kFlagError);
	EXPECT_EQ(h.error_reply, uint32_t(EINVAL));
}

TEST_F(VfioUser, BusMasterFollowsTheCommandRegisterOnly)
{
	handshake();
	EXPECT_FALSE(srv_->bus_master());
	send_msg(vfu::kRegionWrite, rw(VFIO_PCI_CONFIG_REGION_INDEX, 4, 2, {0x06, 0}));
	vfu::Hdr h{};
	std::vector<uint8_t> b;
	ASSERT_TRUE(reply(h, b));
	EXPECT_TRUE(srv_->bus_master());
	// The IDs are read-only.
	send_msg(vfu::kRegionWrite, rw(VFIO_PCI_CONFIG_REGION_INDEX, 0, 4, {1, 2, 3, 4}));
	ASSERT_TRUE(reply(h, b));
	send_msg(vfu::kRegionRead, rw(VFIO_PCI_CONFIG_REGION_INDEX, 0, 2));
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(b[16] | b[17] << 8, 0x1af4);
}

TEST_F(VfioUser, BarAccessesAreBoundedAndAligned)
{
	handshake();
	vfu::Hdr h{};
	std::vector<uint8_t> b;
	// A posted doorbell: no reply, the backend sees it.
	send_msg(vfu::kRegionWrite, rw(2, 0x1100, 4, {7, 0, 0, 0}), {}, vfu::kFlagNoReply);
	EXPECT_TRUE(srv_->serve());
	EXPECT_FALSE(srv_->want_write());
	EXPECT_EQ(be_.writes, 1u);
	EXPECT_EQ(be_.last_bar, 2u);
	EXPECT_EQ(be_.last_off, 0x1100u);
	EXPECT_EQ(be_.last_val, 7u);
	for (const auto &bad : {rw(0, 0x4000, 4), rw(0, 2, 4), rw(0, 0, 3), rw(1, 0, 4),
				rw(6, 0, 4), rw(0, 0x3ffc, 8)}) {
		send_msg(vfu::kRegionRead, bad);
		ASSERT_TRUE(reply(h, b));
		EXPECT_EQ(h.flags, vfu::kFlagReply | vfu::kFlagError);
	}
	// A write whose count disagrees with its data.
	send_msg(vfu::kRegionWrite, rw(0, 0, 8, {1, 2, 3, 4}));
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(h.flags, vfu::kFlagReply | vfu::kFlagError);
	EXPECT_EQ(be_.reads, 0u);
	EXPECT_EQ(be_.writes, 1u);
	send_msg(vfu::kRegionRead, rw(0, 0x40, 4));
	ASSERT_TRUE(reply(h, b));
	ASSERT_EQ(b.size(), sizeof(vfu::RegionRw) + 4);
	EXPECT_EQ(be_.reads, 1u);
}

TEST_F(VfioUser, AMessageInPiecesWaitsWithoutBlocking)
{
	handshake();
	vfu::Hdr h{1, vfu::kRegionRead, sizeof(vfu::Hdr) + sizeof(vfu::RegionRw), 0, 0};
	std::vector<uint8_t> m(sizeof(h));
	std::memcpy(m.data(), &h, sizeof(h));
	const auto body = rw(0, 0x40, 4);
	m.insert(m.end(), body.begin(), body.end());
	send_raw(std::vector<uint8_t>(m.begin(), m.begin() + 10));
	EXPECT_TRUE(srv_->serve());	// returns: the rest has not come
	EXPECT_EQ(be_.reads, 0u);
	send_raw(std::vector<uint8_t>(m.begin() + 10, m.end()));
	std::vector<uint8_t> b;
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(be_.reads, 1u);
}

TEST_F(VfioUser, OversizedOrUndersizedMessagesEndTheSession)
{
	handshake();
	vfu::Hdr h{1, vfu::kRegionRead, vfu::kMaxMsg + 1, 0, 0};
	send_raw(bytes(h));
	EXPECT_FALSE(srv_->serve());
	EXPECT_NE(srv_->why(), "");
}

TEST_F(VfioUser, AReplyFromTheClientEndsTheSession)
{
	handshake();
	send_msg(vfu::kRegionRead, rw(0, 0, 4), {}, vfu::kFlagReply);
	EXPECT_FALSE(srv_->serve());
}

TEST_F(VfioUser, UnknownCommandsAreRefusedNotFatal)
{
	handshake();
	send_msg(vfu::kDmaRead, {});
	vfu::Hdr h{};
	std::vector<uint8_t> b;
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(h.error_reply, uint32_t(ENOSYS));
	send_msg(vfu::kDeviceReset, {});
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(be_.resets, 1u);
}

TEST_F(VfioUser, MsixEventfdsAreTakenAndSignalled)
{
	handshake();
	const int e = eventfd(0, EFD_NONBLOCK);
	vfio_irq_set s{};
	s.argsz = sizeof(s);
	s.flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
	s.index = VFIO_PCI_MSIX_IRQ_INDEX;
	s.start = 3;
	s.count = 1;
	send_msg(vfu::kSetIrqs, bytes(s), {e});
	vfu::Hdr h{};
	std::vector<uint8_t> b;
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(h.flags, vfu::kFlagReply);
	EXPECT_TRUE(srv_->signal(3));
	EXPECT_FALSE(srv_->signal(2));
	EXPECT_FALSE(srv_->signal(9));
	uint64_t v = 0;
	EXPECT_EQ(read(e, &v, sizeof(v)), ssize_t(sizeof(v)));
	EXPECT_EQ(v, 1u);
	// Vectors past the table are refused.
	s.start = 8;
	s.count = 2;
	send_msg(vfu::kSetIrqs, bytes(s));
	ASSERT_TRUE(reply(h, b));
	EXPECT_EQ(h.flags, vfu::kFlagReply | vfu::kFlagError);
	// Unassigned: no fds with the message.
	s.start = 3;
	s.count = 1;
	send_msg(vfu::kSetIrqs, bytes(s));
	ASSERT_TRUE(reply(h, b));
	EXPECT_FALSE(srv_->signal(3));
	close(e);
}

class DmaSpaceTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		fd_ = memfd_create("vrnic-test", MFD_ALLOW_SEALING);
		ASSERT_GE(fd_, 0);
		ASSERT_EQ(ftruncate(fd_, 64 * 1024), 0);
		// As QEMU's memory-backend-memfd (seal=on) leaves it.
		ASSERT_EQ(fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
	}
	void TearDown() override { close(fd_); }
	int fd_ = -1;
	vfu::DmaSpace dma_;
};

TEST_F(DmaSpaceTest, ReadsAndWritesOnlyInsideMappings)
{
	ASSERT_TRUE(dma_.map(fd_, 0, 0x10000, 0x4000, true));
	ASSERT_TRUE(dma_.map(fd_, 0x4000, 0x14000, 0x4000, false));
	uint8_t buf[32];
	std::memset(buf, 0xab, sizeof(buf));
	EXPECT_TRUE(dma_.write(0x10000 + 0x3ff0, buf, 16));
	// Across into the read-only mapping: refused whole, nothing written.
	EXPECT_FALSE(dma_.write(0x10000 + 0x3ff0, buf, 32));
	uint8_t back[32] = {};
	EXPECT_TRUE(dma_.read(0x10000 + 0x3ff0, back, 32));	// reads span both
	EXPECT_EQ(back[0], 0xab);
	EXPECT_EQ(back[16], 0);
	EXPECT_FALSE(dma_.read(0x18000 - 8, back, 16));		// past the end
	EXPECT_FALSE(dma_.read(0xfff8, back, 16));		// before the start
	EXPECT_FALSE(dma_.read(~uint64_t(0) - 4, back, 16));	// wraps
	EXPECT_TRUE(dma_.unmap(0x14000, 0x4000));
	EXPECT_FALSE(dma_.read(0x14000, back, 4));
	EXPECT_FALSE(dma_.unmap(0x10000, 0x1000));		// would cut a mapping
}

TEST_F(DmaSpaceTest, RefusesWhatCouldFaultOrOverlap)
{
	EXPECT_FALSE(dma_.map(fd_, 0, 0x10000, 0x20000, true));	// past the file's end
	EXPECT_FALSE(dma_.map(fd_, 0x100, 0x10000, 0x1000, true));	// unaligned
	EXPECT_FALSE(dma_.map(fd_, 0, 0x10000, 0, true));
	EXPECT_FALSE(dma_.map(fd_, ~uint64_t(0) & ~0xfffull, 0x10000, 0x2000, true));
	ASSERT_TRUE(dma_.map(fd_, 0, 0x10000, 0x2000, true));
	EXPECT_FALSE(dma_.map(fd_, 0, 0x11000, 0x2000, true));	// overlaps
	// The file can no longer shrink under the mapping.
	EXPECT_NE(ftruncate(fd_, 4096), 0);
	// An unsealed memfd, and a plain file, which could shrink: refused,
	// and the memfd is left as it was (no seal added behind its owner).
	const int m = memfd_create("vrnic-unsealed", MFD_ALLOW_SEALING);
	ASSERT_GE(m, 0);
	ASSERT_EQ(ftruncate(m, 8192), 0);
	EXPECT_FALSE(dma_.map(m, 0, 0x30000, 0x2000, true));
	EXPECT_EQ(fcntl(m, F_GET_SEALS) & F_SEAL_SHRINK, 0);
	close(m);
	char path[] = "/tmp/vrnic-dma-XXXXXX";
	const int f = mkstemp(path);
	ASSERT_GE(f, 0);
	unlink(path);
	ASSERT_EQ(ftruncate(f, 8192), 0);
	EXPECT_FALSE(dma_.map(f, 0, 0x40000, 0x2000, true));
	close(f);
}

} // namespace

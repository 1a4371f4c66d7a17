// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-device: the vrnic engine as a vfio-user server that stock QEMU
// (10.1.1 or later) attaches with -device vfio-user-pci.  It implements
// the engine's platform interface (qemu-device/engine/vrnic_engine.h):
//   DMA       memcpy through the guest RAM QEMU maps (memfd-backed RAM
//             is required), only while the guest allows bus mastering;
//   MSI-X     a write to the vector's eventfd;
//   the wire  its own stream socket in QEMU's stream-netdev framing (a
//             4-byte big-endian length, then the frame), to a peer VM's
//             device or QEMU, or to vrnic-fabric;
//   timers and deferred work in its own epoll loop.  The engine is never
//   entered from one of its own callbacks: they set flags, the loop acts.
//
//   vrnic-device --socket PATH --mac MAC
//                (--wire-listen PATH | --wire-connect PATH)
//                [--host-mem-budget BYTES] [--speed-mbps N]
//                [--no-sandbox] [--x-fault-syscall]
// It serves one QEMU until that QEMU goes away, then exits 0.  Once QEMU
// has connected it enters its sandbox (sandbox.hpp) unless --no-sandbox;
// --x-fault-syscall (test only) makes it call open(2), which the sandbox
// forbids, when it gets SIGUSR1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "sandbox.hpp"
#include "vfio_user.hpp"
#include "vrnic_function.hpp"
#include "vrnic_engine.h"
#include "vrnic_hw.h"

namespace {

constexpr size_t kMaxFrame = 4096 + 65536;	// QEMU's NET_BUFSIZE
constexpr size_t kWireOutHigh = size_t{256} * 1024;	// then send_frame says "full"
constexpr uint64_t kReconnectNs = 100'000'000;
constexpr unsigned int kPollsPerTurn = 64;	// then the sockets get a look
constexpr unsigned int kReadsPerTurn = 4;	// of up to 64 KiB from the wire

volatile sig_atomic_t usr1_seen = 0;

uint64_t mono_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

void say(const std::string &msg)
{
	(void)std::fprintf(stderr, "vrnic-device: %s\n", msg.c_str());
}

// "52:54:00:12:34:56" into mac; false if it is not six hex bytes.
bool parse_mac(const std::string &s, uint8_t (&mac)[6])
{
	const char *p = s.c_str();
	for (int i = 0; i < 6; i++) {
		char *end = nullptr;
		const unsigned long v = std::strtoul(p, &end, 16);
		if (end == p || end - p > 2 || v > 0xff || *end != (i < 5 ? ':' : '\0'))
			return false;
		mac[i] = uint8_t(v);
		p = end + 1;
	}
	return true;
}

int unix_socket(const std::string &path, bool listen_on)
{
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	if (path.size() >= sizeof(sa.sun_path))
		return -1;
	std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
	const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (listen_on) {
		unlink(path.c_str());
		if (bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) == 0 &&
		    listen(fd, 1) == 0)
			return fd;
	} else if (connect(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) == 0) {
		return fd;
	}
	close(fd);
	return -1;
}

// A whole decimal or 0x number, nothing after it.
bool parse_u64(const std::string &s, uint64_t &out)
{
	char *end = nullptr;
	errno = 0;
	out = std::strtoull(s.c_str(), &end, 0);
	return !s.empty() && s[0] != '-' && errno == 0 && end && *end == '\0';
}

struct Options {
	std::string socket, wire_path, mac = "52:54:00:12:34:56";
	bool wire_listen = false;
	bool sandbox = true;
	bool fault_syscall = false;
	uint64_t host_mem_budget = 0;
	uint32_t speed_mbps = 0;
};

class Device final : public vfu::Backend {
public:
	explicit Device(Options o) : opt_(std::move(o)) {}
	~Device() override;
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;
	int run();

	// vfu::Backend
	uint64_t bar_read(unsigned int bar, uint64_t off, unsigned int size) override;
	void bar_write(unsigned int bar, uint64_t off, uint64_t v, unsigned int size) override;
	void reset() override;

private:
	static const vrnic_platform_ops kOps;
	static Device &of(void *p) { return *static_cast<Device *>(p); }
	bool setup();
	void set_epoll(int fd, uint32_t events);
	void wire_up(int fd);
	void wire_down();
	void wire_read();
	bool wire_flush();
	void deliver_held();
	void timer_fire();
	void arm_reconnect();
	void do_work();

	Options opt_;
	vrnic_engine *eng_ = nullptr;
	vfu::Server *srv_ = nullptr;
	int ep_ = -1, vfu_fd_ = -1, timer_fd_ = -1, retry_fd_ = -1;
	int wire_listen_fd_ = -1, wire_fd_ = -1;
	// Flags the engine's callbacks set; the loop acts on them.
	bool work_ = false, rx_ready_ = false, tx_full_ = false;
	// The wire.  Input: bytes of frames not yet whole, and a frame the
	// engine could not take yet (no reading until it can).
	std::vector<uint8_t> win_;
	std::vector<uint8_t> held_;
	bool holding_ = false;
	std::deque<uint8_t> wout_;
	uint64_t guest_errors_ = 0, dma_refused_ = 0, irqs_lost_ = 0;
};

const vrnic_platform_ops Device::kOps = {
	.dma_read = [](void *p, uint64_t addr, void *buf, size_t len) -> int {
		Device &d = of(p);
		if (!d.srv_->bus_master() || !d.srv_->dma().read(addr, buf, len)) {
			d.dma_refused_++;
			return -1;
		}
		return 0;
	},
	.dma_write = [](void *p, uint64_t addr, const void *buf, size_t len) -> int {
		Device &d = of(p);
		if (!d.srv_->bus_master() || !d.srv_->dma().write(addr, buf, len)) {
			d.dma_refused_++;
			return -1;
		}
		return 0;
	},
	.send_frame = [](void *p, const void *frame, size_t len) -> int {
		Device &d = of(p);
		if (d.wire_fd_ < 0 || len > kMaxFrame)
			return 0;	// no wire: the frame is lost, as on a cut cable
		const uint32_t be = htonl(uint32_t(len));
		const auto *b = reinterpret_cast<const uint8_t *>(&be);
		d.wout_.insert(d.wout_.end(), b, b + 4);
		d.wout_.insert(d.wout_.end(), static_cast<const uint8_t *>(frame),
			       static_cast<const uint8_t *>(frame) + len);
		if (d.wout_.size() < kWireOutHigh)
			return 0;
		d.tx_full_ = true;
		return 1;
	},
	.raise_irq = [](void *p, unsigned int vector) {
		Device &d = of(p);
		// No eventfd: QEMU has not enabled the vector (MSI-X off).
		if (!d.srv_->signal(vector) && d.irqs_lost_++ < 5)
			say("MSI-X vector " + std::to_string(vector) + " has no eventfd");
	},
	.schedule = [](void *p) { of(p).work_ = true; },
	.rx_ready = [](void *p) { of(p).rx_ready_ = true; },
	.now_ns = [](void *) -> uint64_t { return mono_ns(); },
	.timer_arm = [](void *p, uint64_t deadline) {
		itimerspec its{};
		// 0 would disarm: a deadline in the past fires at once.
		const uint64_t at = deadline ? deadline : 1;
		its.it_value.tv_sec = time_t(at / 1'000'000'000u);
		its.it_value.tv_nsec = long(at % 1'000'000'000u);
		timerfd_settime(of(p).timer_fd_, TFD_TIMER_ABSTIME, &its, nullptr);
	},
	.guest_error = [](void *p, const char *msg) {
		if (of(p).guest_errors_++ < 20)
			say(std::string("guest error: ") + msg);
	},
	.trace = [](void *, vrnic_trace_id id, uint64_t a, uint64_t, uint64_t) {
		if (id == VRNIC_TRACE_FATAL)
			say("device fatal, error " + std::to_string(a));
	},
};

Device::~Device()
{
	delete srv_;
	if (eng_)
		vrnic_engine_free(eng_);
	for (const int fd : {ep_, vfu_fd_, timer_fd_, retry_fd_, wire_listen_fd_, wire_fd_})
		if (fd >= 0)
			close(fd);
}

// DEVICE_RESET: the engine forgets everything, and so do the wire's
// buffers (a held frame, frames not yet sent).
void Device::reset()
{
	vrnic_engine_reset(eng_);
	holding_ = false;
	held_.clear();
	wout_.clear();
	tx_full_ = false;
	rx_ready_ = false;
	if (wire_fd_ >= 0)
		set_epoll(wire_fd_, EPOLLIN);
}

uint64_t Device::bar_read(unsigned int bar, uint64_t off, unsigned int size)
{
	if (bar == VRNIC_REG_BAR)
		return vrnic_engine_reg_read(eng_, off, size);
	return 0;	// doorbells read as 0; the PBA QEMU keeps itself
}

void Device::bar_write(unsigned int bar, uint64_t off, uint64_t v, unsigned int size)
{
	if (bar == VRNIC_REG_BAR)
		vrnic_engine_reg_write(eng_, off, v, size);
	else if (bar == VRNIC_DB_BAR)
		vrnic_engine_db_write(eng_, off, v, size);
}

void Device::set_epoll(int fd, uint32_t events)
{
	epoll_event ev{};
	ev.events = events;
	ev.data.fd = fd;
	if (epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev) && errno == ENOENT)
		epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
}

void Device::wire_up(int fd)
{
	wire_fd_ = fd;
	win_.clear();
	wout_.clear();
	set_epoll(fd, EPOLLIN);
}

void Device::wire_down()
{
	if (wire_fd_ >= 0) {
		epoll_ctl(ep_, EPOLL_CTL_DEL, wire_fd_, nullptr);
		close(wire_fd_);
	}
	wire_fd_ = -1;
	win_.clear();
	wout_.clear();
	holding_ = false;
	if (tx_full_) {
		tx_full_ = false;
		vrnic_engine_tx_resume(eng_);
	}
	if (!opt_.wire_listen)
		arm_reconnect();
}

void Device::arm_reconnect()
{
	itimerspec its{};
	its.it_value.tv_nsec = long(kReconnectNs);
	timerfd_settime(retry_fd_, 0, &its, nullptr);
}

// Hand the engine the frames whole in win_, until it holds one back.
void Device::wire_read()
{
	uint8_t buf[65536];
	// A peer that keeps the socket full must not starve QEMU's socket:
	// at most kReadsPerTurn reads, then epoll (level-triggered) again.
	for (unsigned int turn = 0; !holding_ && wire_fd_ >= 0 && turn < kReadsPerTurn; turn++) {
		size_t pos = 0;
		while (win_.size() - pos >= 4) {
			uint32_t be;
			std::memcpy(&be, win_.data() + pos, 4);
			const size_t len = ntohl(be);
			if (len > kMaxFrame) {
				say("wire: a frame of " + std::to_string(len) + " bytes; dropping the peer");
				wire_down();
				return;
			}
			if (win_.size() - pos - 4 < len)
				break;
			const uint8_t *f = win_.data() + pos + 4;
			pos += 4 + len;
			if (!vrnic_engine_can_receive(eng_) ||
			    vrnic_engine_receive(eng_, f, len) == 0) {
				held_.assign(f, f + len);
				holding_ = true;
				break;
			}
		}
		win_.erase(win_.begin(), win_.begin() + long(pos));
		if (holding_)
			break;
		const ssize_t n = recv(wire_fd_, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			wire_down();
			return;
		}
		win_.insert(win_.end(), buf, buf + n);
	}
	if (wire_fd_ >= 0)
		set_epoll(wire_fd_, (holding_ ? 0u : uint32_t(EPOLLIN)) | (wout_.empty() ? 0u : uint32_t(EPOLLOUT)));
}

void Device::deliver_held()
{
	if (!holding_)
		return;
	if (!vrnic_engine_can_receive(eng_) ||
	    vrnic_engine_receive(eng_, held_.data(), held_.size()) == 0)
		return;
	holding_ = false;
	wire_read();
}

bool Device::wire_flush()
{
	while (!wout_.empty() && wire_fd_ >= 0) {
		uint8_t buf[65536];
		const size_t n = std::min(wout_.size(), sizeof(buf));
		std::copy_n(wout_.begin(), n, buf);
		const ssize_t w = send(wire_fd_, buf, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			wire_down();
			return false;
		}
		wout_.erase(wout_.begin(), wout_.begin() + w);
	}
	if (tx_full_ && wout_.size() < kWireOutHigh / 2) {
		tx_full_ = false;
		vrnic_engine_tx_resume(eng_);
	}
	if (wire_fd_ >= 0)
		set_epoll(wire_fd_, (holding_ ? 0u : uint32_t(EPOLLIN)) | (wout_.empty() ? 0u : uint32_t(EPOLLOUT)));
	return true;
}

void Device::timer_fire()
{
	uint64_t n;
	if (read(timer_fd_, &n, sizeof(n)) == ssize_t(sizeof(n)))
		vrnic_engine_timer(eng_);
}

// What the engine's callbacks asked for, in a bounded amount.
void Device::do_work()
{
	for (unsigned int i = 0; i < kPollsPerTurn && (work_ || rx_ready_); i++) {
		if (rx_ready_) {
			rx_ready_ = false;
			deliver_held();
		}
		if (work_) {
			work_ = false;
			vrnic_engine_poll(eng_);
		}
	}
	wire_flush();
}

bool Device::setup()
{
	vrnic_engine_config cfg{};
	if (!parse_mac(opt_.mac, cfg.mac)) {
		say("bad --mac " + opt_.mac);
		return false;
	}
	cfg.num_msix = VRNIC_NUM_MSIX;
	cfg.link_up = true;
	cfg.host_mem_budget = opt_.host_mem_budget;
	cfg.speed_mbps = opt_.speed_mbps;
	eng_ = vrnic_engine_new(&cfg, &kOps, this);
	ep_ = epoll_create1(EPOLL_CLOEXEC);
	timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	retry_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!eng_ || ep_ < 0 || timer_fd_ < 0 || retry_fd_ < 0) {
		say(std::string("set-up failed: ") + std::strerror(errno));
		return false;
	}
	set_epoll(timer_fd_, EPOLLIN);
	set_epoll(retry_fd_, EPOLLIN);
	if (opt_.wire_listen) {
		wire_listen_fd_ = unix_socket(opt_.wire_path, true);
		if (wire_listen_fd_ < 0) {
			say("cannot listen on " + opt_.wire_path);
			return false;
		}
		set_epoll(wire_listen_fd_, EPOLLIN);
	} else {
		arm_reconnect();
	}
	const int lfd = unix_socket(opt_.socket, true);
	if (lfd < 0) {
		say("cannot listen on " + opt_.socket);
		return false;
	}
	// One client, QEMU: wait for it (the loop has nothing to do before).
	pollfd pfd{lfd, POLLIN, 0};
	while (poll(&pfd, 1, -1) < 0 && errno == EINTR) {
	}
	vfu_fd_ = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
	close(lfd);
	unlink(opt_.socket.c_str());
	if (vfu_fd_ < 0) {
		say(std::string("accept: ") + std::strerror(errno));
		return false;
	}
	const vfu::Function fn = vfu::vrnic_function(VRNIC_PCI_DEVICE_ID,
						     uint32_t(VRNIC_PCI_CLASS) << 8);
	srv_ = new vfu::Server(vfu_fd_, fn, *this);
	set_epoll(vfu_fd_, EPOLLIN);
	if (opt_.fault_syscall)
		(void)std::signal(SIGUSR1, [](int) { usr1_seen = 1; });
	if (opt_.sandbox) {
		std::string why;
		if (!vfu::sandbox_enter(!opt_.wire_listen, why)) {
			say("cannot enter the sandbox: " + why);
			return false;
		}
	}
	return true;
}

int Device::run()
{
	if (!setup())
		return 1;
	for (;;) {
		epoll_event evs[8];
		const int n = epoll_wait(ep_, evs, 8, work_ || rx_ready_ ? 0 : -1);
		if (usr1_seen) {
			usr1_seen = 0;
			say("--x-fault-syscall: calling open(2)");
			const int fd = open("/", O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				close(fd);
		}
		if (n < 0 && errno != EINTR) {
			say(std::string("epoll: ") + std::strerror(errno));
			return 1;
		}
		for (int i = 0; i < n; i++) {
			const int fd = evs[i].data.fd;
			if (fd == vfu_fd_) {
				if (!srv_->serve() || !srv_->flush()) {
					say("QEMU: " + srv_->why() + "; exiting");
					return 0;
				}
				if (const std::string note = srv_->take_map_note(); !note.empty())
					say(note);
			} else if (fd == timer_fd_) {
				timer_fire();
			} else if (fd == retry_fd_) {
				uint64_t x;
				(void)!read(retry_fd_, &x, sizeof(x));
				if (wire_fd_ < 0) {
					const int w = unix_socket(opt_.wire_path, false);
					if (w >= 0)
						wire_up(w);
					else
						arm_reconnect();
				}
			} else if (fd == wire_listen_fd_) {
				const int w = accept4(wire_listen_fd_, nullptr, nullptr,
						      SOCK_CLOEXEC | SOCK_NONBLOCK);
				if (w >= 0) {
					wire_down();
					wire_up(w);
				}
			} else if (fd == wire_fd_) {
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					wire_read();
				if (wire_fd_ >= 0 && (evs[i].events & EPOLLOUT))
					wire_flush();
			}
		}
		do_work();
		if (!srv_->flush()) {
			say("QEMU: " + srv_->why() + "; exiting");
			return 0;
		}
		set_epoll(vfu_fd_, uint32_t(EPOLLIN) | (srv_->want_write() ? uint32_t(EPOLLOUT) : 0u));
	}
}

void usage()
{
	say("usage: vrnic-device --socket PATH --mac MAC "
	    "(--wire-listen PATH | --wire-connect PATH) "
	    "[--host-mem-budget BYTES] [--speed-mbps N] [--no-sandbox]");
}

} // namespace

int main(int argc, char **argv)
{
	Options o;
	for (int i = 1; i < argc; i++) {
		const std::string a = argv[i];
		const bool flag = a == "--no-sandbox" || a == "--x-fault-syscall";
		if (!flag && i + 1 >= argc) {
			usage();
			return 2;
		}
		const std::string v = flag ? "" : argv[++i];
		if (a == "--socket")
			o.socket = v;
		else if (a == "--mac")
			o.mac = v;
		else if (a == "--wire-listen" || a == "--wire-connect") {
			o.wire_path = v;
			o.wire_listen = a == "--wire-listen";
		} else if (a == "--host-mem-budget") {
			if (!parse_u64(v, o.host_mem_budget)) {
				usage();
				return 2;
			}
		}
		else if (a == "--no-sandbox" || a == "--x-fault-syscall") {
			o.sandbox = o.sandbox && a != "--no-sandbox";
			o.fault_syscall = o.fault_syscall || a == "--x-fault-syscall";
		} else if (a == "--speed-mbps") {
			uint64_t n = 0;
			if (!parse_u64(v, n) || n == 0 || n > VRNIC_SPEED_MBPS_MAX) {
				say("--speed-mbps must be between 1 and " +
				    std::to_string(VRNIC_SPEED_MBPS_MAX));
				return 2;
			}
			o.speed_mbps = uint32_t(n);
		} else {
			usage();
			return 2;
		}
	}
	if (o.socket.empty() || o.wire_path.empty()) {
		usage();
		return 2;
	}
	if (o.host_mem_budget && (o.host_mem_budget < VRNIC_HOST_MEM_BUDGET_MIN ||
				  o.host_mem_budget > VRNIC_HOST_MEM_BUDGET_MAX)) {
		say("--host-mem-budget must be between 16M and 1T");
		return 2;
	}
	(void)std::signal(SIGPIPE, SIG_IGN);
	Device d(o);
	return d.run();
}

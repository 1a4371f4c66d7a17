// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-device: the vrnic engine as a vfio-user server that stock QEMU
// (10.1.1 or later) attaches with -device vfio-user-pci.  It implements
// the engine's platform interface (engine/vrnic_engine.h):
//   DMA       memcpy through the guest RAM QEMU maps (memfd-backed RAM
//             is required), only while the guest allows bus mastering;
//   MSI-X     a write to the vector's eventfd;
//   the wire  its own stream socket in QEMU's stream-netdev framing (a
//             4-byte big-endian length, then the frame), to a peer VM's
//             device or QEMU, or to vrnic-fabric: a UNIX socket path, or
//             tcp:HOST:PORT (another machine);
//   timers and deferred work in its own epoll loop.  The engine is never
//   entered from one of its own callbacks: they set flags, the loop acts.
//
//   vrnic-device --socket PATH --mac MAC
//                (--wire-listen PATH | --wire-connect PATH)
//                [--host-mem-budget BYTES] [--speed-mbps N]
//                [--qpc-cache N] [--qpc-miss-ns NS]
//                [--control PATH] [--trace GLOB[,GLOB...]]
//                [--user NAME] [--no-sandbox] [--x-fault-syscall]
// It serves one QEMU until that QEMU goes away, then exits 0.  Once QEMU
// has connected it becomes --user NAME (supplementary groups dropped;
// its wire socket, if it listens on a path, is given to that user first,
// so that a peer device running as the same user can connect), then
// enters its sandbox (sandbox.hpp) unless --no-sandbox;
// --x-fault-syscall (test only) makes it call open(2), which the sandbox
// forbids, when it gets SIGUSR1.
//
// --control PATH: a UNIX stream socket taking QMP-shaped JSON lines
// (control.hpp), for what QEMU's monitor would do to a QEMU device:
// set_link, the test-only x-fault-* properties (qom-set, qom-get; spec,
// "Fault injection"), and a packet capture of the wire into a file
// whose fd comes with capture-start (SCM_RIGHTS: the sandbox opens no
// file).  Documentation/vfio-user.rst, "The control channel".
#include <arpa/inet.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <grp.h>
#include <malloc.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cinttypes>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "control.hpp"
#include "sandbox.hpp"
#include "vfio_user.hpp"
#include "vrnic_function.hpp"
#include "wire_out.hpp"
#include "vrnic_engine.h"
#include "vrnic_hw.h"

namespace {

constexpr size_t kMaxFrame = 4096 + 65536;	// QEMU's NET_BUFSIZE
constexpr size_t kWireOutHigh = size_t{256} * 1024;	// then send_frame says "full"
constexpr uint64_t kReconnectNs = 100'000'000;
constexpr unsigned int kPollsPerTurn = 64;	// then the sockets get a look
constexpr unsigned int kReadsPerTurn = 4;	// of up to 64 KiB from the wire
constexpr unsigned int kCtlLinesPerTurn = 8;	// control requests per turn
constexpr size_t kCtlOutMax = size_t{64} * 1024;	// a client that does not read
constexpr unsigned int kCtlMaxFds = 4;	// held at a time (not yet given to a
						// request); more are closed
constexpr uint32_t kFaultAdminNever = UINT32_MAX;
constexpr uint8_t kFaultCmdFlag = 0x80;	// the engine answers BAD_PARAM
constexpr uint32_t kPcapSnaplen = 65535;
constexpr uint64_t kCaptureMax = uint64_t{1} << 30;	// then the capture stops

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

// Where the wire goes: a UNIX socket path, or tcp:HOST:PORT (HOST a name,
// an IPv4 address or a [bracketed] IPv6 one), resolved once at start-up,
// before the sandbox (which then allows sockets of that family only).
struct WireAddr {
	sockaddr_storage ss{};
	socklen_t len = 0;
	int family = AF_UNIX;
};

bool unix_addr(const std::string &path, WireAddr &out)
{
	sockaddr_un sa{};
	sa.sun_family = AF_UNIX;
	if (path.empty() || path.size() >= sizeof(sa.sun_path))
		return false;
	std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
	std::memcpy(&out.ss, &sa, sizeof(sa));
	out.len = sizeof(sa);
	out.family = AF_UNIX;
	return true;
}

bool wire_addr(const std::string &spec, WireAddr &out, std::string &why)
{
	if (spec.rfind("tcp:", 0) != 0) {
		if (unix_addr(spec, out))
			return true;
		why = "a UNIX socket path of 1 to 107 bytes";
		return false;
	}
	const std::string hp = spec.substr(4);
	const size_t colon = hp.rfind(':');
	if (colon == std::string::npos || colon == 0 || colon + 1 == hp.size()) {
		why = "tcp:HOST:PORT";
		return false;
	}
	std::string host = hp.substr(0, colon);
	const std::string port = hp.substr(colon + 1);
	if (host.size() > 2 && host.front() == '[' && host.back() == ']')
		host = host.substr(1, host.size() - 2);
	addrinfo hints{};
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV;
	addrinfo *res = nullptr;
	const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &res);
	if (rc != 0 || !res) {
		why = std::string("cannot resolve ") + hp + ": " + gai_strerror(rc);
		return false;
	}
	std::memcpy(&out.ss, res->ai_addr, res->ai_addrlen);
	out.len = res->ai_addrlen;
	out.family = res->ai_family;
	freeaddrinfo(res);
	return true;
}

// A non-blocking stream socket on the wire's address: listening, or
// connecting.  A TCP connect may still be in progress when it returns;
// the loop then sees it fail as an error on the socket (and reconnects)
// or succeed as the socket turning writable.  TCP_NODELAY: every frame
// goes at once, as QEMU's stream netdev sends them.  The socket buffers
// are fixed at what a UNIX stream socket has (net.core.wmem_default): a
// wire holds little in flight, and a TCP socket left to autotune holds
// megabytes, which a switch's PFC headroom then has to absorb after a
// pause (the fabric tests' PFC incast overflowed 1.5 MiB of it).
constexpr int kTcpWireBuf = 212992 / 2;	// the kernel doubles it

int wire_socket(const WireAddr &wa, bool listen_on)
{
	const int fd = socket(wa.family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	const auto *sa = reinterpret_cast<const sockaddr *>(&wa.ss);
	if (wa.family != AF_UNIX) {
		const int one = 1;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &kTcpWireBuf, sizeof(kTcpWireBuf));
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kTcpWireBuf, sizeof(kTcpWireBuf));
		if (listen_on)
			(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	}
	if (listen_on) {
		if (wa.family == AF_UNIX)
			unlink(reinterpret_cast<const sockaddr_un *>(sa)->sun_path);
		if (bind(fd, sa, wa.len) == 0 && listen(fd, 1) == 0)
			return fd;
	} else if (connect(fd, sa, wa.len) == 0 ||
		   (wa.family != AF_UNIX && errno == EINPROGRESS)) {
		return fd;
	}
	const int err = errno;	// for the caller's message
	close(fd);
	errno = err;
	return -1;
}

// The control channel's and QEMU's sockets: always a UNIX path.
int unix_socket(const std::string &path, bool listen_on)
{
	WireAddr wa;
	return unix_addr(path, wa) ? wire_socket(wa, listen_on) : -1;
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
	std::string socket, wire_path, control, trace, mac = "52:54:00:12:34:56";
	bool wire_listen = false;
	WireAddr wire;		// wire_path, resolved
	// --user: the account to run as once set up (resolved at start).
	std::string user;
	uid_t uid = 0;
	gid_t gid = 0;
	bool sandbox = true;
	bool fault_syscall = false;
	uint64_t host_mem_budget = 0;
	uint32_t speed_mbps = 0;
	uint32_t qpc_cache = 0;		// 0: unlimited
	uint32_t qpc_miss_ns = 0;	// 0: the engine's default
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
	bool more_work() const { return work_ || rx_ready_ || ctl_more_; }
	// The control channel (--control).
	void ctl_accept();
	void ctl_read();
	void ctl_lines();
	void ctl_flush();
	void ctl_close();
	void ctl_epoll();
	std::string ctl_exec(const ctl::Request &r, std::vector<int> &fds);
	std::string ctl_qom_get(const std::string &prop) const;
	std::string ctl_qom_set(const std::string &prop, const ctl::Value &v);
	std::string ctl_capture_start(std::vector<int> &fds);
	void ctl_apply();
	// The capture (capture-start): every frame sent and received.
	void capture(const void *frame, size_t len) noexcept;
	void capture_stop(const char *why) noexcept;
	// Fault injection (test only; spec, "Fault injection").
	void fault_hold_admin(uint32_t val);
	void fault_arm_timer(uint32_t ms);
	void fault_clear();
	void fault_cmd(uint64_t addr, void *buf, size_t len) noexcept;
	void aq_regs_update();

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
	// Output: the stream records the socket has not taken yet.
	wire::Out wout_;
	uint64_t guest_errors_ = 0, dma_refused_ = 0, irqs_lost_ = 0;
	// Device resets, logged as QEMU's vrnic_reset trace event would
	// show them (a reboot's .shutdown must reset: guest_tests.py), at
	// most 10 lines a second however fast a guest resets.
	uint64_t resets_ = 0, resets_quiet_ = 0, reset_window_ns_ = 0;
	unsigned reset_lines_ = 0;
	bool qemu_reset_ = false;	// in reset(): QEMU's, not the driver's
	bool connect_failing_ = false;	// the wire's reconnects, said once
	void log_reset();
	// --trace: the engine's trace points whose names match, and every
	// guest error (vrnic_guest_error), printed to stderr.
	std::array<bool, VRNIC_TRACE_NUM> traced_{};
	bool trace_guest_errors_ = false;
	void trace_setup();
	void trace(vrnic_trace_id id, uint64_t a, uint64_t b, uint64_t c);
	// The control channel: one client at a time (the next waits).
	int ctl_listen_fd_ = -1, ctl_fd_ = -1;
	std::string ctl_in_, ctl_out_;
	ctl::FdQueue ctl_fds_;	// came with the bytes in ctl_in_, by offset
	bool ctl_more_ = false;		// whole lines wait in ctl_in_
	// set_link: the cable, and the engine's view, which the loop updates
	// (ctl_apply), never a callback.  Down, no new frame is sent or taken
	// from the wire; what was already queued (wout_) or held for the
	// engine (held_) still goes.
	bool link_up_ = true, link_pending_ = false;
	bool internal_pending_ = false;	// x-fault-internal was set
	int capture_fd_ = -1;
	uint64_t capture_bytes_ = 0;
	// Why the device stopped the capture itself, for capture-stop.
	const char *capture_why_ = nullptr;
	int capture_errno_ = 0;		// of a failed write
	// x-fault-admin: 0, a delay in ms, or kFaultAdminNever.
	uint32_t fault_admin_ = 0;
	bool aq_db_held_ = false, fault_timer_armed_ = false, fault_release_ = false;
	uint32_t aq_db_val_ = 0;
	int fault_timer_fd_ = -1;
	// x-fault-destroy, x-fault-create-ring: refuse the next N.
	uint32_t fault_destroy_ = 0, fault_create_ring_ = 0;
	uint64_t aq_base_ = 0;		// the AQ as the engine last took it
	uint32_t aq_log_depth_ = 0;
};

const vrnic_platform_ops Device::kOps = {
	.dma_read = [](void *p, uint64_t addr, void *buf, size_t len) -> int {
		Device &d = of(p);
		if (!d.srv_->bus_master() || !d.srv_->dma().read(addr, buf, len)) {
			d.dma_refused_++;
			return -1;
		}
		if (d.fault_destroy_ || d.fault_create_ring_)
			d.fault_cmd(addr, buf, len);
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
		if (d.wire_fd_ < 0 || len > kMaxFrame || !d.link_up_)
			return 0;	// no wire: the frame is lost, as on a cut cable
		d.capture(frame, len);
		d.wout_.push(frame, len);
		if (d.wout_.pending() < kWireOutHigh)
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
		if (of(p).guest_errors_++ < 20 || of(p).trace_guest_errors_)
			say(std::string("guest error: ") + msg);
	},
	.trace = [](void *p, vrnic_trace_id id, uint64_t a, uint64_t b, uint64_t c) {
		of(p).trace(id, a, b, c);
	},
};

// The trace points' names, as the retired QEMU device's trace-events
// called them (spec, "Tracing"), indexed by vrnic_trace_id.
constexpr std::array<const char *, VRNIC_TRACE_NUM> kTraceNames = {
	"vrnic_reg_read", "vrnic_reg_write", "vrnic_db_write",
	"vrnic_admin_cmd", "vrnic_admin_done", "vrnic_eq_post",
	"vrnic_eq_overflow", "vrnic_irq", "vrnic_eth_tx", "vrnic_eth_rx",
	"vrnic_eth_rx_drop", "vrnic_roce_rx", "vrnic_reset", "vrnic_link",
	"vrnic_fatal", "vrnic_mac_control",
};
static_assert(std::all_of(kTraceNames.begin(), kTraceNames.end(),
			  [](const char *n) { return n != nullptr; }),
	      "a vrnic_trace_id without a name");

void Device::trace_setup()
{
	std::string rest = opt_.trace;

	while (!rest.empty()) {
		const size_t comma = rest.find(',');
		const std::string glob = rest.substr(0, comma);

		rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
		for (size_t i = 0; i < kTraceNames.size(); i++)
			if (fnmatch(glob.c_str(), kTraceNames[i], 0) == 0)
				traced_[i] = true;
		if (fnmatch(glob.c_str(), "vrnic_guest_error", 0) == 0)
			trace_guest_errors_ = true;
	}
}

void Device::trace(vrnic_trace_id id, uint64_t a, uint64_t b, uint64_t c)
{
	if (id == VRNIC_TRACE_FATAL)
		say("device fatal, error " + std::to_string(a));
	else if (id == VRNIC_TRACE_RESET)
		log_reset();
	else if (unsigned(id) < traced_.size() && traced_[id]) {
		char line[128];

		(void)std::snprintf(line, sizeof(line),
				    "%s 0x%" PRIx64 " 0x%" PRIx64 " 0x%" PRIx64,
				    kTraceNames[id], a, b, c);
		say(line);
	}
}

void Device::log_reset()
{
	const uint64_t now = mono_ns();

	resets_++;
	if (now - reset_window_ns_ >= 1'000'000'000u) {
		reset_window_ns_ = now;
		reset_lines_ = 0;
	}
	if (reset_lines_ >= 10) {
		resets_quiet_++;
		return;
	}
	reset_lines_++;
	// Who asked: the guest through the register (CTRL.RESET), or QEMU
	// (vfio-user DEVICE_RESET: a machine reset, a function reset).
	std::string line = "vrnic_reset: device reset " + std::to_string(resets_) +
			   (qemu_reset_ ? " (vfio-user DEVICE_RESET)" : " (CTRL.RESET)");
	if (resets_quiet_)
		line += " (" + std::to_string(resets_quiet_) + " not logged)";
	resets_quiet_ = 0;
	say(line);
}

Device::~Device()
{
	delete srv_;
	if (eng_)
		vrnic_engine_free(eng_);
	ctl_close();
	capture_stop(nullptr);
	for (const int fd : {ep_, vfu_fd_, timer_fd_, retry_fd_, wire_listen_fd_, wire_fd_,
			     ctl_listen_fd_, fault_timer_fd_})
		if (fd >= 0)
			close(fd);
}

// DEVICE_RESET: the engine forgets everything, and so do the wire's
// buffers (a held frame, frames not yet begun).
void Device::reset()
{
	// A pending x-fault-internal does not outlive the reset, nor does a
	// held admin doorbell; a link change still applies (it did change).
	internal_pending_ = false;
	fault_clear();
	qemu_reset_ = true;
	vrnic_engine_reset(eng_);
	qemu_reset_ = false;
	aq_regs_update();
	holding_ = false;
	held_.clear();
	// Frames not begun are dropped; one the socket has taken part of
	// is finished, or the peer would lose the stream's framing.
	wout_.drop_unsent();
	tx_full_ = false;
	rx_ready_ = false;
	if (wire_fd_ >= 0)
		set_epoll(wire_fd_, EPOLLIN | (wout_.empty() ? 0u : uint32_t(EPOLLOUT)));
}

uint64_t Device::bar_read(unsigned int bar, uint64_t off, unsigned int size)
{
	if (bar == VRNIC_REG_BAR)
		return vrnic_engine_reg_read(eng_, off, size);
	return 0;	// doorbells read as 0; the PBA QEMU keeps itself
}

void Device::bar_write(unsigned int bar, uint64_t off, uint64_t v, unsigned int size)
{
	if (bar == VRNIC_DB_BAR) {
		vrnic_engine_db_write(eng_, off, v, size);
		return;
	}
	if (bar != VRNIC_REG_BAR)
		return;
	if (off == VRNIC_REG_AQ_DB && fault_admin_ && size == 4) {
		fault_hold_admin(uint32_t(v));
		return;
	}
	if (off == VRNIC_REG_CTRL && size == 4 && (v & VRNIC_CTRL_RESET))
		fault_clear();
	vrnic_engine_reg_write(eng_, off, v, size);
	switch (off) {
	case VRNIC_REG_CTRL:
	case VRNIC_REG_AQ_BASE_LO:
	case VRNIC_REG_AQ_BASE_HI:
	case VRNIC_REG_AQ_LOG_DEPTH:
		aq_regs_update();
		break;
	default:
		break;
	}
}

// ------------------------------------------------ fault injection ---
// The test-only hooks, with the names and values of the spec's "Fault
// injection" (they were QOM properties of the retired in-QEMU device).
//
// x-fault-admin holds back the admin queue doorbell, so the engine sees
// the commands late (a delay in ms) or never (UINT32_MAX).  The doorbell
// is a producer index: the last value held stands for every command rung
// since.  A device reset (REG_CTRL or DEVICE_RESET) drops it.
void Device::fault_hold_admin(uint32_t val)
{
	aq_db_held_ = true;
	aq_db_val_ = val;
	if (fault_admin_ != kFaultAdminNever && !fault_timer_armed_)
		fault_arm_timer(fault_admin_);
}

void Device::fault_arm_timer(uint32_t ms)
{
	itimerspec its{};
	// 0 would disarm the timerfd; ms is never 0 here, but be safe.
	const uint64_t ns = ms ? uint64_t(ms) * 1'000'000u : 1;
	its.it_value.tv_sec = time_t(ns / 1'000'000'000u);
	its.it_value.tv_nsec = long(ns % 1'000'000'000u);
	timerfd_settime(fault_timer_fd_, 0, &its, nullptr);
	fault_timer_armed_ = true;
}

void Device::fault_clear()
{
	itimerspec its{};
	timerfd_settime(fault_timer_fd_, 0, &its, nullptr);
	fault_timer_armed_ = false;
	fault_release_ = false;
	aq_db_held_ = false;
}

// x-fault-destroy = N: the next N DESTROY_EQ, _ETH_RING, _MR, _CQ, _QP or
// _SRQ admin commands the engine fetches are refused: a reserved flag
// bit is set in the engine's copy of the command (never in guest
// memory), so the engine answers BAD_PARAM and keeps the object.  Not
// reset by a device reset: it counts commands.  x-fault-create-ring = N
// does the same to the next N CREATE_ETH_RING.  Called from the engine's
// DMA read: it only looks at the copy, and uses the AQ registers as the
// engine last took them (aq_regs_update), since the engine may not be
// called from its own callback.
void Device::fault_cmd(uint64_t addr, void *buf, size_t len) noexcept
{
	auto *cmd = static_cast<uint8_t *>(buf);	// opcode, flags, ...
	const uint64_t off = addr - aq_base_;
	if (len != sizeof(vrnic_admin_cmd) || addr < aq_base_ || aq_log_depth_ > 16 ||
	    off >= uint64_t{sizeof(vrnic_admin_cmd)} << aq_log_depth_ ||
	    off % sizeof(vrnic_admin_cmd))
		return;
	switch (cmd[0]) {
	case VRNIC_ADMIN_DESTROY_EQ:
	case VRNIC_ADMIN_DESTROY_ETH_RING:
	case VRNIC_ADMIN_DESTROY_MR:
	case VRNIC_ADMIN_DESTROY_CQ:
	case VRNIC_ADMIN_DESTROY_QP:
	case VRNIC_ADMIN_DESTROY_SRQ:
		if (!fault_destroy_)
			return;
		fault_destroy_--;
		break;
	case VRNIC_ADMIN_CREATE_ETH_RING:
		if (!fault_create_ring_)
			return;
		fault_create_ring_--;
		break;
	default:
		return;
	}
	cmd[1] |= kFaultCmdFlag;
}

void Device::aq_regs_update()
{
	aq_base_ = vrnic_engine_reg_read(eng_, VRNIC_REG_AQ_BASE_LO, 4) |
		   vrnic_engine_reg_read(eng_, VRNIC_REG_AQ_BASE_HI, 4) << 32;
	aq_log_depth_ = uint32_t(vrnic_engine_reg_read(eng_, VRNIC_REG_AQ_LOG_DEPTH, 4));
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
			if (!link_up_)
				continue;	// set_link down: the cable is cut
			capture(f, len);
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
		const ssize_t w = send(wire_fd_, wout_.data(), wout_.pending(),
				       MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			wire_down();
			return false;
		}
		wout_.sent(size_t(w));
	}
	if (tx_full_ && wout_.pending() < kWireOutHigh / 2) {
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

// -------------------------------------------------- control channel ---
// One client at a time (the next waits to be accepted), served from the
// loop like every other socket: bytes are read when epoll says so, whole
// lines are executed a few per turn (ctl_more_ keeps the loop turning for
// the rest), replies wait in a bounded buffer.  A request only changes
// the device's own state; what must reach the engine (the link,
// x-fault-internal, a released admin doorbell) is applied by ctl_apply()
// from the loop.

void Device::ctl_epoll()
{
	if (ctl_fd_ < 0)
		return;
	// Nothing more is read while whole lines wait: they go first.
	const bool room = ctl_in_.size() <= ctl::kMaxLine &&
			  ctl_in_.find('\n') == std::string::npos;
	set_epoll(ctl_fd_, (room ? uint32_t(EPOLLIN) : 0u) |
			   (ctl_out_.empty() ? 0u : uint32_t(EPOLLOUT)));
}

void Device::ctl_close()
{
	if (ctl_fd_ >= 0) {
		epoll_ctl(ep_, EPOLL_CTL_DEL, ctl_fd_, nullptr);
		close(ctl_fd_);
	}
	ctl_fd_ = -1;
	for (const int fd : ctl_fds_.take_all())
		close(fd);
	ctl_in_.clear();
	ctl_out_.clear();
	ctl_more_ = false;
	if (ctl_listen_fd_ >= 0)
		set_epoll(ctl_listen_fd_, EPOLLIN);	// the next client, if one waits
}

void Device::ctl_accept()
{
	if (ctl_fd_ >= 0)
		return;
	const int fd = accept4(ctl_listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return;
	// One client at a time: the next waits in the listen backlog until
	// this one goes (the harness connects per call and then closes), so
	// that no caller loses its reply to another.
	ctl_fd_ = fd;
	set_epoll(ctl_listen_fd_, 0);
	ctl_epoll();
}

void Device::ctl_read()
{
	if (ctl_more_)
		return;	// whole lines wait (a hangup is seen once they are done)
	char buf[ctl::kMaxLine + 1];
	const size_t room = ctl::kMaxLine + 1 - std::min(ctl_in_.size(), ctl::kMaxLine);
	iovec iov{buf, room};
	alignas(cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * kCtlMaxFds)];
	msghdr mh{};
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cbuf;
	mh.msg_controllen = sizeof(cbuf);
	const ssize_t n = recvmsg(ctl_fd_, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
		return;
	// Take every fd that came with bytes (a failed read brings none; on
	// EOF none can come), so none leaks.  Each is tagged with the last
	// byte read with it, which the sender sent with it (see FdQueue).
	const size_t at = ctl_in_.size() + (n > 0 ? size_t(n) - 1 : 0);
	for (cmsghdr *c = CMSG_FIRSTHDR(&mh); n >= 0 && c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < count; i++) {
			int fd = -1;
			std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (ctl_fds_.size() < kCtlMaxFds)
				ctl_fds_.add(fd, at);
			else
				close(fd);
		}
	}
	if (n <= 0) {
		ctl_close();
		return;
	}
	ctl_in_.append(buf, size_t(n));
	ctl_lines();
}

void Device::ctl_lines()
{
	ctl_more_ = false;
	for (unsigned int i = 0; ctl_fd_ >= 0; i++) {
		const size_t nl = ctl_in_.find('\n');
		if (nl == std::string::npos) {
			if (ctl_in_.size() > ctl::kMaxLine) {
				// No way to find the next request: answer and hang up.
				ctl_out_ += ctl::reply_error("request longer than " +
							     std::to_string(ctl::kMaxLine) +
							     " bytes");
				ctl_flush();
				ctl_close();
				return;
			}
			break;
		}
		if (i == kCtlLinesPerTurn) {
			ctl_more_ = true;
			break;
		}
		std::string line = ctl_in_.substr(0, nl);
		ctl_in_.erase(0, nl + 1);
		// The fds that came with this line belong to it; what the
		// request does not take (or a blank line's) is closed.
		std::vector<int> fds = ctl_fds_.take(nl);
		if (!line.empty() && line.back() == '\r')
			line.pop_back();
		if (line.find_first_not_of(" \t") == std::string::npos) {
			for (const int fd : fds)
				close(fd);
			continue;
		}
		std::string err;
		const auto req = ctl::parse(line, err);
		ctl_out_ += req ? ctl::with_id(ctl_exec(*req, fds), req->id)
				: ctl::reply_error("bad request: " + err);
		for (const int fd : fds)
			close(fd);
	}
	ctl_flush();
}

void Device::ctl_flush()
{
	while (ctl_fd_ >= 0 && !ctl_out_.empty()) {
		const ssize_t w = send(ctl_fd_, ctl_out_.data(), ctl_out_.size(),
				       MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (w <= 0) {
			ctl_close();
			return;
		}
		ctl_out_.erase(0, size_t(w));
	}
	if (ctl_out_.size() > kCtlOutMax) {
		say("control: the client does not read its replies; hanging up");
		ctl_close();
		return;
	}
	ctl_epoll();
}

std::string Device::ctl_exec(const ctl::Request &r, std::vector<int> &fds)
{
	using K = ctl::Value::Kind;
	if (r.execute == "qmp_capabilities")
		return ctl::reply_ok();
	if (r.execute == "set_link") {
		const ctl::Value *name = r.arg("name"), *up = r.arg("up");
		if (name && (name->kind != K::String || name->s != "wire"))
			return ctl::reply_error("the device's only link is 'wire'");
		if (!up || up->kind != K::Bool)
			return ctl::reply_error("Parameter 'up' is missing or not a boolean");
		if (up->b != link_up_) {
			link_up_ = up->b;
			link_pending_ = true;
		}
		return ctl::reply_ok();
	}
	if (r.execute == "qom-get" || r.execute == "qom-set") {
		// "path" is QEMU's way to name the device; there is only one.
		const ctl::Value *prop = r.arg("property");
		if (!prop || prop->kind != K::String)
			return ctl::reply_error("Parameter 'property' is missing or not a string");
		if (r.execute == "qom-get")
			return ctl_qom_get(prop->s);
		const ctl::Value *v = r.arg("value");
		if (!v)
			return ctl::reply_error("Parameter 'value' is missing");
		return ctl_qom_set(prop->s, *v);
	}
	if (r.execute == "capture-start")
		return ctl_capture_start(fds);
	if (r.execute == "capture-stop") {
		if (capture_fd_ < 0 && capture_why_) {
			std::string why = capture_why_;
			if (capture_errno_)
				why += std::string(" (") + std::strerror(capture_errno_) + ")";
			capture_why_ = nullptr;
			return ctl::reply_error("the capture had stopped: " + why + " after " +
						std::to_string(capture_bytes_) + " bytes");
		}
		if (capture_fd_ < 0)
			return ctl::reply_error("no capture is running");
		capture_stop(nullptr);
		return ctl::reply_ok();
	}
	return ctl::reply_error("The command " + r.execute + " has not been found",
				"CommandNotFound");
}

std::string Device::ctl_qom_get(const std::string &prop) const
{
	if (prop == "x-fault-admin")
		return ctl::reply_ok(std::to_string(fault_admin_));
	if (prop == "x-fault-destroy")
		return ctl::reply_ok(std::to_string(fault_destroy_));
	if (prop == "x-fault-create-ring")
		return ctl::reply_ok(std::to_string(fault_create_ring_));
	if (prop == "x-fault-internal")
		return ctl::reply_ok("false");	// as QEMU's: reading gives false
	if (prop == "qpc-cache")
		return ctl::reply_ok(std::to_string(opt_.qpc_cache));
	if (prop == "qpc-miss-ns")
		return ctl::reply_ok(std::to_string(opt_.qpc_miss_ns ? opt_.qpc_miss_ns
								   : VRNIC_QPC_MISS_NS_DEFAULT));
	return ctl::reply_error("Property 'vrnic." + prop + "' not found");
}

std::string Device::ctl_qom_set(const std::string &prop, const ctl::Value &v)
{
	using K = ctl::Value::Kind;
	if (prop == "x-fault-internal") {
		if (v.kind != K::Bool)
			return ctl::reply_error("Parameter 'value' expects a boolean");
		internal_pending_ = internal_pending_ || v.b;
		return ctl::reply_ok();
	}
	if (v.kind != K::Int || v.i < 0 || v.i > int64_t{UINT32_MAX})
		return ctl::reply_error("Parameter 'value' expects uint32");
	const auto n = uint32_t(v.i);
	if (prop == "x-fault-destroy") {
		fault_destroy_ = n;
	} else if (prop == "x-fault-create-ring") {
		fault_create_ring_ = n;
	} else if (prop == "qpc-cache" || prop == "qpc-miss-ns") {
		// The QP-context cache model, as --qpc-cache and --qpc-miss-ns
		// would have set it; the guest's driver learns of it when it
		// next probes.
		const bool cache = prop == "qpc-cache";
		if (cache ? n > VRNIC_MAX_QP : (n == 0 || n > VRNIC_QPC_MISS_NS_MAX))
			return ctl::reply_error("Parameter 'value' is out of range");
		const uint32_t entries = cache ? n : opt_.qpc_cache;
		const uint32_t miss = cache ? opt_.qpc_miss_ns : n;
		if (!eng_ || !vrnic_engine_set_qpc(eng_, entries, miss))
			return ctl::reply_error("the device is not running");
		opt_.qpc_cache = entries;
		opt_.qpc_miss_ns = miss;
	} else if (prop == "x-fault-admin") {
		// 0 lets a held doorbell through now; a new delay counts from now.
		fault_admin_ = n;
		if (aq_db_held_) {
			itimerspec its{};
			timerfd_settime(fault_timer_fd_, 0, &its, nullptr);
			fault_timer_armed_ = false;
			if (!n)
				fault_release_ = true;
			else if (n != kFaultAdminNever)
				fault_arm_timer(n);
		}
	} else {
		return ctl::reply_error("Property 'vrnic." + prop + "' not found");
	}
	return ctl::reply_ok();
}

// capture-start takes one fd, open for writing on a regular file or a
// pipe (the sandbox may not open files; the client does).
std::string Device::ctl_capture_start(std::vector<int> &fds)
{
	if (fds.size() != 1)
		return ctl::reply_error("capture-start needs exactly one fd (SCM_RIGHTS), got " +
					std::to_string(fds.size()));
	if (capture_fd_ >= 0)
		return ctl::reply_error("a capture is already running");
	const int fd = fds[0];
	struct stat st{};
	if (fstat(fd, &st) || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)))
		return ctl::reply_error("the capture fd is not a file or a pipe");
	const int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
		return ctl::reply_error("the capture fd is not open for writing");
	// The pcap file header: LINKTYPE_ETHERNET, microseconds.
	struct {
		uint32_t magic = 0xa1b2c3d4;
		uint16_t major = 2, minor = 4;
		int32_t thiszone = 0;
		uint32_t sigfigs = 0, snaplen = kPcapSnaplen, network = 1;
	} const hdr;
	// The fd will do.  A pipe nobody drains must not stop the device: it
	// stops the capture.  The file description is the client's too, so a
	// refused fd is left as it came.
	if (fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return ctl::reply_error(std::string("cannot make the capture fd non-blocking: ") +
					std::strerror(errno));
	if (write(fd, &hdr, sizeof(hdr)) != ssize_t(sizeof(hdr))) {
		const int e = errno;
		(void)fcntl(fd, F_SETFL, fl);
		return ctl::reply_error(std::string("cannot write the pcap header: ") +
					std::strerror(e));
	}
	fds.clear();
	capture_fd_ = fd;
	capture_bytes_ = sizeof(hdr);
	capture_why_ = nullptr;
	return ctl::reply_ok();
}

// Called from the engine's send_frame and from wire_read: no allocation,
// no exception, never the engine.
void Device::capture(const void *frame, size_t len) noexcept
{
	if (capture_fd_ < 0)
		return;
	timespec ts{};
	clock_gettime(CLOCK_REALTIME, &ts);
	const uint32_t incl = uint32_t(std::min<size_t>(len, kPcapSnaplen));
	const uint32_t rec[4] = {uint32_t(ts.tv_sec), uint32_t(ts.tv_nsec / 1000), incl,
				 uint32_t(len)};
	iovec iov[2] = {{const_cast<uint32_t *>(rec), sizeof(rec)},
			{const_cast<void *>(frame), incl}};
	const auto want = ssize_t(sizeof(rec) + incl);
	ssize_t w = 0;
	do {
		w = writev(capture_fd_, iov, 2);
	} while (w < 0 && errno == EINTR);
	// A short write would leave a torn record: stop there.
	capture_errno_ = w < 0 ? errno : 0;
	if (w != want)
		capture_stop(w < 0 ? "a write failed" : "a short write");
	else if ((capture_bytes_ += uint64_t(w)) > kCaptureMax)
		capture_stop("it reached 1 GiB");
}

void Device::capture_stop(const char *why) noexcept
{
	if (capture_fd_ < 0)
		return;
	// capture_bytes_ stays: the whole records written, which
	// capture-stop reports with why.
	capture_why_ = why;
	if (why)
		(void)std::fprintf(stderr, "vrnic-device: capture stopped: %s\n", why);
	close(capture_fd_);
	capture_fd_ = -1;
}

// What the control channel asked of the engine, from the loop.
void Device::ctl_apply()
{
	if (link_pending_) {
		link_pending_ = false;
		vrnic_engine_set_link(eng_, link_up_);
	}
	if (internal_pending_) {
		internal_pending_ = false;
		vrnic_engine_inject_internal_error(eng_);
	}
	if (fault_release_) {
		fault_release_ = false;
		if (aq_db_held_) {
			aq_db_held_ = false;
			vrnic_engine_reg_write(eng_, VRNIC_REG_AQ_DB, aq_db_val_, 4);
		}
	}
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
	cfg.qpc_cache = opt_.qpc_cache;
	cfg.qpc_miss_ns = opt_.qpc_miss_ns;
	eng_ = vrnic_engine_new(&cfg, &kOps, this);
	ep_ = epoll_create1(EPOLL_CLOEXEC);
	timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	retry_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	fault_timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
	if (!eng_ || ep_ < 0 || timer_fd_ < 0 || retry_fd_ < 0 || fault_timer_fd_ < 0) {
		say(std::string("set-up failed: ") + std::strerror(errno));
		return false;
	}
	set_epoll(timer_fd_, EPOLLIN);
	set_epoll(retry_fd_, EPOLLIN);
	set_epoll(fault_timer_fd_, EPOLLIN);
	aq_regs_update();
	// The control socket before QEMU's, so that it exists once the
	// vfio-user socket does (the harness waits for that one).  Clients
	// are taken from the loop only, after QEMU has connected.
	if (!opt_.control.empty()) {
		ctl_listen_fd_ = unix_socket(opt_.control, true);
		if (ctl_listen_fd_ < 0) {
			say("cannot listen on " + opt_.control);
			return false;
		}
		set_epoll(ctl_listen_fd_, EPOLLIN);
	}
	if (opt_.wire_listen) {
		wire_listen_fd_ = wire_socket(opt_.wire, true);
		if (wire_listen_fd_ < 0) {
			say("cannot listen on " + opt_.wire_path);
			return false;
		}
		// A peer device running as the same --user must be able to
		// connect (a UNIX socket needs write permission on its path).
		// fchownat without following a link: whoever can write the
		// directory cannot swap the path for a link to a file root
		// would then give away.
		if (!opt_.user.empty() && opt_.wire.family == AF_UNIX &&
		    fchownat(AT_FDCWD, opt_.wire_path.c_str(), opt_.uid, opt_.gid,
			     AT_SYMLINK_NOFOLLOW) != 0) {
			say("cannot give " + opt_.wire_path + " to " + opt_.user +
			    ": " + std::strerror(errno));
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
	// Everything that needs the starting user is done (sockets bound,
	// QEMU connected): drop to --user, for good, before the filter.
	if (!opt_.user.empty() && (getuid() != opt_.uid || geteuid() != opt_.uid)) {
		if (setgroups(0, nullptr) != 0 || setgid(opt_.gid) != 0 ||
		    setuid(opt_.uid) != 0) {
			say("cannot become " + opt_.user + ": " + std::strerror(errno));
			return false;
		}
		if (opt_.uid != 0 && setuid(0) == 0) {
			say("dropped to " + opt_.user + " but could get root back");
			return false;
		}
	}
	if (opt_.sandbox) {
		std::string why;
		if (!vfu::sandbox_enter(opt_.wire_listen ? 0 : opt_.wire.family, why)) {
			say("cannot enter the sandbox: " + why);
			return false;
		}
	}
	return true;
}

int Device::run()
{
	trace_setup();
	if (!setup())
		return 1;
	for (;;) {
		epoll_event evs[8];
		const int n = epoll_wait(ep_, evs, 8, more_work() ? 0 : -1);
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
					const int w = wire_socket(opt_.wire, false);
					if (w >= 0) {
						if (connect_failing_)
							say("wire: connected to " + opt_.wire_path);
						connect_failing_ = false;
						wire_up(w);
					} else {
						// Once per run of failures: a peer
						// not up yet is normal, a permission
						// (EACCES after --user) is not.
						if (!connect_failing_)
							say("wire: cannot connect to " +
							    opt_.wire_path + ": " +
							    std::strerror(errno) +
							    " (retrying every 100 ms)");
						connect_failing_ = true;
						arm_reconnect();
					}
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
			} else if (fd == fault_timer_fd_) {
				uint64_t x;
				if (read(fault_timer_fd_, &x, sizeof(x)) == ssize_t(sizeof(x)) &&
				    fault_timer_armed_) {
					fault_timer_armed_ = false;
					fault_release_ = true;
				}
			} else if (fd == ctl_listen_fd_) {
				ctl_accept();
			} else if (fd == ctl_fd_) {
				// A request, or the client going away.
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
					ctl_read();
				if (ctl_fd_ >= 0 && (evs[i].events & EPOLLOUT))
					ctl_flush();
			}
		}
		if (ctl_more_)
			ctl_lines();
		ctl_apply();
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
	    "[--host-mem-budget BYTES] [--speed-mbps N] [--qpc-cache N] "
	    "[--qpc-miss-ns NS] [--control PATH] "
	    "[--trace GLOB[,GLOB...]] [--user NAME] [--no-sandbox]");
}

} // namespace

int main(int argc, char **argv)
{
	Options o;
	// What selective repeat holds behind a gap (up to 2 MiB a QP) is
	// allocated and freed in bursts; glibc gave the heap's top back to
	// the kernel after each and faulted it in zeroed again (perf: page
	// faults and clear_page were a tenth of this process's time at 1%
	// loss).  The budget (--host-mem-budget) bounds what is held; the
	// heap keeps what it once held.
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_MMAP_THRESHOLD, 4 << 20);
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
		else if (a == "--control")
			o.control = v;
		else if (a == "--trace")
			o.trace = v;
		else if (a == "--user")
			o.user = v;
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
		} else if (a == "--qpc-cache" || a == "--qpc-miss-ns") {
			// The QP-context cache model: 0 contexts is unlimited.
			const bool cache = a == "--qpc-cache";
			const uint64_t max = cache ? VRNIC_MAX_QP : VRNIC_QPC_MISS_NS_MAX;
			uint64_t n = 0;
			if (!parse_u64(v, n) || n > max || (!cache && n == 0)) {
				say(a + " must be between " + (cache ? "0" : "1") +
				    " and " + std::to_string(max));
				return 2;
			}
			(cache ? o.qpc_cache : o.qpc_miss_ns) = uint32_t(n);
		} else {
			usage();
			return 2;
		}
	}
	if (o.socket.empty() || o.wire_path.empty()) {
		usage();
		return 2;
	}
	if (std::string why; !wire_addr(o.wire_path, o.wire, why)) {
		say("bad wire " + o.wire_path + ": " + why);
		return 2;
	}
	if (!o.user.empty()) {
		const passwd *pw = getpwnam(o.user.c_str());
		if (!pw) {
			say("--user " + o.user + ": no such user");
			return 2;
		}
		o.uid = pw->pw_uid;
		o.gid = pw->pw_gid;
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

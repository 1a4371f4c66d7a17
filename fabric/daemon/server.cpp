// SPDX-License-Identifier: GPL-2.0-or-later
#include "server.hpp"
#include "telemetry.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace vrnic::fabric {

namespace {

constexpr size_t kControlLine = 64 << 10;
// Memory a local client can pin: 32 control connections, each with at
// most a 64 KiB line in and 4 MiB of replies out; host ports have one
// live connection each (the listen backlog holds the rest).
constexpr size_t kControlOut = 4 << 20;
constexpr size_t kMaxControl = 32;
constexpr size_t kMaxConns = 4096;

uint64_t mono_ns()
{
	timespec ts{};
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
	       static_cast<uint64_t>(ts.tv_nsec);
}

std::string dump(const nlohmann::json &j)
{
	return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace

Server::Server(TopologyConfig cfg, ServerOptions opt) : cfg_(std::move(cfg)), opt_(std::move(opt))
{
	fabric_ = std::make_unique<Fabric>(cfg_, *this);
	host_conn_.assign(fabric_->host_count(), nullptr);
	t0_ = mono_ns();
	if (opt_.control.empty())
		opt_.control = opt_.dir + "/control.sock";
	const std::string &f = opt_.telemetry;
	csv_ = opt_.telemetry_format == "csv" ||
	       (opt_.telemetry_format.empty() && f.ends_with(".csv"));
}

Server::~Server()
{
	for (auto &c : conns_)
		if (c->fd >= 0)
			(void)::close(c->fd);
	for (int fd : {ep_, timer_, sig_})
		if (fd >= 0)
			(void)::close(fd);
	for (const auto &p : unix_paths_)
		(void)::unlink(p.c_str());
	if (telemetry_)
		(void)std::fclose(telemetry_);
}

uint64_t Server::now() const
{
	return mono_ns() - t0_;
}

int Server::listen_unix(const std::string &path)
{
	sockaddr_un sa{};
	if (path.size() >= sizeof(sa.sun_path)) {
		(void)std::fprintf(stderr, "vrnic-fabric: socket path too long: %s\n", path.c_str());
		return -1;
	}
	struct stat st{};
	if (::lstat(path.c_str(), &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			(void)std::fprintf(stderr, "vrnic-fabric: %s exists and is no socket\n", path.c_str());
			return -1;
		}
		(void)::unlink(path.c_str());	// a stale socket of an earlier run
	}
	const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	sa.sun_family = AF_UNIX;
	std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
	if (::bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0 ||
	    ::listen(fd, 16) < 0) {
		(void)std::fprintf(stderr, "vrnic-fabric: %s: %s\n", path.c_str(), std::strerror(errno));
		(void)::close(fd);
		return -1;
	}
	unix_paths_.push_back(path);
	return fd;
}

int Server::listen_tcp(uint16_t port)
{
	const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	const int one = 1;
	(void)::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	// What a port's UNIX socket holds (net.core.wmem_default), not the
	// megabytes TCP autotuning would: frames in flight past a pause land
	// in the PFC headroom.  Connections accepted here inherit it.
	const int buf = 212992 / 2;	// the kernel doubles it
	(void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	(void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	sockaddr_in sa{};
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	if (::inet_pton(AF_INET, opt_.tcp_bind.c_str(), &sa.sin_addr) != 1 ||
	    ::bind(fd, reinterpret_cast<sockaddr *>(&sa), sizeof(sa)) < 0 ||
	    ::listen(fd, 16) < 0) {
		(void)std::fprintf(stderr, "vrnic-fabric: tcp %s:%u: %s\n", opt_.tcp_bind.c_str(),
			     port, std::strerror(errno));
		(void)::close(fd);
		return -1;
	}
	return fd;
}

Server::Conn *Server::add(Kind kind, int fd, size_t host)
{
	auto c = std::make_unique<Conn>();
	c->kind = kind;
	c->fd = fd;
	c->host = host;
	epoll_event ev{};
	ev.events = EPOLLIN;
	ev.data.ptr = c.get();
	if (::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) < 0) {
		(void)::close(fd);
		return nullptr;
	}
	conns_.push_back(std::move(c));
	return conns_.back().get();
}

bool Server::open()
{
	ep_ = ::epoll_create1(EPOLL_CLOEXEC);
	timer_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	sigset_t set;
	(void)sigemptyset(&set);
	(void)sigaddset(&set, SIGINT);
	(void)sigaddset(&set, SIGTERM);
	(void)sigprocmask(SIG_BLOCK, &set, nullptr);
	(void)::signal(SIGPIPE, SIG_IGN);	// a peer gone mid-write is EPIPE
	sig_ = ::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	if (ep_ < 0 || timer_ < 0 || sig_ < 0)
		return false;
	for (auto [fd, kind] : {std::pair{timer_, Kind::Timer}, std::pair{sig_, Kind::Signal}}) {
		auto c = std::make_unique<Conn>();
		c->kind = kind;
		c->fd = -1;	// owned by the server, not the Conn
		epoll_event ev{};
		ev.events = EPOLLIN;
		ev.data.ptr = c.get();
		if (::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) < 0)
			return false;
		conns_.push_back(std::move(c));
	}
	for (size_t h = 0; h < fabric_->host_count(); h++) {
		const HostConfig &hc = fabric_->host(h);
		const int fd = listen_unix(opt_.dir + "/" + hc.unix_path);
		if (fd < 0 || !add(Kind::HostListen, fd, h))
			return false;
		if (hc.tcp_port) {
			const int t = listen_tcp(*hc.tcp_port);
			if (t < 0 || !add(Kind::HostListen, t, h))
				return false;
		}
	}
	const int cfd = listen_unix(opt_.control);
	if (cfd < 0 || !add(Kind::ControlListen, cfd, 0))
		return false;
	if (!opt_.telemetry.empty()) {
		telemetry_ = std::fopen(opt_.telemetry.c_str(), "w");
		if (!telemetry_) {
			(void)std::fprintf(stderr, "vrnic-fabric: %s: %s\n", opt_.telemetry.c_str(),
				     std::strerror(errno));
			return false;
		}
		if (csv_)
			(void)std::fputs(kTelemetryCsvHeader, telemetry_);
	}
	return true;
}

void Server::close_conn(Conn *c)
{
	if (c->fd < 0)
		return;
	(void)::epoll_ctl(ep_, EPOLL_CTL_DEL, c->fd, nullptr);
	(void)::close(c->fd);
	c->fd = -1;
	c->closing = true;
	if (c->kind == Kind::Host && host_conn_[c->host] == c) {
		// What it sent before it went reaches the model first.
		if (backdate_.staged(c->host))
			flush_backdated();
		host_conn_[c->host] = nullptr;
		fabric_->set_host_up(c->host, false);
	}
}

void Server::accept_on(Conn *l)
{
	for (int i = 0; i < 16; i++) {
		const int fd = ::accept4(l->fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (conns_.size() >= kMaxConns) {
			(void)::close(fd);
			continue;
		}
		if (l->kind == Kind::ControlListen) {
			const auto live = std::count_if(conns_.begin(), conns_.end(), [](const auto &k) {
				return k->kind == Kind::Control && k->fd >= 0;
			});
			if (static_cast<size_t>(live) >= kMaxControl)
				(void)::close(fd);
			else
				add(Kind::Control, fd, 0);
			continue;
		}
		const int one = 1;
		(void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));	// fails on AF_UNIX
		// A reconnecting VM replaces the connection it had.
		if (Conn *old = host_conn_[l->host])
			close_conn(old);
		Conn *c = add(Kind::Host, fd, l->host);
		if (!c)
			continue;
		c->rx = std::make_unique<StreamDecoder>(cfg_.max_frame);
		host_conn_[l->host] = c;
		fabric_->set_host_up(l->host, true);
	}
}

void Server::read_host(Conn *c)
{
	std::vector<uint8_t> &buf = rbuf_;
	size_t budget = opt_.rx_budget;
	while (budget > 0 && c->fd >= 0) {
		const size_t want = std::min(buf.size(), budget);
		const ssize_t n = ::read(c->fd, buf.data(), want);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			close_conn(c);
			return;
		}
		if (n < 0)
			return;
		budget -= static_cast<size_t>(n);
		const uint64_t t = now();
		// Stalled since the turn began (the host stopped running the
		// switch after epoll_wait returned): this read holds what came
		// meanwhile.
		if (opt_.backdate_ns && !backdate_.active() && t > turn_start_ + opt_.backdate_ns)
			begin_late(turn_start_, t);
		c->rx->feed(std::span(buf).first(static_cast<size_t>(n)),
			    [&](StreamDecoder::Event ev, std::span<const uint8_t> frame) {
				    if (ev == StreamDecoder::Event::Frame) {
					    if (backdate_.active() && frame.size() < 14) {
						    fabric_->count_host_drop(c->host, Drop::Truncated);
					    } else if (backdate_.active()) {
						    backdate_.add(c->host, frame);
						    backdated_++;
					    } else {
						    model_receive(c->host, frame, t);
					    }
					    return;
				    }
				    // Counted; its bytes are skipped, the stream
				    // stays in step.
				    framing_errors_++;
				    fabric_->count_host_drop(c->host, ev == StreamDecoder::Event::Empty
									      ? Drop::Truncated
									      : Drop::Oversized);
			    });
		// A short read drained the socket: epoll (level-triggered)
		// reports the next bytes, no read() needs to find EAGAIN.
		if (static_cast<size_t>(n) < want)
			break;
	}
}

// A frame out to a host port: its header and its buffer, not a copy; the
// buffer goes back to the model once written, or at once if dropped.
void Server::deliver(size_t host, Bytes &&frame)
{
	Conn *c = host < host_conn_.size() ? host_conn_[host] : nullptr;
	if (!c || c->fd < 0 || c->tx_bytes + 4 + frame.size() > opt_.tx_limit) {
		fabric_->count_host_drop(host, Drop::Backlog);
		fabric_->recycle(std::move(frame));
		return;
	}
	Out out{StreamDecoder::header(static_cast<uint32_t>(frame.size())), 4, std::move(frame)};
	queue_out(c, std::move(out), opt_.tx_limit);
}

void Server::queue_out(Conn *c, Out out, size_t limit)
{
	if (out.size() == 0)
		return;	// nothing to write (a writev of it would make no progress)
	if (c->tx_bytes + out.size() > limit) {
		close_conn(c);	// a control client that does not read
		return;
	}
	c->tx_bytes += out.size();
	c->tx.push_back(std::move(out));
	// Written once per loop turn, many frames to one writev.
	if (!c->dirty) {
		c->dirty = true;
		dirty_.push_back(c);
	}
}

void Server::flush(Conn *c)
{
	while (c->fd >= 0 && !c->tx.empty()) {
		std::array<iovec, 128> iov{};
		size_t cnt = 0;
		size_t skip = c->tx_off;
		for (auto it = c->tx.begin(); it != c->tx.end() && cnt + 2 <= iov.size(); ++it) {
			if (skip < it->head_len)
				iov[cnt++] = {it->head.data() + skip, it->head_len - skip};
			const size_t d = skip > it->head_len ? skip - it->head_len : 0;
			if (d < it->data.size())
				iov[cnt++] = {it->data.data() + d, it->data.size() - d};
			skip = 0;
		}
		const ssize_t n = ::writev(c->fd, iov.data(), static_cast<int>(cnt));
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			close_conn(c);
			return;
		}
		auto left = static_cast<size_t>(n);
		c->tx_bytes -= left;
		while (left > 0) {
			const size_t rest = c->tx.front().size() - c->tx_off;
			if (left >= rest) {
				left -= rest;
				if (c->kind == Kind::Host)	// not control replies
					fabric_->recycle(std::move(c->tx.front().data));
				c->tx.pop_front();
				c->tx_off = 0;
			} else {
				c->tx_off += left;
				left = 0;
			}
		}
	}
	update_events(c);
}

void Server::update_events(Conn *c)
{
	if (c->fd < 0)
		return;
	const bool want = !c->tx.empty();
	if (want == c->want_out)
		return;
	c->want_out = want;
	epoll_event ev{};
	ev.events = EPOLLIN | (want ? EPOLLOUT : 0U);
	ev.data.ptr = c;
	(void)::epoll_ctl(ep_, EPOLL_CTL_MOD, c->fd, &ev);
}

void Server::read_control(Conn *c)
{
	std::array<char, 8192> buf{};
	const ssize_t n = ::read(c->fd, buf.data(), buf.size());
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		close_conn(c);
		return;
	}
	if (n < 0)
		return;
	for (ssize_t i = 0; i < n && c->fd >= 0; i++) {
		if (buf[static_cast<size_t>(i)] == '\n') {
			const std::string line = std::move(c->line);
			c->line.clear();
			control_line(c, line);
		} else if (c->line.size() < kControlLine) {
			c->line.push_back(buf[static_cast<size_t>(i)]);
		} else {
			control_errors_++;
			const std::string e = R"({"ok":false,"error":"line too long"})"
					      "\n";
			queue_out(c, std::vector<uint8_t>(e.begin(), e.end()), kControlOut);
			flush(c);
			close_conn(c);
		}
	}
}

// One JSON request per line, one JSON reply per line:
//   {"cmd":"counters"}  {"cmd":"sample"}  {"cmd":"hosts"}  {"cmd":"ping"}
//   {"cmd":"set","link":NAME,"dir":"a_to_b"|"b_to_a"|"both","params":{...}}
//   {"cmd":"inject","action":"drop","qpn":N,"psn":N,"nth":N,"host":NAME}
void Server::control_line(Conn *c, const std::string &line)
{
	nlohmann::json reply;
	flush_backdated();	// (none staged: run() reads control after)
	const uint64_t t = now();
	model_advance(t);
	const nlohmann::json req = nlohmann::json::parse(line, nullptr, false);
	const std::string cmd = req.is_object() && req.contains("cmd") && req["cmd"].is_string()
					? req["cmd"].get<std::string>()
					: "";
	if (cmd == "ping") {
		reply = {{"ok", true}, {"t_ns", t}};
	} else if (cmd == "counters") {
		reply = fabric_->counters(t);
		reply["ok"] = true;
		reply["framing_errors"] = framing_errors_;
		reply["control_errors"] = control_errors_;
		reply["late_turns"] = late_turns_;
		reply["backdated_frames"] = backdated_;
	} else if (cmd == "sample") {
		reply = fabric_->sample(t);
		reply["ok"] = true;
	} else if (cmd == "hosts") {
		nlohmann::json hosts = nlohmann::json::array();
		for (size_t h = 0; h < fabric_->host_count(); h++) {
			const HostConfig &hc = fabric_->host(h);
			nlohmann::json e = {{"name", hc.name}, {"switch", hc.switch_name},
					    {"unix", opt_.dir + "/" + hc.unix_path},
					    {"up", fabric_->host_up(h)}};
			if (hc.tcp_port)
				e["tcp"] = *hc.tcp_port;
			hosts.push_back(e);
		}
		reply = {{"ok", true}, {"hosts", hosts}};
	} else if (cmd == "set") {
		const std::string link = req.contains("link") && req["link"].is_string()
						 ? req["link"].get<std::string>()
						 : "";
		const std::string dir = req.contains("dir") && req["dir"].is_string()
						? req["dir"].get<std::string>()
						: "both";
		std::string err;
		if (!req.contains("params"))
			err = "set needs params";
		for (const char *d : {"a_to_b", "b_to_a"}) {
			if (!err.empty() || (dir != "both" && dir != d))
				continue;
			LinkParams *p = fabric_->link_params(link, d);
			err = p ? update_link(req["params"], *p) : "no link \"" + link + "\"";
		}
		if (dir != "both" && dir != "a_to_b" && dir != "b_to_a")
			err = "dir is a_to_b, b_to_a or both";
		reply = err.empty() ? nlohmann::json{{"ok", true}}
				    : nlohmann::json{{"ok", false}, {"error", err}};
	} else if (cmd == "inject") {
		nlohmann::json body = req;
		body.erase("cmd");
		Injection inj;
		const std::string err = parse_injection(body, inj);
		if (err.empty())
			fabric_->add_injection(inj);
		reply = err.empty() ? nlohmann::json{{"ok", true}}
				    : nlohmann::json{{"ok", false}, {"error", err}};
	} else {
		control_errors_++;
		reply = {{"ok", false}, {"error", req.is_discarded() ? "not JSON" : "unknown cmd"}};
	}
	const std::string out = dump(reply) + "\n";
	queue_out(c, std::vector<uint8_t>(out.begin(), out.end()), kControlOut);
}

void Server::arm_timer()
{
	const uint64_t t = now();
	uint64_t next = fabric_->next_event();
	if (telemetry_)
		next = std::min(next, next_sample_);
	// The first sample (next_sample_ 0) is due at once, not late.
	due_ = telemetry_ && next_sample_ == 0 ? kNever : next;
	const uint64_t at = next == kNever ? 0 : t0_ + std::max(next, t + 1);
	if (at == timer_at_)
		return;	// armed for that already: one syscall less per turn
	timer_at_ = at;
	itimerspec its{};
	its.it_value.tv_sec = static_cast<time_t>(at / 1'000'000'000ULL);
	its.it_value.tv_nsec = static_cast<long>(at % 1'000'000'000ULL);
	(void)::timerfd_settime(timer_, TFD_TIMER_ABSTIME, &its, nullptr);
}

void Server::write_counters(uint64_t t)
{
	if (!telemetry_)
		return;
	write_record({{"t_ns", t}, {"counters", fabric_->counters(t)}});
}

void Server::write_record(const nlohmann::json &record)
{
	const std::string text = csv_ ? telemetry_csv(record) : dump(record) + "\n";
	(void)std::fwrite(text.data(), 1, text.size(), telemetry_);
	(void)std::fflush(telemetry_);
}

void Server::telemetry_tick(uint64_t t)
{
	if (!telemetry_ || t < next_sample_)
		return;
	nlohmann::json s = fabric_->sample(t);
	// A whole interval late: the host did not run the switch in time, and
	// frames that waited in the sockets arrive together now.  Say so, so
	// that a queue spike can be told from the fabric's own behaviour.
	const uint64_t late = t - next_sample_;
	if (next_sample_ != 0 && late >= cfg_.sample_ns)
		s["late_ns"] = late;
	// Empty samples at most once a second: the file stays small when idle.
	if (!s["q"].empty() || s.contains("late_ns") || last_written_ == 0 ||
	    t - last_written_ >= 1'000'000'000ULL) {
		write_record(s);
		last_written_ = std::max<uint64_t>(t, 1);
	}
	// Every counter, once a second (and at the end, from run()).
	if (t >= next_counters_) {
		write_counters(t);
		next_counters_ = t + 1'000'000'000ULL;
	}
	next_sample_ = t + cfg_.sample_ns;
}

void Server::model_advance(uint64_t t)
{
	floor_ = std::max(floor_, t);
	fabric_->advance(floor_);
}

void Server::model_receive(size_t host, std::span<const uint8_t> frame, uint64_t t)
{
	floor_ = std::max(floor_, t);
	fabric_->receive(host, frame, floor_);
}

// A late turn: the frames read from now on arrived over (from, to].
void Server::begin_late(uint64_t from, uint64_t to)
{
	late_turns_++;
	backdate_.begin(std::max(from, floor_), to);
}

// The frames a late turn read, to the model at their spread-out times.
// Nothing a peer sent may stop the switch: an exception here loses the
// rest of this turn's frames (counted), not the daemon.
void Server::flush_backdated()
{
	if (!backdate_.active())
		return;
	try {
		backdate_.drain(floor_, [this](size_t host, std::span<const uint8_t> frame,
					       uint64_t t) { model_receive(host, frame, t); });
	} catch (const std::exception &ex) {
		(void)std::fprintf(stderr, "vrnic-fabric: %s\n", ex.what());
		framing_errors_++;
	}
}

int Server::run()
{
	std::array<epoll_event, 64> evs{};
	while (!stop_) {
		arm_timer();
		const int n = ::epoll_wait(ep_, evs.data(), static_cast<int>(evs.size()), 1000);
		if (n < 0 && errno != EINTR)
			return 1;
		// Woken well after the model's next event was due: the host did
		// not run the switch from then on, and what the sockets hold
		// arrived meanwhile.
		const uint64_t woke = now();
		const uint64_t bd = opt_.backdate_ns;
		turn_start_ = woke;
		const bool woke_late = bd && due_ != kNever && woke > due_ + bd;
		// A turn right after a late or stalled one: the host may have
		// stopped the switch after epoll_wait returned, so that what came
		// meanwhile is only read now.
		const bool carried = carry_from_ != kNever && woke <= carry_until_;
		uint64_t late_from = woke_late ? due_ : kNever;
		if (carried)
			late_from = std::min(late_from, carry_from_);
		carry_from_ = kNever;
		if (late_from != kNever)
			begin_late(late_from, woke);
		// Host ports first; control requests (which move the model to
		// now) after this turn's frames reached it.
		controls_.clear();
		for (int i = 0; i < n; i++) {
			auto *c = static_cast<Conn *>(evs[static_cast<size_t>(i)].data.ptr);
			const uint32_t e = evs[static_cast<size_t>(i)].events;
			try {
				switch (c->kind) {
				case Kind::Timer: {
					uint64_t ticks = 0;
					[[maybe_unused]] auto r = ::read(timer_, &ticks, sizeof(ticks));
					timer_at_ = 0;	// fired: disarmed
					break;
				}
				case Kind::Signal:
					stop_ = true;
					break;
				case Kind::HostListen:
				case Kind::ControlListen:
					accept_on(c);
					break;
				case Kind::Host:
				case Kind::Control:
					if (c->fd >= 0 && (e & EPOLLOUT))
						flush(c);
					if (c->fd >= 0 && (e & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
						if (c->kind == Kind::Host)
							read_host(c);
						else
							controls_.push_back(c);
					}
					break;
				}
			} catch (const std::exception &ex) {
				// Nothing a peer sends may stop the switch: drop
				// that connection and go on.
				(void)std::fprintf(stderr, "vrnic-fabric: %s\n", ex.what());
				if (c->kind == Kind::Host || c->kind == Kind::Control)
					close_conn(c);
			}
		}
		flush_backdated();
		for (Conn *c : controls_) {
			try {
				if (c->fd >= 0)
					read_control(c);
			} catch (const std::exception &ex) {
				(void)std::fprintf(stderr, "vrnic-fabric: %s\n", ex.what());
				close_conn(c);
			}
		}
		const uint64_t t = now();
		if (bd && !carried && (woke_late || t > woke + bd)) {
			// Late or stalled: what came meanwhile may only be read in
			// the next turn (at once, if there is any), and the model
			// waits for it there instead of running ahead of it.  Never
			// twice in a row, so the model always catches up.
			carry_from_ = woke_late ? due_ : woke;
			carry_until_ = t + bd;
		} else {
			model_advance(t);
		}
		telemetry_tick(t);
		for (Conn *c : dirty_) {
			c->dirty = false;
			flush(c);
		}
		dirty_.clear();
		std::erase_if(conns_, [](const auto &c) { return c->closing; });
	}
	write_counters(now());
	return 0;
}

} // namespace vrnic::fabric

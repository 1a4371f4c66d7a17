// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-fabric's event loop: one epoll set for the host ports (QEMU's
// stream netdev framing on AF_UNIX and TCP), the control sockets, a timerfd
// for the model's next event and a signalfd for a clean stop.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "backdate.hpp"
#include "fabric.hpp"
#include "frame_pool.hpp"
#include "stream.hpp"

namespace vrnic::fabric {

struct ServerOptions {
	std::string dir = ".";		// where the host sockets live
	std::string control;		// control socket path ("" = dir/control.sock)
	std::string tcp_bind = "127.0.0.1";
	std::string telemetry;		// depths and counters ("" = none)
	std::string telemetry_format;	// "jsonl" or "csv"; "" = by the name
	size_t tx_limit = 4 << 20;	// bytes queued towards one slow host
	size_t rx_budget = 256 << 10;	// bytes read from one port per wake-up
	// A turn that starts this much after the model's next event was due
	// spreads the frames it reads over the time since the last turn
	// (backdate.hpp); 0: never.
	uint64_t backdate_ns = 200'000;
};

class Server : public FrameSink {
public:
	Server(TopologyConfig cfg, ServerOptions opt);
	~Server() override;
	Server(const Server &) = delete;
	Server &operator=(const Server &) = delete;

	// Open the sockets; false with a message on stderr if one fails.
	bool open();
	// Run until SIGINT or SIGTERM; returns the exit status.
	int run();

private:
	enum class Kind : uint8_t { HostListen, Host, ControlListen, Control, Timer, Signal };
	// Bytes to write: a frame's stream header (head_len 4) and the
	// frame's own buffer, or a control reply (head_len 0).
	struct Out {
		std::array<uint8_t, 4> head{};
		uint8_t head_len = 0;
		std::vector<uint8_t> data;
		[[nodiscard]] size_t size() const { return head_len + data.size(); }
	};
	struct Conn {
		Kind kind = Kind::Host;
		int fd = -1;
		size_t host = 0;
		// Host ports: the stream framing state.
		std::unique_ptr<StreamDecoder> rx;
		std::deque<Out> tx;
		size_t tx_off = 0;		// into tx.front(), its head first
		size_t tx_bytes = 0;
		bool want_out = false;
		bool dirty = false;		// in dirty_: has bytes to write
		// Control: a line being read.
		std::string line;
		bool closing = false;
	};

	void deliver(size_t host, Bytes &&frame) override;
	uint64_t now() const;
	int listen_unix(const std::string &path);
	int listen_tcp(uint16_t port);
	Conn *add(Kind kind, int fd, size_t host);
	void close_conn(Conn *c);
	void accept_on(Conn *l);
	void read_host(Conn *c);
	void read_control(Conn *c);
	void control_line(Conn *c, const std::string &line);
	void queue_out(Conn *c, Out out, size_t limit);
	void queue_out(Conn *c, std::vector<uint8_t> bytes, size_t limit)
	{
		queue_out(c, Out{{}, 0, std::move(bytes)}, limit);
	}
	void flush(Conn *c);
	void update_events(Conn *c);
	void arm_timer();
	void telemetry_tick(uint64_t t);
	void write_record(const nlohmann::json &record);
	void write_counters(uint64_t t);
	// The model's time moves on to t (never back): advance() or a frame.
	void model_advance(uint64_t t);
	void model_receive(size_t host, std::span<const uint8_t> frame, uint64_t t);
	void flush_backdated();

	TopologyConfig cfg_;
	ServerOptions opt_;
	std::unique_ptr<Fabric> fabric_;
	int ep_ = -1;
	int timer_ = -1;
	uint64_t timer_at_ = 0;		// what timer_ is armed for (0: disarmed)
	uint64_t due_ = kNever;		// model time of the next event or sample
	uint64_t floor_ = 0;		// latest time handed to the model
	uint64_t turn_start_ = 0;	// when this turn's epoll_wait returned
	// The last turn was late or stalled from carry_from_: a turn that
	// starts by carry_until_ reads what came meanwhile.
	uint64_t carry_from_ = kNever;
	uint64_t carry_until_ = 0;
	void begin_late(uint64_t from, uint64_t to);
	std::vector<Conn *> controls_;	// control sockets to read this turn
	Backdate backdate_;
	uint64_t late_turns_ = 0;	// turns that back-dated their frames
	uint64_t backdated_ = 0;	// frames they back-dated
	int sig_ = -1;
	uint64_t t0_ = 0;
	std::vector<std::unique_ptr<Conn>> conns_;
	std::vector<Conn *> dirty_;		// to flush at the end of a turn
	std::vector<Conn *> host_conn_;		// the live connection per host
	std::vector<std::string> unix_paths_;	// to unlink at exit
	std::vector<uint8_t> rbuf_ = std::vector<uint8_t>(65536);
	FILE *telemetry_ = nullptr;
	bool csv_ = false;
	uint64_t next_sample_ = 0;
	uint64_t last_written_ = 0;
	uint64_t next_counters_ = 0;
	bool stop_ = false;
	uint64_t framing_errors_ = 0;
	uint64_t control_errors_ = 0;
};

} // namespace vrnic::fabric

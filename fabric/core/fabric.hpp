// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-fabric's switch model, with no sockets and no clock of its own: the
// caller hands in frames and the current time in nanoseconds, runs the
// events that are due with advance(), and receives the frames for the hosts
// through a FrameSink.  GoogleTest drives it in simulated time; the daemon
// drives it with CLOCK_MONOTONIC.  See Documentation/fabric.rst.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "config.hpp"
#include "frame.hpp"
#include "frame_pool.hpp"
#include "rng.hpp"

namespace vrnic::fabric {

class FrameSink {
public:
	virtual ~FrameSink() = default;
	// A frame leaves the fabric towards host port `host`, its buffer
	// handed over (a sink that queues it needs no copy, and gives it back
	// with Fabric::recycle() once written).  Called from advance() or
	// receive(); may call only Fabric::count_host_drop() and recycle().
	virtual void deliver(size_t host, Bytes &&frame) = 0;
};

enum class Drop : uint8_t {
	Truncated,	// shorter than its headers
	Malformed,	// impossible header fields, multicast source
	Oversized,	// longer than max_frame
	Buffer,		// shared buffer or dynamic threshold (lossy)
	QueueLimit,	// the egress port's queue_limit (lossy)
	Headroom,	// lossless priority with its headroom used up
	Loss,		// impairment: Bernoulli or Gilbert-Elliott
	Inject,		// deterministic injection
	NoRoute,	// hairpin or no path
	PortDown,	// host port with nobody attached
	LinkOverflow,	// more than max_inflight bytes on a link
	Backlog,	// the daemon's socket to a slow host is full
	Count
};
const char *drop_name(Drop d);

// RED: 0 up to kmin bytes in the queue, pmax * (q - kmin) / (kmax - kmin)
// between, 1 from kmax on.
double ecn_probability(const EcnConfig &c, uint64_t queue_bytes);

inline constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

struct QueueStats {
	uint64_t rx_packets = 0;	// entered at this port with this priority
	uint64_t rx_bytes = 0;
	uint64_t tx_packets = 0;	// left this port from this queue
	uint64_t tx_bytes = 0;
	std::array<uint64_t, static_cast<size_t>(Drop::Count)> drops{};
	uint64_t ce_marked = 0;
	uint64_t pfc_tx = 0;		// XOFF/XON frames sent for this priority
	uint64_t pfc_rx = 0;		// PFC frames received naming it
	uint64_t pfc_watchdog = 0;	// pauses broken by the watchdog
	uint64_t depth_max = 0;		// bytes
	uint64_t headroom_max = 0;	// bytes of this ingress' headroom in use, at most
	uint64_t impair_duplicated = 0;
	uint64_t impair_corrupted = 0;
	uint64_t impair_reordered = 0;
};

class Fabric {
public:
	Fabric(TopologyConfig cfg, FrameSink &sink);

	// A frame from host port `host`, at time `now` (ns, non-decreasing).
	void receive(size_t host, std::span<const uint8_t> frame, uint64_t now);
	// Run every event due at or before `now`.
	void advance(uint64_t now);
	// When advance() next has something to do; kNever if nothing.
	uint64_t next_event() const;

	void set_host_up(size_t host, bool up);
	bool host_up(size_t host) const;
	// A frame the daemon dropped at host port `host` before or after the
	// model (framing errors, a slow host's full socket).  A FrameSink may
	// call it from deliver().
	void count_host_drop(size_t host, Drop why);
	// A buffer deliver() handed over, once its bytes are written or
	// dropped: the next frame received takes it instead of allocating.
	void recycle(Bytes &&buf) { pool_.give(std::move(buf)); }

	size_t host_count() const { return hosts_.size(); }
	const HostConfig &host(size_t h) const { return cfg_.hosts[h]; }
	// -1 if there is no such host.
	long host_index(const std::string &name) const;

	// The parameters of one link direction, for run-time changes; nullptr
	// if no link has that name.  "a_to_b" or "b_to_a".
	LinkParams *link_params(const std::string &link, const std::string &dir);
	void add_injection(const Injection &inj);

	// Telemetry.
	const QueueStats &stats(const std::string &sw, size_t port, int prio) const;
	uint64_t queue_bytes(const std::string &sw, size_t port, int prio) const;
	uint64_t paused_ns(const std::string &sw, size_t port, int prio, uint64_t now) const;
	uint64_t buffer_used(const std::string &sw) const;
	nlohmann::json counters(uint64_t now) const;
	nlohmann::json sample(uint64_t now) const;	// queue depths
	// The port of switch `sw` that leads to host or switch `peer`.
	long port_to(const std::string &sw, const std::string &peer) const;
	const TopologyConfig &config() const { return cfg_; }

private:
	struct Packet {
		Bytes data;
		FrameInfo info;
		uint8_t prio = 0;
		uint16_t in_port = 0;
	};
	struct Queue {
		std::deque<Packet> q;
		uint64_t bytes = 0;
		int64_t deficit = 0;
		uint64_t paused_until = 0;
		uint64_t pause_start = 0;
		uint64_t paused_closed = 0;	// ns of pauses that have ended
		uint64_t wd_until = 0;		// watchdog: ignore PFC until
	};
	struct Port {
		std::string peer;		// host or switch name
		long host = -1;			// host index, or -1
		uint32_t peer_sw = 0;		// peer switch and its port
		uint16_t peer_port = 0;
		LinkParams *out = nullptr;	// this port -> peer
		LinkParams *in = nullptr;	// peer -> this port
		Mac mac{};			// source of our PFC frames
		std::array<Queue, kPriorities> queues;
		std::array<QueueStats, kPriorities> stats;
		double tokens = 0;
		uint64_t token_time = 0;
		uint64_t kick_at = kNever;
		unsigned dwrr = 0;		// whose turn it is
		bool dwrr_turn = false;		// its quantum was added
		// Ingress accounting (the HPCC switch-mmu model).
		std::array<uint64_t, kPriorities> ingress{};
		std::array<uint64_t, kPriorities> hdrm{};
		std::array<bool, kPriorities> xoff{};
		std::array<uint64_t, kPriorities> refresh_at{};	// next XOFF resend
		uint64_t inflight = 0;		// bytes on the link out
		Rng rng;			// impairments on the link out
		bool ge_bad = false;
		Rng in_rng;			// impairments host -> switch
		bool in_ge_bad = false;
	};
	struct Switch {
		const SwitchConfig *cfg = nullptr;
		std::vector<Port> ports;
		std::unordered_map<uint64_t, uint16_t> macs;
		uint64_t used = 0;		// bytes in the buffer
		uint64_t shared = 0;		// ingress bytes above reserve
		uint64_t headroom_total = 0;
		uint64_t reserve_total = 0;
		std::vector<std::vector<uint16_t>> next_hops;	// per switch
		std::vector<uint16_t> tree;	// inter-switch ports of the flood tree
		uint64_t spray = 0;
		Rng rng;			// ECN marking
	};
	enum class Ev : uint8_t { Arrive, Deliver, Kick, PfcRefresh };
	struct Event {
		uint64_t t = 0;
		uint64_t seq = 0;
		Ev kind = Ev::Kick;
		uint32_t sw = 0;
		uint16_t port = 0;
		uint8_t prio = 0;
		Bytes data;
		bool operator>(const Event &o) const
		{
			return t != o.t ? t > o.t : seq > o.seq;
		}
	};
	struct InjectionState {
		Injection rule;
		uint64_t seen = 0;
		bool fired = false;
	};

	void push(Event ev);
	void ingress(uint32_t sw, uint16_t port, Bytes data, uint64_t now);
	void handle_pfc(uint32_t sw, uint16_t port, const Pfc &pfc, uint64_t now);
	void forward(uint32_t sw, uint16_t in_port, Packet pkt, uint64_t now);
	void enqueue(uint32_t sw, uint16_t out, Packet pkt, uint64_t now);
	void try_tx(uint32_t sw, uint16_t port, uint64_t now);
	int pick_queue(Switch &s, Port &p, uint64_t now, uint64_t &wake);
	void transmit(uint32_t sw, uint16_t port, Packet pkt, uint64_t now);
	void schedule_kick(uint32_t sw, uint16_t port, uint64_t t);
	void send_pfc(uint32_t sw, uint16_t port, int prio, bool xoff, uint64_t now);
	uint64_t pause_ns(const Port &p, uint16_t quanta) const;
	uint64_t pfc_threshold(const Switch &s, const Port &p) const;
	uint64_t shared_of(const Switch &s, uint64_t ingress_bytes) const;
	void ingress_add(Switch &s, Port &p, int prio, uint64_t size);
	void ingress_remove(Switch &s, Port &p, int prio, uint64_t size);
	void check_pfc(uint32_t sw, uint16_t port, int prio, uint64_t now);
	bool impair(const Impairment &imp, Rng &rng, bool &ge_bad, Packet &pkt,
		    QueueStats &st, uint64_t &extra_delay, bool &duplicate);
	bool injected(size_t host, Packet &pkt, QueueStats &st);
	void count_drop(Port &p, int prio, Drop why, size_t bytes);
	const Port &port_ref(const std::string &sw, size_t port) const;

	TopologyConfig cfg_;
	FrameSink &sink_;
	std::vector<Switch> switches_;
	struct HostRef {
		uint32_t sw = 0;
		uint16_t port = 0;
		bool up = false;
	};
	std::vector<HostRef> hosts_;
	std::unordered_map<uint64_t, uint32_t> directory_;	// MAC -> host
	std::vector<Event> events_;	// a min-heap
	uint64_t seq_ = 0;
	uint64_t now_ = 0;
	std::vector<InjectionState> injections_;
	// Buffers of frames delivered and written, for frames received.
	FramePool pool_{size_t{4} << 20};
};

} // namespace vrnic::fabric

// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-fabric: the topology and its parameters (Documentation/fabric.rst).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "frame.hpp"

namespace vrnic::fabric {

// RED-style marking of one egress queue: below kmin never, above kmax
// always, linearly up to pmax in between (bytes of that queue).
struct EcnConfig {
	bool enabled = false;
	uint64_t kmin = 0;
	uint64_t kmax = 0;
	double pmax = 0.0;
};

struct PfcConfig {
	uint8_t priorities = 0;		// bit i: priority i is lossless
	uint64_t xoff = 0;		// 0: the dynamic threshold
	uint64_t xon = 0;		// static XON (with a static XOFF)
	uint64_t resume_offset = 3072;	// dynamic: resume this far below
	unsigned alpha_shift = 1;	// dynamic: free shared >> shift
	uint64_t headroom = 65536;	// per ingress port, for in-flight bytes
	uint16_t quanta = 0xffff;	// pause time in each XOFF frame
	uint64_t watchdog_ns = 0;	// 0: no watchdog
	uint64_t watchdog_restore_ns = 100'000'000;
};

// Gilbert-Elliott: good/bad states, p: good->bad, r: bad->good, loss
// probability k in good and h in bad.
struct GilbertElliott {
	bool enabled = false;
	double p = 0.0;
	double r = 1.0;
	double k = 0.0;
	double h = 1.0;
};

struct Impairment {
	double loss = 0.0;		// Bernoulli
	GilbertElliott burst;
	double reorder = 0.0;		// probability a packet is held back
	uint64_t reorder_delay_ns = 0;	// by this much
	double duplicate = 0.0;
	double corrupt = 0.0;		// one bit flipped in the payload
	uint64_t jitter_ns = 0;		// uniform extra delay in [0, jitter]
	bool any() const
	{
		return loss > 0 || burst.enabled || reorder > 0 || duplicate > 0 ||
		       corrupt > 0 || jitter_ns > 0;
	}
};

// One direction of a link: what leaves an egress port towards its peer.
struct LinkParams {
	uint64_t rate_bps = 0;		// 0: no limit
	uint64_t burst_bytes = 0;	// token bucket depth; 0: serialisation
	uint64_t delay_ns = 0;
	uint64_t queue_limit = 0;	// bytes per egress port; 0: buffer only
	std::array<EcnConfig, kPriorities> ecn{};
	PfcConfig pfc;
	Impairment impair;
};

enum class Classify : uint8_t { Dscp, Pcp };
enum class Scheduler : uint8_t { Strict, Dwrr };
enum class Multipath : uint8_t { Hash, Spray };

struct SwitchConfig {
	std::string name;
	uint64_t buffer = 4 << 20;		// shared buffer, bytes
	uint64_t reserve = 4096;		// per ingress port and priority
	unsigned egress_alpha_shift = 0;	// lossy DT: free >> shift
	Classify classify = Classify::Dscp;
	std::array<uint8_t, 64> dscp_to_prio{};	// default dscp >> 3
	Scheduler scheduler = Scheduler::Strict;
	std::array<uint32_t, kPriorities> weights{};	// DWRR quanta, bytes
	Multipath multipath = Multipath::Hash;
	uint32_t seed = 1;
	uint32_t mac_table = 4096;
};

enum class EndKind : uint8_t { Switch, Host };

struct LinkConfig {
	std::string name;
	std::string a;		// a switch or a host port name
	std::string b;		// always a switch
	LinkParams a_to_b;
	LinkParams b_to_a;
};

struct HostConfig {
	std::string name;
	std::string switch_name;
	std::string unix_path;	// relative to the socket directory
	std::optional<uint16_t> tcp_port;
};

struct Injection {
	enum class Action : uint8_t { Drop, Ecn, Corrupt };
	Action action = Action::Drop;
	uint32_t qpn = 0;
	uint32_t psn = 0;
	uint32_t nth = 1;		// the n-th matching packet (1-based)
	std::string host;		// only frames entering from this host; "" any
};

struct TopologyConfig {
	std::string name;
	uint64_t seed = 1;
	uint32_t max_frame = 9216;
	uint64_t sample_ns = 1'000'000;
	uint64_t max_inflight = 8 << 20;	// bytes per link direction
	std::vector<SwitchConfig> switches;
	std::vector<HostConfig> hosts;
	std::vector<LinkConfig> links;		// host links included
	std::vector<Injection> injections;
};

// Strict parser: unknown keys, wrong types and out-of-range values are
// errors with a message naming the key.  Never throws.
struct ParseResult {
	std::optional<TopologyConfig> config;
	std::string error;
};
ParseResult parse_topology(const std::string &json_text);

// The pieces the control socket changes at run time: each applies the keys
// present in j on top of what is there and returns "" or an error (then the
// target is left unchanged).  Never throws.
std::string update_impairment(const nlohmann::json &j, Impairment &imp);
std::string update_ecn(const nlohmann::json &j, std::array<EcnConfig, kPriorities> &ecn);
std::string update_pfc(const nlohmann::json &j, PfcConfig &pfc);
std::string update_link(const nlohmann::json &j, LinkParams &p);
std::string parse_injection(const nlohmann::json &j, Injection &inj);

} // namespace vrnic::fabric

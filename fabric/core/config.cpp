// SPDX-License-Identifier: GPL-2.0-or-later
// The topology file: a strict reader on top of nlohmann::json.  Every key
// is known, every value range-checked; an error names the key path.
#include "config.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <initializer_list>
#include <map>
#include <set>
#include <string_view>

namespace vrnic::fabric {

namespace {

using json = nlohmann::json;

// The first error wins; later checks become no-ops.
class Reader {
public:
	std::string error;

	bool ok() const { return error.empty(); }

	void fail(const std::string &where, const std::string &what)
	{
		if (error.empty())
			error = where + ": " + what;
	}

	bool object(const json &j, const std::string &where,
		    std::initializer_list<std::string_view> keys)
	{
		return object_of(j, where, keys);
	}

	template <typename Keys>
	bool object_of(const json &j, const std::string &where, const Keys &keys)
	{
		if (!j.is_object()) {
			fail(where, "must be an object");
			return false;
		}
		for (const auto &[k, v] : j.items()) {
			bool known = false;
			for (auto key : keys)
				known = known || key == k;
			if (!known)
				fail(where, "unknown key \"" + k + "\"");
		}
		return ok();
	}

	// Optional number in [lo, hi], scaled (e.g. µs -> ns) and rounded.
	template <typename T>
	void number(const json &j, const char *key, const std::string &where, T &out,
		    double lo, double hi, double scale = 1.0)
	{
		if (!j.contains(key))
			return;
		const json &v = j.at(key);
		if (!v.is_number()) {
			fail(where + "." + key, "must be a number");
			return;
		}
		const double d = v.get<double>();
		if (!std::isfinite(d) || d < lo || d > hi) {
			fail(where + "." + key, "out of range [" + std::to_string(lo) +
							", " + std::to_string(hi) + "]");
			return;
		}
		if constexpr (std::is_floating_point_v<T>)
			out = static_cast<T>(d * scale);
		else
			out = static_cast<T>(std::llround(d * scale));
	}

	void string(const json &j, const char *key, const std::string &where,
		    std::string &out, bool required)
	{
		if (!j.contains(key)) {
			if (required)
				fail(where + "." + key, "missing");
			return;
		}
		if (!j.at(key).is_string() || j.at(key).get<std::string>().empty() ||
		    j.at(key).get<std::string>().size() > 200) {
			fail(where + "." + key, "must be a non-empty string");
			return;
		}
		// Names end up in file names, logs and CSV: no control characters.
		const auto &v = j.at(key).get_ref<const std::string &>();
		if (std::any_of(v.begin(), v.end(),
				[](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; })) {
			fail(where + "." + key, "must not hold control characters");
			return;
		}
		out = j.at(key).get<std::string>();
	}

	// "nic": settings for the NICs attached to this fabric, which the
	// switch does not use; the harness writes them into every vrnic
	// (scripts/vm.py).  {"cc_params": {NAME: VALUE}}: NAME a file of the
	// driver's debugfs cc_params ([a-z0-9_], at most 64), VALUE an
	// integer 0..2^32-1 or such a name (cc_algo's "dcqcn").
	void nic(const json &j)
	{
		if (!object(j, "nic", {"cc_params"}) || !j.contains("cc_params"))
			return;
		const json &cc = j.at("cc_params");
		if (!cc.is_object() || cc.size() > 64) {
			fail("nic.cc_params", "must be an object of at most 64 knobs");
			return;
		}
		auto word = [](const std::string &w) {
			return !w.empty() && w.size() <= 64 &&
			       std::all_of(w.begin(), w.end(), [](char c) {
				       return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
					      c == '_';
			       });
		};
		for (const auto &[k, v] : cc.items()) {
			const std::string where = "nic.cc_params." + k;
			if (!word(k))
				fail(where, "a knob's name is [a-z0-9_], at most 64 characters");
			else if (v.is_number_unsigned() ? v.get<uint64_t>() > 0xffffffffULL
							: !(v.is_string() && word(v.get<std::string>())))
				fail(where, "must be an integer 0..4294967295 or a name");
		}
	}

	// A list of priorities 0..7 as a bit mask.
	void priorities(const json &j, const char *key, const std::string &where,
			uint8_t &mask)
	{
		if (!j.contains(key))
			return;
		const json &v = j.at(key);
		if (!v.is_array()) {
			fail(where + "." + key, "must be a list of priorities 0..7");
			return;
		}
		uint8_t m = 0;
		for (const json &e : v) {
			if (!e.is_number_integer() || e.get<int64_t>() < 0 ||
			    e.get<int64_t>() >= kPriorities) {
				fail(where + "." + key, "must be a list of priorities 0..7");
				return;
			}
			m |= static_cast<uint8_t>(1U << e.get<int64_t>());
		}
		mask = m;
	}

	void ecn_one(const json &j, const std::string &where,
		     std::array<EcnConfig, kPriorities> &ecn)
	{
		if (!object(j, where, {"kmin", "kmax", "pmax", "priorities", "enabled"}))
			return;
		EcnConfig c;
		c.enabled = true;
		if (j.contains("enabled")) {
			if (!j.at("enabled").is_boolean())
				return fail(where + ".enabled", "must be true or false");
			c.enabled = j.at("enabled").get<bool>();
		}
		uint8_t prios = 0xff;
		number(j, "kmin", where, c.kmin, 0, 1e12);
		number(j, "kmax", where, c.kmax, 0, 1e12);
		number(j, "pmax", where, c.pmax, 0, 1);
		priorities(j, "priorities", where, prios);
		if (c.kmax < c.kmin)
			fail(where, "kmax is below kmin");
		if (!ok())
			return;
		for (int i = 0; i < kPriorities; i++)
			if (prios & (1U << i))
				ecn[static_cast<size_t>(i)] = c;
	}

	// "ecn": one object for several priorities, or a list of them.
	void ecn(const json &j, const std::string &where,
		 std::array<EcnConfig, kPriorities> &ecn)
	{
		if (j.is_array()) {
			for (size_t i = 0; i < j.size(); i++)
				ecn_one(j[i], where + "[" + std::to_string(i) + "]", ecn);
		} else {
			ecn_one(j, where, ecn);
		}
	}

	void pfc(const json &j, const std::string &where, PfcConfig &c)
	{
		if (!object(j, where, {"priorities", "xoff", "xon", "headroom",
				       "resume_offset", "alpha_shift", "quanta",
				       "watchdog_ms", "watchdog_restore_ms"}))
			return;
		priorities(j, "priorities", where, c.priorities);
		number(j, "xoff", where, c.xoff, 0, 1e12);
		number(j, "xon", where, c.xon, 0, 1e12);
		number(j, "headroom", where, c.headroom, 0, 1e12);
		number(j, "resume_offset", where, c.resume_offset, 0, 1e12);
		number(j, "alpha_shift", where, c.alpha_shift, 0, 16);
		number(j, "quanta", where, c.quanta, 1, 65535);
		number(j, "watchdog_ms", where, c.watchdog_ns, 0, 1e6, 1e6);
		number(j, "watchdog_restore_ms", where, c.watchdog_restore_ns, 0, 1e6, 1e6);
		if (c.xoff != 0 && c.xon > c.xoff)
			fail(where, "xon is above xoff");
	}

	void impairment(const json &j, const std::string &where, Impairment &c)
	{
		if (!object(j, where, {"loss", "burst", "reorder", "reorder_delay_us",
				       "duplicate", "corrupt", "jitter_us"}))
			return;
		number(j, "loss", where, c.loss, 0, 1);
		number(j, "reorder", where, c.reorder, 0, 1);
		number(j, "reorder_delay_us", where, c.reorder_delay_ns, 0, 1e7, 1e3);
		number(j, "duplicate", where, c.duplicate, 0, 1);
		number(j, "corrupt", where, c.corrupt, 0, 1);
		number(j, "jitter_us", where, c.jitter_ns, 0, 1e7, 1e3);
		if (j.contains("burst")) {
			const json &b = j.at("burst");
			const std::string w = where + ".burst";
			if (b.is_null()) {
				c.burst = {};
			} else if (object(b, w, {"p", "r", "k", "h"})) {
				c.burst.enabled = true;
				number(b, "p", w, c.burst.p, 0, 1);
				number(b, "r", w, c.burst.r, 0, 1);
				number(b, "k", w, c.burst.k, 0, 1);
				number(b, "h", w, c.burst.h, 0, 1);
			}
		}
	}

	// The keys of one link direction (also the top of a link or its defaults).
	void params(const json &j, const std::string &where, LinkParams &p)
	{
		number(j, "rate_gbps", where, p.rate_bps, 0, 1e4, 1e9);
		number(j, "rate_mbps", where, p.rate_bps, 0, 1e7, 1e6);
		number(j, "burst_bytes", where, p.burst_bytes, 0, 1e9);
		number(j, "delay_us", where, p.delay_ns, 0, 1e7, 1e3);
		number(j, "queue_limit", where, p.queue_limit, 0, 1e12);
		if (j.contains("ecn"))
			ecn(j.at("ecn"), where + ".ecn", p.ecn);
		if (j.contains("pfc"))
			pfc(j.at("pfc"), where + ".pfc", p.pfc);
		if (j.contains("impair"))
			impairment(j.at("impair"), where + ".impair", p.impair);
	}

	static constexpr std::array<std::string_view, 8> kParamKeys = {
		"rate_gbps", "rate_mbps", "burst_bytes", "delay_us", "queue_limit",
		"ecn", "pfc", "impair"};

	// A link body: the shared keys, then per-direction overrides.
	void link_body(const json &j, const std::string &where, LinkConfig &l,
		       std::initializer_list<std::string_view> extra)
	{
		std::vector<std::string_view> keys(kParamKeys.begin(), kParamKeys.end());
		keys.insert(keys.end(), extra);
		keys.emplace_back("a_to_b");
		keys.emplace_back("b_to_a");
		if (!object_of(j, where, keys))
			return;
		params(j, where, l.a_to_b);
		params(j, where, l.b_to_a);
		for (const char *dir : {"a_to_b", "b_to_a"}) {
			if (!j.contains(dir))
				continue;
			const std::string w = where + "." + dir;
			if (object_of(j.at(dir), w, kParamKeys))
				params(j.at(dir), w, dir[0] == 'a' ? l.a_to_b : l.b_to_a);
		}
	}

	void sw(const json &j, const std::string &where, SwitchConfig &s)
	{
		if (!object(j, where, {"name", "buffer", "reserve", "egress_alpha_shift",
				       "classify", "dscp_to_prio", "scheduler", "weights",
				       "multipath", "seed", "mac_table"}))
			return;
		string(j, "name", where, s.name, true);
		number(j, "buffer", where, s.buffer, 16384, 1ULL << 32);
		number(j, "reserve", where, s.reserve, 0, 1 << 20);
		number(j, "egress_alpha_shift", where, s.egress_alpha_shift, 0, 16);
		number(j, "seed", where, s.seed, 0, 4294967295.0);
		number(j, "mac_table", where, s.mac_table, 1, 1 << 20);
		std::string v;
		string(j, "classify", where, v, false);
		if (!v.empty() && v != "dscp" && v != "pcp")
			fail(where + ".classify", R"(must be "dscp" or "pcp")");
		s.classify = v == "pcp" ? Classify::Pcp : Classify::Dscp;
		v.clear();
		string(j, "scheduler", where, v, false);
		if (!v.empty() && v != "strict" && v != "dwrr")
			fail(where + ".scheduler", R"(must be "strict" or "dwrr")");
		s.scheduler = v == "dwrr" ? Scheduler::Dwrr : Scheduler::Strict;
		v.clear();
		string(j, "multipath", where, v, false);
		if (!v.empty() && v != "hash" && v != "spray")
			fail(where + ".multipath", R"(must be "hash" or "spray")");
		s.multipath = v == "spray" ? Multipath::Spray : Multipath::Hash;
		for (size_t i = 0; i < 64; i++)
			s.dscp_to_prio[i] = static_cast<uint8_t>(i >> 3);
		s.weights.fill(1500);
		if (j.contains("dscp_to_prio")) {
			const json &m = j.at("dscp_to_prio");
			if (!m.is_array() || m.size() != 64)
				return fail(where + ".dscp_to_prio", "must list 64 priorities");
			for (size_t i = 0; i < 64; i++) {
				if (!m[i].is_number_integer() || m[i].get<int64_t>() < 0 ||
				    m[i].get<int64_t>() >= kPriorities)
					return fail(where + ".dscp_to_prio", "priorities are 0..7");
				s.dscp_to_prio[i] = static_cast<uint8_t>(m[i].get<int64_t>());
			}
		}
		if (j.contains("weights")) {
			const json &m = j.at("weights");
			if (!m.is_array() || m.size() != kPriorities)
				return fail(where + ".weights", "must list 8 byte quanta");
			for (size_t i = 0; i < kPriorities; i++) {
				if (!m[i].is_number_integer() || m[i].get<int64_t>() < 1 ||
				    m[i].get<int64_t>() > (1 << 24))
					return fail(where + ".weights", "quanta are 1..16777216 bytes");
				s.weights[i] = static_cast<uint32_t>(m[i].get<int64_t>());
			}
		}
	}
};

} // namespace

ParseResult parse_topology(const std::string &text)
{
	ParseResult res;
	const json j = json::parse(text, nullptr, false);
	if (j.is_discarded()) {
		res.error = "not valid JSON";
		return res;
	}
	Reader r;
	TopologyConfig t;
	try {
		if (!r.object(j, "topology", {"name", "seed", "max_frame", "sample_us",
					      "max_inflight", "defaults", "switches",
					      "hosts", "links", "inject", "nic"})) {
			res.error = r.error;
			return res;
		}
		r.string(j, "name", "topology", t.name, false);
		r.number(j, "seed", "topology", t.seed, 0, 1.8e19);
		r.number(j, "max_frame", "topology", t.max_frame, 64, 65535);
		r.number(j, "sample_us", "topology", t.sample_ns, 1, 1e9, 1e3);
		r.number(j, "max_inflight", "topology", t.max_inflight, 65536, 1ULL << 32);
		if (j.contains("nic"))
			r.nic(j.at("nic"));
		LinkConfig defaults;
		if (j.contains("defaults"))
			r.link_body(j.at("defaults"), "defaults", defaults, {});
		std::set<std::string> names;
		auto unique = [&](const std::string &n, const std::string &where) {
			if (!names.insert(n).second)
				r.fail(where, "the name \"" + n + "\" is used twice");
		};
		if (!j.contains("switches") || !j.at("switches").is_array() ||
		    j.at("switches").empty() || j.at("switches").size() > 256)
			r.fail("switches", "must list 1..256 switches");
		for (size_t i = 0; r.ok() && i < j.at("switches").size(); i++) {
			const std::string w = "switches[" + std::to_string(i) + "]";
			SwitchConfig s;
			r.sw(j.at("switches")[i], w, s);
			unique(s.name, w);
			t.switches.push_back(s);
		}
		std::set<std::string> switch_names;
		for (const auto &s : t.switches)
			switch_names.insert(s.name);
		if (r.ok() && (!j.contains("hosts") || !j.at("hosts").is_array() ||
			       j.at("hosts").size() > 1024))
			r.fail("hosts", "must list at most 1024 host ports");
		for (size_t i = 0; r.ok() && i < j.at("hosts").size(); i++) {
			const std::string w = "hosts[" + std::to_string(i) + "]";
			const json &h = j.at("hosts")[i];
			HostConfig hc;
			LinkConfig l = defaults;
			r.link_body(h, w, l, {"name", "switch", "unix", "tcp"});
			r.string(h, "name", w, hc.name, true);
			r.string(h, "switch", w, hc.switch_name, true);
			hc.unix_path = hc.name + ".sock";
			r.string(h, "unix", w, hc.unix_path, false);
			if (hc.unix_path.find('/') != std::string::npos ||
			    hc.unix_path.find("..") != std::string::npos)
				r.fail(w + ".unix", "must be a plain file name");
			if (h.contains("tcp")) {
				uint16_t port = 0;
				r.number(h, "tcp", w, port, 1, 65535);
				hc.tcp_port = port;
			}
			if (r.ok() && !switch_names.contains(hc.switch_name))
				r.fail(w + ".switch", "no switch \"" + hc.switch_name + "\"");
			unique(hc.name, w);
			l.name = hc.name;
			l.a = hc.name;
			l.b = hc.switch_name;
			t.hosts.push_back(hc);
			t.links.push_back(l);
		}
		if (r.ok() && j.contains("links")) {
			if (!j.at("links").is_array() || j.at("links").size() > 4096)
				r.fail("links", "must be a list");
			for (size_t i = 0; r.ok() && i < j.at("links").size(); i++) {
				const std::string w = "links[" + std::to_string(i) + "]";
				const json &lj = j.at("links")[i];
				LinkConfig l = defaults;
				r.link_body(lj, w, l, {"name", "a", "b"});
				r.string(lj, "a", w, l.a, true);
				r.string(lj, "b", w, l.b, true);
				l.name = l.a + "-" + l.b;
				r.string(lj, "name", w, l.name, false);
				if (r.ok() && (!switch_names.contains(l.a) ||
					       !switch_names.contains(l.b)))
					r.fail(w, "links join two switches; hosts have their own entries");
				if (r.ok() && l.a == l.b)
					r.fail(w, "a link joins two different switches");
				unique(l.name, w);
				t.links.push_back(l);
			}
		}
		if (r.ok() && j.contains("inject")) {
			if (!j.at("inject").is_array() || j.at("inject").size() > 1024)
				r.fail("inject", "must be a list");
			for (size_t i = 0; r.ok() && i < j.at("inject").size(); i++) {
				Injection inj;
				const std::string e = parse_injection(j.at("inject")[i], inj);
				if (!e.empty())
					r.fail("inject[" + std::to_string(i) + "]", e);
				t.injections.push_back(inj);
			}
		}
	} catch (const std::exception &e) {
		r.fail("topology", e.what());
	}
	if (!r.ok()) {
		res.error = r.error;
		return res;
	}
	res.config = std::move(t);
	return res;
}

namespace {

template <typename T, typename F>
std::string update(T &target, F &&fn)
{
	Reader r;
	T copy = target;
	try {
		fn(r, copy);
	} catch (const std::exception &e) {
		r.fail("update", e.what());
	}
	if (r.ok())
		target = copy;
	return r.error;
}

} // namespace

std::string update_impairment(const json &j, Impairment &imp)
{
	return update(imp, [&](Reader &r, Impairment &c) { r.impairment(j, "impair", c); });
}

std::string update_ecn(const json &j, std::array<EcnConfig, kPriorities> &ecn)
{
	return update(ecn, [&](Reader &r, auto &c) { r.ecn(j, "ecn", c); });
}

std::string update_pfc(const json &j, PfcConfig &pfc)
{
	return update(pfc, [&](Reader &r, PfcConfig &c) { r.pfc(j, "pfc", c); });
}

std::string update_link(const json &j, LinkParams &p)
{
	return update(p, [&](Reader &r, LinkParams &c) {
		if (r.object_of(j, "link", Reader::kParamKeys))
			r.params(j, "link", c);
	});
}

std::string parse_injection(const json &j, Injection &inj)
{
	return update(inj, [&](Reader &r, Injection &c) {
		if (!r.object(j, "inject", {"action", "qpn", "psn", "nth", "host"}))
			return;
		std::string a;
		r.string(j, "action", "inject", a, true);
		if (a == "drop")
			c.action = Injection::Action::Drop;
		else if (a == "ecn")
			c.action = Injection::Action::Ecn;
		else if (a == "corrupt")
			c.action = Injection::Action::Corrupt;
		else
			r.fail("inject.action", "must be drop, ecn or corrupt");
		if (!j.contains("qpn") || !j.contains("psn"))
			r.fail("inject", "needs qpn and psn");
		r.number(j, "qpn", "inject", c.qpn, 0, 0xffffff);
		r.number(j, "psn", "inject", c.psn, 0, 0xffffff);
		r.number(j, "nth", "inject", c.nth, 1, 1e9);
		r.string(j, "host", "inject", c.host, false);
	});
}

} // namespace vrnic::fabric

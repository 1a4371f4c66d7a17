// SPDX-License-Identifier: GPL-2.0-or-later
#include "telemetry.hpp"

#include <cstdint>

namespace vrnic::fabric {

namespace {

// RFC 4180: a field with a comma, a quote or a line break is quoted, its
// quotes doubled.  Names come from the topology file.
std::string field(const std::string &s)
{
	if (s.find_first_of(",\"\r\n") == std::string::npos)
		return s;
	std::string q = "\"";
	for (const char c : s) {
		if (c == '"')
			q += '"';
		q += c;
	}
	return q + "\"";
}

std::string scalar(const nlohmann::json &v)
{
	if (v.is_boolean())
		return v.get<bool>() ? "1" : "0";
	if (v.is_number_unsigned())
		return std::to_string(v.get<uint64_t>());
	if (v.is_number_integer())
		return std::to_string(v.get<int64_t>());
	if (v.is_string())
		return field(v.get<std::string>());
	return field(v.dump());
}

void row(std::string &out, const std::string &t, const std::string &sw, const std::string &port,
	 const std::string &prio, const std::string &metric, const nlohmann::json &v)
{
	out += t;
	out += ',';
	out += sw;
	out += ',';
	out += port;
	out += ',';
	out += prio;
	out += ',';
	out += field(metric);
	out += ',';
	out += scalar(v);
	out += '\n';
}

// A member of an object, or 0: records come from Fabric, but nothing
// here may throw on a missing key or a wrong type.
const nlohmann::json &member(const nlohmann::json &j, const char *key)
{
	static const nlohmann::json zero = 0;
	if (!j.is_object())
		return zero;
	const auto it = j.find(key);
	return it == j.end() ? zero : *it;
}

const nlohmann::json &list(const nlohmann::json &j, const char *key)
{
	static const nlohmann::json empty = nlohmann::json::array();
	const nlohmann::json &v = member(j, key);
	return v.is_array() ? v : empty;
}

void counters_csv(std::string &out, const std::string &t, const nlohmann::json &c)
{
	for (const auto &s : list(c, "switches")) {
		const std::string sw = scalar(member(s, "name"));
		row(out, t, sw, "", "", "buffer_used", member(s, "buffer_used"));
		row(out, t, sw, "", "", "shared_used", member(s, "shared_used"));
		for (const auto &p : list(s, "ports")) {
			const std::string port = scalar(member(p, "port"));
			// What the port leads to: a host or a switch's name.
			row(out, t, sw, port, "", "peer", member(p, "peer"));
			if (p.is_object() && p.contains("up"))
				row(out, t, sw, port, "", "up", p["up"]);
			for (const auto &q : list(p, "prio")) {
				if (!q.is_object())
					continue;
				const std::string prio = scalar(member(q, "prio"));
				for (const auto &[k, v] : q.items()) {
					if (k == "prio")
						continue;
					if (v.is_object()) {
						for (const auto &[cause, n] : v.items()) {
							std::string m = k;
							m += '.';
							m += cause;
							row(out, t, sw, port, prio, m, n);
						}
						continue;
					}
					row(out, t, sw, port, prio, k, v);
				}
			}
		}
	}
	size_t i = 0;
	for (const auto &inj : list(c, "injections")) {
		const std::string n = "injection." + std::to_string(i++);
		row(out, t, "", "", "", n + ".seen", member(inj, "seen"));
		row(out, t, "", "", "", n + ".fired", member(inj, "fired"));
	}
}

} // namespace

std::string telemetry_csv(const nlohmann::json &record)
{
	std::string out;
	if (!record.is_object() || !record.contains("t_ns"))
		return out;
	const std::string t = scalar(record["t_ns"]);
	if (record.contains("q") && record["q"].is_array()) {
		const auto &q = record["q"];
		row(out, t, "", "", "", "sample", q.size());
		if (record.contains("late_ns"))
			row(out, t, "", "", "", "late_ns", record["late_ns"]);
		for (const auto &e : q)
			if (e.is_array() && e.size() == 4)
				row(out, t, scalar(e[0]), scalar(e[1]), scalar(e[2]), "sampled_depth",
				    e[3]);
	} else if (record.contains("counters") && record["counters"].is_object()) {
		counters_csv(out, t, record["counters"]);
	}
	return out;
}

} // namespace vrnic::fabric

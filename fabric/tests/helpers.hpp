// SPDX-License-Identifier: GPL-2.0-or-later
// Test helpers: RoCEv2 frames built byte by byte, a sink that records what
// the fabric delivers, and topologies written inline.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fabric.hpp"
#include "frame.hpp"

namespace vrnic::fabric::test {

struct FrameSpec {
	Mac dst{0x52, 0x54, 0x00, 0, 0, 2};
	Mac src{0x52, 0x54, 0x00, 0, 0, 1};
	uint32_t sip = 0x0a000001;
	uint32_t dip = 0x0a000002;
	uint8_t dscp = 0;
	Ecn ecn = Ecn::NotEct;
	uint16_t sport = 49152;
	uint16_t dport = kRoceUdpPort;
	uint32_t qpn = 0x11;
	uint32_t psn = 0;
	size_t size = 1000;	// whole frame
	bool vlan = false;
	uint8_t pcp = 0;
};

inline Bytes roce_frame(const FrameSpec &s)
{
	const size_t l2 = s.vlan ? 18 : 14;
	Bytes f(std::max<size_t>(s.size, l2 + 20 + 8 + 12 + 4), 0);
	std::copy(s.dst.begin(), s.dst.end(), f.begin());
	std::copy(s.src.begin(), s.src.end(), f.begin() + 6);
	size_t o = 12;
	if (s.vlan) {
		f[o] = 0x81;
		f[o + 1] = 0x00;
		f[o + 2] = static_cast<uint8_t>(s.pcp << 5);
		o += 4;
	}
	f[o] = 0x08;
	f[o + 1] = 0x00;
	o += 2;
	const size_t ip = o;
	const size_t total = f.size() - ip;
	f[ip] = 0x45;
	f[ip + 1] = static_cast<uint8_t>((s.dscp << 2) | static_cast<uint8_t>(s.ecn));
	f[ip + 2] = static_cast<uint8_t>(total >> 8);
	f[ip + 3] = static_cast<uint8_t>(total);
	f[ip + 6] = 0x40;	// DF
	f[ip + 8] = 64;
	f[ip + 9] = 17;
	for (int i = 0; i < 4; i++) {
		f[ip + 12 + static_cast<size_t>(i)] = static_cast<uint8_t>(s.sip >> (24 - 8 * i));
		f[ip + 16 + static_cast<size_t>(i)] = static_cast<uint8_t>(s.dip >> (24 - 8 * i));
	}
	const uint16_t ck = ipv4_checksum(std::span(f).subspan(ip, 20));
	f[ip + 10] = static_cast<uint8_t>(ck >> 8);
	f[ip + 11] = static_cast<uint8_t>(ck);
	const size_t udp = ip + 20;
	const size_t ulen = f.size() - udp;
	f[udp] = static_cast<uint8_t>(s.sport >> 8);
	f[udp + 1] = static_cast<uint8_t>(s.sport);
	f[udp + 2] = static_cast<uint8_t>(s.dport >> 8);
	f[udp + 3] = static_cast<uint8_t>(s.dport);
	f[udp + 4] = static_cast<uint8_t>(ulen >> 8);
	f[udp + 5] = static_cast<uint8_t>(ulen);
	const size_t bth = udp + 8;
	f[bth] = 0x0a;	// RC RDMA WRITE ONLY
	f[bth + 2] = 0xff;
	f[bth + 3] = 0xff;
	f[bth + 5] = static_cast<uint8_t>(s.qpn >> 16);
	f[bth + 6] = static_cast<uint8_t>(s.qpn >> 8);
	f[bth + 7] = static_cast<uint8_t>(s.qpn);
	f[bth + 9] = static_cast<uint8_t>(s.psn >> 16);
	f[bth + 10] = static_cast<uint8_t>(s.psn >> 8);
	f[bth + 11] = static_cast<uint8_t>(s.psn);
	for (size_t i = bth + 12; i < f.size(); i++)
		f[i] = static_cast<uint8_t>(i * 7);
	return f;
}

struct Delivered {
	size_t host;
	uint64_t t;
	Bytes data;
};

class RecordingSink : public FrameSink {
public:
	std::vector<Delivered> frames;
	uint64_t now = 0;
	void deliver(size_t host, Bytes &&frame) override
	{
		frames.push_back({host, now, std::move(frame)});
	}
	std::vector<Delivered> to(size_t host, bool data_only = true) const
	{
		std::vector<Delivered> out;
		for (const auto &d : frames)
			if (d.host == host &&
			    (!data_only || !(d.data.size() > 13 && d.data[12] == 0x88 && d.data[13] == 0x08)))
				out.push_back(d);
		return out;
	}
	std::vector<Pfc> pfc_to(size_t host) const
	{
		std::vector<Pfc> out;
		for (const auto &d : frames) {
			if (d.host != host)
				continue;
			const Parsed p = parse_frame(d.data);
			if (auto pfc = parse_pfc(d.data, p.info))
				out.push_back(*pfc);
		}
		return out;
	}
};

inline TopologyConfig topology(const std::string &json)
{
	ParseResult r = parse_topology(json);
	EXPECT_TRUE(r.config.has_value()) << r.error;
	return r.config.value_or(TopologyConfig{});
}

// Drive a fabric in simulated time, recording the delivery times.
struct Sim {
	RecordingSink sink;
	Fabric fabric;
	uint64_t now = 0;
	explicit Sim(const std::string &json) : fabric(topology(json), sink)
	{
		for (size_t h = 0; h < fabric.host_count(); h++)
			fabric.set_host_up(h, true);
	}
	void send(size_t host, const Bytes &f)
	{
		sink.now = now;
		fabric.receive(host, f, now);
	}
	// Step through every event up to t, stamping deliveries exactly.
	void run_until(uint64_t t)
	{
		while (fabric.next_event() <= t) {
			now = std::max(now, fabric.next_event());
			sink.now = now;
			fabric.advance(now);
		}
		now = std::max(now, t);
		sink.now = now;
		fabric.advance(now);
	}
	void run_all() { run_until(fabric.next_event() == kNever ? now : kNever - 1); }
};

inline Mac host_mac(int i)
{
	return {0x52, 0x54, 0x00, 0, 0, static_cast<uint8_t>(i)};
}

} // namespace vrnic::fabric::test

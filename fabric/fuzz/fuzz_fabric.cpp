// SPDX-License-Identifier: GPL-2.0-or-later
// libFuzzer target for vrnic-fabric: what a port and the topology file can
// send it.  Built and replayed with the engine's targets (tests/fuzz,
// scripts/fuzz.py).
//
// Input: the first byte picks the mode.
//   mode % 8 == 0: the rest is a topology file (parse_topology, and a
//                  fabric built from it if it parses).
//   otherwise:     the rest is a list of chunks [port][len lo][len hi][bytes]
//                  fed, as QEMU's stream netdev framing, into the host
//                  ports of a fixed leaf-spine fabric with PFC, ECN,
//                  impairments and injections on; time moves on by
//                  `mode` µs per chunk; with bit 0x40 of `mode` the
//                  counters are dumped as JSON at the end.
// Invariants: the buffer never holds more than its size, and once time
// runs on with no input every queue drains.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fabric.hpp"
#include "stream.hpp"

namespace {

using namespace vrnic::fabric;

constexpr const char *kTopology = R"({
  "seed": 7, "max_frame": 4096,
  "switches": [
    {"name": "leaf0", "buffer": 262144, "scheduler": "dwrr"},
    {"name": "leaf1", "buffer": 262144, "classify": "pcp", "multipath": "spray"},
    {"name": "spine0", "buffer": 131072},
    {"name": "spine1", "buffer": 131072}
  ],
  "defaults": {
    "rate_gbps": 10, "delay_us": 1, "queue_limit": 65536,
    "pfc": {"priorities": [3, 4], "headroom": 16384, "watchdog_ms": 2},
    "ecn": {"kmin": 4096, "kmax": 32768, "pmax": 0.5}
  },
  "hosts": [
    {"name": "a", "switch": "leaf0",
     "impair": {"loss": 0.05, "duplicate": 0.05, "corrupt": 0.05, "reorder": 0.1,
                "reorder_delay_us": 5, "jitter_us": 2,
                "burst": {"p": 0.05, "r": 0.5, "k": 0, "h": 0.5}}},
    {"name": "b", "switch": "leaf0", "b_to_a": {"rate_mbps": 100}},
    {"name": "c", "switch": "leaf1", "pfc": {"priorities": [3], "xoff": 8192, "xon": 4096}},
    {"name": "d", "switch": "leaf1"}
  ],
  "links": [
    {"a": "leaf0", "b": "spine0"}, {"a": "leaf0", "b": "spine1"},
    {"a": "leaf1", "b": "spine0"}, {"a": "leaf1", "b": "spine1", "impair": {"loss": 0.1}}
  ],
  "inject": [
    {"action": "drop", "qpn": 17, "psn": 1},
    {"action": "ecn", "qpn": 17, "psn": 2, "nth": 2},
    {"action": "corrupt", "qpn": 17, "psn": 3}
  ]
})";

class NullSink : public FrameSink {
public:
	void deliver(size_t, Bytes &&) override {}
};

void check_buffers(const Fabric &f)
{
	for (const auto &s : f.config().switches)
		if (f.buffer_used(s.name) > s.buffer)
			std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	const uint8_t mode = data[0];
	if (mode % 8 == 0) {
		const ParseResult r = parse_topology(
			std::string(reinterpret_cast<const char *>(data + 1), size - 1));
		if (r.config) {
			NullSink sink;
			Fabric f(*r.config, sink);
			(void)f.counters(0).dump();
		}
		return 0;
	}
	static const TopologyConfig cfg = *parse_topology(kTopology).config;
	NullSink sink;
	Fabric f(cfg, sink);
	std::vector<StreamDecoder> rx(f.host_count(), StreamDecoder(cfg.max_frame));
	for (size_t h = 0; h < f.host_count(); h++)
		f.set_host_up(h, true);
	uint64_t t = 0;
	size_t off = 1;
	while (off + 3 <= size) {
		const size_t host = data[off] % f.host_count();
		size_t len = data[off + 1] | (size_t{data[off + 2]} << 8);
		off += 3;
		len = std::min(len, size - off);
		if (data[off - 3] & 0x80)
			f.set_host_up(host, !f.host_up(host));
		rx[host].feed(std::span(data + off, len),
			      [&](StreamDecoder::Event ev, std::span<const uint8_t> frame) {
				      if (ev == StreamDecoder::Event::Frame)
					      f.receive(host, frame, t);
				      else
					      f.count_host_drop(host, Drop::Oversized);
				      check_buffers(f);
			      });
		off += len;
		t += uint64_t{mode} * 1000;
		f.advance(t);
		check_buffers(f);
	}
	// Ten seconds with no input: pauses expire, every queue drains.
	f.advance(t + 10'000'000'000ULL);
	for (const auto &s : cfg.switches)
		if (f.buffer_used(s.name) != 0)
			std::abort();
	if (mode & 0x40)	// the telemetry is slow in JSON: some inputs only
		(void)f.counters(t).dump();
	return 0;
}

// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-fabric's own per-frame cost (Google Benchmark): a frame in from a
// host port and out to another through the whole model, on a pair and on
// leaf-spine (three switches deep), and the parse alone.
#include <benchmark/benchmark.h>

#include "fabric.hpp"
#include "frame.hpp"

namespace {

using namespace vrnic::fabric;

class CountingSink : public FrameSink {
public:
	uint64_t frames = 0;
	void deliver(size_t, Bytes &&) override { frames++; }
};

Bytes frame(size_t size, uint8_t src, uint8_t dst, uint16_t sport)
{
	Bytes f(size, 0);
	f[0] = 0x52, f[1] = 0x54, f[5] = dst;
	f[6] = 0x52, f[7] = 0x54, f[11] = src;
	f[12] = 0x08;
	const size_t total = size - 14;
	f[14] = 0x45;
	f[15] = (26 << 2) | 2;
	f[16] = static_cast<uint8_t>(total >> 8);
	f[17] = static_cast<uint8_t>(total);
	f[23] = 17;
	const size_t ulen = total - 20;
	f[34] = static_cast<uint8_t>(sport >> 8);
	f[35] = static_cast<uint8_t>(sport);
	f[36] = 0x12;
	f[37] = 0xb7;
	f[38] = static_cast<uint8_t>(ulen >> 8);
	f[39] = static_cast<uint8_t>(ulen);
	const uint16_t ck = ipv4_checksum(std::span(f).subspan(14, 20));
	f[24] = static_cast<uint8_t>(ck >> 8);
	f[25] = static_cast<uint8_t>(ck);
	return f;
}

void run(benchmark::State &state, const char *topo, size_t dst_host)
{
	CountingSink sink;
	Fabric fab(*parse_topology(topo).config, sink);
	for (size_t h = 0; h < fab.host_count(); h++)
		fab.set_host_up(h, true);
	const auto size = static_cast<size_t>(state.range(0));
	const Bytes back = frame(size, static_cast<uint8_t>(dst_host + 1), 1, 1);
	fab.receive(dst_host, back, 0);
	const Bytes f = frame(size, 1, static_cast<uint8_t>(dst_host + 1), 49152);
	uint64_t t = 1;
	for (auto _ : state) {
		fab.receive(0, f, t);
		fab.advance(t);
		t += 10;
	}
	state.SetItemsProcessed(static_cast<int64_t>(sink.frames));
	state.SetBytesProcessed(static_cast<int64_t>(sink.frames * size));
}

void BM_FabricPair(benchmark::State &state)
{
	run(state, R"({"switches":[{"name":"sw0"}],
		"defaults":{"pfc":{"priorities":[3]},"ecn":{"kmin":65536,"kmax":262144,"pmax":0.2}},
		"hosts":[{"name":"a","switch":"sw0"},{"name":"b","switch":"sw0"}]})", 1);
}
BENCHMARK(BM_FabricPair)->Arg(64)->Arg(1100)->Arg(4200);

void BM_FabricLeafSpine(benchmark::State &state)
{
	run(state, R"({"switches":[{"name":"l0"},{"name":"l1"},{"name":"s0"},{"name":"s1"}],
		"hosts":[{"name":"a","switch":"l0"},{"name":"c","switch":"l1"}],
		"links":[{"a":"l0","b":"s0"},{"a":"l0","b":"s1"},{"a":"l1","b":"s0"},{"a":"l1","b":"s1"}]})", 1);
}
BENCHMARK(BM_FabricLeafSpine)->Arg(1100);

void BM_ParseFrame(benchmark::State &state)
{
	const Bytes f = frame(1100, 1, 2, 49152);
	for (auto _ : state) {
		Parsed p = parse_frame(f);
		benchmark::DoNotOptimize(p);
	}
}
BENCHMARK(BM_ParseFrame);

} // namespace

BENCHMARK_MAIN();

// SPDX-License-Identifier: GPL-2.0-or-later
// Host-side limits for make bench (Google Benchmark): what one host core
// can do, so the guest numbers can be read against them.
//
//   Memcpy/N        single-core memcpy bandwidth
//   BuildFrame/N    RoCEv2 WRITE frames built (headers, payload, ICRC)
//   ParseFrame/N    frames parsed and ICRC-checked
//   Icrc/N          ICRC (zlib CRC-32) over an N-byte payload frame
//   UnixDgram/N     frames through an AF_UNIX datagram socket pair (the
//                   transport of QEMU's dgram netdev)
//   UnixStream/N    frames through an AF_UNIX stream socket pair as QEMU's
//                   stream netdev frames them (4-byte length + frame per
//                   writev, 68 KiB reads): the VMs' wires
#include <benchmark/benchmark.h>

#include <sys/socket.h>
#include <sys/uio.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "roce.hpp"

namespace {

using namespace vrnic::roce;

Path test_path()
{
	Path p;
	p.smac = {0x52, 0x54, 0x00, 0x76, 0x72, 0x01};
	p.dmac = {0x52, 0x54, 0x00, 0x76, 0x72, 0x02};
	p.sgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 10, 0, 1};
	p.dgid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 10, 0, 2};
	return p;
}

Headers write_middle()
{
	Headers h;
	h.opcode = WRITE_MIDDLE;
	h.dqpn = 0x11;
	h.psn = 0x1234;
	return h;
}

size_t build(std::vector<uint8_t> &buf, const Path &p, const Headers &h,
	     const std::vector<uint8_t> &payload)
{
	const size_t hl = build_headers(buf.data(), p, h);
	std::memcpy(buf.data() + hl, payload.data(), payload.size());
	return finish(buf.data(), p, hl, payload.size());
}

void Memcpy(benchmark::State &state)
{
	const auto n = size_t(state.range(0));
	std::vector<uint8_t> src(n, 0x5a), dst(n);
	for (auto _ : state) {
		std::memcpy(dst.data(), src.data(), n);
		benchmark::DoNotOptimize(dst.data());
		benchmark::ClobberMemory();
	}
	state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(Memcpy)->Arg(64 << 10)->Arg(1 << 20)->Arg(16 << 20);

void BuildFrame(benchmark::State &state)
{
	const auto n = size_t(state.range(0));
	const Path p = test_path();
	const Headers h = write_middle();
	std::vector<uint8_t> payload(n, 0xa5), buf(n + 256);
	for (auto _ : state)
		benchmark::DoNotOptimize(build(buf, p, h, payload));
	state.SetItemsProcessed(int64_t(state.iterations()));
	state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(BuildFrame)->Arg(64)->Arg(1024)->Arg(4096);

void ParseFrame(benchmark::State &state)
{
	const auto n = size_t(state.range(0));
	std::vector<uint8_t> payload(n, 0xa5), buf(n + 256);
	const size_t len = build(buf, test_path(), write_middle(), payload);
	Packet pkt;
	for (auto _ : state) {
		if (parse({buf.data(), len}, pkt) != ParseResult::Ok)
			state.SkipWithError("frame did not parse");
		benchmark::DoNotOptimize(pkt);
	}
	state.SetItemsProcessed(int64_t(state.iterations()));
	state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(ParseFrame)->Arg(64)->Arg(1024)->Arg(4096);

void Icrc(benchmark::State &state)
{
	const auto n = size_t(state.range(0));
	std::vector<uint8_t> payload(n, 0xa5), buf(n + 256);
	const size_t len = build(buf, test_path(), write_middle(), payload);
	for (auto _ : state)
		benchmark::DoNotOptimize(icrc({buf.data(), len}, false));
	state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(len));
}
BENCHMARK(Icrc)->Arg(1024)->Arg(4096);

// One writer (this thread) and one reader thread on a blocking AF_UNIX
// datagram pair: a full receive queue blocks the writer, the backpressure
// that QEMU's dgram netdev relies on.
void UnixDgram(benchmark::State &state)
{
	const auto n = size_t(state.range(0));
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_DGRAM, 0, sv)) {
		state.SkipWithError("socketpair failed");
		return;
	}
	std::atomic<bool> stop{false};
	std::thread reader([&] {
		std::vector<uint8_t> rx(n);
		while (!stop.load(std::memory_order_relaxed))
			if (recv(sv[1], rx.data(), rx.size(), 0) <= 0)
				break;
	});
	std::vector<uint8_t> frame(n, 0x42);
	for (auto _ : state)
		if (send(sv[0], frame.data(), n, 0) != ssize_t(n))
			state.SkipWithError("send failed");
	stop = true;
	shutdown(sv[0], SHUT_RDWR);
	shutdown(sv[1], SHUT_RDWR);
	reader.join();
	close(sv[0]);
	close(sv[1]);
	state.SetItemsProcessed(int64_t(state.iterations()));
	state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(UnixDgram)->Arg(1514)->Arg(4154)->Arg(9014)->UseRealTime();

void UnixStream(benchmark::State &state)
{
	const auto n = size_t(state.range(0));
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		state.SkipWithError("socketpair failed");
		return;
	}
	std::thread reader([&] {
		std::vector<uint8_t> rx(4096 + 65536);	// QEMU's NET_BUFSIZE
		while (read(sv[1], rx.data(), rx.size()) > 0)
			;
	});
	std::vector<uint8_t> frame(n, 0x42);
	uint32_t len = htonl(uint32_t(n));
	struct iovec iov[2] = {{&len, sizeof(len)}, {frame.data(), n}};
	for (auto _ : state)
		if (writev(sv[0], iov, 2) != ssize_t(n + sizeof(len)))
			state.SkipWithError("writev failed");
	shutdown(sv[0], SHUT_WR);
	reader.join();
	close(sv[0]);
	close(sv[1]);
	state.SetItemsProcessed(int64_t(state.iterations()));
	state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(n));
}
BENCHMARK(UnixStream)->Arg(1514)->Arg(4154)->Arg(9014)->UseRealTime();

} // namespace

BENCHMARK_MAIN();

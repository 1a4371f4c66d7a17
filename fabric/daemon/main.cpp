// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-fabric: an emulated data-centre switch for QEMU stream netdevs.
//
//   vrnic-fabric --topology fabric/topologies/pair.json --dir /run/fab
//                [--control PATH] [--tcp-bind ADDR] [--telemetry FILE]
//                [--telemetry-format jsonl|csv]
//
// Prints "vrnic-fabric ready" on stdout once every socket listens.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "server.hpp"

namespace {

int usage()
{
	(void)std::fprintf(stderr,
		     "usage: vrnic-fabric --topology FILE [--dir DIR] [--control PATH]\n"
		     "                    [--tcp-bind ADDR] [--telemetry FILE]\n"
		     "                    [--telemetry-format jsonl|csv]   (default: csv for *.csv)\n"
		     "                    [--backdate-us N]   (late turns, default 200; 0: off)\n"
		     "                    [--check]   (parse the topology and exit)\n");
	return 2;
}

} // namespace

int main(int argc, char **argv)
{
	using namespace vrnic::fabric;
	// Frames are allocated and freed in waves as queues fill and drain:
	// keep the freed heap instead of handing it back with brk() at each
	// ebb (memory stays bounded by the configured buffers).
#ifdef __GLIBC__
	(void)mallopt(M_TRIM_THRESHOLD, 64 << 20);
	(void)mallopt(M_TOP_PAD, 16 << 20);
#endif
	std::string topo;
	bool check = false;
	ServerOptions opt;
	for (int i = 1; i < argc; i++) {
		const std::string a = argv[i];
		auto val = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
		const char *v = nullptr;
		if (a == "--check") {
			check = true;
			continue;
		}
		if (a == "--help" || a == "-h")
			return usage();
		if (!(v = val()))
			return usage();
		if (a == "--topology")
			topo = v;
		else if (a == "--dir")
			opt.dir = v;
		else if (a == "--control")
			opt.control = v;
		else if (a == "--tcp-bind")
			opt.tcp_bind = v;
		else if (a == "--telemetry")
			opt.telemetry = v;
		else if (a == "--telemetry-format" && (!std::strcmp(v, "csv") || !std::strcmp(v, "jsonl")))
			opt.telemetry_format = v;
		else if (a == "--backdate-us" && std::strspn(v, "0123456789") == std::strlen(v) &&
			 std::strlen(v) && std::strlen(v) < 8)
			opt.backdate_ns = std::strtoull(v, nullptr, 10) * 1000;
		else
			return usage();
	}
	if (topo.empty())
		return usage();
	std::ifstream in(topo);
	if (!in) {
		(void)std::fprintf(stderr, "vrnic-fabric: cannot read %s\n", topo.c_str());
		return 1;
	}
	std::stringstream ss;
	ss << in.rdbuf();
	const ParseResult parsed = parse_topology(ss.str());
	if (!parsed.config) {
		(void)std::fprintf(stderr, "vrnic-fabric: %s: %s\n", topo.c_str(), parsed.error.c_str());
		return 1;
	}
	if (check) {
		(void)std::printf("%s: %zu switches, %zu host ports, %zu links\n", topo.c_str(),
			    parsed.config->switches.size(), parsed.config->hosts.size(),
			    parsed.config->links.size() - parsed.config->hosts.size());
		return 0;
	}
	try {
		Server server(*parsed.config, opt);
		if (!server.open())
			return 1;
		(void)std::printf("vrnic-fabric ready\n");
		(void)std::fflush(stdout);
		return server.run();
	} catch (const std::exception &e) {
		(void)std::fprintf(stderr, "vrnic-fabric: %s\n", e.what());
		return 1;
	}
}

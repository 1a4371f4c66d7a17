// SPDX-License-Identifier: GPL-2.0-or-later
// The libFuzzer harness shared by every target in tests/fuzz: a fake
// platform with a bounded guest memory window, a device "world" built
// through real admin commands (PDs, MRs of every kind, memory windows,
// SRQs and QPs of every type in every state), and an interpreter that
// turns the fuzz input into operations on that world (wire frames, admin
// commands, ring contents, doorbells, register writes, time).  Each
// target enables a subset of the operations.  See Documentation/fuzzing.rst.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <vector>

#include "roce.hpp"
#include "vrnic_engine.h"
#include "vrnic_hw.h"

namespace fz {

// Guest memory: one bounded window; DMA outside it fails, as QEMU's does
// for unmapped addresses.  Pages written since the last restore() are
// tracked so that the next input starts from zeroed memory cheaply.
struct Mem {
	static constexpr uint64_t kBase = 0x100000;
	static constexpr uint64_t kSize = 4u << 20;
	static constexpr uint64_t kPages = kSize / 4096;

	Mem();
	[[nodiscard]] bool in(uint64_t addr, size_t len) const
	{
		return addr >= kBase && len <= kSize && addr - kBase <= kSize - len;
	}
	void touch(uint64_t addr, size_t len);
	bool write(uint64_t addr, const void *src, size_t len);
	bool read(uint64_t addr, void *dst, size_t len) const;
	template <typename T> void store(uint64_t addr, const T &v) { write(addr, &v, sizeof(T)); }
	template <typename T> T load(uint64_t addr) const
	{
		T v{};
		read(addr, &v, sizeof(T));
		return v;
	}
	void restore();

	std::vector<uint8_t> m;
	std::vector<uint8_t> dirty;
	std::vector<uint32_t> dirty_list;
};

// Input reader: little-endian integers, zeros once the input runs out.
struct In {
	const uint8_t *d;
	size_t n;
	[[nodiscard]] bool empty() const { return n == 0; }
	uint8_t u8()
	{
		if (!n)
			return 0;
		n--;
		return *d++;
	}
	uint16_t u16() { return uint16_t(u8() | u8() << 8); }
	uint32_t u32() { return uint32_t(u16()) | uint32_t(u16()) << 16; }
	uint64_t u64() { return uint64_t(u32()) | uint64_t(u32()) << 32; }
	// Up to len bytes into dst; the rest of dst is zeroed.
	void bytes(void *dst, size_t len)
	{
		const size_t k = len < n ? len : n;
		std::memcpy(dst, d, k);
		std::memset(static_cast<uint8_t *>(dst) + k, 0, len - k);
		d += k;
		n -= k;
	}
};

// A QP of the world, with what the harness needs to aim at it.
struct QpInfo {
	uint32_t qpn = 0;
	uint8_t type = VRNIC_QPT_RC;
	uint8_t state = VRNIC_QPS_RESET;
	uint32_t uctx = 0;
	uint32_t cq = 0;	// index into Dev::cqs
	int srq = -1;		// index into Dev::srqs
	int peer = -1;		// QP index at the other end (-1: none)
	bool loopback = false;	// its peer is on the same device
	bool ipv6 = false;
	bool paged = false;
	bool sr = false;	// selective repeat agreed (VRNIC_QP_TF_*)
	uint64_t sq = 0, rq = 0, dbrec = 0;
	unsigned sq_log = 0, sq_shift = 0, rq_log = 0, rq_shift = 0;
	uint32_t mtu = 256;
	uint32_t qkey = 0;
	uint32_t sq_pi = 0, rq_pi = 0;
	// PSN tracking from the engine's own frames
	uint32_t epsn = 0;	// next request PSN the responder expects
	uint32_t req_lo = 0, req_hi = 0;	// request PSNs it sent
	bool req_seen = false;
	vrnic::roce::Path rx_path;	// a packet from the peer, as the wire carries it
};

struct CqInfo {
	uint32_t cqn = 0;
	uint64_t base = 0, dbrec = 0;
	unsigned log = 0;
	bool paged = false;
	uint32_t uctx = 0;
	uint32_t ci = 0;
};

struct SrqInfo {
	uint32_t srqn = 0;
	uint64_t base = 0, dbrec = 0;
	unsigned log = 0, shift = 0;
	uint32_t pi = 0;
	uint32_t uctx = 0;
};

// A key a packet or an SGE can name, with the range it covers.
struct KeyInfo {
	uint32_t key = 0;
	uint64_t iova = 0;
	uint64_t len = 0;
};

enum class Mode { Single, Pair };

class Dev {
public:
	// Memory map, offsets from Mem::kBase.
	static constexpr uint64_t B = Mem::kBase;
	static constexpr uint64_t kAq = B, kAcq = B + 0x1000, kAeq = B + 0x2000;
	static constexpr uint64_t kEq1 = B + 0x3000, kAttr = B + 0x4000;
	static constexpr uint64_t kDbrec = B + 0x5000, kOut = B + 0x6000;
	static constexpr uint64_t kPbl = B + 0x8000;
	static constexpr uint64_t kCqs = B + 0x10000;
	static constexpr uint64_t kRings = B + 0x20000;	// 0x2000 per QP
	static constexpr uint64_t kSrqRings = B + 0x50000;
	static constexpr uint64_t kEthTx = B + 0x58000, kEthRx = B + 0x59000;
	static constexpr uint64_t kScratch = B + 0x60000;
	static constexpr uint64_t kScratchLen = 0x40000;
	static constexpr uint64_t kData = B + 0x100000;
	static constexpr uint64_t kDataLen = 0x200000;
	static constexpr uint64_t kEthBuf = B + 0x300000;
	static constexpr unsigned kAqLog = 6, kAeqLog = 6, kEthLog = 4;
	static constexpr uint64_t kIova = 0x7f0000000000ull;

	explicit Dev(uint8_t id);
	~Dev();
	Dev(const Dev &) = delete;
	Dev &operator=(const Dev &) = delete;

	// Fresh engine and world; peer_id is the other end's address byte.
	void reset(uint8_t peer_id, bool eth);
	// Free the engine and zero the memory it touched.
	void teardown();
	void run();
	uint8_t admin(const vrnic_admin_cmd &c, uint32_t *result = nullptr);
	void advance(uint64_t ns);
	void drain_cqs();

	uint8_t id;
	Mem mem;
	vrnic_engine *eng = nullptr;
	uint64_t now = 0, deadline = 0;
	unsigned schedules = 0;
	bool track = true;		// parse sent frames for PSNs
	bool keep_frames = false;	// queue sent frames (two engines)
	bool net_full = false;		// send_frame() says the network is full
	// Keep one engine per process and reset it between inputs (fast);
	// otherwise a fresh engine per input (handles then never differ).
	bool reuse = std::getenv("VRNIC_FUZZ_FRESH") == nullptr;
	std::deque<std::vector<uint8_t>> out;
	Dev *sync_peer = nullptr;	// deliver sent frames at once, re-entrantly
	int sync_depth = 0;
	uint64_t frames_sent = 0;
	uint16_t aq_pi = 0, aeq_ci = 0;
	uint16_t eth_tx_pi = 0, eth_rx_pi = 0;

	std::vector<QpInfo> qps;
	std::vector<CqInfo> cqs;
	std::vector<SrqInfo> srqs;
	std::vector<KeyInfo> keys;
	std::vector<uint32_t> pds, uctxs, mrs, mws, xrcds, eqs;
	vrnic::roce::Path mcast_path;

	void on_frame(const uint8_t *f, size_t len);

private:
	void setup(uint8_t peer_id, bool eth);
	uint32_t ok(const vrnic_admin_cmd &c);
	uint32_t create_mr(uint32_t pdn, uint64_t iova, uint64_t off, uint64_t len,
			   uint32_t access, uint64_t pbl);
	void create_qp(QpInfo &q, uint32_t pdn, uint32_t xrcd, uint32_t srqn);
	void to_state(QpInfo &q, uint8_t target, uint8_t peer_id, uint32_t peer_qpn);
};

// What a target lets the interpreter do.
enum Op : unsigned {
	OP_FRAME = 1u << 0,	// a fixed-up RoCEv2 frame from the peer
	OP_RAW_FRAME = 1u << 1,	// a raw frame, MAC and ICRC fixed
	OP_POLL = 1u << 2,
	OP_TIME = 1u << 3,
	OP_ADMIN = 1u << 4,
	OP_MEMWRITE = 1u << 5,
	OP_SEND_WQE = 1u << 6,
	OP_RECV_WQE = 1u << 7,
	OP_DBREC = 1u << 8,
	OP_DOORBELL = 1u << 9,
	OP_CQ = 1u << 10,
	OP_REG = 1u << 11,
	OP_ETH_TX = 1u << 12,
	OP_ETH_RX = 1u << 13,
	OP_ETH_FRAME = 1u << 14,
	OP_LINK = 1u << 15,
	OP_WIRE = 1u << 16,	// move frames between the two engines
	OP_SWITCH = 1u << 17,	// operate on the other engine
	OP_PAGELIST = 1u << 18,	// a valid page list in the scratch area
	OP_SYNC = 1u << 19,	// two engines: deliver frames synchronously
};

// Run one input: reset the world (one or two engines), then execute up
// to max_ops operations of the enabled kinds.
void run_input(const uint8_t *data, size_t size, unsigned ops, Mode mode,
	       bool eth);

} // namespace fz

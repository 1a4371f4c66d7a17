// SPDX-License-Identifier: GPL-2.0-or-later
// Two vrnic engines joined by a simulated wire, driven the way the driver
// and provider drive the device: admin commands for PD/CQ/MR/QP, WQEs in
// rings, doorbell records and doorbells, CQEs polled by phase bit.
#pragma once

#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "fake_platform.hpp"

namespace vrnic {
struct RdmaCounters;
}

struct Node {
	static constexpr uint64_t B = FakePlatform::kMemBase;
	static constexpr uint64_t kEq = B + 0x10000;
	static constexpr uint64_t kCq = B + 0x20000;	// 4096 x 32 B
	static constexpr uint64_t kQpDb = B + 0x40000;
	static constexpr uint64_t kCqDb = B + 0x40100;
	static constexpr uint64_t kAttr = B + 0x40800;
	static constexpr uint64_t kSq = B + 0x50000;	// 256 x 512 B
	static constexpr uint64_t kRq = B + 0x70000;	// 256 x 256 B
	static constexpr uint64_t kPbl = B + 0x80000;
	static constexpr uint64_t kRingPbl = B + 0xf0000;
	static constexpr uint64_t kData = B + 0x100000;	// 16 MiB
	static constexpr uint64_t kDataLen = 16 << 20;
	// QP contexts (VRNIC_MAX_QP x 64 B), when the cache is limited.
	static constexpr uint64_t kQpcMem = B + 0x2000000;	// 4 MiB
	static constexpr uint32_t kQpcEntries = 65536;		// as the Linux driver
	static constexpr uint64_t kIova = 0x7f0000000000ull;	// user VA
	static constexpr unsigned kCqLog = 12, kSqLog = 8, kRqLog = 8;
	static constexpr unsigned kSqShift = 9, kRqShift = 8;

	explicit Node(uint8_t id, bool paged = false, unsigned cq_log = kCqLog,
		      uint8_t qp_type = VRNIC_QPT_RC, uint64_t host_mem_budget = 0,
		      uint32_t qpc_cache = 0, uint32_t qpc_miss_ns = 0,
		      uint32_t qpc_entries = kQpcEntries);
	// Where offset off of a ring lives (paged rings use reversed pages).
	uint64_t ring_addr(uint64_t base, uint64_t off, uint64_t bytes) const;

	// setup
	uint32_t admin_ok(vrnic_admin_cmd c);
	uint32_t create_mr(uint64_t iova, uint64_t off, uint64_t len,
			   uint32_t access);
	void connect(const Node &peer, uint32_t path_mtu, uint32_t sq_psn,
		     uint32_t rq_psn, uint8_t retry = 7, uint8_t rnr_retry = 7,
		     uint8_t timeout = 14, uint8_t traffic_class = 0);
	uint8_t modify(uint32_t mask, const vrnic_qp_attr &a);
	// UD and GSI: RESET -> INIT (qkey) -> RTR -> RTS.
	void ud_ready(uint32_t qkey, uint32_t sq_psn = 0);
	// The address vector of this node's QP, as a peer's UD WQE names it.
	vrnic_ud_av av(uint32_t qkey) const;
	std::array<uint8_t, 16> gid() const;
	// Its IPv6 GID (fe80::5054:ff:fe12:34<id>), GID table entry 1.
	std::array<uint8_t, 16> gid6() const;
	std::array<uint8_t, 6> mac() const { return {0x52, 0x54, 0x00, 0x12, 0x34, id}; }
	// SET_GID: entry index becomes gid with source MAC smac (op SET), or
	// is cleared (op CLEAR, everything else zero); returns the status.
	uint8_t set_gid(uint8_t index, const std::array<uint8_t, 16> &g,
			const std::array<uint8_t, 6> &smac,
			uint8_t op = VRNIC_GID_OP_SET,
			uint16_t vlan_id = VRNIC_VLAN_NONE);
	static constexpr uint8_t kGid4 = 0, kGid6 = 1;	// table entries

	// An SRQ (16 WQEs of 256 B) with its ring and doorbell record at
	// ring/dbrec; XRC SRQs also name a CQ and a domain.
	uint32_t create_srq(uint64_t ring, uint64_t dbrec,
			    uint8_t type = VRNIC_SRQT_BASIC, uint32_t cqn = 0,
			    uint32_t xrcdn = 0);
	// The admin command for an RC QP of this node that receives from
	// SRQ srqn (its doorbell record next to the first QP's).
	vrnic_admin_cmd srq_qp_cmd(uint32_t srqn) const;
	// The admin command for one more idle RC QP of this node on its
	// (contiguous) rings: 2^sq_log SQ WQEs of 64 B, an RQ of one 32-byte
	// WQE, its doorbell record next to the first QP's.
	vrnic_admin_cmd idle_qp_cmd(unsigned sq_log = 0) const;
	// Spend the host budget on FAST MRs of 512 pages, then of 1, until
	// it refuses one; their keys.
	std::vector<uint32_t> spend_budget_on_mrs();
	// Post count receive WQEs of 4 KiB at data(data_off + i * 4 KiB),
	// wr_id first_wr + i, and publish them.
	void post_srq(uint64_t ring, uint64_t dbrec, uint32_t count,
		      uint64_t first_wr, uint64_t data_off);

	// data path
	void post_send(const vrnic_send_wqe &w, const std::vector<vrnic_sge> &sges,
		       const std::vector<uint8_t> &inline_data = {},
		       const vrnic_ud_av *av = nullptr);
	// A 64-byte WQE exactly as given (REG_MR, LOCAL_INV).
	void post_raw(const void *wqe);
	// Address of the next SQ slot, cleared; ring_sq() publishes it.
	uint64_t next_sq_slot();
	void ring_sq();
	void post_recv(uint64_t wr_id, const std::vector<vrnic_sge> &sges);
	bool poll_cq(vrnic_cqe &out);
	vrnic_sge sge(uint64_t off, uint32_t len, uint32_t key = 0) const
	{
		return {kIova + off, len, key ? key : mr};
	}
	uint8_t *data(uint64_t off) { return p.ptr(kData + off); }
	[[nodiscard]] const vrnic::RdmaCounters &counters() const;

	FakePlatform p;
	uint8_t id;
	bool paged;
	unsigned cq_log;
	uint8_t qp_type;
	uint32_t pd = 0, cq = 0, qp = 0, mr = 0;
	uint32_t sq_pi = 0, rq_pi = 0, cq_ci = 0;
	// VRNIC_QP_TF_*: what connect() tells the QP the peer agreed to.
	uint32_t transport_flags = 0;
	uint16_t send_window = 0;	// and the PSNs it keeps in flight
	uint8_t spray_paths = 0;	// and the UDP source ports it sprays over
};

// A fast-register MR on n with room for `pages` pages: invalid until a
// REG_MR.  Returns its key.
uint32_t alloc_fast_mr(Node &n, uint32_t pages);
// REG_MR of len bytes at iova with `key` (index and new key byte), its
// first page at data(off): iova's byte is data(off + iova % 4096).  The
// page list is written where the device will read it (n's data area at
// 0xfe0000); extra_pages more entries than len needs.
void post_reg_mr(Node &n, uint64_t wr_id, uint32_t key, uint64_t iova,
		 uint64_t off, uint32_t len, uint32_t access,
		 uint32_t extra_pages = 0);

// A signaled send WQE (header only), as most tests post it.
inline vrnic_send_wqe send_wqe(uint64_t wr_id, uint8_t opcode = VRNIC_WR_SEND,
			       uint64_t raddr = 0, uint32_t rkey = 0)
{
	vrnic_send_wqe w{};
	w.wr_id = wr_id;
	w.opcode = opcode;
	w.flags = VRNIC_WQE_SIGNALED;
	w.remote_addr = raddr;
	w.rkey = rkey;
	return w;
}

// Run n's deferred work without delivering its frames anywhere.
inline void run_alone(Node &n)
{
	for (int i = 0; i < 1000; i++) {
		const unsigned before = n.p.schedules;
		vrnic_engine_poll(n.p.eng);
		if (n.p.schedules == before)
			break;
	}
}

// n connected QP pairs a -> b (RC, b's on its SRQ-less RQ), each of a's
// on its own SQ ring and doorbell record; write() posts an RDMA WRITE.
struct Pairs {
	static constexpr uint64_t kSqs = Node::B + 0x1200000;	// 128 KiB each
	static constexpr uint64_t kDbs = Node::B + 0x41000;	// 8 B each
	Node &a, &b;
	std::vector<uint32_t> qa, qb;
	std::vector<uint32_t> posted;

	Pairs(Node &x, Node &y, unsigned n);
	// One RDMA WRITE of len bytes on pair i, from a's data at src to b's
	// at dst.
	void write(unsigned i, uint64_t src, uint64_t dst, uint32_t len, uint64_t wr);
};

struct Wire {
	double drop = 0, dup = 0, reorder = 0, corrupt = 0;
	// A frame for which this says true is dropped (after the random
	// impairments are drawn for it).
	std::function<bool(const std::vector<uint8_t> &)> drop_if;
	uint64_t ns_per_frame = 0;	// simulated time each frame takes
	std::mt19937 rng{12345};
	uint64_t frames_ = 0, dropped = 0, corrupted = 0;

	// Move frames between the nodes until both are idle and no timer is
	// due, or pred() holds; time advances to the next timer when idle.
	bool run(Node &a, Node &b, const std::function<bool()> &pred,
		 unsigned max_rounds = 200000);
	void deliver(Node &from, Node &to);
	// Run until n has `count` completions (or the wire is idle); they
	// come back in CQ order.
	std::vector<vrnic_cqe> completions(Node &a, Node &b, Node &n,
					   size_t count);
};

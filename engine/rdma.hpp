// SPDX-License-Identifier: GPL-2.0-or-later
// The RDMA half of the device: PDs, MRs, CQs, QPs (RC, UC, UD and the GSI
// QP1) and the RoCEv2 transports: the reliable one (requester, responder,
// completer, retransmission timers) in transport.cpp, datagrams in
// datagram.cpp.
#pragma once

#include <algorithm>
#include <cstring>
#include <array>
#include <bitset>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "budget.hpp"
#include "cc.hpp"
#include "eq.hpp"
#include "frame_queue.hpp"
#include "gid.hpp"
#include "mr.hpp"
#include "pfc.hpp"
#include "platform.hpp"
#include "qpc_cache.hpp"
#include "roce.hpp"
#include "sched.hpp"
#include "slot_table.hpp"
#include "vrnic_hw.h"

namespace vrnic {

// Reserved bytes of a guest structure: all 0, or the structure is refused.
template <size_t N> bool all_zero(const uint8_t (&b)[N])
{
	return std::all_of(b, b + N, [](uint8_t v) { return v == 0; });
}

struct DeviceCounters;

struct RdmaCounters {
	uint64_t sent_pkts = 0;
	uint64_t rcvd_pkts = 0;
	uint64_t sent_bytes = 0;
	uint64_t rcvd_bytes = 0;
	uint64_t icrc_errors = 0;
	uint64_t malformed = 0;
	uint64_t bad_qp = 0;		// no such QP, wrong state or path
	uint64_t duplicate_request = 0;
	uint64_t out_of_seq_request = 0;
	uint64_t rcvd_rnr_err = 0;	// RNR NAKs received (requester)
	uint64_t send_rnr_err = 0;	// RNR NAKs sent (responder)
	uint64_t rcvd_seq_err = 0;	// sequence NAKs received
	uint64_t retry_timeouts = 0;
	uint64_t retry_exceeded_err = 0;
	uint64_t retry_rnr_exceeded_err = 0;
	uint64_t remote_access_err = 0;	// NAK remote access sent
	uint64_t cq_overflows = 0;
	uint64_t qkey_violations = 0;	// UD: wrong Q_Key, dropped
	uint64_t ud_no_recv = 0;	// UD: no receive WQE, dropped
	uint64_t uc_dropped = 0;	// UC: messages dropped whole
	uint64_t srq_limit_events = 0;
	uint64_t fast_reg = 0;		// REG_MR executed
	uint64_t local_inv = 0;		// LOCAL_INV executed
	uint64_t remote_inv = 0;	// keys invalidated by SEND_WITH_INV
	uint64_t mw_binds = 0;		// BIND_MW executed
	uint64_t bad_sgid = 0;		// UD WQEs naming no usable GID entry
	uint64_t vlan_drops = 0;	// RoCE frames on a VLAN not their GID's
	uint64_t mcast_drops = 0;	// multicast frames the fan-out queue had no room for
	// Congestion control, by mlx5's names: RoCE packets received with
	// ECN CE (the notification point's input), CNPs sent for them, and
	// CNPs received that a QP's reaction point took or ignored.
	uint64_t np_ecn_marked_roce_packets = 0;
	uint64_t np_cnp_sent = 0;
	uint64_t rp_cnp_handled = 0;
	uint64_t rp_cnp_ignored = 0;
	// Selective repeat: packets resent because a SACK or a timeout
	// showed them missing, and such QPs' ack or hole timer expiries that
	// resent something (mlx5's adaptive
	// retransmission counters); SACKs sent and received; requests held
	// out of order, and those dropped past the window or refused.
	uint64_t roce_adp_retrans = 0;
	uint64_t roce_adp_retrans_to = 0;
	uint64_t sack_sent = 0;
	uint64_t sack_rcvd = 0;
	uint64_t ooo_placed = 0;
	uint64_t ooo_dropped = 0;
	uint64_t implied_nak_seq_err = 0;	// READ responses after a gap
	// The QP-context cache: accesses that hit, that missed (and read
	// the context back), and contexts evicted (written back).
	uint64_t qpc_cache_hits = 0;
	uint64_t qpc_cache_misses = 0;
	uint64_t qpc_cache_evictions = 0;
};

// Congestion control, device-wide (SET_CC / QUERY_CC): the algorithm and
// its knobs, and per priority whether CE marks are answered with CNPs
// (np_enable, bit p: priority p) and whether QPs run the algorithm and
// send ECT(0) (rp_enable).  gen changes with every change, so that QPs
// take the new settings at their next event.
struct CcSettings {
	cc::Config cfg;
	uint8_t np_enable = 0xff;
	uint8_t rp_enable = 0xff;
	uint32_t gen = 0;
};

// Queue memory as the device sees it: contiguous, or a copied page list.
struct RingMem {
	uint64_t base = 0;
	std::vector<uint64_t> pages;
	Charge charge;			// the page list's host memory
	[[nodiscard]] uint64_t addr(uint64_t off) const
	{
		if (pages.empty())
			return base + off;
		return pages[(off / VRNIC_RING_PAGE_SIZE) % pages.size()] +
		       off % VRNIC_RING_PAGE_SIZE;
	}
	// Validate and take a ring of `bytes`; false if unusable (nomem
	// set when the page list could not be charged to the budget).
	bool load(const Platform &plat, HostBudget &budget, uint64_t base,
		  uint8_t flags, uint64_t bytes, bool &nomem);
};

struct Pd {
	bool valid = false;
	uint32_t gen = 0;		// 12 bits (VRNIC_PD_GEN_MASK)
	uint32_t uctx = 0;
	// Its QPs (XRC targets are in no PD), SRQs, MRs and windows: DESTROY_PD
	// is BUSY while any is left, without walking the tables for them.
	uint32_t refs = 0;
};

// An XRC domain: kernel-owned, shared by the processes that open it.
struct Xrcd {
	bool valid = false;
	uint32_t gen = 0;		// 12 bits, as a PD's
	uint32_t refs = 0;		// its XRC targets and XRC SRQs
};

struct Cq {
	bool valid = false;
	uint16_t gen = 0;
	uint32_t uctx = 0;
	RingMem ring;
	uint64_t dbrec = 0;
	unsigned int log_depth = 0;
	unsigned int eqn = 0;
	uint32_t pi = 0;
	uint32_t ci = 0;		// last consumer index read from dbrec
	uint8_t arm = 0;		// VRNIC_CQ_ARM_* or 0
	// pi after the newest solicited or error completion (what a
	// SOLICITED arm fires for), valid when sol_any.
	uint32_t sol_pi = 0;
	bool sol_any = false;
	bool error = false;
	unsigned int refs = 0;		// QPs using it
	Charge events;			// what its held EQ events may cost
};

struct Srq {
	bool valid = false;
	uint16_t gen = 0;
	uint32_t srqn = 0;		// its handle, as events name it
	uint32_t uctx = 0;
	uint32_t pdn = 0;
	RingMem ring;
	uint64_t dbrec = 0;
	unsigned int log_depth = 0, shift = 0;
	uint32_t head = 0;		// next WQE to take
	uint32_t limit = 0;		// armed limit, 0 = off
	unsigned int refs = 0;		// QPs using it
	Charge events;			// what its held EQ event may cost
	uint8_t type = VRNIC_SRQT_BASIC;
	uint32_t cqn = 0;		// XRC: where its receives complete
	uint32_t xrcdn = 0;		// XRC: its domain
};

// One QP attached to one multicast GID.
struct McastAttach {
	std::array<uint8_t, 16> gid{};
	uint32_t qpn = 0;
};

// A send WQE as copied out of the SQ, plus its transport state.
struct SendWqe {
	uint32_t index = 0;		// SQ index it came from
	uint64_t wr_id = 0;
	uint8_t opcode = 0;
	uint8_t flags = 0;
	uint32_t imm = 0;
	uint64_t remote_addr = 0;
	uint32_t rkey = 0;
	uint64_t compare_add = 0;
	uint64_t swap = 0;
	uint32_t length = 0;		// total message length
	uint32_t xrc_srqn = 0;		// XRC_INI: the target's XRC SRQ
	union {
		vrnic_ud_av av{};	// UD and GSI: the destination
		vrnic_reg_mr_wqe reg;	// REG_MR (RC and UC): the WQE as copied
		vrnic_bind_mw_wqe bind;	// BIND_MW (RC and UC): the WQE as copied
	};
	std::vector<vrnic_sge> sges;	// validated local SGEs
	std::vector<uint8_t> inline_data;
	Charge charge;			// this copy's host memory
	// transport
	bool psn_assigned = false;
	uint32_t psn_first = 0;
	uint32_t psn_last = 0;
	uint32_t resp_psn = 0;		// READ: next response PSN expected
	bool done = false;		// response received (READ, atomic)
	uint8_t status = VRNIC_WC_ST_SUCCESS;
};

struct RecvWqe {
	uint32_t index = 0;		// RQ or SRQ index it came from
	uint32_t pdn = 0;		// PD of its lkeys: the QP's or the SRQ's
	uint64_t wr_id = 0;
	std::vector<vrnic_sge> sges;
	uint32_t length = 0;		// sum of SGE lengths
};

// A READ or atomic the responder executed, kept for duplicates.
struct RdResource {
	bool atomic = false;
	uint32_t psn_first = 0;
	uint32_t psn_last = 0;
	uint64_t va = 0;
	uint32_t rkey = 0;
	uint32_t pdn = 0;		// the PD its rkey is checked in
	uint32_t length = 0;
	uint64_t orig = 0;		// atomic result
	// READ response generation
	uint32_t sent = 0;		// response packets sent
	bool pending = false;
};

// Selective repeat (spec: "Selective repeat"), for a QP whose peer agreed
// to it; made on first need and charged to the budget.  As responder, the
// QP holds the requests that arrive after a gap, within kSlots PSNs of
// the one it misses, and answers each with a SACK; they are taken in
// order once the gap fills.  As requester, it resends only what a SACK
// shows missing below the highest PSN held (again on the hole timer), or,
// on an ack timeout, everything unacknowledged.  Slots are by PSN modulo
// kSlots and remember their PSN, so a stale one never matches; marks of
// acknowledged PSNs are cleared.
struct SrState {
	static constexpr unsigned int kSlots = roce::kSackBits;
	struct Held {
		std::vector<uint8_t> frame;
		Charge charge;
		uint32_t psn = 0;
		bool held = false;
	};
	// responder
	// A SACK for a request held in order after the last one at least
	// this often.
	static constexpr unsigned int kSackEvery = 16;
	std::array<Held, kSlots> rx;
	unsigned int nheld = 0;
	uint32_t rx_high = 0;		// the highest PSN held (nheld > 0)
	unsigned int unsacked = 0;	// held in order since the last SACK
	// requester: reported held by the peer; resent (queued: resent_ns
	// 0; sent at resent_ns, at least 1, with the send cursor at
	// resent_front).  A resend is lost once the peer holds a PSN
	// kReorder past resent_front (RACK's rule, RFC 8985), or when the
	// hole timer's period passed.
	static constexpr int32_t kReorder = 3;
	// The hole timer's period, at least this: a resend's round trip on
	// a device thread that a busy host schedules late.
	static constexpr uint64_t kHoleMinNs = 250000;
	// ... and at most this for a QP without an ack timeout (the first
	// periods before round-trip samples, 4 ms, doubled six times).
	static constexpr uint64_t kHoleMaxNs = 256000000;
	std::array<uint32_t, kSlots> sacked_psn{};
	std::array<uint32_t, kSlots> resent_psn{};
	std::array<uint32_t, kSlots> resent_front{};
	std::array<uint64_t, kSlots> resent_ns{};
	// A spraying QP (spray_paths > 1): when each PSN last left through
	// the send cursor.  Its paths differ in delay, so a hole below a PSN
	// the peer holds may be a packet still on a slower path: it counts
	// as lost only once sent longer ago than Rdma::sr_reorder_ns()
	// (RACK's reordering window, RFC 8985), and the hole timer comes
	// back for it then.  Without the window, spraying over 64 ports sent
	// 1.14 to 1.16 packets per 4 KiB delivered (make bench, multipath).
	static constexpr uint64_t kReorderMinNs = 50000;
	std::array<uint32_t, kSlots> sent_psn{};
	std::array<uint64_t, kSlots> sent_ns{};
	std::bitset<kSlots> sacked, resent;
	std::deque<uint32_t> redo;	// PSNs to resend, at most kSlots
	// The highest PSN reported held (valid while past una_psn), and the
	// hole timer's doublings since the last round-trip sample.
	uint32_t high_sack = 0;
	bool any_sack = false;
	uint8_t hole_backoff = 0;
	Charge self;

	[[nodiscard]] bool is_sacked(uint32_t psn) const
	{
		return sacked[psn % kSlots] && sacked_psn[psn % kSlots] == psn;
	}
	[[nodiscard]] bool is_resent(uint32_t psn) const
	{
		return resent[psn % kSlots] && resent_psn[psn % kSlots] == psn;
	}
	void note_sent(uint32_t psn, uint64_t now)
	{
		sent_psn[psn % kSlots] = psn;
		sent_ns[psn % kSlots] = std::max<uint64_t>(now, 1);
	}
	// When psn last left (0: not known, as for a PSN sent before the
	// QP sprayed, or kSlots PSNs ago).
	[[nodiscard]] uint64_t sent_at(uint32_t psn) const
	{
		return sent_psn[psn % kSlots] == psn ? sent_ns[psn % kSlots] : 0;
	}
};

struct Qp {
	bool valid = false;
	uint8_t type = VRNIC_QPT_RC;	// enum vrnic_qp_type
	uint16_t gen = 0;
	uint32_t qpn = 0;
	uint32_t uctx = 0;
	uint32_t pdn = 0;
	uint32_t send_cqn = 0;
	uint32_t recv_cqn = 0;
	RingMem sq, rq;
	// Host memory held for the QP's lifetime: its responder resources
	// and its receive WQE copy, charged once at CREATE_QP.
	Charge reserve;
	uint64_t dbrec = 0;
	unsigned int sq_log = 0, rq_log = 0, sq_shift = 0, rq_shift = 0;
	vrnic_qp_attr attr{};
	roce::Path path;
	uint32_t mtu = 256;
	// Congestion control (congestion.cpp).  Notification point: one
	// CNP per np_min_time_between_cnps to the peer QP.  Reaction point:
	// the device's algorithm for this QP when it runs one (cc_on), taken
	// from CcSettings at generation cc_gen; cc_at its timer in the heap
	// (0: none); cc_window the bytes in flight it allows (0: any);
	// cc_rate_mbps the pacer's rate as QUERY_QP reports it (0: not
	// limited).  probes: the send times of the newest packets that ask
	// for an ACK, for an algorithm that measures the round trip; never a
	// retransmission's (a rewind drops them and none is taken below
	// probe_floor, as Karn's rule says).
	static constexpr unsigned int kProbes = 8;
	uint32_t cc_gen = ~0u;
	uint32_t cc_rate_mbps = 0;
	cc::CcSlot rp;
	cc::CnpLimiter cnp_limiter;
	uint64_t cc_at = 0;
	uint64_t cc_window = 0;
	std::array<uint64_t, kProbes> probe_ns{};
	std::array<uint32_t, kProbes> probe_psn{};
	uint32_t probe_floor = 0;
	bool probe_floor_on = false;	// a rewind's floor not yet acked past
	bool cc_on = false;
	bool cc_dirty = true;		// the address changed: sync again
	uint8_t nprobes = 0;

	// requester
	uint32_t sq_head = 0;		// next SQ index to fetch
	std::deque<SendWqe> inflight;	// fetched, not yet completed
	size_t send_idx = 0;		// inflight[] being transmitted
	uint32_t send_off = 0;		// bytes of it already sent
	uint32_t next_psn = 0;
	uint32_t una_psn = 0;		// oldest PSN not acknowledged
	unsigned int retry_left = 0;
	unsigned int rnr_left = 0;
	uint32_t srqn = 0;		// responder: 0, or receives from this SRQ
	uint32_t xrcdn = 0;		// XRC_TGT: its domain
	// XRC_TGT: the slots of the targets before and after it in
	// Rdma's list of them (kNoSlot: none), which allocates nothing.
	uint32_t xrc_prev = 0, xrc_next = 0;
	uint64_t ack_deadline = 0;	// 0: not armed
	uint64_t rnr_deadline = 0;	// 0: not waiting
	// An RNR NAK acted on: the request it named (rnr_psn) has not gone
	// out again yet, so further RNR NAKs are ignored.  rnr_backoff: RNR
	// NAKs for rnr_psn in a row, each doubling the wait; progress clears.
	uint32_t rnr_psn = ~0u;
	bool rnr_waiting = false;
	uint8_t rnr_backoff = 0;
	bool last_wqe_posted = false;	// SRQ QP in ERR: event sent
	bool sqd_notify = false;	// in SQD: SQ_DRAINED event when drained
	bool sq_kick = false;
	// In SQD: the SQ index up to which requests count as begun, the
	// producer index of the doorbells rung before the move (the consumer
	// posted them first); SQD drains them and begins none after.
	uint32_t sqd_pi = 0;
	// A sequence NAK started a go-back-N that has made no progress yet:
	// further sequence NAKs are ignored until una_psn moves or the ack
	// timer fires (rxe's started_retry).
	bool nak_retrying = false;

	// responder
	bool nak_sent = false;
	bool recv_active = false;
	uint32_t epsn = 0;
	uint32_t msn = 0;
	uint32_t rq_head = 0;
	RecvWqe recv;
	uint32_t recv_off = 0;
	uint8_t resp_state = 0;		// 0 idle, 1 in SEND, 2 in WRITE, 3 UC drop
	uint64_t write_va = 0;
	uint32_t write_left = 0;
	uint32_t write_total = 0;
	uint32_t write_rkey = 0;
	std::deque<RdResource> resources;
	bool ack_pending = false;
	uint8_t ack_syndrome = 0;
	uint32_t ack_psn = 0;

	bool flush_pending = false;

	// Selective repeat's state once needed (sr() says whether MODIFY_QP's
	// transport flags set it).  sack_pending: a SACK PFC held back.
	bool sack_pending = false;
	std::unique_ptr<SrState> sr_st;
	uint64_t sr_at = 0;		// the hole timer (0: not armed)
	// Its round trip as the probes measure it (RFC 6298's smoothed RTT
	// and variation; 0: no sample yet), for the hole timer's period.
	uint64_t srtt_ns = 0;
	uint64_t rttvar_ns = 0;

	// Rate limiter of its request packets (transmit()): rate 0, the
	// default, is unlimited and costs one test per packet.  pace_at: the
	// time it waits for (0: not waiting), in the timer heap meanwhile.
	cc::Pacer pacer;
	uint64_t pace_at = 0;

	[[nodiscard]] bool datagram() const
	{
		return vrnic_qpt_is_datagram(type) != 0;
	}
	[[nodiscard]] bool xrc() const
	{
		return type == VRNIC_QPT_XRC_INI || type == VRNIC_QPT_XRC_TGT;
	}
	// The peer agreed to selective repeat (MODIFY_QP's TRANSPORT).
	[[nodiscard]] bool sr() const
	{
		return le(attr.transport_flags) & VRNIC_QP_TF_SELECTIVE_REPEAT;
	}
	// The PSNs it keeps in flight at most (MODIFY_QP's TRANSPORT; 0:
	// VRNIC_SEND_WINDOW_MAX), IRN's BDP cap.
	[[nodiscard]] int32_t send_window() const
	{
		const uint16_t w = le(attr.send_window);
		return w ? int32_t(w) : int32_t(VRNIC_SEND_WINDOW_MAX);
	}
	// The PSNs it may keep unacknowledged: its send window, or fewer
	// when a window-based algorithm allows fewer bytes (at least one
	// packet always may go).
	[[nodiscard]] int32_t flight_pkts() const
	{
		const int32_t win = send_window();
		if (!cc_window)
			return win;
		const uint64_t pkts = (cc_window + mtu - 1) / mtu;
		return int32_t(std::clamp<uint64_t>(pkts, 1, uint64_t(win)));
	}
	// Whether packet idx of a message, at psn, asks for an ACK: the
	// last of the message, every 32nd, or sooner when the window is
	// smaller (every half window, and the packet that fills it).  A
	// window of 16 (send_window, or Swift's first) filled before any
	// packet asked, and the QP waited for its ack timer once per window.
	[[nodiscard]] bool asks_ack(uint32_t idx, uint32_t psn, bool last) const
	{
		const int32_t win = flight_pkts();
		const uint32_t every = uint32_t(std::clamp(win / 2, 1, 32));
		return last || idx % every == every - 1 ||
		       roce::psn_diff(psn, una_psn) + 1 >= win;
	}
	// The UDP source ports its request packets spread over
	// (MODIFY_QP's TRANSPORT): only with selective repeat, whose
	// receiver places what arrives out of order; else one.
	[[nodiscard]] unsigned spray_paths() const
	{
		return sr() && attr.spray_paths > 1 ? attr.spray_paths : 1;
	}
	// Its requester works: RTS, or SQD finishing the requests it began
	// (IBA 10.3.1: a QP in SQD completes the work requests in progress,
	// resending what was lost, and begins no new one).
	[[nodiscard]] bool sends() const
	{
		return attr.state == VRNIC_QPS_RTS || attr.state == VRNIC_QPS_SQD;
	}
	// A request SQD lets go on: one it began, or one rung before SQD.
	[[nodiscard]] bool sqd_begun(const SendWqe &w) const
	{
		return w.psn_assigned || int32_t(w.index - sqd_pi) < 0;
	}
	// Every send request it began has completed: what SQD waits for.
	[[nodiscard]] bool sq_drained() const
	{
		if (datagram())
			return true;
		if (attr.state == VRNIC_QPS_SQD && int32_t(sq_head - sqd_pi) < 0)
			return false;	// rung before SQD, not fetched yet
		return inflight.empty() || !sqd_begun(inflight.front());
	}
	// Acknowledged, retransmitted: RC, and XRC on either side.
	[[nodiscard]] bool reliable() const
	{
		return type == VRNIC_QPT_RC || xrc();
	}
	// The transport bits its packets carry.
	[[nodiscard]] uint8_t wire_transport() const
	{
		return datagram() ? roce::UD : type == VRNIC_QPT_UC ? roce::UC :
		       xrc() ? roce::XRC : roce::RC;
	}
};

// Copy len bytes into the byte range [off, off + len) of a WQE's SGE
// list, every piece checked against its MR (LOCAL_WRITE) first.
bool scatter_sges(const Platform &plat, const MrTable &mrs, uint32_t pdn,
		  const std::vector<vrnic_sge> &sges, uint32_t off,
		  const uint8_t *src, uint32_t len);

// What the scheduler did, for tests: its cost counted in visits and
// timer entries, never in time.
struct SchedCounters {
	uint64_t polls = 0;		// poll() calls that ran the QP pass
	uint64_t visits = 0;		// active-list entries taken (stale ones too)
	uint64_t timer_calls = 0;	// timer() calls
	uint64_t timer_pops = 0;	// timer heap entries popped
	uint64_t paced = 0;		// packets held back by a pacer
	uint64_t qpc_stalls = 0;	// passes ended to pay for cache misses
	uint64_t qpc_stall_ns = 0;	// the time they asked for
	uint64_t qpc_ctx_mismatch = 0;	// contexts read back unlike written
	uint64_t alloc_probes = 0;	// slots allocations looked at
	// A user of a PD, XRC domain or user context let go that the count
	// did not hold: always 0 unless the accounting has a bug (the unit
	// tests and the fuzz targets check it).
	uint64_t ref_mismatch = 0;
};

// Lifetimes: no reference or iterator into device state survives a call
// that can change a QP's state.  The rule that makes this hold:
// - A call that moves a QP to ERR (qp_error(), nak(fatal), resp_fail(),
//   requester_error(), fail_fetched(), sq_producer()) changes the state
//   and marks the QP for flushing; it never frees, clears or reorders a
//   per-QP container (inflight, resources, recv and their SGE lists).
// - Those containers shrink only at the top level: flush() from poll(),
//   MODIFY_QP to RESET and DESTROY_QP (admin, nothing held), DESTROY_SRQ
//   and DESTROY_PD purging an XRC target's copies (admin), and
//   retire()/take_resource(), whose callers hold no reference into the
//   container they pop afterwards.
// - A loop re-checks the QP's state after every call that can fail and
//   stops once the QP left the state it started in.
// - The engine is never re-entered (Device::enter), so nothing changes
//   behind a caller's back during a platform callback either.
// - The scheduler's active list and timer heap name QPs by handle and
//   look each up when its turn or deadline comes; DESTROY_QP drops the
//   slot's entries, and a handle of a reused slot finds nothing.
class Rdma {
public:
	Rdma(const Platform &plat, HostBudget &budget, DeviceCounters &dcnt,
	     std::array<EventQueue, VRNIC_MAX_EQS> &eqs,
	     const std::array<bool, VRNIC_NUM_DB_PAGES> &uctx_used,
	     const std::array<uint8_t, 6> &mac, const uint32_t &port_mtu,
	     PortPause &pfc);

	void reset();
	// The QP slots a create may take: every one, or with a limited
	// cache whose contexts the driver gave, those the memory holds.
	[[nodiscard]] uint32_t qp_slots() const
	{
		return qpc_.limited() && qpc_mem_set_ ? qpc_entries_ : qps_.size();
	}
	// Admin commands 0x10..0x1f; false if the opcode is not ours.
	bool admin(const vrnic_admin_cmd &cmd, uint8_t &status,
		   uint32_t &result);
	// Data path doorbell on page `page` (0 = kernel); false = refused.
	bool doorbell(uint32_t page, uint32_t off, uint32_t value);
	void receive(std::span<const uint8_t> frame);
	// Deferred work: fetch WQEs, transmit, respond, flush.  Returns
	// true when work remains (budget exhausted).
	bool poll();
	void timer();
	// A PFC or PAUSE frame changed what may be sent: resume what waited
	// and arm the timer for the next pause to end.
	void pause_changed();
	// A user context went away: its objects must be gone already.
	[[nodiscard]] bool uctx_in_use(uint32_t uctx) const;

	[[nodiscard]] const RdmaCounters &counters() const { return cnt_; }
	// Congestion control settings; a caller that changes them bumps gen.
	[[nodiscard]] CcSettings &cc_settings() { return cc_; }
	[[nodiscard]] const CcSettings &cc_settings() const { return cc_; }
	[[nodiscard]] const Qp *qp(uint32_t qpn) const;
	[[nodiscard]] const FrameQueue &loopback() const { return loopback_; }
	[[nodiscard]] const SchedCounters &sched_counters() const { return sched_cnt_; }
	[[nodiscard]] size_t active_qps() const { return active_.size(); }
	[[nodiscard]] size_t timer_entries() const { return timers_.size(); }
	// Pace a QP's request packets at rate_Bps (0: unlimited), bursts of
	// burst_bytes (0: Pacer::default_burst).  The engine's own hook for
	// congestion control and tests; false if there is no such QP.
	bool set_qp_rate(uint32_t qpn, uint64_t rate_Bps, uint64_t burst_bytes = 0);
	// The QP-context cache model (spec "QP-context cache"): entries
	// (0: unlimited) and what a miss costs.  A new size starts empty.
	void set_qpc(uint32_t entries, uint32_t miss_ns);
	[[nodiscard]] const QpcCache &qpc() const { return qpc_; }
	[[nodiscard]] uint32_t qpc_miss_ns() const { return qpc_miss_ns_; }
	uint8_t set_qpc_mem(const vrnic_admin_set_qpc_mem &c);
	// A QP's context as the device writes it back.
	[[nodiscard]] static vrnic_qpc qpc_record(const Qp &qp);
	// The stall a pass ends with once the misses owe this much.
	static constexpr int64_t kQpcStallSlackNs = 20000;
	// One stall lasts at most this, and at least one QP's turn comes
	// between two; the misses owe at most kQpcMaxDebtNs (the rest of a
	// flood of misses is forgotten).
	static constexpr int64_t kQpcMaxStallNs = 1000000;
	static constexpr int64_t kQpcMaxDebtNs = 100000000;
	// SET_QPC_MEM's smallest table: one chunk of QP slots.
	static constexpr uint32_t kQpcMinEntries = SlotTable<Qp>::kChunk;

	static constexpr unsigned int kPktBudget = 256;
	// Unacknowledged packets a QP may have in flight (fewer if its
	// MODIFY_QP said so: Qp::send_window()).
	static constexpr unsigned int kWindow = VRNIC_SEND_WINDOW_MAX;
	// A selective-repeat peer holds all the window may have past a gap.
	static_assert(kWindow <= SrState::kSlots);
	// Frames this device sends to itself, received by the next poll().
	static constexpr size_t kLoopbackBytes = 2 << 20;
	// Multicast frames waiting to be fanned out (from the wire and the
	// loopback); more are dropped, as a switch would.
	static constexpr size_t kMcastBytes = 256 << 10;
	// Send WQEs fetched ahead of the window: a QP holds at most
	// kWindow + kLookahead copies (each charged to the budget).
	static constexpr unsigned int kLookahead = 16;
	// Host bytes charged per copied send WQE: the copy and its stride.
	[[nodiscard]] static uint64_t send_wqe_charge(const Qp &qp)
	{
		return send_wqe_charge(qp.sq_shift);
	}
	[[nodiscard]] static uint64_t send_wqe_charge(unsigned int sq_shift)
	{
		return sizeof(SendWqe) + (uint64_t(1) << sq_shift);
	}
	// Send WQE copies each RC, UC and XRC initiator QP reserves at
	// CREATE_QP: while it holds fewer, a copy is taken from that
	// reservation, so a QP can always send whatever the others hold.
	// Copies beyond it are charged to the budget, per user context.
	static constexpr unsigned int kReservedCopies = 16;
	// The object tables' host memory (slot_table.hpp): it grows with
	// the slots used and stays over resets, with the generations.
	[[nodiscard]] uint64_t table_bytes() const
	{
		return pds_.bytes() + cqs_.bytes() + qps_.bytes() + srqs_.bytes() +
		       xrcds_.bytes() + mrs_.table_bytes();
	}
	[[nodiscard]] uint32_t xrc_targets() const { return xrc_count_; }
	// Slots the tables' walks have looked at (tests): destroying a PD,
	// SRQ or XRC domain or a user context looks at none of them.
	[[nodiscard]] uint64_t slots_walked() const
	{
		return pds_.scanned() + cqs_.scanned() + qps_.scanned() +
		       srqs_.scanned() + xrcds_.scanned() + mrs_.scanned();
	}

	// How long a spraying QP's hole may be a packet still on a slower
	// path (SrState::sent_ns); 0 for a QP that does not spray.
	[[nodiscard]] uint64_t sr_reorder_ns(const Qp &qp) const;

private:
	template <typename T> T *lookup(SlotTable<T> &tab, uint32_t handle);
	template <typename T>
	T *alloc(SlotTable<T> &tab, uint32_t first, uint32_t &used_mark,
		 uint32_t &next, uint32_t &index, uint32_t limit = ~0u);
	template <typename T> void forget_events(uint32_t handle);
	Qp *find_qp(uint32_t qpn);
	Cq *find_cq(uint32_t cqn);
	Srq *find_srq(uint32_t srqn);

	uint8_t create_pd(const vrnic_admin_create_pd &c, uint32_t &result);
	uint8_t destroy_pd(uint32_t pdn);
	uint8_t create_cq(const vrnic_admin_create_cq &c, uint32_t &result);
	uint8_t destroy_cq(uint32_t cqn);
	uint8_t create_qp(const vrnic_admin_create_qp &c, uint32_t &result);
	uint8_t modify_qp(const vrnic_admin_modify_qp &c);
	uint8_t query_qp(const vrnic_admin_query_qp &c);
	uint8_t destroy_qp(uint32_t qpn);
	uint8_t create_srq(const vrnic_admin_create_srq &c, uint32_t &result);
	uint8_t modify_srq(const vrnic_admin_modify_srq &c);
	uint8_t destroy_srq(uint32_t srqn);
	uint8_t alloc_xrcd(uint32_t &result);
	uint8_t create_xrc_tgt(const vrnic_admin_create_qp &c, uint32_t &result);
	uint8_t dealloc_xrcd(uint32_t xrcdn);
	// XRC_TGT: take PD, SRQ and CQ from the XRC SRQ a request names.
	bool xrc_target(Qp &qp, uint32_t srqn);
	uint8_t mcast(const vrnic_admin_mcast &c, bool attach);
	uint8_t set_gid(const vrnic_admin_set_gid &c);
	bool fetch_srq(Qp &qp, Srq &srq);
	uint8_t apply_attr(Qp &qp, const vrnic_qp_attr &a, uint32_t mask);

	// completion queues
	bool cq_post(uint32_t cqn, vrnic_cqe cqe, bool solicited);
	void complete_send(Qp &qp, const SendWqe &w, uint8_t status);
	void complete_recv(Qp &qp, uint8_t status, uint8_t opcode,
			   uint32_t len, uint32_t imm = 0, uint8_t flags = 0,
			   bool solicited = false, int64_t src_qp = -1);
	// The QP enters ERR and flushes; event: post QP_FATAL (an error the
	// device found, not the consumer's MODIFY_QP).
	void qp_error(Qp &qp, bool event = true);
	void flush(Qp &qp, unsigned int &budget);

	// requester
	enum class SqPi { Ok, Unreadable, BeyondRing };
	SqPi peek_sq_producer(const Qp &qp, uint32_t &pi);
	bool sq_producer(Qp &qp, uint32_t &pi);
	void fetch_sq(Qp &qp, unsigned int &budget);
	// Send WQE copies the QP may hold: the ring, at most the window and
	// the lookahead.
	[[nodiscard]] static size_t fetch_cap(const Qp &qp)
	{
		return std::min<size_t>(size_t(1) << qp.sq_log, kWindow + kLookahead);
	}
	bool read_send_wqe(Qp &qp, uint32_t index, SendWqe &w, uint8_t &status);
	void transmit(Qp &qp, unsigned int &budget);
	// Sends the packet at w's cursor; whether it asks for an ACK.
	bool send_request_packet(Qp &qp, SendWqe &w);
	bool gather(Qp &qp, const SendWqe &w, uint32_t off, uint8_t *dst,
		    uint32_t len);
	void retire(Qp &qp);
	void sqd_check(Qp &qp);
	void progress(Qp &qp);
	void rewind(Qp &qp, uint32_t psn);
	static uint32_t resume_psn(const Qp &qp);
	void arm_ack_timer(Qp &qp);
	void handle_response(Qp &qp, const roce::Packet &p);
	void requester_error(Qp &qp, SendWqe &w, uint8_t status);
	bool take_rnr_retry(Qp &qp);
	void fail_fetched(Qp &qp, SendWqe &&w, uint8_t status);
	uint8_t execute_local(Qp &qp, const SendWqe &w);

	// datagrams (datagram.cpp)
	[[nodiscard]] uint32_t ud_mtu() const;
	void ud_send(Qp &qp, unsigned int &budget);
	bool ud_transmit(Qp &qp, const SendWqe &w, uint8_t &status);
	void ud_receive(Qp &qp, const roce::Packet &p);
	// Did a packet come from the peer a connected QP's address vector
	// names (its GIDs swapped)?  The VLAN is the caller's to check.
	[[nodiscard]] static bool from_peer(const Qp &qp, const roce::Path &p)
	{
		return std::memcmp(p.sgid.data(), qp.path.dgid.data(), 16) == 0 &&
		       std::memcmp(p.dgid.data(), qp.path.sgid.data(), 16) == 0;
	}
	// Congestion control (congestion.cpp): a CE-marked packet for a
	// connected QP, and a CNP from the wire.
	void notify_congestion(Qp &qp, const roce::Packet &p);
	void cnp_received(const roce::Packet &p);
	// Take the device's current settings if they changed (or the QP's
	// address did): the algorithm, and ECT(0) on its packets.
	void cc_sync(Qp &qp);
	// The algorithm's output to the pacer, and its timer to the heap.
	void cc_apply(Qp &qp, uint64_t now);
	// A request packet of `bytes` left (psn, asking for an ACK or not).
	void cc_sent(Qp &qp, uint32_t psn, bool ackreq, uint32_t bytes);
	// The peer acknowledged `acked` new PSNs, rtt the round trip of a
	// probe they covered (0: none).
	void cc_acked(Qp &qp, uint64_t rtt, uint32_t acked);
	// RTT probes (congestion.cpp): the send time of a packet that asks
	// for an ACK, and the round trip of the newest one an ACK covers.
	void probe_sent(Qp &qp, uint32_t psn, uint64_t now);
	uint64_t probe_acked(Qp &qp, uint32_t psn_after, uint64_t now);
	// Selective repeat's: a resent PSN's probe goes; a SACK's round
	// trip from the probes it newly reports held.
	void drop_probe(Qp &qp, uint32_t psn);
	uint64_t probe_sacked(Qp &qp, const SrState &s, uint64_t now);

	void mcast_fanout(unsigned int &budget);
	// Remove attachments; the frame being fanned out keeps its place.
	template <typename Pred> void erase_mcast(Pred pred)
	{
		size_t keep = 0;
		const size_t pos = mcast_pos_;
		for (size_t i = 0; i < mcast_.size(); i++) {
			if (pred(mcast_[i])) {
				if (i < pos)
					mcast_pos_--;
				continue;
			}
			mcast_[keep++] = mcast_[i];
		}
		mcast_.resize(keep);
	}

	// responder
	void handle_request(Qp &qp, const roce::Packet &p);
	bool write_or_flush(Qp &qp, const roce::Packet &p);
	bool resource_free(Qp &qp);
	void ack_upto(Qp &qp, uint32_t psn_after);
	void answered(Qp &qp, SendWqe &w);
	void take_resource(Qp &qp, RdResource &r);
	void resp_fail(Qp &qp, uint8_t syndrome);
	void handle_duplicate(Qp &qp, const roce::Packet &p);
	bool fetch_recv(Qp &qp);
	bool load_recv(Qp &qp, const RingMem &ring, uint32_t index,
		       unsigned int log, unsigned int shift);
	bool scatter(Qp &qp, std::span<const uint8_t> data);
	// A NAK for the request at psn (default: the expected PSN, which is
	// the request that just failed); fatal moves the QP to ERR.
	void nak(Qp &qp, uint8_t syndrome, bool fatal,
		 std::optional<uint32_t> psn = std::nullopt);
	void nak_gap(Qp &qp);
	void respond(Qp &qp, unsigned int &budget);
	void poll_qp(Qp &qp, unsigned int &budget);
	// force: even on a paused priority (the QP is going away).
	void send_ack(Qp &qp, uint8_t syndrome, uint32_t psn, bool force = false);
	void send_read_response(Qp &qp, RdResource &r, unsigned int &budget);

	// selective repeat
	SrState *sr_state(Qp &qp);
	void sr_hold(Qp &qp, std::span<const uint8_t> frame, const roce::Packet &p);
	void sr_drain(Qp &qp);
	void sr_discard(Qp &qp);
	void send_sack(Qp &qp);
	void handle_sack(Qp &qp, const roce::Packet &p);
	struct HoleScan {
		uint64_t oldest = 0;	// the oldest resend in flight left (0: none)
		uint64_t due = 0;	// the first hole in the reordering window is lost (0: none)
		unsigned int again = 0;	// resends queued again, lost as well
	};
	HoleScan sr_queue_holes(Qp &qp, SrState &s, uint32_t end, bool timeout);
	bool sr_resend(Qp &qp, uint32_t psn);
	[[nodiscard]] uint64_t sr_hole_period(const Qp &qp) const;
	void sr_hole_timer(Qp &qp);
	void sr_arm(Qp &qp, uint64_t at);

	// The path of qp's packet h: its own, or with a QP that sprays, one
	// of spray_paths() UDP source ports for each request PSN (the
	// responder holds what arrives out of order).  ACKs, SACKs and READ
	// responses, which the requester takes only in order, keep the QP's
	// own port.  Not a copy per packet: qp.path itself, or spray_path_
	// (valid until the next call).
	[[nodiscard]] const roce::Path &pkt_path(const Qp &qp,
						 const roce::Headers &h);
	void xmit(const Qp &qp, const roce::Headers &h,
		  std::span<const uint8_t> payload);
	void xmit_frame(size_t len);

	// scheduler
	// The QP may have work: it gets a turn in the next poll() pass.
	void activate(const Qp &qp);
	// What the QP's next turn would act on without any new event.
	[[nodiscard]] static bool has_work(const Qp &qp);
	// The QP's deadline of this kind is at: into the timer heap, and the
	// platform timer re-armed if it became the earliest.
	void set_deadline(const Qp &qp, TimerKind kind, uint64_t at);
	// A request packet of about `bytes` may leave now; if not, the QP
	// waits in the timer heap for its pacer.
	bool pace_ok(Qp &qp, uint32_t bytes);
	// One expired heap entry.
	void expire(const TimerHeap::Entry &e, uint64_t now);
	// A QP slot's object is gone: its scheduler entries go too.
	void sched_forget(uint32_t slot);
	void arm_timer();
	// PFC: may this QP's priority (its traffic class >> 5, as the PCP
	// and DSCP >> 3 it sends with) not send now?
	// Frames to this device's own MAC never reach the wire (they loop
	// back): a pause does not hold them.
	[[nodiscard]] bool prio_paused(uint8_t traffic_class, const uint8_t *dmac)
	{
		return pfc_.any() && std::memcmp(dmac, mac_.data(), 6) != 0 &&
		       pfc_.paused(traffic_class >> 5, plat_.now_ns());
	}

	const Platform &plat_;
	HostBudget &budget_;
	DeviceCounters &dcnt_;
	std::array<EventQueue, VRNIC_MAX_EQS> &eqs_;
	const std::array<bool, VRNIC_NUM_DB_PAGES> &uctx_used_;
	// The station address, Device's (SET_MAC changes it): the frames
	// RoCE sends to it loop back.
	const std::array<uint8_t, 6> &mac_;
	const uint32_t &port_mtu_;	// L3 MTU of the port
	PortPause &pfc_;		// Device's: the port's MAC control
	SlotTable<Pd> pds_;
	SlotTable<Cq> cqs_;
	SlotTable<Qp> qps_;
	SlotTable<Srq> srqs_;
	SlotTable<Xrcd> xrcds_;
	// The slots of each table used since the last reset are [0, n): a
	// reset restores only those, and the sweeps over a table stop there.
	// A slot past the mark is as the constructor or the last reset left it
	// (only creates write an invalid slot, and they move the mark first).
	struct Used {
		uint32_t pd = 0, cq = 0, qp = 0, srq = 0, xrcd = 0;
	} used_;
	Used next_;	// where each table's round-robin allocation goes on
	// Objects (PDs, CQs, QPs, SRQs) of each user context, so that
	// destroying one needs no walk; XRC targets count in the kernel's (0).
	std::array<uint32_t, VRNIC_NUM_DB_PAGES> uctx_objs_{};
	// The XRC targets, linked through their slots (Qp::xrc_prev and
	// xrc_next): DESTROY_PD and DESTROY_SRQ purge what those hold of
	// the PD or SRQ, and look at those QPs only.
	static constexpr uint32_t kNoSlot = ~0u;
	uint32_t xrc_head_ = kNoSlot;
	uint32_t xrc_count_ = 0;
	void xrc_tgt_link(Qp &qp, uint32_t slot);
	void xrc_tgt_unlink(const Qp &qp);
	template <typename F> void each_xrc_tgt(F &&f)
	{
		for (uint32_t s = xrc_head_; s != kNoSlot;) {
			Qp &q = *qps_.find(s);
			s = q.xrc_next;
			f(q);
		}
	}
	// A user of the PD, XRC domain or user context went away.
	void pd_unref(uint32_t pdn);
	void xrcd_unref(uint32_t xrcdn);
	void uctx_unref(uint32_t uctx);
	static void mark(uint32_t &n, uint32_t i) { n = std::max(n, i + 1); }
	std::vector<McastAttach> mcast_;	// at most VRNIC_MAX_MCAST_ATTACH
	MrTable mrs_;
	GidTable gids_;
	RdmaCounters cnt_;
	CcSettings cc_;
	std::vector<uint8_t> frame_;	// one outgoing frame, allocated once
	roce::Path spray_path_;		// pkt_path()'s answer when it sprays
	// The active-QP scheduler (sched.hpp).  turn_: the QP whose turn
	// poll() is running (its own activation only asks for another turn:
	// turn_again_); in_pass_ and activated_: a QP became active during
	// the pass, so poll() asks to run again.
	ActiveList active_;
	TimerHeap timers_;
	SchedCounters sched_cnt_;
	// The QP-context cache and its backing memory in the guest; the
	// misses' cost not yet paid (negative: a late wake-up paid ahead),
	// and until when the pass waits for it (0: it does not).
	QpcCache qpc_;
	uint32_t qpc_miss_ns_ = 0;
	RingMem qpc_mem_;
	bool qpc_mem_set_ = false;
	uint32_t qpc_entries_ = 0;	// contexts in qpc_mem_ (SET_QPC_MEM)
	// Per slot, a hash of the context last written (0: none).
	std::vector<uint64_t> qpc_written_;
	int64_t qpc_debt_ns_ = 0;
	bool qpc_turn_owed_ = false;
	uint64_t qpc_stall_until_ = 0;
	void qpc_access(Qp &qp);
	void qpc_write(const Qp &qp);
	void qpc_created(const Qp &qp);
	void qpc_forget(uint32_t slot);
	bool qpc_stall(uint64_t now, bool *turn = nullptr);
	bool qpc_paid(uint64_t now);
	uint32_t turn_ = 0;
	bool turn_again_ = false;
	bool in_pass_ = false;
	bool activated_ = false;
	std::vector<uint8_t> scratch_;	// payload staging
	FrameQueue loopback_{kLoopbackBytes};
	// Multicast frames waiting for their fan-out, and how far the one
	// at the front got (mcast_pos_ attachments looked at; mcast_any_: a
	// QP took a copy); mcast_pos_ can go back to 0 mid-frame when the
	// attachments before it are erased.
	FrameQueue mcast_q_{kMcastBytes};
	size_t mcast_pos_ = 0;
	bool mcast_started_ = false;	// the front frame's unit is paid
	bool mcast_any_ = false;
};

} // namespace vrnic

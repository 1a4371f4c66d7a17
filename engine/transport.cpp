// SPDX-License-Identifier: GPL-2.0-or-later
// The RC transport: requester (WQE fetch, segmentation, retransmission),
// completer (ACK/NAK, READ and atomic responses) and responder (PSN
// checks, duplicates, RNR, RDMA WRITE/READ, atomics), over roce.hpp.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "device.hpp"
#include "rdma.hpp"

namespace vrnic {

using namespace roce;

namespace {

constexpr uint8_t kCredits = 0x1f;	// "invalid credit count", as rxe

// PSNs a requester may have outstanding (next_psn - una_psn) and a single
// message may span: below half the 24-bit space, or PSN comparisons
// (psn_diff) would read the window as negative.
constexpr uint32_t kMaxOutstandingPsns = (1u << 23) - 1;

// IBA table 45: RNR NAK timer field to microseconds.
constexpr uint32_t kRnrTimerUs[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

bool is_atomic(uint8_t op)
{
	return op == VRNIC_WR_ATOMIC_CMP_SWP || op == VRNIC_WR_ATOMIC_FETCH_ADD;
}

// Requests the device carries out itself, without packets.
bool is_local(uint8_t op)
{
	return op == VRNIC_WR_LOCAL_INV || op == VRNIC_WR_REG_MR ||
	       op == VRNIC_WR_BIND_MW;
}

// Requests answered by a response rather than an ACK, each holding one
// of the responder's READ/atomic resources (max_rd_atomic).  All but READ
// are one packet.
bool is_rd_atomic(uint8_t op)
{
	return op == VRNIC_WR_RDMA_READ || is_atomic(op) ||
	       op == VRNIC_WR_ATOMIC_WRITE || op == VRNIC_WR_FLUSH;
}

// A READ or atomic response that has not all left yet: an ACK of a later
// request must go behind it, since responses leave in PSN order (respond()).
bool responses_due(const std::deque<RdResource> &resources)
{
	return std::any_of(resources.begin(), resources.end(),
			   [](const RdResource &r) { return r.pending; });
}

// The bytes a request packet's frame will take, for the pacer's "may it
// leave": its payload and the most its headers take (Ethernet, VLAN,
// IPv6, UDP, BTH, RETH, ICRC).  The pacer is charged the frame as built,
// so the estimate decides only when a packet may start, not the rate.
constexpr uint32_t kPaceHdrBytes = 14 + 4 + 40 + 8 + 12 + 16 + 4;

uint32_t pace_estimate(const SendWqe &w, uint32_t send_off, uint32_t mtu)
{
	if (is_rd_atomic(w.opcode))
		return kPaceHdrBytes + 28;	// AtomicETH, the largest
	const uint32_t left = w.length > send_off ? w.length - send_off : 0;
	return kPaceHdrBytes + std::min(left, mtu);
}

// A FLUSH's extended transport header: one placement type or both, at
// one of the two levels, nothing else.
bool valid_feth(uint64_t feth)
{
	const uint64_t type = feth & VRNIC_FLUSH_TYPE_MASK;
	const uint64_t level = feth >> VRNIC_FLUSH_LEVEL_SHIFT;

	return type != 0 &&
	       !(type & ~uint64_t(VRNIC_FLUSH_GLOBAL | VRNIC_FLUSH_PERSISTENT)) &&
	       level <= VRNIC_FLUSH_MR;
}

// Work requests each QP type accepts (bit per enum vrnic_wr_opcode).
// UC has no READ, atomics, FLUSH or SEND with invalidate (no IETH opcode);
// UD and GSI only SEND.
constexpr uint32_t kWrRc = (1u << (VRNIC_WR_BIND_MW + 1)) - 1;
constexpr uint32_t kWrUc = 1u << VRNIC_WR_SEND | 1u << VRNIC_WR_SEND_IMM |
			   1u << VRNIC_WR_RDMA_WRITE |
			   1u << VRNIC_WR_RDMA_WRITE_IMM |
			   1u << VRNIC_WR_LOCAL_INV | 1u << VRNIC_WR_REG_MR |
			   1u << VRNIC_WR_BIND_MW;
constexpr uint32_t kWrUd = 1u << VRNIC_WR_SEND | 1u << VRNIC_WR_SEND_IMM;
// XRC: the RC operations, without the annex A19 ones.
constexpr uint32_t kWrXrc = kWrRc & ~(1u << VRNIC_WR_ATOMIC_WRITE |
				      1u << VRNIC_WR_FLUSH);

uint32_t npkts(uint32_t len, uint32_t mtu)
{
	return len == 0 ? 1 : (len + mtu - 1) / mtu;
}

bool is_response(uint8_t op)
{
	return op >= READ_RESP_FIRST && op <= ATOMIC_ACK;
}

bool starts_message(uint8_t op)
{
	return op == SEND_FIRST || op == SEND_ONLY || op == SEND_ONLY_IMM ||
	       op == SEND_ONLY_INV || op == WRITE_FIRST || op == WRITE_ONLY ||
	       op == WRITE_ONLY_IMM;
}

} // namespace

// ------------------------------------------------------------- wire out

void Rdma::xmit_frame(size_t len)
{
	cnt_.sent_pkts++;
	cnt_.sent_bytes += len;
	if (std::memcmp(frame_.data(), mac_.data(), 6) == 0) {
		// Addressed to this device: loop it back through poll().
		if (!loopback_.push({frame_.data(), len}))
			dcnt_.loopback_drops++;
		plat_.schedule();
		return;
	}
	plat_.send_frame({frame_.data(), len});
}

const roce::Path &Rdma::pkt_path(const Qp &qp, const Headers &h)
{
	const unsigned n = qp.spray_paths();
	if (n <= 1 || h.transport == roce::VENDOR || h.opcode == ACK ||
	    h.opcode == ATOMIC_ACK ||
	    (h.opcode >= READ_RESP_FIRST && h.opcode <= READ_RESP_ONLY))
		return qp.path;
	// Round robin over n ports from the QP's own, in RoCE's range
	// (0xC000 and up, as rdma_flow_label_to_udp_sport): the fabric's
	// ECMP hash takes each to a path.
	spray_path_ = qp.path;
	spray_path_.udp_sport =
		uint16_t(0xc000 | ((qp.path.udp_sport + h.psn % n) & 0x3fff));
	return spray_path_;
}

void Rdma::xmit(const Qp &qp, const Headers &h, std::span<const uint8_t> payload)
{
	const roce::Path &path = pkt_path(qp, h);
	const size_t hl = build_headers(frame_.data(), path, h);
	if (!payload.empty())
		std::memcpy(frame_.data() + hl, payload.data(), payload.size());
	xmit_frame(finish(frame_.data(), path, hl, payload.size()));
}

void Rdma::send_ack(Qp &qp, uint8_t syndrome, uint32_t psn, bool force)
{
	Headers h;

	if (!force && prio_paused(qp.path.traffic_class, qp.path.dmac.data()) &&
	    qp.attr.state != VRNIC_QPS_ERR) {
		// PFC holds the priority: the acknowledgement waits as a
		// pending one (a later one supersedes it, as coalescing
		// would) and leaves from poll() once the pause ends.
		qp.ack_pending = true;
		qp.ack_syndrome = syndrome;
		qp.ack_psn = psn;
		return;
	}
	h.transport = qp.wire_transport();
	h.opcode = ACK;
	h.dqpn = le(qp.attr.dest_qpn);
	h.psn = psn;
	h.syndrome = syndrome;
	h.msn = qp.msn & kPsnMask;
	xmit(qp, h, {});
}

// A request after a gap: one sequence NAK per gap (the expected PSN
// arriving ends the gap), so that a burst behind a loss is not answered
// packet by packet.
void Rdma::nak_gap(Qp &qp)
{
	if (!qp.nak_sent) {
		qp.nak_sent = true;
		send_ack(qp, kAethNakSeq, qp.epsn);
	}
}

void Rdma::nak(Qp &qp, uint8_t syndrome, bool fatal,
	       std::optional<uint32_t> psn)
{
	// A fatal NAK goes out at once even under PFC: the QP it ends
	// keeps nothing pending (one small frame, as a NIC's error path).
	if (fatal)
		qp_error(qp);
	send_ack(qp, syndrome, psn.value_or(qp.epsn));
	if (syndrome == kAethNakRemAccess)
		cnt_.remote_access_err++;
}

// ------------------------------------------------------------ requester

bool Rdma::read_send_wqe(Qp &qp, uint32_t index, SendWqe &w, uint8_t &status)
{
	std::array<uint8_t, 1024> buf;
	const uint32_t stride = 1u << qp.sq_shift;
	const uint64_t addr = qp.sq.addr(
		uint64_t(index & ((1u << qp.sq_log) - 1)) << qp.sq_shift);
	vrnic_send_wqe hdr;

	// Copy the whole WQE once; everything below uses the copy.
	if (!plat_.dma_read(addr, buf.data(), stride)) {
		dcnt_.dma_errors++;
		status = VRNIC_WC_ST_LOC_QP_OP_ERR;
		return false;
	}
	std::memcpy(&hdr, buf.data(), sizeof(hdr));
	w.index = index;
	w.wr_id = le(hdr.wr_id);
	w.opcode = hdr.opcode;
	w.flags = hdr.flags;
	w.imm = hdr.imm_data;
	w.remote_addr = le(hdr.remote_addr);
	w.rkey = le(hdr.rkey);
	w.compare_add = le(hdr.compare_add);
	w.swap = le(hdr.swap);
	const uint32_t ops = qp.datagram() ? kWrUd :
			     qp.type == VRNIC_QPT_UC ? kWrUc :
			     qp.xrc() ? kWrXrc : kWrRc;
	w.xrc_srqn = le(hdr.xrc_srqn) & kPsnMask;
	if (w.opcode >= 32 || !(ops >> w.opcode & 1)) {
		status = VRNIC_WC_ST_LOC_QP_OP_ERR;
		return false;
	}
	if (w.opcode == VRNIC_WR_REG_MR) {
		// Page lists are bus addresses: the kernel's alone.
		if (qp.uctx != 0) {
			status = VRNIC_WC_ST_LOC_QP_OP_ERR;
			return false;
		}
		std::memcpy(&w.reg, buf.data(), sizeof(w.reg));
		return true;
	}
	if (w.opcode == VRNIC_WR_BIND_MW) {
		std::memcpy(&w.bind, buf.data(), sizeof(w.bind));
		return true;
	}
	if (w.opcode == VRNIC_WR_LOCAL_INV)
		return true;	// the key is in rkey; nothing else to read
	if (w.opcode == VRNIC_WR_ATOMIC_WRITE) {
		w.length = 8;	// the value itself is compare_add
		return true;
	}
	if (w.opcode == VRNIC_WR_FLUSH) {
		if (!valid_feth(w.swap)) {
			status = VRNIC_WC_ST_LOC_QP_OP_ERR;
			return false;
		}
		if ((w.swap >> VRNIC_FLUSH_LEVEL_SHIFT) == VRNIC_FLUSH_RANGE &&
		    w.compare_add > VRNIC_MAX_MSG_SIZE) {
			status = VRNIC_WC_ST_LOC_LEN_ERR;
			return false;
		}
		return true;	// no data: length stays 0
	}
	// CREATE_QP made sure the stride holds the header (and UD's AV).
	const uint32_t data = vrnic_send_wqe_data_off(qp.type);
	if (qp.datagram())
		std::memcpy(&w.av, buf.data() + sizeof(hdr), sizeof(w.av));
	if (w.flags & VRNIC_WQE_INLINE) {
		const uint32_t len = le(hdr.inline_len);
		if (is_rd_atomic(w.opcode)) {
			status = VRNIC_WC_ST_LOC_QP_OP_ERR;
			return false;
		}
		if (len > VRNIC_MAX_INLINE || len > stride - data) {
			status = VRNIC_WC_ST_LOC_LEN_ERR;
			return false;
		}
		w.inline_data.assign(buf.begin() + data,
				     buf.begin() + long(data + len));
		w.length = len;
		return true;
	}
	if (hdr.num_sge > VRNIC_MAX_SGE ||
	    data + hdr.num_sge * sizeof(vrnic_sge) > stride) {
		status = VRNIC_WC_ST_LOC_LEN_ERR;
		return false;
	}
	const uint32_t access = is_rd_atomic(w.opcode) ?
				VRNIC_ACCESS_LOCAL_WRITE : 0;
	uint64_t total = 0;
	w.sges.reserve(hdr.num_sge);	// exactly what send_wqe_charge() counts
	for (unsigned int i = 0; i < hdr.num_sge; i++) {
		vrnic_sge s;
		std::memcpy(&s, buf.data() + data + i * sizeof(s), sizeof(s));
		const uint32_t len = le(s.length);
		const Mr *mr;
		if (len == 0)
			continue;
		if (mrs_.check(le(s.lkey), qp.pdn, le(s.addr), len, access, &mr) !=
		    MrCheck::Ok) {
			status = VRNIC_WC_ST_LOC_PROT_ERR;
			return false;
		}
		w.sges.push_back(s);
		total += len;
	}
	if (total > VRNIC_MAX_MSG_SIZE ||
	    (is_atomic(w.opcode) && total != 8)) {
		status = VRNIC_WC_ST_LOC_LEN_ERR;
		return false;
	}
	w.length = uint32_t(total);
	return true;
}

// The SQ producer index from the doorbell record, checked against the
// ring; an unreadable record counts a DMA error.  Nothing else changes.
Rdma::SqPi Rdma::peek_sq_producer(const Qp &qp, uint32_t &pi)
{
	vrnic_qp_dbrec rec;

	if (!plat_.read(qp.dbrec, rec)) {
		dcnt_.dma_errors++;
		return SqPi::Unreadable;
	}
	pi = le(rec.sq_pi);
	return pi - qp.sq_head > (1u << qp.sq_log) ? SqPi::BeyondRing : SqPi::Ok;
}

// The same, for a fetch: false (and the QP in ERR) if unreadable or
// beyond the ring.
bool Rdma::sq_producer(Qp &qp, uint32_t &pi)
{
	const SqPi r = peek_sq_producer(qp, pi);

	if (r == SqPi::BeyondRing)
		plat_.guest_error("vrnic: SQ producer index beyond the ring");
	if (r != SqPi::Ok) {
		qp_error(qp);
		return false;
	}
	return true;
}

// A WQE that failed as it was fetched: queued behind the others so the
// flush completes it, in order, with its own status.
void Rdma::fail_fetched(Qp &qp, SendWqe &&w, uint8_t status)
{
	w.status = status;
	qp.inflight.push_back(std::move(w));
	qp_error(qp);
}

// Copy posted WQEs, no further ahead than the send window can use: each
// takes at least one PSN of the window or is a local operation, so
// kWindow + kLookahead copies keep the window full.  While the QP holds
// fewer than kReservedCopies, a copy uses the QP's reservation (charged
// at CREATE_QP): at most kReservedCopies copies are ever uncharged, since
// one is only added to fewer.  Others are charged to the budget within
// the QP's user context's cap; a copy it cannot take now is not fetched
// yet, and the QP waits (no error) until memory comes back.
void Rdma::fetch_sq(Qp &qp, unsigned int &budget)
{
	const size_t cap = fetch_cap(qp);
	uint32_t pi = 0;

	// SQD fetches what was rung before it, and no further.
	if (qp.attr.state == VRNIC_QPS_SQD && int32_t(qp.sq_head - qp.sqd_pi) < 0)
		pi = qp.sqd_pi;
	else if (qp.attr.state != VRNIC_QPS_RTS || !sq_producer(qp, pi))
		return;
	while (qp.sq_head != pi && qp.inflight.size() < cap && budget > 0) {
		SendWqe w;
		if (qp.inflight.size() >= kReservedCopies &&
		    !w.charge.take(budget_, send_wqe_charge(qp), qp.uctx))
			break;
		uint8_t status = VRNIC_WC_ST_SUCCESS;
		const bool ok = read_send_wqe(qp, qp.sq_head, w, status);
		qp.sq_head++;
		budget--;
		if (!ok) {
			fail_fetched(qp, std::move(w), status);
			return;
		}
		qp.inflight.push_back(std::move(w));
	}
	if (qp.sq_head != pi)
		qp.sq_kick = true;	// come back for the rest
}

// REG_MR and LOCAL_INV, when the SQ reaches them.
uint8_t Rdma::execute_local(Qp &qp, const SendWqe &w)
{
	if (w.opcode == VRNIC_WR_REG_MR) {
		if (!mrs_.fast_register(plat_, w.reg, qp.pdn)) {
			plat_.guest_error("vrnic: REG_MR refused");
			return VRNIC_WC_ST_MW_BIND_ERR;
		}
		cnt_.fast_reg++;
		return VRNIC_WC_ST_SUCCESS;
	}
	if (w.opcode == VRNIC_WR_BIND_MW) {
		if (!mrs_.bind_mw(w.bind, qp.pdn, qp.qpn)) {
			plat_.guest_error("vrnic: BIND_MW refused");
			return VRNIC_WC_ST_MW_BIND_ERR;
		}
		cnt_.mw_binds++;
		return VRNIC_WC_ST_SUCCESS;
	}
	if (!mrs_.invalidate(w.rkey, qp.pdn))
		return VRNIC_WC_ST_MW_BIND_ERR;
	cnt_.local_inv++;
	return VRNIC_WC_ST_SUCCESS;
}

namespace {

// Copy between a local buffer and the byte range [off, off + len) of a
// WQE's SGE list; every piece is checked against its MR first.
template <typename Copy>
bool walk_sges(const MrTable &mrs, uint32_t pdn,
	       const std::vector<vrnic_sge> &sges, uint32_t off, uint32_t len,
	       uint32_t access, Copy copy)
{
	uint32_t done = 0;

	for (const auto &s : sges) {
		if (done == len)
			break;
		const uint32_t slen = le(s.length);
		if (off >= slen) {
			off -= slen;
			continue;
		}
		const uint32_t n = std::min(len - done, slen - off);
		const Mr *mr;
		if (mrs.check(le(s.lkey), pdn, le(s.addr) + off, n, access, &mr) !=
			    MrCheck::Ok ||
		    !copy(*mr, le(s.addr) + off, done, n))
			return false;
		done += n;
		off = 0;
	}
	return done == len;
}

} // namespace

// Scatter into a WQE's local SGEs (READ responses, atomic results,
// received SENDs).
bool scatter_sges(const Platform &plat, const MrTable &mrs, uint32_t pdn,
		  const std::vector<vrnic_sge> &sges, uint32_t off,
		  const uint8_t *src, uint32_t len)
{
	return walk_sges(mrs, pdn, sges, off, len, VRNIC_ACCESS_LOCAL_WRITE,
			 [&](const Mr &mr, uint64_t a, uint32_t o, uint32_t n) {
				 return MrTable::write(plat, mr, a, src + o, n);
			 });
}

bool Rdma::gather(Qp &qp, const SendWqe &w, uint32_t off, uint8_t *dst,
		  uint32_t len)
{
	if (w.flags & VRNIC_WQE_INLINE) {
		// The range lies in the copy (segmentation keeps it there);
		// checked rather than trusted, and an empty message copies
		// nothing (its vector may hold no buffer at all).
		const size_t have = w.inline_data.size();
		if (off > have || len > have - off)
			return false;
		if (len)
			std::memcpy(dst, w.inline_data.data() + off, len);
		return true;
	}
	return walk_sges(mrs_, qp.pdn, w.sges, off, len, 0,
			 [&](const Mr &mr, uint64_t a, uint32_t o, uint32_t n) {
				 return MrTable::read(plat_, mr, a, dst + o, n);
			 });
}

bool Rdma::send_request_packet(Qp &qp, SendWqe &w)
{
	Headers h;
	h.transport = qp.wire_transport();
	h.dqpn = le(qp.attr.dest_qpn);
	h.xrc_srqn = w.xrc_srqn;

	if (w.opcode == VRNIC_WR_RDMA_READ) {
		const uint32_t done = (w.resp_psn - w.psn_first) & kPsnMask;
		const uint32_t done_bytes = std::min(w.length, done * qp.mtu);
		h.opcode = READ_REQUEST;
		h.psn = w.resp_psn;
		h.va = w.remote_addr + done_bytes;
		h.rkey = w.rkey;
		h.dma_len = w.length - done_bytes;
		h.ackreq = true;
		xmit(qp, h, {});
		return true;
	}
	if (w.opcode == VRNIC_WR_FLUSH) {
		const bool range = (w.swap >> VRNIC_FLUSH_LEVEL_SHIFT) ==
				   VRNIC_FLUSH_RANGE;
		h.opcode = FLUSH;
		h.psn = w.psn_first;
		h.va = range ? w.remote_addr : 0;
		h.rkey = w.rkey;
		h.dma_len = range ? uint32_t(w.compare_add) : 0;
		h.feth = uint32_t(w.swap);
		h.ackreq = true;
		xmit(qp, h, {});
		return true;
	}
	if (w.opcode == VRNIC_WR_ATOMIC_WRITE) {
		h.opcode = ATOMIC_WRITE;
		h.psn = w.psn_first;
		h.va = w.remote_addr;
		h.rkey = w.rkey;
		h.dma_len = 8;
		h.ackreq = true;
		// The 8 bytes as they were in the WQE (memory order).
		const uint64_t raw = le(w.compare_add);
		std::array<uint8_t, 8> value;
		std::memcpy(value.data(), &raw, 8);
		xmit(qp, h, value);
		return true;
	}
	if (w.opcode == VRNIC_WR_ATOMIC_CMP_SWP ||
	    w.opcode == VRNIC_WR_ATOMIC_FETCH_ADD) {
		h.opcode = w.opcode == VRNIC_WR_ATOMIC_CMP_SWP ? CMP_SWAP : FETCH_ADD;
		h.psn = w.psn_first;
		h.va = w.remote_addr;
		h.rkey = w.rkey;
		h.swap_add = w.opcode == VRNIC_WR_ATOMIC_CMP_SWP ? w.swap :
								  w.compare_add;
		h.compare = w.compare_add;
		h.ackreq = true;
		xmit(qp, h, {});
		return true;
	}

	const uint32_t idx = qp.send_off / qp.mtu;
	const uint32_t n = std::min(qp.mtu, w.length - qp.send_off);
	const bool first = qp.send_off == 0;
	const bool last = qp.send_off + n >= w.length;
	const bool write = w.opcode == VRNIC_WR_RDMA_WRITE ||
			   w.opcode == VRNIC_WR_RDMA_WRITE_IMM;
	const bool imm = w.opcode == VRNIC_WR_SEND_IMM ||
			 w.opcode == VRNIC_WR_RDMA_WRITE_IMM;
	const bool inv = w.opcode == VRNIC_WR_SEND_INV;
	if (write) {
		h.opcode = first && last ? (imm ? WRITE_ONLY_IMM : WRITE_ONLY) :
			   first ? WRITE_FIRST :
			   last ? (imm ? WRITE_LAST_IMM : WRITE_LAST) : WRITE_MIDDLE;
		h.va = w.remote_addr;
		h.rkey = w.rkey;
		h.dma_len = w.length;
	} else if (inv) {
		h.opcode = first && last ? SEND_ONLY_INV : first ? SEND_FIRST :
			   last ? SEND_LAST_INV : SEND_MIDDLE;
		h.ieth = w.rkey;
	} else {
		h.opcode = first && last ? (imm ? SEND_ONLY_IMM : SEND_ONLY) :
			   first ? SEND_FIRST :
			   last ? (imm ? SEND_LAST_IMM : SEND_LAST) : SEND_MIDDLE;
	}
	h.psn = psn_add(w.psn_first, idx);
	h.imm = w.imm;
	h.solicited = last && (w.flags & VRNIC_WQE_SOLICITED);
	// UC has no acknowledgements.
	if (qp.reliable())
		h.ackreq = qp.asks_ack(idx, h.psn, last);

	const roce::Path &path = pkt_path(qp, h);
	const size_t hl = build_headers(frame_.data(), path, h);
	if (!gather(qp, w, qp.send_off, frame_.data() + hl, n)) {
		requester_error(qp, w, VRNIC_WC_ST_LOC_PROT_ERR);
		return false;
	}
	xmit_frame(finish(frame_.data(), path, hl, n));
	qp.send_off += n;
	if (n == 0)
		qp.send_off = 1;	// zero-length message: sent
	return h.ackreq;
}

void Rdma::transmit(Qp &qp, unsigned int &budget)
{
	if (!qp.sends() || qp.rnr_deadline)
		return;
	cc_sync(qp);
	// Selective repeat: the holes first, each a packet of its own.
	while (budget > 0 && qp.sr_st && !qp.sr_st->redo.empty()) {
		if (qp.pacer.rate() && !pace_ok(qp, qp.mtu))
			return;
		const uint32_t psn = qp.sr_st->redo.front();
		qp.sr_st->redo.pop_front();
		const uint64_t sent = cnt_.sent_bytes;
		if (!sr_resend(qp, psn)) {
			// Nothing went (answered or held meanwhile): no
			// resend to wait for.
			if (qp.sr_st->is_resent(psn))
				qp.sr_st->resent[psn % SrState::kSlots] = false;
			continue;
		}
		if (qp.pacer.rate())
			qp.pacer.consume(plat_.now_ns(),
					 uint32_t(cnt_.sent_bytes - sent));
		budget--;
		if (!qp.sends())
			return;		// a local error moved the QP to ERR
		arm_ack_timer(qp);
		if (!qp.sr_at) {
			qp.sr_at = plat_.now_ns() + sr_hole_period(qp);
			set_deadline(qp, kTimerSr, qp.sr_at);
		}
	}
	while (budget > 0 && qp.send_idx < qp.inflight.size()) {
		SendWqe &w = qp.inflight[qp.send_idx];
		const bool rd = is_rd_atomic(w.opcode);
		const bool local = is_local(w.opcode);
		if (local && w.done) {
			// Executed already: a go-back-N replays wire packets
			// only, so it walks past (a REG_MR run again would
			// revive an MR the peer has invalidated since).
			qp.send_idx++;
			qp.send_off = 0;
			continue;
		}
		// SQD: what began goes on (the rest of a message, a resend
		// after a NAK or a timeout); the next request waits for RTS.
		if (qp.attr.state == VRNIC_QPS_SQD && !qp.sqd_begun(w))
			break;
		if (rd || (w.flags & VRNIC_WQE_FENCE)) {
			unsigned int outstanding = 0;
			for (size_t i = 0; i < qp.send_idx; i++)
				if (is_rd_atomic(qp.inflight[i].opcode) &&
				    !qp.inflight[i].done)
					outstanding++;
			if (rd && outstanding >= std::max<unsigned int>(
						     1, qp.attr.max_rd_atomic))
				break;
			if ((w.flags & VRNIC_WQE_FENCE) && outstanding)
				break;
		}
		// Send window: never more than send_window() packets (at most
		// kWindow) unacknowledged, so a slow peer is paced by its ACKs
		// instead of flooded, and the queue a QP builds is bounded;
		// fewer when a window-based algorithm says so (flight_pkts()).
		const uint32_t psn = !w.psn_assigned ? qp.next_psn :
				     rd ? w.psn_first :
				     psn_add(w.psn_first, qp.send_off / qp.mtu);
		if (psn_diff(psn, qp.una_psn) >= qp.flight_pkts())
			break;
		if (local) {
			// Executed in SQ order, once: packets of later requests
			// see its effect; it completes when all before it have.
			budget--;
			w.psn_assigned = true;
			w.done = true;
			qp.send_idx++;
			qp.send_off = 0;
			const uint8_t st = execute_local(qp, w);
			if (st != VRNIC_WC_ST_SUCCESS) {
				requester_error(qp, w, st);
				return;
			}
			retire(qp);
			continue;
		}
		// A paced QP waits in the timer heap for its tokens, and the
		// pass goes on to the other QPs.
		if (qp.pacer.rate() &&
		    !pace_ok(qp, pace_estimate(w, qp.send_off, qp.mtu)))
			break;
		if (!w.psn_assigned) {
			const uint32_t n = is_atomic(w.opcode) ?
					   1 : npkts(w.length, qp.mtu);
			// A message of 2^23 PSNs or more (2 GiB at MTU 256) can
			// never be told apart from its successors: refused.  One
			// that would take the outstanding PSNs past 2^23 - 1
			// waits for earlier ones to complete.
			if (n > kMaxOutstandingPsns) {
				requester_error(qp, w, VRNIC_WC_ST_LOC_LEN_ERR);
				return;
			}
			if (uint32_t(psn_diff(qp.next_psn, qp.una_psn)) + n >
			    kMaxOutstandingPsns)
				break;
			w.psn_assigned = true;
			w.psn_first = qp.next_psn;
			w.psn_last = psn_add(w.psn_first, n - 1);
			w.resp_psn = w.psn_first;
			qp.next_psn = psn_add(w.psn_last, 1);
		}
		const uint64_t sent = cnt_.sent_bytes;
		const uint32_t pkt_psn =
			w.opcode == VRNIC_WR_RDMA_READ ? w.resp_psn :
			rd ? w.psn_first : psn_add(w.psn_first, qp.send_off / qp.mtu);
		const bool ask = send_request_packet(qp, w);
		if (qp.pacer.rate())	// the frame as it left
			qp.pacer.consume(plat_.now_ns(),
					 uint32_t(cnt_.sent_bytes - sent));
		if (!qp.sends())
			return;		// a local error moved the QP to ERR
		if (qp.cc_on)
			cc_sent(qp, pkt_psn, ask && qp.reliable(),
				uint32_t(cnt_.sent_bytes - sent));
		else if (ask && qp.sr())	// the hole timer's round trip
			probe_sent(qp, pkt_psn, plat_.now_ns());
		// The PSN sr_queue_holes() looks up: a READ's first, even
		// when it is asked again from a later response.
		if (qp.spray_paths() > 1)
			if (SrState *s = sr_state(qp))
				s->note_sent(rd ? w.psn_first : pkt_psn, plat_.now_ns());
		// The request an RNR NAK named went out again (a rewind
		// starts at it): the next RNR NAK answers it and may act.
		qp.rnr_waiting = false;
		budget--;
		if (rd || qp.send_off >= std::max<uint32_t>(w.length, 1)) {
			qp.send_idx++;
			qp.send_off = 0;
			if (qp.type == VRNIC_QPT_UC) {
				// Unreliable: done once its last packet left.
				qp.una_psn = qp.next_psn;
				retire(qp);
			}
		}
		if (qp.reliable())
			arm_ack_timer(qp);
	}
}

void Rdma::arm_ack_timer(Qp &qp)
{
	if (qp.attr.timeout == 0 || qp.ack_deadline)
		return;
	qp.ack_deadline = plat_.now_ns() + (4096ull << qp.attr.timeout);
	set_deadline(qp, kTimerAck, qp.ack_deadline);
}

// The platform timer, for the earliest entry: no QP is looked at.
void Rdma::arm_timer()
{
	uint64_t next = pfc_.next_expiry();	// a PFC pause ends

	if (!timers_.empty() && (!next || timers_.top().at < next))
		next = timers_.top().at;
	if (qpc_stall_until_ && (!next || qpc_stall_until_ < next))
		next = qpc_stall_until_;	// the misses are paid
	if (next)
		plat_.timer_arm(next);
}

void Rdma::set_deadline(const Qp &qp, TimerKind kind, uint64_t at)
{
	const uint64_t before = timers_.empty() ? 0 : timers_.top().at;
	timers_.arm(qp.qpn, kind, at);
	if (timers_.top().at != before)
		arm_timer();
}

// The peer answered something new: the retry budget is full again and the
// ack timer measures from now, as long as anything is still unanswered.
void Rdma::progress(Qp &qp)
{
	qp.nak_retrying = false;
	qp.rnr_waiting = false;
	qp.rnr_backoff = 0;
	qp.rnr_psn = ~0u;
	qp.retry_left = qp.attr.retry_cnt;
	qp.rnr_left = qp.attr.rnr_retry;
	qp.ack_deadline = 0;
	bool waiting = qp.una_psn != qp.next_psn;
	for (size_t i = 0; !waiting && i < qp.send_idx && i < qp.inflight.size(); i++)
		waiting = is_rd_atomic(qp.inflight[i].opcode) &&
			  !qp.inflight[i].done;
	if (waiting)
		arm_ack_timer(qp);
}

// Complete, in order, every WQE at the front that is finished.
void Rdma::retire(Qp &qp)
{
	bool progress = false;

	while (!qp.inflight.empty()) {
		SendWqe &w = qp.inflight.front();
		if (!w.psn_assigned || qp.send_idx == 0)
			break;
		if (is_rd_atomic(w.opcode) || is_local(w.opcode)) {
			if (!w.done)
				break;
		} else if (psn_diff(qp.una_psn, w.psn_last) <= 0) {
			break;
		}
		complete_send(qp, w, VRNIC_WC_ST_SUCCESS);
		qp.inflight.pop_front();
		qp.send_idx--;
		progress = true;
	}
	if (progress) {
		activate(qp);
		plat_.schedule();	// slots freed, READ/atomic limit lower
		sqd_check(qp);
	}
}

// IBA's SQ Drained affiliated event: a QP that entered SQD with it asked
// for (MODIFY_QP's SQD_NOTIFY) gets it once every request it began has
// completed, once per entry into SQD.
void Rdma::sqd_check(Qp &qp)
{
	if (!qp.sqd_notify || qp.attr.state != VRNIC_QPS_SQD || !qp.sq_drained())
		return;
	qp.sqd_notify = false;
	eqs_[0].post(plat_, dcnt_, VRNIC_EQE_QP_SQ_DRAINED, qp.qpn);
}

// Where go-back-N restarts: the first response a READ still misses, an
// unanswered atomic, or the oldest unacknowledged SEND/WRITE packet.
uint32_t Rdma::resume_psn(const Qp &qp)
{
	const SendWqe &w = qp.inflight.front();

	if (is_local(w.opcode))
		return qp.una_psn;
	if (w.opcode == VRNIC_WR_RDMA_READ)
		return w.resp_psn;
	if (is_rd_atomic(w.opcode))
		return w.psn_first;
	return qp.una_psn;
}

// Go back N: resend from psn.
void Rdma::rewind(Qp &qp, uint32_t psn)
{
	for (size_t i = 0; i < qp.inflight.size(); i++) {
		SendWqe &w = qp.inflight[i];
		if (!w.psn_assigned)
			break;
		if (is_local(w.opcode))
			continue;	// executed once, never again
		if (psn_diff(psn, w.psn_first) < 0 || psn_diff(psn, w.psn_last) > 0)
			continue;
		qp.send_idx = i;
		qp.send_off = 0;
		// Everything from psn goes again: what the peer reported
		// held (it dropped it, if an RNR NAK answered the gap) and
		// the holes queued are moot.
		if (SrState *st = qp.sr_st.get()) {
			st->sacked.reset();
			st->any_sack = false;	// nothing for the hole timer
			st->resent.reset();
			st->redo.clear();
		}
		qp.sr_at = 0;
		// What is sent again gives no round-trip sample (Karn).
		qp.nprobes = 0;
		qp.probe_floor = qp.next_psn;
		qp.probe_floor_on = true;
		// A READ resumes at its first missing response (resp_psn).
		if (!is_rd_atomic(w.opcode))
			qp.send_off = ((psn - w.psn_first) & kPsnMask) * qp.mtu;
		activate(qp);
		plat_.schedule();
		return;
	}
}

// One RNR retry (rnr_retry 7: without end); false when none is left and
// the oldest WQE failed with RNR_RETRY_EXC_ERR.  Only an RNR NAK takes one.
bool Rdma::take_rnr_retry(Qp &qp)
{
	if (qp.attr.rnr_retry == 7)
		return true;
	if (qp.rnr_left == 0) {
		requester_error(qp, qp.inflight.front(),
				VRNIC_WC_ST_RNR_RETRY_EXC_ERR);
		return false;
	}
	qp.rnr_left--;
	return true;
}

void Rdma::requester_error(Qp &qp, SendWqe &w, uint8_t status)
{
	w.status = status;
	if (status == VRNIC_WC_ST_RETRY_EXC_ERR)
		cnt_.retry_exceeded_err++;
	if (status == VRNIC_WC_ST_RNR_RETRY_EXC_ERR)
		cnt_.retry_rnr_exceeded_err++;
	qp_error(qp);
}

namespace {

// RFC 6298's estimator: the smoothed round trip and its variation.  A
// sample (never a resent packet's) ends the hole timer's backoff, as
// Karn's algorithm ends an RTO's.
void rtt_sample(Qp &qp, uint64_t rtt)
{
	if (qp.sr_st)
		qp.sr_st->hole_backoff = 0;
	if (!qp.srtt_ns) {
		qp.srtt_ns = rtt;
		qp.rttvar_ns = rtt / 2;
		return;
	}
	const uint64_t err = rtt > qp.srtt_ns ? rtt - qp.srtt_ns : qp.srtt_ns - rtt;
	qp.rttvar_ns = (3 * qp.rttvar_ns + err) / 4;
	qp.srtt_ns = (7 * qp.srtt_ns + rtt) / 8;
}

} // namespace

// Everything before psn_after is acknowledged.
void Rdma::ack_upto(Qp &qp, uint32_t psn_after)
{
	const int32_t acked = psn_diff(psn_after, qp.una_psn);

	if (acked > 0) {
		if (SrState *s = qp.sr_st.get()) {
			// What is acknowledged leaves the marks: a PSN that
			// comes round again 2^24 later is not "held" or
			// "resent" (at most kSlots slots to look at).
			if (uint32_t(acked) >= SrState::kSlots) {
				s->sacked.reset();
				s->resent.reset();
			} else {
				for (uint32_t p = qp.una_psn; p != psn_after;
				     p = psn_add(p, 1)) {
					s->sacked[p % SrState::kSlots] = false;
					s->resent[p % SrState::kSlots] = false;
				}
			}
			if (s->any_sack && psn_diff(s->high_sack, psn_after) < 0)
				s->any_sack = false;
		}
		qp.una_psn = psn_after;
		progress(qp);
		if (qp.cc_on || qp.sr()) {
			const uint64_t rtt = probe_acked(qp, psn_after,
							 plat_.now_ns());
			if (rtt && qp.sr())
				rtt_sample(qp, rtt);
			if (qp.cc_on)
				cc_acked(qp, rtt, uint32_t(acked));
		}
	}
}

// A one-packet request (atomic, ATOMIC_WRITE, FLUSH) got its response:
// it and everything before it are done.
void Rdma::answered(Qp &qp, SendWqe &w)
{
	w.done = true;
	ack_upto(qp, psn_add(w.psn_first, 1));
	progress(qp);
	retire(qp);
}

void Rdma::handle_response(Qp &qp, const Packet &p)
{
	const Headers &h = p.h;

	if (qp.attr.state != VRNIC_QPS_RTS && qp.attr.state != VRNIC_QPS_SQD &&
	    qp.attr.state != VRNIC_QPS_SQE)
		return;
	// Nothing sent at or after next_psn can be answered.
	if (psn_diff(h.psn, qp.next_psn) >= 0) {
		cnt_.malformed++;
		return;
	}
	if (h.opcode == ACK) {
		const uint8_t syn = h.syndrome;
		// Nor can what is acknowledged already: an ACK before
		// una_psn - 1 or a NAK before una_psn is stale, a duplicate
		// or forged.  Ignored, so it can neither fail nor rewind the
		// QP (a NAK names the request in error, which is unacked).
		const bool nak = (syn & 0xe0) != kAethAck;
		if (psn_diff(h.psn, qp.una_psn) < (nak ? 0 : -1)) {
			cnt_.malformed++;
			return;
		}
		switch (syn & 0xe0) {
		case kAethAck:
			ack_upto(qp, psn_add(h.psn, 1));
			retire(qp);
			// An ACK past a READ or atomic still unanswered means its
			// response was lost (implied NAK): ask again now.
			if (!qp.inflight.empty() && qp.send_idx > 0 &&
			    is_rd_atomic(qp.inflight.front().opcode) &&
			    psn_diff(qp.una_psn, qp.inflight.front().psn_last) > 0)
				rewind(qp, resume_psn(qp));
			return;
		case kAethRnr: {
			cnt_.rcvd_rnr_err++;
			ack_upto(qp, h.psn);
			retire(qp);
			// One RNR NAK acts per transmission of the request it
			// names: while the QP waits, and until the request went
			// out again, further ones (replays, duplicates) are
			// ignored.  Each further one for the same PSN doubles
			// the wait (to the longest RNR timer), so replaying a
			// NAK after every resend, with a timer the replayer
			// chose, resends the window less and less often.
			if (qp.inflight.empty() || qp.rnr_waiting ||
			    !take_rnr_retry(qp))
				return;
			if (h.psn == qp.rnr_psn)
				qp.rnr_backoff = uint8_t(std::min(qp.rnr_backoff + 1, 16));
			else
				qp.rnr_backoff = 0;
			qp.rnr_psn = h.psn;
			rewind(qp, h.psn);
			qp.rnr_waiting = true;
			qp.ack_deadline = 0;
			qp.rnr_deadline = plat_.now_ns() +
					  std::min<uint64_t>(uint64_t(kRnrTimerUs[syn & 0x1f])
							     << qp.rnr_backoff,
							     kRnrTimerUs[0]) * 1000;
			set_deadline(qp, kTimerRnr, qp.rnr_deadline);
			return;
		}
		case kAethNakSeq & 0xe0: {
			// The NAK acknowledges what precedes its PSN: progress
			// if that moves una_psn (the retries are refilled).
			ack_upto(qp, h.psn);
			retire(qp);
			if (syn == kAethNakSeq) {
				cnt_.rcvd_seq_err++;
				// A go-back-N costs a retry, as a timeout does
				// (IBA 9.7.5.2.8; rxe's COMPST_ERROR_RETRY), and
				// one is started per gap: until una_psn moves or
				// the ack timer fires, further sequence NAKs
				// (duplicates, answers to packets that were
				// already in flight, or a spoofer's) are ignored,
				// as rxe's started_retry does.  So neither a
				// replayed NAK nor a peer provoking NAKs can make
				// the window resend, or drain the retries, faster
				// than real progress refills them.
				if (qp.inflight.empty() || qp.nak_retrying)
					return;
				if (qp.retry_left == 0) {
					requester_error(qp, qp.inflight.front(),
							VRNIC_WC_ST_RETRY_EXC_ERR);
					return;
				}
				qp.retry_left--;
				qp.nak_retrying = true;
				rewind(qp, h.psn);
				return;
			}
			const uint8_t st =
				syn == kAethNakInvReq ? VRNIC_WC_ST_REM_INV_REQ_ERR :
				syn == kAethNakRemAccess ? VRNIC_WC_ST_REM_ACCESS_ERR :
							   VRNIC_WC_ST_REM_OP_ERR;
			// The NAK's PSN is the PSN of the request in error (IBA):
			// the WQE whose PSNs hold it fails; an older one still
			// waiting (a READ's response) is flushed behind it.
			for (size_t i = 0; i < qp.send_idx && i < qp.inflight.size(); i++) {
				SendWqe &w = qp.inflight[i];
				if (w.psn_assigned && !is_local(w.opcode) &&
				    psn_diff(h.psn, w.psn_first) >= 0 &&
				    psn_diff(h.psn, w.psn_last) <= 0) {
					requester_error(qp, w, st);
					return;
				}
			}
			cnt_.malformed++;	// a PSN no request was sent with
			return;
		}
		default:
			cnt_.malformed++;
			return;
		}
	}

	// READ responses and atomic acknowledgements answer the oldest
	// READ/atomic still waiting.
	SendWqe *w = nullptr;
	for (size_t i = 0; i < qp.send_idx && i < qp.inflight.size(); i++) {
		if (is_rd_atomic(qp.inflight[i].opcode) &&
		    !qp.inflight[i].done) {
			w = &qp.inflight[i];
			break;
		}
	}
	if (!w)
		return;		// duplicate or stray response
	if (h.opcode == ATOMIC_ACK) {
		if (!is_atomic(w->opcode) || h.psn != w->psn_first)
			return;
		ack_upto(qp, w->psn_first);
		uint8_t orig[8];
		for (int i = 0; i < 8; i++)
			orig[i] = uint8_t(h.orig >> (8 * i));
		if (!scatter_sges(plat_, mrs_, qp.pdn, w->sges, 0, orig, 8)) {
			requester_error(qp, *w, VRNIC_WC_ST_LOC_PROT_ERR);
			return;
		}
		answered(qp, *w);
		return;
	}
	if (w->opcode == VRNIC_WR_ATOMIC_WRITE || w->opcode == VRNIC_WR_FLUSH) {
		// Answered by an empty READ response that carries the ACK.
		if (h.opcode != READ_RESP_ONLY || h.psn != w->psn_first)
			return;
		if (!p.payload.empty()) {
			requester_error(qp, *w, VRNIC_WC_ST_BAD_RESP_ERR);
			return;
		}
		answered(qp, *w);
		return;
	}
	if (w->opcode != VRNIC_WR_RDMA_READ)
		return;
	if (h.psn != w->resp_psn) {
		// A response past the one expected (later in this READ, or
		// a later READ's): those between were lost.  An implied NAK:
		// the READ is asked again from its first missing response
		// now, not when the ack timer fires.  Once per gap, as a
		// sequence NAK is: the responses still in flight behind the
		// first one past the gap start nothing more until a response
		// moves resp_psn (progress()) or the ack timer fires.
		if (psn_diff(h.psn, w->resp_psn) < 0 || qp.nak_retrying)
			return;		// a duplicate, or this gap is asked again
		cnt_.implied_nak_seq_err++;
		if (qp.retry_left == 0) {
			requester_error(qp, *w, VRNIC_WC_ST_RETRY_EXC_ERR);
			return;
		}
		qp.retry_left--;
		qp.nak_retrying = true;
		rewind(qp, w->resp_psn);
		return;
	}
	const uint32_t idx = (h.psn - w->psn_first) & kPsnMask;
	const uint32_t off = idx * qp.mtu;
	const uint32_t expect = std::min(qp.mtu, w->length - std::min(off, w->length));
	const bool last = h.opcode == READ_RESP_LAST || h.opcode == READ_RESP_ONLY;
	const bool ends = off + expect >= w->length;
	if (p.payload.size() != expect || last != ends) {
		requester_error(qp, *w, VRNIC_WC_ST_BAD_RESP_ERR);
		return;
	}
	// Responses imply an ACK of everything before the READ.
	ack_upto(qp, w->psn_first);
	if (expect && !scatter_sges(plat_, mrs_, qp.pdn, w->sges, off,
				    p.payload.data(), expect)) {
		requester_error(qp, *w, VRNIC_WC_ST_LOC_PROT_ERR);
		return;
	}
	w->resp_psn = psn_add(w->resp_psn, 1);
	if (last) {
		w->done = true;
		ack_upto(qp, psn_add(w->psn_last, 1));
	}
	progress(qp);
	retire(qp);
}

void Rdma::pause_changed()
{
	plat_.schedule();
	arm_timer();
}

// The entries that are due, and nothing else: a deadline that was
// cleared or pushed later since its entry was made is found so here, and
// put back at its new time.
void Rdma::timer()
{
	const uint64_t now = plat_.now_ns();

	// A PFC pause ended: the QPs it held are still on the active list
	// (poll_qp() keeps them there), and poll() visits them.
	if (pfc_.expire(now))
		plat_.schedule();
	if (qpc_paid(now))
		plat_.schedule();	// the pass may go on
	sched_cnt_.timer_calls++;
	while (!timers_.empty() && timers_.top().at <= now) {
		const TimerHeap::Entry e = timers_.pop();
		sched_cnt_.timer_pops++;
		expire(e, now);
	}
	arm_timer();
}

void Rdma::expire(const TimerHeap::Entry &e, uint64_t now)
{
	Qp *q = find_qp(e.handle);
	if (!q)
		return;		// destroyed (the slot's entries went with it)
	Qp &qp = *q;
	const auto kind = TimerKind(e.kind);
	uint64_t &deadline = kind == kTimerAck ? qp.ack_deadline :
			     kind == kTimerRnr ? qp.rnr_deadline :
			     kind == kTimerCc ? qp.cc_at :
			     kind == kTimerSr ? qp.sr_at : qp.pace_at;
	if (!deadline)
		return;		// cleared meanwhile
	if (now < deadline) {
		timers_.arm(qp.qpn, kind, deadline);	// moved later
		return;
	}
	deadline = 0;
	if (kind == kTimerCc) {
		if (qp.cc_on) {
			qp.rp->on_timer(now);
			cc_apply(qp, now);
		}
		return;
	}
	if (kind == kTimerSr) {
		sr_hole_timer(qp);
		return;
	}
	if (kind != kTimerAck) {
		// RNR wait over, or the pacer has tokens: transmit() goes on.
		activate(qp);
		plat_.schedule();
		return;
	}
	if (qp.inflight.empty() || !qp.sends())
		return;
	cnt_.retry_timeouts++;
	if (qp.retry_left == 0) {
		requester_error(qp, qp.inflight.front(),
				VRNIC_WC_ST_RETRY_EXC_ERR);
		return;
	}
	qp.retry_left--;
	qp.nak_retrying = false;
	// Selective repeat: a new round resends whatever is unacknowledged
	// and not held by the peer, and the send cursor stays.
	if (qp.sr()) {
		if (SrState *s = sr_state(qp)) {
			// The peer may have dropped what it reported held (an
			// RNR NAK or an error while it drained them, and that
			// answer lost): a timeout forgets it, as TCP's RTO
			// forgets SACKs, and resends everything unacknowledged.
			cnt_.roce_adp_retrans_to++;
			s->sacked.reset();
			s->any_sack = false;
			s->resent.reset();
			s->redo.clear();
			sr_queue_holes(qp, *s, qp.next_psn, true);
			arm_ack_timer(qp);
			return;
		}
	}
	rewind(qp, resume_psn(qp));
}

// ------------------------------------------------------------ responder

// Copy one receive WQE out of a ring into qp.recv.
bool Rdma::load_recv(Qp &qp, const RingMem &ring, uint32_t index,
		     unsigned int log, unsigned int shift)
{
	std::array<uint8_t, 512> buf;
	vrnic_recv_wqe hdr;
	const uint32_t stride = 1u << shift;
	const uint64_t addr = ring.addr(uint64_t(index & ((1u << log) - 1)) << shift);

	if (!plat_.dma_read(addr, buf.data(), stride)) {
		dcnt_.dma_errors++;
		return false;
	}
	std::memcpy(&hdr, buf.data(), sizeof(hdr));
	qp.recv = RecvWqe();
	qp.recv.index = index;
	qp.recv.wr_id = le(hdr.wr_id);
	const unsigned int n = std::min<unsigned int>(
		hdr.num_sge, (stride - sizeof(hdr)) / sizeof(vrnic_sge));
	uint64_t total = 0;
	for (unsigned int i = 0; i < n && i < VRNIC_MAX_SGE; i++) {
		vrnic_sge s;
		std::memcpy(&s, buf.data() + sizeof(hdr) + i * sizeof(s), sizeof(s));
		qp.recv.sges.push_back(s);
		total += le(s.length);
	}
	qp.recv.length = uint32_t(std::min<uint64_t>(total, VRNIC_MAX_MSG_SIZE));
	qp.recv_active = true;
	qp.recv_off = 0;
	return true;
}

// Take the next receive WQE: from the QP's own RQ or from its SRQ.
bool Rdma::fetch_recv(Qp &qp)
{
	if (qp.srqn) {
		Srq *srq = find_srq(qp.srqn);
		return srq && fetch_srq(qp, *srq);
	}
	vrnic_qp_dbrec rec;
	if (!plat_.read(qp.dbrec, rec)) {
		dcnt_.dma_errors++;
		return false;
	}
	const uint32_t pi = le(rec.rq_pi);
	if (pi == qp.rq_head || pi - qp.rq_head > (1u << qp.rq_log))
		return false;
	if (!load_recv(qp, qp.rq, qp.rq_head, qp.rq_log, qp.rq_shift))
		return false;
	qp.recv.pdn = qp.pdn;
	qp.rq_head++;
	return true;
}

bool Rdma::fetch_srq(Qp &qp, Srq &srq)
{
	vrnic_srq_dbrec rec;

	if (!plat_.read(srq.dbrec, rec)) {
		dcnt_.dma_errors++;
		return false;
	}
	const uint32_t pi = le(rec.pi);
	if (pi == srq.head || pi - srq.head > (1u << srq.log_depth))
		return false;
	if (!load_recv(qp, srq.ring, srq.head, srq.log_depth, srq.shift))
		return false;
	qp.recv.pdn = srq.pdn;
	srq.head++;
	// The slot is free again: tell the consumer.
	if (!plat_.write(srq.dbrec + offsetof(vrnic_srq_dbrec, ci), le(srq.head)))
		dcnt_.dma_errors++;
	if (srq.limit && pi - srq.head < srq.limit) {
		srq.limit = 0;
		cnt_.srq_limit_events++;
		eqs_[0].post(plat_, dcnt_, VRNIC_EQE_SRQ_LIMIT, srq.srqn);
	}
	return true;
}

// Place SEND payload in the active receive WQE.
bool Rdma::scatter(Qp &qp, std::span<const uint8_t> data)
{
	if (qp.recv_off + data.size() > qp.recv.length)
		return false;
	if (!data.empty() &&
	    !scatter_sges(plat_, mrs_, qp.recv.pdn, qp.recv.sges, qp.recv_off,
			  data.data(), uint32_t(data.size())))
		return false;
	qp.recv_off += uint32_t(data.size());
	return true;
}

void Rdma::handle_duplicate(Qp &qp, const Packet &p)
{
	const Headers &h = p.h;

	cnt_.duplicate_request++;
	if (h.opcode == READ_REQUEST || h.opcode == CMP_SWAP ||
	    h.opcode == FETCH_ADD || h.opcode == ATOMIC_WRITE ||
	    h.opcode == FLUSH) {
		for (auto &r : qp.resources) {
			if (psn_diff(h.psn, r.psn_first) < 0 ||
			    psn_diff(h.psn, r.psn_last) > 0)
				continue;
			// Atomics are never executed twice: the saved result
			// is sent again.  READs replay from the PSN asked for
			// (ATOMIC_WRITE and FLUSH: their empty response).
			if (!r.atomic)
				r.sent = (h.psn - r.psn_first) & kPsnMask;
			r.pending = true;
			plat_.schedule();
			return;
		}
		return;		// too old to replay: the requester times out
	}
	// SEND/WRITE: everything before epsn arrived; say so.
	qp.ack_pending = true;
	qp.ack_syndrome = kCredits;
	qp.ack_psn = psn_add(qp.epsn, kPsnMask);	// epsn - 1
	plat_.schedule();
}

// A request the responder cannot accept.  RC answers with a NAK and the
// QP goes to ERR; UC drops the message (the rest of it too) and carries
// on, its receive WQE kept for the next message.
void Rdma::resp_fail(Qp &qp, uint8_t syndrome)
{
	if (qp.type != VRNIC_QPT_UC) {
		nak(qp, syndrome, true);
		return;
	}
	cnt_.uc_dropped++;
	qp.resp_state = 3;	// drop until the next FIRST/ONLY
	qp.recv_off = 0;
	qp.epsn = psn_add(qp.epsn, 1);
}

// An XRC target takes the PD, receive WQEs and CQ of the XRC SRQ a request
// names, which must be of its domain; every packet of a message names the
// same one.
bool Rdma::xrc_target(Qp &qp, uint32_t srqn)
{
	const Srq *srq = find_srq(srqn);

	if (!srq || srq->type != VRNIC_SRQT_XRC || srq->xrcdn != qp.xrcdn ||
	    (qp.resp_state != 0 && srqn != qp.srqn))
		return false;
	qp.srqn = srqn;
	qp.pdn = srq->pdn;
	qp.recv_cqn = srq->cqn;
	return true;
}

void Rdma::handle_request(Qp &qp, const Packet &p)
{
	const Headers &h = p.h;
	const uint8_t st = qp.attr.state;

	if (st != VRNIC_QPS_RTR && st != VRNIC_QPS_RTS && st != VRNIC_QPS_SQD &&
	    st != VRNIC_QPS_SQE) {
		cnt_.bad_qp++;
		return;
	}
	const bool uc = qp.type == VRNIC_QPT_UC;
	const int32_t d = psn_diff(h.psn, qp.epsn);
	if (uc) {
		// A lost packet loses its message; resynchronise on this one,
		// and take it if it starts the next message.
		if (d != 0) {
			cnt_.out_of_seq_request++;
			if (qp.resp_state != 0)
				resp_fail(qp, 0);
			qp.epsn = h.psn;
		}
		if (qp.resp_state == 3) {
			if (!starts_message(h.opcode)) {
				qp.epsn = psn_add(h.psn, 1);
				return;
			}
			qp.resp_state = 0;
		}
	} else if (d < 0) {
		handle_duplicate(qp, p);
		return;
	} else if (d > 0) {
		cnt_.out_of_seq_request++;
		nak_gap(qp);
		return;
	}
	qp.nak_sent = false;
	if (qp.type == VRNIC_QPT_XRC_TGT && !xrc_target(qp, h.xrc_srqn)) {
		nak(qp, kAethNakInvReq, true);
		return;
	}

	const uint8_t op = h.opcode;
	const size_t plen = p.payload.size();
	const bool first = starts_message(op);
	const bool last = op == SEND_LAST || op == SEND_LAST_IMM ||
			  op == SEND_LAST_INV || op == SEND_ONLY ||
			  op == SEND_ONLY_IMM || op == SEND_ONLY_INV ||
			  op == WRITE_LAST || op == WRITE_LAST_IMM ||
			  op == WRITE_ONLY || op == WRITE_ONLY_IMM;
	const bool is_send = op <= SEND_ONLY_IMM || op == SEND_LAST_INV ||
			     op == SEND_ONLY_INV;
	const bool is_write = op >= WRITE_FIRST && op <= WRITE_ONLY_IMM;
	const bool imm = op == SEND_LAST_IMM || op == SEND_ONLY_IMM ||
			 op == WRITE_LAST_IMM || op == WRITE_ONLY_IMM;
	const bool inv = op == SEND_LAST_INV || op == SEND_ONLY_INV;

	if (is_send || is_write) {
		// Opcode sequence: a FIRST/ONLY starts a message only when idle,
		// a MIDDLE/LAST continues the same kind of message.
		const uint8_t want = is_send ? 1 : 2;
		if (first ? qp.resp_state != 0 : qp.resp_state != want) {
			resp_fail(qp, kAethNakInvReq);
			return;
		}
		if ((!last && plen != qp.mtu) || (last && plen > qp.mtu)) {
			resp_fail(qp, kAethNakInvReq);
			return;
		}
		// Receive WQE for SEND and for WRITE with immediate.
		if ((is_send && first) || (is_write && imm)) {
			if (!qp.recv_active && !fetch_recv(qp)) {
				if (uc) {	// no RNR NAK: the message is lost
					resp_fail(qp, 0);
					return;
				}
				cnt_.send_rnr_err++;
				send_ack(qp, uint8_t(kAethRnr | qp.attr.min_rnr_timer),
					 qp.epsn);
				return;
			}
		}
		if (is_write && first) {
			const Mr *mr = nullptr;
			if (!(le(qp.attr.access) & VRNIC_ACCESS_REMOTE_WRITE) ||
			    h.dma_len > VRNIC_MAX_MSG_SIZE ||
			    (h.dma_len && mrs_.check_remote(h.rkey, qp.pdn, qp.qpn, h.va, h.dma_len,
						     VRNIC_ACCESS_REMOTE_WRITE,
						     &mr) != MrCheck::Ok)) {
				resp_fail(qp, kAethNakRemAccess);
				return;
			}
			qp.write_va = h.va;
			qp.write_left = h.dma_len;
			qp.write_total = h.dma_len;
			qp.write_rkey = h.rkey;
		}
		if (is_send) {
			if (!scatter(qp, p.payload)) {
				const bool too_long = qp.recv_off + plen > qp.recv.length;
				complete_recv(qp, too_long ? VRNIC_WC_ST_LOC_LEN_ERR :
						 VRNIC_WC_ST_LOC_PROT_ERR,
					      VRNIC_WC_RECV, qp.recv_off);
				// A local error on a receive WQE: the QP goes to
				// ERR (RC also tells the requester).
				if (uc)
					qp_error(qp);
				else
					nak(qp, too_long ? kAethNakInvReq :
						kAethNakRemOp, true);
				return;
			}
			// SEND with invalidate: the key goes before the
			// completion (and the ACK) does; a key that names no
			// fast-register MR of this PD is an invalid request.
			if (inv) {
				if (!mrs_.invalidate(h.ieth, qp.pdn, qp.qpn)) {
					complete_recv(qp, VRNIC_WC_ST_REM_INV_REQ_ERR,
						      VRNIC_WC_RECV, qp.recv_off);
					nak(qp, kAethNakInvReq, true);
					return;
				}
				cnt_.remote_inv++;
			}
		} else {
			const Mr *mr = nullptr;
			if (plen > qp.write_left || (last && plen != qp.write_left)) {
				resp_fail(qp, kAethNakInvReq);
				return;
			}
			if (plen && (mrs_.check_remote(qp.write_rkey, qp.pdn, qp.qpn, qp.write_va, plen,
						VRNIC_ACCESS_REMOTE_WRITE, &mr) !=
					     MrCheck::Ok ||
				     !MrTable::write(plat_, *mr, qp.write_va,
						     p.payload.data(), plen))) {
				resp_fail(qp, kAethNakRemAccess);
				return;
			}
			qp.write_va += plen;
			qp.write_left -= uint32_t(plen);
		}
		qp.resp_state = last ? 0 : want;
		qp.epsn = psn_add(qp.epsn, 1);
		if (last)
			qp.msn++;
		// The ACK that ends a message leaves before its completion is
		// visible, so a consumer that sees the CQE and destroys the QP
		// cannot strand the requester.  Others are coalesced, and so is
		// this one while an earlier READ or atomic response has yet to
		// leave: an ACK that overtook it would tell the requester the
		// response was lost (an implied NAK), and it would ask again.
		// (Destroying the QP then strands the requester anyway.)
		if (uc) {
			// no acknowledgements
		} else if (h.ackreq && last && !responses_due(qp.resources)) {
			qp.ack_pending = false;
			send_ack(qp, kCredits, h.psn);
		} else if (h.ackreq) {
			qp.ack_pending = true;
			qp.ack_syndrome = kCredits;
			qp.ack_psn = h.psn;
			plat_.schedule();
		}
		if (last) {
			if (is_send)
				complete_recv(qp, VRNIC_WC_ST_SUCCESS, VRNIC_WC_RECV,
					      qp.recv_off,
					      inv ? le(h.ieth) : h.imm,
					      imm ? VRNIC_CQE_WITH_IMM :
					      inv ? VRNIC_CQE_WITH_INV : 0,
					      h.solicited);
			else if (imm)
				complete_recv(qp, VRNIC_WC_ST_SUCCESS,
					      VRNIC_WC_RECV_RDMA_WITH_IMM,
					      qp.write_total, h.imm,
					      VRNIC_CQE_WITH_IMM, h.solicited);
		}
		return;
	}

	if (qp.resp_state != 0 || uc) {
		resp_fail(qp, kAethNakInvReq);	// UC has no READ or atomics
		return;
	}
	if (op == READ_REQUEST) {
		const Mr *mr = nullptr;
		// Responses spanning 2^23 PSNs could not be told apart.
		if (npkts(h.dma_len, qp.mtu) > kMaxOutstandingPsns) {
			nak(qp, kAethNakInvReq, true);
			return;
		}
		if (!(le(qp.attr.access) & VRNIC_ACCESS_REMOTE_READ) ||
		    h.dma_len > VRNIC_MAX_MSG_SIZE ||
		    (h.dma_len && mrs_.check_remote(h.rkey, qp.pdn, qp.qpn, h.va, h.dma_len,
					     VRNIC_ACCESS_REMOTE_READ, &mr) !=
					  MrCheck::Ok)) {
			nak(qp, kAethNakRemAccess, true);
			return;
		}
		if (!resource_free(qp))
			return;
		RdResource r;
		r.psn_first = h.psn;
		r.psn_last = psn_add(h.psn, npkts(h.dma_len, qp.mtu) - 1);
		r.va = h.va;
		r.rkey = h.rkey;
		r.pdn = qp.pdn;
		r.length = h.dma_len;
		take_resource(qp, r);
		return;
	}
	if (op == CMP_SWAP || op == FETCH_ADD) {
		const Mr *mr = nullptr;
		if (h.va % 8) {
			nak(qp, kAethNakInvReq, true);
			return;
		}
		if (!(le(qp.attr.access) & VRNIC_ACCESS_REMOTE_ATOMIC) ||
		    mrs_.check_remote(h.rkey, qp.pdn, qp.qpn, h.va, 8, VRNIC_ACCESS_REMOTE_ATOMIC,
			       &mr) != MrCheck::Ok) {
			nak(qp, kAethNakRemAccess, true);
			return;
		}
		if (!resource_free(qp))
			return;
		uint64_t val = 0;
		if (!MrTable::read(plat_, *mr, h.va, &val, 8)) {
			nak(qp, kAethNakRemOp, true);
			return;
		}
		const uint64_t orig = le(val);
		const uint64_t next = op == FETCH_ADD ? orig + h.swap_add :
				      orig == h.compare ? h.swap_add : orig;
		val = le(next);
		if (next != orig && !MrTable::write(plat_, *mr, h.va, &val, 8)) {
			nak(qp, kAethNakRemOp, true);
			return;
		}
		RdResource r;
		r.atomic = true;
		r.psn_first = r.psn_last = h.psn;
		r.orig = orig;
		take_resource(qp, r);
		return;
	}
	if (op == ATOMIC_WRITE || op == FLUSH) {
		if (!resource_free(qp) || !write_or_flush(qp, p))
			return;
		// Answered with an empty READ response, replayed (never
		// executed again) for a duplicate.
		RdResource r;
		r.psn_first = r.psn_last = h.psn;
		r.rkey = h.rkey;
		r.pdn = qp.pdn;
		take_resource(qp, r);
		return;
	}
	nak(qp, kAethNakInvReq, true);
}

// A READ, atomic, ATOMIC_WRITE or FLUSH needs one of max_dest_rd_atomic
// responder resources; the oldest may be reused once its response has
// gone.  A requester that asks for more is in error (invalid request).
bool Rdma::resource_free(Qp &qp)
{
	const size_t max_res = std::max<size_t>(1, qp.attr.max_dest_rd_atomic);

	if (qp.resources.size() >= max_res && qp.resources.front().pending) {
		nak(qp, kAethNakInvReq, true);
		return false;
	}
	return true;
}

// Remember an accepted request (for its response and any duplicate) and
// move past it.
void Rdma::take_resource(Qp &qp, RdResource &r)
{
	const size_t max_res = std::max<size_t>(1, qp.attr.max_dest_rd_atomic);

	if (qp.resources.size() >= max_res)
		qp.resources.pop_front();
	r.pending = true;
	qp.resources.push_back(r);
	qp.epsn = psn_add(r.psn_last, 1);
	qp.msn++;
	plat_.schedule();
}

// Carry out an ATOMIC_WRITE or a FLUSH; false (and a NAK sent) if refused.
bool Rdma::write_or_flush(Qp &qp, const Packet &p)
{
	const Headers &h = p.h;
	const uint32_t qp_access = le(qp.attr.access);
	const Mr *mr = nullptr;

	if (h.opcode == ATOMIC_WRITE) {
		if (p.payload.size() != 8 || h.dma_len != 8 || h.va % 8) {
			nak(qp, kAethNakInvReq, true);	// IBA oA19-28
			return false;
		}
		if (!(qp_access & VRNIC_ACCESS_REMOTE_WRITE) ||
		    mrs_.check_remote(h.rkey, qp.pdn, qp.qpn, h.va, 8, VRNIC_ACCESS_REMOTE_WRITE,
			       &mr) != MrCheck::Ok) {
			nak(qp, kAethNakRemAccess, true);
			return false;
		}
		// One 8-byte store: no other request of this device sees half.
		if (!MrTable::write(plat_, *mr, h.va, p.payload.data(), 8)) {
			nak(qp, kAethNakRemOp, true);
			return false;
		}
		return true;
	}
	// FLUSH: the QP must allow each placement type asked for, and the
	// MR grant it: only global visibility exists here.
	const uint32_t type = h.feth & VRNIC_FLUSH_TYPE_MASK;
	const bool range = (h.feth >> VRNIC_FLUSH_LEVEL_SHIFT) == VRNIC_FLUSH_RANGE;
	if (!valid_feth(h.feth) ||
	    ((type & VRNIC_FLUSH_GLOBAL) &&
	     !(qp_access & VRNIC_ACCESS_FLUSH_GLOBAL)) ||
	    ((type & VRNIC_FLUSH_PERSISTENT) &&
	     !(qp_access & VRNIC_ACCESS_FLUSH_PERSISTENT))) {
		nak(qp, kAethNakInvReq, true);
		return false;
	}
	if ((type & VRNIC_FLUSH_PERSISTENT) ||
	    (range ? mrs_.check_remote(h.rkey, qp.pdn, qp.qpn, h.va, h.dma_len,
				VRNIC_ACCESS_FLUSH_GLOBAL, &mr) :
		     mrs_.check_key(h.rkey, qp.pdn, VRNIC_ACCESS_FLUSH_GLOBAL,
				    &mr)) != MrCheck::Ok) {
		nak(qp, kAethNakRemAccess, true);
		return false;
	}
	// Every write before it went to guest memory when it arrived; the
	// fence orders them before the response for any other observer.
	std::atomic_thread_fence(std::memory_order_seq_cst);
	return true;
}

void Rdma::send_read_response(Qp &qp, RdResource &r, unsigned int &budget)
{
	const uint32_t n_total = npkts(r.length, qp.mtu);

	while (r.pending && budget > 0) {
		if (r.sent >= n_total) {
			r.pending = false;
			break;
		}
		const uint32_t off = r.sent * qp.mtu;
		const uint32_t n = std::min(qp.mtu, r.length - off);
		Headers h;
		h.transport = qp.wire_transport();
		h.opcode = n_total == 1 ? READ_RESP_ONLY :
			   r.sent == 0 ? READ_RESP_FIRST :
			   r.sent == n_total - 1 ? READ_RESP_LAST : READ_RESP_MIDDLE;
		h.dqpn = le(qp.attr.dest_qpn);
		h.psn = psn_add(r.psn_first, r.sent);
		h.syndrome = kCredits;
		h.msn = qp.msn & kPsnMask;
		// One path: the requester takes READ responses in order only.
		const size_t hl = build_headers(frame_.data(), qp.path, h);
		const Mr *mr = nullptr;
		if (n && (mrs_.check_remote(r.rkey, r.pdn, qp.qpn, r.va + off, n,
				     VRNIC_ACCESS_REMOTE_READ, &mr) != MrCheck::Ok ||
			  !MrTable::read(plat_, *mr, r.va + off, frame_.data() + hl,
					 n))) {
			// The MR went away under a READ in progress.  The NAK
			// names the READ request (IBA: the PSN of the request
			// in error), not epsn: epsn may already be past every
			// PSN the requester has sent, and it would drop it.
			r.pending = false;
			nak(qp, kAethNakRemAccess, true, r.psn_first);
			return;
		}
		xmit_frame(finish(frame_.data(), qp.path, hl, n));
		r.sent++;
		budget--;
	}
}

// Responses leave in PSN order: READ data and atomic results in the order
// the requests came, then the coalesced ACK.
void Rdma::respond(Qp &qp, unsigned int &budget)
{
	for (auto &r : qp.resources) {
		if (!r.pending || budget == 0)
			continue;
		if (!r.atomic) {
			send_read_response(qp, r, budget);
			if (qp.attr.state == VRNIC_QPS_ERR)
				return;		// it failed: nothing more leaves
			if (r.pending)
				return;		// out of budget
			continue;
		}
		Headers a;
		a.transport = qp.wire_transport();
		a.opcode = ATOMIC_ACK;
		a.dqpn = le(qp.attr.dest_qpn);
		a.psn = r.psn_first;
		a.syndrome = kCredits;
		a.msn = qp.msn & kPsnMask;
		a.orig = r.orig;
		xmit(qp, a, {});
		r.pending = false;
		budget--;
	}
	if (qp.ack_pending && budget > 0) {
		qp.ack_pending = false;
		send_ack(qp, qp.ack_syndrome, qp.ack_psn);
		budget--;
	}
	if (qp.sack_pending && budget > 0) {
		send_sack(qp);
		budget--;
	}
}

// ---------------------------------------------------- selective repeat

SrState *Rdma::sr_state(Qp &qp)
{
	if (!qp.sr_st) {
		auto st = std::make_unique<SrState>();
		if (!st->self.take(budget_, sizeof(SrState)))
			return nullptr;
		qp.sr_st = std::move(st);
	}
	return qp.sr_st.get();
}

// A request after a gap (psn past epsn): held once if it is within the
// window, no longer than the path MTU and the budget allows; dropped
// otherwise (the requester resends it).  The requester hears what is held
// when this request opens a new gap, asks for an ACK, was dropped or came
// twice, and every kSackEvery requests held otherwise (what follows a gap
// in order tells it nothing new).  A QP that holds nothing answers as
// without selective repeat: one sequence NAK per gap, so the requester
// goes back at once instead of waiting for its timer.
void Rdma::sr_hold(Qp &qp, std::span<const uint8_t> frame, const Packet &p)
{
	const uint32_t psn = p.h.psn;
	const bool fits = psn_diff(psn, qp.epsn) < int32_t(SrState::kSlots) &&
			  p.payload.size() <= qp.mtu;
	SrState *s = fits ? sr_state(qp) : nullptr;
	bool tell = true;

	cnt_.out_of_seq_request++;
	if (s) {
		SrState::Held &slot = s->rx[psn % SrState::kSlots];
		// The frame up to its ICRC (parse() bounded it).
		const size_t len = size_t(p.payload.data() + p.payload.size() -
					  frame.data()) + p.h.pad + kIcrcLen;
		if (slot.held && slot.psn == psn) {
			cnt_.duplicate_request++;
		} else {
			// Another PSN in the slot is out of the window: stale.
			if (slot.held) {
				slot.held = false;
				s->nheld--;
			}
			if (!slot.charge.take(budget_, len)) {
				slot.frame = {};
				s = nullptr;
			} else {
				slot.frame.assign(frame.begin(),
						  frame.begin() + ptrdiff_t(len));
				slot.psn = psn;
				slot.held = true;
				const bool next = s->nheld &&
						  psn_diff(psn, s->rx_high) == 1;
				if (!s->nheld || psn_diff(psn, s->rx_high) > 0)
					s->rx_high = psn;
				s->nheld++;
				cnt_.ooo_placed++;
				tell = !next || p.h.ackreq ||
				       ++s->unsacked >= SrState::kSackEvery;
			}
		}
	}
	if (!s) {
		cnt_.ooo_dropped++;
		if (!qp.sr_st || !qp.sr_st->nheld) {
			nak_gap(qp);
			return;
		}
	}
	if (tell) {
		if (qp.sr_st)
			qp.sr_st->unsacked = 0;
		send_sack(qp);
	}
}

// Drop everything held: the requester resends it (an RNR NAK or an error
// answered the request the gap was waiting for).
void Rdma::sr_discard(Qp &qp)
{
	SrState *s = qp.sr_st.get();

	if (!s || !s->nheld)
		return;
	for (auto &slot : s->rx) {
		slot.held = false;
		slot.frame = {};
		slot.charge.reset();
	}
	s->nheld = 0;
}

// The request at epsn was taken: take those held after it, in order, while
// each one moves epsn on.  Each is parsed again from its own copy; the QP
// is looked at afresh after every request, which may fail it.
void Rdma::sr_drain(Qp &qp)
{
	for (;;) {
		SrState *s = qp.sr_st.get();
		const uint8_t st = qp.attr.state;
		if (!s || !s->nheld)
			return;
		if (st != VRNIC_QPS_RTR && st != VRNIC_QPS_RTS &&
		    st != VRNIC_QPS_SQD && st != VRNIC_QPS_SQE) {
			sr_discard(qp);
			return;
		}
		SrState::Held &slot = s->rx[qp.epsn % SrState::kSlots];
		if (!slot.held)
			return;
		const bool match = slot.psn == qp.epsn;
		std::vector<uint8_t> frame = std::move(slot.frame);
		slot.frame = {};
		slot.held = false;
		slot.charge.reset();
		s->nheld--;
		if (!match)
			continue;	// stale: a READ's PSNs stepped over it
		// Its own copy, parsed and its ICRC checked when it came.
		Packet p;
		if (parse(frame, p, false) != ParseResult::Ok)
			return;		// parsed once already: cannot happen
		const uint32_t before = qp.epsn;
		handle_request(qp, p);
		if (qp.epsn == before) {
			sr_discard(qp);
			return;
		}
	}
}

// What the responder holds after the gap at epsn.  Under a PFC pause it
// waits (sack_pending) and respond() sends the then current one.
void Rdma::send_sack(Qp &qp)
{
	Headers h;

	if (prio_paused(qp.path.traffic_class, qp.path.dmac.data())) {
		qp.sack_pending = true;
		return;
	}
	qp.sack_pending = false;
	h.transport = VENDOR;
	h.opcode = kSackOp;
	h.dqpn = le(qp.attr.dest_qpn);
	h.psn = psn_add(qp.epsn, kPsnMask);	// epsn - 1, as an ACK's
	h.syndrome = kCredits;
	h.msn = qp.msn & kPsnMask;
	h.sack_base = psn_add(qp.epsn, 1);
	if (const SrState *s = qp.sr_st.get(); s && s->nheld) {
		// Up to the highest PSN held (stale slots never match).
		const int32_t top = psn_diff(s->rx_high, h.sack_base);
		const unsigned int n = top < 0 ? 0 :
			std::min<unsigned int>(uint32_t(top) + 1, kSackBits);
		for (unsigned int i = 0; i < n; i++) {
			const uint32_t psn = psn_add(h.sack_base, i);
			const SrState::Held &slot = s->rx[psn % SrState::kSlots];
			if (slot.held && slot.psn == psn)
				h.sack[i / 64] |= 1ull << (i % 64);
		}
	}
	xmit(qp, h, {});
	cnt_.sack_sent++;
}

// Queue for resending each request packet from una_psn up to end that the
// peer has not reported held and that is not resent already, or whose
// resend is lost: the peer holds kReorder PSNs first sent after it, or it
// is older than the hole timer's period.  A READ or atomic is resent when
// its request is missing; on a timeout, also when it is unanswered (its
// response may be what was lost).  A spraying QP's hole sent less than
// sr_reorder_ns() ago waits: it may be on a slower path.  Returns when
// the oldest resend still in flight was sent, when the first hole that
// waits counts as lost, and how many resends go again.
Rdma::HoleScan Rdma::sr_queue_holes(Qp &qp, SrState &s, uint32_t end, bool timeout)
{
	const uint64_t now = plat_.now_ns();
	const uint64_t period = sr_hole_period(qp);
	const uint64_t reorder = timeout ? 0 : sr_reorder_ns(qp);
	HoleScan r;

	for (size_t i = 0; i < qp.inflight.size() && i <= qp.send_idx; i++) {
		const SendWqe &w = qp.inflight[i];
		if (!w.psn_assigned)
			break;
		if (is_local(w.opcode))
			continue;	// no PSNs of its own (psn_first is 0)
		if (psn_diff(w.psn_first, end) >= 0)
			break;
		// held: the peer reported it held (a READ's or atomic's
		// request may be, and its response lost).
		auto queue = [&](uint32_t psn, bool held) {
			const unsigned int slot = psn % SrState::kSlots;
			if (held || s.redo.size() >= SrState::kSlots)
				return;
			if (s.is_resent(psn)) {
				const uint64_t t = s.resent_ns[slot];
				if (!t)
					return;		// queued
				if (psn_diff(end, s.resent_front[slot]) < SrState::kReorder &&
				    (now > t ? now - t : 0) < period) {
					if (!r.oldest || t < r.oldest)
						r.oldest = t;
					return;		// may be on its way
				}
				r.again++;
			} else if (const uint64_t t = reorder ? s.sent_at(psn) : 0;
				   t && now < t + reorder) {
				if (!r.due || t + reorder < r.due)
					r.due = t + reorder;
				return;		// may be on a slower path
			}
			s.resent[slot] = true;
			s.resent_psn[slot] = psn;
			s.resent_ns[slot] = 0;
			s.redo.push_back(psn);
		};
		if (is_rd_atomic(w.opcode)) {
			if (timeout ? !w.done :
			    !w.done && psn_diff(w.psn_first, qp.una_psn) >= 0)
				queue(w.psn_first, !timeout && s.is_sacked(w.psn_first));
			continue;
		}
		// The packets of this message already sent, from una_psn.
		const uint32_t sent = i < qp.send_idx ? psn_add(w.psn_last, 1) :
				      psn_add(w.psn_first, qp.send_off / qp.mtu);
		uint32_t psn = psn_diff(qp.una_psn, w.psn_first) > 0 ?
			       qp.una_psn : w.psn_first;
		for (; psn_diff(psn, sent) < 0 && psn_diff(psn, end) < 0;
		     psn = psn_add(psn, 1))
			queue(psn, s.is_sacked(psn));
	}
	if (!s.redo.empty()) {
		activate(qp);
		plat_.schedule();
	}
	return r;
}

// Send the one request packet at psn again, the send cursor untouched;
// false if nothing went (answered meanwhile, or held by the peer).
bool Rdma::sr_resend(Qp &qp, uint32_t psn)
{
	const SrState *s = qp.sr_st.get();

	for (size_t i = 0; i < qp.inflight.size() && i <= qp.send_idx; i++) {
		SendWqe &w = qp.inflight[i];
		if (!w.psn_assigned)
			return false;
		if (is_local(w.opcode) || psn_diff(psn, w.psn_first) < 0 ||
		    psn_diff(psn, w.psn_last) > 0)
			continue;
		if (is_rd_atomic(w.opcode)) {
			if (w.done || psn != w.psn_first)
				return false;
		} else if (psn_diff(psn, qp.una_psn) < 0 || (s && s->is_sacked(psn))) {
			return false;
		}
		const uint32_t off = ((psn - w.psn_first) & kPsnMask) * qp.mtu;
		if (i == qp.send_idx && !is_rd_atomic(w.opcode) && off >= qp.send_off)
			return false;	// not sent yet
		const size_t idx = qp.send_idx;
		const uint32_t cur = qp.send_off;
		qp.send_off = is_rd_atomic(w.opcode) ? 0 : off;
		send_request_packet(qp, w);
		qp.send_idx = idx;
		qp.send_off = cur;
		if (qp.sr_st) {
			const unsigned int slot = psn % SrState::kSlots;
			qp.sr_st->resent_ns[slot] = std::max<uint64_t>(plat_.now_ns(), 1);
			// The next PSN to go out for the first time: the send
			// cursor's, which may be inside a message whose PSNs
			// are all assigned (next_psn is past its last one).
			uint32_t front = qp.next_psn;
			if (idx < qp.inflight.size() && qp.inflight[idx].psn_assigned) {
				const SendWqe &c = qp.inflight[idx];
				front = is_rd_atomic(c.opcode) ? c.psn_first :
					psn_add(c.psn_first, cur / qp.mtu);
			}
			qp.sr_st->resent_front[slot] = front;
		}
		// What is sent again gives no round-trip sample (Karn); the
		// other packets' probes stand, as the send cursor does.
		drop_probe(qp, psn);
		cnt_.roce_adp_retrans++;
		return true;
	}
	return false;
}

// A SACK: an ACK of what precedes its PSN, and the PSNs after the gap the
// responder holds.  The holes below the highest one held are resent once
// in this round; a hole whose resend is lost again waits for the timer.
void Rdma::handle_sack(Qp &qp, const Packet &p)
{
	const Headers &h = p.h;
	const uint8_t st = qp.attr.state;

	if (st != VRNIC_QPS_RTS && st != VRNIC_QPS_SQD && st != VRNIC_QPS_SQE)
		return;
	// As an ACK: nothing not yet sent, nothing acknowledged already.
	if (psn_diff(h.psn, qp.next_psn) >= 0 ||
	    psn_diff(h.psn, qp.una_psn) < -1) {
		cnt_.malformed++;
		return;
	}
	cnt_.sack_rcvd++;
	ack_upto(qp, psn_add(h.psn, 1));
	retire(qp);
	if (qp.attr.state != st || qp.inflight.empty())
		return;
	SrState *s = sr_state(qp);
	if (!s)
		return;		// no memory: the timer recovers
	// Each SACK says all the peer holds (its bitmap covers the whole
	// window): what an earlier one reported and this one does not, the
	// peer dropped.
	s->sacked.reset();
	uint32_t end = qp.una_psn;
	bool forged = false;
	for (unsigned int w = 0; w < h.sack.size() && !forged; w++) {
		for (uint64_t bits = h.sack[w]; bits; bits &= bits - 1) {
			const unsigned int i = w * 64 + unsigned(__builtin_ctzll(bits));
			const uint32_t psn = psn_add(h.sack_base, i);
			if (psn_diff(psn, qp.next_psn) >= 0) {
				cnt_.malformed++;	// never sent: the rest neither
				forged = true;
				break;
			}
			s->sacked[psn % SrState::kSlots] = true;
			s->sacked_psn[psn % SrState::kSlots] = psn;
			end = psn;
		}
	}
	if (end != qp.una_psn &&
	    (!s->any_sack || psn_diff(end, s->high_sack) > 0 ||
	     psn_diff(s->high_sack, qp.una_psn) <= 0)) {
		s->high_sack = end;
		s->any_sack = true;
	}
	// The newest probe newly reported held gives a round trip, as
	// TCP takes one from what a SACK newly covers (RFC 6675).
	if (const uint64_t rtt = probe_sacked(qp, *s, plat_.now_ns()))
		rtt_sample(qp, rtt);
	if (const uint64_t due = sr_queue_holes(qp, *s, end, false).due)
		sr_arm(qp, due);
}

// The hole timer at `at`, unless it is due sooner.
void Rdma::sr_arm(Qp &qp, uint64_t at)
{
	if (!qp.sr_at || at < qp.sr_at) {
		qp.sr_at = at;
		set_deadline(qp, kTimerSr, at);
	}
}

// A spraying QP's reordering window: RACK's (RFC 8985), the smoothed round
// trip plus a quarter of it, or plus four times its variation when that
// is more, which grows with how much its paths' delays differ (with
// twice, make bench's multipath run sent 1.10 packets per 4 KiB it
// delivered, with four 1.02, as without spraying); at most the hole
// timer's period, and that period before a round-trip sample.
uint64_t Rdma::sr_reorder_ns(const Qp &qp) const
{
	if (qp.spray_paths() <= 1)
		return 0;
	const uint64_t period = sr_hole_period(qp);
	if (!qp.srtt_ns)
		return period;
	const uint64_t w = qp.srtt_ns + std::max({qp.srtt_ns / 4, 4 * qp.rttvar_ns,
						  SrState::kReorderMinNs});
	return std::min(w, period);
}

// The hole timer's period: the round trip as measured plus four times its
// variation (RFC 6298's RTO; before a sample, a sixteenth of the ack
// timeout, or 4 ms without one), at least SrState::kHoleMinNs, doubled per
// expiry that resent something until the next round-trip sample, and at
// most half the ack timeout (below the floor if that is shorter: the hole
// timer stays ahead of the ack timer), or kHoleMaxNs without one.
uint64_t Rdma::sr_hole_period(const Qp &qp) const
{
	const uint64_t ack = qp.attr.timeout ? 4096ull << qp.attr.timeout : 0;
	uint64_t t = qp.srtt_ns ? qp.srtt_ns + 4 * qp.rttvar_ns :
		     ack ? ack >> 4 : 4000000;
	t = std::max(t, SrState::kHoleMinNs) << (qp.sr_st ? qp.sr_st->hole_backoff : 0);
	return std::min(t, ack ? ack >> 1 : SrState::kHoleMaxNs);
}

// The hole timer expired: the resends older than its period were lost too
// (no SACK can say so while the window is full behind the hole, or
// nothing follows them).  They go again, and the period doubles until
// the next round-trip sample.  It only resends what the peer reported missing
// below a PSN it holds, and costs no retry: a stall makes it resend
// holes, never new data, and no less surely than the ack timer would.
// Only resends that went again count (roce_adp_retrans_to) and double
// the period.  Resends younger than the period re-arm it for the oldest
// of them.  It is also a spraying QP's reordering timer: a hole whose
// window passed is lost and sent for the first time, which is no timeout.
void Rdma::sr_hole_timer(Qp &qp)
{
	SrState *s = qp.sr_st.get();

	if (!s || !qp.sends() || !s->any_sack ||
	    psn_diff(s->high_sack, qp.una_psn) <= 0)
		return;
	const HoleScan r = sr_queue_holes(qp, *s, s->high_sack, false);
	if (r.again) {
		cnt_.roce_adp_retrans_to++;
		s->hole_backoff = uint8_t(std::min(s->hole_backoff + 1, 6));
	}
	if (r.oldest)
		sr_arm(qp, std::max(r.oldest + sr_hole_period(qp), plat_.now_ns() + 1));
	if (r.due)
		sr_arm(qp, r.due);
}

// --------------------------------------------------------------- entry

void Rdma::receive(std::span<const uint8_t> frame)
{
	Packet p;

	switch (parse(frame, p)) {
	case ParseResult::Ok:
		break;
	case ParseResult::BadIcrc:
		cnt_.icrc_errors++;
		return;
	default:
		cnt_.malformed++;
		return;
	}
	cnt_.rcvd_pkts++;
	cnt_.rcvd_bytes += frame.size();
	const bool ce = (p.path.traffic_class & 3) == 3;
	if (ce)
		cnt_.np_ecn_marked_roce_packets++;
	if (p.h.transport == CNP_GROUP) {
		cnp_received(p);
		return;
	}
	// A tagged frame must be for a GID of its VLAN, an untagged one not
	// for a VLAN's GID: VLANs stay apart as on the netdevs.
	if (!gids_.on_vlan(p.path.dgid, p.path.vlan)) {
		cnt_.vlan_drops++;
		return;
	}
	if (p.h.dqpn == VRNIC_MCAST_QPN) {
		// Fanned out by poll(), each copy against its budget.
		if (p.h.transport != UD || !is_multicast(p.path.dgid))
			cnt_.bad_qp++;
		else if (!mcast_q_.push(frame))
			cnt_.mcast_drops++;
		else
			plat_.schedule();
		return;
	}
	Qp *qp = find_qp(p.h.dqpn);
	if (!qp || qp->attr.state < VRNIC_QPS_RTR) {
		cnt_.bad_qp++;
		return;
	}
	// The opcode's transport must be the QP's; a SACK is for a QP that
	// agreed to selective repeat.
	const bool sack = p.h.transport == VENDOR;
	if (sack ? !qp->sr() : p.h.transport != qp->wire_transport()) {
		cnt_.bad_qp++;
		return;
	}
	if (qp->datagram()) {
		ud_receive(*qp, p);
		return;
	}
	// Connected: only the peer named in the QP's address vector.
	if (!from_peer(*qp, p.path)) {
		cnt_.bad_qp++;
		return;
	}
	if (p.path.vlan != qp->path.vlan) {
		cnt_.vlan_drops++;
		return;
	}
	if (ce)
		notify_congestion(*qp, p);
	// Requesters take responses, responders requests; XRC splits them.
	const bool response = sack || is_response(p.h.opcode);
	if (response ? qp->type == VRNIC_QPT_UC || qp->type == VRNIC_QPT_XRC_TGT :
		       qp->type == VRNIC_QPT_XRC_INI) {
		cnt_.bad_qp++;
		return;
	}
	// Whatever the packet does (opens the window, asks for an ACK or
	// a READ response, fails the QP), the QP's next turn sees it.
	activate(*qp);
	const uint8_t st = qp->attr.state;
	if (sack) {
		handle_sack(*qp, p);
	} else if (response) {
		handle_response(*qp, p);
	} else if (qp->sr() && psn_diff(p.h.psn, qp->epsn) > 0 &&
		   (st == VRNIC_QPS_RTR || st == VRNIC_QPS_RTS ||
		    st == VRNIC_QPS_SQD || st == VRNIC_QPS_SQE)) {
		sr_hold(*qp, frame, p);
	} else {
		handle_request(*qp, p);
		if (qp->sr_st && qp->sr_st->nheld)
			sr_drain(*qp);
	}
}

// One QP's turn in poll(): flush, send, respond, fetch and transmit.
void Rdma::poll_qp(Qp &qp, unsigned int &budget)
{
	if (qp.attr.state == VRNIC_QPS_ERR) {
		if (qp.flush_pending || qp.sq_kick) {
			qp.sq_kick = false;
			flush(qp, budget);
		}
		return;
	}
	if (qp.datagram()) {
		if (qp.sq_kick) {
			qp.sq_kick = false;
			ud_send(qp, budget);
		}
		return;
	}
	// PFC pauses the QP's priority: nothing of it leaves (responses,
	// ACKs, requests); it stays on the active list (its own activation
	// in its turn only requeues it) until the pause ends, and the timer
	// or the XON schedules the poll that finds it there.
	if (prio_paused(qp.path.traffic_class, qp.path.dmac.data())) {
		activate(qp);
		return;
	}
	respond(qp, budget);
	if (qp.type == VRNIC_QPT_XRC_TGT)
		return;	// a responder only
	if (qp.sq_kick) {
		qp.sq_kick = false;
		fetch_sq(qp, budget);
	}
	transmit(qp, budget);
}

// The QP-context cache's misses are paid by not sending: once they owe
// kQpcStallSlackNs, the pass stops until they are paid (the timer wakes
// it).  A wake-up later than asked pays ahead, up to the slack, so that
// over time the device loses what its misses cost and no more than that.
// The stall is over by now (true once): a late end pays ahead, and the
// next pass gets at least one QP's turn before another stall.
bool Rdma::qpc_paid(uint64_t now)
{
	if (!qpc_stall_until_ || now < qpc_stall_until_)
		return false;
	qpc_debt_ns_ -= int64_t(std::min<uint64_t>(now - qpc_stall_until_,
						  kQpcStallSlackNs));
	qpc_stall_until_ = 0;
	qpc_turn_owed_ = true;
	return true;
}

bool Rdma::qpc_stall(uint64_t now, bool *turn)
{
	qpc_paid(now);
	if (qpc_stall_until_)
		return true;
	if (qpc_turn_owed_) {
		qpc_turn_owed_ = false;
		if (turn)
			*turn = true;
		return false;
	}
	if (qpc_debt_ns_ < kQpcStallSlackNs)
		return false;
	const int64_t t = std::min(qpc_debt_ns_, kQpcMaxStallNs);
	qpc_stall_until_ = now + uint64_t(t);
	sched_cnt_.qpc_stalls++;
	sched_cnt_.qpc_stall_ns += uint64_t(t);
	qpc_debt_ns_ -= t;
	arm_timer();
	return true;
}

bool Rdma::poll()
{
	unsigned int budget = kPktBudget;
	// After a QP-context stall at least one QP's turn comes before the
	// next: loopback and multicast leave it a packet.
	bool turn = false;

	if (qpc_.limited() && qpc_stall(plat_.now_ns(), &turn))
		return false;
	const unsigned int keep = turn ? 1 : 0;

	while (!loopback_.empty() && budget > keep) {
		// Read in place; frames it causes queue behind it.
		receive(loopback_.front());
		loopback_.pop();
		budget--;
	}
	// Multicast copies get at most half the round, so that a stream of
	// multicast frames cannot hold up the QPs.
	unsigned int mcast_budget = std::min(budget - keep, kPktBudget / 2);
	const unsigned int before = mcast_budget;
	mcast_fanout(mcast_budget);
	budget -= before - mcast_budget;
	// The active QPs, each once, in the order they became active: a QP
	// that did something goes to the back, so the one that used up this
	// poll's budget comes after the others next time, and one QP with an
	// endless supply of work (READ responses to a requester that keeps
	// 16 READs outstanding) cannot keep the others from sending until
	// their peers' ack timers expire.  A QP that did nothing and has
	// nothing pending leaves the list; the next event for it (doorbell,
	// packet, timer, MODIFY_QP, error) brings it back.  Idle QPs cost
	// nothing here.
	sched_cnt_.polls++;
	in_pass_ = true;
	activated_ = false;
	for (size_t k = active_.size(); k > 0 && budget > 0; k--) {
		const uint32_t h = active_.pop();
		sched_cnt_.visits++;
		if (!active_.live(h))
			continue;	// its QP was destroyed
		Qp *qp = find_qp(h);
		if (!qp) {
			active_.leave(h);
			continue;
		}
		const unsigned int had = budget;
		turn_ = h;
		turn_again_ = false;
		poll_qp(*qp, budget);
		turn_ = 0;
		// poll_qp() destroys no QP: qp still stands for handle h.
		if (budget != had || turn_again_ || has_work(*qp))
			active_.requeue(h);
		else
			active_.leave(h);
		if (qpc_debt_ns_ >= kQpcStallSlackNs)
			break;	// the next poll() waits for the misses
	}
	in_pass_ = false;
	if (qpc_.limited() && qpc_stall(plat_.now_ns()))
		return false;
	return budget == 0 || activated_ || !loopback_.empty() ||
	       !mcast_q_.empty();
}

// ------------------------------------------------------------ scheduler

void Rdma::activate(const Qp &qp)
{
	if (qp.qpn == turn_) {
		turn_again_ = true;
		return;
	}
	if (active_.push(qp.qpn) && in_pass_)
		activated_ = true;
}

// Only what poll_qp() acts on without a new event: the rest (a window
// that opens, an RNR or pacing wait that ends, a READ/atomic limit that
// drops) comes with a packet or a timer, which activate the QP.
bool Rdma::has_work(const Qp &qp)
{
	if (qp.attr.state == VRNIC_QPS_ERR)
		return qp.flush_pending || qp.sq_kick;
	if (qp.datagram())
		return qp.sq_kick;
	// Posted WQEs beyond the copies a QP may hold wait for a completion,
	// which retire() announces; fewer copies than that mean fetch_sq()
	// stopped on the budget or on host memory, and tries again.
	const bool fetch = qp.sq_kick && qp.type != VRNIC_QPT_XRC_TGT &&
			   qp.inflight.size() < fetch_cap(qp);
	return fetch || qp.ack_pending || qp.sack_pending ||
	       responses_due(qp.resources);
}

void Rdma::sched_forget(uint32_t slot)
{
	active_.forget(slot);
	timers_.forget(slot);
}

bool Rdma::pace_ok(Qp &qp, uint32_t bytes)
{
	const uint64_t now = plat_.now_ns();
	const uint64_t at = qp.pacer.next_eligible_ns(now, bytes);

	if (at <= now) {
		qp.pace_at = 0;
		return true;
	}
	sched_cnt_.paced++;
	qp.pace_at = at;
	set_deadline(qp, kTimerPace, at);
	return false;
}

bool Rdma::set_qp_rate(uint32_t qpn, uint64_t rate_Bps, uint64_t burst_bytes)
{
	Qp *qp = find_qp(qpn);

	if (!qp)
		return false;
	qp->pacer.set_rate(plat_.now_ns(), rate_Bps,
			   burst_bytes ? burst_bytes : cc::Pacer::default_burst(rate_Bps));
	// A QP waiting for the old rate may go sooner (or at once, unpaced):
	// its next turn asks the pacer again.
	qp->pace_at = 0;
	activate(*qp);
	plat_.schedule();
	return true;
}

} // namespace vrnic

// SPDX-License-Identifier: GPL-2.0-or-later
// Unreliable datagrams: UD QPs and the GSI QP1.  A send is one packet,
// complete once it has left; a receive takes one WQE, with the network
// header in its first 40 bytes.  No PSN checks, no acknowledgements.
#include <algorithm>
#include <cstring>

#include "device.hpp"
#include "rdma.hpp"

namespace vrnic {

using namespace roce;

namespace {

// What IBA calls the path MTU of a UD QP: the largest IB MTU whose packet
// fits the port's L3 MTU with the biggest RoCEv2 headers (as the kernel's
// iboe_get_mtu()).
constexpr uint32_t kRoceHeadroom = 40 + 8 + 12 + 4 + 28 + 4;

} // namespace

uint32_t Rdma::ud_mtu() const
{
	uint32_t mtu = 4096;

	while (mtu > 256 && mtu + kRoceHeadroom > port_mtu_)
		mtu /= 2;
	return mtu;
}

// Transmit one UD send; false with status set if the WQE is unusable.
bool Rdma::ud_transmit(Qp &qp, const SendWqe &w, uint8_t &status)
{
	const vrnic_ud_av &av = w.av;
	Path path;
	Headers h;

	if (w.length > ud_mtu()) {
		status = VRNIC_WC_ST_LOC_LEN_ERR;
		return false;
	}
	std::memcpy(path.dgid.data(), av.dgid, 16);
	// The source GID and MAC are the GID table entry's, never the WQE's;
	// the bytes that held a source GID before spec 0.6 stay reserved (0).
	if (!all_zero(av.rsvd_sgid) || !gids_.source(av.sgid_index, path)) {
		cnt_.bad_sgid++;
		status = VRNIC_WC_ST_LOC_QP_OP_ERR;	// unusable address
		return false;
	}
	if (le(av.dest_qpn) > kPsnMask || !all_zero(av.rsvd)) {
		status = VRNIC_WC_ST_LOC_QP_OP_ERR;	// unusable address
		return false;
	}
	std::memcpy(path.dmac.data(), av.dmac, 6);
	path.traffic_class = no_ce(av.traffic_class);
	path.hop_limit = av.hop_limit ? av.hop_limit : 64;
	path.flow_label = le(av.flow_label) & 0xfffff;
	path.udp_sport = le(av.udp_sport) ? le(av.udp_sport) :
			 uint16_t(0xc000 | ((qp.qpn ^ le(av.dest_qpn)) & 0x3fff));

	h.transport = UD;
	h.opcode = w.opcode == VRNIC_WR_SEND_IMM ? SEND_ONLY_IMM : SEND_ONLY;
	h.dqpn = le(av.dest_qpn);
	h.psn = qp.next_psn;
	h.imm = w.imm;
	h.solicited = w.flags & VRNIC_WQE_SOLICITED;
	// A controlled Q_Key in the WQE means "the QP's own" (IBA 10.2.5).
	h.qkey = (le(av.qkey) & VRNIC_QKEY_PRIVILEGED) ? le(qp.attr.qkey) :
							  le(av.qkey);
	h.src_qp = qp.qpn;
	const size_t hl = build_headers(frame_.data(), path, h);
	if (!gather(qp, w, 0, frame_.data() + hl, w.length)) {
		status = VRNIC_WC_ST_LOC_PROT_ERR;
		return false;
	}
	qp.next_psn = psn_add(qp.next_psn, 1);
	const size_t len = finish(frame_.data(), path, hl, w.length);
	xmit_frame(len);
	// Multicast also reaches this device's own QPs in the group (the
	// sender's among them), as on other RoCE NICs: a switch never sends
	// a frame back out of the port it came in by.
	if (h.dqpn == VRNIC_MCAST_QPN && is_multicast(path.dgid) &&
	    std::any_of(mcast_.begin(), mcast_.end(), [&path](const McastAttach &m) {
		    return m.gid == path.dgid;
	    })) {
		if (!loopback_.push({frame_.data(), len}))
			dcnt_.loopback_drops++;
		plat_.schedule();
	}
	return true;
}

void Rdma::ud_send(Qp &qp, unsigned int &budget)
{
	uint32_t pi = 0;

	if (qp.attr.state != VRNIC_QPS_RTS || !sq_producer(qp, pi))
		return;
	while (qp.sq_head != pi && budget > 0) {
		SendWqe w;
		uint8_t status = VRNIC_WC_ST_SUCCESS;
		const bool read = read_send_wqe(qp, qp.sq_head, w, status);
		if (read && prio_paused(w.av.traffic_class, w.av.dmac)) {
			// PFC: this datagram's priority may not send; it and
			// those behind it wait (in order) for the pause to end.
			qp.sq_kick = true;
			return;
		}
		const bool ok = read && ud_transmit(qp, w, status);
		qp.sq_head++;
		budget--;
		if (!ok) {
			fail_fetched(qp, std::move(w), status);
			return;
		}
		complete_send(qp, w, VRNIC_WC_ST_SUCCESS);
	}
	if (qp.sq_head != pi)
		qp.sq_kick = true;	// come back for the rest
}

void Rdma::ud_receive(Qp &qp, const Packet &p)
{
	const Headers &h = p.h;
	std::array<uint8_t, VRNIC_UD_GRH_LEN> grh{};

	if (qp.attr.state > VRNIC_QPS_SQE) {
		cnt_.bad_qp++;
		return;
	}
	if (h.qkey != le(qp.attr.qkey)) {
		cnt_.qkey_violations++;
		return;
	}
	if (p.payload.size() > ud_mtu()) {
		cnt_.malformed++;
		return;
	}
	if (!qp.recv_active && !fetch_recv(qp)) {
		cnt_.ud_no_recv++;
		return;
	}
	// The network header first: IPv6 as is, IPv4 in the last 20 bytes.
	std::memcpy(grh.data() + grh.size() - p.l3.size(), p.l3.data(),
		    p.l3.size());
	const auto len = uint32_t(grh.size() + p.payload.size());
	if (len > qp.recv.length) {
		complete_recv(qp, VRNIC_WC_ST_LOC_LEN_ERR, VRNIC_WC_RECV, 0, 0, 0,
			      false, h.src_qp);
		return;
	}
	if (!scatter_sges(plat_, mrs_, qp.recv.pdn, qp.recv.sges, 0, grh.data(),
			  uint32_t(grh.size())) ||
	    (!p.payload.empty() &&
	     !scatter_sges(plat_, mrs_, qp.recv.pdn, qp.recv.sges, uint32_t(grh.size()),
			   p.payload.data(), uint32_t(p.payload.size())))) {
		complete_recv(qp, VRNIC_WC_ST_LOC_PROT_ERR, VRNIC_WC_RECV, 0, 0, 0,
			      false, h.src_qp);
		qp_error(qp);
		return;
	}
	uint8_t flags = VRNIC_CQE_GRH;
	if (!p.path.ipv6)
		flags |= VRNIC_CQE_NET_IPV4;
	uint32_t imm = h.imm;
	if (h.opcode == SEND_ONLY_IMM) {
		flags |= VRNIC_CQE_WITH_IMM;
	} else if (p.path.tagged()) {
		// The VLAN in the immediate's place (spec 0.7).
		flags |= VRNIC_CQE_WITH_VLAN;
		imm = le(uint32_t(p.path.vlan));
	}
	complete_recv(qp, VRNIC_WC_ST_SUCCESS, VRNIC_WC_RECV, len, imm, flags,
		      h.solicited, h.src_qp);
}

// The multicast frames queued by receive(): a copy for every QP attached
// to the destination GID (each with its own Q_Key check and receive
// WQE).  A frame and each copy cost one unit of the poll's budget; a
// frame whose copies the budget does not cover goes on in the next poll.
void Rdma::mcast_fanout(unsigned int &budget)
{
	while (budget > 0 && !mcast_q_.empty()) {
		Packet p;
		if (parse(mcast_q_.front(), p) != ParseResult::Ok) {
			mcast_q_.pop();		// checked when queued
			mcast_pos_ = 0;
			mcast_started_ = false;
			continue;
		}
		if (!mcast_started_) {
			budget--;
			mcast_started_ = true;
			mcast_any_ = false;
		}
		// Attachments only change in admin commands, between polls;
		// erasing one below mcast_pos_ moves it back (erase_mcast()).
		while (mcast_pos_ < mcast_.size() && budget > 0) {
			const McastAttach m = mcast_[mcast_pos_++];
			if (m.gid != p.path.dgid)
				continue;
			Qp *qp = find_qp(m.qpn);
			if (!qp || qp->attr.state < VRNIC_QPS_RTR)
				continue;
			mcast_any_ = true;
			budget--;
			ud_receive(*qp, p);
		}
		if (mcast_pos_ < mcast_.size())
			return;		// the rest of this frame next time
		if (!mcast_any_)
			cnt_.bad_qp++;
		mcast_q_.pop();
		mcast_pos_ = 0;
		mcast_started_ = false;
	}
}

} // namespace vrnic

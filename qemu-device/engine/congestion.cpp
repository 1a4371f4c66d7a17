// SPDX-License-Identifier: GPL-2.0-or-later
// Congestion control on the wire: the notification point answers
// CE-marked packets with CNPs (IBA annex A17), and CNPs from the wire
// reach the reaction point of the QP they name.  The algorithms and the
// pacer are cc.hpp's.
#include <cstring>

#include "rdma.hpp"

namespace vrnic {

using namespace roce;

// A packet for a connected QP, from its peer, arrived with ECN CE: the
// peer's QP (the one that sent it) gets a CNP, at most one per
// np_min_time_between_cnps, if the packet's priority has the
// notification point enabled.
void Rdma::notify_congestion(Qp &qp, const Packet &p)
{
	const cc::DcqcnParams &np = cc_.cfg.dcqcn;
	const unsigned int prio = p.path.traffic_class >> 5;

	if (!(cc_.np_enable & (1u << prio)))
		return;
	const uint64_t now = plat_.now_ns();
	// Mode 1: the CE packet's own priority; mode 0: np_cnp_prio.
	const unsigned int cnp_prio = np.np_cnp_prio_mode ? prio : np.np_cnp_prio;
	// A CNP on a paused priority is not sent (it would only be late);
	// the next CE mark asks again.
	if (pfc_.any() && pfc_.paused(cnp_prio, now))
		return;
	if (!qp.cnp_limiter.on_ce(now, np))
		return;
	Path path = qp.path;
	// DSCP np_cnp_dscp, Not-ECT: a CNP is never marked.  With
	// np_cnp_prio_mode 1 the DSCP is still np_cnp_dscp (mlx5's PRM
	// names no other); the PCP is the priority.
	path.traffic_class = uint8_t(np.np_cnp_dscp << 2);
	path.tx_pcp = uint8_t(cnp_prio);
	Headers h;
	h.transport = CNP_GROUP;
	h.opcode = kCnpOp;
	h.becn = true;
	h.dqpn = le(qp.attr.dest_qpn);
	h.psn = 0;
	const size_t hl = build_headers(frame_.data(), path, h);
	xmit_frame(finish(frame_.data(), path, hl, 0));
	cnt_.np_cnp_sent++;
}

// A CNP: for a QP of this device that sends to the CNP's source.
void Rdma::cnp_received(const Packet &p)
{
	Qp *qp = find_qp(p.h.dqpn);

	// Only the peer a connected QP sends to may slow it down.
	if (!qp || qp->datagram() || qp->attr.state < VRNIC_QPS_RTR ||
	    std::memcmp(p.path.sgid.data(), qp->path.dgid.data(), 16) != 0 ||
	    std::memcmp(p.path.dgid.data(), qp->path.sgid.data(), 16) != 0 ||
	    p.path.vlan != qp->path.vlan) {
		cnt_.rp_cnp_ignored++;
		return;
	}
	// No reaction point yet: the algorithms are cc.hpp's and are not
	// wired to the transport; every CNP is ignored.
	cnt_.rp_cnp_ignored++;
}

} // namespace vrnic

// SPDX-License-Identifier: GPL-2.0-or-later
// Congestion control on the wire: the notification point answers
// CE-marked packets with CNPs (IBA annex A17), and CNPs from the wire
// reach the reaction point of the QP they name.  The algorithms and the
// pacer are cc.hpp's.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>

#include "rdma.hpp"

namespace vrnic {

using namespace roce;

namespace {

// The n oldest RTT probes go.
void drop_probes(Qp &qp, unsigned int n)
{
	std::copy(qp.probe_psn.begin() + n, qp.probe_psn.begin() + qp.nprobes,
		  qp.probe_psn.begin());
	std::copy(qp.probe_ns.begin() + n, qp.probe_ns.begin() + qp.nprobes,
		  qp.probe_ns.begin());
	qp.nprobes = uint8_t(qp.nprobes - n);
}

// The probes pred says go (by PSN); the send time of the newest of them.
template <typename Pred>
std::optional<uint64_t> drop_probes_if(Qp &qp, Pred pred)
{
	std::optional<uint64_t> newest;
	unsigned int n = 0;

	for (unsigned int i = 0; i < qp.nprobes; i++) {
		if (pred(qp.probe_psn[i])) {
			newest = qp.probe_ns[i];
			continue;
		}
		qp.probe_psn[n] = qp.probe_psn[i];
		qp.probe_ns[n] = qp.probe_ns[i];
		n++;
	}
	qp.nprobes = uint8_t(n);
	return newest;
}

} // namespace

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

	// Only the peer a connected QP sends to may slow it down, and only
	// while the QP sends (RTS, or SQD draining what is in flight).
	if (!qp || qp->datagram() ||
	    (qp->attr.state != VRNIC_QPS_RTS &&
	     qp->attr.state != VRNIC_QPS_SQD) ||
	    !from_peer(*qp, p.path) || p.path.vlan != qp->path.vlan) {
		cnt_.rp_cnp_ignored++;
		return;
	}
	cc_sync(*qp);
	if (!qp->cc_on) {
		cnt_.rp_cnp_ignored++;	// no algorithm runs for it
		return;
	}
	const uint64_t now = plat_.now_ns();
	if (qp->rp->on_cnp(now))
		cnt_.rp_cnp_handled++;
	else
		cnt_.rp_cnp_ignored++;
	cc_apply(*qp, now);
}

void Rdma::cc_sync(Qp &qp)
{
	if (qp.cc_gen == cc_.gen && !qp.cc_dirty)
		return;
	qp.cc_gen = cc_.gen;
	qp.cc_dirty = false;
	const unsigned int prio = qp.attr.traffic_class >> 5;
	const bool want = cc_.cfg.algo != cc::Algo::None &&
			  (cc_.rp_enable & (1u << prio)) && !qp.datagram() &&
			  qp.type != VRNIC_QPT_XRC_TGT;
	// New settings start the algorithm over (at the line rate).
	if (want)
		qp.cc_on = qp.rp.init(cc_.cfg);
	else
		qp.rp.init_none();
	qp.cc_on = want && qp.cc_on;
	// ECT(0) on every packet while the algorithm runs; otherwise the
	// class's own ECN bits, except CE: only a switch marks congestion.
	qp.path.traffic_class = qp.cc_on ?
		uint8_t((qp.attr.traffic_class & ~3u) | 2u) :
		no_ce(qp.attr.traffic_class);
	qp.nprobes = 0;
	cc_apply(qp, plat_.now_ns());
}

void Rdma::cc_apply(Qp &qp, uint64_t now)
{
	const cc::Output out = qp.cc_on ? qp.rp->output() : cc::Output{};

	if (out.rate_Bps != qp.pacer.rate()) {
		const bool faster = !out.rate_Bps || out.rate_Bps > qp.pacer.rate();
		qp.pacer.set_rate(now, out.rate_Bps,
				  out.rate_Bps ? cc::Pacer::default_burst(out.rate_Bps) : 0);
		qp.cc_rate_mbps = uint32_t(std::min<uint64_t>(
			(out.rate_Bps + cc::kBytesPerSecPerMbps - 1) /
				cc::kBytesPerSecPerMbps, UINT32_MAX));
		if (faster && qp.pace_at) {
			// Waiting at the old rate: ask the pacer again now.
			qp.pace_at = 0;
			activate(qp);
			plat_.schedule();
		}
	}
	if (out.window_bytes > qp.cc_window && qp.cc_window) {
		activate(qp);		// a wider window may let more go
		plat_.schedule();
	}
	qp.cc_window = out.window_bytes;
	const uint64_t t = qp.cc_on ? qp.rp->next_timer_ns() : cc::kNever;
	if (t == cc::kNever) {
		qp.cc_at = 0;		// its heap entry, if any, finds 0
	} else if (std::max(t, now + 1) != qp.cc_at) {
		// Never at or before now: timer() would pop it again in the
		// same call, past the algorithm's own catch-up bound.
		qp.cc_at = std::max(t, now + 1);
		set_deadline(qp, kTimerCc, qp.cc_at);
	}
}

// A request packet left.  A probe per packet that asks for an ACK, newer
// than the newest one kept and not a retransmission; the oldest give way.
void Rdma::probe_sent(Qp &qp, uint32_t psn, uint64_t now)
{
	if ((!qp.probe_floor_on || psn_diff(psn, qp.probe_floor) >= 0) &&
	    (!qp.nprobes || psn_diff(psn, qp.probe_psn[qp.nprobes - 1U]) > 0)) {
		if (qp.nprobes == Qp::kProbes)
			drop_probes(qp, 1);
		qp.probe_psn[qp.nprobes] = psn;
		qp.probe_ns[qp.nprobes] = now;
		qp.nprobes++;
	}
}

// psn is sent again: its probe, if any, goes (Karn's rule).
void Rdma::drop_probe(Qp &qp, uint32_t psn)
{
	drop_probes_if(qp, [psn](uint32_t p) { return p == psn; });
}

// A SACK reported s's marks: the round trip of the newest probe it
// reports held (0: none).  The probes it reports held go, so that the
// ACK covering them later (after the hole) gives no second sample.
uint64_t Rdma::probe_sacked(Qp &qp, const SrState &s, uint64_t now)
{
	const auto sent = drop_probes_if(qp, [&s](uint32_t p) { return s.is_sacked(p); });

	return sent ? std::max<uint64_t>(now - *sent, 1) : 0;
}

// Everything before psn_after is acknowledged: the round trip of the
// newest probe it covers (0: none).
uint64_t Rdma::probe_acked(Qp &qp, uint32_t psn_after, uint64_t now)
{
	unsigned int n = 0;

	// Everything sent before the last rewind is acknowledged: its floor
	// is past (and must not flip sign 2^23 PSNs later).
	if (qp.probe_floor_on && psn_diff(psn_after, qp.probe_floor) >= 0)
		qp.probe_floor_on = false;
	while (n < qp.nprobes && psn_diff(psn_after, qp.probe_psn[n]) > 0)
		n++;
	if (!n)
		return 0;
	const uint64_t rtt = std::max<uint64_t>(now - qp.probe_ns[n - 1], 1);
	drop_probes(qp, n);
	return rtt;
}

void Rdma::cc_sent(Qp &qp, uint32_t psn, bool ackreq, uint32_t bytes)
{
	const uint64_t now = plat_.now_ns();

	qp.rp->on_bytes_sent(now, bytes);
	if (ackreq)
		probe_sent(qp, psn, now);
	cc_apply(qp, now);
}

void Rdma::cc_acked(Qp &qp, uint64_t rtt, uint32_t acked)
{
	const uint64_t now = plat_.now_ns();

	if (rtt)
		qp.rp->on_ack(now, rtt, acked * qp.mtu);
	cc_apply(qp, now);
}

} // namespace vrnic

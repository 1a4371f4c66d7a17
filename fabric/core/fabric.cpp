// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-fabric's switch model.  Buffer accounting follows the HPCC
// simulator's switch-mmu (per ingress port and priority: a reserve, then the
// shared pool under a dynamic threshold, then headroom for lossless
// priorities); marking is RED on the egress queue; PFC frames go upstream
// out of band.
#include "fabric.hpp"

#include <algorithm>
#include <functional>
#include <queue>
#include <stdexcept>

namespace vrnic::fabric {

namespace {

constexpr uint64_t kNominalPfcRate = 100'000'000'000ULL;	// unlimited links
constexpr size_t kDrops = static_cast<size_t>(Drop::Count);
// XOFF refreshes per pause time (quanta at the link rate).
constexpr uint64_t kRefreshesPerPause = 8;

uint64_t mac_key(const Mac &m)
{
	uint64_t k = 0;
	for (uint8_t b : m)
		k = (k << 8) | b;
	return k;
}

uint64_t name_seed(uint64_t seed, const std::string &name, uint64_t salt)
{
	uint64_t h = 1469598103934665603ULL ^ salt;
	for (char c : name) {
		h ^= static_cast<uint8_t>(c);
		h *= 1099511628211ULL;
	}
	return seed ^ h;
}

uint64_t serialize_ns(uint64_t bytes, uint64_t rate_bps)
{
	if (rate_bps == 0)
		return 0;
	return static_cast<uint64_t>(static_cast<double>(bytes) * 8e9 /
				     static_cast<double>(rate_bps));
}

} // namespace

double ecn_probability(const EcnConfig &c, uint64_t q)
{
	if (!c.enabled || q <= c.kmin)
		return 0.0;
	if (q >= c.kmax)
		return 1.0;
	return c.pmax * static_cast<double>(q - c.kmin) / static_cast<double>(c.kmax - c.kmin);
}

const char *drop_name(Drop d)
{
	static constexpr std::array<const char *, kDrops> names = {
		"truncated", "malformed", "oversized", "buffer", "queue_limit",
		"headroom", "loss", "inject", "no_route", "port_down",
		"link_overflow", "backlog"};
	return names.at(static_cast<size_t>(d));
}

Fabric::Fabric(TopologyConfig cfg, FrameSink &sink) : cfg_(std::move(cfg)), sink_(sink)
{
	std::unordered_map<std::string, uint32_t> sw_index;
	switches_.resize(cfg_.switches.size());
	for (uint32_t i = 0; i < cfg_.switches.size(); i++) {
		switches_[i].cfg = &cfg_.switches[i];
		switches_[i].rng.reseed(name_seed(cfg_.seed, cfg_.switches[i].name, 1));
		sw_index[cfg_.switches[i].name] = i;
	}
	std::unordered_map<std::string, uint32_t> host_index_of;
	for (uint32_t i = 0; i < cfg_.hosts.size(); i++)
		host_index_of[cfg_.hosts[i].name] = i;
	hosts_.resize(cfg_.hosts.size());

	auto new_port = [&](uint32_t sw, const std::string &peer, LinkParams *out,
			    LinkParams *in, const std::string &link, uint64_t salt) {
		Switch &s = switches_[sw];
		Port p;
		p.peer = peer;
		p.out = out;
		p.in = in;
		const auto idx = static_cast<uint16_t>(s.ports.size());
		p.mac = {0x02, 0x76, 0x66, static_cast<uint8_t>(sw),
			 static_cast<uint8_t>(idx >> 8), static_cast<uint8_t>(idx)};
		p.rng.reseed(name_seed(cfg_.seed, link, salt));
		p.in_rng.reseed(name_seed(cfg_.seed, link, salt + 100));
		s.ports.push_back(std::move(p));
		return idx;
	};
	for (auto &l : cfg_.links) {
		const uint32_t b = sw_index.at(l.b);
		if (auto h = host_index_of.find(l.a); h != host_index_of.end()) {
			const uint16_t pb = new_port(b, l.a, &l.b_to_a, &l.a_to_b, l.name, 2);
			switches_[b].ports[pb].host = h->second;
			// A host link's bytes in flight towards the switch are
			// counted on the switch's own port.
			switches_[b].ports[pb].peer_sw = b;
			switches_[b].ports[pb].peer_port = pb;
			hosts_[h->second] = {b, pb, false};
			continue;
		}
		const uint32_t a = sw_index.at(l.a);
		const uint16_t pa = new_port(a, l.b, &l.a_to_b, &l.b_to_a, l.name, 3);
		const uint16_t pb = new_port(b, l.a, &l.b_to_a, &l.a_to_b, l.name, 4);
		switches_[a].ports[pa].peer_sw = b;
		switches_[a].ports[pa].peer_port = pb;
		switches_[b].ports[pb].peer_sw = a;
		switches_[b].ports[pb].peer_port = pa;
	}
	for (auto &s : switches_) {
		for (auto &p : s.ports) {
			p.tokens = static_cast<double>(p.out->burst_bytes);
			if (p.in->pfc.priorities)
				s.headroom_total += p.in->pfc.headroom;
			s.reserve_total += s.cfg->reserve * kPriorities;
		}
	}
	// Shortest paths between switches: every port whose peer is one hop
	// closer to the destination is an equal-cost next hop.
	const size_t n = switches_.size();
	for (uint32_t dst = 0; dst < n; dst++) {
		std::vector<uint32_t> dist(n, UINT32_MAX);
		std::queue<uint32_t> q;
		dist[dst] = 0;
		q.push(dst);
		while (!q.empty()) {
			const uint32_t u = q.front();
			q.pop();
			for (const auto &p : switches_[u].ports)
				if (p.host < 0 && dist[p.peer_sw] == UINT32_MAX) {
					dist[p.peer_sw] = dist[u] + 1;
					q.push(p.peer_sw);
				}
		}
		for (uint32_t u = 0; u < n; u++) {
			auto &hops = switches_[u].next_hops;
			hops.resize(n);
			for (size_t i = 0; i < switches_[u].ports.size(); i++) {
				const Port &p = switches_[u].ports[i];
				if (p.host < 0 && dist[u] != UINT32_MAX &&
				    dist[p.peer_sw] != UINT32_MAX && dist[p.peer_sw] + 1 == dist[u])
					hops[dst].push_back(static_cast<uint16_t>(i));
			}
		}
	}
	// A spanning tree from switch 0 for floods (no loops, like STP).
	std::vector<bool> seen(n, false);
	std::queue<uint32_t> q;
	for (uint32_t root = 0; root < n; root++) {
		if (seen[root])
			continue;
		seen[root] = true;
		q.push(root);
		while (!q.empty()) {
			const uint32_t u = q.front();
			q.pop();
			for (size_t i = 0; i < switches_[u].ports.size(); i++) {
				const Port &p = switches_[u].ports[i];
				if (p.host >= 0 || seen[p.peer_sw])
					continue;
				seen[p.peer_sw] = true;
				switches_[u].tree.push_back(static_cast<uint16_t>(i));
				switches_[p.peer_sw].tree.push_back(p.peer_port);
				q.push(p.peer_sw);
			}
		}
	}
	for (const auto &inj : cfg_.injections)
		add_injection(inj);
}

long Fabric::host_index(const std::string &name) const
{
	for (size_t i = 0; i < cfg_.hosts.size(); i++)
		if (cfg_.hosts[i].name == name)
			return static_cast<long>(i);
	return -1;
}

void Fabric::set_host_up(size_t host, bool up)
{
	if (host < hosts_.size())
		hosts_[host].up = up;
}

bool Fabric::host_up(size_t host) const
{
	return host < hosts_.size() && hosts_[host].up;
}

void Fabric::count_host_drop(size_t host, Drop why)
{
	if (host >= hosts_.size())
		return;
	Port &p = switches_[hosts_[host].sw].ports[hosts_[host].port];
	count_drop(p, 0, why, 0);
}

LinkParams *Fabric::link_params(const std::string &link, const std::string &dir)
{
	for (auto &l : cfg_.links)
		if (l.name == link) {
			if (dir == "a_to_b")
				return &l.a_to_b;
			if (dir == "b_to_a")
				return &l.b_to_a;
			return nullptr;
		}
	return nullptr;
}

void Fabric::add_injection(const Injection &inj)
{
	if (injections_.size() < 4096)
		injections_.push_back({inj, 0, false});
}

void Fabric::push(Event ev)
{
	ev.seq = seq_++;
	events_.push_back(std::move(ev));
	std::push_heap(events_.begin(), events_.end(), std::greater<>());
}

uint64_t Fabric::next_event() const
{
	return events_.empty() ? kNever : events_.front().t;
}

void Fabric::advance(uint64_t now)
{
	now_ = std::max(now_, now);
	while (!events_.empty() && events_.front().t <= now) {
		std::pop_heap(events_.begin(), events_.end(), std::greater<>());
		Event ev = std::move(events_.back());
		events_.pop_back();
		const uint64_t t = ev.t;
		switch (ev.kind) {
		case Ev::Arrive: {
			Port &p = switches_[ev.sw].ports[ev.port];
			// The bytes were on the peer's link out.
			Port &from = switches_[p.peer_sw].ports[p.peer_port];
			from.inflight -= std::min<uint64_t>(from.inflight, ev.data.size());
			ingress(ev.sw, ev.port, std::move(ev.data), t);
			break;
		}
		case Ev::Deliver: {
			Port &p = switches_[ev.sw].ports[ev.port];
			p.inflight -= std::min<uint64_t>(p.inflight, ev.data.size());
			if (p.host >= 0 && hosts_[static_cast<size_t>(p.host)].up)
				sink_.deliver(static_cast<size_t>(p.host), std::move(ev.data));
			else
				count_drop(p, ev.prio, Drop::PortDown, ev.data.size());
			break;
		}
		case Ev::Kick: {
			Port &p = switches_[ev.sw].ports[ev.port];
			if (p.kick_at == t)
				p.kick_at = kNever;
			try_tx(ev.sw, ev.port, t);
			break;
		}
		case Ev::PfcRefresh: {
			// Only the latest refresh of a priority counts: an XOFF
			// that flaps must not start a second chain.
			const Port &p = switches_[ev.sw].ports[ev.port];
			if (p.xoff[ev.prio] && p.refresh_at[ev.prio] == t)
				send_pfc(ev.sw, ev.port, ev.prio, true, t);
			break;
		}
		}
	}
}

void Fabric::count_drop(Port &p, int prio, Drop why, size_t /*bytes*/)
{
	p.stats[static_cast<size_t>(prio)].drops[static_cast<size_t>(why)]++;
}

void Fabric::receive(size_t host, std::span<const uint8_t> frame, uint64_t now)
{
	advance(now);
	if (host >= hosts_.size())
		return;
	const HostRef &h = hosts_[host];
	Port &p = switches_[h.sw].ports[h.port];
	if (frame.size() > cfg_.max_frame) {
		count_drop(p, 0, Drop::Oversized, frame.size());
		return;
	}
	Parsed parsed = parse_frame(frame);
	if (parsed.error != ParseError::None) {
		count_drop(p, 0, parsed.error == ParseError::Truncated ? Drop::Truncated
								       : Drop::Malformed,
			   frame.size());
		return;
	}
	Bytes data = pool_.take(frame.size());
	data.assign(frame.begin(), frame.end());
	Packet pkt{std::move(data), parsed.info, 0, h.port};
	QueueStats &st = p.stats[0];
	if (injected(host, pkt, st))
		return;
	uint64_t extra = 0;
	bool dup = false;
	if (p.in->impair.any() &&
	    !impair(p.in->impair, p.in_rng, p.in_ge_bad, pkt, st, extra, dup)) {
		count_drop(p, 0, Drop::Loss, frame.size());
		return;
	}
	const uint64_t delay = p.in->delay_ns + extra;
	for (int copy = 0; copy < (dup ? 2 : 1); copy++) {
		if (delay == 0) {
			ingress(h.sw, h.port, copy == 0 && !dup ? std::move(pkt.data) : pkt.data, now);
			continue;
		}
		// The host's link towards the switch: the bytes are on it until
		// they arrive.  Its own in-flight count bounds the memory.
		if (p.inflight + pkt.data.size() > cfg_.max_inflight) {
			count_drop(p, 0, Drop::LinkOverflow, pkt.data.size());
			continue;
		}
		p.inflight += pkt.data.size();
		Event ev;
		ev.t = now + delay;
		ev.kind = Ev::Arrive;
		ev.sw = h.sw;
		ev.port = h.port;
		ev.data = pkt.data;
		push(std::move(ev));
	}
}

bool Fabric::injected(size_t host, Packet &pkt, QueueStats &st)
{
	if (!pkt.info.bth)
		return false;
	for (auto &inj : injections_) {
		const Injection &r = inj.rule;
		if (inj.fired || r.qpn != pkt.info.dest_qpn || r.psn != pkt.info.psn ||
		    (!r.host.empty() && r.host != cfg_.hosts[host].name))
			continue;
		if (++inj.seen != r.nth)
			continue;
		inj.fired = true;
		switch (r.action) {
		case Injection::Action::Drop:
			st.drops[static_cast<size_t>(Drop::Inject)]++;
			return true;
		case Injection::Action::Ecn:
			if (mark_ce(pkt.data, pkt.info)) {
				pkt.info.ecn = Ecn::Ce;
				st.ce_marked++;
			}
			break;
		case Injection::Action::Corrupt:
			flip_bit(pkt.data, pkt.info, uint64_t{12} * 8);	// past the BTH
			st.impair_corrupted++;
			break;
		}
	}
	return false;
}

bool Fabric::impair(const Impairment &imp, Rng &rng, bool &ge_bad, Packet &pkt,
		    QueueStats &st, uint64_t &extra, bool &duplicate)
{
	if (rng.chance(imp.loss))
		return false;
	if (imp.burst.enabled) {
		ge_bad = ge_bad ? !rng.chance(imp.burst.r) : rng.chance(imp.burst.p);
		if (rng.chance(ge_bad ? imp.burst.h : imp.burst.k))
			return false;
	}
	if (rng.chance(imp.corrupt)) {
		flip_bit(pkt.data, pkt.info, rng.next());
		st.impair_corrupted++;
	}
	duplicate = rng.chance(imp.duplicate);
	if (duplicate)
		st.impair_duplicated++;
	extra = imp.jitter_ns ? rng.upto(imp.jitter_ns) : 0;
	if (rng.chance(imp.reorder)) {
		extra += imp.reorder_delay_ns;
		st.impair_reordered++;
	}
	return true;
}

void Fabric::ingress(uint32_t sw, uint16_t port, Bytes data, uint64_t now)
{
	Switch &s = switches_[sw];
	Port &p = s.ports[port];
	if (data.size() > cfg_.max_frame) {
		count_drop(p, 0, Drop::Oversized, data.size());
		return;
	}
	Parsed parsed = parse_frame(data);
	if (parsed.error != ParseError::None) {
		count_drop(p, 0, parsed.error == ParseError::Truncated ? Drop::Truncated
								       : Drop::Malformed,
			   data.size());
		return;
	}
	const FrameInfo &info = parsed.info;
	if (info.mac_control) {
		// MAC control frames end at the port that receives them.
		if (auto pfc = parse_pfc(data, info))
			handle_pfc(sw, port, *pfc, now);
		return;
	}
	if (info.dst[0] == 0x01 && info.dst[1] == 0x80 && info.dst[2] == 0xc2 &&
	    info.dst[3] == 0 && info.dst[4] == 0 && (info.dst[5] & 0xf0) == 0)
		return;	// 802.1D link-local: never forwarded
	Packet pkt{std::move(data), info, 0, port};
	pkt.prio = s.cfg->classify == Classify::Pcp
			   ? (info.vlan ? info.pcp : 0)
			   : ((info.ipv4 || info.ipv6) ? s.cfg->dscp_to_prio[info.dscp]
						       : (info.vlan ? info.pcp : 0));
	QueueStats &st = p.stats[pkt.prio];
	st.rx_packets++;
	st.rx_bytes += pkt.data.size();
	if (p.host >= 0) {
		// L2 learning at the edge; the directory tells other switches
		// where the host is, so they route to its switch.
		const uint64_t key = mac_key(info.src);
		if (s.macs.contains(key) || s.macs.size() < s.cfg->mac_table)
			s.macs[key] = port;
		if (directory_.contains(key) || directory_.size() < 65536)
			directory_[key] = static_cast<uint32_t>(p.host);
	}
	forward(sw, port, std::move(pkt), now);
}

void Fabric::handle_pfc(uint32_t sw, uint16_t port, const Pfc &pfc, uint64_t now)
{
	Port &p = switches_[sw].ports[port];
	for (int i = 0; i < kPriorities; i++) {
		if (!(pfc.enable & (1U << i)))
			continue;
		Queue &q = p.queues[static_cast<size_t>(i)];
		p.stats[static_cast<size_t>(i)].pfc_rx++;
		if (q.wd_until > now)
			continue;	// the watchdog ignores this priority
		const uint64_t until = now + pause_ns(p, pfc.quanta[static_cast<size_t>(i)]);
		if (q.paused_until > now) {
			q.paused_until = until;	// extend, or end now on XON
		} else if (until > now) {
			q.paused_closed += q.paused_until - q.pause_start;
			q.pause_start = now;
			q.paused_until = until;
		}
	}
	// Work may be possible now (XON) or later (expiry): look again.
	schedule_kick(sw, port, now);
}

uint64_t Fabric::pause_ns(const Port &p, uint16_t quanta) const
{
	const uint64_t rate = p.out->rate_bps ? p.out->rate_bps : kNominalPfcRate;
	return static_cast<uint64_t>(static_cast<double>(quanta) * 512.0 * 1e9 /
				     static_cast<double>(rate));
}

void Fabric::forward(uint32_t sw, uint16_t in_port, Packet pkt, uint64_t now)
{
	Switch &s = switches_[sw];
	Port &in = s.ports[in_port];
	std::vector<uint16_t> flood;
	long out = -1;
	if (!is_multicast(pkt.info.dst)) {
		const uint64_t key = mac_key(pkt.info.dst);
		if (auto m = s.macs.find(key); m != s.macs.end()) {
			out = m->second;
		} else if (auto d = directory_.find(key); d != directory_.end()) {
			const HostRef &h = hosts_[d->second];
			const auto &hops = s.next_hops[h.sw];
			if (h.sw == sw) {
				out = h.port;
			} else if (!hops.empty()) {
				const size_t pick = s.cfg->multipath == Multipath::Spray
							    ? s.spray++ % hops.size()
							    : flow_hash(pkt.info, s.cfg->seed) % hops.size();
				out = hops[pick];
			}
		}
	}
	if (out == in_port) {
		count_drop(in, pkt.prio, Drop::NoRoute, pkt.data.size());
		return;
	}
	if (out >= 0) {
		enqueue(sw, static_cast<uint16_t>(out), std::move(pkt), now);
		return;
	}
	// Broadcast, multicast and unknown unicast: every host port of this
	// switch and the flood tree, never back where it came from.
	for (size_t i = 0; i < s.ports.size(); i++) {
		const auto pi = static_cast<uint16_t>(i);
		if (pi == in_port)
			continue;
		if (s.ports[i].host >= 0 ||
		    std::find(s.tree.begin(), s.tree.end(), pi) != s.tree.end())
			flood.push_back(pi);
	}
	if (flood.empty())
		return;	// the end of a branch of the flood tree
	for (size_t i = 0; i + 1 < flood.size(); i++)
		enqueue(sw, flood[i], pkt, now);
	enqueue(sw, flood.back(), std::move(pkt), now);
}

uint64_t Fabric::shared_of(const Switch &s, uint64_t ingress_bytes) const
{
	return ingress_bytes > s.cfg->reserve ? ingress_bytes - s.cfg->reserve : 0;
}

uint64_t Fabric::pfc_threshold(const Switch &s, const Port &p) const
{
	const PfcConfig &c = p.in->pfc;
	if (c.xoff)
		return c.xoff;
	const uint64_t committed = s.headroom_total + s.reserve_total + s.shared;
	const uint64_t free = s.cfg->buffer > committed ? s.cfg->buffer - committed : 0;
	return free >> c.alpha_shift;
}

void Fabric::ingress_add(Switch &s, Port &p, int prio, uint64_t size)
{
	const auto i = static_cast<size_t>(prio);
	const bool lossless = (p.in->pfc.priorities >> prio) & 1;
	const uint64_t before = shared_of(s, p.ingress[i]);
	if (lossless && before + size > pfc_threshold(s, p) &&
	    p.ingress[i] + size > s.cfg->reserve) {
		p.hdrm[i] += size;	// beyond XOFF: in flight after the pause
		p.stats[i].headroom_max = std::max(p.stats[i].headroom_max, p.hdrm[i]);
		return;
	}
	p.ingress[i] += size;
	s.shared += shared_of(s, p.ingress[i]) - before;
}

void Fabric::ingress_remove(Switch &s, Port &p, int prio, uint64_t size)
{
	const auto i = static_cast<size_t>(prio);
	const uint64_t from_hdrm = std::min(p.hdrm[i], size);
	p.hdrm[i] -= from_hdrm;
	size -= from_hdrm;
	const uint64_t before = shared_of(s, p.ingress[i]);
	p.ingress[i] -= std::min(p.ingress[i], size);
	s.shared -= std::min(s.shared, before - shared_of(s, p.ingress[i]));
}

void Fabric::check_pfc(uint32_t sw, uint16_t port, int prio, uint64_t now)
{
	Switch &s = switches_[sw];
	Port &p = s.ports[port];
	const auto i = static_cast<size_t>(prio);
	const PfcConfig &c = p.in->pfc;
	if (!((c.priorities >> prio) & 1)) {
		if (p.xoff[i]) {	// PFC was turned off at run time
			p.xoff[i] = false;
			send_pfc(sw, port, prio, false, now);
		}
		return;
	}
	const uint64_t shared = shared_of(s, p.ingress[i]);
	const uint64_t thresh = pfc_threshold(s, p);
	if (!p.xoff[i]) {
		if (p.hdrm[i] > 0 || (shared > 0 && shared >= thresh)) {
			p.xoff[i] = true;
			send_pfc(sw, port, prio, true, now);
		}
		return;
	}
	bool resume = false;
	if (c.xoff)
		resume = p.hdrm[i] == 0 && shared <= c.xon;
	else
		resume = p.hdrm[i] == 0 &&
			 (shared == 0 || shared + c.resume_offset <= thresh);
	if (resume) {
		p.xoff[i] = false;
		send_pfc(sw, port, prio, false, now);
	}
}

void Fabric::send_pfc(uint32_t sw, uint16_t port, int prio, bool xoff, uint64_t now)
{
	Port &p = switches_[sw].ports[port];
	Pfc pfc;
	pfc.enable = static_cast<uint8_t>(1U << prio);
	pfc.quanta[static_cast<size_t>(prio)] = xoff ? p.in->pfc.quanta : 0;
	p.stats[static_cast<size_t>(prio)].pfc_tx++;
	// MAC control frames bypass the queues and the impairments.
	Event ev;
	ev.t = now + p.out->delay_ns;
	ev.sw = sw;
	ev.port = port;
	ev.prio = static_cast<uint8_t>(prio);
	ev.data = build_pfc(p.mac, pfc);
	if (p.host >= 0) {
		ev.kind = Ev::Deliver;
		p.inflight += ev.data.size();
	} else {
		ev.kind = Ev::Arrive;
		ev.sw = p.peer_sw;
		ev.port = p.peer_port;
		p.inflight += ev.data.size();
	}
	push(std::move(ev));
	if (xoff) {
		// Refresh before the peer's pause runs out, as switches do, but
		// every eighth of the pause rather than every half: the pause
		// is wall-clock time (3.4 ms at 10 Gb/s), and on a loaded host
		// a refresh can be milliseconds late to leave here or to be
		// read by the NIC; each late one lets the sender burst into
		// the headroom.
		Event r;
		r.t = now + std::max<uint64_t>(pause_ns(p, p.in->pfc.quanta) / kRefreshesPerPause, 1000);
		r.kind = Ev::PfcRefresh;
		r.sw = sw;
		r.port = port;
		r.prio = static_cast<uint8_t>(prio);
		p.refresh_at[static_cast<size_t>(prio)] = r.t;
		push(std::move(r));
	}
}

void Fabric::enqueue(uint32_t sw, uint16_t out, Packet pkt, uint64_t now)
{
	Switch &s = switches_[sw];
	Port &in = s.ports[pkt.in_port];
	Port &e = s.ports[out];
	const int prio = pkt.prio;
	const auto pi = static_cast<size_t>(prio);
	Queue &q = e.queues[pi];
	const uint64_t size = pkt.data.size();
	const bool lossless = (in.in->pfc.priorities >> prio) & 1;
	if (s.used + size > s.cfg->buffer) {
		count_drop(in, prio, Drop::Buffer, size);
		return;
	}
	if (lossless) {
		const uint64_t shared = shared_of(s, in.ingress[pi]);
		if (size + in.hdrm[pi] > in.in->pfc.headroom &&
		    size + shared > pfc_threshold(s, in)) {
			count_drop(in, prio, Drop::Headroom, size);
			return;
		}
	} else {
		uint64_t port_bytes = 0;
		for (const auto &qq : e.queues)
			port_bytes += qq.bytes;
		if (e.out->queue_limit && port_bytes + size > e.out->queue_limit) {
			count_drop(in, prio, Drop::QueueLimit, size);
			return;
		}
		const uint64_t free = s.cfg->buffer - s.used;
		if (q.bytes + size > (free >> s.cfg->egress_alpha_shift)) {
			count_drop(in, prio, Drop::Buffer, size);
			return;
		}
	}
	ingress_add(s, in, prio, size);
	const EcnConfig &ecn = e.out->ecn[pi];
	if (ecn.enabled && pkt.info.ecn != Ecn::NotEct && pkt.info.ecn != Ecn::Ce) {
		if (s.rng.chance(ecn_probability(ecn, q.bytes)) && mark_ce(pkt.data, pkt.info)) {
			pkt.info.ecn = Ecn::Ce;
			e.stats[pi].ce_marked++;
		}
	}
	q.bytes += size;
	s.used += size;
	e.stats[pi].depth_max = std::max(e.stats[pi].depth_max, q.bytes);
	const uint16_t in_port = pkt.in_port;
	q.q.push_back(std::move(pkt));
	check_pfc(sw, in_port, prio, now);
	try_tx(sw, out, now);
}

void Fabric::schedule_kick(uint32_t sw, uint16_t port, uint64_t t)
{
	Port &p = switches_[sw].ports[port];
	if (p.kick_at <= t)
		return;
	p.kick_at = t;
	Event ev;
	ev.t = t;
	ev.kind = Ev::Kick;
	ev.sw = sw;
	ev.port = port;
	push(std::move(ev));
}

int Fabric::pick_queue(Switch &s, Port &p, uint64_t now, uint64_t &wake)
{
	std::array<bool, kPriorities> ok{};
	bool any = false;
	for (int i = 0; i < kPriorities; i++) {
		Queue &q = p.queues[static_cast<size_t>(i)];
		if (q.q.empty())
			continue;
		if (q.paused_until > now && q.wd_until <= now) {
			const uint64_t wd = p.out->pfc.watchdog_ns;
			if (wd && now - q.pause_start >= wd) {
				// A stuck pause: the watchdog ignores PFC on
				// this queue for a while, as switches do.
				q.paused_closed += now - q.pause_start;
				q.pause_start = now;
				q.paused_until = now;
				q.wd_until = now + p.out->pfc.watchdog_restore_ns;
				p.stats[static_cast<size_t>(i)].pfc_watchdog++;
			} else {
				wake = std::min(wake, q.paused_until);
				if (wd)
					wake = std::min(wake, q.pause_start + wd);
				continue;
			}
		}
		ok[static_cast<size_t>(i)] = true;
		any = true;
	}
	if (!any)
		return -1;
	if (s.cfg->scheduler == Scheduler::Strict) {
		for (int i = kPriorities - 1; i >= 0; i--)
			if (ok[static_cast<size_t>(i)])
				return i;
		return -1;
	}
	// Deficit-weighted round robin: a queue's turn adds its quantum once;
	// it sends while the deficit covers its head frame, then the turn
	// passes on.  After a full cycle with no sender, every eligible queue
	// gets the quanta it still needs at once, so tiny weights cannot spin.
	for (int pass = 0; pass < 2; pass++) {
		for (unsigned k = 0; k <= kPriorities; k++) {
			const unsigned i = p.dwrr;
			if (ok[i]) {
				Queue &q = p.queues[i];
				if (!p.dwrr_turn) {
					q.deficit += s.cfg->weights[i];
					p.dwrr_turn = true;
				}
				if (q.deficit >= static_cast<int64_t>(q.q.front().data.size()))
					return static_cast<int>(i);
			}
			p.dwrr_turn = false;
			p.dwrr = (i + 1) % kPriorities;
		}
		uint64_t rounds = UINT64_MAX;
		for (unsigned i = 0; i < kPriorities; i++) {
			if (!ok[i])
				continue;
			const Queue &q = p.queues[i];
			const int64_t need = static_cast<int64_t>(q.q.front().data.size()) - q.deficit;
			rounds = std::min(rounds, static_cast<uint64_t>(std::max<int64_t>(need, 0)) /
							  s.cfg->weights[i]);
		}
		for (unsigned i = 0; i < kPriorities; i++)
			if (ok[i])
				p.queues[i].deficit += static_cast<int64_t>(rounds * s.cfg->weights[i]);
	}
	for (unsigned i = 0; i < kPriorities; i++)
		if (ok[i])
			return static_cast<int>(i);
	return -1;
}

void Fabric::try_tx(uint32_t sw, uint16_t port, uint64_t now)
{
	Switch &s = switches_[sw];
	Port &p = s.ports[port];
	for (;;) {
		uint64_t wake = kNever;
		const int qi = pick_queue(s, p, now, wake);
		if (qi < 0) {
			if (wake != kNever)
				schedule_kick(sw, port, wake);
			return;
		}
		Queue &q = p.queues[static_cast<size_t>(qi)];
		const uint64_t size = q.q.front().data.size();
		const uint64_t rate = p.out->rate_bps;
		if (rate) {
			// A token bucket of burst_bytes that may run into debt by
			// one frame: with no burst this is exact serialisation, a
			// frame leaves when the one before has been sent.
			const auto cap = static_cast<double>(p.out->burst_bytes);
			p.tokens = std::min(cap, p.tokens + static_cast<double>(now - p.token_time) *
								static_cast<double>(rate) / 8e9);
			p.token_time = now;
			if (p.tokens < 0) {
				schedule_kick(sw, port,
					      now + static_cast<uint64_t>(-p.tokens * 8e9 /
									  static_cast<double>(rate)) + 1);
				return;
			}
			p.tokens -= static_cast<double>(size);
		}
		Packet pkt = std::move(q.q.front());
		q.q.pop_front();
		q.bytes -= size;
		if (q.q.empty())
			q.deficit = 0;
		else if (s.cfg->scheduler == Scheduler::Dwrr)
			q.deficit -= static_cast<int64_t>(size);
		s.used -= size;
		QueueStats &st = p.stats[static_cast<size_t>(qi)];
		st.tx_packets++;
		st.tx_bytes += size;
		Port &in = s.ports[pkt.in_port];
		ingress_remove(s, in, qi, size);
		check_pfc(sw, pkt.in_port, qi, now);
		transmit(sw, port, std::move(pkt), now);
	}
}

void Fabric::transmit(uint32_t sw, uint16_t port, Packet pkt, uint64_t now)
{
	Port &p = switches_[sw].ports[port];
	QueueStats &st = p.stats[pkt.prio];
	uint64_t extra = 0;
	bool dup = false;
	if (p.out->impair.any() && !impair(p.out->impair, p.rng, p.ge_bad, pkt, st, extra, dup)) {
		count_drop(p, pkt.prio, Drop::Loss, pkt.data.size());
		return;
	}
	const uint64_t at = now + serialize_ns(pkt.data.size(), p.out->rate_bps) +
			    p.out->delay_ns + extra;
	for (int copy = 0; copy < (dup ? 2 : 1); copy++) {
		if (p.inflight + pkt.data.size() > cfg_.max_inflight) {
			count_drop(p, pkt.prio, Drop::LinkOverflow, pkt.data.size());
			continue;
		}
		p.inflight += pkt.data.size();
		if (p.host >= 0 && at == now && copy == 0 && !dup) {
			// No delay: straight out, no event.
			p.inflight -= pkt.data.size();
			if (hosts_[static_cast<size_t>(p.host)].up)
				sink_.deliver(static_cast<size_t>(p.host), std::move(pkt.data));
			else
				count_drop(p, pkt.prio, Drop::PortDown, pkt.data.size());
			continue;
		}
		Event ev;
		ev.t = at;
		ev.prio = pkt.prio;
		ev.data = (copy == 0 && dup) ? pkt.data : std::move(pkt.data);
		if (p.host >= 0) {
			ev.kind = Ev::Deliver;
			ev.sw = sw;
			ev.port = port;
		} else {
			ev.kind = Ev::Arrive;
			ev.sw = p.peer_sw;
			ev.port = p.peer_port;
		}
		push(std::move(ev));
	}
}

const Fabric::Port &Fabric::port_ref(const std::string &sw, size_t port) const
{
	for (size_t i = 0; i < switches_.size(); i++)
		if (cfg_.switches[i].name == sw)
			return switches_[i].ports.at(port);
	throw std::out_of_range("no switch " + sw);
}

const QueueStats &Fabric::stats(const std::string &sw, size_t port, int prio) const
{
	return port_ref(sw, port).stats.at(static_cast<size_t>(prio));
}

uint64_t Fabric::queue_bytes(const std::string &sw, size_t port, int prio) const
{
	return port_ref(sw, port).queues.at(static_cast<size_t>(prio)).bytes;
}

uint64_t Fabric::paused_ns(const std::string &sw, size_t port, int prio, uint64_t now) const
{
	const Queue &q = port_ref(sw, port).queues.at(static_cast<size_t>(prio));
	return q.paused_closed + (std::min(q.paused_until, now) - std::min(q.pause_start, std::min(q.paused_until, now)));
}

uint64_t Fabric::buffer_used(const std::string &sw) const
{
	for (size_t i = 0; i < switches_.size(); i++)
		if (cfg_.switches[i].name == sw)
			return switches_[i].used;
	return 0;
}

long Fabric::port_to(const std::string &sw, const std::string &peer) const
{
	for (size_t i = 0; i < switches_.size(); i++) {
		if (cfg_.switches[i].name != sw)
			continue;
		for (size_t j = 0; j < switches_[i].ports.size(); j++)
			if (switches_[i].ports[j].peer == peer)
				return static_cast<long>(j);
	}
	return -1;
}

nlohmann::json Fabric::counters(uint64_t now) const
{
	nlohmann::json out = nlohmann::json::object();
	out["t_ns"] = now;
	out["switches"] = nlohmann::json::array();
	for (const Switch &s : switches_) {
		nlohmann::json sj;
		sj["name"] = s.cfg->name;
		sj["buffer_used"] = s.used;
		sj["shared_used"] = s.shared;
		sj["ports"] = nlohmann::json::array();
		for (size_t pi = 0; pi < s.ports.size(); pi++) {
			const Port &p = s.ports[pi];
			nlohmann::json pj;
			pj["port"] = pi;
			pj["peer"] = p.peer;
			if (p.host >= 0)
				pj["up"] = hosts_[static_cast<size_t>(p.host)].up;
			pj["prio"] = nlohmann::json::array();
			for (int q = 0; q < kPriorities; q++) {
				const QueueStats &st = p.stats[static_cast<size_t>(q)];
				const Queue &qq = p.queues[static_cast<size_t>(q)];
				nlohmann::json drops = nlohmann::json::object();
				for (size_t d = 0; d < kDrops; d++)
					if (st.drops[d])
						drops[drop_name(static_cast<Drop>(d))] = st.drops[d];
				const uint64_t end = std::min(qq.paused_until, now);
				pj["prio"].push_back({
					{"prio", q},
					{"rx_packets", st.rx_packets},
					{"rx_bytes", st.rx_bytes},
					{"tx_packets", st.tx_packets},
					{"tx_bytes", st.tx_bytes},
					{"drops", drops},
					{"ce_marked", st.ce_marked},
					{"pfc_tx", st.pfc_tx},
					{"pfc_rx", st.pfc_rx},
					{"pfc_watchdog", st.pfc_watchdog},
					{"paused_ns", qq.paused_closed + end - std::min(qq.pause_start, end)},
					{"xoff", p.xoff[static_cast<size_t>(q)]},
					{"depth", qq.bytes},
					{"depth_max", st.depth_max},
					{"headroom", p.hdrm[static_cast<size_t>(q)]},
					{"headroom_max", st.headroom_max},
					{"duplicated", st.impair_duplicated},
					{"corrupted", st.impair_corrupted},
					{"reordered", st.impair_reordered},
				});
			}
			sj["ports"].push_back(pj);
		}
		out["switches"].push_back(sj);
	}
	nlohmann::json inj = nlohmann::json::array();
	for (const auto &i : injections_)
		inj.push_back({{"qpn", i.rule.qpn}, {"psn", i.rule.psn}, {"nth", i.rule.nth},
			       {"seen", i.seen}, {"fired", i.fired}});
	out["injections"] = inj;
	return out;
}

nlohmann::json Fabric::sample(uint64_t now) const
{
	// One line per sample: {"t_ns":..,"q":[[switch,port,prio,bytes],..]}
	// with the queues that hold anything.
	nlohmann::json q = nlohmann::json::array();
	for (const auto &s : switches_)
		for (size_t pi = 0; pi < s.ports.size(); pi++)
			for (int i = 0; i < kPriorities; i++) {
				const uint64_t b = s.ports[pi].queues[static_cast<size_t>(i)].bytes;
				if (b)
					q.push_back({s.cfg->name, pi, i, b});
			}
	return {{"t_ns", now}, {"q", q}};
}

} // namespace vrnic::fabric

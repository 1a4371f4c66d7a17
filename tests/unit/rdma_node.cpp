// SPDX-License-Identifier: GPL-2.0-or-later
#include "rdma_node.hpp"

#include "engine_internal.hpp"

#include <stdexcept>
#include <string>

Node::Node(uint8_t node_id, bool paged_rings, unsigned cq_log_depth,
	   uint8_t type, uint64_t host_mem_budget, uint32_t qpc_cache,
	   uint32_t qpc_miss_ns, uint32_t qpc_entries)
	: p(node_id, 40 << 20, host_mem_budget, qpc_cache, qpc_miss_ns), id(node_id), paged(paged_rings),
	  cq_log(cq_log_depth), qp_type(type)
{
	p.enable();
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_EQ;
	c.create_eq.base = kEq;
	c.create_eq.log_depth = 8;
	c.create_eq.eqn = 1;
	c.create_eq.vector = 1;
	admin_ok(c);

	// A limited QP-context cache: its backing memory, as the driver
	// gives it, before the first QP.
	if (qpc_cache) {
		c = {};
		c.opcode = VRNIC_ADMIN_SET_QPC_MEM;
		c.set_qpc_mem.base = kQpcMem;
		c.set_qpc_mem.entries = qpc_entries;
		admin_ok(c);
	}

	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_PD;
	pd = admin_ok(c);

	// Paged rings: the pages of each ring in reverse order, listed at
	// kRingPbl (CQ), +0x1000 (SQ), +0x2000 (RQ).
	auto page_list = [this](uint64_t list, uint64_t base, uint64_t bytes) {
		for (uint64_t off = 0; off < bytes; off += 4096)
			p.store<uint64_t>(list + off / 4096 * 8, ring_addr(base, off, bytes));
		return list;
	};
	const uint64_t cq_bytes = 32ull << cq_log, sq_bytes = 1ull << (kSqLog + kSqShift);
	const uint64_t rq_bytes = 1ull << (kRqLog + kRqShift);

	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_CQ;
	c.create_cq.base = paged ? page_list(kRingPbl, kCq, cq_bytes) : kCq;
	c.create_cq.ring_flags = paged ? VRNIC_RING_PAGED : 0;
	c.create_cq.dbrec = kCqDb;
	c.create_cq.log_depth = uint8_t(cq_log);
	c.create_cq.eqn = 1;
	cq = admin_ok(c);

	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.sq_base = paged ? page_list(kRingPbl + 0x1000, kSq, sq_bytes) : kSq;
	c.create_qp.rq_base = paged ? page_list(kRingPbl + 0x2000, kRq, rq_bytes) : kRq;
	c.create_qp.sq_flags = c.create_qp.rq_flags = paged ? VRNIC_RING_PAGED : 0;
	c.create_qp.dbrec = kQpDb;
	c.create_qp.pdn = pd;
	c.create_qp.send_cqn = cq;
	// An XRC initiator has no receive side.
	c.create_qp.recv_cqn = qp_type == VRNIC_QPT_XRC_INI ? 0 : cq;
	c.create_qp.sq_log_depth = kSqLog;
	c.create_qp.rq_log_depth = kRqLog;
	c.create_qp.sq_wqe_shift = kSqShift;
	c.create_qp.rq_wqe_shift = kRqShift;
	c.create_qp.type = qp_type;
	qp = admin_ok(c);

	mr = create_mr(kIova, 0, kDataLen, VRNIC_ACCESS_ALL);
	// The GID table, as the driver fills it: the IPv4 address at entry
	// 0 (address vectors name it unless a test says otherwise), the
	// IPv6 one at 1.
	if (set_gid(kGid4, gid(), mac()) != VRNIC_ADMIN_ST_OK ||
	    set_gid(kGid6, gid6(), mac()) != VRNIC_ADMIN_ST_OK)
		throw std::runtime_error("SET_GID");
	uint8_t *d = data(0);
	for (uint64_t i = 0; i < kDataLen; i++)
		d[i] = uint8_t(i * 13 + node_id);
}

uint64_t Node::ring_addr(uint64_t base, uint64_t off, uint64_t bytes) const
{
	if (!paged)
		return base + off;
	const uint64_t npages = bytes / 4096;
	return base + (npages - 1 - off / 4096) * 4096 + off % 4096;
}

uint32_t Node::admin_ok(vrnic_admin_cmd c)
{
	const auto cqe = p.admin(c);
	if (cqe.status != VRNIC_ADMIN_ST_OK)
		throw std::runtime_error("admin opcode " + std::to_string(c.opcode) +
					 " failed: " + std::to_string(cqe.status));
	return cqe.result;
}

// An MR over [kData + off, + len) at iova, with a 1-level page list.
uint32_t Node::create_mr(uint64_t iova, uint64_t off, uint64_t len,
			 uint32_t access)
{
	const uint64_t first = (iova & ~0xfffull);
	const uint32_t npages = uint32_t((iova + len - first + 0xfff) >> 12);
	const uint64_t bus0 = kData + off - (iova - first);
	static uint64_t pbl_off = 0;
	const uint64_t pbl = kPbl + (pbl_off % 0x70000);
	pbl_off += uint64_t(npages) * 8 + 64;
	for (uint32_t i = 0; i < npages; i++)
		p.store<uint64_t>(pbl + i * 8, bus0 + uint64_t(i) * 4096);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_MR;
	c.create_mr.iova = iova;
	c.create_mr.length = len;
	c.create_mr.pbl = pbl;
	c.create_mr.pdn = pd;
	c.create_mr.access = access;
	c.create_mr.npages = npages;
	c.create_mr.page_shift = 12;
	c.create_mr.pbl_mode = VRNIC_PBL_LEVEL1;
	return admin_ok(c);
}

std::array<uint8_t, 16> Node::gid() const
{
	return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 10, 0, id};
}

std::array<uint8_t, 16> Node::gid6() const
{
	return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, id};
}

uint8_t Node::set_gid(uint8_t index, const std::array<uint8_t, 16> &g,
		      const std::array<uint8_t, 6> &smac, uint8_t op,
		      uint16_t vlan_id)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_GID;
	c.set_gid.index = index;
	c.set_gid.op = op;
	if (op == VRNIC_GID_OP_SET) {
		std::memcpy(c.set_gid.gid, g.data(), 16);
		std::memcpy(c.set_gid.smac, smac.data(), 6);
		c.set_gid.vlan_id = vlan_id;
		c.set_gid.type = vrnic::roce::is_ipv4_mapped(g) ?
				 VRNIC_GID_TYPE_ROCE_V2_IPV4 :
				 VRNIC_GID_TYPE_ROCE_V2_IPV6;
	}
	return p.admin(c).status;
}

uint8_t Node::modify(uint32_t mask, const vrnic_qp_attr &a)
{
	p.store(kAttr, a);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_MODIFY_QP;
	c.modify_qp.attr_addr = kAttr;
	c.modify_qp.qpn = qp;
	c.modify_qp.attr_mask = mask;
	return p.admin(c).status;
}

void Node::ud_ready(uint32_t qkey, uint32_t sq_psn)
{
	vrnic_qp_attr a{};
	a.state = VRNIC_QPS_INIT;
	a.qkey = qkey;
	if (modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_QKEY, a))
		throw std::runtime_error("UD to INIT");
	a.state = VRNIC_QPS_RTR;
	if (modify(VRNIC_QP_ATTR_STATE, a))
		throw std::runtime_error("UD to RTR");
	a.state = VRNIC_QPS_RTS;
	a.sq_psn = sq_psn;
	if (modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_SQ_PSN, a))
		throw std::runtime_error("UD to RTS");
}

vrnic_ud_av Node::av(uint32_t qkey) const
{
	vrnic_ud_av v{};
	v.dest_qpn = qp;
	v.qkey = qkey;
	const auto g = gid();
	std::memcpy(v.dgid, g.data(), 16);
	const uint8_t mac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, id};
	std::memcpy(v.dmac, mac, 6);
	return v;
}

void Node::connect(const Node &peer, uint32_t path_mtu, uint32_t sq_psn,
		   uint32_t rq_psn, uint8_t retry, uint8_t rnr_retry,
		   uint8_t timeout, uint8_t traffic_class)
{
	vrnic_qp_attr a{};
	a.state = VRNIC_QPS_INIT;
	a.access = VRNIC_ACCESS_REMOTE_WRITE | VRNIC_ACCESS_REMOTE_READ |
		   VRNIC_ACCESS_REMOTE_ATOMIC | VRNIC_ACCESS_FLUSH_GLOBAL;
	if (modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_ACCESS, a))
		throw std::runtime_error("to INIT");
	a.state = VRNIC_QPS_RTR;
	a.path_mtu = uint8_t(path_mtu);
	a.dest_qpn = peer.qp;
	a.rq_psn = rq_psn;
	a.max_dest_rd_atomic = 16;
	a.min_rnr_timer = 1;
	const auto dg = peer.gid();
	std::memcpy(a.dgid, dg.data(), 16);
	a.sgid_index = kGid4;
	a.traffic_class = traffic_class;
	const uint8_t dmac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, peer.id};
	std::memcpy(a.dmac, dmac, 6);
	a.transport_flags = transport_flags;
	a.send_window = send_window;
	a.spray_paths = spray_paths;
	if (modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV | VRNIC_QP_ATTR_PATH_MTU |
		   VRNIC_QP_ATTR_DEST_QPN | VRNIC_QP_ATTR_RQ_PSN |
		   VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC | VRNIC_QP_ATTR_MIN_RNR_TIMER |
		   (transport_flags || send_window || spray_paths ?
		    VRNIC_QP_ATTR_TRANSPORT : 0), a))
		throw std::runtime_error("to RTR");
	a.state = VRNIC_QPS_RTS;
	a.sq_psn = sq_psn;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = rnr_retry;
	a.max_rd_atomic = 16;
	if (modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_SQ_PSN | VRNIC_QP_ATTR_TIMEOUT |
		   VRNIC_QP_ATTR_RETRY_CNT | VRNIC_QP_ATTR_RNR_RETRY |
		   VRNIC_QP_ATTR_MAX_RD_ATOMIC, a))
		throw std::runtime_error("to RTS");
}

void Node::post_send(const vrnic_send_wqe &w, const std::vector<vrnic_sge> &sges,
		     const std::vector<uint8_t> &inline_data,
		     const vrnic_ud_av *ud)
{
	const uint64_t a = next_sq_slot();
	vrnic_send_wqe h = w;
	uint64_t d = a + sizeof(h);
	if (ud) {
		p.store(d, *ud);
		d += sizeof(*ud);
	}
	if (!inline_data.empty()) {
		h.flags |= VRNIC_WQE_INLINE;
		h.inline_len = uint32_t(inline_data.size());
		std::memcpy(p.ptr(d), inline_data.data(), inline_data.size());
	} else {
		h.num_sge = uint8_t(sges.size());
		for (size_t i = 0; i < sges.size(); i++)
			p.store(d + i * sizeof(vrnic_sge), sges[i]);
	}
	p.store(a, h);
	ring_sq();
}

void Node::post_recv(uint64_t wr_id, const std::vector<vrnic_sge> &sges)
{
	const uint64_t a = ring_addr(kRq, uint64_t(rq_pi & ((1u << kRqLog) - 1)) << kRqShift,
				     1ull << (kRqLog + kRqShift));
	vrnic_recv_wqe h{};
	h.wr_id = wr_id;
	h.num_sge = uint8_t(sges.size());
	p.store(a, h);
	for (size_t i = 0; i < sges.size(); i++)
		p.store(a + sizeof(h) + i * sizeof(vrnic_sge), sges[i]);
	rq_pi++;
	p.store<uint32_t>(kQpDb + 4, rq_pi);
	p.db(0, VRNIC_DB_RQ, qp);
}

bool Node::poll_cq(vrnic_cqe &out)
{
	const uint64_t a = ring_addr(kCq, uint64_t(cq_ci & ((1u << cq_log) - 1)) * sizeof(vrnic_cqe),
				     32ull << cq_log);
	const auto cqe = p.load<vrnic_cqe>(a);
	const uint8_t phase = ((cq_ci >> cq_log) & 1) ? 0 : VRNIC_CQE_OWNER;
	if ((cqe.owner & VRNIC_CQE_OWNER) != phase)
		return false;
	out = cqe;
	cq_ci++;
	p.store<uint32_t>(kCqDb, cq_ci);
	return true;
}

void Wire::deliver(Node &from, Node &to)
{
	std::uniform_real_distribution<double> u(0, 1);
	auto frames = std::move(from.p.frames);
	from.p.frames.clear();
	std::vector<std::vector<uint8_t>> out;
	for (auto &f : frames) {
		frames_++;
		if (u(rng) < drop || (drop_if && drop_if(f))) {
			dropped++;
			continue;
		}
		if (u(rng) < corrupt && f.size() > 14) {
			std::uniform_int_distribution<size_t> pos(14, f.size() - 1);
			f[pos(rng)] ^= uint8_t(1 + rng() % 255);
			corrupted++;
		}
		out.push_back(f);
		if (u(rng) < dup)
			out.push_back(f);
		if (out.size() >= 2 && u(rng) < reorder)
			std::swap(out[out.size() - 1], out[out.size() - 2]);
	}
	for (auto &f : out) {
		// Time passes on the wire: timers may fire in the middle of a
		// long message, as they do under an emulator.
		for (Node *n : {&from, &to}) {
			n->p.now += ns_per_frame;
			if (n->p.deadline && n->p.deadline <= n->p.now) {
				n->p.deadline = 0;
				vrnic_engine_timer(n->p.eng);
			}
		}
		vrnic_engine_receive(to.p.eng, f.data(), f.size());
	}
}

bool Wire::run(Node &a, Node &b, const std::function<bool()> &pred,
	       unsigned max_rounds)
{
	for (unsigned r = 0; r < max_rounds; r++) {
		for (Node *n : {&a, &b}) {
			for (int i = 0; i < 10000; i++) {
				const unsigned before = n->p.schedules;
				vrnic_engine_poll(n->p.eng);
				if (n->p.schedules == before)
					break;
			}
		}
		const bool moved = !a.p.frames.empty() || !b.p.frames.empty();
		deliver(a, b);
		deliver(b, a);
		if (moved)
			continue;
		if (pred())
			return true;
		// Idle: jump to the next timer.
		uint64_t next = 0;
		for (Node *n : {&a, &b})
			if (n->p.deadline && (!next || n->p.deadline < next))
				next = n->p.deadline;
		if (!next)
			return pred();
		for (Node *n : {&a, &b}) {
			n->p.now = std::max(n->p.now, next);
		}
		for (Node *n : {&a, &b}) {
			if (n->p.deadline && n->p.deadline <= next) {
				n->p.deadline = 0;
				vrnic_engine_timer(n->p.eng);
			}
		}
	}
	return pred();
}

uint64_t Node::next_sq_slot()
{
	const uint64_t a = ring_addr(kSq, uint64_t(sq_pi & ((1u << kSqLog) - 1)) << kSqShift,
				     1ull << (kSqLog + kSqShift));
	std::memset(p.ptr(a), 0, 1u << kSqShift);
	return a;
}

// Publish the WQE at sq_pi: producer index, then the doorbell.
void Node::ring_sq()
{
	sq_pi++;
	p.store<uint32_t>(kQpDb, sq_pi);
	p.db(0, VRNIC_DB_SQ, qp);
}

void Node::post_raw(const void *wqe)
{
	std::memcpy(p.ptr(next_sq_slot()), wqe, sizeof(vrnic_send_wqe));
	ring_sq();
}

const vrnic::RdmaCounters &Node::counters() const
{
	return p.eng->dev.rdma().counters();
}

std::vector<vrnic_cqe> Wire::completions(Node &a, Node &b, Node &n,
					 size_t count)
{
	std::vector<vrnic_cqe> got;
	run(a, b, [&] {
		vrnic_cqe c;
		while (got.size() < count && n.poll_cq(c))
			got.push_back(c);
		return got.size() >= count;
	});
	return got;
}

uint32_t Node::create_srq(uint64_t ring, uint64_t dbrec, uint8_t type,
			  uint32_t cqn, uint32_t xrcdn)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_SRQ;
	c.create_srq.base = ring;
	c.create_srq.dbrec = dbrec;
	c.create_srq.pdn = pd;
	c.create_srq.log_depth = 4;
	c.create_srq.wqe_shift = 8;
	c.create_srq.srq_type = type;
	c.create_srq.cqn = cqn;
	c.create_srq.xrcdn = xrcdn;
	return admin_ok(c);
}

vrnic_admin_cmd Node::srq_qp_cmd(uint32_t srqn) const
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.sq_base = kSq;
	c.create_qp.dbrec = kQpDb + 0x20;
	c.create_qp.pdn = pd;
	c.create_qp.send_cqn = c.create_qp.recv_cqn = cq;
	c.create_qp.sq_log_depth = kSqLog;
	c.create_qp.sq_wqe_shift = kSqShift;
	c.create_qp.rq_wqe_shift = 5;
	c.create_qp.srqn = srqn;
	return c;
}

vrnic_admin_cmd Node::idle_qp_cmd(unsigned sq_log) const
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.sq_base = kSq;
	c.create_qp.rq_base = kRq;
	c.create_qp.dbrec = kQpDb + 0x40;
	c.create_qp.pdn = pd;
	c.create_qp.send_cqn = c.create_qp.recv_cqn = cq;
	c.create_qp.sq_log_depth = uint8_t(sq_log);
	c.create_qp.sq_wqe_shift = 6;
	c.create_qp.rq_wqe_shift = 5;
	c.create_qp.type = VRNIC_QPT_RC;
	return c;
}

std::vector<uint32_t> Node::spend_budget_on_mrs()
{
	std::vector<uint32_t> keys;
	auto fast_mr = [this](uint32_t pages) {
		vrnic_admin_cmd m{};
		m.opcode = VRNIC_ADMIN_CREATE_MR;
		m.create_mr.pdn = pd;
		m.create_mr.npages = pages;
		m.create_mr.pbl_mode = VRNIC_PBL_FAST;
		return p.admin(m);
	};
	// The MR table grows with use in charged chunks: a fill that stopped
	// at a chunk it cannot make would leave up to a chunk unspent, so
	// the slots it needs are made first (kept, as chunks are).
	const vrnic::HostBudget &hb = p.eng->dev.budget();
	const uint64_t slots = (hb.limit() - hb.used()) / 4096 + 512;
	for (uint64_t i = 0; i < slots; i++) {
		const auto cqe = fast_mr(1);
		if (cqe.status != VRNIC_ADMIN_ST_OK)
			break;
		keys.push_back(cqe.result);
	}
	for (uint32_t k : keys) {
		vrnic_admin_cmd d{};
		d.opcode = VRNIC_ADMIN_DESTROY_MR;
		d.destroy.id = k;
		p.admin(d);
	}
	keys.clear();
	for (uint32_t pages : {512u, 1u}) {
		for (;;) {
			const auto cqe = fast_mr(pages);
			if (cqe.status != VRNIC_ADMIN_ST_OK)
				break;
			keys.push_back(cqe.result);
		}
	}
	return keys;
}

void Node::post_srq(uint64_t ring, uint64_t dbrec, uint32_t count,
		    uint64_t first_wr, uint64_t data_off)
{
	for (uint32_t i = 0; i < count; i++) {
		vrnic_recv_wqe h{};
		h.wr_id = first_wr + i;
		h.num_sge = 1;
		p.store(ring + i * 256, h);
		p.store(ring + i * 256 + sizeof(h), sge(data_off + i * 0x1000, 4096));
	}
	p.store<uint32_t>(dbrec, count);
}

// A fast-register MR on n with room for `pages` pages: invalid until a
// REG_MR.  Returns its key.
uint32_t alloc_fast_mr(Node &n, uint32_t pages)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_MR;
	c.create_mr.pdn = n.pd;
	c.create_mr.npages = pages;
	c.create_mr.pbl_mode = VRNIC_PBL_FAST;
	return n.admin_ok(c);
}

constexpr uint64_t kFastPbl = 0xfe0000;	// page lists, in n's data area

// REG_MR of len bytes at iova with `key` (index and new key byte), its
// first page at data(off): iova's byte is data(off + iova % 4096).  The
// page list is written where the device will read it.
void post_reg_mr(Node &n, uint64_t wr_id, uint32_t key, uint64_t iova,
		 uint64_t off, uint32_t len, uint32_t access,
		 uint32_t extra_pages)
{
	const uint64_t first = iova & ~0xfffull;
	const uint32_t npages =
		uint32_t((iova + len - first + 0xfff) >> 12) + extra_pages;
	const uint64_t bus0 = Node::kData + off;
	for (uint32_t i = 0; i < npages; i++)
		n.p.store<uint64_t>(Node::kData + kFastPbl + i * 8,
				    bus0 + uint64_t(i) * 4096);
	vrnic_reg_mr_wqe r{};
	r.wr_id = wr_id;
	r.opcode = VRNIC_WR_REG_MR;
	r.flags = VRNIC_WQE_SIGNALED;
	r.page_shift = 12;
	r.access = access;
	r.iova = iova;
	r.key = key;
	r.npages = npages;
	r.length = len;
	r.pbl = Node::kData + kFastPbl;
	n.post_raw(&r);
}

Pairs::Pairs(Node &x, Node &y, unsigned n) : a(x), b(y), posted(n)
{
	for (unsigned i = 0; i < n; i++) {
		vrnic_admin_cmd c = a.srq_qp_cmd(0);
		c.create_qp.rq_base = Node::kRq;
		c.create_qp.rq_log_depth = Node::kRqLog;
		c.create_qp.rq_wqe_shift = Node::kRqShift;
		vrnic_admin_cmd d = c;
		d.create_qp.pdn = b.pd;
		d.create_qp.send_cqn = d.create_qp.recv_cqn = b.cq;
		c.create_qp.sq_base = kSqs + uint64_t(i) * 0x20000;
		c.create_qp.dbrec = kDbs + 8ull * i;
		a.qp = a.admin_ok(c);
		b.qp = b.admin_ok(d);
		a.connect(b, 5, 100 + i, 5000 + i);
		b.connect(a, 5, 5000 + i, 100 + i);
		qa.push_back(a.qp);
		qb.push_back(b.qp);
	}
}

void Pairs::write(unsigned i, uint64_t src, uint64_t dst, uint32_t len, uint64_t wr)
{
	const uint32_t shift = Node::kSqShift;
	const uint64_t slot = kSqs + uint64_t(i) * 0x20000 +
			      uint64_t(posted[i] % (1u << Node::kSqLog)) * (1u << shift);
	std::memset(a.p.ptr(slot), 0, 1u << shift);
	vrnic_send_wqe h = send_wqe(wr, VRNIC_WR_RDMA_WRITE, Node::kIova + dst, b.mr);
	h.num_sge = 1;
	a.p.store(slot, h);
	a.p.store(slot + sizeof(h), a.sge(src, len));
	posted[i]++;
	a.p.store<uint32_t>(kDbs + 8ull * i, posted[i]);
	a.p.db(0, VRNIC_DB_SQ, qa[i]);
}

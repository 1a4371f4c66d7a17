// SPDX-License-Identifier: GPL-2.0-or-later
// See fuzz_world.hpp.
#include "fuzz_world.hpp"
#include "engine_internal.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

namespace fz {

using namespace vrnic::roce;

// ------------------------------------------------------------ memory

Mem::Mem() : m(kSize), dirty(kPages) {}

void Mem::touch(uint64_t addr, size_t len)
{
	if (!len || !in(addr, len))
		return;
	const uint64_t first = (addr - kBase) / 4096, last = (addr - kBase + len - 1) / 4096;
	for (uint64_t p = first; p <= last; p++) {
		if (!dirty[p]) {
			dirty[p] = 1;
			dirty_list.push_back(uint32_t(p));
		}
	}
}

bool Mem::write(uint64_t addr, const void *src, size_t len)
{
	if (!in(addr, len))
		return false;
	touch(addr, len);
	std::memcpy(&m[addr - kBase], src, len);
	return true;
}

bool Mem::read(uint64_t addr, void *dst, size_t len) const
{
	if (!in(addr, len))
		return false;
	std::memcpy(dst, &m[addr - kBase], len);
	return true;
}

void Mem::restore()
{
	for (uint32_t p : dirty_list) {
		std::memset(&m[uint64_t(p) * 4096], 0, 4096);
		dirty[p] = 0;
	}
	dirty_list.clear();
}

// ---------------------------------------------------------- platform

namespace {

Dev *self(void *o) { return static_cast<Dev *>(o); }

const vrnic_platform_ops kOps = {
	.dma_read = [](void *o, uint64_t addr, void *buf, size_t len) -> int {
		return self(o)->mem.read(addr, buf, len) ? 0 : -1;
	},
	.dma_write = [](void *o, uint64_t addr, const void *buf, size_t len) -> int {
		return self(o)->mem.write(addr, buf, len) ? 0 : -1;
	},
	.send_frame = [](void *o, const void *f, size_t len) -> int {
		self(o)->on_frame(static_cast<const uint8_t *>(f), len);
		return self(o)->net_full ? 1 : 0;
	},
	.raise_irq = [](void *, unsigned int) {},
	.schedule = [](void *o) { self(o)->schedules++; },
	.rx_ready = [](void *) {},
	.now_ns = [](void *o) -> uint64_t { return self(o)->now; },
	.timer_arm = [](void *o, uint64_t d) { self(o)->deadline = d; },
	.guest_error = [](void *, const char *) {},
	.trace = [](void *, vrnic_trace_id, uint64_t, uint64_t, uint64_t) {},
};

std::array<uint8_t, 6> mac_of(uint8_t id) { return {0x52, 0x54, 0x00, 0x12, 0x34, id}; }

// GID table entries of the IPv4-mapped and the IPv6 GID (Dev::setup).
constexpr uint8_t kGidIndex[2] = {0, 1};

std::array<uint8_t, 16> gid_of(uint8_t id, bool ipv6)
{
	if (ipv6)
		return {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, id};
	return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 10, 0, id};
}

bool is_response(uint8_t op) { return op >= READ_RESP_FIRST && op <= ATOMIC_ACK; }

uint8_t wire_transport(const QpInfo &q)
{
	switch (q.type) {
	case VRNIC_QPT_UD:
	case VRNIC_QPT_GSI:
		return UD;
	case VRNIC_QPT_UC:
		return UC;
	case VRNIC_QPT_XRC_INI:
	case VRNIC_QPT_XRC_TGT:
		return XRC;
	default:
		return RC;
	}
}

} // namespace

Dev::Dev(uint8_t dev_id) : id(dev_id) {}

Dev::~Dev()
{
	if (eng)
		vrnic_engine_free(eng);
}

void Dev::on_frame(const uint8_t *f, size_t len)
{
	frames_sent++;
	static const bool debug = std::getenv("VRNIC_FUZZ_DEBUG") != nullptr;
	if (debug) {
		Packet p;
		if (parse({f, len}, p) == ParseResult::Ok)
			std::fprintf(stderr, "dev%u sends op %#x qpn %#x psn %#x syn %#x len %zu%s\n",
				     id, p.h.transport | p.h.opcode, p.h.dqpn, p.h.psn,
				     p.h.syndrome, len, sync_peer ? " (sync)" : "");
	}
	// A hub that delivers while the sender is still sending (QEMU's net
	// layer can): the peer receives inside our send_frame().
	if (sync_peer && sync_depth < 4) {
		sync_depth++;
		vrnic_engine_receive(sync_peer->eng, f, len);
		sync_depth--;
		return;
	}
	if (keep_frames && out.size() < 256)
		out.emplace_back(f, f + len);
	if (!track)
		return;
	Packet p;
	if (parse({f, len}, p) != ParseResult::Ok || p.h.transport == UD)
		return;
	for (auto &q : qps) {
		if (q.loopback || q.peer < 0 || qps[size_t(q.peer)].qpn != p.h.dqpn)
			continue;
		if (is_response(p.h.opcode)) {
			q.epsn = psn_add(p.h.psn, 1);
		} else if (!q.req_seen) {
			q.req_lo = q.req_hi = p.h.psn;
			q.req_seen = true;
		} else {
			if (psn_diff(p.h.psn, q.req_hi) > 0)
				q.req_hi = p.h.psn;
			if (psn_diff(p.h.psn, q.req_lo) < 0)
				q.req_lo = p.h.psn;
		}
		break;
	}
}

void Dev::run()
{
	for (int i = 0; i < 64; i++) {
		const unsigned before = schedules;
		vrnic_engine_poll(eng);
		if (schedules == before)
			return;
	}
}

void Dev::advance(uint64_t ns)
{
	now += ns;
	if (deadline && deadline <= now) {
		deadline = 0;
		vrnic_engine_timer(eng);
		run();
	}
}

uint8_t Dev::admin(const vrnic_admin_cmd &cmd, uint32_t *result)
{
	const uint32_t mask = (1u << kAqLog) - 1;
	const uint16_t idx = aq_pi;
	vrnic_admin_cmd c = cmd;
	c.token = idx;
	mem.store(kAq + (idx & mask) * sizeof(c), c);
	aq_pi++;
	vrnic_engine_reg_write(eng, VRNIC_REG_AQ_DB, aq_pi, 4);
	run();
	const auto cqe = mem.load<vrnic_admin_cqe>(kAcq + (idx & mask) * sizeof(vrnic_admin_cqe));
	const uint8_t phase = ((idx >> kAqLog) & 1) ? 0 : VRNIC_ACQE_PHASE;
	if ((cqe.flags & VRNIC_ACQE_PHASE) != phase || cqe.token != idx)
		return 0xff;	// not completed (device stopped or fatal)
	if (result)
		*result = cqe.result;
	return cqe.status;
}

uint32_t Dev::ok(const vrnic_admin_cmd &c)
{
	uint32_t r = 0;
	const uint8_t st = admin(c, &r);
	if (st != VRNIC_ADMIN_ST_OK) {
		std::fprintf(stderr, "fuzz setup: admin opcode %#x failed: %u\n", c.opcode, st);
		std::abort();
	}
	return r;
}

uint32_t Dev::create_mr(uint32_t pdn, uint64_t iova, uint64_t off, uint64_t len,
			uint32_t access, uint64_t pbl)
{
	const uint64_t first = iova & ~0xfffull;
	const uint32_t npages = uint32_t((iova + len - first + 0xfff) >> 12);
	const uint64_t bus0 = kData + off - (iova - first);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_MR;
	c.create_mr.iova = iova;
	c.create_mr.length = len;
	c.create_mr.pdn = pdn;
	c.create_mr.access = access;
	c.create_mr.npages = npages;
	c.create_mr.page_shift = 12;
	if (npages <= 3) {
		c.create_mr.pbl_mode = VRNIC_PBL_INLINE;
		c.create_mr.pbl = bus0;
		for (uint32_t i = 1; i < npages; i++)
			c.create_mr.inline_pages[i - 1] = bus0 + i * 4096ull;
	} else {
		c.create_mr.pbl_mode = VRNIC_PBL_LEVEL1;
		c.create_mr.pbl = pbl;
		for (uint32_t i = 0; i < npages; i++)
			mem.store<uint64_t>(pbl + i * 8ull, bus0 + i * 4096ull);
	}
	const uint32_t key = ok(c);
	mrs.push_back(key);
	keys.push_back({key, iova, len});
	return key;
}

void Dev::create_qp(QpInfo &q, uint32_t pdn, uint32_t xrcd, uint32_t srqn)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.type = q.type;
	if (q.type == VRNIC_QPT_XRC_TGT) {
		c.create_qp.xrcdn = xrcd;
		q.qpn = ok(c);
		return;
	}
	const size_t i = size_t(&q - qps.data());
	q.sq = kRings + i * 0x2000;
	q.rq = q.sq + 0x1000;
	q.dbrec = kDbrec + i * 16;
	q.sq_log = 4;
	q.sq_shift = 8;
	q.rq_log = srqn ? 0 : 4;
	q.rq_shift = srqn ? 5 : 7;
	if (q.paged) {
		mem.store<uint64_t>(kPbl + 0x3000, q.sq);
		mem.store<uint64_t>(kPbl + 0x3100, q.rq);
		c.create_qp.sq_base = kPbl + 0x3000;
		c.create_qp.rq_base = kPbl + 0x3100;
		c.create_qp.sq_flags = c.create_qp.rq_flags = VRNIC_RING_PAGED;
	} else {
		c.create_qp.sq_base = q.sq;
		c.create_qp.rq_base = srqn ? 0 : q.rq;
	}
	c.create_qp.dbrec = q.dbrec;
	c.create_qp.uctx = q.uctx;
	c.create_qp.pdn = pdn;
	c.create_qp.send_cqn = cqs[q.cq].cqn;
	c.create_qp.recv_cqn = q.type == VRNIC_QPT_XRC_INI ? 0 : cqs[q.cq].cqn;
	c.create_qp.sq_log_depth = uint8_t(q.sq_log);
	c.create_qp.rq_log_depth = uint8_t(q.rq_log);
	c.create_qp.sq_wqe_shift = uint8_t(q.sq_shift);
	c.create_qp.rq_wqe_shift = uint8_t(q.rq_shift);
	c.create_qp.srqn = srqn;
	q.qpn = ok(c);
}

void Dev::to_state(QpInfo &q, uint8_t target, uint8_t peer_id, uint32_t peer_qpn)
{
	const bool dg = vrnic_qpt_is_datagram(q.type);
	auto modify = [&](uint32_t mask, const vrnic_qp_attr &a) {
		mem.store(kAttr, a);
		vrnic_admin_cmd c{};
		c.opcode = VRNIC_ADMIN_MODIFY_QP;
		c.modify_qp.attr_addr = kAttr;
		c.modify_qp.qpn = q.qpn;
		if (q.type == VRNIC_QPT_UC)	// no RC-only attributes
			mask &= ~(VRNIC_QP_ATTR_TIMEOUT | VRNIC_QP_ATTR_RETRY_CNT |
				  VRNIC_QP_ATTR_RNR_RETRY | VRNIC_QP_ATTR_MIN_RNR_TIMER |
				  VRNIC_QP_ATTR_MAX_RD_ATOMIC |
				  VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC);
		c.modify_qp.attr_mask = mask;
		ok(c);
	};
	vrnic_qp_attr a{};
	if (target >= VRNIC_QPS_INIT) {
		a.state = VRNIC_QPS_INIT;
		a.qkey = q.qkey;
		a.access = VRNIC_ACCESS_REMOTE_WRITE | VRNIC_ACCESS_REMOTE_READ |
			   VRNIC_ACCESS_REMOTE_ATOMIC | VRNIC_ACCESS_FLUSH_GLOBAL;
		modify(VRNIC_QP_ATTR_STATE | (dg ? VRNIC_QP_ATTR_QKEY : VRNIC_QP_ATTR_ACCESS), a);
		q.state = VRNIC_QPS_INIT;
	}
	if (target >= VRNIC_QPS_RTR) {
		a.state = VRNIC_QPS_RTR;
		uint32_t mask = VRNIC_QP_ATTR_STATE;
		if (!dg) {
			a.path_mtu = uint8_t(__builtin_ctz(q.mtu) - 7);
			a.dest_qpn = peer_qpn;
			a.rq_psn = 0x1000;
			a.max_dest_rd_atomic = 16;
			a.min_rnr_timer = 1;
			const auto dg_ = gid_of(peer_id, q.ipv6);
			std::memcpy(a.dgid, dg_.data(), 16);
			a.sgid_index = kGidIndex[q.ipv6];
			const auto dm = mac_of(peer_id);
			std::memcpy(a.dmac, dm.data(), 6);
			mask |= VRNIC_QP_ATTR_AV | VRNIC_QP_ATTR_PATH_MTU | VRNIC_QP_ATTR_DEST_QPN |
				VRNIC_QP_ATTR_RQ_PSN | VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC |
				VRNIC_QP_ATTR_MIN_RNR_TIMER;
			if (q.sr) {
				a.transport_flags = VRNIC_QP_TF_SELECTIVE_REPEAT;
				a.send_window = 32;	// and a window below the maximum
				a.spray_paths = 4;	// and several source ports
				mask |= VRNIC_QP_ATTR_TRANSPORT;
			}
		}
		modify(mask, a);
		q.state = VRNIC_QPS_RTR;
		q.epsn = 0x1000;
	}
	if (target >= VRNIC_QPS_RTS && target != VRNIC_QPS_ERR) {
		a.state = VRNIC_QPS_RTS;
		a.sq_psn = 0x1000;
		a.timeout = 10;
		a.retry_cnt = 2;
		a.rnr_retry = 2;
		a.max_rd_atomic = 16;
		uint32_t mask = VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_SQ_PSN;
		if (!dg)
			mask |= VRNIC_QP_ATTR_TIMEOUT | VRNIC_QP_ATTR_RETRY_CNT |
				VRNIC_QP_ATTR_RNR_RETRY | VRNIC_QP_ATTR_MAX_RD_ATOMIC;
		modify(mask, a);
		q.state = VRNIC_QPS_RTS;
	}
	if (target == VRNIC_QPS_ERR) {
		a = {};
		a.state = VRNIC_QPS_ERR;
		modify(VRNIC_QP_ATTR_STATE, a);
		q.state = VRNIC_QPS_ERR;
	}
	Path &p = q.rx_path;
	p = Path{};
	p.ipv6 = q.ipv6;
	p.smac = mac_of(peer_id);
	p.dmac = mac_of(id);
	p.sgid = gid_of(peer_id, q.ipv6);
	p.dgid = gid_of(id, q.ipv6);
}

// Post helpers used by setup and by the interpreter.
namespace {

void publish_sq(Dev &d, QpInfo &q, bool dbrec = true, bool bell = true, uint32_t page = ~0u)
{
	q.sq_pi++;
	if (dbrec)
		d.mem.store<uint32_t>(q.dbrec, q.sq_pi);
	if (bell)
		vrnic_engine_db_write(d.eng, uint64_t(page == ~0u ? q.uctx : page) * VRNIC_DB_PAGE_SIZE +
				      VRNIC_DB_SQ, q.qpn, 4);
}

uint64_t sq_slot(const QpInfo &q, uint32_t idx)
{
	return q.sq + (uint64_t(idx & ((1u << q.sq_log) - 1)) << q.sq_shift);
}

void post_send(Dev &d, QpInfo &q, vrnic_send_wqe w, const std::vector<vrnic_sge> &sges,
	       const vrnic_ud_av *av = nullptr)
{
	const uint64_t a = sq_slot(q, q.sq_pi);
	uint64_t o = a + sizeof(w);
	if (av) {
		d.mem.store(o, *av);
		o += sizeof(*av);
	}
	w.num_sge = uint8_t(sges.size());
	for (size_t i = 0; i < sges.size(); i++)
		d.mem.store(o + i * sizeof(vrnic_sge), sges[i]);
	d.mem.store(a, w);
	publish_sq(d, q);
}

void post_recv_at(Dev &d, uint64_t slot, uint64_t wr_id, const std::vector<vrnic_sge> &sges)
{
	vrnic_recv_wqe h{};
	h.wr_id = wr_id;
	h.num_sge = uint8_t(sges.size());
	d.mem.store(slot, h);
	for (size_t i = 0; i < sges.size(); i++)
		d.mem.store(slot + sizeof(h) + i * sizeof(vrnic_sge), sges[i]);
}

void post_recv(Dev &d, QpInfo &q, uint64_t wr_id, const std::vector<vrnic_sge> &sges)
{
	post_recv_at(d, q.rq + (uint64_t(q.rq_pi & ((1u << q.rq_log) - 1)) << q.rq_shift), wr_id, sges);
	q.rq_pi++;
	d.mem.store<uint32_t>(q.dbrec + 4, q.rq_pi);
	vrnic_engine_db_write(d.eng, uint64_t(q.uctx) * VRNIC_DB_PAGE_SIZE + VRNIC_DB_RQ, q.qpn, 4);
}

void post_srq(Dev &d, SrqInfo &s, uint64_t wr_id, const std::vector<vrnic_sge> &sges)
{
	post_recv_at(d, s.base + (uint64_t(s.pi & ((1u << s.log) - 1)) << s.shift), wr_id, sges);
	s.pi++;
	d.mem.store<uint32_t>(s.dbrec, s.pi);
}

} // namespace

// QP indices of the world.
enum : size_t {
	Q_RC = 0, Q_LB1, Q_LB2, Q_RTR, Q_INIT, Q_RESET, Q_ERR, Q_SRQ6, Q_UC, Q_UD,
	Q_GSI, Q_XINI, Q_XTGT, Q_USER, Q_RC4K, Q_NUM
};

void Dev::setup(uint8_t peer_id, bool eth)
{
	// Registers: admin queue, async EQ, enable.
	auto wr = [this](uint64_t off, uint32_t v) { vrnic_engine_reg_write(eng, off, v, 4); };
	wr(VRNIC_REG_AQ_BASE_LO, uint32_t(kAq));
	wr(VRNIC_REG_AQ_BASE_HI, 0);
	wr(VRNIC_REG_ACQ_BASE_LO, uint32_t(kAcq));
	wr(VRNIC_REG_ACQ_BASE_HI, 0);
	wr(VRNIC_REG_AQ_LOG_DEPTH, kAqLog);
	wr(VRNIC_REG_AEQ_BASE_LO, uint32_t(kAeq));
	wr(VRNIC_REG_AEQ_BASE_HI, 0);
	wr(VRNIC_REG_AEQ_LOG_DEPTH, kAeqLog);
	wr(VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	wr(VRNIC_REG_AEQ_DB, VRNIC_EQ_DB_ARM);

	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_EQ;
	c.create_eq.base = kEq1;
	c.create_eq.log_depth = 8;
	c.create_eq.eqn = 1;
	c.create_eq.vector = 1;
	ok(c);
	eqs.push_back(1);
	vrnic_engine_db_write(eng, VRNIC_DB_EQ, VRNIC_FIELD_PREP(VRNIC_EQ_DB_EQN, 1) | VRNIC_EQ_DB_ARM, 4);

	// The port's GID table: entry 0 the IPv4-mapped GID, 1 the IPv6 one
	// (kGidIndex), both with this device's MAC, as the driver programs it.
	for (const bool v6 : {false, true}) {
		c = {};
		c.opcode = VRNIC_ADMIN_SET_GID;
		c.set_gid.index = kGidIndex[v6];
		c.set_gid.op = VRNIC_GID_OP_SET;
		c.set_gid.type = uint8_t(v6 ? VRNIC_GID_TYPE_ROCE_V2_IPV6 : VRNIC_GID_TYPE_ROCE_V2_IPV4);
		c.set_gid.vlan_id = VRNIC_VLAN_NONE;
		const auto g = gid_of(id, v6);
		const auto m = mac_of(id);
		std::memcpy(c.set_gid.gid, g.data(), 16);
		std::memcpy(c.set_gid.smac, m.data(), 6);
		ok(c);
	}

	for (int i = 0; i < 2; i++) {
		c = {};
		c.opcode = VRNIC_ADMIN_CREATE_UCTX;
		uctxs.push_back(ok(c));
	}
	for (uint32_t u : {0u, uctxs[0], uctxs[1]}) {
		c = {};
		c.opcode = VRNIC_ADMIN_CREATE_PD;
		c.create_pd.uctx = u;
		pds.push_back(ok(c));
	}
	c = {};
	c.opcode = VRNIC_ADMIN_ALLOC_XRCD;
	xrcds.push_back(ok(c));

	// CQs: the kernel's (contiguous) and user context 1's (paged).
	for (int j = 0; j < 2; j++) {
		CqInfo q;
		q.base = kCqs + j * 0x2000ull;
		q.dbrec = kDbrec + 0x800 + j * 16ull;
		q.log = 8;
		q.paged = j == 1;
		q.uctx = j ? uctxs[0] : 0;
		c = {};
		c.opcode = VRNIC_ADMIN_CREATE_CQ;
		if (q.paged) {
			mem.store<uint64_t>(kPbl + 0x3200, q.base);
			mem.store<uint64_t>(kPbl + 0x3208, q.base + 0x1000);
			c.create_cq.base = kPbl + 0x3200;
			c.create_cq.ring_flags = VRNIC_RING_PAGED;
		} else {
			c.create_cq.base = q.base;
		}
		c.create_cq.dbrec = q.dbrec;
		c.create_cq.uctx = q.uctx;
		c.create_cq.log_depth = uint8_t(q.log);
		c.create_cq.eqn = 1;
		q.cqn = ok(c);
		cqs.push_back(q);
	}

	// MRs: a 1 MiB level-1 MR with every right, a 2-page inline one with
	// remote read only, the user context's, and a fast-register MR.
	const uint32_t mr_a = create_mr(pds[0], kIova, 0, 0x100000, VRNIC_ACCESS_ALL, kPbl);
	create_mr(pds[0], 0x10000, 0x100000, 0x2000,
		  VRNIC_ACCESS_LOCAL_WRITE | VRNIC_ACCESS_REMOTE_READ, 0);
	const uint32_t mr_u = create_mr(pds[1], kIova + 0x40000000, 0x140000, 0x40000,
					VRNIC_ACCESS_ALL & ~VRNIC_ACCESS_MW_BIND, kPbl + 0x1000);
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_MR;
	c.create_mr.pdn = pds[0];
	c.create_mr.npages = 16;
	c.create_mr.pbl_mode = VRNIC_PBL_FAST;
	const uint32_t mr_f = ok(c);
	mrs.push_back(mr_f);
	for (uint8_t t : {uint8_t(VRNIC_MW_TYPE_1), uint8_t(VRNIC_MW_TYPE_2)}) {
		c = {};
		c.opcode = VRNIC_ADMIN_ALLOC_MW;
		c.alloc_mw.pdn = pds[0];
		c.alloc_mw.type = t;
		mws.push_back(ok(c));
	}

	// SRQs: a basic one and an XRC one (kernel).
	for (int k = 0; k < 2; k++) {
		SrqInfo s;
		s.base = kSrqRings + k * 0x1000ull;
		s.dbrec = kDbrec + 0xc00 + k * 16ull;
		s.log = 4;
		s.shift = 7;
		c = {};
		c.opcode = VRNIC_ADMIN_CREATE_SRQ;
		c.create_srq.base = s.base;
		c.create_srq.dbrec = s.dbrec;
		c.create_srq.pdn = pds[0];
		c.create_srq.log_depth = uint8_t(s.log);
		c.create_srq.wqe_shift = uint8_t(s.shift);
		c.create_srq.srq_type = k ? VRNIC_SRQT_XRC : VRNIC_SRQT_BASIC;
		c.create_srq.cqn = k ? cqs[0].cqn : 0;
		c.create_srq.xrcdn = k ? xrcds[0] : 0;
		s.srqn = ok(c);
		srqs.push_back(s);
	}

	// QPs of every type, in every state.
	qps.assign(Q_NUM, QpInfo{});
	const uint8_t types[Q_NUM] = {
		VRNIC_QPT_RC, VRNIC_QPT_RC, VRNIC_QPT_RC, VRNIC_QPT_RC, VRNIC_QPT_RC,
		VRNIC_QPT_RC, VRNIC_QPT_RC, VRNIC_QPT_RC, VRNIC_QPT_UC, VRNIC_QPT_UD,
		VRNIC_QPT_GSI, VRNIC_QPT_XRC_INI, VRNIC_QPT_XRC_TGT, VRNIC_QPT_RC,
		VRNIC_QPT_RC,
	};
	const uint8_t states[Q_NUM] = {
		VRNIC_QPS_RTS, VRNIC_QPS_RTS, VRNIC_QPS_RTS, VRNIC_QPS_RTR, VRNIC_QPS_INIT,
		VRNIC_QPS_RESET, VRNIC_QPS_ERR, VRNIC_QPS_RTS, VRNIC_QPS_RTS, VRNIC_QPS_RTS,
		VRNIC_QPS_RTS, VRNIC_QPS_RTS, VRNIC_QPS_RTS, VRNIC_QPS_RTS, VRNIC_QPS_RTS,
	};
	for (size_t i = 0; i < Q_NUM; i++) {
		QpInfo &q = qps[i];
		q.type = types[i];
		q.peer = int(i);
		q.mtu = i == Q_RC4K ? 4096 : i == Q_SRQ6 ? 1024 : 256;
		q.ipv6 = i == Q_SRQ6;
		// Selective repeat on two RC QPs (and their peers'): SACKs,
		// held requests and resent holes are reachable.
		q.sr = i == Q_SRQ6 || i == Q_RC4K;
		q.qkey = q.type == VRNIC_QPT_GSI ? VRNIC_GSI_QKEY : 0x11111111;
		if (i == Q_USER) {
			q.uctx = uctxs[0];
			q.cq = 1;
			q.paged = true;
		}
		if (i == Q_SRQ6)
			q.srq = 0;
		if (i == Q_XTGT)
			q.srq = 1;
		create_qp(q, i == Q_USER ? pds[1] : pds[0], xrcds[0],
			  i == Q_SRQ6 ? srqs[0].srqn : 0);
	}
	qps[Q_LB1].peer = Q_LB2;
	qps[Q_LB2].peer = Q_LB1;
	qps[Q_LB1].loopback = qps[Q_LB2].loopback = true;
	qps[Q_XINI].peer = Q_XTGT;
	qps[Q_XTGT].peer = Q_XINI;
	for (size_t i = 0; i < Q_NUM; i++) {
		QpInfo &q = qps[i];
		to_state(q, states[i], q.loopback ? id : peer_id, qps[size_t(q.peer)].qpn);
	}

	// Receives everywhere, 1 KiB each in the big MR.
	uint64_t off = 0;
	auto sge = [&](uint32_t len) {
		const vrnic_sge s{kIova + off, len, mr_a};
		off += 0x1000;
		return s;
	};
	for (auto &q : qps) {
		if (q.type == VRNIC_QPT_XRC_INI || q.type == VRNIC_QPT_XRC_TGT || q.srq >= 0 ||
		    q.state == VRNIC_QPS_RESET)
			continue;
		for (int n = 0; n < 6; n++) {
			if (q.uctx)
				post_recv(*this, q, 100 + n, {vrnic_sge{kIova + 0x40000000 + n * 0x1000ull, 1024, mr_u}});
			else
				post_recv(*this, q, 100 + n, {sge(1024)});
		}
	}
	for (auto &s : srqs)
		for (int n = 0; n < 8; n++)
			post_srq(*this, s, 200 + n, {sge(2048)});

	// Fast registration and memory windows, executed on the RC QP.
	for (uint32_t i = 0; i < 16; i++)
		mem.store<uint64_t>(kPbl + 0x2000 + i * 8, kData + 0x180000 + i * 4096ull);
	vrnic_reg_mr_wqe r{};
	r.opcode = VRNIC_WR_REG_MR;
	r.flags = VRNIC_WQE_SIGNALED;
	r.page_shift = 12;
	r.access = VRNIC_ACCESS_LOCAL_WRITE | VRNIC_ACCESS_REMOTE_WRITE |
		   VRNIC_ACCESS_REMOTE_READ | VRNIC_ACCESS_REMOTE_ATOMIC;
	r.iova = 0x20000000;
	r.key = (mr_f & ~0xffu) | ((mr_f + 1) & 0xff);
	r.npages = 16;
	r.length = 16 * 4096;
	r.pbl = kPbl + 0x2000;
	QpInfo &rc = qps[Q_RC];
	mem.store(sq_slot(rc, rc.sq_pi), r);
	publish_sq(*this, rc);
	keys.push_back({r.key, r.iova, r.length});
	for (size_t k = 0; k < mws.size(); k++) {
		vrnic_bind_mw_wqe b{};
		b.opcode = VRNIC_WR_BIND_MW;
		b.flags = VRNIC_WQE_SIGNALED;
		b.mw_type = uint8_t(k + 1);
		b.new_key = uint8_t(mws[k] + 1);
		b.access = VRNIC_ACCESS_MW_RIGHTS;
		b.addr = kIova + 0x80000 + k * 0x10000;
		b.mw_key = mws[k];
		b.mr_key = mr_a;
		b.length = 0x10000;
		mem.store(sq_slot(rc, rc.sq_pi), b);
		publish_sq(*this, rc);
		keys.push_back({(mws[k] & ~0xffu) | b.new_key, b.addr, b.length});
	}
	run();

	// Multicast: the UD QP joins 239.1.1.1.
	c = {};
	c.opcode = VRNIC_ADMIN_ATTACH_MCAST;
	const uint8_t mg[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 1, 1};
	std::memcpy(c.mcast.gid, mg, 16);
	c.mcast.qpn = qps[Q_UD].qpn;
	ok(c);
	mcast_path = qps[Q_UD].rx_path;
	std::memcpy(mcast_path.dgid.data(), mg, 16);
	mcast_path.dmac = {0x01, 0x00, 0x5e, 0x01, 0x01, 0x01};

	// Requests in flight toward the peer (and over the loopback pair), so
	// that responses and ACKs from the wire find something to answer.
	vrnic_send_wqe w{};
	w.flags = VRNIC_WQE_SIGNALED;
	w.opcode = VRNIC_WR_SEND;
	post_send(*this, rc, w, {sge(300)});
	w.opcode = VRNIC_WR_RDMA_WRITE;
	w.remote_addr = kIova + 0x1000;
	w.rkey = mr_a;
	post_send(*this, rc, w, {sge(700)});
	w.opcode = VRNIC_WR_RDMA_READ;
	post_send(*this, rc, w, {sge(2000)});
	w.opcode = VRNIC_WR_ATOMIC_FETCH_ADD;
	w.compare_add = 5;
	post_send(*this, rc, w, {sge(8)});
	w.opcode = VRNIC_WR_RDMA_READ;
	post_send(*this, qps[Q_RC4K], w, {sge(0x3000)});
	w.opcode = VRNIC_WR_SEND;
	post_send(*this, qps[Q_UC], w, {sge(600)});
	post_send(*this, qps[Q_SRQ6], w, {sge(1500)});
	w.xrc_srqn = srqs[1].srqn;
	post_send(*this, qps[Q_XINI], w, {sge(100)});
	w.xrc_srqn = 0;
	w.opcode = VRNIC_WR_RDMA_WRITE;
	w.rkey = mr_u;
	w.remote_addr = kIova + 0x40000000;
	post_send(*this, qps[Q_USER], w, {vrnic_sge{kIova + 0x40000000 + 0x8000, 300, mr_u}});
	w.opcode = VRNIC_WR_SEND;
	post_send(*this, qps[Q_LB1], w, {sge(500)});
	w.opcode = VRNIC_WR_RDMA_READ;
	w.rkey = mr_a;
	w.remote_addr = kIova + 0x2000;
	post_send(*this, qps[Q_LB1], w, {sge(900)});
	vrnic_ud_av av{};
	av.dest_qpn = qps[Q_UD].qpn;
	av.qkey = qps[Q_UD].qkey;
	const auto pg = gid_of(peer_id, false);
	std::memcpy(av.dgid, pg.data(), 16);
	av.sgid_index = kGidIndex[0];
	const auto pm = mac_of(peer_id);
	std::memcpy(av.dmac, pm.data(), 6);
	w.opcode = VRNIC_WR_SEND;
	post_send(*this, qps[Q_UD], w, {sge(200)}, &av);

	if (eth) {
		for (int t = 0; t < 2; t++) {
			c = {};
			c.opcode = VRNIC_ADMIN_CREATE_ETH_RING;
			c.create_eth_ring.base = t ? kEthRx : kEthTx;
			c.create_eth_ring.type = uint8_t(t ? VRNIC_ETH_RING_RX : VRNIC_ETH_RING_TX);
			c.create_eth_ring.log_depth = kEthLog;
			c.create_eth_ring.eqn = 1;
			ok(c);
		}
		for (int n = 0; n < 8; n++) {
			vrnic_eth_desc dsc{};
			dsc.addr = kEthBuf + n * 0x2000ull;
			dsc.len = 2048;
			mem.store(kEthRx + n * sizeof(dsc), dsc);
		}
		eth_rx_pi = 8;
		vrnic_engine_db_write(eng, VRNIC_DB_ETH_RX, eth_rx_pi, 4);
	}
	run();
}

void Dev::teardown()
{
	if (eng && !reuse) {
		vrnic_engine_free(eng);
		eng = nullptr;
	}
	mem.restore();
	out.clear();
	out.shrink_to_fit();
}

void Dev::reset(uint8_t peer_id, bool eth)
{
	teardown();
	now = 0;
	deadline = 0;
	schedules = 0;
	net_full = false;
	out.clear();
	frames_sent = 0;
	aq_pi = aeq_ci = eth_tx_pi = eth_rx_pi = 0;
	qps.clear();
	cqs.clear();
	srqs.clear();
	keys.clear();
	pds.clear();
	uctxs.clear();
	mrs.clear();
	mws.clear();
	xrcds.clear();
	eqs.clear();
	const vrnic_engine_config cfg = {
		.mac = {0x52, 0x54, 0x00, 0x12, 0x34, id},
		.num_msix = VRNIC_NUM_MSIX,
		.link_up = true,
		.host_mem_budget = 0,
		.speed_mbps = 0,
		// A small QP-context cache, so that evictions and misses
		// (their write-back and read) are fuzzed with the rest.
		.qpc_cache = 4,
		.qpc_miss_ns = 0,
	};
	if (eng) {
		vrnic_engine_reset(eng);
	} else {
		eng = vrnic_engine_new(&cfg, &kOps, this);
		if (!eng)
			std::abort();
	}
	setup(peer_id, eth);
	out.clear();
}

void Dev::drain_cqs()
{
	for (auto &cq : cqs) {
		for (int n = 0; n < 512; n++) {
			const uint64_t off = uint64_t(cq.ci & ((1u << cq.log) - 1)) * sizeof(vrnic_cqe);
			const auto e = mem.load<vrnic_cqe>(cq.base + off);
			const uint8_t phase = ((cq.ci >> cq.log) & 1) ? 0 : VRNIC_CQE_OWNER;
			if ((e.owner & VRNIC_CQE_OWNER) != phase)
				break;
			cq.ci++;
		}
		mem.store<uint32_t>(cq.dbrec, cq.ci);
	}
}

// -------------------------------------------------------- interpreter

namespace {

constexpr size_t kMaxOps = 48;
constexpr size_t kFrameMax = 10240;

struct Ctx {
	Dev *dev[2];
	int cur = 0;
	Mode mode;
	In in;
	uint8_t buf[kFrameMax];

	Dev &d() { return *dev[cur]; }
};

const KeyInfo &pick_key(Dev &d, uint8_t sel, KeyInfo &raw, uint32_t rawkey)
{
	if (sel % (d.keys.size() + 1) == d.keys.size()) {
		raw = {rawkey, 0, 0x10000};
		return raw;
	}
	return d.keys[sel % d.keys.size()];
}

uint64_t pick_addr(const KeyInfo &k, uint16_t off)
{
	// Mostly inside the range, sometimes just around its ends.
	if (off & 0x8000)
		return k.iova + k.len - 64 + (off & 0xff);
	return k.iova + (uint64_t(off) * 8) % (k.len + 1) - (off & 0x4000 ? 32 : 0);
}

// A frame from the peer, aimed at a live QP with fixed-up headers.
void op_frame(Ctx &x)
{
	Dev &d = x.d();
	In &in = x.in;
	const uint8_t qsel = in.u8(), opb = in.u8(), fl = in.u8(), fl2 = in.u8();
	const auto psnd = int8_t(in.u8());
	const uint8_t ksel = in.u8();
	const uint16_t vaoff = in.u16(), lenf = in.u16();
	const uint8_t plen = in.u8(), plen_hi = in.u8();
	const uint32_t misc = in.u32();
	QpInfo &q = d.qps[qsel % d.qps.size()];
	Headers h;
	h.transport = (fl & 0x04) ? (opb & kTransportMask) : wire_transport(q);
	h.opcode = opb & 0x1f;
	if (!opcode_headers(h.transport | h.opcode)) {
		static constexpr uint8_t kOps[] = {
			SEND_FIRST, SEND_MIDDLE, SEND_LAST, SEND_LAST_IMM, SEND_ONLY,
			SEND_ONLY_IMM, WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST,
			WRITE_LAST_IMM, WRITE_ONLY, WRITE_ONLY_IMM, READ_REQUEST,
			READ_RESP_FIRST, READ_RESP_MIDDLE, READ_RESP_LAST,
			READ_RESP_ONLY, ACK, ATOMIC_ACK, CMP_SWAP, FETCH_ADD,
			SEND_LAST_INV, SEND_ONLY_INV, FLUSH, ATOMIC_WRITE,
		};
		h.opcode = kOps[opb % sizeof(kOps)];
		if (h.transport == UD)
			h.opcode = (opb & 1) ? SEND_ONLY_IMM : SEND_ONLY;
	}
	const bool sack = h.transport == VENDOR;
	const bool resp = sack || is_response(h.opcode);
	h.solicited = fl & 0x01;
	h.ackreq = fl & 0x02;
	Path path = q.rx_path;
	h.dqpn = q.qpn;
	if (fl & 0x10)
		h.dqpn = misc & kPsnMask;
	if (fl2 & 0x04) {
		path = d.mcast_path;
		h.dqpn = VRNIC_MCAST_QPN;
	}
	if (fl2 & 0x08)	// an IP version the QP does not use
		path.ipv6 = !path.ipv6;
	if ((misc >> 30) == 3)	// ECN CE, as a marking switch: CNPs go back
		path.traffic_class |= 3;
	int32_t delta = psnd;
	if (fl & 0x80)
		delta *= 4096;
	const uint32_t base = resp ? ((fl & 0x40) ? q.req_hi : q.req_lo) : q.epsn;
	h.psn = psn_add(base, uint32_t(delta));
	KeyInfo raw;
	const KeyInfo &k = pick_key(d, ksel, raw, misc);
	h.rkey = k.key;
	h.va = pick_addr(k, vaoff);
	h.dma_len = (fl2 & 0x10) ? uint32_t(lenf) << 12 : lenf;
	static constexpr uint8_t kSyn[] = {
		kAethAck, kAethAck | 0x1f, kAethRnr, kAethNakSeq, kAethNakInvReq,
		kAethNakRemAccess, kAethNakRemOp, 0x40,
	};
	h.syndrome = (fl2 & 0x20) ? uint8_t(misc >> 24)
				  : uint8_t(kSyn[(misc >> 24) & 7] | ((misc >> 27) & 0x1f) *
						((misc >> 24 & 7) < 3));
	h.msn = misc & kPsnMask;
	h.swap_add = misc;
	h.compare = vaoff;
	h.orig = misc;
	h.imm = misc;
	h.ieth = (fl2 & 0x40) ? misc : k.key;
	h.feth = misc & 0x3f;
	h.xrc_srqn = (fl & 0x20) ? misc & kPsnMask : d.srqs[1].srqn;
	h.qkey = (fl & 0x08) ? misc : q.qkey;
	h.src_qp = d.qps[size_t(q.peer >= 0 ? q.peer : 0)].qpn;
	// A SACK's bitmap starts after its PSN's successor (else it is no
	// SACK at all), unless the fuzzer asks for a wrong start.
	h.sack_base = psn_add(h.psn, sack && (lenf & 0x8000) ? misc & 0xff : 2);
	h.sack = {uint64_t(misc) * 0x9e3779b97f4a7c15ull, uint64_t(vaoff) << 32 | lenf};

	size_t payload = plen + size_t(plen_hi & 0x1f) * 256;
	const size_t hdr = header_len(path, h.transport, h.opcode);
	if (!(opcode_headers(h.transport | h.opcode) & H_PAYLOAD))
		payload = 0;
	if (hdr + payload + 8 > kFrameMax)
		payload = kFrameMax - hdr - 8;
	build_headers(x.buf, path, h);
	const size_t take = std::min<size_t>(payload, 32);
	in.bytes(x.buf + hdr, take);
	// The rest a counting pattern, copied (a loop here is instrumented
	// and would cost more than the engine's work on the frame).
	static const auto kPattern = [] {
		std::array<uint8_t, kFrameMax> p{};
		for (size_t i = 0; i < p.size(); i++)
			p[i] = uint8_t(i);
		return p;
	}();
	if (payload > take)
		std::memcpy(x.buf + hdr + take, kPattern.data() + take, payload - take);
	size_t len = finish(x.buf, path, hdr, payload);
	if (fl2 & 0x01) {	// damage one byte past the Ethernet header
		const uint16_t pos = in.u16();
		x.buf[14 + pos % (len - 14)] ^= uint8_t(in.u8() | 1);
		if (fl2 & 0x02) {	// and make the ICRC match again
			const uint32_t crc = icrc({x.buf, len}, path.ipv6);
			std::memcpy(x.buf + len - 4, &crc, 4);
		}
	}
	if ((fl2 & 0x80) && len > 60)	// truncated
		len -= 1 + in.u8() % 48;
	vrnic_engine_receive(d.eng, x.buf, len);
	if (!resp && delta == 0 && !(fl & 0x10))
		q.epsn = psn_add(q.epsn, h.opcode == READ_REQUEST
					     ? std::max<uint32_t>(1, (h.dma_len + q.mtu - 1) / q.mtu)
					     : 1);
	// Frames may also arrive back to back, before the engine's deferred
	// work (READ responses, ACKs) has run.
	if (!(plen_hi & 0x80))
		d.run();
}

void op_raw_frame(Ctx &x)
{
	Dev &d = x.d();
	const uint8_t fl = x.in.u8();
	size_t len = x.in.u8() * 4u + 14;
	x.in.bytes(x.buf, len);
	if (!(fl & 1))
		std::memcpy(x.buf, d.qps[0].rx_path.dmac.data(), 6);
	if (fl & 2) {	// an IPv4 RoCE frame of this length
		x.buf[12] = 0x08;
		x.buf[13] = 0x00;
		x.buf[14] = 0x45;
		x.buf[14 + 9] = 17;
		x.buf[14 + 2] = uint8_t((len - 14) >> 8);
		x.buf[14 + 3] = uint8_t(len - 14);
		x.buf[34 + 2] = 0x12;
		x.buf[34 + 3] = 0xb7;
		x.buf[34 + 4] = uint8_t((len - 34) >> 8);
		x.buf[34 + 5] = uint8_t(len - 34);
		x.buf[14 + 6] = x.buf[14 + 7] = 0;
	}
	if ((fl & 4) && len >= 14 + 40 + 8 + 12 + 4) {
		const uint32_t crc = icrc({x.buf, len}, x.buf[12] == 0x86);
		std::memcpy(x.buf + len - 4, &crc, 4);
	}
	vrnic_engine_receive(d.eng, x.buf, len);
	d.run();
}

// Field fix-ups of an admin command: (byte offset, kind).
enum Fix : uint8_t {
	F_ADDR4K, F_ADDR8, F_PD, F_CQ, F_QP, F_SRQ, F_XRCD, F_UCTX, F_EQN,
	F_MRKEY, F_MWKEY, F_LOG, F_SMALL, F_END,
};
struct FixSpec {
	uint8_t off;
	Fix kind;
};

uint32_t pick_id(In &in, const std::vector<uint32_t> &v, uint32_t raw)
{
	if (v.empty())
		return raw;
	const uint8_t s = in.u8();
	return s < 240 ? v[s % v.size()] : raw;
}

void admin_fixups(Ctx &x, vrnic_admin_cmd &c, uint16_t mask)
{
	Dev &d = x.d();
	static const FixSpec kNone[] = {{0, F_END}};
	static const FixSpec kQuery[] = {{8, F_ADDR8}, {0, F_END}};
	static const FixSpec kEq[] = {{8, F_ADDR4K}, {16, F_LOG}, {17, F_EQN}, {0, F_END}};
	static const FixSpec kEth[] = {{8, F_ADDR4K}, {17, F_LOG}, {19, F_EQN}, {0, F_END}};
	static const FixSpec kDestroyEq[] = {{8, F_EQN}, {0, F_END}};
	static const FixSpec kDestroyUctx[] = {{8, F_UCTX}, {0, F_END}};
	static const FixSpec kPdC[] = {{8, F_UCTX}, {0, F_END}};
	static const FixSpec kPdD[] = {{8, F_PD}, {0, F_END}};
	static const FixSpec kMrC[] = {{24, F_ADDR8}, {32, F_PD}, {40, F_SMALL}, {48, F_ADDR4K},
				       {56, F_ADDR4K}, {0, F_END}};
	static const FixSpec kMrD[] = {{8, F_MRKEY}, {0, F_END}};
	static const FixSpec kMwD[] = {{8, F_MWKEY}, {0, F_END}};
	static const FixSpec kCqC[] = {{8, F_ADDR4K}, {16, F_ADDR8}, {24, F_UCTX}, {28, F_LOG},
				       {29, F_EQN}, {0, F_END}};
	static const FixSpec kCqD[] = {{8, F_CQ}, {0, F_END}};
	static const FixSpec kQpC[] = {{8, F_ADDR4K}, {16, F_ADDR4K}, {24, F_ADDR8}, {32, F_UCTX},
				       {36, F_PD}, {40, F_CQ}, {44, F_CQ}, {49, F_LOG},
				       {50, F_LOG}, {56, F_SRQ}, {60, F_XRCD}, {0, F_END}};
	static const FixSpec kQpM[] = {{8, F_ADDR8}, {16, F_QP}, {0, F_END}};
	static const FixSpec kQpD[] = {{8, F_QP}, {0, F_END}};
	static const FixSpec kSrqC[] = {{8, F_ADDR4K}, {16, F_ADDR8}, {24, F_UCTX}, {28, F_PD},
					{32, F_LOG}, {36, F_CQ}, {40, F_XRCD}, {0, F_END}};
	static const FixSpec kSrqM[] = {{8, F_SRQ}, {0, F_END}};
	static const FixSpec kMcast[] = {{24, F_QP}, {0, F_END}};
	static const FixSpec kMw[] = {{8, F_PD}, {0, F_END}};
	static const FixSpec kXrcdD[] = {{8, F_XRCD}, {0, F_END}};
	const FixSpec *spec = kNone;
	switch (c.opcode) {
	case VRNIC_ADMIN_QUERY_DEVICE:
	case VRNIC_ADMIN_QUERY_PORT:
	case VRNIC_ADMIN_QUERY_STATS:
	case VRNIC_ADMIN_QUERY_CC: spec = kQuery; break;
	case VRNIC_ADMIN_CREATE_EQ: spec = kEq; break;
	case VRNIC_ADMIN_DESTROY_EQ: spec = kDestroyEq; break;
	case VRNIC_ADMIN_CREATE_ETH_RING: spec = kEth; break;
	case VRNIC_ADMIN_DESTROY_UCTX: spec = kDestroyUctx; break;
	case VRNIC_ADMIN_CREATE_PD: spec = kPdC; break;
	case VRNIC_ADMIN_DESTROY_PD: spec = kPdD; break;
	case VRNIC_ADMIN_CREATE_MR: spec = kMrC; break;
	case VRNIC_ADMIN_DESTROY_MR: spec = kMrD; break;
	case VRNIC_ADMIN_DEALLOC_MW: spec = kMwD; break;
	case VRNIC_ADMIN_CREATE_CQ: spec = kCqC; break;
	case VRNIC_ADMIN_DESTROY_CQ: spec = kCqD; break;
	case VRNIC_ADMIN_CREATE_QP: spec = kQpC; break;
	case VRNIC_ADMIN_MODIFY_QP:
	case VRNIC_ADMIN_QUERY_QP: spec = kQpM; break;
	case VRNIC_ADMIN_DESTROY_QP: spec = kQpD; break;
	case VRNIC_ADMIN_CREATE_SRQ: spec = kSrqC; break;
	case VRNIC_ADMIN_MODIFY_SRQ:
	case VRNIC_ADMIN_DESTROY_SRQ: spec = kSrqM; break;
	case VRNIC_ADMIN_ATTACH_MCAST:
	case VRNIC_ADMIN_DETACH_MCAST: spec = kMcast; break;
	case VRNIC_ADMIN_ALLOC_MW: spec = kMw; break;
	case VRNIC_ADMIN_DEALLOC_XRCD: spec = kXrcdD; break;
	default: break;
	}
	uint8_t *raw = reinterpret_cast<uint8_t *>(&c);
	for (unsigned i = 0; spec[i].kind != F_END; i++) {
		if (!(mask & (1u << i)))
			continue;
		uint8_t *f = raw + spec[i].off;
		const size_t room = sizeof(c) - spec[i].off;
		uint32_t v32 = 0;
		uint64_t v64 = 0;
		std::memcpy(&v32, f, std::min<size_t>(4, room));
		std::memcpy(&v64, f, std::min<size_t>(8, room));
		std::vector<uint32_t> qpns, cqns, srqns;
		switch (spec[i].kind) {
		case F_ADDR4K:
			v64 = Dev::kScratch + (v64 % (Dev::kScratchLen / 4096)) * 4096;
			std::memcpy(f, &v64, 8);
			break;
		case F_ADDR8:
			v64 = Dev::kScratch + (v64 % (Dev::kScratchLen / 8)) * 8;
			std::memcpy(f, &v64, 8);
			break;
		case F_LOG:
			*f %= 16;
			break;
		case F_SMALL:
			v32 %= 600;
			std::memcpy(f, &v32, 4);
			break;
		case F_EQN:
			*f = uint8_t(*f % VRNIC_MAX_EQS);
			break;
		default: {
			const std::vector<uint32_t> *v = nullptr;
			switch (spec[i].kind) {
			case F_PD: v = &d.pds; break;
			case F_XRCD: v = &d.xrcds; break;
			case F_UCTX: v = &d.uctxs; break;
			case F_MRKEY: v = &d.mrs; break;
			case F_MWKEY: v = &d.mws; break;
			case F_QP:
				for (auto &q : d.qps)
					qpns.push_back(q.qpn);
				v = &qpns;
				break;
			case F_CQ:
				for (auto &q : d.cqs)
					cqns.push_back(q.cqn);
				v = &cqns;
				break;
			case F_SRQ:
				for (auto &q : d.srqs)
					srqns.push_back(q.srqn);
				v = &srqns;
				break;
			default: break;
			}
			if (v) {
				v32 = pick_id(x.in, *v, v32);
				if (spec[i].kind == F_UCTX && (v32 & 0x80000000u))
					v32 = 0;	// the kernel's
				std::memcpy(f, &v32, 4);
			}
		}
		}
	}
}

void op_admin(Ctx &x)
{
	Dev &d = x.d();
	In &in = x.in;
	const uint8_t opb = in.u8();
	const uint16_t mask = in.u16();
	vrnic_admin_cmd c{};
	in.bytes(c.raw, sizeof(c.raw));
	c.opcode = (mask & 0x8000) ? opb : uint8_t(opb % VRNIC_ADMIN_NUM_OPCODES);
	c.flags = (mask & 0x4000) ? uint8_t(mask) : 0;
	if (!(mask & 0x2000))
		admin_fixups(x, c, mask);
	if (c.opcode == VRNIC_ADMIN_MODIFY_QP && !(mask & 0x1000)) {
		// The attributes: from the input, with the address vector aimed
		// at the peer and the numbers made valid.
		vrnic_qp_attr a{};
		in.bytes(&a, 64);
		a.state %= 7;
		a.path_mtu = uint8_t(1 + a.path_mtu % 5);
		a.retry_cnt &= 7;
		a.rnr_retry &= 7;
		a.min_rnr_timer &= 31;
		a.max_rd_atomic %= 17;
		a.max_dest_rd_atomic %= 17;
		const bool v6 = a.hop_limit & 1;
		const auto dg = gid_of(d.id == 1 ? 2 : 1, v6);
		std::memcpy(a.dgid, dg.data(), 16);
		a.sgid_index = kGidIndex[v6];
		a.dest_qpn &= kPsnMask;
		const uint64_t at = Dev::kAttr;
		d.mem.store(at, a);
		c.modify_qp.attr_addr = at;
	}
	uint32_t result = 0;
	const uint8_t st = d.admin(c, &result);
	if (st != VRNIC_ADMIN_ST_OK)
		return;
	// Track what was created, so later commands can name it.
	switch (c.opcode) {
	case VRNIC_ADMIN_CREATE_PD: d.pds.push_back(result); break;
	case VRNIC_ADMIN_CREATE_UCTX: d.uctxs.push_back(result); break;
	case VRNIC_ADMIN_CREATE_MR:
		d.mrs.push_back(result);
		d.keys.push_back({result, c.create_mr.iova, std::min<uint64_t>(c.create_mr.length, 1u << 30)});
		break;
	case VRNIC_ADMIN_ALLOC_MW: d.mws.push_back(result); break;
	case VRNIC_ADMIN_ALLOC_XRCD: d.xrcds.push_back(result); break;
	case VRNIC_ADMIN_CREATE_CQ: {
		CqInfo q;
		q.cqn = result;
		q.base = c.create_cq.ring_flags & VRNIC_RING_PAGED ? 0 : c.create_cq.base;
		q.dbrec = c.create_cq.dbrec;
		q.log = c.create_cq.log_depth;
		q.uctx = c.create_cq.uctx;
		if (q.base && d.cqs.size() < 16)
			d.cqs.push_back(q);
		break;
	}
	case VRNIC_ADMIN_CREATE_QP:
		if (d.qps.size() < 32 && !(c.create_qp.sq_flags & VRNIC_RING_PAGED)) {
			QpInfo q;
			q.qpn = result;
			q.type = c.create_qp.type;
			q.uctx = c.create_qp.uctx;
			q.sq = c.create_qp.sq_base;
			q.rq = c.create_qp.rq_base;
			q.dbrec = c.create_qp.dbrec;
			q.sq_log = c.create_qp.sq_log_depth;
			q.sq_shift = c.create_qp.sq_wqe_shift;
			q.rq_log = c.create_qp.rq_log_depth;
			q.rq_shift = c.create_qp.rq_wqe_shift;
			q.rx_path = d.qps[0].rx_path;
			q.qkey = 0x11111111;
			d.qps.push_back(q);
		}
		break;
	default: break;
	}
}

void op_memwrite(Ctx &x)
{
	Dev &d = x.d();
	const uint8_t where = x.in.u8();
	const uint16_t off = x.in.u16();
	const size_t len = x.in.u8() % 129;
	uint8_t tmp[128];
	x.in.bytes(tmp, len);
	static constexpr uint64_t kAreas[][2] = {
		{Dev::kScratch, Dev::kScratchLen}, {Dev::kRings, 0x30000},
		{Dev::kData, Dev::kDataLen}, {Dev::kDbrec, 0x1000},
		{Dev::kPbl, 0x8000}, {Dev::kEthTx, 0x2000},
	};
	const auto &a = kAreas[where % 6];
	const uint64_t at = a[0] + (uint64_t(off) * ((where >> 3) + 1)) % a[1];
	d.mem.write(at, tmp, std::min<uint64_t>(len, a[0] + a[1] - at));
}

void op_pagelist(Ctx &x)
{
	Dev &d = x.d();
	const uint16_t off = x.in.u16();
	const uint8_t n = x.in.u8(), first = x.in.u8(), fl = x.in.u8();
	const uint64_t at = Dev::kScratch + (uint64_t(off) * 8) % (Dev::kScratchLen - 4096);
	for (unsigned i = 0; i <= n % 64u && at + i * 8 < Dev::kScratch + Dev::kScratchLen; i++) {
		uint64_t page = Dev::kData + ((first + i) % 512) * 4096ull;
		if (fl & 1)	// a level-2 list: pages of the scratch area
			page = Dev::kScratch + ((first + i) % 64) * 4096ull;
		if ((fl & 2) && i == n % 64u)
			page = 0;	// ends in a hole
		d.mem.store<uint64_t>(at + i * 8, page);
	}
}

QpInfo *pick_qp(Dev &d, uint8_t s)
{
	return d.qps.empty() ? nullptr : &d.qps[s % d.qps.size()];
}

void fill_sges(Ctx &x, Dev &d, uint8_t *dst, unsigned n, bool fix)
{
	for (unsigned i = 0; i < n; i++) {
		vrnic_sge s{};
		x.in.bytes(&s, 8);
		if (fix) {
			KeyInfo raw;
			const uint8_t ks = uint8_t(s.addr);
			const KeyInfo &k = pick_key(d, ks, raw, uint32_t(s.addr >> 32));
			s.lkey = k.key;
			s.length = uint32_t(s.addr >> 8) & 0x1fff;
			s.addr = pick_addr(k, uint16_t(s.addr >> 16));
		} else {
			x.in.bytes(reinterpret_cast<uint8_t *>(&s) + 8, 8);
		}
		std::memcpy(dst + i * sizeof(s), &s, sizeof(s));
	}
}

void op_send_wqe(Ctx &x)
{
	Dev &d = x.d();
	In &in = x.in;
	QpInfo *qp = pick_qp(d, in.u8());
	const uint8_t fix = in.u8(), how = in.u8();
	if (!qp || !qp->sq || qp->sq_shift < 6 || qp->sq_shift > 10)
		return;
	QpInfo &q = *qp;
	uint8_t w[1024] = {};
	const size_t stride = size_t(1) << q.sq_shift;
	in.bytes(w, 48);
	auto *h = reinterpret_cast<vrnic_send_wqe *>(w);
	if (fix & 0x01)
		h->opcode %= 13;
	if (fix & 0x02) {
		h->num_sge %= 5;
		h->flags &= ~VRNIC_WQE_INLINE;
		if (h->inline_len & 1) {
			h->flags |= VRNIC_WQE_INLINE;
			h->inline_len %= 200;
		}
	}
	KeyInfo raw;
	const KeyInfo &rk = pick_key(d, uint8_t(h->rkey), raw, h->rkey);
	if (fix & 0x04) {
		h->rkey = rk.key;
		h->remote_addr = pick_addr(rk, uint16_t(h->remote_addr));
		if (h->opcode == VRNIC_WR_ATOMIC_CMP_SWP || h->opcode == VRNIC_WR_ATOMIC_FETCH_ADD ||
		    h->opcode == VRNIC_WR_ATOMIC_WRITE)
			h->remote_addr &= ~7ull;
	}
	if (fix & 0x20)
		h->xrc_srqn = d.srqs.size() > 1 ? d.srqs[1].srqn : 0;
	if ((fix & 0x40) && h->opcode == VRNIC_WR_REG_MR) {
		auto *r = reinterpret_cast<vrnic_reg_mr_wqe *>(w);
		const uint32_t mr = d.mrs.empty() ? 0 : d.mrs[r->key % d.mrs.size()];
		r->key = (mr & ~0xffu) | ((r->key >> 8) & 0xff);
		r->page_shift = uint8_t(12 + r->page_shift % 19);
		r->npages %= 32;
		r->pbl = Dev::kScratch + (r->pbl % (Dev::kScratchLen / 8)) * 8;
	}
	if ((fix & 0x40) && h->opcode == VRNIC_WR_BIND_MW) {
		auto *b = reinterpret_cast<vrnic_bind_mw_wqe *>(w);
		if (!d.mws.empty())
			b->mw_key = d.mws[b->mw_key % d.mws.size()];
		KeyInfo r2;
		const KeyInfo &mk = pick_key(d, uint8_t(b->mr_key), r2, b->mr_key);
		b->mr_key = mk.key;
		b->addr = pick_addr(mk, uint16_t(b->addr));
		b->length %= 0x20000;
		b->mw_type = uint8_t(1 + (b->mw_type & 1));
	}
	size_t o = sizeof(vrnic_send_wqe);
	if (vrnic_qpt_is_datagram(q.type)) {
		vrnic_ud_av av{};
		in.bytes(&av, 16);
		if (fix & 0x10) {
			const QpInfo &t = d.qps[av.dest_qpn % d.qps.size()];
			const uint8_t peer = (av.qkey & 1) ? d.id : uint8_t(d.id == 1 ? 2 : 1);
			av.dest_qpn = (av.qkey & 2) ? VRNIC_MCAST_QPN : t.qpn;
			av.qkey = (av.qkey & 4) ? av.qkey : t.qkey;
			const auto dg = gid_of(peer, false);
			std::memcpy(av.dgid, dg.data(), 16);
			av.sgid_index = kGidIndex[0];
			const auto m = mac_of(peer);
			std::memcpy(av.dmac, m.data(), 6);
		}
		std::memcpy(w + o, &av, sizeof(av));
		o += sizeof(av);
	}
	if (h->flags & VRNIC_WQE_INLINE) {
		const size_t n = std::min<size_t>(h->inline_len, stride > o ? stride - o : 0);
		in.bytes(w + o, std::min<size_t>(n, 32));
	} else {
		const unsigned n = std::min<unsigned>(h->num_sge, unsigned((stride - std::min(o, stride)) / 16));
		fill_sges(x, d, w + o, std::min(n, 8u), fix & 0x08);
	}
	const uint32_t idx = (how & 0x08) ? q.sq_pi + (how >> 4) : q.sq_pi;
	d.mem.write(sq_slot(q, idx), w, stride);
	uint32_t page = q.uctx;
	if (how & 0x04)
		page = d.uctxs.empty() ? 0 : d.uctxs[how % d.uctxs.size()];
	publish_sq(d, q, !(how & 0x01), !(how & 0x02), page);
	d.run();
}

void op_recv_wqe(Ctx &x)
{
	Dev &d = x.d();
	In &in = x.in;
	const uint8_t sel = in.u8(), fl = in.u8();
	const unsigned n = fl % 5;
	uint8_t w[512] = {};
	auto *h = reinterpret_cast<vrnic_recv_wqe *>(w);
	h->wr_id = 0x5000 + sel;
	h->num_sge = (fl & 0x80) ? uint8_t(in.u8()) : uint8_t(n);
	fill_sges(x, d, w + sizeof(*h), n, !(fl & 0x40));
	if ((sel & 0x80) && !d.srqs.empty()) {
		SrqInfo &s = d.srqs[sel % d.srqs.size()];
		d.mem.write(s.base + (uint64_t(s.pi & ((1u << s.log) - 1)) << s.shift), w,
			    std::min<size_t>(sizeof(w), size_t(1) << s.shift));
		s.pi++;
		if (!(fl & 0x20))
			d.mem.store<uint32_t>(s.dbrec, s.pi);
	} else {
		QpInfo *qp = pick_qp(d, sel);
		if (!qp || !qp->rq || qp->rq_shift < 5 || qp->rq_shift > 9)
			return;
		QpInfo &q = *qp;
		d.mem.write(q.rq + (uint64_t(q.rq_pi & ((1u << q.rq_log) - 1)) << q.rq_shift), w,
			    std::min<size_t>(sizeof(w), size_t(1) << q.rq_shift));
		q.rq_pi++;
		if (!(fl & 0x20))
			d.mem.store<uint32_t>(q.dbrec + 4, q.rq_pi);
		if (!(fl & 0x10))
			vrnic_engine_db_write(d.eng, uint64_t(q.uctx) * VRNIC_DB_PAGE_SIZE + VRNIC_DB_RQ,
					      q.qpn, 4);
	}
	d.run();
}

void op_dbrec(Ctx &x)
{
	Dev &d = x.d();
	const uint8_t sel = x.in.u8(), fl = x.in.u8();
	const uint32_t raw = x.in.u32();
	auto val = [&](uint32_t tracked) {
		return (fl & 0x80) ? raw : tracked + uint32_t(int8_t(raw));
	};
	switch (fl % 4) {
	case 0: {
		QpInfo *q = pick_qp(d, sel);
		if (q && q->dbrec)
			d.mem.store<uint32_t>(q->dbrec, val(q->sq_pi));
		break;
	}
	case 1: {
		QpInfo *q = pick_qp(d, sel);
		if (q && q->dbrec)
			d.mem.store<uint32_t>(q->dbrec + 4, val(q->rq_pi));
		break;
	}
	case 2:
		if (!d.cqs.empty()) {
			CqInfo &c = d.cqs[sel % d.cqs.size()];
			d.mem.store<uint32_t>(c.dbrec, val(c.ci));
		}
		break;
	default:
		if (!d.srqs.empty()) {
			SrqInfo &s = d.srqs[sel % d.srqs.size()];
			d.mem.store<uint32_t>(s.dbrec + ((fl & 4) ? 4 : 0), val(s.pi));
		}
		break;
	}
}

void op_doorbell(Ctx &x)
{
	Dev &d = x.d();
	In &in = x.in;
	const uint8_t psel = in.u8(), osel = in.u8(), vsel = in.u8();
	const uint32_t raw = in.u32();
	QpInfo *q = pick_qp(d, vsel);
	uint64_t page = 0;
	switch (psel % 4) {
	case 0: page = 0; break;
	case 1: page = q ? q->uctx : 0; break;
	case 2: page = d.uctxs.empty() ? 1 : d.uctxs[psel % d.uctxs.size()]; break;
	default: page = psel; break;
	}
	static constexpr uint32_t kOffs[] = {
		VRNIC_DB_SQ, VRNIC_DB_RQ, VRNIC_DB_CQ_ARM, VRNIC_DB_USER_PING,
		VRNIC_DB_EQ, VRNIC_DB_ETH_TX, VRNIC_DB_ETH_RX, VRNIC_DB_ETH_TX_ARM,
		VRNIC_DB_ETH_RX_ARM,
	};
	uint64_t off = osel < 9 * 25 ? kOffs[osel % 9] : (raw >> 16) & 0xffc;
	uint32_t v = raw;
	if (!(vsel & 0x80)) {
		if (off == VRNIC_DB_SQ || off == VRNIC_DB_RQ) {
			v = q ? q->qpn : raw;
		} else if (off == VRNIC_DB_CQ_ARM && !d.cqs.empty()) {
			v = d.cqs[vsel % d.cqs.size()].cqn | (raw & 0xff000000u);
		}
	}
	const unsigned size = (osel & 0x80) && (raw & 1) ? 8 : 4;
	vrnic_engine_db_write(d.eng, page * VRNIC_DB_PAGE_SIZE + off, v, size);
	d.run();
}

void op_reg(Ctx &x)
{
	Dev &d = x.d();
	In &in = x.in;
	const uint8_t fl = in.u8();
	uint64_t off = in.u16();
	uint32_t v = in.u32();
	if (!(fl & 0x80))
		off &= VRNIC_REG_BAR_SIZE - 4;
	if (fl & 0x01)	// an address inside guest memory
		v = uint32_t(Dev::kScratch + (v % (Dev::kScratchLen / 4096)) * 4096);
	unsigned size = 4;
	if (fl & 0x02)
		size = 1u << (fl >> 2 & 3);
	if (fl & 0x40)
		(void)vrnic_engine_reg_read(d.eng, off, size);
	else
		vrnic_engine_reg_write(d.eng, off, v, size);
	d.run();
}

void op_eth_tx(Ctx &x)
{
	Dev &d = x.d();
	In &in = x.in;
	const uint8_t fl = in.u8();
	const unsigned n = fl % 4 + 1;
	for (unsigned i = 0; i < n; i++) {
		vrnic_eth_desc dsc{};
		const uint16_t off = in.u16(), len = in.u16();
		dsc.addr = (fl & 0x80) ? in.u64() : Dev::kEthBuf + 0x10000 + uint64_t(off) * 4;
		dsc.len = (fl & 0x40) ? len : uint16_t(len % 2048);
		dsc.flags = i == n - 1 ? VRNIC_ETH_DESC_EOP : 0;
		if (fl & 0x20)
			dsc.flags ^= uint16_t(len >> 8);
		if (i == 0 && !(fl & 0x80)) {
			uint8_t hdr[64];
			in.bytes(hdr, sizeof(hdr));
			d.mem.write(dsc.addr, hdr, sizeof(hdr));
		}
		d.mem.store(Dev::kEthTx + (d.eth_tx_pi & ((1u << Dev::kEthLog) - 1)) * sizeof(dsc), dsc);
		d.eth_tx_pi++;
	}
	const uint16_t pi = (fl & 0x10) ? in.u16() : d.eth_tx_pi;
	vrnic_engine_db_write(d.eng, VRNIC_DB_ETH_TX, pi, 4);
	d.run();
}

void op_eth_rx(Ctx &x)
{
	Dev &d = x.d();
	const uint8_t fl = x.in.u8();
	const uint16_t len = x.in.u16();
	const unsigned n = fl % 4 + 1;
	for (unsigned i = 0; i < n; i++) {
		vrnic_eth_desc dsc{};
		dsc.addr = Dev::kEthBuf + (d.eth_rx_pi & 15) * 0x2000ull;
		if (fl & 0x80)
			dsc.addr += len;
		dsc.len = (fl & 0x40) ? len : 2048;
		d.mem.store(Dev::kEthRx + (d.eth_rx_pi & ((1u << Dev::kEthLog) - 1)) * sizeof(dsc), dsc);
		d.eth_rx_pi++;
	}
	const uint16_t pi = (fl & 0x10) ? len : d.eth_rx_pi;
	vrnic_engine_db_write(d.eng, VRNIC_DB_ETH_RX, pi, 4);
	d.run();
}

void op_eth_frame(Ctx &x)
{
	Dev &d = x.d();
	const uint8_t fl = x.in.u8();
	size_t len = x.in.u16() % 9400;
	std::memset(x.buf, 0, std::min(len, kFrameMax));
	x.in.bytes(x.buf, std::min<size_t>(len, 64));
	len = std::min(len, kFrameMax);
	if (len >= 14) {
		if ((fl & 3) == 0)
			std::memcpy(x.buf, d.qps[0].rx_path.dmac.data(), 6);
		else if ((fl & 3) == 1)
			std::memset(x.buf, 0xff, 6);
		if (fl & 4) {
			x.buf[12] = 0x08;
			x.buf[13] = 0x00;
		}
	}
	vrnic_engine_receive(d.eng, x.buf, len);
	d.run();
}

void op_wire(Ctx &x)
{
	Dev &from = x.d(), &to = *x.dev[x.cur ^ 1];
	const uint8_t n = x.in.u8(), fl = x.in.u8();
	for (unsigned i = 0; i <= n % 16u && !from.out.empty(); i++) {
		std::vector<uint8_t> f = std::move(from.out.front());
		from.out.pop_front();
		const uint8_t r = x.in.u8();
		if ((fl & 1) && (r & 3) == 0)
			continue;	// dropped
		if ((fl & 2) && (r & 0x1c) == 0 && f.size() > 14)
			f[14 + x.in.u16() % (f.size() - 14)] ^= 0x10;
		if ((fl & 4) && (r & 0xe0) == 0 && from.out.size() < 256)
			from.out.push_back(f);	// duplicated, later
		vrnic_engine_receive(to.eng, f.data(), f.size());
		to.run();
	}
	from.run();
}

} // namespace

void run_input(const uint8_t *data, size_t size, unsigned ops, Mode mode, bool eth)
{
	static Dev a(1), b(2);
	static Ctx x{{&a, &b}, 0, Mode::Single, {nullptr, 0}, {}};
	// VRNIC_FUZZ_RESET_EVERY=n (n > 1): rebuild the world only every n
	// inputs, the ones between continue from the state the last one left
	// (faster, but an input then depends on the ones before it).
	static const unsigned every = [] {
		const char *e = std::getenv("VRNIC_FUZZ_RESET_EVERY");
		return e && std::atoi(e) > 1 ? unsigned(std::atoi(e)) : 1u;
	}();
	static unsigned count = 0;
	const bool fresh = every == 1 || count++ % every == 0 || !a.eng;
	x.cur = 0;
	x.mode = mode;
	x.in = In{data, size};
	a.sync_peer = b.sync_peer = nullptr;
	if (!fresh) {
		// continue in the world as it is
	} else if (mode == Mode::Pair) {
		a.keep_frames = b.keep_frames = true;
		a.reset(2, eth);
		b.reset(1, eth);
	} else {
		a.reset(200, eth);
	}
	unsigned list[32], n = 0;
	for (unsigned i = 0; i < 32; i++)
		if (ops & (1u << i))
			list[n++] = 1u << i;
	for (size_t k = 0; k < kMaxOps && !x.in.empty(); k++) {
		const unsigned op = list[x.in.u8() % n];
		switch (op) {
		case OP_FRAME: op_frame(x); break;
		case OP_RAW_FRAME: op_raw_frame(x); break;
		case OP_POLL: x.d().run(); break;
		case OP_TIME: x.d().advance(1ull << (x.in.u8() % 36)); break;
		case OP_ADMIN: op_admin(x); break;
		case OP_MEMWRITE: op_memwrite(x); break;
		case OP_PAGELIST: op_pagelist(x); break;
		case OP_SEND_WQE: op_send_wqe(x); break;
		case OP_RECV_WQE: op_recv_wqe(x); break;
		case OP_DBREC: op_dbrec(x); break;
		case OP_DOORBELL: op_doorbell(x); break;
		case OP_CQ: x.d().drain_cqs(); break;
		case OP_REG: op_reg(x); break;
		case OP_ETH_TX: op_eth_tx(x); break;
		case OP_ETH_RX: op_eth_rx(x); break;
		case OP_ETH_FRAME: op_eth_frame(x); break;
		case OP_LINK: {
			// Bit 0: the link; bit 1: the network is full (send_frame
			// returns 1) until a later op with bit 1 clear resumes it.
			const uint8_t v = x.in.u8();
			Dev &dv = x.d();
			vrnic_engine_set_link(dv.eng, v & 1);
			if (dv.net_full && !(v & 2)) {
				dv.net_full = false;
				vrnic_engine_tx_resume(dv.eng);
			} else if (v & 2) {
				dv.net_full = true;
			}
			dv.run();
			break;
		}
		case OP_WIRE:
			if (mode == Mode::Pair)
				op_wire(x);
			break;
		case OP_SWITCH:
			if (mode == Mode::Pair)
				x.cur ^= 1;
			break;
		case OP_SYNC:
			if (mode == Mode::Pair) {
				const bool on = x.in.u8() & 1;
				a.sync_peer = on ? &b : nullptr;
				b.sync_peer = on ? &a : nullptr;
			}
			break;
		default: break;
		}
	}
	// Let what the input started finish: both engines, a few timer rounds.
	for (Dev *dv : {&a, &b})
		if (dv->net_full && dv->eng) {
			dv->net_full = false;
			vrnic_engine_tx_resume(dv->eng);
		}
	for (int r = 0; r < 3; r++) {
		for (Dev *dv : {&a, &b}) {
			if (mode == Mode::Single && dv == &b)
				continue;
			dv->advance(1ull << 30);
			dv->run();
		}
		if (mode == Mode::Pair) {
			x.cur = 0;
			x.in = In{nullptr, 0};
			for (int s = 0; s < 2; s++) {
				op_wire(x);
				x.cur ^= 1;
			}
		}
	}
	// The use counts stayed balanced (engine/rdma.cpp pd_unref and the
	// like): a bug there is a finding, not a number.
	for (Dev *dv : {&a, &b})
		if (dv->eng && dv->eng->dev.rdma().sched_counters().ref_mismatch) {
			(void)std::fprintf(stderr, "fuzz: ref_mismatch %llu\n",
					   static_cast<unsigned long long>(
						   dv->eng->dev.rdma().sched_counters().ref_mismatch));
			std::abort();
		}
	// Free the engines now, so that every allocation of this input is
	// released within it (libFuzzer then skips its leak scan).
	if (every == 1)
		for (Dev *dv : {&a, &b})
			dv->teardown();
}

} // namespace fz

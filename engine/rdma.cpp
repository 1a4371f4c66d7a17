// SPDX-License-Identifier: GPL-2.0-or-later
// RDMA objects: admin commands for PDs, MRs, CQs and QPs, the QP state
// machine, completion queues and doorbells.  The transport is in
// transport.cpp.
#include "rdma.hpp"

#include <algorithm>
#include <cstring>

#include "device.hpp"

namespace vrnic {

namespace {

// The generation bits a table's handles carry: PD handles are 32 bits
// (they name nothing on the wire or in a doorbell), the others 24.
template <typename T> constexpr uint32_t gen_mask()
{
#ifdef VRNIC_FUZZ_GEN_MASK
	// Fuzz builds: slots spend their generations within a few inputs,
	// so the fuzzer reaches spent slots and their renewal.
	return VRNIC_FUZZ_GEN_MASK;
#else
	return std::is_same_v<T, Pd> || std::is_same_v<T, Xrcd> ?
		       VRNIC_PD_GEN_MASK : VRNIC_OBJ_GEN_MASK;
#endif
}

template <typename T> constexpr uint32_t handle(uint32_t index, uint32_t gen)
{
	return (gen & gen_mask<T>()) << VRNIC_OBJ_INDEX_BITS | index;
}

// A slot whose next generation cannot be given: past the mask, or, for a
// QP, the multicast QPN 0xffffff (index 0xfffff, generation 0xf), which
// packets could never be addressed to.
template <typename T> constexpr bool spent(uint32_t i, uint32_t gen)
{
	return gen >= gen_mask<T>() ||
	       (std::is_same_v<T, Qp> && handle<T>(i, gen + 1) == VRNIC_MCAST_QPN);
}

// Slot i's object ends: its chunk counts one live object fewer.
template <typename T> void ended(SlotTable<T> &tab, uint32_t i, uint32_t gen)
{
	tab.freed(i, spent<T>(i, gen));
}

bool aligned(uint64_t v, uint64_t a) { return v != 0 && v % a == 0; }

// Its QP_FATAL, LAST_WQE and SQ_DRAINED events, held by a full EQ.
constexpr uint64_t kQpHeldEvents = 3 * EventQueue::kHeldBytes;

// What a QP holds for its whole life besides its rings: the responder
// resources (READ/atomic, at most VRNIC_MAX_RD_ATOMIC), the copy of the
// receive WQE it is filling, and what its held events may cost.
constexpr uint64_t kQpReserve =
	VRNIC_MAX_RD_ATOMIC * (sizeof(RdResource) + 16) + sizeof(RecvWqe) +
	VRNIC_MAX_SGE * sizeof(vrnic_sge) + kQpHeldEvents;

} // namespace

Rdma::Rdma(const Platform &plat, HostBudget &budget, DeviceCounters &dcnt,
	   std::array<EventQueue, VRNIC_MAX_EQS> &eqs,
	   const std::array<bool, VRNIC_NUM_DB_PAGES> &uctx_used,
	   const std::array<uint8_t, 6> &mac, const uint32_t &port_mtu,
	   PortPause &pfc)
	: plat_(plat), budget_(budget), dcnt_(dcnt), eqs_(eqs), uctx_used_(uctx_used), mac_(mac),
	  port_mtu_(port_mtu), pfc_(pfc), pds_(VRNIC_MAX_PD), cqs_(VRNIC_MAX_CQ), qps_(VRNIC_MAX_QP),
	  srqs_(VRNIC_MAX_SRQ), xrcds_(VRNIC_MAX_XRCD), mrs_(budget),
	  frame_(VRNIC_ETH_MAX_FRAME), scratch_(VRNIC_ETH_MAX_FRAME)
{
}

void Rdma::reset()
{
	// Generations survive a reset so that pre-reset handles stay stale.
	// Only the slots used since the last reset can differ from new ones.
	auto renew = []<typename T>(SlotTable<T> &tab, uint32_t n) {
		tab.each(n, [](T &o) {
			const auto gen = o.gen;
			o = T();
			o.gen = gen;
		});
	};
	renew(pds_, used_.pd);
	renew(cqs_, used_.cq);
	renew(qps_, used_.qp);
	renew(srqs_, used_.srq);
	renew(xrcds_, used_.xrcd);
	auto recount = []<typename T>(SlotTable<T> &tab, uint32_t n) {
		tab.recount(n, [](uint32_t i, const T &o) { return spent<T>(i, o.gen); });
	};
	recount(pds_, used_.pd);
	recount(cqs_, used_.cq);
	recount(qps_, used_.qp);
	recount(srqs_, used_.srq);
	recount(xrcds_, used_.xrcd);
	used_ = Used();
	next_ = Used();
	uctx_objs_ = {};
	xrc_head_ = kNoSlot;
	xrc_count_ = 0;
	active_.clear();
	timers_.clear();
	sched_cnt_ = SchedCounters();
	// The cache keeps its size; the driver gives its memory again.
	qpc_.clear();
	qpc_written_.clear();
	qpc_mem_ = RingMem();
	qpc_mem_set_ = false;
	qpc_entries_ = 0;
	qpc_debt_ns_ = 0;
	qpc_stall_until_ = 0;
	qpc_turn_owed_ = false;
	turn_ = 0;
	turn_again_ = in_pass_ = activated_ = false;
	mrs_.reset();
	gids_.reset();
	mcast_.clear();
	loopback_.clear();
	mcast_q_.clear();
	mcast_pos_ = 0;
	mcast_started_ = false;
	cnt_ = RdmaCounters();
}

bool RingMem::load(const Platform &plat, HostBudget &budget, uint64_t b,
		   uint8_t flags, uint64_t bytes, bool &nomem)
{
	base = b;
	pages.clear();
	if (flags & ~VRNIC_RING_PAGED)
		return false;
	if (!(flags & VRNIC_RING_PAGED))
		return aligned(b, VRNIC_RING_ALIGN) && b + bytes > b;
	const uint64_t n = (bytes + VRNIC_RING_PAGE_SIZE - 1) / VRNIC_RING_PAGE_SIZE;
	if (!charge.take(budget, n * sizeof(uint64_t))) {
		nomem = true;
		return false;
	}
	pages.resize(n);
	if (!aligned(b, 8) || !plat.dma_read(b, pages.data(), n * sizeof(uint64_t)))
		return false;
	for (auto &p : pages) {
		p = le(p);
		if (!aligned(p, VRNIC_RING_PAGE_SIZE))
			return false;
	}
	return true;
}

template <typename T>
T *Rdma::lookup(SlotTable<T> &tab, uint32_t h)
{
	const uint32_t idx = h & VRNIC_OBJ_INDEX_MASK;
	const uint32_t gen = h >> VRNIC_OBJ_INDEX_BITS;
	T *o = idx ? tab.find(idx) : nullptr;

	if (gen > gen_mask<T>() || !o || !o->valid || o->gen != gen)
		return nullptr;
	return o;
}

// A free slot for a new object, with its next generation (spec
// "Handles").  Slots are handed out round robin from `next` among the
// chunks made, so a freed slot waits until every other free one was used
// before its handle changes again.  Nothing in the device names a
// destroyed object's handles (destroy purges what did, held events
// included), so a spent slot may start its generations again; the events
// of the handle it starts at are dropped all the same.
template <typename T>
T *Rdma::alloc(SlotTable<T> &tab, uint32_t first, uint32_t &used_mark,
	       uint32_t &next, uint32_t &index, uint32_t limit)
{
	constexpr uint32_t kChunk = SlotTable<T>::kChunk;

	// Pass 0: a free slot of the chunks made, with a generation left.
	// Pass 1: a new chunk.  Pass 2 (every chunk made, or the budget
	// refused one): a spent slot starts its generations again.  The scan
	// steps over whole unmade chunks: tables are whole chunks.
	static_assert(VRNIC_MAX_PD % kChunk == 0);
	static_assert(VRNIC_MAX_CQ % kChunk == 0);
	static_assert(VRNIC_MAX_QP % kChunk == 0);
	static_assert(VRNIC_MAX_SRQ % kChunk == 0);
	static_assert(VRNIC_MAX_XRCD % kChunk == 0);
	limit = std::min(limit, tab.size());
	if (limit <= first)
		return nullptr;
	for (const int pass : {0, 1, 2}) {
		const uint32_t n = limit - first;
		for (uint32_t k = 0; k < n; k++) {
			const uint32_t i = first + (std::max(next, first) - first + k) % n;
			// Pass 0 passes over a chunk with nothing to give,
			// pass 2 one with no spent slot to renew.
			if (tab.has(i) != (pass != 1) ||
			    (pass == 0 && tab.chunk_full(i)) ||
			    (pass == 2 && tab.none_spent(i))) {
				// The rest of this chunk is the same: step over it
				// (it ends before the scan wraps at the limit, a
				// multiple of kChunk, or the table's end).
				k += kChunk - 1 - i % kChunk;
				continue;
			}
			T *slot = tab.make(i, budget_);
			if (!slot)
				break;	// no budget for a new chunk
			sched_cnt_.alloc_probes++;
			T &o = *slot;
			const bool renew = pass == 2;
			if (o.valid || spent<T>(i, o.gen) != renew)
				continue;
			mark(used_mark, i);
			next = i + 1;
			index = i;
			const uint32_t gen = renew ? 1 : o.gen + 1;
			o = T();
			o.valid = true;
			o.gen = decltype(o.gen)(gen);
			tab.taken(i);
			if (renew) {
				tab.renewed(i);
				forget_events<T>(handle<T>(i, gen));
			}
			return &o;
		}
	}
	return nullptr;
}

template <typename T> void Rdma::forget_events(uint32_t h)
{
	uint64_t types = 0;

	if constexpr (std::is_same_v<T, Qp>)
		types = 1ull << VRNIC_EQE_QP_FATAL | 1ull << VRNIC_EQE_QP_LAST_WQE |
			1ull << VRNIC_EQE_QP_SQ_DRAINED;
	else if constexpr (std::is_same_v<T, Cq>)
		types = 1ull << VRNIC_EQE_CQ | 1ull << VRNIC_EQE_CQ_ERROR;
	else if constexpr (std::is_same_v<T, Srq>)
		types = 1ull << VRNIC_EQE_SRQ_LIMIT;
	if (types)
		for (auto &eq : eqs_)
			eq.forget(types, h);
}

// A QP's context is looked up: through the cache when it is limited.
Qp *Rdma::find_qp(uint32_t qpn)
{
	Qp *qp = lookup(qps_, qpn);

	if (qp)
		qpc_access(*qp);
	return qp;
}
Cq *Rdma::find_cq(uint32_t cqn) { return lookup(cqs_, cqn); }
Srq *Rdma::find_srq(uint32_t srqn) { return lookup(srqs_, srqn); }

// A look from outside (tests, restrack): no cache access.
const Qp *Rdma::qp(uint32_t qpn) const
{
	auto *self = const_cast<Rdma *>(this);
	return self->lookup(self->qps_, qpn);
}

// ------------------------------------------------- QP-context cache

// A pass that waited for a stall goes on at once.
void Rdma::set_qpc(uint32_t entries, uint32_t miss_ns)
{
	if (qpc_stall_until_)
		plat_.schedule();
	qpc_.set_capacity(entries);
	qpc_written_.clear();
	qpc_miss_ns_ = miss_ns;
	qpc_debt_ns_ = 0;
	qpc_stall_until_ = 0;
	qpc_turn_owed_ = false;
}

namespace {

// FNV-1a of a context as written, never 0 (0: none written).
uint64_t qpc_hash(const vrnic_qpc &c)
{
	const auto *b = reinterpret_cast<const uint8_t *>(&c);
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < sizeof(c); i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h ? h : 1;
}

} // namespace

vrnic_qpc Rdma::qpc_record(const Qp &qp)
{
	vrnic_qpc c{};

	c.qpn = le(qp.qpn);
	c.type = qp.type;
	c.state = qp.attr.state;
	c.pdn = le(qp.pdn);
	c.send_cqn = le(qp.send_cqn);
	c.recv_cqn = le(qp.recv_cqn);
	c.srqn = le(qp.srqn);
	c.dest_qpn = qp.attr.dest_qpn;
	c.sq_head = le(qp.sq_head);
	c.next_psn = le(qp.next_psn);
	c.una_psn = le(qp.una_psn);
	c.epsn = le(qp.epsn);
	c.msn = le(qp.msn);
	c.rq_head = le(qp.rq_head);
	c.uctx = le(qp.uctx);
	c.dbrec = le(qp.dbrec);
	return c;
}

// Only with no QP: the contexts of live QPs are not moved.
uint8_t Rdma::set_qpc_mem(const vrnic_admin_set_qpc_mem &c)
{
	const uint32_t entries = le(c.entries);

	if (c.rsvd[0] || c.rsvd[1] || c.rsvd[2] || entries < kQpcMinEntries ||
	    entries > VRNIC_MAX_QP || (entries & (entries - 1)))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	if (qps_.live())
		return VRNIC_ADMIN_ST_BUSY;
	bool nomem = false;
	RingMem m;
	if (!m.load(plat_, budget_, le(c.base), c.flags,
		    uint64_t(entries) * VRNIC_QPC_SIZE, nomem))
		return nomem ? VRNIC_ADMIN_ST_NO_RESOURCE : VRNIC_ADMIN_ST_BAD_PARAM;
	qpc_mem_ = std::move(m);
	qpc_mem_set_ = true;
	qpc_entries_ = entries;
	qpc_.clear();
	qpc_written_.clear();
	return VRNIC_ADMIN_ST_OK;
}

// The slot's QP is gone: no entry, no write-back, nothing written.
void Rdma::qpc_forget(uint32_t slot)
{
	qpc_.forget(slot);
	if (slot < qpc_written_.size())
		qpc_written_[slot] = 0;
}

// A new QP's context goes to memory, as CREATE_QP does on an RNIC; its
// first use is a miss.
void Rdma::qpc_created(const Qp &qp)
{
	if (qpc_.limited())
		qpc_write(qp);
}

void Rdma::qpc_write(const Qp &qp)
{
	const uint32_t slot = handle_slot(qp.qpn);

	if (!qpc_mem_set_ || slot >= qpc_entries_)
		return;
	const vrnic_qpc c = qpc_record(qp);
	const uint64_t off = uint64_t(slot) * VRNIC_QPC_SIZE;
	if (slot >= qpc_written_.size())
		qpc_written_.resize(grown(slot, qpc_written_.size()), 0);
	if (!plat_.dma_write(qpc_mem_.addr(off), &c, sizeof(c))) {
		dcnt_.dma_errors++;
		qpc_written_[slot] = 0;
		return;
	}
	qpc_written_[slot] = qpc_hash(c);
}

// Every lookup of a live QP.  A miss writes the evicted context back and
// reads this one: the device's own copy stays what it acts on (the guest
// may have written that memory), and a context read back unlike the one
// written is counted, not trusted.  The miss's cost is owed to the pass.
void Rdma::qpc_access(Qp &qp)
{
	uint32_t evicted;

	if (!qpc_.limited() || qpc_.touch(handle_slot(qp.qpn), evicted)) {
		cnt_.qpc_cache_hits++;
		return;
	}
	cnt_.qpc_cache_misses++;
	// What the misses owe is bounded, and paid in stalls of at most
	// kQpcMaxStallNs with a QP's turn between them: a flood of misses
	// (from the wire, or another context's QPs) slows every QP, as on
	// an RNIC, and stops none.
	qpc_debt_ns_ = std::min<int64_t>(qpc_debt_ns_ + qpc_miss_ns_, kQpcMaxDebtNs);
	if (evicted != QpcCache::kNone) {
		cnt_.qpc_cache_evictions++;
		const Qp *o = qps_.find(evicted);
		if (o && o->valid)
			qpc_write(*o);
	}
	// No memory for it (none given, or a QP made past it while the cache
	// was unlimited): the miss costs its time, and nothing moves.
	const uint32_t slot = handle_slot(qp.qpn);
	if (!qpc_mem_set_ || slot >= qpc_entries_)
		return;
	vrnic_qpc c;
	const uint64_t off = uint64_t(slot) * VRNIC_QPC_SIZE;
	if (!plat_.dma_read(qpc_mem_.addr(off), &c, sizeof(c))) {
		dcnt_.dma_errors++;
		return;
	}
	// Against what was written last (none: a QP made while the cache
	// was unlimited, or a failed write): not the QP's state now, which
	// may have moved without a lookup (an error reaching every QP).
	if (slot < qpc_written_.size() && qpc_written_[slot] &&
	    qpc_hash(c) != qpc_written_[slot])
		sched_cnt_.qpc_ctx_mismatch++;
}

bool Rdma::uctx_in_use(uint32_t uctx) const
{
	return uctx < uctx_objs_.size() && uctx_objs_[uctx];
}

bool Rdma::admin(const vrnic_admin_cmd &cmd, uint8_t &status, uint32_t &result)
{
	switch (cmd.opcode) {
	case VRNIC_ADMIN_CREATE_PD:
		status = create_pd(cmd.create_pd, result);
		return true;
	case VRNIC_ADMIN_DESTROY_PD:
		status = destroy_pd(le(cmd.destroy.id));
		return true;
	case VRNIC_ADMIN_CREATE_MR: {
		Pd *pd = lookup(pds_, le(cmd.create_mr.pdn));
		status = pd ? mrs_.create(plat_, cmd.create_mr, pd->uctx == 0,
					  result) :
			      uint8_t(VRNIC_ADMIN_ST_BAD_PARAM);
		if (status == VRNIC_ADMIN_ST_DMA_ERROR)
			dcnt_.dma_errors++;
		if (status == VRNIC_ADMIN_ST_OK)
			pd->refs++;
		return true;
	}
	case VRNIC_ADMIN_DESTROY_MR:
	case VRNIC_ADMIN_DEALLOC_MW: {
		uint32_t pdn = 0;
		status = mrs_.destroy(le(cmd.destroy.id), cmd.opcode ==
				      VRNIC_ADMIN_DEALLOC_MW, pdn);
		if (status == VRNIC_ADMIN_ST_OK)
			pd_unref(pdn);
		return true;
	}
	case VRNIC_ADMIN_ALLOC_XRCD:
		status = alloc_xrcd(result);
		return true;
	case VRNIC_ADMIN_DEALLOC_XRCD:
		status = dealloc_xrcd(le(cmd.destroy.id));
		return true;
	case VRNIC_ADMIN_ALLOC_MW: {
		Pd *pd = lookup(pds_, le(cmd.alloc_mw.pdn));
		status = pd ? mrs_.alloc_mw(le(cmd.alloc_mw.pdn), cmd.alloc_mw.type,
					    result) :
			      uint8_t(VRNIC_ADMIN_ST_BAD_PARAM);
		if (status == VRNIC_ADMIN_ST_OK)
			pd->refs++;
		return true;
	}
	case VRNIC_ADMIN_CREATE_CQ:
		status = create_cq(cmd.create_cq, result);
		return true;
	case VRNIC_ADMIN_DESTROY_CQ:
		status = destroy_cq(le(cmd.destroy.id));
		return true;
	case VRNIC_ADMIN_CREATE_QP:
		status = create_qp(cmd.create_qp, result);
		return true;
	case VRNIC_ADMIN_MODIFY_QP:
		status = modify_qp(cmd.modify_qp);
		return true;
	case VRNIC_ADMIN_QUERY_QP:
		status = query_qp(cmd.query_qp);
		return true;
	case VRNIC_ADMIN_DESTROY_QP:
		status = destroy_qp(le(cmd.destroy.id));
		return true;
	case VRNIC_ADMIN_CREATE_SRQ:
		status = create_srq(cmd.create_srq, result);
		return true;
	case VRNIC_ADMIN_MODIFY_SRQ:
		status = modify_srq(cmd.modify_srq);
		return true;
	case VRNIC_ADMIN_DESTROY_SRQ:
		status = destroy_srq(le(cmd.destroy.id));
		return true;
	case VRNIC_ADMIN_ATTACH_MCAST:
	case VRNIC_ADMIN_DETACH_MCAST:
		status = mcast(cmd.mcast, cmd.opcode == VRNIC_ADMIN_ATTACH_MCAST);
		return true;
	case VRNIC_ADMIN_SET_GID:
		status = set_gid(cmd.set_gid);
		return true;
	default:
		return false;
	}
}

uint8_t Rdma::create_pd(const vrnic_admin_create_pd &c, uint32_t &result)
{
	const uint32_t uctx = le(c.uctx);

	if (uctx >= uctx_used_.size() || !uctx_used_[uctx])
		return VRNIC_ADMIN_ST_BAD_PARAM;
	uint32_t i = 0;
	Pd *pd = alloc(pds_, 1, used_.pd, next_.pd, i);
	if (!pd)
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	pd->uctx = uctx;
	uctx_objs_[uctx]++;
	result = handle<Pd>(i, pd->gen);
	return VRNIC_ADMIN_ST_OK;
}

// A user goes away.  A count that does not hold it is a bug in this
// accounting: counted (ref_mismatch), and the count stays at 0.
void Rdma::pd_unref(uint32_t pdn)
{
	if (Pd *pd = lookup(pds_, pdn); pd && pd->refs)
		pd->refs--;
	else
		sched_cnt_.ref_mismatch++;
}

void Rdma::xrcd_unref(uint32_t xrcdn)
{
	if (Xrcd *x = lookup(xrcds_, xrcdn); x && x->refs)
		x->refs--;
	else
		sched_cnt_.ref_mismatch++;
}

void Rdma::uctx_unref(uint32_t uctx)
{
	if (uctx < uctx_objs_.size() && uctx_objs_[uctx])
		uctx_objs_[uctx]--;
	else
		sched_cnt_.ref_mismatch++;
}

// An XRC target joins the list of them (at its head) or leaves it.
void Rdma::xrc_tgt_link(Qp &qp, uint32_t slot)
{
	qp.xrc_prev = kNoSlot;
	qp.xrc_next = xrc_head_;
	if (xrc_head_ != kNoSlot)
		qps_.find(xrc_head_)->xrc_prev = slot;
	xrc_head_ = slot;
	xrc_count_++;
}

void Rdma::xrc_tgt_unlink(const Qp &qp)
{
	if (qp.xrc_prev == kNoSlot)
		xrc_head_ = qp.xrc_next;
	else
		qps_.find(qp.xrc_prev)->xrc_next = qp.xrc_next;
	if (qp.xrc_next != kNoSlot)
		qps_.find(qp.xrc_next)->xrc_prev = qp.xrc_prev;
	xrc_count_--;
}

uint8_t Rdma::destroy_pd(uint32_t pdn)
{
	Pd *pd = lookup(pds_, pdn);

	if (!pd)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (pd->refs)
		return VRNIC_ADMIN_ST_BUSY;
	// XRC targets take their PD from the SRQ of each message, and keep
	// it in the READ and atomic results they may replay: those go with
	// the PD, so that no later PD with this slot can be named by them.
	// (An XRC SRQ keeps its PD in use, and DESTROY_SRQ clears a target's
	// pdn with its srqn: the pdn check is defence only.)
	each_xrc_tgt([pdn](Qp &q) {
		std::erase_if(q.resources, [pdn](const RdResource &r) { return r.pdn == pdn; });
		if (q.pdn == pdn)
			q.pdn = 0;
	});
	uctx_unref(pd->uctx);
	pd->valid = false;
	ended(pds_, handle_slot(pdn), pd->gen);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::create_cq(const vrnic_admin_create_cq &c, uint32_t &result)
{
	const uint32_t uctx = le(c.uctx);

	RingMem ring;
	bool nomem = false;

	if (uctx >= uctx_used_.size() || !uctx_used_[uctx] ||
	    !aligned(le(c.dbrec), 8) ||
	    c.log_depth < 1 || c.log_depth > VRNIC_MAX_CQ_LOG_DEPTH ||
	    c.eqn == 0 || c.eqn >= eqs_.size() || !eqs_[c.eqn].enabled() ||
	    !ring.load(plat_, budget_, le(c.base), c.ring_flags,
		       uint64_t(sizeof(vrnic_cqe)) << c.log_depth, nomem))
		return nomem ? VRNIC_ADMIN_ST_NO_RESOURCE : VRNIC_ADMIN_ST_BAD_PARAM;
	// What its held CQ and CQ_ERROR events may cost, charged now: an EQ
	// never needs the budget to hold them.
	Charge events;
	if (!events.take(budget_, 2 * EventQueue::kHeldBytes))
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	uint32_t i = 0;
	Cq *cq = alloc(cqs_, 1, used_.cq, next_.cq, i);
	if (!cq)
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	cq->events = std::move(events);
	cq->uctx = uctx;
	uctx_objs_[uctx]++;
	cq->ring = std::move(ring);
	cq->dbrec = le(c.dbrec);
	cq->log_depth = c.log_depth;
	cq->eqn = c.eqn;
	result = handle<Cq>(i, cq->gen);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::destroy_cq(uint32_t cqn)
{
	Cq *cq = find_cq(cqn);

	if (!cq)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (cq->refs)
		return VRNIC_ADMIN_ST_BUSY;
	uctx_unref(cq->uctx);
	cq->valid = false;
	ended(cqs_, handle_slot(cqn), cq->gen);
	cq->events = Charge();
	cq->ring = RingMem();	// its page list goes back to the budget
	forget_events<Cq>(cqn);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::create_qp(const vrnic_admin_create_qp &c, uint32_t &result)
{
	if (c.type == VRNIC_QPT_XRC_TGT)
		return create_xrc_tgt(c, result);
	const uint32_t uctx = le(c.uctx);
	Pd *pd = lookup(pds_, le(c.pdn));
	Cq *scq = find_cq(le(c.send_cqn));
	// An XRC_INI QP receives nothing: no RQ, no receive CQ.
	const bool ini = c.type == VRNIC_QPT_XRC_INI;
	Cq *rcq = ini ? scq : find_cq(le(c.recv_cqn));

	if (uctx >= uctx_used_.size() || !uctx_used_[uctx] || !pd ||
	    pd->uctx != uctx || !scq || scq->uctx != uctx || !rcq ||
	    rcq->uctx != uctx || c.type > VRNIC_QPT_XRC_INI ||
	    (ini && (le(c.srqn) || le(c.recv_cqn))) ||
	    (c.type == VRNIC_QPT_GSI && uctx != 0) ||
	    c.sq_log_depth > VRNIC_MAX_WQ_LOG_DEPTH ||
	    c.rq_log_depth > VRNIC_MAX_WQ_LOG_DEPTH ||
	    c.sq_wqe_shift < 6 || c.sq_wqe_shift > 10 ||
	    (1u << c.sq_wqe_shift) < vrnic_send_wqe_data_off(c.type) ||
	    c.rq_wqe_shift < 5 || c.rq_wqe_shift > 9 || !aligned(le(c.dbrec), 8))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	// A QP with an SRQ has no RQ of its own; the SRQ must share its PD's
	// owner (IBA allows another PD; the WQE's lkeys are checked against
	// the SRQ's PD).
	Srq *srq = nullptr;
	if (le(c.srqn)) {
		srq = find_srq(le(c.srqn));
		if (!srq || srq->uctx != uctx || c.type == VRNIC_QPT_GSI)
			return VRNIC_ADMIN_ST_BAD_PARAM;
	}
	RingMem sq, rq;
	bool nomem = false;
	if (!sq.load(plat_, budget_, le(c.sq_base), c.sq_flags,
		     uint64_t(1) << (c.sq_log_depth + c.sq_wqe_shift), nomem) ||
	    (!srq && !ini && !rq.load(plat_, budget_, le(c.rq_base), c.rq_flags,
			      uint64_t(1) << (c.rq_log_depth + c.rq_wqe_shift),
			      nomem)))
		return nomem ? VRNIC_ADMIN_ST_NO_RESOURCE : VRNIC_ADMIN_ST_BAD_PARAM;
	// RC, UC and XRC initiators also reserve their first WQE copies (a
	// QP never holds more copies than its SQ has slots).
	const uint64_t copies = c.type == VRNIC_QPT_UD || c.type == VRNIC_QPT_GSI
					? 0 : std::min(kReservedCopies, 1u << c.sq_log_depth) *
						      send_wqe_charge(c.sq_wqe_shift);
	Charge reserve;
	if (!reserve.take(budget_, kQpReserve + copies))
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	// The GSI QP is QP1, always: index 1, generation 0.  Others start at 2.
	const bool gsi = c.type == VRNIC_QPT_GSI;
	uint32_t i = VRNIC_GSI_QPN;
	Qp *slot = nullptr;
	if (!gsi) {
		slot = alloc(qps_, 2, used_.qp, next_.qp, i, qp_slots());
	} else if (Qp *q1 = qps_.make(i, budget_); q1 && !q1->valid) {
		mark(used_.qp, i);
		slot = q1;
		*slot = Qp();
		slot->valid = true;
		qps_.taken(i);
	}
	if (!slot)
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	{
		Qp &qp = *slot;
		qp.type = c.type;
		qp.qpn = handle<Qp>(i, qp.gen);
		qp.uctx = uctx;
		qp.pdn = le(c.pdn);
		qp.send_cqn = le(c.send_cqn);
		qp.recv_cqn = ini ? 0 : le(c.recv_cqn);
		qp.srqn = le(c.srqn);
		if (srq)
			srq->refs++;
		qp.sq = std::move(sq);
		qp.rq = std::move(rq);
		qp.reserve = std::move(reserve);
		qp.dbrec = le(c.dbrec);
		qp.sq_log = c.sq_log_depth;
		qp.rq_log = c.rq_log_depth;
		qp.sq_shift = c.sq_wqe_shift;
		qp.rq_shift = c.rq_wqe_shift;
		qp.attr.state = VRNIC_QPS_RESET;
		scq->refs++;
		if (!ini)
			rcq->refs++;
		pd->refs++;
		uctx_objs_[uctx]++;
		result = qp.qpn;
		qpc_created(qp);
	}
	return VRNIC_ADMIN_ST_OK;
}

// An XRC target: the kernel's, in a domain, with nothing of its own to
// send from or receive into.
uint8_t Rdma::create_xrc_tgt(const vrnic_admin_create_qp &c, uint32_t &result)
{
	Xrcd *x = lookup(xrcds_, le(c.xrcdn));

	if (le(c.uctx) != 0 || !x || le(c.srqn) || le(c.pdn) ||
	    le(c.send_cqn) || le(c.recv_cqn))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	Charge reserve;
	if (!reserve.take(budget_, kQpReserve))
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	uint32_t i = 0;
	Qp *qp = alloc(qps_, 2, used_.qp, next_.qp, i, qp_slots());
	if (!qp)
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	qp->type = VRNIC_QPT_XRC_TGT;
	qp->qpn = handle<Qp>(i, qp->gen);
	qp->xrcdn = le(c.xrcdn);
	xrc_tgt_link(*qp, i);
	x->refs++;
	uctx_objs_[0]++;
	qp->reserve = std::move(reserve);
	qp->attr.state = VRNIC_QPS_RESET;
	result = qp->qpn;
	qpc_created(*qp);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::alloc_xrcd(uint32_t &result)
{
	uint32_t i = 0;
	const Xrcd *x = alloc(xrcds_, 1, used_.xrcd, next_.xrcd, i);
	if (!x)
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	result = handle<Xrcd>(i, x->gen);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::dealloc_xrcd(uint32_t xrcdn)
{
	Xrcd *x = lookup(xrcds_, xrcdn);

	if (!x)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (x->refs)
		return VRNIC_ADMIN_ST_BUSY;
	x->valid = false;
	ended(xrcds_, handle_slot(xrcdn), x->gen);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::destroy_qp(uint32_t qpn)
{
	Qp *qp = find_qp(qpn);

	if (!qp)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	// An acknowledgement still owed to the peer leaves first, PFC or
	// not: the peer saw its completion's CQE already and would retry
	// into a QP that is gone.
	if (qp->ack_pending && qp->attr.state >= VRNIC_QPS_RTR &&
	    qp->attr.state != VRNIC_QPS_ERR)
		send_ack(*qp, qp->ack_syndrome, qp->ack_psn, true);
	if (qp->type != VRNIC_QPT_XRC_TGT) {
		if (Cq *cq = find_cq(qp->send_cqn))
			cq->refs--;
		if (Cq *cq = find_cq(qp->recv_cqn))
			cq->refs--;
		if (Srq *srq = find_srq(qp->srqn))
			srq->refs--;
		pd_unref(qp->pdn);
	} else {
		xrcd_unref(qp->xrcdn);
		xrc_tgt_unlink(*qp);
	}
	uctx_unref(qp->uctx);
	// A destroyed QP leaves its multicast groups.
	erase_mcast([qpn](const McastAttach &m) { return m.qpn == qpn; });
	sched_forget(handle_slot(qpn));
	qpc_forget(handle_slot(qpn));
	const uint16_t gen = qp->gen;
	*qp = Qp();
	qp->gen = gen;
	ended(qps_, handle_slot(qpn), gen);
	forget_events<Qp>(qpn);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::mcast(const vrnic_admin_mcast &c, bool attach)
{
	const uint32_t qpn = le(c.qpn);
	const Qp *qp = find_qp(qpn);
	McastAttach m;

	std::copy(std::begin(c.gid), std::end(c.gid), m.gid.begin());
	m.qpn = qpn;
	if (!qp || qp->type != VRNIC_QPT_UD || !roce::is_multicast(m.gid))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	const auto it = std::find_if(mcast_.begin(), mcast_.end(),
				     [&m](const McastAttach &a) {
					     return a.qpn == m.qpn && a.gid == m.gid;
				     });
	if (!attach) {
		if (it == mcast_.end())
			return VRNIC_ADMIN_ST_NOT_FOUND;
		erase_mcast([&m](const McastAttach &a) {
			return a.qpn == m.qpn && a.gid == m.gid;
		});
		return VRNIC_ADMIN_ST_OK;
	}
	if (it != mcast_.end())
		return VRNIC_ADMIN_ST_OK;	// attached already
	if (mcast_.size() >= VRNIC_MAX_MCAST_ATTACH)
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	mcast_.push_back(m);
	return VRNIC_ADMIN_ST_OK;
}

// A GID entry that is cleared or changed takes the connected QPs whose
// address vector names it to ERR: their source address is gone (spec).
uint8_t Rdma::set_gid(const vrnic_admin_set_gid &c)
{
	bool changed = false;
	const uint8_t st = gids_.set(c, changed);

	if (st != VRNIC_ADMIN_ST_OK || !changed)
		return st;
	qps_.each(used_.qp, [this, &c](Qp &qp) {
		if (qp.valid && !qp.datagram() && qp.attr.sgid_index == c.index &&
		    qp.attr.state >= VRNIC_QPS_RTR && qp.attr.state <= VRNIC_QPS_SQE)
			qp_error(qp);
	});
	return st;
}

uint8_t Rdma::create_srq(const vrnic_admin_create_srq &c, uint32_t &result)
{
	const uint32_t uctx = le(c.uctx);
	Pd *pd = lookup(pds_, le(c.pdn));
	const bool xrc = c.srq_type == VRNIC_SRQT_XRC;
	Cq *cq = xrc ? find_cq(le(c.cqn)) : nullptr;
	Xrcd *x = xrc ? lookup(xrcds_, le(c.xrcdn)) : nullptr;
	RingMem ring;
	bool nomem = false;

	if (c.srq_type > VRNIC_SRQT_XRC ||
	    (xrc && (!cq || cq->uctx != uctx || !x)) ||
	    (!xrc && (le(c.cqn) || le(c.xrcdn))))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	if (uctx >= uctx_used_.size() || !uctx_used_[uctx] || !pd ||
	    pd->uctx != uctx || c.log_depth > VRNIC_MAX_WQ_LOG_DEPTH ||
	    c.wqe_shift < 5 || c.wqe_shift > 9 || !aligned(le(c.dbrec), 8) ||
	    !ring.load(plat_, budget_, le(c.base), c.ring_flags,
		       uint64_t(1) << (c.log_depth + c.wqe_shift), nomem))
		return nomem ? VRNIC_ADMIN_ST_NO_RESOURCE : VRNIC_ADMIN_ST_BAD_PARAM;
	// What its held SRQ_LIMIT event may cost, charged now: an EQ never
	// needs the budget to hold it.
	Charge events;
	if (!events.take(budget_, EventQueue::kHeldBytes))
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	uint32_t i = 0;
	Srq *srq = alloc(srqs_, 1, used_.srq, next_.srq, i);
	if (!srq)
		return VRNIC_ADMIN_ST_NO_RESOURCE;
	srq->events = std::move(events);
	srq->uctx = uctx;
	srq->pdn = le(c.pdn);
	srq->ring = std::move(ring);
	srq->dbrec = le(c.dbrec);
	srq->log_depth = c.log_depth;
	srq->shift = c.wqe_shift;
	srq->srqn = handle<Srq>(i, srq->gen);
	srq->type = c.srq_type;
	if (xrc) {
		srq->cqn = le(c.cqn);
		srq->xrcdn = le(c.xrcdn);
		cq->refs++;
		x->refs++;
	}
	pd->refs++;
	uctx_objs_[uctx]++;
	result = srq->srqn;
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::modify_srq(const vrnic_admin_modify_srq &c)
{
	Srq *srq = find_srq(le(c.srqn));

	if (!srq)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (le(c.limit) > (1u << srq->log_depth))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	srq->limit = le(c.limit);
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::destroy_srq(uint32_t srqn)
{
	Srq *srq = find_srq(srqn);

	if (!srq)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (srq->refs)
		return VRNIC_ADMIN_ST_BUSY;
	// An XRC target in the middle of a message into this SRQ holds its
	// WQE, PD and CQ: the message goes with the SRQ (its next packet
	// finds no SRQ and is refused), so nothing outlives the handles.
	if (srq->type == VRNIC_SRQT_XRC) {
		each_xrc_tgt([srqn](Qp &q) {
			if (q.srqn != srqn)
				return;
			q.recv_active = false;
			q.recv = RecvWqe();
			q.srqn = 0;
			q.pdn = 0;
			q.recv_cqn = 0;
		});
		if (Cq *cq = find_cq(srq->cqn))
			cq->refs--;
		xrcd_unref(srq->xrcdn);
	}
	pd_unref(srq->pdn);
	uctx_unref(srq->uctx);
	srq->valid = false;
	ended(srqs_, handle_slot(srqn), srq->gen);
	srq->events = Charge();
	srq->ring = RingMem();	// its page list goes back to the budget
	forget_events<Srq>(srqn);
	return VRNIC_ADMIN_ST_OK;
}

namespace {

struct Transition {
	uint8_t from, to;
	uint32_t required, optional;
};

constexpr uint32_t kRtrReq = VRNIC_QP_ATTR_AV | VRNIC_QP_ATTR_PATH_MTU |
	VRNIC_QP_ATTR_DEST_QPN | VRNIC_QP_ATTR_RQ_PSN |
	VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC | VRNIC_QP_ATTR_MIN_RNR_TIMER;
constexpr uint32_t kRtsReq = VRNIC_QP_ATTR_SQ_PSN | VRNIC_QP_ATTR_TIMEOUT |
	VRNIC_QP_ATTR_RETRY_CNT | VRNIC_QP_ATTR_RNR_RETRY |
	VRNIC_QP_ATTR_MAX_RD_ATOMIC;
constexpr uint32_t kRtsOpt = VRNIC_QP_ATTR_ACCESS | VRNIC_QP_ATTR_MIN_RNR_TIMER;
constexpr uint32_t kSqdOpt = kRtsOpt | VRNIC_QP_ATTR_AV | VRNIC_QP_ATTR_TIMEOUT |
	VRNIC_QP_ATTR_RETRY_CNT | VRNIC_QP_ATTR_RNR_RETRY |
	VRNIC_QP_ATTR_MAX_RD_ATOMIC | VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC;

// The IB QP state machine (IBA 10.3.1) with the RC attributes; UC takes
// the same minus the reliability ones, UD only Q_Key and SQ PSN.
// What the peer agreed to is set before any packet is exchanged.
constexpr Transition kTransitions[] = {
	{VRNIC_QPS_RESET, VRNIC_QPS_INIT, 0,
	 VRNIC_QP_ATTR_ACCESS | VRNIC_QP_ATTR_TRANSPORT},
	{VRNIC_QPS_INIT, VRNIC_QPS_INIT, 0,
	 VRNIC_QP_ATTR_ACCESS | VRNIC_QP_ATTR_TRANSPORT},
	{VRNIC_QPS_INIT, VRNIC_QPS_RTR, kRtrReq,
	 VRNIC_QP_ATTR_ACCESS | VRNIC_QP_ATTR_TRANSPORT},
	{VRNIC_QPS_RTR, VRNIC_QPS_RTS, kRtsReq, kRtsOpt},
	{VRNIC_QPS_RTS, VRNIC_QPS_RTS, 0, kRtsOpt},
	{VRNIC_QPS_RTS, VRNIC_QPS_SQD, 0, VRNIC_QP_ATTR_SQD_NOTIFY},
	{VRNIC_QPS_SQD, VRNIC_QPS_SQD, 0, kSqdOpt},
	{VRNIC_QPS_SQD, VRNIC_QPS_RTS, 0, kRtsOpt},
	{VRNIC_QPS_SQE, VRNIC_QPS_RTS, 0, kRtsOpt},
};

constexpr uint32_t kRcOnly = VRNIC_QP_ATTR_TIMEOUT | VRNIC_QP_ATTR_RETRY_CNT |
	VRNIC_QP_ATTR_RNR_RETRY | VRNIC_QP_ATTR_MIN_RNR_TIMER |
	VRNIC_QP_ATTR_MAX_RD_ATOMIC | VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC |
	VRNIC_QP_ATTR_TRANSPORT;

// Required and allowed attributes of a transition for a QP type.
bool transition_attrs(uint8_t type, uint8_t from, uint8_t to,
		      uint32_t &required, uint32_t &allowed)
{
	const Transition *t = nullptr;

	for (const auto &tr : kTransitions)
		if (tr.from == from && tr.to == to)
			t = &tr;
	if (!t)
		return false;
	switch (type) {
	case VRNIC_QPT_RC:
		required = t->required;
		allowed = t->required | t->optional;
		break;
	case VRNIC_QPT_UC:
		required = t->required & ~kRcOnly;
		allowed = (t->required | t->optional) & ~kRcOnly;
		break;
	case VRNIC_QPT_XRC_INI:		// RC, less what only a responder uses
		required = t->required & ~(VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC |
					   VRNIC_QP_ATTR_MIN_RNR_TIMER);
		allowed = t->required | t->optional;
		break;
	case VRNIC_QPT_XRC_TGT:		// RC, less what only a requester uses
		required = t->required & ~(VRNIC_QP_ATTR_RETRY_CNT |
					   VRNIC_QP_ATTR_RNR_RETRY |
					   VRNIC_QP_ATTR_MAX_RD_ATOMIC);
		allowed = t->required | t->optional;
		break;
	default:	// UD, GSI
		required = from == VRNIC_QPS_RESET ? VRNIC_QP_ATTR_QKEY :
			   t->required & VRNIC_QP_ATTR_SQ_PSN;
		allowed = required | VRNIC_QP_ATTR_QKEY |
			  (t->optional & VRNIC_QP_ATTR_SQD_NOTIFY);
		break;
	}
	return true;
}

} // namespace

uint8_t Rdma::apply_attr(Qp &qp, const vrnic_qp_attr &a, uint32_t mask)
{
	const uint8_t cur = qp.attr.state;
	const uint8_t next = (mask & VRNIC_QP_ATTR_STATE) ? a.state : cur;
	const uint32_t attrs = mask & ~VRNIC_QP_ATTR_STATE;

	if (next > VRNIC_QPS_ERR)
		return VRNIC_ADMIN_ST_BAD_PARAM;
	if (next == VRNIC_QPS_RESET || next == VRNIC_QPS_ERR) {
		if (attrs)
			return VRNIC_ADMIN_ST_BAD_PARAM;
	} else {
		uint32_t required = 0, allowed = 0;
		if (!transition_attrs(qp.type, cur, next, required, allowed) ||
		    (attrs & required) != required || (attrs & ~allowed))
			return VRNIC_ADMIN_ST_BAD_PARAM;
	}
	// Values
	if (((attrs & VRNIC_QP_ATTR_PATH_MTU) &&
	     (a.path_mtu < 1 || a.path_mtu > 5)) ||
	    ((attrs & VRNIC_QP_ATTR_TIMEOUT) && a.timeout > 31) ||
	    ((attrs & VRNIC_QP_ATTR_RETRY_CNT) && a.retry_cnt > 7) ||
	    ((attrs & VRNIC_QP_ATTR_RNR_RETRY) && a.rnr_retry > 7) ||
	    ((attrs & VRNIC_QP_ATTR_MIN_RNR_TIMER) && a.min_rnr_timer > 31) ||
	    ((attrs & VRNIC_QP_ATTR_MAX_RD_ATOMIC) &&
	     a.max_rd_atomic > VRNIC_MAX_RD_ATOMIC) ||
	    ((attrs & VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC) &&
	     a.max_dest_rd_atomic > VRNIC_MAX_RD_ATOMIC) ||
	    ((attrs & VRNIC_QP_ATTR_SQ_PSN) && le(a.sq_psn) > roce::kPsnMask) ||
	    ((attrs & VRNIC_QP_ATTR_RQ_PSN) && le(a.rq_psn) > roce::kPsnMask) ||
	    ((attrs & VRNIC_QP_ATTR_DEST_QPN) && le(a.dest_qpn) > roce::kPsnMask) ||
	    ((attrs & VRNIC_QP_ATTR_SQD_NOTIFY) && a.sqd_notify > 1) ||
	    ((attrs & VRNIC_QP_ATTR_TRANSPORT) &&
	     ((le(a.transport_flags) & ~VRNIC_QP_TF_SELECTIVE_REPEAT) ||
	      le(a.send_window) > VRNIC_SEND_WINDOW_MAX ||
	      a.spray_paths > VRNIC_SPRAY_PATHS_MAX)) ||
	    ((attrs & VRNIC_QP_ATTR_ACCESS) &&
	     (le(a.access) & ~(VRNIC_ACCESS_REMOTE_WRITE | VRNIC_ACCESS_REMOTE_READ |
			       VRNIC_ACCESS_REMOTE_ATOMIC |
			       VRNIC_ACCESS_FLUSH_GLOBAL |
			       VRNIC_ACCESS_FLUSH_PERSISTENT))))
		return VRNIC_ADMIN_ST_BAD_PARAM;
	if (attrs & VRNIC_QP_ATTR_AV) {
		roce::Path p;
		std::memcpy(p.dgid.data(), a.dgid, 16);
		// Source GID and MAC from the GID table entry, of dgid's family;
		// the bytes that held them before spec 0.6 stay reserved (0).
		if (!gids_.source(a.sgid_index, p) || !all_zero(a.rsvd_av) || !all_zero(a.rsvd_smac))
			return VRNIC_ADMIN_ST_BAD_PARAM;
		std::memcpy(p.dmac.data(), a.dmac, 6);
		p.traffic_class = roce::no_ce(a.traffic_class);
		p.hop_limit = a.hop_limit ? a.hop_limit : 64;
		p.flow_label = le(a.flow_label) & 0xfffff;
		p.udp_sport = le(a.udp_sport) ? le(a.udp_sport) : 0xc000;
		qp.path = p;
		qp.cc_dirty = true;	// ECT and the algorithm follow the class
		std::memcpy(qp.attr.dgid, a.dgid, 16);
		qp.attr.sgid_index = a.sgid_index;
		std::memcpy(qp.attr.dmac, a.dmac, 6);
		qp.attr.traffic_class = a.traffic_class;
		qp.attr.hop_limit = a.hop_limit;
		qp.attr.flow_label = a.flow_label;
		qp.attr.udp_sport = a.udp_sport;
	}
	if (attrs & VRNIC_QP_ATTR_ACCESS) qp.attr.access = a.access;
	if (attrs & VRNIC_QP_ATTR_PATH_MTU) {
		qp.attr.path_mtu = a.path_mtu;
		qp.mtu = 128u << a.path_mtu;
	}
	if (attrs & VRNIC_QP_ATTR_TIMEOUT) qp.attr.timeout = a.timeout;
	if (attrs & VRNIC_QP_ATTR_RETRY_CNT) qp.attr.retry_cnt = a.retry_cnt;
	if (attrs & VRNIC_QP_ATTR_RNR_RETRY) qp.attr.rnr_retry = a.rnr_retry;
	if (attrs & VRNIC_QP_ATTR_MIN_RNR_TIMER)
		qp.attr.min_rnr_timer = a.min_rnr_timer;
	if (attrs & VRNIC_QP_ATTR_MAX_RD_ATOMIC)
		qp.attr.max_rd_atomic = a.max_rd_atomic;
	if (attrs & VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC)
		qp.attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
	if (attrs & VRNIC_QP_ATTR_DEST_QPN) qp.attr.dest_qpn = a.dest_qpn;
	if (attrs & VRNIC_QP_ATTR_QKEY) qp.attr.qkey = a.qkey;
	if (attrs & VRNIC_QP_ATTR_TRANSPORT) {
		qp.attr.transport_flags = a.transport_flags;
		qp.attr.send_window = a.send_window;
		qp.attr.spray_paths = a.spray_paths;
	}
	if (attrs & VRNIC_QP_ATTR_RQ_PSN) {
		qp.attr.rq_psn = a.rq_psn;
		qp.epsn = le(a.rq_psn);
	}
	if (attrs & VRNIC_QP_ATTR_SQ_PSN) {
		qp.attr.sq_psn = a.sq_psn;
		qp.next_psn = qp.una_psn = le(a.sq_psn);
	}

	if (next == VRNIC_QPS_RESET && cur != VRNIC_QPS_RESET) {
		// Back to a fresh QP with the same number and rings.
		Qp fresh;
		fresh.valid = true;
		fresh.gen = qp.gen;
		fresh.type = qp.type;
		fresh.qpn = qp.qpn;
		fresh.uctx = qp.uctx;
		fresh.pdn = qp.pdn;
		fresh.send_cqn = qp.send_cqn;
		fresh.recv_cqn = qp.recv_cqn;
		fresh.srqn = qp.srqn;
		fresh.sq = std::move(qp.sq);
		fresh.rq = std::move(qp.rq);
		fresh.reserve = std::move(qp.reserve);
		fresh.dbrec = qp.dbrec;
		fresh.sq_log = qp.sq_log;
		fresh.rq_log = qp.rq_log;
		fresh.sq_shift = qp.sq_shift;
		fresh.rq_shift = qp.rq_shift;
		fresh.xrcdn = qp.xrcdn;
		fresh.xrc_prev = qp.xrc_prev;
		fresh.xrc_next = qp.xrc_next;
		if (qp.type == VRNIC_QPT_XRC_TGT)
			fresh.srqn = fresh.pdn = fresh.recv_cqn = 0;	// per request
		qp = std::move(fresh);
		qp.attr.state = VRNIC_QPS_RESET;
		return VRNIC_ADMIN_ST_OK;
	}
	if (next == VRNIC_QPS_RTS && cur == VRNIC_QPS_RTR) {
		qp.retry_left = qp.attr.retry_cnt;
		qp.rnr_left = qp.attr.rnr_retry;
	}
	// Into SQD: the requests rung before it are the consumer's, posted
	// first, even if no poll has fetched them yet; SQD drains them.  A
	// producer index that cannot be read or lies past the ring promises
	// nothing (RTS's next fetch finds the error).
	if (next == VRNIC_QPS_SQD && cur == VRNIC_QPS_RTS) {
		uint32_t pi = 0;
		qp.sqd_pi = qp.sq_head;
		if (qp.sq_kick && qp.type != VRNIC_QPT_XRC_TGT && !qp.datagram() &&
		    peek_sq_producer(qp, pi) == SqPi::Ok)
			qp.sqd_pi = pi;
	}
	qp.attr.state = next;
	// SQD: the event, if asked for, when the last request begun completes
	// (now, if none is outstanding); leaving SQD forgets it.
	qp.sqd_notify = next == VRNIC_QPS_SQD &&
			(cur == VRNIC_QPS_SQD ? qp.sqd_notify :
			 (attrs & VRNIC_QP_ATTR_SQD_NOTIFY) && a.sqd_notify);
	sqd_check(qp);
	// The consumer's own move to ERR flushes, but is no error event.
	if (next == VRNIC_QPS_ERR && cur != VRNIC_QPS_ERR)
		qp_error(qp, false);
	if (next == VRNIC_QPS_RTS)
		qp.sq_kick = true;
	// Back from SQE: the hole timer did nothing while the QP could not
	// send, so the holes a SACK showed (a spraying QP's still in their
	// reordering window then) are looked at again now.  (In SQD it
	// resends; looking again costs nothing.)
	if (next == VRNIC_QPS_RTS && cur != VRNIC_QPS_RTR && qp.sr_st)
		sr_hole_timer(qp);
	activate(qp);
	plat_.schedule();
	return VRNIC_ADMIN_ST_OK;
}

uint8_t Rdma::modify_qp(const vrnic_admin_modify_qp &c)
{
	Qp *qp = find_qp(le(c.qpn));
	vrnic_qp_attr a;

	if (!qp)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	if (!plat_.read(le(c.attr_addr), a)) {
		dcnt_.dma_errors++;
		return VRNIC_ADMIN_ST_DMA_ERROR;
	}
	return apply_attr(*qp, a, le(c.attr_mask));
}

uint8_t Rdma::query_qp(const vrnic_admin_query_qp &c)
{
	Qp *qp = find_qp(le(c.qpn));

	if (!qp)
		return VRNIC_ADMIN_ST_NOT_FOUND;
	vrnic_qp_attr a = qp->attr;
	a.sq_psn = le(qp->next_psn);
	a.rq_psn = le(qp->epsn);
	a.cc_rate_mbps = le(qp->cc_rate_mbps);
	a.sqd_notify = qp->sqd_notify;
	a.sq_draining = qp->attr.state == VRNIC_QPS_SQD && !qp->sq_drained();
	if (!plat_.write(le(c.out_addr), a)) {
		dcnt_.dma_errors++;
		return VRNIC_ADMIN_ST_DMA_ERROR;
	}
	return VRNIC_ADMIN_ST_OK;
}

// ------------------------------------------------------------ doorbells

bool Rdma::doorbell(uint32_t page, uint32_t off, uint32_t v)
{
	if (off == VRNIC_DB_SQ || off == VRNIC_DB_RQ) {
		// Its owner's only: another context's QPN touches nothing,
		// not even the QP-context cache.
		Qp *qp = lookup(qps_, v);
		if (!qp || qp->uctx != page)
			return false;
		qpc_access(*qp);
		if (off == VRNIC_DB_SQ)
			qp->sq_kick = true;
		else if (qp->attr.state == VRNIC_QPS_ERR)
			qp->flush_pending = true;
		activate(*qp);
		plat_.schedule();
		return true;
	}
	if (off == VRNIC_DB_CQ_ARM) {
		Cq *cq = find_cq(VRNIC_FIELD_GET(VRNIC_CQ_ARM_CQN, v));
		const uint32_t cmd = VRNIC_FIELD_GET(VRNIC_CQ_ARM_CMD, v);
		if (!cq || cq->uctx != page || cmd == 0 || cmd == 3)
			return false;
		if (cq->error)
			return true;
		// The arm is posted: completions may have reached the CQ after
		// the consumer last polled and before the arm got here.  Those
		// it has not taken (its doorbell record says how far it got)
		// fire the event now, or it would wait for ever.
		vrnic_cq_dbrec rec{};
		if (!plat_.read(cq->dbrec, rec)) {
			dcnt_.dma_errors++;
		} else if (const uint32_t ci = le(rec.ci);
			   cq->pi - ci <= (1u << cq->log_depth)) {
			cq->ci = ci;
			const uint32_t waiting = cq->pi - ci;
			// A solicited completion already polled counts no more
			// (nor, 2^32 completions later, by wrapping).
			if (cq->sol_any && cq->sol_pi - ci - 1 >= waiting)
				cq->sol_any = false;
			if (waiting && (cmd == VRNIC_CQ_ARM_NEXT ||
					(cq->sol_any && cq->sol_pi - ci - 1 < waiting))) {
				cq->arm = 0;
				eqs_[cq->eqn].post(plat_, dcnt_, VRNIC_EQE_CQ,
						  VRNIC_FIELD_GET(VRNIC_CQ_ARM_CQN, v));
				return true;
			}
		}
		// NEXT subsumes SOLICITED until the next event.
		if (cq->arm != VRNIC_CQ_ARM_NEXT)
			cq->arm = uint8_t(cmd);
		return true;
	}
	return false;
}

// ---------------------------------------------------- completion queues

bool Rdma::cq_post(uint32_t cqn, vrnic_cqe cqe, bool solicited)
{
	Cq *cq = find_cq(cqn);

	if (!cq || cq->error)
		return false;
	const uint32_t depth = 1u << cq->log_depth;
	if (cq->pi - cq->ci >= depth) {
		vrnic_cq_dbrec rec{};
		if (!plat_.read(cq->dbrec, rec)) {
			dcnt_.dma_errors++;
			return false;
		}
		const uint32_t ci = le(rec.ci);
		if (cq->pi - ci <= depth)	// a sane consumer index
			cq->ci = ci;
		if (cq->pi - cq->ci >= depth) {
			cq->error = true;
			cnt_.cq_overflows++;
			eqs_[0].post(plat_, dcnt_, VRNIC_EQE_CQ_ERROR, cqn);
			return false;
		}
	}
	cqe.owner = ((cq->pi >> cq->log_depth) & 1) ? 0 : VRNIC_CQE_OWNER;
	const uint64_t addr = cq->ring.addr(uint64_t(cq->pi & (depth - 1)) *
					    sizeof(vrnic_cqe));
	// The owner byte lives in the last dword.
	if (!plat_.write_entry(addr, cqe, sizeof(cqe) - 4)) {
		dcnt_.dma_errors++;
		return false;
	}
	cq->pi++;
	if (solicited || cqe.status != VRNIC_WC_ST_SUCCESS) {
		cq->sol_pi = cq->pi;
		cq->sol_any = true;
	}
	if (cq->arm == VRNIC_CQ_ARM_NEXT ||
	    (cq->arm == VRNIC_CQ_ARM_SOLICITED &&
	     (solicited || cqe.status != VRNIC_WC_ST_SUCCESS))) {
		cq->arm = 0;
		eqs_[cq->eqn].post(plat_, dcnt_, VRNIC_EQE_CQ, cqn);
	}
	return true;
}

void Rdma::complete_send(Qp &qp, const SendWqe &w, uint8_t status)
{
	static constexpr uint8_t kWcOp[] = {
		VRNIC_WC_SEND, VRNIC_WC_SEND, VRNIC_WC_RDMA_WRITE,
		VRNIC_WC_RDMA_WRITE, VRNIC_WC_RDMA_READ, VRNIC_WC_CMP_SWP,
		VRNIC_WC_FETCH_ADD, VRNIC_WC_SEND, VRNIC_WC_LOCAL_INV,
		VRNIC_WC_REG_MR, VRNIC_WC_ATOMIC_WRITE, VRNIC_WC_FLUSH,
		VRNIC_WC_BIND_MW,
	};
	if (status == VRNIC_WC_ST_SUCCESS && !(w.flags & VRNIC_WQE_SIGNALED))
		return;
	vrnic_cqe cqe{};
	cqe.wr_id = le(w.wr_id);
	cqe.qpn = le(qp.qpn);
	cqe.wqe_idx = le(w.index);
	cqe.opcode = w.opcode < sizeof(kWcOp) ? kWcOp[w.opcode] : uint8_t(VRNIC_WC_SEND);
	cqe.status = status;
	cqe.byte_len = le(w.opcode == VRNIC_WR_RDMA_READ ||
			  w.opcode == VRNIC_WR_ATOMIC_CMP_SWP ||
			  w.opcode == VRNIC_WR_ATOMIC_FETCH_ADD ? w.length : 0u);
	cq_post(qp.send_cqn, cqe, false);
}

void Rdma::complete_recv(Qp &qp, uint8_t status, uint8_t opcode, uint32_t len,
			 uint32_t imm, uint8_t flags, bool solicited,
			 int64_t src_qp)
{
	vrnic_cqe cqe{};

	cqe.wr_id = le(qp.recv.wr_id);
	cqe.qpn = le(qp.qpn);
	cqe.wqe_idx = le(qp.recv.index);
	cqe.src_qp = src_qp < 0 ? qp.attr.dest_qpn : le(uint32_t(src_qp));
	cqe.opcode = opcode;
	cqe.status = status;
	cqe.byte_len = le(len);
	cqe.imm_data = imm;
	cqe.wc_flags = flags;
	qp.recv_active = false;
	qp.recv_off = 0;
	cq_post(qp.recv_cqn, cqe, solicited);
}

// State only: the QP's containers stay as they are (callers may hold
// references into them) until flush() runs from poll().
void Rdma::qp_error(Qp &qp, bool event)
{
	qp.attr.state = VRNIC_QPS_ERR;
	qp.ack_deadline = qp.rnr_deadline = 0;
	qp.flush_pending = true;
	if (event)
		eqs_[0].post(plat_, dcnt_, VRNIC_EQE_QP_FATAL, qp.qpn);
	activate(qp);
	plat_.schedule();
}

// Complete everything outstanding with WR_FLUSH_ERR, bounded per call.
// Called from the top of poll() only: it releases the QP's containers.
void Rdma::flush(Qp &qp, unsigned int &budget)
{
	vrnic_qp_dbrec rec{};

	qp.resources.clear();	// a QP in ERR answers nothing any more
	qp.sr_st.reset();	// nor holds or resends anything
	qp.sack_pending = false;
	if (qp.type == VRNIC_QPT_XRC_TGT) {
		// No queues of its own: only a receive in progress, on the
		// SRQ it came from.
		if (qp.recv_active)
			complete_recv(qp, VRNIC_WC_ST_WR_FLUSH_ERR, VRNIC_WC_RECV, 0);
		qp.flush_pending = false;
		return;
	}
	while (!qp.inflight.empty() && budget > 0) {
		SendWqe &w = qp.inflight.front();
		complete_send(qp, w, w.status != VRNIC_WC_ST_SUCCESS ?
				     w.status : uint8_t(VRNIC_WC_ST_WR_FLUSH_ERR));
		qp.inflight.pop_front();
		budget--;
	}
	qp.send_idx = 0;
	qp.send_off = 0;
	if (!plat_.read(qp.dbrec, rec)) {
		dcnt_.dma_errors++;
		qp.flush_pending = false;
		return;
	}
	const uint32_t sq_pi = le(rec.sq_pi), rq_pi = le(rec.rq_pi);
	// Posted but never fetched: their wr_id is all a flush needs.
	while (qp.sq_head != sq_pi && budget > 0 &&
	       sq_pi - qp.sq_head <= (1u << qp.sq_log)) {
		vrnic_send_wqe hdr;
		const uint64_t a = qp.sq.addr(
			uint64_t(qp.sq_head & ((1u << qp.sq_log) - 1)) << qp.sq_shift);
		if (!plat_.read(a, hdr))
			break;
		SendWqe w;
		w.index = qp.sq_head;
		w.wr_id = le(hdr.wr_id);
		w.opcode = hdr.opcode;
		w.flags = VRNIC_WQE_SIGNALED;
		complete_send(qp, w, VRNIC_WC_ST_WR_FLUSH_ERR);
		qp.sq_head++;
		budget--;
	}
	if (qp.recv_active) {
		complete_recv(qp, VRNIC_WC_ST_WR_FLUSH_ERR, VRNIC_WC_RECV, 0);
		budget = budget ? budget - 1 : 0;
	}
	// An SRQ QP takes no more WQEs from its SRQ and the one it held is
	// flushed: IBA's Last WQE Reached, once per entry into ERR.
	if (qp.srqn && !qp.last_wqe_posted) {
		qp.last_wqe_posted = true;
		eqs_[0].post(plat_, dcnt_, VRNIC_EQE_QP_LAST_WQE, qp.qpn);
	}
	while (!qp.srqn && qp.type != VRNIC_QPT_XRC_INI &&
	       qp.rq_head != rq_pi && budget > 0 &&
	       rq_pi - qp.rq_head <= (1u << qp.rq_log)) {
		vrnic_recv_wqe hdr;
		const uint64_t a = qp.rq.addr(
			uint64_t(qp.rq_head & ((1u << qp.rq_log) - 1)) << qp.rq_shift);
		if (!plat_.read(a, hdr))
			break;
		qp.recv.wr_id = le(hdr.wr_id);
		qp.recv.index = qp.rq_head;
		complete_recv(qp, VRNIC_WC_ST_WR_FLUSH_ERR, VRNIC_WC_RECV, 0);
		qp.rq_head++;
		budget--;
	}
	qp.flush_pending = budget == 0;
}

} // namespace vrnic

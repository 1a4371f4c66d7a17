// SPDX-License-Identifier: GPL-2.0-or-later
// The QP-context cache model (issue 29): its LRU accounting; with a cache
// smaller than the QPs in use, every QP's data still arrives whole, each
// miss reads the context back from the memory the driver gave and each
// eviction writes it there (the context read back is the one written); a
// context the guest overwrote is counted, never trusted; the misses'
// modelled cost is paid in time the device does not send; unlimited (the
// default) changes nothing.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>

#include "engine_internal.hpp"
#include "qpc_cache.hpp"
#include "rdma_node.hpp"

namespace {

using vrnic::QpcCache;
using vrnic::Rdma;

Rdma &rdma(Node &n) { return n.p.eng->dev.rdma_for_test(); }
const Rdma &rdma_of(FakePlatform &p) { return p.eng->dev.rdma(); }

vrnic_device_attr query_device(FakePlatform &p)
{
	return p.query<vrnic_device_attr>(VRNIC_ADMIN_QUERY_DEVICE);
}

// A cache of 3: hits move a slot to the front, a miss evicts the least
// recently used, forget() leaves no entry and no write-back.
TEST(QpcCache, LruOrderHitsMissesEvictions)
{
	QpcCache c;
	uint32_t ev;

	EXPECT_FALSE(c.limited());
	c.set_capacity(3);
	EXPECT_FALSE(c.touch(10, ev));
	EXPECT_EQ(ev, QpcCache::kNone);
	EXPECT_FALSE(c.touch(11, ev));
	EXPECT_FALSE(c.touch(12, ev));
	EXPECT_EQ(c.size(), 3u);
	EXPECT_TRUE(c.touch(10, ev));		// 10 most recent: 11 is least
	EXPECT_FALSE(c.touch(13, ev));
	EXPECT_EQ(ev, 11u);
	EXPECT_FALSE(c.cached(11));
	EXPECT_TRUE(c.cached(10) && c.cached(12) && c.cached(13));
	c.forget(12);
	EXPECT_EQ(c.size(), 2u);
	EXPECT_FALSE(c.touch(14, ev));		// room again: no eviction
	EXPECT_EQ(ev, QpcCache::kNone);
	EXPECT_FALSE(c.touch(60000, ev));	// the links grow with the slot
	EXPECT_EQ(ev, 10u);
	c.forget(60000);
	c.forget(60000);			// twice: nothing
	EXPECT_EQ(c.size(), 2u);
	c.clear();
	EXPECT_EQ(c.size(), 0u);
	EXPECT_FALSE(c.touch(13, ev));
	EXPECT_EQ(ev, QpcCache::kNone);
}

// A reference LRU against the cache, for a long random sequence.
TEST(QpcCache, MatchesAReferenceLru)
{
	QpcCache c;
	c.set_capacity(8);
	std::vector<uint32_t> ref;	// most recent first
	uint32_t x = 12345;
	for (int i = 0; i < 20000; i++) {
		x = x * 1103515245u + 12345u;
		const uint32_t s = (x >> 16) % 24;
		uint32_t ev;
		const bool hit = c.touch(s, ev);
		const auto it = std::find(ref.begin(), ref.end(), s);
		ASSERT_EQ(hit, it != ref.end()) << i;
		uint32_t want = QpcCache::kNone;
		if (it != ref.end()) {
			ref.erase(it);
		} else if (ref.size() == 8) {
			want = ref.back();
			ref.pop_back();
		}
		ref.insert(ref.begin(), s);
		ASSERT_EQ(ev, want) << i;
		if (i % 97 == 0) {
			c.forget(ref.back());
			ref.pop_back();
		}
	}
}

// Both nodes on an ideal wire; the clock jumps to the earliest timer
// when nothing moves.
bool run(Node &a, Node &b, const std::function<bool()> &done)
{
	Wire w;
	return w.run(a, b, done, 2000000);
}

unsigned drain(Node &n, std::map<uint32_t, unsigned> &per_qp)
{
	unsigned got = 0;
	vrnic_cqe c;
	while (n.poll_cq(c)) {
		EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
		per_qp[c.qpn]++;
		got++;
	}
	return got;
}

// One WRITE on each of the two pairs through a cache of 1: which of a's
// two QPs is out of the cache afterwards (2 if that went wrong).
uint32_t one_evicted(Node &a, Node &b, Pairs &pr, std::map<uint32_t, unsigned> &per_qp,
		     unsigned &total)
{
	pr.write(0, 0, 0x800000, 4096, 1);
	pr.write(1, 4096, 0x801000, 4096, 2);
	if (!run(a, b, [&] { total += drain(a, per_qp); return total == 2; }))
		return 2;
	const uint32_t out = rdma(a).qpc().cached(vrnic::handle_slot(pr.qa[0])) ? 1 : 0;
	return rdma(a).qpc().cached(vrnic::handle_slot(pr.qa[out])) ? 2 : out;
}

// 6 QPs in rotation through a cache of 2: misses and evictions on every
// turn, data whole on every QP, each context read back as written.
TEST(QpcCacheEngine, RotatingQpsThroughASmallCache)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 0, 2, 1000}, b{2};
	Pairs pr(a, b, 6);
	const auto &cnt = rdma(a).counters();
	const auto &sc = rdma(a).sched_counters();
	const uint64_t miss0 = cnt.qpc_cache_misses;

	constexpr unsigned kRounds = 8;
	constexpr uint32_t kLen = 8192;
	unsigned total = 0;
	std::map<uint32_t, unsigned> per_qp;
	for (unsigned r = 0; r < kRounds; r++)
		for (unsigned i = 0; i < 6; i++) {
			const uint64_t off = (uint64_t(r) * 6 + i) * kLen;
			pr.write(i, off, 0x800000 + off, kLen, r * 6 + i);
		}
	ASSERT_TRUE(run(a, b, [&] {
		total += drain(a, per_qp);
		return total == kRounds * 6;
	}));
	for (uint32_t q : pr.qa)
		EXPECT_EQ(per_qp[q], kRounds);
	EXPECT_EQ(std::memcmp(b.data(0x800000), a.data(0), kRounds * 6 * kLen), 0);
	EXPECT_GT(cnt.qpc_cache_misses - miss0, 6u * 2);
	EXPECT_GT(cnt.qpc_cache_evictions, 6u);
	EXPECT_GT(cnt.qpc_cache_hits, 0u);
	EXPECT_EQ(sc.qpc_ctx_mismatch, 0u);
	EXPECT_LE(rdma(a).qpc().size(), 2u);
	// The contexts of the QPs out of the cache are in the guest's memory
	// as the device last had them.
	unsigned checked = 0;
	for (uint32_t q : pr.qa) {
		if (rdma(a).qpc().cached(vrnic::handle_slot(q)))
			continue;
		const auto mem = a.p.load<vrnic_qpc>(Node::kQpcMem +
						      vrnic::handle_slot(q) * VRNIC_QPC_SIZE);
		const vrnic_qpc want = Rdma::qpc_record(*rdma(a).qp(q));
		EXPECT_EQ(std::memcmp(&mem, &want, sizeof(mem)), 0) << q;
		EXPECT_EQ(mem.qpn, q);
		EXPECT_EQ(mem.state, VRNIC_QPS_RTS);
		checked++;
	}
	EXPECT_GE(checked, 4u);
	// b's cache is unlimited: every access a hit, no miss.
	EXPECT_EQ(rdma(b).counters().qpc_cache_misses, 0u);
	EXPECT_GT(rdma(b).counters().qpc_cache_hits, 0u);
	EXPECT_FALSE(rdma(b).qpc().limited());
}

// The guest overwrites an evicted context: the next miss reads it, counts
// it, and the QP goes on from the device's own copy.
TEST(QpcCacheEngine, AContextTheGuestOverwroteIsNotTrusted)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 0, 1, 1000}, b{2};
	Pairs pr(a, b, 2);
	const auto &sc = rdma(a).sched_counters();
	std::map<uint32_t, unsigned> per_qp;
	unsigned total = 0;
	// One of the two is out of the cache now; scribble over its context.
	const uint32_t out = one_evicted(a, b, pr, per_qp, total);
	ASSERT_LT(out, 2u);
	std::memset(a.p.ptr(Node::kQpcMem + vrnic::handle_slot(pr.qa[out]) * VRNIC_QPC_SIZE),
		    0xa5, VRNIC_QPC_SIZE);
	const uint64_t bad = sc.qpc_ctx_mismatch;
	pr.write(out, 0x2000, 0x802000, 4096, 3);
	ASSERT_TRUE(run(a, b, [&] { total += drain(a, per_qp); return total == 3; }));
	EXPECT_EQ(sc.qpc_ctx_mismatch, bad + 1);
	EXPECT_EQ(rdma(a).qp(pr.qa[out])->attr.state, VRNIC_QPS_RTS);
	EXPECT_EQ(std::memcmp(b.data(0x800000), a.data(0), 3 * 4096), 0);
}

// The misses cost time: with 10 µs a miss, 2 QPs alternating through a
// cache of 1 make the device wait, and what it waited is what the misses
// cost (less what is still owed, at most the slack).  At 1 ms a miss no
// stall is longer than kQpcMaxStallNs, and the traffic still completes
// (a QP's turn between two stalls).  Unlimited, the same traffic takes no
// time at all on this wire.
TEST(QpcCacheEngine, MissesArePaidInTime)
{
	struct Case {
		uint32_t cache, miss;
	};
	for (const Case k : {Case{1, 10000}, Case{1, 1000000}, Case{0, 10000}}) {
		Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 0, k.cache, k.miss}, b{2};
		Pairs pr(a, b, 2);
		const auto &cnt = rdma(a).counters();
		const auto &sc = rdma(a).sched_counters();
		const uint64_t miss0 = cnt.qpc_cache_misses, t0 = a.p.now;
		std::map<uint32_t, unsigned> per_qp;
		unsigned total = 0;
		for (unsigned r = 0; r < 16; r++)
			for (unsigned i = 0; i < 2; i++)
				pr.write(i, (r * 2 + i) * 4096ull, 0x800000 + (r * 2 + i) * 4096ull,
					 4096, r * 2 + i);
		ASSERT_TRUE(run(a, b, [&] { total += drain(a, per_qp); return total == 32; }));
		EXPECT_EQ(std::memcmp(b.data(0x800000), a.data(0), 32 * 4096), 0);
		const uint64_t misses = cnt.qpc_cache_misses - miss0;
		if (!k.cache) {
			EXPECT_EQ(misses, 0u);
			EXPECT_EQ(sc.qpc_stalls, 0u);
			EXPECT_EQ(a.p.now, t0);
			continue;
		}
		EXPECT_GE(misses, 16u);
		EXPECT_GT(sc.qpc_stalls, 0u);
		EXPECT_LE(sc.qpc_stall_ns, sc.qpc_stalls * uint64_t(Rdma::kQpcMaxStallNs));
		EXPECT_EQ(sc.qpc_ctx_mismatch, 0u);
		EXPECT_LE(sc.qpc_stall_ns, cnt.qpc_cache_misses * uint64_t(k.miss));
		if (k.miss >= uint64_t(Rdma::kQpcMaxStallNs))
			continue;	// owed more than it had to send through
		// Every miss asked for its time; the stalls asked for all but
		// what is still owed (under the slack plus one miss).
		EXPECT_LE(sc.qpc_stall_ns, cnt.qpc_cache_misses * uint64_t(k.miss));
		EXPECT_GE(sc.qpc_stall_ns + uint64_t(Rdma::kQpcMaxStallNs) + k.miss,
			  cnt.qpc_cache_misses * uint64_t(k.miss));
		EXPECT_GE(a.p.now - t0, sc.qpc_stall_ns / 2);
	}
}

// Frames between the nodes, and their deferred work, with the clock
// standing still; false when nothing moved.
bool step(Node &a, Node &b)
{
	run_alone(a);
	run_alone(b);
	auto fa = std::move(a.p.frames), fb = std::move(b.p.frames);
	a.p.frames.clear();
	b.p.frames.clear();
	for (auto &f : fa)
		vrnic_engine_receive(b.p.eng, f.data(), f.size());
	for (auto &f : fb)
		vrnic_engine_receive(a.p.eng, f.data(), f.size());
	return !fa.empty() || !fb.empty();
}

// A cache made unlimited during a stall lets the pass go on at once, with
// no timer: the stall is over (review).
TEST(QpcCacheEngine, ARunTimeChangeEndsAStall)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 0, 1, 1000000}, b{2};
	Pairs pr(a, b, 2);
	const auto &sc = rdma(a).sched_counters();
	std::map<uint32_t, unsigned> per_qp;
	unsigned total = 0;
	for (unsigned r = 0; r < 8; r++)
		for (unsigned i = 0; i < 2; i++)
			pr.write(i, (r * 2 + i) * 4096ull, 0x800000 + (r * 2 + i) * 4096ull,
				 4096, r * 2 + i);
	for (int i = 0; i < 1000 && !sc.qpc_stalls; i++)
		step(a, b);
	ASSERT_GT(sc.qpc_stalls, 0u);
	while (step(a, b))
		;			// the clock stands still: stuck
	total += drain(a, per_qp);
	ASSERT_LT(total, 16u);
	const unsigned sched = a.p.schedules;
	EXPECT_TRUE(vrnic_engine_set_qpc(a.p.eng, 0, 0));
	EXPECT_GT(a.p.schedules, sched);
	for (int i = 0; i < 100000 && total < 16; i++) {
		step(a, b);
		total += drain(a, per_qp);
	}
	EXPECT_EQ(total, 16u);
	EXPECT_EQ(std::memcmp(b.data(0x800000), a.data(0), 16 * 4096), 0);
}

// A QP that went to ERR without a lookup (every QP of a GID that goes
// away) reads back the context that was written: no mismatch.
TEST(QpcCacheEngine, AStateChangeWithoutALookupIsNoMismatch)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 0, 1, 1000}, b{2};
	Pairs pr(a, b, 2);
	std::map<uint32_t, unsigned> per_qp;
	unsigned total = 0;
	const uint32_t out = one_evicted(a, b, pr, per_qp, total);
	ASSERT_LT(out, 2u);
	// The GID the QPs send from goes: every QP using it moves to ERR.
	ASSERT_EQ(a.set_gid(Node::kGid4, {}, {}, VRNIC_GID_OP_CLEAR), VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(rdma(a).qp(pr.qa[out])->attr.state, VRNIC_QPS_ERR);
	const uint64_t bad = rdma(a).sched_counters().qpc_ctx_mismatch;
	a.p.db(0, VRNIC_DB_SQ, pr.qa[out]);	// a miss: read back
	EXPECT_EQ(rdma(a).sched_counters().qpc_ctx_mismatch, bad);
}

// A doorbell on another context's page naming this QP is refused before
// any lookup: it neither evicts nor costs a miss (review: a process could
// otherwise thrash other contexts' QPs and stall the device).
TEST(QpcCacheEngine, AForeignDoorbellTouchesNoContext)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 0, 1, 1000000}, b{2};
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_UCTX;
	const uint32_t page = a.admin_ok(c);
	ASSERT_NE(page, 0u);
	const auto &cnt = rdma(a).counters();
	const uint64_t h = cnt.qpc_cache_hits, m = cnt.qpc_cache_misses;
	for (int i = 0; i < 100; i++)
		a.p.db(page, VRNIC_DB_SQ, a.qp);	// the kernel's QP
	EXPECT_EQ(cnt.qpc_cache_hits, h);
	EXPECT_EQ(cnt.qpc_cache_misses, m);
	EXPECT_EQ(rdma(a).sched_counters().qpc_stalls, 0u);
}

// QUERY_DEVICE tells the driver; SET_QPC_MEM takes only whole, aligned
// memory for every slot, and only while no QP exists.
TEST(QpcCacheEngine, QueryDeviceAndSetQpcMem)
{
	FakePlatform p(7, 40 << 20, 0, 256, 0);
	p.enable();
	const vrnic_device_attr attr = query_device(p);
	EXPECT_EQ(attr.qpc_cache, 256u);
	EXPECT_EQ(attr.qpc_miss_ns, VRNIC_QPC_MISS_NS_DEFAULT);

	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_QPC_MEM;
	c.set_qpc_mem.base = Node::kQpcMem;
	for (uint32_t bad : {0u, 128u, 1000u, 65535u, VRNIC_MAX_QP - 1, VRNIC_MAX_QP * 2}) {
		c.set_qpc_mem.entries = bad;
		EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM) << bad;
	}
	c.set_qpc_mem.entries = Node::kQpcEntries;
	c.set_qpc_mem.base = Node::kQpcMem + 64;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_qpc_mem.base = Node::kQpcMem;
	c.set_qpc_mem.rsvd[1] = 1;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_qpc_mem.rsvd[1] = 0;
	c.set_qpc_mem.flags = 0x80;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_qpc_mem.flags = 0;
	EXPECT_EQ(query_device(p).max_qp, VRNIC_MAX_QP - 2) << "before the table";
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(query_device(p).max_qp, Node::kQpcEntries - 2) << "what the table holds";

	Node n{3, false, Node::kCqLog, VRNIC_QPT_RC, 0, 16, 0};
	EXPECT_EQ(query_device(n.p).qpc_cache, 16u);
	c.set_qpc_mem.base = Node::kQpcMem;
	EXPECT_EQ(n.p.admin(c).status, VRNIC_ADMIN_ST_BUSY);	// n has a QP

	FakePlatform u;
	u.enable();
	EXPECT_EQ(query_device(u).qpc_cache, 0u);		// unlimited
	// At run time (vrnic-device's control socket), clamped.
	EXPECT_TRUE(vrnic_engine_set_qpc(u.eng, 32, 5000));
	EXPECT_EQ(query_device(u).qpc_cache, 32u);
	EXPECT_EQ(query_device(u).qpc_miss_ns, 5000u);
	EXPECT_TRUE(rdma_of(u).qpc().limited());
	EXPECT_EQ(query_device(u).max_qp, VRNIC_MAX_QP - 2) << "no table given";
	EXPECT_TRUE(vrnic_engine_set_qpc(u.eng, VRNIC_MAX_QP + 1, 0));
	EXPECT_EQ(query_device(u).qpc_cache, uint32_t(VRNIC_MAX_QP));
	EXPECT_EQ(query_device(u).qpc_miss_ns, VRNIC_QPC_MISS_NS_DEFAULT);
	EXPECT_TRUE(vrnic_engine_set_qpc(u.eng, 0, 0));
	EXPECT_FALSE(rdma_of(u).qpc().limited());
}

// A limited cache with a table of 256 contexts: QPs go only in the slots
// it holds (254 besides the reserved 0 and 1, the Node's own QP one of
// them), and a create past it is NO_RESOURCE, not a QP whose context
// would have no memory.  Unlimited again, the table bounds nothing.
TEST(QpcCacheEngine, CreatesStayInTheSlotsTheTableHolds)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 0, 16, 0, 256};
	EXPECT_EQ(query_device(a.p).max_qp, 254u);
	const vrnic_admin_cmd c = a.idle_qp_cmd(4);
	std::vector<uint32_t> made;
	for (;;) {
		const auto r = a.p.admin(c);
		if (r.status != VRNIC_ADMIN_ST_OK) {
			EXPECT_EQ(r.status, VRNIC_ADMIN_ST_NO_RESOURCE);
			break;
		}
		EXPECT_LT(vrnic::handle_slot(r.result), 256u);
		made.push_back(r.result);
		ASSERT_LT(made.size(), 1000u);
	}
	EXPECT_EQ(made.size(), 253u);
	// No context past the table is written: the memory after it is
	// untouched.
	EXPECT_EQ(a.p.load<uint64_t>(Node::kQpcMem + 256 * VRNIC_QPC_SIZE), 0u);
	ASSERT_TRUE(vrnic_engine_set_qpc(a.p.eng, 0, 0));
	EXPECT_EQ(query_device(a.p).max_qp, VRNIC_MAX_QP - 2);
	const uint32_t past = a.admin_ok(c);
	EXPECT_GE(vrnic::handle_slot(past), 256u);
	// Limited again: the QP past the table misses with nothing to read.
	ASSERT_TRUE(vrnic_engine_set_qpc(a.p.eng, 16, 0));
	const uint64_t misses = rdma(a).counters().qpc_cache_misses;
	a.qp = past;
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_INIT;
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
	EXPECT_GT(rdma(a).counters().qpc_cache_misses, misses);
	EXPECT_EQ(rdma(a).sched_counters().qpc_ctx_mismatch, 0u);
	EXPECT_EQ(a.p.eng->dev.counters().dma_errors, 0u);
	EXPECT_EQ(a.p.load<uint64_t>(Node::kQpcMem + 256 * VRNIC_QPC_SIZE), 0u);
}

} // namespace

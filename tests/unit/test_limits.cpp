// SPDX-License-Identifier: GPL-2.0-or-later
// Resource limits (spec "Resource limits"): the host-memory budget, the
// admin queue's copy budget, WQE fetch bounded by the send window, retries
// bounded under NAKs, and outstanding PSNs below 2^23.
#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"

namespace {

constexpr uint64_t B = FakePlatform::kMemBase;

const vrnic::HostBudget &budget_of(const FakePlatform &p)
{
	return p.eng->dev.budget();
}

vrnic_admin_cmd op(uint8_t opcode)
{
	vrnic_admin_cmd c{};
	c.opcode = opcode;
	return c;
}

// The review's amplification: LEVEL2, page_shift 30, npages 2^20, length
// 2^50, all 2048 level 1 pointers at one guest page (16 KiB + 4 KiB of
// guest memory name an 8 MiB page list).
constexpr uint64_t kL1 = B + 0x10000;	// 2048 pointers
constexpr uint64_t kL2 = B + 0x20000;	// the one page they point at

vrnic_admin_cmd amplifying_mr(uint32_t pdn)
{
	vrnic_admin_cmd c = op(VRNIC_ADMIN_CREATE_MR);
	c.create_mr.iova = 0;
	c.create_mr.length = 1ull << 50;
	c.create_mr.pbl = kL1;
	c.create_mr.pdn = pdn;
	c.create_mr.npages = 1u << 20;
	c.create_mr.page_shift = 30;
	c.create_mr.pbl_mode = VRNIC_PBL_LEVEL2;
	return c;
}

void point_l1_at_l2(FakePlatform &p, uint64_t page_value)
{
	for (unsigned i = 0; i < 2048; i++)
		p.store<uint64_t>(kL1 + i * 8, kL2);
	for (unsigned i = 0; i < 512; i++)
		p.store<uint64_t>(kL2 + i * 8, page_value);
}

uint32_t kernel_pd(FakePlatform &p)
{
	const auto cqe = p.admin(op(VRNIC_ADMIN_CREATE_PD));
	EXPECT_EQ(cqe.status, VRNIC_ADMIN_ST_OK);
	return cqe.result;
}

} // namespace

TEST(HostBudget, QueryDeviceReportsIt)
{
	FakePlatform p(0x56, FakePlatform::kMemSize, 64ull << 20);
	p.enable();
	vrnic_admin_cmd c = op(VRNIC_ADMIN_QUERY_DEVICE);
	c.query.out_addr = B + 0x8000;
	c.query.out_len = sizeof(vrnic_device_attr);
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(p.load<vrnic_device_attr>(B + 0x8000).host_mem_budget, 64ull << 20);

	FakePlatform d;		// 0: the default
	d.enable();
	ASSERT_EQ(d.admin(c).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(d.load<vrnic_device_attr>(B + 0x8000).host_mem_budget,
		  vrnic::HostBudget::kDefault);
}

// The engine clamps the configured budget to the bounds vrnic_engine.h
// gives the QEMU glue (one definition for both).
TEST(HostBudget, TheBoundsAreTheOnesTheGlueChecks)
{
	EXPECT_EQ(vrnic::HostBudget(1).limit(), VRNIC_HOST_MEM_BUDGET_MIN);
	EXPECT_EQ(vrnic::HostBudget(1ull << 50).limit(), VRNIC_HOST_MEM_BUDGET_MAX);
	EXPECT_EQ(vrnic::HostBudget(0).limit(), VRNIC_HOST_MEM_BUDGET_DEFAULT);
	EXPECT_EQ(vrnic::HostBudget(VRNIC_HOST_MEM_BUDGET_MIN).limit(), VRNIC_HOST_MEM_BUDGET_MIN);
}

// Page address 0 is refused (no bus address of a page the driver gives is
// 0); the charge taken for the attempt is returned.
TEST(HostBudget, PageAddressZeroIsRefused)
{
	FakePlatform p;
	p.enable();
	const uint32_t pd = kernel_pd(p);
	const uint64_t base = budget_of(p).used();
	point_l1_at_l2(p, 0);	// the review's zeroed page
	EXPECT_EQ(p.admin(amplifying_mr(pd)).status, VRNIC_ADMIN_ST_BAD_PARAM);
	EXPECT_EQ(budget_of(p).used(), base);
	EXPECT_EQ(budget_of(p).over_released(), 0u);
}

// Duplicate pages are accepted, and charged: repeated CREATE_MR stops
// with NO_RESOURCE at the budget, DESTROY_MR gives it all back.
TEST(HostBudget, Level2AmplificationStopsAtTheBudgetAndDestroyFreesIt)
{
	constexpr uint64_t kLimit = 64ull << 20;
	constexpr uint64_t kList = (1ull << 20) * 8;	// 8 MiB per MR
	FakePlatform p(0x56, FakePlatform::kMemSize, kLimit);
	p.enable();
	const uint32_t pd = kernel_pd(p);
	p.drain_aeq();	// held events are charged too
	const uint64_t base = budget_of(p).used();
	const uint64_t tables = p.eng->dev.rdma().table_bytes();
	point_l1_at_l2(p, 1ull << 30);	// one 1 GiB page, 2^20 times

	std::vector<uint32_t> keys;
	unsigned refused = 0;
	for (unsigned i = 0; i < 32; i++) {
		const auto cqe = p.admin(amplifying_mr(pd));
		if (cqe.status == VRNIC_ADMIN_ST_OK) {
			EXPECT_EQ(refused, 0u) << "accepted after a refusal";
			keys.push_back(cqe.result);
		} else {
			EXPECT_EQ(cqe.status, VRNIC_ADMIN_ST_NO_RESOURCE);
			refused++;
		}
		EXPECT_LE(budget_of(p).used(), kLimit);
	}
	EXPECT_GT(refused, 0u) << "32 x 8 MiB of page lists from 20 KiB of guest memory";
	// Each also holds its 16 KiB level 1 list while it is built.
	EXPECT_EQ(keys.size(), (kLimit - base - (16 << 10)) / kList);
	EXPECT_LE(budget_of(p).peak(), kLimit);

	for (uint32_t k : keys) {
		vrnic_admin_cmd d = op(VRNIC_ADMIN_DESTROY_MR);
		d.destroy.id = k;
		EXPECT_EQ(p.admin(d).status, VRNIC_ADMIN_ST_OK);
	}
	p.drain_aeq();
	// The MR table's chunks stay (they grow with use).
	EXPECT_EQ(budget_of(p).used(), base + p.eng->dev.rdma().table_bytes() - tables)
		<< "page lists leaked";
	EXPECT_EQ(budget_of(p).over_released(), 0u) << "a charge given back twice";
	EXPECT_EQ(p.admin(amplifying_mr(pd)).status, VRNIC_ADMIN_ST_OK);
}

// One admin pass copies at most kAdminCopyBudget (plus one list) of page
// lists, not 64 commands' worth; the rest runs on later polls.
TEST(HostBudget, AdminPassCopiesBoundedBytesPerPoll)
{
	FakePlatform p;
	p.wr(VRNIC_REG_AQ_BASE_LO, uint32_t(B + 0x40000));
	p.wr(VRNIC_REG_ACQ_BASE_LO, uint32_t(B + 0x60000));
	p.wr(VRNIC_REG_AQ_LOG_DEPTH, 6);
	p.wr(VRNIC_REG_AEQ_BASE_LO, uint32_t(FakePlatform::kAeq));
	p.wr(VRNIC_REG_AEQ_LOG_DEPTH, 4);
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	// Command 0 makes the PD (handle 1, generation 1), 1..16 the MRs.
	vrnic_admin_cmd pd = op(VRNIC_ADMIN_CREATE_PD);
	p.store(B + 0x40000, pd);
	p.wr(VRNIC_REG_AQ_DB, 1);
	p.run();
	const uint32_t pdn = p.load<vrnic_admin_cqe>(B + 0x60000).result;
	point_l1_at_l2(p, 1ull << 30);
	for (unsigned i = 1; i <= 16; i++) {
		vrnic_admin_cmd c = amplifying_mr(pdn);
		c.token = uint16_t(i);
		p.store(B + 0x40000 + i * sizeof(c), c);
	}
	const uint64_t before = budget_of(p).charged_total();
	p.wr(VRNIC_REG_AQ_DB, 17);
	vrnic_engine_poll(p.eng);
	unsigned done = 0;
	for (unsigned i = 1; i <= 16; i++)
		done += (p.load<vrnic_admin_cqe>(B + 0x60000 + i * 16).flags &
			 VRNIC_ACQE_PHASE) ? 1 : 0;
	EXPECT_GE(done, 1u);
	EXPECT_LE(budget_of(p).charged_total() - before,
		  vrnic::Device::kAdminCopyBudget + (8ull << 20) + (16ull << 10));
	EXPECT_LE(done, 2u) << "one poll copied " << done << " x 8 MiB";
	p.run();
	const auto last = p.load<vrnic_admin_cqe>(B + 0x60000 + 16 * 16);
	EXPECT_EQ(last.sq_head, 17) << "the rest never ran";
	EXPECT_EQ(last.status, VRNIC_ADMIN_ST_OK);
}

// ----------------------------------------------------------- data path

namespace {


const vrnic::Qp &qp_of(const Node &n, uint32_t qpn)
{
	return *n.p.eng->dev.rdma().qp(qpn);
}

} // namespace

// 16384 WQEs on a QP whose peer never answers: the device copies what the
// send window can use, not the whole SQ.
TEST(SendWindow, WqesAreFetchedNoFurtherThanTheWindow)
{
	Node a{1}, b{2};
	constexpr uint64_t kBigSq = Node::B + 0x1200000;	// 2^14 x 64 B
	constexpr uint64_t kDb = Node::kQpDb + 0x40;
	vrnic_admin_cmd c = op(VRNIC_ADMIN_CREATE_QP);
	c.create_qp.sq_base = kBigSq;
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.dbrec = kDb;
	c.create_qp.pdn = a.pd;
	c.create_qp.send_cqn = c.create_qp.recv_cqn = a.cq;
	c.create_qp.sq_log_depth = 14;
	c.create_qp.rq_log_depth = 0;
	c.create_qp.sq_wqe_shift = 6;
	c.create_qp.rq_wqe_shift = 5;
	c.create_qp.type = VRNIC_QPT_RC;
	const uint32_t qpn = a.admin_ok(c);
	const uint32_t first = a.qp;
	a.qp = qpn;
	a.connect(b, 3, 100, 200);
	a.qp = first;

	const uint64_t base = budget_of(a.p).used();
	for (uint32_t i = 0; i < (1u << 14); i++)	// zero-length SENDs
		a.p.store(kBigSq + uint64_t(i) * 64, send_wqe(i));
	a.p.store<uint32_t>(kDb, 1u << 14);
	a.p.db(0, VRNIC_DB_SQ, qpn);
	size_t most = 0, sent = 0;
	for (int i = 0; i < 400; i++) {
		vrnic_engine_poll(a.p.eng);
		sent += a.p.frames.size();
		a.p.frames.clear();
		most = std::max(most, qp_of(a, qpn).inflight.size());
	}
	const size_t cap = vrnic::Rdma::kWindow + vrnic::Rdma::kLookahead;
	EXPECT_LE(most, cap);
	EXPECT_EQ(sent, vrnic::Rdma::kWindow) << "the window is still used whole";
	EXPECT_LE(budget_of(a.p).used() - base,
		  cap * vrnic::Rdma::send_wqe_charge(qp_of(a, qpn)));
}

// When the budget cannot take another WQE copy, the QP still sends what
// its own reservation holds (kReservedCopies copies at a time); beyond
// that it waits without an error and goes on once memory is given back.
TEST(SendWindow, AQpWaitsForMemoryThenContinues)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 16ull << 20}, b{2};
	Wire wire;
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	// Fill the budget with fast-register MRs (512 pages = 4 KiB each)
	// until not even one WQE copy fits.
	const vrnic::HostBudget &hb = budget_of(a.p);
	const uint64_t wqe = vrnic::Rdma::send_wqe_charge(qp_of(a, a.qp));
	std::vector<uint32_t> fillers;
	for (uint32_t pages : {512u, 64u, 8u, 1u}) {
		for (;;) {
			vrnic_admin_cmd c = op(VRNIC_ADMIN_CREATE_MR);
			c.create_mr.pdn = a.pd;
			c.create_mr.npages = pages;
			c.create_mr.pbl_mode = VRNIC_PBL_FAST;
			const auto cqe = a.p.admin(c);
			if (cqe.status != VRNIC_ADMIN_ST_OK)
				break;
			fillers.push_back(cqe.result);
		}
	}
	ASSERT_LT(hb.limit() - hb.used(), wqe);
	constexpr unsigned kRes = vrnic::Rdma::kReservedCopies, kMore = 3;
	for (unsigned i = 0; i < kRes + kMore; i++) {
		b.post_recv(i, {b.sge(0, 4096)});
		a.post_send(send_wqe(i), {a.sge(0, 100)});
	}
	a.p.run();	// the peer hears nothing yet
	EXPECT_EQ(qp_of(a, a.qp).inflight.size(), kRes) << "only the reserved copies are fetched";
	EXPECT_EQ(qp_of(a, a.qp).attr.state, VRNIC_QPS_RTS) << "waiting is no error";
	vrnic_cqe cqe;
	EXPECT_FALSE(a.poll_cq(cqe));

	vrnic_admin_cmd d = op(VRNIC_ADMIN_DESTROY_MR);
	d.destroy.id = fillers.front();	// 512 pages: 4 KiB back
	ASSERT_EQ(a.p.admin(d).status, VRNIC_ADMIN_ST_OK);
	a.p.run();
	EXPECT_EQ(qp_of(a, a.qp).inflight.size(), kRes + kMore) << "memory came back";
	const auto sc = wire.completions(a, b, a, kRes + kMore);
	ASSERT_EQ(sc.size(), kRes + kMore);
	for (unsigned i = 0; i < kRes + kMore; i++) {
		EXPECT_EQ(sc[i].wr_id, i);
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS);
	}
}

// One user context fills many QPs with WQEs toward a silent peer: its
// copies stop at half the budget (its cap), and a QP of another context
// (the kernel's here) still sends, with more than its reserved copies in
// flight.  Before the cap, the first context took the whole budget.
TEST(HostBudget, AContextAtItsCapCannotStopAnotherContextsQp)
{
	Node a{1, false, Node::kCqLog, VRNIC_QPT_RC, 16ull << 20}, b{2};
	Wire wire;
	const vrnic::HostBudget &hb = budget_of(a.p);
	const uint32_t ux = a.admin_ok(op(VRNIC_ADMIN_CREATE_UCTX));
	vrnic_admin_cmd c = op(VRNIC_ADMIN_CREATE_PD);
	c.create_pd.uctx = ux;
	const uint32_t pd = a.admin_ok(c);
	c = op(VRNIC_ADMIN_CREATE_CQ);
	c.create_cq.base = Node::B + 0x1100000;
	c.create_cq.dbrec = Node::kCqDb + 0x40;
	c.create_cq.uctx = ux;
	c.create_cq.log_depth = 4;
	c.create_cq.eqn = 1;
	const uint32_t cq = a.admin_ok(c);
	// 24 QPs of 512 WQEs of 1 KiB: 24 x 512 copies would be more than
	// the whole budget.
	constexpr unsigned kQps = 24, kLog = 9, kShift = 10;
	constexpr uint64_t kRings = Node::B + 0x1200000;
	const uint32_t kernel_qp = a.qp;
	for (unsigned n = 0; n < kQps; n++) {
		const uint64_t sq = kRings + (uint64_t(n) << (kLog + kShift));
		const uint64_t db = Node::B + 0x40400 + n * 8;
		c = op(VRNIC_ADMIN_CREATE_QP);
		c.create_qp.sq_base = sq;
		c.create_qp.rq_base = Node::kRq;
		c.create_qp.dbrec = db;
		c.create_qp.uctx = ux;
		c.create_qp.pdn = pd;
		c.create_qp.send_cqn = c.create_qp.recv_cqn = cq;
		c.create_qp.sq_log_depth = kLog;
		c.create_qp.sq_wqe_shift = kShift;
		c.create_qp.rq_wqe_shift = 5;
		c.create_qp.type = VRNIC_QPT_RC;
		a.qp = a.admin_ok(c);
		a.connect(b, 3, 100, 200);
		for (uint32_t i = 0; i < (1u << kLog); i++)	// zero-length SENDs
			a.p.store(sq + (uint64_t(i) << kShift), send_wqe(i));
		a.p.store<uint32_t>(db, 1u << kLog);
		a.p.db(ux, VRNIC_DB_SQ, a.qp);
		a.p.run();
		a.p.frames.clear();	// the peer is silent
	}
	a.qp = kernel_qp;
	EXPECT_LE(hb.ctx_used(ux), hb.ctx_cap());
	EXPECT_GT(hb.ctx_used(ux) + 2 * vrnic::Rdma::send_wqe_charge(kShift), hb.ctx_cap())
		<< "the context did not reach its cap";
	EXPECT_LT(hb.used(), hb.limit() - (1u << 20));

	// The kernel's QP sends 200 messages, more than its reservation
	// at a time.
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	constexpr unsigned kMsgs = 200;
	for (unsigned i = 0; i < kMsgs; i++) {
		b.post_recv(i, {b.sge(0, 64)});
		a.post_send(send_wqe(i), {a.sge(0, 64)});
	}
	a.p.run();
	EXPECT_GT(qp_of(a, a.qp).inflight.size(), vrnic::Rdma::kReservedCopies);
	const auto sc = wire.completions(a, b, a, kMsgs);
	ASSERT_EQ(sc.size(), kMsgs);
	for (unsigned i = 0; i < kMsgs; i++) {
		EXPECT_EQ(sc[i].wr_id, i);
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS);
	}
}

// ------------------------------------------------------------- retries

// The same NAK-seq replayed: the first starts a go-back-N and costs a
// retry; the replays are ignored until progress or the ack timer, so the
// window is resent once, not once per NAK, and the timeouts that follow
// use up the rest of the retries: RETRY_EXC_ERR, not never.
TEST(Retries, ARepeatedSequenceNakUsesUpTheRetries)
{
	Node a{1}, b{2};
	constexpr uint8_t kRetry = 3;
	a.connect(b, 3, 100, 200, kRetry);
	b.connect(a, 3, 200, 100, kRetry);
	constexpr uint32_t kLen = 64 << 10;	// 64 packets of 1 KiB
	a.post_send(send_wqe(9, VRNIC_WR_RDMA_WRITE, Node::kIova, b.mr),
		    {a.sge(0, kLen)});
	a.p.run();
	ASSERT_EQ(a.p.frames.size(), 64u);
	// b sees PSN 101 before 100: one NAK-seq for PSN 100.
	vrnic_engine_receive(b.p.eng, a.p.frames[1].data(), a.p.frames[1].size());
	ASSERT_EQ(b.p.frames.size(), 1u);
	const std::vector<uint8_t> nak = b.p.frames[0];
	a.p.frames.clear();

	uint64_t resent = 0;
	unsigned naks = 0;
	vrnic_cqe cqe{};
	bool done = false;
	for (; naks < 50 && !done; naks++) {
		vrnic_engine_receive(a.p.eng, nak.data(), nak.size());
		a.p.run();
		for (const auto &f : a.p.frames)
			resent += f.size();
		a.p.frames.clear();
		done = a.poll_cq(cqe);
	}
	EXPECT_FALSE(done) << "the NAKs alone ended the QP";
	EXPECT_EQ(a.counters().rcvd_seq_err, 50u);
	// One resend of the 64-packet message for 50 NAKs, nothing more.
	EXPECT_LE(resent, uint64_t(64) * (1024 + 128));
	EXPECT_GE(resent, uint64_t(kLen));
	// No progress: the ack timer fires kRetry more times, each another
	// go-back-N (the NAKs above used one retry), then RETRY_EXC_ERR.
	unsigned timeouts = 0;
	for (; timeouts < 20 && !done; timeouts++) {
		if (!a.p.deadline)
			break;
		a.p.now = std::max(a.p.now, a.p.deadline);
		a.p.deadline = 0;
		vrnic_engine_timer(a.p.eng);
		a.p.run();
		a.p.frames.clear();
		done = a.poll_cq(cqe);
	}
	ASSERT_TRUE(done) << "no RETRY_EXC_ERR after " << timeouts << " timeouts";
	EXPECT_EQ(cqe.status, VRNIC_WC_ST_RETRY_EXC_ERR);
	EXPECT_EQ(a.counters().retry_timeouts, uint64_t(kRetry));
}

// Review N1: one captured RNR NAK (10 us timer), replayed every 100 us,
// made the QP resend its whole 64-packet window after each replay: 20
// windows for 20 replays.  An RNR NAK acts once per transmission of the
// request it names, and each further one for the same PSN doubles the
// wait, so the replays resend it only a handful of times (10, 20, ...,
// 640 us of waiting fit in the 2 ms), with any ack timeout.
struct RnrReplay : ::testing::TestWithParam<uint8_t> {};

TEST_P(RnrReplay, IsBackedOff)
{
	Node a{1}, b{2};
	a.connect(b, 3, 100, 200, 7, 7, GetParam());
	b.connect(a, 3, 200, 100, 7, 7, GetParam());
	a.post_send(send_wqe(1), {a.sge(0, 64 << 10)});	// no receive at b
	a.p.run();
	ASSERT_EQ(a.p.frames.size(), 64u);
	vrnic_engine_receive(b.p.eng, a.p.frames[0].data(), a.p.frames[0].size());
	b.p.run();
	ASSERT_EQ(b.p.frames.size(), 1u);
	const std::vector<uint8_t> rnr = b.p.frames[0];
	ASSERT_EQ(b.counters().send_rnr_err, 1u);
	a.p.frames.clear();

	uint64_t resent = 0;
	for (int i = 0; i < 20; i++) {
		vrnic_engine_receive(a.p.eng, rnr.data(), rnr.size());
		a.p.run();
		a.p.now += 100000;
		if (a.p.deadline && a.p.deadline <= a.p.now) {
			a.p.deadline = 0;
			vrnic_engine_timer(a.p.eng);
		}
		a.p.run();
		resent += a.p.frames.size();
		a.p.frames.clear();
	}
	EXPECT_EQ(a.counters().rcvd_rnr_err, 20u);
	EXPECT_LE(resent, 8u * 64) << "packets resent for 20 replays of one RNR NAK";
	EXPECT_EQ(qp_of(a, a.qp).attr.state, VRNIC_QPS_RTS);
}

INSTANTIATE_TEST_SUITE_P(Timeout, RnrReplay, ::testing::Values(uint8_t(0), uint8_t(14)),
			 [](const auto &info) {
				 return "timeout" + std::to_string(info.param);
			 });

// A receiver that is not ready for 1 ms (RNR timer 10 us): the guard
// must not make the requester wait for its ack timeout (67 ms here).
TEST(Retries, RnrRecoveryDoesNotWaitForTheAckTimer)
{
	Node a{1}, b{2};
	Wire wire;
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	a.post_send(send_wqe(1), {a.sge(0, 4096)});
	wire.run(a, b, [&] { return a.p.now >= 1000000; });
	ASSERT_GE(a.p.now, 1000000u);
	b.post_recv(1, {b.sge(0, 4096)});
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_LT(a.p.now, 5000000u) << "completed after " << a.p.now / 1000 << " us";
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
}

// The peer that really is not ready answers each resend with an RNR NAK:
// each acts, so rnr_retry still decides when the QP gives up, and no
// transport retry is spent.
TEST(Retries, RnrRetriesStillRunOut)
{
	Node a{1}, b{2};
	Wire wire;
	a.connect(b, 3, 100, 200, 7, 3);
	b.connect(a, 3, 200, 100, 7, 3);
	a.post_send(send_wqe(1), {a.sge(0, 4096)});
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_RNR_RETRY_EXC_ERR);
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
	EXPECT_EQ(a.counters().rcvd_rnr_err, b.counters().send_rnr_err);
	EXPECT_EQ(a.counters().rcvd_rnr_err, 4u) << "first try and 3 retries";
}

// A packet lost inside a first message longer than the send window: the
// responder NAKs the gap once while the requester is still sending that
// message, and the go-back-N must start from the NAK, not from an ack
// timeout (with timeout 0 the QP would hang for good).
TEST(Retries, ANakInsideTheFirstMessageRewindsAtOnce)
{
	Node a{1}, b{2};
	Wire wire;
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	a.post_send(send_wqe(1, VRNIC_WR_RDMA_WRITE, Node::kIova, b.mr),
		    {a.sge(0, 1 << 20)});	// 1024 packets of 1 KiB
	a.p.run();
	ASSERT_GT(a.p.frames.size(), 20u);
	ASSERT_EQ(qp_of(a, a.qp).send_idx, 0u);	// still sending it
	a.p.frames.erase(a.p.frames.begin() + 10);
	wire.deliver(a, b);
	b.p.run();
	ASSERT_FALSE(b.p.frames.empty());	// the one NAK
	wire.deliver(b, a);
	a.p.run();
	EXPECT_EQ(a.counters().rcvd_seq_err, 1u);
	const auto done = wire.completions(a, b, a, 1);
	ASSERT_EQ(done.size(), 1u);
	EXPECT_EQ(done[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(a.counters().retry_timeouts, 0u) << "recovered by a timeout";
}

// A NAK for a PSN that is acknowledged already is stale (a duplicate, or
// a rogue peer's, as the guest attack group sends): it must neither fail
// nor rewind the QP.  Before, any fatal NAK behind una_psn completed the
// oldest outstanding WQE with its error and moved the QP to ERR.
TEST(Retries, AStaleNakIsIgnored)
{
	using namespace vrnic::roce;
	Node a{1}, b{2};
	Wire wire;
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	a.post_send(send_wqe(1, VRNIC_WR_RDMA_WRITE, Node::kIova, b.mr),
		    {a.sge(0, 8192)});
	const auto first = wire.completions(a, b, a, 1);
	ASSERT_EQ(first.size(), 1u);
	ASSERT_EQ(first[0].status, VRNIC_WC_ST_SUCCESS);
	// A second WRITE outstanding (not delivered yet): PSN 108.
	a.post_send(send_wqe(2, VRNIC_WR_RDMA_WRITE, Node::kIova, b.mr),
		    {a.sge(0, 64)});
	a.p.run();
	ASSERT_EQ(a.p.frames.size(), 1u);
	a.p.frames.clear();

	Path p;
	p.smac = b.mac();
	p.dmac = a.mac();
	p.sgid = b.gid();
	p.dgid = a.gid();
	const uint8_t fatal[] = {kAethNakInvReq, kAethNakRemAccess,
				 kAethNakRemOp};
	for (const uint8_t syn : fatal) {
		for (const uint32_t psn : {100u, 107u, (100u - (1u << 20)) & kPsnMask}) {
			Headers h;
			h.opcode = ACK;
			h.dqpn = a.qp;
			h.psn = psn;
			h.syndrome = syn;
			std::vector<uint8_t> f(256);
			f.resize(finish(f.data(), p, build_headers(f.data(), p, h), 0));
			vrnic_engine_receive(a.p.eng, f.data(), f.size());
			a.p.run();
		}
	}
	vrnic_cqe cqe{};
	EXPECT_FALSE(a.poll_cq(cqe)) << "status " << int(cqe.status);
	EXPECT_EQ(qp_of(a, a.qp).attr.state, VRNIC_QPS_RTS);
	EXPECT_TRUE(a.p.frames.empty()) << "a stale NAK made the QP resend";
	// The real exchange still completes the second WRITE.
	vrnic_engine_timer(a.p.eng);
	const auto second = wire.completions(a, b, a, 1);
	ASSERT_EQ(second.size(), 1u);
	EXPECT_EQ(second[0].wr_id, 2u);
	EXPECT_EQ(second[0].status, VRNIC_WC_ST_SUCCESS);
}

// A fatal NAK names the request in error by its PSN.  Here a READ (PSN
// 100, its response not yet back) is followed by a WRITE (PSN 101), and
// the responder refuses the WRITE: the WRITE completes with
// REM_ACCESS_ERR and the READ is flushed.  Before, the error went to the
// oldest outstanding WQE, the READ.
TEST(Retries, AFatalNakFailsTheWqeThatHoldsItsPsn)
{
	using namespace vrnic::roce;
	Node a{1}, b{2};
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	a.post_send(send_wqe(1, VRNIC_WR_RDMA_READ, Node::kIova, b.mr), {a.sge(0, 64)});
	a.post_send(send_wqe(2, VRNIC_WR_RDMA_WRITE, Node::kIova, b.mr), {a.sge(0, 64)});
	a.p.run();
	ASSERT_EQ(a.p.frames.size(), 2u);
	a.p.frames.clear();

	Path p;
	p.smac = b.mac();
	p.dmac = a.mac();
	p.sgid = b.gid();
	p.dgid = a.gid();
	Headers h;
	h.opcode = ACK;
	h.dqpn = a.qp;
	h.psn = 101;
	h.syndrome = kAethNakRemAccess;
	std::vector<uint8_t> f(256);
	f.resize(finish(f.data(), p, build_headers(f.data(), p, h), 0));
	vrnic_engine_receive(a.p.eng, f.data(), f.size());
	a.p.run();
	vrnic_cqe c1{}, c2{};
	ASSERT_TRUE(a.poll_cq(c1));
	ASSERT_TRUE(a.poll_cq(c2));
	EXPECT_EQ(c1.wr_id, 1u);
	EXPECT_EQ(c1.status, VRNIC_WC_ST_WR_FLUSH_ERR);
	EXPECT_EQ(c2.wr_id, 2u);
	EXPECT_EQ(c2.status, VRNIC_WC_ST_REM_ACCESS_ERR);
	EXPECT_EQ(qp_of(a, a.qp).attr.state, VRNIC_QPS_ERR);
}

// ------------------------------------------------------- PSN space

namespace {

// A 2 GiB MR of two 1 GiB pages (never touched: no response arrives).
uint32_t two_gib_mr(Node &n)
{
	vrnic_admin_cmd c = op(VRNIC_ADMIN_CREATE_MR);
	c.create_mr.iova = 0;
	c.create_mr.length = 1ull << 31;
	c.create_mr.pbl = 1ull << 30;
	c.create_mr.inline_pages[0] = 2ull << 30;
	c.create_mr.pdn = n.pd;
	c.create_mr.access = VRNIC_ACCESS_ALL;
	c.create_mr.npages = 2;
	c.create_mr.page_shift = 30;
	c.create_mr.pbl_mode = VRNIC_PBL_INLINE;
	return n.admin_ok(c);
}

// PSNs of the READ requests a sent.
std::vector<uint32_t> read_psns(const Node &n)
{
	std::vector<uint32_t> out;
	for (const auto &f : n.p.frames) {
		// Ethernet 14 + IPv4 20 + UDP 8, then the BTH.
		const uint8_t *bth = f.data() + 42;
		if (bth[0] == (uint8_t(vrnic::roce::RC) | uint8_t(vrnic::roce::READ_REQUEST)))
			out.push_back(uint32_t(bth[9]) << 16 | uint32_t(bth[10]) << 8 |
				      bth[11]);
	}
	return out;
}

} // namespace

// 2^31 bytes at MTU 256 span 2^23 PSNs: refused, the next READ is never
// sent with a PSN that aliases the first one's.
TEST(PsnSpace, A2GiBReadAtMtu256IsRefusedNotAliased)
{
	Node a{1}, b{2};
	a.connect(b, 1, 100, 200);
	const uint32_t big = two_gib_mr(a);
	a.post_send(send_wqe(1, VRNIC_WR_RDMA_READ, 0, b.mr),
		    {{0, 1u << 31, big}});
	a.post_send(send_wqe(2, VRNIC_WR_RDMA_READ, Node::kIova, b.mr),
		    {a.sge(0, 4096)});
	a.p.run();
	const auto psns = read_psns(a);
	for (uint32_t psn : psns)
		EXPECT_LT((psn - 100) & 0xffffff, 1u << 23) << "aliasing PSN " << psn;
	vrnic_cqe c1{}, c2{};
	ASSERT_TRUE(a.poll_cq(c1));
	EXPECT_EQ(c1.wr_id, 1u);
	EXPECT_EQ(c1.status, VRNIC_WC_ST_LOC_LEN_ERR);
	ASSERT_TRUE(a.poll_cq(c2));
	EXPECT_EQ(c2.status, VRNIC_WC_ST_WR_FLUSH_ERR);
}

// 2^31 - 256 bytes (2^23 - 1 PSNs) is a valid READ, but not while a
// 4 KiB READ (16 PSNs) is outstanding: it waits for it instead of pushing
// the outstanding PSNs past 2^23, and so does the READ after it.
TEST(PsnSpace, OutstandingPsnsStayBelow2To23)
{
	Node a{1}, b{2};
	a.connect(b, 1, 100, 200);
	const uint32_t big = two_gib_mr(a);
	a.post_send(send_wqe(1, VRNIC_WR_RDMA_READ, Node::kIova, b.mr),
		    {a.sge(0, 4096)});
	a.post_send(send_wqe(2, VRNIC_WR_RDMA_READ, 0, b.mr),
		    {{0, (1u << 31) - 256, big}});
	a.post_send(send_wqe(3, VRNIC_WR_RDMA_READ, Node::kIova, b.mr),
		    {a.sge(0, 4096)});
	for (int i = 0; i < 10; i++)
		vrnic_engine_poll(a.p.eng);
	const auto psns = read_psns(a);
	ASSERT_EQ(psns.size(), 1u) << "READs after the first went out";
	EXPECT_EQ(psns[0], 100u);
	const auto &q = qp_of(a, a.qp);
	EXPECT_LT((q.next_psn - q.una_psn) & 0xffffff, 1u << 23);
	EXPECT_EQ(q.attr.state, VRNIC_QPS_RTS);
}

// ------------------------------------------------------------ loopback

// Frames a QP addresses to its own device wait in a queue until the next
// poll; a peer that makes it answer thousands of requests between two
// polls (here: a SEND with no receive WQE, replayed, one RNR NAK each)
// cannot grow that queue without bound.
TEST(Loopback, TheQueueOfFramesToItselfIsBounded)
{
	Node a{1}, b{2};
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);
	// a's QP answers b's GID at a's own MAC: its answers loop back.
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_SQD;
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
	const auto dg = b.gid();
	std::memcpy(at.dgid, dg.data(), 16);
	at.sgid_index = Node::kGid4;
	const uint8_t own[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 1};
	std::memcpy(at.dmac, own, 6);
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_AV, at),
		  VRNIC_ADMIN_ST_OK);
	at.state = VRNIC_QPS_RTS;
	ASSERT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);

	b.post_send(send_wqe(1), {b.sge(0, 64)});
	b.p.run();
	ASSERT_EQ(b.p.frames.size(), 1u);
	const std::vector<uint8_t> send = b.p.frames[0];
	constexpr unsigned kReplays = 40000;	// over 2 MiB of NAK frames
	for (unsigned i = 0; i < kReplays; i++)
		vrnic_engine_receive(a.p.eng, send.data(), send.size());
	EXPECT_EQ(a.counters().send_rnr_err, kReplays);
	const auto &lb = a.p.eng->dev.rdma().loopback();
	EXPECT_LE(lb.bytes(), vrnic::Rdma::kLoopbackBytes);
	EXPECT_GT(a.p.eng->dev.counters().loopback_drops, 0u);
	EXPECT_EQ(a.p.eng->dev.counters().loopback_drops + lb.frames(), kReplays);
	EXPECT_TRUE(a.p.frames.empty()) << "answers left by the wire";
	a.p.run();	// drains the queue; the device goes on
	EXPECT_EQ(qp_of(a, a.qp).attr.state, VRNIC_QPS_RTS);
}

// Paged rings and QPs are charged at creation and credited at destroy;
// with the budget spent, creation is NO_RESOURCE and creates nothing.
TEST(HostBudget, RingsAndQpsAreChargedAndCredited)
{
	Node a{1, true, Node::kCqLog, VRNIC_QPT_RC, 16ull << 20};
	const vrnic::HostBudget &hb = budget_of(a.p);
	const uint64_t base = hb.used();
	// A second paged CQ on the same pages (the list at kRingPbl).
	vrnic_admin_cmd c = op(VRNIC_ADMIN_CREATE_CQ);
	c.create_cq.base = Node::kRingPbl;
	c.create_cq.ring_flags = VRNIC_RING_PAGED;
	c.create_cq.dbrec = Node::kCqDb + 0x40;
	c.create_cq.log_depth = uint8_t(Node::kCqLog);
	c.create_cq.eqn = 1;
	const uint32_t cq = a.admin_ok(c);
	// Its page list, and what its held events may cost.
	EXPECT_EQ(hb.used() - base, (32ull << Node::kCqLog) / 4096 * 8 +
					    2 * vrnic::EventQueue::kHeldBytes);
	vrnic_admin_cmd d = op(VRNIC_ADMIN_DESTROY_CQ);
	d.destroy.id = cq;
	ASSERT_EQ(a.p.admin(d).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(hb.used(), base) << "a destroyed CQ kept its page list";

	// Spend the budget with FAST MRs, then ask for a CQ and a QP.
	const std::vector<uint32_t> fillers = a.spend_budget_on_mrs();
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_NO_RESOURCE);
	vrnic_admin_cmd q = a.idle_qp_cmd();
	EXPECT_EQ(a.p.admin(q).status, VRNIC_ADMIN_ST_NO_RESOURCE);
	const uint64_t full = hb.used();
	vrnic_admin_cmd m = op(VRNIC_ADMIN_DESTROY_MR);
	m.destroy.id = fillers.front();
	ASSERT_EQ(a.p.admin(m).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(hb.used(), full - 512 * 8);
	const uint32_t qp = a.admin_ok(q);
	vrnic_admin_cmd dq = op(VRNIC_ADMIN_DESTROY_QP);
	dq.destroy.id = qp;
	ASSERT_EQ(a.p.admin(dq).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(hb.used(), full - 512 * 8);
}

// A reset restores only the slots used since the last one (it is cheap
// with few objects) but every object is gone after it, wherever its slot
// is: all charges back, every handle stale, and handles made after the
// reset differ from every one made before it.
TEST(HostBudget, AResetGivesBackEveryChargeWhereverTheObjectIs)
{
	Node a{1, true};
	const vrnic::HostBudget &hb = budget_of(a.p);
	vrnic_admin_cmd q = a.idle_qp_cmd();
	std::vector<uint32_t> qps{a.qp}, mrs;
	for (int i = 0; i < 40; i++)
		qps.push_back(a.admin_ok(q));
	for (int i = 0; i < 3000; i++) {
		vrnic_admin_cmd m = op(VRNIC_ADMIN_CREATE_MR);
		m.create_mr.pdn = a.pd;
		m.create_mr.npages = 1;
		m.create_mr.pbl_mode = VRNIC_PBL_FAST;
		mrs.push_back(a.admin_ok(m));
	}
	// Holes: the even ones go, the last slots stay used.
	for (size_t i = 0; i + 1 < qps.size(); i += 2) {
		vrnic_admin_cmd d = op(VRNIC_ADMIN_DESTROY_QP);
		d.destroy.id = qps[i];
		ASSERT_EQ(a.p.admin(d).status, VRNIC_ADMIN_ST_OK);
	}
	for (size_t i = 0; i + 1 < mrs.size(); i += 2) {
		vrnic_admin_cmd d = op(VRNIC_ADMIN_DESTROY_MR);
		d.destroy.id = mrs[i];
		ASSERT_EQ(a.p.admin(d).status, VRNIC_ADMIN_ST_OK);
	}
	ASSERT_GT(hb.used(), 0u);

	vrnic_engine_reset(a.p.eng);
	// What stays is the object tables' chunks (they keep the slots'
	// generations, so that the handles below are new).
	const uint64_t tables = a.p.eng->dev.rdma().table_bytes();
	EXPECT_GT(tables, 0u);
	EXPECT_EQ(hb.used(), tables) << "a reset kept a charge";
	EXPECT_EQ(hb.over_released(), 0u);
	for (uint32_t qpn : qps)
		EXPECT_EQ(a.p.eng->dev.rdma().qp(qpn), nullptr) << std::hex << qpn;

	a.p.aq_pi = 0;
	a.p.enable();
	vrnic_admin_cmd eq = op(VRNIC_ADMIN_CREATE_EQ);
	eq.create_eq.base = Node::kEq;
	eq.create_eq.log_depth = 6;
	eq.create_eq.eqn = 1;
	eq.create_eq.vector = 1;
	a.admin_ok(eq);
	a.pd = a.admin_ok(op(VRNIC_ADMIN_CREATE_PD));
	vrnic_admin_cmd cq = op(VRNIC_ADMIN_CREATE_CQ);
	cq.create_cq.base = Node::kCq;
	cq.create_cq.dbrec = Node::kCqDb;
	cq.create_cq.log_depth = 4;
	cq.create_cq.eqn = 1;
	a.cq = a.admin_ok(cq);
	q.create_qp.pdn = a.pd;
	q.create_qp.send_cqn = q.create_qp.recv_cqn = a.cq;
	for (size_t i = 0; i < qps.size(); i++) {
		const uint32_t qpn = a.admin_ok(q);
		EXPECT_EQ(std::count(qps.begin(), qps.end(), qpn), 0) << std::hex << qpn;
	}
	for (size_t i = 0; i < mrs.size(); i++) {
		vrnic_admin_cmd m = op(VRNIC_ADMIN_CREATE_MR);
		m.create_mr.pdn = a.pd;
		m.create_mr.npages = 1;
		m.create_mr.pbl_mode = VRNIC_PBL_FAST;
		const uint32_t key = a.admin_ok(m);
		EXPECT_EQ(std::count(mrs.begin(), mrs.end(), key), 0) << std::hex << key;
	}
}

// ------------------------------------------------------------ CQ depth

// A CQ of 2^22 entries (mlx5's max_cqe; libfabric's verbs;ofi_rxm asks
// for 262144 at its default universe size) takes completions past index
// 2^15, the old limit, and past 2^16, each at its page of the list.  Its
// 32768 ring pages are 16 real pages here, named over and over: the test
// clears a CQE's owner byte once it has read it, so an alias reads as
// empty.
TEST(CqDepth, A2To22EntryCqTakesCompletionsPastTheOldLimit)
{
	constexpr unsigned kLog = VRNIC_MAX_CQ_LOG_DEPTH;
	static_assert(kLog == 22, "the spec's Limits table says 2^22");
	constexpr uint64_t kList = B + 0x1800000;	// 32768 x 8 B
	constexpr uint64_t kPages = B + 0x1900000;	// 16 x 4 KiB
	constexpr uint64_t kDbrec = Node::kCqDb + 0x80;
	constexpr uint64_t kRingPages = (32ull << kLog) / 4096;
	Node a{1}, b{2};
	Wire wire;
	for (uint64_t i = 0; i < kRingPages; i++)
		a.p.store<uint64_t>(kList + i * 8, kPages + (i % 16) * 4096);

	vrnic_admin_cmd c = op(VRNIC_ADMIN_CREATE_CQ);
	c.create_cq.base = kList;
	c.create_cq.ring_flags = VRNIC_RING_PAGED;
	c.create_cq.dbrec = kDbrec;
	c.create_cq.log_depth = kLog + 1;
	c.create_cq.eqn = 1;
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM) << "2^23 taken";
	c.create_cq.log_depth = kLog;
	const uint64_t before = budget_of(a.p).used();
	const uint32_t deep = a.admin_ok(c);
	EXPECT_EQ(budget_of(a.p).used() - before,
		  kRingPages * 8 + 2 * vrnic::EventQueue::kHeldBytes)
		<< "the page list is what the device keeps, and it is charged";

	// A QP whose send completions go to it, on the Node's SQ memory.
	c = op(VRNIC_ADMIN_CREATE_QP);
	c.create_qp.sq_base = Node::kSq;
	c.create_qp.rq_base = Node::kRq;
	c.create_qp.dbrec = Node::kQpDb;
	c.create_qp.pdn = a.pd;
	c.create_qp.send_cqn = deep;
	c.create_qp.recv_cqn = a.cq;
	c.create_qp.sq_log_depth = Node::kSqLog;
	c.create_qp.rq_log_depth = Node::kRqLog;
	c.create_qp.sq_wqe_shift = Node::kSqShift;
	c.create_qp.rq_wqe_shift = Node::kRqShift;
	c.create_qp.type = VRNIC_QPT_RC;
	a.qp = a.admin_ok(c);
	a.connect(b, 3, 100, 200);
	b.connect(a, 3, 200, 100);

	constexpr uint32_t kTotal = (1u << 16) + 4000, kBatch = 128;	// past 16 bits
	uint32_t ci = 0;
	for (uint32_t n = 0; n < kTotal; n += kBatch) {
		for (uint32_t i = n; i < n + kBatch; i++)
			a.post_send(send_wqe(i, VRNIC_WR_RDMA_WRITE, Node::kIova, b.mr),
				    {a.sge(0, 8)});
		wire.run(a, b, [] { return false; });
		for (; ci < n + kBatch; ci++) {
			const uint64_t off = uint64_t(ci) * sizeof(vrnic_cqe);
			const uint64_t at = kPages + (off / 4096 % 16) * 4096 + off % 4096;
			const auto cqe = a.p.load<vrnic_cqe>(at);
			ASSERT_EQ(cqe.owner & VRNIC_CQE_OWNER, VRNIC_CQE_OWNER) << ci;
			ASSERT_EQ(cqe.wr_id, ci);
			ASSERT_EQ(cqe.status, VRNIC_WC_ST_SUCCESS) << ci;
			a.p.store<uint8_t>(at + offsetof(vrnic_cqe, owner), 0);
		}
		a.p.store<uint32_t>(kDbrec, ci);
	}
	EXPECT_GT(ci, 1u << 15);
	vrnic_cqe none{};
	EXPECT_FALSE(a.poll_cq(none)) << "the Node's own CQ got a send completion";
}

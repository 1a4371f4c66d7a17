// SPDX-License-Identifier: GPL-2.0-or-later
// XRC: an initiator QP on one engine, a target QP and XRC SRQs in an XRC
// domain on the other.
#include <gtest/gtest.h>

#include "rdma_node.hpp"

namespace {

constexpr uint64_t kSrqRing = Node::B + 0x44000;	// 16 x 256 B each
constexpr uint64_t kSrqDb = Node::B + 0x40200;		// 8 B each

struct Xrc : ::testing::Test {
	Node a{1, false, Node::kCqLog, VRNIC_QPT_XRC_INI};
	Node b{2};
	Wire wire;
	uint32_t xrcd = 0, tgt = 0;

	void SetUp() override
	{
		vrnic_admin_cmd c{};
		c.opcode = VRNIC_ADMIN_ALLOC_XRCD;
		xrcd = b.admin_ok(c);
		c = {};
		c.opcode = VRNIC_ADMIN_CREATE_QP;
		c.create_qp.type = VRNIC_QPT_XRC_TGT;
		c.create_qp.xrcdn = xrcd;
		tgt = b.admin_ok(c);
		b.qp = tgt;	// b's side of the connection
		a.connect(b, 3, 100, 900);
		b.connect(a, 3, 900, 100);
	}
	// An XRC SRQ on b (ring slot n) in domain x, completing on b's CQ,
	// with `posted` receive WQEs of 4 KiB at data(0x10000 + n * 0x40000).
	uint32_t xrc_srq(unsigned n, uint32_t x, uint32_t posted)
	{
		const uint64_t ring = kSrqRing + n * 0x1000, db = kSrqDb + n * 8;
		const uint32_t srqn = b.create_srq(ring, db, VRNIC_SRQT_XRC, b.cq, x);
		b.post_srq(ring, db, posted, n * 100, 0x10000 + n * 0x40000);
		return srqn;
	}
	vrnic_send_wqe wqe(uint8_t op, uint64_t wr_id, uint32_t srqn,
			   uint64_t raddr = 0)
	{
		vrnic_send_wqe w{};
		w.wr_id = wr_id;
		w.opcode = op;
		w.flags = VRNIC_WQE_SIGNALED;
		w.xrc_srqn = srqn;
		w.remote_addr = raddr;
		w.rkey = b.mr;
		return w;
	}
	uint8_t admin_status(vrnic_admin_cmd c) { return b.p.admin(c).status; }
};

} // namespace

TEST_F(Xrc, SendsLandInTheNamedSrqAndCompleteOnItsCq)
{
	const uint32_t s0 = xrc_srq(0, xrcd, 4), s1 = xrc_srq(1, xrcd, 4);
	// Alternate between the two SRQs through one QP pair.
	for (uint32_t i = 0; i < 6; i++)
		a.post_send(wqe(VRNIC_WR_SEND, i, i % 2 ? s1 : s0),
			    {a.sge(i * 0x2000, 3000 + i)});
	const auto sc = wire.completions(a, b, a, 6);
	ASSERT_EQ(sc.size(), 6u);
	const auto rc = wire.completions(a, b, b, 6);
	ASSERT_EQ(rc.size(), 6u);
	for (uint32_t i = 0; i < 6; i++) {
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS);
		const uint32_t n = i % 2, k = i / 2;
		EXPECT_EQ(rc[i].wr_id, n * 100 + k);
		EXPECT_EQ(rc[i].qpn, tgt);
		EXPECT_EQ(rc[i].byte_len, 3000 + i);
		EXPECT_EQ(std::memcmp(b.data(0x10000 + n * 0x40000 + k * 0x1000),
				      a.data(i * 0x2000), 3000 + i), 0);
	}
	// Each SRQ's consumer index moved by its own three.
	EXPECT_EQ(b.p.load<uint32_t>(kSrqDb + 4), 3u);
	EXPECT_EQ(b.p.load<uint32_t>(kSrqDb + 8 + 4), 3u);
}

TEST_F(Xrc, RdmaAndAtomicsUseTheSrqsPd)
{
	const uint32_t s0 = xrc_srq(0, xrcd, 1);
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 1, s0, Node::kIova + 0x300000),
		    {a.sge(0, 20000)});
	a.post_send(wqe(VRNIC_WR_RDMA_READ, 2, s0, Node::kIova + 0x500000),
		    {a.sge(0x100000, 9000)});
	auto fa = wqe(VRNIC_WR_ATOMIC_FETCH_ADD, 3, s0, Node::kIova + 0x600000);
	fa.compare_add = 7;
	std::memset(b.data(0x600000), 0, 8);
	a.post_send(fa, {a.sge(0x200000, 8)});
	const auto sc = wire.completions(a, b, a, 3);
	ASSERT_EQ(sc.size(), 3u);
	for (const auto &c : sc)
		EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(std::memcmp(b.data(0x300000), a.data(0), 20000), 0);
	EXPECT_EQ(std::memcmp(a.data(0x100000), b.data(0x500000), 9000), 0);
	EXPECT_EQ(b.p.load<uint64_t>(Node::kData + 0x600000), 7u);
}

TEST_F(Xrc, AnSrqOfAnotherDomainOrKindIsAnInvalidRequest)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_ALLOC_XRCD;
	const uint32_t other = b.admin_ok(c);
	const uint32_t foreign = xrc_srq(0, other, 4);
	a.post_send(wqe(VRNIC_WR_SEND, 1, foreign), {a.sge(0, 64)});
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_REM_INV_REQ_ERR);
	EXPECT_EQ(b.p.load<uint32_t>(kSrqDb + 4), 0u) << "a WQE was taken";
}

TEST_F(Xrc, DomainsAndTargetsAreCheckedByAdmin)
{
	const uint32_t s0 = xrc_srq(0, xrcd, 0);
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_DEALLOC_XRCD;
	c.destroy.id = xrcd;
	EXPECT_EQ(admin_status(c), VRNIC_ADMIN_ST_BUSY);	// SRQ and QP in it
	// A target needs a domain and has no CQs, PD or SRQ of its own.
	c = {};
	c.opcode = VRNIC_ADMIN_CREATE_QP;
	c.create_qp.type = VRNIC_QPT_XRC_TGT;
	c.create_qp.xrcdn = xrcd + 1;
	EXPECT_EQ(admin_status(c), VRNIC_ADMIN_ST_BAD_PARAM);
	c.create_qp.xrcdn = xrcd;
	c.create_qp.recv_cqn = b.cq;
	EXPECT_EQ(admin_status(c), VRNIC_ADMIN_ST_BAD_PARAM);
	// An XRC SRQ needs a domain and a CQ; its CQ stays in use.
	c = {};
	c.opcode = VRNIC_ADMIN_DESTROY_CQ;
	c.destroy.id = b.cq;
	EXPECT_EQ(admin_status(c), VRNIC_ADMIN_ST_BUSY);
	c = {};
	c.opcode = VRNIC_ADMIN_DESTROY_SRQ;
	c.destroy.id = s0;
	EXPECT_EQ(admin_status(c), VRNIC_ADMIN_ST_OK);
	c = {};
	c.opcode = VRNIC_ADMIN_DESTROY_QP;
	c.destroy.id = tgt;
	EXPECT_EQ(admin_status(c), VRNIC_ADMIN_ST_OK);
	c = {};
	c.opcode = VRNIC_ADMIN_DEALLOC_XRCD;
	c.destroy.id = xrcd;
	EXPECT_EQ(admin_status(c), VRNIC_ADMIN_ST_OK);
}

TEST_F(Xrc, AnInitiatorReceivesNothing)
{
	// a's QP has no RQ: a SEND from b's side cannot even be expressed
	// (b's QP is a target), and posting a receive doorbell does nothing.
	a.post_recv(1, {a.sge(0, 64)});
	vrnic_cqe e;
	wire.run(a, b, [] { return false; }, 1000);
	EXPECT_FALSE(a.poll_cq(e));
}

// Review F1: a target in the middle of a message keeps nothing of an SRQ
// that is destroyed under it, so no later object that reuses the SRQ's or
// its CQ's slot (here after the 4096 cycles that wrapped a 12-bit
// generation) receives that message's data or completions.
TEST_F(Xrc, ASrqDestroyedMidMessageLeavesNothingForItsSuccessors)
{
	constexpr uint64_t kCq2 = Node::kData + 0xf00000;	// 16 CQEs
	constexpr uint64_t kCq2Db = Node::kData + 0xf10000;
	auto create_cq = [&] {
		vrnic_admin_cmd c{};
		c.opcode = VRNIC_ADMIN_CREATE_CQ;
		c.create_cq.base = kCq2;
		c.create_cq.dbrec = kCq2Db;
		c.create_cq.log_depth = 4;
		c.create_cq.eqn = 1;
		return b.admin_ok(c);
	};
	auto destroy = [&](uint8_t op, uint32_t id) {
		vrnic_admin_cmd c{};
		c.opcode = op;
		c.destroy.id = id;
		return admin_status(c);
	};
	const uint32_t cq2 = create_cq();
	const uint32_t srq = b.create_srq(kSrqRing, kSrqDb, VRNIC_SRQT_XRC, cq2, xrcd);
	b.post_srq(kSrqRing, kSrqDb, 1, 0xa77ac4, 0x10000);

	// A three-packet SEND; the target takes the WQE with the first one.
	a.post_send(wqe(VRNIC_WR_SEND, 1, srq), {a.sge(0, 3000)});
	run_alone(a);
	ASSERT_EQ(a.p.frames.size(), 3u);
	auto rest = std::vector(a.p.frames.begin() + 1, a.p.frames.end());
	a.p.frames.resize(1);
	wire.deliver(a, b);
	ASSERT_EQ(b.p.load<uint32_t>(kSrqDb + 4), 1u) << "the WQE was taken";

	ASSERT_EQ(destroy(VRNIC_ADMIN_DESTROY_SRQ, srq), VRNIC_ADMIN_ST_OK);
	ASSERT_EQ(destroy(VRNIC_ADMIN_DESTROY_CQ, cq2), VRNIC_ADMIN_ST_OK);
	// Cycle CQs until one has the old handle, or give up after more than
	// a 12-bit generation's worth; the last one stays as the victim.
	uint32_t victim = 0;
	for (int i = 0; i < 4100; i++) {
		std::memset(b.p.ptr(kCq2), 0, 16 * sizeof(vrnic_cqe));
		victim = create_cq();
		if (victim == cq2 || i == 4099)
			break;
		ASSERT_EQ(destroy(VRNIC_ADMIN_DESTROY_CQ, victim), VRNIC_ADMIN_ST_OK);
	}
	// The rest of the message arrives; the target refuses it.
	const std::vector<uint8_t> before(b.data(0x10000), b.data(0x10000) + 4096);
	a.p.frames = rest;
	const auto sc = wire.completions(a, b, a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_NE(sc[0].status, VRNIC_WC_ST_SUCCESS);
	wire.run(a, b, [] { return false; }, 1000);
	const std::vector<uint8_t> zero(16 * sizeof(vrnic_cqe));
	EXPECT_EQ(std::memcmp(b.p.ptr(kCq2), zero.data(), zero.size()), 0)
		<< "a completion of the destroyed SRQ's WQE reached CQ " << std::hex
		<< victim << " (the destroyed CQ was " << cq2 << ")";
	EXPECT_EQ(std::memcmp(b.data(0x10000), before.data(), before.size()), 0)
		<< "data of the message landed after its SRQ was destroyed";
}

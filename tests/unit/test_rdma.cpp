// SPDX-License-Identifier: GPL-2.0-or-later
// The RC transport between two engines over a simulated wire.
#include <algorithm>

#include <gtest/gtest.h>

#include "engine_internal.hpp"
#include "rdma_node.hpp"

namespace {

vrnic_send_wqe wqe(uint8_t opcode, uint64_t wr_id, uint64_t raddr = 0,
		   uint32_t rkey = 0, bool signaled = true)
{
	vrnic_send_wqe w{};
	w.wr_id = wr_id;
	w.opcode = opcode;
	w.flags = signaled ? VRNIC_WQE_SIGNALED : 0;
	w.remote_addr = raddr;
	w.rkey = rkey;
	return w;
}

vrnic_send_wqe atomic_write(uint64_t wr_id, uint64_t raddr, uint64_t value,
			    uint32_t rkey = 0)
{
	vrnic_send_wqe w = wqe(VRNIC_WR_ATOMIC_WRITE, wr_id, raddr, rkey);
	w.compare_add = value;	// little-endian host: the bytes in memory
	return w;
}

vrnic_send_wqe flush(uint64_t wr_id, uint64_t raddr, uint64_t len,
		     uint8_t type, uint8_t level = VRNIC_FLUSH_RANGE,
		     uint32_t rkey = 0)
{
	vrnic_send_wqe w = wqe(VRNIC_WR_FLUSH, wr_id, raddr, rkey);
	w.compare_add = len;
	w.swap = type | level << VRNIC_FLUSH_LEVEL_SHIFT;
	return w;
}

struct Pair : ::testing::Test {
	Node a{1}, b{2};
	Wire wire;

	void connect(uint32_t mtu_code = 3, uint32_t psn_a = 100,
		     uint32_t psn_b = 5000, uint8_t retry = 7,
		     uint8_t rnr = 7)
	{
		a.connect(b, mtu_code, psn_a, psn_b, retry, rnr);
		b.connect(a, mtu_code, psn_b, psn_a, retry, rnr);
	}
	// Wait for n completions on node; returns them in order.
	std::vector<vrnic_cqe> wait(Node &n, size_t count)
	{
		return wire.completions(a, b, n, count);
	}
	// Post one WQE on a; the status of its completion (0xff: none).
	uint8_t status_of(const vrnic_send_wqe &w, const std::vector<vrnic_sge> &sges)
	{
		a.post_send(w, sges);
		const auto sc = wait(a, 1);
		return sc.size() == 1 ? sc[0].status : uint8_t(0xff);
	}
	bool same(Node &x, uint64_t xo, Node &y, uint64_t yo, size_t len)
	{
		return std::memcmp(x.data(xo), y.data(yo), len) == 0;
	}
};

} // namespace

// ----------------------------------------------------------- every opcode

struct Opcodes : Pair, ::testing::WithParamInterface<uint32_t> {};

TEST_P(Opcodes, AllRcOpcodesMoveTheRightBytes)
{
	const uint32_t mtu_code = GetParam();
	const uint32_t mtu = 128u << mtu_code;
	connect(mtu_code);
	const uint32_t len = 5 * mtu + 77;	// several packets and a tail

	// SEND and SEND with immediate
	b.post_recv(11, {b.sge(0x10000, len)});
	b.post_recv(12, {b.sge(0x30000, len)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, len)});
	auto w = wqe(VRNIC_WR_SEND_IMM, 2);
	w.imm_data = 0x12345678;
	a.post_send(w, {a.sge(0x1000, 100), a.sge(0x5000, len - 100)});
	auto rc = wait(b, 2);
	ASSERT_EQ(rc.size(), 2u);
	EXPECT_EQ(rc[0].wr_id, 11u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(rc[0].byte_len, len);
	EXPECT_EQ(rc[0].opcode, VRNIC_WC_RECV);
	EXPECT_TRUE(same(b, 0x10000, a, 0, len));
	EXPECT_EQ(rc[1].imm_data, 0x12345678u);
	EXPECT_EQ(rc[1].wc_flags & VRNIC_CQE_WITH_IMM, VRNIC_CQE_WITH_IMM);
	EXPECT_TRUE(same(b, 0x30000, a, 0x1000, 100));
	EXPECT_TRUE(same(b, 0x30000 + 100, a, 0x5000, len - 100));
	auto sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].wr_id, 1u);
	EXPECT_EQ(sc[1].wr_id, 2u);
	EXPECT_EQ(sc[1].opcode, VRNIC_WC_SEND);
	EXPECT_EQ(sc[0].wqe_idx, 0u) << "send CQEs name their SQ slot";
	EXPECT_EQ(sc[1].wqe_idx, 1u);
	EXPECT_EQ(rc[1].wqe_idx, 1u) << "receive CQEs name their RQ slot";

	// RDMA WRITE and WRITE with immediate
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 3, Node::kIova + 0x100000, b.mr),
		    {a.sge(0x200000, len)});
	b.post_recv(13, {});
	w = wqe(VRNIC_WR_RDMA_WRITE_IMM, 4, Node::kIova + 0x180000, b.mr);
	w.imm_data = 0xabcdef01;
	a.post_send(w, {a.sge(0x280000, len)});
	sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].opcode, VRNIC_WC_RDMA_WRITE);
	EXPECT_EQ(sc[1].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(b, 0x100000, a, 0x200000, len));
	EXPECT_TRUE(same(b, 0x180000, a, 0x280000, len));
	rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].opcode, VRNIC_WC_RECV_RDMA_WITH_IMM);
	EXPECT_EQ(rc[0].byte_len, len);
	EXPECT_EQ(rc[0].imm_data, 0xabcdef01u);

	// RDMA READ
	a.post_send(wqe(VRNIC_WR_RDMA_READ, 5, Node::kIova + 0x300000, b.mr),
		    {a.sge(0x400000, len)});
	sc = wait(a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].opcode, VRNIC_WC_RDMA_READ);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(a, 0x400000, b, 0x300000, len));

	// Atomics on an 8-byte word of b
	const uint64_t target = 0x500000;
	std::memset(b.data(target), 0, 8);
	auto fa = wqe(VRNIC_WR_ATOMIC_FETCH_ADD, 6, Node::kIova + target, b.mr);
	fa.compare_add = 5;
	a.post_send(fa, {a.sge(0x600000, 8)});
	auto cs = wqe(VRNIC_WR_ATOMIC_CMP_SWP, 7, Node::kIova + target, b.mr);
	cs.compare_add = 5;
	cs.swap = 0x1122334455667788ull;
	a.post_send(cs, {a.sge(0x600008, 8)});
	sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].opcode, VRNIC_WC_FETCH_ADD);
	EXPECT_EQ(sc[1].opcode, VRNIC_WC_CMP_SWP);
	uint64_t v, o1, o2;
	std::memcpy(&v, b.data(target), 8);
	std::memcpy(&o1, a.data(0x600000), 8);
	std::memcpy(&o2, a.data(0x600008), 8);
	EXPECT_EQ(o1, 0u);
	EXPECT_EQ(o2, 5u);
	EXPECT_EQ(v, 0x1122334455667788ull);
}

INSTANTIATE_TEST_SUITE_P(Mtu, Opcodes, ::testing::Values(1u, 3u, 5u),
			 [](const auto &info) {
				 return "mtu" + std::to_string(128u << info.param);
			 });

TEST_F(Pair, InlineSendAndZeroLengthMessages)
{
	connect();
	b.post_recv(1, {b.sge(0x1000, 256)});
	b.post_recv(2, {b.sge(0x2000, 256)});
	std::vector<uint8_t> inl(200);
	for (size_t i = 0; i < inl.size(); i++)
		inl[i] = uint8_t(i ^ 0x33);
	a.post_send(wqe(VRNIC_WR_SEND, 1), {}, inl);
	a.post_send(wqe(VRNIC_WR_SEND, 2), {});
	auto rc = wait(b, 2);
	ASSERT_EQ(rc.size(), 2u);
	EXPECT_EQ(rc[0].byte_len, 200u);
	EXPECT_EQ(std::memcmp(b.data(0x1000), inl.data(), 200), 0);
	EXPECT_EQ(rc[1].byte_len, 0u);
	EXPECT_EQ(rc[1].status, VRNIC_WC_ST_SUCCESS);
}

TEST_F(Pair, PsnWrapsAcross2To24)
{
	connect(1, 0xfffff0, 0xfffffa);	// MTU 256: 64 KiB = 256 packets
	const uint32_t len = 64 << 10;
	b.post_recv(1, {b.sge(0x100000, len)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, len)});
	a.post_send(wqe(VRNIC_WR_RDMA_READ, 2, Node::kIova + 0x200000, b.mr),
		    {a.sge(0x300000, len)});
	auto sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(sc[1].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(b, 0x100000, a, 0, len));
	EXPECT_TRUE(same(a, 0x300000, b, 0x200000, len));
}

// --------------------------------------------------------- lossy wire

// Loss rate, and whether the QPs agreed to selective repeat.
struct Lossy : Pair, ::testing::WithParamInterface<std::tuple<double, bool>> {
	double rate = std::get<0>(GetParam());

	void SetUp() override
	{
		if (std::get<1>(GetParam()))
			a.transport_flags = b.transport_flags =
				VRNIC_QP_TF_SELECTIVE_REPEAT;
	}
	// At a loss rate, the 10th frame is lost whatever the draws: the
	// recovery runs even when few frames are sent.
	void lose_one()
	{
		if (rate > 0)
			wire.drop_if = [n = 0](const std::vector<uint8_t> &) mutable {
				return ++n == 10;
			};
	}
};

TEST_P(Lossy, DataIntactInOrderAndAtomicsOnce)
{
	wire.drop = rate;
	wire.reorder = rate;
	wire.dup = rate;
	lose_one();
	connect(3);
	const unsigned n = 40;
	const uint64_t counter = 0xf00000;
	std::memset(b.data(counter), 0, 8);
	for (unsigned i = 0; i < n; i++)
		b.post_recv(100 + i, {b.sge(0x100000 + i * 0x8000, 0x8000)});
	for (unsigned i = 0; i < n; i++) {
		const uint32_t len = 1000 + i * 700;
		switch (i % 4) {
		case 0:
			a.post_send(wqe(VRNIC_WR_SEND, i), {a.sge(i * 0x8000, len)});
			break;
		case 1:
			a.post_send(wqe(VRNIC_WR_RDMA_WRITE, i,
					Node::kIova + 0x500000 + i * 0x8000, b.mr),
				    {a.sge(i * 0x8000, len)});
			break;
		case 2:
			a.post_send(wqe(VRNIC_WR_RDMA_READ, i,
					Node::kIova + 0x900000 + i * 0x8000, b.mr),
				    {a.sge(0x500000 + i * 0x8000, len)});
			break;
		default: {
			auto fa = wqe(VRNIC_WR_ATOMIC_FETCH_ADD, i,
				      Node::kIova + counter, b.mr);
			fa.compare_add = 1;
			a.post_send(fa, {a.sge(0xa00000 + i * 8, 8)});
			break;
		}
		}
	}
	auto sc = wait(a, n);
	if (sc.size() != n) {
		const auto *q = a.p.eng->dev.rdma().qp(a.qp);
		const auto *r = b.p.eng->dev.rdma().qp(b.qp);
		fprintf(stderr, "a: inflight %zu send_idx %zu off %u una %x next %x ack %lu rnr %lu state %u\n",
			q->inflight.size(), q->send_idx, q->send_off, q->una_psn, q->next_psn,
			(unsigned long)q->ack_deadline, (unsigned long)q->rnr_deadline, q->attr.state);
		if (!q->inflight.empty())
			fprintf(stderr, "front op %u first %x last %x resp %x done %d\n", q->inflight[0].opcode,
				q->inflight[0].psn_first, q->inflight[0].psn_last, q->inflight[0].resp_psn, q->inflight[0].done);
		fprintf(stderr, "b: epsn %x state %u res %zu resp_state %u\n", r->epsn, r->attr.state, r->resources.size(), r->resp_state);
	}
	ASSERT_EQ(sc.size(), n) << "dropped " << wire.dropped;
	for (unsigned i = 0; i < n; i++) {
		EXPECT_EQ(sc[i].wr_id, i) << "completions out of order";
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS) << i;
	}
	auto rc = wait(b, n / 4);
	ASSERT_EQ(rc.size(), n / 4);
	for (unsigned k = 0; k < n / 4; k++) {
		const unsigned i = k * 4;
		EXPECT_EQ(rc[k].wr_id, 100 + k);
		EXPECT_EQ(rc[k].byte_len, 1000 + i * 700);
		EXPECT_TRUE(same(b, 0x100000 + k * 0x8000, a, i * 0x8000, 1000 + i * 700));
	}
	for (unsigned i = 1; i < n; i += 4)
		EXPECT_TRUE(same(b, 0x500000 + i * 0x8000, a, i * 0x8000, 1000 + i * 700));
	for (unsigned i = 2; i < n; i += 4)
		EXPECT_TRUE(same(a, 0x500000 + i * 0x8000, b, 0x900000 + i * 0x8000,
				 1000 + i * 700));
	uint64_t count;
	std::memcpy(&count, b.data(counter), 8);
	EXPECT_EQ(count, n / 4) << "an atomic ran more or less than once";
	std::vector<uint64_t> seen;
	for (unsigned i = 3; i < n; i += 4) {
		uint64_t o;
		std::memcpy(&o, a.data(0xa00000 + i * 8), 8);
		seen.push_back(o);
	}
	std::sort(seen.begin(), seen.end());
	for (size_t k = 0; k < seen.size(); k++)
		EXPECT_EQ(seen[k], k) << "fetch-add results are not 0..n-1";
	if (rate > 0) {
		EXPECT_GT(wire.dropped, 0u);
	}
}

// ATOMIC_WRITE and FLUSH under loss, duplication and reordering: each
// write lands once and in order (a late duplicate of an older one never
// overwrites a newer value), each FLUSH is answered once.
TEST_P(Lossy, AtomicWritesLandInOrderAndFlushesComplete)
{
	wire.drop = rate;
	wire.reorder = rate;
	wire.dup = rate;
	lose_one();
	connect(3);
	const uint64_t word = 0x700000;
	const unsigned n = 60;
	for (unsigned i = 0; i < n; i++) {
		if (i % 3 == 2) {
			a.post_send(flush(i, Node::kIova + word, 8,
					  VRNIC_FLUSH_GLOBAL, VRNIC_FLUSH_RANGE,
					  b.mr), {});
			continue;
		}
		a.post_send(atomic_write(i, Node::kIova + word, 1000 + i, b.mr),
			    {});
	}
	auto sc = wait(a, n);
	ASSERT_EQ(sc.size(), n) << "dropped " << wire.dropped;
	for (unsigned i = 0; i < n; i++) {
		EXPECT_EQ(sc[i].wr_id, i);
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS) << i;
		EXPECT_EQ(sc[i].opcode, i % 3 == 2 ? VRNIC_WC_FLUSH :
			  VRNIC_WC_ATOMIC_WRITE);
	}
	uint64_t v;
	std::memcpy(&v, b.data(word), 8);
	EXPECT_EQ(v, 1000u + n - 2);
	if (rate > 0) {
		EXPECT_GT(wire.dropped, 0u);
	}
}

INSTANTIATE_TEST_SUITE_P(Rates, Lossy,
			 ::testing::Combine(::testing::Values(0.0, 0.01, 0.05, 0.10),
					    ::testing::Bool()),
			 [](const auto &info) {
				 return "pct" + std::to_string(int(std::get<0>(info.param) * 100)) +
					(std::get<1>(info.param) ? "_sr" : "_gbn");
			 });

TEST_F(Pair, CorruptedPacketsAreDroppedByTheIcrc)
{
	wire.corrupt = 0.05;
	connect(3);
	const uint32_t len = 256 << 10;
	b.post_recv(1, {b.sge(0x100000, len)});
	EXPECT_EQ(status_of(wqe(VRNIC_WR_SEND, 1), {a.sge(0, len)}), VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(b, 0x100000, a, 0, len));
	EXPECT_GT(wire.corrupted, 0u);
}

TEST_F(Pair, MessagesLongerThanTheAckTimeoutComplete)
{
	// 4 MiB at MTU 256 is 16384 packets; at 20 us each a message takes
	// 330 ms, five ack timeouts (timeout 14: 67 ms).  Partial ACKs must
	// count as progress, so nothing is retried and nothing fails.
	wire.ns_per_frame = 20000;
	connect(1, 100, 200, /*retry=*/3);
	const uint32_t len = 4 << 20;
	b.post_recv(1, {b.sge(0x400000, len)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, len)});
	a.post_send(wqe(VRNIC_WR_RDMA_READ, 2, Node::kIova + 0x800000, b.mr),
		    {a.sge(0xc00000, len)});
	auto sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(sc[1].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(b, 0x400000, a, 0, len));
	EXPECT_TRUE(same(a, 0xc00000, b, 0x800000, len));
	EXPECT_GT(a.p.now, 5 * (4096ull << 14));
	EXPECT_EQ(a.counters().retry_timeouts, 0u);
}

// A SEND behind a READ: the responder's ACK of the SEND must not leave
// before the READ's response (IBA: responses in PSN order).  Found with
// UCX over vrnic (issue 16): UCX's rendezvous READs data while it SENDs
// control messages on the same QP.  An ACK that overtakes the response
// is, to the requester, an ACK past an unanswered READ: an implied NAK,
// so it asks again, and the responder, replaying a READ whose first
// response is still in flight, sent responses out of order and at last
// refused a new READ for want of a free responder resource (QP fatal).
TEST_F(Pair, AckOfASendBehindAReadWaitsForTheReadResponse)
{
	connect(5);	// MTU 4096
	for (uint32_t i = 0; i < 8 * 0x20000; i++)
		*b.data(0x400000 + i) = uint8_t(i * 7 + i / 251);
	for (int i = 0; i < 8; i++) {
		const uint64_t off = uint64_t(i) * 0x20000;
		b.post_recv(100 + i, {b.sge(0x800000 + off, 64)});
		a.post_send(wqe(VRNIC_WR_RDMA_READ, 2 * i,
				Node::kIova + 0x400000 + off, b.mr),
			    {a.sge(off, 65536)});
		a.post_send(wqe(VRNIC_WR_SEND, 2 * i + 1), {a.sge(0x200000, 64)});
	}
	auto sc = wait(a, 16);
	ASSERT_EQ(sc.size(), 16u);
	for (size_t i = 0; i < sc.size(); i++) {
		EXPECT_EQ(sc[i].wr_id, i);
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS) << "wr " << i;
	}
	for (uint64_t i = 0; i < 8; i++)
		EXPECT_TRUE(same(a, i * 0x20000, b, 0x400000 + i * 0x20000,
				 65536)) << "READ " << i;
	EXPECT_EQ(b.counters().duplicate_request, 0u)
		<< "the requester asked again: an ACK overtook a READ response";
}

// ------------------------------------------------------ error statuses

TEST_F(Pair, RetryExhaustionIsRetryExcErr)
{
	connect(3, 100, 200, /*retry=*/3);
	wire.drop = 1.0;
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 9, Node::kIova, b.mr), {a.sge(0, 100)});
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 10, Node::kIova, b.mr), {a.sge(0, 100)});
	auto sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].wr_id, 9u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_RETRY_EXC_ERR);
	EXPECT_EQ(sc[1].status, VRNIC_WC_ST_WR_FLUSH_ERR);
	EXPECT_GE(a.p.now, 4 * (4096ull << 14)) << "gave up before 1 + 3 timeouts";
}

TEST_F(Pair, RnrExhaustionIsRnrRetryExcErr)
{
	connect(3, 100, 200, 7, /*rnr=*/2);
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 64)});	// b posted nothing
	auto sc = wait(a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_RNR_RETRY_EXC_ERR);
}

TEST_F(Pair, RnrThenReceivePostedCompletes)
{
	connect(3);
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 3000)});
	wire.run(a, b, [] { return false; }, 20);	// a few RNR rounds
	b.post_recv(7, {b.sge(0x1000, 4096)});
	auto sc = wait(a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(b, 0x1000, a, 0, 3000));
}

TEST_F(Pair, BadRkeyIsRemoteAccessErrorAndTargetUntouched)
{
	connect(3);
	std::vector<uint8_t> before(b.data(0x100000), b.data(0x100000) + 4096);
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 1, Node::kIova + 0x100000, b.mr ^ 0x1),
		    {a.sge(0, 4096)});
	auto sc = wait(a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_REM_ACCESS_ERR);
	EXPECT_EQ(std::memcmp(before.data(), b.data(0x100000), 4096), 0);
}

TEST_F(Pair, OutOfBoundsAccessIsRemoteAccessError)
{
	connect(3);
	// A small MR with remote write only; write past its end and read it.
	const uint32_t small = b.create_mr(0x10000000, 0x800000, 8192,
					   VRNIC_ACCESS_LOCAL_WRITE |
					   VRNIC_ACCESS_REMOTE_WRITE);
	std::vector<uint8_t> before(b.data(0x800000), b.data(0x800000) + 16384);
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 1, 0x10000000 + 4096, small),
		    {a.sge(0, 8192)});
	auto sc = wait(a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_REM_ACCESS_ERR);
	EXPECT_EQ(std::memcmp(before.data(), b.data(0x800000), 16384), 0);
}

TEST_F(Pair, ReadWithoutRemoteReadRightIsRemoteAccessError)
{
	connect(3);
	const uint32_t wo = b.create_mr(0x20000000, 0x800000, 8192,
					VRNIC_ACCESS_LOCAL_WRITE |
					VRNIC_ACCESS_REMOTE_WRITE);
	EXPECT_EQ(status_of(wqe(VRNIC_WR_RDMA_READ, 1, 0x20000000, wo), {a.sge(0, 64)}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Pair, BadLkeyIsLocalProtectionErrorThenFlush)
{
	connect(3);
	b.post_recv(1, {b.sge(0, 4096)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 64, a.mr + 0x100)});
	a.post_send(wqe(VRNIC_WR_SEND, 2), {a.sge(0, 64)});
	auto sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_LOC_PROT_ERR);
	EXPECT_EQ(sc[1].status, VRNIC_WC_ST_WR_FLUSH_ERR);
	// The QP is in ERR: new work is flushed too.
	EXPECT_EQ(status_of(wqe(VRNIC_WR_SEND, 3), {a.sge(0, 64)}),
		  VRNIC_WC_ST_WR_FLUSH_ERR);
}

TEST_F(Pair, RecvTooSmallIsLocalLengthError)
{
	connect(3);
	b.post_recv(1, {b.sge(0, 100)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 5000)});
	auto rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_LOC_LEN_ERR);
	auto sc = wait(a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_REM_INV_REQ_ERR);
}

// ------------------------------------------------- state and ownership

TEST_F(Pair, IllegalTransitionsAreRefused)
{
	vrnic_qp_attr at{};
	at.state = VRNIC_QPS_RTS;
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_BAD_PARAM);
	at.state = VRNIC_QPS_RTR;
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_BAD_PARAM);
	at.state = VRNIC_QPS_INIT;
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
	at.state = VRNIC_QPS_RTR;	// missing the required attributes
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_PATH_MTU, at),
		  VRNIC_ADMIN_ST_BAD_PARAM);
	at.state = VRNIC_QPS_INIT;
	at.path_mtu = 9;
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE | VRNIC_QP_ATTR_PATH_MTU, at),
		  VRNIC_ADMIN_ST_BAD_PARAM) << "PATH_MTU is not an INIT attribute";
	at.state = VRNIC_QPS_ERR;
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
	at.state = VRNIC_QPS_RESET;
	EXPECT_EQ(a.modify(VRNIC_QP_ATTR_STATE, at), VRNIC_ADMIN_ST_OK);
}

TEST_F(Pair, DoorbellsOnlyForTheOwningContext)
{
	connect();
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_UCTX;
	const uint32_t page = a.admin_ok(c);
	const uint32_t v0 = a.p.rd(VRNIC_REG_CNT_DB_VIOLATIONS);
	a.p.db(page, VRNIC_DB_SQ, a.qp);		// kernel QP from a user page
	a.p.db(page, VRNIC_DB_CQ_ARM, a.cq | 1u << 24);
	a.p.db(0, VRNIC_DB_SQ, a.qp ^ (1u << VRNIC_OBJ_INDEX_BITS));	// stale generation
	EXPECT_EQ(a.p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), v0 + 3);
	// The context cannot go while it owns nothing, but can when empty.
	c.opcode = VRNIC_ADMIN_DESTROY_UCTX;
	c.destroy.id = page;
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_OK);
}

TEST_F(Pair, ObjectsInUseCannotBeDestroyed)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_DESTROY_CQ;
	c.destroy.id = a.cq;
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_BUSY);
	c.opcode = VRNIC_ADMIN_DESTROY_PD;
	c.destroy.id = a.pd;
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_BUSY);
	c.opcode = VRNIC_ADMIN_DESTROY_QP;
	c.destroy.id = a.qp;
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_NOT_FOUND) << "stale QPN";
	c.opcode = VRNIC_ADMIN_DESTROY_CQ;
	c.destroy.id = a.cq;
	EXPECT_EQ(a.p.admin(c).status, VRNIC_ADMIN_ST_OK);
}

TEST_F(Pair, CompletionEventAfterArm)
{
	connect();
	b.post_recv(1, {b.sge(0, 64)});
	b.p.db(0, VRNIC_DB_CQ_ARM, b.cq | VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CMD, VRNIC_CQ_ARM_NEXT));
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 64)});
	auto rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	const auto eqe = b.p.load<vrnic_eqe>(Node::kEq);
	EXPECT_EQ(eqe.type, VRNIC_EQE_CQ);
	EXPECT_EQ(eqe.id, b.cq);
}

// A posted arm can reach the device after a completion the consumer has
// not polled yet (vfio-user doorbells are messages; on PCIe too): the
// device reads the consumer index from the CQ's doorbell record at the arm
// and posts the event at once when completions are waiting, as a NIC whose
// arm carries the consumer index does.  Otherwise the consumer, which
// polled an empty CQ before the completion, waits for an event forever.
TEST_F(Pair, ArmAfterAnUnpolledCompletionPostsTheEventAtOnce)
{
	connect();
	b.post_recv(1, {b.sge(0, 64)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 64)});
	wire.run(a, b, [&] { return (b.p.load<vrnic_cqe>(Node::kCq).owner & VRNIC_CQE_OWNER) != 0; });
	EXPECT_EQ(b.p.load<vrnic_eqe>(Node::kEq).type, 0) << "not armed: no event yet";
	b.p.db(0, VRNIC_DB_CQ_ARM, b.cq | VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CMD, VRNIC_CQ_ARM_NEXT));
	const auto eqe = b.p.load<vrnic_eqe>(Node::kEq);
	EXPECT_EQ(eqe.type, VRNIC_EQE_CQ);
	EXPECT_EQ(eqe.id, b.cq);
	// Polled (the record says so): the next arm waits for the next one.
	vrnic_cqe c;
	ASSERT_TRUE(b.poll_cq(c));
	b.p.db(0, VRNIC_DB_CQ_ARM, b.cq | VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CMD, VRNIC_CQ_ARM_NEXT));
	EXPECT_EQ(b.p.load<vrnic_eqe>(Node::kEq + sizeof(vrnic_eqe)).type, 0);
	b.post_recv(2, {b.sge(0, 64)});
	a.post_send(wqe(VRNIC_WR_SEND, 2), {a.sge(0, 64)});
	wait(b, 1);
	EXPECT_EQ(b.p.load<vrnic_eqe>(Node::kEq + sizeof(vrnic_eqe)).type, VRNIC_EQE_CQ);
}

TEST_F(Pair, SolicitedArmFiresAtOnceOnlyForAWaitingSolicitedCompletion)
{
	connect();
	b.post_recv(1, {b.sge(0, 64)});
	b.post_recv(2, {b.sge(0, 64)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 64)});
	wire.run(a, b, [&] { return (b.p.load<vrnic_cqe>(Node::kCq).owner & VRNIC_CQE_OWNER) != 0; });
	b.p.db(0, VRNIC_DB_CQ_ARM, b.cq | VRNIC_FIELD_PREP(VRNIC_CQ_ARM_CMD, VRNIC_CQ_ARM_SOLICITED));
	EXPECT_EQ(b.p.load<vrnic_eqe>(Node::kEq).type, 0) << "an unsolicited one waits";
	auto w = wqe(VRNIC_WR_SEND, 2);
	w.flags |= VRNIC_WQE_SOLICITED;
	a.post_send(w, {a.sge(0, 64)});
	wire.run(a, b, [&] {
		return (b.p.load<vrnic_cqe>(Node::kCq + sizeof(vrnic_cqe)).owner & VRNIC_CQE_OWNER) != 0;
	});
	EXPECT_EQ(b.p.load<vrnic_eqe>(Node::kEq).type, VRNIC_EQE_CQ) << "armed: the solicited one";
}

TEST(PagedRings, QueuesInScatteredPagesWork)
{
	Node a(1, true), b(2, true);
	Wire wire;
	a.connect(b, 3, 1, 2);
	b.connect(a, 3, 2, 1);
	// More WQEs and CQEs than fit in one ring page, so every page is used.
	const unsigned n = 300;
	for (unsigned i = 0; i < n; i++) {
		b.post_recv(i, {b.sge(i * 4096, 4096)});
		a.post_send(wqe(VRNIC_WR_SEND, i), {a.sge(0x400000 + i * 4096, 2000 + i)});
		wire.run(a, b, [] { return false; }, 50);
	}
	std::vector<vrnic_cqe> got;
	wire.run(a, b, [&] {
		vrnic_cqe c;
		while (b.poll_cq(c))
			got.push_back(c);
		return got.size() >= n;
	});
	ASSERT_EQ(got.size(), n);
	for (unsigned i = 0; i < n; i++) {
		EXPECT_EQ(got[i].wr_id, i);
		EXPECT_EQ(got[i].byte_len, 2000 + i);
		EXPECT_EQ(std::memcmp(b.data(i * 4096), a.data(0x400000 + i * 4096), 2000 + i), 0);
	}
}

TEST(CompletionQueues, OverflowIsAnAsyncErrorNotACorruption)
{
	Node a(1), b(2, false, /*cq_log=*/2);	// b's CQ holds 4 CQEs
	Wire wire;
	a.connect(b, 3, 1, 2);
	b.connect(a, 3, 2, 1);
	for (unsigned i = 0; i < 6; i++) {
		b.post_recv(i, {b.sge(i * 4096, 4096)});
		a.post_send(wqe(VRNIC_WR_SEND, i), {a.sge(0, 100)});
	}
	wire.run(a, b, [] { return false; }, 1000);
	// Four completions are there, in order; nothing overwrote them.
	std::vector<vrnic_cqe> got;
	vrnic_cqe c;
	while (got.size() < 8 && b.poll_cq(c))
		got.push_back(c);
	ASSERT_EQ(got.size(), 4u);
	for (unsigned i = 0; i < 4; i++)
		EXPECT_EQ(got[i].wr_id, i);
	// The fifth found the CQ full: CQ_ERROR on the async EQ, counted.
	EXPECT_EQ(b.counters().cq_overflows, 1u);
	bool seen = false;
	for (unsigned i = 0; i < 16; i++) {
		const auto eqe = b.p.load<vrnic_eqe>(FakePlatform::kAeq + i * 16);
		if (eqe.type == VRNIC_EQE_CQ_ERROR && eqe.id == b.cq)
			seen = true;
	}
	EXPECT_TRUE(seen);
}

// ------------------------------------------------ fast registration

namespace {

constexpr uint32_t kRemoteRw = VRNIC_ACCESS_LOCAL_WRITE |
			       VRNIC_ACCESS_REMOTE_WRITE |
			       VRNIC_ACCESS_REMOTE_READ;

} // namespace

TEST_F(Pair, FastRegisterWriteLocalInvalidateCycle)
{
	connect(3);
	const uint32_t key = (alloc_fast_mr(b, 16) & ~0xffu) | 0x42;	// the consumer's key byte
	const uint64_t iova = 0x50000123;

	post_reg_mr(b, 10, key, iova, 0x200000, 3 * 4096 + 100, kRemoteRw);
	auto rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(rc[0].opcode, VRNIC_WC_REG_MR);
	EXPECT_EQ(rc[0].wr_id, 10u);

	// Spanning all four pages, from the unaligned first byte.
	EXPECT_EQ(status_of(wqe(VRNIC_WR_RDMA_WRITE, 2, iova, key), {a.sge(0, 3 * 4096 + 100)}),
		  VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(b, 0x200123, a, 0, 3 * 4096 + 100));

	vrnic_send_wqe inv = wqe(VRNIC_WR_LOCAL_INV, 11, 0, key);
	b.post_send(inv, {});
	rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(rc[0].opcode, VRNIC_WC_LOCAL_INV);
	std::vector<uint8_t> before(b.data(0x200123), b.data(0x200123) + 4096);
	EXPECT_EQ(status_of(wqe(VRNIC_WR_RDMA_WRITE, 4, iova, key), {a.sge(0x20000, 4096)}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
	EXPECT_EQ(std::memcmp(before.data(), b.data(0x200123), 4096), 0);
	EXPECT_EQ(b.counters().fast_reg, 1u);
	EXPECT_EQ(b.counters().local_inv, 1u);
}

TEST_F(Pair, SendWithInvalidateReportsTheKeyAndRevokesIt)
{
	connect(3);
	const uint32_t key = (alloc_fast_mr(b, 4) & ~0xffu) | 7;
	post_reg_mr(b, 1, key, 0x60000000, 0x300000, 8192, kRemoteRw);
	ASSERT_EQ(wait(b, 1).at(0).status, VRNIC_WC_ST_SUCCESS);

	// A READ through it, then a 3-packet SEND that invalidates it, as an
	// NVMe-oF target answers a host: data first, then the invalidation,
	// fenced: without the fence a SEND may overtake a READ.
	b.post_recv(5, {b.sge(0x400000, 4096)});
	a.post_send(wqe(VRNIC_WR_RDMA_READ, 1, 0x60000000, key), {a.sge(0x50000, 8192)});
	vrnic_send_wqe si = wqe(VRNIC_WR_SEND_INV, 2, 0, key);
	si.flags |= VRNIC_WQE_FENCE;
	a.post_send(si, {a.sge(0, 2500)});
	auto sc = wait(a, 2);
	ASSERT_EQ(sc.size(), 2u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(sc[1].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(sc[1].opcode, VRNIC_WC_SEND);
	EXPECT_TRUE(same(a, 0x50000, b, 0x300000, 8192));
	auto rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(rc[0].opcode, VRNIC_WC_RECV);
	EXPECT_EQ(rc[0].wc_flags, VRNIC_CQE_WITH_INV);
	EXPECT_EQ(rc[0].imm_data, key);
	EXPECT_EQ(rc[0].byte_len, 2500u);
	EXPECT_TRUE(same(b, 0x400000, a, 0, 2500));
	EXPECT_EQ(b.counters().remote_inv, 1u);

	// Invalid now, so it can be registered again with the next key.
	post_reg_mr(b, 2, key + 1, 0x60000000, 0x300000, 8192, kRemoteRw);
	ASSERT_EQ(wait(b, 1).at(0).status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(status_of(wqe(VRNIC_WR_RDMA_WRITE, 3, 0x60000000, key), {a.sge(0, 64)}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
}

// Review F2: go-back-N replays wire packets only.  A local operation runs
// once, in SQ order, whether the loss is before, between or after it and
// whatever the initial PSN (the upper half of the PSN space, and the wrap).
struct LocalOpsUnderLoss
	: Pair, ::testing::WithParamInterface<std::tuple<uint32_t, int>> {};

TEST_P(LocalOpsUnderLoss, RunOnceAndTheSqCompletes)
{
	const auto [psn, lost] = GetParam();
	connect(3, psn, 5000);
	const uint32_t mr = alloc_fast_mr(a, 4);
	const uint32_t key = (mr & ~0xffu) | 0x21;
	b.post_recv(1, {b.sge(0x10000, 4096)});
	b.post_recv(2, {b.sge(0x20000, 4096)});
	// SEND (2 packets), REG_MR, SEND (2 packets), LOCAL_INV, SEND (1)
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 2000)});
	post_reg_mr(a, 2, key, 0x60000000, 0x300000, 4096, kRemoteRw);
	a.post_send(wqe(VRNIC_WR_SEND, 3), {a.sge(0x1000, 2000)});
	a.post_send(wqe(VRNIC_WR_LOCAL_INV, 4, 0, key), {});
	b.post_recv(3, {b.sge(0x30000, 4096)});
	a.post_send(wqe(VRNIC_WR_SEND, 5), {a.sge(0x2000, 500)});
	run_alone(a);
	ASSERT_EQ(a.p.frames.size(), 5u);
	a.p.frames.erase(a.p.frames.begin() + lost);
	const auto sc = wait(a, 5);
	ASSERT_EQ(sc.size(), 5u);
	for (uint32_t i = 0; i < 5; i++) {
		EXPECT_EQ(sc[i].wr_id, i + 1);
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS) << "WQE " << i + 1;
	}
	EXPECT_EQ(a.counters().fast_reg, 1u);
	EXPECT_EQ(a.counters().local_inv, 1u);
	EXPECT_TRUE(same(b, 0x10000, a, 0, 2000));
	EXPECT_TRUE(same(b, 0x20000, a, 0x1000, 2000));
	EXPECT_TRUE(same(b, 0x30000, a, 0x2000, 500));
	ASSERT_EQ(wait(b, 3).size(), 3u);
	// Invalidated once and for good: a WRITE with the key is refused.
	b.post_send(wqe(VRNIC_WR_RDMA_WRITE, 9, 0x60000000, key), {b.sge(0, 64)});
	const auto wc = wait(b, 1);
	ASSERT_EQ(wc.size(), 1u);
	EXPECT_EQ(wc[0].status, VRNIC_WC_ST_REM_ACCESS_ERR);
}

INSTANTIATE_TEST_SUITE_P(
	Psn, LocalOpsUnderLoss,
	::testing::Combine(::testing::Values(0u, 100u, 0x7ffffeu, 0x800000u,
					     0xc00000u, 0xfffffeu),
			   ::testing::Values(0, 1, 2, 3, 4)),
	[](const auto &info) {
		return "psn" + std::to_string(std::get<0>(info.param)) + "_lost" +
		       std::to_string(std::get<1>(info.param));
	});

// Review F2 S3: with no ack timer (timeout 0) a go-back-N that walks over
// a local operation must still go on; the SQ stalled for good when the
// send PSN was in the upper half of the PSN space.
TEST_F(Pair, ALocalOpBehindALossNeedsNoTimer)
{
	a.connect(b, 3, 0xc00000, 5000, 7, 7, 0);
	b.connect(a, 3, 5000, 0xc00000, 7, 7, 0);
	const uint32_t key = (alloc_fast_mr(a, 4) & ~0xffu) | 0x5;
	b.post_recv(1, {b.sge(0x10000, 4096)});
	b.post_recv(2, {b.sge(0x20000, 4096)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 2000)});
	post_reg_mr(a, 2, key, 0x60000000, 0x300000, 4096, kRemoteRw);
	a.post_send(wqe(VRNIC_WR_SEND, 3), {a.sge(0x1000, 2000)});
	run_alone(a);
	ASSERT_EQ(a.p.frames.size(), 4u);
	a.p.frames.erase(a.p.frames.begin());	// b NAKs the gap
	const auto sc = wait(a, 3);
	ASSERT_EQ(sc.size(), 3u);
	for (const auto &c : sc)
		EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(a.counters().fast_reg, 1u);
}

// Review F2 S1: the peer received both SENDs around a REG_MR, its ACKs
// were lost, and it revoked the key with SEND_WITH_INV.  The retransmission
// that follows must not register the MR again: the peer's WRITE with the
// revoked key is refused and the memory is untouched.
TEST_F(Pair, ARetransmissionNeverRevivesAnInvalidatedMr)
{
	connect(3);
	const uint32_t key = (alloc_fast_mr(a, 4) & ~0xffu) | 0x33;
	b.post_recv(1, {b.sge(0x10000, 4096)});
	b.post_recv(2, {b.sge(0x20000, 4096)});
	a.post_recv(9, {a.sge(0x500000, 4096)});
	a.post_send(wqe(VRNIC_WR_SEND, 1), {a.sge(0, 64)});
	post_reg_mr(a, 2, key, 0x60000000, 0x300000, 4096, kRemoteRw);
	a.post_send(wqe(VRNIC_WR_SEND, 3), {a.sge(0x1000, 64)});
	run_alone(a);
	wire.deliver(a, b);
	run_alone(b);
	b.p.frames.clear();	// b's ACKs are lost
	b.post_send(wqe(VRNIC_WR_SEND_INV, 4, 0, key), {b.sge(0x40000, 64)});
	run_alone(b);
	wire.deliver(b, a);
	EXPECT_EQ(a.counters().remote_inv, 1u);
	// a's ack timer fires; everything completes.
	const auto c = wait(a, 4);
	ASSERT_EQ(c.size(), 4u);
	for (const auto &e : c)
		EXPECT_EQ(e.status, VRNIC_WC_ST_SUCCESS);
	EXPECT_GE(a.counters().retry_timeouts, 1u);
	EXPECT_EQ(a.counters().fast_reg, 1u) << "REG_MR ran again";
	ASSERT_EQ(wait(b, 3).size(), 3u);	// two receives, the SEND_WITH_INV
	std::vector<uint8_t> before(a.data(0x300000), a.data(0x300000) + 4096);
	b.post_send(wqe(VRNIC_WR_RDMA_WRITE, 5, 0x60000000, key), {b.sge(0x50000, 4096)});
	const auto w = wait(b, 1);
	ASSERT_EQ(w.size(), 1u);
	EXPECT_EQ(w[0].wr_id, 5u);
	EXPECT_EQ(w[0].status, VRNIC_WC_ST_REM_ACCESS_ERR);
	EXPECT_EQ(std::memcmp(before.data(), a.data(0x300000), 4096), 0);
}

TEST_F(Pair, RegisteringAValidMrIsABindErrorThenFlush)
{
	connect(3);
	const uint32_t key = alloc_fast_mr(b, 4);
	post_reg_mr(b, 1, key, 0x60000000, 0x300000, 4096, kRemoteRw);
	post_reg_mr(b, 2, key + 1, 0x60000000, 0x300000, 4096, kRemoteRw);
	b.post_send(wqe(VRNIC_WR_SEND, 3), {b.sge(0, 64)});
	auto rc = wait(b, 3);
	ASSERT_EQ(rc.size(), 3u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(rc[1].status, VRNIC_WC_ST_MW_BIND_ERR);
	EXPECT_EQ(rc[1].opcode, VRNIC_WC_REG_MR);
	EXPECT_EQ(rc[2].status, VRNIC_WC_ST_WR_FLUSH_ERR);
}

TEST_F(Pair, RegMrBeyondItsCapacityOrOnANormalMrIsRefused)
{
	connect(3);
	const uint32_t key = alloc_fast_mr(b, 2);
	std::vector<uint8_t> before(b.data(0x300000), b.data(0x300000) + 8192);
	post_reg_mr(b, 1, key, 0x60000000, 0x300000, 3 * 4096, kRemoteRw);
	auto rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_MW_BIND_ERR);
	post_reg_mr(a, 2, a.mr, 0x60000000, 0x300000, 4096, kRemoteRw);
	auto sc = wait(a, 1);
	ASSERT_EQ(sc.size(), 1u);
	EXPECT_EQ(sc[0].status, VRNIC_WC_ST_MW_BIND_ERR);
	EXPECT_EQ(a.counters().fast_reg + b.counters().fast_reg, 0u);
	// Admin: a fast-register MR takes nothing but its capacity.
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_CREATE_MR;
	c.create_mr.pdn = b.pd;
	c.create_mr.npages = VRNIC_MAX_FAST_REG_PAGES + 1;
	c.create_mr.pbl_mode = VRNIC_PBL_FAST;
	EXPECT_EQ(b.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.create_mr.npages = 4;
	c.create_mr.iova = 0x1000;
	EXPECT_EQ(b.p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
}

TEST_F(Pair, AnUnregisteredFastMrRefusesRemoteAccess)
{
	connect(3);
	const uint32_t key = alloc_fast_mr(b, 16);
	EXPECT_EQ(status_of(wqe(VRNIC_WR_RDMA_WRITE, 1, 0, key), {a.sge(0, 64)}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Pair, SendWithInvalidateOfANormalMrIsAnInvalidRequest)
{
	connect(3);
	b.post_recv(1, {b.sge(0x400000, 4096)});
	EXPECT_EQ(status_of(wqe(VRNIC_WR_SEND_INV, 1, 0, b.mr), {a.sge(0, 100)}),
		  VRNIC_WC_ST_REM_INV_REQ_ERR);
	auto rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].status, VRNIC_WC_ST_REM_INV_REQ_ERR);
	EXPECT_EQ(b.counters().remote_inv, 0u);
	// b's own MR still works for b.
	b.post_send(wqe(VRNIC_WR_SEND, 2), {b.sge(0, 64)});
	EXPECT_EQ(wait(b, 1).size(), 1u);	// flushed: b is in ERR
}

// ---------------------------------------------- ATOMIC_WRITE and FLUSH

TEST_F(Pair, AtomicWriteAndFlushAfterWrites)
{
	connect(3);
	for (uint32_t i = 0; i < 8192; i++)
		*a.data(i) = uint8_t(i * 7);
	a.post_send(wqe(VRNIC_WR_RDMA_WRITE, 1, Node::kIova + 0x200000, b.mr),
		    {a.sge(0, 8192)});
	a.post_send(atomic_write(2, Node::kIova + 0x300008,
				 0x0123456789abcdefull, b.mr), {});
	a.post_send(flush(3, Node::kIova + 0x200000, 8192, VRNIC_FLUSH_GLOBAL,
			  VRNIC_FLUSH_RANGE, b.mr), {});
	// Level MR: address and length are not looked at.
	a.post_send(flush(4, 0, 123456789, VRNIC_FLUSH_GLOBAL, VRNIC_FLUSH_MR,
			  b.mr), {});
	auto sc = wait(a, 4);
	ASSERT_EQ(sc.size(), 4u);
	const uint8_t ops[] = {VRNIC_WC_RDMA_WRITE, VRNIC_WC_ATOMIC_WRITE,
			       VRNIC_WC_FLUSH, VRNIC_WC_FLUSH};
	for (unsigned i = 0; i < 4; i++) {
		EXPECT_EQ(sc[i].wr_id, i + 1);
		EXPECT_EQ(sc[i].status, VRNIC_WC_ST_SUCCESS) << i;
		EXPECT_EQ(sc[i].opcode, ops[i]) << i;
		EXPECT_EQ(sc[i].byte_len, 0u) << i;
	}
	EXPECT_TRUE(same(a, 0, b, 0x200000, 8192));
	uint64_t v;
	std::memcpy(&v, b.data(0x300008), 8);
	EXPECT_EQ(v, 0x0123456789abcdefull);
}

TEST_F(Pair, MisalignedAtomicWriteIsAnInvalidRequest)
{
	connect(3);
	std::vector<uint8_t> before(b.data(0x300000), b.data(0x300000) + 32);
	EXPECT_EQ(status_of(atomic_write(1, Node::kIova + 0x300004, ~0ull, b.mr), {}),
		  VRNIC_WC_ST_REM_INV_REQ_ERR);
	EXPECT_EQ(std::memcmp(before.data(), b.data(0x300000), 32), 0);
}

TEST_F(Pair, AtomicWriteNeedsRemoteWrite)
{
	connect(3);
	const uint32_t ro = b.create_mr(0x20000000, 0x800000, 8192,
					VRNIC_ACCESS_REMOTE_READ);
	std::memset(b.data(0x800000), 0x5a, 16);
	EXPECT_EQ(status_of(atomic_write(1, 0x20000000, 0, ro), {}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
	EXPECT_EQ(*b.data(0x800000), 0x5a);
}

TEST_F(Pair, FlushNeedsTheMrsRightAndStaysInBounds)
{
	connect(3);
	const uint32_t plain = b.create_mr(0x20000000, 0x800000, 8192,
					   VRNIC_ACCESS_LOCAL_WRITE |
					   VRNIC_ACCESS_REMOTE_WRITE);
	EXPECT_EQ(status_of(flush(1, 0x20000000, 64, VRNIC_FLUSH_GLOBAL,
				  VRNIC_FLUSH_RANGE, plain), {}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Pair, FlushOutOfBoundsIsARemoteAccessError)
{
	connect(3);
	EXPECT_EQ(status_of(flush(1, Node::kIova + Node::kDataLen - 8, 64,
				  VRNIC_FLUSH_GLOBAL, VRNIC_FLUSH_RANGE, b.mr), {}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Pair, PersistentFlushIsRefusedWithoutPersistentMemory)
{
	// The QP may ask for it; no MR of this device can grant it.
	connect(3);
	vrnic_qp_attr at{};
	at.access = VRNIC_ACCESS_REMOTE_WRITE | VRNIC_ACCESS_FLUSH_GLOBAL |
		    VRNIC_ACCESS_FLUSH_PERSISTENT;
	ASSERT_EQ(b.modify(VRNIC_QP_ATTR_ACCESS, at), 0);
	EXPECT_EQ(status_of(flush(1, Node::kIova, 64, VRNIC_FLUSH_PERSISTENT,
				  VRNIC_FLUSH_RANGE, b.mr), {}),
		  VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Pair, FlushTheQpDoesNotAllowIsAnInvalidRequest)
{
	connect(3);
	EXPECT_EQ(status_of(flush(1, Node::kIova, 64, VRNIC_FLUSH_PERSISTENT,
				  VRNIC_FLUSH_RANGE, b.mr), {}),
		  VRNIC_WC_ST_REM_INV_REQ_ERR);
}

// No placement type, an unknown one, an unknown level: refused before
// anything is sent.
struct BadFeth : Pair, ::testing::WithParamInterface<uint64_t> {};

TEST_P(BadFeth, MalformedFlushIsRefusedAtFetch)
{
	connect(3);
	vrnic_send_wqe w = flush(1, Node::kIova, 64, 0, 0, b.mr);
	w.swap = GetParam();
	EXPECT_EQ(status_of(w, {}), VRNIC_WC_ST_LOC_QP_OP_ERR);
	EXPECT_EQ(a.counters().sent_pkts, 0u);
}

INSTANTIATE_TEST_SUITE_P(Feth, BadFeth, ::testing::Values(0x00ull, 0x04ull, 0x21ull));

// ----------------------------------------------------- memory windows

namespace {

uint32_t alloc_mw(Node &n, uint8_t type)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_ALLOC_MW;
	c.alloc_mw.pdn = n.pd;
	c.alloc_mw.type = type;
	return n.admin_ok(c);
}

uint8_t admin_status(Node &n, uint8_t opcode, uint32_t id)
{
	vrnic_admin_cmd c{};
	c.opcode = opcode;
	c.destroy.id = id;
	return n.p.admin(c).status;
}

// BIND_MW of window `mw` (its current key) onto [addr, + len) of MR
// `mr_key`; returns the window's new key (same index, key byte + 1).
uint32_t post_bind(Node &n, uint64_t wr_id, uint8_t type, uint32_t mw,
		   uint32_t mr_key, uint64_t addr, uint64_t len, uint32_t access)
{
	vrnic_bind_mw_wqe w{};
	w.wr_id = wr_id;
	w.opcode = VRNIC_WR_BIND_MW;
	w.flags = VRNIC_WQE_SIGNALED;
	w.mw_type = type;
	w.new_key = uint8_t(mw + 1);
	w.access = access;
	w.addr = addr;
	w.mw_key = mw;
	w.mr_key = mr_key;
	w.length = len;
	n.post_raw(&w);
	return (mw & ~0xffu) | uint8_t(mw + 1);
}

struct Windows : Pair {
	uint32_t region = 0;	// on b: MW_BIND, local write, no remote right
	void SetUp() override
	{
		connect(3);
		region = b.create_mr(0x30000000, 0x800000, 64 * 1024,
				     VRNIC_ACCESS_LOCAL_WRITE |
				     VRNIC_ACCESS_MW_BIND);
	}
	// b binds; the completion's status.
	uint8_t bind(uint8_t type, uint32_t mw, uint32_t &key, uint64_t addr,
		     uint64_t len, uint32_t access, uint32_t mr = 0)
	{
		key = post_bind(b, 50, type, mw, mr ? mr : region, addr, len,
				access);
		const auto c = wait(b, 1);
		return c.size() == 1 ? c[0].status : uint8_t(0xff);
	}
	uint8_t write_via(uint32_t key, uint64_t addr, uint32_t len)
	{
		return status_of(wqe(VRNIC_WR_RDMA_WRITE, 1, addr, key),
				 {a.sge(0, len)});
	}
};

} // namespace

TEST_F(Windows, Type1BindGrantsOnlyItsRangeThenUnbindRevokes)
{
	for (uint32_t i = 0; i < 4096; i++)
		*a.data(i) = uint8_t(i ^ 0x5a);
	uint32_t key;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_1);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_1, mw, key, 0x30001000, 8192,
		       VRNIC_ACCESS_REMOTE_WRITE | VRNIC_ACCESS_REMOTE_READ),
		  VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(b.counters().mw_binds, 1u);
	EXPECT_EQ(write_via(key, 0x30001000, 4096), VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(a, 0, b, 0x801000, 4096));
	// The MR under it grants nothing remotely by itself; the window
	// ends at 0x30003000; the old key byte is dead.
	EXPECT_EQ(write_via(region, 0x30001000, 64), VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Windows, Type1OutOfWindowAndStaleKeyAreRefused)
{
	uint32_t key;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_1);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_1, mw, key, 0x30001000, 8192,
		       VRNIC_ACCESS_REMOTE_WRITE), VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(write_via(key, 0x30002f00, 512), VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Windows, Type1RebindWithLengthZeroUnbinds)
{
	uint32_t key, key2;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_1);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_1, mw, key, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_WRITE), VRNIC_WC_ST_SUCCESS);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_1, key, key2, 0, 0, 0), VRNIC_WC_ST_SUCCESS);
	// Unbound, the MR can go; a write through either key is refused.
	EXPECT_EQ(admin_status(b, VRNIC_ADMIN_DESTROY_MR, region),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(write_via(key2, 0x30000000, 64), VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Windows, ABoundWindowKeepsItsMrAndDeallocRevokes)
{
	uint32_t key;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_2);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_2, mw, key, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_READ), VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(admin_status(b, VRNIC_ADMIN_DESTROY_MR, region),
		  VRNIC_ADMIN_ST_BUSY);
	EXPECT_EQ(admin_status(b, VRNIC_ADMIN_DEALLOC_MW, key), VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(admin_status(b, VRNIC_ADMIN_DESTROY_MR, region),
		  VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(status_of(wqe(VRNIC_WR_RDMA_READ, 1, 0x30000000, key),
			    {a.sge(0, 64)}), VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Windows, Type2LocalInvalidateRevokesAndAllowsANewBind)
{
	uint32_t key, key2;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_2);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_2, mw, key, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_WRITE), VRNIC_WC_ST_SUCCESS);
	b.post_send(wqe(VRNIC_WR_LOCAL_INV, 2, 0, key), {});
	auto c = wait(b, 1);
	ASSERT_EQ(c.size(), 1u);
	EXPECT_EQ(c[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(c[0].opcode, VRNIC_WC_LOCAL_INV);
	// Unbound again: it may be bound anew, and only the new key works.
	ASSERT_EQ(bind(VRNIC_MW_TYPE_2, key, key2, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_WRITE), VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(write_via(key2, 0x30000000, 64), VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(write_via(key, 0x30000000, 64), VRNIC_WC_ST_REM_ACCESS_ERR);
}

TEST_F(Windows, Type2BoundTwiceIsABindError)
{
	uint32_t key, key2;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_2);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_2, mw, key, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_WRITE), VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(bind(VRNIC_MW_TYPE_2, key, key2, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_WRITE), VRNIC_WC_ST_MW_BIND_ERR);
}

TEST_F(Windows, Type2RemoteInvalidateBySendWithInvalidate)
{
	uint32_t key;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_2);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_2, mw, key, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_WRITE), VRNIC_WC_ST_SUCCESS);
	b.post_recv(7, {b.sge(0x400000, 4096)});
	EXPECT_EQ(status_of(wqe(VRNIC_WR_SEND_INV, 1, 0, key), {a.sge(0, 32)}),
		  VRNIC_WC_ST_SUCCESS);
	auto rc = wait(b, 1);
	ASSERT_EQ(rc.size(), 1u);
	EXPECT_EQ(rc[0].wc_flags & VRNIC_CQE_WITH_INV, VRNIC_CQE_WITH_INV);
	EXPECT_EQ(rc[0].imm_data, key);
	EXPECT_EQ(write_via(key, 0x30000000, 64), VRNIC_WC_ST_REM_ACCESS_ERR);
}

struct BindCase {
	const char *what;
	uint8_t type;
	uint32_t mr_access;	// 0: the fixture's region
	uint64_t addr, len;
	uint32_t access;
};

struct BindRefusal : Windows, ::testing::WithParamInterface<BindCase> {};

TEST_P(BindRefusal, IsABindError)
{
	const BindCase &c = GetParam();
	const uint32_t mr = c.mr_access ?
		b.create_mr(0x40000000, 0x900000, 4096, c.mr_access) : 0;
	uint32_t key;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_1);
	EXPECT_EQ(bind(c.type, mw, key, c.addr, c.len, c.access, mr),
		  VRNIC_WC_ST_MW_BIND_ERR) << c.what;
}

INSTANTIATE_TEST_SUITE_P(Windows, BindRefusal, ::testing::Values(
	BindCase{"MR without MW_BIND", 1, VRNIC_ACCESS_LOCAL_WRITE,
		 0x40000000, 64, VRNIC_ACCESS_REMOTE_READ},
	BindCase{"write right over an MR without local write", 1,
		 VRNIC_ACCESS_MW_BIND, 0x40000000, 64, VRNIC_ACCESS_REMOTE_WRITE},
	BindCase{"range beyond the MR", 1, 0, 0x3000f000, 8192,
		 VRNIC_ACCESS_REMOTE_READ},
	BindCase{"a right a window cannot grant", 1, 0, 0x30000000, 64,
		 VRNIC_ACCESS_MW_BIND},
	BindCase{"wrong window type", 2, 0, 0x30000000, 64,
		 VRNIC_ACCESS_REMOTE_READ}));

TEST_F(Windows, AWindowKeyIsNeverALocalKey)
{
	uint32_t key;
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_1);
	ASSERT_EQ(bind(VRNIC_MW_TYPE_1, mw, key, 0x30000000, 4096,
		       VRNIC_ACCESS_REMOTE_READ), VRNIC_WC_ST_SUCCESS);
	b.post_send(wqe(VRNIC_WR_SEND, 3), {b.sge(0, 64, key)});
	auto c = wait(b, 1);
	ASSERT_EQ(c.size(), 1u);
	EXPECT_EQ(c[0].status, VRNIC_WC_ST_LOC_PROT_ERR);
}

TEST_F(Pair, AFastMrWithABoundWindowCannotBeInvalidated)
{
	// A window bound to a fast-register MR keeps it valid: invalidating
	// it (and a later REG_MR) would move the pages from under the window.
	connect(3);
	const uint32_t key = alloc_fast_mr(b, 4);
	post_reg_mr(b, 10, key, 0x60000000, 0x200000, 4096,
		    kRemoteRw | VRNIC_ACCESS_MW_BIND);
	auto c = wait(b, 1);
	ASSERT_EQ(c.size(), 1u);
	ASSERT_EQ(c[0].status, VRNIC_WC_ST_SUCCESS);
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_1);
	const uint32_t wkey = post_bind(b, 11, VRNIC_MW_TYPE_1, mw, key, 0x60000000,
					4096, VRNIC_ACCESS_REMOTE_WRITE);
	c = wait(b, 1);
	ASSERT_EQ(c.size(), 1u);
	ASSERT_EQ(c[0].status, VRNIC_WC_ST_SUCCESS);
	EXPECT_EQ(status_of(wqe(VRNIC_WR_RDMA_WRITE, 13, 0x60000000, wkey),
			    {a.sge(0, 64)}), VRNIC_WC_ST_SUCCESS);
	EXPECT_TRUE(same(a, 0, b, 0x200000, 64));
	b.post_send(wqe(VRNIC_WR_LOCAL_INV, 12, 0, key), {});
	c = wait(b, 1);
	ASSERT_EQ(c.size(), 1u);
	EXPECT_EQ(c[0].status, VRNIC_WC_ST_MW_BIND_ERR);
}

// Review F2 (the cold review: BIND_MW was not covered under loss): a
// type 2 window bound between two SENDs whose first packet is lost is
// bound once; before, the go-back-N bound it again, which a bound type 2
// window refuses (MW_BIND_ERR, the QP in ERR).
TEST_F(Windows, ABindBehindALostPacketIsNotRepeated)
{
	const uint32_t mw = alloc_mw(b, VRNIC_MW_TYPE_2);
	a.post_recv(1, {a.sge(0x10000, 4096)});
	a.post_recv(2, {a.sge(0x20000, 4096)});
	b.post_send(wqe(VRNIC_WR_SEND, 1), {b.sge(0, 2000)});
	const uint32_t key = post_bind(b, 2, VRNIC_MW_TYPE_2, mw, region, 0x30000000,
				       4096, VRNIC_ACCESS_REMOTE_WRITE);
	b.post_send(wqe(VRNIC_WR_SEND, 3), {b.sge(0x1000, 2000)});
	run_alone(b);
	ASSERT_EQ(b.p.frames.size(), 4u);
	b.p.frames.erase(b.p.frames.begin());
	const auto sc = wait(b, 3);
	ASSERT_EQ(sc.size(), 3u);
	for (const auto &c : sc)
		EXPECT_EQ(c.status, VRNIC_WC_ST_SUCCESS) << "wr " << c.wr_id;
	EXPECT_EQ(b.counters().mw_binds, 1u);
	ASSERT_EQ(wait(a, 2).size(), 2u);
	EXPECT_EQ(write_via(key, 0x30000000, 64), VRNIC_WC_ST_SUCCESS);
}

// SPDX-License-Identifier: GPL-2.0-or-later
// Frame parsing, CE marking, PFC frames, the ECMP hash, the bit flip.
#include "helpers.hpp"

#include <map>

#include "frame_pool.hpp"
#include "rng.hpp"
#include "stream.hpp"

namespace vrnic::fabric::test {

TEST(FabricFrame, ParsesRoceV2)
{
	FrameSpec s;
	s.dscp = 26;
	s.ecn = Ecn::Ect0;
	s.sport = 50001;
	s.qpn = 0xabcdef;
	s.psn = 0x123456;
	const Bytes f = roce_frame(s);
	const Parsed p = parse_frame(f);
	ASSERT_EQ(p.error, ParseError::None);
	EXPECT_TRUE(p.info.ipv4);
	EXPECT_EQ(p.info.dscp, 26);
	EXPECT_EQ(p.info.ecn, Ecn::Ect0);
	EXPECT_EQ(p.info.sport, 50001);
	EXPECT_EQ(p.info.dport, kRoceUdpPort);
	ASSERT_TRUE(p.info.bth);
	EXPECT_EQ(p.info.dest_qpn, 0xabcdefU);
	EXPECT_EQ(p.info.psn, 0x123456U);
	EXPECT_EQ(p.info.payload, 14U + 20 + 8);
}

TEST(FabricFrame, ParsesVlanPcp)
{
	FrameSpec s;
	s.vlan = true;
	s.pcp = 5;
	const Parsed p = parse_frame(roce_frame(s));
	ASSERT_EQ(p.error, ParseError::None);
	EXPECT_TRUE(p.info.vlan);
	EXPECT_EQ(p.info.pcp, 5);
	EXPECT_TRUE(p.info.bth);
}

TEST(FabricFrame, MarkCeKeepsTheIpv4ChecksumValid)
{
	Rng rng(7);
	for (int i = 0; i < 2000; i++) {
		FrameSpec s;
		s.dscp = static_cast<uint8_t>(rng.next() % 64);
		s.ecn = (rng.next() & 1) ? Ecn::Ect0 : Ecn::Ect1;
		s.sip = static_cast<uint32_t>(rng.next());
		s.dip = static_cast<uint32_t>(rng.next());
		s.size = 64 + rng.next() % 1400;
		Bytes f = roce_frame(s);
		const Parsed p = parse_frame(f);
		ASSERT_TRUE(mark_ce(f, p.info));
		EXPECT_EQ(f[15] & 3, 3);
		EXPECT_EQ(f[15] >> 2, s.dscp);
		// A valid header sums to zero with its checksum.
		EXPECT_EQ(ipv4_checksum(std::span(f).subspan(14, 20)), 0) << i;
	}
}

TEST(FabricFrame, OnlyEctPacketsBecomeCe)
{
	for (Ecn e : {Ecn::NotEct, Ecn::Ce}) {
		FrameSpec s;
		s.ecn = e;
		Bytes f = roce_frame(s);
		const Bytes before = f;
		EXPECT_FALSE(mark_ce(f, parse_frame(f).info));
		EXPECT_EQ(f, before);
	}
}

TEST(FabricFrame, MarkCeOnIpv6)
{
	Bytes f(14 + 40 + 8 + 12 + 4, 0);
	f[12] = 0x86;
	f[13] = 0xdd;
	f[14] = 0x60 | (26 >> 2);	// tclass = dscp 26, ECT(0)
	f[15] = static_cast<uint8_t>(((26 & 3) << 6) | (2 << 4));
	const size_t plen = f.size() - 54;
	f[18] = static_cast<uint8_t>(plen >> 8);
	f[19] = static_cast<uint8_t>(plen);
	f[20] = 17;
	f[54 + 2] = kRoceUdpPort >> 8;
	f[54 + 3] = kRoceUdpPort & 0xff;
	f[54 + 5] = static_cast<uint8_t>(plen);
	const Parsed p = parse_frame(f);
	ASSERT_EQ(p.error, ParseError::None);
	EXPECT_EQ(p.info.dscp, 26);
	EXPECT_EQ(p.info.ecn, Ecn::Ect0);
	EXPECT_TRUE(p.info.bth);
	ASSERT_TRUE(mark_ce(f, p.info));
	EXPECT_EQ(parse_frame(f).info.ecn, Ecn::Ce);
	EXPECT_EQ(parse_frame(f).info.dscp, 26);
}

TEST(FabricFrame, PfcFrameLayout)
{
	Pfc pfc;
	pfc.enable = 0x08;
	pfc.quanta[3] = 0xffff;
	const Mac src{0x02, 1, 2, 3, 4, 5};
	const Bytes f = build_pfc(src, pfc);
	ASSERT_EQ(f.size(), 60U);
	const Bytes head{0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 1, 2, 3, 4, 5,
			 0x88, 0x08, 0x01, 0x01, 0x00, 0x08};
	EXPECT_TRUE(std::equal(head.begin(), head.end(), f.begin()));
	EXPECT_EQ(f[18 + 6], 0xff);	// time[3]
	EXPECT_EQ(f[18 + 7], 0xff);
	const Parsed p = parse_frame(f);
	ASSERT_EQ(p.error, ParseError::None);
	auto back = parse_pfc(f, p.info);
	ASSERT_TRUE(back);
	EXPECT_EQ(back->enable, 0x08);
	EXPECT_EQ(back->quanta[3], 0xffff);
	EXPECT_EQ(back->quanta[0], 0);
}

TEST(FabricFrame, LinkPauseIsAllClasses)
{
	Bytes f(60, 0);
	f[0] = 0x01, f[1] = 0x80, f[2] = 0xc2, f[5] = 0x01;
	f[6] = 0x02;
	f[12] = 0x88, f[13] = 0x08, f[15] = 0x01, f[16] = 0x12, f[17] = 0x34;
	auto pfc = parse_pfc(f, parse_frame(f).info);
	ASSERT_TRUE(pfc);
	EXPECT_EQ(pfc->enable, 0xff);
	EXPECT_EQ(pfc->quanta[7], 0x1234);
}

TEST(FabricFrame, MalformedAndTruncated)
{
	const Bytes good = roce_frame(FrameSpec{});
	// Every truncation of a valid frame is an error or a shorter valid
	// parse; never a read outside the span (ASan watches the sanitizer run).
	for (size_t n = 0; n < good.size(); n++) {
		const Parsed p = parse_frame(std::span(good).first(n));
		if (n < 14)
			EXPECT_EQ(p.error, ParseError::Truncated);
		else
			EXPECT_NE(p.error, ParseError::None) << n;	// IP total length
	}
	Bytes f = good;
	f[14] = 0x44;	// IHL 4
	EXPECT_EQ(parse_frame(f).error, ParseError::Malformed);
	f = good;
	f[14] = 0x65;	// version 6 in an IPv4 EtherType
	EXPECT_EQ(parse_frame(f).error, ParseError::Malformed);
	f = good;
	f[6] = 0x01;	// multicast source
	EXPECT_EQ(parse_frame(f).error, ParseError::Malformed);
	f = good;
	f[34 + 4] = 0xff;	// UDP length beyond the IP datagram
	EXPECT_EQ(parse_frame(f).error, ParseError::Truncated);
	f = good;
	f[34 + 4] = 0;
	f[34 + 5] = 4;	// UDP length below its header
	EXPECT_EQ(parse_frame(f).error, ParseError::Truncated);
	// Random bytes: any answer, no crash.
	Rng rng(3);
	for (int i = 0; i < 20000; i++) {
		Bytes r(rng.next() % 200);
		for (auto &b : r)
			b = static_cast<uint8_t>(rng.next());
		if (r.size() > 13 && (i & 1)) {
			r[12] = 0x08;
			r[13] = 0x00;
		}
		Parsed p = parse_frame(r);
		if (p.error == ParseError::None) {
			mark_ce(r, p.info);
			(void)parse_pfc(r, p.info);
			if (!r.empty())
				flip_bit(r, p.info, rng.next());
		}
	}
}

TEST(FabricFrame, EcmpHashIsStableAndSpreadsOverSourcePorts)
{
	FrameSpec s;
	const FrameInfo base = parse_frame(roce_frame(s)).info;
	EXPECT_EQ(flow_hash(base, 1), flow_hash(base, 1));
	for (int paths : {2, 4}) {
		std::map<uint32_t, int> bins;
		const int flows = 8000;
		for (int sport = 0; sport < flows; sport++) {
			FrameInfo i = base;
			i.sport = static_cast<uint16_t>(49152 + sport);
			bins[flow_hash(i, 1) % static_cast<uint32_t>(paths)]++;
		}
		ASSERT_EQ(bins.size(), static_cast<size_t>(paths));
		for (auto [bin, n] : bins)
			EXPECT_NEAR(n, flows / paths, flows / paths * 0.08) << paths << " paths";
	}
	// The PSN, QPN and payload do not move a flow; the salt does.
	FrameSpec t = s;
	t.psn = 999;
	t.qpn = 77;
	EXPECT_EQ(flow_hash(parse_frame(roce_frame(t)).info, 1), flow_hash(base, 1));
	int moved = 0;
	for (int sport = 0; sport < 100; sport++) {
		FrameInfo i = base;
		i.sport = static_cast<uint16_t>(sport);
		moved += (flow_hash(i, 1) & 1) != (flow_hash(i, 2) & 1);
	}
	EXPECT_GT(moved, 25);
	EXPECT_LT(moved, 75);
}

TEST(FabricFrame, FlipBitHitsThePayloadOnly)
{
	const Bytes f = roce_frame(FrameSpec{});
	const FrameInfo info = parse_frame(f).info;
	Rng rng(5);
	for (int i = 0; i < 500; i++) {
		Bytes g = f;
		const size_t off = flip_bit(g, info, rng.next());
		EXPECT_GE(off, info.payload);
		int bits = 0;
		for (size_t k = 0; k < f.size(); k++)
			bits += std::popcount(static_cast<unsigned>(f[k] ^ g[k]));
		EXPECT_EQ(bits, 1);
	}
}

} // namespace vrnic::fabric::test

namespace vrnic::fabric::test {

TEST(FabricStream, DecodesAnySplitAndSkipsBadLengths)
{
	Bytes stream;
	std::vector<Bytes> frames;
	auto put = [&](const Bytes &f, uint32_t len) {
		const auto h = StreamDecoder::header(len);
		stream.insert(stream.end(), h.begin(), h.end());
		stream.insert(stream.end(), f.begin(), f.end());
	};
	for (size_t n : {60U, 1U, 1500U, 9000U}) {
		frames.push_back(Bytes(n, static_cast<uint8_t>(n)));
		put(frames.back(), static_cast<uint32_t>(n));
	}
	put(Bytes(10000, 0xee), 10000);	// above the limit: skipped
	put({}, 0);				// empty: reported
	frames.push_back(Bytes(100, 7));
	put(frames.back(), 100);
	for (size_t chunk : {1U, 3U, 7U, 1504U, 4096U, 9004U, 100000U}) {
		StreamDecoder d(9216);
		std::vector<Bytes> got;
		int oversized = 0, empty = 0;
		for (size_t off = 0; off < stream.size(); off += chunk)
			d.feed(std::span(stream).subspan(off, std::min(chunk, stream.size() - off)),
			       [&](StreamDecoder::Event ev, std::span<const uint8_t> f) {
				       if (ev == StreamDecoder::Event::Frame)
					       got.emplace_back(f.begin(), f.end());
				       oversized += ev == StreamDecoder::Event::Oversized;
				       empty += ev == StreamDecoder::Event::Empty;
			       });
		EXPECT_EQ(got, frames) << chunk;
		EXPECT_EQ(oversized, 1);
		EXPECT_EQ(empty, 1);
	}
}

TEST(FabricStream, AWholeFrameIsPassedWhereItLies)
{
	// Two frames in one read, then one split over two: the whole ones
	// are not copied, the split one is.
	Bytes stream;
	for (uint32_t n : {1500U, 4200U, 3000U}) {
		const auto h = StreamDecoder::header(n);
		stream.insert(stream.end(), h.begin(), h.end());
		stream.insert(stream.end(), n, static_cast<uint8_t>(n));
	}
	const size_t cut = 4 + 1500 + 4 + 4200 + 100;
	StreamDecoder d(9216);
	std::vector<std::span<const uint8_t>> got;
	std::vector<Bytes> copies;
	auto fn = [&](StreamDecoder::Event ev, std::span<const uint8_t> f) {
		ASSERT_EQ(ev, StreamDecoder::Event::Frame);
		got.push_back(f);
		copies.emplace_back(f.begin(), f.end());
	};
	d.feed(std::span(stream).first(cut), fn);
	ASSERT_EQ(got.size(), 2U);
	EXPECT_EQ(got[0].data(), stream.data() + 4);
	EXPECT_EQ(got[1].data(), stream.data() + 4 + 1500 + 4);
	d.feed(std::span(stream).subspan(cut), fn);
	ASSERT_EQ(got.size(), 3U);
	EXPECT_NE(got[2].data(), stream.data() + cut - 100);	// buffered
	EXPECT_EQ(copies[2], Bytes(3000, static_cast<uint8_t>(3000U)));
	EXPECT_EQ(copies[1], Bytes(4200, static_cast<uint8_t>(4200U)));
}

TEST(FabricFramePool, ReusesABufferOfTheFramesSize)
{
	FramePool pool(1 << 20);
	std::vector<uint8_t> a = pool.take(4100);
	a.assign(4100, 0xab);
	const uint8_t *data = a.data();
	pool.give(std::move(a));
	EXPECT_EQ(pool.bytes(), 4100U);
	std::vector<uint8_t> b = pool.take(4000);
	EXPECT_EQ(b.data(), data);	// the same buffer, no allocation
	EXPECT_TRUE(b.empty());		// handed out empty, nothing to leak
	EXPECT_EQ(pool.bytes(), 0U);
}

TEST(FabricFramePool, AJumboBufferNeverCarriesASmallFrame)
{
	// A queue counts its frames' sizes against tx_limit: a 9 KiB buffer
	// under each 68-byte frame to a port that does not read would hold
	// 135 times what the limit says.
	FramePool pool(1 << 20);
	std::vector<uint8_t> jumbo;
	jumbo.reserve(9004);
	pool.give(std::move(jumbo));
	std::vector<uint8_t> small = pool.take(68);
	EXPECT_LE(small.capacity(), 2U * 68);
	EXPECT_GE(small.capacity(), 68U);
	// Nor does an ACK's buffer stand in for a data frame's.
	pool.give(std::move(small));
	EXPECT_GE(pool.take(4100).capacity(), 4100U);
	// A frame of more than half the jumbo buffer may take it.
	EXPECT_EQ(pool.take(5000).capacity(), 9004U);
}

TEST(FabricFramePool, KeepsAtMostItsBudget)
{
	FramePool pool(64 << 10);
	for (int i = 0; i < 100; i++) {
		std::vector<uint8_t> v;
		v.reserve(4100);
		pool.give(std::move(v));
		EXPECT_LE(pool.bytes(), size_t{64} << 10);
	}
	EXPECT_EQ(pool.bytes(), 15U * 4100);
	pool.give(std::vector<uint8_t>());	// nothing to keep
	EXPECT_EQ(pool.bytes(), 15U * 4100);
}

} // namespace vrnic::fabric::test

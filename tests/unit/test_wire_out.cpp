// SPDX-License-Identifier: GPL-2.0-or-later
// vrnic-device's wire output (device/wire_out.hpp): what the peer reads is
// always whole stream records, whatever the socket takes at a time and
// whenever the device is reset.
#include <gtest/gtest.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "wire_out.hpp"

namespace {

std::vector<uint8_t> frame(size_t len, uint8_t seed)
{
	std::vector<uint8_t> f(len);
	for (size_t i = 0; i < len; i++)
		f[i] = uint8_t(seed + i);
	return f;
}

// Takes up to n bytes as send() would, appending them to what the peer
// has read.
void take(wire::Out &o, std::vector<uint8_t> &peer, size_t n)
{
	n = std::min(n, o.pending());
	peer.insert(peer.end(), o.data(), o.data() + n);
	o.sent(n);
}

// The peer's parse of its stream: the frames, or an empty list with
// `whole` false when it ends inside a record.
std::vector<std::vector<uint8_t>> parse(const std::vector<uint8_t> &s,
					bool &whole)
{
	std::vector<std::vector<uint8_t>> out;
	size_t at = 0;
	whole = true;
	while (at < s.size()) {
		if (s.size() - at < 4) {
			whole = false;
			break;
		}
		uint32_t be;
		std::memcpy(&be, s.data() + at, 4);
		const size_t len = ntohl(be);
		if (s.size() - at - 4 < len) {
			whole = false;
			break;
		}
		out.emplace_back(s.begin() + long(at) + 4,
				 s.begin() + long(at + 4 + len));
		at += 4 + len;
	}
	return out;
}

TEST(WireOut, RecordsGoOutInOrderWhateverTheSocketTakes)
{
	for (const size_t chunk : {1u, 3u, 4u, 5u, 1000u, 4100u, 65536u}) {
		wire::Out o;
		std::vector<uint8_t> peer;
		std::vector<std::vector<uint8_t>> want;
		for (int i = 0; i < 40; i++) {
			want.push_back(frame(60 + 97 * size_t(i), uint8_t(i)));
			o.push(want.back().data(), want.back().size());
			if (i % 3 == 2)
				take(o, peer, chunk);
		}
		while (!o.empty())
			take(o, peer, chunk);
		bool whole = false;
		EXPECT_EQ(parse(peer, whole), want) << "chunk " << chunk;
		EXPECT_TRUE(whole);
		EXPECT_EQ(o.footprint(), 0u);
	}
}

// Regression: a reset used to drop every queued byte, the tail of a record
// the socket had taken part of included, and the peer then read frame
// bytes as the next length.
TEST(WireOut, AResetFinishesTheRecordBegunAndDropsTheRest)
{
	for (const size_t cut : {1u, 3u, 4u, 5u, 100u, 1503u}) {
		wire::Out o;
		std::vector<uint8_t> peer;
		const auto a = frame(1500, 1), b = frame(800, 2), c = frame(60, 3);
		o.push(a.data(), a.size());
		o.push(b.data(), b.size());
		o.push(c.data(), c.size());
		take(o, peer, cut);	// inside a's record (1504 bytes)
		o.drop_unsent();
		EXPECT_EQ(o.pending(), 1504 - cut) << "cut " << cut;
		while (!o.empty())
			take(o, peer, 7);
		// The stream goes on with whole records after the reset.
		const auto d = frame(300, 4);
		o.push(d.data(), d.size());
		take(o, peer, 65536);
		bool whole = false;
		const auto got = parse(peer, whole);
		EXPECT_TRUE(whole) << "cut " << cut;
		EXPECT_EQ(got, (std::vector<std::vector<uint8_t>>{a, d}));
	}
}

TEST(WireOut, AResetOnARecordBoundaryDropsEverythingUnsent)
{
	wire::Out o;
	std::vector<uint8_t> peer;
	const auto a = frame(100, 1), b = frame(200, 2);
	o.push(a.data(), a.size());
	o.push(b.data(), b.size());
	take(o, peer, 104);		// a whole, nothing of b
	o.drop_unsent();
	EXPECT_TRUE(o.empty());
	EXPECT_EQ(o.footprint(), 0u);
	o.drop_unsent();		// and again, with nothing queued
	EXPECT_TRUE(o.empty());
	bool whole = false;
	EXPECT_EQ(parse(peer, whole), (std::vector<std::vector<uint8_t>>{a}));
	EXPECT_TRUE(whole);
}

// A socket that always takes a little less than is queued never lets the
// buffer empty; the records sent are reclaimed all the same, so the buffer
// stays within about twice what is pending.
TEST(WireOut, SentRecordsAreReclaimedWhileTheSocketLags)
{
	wire::Out o;
	std::vector<uint8_t> peer;
	const auto f = frame(4096, 9);
	size_t most = 0;
	for (int i = 0; i < 10000; i++) {
		o.push(f.data(), f.size());
		if (o.pending() > 64 * 1024)
			take(o, peer, o.pending() - 5000);
		most = std::max(most, o.footprint());
		peer.clear();	// the peer's side is not what is measured
	}
	EXPECT_LE(most, 2 * (64 * 1024 + 4100) + 4100);
}

}	// namespace

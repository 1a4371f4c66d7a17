// SPDX-License-Identifier: GPL-2.0-or-later
// Ethernet rings and RoCEv2 steering.
#include <gtest/gtest.h>

#include "fake_platform.hpp"

namespace {

constexpr uint64_t kEq = FakePlatform::kMemBase + 0x10000;
constexpr uint64_t kTx = FakePlatform::kMemBase + 0x20000;
constexpr uint64_t kRx = FakePlatform::kMemBase + 0x30000;
constexpr uint64_t kBufs = FakePlatform::kMemBase + 0x100000;
constexpr unsigned kLog = 6;

struct EthFixture : ::testing::Test {
	FakePlatform p;

	void SetUp() override
	{
		p.enable();
		vrnic_admin_cmd c{};
		c.opcode = VRNIC_ADMIN_CREATE_EQ;
		c.create_eq.base = kEq;
		c.create_eq.log_depth = 6;
		c.create_eq.eqn = 1;
		c.create_eq.vector = 1;
		ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
		p.db(0, VRNIC_DB_EQ, VRNIC_FIELD_PREP(VRNIC_EQ_DB_EQN, 1) | VRNIC_EQ_DB_ARM);
		for (uint8_t type : {uint8_t(VRNIC_ETH_RING_TX), uint8_t(VRNIC_ETH_RING_RX)}) {
			c = {};
			c.opcode = VRNIC_ADMIN_CREATE_ETH_RING;
			c.create_eth_ring.base = type == VRNIC_ETH_RING_TX ? kTx : kRx;
			c.create_eth_ring.type = type;
			c.create_eth_ring.log_depth = kLog;
			c.create_eth_ring.eqn = 1;
			ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
		}
		p.irqs.clear();
	}

	void post_tx(uint16_t idx, uint64_t addr, uint16_t len, bool eop)
	{
		vrnic_eth_desc d{};
		d.addr = addr;
		d.len = len;
		d.flags = eop ? VRNIC_ETH_DESC_EOP : 0;
		p.store(kTx + (idx % 64) * sizeof(d), d);
	}
	void post_rx(uint16_t idx, uint16_t len)
	{
		vrnic_eth_desc d{};
		d.addr = kBufs + 0x4000 * (idx % 64);
		d.len = len;
		p.store(kRx + (idx % 64) * sizeof(d), d);
	}
	// The device's own address (FakePlatform's default).
	static constexpr uint8_t kMac[6] = {0x52, 0x54, 0x00, 0x12, 0x34, 0x56};

	static std::vector<uint8_t> frame(size_t len, uint16_t ethertype = 0x0800)
	{
		std::vector<uint8_t> f(len);
		for (size_t i = 0; i < len; i++)
			f[i] = uint8_t(i * 7);
		std::memcpy(f.data(), kMac, 6);
		f[12] = uint8_t(ethertype >> 8);
		f[13] = uint8_t(ethertype);
		return f;
	}
	static std::vector<uint8_t> udp4(uint16_t dport, size_t payload = 32)
	{
		std::vector<uint8_t> f(14 + 20 + 8 + payload);
		std::memcpy(f.data(), kMac, 6);
		f[12] = 0x08;
		f[14] = 0x45;
		f[14 + 9] = 17;
		f[34 + 2] = uint8_t(dport >> 8);
		f[34 + 3] = uint8_t(dport);
		return f;
	}
};

} // namespace

TEST_F(EthFixture, TxGathersDescriptorsIntoOneFrame)
{
	auto f = frame(1500);
	std::memcpy(p.ptr(kBufs), f.data(), 1000);
	std::memcpy(p.ptr(kBufs + 0x8000), f.data() + 1000, 500);
	post_tx(0, kBufs, 1000, false);
	post_tx(1, kBufs + 0x8000, 500, true);
	p.db(0, VRNIC_DB_ETH_TX_ARM, 0);
	p.db(0, VRNIC_DB_ETH_TX, 2);
	EXPECT_TRUE(p.frames.empty()) << "TX ran on the doorbell path";
	p.run();
	ASSERT_EQ(p.frames.size(), 1u);
	EXPECT_EQ(p.frames[0], f);
	for (uint16_t i = 0; i < 2; i++) {
		const auto d = p.load<vrnic_eth_desc>(kTx + i * 16);
		EXPECT_EQ(d.wb_status, VRNIC_ETH_WB_DONE);
	}
	// One ETH_TX event on EQ 1, vector 1.
	const auto eqe = p.load<vrnic_eqe>(kEq);
	EXPECT_EQ(eqe.type, VRNIC_EQE_ETH_TX);
	ASSERT_EQ(p.irqs.size(), 1u);
	EXPECT_EQ(p.irqs[0], 1u);
}

TEST_F(EthFixture, TxWaitsForTheRestOfAFrame)
{
	auto f = frame(100);
	std::memcpy(p.ptr(kBufs), f.data(), 100);
	post_tx(0, kBufs, 50, false);
	p.db(0, VRNIC_DB_ETH_TX, 1);
	p.run();
	EXPECT_TRUE(p.frames.empty());
	post_tx(1, kBufs + 50, 50, true);
	p.db(0, VRNIC_DB_ETH_TX, 2);
	p.run();
	ASSERT_EQ(p.frames.size(), 1u);
	EXPECT_EQ(p.frames[0], f);
}

TEST_F(EthFixture, BadTxDescriptorsCompleteWithError)
{
	post_tx(0, kBufs, 0, true);			// zero length
	post_tx(1, 0x10, 64, true);			// outside guest memory
	post_tx(2, kBufs, 60000, false);		// longer than a frame
	post_tx(3, kBufs, 10, true);			// ... continues here
	for (uint16_t i = 4; i < 4 + VRNIC_ETH_TX_MAX_DESCS; i++)
		post_tx(i, kBufs, 64, false);		// no EOP at all
	p.db(0, VRNIC_DB_ETH_TX, 4 + VRNIC_ETH_TX_MAX_DESCS);
	p.run();
	EXPECT_TRUE(p.frames.empty());
	for (uint16_t i = 0; i < 4 + VRNIC_ETH_TX_MAX_DESCS; i++) {
		const auto d = p.load<vrnic_eth_desc>(kTx + i * 16);
		EXPECT_EQ(d.wb_status, VRNIC_ETH_WB_DONE | VRNIC_ETH_WB_ERROR) << i;
	}
	EXPECT_TRUE(p.rd(VRNIC_REG_STATUS) & VRNIC_STATUS_READY);
}

TEST_F(EthFixture, TxDoorbellBeyondRingRefused)
{
	p.db(0, VRNIC_DB_ETH_TX, 65);
	p.db(0, VRNIC_DB_ETH_TX, VRNIC_FIELD_PREP(VRNIC_ETH_DB_QID, 5) | 1);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_DB_VIOLATIONS), 2u);
}

TEST_F(EthFixture, TxWorkPerPollIsBounded)
{
	auto f = frame(64);
	std::memcpy(p.ptr(kBufs), f.data(), 64);
	unsigned sent = 0;
	for (uint16_t i = 0; i < 64 * 6; i++) {
		post_tx(i, kBufs, 64, true);
		if (i % 64 == 63) {
			p.db(0, VRNIC_DB_ETH_TX, uint16_t(i + 1));
			p.run();
			sent = unsigned(p.frames.size());
		}
	}
	EXPECT_EQ(sent, 64u * 6);
}

TEST_F(EthFixture, RxDeliversIntoPostedBuffer)
{
	post_rx(0, 2048);
	p.db(0, VRNIC_DB_ETH_RX_ARM, 0);
	p.db(0, VRNIC_DB_ETH_RX, 1);
	EXPECT_EQ(p.rx_ready_calls, 1u);
	auto f = frame(1000);
	EXPECT_EQ(vrnic_engine_receive(p.eng, f.data(), f.size()), f.size());
	EXPECT_EQ(std::memcmp(p.ptr(kBufs), f.data(), f.size()), 0);
	const auto d = p.load<vrnic_eth_desc>(kRx);
	EXPECT_EQ(d.wb_len, 1000);
	EXPECT_EQ(d.wb_status, VRNIC_ETH_WB_DONE);
	EXPECT_EQ(p.load<vrnic_eqe>(kEq).type, VRNIC_EQE_ETH_RX);
	// No buffer left: the frame is held back (0), not dropped.
	EXPECT_EQ(vrnic_engine_receive(p.eng, f.data(), f.size()), 0u);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_RX_DROPS), 0u);
}

TEST_F(EthFixture, RxFrameLargerThanBufferIsDropped)
{
	post_rx(0, 1500);
	p.db(0, VRNIC_DB_ETH_RX, 1);
	auto f = frame(9000);
	EXPECT_EQ(vrnic_engine_receive(p.eng, f.data(), f.size()), f.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_RX_DROPS), 1u);
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, 0) << "buffer consumed";
}

TEST_F(EthFixture, UnicastForOtherStationsIsFilteredBroadcastIsNot)
{
	post_rx(0, 2048);
	post_rx(1, 2048);
	p.db(0, VRNIC_DB_ETH_RX, 2);
	// A shared segment: RoCE and plain frames for another MAC are not
	// this NIC's, neither the engine's nor the netdev's.
	auto other = udp4(VRNIC_ROCE_UDP_PORT);
	other[5] ^= 1;
	EXPECT_EQ(vrnic_engine_receive(p.eng, other.data(), other.size()), other.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 0u);
	auto plain = frame(100);
	plain[5] ^= 1;
	EXPECT_EQ(vrnic_engine_receive(p.eng, plain.data(), plain.size()), plain.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, 0);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_RX_DROPS), 0u) << "filtering is not a drop";
	// Broadcast (ARP) and multicast reach the RX ring.
	auto bcast = frame(60, 0x0806);
	std::memset(bcast.data(), 0xff, 6);
	vrnic_engine_receive(p.eng, bcast.data(), bcast.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, VRNIC_ETH_WB_DONE);
	auto mcast = frame(60);
	const uint8_t group[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
	std::memcpy(mcast.data(), group, 6);
	vrnic_engine_receive(p.eng, mcast.data(), mcast.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx + sizeof(vrnic_eth_desc)).wb_status,
		  VRNIC_ETH_WB_DONE);
}

TEST_F(EthFixture, RoceFramesAreSteeredToTheEngine)
{
	post_rx(0, 2048);
	p.db(0, VRNIC_DB_ETH_RX, 1);
	auto roce = udp4(VRNIC_ROCE_UDP_PORT);
	EXPECT_EQ(vrnic_engine_receive(p.eng, roce.data(), roce.size()), roce.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 1u);
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, 0) << "RoCE reached the RX ring";

	auto dns = udp4(53);
	EXPECT_EQ(vrnic_engine_receive(p.eng, dns.data(), dns.size()), dns.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, VRNIC_ETH_WB_DONE);
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 1u);

	// IPv6 RoCE and a truncated frame.
	std::vector<uint8_t> v6(14 + 40 + 8 + 16);
	std::memcpy(v6.data(), kMac, 6);
	v6[12] = 0x86; v6[13] = 0xdd; v6[14] = 0x60; v6[14 + 6] = 17;
	v6[54 + 2] = 0x12; v6[54 + 3] = 0xb7;
	vrnic_engine_receive(p.eng, v6.data(), v6.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 2u);
	roce.resize(36);
	post_rx(1, 2048);
	p.db(0, VRNIC_DB_ETH_RX, 2);
	vrnic_engine_receive(p.eng, roce.data(), roce.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 2u);
}

TEST_F(EthFixture, DestroyRingsAndEqInOrder)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_DESTROY_EQ;
	c.destroy.id = 1;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BUSY) << "rings still use it";
	c.opcode = VRNIC_ADMIN_DESTROY_ETH_RING;
	c.destroy.id = VRNIC_ETH_RING_TX << 8;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	c.destroy.id = VRNIC_ETH_RING_RX << 8;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_NOT_FOUND);
	c.opcode = VRNIC_ADMIN_DESTROY_EQ;
	c.destroy.id = 1;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
}

// Spec 0.7: SET_MAC moves the station address the unicast filter (and the
// RoCE engine) answer to; reset restores the REG_MAC_* address.
TEST_F(EthFixture, SetMacMovesTheUnicastFilter)
{
	const uint8_t mac2[6] = {0x02, 0x00, 0x00, 0xab, 0xcd, 0xef};
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_MAC;
	for (const auto &bad : {std::array<uint8_t, 6>{},
				std::array<uint8_t, 6>{0x01, 0, 0, 0, 0, 1}}) {
		std::memcpy(c.set_mac.mac, bad.data(), 6);
		EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	}
	std::memcpy(c.set_mac.mac, mac2, 6);
	c.set_mac.rsvd[1] = 1;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_mac.rsvd[1] = 0;
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);

	post_rx(0, 2048);
	post_rx(1, 2048);
	p.db(0, VRNIC_DB_ETH_RX, 2);
	auto old = frame(100);	// to the old address: another station's now
	vrnic_engine_receive(p.eng, old.data(), old.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, 0);
	auto roce_old = udp4(VRNIC_ROCE_UDP_PORT);
	vrnic_engine_receive(p.eng, roce_old.data(), roce_old.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 0u);

	auto now = frame(100);
	std::memcpy(now.data(), mac2, 6);
	vrnic_engine_receive(p.eng, now.data(), now.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, VRNIC_ETH_WB_DONE);
	auto roce = udp4(VRNIC_ROCE_UDP_PORT);
	std::memcpy(roce.data(), mac2, 6);
	vrnic_engine_receive(p.eng, roce.data(), roce.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 1u);

	// Reset: back to the permanent address (the filter too).
	p.wr(VRNIC_REG_CTRL, VRNIC_CTRL_RESET);
	p.aq_pi = 0;
	SetUp();
	post_rx(0, 2048);
	p.db(0, VRNIC_DB_ETH_RX, 1);
	vrnic_engine_receive(p.eng, now.data(), now.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, 0);
	vrnic_engine_receive(p.eng, old.data(), old.size());
	EXPECT_EQ(p.load<vrnic_eth_desc>(kRx).wb_status, VRNIC_ETH_WB_DONE);
}

TEST_F(EthFixture, RxFilterRefusesMalformedCommands)
{
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_RX_FILTER;
	c.set_rx_filter.flags = 1u << 2;	// unknown flag
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_rx_filter.flags = 0;
	c.set_rx_filter.mc_count = VRNIC_RX_FILTER_MAX_MC + 1;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_rx_filter.mc_count = 1;	// a unicast address in the list
	c.set_rx_filter.mc[0][0] = 0x02;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_rx_filter.mc[0][0] = 0x01;
	c.set_rx_filter.mc[1][3] = 0x01;	// bytes beyond mc_count
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_rx_filter.mc[1][3] = 0;
	c.set_rx_filter.rsvd[2] = 1;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_BAD_PARAM);
	c.set_rx_filter.rsvd[2] = 0;
	EXPECT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
}

// The multicast list, broadcast, promiscuous mode, and RoCE multicast
// (which the engine takes whatever the list: it steers to attached QPs).
TEST_F(EthFixture, RxFilterMulticastListAndPromiscuous)
{
	const uint8_t listed[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb};
	const uint8_t other[6] = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
	vrnic_admin_cmd c{};
	c.opcode = VRNIC_ADMIN_SET_RX_FILTER;
	c.set_rx_filter.mc_count = 1;
	std::memcpy(c.set_rx_filter.mc[0], listed, 6);
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	for (uint16_t i = 0; i < 8; i++)
		post_rx(i, 2048);
	p.db(0, VRNIC_DB_ETH_RX, 8);
	auto status = [&](unsigned int i) {
		return p.load<vrnic_eth_desc>(kRx + i * sizeof(vrnic_eth_desc)).wb_status;
	};

	auto m = frame(60);
	std::memcpy(m.data(), other, 6);
	vrnic_engine_receive(p.eng, m.data(), m.size());
	EXPECT_EQ(status(0), 0) << "a group not in the list was taken";
	std::memcpy(m.data(), listed, 6);
	vrnic_engine_receive(p.eng, m.data(), m.size());
	EXPECT_EQ(status(0), VRNIC_ETH_WB_DONE);
	auto b = frame(60, 0x0806);
	std::memset(b.data(), 0xff, 6);
	vrnic_engine_receive(p.eng, b.data(), b.size());
	EXPECT_EQ(status(1), VRNIC_ETH_WB_DONE) << "broadcast is always taken";
	auto rm = udp4(VRNIC_ROCE_UDP_PORT);
	std::memcpy(rm.data(), other, 6);
	vrnic_engine_receive(p.eng, rm.data(), rm.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 1u);

	// ALLMULTI takes every group.
	c.set_rx_filter.flags = VRNIC_RX_FILTER_ALLMULTI;
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	std::memcpy(m.data(), other, 6);
	vrnic_engine_receive(p.eng, m.data(), m.size());
	EXPECT_EQ(status(2), VRNIC_ETH_WB_DONE);

	// A foreign unicast frame: dropped, then taken in promiscuous mode
	// (by the RX ring; a foreign RoCE frame never by the engine).
	auto u = frame(60);
	u[5] ^= 1;
	c.set_rx_filter.flags = 0;
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	vrnic_engine_receive(p.eng, u.data(), u.size());
	EXPECT_EQ(status(3), 0);
	c.set_rx_filter.flags = VRNIC_RX_FILTER_PROMISC;
	ASSERT_EQ(p.admin(c).status, VRNIC_ADMIN_ST_OK);
	vrnic_engine_receive(p.eng, u.data(), u.size());
	EXPECT_EQ(status(3), VRNIC_ETH_WB_DONE);
	auto ru = udp4(VRNIC_ROCE_UDP_PORT);
	ru[5] ^= 1;
	vrnic_engine_receive(p.eng, ru.data(), ru.size());
	EXPECT_EQ(p.rd(VRNIC_REG_CNT_ROCE_RX), 1u);
	EXPECT_EQ(status(4), VRNIC_ETH_WB_DONE);
}

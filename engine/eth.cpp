// SPDX-License-Identifier: GPL-2.0-or-later
// Converged Ethernet function: TX/RX descriptor rings and the steering of
// RoCEv2 (UDP/4791) frames away from the RX ring to the RDMA engine.
#include "device.hpp"

namespace vrnic {

namespace {

constexpr size_t kEthHdr = 14;
constexpr uint16_t kEthTypeVlan = 0x8100;
constexpr uint16_t kEthTypeIpv4 = 0x0800;
constexpr uint16_t kEthTypeIpv6 = 0x86dd;
constexpr uint8_t kIpProtoUdp = 17;

uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

// Write back the device-owned tail of a descriptor (wb_len, wb_status) in
// one 32-bit store.
bool write_back(const Platform &plat, uint64_t desc, uint16_t len,
		uint8_t status)
{
	const uint8_t wb[4] = { uint8_t(len), uint8_t(len >> 8), status, 0 };

	static_assert(offsetof(vrnic_eth_desc, wb_len) == 12);
	return plat.dma_write(desc + offsetof(vrnic_eth_desc, wb_len), wb,
			      sizeof(wb));
}

} // namespace

bool Device::is_roce(std::span<const uint8_t> f)
{
	size_t off = kEthHdr;

	if (f.size() < kEthHdr)
		return false;
	uint16_t type = be16(&f[12]);
	if (type == kEthTypeVlan) {
		if (f.size() < kEthHdr + 4)
			return false;
		type = be16(&f[16]);
		off += 4;
	}
	size_t l4;
	if (type == kEthTypeIpv4) {
		if (f.size() < off + 20 || (f[off] >> 4) != 4)
			return false;
		const size_t ihl = size_t(f[off] & 0xf) * 4;
		// Non-first fragments carry no UDP header.
		if (ihl < 20 || f[off + 9] != kIpProtoUdp ||
		    (be16(&f[off + 6]) & 0x1fff) != 0)
			return false;
		l4 = off + ihl;
	} else if (type == kEthTypeIpv6) {
		if (f.size() < off + 40 || (f[off] >> 4) != 6 ||
		    f[off + 6] != kIpProtoUdp)
			return false;
		l4 = off + 40;
	} else {
		return false;
	}
	return f.size() >= l4 + 8 && be16(&f[l4 + 2]) == VRNIC_ROCE_UDP_PORT;
}

EthRing *Device::eth_ring(EthRing *rings, uint32_t v)
{
	const uint32_t qid = VRNIC_FIELD_GET(VRNIC_ETH_DB_QID, v);

	if (qid >= VRNIC_MAX_ETH_QUEUES || !rings[qid].enabled) {
		cnt_.db_violations++;
		guest_error("doorbell for a missing Ethernet ring");
		return nullptr;
	}
	return &rings[qid];
}

void Device::eth_doorbell(EthRing *rings, uint32_t v)
{
	const auto pi = uint16_t(VRNIC_FIELD_GET(VRNIC_ETH_DB_PI, v));
	EthRing *r = eth_ring(rings, v);

	if (!r)
		return;
	if (uint16_t(pi - r->head) > r->depth()) {
		cnt_.db_violations++;
		guest_error("Ethernet producer index beyond the ring");
		return;
	}
	r->pi = pi;
}

void Device::eth_arm(EthRing *rings, bool rx, uint32_t v)
{
	const auto ci = uint16_t(VRNIC_FIELD_GET(VRNIC_ETH_DB_PI, v));
	EthRing *r = eth_ring(rings, v);

	if (!r)
		return;
	r->armed = true;
	// Completions the driver has not processed yet: report them now so a
	// completion racing with the arm is never lost.
	if (ci != r->head)
		ring_event(*r, rx, unsigned(r - rings));
}

void Device::ring_event(EthRing &r, bool rx, unsigned int qid)
{
	if (!r.armed)
		return;
	r.armed = false;
	eqs_[r.eqn].post(plat_, cnt_, rx ? VRNIC_EQE_ETH_RX : VRNIC_EQE_ETH_TX,
			 qid);
}

void Device::process_tx(EthRing &r, unsigned int qid, unsigned int &budget)
{
	bool progressed = false;

	while (budget > 0 && r.head != r.pi) {
		if (out_.frames.room() < kTxRoom) {
			budget = 0;	// the outbox is full: next round
			break;
		}
		uint16_t idx = r.head;
		size_t len = 0;
		unsigned int n = 0;
		bool eop = false, bad = false;

		// Gather one frame: copy every descriptor once, then use the copy.
		while (idx != r.pi && n < VRNIC_ETH_TX_MAX_DESCS) {
			vrnic_eth_desc d;
			if (!plat_.read(r.desc_addr(idx), d)) {
				cnt_.dma_errors++;
				guest_error("TX descriptor read failed");
				fatal(VRNIC_ERR_DMA);
				return;
			}
			n++;
			idx++;
			const size_t dlen = le(d.len);
			if (!bad && (dlen == 0 || len + dlen > tx_buf_.size())) {
				guest_error("TX descriptor length invalid");
				bad = true;
			} else if (!bad &&
				   !plat_.dma_read(le(d.addr), &tx_buf_[len], dlen)) {
				cnt_.dma_errors++;
				bad = true;
			} else if (!bad) {
				len += dlen;
			}
			if (le(d.flags) & VRNIC_ETH_DESC_EOP) {
				eop = true;
				break;
			}
		}
		if (!eop) {
			if (n < VRNIC_ETH_TX_MAX_DESCS)
				break;	// rest of the frame is not posted yet
			guest_error("TX frame spans too many descriptors");
			bad = true;
		}
		if (!bad && len < kEthHdr) {
			guest_error("TX frame shorter than an Ethernet header");
			bad = true;
		}
		const unsigned int prio = bad ? 0 : frame_prio({tx_buf_.data(), len});
		if (!bad && pfc_.any() && pfc_.paused(prio, plat_.now_ns())) {
			// PFC: the frame stays at the head of its ring (read
			// again once the pause ends); the timer comes back.
			tx_held_ = true;
			tx_held_prio_ = uint8_t(prio);
			break;
		}
		if (!bad) {
			plat_.send_frame({tx_buf_.data(), len});
			cnt_.eth_tx_frames++;
			cnt_.eth_tx_bytes += len;
			plat_.trace(VRNIC_TRACE_ETH_TX, qid, len);
		}
		const uint8_t st = VRNIC_ETH_WB_DONE | (bad ? VRNIC_ETH_WB_ERROR : 0);
		for (uint16_t i = r.head; i != idx; i++) {
			if (!write_back(plat_, r.desc_addr(i), 0, st)) {
				cnt_.dma_errors++;
				fatal(VRNIC_ERR_DMA);
				return;
			}
		}
		r.head = idx;
		budget--;
		progressed = true;
	}
	if (progressed)
		ring_event(r, false, qid);
}

void Device::rx_drop(RxDrop why, size_t len)
{
	cnt_.eth_rx_drops++;
	plat_.trace(VRNIC_TRACE_ETH_RX_DROP, uint64_t(why), len);
}

bool Device::rx_accept(const uint8_t *dst) const
{
	if (rx_flags_ & VRNIC_RX_FILTER_PROMISC)
		return true;
	if (!(dst[0] & 1))
		return std::memcmp(dst, mac_.data(), 6) == 0;
	static constexpr uint8_t kBcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	if (std::memcmp(dst, kBcast, 6) == 0 ||
	    (rx_flags_ & VRNIC_RX_FILTER_ALLMULTI))
		return true;
	for (unsigned int i = 0; i < rx_mc_count_ && i < rx_mc_.size(); i++)
		if (std::memcmp(dst, rx_mc_[i].data(), 6) == 0)
			return true;
	return false;
}

bool Device::can_receive() const
{
	// Frames are always accepted; receive() returns 0 to hold one back
	// while the RX ring has no free buffer.
	return true;
}

size_t Device::receive(std::span<const uint8_t> f)
{
	const size_t len = f.size();

	if (!ready()) {
		rx_drop(RxDrop::Disabled, len);
		return len;
	}
	if (len < kEthHdr) {
		rx_drop(RxDrop::Runt, len);
		return len;
	}
	// A NIC on a shared segment: unicast frames for other stations are
	// not ours, neither for the RoCE engine nor (unless promiscuous) for
	// the netdev.  Multicast RoCE frames go to the engine whatever the
	// filter (it delivers to attached QPs only); other multicast and
	// broadcast by the receive filter.
	// MAC control (PFC, PAUSE) ends at the MAC, whatever its address.
	if (PortPause::is_control(f)) {
		const auto rx = pfc_.receive(f, plat_.now_ns(), cfg_.speed_mbps);
		plat_.trace(VRNIC_TRACE_MAC_CONTROL, uint64_t(rx), len);
		if (rx == PortPause::Rx::Pfc || rx == PortPause::Rx::Pause) {
			if (tx_held_ && !pfc_.paused(tx_held_prio_, plat_.now_ns()))
				release_tx();
			rdma_.pause_changed();
		}
		return len;
	}
	const bool own = !(f[0] & 1) && std::memcmp(f.data(), mac_.data(), 6) == 0;
	const bool roce = is_roce(f);
	if (roce && (own || (f[0] & 1))) {
		cnt_.roce_rx_frames++;
		plat_.trace(VRNIC_TRACE_ROCE_RX, len);
		rdma_.receive(f);
		plat_.schedule();
		return len;
	}
	if (!own && !rx_accept(f.data())) {
		cnt_.eth_rx_filtered++;
		return len;
	}
	EthRing &r = rx_[0];
	if (!r.enabled) {
		rx_drop(RxDrop::NoRing, len);
		return len;
	}
	if (len > VRNIC_ETH_MAX_FRAME) {
		rx_drop(RxDrop::TooBig, len);
		return len;
	}
	if (r.head == r.pi)
		return 0;	// no buffer: QEMU queues it until rx_ready()

	const uint64_t daddr = r.desc_addr(r.head);
	vrnic_eth_desc d;
	if (!plat_.read(daddr, d)) {
		cnt_.dma_errors++;
		guest_error("RX descriptor read failed");
		fatal(VRNIC_ERR_DMA);
		return len;
	}
	if (le(d.len) < len) {
		// Buffer smaller than the frame (MTU mismatch with the peer).
		rx_drop(RxDrop::TooBig, len);
		return len;
	}
	uint8_t st = VRNIC_ETH_WB_DONE;
	if (!plat_.dma_write(le(d.addr), f.data(), len)) {
		cnt_.dma_errors++;
		rx_drop(RxDrop::Dma, len);
		st |= VRNIC_ETH_WB_ERROR;
	}
	if (!write_back(plat_, daddr, uint16_t(len), st)) {
		cnt_.dma_errors++;
		fatal(VRNIC_ERR_DMA);
		return len;
	}
	r.head++;
	if (!(st & VRNIC_ETH_WB_ERROR)) {
		cnt_.eth_rx_frames++;
		cnt_.eth_rx_bytes += len;
		plat_.trace(VRNIC_TRACE_ETH_RX, 0, len);
	}
	ring_event(r, true, 0);
	return len;
}

} // namespace vrnic

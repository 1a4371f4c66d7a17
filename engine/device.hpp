// SPDX-License-Identifier: GPL-2.0-or-later
// The vrnic device: register file, admin queue, event queues, Ethernet
// rings and the steering of RoCEv2 frames to the transport.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "eq.hpp"
#include "pfc.hpp"
#include "platform.hpp"
#include "rdma.hpp"
#include "vrnic_engine.h"
#include "vrnic_hw.h"

namespace vrnic {

struct DeviceCounters {
	uint64_t eth_tx_frames = 0;
	uint64_t eth_tx_bytes = 0;
	uint64_t eth_rx_frames = 0;
	uint64_t eth_rx_bytes = 0;
	uint64_t eth_rx_drops = 0;
	uint64_t eth_rx_filtered = 0;	// unicast for another station
	uint64_t roce_rx_frames = 0;
	uint64_t db_violations = 0;
	uint64_t eq_overflows = 0;
	uint64_t dma_errors = 0;
	uint64_t admin_cmds = 0;
	uint64_t reentry_refused = 0;	// entry points called while running
	uint64_t loopback_drops = 0;	// looped-back frames, queue full
};

// One Ethernet descriptor ring (TX or RX) in guest memory.
struct EthRing {
	bool enabled = false;
	bool armed = false;		// post an EQE on the next progress
	uint64_t base = 0;
	unsigned int log_depth = 0;
	unsigned int eqn = 0;
	uint16_t head = 0;		// next descriptor the device uses
	uint16_t pi = 0;		// producer index from the doorbell

	[[nodiscard]] uint16_t depth() const { return uint16_t(1u << log_depth); }
	[[nodiscard]] uint16_t pending() const { return uint16_t(pi - head); }
	[[nodiscard]] uint64_t desc_addr(uint16_t idx) const
	{
		return base + uint64_t(idx & (depth() - 1)) *
			sizeof(vrnic_eth_desc);
	}
};

// Why a received frame was dropped (trace argument).
enum class RxDrop : uint8_t { NoRing, TooBig, Runt, Dma, Disabled };

class Device {
public:
	Device(const vrnic_engine_config &cfg, const vrnic_platform_ops *ops,
	       void *opaque);
	// No wake-up from the budget while the members are torn down.
	~Device() { budget_.on_release(nullptr); }
	Device(const Device &) = delete;
	Device &operator=(const Device &) = delete;

	// Entry rules.  Every extern "C" entry point (capi.cpp) is one call
	// of enter() ... leave(), and the engine is never re-entered:
	// - A platform callback made while the engine runs (DMA, interrupt,
	//   timer, log) may call an entry point; that call is refused: a
	//   receive returns 0 (the platform holds the frame, rx_ready()
	//   follows), register and doorbell accesses are dropped and logged,
	//   poll, timer, reset and link changes are deferred until the
	//   engine is left.
	// - Frames for the wire and rx_ready() are queued (Outbox) and handed
	//   to the platform only by the outermost entry point as it returns,
	//   kDrainFrames at most, the rest scheduled.  A frame the platform
	//   delivers back synchronously meanwhile is an ordinary nested entry
	//   that only queues; the same loop sends what it queued.
	// - A C++ exception stops at the entry point: the device goes FATAL
	//   (VRNIC_ERR_INTERNAL) and waits for a reset.
	enum class Call : uint8_t {
		Reset, RegRead, RegWrite, DbWrite, Poll, Timer, Receive, Link,
		TxResume, Config
	};
	enum class Run : uint8_t { Idle, Running, Draining };
	[[nodiscard]] Run state() const { return run_; }
	// False: the engine is running and the call is refused (and handled
	// as the rules say); otherwise it runs until leave(previous state).
	[[nodiscard]] bool enter(Call what, bool link_up = false) noexcept;
	void leave(Run prev) noexcept;
	// An exception reached an entry point.
	void internal_error() noexcept;

	void reset();
	// vrnic_engine_set_qpc(): the QP-context cache model, at once.
	void set_qpc(uint32_t entries, uint32_t miss_ns);
	// vrnic_engine_tx_resume(): the network has room again.
	void tx_resume()
	{
		tx_blocked_ = false;
		plat_.schedule();	// poll(): the transport may go on
	}
	uint32_t reg_read(uint64_t offset, unsigned int size);
	void reg_write(uint64_t offset, uint64_t value, unsigned int size);
	void db_write(uint64_t offset, uint64_t value, unsigned int size);
	void poll();
	void timer();
	bool can_receive() const;
	size_t receive(std::span<const uint8_t> frame);
	void set_link(bool up);

	static constexpr uint32_t kCaps = VRNIC_CAP_ETH | VRNIC_CAP_ROCE_V2 |
					  VRNIC_CAP_TEST_REGS |
					  VRNIC_CAP_SELECTIVE_REPEAT;
	// Work bounds: admin commands and TX frames handled per poll().
	static constexpr unsigned int kAdminBudget = 64;
	static constexpr unsigned int kTxBudget = 256;
	// Outgoing frames held until the engine is left, and how many one
	// exit hands over.  A round of poll() fits (Ethernet TX stops and the
	// transport waits while less than a frame / a round is free).
	static constexpr size_t kOutboxBytes = 4 << 20;
	static constexpr unsigned int kDrainFrames = 1024;
	static constexpr size_t kTxRoom = 2 * (size_t(VRNIC_ETH_MAX_FRAME) + 8);
	// A queued frame takes its length, a 4-byte header and padding to 4.
	static constexpr size_t kRdmaRoom =
		2 * size_t(Rdma::kPktBudget) * (roce::kMaxFrame + 8);
	// Bytes of page lists an admin pass copies before it yields: one
	// largest list (8 MiB) more at most.
	static constexpr uint64_t kAdminCopyBudget = 8ull << 20;

	[[nodiscard]] const DeviceCounters &counters() const { return cnt_; }
	[[nodiscard]] const Rdma &rdma() const { return rdma_; }
	[[nodiscard]] PfcCounters pfc_counters() const
	{
		return pfc_.counters(plat_.now_ns());
	}
	// Tests only, between engine calls (never inside one): the hooks
	// that have no guest interface yet, such as Rdma::set_qp_rate().
	[[nodiscard]] Rdma &rdma_for_test() { return rdma_; }
	[[nodiscard]] const HostBudget &budget() const { return budget_; }
	[[nodiscard]] bool ready() const { return status_ & VRNIC_STATUS_READY; }
	[[nodiscard]] const Outbox &outbox() const { return out_; }

private:
	// Registers
	void write_ctrl(uint32_t v);
	void enable();
	void fatal(uint32_t err);
	void guest_error(const std::string &msg);
	void refuse(Call what, bool link_up);
	void run_deferred();
	void drain();

	// Admin queue
	void process_admin();
	uint8_t exec_admin(const vrnic_admin_cmd &cmd, uint32_t &result);
	uint8_t admin_query(const vrnic_admin_query &q, const void *data,
			    size_t len, uint32_t &result);
	uint8_t admin_create_eq(const vrnic_admin_create_eq &c);
	uint8_t admin_destroy_eq(uint32_t eqn);
	uint8_t admin_create_eth_ring(const vrnic_admin_create_eth_ring &c);
	uint8_t admin_destroy_eth_ring(uint32_t id);
	uint8_t admin_set_port(const vrnic_admin_set_port &c);
	uint8_t admin_set_mac(const vrnic_admin_set_mac &c);
	uint8_t admin_set_rx_filter(const vrnic_admin_set_rx_filter &c);
	uint8_t admin_set_cc(const vrnic_admin_cmd &cmd);
	[[nodiscard]] vrnic_cc_params cc_params() const;
	// The receive filter (spec 0.7): is a frame to this destination ours?
	[[nodiscard]] bool rx_accept(const uint8_t *dst) const;
	uint8_t admin_create_uctx(uint32_t &result);
	uint8_t admin_destroy_uctx(uint32_t id);
	vrnic_device_attr device_attr() const;
	vrnic_stats stats() const;
	vrnic_port_stats port_stats() const;

	// Test registers
	void run_test_dma();

	// Ethernet
	EthRing *eth_ring(EthRing *rings, uint32_t value);
	void eth_doorbell(EthRing *rings, uint32_t value);
	void eth_arm(EthRing *rings, bool rx, uint32_t value);
	void process_tx(EthRing &ring, unsigned int qid, unsigned int &budget);
	void ring_event(EthRing &ring, bool rx, unsigned int qid);
	static bool is_roce(std::span<const uint8_t> frame);
	void rx_drop(RxDrop why, size_t len);
	void release_tx();
	void post_async(uint8_t type, uint32_t id, uint64_t data = 0);

	Outbox out_;
	Platform plat_;
	vrnic_engine_config cfg_;
	Run run_ = Run::Idle;
	bool sending_ = false;		// a frame is being handed over
	// The network said it is full: frames wait in the outbox until
	// vrnic_engine_tx_resume() (never dropped for want of room).
	bool tx_blocked_ = false;
	bool reset_pending_ = false;
	bool timer_pending_ = false;
	std::optional<bool> link_pending_;

	// Register state
	uint32_t status_ = 0;
	uint32_t ctrl_ = 0;
	uint32_t error_ = 0;
	uint32_t scratch_ = 0;
	uint64_t test_dma_addr_ = 0;
	// Frames queued behind the one being handed over when a reset came.
	size_t drop_after_send_ = 0;
	uint32_t test_dma_len_ = 0;
	uint32_t test_dma_op_ = 0;
	uint32_t test_dma_status_ = VRNIC_TEST_DMA_ST_IDLE;
	uint64_t aq_base_ = 0;
	uint64_t acq_base_ = 0;
	uint32_t aq_log_depth_ = 0;
	uint64_t aeq_base_ = 0;
	uint32_t aeq_log_depth_ = 0;
	bool link_up_;
	uint32_t mtu_ = 1500;

	// Admin queue state
	uint16_t aq_pi_ = 0;		// producer index from the doorbell
	uint16_t aq_ci_ = 0;		// next command to execute
	bool admin_pending_ = false;

	std::array<EventQueue, VRNIC_MAX_EQS> eqs_{};	// [0] is the AEQ
	std::array<EthRing, VRNIC_MAX_ETH_QUEUES> tx_{};
	std::array<EthRing, VRNIC_MAX_ETH_QUEUES> rx_{};
	bool tx_pending_ = false;
	// The TX ring's head frame is on a priority PFC pauses: the ring
	// waits (head-of-line, as one TX queue does) for the pause to end.
	bool tx_held_ = false;
	uint8_t tx_held_prio_ = 0;
	std::array<bool, VRNIC_NUM_DB_PAGES> uctx_used_{};

	// One frame's worth of TX staging, allocated once.
	std::vector<uint8_t> tx_buf_;
	DeviceCounters cnt_;
	std::array<uint8_t, 6> mac_{};
	// Receive filter (SET_RX_FILTER); reset: all multicast.
	uint32_t rx_flags_ = VRNIC_RX_FILTER_ALLMULTI;
	unsigned int rx_mc_count_ = 0;
	std::array<std::array<uint8_t, 6>, VRNIC_RX_FILTER_MAX_MC> rx_mc_{};
	// The port's MAC control receiver (PFC, PAUSE); rdma_ asks it.
	PortPause pfc_;
	// Before rdma_: everything rdma_ holds is charged to it.
	HostBudget budget_;
	Rdma rdma_;
};

} // namespace vrnic

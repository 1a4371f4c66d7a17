// SPDX-License-Identifier: GPL-2.0-or-later
// Register file, reset, test registers and doorbell decoding.
#include "device.hpp"

#include <algorithm>
#include <charconv>

namespace vrnic {

namespace {

std::string hex(uint64_t v)
{
	std::array<char, 24> buf{'0', 'x'};
	auto res = std::to_chars(buf.data() + 2, buf.data() + buf.size(), v, 16);
	return {buf.data(), res.ptr};
}

constexpr uint64_t set_lo(uint64_t reg, uint32_t v)
{
	return (reg & ~0xffffffffull) | v;
}

constexpr uint64_t set_hi(uint64_t reg, uint32_t v)
{
	return (reg & 0xffffffffull) | (uint64_t(v) << 32);
}

} // namespace

Device::Device(const vrnic_engine_config &cfg, const vrnic_platform_ops *ops,
	       void *opaque)
	: out_(kOutboxBytes), plat_(ops, opaque, out_), cfg_(cfg),
	  link_up_(cfg.link_up),
	  tx_buf_(VRNIC_ETH_MAX_FRAME),
	  mac_{cfg.mac[0], cfg.mac[1], cfg.mac[2], cfg.mac[3], cfg.mac[4], cfg.mac[5]},
	  budget_(cfg.host_mem_budget),
	  rdma_(plat_, budget_, cnt_, eqs_, uctx_used_, mac_, mtu_, pfc_)
{
	if (!cfg_.speed_mbps)
		cfg_.speed_mbps = VRNIC_SPEED_MBPS_DEFAULT;
	cfg_.num_msix = std::min<uint32_t>(cfg_.num_msix, VRNIC_NUM_MSIX);
	set_qpc(cfg_.qpc_cache, cfg_.qpc_miss_ns);
	// Memory came back after a refusal: WQEs waiting for it are fetched.
	budget_.on_release([this] { plat_.schedule(); });
	reset();
}

void Device::reset()
{
	plat_.trace(VRNIC_TRACE_RESET);
	status_ = VRNIC_STATUS_RESET_DONE;
	ctrl_ = 0;
	error_ = VRNIC_ERR_NONE;
	scratch_ = 0;
	test_dma_addr_ = 0;
	test_dma_len_ = 0;
	test_dma_op_ = 0;
	test_dma_status_ = VRNIC_TEST_DMA_ST_IDLE;
	aq_base_ = acq_base_ = aeq_base_ = 0;
	aq_log_depth_ = aeq_log_depth_ = 0;
	mtu_ = 1500;
	std::memcpy(mac_.data(), cfg_.mac, mac_.size());
	rx_flags_ = VRNIC_RX_FILTER_ALLMULTI;
	rx_mc_count_ = 0;
	rx_mc_ = {};
	aq_pi_ = aq_ci_ = 0;
	admin_pending_ = false;
	tx_pending_ = false;
	timer_pending_ = false;
	// Frames queued before a reset never leave after it, deferred reset
	// or not.  One being handed over right now (a reset from the
	// platform's send callback) is popped by the exit path when the
	// callback returns, and the ones behind it with it.
	if (sending_) {
		drop_after_send_ = out_.frames.frames() - 1;
	} else {
		out_.frames.clear();
		// What the network held was ours; the platform forgets it
		// with the reset (vrnic-device drops its outbox), so nothing is
		// waited for: the engine does not rely on the purge calling
		// vrnic_frame_sent() to send again.
		tx_blocked_ = false;
	}
	for (auto &eq : eqs_)
		eq.disable();
	tx_.fill(EthRing());
	rx_.fill(EthRing());
	uctx_used_.fill(false);
	uctx_used_[0] = true;	// the kernel's page
	cnt_ = DeviceCounters();
	pfc_.reset();		// a reset MAC forgets pauses
	tx_held_ = false;
	rdma_.reset();
	// Congestion control back to its defaults, at the port's speed.
	rdma_.cc_settings() = CcSettings{};
	rdma_.cc_settings().cfg.line_rate_Bps = cc::mbps_to_Bps(cfg_.speed_mbps);
}

void Device::guest_error(const std::string &msg)
{
	plat_.guest_error("vrnic: " + msg);
}

void Device::fatal(uint32_t err)
{
	if (status_ & VRNIC_STATUS_FATAL)
		return;
	plat_.trace(VRNIC_TRACE_FATAL, err);
	error_ = err;
	status_ |= VRNIC_STATUS_FATAL;
	status_ &= ~VRNIC_STATUS_READY;
	admin_pending_ = tx_pending_ = false;
	// Tell the driver if the async EQ still works.
	eqs_[0].post(plat_, cnt_, VRNIC_EQE_FATAL, err);
}

bool Device::enter(Call what, bool link_up) noexcept
{
	if (run_ == Run::Running) {
		try {
			refuse(what, link_up);
		} catch (...) {
			// Logging failed: the call is refused all the same.
		}
		return false;
	}
	run_ = Run::Running;
	return true;
}

// Out of range is clamped: 0 ns is the default, more than
// VRNIC_MAX_QP entries is VRNIC_MAX_QP.  QUERY_DEVICE reports the new
// values; a driver learns them when it next probes (and only then gives
// the memory a limited cache reads contexts from).
void Device::set_qpc(uint32_t entries, uint32_t miss_ns)
{
	cfg_.qpc_miss_ns = miss_ns ? std::min(miss_ns, VRNIC_QPC_MISS_NS_MAX)
				   : VRNIC_QPC_MISS_NS_DEFAULT;
	cfg_.qpc_cache = std::min<uint32_t>(entries, VRNIC_MAX_QP);
	rdma_.set_qpc(cfg_.qpc_cache, cfg_.qpc_miss_ns);
}

void Device::refuse(Call what, bool link_up)
{
	switch (what) {
	case Call::Poll:
		plat_.schedule();	// the platform calls again later
		return;
	case Call::Timer:
		timer_pending_ = true;
		plat_.schedule();
		return;
	case Call::Reset:
		reset_pending_ = true;
		return;
	case Call::Link:
		link_pending_ = link_up;
		return;
	case Call::TxResume:
		tx_blocked_ = false;	// the running call's exit sends
		plat_.schedule();
		return;
	case Call::Receive:
		out_.rx_ready = true;	// ask for the frame again
		break;
	case Call::RegRead:
	case Call::RegWrite:
	case Call::DbWrite:
		guest_error("blocked re-entrant register or doorbell access");
		break;
	case Call::Config:
		break;		// the caller is told (false)
	}
	cnt_.reentry_refused++;
}

void Device::run_deferred()
{
	if (reset_pending_) {
		reset_pending_ = false;
		reset();
	}
	if (link_pending_) {
		const bool up = *link_pending_;
		link_pending_.reset();
		set_link(up);
	}
}

void Device::leave(Run prev) noexcept
{
	if (prev == Run::Draining) {
		run_ = Run::Draining;	// nested in an exit: it sends for us
		return;
	}
	try {
		drain();
	} catch (...) {
		run_ = Run::Running;
		internal_error();
	}
	sending_ = false;
	drop_after_send_ = 0;
	run_ = Run::Idle;
}

// The exit path: deferred calls, then frames and rx_ready() to the
// platform, which may enter the engine again (nested entries only queue).
void Device::drain()
{
	for (unsigned int sent = 0;;) {
		if (reset_pending_ || link_pending_) {
			run_ = Run::Running;
			try {
				run_deferred();
			} catch (...) {
				internal_error();
			}
		}
		run_ = Run::Draining;
		if (out_.rx_ready) {
			out_.rx_ready = false;
			plat_.rx_ready_now();
		}
		if (out_.frames.empty() || tx_blocked_)
			return;	// tx_resume() drains again
		if (sent++ == kDrainFrames) {
			plat_.schedule();	// the next poll() hands over more
			return;
		}
		// The frame stays queued (and untouched) until sent.
		sending_ = true;
		tx_blocked_ = plat_.send_now(out_.frames.front());
		sending_ = false;
		out_.frames.pop();
		for (; drop_after_send_ > 0 && !out_.frames.empty(); drop_after_send_--)
			out_.frames.pop();
		drop_after_send_ = 0;
	}
}

void Device::internal_error() noexcept
{
	try {
		guest_error("internal error, device stopped until reset");
		fatal(VRNIC_ERR_INTERNAL);
	} catch (...) {
		// Even the event could not be posted: the registers say it.
		if (!(status_ & VRNIC_STATUS_FATAL))
			error_ = VRNIC_ERR_INTERNAL;
		status_ = (status_ | VRNIC_STATUS_FATAL) & ~VRNIC_STATUS_READY;
		admin_pending_ = tx_pending_ = false;
	}
}

uint32_t Device::reg_read(uint64_t offset, unsigned int size)
{
	uint32_t v = 0;

	if (size != 4 || offset % 4) {
		guest_error("unaligned or non-32-bit register read at " +
			    hex(offset));
		return 0;
	}
	switch (offset) {
	case VRNIC_REG_VERSION: v = VRNIC_SPEC_VERSION; break;
	case VRNIC_REG_CAPS: v = kCaps; break;
	case VRNIC_REG_STATUS: v = status_; break;
	case VRNIC_REG_CTRL: v = ctrl_; break;
	case VRNIC_REG_ERROR: v = error_; break;
	case VRNIC_REG_NUM_MSIX: v = cfg_.num_msix; break;
	case VRNIC_REG_NUM_DB_PAGES: v = VRNIC_NUM_DB_PAGES; break;
	case VRNIC_REG_MAX_MTU: v = VRNIC_ETH_MAX_MTU; break;
	case VRNIC_REG_MAC_LO:
		v = cfg_.mac[0] | cfg_.mac[1] << 8 | cfg_.mac[2] << 16 |
		    uint32_t(cfg_.mac[3]) << 24;
		break;
	case VRNIC_REG_MAC_HI: v = cfg_.mac[4] | cfg_.mac[5] << 8; break;
	case VRNIC_REG_LINK: v = link_up_ ? VRNIC_LINK_UP : 0; break;
	case VRNIC_REG_SCRATCH: v = scratch_; break;
	case VRNIC_REG_TEST_DMA_ADDR_LO: v = uint32_t(test_dma_addr_); break;
	case VRNIC_REG_TEST_DMA_ADDR_HI: v = uint32_t(test_dma_addr_ >> 32); break;
	case VRNIC_REG_TEST_DMA_LEN: v = test_dma_len_; break;
	case VRNIC_REG_TEST_DMA_STATUS: v = test_dma_status_; break;
	case VRNIC_REG_AQ_BASE_LO: v = uint32_t(aq_base_); break;
	case VRNIC_REG_AQ_BASE_HI: v = uint32_t(aq_base_ >> 32); break;
	case VRNIC_REG_ACQ_BASE_LO: v = uint32_t(acq_base_); break;
	case VRNIC_REG_ACQ_BASE_HI: v = uint32_t(acq_base_ >> 32); break;
	case VRNIC_REG_AQ_LOG_DEPTH: v = aq_log_depth_; break;
	case VRNIC_REG_AEQ_BASE_LO: v = uint32_t(aeq_base_); break;
	case VRNIC_REG_AEQ_BASE_HI: v = uint32_t(aeq_base_ >> 32); break;
	case VRNIC_REG_AEQ_LOG_DEPTH: v = aeq_log_depth_; break;
	case VRNIC_REG_CNT_DB_VIOLATIONS: v = uint32_t(cnt_.db_violations); break;
	case VRNIC_REG_CNT_ROCE_RX: v = uint32_t(cnt_.roce_rx_frames); break;
	case VRNIC_REG_CNT_RX_DROPS: v = uint32_t(cnt_.eth_rx_drops); break;
	case VRNIC_REG_CNT_EQ_OVERFLOWS: v = uint32_t(cnt_.eq_overflows); break;
	case VRNIC_REG_CNT_DMA_ERRORS: v = uint32_t(cnt_.dma_errors); break;
	default:
		break;	// reserved: reads as zero
	}
	plat_.trace(VRNIC_TRACE_REG_READ, offset, v);
	return v;
}

void Device::reg_write(uint64_t offset, uint64_t value, unsigned int size)
{
	if (size != 4 || offset % 4) {
		guest_error("unaligned or non-32-bit register write at " +
			    hex(offset));
		return;
	}
	const auto v = uint32_t(value);
	plat_.trace(VRNIC_TRACE_REG_WRITE, offset, v);

	// Queue configuration is frozen while the device is enabled.
	const bool cfg_locked = ctrl_ & VRNIC_CTRL_ENABLE;
	switch (offset) {
	case VRNIC_REG_CTRL:
		write_ctrl(v);
		return;
	case VRNIC_REG_SCRATCH:
		scratch_ = v;
		return;
	case VRNIC_REG_TEST_IRQ:
		if (v >= cfg_.num_msix) {
			guest_error("TEST_IRQ vector " + hex(v) + " out of range");
			return;
		}
		plat_.raise_irq(v);
		return;
	case VRNIC_REG_TEST_DMA_ADDR_LO:
		test_dma_addr_ = set_lo(test_dma_addr_, v);
		return;
	case VRNIC_REG_TEST_DMA_ADDR_HI:
		test_dma_addr_ = set_hi(test_dma_addr_, v);
		return;
	case VRNIC_REG_TEST_DMA_LEN:
		test_dma_len_ = v;
		return;
	case VRNIC_REG_TEST_DMA_CTRL:
		if (test_dma_status_ == VRNIC_TEST_DMA_ST_BUSY) {
			guest_error("TEST_DMA_CTRL written while busy");
			return;
		}
		test_dma_op_ = v;
		test_dma_status_ = VRNIC_TEST_DMA_ST_BUSY;
		plat_.schedule();
		return;
	case VRNIC_REG_AQ_DB: {
		if (!ready()) {
			guest_error("AQ doorbell while device not ready");
			cnt_.db_violations++;
			return;
		}
		const auto pi = uint16_t(v);
		if (uint16_t(pi - aq_ci_) > (1u << aq_log_depth_)) {
			guest_error("AQ producer index " + hex(pi) +
				    " beyond the ring");
			cnt_.db_violations++;
			return;
		}
		aq_pi_ = pi;
		admin_pending_ = true;
		plat_.schedule();
		return;
	}
	case VRNIC_REG_AEQ_DB:
		if (!eqs_[0].doorbell(plat_, cnt_,
				      uint16_t(VRNIC_FIELD_GET(VRNIC_EQ_DB_CI, v)),
				      v & VRNIC_EQ_DB_ARM)) {
			guest_error("bad AEQ doorbell " + hex(v));
			cnt_.db_violations++;
		}
		return;
	case VRNIC_REG_AQ_BASE_LO:
	case VRNIC_REG_AQ_BASE_HI:
	case VRNIC_REG_ACQ_BASE_LO:
	case VRNIC_REG_ACQ_BASE_HI:
	case VRNIC_REG_AQ_LOG_DEPTH:
	case VRNIC_REG_AEQ_BASE_LO:
	case VRNIC_REG_AEQ_BASE_HI:
	case VRNIC_REG_AEQ_LOG_DEPTH:
		if (cfg_locked) {
			guest_error("queue register " + hex(offset) +
				    " written while enabled");
			return;
		}
		break;
	default:
		guest_error("write to read-only or reserved register " +
			    hex(offset));
		return;
	}

	switch (offset) {
	case VRNIC_REG_AQ_BASE_LO: aq_base_ = set_lo(aq_base_, v); break;
	case VRNIC_REG_AQ_BASE_HI: aq_base_ = set_hi(aq_base_, v); break;
	case VRNIC_REG_ACQ_BASE_LO: acq_base_ = set_lo(acq_base_, v); break;
	case VRNIC_REG_ACQ_BASE_HI: acq_base_ = set_hi(acq_base_, v); break;
	case VRNIC_REG_AQ_LOG_DEPTH: aq_log_depth_ = v; break;
	case VRNIC_REG_AEQ_BASE_LO: aeq_base_ = set_lo(aeq_base_, v); break;
	case VRNIC_REG_AEQ_BASE_HI: aeq_base_ = set_hi(aeq_base_, v); break;
	case VRNIC_REG_AEQ_LOG_DEPTH: aeq_log_depth_ = v; break;
	default: break;
	}
}

void Device::write_ctrl(uint32_t v)
{
	if (v & VRNIC_CTRL_RESET) {
		reset();
		return;
	}
	if ((v & VRNIC_CTRL_ENABLE) && !(ctrl_ & VRNIC_CTRL_ENABLE)) {
		ctrl_ |= VRNIC_CTRL_ENABLE;
		enable();
	} else if (!(v & VRNIC_CTRL_ENABLE) && (ctrl_ & VRNIC_CTRL_ENABLE)) {
		// Disabling is a reset of all queue state.
		reset();
	}
}

void Device::enable()
{
	auto ring_ok = [](uint64_t base, uint32_t log_depth, size_t entry) {
		return base != 0 && base % VRNIC_RING_ALIGN == 0 &&
		       log_depth >= VRNIC_AQ_MIN_LOG_DEPTH &&
		       log_depth <= VRNIC_AQ_MAX_LOG_DEPTH &&
		       base + (uint64_t(entry) << log_depth) > base;
	};
	status_ &= ~VRNIC_STATUS_RESET_DONE;
	if (!ring_ok(aq_base_, aq_log_depth_, sizeof(vrnic_admin_cmd)) ||
	    !ring_ok(acq_base_, aq_log_depth_, sizeof(vrnic_admin_cqe))) {
		guest_error("admin queue configuration rejected");
		fatal(VRNIC_ERR_AQ_CONFIG);
		return;
	}
	if (!EventQueue::valid_config(aeq_base_, aeq_log_depth_)) {
		guest_error("async EQ configuration rejected");
		fatal(VRNIC_ERR_AEQ_CONFIG);
		return;
	}
	eqs_[0].configure(0, aeq_base_, aeq_log_depth_, VRNIC_AEQ_VECTOR);
	status_ |= VRNIC_STATUS_READY;
}

void Device::post_async(uint8_t type, uint32_t id, uint64_t data)
{
	if (ready())
		eqs_[0].post(plat_, cnt_, type, id, data);
}

void Device::run_test_dma()
{
	std::array<uint8_t, VRNIC_TEST_DMA_MAX> buf{};
	const uint32_t len = test_dma_len_;
	bool ok = false;

	test_dma_status_ = VRNIC_TEST_DMA_ST_ERROR;
	if (len < 1 || len > VRNIC_TEST_DMA_MAX) {
		guest_error("TEST_DMA_LEN " + hex(len) + " out of range");
		return;
	}
	switch (test_dma_op_) {
	case VRNIC_TEST_DMA_FILL:
		for (uint32_t i = 0; i < len; i++)
			buf[i] = uint8_t(i ^ 0x5a);
		ok = plat_.dma_write(test_dma_addr_, buf.data(), len);
		break;
	case VRNIC_TEST_DMA_INVERT:
		ok = plat_.dma_read(test_dma_addr_, buf.data(), len);
		if (ok) {
			for (uint32_t i = 0; i < len; i++)
				buf[i] = uint8_t(~buf[i]);
			ok = plat_.dma_write(test_dma_addr_, buf.data(), len);
		}
		break;
	default:
		guest_error("unknown TEST_DMA_CTRL op " + hex(test_dma_op_));
		return;
	}
	if (!ok) {
		cnt_.dma_errors++;
		return;
	}
	test_dma_status_ = VRNIC_TEST_DMA_ST_DONE;
}

void Device::db_write(uint64_t offset, uint64_t value, unsigned int size)
{
	const auto page = uint32_t(offset / VRNIC_DB_PAGE_SIZE);
	const auto off = uint32_t(offset % VRNIC_DB_PAGE_SIZE);
	const auto v = uint32_t(value);

	plat_.trace(VRNIC_TRACE_DB_WRITE, page, off, v);
	if (size != 4 || off % 4 || page >= VRNIC_NUM_DB_PAGES) {
		cnt_.db_violations++;
		guest_error("bad doorbell access at " + hex(offset));
		return;
	}
	if (!ready() || !uctx_used_[page]) {
		cnt_.db_violations++;
		return;
	}
	if (off == VRNIC_DB_SQ || off == VRNIC_DB_RQ || off == VRNIC_DB_CQ_ARM) {
		// The named QP or CQ must belong to the page's context.
		if (!rdma_.doorbell(page, off, v))
			cnt_.db_violations++;
		return;
	}
	if (page != 0) {
		// User pages: only the user doorbells exist.  Anything else is
		// a process poking at what it does not own; count and ignore.
		if (off != VRNIC_DB_USER_PING)
			cnt_.db_violations++;
		return;
	}
	switch (off) {
	case VRNIC_DB_EQ: {
		const uint32_t eqn = VRNIC_FIELD_GET(VRNIC_EQ_DB_EQN, v);
		if (eqn == 0 || eqn >= eqs_.size() ||
		    !eqs_[eqn].doorbell(plat_, cnt_,
					uint16_t(VRNIC_FIELD_GET(VRNIC_EQ_DB_CI, v)),
					v & VRNIC_EQ_DB_ARM)) {
			cnt_.db_violations++;
			guest_error("bad EQ doorbell " + hex(v));
		}
		break;
	}
	case VRNIC_DB_ETH_TX:
		eth_doorbell(tx_.data(), v);
		tx_pending_ = true;
		plat_.schedule();
		break;
	case VRNIC_DB_ETH_RX:
		eth_doorbell(rx_.data(), v);
		plat_.rx_ready();
		break;
	case VRNIC_DB_ETH_TX_ARM:
		eth_arm(tx_.data(), false, v);
		break;
	case VRNIC_DB_ETH_RX_ARM:
		eth_arm(rx_.data(), true, v);
		break;
	case VRNIC_DB_USER_PING:
		break;
	default:
		cnt_.db_violations++;
		guest_error("write to reserved doorbell " + hex(off));
		break;
	}
}

void Device::poll()
{
	if (timer_pending_) {
		timer_pending_ = false;
		timer();
	}
	if (!ready()) {
		// Reset or fatal: anything still marked pending is dropped.
		admin_pending_ = tx_pending_ = false;
		if (test_dma_status_ == VRNIC_TEST_DMA_ST_BUSY)
			run_test_dma();
		return;
	}
	if (test_dma_status_ == VRNIC_TEST_DMA_ST_BUSY)
		run_test_dma();
	if (admin_pending_)
		process_admin();
	if (tx_pending_) {
		unsigned int budget = kTxBudget;
		tx_pending_ = false;
		for (unsigned int q = 0; q < tx_.size(); q++)
			if (tx_[q].enabled)
				process_tx(tx_[q], q, budget);
		if (budget == 0)
			tx_pending_ = true;
	}
	// The transport runs when a round of its frames fits the outbox.
	// While the network is full and frames wait for it, the transport
	// makes no more: a deeper local queue would only add delay (and
	// retry timeouts behind it), not throughput.
	const bool full = out_.frames.room() < kRdmaRoom ||
			  (tx_blocked_ && !out_.frames.empty());
	const bool rdma_more = full || rdma_.poll();
	// Bounded work: come back later.  With the network full and the
	// outbox waiting, only tx_resume() can make room: it schedules then.
	if (admin_pending_ ||
	    ((tx_pending_ || rdma_more) && !(tx_blocked_ && full)))
		plat_.schedule();
}

void Device::timer()
{
	if (!ready())
		return;
	// A pause of the priority the TX ring's head frame is on may have
	// ended: process_tx() looks again (and holds again if not).
	if (tx_held_ && !pfc_.paused(tx_held_prio_, plat_.now_ns()))
		release_tx();
	rdma_.timer();
}

void Device::release_tx()
{
	tx_held_ = false;
	tx_pending_ = true;
	plat_.schedule();
}

void Device::set_link(bool up)
{
	if (up == link_up_)
		return;
	link_up_ = up;
	plat_.trace(VRNIC_TRACE_LINK, up);
	post_async(up ? VRNIC_EQE_PORT_UP : VRNIC_EQE_PORT_DOWN, 1);
}

} // namespace vrnic

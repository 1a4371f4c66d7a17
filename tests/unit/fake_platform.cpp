// SPDX-License-Identifier: GPL-2.0-or-later
#include "fake_platform.hpp"
#include "engine_internal.hpp"

#include <new>
#include <stdexcept>

namespace {

FakePlatform *self(void *opaque) { return static_cast<FakePlatform *>(opaque); }

bool in_window(const FakePlatform *p, uint64_t addr, size_t len)
{
	const uint64_t size = p->mem.size();
	return !p->fail_dma && addr >= FakePlatform::kMemBase && len <= size &&
	       addr - FakePlatform::kMemBase <= size - len;
}

const vrnic_platform_ops kOps = {
	.dma_read = [](void *o, uint64_t addr, void *buf, size_t len) -> int {
		auto *p = self(o);
		if (p->throw_on_dma_read)
			throw std::bad_alloc();
		if (!in_window(p, addr, len) ||
		    (p->fail_read_len && addr < p->fail_read_at + p->fail_read_len &&
		     p->fail_read_at < addr + len))
			return -1;
		std::memcpy(buf, p->ptr(addr), len);
		return 0;
	},
	.dma_write = [](void *o, uint64_t addr, const void *buf, size_t len) -> int {
		auto *p = self(o);
		if (!in_window(p, addr, len))
			return -1;
		std::memcpy(p->ptr(addr), buf, len);
		return 0;
	},
	.send_frame = [](void *o, const void *f, size_t len) -> int {
		auto *b = static_cast<const uint8_t *>(f);
		self(o)->frames.emplace_back(b, b + len);
		if (self(o)->on_send)
			self(o)->on_send(b, len);
		return self(o)->net_full ? 1 : 0;
	},
	.raise_irq = [](void *o, unsigned int v) {
		self(o)->irqs.push_back(v);
		if (self(o)->on_irq)
			self(o)->on_irq(v);
	},
	.schedule = [](void *o) { self(o)->schedules++; },
	.rx_ready = [](void *o) { self(o)->rx_ready_calls++; },
	.now_ns = [](void *o) -> uint64_t { return self(o)->now; },
	.timer_arm = [](void *o, uint64_t d) { self(o)->deadline = d; },
	.guest_error = [](void *o, const char *m) { self(o)->guest_errors.emplace_back(m); },
	.trace = [](void *, vrnic_trace_id, uint64_t, uint64_t, uint64_t) {},
};

} // namespace

FakePlatform::FakePlatform(uint8_t mac_last, uint64_t mem_size,
			   uint64_t host_mem_budget, uint32_t qpc_cache,
			   uint32_t qpc_miss_ns)
	: mem(mem_size)
{
	const vrnic_engine_config cfg = {
		.mac = {0x52, 0x54, 0x00, 0x12, 0x34, mac_last},
		.num_msix = VRNIC_NUM_MSIX,
		.link_up = true,
		.host_mem_budget = host_mem_budget,
		.speed_mbps = 0,
		.qpc_cache = qpc_cache,
		.qpc_miss_ns = qpc_miss_ns,
	};
	eng = vrnic_engine_new(&cfg, &kOps, this);
	if (!eng)
		throw std::runtime_error("vrnic_engine_new failed");
}

FakePlatform::~FakePlatform()
{
	// Every test checks the engine's use counts stayed balanced.
	EXPECT_EQ(eng->dev.rdma().sched_counters().ref_mismatch, 0u)
		<< "a PD, XRC domain or user context let go of a user it did not count";
	vrnic_engine_free(eng);
}

void FakePlatform::run()
{
	for (int i = 0; i < 1000; i++) {
		const unsigned before = schedules;
		vrnic_engine_poll(eng);
		if (schedules == before)
			return;
	}
	throw std::runtime_error("engine never went idle");
}

void FakePlatform::enable()
{
	wr(VRNIC_REG_AQ_BASE_LO, uint32_t(kAq));
	wr(VRNIC_REG_AQ_BASE_HI, 0);
	wr(VRNIC_REG_ACQ_BASE_LO, uint32_t(kAcq));
	wr(VRNIC_REG_ACQ_BASE_HI, 0);
	wr(VRNIC_REG_AQ_LOG_DEPTH, kAqLog);
	wr(VRNIC_REG_AEQ_BASE_LO, uint32_t(kAeq));
	wr(VRNIC_REG_AEQ_BASE_HI, 0);
	wr(VRNIC_REG_AEQ_LOG_DEPTH, kAeqLog);
	wr(VRNIC_REG_CTRL, VRNIC_CTRL_ENABLE);
	wr(VRNIC_REG_AEQ_DB, VRNIC_EQ_DB_ARM);
}

vrnic_admin_cqe FakePlatform::admin(vrnic_admin_cmd cmd)
{
	const uint16_t idx = aq_pi;
	const uint32_t mask = (1u << kAqLog) - 1;
	cmd.token = idx;
	store(kAq + (idx & mask) * sizeof(cmd), cmd);
	aq_pi++;
	wr(VRNIC_REG_AQ_DB, aq_pi);
	run();
	return load<vrnic_admin_cqe>(kAcq + (idx & mask) * sizeof(vrnic_admin_cqe));
}

std::vector<vrnic_eqe> FakePlatform::drain_aeq()
{
	std::vector<vrnic_eqe> out;
	const uint32_t depth = 1u << kAeqLog;

	for (;;) {
		const auto e = load<vrnic_eqe>(kAeq + (aeq_ci & (depth - 1)) *
						   sizeof(vrnic_eqe));
		const uint8_t phase = ((aeq_ci >> kAeqLog) & 1) ? 0 : VRNIC_EQE_PHASE;
		if ((e.flags & VRNIC_EQE_PHASE) != phase)
			break;
		out.push_back(e);
		aeq_ci++;
	}
	wr(VRNIC_REG_AEQ_DB, aeq_ci | VRNIC_EQ_DB_ARM);
	return out;
}

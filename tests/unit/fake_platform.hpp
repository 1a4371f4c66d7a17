// SPDX-License-Identifier: GPL-2.0-or-later
// A fake platform for engine unit tests: a window of guest memory, a wire
// that records frames, and counters for interrupts and scheduling.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "vrnic_engine.h"
#include "vrnic_hw.h"

struct FakePlatform {
	static constexpr uint64_t kMemBase = 0x100000;
	static constexpr uint64_t kMemSize = 4 << 20;	// default window

	// host_mem_budget: the engine's, 0 for its default; qpc_cache and
	// qpc_miss_ns: the QP-context cache model's (0: unlimited, default).
	explicit FakePlatform(uint8_t mac_last = 0x56, uint64_t mem_size = kMemSize,
			      uint64_t host_mem_budget = 0, uint32_t qpc_cache = 0,
			      uint32_t qpc_miss_ns = 0);
	~FakePlatform();
	FakePlatform(const FakePlatform &) = delete;
	FakePlatform &operator=(const FakePlatform &) = delete;

	// Guest memory helpers
	template <typename T> T load(uint64_t addr) const
	{
		T v;
		std::memcpy(&v, &mem.at(addr - kMemBase), sizeof(T));
		return v;
	}
	template <typename T> void store(uint64_t addr, const T &v)
	{
		std::memcpy(&mem.at(addr - kMemBase), &v, sizeof(T));
	}
	uint8_t *ptr(uint64_t addr) { return &mem[addr - kMemBase]; }

	// Device access
	uint32_t rd(uint64_t off) { return uint32_t(vrnic_engine_reg_read(eng, off, 4)); }
	void wr(uint64_t off, uint32_t v) { vrnic_engine_reg_write(eng, off, v, 4); }
	void db(uint32_t page, uint32_t off, uint32_t v)
	{
		vrnic_engine_db_write(eng, uint64_t(page) * VRNIC_DB_PAGE_SIZE + off, v, 4);
	}
	// Run deferred work until the engine stops asking for more.
	void run();

	// Bring the device to READY with the admin queue and async EQ at
	// fixed addresses, AEQ armed.
	void enable();
	// Submit one admin command and run it; returns the completion.
	vrnic_admin_cqe admin(vrnic_admin_cmd cmd);
	// A QUERY_* command's whole result (read at out), which must succeed
	// and report its size as T's.
	template <typename T> T query(uint8_t opcode, uint64_t out = kMemBase + 0xe000)
	{
		vrnic_admin_cmd c{};
		c.opcode = opcode;
		c.query.out_addr = out;
		c.query.out_len = sizeof(T);
		const vrnic_admin_cqe cqe = admin(c);
		EXPECT_EQ(cqe.status, VRNIC_ADMIN_ST_OK);
		EXPECT_EQ(cqe.result, uint32_t(sizeof(T)));
		return load<T>(out);
	}
	// Consume the async EQ as a driver does: every new entry, then the
	// doorbell (consumer index, re-armed).
	std::vector<vrnic_eqe> drain_aeq();

	static constexpr uint64_t kAq = kMemBase;
	static constexpr uint64_t kAcq = kMemBase + 0x1000;
	static constexpr uint64_t kAeq = kMemBase + 0x2000;
	static constexpr unsigned kAqLog = 3;
	static constexpr unsigned kAeqLog = 4;
	uint16_t aq_pi = 0;
	uint16_t aeq_ci = 0;

	std::vector<uint8_t> mem;
	std::vector<std::vector<uint8_t>> frames;
	// send_frame() answers "the network is full" while set.
	bool net_full = false;
	std::vector<unsigned> irqs;
	std::vector<std::string> guest_errors;
	unsigned schedules = 0;
	unsigned rx_ready_calls = 0;
	uint64_t now = 0;
	uint64_t deadline = 0;
	bool fail_dma = false;
	// dma_read fails for any range that overlaps [fail_read_at, +len).
	uint64_t fail_read_at = 0;
	size_t fail_read_len = 0;
	// Tests of the engine's entry rules: called from inside the platform
	// callbacks, where a real platform may call back into the engine.
	std::function<void(const uint8_t *, size_t)> on_send;
	std::function<void(unsigned)> on_irq;
	bool throw_on_dma_read = false;	// dma_read throws std::bad_alloc
	vrnic_engine *eng = nullptr;
};

/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * vrnic device engine: the narrow C interface between a platform (the
 * vfio-user server device/vrnic_device.cpp; the unit tests' and fuzz
 * targets' harnesses) and the C++20 engine that implements the device
 * behind it (registers, admin queue, event queues, Ethernet rings and, from
 * spec 0.2 on, the RoCEv2 transport).
 *
 * The engine never calls its platform directly.  Everything it needs from
 * the outside world goes through struct vrnic_platform_ops, so the same
 * engine runs in vrnic-device and alone on the host for GoogleTest and
 * libFuzzer.
 *
 * Threading: every entry point must be called from one thread at a time
 * (vrnic-device: its one event loop).  The engine never blocks and bounds the work
 * it does per call.
 */
#ifndef VRNIC_ENGINE_H
#define VRNIC_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Trace points the engine reports; the platform decides what to show
 * (vrnic-device logs resets and FATAL). */
enum vrnic_trace_id {
	VRNIC_TRACE_REG_READ,		/* a = offset, b = value */
	VRNIC_TRACE_REG_WRITE,		/* a = offset, b = value */
	VRNIC_TRACE_DB_WRITE,		/* a = page, b = offset, c = value */
	VRNIC_TRACE_ADMIN_CMD,		/* a = opcode, b = token, c = index */
	VRNIC_TRACE_ADMIN_DONE,		/* a = opcode, b = token, c = status */
	VRNIC_TRACE_EQ_POST,		/* a = eqn, b = type, c = id */
	VRNIC_TRACE_EQ_OVERFLOW,	/* a = eqn, b = type */
	VRNIC_TRACE_IRQ,		/* a = vector */
	VRNIC_TRACE_ETH_TX,		/* a = qid, b = length */
	VRNIC_TRACE_ETH_RX,		/* a = qid, b = length */
	VRNIC_TRACE_ETH_RX_DROP,	/* a = reason, b = length */
	VRNIC_TRACE_ROCE_RX,		/* a = length */
	VRNIC_TRACE_RESET,
	VRNIC_TRACE_LINK,		/* a = up */
	VRNIC_TRACE_FATAL,		/* a = VRNIC_ERR_* */
	VRNIC_TRACE_MAC_CONTROL,	/* a = PortPause::Rx, b = length */
	VRNIC_TRACE_NUM
};

struct vrnic_platform_ops {
	/* DMA between guest memory and the device.  Return 0 on success,
	 * non-zero when the transfer failed or was refused. */
	int (*dma_read)(void *opaque, uint64_t addr, void *buf, size_t len);
	int (*dma_write)(void *opaque, uint64_t addr, const void *buf,
			 size_t len);
	/* Put one Ethernet frame on the wire.  Return 0 when the network
	 * took it (or dropped it: link down), non-zero when it took it but
	 * is full: the engine then hands over no frame until
	 * vrnic_engine_tx_resume(), and its own transmit back-pressure
	 * (a bounded outbox) holds the rest. */
	int (*send_frame)(void *opaque, const void *frame, size_t len);
	/* Signal MSI-X vector. */
	void (*raise_irq)(void *opaque, unsigned int vector);
	/* Ask for vrnic_engine_poll() to run soon, off the caller's path. */
	void (*schedule)(void *opaque);
	/* Receive buffers were posted: deliver frames held back earlier. */
	void (*rx_ready)(void *opaque);
	/* Clock and one timer; vrnic_engine_timer() runs at the deadline. */
	uint64_t (*now_ns)(void *opaque);
	void (*timer_arm)(void *opaque, uint64_t deadline_ns);
	/* Diagnostics. */
	void (*guest_error)(void *opaque, const char *msg);
	void (*trace)(void *opaque, enum vrnic_trace_id id, uint64_t a,
		      uint64_t b, uint64_t c);
};

/* host_mem_budget: its default and bounds (vrnic-device's
 * --host-mem-budget refuses values outside them). */
#define VRNIC_HOST_MEM_BUDGET_DEFAULT	(256ULL << 20)
#define VRNIC_HOST_MEM_BUDGET_MIN	(16ULL << 20)
#define VRNIC_HOST_MEM_BUDGET_MAX	(1ULL << 40)

/* speed_mbps: the port speed QUERY_PORT reports and PFC pause quanta are
 * timed by (a quantum is 512 bit times); 0 = the default. */
#define VRNIC_SPEED_MBPS_DEFAULT	100000u
#define VRNIC_SPEED_MBPS_MAX		400000u

/* qpc_miss_ns: its default, a PCIe read round trip, and its bound. */
#define VRNIC_QPC_MISS_NS_DEFAULT	800u
#define VRNIC_QPC_MISS_NS_MAX		1000000u

struct vrnic_engine_config {
	uint8_t mac[6];
	uint32_t num_msix;		/* vectors the platform provides */
	bool link_up;
	/* Host memory the guest may make the device hold (page lists,
	 * copied WQEs, ...), in bytes; 0 = VRNIC_HOST_MEM_BUDGET_DEFAULT.
	 * Clamped to [VRNIC_HOST_MEM_BUDGET_MIN, VRNIC_HOST_MEM_BUDGET_MAX]. */
	uint64_t host_mem_budget;
	uint32_t speed_mbps;		/* 0 = VRNIC_SPEED_MBPS_DEFAULT */
	/* The QP-context cache model (spec "QP-context cache"): contexts
	 * cached (0 = unlimited) and what a miss costs in ns (0 =
	 * VRNIC_QPC_MISS_NS_DEFAULT; at most VRNIC_QPC_MISS_NS_MAX). */
	uint32_t qpc_cache;
	uint32_t qpc_miss_ns;
};

struct vrnic_engine;

struct vrnic_engine *vrnic_engine_new(const struct vrnic_engine_config *cfg,
				      const struct vrnic_platform_ops *ops,
				      void *opaque);
void vrnic_engine_free(struct vrnic_engine *e);

/* Full device reset: forget all guest state, stop all DMA. */
void vrnic_engine_reset(struct vrnic_engine *e);

/* BAR0 (registers) and BAR2 (doorbell pages); size is the access width. */
uint64_t vrnic_engine_reg_read(struct vrnic_engine *e, uint64_t offset,
			       unsigned int size);
void vrnic_engine_reg_write(struct vrnic_engine *e, uint64_t offset,
			    uint64_t value, unsigned int size);
void vrnic_engine_db_write(struct vrnic_engine *e, uint64_t offset,
			   uint64_t value, unsigned int size);

/* Deferred work: admin commands, TX rings, test DMA. */
void vrnic_engine_poll(struct vrnic_engine *e);
void vrnic_engine_timer(struct vrnic_engine *e);

/* Wire side. */
bool vrnic_engine_can_receive(struct vrnic_engine *e);
/* Returns the number of bytes consumed: len when the frame was delivered
 * or dropped, 0 when it should be queued until rx_ready(). */
size_t vrnic_engine_receive(struct vrnic_engine *e, const uint8_t *frame,
			    size_t len);
void vrnic_engine_set_link(struct vrnic_engine *e, bool up);
/*
 * The QP-context cache model, changed at run time (vrnic-device's control
 * socket): entries (0 = unlimited, at most VRNIC_MAX_QP) and miss_ns (0 =
 * the default).  The cache starts empty; a driver learns of it at its next
 * probe.  False if refused (called from inside the engine).
 */
bool vrnic_engine_set_qpc(struct vrnic_engine *e, uint32_t entries,
			  uint32_t miss_ns);
/* The network has room again after send_frame() returned non-zero. */
void vrnic_engine_tx_resume(struct vrnic_engine *e);

/*
 * Test only (vrnic-device's x-fault-internal): an engine-internal failure, as
 * an engine bug would raise it: a C++ exception thrown inside an entry
 * point.  The entry point catches it like any other, so the device goes
 * FATAL (VRNIC_ERR_INTERNAL), posts the FATAL event and waits for a reset.
 */
void vrnic_engine_inject_internal_error(struct vrnic_engine *e);

#ifdef __cplusplus
}
#endif

#endif /* VRNIC_ENGINE_H */

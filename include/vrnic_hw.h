/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * vrnic hardware interface, spec version 0.1.
 *
 * This header is the single definition of the device's programming model:
 * PCI identity, BAR map, BAR0 registers, doorbells, admin queue commands and
 * completions, event queue entries and Ethernet ring descriptors.  It is
 * included unchanged by the QEMU device model (C and C++20), the Linux
 * driver and the rdma-core provider.  Documentation/vrnic-spec.rst is the
 * prose form of the same contract; change both together.
 *
 * All multi-byte fields are little-endian.  Bit fields are described with
 * plain SHIFT/MASK constants so that every consumer can use them.
 */
#ifndef VRNIC_HW_H
#define VRNIC_HW_H

#include <linux/types.h>

#if defined(__cplusplus)
#define VRNIC_HW_ASSERT(expr, msg) static_assert(expr, msg)
#elif defined(__KERNEL__)
#include <linux/build_bug.h>
#define VRNIC_HW_ASSERT(expr, msg) static_assert(expr, msg)
#else
#define VRNIC_HW_ASSERT(expr, msg) _Static_assert(expr, msg)
#endif

/* ---------------------------------------------------------------- PCI --- */

#define VRNIC_PCI_VENDOR_ID		0x1234	/* QEMU's test/emulation vendor */
#define VRNIC_PCI_DEVICE_ID		0x5652	/* "VR" */
#define VRNIC_PCI_REVISION		0x01
#define VRNIC_PCI_CLASS			0x0200	/* Ethernet controller */

#define VRNIC_SPEC_VERSION_MAJOR	0
#define VRNIC_SPEC_VERSION_MINOR	1
#define VRNIC_SPEC_VERSION \
	((VRNIC_SPEC_VERSION_MAJOR << 16) | VRNIC_SPEC_VERSION_MINOR)

/* BAR map */
#define VRNIC_REG_BAR			0	/* 64-bit MMIO, registers */
#define VRNIC_REG_BAR_SIZE		0x4000
#define VRNIC_DB_BAR			2	/* 64-bit MMIO, doorbell pages */
#define VRNIC_DB_PAGE_SIZE		0x1000
#define VRNIC_NUM_DB_PAGES		256	/* page 0 is the kernel's */
#define VRNIC_DB_BAR_SIZE		(VRNIC_DB_PAGE_SIZE * VRNIC_NUM_DB_PAGES)
#define VRNIC_MSIX_BAR			4	/* MSI-X table and PBA */

/* MSI-X: vector 0 serves the async event queue, vectors 1..N completion EQs. */
#define VRNIC_NUM_MSIX			9
#define VRNIC_AEQ_VECTOR		0
#define VRNIC_MAX_EQS			VRNIC_NUM_MSIX	/* EQ n uses vector n */

/* -------------------------------------------------- BAR0 registers --- */
/* All registers are 32 bits wide and must be accessed with 32-bit loads
 * and stores.  Reads of reserved offsets return 0; writes are ignored and
 * logged as guest errors.
 */
#define VRNIC_REG_VERSION		0x000	/* RO: spec version */
#define VRNIC_REG_CAPS			0x004	/* RO: VRNIC_CAP_* */
#define VRNIC_REG_STATUS		0x008	/* RO: VRNIC_STATUS_* */
#define VRNIC_REG_CTRL			0x00c	/* RW: VRNIC_CTRL_* */
#define VRNIC_REG_ERROR			0x010	/* RO: VRNIC_ERR_* of last fatal error */
#define VRNIC_REG_NUM_MSIX		0x014	/* RO */
#define VRNIC_REG_NUM_DB_PAGES		0x018	/* RO */
#define VRNIC_REG_MAX_MTU		0x01c	/* RO: largest L3 MTU */
#define VRNIC_REG_MAC_LO		0x020	/* RO: MAC bytes 0..3 */
#define VRNIC_REG_MAC_HI		0x024	/* RO: MAC bytes 4..5 in bits 15:0 */
#define VRNIC_REG_LINK			0x028	/* RO: VRNIC_LINK_* */

/* Test registers, exercised by the driver at probe. */
#define VRNIC_REG_SCRATCH		0x040	/* RW: holds any value */
#define VRNIC_REG_TEST_IRQ		0x044	/* WO: raise MSI-X vector <value> */
#define VRNIC_REG_TEST_DMA_ADDR_LO	0x048	/* RW */
#define VRNIC_REG_TEST_DMA_ADDR_HI	0x04c	/* RW */
#define VRNIC_REG_TEST_DMA_LEN		0x050	/* RW: 1..VRNIC_TEST_DMA_MAX */
#define VRNIC_REG_TEST_DMA_CTRL		0x054	/* WO: VRNIC_TEST_DMA_* starts */
#define VRNIC_REG_TEST_DMA_STATUS	0x058	/* RO: VRNIC_TEST_DMA_ST_* */

/* Admin queue (submission and completion rings share one depth). */
#define VRNIC_REG_AQ_BASE_LO		0x080	/* RW while AQ disabled */
#define VRNIC_REG_AQ_BASE_HI		0x084
#define VRNIC_REG_ACQ_BASE_LO		0x088
#define VRNIC_REG_ACQ_BASE_HI		0x08c
#define VRNIC_REG_AQ_LOG_DEPTH		0x090	/* log2 entries */
#define VRNIC_REG_AQ_DB			0x094	/* WO: producer index (u16) */

/* Async event queue (EQ 0). */
#define VRNIC_REG_AEQ_BASE_LO		0x0a0	/* RW while device disabled */
#define VRNIC_REG_AEQ_BASE_HI		0x0a4
#define VRNIC_REG_AEQ_LOG_DEPTH		0x0a8
#define VRNIC_REG_AEQ_DB		0x0ac	/* WO: VRNIC_EQ_DB_* value */

/* Device counters, 32-bit, wrap around, cleared by reset. */
#define VRNIC_REG_CNT_DB_VIOLATIONS	0x100	/* doorbells refused */
#define VRNIC_REG_CNT_ROCE_RX		0x104	/* UDP/4791 frames to engine */
#define VRNIC_REG_CNT_RX_DROPS		0x108	/* frames dropped on receive */
#define VRNIC_REG_CNT_EQ_OVERFLOWS	0x10c	/* events lost to full EQs */
#define VRNIC_REG_CNT_DMA_ERRORS	0x110	/* DMA transfers that failed */

#define VRNIC_CAP_ETH			(1u << 0)
#define VRNIC_CAP_ROCE_V2		(1u << 1)
#define VRNIC_CAP_TEST_REGS		(1u << 2)

#define VRNIC_STATUS_READY		(1u << 0)	/* CTRL.ENABLE accepted */
#define VRNIC_STATUS_FATAL		(1u << 1)	/* see REG_ERROR */
#define VRNIC_STATUS_RESET_DONE		(1u << 2)

#define VRNIC_CTRL_ENABLE		(1u << 0)
#define VRNIC_CTRL_RESET		(1u << 1)	/* self-clearing */

#define VRNIC_LINK_UP			(1u << 0)

/* REG_ERROR codes (fatal, device must be reset). */
#define VRNIC_ERR_NONE			0
#define VRNIC_ERR_AQ_CONFIG		1	/* bad admin queue base or depth */
#define VRNIC_ERR_AEQ_CONFIG		2	/* bad async EQ base or depth */
#define VRNIC_ERR_AQ_DOORBELL		3	/* AQ producer index out of range */
#define VRNIC_ERR_DMA			4	/* DMA on a device-owned ring failed */

/* Test DMA: the device transforms TEST_DMA_LEN bytes at TEST_DMA_ADDR. */
#define VRNIC_TEST_DMA_MAX		4096
#define VRNIC_TEST_DMA_FILL		1	/* write bytes i ^ 0x5a, i = 0.. */
#define VRNIC_TEST_DMA_INVERT		2	/* read, invert every bit, write */
#define VRNIC_TEST_DMA_ST_IDLE		0
#define VRNIC_TEST_DMA_ST_BUSY		1
#define VRNIC_TEST_DMA_ST_DONE		2
#define VRNIC_TEST_DMA_ST_ERROR		3

#define VRNIC_AQ_MIN_LOG_DEPTH		2
#define VRNIC_AQ_MAX_LOG_DEPTH		12
#define VRNIC_EQ_MIN_LOG_DEPTH		4
#define VRNIC_EQ_MAX_LOG_DEPTH		15
#define VRNIC_RING_ALIGN		4096	/* every ring base */

/* ------------------------------------------------------- doorbells --- */
/*
 * BAR2 holds VRNIC_NUM_DB_PAGES pages.  Page 0 belongs to the kernel driver;
 * pages 1.. are handed to user contexts by VRNIC_ADMIN_CREATE_UCTX and the
 * device only honours a doorbell for an object owned by the page's context.
 * Doorbells are 32-bit writes; reads return 0.
 */
#define VRNIC_DB_EQ			0x000	/* page 0 only: VRNIC_EQ_DB_* */
#define VRNIC_DB_ETH_TX			0x010	/* page 0 only: ETH_DB_* value */
#define VRNIC_DB_ETH_RX			0x014	/* page 0 only: ETH_DB_* value */
#define VRNIC_DB_ETH_TX_ARM		0x018	/* page 0 only: arm TX event */
#define VRNIC_DB_ETH_RX_ARM		0x01c	/* page 0 only: arm RX event */
#define VRNIC_DB_USER_PING		0x800	/* any page: counts a doorbell */

/* EQ doorbell: consumer index, EQ number and an arm flag in one write. */
#define VRNIC_EQ_DB_CI_MASK		0xffffu
#define VRNIC_EQ_DB_EQN_SHIFT		16
#define VRNIC_EQ_DB_EQN_MASK		0xffu
#define VRNIC_EQ_DB_ARM			(1u << 31)

/* Ethernet doorbell: new producer index (u16, free running) of ring qid. */
#define VRNIC_ETH_DB_PI_MASK		0xffffu
#define VRNIC_ETH_DB_QID_SHIFT		16
#define VRNIC_ETH_DB_QID_MASK		0xffu

/* -------------------------------------------------- admin commands --- */

enum vrnic_admin_opcode {
	VRNIC_ADMIN_NOP			= 0x00,
	VRNIC_ADMIN_QUERY_DEVICE	= 0x01,
	VRNIC_ADMIN_QUERY_PORT		= 0x02,
	VRNIC_ADMIN_SET_PORT		= 0x03,
	VRNIC_ADMIN_CREATE_EQ		= 0x04,
	VRNIC_ADMIN_DESTROY_EQ		= 0x05,
	VRNIC_ADMIN_CREATE_ETH_RING	= 0x06,
	VRNIC_ADMIN_DESTROY_ETH_RING	= 0x07,
	VRNIC_ADMIN_CREATE_UCTX		= 0x08,
	VRNIC_ADMIN_DESTROY_UCTX	= 0x09,
	VRNIC_ADMIN_QUERY_STATS		= 0x0a,
	VRNIC_ADMIN_NUM_OPCODES
};

enum vrnic_admin_status {
	VRNIC_ADMIN_ST_OK		= 0x00,
	VRNIC_ADMIN_ST_BAD_OPCODE	= 0x01,
	VRNIC_ADMIN_ST_BAD_PARAM	= 0x02,
	VRNIC_ADMIN_ST_NO_RESOURCE	= 0x03,
	VRNIC_ADMIN_ST_BUSY		= 0x04,	/* object in use */
	VRNIC_ADMIN_ST_NOT_FOUND	= 0x05,
	VRNIC_ADMIN_ST_DMA_ERROR	= 0x06,
};

struct vrnic_admin_query {		/* QUERY_DEVICE, QUERY_PORT, QUERY_STATS */
	__le64 out_addr;		/* DMA target for the result */
	__le32 out_len;			/* bytes available there */
	__le32 rsvd;
};

struct vrnic_admin_set_port {
	__le32 mtu;			/* L3 MTU, 68..REG_MAX_MTU */
	__le32 rsvd;
};

struct vrnic_admin_create_eq {
	__le64 base;			/* VRNIC_RING_ALIGN aligned */
	__u8 log_depth;			/* EQ_MIN..EQ_MAX_LOG_DEPTH */
	__u8 eqn;			/* 1..VRNIC_MAX_EQS-1 */
	__le16 vector;			/* MSI-X vector, < REG_NUM_MSIX */
	__le32 rsvd;
};

struct vrnic_admin_destroy {		/* DESTROY_EQ, _ETH_RING, _UCTX */
	__le32 id;
	__le32 rsvd;
};

enum vrnic_eth_ring_type {
	VRNIC_ETH_RING_TX		= 0,
	VRNIC_ETH_RING_RX		= 1,
};

struct vrnic_admin_create_eth_ring {
	__le64 base;			/* VRNIC_RING_ALIGN aligned */
	__u8 type;			/* enum vrnic_eth_ring_type */
	__u8 log_depth;			/* ETH_MIN..ETH_MAX_LOG_DEPTH */
	__u8 qid;			/* < VRNIC_MAX_ETH_QUEUES */
	__u8 eqn;			/* EQ that receives ring events */
	__le32 rsvd;
};

/* 64-byte admin submission entry. */
struct vrnic_admin_cmd {
	__u8 opcode;			/* enum vrnic_admin_opcode */
	__u8 flags;			/* must be 0 */
	__le16 token;			/* echoed in the completion */
	__le32 rsvd;
	union {
		struct vrnic_admin_query query;
		struct vrnic_admin_set_port set_port;
		struct vrnic_admin_create_eq create_eq;
		struct vrnic_admin_destroy destroy;
		struct vrnic_admin_create_eth_ring create_eth_ring;
		__u8 raw[56];
	};
};

/* 16-byte admin completion entry. */
#define VRNIC_ACQE_PHASE		(1u << 0)
struct vrnic_admin_cqe {
	__le16 token;
	__u8 status;			/* enum vrnic_admin_status */
	__u8 flags;			/* bit 0: phase */
	__le32 result;			/* opcode specific (object id) */
	__le16 sq_head;			/* AQ entries consumed so far */
	__le16 rsvd0;
	__le32 rsvd1;
};

/* Result of QUERY_DEVICE. */
struct vrnic_device_attr {
	__le32 spec_version;
	__le32 caps;
	__le64 fw_version;
	__le64 sys_image_guid;
	__le64 max_mr_size;
	__le32 max_qp;
	__le32 max_qp_wr;
	__le32 max_cq;
	__le32 max_cqe;
	__le32 max_mr;
	__le32 max_pd;
	__le32 max_sge;
	__le32 max_qp_rd_atom;
	__le32 max_uctx;
	__le32 max_eqs;
	__le32 max_eth_queues;
	__le32 max_mtu;
	__u8 mac[6];
	__u8 rsvd[10];
};

/* Result of QUERY_PORT. */
struct vrnic_port_attr {
	__le32 link;			/* VRNIC_LINK_* */
	__le32 mtu;			/* current L3 MTU */
	__le32 max_mtu;
	__le32 speed_mbps;
};

/* Result of QUERY_STATS: 64-bit device counters. */
struct vrnic_stats {
	__le64 eth_tx_frames;
	__le64 eth_tx_bytes;
	__le64 eth_rx_frames;
	__le64 eth_rx_bytes;
	__le64 eth_rx_drops;
	__le64 roce_rx_frames;
	__le64 db_violations;
	__le64 eq_overflows;
	__le64 dma_errors;
	__le64 admin_cmds;
};

/* ----------------------------------------------------- event queues --- */

enum vrnic_eqe_type {
	VRNIC_EQE_ADMIN_DONE		= 0x01,	/* admin completion written */
	VRNIC_EQE_PORT_UP		= 0x02,
	VRNIC_EQE_PORT_DOWN		= 0x03,
	VRNIC_EQE_ETH_TX		= 0x10,	/* TX ring <qid> progressed */
	VRNIC_EQE_ETH_RX		= 0x11,	/* RX ring <qid> progressed */
	VRNIC_EQE_FATAL			= 0x20,	/* device error, see REG_ERROR */
};

#define VRNIC_EQE_PHASE			(1u << 0)
/* 16-byte event queue entry. The phase bit flips each time the EQ wraps. */
struct vrnic_eqe {
	__u8 type;			/* enum vrnic_eqe_type */
	__u8 flags;			/* bit 0: phase */
	__le16 rsvd;
	__le32 id;			/* queue or object the event is about */
	__le64 data;
};

/* ------------------------------------------------- Ethernet rings --- */

#define VRNIC_MAX_ETH_QUEUES		1
#define VRNIC_ETH_MIN_LOG_DEPTH		4
#define VRNIC_ETH_MAX_LOG_DEPTH		12
#define VRNIC_ETH_MIN_MTU		68
#define VRNIC_ETH_MAX_MTU		9000
#define VRNIC_ETH_MAX_FRAME		9216	/* MTU + L2 header + VLAN */
#define VRNIC_ETH_TX_MAX_DESCS		16	/* descriptors in one frame */

#define VRNIC_ETH_DESC_EOP		(1u << 0)	/* flags: last of frame */
#define VRNIC_ETH_WB_DONE		(1u << 0)	/* wb_status */
#define VRNIC_ETH_WB_ERROR		(1u << 1)

/* 16-byte descriptor for TX and RX rings.  The driver fills addr, len and
 * flags; the device writes wb_len and wb_status back when it is done.
 */
struct vrnic_eth_desc {
	__le64 addr;
	__le16 len;			/* TX: bytes; RX: buffer size */
	__le16 flags;			/* VRNIC_ETH_DESC_* */
	__le16 wb_len;			/* RX: frame length */
	__u8 wb_status;			/* VRNIC_ETH_WB_* */
	__u8 rsvd;
};

/* RoCEv2 */
#define VRNIC_ROCE_UDP_PORT		4791

/* ------------------------------------------------ layout checks --- */
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_cmd) == 64, "admin cmd is 64 bytes");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_cqe) == 16, "admin cqe is 16 bytes");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_query) == 16, "query is 16 bytes");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_create_eq) == 16, "create_eq");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_create_eth_ring) == 16, "eth ring");
VRNIC_HW_ASSERT(sizeof(struct vrnic_eqe) == 16, "eqe is 16 bytes");
VRNIC_HW_ASSERT(sizeof(struct vrnic_eth_desc) == 16, "eth desc is 16 bytes");
VRNIC_HW_ASSERT(sizeof(struct vrnic_device_attr) == 96, "device attr");
VRNIC_HW_ASSERT(sizeof(struct vrnic_port_attr) == 16, "port attr");
VRNIC_HW_ASSERT(sizeof(struct vrnic_stats) == 80, "stats");
VRNIC_HW_ASSERT(VRNIC_DB_BAR_SIZE == 1024 * 1024, "doorbell BAR is 1 MiB");

#endif /* VRNIC_HW_H */

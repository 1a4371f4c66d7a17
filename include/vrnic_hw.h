/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * vrnic hardware interface, spec version 1.0.
 *
 * This header is the single definition of the device's programming model:
 * PCI identity, BAR map, BAR0 registers, doorbells, admin queue commands and
 * completions, event queue entries and Ethernet ring descriptors.  It is
 * included unchanged by the device model (engine/ and device/, C++20), the
 * Linux driver and the rdma-core provider.  Documentation/vrnic-spec.rst is the
 * prose form of the same contract; change both together.
 *
 * All multi-byte fields are little-endian.  A register field is its mask
 * in place, as GENMASK(high, low) makes it, for FIELD_PREP() and
 * FIELD_GET(); outside the kernel, VRNIC_GENMASK(), VRNIC_FIELD_PREP()
 * and VRNIC_FIELD_GET() stand in for them.
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

#if defined(__KERNEL__) && !defined(__cplusplus)
#include <linux/bits.h>
#define VRNIC_GENMASK(h, l)		GENMASK(h, l)
#else
#define VRNIC_GENMASK(h, l)		((~0u >> (31 - (h))) & (~0u << (l)))
#define VRNIC_FIELD_PREP(mask, v) \
	(((__u32)(v) << __builtin_ctz(mask)) & (mask))
#define VRNIC_FIELD_GET(mask, v)	(((v) & (mask)) >> __builtin_ctz(mask))
#endif

/* ---------------------------------------------------------------- PCI --- */

/*
 * 1af4:10f0, from the range QEMU's docs/specs/pci-ids.rst leaves for
 * experimental devices (1af4:10f0-10ff, no registration).  Not a permanent
 * ID: see "PCI configuration" in Documentation/vrnic-spec.rst.
 */
#define VRNIC_PCI_VENDOR_ID		0x1af4	/* Red Hat (Qumranet) */
#define VRNIC_PCI_DEVICE_ID		0x10f0
#define VRNIC_PCI_REVISION		0x01
#define VRNIC_PCI_CLASS			0x0200	/* Ethernet controller */

#define VRNIC_SPEC_VERSION_MAJOR	1
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
#define VRNIC_REG_CNT_EQ_OVERFLOWS	0x10c	/* events held back by full EQs */
#define VRNIC_REG_CNT_DMA_ERRORS	0x110	/* DMA transfers that failed */

#define VRNIC_CAP_ETH			(1u << 0)
#define VRNIC_CAP_ROCE_V2		(1u << 1)
#define VRNIC_CAP_TEST_REGS		(1u << 2)
#define VRNIC_CAP_SELECTIVE_REPEAT	(1u << 3)	/* 1.1: VRNIC_QP_TF_* */

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
#define VRNIC_ERR_INTERNAL		5	/* the device model failed internally */

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
/*
 * Events a full EQ holds back, one per (type, id), until it has room: more
 * than all objects can post at once (2 per CQ, 3 per QP, 1 per SRQ of the
 * 2^20 each, and the device's own).
 */
#define VRNIC_EQ_MAX_HELD		(6u * (1u << 20) + 64)
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
#define VRNIC_EQ_DB_CI			VRNIC_GENMASK(15, 0)
#define VRNIC_EQ_DB_EQN			VRNIC_GENMASK(23, 16)
#define VRNIC_EQ_DB_ARM			(1u << 31)

/* Ethernet doorbell: new producer index (u16, free running) of ring qid. */
#define VRNIC_ETH_DB_PI			VRNIC_GENMASK(15, 0)	/* or ci, at an arm */
#define VRNIC_ETH_DB_QID		VRNIC_GENMASK(23, 16)

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
	VRNIC_ADMIN_QUERY_PORT_STATS	= 0x0b,	/* PFC, per priority */
	VRNIC_ADMIN_QUERY_CC		= 0x0c,	/* congestion control */
	VRNIC_ADMIN_CREATE_PD		= 0x10,
	VRNIC_ADMIN_DESTROY_PD		= 0x11,
	VRNIC_ADMIN_CREATE_MR		= 0x12,
	VRNIC_ADMIN_DESTROY_MR		= 0x13,
	VRNIC_ADMIN_CREATE_CQ		= 0x14,
	VRNIC_ADMIN_DESTROY_CQ		= 0x15,
	VRNIC_ADMIN_CREATE_QP		= 0x16,
	VRNIC_ADMIN_MODIFY_QP		= 0x17,
	VRNIC_ADMIN_QUERY_QP		= 0x18,
	VRNIC_ADMIN_DESTROY_QP		= 0x19,
	VRNIC_ADMIN_CREATE_SRQ		= 0x1a,
	VRNIC_ADMIN_MODIFY_SRQ		= 0x1b,
	VRNIC_ADMIN_DESTROY_SRQ		= 0x1c,
	VRNIC_ADMIN_ATTACH_MCAST	= 0x1d,
	VRNIC_ADMIN_DETACH_MCAST	= 0x1e,
	VRNIC_ADMIN_ALLOC_MW		= 0x1f,
	VRNIC_ADMIN_DEALLOC_MW		= 0x20,
	VRNIC_ADMIN_ALLOC_XRCD		= 0x21,
	VRNIC_ADMIN_DEALLOC_XRCD	= 0x22,
	VRNIC_ADMIN_SET_GID		= 0x23,
	VRNIC_ADMIN_SET_MAC		= 0x24,
	VRNIC_ADMIN_SET_RX_FILTER	= 0x25,
	VRNIC_ADMIN_SET_CC		= 0x26,	/* congestion control */
	VRNIC_ADMIN_SET_QPC_MEM		= 0x27,	/* QP context backing */
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
	VRNIC_ADMIN_ST_UNSUPPORTED	= 0x07,	/* valid, not implemented */
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

/* ------------------------------------- RDMA objects --- */
/*
 * The RC data path.  Object handles carry a generation so that a stale
 * handle is refused: CQ, SRQ and QP numbers are index | generation << 20
 * (24 bits; the QPN is what travels on the wire), PD numbers the same
 * with a 12-bit generation (32 bits), MR keys are
 * index << 8 | 8-bit key, the key changing every time the index is reused.
 * Every object belongs to a user context (doorbell page); 0 is the kernel.
 */
#define VRNIC_OBJ_INDEX_BITS		20
#define VRNIC_OBJ_INDEX_MASK		((1u << VRNIC_OBJ_INDEX_BITS) - 1)
#define VRNIC_OBJ_GEN_MASK		0xfu	/* generation, bits 23:20 */
#define VRNIC_PD_GEN_MASK		0xfffu	/* PD handles: bits 31:20 */
#define VRNIC_MAX_PD			65536
#define VRNIC_MAX_CQ			(1u << 20)
#define VRNIC_MAX_QP			(1u << 20)	/* QPN index 0 and 1 reserved */
#define VRNIC_MAX_SRQ			(1u << 20)
#define VRNIC_MAX_MR			(1u << 20)
#define VRNIC_MR_KEY_BITS		8
#define VRNIC_MAX_CQ_LOG_DEPTH		22	/* 2^22 CQEs, as mlx5 reports */
#define VRNIC_MAX_WQ_LOG_DEPTH		14
#define VRNIC_MAX_SGE			16
#define VRNIC_MAX_INLINE		512
#define VRNIC_MAX_RD_ATOMIC		16
#define VRNIC_MAX_MSG_SIZE		(1u << 31)
#define VRNIC_MAX_MR_PAGES		(1u << 20)

/* Memory access rights (MR and QP). */
#define VRNIC_ACCESS_LOCAL_WRITE	(1u << 0)
#define VRNIC_ACCESS_REMOTE_WRITE	(1u << 1)
#define VRNIC_ACCESS_REMOTE_READ	(1u << 2)
#define VRNIC_ACCESS_REMOTE_ATOMIC	(1u << 3)
#define VRNIC_ACCESS_FLUSH_GLOBAL	(1u << 4)	/* FLUSH, global visibility */
#define VRNIC_ACCESS_MW_BIND		(1u << 6)	/* MR: windows may bind */
#define VRNIC_ACCESS_ALL		0x5fu		/* what an MR can grant */
/* What a memory window can grant. */
#define VRNIC_ACCESS_MW_RIGHTS		(VRNIC_ACCESS_REMOTE_WRITE | \
					 VRNIC_ACCESS_REMOTE_READ | \
					 VRNIC_ACCESS_REMOTE_ATOMIC)
/*
 * QP only: FLUSH to persistence may be asked for.  No MR can grant it (the
 * device has no persistent memory domain), so such a FLUSH is NAKed with
 * a remote access error, as on any RNIC without persistent memory.
 */
#define VRNIC_ACCESS_FLUSH_PERSISTENT	(1u << 5)

enum vrnic_pbl_mode {
	VRNIC_PBL_INLINE	= 0,	/* npages <= 3: pbl, inline_pages[0..1] */
	VRNIC_PBL_LEVEL1	= 1,	/* pbl: array of npages le64 addresses */
	VRNIC_PBL_LEVEL2	= 2,	/* pbl: array of addresses of level-1 pages */
	VRNIC_PBL_PHYS		= 3,	/* kernel only: iova is the bus address */
	VRNIC_PBL_FAST		= 4,	/* kernel only: fast-register MR, see below */
};

/*
 * A fast-register MR (VRNIC_PBL_FAST) is created invalid, with room for
 * npages pages (<= VRNIC_MAX_FAST_REG_PAGES) and nothing else: iova, length,
 * access and page_shift must be 0.  A REG_MR work request on a QP of the
 * same PD makes it valid with a page list, a new 8-bit key and rights; a
 * LOCAL_INV work request, or a SEND_WITH_INV received for its key, makes
 * it invalid again.  Only an invalid fast-register MR can be registered.
 */
#define VRNIC_MAX_FAST_REG_PAGES	512
#define VRNIC_PBL_PER_PAGE		512	/* le64 entries in a 4 KiB list page */

struct vrnic_admin_create_pd {
	__le32 uctx;
	__le32 rsvd;
};

/*
 * Memory windows share the MR table and key space: ALLOC_MW
 * returns index << 8 | key like CREATE_MR.  A window starts unbound; a
 * BIND_MW work request binds it to a range of an MR that has MW_BIND, on
 * a QP of the window's PD.  DEALLOC_MW names it by index (the key byte is
 * the consumer's); a bound window keeps its MR from being destroyed.
 */
#define VRNIC_MW_TYPE_1			1	/* bound with ibv_bind_mw */
#define VRNIC_MW_TYPE_2			2	/* type 2B: bound to one QP */

struct vrnic_admin_alloc_mw {
	__le32 pdn;
	__u8 type;			/* VRNIC_MW_TYPE_* */
	__u8 rsvd[3];
};

struct vrnic_admin_create_mr {
	__le64 iova;
	__le64 length;
	__le64 pbl;
	__le32 pdn;
	__le32 access;			/* VRNIC_ACCESS_* */
	__le32 npages;
	__u8 page_shift;		/* 12..30 */
	__u8 pbl_mode;			/* enum vrnic_pbl_mode */
	__le16 rsvd;
	__le64 inline_pages[2];
};

/*
 * Queue memory (CQE, SQ and RQ rings) is either one contiguous block at
 * base (4 KiB aligned), or, with VRNIC_RING_PAGED, base is the address of
 * an array of le64 addresses of the ring's 4 KiB pages, in order; the
 * device copies that list when the queue is created.  The Linux driver
 * and the provider page every ring.
 */
#define VRNIC_RING_PAGED		(1u << 0)
#define VRNIC_RING_PAGE_SIZE		4096

struct vrnic_admin_create_cq {
	__le64 base;			/* CQE ring or its page list */
	__le64 dbrec;			/* struct vrnic_cq_dbrec, 8-byte aligned */
	__le32 uctx;
	__u8 log_depth;			/* 1..VRNIC_MAX_CQ_LOG_DEPTH */
	__u8 eqn;			/* completion EQ for this CQ's events */
	__u8 ring_flags;		/* VRNIC_RING_PAGED */
	__u8 rsvd;
};

enum vrnic_qp_type {
	VRNIC_QPT_RC			= 0,	/* reliable connected */
	VRNIC_QPT_UC			= 1,	/* unreliable connected */
	VRNIC_QPT_UD			= 2,	/* unreliable datagram */
	VRNIC_QPT_GSI			= 3,	/* UD, QPN 1, kernel only */
	VRNIC_QPT_XRC_INI		= 4,	/* XRC send side: SQ only */
	VRNIC_QPT_XRC_TGT		= 5,	/* XRC receive side, kernel only */
};

/*
 * XRC.  An XRC domain (ALLOC_XRCD, kernel only: domains are
 * shared between processes) groups XRC SRQs and XRC target QPs.  An
 * XRC_INI QP is an RC requester whose every request names an XRC SRQ of
 * the target's domain (XRCETH).  An XRC_TGT QP has no rings, CQs or PD:
 * each request takes its PD (for rkeys and lkeys), receive WQEs and CQ
 * from the XRC SRQ it names, which must be in the QP's domain.
 */
#define VRNIC_MAX_XRCD			256

/* The GSI QP (QP1) and its well-known Q_Key. */
#define VRNIC_GSI_QPN			1
#define VRNIC_GSI_QKEY			0x80010000u
/* Q_Keys with this bit set are controlled: a WQE naming one uses the QP's. */
#define VRNIC_QKEY_PRIVILEGED		0x80000000u

struct vrnic_admin_create_qp {
	__le64 sq_base;
	__le64 rq_base;
	__le64 dbrec;			/* struct vrnic_qp_dbrec, 8-byte aligned */
	__le32 uctx;
	__le32 pdn;
	__le32 send_cqn;
	__le32 recv_cqn;
	__u8 type;			/* enum vrnic_qp_type */
	__u8 sq_log_depth;		/* 0..VRNIC_MAX_WQ_LOG_DEPTH */
	__u8 rq_log_depth;
	__u8 sq_wqe_shift;		/* 6..10: send WQE stride 64..1024 */
	__u8 rq_wqe_shift;		/* 5..9: receive WQE stride 32..512 */
	__u8 sq_flags;			/* VRNIC_RING_PAGED */
	__u8 rq_flags;			/* VRNIC_RING_PAGED */
	__u8 rsvd;
	__le32 srqn;			/* 0: own RQ; else receives come from it */
	__le32 xrcdn;			/* XRC_TGT: its domain; else 0 */
};

/*
 * Shared receive queues: a ring of receive WQEs (the RQ layout) that QPs
 * created with its number take their receives from, in ring order.  The
 * device writes its consumer index to the doorbell record after copying
 * each WQE, so the slot can be posted again at once.
 */
struct vrnic_admin_create_srq {
	__le64 base;			/* WQE ring or its page list */
	__le64 dbrec;			/* struct vrnic_srq_dbrec, 8-byte aligned */
	__le32 uctx;
	__le32 pdn;
	__u8 log_depth;			/* 0..VRNIC_MAX_WQ_LOG_DEPTH */
	__u8 wqe_shift;			/* 5..9 */
	__u8 ring_flags;		/* VRNIC_RING_PAGED */
	__u8 srq_type;			/* enum vrnic_srq_type */
	__le32 cqn;			/* XRC: receive completions go here */
	__le32 xrcdn;			/* XRC: its domain */
	__le32 rsvd;
};

enum vrnic_srq_type {
	VRNIC_SRQT_BASIC		= 0,
	VRNIC_SRQT_XRC			= 1,
};

/*
 * Arm the SRQ limit: when fewer than `limit` WQEs remain posted, the
 * device posts one SRQ_LIMIT event on the async EQ and disarms (0: off).
 */
struct vrnic_admin_modify_srq {
	__le32 srqn;
	__le32 limit;
};

/*
 * The port's GID table.  The device, not the consumer, owns the
 * source address of every packet: address vectors name an entry by
 * sgid_index, and the device takes the source GID (IP address), the source
 * MAC and the VLAN from it.  Only the kernel programs it (SET_GID); reset
 * empties it.  An empty or out-of-range index fails a UD send WQE with
 * LOC_QP_OP_ERR (the QP enters ERR) and a MODIFY_QP with BAD_PARAM.
 * Clearing or changing an entry moves every connected QP whose address
 * vector names it (RTR, RTS, SQD, SQE) to ERR with a QP_FATAL event.
 * An entry with a VLAN ID (1..4094) has the device send 802.1Q
 * tagged frames (VID, PCP = traffic class >> 5); a received RoCE frame
 * must carry the VLAN of a GID entry holding its destination (an untagged
 * one: no VLAN), else it is dropped and counted in vlan_drops.
 */
#define VRNIC_GID_TABLE_LEN		16
#define VRNIC_VLAN_NONE			0xffffu
#define VRNIC_VLAN_MIN			1
#define VRNIC_VLAN_MAX			4094

enum vrnic_gid_op {
	VRNIC_GID_OP_CLEAR		= 0,	/* gid, smac, vlan_id, type: 0 */
	VRNIC_GID_OP_SET		= 1,
};

enum vrnic_gid_type {
	VRNIC_GID_TYPE_ROCE_V2_IPV4	= 1,	/* gid: ::ffff:a.b.c.d */
	VRNIC_GID_TYPE_ROCE_V2_IPV6	= 2,	/* gid: not IPv4-mapped */
};

struct vrnic_admin_set_gid {
	__u8 gid[16];
	__u8 smac[6];			/* unicast, not zero */
	__le16 vlan_id;			/* VRNIC_VLAN_NONE or 1..4094 */
	__u8 index;			/* < VRNIC_GID_TABLE_LEN */
	__u8 op;			/* enum vrnic_gid_op */
	__u8 type;			/* enum vrnic_gid_type */
	__u8 rsvd[5];			/* must be 0 */
};

/*
 * Station address and receive filter.  SET_MAC sets the unicast
 * address the device accepts and RoCE loopback compares with (reset: the
 * REG_MAC_* address).  SET_RX_FILTER replaces the filter: broadcast is
 * always accepted; multicast by the list (group addresses), or every
 * multicast with ALLMULTI (the reset state); every frame with PROMISC.
 */
struct vrnic_admin_set_mac {
	__u8 mac[6];			/* unicast, not zero */
	__u8 rsvd[2];			/* must be 0 */
};

#define VRNIC_RX_FILTER_PROMISC		(1u << 0)
#define VRNIC_RX_FILTER_ALLMULTI	(1u << 1)
#define VRNIC_RX_FILTER_MAX_MC		8

struct vrnic_admin_set_rx_filter {
	__le32 flags;			/* VRNIC_RX_FILTER_* */
	__u8 mc_count;			/* <= VRNIC_RX_FILTER_MAX_MC */
	__u8 rsvd[3];			/* must be 0 */
	__u8 mc[VRNIC_RX_FILTER_MAX_MC][6];	/* group bit set */
};

/*
 * Congestion control (spec "Congestion control"): SET_CC changes one
 * device-wide setting per command, QUERY_CC reads them all (struct
 * vrnic_cc_params).  The algorithm, the per-priority enables (bit p:
 * priority p), and the knobs by index: DCQCN's in mlx5's debugfs order
 * (its cc_params file names, in its units), Swift's in the order below.
 */
enum vrnic_cc_algo {
	VRNIC_CC_ALGO_NONE		= 0,
	VRNIC_CC_ALGO_DCQCN		= 1,
	VRNIC_CC_ALGO_SWIFT		= 2,
};

enum vrnic_cc_op {
	VRNIC_CC_OP_SET_ALGO		= 1,	/* value: enum vrnic_cc_algo */
	VRNIC_CC_OP_SET_NP_ENABLE	= 2,	/* value: priority mask */
	VRNIC_CC_OP_SET_RP_ENABLE	= 3,	/* value: priority mask */
	VRNIC_CC_OP_SET_DCQCN		= 4,	/* index: vrnic_cc_dcqcn_param */
	VRNIC_CC_OP_SET_SWIFT		= 5,	/* index: vrnic_cc_swift_param */
};

enum vrnic_cc_dcqcn_param {		/* mlx5_ib_dbg_cc_name[] order */
	VRNIC_CC_RP_CLAMP_TGT_RATE,
	VRNIC_CC_RP_CLAMP_TGT_RATE_ATI,
	VRNIC_CC_RP_TIME_RESET,
	VRNIC_CC_RP_BYTE_RESET,
	VRNIC_CC_RP_THRESHOLD,
	VRNIC_CC_RP_AI_RATE,
	VRNIC_CC_RP_MAX_RATE,
	VRNIC_CC_RP_HAI_RATE,
	VRNIC_CC_RP_MIN_DEC_FAC,
	VRNIC_CC_RP_MIN_RATE,
	VRNIC_CC_RP_RATE_TO_SET_ON_FIRST_CNP,
	VRNIC_CC_RP_DCE_TCP_G,
	VRNIC_CC_RP_DCE_TCP_RTT,
	VRNIC_CC_RP_RATE_REDUCE_MONITOR_PERIOD,
	VRNIC_CC_RP_INITIAL_ALPHA_VALUE,
	VRNIC_CC_RP_GD,
	VRNIC_CC_NP_MIN_TIME_BETWEEN_CNPS,
	VRNIC_CC_NP_CNP_DSCP,
	VRNIC_CC_NP_CNP_PRIO_MODE,
	VRNIC_CC_NP_CNP_PRIO,
	VRNIC_CC_NUM_DCQCN
};

enum vrnic_cc_swift_param {
	VRNIC_CC_SWIFT_MTU,		/* bytes per packet of the window */
	VRNIC_CC_SWIFT_BASE_TARGET_US,	/* target delay */
	VRNIC_CC_SWIFT_AI_MILLI,	/* additive increase, 1/1000 packet */
	VRNIC_CC_SWIFT_BETA_MILLI,	/* multiplicative decrease gain */
	VRNIC_CC_SWIFT_MAX_MDF_MILLI,	/* largest decrease per RTT */
	VRNIC_CC_SWIFT_MIN_CWND_Q10,	/* 1/1024 packet */
	VRNIC_CC_SWIFT_MAX_CWND_PKTS,
	VRNIC_CC_SWIFT_INIT_CWND_PKTS,
	VRNIC_CC_NUM_SWIFT
};

struct vrnic_admin_set_cc {
	__u8 op;			/* enum vrnic_cc_op */
	__u8 rsvd[3];			/* must be 0 */
	__le32 index;			/* SET_DCQCN, SET_SWIFT; else 0 */
	__le32 value;
};

/*
 * The QP-context cache (spec "QP-context cache"): when QUERY_DEVICE reports
 * qpc_cache (its entries; 0: unlimited, no memory needed), the driver gives
 * the device VRNIC_MAX_QP contexts of VRNIC_QPC_SIZE bytes, the context of
 * QP slot i at byte i * VRNIC_QPC_SIZE, before it creates a QP.  The device
 * writes a context there when the cache evicts it and reads it back on the
 * next miss; the driver never reads or writes it.  base is the memory
 * itself (4 KiB aligned) or, with VRNIC_RING_PAGED, the list of its 4 KiB
 * pages, as for a ring.
 */
#define VRNIC_QPC_SIZE			64
struct vrnic_admin_set_qpc_mem {
	__le64 base;
	__le32 entries;			/* VRNIC_MAX_QP */
	__u8 flags;			/* VRNIC_RING_PAGED */
	__u8 rsvd[3];			/* must be 0 */
};

/* A QP context as the device writes it back: its own, opaque to drivers. */
struct vrnic_qpc {
	__le32 qpn;
	__u8 type;
	__u8 state;
	__le16 rsvd0;
	__le32 pdn;
	__le32 send_cqn;
	__le32 recv_cqn;
	__le32 srqn;
	__le32 dest_qpn;
	__le32 sq_head;
	__le32 next_psn;
	__le32 una_psn;
	__le32 epsn;
	__le32 msn;
	__le32 rq_head;
	__le32 uctx;
	__le64 dbrec;
};

/* Result of QUERY_CC. */
struct vrnic_cc_params {
	__le32 algo;			/* enum vrnic_cc_algo */
	__le32 np_enable;		/* CNPs answer CE on these priorities */
	__le32 rp_enable;		/* the algorithm runs on these */
	__le32 gen;			/* + 1 for every successful SET_CC */
	__le32 dcqcn[VRNIC_CC_NUM_DCQCN];
	__le32 swift[VRNIC_CC_NUM_SWIFT];
};

/*
 * Multicast (UD QPs): attach a QP to a multicast GID (ff00::/8, or an
 * IPv4-mapped 224.0.0.0/4 address).  A UD packet to that GID with
 * destination QPN VRNIC_MCAST_QPN goes to every QP attached to it.
 */
#define VRNIC_MCAST_QPN			0xffffffu
#define VRNIC_MAX_MCAST_ATTACH		1024	/* (GID, QP) pairs per device */

struct vrnic_admin_mcast {
	__u8 gid[16];
	__le32 qpn;
	__le32 rsvd;
};

struct vrnic_srq_dbrec {
	__le32 pi;			/* free-running, written by the driver */
	__le32 ci;			/* WQEs the device has taken (device-written) */
};

enum vrnic_qp_state {
	VRNIC_QPS_RESET = 0, VRNIC_QPS_INIT, VRNIC_QPS_RTR, VRNIC_QPS_RTS,
	VRNIC_QPS_SQD, VRNIC_QPS_SQE, VRNIC_QPS_ERR,
};

/* Attribute mask of MODIFY_QP. */
#define VRNIC_QP_ATTR_STATE		(1u << 0)
#define VRNIC_QP_ATTR_ACCESS		(1u << 1)
#define VRNIC_QP_ATTR_AV		(1u << 2)
#define VRNIC_QP_ATTR_PATH_MTU		(1u << 3)
#define VRNIC_QP_ATTR_TIMEOUT		(1u << 4)
#define VRNIC_QP_ATTR_RETRY_CNT		(1u << 5)
#define VRNIC_QP_ATTR_RNR_RETRY		(1u << 6)
#define VRNIC_QP_ATTR_MIN_RNR_TIMER	(1u << 7)
#define VRNIC_QP_ATTR_MAX_RD_ATOMIC	(1u << 8)
#define VRNIC_QP_ATTR_MAX_DEST_RD_ATOMIC (1u << 9)
#define VRNIC_QP_ATTR_SQ_PSN		(1u << 10)
#define VRNIC_QP_ATTR_RQ_PSN		(1u << 11)
#define VRNIC_QP_ATTR_DEST_QPN		(1u << 12)
#define VRNIC_QP_ATTR_QKEY		(1u << 13)	/* UD and GSI */
#define VRNIC_QP_ATTR_TRANSPORT		(1u << 14)	/* RC, XRC; to INIT, RTR */
#define VRNIC_QP_ATTR_SQD_NOTIFY	(1u << 15)	/* RTS->SQD: sqd_notify */

/* transport_flags of struct vrnic_qp_attr: what the peer agreed to. */
#define VRNIC_QP_TF_SELECTIVE_REPEAT	(1u << 0)	/* SACKs, hole resends */
/* send_window of struct vrnic_qp_attr (TRANSPORT): at most this. */
#define VRNIC_SEND_WINDOW_MAX		512
/* spray_paths of struct vrnic_qp_attr (TRANSPORT): at most this. */
#define VRNIC_SPRAY_PATHS_MAX		64

/* QP attributes, in guest memory for MODIFY_QP and QUERY_QP (128 B). */
struct vrnic_qp_attr {
	__u8 state;			/* enum vrnic_qp_state */
	__u8 path_mtu;			/* 1..5: 256 << (path_mtu - 1) */
	__u8 timeout;			/* ack timeout 4.096 us << timeout, 0 = none */
	__u8 retry_cnt;			/* 0..7 */
	__u8 rnr_retry;			/* 0..7, 7 = unlimited */
	__u8 min_rnr_timer;		/* IB RNR timer code 0..31 */
	__u8 max_rd_atomic;		/* outstanding READ/atomic as requester */
	__u8 max_dest_rd_atomic;	/* as responder */
	__le32 sq_psn;
	__le32 rq_psn;
	__le32 dest_qpn;
	__le32 access;			/* VRNIC_ACCESS_REMOTE_* allowed */
	/* address vector */
	__u8 dgid[16];			/* IPv4: ::ffff:a.b.c.d */
	__u8 sgid_index;		/* GID table entry: source GID, MAC */
	__u8 rsvd_av[15];		/* 0 */
	__u8 dmac[6];
	__u8 rsvd_smac[6];		/* 0 */
	__u8 traffic_class;
	__u8 hop_limit;
	__le16 udp_sport;		/* rdma_flow_label_to_udp_sport() */
	__le32 flow_label;
	__le32 qkey;			/* UD and GSI */
	/* QUERY_QP only: the QP's congestion-control rate, 0: not limited */
	__le32 cc_rate_mbps;
	__le32 transport_flags;		/* VRNIC_QP_TF_* */
	__le16 send_window;		/* PSNs in flight, 0: the maximum */
	__u8 spray_paths;		/* UDP source ports, 0 and 1: one */
	__u8 sqd_notify;		/* 1: SQ_DRAINED event once drained */
	__u8 sq_draining;		/* QUERY_QP only: in SQD, not drained */
	__u8 rsvd[35];
};

struct vrnic_admin_modify_qp {
	__le64 attr_addr;		/* struct vrnic_qp_attr */
	__le32 qpn;
	__le32 attr_mask;		/* VRNIC_QP_ATTR_* */
};

struct vrnic_admin_query_qp {
	__le64 out_addr;		/* struct vrnic_qp_attr */
	__le32 qpn;
	__le32 rsvd;
};

/* Doorbell records: written by the driver/provider, read by the device. */
struct vrnic_qp_dbrec {
	__le32 sq_pi;			/* free-running producer indices */
	__le32 rq_pi;
};

struct vrnic_cq_dbrec {
	__le32 ci;			/* free-running consumer index */
	__le32 rsvd;
};

/* Data path doorbells, on page 0 and on user pages (object owner only). */
#define VRNIC_DB_SQ			0x100	/* value: qpn */
#define VRNIC_DB_RQ			0x104	/* value: qpn */
#define VRNIC_DB_CQ_ARM			0x108	/* VRNIC_CQ_ARM_* */
#define VRNIC_CQ_ARM_CQN		VRNIC_GENMASK(23, 0)
#define VRNIC_CQ_ARM_CMD		VRNIC_GENMASK(25, 24)
#define VRNIC_CQ_ARM_NEXT		1u	/* any completion */
#define VRNIC_CQ_ARM_SOLICITED		2u	/* solicited or error only */

/* Send work requests. */
enum vrnic_wr_opcode {
	VRNIC_WR_SEND			= 0x00,
	VRNIC_WR_SEND_IMM		= 0x01,
	VRNIC_WR_RDMA_WRITE		= 0x02,
	VRNIC_WR_RDMA_WRITE_IMM		= 0x03,
	VRNIC_WR_RDMA_READ		= 0x04,
	VRNIC_WR_ATOMIC_CMP_SWP		= 0x05,
	VRNIC_WR_ATOMIC_FETCH_ADD	= 0x06,
	VRNIC_WR_SEND_INV		= 0x07,	/* rkey: the key to invalidate */
	VRNIC_WR_LOCAL_INV		= 0x08,	/* rkey: the key to invalidate */
	VRNIC_WR_REG_MR			= 0x09,	/* struct vrnic_reg_mr_wqe */
	VRNIC_WR_ATOMIC_WRITE		= 0x0a,	/* compare_add: the 8 bytes */
	VRNIC_WR_FLUSH			= 0x0b,	/* compare_add: length; swap: FETH */
	VRNIC_WR_BIND_MW		= 0x0c,	/* struct vrnic_bind_mw_wqe */
};

/*
 * ATOMIC_WRITE (RC) writes the 8 bytes held in compare_add, in memory
 * order, to an 8-byte aligned remote_addr as one unit; no SGEs.  FLUSH
 * (RC) makes earlier writes to [remote_addr, + compare_add) of the rkey's
 * MR, or to the whole MR, visible at a placement type; no SGEs.  The low
 * byte of swap is the FLUSH extended transport header's: type in bits
 * 0-3, level in bits 4-5.  Both are answered like a zero-length READ and
 * count against max_rd_atomic.
 */
#define VRNIC_FLUSH_GLOBAL		(1u << 0)	/* placement types */
#define VRNIC_FLUSH_PERSISTENT		(1u << 1)
#define VRNIC_FLUSH_TYPE_MASK		0x0fu
#define VRNIC_FLUSH_RANGE		0u		/* levels */
#define VRNIC_FLUSH_MR			1u
#define VRNIC_FLUSH_LEVEL_SHIFT		4

#define VRNIC_WQE_SIGNALED		(1u << 0)
#define VRNIC_WQE_SOLICITED		(1u << 1)
#define VRNIC_WQE_INLINE		(1u << 2)
#define VRNIC_WQE_FENCE			(1u << 3)

struct vrnic_sge {
	__le64 addr;
	__le32 length;
	__le32 lkey;
};

/*
 * Send WQE: this 64-byte header, then (UD and GSI QPs only) a 64-byte
 * struct vrnic_ud_av, then num_sge SGEs or inline_len bytes.
 */
struct vrnic_send_wqe {
	__le64 wr_id;
	__u8 opcode;			/* enum vrnic_wr_opcode */
	__u8 flags;			/* VRNIC_WQE_* */
	__u8 num_sge;
	__u8 rsvd0;
	__le32 imm_data;		/* big-endian value as on the wire */
	__le64 remote_addr;
	__le32 rkey;
	__le32 inline_len;
	__le64 compare_add;
	__le64 swap;
	__le32 xrc_srqn;		/* XRC_INI: the target's XRC SRQ */
	__le32 rsvd1[3];
};

/*
 * REG_MR (RC and UC QPs, kernel only): the same 64 bytes as a send WQE
 * header, read as below; no SGEs follow.  The device reads the page list
 * (npages le64 bus addresses of 1 << page_shift byte pages, the first one
 * holding iova) when it executes the request, in SQ order.
 */
struct vrnic_reg_mr_wqe {
	__le64 wr_id;
	__u8 opcode;			/* VRNIC_WR_REG_MR */
	__u8 flags;			/* VRNIC_WQE_* */
	__u8 page_shift;		/* 12..30 */
	__u8 rsvd0;
	__le32 access;			/* VRNIC_ACCESS_* */
	__le64 iova;
	__le32 key;			/* MR index << 8 | its new 8-bit key */
	__le32 npages;			/* <= the MR's capacity */
	__le64 length;
	__le64 pbl;			/* npages le64 page addresses */
	__le32 rsvd1[4];
};

/*
 * BIND_MW (RC and UC QPs): the 64-byte header read as below; no SGEs.
 * Binds window mw_key (its current key) to [addr, addr + length) of MR
 * mr_key with VRNIC_ACCESS_MW_RIGHTS and gives it the key byte new_key.
 * A type 1 window bound with length 0 is unbound.  Executed in SQ order,
 * like REG_MR.
 */
struct vrnic_bind_mw_wqe {
	__le64 wr_id;
	__u8 opcode;			/* VRNIC_WR_BIND_MW */
	__u8 flags;			/* VRNIC_WQE_* */
	__u8 mw_type;			/* must be the window's */
	__u8 new_key;			/* the window's next 8-bit key */
	__le32 access;			/* VRNIC_ACCESS_MW_RIGHTS bits */
	__le64 addr;
	__le32 mw_key;
	__le32 mr_key;			/* ignored for a type 1 unbind */
	__le64 length;
	__le32 rsvd1[6];
};

/*
 * The destination of one UD send, carried in the WQE: address handles are
 * not device objects.  The source GID, MAC and VLAN come from the GID
 * table entry sgid_index names, which must be of the family of dgid.
 */
struct vrnic_ud_av {
	__le32 dest_qpn;
	__le32 qkey;			/* VRNIC_QKEY_PRIVILEGED: the QP's */
	__u8 dgid[16];			/* IPv4: ::ffff:a.b.c.d; or multicast */
	__u8 sgid_index;		/* < VRNIC_GID_TABLE_LEN, a valid entry */
	__u8 rsvd_sgid[15];		/* 0 */
	__u8 dmac[6];
	__u8 traffic_class;
	__u8 hop_limit;			/* 0: 64 */
	__le32 flow_label;
	__le16 udp_sport;		/* 0: the device picks one per QP pair */
	__u8 rsvd[10];			/* 0 */
};

/* UD and GSI QPs carry an address vector in every send WQE. */
static inline int vrnic_qpt_is_datagram(unsigned int qp_type)
{
	return qp_type == VRNIC_QPT_UD || qp_type == VRNIC_QPT_GSI;
}

/* Where a send WQE's SGEs or inline data start, for a QP type. */
static inline unsigned int vrnic_send_wqe_data_off(unsigned int qp_type)
{
	return sizeof(struct vrnic_send_wqe) +
	       (vrnic_qpt_is_datagram(qp_type) ? sizeof(struct vrnic_ud_av) : 0);
}

/* Receive WQE: this 16-byte header, then num_sge SGEs. */
struct vrnic_recv_wqe {
	__le64 wr_id;
	__u8 num_sge;
	__u8 rsvd[7];
};

enum vrnic_wc_opcode {
	VRNIC_WC_SEND			= 0x00,
	VRNIC_WC_RDMA_WRITE		= 0x01,
	VRNIC_WC_RDMA_READ		= 0x02,
	VRNIC_WC_CMP_SWP		= 0x03,
	VRNIC_WC_FETCH_ADD		= 0x04,
	VRNIC_WC_LOCAL_INV		= 0x05,
	VRNIC_WC_REG_MR			= 0x06,
	VRNIC_WC_ATOMIC_WRITE		= 0x07,
	VRNIC_WC_FLUSH			= 0x08,
	VRNIC_WC_BIND_MW		= 0x09,
	VRNIC_WC_RECV			= 0x80,
	VRNIC_WC_RECV_RDMA_WITH_IMM	= 0x81,
};

/* Completion status; the same values as enum ibv_wc_status. */
enum vrnic_wc_status {
	VRNIC_WC_ST_SUCCESS		= 0,
	VRNIC_WC_ST_LOC_LEN_ERR		= 1,
	VRNIC_WC_ST_LOC_QP_OP_ERR	= 2,
	VRNIC_WC_ST_LOC_PROT_ERR	= 4,
	VRNIC_WC_ST_WR_FLUSH_ERR	= 5,
	VRNIC_WC_ST_MW_BIND_ERR		= 6,	/* REG_MR/LOCAL_INV refused */
	VRNIC_WC_ST_BAD_RESP_ERR	= 7,
	VRNIC_WC_ST_LOC_ACCESS_ERR	= 8,
	VRNIC_WC_ST_REM_INV_REQ_ERR	= 9,
	VRNIC_WC_ST_REM_ACCESS_ERR	= 10,
	VRNIC_WC_ST_REM_OP_ERR		= 11,
	VRNIC_WC_ST_RETRY_EXC_ERR	= 12,
	VRNIC_WC_ST_RNR_RETRY_EXC_ERR	= 13,
	VRNIC_WC_ST_FATAL_ERR		= 19,
	VRNIC_WC_ST_GENERAL_ERR		= 21,
};

#define VRNIC_CQE_OWNER			(1u << 0)	/* phase, in owner */
#define VRNIC_CQE_WITH_IMM		(1u << 0)	/* wc_flags */
#define VRNIC_CQE_WITH_INV		(1u << 1)	/* imm_data: the key */
#define VRNIC_CQE_GRH			(1u << 2)	/* UD: 40 B network header first */
#define VRNIC_CQE_NET_IPV4		(1u << 3)	/* ... and it is IPv4 */
/*
 * A datagram received with an 802.1Q tag (VID 1..4094) and no
 * immediate: imm_data holds the VID (le32), so that the kernel can find the
 * VLAN's GID for a reply (ib_init_ah_attr_from_wc).
 */
#define VRNIC_CQE_WITH_VLAN		(1u << 4)

/*
 * A UD receive buffer starts with 40 bytes of network header: the IPv6
 * header as received, or 20 zero bytes then the IPv4 header (as Linux rxe
 * and every RoCE device do); byte_len counts those 40 bytes.
 */
#define VRNIC_UD_GRH_LEN		40

/* 32-byte completion; the phase bit is in the last dword, written last. */
struct vrnic_cqe {
	__le64 wr_id;
	__le32 byte_len;
	__le32 imm_data;
	__le32 qpn;
	__le32 src_qp;			/* UD: sender's QPN; RC/UC: dest QPN */
	__le32 wqe_idx;			/* SQ or RQ index of the completed WQE */
	__u8 opcode;			/* enum vrnic_wc_opcode */
	__u8 status;			/* enum vrnic_wc_status */
	__u8 wc_flags;			/* VRNIC_CQE_WITH_* */
	__u8 owner;			/* VRNIC_CQE_OWNER */
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
		struct vrnic_admin_create_pd create_pd;
		struct vrnic_admin_create_mr create_mr;
		struct vrnic_admin_create_cq create_cq;
		struct vrnic_admin_create_qp create_qp;
		struct vrnic_admin_modify_qp modify_qp;
		struct vrnic_admin_query_qp query_qp;
		struct vrnic_admin_create_srq create_srq;
		struct vrnic_admin_modify_srq modify_srq;
		struct vrnic_admin_mcast mcast;
		struct vrnic_admin_alloc_mw alloc_mw;
		struct vrnic_admin_set_gid set_gid;
		struct vrnic_admin_set_mac set_mac;
		struct vrnic_admin_set_rx_filter set_rx_filter;
		struct vrnic_admin_set_cc set_cc;
		struct vrnic_admin_set_qpc_mem set_qpc_mem;
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
	__le16 gid_tbl_len;		/* VRNIC_GID_TABLE_LEN */
	/*
	 * Host memory the device lets the guest make it hold, in bytes
	 * (spec "Resource limits").
	 */
	__le64 host_mem_budget;
	__le32 max_srq;
	__le32 max_mcast_attach;	/* (GID, QP) pairs, all groups */
	__le32 qpc_cache;		/* QP contexts cached; 0: unlimited */
	__le32 qpc_miss_ns;		/* the modelled cost of a miss */
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
	/* RoCE transport */
	__le64 sent_pkts;
	__le64 rcvd_pkts;
	__le64 sent_bytes;		/* RoCE frame bytes */
	__le64 rcvd_bytes;
	__le64 icrc_errors;
	__le64 malformed_pkts;
	__le64 bad_qp_pkts;		/* no such QP, wrong state or path */
	__le64 duplicate_request;
	__le64 out_of_seq_request;
	__le64 rcvd_rnr_err;		/* RNR NAKs received */
	__le64 send_rnr_err;		/* RNR NAKs sent */
	__le64 rcvd_seq_err;		/* sequence NAKs received */
	__le64 ack_timeouts;
	__le64 retry_exceeded_err;
	__le64 retry_rnr_exceeded_err;
	__le64 remote_access_err;	/* remote access NAKs sent */
	__le64 cq_overflows;
	__le64 qkey_violations;
	__le64 ud_no_recv;
	__le64 uc_dropped;
	__le64 srq_limit_events;
	__le64 fast_reg;		/* REG_MR executed */
	__le64 local_inv;		/* LOCAL_INV executed */
	__le64 remote_inv;		/* keys invalidated by SEND_WITH_INV */
	__le64 mw_binds;		/* BIND_MW executed */
	__le64 bad_sgid;		/* UD WQEs naming no usable GID */
	__le64 vlan_drops;		/* RoCE frames on a wrong VLAN */
	/* Congestion control, mlx5's names */
	__le64 np_ecn_marked_roce_packets;	/* RoCE packets received CE */
	__le64 np_cnp_sent;		/* CNPs sent for them */
	__le64 rp_cnp_handled;		/* CNPs a QP's algorithm acted on */
	__le64 rp_cnp_ignored;		/* CNPs for no QP, CC off, or too soon */
	/* Selective repeat (mlx5's names where it has one) */
	__le64 roce_adp_retrans;	/* resent alone: SACK or timer */
	__le64 roce_adp_retrans_to;	/* their ack or hole timers resending */
	__le64 sack_sent;
	__le64 sack_rcvd;
	__le64 ooo_placed;		/* requests held out of order */
	__le64 ooo_dropped;		/* past the window, or the budget refused */
	__le64 implied_nak_seq_err;	/* READ responses after a gap */
	/* The QP-context cache (every access hits when it is unlimited) */
	__le64 qpc_cache_hits;
	__le64 qpc_cache_misses;
	__le64 qpc_cache_evictions;
};

#define VRNIC_NUM_PRIOS			8
/*
 * Result of QUERY_PORT_STATS: the port's MAC control, per priority
 * (802.1Qbb PFC; an 802.3x PAUSE counts for every priority).
 */
struct vrnic_port_stats {
	__le64 rx_pause[VRNIC_NUM_PRIOS];	/* PFC/PAUSE frames naming it */
	__le64 rx_pause_duration_us[VRNIC_NUM_PRIOS];	/* time paused */
	__le64 rx_pause_transition[VRNIC_NUM_PRIOS];	/* resumed -> paused */
	__le64 tx_pause[VRNIC_NUM_PRIOS];	/* PFC frames sent (none yet) */
	__le64 mac_control_unknown;	/* other opcodes, dropped */
	__le64 mac_control_malformed;	/* too short, dropped */
	__le64 tx_pause_storm_error_events;	/* 8 s held: pauses ignored */
};

/* ----------------------------------------------------- event queues --- */

enum vrnic_eqe_type {
	VRNIC_EQE_ADMIN_DONE		= 0x01,	/* admin completion written */
	VRNIC_EQE_PORT_UP		= 0x02,
	VRNIC_EQE_PORT_DOWN		= 0x03,
	VRNIC_EQE_ETH_TX		= 0x10,	/* TX ring <qid> progressed */
	VRNIC_EQE_ETH_RX		= 0x11,	/* RX ring <qid> progressed */
	VRNIC_EQE_FATAL			= 0x20,	/* device error, see REG_ERROR */
	VRNIC_EQE_CQ			= 0x30,	/* CQ <id> has a completion */
	VRNIC_EQE_CQ_ERROR		= 0x31,	/* CQ <id> overflowed */
	VRNIC_EQE_QP_FATAL		= 0x32,	/* QP <id> entered ERR */
	VRNIC_EQE_SRQ_LIMIT		= 0x33,	/* SRQ <id> fell below its limit */
	VRNIC_EQE_QP_LAST_WQE		= 0x34,	/* SRQ QP <id>: no more WQEs taken */
	VRNIC_EQE_QP_SQ_DRAINED		= 0x35,	/* QP <id> in SQD: SQ drained */
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
VRNIC_HW_ASSERT(sizeof(struct vrnic_device_attr) == 112, "device attr");
VRNIC_HW_ASSERT(sizeof(struct vrnic_port_attr) == 16, "port attr");
VRNIC_HW_ASSERT(sizeof(struct vrnic_stats) == 408, "stats");
VRNIC_HW_ASSERT(sizeof(struct vrnic_port_stats) == 280, "port stats");
VRNIC_HW_ASSERT(VRNIC_DB_BAR_SIZE == 1024 * 1024, "doorbell BAR is 1 MiB");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_create_mr) == 56, "create_mr");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_create_cq) == 24, "create_cq");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_create_qp) == 56, "create_qp");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_create_srq) == 40, "create_srq");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_modify_qp) == 16, "modify_qp");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_mcast) == 24, "mcast");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_set_gid) == 32, "set_gid");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_set_mac) == 8, "set_mac");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_set_rx_filter) == 56, "rx filter");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_set_cc) == 12, "set_cc");
VRNIC_HW_ASSERT(sizeof(struct vrnic_admin_set_qpc_mem) == 16, "set_qpc_mem");
VRNIC_HW_ASSERT(sizeof(struct vrnic_qpc) == VRNIC_QPC_SIZE, "qp context");
VRNIC_HW_ASSERT(sizeof(struct vrnic_cc_params) == 128, "cc params");
VRNIC_HW_ASSERT(VRNIC_CC_NUM_DCQCN == 20, "mlx5's 20 DCQCN knobs");
VRNIC_HW_ASSERT(VRNIC_GID_TABLE_LEN <= 256, "sgid_index is 8 bits");
VRNIC_HW_ASSERT(sizeof(struct vrnic_qp_attr) == 128, "qp attr");
VRNIC_HW_ASSERT(sizeof(struct vrnic_send_wqe) == 64, "send wqe header");
VRNIC_HW_ASSERT(sizeof(struct vrnic_reg_mr_wqe) == 64, "reg_mr wqe");
VRNIC_HW_ASSERT(sizeof(struct vrnic_bind_mw_wqe) == 64, "bind_mw wqe");
VRNIC_HW_ASSERT(sizeof(struct vrnic_recv_wqe) == 16, "recv wqe header");
VRNIC_HW_ASSERT(sizeof(struct vrnic_sge) == 16, "sge");
VRNIC_HW_ASSERT(sizeof(struct vrnic_ud_av) == 64, "ud av");
VRNIC_HW_ASSERT(sizeof(struct vrnic_cqe) == 32, "cqe");

#endif /* VRNIC_HW_H */

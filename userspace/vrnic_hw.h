/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * vrnic hardware interface, the part the provider uses: queue pairs,
 * doorbells, work queue entries, completion queue entries and doorbell
 * records.  Generated from include/vrnic_hw.h, the single definition of
 * the device, by scripts/provider_hw.py: edit that, not this.
 *
 * All multi-byte fields are little-endian.
 */
#ifndef VRNIC_HW_H
#define VRNIC_HW_H

#include <linux/types.h>

#define VRNIC_HW_ASSERT(expr, msg) _Static_assert(expr, msg)
#define VRNIC_GENMASK(h, l)		((~0u >> (31 - (h))) & (~0u << (l)))
#define VRNIC_FIELD_PREP(mask, v) \
	(((__u32)(v) << __builtin_ctz(mask)) & (mask))
#define VRNIC_FIELD_GET(mask, v)	(((v) & (mask)) >> __builtin_ctz(mask))

/*
 * 1af4:10f0, from the range QEMU's docs/specs/pci-ids.rst leaves for
 * experimental devices (1af4:10f0-10ff, no registration).  Not a permanent
 * ID: see "PCI configuration" in Documentation/vrnic-spec.rst.
 */
#define VRNIC_PCI_VENDOR_ID		0x1af4	/* Red Hat (Qumranet) */
#define VRNIC_PCI_DEVICE_ID		0x10f0
#define VRNIC_PCI_REVISION		0x01
#define VRNIC_PCI_CLASS			0x0200	/* Ethernet controller */

/* BAR map */
#define VRNIC_REG_BAR			0	/* 64-bit MMIO, registers */
#define VRNIC_REG_BAR_SIZE		0x4000
#define VRNIC_DB_BAR			2	/* 64-bit MMIO, doorbell pages */
#define VRNIC_DB_PAGE_SIZE		0x1000
#define VRNIC_NUM_DB_PAGES		256	/* page 0 is the kernel's */
#define VRNIC_DB_BAR_SIZE		(VRNIC_DB_PAGE_SIZE * VRNIC_NUM_DB_PAGES)
#define VRNIC_MSIX_BAR			4	/* MSI-X table and PBA */

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

/*
 * Memory windows share the MR table and key space: ALLOC_MW
 * returns index << 8 | key like CREATE_MR.  A window starts unbound; a
 * BIND_MW work request binds it to a range of an MR that has MW_BIND, on
 * a QP of the window's PD.  DEALLOC_MW names it by index (the key byte is
 * the consumer's); a bound window keeps its MR from being destroyed.
 */
#define VRNIC_MW_TYPE_1			1	/* bound with ibv_bind_mw */
#define VRNIC_MW_TYPE_2			2	/* type 2B: bound to one QP */

enum vrnic_qp_type {
	VRNIC_QPT_RC			= 0,	/* reliable connected */
	VRNIC_QPT_UC			= 1,	/* unreliable connected */
	VRNIC_QPT_UD			= 2,	/* unreliable datagram */
	VRNIC_QPT_GSI			= 3,	/* UD, QPN 1, kernel only */
	VRNIC_QPT_XRC_INI		= 4,	/* XRC send side: SQ only */
	VRNIC_QPT_XRC_TGT		= 5,	/* XRC receive side, kernel only */
};

struct vrnic_srq_dbrec {
	__le32 pi;			/* free-running, written by the driver */
	__le32 ci;			/* WQEs the device has taken (device-written) */
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


#endif /* VRNIC_HW_H */

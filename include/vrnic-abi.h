/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * vrnic user/kernel ABI: the private data that travels with uverbs
 * commands between the vrnic kernel driver and the rdma-core provider.
 * Self-contained, as every include/uapi/rdma/<driver>-abi.h: plain structs
 * of __u32/__aligned_u64 and nothing but <linux/types.h>.
 *
 * How it evolves (Documentation/vrnic-spec.rst, "User ABI"):
 * - A struct only grows at its end, by whole 8-byte words; fields are
 *   never moved, resized or given a new meaning.  A reserved field the
 *   kernel always wrote as zero may be named once (zero keeps meaning
 *   "nothing more").
 * - The kernel zero-extends a shorter request and refuses a longer one
 *   whose unknown trailing bytes are not zero (EOPNOTSUPP); so does every
 *   verb that takes no request of its own.  Reserved fields must be zero
 *   (EINVAL).
 * - The kernel writes at most the response length the provider gave.
 *   Every field below is part of VRNIC_UVERBS_ABI_VERSION 1 and always
 *   written; a field added later is covered by a bit of the response's
 *   comp_mask, and a provider reads it only when that bit is set.
 * - Optional behaviour is asked for with a comp_mask bit of the ucontext
 *   request and granted with the same bit in the response; the kernel
 *   refuses (EOPNOTSUPP) a request bit it does not know.
 * - Ring geometry is the kernel's answer: the provider proposes depths
 *   and WQE strides in the create request and sizes its rings by them;
 *   the kernel checks the proposal and answers what it programmed into
 *   the device.  The provider checks that the answer fits its rings
 *   (else destroys the object and fails) and from then on uses only the
 *   answer.
 * - VRNIC_UVERBS_ABI_VERSION changes only for an incompatible break.
 */
#ifndef VRNIC_ABI_USER_H
#define VRNIC_ABI_USER_H

#include <linux/types.h>

#define VRNIC_UVERBS_ABI_VERSION 1

/*
 * The driver ID (ib_device_ops.driver_id, reported over netlink) that the
 * provider matches before the PCI ID.  The kernel and rdma-core series
 * (make patches) add RDMA_DRIVER_VRNIC to enum rdma_driver_id in
 * <rdma/ib_user_ioctl_verbs.h> and drop this block.  Against headers
 * without it (Linux 6.12, rdma-core 56.1) this out-of-tree value stands
 * in: one that no upstream driver uses, so the provider never claims
 * another driver's device.
 */
#ifndef VRNIC_HAVE_RDMA_DRIVER_VRNIC
#define RDMA_DRIVER_VRNIC 0x100
#endif

/* ibv_open_device: no optional behaviour is defined yet. */
enum vrnic_alloc_ucontext_req_mask {
	VRNIC_ALLOC_UCTX_REQ_MASK_ALL = 0,
};

struct vrnic_alloc_ucontext_req {
	__u32 comp_mask;		/* enum vrnic_alloc_ucontext_req_mask */
	__u32 reserved;			/* 0 */
};

enum vrnic_alloc_ucontext_resp_mask {
	/* ece_options is valid; modify_qp takes struct vrnic_modify_qp_cmd */
	VRNIC_ALLOC_UCTX_RESP_ECE = 1 << 0,
	/*
	 * modify_qp takes VRNIC_MODIFY_QP_CMD_TRANSPORT (vrnicdv) up to
	 * max_send_window and max_spray_paths
	 */
	VRNIC_ALLOC_UCTX_RESP_TRANSPORT = 1 << 1,
	VRNIC_ALLOC_UCTX_RESP_MASK_ALL = VRNIC_ALLOC_UCTX_RESP_ECE |
					 VRNIC_ALLOC_UCTX_RESP_TRANSPORT,
};

/*
 * ECE (ibv_set_ece, ibv_query_ece, rdma_cm's REQ and REP): the options
 * word of vendor VRNIC's PCI vendor ID follows the convention UCX uses
 * for mlx5, a version in the top four bits and feature bits below.
 * Version 2 defines bit 0, selective repeat (device spec, "Selective
 * repeat").  Two ends agree on the bits both offer, at the lower version.
 */
#define VRNIC_ECE_VERSION_SHIFT		28
#define VRNIC_ECE_VERSION_MASK		(0xfU << VRNIC_ECE_VERSION_SHIFT)
#define VRNIC_ECE_VERSION_SR		2
#define VRNIC_ECE_SELECTIVE_REPEAT	0x1U

struct vrnic_alloc_ucontext_resp {
	__aligned_u64 db_mmap_key;	/* mmap() offset of the doorbell page */
	__u32 db_page_index;		/* page of BAR2 owned by this context */
	__u32 db_page_size;
	__u32 reserved;			/* 0 */
	__u32 comp_mask;		/* enum vrnic_alloc_ucontext_resp_mask */
	/* VRNIC_ALLOC_UCTX_RESP_ECE: what this context's QPs offer */
	__u32 ece_options;
	__u32 reserved1;		/* 0 */
	/* VRNIC_ALLOC_UCTX_RESP_TRANSPORT: */
	__u16 max_send_window;		/* PSNs in flight */
	__u8 max_spray_paths;		/* UDP source ports */
	__u8 reserved2;			/* 0 */
	__u32 reserved3;		/* 0 */
};

/* ibv_create_cq: the CQE ring and the doorbell record live in user memory. */
struct vrnic_create_cq_cmd {
	__aligned_u64 buf_addr;		/* 4 KiB aligned, 32 << log_depth bytes */
	__aligned_u64 dbrec_addr;	/* struct vrnic_cq_dbrec, 8-byte aligned */
	__u32 log_depth;
	__u32 reserved;			/* 0 */
};

enum vrnic_create_cq_resp_mask {
	VRNIC_CREATE_CQ_RESP_MASK_ALL = 0,
};

struct vrnic_create_cq_resp {
	__u32 cqn;
	__u32 comp_mask;		/* enum vrnic_create_cq_resp_mask */
	__u32 log_depth;		/* 1 << log_depth CQEs, all usable */
	__u32 cqe_size;			/* bytes per CQE (32) */
};

/* ibv_create_qp (RC): rings and doorbell record in user memory. */
struct vrnic_create_qp_cmd {
	__aligned_u64 sq_addr;		/* 4 KiB aligned, 1 << (log + shift) */
	__aligned_u64 rq_addr;
	__aligned_u64 dbrec_addr;	/* struct vrnic_qp_dbrec */
	__u32 sq_log_depth;
	__u32 rq_log_depth;
	__u32 sq_wqe_shift;
	__u32 rq_wqe_shift;
};

enum vrnic_create_qp_resp_mask {
	VRNIC_CREATE_QP_RESP_MASK_ALL = 0,
};

struct vrnic_create_qp_resp {
	__u32 qpn;
	__u32 comp_mask;		/* enum vrnic_create_qp_resp_mask */
	__u32 sq_log_depth;		/* RQ fields: 0 without an RQ */
	__u32 rq_log_depth;
	__u32 sq_wqe_shift;		/* SQ stride: 1 << sq_wqe_shift bytes */
	__u32 rq_wqe_shift;
	__u32 max_send_sge;
	__u32 max_recv_sge;
	__u32 max_inline;		/* bytes of inline data per send WQE */
	__u32 reserved;			/* 0 */
};

/* ibv_create_srq: the WQE ring and the doorbell record in user memory. */
struct vrnic_create_srq_cmd {
	__aligned_u64 buf_addr;		/* 4 KiB aligned, 1 << (log + shift) */
	__aligned_u64 dbrec_addr;	/* struct vrnic_srq_dbrec */
	__u32 log_depth;
	__u32 wqe_shift;
};

enum vrnic_create_srq_resp_mask {
	VRNIC_CREATE_SRQ_RESP_MASK_ALL = 0,
};

struct vrnic_create_srq_resp {
	__u32 srqn;
	__u32 comp_mask;		/* enum vrnic_create_srq_resp_mask */
	__u32 log_depth;
	__u32 wqe_shift;		/* stride: 1 << wqe_shift bytes */
	__u32 max_sge;
	__u32 reserved;			/* 0 */
};

/*
 * ibv_modify_qp, once the context's response granted
 * VRNIC_ALLOC_UCTX_RESP_ECE: the ECE options the QP's peer agreed to
 * (ibv_set_ece).  Once it granted VRNIC_ALLOC_UCTX_RESP_TRANSPORT: the
 * QP's own transport settings (vrnicdv_set_qp_transport), which take the
 * place of the device defaults and of what ECE agreed.  Both take effect
 * when a reliable QP moves from INIT to RTR, and only then may they be
 * passed.
 */
enum vrnic_modify_qp_cmd_mask {
	VRNIC_MODIFY_QP_CMD_ECE = 1 << 0,	/* ece_options is valid */
	/* transport_flags, send_window and spray_paths are valid */
	VRNIC_MODIFY_QP_CMD_TRANSPORT = 1 << 1,
	VRNIC_MODIFY_QP_CMD_MASK_ALL = VRNIC_MODIFY_QP_CMD_ECE |
				       VRNIC_MODIFY_QP_CMD_TRANSPORT,
};

enum vrnic_modify_qp_transport_flags {
	/* SACKs and hole resends; the peer must do the same */
	VRNIC_MODIFY_QP_TRANSPORT_SR = 1 << 0,
	VRNIC_MODIFY_QP_TRANSPORT_ALL = VRNIC_MODIFY_QP_TRANSPORT_SR,
};

struct vrnic_modify_qp_cmd {
	__u32 comp_mask;		/* enum vrnic_modify_qp_cmd_mask */
	__u32 ece_options;
	/* VRNIC_MODIFY_QP_CMD_TRANSPORT: */
	__u32 transport_flags;		/* vrnic_modify_qp_transport_flags */
	__u16 send_window;		/* PSNs in flight, 0: max_send_window */
	__u8 spray_paths;		/* UDP source ports, 0 or 1: one */
	__u8 reserved;			/* 0 */
};

/*
 * ibv_create_ah: the kernel resolves the destination MAC, which user space
 * cannot; the provider builds the device's address vector (struct
 * vrnic_ud_av of the device spec) from the AH attributes and this MAC.
 * The source is named by GID table index only: the device takes the
 * source GID, MAC and VLAN from the table the kernel programs.
 */
enum vrnic_create_ah_resp_mask {
	VRNIC_CREATE_AH_RESP_MASK_ALL = 0,
};

struct vrnic_create_ah_resp {
	__u32 comp_mask;		/* enum vrnic_create_ah_resp_mask */
	__u8 dmac[6];
	__u8 reserved[6];		/* 0 */
};

#endif /* VRNIC_ABI_USER_H */

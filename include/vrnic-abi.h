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
 *   kernel always wrote as zero may be named once (a response's comp_mask:
 *   zero still means "nothing more").
 * - The kernel zero-extends a shorter request (an older provider) and
 *   refuses a longer one whose unknown trailing bytes are not zero
 *   (EOPNOTSUPP).  Reserved fields must be zero (EINVAL).
 * - The kernel writes at most the response length the provider gave; a
 *   provider reads only what the kernel's comp_mask says it wrote, beyond
 *   the fields of VRNIC_UVERBS_ABI_VERSION 1.
 * - Optional behaviour is asked for with a comp_mask bit of the ucontext
 *   request and granted with the same bit in the response; the kernel
 *   refuses (EOPNOTSUPP) a request bit it does not know.
 * - Ring geometry and capabilities are the kernel's answer.  The provider
 *   proposes a geometry (depths, WQE strides) in the create request and
 *   sizes its rings by it; the kernel checks it and answers, with a
 *   GEOMETRY bit in the response comp_mask, the depths, strides and
 *   SGE/inline limits it programmed into the device.  The provider checks
 *   that the answer fits its rings (else destroys the object and fails)
 *   and from then on indexes, reports caps and checks posts by the
 *   answer only.  Without the bit (an older kernel) it falls back to its
 *   proposal, which such a kernel programmed unchanged.
 * - VRNIC_UVERBS_ABI_VERSION changes only for an incompatible break.
 */
#ifndef VRNIC_ABI_USER_H
#define VRNIC_ABI_USER_H

#include <linux/types.h>

#define VRNIC_UVERBS_ABI_VERSION 1

/* ibv_open_device: no optional behaviour is defined yet. */
enum vrnic_alloc_ucontext_req_mask {
	VRNIC_ALLOC_UCTX_REQ_MASK_ALL = 0,
};

struct vrnic_alloc_ucontext_req {
	__u32 comp_mask;		/* enum vrnic_alloc_ucontext_req_mask */
	__u32 reserved;			/* 0 */
};

enum vrnic_alloc_ucontext_resp_mask {
	VRNIC_ALLOC_UCTX_RESP_MASK_ALL = 0,
};

struct vrnic_alloc_ucontext_resp {
	__aligned_u64 db_mmap_key;	/* mmap() offset of the doorbell page */
	__u32 db_page_index;		/* page of BAR2 owned by this context */
	__u32 db_page_size;
	__u32 spec_version;		/* device spec: major << 16 | minor */
	__u32 comp_mask;		/* enum vrnic_alloc_ucontext_resp_mask */
};

/* ibv_create_cq: the CQE ring and the doorbell record live in user memory. */
struct vrnic_create_cq_cmd {
	__aligned_u64 buf_addr;		/* 4 KiB aligned, 32 << log_depth bytes */
	__aligned_u64 dbrec_addr;	/* struct vrnic_cq_dbrec, 8-byte aligned */
	__u32 log_depth;
	__u32 reserved;			/* 0 */
};

enum vrnic_create_cq_resp_mask {
	/* log_depth and cqe_size are valid */
	VRNIC_CREATE_CQ_RESP_MASK_GEOMETRY = 1 << 0,
};

struct vrnic_create_cq_resp {
	__u32 cqn;
	__u32 comp_mask;		/* enum vrnic_create_cq_resp_mask */
	/* VRNIC_CREATE_CQ_RESP_MASK_GEOMETRY: */
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
	/* the geometry and limit fields below are valid */
	VRNIC_CREATE_QP_RESP_MASK_GEOMETRY = 1 << 0,
};

struct vrnic_create_qp_resp {
	__u32 qpn;
	__u32 comp_mask;		/* enum vrnic_create_qp_resp_mask */
	/* VRNIC_CREATE_QP_RESP_MASK_GEOMETRY (RQ fields: 0 without an RQ): */
	__u32 sq_log_depth;
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
	/* log_depth, wqe_shift and max_sge are valid */
	VRNIC_CREATE_SRQ_RESP_MASK_GEOMETRY = 1 << 0,
};

struct vrnic_create_srq_resp {
	__u32 srqn;
	__u32 comp_mask;		/* enum vrnic_create_srq_resp_mask */
	/* VRNIC_CREATE_SRQ_RESP_MASK_GEOMETRY: */
	__u32 log_depth;
	__u32 wqe_shift;		/* stride: 1 << wqe_shift bytes */
	__u32 max_sge;
	__u32 reserved;			/* 0 */
};

/*
 * ibv_create_ah: the kernel resolves the destination MAC and returns the
 * whole address vector (struct vrnic_ud_av of the device spec), which the
 * provider copies into each UD WQE.  Since spec 0.6 it names its source
 * only by GID table index: the device takes the source GID, MAC and VLAN
 * from the table the kernel programs, so a process cannot choose them.
 */
struct vrnic_create_ah_resp {
	__u8 av[64];
};

#endif /* VRNIC_ABI_USER_H */

/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * vrnic user/kernel ABI: the private data that travels with uverbs
 * commands between the vrnic kernel driver and the rdma-core provider.
 * Plain structs of __u32/__aligned_u64, as every rdma/<driver>-abi.h.
 */
#ifndef VRNIC_ABI_USER_H
#define VRNIC_ABI_USER_H

#include <linux/types.h>

#define VRNIC_UVERBS_ABI_VERSION 1

struct vrnic_alloc_ucontext_resp {
	__aligned_u64 db_mmap_key;	/* mmap() offset of the doorbell page */
	__u32 db_page_index;		/* page of BAR2 owned by this context */
	__u32 db_page_size;
	__u32 spec_version;		/* VRNIC_SPEC_VERSION of the device */
	__u32 reserved;
};

/* ibv_create_cq: the CQE ring and the doorbell record live in user memory. */
struct vrnic_create_cq_cmd {
	__aligned_u64 buf_addr;		/* 4 KiB aligned, 32 << log_depth bytes */
	__aligned_u64 dbrec_addr;	/* struct vrnic_cq_dbrec, 8-byte aligned */
	__u32 log_depth;
	__u32 reserved;
};

struct vrnic_create_cq_resp {
	__u32 cqn;
	__u32 reserved;
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

struct vrnic_create_qp_resp {
	__u32 qpn;
	__u32 reserved;
};

/* ibv_create_srq: the WQE ring and the doorbell record in user memory. */
struct vrnic_create_srq_cmd {
	__aligned_u64 buf_addr;		/* 4 KiB aligned, 1 << (log + shift) */
	__aligned_u64 dbrec_addr;	/* struct vrnic_srq_dbrec */
	__u32 log_depth;
	__u32 wqe_shift;
};

struct vrnic_create_srq_resp {
	__u32 srqn;
	__u32 reserved;
};

/*
 * ibv_create_ah: the kernel resolves the destination MAC and returns the
 * whole address vector (struct vrnic_ud_av of vrnic_hw.h); the provider
 * copies it into each UD WQE.  Since spec 0.6 it names its source only
 * by GID table index: the device takes the source GID, MAC and VLAN from
 * the table the kernel programs, so a process cannot choose them.
 */
struct vrnic_create_ah_resp {
	__u8 av[64];
};

#endif /* VRNIC_ABI_USER_H */

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

#endif /* VRNIC_ABI_USER_H */

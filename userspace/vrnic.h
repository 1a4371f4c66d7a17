/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic rdma-core provider.
 */
#ifndef __VRNIC_H__
#define __VRNIC_H__

#include <infiniband/driver.h>

struct vrnic_device {
	struct verbs_device ibv_dev;
};

struct vrnic_context {
	struct verbs_context ibv_ctx;
	void *db_page;		/* this context's doorbell page (BAR2) */
	uint32_t db_page_index;
	uint32_t db_page_size;
	uint32_t spec_version;
};

static inline struct vrnic_context *to_vctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct vrnic_context, ibv_ctx.context);
}

#endif /* __VRNIC_H__ */

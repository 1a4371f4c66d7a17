// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic rdma-core provider: matches the vrnic PCI function, opens a user
 * context and maps the doorbell page the kernel handed to it, so that the
 * data path can ring doorbells without a system call.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/driver.h>

#include "vrnic.h"
#include "vrnic_abi.h"

static int vrnic_query_device_ex(struct ibv_context *ctx,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr,
				 size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);

	return ibv_cmd_query_device_any(ctx, input, attr, attr_size, &resp,
					&resp_size);
}

static int vrnic_query_port(struct ibv_context *ctx, uint8_t port,
			    struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(ctx, port, attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *vrnic_alloc_pd(struct ibv_context *ctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct ibv_pd *pd;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;
	if (ibv_cmd_alloc_pd(ctx, pd, &cmd, sizeof(cmd), &resp, sizeof(resp))) {
		free(pd);
		return NULL;
	}
	return pd;
}

static int vrnic_dealloc_pd(struct ibv_pd *pd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(pd);
	if (ret)
		return ret;
	free(pd);
	return 0;
}

static void vrnic_free_context(struct ibv_context *ibctx)
{
	struct vrnic_context *ctx = to_vctx(ibctx);
	unsigned int i;

	if (ctx->db_page)
		munmap(ctx->db_page, ctx->db_page_size);
	for (i = 0; i < VRNIC_QP_TABLE_PAGES; i++)
		free(ctx->qp_table[i]);
	pthread_mutex_destroy(&ctx->qp_table_mutex);
	pthread_mutex_destroy(&ctx->dbrec_mutex);
	verbs_uninit_context(&ctx->ibv_ctx);	/* closes the command file */
	vrnic_dbrec_pool_free(ctx);
	free(ctx);
}

static const struct verbs_context_ops vrnic_ctx_ops = {
	.alloc_mw = vrnic_alloc_mw,
	.alloc_pd = vrnic_alloc_pd,
	.bind_mw = vrnic_bind_mw,
	.attach_mcast = ibv_cmd_attach_mcast,
	.close_xrcd = vrnic_close_xrcd,
	.create_ah = vrnic_create_ah,
	.create_cq = vrnic_create_cq,
	.create_cq_ex = vrnic_create_cq_ex,
	.create_qp = vrnic_create_qp,
	.create_qp_ex = vrnic_create_qp_ex,
	.create_srq = vrnic_create_srq,
	.create_srq_ex = vrnic_create_srq_ex,
	.dealloc_mw = vrnic_dealloc_mw,
	.dealloc_pd = vrnic_dealloc_pd,
	.dereg_mr = vrnic_dereg_mr,
	.destroy_ah = vrnic_destroy_ah,
	.destroy_cq = vrnic_destroy_cq,
	.destroy_qp = vrnic_destroy_qp,
	.destroy_srq = vrnic_destroy_srq,
	.detach_mcast = ibv_cmd_detach_mcast,
	.free_context = vrnic_free_context,
	.get_srq_num = vrnic_get_srq_num,
	.modify_qp = vrnic_modify_qp,
	.modify_srq = vrnic_modify_srq,
	.open_qp = vrnic_open_qp,
	.open_xrcd = vrnic_open_xrcd,
	.poll_cq = vrnic_poll_cq,
	.post_recv = vrnic_post_recv,
	.post_send = vrnic_post_send,
	.post_srq_recv = vrnic_post_srq_recv,
	.query_device_ex = vrnic_query_device_ex,
	.query_ece = vrnic_query_ece,
	.query_port = vrnic_query_port,
	.query_qp = vrnic_query_qp,
	.query_srq = vrnic_query_srq,
	.reg_mr = vrnic_reg_mr,
	.req_notify_cq = vrnic_req_notify_cq,
	.set_ece = vrnic_set_ece,
};

static struct verbs_context *vrnic_alloc_context(struct ibv_device *ibdev,
						 int cmd_fd,
						 void *private_data)
{
	struct uvrnic_alloc_ucontext_resp resp = {};
	struct uvrnic_alloc_ucontext cmd = {};	/* comp_mask: nothing asked */
	struct vrnic_context *ctx;
	int ret;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   RDMA_DRIVER_VRNIC);
	if (!ctx)
		return NULL;
	list_head_init(&ctx->dbrec_pages);

	/*
	 * The device's doorbell pages and ring pages are 4 KiB and it cannot
	 * be told another size (spec, "Doorbells"), as the kernel driver's
	 * Kconfig says.
	 */
	if (sysconf(_SC_PAGESIZE) != VRNIC_DB_PAGE_SIZE) {
		verbs_err(&ctx->ibv_ctx,
			  "vrnic: %ld-byte pages; the device needs 4096\n",
			  sysconf(_SC_PAGESIZE));
		errno = EOPNOTSUPP;
		goto err_free;
	}

	if (ibv_cmd_get_context(&ctx->ibv_ctx, &cmd.ibv_cmd, sizeof(cmd),
				&resp.ibv_resp, sizeof(resp)))
		goto err_free;

	if (resp.db_page_size != VRNIC_DB_PAGE_SIZE) {
		verbs_err(&ctx->ibv_ctx,
			  "vrnic: unsupported doorbell page size %u\n",
			  resp.db_page_size);
		errno = EOPNOTSUPP;
		goto err_free;
	}
	ctx->db_page_size = resp.db_page_size;
	if (resp.comp_mask & VRNIC_ALLOC_UCTX_RESP_ECE) {
		ctx->has_ece = true;
		ctx->ece_offer = resp.ece_options;
	}
	if (resp.comp_mask & VRNIC_ALLOC_UCTX_RESP_TRANSPORT) {
		ctx->has_transport = true;
		ctx->max_send_window = resp.max_send_window;
		ctx->max_spray_paths = resp.max_spray_paths;
	}
	ctx->db_page = mmap(NULL, ctx->db_page_size, PROT_WRITE, MAP_SHARED,
			    cmd_fd, resp.db_mmap_key);
	if (ctx->db_page == MAP_FAILED) {
		ctx->db_page = NULL;
		goto err_free;
	}

	ret = pthread_mutex_init(&ctx->qp_table_mutex, NULL);
	if (ret)
		goto err_unmap;
	ret = pthread_mutex_init(&ctx->dbrec_mutex, NULL);
	if (ret) {
		pthread_mutex_destroy(&ctx->qp_table_mutex);
		goto err_unmap;
	}
	verbs_set_ops(&ctx->ibv_ctx, &vrnic_ctx_ops);
	return &ctx->ibv_ctx;

err_unmap:
	munmap(ctx->db_page, ctx->db_page_size);
	errno = ret;	/* pthread_mutex_init() does not set it */
err_free:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	return NULL;
}

static struct verbs_device *vrnic_device_alloc(struct verbs_sysfs_dev *sdev)
{
	struct vrnic_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->ibv_dev;
}

static void vrnic_device_free(struct verbs_device *vdev)
{
	free(container_of(vdev, struct vrnic_device, ibv_dev));
}

/* The driver ID first, the PCI ID for a kernel that reports none. */
static const struct verbs_match_ent vrnic_match_table[] = {
	VERBS_DRIVER_ID(RDMA_DRIVER_VRNIC),
	VERBS_PCI_MATCH(VRNIC_PCI_VENDOR_ID, VRNIC_PCI_DEVICE_ID, NULL),
	{},
};

static const struct verbs_device_ops vrnic_dev_ops = {
	.name = "vrnic",
	.match_min_abi_version = VRNIC_UVERBS_ABI_VERSION,
	.match_max_abi_version = VRNIC_UVERBS_ABI_VERSION,
	.match_table = vrnic_match_table,
	.alloc_device = vrnic_device_alloc,
	.uninit_device = vrnic_device_free,
	.alloc_context = vrnic_alloc_context,
};

bool vrnic_is_dev(struct ibv_device *device)
{
	return verbs_get_device(device)->ops == &vrnic_dev_ops;
}

PROVIDER_DRIVER(vrnic, vrnic_dev_ops);

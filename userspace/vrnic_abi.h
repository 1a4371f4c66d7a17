/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic provider: the uverbs commands that carry vrnic's private data.
 */
#ifndef __VRNIC_ABI_H__
#define __VRNIC_ABI_H__

#include <infiniband/kern-abi.h>
#include <rdma/vrnic-abi.h>
#include <kernel-abi/vrnic-abi.h>

DECLARE_DRV_CMD(uvrnic_alloc_ucontext, IB_USER_VERBS_CMD_GET_CONTEXT,
		vrnic_alloc_ucontext_req, vrnic_alloc_ucontext_resp);
DECLARE_DRV_CMD(uvrnic_create_cq, IB_USER_VERBS_CMD_CREATE_CQ,
		vrnic_create_cq_cmd, vrnic_create_cq_resp);
DECLARE_DRV_CMD(uvrnic_create_cq_ex, IB_USER_VERBS_EX_CMD_CREATE_CQ,
		vrnic_create_cq_cmd, vrnic_create_cq_resp);
DECLARE_DRV_CMD(uvrnic_create_qp, IB_USER_VERBS_CMD_CREATE_QP,
		vrnic_create_qp_cmd, vrnic_create_qp_resp);
DECLARE_DRV_CMD(uvrnic_modify_qp_ex, IB_USER_VERBS_EX_CMD_MODIFY_QP,
		vrnic_modify_qp_cmd, empty);
DECLARE_DRV_CMD(uvrnic_create_ah, IB_USER_VERBS_CMD_CREATE_AH,
		empty, vrnic_create_ah_resp);
DECLARE_DRV_CMD(uvrnic_create_srq, IB_USER_VERBS_CMD_CREATE_SRQ,
		vrnic_create_srq_cmd, vrnic_create_srq_resp);
DECLARE_DRV_CMD(uvrnic_create_xsrq, IB_USER_VERBS_CMD_CREATE_XSRQ,
		vrnic_create_srq_cmd, vrnic_create_srq_resp);

#endif /* __VRNIC_ABI_H__ */

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic direct verbs (vrnicdv.h, vrnicdv(7)): a reliable QP's own
 * transport settings, which the kernel takes with its move to RTR.
 */
#include <errno.h>
#include <stdatomic.h>

#include <infiniband/driver.h>

#include "vrnic.h"
#include "vrnic_abi.h"
#include "vrnicdv.h"

bool vrnicdv_is_supported(struct ibv_device *device)
{
	return vrnic_is_dev(device);
}

int vrnicdv_set_qp_transport(struct ibv_qp *ibqp,
			     const struct vrnicdv_qp_transport *attr)
{
	struct vrnic_context *ctx;
	struct vrnic_qp *qp;
	unsigned int state;

	if (!vrnic_is_dev(ibqp->context->device))
		return EOPNOTSUPP;
	ctx = to_vctx(ibqp->context);
	qp = to_vqp(ibqp);
	if (attr && attr->comp_mask)
		return EOPNOTSUPP;
	if (qp->type != VRNIC_QPT_RC && qp->type != VRNIC_QPT_XRC_INI &&
	    qp->type != VRNIC_QPT_XRC_TGT)
		return EINVAL;
	state = atomic_load(&qp->state);
	if (state != IBV_QPS_RESET && state != IBV_QPS_INIT)
		return EINVAL;
	if (!attr) {
		qp->dv_transport = false;
		return 0;
	}
	if (attr->flags & ~(uint32_t)VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT ||
	    attr->reserved)
		return EINVAL;
	if (!ctx->has_transport)
		return EOPNOTSUPP;
	if (attr->send_window > ctx->max_send_window ||
	    attr->spray_paths > ctx->max_spray_paths ||
	    (attr->spray_paths > 1 &&
	     !(attr->flags & VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT)))
		return EINVAL;
	qp->transport_flags = attr->flags &
			      VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT ?
			      VRNIC_MODIFY_QP_TRANSPORT_SR : 0;
	qp->send_window = attr->send_window;
	qp->spray_paths = attr->spray_paths;
	qp->dv_transport = true;
	return 0;
}

// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * vrnic provider verbs that go through the kernel only: memory regions
 * and windows, address handles, XRC domains.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/driver.h>

#include "vrnic.h"
#include "vrnic_abi.h"

/* ------------------------------------------------------------------ MR */

struct ibv_mr *vrnic_reg_mr(struct ibv_pd *pd, void *addr, size_t len,
			    uint64_t hca_va, int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;
	if (ibv_cmd_reg_mr(pd, addr, len, hca_va, access, vmr, &cmd,
			   sizeof(cmd), &resp, sizeof(resp))) {
		free(vmr);
		return NULL;
	}
	return &vmr->ibv_mr;
}

int vrnic_dereg_mr(struct verbs_mr *vmr)
{
	int ret = ibv_cmd_dereg_mr(vmr);

	if (ret)
		return ret;
	free(vmr);
	return 0;
}

struct ibv_mw *vrnic_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp = {};
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;
	if (ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			     sizeof(resp))) {
		free(mw);
		return NULL;
	}
	return mw;
}

int vrnic_dealloc_mw(struct ibv_mw *mw)
{
	int ret = ibv_cmd_dealloc_mw(mw);

	if (ret)
		return ret;
	free(mw);
	return 0;
}

/* ------------------------------------------------------------------ AH */

/*
 * The device has no AH objects; the kernel resolves the destination MAC
 * once, and the address vector built from it and the attributes goes into
 * every UD WQE.  The vector names its source by GID table index only: the
 * device takes the source GID, MAC and VLAN from the table the kernel
 * programs, so nothing a process writes can choose its source address.
 */
struct ibv_ah *vrnic_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct uvrnic_create_ah_resp resp = {};
	struct vrnic_ah *ah;
	uint32_t fl;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;
	if (ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
			      sizeof(resp))) {
		free(ah);
		return NULL;
	}
	memcpy(ah->av.dgid, attr->grh.dgid.raw, sizeof(ah->av.dgid));
	ah->av.sgid_index = attr->grh.sgid_index;
	memcpy(ah->av.dmac, resp.dmac, sizeof(ah->av.dmac));
	ah->av.traffic_class = attr->grh.traffic_class;
	ah->av.hop_limit = attr->grh.hop_limit;
	fl = attr->grh.flow_label;
	ah->av.flow_label = htole32(fl);
	if (fl)
		ah->av.udp_sport = htole16(ibv_flow_label_to_udp_sport(fl));
	return &ah->ibv_ah;
}

int vrnic_destroy_ah(struct ibv_ah *ibah)
{
	int ret = ibv_cmd_destroy_ah(ibah);

	if (ret)
		return ret;
	free(to_vah(ibah));
	return 0;
}

/* ---------------------------------------------------------------- XRCD */

struct ibv_xrcd *vrnic_open_xrcd(struct ibv_context *ctx,
				 struct ibv_xrcd_init_attr *attr)
{
	struct ib_uverbs_open_xrcd_resp resp = {};
	struct ibv_open_xrcd cmd = {};
	struct verbs_xrcd *xrcd;

	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd)
		return NULL;
	if (ibv_cmd_open_xrcd(ctx, xrcd, sizeof(*xrcd), attr, &cmd, sizeof(cmd),
			      &resp, sizeof(resp))) {
		free(xrcd);
		return NULL;
	}
	return &xrcd->xrcd;
}

int vrnic_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct verbs_xrcd *xrcd = container_of(ibxrcd, struct verbs_xrcd, xrcd);
	int ret = ibv_cmd_close_xrcd(xrcd);

	if (ret)
		return ret;
	free(xrcd);
	return 0;
}

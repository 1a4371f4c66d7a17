/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * vrnic direct verbs: what standard verbs cannot say to a vrnic device.
 * See vrnicdv(7).
 */
#ifndef _VRNIC_DV_H_
#define _VRNIC_DV_H_

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Whether device is a vrnic device (its calls may still be refused). */
bool vrnicdv_is_supported(struct ibv_device *device);

enum vrnicdv_qp_transport_flags {
	/*
	 * Selective repeat (SACKs, hole resends) instead of go-back-N: the
	 * peer must use it too.
	 */
	VRNICDV_QP_TRANSPORT_SELECTIVE_REPEAT = 1 << 0,
};

struct vrnicdv_qp_transport {
	uint64_t comp_mask;	/* no optional field is defined: 0 */
	uint32_t flags;		/* enum vrnicdv_qp_transport_flags */
	/* request PSNs in flight at most, 0: the most the device takes */
	uint16_t send_window;
	/*
	 * UDP source ports the QP's requests spread over (0 or 1: one);
	 * more than 1 needs selective repeat.
	 */
	uint8_t spray_paths;
	uint8_t reserved;	/* 0 */
};

/*
 * A reliable QP's own transport, in place of the device's defaults and
 * of what ECE agreed, taken at its moves from INIT to RTR; attr NULL
 * gives the QP back to those.  Call it in RESET or INIT, never while
 * another thread modifies the QP.  Returns 0 or an errno value.
 */
int vrnicdv_set_qp_transport(struct ibv_qp *qp,
			     const struct vrnicdv_qp_transport *attr);

#ifdef __cplusplus
}
#endif

#endif /* _VRNIC_DV_H_ */

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* tests/provider: the stubbed device, kernel and libibverbs (stub.c). */
#ifndef VRNIC_TEST_STUB_H
#define VRNIC_TEST_STUB_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>
#include <infiniband/kern-abi.h>
#include <rdma/vrnic-abi.h>

#include "vrnic_hw.h"

/* Open the vrnic provider on the stub kernel (one context at a time). */
struct ibv_context *stub_open_device(void);

/*
 * Device: write completion cqe (all but the phase bit) into CQ cqn's ring,
 * as the device does.  0, ENOSPC when the ring is full, ENOENT: no such CQ.
 * Only while nobody polls that CQ: DMA is invisible to ThreadSanitizer,
 * these writes are not.
 */
int stub_dev_cqe(uint32_t cqn, const struct vrnic_cqe *cqe);

/* Device: qp goes to ERR (ibv_query_qp() reports it from now on). */
void stub_dev_qp_error(struct ibv_qp *qp);

/* ibv_get_async_event() returning event type on qp (the kernel's). */
void stub_async_event(struct ibv_qp *qp, enum ibv_event_type type);

/*
 * A test may rewrite the kernel's answers to create CQ/QP/SRQ (computed as
 * kernel/ib does) before they reach the provider: a hostile or buggy
 * kernel.  Each hook gets the whole driver response and, for QP and SRQ,
 * the common response whose caps libibverbs hands on.  The stub then
 * copies min(outlen, sizeof) bytes of the driver response, as
 * ib_copy_to_udata().  NULL hooks: the honest answer.
 */
struct stub_answer {
	void (*cq)(struct vrnic_create_cq_resp *resp, void *arg);
	void (*qp)(struct vrnic_create_qp_resp *resp,
		   struct ib_uverbs_create_qp_resp *common, void *arg);
	void (*srq)(struct vrnic_create_srq_resp *resp,
		    struct ib_uverbs_create_srq_resp *common, void *arg);
	void *arg;
};

/* From now on answer so (NULL: honestly).  Not while other threads create. */
void stub_set_answer(const struct stub_answer *answer);

/*
 * libibverbs' ibv_dontfork_range(): the nth call from now on (1: the next)
 * and every one after it fails, returning -1 with errno set to err (err 0:
 * errno left alone).  nth 0: none fails.  stub_dontfork_ranges(): ranges
 * protected now (ibv_dontfork_range() calls less ibv_dofork_range() ones).
 */
void stub_fail_dontfork(unsigned int nth, int err);
long stub_dontfork_ranges(void);

/* Extended modify_qp commands (with the driver's ECE request) so far. */
long stub_modify_qp_ex_calls(void);

enum stub_obj { STUB_CQ, STUB_QP, STUB_SRQ, STUB_NOBJ };

/* Objects of kind the kernel holds now; destroy commands it got so far. */
unsigned int stub_live(enum stub_obj kind);
unsigned long stub_destroys(enum stub_obj kind);

#endif

/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/* tests/provider: the stubbed device, kernel and libibverbs (stub.c). */
#ifndef VRNIC_TEST_STUB_H
#define VRNIC_TEST_STUB_H

#include <stdint.h>
#include <infiniband/verbs.h>

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

/* ibv_get_async_event() returning event type on qp (the kernel's). */
void stub_async_event(struct ibv_qp *qp, enum ibv_event_type type);

#endif

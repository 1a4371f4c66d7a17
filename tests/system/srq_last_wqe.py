#!/usr/bin/python3
"""Runs in a guest: an RC QP that takes its receives from an SRQ is moved
to ERR; the device must then report IBV_EVENT_QP_LAST_WQE_REACHED for
it, through the kernel's async event path.  pyverbs' get_async_event()
blocks: the caller bounds the wait (timeout)."""

import sys

import pyverbs.enums as e
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.srq import SRQ, SrqAttr, SrqInitAttr

ctx = Context(name=sys.argv[1] if len(sys.argv) > 1 else "vrnic0")
pd = PD(ctx)
cq = CQ(ctx, 16)
srq = SRQ(pd, SrqInitAttr(SrqAttr(max_wr=16)))
cap = QPCap(max_send_wr=4, max_recv_wr=0, max_recv_sge=0)
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, srq=srq,
                       cap=cap), QPAttr(port_num=1))
qp.modify(QPAttr(qp_state=e.IBV_QPS_ERR), e.IBV_QP_STATE)
ev = ctx.get_async_event()
kind = ev.event_type
ev.ack()
if kind != e.IBV_EVENT_QP_LAST_WQE_REACHED:
    print("not ok: async event %d, expected LAST_WQE_REACHED" % kind)
    sys.exit(1)
print("ok: IBV_EVENT_QP_LAST_WQE_REACHED for QP 0x%x" % qp.qp_num)

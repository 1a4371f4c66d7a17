#!/usr/bin/python3
"""Runs in a guest: two RC QPs of one device connected to each other
(GID index 1, the IPv4 GID).  A QP posts a 1 MiB RDMA WRITE and at once
moves RTS -> SQD with en_sqd_async_notify: IBV_EVENT_SQ_DRAINED arrives
for it, the WRITE completes with its data, ibv_query_qp reports SQD and
sq_draining 0; then SQD -> RTS and a second WRITE completes.  pyverbs'
get_async_event() blocks: the caller bounds the wait (timeout)."""

import sys

import pyverbs.enums as e
from pyverbs.addr import AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, SendWR

SIZE = 1 << 20
ctx = Context(name=sys.argv[1] if len(sys.argv) > 1 else "vrnic0")
pd = PD(ctx)
cq = CQ(ctx, 16)
cap = QPCap(max_send_wr=8, max_recv_wr=8)
qa = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
qb = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq, cap=cap))
access = (e.IBV_ACCESS_LOCAL_WRITE | e.IBV_ACCESS_REMOTE_WRITE)
src = MR(pd, SIZE, access)
dst = MR(pd, SIZE, access)
gid = ctx.query_gid(1, 1)

for me, peer in ((qa, qb), (qb, qa)):
    a = QPAttr(qp_state=e.IBV_QPS_INIT, port_num=1)
    a.pkey_index = 0
    a.qp_access_flags = access
    me.modify(a, e.IBV_QP_STATE | e.IBV_QP_PKEY_INDEX | e.IBV_QP_PORT |
              e.IBV_QP_ACCESS_FLAGS)
    a = QPAttr(qp_state=e.IBV_QPS_RTR, path_mtu=e.IBV_MTU_1024)
    a.dest_qp_num = peer.qp_num
    a.rq_psn = 0
    a.max_dest_rd_atomic = 1
    a.min_rnr_timer = 12
    a.ah_attr = AHAttr(port_num=1, is_global=1,
                       gr=GlobalRoute(dgid=gid, sgid_index=1))
    me.modify(a, e.IBV_QP_STATE | e.IBV_QP_AV | e.IBV_QP_PATH_MTU |
              e.IBV_QP_DEST_QPN | e.IBV_QP_RQ_PSN |
              e.IBV_QP_MAX_DEST_RD_ATOMIC | e.IBV_QP_MIN_RNR_TIMER)
    a = QPAttr(qp_state=e.IBV_QPS_RTS)
    a.timeout = 14
    a.retry_cnt = 7
    a.rnr_retry = 7
    a.sq_psn = 0
    a.max_rd_atomic = 1
    me.modify(a, e.IBV_QP_STATE | e.IBV_QP_TIMEOUT | e.IBV_QP_RETRY_CNT |
              e.IBV_QP_RNR_RETRY | e.IBV_QP_SQ_PSN |
              e.IBV_QP_MAX_QP_RD_ATOMIC)


def write(seed):
    src.write(bytes((i * 7 + seed) & 0xff for i in range(256)) * (SIZE // 256),
              SIZE)
    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                sg=[SGE(src.buf, SIZE, src.lkey)])
    wr.set_wr_rdma(dst.rkey, dst.buf)
    qa.post_send(wr)


def completion():
    for _ in range(2000000):
        n, wcs = cq.poll()
        if n:
            return wcs[0].status
    return None


def fail(msg):
    print("not ok: " + msg)
    sys.exit(1)


write(1)
a = QPAttr(qp_state=e.IBV_QPS_SQD)
a.en_sqd_async_notify = 1
qa.modify(a, e.IBV_QP_STATE | e.IBV_QP_EN_SQD_ASYNC_NOTIFY)
ev = ctx.get_async_event()
kind = ev.event_type
ev.ack()
if kind != e.IBV_EVENT_SQ_DRAINED:
    fail("async event %d, expected SQ_DRAINED" % kind)
st = completion()
if st != e.IBV_WC_SUCCESS:
    fail("the WRITE begun before SQD completed with %s" % st)
if dst.read(SIZE, 0) != src.read(SIZE, 0):
    fail("the WRITE's data differs")
got, _ = qa.query(e.IBV_QP_STATE | e.IBV_QP_CUR_STATE)
if got.qp_state != e.IBV_QPS_SQD or got.sq_draining:
    fail("query: state %d, sq_draining %d" % (got.qp_state, got.sq_draining))
qa.modify(QPAttr(qp_state=e.IBV_QPS_RTS), e.IBV_QP_STATE)
write(2)
st = completion()
if st != e.IBV_WC_SUCCESS or dst.read(SIZE, 0) != src.read(SIZE, 0):
    fail("the WRITE after SQD -> RTS: status %s" % st)
print("ok: IBV_EVENT_SQ_DRAINED for QP 0x%x, its WRITE complete, "
      "sq_draining 0, RTS again" % qa.qp_num)

#!/usr/bin/python3
"""Runs in a guest: known workloads between QPs of one vrnic (the device
loops frames for its own MAC back to itself), each checked against the
exact counter deltas it must cause in `rdma statistic`.  Both ends are on this device, so each frame counts once as sent
and once as received.  Prints TAP; exits 1 if any case fails.

Frame sizes (RoCEv2 over IPv4, GID index 1): Ethernet 14 + IPv4 20 +
UDP 8 + BTH 12 + ICRC 4 = 58 bytes of headers; an ACK adds its AETH (4),
a first WRITE packet its RETH (16) and a UD SEND its DETH (8).
"""

import json
import subprocess
import sys
import time

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import RecvWR, SendWR, SGE

DEV = sys.argv[1] if len(sys.argv) > 1 else "vrnic0"
GIDX = 1                 # the IPv4-mapped RoCEv2 GID
HDR = 14 + 20 + 8 + 12 + 4
AETH, RETH, DETH = 4, 16, 8
QKEY = 0x11111111

ctx = Context(name=DEV)
pd = PD(ctx)
gid = ctx.query_gid(1, GIDX)
results = []


def counters():
    """One snapshot of all counters.  Not sysfs: each hw_counters file
    read may refresh ib_core's cache (10 ms lifespan) half way through a
    directory, mixing two moments; netlink asks the device once."""
    out = subprocess.run(["rdma", "-j", "statistic", "show", "link",
                          "%s/1" % DEV], check=True, capture_output=True,
                         text=True).stdout
    return {k: v for k, v in json.loads(out)[0].items()
            if isinstance(v, int) and k not in ("ifindex", "port")}


def delta(before):
    after = counters()
    return {n: after[n] - before[n] for n in after if after[n] != before[n]}


def poll(cq, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        n, wcs = cq.poll()
        if n:
            return wcs[0]
        time.sleep(0.001)
    raise RuntimeError("no completion within %.0f s" % timeout)


def av():
    gr = GlobalRoute(dgid=gid, sgid_index=GIDX)
    return AHAttr(is_global=1, gr=gr, port_num=1)


def attr(**kw):
    """A QPAttr with the given fields set (its constructor takes few)."""
    a = QPAttr()
    for k, v in kw.items():
        setattr(a, k, v)
    return a


def rc_pair(timeout=14, retry_cnt=7, rnr_retry=7, min_rnr_timer=1):
    """Two connected RC QPs with their own CQs and one MR each."""
    side = []
    for _ in range(2):
        cq = CQ(ctx, 16)
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                               cap=QPCap(max_send_wr=8, max_recv_wr=8)),
                QPAttr(port_num=1))
        side.append((qp, cq))
    for (qp, _), (peer, _) in zip(side, reversed(side)):
        qp.to_init(attr(qp_access_flags=e.IBV_ACCESS_REMOTE_WRITE |
                        e.IBV_ACCESS_REMOTE_READ))
        qp.to_rtr(attr(path_mtu=e.IBV_MTU_1024, dest_qp_num=peer.qp_num,
                       rq_psn=0, max_dest_rd_atomic=1,
                       min_rnr_timer=min_rnr_timer, ah_attr=av()))
        qp.to_rts(attr(timeout=timeout, retry_cnt=retry_cnt,
                       rnr_retry=rnr_retry, sq_psn=0, max_rd_atomic=1))
    return side


def mr(size=4096, access=e.IBV_ACCESS_LOCAL_WRITE |
       e.IBV_ACCESS_REMOTE_WRITE):
    return MR(pd, size, access)


def rdma_write(qp, cq, src, dst, length):
    """WRITE length bytes from MR src to MR dst; returns the completion."""
    wr = SendWR(opcode=e.IBV_WR_RDMA_WRITE, num_sge=1,
                sg=[SGE(src.buf, length, src.lkey)])
    wr.set_wr_rdma(dst.rkey, dst.buf)
    qp.post_send(wr)
    return poll(cq)


def check(name, got, want, wc_status=None, want_status=e.IBV_WC_SUCCESS):
    bad = {n: (got.get(n, 0), v) for n, v in want.items()
           if got.get(n, 0) != v}
    ok = not bad and (wc_status is None or wc_status == want_status)
    results.append(ok)
    print("%s %d - %s" % ("ok" if ok else "not ok", len(results), name))
    print("#   deltas %s" % sorted(got.items()))
    if bad:
        print("#   wrong (got, want): %s" % bad)
    if wc_status is not None and wc_status != want_status:
        print("#   completion status %d, want %d" % (wc_status, want_status))


def case_send():
    (qa, ca), (qb, cb) = rc_pair()
    ma, mb = mr(), mr()
    qb.post_recv(RecvWR(num_sge=1, sg=[SGE(mb.buf, 4096, mb.lkey)]))
    before = counters()
    qa.post_send(SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(ma.buf, 1000, ma.lkey)]))
    wa, wb = poll(ca), poll(cb)
    time.sleep(0.05)
    frames = (HDR + 1000) + (HDR + AETH)      # SEND ONLY, then its ACK
    check("RC SEND 1000 B: 2 packets and %d bytes each way" % frames,
          delta(before), {"sent_pkts": 2, "rcvd_pkts": 2,
                          "sent_bytes": frames, "rcvd_bytes": frames},
          wa.status if wb.status == e.IBV_WC_SUCCESS else wb.status)


def case_write_segmented():
    (qa, ca), (qb, _) = rc_pair()
    ma, mb = mr(8192), mr(8192)
    before = counters()
    wa = rdma_write(qa, ca, ma, mb, 3000)
    time.sleep(0.05)
    # FIRST (RETH) 1024 + MIDDLE 1024 + LAST 952 at path MTU 1024; the
    # responder may coalesce ACKs, so count the requests exactly and
    # the ACKs by what was sent.
    d = delta(before)
    acks = d.get("sent_pkts", 0) - 3
    frames = 3 * HDR + RETH + 3000 + acks * (HDR + AETH)
    check("RC WRITE 3000 B at MTU 1024: 3 requests (+%d ACK)" % acks,
          d, {"sent_pkts": 3 + acks, "rcvd_pkts": 3 + acks,
              "sent_bytes": frames, "rcvd_bytes": frames}, wa.status)
    results[-1] = results[-1] and acks >= 1


def failing_send(name, want, status, peer_state=None, **pair_args):
    """A 64-byte RC SEND that must fail with status, moving the counters
    by exactly want; the peer QP is first moved to peer_state if given."""
    (qa, ca), (qb, _) = rc_pair(**pair_args)
    ma = mr()
    if peer_state is not None:
        qb.modify(QPAttr(qp_state=peer_state), e.IBV_QP_STATE)
    before = counters()
    qa.post_send(SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                        sg=[SGE(ma.buf, 64, ma.lkey)]))
    wa = poll(ca)
    check(name, delta(before), want, wa.status, status)


def case_rnr():
    # The SEND and 2 retries each find no receive WQE: 3 RNR NAKs.
    failing_send("RC SEND without a receive, rnr_retry 2: 3 RNR NAKs, then "
                 "RNR_RETRY_EXC_ERR",
                 {"send_rnr_err": 3, "rcvd_rnr_err": 3,
                  "retry_rnr_exceeded_err": 1, "sent_pkts": 6,
                  "rcvd_pkts": 6},
                 e.IBV_WC_RNR_RETRY_EXC_ERR, rnr_retry=2, min_rnr_timer=1)


def case_retry():
    # Nobody answers: the first try and 2 retries time out.
    failing_send("RC SEND to a QP in RESET, retry_cnt 2: 3 timeouts, then "
                 "RETRY_EXC_ERR",
                 {"ack_timeouts": 3, "retry_exceeded_err": 1, "sent_pkts": 3,
                  "rcvd_pkts": 3, "bad_qp_pkts": 3},
                 e.IBV_WC_RETRY_EXC_ERR, peer_state=e.IBV_QPS_RESET,
                 timeout=8, retry_cnt=2)


def case_access():
    (qa, ca), (qb, _) = rc_pair()
    ma = mr()
    mb = mr(access=e.IBV_ACCESS_LOCAL_WRITE)     # no remote write
    before = counters()
    wa = rdma_write(qa, ca, ma, mb, 64)
    check("RC WRITE to an MR without remote write: NAK, REM_ACCESS_ERR",
          delta(before), {"remote_access_err": 1, "sent_pkts": 2,
                          "rcvd_pkts": 2},
          wa.status, e.IBV_WC_REM_ACCESS_ERR)


def case_qkey():
    side = []
    for qkey in (QKEY, QKEY + 1):
        cq = CQ(ctx, 16)
        # pyverbs takes a UD QP given attributes straight to RTS.
        qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                               cap=QPCap(max_send_wr=8, max_recv_wr=8)),
                attr(qkey=qkey, sq_psn=0))
        side.append((qp, cq))
    (qa, ca), (qb, cb) = side
    ma, mb = mr(), mr()
    qb.post_recv(RecvWR(num_sge=1, sg=[SGE(mb.buf, 4096, mb.lkey)]))
    ah = AH(pd, attr=av())
    before = counters()
    for qkey in (QKEY + 1, QKEY):          # one good Q_Key, one bad
        wr = SendWR(opcode=e.IBV_WR_SEND, num_sge=1,
                    sg=[SGE(ma.buf, 100, ma.lkey)])
        wr.set_wr_ud(ah, qb.qp_num, qkey)
        qa.post_send(wr)
        poll(ca)
    wb = poll(cb)
    time.sleep(0.05)
    frames = 2 * (HDR + DETH + 100)
    check("UD SEND with a wrong Q_Key: dropped and counted",
          delta(before), {"qkey_violations": 1, "sent_pkts": 2,
                          "rcvd_pkts": 2, "sent_bytes": frames,
                          "rcvd_bytes": frames}, wb.status)
    n, _ = cb.poll()
    results[-1] = results[-1] and n == 0


CASES = (case_send, case_write_segmented, case_rnr, case_retry, case_access,
         case_qkey)
print("TAP version 13")
print("1..%d" % len(CASES))
for case in CASES:
    try:
        case()
    except Exception as ex:          # one broken case must not hide others
        results.append(False)
        print("not ok %d - %s: %s" % (len(results), case.__name__, ex))
failed = results.count(False)
print("# %d passed, %d failed" % (len(results) - failed, failed))
sys.exit(1 if failed else 0)

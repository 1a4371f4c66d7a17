#!/usr/bin/python3
"""Runs in a guest: the device owns the GID table (spec 0.6).

For every entry of /sys/class/infiniband/<dev>/ports/1/gids, a UD
datagram that the device loops back to a QP of its own must arrive with
exactly that GID as its source (so the device's table holds what ib_core
shows), and ibv_create_ah must refuse an index beyond the table and an
empty entry.  Prints "ok: ..." lines; exits 1 on the first mismatch."""

import ipaddress
import sys

import pyverbs.enums as e
from pyverbs.addr import AH, AHAttr, GlobalRoute
from pyverbs.cq import CQ
from pyverbs.device import Context
from pyverbs.mr import MR
from pyverbs.pd import PD
from pyverbs.pyverbs_error import PyverbsError
from pyverbs.qp import QP, QPAttr, QPCap, QPInitAttr
from pyverbs.wr import SGE, RecvWR, SendWR

DEV = sys.argv[1] if len(sys.argv) > 1 else "vrnic0"
SYS = "/sys/class/infiniband/%s/ports/1/" % DEV
QKEY = 0x1234
failed = False


def fail(msg):
    global failed
    print("not ok: " + msg)
    failed = True


def sysfs_gid(i):
    """(address, type) of sysfs entry i, or None if it is empty."""
    with open(SYS + "gids/%d" % i) as f:
        raw = f.read().strip()
    addr = ipaddress.IPv6Address(raw)
    if addr == ipaddress.IPv6Address("::"):
        return None
    try:
        with open(SYS + "gid_attrs/types/%d" % i) as f:
            kind = f.read().strip()
    except OSError:
        return None
    return addr, kind


def make_ah(pd, dgid, index):
    gr = GlobalRoute(dgid=dgid, sgid_index=index)
    return AH(pd, attr=AHAttr(gr=gr, is_global=1, port_num=1))


ctx = Context(name=DEV)
port = ctx.query_port(1)
n = port.gid_tbl_len
if n != 16:
    fail("gid_tbl_len %d, the device has 16" % n)
pd = PD(ctx)
cq = CQ(ctx, 16)
qa = QPAttr(port_num=1)
qa.qkey = QKEY
qp = QP(pd, QPInitAttr(qp_type=e.IBV_QPT_UD, scq=cq, rcq=cq,
                       cap=QPCap(max_send_wr=4, max_recv_wr=4)), qa)
mr = MR(pd, 4096, e.IBV_ACCESS_LOCAL_WRITE)

entries = {i: sysfs_gid(i) for i in range(n)}
used = {i: v for i, v in entries.items() if v}
print("GID table: %s" % {i: (str(a), k) for i, (a, k) in used.items()})
if not any(ipaddress.IPv6Address(a).ipv4_mapped for a, _ in used.values()):
    fail("no IPv4 GID in the table")
for i, (addr, kind) in sorted(used.items()):
    if kind != "RoCE v2":
        fail("entry %d is %s, the device only has RoCE v2" % (i, kind))
        continue
    gid = ctx.query_gid(1, i)
    try:
        ah = make_ah(pd, gid, i)
    except PyverbsError as ex:
        fail("ibv_create_ah sgid_index %d (%s): %s" % (i, addr, ex))
        continue
    mr.write(b"\0" * 4096, 4096)
    qp.post_recv(RecvWR(wr_id=1, num_sge=1, sg=[SGE(mr.buf, 1024, mr.lkey)]))
    send = SendWR(wr_id=2, opcode=e.IBV_WR_SEND, num_sge=1,
                  sg=[SGE(mr.buf + 2048, 64, mr.lkey)])
    send.set_wr_ud(ah, qp.qp_num, QKEY)
    qp.post_send(send)
    got = {}
    for _ in range(2000000):
        cnt, wcs = cq.poll(num_entries=2)
        for wc in wcs[:cnt]:
            got[wc.wr_id] = wc.status
        if len(got) == 2:
            break
    if got != {1: e.IBV_WC_SUCCESS, 2: e.IBV_WC_SUCCESS}:
        fail("loopback on entry %d (%s): completions %s" % (i, addr, got))
        break
    grh = mr.read(40, 0)
    if addr.ipv4_mapped:
        src = ipaddress.IPv6Address(b"\0" * 10 + b"\xff\xff" + grh[32:36])
    else:
        src = ipaddress.IPv6Address(bytes(grh[8:24]))
    if src != addr:
        fail("entry %d: the device sent from %s, sysfs says %s" %
             (i, src, addr))
    else:
        print("ok: entry %d: the device sends from %s" % (i, addr))
# Beyond the table, and an empty entry: refused before the device sees it.
gid0 = ctx.query_gid(1, min(used))
bad = [n] + [i for i in range(n) if i not in used][:1]
for i in bad:
    try:
        make_ah(pd, gid0, i)
        fail("ibv_create_ah accepted sgid_index %d" % i)
    except PyverbsError:
        print("ok: ibv_create_ah refuses sgid_index %d" % i)
sys.exit(1 if failed else 0)

#!/usr/bin/python3
"""VMs through vrnic-fabric (issue 28): two VMs, booted once, attached to
the emulated switch instead of a point-to-point wire.

VM snd carries two vrnic NICs, hosts s1 (10.10.1.1) and s2 (10.10.2.1,
10.10.3.1); VM rcv carries a vrnic, host r (10.10.1.2 and 10.10.2.2), and
a virtio-net for rdma_rxe, host rxe (10.10.3.2).  Each NIC of a VM is in
its own subnets, so that the RoCE GID and the route name one NIC.  The
fabric restarts on each topology of tests/system/topologies (the same
host names, so QEMU's reconnect-ms brings every NIC back) while the VMs
keep running:

  pair.json         the shipped pair's switch (no rate limit, priority 3
                    lossless, ECN 64/256 KiB): ping and ib_write_bw s1->r;
                    rxe interop, ib_write_bw between s2's vrnic and rxe
                    both ways; an injected drop at a chosen PSN of an
                    ibv_rc_pingpong -c (data checked) is retransmitted
                    exactly once; again with selective repeat on both
                    devices (debugfs): that packet alone is resent, on
                    r's SACKs (issue 25); rdma_cm negotiates selective
                    repeat through ECE (vrnic_ece), through 1% loss, with
                    rxe too, and each QP sets its own through the
                    provider's direct verbs (vrnicdv); 1% loss on r's link: ib_write_bw, ib_read_bw
                    both ways and ibv_rc_pingpong -c, with selective
                    repeat and with go-back-N; 1% loss on rxe's link:
                    vrnic(s2) and rxe both ways, go-back-N;
  leaf-spine.json   two leaves, two spines: one QP's flow takes one spine,
                    and both once it sprays over 64 UDP source ports;
  ecn.json          r's port at 500 Mb/s, marking from 4 KiB on priority
                    3, DWRR (with strict priority a DCQCN flow on
                    priority 3 starved the second client's TCP exchange
                    on priority 0: DCQCN with mlx5's defaults does not
                    bring a flow down to this port's rate, issue 24):
                    ib_write_bw --tclass=106 (DSCP 26, ECT(0)) gets CE
                    marks; then with DCQCN on the senders' devices
                    (debugfs cc_algo): r's np_cnp_sent equals the senders'
                    rp_cnp_handled + rp_cnp_ignored (plus any priority-6
                    drop in the switch), r's np_ecn_marked_roce_packets
                    the switch's ce_marked; and an incast s1+s2 -> r for
                    4 s shares the port (Jain >= 0.8), both senders handle
                    CNPs, and a QP's cc_rate_mbps (rdma res show qp -dd)
                    is below line rate mid-run;
  incast-drop.json  s1 and s2 into r at 500 Mb/s, PFC off, a 128 KiB
                    buffer: the switch drops, both transfers complete;
  incast-pfc.json   the same on lossless priority 3 (--tclass=106), static
                    XOFF 32 KiB, 4 MiB headroom: pause frames towards the
                    senders, no drop anywhere (each sender's headroom
                    watermark printed), and each sender's vrnic counted
                    the pauses the switch sent it (ethtool -S
                    rx_prio3_pause).
  (no fabric)       last: the fabric stops and a third VM, sw, listens
                    on s1's and r's sockets with two virtio-net NICs
                    joined by a Linux bridge, tbf 50 Mb/s and tc red ecn
                    towards r; s1 and r reconnect to it.  A flow s1->r
                    with DCQCN on s1: red marks, r counts exactly the
                    marks that reached it, s1 handles CNPs (issue 28's
                    cross-check against a real Linux marker).

Results: build/results/fabric.jsonl (one PASS/FAIL/SKIP line each).
Alone: VRNIC_VM_DIR=/tmp/vm-x python3 tests/system/fabric_tests.py
(the fabric's sockets go to VRNIC_FABRIC_DIR, default build/fabric-vm).
"""

import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts"))
sys.path.insert(0, HERE)
import fabric  # noqa: E402
import vm as vmlib  # noqa: E402
from guest_tests import pair, shipped, step  # noqa: E402
from results import Stage  # noqa: E402

TOPOS = os.path.join(HERE, "topologies")
FABRIC_DIR = os.environ.get("VRNIC_FABRIC_DIR",
                            os.path.join(vmlib.BUILD, "fabric-vm"))
LAYOUT = [("snd", [("s1", "vrnic", ["10.10.1.1"]),
                   ("s2", "vrnic", ["10.10.2.1", "10.10.3.1"])]),
          ("rcv", [("r", "vrnic", ["10.10.1.2", "10.10.2.2"]),
                   ("rxe", "virtio", ["10.10.3.2"])])]
# rxe is not waited for: QEMU notices the fabric left only when the
# guest reads that NIC (virtio_net loaded), and no test after a restart
# uses it.
VRNIC_HOSTS = ["s1", "s2", "r"]
BW = "ib_write_bw -s 65536 -n 200"
FLOW_TIMEOUT = 120
ECN_TCLASS = 106    # DSCP 26 (priority 3) with ECT(0)

def perf(nic, ip, extra=""):
    """perftest's device and GID arguments for nic with address ip."""
    return "-d %s -x %d %s" % (nic.rdma, vmlib.gid_index(nic.vm, nic.rdma,
                                                           ip), extra)


def restart(stage, fab, vms, topology):
    """The fabric on another topology; the VMs' NICs reconnect."""
    name = "restart the fabric on %s" % topology
    t0 = time.time()
    try:
        fab.restart(os.path.join(TOPOS, topology))
        fab.wait_hosts_up(VRNIC_HOSTS, timeout=30)
        vmlib.wait_fabric_ports(vms, timeout=60)
    except (fabric.FabricError, vmlib.VMError) as e:
        stage.record(name, "fail", str(e))
        return False
    stage.record(name, "pass")
    print("   reconnected in %.1f s" % (time.time() - t0), flush=True)
    return True


def start(vm, tag, cmd, timeout=FLOW_TIMEOUT):
    vm.check("rm -f /tmp/%s.out /tmp/%s.rc; (timeout %d %s > /tmp/%s.out "
             "2>&1; echo $? > /tmp/%s.rc) >/dev/null 2>&1 &"
             % (tag, tag, timeout, cmd, tag, tag))


def collect(vm, tag, timeout=FLOW_TIMEOUT):
    """(exit status as text or "none", output) of a start()ed command."""
    rc, _ = vm.run("for i in $(seq %d); do [ -e /tmp/%s.rc ] && exit 0; "
                   "sleep 0.5; done; exit 1" % (2 * (timeout + 20), tag),
                   timeout=timeout + 40)
    status = vm.run("cat /tmp/%s.rc" % tag)[1].strip() if rc == 0 else "none"
    return status, vm.run("cat /tmp/%s.out" % tag)[1]


def listening(vm, port, seconds=20):
    vm.run("for i in $(seq %d); do ss -Hltn | grep -q ':%d ' && exit 0; "
           "sleep 0.1; done; exit 1" % (seconds * 10, port),
           timeout=seconds + 10)


def show(out, n=6):
    for line in out.rstrip().splitlines()[-n:]:
        print("  | " + line)


def bw_line(out):
    """perftest's result line (the one after "#bytes"), or ""."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if "#bytes" in line and i + 1 < len(lines):
            return " ".join(lines[i + 1].split())
    return ""


def flows(stage, name, specs, bw=BW, during=None, lines=None):
    """Several ib_write_bw flows at once: specs is [(sender Nic, sender
    ip, receiver Nic, receiver ip, port, extra perftest args)].  Records
    one result per flow (both ends exit 0 with a result line); returns
    True when all passed.  bw: the perftest command and its sizes;
    during(): called once every client started; lines: a list that gets
    each flow's result line ("" if none), in specs' order."""
    for i, (snic, sip, rnic, rip, port, extra) in enumerate(specs):
        start(rnic.vm, "srv%d" % i, "%s %s -p %d" % (bw, perf(rnic, rip,
                                                              extra), port))
    for i, (snic, sip, rnic, rip, port, extra) in enumerate(specs):
        listening(rnic.vm, port)
    cmds = ["%s %s -p %d %s" % (bw, perf(snic, sip, extra), port, rip)
            for snic, sip, rnic, rip, port, extra in specs]
    for i, (snic, _, _, _, _, _) in enumerate(specs):
        start(snic.vm, "cli%d" % i, cmds[i])
    if during:
        during()
    ok = True
    for i, (snic, sip, rnic, rip, port, extra) in enumerate(specs):
        crc, cout = collect(snic.vm, "cli%d" % i)
        src, sout = collect(rnic.vm, "srv%d" % i)
        line = bw_line(cout)
        if lines is not None:
            lines.append(line)
        good = crc == "0" and src == "0" and line != ""
        print("---- [%s] %s -> exit %s, server exit %s: %s" % (
            snic.vm.name, cmds[i], crc, src, line or "no result"), flush=True)
        if not good:
            show(cout, 20)
            print("  | -- server --")
            show(sout, 10)
        stage.record("%s: %s %s->%s" % (name, " ".join((bw + " " + extra)
                                                      .split()),
                                          snic.host, rnic.host),
                     "pass" if good else "fail",
                     line if good else "client exit %s, server exit %s"
                     % (crc, src))
        ok = ok and good
    return ok


def counters(stage, fab, name):
    try:
        c = fab.counters()
    except fabric.FabricError as e:
        stage.record(name, "fail", str(e))
        return None
    for line in fabric.port_summary(c):
        print("  | " + line)
    return c


def pair_tests(stage, fab, s1, r):
    """a: ping and ib_write_bw s1 -> r through the pair switch."""
    step(stage, s1.vm, "pair: ping -c 20 r from s1",
         "ping -c 20 -i 0.05 -W 2 -I %s %s | tail -3" % (s1.netdev, r.ip),
         expect=" 0% packet loss", timeout=60)
    pair(stage, "pair: %s s1->r" % BW, r.vm, s1.vm,
         "%s %s" % (BW, perf(r, r.ip)),
         "%s %s %s" % (BW, perf(s1, s1.ip), r.ip), "#bytes",
         timeout=FLOW_TIMEOUT)
    c = counters(stage, fab, "pair: counters")
    if c:
        to_r = sum(q["tx_packets"] for q in fabric.port(c, "r"))
        lost = fabric.drops(c)
        # 200 x 64 KiB at path MTU 1024 is 12800 RoCE packets to r.
        stage.record("pair: the switch carried the flow to r, dropped "
                     "nothing", "pass" if to_r >= 12800 and not lost
                     else "fail", "tx to r %d packets, drops %s"
                     % (to_r, lost))
    tcp_wire_buffers(stage, fab, r)


def tcp_wire_buffers(stage, fab, r):
    """r joins the fabric over TCP: both ends of that connection (its
    vrnic-device and vrnic-fabric) hold a UNIX socket's buffers, 212992
    bytes each way, not the megabytes TCP autotuning grows to (what a
    pause must absorb in a switch's PFC headroom).  ss -tm shows each
    socket's rb (receive) and tb (send) limits."""
    port = fabric.tcp_port(fab.topology, r.host)
    name = "pair: r's TCP wire has fixed socket buffers at both ends"
    if not port:
        stage.record(name, "fail", "the topology gives r no TCP port")
        return
    out = subprocess.run(
        ["ss", "-tmnH", "state", "established", "( sport = :%d or dport = "
         ":%d )" % (port, port)], capture_output=True, text=True,
        timeout=30).stdout
    limits = re.findall(r"rb(\d+),t\d+,tb(\d+)", out)
    ok = len(limits) == 2 and all(rb == tb == "212992" for rb, tb in limits)
    stage.record(name, "pass" if ok else "fail",
                 "rb/tb of the connection's sockets: %s" % limits)


# rxe in a TCG guest drops what arrives faster than its tasklets run, and
# on a busy host its VM may not run for a while: a window of 128 x 64 KiB,
# and then of 16 with perftest's 67 ms ACK timeout, ended in retry
# exhaustion (status 12) with nothing lost in the switch.  So the rxe
# flows keep 16 in flight and wait 4 s (-u 20) for an ACK.
RXE_BW = "ib_write_bw -s 65536 -n 200 -t 16 -u 20"


def rxe_tests(stage, s2, rxe):
    """b: vrnic (s2) and Linux soft-RoCE (rxe) through the switch."""
    if not step(stage, rxe.vm, "rxe: rdma_rxe up on the virtio-net port",
                shipped("rxe-up") + "bash /tmp/rxe-up 1500 %s" % rxe.ip):
        return
    rxe.rdma = "rxe0"
    vip = "10.10.3.1"
    pair(stage, "rxe: %s vrnic(s2)->rxe" % RXE_BW, rxe.vm, s2.vm,
         "%s %s" % (RXE_BW, perf(rxe, rxe.ip)),
         "%s %s %s" % (RXE_BW, perf(s2, vip), rxe.ip), "#bytes",
         timeout=FLOW_TIMEOUT)
    pair(stage, "rxe: %s rxe->vrnic(s2)" % RXE_BW, s2.vm, rxe.vm,
         "%s %s" % (RXE_BW, perf(s2, vip)),
         "%s %s %s" % (RXE_BW, perf(rxe, rxe.ip), vip), "#bytes",
         timeout=FLOW_TIMEOUT)


ADDR = re.compile(r"(local|remote) address:.*QPN (0x[0-9a-f]+), "
                  r"PSN (0x[0-9a-f]+)")


SR_KNOB = "/sys/kernel/debug/vrnic/%s/selective_repeat"
WINDOW_KNOB = "/sys/kernel/debug/vrnic/%s/send_window"


def set_sr(nics, on, window=0):
    """The driver's selective-repeat default and send window (debugfs) on
    each nic's device: QPs moved to RTR from now on use them."""
    for n in nics:
        n.vm.check("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
                   "/sys/kernel/debug; echo %d > %s && grep -qx %s %s && "
                   "echo %d > %s && grep -qx %d %s"
                   % (on, SR_KNOB % n.rdma, "Y" if on else "N",
                      SR_KNOB % n.rdma, window, WINDOW_KNOB % n.rdma,
                      window, WINDOW_KNOB % n.rdma))


def link_stats(nic, names):
    """Counters of nic's rdma link by name (absent: None)."""
    out = nic.vm.check("rdma statistic show link %s/1" % nic.rdma)
    got = {}
    for k in names:
        m = re.search(r"\b%s (\d+)" % k, out)
        got[k] = int(m.group(1)) if m else None
    return got


def link_deltas(nics, before, keys, absent=None):
    """{host: {counter: now - before}} for nics {host: Nic}, before
    {host: link_stats()}; absent where a counter is missing.  Prints
    them."""
    d = {}
    for h, nic in nics.items():
        after = link_stats(nic, keys)
        d[h] = {k: (after[k] - before[h][k]) if after[k] is not None and
                before[h][k] is not None else absent for k in keys}
    print("  | counter deltas: %s" % ", ".join(
        "%s %s" % (h, d[h]) for h in d), flush=True)
    return d


def inject_test(stage, fab, s1, r, sr=False):
    """c: drop the packet of s1's ibv_rc_pingpong at a chosen PSN, once.
    r's port is slowed to 100 Mb/s so that the transfer lasts long enough
    to install the rule after the QPs exchanged their numbers.  A second
    rule on the same QPN/PSN that never fires (nth 10^9, installed first)
    counts every time the switch saw the packet: the original and exactly
    one retransmission.  -c checks every byte received.  With sr, both
    devices use selective repeat (issue 25) and a send window of 64: s1
    resends that one packet and no other (roce_adp_retrans), on r's
    SACKs."""
    name = "inject: drop one PSN of ibv_rc_pingpong -c s1->r" + (
        ", selective repeat" if sr else "")
    keys = ("roce_adp_retrans", "sack_sent", "sack_rcvd", "ooo_placed",
            "rcvd_seq_err")
    if sr:
        try:
            set_sr([s1, r], 1, 64)
        except vmlib.VMError as e:
            stage.record("%s: debugfs selective_repeat" % name, "fail",
                         str(e))
            return
    st0 = {"s1": link_stats(s1, keys), "r": link_stats(r, keys)}
    try:    # the switch's inject drops so far (an earlier run's)
        drops0 = fabric.drops(fab.counters()).get("inject", 0)
    except fabric.FabricError as e:
        stage.record(name, "fail", str(e))
        return
    iters, size = 300, 65536
    pp = "ibv_rc_pingpong -c -s %d -n %d -m 1024 -p 18640" % (size, iters)
    try:
        fab.set_link("r", {"rate_mbps": 100}, "b_to_a")
        start(r.vm, "ppsrv", "%s -d %s -g %d" % (
            pp, r.rdma, vmlib.gid_index(r.vm, r.rdma, r.ip)))
        listening(r.vm, 18640)
        start(s1.vm, "ppcli", "stdbuf -oL %s -d %s -g %d %s" % (
            pp, s1.rdma, vmlib.gid_index(s1.vm, s1.rdma, s1.ip),
            r.ip))
        rc, out = s1.vm.run("for i in $(seq 1500); do grep -q 'remote "
                            "address' /tmp/ppcli.out && break; sleep 0.02; "
                            "done; cat /tmp/ppcli.out", timeout=60)
        addr = {m.group(1): (int(m.group(2), 16), int(m.group(3), 16))
                for m in ADDR.finditer(out)}
        if "local" not in addr or "remote" not in addr:
            stage.record(name, "fail", "no QPN/PSN from the client: %s"
                         % out[-300:])
            return
        qpn = addr["remote"][0]
        # Message 100 of 300, 64 packets each at MTU 1024, plus a few.
        psn = (addr["local"][1] + 64 * 100 + 7) & 0xffffff
        t0 = time.time()
        fab.inject("ecn", qpn, psn, nth=10 ** 9, host="s1")
        fab.inject("drop", qpn, psn, nth=1, host="s1")
        print("---- rules on QPN %#x PSN %#x (%.0f ms after the exchange "
              "was read)" % (qpn, psn, (time.time() - t0) * 1000),
              flush=True)
        crc, cout = collect(s1.vm, "ppcli")
        src, sout = collect(r.vm, "ppsrv")
        c = counters(stage, fab, name)
    except (fabric.FabricError, vmlib.VMError) as e:
        stage.record(name, "fail", str(e))
        return
    finally:
        try:
            fab.set_link("r", {"rate_mbps": 0}, "b_to_a")
            if sr:
                set_sr([s1, r], 0)
        except (fabric.FabricError, vmlib.VMError):
            pass
    show(cout, 4)
    done = crc == "0" and src == "0" and "bytes in" in cout and \
        "invalid data" not in cout + sout
    stage.record("%s: completes, data checked" % name,
                 "pass" if done else "fail",
                 "" if done else "client exit %s, server exit %s: %s" % (
                     crc, src, (cout + sout)[-300:]))
    if c is None:
        return
    rules = c["injections"][-2:]
    print("  | injections: %s" % rules, flush=True)
    dropped = fabric.drops(c).get("inject", 0) - drops0
    ok = len(rules) == 2 and rules[1]["fired"] and dropped == 1
    stage.record("%s: the rule fired, one inject drop" % name,
                 "pass" if ok else "fail", "%s, inject drops %d"
                 % (rules, dropped))
    seen = rules[0]["seen"] if rules else -1
    stage.record("%s: the switch saw the PSN exactly twice (once "
                 "retransmitted)" % name, "pass" if seen == 2 else "fail",
                 "seen %d times" % seen)
    if not sr:
        return
    d = link_deltas({"s1": s1, "r": r}, st0, keys)
    ok = d["s1"]["roce_adp_retrans"] == 1 and \
        d["s1"]["rcvd_seq_err"] == 0 and \
        (d["s1"]["sack_rcvd"] or 0) > 0 and (d["r"]["ooo_placed"] or 0) > 0
    stage.record("%s: s1 resent that packet alone, on r's SACKs" % name,
                 "pass" if ok else "fail",
                 "s1 %s, r %s" % (d["s1"], d["r"]))


LOSS_BW = "-s 65536 -n 100"
LOSS_PP = "ibv_rc_pingpong -c -s 65536 -n 100 -m 1024"
LOSS_KEYS = ("sack_rcvd", "sack_sent", "roce_adp_retrans", "rcvd_seq_err",
             "ack_timeouts", "implied_nak_seq_err")


def loss_tests(stage, fab, s1, r):
    """g: 1% loss on r's link, both directions, between two vrnics (issue
    25): ib_write_bw and ib_read_bw both ways and a data-checked
    ibv_rc_pingpong, first with selective repeat on both devices
    (debugfs, the default window), then with go-back-N.  Every run
    completes; with selective repeat both devices recovered on SACKs, with
    go-back-N neither sent or received a SACK and each recovered on
    sequence NAKs or its ack timer.  In both, each device (each is a READ
    requester once) asked a READ again on a response past a lost one
    (implied_nak_seq_err)."""
    fab.set_link("r", {"impair": {"loss": 0.01}})
    try:
        for sr, mode in ((1, "selective repeat"), (0, "go-back-N")):
            name = "loss 1%%, %s" % mode
            try:
                set_sr([s1, r], sr)
                st0 = {"s1": link_stats(s1, LOSS_KEYS),
                       "r": link_stats(r, LOSS_KEYS)}
            except vmlib.VMError as e:
                stage.record("%s: debugfs selective_repeat" % name, "fail",
                             str(e))
                continue
            for test in ("ib_write_bw", "ib_read_bw"):
                for cli, srv in ((s1, r), (r, s1)):
                    cmd = "%s %s" % (test, LOSS_BW)
                    pair(stage, "%s: %s %s->%s" % (name, cmd, cli.host,
                                                   srv.host),
                         srv.vm, cli.vm, "%s %s" % (cmd, perf(srv, srv.ip)),
                         "%s %s %s" % (cmd, perf(cli, cli.ip), srv.ip),
                         "#bytes", timeout=FLOW_TIMEOUT)
            pair(stage, "%s: %s s1<->r" % (name, LOSS_PP), r.vm, s1.vm,
                 "%s -d %s -g %d" % (LOSS_PP, r.rdma,
                                     vmlib.gid_index(r.vm, r.rdma, r.ip)),
                 "%s -d %s -g %d %s" % (LOSS_PP, s1.rdma,
                                        vmlib.gid_index(s1.vm, s1.rdma,
                                                        s1.ip), r.ip),
                 "bytes in", timeout=FLOW_TIMEOUT)
            d = link_deltas({"s1": s1, "r": r}, st0, LOSS_KEYS, absent=-1)
            if sr:
                ok = all(d[h]["sack_rcvd"] > 0 and d[h]["sack_sent"] > 0 and
                         d[h]["roce_adp_retrans"] > 0 for h in d)
                what = "both devices sent and received SACKs and resent " \
                    "on them"
            else:
                ok = all(d[h]["sack_rcvd"] == 0 and d[h]["sack_sent"] == 0
                         and d[h]["rcvd_seq_err"] + d[h]["ack_timeouts"] > 0
                         for h in d)
                what = "no SACK either way, both recovered on sequence " \
                    "NAKs or ack timeouts"
            stage.record("%s: %s" % (name, what), "pass" if ok else "fail",
                         "s1 %s, r %s" % (d["s1"], d["r"]))
            ok = all(d[h]["implied_nak_seq_err"] > 0 for h in d)
            stage.record("%s: both READ requesters asked again on a response "
                         "past a lost one" % name, "pass" if ok else "fail",
                         "implied_nak_seq_err s1 %d, r %d"
                         % (d["s1"]["implied_nak_seq_err"],
                            d["r"]["implied_nak_seq_err"]))
    finally:
        fab.set_link("r", {"impair": {"loss": 0.0}})
        set_sr([s1, r], 0)


RXE_LOSS_BW = "ib_write_bw -s 65536 -n 30 -t 16 -u 20"


def rxe_loss_tests(stage, fab, s2, rxe):
    """h: Linux rxe through the same 1% loss (on rxe's link, both
    directions): vrnic (s2) and rxe recover by go-back-N both ways, and a
    data-checked ibv_rc_pingpong completes."""
    if "rxe0" not in rxe.vm.run("rdma link show")[1]:
        if not step(stage, rxe.vm, "rxe loss: rdma_rxe up",
                    shipped("rxe-up") + "bash /tmp/rxe-up 1500 %s" % rxe.ip):
            return
    rxe.rdma = "rxe0"
    vip = "10.10.3.1"
    fab.set_link("rxe", {"impair": {"loss": 0.01}})
    try:
        name = "rxe loss 1%"
        pair(stage, "%s: %s vrnic(s2)->rxe" % (name, RXE_LOSS_BW), rxe.vm,
             s2.vm, "%s %s" % (RXE_LOSS_BW, perf(rxe, rxe.ip)),
             "%s %s %s" % (RXE_LOSS_BW, perf(s2, vip), rxe.ip), "#bytes",
             timeout=FLOW_TIMEOUT)
        pair(stage, "%s: %s rxe->vrnic(s2)" % (name, RXE_LOSS_BW), s2.vm,
             rxe.vm, "%s %s" % (RXE_LOSS_BW, perf(s2, vip)),
             "%s %s %s" % (RXE_LOSS_BW, perf(rxe, rxe.ip), vip), "#bytes",
             timeout=FLOW_TIMEOUT)
        pp = "ibv_rc_pingpong -c -s 4096 -n 200 -m 1024"
        pair(stage, "%s: %s vrnic(s2)<->rxe" % (name, pp), rxe.vm, s2.vm,
             "%s -d %s -g %d" % (pp, rxe.rdma,
                                 vmlib.gid_index(rxe.vm, rxe.rdma, rxe.ip)),
             "%s -d %s -g %d %s" % (pp, s2.rdma,
                                    vmlib.gid_index(s2.vm, s2.rdma, vip),
                                    rxe.ip),
             "bytes in", timeout=FLOW_TIMEOUT)
    finally:
        fab.set_link("rxe", {"impair": {"loss": 0.0}})


ECE = "/opt/vrnic/tests/vrnic_ece"
ECE_PORT = 7471
ECE_KNOB = "/sys/kernel/debug/vrnic/%s/ece_selective_repeat"
USER_TRANSPORT_KNOB = "/sys/kernel/debug/vrnic/%s/user_transport"
ECE_SR = "vendor 0x1af4 options 0x20000001"     # version 2, bit 0
ECE_NONE = "vendor 0x1af4 options 0"


def qp_attrs(nic, out, names=("selective_repeat", "spray_paths")):
    """{name: value} of the driver attributes in restrack of the QP whose
    number out printed (absent: None)."""
    m = re.search(r"^qpn (0x[0-9a-f]+)$", out, re.M)
    res = nic.vm.run("rdma res show qp link %s/1 lqpn %d -dd"
                     % (nic.rdma, int(m.group(1), 16)))[1] if m else ""
    got = {}
    for k in names:
        m = re.search(r"\b(?:drv_)?%s[ :]+(\d+)" % k, res)
        got[k] = int(m.group(1)) if m else None
    return got


def ece_run(stage, name, srv, srv_ip, cli, cli_ip, args, want_srv, want_cli,
            spray=None, want_req=ECE_SR, dv=None):
    """vrnic_ece between srv and cli: the REQ carried want_req (the
    server's rdma_get_remote_ece), each side's ECE line is as wanted, each
    QP's selective_repeat in restrack (None: not a vrnic) follows it, and
    the data exchange checks out; with spray, the client's QP sprays over
    that many ports (restrack).  With dv ({restrack attribute: value},
    what both sides set with -t): both QPs have exactly that, whatever
    ECE agreed.  The client keeps its connection until restrack was read
    (/tmp/ece.go, at most 60 s).  Returns the client's output."""
    start(srv.vm, "ecesrv", "%s -s -a %s -p %d %s" % (ECE, srv_ip, ECE_PORT,
                                                     args))
    srv.vm.run("for i in $(seq 200); do grep -q listening /tmp/ecesrv.out "
               "&& exit 0; sleep 0.1; done; exit 1", timeout=40)
    cli.vm.check("rm -f /tmp/ece.go")
    start(cli.vm, "ececli", "%s -c -a %s -b %s -p %d -w 60 -f /tmp/ece.go "
          "%s" % (ECE, srv_ip, cli_ip, ECE_PORT, args))
    cli.vm.run("for i in $(seq %d); do grep -q '^linger' /tmp/ececli.out "
               "&& exit 0; sleep 0.25; done; exit 1" % (FLOW_TIMEOUT * 4),
               timeout=FLOW_TIMEOUT + 30)
    sr, paths, attrs = {}, None, {}
    for who, nic, tag in (("server", srv, "ecesrv"), ("client", cli,
                                                      "ececli")):
        if nic.kind == "vrnic":
            got = qp_attrs(nic, nic.vm.run("cat /tmp/%s.out" % tag)[1],
                           ("selective_repeat", "spray_paths",
                            "send_window"))
            attrs[who] = got
            sr[who] = got["selective_repeat"]
            if who == "client":
                paths = got["spray_paths"]
    cli.vm.check("touch /tmp/ece.go")
    crc, cout = collect(cli.vm, "ececli")
    src, sout = collect(srv.vm, "ecesrv")
    show(sout, 5)
    show(cout, 4)
    ok = crc == "0" and src == "0" and "data: ok" in sout and \
        "data: ok" in cout
    stage.record("%s: connects, data checked" % name, "pass" if ok else
                 "fail", "" if ok else "client exit %s, server exit %s: %s"
                 % (crc, src, (cout + sout)[-400:]))
    m = re.search(r"^remote ece: (.*)$", sout, re.M)
    req = m.group(1) if m else None
    stage.record("%s: the REQ carried %s" % (name, want_req),
                 "pass" if req == want_req else "fail", "got %r" % req)
    got = (re.search(r"^ece: (.*)$", sout, re.M),
           re.search(r"^ece: (.*)$", cout, re.M))
    got = tuple(m.group(1) if m else None for m in got)
    ok = got == (want_srv, want_cli)
    stage.record("%s: ibv_query_ece after the handshake" % name,
                 "pass" if ok else "fail", "server %r, client %r (wanted %r, "
                 "%r)" % (got + (want_srv, want_cli)))
    if dv is not None:
        ok = len(attrs) == 2 and all(a == dv for a in attrs.values())
        stage.record("%s: restrack: both QPs use what vrnicdv set, not "
                     "what ECE agreed" % name, "pass" if ok else "fail",
                     "got %s, wanted %s" % (attrs, dv))
        return cout
    want_sr = {w: int(v == ECE_SR) for w, v in (("server", want_srv),
                                                 ("client", want_cli))
               if w in sr}
    ok = sr == want_sr
    stage.record("%s: restrack selective_repeat follows the agreement"
                 % name, "pass" if ok else "fail", "got %s, wanted %s"
                 % (sr, want_sr))
    if spray is not None:
        stage.record("%s: restrack: the client's QP sprays over %d ports"
                     % (name, spray), "pass" if paths == spray else "fail",
                     "spray_paths %s" % paths)
    return cout


def set_ece(nics, on):
    for n in nics:
        n.vm.check("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
                   "/sys/kernel/debug; echo %d > %s && grep -qx %s %s"
                   % (on, ECE_KNOB % n.rdma, "Y" if on else "N",
                      ECE_KNOB % n.rdma))


def ece_tests(stage, fab, s1, s2, r, rxe):
    """d: rdma_cm negotiates selective repeat through ECE (issue 25).
    vrnic_ece, a librdmacm client and server, runs s1 -> r with 1% loss
    on r's link both ways: the REQ carries s1's offer, r agrees, and both
    QPs use selective repeat (ibv_query_ece, restrack), recovering on
    SACKs with every byte checked.  Then r withdraws its offer (debugfs
    ece_selective_repeat 0): both agree on nothing and recover by
    go-back-N.  Then neither offers, and each QP sets its own transport
    through the provider's direct verbs (vrnic_ece -t: selective repeat,
    window 64, 8 paths): the REQ carries the offer librdmacm read when
    rdma_create_qp made the QP (nothing), ibv_query_ece then reports the
    QPs' own choice (selective repeat) on both, restrack shows exactly
    what was set on both, and s1 recovers on SACKs; with the
    administrator's user_transport 0 the call is refused (EOPNOTSUPP).
    Last, s2 -> rxe: rxe knows no ECE, so s2's QP stays on go-back-N and
    the exchange works as before, both ways."""
    keys = ("sack_rcvd", "sack_sent", "roce_adp_retrans")

    def s1_deltas(before):
        """s1's counters now, less before (where both exist), and now."""
        now = link_stats(s1, keys)
        return {k: now[k] - before[k] for k in keys
                if now[k] is not None and before[k] is not None}, now

    name = "ece: vrnic_ece s1->r, 1% loss both ways"
    try:
        # Only ECE may turn it on: the device default stays off.
        set_sr([s1, s2, r], 0)
        set_ece([s1, s2, r], 1)
        st0 = link_stats(s1, keys)
        fab.set_link("r", {"impair": {"loss": 0.01}})
        try:
            ece_run(stage, name, r, r.ip, s1, s1.ip, "", ECE_SR, ECE_SR)
            d, st1 = s1_deltas(st0)
            ok = d.get("sack_rcvd", 0) > 0 and d.get("roce_adp_retrans", 0) > 0
            stage.record("%s: s1 recovered on SACKs" % name,
                         "pass" if ok else "fail", "s1 deltas %s" % d)
            name = "ece: r withdraws its offer, 1% loss"
            set_ece([r], 0)
            ece_run(stage, name, r, r.ip, s1, s1.ip, "", ECE_NONE, ECE_NONE)
            d, st2 = s1_deltas(st1)
            ok = d.get("sack_rcvd", -1) == 0
            stage.record("%s: go-back-N, no SACK" % name,
                         "pass" if ok else "fail", "s1 deltas %s" % d)
            # Neither offers; each QP sets its own transport through the
            # provider's direct verbs (vrnicdv_set_qp_transport).
            name = "ece: no offer, vrnicdv on both QPs, 1% loss"
            set_ece([s1], 0)
            ece_run(stage, name, r, r.ip, s1, s1.ip, "-t 1:64:8", ECE_SR,
                    ECE_SR, want_req=ECE_NONE,
                    dv={"selective_repeat": 1, "spray_paths": 8,
                        "send_window": 64})
            d, _ = s1_deltas(st2)
            ok = d.get("sack_rcvd", 0) > 0 and d.get("roce_adp_retrans", 0) > 0
            stage.record("%s: s1 recovered on SACKs" % name,
                         "pass" if ok else "fail", "s1 deltas %s" % d)
            # The administrator's gate: a context opened while
            # user_transport is 0 may not choose (EOPNOTSUPP).
            name = "ece: user_transport 0"
            knob = USER_TRANSPORT_KNOB % s1.rdma
            s1.vm.check("echo 0 > %s" % knob)
            try:
                rc, out = s1.vm.run("%s -c -a %s -b %s -p %d -t 1:64:8 "
                                    "2>&1" % (ECE, r.ip, s1.ip, ECE_PORT),
                                    timeout=60)[:2]
            finally:
                s1.vm.check("echo 1 > %s" % knob)
            ok = rc != 0 and "data: FAIL vrnicdv_set_qp_transport: " \
                "Operation not supported" in out
            stage.record("%s: vrnicdv_set_qp_transport is refused with "
                         "EOPNOTSUPP" % name, "pass" if ok else "fail",
                         "exit %s: %s" % (rc, out.strip()[-300:]))
        finally:
            fab.set_link("r", {"impair": {"loss": 0.0}})
            set_ece([s1, r], 1)
    except (fabric.FabricError, vmlib.VMError) as e:
        stage.record(name, "fail", str(e))
    name = "ece: vrnic_ece vrnic(s2)->rxe"
    try:
        if "rxe0" not in rxe.vm.run("rdma link show")[1]:
            rxe.vm.check(shipped("rxe-up") + "bash /tmp/rxe-up 1500 %s"
                         % rxe.ip)
        rxe.rdma = "rxe0"
        ece_run(stage, name, rxe, rxe.ip, s2, "10.10.3.1", "-n 50",
                "not supported (Operation not supported)", ECE_NONE)
        # The other way: the REQ carries no ECE, librdmacm's passive side
        # sets nothing, and s2's QP reports and uses nothing agreed.
        name = "ece: vrnic_ece rxe->vrnic(s2)"
        ece_run(stage, name, s2, "10.10.3.1", rxe, rxe.ip, "-n 50",
                ECE_NONE, "not supported (Operation not supported)",
                want_req="vendor 0 options 0")
    except vmlib.VMError as e:
        stage.record(name, "fail", str(e))


SPRAY_KNOB = "/sys/kernel/debug/vrnic/%s/spray_paths"
SPINES = ("spine0", "spine1")


def set_spray(nics, n):
    for nic in nics:
        nic.vm.check("mountpoint -q /sys/kernel/debug || mount -t debugfs "
                     "none /sys/kernel/debug; echo %d > %s && grep -qx %d %s"
                     % (n, SPRAY_KNOB % nic.rdma, n, SPRAY_KNOB % nic.rdma))


def spine_tx(fab):
    """Packets leaf0 sent towards each spine so far."""
    c = fab.counters()
    return [sum(q["tx_packets"] for q in fabric.port(c, sp, switch="leaf0"))
            for sp in SPINES]


def multipath_tests(stage, fab, s1, r):
    """e: leaf-spine.json, s1 under leaf0 and r under leaf1, two spines,
    ECMP by 5-tuple.  vrnic_ece s1 -> r (selective repeat agreed through
    ECE): with one source port the flow takes one spine; with spray_paths
    64 on both devices (debugfs) s1's requests leave from 64 ports and
    both spines carry at least a fifth each (each port hashes to a spine
    on its own: with 8 ports a 2/6 split or worse came about 29% of the
    time, with 64 below 20% is about 1 in 10^6), every byte still
    checked (issue 25)."""
    for spray in (0, 64):
        name = "multipath: vrnic_ece s1->r, spray_paths %d" % spray
        try:
            set_spray([s1, r], spray)
            t0 = spine_tx(fab)
            ece_run(stage, name, r, r.ip, s1, s1.ip, "", ECE_SR, ECE_SR,
                    spray=spray if spray > 1 else 1)
            t1 = spine_tx(fab)
        except (fabric.FabricError, vmlib.VMError) as e:
            stage.record(name, "fail", str(e))
            continue
        finally:
            try:
                set_spray([s1, r], 0)
            except vmlib.VMError:
                pass
        d = [b - a for a, b in zip(t0, t1)]
        share = min(d) / sum(d) if sum(d) else 0.0
        # A 4 MiB WRITE and 200 x 64 KiB SENDs at MTU 1024: some 17000
        # packets from s1 (the READ back adds 64 requests).
        if spray:
            ok = sum(d) > 10000 and share >= 0.2
            what = "both spines carry the flow"
        else:
            ok = sum(d) > 10000 and share <= 0.05
            what = "one spine carries the flow"
        stage.record("%s: %s" % (name, what), "pass" if ok else "fail",
                     "leaf0 -> %s: %s packets" % ("/".join(SPINES), d))


ECN_COUNTER = "np_ecn_marked_roce_packets"


def ecn_count(nic):
    """vrnic's count of CE-marked RoCE packets received, or None."""
    out = nic.vm.check("rdma statistic show link %s/1" % nic.rdma)
    m = re.search(r"\b%s (\d+)" % ECN_COUNTER, out)
    return int(m.group(1)) if m else None


def ecn_test(stage, fab, s1, r):
    """d: CE marks on r's slow port for an ECT flow on priority 3, and
    r's vrnic counts each one it received."""
    name = "ecn: ib_write_bw --tclass=%d s1->r, r's port at 500 Mb/s" \
        % ECN_TCLASS
    before = ecn_count(r)
    flows(stage, name, [(s1, s1.ip, r, r.ip, 18650,
                         "--tclass=%d" % ECN_TCLASS)])
    c = counters(stage, fab, name)
    if c is None:
        return
    q = fabric.port(c, "r")
    marked = q[3]["ce_marked"]
    detail = "ce_marked on r's priority 3: %d; tx packets per priority %s" \
        % (marked, [x["tx_packets"] for x in q])
    stage.record("%s: CE marks in the switch counters" % name,
                 "pass" if marked > 0 else "fail", detail)
    after = ecn_count(r)
    label = "%s: r's vrnic counted them (%s == switch ce_marked)" % (
        name, ECN_COUNTER)
    if before is None or after is None:
        stage.record(label, "fail", "no %s in rdma statistic of %s"
                     % (ECN_COUNTER, r.rdma))
    else:
        stage.record(label, "pass" if after - before == marked else "fail",
                     "switch %d, %s +%d" % (marked, r.rdma, after - before))
    # The fabric writes every counter once a second: a flow shorter than
    # that may have ended before the next line (seen in CI: max 0 right
    # after a 0.2 s flow), so wait for one, at most 3 s.
    ce = 0
    deadline = time.time() + 3
    while ce == 0 and time.time() < deadline:
        try:
            with open(fab.telemetry) as f:
                for line in f:
                    if '"counters"' in line and '"ce_marked":' in line:
                        ce = max([ce] + [int(x) for x in re.findall(
                            r'"ce_marked":(\d+)', line)])
        except OSError:
            pass
        if ce == 0:
            time.sleep(0.2)
    stage.record("%s: CE marks in the telemetry file" % name,
                 "pass" if ce > 0 else "fail", "max ce_marked %d" % ce)


def incast_specs(s1, s2, r, extra=""):
    return [(s1, s1.ip, r, "10.10.1.2", 18660, extra),
            (s2, s2.ip, r, "10.10.2.2", 18661, extra)]


def incast_drop_test(stage, fab, s1, s2, r):
    """e: two senders into r's 500 Mb/s port, lossy, 128 KiB buffer."""
    name = "incast lossy"
    flows(stage, name, incast_specs(s1, s2, r))
    c = counters(stage, fab, name)
    if c is None:
        return
    lost = fabric.drops(c)
    n = sum(lost.get(k, 0) for k in ("buffer", "queue_limit"))
    stage.record("%s: the switch dropped (buffer full)" % name,
                 "pass" if n > 0 else "fail", "drops %s" % lost)


PAUSE = "rx_prio3_pause"
with open(os.path.join(TOPOS, "incast-pfc.json")) as _f:
    PFC_HEADROOM = json.load(_f)["defaults"]["pfc"]["headroom"]


def pause_count(nic):
    """The rx_prio3_pause counter of nic's netdev, or None if absent."""
    out = nic.vm.check("ethtool -S %s" % nic.netdev)
    m = re.search(r"\b%s: (\d+)" % PAUSE, out)
    return int(m.group(1)) if m else None


def incast_pfc_test(stage, fab, s1, s2, r):
    """f: the same incast on lossless priority 3 with XOFF 32 KiB."""
    name = "incast PFC"
    before = {n.host: pause_count(n) for n in (s1, s2)}
    # Four QPs per sender: together they keep more in flight than the
    # XOFF threshold and the headroom hold (one QP alone stays within
    # them), so a sender that ignores the pauses overflows the headroom.
    flows(stage, name, incast_specs(s1, s2, r, "-q 8 --tclass=%d"
                                    % ECN_TCLASS))
    c = counters(stage, fab, name)
    if c is None:
        return
    pfc = {n.host: fabric.port(c, n.host)[3]["pfc_tx"] for n in (s1, s2)}
    stage.record("%s: the switch sent pause frames to both senders" % name,
                 "pass" if all(pfc.values()) else "fail",
                 "pfc_tx on priority 3 %s" % pfc)
    # Nothing lost: every cause counts but port_down, a frame flooded to
    # a port whose NIC has not come back since the restart (the rxe
    # host's virtio-net reconnects only when its guest reads it), which
    # is no failure of PFC.
    every = fabric.drops(c)
    lost = {k: v for k, v in every.items() if k != "port_down"}
    # The headroom watermark: the most bytes a sender had sent into the
    # switch past the XOFF threshold (its pause came late or lapsed).
    hdrm = {n.host: fabric.port(c, n.host)[3].get("headroom_max")
            for n in (s1, s2)}
    stage.record("%s: the switch dropped nothing (port_down aside)" % name,
                 "pass" if not lost else "fail",
                 "drops %s; headroom_max on priority 3 %s of %d bytes"
                 % (every, hdrm, PFC_HEADROOM))
    print("  | headroom_max on priority 3: %s of %d bytes"
          % (hdrm, PFC_HEADROOM), flush=True)
    for n in (s1, s2):
        after = pause_count(n)
        label = "%s: %s counted the pause frames the switch sent it " \
            "(ethtool -S %s == pfc_tx)" % (name, n.host, PAUSE)
        if after is None or before[n.host] is None:
            stage.record(label, "fail", "no %s in ethtool -S %s: vrnic "
                         "does not count received PFC frames (the NIC "
                         "side of issue 28)" % (PAUSE, n.netdev))
            continue
        got = after - before[n.host]
        stage.record(label, "pass" if got == pfc[n.host] else "fail",
                     "switch pfc_tx %d, %s rx_prio3_pause +%d"
                     % (pfc[n.host], n.netdev, got))

# Issue 24 in VMs: CNPs, DCQCN, and a Linux RED marker.

CC_COUNTERS = ("np_ecn_marked_roce_packets", "np_cnp_sent",
               "rp_cnp_handled", "rp_cnp_ignored")
CC_DIR = "/sys/kernel/debug/vrnic/%s/cc_params"
CNP_PRIO = 6        # np_cnp_prio's default (DSCP 48 >> 3 in the switch)
ECN_KMAX = 32768    # ecn.json


def cc_counters(vm, nics):
    """{host: {counter: value}} from hw_counters of nics (all on vm)."""
    script = ""
    for n in nics:
        script += ("for f in %s; do echo %s $f $(cat /sys/class/infiniband/"
                   "%s/ports/1/hw_counters/$f 2>/dev/null); done\n"
                   % (" ".join(CC_COUNTERS), n.host, n.rdma))
    out = {n.host: {} for n in nics}
    for line in vm.check(script).splitlines():
        w = line.split()
        if len(w) == 3 and w[0] in out:
            out[w[0]][w[1]] = int(w[2])
    return out


def cc_all(nics):
    """cc_counters of nics on any VMs, one agent call per VM."""
    out = {}
    for vm in {id(n.vm): n.vm for n in nics}.values():
        out.update(cc_counters(vm, [n for n in nics if n.vm is vm]))
    return out


def cc_delta(before, after):
    """after - before per host and counter; a counter missing on either
    side is absent (the device or driver does not expose it)."""
    return {h: {k: after[h][k] - before[h][k] for k in CC_COUNTERS
                if k in before.get(h, {}) and k in after[h]}
            for h in after}


def set_cc(nics, algo):
    """cc_algo := algo (dcqcn, swift, none) on each nic's device, through
    the driver's mlx5-style debugfs; raises VMError if it does not take."""
    for n in nics:
        d = CC_DIR % n.rdma
        n.vm.check("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
                   "/sys/kernel/debug; echo %s > %s/cc_algo && "
                   "grep -qx %s %s/cc_algo" % (algo, d, algo, d))


def prio_drops(c, prio):
    """Every drop of priority prio in the fabric (all ports, causes)."""
    return sum(sum(q["drops"].values()) for sw in c["switches"]
               for p in sw["ports"] for q in p["prio"] if q["prio"] == prio)


def port_sum(c, peer, key, prio=None):
    return sum(q[key] for q in fabric.port(c, peer)
               if prio is None or q["prio"] == prio)


def cnp_test(stage, fab, s1, s2, r):
    """g (ecn.json): DCQCN on both senders' devices, one ECT flow s1->r
    into r's marking port.  Every CE mark r counts is one the switch
    made; every CNP r sends reaches a sender's reaction point, handled or
    ignored (the QP may be gone), or is a priority-6 drop in the switch."""
    name = "cnp: DCQCN on, ib_write_bw --tclass=%d s1->r" % ECN_TCLASS
    c0 = fab.counters()
    h0 = cc_all([s1, s2, r])
    flows(stage, name, [(s1, s1.ip, r, r.ip, 18650,
                         "--tclass=%d" % ECN_TCLASS)])
    time.sleep(1)       # CNPs still in flight reach the sender
    c1 = counters(stage, fab, name)
    if c1 is None:
        return
    d = cc_delta(h0, cc_all([s1, s2, r]))
    print("  | counter deltas %s" % d, flush=True)
    missing = [(h, k) for h in d for k in CC_COUNTERS if k not in d[h]]
    if missing:
        stage.record("%s: the four CC counters" % name, "fail",
                     "missing in hw_counters: %s" % missing)
        return
    sent = d["r"]["np_cnp_sent"]
    taken = sum(d[h]["rp_cnp_handled"] + d[h]["rp_cnp_ignored"]
                for h in ("s1", "s2"))
    lost = prio_drops(c1, CNP_PRIO) - prio_drops(c0, CNP_PRIO)
    sw_rx = port_sum(c1, "r", "rx_packets", CNP_PRIO) - \
        port_sum(c0, "r", "rx_packets", CNP_PRIO)
    sw_tx = sum(port_sum(c1, h, "tx_packets", CNP_PRIO) -
                port_sum(c0, h, "tx_packets", CNP_PRIO) for h in ("s1", "s2"))
    detail = ("r np_cnp_sent +%d; s1+s2 rp_cnp_handled+rp_cnp_ignored +%d "
              "(s1 handled %d ignored %d); priority-%d drops %d; switch "
              "priority %d: rx from r %d, tx to s1+s2 %d" % (
                  sent, taken, d["s1"]["rp_cnp_handled"],
                  d["s1"]["rp_cnp_ignored"], CNP_PRIO, lost, CNP_PRIO,
                  sw_rx, sw_tx))
    stage.record("%s: r sent CNPs (np_cnp_sent)" % name,
                 "pass" if sent > 0 else "fail", detail)
    stage.record("%s: np_cnp_sent on r == rp_cnp_handled + rp_cnp_ignored "
                 "on the senders + priority-%d drops" % (name, CNP_PRIO),
                 "pass" if sent > 0 and sent == taken + lost else "fail",
                 detail)
    stage.record("%s: s1's reaction point handled CNPs (rp_cnp_handled)"
                 % name, "pass" if d["s1"]["rp_cnp_handled"] > 0 else "fail",
                 detail)
    marked = port_sum(c1, "r", "ce_marked") - port_sum(c0, "r", "ce_marked")
    got = d["r"]["np_ecn_marked_roce_packets"]
    stage.record("%s: r's np_ecn_marked_roce_packets == switch ce_marked "
                 "towards r" % name,
                 "pass" if marked > 0 and got == marked else "fail",
                 "switch +%d, r +%d" % (marked, got))


QP_LINE = re.compile(r"^link (\S+)/\d+ .*")


def parse_qp_rates(out):
    """[(rdma device, cc_rate_mbps)] of the RC QP lines in rdma res show
    qp -dd output."""
    rates = []
    for line in out.splitlines():
        m = QP_LINE.match(line.strip())
        r = re.search(r"\b(?:drv_)?cc_rate_mbps[ :]+(\d+)", line)
        if m and r and " type RC " in line:
            rates.append((m.group(1), int(r.group(1))))
    return rates


def jain(xs):
    return sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)) \
        if xs and any(xs) else 0.0


DCQCN_SECONDS = 4


def sender_bytes(fab, vm, seconds):
    """Every 0.5 s until both incast clients on vm exited (bounded): the
    bytes the switch took from s1 and from s2, [[s1, s2], ..]."""
    snaps = []
    for _ in range(2 * (seconds + 20)):
        time.sleep(0.5)
        try:
            c = fab.counters()
            snaps.append([port_sum(c, h, "rx_bytes") for h in ("s1", "s2")])
        except fabric.FabricError:
            pass
        if vm.run("[ -e /tmp/cli0.rc ] && [ -e /tmp/cli1.rc ]")[0] == 0:
            break
    return snaps


def both_sending(snaps):
    """[s1 bytes, s2 bytes] over the intervals of sender_bytes in which
    both sent.  perftest's -D figures cover each client's own window, and
    the two windows need not overlap (two runs reported 56 MB/s each
    through the 62.5 MB/s port): fairness is judged on the bytes the
    switch took from each sender while both were sending."""
    both = [0, 0]
    for a, b in zip(snaps, snaps[1:]):
        step_bytes = [y - x for x, y in zip(a, b)]
        if min(step_bytes) > 65536:
            both = [x + y for x, y in zip(both, step_bytes)]
    return both



def fair_share(stage, name, snaps, more=""):
    """Records Jain's index >= 0.8 of both_sending(snaps)."""
    both = both_sending(snaps)
    j = jain(both)
    stage.record("%s: fair share (Jain >= 0.8 over the bytes each sender "
                 "sent while both were sending)" % name,
                 "pass" if min(both) > 0 and j >= 0.8 else "fail",
                 "switch rx from s1, s2 while both sent: %s bytes, Jain "
                 "%.3f%s" % (both, j, more))

def r_queue(fab, t0, t1):
    """The queue towards r on priority 3 between t0 and t1 (fabric ns),
    over the transfer's span (the first to the last sample with bytes
    queued): queue_stats' dict, or None without samples."""
    import fabric_report as report
    tel = report.load(fab.telemetry)
    key = report.parse_port("sw0:r:3", tel)     # the counters name r's port
    tel = report.window(tel, t0, t1)
    busy = [t for t, x in tel.samples if x.get(key)]
    if not busy:
        return None
    tel = report.window(tel, busy[0], busy[-1])
    q = report.queue_stats(tel, key)
    pairs = report._weighted(tel, key, q["interval_ns"])
    n = sum(w for _, w in pairs)
    q["below_kmax"] = sum(w for v, w in pairs if v < ECN_KMAX) / n \
        if n else 0.0
    return q


def incast_dcqcn_test(stage, fab, s1, s2, r):
    """h (ecn.json): s1 and s2 into r's 500 Mb/s marking port, DCQCN on
    both senders' devices, for DCQCN_SECONDS: both complete, share the
    port fairly, both reaction points handle CNPs, and a sender's QP is
    paced below its line rate in the middle of the run."""
    name = "incast DCQCN"
    bw = "ib_write_bw -s 65536 -D %d" % DCQCN_SECONDS
    h0 = cc_all([s1, s2])
    t0 = fab.ping()["t_ns"]
    seen, raw, snaps = [], [], []

    def sample():
        """Every 0.5 s until both clients exited (bounded): the bytes the
        switch took from each sender.  The QPs' rates are sampled in the
        guest meanwhile (qpmon), every 50 ms plus the listing's own time:
        one agent round trip per sample gave as few as three samples
        per run on a loaded host, and a run whose three all fell between
        two CNPs (the rate back at line rate) failed."""
        start(s1.vm, "qpmon", "sh -c 'for i in $(seq 600); do [ -e "
              "/tmp/cli0.rc ] && [ -e /tmp/cli1.rc ] && break; rdma res "
              "show qp -dd; sleep 0.05; done'", DCQCN_SECONDS + 60)
        snaps.extend(sender_bytes(fab, s1.vm, DCQCN_SECONDS))

    lines = []
    flows(stage, name, incast_specs(s1, s2, r, "--tclass=%d" % ECN_TCLASS),
          bw=bw, during=sample, lines=lines)
    t1 = fab.ping()["t_ns"]
    _, mon = collect(s1.vm, "qpmon", DCQCN_SECONDS + 60)
    seen.extend(parse_qp_rates(mon))
    raw.append(mon)
    time.sleep(1)
    d = cc_delta(h0, cc_all([s1, s2]))
    print("  | counter deltas %s" % d, flush=True)
    print("  | cc_rate_mbps samples of snd's QPs (%d): %s" % (
        len(seen), seen[:40]), flush=True)
    bws = [float(x.split()[3]) if len(x.split()) > 3 else 0.0
           for x in lines]
    fair_share(stage, name, snaps, " (perftest BW average %s MB/s, Jain "
               "%.3f)" % (bws, jain(bws)))
    handled = {h: d[h].get("rp_cnp_handled", 0) for h in ("s1", "s2")}
    stage.record("%s: both reaction points handled CNPs" % name,
                 "pass" if all(handled.values()) else "fail",
                 "rp_cnp_handled %s" % handled)
    line = {n.rdma: n.speed_mbps for n in (s1, s2)}
    below = [(dev, v) for dev, v in seen if dev in line and line[dev]
             and 0 < v < line[dev]]
    label = "%s: a sender's QP paced below line rate mid-run (rdma res " \
        "show qp -dd cc_rate_mbps)" % name
    if not seen:
        # Seen in two runs of four: the listing ended after the GSI QPs
        # while the transfer ran (the RC QPs' entries missing), so there
        # is nothing to check.
        stage.record(label, "skip", "rdma res show qp -dd listed no RC QP "
                     "of s1/s2 during the transfer (a driver or device "
                     "issue, not a rate): %s" % (
                         raw[-1][-300:] if raw else ""))
    else:
        stage.record(label, "pass" if below else "fail",
                     "line rate %s Mb/s, %d samples, %d below it: %s" % (
                         line, len(seen), len(below), (below or seen)[:12]))
    # Reported, not asserted: the bottleneck queue from the telemetry.
    try:
        q = r_queue(fab, t0, t1)
        if not q:
            print("  | no queue statistics: no sample held bytes", flush=True)
        else:
            print("  | queue towards r, priority 3, during the run: p50 %d "
                  "p99 %d max %d bytes; below Kmax (%d) %.1f%% of %d "
                  "samples" % (q["p50"], q["p99"], q["max"], ECN_KMAX,
                               100 * q["below_kmax"], q["samples"]),
                  flush=True)
    except (OSError, ValueError, KeyError, IndexError) as e:
        print("  | no queue statistics: %s" % e, flush=True)


# Swift's target through the switch: the base round trip between two
# guests' devices is about 200 µs here, and Swift starves below it
# (Documentation/vrnic-spec.rst); incast.json uses the same.
SWIFT_TARGET_US = 500
SWIFT_SECONDS = 4
# Swift's target puts about 19 KB there ((500 - ~200 µs) of 500 Mb/s);
# with cc_algo none the same incast held p99 1.07 MB (2026-11-29).  The
# bound leaves room for the host descheduling the switch for a few ms
# (the bench's Swift incast peaked at 81 KiB).
SWIFT_QUEUE_P99 = 256 * 1024


def incast_swift_test(stage, fab, s1, s2, r):
    """i (ecn.json): s1 and s2 into r's 500 Mb/s port with Swift, the
    delay-based algorithm, on the senders' devices (priority 3 as in h:
    r's CNPs for the CE marks reach reaction points that ignore them):
    both complete, share the port fairly, and the queue stays far below
    what the same incast without congestion control builds, with no drop
    and no ACK timeout.  The devices get their algorithm and target back
    afterwards."""
    name = "incast Swift"
    bw = "ib_write_bw -s 65536 -D %d" % SWIFT_SECONDS
    target = ("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
              "/sys/kernel/debug; cat %s/swift_base_target_us")
    old = {n.host: n.vm.check(target % (CC_DIR % n.rdma)).strip()
           for n in (s1, s2)}
    snaps, c0, c1, t0, t1 = [], None, None, None, None
    try:
        for n in (s1, s2):
            vmlib.write_cc_params(n.vm, [n.rdma], [
                ("swift_base_target_us", SWIFT_TARGET_US),
                ("cc_algo", "swift")])
        c0 = fab.counters()
        e0 = {n.host: link_stats(n, ("ack_timeouts",)) for n in (s1, s2)}
        t0 = fab.ping()["t_ns"]
        flows(stage, name, incast_specs(s1, s2, r, "--tclass=%d" % ECN_TCLASS),
              bw=bw, during=lambda: snaps.extend(sender_bytes(
                  fab, s1.vm, SWIFT_SECONDS)))
        t1 = fab.ping()["t_ns"]
        c1 = counters(stage, fab, name)
        tmo = link_deltas({"s1": s1, "s2": s2}, e0, ("ack_timeouts",))
    except vmlib.VMError as e:
        stage.record("%s: cc_algo swift on s1 and s2 and the guests' "
                     "counters" % name, "fail", str(e))
        return
    finally:
        for n in (s1, s2):
            vmlib.write_cc_params(n.vm, [n.rdma], [
                ("cc_algo", "none"),
                ("swift_base_target_us", old[n.host])])
    fair_share(stage, name, snaps)
    if c1 is not None:
        # Priority 3 only: the fabric also counts what it floods towards
        # the rxe host's port on priority 0 while that NIC is down.
        lost = prio_drops(c1, 3) - prio_drops(c0, 3)
        tmo = {h: tmo[h]["ack_timeouts"] for h in tmo}
        stage.record("%s: no drop of priority 3 in the switch, no ACK "
                     "timeout on s1 or s2" % name,
                     "pass" if lost == 0 and all(
                         v == 0 for v in tmo.values()) else "fail",
                     "drops %d, ack_timeouts %s" % (lost, tmo))
    try:
        q = r_queue(fab, t0, t1)
    except (OSError, ValueError, KeyError, IndexError) as e:
        q, err = None, str(e)
    else:
        err = "no sample held bytes"
    stage.record("%s: the queue towards r stays small (p99 < %d KiB)"
                 % (name, SWIFT_QUEUE_P99 // 1024),
                 "pass" if q and q["p99"] < SWIFT_QUEUE_P99 else "fail",
                 "p50 %d p99 %d max %d bytes over %d samples" % (
                     q["p50"], q["p99"], q["max"], q["samples"])
                 if q else err)


def dcqcn_tests(stage, fab, s1, s2, r):
    """g and h with DCQCN on the senders' devices, then back to none."""
    try:
        set_cc([s1, s2], "dcqcn")
    except vmlib.VMError as e:
        stage.record("cnp: cc_algo dcqcn on s1 and s2 (debugfs)", "fail",
                     str(e))
        return
    try:
        cnp_test(stage, fab, s1, s2, r)
        incast_dcqcn_test(stage, fab, s1, s2, r)
    finally:
        set_cc([s1, s2], "none")


# The Linux RED switch VM (issue 28's cross-check): bridge, sch_tbf and
# sch_red (and llc, stp) are in the image (scripts/build-image.sh).
RED_MODULES = ["bridge", "sch_tbf", "sch_red"]
RED_RATE = "50mbit"
# red takes ecn nodrop: without nodrop it drops what is not ECT while its
# average is above max, and under tbf the average did not decay once the
# queue was empty: perftest's closing TCP exchange was dropped until the
# 120 s timeout.  At most 16 WRITEs of 64 KiB in flight, and a 4 s ACK timeout: a window
# within red's 2 MB limit, so that nothing is dropped (go-back-N at
# 50 Mb/s would take long), and no retransmission while the queue holds
# up to 320 ms of it.
RED_BW = "ib_write_bw -s 65536 -n 100 -t 16 -u 20"
RED_STATS = re.compile(r"marked (\d+) early (\d+) pdrop (\d+)")


def load_modules(vm):
    """modprobe each of RED_MODULES in vm (the image carries them)."""
    vm.check("modprobe -a %s" % " ".join(RED_MODULES), timeout=60)


def red_stats(vm, dev):
    out = vm.check("tc -s qdisc show dev %s" % dev)
    m = RED_STATS.search(out)
    return (tuple(int(x) for x in m.groups()) if m else None), out


def red_test(stage, fab, vms, s1, r):
    """i: the fabric stops; VM sw (two virtio-net NICs, no vrnic) listens
    on its s1 and r sockets, and s1's and r's NICs reconnect to it.  A
    Linux bridge joins them, and r's side leaves through tbf at RED_RATE
    with tc red ecn under it: the bottleneck.  A flow s1->r with DCQCN on
    s1: RED marks CE, r counts every mark that reached it, and s1's
    reaction point takes r's CNPs."""
    name = "red: Linux bridge + tc red ecn (VM sw) between s1 and r"
    t = time.time()
    fab.stop()
    sw = vmlib.VM("sw", len(vms), load=False, mem_mb=1024)
    for j, host in enumerate(("s1", "r")):
        # Where the NIC of host joined the fabric (r: its TCP port).
        nic = vmlib.Nic(host, "virtio", [], vmlib.fab_sock(fab, host),
                        "52:54:00:76:%02x:%02x" % (0x80 + len(vms), j + 1),
                        listen=True)
        nic.vm = sw
        sw.fabric_nics.append(nic)
        sw.nics[host] = nic
        if os.path.exists(nic.sock):
            os.unlink(nic.sock)
    try:
        sw.start()
        sw.wait_ready()
        print("   VM sw booted in %.1f s" % (time.time() - t), flush=True)
        load_modules(sw)
        out = sw.check(vmlib._NIC_SETUP + """
modprobe virtio_net
for i in $(seq 100); do a=$(byaddr %s) && b=$(byaddr %s) && break
    sleep 0.1; done
[ -n "$b" ] || exit 1
ip link add br0 type bridge
for d in $a $b; do ip link set dev $d master br0; ip link set dev $d up; done
ip link set dev br0 up
tc qdisc add dev $b root handle 1: tbf rate %s burst 32kb latency 50ms
tc qdisc add dev $b parent 1:1 handle 10: red limit 2000000 min 30000 \
    max 90000 avpkt 1500 burst 55 ecn nodrop bandwidth %s probability 0.5
echo "EGRESS $b"
""" % (sw.nics["s1"].mac, sw.nics["r"].mac, RED_RATE, RED_RATE))
        egress = re.search(r"EGRESS (\S+)", out).group(1)
        for nic in (s1, r):
            nic.vm.check("for i in $(seq 300); do grep -q ACTIVE /sys/class/"
                         "infiniband/%s/ports/1/state && exit 0; sleep 0.1; "
                         "done; exit 1" % nic.rdma, timeout=60)
        s1.vm.check("for i in $(seq 20); do ping -c 1 -W 1 -I %s %s && "
                    "exit 0; done; exit 1" % (s1.netdev, r.ip), timeout=60)
        print("   the bridge carries s1 <-> r, %.1f s after the fabric "
              "stopped" % (time.time() - t), flush=True)
        stage.record("%s: boot, bridge, tbf %s + red ecn on the port to r"
                     % (name, RED_RATE), "pass")
        set_cc([s1], "dcqcn")
        h0 = cc_all([s1, r])
        st0, _ = red_stats(sw, egress)
        flows(stage, name, [(s1, s1.ip, r, r.ip, 18670,
                             "--tclass=%d" % ECN_TCLASS)],
              bw=RED_BW)
        time.sleep(1)
        st1, tcout = red_stats(sw, egress)
        d = cc_delta(h0, cc_all([s1, r]))
        set_cc([s1], "none")
    except (vmlib.VMError, AttributeError) as e:
        stage.record(name, "fail", str(e)[-600:])
        sw.kill()
        return
    sw.kill()
    show(tcout, 8)
    print("  | counter deltas %s" % d, flush=True)
    if st0 is None or st1 is None:
        stage.record("%s: red marked" % name, "fail",
                     "no marked/pdrop in tc -s qdisc:\n%s" % tcout)
        return
    marked, early, pdrop = (b - a for a, b in zip(st0, st1))
    stage.record("%s: tc red marked packets CE" % name,
                 "pass" if marked > 0 else "fail",
                 "marked %d, early drops %d, pdrop %d" % (marked, early,
                                                         pdrop))
    got = d["r"].get("np_ecn_marked_roce_packets")
    # RED counts a mark before its queue takes the packet: a marked packet
    # the full queue then drops (pdrop) never reaches r.  Nothing else
    # through that port is ECT (perftest's TCP does not negotiate ECN).
    ok = got is not None and marked > 0 and marked - pdrop <= got <= marked
    stage.record("%s: r's np_ecn_marked_roce_packets == red's marks (less "
                 "pdrop)" % name, "pass" if ok else "fail",
                 "red marked %d (pdrop %d), r counted %s" % (marked, pdrop,
                                                            got))
    handled = d["s1"].get("rp_cnp_handled", 0)
    stage.record("%s: s1 (DCQCN) handled CNPs" % name,
                 "pass" if handled > 0 else "fail",
                 "s1 rp_cnp_handled +%d rp_cnp_ignored +%s; r np_cnp_sent "
                 "+%s" % (handled, d["s1"].get("rp_cnp_ignored"),
                          d["r"].get("np_cnp_sent")))



def main():
    stage = Stage("fabric")
    t0 = time.time()
    fab = fabric.Fabric(os.path.join(TOPOS, "pair.json"), FABRIC_DIR)
    try:
        fab.start()
        # Each vrnic times PFC pauses at the speed the PFC topology's
        # switch port towards it runs (10 Gb/s), as the switch does.
        pfc_topo = os.path.join(TOPOS, "incast-pfc.json")
        vms = vmlib.boot_fabric(fab, LAYOUT, speeds={
            h: fabric.link_mbps(pfc_topo, h) for h in VRNIC_HOSTS})
        fab.wait_hosts_up(["s1", "s2", "r"], timeout=30)
    except (fabric.FabricError, vmlib.VMError) as e:
        stage.record("boot the fabric and VMs snd and rcv", "fail", str(e))
        fab.stop()
        return 1
    stage.record("boot the fabric and VMs snd and rcv", "pass")
    print("booted in %.1f s" % (time.time() - t0), flush=True)
    snd, rcv = vms
    s1, s2, r, rxe = (snd.nics["s1"], snd.nics["s2"], rcv.nics["r"],
                      rcv.nics["rxe"])
    sections = [
        (None, "pair", lambda: pair_tests(stage, fab, s1, r)),
        (None, "rxe", lambda: rxe_tests(stage, s2, rxe)),
        (None, "inject", lambda: inject_test(stage, fab, s1, r)),
        (None, "inject sr", lambda: inject_test(stage, fab, s1, r, True)),
        (None, "ece", lambda: ece_tests(stage, fab, s1, s2, r, rxe)),
        (None, "loss", lambda: loss_tests(stage, fab, s1, r)),
        (None, "rxe loss", lambda: rxe_loss_tests(stage, fab, s2, rxe)),
        ("leaf-spine.json", "multipath",
         lambda: multipath_tests(stage, fab, s1, r)),
        ("ecn.json", "ecn", lambda: ecn_test(stage, fab, s1, r)),
        (None, "dcqcn", lambda: dcqcn_tests(stage, fab, s1, s2, r)),
        (None, "swift", lambda: incast_swift_test(stage, fab, s1, s2, r)),
        ("incast-drop.json", "incast lossy",
         lambda: incast_drop_test(stage, fab, s1, s2, r)),
        ("incast-pfc.json", "incast PFC",
         lambda: incast_pfc_test(stage, fab, s1, s2, r)),
        # Last: it stops the fabric for good.
        (None, "red", lambda: red_test(stage, fab, vms, s1, r))]
    only = os.environ.get("VRNIC_FABRIC_ONLY")
    if only:    # development: a subset, e.g. "ecn,dcqcn" (topologies kept)
        sections = [x for x in sections if x[1] in only.split(",")]
    try:
        for topology, what, run in sections:
            t = time.time()
            if topology is None or restart(stage, fab, vms, topology):
                run()
            print("== %s: %.0f s" % (what, time.time() - t), flush=True)
    except (fabric.FabricError, vmlib.VMError) as e:
        stage.record("harness", "fail", str(e))
    finally:
        for vm in vms:
            vm.kill()
        fab.stop()
    print("fabric tests: %.0f s" % (time.time() - t0), flush=True)
    return 1 if stage.failed else 0


if __name__ == "__main__":
    sys.exit(main())

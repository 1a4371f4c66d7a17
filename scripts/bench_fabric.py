#!/usr/bin/python3
"""make bench, the fabric section (issues 28 and 24): vrnic through
vrnic-fabric, in the same run as the direct-wire sections.

Two VMs, booted once through the fabric: VM snd carries two vrnic NICs,
hosts s1 (10.10.1.1) and s2 (10.10.2.1); VM rcv one vrnic, host r
(10.10.1.2 and 10.10.2.2).  Each VM carries one more vrnic, d1 and d2
(10.10.3.1 and .2), on a direct QEMU-to-QEMU wire that bypasses the
switch.  Every vrnic NIC at MTU 9000 (RDMA path MTU
4096), as on the direct wire.  The fabric restarts on each topology (the
same host names: QEMU's reconnect-ms brings every NIC back):

  tests/bench/topologies/fabric-pair.json  the shipped pair's switch with
      these host names: ib_write_bw 64 KiB s1 -> r with the main bench's
      arguments, alternating with d1 -> d2 on the direct wire between the
      same guests (the 85% target of issue 28); then the same rounds
      with every vrnic-device and the switch at SCHED_FIFO 1
      (vm.set_realtime; FABRIC_BENCH_RT=0 skips them);
  fabric/topologies/incast.json  s1 and s2 at 10 Gb/s into r's 1 Gb/s
      port (ECN 32/128 KiB, pmax 0.2; priority 3 lossless, XOFF 256 KiB,
      1.5 MiB headroom): ib_write_bw -D FABRIC_BENCH_SECONDS on both
      senders at once, --tclass=106 (DSCP 26, ECT(0), priority 3), under
      four configurations:
        dcqcn  cc_algo dcqcn on every vrnic (debugfs), ECN and PFC on;
        swift  cc_algo swift (delay-based), ECN and PFC on;
        pfc    cc_algo none: PFC alone;
        none   cc_algo none, PFC off (control socket "set") and a 128 KiB
               egress queue limit: tail drop.
  loss (issue 25), on the pair's switch: ib_write_bw 64 KiB s1 -> r for
      BENCH_SECONDS with Bernoulli loss on s1's link towards the switch
      (data packets; ACKs and SACKs are not dropped) at each of
      LOSS_RATES, with go-back-N and with selective repeat (the driver's
      debugfs selective_repeat on both devices), each with the device's
      512-PSN send window and again with FABRIC_BENCH_LOSS_WINDOW (debugfs
      send_window, IRN's BDP cap); goodput, and s1's requests resent.
      FABRIC_BENCH_LOSS_CC=dcqcn|swift runs it under that algorithm.
      The references at the same rates, on a virtio-net NIC of each VM
      (hosts v1 -> v2, the same loss on v1's link): Linux rxe with the
      same ib_write_bw, and TCP (iperf3); FABRIC_BENCH_LOSS_REFS=0 leaves
      them (and the two NICs) out.  Plot: build/bench/fabric-loss.svg.
  multipath (issue 25), tests/bench/topologies/fabric-leaf-spine.json: s1
      and s2 under leaf0, r under leaf1, 1 Gb/s spine links: two flows
      into r with one UDP source port each, repeated until ECMP puts both
      on one spine, then with spray_paths FABRIC_BENCH_MP_SPRAY (64);
      per-flow and aggregate goodput (FABRIC_BENCH_MP=0 skips it,
      FABRIC_BENCH_MP_SECONDS).

For each: goodput per sender and Jain's index (perftest's average and the
switch's ingress bytes, scripts/fabric_report.goodput), the bottleneck
queue (r's port, priority 3) p50/p99/max from the telemetry, CNPs (guest
hw_counters deltas), pause frames and time paused, drops; the targets of
issue 24 next to them.  Plots: build/bench/fabric-incast-<config>.svg
(queue and per-sender rate over time) and fabric-queues.svg.

The switch's own per-frame cost: fabric/bench (Google Benchmark,
Release, build/fabric-release), as bench.py runs its host limits.

Stand-alone:
  VRNIC_VM_DIR=/tmp/vm-x python3 scripts/bench_fabric.py
writes build/bench/fabric.md and fabric.json.  FABRIC_BENCH_SECONDS
(default 20) is each incast run's duration, FABRIC_BENCH_CONFIGS (for
example dcqcn,pfc) the configurations run, FABRIC_BENCH_DCQCN
(knob=value,..) DCQCN knobs other than mlx5's defaults; BENCH_SECONDS and
BENCH_REPEAT are the pair runs' (as in bench.py); FABRIC_BENCH=0 makes
make bench skip the section; FABRIC_BENCH_DIRECT=1 adds a stand-alone
run on the main bench's VMs a and b first, for context.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fabric as fablib  # noqa: E402
import fabric_report as rep  # noqa: E402
import vm as vmlib  # noqa: E402

TOP = vmlib.TOP
OUT = os.path.join(TOP, "build", "bench")
SECS = int(os.environ.get("FABRIC_BENCH_SECONDS", "20"))
PAIR_SECS = int(os.environ.get("BENCH_SECONDS", "4"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
# The pair's rounds: even, so that each path goes first as often.
PAIR_ROUNDS = REPEAT + REPEAT % 2
FABRIC_DIR = os.environ.get("VRNIC_FABRIC_DIR",
                            os.path.join(vmlib.VM_DIR, "fabric-bench"))
PAIR_TOPO = os.path.join(TOP, "tests", "bench", "topologies",
                         "fabric-pair.json")
INCAST_TOPO = fablib.topology_path("incast")
LEAF_TOPO = os.path.join(TOP, "tests", "bench", "topologies",
                         "fabric-leaf-spine.json")
SPINES = ("spine0", "spine1")
# The multipath runs' length, and how many tries to find two flows that
# ECMP puts on one spine (each try has new QPNs, so new source ports).
MP_SECS = int(os.environ.get("FABRIC_BENCH_MP_SECONDS", "8"))
MP_TRIES = 8
MP_SPRAY = int(os.environ.get("FABRIC_BENCH_MP_SPRAY", "64"))
# d1 and d2: a third vrnic pair on a direct wire between the same two VMs
# (QEMU to QEMU, no switch), so that the pair comparison runs on the same
# guests, alternating with the runs through the switch.
DIRECT_SOCK = os.path.join(vmlib.VM_DIR, "fabric-bench-direct.sock")
LAYOUT = [("snd", [("s1", "vrnic", ["10.10.1.1"]),
                   ("s2", "vrnic", ["10.10.2.1"]),
                   ("d1", "vrnic", ["10.10.3.1"],
                    {"sock": DIRECT_SOCK, "listen": True})]),
          ("rcv", [("r", "vrnic", ["10.10.1.2", "10.10.2.2"]),
                   ("d2", "vrnic", ["10.10.3.2"],
                    {"sock": DIRECT_SOCK, "listen": False})])]
# The loss sub-section's references, through the same switch: a
# virtio-net NIC on each VM (hosts v1 and v2), with rdma_rxe on it, and
# TCP (iperf3) over it.
if os.environ.get("FABRIC_BENCH_LOSS_REFS", "1") != "0":
    LAYOUT[0][1].append(("v1", "virtio", ["10.10.4.1"]))
    LAYOUT[1][1].append(("v2", "virtio", ["10.10.4.2"]))
RXE_UP = os.path.join(TOP, "tests", "system", "rxe-up")
# rxe in a TCG guest drops what arrives faster than its tasklets run
# (tests/system/fabric_tests.py RXE_BW): 16 in flight, a 4 s ACK timeout.
RXE_ARGS = "-t 16 -u 20"
HOSTS = ["s1", "s2", "r"]
MTU = 9000
TCLASS = 106        # DSCP 26 (priority 3) with ECT(0)
PRIO = 3
SIZE = 65536
# The main bench's 64 KiB ib_write_bw (bench.py Bench.bw), less -d/-x.
PAIR_ARGS = "ib_write_bw -F -s %d -q 1 -D %d" % (SIZE, PAIR_SECS)
DROP_QUEUE = 131072
MIB = 1 << 20
# Loss rates of the loss sub-section (issue 25); FABRIC_BENCH_LOSS=0
# skips it.
# FABRIC_BENCH_LOSS_WINDOW=64: both modes again with that send window (the
# driver's debugfs send_window, IRN's BDP cap); 0: not.
LOSS_WINDOW = int(os.environ.get("FABRIC_BENCH_LOSS_WINDOW", "64"))
# FABRIC_BENCH_LOSS_ROUNDS=3: go-back-N and selective repeat (window 512)
# again at 0% and 1%, this many rounds each, alternating which goes first:
# issue 25's targets take the medians of the rounds' ratios (single runs
# on this shared host differ by 10-20%); 0: the single runs decide.
LOSS_ROUNDS = int(os.environ.get("FABRIC_BENCH_LOSS_ROUNDS", "3"))
# FABRIC_BENCH_LOSS_RATES="0,0.01": the loss rates (fractions) measured.
LOSS_RATES = tuple(float(x) for x in os.environ.get(
    "FABRIC_BENCH_LOSS_RATES", "0,0.001,0.01,0.02,0.05").split(","))
# name, label, cc_algo, PFC on
CONFIGS = (("dcqcn", "DCQCN (ECN + PFC)", "dcqcn", True),
           ("dcqcn-mlx5", "DCQCN with mlx5's time constants", "dcqcn", True),
           ("swift", "Swift (delay; PFC on)", "swift", True),
           ("pfc", "PFC only (no CC)", "none", True),
           ("none", "neither (no CC, PFC off, 128 KiB tail drop)", "none",
            False))


def log(msg):
    print(msg, flush=True)


def enabled():
    return os.environ.get("FABRIC_BENCH", "1") != "0"


# ------------------------------------------------------------ host side

def fabric_frame_cost():
    """fabric/bench (Release): {name: ns per frame}, or {} if it cannot
    be built or run."""
    build = os.path.join(TOP, "build", "fabric-release")
    try:
        for cmd in (["cmake", "-S", "fabric", "-B", build, "-G", "Ninja",
                     "-DCMAKE_BUILD_TYPE=Release"],
                    ["nice", "ninja", "-C", build, "vrnic_fabric_bench"]):
            subprocess.run(cmd, cwd=TOP, check=True,
                           stdout=subprocess.DEVNULL)
        out = subprocess.run(
            [os.path.join(build, "vrnic_fabric_bench"),
             "--benchmark_format=json", "--benchmark_min_time=0.2",
             "--benchmark_repetitions=3",
             "--benchmark_report_aggregates_only=true"],
            check=True, capture_output=True, text=True, timeout=300).stdout
    except (OSError, subprocess.SubprocessError) as e:
        log("  fabric bench: %s" % e)
        return {}
    rows = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        ips = b.get("items_per_second", 0)
        if ips:
            rows[b["run_name"]] = 1e9 / ips
    return rows


def ensure_fabric():
    if not os.path.exists(fablib.BINARY):
        subprocess.run(["make", "fabric"], cwd=TOP, check=True)


# ----------------------------------------------------------- guest side

def start(vm, tag, cmd, timeout):
    vm.check("rm -f /tmp/%s.out /tmp/%s.rc; (timeout %d %s > /tmp/%s.out "
             "2>&1; echo $? > /tmp/%s.rc) >/dev/null 2>&1 &"
             % (tag, tag, timeout, cmd, tag, tag))


def collect(vm, tag, timeout):
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


def perftest_mibs(out, size=SIZE):
    """perftest's BW average (MB/sec, 2^20 bytes) for size, or None."""
    for line in out.splitlines():
        w = line.split()
        if w and w[0] == str(size) and len(w) >= 5:
            try:
                return float(w[3])
            except ValueError:
                return None
    return None


def guest_counters(nic):
    """{name: value}: rdma statistic of nic's port and ethtool -S of its
    netdev (prefixed "eth.")."""
    out = nic.vm.check("rdma statistic show link %s/1; echo ==; "
                       "ethtool -S %s" % (nic.rdma, nic.netdev))
    rdma, _, eth = out.partition("==")
    c = {}
    w = rdma.split()
    for name, val in zip(w, w[1:]):
        if val.isdigit() and not name.isdigit():
            c[name] = int(val)
    for line in eth.splitlines():
        m = re.match(r"\s*([A-Za-z0-9_]+):\s*(\d+)\s*$", line)
        if m:
            c["eth." + m.group(1)] = int(m.group(2))
    return c


def delta(after, before, key):
    return after.get(key, 0) - before.get(key, 0)


# FABRIC_BENCH_DCQCN="knob=value,..": DCQCN knobs (mlx5 names) written
# before cc_algo in the dcqcn configuration, on top of the incast
# topology's "nic" cc_params (which the harness writes at boot and
# restart: the time constants stretched for this fabric, see
# Documentation/vrnic-spec.rst).
DCQCN_KNOBS = [kv.split("=", 1) for kv in
               os.environ.get("FABRIC_BENCH_DCQCN", "").split(",") if kv]
# mlx5's own values (engine/cc.hpp's DcqcnParams) of the knobs a
# topology or FABRIC_BENCH_DCQCN may change: the dcqcn-mlx5
# configuration, to show what the stretch is for.
MLX5_DCQCN = {"rp_dce_tcp_rtt": 1, "rp_rate_reduce_monitor_period": 4,
              "np_min_time_between_cnps": 4, "rp_time_reset": 300,
              "rp_byte_reset": 32767, "rp_ai_rate": 5, "rp_hai_rate": 50}


def mlx5_knobs():
    """[(name, mlx5's value)] for every DCQCN knob the incast topology or
    FABRIC_BENCH_DCQCN changes; a knob without a known mlx5 value is an
    error rather than silently left changed."""
    names = [k for k, _ in fablib.nic_cc_params(INCAST_TOPO)
             if not k.startswith("swift_") and k != "cc_algo"]
    names += [k for k, _ in DCQCN_KNOBS if k not in names]
    unknown = [k for k in names if k not in MLX5_DCQCN]
    if unknown:
        raise vmlib.VMError("dcqcn-mlx5: no mlx5 value known for %s "
                            "(MLX5_DCQCN)" % ", ".join(unknown))
    return [(k, str(MLX5_DCQCN[k])) for k in names]


def set_cc(vm, devs, algo, knobs=None):
    knobs = (knobs if knobs is not None else DCQCN_KNOBS) \
        if algo == "dcqcn" else []
    vmlib.write_cc_params(vm, devs, knobs)
    vm.check("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
             "/sys/kernel/debug; for d in %s; do echo %s > "
             "/sys/kernel/debug/vrnic/$d/cc_params/cc_algo; "
             "[ \"$(cat /sys/kernel/debug/vrnic/$d/cc_params/cc_algo)\" = "
             "%s ] || exit 1; done" % (" ".join(devs), algo, algo))


def set_sr(vm, devs, on, window=0):
    """The driver's selective-repeat default and send window on each
    device (debugfs; window 0: the device's 512)."""
    vm.check("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
             "/sys/kernel/debug; for d in %s; do echo %d > "
             "/sys/kernel/debug/vrnic/$d/selective_repeat || exit 1; "
             "echo %d > /sys/kernel/debug/vrnic/$d/send_window || exit 1; "
             "done" % (" ".join(devs), on, window))


def set_spray(vm, devs, n):
    """The driver's spray_paths default (debugfs) on devs of vm."""
    for d in devs:
        vm.check("echo %d > /sys/kernel/debug/vrnic/%s/spray_paths" % (n, d))


def set_mtu(vms):
    for vm in vms:
        vm.check("; ".join("ip link set dev %s mtu %d" % (n.netdev, MTU)
                           for n in vm.fabric_nics if n.netdev))
    vmlib.wait_fabric_ports(vms, timeout=60)


# ----------------------------------------------------- direct reference

def direct_reference():
    """Stand-alone only: the main bench's vrnic ib_write_bw 64 KiB on the
    direct wire (VMs a and b), medians of REPEAT; MiB/s or None."""
    log("== direct-wire reference: booting VMs a and b")
    a, b = vmlib.boot_pair()
    vals = []
    try:
        for vm in (a, b):
            vm.check("vrnic-up %d" % MTU, timeout=60)
        args = PAIR_ARGS.replace("-F", "-d vrnic0 -x 1 -F")
        for i in range(REPEAT):
            start(b, "dsrv", args, PAIR_SECS * 6 + 60)
            listening(b, 18515)
            rc, out = a.run("timeout %d %s %s 2>&1" % (
                PAIR_SECS * 6 + 60, args, b.ip), timeout=PAIR_SECS * 6 + 75)
            collect(b, "dsrv", 30)
            v = perftest_mibs(out) if rc == 0 else None
            log("  direct ib_write_bw 64 KiB run %d: %s MiB/s" % (i + 1, v))
            if v:
                vals.append(v)
    finally:
        a.kill()
        b.kill()
    return statistics.median(vals) if vals else None


# ---------------------------------------------------------------- runs

class Section:
    def __init__(self, fab, vms):
        self.fab = fab
        self.vms = vms
        self.nics = {}
        for vm in vms:
            self.nics.update(vm.nics)
        self.gid = {}

    def gidx(self, nic, ip):
        if (nic.host, ip) not in self.gid:
            self.gid[(nic.host, ip)] = vmlib.gid_index(nic.vm, nic.rdma, ip)
        return self.gid[(nic.host, ip)]

    def restart(self, topology):
        self.fab.restart(topology)
        self.fab.wait_hosts_up(HOSTS, timeout=30)
        vmlib.wait_fabric_ports(self.vms, timeout=60)
        vmlib.apply_nic_params(self.vms, topology)

    def ib_write_bw(self, tag, snd, rcv, rip, extra=""):
        """One ib_write_bw 64 KiB run snd -> rcv (Nics); MiB/s or None.
        extra: more perftest options, on both sides."""
        args = PAIR_ARGS + (" " + extra if extra else "")
        srv = "%s -d %s -x %d" % (args, rcv.rdma, self.gidx(rcv, rip))
        cli = "%s -d %s -x %d %s" % (args, snd.rdma,
                                     self.gidx(snd, snd.ip), rip)
        start(rcv.vm, "psrv", srv, PAIR_SECS * 6 + 60)
        listening(rcv.vm, 18515)
        rc, out = snd.vm.run("timeout %d %s 2>&1" % (PAIR_SECS * 6 + 60, cli),
                             timeout=PAIR_SECS * 6 + 75)
        collect(rcv.vm, "psrv", 30)
        v = perftest_mibs(out) if rc == 0 else None
        log("  %s ib_write_bw 64 KiB %s->%s: %s MiB/s" % (
            tag, snd.host, rcv.host,
            v if v is not None else "failed: " + out.strip()[-300:]))
        return v

    def hw_pids(self):
        """The vrnic-device processes of every NIC and the switch's."""
        pids = [self.fab.proc.pid]
        for vm in self.vms:
            pids += [n.devproc.pid for n in vm.fabric_nics if n.devproc]
        return pids

    def pair(self, tag=""):
        """ib_write_bw 64 KiB on the same two VMs, side by side: d1 -> d2
        on the direct wire and s1 -> r through the pair switch, after one
        discarded warm-up run on each, PAIR_ROUNDS rounds (an even
        number), alternating which goes first.  Returns (direct, switch)
        lists of MiB/s, None for a failed run."""
        direct, switch = [], []
        runs = (("direct", "d1", "d2", "10.10.3.2", direct),
                ("switch", "s1", "r", "10.10.1.2", switch))
        for name, snd, rcv, rip, _ in runs:
            self.ib_write_bw("%s%s warm-up (discarded)" % (tag, name),
                             self.nics[snd], self.nics[rcv], rip)
        for i in range(PAIR_ROUNDS):
            for name, snd, rcv, rip, vals in (runs if i % 2 == 0
                                               else runs[::-1]):
                vals.append(self.ib_write_bw(
                    "%s%s run %d" % (tag, name, i + 1), self.nics[snd],
                    self.nics[rcv], rip))
        return direct, switch

    def pair_rt(self):
        """pair() again with every vrnic-device and the switch at
        SCHED_FIFO 1 (vm.set_realtime), then back; (direct, switch), or
        None if the host refused."""
        pids = self.hw_pids()
        try:
            if not vmlib.set_realtime(pids, True):
                log("  pair, real-time: not run (RT throttling off, or no "
                    "privilege)")
                return None
            return self.pair("SCHED_FIFO ")
        finally:
            vmlib.set_realtime(pids, False)

    def loss(self):
        """ib_write_bw s1 -> r at each loss rate, go-back-N then
        selective repeat; a list of result dicts."""
        s1, r = self.nics["s1"], self.nics["r"]
        out = []
        loss_cc = os.environ.get("FABRIC_BENCH_LOSS_CC")
        if loss_cc:
            set_cc(s1.vm, [s1.rdma], loss_cc)
            set_cc(r.vm, [r.rdma], loss_cc)
        modes = [("go-back-N", 0, 0), ("selective repeat", 1, 0)]
        if LOSS_WINDOW:
            modes += [("go-back-N, window %d" % LOSS_WINDOW, 0, LOSS_WINDOW),
                      ("selective repeat, window %d" % LOSS_WINDOW, 1,
                       LOSS_WINDOW)]
        for mode, on, window in modes:
            set_sr(s1.vm, [s1.rdma], on, window)
            set_sr(r.vm, [r.rdma], on, window)
            for p in LOSS_RATES:
                self.fab.set_link("s1", {"impair": {"loss": p}}, "a_to_b")
                before, rbefore = guest_counters(s1), guest_counters(r)
                t = time.time()
                v = self.ib_write_bw("%s, loss %g%%" % (mode, 100 * p), s1,
                                     r, "10.10.1.2")
                secs = time.time() - t
                after, rafter = guest_counters(s1), guest_counters(r)
                res = {
                    "mode": mode, "loss": p, "mibs": v,
                    "resent": delta(after, before, "roce_adp_retrans"),
                    "hole_timer": delta(after, before,
                                        "roce_adp_retrans_to"),
                    "seq_naks": delta(after, before, "rcvd_seq_err"),
                    "timeouts": delta(after, before, "ack_timeouts"),
                    "sent": delta(after, before, "sent_pkts"),
                    "held": delta(rafter, rbefore, "ooo_placed"),
                    "not_held": delta(rafter, rbefore, "ooo_dropped"),
                    "dup": delta(rafter, rbefore, "duplicate_request"),
                    "wall_s": secs}
                print("    %s" % ", ".join("%s %s" % (k, res[k]) for k in (
                    "sent", "resent", "hole_timer", "held", "not_held",
                    "dup")), flush=True)
                out.append(res)
        self.fab.set_link("s1", {"impair": {"loss": 0.0}}, "a_to_b")
        set_sr(s1.vm, [s1.rdma], 0)
        set_sr(r.vm, [r.rdma], 0)
        if "v1" in self.nics:
            out += self.loss_refs()
        return out

    def loss_rounds(self):
        """Go-back-N and selective repeat (window 512) s1 -> r, at 0% and
        1% loss, LOSS_ROUNDS rounds each, alternating which mode goes
        first: {loss: {mode: [MiB/s or None per round]}}."""
        s1, r = self.nics["s1"], self.nics["r"]
        modes = [("go-back-N", 0), ("selective repeat", 1)]
        out = {}
        try:
            for p in (0.0, 0.01):
                self.fab.set_link("s1", {"impair": {"loss": p}}, "a_to_b")
                vals = {m: [] for m, _ in modes}
                for i in range(LOSS_ROUNDS):
                    for mode, on in (modes if i % 2 == 0 else modes[::-1]):
                        set_sr(s1.vm, [s1.rdma], on)
                        set_sr(r.vm, [r.rdma], on)
                        vals[mode].append(self.ib_write_bw(
                            "%s, loss %g%%, round %d" % (mode, 100 * p,
                                                          i + 1),
                            s1, r, "10.10.1.2"))
                out[p] = vals
        finally:
            self.fab.set_link("s1", {"impair": {"loss": 0.0}}, "a_to_b")
            set_sr(s1.vm, [s1.rdma], 0)
            set_sr(r.vm, [r.rdma], 0)
        return out

    def loss_refs(self):
        """The references at each loss rate, through the same switch on
        the virtio-net NICs v1 -> v2: Linux rxe (go-back-N) with
        ib_write_bw as above, and TCP (iperf3); result dicts."""
        v1, v2 = self.nics["v1"], self.nics["v2"]
        with open(RXE_UP) as f:
            body = f.read()
        for nic in (v1, v2):
            nic.vm.check("cat > /tmp/rxe-up <<'VRNIC_EOF'\n%sVRNIC_EOF\n"
                         "bash /tmp/rxe-up %d %s" % (body, MTU, nic.ip),
                         timeout=60)
            nic.rdma = "rxe0"
        self.fab.wait_hosts_up(["v1", "v2"], timeout=30)
        out = []
        for mode in ("rxe (go-back-N)", "TCP (iperf3)"):
            for p in LOSS_RATES:
                self.fab.set_link("v1", {"impair": {"loss": p}}, "a_to_b")
                tag = "%s, loss %g%%" % (mode.split()[0], 100 * p)
                v = self.ib_write_bw(tag, v1, v2, v2.ip, extra=RXE_ARGS) \
                    if mode.startswith("rxe") else self.iperf3(tag, v1, v2)
                out.append({"mode": mode, "loss": p, "mibs": v})
        self.fab.set_link("v1", {"impair": {"loss": 0.0}}, "a_to_b")
        return out

    def iperf3(self, tag, snd, rcv):
        """One iperf3 run snd -> rcv for PAIR_SECS; MiB/s received or
        None."""
        rcv.vm.run("pkill -x iperf3; (timeout %d iperf3 -s -1 -B %s "
                   ">/dev/null 2>&1 &)" % (PAIR_SECS + 60, rcv.ip))
        time.sleep(1)
        rc, out = snd.vm.run("timeout %d iperf3 -c %s -B %s -t %d -J" % (
            PAIR_SECS + 40, rcv.ip, snd.ip, PAIR_SECS),
            timeout=PAIR_SECS + 55)
        v = None
        try:
            bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
            v = round(bps / 8 / MIB, 1) if rc == 0 else None
        except (ValueError, KeyError, TypeError):
            pass
        log("  %s iperf3 %s->%s: %s MiB/s" % (
            tag, snd.host, rcv.host,
            v if v is not None else "failed: " + out.strip()[-300:]))
        return v

    def spine_tx(self):
        c = self.fab.counters()
        return [sum(q["tx_packets"] for q in
                    fablib.port(c, sp, switch="leaf0")) for sp in SPINES]

    def both_into_r(self, secs, mark):
        """ib_write_bw -s 65536 -D secs --tclass=106 from s1 and s2 into r
        at once (both clients in s1's VM); mark() runs just before they
        start.  ({host: (client exit, server exit, client output)},
        what mark returned)."""
        s1, s2, r = (self.nics[h] for h in HOSTS)
        args = "ib_write_bw -F -s %d -D %d --tclass=%d" % (SIZE, secs,
                                                           TCLASS)
        flows = [(s1, "10.10.1.2", 18700), (s2, "10.10.2.2", 18701)]
        tmo = secs * 3 + 60
        for i, (s, rip, port) in enumerate(flows):
            start(r.vm, "fsrv%d" % i, "%s -d %s -x %d -p %d" % (
                args, r.rdma, self.gidx(r, rip), port), tmo)
        for s, rip, port in flows:
            listening(r.vm, port)
        marked = mark()
        s1.vm.check("\n".join(
            "rm -f /tmp/fcli%d.rc; (timeout %d %s -d %s -x %d -p %d %s > "
            "/tmp/fcli%d.out 2>&1; echo $? > /tmp/fcli%d.rc) >/dev/null "
            "2>&1 &" % (i, tmo, args, s.rdma, self.gidx(s, s.ip), port, rip,
                        i, i) for i, (s, rip, port) in enumerate(flows)))
        out = {}
        for i, (s, rip, port) in enumerate(flows):
            crc, cout = collect(s.vm, "fcli%d" % i, tmo)
            src, _ = collect(r.vm, "fsrv%d" % i, 60)
            out[s.host] = (crc, src, cout)
        return out, marked

    def two_flows(self, tag):
        """Both into r for MP_SECS; ({host: MiB/s or None}, packets
        leaf0 sent to each spine)."""
        out, before = self.both_into_r(MP_SECS, self.spine_tx)
        # A flow that failed has no goodput, not 0: it would fake a ratio.
        perf = {h: perftest_mibs(o[2]) if o[0] == "0" else None
                for h, o in out.items()}
        spines = [b - a for a, b in zip(before, self.spine_tx())]
        log("  %s: s1 %s, s2 %s MiB/s; leaf0 -> spine0/spine1 %s packets"
            % (tag, fr(perf["s1"]), fr(perf["s2"]), spines))
        return perf, spines

    def multipath(self):
        """Issue 25's multipath bench on LEAF_TOPO: two flows into r that
        ECMP puts on one spine (tries until a run collides), then the
        same with spraying.  Selective repeat on every device in both
        (the spray needs it), no congestion control: PFC alone."""
        s1, s2, r = (self.nics[h] for h in HOSTS)
        self.restart(LEAF_TOPO)
        set_cc(s1.vm, [s1.rdma, s2.rdma], "none")
        set_cc(r.vm, [r.rdma], "none")
        set_sr(s1.vm, [s1.rdma, s2.rdma], 1)
        set_sr(r.vm, [r.rdma], 1)
        runs = []
        try:
            for i in range(MP_TRIES):
                set_spray(s1.vm, [s1.rdma, s2.rdma], 0)
                perf, sp = self.two_flows("one port each, try %d" % (i + 1))
                collided = sum(sp) > 0 and max(sp) >= 0.9 * sum(sp)
                runs.append({"mode": "one port", "mibs": perf,
                             "spines": sp, "collided": collided})
                if collided:
                    break
            set_spray(s1.vm, [s1.rdma, s2.rdma], MP_SPRAY)
            perf, sp = self.two_flows("spray %d" % MP_SPRAY)
            runs.append({"mode": "spray %d" % MP_SPRAY, "mibs": perf,
                         "spines": sp, "collided": None})
        finally:
            set_spray(s1.vm, [s1.rdma, s2.rdma], 0)
            set_sr(s1.vm, [s1.rdma, s2.rdma], 0)
            set_sr(r.vm, [r.rdma], 0)
        return runs

    def incast(self, name, algo, pfc):
        """One incast configuration; returns its result dict."""
        knobs = None
        if name == "dcqcn-mlx5":
            knobs = mlx5_knobs()
        try:
            return self._incast(name, algo, pfc, knobs)
        finally:
            if knobs:
                # Back to the topology's values for what follows.
                vmlib.apply_nic_params(self.vms, INCAST_TOPO)

    def _incast(self, name, algo, pfc, knobs):
        s1, s2, r = (self.nics[h] for h in HOSTS)
        set_cc(s1.vm, [s1.rdma, s2.rdma], algo, knobs)
        set_cc(r.vm, [r.rdma], algo, knobs)
        if not pfc:
            for h in HOSTS:
                self.fab.set_link(h, {"pfc": {"priorities": []}})
            self.fab.set_link("r", {"queue_limit": DROP_QUEUE}, "b_to_a")
        before = {n.host: guest_counters(n) for n in (s1, s2, r)}
        out, t0 = self.both_into_r(SECS, lambda: self.fab.ping()["t_ns"])
        perf = {}
        for host, (crc, src, cout) in out.items():
            v = perftest_mibs(cout)
            perf[host] = v
            log("  %-6s %s: exit %s/%s, %s MiB/s" % (
                name, host, crc, src, "%.1f" % v if v else
                "no result: " + cout.strip()[-200:]))
        time.sleep(1.2)                 # one more counter snapshot
        t1 = self.fab.ping()["t_ns"]
        after = {n.host: guest_counters(n) for n in (s1, s2, r)}
        tel = rep.load(self.fab.telemetry)
        tel = rep.window(tel, t0, t1)
        return self.analyse(name, algo, pfc, tel, perf, before, after,
                            t0, t1)

    def analyse(self, name, algo, pfc, tel, perf, before, after, t0, t1):
        with open(INCAST_TOPO) as f:
            topo = json.load(f)
        dflt = topo.get("defaults", {})
        sample_ns = topo.get("sample_us", 1000) * 1000
        kmax = dflt.get("ecn", {}).get("kmax")
        xoff = dflt.get("pfc", {}).get("xoff")
        bneck = fablib.link_mbps(INCAST_TOPO, "r") / 1000.0    # Gbit/s
        try:
            key = rep.resolve_key(tel, *rep.parse_port("sw0:r:%d" % PRIO,
                                                       tel))
        except ValueError:
            key = None
        s = rep.summary(tel, key, sample_ns, name)
        conv = rep.convergence(tel, key, sample_ns, kmax) \
            if key and kmax else {}
        # Goodput over the busy part of the run (the counter intervals in
        # which the senders moved at least a quarter of their peak: not
        # perftest's connection set-up), senders only (r's ACKs are not a
        # flow).
        snd = ("s1", "s2")
        ft = rep.flow_throughput(tel)
        starts = [t for t, _ in tel.counters]
        tot = [sum(ft["flows"].get(h, [0] * len(ft["t_ns"]))[i]
                   for h in snd) for i in range(len(ft["t_ns"]))]
        busy = [i for i, v in enumerate(tot) if tot and v >= 0.25 * max(tot)]
        if busy:
            end = ft["t_ns"][busy[-1]]
            begin = max(t for t in starts if t < ft["t_ns"][busy[0]])
            g = rep.goodput(tel, begin, end)
            for k in ("bytes", "gbps", "admitted_gbps"):
                g[k] = {h: v for h, v in g[k].items() if h in snd}
            s["goodput"] = g
            s["jain"] = rep.jain(g["admitted_gbps"].values())
        # "Once converged": the second half of the run.
        mid = t0 + (t1 - t0) // 2
        late = [c for t, c in tel.counters if t >= mid]
        late_pfc = 0
        if len(late) >= 2:
            late_pfc = sum(d["pfc_tx"] for d in
                           rep.port_deltas(late[0], late[-1]))
        gbps = {h: (perf[h] or 0) * MIB * 8 / 1e9 for h in snd}
        res = {
            "config": name, "cc_algo": algo, "pfc": pfc,
            "seconds": SECS,
            "perftest_mibs": perf,
            "perftest_gbps": gbps,
            "perftest_total_gbps": sum(gbps.values()),
            "perftest_jain": rep.jain(gbps.values()) if all(
                perf.values()) else None,
            "switch_gbps": s["goodput"]["gbps"],
            "switch_admitted_gbps": s["goodput"]["admitted_gbps"],
            "switch_jain": s["jain"],
            "queue": {k: s["queue"][k] for k in ("p50", "p99", "max",
                                                  "mean", "samples")},
            "queue_key": list(key) if key else None,
            "drops": s["drops"],
            "drops_by_cause": {},
            "ce_marked": s["ce_marked"],
            "pfc_tx": s["pfc_tx"],
            "pfc_tx_second_half": late_pfc,
            "switch_paused_ns": s["paused_ns"],
            "np_ecn_marked": delta(after["r"], before["r"],
                                   "np_ecn_marked_roce_packets"),
            "np_cnp_sent": delta(after["r"], before["r"], "np_cnp_sent"),
            "rp_cnp_handled": sum(delta(after[h], before[h],
                                        "rp_cnp_handled") for h in snd),
            "rp_cnp_ignored": sum(delta(after[h], before[h],
                                        "rp_cnp_ignored") for h in snd),
            "rx_pause": {h: delta(after[h], before[h],
                                  "eth.rx_prio%d_pause" % PRIO)
                         for h in snd},
            "rx_pause_duration": {h: delta(after[h], before[h],
                                           "eth.rx_prio%d_pause_duration"
                                           % PRIO) for h in snd},
            "busy_window_s": (s["goodput"]["window_ns"][1] -
                              s["goodput"]["window_ns"][0]) / 1e9
            if s["goodput"]["window_ns"] else None,
            "retransmits": {h: delta(after[h], before[h], "ack_timeouts")
                            for h in snd},
            "bottleneck_gbps": bneck, "kmax": kmax, "xoff": xoff,
            "convergence": conv,
            "summary_row": rep.summary_row(s),
        }
        for d in s["deltas"]:
            for cause, n in d["drops"].items():
                res["drops_by_cause"][cause] = \
                    res["drops_by_cause"].get(cause, 0) + n
        res["targets"] = targets(res)
        os.makedirs(OUT, exist_ok=True)
        with open(os.path.join(OUT, "fabric-incast-%s.svg" % name),
                  "w") as f:
            f.write(rep.svg_report(tel, key))
        res["_queue_series"] = [((t - t0) / 1e9, b / 1024.0) for t, b in
                                rep.queue_series(tel, key, sample_ns)] \
            if key else []
        return res


def targets(r):
    """[(target, measured, met)] for one incast result (issue 24)."""
    out = []
    q = r["queue"]
    if r["config"] == "dcqcn":
        j = r["perftest_jain"]
        out.append(("Jain ≥ 0.9 (perftest)", "%.3f" % j if j else "—",
                    bool(j and j >= 0.9)))
        share = r["perftest_total_gbps"] / r["bottleneck_gbps"]
        out.append(("total goodput ≥ 90%% of %.0f Gb/s"
                    % r["bottleneck_gbps"],
                    "%.1f%%" % (100 * share), share >= 0.9))
        c = r.get("convergence") or {}
        if c.get("t_ns") is None:
            out.append(("queue settles below Kmax (%d KiB)"
                        % (r["kmax"] // 1024), "never (p99 %.1f KiB over "
                        "the run)" % (q["p99"] / 1024.0), False))
        else:
            out.append(("p99 queue < Kmax (%d KiB) once converged"
                        % (r["kmax"] // 1024),
                        "%.1f KiB after %.1f s (the whole run: %.1f KiB; "
                        "%d of %d later 100-ms windows at or above Kmax; "
                        "the switch ran a sample or more late %d times, "
                        "%.0f ms in all, and %d of the %d samples at or "
                        "above Kmax came within 10 ms after one)"
                        % (c["p99"] / 1024.0, c["seconds"],
                           q["p99"] / 1024.0, c["windows_over"],
                           c["windows"], c["stalls"], c["stalled_ns"] / 1e6,
                           c["over_after_stall"], c["over"]),
                        c["p99"] < r["kmax"]))
        out.append(("no pause once converged (2nd half)",
                    "%d pause frames%s" % (
                        r["pfc_tx_second_half"],
                        " (the switch ran late %d times after converging)"
                        % c["stalls"] if c.get("t_ns") is not None else ""),
                    r["pfc_tx_second_half"] == 0))
    elif r["config"] == "pfc":
        ok = r["pfc_tx"] > 0 and q["p99"] >= r["xoff"]
        out.append(("without CC: queue at the PFC threshold (pauses, p99 ≥ "
                    "XOFF %d KiB)" % (r["xoff"] // 1024),
                    "%d pauses, p99 %.1f KiB" % (r["pfc_tx"],
                                                 q["p99"] / 1024.0), ok))
    elif r["config"] == "none":
        out.append(("without CC or PFC: drops", "%d drops" % r["drops"],
                    r["drops"] > 0))
    return out


# -------------------------------------------------------------- report

def fr(v, d=1):
    return "—" if v is None else "%.*f" % (d, v)


def pair_ratios(direct, switch):
    """Median MiB/s of each, the median of the rounds' ratios (switch /
    direct, the rounds in which both runs succeeded), and those ratios."""
    d = statistics.median([v for v in direct if v]) if any(direct) else None
    s = statistics.median([v for v in switch if v]) if any(switch) else None
    rounds = [b / a for a, b in zip(direct, switch) if a and b]
    return d, s, (statistics.median(rounds) if rounds else None), rounds


def verdict(rounds, target=0.85):
    """met / not met only when every round agrees; else inconclusive."""
    if not rounds:
        return "—"
    if min(rounds) >= target:
        return "met"
    if max(rounds) < target:
        return "**not met**"
    return "inconclusive"


def loss_chart(loss):
    """Goodput against loss, one line per mode (failed runs left out)."""
    series = {}
    for x in loss:
        series.setdefault(x["mode"], [])
        if x["mibs"] is not None:
            series[x["mode"]].append((100 * x["loss"], x["mibs"]))
    return rep.svg_chart(series, title="ib_write_bw 64 KiB s1 -> r (iperf3 "
                         "for TCP) against Bernoulli loss",
                         xlabel="loss (%)", ylabel="MiB/s")


def ratios(num, den):
    """Per-round num/den where both ran."""
    return [a / b for a, b in zip(num, den) if a and b]


def loss_rounds_rows(rounds):
    """The alternating rounds' table lines and issue 25's three targets
    for window 512 from the medians of the rounds' ratios."""
    gbn, sr = "go-back-N", "selective repeat"
    lines = ["", "Go-back-N and selective repeat (window 512) again, %d "
             "rounds at 0%% and at 1%% loss, alternating which goes first "
             "(the targets below take the median of the rounds' ratios):"
             % LOSS_ROUNDS, "",
             "| loss | go-back-N MiB/s | selective repeat MiB/s | "
             "selective repeat / go-back-N, per round | median |",
             "|---|---|---|---|---|"]
    med = {}
    for p in sorted(rounds):
        v = rounds[p]
        rr = ratios(v[sr], v[gbn])
        med[p] = statistics.median(rr) if rr else None
        lines.append("| %g%% | %s | %s | %s | %s |" % (
            100 * p, ", ".join(fr(x) for x in v[gbn]),
            ", ".join(fr(x) for x in v[sr]),
            ", ".join("%.2f" % x for x in rr) or "—",
            "%.2f" % med[p] if med[p] else "—"))
    rows = []
    s0 = [x for x in rounds.get(0.0, {}).get(sr, []) if x]
    s1 = [x for x in rounds.get(0.01, {}).get(sr, []) if x]
    if s0 and s1:
        f = statistics.median(s1) / statistics.median(s0)
        rows.append(("at 1%, window 512: selective repeat ≥ 80% of its "
                     "lossless (medians of the rounds)", "%.0f%%" % (100 * f),
                     f >= 0.8))
    if med.get(0.01):
        rows.append(("at 1%, window 512: selective repeat ≥ 5× go-back-N "
                     "(median of the rounds)", "%.1f×" % med[0.01],
                     med[0.01] >= 5))
    if med.get(0.0):
        rows.append(("at 0%, window 512: selective repeat costs ≤ 5% "
                     "(median of the rounds)",
                     "%.1f%%" % (100 * (1 - med[0.0])), med[0.0] >= 0.95))
    return lines, rows


def loss_report(loss, rounds=None):
    """The loss sub-section's table and issue 25's targets on it (on
    the alternating rounds for window 512 when they ran)."""
    if not loss:
        return ""
    lines = ["### Goodput against loss (issue 25)", "",
             "ib_write_bw -s 65536 -D %d s1 -> r through the pair switch, "
             "Bernoulli loss on s1's link towards the switch (request "
             "packets only), path MTU 4096.  \"resent\" is s1's "
             "roce_adp_retrans, the packets selective repeat resent alone "
             "(0 under go-back-N, which resends from the loss on: its "
             "sequence NAKs and ack timeouts show it); \"hole timer\" "
             "its roce_adp_retrans_to, the hole timer's resends.  \"held\" "
             "and \"not held\" are r's ooo_placed and ooo_dropped: what "
             "arrived after a gap and was kept, or dropped (out of the "
             "window, or the budget spent).  The references run on a "
             "virtio-net NIC of each VM through the same switch, with the "
             "same loss on v1's link: Linux rxe (ib_write_bw as above, "
             "with %s, as rxe in a TCG guest needs) and TCP (iperf3 -t "
             "%d); the device counters do not apply to them.  The plot: "
             "fabric-loss.svg." % (PAIR_SECS, RXE_ARGS, PAIR_SECS), "",
             "| mode | loss | MiB/s | of lossless | resent | hole timer | "
             "sequence NAKs | ack timeouts | held | not held |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    base = {}
    for x in loss:
        if x["loss"] == 0 and x["mibs"]:
            base[x["mode"]] = x["mibs"]
    def n(x, k):
        return "%d" % x[k] if x.get(k) is not None else "—"

    for x in loss:
        b = base.get(x["mode"])
        lines.append("| %s | %g%% | %s | %s | %s | %s | %s | %s | %s | %s |"
                     % (x["mode"], 100 * x["loss"], fr(x["mibs"]),
                        "%.0f%%" % (100 * x["mibs"] / b)
                        if b and x["mibs"] is not None else "—", n(x, "resent"), n(x, "hole_timer"),
                        n(x, "seq_naks"), n(x, "timeouts"), n(x, "held"),
                        n(x, "not_held")))
    at = {(x["mode"], x["loss"]): x["mibs"] for x in loss}
    rows = []
    for suffix in sorted({x["mode"].partition(",")[2] for x in loss}):
        sr, gbn = "selective repeat" + (suffix and "," + suffix), \
            "go-back-N" + (suffix and "," + suffix)
        sr1, gbn1 = at.get((sr, 0.01)), at.get((gbn, 0.01))
        sr0, gbn0 = at.get((sr, 0.0)), at.get((gbn, 0.0))
        w = suffix.strip() or "window 512"
        if rounds and not suffix:
            continue            # the rounds decide (below)
        if sr1 and sr0:
            rows.append(("at 1%%, %s: selective repeat ≥ 80%% of its "
                         "lossless" % w, "%.0f%%" % (100 * sr1 / sr0),
                         sr1 >= 0.8 * sr0))
        if sr1 and gbn1:
            rows.append(("at 1%%, %s: selective repeat ≥ 5× go-back-N" % w,
                         "%.1f×" % (sr1 / gbn1), sr1 >= 5 * gbn1))
        if sr0 and gbn0:
            rows.append(("at 0%%, %s: selective repeat costs ≤ 5%%" % w,
                         "%.1f%%" % (100 * (1 - sr0 / gbn0)),
                         sr0 >= 0.95 * gbn0))
    if rounds:
        more, rrows = loss_rounds_rows(rounds)
        lines += more
        rows = rrows + rows
    lines += ["", "| target (issue 25) | measured | met |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % (n, v, "yes" if ok else "**no**")
              for n, v, ok in rows]
    lines += ["", "The sweep: one run each on a shared 2-core host, single "
              "runs, not medians.", ""]
    return "\n".join(lines)


def multipath_report(runs):
    """The multipath sub-section's table and issue 25's target."""
    if not runs:
        return ""
    lines = ["### Multipath: two flows on one spine, and sprayed (issue 25)",
             "", "tests/bench/topologies/fabric-leaf-spine.json: s1 and s2 "
             "under leaf0, r under leaf1, two spines, 10 Gb/s host links "
             "and 1 Gb/s spine links, ECMP by 5-tuple, priority 3 lossless. "
             "ib_write_bw -s 65536 -D %d --tclass=106 s1 -> r and s2 -> r at "
             "once, selective repeat on every device, no congestion control. "
             "With one UDP source port per QP the runs are repeated (new "
             "QPNs, new ports) until ECMP puts both flows on one spine "
             "(at least 90%% of leaf0's packets towards the spines on one); "
             "then each QP sprays over %d ports (debugfs spray_paths)."
             % (MP_SECS, MP_SPRAY), "",
             "| run | s1 MiB/s | s2 MiB/s | aggregate | leaf0 -> spine0 / "
             "spine1 packets | one spine |", "|---|---|---|---|---|---|"]
    for x in runs:
        m = x["mibs"]
        agg = m["s1"] + m["s2"] if m["s1"] and m["s2"] else None
        x["aggregate"] = agg
        lines.append("| %s | %s | %s | %s | %d / %d | %s |" % (
            x["mode"], fr(m["s1"]), fr(m["s2"]), fr(agg), x["spines"][0],
            x["spines"][1], {True: "yes", False: "no", None: "—"}[
                x["collided"]]))
    hit = [x for x in runs if x["collided"]]
    spray = [x for x in runs if x["collided"] is None]
    for x in spray:
        sp = x["spines"]
        if sum(sp):
            lines += ["", "The hash put %.0f%% of the sprayed packets on the "
                      "busier spine: with PFC pausing a sender for its "
                      "busier path, the aggregate can reach at most %.2f× "
                      "one spine." % (100.0 * max(sp) / sum(sp),
                                      sum(sp) / max(sp))]
    lines += ["", "| target (issue 25) | measured | met |", "|---|---|---|"]
    if hit and spray and hit[0]["aggregate"] and spray[0]["aggregate"]:
        ratio = spray[0]["aggregate"] / hit[0]["aggregate"]
        lines.append("| spraying: the colliding pair's aggregate ≥ 1.6× | "
                     "%.2f× | %s |" % (ratio, "yes" if ratio >= 1.6
                                        else "**no**"))
    elif not hit:
        lines.append("| spraying: the colliding pair's aggregate ≥ 1.6× | "
                     "no colliding run in %d tries | — |" % MP_TRIES)
    else:
        lines.append("| spraying: the colliding pair's aggregate ≥ 1.6× | "
                     "a flow failed | — |")
    lines += ["", "Single runs on a shared 2-core host.", ""]
    return "\n".join(lines)


def report(main_direct, pair_direct, pair_vals, cost, results, wall,
           pair_rt=None):
    lines = ["", "## Fabric (vrnic-fabric, issues 28 and 24)", "",
             "Two TCG VMs through the switch, booted once: snd carries hosts "
             "s1 and s2 (two vrnic NICs), rcv host r; MTU 9000.  Both VMs "
             "also carry a third vrnic each (d1, d2) on a direct QEMU-to-QEMU "
             "wire.  Both VMs, the switch and the other QEMU share this "
             "host's 2 cores, so the numbers are noisy.  Section wall time "
             "%.0f s." % wall, ""]
    direct, pair, ratio, rounds = pair_ratios(pair_direct, pair_vals)
    lines += ["### pair: through the switch vs the direct wire", "",
              "The same two guests, the same moment: d1 -> d2 on the direct "
              "wire and s1 -> r through the pair switch, one discarded "
              "warm-up run each, then %d rounds of %d s (which goes first "
              "alternates).  The ratio is the median of the rounds' ratios; "
              "the target is met or not only if every round agrees.  The "
              "main bench's VMs a and b measured %s MiB/s on their wire "
              "earlier in this run." % (PAIR_ROUNDS, PAIR_SECS,
                                        fr(main_direct)), "",
              "| test | direct wire MiB/s | through the switch MiB/s | "
              "median ratio | per-round ratios | target ≥ 0.85 |",
              "|---|---|---|---|---|---|",
              "| ib_write_bw 64 KiB | %s (%s) | %s (%s) | %s | %s | %s |" % (
                  fr(direct), ", ".join(fr(v, 0) for v in pair_direct),
                  fr(pair), ", ".join(fr(v, 0) for v in pair_vals),
                  fr(ratio, 3), ", ".join(fr(r, 2) for r in rounds) or "—",
                  verdict(rounds))]
    if pair_rt:
        rd, rs = pair_rt
        direct_rt, pair_rt_m, ratio_rt, rounds_rt = pair_ratios(rd, rs)
        lines += ["| the same, devices and switch at SCHED_FIFO 1 | %s (%s) "
                  "| %s (%s) | %s | %s | %s |" % (
                      fr(direct_rt), ", ".join(fr(v, 0) for v in rd),
                      fr(pair_rt_m), ", ".join(fr(v, 0) for v in rs),
                      fr(ratio_rt, 3),
                      ", ".join(fr(r, 2) for r in rounds_rt) or "—",
                      verdict(rounds_rt))]
    lines += ["", "Second row: the same rounds with every vrnic-device and "
              "vrnic-fabric at SCHED_FIFO priority 1, so that they run as "
              "soon as their sockets have bytes, as a NIC's and a switch's "
              "hardware would, instead of waiting for the busy-polling TCG "
              "vCPU threads' time slices (Documentation/fabric.rst, "
              "\"Host scheduling\"); FABRIC_BENCH_RT=0 leaves it out.", ""]
    if cost:
        lines += ["Switch per-frame cost (fabric/bench, Google Benchmark, "
                  "Release, medians of 3; one host core): " + ", ".join(
                      "%s %.0f ns" % (n, v) for n, v in sorted(cost.items()))
                  + "."]
        c4200 = cost.get("BM_FabricPair/4200")
        if c4200 and pair:
            fps = pair * MIB / 4096.0
            lines[-1] += ("  At the measured %.0f MiB/s (%.0f frames/s of "
                          "4 KiB) that is %.1f%% of one core."
                          % (pair, fps, 100 * fps * c4200 / 1e9))
        lines.append("")
    lines += ["### Incast: two senders into r's 1 Gb/s port "
              "(fabric/topologies/incast.json)", "",
              "ib_write_bw -s 65536 -D %d --tclass=106 (DSCP 26, ECT(0), "
              "priority 3) from s1 and s2 at once.  ECN marking on the "
              "bottleneck (Kmin 32 KiB, Kmax 128 KiB, pmax 0.2); PFC on "
              "priority 3 (XOFF 256 KiB, XON 128 KiB, 1.5 MiB headroom) except "
              "in \"none\" (PFC off by the control socket's set, a 128 KiB "
              "queue limit).  Switch view (fabric_report: queue of sw0 "
              "towards r, priority 3; goodput = admitted ingress bytes, "
              "headers included):" % SECS, ""]
    lines += rep.markdown_table([r["summary_row"] for r in results])
    lines += ["", "Hosts' view (perftest's average, payload; guest "
              "hw_counters and ethtool -S deltas):", "",
              "| config | s1 Gbit/s | s2 Gbit/s | total | Jain (perftest) | "
              "Jain (switch) | np_ecn_marked (r) | np_cnp_sent (r) | "
              "rp_cnp_handled / ignored (s1+s2) | rx_prio3_pause s1/s2 | "
              "paused ms s1/s2 | switch pfc_tx (2nd half) | drops | "
              "ack_timeouts s1/s2 |", "|" + "---|" * 14]
    for r in results:
        g = r["perftest_gbps"]
        lines.append(
            "| %s | %s | %s | %s | %s | %.3f | %d | %d | %d / %d | %d / %d | "
            "%.0f / %.0f | %d (%d) | %d%s | %d / %d |" % (
                r["config"], fr(g["s1"], 3), fr(g["s2"], 3),
                fr(r["perftest_total_gbps"], 3), fr(r["perftest_jain"], 3),
                r["switch_jain"], r["np_ecn_marked"], r["np_cnp_sent"],
                r["rp_cnp_handled"], r["rp_cnp_ignored"],
                r["rx_pause"]["s1"], r["rx_pause"]["s2"],
                r["rx_pause_duration"]["s1"] / 1e3,
                r["rx_pause_duration"]["s2"] / 1e3, r["pfc_tx"],
                r["pfc_tx_second_half"],
                r["drops"], " (%s)" % ", ".join(
                    "%s %d" % kv for kv in sorted(
                        r["drops_by_cause"].items()))
                if r["drops"] else "",
                r["retransmits"]["s1"], r["retransmits"]["s2"]))
    prof = fablib.nic_cc_params(INCAST_TOPO)
    lines += ["", "Knobs: the topology's nic cc_params (%s)%s; dcqcn-mlx5 "
              "puts mlx5's values back (%s)."
              % (", ".join("%s=%s" % kv for kv in prof) or "none",
                 "; then FABRIC_BENCH_DCQCN in dcqcn: " + ", ".join(
                     "%s=%s" % (k, v) for k, v in DCQCN_KNOBS)
                 if DCQCN_KNOBS else "",
                 ", ".join("%s=%s" % kv for kv in mlx5_knobs())),
              "", "Targets (issue 24; Swift has none):", "",
              "| config | target | measured | met |", "|---|---|---|---|"]
    for r in results:
        for name, val, ok in r["targets"]:
            lines.append("| %s | %s | %s | %s |" % (
                r["config"], name, val, "yes" if ok else "**no**"))
    lines += ["", "Plots: build/bench/fabric-incast-<config>.svg (queue "
              "depth and each sender's rate at the switch, once a second), "
              "build/bench/fabric-queues.svg (the bottleneck queue of every "
              "configuration).", ""]
    return "\n".join(lines)


def section(direct_mibs=None):
    """Run the fabric section; returns (markdown, json-able dict)."""
    t0 = time.time()
    ensure_fabric()
    log("== fabric: switch per-frame cost (fabric/bench, Release)")
    cost = fabric_frame_cost()
    for n, v in sorted(cost.items()):
        log("  %-24s %8.1f ns/frame" % (n, v))
    log("== fabric: vrnic-fabric on %s, VMs snd and rcv" % PAIR_TOPO)
    fab = fablib.Fabric(PAIR_TOPO, FABRIC_DIR)
    vms = []
    results, pair_vals, pair_direct, loss, mp = [], [], [], [], []
    pair_rt = None
    loss_rounds = {}
    try:
        fab.start()
        vms = vmlib.boot_fabric(fab, LAYOUT, speeds={
            h: fablib.link_mbps(INCAST_TOPO, h) for h in HOSTS})
        fab.wait_hosts_up(HOSTS, timeout=30)
        set_mtu(vms)
        log("   booted in %.0f s" % (time.time() - t0))
        sec = Section(fab, vms)
        pair_direct, pair_vals = sec.pair()
        if os.environ.get("FABRIC_BENCH_RT", "1") != "0":
            log("== fabric: pair again, devices and switch at SCHED_FIFO 1")
            pair_rt = sec.pair_rt()
        if os.environ.get("FABRIC_BENCH_LOSS", "1") != "0":
            log("== fabric: goodput against loss, go-back-N and selective "
                "repeat")
            try:
                loss = sec.loss()
                if LOSS_ROUNDS:
                    log("== fabric: go-back-N and selective repeat, %d "
                        "alternating rounds at 0%% and 1%%" % LOSS_ROUNDS)
                    loss_rounds = sec.loss_rounds()
            except (fablib.FabricError, vmlib.VMError) as e:
                log("  loss: failed: %s" % e)
        if os.environ.get("FABRIC_BENCH_MP", "1") != "0":
            log("== fabric: multipath on %s" % LEAF_TOPO)
            try:
                mp = sec.multipath()
            except (fablib.FabricError, vmlib.VMError) as e:
                log("  multipath: failed: %s" % e)
        log("== fabric: incast (%s), %d s per configuration"
            % (INCAST_TOPO, SECS))
        sec.restart(INCAST_TOPO)
        only = os.environ.get("FABRIC_BENCH_CONFIGS")
        for name, label, algo, pfc in CONFIGS:
            if only and name not in only.split(","):
                continue
            t = time.time()
            try:
                results.append(sec.incast(name, algo, pfc))
            except (fablib.FabricError, vmlib.VMError) as e:
                log("  %s: failed: %s" % (name, e))
            log("  %s: %.0f s" % (name, time.time() - t))
    except (fablib.FabricError, vmlib.VMError) as e:
        log("  fabric section: %s" % e)
    finally:
        for vm in vms:
            vm.kill()
        fab.stop()
    series = {r["config"]: r.pop("_queue_series") for r in results}
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "fabric-queues.svg"), "w") as f:
        f.write(rep.svg_chart(series, title="Bottleneck queue (sw0 -> r, "
                              "priority 3) per configuration",
                              xlabel="time (s)", ylabel="depth (KiB)"))
    wall = time.time() - t0
    md = report(direct_mibs, pair_direct, pair_vals, cost, results, wall,
                pair_rt)
    md += loss_report(loss, loss_rounds)
    if loss:
        with open(os.path.join(OUT, "fabric-loss.svg"), "w") as f:
            f.write(loss_chart(loss))
    md += multipath_report(mp)
    data = {"direct_mibs": direct_mibs, "pair_direct_mibs": pair_direct,
            "pair_mibs": pair_vals, "loss": loss,
            "pair_rt_mibs": ({"direct": pair_rt[0], "switch": pair_rt[1]}
                             if pair_rt else None),
            "loss_rounds": {str(k): v for k, v in loss_rounds.items()},
            "multipath": mp,
            "frame_cost_ns": cost, "incast": results, "wall_s": wall,
            "incast_seconds": SECS}
    log("== fabric section: %.0f s" % wall)
    return md, data


def main():
    os.makedirs(OUT, exist_ok=True)
    t0 = time.time()
    direct = None
    if os.environ.get("FABRIC_BENCH_DIRECT", "0") != "0":
        direct = direct_reference()
    md, data = section(direct)
    md = "# vrnic bench: the fabric section alone\n\n(%s)\n%s\nTotal " \
        "%.0f s.\n" % (time.strftime("%Y-%m-%d %H:%M"), md,
                       time.time() - t0)
    with open(os.path.join(OUT, "fabric.md"), "w") as f:
        f.write(md)
    with open(os.path.join(OUT, "fabric.json"), "w") as f:
        json.dump(data, f, indent=1)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

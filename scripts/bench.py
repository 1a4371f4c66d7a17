#!/usr/bin/python3
"""make bench: vrnic against Linux rxe and TCP, on the same two VMs, in
one run; results as ratios in build/bench/results.md (+ .json, .png).

Two VMs (TCG, one vCPU each) each have a vrnic and a virtio-net.  The
vrnic runs RoCEv2 in the device model; rxe (soft-RoCE) and TCP run in the
guest on the virtio-net.  Both NICs are at MTU 9000 (RDMA path MTU 4096),
each on its own point-to-point QEMU dgram wire (scripts/vm.py boot_bench).
Every measurement is bounded in time and repeated BENCH_REPEAT times
(default 3); the tables give medians, interleaving vrnic, rxe and TCP so
that drift on the host affects all three alike.

Guest CPU: /proc/stat of both VMs around each bandwidth run; "CPU s/GiB"
is the busy time of both guests per GiB moved.

Host limits (Google Benchmark, tests/bench/engine_bench.cpp, Release,
medians of 5): single-core memcpy, the frame rate of the AF_UNIX socket
under the wires' netdev (stream; dgram for comparison), RoCE frames
built/parsed per second and ICRC GB/s.

Scale (issue 29, scripts/bench_scale.py): ib_write_bw against 1 to 4096
active QPs, vrnic with its QP-context cache unlimited and small, and rxe,
on a pair of its own (SCALE_BENCH=0 leaves it out).

Middleware (issue 16, tests/system/middleware.py BenchSection): UCX
tag_bw/tag_lat and MPI_Allreduce over vrnic, rxe and TCP (UCX's tcp
transport; Open MPI's ob1/btl tcp), in the same runs.

The vrnic runs as vrnic-device under unmodified QEMU (issue 27).  The
retired in-QEMU device and vrnic-device were measured side by side in
one run before it went (Documentation/performance.rst, "Both modes in
make bench"); the "Device modes" section comes back if a second mode
is listed in MODES.
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "tests", "system"))
import vm as vmlib  # noqa: E402
import middleware  # noqa: E402
import bench_fabric  # noqa: E402
import bench_scale  # noqa: E402

TOP = vmlib.TOP
OUT = os.path.join(TOP, "build", "bench")
REPEAT = int(os.environ.get("BENCH_REPEAT", "3"))
SECS = int(os.environ.get("BENCH_SECONDS", "4"))
MTU = 9000
MIB = 1 << 20
# Where the vrnic runs (issue 27, scripts/vm.py DEVICE): each mode on a
# pair of VMs of its own, the first (the default) with the middleware.
# One mode is left.
MODES = ["vfio-user"]
MODE_NAMES = {"qemu": "in-QEMU", "vfio-user": "vfio-user"}
# The host ceiling of the wires' transport, for a 4096-byte RoCE frame.
LIMIT = "Unix%s/4154" % ("Stream" if vmlib.NETDEV == "stream" else "Dgram")


def log(msg):
    print(msg, flush=True)


# ------------------------------------------------------------ host side

def host_limits():
    """Run the Google Benchmark binary (Release build); name -> row."""
    build = os.path.join(TOP, "build", "host-release")
    for cmd in (["cmake", "-S", "tests/unit", "-B", build, "-G", "Ninja",
                 "-DCMAKE_BUILD_TYPE=Release"],
                ["ninja", "-C", build, "vrnic_engine_bench"]):
        subprocess.run(cmd, cwd=TOP, check=True, stdout=subprocess.DEVNULL)
    out = subprocess.run([os.path.join(build, "bench", "vrnic_engine_bench"),
                          "--benchmark_format=json",
                          "--benchmark_min_time=0.3",
                          "--benchmark_repetitions=5",
                          "--benchmark_report_aggregates_only=true"],
                         check=True, capture_output=True, text=True).stdout
    rows = {}
    for b in json.loads(out)["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].replace("/real_time", "")
        rows[name] = {"bytes_per_second": b.get("bytes_per_second", 0),
                      "items_per_second": b.get("items_per_second", 0)}
    return rows


# ----------------------------------------------------------- guest side

def cpu(vm):
    """(busy, total) jiffies of the guest's one vCPU from /proc/stat."""
    f = [int(x) for x in vm.check("head -1 /proc/stat").split()[1:]]
    idle = f[3] + f[4]
    return sum(f) - idle, sum(f)


def busy(before, after):
    db, dt = after[0] - before[0], after[1] - before[1]
    return (100.0 * db / dt if dt else 0.0), db / 100.0   # %, seconds


LOW_MEMORY_KIB = 256 << 10


def low_memory(*vms):
    """Say so when a guest runs short of memory, with what holds it: a
    guest's OOM killer once ended a run (2026-11-27, round 2 of the
    in-QEMU pair, guest b), and by then nothing can be asked of it."""
    for vm in vms:
        out = vm.run("grep -E '^(MemAvailable|Shmem|Slab|SUnreclaim|"
                     "KernelStack|PageTables|AnonPages):' /proc/meminfo",
                     timeout=30)[1]
        m = {ln.split(":")[0]: int(ln.split()[1])
             for ln in out.splitlines() if len(ln.split()) >= 2 and
             ln.split()[1].isdigit()}
        if m.get("MemAvailable", LOW_MEMORY_KIB) < LOW_MEMORY_KIB:
            log("  ! %s is short of memory: %s; top processes: %s" % (
                vm.name, " ".join("%s %d MiB" % (k, v >> 10)
                                  for k, v in m.items()),
                " ".join(vm.run("ps -eo rss=,comm= --sort=-rss | head -5",
                                timeout=30)[1].split())))


def client_server(a, b, server, client, timeout):
    """Start server on b, run client on a; returns the client's output
    and both guests' CPU use over the client's run (None on failure)."""
    b.check("pkill -x qperf; pkill -x iperf3; rm -f /tmp/srv.out; "
            "(timeout %d %s > /tmp/srv.out 2>&1 &)" % (timeout, server))
    time.sleep(1.5)
    ca, cb = cpu(a), cpu(b)
    t0 = time.time()
    rc, out = a.run("timeout %d %s 2>&1" % (timeout, client),
                    timeout=timeout + 15)
    wall = time.time() - t0
    ua, ub = busy(ca, cpu(a)), busy(cb, cpu(b))
    b.run("for i in $(seq 20); do pgrep -f '%s' >/dev/null || exit 0; "
          "sleep 0.5; done; pkill -f '%s'" % (server.split()[0],
                                              server.split()[0]), timeout=30)
    low_memory(a, b)
    if rc:
        log("  ! exit %d: %s" % (rc, out.strip()[-400:]))
        return None
    return {"out": out, "cpu_a": ua[0], "cpu_b": ub[0],
            "cpu_s": ua[1] + ub[1], "wall": wall}


def perftest_row(out, size):
    for line in out.splitlines():
        w = line.split()
        if w and w[0] == str(size) and len(w) >= 5:
            return [float(x) for x in w[1:]]
    return None


class Bench:
    def __init__(self, a, b):
        self.a, self.b = a, b
        self.samples = {}      # (metric, system) -> [values]
        self.cpu = {}          # (metric, system) -> [CPU s/GiB]
        self.util = {}         # (metric, system) -> [(cpu_a, cpu_b) %]

    def add(self, metric, system, value, res=None, gib=None):
        self.samples.setdefault((metric, system), []).append(value)
        if res is not None:
            self.util.setdefault((metric, system), []).append(
                (res["cpu_a"], res["cpu_b"]))
            if gib:
                self.cpu.setdefault((metric, system), []).append(
                    res["cpu_s"] / gib)

    def rdma_target(self, system):
        if system == "vrnic":
            return "vrnic0", self.b.ip
        return "rxe0", self.b.ip2()

    def bw(self, system, tool, size, qps=1):
        dev, ip = self.rdma_target(system)
        args = "%s -d %s -x 1 -F -s %d -q %d -D %d" % (tool, dev, size, qps,
                                                       SECS)
        metric = "%s %s%s" % (tool, fmt_size(size),
                              " %d QPs" % qps if qps > 1 else "")
        res = client_server(self.a, self.b, args, "%s %s" % (args, ip),
                            SECS * 6 + 60)
        row = perftest_row(res["out"], size) if res else None
        if not row:
            log("  %-28s %-5s failed" % (metric, system))
            return
        mbs, mpps = row[2], row[3]
        self.add(metric, system, mbs, res, mbs * SECS / 1024.0)
        if size == 64 and qps == 1 and tool == "ib_write_bw":
            self.add("msg rate 64 B (Mpps)", system, mpps)
        log("  %-28s %-5s %9.1f MiB/s %7.3f Mpps  cpu a %3.0f%% b %3.0f%%"
            % (metric, system, mbs, mpps, res["cpu_a"], res["cpu_b"]))

    def lat(self, system, tool, iters=1000):
        dev, ip = self.rdma_target(system)
        args = "%s -d %s -x 1 -F -s 2 -n %d" % (tool, dev, iters)
        res = client_server(self.a, self.b, args, "%s %s" % (args, ip), 180)
        row = perftest_row(res["out"], 2) if res else None
        if not row:
            log("  %-28s %-5s failed" % (tool, system))
            return
        # iterations t_min t_max t_typical t_avg t_stdev 99% 99.9%
        self.add("%s 2 B median (us)" % tool, system, row[3])
        self.add("%s 2 B p99 (us)" % tool, system, row[6])
        log("  %-28s %-5s median %8.2f us  p99 %8.2f us"
            % (tool, system, row[3], row[6]))

    def tcp(self):
        ip = self.b.ip2()
        res = client_server(self.a, self.b, "iperf3 -s -1",
                            "iperf3 -c %s -t %d -J" % (ip, SECS), SECS + 60)
        if res:
            try:
                j = json.loads(res["out"][res["out"].index("{"):])
                mbs = j["end"]["sum_received"]["bits_per_second"] / 8 / MIB
                self.add("iperf3 TCP", "tcp", mbs, res, mbs * SECS / 1024.0)
                log("  %-28s %-5s %9.1f MiB/s  cpu a %3.0f%% b %3.0f%%"
                    % ("iperf3", "tcp", mbs, res["cpu_a"], res["cpu_b"]))
            except (ValueError, KeyError) as e:
                log("  iperf3: unreadable output (%s)" % e)
        for test, unit in (("tcp_bw", "MB/sec"), ("tcp_lat", "us")):
            res = client_server(self.a, self.b, "qperf",
                                "qperf -t %d -m %s %s %s"
                                % (SECS, "64K" if test == "tcp_bw" else "2",
                                   ip, test), SECS + 60)
            m = re.search(r"=\s+([\d.]+)\s+(\S+)", res["out"]) if res else None
            if not m:
                log("  qperf %s failed" % test)
                continue
            v, u = float(m.group(1)), m.group(2)
            if test == "tcp_bw":
                scale = {"GB/sec": 1e9, "MB/sec": 1e6, "KB/sec": 1e3}.get(u, 1)
                mbs = v * scale / MIB
                self.add("qperf tcp_bw 64 KiB", "tcp", mbs, res,
                         mbs * SECS / 1024.0)
                log("  %-28s %-5s %9.1f MiB/s" % ("qperf tcp_bw", "tcp", mbs))
            else:
                us = v * {"ms": 1000.0, "us": 1.0, "ns": 0.001}.get(u, 1)
                self.add("qperf tcp_lat 2 B (us)", "tcp", us)
                log("  %-28s %-5s %8.2f us" % ("qperf tcp_lat", "tcp", us))

    def median(self, metric, system, table=None):
        v = (table or self.samples).get((metric, system))
        return statistics.median(v) if v else None


def modes_report(benches):
    """Issue 27: the vrnic in QEMU against vrnic-device (vfio-user), each
    on VMs of its own, one after the other in this run.  rxe and TCP ran
    on each mode's VMs too, so vrnic/rxe per mode shows how much of a
    difference is the host drifting between the two halves."""
    modes = [m for m in MODES if benches.get(m)]
    if len(MODES) < 2:
        return ""
    if len(modes) < 2:
        missing = [m for m in MODES if not benches.get(m)]
        return "\n".join(["", "## Device modes", "",
                          "Only %s ran%s." % (", ".join(modes) or "nothing",
                                              "; %s did not boot" %
                                              ", ".join(missing)
                                              if missing else ""), ""])
    m0, m1 = modes[0], modes[1]
    n0, n1 = MODE_NAMES.get(m0, m0), MODE_NAMES.get(m1, m1)
    b0, b1 = benches[m0], benches[m1]
    lines = ["", "## Device modes: %s and %s (issue 27)" % (n0, n1), "",
             "The same perftest runs on two pairs of VMs, booted together "
             "and run in turn every round: the vrnic %s (patched QEMU %s) and %s "
             "(build/device/vrnic-device under unmodified QEMU with "
             "-device vfio-user-pci, memfd guest RAM).  rxe and TCP run on "
             "each pair's virtio-net, so \"vrnic/rxe\" compares each mode "
             "against its own VMs." % (n0, "10.0.2", n1), "",
             "| test | %s | %s | %s/%s | vrnic/rxe %s | vrnic/rxe %s | "
             "CPU s/GiB %s | CPU s/GiB %s |" % (n0, n1, n1, n0, n0, n1,
                                                n0, n1),
             "|---|---|---|---|---|---|---|---|"]
    for tool, size, qps in BW_RUNS:
        m = "%s %s%s" % (tool, fmt_size(size),
                         " %d QPs" % qps if qps > 1 else "")
        v0, v1 = b0.median(m, "vrnic"), b1.median(m, "vrnic")
        r0, r1 = b0.median(m, "rxe"), b1.median(m, "rxe")
        lines.append("| %s (MiB/s) | %s | %s | %s | %s | %s | %s | %s |" % (
            m, fr(v0), fr(v1), fr(ratio(v1, v0), 2), fr(ratio(v0, r0), 2),
            fr(ratio(v1, r1), 2), fr(b0.median(m, "vrnic", b0.cpu), 2),
            fr(b1.median(m, "vrnic", b1.cpu), 2)))
    for tool in LAT_RUNS:
        for kind in ("median", "p99"):
            m = "%s 2 B %s (us)" % (tool, kind)
            v0, v1 = b0.median(m, "vrnic"), b1.median(m, "vrnic")
            r0, r1 = b0.median(m, "rxe"), b1.median(m, "rxe")
            lines.append("| %s | %s | %s | %s | %s | %s | | |" % (
                m, fr(v0, 2), fr(v1, 2), fr(ratio(v1, v0), 2),
                fr(ratio(v0, r0), 3), fr(ratio(v1, r1), 3)))
    t0, t1 = b0.median("iperf3 TCP", "tcp"), b1.median("iperf3 TCP", "tcp")
    lines += ["", "iperf3 TCP on the virtio-net: %s MiB/s on the %s VMs, "
              "%s MiB/s on the %s VMs (%s×)." % (fr(t0), n0, fr(t1), n1,
                                                 fr(ratio(t1, t0), 2)), ""]
    return "\n".join(lines)


def fmt_size(n):
    return "%d KiB" % (n >> 10) if n >= 1024 else "%d B" % n


BW_RUNS = (("ib_write_bw", 64, 1), ("ib_write_bw", 4096, 1),
           ("ib_write_bw", 65536, 1), ("ib_write_bw", 65536, 16),
           ("ib_send_bw", 65536, 1), ("ib_read_bw", 65536, 1))
LAT_RUNS = ("ib_write_lat", "ib_send_lat", "ib_read_lat")


def setup(a, b):
    vmlib.setup_bench(a, b, MTU)


# ---------------------------------------------------------------- report

def ratio(x, y):
    return x / y if x is not None and y else None


def fr(v, digits=1):
    return "—" if v is None else ("%.*f" % (digits, v))


def report(bench, host, elapsed):
    lines = ["# vrnic bench", "",
             "Two TCG VMs (1 vCPU each), MTU 9000 (RDMA path MTU 4096); "
             "medians of %d runs of %d s; %s." % (
                 REPEAT, SECS, time.strftime("%Y-%m-%d %H:%M")), ""]
    frame_bps = host.get(LIMIT, {}).get("bytes_per_second", 0)
    limit_mibs = frame_bps / MIB if frame_bps else None
    lines += ["## Bandwidth (MiB/s) and guest CPU", "",
              "| test | vrnic | rxe | TCP | vrnic/rxe | vrnic/TCP | "
              "vrnic/limit | vrnic CPU s/GiB | rxe CPU s/GiB | "
              "CPU vrnic/rxe |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    tcp_bw = bench.median("iperf3 TCP", "tcp")
    for tool, size, qps in BW_RUNS:
        m = "%s %s%s" % (tool, fmt_size(size),
                         " %d QPs" % qps if qps > 1 else "")
        v, r = bench.median(m, "vrnic"), bench.median(m, "rxe")
        cv, cr = bench.median(m, "vrnic", bench.cpu), \
            bench.median(m, "rxe", bench.cpu)
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            m, fr(v), fr(r), fr(tcp_bw), fr(ratio(v, r), 2),
            fr(ratio(v, tcp_bw), 2), fr(ratio(v, limit_mibs), 3),
            fr(cv, 2), fr(cr, 2), fr(ratio(cv, cr), 3)))
    for m in ("iperf3 TCP", "qperf tcp_bw 64 KiB"):
        v = bench.median(m, "tcp")
        c = bench.median(m, "tcp", bench.cpu)
        lines.append("| %s | | | %s | | | | | | TCP CPU s/GiB %s |"
                     % (m, fr(v), fr(c, 2)))
    lines += ["", "## Latency (µs, one way as perftest and qperf report; "
              "READ is a round trip)", "",
              "| test | vrnic | rxe | TCP (qperf tcp_lat) | vrnic/rxe | "
              "vrnic/TCP |", "|---|---|---|---|---|---|"]
    tcp_lat = bench.median("qperf tcp_lat 2 B (us)", "tcp")
    for tool in LAT_RUNS:
        for kind in ("median", "p99"):
            m = "%s 2 B %s (us)" % (tool, kind)
            v, r = bench.median(m, "vrnic"), bench.median(m, "rxe")
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                m, fr(v, 2), fr(r, 2), fr(tcp_lat, 2), fr(ratio(v, r), 3),
                fr(ratio(v, tcp_lat), 3)))
    m = "msg rate 64 B (Mpps)"
    v, r = bench.median(m, "vrnic"), bench.median(m, "rxe")
    lines += ["", "Message rate, ib_write_bw 64 B: vrnic %s Mpps, rxe %s "
              "Mpps (%s×)." % (fr(v, 3), fr(r, 3), fr(ratio(v, r), 2))]
    lines += middleware_report(bench)

    # Targets (issue 6).
    w64 = "ib_write_bw 64 KiB"
    v, r = bench.median(w64, "vrnic"), bench.median(w64, "rxe")
    lat = "ib_write_lat 2 B median (us)"
    lv, lr = bench.median(lat, "vrnic"), bench.median(lat, "rxe")
    cv, cr = bench.median(w64, "vrnic", bench.cpu), \
        bench.median(w64, "rxe", bench.cpu)
    q16 = bench.median(w64 + " 16 QPs", "vrnic")
    targets = [
        ("ib_write_bw 64 KiB ≥ 10× rxe", ratio(v, r), 10, True),
        ("ib_write_bw 64 KiB ≥ 5× TCP (iperf3)", ratio(v, tcp_bw), 5, True),
        ("ib_write_bw 64 KiB ≥ 50% of the netdev transport limit",
         ratio(v, limit_mibs), 0.5, True),
        ("ib_write_lat 2 B ≤ 1/5 of rxe's", ratio(lv, lr), 0.2, False),
        ("ib_write_lat 2 B ≤ 1/5 of TCP's (qperf tcp_lat)",
         ratio(lv, tcp_lat), 0.2, False),
        ("guest CPU per GiB ≤ 5% of rxe's", ratio(cv, cr), 0.05, False),
        ("16 QPs do not lower aggregate bandwidth (16 QPs / 1 QP ≥ 0.95)",
         ratio(q16, v), 0.95, True),
    ]
    lines += ["", "## Targets", "", "| target | measured ratio | met |",
              "|---|---|---|"]
    met = 0
    for name, val, bound, at_least in targets:
        ok = val is not None and (val >= bound if at_least else val <= bound)
        met += ok
        lines.append("| %s | %s | %s |" % (name, fr(val, 3),
                                            "yes" if ok else "**no**"))
    lines += ["", "## Host limits (one host core, Google Benchmark)", "",
              "| benchmark | GB/s | M items/s |", "|---|---|---|"]
    for name, row in host.items():
        lines.append("| %s | %.2f | %s |" % (
            name, row["bytes_per_second"] / 1e9,
            fr(row["items_per_second"] / 1e6, 3)
            if row["items_per_second"] else ""))
    lines += ["", "The netdev transport limit used above is %s (QEMU's "
              "%s netdev, 4096-byte RoCE payload frames, medians of 5): "
              "%s MiB/s." % (LIMIT, vmlib.NETDEV, fr(limit_mibs)),
              "", "Total run time: %.0f s." % elapsed, ""]
    return "\n".join(lines), met, len(targets)


MW_BW = (middleware.BENCH_UCX_BW,) + middleware.BENCH_MPI_BW
MW_LAT = (middleware.BENCH_UCX_LAT, middleware.BENCH_MPI_LAT)


def middleware_report(bench):
    """The middleware table: UCX and Open MPI over vrnic, rxe and TCP."""
    lines = ["", "## Middleware: UCX 1.13 and Open MPI 4.1 (issue 16)", "",
             "UCX_TLS=rc_verbs,ud_verbs on vrnic0:1 and rxe0:1, UCX_TLS=tcp "
             "on the virtio-net; MPI_Allreduce with 2 ranks (one per VM), "
             "pml ucx over vrnic and rxe, pml ob1/btl tcp on the "
             "virtio-net.  Bus bandwidth = 2 (n-1)/n × bytes / time.  "
             "UCX tag_lat is ucx_perftest's one-way 50th percentile; UCX "
             "tag_bw its overall MiB/s (UCX's MB is 2^20).", "",
             "| test | vrnic | rxe | TCP | vrnic/rxe | vrnic/TCP | "
             "vrnic beats TCP |", "|---|---|---|---|---|---|---|"]
    for m in MW_BW + MW_LAT:
        v, r, t = (bench.median(m, s) for s in ("vrnic", "rxe", "tcp"))
        d = 2 if m in MW_LAT else 1
        beats = None if v is None or t is None else \
            (v < t if m in MW_LAT else v > t)
        lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            m, fr(v, d), fr(r, d), fr(t, d), fr(ratio(v, r), 2),
            fr(ratio(v, t), 2), "—" if beats is None else
            ("yes" if beats else "**no**")))
    return lines


def plot(bench):
    dat = os.path.join(OUT, "bw.dat")
    with open(dat, "w") as f:
        tcp_bw = bench.median("iperf3 TCP", "tcp") or 0
        for tool, size, qps in BW_RUNS:
            m = "%s %s%s" % (tool, fmt_size(size),
                             " %d QPs" % qps if qps > 1 else "")
            f.write('"%s" %s %s %s\n' % (
                m.replace("ib_", ""), bench.median(m, "vrnic") or 0,
                bench.median(m, "rxe") or 0, tcp_bw))
        # Middleware: TCP is UCX's tcp transport / Open MPI's btl tcp.
        for m in MW_BW:
            f.write('"%s" %s %s %s\n' % (
                m.replace(" (MiB/s)", "").replace("MPI_Allreduce", "Allreduce"),
                bench.median(m, "vrnic") or 0, bench.median(m, "rxe") or 0,
                bench.median(m, "tcp") or 0))
    script = """set terminal png size 1300,600 noenhanced
set output '%s'
set title 'vrnic vs rxe vs TCP (iperf3), two TCG VMs, MiB/s (log scale)'
set style data histograms
set style histogram clustered gap 1
set style fill solid border -1
set logscale y
set key top left
set xtics rotate by -20
set ylabel 'MiB/s'
plot '%s' using 2:xtic(1) title 'vrnic', '' using 3 title 'rxe', \\
     '' using 4 title 'TCP (iperf3; UCX tcp, MPI btl tcp for UCX/Allreduce)'
""" % (os.path.join(OUT, "bench.png"), dat)
    subprocess.run(["gnuplot"], input=script, text=True, check=True)


def boot_modes():
    """A pair of VMs per mode, all booted before the first run, so that
    every mode runs beside the same idle VMs of the others: {mode:
    (a, b)} (a mode whose VMs did not boot is left out, and said so)."""
    pairs = {}
    for i, mode in enumerate(MODES):
        vmlib.DEVICE = mode
        log("== %s: booting VMs a and b (vrnic + virtio-net each)"
            % MODE_NAMES.get(mode, mode))
        names = ("a", "b") if i == 0 else ("%s-a" % mode, "%s-b" % mode)
        try:
            pairs[mode] = vmlib.boot_bench(names)
            setup(*pairs[mode])
        except vmlib.VMError as e:
            log("  ! %s: the VMs did not come up: %s" % (mode, e))
            for vm in pairs.pop(mode, ()):
                vm.kill()
    vmlib.DEVICE = MODES[0]
    return pairs


def run_round(bench, mw):
    """One round of every perftest run, vrnic and rxe interleaved, then
    TCP and (with mw) the middleware."""
    for tool, size, qps in BW_RUNS:
        for system in ("vrnic", "rxe"):
            bench.bw(system, tool, size, qps)
    for tool in LAT_RUNS:
        for system in ("vrnic", "rxe"):
            bench.lat(system, tool)
    bench.tcp()
    if mw:
        mw.run(bench, log)


def main():
    t0 = time.time()
    os.makedirs(OUT, exist_ok=True)
    log("== host limits (Google Benchmark, Release)")
    host = host_limits()
    for name, row in host.items():
        log("  %-20s %8.2f GB/s %10.3f M/s" % (
            name, row["bytes_per_second"] / 1e9,
            row["items_per_second"] / 1e6))
    # Each mode on a pair of VMs of its own (issue 27), all booted first;
    # every round runs the modes one after the other, so that host drift
    # hits them alike.  The middleware runs in the default mode only.
    pairs = boot_modes()
    if MODES[0] not in pairs:
        for a, b in pairs.values():
            a.kill()
            b.kill()
        sys.exit("bench: the %s VMs did not come up" % MODES[0])
    benches = {m: Bench(*pairs[m]) if m in pairs else None for m in MODES}
    mw = None
    try:
        mw = middleware.BenchSection(*pairs[MODES[0]])
        mw.start()
        for rep in range(REPEAT):
            for mode in MODES:
                if benches[mode] is None:
                    continue
                log("== run %d/%d, %s" % (rep + 1, REPEAT,
                                          MODE_NAMES.get(mode, mode)))
                run_round(benches[mode], mw if mode == MODES[0] else None)
    finally:
        if mw:
            mw.stop()
        for a, b in pairs.values():
            a.kill()
            b.kill()
    bench = benches[MODES[0]]
    # The fabric section (scripts/bench_fabric.py): its own VMs through
    # vrnic-fabric, against this run's direct-wire ib_write_bw 64 KiB.
    fab = None
    if bench_fabric.enabled():
        fab_md, fab = bench_fabric.section(
            bench.median("ib_write_bw 64 KiB", "vrnic"))
    # The scale section (scripts/bench_scale.py, issue 29): its own pair.
    scale_md, scale = (bench_scale.section() if bench_scale.enabled()
                       else ("", None))
    text, met, total = report(bench, host, time.time() - t0)
    text += modes_report(benches)
    if fab is not None:
        text += fab_md
    text += scale_md
    with open(os.path.join(OUT, "results.md"), "w") as f:
        f.write(text)
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"host": host, "samples": {
            "%s|%s" % k: v for k, v in bench.samples.items()},
            "cpu_s_per_gib": {"%s|%s" % k: v for k, v in bench.cpu.items()},
            "cpu_util": {"%s|%s" % k: v for k, v in bench.util.items()},
            "modes": {m: None if b is None else {
                "samples": {"%s|%s" % k: v for k, v in b.samples.items()},
                "cpu_s_per_gib": {"%s|%s" % k: v
                                  for k, v in b.cpu.items()}}
                for m, b in benches.items()},
            "fabric": fab, "scale": scale}, f, indent=1)
    plot(bench)
    print("\n" + text)
    log("bench: %d of %d targets met; build/bench/results.md, "
        "results.json, bench.png (%.0f s)" % (met, total, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())

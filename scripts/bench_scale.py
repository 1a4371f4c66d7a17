#!/usr/bin/python3
"""make bench, the scale section (issue 29): aggregate ib_write_bw
throughput and message rate against the number of QPs carrying it, for
vrnic with its QP-context cache unlimited (the default) and small
(SCALE_BENCH_CACHE contexts, 256 unless told), and for Linux rxe, on one
pair of bench VMs (vrnic + virtio-net each, scripts/vm.py boot_bench).

Each point is `ib_write_bw -s SIZE -q N -D SECS` (perftest spreads its
messages over the N QPs in turn, so every QP is active), the median of
SCALE_BENCH_REPEAT runs.  The cache is changed through vrnic-device's
control socket (qom-set qpc-cache) and the driver reloaded, which is when
it learns of the cache and gives the device its context memory.  Also
reported: the cache's hits, misses and evictions per run (rdma
statistic), so that the wall can be read against its cause.

Then object scale: tests/guest/vrnic_qp_scale creates SCALE_BENCH_CREATE
RC QPs (100000 unless told) in one process and destroys them, on vrnic0
and on rxe0: the time per create and destroy, the guest memory per QP
(MemAvailable), and for vrnic what vrnic-device's RSS grew by per QP
(rxe keeps its QPs in the guest kernel, so its guest figure is all of
it).  For it the bench VMs have 3 GiB of RAM and their devices a 1 GiB
host budget.

    SCALE_BENCH=0             leave the section out of make bench
    SCALE_BENCH_QPS=1,16,...  the QP counts (default 1,16,256,1024,4096,
                              16384; perftest's -t is 128 up to 128 QPs,
                              then 16384 / QPs and at least 16 (depth());
                              past 4096 QPs at least 10 s)
    SCALE_BENCH_CACHE=256     the small cache
    SCALE_BENCH_SIZE=4096     message size
    SCALE_BENCH_MISS_NS=20000 a miss's cost in the small-cache series
    SCALE_BENCH_REPEAT=3      runs per point
    SCALE_BENCH_RXE=0         leave rxe out
    SCALE_BENCH_CREATE=100000 QPs the object-scale part creates (0: none)

Run alone: python3 scripts/bench_scale.py (writes build/bench/scale.md,
scale.json and scale.png).
"""

import json
import os
import re
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import vm as vmlib  # noqa: E402

TOP = vmlib.TOP
OUT = os.path.join(TOP, "build", "bench")
MTU = 9000
SECS = int(os.environ.get("BENCH_SECONDS", "4"))
QPS = [int(x) for x in os.environ.get("SCALE_BENCH_QPS",
                                      "1,16,256,1024,4096,16384").split(",")]
CACHE = int(os.environ.get("SCALE_BENCH_CACHE", "256"))
# What a miss costs in the small-cache series (vrnic-device's default,
# 800 ns, is a PCIe round trip at a real RNIC's packet rate; see the
# report for the stretch).
# The default stretches it as the fabric's DCQCN constants are
# stretched: this emulation moves a 4 KiB message in 5-10 us, a 100 Gb/s
# RNIC in about 0.35 us, so a miss that costs about two messages' time
# there (800 ns) is 20 us here.
MISS_NS = int(os.environ.get("SCALE_BENCH_MISS_NS", "20000"))
SIZE = int(os.environ.get("SCALE_BENCH_SIZE", "4096"))
REPEAT = int(os.environ.get("SCALE_BENCH_REPEAT", "3"))
RXE = os.environ.get("SCALE_BENCH_RXE", "1") != "0"
CREATE = int(os.environ.get("SCALE_BENCH_CREATE", "100000"))
MEM_MB = 3072
BUDGET = 1 << 30
QPC = ("qpc_cache_hits", "qpc_cache_misses", "qpc_cache_evictions")


def enabled():
    return os.environ.get("SCALE_BENCH", "1") != "0"


def log(msg):
    print(msg, flush=True)


def setup(a, b):
    vmlib.setup_bench(a, b, MTU)


def set_cache(a, b, entries, miss_ns=800):
    """Both vrnics to a QP-context cache of entries (0: unlimited) with
    misses of miss_ns; the driver reloads to learn of it."""
    for vm in (a, b):
        vm.qmp("qom-set", path=vm.vrnic_qom_path(), property="qpc-miss-ns",
               value=miss_ns)
        vm.qmp("qom-set", path=vm.vrnic_qom_path(), property="qpc-cache",
               value=entries)
        vm.check("rmmod vrnic_ib vrnic && modprobe vrnic && "
                 "for i in $(seq 60); do [ -e /sys/class/infiniband/vrnic0 ]"
                 " && break; sleep 0.5; done && vrnic-up %d" % MTU,
                 timeout=120)
        rc, out = vm.run("dmesg | grep -E 'QP-context memory refused|"
                         "no memory for QP contexts'")
        if rc == 0:
            raise vmlib.VMError("%s: %s" % (vm.name, out.strip()))
    a.check("ping -c 2 -W 5 %s" % b.ip, timeout=60)


def qpc_stats(vm):
    _, out = vm.run("rdma statistic show link vrnic0/1")
    got = {}
    for n in QPC:
        m = re.search(r"\b%s (\d+)" % n, out)
        got[n] = int(m.group(1)) if m else 0
    return got


def dev_cpu(vms):
    """CPU seconds the VMs' vrnic-device processes have used."""
    t = 0.0
    for vm in vms:
        try:
            with open("/proc/%d/stat" % vm.devproc.pid) as f:
                w = f.read().rsplit(")", 1)[1].split()
            t += (int(w[11]) + int(w[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, AttributeError, IndexError, ValueError):
            pass
    return t


def guest_busy(vm):
    """(busy, total) jiffies of the guest's CPUs, from /proc/stat."""
    _, out = vm.run("head -1 /proc/stat")
    v = [int(x) for x in out.split()[1:]]
    return sum(v) - v[3] - v[4], sum(v)


def depth(qps):
    """perftest's tx depth (WQEs outstanding per QP) at qps QPs: its 128
    up to 128 QPs, then 16,384 WQEs over all of them, and never below
    16.  perftest posts tx depth x QPs WQEs before it polls once, and
    sizes its CQ to that: at 4096 QPs x 128 (524,288 WQEs) that first
    round took most of a 4 s run (440 MiB/s against 680 with 16 per QP
    and 725 with 32 over 10 s, on one pair of VMs), and from 256 QPs x
    128 the CQ is past rxe's max_cqe (32767).  A real application with
    thousands of QPs keeps a few WQEs on each, not 128."""
    return max(16, min(128, 16384 // qps))


def bw(a, b, dev, ip, qps):
    """One ib_write_bw run of qps QPs, b serving: (MiB/s, Mpps, the
    vrnic-device processes' CPU share over the client's run) or None,
    and the wall time it took (setup included)."""
    deep = qps > 4096
    args = "ib_write_bw -d %s -x 1 -F -s %d -q %d -D %d -t %d" % (
        dev, SIZE, qps, max(SECS, 10) if deep else SECS, depth(qps))
    limit = SECS * 6 + 60 + qps // 8
    b.check("pkill -x ib_write_bw; (timeout %d %s > /tmp/srv.out 2>&1 &)"
            % (limit, args))
    time.sleep(1.5)
    t0, c0, g0 = time.time(), dev_cpu((a, b)), guest_busy(a)
    rc, out = a.run("timeout %d %s %s 2>&1" % (limit, args, ip),
                    timeout=limit + 15)
    wall = time.time() - t0
    share = (dev_cpu((a, b)) - c0) / wall if wall > 0 else 0.0
    g1 = guest_busy(a)
    guest = (g1[0] - g0[0]) / max(1, g1[1] - g0[1])
    b.run("for i in $(seq 20); do pgrep -x ib_write_bw >/dev/null || exit 0;"
          " sleep 0.5; done; pkill -x ib_write_bw", timeout=30)
    for line in out.splitlines():
        w = line.split()
        if rc == 0 and w and w[0] == str(SIZE) and len(w) >= 5:
            mib = float(w[3]) * 1e6 / (1 << 20)  # perftest's MB/sec
            return (mib, float(w[4]), share, guest), wall
    why = out.strip().splitlines()[-1:] or ["exit %d" % rc]
    log("  ! ib_write_bw -q %d on %s: exit %d: %s"
        % (qps, dev, rc, out.strip()[-300:]))
    return why[0].strip(), wall


def measure(a, b):
    """{series: {qps: {"mib": .., "mpps": .., "qpc": {..}, "wall": ..}}}"""
    res = {}
    series = [("vrnic", 0), ("vrnic cache %d" % CACHE, CACHE)]
    for name, cache in series:
        set_cache(a, b, cache, MISS_NS)
        res[name] = {}
        for q in QPS:
            runs, deltas, walls = [], [], []
            for _ in range(REPEAT):
                before = qpc_stats(a)
                r, wall = bw(a, b, "vrnic0", b.ip, q)
                after = qpc_stats(a)
                walls.append(wall)
                if isinstance(r, tuple):
                    runs.append(r)
                    deltas.append({k: after[k] - before[k] for k in QPC})
            if not runs:
                res[name][q] = {"error": r}
                continue
            d = deltas[len(deltas) // 2]
            acc = sum(d.values()) - d["qpc_cache_evictions"]
            res[name][q] = {
                "mib": statistics.median(x[0] for x in runs),
                "mpps": statistics.median(x[1] for x in runs),
                "dev_cpu": statistics.median(x[2] for x in runs),
                "guest_cpu": statistics.median(x[3] for x in runs),
                "qpc": d, "wall": statistics.median(walls),
                "miss_ratio": d["qpc_cache_misses"] / acc if acc else 0.0}
            p = res[name][q]
            log("  %-18s -q %-5d %8.1f MiB/s %7.4f Mpps  misses %5.1f%% "
                "(%d)  devices' CPU %3.0f%%, guest a %3.0f%%  (%.0f s)"
                % (name, q, p["mib"], p["mpps"], 100 * p["miss_ratio"],
                   d["qpc_cache_misses"], 100 * p["dev_cpu"],
                   100 * p["guest_cpu"], p["wall"]))
    set_cache(a, b, 0)
    if RXE:
        res["rxe"] = {}
        for q in QPS:
            runs, walls = [], []
            for _ in range(REPEAT):
                r, wall = bw(a, b, "rxe0", b.ip2(), q)
                walls.append(wall)
                if isinstance(r, tuple):
                    runs.append(r)
                else:
                    break       # it fails alike every time
            if not runs:
                res["rxe"][q] = {"error": r}
                log("  %-18s -q %-5d failed: %s" % ("rxe", q, r))
            else:
                res["rxe"][q] = {
                    "mib": statistics.median(x[0] for x in runs),
                    "mpps": statistics.median(x[1] for x in runs),
                    "wall": statistics.median(walls)}
                log("  %-18s -q %-5d %8.1f MiB/s %7.4f Mpps  (%.0f s)"
                    % ("rxe", q, res["rxe"][q]["mib"], res["rxe"][q]["mpps"],
                       res["rxe"][q]["wall"]))
    return res


def create(a):
    """{dev: {"create_us", "destroy_us", "guest_b", "host_b", ...}}: CREATE
    QPs made and destroyed by vrnic_qp_scale on vrnic0 and rxe0."""
    out = {}
    for dev in ("vrnic0",) + (("rxe0",) if RXE else ()):
        pid = a.devproc.pid if dev == "vrnic0" and a.devproc else 0
        with vmlib.RssPeak(pid) as rss:
            rc, text = a.run("/opt/vrnic/tests/vrnic_qp_scale %d %s"
                             % (CREATE, dev), timeout=1800)
        m = re.search(r"(\d+) QPs created in ([\d.]+) s", text)
        g = re.search(r"MemAvailable (\d+) KiB before, (\d+) KiB", text)
        d = re.search(r"(\d+) QPs destroyed in ([\d.]+) s", text)
        if rc or not m or int(m.group(1)) != CREATE or not g or not d:
            # How far it got, and why it stopped (create_qp's errno).
            why = re.search(r"create_qp (\d+): (.*)", text)
            made = int(m.group(1)) if m else 0
            err = ("%d QPs, then create_qp: %s" % (made, why.group(2))
                   if why else "rc %d: %s" % (rc, " ".join(
                       text.strip().splitlines()[-3:])[-200:]))
            if made and g:
                err += " (%.0f B of guest memory per QP)" % (
                    (int(g.group(1)) - int(g.group(2))) * 1024.0 / made)
            out[dev] = {"error": err, "made": made}
            log("  create %s: failed: %s" % (dev, err))
            continue
        out[dev] = {
            "create_us": float(m.group(2)) * 1e6 / CREATE,
            "destroy_us": float(d.group(2)) * 1e6 / CREATE,
            "create_s": float(m.group(2)), "destroy_s": float(d.group(2)),
            "guest_b": (int(g.group(1)) - int(g.group(2))) * 1024.0 / CREATE}
        if pid and rss.start:
            out[dev]["host_b"] = rss.per(CREATE)
        log("  create %s: %d QPs in %.1f s (%.0f us each), destroyed in "
            "%.1f s; %.0f B of guest memory per QP%s" % (
                dev, CREATE, out[dev]["create_s"], out[dev]["create_us"],
                out[dev]["destroy_s"], out[dev]["guest_b"],
                ", %.0f B of vrnic-device RSS" % out[dev]["host_b"]
                if "host_b" in out[dev] else ""))
    return out


def report_create(cr):
    if not cr:
        return ""
    lines = ["", "## Scale: creating %d QPs in one process" % CREATE, "",
             "`vrnic_qp_scale %d DEV`: RC QPs on one PD, CQ and SRQ, "
             "one-entry SQs, created then destroyed (guest: MemAvailable "
             "before and with them; host: vrnic-device's RSS growth, "
             "sampled every 0.5 s; rxe's state is in the guest kernel)." %
             CREATE, "",
             "| device | create, s | per QP, us | destroy, s | guest B/QP "
             "| host B/QP |", "|---|---|---|---|---|---|"]
    for dev, p in cr.items():
        if "error" in p:
            lines.append("| %s | failed: %s | | | | |" % (dev, p["error"]))
            continue
        lines.append("| %s | %.1f | %.0f | %.1f | %.0f | %s |" % (
            dev, p["create_s"], p["create_us"], p["destroy_s"], p["guest_b"],
            "%.0f" % p["host_b"] if "host_b" in p else "in the guest"))
    return "\n".join(lines) + "\n"


def report(res, elapsed):
    first = QPS[0]
    lines = ["", "## Scale: throughput against active QPs (issue 29)", "",
             "`ib_write_bw -s %d -q N -D %d -t T`, every QP active, median "
             "of %d, perftest's tx depth T 128 up to 128 QPs, then 16384/N "
             "and at least 16 (past 4096 QPs, at least 10 s); "
             "vrnic with its QP-context cache unlimited and at %d contexts "
             "(misses %d ns each), and rxe, on one pair of bench VMs "
             "(%.0f s).  Relative: to the series' own %d-QP figure." % (
                 SIZE, SECS, REPEAT, CACHE,
                 MISS_NS, elapsed, first), ""]
    hdr = "| QPs | T |"
    sep = "|---|---|"
    names = [n for n in res if res[n]]
    for n in names:
        hdr += " %s MiB/s | rel | Mpps |" % n
        sep += "---|---|---|"
        if n.startswith("vrnic cache"):
            hdr += " vs unlimited | miss % |"
            sep += "---|---|"
        if n.startswith("vrnic"):
            hdr += " guest a CPU |"
            sep += "---|"
    lines += [hdr, sep]
    errors = {}
    for q in QPS:
        row = "| %d | %d |" % (q, depth(q))
        for n in names:
            p = res[n].get(q) or {"error": "not run"}
            base = res[n].get(first, {})
            if "error" in p:
                errors.setdefault(p["error"], []).append("%s -q %d" % (n, q))
                row += " failed | | |"
            else:
                rel = (p["mib"] / base["mib"]) if base.get("mib") else None
                row += " %.1f | %s | %.4f |" % (
                    p["mib"], "%.2f" % rel if rel else "", p["mpps"])
            if n.startswith("vrnic cache"):
                u = res.get("vrnic", {}).get(q, {})
                row += " %s | %s |" % (
                    "%.2f" % (p["mib"] / u["mib"]) if u.get("mib") and
                    "mib" in p else "",
                    "%.1f" % (100 * p["miss_ratio"]) if "mib" in p else "")
            if n.startswith("vrnic"):
                row += " %s |" % ("%.0f%%" % (100 * p["guest_cpu"])
                                  if "guest_cpu" in p else "")
        lines.append(row)
    for why, where in errors.items():
        lines += ["", "Failed (%s): %s." % (", ".join(where), why)]
    # The target: unlimited, within 10% of the 1-QP figure up to 4K.
    v = res.get("vrnic", {})
    if "mib" in v.get(first, {}) and any(
            q <= 4096 and "mib" in v[q] for q in v):
        worst = min((v[q]["mib"] / v[first]["mib"], q) for q in v
                    if q <= 4096 and "mib" in v[q])
        lines += ["", "Unlimited cache, up to 4096 QPs: the lowest is %.2f "
                  "of the %d-QP figure (at %d QPs); target >= 0.90: %s." % (
                      worst[0], first, worst[1],
                      "met" if worst[0] >= 0.9 else "missed")]
    return "\n".join(lines) + "\n"


def plot(res, path):
    data = os.path.join(OUT, "scale.dat")
    names = [n for n in res if res[n]]
    with open(data, "w") as f:
        for n in names:
            f.write("# %s\n" % n)
            for q in QPS:
                if "mib" in res[n].get(q, {}):
                    f.write("%d %.2f\n" % (q, res[n][q]["mib"]))
            f.write("\n\n")
    gp = ["set terminal png size 900,500", "set output '%s'" % path,
          "set title 'ib_write_bw %d B against active QPs (two TCG VMs)'"
          % SIZE, "set logscale x 2", "set xlabel 'active QPs'",
          "set ylabel 'MiB/s'", "set key outside", "set grid",
          "plot " + ", ".join("'%s' index %d with linespoints title '%s'"
                              % (data, i, n) for i, n in enumerate(names))]
    try:
        subprocess.run(["gnuplot"], input="\n".join(gp), text=True,
                       check=True, timeout=60, capture_output=True)
    except (OSError, subprocess.SubprocessError) as e:
        log("  scale plot: %s" % e)


def section():
    """Boot the bench pair, measure, shut down: (markdown, data)."""
    t0 = time.time()
    log("== scale: booting VMs scale-a and scale-b (vrnic + virtio-net)")
    a = b = None
    try:
        a, b = vmlib.boot_bench(("scale-a", "scale-b"), mem_mb=MEM_MB,
                                dev_args=("--host-mem-budget", str(BUDGET)))
        setup(a, b)
        res = measure(a, b)
        cr = create(a) if CREATE else {}
    except vmlib.VMError as e:
        log("  ! scale: %s" % e)
        return "\n## Scale\n\nThe section failed: %s\n" % e, None
    finally:
        for vm in (a, b):
            if vm:
                vm.kill()
    md = report(res, time.time() - t0) + report_create(cr)
    os.makedirs(OUT, exist_ok=True)
    plot(res, os.path.join(OUT, "scale.png"))
    data = {k: {str(q): p for q, p in v.items()} for k, v in res.items()}
    data["create"] = cr
    return md, data


def main():
    md, data = section()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "scale.md"), "w") as f:
        f.write(md)
    with open(os.path.join(OUT, "scale.json"), "w") as f:
        json.dump(data, f, indent=1)
    print(md)
    return 0 if data else 1


if __name__ == "__main__":
    sys.exit(main())

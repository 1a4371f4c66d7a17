#!/usr/bin/python3
"""Analysis and plots of a vrnic-fabric telemetry file (python3 only).

The file (vrnic-fabric --telemetry FILE, Documentation/fabric.rst) is JSON
lines of two kinds:
  {"t_ns": T, "q": [[switch, port, prio, bytes], ..]}   queue samples
  {"t_ns": T, "counters": {..}}                         counter snapshots
A sample lists only the queues that hold bytes: a queue absent from a
sample held 0 bytes then.  Empty samples are written at most once a
second, so a gap between two sample lines longer than the sample interval
stands for samples in which every queue was empty.

Library use (scripts/bench.py, make run):
    tel = load("queues.jsonl")
    key = bottleneck(tel)                   # ("sw0", 2, 0)
    queue_stats(tel, key)                   # p50, p99, max, ..
    port_deltas(tel.counters[0][1], tel.counters[-1][1])
    flow_throughput(tel), goodput(tel), jain([..])
    text_queue_plot(tel), svg_queue(tel), summary(tel), markdown_table(..)

Command line:
    python3 scripts/fabric_report.py TELEMETRY.jsonl [--port SW:PORT[:PRIO]]
                                     [--svg OUT.svg] [--sample-us N]
"""

import argparse
import json
import math
import sys
import textwrap
from collections import namedtuple
from xml.sax.saxutils import escape

# samples: [(t_ns, {(switch, port, prio): bytes})] in file order.
# counters: [(t_ns, counters object)] in file order.
# stalls: [(t_ns, late_ns)], the samples the switch took a whole interval
# or more late (the host did not run it: frames waited in the sockets).
Telemetry = namedtuple("Telemetry", "samples counters stalls",
                       defaults=((),))

PLOT_WIDTH = 72
MARKS = "*+ox#%@="
OVERLAP = "&"
COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
           "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
PORT_FIELDS = ("rx_bytes", "rx_packets", "tx_bytes", "tx_packets",
               "ce_marked", "pfc_tx", "pfc_rx", "pfc_watchdog", "paused_ns",
               "duplicated", "corrupted", "reordered")
# Drops counted at the ingress port after rx_packets/rx_bytes.
ADMISSION_DROPS = ("buffer", "headroom", "queue_limit", "no_route")


# ---------------------------------------------------------------- loading

def parse_lines(lines):
    """Telemetry from an iterable of JSON lines (str).  Blank lines and a
    torn last line (the daemon killed mid-write) are skipped."""
    samples, counters, stalls = [], [], []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict) or "t_ns" not in obj:
            continue
        t = int(obj["t_ns"])
        if "q" in obj:
            q = {}
            for sw, port, prio, nbytes in obj["q"]:
                q[(sw, int(port), int(prio))] = int(nbytes)
            samples.append((t, q))
            if "late_ns" in obj:
                stalls.append((t, int(obj["late_ns"])))
        if "counters" in obj:
            counters.append((t, obj["counters"]))
    return Telemetry(samples, counters, stalls)


def window(tel, t0=None, t1=None):
    """The part of tel between t0 and t1 (ns, inclusive; None: open),
    every kind of record kept (samples, counters and stalls)."""
    return Telemetry(*([x for x in xs if (t0 is None or x[0] >= t0) and
                        (t1 is None or x[0] <= t1)] for xs in tel))


def load(path):
    """Telemetry read from the file at path."""
    with open(path) as f:
        return parse_lines(f)


# ----------------------------------------------------------------- queues

def sample_interval_ns(tel):
    """The sample interval: the shortest gap between consecutive sample
    lines (the daemon samples at sample_us or a little later, never
    earlier).  None with fewer than two samples."""
    ts = [t for t, _ in tel.samples]
    gaps = [b - a for a, b in zip(ts, ts[1:]) if b > a]
    return min(gaps) if gaps else None


def queue_keys(tel):
    """Every (switch, port, prio) that held bytes in some sample, sorted."""
    keys = set()
    for _, q in tel.samples:
        keys.update(q)
    return sorted(keys)


def bottleneck(tel):
    """The (switch, port, prio) with the highest sampled depth (ties: the
    first in sort order); None when no queue ever held bytes."""
    best, best_max = None, 0
    for key in queue_keys(tel):
        m = max(q.get(key, 0) for _, q in tel.samples)
        if m > best_max:
            best, best_max = key, m
    return best


def _weighted(tel, key, interval_ns):
    """[(bytes, weight)]: each sample line weighs 1; the gap after it adds
    round(gap / interval) - 1 samples of 0 bytes."""
    out = []
    s = tel.samples
    for i, (t, q) in enumerate(s):
        out.append((q.get(key, 0), 1))
        if interval_ns and i + 1 < len(s):
            missing = int(round((s[i + 1][0] - t) / interval_ns)) - 1
            if missing > 0:
                out.append((0, missing))
    return out


def _percentile(pairs, p):
    """Nearest-rank percentile (0 < p <= 100) of weighted values."""
    total = sum(w for _, w in pairs)
    if total == 0:
        return 0
    rank = max(1, int(math.ceil(p / 100.0 * total)))
    acc = 0
    for v, w in sorted(pairs):
        acc += w
        if acc >= rank:
            return v
    return sorted(pairs)[-1][0]


def convergence(tel, key, interval_ns, limit, window_ns=100000000,
                settle=5, after_stall_ns=10000000):
    """When one queue settles below limit bytes.  Between its first and
    last sample that hold bytes (a gap in the samples counts as empty
    samples, one per interval), in windows of window_ns: converged at the
    end of the first `settle` consecutive windows whose p99 is below
    limit, if samples follow.  Returns {} if the queue never held bytes,
    else start_ns, t_ns and seconds (t_ns - start_ns; None if it never
    settled), and once settled: the depth's p50, p99 and max after t_ns,
    how many of the later windows had a p99 at or above limit
    (windows_over of windows), the switch's stalls after t_ns (tel.stalls:
    stalls, stalled_ns), and how many samples were at or above limit
    (over) and how many of those came within after_stall_ns of a stall
    (over_after_stall)."""
    s = tel.samples
    pts = []
    for i, (t, q) in enumerate(s):
        pts.append((t, q.get(key, 0)))
        if interval_ns and i + 1 < len(s):
            missing = int(round((s[i + 1][0] - t) / interval_ns)) - 1
            pts.extend((t + k * interval_ns, 0)
                       for k in range(1, missing + 1))
    busy = [t for t, v in pts if v]
    if not busy:
        return {}
    start, end = busy[0], busy[-1]
    pts = [p for p in pts if start <= p[0] <= end]
    wins = {}
    for t, v in pts:
        wins.setdefault((t - start) // window_ns, []).append((v, 1))
    out = {"start_ns": start, "t_ns": None, "seconds": None}
    last = (end - start) // window_ns
    run, conv = 0, None
    for k in range(last + 1):
        ok = k in wins and _percentile(wins[k], 99) < limit
        run = run + 1 if ok else 0
        if run == settle:
            conv = start + (k + 1) * window_ns
            break
    after = [(v, 1) for t, v in pts if conv is not None and t >= conv]
    if not after:
        return out
    later = [k for k in wins if start + k * window_ns >= conv]
    stalls = [(t, late) for t, late in tel.stalls if conv <= t <= end]
    over = [t for t, v in pts if t >= conv and v >= limit]
    out.update({
        "t_ns": conv, "seconds": (conv - start) / 1e9,
        "p50": _percentile(after, 50), "p99": _percentile(after, 99),
        "max": max(v for v, _ in after),
        "windows": len(later),
        "windows_over": sum(1 for k in later
                            if _percentile(wins[k], 99) >= limit),
        "stalls": len(stalls),
        "stalled_ns": sum(late for _, late in stalls),
        "over": len(over),
        "over_after_stall": sum(1 for t in over if any(
            0 <= t - st <= after_stall_ns for st, _ in stalls))})
    return out


def queue_stats(tel, key=None, interval_ns=None):
    """Depth statistics of one queue over time.

    key: (switch, port, prio), default the bottleneck.  interval_ns:
    default sample_interval_ns(tel) (give the topology's sample_us * 1000
    when known).  Returns a dict: key, interval_ns, samples (time samples
    counted, gaps filled with zeros), p50, p99, max, mean (bytes),
    nonzero (fraction of samples with bytes queued), t0_ns, t1_ns."""
    if key is None:
        key = bottleneck(tel)
    if interval_ns is None:
        interval_ns = sample_interval_ns(tel)
    pairs = _weighted(tel, key, interval_ns) if key else []
    n = sum(w for _, w in pairs)
    ts = [t for t, _ in tel.samples]
    return {
        "key": key,
        "interval_ns": interval_ns,
        "samples": n,
        "p50": _percentile(pairs, 50),
        "p99": _percentile(pairs, 99),
        "max": max((v for v, _ in pairs), default=0),
        "mean": (sum(v * w for v, w in pairs) / n) if n else 0.0,
        "nonzero": (sum(w for v, w in pairs if v) / n) if n else 0.0,
        "t0_ns": ts[0] if ts else None,
        "t1_ns": ts[-1] if ts else None,
    }


def queue_series(tel, key=None, interval_ns=None):
    """[(t_ns, bytes)] of one queue for plotting: every sample line, plus
    0-byte points at both ends of a gap that stands for empty samples."""
    if key is None:
        key = bottleneck(tel)
    if interval_ns is None:
        interval_ns = sample_interval_ns(tel)
    out = []
    s = tel.samples
    for i, (t, q) in enumerate(s):
        out.append((t, q.get(key, 0)))
        if interval_ns and i + 1 < len(s):
            nxt = s[i + 1][0]
            if int(round((nxt - t) / interval_ns)) > 1:
                out.append((t + interval_ns, 0))
                out.append((nxt - interval_ns, 0))
    return out


def parse_port(spec, tel=None):
    """"SW:PORT[:PRIO]" -> (switch, port, prio or None).  PORT is the
    port number or its peer's name (resolved from the counters)."""
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise ValueError("port: want SW:PORT[:PRIO], got %r" % spec)
    sw, port = parts[0], parts[1]
    prio = int(parts[2]) if len(parts) == 3 else None
    if not port.isdigit():
        found = None
        for _, c in (tel.counters if tel else []):
            for s in c.get("switches", []):
                for p in s.get("ports", []):
                    if s.get("name") == sw and p.get("peer") == port:
                        found = int(p["port"])
        if found is None:
            raise ValueError("port: no port of %s towards %r" % (sw, port))
        port = found
    return (sw, int(port), prio)


def resolve_key(tel, sw, port, prio=None):
    """(sw, port, prio); prio None: the priority of that port with the
    highest sampled depth (0 when it never held bytes)."""
    if prio is not None:
        return (sw, port, prio)
    best, best_max = 0, -1
    for k in queue_keys(tel):
        if k[0] == sw and k[1] == port:
            m = max(q.get(k, 0) for _, q in tel.samples)
            if m > best_max:
                best, best_max = k[2], m
    return (sw, port, best)


# --------------------------------------------------------------- counters

def _ports(counters):
    """{(switch, port): (peer, is_host, port object)}."""
    out = {}
    for s in counters.get("switches", []):
        for p in s.get("ports", []):
            out[(s["name"], int(p["port"]))] = (p.get("peer"), "up" in p, p)
    return out


def host_ports(counters):
    """[(switch, port, host)] of the ports facing a host (they carry an
    "up" field), in counter order."""
    return [(k[0], k[1], v[0]) for k, v in _ports(counters).items() if v[1]]


def port_totals(port_obj):
    """Sums over the priorities of one port object: every PORT_FIELDS
    counter, "drops" {cause: n} and "drops_total"."""
    out = dict.fromkeys(PORT_FIELDS, 0)
    drops = {}
    for pr in port_obj.get("prio", []):
        for f in PORT_FIELDS:
            out[f] += int(pr.get(f, 0))
        for cause, n in pr.get("drops", {}).items():
            drops[cause] = drops.get(cause, 0) + int(n)
    out["drops"] = drops
    out["drops_total"] = sum(drops.values())
    return out


def port_deltas(before, after):
    """Per-port counter changes from snapshot before to after (counters
    objects).  Returns a list, in port order, of dicts: switch, port,
    peer, host (bool), and the after - before of every PORT_FIELDS
    counter (tx_bytes, tx_packets, ce_marked, pfc_tx, pfc_rx, paused_ns,
    ..), drops {cause: n} (non-zero causes only) and drops_total.
    before may be None (everything counted from zero)."""
    a, b = _ports(after), _ports(before or {})
    out = []
    for key, (peer, is_host, pobj) in a.items():
        now = port_totals(pobj)
        was = port_totals(b[key][2]) if key in b else port_totals({})
        d = {"switch": key[0], "port": key[1], "peer": peer,
             "host": is_host}
        for f in PORT_FIELDS:
            d[f] = now[f] - was[f]
        drops = {}
        for cause in sorted(set(now["drops"]) | set(was["drops"])):
            n = now["drops"].get(cause, 0) - was["drops"].get(cause, 0)
            if n:
                drops[cause] = n
        d["drops"] = drops
        d["drops_total"] = sum(drops.values())
        out.append(d)
    return out


def _host_rx(counters):
    """{host: rx_bytes at its ingress port}, summed over the ports a host
    may have (a multi-switch topology has one per host)."""
    out = {}
    for (peer, is_host, pobj) in _ports(counters).values():
        if is_host:
            out[peer] = out.get(peer, 0) + port_totals(pobj)["rx_bytes"]
    return out


def flow_throughput(tel):
    """Per-sender (per ingress host port) throughput between consecutive
    counter snapshots.  Returns {"t_ns": [end of each interval],
    "flows": {host: [Gbit/s per interval]}}; every host is listed."""
    t_out, flows = [], {}
    snaps = tel.counters
    for (t0, c0), (t1, c1) in zip(snaps, snaps[1:]):
        if t1 <= t0:
            continue
        r0, r1 = _host_rx(c0), _host_rx(c1)
        t_out.append(t1)
        for host in r1:
            flows.setdefault(host, [0.0] * (len(t_out) - 1))
            flows[host].append((r1[host] - r0.get(host, 0)) * 8.0 /
                               (t1 - t0))
    return {"t_ns": t_out, "flows": flows}


def _snapshot_at(tel, t_ns, after):
    """The first snapshot at or after t_ns (after=True), or the last at or
    before it; None when there is none."""
    pick = None
    for t, c in tel.counters:
        if after and t >= t_ns:
            return (t, c)
        if not after and t <= t_ns:
            pick = (t, c)
    return pick


def _host_admission(counters):
    """{host: (rx_packets, admission drops)} at its ingress ports."""
    out = {}
    for (peer, is_host, pobj) in _ports(counters).values():
        if is_host:
            t = port_totals(pobj)
            n = sum(t["drops"].get(c, 0) for c in ADMISSION_DROPS)
            was = out.get(peer, (0, 0))
            out[peer] = (was[0] + t["rx_packets"], was[1] + n)
    return out


def goodput(tel, start_ns=None, end_ns=None, min_share=0.01):
    """Average rate of each sender over a window: the rx_bytes delta of
    its ingress host port * 8 / window.  The window runs from the first
    snapshot at or after start_ns (default the first) to the last at or
    before end_ns (default the last).  Senders are the hosts that sent at
    least min_share of the busiest one's bytes (a receiver's few ACK or
    ARP bytes would otherwise count as a starved flow).

    rx_bytes counts frames that entered the switch, including those then
    dropped at admission (buffer, headroom, queue_limit, no_route: counted
    in packets only).  "admitted_gbps" scales each sender's bytes by the
    fraction of its packets admitted, an estimate of what went on.

    Returns {"window_ns": (t0, t1), "bytes": {host: n}, "gbps": {host:
    Gbit/s}, "admitted_gbps": {host: Gbit/s}}, senders only; window_ns
    None and empty dicts when fewer than two snapshots fall in it."""
    empty = {"window_ns": None, "bytes": {}, "gbps": {}, "admitted_gbps": {}}
    if not tel.counters:
        return empty
    a = _snapshot_at(tel, tel.counters[0][0] if start_ns is None
                     else start_ns, True)
    b = _snapshot_at(tel, tel.counters[-1][0] if end_ns is None
                     else end_ns, False)
    if not a or not b or b[0] <= a[0]:
        return empty
    r0, r1 = _host_rx(a[1]), _host_rx(b[1])
    sent = {h: r1[h] - r0.get(h, 0) for h in r1}
    top = max(sent.values(), default=0)
    sent = {h: n for h, n in sent.items() if top and n >= min_share * top}
    span = b[0] - a[0]
    d0, d1 = _host_admission(a[1]), _host_admission(b[1])
    admitted = {}
    for h, n in sent.items():
        pkts = d1[h][0] - d0.get(h, (0, 0))[0]
        drops = d1[h][1] - d0.get(h, (0, 0))[1]
        frac = max(0.0, 1.0 - drops / pkts) if pkts > 0 else 1.0
        admitted[h] = n * frac * 8.0 / span
    return {"window_ns": (a[0], b[0]), "bytes": sent,
            "gbps": {h: n * 8.0 / span for h, n in sent.items()},
            "admitted_gbps": admitted}


def jain(values):
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all equal,
    1/n when one takes everything.  1.0 for an empty or all-zero list."""
    values = list(values)
    sq = sum(x * x for x in values)
    if not values or sq == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * sq)


# ------------------------------------------------------------ text plots

def _fmt(v):
    """Short number: 1.5k, 20M, 0.25."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return ("%.3g" % (v / div)) + suffix
    return "%.3g" % v


def text_plot(series, title="", width=PLOT_WIDTH, height=12, ylabel="",
              xlabel="t (s)", fill=None):
    """A plain-text chart of one or more series, `width` columns wide.

    series: {name: [(x, y), ..]} (x in seconds, say).  Each column shows
    the largest y of the points that fall in it; a column with no point
    keeps the previous column's value.  fill (default: when there is one
    series) draws each column from 0 up to its value.  Where series
    overlap the cell shows OVERLAP ("&").  Returns the chart as a string
    (title, rows, x axis, legend)."""
    if fill is None:
        fill = len(series) == 1
    pts = [p for s in series.values() for p in s]
    lines = [title] if title else []
    if not pts:
        return "\n".join(lines + ["(no data)"])
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    ymax = max(max(p[1] for p in pts), 0)
    ymax = ymax if ymax > 0 else 1
    label_w = 8
    cols = max(width - label_w - 2, 10)
    grid = [[" "] * cols for _ in range(height)]
    for si, (name, s) in enumerate(series.items()):
        mark = MARKS[si % len(MARKS)]
        colv = [None] * cols
        for x, y in s:
            c = 0 if x1 == x0 else int((x - x0) / (x1 - x0) * (cols - 1))
            colv[c] = y if colv[c] is None else max(colv[c], y)
        prev = None
        first = min((i for i, v in enumerate(colv) if v is not None),
                    default=cols)
        for c in range(first, cols):
            v = colv[c] if colv[c] is not None else prev
            prev = v
            r = int(round(max(v, 0) / ymax * (height - 1)))
            for rr in range(0 if fill and r else r, r + 1):
                cell = grid[height - 1 - rr]
                cell[c] = mark if cell[c] in (" ", mark) else OVERLAP
    for r in range(height):
        yv = ymax * (height - 1 - r) / (height - 1)
        lab = _fmt(yv) if r % 3 == 0 or r == height - 1 else ""
        lines.append("%*s |%s" % (label_w, lab, "".join(grid[r]).rstrip()))
    lines.append(" " * label_w + " +" + "-" * cols)
    left, right = _fmt(x0), _fmt(x1)
    mid = xlabel.center(cols - len(left) - len(right))
    lines.append(" " * (label_w + 2) + left + mid + right)
    legend = "  ".join("%s %s" % (MARKS[i % len(MARKS)], n)
                       for i, n in enumerate(series))
    if any(OVERLAP in row for row in grid):
        legend += "  %s overlap" % OVERLAP
    lines.append((" " * (label_w + 2) + legend + ("  [%s]" % ylabel
                                                  if ylabel else ""))[:width])
    return "\n".join(lines)


def _queue_name(key):
    return "%s port %d prio %d" % key


def text_queue_plot(tel, key=None, width=PLOT_WIDTH, height=12):
    """text_plot of one queue's depth (bytes) over time, default the
    bottleneck."""
    key = key or bottleneck(tel)
    if key is None:
        return "queue depth: no queue held bytes"
    t0 = tel.samples[0][0] if tel.samples else 0
    s = [((t - t0) / 1e9, b) for t, b in queue_series(tel, key)]
    return text_plot({_queue_name(key): s},
                     title="queue depth (bytes), " + _queue_name(key),
                     width=width, height=height, ylabel="bytes")


def _flow_points(tel, senders_only=True):
    """{host: [(s, Gbit/s)]} as steps: each counter interval's rate from
    its start to its end, in seconds since the first snapshot."""
    ft = flow_throughput(tel)
    t0 = tel.counters[0][0] if tel.counters else 0
    starts = [t for t, _ in tel.counters]
    flows = ft["flows"]
    if senders_only:
        keep = set(goodput(tel)["gbps"])
        flows = {h: v for h, v in flows.items() if h in keep}
    out = {}
    for h, v in flows.items():
        pts = []
        for t1, g in zip(ft["t_ns"], v):
            start = max(t for t in starts if t < t1)
            pts += [((start - t0) / 1e9, g), ((t1 - t0) / 1e9, g)]
        out[h] = pts
    return out


def text_throughput_plot(tel, width=PLOT_WIDTH, height=12):
    """text_plot of each sender's throughput (Gbit/s) per counter
    interval."""
    pts = _flow_points(tel)
    if not pts:
        return "throughput: fewer than two counter snapshots or no sender"
    return text_plot(pts, title="throughput per sender (Gbit/s)",
                     width=width, height=height, ylabel="Gbit/s")


# ------------------------------------------------------------------- SVG

def _ticks(lo, hi, n=5):
    """About n round tick values covering [lo, hi]."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    out = []
    v = first
    while v <= hi + step * 1e-9:
        out.append(round(v, 12))
        v += step
    return out


def svg_chart(series, title="", xlabel="", ylabel="", width=720,
              height=360):
    """A hand-written SVG line chart: axes with ticks, axis labels, a
    title, one polyline per series and a legend.  series: {name: [(x, y),
    ..]}.  Returns the SVG document as a string."""
    ml, mr, mt, mb = 70, 20, 36, 50
    pw, ph = width - ml - mr, height - mt - mb
    pts = [p for s in series.values() for p in s]
    x0 = min((p[0] for p in pts), default=0)
    x1 = max((p[0] for p in pts), default=1)
    y1 = max((p[1] for p in pts), default=1)
    x1 = x1 if x1 > x0 else x0 + 1
    xt, yt = _ticks(x0, x1), _ticks(0, y1 if y1 > 0 else 1)
    if yt[-1] < y1:                     # the top of the chart is a tick
        yt.append(round(2 * yt[-1] - yt[-2], 12))
    y1 = yt[-1]

    def sx(x):
        return ml + (x - x0) / (x1 - x0) * pw

    def sy(y):
        return mt + ph - y / y1 * ph

    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
           'viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">'
           % (width, height, width, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="%d" y="22" text-anchor="middle" font-size="15">%s'
           '</text>' % (width // 2, escape(title))]
    for v in yt:
        y = sy(v)
        out.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" '
                   'stroke="#ddd"/>' % (ml, y, ml + pw, y))
        out.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>'
                   % (ml - 6, y + 4, escape(_fmt(v))))
    for v in xt:
        if v < x0 or v > x1:
            continue
        x = sx(v)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" '
                   'stroke="black"/>' % (x, mt + ph, x, mt + ph + 5))
        out.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>'
                   % (x, mt + ph + 18, escape(_fmt(v))))
    out.append('<polyline points="%d,%d %d,%d %d,%d" fill="none" '
               'stroke="black"/>' % (ml, mt, ml, mt + ph, ml + pw, mt + ph))
    out.append('<text x="%d" y="%d" text-anchor="middle">%s</text>'
               % (ml + pw // 2, height - 10, escape(xlabel)))
    out.append('<text x="16" y="%d" text-anchor="middle" '
               'transform="rotate(-90 16 %d)">%s</text>'
               % (mt + ph // 2, mt + ph // 2, escape(ylabel)))
    for i, (name, s) in enumerate(series.items()):
        col = COLOURS[i % len(COLOURS)]
        p = " ".join("%.1f,%.1f" % (sx(x), sy(y)) for x, y in s)
        out.append('<polyline class="series" points="%s" fill="none" '
                   'stroke="%s" stroke-width="1.5"><title>%s</title>'
                   '</polyline>' % (p, col, escape(name)))
        ly = mt + 8 + 16 * i
        out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" '
                   'stroke-width="3"/>' % (ml + pw - 150, ly,
                                           ml + pw - 130, ly, col))
        out.append('<text x="%d" y="%d">%s</text>'
                   % (ml + pw - 125, ly + 4, escape(name)))
    if not pts:
        out.append('<text x="%d" y="%d" text-anchor="middle">no data'
                   '</text>' % (ml + pw // 2, mt + ph // 2))
    out.append("</svg>")
    return "\n".join(out) + "\n"


def svg_queue(tel, key=None):
    """svg_chart of one queue's depth (KiB) over time, default the
    bottleneck."""
    key = key or bottleneck(tel)
    t0 = tel.samples[0][0] if tel.samples else 0
    s = [((t - t0) / 1e9, b / 1024.0) for t, b in queue_series(tel, key)] \
        if key else []
    name = _queue_name(key) if key else "no queue held bytes"
    return svg_chart({name: s}, title="Queue depth, " + name,
                     xlabel="time (s)", ylabel="depth (KiB)")


def svg_throughput(tel):
    """svg_chart of each sender's throughput (Gbit/s) per counter
    interval."""
    return svg_chart(_flow_points(tel), title="Throughput per sender",
                     xlabel="time (s)", ylabel="Gbit/s")


def svg_report(tel, key=None):
    """One SVG holding both charts, queue depth above throughput."""
    parts = []
    for i, doc in enumerate((svg_queue(tel, key), svg_throughput(tel))):
        body = doc.split("\n", 1)[1]           # drop the XML declaration
        parts.append('<g transform="translate(0 %d)">%s</g>'
                     % (360 * i, body))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<svg xmlns="http://www.w3.org/2000/svg" width="720" '
            'height="720" viewBox="0 0 720 720">\n%s</svg>\n'
            % "\n".join(parts))


# -------------------------------------------------------------- summary

BENCH_COLUMNS = ("run", "queue", "p50 KiB", "p99 KiB", "max KiB", "drops",
                 "ce_marked", "pfc_tx", "paused ms", "goodput Gbit/s",
                 "jain")


def summary(tel, key=None, interval_ns=None, label=""):
    """Everything the bench table shows, as one dict: run (label), queue
    (queue_stats of key or the bottleneck), deltas (port_deltas first ->
    last snapshot), drops, ce_marked, pfc_tx, paused_ns (totals over all
    ports), goodput (goodput() over the whole run) and jain (over the
    senders' admitted_gbps, which is gbps when nothing was dropped at
    admission) and jain_offered (over gbps)."""
    q = queue_stats(tel, key, interval_ns)
    if tel.counters:
        first = tel.counters[0][1] if len(tel.counters) > 1 else None
        deltas = port_deltas(first, tel.counters[-1][1])
    else:
        deltas = []
    g = goodput(tel)
    return {
        "run": label,
        "queue": q,
        "deltas": deltas,
        "drops": sum(d["drops_total"] for d in deltas),
        "ce_marked": sum(d["ce_marked"] for d in deltas),
        "pfc_tx": sum(d["pfc_tx"] for d in deltas),
        "paused_ns": sum(d["paused_ns"] for d in deltas),
        "goodput": g,
        "jain": jain(g["admitted_gbps"].values()),
        "jain_offered": jain(g["gbps"].values()),
    }


def summary_row(s):
    """The BENCH_COLUMNS cells (strings) of one summary(); the goodput
    cell lists each sender's admitted_gbps."""
    q = s["queue"]
    gp = s["goodput"]["admitted_gbps"]
    return [s["run"] or "-",
            "%s:%d:%d" % q["key"] if q["key"] else "-",
            "%.1f" % (q["p50"] / 1024.0), "%.1f" % (q["p99"] / 1024.0),
            "%.1f" % (q["max"] / 1024.0), str(s["drops"]),
            str(s["ce_marked"]), str(s["pfc_tx"]),
            "%.2f" % (s["paused_ns"] / 1e6),
            " ".join("%s=%.3f" % (h, gp[h]) for h in sorted(gp)) or "-",
            "%.3f" % s["jain"]]


def markdown_table(rows, columns=BENCH_COLUMNS, header=True):
    """Markdown table lines (a list of str, no trailing newlines): the
    header and separator when header is true, then one line per row.
    rows: lists of cells, or summary() dicts (rendered with
    summary_row).  A "|" in a cell is escaped."""
    out = []
    if header:
        out.append(_md_line(columns))
        out.append("|" + "|".join("---" for _ in columns) + "|")
    for r in rows:
        out.append(_md_line(summary_row(r) if isinstance(r, dict) else r))
    return out


def _md_line(cells):
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in cells) + " |"


def text_report(tel, key=None, interval_ns=None, width=PLOT_WIDTH):
    """The CLI's report: queue statistics, per-port deltas, goodput and
    fairness, and both text plots."""
    s = summary(tel, key, interval_ns)
    q = s["queue"]
    out = []
    if q["key"]:
        out += textwrap.wrap("queue %s: p50 %d  p99 %d  max %d bytes"
                             % (_queue_name(q["key"]), q["p50"], q["p99"],
                                q["max"]), width, subsequent_indent="  ")
        out.append("  mean %.0f bytes; %d samples of %.3f ms, %.1f%% "
                   "non-empty" % (q["mean"], q["samples"],
                                  (q["interval_ns"] or 0) / 1e6,
                                  100 * q["nonzero"]))
    else:
        out.append("queues: none held bytes (%d samples)" % len(tel.samples))
    if s["deltas"]:
        out.append("")
        out.append("%-8s %-6s %11s %8s %6s %6s %5s %5s %8s"
                   % ("port", "peer", "tx_bytes", "tx_pkts", "drops",
                      "ce", "pfctx", "pfcrx", "pause_ms"))
        for d in s["deltas"]:
            out.append("%-8s %-6s %11d %8d %6d %6d %5d %5d %8.2f"
                       % ("%s:%d" % (d["switch"], d["port"]),
                          str(d["peer"])[:6], d["tx_bytes"],
                          d["tx_packets"], d["drops_total"], d["ce_marked"],
                          d["pfc_tx"], d["pfc_rx"], d["paused_ns"] / 1e6))
            if d["drops"]:
                out += textwrap.wrap("drops by cause: " + ", ".join(
                    "%s %d" % kv for kv in sorted(d["drops"].items())),
                    width, initial_indent="  ", subsequent_indent="    ")
    gp = s["goodput"]
    if gp["gbps"]:
        w = gp["window_ns"]
        out.append("")
        out += textwrap.wrap(
            "goodput over %.3f s: %s" % ((w[1] - w[0]) / 1e9, ", ".join(
                "%s %.3f Gbit/s" % (h, gp["gbps"][h])
                for h in sorted(gp["gbps"]))), width, subsequent_indent="  ")
        adm = gp["admitted_gbps"]
        if any(abs(adm[h] - gp["gbps"][h]) > 1e-9 for h in adm):
            out += textwrap.wrap(
                "admitted (less admission drops): " + ", ".join(
                    "%s %.3f" % (h, adm[h]) for h in sorted(adm)) +
                " Gbit/s", width, subsequent_indent="  ")
        out.append("Jain's fairness index %.3f over %d senders (admitted)"
                   % (s["jain"], len(gp["gbps"])))
    out.append("")
    out.append(text_queue_plot(tel, q["key"], width=width))
    out.append("")
    out.append(text_throughput_plot(tel, width=width))
    return "\n".join(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("telemetry")
    ap.add_argument("--port", help="SW:PORT[:PRIO] (PORT: number or peer "
                    "name); default the bottleneck queue")
    ap.add_argument("--svg", help="write both charts to this SVG file")
    ap.add_argument("--sample-us", type=int,
                    help="the topology's sample_us (default: inferred)")
    ap.add_argument("--markdown", action="store_true",
                    help="also print the bench table row")
    a = ap.parse_args(argv)
    tel = load(a.telemetry)
    key = None
    if a.port:
        try:
            key = resolve_key(tel, *parse_port(a.port, tel))
        except ValueError as e:
            ap.error(str(e))
    interval = a.sample_us * 1000 if a.sample_us else None
    print(text_report(tel, key, interval))
    if a.markdown:
        print()
        print("\n".join(markdown_table([summary(tel, key, interval,
                                                a.telemetry)])))
    if a.svg:
        with open(a.svg, "w") as f:
            f.write(svg_report(tel, key))
    return 0


if __name__ == "__main__":
    sys.exit(main())

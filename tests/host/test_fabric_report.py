#!/usr/bin/python3
"""scripts/fabric_report.py on synthetic telemetry, and on one short real
run of vrnic-fabric (fabric/topologies/incast.json) when it is built."""

import contextlib
import io
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import xml.etree.ElementTree as ET

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(TOP, "scripts"))
import fabric_report as fr  # noqa: E402

MS = 1000000
SVG = "{http://www.w3.org/2000/svg}"


def qline(t, *queues):
    return json.dumps({"t_ns": t, "q": [list(q) for q in queues]})


def prio(n, **kw):
    d = {"prio": n, "rx_packets": 0, "rx_bytes": 0, "tx_packets": 0,
         "tx_bytes": 0, "drops": {}, "ce_marked": 0, "pfc_tx": 0,
         "pfc_rx": 0, "pfc_watchdog": 0, "paused_ns": 0, "xoff": False,
         "depth": 0, "depth_max": 0, "duplicated": 0, "corrupted": 0,
         "reordered": 0}
    d.update(kw)
    return d


def counters(t, ports, link_port=False):
    """ports: {peer: {prio: {field: value}}}; host ports carry "up"."""
    plist = []
    for i, (peer, prios) in enumerate(ports.items()):
        p = {"port": i, "peer": peer,
             "prio": [prio(n, **prios.get(n, {})) for n in range(8)]}
        if not (link_port and peer.startswith("spine")):
            p["up"] = True
        plist.append(p)
    return {"t_ns": t, "switches": [{"name": "sw0", "buffer_used": 0,
                                     "shared_used": 0, "ports": plist}],
            "injections": []}


def cline(t, ports, **kw):
    return json.dumps({"t_ns": t, "counters": counters(t, ports, **kw)})


def incast_counters(t, s1, s2, r_rx=64):
    return cline(t, {"s1": {0: {"rx_bytes": s1}},
                     "s2": {0: {"rx_bytes": s2}},
                     "r": {0: {"rx_bytes": r_rx}}})


class Queues(unittest.TestCase):
    def tel(self):
        # 1 ms samples; at 3..9 ms nothing was written (queues empty):
        # 6 implied empty samples (4..9 ms) before the line at 10 ms.
        return fr.parse_lines([
            qline(0),
            qline(1 * MS, ["sw0", 2, 0, 1000], ["sw0", 1, 3, 50]),
            qline(2 * MS, ["sw0", 2, 0, 3000]),
            qline(3 * MS, ["sw0", 2, 0, 2000]),
            "",
            qline(10 * MS, ["sw0", 2, 0, 500], ["sw0", 1, 3, 9000]),
            qline(11 * MS),
            '{"t_ns": 12000000, "q": [["sw0", 2',       # torn last line
        ])

    def test_parse_skips_blank_and_torn(self):
        tel = self.tel()
        self.assertEqual(len(tel.samples), 6)
        self.assertEqual(tel.counters, [])
        self.assertEqual(tel.samples[1][1], {("sw0", 2, 0): 1000,
                                             ("sw0", 1, 3): 50})

    def test_interval_from_consecutive_timestamps(self):
        self.assertEqual(fr.sample_interval_ns(self.tel()), MS)
        jitter = fr.parse_lines([qline(0), qline(1020000), qline(2100000),
                                 qline(9000000)])
        self.assertEqual(fr.sample_interval_ns(jitter), 1020000)
        self.assertIsNone(fr.sample_interval_ns(fr.parse_lines([qline(5)])))

    def test_bottleneck_is_highest_max(self):
        tel = self.tel()
        self.assertEqual(fr.queue_keys(tel), [("sw0", 1, 3), ("sw0", 2, 0)])
        self.assertEqual(fr.bottleneck(tel), ("sw0", 1, 3))
        self.assertIsNone(fr.bottleneck(fr.parse_lines([qline(0)])))

    def test_stats_fill_absent_and_gaps_with_zero(self):
        st = fr.queue_stats(self.tel(), ("sw0", 2, 0))
        # Time samples 0..11 ms: 12 of them; non-zero at 1, 2, 3, 10.
        self.assertEqual(st["samples"], 12)
        self.assertEqual(st["max"], 3000)
        self.assertEqual(st["p50"], 0)
        self.assertEqual(st["p99"], 3000)
        self.assertAlmostEqual(st["mean"], 6500 / 12.0)
        self.assertAlmostEqual(st["nonzero"], 4 / 12.0)
        self.assertEqual(st["interval_ns"], MS)
        # Without gap filling (a coarser given interval), 6 samples.
        st = fr.queue_stats(self.tel(), ("sw0", 2, 0), interval_ns=10 * MS)
        self.assertEqual(st["samples"], 6)
        self.assertEqual(st["p50"], 500)

    def test_stats_default_is_bottleneck(self):
        st = fr.queue_stats(self.tel())
        self.assertEqual(st["key"], ("sw0", 1, 3))
        self.assertEqual((st["max"], st["p99"], st["p50"]), (9000, 9000, 0))

    def test_percentiles_of_a_busy_queue(self):
        lines = [qline(i * MS, ["sw0", 0, 0, i + 1]) for i in range(100)]
        st = fr.queue_stats(fr.parse_lines(lines))
        self.assertEqual((st["p50"], st["p99"], st["max"]), (50, 99, 100))
        self.assertEqual(st["nonzero"], 1.0)

    def test_series_marks_gaps_with_zeros(self):
        s = fr.queue_series(self.tel(), ("sw0", 2, 0))
        self.assertIn((4 * MS, 0), s)
        self.assertIn((9 * MS, 0), s)
        self.assertEqual(s[0], (0, 0))
        self.assertEqual([t for t, _ in s], sorted(t for t, _ in s))

    def test_convergence(self):
        # 1 ms samples: 300 ms above the limit, then 20 KB with a 1 ms
        # spike every 500 ms, then idle (not counted).
        k = ("sw0", 2, 3)
        lines = [qline(i * MS, ["sw0", 2, 3, 200000 if i < 300 else
                                300000 if i % 500 == 0 else 20000])
                 for i in range(1, 3001)] + [qline(3100 * MS)]
        c = fr.convergence(fr.parse_lines(lines), k, MS, 131072)
        self.assertEqual(c["start_ns"], MS)
        # Five windows of 100 ms below the limit after the first three.
        self.assertAlmostEqual(c["seconds"], 0.8)
        self.assertEqual((c["p50"], c["p99"], c["max"]),
                         (20000, 20000, 300000))
        self.assertEqual((c["windows_over"], c["windows"]), (0, 22))
        self.assertEqual((c["stalls"], c["over"], c["over_after_stall"]),
                         (0, 5, 0))
        # The switch ran 4 ms late just before two of the five spikes.
        stalled = list(lines)
        for t in (1000, 2000):
            stalled[t - 1] = json.dumps({"t_ns": t * MS, "late_ns": 4 * MS,
                                         "q": [["sw0", 2, 3, 300000]]})
        c = fr.convergence(fr.parse_lines(stalled), k, MS, 131072)
        self.assertEqual((c["stalls"], c["stalled_ns"]), (2, 8 * MS))
        self.assertEqual((c["over"], c["over_after_stall"]), (5, 2))
        # Windows of 1 ms see each spike.
        c = fr.convergence(fr.parse_lines(lines), k, MS, 131072, MS)
        self.assertAlmostEqual(c["seconds"], 0.304)
        self.assertEqual(c["windows_over"], 6)
        # Never below the limit; never busy.
        self.assertIsNone(fr.convergence(fr.parse_lines(lines), k, MS,
                                         1000)["t_ns"])
        self.assertEqual(fr.convergence(fr.parse_lines(lines), ("x", 0, 0),
                                        MS, 1000), {})

    def test_window_keeps_every_kind(self):
        # The bench once cut a run's window out of samples and counters
        # only, and convergence() then saw no stall in it.
        tel = fr.parse_lines([
            qline(1 * MS, ["sw0", 2, 3, 10]),
            json.dumps({"t_ns": 2 * MS, "late_ns": 3 * MS, "q": []}),
            json.dumps({"t_ns": 3 * MS, "counters": {"switches": []}}),
            qline(9 * MS)])
        w = fr.window(tel, 2 * MS, 3 * MS)
        self.assertEqual([t for t, _ in w.samples], [2 * MS])
        self.assertEqual(w.stalls, [(2 * MS, 3 * MS)])
        self.assertEqual([t for t, _ in w.counters], [3 * MS])
        self.assertEqual(len(fr.window(tel, 2 * MS).samples), 2)
        self.assertEqual(fr.window(tel), tel)

    def test_convergence_needs_what_follows(self):
        k = ("sw0", 2, 3)
        # Below the limit only in the last, partial window: not settled
        # (nothing after it to judge).
        lines = [qline(i * MS, ["sw0", 2, 3, 200000 if i < 200 else 1000])
                 for i in range(1, 251)]
        self.assertIsNone(fr.convergence(fr.parse_lines(lines), k, MS,
                                         131072)["t_ns"])
        # One quiet window, then above again: not settled either.
        lines = [qline(i * MS, ["sw0", 2, 3, 1000 if i < 100 else 200000])
                 for i in range(1, 2001)]
        self.assertIsNone(fr.convergence(fr.parse_lines(lines), k, MS,
                                         131072)["t_ns"])
        # An idle second in the middle counts as empty samples spread over
        # its windows, not as one window.
        lines = [qline(i * MS, ["sw0", 2, 3, 1000]) for i in range(1, 600)]
        lines += [qline(i * MS, ["sw0", 2, 3, 1000])
                  for i in range(1600, 2200)]
        c = fr.convergence(fr.parse_lines(lines), k, MS, 131072)
        self.assertAlmostEqual(c["seconds"], 0.5)
        self.assertEqual(c["windows"], 17)

    def test_empty_file(self):
        tel = fr.parse_lines([])
        st = fr.queue_stats(tel)
        self.assertEqual((st["key"], st["samples"], st["max"]), (None, 0, 0))
        self.assertIn("no queue", fr.text_queue_plot(tel))
        ET.fromstring(fr.svg_queue(tel))
        ET.fromstring(fr.svg_throughput(tel))
        fr.markdown_table([fr.summary(tel)])

    def test_parse_port(self):
        tel = fr.parse_lines([incast_counters(0, 0, 0),
                              qline(0, ["sw0", 2, 3, 10], ["sw0", 2, 0, 5])])
        self.assertEqual(fr.parse_port("sw0:2"), ("sw0", 2, None))
        self.assertEqual(fr.parse_port("sw0:2:3"), ("sw0", 2, 3))
        self.assertEqual(fr.parse_port("sw0:r", tel), ("sw0", 2, None))
        self.assertEqual(fr.resolve_key(tel, "sw0", 2), ("sw0", 2, 3))
        self.assertEqual(fr.resolve_key(tel, "sw0", 0), ("sw0", 0, 0))
        with self.assertRaises(ValueError):
            fr.parse_port("sw0:nobody", tel)
        with self.assertRaises(ValueError):
            fr.parse_port("sw0")


class Counters(unittest.TestCase):
    def test_port_deltas(self):
        a = counters(0, {"a": {0: {"tx_bytes": 100, "tx_packets": 1,
                                   "drops": {"loss": 2}}},
                         "spine0": {3: {"pfc_rx": 1, "paused_ns": 10}}},
                     link_port=True)
        b = counters(MS, {"a": {0: {"tx_bytes": 1100, "tx_packets": 5,
                                    "drops": {"loss": 2, "buffer": 3},
                                    "ce_marked": 4},
                                3: {"tx_bytes": 50, "tx_packets": 1,
                                    "drops": {"buffer": 1},
                                    "pfc_tx": 2}},
                          "spine0": {3: {"pfc_rx": 4, "paused_ns": 510}}},
                     link_port=True)
        d = fr.port_deltas(a, b)
        self.assertEqual([(x["switch"], x["port"], x["peer"], x["host"])
                          for x in d],
                         [("sw0", 0, "a", True), ("sw0", 1, "spine0", False)])
        self.assertEqual(d[0]["tx_bytes"], 1050)
        self.assertEqual(d[0]["tx_packets"], 5)
        self.assertEqual(d[0]["drops"], {"buffer": 4})      # loss unchanged
        self.assertEqual(d[0]["drops_total"], 4)
        self.assertEqual((d[0]["ce_marked"], d[0]["pfc_tx"]), (4, 2))
        self.assertEqual((d[1]["pfc_rx"], d[1]["paused_ns"]), (3, 500))
        whole = fr.port_deltas(None, b)
        self.assertEqual(whole[0]["drops"], {"loss": 2, "buffer": 4})
        self.assertEqual(fr.host_ports(b), [("sw0", 0, "a")])

    def tel(self):
        return fr.parse_lines([
            incast_counters(0, 0, 0),
            incast_counters(1000 * MS, 125000000, 62500000),    # 1, 0.5
            incast_counters(2000 * MS, 250000000, 187500000),   # 1, 1
            incast_counters(2500 * MS, 312500000, 250000000),   # 1, 1
        ])

    def test_flow_throughput(self):
        ft = fr.flow_throughput(self.tel())
        self.assertEqual(ft["t_ns"], [1000 * MS, 2000 * MS, 2500 * MS])
        self.assertEqual(sorted(ft["flows"]), ["r", "s1", "s2"])
        for got, want in zip(ft["flows"]["s1"], [1.0, 1.0, 1.0]):
            self.assertAlmostEqual(got, want)
        for got, want in zip(ft["flows"]["s2"], [0.5, 1.0, 1.0]):
            self.assertAlmostEqual(got, want)
        self.assertEqual(ft["flows"]["r"], [0.0, 0.0, 0.0])

    def test_goodput_window_and_senders(self):
        tel = self.tel()
        g = fr.goodput(tel)
        self.assertEqual(sorted(g["gbps"]), ["s1", "s2"])     # r: no bytes
        self.assertEqual(g["window_ns"], (0, 2500 * MS))
        self.assertAlmostEqual(g["gbps"]["s1"], 1.0)
        self.assertAlmostEqual(g["gbps"]["s2"], 0.8)
        g = fr.goodput(tel, start_ns=900 * MS, end_ns=2600 * MS)
        self.assertEqual(g["window_ns"], (1000 * MS, 2500 * MS))
        self.assertAlmostEqual(g["gbps"]["s2"], 1.0)
        self.assertEqual(fr.goodput(tel, start_ns=2600 * MS)["gbps"], {})
        # The receiver's few bytes do not make it a sender.
        tel = fr.parse_lines([incast_counters(0, 0, 0, 0),
                              incast_counters(MS * 1000, 10 ** 6, 10 ** 6,
                                              64)])
        self.assertEqual(sorted(fr.goodput(tel)["bytes"]), ["s1", "s2"])

    def test_admitted_goodput(self):
        # s1 sent 1000 frames of 1000 bytes, 250 dropped at admission
        # (headroom, buffer); loss is not an admission drop.
        tel = fr.parse_lines([
            cline(0, {"s1": {}, "r": {}}),
            cline(1000 * MS, {"s1": {3: {"rx_bytes": 10 ** 6,
                                         "rx_packets": 1000,
                                         "drops": {"headroom": 200,
                                                   "buffer": 50,
                                                   "loss": 7}}},
                              "r": {}})])
        g = fr.goodput(tel)
        self.assertAlmostEqual(g["gbps"]["s1"], 0.008)
        self.assertAlmostEqual(g["admitted_gbps"]["s1"], 0.006)
        s = fr.summary(tel)
        self.assertEqual(s["drops"], 257)
        self.assertIn("s1=0.006", fr.summary_row(s))
        self.assertIn("admitted (less admission drops): s1 0.006",
                      fr.text_report(tel))

    def test_jain(self):
        self.assertAlmostEqual(fr.jain([3, 3, 3]), 1.0)
        self.assertAlmostEqual(fr.jain([5, 0, 0, 0]), 0.25)
        self.assertAlmostEqual(fr.jain([1, 2]), 0.9)
        self.assertEqual(fr.jain([]), 1.0)
        self.assertEqual(fr.jain([0, 0]), 1.0)


class Render(unittest.TestCase):
    def tel(self):
        lines = [incast_counters(0, 0, 0)]
        for i in range(300):
            lines.append(qline(i * 10 * MS, ["sw0", 2, 0, (i % 50) * 1000]))
        lines += [incast_counters(1000 * MS, 10 ** 8, 5 * 10 ** 7),
                  incast_counters(2000 * MS, 2 * 10 ** 8, 1.5 * 10 ** 8),
                  incast_counters(3000 * MS, 3 * 10 ** 8, 2.5 * 10 ** 8)]
        return fr.parse_lines(lines)

    def test_text_plots_fit_72_columns(self):
        tel = self.tel()
        for text in (fr.text_queue_plot(tel), fr.text_throughput_plot(tel),
                     fr.text_report(tel)):
            lines = text.splitlines()
            self.assertGreater(len(lines), 10)
            self.assertLessEqual(max(len(x) for x in lines), 72, text)
        q = fr.text_queue_plot(tel)
        self.assertIn("sw0 port 2 prio 0", q)
        self.assertIn("49k", q)                                 # y max
        t = fr.text_throughput_plot(tel)
        self.assertIn("* s1", t)
        self.assertIn("+ s2", t)
        # s2 catches up with s1 at 2 s: the cells they share are marked.
        self.assertIn(fr.OVERLAP, t)

    def test_text_plot_geometry(self):
        text = fr.text_plot({"a": [(0, 0), (1, 10)]}, width=40, height=5,
                            fill=False)
        rows = [r.split("|", 1)[1] for r in text.splitlines() if "|" in r]
        self.assertEqual(len(rows), 5)
        self.assertEqual(rows[0].rstrip()[-1], "*")      # top right: 10
        self.assertEqual(rows[-1][0], "*")               # bottom left: 0
        self.assertTrue(all(len(r) <= 40 - 10 for r in rows))

    def test_svg(self):
        tel = self.tel()
        for doc, names in ((fr.svg_queue(tel), ["sw0 port 2 prio 0"]),
                           (fr.svg_throughput(tel), ["s1", "s2"])):
            root = ET.fromstring(doc)
            self.assertEqual(root.tag, SVG + "svg")
            series = [p for p in root.iter(SVG + "polyline")
                      if p.get("class") == "series"]
            self.assertEqual([p.find(SVG + "title").text for p in series],
                             names)
            texts = [t.text for t in root.iter(SVG + "text")]
            for n in names:
                self.assertIn(n, texts)                      # legend
            for p in series:
                pts = [tuple(map(float, xy.split(",")))
                       for xy in p.get("points").split()]
                self.assertGreater(len(pts), 1)
                for x, y in pts:                     # inside the plot area
                    self.assertTrue(70 <= x <= 700 and 36 <= y <= 310,
                                    (x, y))
        ET.fromstring(fr.svg_report(tel))

    def test_svg_escapes(self):
        doc = fr.svg_chart({"<a&b>": [(0, 1), (2, 3)]}, title="x < y",
                           xlabel="t", ylabel="n")
        root = ET.fromstring(doc)
        self.assertIn("<a&b>", [t.text for t in root.iter(SVG + "text")])

    def test_markdown(self):
        tel = self.tel()
        rows = fr.markdown_table([fr.summary(tel, label="incast|1"),
                                  ["x"] * len(fr.BENCH_COLUMNS)])
        self.assertEqual(len(rows), 4)
        self.assertTrue(rows[0].startswith("| run | queue |"))
        self.assertEqual(rows[1], "|" + "|".join(["---"] * 11) + "|")
        self.assertIn("incast\\|1", rows[2])
        self.assertIn("sw0:2:0", rows[2])
        self.assertIn("s1=0.800 s2=0.667", rows[2])
        self.assertEqual(rows[2].count(" | "), 10)
        self.assertEqual(fr.markdown_table([]), rows[:2])
        self.assertEqual(fr.markdown_table([["a"]], ["x"], header=False),
                         ["| a |"])

    def test_cli(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.jsonl")
            with open(path, "w") as f:
                for line in [qline(0), qline(MS, ["sw0", 2, 0, 700]),
                             incast_counters(0, 0, 0),
                             incast_counters(1000 * MS, 10 ** 6, 10 ** 6)]:
                    f.write(line + "\n")
            out = io.StringIO()
            svg = os.path.join(d, "o.svg")
            with contextlib.redirect_stdout(out):
                rc = fr.main([path, "--port", "sw0:r", "--svg", svg,
                              "--markdown"])
            self.assertEqual(rc, 0)
            self.assertIn("sw0 port 2 prio 0: p50 0  p99 700  max 700 b",
                          out.getvalue())
            self.assertIn("| " + path + " |", out.getvalue())
            ET.parse(svg)
            p = subprocess.run([sys.executable,
                                os.path.join(TOP, "scripts/fabric_report.py"),
                                path], stdout=subprocess.PIPE, text=True,
                               timeout=60)
            self.assertEqual(p.returncode, 0)
            self.assertIn("Jain's fairness index 1.000", p.stdout)


DAEMON = os.path.join(TOP, "build/fabric/vrnic-fabric")


@unittest.skipUnless(os.access(DAEMON, os.X_OK),
                     "vrnic-fabric not built (make fabric)")
class RealRun(unittest.TestCase):
    """Two senders into one receiver whose link is 1 Gbit/s, for about
    1.3 s (two counter snapshots and the one at exit)."""

    def test_incast(self):
        d = tempfile.mkdtemp(prefix="fabric-report-")
        self.addCleanup(shutil.rmtree, d, True)
        tele = os.path.join(d, "t.jsonl")
        p = subprocess.Popen([DAEMON, "--topology",
                              os.path.join(TOP, "fabric/topologies/"
                                           "incast.json"),
                              "--dir", d, "--telemetry", tele],
                             stdout=subprocess.PIPE, text=True)
        socks = []
        try:
            r, _, _ = select.select([p.stdout], [], [], 10)
            self.assertTrue(r and "ready" in p.stdout.readline())
            for name in ("s1", "s2", "r"):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(os.path.join(d, name + ".sock"))
                s.settimeout(5)
                socks.append(s)
            s1, s2, rx = socks

            def frame(src, dst, n):
                f = (bytes([0x52, 0x54, 0, 0, 0, dst]) +
                     bytes([0x52, 0x54, 0, 0, 0, src]) + b"\x88\xb5" +
                     bytes(n - 14))
                return struct.pack(">I", len(f)) + f
            rx.sendall(frame(3, 1, 64))          # the switch learns r
            time.sleep(0.05)
            burst1, burst2 = frame(1, 3, 1500) * 16, frame(2, 3, 1500) * 16
            rx.setblocking(False)
            end = time.monotonic() + 1.3
            while time.monotonic() < end:
                s1.sendall(burst1)
                s2.sendall(burst2)
                with contextlib.suppress(BlockingIOError):
                    while rx.recv(1 << 20):
                        pass
                time.sleep(0.001)
        finally:
            for s in socks:
                s.close()
            p.terminate()
            p.stdout.close()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.assertEqual(p.returncode, 0)

        tel = fr.load(tele)
        self.assertGreaterEqual(len(tel.counters), 3)
        key = fr.bottleneck(tel)
        self.assertEqual(key, ("sw0", 2, 0))              # towards r
        st = fr.queue_stats(tel)
        self.assertGreater(st["max"], 0)
        self.assertLessEqual(st["p50"], st["p99"])
        self.assertLessEqual(st["p99"], st["max"])
        # The queue was sampled at most as deep as it ever was.
        last = tel.counters[-1][1]
        port = [x for x in last["switches"][0]["ports"] if x["peer"] == "r"]
        self.assertLessEqual(st["max"], port[0]["prio"][0]["depth_max"])
        self.assertGreaterEqual(st["interval_ns"], 1000 * 1000)   # sample_us
        self.assertLess(st["interval_ns"], 20 * 1000 * 1000)

        deltas = {x["peer"]: x for x in fr.port_deltas(None, last)}
        g = fr.goodput(tel)
        self.assertEqual(sorted(g["gbps"]), ["s1", "s2"])
        self.assertGreater(min(g["gbps"].values()), 0)
        self.assertGreater(fr.jain(g["gbps"].values()), 0.9)
        for h, v in g["admitted_gbps"].items():
            self.assertLessEqual(v, g["gbps"][h] + 1e-9)
        sent = g["bytes"]["s1"] + g["bytes"]["s2"]
        # What r got is at most what s1 and s2 sent in all (the window
        # starts at the first snapshot, a few ms in).
        self.assertLessEqual(deltas["r"]["tx_bytes"],
                             deltas["s1"]["rx_packets"] * 1500 +
                             deltas["s2"]["rx_packets"] * 1500)
        self.assertGreater(deltas["r"]["tx_bytes"], sent // 2)
        for text in (fr.text_report(tel), fr.text_queue_plot(tel)):
            self.assertLessEqual(max(len(x) for x in text.splitlines()), 72)
        ET.fromstring(fr.svg_report(tel))
        self.assertEqual(len(fr.markdown_table([fr.summary(tel)])), 3)


if __name__ == "__main__":
    unittest.main()

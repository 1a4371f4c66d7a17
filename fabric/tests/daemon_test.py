#!/usr/bin/python3
"""The vrnic-fabric daemon end to end (make check, via ctest).

Starts the real daemon on the shipped pair topology in a temporary
directory and checks, with two clients speaking QEMU's stream netdev
framing on the AF_UNIX host sockets, that:
  - frames pass a -> b and b -> a unchanged (b learned, then unicast);
  - the control socket reports the counters and takes a run-time
    impairment (loss 1 on a's link drops everything, loss 0 restores);
  - hostile input (an oversized length, garbage) is counted and the
    daemon keeps serving; a port that disconnects and reconnects works,
    over TCP too;
  - a client that never reads does not stall the other port;
  - telemetry is written as JSON lines, or as CSV for a *.csv file, and
    says when the switch ran late (stopped by SIGSTOP).
Every wait is bounded; the daemon is stopped by its PID."""

import csv
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

DAEMON, TOPOS = sys.argv[1], sys.argv[2]
DEADLINE = time.monotonic() + 40


def frame(src, dst, n=200, psn=0):
    mac = lambda i: bytes([0x52, 0x54, 0, 0, 0, i])
    body = bytes((psn + k) & 0xff for k in range(n - 14))
    return mac(dst) + mac(src) + b"\x88\xb5" + body    # local experimental


def send(sock, f):
    sock.sendall(struct.pack(">I", len(f)) + f)


def recv_frames(sock, want, timeout=3.0):
    """Read until `want` frames came or timeout; returns the frames."""
    buf, out = b"", []
    end = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < end:
        r, _, _ = select.select([sock], [], [], 0.05)
        if not r:
            continue
        chunk = sock.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 4:
            n = struct.unpack(">I", buf[:4])[0]
            if len(buf) < 4 + n:
                break
            out.append(buf[4:4 + n])
            buf = buf[4 + n:]
    return out


def connect(path):
    for _ in range(100):
        try:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(path)
            return s
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("cannot connect to " + path)


class Control:
    def __init__(self, path):
        self.s = connect(path)
        self.f = self.s.makefile("r")

    def __call__(self, **req):
        self.s.sendall((json.dumps(req) + "\n").encode())
        r, _, _ = select.select([self.s], [], [], 5)
        assert r, "control socket did not answer"
        return json.loads(self.f.readline())


def port(counters, peer):
    for p in counters["switches"][0]["ports"]:
        if p["peer"] == peer:
            return p
    raise KeyError(peer)



def stop(p):
    """SIGTERM the daemon, SIGKILL after 5 s; reaped either way."""
    p.terminate()
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()

def csv_telemetry(d, tfile, check):
    """--telemetry *.csv: the header, queue samples and the counters as rows,
    the last counters agreeing with what was sent."""
    tele = os.path.join(d, "telemetry.csv")
    p = subprocess.Popen([DAEMON, "--topology", tfile, "--dir", d,
                          "--control", os.path.join(d, "control2.sock"),
                          "--telemetry", tele],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    sent = 0
    try:
        r, _, _ = select.select([p.stdout], [], [], 10)
        check(bool(r) and "ready" in p.stdout.readline(), "csv: daemon ready")
        a = connect(os.path.join(d, "a.sock"))
        b = connect(os.path.join(d, "b.sock"))
        send(b, frame(2, 1))
        recv_frames(a, 1)
        for i in range(50):
            send(a, frame(1, 2, 1000, i))
        sent = len(recv_frames(b, 50))
        time.sleep(0.1)
    finally:
        stop(p)
    check(sent == 50, "csv: 50 frames a -> b (%d)" % sent)
    with open(tele) as f:
        rows = list(csv.reader(f))
    check(rows and rows[0] == ["t_ns", "switch", "port", "prio", "metric",
                               "value"], "csv: header")
    body = rows[1:]
    check(body and all(len(r) == 6 and r[0].isdigit() and
                       (r[5].lstrip("-").isdigit() or r[4] == "peer")
                       for r in body),
          "csv: %d rows of six fields, integer values (names for peer)"
          % len(body))
    check(any(r[4] == "peer" and r[5] == "a" for r in body),
          "csv: the ports' peers")
    check(any(r[4] == "sample" for r in body), "csv: queue samples")
    last = max((int(r[0]) for r in body if r[4] == "buffer_used"),
               default=None)
    tx = sum(int(r[5]) for r in body
             if int(r[0]) == last and r[4] == "tx_packets")
    check(tx == 51, "csv: the last counters sum tx_packets to the 51 "
          "frames sent (%d)" % tx)


def main():
    failures, passes = [], []

    def check(cond, what):
        print(("ok   " if cond else "FAIL ") + what, flush=True)
        (passes if cond else failures).append(what)

    with tempfile.TemporaryDirectory(prefix="vrnic-fabric-") as d:
        # Host a also on TCP, on a port that was free a moment ago (the
        # shipped pair's 17001/2 may be taken on a shared machine).
        topo = json.load(open(os.path.join(TOPOS, "pair.json")))
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        tcp_port = probe.getsockname()[1]
        probe.close()
        topo["hosts"][0]["tcp"] = tcp_port
        topo["hosts"][1].pop("tcp", None)
        tfile = os.path.join(d, "pair.json")
        json.dump(topo, open(tfile, "w"))
        tele = os.path.join(d, "telemetry.jsonl")
        p = subprocess.Popen([DAEMON, "--topology", tfile, "--dir", d,
                              "--telemetry", tele],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        try:
            r, _, _ = select.select([p.stdout], [], [], 10)
            check(bool(r) and "ready" in p.stdout.readline(), "daemon ready")
            a = connect(os.path.join(d, "a.sock"))
            b = connect(os.path.join(d, "b.sock"))
            ctl = Control(os.path.join(d, "control.sock"))
            check(ctl(cmd="ping")["ok"], "control ping")
            hosts = ctl(cmd="hosts")["hosts"]
            check([h["up"] for h in hosts] == [True, True], "both ports up")

            send(b, frame(2, 1))
            got = recv_frames(a, 1)
            check(got == [frame(2, 1)], "b -> a (flooded) unchanged")
            frames = [frame(1, 2, 100 + i, i) for i in range(200)]
            for f in frames:
                send(a, f)
            got = recv_frames(b, 200)
            check(got == frames, "a -> b: 200 frames in order, unchanged")

            c = ctl(cmd="counters")
            check(port(c, "b")["prio"][0]["tx_packets"] == 200,
                  "counters: 200 frames out to b")
            check(ctl(cmd="set", link="a", dir="a_to_b",
                      params={"impair": {"loss": 1}})["ok"], "set loss 1")
            for f in frames[:50]:
                send(a, f)
            check(recv_frames(b, 1, timeout=0.5) == [], "loss 1: nothing")
            c = ctl(cmd="counters")
            check(port(c, "a")["prio"][0]["drops"].get("loss") == 50,
                  "counters: 50 loss drops")
            check(ctl(cmd="set", link="a", params={"impair": {"loss": 0}})["ok"],
                  "set loss 0")
            r = ctl(cmd="set", link="a", params={"impair": {"loss": 7}})
            check(not r["ok"] and "loss" in r["error"], "bad set refused")
            check(not ctl(cmd="nonsense")["ok"], "unknown command refused")
            # A control line past 64 KiB: an error, then the door.
            bad = connect(os.path.join(d, "control.sock"))
            bad.sendall(b"x" * 70000)
            r, _, _ = select.select([bad], [], [], 5)
            check(bool(r) and b"line too long" in bad.recv(4096),
                  "overlong control line refused")
            bad.close()
            # At most 32 control connections: the rest are closed at once.
            many = [connect(os.path.join(d, "control.sock")) for _ in range(40)]
            time.sleep(0.2)
            closed = 0
            for s in many:
                r, _, _ = select.select([s], [], [], 0)
                closed += bool(r) and s.recv(1) == b""
            check(closed >= 8, "control connections capped (%d refused)" % closed)
            for s in many:
                s.close()
            time.sleep(0.1)
            check(Control(os.path.join(d, "control.sock"))(cmd="ping")["ok"],
                  "control works after the cap")

            # Hostile bytes: a zero length, an oversized one (skipped in
            # step), then a good frame that must still arrive.
            a.sendall(struct.pack(">I", 0))
            a.sendall(struct.pack(">I", 100000) + b"\0" * 100000)
            send(a, frame(1, 2, 60, 7))
            check(recv_frames(b, 1) == [frame(1, 2, 60, 7)],
                  "in step after bad lengths")
            c = ctl(cmd="counters")
            drops = port(c, "a")["prio"][0]["drops"]
            check(drops.get("oversized") == 1 and drops.get("truncated") == 1,
                  "bad lengths counted")

            # Reconnect: a goes away and comes back, first over TCP (as
            # a VM on another machine would), then on its AF_UNIX socket.
            a.close()
            time.sleep(0.1)
            check(ctl(cmd="hosts")["hosts"][0]["up"] is False, "a down")
            t = socket.create_connection(("127.0.0.1", tcp_port), timeout=5)
            send(t, frame(1, 2, 90, 8))
            check(recv_frames(b, 1) == [frame(1, 2, 90, 8)], "a over TCP -> b")
            send(b, frame(2, 1, 91, 8))
            check(recv_frames(t, 1) == [frame(2, 1, 91, 8)], "b -> a over TCP")
            t.close()
            time.sleep(0.1)
            a = connect(os.path.join(d, "a.sock"))
            send(a, frame(1, 2, 80, 9))
            check(recv_frames(b, 1) == [frame(1, 2, 80, 9)], "a reconnected")

            # A late turn: the daemon is stopped while a sends 50 frames;
            # once it runs again it spreads them over the time it was away
            # (backdate.hpp) and they all reach b, in order, unchanged.
            before = ctl(cmd="counters")
            late = [frame(1, 2, 200, 300 + i) for i in range(50)]
            os.kill(p.pid, signal.SIGSTOP)
            try:
                for f in late:
                    send(a, f)
                time.sleep(0.05)
            finally:
                os.kill(p.pid, signal.SIGCONT)
            check(recv_frames(b, 50) == late,
                  "late turn: 50 frames sent while stopped arrive in order")
            c = ctl(cmd="counters")
            check(c["late_turns"] > before["late_turns"] and
                  c["backdated_frames"] - before["backdated_frames"] >= 50,
                  "late turn counted, its frames back-dated (%d turns, %d "
                  "frames)" % (c["late_turns"] - before["late_turns"],
                               c["backdated_frames"] -
                               before["backdated_frames"]))

            # b stops reading: a keeps sending 20 MB towards b; the daemon
            # must go on answering, the backlog drops are counted.
            big = frame(1, 2, 9000)
            a.setblocking(False)
            sent = 0
            end = time.monotonic() + 5
            while sent < 20 << 20 and time.monotonic() < end:
                try:
                    a.send(struct.pack(">I", len(big)) + big)
                    sent += len(big)
                except BlockingIOError:
                    select.select([], [a], [], 0.05)
            a.setblocking(True)
            t0 = time.monotonic()
            c = ctl(cmd="counters")
            check(time.monotonic() - t0 < 2, "control answers with b stuck")
            check(port(c, "b")["prio"][0]["drops"].get("backlog", 0) > 0,
                  "backlog drops counted at b")
            send(b, frame(2, 1, 70, 3))
            check(frame(2, 1, 70, 3) in recv_frames(a, 1),
                  "b -> a still flows")
            check(p.poll() is None, "daemon alive")
            # Stopped for 50 ms, as a busy host may: the next sample says
            # how late the switch ran.
            os.kill(p.pid, signal.SIGSTOP)
            time.sleep(0.05)
            os.kill(p.pid, signal.SIGCONT)
            time.sleep(0.05)
        finally:
            stop(p)
        check(p.returncode == 0, "clean exit on SIGTERM (rc %s)" % p.returncode)
        check(not os.path.exists(os.path.join(d, "a.sock")), "sockets removed")
        lines = [json.loads(x) for x in open(tele).read().splitlines()]
        check(len(lines) > 0 and all("t_ns" in x for x in lines),
              "telemetry file has JSON lines")
        check(any("counters" in x for x in lines), "telemetry has counters")
        late = [x["late_ns"] for x in lines if "late_ns" in x]
        check(any(v >= 40000000 for v in late),
              "a sample after a 50 ms SIGSTOP has late_ns >= 40 ms (%s)"
              % late)
        csv_telemetry(d, tfile, check)
    print("%d passed, %d failed" % (len(passes), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""vrnic-fabric from the harness (issue 28, Documentation/fabric.rst).

Fabric(topology, dir) starts build/fabric/vrnic-fabric on a topology file
(a name from fabric/topologies or a path) with its host sockets in
DIR/<host>.sock and its control socket in DIR/control.sock, waits for
"vrnic-fabric ready", and stops it with SIGTERM.  Every fabric started
here is killed by PID when the harness exits, and every wait is bounded.

The control socket takes one JSON line and answers one (see
Documentation/fabric.rst): control(), and ping/hosts/counters/sample/
set_link/inject on top of it; port(), drops(), total() and
port_summary() read what counters() returns (scripts/fabric_report.py
analyses and plots the telemetry file).

Command line (a quick look at a running fabric):
  fabric.py DIR counters|hosts|sample|ping
"""

import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(TOP, "build", "fabric", "vrnic-fabric")
TOPOLOGIES = os.path.join(TOP, "fabric", "topologies")

_live = []


def _stop_all():
    for fab in list(_live):
        fab.stop()


atexit.register(_stop_all)


class FabricError(Exception):
    pass


def topology_path(topology):
    """A shipped topology by name (pair, incast, leaf-spine) or a path."""
    if os.sep in topology or topology.endswith(".json"):
        return os.path.abspath(topology)
    return os.path.join(TOPOLOGIES, topology + ".json")


def topology_hosts(topology):
    """The host names of a topology file, in its order."""
    with open(topology_path(topology)) as f:
        return [h["name"] for h in json.load(f)["hosts"]]


def _rate_mbps(params):
    if "rate_mbps" in params:
        return params["rate_mbps"]
    if "rate_gbps" in params:
        return params["rate_gbps"] * 1000
    return None


def tcp_port(topology, host):
    """The TCP port host listens on as well (its "tcp" in the topology
    file, on the fabric's --tcp-bind address, 127.0.0.1 by default), or
    None."""
    with open(topology_path(topology)) as f:
        for h in json.load(f)["hosts"]:
            if h["name"] == host:
                return h.get("tcp")
    return None


def link_mbps(topology, host):
    """The rate (Mb/s) of the switch's port towards host in a topology
    (b_to_a, else the host's link, else the defaults), or None when it
    has none (the fabric then times PFC quanta at 100 Gb/s).  A NIC on
    that port should time the pause quanta it receives at the same
    speed (vrnic's speed-mbps)."""
    with open(topology_path(topology)) as f:
        topo = json.load(f)
    for h in topo["hosts"]:
        if h["name"] == host:
            for params in (h.get("b_to_a", {}), h, topo.get("defaults", {})):
                rate = _rate_mbps(params)
                if rate is not None:
                    return int(rate) or None
    return None


NIC_KNOB = re.compile(r"[a-z0-9_]{1,64}")


def nic_cc_params(topology):
    """[(name, value)] of the topology's "nic": {"cc_params": {..}}: the
    congestion-control knobs that fit this fabric's rates, which the
    harness writes into every vrnic attached to it (vm.apply_nic_params).
    The switch checks the same shape; checked again here because the
    names and values become a path and a word in a guest shell command."""
    with open(topology_path(topology)) as f:
        nic = json.load(f).get("nic", {})
    cc = nic.get("cc_params", {}) if isinstance(nic, dict) else None
    if not isinstance(cc, dict):
        raise FabricError("%s: nic.cc_params must be an object" % topology)
    out = []
    for k, v in cc.items():
        ok = isinstance(k, str) and NIC_KNOB.fullmatch(k) and (
            (isinstance(v, int) and not isinstance(v, bool) and
             0 <= v < 1 << 32) or
            (isinstance(v, str) and NIC_KNOB.fullmatch(v)))
        if not ok:
            raise FabricError("%s: nic.cc_params.%s: bad name or value %r"
                              % (topology, k, v))
        out.append((k, str(v)))
    return out


class Fabric:
    """One vrnic-fabric process.  Its host sockets (DIR/<host>.sock) keep
    their names across restart() with another topology that names the
    same hosts, so VMs attached with reconnect-ms come back by
    themselves."""

    def __init__(self, topology, fdir, telemetry=True):
        self.topology = topology_path(topology)
        self.dir = fdir
        self.control_path = os.path.join(fdir, "control.sock")
        self.telemetry = os.path.join(fdir, "telemetry.jsonl") \
            if telemetry else None
        self.log = os.path.join(fdir, "fabric.log")
        self.proc = None

    def sock(self, host):
        return os.path.join(self.dir, host + ".sock")

    def start(self, timeout=30):
        if not os.path.exists(BINARY):
            raise FabricError("%s is not built (make fabric)" % BINARY)
        os.makedirs(self.dir, exist_ok=True)
        cmd = [BINARY, "--topology", self.topology, "--dir", self.dir]
        # Late wake-ups (Documentation/fabric.rst): the daemon's default
        # unless this says otherwise (0: off).
        backdate = os.environ.get("VRNIC_FABRIC_BACKDATE_US", "")
        if backdate.isdigit():
            cmd += ["--backdate-us", backdate]
        if self.telemetry:
            if os.path.exists(self.telemetry):
                os.unlink(self.telemetry)
            cmd += ["--telemetry", self.telemetry]
        log = open(self.log, "wb")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        with open(os.path.join(self.dir, "fabric.pid"), "w") as f:
            f.write("%d\n" % self.proc.pid)
        _live.append(self)
        deadline = time.time() + timeout
        while True:
            with open(self.log, errors="replace") as f:
                if "vrnic-fabric ready" in f.read():
                    return
            if self.proc.poll() is not None:
                raise FabricError("vrnic-fabric exited (%s) on %s:\n%s" % (
                    self.proc.returncode, self.topology, self.log_tail()))
            if time.time() > deadline:
                self.stop()
                raise FabricError("vrnic-fabric not ready in %d s" % timeout)
            time.sleep(0.05)

    def log_tail(self, lines=20):
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self in _live:
            _live.remove(self)

    def restart(self, topology, timeout=30):
        """Stop, and start again on another topology (same directory)."""
        self.stop()
        self.topology = topology_path(topology)
        self.start(timeout)

    def control(self, request, timeout=10):
        """Send one request (a dict), return the reply (a dict); raises
        FabricError if the fabric does not answer or answers ok: false."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(timeout)
        deadline = time.time() + timeout
        try:
            s.connect(self.control_path)
            s.sendall((json.dumps(request) + "\n").encode())
            buf = b""
            while b"\n" not in buf:
                if time.time() > deadline:
                    raise FabricError("control: no answer to %s" % request)
                chunk = s.recv(1 << 20)
                if not chunk:
                    raise FabricError("control: closed on %s" % request)
                buf += chunk
        except OSError as e:
            raise FabricError("control %s: %s" % (request.get("cmd"), e))
        finally:
            s.close()
        reply = json.loads(buf.split(b"\n", 1)[0])
        if not reply.get("ok"):
            raise FabricError("control %s: %s" % (request,
                                                  reply.get("error")))
        return reply

    def ping(self):
        return self.control({"cmd": "ping"})

    def hosts(self):
        return self.control({"cmd": "hosts"})["hosts"]

    def counters(self):
        return self.control({"cmd": "counters"})

    def sample(self):
        return self.control({"cmd": "sample"})

    def set_link(self, link, params, direction="both"):
        return self.control({"cmd": "set", "link": link, "dir": direction,
                             "params": params})

    def inject(self, action, qpn, psn, nth=1, host=None):
        req = {"cmd": "inject", "action": action, "qpn": qpn, "psn": psn,
               "nth": nth}
        if host:
            req["host"] = host
        return self.control(req)

    def wait_hosts_up(self, names, timeout=30):
        """Until every host in names is connected (bounded)."""
        deadline = time.time() + timeout
        while True:
            down = [h["name"] for h in self.hosts()
                    if h["name"] in names and not h["up"]]
            if not down:
                return
            if time.time() > deadline:
                raise FabricError("hosts not connected after %d s: %s"
                                  % (timeout, " ".join(down)))
            time.sleep(0.1)


# Reading counters() replies.

def port(counters, peer, switch=None):
    """The counters of the switch port whose peer is `peer` (a host or a
    switch name): a list of eight per-priority dicts."""
    for sw in counters["switches"]:
        if switch and sw["name"] != switch:
            continue
        for p in sw["ports"]:
            if p["peer"] == peer:
                return p["prio"]
    raise FabricError("no port towards %s" % peer)


def drops(counters):
    """Every drop in the fabric, by cause: {cause: count}."""
    out = {}
    for sw in counters["switches"]:
        for p in sw["ports"]:
            for q in p["prio"]:
                for cause, n in q["drops"].items():
                    out[cause] = out.get(cause, 0) + n
    return out


def total(counters, key, prio=None):
    """key summed over every port (and priority, unless prio is given)."""
    return sum(q[key] for sw in counters["switches"] for p in sw["ports"]
               for q in p["prio"] if prio is None or q["prio"] == prio)


def port_summary(counters):
    """One line per switch port with anything counted: rx/tx packets,
    depth now and max (KiB), drops, CE marks, PFC sent/received."""
    lines = []
    for sw in counters["switches"]:
        for p in sw["ports"]:
            q = p["prio"]
            rx = sum(x["rx_packets"] for x in q)
            tx = sum(x["tx_packets"] for x in q)
            if not rx and not tx:
                continue
            dr = sum(sum(x["drops"].values()) for x in q)
            lines.append(
                "%-7s -> %-7s rx %8d tx %8d  depth %5.0f KiB (max %5.0f)"
                "  drops %5d  ce %5d  pfc_tx %4d  pfc_rx %4d" % (
                    sw["name"], p["peer"], rx, tx,
                    sum(x["depth"] for x in q) / 1024.0,
                    max(x["depth_max"] for x in q) / 1024.0, dr,
                    sum(x["ce_marked"] for x in q),
                    sum(x["pfc_tx"] for x in q),
                    sum(x["pfc_rx"] for x in q)))
    return lines


def main(argv):
    if len(argv) != 2 or argv[1] not in ("counters", "hosts", "sample",
                                         "ping"):
        print(__doc__)
        return 2
    fab = Fabric("pair", argv[0])
    try:
        reply = fab.control({"cmd": argv[1]})
    except FabricError as e:
        print("fabric.py: %s" % e, file=sys.stderr)
        return 1
    if argv[1] == "counters":
        print("\n".join(port_summary(reply)) or "no port counted a packet")
    else:
        print(json.dumps(reply, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

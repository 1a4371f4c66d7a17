#!/usr/bin/python3
"""Boot and drive vrnic test VMs under QEMU TCG.

Each VM runs under unmodified QEMU (build/qemu-stock) and gets:
  - the vrnic device, build/device/vrnic-device, a process of its own
    that QEMU attaches with -device vfio-user-pci (guest RAM memfd-backed,
    so that the device maps it; Documentation/vfio-user.rst), on a
    virtual Ethernet wire to its peer: a stream socket in QEMU's
    stream-netdev framing (a listens, b connects);
  - a serial console (ttyS0) on build/vm/<name>/console.sock, logged to
    console.log, with an interactive root shell on it;
  - a command agent on a virtio serial port (agent.sock), see
    tests/guest/rootfs/usr/local/sbin/vrnic-agent;
  - a QMP socket (qmp.sock) for monitor commands; VM.qmp() sends what
    concerns the vrnic (set_link of "wire", its x-fault-* properties, a
    filter-dump capture of "wire") to vrnic-device's control socket
    (control.sock) instead.
A VM whose NIC is virtio-net (a Linux rxe peer) has it on a QEMU stream
netdev, or with VRNIC_NETDEV=dgram a datagram socket (see VM.wire).

Every QEMU and vrnic-device process started here is killed when the
harness exits, and every wait is bounded.

Or attached to vrnic-fabric (boot_fabric, scripts/fabric.py): each NIC on
a host port of the switch, several NICs (hosts) per VM.

Command line:
  vm.py run             boot two VMs, show rdma link / ibv_devinfo / ping
  vm.py shell [NAME]    boot two VMs and attach to NAME's console (a)
  vm.py run --topo T    vrnic-fabric on topology T (pair, incast,
                        leaf-spine), its VMs, a demo with live counters
  vm.py shell [NAME] --topo T   the same VMs, attached to NAME's console
"""

import atexit
import base64
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(TOP, "build")
IMAGE = os.path.join(BUILD, "image")
# Unmodified QEMU (make qemu, scripts/build-qemu-stock.sh).
QEMU = os.path.join(BUILD, "qemu-stock", "qemu-system-x86_64")
# Where each VM's sockets and logs go: build/vm/<name>/ unless overridden,
# so that two harnesses (two developers' test runs) can share one tree.
VM_DIR = os.environ.get("VRNIC_VM_DIR", os.path.join(BUILD, "vm"))

BOOT_TIMEOUT = float(os.environ.get("VRNIC_BOOT_TIMEOUT", "180"))
SUBNET = "10.10.0"
SUBNET2 = "10.10.1"     # make bench: the virtio-net wire
NETDEV = os.environ.get("VRNIC_NETDEV", "stream")
# Where the vrnic device runs: "vfio-user", as build/device/vrnic-device.
# (The in-QEMU device, VRNIC_DEVICE=qemu, was retired: issue 27,
# Documentation/vfio-user.rst.)
DEVICE = "vfio-user"
if os.environ.get("VRNIC_DEVICE", DEVICE) != DEVICE:
    sys.exit("VRNIC_DEVICE=%s: the in-QEMU device was retired; vrnic runs "
             "as vrnic-device (Documentation/vfio-user.rst)"
             % os.environ["VRNIC_DEVICE"])
VRNIC_DEVICE = os.path.join(BUILD, "device", "vrnic-device")
# The account each VM's vrnic-device drops to once QEMU has connected
# (--user), or None to stay the harness's user (tests/system/vfio_user.py
# sets "nobody").  Fabric NICs always stay: they reconnect to sockets
# vrnic-fabric made.
DEVICE_USER = None
# The QOM path VM.vrnic_qom_path() returns and VM.qmp() takes in
# qom-get/qom-set: the properties live in vrnic-device (its control
# channel), not in QEMU.
VRNIC_DEVICE_QOM = "/machine/peripheral-anon/vrnic-device"

_live = []


def set_realtime(pids, on):
    """Every thread of each of pids (vrnic-device, vrnic-fabric) to
    SCHED_FIFO priority 1, or back to SCHED_OTHER: what stands in for a
    NIC's or a switch's hardware then runs when its socket has bytes, not
    when the guests' busy TCG vCPU threads let it (Documentation/
    fabric.rst, "Host scheduling").  Refused (False) unless the kernel's
    RT throttling leaves other tasks part of each period
    (sched_rt_runtime_us below sched_rt_period_us), so that a device in a
    loop cannot take the cores whole; True when every thread was set."""
    if on:
        try:
            with open("/proc/sys/kernel/sched_rt_runtime_us") as f:
                runtime = int(f.read())
            with open("/proc/sys/kernel/sched_rt_period_us") as f:
                period = int(f.read())
        except (OSError, ValueError):
            return False
        if not 0 <= runtime < period:
            return False
    policy = os.SCHED_FIFO if on else os.SCHED_OTHER
    param = os.sched_param(1 if on else 0)
    ok = True
    for pid in pids:
        try:
            tids = os.listdir("/proc/%d/task" % pid)
        except OSError:
            ok = False
            continue
        for tid in tids:
            try:
                os.sched_setscheduler(int(tid), policy, param)
            except OSError:
                ok = False
    return ok


def _kill_all():
    for vm in list(_live):
        vm.kill()


atexit.register(_kill_all)
for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, lambda *_: sys.exit(1))


class VMError(Exception):
    pass


class VM:
    """One guest.  index 0 is 'a' (10.10.0.1), 1 is 'b' (10.10.0.2), ..."""

    def __init__(self, name, index, peers=(), capture=None, load=True,
                 mem_mb=1536, smp=1):
        self.name = name
        self.index = index
        self.ip = "%s.%d" % (SUBNET, index + 1)
        self.mac = "52:54:00:76:72:%02x" % (index + 1)
        # The NIC on the wire: the vrnic, or (a Linux rxe peer) virtio-net.
        self.nic = "vrnic"
        self.dir = os.path.join(VM_DIR, name)
        self.peers = peers
        self.capture = capture
        self.load = load
        self.mem_mb = mem_mb
        self.smp = smp      # vCPUs (tests/system/load.py: 2)
        # make bench: a second NIC, virtio-net, on a wire of its own.
        self.virtio2 = False
        # Attached to vrnic-fabric instead (boot_fabric): one Nic per
        # host port, each NIC on its own socket; nics[host] finds one.
        self.fabric_nics = []
        self.nics = {}
        self.proc = None
        self.devproc = None     # its vrnic-device (not on the fabric)
        # More vrnic-device options, e.g. "--qpc-cache 256" (the QP-
        # context cache model): VRNIC_DEVICE_ARGS, or set before boot.
        self.dev_args = os.environ.get("VRNIC_DEVICE_ARGS", "").split()
        self.dev_captures = set()   # filter-dump ids vrnic-device runs
        self.agent = None
        self._buf = b""
        self._seq = 0

    def path(self, leaf):
        return os.path.join(self.dir, leaf)

    def wire_sock(self):
        return self.path("wire.sock")

    def ip2(self):
        """The address of the second (virtio-net) NIC, if there is one."""
        return "%s.%d" % (SUBNET2, self.index + 1)

    def wire(self, netdev, sock):
        """The -netdev joining this VM to its peer: a point-to-point link
        over an AF_UNIX socket.  NETDEV selects QEMU's transport:
          dgram   one datagram per frame, and one frame per main-loop
                  iteration on receive;
          stream  a byte stream: a receive reads up to 68 KiB, many
                  frames per iteration (VM a listens, b connects)."""
        peer = self.peers[0]
        if NETDEV == "stream":
            if self.index < peer.index:
                return ("stream,id=%s,server=on,addr.type=unix,addr.path=%s"
                        % (netdev, self.path(sock)))
            return ("stream,id=%s,server=off,addr.type=unix,addr.path=%s,"
                    "reconnect-ms=100" % (netdev, peer.path(sock)))
        return ("dgram,id=%s,local.type=unix,local.path=%s,"
                "remote.type=unix,remote.path=%s"
                % (netdev, self.path(sock), peer.path(sock)))

    def cmdline(self):
        append = ["console=ttyS0,115200", "panic=-1", "quiet",
                  "vrnic_vm=%s" % self.name, "vrnic_ip=%s" % self.ip]
        if not self.load:
            append.append("vrnic_noload")
        cmd = [
            QEMU, "-accel", "tcg", "-M", "pc", "-m", str(self.mem_mb),
            "-smp", str(self.smp), "-nodefaults", "-no-user-config", "-display",
            "none", "-vga", "none", "-no-reboot",
            "-L", os.path.join(IMAGE, "firmware"),
            "-kernel", os.path.join(IMAGE, "vmlinuz"),
            "-initrd", os.path.join(IMAGE, "initrd.img"),
            "-append", " ".join(append),
            "-chardev", "socket,id=con,path=%s,server=on,wait=off,"
            "logfile=%s" % (self.path("console.sock"),
                            self.path("console.log")),
            "-serial", "chardev:con",
            "-device", "virtio-serial-pci",
            "-chardev", "socket,id=agent,path=%s,server=on,wait=off"
            % self.path("agent.sock"),
            "-device", "virtserialport,chardev=agent,name=vrnic.agent",
            "-qmp", "unix:%s,server=on,wait=off" % self.path("qmp.sock"),
        ]
        # Guest RAM in a memfd: QEMU passes its fd in DMA_MAP, and
        # vrnic-device maps it (DMA without a message per access).
        cmd += ["-object", "memory-backend-memfd,id=ram,size=%dM"
                % self.mem_mb, "-machine", "memory-backend=ram"]
        if self.fabric_nics:
            for i, nic in enumerate(self.fabric_nics):
                if nic.kind == "vrnic":
                    # A vrnic-device of its own, on its fabric port or
                    # direct wire (start_fabric_devices()).
                    cmd += ["-device", json.dumps({
                        "driver": "vfio-user-pci",
                        "socket": {"path": self.path("vrnic-f%d.sock" % i),
                                   "type": "unix"}})]
                    continue
                if nic.sock.startswith("tcp:"):
                    host, port = nic.sock[4:].rsplit(":", 1)
                    addr = "addr.type=inet,addr.host=%s,addr.port=%s" % (
                        host, port)
                else:
                    addr = "addr.type=unix,addr.path=%s" % nic.sock
                if nic.listen:
                    cmd += ["-netdev", "stream,id=f%d,server=on,%s"
                            % (i, addr)]
                else:
                    cmd += ["-netdev", "stream,id=f%d,server=off,%s,"
                            "reconnect-ms=100" % (i, addr)]
                cmd += ["-device", "virtio-net-pci,netdev=f%d,mac=%s,"
                        "romfile=" % (i, nic.mac)]
            return cmd
        if self.nic == "virtio":
            if self.peers:
                cmd += ["-netdev", self.wire("wire", "wire.sock")]
            else:
                cmd += ["-netdev", "dgram,id=wire,local.type=unix,"
                        "local.path=%s,remote.type=unix,remote.path=%s"
                        % (self.wire_sock(), self.path("nowhere.sock"))]
            if self.capture:
                cmd += ["-object", "filter-dump,id=dump,netdev=wire,"
                        "file=%s" % self.capture]
            cmd += ["-device", "virtio-net-pci,netdev=wire,mac=%s,romfile="
                    % self.mac]
        else:
            # vrnic-device owns its wire, and captures it (start()).
            cmd += ["-device", json.dumps({
                "driver": "vfio-user-pci",
                "socket": {"path": self.path("vrnic.sock"),
                           "type": "unix"}})]
        if self.virtio2:
            cmd += ["-netdev", self.wire("wire2", "wire2.sock"),
                    "-device", "virtio-net-pci,netdev=wire2,mac=%s,romfile="
                    % self.mac.replace(":72:", ":73:")]
        return cmd

    def vfio_user(self):
        """Does this VM have one vrnic (vrnic-device, start_device())?
        (On the fabric, each vrnic NIC has its own:
        start_fabric_devices().)"""
        return self.nic == "vrnic" and not self.fabric_nics

    def start_device(self):
        """vrnic-device on this VM's wire, as QEMU's stream netdev would
        be: the lower index listens on its wire.sock, the other connects
        to it (and with no peer, it listens on a wire nobody joins)."""
        peer = self.peers[0] if self.peers else None
        if peer is None or self.index < peer.index:
            wire = ["--wire-listen", self.path("wire.sock")]
        else:
            wire = ["--wire-connect", peer.path("wire.sock")]
        sock = self.path("vrnic.sock")
        log = open(self.path("device.log"), "wb")
        self.devproc = subprocess.Popen(
            # --x-fault-syscall: SIGUSR1 makes it break its sandbox
            # (tests/system/vfio_user.py), as QEMU's x-fault-* hooks.
            [VRNIC_DEVICE, "--socket", sock, "--mac", self.mac,
             "--x-fault-syscall", "--control", self.path("control.sock"),
             # Link changes in device.log, as QEMU's -trace would show
             # them (rare: a test's set_link or a peer going away).
             "--trace", "vrnic_link"]
            + (["--user", DEVICE_USER] if DEVICE_USER else [])
            + self.dev_args + wire,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.time() + 10
        while not os.path.exists(sock):
            if time.time() > deadline or self.devproc.poll() is not None:
                raise VMError("%s: vrnic-device did not start (%s)"
                              % (self.name, self.path("device.log")))
            time.sleep(0.02)

    def start_fabric_devices(self):
        """A vrnic-device per vrnic NIC of a VM on the fabric: it connects
        to the NIC's fabric port (and reconnects when the fabric
        restarts), or listens on a direct wire; its speed is the NIC's."""
        for i, nic in enumerate(self.fabric_nics):
            if nic.kind != "vrnic":
                continue
            sock = self.path("vrnic-f%d.sock" % i)
            for leaf in (sock, self.path("control-f%d.sock" % i)):
                try:
                    os.unlink(leaf)
                except FileNotFoundError:
                    pass
            cmd = [VRNIC_DEVICE, "--socket", sock, "--mac", nic.mac,
                   "--control", self.path("control-f%d.sock" % i),
                   "--wire-listen" if nic.listen else "--wire-connect",
                   nic.sock]
            if nic.speed_mbps:
                cmd += ["--speed-mbps", str(nic.speed_mbps)]
            cmd += self.dev_args
            log = open(self.path("device-f%d.log" % i), "wb")
            nic.devproc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL,
                                           stdout=log,
                                           stderr=subprocess.STDOUT)
            log.close()
            deadline = time.time() + 10
            while not os.path.exists(sock):
                if time.time() > deadline or nic.devproc.poll() is not None:
                    raise VMError("%s: vrnic-device for %s did not start (%s)"
                                  % (self.name, nic.host,
                                     self.path("device-f%d.log" % i)))
                time.sleep(0.02)

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        for leaf in ("console.sock", "agent.sock", "qmp.sock", "wire.sock",
                     "wire2.sock", "console.log", "vrnic.sock",
                     "control.sock"):
            try:
                os.unlink(self.path(leaf))
            except FileNotFoundError:
                pass
        if self.vfio_user():
            self.start_device()
        elif self.fabric_nics:
            self.start_fabric_devices()
        log = open(self.path("qemu.log"), "wb")
        self.proc = subprocess.Popen(self.cmdline(), stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        with open(self.path("qemu.pid"), "w") as f:
            f.write("%d\n" % self.proc.pid)
        _live.append(self)
        if self.capture and self.vfio_user():
            # vrnic-device serves its control socket once QEMU has
            # connected, which QEMU does as it starts.
            self.qmp("object-add", **{"qom-type": "filter-dump",
                                      "id": "dump", "netdev": "wire",
                                      "file": self.capture})

    def _connect(self, leaf, deadline):
        while True:
            if self.proc.poll() is not None:
                raise VMError("%s: QEMU exited (%s), see %s" % (
                    self.name, self.proc.returncode, self.path("qemu.log")))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.path(leaf))
                return s
            except OSError:
                s.close()
                if time.time() > deadline:
                    raise VMError("%s: no %s" % (self.name, leaf))
                time.sleep(0.05)

    def _readline(self, deadline):
        while b"\n" not in self._buf:
            left = deadline - time.time()
            if left <= 0:
                raise VMError("%s: agent timed out" % self.name)
            self.agent.settimeout(min(left, 1.0))
            try:
                chunk = self.agent.recv(65536)
            except socket.timeout:
                if self.proc.poll() is not None:
                    raise VMError("%s: QEMU exited" % self.name)
                continue
            if not chunk:
                raise VMError("%s: agent connection closed" % self.name)
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return line.decode(errors="replace").strip()

    def wait_ready(self, timeout=BOOT_TIMEOUT):
        t0 = time.time()
        deadline = t0 + timeout
        self.agent = self._connect("agent.sock", deadline)
        while True:
            line = self._readline(deadline)
            if line.startswith("VRNIC-AGENT-READY"):
                self.boot_seconds = time.time() - t0
                break
        # /init's vrnic-up found GID index 1 not the IPv4 address's,
        # which "-g 1" and "-x 1" name: one clear error instead of every
        # RDMA test of the group failing on its own.  (Its other failures
        # are on the console, as before: the tests that need the port
        # say so, and fabric VMs set their NICs up again.)
        rc, out = self.run("cat /run/vrnic-up.failed 2>/dev/null")
        if rc == 0 and out.strip():
            raise VMError("%s: vrnic-up at boot: %s" % (self.name,
                                                       out.strip()))
        return self.boot_seconds

    def run(self, command, timeout=60):
        """Run a bash command in the guest; returns (status, output)."""
        self._seq += 1
        enc = base64.b64encode(command.encode()).decode()
        self.agent.sendall(("RUN %d %d %s\n" % (self._seq, timeout, enc))
                           .encode())
        deadline = time.time() + timeout + 15
        while True:
            line = self._readline(deadline)
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[0] == "DONE" and \
                    parts[1] == str(self._seq):
                out = base64.b64decode(parts[3]) if len(parts) > 3 else b""
                return int(parts[2]), out.decode(errors="replace")

    def check(self, command, timeout=60):
        rc, out = self.run(command, timeout)
        if rc != 0:
            raise VMError("%s: '%s' failed (%d):\n%s" % (self.name, command,
                                                         rc, out))
        return out

    def device_ctl(self, execute, arguments=None, fds=(), timeout=30):
        """One request on vrnic-device's control socket (a QMP-shaped
        JSON line, Documentation/vfio-user.rst), fds passed with it."""
        if self.devproc is None or self.devproc.poll() is not None:
            raise VMError("%s: vrnic-device is not running" % self.name)
        line = json.dumps({"execute": execute,
                           "arguments": arguments or {}}) + "\n"
        deadline = time.time() + timeout
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(timeout)
            s.connect(self.path("control.sock"))
            if fds:
                socket.send_fds(s, [line.encode()], list(fds))
            else:
                s.sendall(line.encode())
            buf = b""
            while b"\n" not in buf:
                # In slices: the device serves its control socket only
                # once QEMU has connected, so a QEMU that died first (or
                # a device that did) must not look like a slow reply.
                s.settimeout(min(max(deadline - time.time(), 0.01), 0.2))
                try:
                    chunk = s.recv(65536)
                except socket.timeout:
                    if self.proc is not None and self.proc.poll() is not None:
                        raise VMError("%s: QEMU exited (%s) before vrnic-device "
                                      "answered %s, see %s" % (
                                          self.name, self.proc.returncode,
                                          execute, self.path("qemu.log")))
                    if self.devproc.poll() is not None:
                        raise VMError("%s: vrnic-device exited (%s) before "
                                      "answering %s, see %s" % (
                                          self.name, self.devproc.returncode,
                                          execute, self.path("device.log")))
                    if time.time() < deadline:
                        continue
                    raise
                if not chunk:
                    raise VMError("%s: vrnic-device closed its control "
                                  "socket" % self.name)
                buf += chunk
        except OSError as e:    # socket.timeout too
            raise VMError("%s: vrnic-device control %s: %s"
                          % (self.name, execute, e))
        finally:
            s.close()
        reply = json.loads(buf.split(b"\n", 1)[0])
        if "error" in reply:
            raise VMError("vrnic-device %s: %s" % (execute, reply["error"]))
        return reply["return"]

    def _route(self, execute, arguments):
        """With vrnic-device, what QEMU's QMP would do to the in-QEMU
        vrnic: (handled, result)."""
        a = arguments
        if execute == "set_link" and a.get("name") == "wire":
            return True, self.device_ctl("set_link", {"name": "wire",
                                                      "up": a.get("up")})
        if execute in ("qom-get", "qom-set") and \
                a.get("path") == VRNIC_DEVICE_QOM:
            args = {k: v for k, v in a.items() if k != "path"}
            return True, self.device_ctl(execute, args)
        if execute == "object-add" and a.get("qom-type") == "filter-dump" \
                and a.get("netdev") == "wire":
            with open(a["file"], "wb") as f:
                res = self.device_ctl("capture-start", fds=[f.fileno()])
            self.dev_captures.add(a.get("id"))
            return True, res
        if execute == "object-del" and a.get("id") in self.dev_captures:
            self.dev_captures.discard(a.get("id"))
            return True, self.device_ctl("capture-stop")
        return False, None

    def vrnic_qom_path(self):
        """The QOM path of this VM's vrnic (it has no id), for qom-get
        and qom-set through qmp(), in either mode."""
        if self.devproc is not None:
            return VRNIC_DEVICE_QOM
        for p in self.qmp("qom-list", path="/machine/peripheral-anon"):
            if p["type"] == "child<vrnic>":
                return "/machine/peripheral-anon/" + p["name"]
        raise VMError("%s: no vrnic in /machine/peripheral-anon" % self.name)

    def qmp(self, execute, **arguments):
        if self.devproc is not None:
            handled, result = self._route(execute, arguments)
            if handled:
                return result
        return self._qmp(execute, arguments)

    def _qmp(self, execute, arguments):
        s = self._connect("qmp.sock", time.time() + 10)
        f = s.makefile("rw")
        try:
            json.loads(f.readline())  # greeting
            for cmd in ({"execute": "qmp_capabilities"},
                        {"execute": execute, "arguments": arguments}):
                f.write(json.dumps(cmd) + "\n")
                f.flush()
                while True:
                    reply = json.loads(f.readline())
                    if "return" in reply or "error" in reply:
                        break
                if "error" in reply:
                    raise VMError("QMP %s: %s" % (execute, reply["error"]))
            return reply["return"]
        finally:
            f.close()
            s.close()

    def kill(self):
        for p in [self.proc, self.devproc] + [
                n.devproc for n in self.fabric_nics]:
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        if self in _live:
            _live.remove(self)


class RssPeak:
    """The peak VmRSS (KiB) of process pid over a with-block, sampled
    every 0.5 s on a thread: `with RssPeak(pid) as r: ...`, then r.start
    and r.peak (both 0 if pid is 0 or unreadable)."""

    def __init__(self, pid):
        self.pid = pid
        self.start = self.peak = self._read()
        self._done = threading.Event()
        self._th = threading.Thread(target=self._sample, daemon=True)

    def _read(self):
        try:
            with open("/proc/%d/status" % self.pid) as f:
                return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
        except (OSError, AttributeError, TypeError):
            return 0

    def _sample(self):
        while self.pid and not self._done.wait(0.5):
            self.peak = max(self.peak, self._read())

    def __enter__(self):
        self._th.start()
        return self

    def __exit__(self, *exc):
        self._done.set()
        self._th.join()
        self.peak = max(self.peak, self._read())
        return False

    def per(self, n):
        """The growth in bytes per n (0 when not measured)."""
        return (self.peak - self.start) * 1024.0 / n if self.start else 0.0


def boot_pair(capture=None, load=True, smp=1, a_mem_mb=None, a_dev_args=()):
    """Boot VMs a and b on one wire; returns them once both agents answer.
    smp: vCPUs per VM; a_mem_mb and a_dev_args: a's RAM (else the
    default) and vrnic-device arguments added to a's."""
    a = VM("a", 0, capture=capture, load=load, smp=smp,
           **({"mem_mb": a_mem_mb} if a_mem_mb else {}))
    a.dev_args = a.dev_args + list(a_dev_args)
    return _boot(a, VM("b", 1, load=load, smp=smp))


def _boot(a, b):
    """Join a and b by their wire(s), start both, and return them once
    both agents answer."""
    a.peers = (b,)
    b.peers = (a,)
    a.start()
    b.start()
    a.wait_ready()
    b.wait_ready()
    return a, b


def boot_interop():
    """Boot VM a (vrnic) and VM rxe, whose only NIC is a virtio-net on
    the same wire, for Linux soft-RoCE (rdma_rxe) to run on."""
    r = VM("rxe", 1, load=False)
    r.nic = "virtio"
    return _boot(VM("a", 0), r)


def boot_bench(names=("a", "b"), mem_mb=None, dev_args=()):
    """Boot VMs a and b for make bench: each has a vrnic and a virtio-net.
    Each NIC kind has its own point-to-point wire, both the same transport
    (NETDEV): a QEMU hub joining the four would drop the netdev's
    backpressure (measured with dgram: ib_write_bw from ~40 to ~1.5 MB/s).
    names: their VM directories (a second pair beside the first);
    mem_mb and dev_args: both VMs' RAM (else the default) and vrnic-device
    arguments added to both."""
    extra = {"mem_mb": mem_mb} if mem_mb else {}
    a, b = VM(names[0], 0, **extra), VM(names[1], 1, **extra)
    for vm in (a, b):
        vm.dev_args = vm.dev_args + list(dev_args)
    a.virtio2 = b.virtio2 = True
    return _boot(a, b)


def setup_bench(a, b, mtu):
    """The boot_bench pair ready to measure: vrnic and virtio-net at mtu,
    rxe on the virtio-net (tests/system/rxe-up), both addresses ping."""
    with open(os.path.join(TOP, "tests", "system", "rxe-up")) as f:
        body = f.read()
    for vm in (a, b):
        vm.check("vrnic-up %d" % mtu, timeout=60)
        vm.check("cat > /tmp/rxe-up <<'VRNIC_EOF'\n%sVRNIC_EOF\n"
                 "bash /tmp/rxe-up %d %s" % (body, mtu, vm.ip2()), timeout=60)
    a.check("ping -c 2 -W 5 %s && ping -c 2 -W 5 %s" % (b.ip, b.ip2()),
            timeout=60)


class Nic:
    """One NIC of a VM on a vrnic-fabric host port: kind is "vrnic" or
    "virtio" (for rdma_rxe), ips its IPv4 addresses (/24).  After
    boot_fabric, netdev is its interface in the guest and rdma its RDMA
    device (vrnic NICs; a virtio NIC gets one from rxe-up).  listen: the
    NIC's netdev listens on sock (server=on) instead of connecting to a
    fabric port: a VM that stands in for the switch (the Linux RED
    switch VM of tests/system/fabric_tests.py), which the other VMs'
    NICs reach by reconnecting to the fabric's socket paths."""

    def __init__(self, host, kind, ips, sock, mac, listen=False):
        self.host = host
        self.kind = kind
        self.ips = list(ips)
        self.sock = sock
        self.mac = mac
        self.listen = listen
        self.netdev = None
        self.rdma = None
        self.vm = None
        self.devproc = None     # its vrnic-device
        self.direct = False     # a direct wire, not a fabric port
        # The port speed the NIC reports and times PFC quanta at: the
        # switch port's rate, so that both ends agree on a pause's length.
        self.speed_mbps = None

    @property
    def ip(self):
        return self.ips[0]


# In the guest: a VM with several NICs answers ARP only on the NIC that
# holds the address (else every NIC claims every address: ARP flux), and
# each vrnic netdev is found by its MAC, addressed, and its RDMA device
# named (rdma link: "link vrnic1/1 ... netdev eth1").
_NIC_SETUP = """
sysctl -qw net.ipv4.conf.all.arp_ignore=1 net.ipv4.conf.all.arp_announce=2
byaddr() { for n in /sys/class/net/*; do
    [ "$(cat $n/address)" = "$1" ] && { basename $n; return 0; }; done
    return 1; }
rdmaof() { rdma link show | awk -v d="$1" \
    '$4 == "ACTIVE" && $NF == d { split($2, a, "/"); print a[1] }'; }
"""


def _setup_nics(vm, timeout=60):
    """Address every vrnic NIC of vm and wait for its port to be ACTIVE;
    fills in each Nic's netdev and rdma."""
    script = _NIC_SETUP
    for nic in vm.fabric_nics:
        if nic.kind != "vrnic":
            continue
        script += ("for i in $(seq 100); do d=$(byaddr %s) && break; "
                   "sleep 0.1; done; [ -n \"$d\" ] || exit 1\n"
                   "ip -4 addr flush dev $d; ip link set dev $d up\n"
                   % nic.mac)
        for ip in nic.ips:
            script += "ip addr add %s/24 dev $d\n" % ip
        script += ("for i in $(seq 200); do r=$(rdmaof $d); "
                   "[ -n \"$r\" ] && break; sleep 0.1; done\n"
                   "echo \"NIC %s $d $r\"\n" % nic.host)
    out = vm.check(script, timeout=timeout)
    for line in out.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "NIC":
            nic = vm.nics[words[1]]
            nic.netdev = words[2]
            nic.rdma = words[3] if len(words) > 3 else None
            if not nic.rdma:
                raise VMError("%s: %s (%s) has no ACTIVE RDMA port:\n%s" % (
                    vm.name, nic.host, nic.netdev, vm.run("rdma link")[1]))


def wait_fabric_ports(vms, timeout=60):
    """After the fabric restarted: until every vrnic port of vms is
    ACTIVE again (bounded)."""
    for vm in vms:
        devs = " ".join(n.rdma for n in vm.fabric_nics if n.rdma)
        if devs:
            vm.check("for i in $(seq %d); do ok=1; for r in %s; do grep -q "
                     "ACTIVE /sys/class/infiniband/$r/ports/1/state || ok=; "
                     "done; [ -n \"$ok\" ] && exit 0; sleep 0.1; done; "
                     "rdma link; exit 1" % (timeout * 10, devs),
                     timeout=timeout + 10)


def fab_sock(fab, host):
    """Where a NIC joins fab's host port: its TCP port if the topology
    gives it one ("tcp:127.0.0.1:PORT", as a VM on another machine
    would join; vrnic-device --wire-connect and QEMU's inet stream
    netdev both take it), else its UNIX socket."""
    import fabric as fablib
    port = fablib.tcp_port(fab.topology, host)
    return "tcp:127.0.0.1:%d" % port if port else fab.sock(host)


def boot_fabric(fab, layout, mem_mb=1536, speeds=None):
    """Boot VMs attached to the running fabric fab (scripts/fabric.py).
    layout: [(vm name, [(host, "vrnic"|"virtio", [ip, ...]), ...]), ...]:
    each NIC connects to fab's host port <host> (DIR/<host>.sock).  A NIC
    tuple may carry a fourth element, {"sock": path, "listen": bool}: a
    direct wire instead, two NICs on one socket path (one listens, the
    other connects), bypassing the switch (make bench's side-by-side
    pair).  The
    first vrnic NIC's first address comes from the kernel command line,
    the others are set through the agent.  Returns the VMs, once every
    agent answers and every vrnic port is ACTIVE; vm.nics[host] is the
    Nic.  Each vrnic's speed-mbps is speeds[host], or else the rate of
    the switch port towards it in fab's topology (if it has one)."""
    import fabric as fablib
    vms = []
    for index, (name, nics) in enumerate(layout):
        vm = VM(name, index, mem_mb=mem_mb)
        for j, (host, kind, ips, *wire) in enumerate(nics):
            direct = wire[0] if wire else None
            sock = direct["sock"] if direct else fab_sock(fab, host)
            nic = Nic(host, kind, ips, sock,
                      "52:54:00:76:%02x:%02x" % (0x80 + index, j + 1),
                      listen=bool(direct and direct["listen"]))
            nic.vm = vm
            nic.direct = bool(direct)
            if kind == "vrnic" and not direct:
                nic.speed_mbps = (speeds or {}).get(
                    host, fablib.link_mbps(fab.topology, host))
            vm.fabric_nics.append(nic)
            vm.nics[host] = nic
        first = [n for n in vm.fabric_nics if n.kind == "vrnic"]
        if first:
            vm.ip = first[0].ip
            vm.mac = first[0].mac
        vms.append(vm)
    for vm in vms:
        vm.start()
    for vm in vms:
        vm.wait_ready()
    for vm in vms:
        _setup_nics(vm)
    apply_nic_params(vms, fab.topology)
    return vms


def write_cc_params(vm, devs, knobs):
    """Write knobs [(name, value)] into the driver's debugfs cc_params of
    each RDMA device in devs on vm (mlx5's DCQCN names, swift_*,
    cc_algo).  Names and values must be [a-z0-9_] words (checked here:
    they become a path and an argument in the guest's shell).  Raises
    VMError if one does not take (unknown name, value out of range)."""
    import fabric as fablib
    for k, v in knobs:
        if not fablib.NIC_KNOB.fullmatch(k) or \
                not fablib.NIC_KNOB.fullmatch(str(v)):
            raise VMError("cc_params: bad knob %r=%r" % (k, v))
    if not devs or not knobs:
        return
    vm.check("mountpoint -q /sys/kernel/debug || mount -t debugfs none "
             "/sys/kernel/debug; for d in %s; do %s done" % (
                 " ".join(devs), " ".join(
                     "echo %s > /sys/kernel/debug/vrnic/$d/cc_params/%s "
                     "|| exit 1;" % (v, k) for k, v in knobs)))


def apply_nic_params(vms, topology):
    """Write the topology's "nic" cc_params (fabric.nic_cc_params) into
    every vrnic of vms that is attached to the fabric (not a direct
    wire): the knobs that fit the fabric's rates.  A topology without them
    changes nothing, and leaves what an earlier topology wrote.  Raises
    VMError if a knob does not take (an unknown name or a value out of
    range)."""
    import fabric as fablib
    knobs = fablib.nic_cc_params(topology)
    for vm in vms:
        write_cc_params(vm, [n.rdma for n in vm.fabric_nics
                             if n.kind == "vrnic" and n.rdma and
                             not n.direct], knobs)


# The GID index of an IPv4 address on an RDMA device (its RoCE v2 entry),
# as a shell function for the guest: gidx DEV IP.
GIDX_SH = r"""gidx() { h=$(printf '%02x%02x:%02x%02x' $(echo $2 | tr . ' '))
for g in /sys/class/infiniband/$1/ports/1/gids/*; do
    [ "$(cat $g)" = "0000:0000:0000:0000:0000:ffff:$h" ] || continue
    i=${g##*/}
    case "$(cat /sys/class/infiniband/$1/ports/1/gid_attrs/types/$i)" in
    *v2*) echo $i; return 0 ;; esac
done; echo "gidx: no RoCE v2 GID for $2 on $1" >&2; return 1; }
"""


def gid_index(vm, dev, ip):
    """The GID index of ip on RDMA device dev, looked up in the guest."""
    return int(vm.check(GIDX_SH + "gidx %s %s" % (dev, ip)).strip())


# make run/shell TOPO=...: which VM carries which host of a shipped
# topology, and the demo's flows (sender, receiver).  Two VMs at most on
# two cores; each NIC of a VM in its own /24 (RoCE picks the NIC by GID
# and route), the receiver with an address in each sender's subnet.
TOPO_LAYOUTS = {
    "pair": [("a", [("a", "vrnic", ["10.10.0.1"])]),
             ("b", [("b", "vrnic", ["10.10.0.2"])])],
    "incast": [("a", [("s1", "vrnic", ["10.10.1.1"]),
                      ("s2", "vrnic", ["10.10.2.1"])]),
               ("b", [("r", "vrnic", ["10.10.1.2", "10.10.2.2"])])],
    # Every flow crosses the spines: a (leaf0) -> d (leaf1), c -> b.
    "leaf-spine": [("a", [("a", "vrnic", ["10.10.1.1"]),
                          ("c", "vrnic", ["10.10.2.1"])]),
                   ("b", [("b", "vrnic", ["10.10.2.2"]),
                          ("d", "vrnic", ["10.10.1.2"])])],
}
TOPO_FLOWS = {"pair": [("a", "b")], "incast": [("s1", "r"), ("s2", "r")],
              "leaf-spine": [("a", "d"), ("c", "b")]}
DEMO_SECONDS = int(os.environ.get("DEMO_SECONDS", "8"))


def _same_subnet(nic, ip):
    return [x for x in nic.ips if x.rsplit(".", 1)[0] == ip.rsplit(".", 1)[0]]


def boot_topology(topo):
    """Start vrnic-fabric on a shipped topology, then its VMs; returns
    (fabric, VMs, {host: Nic})."""
    import fabric as fablib
    if topo not in TOPO_LAYOUTS:
        raise VMError("TOPO is one of %s" % ", ".join(sorted(TOPO_LAYOUTS)))
    fdir = os.environ.get("VRNIC_FABRIC_DIR", os.path.join(VM_DIR, "fabric"))
    fab = fablib.Fabric(topo, fdir)
    try:
        fab.start()
    except fablib.FabricError as e:
        raise VMError(str(e))
    print("== vrnic-fabric on %s: %s (control %s, log %s)" % (
        topo, fab.topology, fab.control_path, fab.log))
    vms = boot_fabric(fab, TOPO_LAYOUTS[topo])
    nics = {}
    for vm in vms:
        nics.update(vm.nics)
    return fab, vms, nics


def _live_view(fab, until, procs, senders):
    """Once a second, queue depths and counters from the control socket,
    until every proc (vm, tag) finished or `until`.  Returns, per sender
    host, [(t, MB/s it sent in the last interval)]."""
    import fabric as fablib
    t0 = time.time()
    rates = {h: [] for h in senders}
    last = {}
    while time.time() < until:
        time.sleep(1)
        try:
            q = fab.sample()["q"]
            c = fab.counters()
        except fablib.FabricError as e:
            print("   (control: %s)" % e)
            continue
        now = time.time() - t0
        print("-- t=%4.1f s  queues: %s" % (
            now, ", ".join("%s:%d prio %d %.0f KiB" % (
                sw, p, pr, b / 1024.0) for sw, p, pr, b in q) or "empty"))
        for line in fablib.port_summary(c):
            print("   " + line)
        for h in senders:
            got = sum(x["rx_bytes"] for x in fablib.port(c, h))
            if h in last:
                rates[h].append((now, (got - last[h][1]) / 1e6 /
                                 max(now - last[h][0], 1e-3)))
            last[h] = (now, got)
        if now > DEMO_SECONDS and all(
                vm.run("[ -e /tmp/%s.rc ]" % tag)[0] == 0
                for vm, tag in procs):
            break
    return rates


def _plot(fab, since, rates):
    """The end of make run TOPO: each sender's throughput as seen once a
    second, then scripts/fabric_report.py's report of the telemetry from
    `since` (fabric ns) on (queue statistics, per-port deltas, goodput
    and fairness, queue and throughput plots) and its SVG."""
    import fabric_report as report
    for h, pts in sorted(rates.items()):
        if pts:
            print("\n== %s sent (MB/s, once a second): %s" % (
                h, " ".join("%.0f" % v for _, v in pts)))
    try:
        tel = report.load(fab.telemetry)
    except OSError as e:
        print("\n== no telemetry: %s" % e)
        return
    tel = report.window(tel, since)
    print("\n== the run from the fabric's telemetry (%s)\n" % fab.telemetry)
    print(report.text_report(tel))
    svg = os.path.join(fab.dir, "report.svg")
    with open(svg, "w") as f:
        f.write(report.svg_report(tel))
    print("\n== plots written to %s" % svg)


def cmd_run_topo(topo):
    t0 = time.time()
    fab, vms, nics = boot_topology(topo)
    print("   booted in %.1f s" % (time.time() - t0))
    for vm in vms:
        print("\n== [%s] hosts %s; rdma link" % (vm.name, ", ".join(
            "%s=%s %s (%s)" % (n.host, n.rdma, n.netdev, "/".join(n.ips))
            for n in vm.fabric_nics)))
        print(vm.check("rdma link").rstrip())
    flows = []
    for i, (src, dst) in enumerate(TOPO_FLOWS[topo]):
        s, d = nics[src], nics[dst]
        dip = _same_subnet(d, s.ip)[0]
        flows.append((s, d, dip, 18700 + i))
    for s, d, dip, _ in flows[:1]:
        print("\n== [%s] ping -c 3 %s (host %s -> %s)" % (s.vm.name, dip,
                                                        s.host, d.host))
        print(s.vm.check("ping -c 3 -i 0.2 -W 2 %s | tail -2" % dip,
                         timeout=30).rstrip())
    bw = "ib_write_bw -s 65536 -D %d" % DEMO_SECONDS
    if os.environ.get("TCLASS"):
        bw += " --tclass=%d" % int(os.environ["TCLASS"])
    since = fab.ping()["t_ns"]
    print("\n== %s, %s%s" % (bw, ", ".join(
        "%s->%s" % (s.host, d.host) for s, d, _, _ in flows),
        " at the same time" if len(flows) > 1 else ""))
    for s, d, dip, port in flows:
        d.vm.check("rm -f /tmp/d%d.rc; (timeout 120 %s -d %s -x %d -p %d "
                   "> /tmp/d%d.out 2>&1; echo $? > /tmp/d%d.rc) "
                   ">/dev/null 2>&1 &" % (port, bw, d.rdma, gid_index(
                       d.vm, d.rdma, dip), port, port, port))
    for s, d, dip, port in flows:
        d.vm.run("for i in $(seq 200); do ss -Hltn | grep -q ':%d ' && "
                 "exit 0; sleep 0.1; done; exit 1" % port, timeout=40)
    for s, d, dip, port in flows:
        s.vm.check("rm -f /tmp/c%d.rc; (timeout 120 %s -d %s -x %d -p %d %s "
                   "> /tmp/c%d.out 2>&1; echo $? > /tmp/c%d.rc) "
                   ">/dev/null 2>&1 &" % (port, bw, s.rdma, gid_index(
                       s.vm, s.rdma, s.ip), port, dip, port, port))
    rates = _live_view(fab, time.time() + DEMO_SECONDS + 60,
                       [(s.vm, "c%d" % port) for s, _, _, port in flows],
                       [s.host for s, _, _, _ in flows])
    for s, d, dip, port in flows:
        s.vm.run("for i in $(seq 120); do [ -e /tmp/c%d.rc ] && exit 0; "
                 "sleep 0.5; done; exit 1" % port, timeout=90)
        out = s.vm.run("cat /tmp/c%d.out" % port)[1]
        lines = out.splitlines()
        head = [i for i, ln in enumerate(lines) if "#bytes" in ln]
        print("\n== %s -> %s (%s):" % (s.host, d.host, dip))
        print("\n".join(lines[head[0]:head[0] + 2]) if head else
              "\n".join(lines[-10:]))
    for vm in vms:
        vm.kill()
    fab.stop()      # its last counters go to the telemetry file
    _plot(fab, since, rates)
    print("\nvrnic run TOPO=%s: done in %.0f s (VMs and fabric stopped)"
          % (topo, time.time() - t0))
    return 0


def cmd_shell_topo(topo, name):
    fab, vms, nics = boot_topology(topo)
    by_name = {vm.name: vm for vm in vms}
    vm = by_name.get(name)
    if vm is None:
        print("unknown VM %s (%s)" % (name, " or ".join(sorted(by_name))))
        return 2
    for v in vms:
        print("VM %s: %s" % (v.name, ", ".join(
            "host %s = %s %s %s" % (n.host, n.rdma, n.netdev, "/".join(n.ips))
            for n in v.fabric_nics)))
    print("Fabric control socket: %s (scripts/fabric.py %s counters)"
          % (fab.control_path, fab.dir))
    print("Attached to the console of VM %s. Ctrl-] leaves and stops the "
          "VMs and the fabric." % vm.name)
    subprocess.call(["socat", "-,raw,echo=0,escape=0x1d",
                     "UNIX-CONNECT:%s" % vm.path("console.sock")])
    return 0


def cmd_run(args):
    if args[:1] == ["--topo"]:
        return cmd_run_topo(args[1])
    capture = os.path.join(BUILD, "vm", "vrnic.pcap") \
        if os.environ.get("CAPTURE") == "1" else None
    t0 = time.time()
    print("== booting VMs a (%s.1) and b (%s.2) under TCG ..." % (SUBNET,
                                                              SUBNET))
    a, b = boot_pair(capture=capture)
    print("   booted in %.1f s (a %.1f s, b %.1f s)" % (
        time.time() - t0, a.boot_seconds, b.boot_seconds))
    for vm in (a, b):
        print("\n== [%s] rdma link" % vm.name)
        print(vm.check("rdma link").rstrip())
    print("\n== [a] ibv_devinfo -v (excerpt)")
    out = a.check("ibv_devinfo -v 2>&1")
    print("\n".join(out.splitlines()[:40]))
    print("\n== [a] GID table")
    print(a.check("for g in /sys/class/infiniband/vrnic0/ports/1/gids/[0-3]; "
                  "do echo \"$g: $(cat $g)\"; done").rstrip())
    print("\n== [a] ping -c 5 %s over the vrnic netdev" % b.ip)
    print(a.check("ping -c 5 -i 0.2 %s" % b.ip, timeout=60).rstrip())
    for tool, args in (("ib_write_bw", "-s 65536 -n 500"),
                       ("ib_write_lat", "-s 2 -n 500")):
        print("\n== perftest %s %s: b serves, a runs (RoCEv2 over vrnic)"
              % (tool, args))
        cmd = "%s -d vrnic0 -x 1 %s" % (tool, args)
        b.check("(timeout 120 %s > /tmp/srv.out 2>&1 &)" % cmd)
        time.sleep(1.5)
        out = a.check("timeout 120 %s %s 2>&1" % (cmd, b.ip), timeout=150)
        lines = out.splitlines()
        head = [ln for ln in lines if "#bytes" in ln]
        if head:
            i = lines.index(head[0])
            print("\n".join(lines[i:i + 2]))
        else:
            print(out)
    if capture:
        print("\n== capture written to %s" % capture)
    print("\nvrnic run: done in %.0f s (VMs stopped)" % (time.time() - t0))
    return 0


def cmd_shell(args):
    topo = None
    if "--topo" in args:
        i = args.index("--topo")
        topo = args[i + 1]
        args = args[:i] + args[i + 2:]
    name = args[0] if args else "a"
    if topo:
        return cmd_shell_topo(topo, name)
    a, b = boot_pair()
    vm = {"a": a, "b": b}.get(name)
    if vm is None:
        print("unknown VM %s (a or b)" % name)
        return 2
    print("Attached to the console of VM %s (%s); peer is %s. "
          "Ctrl-] leaves and stops both VMs." % (vm.name, vm.ip,
                                                  (b if vm is a else a).ip))
    subprocess.call(["socat", "-,raw,echo=0,escape=0x1d",
                     "UNIX-CONNECT:%s" % vm.path("console.sock")])
    return 0


def main(argv):
    if not argv or argv[0] not in ("run", "shell"):
        print(__doc__)
        return 2
    try:
        return {"run": cmd_run, "shell": cmd_shell}[argv[0]](argv[1:])
    except (VMError, IndexError) as e:
        print("vm.py: %s" % (e or "--topo needs a topology"),
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

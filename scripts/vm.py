#!/usr/bin/python3
"""Boot and drive vrnic test VMs under QEMU TCG.

Each VM gets:
  - the vrnic device on a virtual Ethernet wire to its peer: a QEMU stream
    netdev over an AF_UNIX socket (a listens, b connects), or with
    VRNIC_NETDEV=dgram one datagram socket each (see VM.wire);
  - a serial console (ttyS0) on build/vm/<name>/console.sock, logged to
    console.log, with an interactive root shell on it;
  - a command agent on a virtio serial port (agent.sock), see
    tests/guest/rootfs/usr/local/sbin/vrnic-agent;
  - a QMP socket (qmp.sock) for link up/down and other monitor commands.

Every QEMU process started here is killed by PID when the harness exits,
and every wait is bounded.

Command line:
  vm.py run             boot two VMs, show rdma link / ibv_devinfo / ping
  vm.py shell [NAME]    boot two VMs and attach to NAME's console (a)
"""

import atexit
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(TOP, "build")
IMAGE = os.path.join(BUILD, "image")
QEMU = os.path.join(BUILD, "qemu", "qemu-system-x86_64")
# Where each VM's sockets and logs go: build/vm/<name>/ unless overridden,
# so that two harnesses (two developers' test runs) can share one tree.
VM_DIR = os.environ.get("VRNIC_VM_DIR", os.path.join(BUILD, "vm"))

BOOT_TIMEOUT = float(os.environ.get("VRNIC_BOOT_TIMEOUT", "180"))
SUBNET = "10.10.0"
SUBNET2 = "10.10.1"     # make bench: the virtio-net wire
NETDEV = os.environ.get("VRNIC_NETDEV", "stream")

_live = []


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
        self.proc = None
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
        if self.peers:
            cmd += ["-netdev", self.wire("wire", "wire.sock")]
        else:
            cmd += ["-netdev", "dgram,id=wire,local.type=unix,local.path=%s,"
                    "remote.type=unix,remote.path=%s"
                    % (self.wire_sock(), self.path("nowhere.sock"))]
        if self.capture:
            cmd += ["-object", "filter-dump,id=dump,netdev=wire,file=%s"
                    % self.capture]
        if self.nic == "virtio":
            cmd += ["-device", "virtio-net-pci,netdev=wire,mac=%s,romfile="
                    % self.mac]
        else:
            cmd += ["-device", "vrnic,netdev=wire,mac=%s" % self.mac]
        if self.virtio2:
            cmd += ["-netdev", self.wire("wire2", "wire2.sock"),
                    "-device", "virtio-net-pci,netdev=wire2,mac=%s,romfile="
                    % self.mac.replace(":72:", ":73:")]
        return cmd

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        for leaf in ("console.sock", "agent.sock", "qmp.sock", "wire.sock",
                     "wire2.sock", "console.log"):
            try:
                os.unlink(self.path(leaf))
            except FileNotFoundError:
                pass
        log = open(self.path("qemu.log"), "wb")
        self.proc = subprocess.Popen(self.cmdline(), stdin=subprocess.DEVNULL,
                                     stdout=log, stderr=subprocess.STDOUT)
        log.close()
        with open(self.path("qemu.pid"), "w") as f:
            f.write("%d\n" % self.proc.pid)
        _live.append(self)

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

    def qmp(self, execute, **arguments):
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
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self in _live:
            _live.remove(self)


def boot_pair(capture=None, load=True, smp=1):
    """Boot VMs a and b on one wire; returns them once both agents answer.
    smp: vCPUs per VM."""
    return _boot(VM("a", 0, capture=capture, load=load, smp=smp),
                 VM("b", 1, load=load, smp=smp))


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


def boot_bench():
    """Boot VMs a and b for make bench: each has a vrnic and a virtio-net.
    Each NIC kind has its own point-to-point wire, both the same transport
    (NETDEV): a QEMU hub joining the four would drop the netdev's
    backpressure (measured with dgram: ib_write_bw from ~40 to ~1.5 MB/s)."""
    a, b = VM("a", 0), VM("b", 1)
    a.virtio2 = b.virtio2 = True
    return _boot(a, b)


def cmd_run(args):
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
    name = args[0] if args else "a"
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
    except VMError as e:
        print("vm.py: %s" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

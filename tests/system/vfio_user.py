#!/usr/bin/python3
"""vrnic-device itself (issue 27): two VMs under unmodified QEMU
(build/qemu-stock) with -device vfio-user-pci, each vrnic running as
build/device/vrnic-device (scripts/vm.py), as every VM test runs them;
this group tests what is the device program's own.

  ping       the netdev over vrnic-device's own wire, captured by
             vrnic-device (capture-start on its control channel, the pcap
             file's fd passed to it) with a short ib_write_bw, and the
             capture judged by pcap_check.py (tshark, every ICRC);
  link       set_link of the wire through the control channel: the guest
             gets IBV_EVENT_PORT_ERR and the port goes DOWN, then
             PORT_ACTIVE and ACTIVE; --trace vrnic_link logged both;
  rdma       ib_write_bw, and ibv_rc_pingpong in event mode: the CQ-arm
             race a posted arm doorbell opens (spec, "Doorbells"), which
             hung it before the device read the consumer index at the arm;
  user       both devices run as nobody (--user), all four uids, b's
             wire connected to the socket a's device gave that user;
  gone       vrnic-device of VM a makes a system call its seccomp
             sandbox forbids and is killed: QEMU stays up, the guest's
             status poll sees the function stop answering and makes it
             dead (IB_EVENT_DEVICE_FATAL, carrier off), and no kernel
             warning follows.

Stage "vfio-user" in build/results; main() boots its own pair.
"""

import os
import re
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import vm as vmlib  # noqa: E402
from results import Stage  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import guest_tests as gt  # noqa: E402

BAD = (r"Oops|BUG:|WARNING:|KASAN|Call Trace|refcount_t|list_del corruption|"
       r"blocked for more than|NETDEV WATCHDOG")


def check(stage, name, ok, detail=""):
    stage.record(name, "pass" if ok else "fail", "" if ok else detail)
    return ok


def capture(stage, a, b):
    """ping and a short ib_write_bw captured by a's vrnic-device, through
    VM.qmp()'s filter-dump as guest_tests.py does it."""
    path = os.path.join(vmlib.VM_DIR, "vfio-user.pcap")
    a.qmp("object-add", **{"qom-type": "filter-dump", "id": "cap",
                           "netdev": "wire", "file": path})
    try:
        rc, out = a.run("ping -c 3 -W 5 %s" % b.ip, timeout=60)
        check(stage, "ping a->b through vrnic-device", rc == 0, out[-400:])
        bw = "ib_write_bw -d vrnic0 -x 1 -n 20 -s 4096 -m 1024"
        b.run("timeout 60 %s >/tmp/bw.log 2>&1 &" % bw)
        time.sleep(2)
        rc, out = a.run("timeout 60 %s %s" % (bw, b.ip), timeout=90)
        check(stage, "ib_write_bw 4 KiB a->b, captured", rc == 0,
              out[-600:])
        b.run("pkill ib_write_bw")
    finally:
        a.qmp("object-del", id="cap")
    import pcap_check  # noqa: E402
    macs = {bytes.fromhex(vm.mac.replace(":", "")): vm.name for vm in (a, b)}
    icmp = {"a": 0, "b": 0}
    for fr, _ in pcap_check.frames(path):
        # IPv4 ICMP echo request (8) or reply (0) from a or b
        if len(fr) > 34 and fr[12:14] == b"\x08\x00" and fr[23] == 1 and \
                fr[34] in (0, 8) and fr[6:12] in macs:
            icmp[macs[fr[6:12]]] += 1
    check(stage, "capture: the pings both ways", min(icmp.values()) >= 3,
          "ICMP echo frames by sender %s" % icmp)
    res = subprocess.run([sys.executable, os.path.join(HERE, "pcap_check.py"),
                          path], capture_output=True, text=True, timeout=120)
    for line in (res.stdout + res.stderr).splitlines():
        print("  | " + line)
    stage.tap("capture", res.stdout, res.returncode)


def link(stage, a, b):
    """set_link of the wire, to vrnic-device's control channel."""
    got = gt.port_event_after(
        a, lambda: a.qmp("set_link", name="wire", up=False), 30)
    check(stage, "link down (control channel): PORT_ERR, port DOWN",
          got == "PORT_ERR DOWN", got)
    got = gt.port_event_after(
        a, lambda: a.qmp("set_link", name="wire", up=True), 30)
    check(stage, "link up (control channel): PORT_ACTIVE, port ACTIVE",
          got == "PORT_ACTIVE ACTIVE", got)
    rc, out = a.run("ping -c 3 -W 5 %s" % b.ip, timeout=60)
    check(stage, "ping a->b after the link came back", rc == 0, out[-400:])
    # vm.py starts vrnic-device with --trace vrnic_link: the trace point
    # logged both changes, down then up.
    with open(a.path("device.log"), errors="replace") as f:
        links = [ln.split()[2] for ln in f if ln.startswith(
            "vrnic-device: vrnic_link ")]
    check(stage, "--trace vrnic_link: the device logged the link down "
          "and up", links[-2:] == ["0x0", "0x1"], repr(links))


def ids(vm):
    """The VM's vrnic-device's real, effective, saved and file-system
    uids and gids, and its supplementary groups, from /proc."""
    out = {}
    with open("/proc/%d/status" % vm.devproc.pid) as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("Uid", "Gid", "Groups"):
                out[key] = [int(x) for x in val.split()]
    return out


def run(stage, a, b):
    t0 = time.time()
    import pwd
    pw = pwd.getpwnam("nobody")
    want = {"Uid": [pw.pw_uid] * 4, "Gid": [pw.pw_gid] * 4, "Groups": []}
    got = {vm.name: ids(vm) for vm in (a, b)}
    check(stage, "sandbox: vrnic-device runs as nobody once QEMU is "
          "connected (--user): uids, gids, no supplementary group",
          all(g == want for g in got.values()),
          "got %r, want %r" % (got, want))
    capture(stage, a, b)
    link(stage, a, b)
    print("capture and link through the control channel: %.0f s"
          % (time.time() - t0), flush=True)

    b.run("ib_write_bw -d vrnic0 -x 1 -s 65536 -n 300 >/tmp/bw.log 2>&1 &")
    time.sleep(2)
    rc, out = a.run("timeout 60 ib_write_bw -d vrnic0 -x 1 -s 65536 -n 300 %s"
                    % b.ip, timeout=90)
    m = re.search(r"^\s*65536\s+300\s+([\d.]+)\s+([\d.]+)", out, re.M)
    check(stage, "ib_write_bw 64 KiB a->b", rc == 0 and m is not None,
          out[-600:])
    b.run("pkill ib_write_bw")

    ok = True
    detail = ""
    for i in range(2):
        b.run("ibv_rc_pingpong -d vrnic0 -g 1 -c -s 1 -n 200 -e "
              ">/tmp/pp.log 2>&1 &")
        time.sleep(2)
        rc, out = a.run("timeout 40 ibv_rc_pingpong -d vrnic0 -g 1 -c -s 1 "
                        "-n 200 -e %s" % b.ip, timeout=60)
        b.run("sleep 1; pkill ibv_rc_pingpong")
        if rc != 0 or "200 iters" not in out:
            ok = False
            detail = "run %d: exit %d\n%s" % (i + 1, rc, out[-400:])
            break
    check(stage, "ibv_rc_pingpong -e: events for every completion", ok,
          detail)

    # The device makes a system call its sandbox forbids (SIGUSR1 with
    # --x-fault-syscall): the kernel kills it.
    a.check("dmesg -C")
    a.devproc.send_signal(signal.SIGUSR1)
    try:
        rc = a.devproc.wait(10)
    except subprocess.TimeoutExpired:
        rc = None
    check(stage, "sandbox: a forbidden system call kills vrnic-device",
          rc == -signal.SIGSYS, "exit status %r" % rc)
    if rc is None:
        a.devproc.kill()
    deadline = time.time() + 30
    seen = ""
    while time.time() < deadline:
        rc, seen = a.run("dmesg | grep -m1 'device not responding' || true",
                         timeout=30)
        if "device fatal" in seen:
            break
        time.sleep(1)
    check(stage, "device gone: the guest makes the function dead",
          "device not responding: device fatal" in seen,
          a.run("dmesg | tail -20")[1])
    alive = a.proc.poll() is None
    status = a.qmp("query-status") if alive else {}
    check(stage, "device gone: QEMU stays up",
          alive and status.get("status") == "running", repr(status))
    rc, out = a.run("ip link show eth0; dmesg", timeout=30)
    check(stage, "device gone: carrier off, no kernel warning",
          rc == 0 and "NO-CARRIER" in out and not re.search(BAD, out),
          out[-1500:])


def main():
    stage = Stage("vfio-user")
    for path in (vmlib.QEMU, vmlib.VRNIC_DEVICE):
        if not os.path.exists(path):
            stage.record("boot", "fail", "missing %s (make device "
                         "qemu)" % path)
            return 1
    # Both devices drop to nobody once QEMU has connected; b's wire
    # connects to the socket a's device gave that user.
    vmlib.DEVICE_USER = "nobody"
    try:
        a, b = vmlib.boot_pair()
    except vmlib.VMError as e:
        stage.record("boot", "fail", str(e))
        return 1
    try:
        run(stage, a, b)
    finally:
        a.kill()
        b.kill()
    return 1 if stage.failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Guest and system tests: two VMs with vrnic on one virtual Ethernet.

The VMs boot once for the whole group.  Every guest test is a kselftest
program (TAP); each TAP result becomes one result in
build/results/guest.jsonl.  Every command has a bounded wait and both QEMU
processes are killed by PID at the end (scripts/vm.py).
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "scripts"))
import vm as vmlib  # noqa: E402
from results import Stage  # noqa: E402

T = "/opt/vrnic/tests/"


def tap(stage, vm, name, command, timeout=120):
    print("---- [%s] %s" % (vm.name, command), flush=True)
    try:
        rc, out = vm.run(command, timeout=timeout)
    except vmlib.VMError as e:
        stage.record(name, "fail", str(e))
        return
    for line in out.rstrip().splitlines():
        print("  | " + line)
    stage.tap(name, out, rc)


def set_mtu(stage, vms, mtu):
    for vm in vms:
        rc, out = vm.run("vrnic-up %d" % mtu, timeout=60)
        if rc:
            stage.record("%s: set MTU %d" % (vm.name, mtu), "fail", out)
            return False
    return True


def port_events(stage, a):
    name = "a: port events"
    a.check("rm -f /tmp/port_event.ready /tmp/pe.tap /tmp/pe.rc; "
            "(%svrnic_port_event_test > /tmp/pe.tap 2>&1; "
            "echo $? > /tmp/pe.rc) >/dev/null 2>&1 &" % T)
    deadline = time.time() + 60
    while a.run("test -e /tmp/port_event.ready")[0] != 0:
        if time.time() > deadline:
            stage.record(name, "fail", "test did not start listening")
            return
        time.sleep(0.5)
    a.qmp("set_link", name="wire", up=False)
    deadline = time.time() + 60
    while "DOWN" not in a.run("rdma link show vrnic0/1")[1]:
        if time.time() > deadline:
            break
        time.sleep(0.5)
    a.qmp("set_link", name="wire", up=True)
    rc, _ = a.run("for i in $(seq 240); do [ -e /tmp/pe.rc ] && exit 0; "
                  "sleep 0.5; done; exit 1", timeout=150)
    out = a.run("cat /tmp/pe.tap")[1]
    for line in out.rstrip().splitlines():
        print("  | " + line)
    status = int(a.run("cat /tmp/pe.rc")[1].strip() or 1) if rc == 0 else 1
    stage.tap(name, out, status)


def main():
    stage = Stage("guest")
    t0 = time.time()
    try:
        a, b = vmlib.boot_pair()
    except vmlib.VMError as e:
        stage.record("boot two VMs", "fail", str(e))
        return 1
    stage.record("boot two VMs", "pass")
    print("booted in %.1f s" % (time.time() - t0), flush=True)
    try:
        for vm in (a, b):
            tap(stage, vm, "%s: probe" % vm.name,
                "%svrnic_probe_test %s" % (T, vm.ip))
        for mtu in (1500, 9000):
            if set_mtu(stage, (a, b), mtu):
                tap(stage, a, "ping a->b MTU %d" % mtu,
                    "%svrnic_ping_test %s %d 1000" % (T, b.ip, mtu),
                    timeout=300)
        set_mtu(stage, (a, b), 1500)
        port_events(stage, a)
        tap(stage, b, "b: module reload", "%svrnic_modload_test 20" % T,
            timeout=600)
        if set_mtu(stage, (b,), 1500):
            tap(stage, a, "ping a->b after reload",
                "%svrnic_ping_test %s 1500 100" % (T, b.ip), timeout=120)
    except vmlib.VMError as e:
        stage.record("harness", "fail", str(e))
    finally:
        a.kill()
        b.kill()
    print("guest tests: %.0f s" % (time.time() - t0))
    return 1 if stage.failed else 0


if __name__ == "__main__":
    sys.exit(main())

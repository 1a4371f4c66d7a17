"""RoCE over an 802.1Q VLAN (spec 0.7, issue 14), on the guest pair of
guest_tests.py: both VMs get <vrnic netdev>.10 with an address in
10.10.10.0/24; ib_core adds the VLAN's RoCE GID to the device's table (the
driver programs it with the VLAN ID), rping and perftest run over it, and
a capture of a's wire shows every RoCE frame of the VLAN subnet tagged
with VID 10 and with a correct ICRC.  The VLAN devices are removed at the
end, and their GIDs must leave the table, so later tests see the table
they had."""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import guest_tests as gt  # noqa: E402
import pcap_check  # noqa: E402
import vm as vmlib  # noqa: E402

VID = 10
SUBNET = "10.10.10"
PORT = "/sys/class/infiniband/vrnic0/ports/1"


def vlan_ip(vm):
    return "%s.%s" % (SUBNET, vm.ip.rsplit(".", 1)[1])


def _gid_hex(ip):
    """The sysfs form of the IPv4-mapped GID of ip."""
    a, b, c, d = (int(x) for x in ip.split("."))
    return "0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x" % (a, b, c, d)


def _find_gid(ip):
    """A shell snippet printing the index of the RoCE v2 GID of ip on the
    VLAN netdev ($dev.VID), waiting up to 10 s for ib_core to add it."""
    return ("for _ in $(seq 100); do for f in %s/gids/*; do i=${f##*/}; "
            "[ \"$(cat $f)\" = %s ] || continue; "
            "[ \"$(cat %s/gid_attrs/ndevs/$i 2>/dev/null)\" = $dev.%d ] || continue; "
            "[ \"$(cat %s/gid_attrs/types/$i 2>/dev/null)\" = 'RoCE v2' ] || continue; "
            "echo \"vlan gid index $i\"; exit 0; done; sleep 0.1; done; "
            "echo 'no RoCE v2 GID for the VLAN address'; exit 1"
            % (PORT, _gid_hex(ip), PORT, VID, PORT))


def _setup(stage, vm):
    """Create the VLAN device; return its GID index or None."""
    cmd = ("modprobe 8021q && dev=$(vrnic-netdev) && "
           "ip link add link $dev name $dev.%d type vlan id %d && "
           "ip addr add %s/24 dev $dev.%d && ip link set $dev.%d up && %s"
           % (VID, VID, vlan_ip(vm), VID, VID, _find_gid(vlan_ip(vm))))
    if not gt.step(stage, vm, "vlan %s: <vrnic>.%d up, its RoCE v2 GID in "
                   "vrnic0's table" % (vm.name, VID), cmd,
                   expect="vlan gid index", timeout=60):
        return None
    out = vm.run("dev=$(vrnic-netdev); " + _find_gid(vlan_ip(vm)))[1]
    return int(out.split("vlan gid index")[1].split()[0])


def _teardown(stage, vm):
    gt.step(stage, vm, "vlan %s: VLAN device removed, its GIDs leave the "
            "table" % vm.name,
            "dev=$(vrnic-netdev); ip link del $dev.%d; "
            "for _ in $(seq 100); do grep -qx \"$dev.%d\" "
            "%s/gid_attrs/ndevs/* 2>/dev/null || exit 0; sleep 0.1; done; "
            "echo 'a GID of the VLAN device is still in the table'; exit 1"
            % (VID, VID, PORT), timeout=60)


def _judge_capture(stage, path, a, b):
    """Every RoCE frame between the VLAN addresses is tagged VID 10, none
    goes untagged, and every tagged frame's ICRC is right."""
    vlan_ips = {bytes(int(x) for x in vlan_ip(vm).split("."))
                for vm in (a, b)}
    macs = {bytes.fromhex(vm.mac.replace(":", "")): vm.name for vm in (a, b)}
    tagged = {"a": 0, "b": 0}
    untagged = bad_vid = bad_icrc = 0
    for fr, orig in pcap_check.frames(path):
        if len(fr) != orig or len(fr) < 18 + 20 + 8 + 12 + 4:
            continue
        etype = struct.unpack_from(">H", fr, 12)[0]
        if etype == 0x8100:
            vid = struct.unpack_from(">H", fr, 14)[0] & 0xfff
            inner = fr[:12] + fr[16:]	# the same frame untagged
            info = pcap_check.roce(inner)
            if not info:
                continue
            if vid != VID:
                bad_vid += 1
            tagged[macs.get(fr[6:12], "?")] = \
                tagged.get(macs.get(fr[6:12], "?"), 0) + 1
            l3, ipv6 = info[0] + 4, info[1]
            if pcap_check.icrc(fr, l3, ipv6) != \
                    struct.unpack_from("<I", fr, len(fr) - 4)[0]:
                bad_icrc += 1
        elif pcap_check.roce(fr) and not pcap_check.roce(fr)[1]:
            if fr[14 + 12:14 + 16] in vlan_ips or fr[14 + 16:14 + 20] in vlan_ips:
                untagged += 1
    ok = tagged["a"] > 0 and tagged["b"] > 0 and not (untagged or bad_vid or
                                                     bad_icrc)
    detail = ("tagged RoCE frames a %d, b %d; untagged on the VLAN subnet %d, "
              "other VID %d, bad ICRC %d" % (tagged["a"], tagged["b"],
                                             untagged, bad_vid, bad_icrc))
    print("  | " + detail, flush=True)
    stage.record("vlan: RoCE frames on a's wire carry VID %d, ICRC right"
                 % VID, "pass" if ok else "fail", detail)


def run(stage, a, b):
    idx = {}
    try:
        for vm in (a, b):
            idx[vm.name] = _setup(stage, vm)
        if None in idx.values():
            return
        gt.step(stage, a, "vlan a: ping b over the VLAN (8021q tags in "
                "software, the device passes tagged frames up)",
                "ping -c 3 -W 5 %s" % vlan_ip(b), expect=" 0% packet loss")
        path = os.path.join(vmlib.VM_DIR, "capture-vlan.pcap")
        if os.path.exists(path):
            os.unlink(path)
        try:
            a.qmp("object-add", **{"qom-type": "filter-dump",
                                   "id": "capture-vlan", "netdev": "wire",
                                   "file": path})
        except vmlib.VMError as e:
            stage.record("vlan: filter-dump on a's wire", "fail", str(e))
            path = None
        ip = vlan_ip(b)
        gt.pair(stage, "vlan a->b: rping -C 3 -V over the VLAN address", b, a,
                "rping -s -a %s -C 3 -V" % ip,
                "rping -c -a %s -C 3 -V -v" % ip, "rdma-ping-2")
        gt.pair(stage, "vlan a->b: ib_send_lat -R over the VLAN address",
                b, a, "ib_send_lat -d vrnic0 -R -n 100 -s 2",
                "ib_send_lat -d vrnic0 -R -n 100 -s 2 %s" % ip, "#bytes")
        bw = "ib_write_bw -d vrnic0 -n 50 -s 4096 -x %d"
        gt.pair(stage, "vlan a->b: ib_write_bw -x <VLAN GID index>", b, a,
                bw % idx["b"], "%s %s" % (bw % idx["a"], ip), "#bytes")
        if path:
            try:
                a.qmp("object-del", id="capture-vlan")
                _judge_capture(stage, path, a, b)
            except vmlib.VMError as e:
                stage.record("vlan: filter-dump removed", "fail", str(e))
        for vm in (a, b):
            gt.counters(stage, vm, "vlan %s: no RoCE frame dropped for its "
                        "VLAN" % vm.name, ["vlan_drops"],
                        lambda c: c["vlan_drops"] == 0)
    finally:
        for vm in (a, b):
            _teardown(stage, vm)

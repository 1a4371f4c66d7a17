#!/usr/bin/python3
"""Write the seed corpus of fuzz_fabric to tests/fuzz/corpus/fabric/.

Each seed is what fuzz_fabric.cpp reads: a mode byte, then either a
topology file (mode % 8 == 0) or chunks [port][len lo][len hi][stream bytes]
in QEMU's stream framing.  Run it again after changing the format."""

import os
import struct

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(TOP, "tests/fuzz/corpus/fabric")


def mac(i):
    return bytes([0x52, 0x54, 0, 0, 0, i])


def csum(h):
    s = sum(struct.unpack(">10H", h))
    while s >> 16:
        s = (s & 0xffff) + (s >> 16)
    return (~s) & 0xffff


def roce(src, dst, qpn, psn, dscp=26, ecn=2, sport=49152, n=120, vlan=None):
    bth = bytes([0x0a, 0, 0xff, 0xff, 0]) + qpn.to_bytes(3, "big") + \
        b"\0" + psn.to_bytes(3, "big")
    payload = bth + bytes(range(n % 200)) + b"\0\0\0\0"
    udp = struct.pack(">HHHH", sport, 4791, 8 + len(payload), 0) + payload
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, dscp << 2 | ecn, 20 + len(udp), 0,
                     0x4000, 64, 17, 0, bytes([10, 0, 0, src]),
                     bytes([10, 0, 0, dst]))
    ip = ip[:10] + struct.pack(">H", csum(ip)) + ip[12:]
    l2 = mac(dst) + mac(src)
    if vlan is not None:
        l2 += struct.pack(">HH", 0x8100, vlan << 13)
    return l2 + b"\x08\x00" + ip + udp


def pfc(src, prio, quanta):
    times = [0] * 8
    times[prio] = quanta
    return (bytes([1, 0x80, 0xc2, 0, 0, 1]) + mac(src) + b"\x88\x08" +
            struct.pack(">HH8H", 0x0101, 1 << prio, *times)).ljust(60, b"\0")


def framed(*frames):
    return b"".join(struct.pack(">I", len(f)) + f for f in frames)


def chunk(port, data):
    return bytes([port]) + struct.pack("<H", len(data)) + data


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {
        "learn-and-send": bytes([1]) + chunk(2, framed(roce(3, 1, 9, 0))) +
        chunk(0, framed(*[roce(1, 3, 17, p) for p in range(6)])),
        "incast-pfc": bytes([3]) + chunk(2, framed(roce(3, 1, 9, 0))) +
        chunk(0, framed(*[roce(1, 3, 17, p, dscp=24, n=1000) for p in range(8)])) +
        chunk(1, framed(*[roce(2, 3, 18, p, dscp=24, n=1000) for p in range(8)])) +
        chunk(2, framed(pfc(3, 3, 0xffff))),
        "vlan-pcp": bytes([5]) + chunk(3, framed(roce(4, 1, 5, 5, vlan=3))) +
        chunk(0, framed(roce(1, 4, 5, 6, vlan=4, sport=50000))),
        "broadcast": bytes([2]) + chunk(1, framed(
            b"\xff" * 6 + mac(2) + b"\x08\x06" + bytes(28))),
        "bad-lengths": bytes([7]) + chunk(0, struct.pack(">I", 0) +
                                          struct.pack(">I", 70000) + b"\1" * 64),
        "topology": bytes([0]) + open(os.path.join(
            TOP, "fabric/topologies/leaf-spine.json"), "rb").read(),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print("%d seeds in %s" % (len(seeds), OUT))


if __name__ == "__main__":
    main()

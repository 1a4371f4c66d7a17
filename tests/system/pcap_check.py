#!/usr/bin/python3
"""Check a pcap of the vrnic wire the way an outsider would: tshark decodes
it, and the ICRC of every RoCEv2 frame is recomputed here, independently of
the device, with zlib's CRC-32 over the masked fields (IBA annex A17, as
Linux rxe computes it).

Usage: pcap_check.py FILE   (prints one 'ok'/'not ok' line per check, TAP)
"""

import struct
import subprocess
import sys
import zlib

ROCE_PORT = 4791
ACK = 0x11
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0a


def frames(path):
    """The frames of a classic pcap file (what QEMU's filter-dump writes)."""
    with open(path, "rb") as f:
        data = f.read()
    magic = struct.unpack_from("<I", data, 0)[0]
    endian = "<" if magic in (0xa1b2c3d4, 0xa1b23c4d) else ">"
    off = 24
    while off + 16 <= len(data):
        _, _, incl, orig = struct.unpack_from(endian + "IIII", data, off)
        off += 16
        yield data[off:off + incl], orig
        off += incl


def roce(frame):
    """(l3 offset, ipv6, opcode) of a RoCEv2 frame, or None."""
    if len(frame) < 14:
        return None
    etype = struct.unpack_from(">H", frame, 12)[0]
    if etype == 0x0800:
        l3, ipv6 = 14, False
        ihl = (frame[14] & 0xf) * 4
        if frame[14 + 9] != 17:
            return None
        l4 = l3 + ihl
    elif etype == 0x86dd:
        l3, ipv6 = 14, True
        if frame[14 + 6] != 17:
            return None
        l4 = l3 + 40
    else:
        return None
    if struct.unpack_from(">H", frame, l4 + 2)[0] != ROCE_PORT:
        return None
    return l3, ipv6, frame[l4 + 8]


def icrc(frame, l3, ipv6):
    """The ICRC: CRC-32 of 8 bytes of 0xff, then the IP header, UDP header
    and BTH with the variant fields set to ones, then the rest of the
    packet up to the ICRC."""
    lrh = 40 if ipv6 else 20
    masked = bytearray(frame[l3:l3 + lrh + 8 + 12])
    if ipv6:
        masked[0] |= 0x0f                    # traffic class, low nibble
        masked[1:4] = b"\xff\xff\xff"        # ... and the flow label
        masked[7] = 0xff                     # hop limit
    else:
        masked[1] = 0xff                     # TOS
        masked[8] = 0xff                     # TTL
        masked[10:12] = b"\xff\xff"          # header checksum
    masked[lrh + 6:lrh + 8] = b"\xff\xff"    # UDP checksum
    masked[lrh + 8 + 4] = 0xff               # BTH: FECN, BECN, reserved
    crc = zlib.crc32(b"\xff" * 8)
    crc = zlib.crc32(bytes(masked), crc)
    crc = zlib.crc32(frame[l3 + lrh + 8 + 12:-4], crc)
    return crc & 0xffffffff


def main(path):
    results = []
    roce_frames = [(i + 1, fr) for i, (fr, orig) in enumerate(frames(path))
                   if len(fr) == orig and roce(fr)]
    # 1. tshark decodes every UDP/4791 frame as RoCE (InfiniBand), none
    #    malformed.
    out = subprocess.run(
        ["tshark", "-r", path, "-Y", "udp.dstport == %d" % ROCE_PORT, "-T",
         "fields", "-e", "frame.number", "-e", "infiniband.bth.opcode",
         "-e", "_ws.malformed"], capture_output=True, text=True, check=True)
    rows = [ln.split("\t") for ln in out.stdout.splitlines() if ln]
    undecoded = [r[0] for r in rows if len(r) < 2 or not r[1]]
    malformed = [r[0] for r in rows if len(r) > 2 and r[2]]
    results.append((rows and not undecoded and not malformed and
                    len(rows) == len(roce_frames),
                    "tshark decodes all %d UDP/4791 frames as RoCE, %d "
                    "malformed, %d undecoded" % (len(rows), len(malformed),
                                                 len(undecoded))))
    # 2. The opcode sequence of the known workload (4 KiB WRITEs at path
    #    MTU 1024): FIRST, MIDDLE, MIDDLE, LAST, then an ACK for them.
    ops = [roce(fr)[2] for _, fr in roce_frames]
    seq = [WRITE_FIRST, WRITE_MIDDLE, WRITE_MIDDLE, WRITE_LAST]
    writes = sum(1 for i in range(len(ops) - 3) if ops[i:i + 4] == seq)
    acked = any(op == ACK for op in ops[ops.index(WRITE_LAST):]) \
        if WRITE_LAST in ops else False
    results.append((writes >= 5 and acked,
                    "4 KiB WRITEs go out as FIRST/MIDDLE/MIDDLE/LAST (%d "
                    "times) and are ACKed" % writes))
    # 3. Every ICRC, recomputed here.
    bad = [n for n, fr in roce_frames
           if icrc(fr, *roce(fr)[:2]) != struct.unpack_from("<I", fr,
                                                              len(fr) - 4)[0]]
    results.append((roce_frames and not bad,
                    "ICRC of %d RoCE frames recomputed with zlib: %d wrong%s"
                    % (len(roce_frames), len(bad),
                       " (frames %s)" % bad[:5] if bad else "")))
    print("1..%d" % len(results))
    for i, (ok, what) in enumerate(results, 1):
        print("%s %d - %s" % ("ok" if ok else "not ok", i, what))
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

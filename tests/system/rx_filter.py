#!/usr/bin/python3
"""Runs in a guest: raw Ethernet frames for the receive filter tests.

  rx_filter.py send DEV DST_MAC COUNT   send COUNT frames (EtherType 0x88b5)
  rx_filter.py recv DEV SECONDS         count 0x88b5 frames DEV delivers

A packet socket sees every frame the NIC hands to the stack, also those
for another host (PACKET_OTHERHOST), so the count is what the device's
filter let through.
"""

import socket
import sys
import time

ETH_P = 0x88b5  # IEEE local experimental
TAG = b"vrnic-rx-filter"


def main():
    mode, dev = sys.argv[1], sys.argv[2]
    if mode == "send":
        dst = bytes.fromhex(sys.argv[3].replace(":", ""))
        with open("/sys/class/net/%s/address" % dev) as f:
            src = bytes.fromhex(f.read().strip().replace(":", ""))
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        s.bind((dev, 0))
        frame = dst + src + ETH_P.to_bytes(2, "big") + TAG.ljust(46, b"\0")
        for _ in range(int(sys.argv[4])):
            s.send(frame)
            time.sleep(0.01)
        print("sent %s" % sys.argv[4])
        return 0
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P))
    s.bind((dev, 0))
    print("ready", flush=True)
    end = time.time() + float(sys.argv[3])
    n = 0
    while time.time() < end:
        s.settimeout(max(0.01, end - time.time()))
        try:
            data = s.recv(2048)
        except socket.timeout:
            break
        if TAG in data:
            n += 1
    print("count %d" % n, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

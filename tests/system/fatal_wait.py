#!/usr/bin/python3
"""Runs in a guest (tests/system/faults.py): opens vrnic0 and a PD, writes
/tmp/fatal_wait.ready, then waits for the device's async events and prints
the first one.  pyverbs' get_async_event() blocks: the caller bounds the
wait (timeout)."""

import sys

import pyverbs.enums as e
from pyverbs.device import Context
from pyverbs.pd import PD

ctx = Context(name=sys.argv[1] if len(sys.argv) > 1 else "vrnic0")
pd = PD(ctx)
open("/tmp/fatal_wait.ready", "w").close()
ev = ctx.get_async_event()
kind = ev.event_type
ev.ack()
if kind != e.IBV_EVENT_DEVICE_FATAL:
    print("not ok: async event %d, expected DEVICE_FATAL" % kind)
    sys.exit(1)
print("ok: IBV_EVENT_DEVICE_FATAL")

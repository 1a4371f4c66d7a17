#!/usr/bin/python3
"""Runs in a guest (tests/system/guest_tests.py): opens vrnic0, writes
/tmp/port_wait.ready, then prints the first async event it gets and the
port state right after it ("PORT_ERR DOWN"), or the first N (argv[1]),
one per line.  pyverbs' get_async_event()
blocks: the caller bounds the wait (timeout), and a wait that times out
means no event came."""

import pyverbs.enums as e
from pyverbs.device import Context

NAMES = {e.IBV_EVENT_PORT_ERR: "PORT_ERR",
         e.IBV_EVENT_PORT_ACTIVE: "PORT_ACTIVE",
         e.IBV_EVENT_DEVICE_FATAL: "DEVICE_FATAL"}
STATES = {e.IBV_PORT_DOWN: "DOWN", e.IBV_PORT_ACTIVE: "ACTIVE"}

import sys

ctx = Context(name="vrnic0")
open("/tmp/port_wait.ready", "w").close()
# argv[1]: how many events to print, one line each (default 1).
for _ in range(int(sys.argv[1]) if sys.argv[1:] else 1):
    ev = ctx.get_async_event()
    kind = ev.event_type
    ev.ack()
    state = ctx.query_port(1).state
    print("%s %s" % (NAMES.get(kind, "event %d" % kind),
                     STATES.get(state, "state %d" % state)), flush=True)

"""Test results shared by the check stages (lint, unit, guest).

Each stage appends one JSON object per test to build/results/<stage>.jsonl:
{"name": ..., "status": "pass"|"fail"|"skip", "detail": ...} and prints a
line as it goes.  scripts/check.py prints the summary of all stages.
"""

import json
import os
import re
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(TOP, "build", "results")


def jobs():
    """How many processes a stage runs at once: VRNIC_JOBS, or the CPUs
    this process may use (a container's CPU quota is not seen: set
    VRNIC_JOBS there)."""
    try:
        n = int(os.environ.get("VRNIC_JOBS", "0"))
    except ValueError:
        n = 0
    return n if n > 0 else max(1, len(os.sched_getaffinity(0)))
TAP_LINE = re.compile(r"^(not )?ok (\d+)\s*-?\s*(.*?)(?:\s+#\s*(SKIP|XFAIL)\s*(.*))?$")


class Stage:
    def __init__(self, stage, fresh=True):
        os.makedirs(RESULTS, exist_ok=True)
        self.path = os.path.join(RESULTS, stage + ".jsonl")
        self.stage = stage
        if fresh and os.path.exists(self.path):
            os.unlink(self.path)
        self.failed = 0
        self.last = time.monotonic()

    def record(self, name, status, detail=""):
        assert status in ("pass", "fail", "skip")
        with open(self.path, "a") as f:
            f.write(json.dumps({"name": name, "status": status,
                                "detail": detail}) + "\n")
        if status == "fail":
            self.failed += 1
        word = {"pass": "PASS", "fail": "FAIL", "skip": "SKIP"}[status]
        # The time since the previous result, where it is long enough to
        # matter for make check's budget.
        now = time.monotonic()
        took = " [%.0f s]" % (now - self.last) if now - self.last >= 10 else ""
        self.last = now
        print("%s %s/%s%s%s" % (word, self.stage, name,
                                (": " + detail) if detail and status != "pass"
                                else "", took), flush=True)

    def tap(self, prefix, output, status):
        """Record every TAP result line in output; a missing plan entry or
        a failing exit status with no failing line counts as a failure."""
        planned = None
        seen = 0
        failed = 0
        for line in output.splitlines():
            line = line.strip()
            m = re.match(r"^1\.\.(\d+)$", line)
            if m:
                planned = int(m.group(1))
                continue
            m = TAP_LINE.match(line)
            if not m:
                continue
            seen += 1
            name = "%s: %s" % (prefix, m.group(3).strip())
            if m.group(4) == "SKIP":
                self.record(name, "skip", m.group(5) or "skipped")
            elif m.group(1):
                failed += 1
                self.record(name, "fail", "see the TAP output above")
            else:
                self.record(name, "pass")
        if planned is not None and seen < planned:
            self.record("%s: plan" % prefix, "fail",
                        "%d of %d planned results missing" % (planned - seen,
                                                              planned))
        elif seen == 0:
            self.record(prefix, "fail", "no TAP results (exit %s)" % status)
        elif status != 0 and failed == 0:
            self.record("%s: exit status" % prefix, "fail",
                        "exited %s with no failing result" % status)


def load_all():
    out = []
    if not os.path.isdir(RESULTS):
        return out
    for leaf in sorted(os.listdir(RESULTS)):
        if leaf.endswith(".jsonl"):
            with open(os.path.join(RESULTS, leaf)) as f:
                for line in f:
                    r = json.loads(line)
                    r["stage"] = leaf[:-6]
                    out.append(r)
    return out


def exited(stage, rc, what):
    """check.sh, after each stage script: a script that exited non-zero
    with no failure recorded (a traceback, a kill) is one failure, so
    that it cannot pass as the results it wrote before it died."""
    if rc == 0:
        return
    path = os.path.join(RESULTS, stage + ".jsonl")
    if os.path.exists(path):
        with open(path) as f:
            if any(json.loads(line)["status"] == "fail" for line in f):
                return
    Stage(stage, fresh=False).record(
        "%s exited %d" % (what, rc), "fail",
        "no failure recorded before it exited; see its output above")


if __name__ == "__main__":
    import sys
    if len(sys.argv) == 5 and sys.argv[1] == "exited":
        exited(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    else:
        sys.exit("usage: results.py exited STAGE STATUS WHAT")

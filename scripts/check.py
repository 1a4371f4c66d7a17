#!/usr/bin/python3
"""Print the results of every check stage and the closing summary line:
'N passed, N failed, N skipped'.  Exit status 1 when anything failed or
nothing ran at all."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import load_all  # noqa: E402


def main():
    results = load_all()
    counts = {"pass": 0, "fail": 0, "skip": 0}
    per_stage = {}
    for r in results:
        counts[r["status"]] += 1
        s = per_stage.setdefault(r["stage"], {"pass": 0, "fail": 0, "skip": 0})
        s[r["status"]] += 1
    print()
    print("== vrnic check summary")
    for stage, s in per_stage.items():
        print("   %-8s %3d passed, %3d failed, %3d skipped" % (
            stage, s["pass"], s["fail"], s["skip"]))
    for r in results:
        if r["status"] == "fail":
            print("   FAILED %s/%s: %s" % (r["stage"], r["name"], r["detail"]))
    for r in results:
        if r["status"] == "skip":
            print("   skipped %s/%s: %s" % (r["stage"], r["name"], r["detail"]))
    print("%d passed, %d failed, %d skipped" % (counts["pass"], counts["fail"],
                                               counts["skip"]))
    return 1 if counts["fail"] or not counts["pass"] else 0


if __name__ == "__main__":
    sys.exit(main())

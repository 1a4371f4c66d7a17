#!/usr/bin/python3
"""Host unit tests: build tests/unit with CMake and run them with ctest.
Each GoogleTest case is one result in build/results/unit.jsonl."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Stage, TOP  # noqa: E402


def main(stage_name="unit", host=None, cmake_extra=(), run_env=None,
         jobs=1):
    """Also used by scripts/fuzz.py unit-asan: the same suite built with
    sanitizers in its own build dir, recorded as its own stage."""
    stage = Stage(stage_name)
    host = host or os.path.join(TOP, "build/host")
    junit = os.path.join(TOP, "build/results/ctest-junit-%s.xml" % stage_name)
    for cmd in (["cmake", "-S", "tests/unit", "-B", host, "-G", "Ninja"] +
                list(cmake_extra),
                ["ninja", "-C", host]):
        p = subprocess.run(cmd, cwd=TOP, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode:
            print(p.stdout)
            stage.record("build", "fail", " ".join(cmd[:1]) + " failed")
            return 1
    p = subprocess.run(["ctest", "--test-dir", host, "--timeout", "120",
                        "--parallel", str(jobs),
                        "--output-on-failure", "--output-junit", junit],
                       cwd=TOP, env=run_env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")
    if not os.path.exists(junit):
        print(p.stdout)
        stage.record("ctest", "fail", "no junit output")
        return 1
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        if case.get("status") == "fail" or case.find("failure") is not None:
            stage.record(name, "fail", "see ctest output")
        elif case.get("status") in ("disabled", "notrun") or \
                case.find("skipped") is not None:
            stage.record(name, "skip", "disabled in GoogleTest")
        else:
            stage.record(name, "pass")
    if p.returncode and not stage.failed:
        print(p.stdout)
        stage.record("ctest", "fail", "ctest exited %d" % p.returncode)
    return 1 if stage.failed else 0


if __name__ == "__main__":
    sys.exit(main())

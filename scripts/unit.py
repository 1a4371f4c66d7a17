#!/usr/bin/python3
"""Host unit tests: build tests/unit (the engine) and fabric/ (vrnic-fabric)
with CMake and run them with ctest, then the Python tests in tests/host.
Each GoogleTest case and Python test is one result in
build/results/unit.jsonl."""

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Stage, TOP, jobs as ncpu  # noqa: E402


def main(stage_name="unit", host=None, cmake_extra=(), run_env=None,
         jobs=None):
    """Also used by scripts/fuzz.py unit-asan: the same suites built with
    sanitizers in their own build dirs, recorded as its own stage.
    Two suites: the engine's (tests/unit) and vrnic-fabric's (fabric/)."""
    stage = Stage(stage_name)
    jobs = jobs or ncpu()
    host = host or os.path.join(TOP, "build/host")
    fabric = host.replace("build/host", "build/fabric", 1)
    for src, bdir, tag in (("tests/unit", host, stage_name),
                           ("fabric", fabric, stage_name + "-fabric")):
        suite(stage, src, bdir, tag, cmake_extra, run_env, jobs)
    if stage_name == "unit":     # not again in fuzz.py's sanitizer stage
        python_tests(stage)
    return 1 if stage.failed else 0


def python_tests(stage):
    """tests/host/test_*.py (plain unittest, scripts/fabric_report.py):
    tests/host/run.py prints one "RESULT {json}" line per test."""
    try:
        p = subprocess.run([sys.executable, "tests/host/run.py"], cwd=TOP,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=600)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = e.stdout or "", e.stderr or "", "timeout"
        out = out.decode() if isinstance(out, bytes) else out
        err = err.decode() if isinstance(err, bytes) else err
    failed = stage.failed
    seen = 0
    for line in out.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            stage.record(r["name"], r["status"], r["detail"])
            seen += 1
    if rc != 0 or not seen:
        print(err)
    if (rc != 0 and stage.failed == failed) or not seen:
        stage.record("python tests/host", "fail", "exited %s" % rc)


def suite(stage, src, host, tag, cmake_extra, run_env, jobs):
    junit = os.path.join(TOP, "build/results/ctest-junit-%s.xml" % tag)
    for cmd in (["cmake", "-S", src, "-B", host, "-G", "Ninja"] +
                list(cmake_extra),
                ["ninja", "-C", host]):
        p = subprocess.run(cmd, cwd=TOP, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode:
            print(p.stdout)
            stage.record("build " + src, "fail", " ".join(cmd[:1]) + " failed")
            return
    p = subprocess.run(["ctest", "--test-dir", host, "--timeout", "120",
                        "--parallel", str(jobs),
                        "--output-on-failure", "--output-junit", junit],
                       cwd=TOP, env=run_env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    print(p.stdout.strip().splitlines()[-1] if p.stdout.strip() else "")
    if not os.path.exists(junit):
        print(p.stdout)
        stage.record("ctest " + src, "fail", "no junit output")
        return
    failed = stage.failed
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("name")
        if case.get("status") == "fail" or case.find("failure") is not None:
            stage.record(name, "fail", "see ctest output")
        elif case.get("status") in ("disabled", "notrun") or \
                case.find("skipped") is not None:
            stage.record(name, "skip", "disabled in GoogleTest")
        else:
            stage.record(name, "pass")
    if p.returncode and stage.failed == failed:
        print(p.stdout)
        stage.record("ctest " + src, "fail", "ctest exited %d" % p.returncode)


if __name__ == "__main__":
    sys.exit(main())

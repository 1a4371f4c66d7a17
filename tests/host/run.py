#!/usr/bin/python3
"""Run the host-side Python tests (tests/host/test_*.py, plain unittest).

The usual unittest output goes to stderr; stdout gets one line per test,
"RESULT " and a JSON object {"name", "status": pass|fail|skip, "detail"},
which scripts/unit.py records in build/results/unit.jsonl.  The exit
status is non-zero when a test failed or errored."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


class Result(unittest.TextTestResult):
    def emit(self, test, status, detail=""):
        sys.stdout.write("RESULT " + json.dumps(
            {"name": "python " + test.id(), "status": status,
             "detail": detail}) + "\n")
        sys.stdout.flush()

    def addSuccess(self, test):
        super().addSuccess(test)
        self.emit(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.emit(test, "fail", str(err[1]).splitlines()[0][:200]
                  if str(err[1]) else err[0].__name__)

    def addError(self, test, err):
        super().addError(test, err)
        self.emit(test, "fail", "%s: %s" % (err[0].__name__,
                                            str(err[1])[:200]))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.emit(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.emit(test, "pass", "expected failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.emit(test, "fail", "unexpected success")


def main():
    suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py",
                                                top_level_dir=HERE)
    runner = unittest.TextTestRunner(stream=sys.stderr, verbosity=1,
                                     resultclass=Result)
    res = runner.run(suite)
    return 0 if res.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())

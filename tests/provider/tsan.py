#!/usr/bin/python3
"""Build the rdma-core provider (userspace/verbs.c, vrnic.c) on the host
with ThreadSanitizer, against rdma-core 56.1's headers (build/rdma-core) and
the stubbed kernel, device and libibverbs of tests/provider/stub.c, and run
tests/provider/shared_cq.c: pollers, destroyers and posters on one shared
CQ (issue 15).

    tests/provider/tsan.py [--rounds N]     build and run; exit 1 on failure
    tests/provider/tsan.py --check          make check: record the results
                                            in the sanitizers stage
    tests/provider/tsan.py --commit REV     the provider (userspace/ and
                                            include/) as of commit REV, with
                                            today's test: has the test teeth?
    tests/provider/tsan.py --tree DIR       the provider of another work tree

Builds in build/provider-tsan/<tree>/.  Needs clang-14 and its TSan runtime
(libclang-rt-14-dev, scripts/host-deps.sh) and build/rdma-core (make
rdma-core) for the headers.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "../../scripts"))
from results import Stage, TOP  # noqa: E402

HERE = os.path.join(TOP, "tests/provider")
RDMA_INC = os.path.join(TOP, "build/rdma-core/include")
ABI_GEN = os.path.join(TOP, "build/src/rdma-core-56.1/buildlib/make_abi_structs.py")
CC = "clang-14"
CFLAGS = ["-fsanitize=thread", "-g", "-O1", "-std=gnu11", "-DVERBS_DEBUG",
          "-Wall", "-Wno-gnu-variable-sized-type-not-at-end"]
SYMBOLIZER = "/usr/lib/llvm-14/bin/llvm-symbolizer"
TIMEOUT = 120
NAME = "provider-tsan"


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


def tree(out, commit, top=TOP):
    """The provider and headers to test: top's, or commit's."""
    if not commit:
        return os.path.join(top, "userspace"), os.path.join(top, "include")
    src = os.path.join(out, "src")
    shutil.rmtree(src, ignore_errors=True)
    for d in ("userspace", "include"):
        os.makedirs(os.path.join(src, d))
        ls = run(["git", "-C", TOP, "ls-tree", "--name-only", commit, d + "/"])
        if ls.returncode:
            raise RuntimeError(ls.stdout.strip())
        for path in ls.stdout.split():
            if path.endswith((".c", ".h")):
                with open(os.path.join(src, path), "w") as f:
                    f.write(run(["git", "-C", TOP, "show",
                                 "%s:%s" % (commit, path)]).stdout)
    return os.path.join(src, "userspace"), os.path.join(src, "include")


def build(out, commit, top):
    """Build out/shared_cq; (True, "") or (False, why)."""
    userspace, include = tree(out, commit, top)
    inc = os.path.join(out, "inc")
    for d in ("rdma", "kernel-abi"):
        os.makedirs(os.path.join(inc, d), exist_ok=True)
    # The uAPI header of the tree under test, and rdma-core's wrapper of it
    # (as build-rdma-core.sh and rdma-core's kernel-headers build do).
    shutil.copy(os.path.join(include, "vrnic-abi.h"),
                os.path.join(inc, "rdma/vrnic-abi.h"))
    p = run([sys.executable, ABI_GEN, "rdma/vrnic-abi.h",
             "kernel-abi/vrnic-abi.h"], cwd=inc)
    if p.returncode:
        return False, "make_abi_structs.py: " + p.stdout.strip()[-300:]
    incs = ["-I" + inc, "-I" + include, "-I" + RDMA_INC]
    objs = []
    for src in (os.path.join(userspace, "verbs.c"),
                os.path.join(userspace, "vrnic.c"),
                os.path.join(HERE, "stub.c"), os.path.join(HERE, "shared_cq.c")):
        obj = os.path.join(out, os.path.basename(src)[:-2] + ".o")
        # Ours warning-free; an old provider may warn.
        werror = ["-Werror"] if src.startswith(HERE) else []
        p = run([CC] + CFLAGS + werror + incs + ["-c", src, "-o", obj])
        if p.stdout.strip():
            print(p.stdout.strip())
        if p.returncode:
            return False, "compiling %s failed" % os.path.relpath(src, TOP)
        objs.append(obj)
    p = run([CC, "-fsanitize=thread", "-o", os.path.join(out, "shared_cq")] +
            objs + ["-lpthread"])
    if p.returncode:
        print(p.stdout.strip())
        return False, "linking shared_cq failed"
    return True, ""


def execute(out, rounds):
    env = dict(os.environ)
    opts = "halt_on_error=1:exitcode=66:second_deadlock_stack=1"
    if os.path.exists(SYMBOLIZER):
        opts += ":external_symbolizer_path=" + SYMBOLIZER
    env["TSAN_OPTIONS"] = opts
    try:
        p = run([os.path.join(out, "shared_cq"), str(rounds)], env=env,
                timeout=TIMEOUT)
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode(errors="replace") \
            if isinstance(e.stdout, bytes) else (e.stdout or "")
    return p.returncode, p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--commit")
    ap.add_argument("--tree", default=TOP)
    ap.add_argument("--rounds", type=int, default=100)
    args = ap.parse_args()
    stage = Stage("sanitizers", fresh=False) if args.check else None

    def result(name, status, detail=""):
        if stage:
            stage.record(name, status, detail)
        else:
            print("%s %s%s" % (status.upper(), name,
                               ": " + detail if detail else ""))
        return 1 if status == "fail" else 0

    if not os.path.isdir(RDMA_INC) or not os.path.exists(ABI_GEN):
        return result(NAME, "skip", "no rdma-core headers in build/rdma-core "
                      "and build/src (make rdma-core did not run)")
    tree_dir = os.path.abspath(args.tree)
    tag = args.commit or ("head" if tree_dir == TOP else
                          os.path.basename(tree_dir))
    name = NAME + ("@" + tag if tag != "head" else "")
    out = os.path.join(TOP, "build/provider-tsan", tag.replace("/", "_"))
    os.makedirs(out, exist_ok=True)
    for old in glob.glob(os.path.join(out, "*.o")):
        os.unlink(old)
    ok, why = build(out, args.commit, tree_dir)
    if not ok:
        return result(name + ": build", "fail", why)
    status, output = execute(out, args.rounds)
    print(output.rstrip())
    if status is None:
        return result(name, "fail", "timed out after %d s" % TIMEOUT)
    if status == 66:
        summary = [line[len("SUMMARY: ThreadSanitizer: "):]
                   for line in output.splitlines()
                   if line.startswith("SUMMARY: ThreadSanitizer: ")]
        result(name + ": ThreadSanitizer", "fail",
               summary[0] if summary else "its report is above")
    if stage:
        stage.tap(name, output, status)
        return 1 if stage.failed else 0
    bad = status != 0 or "not ok" in output
    return result(name, "fail" if bad else "pass",
                  "exit status %d" % status if bad else "")


if __name__ == "__main__":
    sys.exit(main())

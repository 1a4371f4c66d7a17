#!/usr/bin/python3
"""Build the rdma-core provider (userspace/*.c) on the host
with ThreadSanitizer, against rdma-core 56.1's headers (build/rdma-core) and
the stubbed kernel, device and libibverbs of tests/provider/stub.c, and run
tests/provider/shared_cq.c: pollers, destroyers and posters on one shared
CQ (issue 15).  Then, built with AddressSanitizer and UBSan instead (it is
single-threaded: overruns of the rings and shifts by hostile answers are
what it can hit), tests/provider/geometry.c: the kernel's ring geometry
answers, honest, hostile and with comp_mask bits (issue 15); and
tests/provider/contract.c: errno, CQE status and opcode mapping, QP state
ownership, single-threaded CQs, context close (issue 23).

    tests/provider/tsan.py [--rounds N]     build and run; exit 1 on failure
    tests/provider/tsan.py --check          make check: record the results
                                            in the sanitizers stage
    tests/provider/tsan.py --commit REV     the provider (userspace/ and
                                            include/) as of commit REV, with
                                            today's test: has the test teeth?
    tests/provider/tsan.py --tree DIR       the provider of another work tree

Builds in build/provider-tsan/<tree>/{shared_cq,geometry,contract}.d/.
Needs clang-14 and its TSan, ASan and UBSan runtimes (libclang-rt-14-dev,
scripts/host-deps.sh) and build/rdma-core (make rdma-core) for the headers.
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
RDMA_UTIL = os.path.join(TOP, "build/rdma-core/util/librdma_util.a")
ABI_GEN = os.path.join(TOP, "build/src/rdma-core-56.1/buildlib/make_abi_structs.py")
CC = "clang-14"
CFLAGS = ["-g", "-O1", "-std=gnu11", "-DVERBS_DEBUG",
          "-Wall", "-Wno-gnu-variable-sized-type-not-at-end"]
SYMBOLIZER = "/usr/lib/llvm-14/bin/llvm-symbolizer"
TIMEOUT = 120
NAME = "provider-tsan"
# program: (result name, sanitizer flags, the sanitizer it names)
PROGRAMS = {
    "shared_cq": (NAME, ["-fsanitize=thread"], "ThreadSanitizer"),
    # No null and object-size checks: rdma-core's
    # verbs_init_and_alloc_context() takes a member's offset as
    # &((type *)NULL)->member; a real NULL access is an ASan SEGV report
    # anyway, and ASan checks object bounds.
    "geometry": ("provider-geometry",
                 ["-fsanitize=address,undefined",
                  "-fno-sanitize=null,object-size",
                  "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"],
                 "ASan+UBSan"),
    # The second review's provider findings (issue 23); single-threaded.
    "contract": ("provider-contract",
                 ["-fsanitize=address,undefined",
                  "-fno-sanitize=null,object-size",
                  "-fno-sanitize-recover=all", "-fno-omit-frame-pointer"],
                 "ASan+UBSan"),
}
# program: extra link flags (contract counts pthread_spin_lock() calls
# and fakes the page size)
LDFLAGS = {"contract": ["-Wl,--wrap=pthread_spin_lock", "-Wl,--wrap=sysconf"]}


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


def build(out, commit, top, prog):
    """Build out/prog/prog; (True, "") or (False, why)."""
    userspace, include = tree(out, commit, top)
    san = PROGRAMS[prog][1]
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
    bld = os.path.join(out, prog + ".d")
    os.makedirs(bld, exist_ok=True)
    for old in glob.glob(os.path.join(bld, "*.o")):
        os.unlink(old)
    provider = sorted(glob.glob(os.path.join(userspace, "*.c")))
    for src in provider + [os.path.join(HERE, "stub.c"),
                           os.path.join(HERE, prog + ".c")]:
        obj = os.path.join(bld, os.path.basename(src)[:-2] + ".o")
        # Ours warning-free; an old provider may warn.
        werror = ["-Werror"] if src.startswith(HERE) else []
        p = run([CC] + san + CFLAGS + werror + incs + ["-c", src, "-o", obj])
        if p.stdout.strip():
            print(p.stdout.strip())
        if p.returncode:
            return False, "compiling %s failed" % os.path.relpath(src, TOP)
        objs.append(obj)
    # rdma-core's util (bitmap_find_first_bit() and the like), as the
    # provider links it inside rdma-core.
    p = run([CC] + san + ["-o", os.path.join(bld, prog)] + objs +
            LDFLAGS.get(prog, []) + [RDMA_UTIL, "-lpthread"])
    if p.returncode:
        print(p.stdout.strip())
        return False, "linking %s failed" % prog
    return True, ""


def execute(out, prog, rounds):
    env = dict(os.environ)
    sym = (":external_symbolizer_path=" + SYMBOLIZER
           if os.path.exists(SYMBOLIZER) else "")
    # A sanitizer's report: exit status 66.
    env["TSAN_OPTIONS"] = ("halt_on_error=1:exitcode=66:"
                           "second_deadlock_stack=1" + sym)
    env["ASAN_OPTIONS"] = "exitcode=66:detect_leaks=0" + sym
    env["UBSAN_OPTIONS"] = "halt_on_error=1:exitcode=66:print_stacktrace=1" + sym
    args = [str(rounds)] if prog == "shared_cq" else []
    try:
        p = run([os.path.join(out, prog + ".d", prog)] + args, env=env,
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
    out = os.path.join(TOP, "build/provider-tsan", tag.replace("/", "_"))
    os.makedirs(out, exist_ok=True)
    failed = 0
    for prog, (prog_name, _, sanitizer) in PROGRAMS.items():
        name = prog_name + ("@" + tag if tag != "head" else "")
        ok, why = build(out, args.commit, tree_dir, prog)
        if not ok:
            failed += result(name + ": build", "fail", why)
            continue
        status, output = execute(out, prog, args.rounds)
        print(output.rstrip())
        if status is None:
            failed += result(name, "fail", "timed out after %d s" % TIMEOUT)
            continue
        if status == 66 or (status and "SUMMARY: " in output):
            summary = [line[line.index("SUMMARY: ") + 9:]
                       for line in output.splitlines() if "SUMMARY: " in line]
            failed += result(name + ": " + sanitizer, "fail",
                             summary[0] if summary else
                             "its report is above")
        if stage:
            stage.tap(name, output, status)
            continue
        bad = status != 0 or "not ok" in output
        failed += result(name, "fail" if bad else "pass",
                         "exit status %d" % status if bad else "")
    if stage:
        return 1 if stage.failed else 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""make fuzz: build the libFuzzer targets of tests/fuzz (clang, ASan+UBSan),
fuzz each for FUZZ_SECONDS, and report executions, exec/s, crashes and the
line coverage of engine/*.cpp reached by the corpus.

    scripts/fuzz.py [run]      build, fuzz every target (FUZZ_TARGETS to pick)
    scripts/fuzz.py merge      fold build/fuzz/corpus into tests/fuzz/corpus
    scripts/fuzz.py coverage   coverage of the corpora only
    scripts/fuzz.py check      make check's stage: replay the checked-in
                               corpora and regressions, fuzz each target for
                               FUZZ_CHECK_SECONDS; one result per line
    scripts/fuzz.py unit-asan  make check's sanitizer stage: the GoogleTest
                               suite built with ASan+UBSan (build/host-asan)

Crashes go to build/fuzz/crashes/<target>/ (the input and the sanitizer
report next to it); new inputs to build/fuzz/corpus/<target>/.
See Documentation/fuzzing.rst.
"""

import glob
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Stage, TOP, jobs  # noqa: E402

TARGETS = ["wire", "admin", "rings", "eth_regs", "stateful", "fabric",
           "vfio_user"]
SRC = os.path.join(TOP, "tests/fuzz")
OUT = os.path.join(TOP, "build/fuzz")
CLANG = {"CC": "clang-14", "CXX": "clang++-14"}
SAN_ENV = {
    "ASAN_OPTIONS": "halt_on_error=1:abort_on_error=1:detect_leaks=1:"
                    "allocator_may_return_null=1:symbolize=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}
MAX_LEN = "4096"


def env(extra=None):
    e = dict(os.environ)
    e.update(SAN_ENV)
    e.update(extra or {})
    return e


def build(mode):
    """Configure and build the targets; mode 'asan' or 'cov'."""
    bdir = os.path.join(OUT, mode)
    cmds = []
    if not os.path.exists(os.path.join(bdir, "build.ninja")):
        cmds.append(["cmake", "-S", SRC, "-B", bdir, "-G", "Ninja",
                     "-DVRNIC_FUZZ_MODE=" + ("coverage" if mode == "cov"
                                             else "fuzz")])
    cmds.append(["nice", "-n", "5", "ninja", "-C", bdir, "-j2"])
    for cmd in cmds:
        p = subprocess.run(cmd, cwd=TOP, env=env(CLANG), text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if p.returncode:
            print(p.stdout[-4000:])
            return None
    return bdir


def binary(bdir, t):
    return os.path.join(bdir, "fuzz_" + t)


def dict_args(t):
    d = os.path.join(SRC, t + ".dict")
    return ["-dict=" + d] if os.path.exists(d) else []


def seed_dirs(t):
    d = os.path.join(SRC, "corpus", t)
    return [d] if os.path.isdir(d) and os.listdir(d) else []


def regressions(t):
    d = os.path.join(SRC, "regressions", t)
    return sorted(glob.glob(os.path.join(d, "*"))) if os.path.isdir(d) else []


STACK = re.compile(r"^\s*#(\d+) 0x[0-9a-f]+ in (.+?) (/\S+:\d+)")


def crash_signature(log):
    """The first stack frame in project code of a sanitizer report."""
    kind = "crash"
    for line in log.splitlines():
        m = re.search(r"ERROR: (\w+Sanitizer|libFuzzer): ([\w-]+)", line) or \
            re.search(r"runtime error: (.*)", line)
        if m and kind == "crash":
            kind = m.group(m.lastindex)
        m = STACK.match(line)
        if m and ("/engine/" in line or "/tests/fuzz/" in line):
            func = re.sub(r"\(.*", "", m.group(2))
            return "%s at %s (%s)" % (kind, func, os.path.relpath(
                m.group(3), TOP))
    return kind


def fuzz_one(bdir, t, seconds, nice=True):
    """Fuzz target t for seconds; restart after a crash until the time is
    spent.  Returns (executions, exec/s, [crash signatures])."""
    corpus = os.path.join(OUT, "corpus", t)
    crashes = os.path.join(OUT, "crashes", t)
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(crashes, exist_ok=True)
    execs, found = 0, []
    t0 = time.time()
    for _ in range(12):     # restarts after crashes
        left = int(seconds - (time.time() - t0))
        if left < 2:
            break
        before = set(os.listdir(crashes))
        every = os.environ.get("FUZZ_RESET_EVERY", "32")
        cmd = (["nice", "-n", "10"] if nice else []) + [
            binary(bdir, t), "-max_total_time=%d" % left,
            "-max_len=" + MAX_LEN, "-timeout=25", "-rss_limit_mb=2048",
            "-print_final_stats=1", "-artifact_prefix=" + crashes + "/"] + \
            (["-detect_leaks=0"] if every != "1" else []) + \
            dict_args(t) + [corpus] + seed_dirs(t)
        p = subprocess.run(cmd, env=env({"VRNIC_FUZZ_RESET_EVERY": every}),
                           text=True, errors="replace",
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        m = re.search(r"stat::number_of_executed_units:\s*(\d+)", p.stdout)
        if m:
            execs += int(m.group(1))
        else:
            ms = re.findall(r"^#(\d+)\s", p.stdout, re.M)
            execs += int(ms[-1]) if ms else 0
        new = sorted(set(os.listdir(crashes)) - before)
        if p.returncode == 0:
            break
        sig = crash_signature(p.stdout)
        for leaf in new:
            if not leaf.endswith(".log"):
                with open(os.path.join(crashes, leaf + ".log"), "w") as f:
                    f.write(p.stdout[-20000:])
                if every != "1":
                    # Between rebuilds an input runs in the state the
                    # previous ones left: does it crash on its own?
                    r = subprocess.run([binary(bdir, t), os.path.join(
                        crashes, leaf)], env=env(), stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
                    if r.returncode == 0:
                        sig += " [needs the state of earlier inputs]"
        found.append(sig)
        if not new:	# no artifact: something else went wrong, stop
            print("fuzz %s: exit %d and no crash file; its last output:\n%s"
                  % (t, p.returncode, p.stdout[-3000:]), flush=True)
            break
    spent = max(time.time() - t0, 1e-3)
    return execs, execs / spent, found


ENGINE_SRCS = sorted(glob.glob(os.path.join(TOP, "engine/*.cpp")))
# fuzz_fabric's coverage is of vrnic-fabric's model, fuzz_vfio_user's of
# vrnic-device's vfio-user server, not of the engine.
FABRIC_SRCS = sorted(glob.glob(os.path.join(TOP, "fabric/core/*.cpp")))
OWN_SRCS = {"fabric": FABRIC_SRCS,
            "vfio_user": [os.path.join(TOP, "device/vfio_user.cpp")]}


def coverage(targets):
    """Replay the corpora through the coverage build; returns
    {target: line %, 'all': line %} over engine/*.cpp."""
    bdir = build("cov")
    if not bdir:
        return {}
    prof = os.path.join(bdir, "prof")
    shutil.rmtree(prof, ignore_errors=True)
    os.makedirs(prof)
    out = {}
    data = []
    for t in targets:
        dirs = [d for d in (os.path.join(OUT, "corpus", t),
                            os.path.join(SRC, "corpus", t))
                if os.path.isdir(d) and os.listdir(d)]
        raw = os.path.join(prof, t + "-%p.profraw")
        # One process per directory so that a crashing input costs only
        # its directory's profile.
        for d in dirs:
            subprocess.run([binary(bdir, t), "-runs=0", "-max_len=" + MAX_LEN,
                            d], env=env({"LLVM_PROFILE_FILE": raw}),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        raws = glob.glob(os.path.join(prof, t + "-*.profraw"))
        if not raws:
            continue
        pd = os.path.join(prof, t + ".profdata")
        subprocess.run(["llvm-profdata-14", "merge", "-sparse", "-o", pd] + raws,
                       check=True)
        out[t] = line_cover(pd, [binary(bdir, t)],
                            OWN_SRCS.get(t, ENGINE_SRCS))
        if t not in OWN_SRCS:
            data.append(pd)
    if data:
        pd = os.path.join(prof, "all.profdata")
        subprocess.run(["llvm-profdata-14", "merge", "-sparse", "-o", pd] + data,
                       check=True)
        out["all"] = line_cover(pd, [binary(bdir, targets[0])], ENGINE_SRCS)
    return out


def line_cover(profdata, bins, srcs):
    cmd = ["llvm-cov-14", "report", "-instr-profile=" + profdata, bins[0]]
    for b in bins[1:]:
        cmd += ["-object", b]
    p = subprocess.run(cmd + srcs, stdout=subprocess.PIPE, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("TOTAL"):
            cols = line.split()
            # TOTAL regions missed cover% functions missed exec% lines missed cover%
            return float(cols[9].rstrip("%"))
    return 0.0


def cmd_run():
    seconds = int(os.environ.get("FUZZ_SECONDS", "300"))
    targets = os.environ.get("FUZZ_TARGETS", " ".join(TARGETS)).split()
    bdir = build("asan")
    if not bdir:
        print("fuzz: build failed")
        return 1
    rows = []
    for t in targets:
        print("== fuzz_%s for %d s" % (t, seconds), flush=True)
        execs, rate, crashes = fuzz_one(bdir, t, seconds)
        rows.append((t, execs, rate, crashes))
        for c in sorted(set(crashes)):
            print("   crash (%dx): %s" % (crashes.count(c), c))
    cov = coverage(targets)
    print("%-10s %12s %9s %8s %9s" % ("target", "executions", "exec/s",
                                       "crashes", "lines"))
    for t, execs, rate, crashes in rows:
        print("%-10s %12d %9.0f %8d %8.1f%%" % (t, execs, rate, len(crashes),
                                                cov.get(t, 0.0)))
    if "all" in cov:
        print("engine/*.cpp line coverage, all targets: %.1f%%"
              % cov["all"])
    print("crashes: %s" % os.path.join(OUT, "crashes"))
    return 1 if any(r[3] for r in rows) else 0


def cmd_coverage():
    cov = coverage(TARGETS)
    for t in TARGETS:
        print("%-10s %5.1f%%" % (t, cov.get(t, 0.0)))
    print("all        %5.1f%%" % cov.get("all", 0.0))
    return 0


def cmd_merge():
    bdir = build("asan")
    if not bdir:
        return 1
    for t in TARGETS:
        dst = os.path.join(SRC, "corpus", t)
        src = os.path.join(OUT, "corpus", t)
        if not os.path.isdir(src):
            continue
        p = subprocess.run([binary(bdir, t), "-merge=1", "-max_len=" + MAX_LEN,
                            dst, src], env=env(), text=True,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        m = re.search(r"MERGE-OUTER: (\d+) new files", p.stdout)
        print("%s: %s new files" % (t, m.group(1) if m else "?"))
    return 0


# Replays run the harness as written: no steering around known bugs.
REPLAY = {"VRNIC_FUZZ_KNOWN_BUGS": "1"}


def corpus_size(t):
    return sum(len(os.listdir(d)) for d in seed_dirs(t))


def replay(bdir, t, files):
    """Target t's corpus (files inputs) in one run, then each regression
    alone (a reproducer of a bug stays a failure until the bug is fixed):
    a list of (result name, status, detail, output to show)."""
    p = subprocess.run([binary(bdir, t), "-runs=0", "-max_len=" + MAX_LEN]
                       + seed_dirs(t), env=env(REPLAY), text=True, errors="replace",
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode:
        out = [("replay corpus %s" % t, "fail", crash_signature(p.stdout),
                p.stdout)]
    else:
        out = [("replay corpus %s" % t, "pass", "%d inputs" % files, "")]
    for f in regressions(t):
        p = subprocess.run([binary(bdir, t), f], env=env(REPLAY), text=True,
                           errors="replace", stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        name = "regression %s/%s" % (t, os.path.basename(f))
        out.append((name, "fail", crash_signature(p.stdout), "")
                   if p.returncode else (name, "pass", "", ""))
    return out


def cmd_check():
    stage = Stage("fuzz")
    seconds = int(os.environ.get("FUZZ_CHECK_SECONDS", "30"))
    bdir = build("asan")
    if not bdir:
        stage.record("build", "fail", "cmake/ninja of tests/fuzz failed")
        return 1
    stage.record("build", "pass")
    # Each target is one process: as many at a time as there are cores,
    # for the replays (the stateful corpus alone takes a minute here) and
    # for the fuzzing; the results are recorded in TARGETS' order.
    from concurrent.futures import ThreadPoolExecutor
    pool = ThreadPoolExecutor(jobs())
    # The largest corpora first, so that the longest replay does not
    # start last.
    sizes = {t: corpus_size(t) for t in TARGETS}
    replays = {t: pool.submit(replay, bdir, t, sizes[t])
               for t in sorted(TARGETS, key=lambda t: -sizes[t])}
    for t in TARGETS:
        for name, status, detail, output in replays[t].result():
            if output:
                print(output[-3000:])
            stage.record(name, status, detail)
    with pool:
        runs = list(pool.map(lambda t: fuzz_one(bdir, t, seconds, nice=False),
                             TARGETS))
    for t, (execs, rate, crashes) in zip(TARGETS, runs):
        detail = "%d executions, %.0f exec/s" % (execs, rate)
        if crashes:
            stage.record("fuzz %s %d s" % (t, seconds), "fail",
                         "; ".join(sorted(set(crashes))) + " (build/fuzz/crashes/" + t + ")")
        elif execs == 0:
            stage.record("fuzz %s %d s" % (t, seconds), "fail", "nothing ran")
        else:
            stage.record("fuzz %s %d s" % (t, seconds), "pass", detail)
            print("   " + detail)
    return 1 if stage.failed else 0


def cmd_unit_asan():
    import unit
    flags = ("-fsanitize=address,undefined -fno-sanitize-recover=all "
             "-fno-omit-frame-pointer -g -O1")
    return unit.main(stage_name="sanitizers",
                     host=os.path.join(TOP, "build/host-asan"),
                     cmake_extra=["-DVRNIC_BENCH=OFF",
                                  "-DVRNIC_FABRIC_BENCH=OFF",
                                  "-DCMAKE_C_FLAGS=" + flags,
                                  "-DCMAKE_CXX_FLAGS=" + flags,
                                  "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined"],
                     run_env=env(), jobs=jobs())


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else "run"
    return {"run": cmd_run, "merge": cmd_merge, "coverage": cmd_coverage,
            "check": cmd_check, "unit-asan": cmd_unit_asan}[cmd]()


if __name__ == "__main__":
    sys.exit(main())

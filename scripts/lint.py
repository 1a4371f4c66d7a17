#!/usr/bin/python3
"""make lint: checkpatch, sparse and W=1 on the driver, checkpatch on the
provider, -Wall -Wextra -Werror and clang-tidy on the C++ engine and on
vrnic-fabric.

Every tool is one result in build/results/lint.jsonl; the exit status is
non-zero when any of them fails.
"""

import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Stage, TOP, jobs  # noqa: E402

CHECKPATCH = os.path.join(TOP, "build/src/linux-tools/scripts/checkpatch.pl")
KVER = open(os.path.join(TOP, "build/kernel-version")).read().strip()
KDIR = "/usr/src/linux-headers-%s" % KVER
# Kbuild and clang-tidy run as many jobs as there are cores: clang-tidy
# takes 10-20 s a file here, and the engine's 14 files in one process
# left one of two cores idle for four minutes.
JOBS = jobs()


def run(cmd, **kw):
    p = subprocess.run(cmd, cwd=TOP, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, **kw)
    return p.returncode, p.stdout


def show(out, limit=40):
    lines = out.strip().splitlines()
    for line in lines[:limit]:
        print("    " + line)
    if len(lines) > limit:
        print("    ... %d more lines" % (len(lines) - limit))


def checkpatch(stage, name, files, extra=()):
    rc, out = run(["perl", CHECKPATCH, "--strict", "--no-tree", "--terse",
                   "--show-types", "--no-summary", *extra, "-f", *files])
    bad = [ln for ln in out.splitlines() if re.search(r": (ERROR|WARNING|CHECK):", ln)]
    if bad:
        show("\n".join(bad))
    stage.record(name, "fail" if bad else "pass",
                 "%d findings" % len(bad) if bad else "")


def kbuild(stage, name, flags):
    # Force a full rebuild so every file is compiled or checked again.
    # (Not "make clean": with M= it deletes every *.ko* below the tree,
    # including the guest kernel's modules in build/.)
    for pattern in ("kernel/*/*.o", "kernel/*/.*.cmd", "kernel/*/.*.o.d",
                    "vrnic*.o",
                    "vrnic*.ko", "vrnic*.mod*", ".vrnic*.cmd"):
        for f in glob.glob(os.path.join(TOP, pattern)):
            os.unlink(f)
    rc, out = run(["make", "-j%d" % JOBS, "-C", KDIR, "M=" + TOP,
                   *flags])
    bad = [ln for ln in out.splitlines()
           if re.search(r"(warning|error):", ln) and "/kernel/" in ln]
    if rc or bad:
        show("\n".join(bad) or out)
    stage.record(name, "fail" if (rc or bad) else "pass",
                 "%d findings" % len(bad) if bad else "")


# Where each Kconfig file goes in the kernel tree decides what holds around
# it: drivers/net/ethernet/Kconfig sources its drivers inside "if ETHERNET"
# (which depends on NET, under NETDEVICES), drivers/infiniband/Kconfig its
# hardware drivers inside "if INFINIBAND".
KCONFIG_CONTEXT = {
    "kernel/core/Kconfig": "NET && NETDEVICES && ETHERNET",
    "kernel/ib/Kconfig": "INFINIBAND",
}


def kconfig_expr(expr, val):
    """Value (0 n, 1 m, 2 y) of a Kconfig dependency expression: symbols,
    !, &&, ||, parentheses, SYM=y|m|n and SYM!=..."""
    toks = re.findall(r"\|\||&&|!=|[!()=]|[A-Za-z0-9_]+", expr)
    pos = [0]

    def peek():
        return toks[pos[0]] if pos[0] < len(toks) else None

    def take():
        pos[0] += 1
        return toks[pos[0] - 1]

    def tristate(t):
        return {"y": 2, "m": 1, "n": 0}.get(t, val(t)) if t else 0

    def atom():
        t = take()
        if t == "!":
            return 2 - atom()
        if t == "(":
            v = disj()
            take()
            return v
        v = tristate(t)
        if peek() in ("=", "!="):
            op, rhs = take(), take()
            r = tristate(rhs)
            return 2 if (v == r) == (op == "=") else 0
        return v

    def conj():
        v = atom()
        while peek() == "&&":
            take()
            v = min(v, atom())
        return v

    def disj():
        v = conj()
        while peek() == "||":
            take()
            v = max(v, conj())
        return v

    return disj()


def kconfig(stage):
    """The Kconfig files say what an in-tree build of the modules needs;
    the out-of-tree build (Kbuild) enforces none of it.  Check that each
    symbol's dependencies hold, and what it selects is set, in the config
    of the kernel the modules are built for: a misspelt symbol, or a
    kernel the Kconfig would refuse, shows up here.  (A dependency the
    Kconfig lacks does not; an in-tree build is what finds that.)"""
    conf = {}
    with open(os.path.join(KDIR, ".config")) as f:
        for line in f:
            m = re.match(r"CONFIG_([A-Za-z0-9_]+)=(.*)", line)
            if m:
                conf[m.group(1)] = {"y": 2, "m": 1}.get(m.group(2), 2)
    ours = {}
    for path in KCONFIG_CONTEXT:
        with open(os.path.join(TOP, path)) as f:
            for m in re.finditer(r"^config\s+(\w+)", f.read(), re.M):
                ours[m.group(1)] = path

    def val(sym):
        return 1 if sym in ours else conf.get(sym, 0)

    bad = []
    for path, context in KCONFIG_CONTEXT.items():
        sym = None
        with open(os.path.join(TOP, path)) as f:
            lines = f.read().splitlines()
        deps = {}
        for line in lines:
            m = re.match(r"config\s+(\w+)", line)
            if m:
                sym = m.group(1)
                deps[sym] = [context]
                continue
            m = re.match(r"\s+depends on\s+(.*)", line)
            if m and sym:
                deps[sym].append(m.group(1))
            m = re.match(r"\s+select\s+(\w+)", line)
            if m and sym and not conf.get(m.group(1)):
                bad.append("%s: %s selects %s, not set in %s/.config"
                           % (path, sym, m.group(1), KDIR))
        for sym, exprs in deps.items():
            for e in exprs:
                if not kconfig_expr(e, val):
                    bad.append("%s: %s: \"%s\" does not hold for %s"
                               % (path, sym, e, KVER))
    if not deps:
        bad.append("no config symbols found")
    if bad:
        show("\n".join(bad))
    stage.record("Kconfig dependencies hold for the build kernel",
                 "fail" if bad else "pass",
                 "%d findings" % len(bad) if bad else "")


def main():
    stage = Stage("lint")
    kfiles = sorted(glob.glob(os.path.join(TOP, "kernel/*/*.[ch]")))
    kfiles += sorted(glob.glob(os.path.join(TOP, "kernel/*/Kconfig")))
    # userspace/vrnic_hw.h is include/vrnic_hw.h's text, generated
    # (scripts/provider_hw.py, checked below), not written in this style.
    ufiles = sorted(f for f in glob.glob(os.path.join(TOP, "userspace/*.[ch]"))
                    if not f.endswith("/vrnic_hw.h"))
    checkpatch(stage, "checkpatch --strict kernel/", kfiles)
    # rdma-core conventions differ from the kernel's in two checked ways:
    # providers use the <stdint.h> types, and the verbs API returns
    # positive errno values (ibv_post_send(3)).
    checkpatch(stage, "checkpatch --strict userspace/", ufiles,
               ["--ignore", "PREFER_KERNEL_TYPES,USE_NEGATIVE_ERRNO"])
    # The provider's hardware header is include/vrnic_hw.h's queue part.
    rc, out = run([sys.executable, "scripts/provider_hw.py", "--check"])
    stage.record("userspace/vrnic_hw.h from include/vrnic_hw.h",
                 "fail" if rc else "pass", out.strip())
    kconfig(stage)
    kbuild(stage, "kernel module W=1", ["W=1"])
    kbuild(stage, "kernel module sparse C=2", ["C=2"])

    # C++: the engine, vrnic-device and vrnic-fabric build with -Wall
    # -Wextra -Werror; clang-tidy on top, all their files in one pool.
    tidy = engine(stage) + device(stage) + fabric(stage)
    clang_tidy(stage, tidy)
    docs(stage)
    return 1 if stage.failed else 0


def clang_tidy(stage, groups):
    """groups: [(result name, [clang-tidy command per file])].  Runs every
    command through one pool of JOBS, then records each group."""
    from concurrent.futures import ThreadPoolExecutor
    work = [(name, cmd) for name, cmds in groups for cmd in cmds]
    with ThreadPoolExecutor(JOBS) as pool:
        outs = list(pool.map(lambda j: run(["nice", *j[1]]), work))
    for name, _ in groups:
        rc, out = 0, ""
        for (n, _), (r, o) in zip(work, outs):
            if n == name:
                rc |= r
                out += o
        # One process a file: a header's finding comes once per file
        # that includes it.
        bad = sorted({ln for ln in out.splitlines()
                      if re.search(r"(warning|error):", ln)})
        if rc or bad:
            show(out)
        stage.record(name, "fail" if (rc or bad) else "pass",
                     "%d findings" % len(bad) if bad else "")


def engine(stage):
    """engine/: the host build (tests/unit's CMake, -Wall -Wextra
    -Werror), then clang-tidy with its compile database."""
    host = os.path.join(TOP, "build/host")
    rc, out = run(["cmake", "-S", "tests/unit", "-B", host, "-G", "Ninja"])
    if rc == 0:
        rc, out = run(["ninja", "-C", host, "vrnic_engine"])
    if rc:
        show(out)
    stage.record("engine -Wall -Wextra -Werror", "fail" if rc else "pass")
    srcs = sorted(glob.glob(os.path.join(TOP, "engine/*.cpp")))
    return [("engine clang-tidy",
             [["clang-tidy", "--quiet", "-p", host, s] for s in srcs])]


def device(stage):
    """device/: the vfio-user programs, as the engine: -Werror, and
    clang-tidy (device/.clang-tidy) commands for clang_tidy()."""
    srcs = sorted(glob.glob(os.path.join(TOP, "device/*.cpp")))
    flags = ["-std=c++20", "-I" + os.path.join(TOP, "include"),
             "-I" + os.path.join(TOP, "engine")]
    bad_build = []
    for src in srcs:
        rc, out = run(["g++", *flags, "-Wall", "-Wextra", "-Werror",
                       "-fsyntax-only", src])
        if rc:
            show(out)
            bad_build.append(src)
    stage.record("device -Wall -Wextra -Werror",
                 "fail" if bad_build else "pass")
    return [("device clang-tidy",
             [["clang-tidy", "--quiet", s, "--", *flags] for s in srcs])]


def docs(stage):
    """Documentation/*.rst and the README's rst siblings render with
    docutils (python3-docutils, from host-deps.sh) without a warning:
    a malformed table or a broken definition list is otherwise shown to
    readers as raw text with an error box."""
    import docutils.core
    import docutils.utils
    bad = []
    for path in sorted(glob.glob(os.path.join(TOP, "Documentation/*.rst"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        try:
            docutils.core.publish_doctree(
                text, source_path=path, settings_overrides={
                    "halt_level": 2, "report_level": 2,
                    "warning_stream": False})
        except docutils.utils.SystemMessage as e:
            bad.append(str(e))
    for b in bad:
        print("   " + b)
    stage.record("Documentation/*.rst render without a docutils warning",
                 "fail" if bad else "pass",
                 "%d files" % len(bad) if bad else "")


def fabric(stage):
    """vrnic-fabric (fabric/): -Wall -Wextra -Werror (its CMake files set
    them), and clang-tidy commands (fabric/.clang-tidy) for clang_tidy()."""
    bdir = os.path.join(TOP, "build/fabric")
    rc, out = run(["cmake", "-S", "fabric", "-B", bdir, "-G", "Ninja"])
    if rc == 0:
        rc, out = run(["nice", "ninja", "-C", bdir, "-j2"])
    if rc:
        show(out)
    stage.record("fabric -Wall -Wextra -Werror", "fail" if rc else "pass")
    srcs = sorted(glob.glob(os.path.join(TOP, "fabric/core/*.cpp")) +
                  glob.glob(os.path.join(TOP, "fabric/daemon/*.cpp")))
    return [("fabric clang-tidy",
             [["clang-tidy", "--quiet", "-p", bdir, s] for s in srcs])]


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""make patches: the Linux and rdma-core series for upstream review
(issue 26).

Writes build/patches/linux/*.patch (git format-patch, a cover letter
first) that add vrnic to the guest kernel's own source tree,
linux-source-6.12 (the Debian package checkpatch already comes from):

  1. the uAPI: include/uapi/rdma/vrnic-abi.h and RDMA_DRIVER_VRNIC;
  2. the PCI function driver, drivers/net/ethernet/vrnic/, with the
     hardware and auxiliary-device headers both drivers share in
     include/linux/vrnic/;
  3. the RDMA driver, drivers/infiniband/hw/vrnic/;
each adding its files to one MAINTAINERS entry.

The files are this tree's (kernel/, include/), moved to their in-tree
places; only the #include lines of the shared headers and the Kconfig
comments that describe the out-of-tree build change on the way.  The
hardware header is generated from include/vrnic_hw.h, the device's one
description (kernel_hw_header(): no C++ or user-space branch, GENMASK()
and BIT()).

It also writes build/patches/rdma-core/*.patch against rdma-core 56.1
as released (a cover letter first: the pull request's description):
kernel-headers/ as kernel-headers/update would write them
from the Linux series' uAPI, then providers/vrnic with its CMake,
libibverbs/verbs.h (the static provider's declaration), MAINTAINERS,
README.md, the Debian, Red Hat and SUSE packaging lines and the udev
rule that marks the device RoCE.

--check (make check's patches stage): the series applies to a pristine
copy of the tree, each patch passes checkpatch --strict (with the tree),
and the patched tree builds both directories with W=1 C=1 (sparse) from
the guest kernel's configuration, objects in build/patches-obj.  The
rdma-core series applies to the released tree and passes rdma-core's own
CI jobs (buildlib/azure-pipelines.yml): the gcc build with
-DENABLE_STATIC=1 -DENABLE_WERROR=1, buildlib/check-build on it, and
sparse through cgcc with no output (on the provider's library and what
it links).  Each is one result in build/results/patches.jsonl.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from results import Stage, TOP  # noqa: E402

B = os.path.join(TOP, "build")
DL = os.path.join(B, "dl")
SRC = os.path.join(B, "patches-src")
PRISTINE = os.path.join(SRC, "linux-source-6.12")
CHECK_TREE = os.path.join(SRC, "linux-check")
WORK = os.path.join(SRC, "linux-series")
OBJ = os.path.join(B, "patches-obj", "linux")
OUT = os.path.join(B, "patches", "linux")
NET_DIR = "drivers/net/ethernet/vrnic"
IB_DIR = "drivers/infiniband/hw/vrnic"
SHARED = "include/linux/vrnic"
UAPI = "include/uapi/rdma/vrnic-abi.h"
# Files of the pristine tree the series edits.
EDITED = ("include/uapi/rdma/ib_user_ioctl_verbs.h",
          "drivers/net/ethernet/Kconfig", "drivers/net/ethernet/Makefile",
          "drivers/infiniband/Kconfig", "drivers/infiniband/hw/Makefile",
          "MAINTAINERS")


def run(cmd, cwd=TOP, check=True, env=None, timeout=3600):
    p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, env=env,
                       timeout=timeout)
    if check and p.returncode:
        raise RuntimeError("%s: exit %d\n%s" % (" ".join(cmd), p.returncode,
                                                p.stdout[-3000:]))
    return p.returncode, p.stdout


def pristine():
    """The unpacked linux-source-6.12 tree (unpacked once, about 30 s)."""
    mark = os.path.join(PRISTINE, ".vrnic-unpacked")
    if os.path.exists(mark):
        return PRISTINE
    debs = sorted(glob.glob(os.path.join(DL, "linux-source-6.12_*.deb")))
    if not debs:
        raise RuntimeError("no linux-source-6.12 .deb in build/dl "
                           "(scripts/fetch-sources.sh fetches it)")
    shutil.rmtree(PRISTINE, ignore_errors=True)
    os.makedirs(SRC, exist_ok=True)
    run(["sh", "-c", "dpkg-deb --fsys-tarfile '%s' | tar -xO --wildcards "
         "'./usr/src/linux-source-6.12.tar.xz' | tar -xJ -C '%s'"
         % (debs[-1], SRC)])
    open(mark, "w").close()
    return PRISTINE


# ------------------------------------------------------ transformations

INCLUDES = {"vrnic_hw.h": "<linux/vrnic/vrnic_hw.h>",
            "vrnic_aux.h": "<linux/vrnic/vrnic_aux.h>",
            "vrnic-abi.h": "<rdma/vrnic-abi.h>"}


def must_sub(pattern, repl, text, what, flags=0):
    """re.subn that fails loudly when the pattern no longer matches (the
    series would otherwise carry the out-of-tree text silently)."""
    out, n = re.subn(pattern, repl, text, count=1, flags=flags)
    if n != 1:
        raise RuntimeError("no %s to rewrite" % what)
    return out


def in_tree_c(text):
    """A driver source or header as the kernel tree carries it."""
    for local, system in INCLUDES.items():
        text = text.replace('#include "%s"' % local, "#include %s" % system)
    # The out-of-tree build's probe for <rdma/iter.h> (Kbuild): the
    # tree has it.
    if "VRNIC_HAVE_RDMA_ITER_H" in text:
        text = must_sub(r"/\*[^\n]*\*/\n#ifdef VRNIC_HAVE_RDMA_ITER_H\n"
                        r"(#include <rdma/iter.h>\n)#endif\n", r"\1", text,
                        "<rdma/iter.h> probe")
    # The tree's enum rdma_driver_id has the value (patch 1).
    if "(enum rdma_driver_id)RDMA_DRIVER_VRNIC" in text:
        text = must_sub(r"\t/\* Not in 6\.12's enum rdma_driver_id[^\n]*\n"
                        r"\t\.driver_id = \(enum rdma_driver_id\)"
                        r"RDMA_DRIVER_VRNIC,", "\t.driver_id = RDMA_DRIVER_VRNIC,",
                        text, "driver_id cast")
    return text


def kernel_hw_header(text):
    """include/vrnic_hw.h, the one description of the device, in the
    kernel's style: the kernel's static_assert only (no C++ or
    user-space branch), GENMASK() fields, BIT()/BIT_ULL() for single-bit
    constants."""
    text = must_sub(r"#if defined\(__cplusplus\)\n.*?#endif\n",
                    "#define VRNIC_HW_ASSERT(expr, msg) "
                    "static_assert(expr, msg)\n", text,
                    "VRNIC_HW_ASSERT branches", flags=re.S)
    text = must_sub(r"\n#if defined\(__KERNEL__\) && !defined\(__cplusplus\)"
                    r"\n.*?#endif\n", "", text, "VRNIC_GENMASK branches",
                    flags=re.S)
    text = re.sub(r"^(#define\s+\w+\s+)VRNIC_GENMASK\(", r"\1GENMASK(", text,
                  flags=re.M)
    text = must_sub(r"FIELD_GET\(\); outside the kernel, VRNIC_GENMASK\(\), "
                    r"VRNIC_FIELD_PREP\(\)\n \* and VRNIC_FIELD_GET\(\) stand "
                    r"in for them\.", "FIELD_GET().", text,
                    "the user-space field macros' mention")
    text = text.replace("#include <linux/types.h>\n",
                        "#include <linux/bits.h>\n#include <linux/build_bug.h>\n"
                        "#include <linux/types.h>\n", 1)
    text = re.sub(r"\(1[uU] << (\d+)\)", r"BIT(\1)", text)
    text = re.sub(r"\(1(?:ull|ULL) << (\d+)\)", r"BIT_ULL(\1)", text)
    return in_tree_c(text)


def uapi_in_tree(text):
    """include/vrnic-abi.h for a tree whose enum rdma_driver_id has
    RDMA_DRIVER_VRNIC (both series add it): without the out-of-tree
    stand-in value and its comment."""
    out, n = re.subn(r"/\*\n \* The driver ID .*?\*/\n#ifndef "
                     r"VRNIC_HAVE_RDMA_DRIVER_VRNIC\n.*?#endif\n\n", "", text,
                     count=1, flags=re.S)
    if n != 1:
        raise RuntimeError("include/vrnic-abi.h: no RDMA_DRIVER_VRNIC "
                           "stand-in block to drop")
    return out


def in_tree_kconfig(text):
    """kernel/*/Kconfig without its comment about where it lives."""
    lines = text.splitlines(True)
    out = [lines[0]]                        # SPDX
    i = 1
    while i < len(lines) and lines[i].startswith("#"):
        i += 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    out.append("\n")
    return "".join(out + lines[i:])


def kbuild_objs(var):
    """The object list of one module in the top-level Kbuild."""
    text = open(os.path.join(TOP, "Kbuild")).read().replace("\\\n", " ")
    m = re.search(r"^%s-y\s*:=\s*(.*)$" % re.escape(var), text, re.M)
    return [os.path.basename(o) for o in m.group(1).split()]


def makefile(module, config, objs, trace_main):
    rows = [" ".join(objs[i:i + 3]) for i in range(0, len(objs), 3)]
    return ("# SPDX-License-Identifier: GPL-2.0\n"
            "obj-$(%s) += %s.o\n\n" % (config, module) +
            "%s-y := %s\n\n" % (module, " \\\n\t".join(rows)) +
            "# define_trace.h includes the trace header from "
            "TRACE_INCLUDE_PATH (.)\n"
            "CFLAGS_%s := -I$(src)\n" % trace_main)


def insert_after(text, anchor, new):
    i = text.index(anchor) + len(anchor)
    return text[:i] + new + text[i:]


# ---------------------------------------------------------------- series

def git(*args, cwd=WORK, **kw):
    return run(["git", "-c", "user.name=vrnic maintainers", "-c",
                "user.email=vrnic@invalid", "-c", "core.autocrlf=false",
                *args], cwd=cwd, **kw)[1]


def write(rel, text):
    path = os.path.join(WORK, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read(rel):
    with open(os.path.join(WORK, rel)) as f:
        return f.read()


def src(rel):
    with open(os.path.join(TOP, rel)) as f:
        return f.read()


def hook(kconfig, k_after, k_line, makefile_, m_after, m_line):
    """A driver directory sourced from its parent's Kconfig and built
    from its parent's Makefile, each line after its neighbour's."""
    write(kconfig, insert_after(read(kconfig), k_after, k_line))
    write(makefile_, insert_after(read(makefile_), m_after, m_line))


def maintainers(files):
    """MAINTAINERS with the vrnic entry listing files (each patch adds
    the lines for the files it adds, so checkpatch finds them listed)."""
    mt = open(os.path.join(PRISTINE, "MAINTAINERS")).read()
    entry = ("VRNIC EMULATED RDMA NIC DRIVERS\n"
             "L:\tlinux-rdma@vger.kernel.org\n"
             "S:\tMaintained\n" +
             "".join("F:\t%s\n" % f for f in sorted(files)) + "\n")
    # After VRF, before VSPRINTF: MAINTAINERS is sorted by name.
    write("MAINTAINERS", must_sub(r"\nVSPRINTF\n", "\n" + entry.replace(
        "\\", "\\\\") + "VSPRINTF\n", mt, "VSPRINTF entry"))


def commit(subject, body, cwd=WORK):
    git("add", "-A", cwd=cwd)
    git("commit", "-q", "-s", "-m", subject + "\n\n" + body, cwd=cwd)


def start_series(work, tree, edited, what):
    """A staging repository at work holding the pristine copies of the
    files a series edits, committed as its base."""
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    git("init", "-q", cwd=work)
    for rel in edited:
        os.makedirs(os.path.dirname(os.path.join(work, rel)) or work,
                    exist_ok=True)
        shutil.copy(os.path.join(tree, rel), os.path.join(work, rel))
    commit("base", "%s's files that the series edits." % what, cwd=work)


def format_series(work, out, n):
    """The staging repository's last n commits as patches in out."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    git("format-patch", "-q", "--no-signature", "-o", out, "HEAD~%d" % n,
        cwd=work)


def build_series():
    start_series(WORK, pristine(), EDITED, "linux-source-6.12")

    # 1. uAPI
    write(UAPI, uapi_in_tree(src("include/vrnic-abi.h")))
    maintainers([UAPI])
    verbs = read(EDITED[0])
    verbs = insert_after(verbs, "\tRDMA_DRIVER_MANA,\n",
                         "\tRDMA_DRIVER_VRNIC,\n")
    write(EDITED[0], verbs)
    commit("RDMA/vrnic: Add the vrnic user ABI",
           "The private data that travels with uverbs commands between the\n"
           "vrnic RDMA driver and its rdma-core provider, and the driver ID\n"
           "the provider matches first.  Every request and response grows\n"
           "only at its end; the kernel refuses trailing bytes it does not\n"
           "know unless they are zero.")

    # 2. the PCI function driver and the shared headers
    maintainers([UAPI, NET_DIR + "/", SHARED + "/"])
    write(os.path.join(SHARED, "vrnic_hw.h"), kernel_hw_header(src(
        "include/vrnic_hw.h")))
    write(os.path.join(SHARED, "vrnic_aux.h"), in_tree_c(src(
        "kernel/include/vrnic_aux.h")))
    for path in sorted(glob.glob(os.path.join(TOP, "kernel/core/*.[ch]"))):
        write(os.path.join(NET_DIR, os.path.basename(path)),
              in_tree_c(src(os.path.relpath(path, TOP))))
    write(os.path.join(NET_DIR, "Kconfig"),
          in_tree_kconfig(src("kernel/core/Kconfig")))
    write(os.path.join(NET_DIR, "Makefile"),
          makefile("vrnic", "CONFIG_VRNIC", kbuild_objs("vrnic"),
                   "vrnic_main.o"))
    hook(EDITED[1], 'source "drivers/net/ethernet/via/Kconfig"\n',
         'source "drivers/net/ethernet/vrnic/Kconfig"\n',
         EDITED[2], "obj-$(CONFIG_NET_VENDOR_VIA) += via/\n",
         "obj-$(CONFIG_VRNIC) += vrnic/\n")
    commit("net: ethernet: vrnic: Add the vrnic PCI function driver",
           "vrnic is an emulated RoCEv2 RDMA NIC, which QEMU attaches over\n"
           "vfio-user (the vrnic-device program, -device vfio-user-pci).\n"
           "This driver binds its PCI function: the admin and event queues,\n"
           "the Ethernet netdev, and the auxiliary device vrnic.rdma.<n> that\n"
           "the RDMA driver binds to.  The device's programming model is in\n"
           "include/linux/vrnic/vrnic_hw.h, shared by both drivers.\n\n"
           "The PCI ID 1af4:10f0 comes from the range QEMU leaves for\n"
           "experimental devices; see the cover letter.")

    # 3. the RDMA driver
    maintainers([UAPI, NET_DIR + "/", SHARED + "/", IB_DIR + "/"])
    for path in sorted(glob.glob(os.path.join(TOP, "kernel/ib/*.[ch]"))):
        write(os.path.join(IB_DIR, os.path.basename(path)),
              in_tree_c(src(os.path.relpath(path, TOP))))
    write(os.path.join(IB_DIR, "Kconfig"),
          in_tree_kconfig(src("kernel/ib/Kconfig")))
    write(os.path.join(IB_DIR, "Makefile"),
          makefile("vrnic_ib", "CONFIG_INFINIBAND_VRNIC",
                   kbuild_objs("vrnic_ib"), "vrnic_ib_main.o"))
    hook(EDITED[3], 'source "drivers/infiniband/hw/usnic/Kconfig"\n',
         'source "drivers/infiniband/hw/vrnic/Kconfig"\n',
         EDITED[4], "obj-$(CONFIG_INFINIBAND_USNIC)\t\t+= usnic/\n",
         "obj-$(CONFIG_INFINIBAND_VRNIC)\t\t+= vrnic/\n")
    commit("RDMA/vrnic: Add the vrnic RDMA driver",
           "The ib_device of a vrnic function, bound to the auxiliary device\n"
           "the PCI function driver creates: PDs, MRs, CQs, QPs (RC, UC, UD,\n"
           "XRC), SRQs and MWs on the device's RoCEv2 transport, with the\n"
           "data path in the rdma-core provider.")

    format_series(WORK, OUT, 3)
    cover = os.path.join(OUT, "0000-cover-letter.patch")
    with open(cover, "w") as f:
        f.write(COVER)
    return sorted(glob.glob(os.path.join(OUT, "*.patch")))


COVER = """From: vrnic maintainers <vrnic@invalid>
Subject: [PATCH 0/3] vrnic: an emulated RoCEv2 RDMA NIC

vrnic is an emulated RDMA NIC (vrnic-device, a program that QEMU
attaches over vfio-user): a PCI function with an Ethernet netdev and a
RoCEv2 transport of its own, built so that RDMA
software (perftest, UCX, MPI, NVMe-oF) runs on any machine, through an
emulated data-centre fabric as well as on a plain wire.  The device's
specification, its emulation and the rdma-core provider are developed
together with these drivers.

The series adds the user ABI, the PCI function driver (net: ethernet)
and the RDMA driver bound to it over the auxiliary bus (RDMA); each
patch adds its files to one MAINTAINERS entry.

PCI ID: the device uses 1af4:10f0, from the range QEMU's
docs/specs/pci-ids.rst leaves to experimental devices (1af4:10f0-10ff,
no registration).  A permanent ID, from the PCI-SIG or a vendor that
assigns them, replaces it before anything ships, and the ID here
changes with it.
"""


# ------------------------------------------------------ rdma-core series

RC_PRISTINE = os.path.join(SRC, "rdma-core-56.1")
RC_CHECK = os.path.join(SRC, "rdma-core-check")
RC_WORK = os.path.join(SRC, "rdma-core-series")
RC_OBJ = os.path.join(B, "patches-obj", "rdma-core")
RC_OUT = os.path.join(B, "patches", "rdma-core")
RC_EDITED = ("kernel-headers/rdma/ib_user_ioctl_verbs.h",
             "kernel-headers/CMakeLists.txt", "CMakeLists.txt",
             "libibverbs/verbs.h", "MAINTAINERS", "README.md",
             "debian/control", "debian/copyright", "redhat/rdma-core.spec",
             "suse/rdma-core.spec", "kernel-boot/rdma-description.rules",
             "debian/ibverbs-providers.install",
             "debian/ibverbs-providers.lintian-overrides",
             "debian/ibverbs-providers.symbols",
             "debian/libibverbs-dev.install", "debian/rules")


def rc_pristine():
    """rdma-core 56.1 as released (the .orig.tar.gz in build/dl)."""
    mark = os.path.join(RC_PRISTINE, ".vrnic-unpacked")
    if os.path.exists(mark):
        return RC_PRISTINE
    tgz = os.path.join(DL, "rdma-core_56.1.orig.tar.gz")
    if not os.path.exists(tgz):
        raise RuntimeError("no rdma-core_56.1.orig.tar.gz in build/dl "
                           "(scripts/fetch-sources.sh fetches it)")
    shutil.rmtree(RC_PRISTINE, ignore_errors=True)
    os.makedirs(SRC, exist_ok=True)
    run(["tar", "-xzf", tgz, "-C", SRC])
    open(mark, "w").close()
    return RC_PRISTINE


def rc_edit(rel, anchor, new, replace=False):
    """Insert new after the line anchor (every occurrence) in RC_WORK;
    with replace, new takes the anchor's place."""
    path = os.path.join(RC_WORK, rel)
    with open(path) as f:
        text = f.read()
    if anchor not in text:
        raise RuntimeError("%s: no line %r to %s" % (
            rel, anchor, "replace" if replace else "insert after"))
    with open(path, "w") as f:
        f.write(text.replace(anchor, new if replace else anchor + new))


def rc_series():
    start_series(RC_WORK, rc_pristine(), RC_EDITED, "rdma-core 56.1")

    def commit_rc(subject, body):
        commit(subject, body, cwd=RC_WORK)

    # 1. kernel-headers/, as kernel-headers/update writes them from the
    # kernel series' uAPI.
    with open(os.path.join(RC_WORK, "kernel-headers/rdma/vrnic-abi.h"),
              "w") as f:
        f.write(uapi_in_tree(src("include/vrnic-abi.h")))
    rc_edit(RC_EDITED[0], "\tRDMA_DRIVER_MANA,\n", "\tRDMA_DRIVER_VRNIC,\n")
    rc_edit(RC_EDITED[1], "  rdma/vmw_pvrdma-abi.h\n", "  rdma/vrnic-abi.h\n")
    commit_rc("Update kernel headers",
              "To the uAPI of the kernel series \"vrnic: an emulated RoCEv2 "
              "RDMA NIC\"\n(include/uapi/rdma/vrnic-abi.h and "
              "RDMA_DRIVER_VRNIC).")

    # 2. the provider
    pdir = os.path.join(RC_WORK, "providers", "vrnic")
    os.makedirs(pdir)
    for path in sorted(glob.glob(os.path.join(TOP, "userspace/*.[ch]")) +
                       [os.path.join(TOP, "userspace/libvrnic.map")]):
        shutil.copy(path, pdir)
    cm = [ln for ln in src("userspace/CMakeLists.txt").splitlines(True)
          if not ln.startswith("#")]
    with open(os.path.join(pdir, "CMakeLists.txt"), "w") as f:
        f.write("".join(cm))
    # The direct verbs' man pages (vrnicdv.h), built with pandoc as the
    # other providers' are.
    os.makedirs(os.path.join(pdir, "man"))
    for path in sorted(glob.glob(os.path.join(TOP, "userspace/man/*"))):
        shutil.copy(path, os.path.join(pdir, "man"))
    rc_edit("CMakeLists.txt", "add_subdirectory(providers/vmw_pvrdma)\n",
            "add_subdirectory(providers/vrnic)\n"
            "add_subdirectory(providers/vrnic/man)\n")
    # verbs.h: the static provider's declaration, and one more argument
    # to _RDMA_STATIC_PREFIX_ so that RDMA_STATIC_PROVIDERS can still
    # list every provider (as mana and ionic did when they were added).
    rc_edit("libibverbs/verbs.h",
            "extern const struct verbs_device_ops "
            "verbs_provider_vmw_pvrdma;\n",
            "extern const struct verbs_device_ops verbs_provider_vrnic;\n")
    rc_edit("libibverbs/verbs.h",
            "\t\t\t     _12, _13, _14, _15, _16, _17, _18, _19, ...)"
            "      \\\n",
            "\t\t\t     _12, _13, _14, _15, _16, _17, _18, _19, _20, ...)"
            " \\\n", replace=True)
    rc_edit("libibverbs/verbs.h",
            "\t\t&verbs_provider_##_18, &verbs_provider_##_19\n",
            "\t\t&verbs_provider_##_18, &verbs_provider_##_19,"
            "                  \\\n\t\t&verbs_provider_##_20\n",
            replace=True)
    rc_edit("libibverbs/verbs.h", "\t\t\t     none, none, none)\n",
            "\t\t\t     none, none, none, none)\n", replace=True)
    rc_edit("MAINTAINERS", "F:\tproviders/vmw_pvrdma/\n",
            "\nVRNIC USERSPACE PROVIDER (for vrnic_ib.ko)\n"
            "L:\tlinux-rdma@vger.kernel.org\nS:\tSupported\n"
            "F:\tproviders/vrnic/\n")
    # The lists of providers and kernel drivers a new provider joins
    # upstream (erdma, mana, ionic): README.md, the packages'
    # descriptions, debian/copyright (as the sources' SPDX line and
    # MODULE_AUTHOR say), the Provides/Obsoletes pair of the Red Hat
    # spec (the SUSE one's *-rdmav2 Obsoletes is only for providers
    # packaged before rdma-core), and ID_RDMA_ROCE for the PCI function
    # ("vrnic") so that rdma-load-modules@roce runs.  vrnic_ib loads by
    # its auxiliary device alias, so rdma-hw-modules.rules needs no line.
    # libvrnic.so.1 (its direct verbs) is packaged as mana's libmana.so.1
    # is: the library, its header, static library, pkg-config file and
    # man pages, its symbols for Debian, a runtime package for SUSE, and
    # left out where DMA is not coherent.
    rc_edit("README.md", " - vmw_pvrdma.ko\n", " - vrnic_ib.ko\n")
    rc_edit("debian/control",
            "  - vmw_pvrdma: VMware paravirtual RDMA device\n",
            "  - vrnic: vrnic, an emulated RoCEv2 NIC\n")
    rc_edit("debian/control", "libmlx4-1, libmlx5-1, libmthca1\n",
            "libmlx4-1, libmlx5-1, libmthca1, libvrnic1\n",
            replace=True)
    rc_edit("debian/ibverbs-providers.install", "usr/lib/*/libmlx5.so.*\n",
            "usr/lib/*/libvrnic.so.*\n")
    rc_edit("debian/ibverbs-providers.lintian-overrides",
            "# libefa, libhns, libmana, libmlx4 and libmlx5 are",
            "# libefa, libhns, libmana, libmlx4, libmlx5 and libvrnic are",
            replace=True)
    rc_edit("debian/ibverbs-providers.lintian-overrides",
            " libmana1 libmlx4-1 libmlx5-1\n",
            " libmana1 libmlx4-1 libmlx5-1 libvrnic1\n", replace=True)
    rc_edit("debian/ibverbs-providers.symbols",
            " manadv_set_context_attr@MANA_1.0 41\n",
            "libvrnic.so.1 ibverbs-providers #MINVER#\n"
            "* Build-Depends-Package: libibverbs-dev\n"
            " VRNIC_1.0@VRNIC_1.0 57\n"
            " vrnicdv_is_supported@VRNIC_1.0 57\n"
            " vrnicdv_set_qp_transport@VRNIC_1.0 57\n")
    for anchor, new in (
            ("usr/include/infiniband/verbs_api.h\n",
             "usr/include/infiniband/vrnicdv.h\n"),
            ("usr/lib/*/libmlx5.so\n",
             "usr/lib/*/libvrnic.a\nusr/lib/*/libvrnic.so\n"),
            ("usr/lib/*/pkgconfig/libmlx5.pc\n",
             "usr/lib/*/pkgconfig/libvrnic.pc\n"),
            ("usr/share/man/man3/mult_to_ibv_rate.3\n",
             "usr/share/man/man3/vrnicdv_*.3\n"),
            ("usr/share/man/man7/mlx5dv.7\n",
             "usr/share/man/man7/vrnicdv.7\n")):
        rc_edit("debian/libibverbs-dev.install", anchor, new)
    rc_edit("debian/rules", "/efa\\|hns\\|mana\\|mlx[45]/d",
            "/efa\\|hns\\|mana\\|mlx[45]\\|vrnic/d", replace=True)
    rc_edit("debian/copyright",
            "Files: providers/vmw_pvrdma/*\nCopyright: 2012-2016 VMware, "
            "Inc.\nLicense: BSD-2-clause or GPL-2\n",
            "\nFiles: providers/vrnic/*\nCopyright: 2026, vrnic developers"
            "\nLicense: BSD-2-clause or GPL-2\n")
    rc_edit("redhat/rdma-core.spec",
            "Obsoletes: librxe < %{version}-%{release}\n",
            "Provides: libvrnic = %{version}-%{release}\n"
            "Obsoletes: libvrnic < %{version}-%{release}\n")
    for spec in ("redhat/rdma-core.spec", "suse/rdma-core.spec"):
        rc_edit(spec, "- libvmw_pvrdma: VMware paravirtual RDMA device\n",
                "- libvrnic: vrnic, an emulated RoCEv2 NIC\n")
        rc_edit(spec, "%{_mandir}/man7/mlx4dv*\n",
                "%{_mandir}/man3/vrnicdv*\n%{_mandir}/man7/vrnicdv*\n")
    rc_edit("redhat/rdma-core.spec", "%{_libdir}/libmlx4.so.*\n",
            "%{_libdir}/libvrnic.so.*\n")
    for anchor, new in (
            ("%define mlx5_so_major   1\n", "%define vrnic_so_major  1\n"),
            ("%define  mlx5_lname   libmlx5-%{mlx5_so_major}\n",
             "%define  vrnic_lname  libvrnic%{vrnic_so_major}\n"),
            ("Requires:       %{mlx5_lname} = %{version}-%{release}\n",
             "Requires:       %{vrnic_lname} = %{version}-%{release}\n"),
            ("This package contains the mlx5 runtime library.\n",
             "\n%package -n %vrnic_lname\n"
             "Summary:        VRNIC runtime library\n"
             "Group:          System/Libraries\n\n"
             "%description -n %vrnic_lname\n"
             "This package contains the vrnic runtime library.\n"),
            ("%postun -n %mlx5_lname -p /sbin/ldconfig\n",
             "\n%post -n %vrnic_lname -p /sbin/ldconfig\n"
             "%postun -n %vrnic_lname -p /sbin/ldconfig\n"),
            ("%{_libdir}/libmlx5*.so.*\n",
             "\n%files -n %vrnic_lname\n%{_libdir}/libvrnic*.so.*\n")):
        rc_edit("suse/rdma-core.spec", anchor, new)
    rc_edit("kernel-boot/rdma-description.rules",
            'DRIVERS=="vmw_pvrdma", ENV{ID_RDMA_ROCE}="1"\n',
            'DRIVERS=="vrnic", ENV{ID_RDMA_ROCE}="1"\n')
    commit_rc("vrnic: Add the userspace provider for vrnic",
              "The provider of vrnic_ib.ko, the RDMA driver of vrnic, an "
              "emulated\nRoCEv2 NIC (vrnic-device): the data path (posting, "
              "doorbells, polling)\nin user space, objects through uverbs.  "
              "It matches RDMA_DRIVER_VRNIC\nfirst and the PCI ID after.  "
              "libvrnic.so.1 exports its direct verbs\n(vrnicdv.h, "
              "vrnicdv(7)): a reliable QP's own transport (selective\n"
              "repeat, send window, UDP source ports sprayed over).\n\n"
              "It joins the lists of providers (README.md, libibverbs/"
              "verbs.h, the\nDebian, Red Hat and SUSE packaging) and the "
              "udev rule that marks RoCE\ndevices.")

    format_series(RC_WORK, RC_OUT, 2)
    # rdma-core takes pull requests: this is the request's description.
    with open(os.path.join(RC_OUT, "0000-cover-letter.patch"), "w") as f:
        f.write(RC_COVER)
    return sorted(glob.glob(os.path.join(RC_OUT, "*.patch")))


RC_COVER = """From: vrnic maintainers <vrnic@invalid>
Subject: [PATCH rdma-core 0/2] vrnic: the provider of an emulated RoCEv2 NIC

The userspace provider of vrnic_ib.ko, the RDMA driver of vrnic, an
emulated RoCEv2 NIC (vrnic-device, a program that QEMU attaches over
vfio-user).  The data path (posting, doorbells, polling) runs in user
space; objects are created through uverbs.  Like mana and efa it is a
shared provider: libvrnic.so.1 exports its direct verbs (vrnicdv.h,
vrnicdv(7)), today a reliable QP's own transport: selective repeat,
the send window and the UDP source ports it sprays over.

1. kernel-headers/: rdma/vrnic-abi.h and RDMA_DRIVER_VRNIC, as
   kernel-headers/update writes them from the kernel series "vrnic: an
   emulated RoCEv2 RDMA NIC".  This waits for that series to be merged.
2. providers/vrnic and its man pages, with the lists of providers it
   joins (CMake, libibverbs/verbs.h, MAINTAINERS, README.md, the
   Debian, Red Hat and SUSE packaging, kernel-boot's RoCE rule).

The device uses the experimental PCI ID 1af4:10f0; the provider matches
RDMA_DRIVER_VRNIC first and the PCI ID after.  Checked on rdma-core's
CI jobs: the gcc build with -DENABLE_STATIC=1 -DENABLE_WERROR=1,
buildlib/check-build, and sparse through cgcc with no output.
"""


def rc_check(stage, patches):
    patches = [p for p in patches
               if not p.endswith("0000-cover-letter.patch")]
    if not apply_series(stage, "rdma-core", rc_pristine(), RC_CHECK,
                        RC_EDITED, patches, "rdma-core 56.1"):
        return
    shutil.rmtree(RC_OBJ, ignore_errors=True)
    gcc = os.path.join(RC_OBJ, "gcc")
    os.makedirs(gcc)
    env = dict(os.environ, CC="gcc")
    # rdma-core's CI (buildlib/azure-pipelines.yml): the gcc compile with
    # static libraries and -Werror, then check-build on it.
    rc, out = run(["sh", "-c", "cmake -GNinja %s -DIOCTL_MODE=both "
                   "-DENABLE_STATIC=1 -DENABLE_WERROR=1 -DNO_PYVERBS=1 "
                   "-DNO_MAN_PAGES=1 >/dev/null && ninja" % RC_CHECK],
                  cwd=gcc, check=False, env=env)
    if rc:
        print("\n".join("    " + ln for ln in out.splitlines()[-30:]))
    stage.record("rdma-core: gcc -DENABLE_STATIC=1 -DENABLE_WERROR=1 "
                 "builds", "fail" if rc else "pass")
    if rc == 0:
        # check-build compares each library's ABI with the dump in ABI/,
        # which the release tree (cut from a stable branch) has for the
        # libraries it shipped and master, where a new provider goes, has
        # not at all.  libvrnic.so.1 is new: its first dump is its own
        # reference, as a stable branch would add it, and the others are
        # still compared with the release's.
        for lib in glob.glob(os.path.join(gcc, "lib", "libvrnic.so.*.*")):
            if not os.path.islink(lib):
                run(["abi-dumper", "-lver", "vrnic", lib, "-o",
                     os.path.join(RC_CHECK, "ABI", "vrnic.dump")],
                    cwd=gcc, check=False, env=env)
        rc, out = run(["/usr/bin/python3", os.path.join(
            RC_CHECK, "buildlib", "check-build"), "--src", RC_CHECK,
            "--cc", "gcc"], cwd=gcc, check=False, env=env)
        if rc:
            print("\n".join("    " + ln for ln in out.splitlines()[-30:]))
        stage.record("rdma-core: buildlib/check-build", "fail" if rc
                     else "pass")
    # sparse through cgcc on the directories rdma-core keeps sparse
    # clean: its CI drops the "# NO SPARSE" lines; any output fails.
    cml = os.path.join(RC_CHECK, "CMakeLists.txt")
    with open(cml) as f:
        text = f.read()
    with open(cml + ".tmp", "w") as f:
        f.write("".join(ln for ln in text.splitlines(True)
                        if "# NO SPARSE" not in ln))
    os.replace(cml + ".tmp", cml)
    # Only the provider's library and what it links (libibverbs, util,
    # ccan) are built: the rest of the tree is rdma-core's and costs
    # minutes here.
    sp = os.path.join(RC_OBJ, "sparse")
    os.makedirs(sp)
    env = dict(os.environ, CC="cgcc")
    rc, out = run(["cmake", "-GNinja", RC_CHECK, "-DIOCTL_MODE=both",
                   "-DNO_PYVERBS=1", "-DENABLE_WERROR=1", "-DNO_MAN_PAGES=1"],
                  cwd=sp, check=False, env=env)
    if rc == 0:
        targets = run(["ninja", "-t", "targets", "all"], cwd=sp)[1]
        lib = re.search(r"^(lib/libvrnic-rdmav\d+\.so):", targets, re.M)
        rc, out = run(["ninja", lib.group(1) if lib else "all"], cwd=sp,
                      check=False, env=env)
    msgs = [ln for ln in out.splitlines() if not ln.startswith("[")]
    for ln in msgs[:30]:
        print("    " + ln)
    stage.record("rdma-core: sparse (cgcc) prints nothing",
                 "fail" if rc or msgs else "pass",
                 "%d lines" % len(msgs) if msgs else "")


# ----------------------------------------------------------------- check

def apply_series(stage, name, tree, copy, edited, patches, label):
    """A hard-linked copy of the pristine tree (seconds; the files the
    series edits are copied for real, so that the pristine tree stays
    pristine), the series applied to it, one result per patch; True if
    all applied."""
    shutil.rmtree(copy, ignore_errors=True)
    run(["cp", "-al", tree, copy])
    for rel in edited:
        p = os.path.join(copy, rel)
        shutil.copy(os.path.join(tree, rel), p + ".tmp")
        os.replace(p + ".tmp", p)
    for p in patches:
        rc, out = run(["patch", "-p1", "-s", "--no-backup-if-mismatch",
                       "-i", p], cwd=copy, check=False)
        stage.record("%s: %s applies to %s" % (name, os.path.basename(p),
                                               label),
                     "fail" if rc else "pass", out.strip()[-300:])
        if rc:
            return False
    return True


def check(stage, patches):
    series = [p for p in patches if not p.endswith("0000-cover-letter.patch")]
    if not apply_series(stage, "linux", pristine(), CHECK_TREE, EDITED,
                        series, "linux-source-6.12"):
        return
    for p in series:
        rc, out = run(["perl", "scripts/checkpatch.pl", "--strict",
                       "--terse", "--no-summary", "--show-types", p],
                      cwd=CHECK_TREE, check=False)
        bad = [ln for ln in out.splitlines() if ln.strip()]
        for ln in bad[:20]:
            print("    " + ln)
        stage.record("linux: checkpatch --strict %s" % os.path.basename(p),
                     "fail" if rc or bad else "pass",
                     "%d findings" % len(bad) if bad else "")
    build(stage)


def build(stage):
    kver = open(os.path.join(B, "kernel-version")).read().strip()
    os.makedirs(OBJ, exist_ok=True)
    cfg = os.path.join(OBJ, ".config")
    shutil.copy("/usr/src/linux-headers-%s/.config" % kver, cfg)
    sc = os.path.join(CHECK_TREE, "scripts", "config")
    # Debian's signing keys and BTF (which needs vmlinux) are not here.
    run([sc, "--file", cfg, "--module", "VRNIC", "--module",
         "INFINIBAND_VRNIC", "--set-str", "SYSTEM_TRUSTED_KEYS", "",
         "--set-str", "SYSTEM_REVOCATION_KEYS", "", "--disable",
         "DEBUG_INFO_BTF", "--disable", "MODULE_SIG_ALL"])
    make = ["make", "-s", "-C", CHECK_TREE, "O=" + OBJ, "-j2"]
    try:
        run(make + ["olddefconfig"])
        got = open(cfg).read()
        for sym in ("CONFIG_VRNIC=m", "CONFIG_INFINIBAND_VRNIC=m"):
            if sym not in got:
                raise RuntimeError("olddefconfig dropped %s (its depends "
                                   "on do not hold)" % sym)
        run(make + ["prepare"])
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        print("    " + str(e)[-2000:])
        stage.record("linux: the patched tree builds with W=1 C=1", "fail",
                     "configure/prepare: " + str(e).splitlines()[0])
        return
    for d in (NET_DIR, IB_DIR):
        shutil.rmtree(os.path.join(OBJ, d), ignore_errors=True)
    rc, out = run(make + ["W=1", "C=1", NET_DIR + "/", IB_DIR + "/"],
                  check=False)
    bad = [ln for ln in out.splitlines()
           if re.search(r"(warning|error):", ln) and "vrnic" in ln]
    for ln in (bad or out.splitlines() if rc else bad)[:30]:
        print("    " + ln)
    objs = glob.glob(os.path.join(OBJ, NET_DIR, "*.o")) + glob.glob(
        os.path.join(OBJ, IB_DIR, "*.o"))
    want = len(kbuild_objs("vrnic")) + len(kbuild_objs("vrnic_ib"))
    stage.record("linux: the patched tree builds %s/ and %s/ with W=1 C=1"
                 % (NET_DIR, IB_DIR),
                 "fail" if rc or bad or len(objs) < want else "pass",
                 "%d of %d objects%s" % (len(objs), want, ", %d warnings"
                                         % len(bad) if bad else ""))


def main(argv):
    try:
        patches = build_series()
    except (RuntimeError, OSError, ValueError) as e:
        print("make patches: %s" % e)
        if "--check" in argv:
            Stage("patches").record("linux: make patches writes the series",
                                    "fail", str(e).splitlines()[0])
        return 1
    print("make patches: %d files in %s" % (len(patches),
                                            os.path.relpath(OUT, TOP)))
    for p in patches:
        print("  " + os.path.basename(p))
    try:
        rc_patches = rc_series()
    except (RuntimeError, OSError, ValueError) as e:
        print("make patches: rdma-core: %s" % e)
        rc_patches = None
    else:
        print("make patches: %d files in %s" % (
            len(rc_patches), os.path.relpath(RC_OUT, TOP)))
        for p in rc_patches:
            print("  " + os.path.basename(p))
    if "--check" not in argv:
        return 0 if rc_patches is not None else 1
    stage = Stage("patches")
    stage.record("linux: make patches writes the series", "pass",
                 "%d patches" % (len(patches) - 1))
    check(stage, patches)
    stage.record("rdma-core: make patches writes the series",
                 "pass" if rc_patches else "fail",
                 "%d patches" % (len(rc_patches) - 1) if rc_patches else "")
    if rc_patches:
        rc_check(stage, rc_patches)
    return 1 if stage.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

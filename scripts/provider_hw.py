#!/usr/bin/python3
"""userspace/vrnic_hw.h: the part of include/vrnic_hw.h the rdma-core
provider uses (queues, doorbells, WQEs, CQEs), as erdma's erdma_hw.h holds
only what its provider needs.  include/vrnic_hw.h stays the one
description of the device; this header is generated from it.

    scripts/provider_hw.py           write userspace/vrnic_hw.h
    scripts/provider_hw.py --check   exit 1 if it is not what would be
                                     written (scripts/lint.py runs this)

The selection: every paragraph (definitions and their comment, up to a
blank line) of include/vrnic_hw.h that defines a name the provider's
sources use, then the paragraphs those need, in the original order, and
the layout checks of what was kept.  Nothing is rewritten."""

import glob
import os
import re
import sys

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(TOP, "include/vrnic_hw.h")
OUT = os.path.join(TOP, "userspace/vrnic_hw.h")

HEAD = """\
/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * vrnic hardware interface, the part the provider uses: queue pairs,
 * doorbells, work queue entries, completion queue entries and doorbell
 * records.  Generated from include/vrnic_hw.h, the single definition of
 * the device, by scripts/provider_hw.py: edit that, not this.
 *
 * All multi-byte fields are little-endian.
 */
#ifndef VRNIC_HW_H
#define VRNIC_HW_H

#include <linux/types.h>

#define VRNIC_HW_ASSERT(expr, msg) _Static_assert(expr, msg)
"""

TAIL = "\n#endif /* VRNIC_HW_H */\n"

IDENT = re.compile(r"\b(?:VRNIC_\w+|vrnic_\w+)\b")


def strip_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def paragraphs(body):
    """body split at blank lines outside comments and braces."""
    out, cur, depth, in_comment = [], [], 0, False
    for line in body.splitlines(True):
        if not line.strip() and depth == 0 and not in_comment:
            if cur:
                out.append("".join(cur))
            cur = []
            continue
        cur.append(line)
        code = line
        if in_comment:
            if "*/" not in code:
                continue
            code = code.split("*/", 1)[1]
            in_comment = False
        code = re.sub(r"/\*.*?\*/", " ", code)
        if "/*" in code:
            in_comment = True
            code = code.split("/*", 1)[0]
        depth += code.count("{") - code.count("}")
    if cur:
        out.append("".join(cur))
    return out


def defines(par):
    code = strip_comments(par)
    names = set(re.findall(r"^#define\s+(\w+)", code, re.M))
    names |= set(re.findall(r"^(?:struct|enum)\s+(\w+)\s*\{", code, re.M))
    names |= set(re.findall(r"^\t(VRNIC_\w+)\s*(?:=[^,\n]*)?,", code, re.M))
    names |= set(re.findall(r"^static inline [^(]*?\b(\w+)\(", code, re.M))
    return names


def uses(text):
    return set(IDENT.findall(strip_comments(text)))


def generate():
    text = open(SRC).read()
    # The field macros' user-space branch (the kernel's is GENMASK()).
    fields = re.search(r"#if defined\(__KERNEL__\) && !defined\(__cplusplus\)"
                       r"\n.*?#else\n(.*?)#endif\n", text, re.S)
    start = fields.end()
    checks = text.index("/* ------------------------------------------------ "
                        "layout checks --- */")
    end = text.rindex("#endif /* VRNIC_HW_H */")
    pars = [p for p in paragraphs(text[start:checks])
            if not re.fullmatch(r"/\* -+ [^\n]* --- \*/\n", p)]
    want = set()
    for path in glob.glob(os.path.join(TOP, "userspace/*.[ch]")):
        if os.path.abspath(path) != OUT:
            code = open(path).read()
            want |= uses(code)
            # The provider's own functions (vrnic_qp_state()) are not
            # the device's names (enum vrnic_qp_state).
            want -= set(re.findall(r"^[a-z][^(;]*?\b(vrnic_\w+)\(",
                                   strip_comments(code), re.M))
    keep = [False] * len(pars)
    changed = True
    while changed:
        changed = False
        for i, p in enumerate(pars):
            if not keep[i] and defines(p) & want:
                keep[i] = changed = True
                want |= uses(p)
    kept = [re.sub(r"^/\* -+ [^\n]* --- \*/\n", "", p, flags=re.M)
            for p, k in zip(pars, keep) if k]
    names = set().union(*(defines(p) for p in kept))
    asserts = [ln for ln in text[checks:end].splitlines(True)[1:]
               if ln.strip() and uses(ln) <= names]
    return (HEAD + fields.group(1) + "\n" + "\n".join(kept) + "\n" +
            "".join(asserts) + TAIL)


def main():
    new = generate()
    if sys.argv[1:] == ["--check"]:
        old = open(OUT).read() if os.path.exists(OUT) else ""
        if old != new:
            print("userspace/vrnic_hw.h is not what scripts/provider_hw.py "
                  "generates from include/vrnic_hw.h; run it")
            return 1
        return 0
    with open(OUT, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())

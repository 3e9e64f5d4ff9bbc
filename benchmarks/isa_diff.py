#!/usr/bin/env python3
"""Do two trees' conv kernels compile to the same instructions? No GPU needed.

    python3 benchmarks/isa_diff.py OLD_TOOLS_DIR [NEW_TOOLS_DIR] [--targets sm90,gfx942]

Each tree's kernels are cross-compiled (its own convaudit/isa.py (convgen/kernels/isa.py in older trees), in a subprocess with that
tree on sys.path) for every direction x type x path of the ISA survey, and each kernel's
assembly becomes a histogram of opcodes. Loads of kernel parameters are left out (a
kernel with other parameters loads other ones). Equal histograms mean the same
instructions in the same numbers: the same speed, without timing anything. A difference
confined to scalar bookkeeping (s_nop, s_waitcnt, s_mov, SGPR spills to VGPR lanes) is
reported as "bookkeeping only": it follows from a different number of kernel arguments,
not from the work. Prints one row per kernel; exits 1 when any differs in more than
bookkeeping.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BOOKKEEPING = ("s_nop", "s_waitcnt", "s_mov_", "v_readlane_", "v_writelane_", "s_setprio",
               "s_load_", "s_add_u32", "s_addc_u32")
CASES = [(d, t, dot) for d in ("fwd", "bwd_data", "bwd_weight") for t in ("f16", "bf16", "f32")
         for dot in (True, False)]

_CHILD = r"""
import collections, json, os, re, sys
# the tree's own audit (PYTHONPATH's first folder): convaudit/isa.py, or kernels/isa.py in
# trees before the audits left the suite
if os.path.exists(os.path.join(sys.path[1], "convaudit", "isa.py")):
    from convaudit import isa
else:
    from convgen.kernels import isa
layouts = isa.CHANNELS_LAST
out = {}
for target in sys.argv[1].split(","):
    for d, t, dot in json.loads(sys.argv[2]):
        k = isa.compile_conv(d, t, dot, target, layouts, (2, 2))
        asm = isa.assembly(k, target)
        ops = collections.Counter()
        for line in asm.splitlines():
            line = re.split(r"//|;", line)[0].strip()
            if not line or line.startswith((".", "$", "-")) or line.endswith(":") or line in "{}":
                continue
            op = re.split(r"[\s{]", line.lstrip("@%p0123456789! "), maxsplit=1)[0]
            if op.startswith("ld.param") or op.startswith("s_load"):
                continue
            ops[op] += 1
        out[f"{target} {d} {t} {'dot' if dot else 'fma'}"] = ops
json.dump(out, sys.stdout)
"""


def histograms(tools: str, targets: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = tools
    p = subprocess.run([sys.executable, "-c", _CHILD, targets, json.dumps(CASES)], env=env,
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit(f"isa_diff: {tools}: {p.stderr.strip().splitlines()[-1]}")
    return json.loads(p.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new", nargs="?", default=os.path.join(os.path.dirname(HERE), "tools"))
    ap.add_argument("--targets", default="sm90,gfx942")
    ap.add_argument("--json")
    args = ap.parse_args()
    old, new = histograms(args.old, args.targets), histograms(args.new, args.targets)
    rows, same_n, book_n = [], 0, 0
    for key in sorted(old):
        a, b = collections.Counter(old[key]), collections.Counter(new[key])
        delta = {op: b[op] - a[op] for op in set(a) | set(b) if a[op] != b[op]}
        verdict = "same" if not delta else (
            "bookkeeping only" if all(op.startswith(BOOKKEEPING) for op in delta) else "differs")
        same_n += verdict == "same"
        book_n += verdict == "bookkeeping only"
        rows.append({"kernel": key, "instructions_old": sum(a.values()),
                     "instructions_new": sum(b.values()), "verdict": verdict, "delta": delta})
        print(f"{key:32} {sum(a.values()):6} {sum(b.values()):6}  {verdict:17}"
              + " ".join(f"{op}{d:+d}" for op, d in sorted(delta.items())))
    differ = len(rows) - same_n - book_n
    print(f"isa_diff: of {len(rows)} kernels, {same_n} compile to the same instructions, "
          f"{book_n} differ in scalar bookkeeping only, {differ} differ in their work")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"targets": args.targets, "rows": rows}, f, indent=1)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

"""What the guard bands cost: the output allocated inside margins of the guard pattern and
poisoned, against a plain poisoned tensor; the inputs inside NaN margins, against plain
copies; and the check of the output's margins after the kernel (Guard.outside).

Prints a table and writes JSON. Runs on the GPU when there is one, else on the CPU.

    python benchmarks/bench_guard.py [--json out.json]

The problem is ResNet-50's 3x3 64->64 layer at 56x56, batch 64, f16, NHWC: 12.8M
output elements (25.7 MB). Times are medians of 20 runs after 3 warm-ups.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))

import torch  # noqa: E402

from convgen import guards, inputs  # noqa: E402
from convgen.dtypes import elem_type  # noqa: E402
from convgen.problem import make_problem  # noqa: E402


def _median_ms(fn, device: str, reps: int = 20) -> float:
    times = []
    for i in range(reps + 3):
        if device != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device != "cpu":
            torch.cuda.synchronize()
        if i >= 3:
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    p = make_problem(direction="fwd", dtype=elem_type("f16"), n=64, g=1, c_total=64, k_total=64,
                     hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    dt = p.dtype.torch_dtype
    shape = p.physical_shape(p.writes)
    numel = 1
    for d in shape:
        numel *= d

    def plain_output():
        torch.empty(shape, dtype=dt, device=device).fill_(float("nan"))

    def guarded_output():
        guards.guarded_output(p, device)

    src = {name: torch.randn(p.physical_shape(name), dtype=dt, device=device) for name in p.reads}

    def plain_inputs():
        for name, t in src.items():
            torch.empty_like(t).copy_(t)

    def guarded_inputs():
        for name, t in src.items():
            g, buf, _ = inputs._guarded(p.physical_shape(name), dt, device)
            buf.fill_(float("nan"))
            g.copy_(t)

    _, guard = guards.guarded_output(p, device)
    rows = {
        "output: plain (alloc + poison)": _median_ms(plain_output, device),
        "output: guarded (alloc + margins + poison)": _median_ms(guarded_output, device),
        "inputs: plain (alloc + copy)": _median_ms(plain_inputs, device),
        "inputs: guarded (alloc + NaN margins + copy)": _median_ms(guarded_inputs, device),
        "check: Guard.outside() after the kernel": _median_ms(guard.outside, device),
    }
    name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
    print(f"guard bands on {name}: {numel} output elements (f16), margin {guard.margin} each side")
    for what, ms in rows.items():
        print(f"  {what:46} {ms:8.3f} ms")
    extra = (rows["output: guarded (alloc + margins + poison)"] - rows["output: plain (alloc + poison)"]
             + rows["inputs: guarded (alloc + NaN margins + copy)"] - rows["inputs: plain (alloc + copy)"]
             + rows["check: Guard.outside() after the kernel"])
    print(f"  {'added per run':46} {extra:8.3f} ms")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "output_elements": numel, "margin": guard.margin,
                       "ms": rows, "added_ms": extra,
                       "command": "python benchmarks/bench_guard.py " + " ".join(sys.argv[1:])}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

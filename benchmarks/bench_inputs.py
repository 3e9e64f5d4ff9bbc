"""Drawing a run's inputs: on the device with Philox (inputs.make_inputs today) against the
CPU float64 draw and copy that convgen used before (kept here only to compare), in one
process, for the largest tensors the suite and the fp16 study use.

    python benchmarks/bench_inputs.py [--json out.json]

Each row: the problem, the elements drawn, seconds for each way (median of 3, after three
warm-ups), and the ratio. Needs a GPU for the comparison to mean anything; on a CPU
machine both run on the host (the new way through Triton's interpreter).
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

import torch  # noqa: E402

from convgen import dtypes, report  # noqa: E402
from convgen.backend import current  # noqa: E402
from convgen.inputs import _guarded, _range, make_inputs  # noqa: E402
from convgen.options import DataSpec  # noqa: E402
from convgen.problem import make_problem  # noqa: E402

from bench_guard import _median_ms  # noqa: E402  (this folder is on sys.path when run)

# (direction, N, C, K, H=W, filter, stride, padding): the ResNet-50 stem at batch 256 (its
# bwd_data reads the fp16 study's worst case, 205,520,896 output-gradient elements) and a
# 3x3 layer at batch 64
PROBLEMS = [("fwd", 256, 3, 64, 224, 7, 2, 3), ("bwd_data", 256, 3, 64, 224, 7, 2, 3),
            ("bwd_weight", 64, 256, 256, 56, 3, 1, 1)]


def _problem(direction, n, c, k, hw, f, s, pad):
    return make_problem(direction=direction, dtype=dtypes.elem_type("f16"), n=n, g=1, c_total=c,
                        k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s), pad=(pad,) * 4,
                        layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})


def host_float64(p, spec: DataSpec, device: str) -> dict:
    """The former way: each tensor drawn on the CPU in float64, rounded, copied over."""
    out = {}
    lo, hi = _range(spec, p)
    for salt, name in enumerate(p.reads):
        phys = p.physical_shape(name)
        gen = torch.Generator().manual_seed(spec.seed * 1000003 + salt + 1)
        data = torch.rand(phys, generator=gen, dtype=torch.float64) * (hi - lo) + lo
        t, buf, _ = _guarded(phys, p.dtype.torch_dtype, device)
        buf.fill_(float("nan"))
        t.copy_(data.to(p.dtype.torch_dtype))
        out[name] = t
    return out


def _time(fn, device) -> float:
    """Median seconds of 3 runs after 3 warm-ups (bench_guard's timer)."""
    return _median_ms(fn, device, reps=3) / 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--problems", type=int, default=len(PROBLEMS), help="the first N problems")
    args = ap.parse_args()
    be = current()
    device = be.torch_device
    spec = DataSpec(seed=1)
    rows = []
    for entry in PROBLEMS[:args.problems]:
        p = _problem(*entry)
        elements = sum(p.elements(t) for t in p.reads)
        new = _time(lambda: make_inputs(p, spec, device), device)
        old = _time(lambda: host_float64(p, spec, device), device)
        rows.append({"problem": p.describe(), "elements": elements, "device_s": new,
                     "host_float64_s": old, "speedup": old / new})
        print(f"{entry[0]:<10} N={entry[1]:<3} C={entry[2]:<3} K={entry[3]:<3} {entry[4]}x{entry[4]} "
              f"{elements / 1e6:8.1f}M  device {new:7.3f} s  host float64 {old:7.3f} s  x{old / new:.0f}",
              flush=True)
        torch.cuda.empty_cache() if device != "cpu" else None
    if args.json:
        report.write_json(args.json, {"device": f"{be.arch} ({be.kind})", "rows": rows,
                                      "command": "python benchmarks/bench_inputs.py"})
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The host's cost of launching convgen's kernels: Python time per call, the GPU never the
limit (each call's kernels queue behind the first; the clock stops before the sync).

    python benchmarks/bench_launch.py [--json docs/data/launch-cost-h100.json]

For each kernel form (the rule's pointer kernels, a split bwd_weight with its sum, the
descriptor (TMA) kernels, the direct kernels of depthwise layers), two numbers:

    prepared   a call of `launch.prepare`'s closure, arguments built once: what a timing
               loop (the tuner without graphs, `bench_conv.py --timing launch`) pays a call
    run        `launch.run_conv`: the arguments (descriptors, workspace) built, then the
               launches: what one convgen run pays once
and the GPU time of one call (CUDA events over the same calls, after a sync), so the two
can be read against it.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))

import torch  # noqa: E402

from convgen import report  # noqa: E402
from convgen.backend import current  # noqa: E402
from convgen.dtypes import elem_type  # noqa: E402
from convgen.guards import empty_output  # noqa: E402
from convgen.inputs import make_inputs  # noqa: E402
from convgen.kernels.config import choose, validate  # noqa: E402
from convgen.kernels.launch import prepare, run_conv  # noqa: E402
from convgen.options import DataSpec  # noqa: E402
from convgen.problem import make_problem  # noqa: E402

NHWC = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}
# (label, direction, (c, k, hw, filter, stride, pad, groups), batch, config fields)
CASES = [
    ("pointer, rule", "fwd", (64, 64, 56, 3, 1, 1, 1), 32, {"tma": 0}),
    ("descriptors (TMA)", "fwd", (64, 64, 56, 3, 1, 1, 1), 32, {"tma": 1}),
    ("pointer, rule", "bwd_data", (64, 64, 56, 3, 1, 1, 1), 32, {"tma": 0}),
    ("split bwd_weight + sum", "bwd_weight", (512, 512, 7, 3, 1, 1, 1), 32, {"split": 8}),
    ("direct, depthwise", "fwd", (144, 144, 56, 3, 1, 1, 144), 8, {}),
    ("direct, depthwise, split", "bwd_weight", (144, 144, 56, 3, 1, 1, 144), 8, {}),
]
CALLS = 200


def _case(direction, layer, batch, fields, be):
    c, k, hw, f, s, pad, g = layer
    p = make_problem(direction=direction, dtype=elem_type("f16"), n=batch, g=g, c_total=c,
                     k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s), pad=(pad,) * 4,
                     layouts=NHWC)
    t = make_inputs(p, DataSpec(seed=1), be.torch_device)
    out = empty_output(p, be.torch_device)
    cfg = replace(choose(p, be, True), **fields)
    validate(cfg, p, be, True)
    return p, t, out, cfg


def _host_us(call, calls: int = CALLS) -> float:
    """Median of five rounds of `calls` calls, microseconds a call of host time."""
    rounds = []
    for _ in range(5):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            call()
        rounds.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(rounds)


def _gpu_us(call, calls: int = 50) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(calls):
        call()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / calls * 1e3


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_launch: needs a GPU (the interpreter's launches are the kernels' run)")
    be = current()
    rows = []
    print(f"{'form':28s} {'direction':10s} {'config':60s} {'prepared us':>11s} {'run us':>8s} "
          f"{'gpu us':>8s}")
    for label, direction, layer, batch, fields in CASES:
        p, t, out, cfg = _case(direction, layer, batch, fields, be)
        call = prepare(p, t, out, cfg, True, be)
        call()   # compiles
        torch.cuda.synchronize()
        row = {"form": label, "direction": direction, "layer": list(layer), "batch": batch,
               "config": cfg.describe(),
               "prepared_us": _host_us(call),
               "run_us": _host_us(lambda: run_conv(p, t, out, cfg, True, be), CALLS // 4),
               "gpu_us": _gpu_us(call)}
        rows.append(row)
        print(f"{label:28s} {direction:10s} {cfg.describe()[:60]:60s} {row['prepared_us']:11.1f} "
              f"{row['run_us']:8.1f} {row['gpu_us']:8.1f}", flush=True)
    if args.json:
        report.write_json(args.json, {"device": torch.cuda.get_device_name(),
                                      "torch": torch.__version__,
                                      "triton": __import__("triton").__version__, "rows": rows,
                                      "command": " ".join(["python", *sys.argv])})
    return 0


if __name__ == "__main__":
    sys.exit(main())

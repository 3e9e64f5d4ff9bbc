"""Time the conv kernels on ResNet-50 layers against the vendor library (torch -> cuDNN/MIOpen).

Prints a table and writes JSON. Needs a GPU. Usage:

    python benchmarks/bench_conv.py [--json out.json] [--types f16,bf16,f32] [--quick]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import triton  # noqa: E402

from convgen.backend import current  # noqa: E402
from convgen.dtypes import elem_type  # noqa: E402
from convgen.inputs import empty_output, make_inputs  # noqa: E402
from convgen.options import DataSpec  # noqa: E402
from convgen.kernels.config import choose  # noqa: E402
from convgen.kernels.launch import run_conv  # noqa: E402
from convgen.models import RESNET50  # noqa: E402
from convgen.problem import make_problem  # noqa: E402

NHWC = {"filter": "kyxc", "input": "nhwc", "output": "nhwk"}


def torch_op(p, t):
    """The same convolution through torch (cuDNN); reshapes of the logical views stay views,
    so torch sees the channels-last memory as is."""
    kw = dict(stride=p.stride_h, padding=p.pad_h_l, groups=p.g)
    if p.direction.name == "fwd":
        x = t["input"].reshape(p.n, p.g * p.c, p.hi, p.wi)
        w = t["filter"].reshape(p.g * p.k, p.c, p.y, p.x)
        return lambda: F.conv2d(x, w, **kw)
    if p.direction.name == "bwd_data":
        dy = t["output"].reshape(p.n, p.g * p.k, p.ho, p.wo)
        w = t["filter"].reshape(p.g * p.k, p.c, p.y, p.x)
        return lambda: torch.nn.grad.conv2d_input((p.n, p.g * p.c, p.hi, p.wi), w, dy, **kw)
    x = t["input"].reshape(p.n, p.g * p.c, p.hi, p.wi)
    dy = t["output"].reshape(p.n, p.g * p.k, p.ho, p.wo)
    return lambda: torch.nn.grad.conv2d_weight(x, (p.g * p.k, p.c, p.y, p.x), dy, **kw)


def bench_one(direction, dtype, layer, batch, use_dot):
    c, k, hw, f, s, pad, g = layer
    p = make_problem(direction=direction, dtype=elem_type(dtype), n=batch, g=g, c_total=c,
                     k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s), pad=(pad,) * 4, layouts=NHWC)
    be = current()
    t = make_inputs(p, DataSpec(seed=1), "cuda")
    out = empty_output(p, "cuda")
    cfg = choose(p, be, use_dot, None)
    ms = triton.testing.do_bench(lambda: run_conv(p, t, out, cfg, use_dot, be), warmup=25, rep=100,
                                 return_mode="median")
    ref_ms = triton.testing.do_bench(torch_op(p, t), warmup=25, rep=100, return_mode="median")
    tflops = p.flops / ms / 1e9
    return {"direction": direction, "dtype": dtype, "layer": f"C{c} K{k} {hw}x{hw} {f}x{f}/s{s}",
            "batch": batch, "path": "dot" if use_dot else "fma", "config": cfg.describe(),
            "ms": ms, "tflops": tflops, "torch_ms": ref_ms, "vs_torch": ref_ms / ms}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="bench_conv.json")
    ap.add_argument("--types", default="f16,bf16,f32")
    ap.add_argument("--directions", default="fwd,bwd_data,bwd_weight")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="four layers only")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_conv: needs a GPU")
    torch.backends.cudnn.allow_tf32 = False  # compare ieee fp32 with ieee fp32
    layers = RESNET50[1:5] + RESNET50[10:11] if args.quick else RESNET50
    rows = []
    for d in args.directions.split(","):
        for dt in args.types.split(","):
            for layer in layers:
                rows.append(bench_one(d, dt, layer, args.batch, True))
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}, torch {torch.__version__}, triton {triton.__version__}")
    print(f"{'dir':10} {'type':5} {'layer':28} {'ms':>8} {'TFLOP/s':>8} {'torch ms':>9} {'x torch':>8}")
    for r in rows:
        print(f"{r['direction']:10} {r['dtype']:5} {r['layer']:28} {r['ms']:8.3f} {r['tflops']:8.1f} "
              f"{r['torch_ms']:9.3f} {r['vs_torch']:8.2f}")
    with open(args.json, "w") as f:
        json.dump({"device": dev, "torch": torch.__version__, "triton": triton.__version__,
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

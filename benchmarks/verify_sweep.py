"""Block shapes of the verifier's statistics kernel, timed on 100M-element pairs.

Times `verify_stats.device_totals` (both kernels, the reductions over their rows and
the one copy back: what verify() pays on the device) for each ROWS x ITERS x warps x
pipeline stages x elements per thread-row shape, on an fp16 pair and on fp16 against a float64 reference, next to the device's
copy bandwidth. `--old FILE` also times another version of the module (for example
the previous kernel, `git show REV:tools/convgen/kernels/verify_stats.py > FILE`).
Prints a table and writes JSON. Needs a GPU:

    python3 benchmarks/verify_sweep.py [--old FILE] [--json out.json]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))

import torch  # noqa: E402
import triton  # noqa: E402

from convgen import verify  # noqa: E402
from convgen.kernels import verify_stats  # noqa: E402

# rows x iters, warps, pipeline stages, elements per thread-row (MAX_VEC)
SHAPES = [(128, 64, 4, 3, 4), (128, 64, 4, 1, 4), (128, 32, 4, 3, 4), (128, 128, 4, 3, 4),
          (256, 64, 8, 3, 4), (64, 64, 2, 3, 4), (128, 64, 4, 3, 8), (128, 32, 4, 3, 8)]


def _load(path: str):
    spec = importlib.util.spec_from_file_location("verify_stats_old", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=100_000_000)
    ap.add_argument("--old", help="another verify_stats.py to time with its own defaults")
    ap.add_argument("--json", default="verify_sweep.json")
    args = ap.parse_args()
    n = args.elements
    g = torch.Generator(device="cuda").manual_seed(0)
    ref16 = (torch.rand(n, device="cuda", generator=g) * 4 - 2).half()
    kern = ref16.clone()
    kern[::1000] = (kern[::1000].float() * (1 + 2 ** -10)).half()
    consts = verify._Consts(1e-3, False, 10, -14).tensor("cuda")
    src = torch.empty(n * 10 // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    copy_gbs = 2 * src.numel() * 4 / triton.testing.do_bench(
        lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median") / 1e6
    del src, dst
    versions = [("new", verify_stats, SHAPES)]
    if args.old:
        versions.insert(0, ("old", _load(args.old), [None]))
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, {n} elements, copy {copy_gbs:.0f} GB/s")
    print(f"{'version':8} {'case':16} {'rows x iters, warps, stages, vec':36} {'ms':>7} {'GB/s':>6} {'of copy':>7}")
    for case, ref in (("fp16 vs fp16", ref16), ("fp16 vs float64", ref16.double())):
        for version, mod, shapes in versions:
            defaults = {k: getattr(mod, k) for k in ("ROWS", "ITERS", "STAGES", "MAX_VEC",
                                                     "COMPILE_OPTIONS")
                        if hasattr(mod, k)}
            for shape in shapes:
                if shape:
                    mod.ROWS, mod.ITERS, mod.STAGES, mod.MAX_VEC = shape[0], shape[1], *shape[3:]
                    mod.COMPILE_OPTIONS = {**defaults["COMPILE_OPTIONS"], "num_warps": shape[2]}
                fn = lambda: mod.device_totals(kern, ref, consts, is_int=False, mantissa=10, emin=-14)
                try:
                    fn()
                    ms = triton.testing.do_bench(fn, warmup=5, rep=100, return_mode="median")
                except Exception as e:  # a shape that does not compile is a result, not a crash
                    print(f"{version:8} {case:16} {str(shape):36} failed: {str(e).splitlines()[-1][:120]}")
                    continue
                gbs = n * (kern.element_size() + ref.element_size()) / ms / 1e6
                label = (f"{shape[0]}x{shape[1]}, {shape[2]}w, {shape[3]}st, vec {shape[4]}" if shape
                         else "its default")
                rows.append({"version": version, "case": case, "shape": shape, "ms": ms, "gbs": gbs,
                             "fraction_of_copy": gbs / copy_gbs})
                print(f"{version:8} {case:16} {label:36} {ms:7.3f} {gbs:6.0f} {gbs / copy_gbs:7.2f}",
                      flush=True)
            for k, v in defaults.items():
                setattr(mod, k, v)
        del ref
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                   "triton": triton.__version__, "elements": n, "copy_gbs": copy_gbs,
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()

"""Verify a pair of large tensors on the device; compare with the copy bandwidth and the CPU path.

Prints a table and writes JSON. Needs a GPU. Usage:

    python benchmarks/bench_verify.py [--elements 100000000] [--json out.json] [--cpu]

Three cases: an fp16 pair (kernel output and reference both fp16, as convgen
hands them over), fp16 against a float64 reference (what `convgen compare`
builds from .npy dumps), and an fp16 pair held in two memory orders (NCHW and
NHWC: the strided path). Bytes counted: both tensors, each read once. The time
is the whole verify() call (statistics, worst elements, thresholds, report); the
"kernels" columns time the device work alone (verify_stats.device_totals: its three
kernels and the one copy back). The copy bandwidth is a large device-to-device copy (read + write).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tools"))

import torch  # noqa: E402
import triton  # noqa: E402

from convgen.tolerance import Thresholds  # noqa: E402
from convgen.tolerance import Accumulation  # noqa: E402
from convgen.kernels import verify_stats  # noqa: E402
from convgen.verify import _Consts, verify  # noqa: E402


def _time(fn) -> float:
    fn()   # compile
    torch.cuda.synchronize()
    return triton.testing.do_bench(fn, warmup=5, rep=100, return_mode="median")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=100_000_000)
    ap.add_argument("--json", default="bench_verify.json")
    ap.add_argument("--cpu", action="store_true", help="also time the CPU path (slow)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_verify: needs a GPU")
    n = args.elements
    g = torch.Generator(device="cuda").manual_seed(0)
    ref16 = (torch.rand(n, device="cuda", generator=g) * 4 - 2).half()
    kern = ref16.clone()
    kern[::1000] = (kern[::1000].float() * (1 + 2 ** -10)).half()  # some one-ULP differences
    acc = Accumulation(n=576, u_comp=0.0, u_acc=2.0 ** -24)
    th = Thresholds()

    src = torch.empty(n * 10 // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6
    del src, dst

    rows = []
    consts = _Consts(1e-3, False, 10, -14).tensor("cuda")
    # a third pair: the first pair's values, the reference held channels-last (logical NCHW
    # both): the kernels' strided path, whose sizes and strides are runtime integers
    b = max(1, n // (64 * 56 * 56))
    kern4 = kern[:b * 64 * 56 * 56].view(b, 64, 56, 56)
    ref4 = ref16[:b * 64 * 56 * 56].view(b, 64, 56, 56).contiguous(memory_format=torch.channels_last)
    for name, k, ref in (("fp16 vs fp16", kern, ref16), ("fp16 vs float64", kern, ref16.double()),
                         ("fp16, two orders", kern4, ref4)):
        m = k.numel()
        ms = _time(lambda: verify(k, ref, torch.float16, th, acc))
        # the device work alone: the three kernels and the one copy back, no report
        stats_ms = _time(lambda: verify_stats.device_totals(k, ref, consts, is_int=False,
                                                            mantissa=10, emin=-14))
        gbs = m * (k.element_size() + ref.element_size()) / ms / 1e6
        row = {"case": name, "elements": m, "gpu_ms": ms, "gpu_gbs": gbs,
               "fraction_of_copy": gbs / copy_gbs, "device_totals_ms": stats_ms,
               "device_totals_fraction_of_copy": gbs * ms / stats_ms / copy_gbs}
        if args.cpu:
            kc, rc = k.cpu(), ref.cpu()
            t0 = time.perf_counter()
            verify(kc, rc, torch.float16, th, acc)
            row["cpu_s"] = time.perf_counter() - t0
            row["speedup_vs_cpu"] = row["cpu_s"] * 1e3 / ms
        rows.append(row)
        del ref
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "triton": triton.__version__, "copy_gbs": copy_gbs, "rows": rows}
    print(f"device: {out['device']}, {n} elements, copy {copy_gbs:.0f} GB/s (read + write)")
    print(f"{'case':18} {'verify ms':>10} {'GB/s':>8} {'of copy':>8} {'kernels ms':>11} "
          f"{'of copy':>8} {'cpu s':>8} {'speed-up':>9}")
    for r in rows:
        print(f"{r['case']:18} {r['gpu_ms']:10.3f} {r['gpu_gbs']:8.0f} {r['fraction_of_copy']:8.2f} "
              f"{r['device_totals_ms']:11.3f} {r['device_totals_fraction_of_copy']:8.2f} "
              f"{r.get('cpu_s', float('nan')):8.2f} {r.get('speedup_vs_cpu', float('nan')):9.1f}")
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

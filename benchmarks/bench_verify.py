"""Verify a pair of large fp16 tensors on the device and compare with the copy bandwidth and the CPU path.

Prints a table and writes JSON. Needs a GPU. Usage:

    python benchmarks/bench_verify.py [--elements 100000000] [--json out.json] [--cpu]

Bytes counted: the kernel output (2 bytes/element, fp16) plus the reference
(8 bytes/element, float64, as convgen hands it over), each read once.
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

from convgen.options import Thresholds  # noqa: E402
from convgen.tolerance import Accumulation  # noqa: E402
from convgen.verify import verify  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--elements", type=int, default=100_000_000)
    ap.add_argument("--json", default="bench_verify.json")
    ap.add_argument("--cpu", action="store_true", help="also time the CPU path (slow)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_verify: needs a GPU")
    n = args.elements
    ref16 = (torch.rand(n, device="cuda", dtype=torch.float32) * 4 - 2).half()
    ref = ref16.double()
    kern = ref16.clone()
    kern[::1000] = (kern[::1000].float() * (1 + 2 ** -10)).half()  # some one-ULP differences
    acc = Accumulation(n=576, u_comp=0.0, u_acc=2.0 ** -24)
    th = Thresholds()

    # copy bandwidth: a large device-to-device copy, bytes read + written
    src = torch.empty(n * 10 // 4, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=25, rep=200, return_mode="median")
    copy_gbs = 2 * src.numel() * 4 / copy_ms / 1e6

    verify(kern, ref, torch.float16, th, acc)  # compile
    torch.cuda.synchronize()
    gpu_ms = triton.testing.do_bench(lambda: verify(kern, ref, torch.float16, th, acc),
                                     warmup=5, rep=50, return_mode="median")
    bytes_read = n * (2 + 8)
    gpu_gbs = bytes_read / gpu_ms / 1e6
    row = {"device": torch.cuda.get_device_name(), "elements": n, "gpu_ms": gpu_ms,
           "gpu_gbs": gpu_gbs, "copy_gbs": copy_gbs, "fraction_of_copy": gpu_gbs / copy_gbs}
    if args.cpu:
        kc, rc = kern.cpu(), ref.cpu()
        t0 = time.perf_counter()
        verify(kc, rc, torch.float16, th, acc)
        row["cpu_s"] = time.perf_counter() - t0
        row["speedup_vs_cpu"] = row["cpu_s"] * 1e3 / gpu_ms
    print(f"device: {row['device']}, {n} fp16 elements (+ float64 reference)")
    print(f"{'copy GB/s':>10} {'verify ms':>10} {'verify GB/s':>12} {'of copy':>8} {'cpu s':>8} {'speed-up':>9}")
    print(f"{copy_gbs:10.0f} {gpu_ms:10.2f} {gpu_gbs:12.0f} {row['fraction_of_copy']:8.2f} "
          f"{row.get('cpu_s', float('nan')):8.2f} {row.get('speedup_vs_cpu', float('nan')):9.1f}")
    with open(args.json, "w") as f:
        json.dump(row, f, indent=1)


if __name__ == "__main__":
    main()

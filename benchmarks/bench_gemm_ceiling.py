"""Where a fwd gap to cuDNN comes from: per ResNet-50 fwd layer (batch 256), ours (the tuning
database's config) and cuDNN side by side (bench_conv.bench_one), then a GEMM of the same size
(M = N*Ho*Wo, N = K, reduction C*Y*X, its A materialized) in cuBLAS (torch.mm) and in a plain
Triton descriptor matmul (the best of a small sweep, plain and persistent). A 1x1 layer is that
GEMM, so ours against the plain Triton matmul there is the conv kernel's own overhead; a 3x3
layer's GEMM reads a 9x larger A, so its GEMM times are no ceiling (docs/conv-benchmark.md).

    python benchmarks/bench_gemm_ceiling.py OUT.json [f16|bf16]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_conv  # noqa: E402 (puts tools/ on the path)
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from convtune import tuning_db  # noqa: E402
from convtune import store  # noqa: E402

from convgen.kernels.common import tile_ids  # noqa: E402


@triton.jit
def mm_kernel(a_desc, b_desc, c_desc, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
              GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    """C = A @ B.T, A (M, K) and B (N, K) row-major: one tile per program, or with NUM_SMS
    that many programs walking the tiles (the next tile's loads under this one's store)."""
    tiles = tl.cdiv(M, BM) * tl.cdiv(N, BN)
    step = tiles if NUM_SMS == 0 else NUM_SMS
    for t in tl.range(tl.program_id(0), tiles, step, flatten=True):
        # GEMM rows M and columns N of tile t, GROUP_M tile rows at a time
        pid_m, pid_n = tile_ids(t, M, N, BM, BN, GROUP_M)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BK)):
            # GEMM reduction K: block k of A's row block and of B's
            a = a_desc.load([pid_m * BM, k * BK])
            b = b_desc.load([pid_n * BN, k * BK])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(c_desc.dtype))


# largest |C - A@B| / max|A@B| of a right fp32-accumulated product over reductions of up
# to ~4608 terms, rounded to the type (above it, the matmul is wrong)
MAX_ERR = {"f16": 2e-3, "bf16": 1.6e-2}
CONFIGS = [(128, 128, 64, 4, 8), (128, 128, 64, 3, 8), (128, 256, 64, 3, 8), (128, 256, 64, 4, 8),
           (256, 128, 64, 3, 8), (128, 128, 128, 3, 8), (128, 64, 64, 4, 4), (64, 128, 64, 4, 4)]


def triton_mm(a, b, c, cfg, persistent, sms):
    BM, BN, BK, stages, warps = cfg
    M, K = a.shape
    N = b.shape[0]
    ad = TensorDescriptor.from_tensor(a, [BM, BK])
    bd = TensorDescriptor.from_tensor(b, [BN, BK])
    cd = TensorDescriptor.from_tensor(c, [BM, BN])
    tiles = triton.cdiv(M, BM) * triton.cdiv(N, BN)
    grid = (min(sms, tiles),) if persistent else (tiles,)
    return lambda: mm_kernel[grid](ad, bd, cd, M, N, K, BM, BN, BK, 8, sms if persistent else 0,
                                   num_stages=stages, num_warps=warps)


def main():
    out = sys.argv[1]
    dtype = sys.argv[2] if len(sys.argv) > 2 else "f16"
    tdt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    torch.backends.cudnn.benchmark = True
    be = bench_conv.current()
    name = torch.cuda.get_device_name()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    db = store.resolve("")   # the local store of tuning/data
    rows = []
    for layer in bench_conv.RESNET50:
        c, k, hw, f, s, pad, g = layer
        t0 = time.time()
        # per launch, as the GEMMs below are timed, so conv and GEMM compare like for like
        # (bench_conv's own command line times graphs by default)
        r = bench_conv.bench_one(layer, "fwd", dtype, 256, True, be, name, db, graph=False)
        if "error" in r:
            print(f"{r['layer']:26} our kernel did not run: {r['error']}", flush=True)
            continue
        ho = (hw + 2 * pad - f) // s + 1
        M, N, K = 256 * ho * ho, k, c * f * f
        a = torch.randn(M, K, device="cuda", dtype=tdt)
        b = torch.randn(N, K, device="cuda", dtype=tdt)
        cc = torch.empty(M, N, device="cuda", dtype=tdt)
        cublas = triton.testing.do_bench(lambda: torch.mm(a, b.t(), out=cc), warmup=10, rep=40,
                                         return_mode="median")
        best = None
        tri = {}
        for cfg in CONFIGS:
            for pers in (0, 1):
                try:
                    fn = triton_mm(a, b, cc, cfg, pers, sms)
                    fn()
                    torch.cuda.synchronize()
                    ms = triton.testing.do_bench(fn, warmup=10, rep=40, return_mode="median")
                except Exception as e:  # noqa: BLE001
                    tri[f"{cfg}/{pers}"] = str(e)[:80]
                    continue
                tri[f"{cfg}/{pers}"] = ms
                if best is None or ms < best[0]:
                    best = (ms, cfg, pers)
        if best is None:
            print(r["layer"], "no triton config ran:", list(tri.values())[:1], flush=True)
            continue
        ref = a.float() @ b.float().t()
        fn = triton_mm(a, b, cc, best[1], best[2], sms)
        fn()
        err = ((cc.float() - ref).abs().max() / ref.abs().max()).item()
        if err > MAX_ERR[dtype]:
            # a wrong matmul is no ceiling: say so and leave the layer out
            print(f"{r['layer']:26} the Triton matmul's result is off by {err:.1e}", flush=True)
            continue
        flops = 2 * M * N * K
        row = {"layer": r["layer"], "gemm": [M, N, K], "ours_ms": r.get("our_ms"), "cudnn_ms": r.get("vendor_ms"),
               "ours_config": r["config"], "cublas_ms": cublas, "triton_ms": best[0],
               "triton_config": list(best[1]) + [best[2]], "triton_err": err, "triton_all": tri}
        for key in ("ours", "cudnn", "cublas", "triton"):
            if row[f"{key}_ms"]:
                row[f"{key}_tflops"] = flops / row[f"{key}_ms"] / 1e9
        rows.append(row)
        print(f"{r['layer']:26} ours {row['ours_ms']:.4f} cudnn {row['cudnn_ms']:.4f} cublas {cublas:.4f} "
              f"triton {best[0]:.4f} {best[1]}/{best[2]}  TF ours {row['ours_tflops']:.0f} cudnn "
              f"{row['cudnn_tflops']:.0f} cublas {row['cublas_tflops']:.0f} triton {row['triton_tflops']:.0f} "
              f"({time.time() - t0:.1f}s)", flush=True)
        with open(out, "w") as fh:
            json.dump({"device": name, "triton": triton.__version__, "dtype": dtype, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()

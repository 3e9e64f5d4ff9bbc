"""Which part of the verifier's statistics kernel costs what: variants with one part removed.

Writes each variant of tools/convgen/kernels/verify_stats.py into .scratch/ (ignored by
git), times device_totals on 100M fp16 pairs for three block shapes, prints one line each
(docs/verify-benchmark.md). Needs a GPU:  python3 benchmarks/verify_ablation.py
"""
import importlib.util
import os
import sys
sys.path.insert(0, "tools")
import torch, triton
from convgen import verify, tolerance
src = open("tools/convgen/kernels/verify_stats.py").read()
VARIANTS = {
    "full": [],
    "no_hist": [("hist += tl.histogram(code, _NBINS_C)", "hist += tl.zeros([_NBINS_C], dtype=tl.int32) + tl.sum(code, axis=0)")],
    "no_div": [("rel = tl.where(pos, d / tl.where(pos, avf, 1.0), 0.0)", "rel = tl.where(pos, d * avf, 0.0)")],
    "no_idx": [("return tl.where(take, x, m), tl.where(take, at, i)", "return tl.maximum(x, m), i")],
    "no_buckets": [("eb += (ulps >= tl.load(c_ptr + 2 + _REL_EDGES_C + j)).to(tl.int32)", "eb += 0"),
                   ("rb += (rel_old >= tl.load(c_ptr + 2 + j)).to(tl.int32)", "rb += 0")],
    "loads_only": [("hist += tl.histogram(code, _NBINS_C)", "hist += tl.zeros([_NBINS_C], dtype=tl.int32) + tl.sum(code, axis=0)"),
                   ("rel = tl.where(pos, d / tl.where(pos, avf, 1.0), 0.0)", "rel = tl.where(pos, d * avf, 0.0)"),
                   ("return tl.where(take, x, m), tl.where(take, at, i)", "return tl.maximum(x, m), i")],
}
n = 100_000_000
g = torch.Generator(device="cuda").manual_seed(0)
ref = (torch.rand(n, device="cuda", generator=g) * 4 - 2).half()
kern = ref.clone(); kern[::1000] = (kern[::1000].float() * (1 + 2 ** -10)).half()
c = verify._Consts(1e-3, False, 10, -14).tensor("cuda")
os.makedirs(".scratch", exist_ok=True)
for name, subs in VARIANTS.items():
    s = src
    for a, b in subs:
        assert a in s, a
        s = s.replace(a, b)
    path = f".scratch/vs_{name}.py"
    open(path, "w").write(s)
    spec = importlib.util.spec_from_file_location(f"vs_{name}", path)
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    for block, iters, warps in ((512, 32, 4), (256, 64, 4), (1024, 16, 8)):
        mod.BLOCK, mod.ITERS = block, iters
        mod.COMPILE_OPTIONS = {"enable_fp_fusion": False, "num_warps": warps}
        fn = lambda: mod.device_totals(kern, ref, c, is_int=False, mantissa=10, emin=-14)
        try:
            fn()
            ms = triton.testing.do_bench(fn, warmup=5, rep=60, return_mode="median")
            print(f"{name:11} B={block} I={iters} W={warps} {ms:6.3f} ms {4e2/ms:6.0f} GB/s", flush=True)
        except Exception as e:
            print(name, "ERR", str(e)[-300:], flush=True)

"""`convgen compare`: verify two saved arrays, with no kernel and no convolution.

The arrays are read from .npy files (a `--dump` of convgen writes them). The type is
the convolution's: the arrays are compared in its output type (f16 -> f16, i8 -> i32,
fp8 -> f32). The reference is widened to float64 and rounded once to the output type,
as a conv reference is; the kernel array is cast to the output type. The flags are
read by cli.py; this module loads, checks and verifies.
"""
from __future__ import annotations

from convgen import report
from convgen.errors import ConvgenError
from convgen.options import CompareConfig


def _load(path: str, what: str):
    import numpy as np
    try:
        arr = np.load(path, allow_pickle=False)
    except OSError as e:
        raise ConvgenError(f"cannot read '{path}': {e.strerror or e}", field=what) from None
    except (ValueError, EOFError) as e:
        raise ConvgenError(f"cannot read '{path}' as .npy: {e}", field=what) from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiub":
        raise ConvgenError(f"'{path}' does not hold a real numeric array", field=what)
    return arr


def _tensors(cfg: CompareConfig):
    import numpy as np
    import torch
    out = cfg.dtype.out_type
    kern, ref = _load(cfg.kern_path, "kern"), _load(cfg.ref_path, "ref")
    if kern.shape != ref.shape:
        raise ConvgenError(f"shapes differ: the kernel array is {kern.shape}, the reference "
                           f"{ref.shape}")
    if kern.size == 0:
        raise ConvgenError(f"the arrays hold no elements (shape {kern.shape}): nothing to compare")
    ref64 = torch.from_numpy(np.array(ref, dtype=np.float64, ndmin=0))
    # Round the reference once to the output type, as the kernel's result was.
    ref64 = ref64.round() if out.is_int else ref64.to(out.torch_dtype).to(torch.float64)
    kern_t = torch.from_numpy(np.array(kern, ndmin=0)).to(out.torch_dtype)
    return kern_t, ref64, out


def run(cfg: CompareConfig) -> int:
    from convgen import tolerance, verify   # torch
    report.check_paths(cfg.json_path, None)
    kern, ref, out = _tensors(cfg)
    n = cfg.accumulate or 1
    accum = tolerance.summing(cfg.dtype, n) if cfg.accumulate else None
    names = "ngkhw" if kern.dim() == 5 else None
    verdict = verify.verify(kern, ref, out, cfg.thresholds, accum=accum, dim_names=names)
    cmp = cfg.comparison
    if cmp.comparator != "convgen":
        # saved arrays say nothing of their data: allclose's atol takes random data's term
        limits = tolerance.rocmlir_limits(cmp.comparator, cfg.dtype, cfg.thresholds, cmp.atol,
                                          cmp.rtol, n, random=True)
        verdict = verify.rocmlir_verdict(verdict, kern, ref, limits, dim_names=names)
    if cfg.json_path:
        report.write_json(cfg.json_path, report.to_json(verdict))
    report.emit(verdict, cfg.print_results)
    return 0

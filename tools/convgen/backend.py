"""Which device runs the kernels, and what that device needs to know.

The only module that asks "is this the interpreter, CUDA or HIP?". Everything
else asks this module for a torch device, a target, or launch options.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass

# Triton 3.9 warns when this is unset; the FMA path is meant to fuse a*b+c.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

AMD_ONLY_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")


@dataclass(frozen=True)
class Backend:
    kind: str          # "interpreter", "cuda" or "hip"
    arch: str          # "interpreter", "sm90", "gfx90a", ...
    warp_size: int

    @property
    def interpreter(self) -> bool:
        return self.kind == "interpreter"

    @property
    def is_hip(self) -> bool:
        return self.kind == "hip"

    @property
    def torch_device(self) -> str:
        # ROCm builds of torch call their GPU "cuda" too.
        return "cpu" if self.interpreter else "cuda"

    @property
    def flushes_fp16_subnormals(self) -> bool:
        """MI200 (gfx90a) matrix instructions flush fp16/bf16 subnormals; MI100 and NVIDIA do not."""
        return self.arch == "gfx90a"

    @property
    def has_matrix_cores(self) -> bool:
        if self.kind == "cuda":
            return int(self.arch[2:]) >= 70
        if self.kind == "hip":
            return self.arch.startswith(("gfx908", "gfx90a", "gfx94", "gfx95"))
        return True  # the interpreter emulates tl.dot

    def launch_options(self, options: dict) -> dict:
        """Drop AMD-only compile options unless the backend is HIP (CUDA raises KeyError on them)."""
        if self.is_hip:
            return dict(options)
        return {k: v for k, v in options.items() if k not in AMD_ONLY_OPTIONS}


@functools.lru_cache(maxsize=1)
def current() -> Backend:
    # Check the interpreter first: with no GPU the driver raises.
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return Backend("interpreter", "interpreter", 1)
    import torch
    if not torch.cuda.is_available():
        return Backend("interpreter", "interpreter", 1)
    from triton.runtime import driver
    target = driver.active.get_current_target()
    if target.backend == "hip":
        return Backend("hip", str(target.arch).split(":")[0], target.warp_size)
    return Backend("cuda", f"sm{target.arch}", target.warp_size)


def ensure_interpreter_if_no_gpu() -> None:
    """Switch Triton to its interpreter when there is no GPU; must run before kernels are defined."""
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return
    import torch
    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
        current.cache_clear()

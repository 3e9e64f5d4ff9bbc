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
# the `-t` names (dtypes.py) of the fp8 types, whose support depends on the device
FP8_TYPES = ("fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz")


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
    def sm(self) -> int:
        """NVIDIA compute capability as a number (sm90 -> 90); 0 elsewhere."""
        digits = "".join(ch for ch in self.arch if ch.isdigit()) if self.kind == "cuda" else ""
        return int(digits or 0)

    @property
    def has_matrix_cores(self) -> bool:
        if self.kind == "cuda":
            return self.sm >= 70
        if self.kind == "hip":
            return self.arch.startswith(("gfx908", "gfx90a", "gfx94", "gfx95"))
        return True  # the interpreter emulates tl.dot

    def type_unsupported(self, type_name: str) -> str | None:
        """Why this device cannot run `-t type_name`, or None when it can.

        Only fp8 is limited. What Triton can compile was checked by cross-compiling
        (tests/test_isa.py): OCP fp8 dots need sm89+ on NVIDIA (sm80 has no e4m3
        conversion); AMD gfx90a/gfx942 run OCP fp8 on fp16 matrix cores after an
        exact upcast (not e5m2 on gfx90a, whose fp16 path flushes e5m2's subnormals),
        gfx950 natively; the fnuz formats are gfx942's own (gfx950
        upcasts them), and NVIDIA has none. The interpreter emulates all of them.
        """
        if not type_name.startswith("fp8") or self.interpreter:
            return None
        fnuz = type_name.endswith("fnuz")
        if self.kind == "cuda":
            if fnuz:
                return f"-t {type_name} (AMD's fnuz fp8) is not supported on NVIDIA GPUs ({self.arch})"
            if self.sm < 89:
                return f"-t {type_name} needs an NVIDIA GPU of sm89 or newer, this one is {self.arch}"
            return None
        ok = ("gfx94", "gfx95") if fnuz else ("gfx90a", "gfx94", "gfx95")
        if not self.arch.startswith(ok):
            return f"-t {type_name} is not supported on {self.arch} (supported: {', '.join(ok)}*)"
        if type_name == "fp8_e5m2" and self.flushes_fp16_subnormals:
            # its subnormals become fp16 subnormals, which MI200's fp16 matrix path flushes
            return f"-t {type_name} is not supported on {self.arch} (its fp16 matrix path flushes e5m2 subnormals)"
        return None

    def dot_u_acc(self, type_name: str, max_num_imprecise_acc: int | None) -> float | None:
        """The accumulator's unit roundoff on the matrix-core path when it is not fp32's.

        Hopper's fp8 units (wgmma, sm90) keep about 14 bits while they sum products,
        then hand the sum to the fp32 accumulator. Triton promotes to fp32 after every
        instruction when max_num_imprecise_acc is 0 (convgen's default for fp8); None is
        Triton's own default, 2^30 on sm90 (never promote) and 0 elsewhere. Measured on
        an H100 (docs/fp8-tf32-h100.md): exact with 0, RMS about 6e-5 of max|val| with
        Triton's default. 2^-15 with the verifier's 2*u_acc for truncation is 14 bits.
        Other NVIDIA archs, AMD's fp8 MFMA and the interpreter accumulate in fp32.
        """
        if (self.kind == "cuda" and self.arch == "sm90" and type_name in FP8_TYPES
                and (max_num_imprecise_acc is None or max_num_imprecise_acc > 0)):
            return 2.0 ** -15
        return None

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

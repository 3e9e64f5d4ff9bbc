"""Cross-compile the kernels for a GPU that is not here, to prove which instructions they use.

`triton.compile` with an explicit GPUTarget needs no hardware, so CI can check
that the matrix-core path emits `v_mfma` (AMD) or `mma`/`wgmma` (NVIDIA) and
that the FMA path and the GPU reference emit none.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import re

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

TARGETS = {
    "gfx90a": GPUTarget("hip", "gfx90a", 64),
    "gfx942": GPUTarget("hip", "gfx942", 64),
    "gfx950": GPUTarget("hip", "gfx950", 64),
    "sm90": GPUTarget("cuda", 90, 32),
    "sm80": GPUTarget("cuda", 80, 32),
}
MATRIX_RE = {"hip": re.compile(r"\bv_mfma\w*"), "cuda": re.compile(r"\b(?:wgmma|mma)\.[\w.]+")}
_TRITON_TYPES = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int8": "i8",
                 "int32": "i32", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5"}


def compilable(module_name: str):
    """A fresh copy of a kernel module whose @triton.jit functions compile for real.

    Under TRITON_INTERPRET=1 `triton.jit` returns interpreter objects that
    cannot be compiled, so the module is executed again with it switched off.
    """
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "0"
    try:
        spec = importlib.util.find_spec(module_name)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old
    return mod


def pointer_type(dtype) -> str:
    return "*" + _TRITON_TYPES[str(dtype).replace("torch.", "")]


def compile_kernel(fn, args: dict, constexprs: dict, target: str, options: dict | None = None):
    """Compile `fn` for `target`; `args` maps each runtime parameter to a Triton type string."""
    params = [p for p in inspect.signature(fn.fn if hasattr(fn, "fn") else fn).parameters]
    signature = {}
    for name in params:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in args:
            signature[name] = args[name]
        else:
            raise KeyError(f"no type given for kernel parameter '{name}'")
    src = ASTSource(fn, signature, constexprs={k: v for k, v in constexprs.items()})
    tgt = TARGETS[target]
    opts = dict(options or {})
    if tgt.backend != "hip":
        opts = {k: v for k, v in opts.items() if k not in ("waves_per_eu", "matrix_instr_nonkdim", "kpack")}
    return triton.compile(src, target=tgt, options=opts)


def assembly(compiled, target: str) -> str:
    return compiled.asm["amdgcn" if TARGETS[target].backend == "hip" else "ptx"]


def matrix_instructions(compiled, target: str) -> list[str]:
    """The distinct matrix-core instructions in the compiled kernel (empty on a pure FMA kernel)."""
    asm = assembly(compiled, target)
    return sorted(set(MATRIX_RE[TARGETS[target].backend].findall(asm)))

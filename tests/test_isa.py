"""Which instructions each kernel path compiles to, on GPUs we do not have.

The matrix-core path must contain matrix instructions (v_mfma on AMD, mma or
wgmma on NVIDIA) and the FMA path none, for every direction; otherwise the
-x2 switch would test nothing.
"""
import pytest
import torch

from convgen.backend import Backend
from convgen.dtypes import elem_type
from convgen.kernels import isa
from convgen.kernels.config import choose
from convgen.kernels.launch import gemm_spec
from convgen.problem import make_problem

AMD = ["gfx90a", "gfx942", "gfx950"]
NVIDIA = ["sm90"]
KERNELS = isa.compilable("convgen.kernels.implicit_gemm")


def _compile(direction, dtype, use_dot, target, layouts=None, stride=(1, 1)):
    p = make_problem(direction=direction, dtype=elem_type(dtype), n=2, g=1, c_total=32, k_total=64,
                     hi=14, wi=14, y=3, x=3, stride=stride, pad=(1, 1, 1, 1), layouts=layouts)
    kind = "hip" if target.startswith("gfx") else "cuda"
    be = Backend(kind, target, 64 if kind == "hip" else 32)
    cfg = choose(p, be, use_dot, "split=2" if direction == "bwd_weight" else None)
    meta = {}
    for name in p.reads + (p.writes,):
        dt = p.dtype.torch_out if name == p.writes else p.dtype.torch_in
        meta[name] = torch.empty(p.physical_shape(name), dtype=dt, device="meta").permute(
            p.to_logical_perm(name))
    spec = gemm_spec(p, {k: meta[k] for k in p.reads}, meta[p.writes], cfg, use_dot, False)
    args = {k: (isa.pointer_type(v.dtype) if isinstance(v, torch.Tensor) else "i32")
            for k, v in spec.runtime.items()}
    return isa.compile_kernel(KERNELS.conv_gemm_kernel, args, spec.constexprs, target,
                              be.launch_options(cfg.compile_options()))


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_matrix_core_path_uses_matrix_instructions(direction, target):
    k = _compile(direction, "f16", True, target, stride=(2, 2))
    found = isa.matrix_instructions(k, target)
    assert found, f"{direction} -x2 on {target}: no matrix instruction"
    if target.startswith("gfx"):
        assert all(i.startswith("v_mfma") for i in found)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_fma_path_has_no_matrix_instructions(direction, target):
    k = _compile(direction, "f16", False, target, stride=(2, 2))
    assert isa.matrix_instructions(k, target) == []
    asm = isa.assembly(k, target)
    assert ("v_fma" in asm or "v_pk_fma" in asm or "v_fmac" in asm) if target.startswith("gfx") \
        else ("fma.rn.f32" in asm)


@pytest.mark.parametrize("dtype", ["f32", "bf16", "i8"])
def test_matrix_core_path_other_types_gfx942(dtype):
    direction = "fwd"
    k = _compile(direction, dtype, True, "gfx942", layouts={"input": "nhwc", "filter": "kyxc",
                                                            "output": "nhwk"})
    assert isa.matrix_instructions(k, "gfx942")


def test_fp32_ieee_dot_on_nvidia_is_not_tf32():
    # fp32 tl.dot defaults to tf32 on NVIDIA; the kernel must ask for ieee.
    k = _compile("fwd", "f32", True, "sm90")
    asm = isa.assembly(k, "sm90")
    assert "tf32" not in asm

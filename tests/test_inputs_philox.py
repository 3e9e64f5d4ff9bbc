"""Inputs drawn with Philox (kernels/draw.py): the kernel (in the interpreter here, on the
GPU on a GPU machine) gives the numpy generator's numbers bit for bit, whatever the size,
seed, type or range; the draws cover their range; the AMD and NVIDIA compiles keep the
float arithmetic unfused, as the interpreter computes it."""
import json

import numpy as np
import pytest
import torch

from convgen import dtypes
from convgen.backend import current
from convgen.inputs import make_inputs
from convgen.kernels import draw
from convgen.options import DataSpec
from convgen.problem import make_problem

from test_isa import compile_here

BE = current()
DEVICE = BE.torch_device


def _bits(t):
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]).cpu()


@pytest.mark.parametrize("numel,seed,lo,hi,ints,both,dtype", [
    (1, 1, -1.0, 1.0, False, False, "f32"),
    (1031, 1000004, -1.0, 1.0, False, False, "f32"),           # a prime: a partial last block
    (70001, 2**40 + 12345, 1.0, 3.0, False, True, "f16"),     # both signs; a 64-bit seed
    (4099, 7, -3.0, 3.0, False, False, "bf16"),
    (5000, 3, -5, 4, True, False, "f16"),                     # rocMLIR-style integers
    (3001, 11, -128, 127, True, False, "i8"),
    (2048, 13, 0, 2**32 - 1, True, False, "f32"),             # the widest integer range
    (777, 17, 0.5, 0.75, False, True, "fp8_e4m3"),
])
def test_the_kernel_draws_the_numpy_generators_numbers(numel, seed, lo, hi, ints, both, dtype):
    t = torch.empty(numel, dtype=dtypes.elem_type(dtype).torch_dtype, device=DEVICE)
    draw.fill_uniform(t, seed, lo, hi, ints, both, BE.interpreter)
    expected = torch.from_numpy(draw.uniform_numpy(numel, seed, lo, hi, ints, both)).to(t.dtype)
    assert torch.equal(_bits(t), _bits(expected))


def test_the_numpy_generator_is_philox_4x32_10():
    """Known-answer vectors of Random123's Philox-4x32-10 (kat_vectors: counter and key
    all zeros, and all ones), reached through the one counter word and seed we use."""
    w = draw.philox(0, np.array([0], dtype=np.uint64))
    assert [int(x[0]) for x in w] == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]


def test_draws_cover_their_range():
    n = 200_000
    x = draw.uniform_numpy(n, 5, 1.0, 3.0, False, True)
    mag = np.abs(x)
    assert mag.min() >= 1.0 and mag.max() < 3.0 and abs(mag.mean() - 2.0) < 0.01
    assert abs((x < 0).mean() - 0.5) < 0.01
    ints = draw.uniform_numpy(n, 6, -5, 4, True, False)
    assert set(np.unique(ints)) == set(range(-5, 5))
    assert abs(np.mean(ints) - (-0.5)) < 0.05
    # different seeds, different streams
    assert not np.array_equal(draw.uniform_numpy(64, 1, 0, 1, False, False),
                              draw.uniform_numpy(64, 2, 0, 1, False, False))


def test_inputs_are_the_same_on_the_host_and_the_device():
    p = make_problem(direction="fwd", dtype=dtypes.elem_type("f16"), n=2, g=1, c_total=5, k_total=7,
                     hi=9, wi=7, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    spec = DataSpec(seed=42, lo=1.0, hi=3.0, both_signs=True)
    here = make_inputs(p, spec, DEVICE)
    host = make_inputs(p, spec, "cpu")
    for name in p.reads:
        assert torch.equal(_bits(here[name].contiguous()), _bits(host[name].contiguous()))
    assert not torch.equal(here["input"].flatten()[:10].cpu(), here["filter"].flatten()[:10].cpu())


CROSS = """
import json, re, sys
from convgen.kernels import draw
from convaudit import isa
out = {}
for target in ("sm90", "gfx90a", "gfx942"):
    for fusion in (False, True):
        k = isa.compile_kernel(draw.uniform_kernel, {"out_ptr": "*fp32", "numel": "i32", "seed": "i64",
                               "lo": "fp32", "span": "fp32", "count": "i64"},
                               {"INT": False, "BOTH_SIGNS": True, "BLOCK": 1024}, target,
                               {"enable_fp_fusion": fusion})
        out[f"{target} {fusion}"] = isa._has_fma(isa.assembly(k, target), target)
print(json.dumps(out))
"""


def test_amd_and_nvidia_compiles_compute_lo_plus_r_span_unfused():
    fused = json.loads(compile_here("-c", CROSS).stdout)
    for target in ("sm90", "gfx90a", "gfx942"):
        assert fused[f"{target} False"] is False, f"{target}: an FMA where the interpreter rounds twice"
        assert fused[f"{target} True"] is True, f"{target}: the check would not see a contraction"

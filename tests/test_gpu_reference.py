"""The GPU reference (FMA direct convolution) against the CPU float64 reference.

Without a GPU it runs in Triton's interpreter on CPU tensors; the switch must
happen before the kernel module is imported. With a GPU the same checks run
on the device (conftest.py leaves TRITON_INTERPRET alone there).
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

import pytest  # noqa: E402

from convgen.dtypes import elem_type  # noqa: E402
from convgen.inputs import DataSpec, make_inputs  # noqa: E402
from convgen.guards import empty_output  # noqa: E402
from convgen.kernels.gpu_reference import gpu_reference, launch_spec  # noqa: E402
from convgen.problem import make_problem  # noqa: E402
from convgen.reference import reference  # noqa: E402

DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0") else "cuda"

NHWC = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}
MIXED = {"input": "nhwgc", "filter": "yxck", "output": "ngkhw"}
NCHW = {"input": "nchw", "filter": "kcyx", "output": "nkhw"}


def _problem(direction, dtype, layouts=NHWC, **geo):
    base = dict(n=2, g=2, c_total=6, k_total=4, hi=7, wi=6, y=3, x=2, stride=(2, 1),
                dilation=(1, 2), pad=(1, 2, 0, 1))
    base.update(geo)
    return make_problem(direction=direction, dtype=elem_type(dtype), layouts=layouts, **base)


def _run(p, seed=1, **kw):
    t = make_inputs(p, DataSpec(seed=seed), DEVICE)
    out = empty_output(p, DEVICE, torch.int32 if p.dtype.is_int else torch.float32)   # NaN-poisoned
    gpu_reference(p, t, out, **kw)
    return out.cpu().double(), reference(p, t)


def _check(p, got, ref):
    assert not torch.isnan(got).any(), "elements left unwritten"
    scale = ref.abs().max().item()
    assert scale > 0
    err = (got - ref).abs().max().item() / scale
    # fp32 accumulation of short sums against float64
    assert err <= 1e-5, f"relative error {err:.3g} for {p.describe()}"


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_groups_asymmetric_pad_stride_dilation(direction, dtype):
    p = _problem(direction, dtype, MIXED if dtype == "bf16" else NHWC)
    got, ref = _run(p)
    _check(p, got, ref)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_stride_and_dilation_two_small_blocks(direction):
    """Blocks that do not divide the output: masked tails in many programs."""
    p = _problem(direction, "f16", NCHW, n=3, g=1, c_total=3, k_total=5, hi=9, wi=8, y=3, x=3,
                 stride=(2, 2), dilation=(2, 2), pad=(2, 1, 1, 3))
    got, ref = _run(p, block=64)
    assert launch_spec(p, make_inputs(p, DataSpec(), DEVICE), empty_output(p, DEVICE, torch.float32),
                       block=64).grid[0] > 1
    _check(p, got, ref)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_depthwise_and_stride_beyond_filter(direction):
    p = _problem(direction, "f32", MIXED, n=2, g=4, c_total=4, k_total=4, hi=11, wi=7, y=2, x=1,
                 stride=(3, 2), dilation=(1, 1), pad=(0, 2, 1, 0))
    got, ref = _run(p)
    _check(p, got, ref)


def test_bwd_weight_split_over_the_batch():
    p = _problem("bwd_weight", "f16", NHWC, n=5)
    got, ref = _run(p, parts=3, block=32)
    _check(p, got, ref)


@pytest.mark.parametrize("layouts", [NHWC, NCHW], ids=["nhwc", "nchw"])
def test_i8_forward_is_exact(layouts):
    p = _problem("fwd", "i8", layouts, c_total=10, k_total=6, pad=(1, 1, 1, 1))
    t = make_inputs(p, DataSpec(seed=3, lo=-128, hi=127), DEVICE)
    out = empty_output(p, DEVICE)
    assert out.dtype == torch.int32
    gpu_reference(p, t, out)
    assert torch.equal(out.cpu().double(), reference(p, t))

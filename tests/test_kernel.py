"""The implicit-GEMM kernel against torch's float64 conv, in the interpreter (on groups of few
channels too, where the rule would take the direct kernels: tests/test_direct.py).

Every direction x layout family x type x path, on sizes that fill no tile
(primes, ones), with groups, asymmetric padding, strides and dilation.
"""
import random

import pytest
import torch
import triton
import triton.language as tl
from oracle import torch_conv

from convgen.backend import current
from convgen.dtypes import elem_type
from convgen.guards import empty_output
from convgen.inputs import DataSpec, make_inputs
from convgen.kernels.common import program_ids
from convgen.kernels.config import choose, direct_fits
from convgen.kernels.launch import run_conv
from convgen.problem import make_problem

LAYOUTS = {
    "nchw": {"filter": "kcyx", "input": "nchw", "output": "nkhw"},
    "nhwc": {"filter": "kyxc", "input": "nhwc", "output": "nhwk"},
    "mixed": {"filter": "yxck", "input": "nhwgc", "output": "ngkhw"},
}


def _run(p, use_dot, perf=None, seed=1):
    why = current().type_unsupported(p.dtype)
    if why:   # e.g. AMD's fnuz fp8 on an NVIDIA GPU
        pytest.skip(why)
    if direct_fits(p) and not (perf or {}).get("direct"):
        # the GEMM kernels on groups the direct kernels would take (tests/test_direct.py)
        perf = {**(perf or {}), "direct": 0}
    dev = current().torch_device
    tensors = make_inputs(p, DataSpec(seed=seed), dev)
    out = empty_output(p, dev)
    run_conv(p, tensors, out, choose(p, current(), use_dot, perf), use_dot, current())
    return out.cpu(), torch_conv(p, {k: v.cpu() for k, v in tensors.items()})


def _check(p, out, ref):
    assert not torch.isnan(out.double()).any(), "unwritten (NaN-poisoned) outputs"
    scale = ref.abs().max().item()
    if scale == 0:  # e.g. no filter tap reaches any input pixel: zeros must be written
        assert torch.equal(out.double(), ref)
        return
    err = (out.double() - ref).abs().max().item() / scale
    # one rounding to the output type on each side, plus fp32 accumulation
    assert err <= 2 * p.dtype.out_type.u + 1e-5, f"relative error {err:.3g} for {p.describe()}"


@pytest.mark.parametrize("use_dot", [True, False], ids=["dot", "fma"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_direction_layout_type_path(direction, layout, dtype, use_dot):
    p = make_problem(direction=direction, dtype=elem_type(dtype), n=2, g=2, c_total=6, k_total=10,
                     hi=7, wi=5, y=3, x=2, stride=(2, 1), dilation=(1, 2), pad=(1, 2, 0, 1),
                     layouts=LAYOUTS[layout])
    out, ref = _run(p, use_dot)
    _check(p, out, ref)


@pytest.mark.parametrize("use_dot", [True, False], ids=["dot", "fma"])
@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
def test_i8_forward_is_exact(use_dot, layout):
    p = make_problem(direction="fwd", dtype=elem_type("i8"), n=3, g=1, c_total=13, k_total=7,
                     hi=5, wi=6, y=3, x=3, pad=(1, 1, 1, 1), layouts=LAYOUTS[layout])
    out, ref = _run(p, use_dot)
    assert out.dtype == torch.int32
    assert torch.equal(out.double(), ref)


@pytest.mark.parametrize("use_dot", [True, False], ids=["dot", "fma"])
@pytest.mark.parametrize("dtype,direction", [
    (t, d) for t in ("fp8_e4m3", "fp8_e5m2") for d in ("fwd", "bwd_data", "bwd_weight")
] + [("fp8_e4m3fnuz", "fwd"), ("fp8_e5m2fnuz", "bwd_weight")])
def test_fp8_inputs_fp32_output(dtype, direction, use_dot):
    p = make_problem(direction=direction, dtype=elem_type(dtype), n=2, g=1, c_total=7, k_total=5,
                     hi=6, wi=5, y=3, x=3, stride=(2, 1), pad=(1, 1, 0, 1), layouts=LAYOUTS["nhwc"])
    out, ref = _run(p, use_dot)
    assert out.dtype == torch.float32
    assert make_inputs(p, DataSpec(seed=1), "cpu")[p.reads[0]].dtype == p.dtype.torch_dtype
    _check(p, out, ref)


@pytest.mark.parametrize("seed", range(24))
def test_random_geometries(seed):
    rng = random.Random(seed)
    direction = ["fwd", "bwd_data", "bwd_weight"][seed % 3]
    g = rng.choice([1, 1, 2, 3])
    stride = (rng.randint(1, 4), rng.randint(1, 3))
    dil = (rng.randint(1, 3), rng.randint(1, 2))
    y, x = rng.randint(1, 3), rng.randint(1, 3)
    hi = rng.randint(dil[0] * (y - 1) + 1, 11)
    wi = rng.randint(dil[1] * (x - 1) + 1, 11)
    p = make_problem(direction=direction, dtype=elem_type(rng.choice(["f32", "f16"])),
                     # channels below and above the smallest block (blocks_span_taps)
                     n=rng.randint(1, 3), g=g, c_total=g * rng.choice([rng.randint(1, 5), rng.randint(16, 19)]),
                     k_total=g * rng.randint(1, 5), hi=hi, wi=wi, y=y, x=x, stride=stride,
                     dilation=dil, pad=tuple(rng.randint(0, 2) for _ in range(4)),
                     layouts=rng.choice(list(LAYOUTS.values())))
    perf = {"split": 3} if direction == "bwd_weight" and seed % 2 else None
    out, ref = _run(p, bool(seed % 2), perf, seed=seed + 7)
    _check(p, out, ref)


# The PR run takes each direction through c = 3, 16 and 17 (across taps, one whole block,
# a whole block and a partial one), and fwd through c = 15 (the last across-tap width),
# alternating the layouts; c = 1, bwd_weight's c = 15 and the other layout of each c are
# nightly.
BLOCKS_PR = {("fwd", "nchw", 3), ("fwd", "nhwc", 15), ("fwd", "nchw", 16), ("fwd", "nhwc", 17),
             ("bwd_weight", "nhwc", 3), ("bwd_weight", "nhwc", 16), ("bwd_weight", "nchw", 17)}


@pytest.mark.parametrize("direction,layout,c", [
    pytest.param(d, lay, c, marks=() if (d, lay, c) in BLOCKS_PR else pytest.mark.nightly)
    for d in ("fwd", "bwd_weight") for lay in ("nchw", "nhwc") for c in (1, 3, 15, 16, 17)])
def test_blocks_across_taps_and_within_a_tap(direction, layout, c):
    # c < 16: fwd's reduction blocks and bwd_weight's column tiles run across filter taps
    # (FLAT_R, FLAT_N); from 16 on, each tap's channels are blocked alone. 16-wide blocks
    # over a 7x5 filter with stride, dilation and padding: many partial blocks either way,
    # and bwd_weight's split parts end inside a block
    from convgen.directions import blocks_span_taps
    p = make_problem(direction=direction, dtype=elem_type("f32"), n=2, g=1, c_total=c, k_total=19,
                     hi=17, wi=13, y=7, x=5, stride=(2, 1), dilation=(1, 2), pad=(3, 2, 4, 1),
                     layouts=LAYOUTS[layout])
    assert blocks_span_taps(p) == (c < 16)
    perf = {"block_m": 16, "block_n": 16, "block_k": 16}
    if direction == "bwd_weight":
        perf["split"] = 3
    out, ref = _run(p, True, perf, seed=c)
    _check(p, out, ref)


def test_depthwise_stride_larger_than_filter():
    p = make_problem(direction="bwd_data", dtype=elem_type("f32"), n=2, g=5, c_total=5, k_total=5,
                     hi=11, wi=7, y=1, x=2, stride=(3, 4), pad=(0, 0, 1, 0),
                     layouts=LAYOUTS["nhwc"])
    out, ref = _run(p, True)
    _check(p, out, ref)
    # pixels no tap reaches get an exact zero gradient, not garbage
    assert (ref == 0).any()


def test_bwd_weight_split_is_deterministic():
    p = make_problem(direction="bwd_weight", dtype=elem_type("f16"), n=3, g=1, c_total=4,
                     k_total=8, hi=9, wi=9, y=3, x=3, pad=(1, 1, 1, 1))
    first, _ = _run(p, True, {"split": 4})
    again, _ = _run(p, True, {"split": 4})
    assert torch.equal(first, again)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_flops_count_each_forward_product_once(direction):
    # 1x1 stride-2 256->128 at 56x56, batch 2: 2 * N * K * C * Ho * Wo * Y * X in every
    # direction; bwd_data's GEMM shape (every input pixel) would count 4x as many
    p = make_problem(direction=direction, dtype=elem_type("f16"), n=2, g=1, c_total=256,
                     k_total=128, hi=56, wi=56, y=1, x=1, stride=(2, 2))
    assert p.flops == 2 * 2 * 128 * 256 * 28 * 28
    g = make_problem(direction=direction, dtype=elem_type("f16"), n=3, g=4, c_total=8,
                     k_total=12, hi=7, wi=5, y=3, x=2, pad=(1, 1, 0, 0))
    assert g.flops == 2 * 3 * 12 * (8 // 4) * 7 * 4 * 3 * 2


# The tile order is one rule for every direction: the PR run takes group_m = 3 (a partial
# last group) in each direction and 1 and 8 in fwd; the other four are nightly.
@pytest.mark.parametrize("direction,group_m", [
    pytest.param(d, gm, marks=() if gm == 3 or d == "fwd" else pytest.mark.nightly)
    for d in ("fwd", "bwd_data", "bwd_weight") for gm in (1, 3, 8)])
def test_tile_order_covers_every_tile_once(direction, group_m):
    # 16x16 tiles over a GEMM of several tile rows and columns, whose row count is no
    # multiple of group_m: the last group is partial, and every tile must still be written
    # exactly once (an unwritten one stays NaN, a doubled one is still right, so the
    # channel blocks of several K steps and 3 taps make a wrong tile visible too)
    p = make_problem(direction=direction, dtype=elem_type("f32"), n=3, g=2, c_total=2 * 37,
                     k_total=2 * 41, hi=9, wi=7, y=3, x=1, stride=(2, 1), pad=(1, 1, 0, 0),
                     layouts=LAYOUTS["nhwc"])
    out, ref = _run(p, True, {"block_m": 16, "block_n": 16, "block_k": 16, "group_m": group_m})
    _check(p, out, ref)


@pytest.mark.parametrize("direction,split", [("fwd", 1), ("bwd_data", 1), ("bwd_weight", 3)])
def test_chiplet_order_covers_every_tile_once(direction, split, monkeypatch):
    """The pointer kernels' programs remapped for an MI300's 8 chiplets (common.program_ids,
    NUM_XCDS = 8, spec.xcds): over a 2-D grid of 2 groups (bwd_data: and 2x1 stride classes;
    bwd_weight: 3 parts) whose programs are no multiple of 8, every tile is still computed
    once, bit for bit as in the grid's own order."""
    from convgen.kernels import spec
    p = make_problem(direction=direction, dtype=elem_type("f32"), n=3, g=2, c_total=2 * 37,
                     k_total=2 * 41, hi=9, wi=7, y=3, x=1, stride=(2, 1), pad=(1, 1, 0, 0),
                     layouts=LAYOUTS["nhwc"])
    perf = {"block_m": 16, "block_n": 16, "block_k": 16, "group_m": 3, "split": split}
    plain, ref = _run(p, True, perf)
    from convgen.kernels import launch
    seen = []
    build = launch.VARIANTS["pointer"]

    def pointer(*args):   # the spec the run launches, to see NUM_XCDS reach the kernel
        seen.append(build(*args).constexprs["NUM_XCDS"])
        return build(*args)
    monkeypatch.setattr(spec, "xcds", lambda device: 8)
    monkeypatch.setitem(launch.VARIANTS, "pointer", pointer)
    remapped, _ = _run(p, True, perf)
    assert seen and set(seen) == {8}
    assert torch.equal(plain, remapped)
    _check(p, remapped, ref)


@triton.jit
def _chiplet_order(out_ptr, NUM_XCDS: tl.constexpr):
    """out[linear id] = the remapped linear id (common.program_ids)."""
    a, b = program_ids(NUM_XCDS)
    linear = tl.program_id(0) + tl.program_id(1) * tl.num_programs(0)
    tl.store(out_ptr + linear, a + b * tl.num_programs(0))


def test_chiplet_order_runs_consecutive_ids_on_one_chiplet():
    """common.program_ids over a 5 x 4 grid on 8 chiplets: the hardware deals program L
    (linear id) to chiplet L % 8; the remapped ids are a permutation of the grid, and the
    ids each chiplet runs are one block of consecutive ids (20 = 4 chiplets of 3 and 4 of 2)."""
    out = torch.full((20,), -1, dtype=torch.int32, device=current().torch_device)
    _chiplet_order[(5, 4)](out, NUM_XCDS=8)
    got = out.cpu().tolist()
    assert sorted(got) == list(range(20))
    blocks = [sorted(got[x::8]) for x in range(8)]
    assert [len(b) for b in blocks] == [3, 3, 3, 3, 2, 2, 2, 2]
    assert [b[0] for b in blocks] == [0, 3, 6, 9, 12, 14, 16, 18]
    assert all(b == list(range(b[0], b[0] + len(b))) for b in blocks)
    _chiplet_order[(5, 4)](out, NUM_XCDS=1)
    assert out.cpu().tolist() == list(range(20))

"""The direct kernels (kernels/direct.py: depthwise and small groups) against torch's float64
conv, in the interpreter: every direction x layout x type, channel multipliers, groups of up
to 8 channels, sizes that fill no tile (primes, ones), strides, dilation, asymmetric padding,
7x7 filters, rows wider than a tile and channels over several tiles, bwd_weight's parts;
then which problems the rule gives them and the errors of configs they cannot run."""
import random
import subprocess
import sys

import pytest
import torch
from oracle import torch_conv

from convgen.backend import current
from convgen.dtypes import elem_type
from convgen.errors import ConvgenError
from convgen.guards import empty_output
from convgen.inputs import DataSpec, make_inputs
from convgen.kernels import config as kconfig
from convgen.kernels.launch import run_conv, variant
from convgen.problem import make_problem

LAYOUTS = {
    "nhwc": {"filter": "gkyxc", "input": "nhwgc", "output": "nhwgk"},
    "nchw": {"filter": "gkcyx", "input": "ngchw", "output": "ngkhw"},
    "mixed": {"filter": "yxck", "input": "nhwgc", "output": "ngkhw"},
}


def _problem(direction, dtype="f32", layout="nhwc", **kw):
    args = dict(n=2, g=7, c=1, k=1, hi=7, wi=5, y=3, x=3, stride=(1, 1), dilation=(1, 1),
                pad=(1, 1, 1, 1))
    args.update(kw)
    g, c, k = args.pop("g"), args.pop("c"), args.pop("k")
    return make_problem(direction=direction, dtype=elem_type(dtype), g=g, c_total=g * c,
                        k_total=g * k, layouts=LAYOUTS[layout], **args)


def _run(p, perf=None, use_dot=True, seed=1):
    why = current().type_unsupported(p.dtype)
    if why:
        pytest.skip(why)
    cfg = kconfig.choose(p, current(), use_dot, {"direct": 1, **(perf or {})})
    assert variant(cfg) == "direct"
    dev = current().torch_device
    tensors = make_inputs(p, DataSpec(seed=seed), dev)
    out = empty_output(p, dev)
    run_conv(p, tensors, out, cfg, use_dot, current())
    return out.cpu(), torch_conv(p, {name: t.cpu() for name, t in tensors.items()})


def _check(p, out, ref):
    assert not torch.isnan(out.double()).any(), "unwritten (NaN-poisoned) outputs"
    scale = ref.abs().max().item()
    if scale == 0:
        assert torch.equal(out.double(), ref)
        return
    err = (out.double() - ref).abs().max().item() / scale
    # one rounding to the output type on each side, plus fp32 accumulation
    assert err <= 2 * p.dtype.out_type.u + 1e-5, f"relative error {err:.3g} for {p.describe()}"


# Triton's interpreter pays per operation, a third of a millisecond or so, whatever the
# tile's size: the problems are small and the unrolled taps few, so the PR run stays short.
# Every type on channels-last tensors, f32 on the others; the rest are nightly.
@pytest.mark.parametrize("direction,layout,dtype", [
    pytest.param(d, lay, t, marks=() if lay == "nhwc" or t == "f32" else pytest.mark.nightly)
    for d in ("fwd", "bwd_data", "bwd_weight") for lay in LAYOUTS for t in ("f32", "f16", "bf16")])
def test_depthwise_direction_layout_type(direction, layout, dtype):
    # 7 groups in 4-channel tiles (two tiles, the second partial), 5-pixel rows in 4-pixel
    # tiles, stride, dilation and padding on both sides unequal
    p = _problem(direction, dtype, layout, hi=7, wi=5, y=3, x=2, stride=(2, 1),
                 dilation=(1, 2), pad=(1, 2, 0, 1))
    perf = {"block_m": 4, "block_n": 4, "block_k": 2}
    if direction == "bwd_weight":
        perf.update(split=3, block_k=1)
    out, ref = _run(p, perf)
    _check(p, out, ref)


@pytest.mark.parametrize("c,k", [(1, 3), (3, 2), (2, 5), (8, 8), (5, 1)])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_channel_multipliers_and_small_groups(direction, c, k):
    p = _problem(direction, "f32", "nhwc", n=1, g=3, c=c, k=k, hi=4, wi=9, y=3, x=3,
                 stride=(1, 2), pad=(1, 0, 1, 1))
    out, ref = _run(p, {"block_m": 8, "block_n": 8, "split": 2}
                    if direction == "bwd_weight" else {"block_m": 8, "block_n": 8})
    _check(p, out, ref)


@pytest.mark.parametrize("seed", [pytest.param(s, marks=() if s < 9 else pytest.mark.nightly)
                                  for s in range(24)])
def test_random_geometries(seed):
    rng = random.Random(seed)
    direction = ["fwd", "bwd_data", "bwd_weight"][seed % 3]
    stride = (rng.randint(1, 3), rng.randint(1, 3))
    dil = (rng.randint(1, 2), rng.randint(1, 3))
    y, x = rng.choice([(1, 1), (3, 3), (5, 5), (7, 7), (2, 3), (3, 1)])
    hi = rng.randint(dil[0] * (y - 1) + 1, 11)
    wi = rng.randint(dil[1] * (x - 1) + 1, 23)
    p = _problem(direction, rng.choice(["f32", "f16"]), rng.choice(list(LAYOUTS)),
                 n=rng.randint(1, 2), g=rng.randint(2, 19), c=rng.choice([1, 1, 2, 4]),
                 k=rng.choice([1, 1, 2, 3]), hi=hi, wi=wi, y=y, x=x, stride=stride,
                 dilation=dil, pad=tuple(rng.randint(0, y // 2 + 1) for _ in range(4)))
    perf = {"block_m": rng.choice([1, 8, 32, 128]), "block_n": rng.choice([1, 4, 16, 64]),
            "num_warps": rng.choice([1, 2, 4])}
    if direction == "bwd_weight":
        perf["split"] = rng.choice([1, 2, 5, 64])
        # every tap's sums in one tile: no more than MAX_DIRECT_TILE
        taps = kconfig.direct_taps(p)
        perf["block_m"] = max(1, min(perf["block_m"],
                                     kconfig.MAX_DIRECT_TILE // (perf["block_n"] * taps)))
    else:
        perf["block_k"] = rng.choice([1, 2, 4])   # rows a program
    out, ref = _run(p, perf, seed=seed + 3)
    _check(p, out, ref)


@pytest.mark.parametrize("direction", [
    "fwd", pytest.param("bwd_data", marks=pytest.mark.nightly), "bwd_weight"])
def test_convnext_7x7_rows_wider_than_a_tile(direction):
    # ConvNeXt's 7x7 depthwise (pad 3): a 21-pixel row is two 16-pixel tiles (bwd_weight:
    # six 4-pixel steps), 19 channels two 16-channel tiles, the outer taps mostly in the padding
    p = _problem(direction, "f16", "nhwc", n=1, g=19, hi=4, wi=21, y=7, x=7, pad=(3, 3, 3, 3))
    perf = {"block_m": 16, "block_n": 16}
    if direction == "bwd_weight":
        perf.update(block_m=4, split=4)   # 4 pixels x 64 taps x 16 channels
    out, ref = _run(p, perf)
    _check(p, out, ref)


def test_stride_larger_than_filter_leaves_exact_zeros():
    p = _problem("bwd_data", "f32", "nhwc", n=2, g=5, hi=11, wi=7, y=1, x=2, stride=(3, 4),
                 pad=(0, 0, 1, 0))
    out, ref = _run(p)
    _check(p, out, ref)
    assert (ref == 0).any() and torch.equal(out[ref == 0].double(), ref[ref == 0])


def test_i8_forward_is_exact():
    p = _problem("fwd", "i8", "nhwc", n=2, g=6, c=2, k=3, hi=5, wi=6)
    out, ref = _run(p)
    assert out.dtype == torch.int32
    assert torch.equal(out.double(), ref)


@pytest.mark.parametrize("direction", ["fwd", "bwd_weight"])
def test_fp8_inputs_fp32_output(direction):
    p = _problem(direction, "fp8_e4m3", "nhwc", n=2, g=5, hi=6, wi=5, stride=(2, 1))
    out, ref = _run(p)
    assert out.dtype == torch.float32
    assert (out.double() - ref).abs().max().item() <= 1e-5 * max(1.0, ref.abs().max().item())


def test_bwd_weight_parts_are_deterministic_and_agree():
    p = _problem("bwd_weight", "f32", "nhwc", n=3, g=9, hi=5, wi=11)
    whole, ref = _run(p, {"split": 1})
    parts, _ = _run(p, {"split": 7})
    again, _ = _run(p, {"split": 7})
    assert torch.equal(parts, again)
    _check(p, whole, ref)
    _check(p, parts, ref)


def test_more_parts_than_rows_runs_one_part_a_row():
    from convgen.kernels.geometry import direct_parts
    p = _problem("bwd_weight", "f32", "nhwc", n=1, g=3, hi=3, wi=4)
    cfg = kconfig.choose(p, current(), True, {"direct": 1, "split": 64})
    assert direct_parts(p, cfg) == (3, 1)
    out, ref = _run(p, {"split": 64})
    _check(p, out, ref)


# --- which problems take them, and what they refuse ---

@pytest.mark.parametrize("c,k,g,direct", [
    (1, 1, 144, True), (1, 2, 32, True), (4, 4, 32, True), (8, 8, 4, True),
    (9, 9, 4, False), (1, 16, 8, False), (3, 64, 1, False), (4, 4, 1, False)])
def test_the_rule_takes_them_for_small_groups(c, k, g, direct):
    p = _problem("fwd", "f16", "nhwc", g=g, c=c, k=k, hi=8, wi=8)
    for use_dot in (True, False):
        cfg = kconfig.choose(p, current(), use_dot)
        assert bool(cfg.direct) == direct, cfg


def test_fields_without_direct_ask_for_the_gemm_kernels():
    p = _problem("fwd", "f16", "nhwc", g=16, hi=8, wi=8)
    assert kconfig.choose(p, current(), True).direct == 1
    gemm = kconfig.choose(p, current(), True, {"block_m": 16, "block_n": 16, "block_k": 16})
    assert not gemm.direct and variant(gemm) == "pointer"
    assert not kconfig.choose(p, current(), True, {"direct": 0}).direct


@pytest.mark.parametrize("overrides,kw,message", [
    ({"direct": 1}, {"c": 16, "k": 16}, "direct=1: groups of at most 8"),
    ({"direct": 1, "tma": 1}, {}, "tma=1 with direct=1"),
    ({"direct": 1, "split": 2}, {}, "split=2 applies to bwd_weight only"),
    ({"direct": 1, "block_m": 3}, {}, "block_m=3 must be a power of two"),
    ({"direct": 1, "block_m": 256, "block_n": 256}, {}, "a direct tile holds at most"),
    ({"direct": 2}, {}, "direct=2 must be 0 or 1"),
])
def test_configs_it_cannot_run_are_one_error(overrides, kw, message):
    p = _problem("fwd", "f16", "nhwc", hi=8, wi=8, **kw)
    with pytest.raises(ConvgenError, match=message):
        kconfig.choose(p, current(), True, overrides)


def test_the_run_says_it_took_the_direct_path():
    args = [sys.executable, "-m", "convgen", "--operation", "conv_bwd_weight", "-t", "f16",
            "-fil_layout=gkyxc", "-in_layout=nhwgc", "-out_layout=nhwgk", "-batchsize=2",
            "-groupsize=12", "-in_channels=12", "-out_channels=24", "-in_h=6", "-in_w=7",
            "-fil_h=3", "-fil_w=3", "--padding_h=1", "--padding_w=1", "-pv", "-rand", "1", "-x2"]
    run = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "direct (FMA) path on" in run.stdout and "direct=1" in run.stdout
    assert run.stdout.strip().splitlines()[-1] == "[1 1 1]"

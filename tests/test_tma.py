"""The tensor-descriptor kernels (kernels/tma.py): right answers in the interpreter against
torch's float64 conv, where they apply, when the default rule takes them, and that they
compile to TMA copies and wgmma on sm90."""
import random
from dataclasses import replace

import pytest

from convgen.backend import Backend
from convgen.dtypes import elem_type
from convgen.errors import ConvgenError
from convgen.kernels import config, geometry
from convgen.problem import make_problem
from convtune import space as tuning_space
from test_isa import compile_here
from test_kernel import LAYOUTS, _check, _run

SM90 = Backend("cuda", "sm90", 32)
SM80 = Backend("cuda", "sm80", 32)
GFX942 = Backend("hip", "gfx942", 64)

# sizes that fill no box: prime and odd extents, channels that end inside a block,
# asymmetric padding (negative box coordinates), dilation
CASES = {
    "3x3": dict(n=3, c_total=24, k_total=40, hi=7, wi=9, y=3, x=3, pad=(1, 1, 1, 1)),
    "5x3-dilated": dict(n=1, c_total=16, k_total=8, hi=11, wi=5, y=5, x=3, dilation=(1, 2),
                        pad=(2, 0, 1, 3)),
    "1x1": dict(n=2, c_total=40, k_total=16, hi=6, wi=5, y=1, x=1),
    "3x3-no-pad": dict(n=5, c_total=16, k_total=24, hi=13, wi=3, y=3, x=3, dilation=(2, 1),
                       pad=(0, 2, 1, 0)),
}


def _problem(direction, dtype="f16", g=1, **kw):
    return make_problem(direction=direction, dtype=elem_type(dtype), g=g,
                        layouts=LAYOUTS["nhwc"], **kw)


# bf16 on the largest case (3x3, 5-10 s a direction) is nightly: f16 runs it, and bf16 runs
# the other three cases, in every direction.
@pytest.mark.parametrize("direction,dtype,case", [
    pytest.param(d, t, c, marks=pytest.mark.nightly if (t, c) == ("bf16", "3x3") else ())
    for d in ("fwd", "bwd_data", "bwd_weight") for t in ("f16", "bf16") for c in CASES])
def test_descriptor_kernels_match_float64(direction, dtype, case):
    p = _problem(direction, dtype, **CASES[case])
    assert geometry.tma_unsupported(p) is None
    perf = {"tma": 1, "block_m": 32, "block_n": 16, "block_k": 16}
    if direction == "bwd_weight":
        perf["split"] = 3   # parts of whole pixel boxes, summed in order
    out, ref = _run(p, True, perf, seed=len(case))
    _check(p, out, ref)


@pytest.mark.parametrize("case", ["1x1", "5x3-dilated"])
def test_bwd_weight_in_one_part_stores_the_gradient_itself(case):
    """split=1: the one part writes the filter gradient in its own type, no fp32 workspace
    to sum (the kernel's other store)."""
    p = _problem("bwd_weight", "f16", **CASES[case])
    out, ref = _run(p, True, {"tma": 1, "block_m": 16, "block_n": 16, "block_k": 16, "split": 1},
                    seed=3)
    _check(p, out, ref)


@pytest.mark.parametrize("pixels", ["nhw", "hwn"])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_1x1_stride_1_takes_its_pixels_as_one_run(direction, pixels):
    # n*h*w = 3*5*7 = 105 pixels: boxes of 32 consecutive ones, the last partial, crossing
    # rows and images; pixels stored h, w, n apart (hwnc) keep boxes of the image grid
    from convgen.inputs import make_inputs
    from convgen.guards import empty_output
    from convgen.kernels import tma
    from convgen.options import DataSpec
    layouts = {"input": pixels + "c", "filter": "kyxc", "output": pixels + "k"}
    p = make_problem(direction=direction, dtype=elem_type("f16"), g=1, n=3, c_total=24,
                     k_total=40, hi=5, wi=7, y=1, x=1, layouts=layouts)
    assert geometry.tma_unsupported(p) is None
    assert geometry.flat_pixels(p) == (pixels == "nhw")
    perf = {"tma": 1, "block_m": 32, "block_n": 16, "block_k": 32}
    if direction == "bwd_weight":
        perf["split"] = 5
    cfg = config.choose(p, SM90, True, perf)
    spec = tma.launch_spec(p, make_inputs(p, DataSpec(seed=1), "cpu"), empty_output(p, "cpu"), cfg, {})
    box = (spec.constexprs["BI"], spec.constexprs["BH"], spec.constexprs["BW"])
    assert box == ((32, 1, 1) if pixels == "nhw" else geometry.pixel_box(3, 5, 7, 32))
    assert spec.runtime["N"] == (105 if pixels == "nhw" else 3)
    if direction == "bwd_weight":
        # the boxes the kernel walks (its grid of pixels) are the ones config counts for the
        # split's parts: 4 runs of 32 pixels flat, 5 boxes of 4x1x8 pixels otherwise
        rt = spec.runtime
        boxes = (geometry.cdiv(rt["N"], box[0]) * geometry.cdiv(rt["HO"], box[1])
                 * geometry.cdiv(rt["WO"], box[2]))
        assert boxes == geometry.pixel_boxes(p, 32) == (4 if pixels == "nhw" else 5)
    out, ref = _run(p, True, perf, seed=7)
    _check(p, out, ref)


@pytest.mark.parametrize("stride", [(2, 2), (3, 2)])
@pytest.mark.parametrize("direction", ["fwd", "bwd_weight"])
def test_strided_1x1_reads_a_strided_view(direction, stride):
    # odd extents: the last row and column of the input are read (7 = 3*2 + 1) or skipped
    p = _problem(direction, "f16", n=3, c_total=24, k_total=40, hi=7, wi=10, y=1, x=1,
                 stride=stride)
    assert geometry.tma_unsupported(p) is None
    perf = {"tma": 1, "block_m": 32, "block_n": 16, "block_k": 16}
    if direction == "bwd_weight":
        perf["split"] = 2
    out, ref = _run(p, True, perf, seed=stride[0])
    _check(p, out, ref)


# fwd with a stride reads one descriptor over every phase view: strides 2 and 3, one axis
# only, dilation, asymmetric padding (negative coordinates in a phase), sizes that fill no
# box, channel blocks smaller than C
FWD_PHASE_CASES = {
    "3x3-s2": dict(n=3, c_total=32, k_total=40, hi=10, wi=6, y=3, x=3, stride=(2, 2),
                   pad=(1, 1, 1, 1)),
    "5x3-s3x2-dilated": dict(n=2, c_total=16, k_total=24, hi=12, wi=14, y=5, x=3, stride=(3, 2),
                             dilation=(1, 2), pad=(2, 0, 1, 3)),
    "2x4-s1x2": dict(n=1, c_total=48, k_total=16, hi=7, wi=12, y=2, x=4, stride=(1, 2),
                     pad=(0, 1, 2, 1)),
    "1x1-s2-padded": dict(n=2, c_total=16, k_total=16, hi=6, wi=8, y=1, x=1, stride=(2, 2),
                          pad=(1, 0, 0, 1)),
}


@pytest.mark.parametrize("case", list(FWD_PHASE_CASES))
def test_strided_fwd_reads_one_phase_view(case):
    p = _problem("fwd", "bf16" if "s3" in case else "f16", **FWD_PHASE_CASES[case])
    assert geometry.tma_unsupported(p) is None and geometry.phase_fwd(p)
    out, ref = _run(p, True, {"tma": 1, "block_m": 32, "block_n": 16, "block_k": 16},
                    seed=len(case))
    _check(p, out, ref)


def test_strided_fwd_channel_blocks_divide_the_channels():
    p = _problem("fwd", n=256, c_total=48, k_total=64, hi=28, wi=28, y=3, x=3, stride=(2, 2),
                 pad=(1, 1, 1, 1))
    # a 64-channel block would run into the next phase's channels: 16 divides 48
    assert config.choose(p, SM90, True).block_k == 16
    assert all(48 % c.block_k == 0 for c in tuning_space.configs(p, SM90) if c.tma)
    with pytest.raises(ConvgenError, match="block_k=32: a strided fwd .* divide c=48"):
        config.choose(p, SM90, True, {"tma": 1, "block_k": 32})


@pytest.mark.parametrize("direction,case", [
    ("fwd", "3x3"), ("fwd", "1x1"), ("bwd_data", "5x3-dilated"), ("bwd_data", "1x1"),
    ("fwd", "3x3-s2")])
@pytest.mark.parametrize("halves", [1, 2])
def test_persistent_programs_walk_every_tile(direction, case, halves):
    # the interpreter's persistent launch has 3 programs: each loops over several tiles,
    # and the last tiles (fewer than the programs) leave some programs idle
    kw = FWD_PHASE_CASES[case] if case.endswith("s2") else CASES[case]
    p = _problem(direction, "f16", **kw)
    # halves = 2: each tile stored as two 8-channel halves of its 16 columns
    cfg = {"tma": 1, "persistent": halves, "block_m": 16, "block_n": 16, "block_k": 16}
    assert config.choose(p, SM90, True, cfg).persistent == halves
    out, ref = _run(p, True, cfg, seed=11)
    _check(p, out, ref)


# stream-K (bwd_weight): the interpreter's 3 SMs (up to 6 programs with streamk=2) share the tiles' steps;
# tile counts not divisible by 3 cut some tiles into two or more shares (one tile among all
# the programs in the bwd_weight 1x1 cases), summed by the last share to finish. Each case:
# (direction, problem, block_m, block_n)
STREAMK_CASES = {
    "bwd_weight-2x2-padded": ("bwd_weight", dict(n=3, c_total=24, k_total=40, hi=7, wi=9, y=2,
                                                 x=2, pad=(1, 0, 0, 1)), 32, 16),
    "bwd_weight-1x1": ("bwd_weight", dict(n=3, c_total=16, k_total=16, hi=5, wi=7, y=1, x=1), 16, 16),
    "bwd_weight-1x1-s2": ("bwd_weight", dict(n=3, c_total=16, k_total=16, hi=7, wi=6, y=1, x=1,
                                             stride=(2, 2)), 16, 16),
    "bwd_weight-2x2-s2-even": ("bwd_weight", dict(n=3, c_total=24, k_total=40, hi=10, wi=6, y=2,
                                                  x=2, stride=(2, 2), pad=(1, 0, 0, 1)), 32, 16),
    "bwd_weight-4x4-s2-even": ("bwd_weight", dict(n=2, c_total=16, k_total=40, hi=8, wi=12, y=4,
                                                  x=4, stride=(2, 2), pad=(0, 3, 1, 1)), 32, 16),
}


@pytest.mark.parametrize("case", list(STREAMK_CASES))
@pytest.mark.parametrize("per_sm", [1, 2])
def test_stream_k_shares_every_tile(case, per_sm):
    from convgen.kernels import tma
    direction, kw, block_m, block_n = STREAMK_CASES[case]
    p = _problem(direction, "bf16" if per_sm == 2 else "f16", **kw)
    cfg = config.choose(p, SM90, True, {"tma": 1, "streamk": per_sm, "block_m": block_m,
                                        "block_n": block_n, "block_k": 16})
    assert (cfg.streamk, cfg.split, cfg.persistent) == (per_sm, 1, None)
    programs, steps, tiles, tile_steps = geometry.streamk_steps(p, cfg, 3)
    work = tiles * tile_steps
    assert programs <= 3 * per_sm and (programs - 1) * steps < work <= programs * steps
    shares = [((t + 1) * tile_steps - 1) // steps - t * tile_steps // steps + 1 for t in range(tiles)]
    assert max(shares) >= 2   # the fix-up runs
    out, ref = _run(p, True, cfg.__dict__, seed=13)
    _check(p, out, ref)


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="real sizes: needs a GPU")
@pytest.mark.parametrize("stride", [1, 2])
def test_every_stream_k_config_of_the_space_on_a_real_layer(stride):
    # tune checks only each problem's winner; one stream-K config (since removed) gave
    # wrong results on the H100 at ResNet-50 sizes while the interpreter agreed
    # (docs/traps.md), so every config of the space runs here once on a GPU
    from convgen.backend import current
    p = _problem("bwd_weight", n=64, c_total=512, k_total=512, hi=7 * stride, wi=7 * stride, y=3,
                 x=3, stride=(stride, stride), pad=(1, 1, 1, 1))
    configs = [c for c in tuning_space.configs(p, current()) if c.streamk]
    assert configs
    _each_right_on_the_gpu(p, configs, seed=5)


def _each_right_on_the_gpu(p, configs, seed):
    """Every config run once on the GPU against torch's float64 conv (on the CPU)."""
    import torch

    from convgen.backend import current
    from convgen.inputs import DataSpec, make_inputs
    from convgen.guards import empty_output
    from convgen.kernels.launch import run_conv
    from oracle import torch_conv
    be = current()
    tensors = make_inputs(p, DataSpec(seed=seed), be.torch_device)
    ref = torch_conv(p, {k: v.cpu() for k, v in tensors.items()})
    for cfg in configs:
        out = empty_output(p, be.torch_device)
        run_conv(p, tensors, out, cfg, True, be)
        torch.cuda.synchronize()
        try:
            _check(p, out.cpu(), ref)
        except AssertionError as e:
            raise AssertionError(f"{cfg.describe()}: {e}") from None


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="real sizes: needs a GPU")
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("batch", [64, 150])
def test_every_tail_config_of_the_space_on_a_real_layer(stride, batch):
    # as stream-K above: each config once on a GPU, at a batch whose tiles are fewer than
    # the SMs (every tile shared) and one whose tiles fill a wave and leave some
    from convgen.backend import current
    p = _problem("fwd", n=batch, c_total=512, k_total=512, hi=7 * stride, wi=7 * stride, y=3,
                 x=3, stride=(stride, stride), pad=(1, 1, 1, 1))
    configs = [c for c in tuning_space.configs(p, current()) if c.tail]
    # four tiles, each also transposed (swap_ab; these channels fill every block)
    assert len(configs) == 8 and sum(1 for c in configs if c.swap_ab) == 4
    _each_right_on_the_gpu(p, configs, seed=6)


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="real sizes: needs a GPU")
@pytest.mark.parametrize("direction", ["fwd", "bwd_data"])
@pytest.mark.parametrize("layer", ["1x1 1024->256 14x14", "3x3 s2 256->256 28x28"])
def test_every_swapped_config_of_the_space_on_a_real_layer(layer, direction):
    # a new kernel shape is trusted after the GPU at real sizes (docs/traps.md): every
    # swap_ab config of the space (persistent, halves, phase view) once, batch 32
    from convgen.backend import current
    shape = (dict(c_total=1024, k_total=256, hi=14, wi=14, y=1, x=1) if layer.startswith("1x1")
             else dict(c_total=256, k_total=256, hi=28, wi=28, y=3, x=3, stride=(2, 2),
                       pad=(1, 1, 1, 1)))
    p = _problem(direction, "bf16", n=32, **shape)
    configs = [c for c in tuning_space.configs(p, current()) if c.swap_ab]
    assert len(configs) >= 8
    _each_right_on_the_gpu(p, configs, seed=7)


@pytest.mark.parametrize("sharing", ["streamk", "tail"])
def test_a_prepared_shared_tile_launch_runs_again_and_again(sharing):
    # the per-tile counts live with the prepared launch (a timing loop reruns it): the
    # last share of each tile sets its count back to zero, or the next run's last share
    # would not know it is last and shared tiles would keep their old values
    import torch

    from convgen.backend import current
    from convgen.inputs import DataSpec, make_inputs
    from convgen.guards import empty_output
    from convgen.kernels.launch import prepare
    from oracle import torch_conv
    if sharing == "streamk":
        direction, kw, block_m, block_n = STREAMK_CASES["bwd_weight-2x2-padded"]
        p = _problem(direction, "f16", **kw)
        perf = {"streamk": 2, "block_m": block_m, "block_n": block_n}
    else:
        p = _problem("fwd", "f16", **TAIL_CASES["3x3"])
        perf = {"tail": 2, "block_m": 32, "block_n": 16}
    cfg = config.choose(p, SM90, True, {"tma": 1, "block_k": 16, **perf})
    be = current()
    tensors = make_inputs(p, DataSpec(seed=21), be.torch_device)
    ref = torch_conv(p, {k: v.cpu() for k, v in tensors.items()})
    out = empty_output(p, be.torch_device)
    run = prepare(p, tensors, out, cfg, True, be)
    for _ in range(3):
        out.fill_(float("nan"))
        run()
        _check(p, out.cpu(), ref)


def test_stream_k_in_the_space_where_chains_are_short():
    short = _problem("bwd_weight", n=256, c_total=512, k_total=512, hi=14, wi=14, y=3, x=3,
                     stride=(2, 2), pad=(1, 1, 1, 1))
    space = [c for c in tuning_space.configs(short, SM90) if c.streamk]
    assert len(space) == 9 and all(c.split == 1 and c.tma and not c.persistent for c in space)
    long = _problem("bwd_weight", n=256, c_total=512, k_total=512, hi=28, wi=28, y=3, x=3,
                    pad=(1, 1, 1, 1))   # 200,704 products a tile, more than MAX_CHAIN
    assert not any(c.streamk for c in tuning_space.configs(long, SM90))
    for direction in ("fwd", "bwd_data"):
        assert not any(c.streamk for c in tuning_space.configs(_problem(direction, **CASES["3x3"]), SM90))


def test_the_space_leaves_out_phased_configs_over_the_shared_memory_limit():
    """bwd_weight's descriptor kernel with one input view per phase (3x3 stride 2 on 35x35,
    InceptionV3): 3 stages of 128-pixel boxes on 64x128 and 128x128 tiles failed on the
    H100 asking for 262,240 and 327,776 bytes (tuning database); phased_shared gives those
    numbers, and the space keeps the phased configs under the limit and every config where
    the input is one view."""
    odd = _problem("bwd_weight", n=8, c_total=128, k_total=128, hi=35, wi=35, y=3, x=3, stride=(2, 2))
    assert not geometry.phase_view(odd) and not geometry.strided_view(odd) and geometry.views_per_phase(odd)
    assert geometry.phased_shared(odd, 64, 128, 128, 3) == 262240
    assert geometry.phased_shared(odd, 128, 128, 128, 3) == 327776
    tiles = {(c.block_m, c.block_n, c.block_k) for c in tuning_space.configs(odd, SM90) if c.tma}
    assert (128, 64, 128) in tiles and (128, 128, 64) in tiles
    assert (64, 128, 128) not in tiles and (128, 128, 128) not in tiles
    even = _problem("bwd_weight", n=8, c_total=128, k_total=128, hi=36, wi=36, y=3, x=3, stride=(2, 2),
                    pad=(1, 1, 1, 1))
    assert geometry.phase_view(even) and not geometry.views_per_phase(even)
    assert (128, 128, 128) in {(c.block_m, c.block_n, c.block_k) for c in tuning_space.configs(even, SM90) if c.tma}


@pytest.mark.parametrize("change,reason", [
    (dict(direction="bwd_weight", split=2), "split=2: stream-K shares"),
    (dict(direction="bwd_weight", stride=(2, 2), hi=9),
     "streamk=1: bwd_weight with a stride on rows or columns that are not multiples"),
    (dict(direction="bwd_data"), "streamk=1: bwd_data has no stream-K kernel"),
    (dict(direction="fwd"), "streamk=1: fwd has no stream-K kernel"),
    (dict(tma=None), "streamk=1 applies to the descriptor kernels"),
    (dict(direction="fwd", persistent=1), "streamk=1 with persistent=1: one or the other"),
    (dict(streamk=3), "streamk=3 must be 0, 1 or 2"),
])
def test_stream_k_refusals(change, reason):
    kw = dict(n=2, c_total=16, k_total=16, hi=8, wi=8, y=3, x=3, pad=(1, 1, 1, 1))
    change = dict(change)
    direction = change.pop("direction", "bwd_weight")
    kw.update({k: v for k, v in change.items() if k in ("stride", "hi")})
    perf = {"tma": 1, "streamk": 1, **{k: v for k, v in change.items() if k not in ("stride", "hi")}}
    with pytest.raises(ConvgenError, match=reason):
        config.choose(_problem(direction, **kw), SM90, True, perf)


# fwd's shared leftover tiles (`tail`): on the interpreter's 3 SMs some tiles fill whole
# waves and the rest are shared; reductions whose steps the parts cut unevenly (18 steps
# in 4), a strided fwd on its phase view, a 1x1 on a run of pixels
TAIL_CASES = {
    "3x3": dict(n=2, c_total=24, k_total=56, hi=7, wi=9, y=3, x=3, pad=(1, 1, 1, 1)),
    "3x3-s2": dict(n=2, c_total=32, k_total=24, hi=10, wi=8, y=3, x=3, stride=(2, 2),
                   pad=(1, 0, 1, 1)),
    "1x1": dict(n=3, c_total=48, k_total=24, hi=5, wi=7, y=1, x=1),
}


def _tiles(p, cfg):
    n, h, w = geometry.pixel_grid(p)
    bi, bh, bw = geometry.pixel_box(n, h, w, cfg.block_m)
    return (geometry.cdiv(n, bi) * geometry.cdiv(h, bh) * geometry.cdiv(w, bw)
            * geometry.cdiv(p.k, cfg.block_n))


@pytest.mark.parametrize("case", list(TAIL_CASES))
@pytest.mark.parametrize("tail", [2, 4])
def test_tail_shares_the_tiles_left_after_whole_waves(case, tail):
    from convgen.backend import current
    from convgen.kernels import launch, spec, tma
    p = _problem("fwd", "bf16" if tail == 4 else "f16", **TAIL_CASES[case])
    cfg = config.choose(p, SM90, True, {"tma": 1, "tail": tail, "block_m": 32, "block_n": 16,
                                        "block_k": 16})
    tiles = _tiles(p, cfg)
    units = spec.units(__import__("torch").device(current().torch_device))
    programs, full = geometry.tail_programs(cfg, tiles, units)
    assert full % units == 0 and 0 <= tiles - full < units
    assert programs == full + (tiles - full) * tail
    # the launch is that grid: whole waves' programs, then `tail` per leftover tile
    from convgen.inputs import make_inputs
    from convgen.guards import empty_output
    from convgen.options import DataSpec
    device = current().torch_device
    spec = launch.launch_spec(p, make_inputs(p, DataSpec(seed=1), device), empty_output(p, device),
                              cfg, True, current().interpreter)
    assert spec.kernel is tma.conv_fwd_tail_kernel and spec.grid == (programs,)
    assert spec.runtime["FULL"] == full and spec.constexprs["TAIL"] == tail
    if current().interpreter:
        assert 0 < full < tiles   # whole tiles and shared ones, both run
    out, ref = _run(p, True, cfg.__dict__, seed=17 + tail)
    _check(p, out, ref)


@pytest.mark.parametrize("change,reason", [
    (dict(direction="bwd_data"), "tail=2: bwd_data has no kernel that shares leftover tiles"),
    (dict(direction="bwd_weight"), "tail=2: bwd_weight has no kernel"),
    (dict(tma=None), "tail=2 applies to the descriptor kernels"),
    (dict(persistent=1), "tail=2 with persistent=1: one or the other"),
    (dict(tail=3), "tail=3 must be 0, 2 or 4"),
])
def test_tail_refusals(change, reason):
    kw = dict(n=2, c_total=16, k_total=16, hi=8, wi=8, y=3, x=3, pad=(1, 1, 1, 1))
    change = dict(change)
    direction = change.pop("direction", "fwd")
    with pytest.raises(ConvgenError, match=reason):
        config.choose(_problem(direction, **kw), SM90, True, {"tma": 1, "tail": 2, **change})


def test_tail_configs_in_the_space_for_long_fwd_reductions():
    long = _problem("fwd", n=256, c_total=512, k_total=512, hi=7, wi=7, y=3, x=3, pad=(1, 1, 1, 1))
    assert {(c.block_m, c.block_n, c.block_k, c.tail) for c in tuning_space.configs(long, SM90)
            if c.tail} == {(128, 256, 64, 2), (128, 256, 64, 4), (256, 128, 64, 2),
                           (128, 128, 128, 2)}
    short = _problem("fwd", n=256, c_total=64, k_total=64, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1))
    assert not any(c.tail for c in tuning_space.configs(short, SM90))
    for d in ("bwd_data", "bwd_weight"):
        p = _problem(d, n=256, c_total=512, k_total=512, hi=7, wi=7, y=3, x=3, pad=(1, 1, 1, 1))
        assert not any(c.tail for c in tuning_space.configs(p, SM90))


@pytest.mark.parametrize("change,reason", [
    (dict(direction="bwd_weight"), "persistent=1: bwd_weight splits its reduction"),
    (dict(direction="bwd_data", stride=(2, 2)), "persistent=1: bwd_data with a stride"),
    (dict(tma=None), "persistent=1 applies to the descriptor kernels"),
    (dict(persistent=3), "persistent=3 must be 0, 1 or 2"),
])
def test_persistent_refusals(change, reason):
    kw = dict(n=2, c_total=16, k_total=16, hi=8, wi=8, y=3, x=3, pad=(1, 1, 1, 1))
    direction = change.pop("direction", "fwd")
    kw.update({k: v for k, v in change.items() if k in ("stride", "hi")})
    perf = {"tma": 1, "persistent": 1,
            **{k: v for k, v in change.items() if k not in ("stride", "hi")}}
    with pytest.raises(ConvgenError, match=reason):
        config.choose(_problem(direction, **kw), SM90, True, perf)


def test_persistent_configs_in_the_space_where_they_run():
    fwd = _problem("fwd", n=256, c_total=256, k_total=1024, hi=14, wi=14, y=1, x=1)
    space = tuning_space.configs(fwd, SM90)
    assert {(c.block_m, c.block_n, c.block_k, c.num_stages, c.persistent) for c in space
            if c.persistent} == {
        (128, 128, 64, 3, 1), (128, 128, 64, 4, 1), (128, 128, 64, 4, 2), (128, 256, 64, 3, 1),
        (128, 256, 64, 4, 2), (128, 128, 128, 2, 1), (128, 128, 128, 3, 1)}
    for d, stride in (("bwd_weight", (1, 1)), ("bwd_data", (2, 2))):
        p = _problem(d, n=256, c_total=64, k_total=64, hi=56, wi=56, y=3, x=3, stride=stride,
                     pad=(1, 1, 1, 1))
        assert not any(c.persistent for c in tuning_space.configs(p, SM90))


# strides taken as phase views (bwd_data, bwd_weight): odd extents (phases of unequal size), padding that puts a
# phase's first tap past the filter's edge, a strided 1x1 bwd_data (its other phases are
# zeros), a stride on one axis only
PHASE_CASES = {
    "3x3-s2": dict(n=2, c_total=16, k_total=24, hi=9, wi=7, y=3, x=3, stride=(2, 2),
                   pad=(1, 1, 1, 1)),
    "3x2-s2x1": dict(n=1, c_total=24, k_total=16, hi=8, wi=11, y=3, x=2, stride=(2, 1),
                     pad=(0, 2, 1, 0)),
    "1x1-s2": dict(n=3, c_total=16, k_total=16, hi=7, wi=6, y=1, x=1, stride=(2, 2)),
    "1x1-s2x1": dict(n=2, c_total=16, k_total=16, hi=5, wi=3, y=1, x=1, stride=(2, 1)),
    "1x1-s2-padded": dict(n=2, c_total=16, k_total=16, hi=7, wi=7, y=1, x=1, stride=(2, 2),
                          pad=(1, 1, 0, 0)),
    "5x4-s1x2": dict(n=2, c_total=16, k_total=32, hi=10, wi=9, y=5, x=4, stride=(1, 2),
                     pad=(2, 1, 0, 3)),
    # even extents: bwd_weight takes fwd's one view over every phase (geometry.phase_view);
    # 24 channels in blocks of 16 run into the next phase's channels (columns it drops)
    "3x3-s2-even": dict(n=3, c_total=24, k_total=16, hi=10, wi=6, y=3, x=3, stride=(2, 2),
                        pad=(1, 0, 2, 1)),
    "4x4-s2-even": dict(n=2, c_total=16, k_total=40, hi=8, wi=12, y=4, x=4, stride=(2, 2),
                        pad=(0, 3, 1, 1)),
}


@pytest.mark.parametrize("case", list(PHASE_CASES))
@pytest.mark.parametrize("direction", ["bwd_data", "bwd_weight"])
def test_strides_as_phase_views(direction, case):
    p = _problem(direction, "bf16" if "s1" in case else "f16", **PHASE_CASES[case])
    assert geometry.tma_unsupported(p) is None
    perf = {"tma": 1, "block_m": 32, "block_n": 16, "block_k": 16}
    if direction == "bwd_weight":
        perf["split"] = 3
    out, ref = _run(p, True, perf, seed=len(case))
    _check(p, out, ref)


def test_bwd_weight_takes_one_phase_view_where_the_stride_divides_the_input():
    # one descriptor, one loop: four loops (one per phase view) kept four sets of pipeline
    # buffers, a program per SM where two fit (docs/conv-benchmark.md)
    views = {case: geometry.phase_view(_problem("bwd_weight", **PHASE_CASES[case]))
             for case in PHASE_CASES}
    assert views == {"3x3-s2": False, "3x2-s2x1": True, "1x1-s2": False, "1x1-s2x1": False,
                     "1x1-s2-padded": False, "5x4-s1x2": False, "3x3-s2-even": True,
                     "4x4-s2-even": True}
    assert not geometry.phase_view(_problem("bwd_data", **PHASE_CASES["3x3-s2-even"]))


@pytest.mark.parametrize("seed", range(9))
def test_descriptor_kernels_random_geometries(seed):
    rng = random.Random(100 + seed)
    direction = ["fwd", "bwd_data", "bwd_weight"][seed % 3]
    dil = (rng.randint(1, 2), rng.randint(1, 3))
    y, x = rng.randint(1, 4), rng.randint(1, 3)
    p = _problem(direction, rng.choice(["f16", "bf16"]), n=rng.randint(1, 4),
                 c_total=8 * rng.randint(2, 5), k_total=8 * rng.randint(1, 5),
                 hi=rng.randint(dil[0] * (y - 1) + 1, 12), wi=rng.randint(dil[1] * (x - 1) + 1, 12),
                 y=y, x=x, dilation=dil, pad=tuple(rng.randint(0, 2) for _ in range(4)))
    perf = {"tma": 1, "block_m": rng.choice([16, 32, 64]), "block_n": rng.choice([16, 32]),
            "block_k": rng.choice([16, 32])}
    if direction == "bwd_weight":
        perf["split"] = rng.choice([1, 2, 5])
    out, ref = _run(p, True, perf, seed=seed)
    _check(p, out, ref)


@pytest.mark.parametrize("change,reason", [
    (dict(stride=(2, 1), hi=9), "stride 2x1 on a 9x8 input: fwd's phase view needs rows"),
    (dict(stride=(2, 2), c_total=24), "stride 2x2 with c=24: fwd's phase view needs channels"),
    (dict(stride=(2, 2), layouts={"input": "nhcw", "filter": "kyxc", "output": "nhwk"}),
     "stride 2x2 with input layout nhgcw: fwd's phase view needs each row"),
    (dict(stride=(3, 1), direction="bwd_data"), "stride 3x1: phase views take strides up to 2"),
    (dict(stride=(2, 2), dilation=(1, 2), direction="bwd_weight"), "stride 2x2 with dilation 1x2"),
    (dict(stride=(2, 2), hi=1, y=1, direction="bwd_data"),
     "stride 2x2 on a 1x8 input: a phase view would be empty"),
    (dict(g=2, c_total=32, k_total=32), "2 groups"),
    (dict(c_total=3), "c=3"),
    (dict(c_total=20), "c=20: rows of channels must be a multiple of 16 bytes"),
    (dict(k_total=12), "k=12"),
    (dict(dtype="f32"), "f32"),
    (dict(layouts=LAYOUTS["nchw"]), "input layout"),
])
def test_problems_the_descriptor_kernels_refuse(change, reason):
    kw = dict(direction="fwd", dtype="f16", n=2, g=1, c_total=16, k_total=16, hi=8, wi=8,
              y=3, x=3, layouts=LAYOUTS["nhwc"])
    kw.update(change)
    kw["dtype"] = elem_type(kw["dtype"])
    p = make_problem(**kw)
    why = geometry.tma_unsupported(p)
    assert why is not None and reason in why
    with pytest.raises(ConvgenError, match="tma=1: "):
        config.choose(p, SM90, True, {"tma": 1})


@pytest.mark.parametrize("n,h,w,block_m,want", [
    (256, 28, 28, 128, (8, 4, 4)),     # 28 = 7 * 4: no box reaches past an edge
    (256, 14, 14, 128, (32, 2, 2)),
    (256, 56, 56, 128, (2, 8, 8)),
    (256, 7, 7, 128, (128, 1, 1)),
    (3, 7, 9, 32, (1, 8, 4)),      # 8 rows over 7 and 4 columns over 9 waste least
])
def test_pixel_box_wastes_least(n, h, w, block_m, want):
    box = geometry.pixel_box(n, h, w, block_m)
    assert box == want
    assert box[0] * box[1] * box[2] == block_m


def test_default_rule_takes_descriptors_on_hopper_only():
    three = _problem("fwd", n=256, c_total=128, k_total=128, hi=28, wi=28, y=3, x=3, pad=(1, 1, 1, 1))
    one = _problem("fwd", n=256, c_total=64, k_total=64, hi=56, wi=56, y=1, x=1)
    one_w = _problem("bwd_weight", n=256, c_total=64, k_total=64, hi=56, wi=56, y=1, x=1)
    assert config.choose(three, SM90, True).tma == 1
    assert config.choose(one_w, SM90, True).tma == 1
    assert config.choose(one, SM90, True).tma == 1
    from convgen.backend import INTERPRETER
    for be in (SM80, GFX942, INTERPRETER):
        assert not config.choose(three, be, True).tma
    with pytest.raises(ConvgenError, match="sm80 has no tensor memory accelerator"):
        config.choose(three, SM80, True, {"tma": 1})
    # the FMA path keeps the pointer kernels everywhere
    assert not config.choose(three, SM90, False).tma


def test_bwd_weight_split_fills_the_gpu():
    p = _problem("bwd_weight", n=256, c_total=64, k_total=64, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1))
    cfg = config.choose(p, SM90, True)
    # 9 tiles of 64x64 (one per tap): ~28 parts make ~256 programs
    assert (cfg.block_m, cfg.block_n, cfg.split) == (64, 64, 28)
    from convgen.kernels.geometry import bwd_weight_parts
    parts, per = bwd_weight_parts(p, cfg)
    bi, bh, bw = geometry.pixel_box(256, 56, 56, cfg.block_k)
    boxes = (256 // bi) * (56 // bh) * (56 // bw)
    assert parts * per >= boxes > (parts - 1) * per


def test_the_pointer_rule_splits_long_reductions_into_short_chains():
    """A depthwise bwd_weight at batch 256 (MobileNetV2's 144 channels, 56x56): 802,816
    products per output. Split 1 failed the reference check on the H100 (-0.6 ulp lean);
    no part of the rule's config may be longer than MAX_CHAIN."""
    from convgen.kernels.geometry import split_parts as parts
    p = _problem("bwd_weight", n=256, c_total=144, k_total=144, hi=56, wi=56, y=3, x=3,
                 pad=(1, 1, 1, 1), g=144)
    for be in (SM90, GFX942):
        # the GEMM kernels' rule (the rule itself gives depthwise the direct kernels)
        cfg = config.default_config(p, be, True, gemm=True)
        count, chain = parts(p, cfg)
        assert not cfg.tma and chain <= config.MAX_CHAIN and count * chain >= p.gemm[2]
        direct = config.choose(p, be, True)
        assert direct.direct and config.longest_chain(p, direct) <= config.MAX_CHAIN
    # a short reduction keeps one part
    small = _problem("bwd_weight", n=2, c_total=144, k_total=144, hi=14, wi=14, y=3, x=3,
                     pad=(1, 1, 1, 1), g=144)
    assert config.default_config(small, SM90, True, gemm=True).split == 1


def test_tuning_space_holds_descriptor_configs_where_they_run():
    p = _problem("fwd", n=256, c_total=64, k_total=64, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1))
    on_hopper = tuning_space.configs(p, SM90)
    assert any(c.tma for c in on_hopper) and any(not c.tma for c in on_hopper)
    assert len(set(on_hopper)) == len(on_hopper)
    assert not any(c.tma for c in tuning_space.configs(p, GFX942))
    w = _problem("bwd_weight", n=256, c_total=64, k_total=64, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1))
    for cfg in tuning_space.configs(w, SM90):
        config.validate(cfg, w, SM90, True)


def test_descriptor_kernels_compile_to_tma_and_wgmma_on_sm90():
    code = ("from convaudit.isa import CHANNELS_LAST, compile_conv, matrix_instructions, "
            "assembly, load_widths\n"
            "for d in ('fwd', 'bwd_data', 'bwd_weight'):\n"
            "    perf = {'tma': 1, 'block_m': 64, 'block_n': 64, 'block_k': 64, 'num_stages': 3}\n"
            "    c = compile_conv(d, 'f16', True, 'sm90', CHANNELS_LAST, perf_config=perf)\n"
            "    asm = assembly(c, 'sm90')\n"
            "    l = load_widths(c, 'sm90')\n"
            "    print(d, asm.count('cp.async.bulk.tensor'), int(any('wgmma' in m for m in "
            "matrix_instructions(c, 'sm90'))), l['narrow'], l['async'])\n")
    rows = [line.split() for line in compile_here("-c", code).stdout.splitlines()]
    assert [r[0] for r in rows] == ["fwd", "bwd_data", "bwd_weight"], rows
    for d, tma_copies, wgmma, narrow, asynchronous in rows:
        assert int(tma_copies) > 0 and wgmma == "1" and narrow == "0" and int(asynchronous) > 0, rows


# channels that blocks of 16 divide (swap_ab reads the filter's (k, y*x*c) rows whole);
# primes and odd extents elsewhere, so no tile is full
SWAP_CASES = {
    "3x3": dict(n=3, c_total=32, k_total=40, hi=7, wi=9, y=3, x=3, pad=(1, 1, 1, 1)),
    "5x3-dilated": CASES["5x3-dilated"],
    "1x1": dict(n=2, c_total=48, k_total=24, hi=6, wi=5, y=1, x=1),
    "3x3-s2": dict(n=2, c_total=32, k_total=24, hi=10, wi=6, y=3, x=3, stride=(2, 2),
                   pad=(1, 1, 1, 1)),
    "1x1-s2": dict(n=3, c_total=16, k_total=40, hi=9, wi=7, y=1, x=1, stride=(2, 2)),
}


def _swapped_launch(p, form):
    """(perf, config, launch spec) of problem p with swap_ab and the other form named
    ("plain", "persistent=1", ...): three different block sizes, so a filter block read with
    its sides swapped would show."""
    from convgen.backend import current
    from convgen.inputs import make_inputs
    from convgen.guards import empty_output
    from convgen.kernels import launch
    from convgen.options import DataSpec
    perf = {"tma": 1, "swap_ab": 1, "block_m": 64, "block_n": 32, "block_k": 16}
    if form != "plain":
        name, value = form.split("=")
        perf[name] = int(value)
    cfg = config.choose(p, SM90, True, perf)
    device = current().torch_device
    spec = launch.launch_spec(p, make_inputs(p, DataSpec(seed=1), device), empty_output(p, device),
                              cfg, True, current().interpreter)
    assert spec.constexprs["SWAP"] == 1
    return perf, cfg, spec


@pytest.mark.parametrize("form", ["plain", "persistent=1", "persistent=2"])
@pytest.mark.parametrize("case", ["3x3", "5x3-dilated", "1x1", "3x3-s2", "1x1-s2", "odd-channels"])
def test_swapped_bwd_data_matches_float64(case, form):
    # channels no block divides too: the filter view's columns past C belong to the next
    # tap and make input channels that no store writes
    cases = {**SWAP_CASES, "odd-channels": dict(n=2, c_total=24, k_total=40, hi=7, wi=5, y=3,
                                                x=3, pad=(1, 1, 1, 1))}
    p = _problem("bwd_data", "bf16" if "s2" in case else "f16", **cases[case])
    if form != "plain" and (p.stride_h, p.stride_w) != (1, 1):
        pytest.skip("persistent bwd_data is stride 1 only")
    perf, _, spec = _swapped_launch(p, form)
    # the filter goes in as (k, y*x*c) rows: blocks of block_k rows, block_n channels
    assert spec.runtime["w_desc"].block_shape == [16, 32]
    out, ref = _run(p, True, perf, seed=3 + len(case) + len(form))
    _check(p, out, ref)


@pytest.mark.parametrize("form", ["plain", "persistent=1", "persistent=2", "tail=2"])
@pytest.mark.parametrize("case", list(SWAP_CASES))
def test_swapped_fwd_matches_float64(case, form):
    from convgen.kernels import tma
    p = _problem("fwd", "bf16" if "s2" in case else "f16", **SWAP_CASES[case])
    perf, cfg, spec = _swapped_launch(p, form)
    # the filter goes in as its (k, y*x*c) rows: blocks of block_n filters, block_k channels
    assert spec.runtime["w_desc"].block_shape == [32, 16]
    assert spec.kernel is (tma.conv_fwd_tail_kernel if cfg.tail else tma.conv_fwd_tma_kernel)
    out, ref = _run(p, True, perf, seed=len(case) + len(form))
    _check(p, out, ref)


def test_swapped_stem_runs_folded():
    # the fold's stride-1 problem takes the swapped kernel too (its channels fill blocks)
    p = _problem("fwd", n=2, c_total=3, k_total=16, hi=13, wi=11, y=7, x=7, stride=(2, 2),
                 pad=(3, 3, 3, 3))
    perf = {"s2d": 2, "tma": 1, "swap_ab": 1, "block_m": 32, "block_n": 16, "block_k": 64}
    out, ref = _run(p, True, perf, seed=9)
    _check(p, out, ref)


@pytest.mark.parametrize("change,reason", [
    (dict(direction="bwd_weight"), "swap_ab=1: bwd_weight has no swapped kernel"),
    (dict(tma=None), "swap_ab=1: applies to the descriptor kernels"),
    (dict(c_total=24), r"swap_ab=1: block_k=16 must divide c=24"),
    (dict(filter="yxkc"), "swap_ab=1: filter layout yxkc"),
    (dict(swap_ab=2), "swap_ab=2 must be 0 or 1"),
])
def test_swap_ab_refusals(change, reason):
    kw = dict(n=2, c_total=32, k_total=16, hi=8, wi=8, y=3, x=3, pad=(1, 1, 1, 1))
    change = dict(change)
    direction = change.pop("direction", "fwd")
    kw["c_total"] = change.pop("c_total", kw["c_total"])
    layouts = dict(LAYOUTS["nhwc"], filter=change.pop("filter", "kyxc"))
    p = make_problem(direction=direction, dtype=elem_type("f16"), g=1, layouts=layouts, **kw)
    with pytest.raises(ConvgenError, match=reason):
        config.choose(p, SM90, True, {"tma": 1, "swap_ab": 1, "block_k": 16, **change})


def test_swapped_twins_in_the_space_and_told_apart_by_the_selector():
    from convtune import features
    p = _problem("fwd", n=256, c_total=512, k_total=512, hi=7, wi=7, y=3, x=3, pad=(1, 1, 1, 1))
    space = tuning_space.configs(p, SM90)
    swapped = [c for c in space if c.swap_ab]
    plain = {replace(c, swap_ab=None) for c in space if not c.swap_ab}
    # every 8-warp descriptor config once more, transposed; nothing else
    assert {replace(c, swap_ab=None) for c in swapped} == {c for c in plain if c.tma and c.num_warps == 8}
    assert len(swapped) == len({replace(c, swap_ab=None) for c in swapped})
    for cfg in swapped:
        config.validate(cfg, p, SM90, True)
    # the model tells a swapped config from its twin by its own feature, and only by it
    dev = features.Device("sm90", "NVIDIA H100 80GB HBM3")
    col = features.FEATURE_NAMES.index("swap_ab")
    for cfg in swapped[:4]:
        twin, mine = (features.features(p, c, dev) for c in (replace(cfg, swap_ab=None), cfg))
        assert (twin[col], mine[col]) == (0, 1)
        assert twin[:col] + twin[col + 1:] == mine[:col] + mine[col + 1:]
    stem = _problem("fwd", n=8, c_total=3, k_total=64, hi=32, wi=32, y=7, x=7, stride=(2, 2),
                    pad=(3, 3, 3, 3))
    assert any(c.swap_ab for c in tuning_space.configs(stem, SM90))
    data = _problem("bwd_data", n=256, c_total=512, k_total=512, hi=7, wi=7, y=3, x=3,
                    pad=(1, 1, 1, 1))
    swapped = [c for c in tuning_space.configs(data, SM90) if c.swap_ab]
    assert swapped and all(c.num_warps == 8 and c.tma for c in swapped)
    q = _problem("bwd_weight", n=256, c_total=512, k_total=512, hi=7, wi=7, y=3, x=3,
                 pad=(1, 1, 1, 1))
    assert not any(c.swap_ab for c in tuning_space.configs(q, SM90))
    # channels no 64-channel block divides: no twin
    odd = _problem("fwd", n=256, c_total=80, k_total=128, hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1))
    assert not any(c.swap_ab for c in tuning_space.configs(odd, SM90))


def test_swapped_kernels_feed_both_dot_operands_from_shared_memory_on_sm90():
    # why swap_ab exists: Triton (3.6 on the H100, 3.9 here) loads a dot's first operand
    # into registers when it is reshaped from a pixel box; the second stays in shared
    # memory. Swapped, the first is the filter's 2-d block and neither goes through registers
    code = ("import re\n"
            "from convaudit.isa import CHANNELS_LAST, compile_conv\n"
            "for d in ('fwd', 'bwd_data'):\n"
            "  for swap in (0, 1):\n"
            "    perf = {'tma': 1, 'block_m': 128, 'block_n': 128, 'block_k': 32,\n"
            "            'num_warps': 8, 'num_stages': 3, 'swap_ab': swap}\n"
            "    ir = compile_conv(d, 'f16', True, 'sm90', CHANNELS_LAST, perf_config=perf).asm['ttgir']\n"
            "    firsts = re.findall(r'ttng.warp_group_dot %\\S+, %\\S+, %\\S+.*? : (\\S+)', ir)\n"
            "    print(d, swap, ir.count('ttg.local_load'), ' '.join(f.split('<')[0] for f in firsts))\n")
    rows = [line.split() for line in compile_here("-c", code).stdout.splitlines()]
    assert [r[:2] for r in rows] == [["fwd", "0"], ["fwd", "1"], ["bwd_data", "0"], ["bwd_data", "1"]], rows
    for swapped in (rows[1], rows[3]):
        assert swapped[2] == "0" and swapped[3:] and set(swapped[3:]) == {"!ttg.memdesc"}, rows
    # and unswapped the first operand is a register tensor: if a Triton upgrade keeps it in
    # shared memory, swap_ab may have stopped paying (time it again)
    for plain in (rows[0], rows[2]):
        assert plain[2] != "0" and "tensor" in plain[3:], rows


def test_a_stored_pointer_config_stays_a_pointer_config_on_hopper():
    # the tuning database stores describe()'s text, which leaves None fields out; read back
    # on sm90, where the default rule sets tma=1, it must still launch the pointer kernel
    p = _problem("fwd", n=256, c_total=256, k_total=256, hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1))
    text = config.choose(p, SM90, True, {"tma": None, "block_m": 256}).describe()
    assert "tma" not in text
    assert config.choose(p, SM90, True, config.from_text(text)).tma is None
    assert config.choose(p, SM90, True, config.from_text(text + ",tma=1")).tma == 1


def test_bwd_weight_takes_more_parts_than_boxes_or_unroll_limits():
    # more parts than pixel boxes: one box per part, none empty, all added in order
    p = _problem("bwd_weight", n=3, c_total=16, k_total=24, hi=5, wi=7, y=3, x=3, pad=(1, 1, 1, 1))
    perf = {"tma": 1, "block_m": 16, "block_n": 16, "block_k": 16, "split": 1000}
    from convgen.kernels.geometry import bwd_weight_parts
    parts, per = bwd_weight_parts(p, config.choose(p, SM90, True, perf))
    assert geometry.pixel_box(3, 5, 7, 16) == (1, 2, 8)
    assert (parts, per) == (3 * 3 * 1, 1)    # 3 images x 3 row boxes x 1 column box
    out, ref = _run(p, True, perf, seed=5)
    _check(p, out, ref)


def test_perf_config_without_tma_is_a_pointer_kernel_tile():
    # a -perf_config written for the pointer kernels (rocMLIR lines, old tests) keeps its
    # meaning on sm90, where the default rule alone would take the descriptor kernels
    p = _problem("bwd_weight", n=8, c_total=64, k_total=64, hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1))
    assert config.choose(p, SM90, True).tma == 1
    assert config.choose(p, SM90, True, {"block_k": 32, "split": 16}).tma is None
    assert config.choose(p, SM90, True, {"block_k": 32, "split": 16, "tma": 1}).tma == 1


def test_default_keeps_pointer_kernels_where_shared_memory_is_small():
    # sm120 (~100 KB per program) takes tma=1 when asked, not by default
    sm120 = Backend("cuda", "sm120", 32)
    p = _problem("fwd", n=8, c_total=64, k_total=64, hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1))
    assert sm120.tma_unavailable is None
    assert not config.choose(p, sm120, True).tma
    assert config.choose(p, sm120, True, {"tma": 1}).tma == 1


def test_a_workspace_past_32_bit_offsets_is_refused():
    p = _problem("bwd_weight", n=256, c_total=2048, k_total=2048, hi=14, wi=14, y=3, x=3,
                 pad=(1, 1, 1, 1))
    with pytest.raises(ConvgenError, match="exceed the 2.31 elements"):
        config.choose(p, SM90, True, {"tma": 1, "block_k": 16, "split": 1024})
    config.choose(p, SM90, True, {"tma": 1, "block_k": 16, "split": 8})


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_permuted_layouts_with_channels_innermost(direction):
    # channels innermost is all the descriptors need: the other dims may come in any order
    # (hwnc: the batch between the pixels and the channels)
    p = make_problem(direction=direction, dtype=elem_type("f16"), n=3, g=1, c_total=16,
                     k_total=24, hi=5, wi=7, y=3, x=2, pad=(1, 0, 1, 1),
                     layouts={"input": "hwnc", "filter": "yxkc", "output": "whnk"})
    assert geometry.tma_unsupported(p) is None
    perf = {"tma": 1, "block_m": 16, "block_n": 16, "block_k": 16}
    if direction == "bwd_weight":
        perf["split"] = 2
    out, ref = _run(p, True, perf, seed=3)
    _check(p, out, ref)


def test_a_size_one_dimension_of_any_stride_makes_a_descriptor():
    """torch gives a size-1 dimension whatever stride it likes (torch.where on a 1x1 filter
    gave y and x stride 1, 2 bytes); a descriptor wants outer strides of 16 bytes, and the
    stride of a dimension of one addresses nothing. The H100 study run hit this with
    -flush_subnormals on a 1x1 channels-last forward."""
    import torch
    from convgen.kernels import tma
    from convgen.problem import LOGICAL
    w = torch.randn(64, 1, 1, 32, dtype=torch.float16)        # kyxc in memory
    logical = torch.as_strided(w, (1, 64, 32, 1, 1), (0, 32, 1, 1, 1))   # (g, k, c, y, x)
    d = tma._descriptor(logical, "kyxc", LOGICAL["filter"], [64, 1, 1, 32])
    assert d.strides == [32, 8, 8, 1] and d.shape == [64, 1, 1, 32]


def test_flushing_the_kernels_inputs_keeps_their_memory():
    """-flush_subnormals zeroes the kernel's subnormal inputs in a copy with the original's
    strides and margins, so the kernel reads the same layout as without it."""
    import torch
    from convgen import driver
    buf = torch.full((2 + 64 * 32,), float("nan"), dtype=torch.float16)
    t = buf[2:].view(64, 1, 1, 32).permute(0, 3, 1, 2)   # a kyxc filter inside NaN margins
    # normal values only: a draw of randn is subnormal in fp16 (|x| < 6.1e-5) one time in
    # ten over 2048 values, and the flush would rightly zero it (this test failed so)
    g = torch.Generator().manual_seed(7)
    mag = torch.rand(64, 32, 1, 1, generator=g) + 0.5
    t.copy_(torch.where(torch.rand(64, 32, 1, 1, generator=g) < 0.5, -mag, mag))
    t[0, 0, 0, 0], t[1, 2, 0, 0] = 1e-6, -3e-7           # fp16 subnormals
    f = driver._flush_subnormals(t, elem_type("f16"))
    assert f.stride() == t.stride() and f.storage_offset() == t.storage_offset()
    assert f[0, 0, 0, 0] == 0 and f[1, 2, 0, 0] == 0 and t[0, 0, 0, 0] != 0
    keep = torch.ones_like(t, dtype=torch.bool)
    keep[0, 0, 0, 0] = keep[1, 2, 0, 0] = False
    assert torch.equal(f[keep], t[keep])
    assert f._base[:2].isnan().all()                     # the margins came along


def test_tuning_keys_stay_put_once_kernels_have_run():
    # a lit worker runs many tests in one process: a key that moved after the first kernel
    # ran (the interpreter adds names to the kernel module's globals) missed every entry
    from convgen.kernels.launch import descriptor_pieces

    def pieces():
        return {d: descriptor_pieces(d) for d in ("fwd", "bwd_data", "bwd_weight")}
    before = pieces()
    for d in ("fwd", "bwd_data", "bwd_weight"):
        p = _problem(d, n=2, c_total=16, k_total=16, hi=5, wi=5, y=3, x=3, pad=(1, 1, 1, 1))
        perf = {"tma": 1, "block_m": 32, "block_n": 16, "block_k": 16,
                **({"split": 2} if d == "bwd_weight" else {})}
        out, ref = _run(p, True, perf, seed=2)
        _check(p, out, ref)
    assert pieces() == before

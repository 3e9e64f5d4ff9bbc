"""Strided problems folded into stride-1 ones (kernels/s2d.py): right answers against
torch's float64 conv on odd sizes, the fold's geometry, where it applies, and when the
default rule takes it."""
import pytest

from convgen.backend import Backend
from convgen.dtypes import elem_type
from convgen.errors import ConvgenError
from convgen.kernels import config, s2d
from convgen.problem import make_problem
from convtune import space as tuning_space
from test_isa import compile_here
from test_kernel import LAYOUTS, _check, _run

SM90 = Backend("cuda", "sm90", 32)
SM80 = Backend("cuda", "sm80", 32)
INTERP = Backend("interpreter", "interpreter", 32)

# strides that do not divide the input, a filter shift per axis, asymmetric padding,
# channels that fill no folded row, and input rows no output reads (the "crop" case)
CASES = {
    "stem": dict(n=2, c_total=3, k_total=24, hi=13, wi=11, y=7, x=7, stride=(2, 2),
                 pad=(3, 3, 3, 3)),
    "5x3-stride-3x2": dict(n=1, c_total=5, k_total=16, hi=17, wi=9, y=5, x=3, stride=(3, 2),
                           pad=(2, 0, 1, 2)),
    "crop": dict(n=3, c_total=1, k_total=16, hi=10, wi=7, y=3, x=2, stride=(4, 2),
                 pad=(0, 0, 0, 1)),
    # one row of taps: the column fold's inner problem is 1x1 stride 1 on overlapping rows,
    # which the descriptor kernels must not take as one run of pixels (geometry.flat_pixels)
    "1x3-row": dict(n=2, c_total=3, k_total=16, hi=6, wi=6, y=1, x=3, stride=(2, 2),
                    pad=(0, 0, 1, 1)),
}


def _problem(direction, dtype="f16", layouts="nhwc", **kw):
    return make_problem(direction=direction, dtype=elem_type(dtype), g=1,
                        layouts=LAYOUTS[layouts], **kw)


def _perf(direction, mode, tma):
    perf = {"s2d": mode, "block_m": 32, "block_n": 16, "block_k": 16}
    if tma:
        perf["tma"] = 1
    if direction == "bwd_weight":
        perf["split"] = 2
    return perf


@pytest.mark.parametrize("kernel", ["pointer", "tma"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("direction,mode", [("fwd", 1), ("fwd", 2), ("bwd_data", 1),
                                            ("bwd_weight", 1), ("bwd_weight", 2)])
def test_folded_problems_match_float64(direction, mode, case, kernel):
    p = _problem(direction, "bf16" if case == "crop" else "f16", **CASES[case])
    assert s2d.unsupported(p, mode) is None
    out, ref = _run(p, True, _perf(direction, mode, kernel == "tma"), seed=len(case) + mode)
    _check(p, out, ref)


@pytest.mark.parametrize("use_dot", [True, False], ids=["dot", "fma"])
@pytest.mark.parametrize("layouts", ["nchw", "mixed"])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_any_layout_and_f32_on_the_pointer_kernels(direction, layouts, use_dot):
    # the copies read and write the caller's tensors through their strides
    p = _problem(direction, "f32", layouts, **CASES["5x3-stride-3x2"])
    mode = 1 if direction == "bwd_data" else 2
    out, ref = _run(p, use_dot, _perf(direction, mode, False), seed=7)
    _check(p, out, ref)


def test_the_stem_folds_into_a_4x4_filter_on_16_channels():
    p = _problem("fwd", n=256, c_total=3, k_total=64, hi=224, wi=224, y=7, x=7, stride=(2, 2),
                 pad=(3, 3, 3, 3))
    f = s2d.fold(p, 1)
    # taps 2u + a - 1: u = 0, a = 0 is the zero row in front; padding (1 + 3) / 2 = 2
    assert f.h == s2d.Axis(s=2, r=1, taps=4, size=112, pad_l=2, pad_r=1) == f.w
    assert f.c == 16    # 2*2*3 = 12 channels, padded to a 32-byte row
    one = s2d.inner_problem(p, 1)
    assert (one.c, one.hi, one.wi, one.y, one.x, one.stride_h, one.ho, one.wo) == \
        (16, 112, 112, 4, 4, 1, 112, 112)
    two = s2d.inner_problem(p, 2)
    # x' written with its padding: 2 + 112 + 1 rows; a row of taps is 4 x 16 channels
    assert (two.c, two.hi, two.wi, two.y, two.x, two.ho, two.wo) == (64, 115, 112, 4, 1, 112, 112)
    assert (one.flops, two.flops) == (one.flops, 2 * 256 * 64 * 256 * 112 * 112)


def test_rows_no_output_reads_are_left_out():
    p = _problem("fwd", **CASES["crop"])
    # 10 rows, a 3-row filter at stride 4: outputs read rows 0-2 and 4-6, never 7-9
    assert p.ho == 2
    assert s2d.fold(p, 1).h == s2d.Axis(s=4, r=0, taps=1, size=2, pad_l=0, pad_r=0)


@pytest.mark.parametrize("change,mode,reason", [
    (dict(stride=(1, 1)), 1, "stride 1"),
    (dict(dilation=(1, 2)), 1, "dilation 1x2"),
    (dict(g=3, c_total=9, k_total=6), 1, "3 groups"),
    (dict(direction="bwd_data"), 2, "bwd_data cannot fold the filter's columns"),
    ({}, 3, "must be 1 or 2"),
])
def test_problems_the_fold_refuses(change, mode, reason):
    kw = dict(direction="fwd", dtype=elem_type("f16"), n=2, g=1, c_total=3, k_total=16,
              hi=9, wi=9, y=3, x=3, stride=(2, 2), layouts=LAYOUTS["nhwc"])
    kw.update(change)
    p = make_problem(**kw)
    assert reason in s2d.unsupported(p, mode)
    with pytest.raises(ConvgenError, match=f"s2d={mode}: .*{reason}"):
        config.choose(p, SM80, True, {"s2d": mode})


def test_a_folded_config_is_checked_against_the_folded_problem():
    p = _problem("fwd", **CASES["stem"])
    # the folded problem has 16 channels, no stride: the descriptor kernels take it on sm90
    cfg = config.choose(p, SM90, True, {"s2d": 1, "tma": 1, "block_k": 16})
    assert (cfg.s2d, cfg.tma) == (1, 1)
    with pytest.raises(ConvgenError, match=r"s2d=1 \(a 4x4 stride-1 filter on 16 channels\): "
                                           "tma=1: sm80 has no tensor memory"):
        config.choose(p, SM80, True, {"s2d": 1, "tma": 1})
    with pytest.raises(ConvgenError, match="s2d=2 .*block_m=48"):
        config.choose(p, SM80, True, {"s2d": 2, "block_m": 48})


def test_default_rule_folds_the_stem_where_descriptors_run():
    stem = dict(n=256, c_total=3, k_total=64, hi=224, wi=224, y=7, x=7, stride=(2, 2),
                pad=(3, 3, 3, 3))
    for direction, mode in (("fwd", 2), ("bwd_data", 1), ("bwd_weight", 2)):
        p = _problem(direction, **stem)
        cfg = config.choose(p, SM90, True)
        assert (cfg.s2d, cfg.tma) == (mode, 1), direction
        assert config.choose(p, SM80, True).s2d is None
        assert config.choose(p, INTERP, True).s2d is None
        assert config.choose(p, SM90, False).s2d is None
    # 16 channels fill a block: the pointer kernels load them well unfolded
    wide = _problem("fwd", **{**stem, "c_total": 16})
    assert config.choose(wide, SM90, True).s2d is None


def test_tuning_space_holds_folded_configs():
    p = _problem("bwd_weight", **CASES["stem"])
    on_sm90 = [c for c in tuning_space.configs(p, SM90) if c.s2d]
    assert {c.s2d for c in on_sm90} == {1, 2} and all(c.tma == 1 for c in on_sm90)
    on_sm80 = [c for c in tuning_space.configs(p, SM80) if c.s2d]
    assert on_sm80 and not any(c.tma for c in on_sm80)
    for cfg in on_sm90 + on_sm80:
        config.validate(cfg, p, SM90 if cfg.tma else SM80, True)
    # a stored folded config reads back as itself, and a plain one stays unfolded
    best = on_sm90[-1]
    assert config.choose(p, SM90, True, config.from_text(best.describe())) == best
    plain = config.choose(p, SM90, True, {"block_m": 64})
    assert plain.s2d is None and plain.tma is None


def test_the_folded_stem_loads_16_bytes_at_a_time_on_amd():
    # cross-compiled for gfx90a and gfx942 (pointer kernels; C = 3, 3x3 stride 2): unfolded,
    # every input load of the forward kernel is narrow; folded, none of fwd's or bwd_weight's
    code = ("from convaudit.isa import CHANNELS_LAST, compile_conv, load_widths\n"
            "for t in ('gfx90a', 'gfx942'):\n"
            "    for d, cfg in (('fwd', {'s2d': 2}), ('bwd_weight', {'s2d': 2, 'split': 2}),\n"
            "                   ('fwd', None)):\n"
            "        c = compile_conv(d, 'f16', True, t, CHANNELS_LAST, stride=(2, 2),\n"
            "                         perf_config=cfg, channels=3)\n"
            "        w = load_widths(c, t)\n"
            "        print(t, d, 'folded' if cfg else 'unfolded', w['wide'], w['narrow'])\n")
    rows = [line.split() for line in compile_here("-c", code).stdout.splitlines()]
    assert len(rows) == 6, rows
    for target, direction, how, wide, narrow in rows:
        if how == "folded":
            assert int(wide) > 0 and int(narrow) == 0, rows
        else:
            assert int(wide) == 0 and int(narrow) > 0, rows

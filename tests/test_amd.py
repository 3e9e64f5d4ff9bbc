"""AMD without an AMD GPU: the device facts (convgen/gpus.py), the rule's picks on each AMD
arch, the LDS check, and the AMD tuning space (convtune/space.py). The compiled kernels
themselves are checked by `convgen audit` (tests/test_audit.py)."""
from __future__ import annotations

import pytest

from convgen import backend, dtypes, gpus
from convgen.directions import column_tiles
from convgen.errors import ConvgenError
from convgen.kernels.config import choose, lds_bytes, validate
from convgen.problem import make_problem
from convtune import space
from convtune.models import CONV_BENCH_LAYERS

AMD = ("gfx908", "gfx90a", "gfx942", "gfx950")
NHWC = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}


def layer_problem(layer, direction: str, n: int = 256, dtype: str = "f16"):
    c, k, hw, f, s, pad, g = layer[:7]
    return make_problem(direction=direction, dtype=dtypes.elem_type(dtype), n=n, g=g, c_total=c,
                        k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s), pad=(pad,) * 4,
                        layouts=NHWC)


def test_device_facts():
    """The CU counts the rule and the features count with, and what tells an H100 from an
    H200 (the same 132 SMs; 3.35 against 4.8 TB/s)."""
    cus = {"AMD Instinct MI100": 120, "AMD Instinct MI210": 104, "AMD Instinct MI250X": 110,
           "AMD Instinct MI300X": 304, "AMD Instinct MI300A": 228, "AMD Instinct MI325X": 304,
           "AMD Instinct MI355X": 256}
    assert {name: gpus.DEVICES[name].units for name in cus} == cus
    assert gpus.arch("gfx942").shared_per_unit == gpus.arch("gfx90a").shared_per_unit == 64 * 1024
    assert gpus.arch("gfx950").shared_per_unit == 160 * 1024
    assert {gpus.arch(a).wave for a in AMD} == {64}
    h100, h200 = gpus.DEVICES["NVIDIA H100 80GB HBM3"], gpus.DEVICES["NVIDIA H200"]
    assert h100.units == h200.units and h100.bandwidth_gbs < h200.bandwidth_gbs
    for d in gpus.DEVICES.values():
        assert d.arch in gpus.ARCHS and d.units > 0 and d.bandwidth_gbs > 0 and d.l2_mb > 0
    for arch, name in gpus.REFERENCE_DEVICE.items():
        assert gpus.DEVICES[name].arch == arch
    assert backend.of_arch("gfx942") == backend.Backend("hip", "gfx942", 64)
    assert backend.of_arch("sm90") == backend.Backend("cuda", "sm90", 32)
    with pytest.raises(ValueError):
        backend.of_arch("tpu4")


@pytest.mark.parametrize("arch,warps,regs,shared,want", [
    # 8 waves a program, 2 a SIMD; 76 VGPRs leave room for 6 a SIMD (3 programs), LDS for 2
    ("gfx942", 8, 76, 32768, 2),
    # 140 VGPRs: 3 waves a SIMD, one 8-warp program (two would need 4)
    ("gfx942", 8, 140, 32768, 1),
    # 4 warps, one wave a SIMD: 166 VGPRs leave 3
    ("gfx90a", 4, 166, 32768, 2),
    # gfx908's separate files: 69 VGPRs and 32 AGPRs, 256 each: 3 waves a SIMD
    ("gfx908", 8, 69, 16384, 1),
    # gfx950's 160 KB of LDS holds 4 programs of 40 KB
    ("gfx950", 4, 64, 40960, 4),
    # sm90: 3 stages of (64 + 64) x 32 halves (+1 KB) fit 9, 64 registers x 128 threads 8
    ("sm90", 4, 64, 24576, 8),
    # fewer waves than SIMDs: 2-warp programs of 64 VGPRs, 8 waves a SIMD, 32 slots: 16
    ("gfx942", 2, 64, 0, 16),
    # one wave: the CU's 32 wave slots; LDS for 4 of 16 KiB
    ("gfx90a", 1, 32, 16384, 4),
])
def test_programs_per_unit(arch, warps, regs, shared, want):
    a = gpus.arch(arch)
    assert gpus.programs_per_unit(a, warps, regs, shared, agprs=32) == want
    if a.vendor == "amd" and not a.separate_agprs:
        # AGPRs share the one file there: counted in regs, never again
        assert gpus.programs_per_unit(a, warps, regs, shared, agprs=400) == want
    if arch == "gfx908":
        # its AGPR file decides where it holds more than the VGPRs
        # (200 AGPRs: one wave a SIMD, too few for an 8-warp program)
        assert gpus.programs_per_unit(a, warps, regs, shared, agprs=200) == 0


def test_llvms_occupancy_stands_for_the_registers():
    """The audit counts programs from the waves a SIMD LLVM reports: 6 waves of 8-warp
    programs (2 a SIMD) are 3 programs, LDS for 2 of 32 KiB; 2 waves, one program."""
    a = gpus.arch("gfx942")
    assert gpus.programs_per_unit(a, 8, 76, 32768, waves_per_simd=6) == 2
    assert gpus.programs_per_unit(a, 8, 76, 16384, waves_per_simd=6) == 3
    assert gpus.programs_per_unit(a, 8, 104, 32768, waves_per_simd=2) == 1


# The rule on the conv benchmark's seven layers (convtune.models.CONV_BENCH_LAYERS) at batch
# 256, f16, channels-last: block_m x block_n x block_k / warps / split
RULE = {
    ("gfx942", "fwd"): "128x64x64/4/1 128x64x64/4/1 128x128x64/8/1 128x128x64/8/1 "
                       "128x128x64/8/1 64x64x64/4/1 128x128x64/8/1",
    ("gfx942", "bwd_data"): "128x64x64/4/1 128x64x64/4/1 128x128x64/8/1 128x128x64/8/1 "
                            "128x128x64/8/1 128x16x64/4/1 128x128x64/8/1",
    ("gfx942", "bwd_weight"): "64x64x64/4/64 64x64x64/4/64 128x128x64/8/64 128x128x64/8/64 "
                              "128x128x64/8/16 64x64x64/4/64 128x128x64/8/4",
    ("gfx90a", "bwd_weight"): "64x64x64/4/64 64x64x64/4/24 128x128x64/8/64 128x128x64/8/24 "
                              "128x128x64/8/6 64x64x64/4/64 128x128x64/8/1",
    ("gfx950", "bwd_weight"): "64x64x64/4/64 64x64x64/4/56 128x128x64/8/64 128x128x64/8/56 "
                              "128x128x64/8/14 64x64x64/4/64 128x128x64/8/4",
}


@pytest.mark.parametrize("arch", AMD)
@pytest.mark.parametrize("direction", ("fwd", "bwd_data", "bwd_weight"))
def test_the_amd_rule(arch, direction):
    """What the rule picks on each AMD arch: no forced occupancy (waves_per_eu=0 up to
    128x128), 16x16 matrix instructions, 2 stages, LDS for two programs a CU, a launch that
    fills the device where the problem can, and bwd_weight split for two programs a CU."""
    be = backend.of_arch(arch)
    facts = gpus.arch(arch)
    units = gpus.reference_device(arch).units
    picks = []
    for layer in CONV_BENCH_LAYERS:
        p = layer_problem(layer, direction)
        cfg = choose(p, be, True)
        picks.append(f"{cfg.block_m}x{cfg.block_n}x{cfg.block_k}/{cfg.num_warps}/{cfg.split}")
        assert (cfg.waves_per_eu, cfg.matrix_instr_nonkdim, cfg.kpack, cfg.num_stages) == (0, 16, 1, 2)
        assert cfg.tma is None and cfg.s2d is None
        if p.c < 16 and direction != "bwd_data":
            assert cfg.block_m <= 64 and cfg.block_n <= 64   # blocks across taps
        # gfx908's separate 256-register files hold two 128x128 programs a CU at 4 warps
        assert cfg.num_warps == (8 if cfg.block_m * cfg.block_n >= 128 * 128 and arch != "gfx908" else 4)
        assert 2 * lds_bytes(cfg, p, be) <= facts.shared_per_unit
        tiles = -(-p.gemm[0] // cfg.block_m) * column_tiles(p, cfg.block_n)
        if direction == "bwd_weight":
            # as many parts as make two programs a CU (to a tile's worth), but for the caps
            # (64 parts; the reduction's length)
            assert (tiles * cfg.split > 2 * units - tiles or cfg.split == 64
                    or cfg.split >= p.gemm[2] // 1024)
        else:
            assert tiles >= units or cfg.block_m * cfg.block_n <= 64 * 64
    if (arch, direction) in RULE:
        assert " ".join(picks) == RULE[arch, direction]


def test_channels_first_tensors_take_narrower_tiles():
    """On AMD a channels-first problem of 128x128 tiles takes 128x64 (their addresses take
    registers: two programs a CU where 128x128 held one, Triton 3.6)."""
    layer = CONV_BENCH_LAYERS[4]   # 3x3 256 -> 256 at 14x14
    nchw = {"input": "nchw", "filter": "kcyx", "output": "nkhw"}
    for direction in ("fwd", "bwd_data", "bwd_weight"):
        c, k, hw, f, s, pad, g = layer
        p = make_problem(direction=direction, dtype=dtypes.elem_type("f16"), n=256, g=g,
                         c_total=c, k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s),
                         pad=(pad,) * 4, layouts=nchw)
        cfg = choose(p, backend.of_arch("gfx942"), True)
        assert (cfg.block_m, cfg.block_n, cfg.num_warps) == (128, 64, 4), direction
        nhwc = choose(layer_problem(layer, direction), backend.of_arch("gfx942"), True)
        assert (nhwc.block_m, nhwc.block_n) == (128, 128)


def test_lds_is_checked_before_compiling():
    """3 stages of 128x256x64 f16 hold two 48 KiB buffers (96 KiB): more than a gfx942 CU's
    64 KiB, so refused with one line; gfx950's 160 KiB hold its 3 buffers."""
    p = layer_problem(CONV_BENCH_LAYERS[4], "fwd")
    big = {"block_m": 128, "block_n": 256, "block_k": 64, "num_stages": 3}
    with pytest.raises(ConvgenError, match=r"num_stages=3: a 128x256x64 f16 tile in 3 stages "
                                           r"takes 96 KiB of LDS; a gfx942 CU has 64 KiB"):
        choose(p, backend.of_arch("gfx942"), True, big)
    assert choose(p, backend.of_arch("gfx950"), True, big).num_stages == 3
    assert choose(p, backend.of_arch("gfx942"), True, {**big, "num_stages": 2}).num_stages == 2
    # NVIDIA's shared memory is Triton's to check; the FMA path has no LDS pipeline
    assert lds_bytes(choose(p, backend.of_arch("sm90"), True), p, backend.of_arch("sm90")) is None
    choose(p, backend.of_arch("gfx942"), False, big)


@pytest.mark.parametrize("arch", ("gfx90a", "gfx942", "gfx950"))
def test_the_amd_space_varies_the_compile_options(arch):
    """The space of a ResNet-50 layer varies waves_per_eu (0, 2: never 1), the matrix
    instruction (16, 32), kpack (2 on gfx942 only), 4-warp 128x128 tiles and stages as LDS
    allows; every config passes validate."""
    be = backend.of_arch(arch)
    for direction in ("fwd", "bwd_data", "bwd_weight"):
        p = layer_problem(CONV_BENCH_LAYERS[3], direction)
        configs = space.configs(p, be)
        assert configs[0] == choose(p, be, True)
        assert {c.waves_per_eu for c in configs} == {0, 2}
        assert {c.matrix_instr_nonkdim for c in configs} == {16, 32}
        assert {c.kpack for c in configs} == ({1, 2} if arch == "gfx942" else {1})
        assert {c.num_stages for c in configs} == {2, 3}
        assert any(c.block_m * c.block_n == 128 * 128 and c.num_warps == 4 for c in configs)
        assert len(configs) == len(set(configs)) and 20 <= len(configs) <= 160
        for c in configs:
            validate(c, p, be, True)
            assert lds_bytes(c, p, be) <= gpus.arch(arch).shared_per_program

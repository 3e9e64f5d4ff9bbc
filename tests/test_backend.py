"""What the backend module knows about devices: which types run, AMD-only options, how
fp8 matrix units accumulate, the lit features it gives; and how the kernel
configuration follows it."""
import json
import os
import subprocess
import sys

import pytest

from convgen import gpus
from convgen.backend import Backend
from convgen.dtypes import FP8_TYPES, TYPES, elem_type
from convgen.errors import ConvgenError
from convgen.kernels.config import choose
from convgen.problem import make_problem

INTERP = Backend("interpreter", "interpreter", 1)
SM90 = Backend("cuda", "sm90", 32)
GFX90A = Backend("hip", "gfx90a", 64)
GFX942 = Backend("hip", "gfx942", 64)
TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")


def test_fp8_support_table():
    t = elem_type
    assert Backend("cuda", "sm80", 32).type_unsupported(t("fp8_e4m3")) == \
        "fp8_e4m3 needs an NVIDIA GPU of sm89 or newer, this one is sm80"
    assert SM90.type_unsupported(t("fp8_e4m3fnuz"))
    assert GFX90A.type_unsupported(t("fp8_e5m2fnuz"))
    # MI200's fp16 matrix path would flush e5m2 subnormals; e4m3 has none below fp16's normals
    assert "flushes e5m2 subnormals" in GFX90A.type_unsupported(t("fp8_e5m2"))
    assert GFX90A.type_unsupported(t("fp8_e4m3")) is None
    assert Backend("hip", "gfx1100", 32).type_unsupported(t("fp8_e4m3"))
    assert GFX942.type_unsupported(t("fp8_e4m3fnuz")) is None
    assert INTERP.type_unsupported(t("fp8_e5m2fnuz")) is None
    assert set(FP8_TYPES) == {name for name, et in TYPES.items() if et.is_fp8}
    for name in ("f32", "f16", "bf16", "i8"):
        assert Backend("cuda", "sm70", 32).type_unsupported(t(name)) is None


def test_amd_only_options_reach_only_hip():
    opts = {"num_warps": 4, "waves_per_eu": 2, "kpack": 1, "matrix_instr_nonkdim": 16}
    assert SM90.compile_options(opts) == {"num_warps": 4}
    assert GFX942.compile_options(opts) == opts
    assert INTERP.compile_options(opts) == {"num_warps": 4}


def test_fp8_accumulator_precision():
    t = elem_type
    # NVIDIA fp8 units sum at ~14 bits unless Triton promotes after every instruction
    assert SM90.dot_u_acc(t("fp8_e4m3"), 0) is None
    assert SM90.dot_u_acc(t("fp8_e5m2"), 1 << 30) == 2.0 ** -15
    assert SM90.dot_u_acc(t("fp8_e4m3"), None) == 2.0 ** -15
    assert GFX942.dot_u_acc(t("fp8_e4m3fnuz"), 1 << 30) is None
    assert INTERP.dot_u_acc(t("fp8_e4m3"), 64) is None
    assert SM90.dot_u_acc(t("f16"), 64) is None
    # Triton's default promotes every instruction except on sm90: exact elsewhere
    assert Backend("cuda", "sm89", 32).dot_u_acc(t("fp8_e4m3"), None) is None
    assert Backend("cuda", "sm100", 32).dot_u_acc(t("fp8_e4m3"), 1 << 30) is None


@pytest.mark.parametrize("be,want,not_there", [
    (INTERP, {"interpreter", "tma", "fp8-e4m3", "fp8-e5m2", "fp8-e4m3fnuz", "fp8-e5m2fnuz"}, {"gpu"}),
    (SM90, {"gpu", "cuda", "sm90", "matrix-cores", "tma", "fp8-e4m3", "fp8-e5m2"},
     {"mfma", "rocm", "subnormal-flush", "fp8-e4m3fnuz", "interpreter"}),
    (Backend("cuda", "sm80", 32), {"gpu", "cuda", "sm80", "matrix-cores"}, {"fp8-e4m3", "tma"}),
    (GFX90A, {"gpu", "rocm", "gfx90a", "mfma", "matrix-cores", "subnormal-flush", "fp8-e4m3"},
     {"fp8-e5m2", "fp8-e4m3fnuz", "cuda"}),
    # MI100 matrix instructions keep fp16/bf16 subnormals (the fp16 study): no subnormal-flush
    (Backend("hip", "gfx908", 64), {"gpu", "rocm", "gfx908", "mfma", "matrix-cores"},
     {"subnormal-flush", "fp8-e4m3"}),
    (GFX942, {"gfx942", "mfma", "fp8-e4m3", "fp8-e5m2", "fp8-e4m3fnuz", "fp8-e5m2fnuz"},
     {"subnormal-flush", "tma"}),
    (Backend("hip", "gfx1100", 32), {"gpu", "rocm", "gfx1100"}, {"mfma", "matrix-cores"}),
])
def test_lit_features(be, want, not_there):
    feats = set(be.lit_features())
    assert want <= feats and not (not_there & feats), sorted(feats)


def test_lit_features_agree_with_type_support():
    """One rule: a test that REQUIRES fp8-X runs exactly where convgen accepts -t X."""
    for be in (INTERP, SM90, GFX90A, GFX942, Backend("cuda", "sm80", 32)):
        feats = set(be.lit_features())
        for name in FP8_TYPES:
            assert (name.replace("_", "-") in feats) == (be.type_unsupported(TYPES[name]) is None)


def test_python_m_backend_prints_the_interpreter_and_its_features():
    env = dict(os.environ, PYTHONPATH=TOOLS, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, "-m", "convgen.backend"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert (info["kind"], info["arch"]) == ("interpreter", "interpreter")
    assert info["features"] == INTERP.lit_features()


def test_max_warps_follows_the_warp_size():
    assert SM90.max_warps == 32 and GFX942.max_warps == 16 and INTERP.max_warps == 32


def _problem(t):
    return make_problem(direction="fwd", dtype=elem_type(t), n=2, g=1, c_total=64, k_total=64,
                        hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1))


@pytest.mark.parametrize("be", [SM90, GFX942, INTERP], ids=["sm90", "gfx942", "interp"])
def test_fp8_dots_default_to_promotion_after_every_instruction(be):
    assert choose(_problem("fp8_e4m3"), be, True).max_num_imprecise_acc == 0
    assert choose(_problem("fp8_e4m3"), be, True,
                  {"max_num_imprecise_acc": 64}).max_num_imprecise_acc == 64
    assert choose(_problem("f16"), be, True).max_num_imprecise_acc is None


def test_max_num_imprecise_acc_is_checked():
    with pytest.raises(ConvgenError, match="must be >= 0"):
        choose(_problem("fp8_e4m3"), SM90, True, {"max_num_imprecise_acc": -1})
    with pytest.raises(ConvgenError, match="fp8 types only"):
        choose(_problem("f16"), SM90, True, {"max_num_imprecise_acc": 64})


def test_above_block_k_means_tritons_default():
    from convgen.kernels.launch import max_imprecise
    cfg = choose(_problem("fp8_e4m3"), SM90, True, {"max_num_imprecise_acc": 1 << 30})
    assert max_imprecise(cfg) is None          # Triton refuses values above the dot's K
    assert max_imprecise(choose(_problem("fp8_e4m3"), SM90, True,
                                {"max_num_imprecise_acc": 64})) == 64
    assert max_imprecise(choose(_problem("fp8_e4m3"), SM90, True)) == 0


def test_one_byte_dots_need_block_k_32():
    for t in ("fp8_e5m2", "i8"):
        assert choose(_problem(t), INTERP, True).block_k >= 32
        with pytest.raises(ConvgenError, match="needs block_k >= 32"):
            choose(_problem(t), SM90, True, {"block_k": 16})
    assert choose(_problem("f16"), SM90, True, {"block_k": 16}).block_k == 16


@pytest.mark.parametrize("fields,words", [
    ({"num_warps": 64}, "num_warps=64 must be a power of two from 1 to 32 on sm90"),
    ({"num_stages": 128}, "num_stages=128 must be from 1 to 8"),
    ({"block_m": 1 << 20}, "block_m=1048576 must be a power of two from 1 to 512"),
    ({"block_k": 512}, "block_k=512 must be a power of two from 1 to 256"),
    ({"block_n": 48}, "block_n=48 must be a power of two"),
    ({"split": 0}, "split=0 must be from 1 to 1024"),
    ({"split": 4}, "split=4 applies to bwd_weight only"),
    ({"kpack": 3}, "kpack=3 must be one of 1, 2"),
    ({"waves_per_eu": 99}, "waves_per_eu=99 must be from 0 to 16"),
    ({"bogus": 1}, "unknown field 'bogus'"),
])
def test_config_fields_out_of_range_are_refused_by_name(fields, words):
    with pytest.raises(ConvgenError) as info:
        choose(_problem("f16"), SM90, True, fields)
    assert words in str(info.value) and info.value.field == "perf_config"


def test_amd_wave64_allows_fewer_warps():
    with pytest.raises(ConvgenError, match="num_warps=32 must be a power of two from 1 to 16 on gfx942"):
        choose(_problem("f16"), GFX942, True, {"num_warps": 32})


@pytest.mark.parametrize("backend, name, use_dot, precision, imprecise, off", [
    (INTERP, "bf16", True, "ieee", None, "truncation"),        # the interpreter's fp32 -> bf16 cast
    (INTERP, "f16", True, "ieee", None, None),
    (INTERP, "f32", True, "tf32", None, None),                  # the interpreter computes tf32 in fp32
    (SM90, "f32", True, "tf32", None, "tf32 dot on sm90"),      # wgmma drops 13 operand bits
    (SM90, "f32", False, "tf32", None, None),                   # the FMA path has no tf32
    (SM90, "f32", True, "ieee", None, None),
    (GFX942, "f32", True, "tf32", None, "tf32 dot on gfx942"),  # no vendor promises how xf32 rounds
    (SM90, "fp8_e4m3", True, "ieee", None, "fast fp8 accumulation"),   # Triton's default: never promote
    (SM90, "fp8_e4m3", True, "ieee", 2 ** 30, "fast fp8 accumulation"),
    (SM90, "fp8_e4m3", True, "ieee", 0, None),                  # convgen's default: fp32 after every wgmma
    (GFX942, "fp8_e4m3", True, "ieee", None, None),             # MFMA sums fp8 products in fp32
])
def test_the_bias_check_is_off_only_where_the_arithmetic_does_not_round_to_nearest(
        backend, name, use_dot, precision, imprecise, off):
    why = backend.bias_unchecked(elem_type(name), use_dot, precision, imprecise)
    assert (why is None) == (off is None)
    if off:
        assert off in why


def test_only_real_matrix_units_may_truncate_their_sums():
    # the interpreter's dot is numpy's (round to nearest); GPUs' matrix units are not trusted to
    assert (INTERP.dot_truncates, SM90.dot_truncates, GFX942.dot_truncates) == (False, True, True)
    from convgen import tolerance
    p = _problem("f16")
    assert tolerance.accumulation(p, True, "ieee", None, SM90.dot_truncates).truncates
    assert not tolerance.accumulation(p, False, "ieee", None, SM90.dot_truncates).truncates   # fma.rn


def test_the_gpu_name_is_asked_of_torch_once_per_gpu(monkeypatch):
    """A selection asks for the name (the model's device features) every run; torch's
    call goes through its device properties: once per GPU is enough."""
    import torch
    from convgen import backend
    asked = []
    names = {0: "NVIDIA H100 80GB HBM3", 1: "NVIDIA H100 PCIe"}
    current = [0]
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda i: asked.append(i) or names[i])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    backend._gpu_name.cache_clear()
    try:
        be = Backend("cuda", "sm90", 32)
        monkeypatch.setattr(backend, "current", lambda: be)   # the GPU this process runs on
        assert [be.device_name() for _ in range(3)] == [names[0]] * 3
        current[0] = 1   # a caller that switches GPUs gets the other's name (the key differs)
        assert [be.device_name() for _ in range(2)] == [names[1]] * 2
        assert asked == [0, 1]
        assert INTERP.device_name() == "interpreter"
    finally:
        backend._gpu_name.cache_clear()


def test_the_gpu_counts_its_own_units_once_per_gpu(monkeypatch):
    """Backend.units is the device's own count of SMs (CUs), asked of torch once per GPU:
    the selector's features fall back to it for a GPU gpus.DEVICES does not name,
    and a persistent launch runs one program on each (kernels/spec.units)."""
    import types

    import torch
    from convgen import backend
    from convgen.kernels import spec
    asked = []
    counts = {0: 132, 1: 114}
    current = [0]
    monkeypatch.setattr(torch.cuda, "get_device_properties",
                        lambda i: asked.append(i) or types.SimpleNamespace(multi_processor_count=counts[i]))
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    backend.gpu_units.cache_clear()
    try:
        be = Backend("cuda", "sm90", 32)
        monkeypatch.setattr(backend, "current", lambda: be)   # the GPU this process runs on
        assert [be.units() for _ in range(3)] == [132] * 3
        current[0] = 1
        assert be.units() == 114
        assert spec.units(torch.device("cuda", 1)) == 114 and spec.units(torch.device("cuda", 0)) == 132
        assert asked == [0, 1]
        assert INTERP.units() == 0
        assert spec.units(torch.device("meta")) == gpus.DEVICES["NVIDIA H100 80GB HBM3"].units
        with backend.cross_compiling("gfx942"):
            assert spec.units(torch.device("meta")) == gpus.DEVICES["AMD Instinct MI300X"].units
        # another arch's Backend is not the GPU here: its reference device answers, torch
        # is not asked
        assert backend.of_arch("gfx942").units() == 304 and asked == [0, 1]
        assert backend.of_arch("gfx942").device_name() == "AMD Instinct MI300X"
        with backend.cross_compiling("gfx942", "AMD Instinct MI300A"):
            assert backend.of_arch("gfx942").units() == 228
            assert backend.cross_device("gfx90a").name == "AMD Instinct MI250X"   # not a gfx90a
    finally:
        backend.gpu_units.cache_clear()

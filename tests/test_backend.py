"""What the backend module knows about devices: which types run, AMD-only options,
and how fp8 matrix units accumulate; and how the kernel configuration follows it."""
import pytest

from convgen.backend import FP8_TYPES, Backend
from convgen.dtypes import TYPES, elem_type
from convgen.kernels.config import choose
from convgen.problem import make_problem

INTERP = Backend("interpreter", "interpreter", 1)
SM90 = Backend("cuda", "sm90", 32)
GFX942 = Backend("hip", "gfx942", 64)


def test_fp8_support_table():
    assert Backend("cuda", "sm80", 32).type_unsupported("fp8_e4m3") == \
        "-t fp8_e4m3 needs an NVIDIA GPU of sm89 or newer, this one is sm80"
    assert Backend("cuda", "sm90", 32).type_unsupported("fp8_e4m3fnuz")
    assert Backend("hip", "gfx90a", 64).type_unsupported("fp8_e5m2fnuz")
    # MI200's fp16 matrix path would flush e5m2 subnormals; e4m3 has none below fp16's normals
    assert "flushes e5m2 subnormals" in Backend("hip", "gfx90a", 64).type_unsupported("fp8_e5m2")
    assert Backend("hip", "gfx90a", 64).type_unsupported("fp8_e4m3") is None
    assert Backend("hip", "gfx1100", 32).type_unsupported("fp8_e4m3")
    assert Backend("hip", "gfx942", 64).type_unsupported("fp8_e4m3fnuz") is None
    assert Backend("interpreter", "interpreter", 1).type_unsupported("fp8_e5m2fnuz") is None
    assert set(FP8_TYPES) == {name for name, t in TYPES.items() if t.is_fp8}
    for t in ("f32", "f16", "bf16", "i8"):
        assert Backend("cuda", "sm70", 32).type_unsupported(t) is None


def test_amd_only_options_reach_only_hip():
    opts = {"num_warps": 4, "waves_per_eu": 2, "kpack": 1, "matrix_instr_nonkdim": 16}
    assert SM90.launch_options(opts) == {"num_warps": 4}
    assert GFX942.launch_options(opts) == opts


def test_fp8_accumulator_precision():
    # NVIDIA fp8 units sum at ~14 bits unless Triton promotes after every instruction
    assert SM90.dot_u_acc("fp8_e4m3", 0) is None
    assert SM90.dot_u_acc("fp8_e5m2", 1 << 30) == 2.0 ** -15
    assert SM90.dot_u_acc("fp8_e4m3", None) == 2.0 ** -15
    assert GFX942.dot_u_acc("fp8_e4m3fnuz", 1 << 30) is None
    assert INTERP.dot_u_acc("fp8_e4m3", 64) is None
    assert SM90.dot_u_acc("f16", 64) is None
    # Triton's default promotes every instruction except on sm90: exact elsewhere
    assert Backend("cuda", "sm89", 32).dot_u_acc("fp8_e4m3", None) is None
    assert Backend("cuda", "sm100", 32).dot_u_acc("fp8_e4m3", 1 << 30) is None


def _problem(t):
    return make_problem(direction="fwd", dtype=elem_type(t), n=2, g=1, c_total=64, k_total=64,
                        hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1))


@pytest.mark.parametrize("be", [SM90, GFX942, INTERP], ids=["sm90", "gfx942", "interp"])
def test_fp8_dots_default_to_promotion_after_every_instruction(be):
    assert choose(_problem("fp8_e4m3"), be, True, None).max_num_imprecise_acc == 0
    assert choose(_problem("fp8_e4m3"), be, True, "max_num_imprecise_acc=64").max_num_imprecise_acc == 64
    assert choose(_problem("f16"), be, True, None).max_num_imprecise_acc is None


def test_max_num_imprecise_acc_is_checked():
    from convgen.errors import ConvgenError
    with pytest.raises(ConvgenError, match="must be >= 0"):
        choose(_problem("fp8_e4m3"), SM90, True, "max_num_imprecise_acc=-1")
    with pytest.raises(ConvgenError, match="fp8 types only"):
        choose(_problem("f16"), SM90, True, "max_num_imprecise_acc=64")


def test_above_block_k_means_tritons_default():
    from convgen.kernels.launch import _max_imprecise
    cfg = choose(_problem("fp8_e4m3"), SM90, True, "max_num_imprecise_acc=1073741824")
    assert _max_imprecise(cfg) is None          # Triton refuses values above the dot's K
    assert _max_imprecise(choose(_problem("fp8_e4m3"), SM90, True, "max_num_imprecise_acc=64")) == 64
    assert _max_imprecise(choose(_problem("fp8_e4m3"), SM90, True, None)) == 0


def test_one_byte_dots_need_block_k_32():
    from convgen.errors import ConvgenError
    for t in ("fp8_e5m2", "i8"):
        assert choose(_problem(t), INTERP, True, None).block_k >= 32
        with pytest.raises(ConvgenError, match="needs block_k >= 32"):
            choose(_problem(t), SM90, True, "block_k=16")
    assert choose(_problem("f16"), SM90, True, "block_k=16").block_k == 16

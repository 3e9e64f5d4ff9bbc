"""Automatic and default thresholds: the formulas, the integer rule, and the documented table."""
import math
import re

import pytest
import torch

from convgen import dtypes, tolerance
from convgen.problem import make_problem
from convgen.tolerance import AUTO, DEFAULT, LAMBDA, Accumulation, Limit, Thresholds, resolve

F32_ACC = 2.0 ** -24


def test_f16_auto_formulas():
    acc = Accumulation(n=576, u_comp=0.0, u_acc=F32_ACC)
    r = resolve(Thresholds(), torch.float16, acc, ref_max_abs=10.0)
    gamma = LAMBDA * math.sqrt(576) * 2 * F32_ACC
    assert gamma == pytest.approx(1.1444e-5, rel=1e-4)
    assert r.rms == 2 * 2.0 ** -11 + gamma
    assert r.abs == (2 * 2.0 ** -11 + gamma) * 10.0 + 2.0 ** -24
    assert r.rel == 2.0 ** -10
    assert r.rel_auto == (2.0 ** -10, gamma * 10.0 + 2.0 ** -24)
    assert r.how == ("default", "default", "default")


def test_f32_auto_includes_product_rounding():
    acc = Accumulation(n=4608, u_comp=2.0 ** -24, u_acc=F32_ACC)
    r = resolve(Thresholds("auto", "auto", "auto"), torch.float32, acc, ref_max_abs=1.0)
    gamma = LAMBDA * math.sqrt(4608) * 2 * F32_ACC
    assert r.rms == pytest.approx(2.0 ** -23 + 2.0 ** -24 + gamma, rel=1e-15)
    assert r.rel_auto[0] == 2.0 ** -23 + 2.0 ** -24
    # mixed-sign sums: the products' errors measured against max|val|, LAMBDA wide
    assert r.rel_auto[1] == pytest.approx(gamma + LAMBDA * 2.0 ** -24 + 2.0 ** -149, rel=1e-15)
    assert r.abs == pytest.approx(2.0 ** -23 + LAMBDA * 2.0 ** -24 + gamma + 2.0 ** -149, rel=1e-15)
    assert r.how == ("auto", "auto", "auto")


def test_tf32_products_widen_the_element_wise_floor():
    """tf32 operands lose 13 bits each: u_comp = 2^-9, and with mixed signs the worst
    element's product error is measured against max|val| (the H100 failure without it)."""
    acc = Accumulation(n=576, u_comp=2.0 ** -9, u_acc=F32_ACC)
    r = resolve(Thresholds(), torch.float32, acc, ref_max_abs=2.0)
    gamma = LAMBDA * math.sqrt(576) * 2 * F32_ACC
    assert r.rel_auto == pytest.approx((2.0 ** -23 + 2.0 ** -9, (gamma + LAMBDA * 2.0 ** -9) * 2.0))
    assert r.rms == pytest.approx(2.0 ** -23 + 2.0 ** -9 + gamma)


def test_given_numbers_stay():
    r = resolve(Thresholds(1e-5, 0.5, 1e-3), torch.bfloat16, None, ref_max_abs=3.0)
    assert (r.rms, r.abs, r.rel, r.rel_auto) == (1e-5, 0.5, 1e-3, None)
    assert r.how == ("given", "given", "given")
    assert resolve(Thresholds("2e-3"), torch.float16, None, 1.0).rms == 2e-3


def test_no_accumulation_means_one_term():
    r = resolve(Thresholds(), torch.float16, None, ref_max_abs=1.0)
    gamma = LAMBDA * 1.0 * 2 * F32_ACC
    assert r.rms == 2.0 ** -10 + gamma


def test_integer_outputs_are_exact():
    acc = Accumulation(n=4608, u_comp=0.0, u_acc=0.0)
    for th in (Thresholds(), Thresholds("auto", "auto", "auto")):
        r = resolve(th, torch.int32, acc, ref_max_abs=1000.0)
        assert (r.rms, r.abs, r.rel, r.rel_auto) == (0.0, 0.0, 0.0, (0.0, 0.0))
    assert resolve(Thresholds(rms=1e-3), torch.int32, acc, 5.0).rms == 1e-3


@pytest.mark.parametrize("bad", [-1.0, "fast", float("nan"), "", "-0.5", "1e-3x"])
def test_bad_threshold(bad):
    with pytest.raises(ValueError, match="expected a number >= 0 or 'auto'"):
        Thresholds(rms=bad)


@pytest.mark.parametrize("text,want", [
    ("auto", AUTO), ("AUTO", AUTO), (" auto ", AUTO), ("0", Limit("given", 0.0)),
    ("1e-5", Limit("given", 1e-5)), ("1000", Limit("given", 1000.0)),
    ("inf", Limit("given", float("inf"))),
])
def test_the_one_threshold_parser(text, want):
    assert tolerance.parse_limit(text) == want


def test_thresholds_are_frozen_and_typed():
    th = Thresholds(1e-5, "auto", None)
    assert (th.rms, th.abs, th.rel) == (Limit("given", 1e-5), AUTO, DEFAULT)
    with pytest.raises(Exception):
        th.rms = AUTO


def _problem(t, direction="fwd"):
    return make_problem(direction=direction, dtype=dtypes.elem_type(t), n=2, g=1, c_total=8,
                        k_total=4, hi=5, wi=5, y=3, x=3)


@pytest.mark.parametrize("t,use_dot,precision,dot_u,want", [
    ("f16", True, "ieee", None, (72, 0.0, 2.0 ** -24)),
    ("bf16", False, "ieee", None, (72, 0.0, 2.0 ** -24)),
    ("f32", False, "tf32", None, (72, 2.0 ** -24, 2.0 ** -24)),   # FMA path ignores tf32
    ("f32", True, "ieee", None, (72, 2.0 ** -24, 2.0 ** -24)),
    ("f32", True, "tf32", None, (72, 2.0 ** -9, 2.0 ** -24)),
    ("fp8_e4m3", True, "ieee", 2.0 ** -15, (72, 0.0, 2.0 ** -15)),  # Hopper's fast fp8
    ("fp8_e4m3", False, "ieee", 2.0 ** -15, (72, 0.0, 2.0 ** -24)),
    ("i8", True, "ieee", None, (72, 0.0, 0.0)),
])
def test_accumulation_follows_type_path_and_precision(t, use_dot, precision, dot_u, want):
    acc = tolerance.accumulation(_problem(t), use_dot, precision, dot_u)
    assert (acc.n, acc.u_comp, acc.u_acc) == want


def test_accumulation_length_is_the_longest_reduction():
    assert tolerance.accumulation(_problem("f16", "bwd_data"), True, "ieee").n == 4 * 9
    assert tolerance.accumulation(_problem("f16", "bwd_weight"), True, "ieee").n == 2 * 3 * 3


def test_spacing():
    f16 = dtypes.TYPES["f16"]
    assert f16.spacing(1.0) == 2.0 ** -10
    assert f16.spacing(1.0 - 2.0 ** -11) == 2.0 ** -11
    assert f16.spacing(2048.0) == 2.0
    assert f16.spacing(2.0 ** -20) == f16.spacing(0.0) == 2.0 ** -24
    assert dtypes.TYPES["bf16"].spacing(1.0) == 2.0 ** -7
    assert dtypes.TYPES["i32"].spacing(12345.0) == 1.0


def test_documented_table_matches_the_formulas():
    rows = re.findall(r"^\| (f32|f16|bf16) +\| (\d+) +\| ([\d.e-]+) +\| ([\d.e-]+) \* M \+ ([\d.e-]+) +"
                      r"\| ([\d.e-]+) +\| ([\d.e-]+) \* M", tolerance.__doc__, re.M)
    assert len(rows) == 6
    for name, n, rms, abs_k, dmin, rtol, atol_k in rows:
        u_comp = 2.0 ** -24 if name == "f32" else 0.0
        t = tolerance.terms(dtypes.TYPES[name], Accumulation(int(n), u_comp, F32_ACC))
        for doc, value in ((rms, t.rms), (abs_k, t.abs_k), (dmin, t.denorm_min), (rtol, t.rtol),
                           (atol_k, t.atol_k)):
            assert float(doc) == pytest.approx(value, rel=1e-3), (name, n)


def _truncating_sums(rng, n: int, terms: int):
    """n sums of `terms` products of f16 values drawn in [-1, 1], accumulated left to right
    in float32 with every addition rounded toward zero (a matrix unit that truncates), and
    exactly (float64)."""
    import numpy as np
    s = np.zeros(n, dtype=np.float32)
    exact_sum = np.zeros(n)
    for _ in range(terms):
        a, b = (rng.uniform(-1, 1, n).astype(np.float16).astype(np.float64) for _ in range(2))
        p = a * b                                       # exact: 11-bit significands
        exact_sum += p                                  # float64: near enough to exact here
        s = _to_f32_toward_zero(s.astype(np.float64) + p.astype(np.float32))
    return s, exact_sum


def _to_f32_toward_zero(wide):
    """float64 values rounded to float32 toward zero, as a truncating adder leaves them."""
    import numpy as np
    near = wide.astype(np.float32)
    return np.where(np.abs(near.astype(np.float64)) > np.abs(wide),
                    np.nextafter(near, np.float32(0)), near)


def test_bias_lean_covers_a_truncating_accumulator_and_still_catches_rounding_bugs():
    """A correct kernel whose fp32 sums truncate (as NVIDIA's tensor cores do) leans toward
    zero: without the lean its bias check fails on enough elements, with it it passes;
    an output rounded toward zero still fails with the lean."""
    import numpy as np
    from convgen import verify
    n, terms = 120_000, 1152          # a 3x3x128 reduction; leans about -0.026 ulp
    truncated, exact = _truncating_sums(np.random.default_rng(7), n, terms)
    ref = torch.from_numpy(exact).to(torch.float16).double().reshape(1, 1, 1, 1, n)
    kern = torch.from_numpy(truncated).to(torch.float16).reshape(1, 1, 1, 1, n)
    f16 = dtypes.elem_type("f16")
    trunc = Accumulation(n=terms, u_comp=0.0, u_acc=F32_ACC, truncates=True)
    nearest = Accumulation(n=terms, u_comp=0.0, u_acc=F32_ACC)
    assert tolerance.bias_lean(trunc, f16) == pytest.approx(terms * 2.0 ** -13)
    assert tolerance.bias_lean(nearest, f16) == 0.0
    lean = verify.verify(kern, ref, f16, accum=nearest)
    assert lean.metrics["bias_magnitude"] < -tolerance.bias_limit(n)      # measurable ...
    assert tuple(lean.bits) == (0, 1, 1)
    allowed = verify.verify(kern, ref, f16, accum=trunc)
    assert tuple(allowed.bits) == (1, 1, 1)                               # ... and allowed
    # an output conversion that rounds toward zero is still caught
    as_f16 = torch.from_numpy(truncated).to(torch.float16)
    up = as_f16.double().abs() > torch.from_numpy(truncated).double().abs()
    rz = torch.where(up, torch.nextafter(as_f16, torch.zeros_like(as_f16)), as_f16)
    assert tuple(verify.verify(rz.reshape(1, 1, 1, 1, n), ref, f16, accum=trunc).bits)[0] == 0


def _truncating_block_sums(rng, n: int, steps: int, k: int = 16):
    """n sums of steps*k products of f16 values drawn in [-1, 1], as an mma instruction makes
    them: k exact products summed, then added into a float32 accumulator rounding toward
    zero; and exactly (float64); and the exact sum of the last 196 steps (the batch's
    last 56x56 image), for a kernel whose loop stops one image short."""
    import numpy as np
    s = np.zeros(n, dtype=np.float32)
    exact, chunk = np.zeros(n), 196                   # 196 steps of 16: one 56x56 image
    for _ in range(steps // chunk):
        a, b = (rng.uniform(-1, 1, (chunk, k, n)).astype(np.float16).astype(np.float64)
                for _ in range(2))
        block = (a * b).sum(axis=1)                   # exact: 16 products of 22 bits
        exact += block.sum(axis=0)
        for step in block:
            s = _to_f32_toward_zero(s.astype(np.float64) + step)
    return s, exact, block.sum(axis=0)


def test_a_long_sum_through_truncating_matrix_units_passes_and_a_missed_image_fails():
    """The H100 tune's `wrong` row of 2026-11-24 (docs/traps.md): depthwise bwd_weight at
    batch 256 on 56x56 sums 802,816 products per output through mma.sync, every 16 of them
    truncated into fp32. Truncation's errors all point toward zero from the partial sum, so
    they add up (like n, not sqrt(n)): the element-wise floor of a rounding accumulator
    fails a correct kernel; the truncating one passes it, and still fails a kernel whose
    loop over the batch stops one image short."""
    import numpy as np
    from convgen import verify
    f16 = dtypes.elem_type("f16")
    steps = 256 * 56 * 56 // 16
    kern, exact, last_image = _truncating_block_sums(np.random.default_rng(1), 256, steps)
    as_kern = torch.from_numpy(kern).to(torch.float16).reshape(1, 1, 1, 1, -1)
    ref = torch.from_numpy(exact).to(torch.float16).double().reshape(1, 1, 1, 1, -1)
    nearest = Accumulation(n=steps * 16, u_comp=0.0, u_acc=F32_ACC)
    trunc = Accumulation(n=steps * 16, u_comp=0.0, u_acc=F32_ACC, truncates=True)
    assert verify.verify(as_kern, ref, f16, accum=nearest).bits[2] == 0
    assert tuple(verify.verify(as_kern, ref, f16, accum=trunc).bits) == (1, 1, 1)
    short = torch.from_numpy(kern - last_image).to(torch.float16).reshape(1, 1, 1, 1, -1)
    assert verify.verify(short, ref, f16, accum=trunc).bits[2] == 0
    # below ~16k terms the sqrt(n) term is the larger: a 3x3x512 floor moves by half
    short_sum = tolerance.terms(f16, Accumulation(4608, 0.0, F32_ACC, truncates=True))
    assert short_sum.atol_k == pytest.approx(
        tolerance.terms(f16, Accumulation(4608, 0.0, F32_ACC)).atol_k + 4608 / 16 * F32_ACC)
    assert short_sum.atol_k == pytest.approx(4.953e-5, rel=1e-3)    # the module's table note
    # the drift is the fp32 running sum's, k products an instruction: fp8's fast
    # accumulation (a 2^-15 matrix-unit sum) adds n/32 * 2^-24, not n/16 * 2^-15
    fp8 = tolerance.summing(dtypes.elem_type("fp8_e4m3"), 4608, True, "ieee", 2.0 ** -15, True)
    plain = tolerance.summing(dtypes.elem_type("fp8_e4m3"), 4608, True, "ieee", 2.0 ** -15)
    assert fp8.mma_k == 32
    assert tolerance.terms("f32", fp8).gamma == pytest.approx(
        tolerance.terms("f32", plain).gamma + 4608 / 32 * F32_ACC)


def test_the_bias_check_is_off_where_the_allowed_lean_would_hide_a_rounding_bug():
    f16 = dtypes.elem_type("f16")
    # 3x3x128: 0.14 ulp may lean, a -0.5 ulp rounding bug still stands out
    assert tolerance.lean_unchecked(Accumulation(1152, 0.0, F32_ACC, truncates=True), f16) is None
    # 3x3x512: 0.56 ulp, past MAX_LEAN; the reason names the terms and the lean
    why = tolerance.lean_unchecked(Accumulation(4608, 0.0, F32_ACC, truncates=True), f16)
    assert "4608 terms" in why and "0.56 ulp" in why
    assert tolerance.lean_unchecked(Accumulation(4608, 0.0, F32_ACC), f16) is None   # rounds to nearest

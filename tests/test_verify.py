"""The verifier: metrics and histograms on hand-computed arrays, the non-finite rules,
ULP spacing, the Triton pass against the torch pass, and the report's output."""
import math
import re

import pytest
import torch

from convgen import report, verify
from convgen.tolerance import Thresholds

F16 = torch.float16
AUTO = Thresholds()
# The Triton pass: compiled on a GPU, else in the interpreter (conftest sets TRITON_INTERPRET).
DEV = "cuda" if torch.cuda.is_available() else "cpu"


def _json(v):
    return report.to_json(v)


def _msgs(v):
    return report.messages(v)


def _same_rms(a, b):
    """RMS (and the bias means) from two passes: equal to 1e-12, or the same non-finite
    value ('inf'); the passes sum in different orders."""
    if isinstance(a, dict):
        for key in ("rms", "bias", "bias_magnitude"):
            _same_rms(a[key], b[key])
        return
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15)


def _run(ref, kern, dtype=F16, th=AUTO, **kw):
    kern_t = torch.tensor(kern, dtype=torch.float64).to(dtype) if not isinstance(kern, torch.Tensor) \
        else kern
    ref_t = torch.tensor(ref, dtype=torch.float64) if not isinstance(ref, torch.Tensor) else ref
    return verify.verify(kern_t, ref_t, dtype, th, **kw)


# e0 equal; e1 1 ULP at 2; e2 2 ULPs at -4; e3 |val| < 1e-3, rel 0.5, 512 ULPs;
# e4 val 0, kern the smallest fp16 subnormal; e5 0.25 off at 8 (32 ULPs of 2^-7).
HAND_REF = [1.0, 2.0, -4.0, 2.0 ** -11, 0.0, 8.0]
HAND_KERN = [1.0, 2.0 + 2.0 ** -9, -4.0 - 2.0 ** -7, 3 * 2.0 ** -12, 2.0 ** -24, 8.25]


def test_hand_computed_metrics():
    r = _run(HAND_REF, HAND_KERN)
    sq = 2.0 ** -18 + 2.0 ** -14 + 2.0 ** -24 + 2.0 ** -48 + 2.0 ** -4
    assert r.metrics["rms"] == pytest.approx(math.sqrt(sq) / (math.sqrt(6) * 8.25), rel=1e-15)
    assert r.metrics["max_abs_diff"] == 0.25
    assert r.metrics["max_rel_diff"] == 0.5
    assert r.metrics["max_rel_diff_old"] == 0.25 / 8
    assert r.metrics["max_epsilon_diff"] == 512.0
    assert (r.n, r.exact_count, r.nan_count, r.inf_count) == (6, 1, 0, 0)
    assert r.ref_max_abs == 8.0 and r.kern_max_abs == 8.25


def test_hand_computed_histograms():
    r = _run(HAND_REF, HAND_KERN)
    rel, eps = r.histograms["relDiff_old"], r.histograms["epsilonDiff"]
    assert rel.labels == ("0", "(0,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)",
                          "[1e-3,1e-2)", "[1e-2,0.1)", "[0.1,1)", ">=1")
    # rel_old: e0 0, e1 2^-10 < 1e-3, e2 2^-9, e5 2^-5; e3 and e4 have |val| <= 1e-3
    assert rel.counts == (1, 0, 0, 0, 1, 1, 1, 0, 0) and rel.excluded == 2
    assert eps.labels == ("0", "1", "2", "[3,10]", "[11,100]", ">100")
    assert eps.counts == (1, 2, 1, 0, 1, 1) and eps.excluded == 0
    assert rel.percent(1) == pytest.approx(100 / 6)


def test_hand_computed_worst_elements():
    ref = torch.tensor(HAND_REF, dtype=torch.float64).reshape(1, 1, 2, 3, 1)
    kern = torch.tensor(HAND_KERN, dtype=torch.float64).to(F16).reshape(1, 1, 2, 3, 1)
    r = verify.verify(kern, ref, F16, AUTO)
    w = r.worst
    assert (w["max_abs_diff"].val, w["max_abs_diff"].kern) == (8.0, 8.25)
    assert w["max_abs_diff"].index == {"n": 0, "g": 0, "k": 1, "h": 2, "w": 0}
    assert w["max_rel_diff"].index == {"n": 0, "g": 0, "k": 1, "h": 0, "w": 0}
    assert w["max_rel_diff"].val == 2.0 ** -11
    assert w["max_rel_diff_old"].index == w["max_abs_diff"].index
    assert w["max_epsilon_diff"].value == 512.0 and w["max_epsilon_diff"].index["h"] == 0


def test_bucket_edges_of_epsilon_diff():
    # Below 1 the fp16 step is 2^-11, so kern = 1 - j*2^-11 is j/2 ULPs of val = 1.
    ref = [1.0] * 4
    kern = [1.0 - 2.0 ** -11, 1.0 - 3 * 2.0 ** -11, 1.0 - 5 * 2.0 ** -11, 1.0 - 21 * 2.0 ** -11]
    r = _run(ref, kern)
    assert r.histograms["epsilonDiff"].counts == (0, 1, 1, 1, 1, 0)  # 0.5, 1.5, 2.5, 10.5


def test_bucket_edges_of_rel_diff():
    r = _run([1.0, 2.0, 4.0], [2.0, 1.0, 4.0])  # rel 1, 0.5, 0
    assert r.histograms["relDiff_old"].counts == (1, 0, 0, 0, 0, 0, 0, 1, 1)


@pytest.mark.parametrize("dtype,val,kern,ulps", [
    (F16, 1.0, 1.0 + 2.0 ** -10, 1),                     # eps(1) = 2^-10
    (F16, 1.0 - 2.0 ** -11, 1.0, 1),                     # just below 1: 2^-11
    (F16, 1.0 - 2.0 ** -11, 1.0 - 2.0 ** -9, 3),
    (F16, 2048.0, 2050.0, 1),                            # eps(2048) = 2
    (F16, 2.0 ** -20, 2.0 ** -20 + 2.0 ** -24, 1),       # subnormal: 2^-24
    (F16, 2.0 ** -14, 2.0 ** -14 + 2.0 ** -24, 1),       # smallest normal: still 2^-24
    (F16, 2.0 ** -13, 2.0 ** -13 + 2.0 ** -23, 1),
    (F16, 0.0, 3 * 2.0 ** -24, 3),
    (torch.bfloat16, 1.0, 1.0 + 2.0 ** -7, 1),
    (torch.float32, 1.0, 1.0 + 2.0 ** -23, 1),
    (torch.float32, 2.0 ** -130, 2.0 ** -130 + 2.0 ** -149, 1),
    (torch.int32, 100.0, 103.0, 3),
])
def test_epsilon_diff(dtype, val, kern, ulps):
    r = _run([val], [kern], dtype)
    assert r.metrics["max_epsilon_diff"] == ulps


def test_subnormals_compare_like_other_values():
    ref = [2.0 ** -24 * i for i in range(1, 9)]          # all fp16 subnormals
    kern = [0.0] * 4 + ref[4:]                             # the first half flushed to zero
    r = _run(ref, kern)
    assert r.metrics["max_rel_diff"] == 1.0
    assert r.metrics["max_epsilon_diff"] == 4.0
    assert r.histograms["relDiff_old"].excluded == 8
    assert r.metrics["max_abs_diff"] == 4 * 2.0 ** -24


def test_nan_fails_every_bit():
    kern = torch.tensor([1.0, float("nan"), 3.0, float("nan")], dtype=F16).reshape(2, 2)
    r = verify.verify(kern, torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.float64).reshape(2, 2),
                      F16, Thresholds(1e9, 1e9, 1e9), dim_names="hw")
    assert r.bits == (0, 0, 0) and r.nan_count == 2 and r.nonfinite
    assert "2 NaN" in _msgs(r)[0] and "unwritten or computed" in _msgs(r)[0]
    assert "h=0 w=1" in _msgs(r)[0]
    assert [f.kind for f in r.findings] == ["kern_nan"] and r.findings[0].count == 2
    assert r.metrics["max_abs_diff"] == 0.0  # the other elements still compared


def test_unwritten_output_fails():
    ref = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    out = torch.full((3, 4), float("nan"), dtype=F16)     # the caller's poison
    out[:2] = ref[:2].to(F16)                              # the kernel forgot the last row
    r = verify.verify(out, ref, F16, AUTO)
    assert r.bits == (0, 0, 0) and r.nan_count == 4
    assert "unwritten" in _msgs(r)[0]


def test_kernel_infinity_fails():
    r = _run([1.0, 2.0], [1.0, float("inf")])          # the kernel overflowed
    assert r.bits == (0, 0, 0) and r.bad_inf_count == 1 and r.ref_inf_count == 0
    assert "infinities in the kernel output where the reference is finite" in _msgs(r)[0]


@pytest.mark.parametrize("kern", [float("-inf"), 2.0, float("inf")])
def test_infinite_reference_fails_whatever_the_kernel(kern):
    """A reference that overflows the output type verifies nothing there: even a kernel with
    the same infinity fails, with a reason that says so (not 'the reference is all zeros')."""
    r = _run([1.0, float("inf"), -2.0], [1.0, kern, -2.0])
    assert r.bits == (0, 0, 0) and r.ref_inf_count == 1 and r.nonfinite
    assert "infinities in the reference" in _msgs(r)[0] and "overflows f16" in _msgs(r)[0]
    assert report.warnings(r) == []


def test_all_infinite_reference_names_the_overflow():
    r = _run([float("inf"), float("inf")], [float("inf"), float("inf")])
    assert r.bits == (0, 0, 0)
    assert "overflows f16" in _msgs(r)[0] and not report.warnings(r)


def test_all_zero_kernel_fails():
    r = _run([1.0, -2.0, 3.0], [0.0, 0.0, 0.0], th=Thresholds(1e9, 1e9, 1e9))
    assert r.bits == (0, 0, 0) and "all zeros" in _msgs(r)[0]


def test_all_zero_reference_warns():
    r = _run([0.0, 0.0], [0.0, 0.0])
    assert r.bits == (1, 1, 1)
    assert report.warnings(r) == ["the reference is all zeros: this test checks only that the "
                                  "kernel writes zeros"]
    r = _run([0.0, 0.0], [0.0, 1.0])
    assert r.bits[1] == 0 and report.warnings(r)


def test_empty_output_fails():
    r = verify.verify(torch.zeros(0, dtype=F16), torch.zeros(0, dtype=torch.float64), F16)
    assert r.bits == (0, 0, 0) and "nothing was verified" in _msgs(r)[0]


def test_bits_against_given_thresholds():
    r = _run([1.0, 2.0], [1.0, 2.0 + 2.0 ** -9], th=Thresholds(1e-5, 1e-2, 1e-4))
    # rms = 2^-9 / (sqrt(2) * 2.001953) = 6.9e-4; maxAbs 1.95e-3; maxRel 9.8e-4
    assert r.bits == (0, 1, 0)
    assert any(m.startswith("RMS bit 0") for m in _msgs(r))
    assert any(m.startswith("rel bit 0") for m in _msgs(r))


def test_auto_rel_check_scales_the_floor():
    # Cancellation: 5e-4 is far from 0 in relative terms, yet within gamma*max|val|.
    acc = verify.tolerance.Accumulation(n=4608, u_comp=0.0, u_acc=2.0 ** -24)
    ref = [100.0, 2.0 ** -11]
    kern = [100.0, 2.0 ** -11 + 2.0 ** -13]   # d = 1.2e-4 < gamma*100 = 3.2e-3
    r = _run(ref, kern, accum=acc)
    assert r.metrics["max_rel_diff"] == 0.25 and r.bits == (1, 1, 1)
    r = _run(ref, kern, th=Thresholds(rel=1e-3), accum=acc)
    assert r.bits == (1, 1, 0)
    assert "near zero" in _msgs(r)[0] and "likely rounding" in _msgs(r)[0]
    r = _run([100.0, 1.0], [100.0, 1.0 + 2.0 ** -3], accum=acc)
    assert r.bits[2] == 0 and _msgs(r)[-1].startswith("rel bit 0 (auto)")


def test_the_count_of_elements_out_of_tolerance():
    """CK's error count: how many elements fail the element-wise check (auto's
    |d| <= rtol*|val| + atol, or a given maxRelDiff), in the summary line and the JSON; 0
    whenever the rel bit passes, NaN and infinities counted as outside."""
    ref = torch.linspace(1, 3, 1000, dtype=torch.float64).to(F16).double()   # exact in fp16
    kern = ref.to(F16)
    assert _run(ref, kern).out_of_tolerance == 0
    bad = kern.clone()
    bad[[3, 500, 999]] += 0.25                     # three elements far off
    bad[[10, 20]] += 2.0 ** -10                    # one ulp: within auto's rtol
    r = _run(ref, bad)
    assert r.bits[2] == 0 and r.out_of_tolerance == 3
    assert "3 out of tolerance" in report.summary_line(r)
    assert _json(r)["out_of_tolerance"] == 3
    # a given maxRelDiff counts against itself: the one-ulp elements are outside 1e-4 too
    assert _run(ref, bad, th=Thresholds(rel=1e-4)).out_of_tolerance == 5
    bad[7] = float("nan")
    assert _run(ref, bad).out_of_tolerance == 4
    # the chunked pass and the Triton pass count the same
    assert _run(ref, bad, device_path=False, chunk=64).out_of_tolerance == 4


def test_int32_exact_and_poison():
    ref = torch.tensor([[1.0, -7.0], [30.0, 0.0]], dtype=torch.float64)
    kern = ref.to(torch.int32)
    assert verify.verify(kern, ref, torch.int32, AUTO).bits == (1, 1, 1)
    kern[1, 1] = -2 ** 31
    r = verify.verify(kern, ref, torch.int32, AUTO)
    assert r.bits == (0, 0, 0) and r.int_min_count == 1
    assert "poison" in _msgs(r)[0]


def test_strided_views_and_chunks_agree():
    torch.manual_seed(1)
    phys = torch.randn(2, 5, 6, 3, 4, dtype=torch.float64)   # n h w g k in memory
    ref = phys.permute(0, 3, 4, 1, 2).to(F16).to(torch.float64)
    kern = (phys + 1e-3 * torch.randn_like(phys)).to(F16).permute(0, 3, 4, 1, 2)
    kern[1, 2, 3, 4, 5] = kern[0, 0, 0, 0, 0] = 100.0        # a tie: the first one is the worst
    base = _json(verify.verify(kern.contiguous(), ref.contiguous(), F16, AUTO))
    assert base["worst"]["max_abs_diff"]["at"] == {"n": 0, "g": 0, "k": 0, "h": 0, "w": 0}
    for chunk in (7, 20, 97, 10 ** 6):
        j = _json(verify.verify(kern, ref, F16, AUTO, chunk=chunk))
        _same_rms(j, base)
        assert _without_rms(j) == _without_rms(base)


def test_kernel_columns_match_the_cpu_pass():
    from convgen.kernels import verify_stats as vs
    decoded = vs._decode([0] * vs.N_PRED, 1)
    assert set(vs.MAX_COLUMNS) | set(vs.SUM_COLUMNS) | set(decoded) == \
        set(verify._MAX_KEYS + verify._SUM_KEYS)
    assert set(vs.WORST_COLUMNS) == {col for col, _ in verify._WORST.values()}


def test_predicate_counts_decode_by_hand():
    from convgen.kernels import verify_stats as vs
    # 20 elements: 4 exact; ulps >= 1.5: 9, >= 2.5: 5, >= 10.5: 2, >= 100.5: 1;
    # |val| > 1e-3: 15, of them rel_old > 0: 12, >= 1e-6: 12, >= 1e-5: 10, ..., >= 1: 1;
    # 3 poisoned int outputs.
    counts = [16, 9, 5, 2, 1, 15, 12, 12, 10, 7, 7, 3, 2, 1, 3]
    t = vs._decode(counts, 20)
    assert (t["n_ok"], t["exact"], t["old_excluded"], t["int_min"]) == (20, 4, 5, 3)
    assert [t[f"eps_h{b}"] for b in range(6)] == [4, 7, 4, 3, 1, 1]
    assert [t[f"rel_h{b}"] for b in range(9)] == [3, 0, 2, 3, 0, 4, 1, 1, 1]
    assert (t["kern_nan"], t["ref_nan"], t["bad_inf"], t["kern_inf"]) == (0, 0, 0, 0)


def _random_case(dtype, seed, n=3000):
    """Strided 5-D views (physical order n h w g k), some zeros in the reference, and ties."""
    g = torch.Generator().manual_seed(seed)
    phys = torch.randn(3, 5, n // 60, 1, 4, generator=g, dtype=torch.float64) * 3
    ref = phys.permute(0, 3, 4, 1, 2)
    err = torch.randn(ref.shape, generator=g, dtype=torch.float64) * 1e-3
    ref[..., ::7] = 0.0
    if dtype == torch.int32:
        ref = (ref * 10).round()
        err = (err > 1e-3).to(torch.float64)
    kern = (ref + err).to(dtype)
    ref = ref.to(dtype).to(torch.float64)
    kern[0, 0, 1, 2, 3] = kern[2, 0, 3, 4, 1]                 # a repeated value: ties
    return kern, ref


def _without_rms(j):
    """The JSON without the RMS, which the two passes sum in different orders (equal to
    1e-12, compared apart), also where a finding quotes it."""
    out = {k: v for k, v in j.items() if k not in ("rms", "bias", "bias_magnitude")}
    out["findings"] = [{**f, "value": None} if f["kind"] in ("rms", "bias") else f
                       for f in j["findings"]]
    return out


@pytest.fixture
def launches(monkeypatch):
    """Records each Triton pass and whether its numbers were used ("kernel") or it found a
    non-finite value and left the work to the chunked pass ("fallback"), so that a test
    cannot pass on the torch path by mistake."""
    from convgen.kernels import verify_stats
    calls = []
    real = verify_stats.device_totals

    def counted(*a, **kw):
        out = real(*a, **kw)
        calls.append("fallback" if out is None else "kernel")
        return out
    monkeypatch.setattr(verify_stats, "device_totals", counted)
    return calls


# The fallback for NaNs and infinities is one path for every type: f16 takes it in the PR
# run, bf16 and f32 in nightly.
@pytest.mark.parametrize("dtype,nonfinite", [
    pytest.param(t, nf, id=f"{str(t).split('.')[-1]}-{nf}",
                 marks=pytest.mark.nightly if nf and t in (torch.bfloat16, torch.float32) else ())
    for t in (F16, torch.bfloat16, torch.float32, torch.int32) for nf in (False, True)])
def test_device_pass_matches_cpu_pass(dtype, nonfinite, launches):
    """All finite: the Triton pass's own numbers. With NaNs and infinities: its fallback."""
    if nonfinite and not dtype.is_floating_point:
        pytest.skip("int outputs are finite")
    kern, ref = _random_case(dtype, seed=7)
    if nonfinite:
        kern[1, 0, 2, 2, 7] = float("nan")
        kern[2, 0, 0, 1, 9] = float("inf")
        ref[2, 0, 3, 3, 3] = kern[2, 0, 3, 3, 3] = float("-inf")
    acc = verify.tolerance.Accumulation(64, 0.0, 2.0 ** -24)
    cpu = _json(verify.verify(kern, ref, dtype, AUTO, acc, device_path=False))
    dev = _json(verify.verify(kern.to(DEV), ref.to(DEV), dtype, AUTO, acc, device_path=True))
    assert launches == ["fallback" if nonfinite else "kernel"]
    _same_rms(dev, cpu)
    assert _without_rms(dev) == _without_rms(cpu)


@pytest.mark.parametrize("layout", ["same strides", "different strides"])
def test_device_pass_finds_the_worst_elements(launches, layout):
    kern, ref = _random_case(F16, seed=3)
    kern[2, 0, 3, 4, 40] = 50.0                              # in the last, partial block
    if layout == "different strides":
        ref = ref.contiguous()
    assert (kern.stride() == ref.stride()) == (layout == "same strides")
    th = Thresholds(rel=1e-3)
    cpu = _json(verify.verify(kern, ref, F16, th, device_path=False))
    dev = _json(verify.verify(kern.to(DEV), ref.to(DEV), F16, th, device_path=True))
    assert launches == ["kernel"]
    assert dev["worst"]["max_abs_diff"]["at"] == {"n": 2, "g": 0, "k": 3, "h": 4, "w": 40}
    assert _without_rms(dev) == _without_rms(cpu)


@pytest.mark.parametrize("iters", [4, 8])
@pytest.mark.parametrize("layout", ["contiguous", "same strides", "different strides"])
def test_device_pass_carries_maxima_across_blocks_and_programs(layout, iters, launches, monkeypatch):
    """Small blocks, several per program and several programs: the running maxima, the
    first index on ties (within a block, across blocks, across programs) and the sums.
    With 8 blocks a program, the finish grid has programs past the last column."""
    from convgen.kernels import verify_stats as vs
    monkeypatch.setattr(vs, "ROWS", 16)
    monkeypatch.setattr(vs, "MAX_VEC", 4)
    monkeypatch.setattr(vs, "ITERS", iters)
    monkeypatch.setattr(vs, "MIN_PROGRAMS", 1)
    kern, ref = _random_case(F16, seed=13, n=1200)       # 3*1*4*5*20 = 1200: 5 programs
    for at in ((0, 0, 1, 2, 3), (1, 0, 0, 0, 7), (2, 0, 3, 4, 19)):
        kern[at], ref[at] = 60.0, 1.0                     # three equal worst elements
    if layout == "contiguous":
        kern, ref = kern.contiguous(), ref.contiguous()
    elif layout == "different strides":
        ref = ref.contiguous()
    assert (kern.stride() == ref.stride()) == (layout != "different strides")
    th = Thresholds(rel=1e-3)
    cpu = _json(verify.verify(kern, ref, F16, th, device_path=False))
    dev = _json(verify.verify(kern.to(DEV), ref.to(DEV), F16, th, device_path=True))
    assert launches == ["kernel"]
    assert dev["worst"]["max_abs_diff"]["at"] == {"n": 0, "g": 0, "k": 1, "h": 2, "w": 3}
    _same_rms(dev, cpu)
    assert _without_rms(dev) == _without_rms(cpu)


def test_device_pass_takes_a_reference_in_the_output_type(launches):
    kern, ref = _random_case(torch.bfloat16, seed=17)
    cpu = _json(verify.verify(kern, ref, torch.bfloat16, AUTO, device_path=False))
    dev = _json(verify.verify(kern.to(DEV), ref.to(torch.bfloat16).to(DEV), torch.bfloat16, AUTO,
                        device_path=True))
    assert launches == ["kernel"]
    _same_rms(dev, cpu)
    assert _without_rms(dev) == _without_rms(cpu)


def _edge_cases():
    yield "one element", torch.tensor([[[[[2.0]]]]], dtype=F16), torch.tensor([[[[[2.5]]]]], dtype=torch.float64)
    yield "0-d", torch.tensor(3.0, dtype=F16), torch.tensor(3.0, dtype=torch.float64)
    sub = torch.tensor([1e-40, -3e-42, 2e-38, 0.0, -0.0, 1.0, 7e-45], dtype=torch.float32)
    yield "fp32 subnormals and signed zeros", sub, torch.tensor([2e-40, -3e-42, 1e-38, -0.0, 0.0, 1.0, 0.0], dtype=torch.float32).double()
    ints = torch.tensor([5, -2 ** 31, 7, -2 ** 31, 0], dtype=torch.int32)
    yield "int32 minimum (poison)", ints, torch.tensor([5.0, 3.0, 9.0, -1.0, 0.0], dtype=torch.float64)
    far = torch.tensor([1.0, 2.0, 4.0], dtype=F16)
    # (1e300 - 1)^2 overflows float64: the kernel's finite check sends it to the exact pass
    yield "float64 reference far outside fp16", far, torch.tensor([1e300, 2.0, 1e-300], dtype=torch.float64)


@pytest.mark.parametrize("name,kern,ref", list(_edge_cases()), ids=[c[0] for c in _edge_cases()])
def test_device_pass_edge_cases(name, kern, ref, launches):
    cpu = _json(verify.verify(kern, ref, kern.dtype, AUTO, device_path=False))
    dev = _json(verify.verify(kern.to(DEV), ref.to(DEV), kern.dtype, AUTO, device_path=True))
    assert launches == ["fallback" if name.startswith("float64 reference far") else "kernel"]
    _same_rms(dev, cpu)
    assert _without_rms(dev) == _without_rms(cpu)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (too slow in the interpreter)")
def test_device_pass_falls_back_on_a_large_tensor_with_a_nan(launches):
    g = torch.Generator().manual_seed(5)
    ref = torch.randn(4, 1, 64, 60, 61, generator=g, dtype=torch.float64).to(F16).to(torch.float64)
    kern = (ref * (1 + 1e-3 * torch.randn(ref.shape, generator=g, dtype=torch.float64))).to(F16)
    kern[2, 0, 33, 1, 7] = float("nan")
    cpu = _json(verify.verify(kern, ref, F16, AUTO))
    dev = _json(verify.verify(kern.cuda(), ref.cuda(), F16, AUTO))
    assert launches == ["fallback"]
    assert dev["nan_count"] == 1
    _same_rms(dev, cpu)
    assert _without_rms(dev) == _without_rms(cpu)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (too slow in the interpreter)")
def test_device_pass_on_many_blocks(launches):
    g = torch.Generator().manual_seed(11)
    phys = torch.randn(4, 30, 30, 1, 300, generator=g, dtype=torch.float64)
    ref = phys.permute(0, 3, 4, 1, 2).to(F16).to(torch.float64)
    kern = (phys * (1 + 1e-3 * torch.randn(phys.shape, generator=g, dtype=torch.float64)))
    kern = kern.to(F16).permute(0, 3, 4, 1, 2)
    kern[3, 0, 299, 29, 29] = 1000.0                # the worst element, in the last program
    acc = verify.tolerance.Accumulation(576, 0.0, 2.0 ** -24)
    cpu = _json(verify.verify(kern, ref, F16, AUTO, acc))
    dev = _json(verify.verify(kern.cuda(), ref.cuda(), F16, AUTO, acc))
    assert launches == ["kernel"]
    _same_rms(dev, cpu)
    assert _without_rms(dev) == _without_rms(cpu)


# ---- report -----------------------------------------------------------------------

BITS_LIKE = [re.compile(r"\[[0-9 ]*\]"), re.compile(r"\[[01] "), re.compile(r"\[[01]\]")]


def _results():
    yield _run(HAND_REF, HAND_KERN)
    yield _run(HAND_REF, HAND_KERN, th=Thresholds(1e-9, 1e-9, 1e-9))
    yield _run([1.0, 1.0], [1.0, float("nan")])
    yield _run([0.0, 0.0], [0.0, 0.0])
    yield _run([1.0, 2.0], [0.0, 0.0])
    ref = torch.tensor([1.0, 0.0, 1.0, 1.0], dtype=torch.float64).reshape(1, 1, 1, 1, 4)
    yield verify.verify(ref.to(torch.int32) + 1, ref, torch.int32, AUTO)
    kern, ref = _random_case(F16, seed=5)
    yield verify.verify(kern, ref, F16, Thresholds(1e-7, 1e-7, 1e-7))


def test_report_never_looks_like_bits():
    for r in _results():
        for mode in report.MODES:
            out, err = report.render(r, mode, reproduce="convgen -t f16 -rand 3")
            for line in out + err:
                assert line.startswith("# ")
                for pat in BITS_LIKE:
                    assert not pat.search(line), line


def test_report_modes():
    passing, failing = _run([1.0], [1.0]), _run(HAND_REF, HAND_KERN, th=Thresholds(1e-9, 1e-9, 1e-9))
    assert report.render(passing, "summary")[1] == []
    out, _ = report.render(passing, "summary")
    assert len(out) == 1 and "[auto: |d| <= " in out[0]
    assert report.render(passing, "failure") == ([], [])
    assert report.render(passing, "off") == ([], [])
    assert len(report.render(passing, "always")[0]) > 10
    # a failing run: stdout as the mode says; the reasons, histograms, worst elements and
    # the reproducer for stderr (lit shows a failing test's stderr) in every mode
    for mode in report.MODES:
        out, err = report.render(failing, mode, reproduce="convgen -rand 3")
        assert any("relDiff_old histogram" in x for x in err)
        assert any("worst elements" in x for x in err)
        assert any(x.startswith("# convgen: abs bit 0") for x in err)
        assert err[-1] == out[-1] == "# convgen: reproduce with: convgen -rand 3"
        if mode != "off":
            assert any(x.startswith("# convgen: abs bit 0") for x in out)
            assert any("relDiff_old histogram" in x for x in out)
    assert report.render(failing, "off", "convgen -rand 3")[0] == [
        "# convgen: reproduce with: convgen -rand 3"]
    nan = _run([1.0], [float("nan")])
    assert "NaN" in report.render(nan, "off")[0][0] and "NaN" in report.render(nan, "off")[1][0]


def test_failing_details_reach_stderr_only_when_stdout_is_not_a_terminal(capsys, monkeypatch):
    failing = _run(HAND_REF, HAND_KERN, th=Thresholds(1e-9, 1e-9, 1e-9))
    report.emit(failing, "summary", reproduce="convgen x")
    out, err = capsys.readouterr()
    assert out.splitlines()[-1] == "[0 0 0]" and "abs bit 0" in out
    assert "abs bit 0" in err and "reproduce with: convgen x" in err
    assert "[0 0 0]" not in err.splitlines()
    monkeypatch.setattr(report.sys.stdout, "isatty", lambda: True)
    report.emit(failing, "summary")
    assert capsys.readouterr().err == ""
    report.emit(_run([1.0], [1.0]), "summary")
    assert capsys.readouterr().err == ""


def test_bits_line():
    assert report.bits_line((1, 0, 1)) == "[1 0 1]"
    assert report.bits_line([True, True, True]) == "[1 1 1]"


def test_to_json_keys():
    j = _json(_run(HAND_REF, HAND_KERN))
    for key in ("rms", "max_abs_diff", "max_rel_diff", "max_rel_diff_old", "max_epsilon_diff",
                "bits", "thresholds", "histograms", "n", "nan_count", "inf_count"):
        assert key in j
    assert j["bits"] in ([0, 0, 0], [1, 1, 1], [1, 1, 0], [0, 1, 1], [1, 0, 1], [0, 0, 1],
                         [0, 1, 0], [1, 0, 0])


# ---- the bias check ------------------------------------------------------------------

def _rounded(exact: torch.Tensor, mode: str, dtype=F16) -> torch.Tensor:
    """exact (float64) rounded to dtype to nearest, toward zero, or toward +inf."""
    near = exact.to(dtype)
    if mode == "nearest":
        return near
    back = near.to(torch.float64)
    step = torch.nextafter(near, torch.full_like(near, float("inf"))) \
        if mode == "up" else torch.nextafter(near, torch.zeros_like(near))
    if mode == "up":
        return torch.where(back < exact, step, near)
    return torch.where(back.abs() > exact.abs(), step, near)     # toward zero


def _bias_case(mode, seed=0, n=4096):
    g = torch.Generator().manual_seed(seed)
    exact = (torch.rand(n, generator=g, dtype=torch.float64) * 6 - 3)     # both signs
    return verify.verify(_rounded(exact, mode), exact.to(F16).to(torch.float64), F16, AUTO)


@pytest.mark.parametrize("mode,detail,sign", [("toward zero", "away from zero", -1),
                                              ("up", "toward +inf", +1)])
def test_a_rounding_bias_fails_the_rms_bit(mode, detail, sign):
    r = _bias_case(mode)
    assert r.bits[0] == 0 and r.bits[1:] == (1, 1)        # one ulp: abs and rel allow it
    bias = [f for f in r.findings if f.kind == "bias"]
    assert [f.detail for f in bias] == [detail] and sign * bias[0].value > 0.3
    assert "RMS bit 0 (bias)" in report.messages(r)[0]
    assert r.metrics["rms"] <= r.thresholds.rms           # the RMS alone would have passed


def test_round_to_nearest_never_trips_the_bias_check():
    """A correct kernel's errors: the reference rounds the exact value, the kernel rounds a
    nearby fp32 sum (each within 2^-20 relative, both signs): 300 seeds, no 0 bit."""
    for seed in range(300):
        g = torch.Generator().manual_seed(seed)
        exact = torch.rand(2048, generator=g, dtype=torch.float64) * 6 - 3
        noise = (torch.rand(2048, generator=g, dtype=torch.float64) * 2 - 1) * 2.0 ** -20
        r = verify.verify((exact * (1 + noise)).to(F16), exact.to(F16).to(torch.float64), F16, AUTO)
        assert r.bits == (1, 1, 1), (seed, r.metrics["bias"], r.metrics["bias_magnitude"])


def test_bias_limit_follows_hoeffding():
    from convgen.tolerance import BIAS_P, bias_limit
    for n in (64, 2048, 10 ** 6):
        t = bias_limit(n)
        assert 2 * 2 * math.exp(-n * t * t / 2) == pytest.approx(BIAS_P, rel=1e-9)
    assert bias_limit(2048) == pytest.approx(0.147, abs=1e-3) and bias_limit(0) == math.inf


def test_the_bias_check_can_be_left_out_and_still_reported():
    r = verify.verify(_rounded(torch.linspace(-3, 3, 4096, dtype=torch.float64), "toward zero"),
                      torch.linspace(-3, 3, 4096, dtype=torch.float64).to(F16).to(torch.float64),
                      F16, AUTO, bias_check=False)
    assert r.bits == (1, 1, 1) and r.metrics["bias_magnitude"] < -0.3
    assert "(not checked)" in report.summary_line(r)

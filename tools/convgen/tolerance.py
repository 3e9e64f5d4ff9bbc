"""Thresholds for the three bits: how they are written, and how "auto" derives them
from the output type and the accumulation.

A threshold is a number >= 0 (kept as given), `auto` (derived below), or left out
(the type's default). `parse_limit` is the one parser of that text (the CLI, `convgen
compare` and lit.cfg.py call it); `Thresholds` is the frozen value a run carries.
The derivation, in one place:

    u_out  = 2^-(mantissa_out + 1)     unit roundoff of the output type (0 for int32)
    u_comp = relative error of one product (0 when exact: fp16, bf16, fp8 in fp32;
             2^-24 for fp32*fp32; 2^-9 for tf32, whose operands may each be truncated
             to 10 fraction bits, 2^-10 apiece)
    u_acc  = unit roundoff of the accumulator (2^-24 for fp32, 0 for int32)
    gamma  = LAMBDA * sqrt(n) * (2 * u_acc)  [+ (n / k) * 2^-24 where the matrix unit truncates]

    rms_tol = 2*u_out + u_comp + gamma
    abs_tol = (2*u_out + LAMBDA*u_comp + gamma) * max|val| + denorm_min
    rel     = element-wise: |val - kern| <= rtol*|val| + atol, for every element,
              rtol = 2*u_out + u_comp,  atol = (gamma + LAMBDA*u_comp) * max|val| + denorm_min

Why these terms:
- 2*u_out: the kernel and the reference each round once to the output type, so
  two results that agree before rounding can still differ by one ULP.
- u_comp: each product is off by up to u_comp before it is added. With same-sign
  terms that is u_comp*|val| (rtol). With mixed signs the n errors add like a
  random walk, as the terms do: about u_comp*|val|/4 for a typical element, and up
  to about u_comp*max|val| for the worst one of many; LAMBDA*u_comp*max|val| covers
  that in abs_tol and atol (tf32 through tensor cores fails without it).
- gamma: summing n terms in a float accumulator. The worst case grows like n*u;
  Higham & Mary's probabilistic bound, which holds unless the rounding errors
  conspire, grows like LAMBDA*sqrt(n)*u. 2*u_acc (not u_acc) covers matrix
  instructions that truncate instead of rounding. The bound is relative to
  sum |a_i*b_i|, which the verifier never sees; max|val| stands in for it (with
  mixed-sign data sum |a_i*b_i| can be larger, roughly by sqrt(n); LAMBDA = 4
  leaves room for that, since typical errors are far below the bound).
- (n / k) * 2^-24, only where the accumulator may truncate (GPU matrix units,
  Backend.dot_truncates): each instruction adds k products (Accumulation.mma_k) into
  the fp32 accumulator and cuts the sum toward zero, losing up to 2^-23 of the partial
  sum, 2^-24 on average. Those errors do not cancel like a random walk's: they all point
  toward zero from the partial sum, so they add up with it, like n rather than sqrt(n).
  With mixed-sign data the sum of the partial sums over n / k steps is, for the worst of
  a few thousand outputs, about half of (n / k) * max|val|. Below ~16k products the
  sqrt(n) term is the larger (f16 at 3x3x512: the element-wise floor 1.5x); at 802,816
  (a depthwise bwd_weight at batch 256 on 56x56) it is 8x, and without it a correct H100
  kernel failed the element-wise check (tests/test_tolerance.py has the simulation).
  The term is fp32's even where the matrix unit's own sums are shorter (Hopper's fast
  fp8, u_acc = 2^-15): those short sums live only within the window Triton promotes
  from, and gamma's u_acc covers them; the drift is the fp32 running sum's.
- denorm_min: a floor, so that an all-zero or subnormal-sized reference still
  leaves room for one rounding in the subnormal range.

Why the automatic rel check is not a bound on maxRelDiff: with mixed-sign data
an output element can cancel to nearly zero while its rounding errors do not,
so |val - kern| / |val| over |val| > 0 is unbounded however right the kernel is.
The auto check therefore keeps the relative part (rtol, for the roundings of
the element itself) and adds a floor scaled by the output's magnitude (atol,
for the accumulation error, which depends on the terms, not on their sum).
A rel threshold given as a number is compared with maxRelDiff as is.

Default table (threshold None). Floats: "auto"; int32 outputs: exact (0, and
the rel bit requires every element to be equal). The numbers, with an fp32
accumulator (u_acc = 2^-24), exact fp16/bf16 products and IEEE fp32 products
(u_comp = 2^-24); abs_tol and atol scale with M = max|val|. fp8 inputs give an
fp32 output with exact products: the f32 rows with u_comp = 0 (very close). The table is
of an accumulator that rounds to nearest (the CPU, the interpreter, FMA); through GPU
matrix units that may truncate, gamma grows by (n / k) * 2^-24 (f16 at 4608: rel atol
4.953e-5 * M).

| type | n    | rms_tol  | abs_tol                   | rel rtol | rel atol                  |
|------|------|----------|---------------------------|----------|---------------------------|
| f32  | 576  | 1.162e-5 | 1.180e-5 * M + 1.401e-45  | 1.788e-7 | 1.168e-5 * M + 1.401e-45  |
| f32  | 4608 | 3.255e-5 | 3.273e-5 * M + 1.401e-45  | 1.788e-7 | 3.261e-5 * M + 1.401e-45  |
| f16  | 576  | 9.880e-4 | 9.880e-4 * M + 5.960e-8   | 9.766e-4 | 1.144e-5 * M + 5.960e-8   |
| f16  | 4608 | 1.009e-3 | 1.009e-3 * M + 5.960e-8   | 9.766e-4 | 3.237e-5 * M + 5.960e-8   |
| bf16 | 576  | 7.824e-3 | 7.824e-3 * M + 9.184e-41  | 7.812e-3 | 1.144e-5 * M + 9.184e-41  |
| bf16 | 4608 | 7.845e-3 | 7.845e-3 * M + 9.184e-41  | 7.812e-3 | 3.237e-5 * M + 9.184e-41  |
| i32  | any  | 0        | 0                         | 0        | 0                         |

(576 = 3x3x64 and 4608 = 3x3x512 products per output element.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from convgen import dtypes

# Bucket edges of the verdict's two histograms (verify.py's labels; the GPU statistics kernel,
# kernels/verify_stats.py, counts into the same buckets): relative error, and error in ulps.
REL_EDGES = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0)
EPS_EDGES = (1.5, 2.5, 10.5, 100.5)

LAMBDA = 4.0
# products one matrix instruction sums before it adds them into the accumulator, by
# input width: NVIDIA's f16/bf16 mma.sync m16n8k16 and wgmma k16 (an H100's wgmma lost
# less than the truncation term assumes), fp8's k32, tf32's k8. AMD's MFMA adds 16
# (16x16x16) or 8 (32x32x8) f16 products at a time, and is only assumed to truncate
# (Backend.dot_truncates): no AMD measurement has asked for the smaller k
MMA_K = {8: 32, 16: 16, 32: 8}
F32_U = 2.0 ** -24
# products of these input types are exact in fp32; fp32 products round once (2^-24) and
# tf32 drops 13 bits of each operand (up to 2^-10 each: 2^-9 a product)
U_COMP_F32 = 2.0 ** -24
U_COMP_TF32 = 2.0 ** -9


# ---- the written form -----------------------------------------------------------

@dataclass(frozen=True)
class Limit:
    """One threshold: mode "given" (value is the number), "auto" or "default"."""
    mode: str = "default"
    value: float | None = None

    def __str__(self) -> str:
        return f"{self.value:g}" if self.mode == "given" else self.mode


AUTO = Limit("auto")
DEFAULT = Limit("default")


def parse_limit(text: str) -> Limit:
    """`auto`, `default` (what no flag gives) or a number >= 0 (inf allowed: the bit always
    passes); ValueError otherwise."""
    word = str(text).strip().lower()
    if word == "auto":
        return AUTO
    if word == "default":
        return DEFAULT
    try:
        value = float(word)
    except ValueError:
        raise ValueError("expected a number >= 0 or 'auto'") from None
    if math.isnan(value) or value < 0:
        raise ValueError("expected a number >= 0 or 'auto'")
    return Limit("given", value)


def limit(x) -> Limit:
    """A Limit from a Limit, None (default), "auto", text or a number."""
    if isinstance(x, Limit):
        return x
    if x is None:
        return DEFAULT
    return parse_limit(x)


@dataclass(frozen=True)
class Thresholds:
    """The thresholds of the three bits, RMS, maxAbsDiff, maxRelDiff (each a Limit)."""
    rms: Limit = DEFAULT
    abs: Limit = DEFAULT
    rel: Limit = DEFAULT

    def __post_init__(self):
        for name in ("rms", "abs", "rel"):
            object.__setattr__(self, name, limit(getattr(self, name)))


# ---- what the kernel did ------------------------------------------------------------

@dataclass(frozen=True)
class Accumulation:
    n: int          # products summed per output element
    u_comp: float   # unit roundoff of one product (0 when exact)
    u_acc: float    # unit roundoff of the accumulator (0 for int32)
    truncates: bool = False   # the accumulator may round toward zero (GPU matrix units)
    mma_k: int = MMA_K[16]    # products a matrix instruction sums per addition


def accumulation(problem, use_dot: bool, input_precision: str,
                 dot_u_acc: float | None = None, dot_truncates: bool = False) -> Accumulation:
    """How the kernel under test sums: products per output, the error of one product, the
    accumulator's unit roundoff. `dot_u_acc` is the matrix unit's own accumulator when it is
    not fp32's (Backend.dot_u_acc: Hopper's fast fp8); `dot_truncates`, that the matrix
    unit's sums may round toward zero (Backend.dot_truncates)."""
    return summing(problem.dtype, problem.accumulations, use_dot, input_precision, dot_u_acc,
                   dot_truncates)


def summing(et: dtypes.ElemType, n: int, use_dot: bool = False, input_precision: str = "ieee",
            dot_u_acc: float | None = None, dot_truncates: bool = False) -> Accumulation:
    """The Accumulation of n products of type `et` (`convgen compare -accumulate N`, where
    no problem says how long the sums were)."""
    if et.is_int:
        return Accumulation(n=n, u_comp=0.0, u_acc=0.0)
    u_comp = 0.0
    if et.name == "f32":
        u_comp = U_COMP_TF32 if (use_dot and input_precision != "ieee") else U_COMP_F32
    u_acc = (dot_u_acc if use_dot else None) or et.acc_type.u
    return Accumulation(n=n, u_comp=u_comp, u_acc=u_acc, truncates=use_dot and dot_truncates,
                        mma_k=MMA_K.get(et.bits, MMA_K[16]))


def default_accumulation(out: dtypes.ElemType) -> Accumulation:
    """What "auto" assumes when nobody says how the output was computed: one term, fp32 accumulator."""
    return Accumulation(n=1, u_comp=0.0, u_acc=0.0 if out.is_int else F32_U)


# ---- the bias check -----------------------------------------------------------------

BIAS_P = 1e-9   # chance that a correct kernel fails the bias check


def bias_limit(n: int) -> float:
    """The largest |mean signed error| in ulps that a correct kernel exceeds with probability
    below BIAS_P, over n elements.

    Each element's signed error (kern - val, and |kern| - |val|) is taken in ulps of the
    output type and clipped to [-1, 1]: a bias bug moves many elements by one ulp, and a
    larger error is the other metrics' to judge. A correct kernel rounds to nearest, so
    each clipped error has mean 0. Taking the elements as independent (they share inputs,
    but not their rounding), Hoeffding's inequality for n values in [-1, 1] gives
    P(|mean| >= t) <= 2 exp(-n t^2 / 2). Two means are checked, each at BIAS_P / 2:
    t = sqrt(2 ln(4 / BIAS_P) / n), 0.147 ulp for 2048 elements, 0.0066 for a million.
    A kernel that rounds toward zero moves about half the elements one ulp toward zero:
    a magnitude mean near -0.5 ulp, caught from about 180 elements on.
    """
    return math.sqrt(2.0 * math.log(4.0 / BIAS_P) / n) if n > 0 else math.inf


# Above this lean the bias check could no longer tell a correct kernel from one that
# rounds its output toward zero (a magnitude mean near -0.5 ulp), so it is turned off.
MAX_LEAN = 0.25


def bias_lean(accum: Accumulation | None, out) -> float:
    """How far, in ulps of the output, a correct kernel's means may lean because its
    accumulator rounds toward zero by design (0 when it rounds to nearest).

    A sum of n terms whose every addition truncates loses up to 2 u_acc of each partial
    sum, on average u_acc, always toward zero: about n u_acc |s| in all, where |s| is a
    typical partial sum. Relative to the output's ulp (2 u_out |val|) and allowing partial
    sums twice the size of the result, the lean is at most n u_acc / u_out ulps: 0.07 ulp of
    f16 for a 3x3x64 reduction, 0.14 for 3x3x128. NVIDIA's tensor cores truncate when they
    align and add (Fasi et al., "Numerical behavior of NVIDIA tensor cores", 2021), and an
    H100's f16 wgmma convolutions lean this way at batch 256. This counts every addition as
    truncating, where gamma's truncation term counts one per instruction (k products): k
    times larger, and on the side of turning the check off, which is all the lean decides."""
    if accum is None or not accum.truncates or out.is_int or out.u == 0:
        return 0.0
    return accum.n * accum.u_acc / out.u


def lean_unchecked(accum: Accumulation | None, out) -> str | None:
    """Why the bias check is off because the allowed lean is past MAX_LEAN; None when the
    check can still run (Backend.bias_unchecked gives the backend's own reasons)."""
    lean = bias_lean(accum, out)
    if lean <= MAX_LEAN:
        return None
    return (f"{accum.n} terms summed by matrix units that may truncate can lean "
            f"{lean:.2f} ulp, too near a rounding bug's 0.5")


# ---- the derivation -------------------------------------------------------------------

@dataclass(frozen=True)
class Terms:
    u_out2: float   # 2 * u_out
    u_comp: float
    gamma: float
    denorm_min: float

    @property
    def rtol(self) -> float:
        return self.u_out2 + self.u_comp

    @property
    def rms(self) -> float:
        return self.u_out2 + self.u_comp + self.gamma

    @property
    def atol_k(self) -> float:
        """The element-wise floor, as a multiple of max|val|."""
        return self.gamma + LAMBDA * self.u_comp

    @property
    def abs_k(self) -> float:
        """maxAbsDiff's threshold, as a multiple of max|val|."""
        return self.u_out2 + LAMBDA * self.u_comp + self.gamma


def terms(out: dtypes.ElemType, accum: Accumulation | None) -> Terms:
    out = dtypes.of(out)
    if out.is_int:
        return Terms(0.0, 0.0, 0.0, 0.0)
    acc = accum or default_accumulation(out)
    gamma = LAMBDA * math.sqrt(max(acc.n, 1)) * (2.0 * acc.u_acc)
    if acc.truncates:
        gamma += acc.n / acc.mma_k * F32_U
    return Terms(2.0 * out.u, acc.u_comp, gamma, out.denorm_min)


def auto_rtol(out: dtypes.ElemType, accum: Accumulation | None) -> float:
    """The relative part of the auto rel check; known before the data is seen."""
    return terms(out, accum).rtol


@dataclass(frozen=True)
class Resolved:
    rms: float
    abs: float
    rel: float                                  # on maxRelDiff; in auto mode, the rtol part
    rel_auto: tuple[float, float] | None        # (rtol, atol) of the element-wise check, or None
    how: tuple[str, str, str]                   # "given" | "auto" | "default" for rms, abs, rel
    auto: tuple[float, float, float]            # what auto would allow: rms, abs, rel atol
    bias: float = math.inf                      # |mean signed error| in ulps; inf: not checked

    def to_json(self) -> dict:
        d = {"rms": self.rms, "abs": self.abs, "rel": self.rel, "bias": self.bias,
             "rms_mode": self.how[0], "abs_mode": self.how[1], "rel_mode": self.how[2]}
        if self.rel_auto is not None:
            d["rel_rtol"], d["rel_atol"] = self.rel_auto
        return d


def resolve(thresholds: Thresholds, out: dtypes.ElemType, accum: Accumulation | None,
            ref_max_abs: float, n: int = 0) -> Resolved:
    """Concrete thresholds, once max|val| and the number of compared elements n are known
    (n = 0: no bias check)."""
    tm = terms(out, accum)
    m = float(ref_max_abs) if math.isfinite(ref_max_abs) else 0.0
    auto_rms, auto_abs = tm.rms, tm.abs_k * m + tm.denorm_min
    auto_atol = tm.atol_k * m + tm.denorm_min
    rms = thresholds.rms.value if thresholds.rms.mode == "given" else auto_rms
    abs_ = thresholds.abs.value if thresholds.abs.mode == "given" else auto_abs
    if thresholds.rel.mode == "given":
        rel, rel_auto = thresholds.rel.value, None
    else:
        rel, rel_auto = tm.rtol, (tm.rtol, auto_atol)
    how = (thresholds.rms.mode, thresholds.abs.mode, thresholds.rel.mode)
    bias = bias_limit(n) + bias_lean(accum, out)
    return Resolved(rms, abs_, rel, rel_auto, how, (auto_rms, auto_abs, auto_atol), bias)


# ---- rocMLIR's comparators --------------------------------------------------------------
#
# `--comparator=legacy` and `--comparator=allclose` judge as rocmlir-gen's verifier does
# (rocmlir-gen's createVerifierFunc picks the limits; its runtime's mcpuVerify and
# mcpuVerifyAllclose apply them), for lines imported from rocMLIR's suites:
#
#   legacy    [RMS <= rms, maxAbsDiff <= abs, maxRelDiff <= rel], RMS as convgen's,
#             maxRelDiff = max |val - kern| / max(|val|, 1e-8) over val != 0. Defaults: rms
#             3e-5 (1e-3 for f16 and bf16 outputs), abs 100, rel 1e-6; for f16 and bf16 the
#             rel threshold is 100 whatever the line asks.
#   allclose  every element |kern - val| <= atol + rtol*|val| (all three bits alike), with
#             atol = base_atol + K_eff * sum_err(type, random data), rtol = base_rtol (+
#             sqrt(split) * epsilon for a split reduction), K_eff the products per
#             output: (C/G)*Z*Y*X for fwd and bwd_data, N*Do*Ho*Wo for bwd_weight.
#
# In both an f32 output element whose reference is subnormal counts as equal and
# infinities are compared as +-65504. The constants are rocMLIR's allcloseBaseline and
# sumErrorTolerance, per the narrowest float type of the convolution:
ALLCLOSE = {   # type: (base_atol, base_rtol, sum_err random, sum_err fixed or none)
    "f16": (1e-5, 1e-3, 1 / 900, 1 / 900),
    "bf16": (1e-5, 1.6e-2, 1 / 100, 1 / 100),
    "f32": (1e-5, 1.3e-6, 1e-5, 1e-6),
    "fp8_e4m3": (1e-1, 0.125, 0.125, 0.125), "fp8_e4m3fnuz": (1e-1, 0.125, 0.125, 0.125),
    "fp8_e5m2": (1e-1, 0.25, 0.25, 0.25), "fp8_e5m2fnuz": (1e-1, 0.25, 0.25, 0.25),
}
ALLCLOSE_OTHER = (1e-2, 1e-2, 1 / 100, 1 / 100)
LEGACY_RMS, LEGACY_RMS_16BIT, LEGACY_ABS, LEGACY_REL, LEGACY_REL_16BIT = 3e-5, 1e-3, 100.0, 1e-6, 100.0
COMPARATORS = ("convgen", "legacy", "allclose")


@dataclass(frozen=True)
class RocmlirLimits:
    comparator: str      # "legacy" or "allclose"
    rms: float = 0.0
    abs: float = 0.0
    rel: float = 0.0
    rel_forced: bool = False    # legacy: the rel threshold was set to 100 for a 16-bit output
    atol: float = 0.0
    rtol: float = 0.0
    exact: bool = False         # integer outputs: every element equal

    def to_json(self) -> dict:
        return {"comparator": self.comparator, "rms": self.rms, "abs": self.abs, "rel": self.rel,
                "rel_forced": self.rel_forced, "atol": self.atol, "rtol": self.rtol,
                "exact": self.exact}


def rocmlir_limits(comparator: str, dtype: dtypes.ElemType, thresholds: Thresholds,
                   atol: float | None, rtol: float | None, k_eff: int, random: bool,
                   split: int = 1) -> RocmlirLimits:
    """The limits rocMLIR's `comparator` applies to a convolution of type `dtype` (the
    input type: the narrowest float of the problem) whose outputs sum k_eff products, on
    random (or fixed/none) data, with its reduction split in `split` parts. Thresholds
    given as numbers replace the legacy defaults (auto means the default here); atol and
    rtol replace allclose's."""
    out = dtype.out_type
    if out.is_int:
        return RocmlirLimits(comparator, exact=True)
    if comparator == "legacy":
        sixteen = out.name in ("f16", "bf16")

        def given(lim: Limit, default: float) -> float:
            return lim.value if lim.mode == "given" else default
        rel = given(thresholds.rel, LEGACY_REL)
        return RocmlirLimits("legacy", rms=given(thresholds.rms, LEGACY_RMS_16BIT if sixteen else LEGACY_RMS),
                             abs=given(thresholds.abs, LEGACY_ABS),
                             rel=LEGACY_REL_16BIT if sixteen else rel,
                             rel_forced=sixteen and rel != LEGACY_REL_16BIT)
    base_atol, base_rtol, err_random, err_fixed = ALLCLOSE.get(dtype.name, ALLCLOSE_OTHER)
    # rocMLIR sums in f32: atol = baseAtol + float(kEff) * sumErrorTolerance
    default_atol = float(_f32(base_atol + _f32(k_eff * (err_random if random else err_fixed))))
    a = default_atol if atol is None else atol
    r = base_rtol if rtol is None else rtol
    if rtol is None and split > 1:
        r += math.sqrt(split) * 2.0 ** -dtype.mantissa   # 2^(1 - precision): one epsilon
    return RocmlirLimits("allclose", atol=a, rtol=r)


def rocmlir_k_eff(problem) -> int:
    """rocMLIR's products per output (computeReductionK): per-group channels times the
    filter's taps for fwd and bwd_data (which takes the forward count), the output's pixels
    for bwd_weight."""
    if problem.direction.splits_reduction:
        return problem.n * problem.ho * problem.wo
    return problem.c * problem.y * problem.x


def _f32(x: float) -> float:
    import struct
    return struct.unpack("f", struct.pack("f", x))[0]

"""Thresholds for the three bits, from the output type and the accumulation.

A threshold is a float (kept as given), "auto" (derived below), or None (the
type's default). The derivation, in one place:

    u_out  = 2^-(mantissa_out + 1)     unit roundoff of the output type (0 for int32)
    u_comp = relative error of one product (0 when exact: fp16, bf16, fp8 in fp32;
             2^-24 for fp32*fp32; 2^-9 for tf32, whose operands may each be truncated
             to 10 fraction bits, 2^-10 apiece)
    u_acc  = unit roundoff of the accumulator (2^-24 for fp32, 0 for int32)
    gamma  = LAMBDA * sqrt(n) * (2 * u_acc)

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
fp32 output with exact products: the f32 rows with u_comp = 0 (very close).

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

import torch

from convgen.errors import ConvgenError

LAMBDA = 4.0
F32_U = 2.0 ** -24


@dataclass(frozen=True)
class Accumulation:
    n: int          # products summed per output element
    u_comp: float   # unit roundoff of one product (0 when exact)
    u_acc: float    # unit roundoff of the accumulator (0 for int32)


@dataclass(frozen=True)
class OutType:
    name: str
    is_int: bool
    mantissa: int   # stored fraction bits
    emin: int       # exponent of the smallest normal

    @property
    def u_out(self) -> float:
        return 0.0 if self.is_int else 2.0 ** -(self.mantissa + 1)

    @property
    def denorm_min(self) -> float:
        return 0.0 if self.is_int else 2.0 ** (self.emin - self.mantissa)

    def spacing(self, x: float) -> float:
        """The step between values of this type in the binade of |x| (one ULP)."""
        if self.is_int:
            return 1.0
        e = math.frexp(abs(x))[1] - 1 if x and math.isfinite(x) else self.emin
        return 2.0 ** (max(e, self.emin) - self.mantissa)


OUT_TYPES = {
    torch.float32: OutType("f32", False, 23, -126),
    torch.float16: OutType("f16", False, 10, -14),
    torch.bfloat16: OutType("bf16", False, 7, -126),
    torch.int32: OutType("i32", True, 0, 0),
}


def out_type(dtype: torch.dtype) -> OutType:
    if dtype not in OUT_TYPES:
        raise ValueError(f"unsupported output dtype {dtype}")
    return OUT_TYPES[dtype]


def default_accumulation(dtype: torch.dtype) -> Accumulation:
    """What "auto" assumes when nobody says how the output was computed: one term, fp32 accumulator."""
    return Accumulation(n=1, u_comp=0.0, u_acc=0.0 if out_type(dtype).is_int else F32_U)


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


def terms(dtype: torch.dtype, accum: Accumulation | None) -> Terms:
    t = out_type(dtype)
    if t.is_int:
        return Terms(0.0, 0.0, 0.0, 0.0)
    acc = accum or default_accumulation(dtype)
    gamma = LAMBDA * math.sqrt(max(acc.n, 1)) * (2.0 * acc.u_acc)
    return Terms(2.0 * t.u_out, acc.u_comp, gamma, t.denorm_min)


def auto_rtol(dtype: torch.dtype, accum: Accumulation | None) -> float:
    """The relative part of the auto rel check; known before the data is seen."""
    return terms(dtype, accum).rtol


@dataclass(frozen=True)
class Resolved:
    rms: float
    abs: float
    rel: float                                  # on maxRelDiff; in auto mode, the rtol part
    rel_auto: tuple[float, float] | None        # (rtol, atol) of the element-wise check, or None
    how: tuple[str, str, str]                   # "given" | "auto" | "default" for rms, abs, rel

    def to_json(self) -> dict:
        d = {"rms": self.rms, "abs": self.abs, "rel": self.rel,
             "rms_mode": self.how[0], "abs_mode": self.how[1], "rel_mode": self.how[2]}
        if self.rel_auto is not None:
            d["rel_rtol"], d["rel_atol"] = self.rel_auto
        return d


def _given(value) -> float | None:
    """A threshold the user wrote as a number, or None when it asks for auto/default."""
    if value is None:
        return None
    if isinstance(value, str):
        if value.strip().lower() == "auto":
            return None
        try:
            value = float(value)
        except ValueError:
            raise ConvgenError(f"threshold '{value}' is neither a number nor 'auto'") from None
    value = float(value)
    if math.isnan(value) or value < 0:
        raise ConvgenError(f"threshold {value} must be a number >= 0")
    return value


def _how(value) -> str:
    if value is None:
        return "default"
    return "given" if _given(value) is not None else "auto"


def resolve(thresholds, out_dtype: torch.dtype, accum: Accumulation | None,
            ref_max_abs: float) -> Resolved:
    """Concrete thresholds; `thresholds` is an options.Thresholds (rms, abs, rel)."""
    tm = terms(out_dtype, accum)
    m = float(ref_max_abs) if math.isfinite(ref_max_abs) else 0.0
    rms, abs_, rel = (_given(v) for v in (thresholds.rms, thresholds.abs, thresholds.rel))
    rms = tm.rms if rms is None else rms
    abs_ = tm.abs_k * m + tm.denorm_min if abs_ is None else abs_
    rel_auto = None
    if rel is None:
        rel, rel_auto = tm.rtol, (tm.rtol, tm.atol_k * m + tm.denorm_min)
    how = tuple(_how(v) for v in (thresholds.rms, thresholds.abs, thresholds.rel))
    return Resolved(rms, abs_, rel, rel_auto, how)

"""Compare a kernel's output with a reference: metrics, histograms, worst elements and three bits.

Knows nothing about convolutions: two tensors of one shape, the output type, how
many products were summed (for automatic thresholds) and the thresholds.

Definitions (val = reference, kern = kernel, both widened to float64):
    maxAbsDiff      max |val - kern|
    maxRelDiff      max |val - kern| / |val|   over |val| > 0
    maxRelDiff_old  the same over |val| > 1e-3 (the metric the old suites used)
    maxEpsilonDiff  max |val - kern| / eps(|val|): eps is the spacing of the
                    output type in the binade of |val| (2^(floor(log2|val|) - mantissa),
                    constant 2^(emin - mantissa) below the smallest normal); 1 for int32
    RMS             sqrt(sum (val - kern)^2) / (sqrt(N) * max(max|val|, max|kern|)),
                    0 when both are all zero

Elements with a NaN on either side, an infinite reference (the exact result
overflows the output type there, so the element verifies nothing), or an infinite
kernel value where the reference is finite are counted apart and left out of the
metrics; any of them fails every bit. So does an empty output (nothing verified) and a
kernel output that is all zeros while the reference is not.

Histograms use the fp16 study's buckets. relDiff_old: 0, (0,1e-6), [1e-6,1e-5),
..., [0.1,1), >=1, over |val| > 1e-3. epsilonDiff is not rounded to an integer;
its buckets are the nearest-integer ranges of the study's labels: 0 exactly 0,
"1" (0,1.5), "2" [1.5,2.5), "[3,10]" [2.5,10.5), "[11,100]" [10.5,100.5),
">100" the rest. Percentages are of all elements.

On the CPU the statistics are computed chunk by chunk, so memory stays bounded;
on a GPU by one fused Triton pass (kernels/verify_stats.py) that sends back only
scalars. Both take the first element in logical row-major order as the worst
one when several tie.

This module decides: `verify` returns a frozen Verdict, the bits and the findings
behind them as data (what, how many, where, the values there). report.py words them.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
from dataclasses import dataclass, field

import torch

from convgen import backend, dtypes, tolerance
from convgen.kernels import verify_stats as vs

REL_OLD_FLOOR = 1e-3
REL_EDGES, EPS_EDGES = tolerance.REL_EDGES, tolerance.EPS_EDGES
REL_LABELS = ("0", "(0,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)",
              "[1e-2,0.1)", "[0.1,1)", ">=1")
EPS_LABELS = ("0", "1", "2", "[3,10]", "[11,100]", ">100")
CHUNK = 1 << 22
INT32_MIN = -2 ** 31

_MAX_KEYS = ("max_abs", "max_rel", "max_rel_old", "max_eps", "max_excess", "max_val", "max_kern")
_BAD_KEYS = ("kern_nan", "ref_nan", "ref_inf", "bad_inf")
# findings that fail every bit whatever the thresholds (scripts/verifier-power reads it)
EVERY_BIT = _BAD_KEYS + ("outside", "empty", "kern_zero")
_SUM_KEYS = (("sum_sq", "sum_sbias", "sum_mbias", "n_ok", "exact", "kern_inf", "int_min", "old_excluded") + _BAD_KEYS
             + tuple(f"rel_h{i}" for i in range(len(REL_LABELS)))
             + tuple(f"eps_h{i}" for i in range(len(EPS_LABELS))))
# metric name -> (column, element-wise array) of its worst element
_WORST = {"max_abs_diff": ("max_abs", "d"), "max_rel_diff": ("max_rel", "rel"),
          "max_rel_diff_old": ("max_rel_old", "rel_old"), "max_epsilon_diff": ("max_eps", "ulps"),
          "rel_auto": ("max_excess", "excess")}


@dataclass(frozen=True)
class Worst:
    value: float             # the metric at this element (rel_auto: |val-kern| - rtol*|val|)
    val: float
    kern: float
    index: dict              # {dimension letter: index}


@dataclass(frozen=True)
class Histogram:
    name: str
    labels: tuple
    counts: tuple
    n: int                   # all elements: percentages are of n
    excluded: int            # elements outside this histogram
    excluded_label: str

    def percent(self, count: int) -> float:
        return 100.0 * count / self.n if self.n else 0.0



@dataclass(frozen=True)
class Finding:
    """One reason for a 0 bit, or a warning, as data; report.py words it.

    kind: "empty", "kern_nan", "ref_nan", "ref_inf", "bad_inf", "outside" (writes outside
    the output), "poison", "kern_zero" (each fails every bit), "rms", "abs", "rel", "rel_auto" (its bit is 0), "ref_zero"
    (a warning: nothing fails, but the test checks little)."""
    kind: str
    fails: bool
    count: int = 0                 # elements concerned
    value: float = 0.0             # the metric, or the worst excess
    limit: float = 0.0             # its threshold
    at: Worst | None = None        # where (the first or the worst element)
    detail: str = ""               # bias: which mean failed; outside: where


@dataclass(frozen=True)
class Verdict:
    bits: tuple
    metrics: dict
    thresholds: tolerance.Resolved
    histograms: dict
    worst: dict
    n: int
    out_type: dtypes.ElemType
    exact_count: int = 0
    nan_count: int = 0             # NaN in the kernel output
    inf_count: int = 0             # infinities in the kernel output
    ref_nan_count: int = 0
    ref_inf_count: int = 0         # infinities in the reference
    bad_inf_count: int = 0         # kernel infinities where the reference is finite
    int_min_count: int = 0         # int32 outputs equal to the poison value
    ref_max_abs: float = 0.0
    kern_max_abs: float = 0.0
    out_of_tolerance: int = 0      # elements failing the element-wise check (CK's error count)
    findings: tuple = ()
    rocmlir: tolerance.RocmlirLimits | None = None   # judged by rocMLIR's comparator instead

    @property
    def nonfinite(self) -> bool:
        """Some element is NaN or infinite where that fails every bit."""
        return any(f.kind in _BAD_KEYS + ("outside",) for f in self.findings)

    @property
    def passed(self) -> bool:
        return all(self.bits)


# ---- element-wise definitions (kernels/verify_stats.py mirrors these) ----------

@dataclass(frozen=True)
class _Consts:
    rtol: float
    is_int: bool
    mantissa: int
    emin: int

    def tensor(self, device) -> torch.Tensor:
        return _consts_tensor((REL_OLD_FLOOR, self.rtol) + REL_EDGES + EPS_EDGES, str(device))


@functools.lru_cache(maxsize=64)
def _consts_tensor(values: tuple, device: str) -> torch.Tensor:
    """Cached: a host-to-device copy per call would hold up the launch behind it."""
    return torch.tensor(values, dtype=torch.float64, device=device)


def _eps(avf: torch.Tensor, c: _Consts) -> torch.Tensor:
    """The output type's spacing at |val| (a power of two; 1 for integers)."""
    if c.is_int:
        return torch.ones_like(avf)
    # Exponent from the float64 bits: exact, and the same operations as the Triton kernel.
    e = ((avf.contiguous().view(torch.int64) >> 52) & 0x7FF) - 1023
    return ((e.clamp_min(c.emin) - c.mantissa + 1023) << 52).view(torch.float64)


def _elementwise(v: torch.Tensor, k_raw: torch.Tensor, c: _Consts) -> dict:
    """Per-element quantities of two 1-D tensors; excluded elements hold 0 (excess: -inf)."""
    k = k_raw.to(torch.float64)
    v = v.to(torch.float64)
    av, ak = v.abs(), k.abs()
    k_nan, v_nan = k.isnan(), v.isnan()
    k_inf = ak == math.inf
    differ = v != k
    ref_inf = av == math.inf
    bad_inf = k_inf & ~ref_inf & ~v_nan
    ok = ~(k_nan | v_nan | ref_inf | bad_inf)
    d = torch.where(ok & differ, (v - k).abs(), 0.0)
    avf = torch.where(ok & (av < math.inf), av, 0.0)
    akf = torch.where(ok & (ak < math.inf), ak, 0.0)
    pos = avf > 0
    rel = torch.where(pos, d / torch.where(pos, avf, 1.0), 0.0)
    in_old = ok & (av > REL_OLD_FLOOR)
    eps = _eps(avf, c)
    ulps = d / eps
    # signed errors for the bias check, in ulps, clipped to one ulp (a larger error is the
    # other metrics' to judge): kern - val, and |kern| - |val| (toward or away from zero)
    sbias = torch.where(ok, ((k - v) / eps).clamp(-1.0, 1.0), 0.0)
    mbias = torch.where(ok, ((akf - avf) / eps).clamp(-1.0, 1.0), 0.0)
    int_min = (k_raw == INT32_MIN) if c.is_int else torch.zeros_like(ok)
    return dict(d=d, rel=rel, rel_old=torch.where(in_old, rel, 0.0), ulps=ulps, sbias=sbias,
                mbias=mbias,
                excess=torch.where(ok, d - c.rtol * avf, -math.inf), avf=avf, akf=akf, ok=ok,
                exact=ok & ~differ, kern_nan=k_nan, ref_nan=v_nan, ref_inf=ref_inf, bad_inf=bad_inf,
                kern_inf=k_inf, int_min=int_min, in_old=in_old)


def _histogram_counts(e: dict) -> tuple[torch.Tensor, torch.Tensor]:
    dev = e["d"].device
    rel_old, ulps = e["rel_old"], e["ulps"]
    rb = torch.bucketize(rel_old, torch.tensor(REL_EDGES, dtype=torch.float64, device=dev),
                         right=True)
    rb = torch.where(rel_old > 0, rb + 1, 0)[e["in_old"]]
    eb = torch.bucketize(ulps, torch.tensor(EPS_EDGES, dtype=torch.float64, device=dev), right=True)
    # "0" means exact: a nonzero difference whose ulps underflows (a float64 reference
    # far outside the output type's range) still counts in "1".
    eb = torch.where(e["d"] > 0, eb + 1, 0)[e["ok"]]
    return (torch.bincount(rb, minlength=len(REL_LABELS)),
            torch.bincount(eb, minlength=len(EPS_LABELS)))


def _columns(e: dict) -> dict:
    """The per-chunk statistics, as 0-d tensors (one host copy for all of them)."""
    col = {"sum_sq": (e["d"] * e["d"]).sum(), "sum_sbias": e["sbias"].sum(),
           "sum_mbias": e["mbias"].sum(), "max_abs": e["d"].amax(),
           "max_rel": e["rel"].amax(), "max_rel_old": e["rel_old"].amax(),
           "max_eps": e["ulps"].amax(), "max_excess": e["excess"].amax(),
           "max_val": e["avf"].amax(), "max_kern": e["akf"].amax()}
    for name in ("ok", "exact", "kern_nan", "ref_nan", "ref_inf", "bad_inf", "kern_inf", "int_min"):
        col["n_ok" if name == "ok" else name] = e[name].sum()
    col["old_excluded"] = (e["ok"] & ~e["in_old"]).sum()
    rh, eh = _histogram_counts(e)
    col.update({f"rel_h{i}": c for i, c in enumerate(rh)})
    col.update({f"eps_h{i}": c for i, c in enumerate(eh)})
    return col


def _first_indices(e: dict) -> dict:
    """Local index of each worst element and of the first non-finite one of each kind."""
    at = {col: e[arr].argmax() for col, arr in _WORST.values()}
    at.update({k: e[k].to(torch.uint8).argmax() for k in _BAD_KEYS})
    return at


# ---- the two passes -----------------------------------------------------------

@dataclass
class _Pass:
    tot: dict                # column -> float
    at: dict                 # column -> flat index of its worst / first element
    values: dict = field(default_factory=dict)   # column -> (val, kern) at its worst element


def _merge(p: _Pass, col: dict, at: dict, start: int) -> None:
    for k, x in col.items():
        if k in _MAX_KEYS:
            if k not in p.tot or x > p.tot[k]:   # strictly greater: the first worst stays
                p.tot[k] = x
                if k in at:
                    p.at[k] = start + at[k]
        else:
            if k in _BAD_KEYS and p.tot.get(k, 0) == 0 and x > 0:
                p.at[k] = start + at[k]
            p.tot[k] = p.tot.get(k, 0) + x


def _chunks(shape: tuple, limit: int):
    """(index, flat start) pairs whose views cover the tensor in logical row-major order."""
    inner, d = 1, len(shape)
    while d > 0 and inner * shape[d - 1] <= limit:
        inner *= shape[d - 1]
        d -= 1
    if d == 0:
        yield (Ellipsis,), 0
        return
    rows = max(1, limit // inner)
    for outer in itertools.product(*(range(s) for s in shape[:d - 1])):
        base = 0
        for i, s in zip(outer, shape[:d - 1]):
            base = base * s + i
        for r in range(0, shape[d - 1], rows):
            yield outer + (slice(r, r + rows),), (base * shape[d - 1] + r) * inner


def _chunked_pass(kern, ref, c: _Consts, chunk: int) -> _Pass:
    p = _Pass({}, {})
    for idx, start in _chunks(tuple(kern.shape), chunk):
        k, v = kern[idx].reshape(-1), ref[idx].reshape(-1)
        if k.numel() == 0:
            continue
        e = _elementwise(v, k, c)
        col, at = _columns(e), _first_indices(e)
        keys, ats = list(col), list(at)
        vals = torch.stack([col[x].to(torch.float64) for x in keys]
                           + [at[x].to(torch.float64) for x in ats]).tolist()
        _merge(p, dict(zip(keys, vals)), {x: int(i) for x, i in zip(ats, vals[len(keys):])}, start)
    return p


def _device_pass(kern, ref, c: _Consts) -> _Pass:
    """One Triton pass (three kernels) and one copy back. The Triton pass handles
    finite values only; a NaN or an infinity (rare, and a failure of every bit) sends the
    whole comparison to the chunked pass, on the device."""
    backend.ensure_interpreter_if_no_gpu()   # must precede the kernel module's import
    if not kern.is_cuda and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise ValueError("the Triton pass on CPU tensors runs only in the interpreter "
                         "(TRITON_INTERPRET=1, set before the kernels are imported)")
    out = vs.device_totals(kern, ref, c.tensor(kern.device), is_int=c.is_int,
                           mantissa=c.mantissa, emin=c.emin)
    return _Pass(*out) if out is not None else _chunked_pass(kern, ref, c, CHUNK)


# ---- results ------------------------------------------------------------------

def _coords(flat: int, shape: tuple, names: list) -> dict:
    idx = []
    for s in reversed(shape):
        flat, i = divmod(flat, s)
        idx.append(i)
    return dict(zip(names, reversed(idx)))


def _names(dim_names, ndim: int) -> list:
    names = list(dim_names) if dim_names is not None else []
    return names if len(names) == ndim else [f"d{i}" for i in range(ndim)]


def _values_at(flats: list, *tensors: torch.Tensor) -> list:
    """Each tensor's elements (tensors of one shape) at logical flat indices, as float64
    lists: one index, one gather per tensor, one copy back."""
    t0 = tensors[0]
    if t0.dim() == 0:
        return [[float(t.item())] * len(flats) for t in tensors]
    coords = [list(_coords(i, tuple(t0.shape), range(t0.dim())).values()) for i in flats]
    index = tuple(torch.tensor(coords, dtype=torch.int64, device=t0.device).T)
    return torch.stack([t[index].to(torch.float64) for t in tensors]).tolist()


def _worst_elements(p: _Pass, kern, ref, names) -> dict:
    real = {metric: col for metric, (col, _) in _WORST.items()
            if p.tot["n_ok"] > 0 and (metric == "rel_auto" or p.tot[col] > 0) and col in p.at}
    flats = [p.at[col] for col in real.values()]
    if all(col in p.values for col in real.values()):   # the device pass brought them back
        vals, kerns = [p.values[c][0] for c in real.values()], [p.values[c][1] for c in real.values()]
    else:
        vals, kerns = _values_at(flats, ref, kern) if flats else ([], [])
    worst = dict.fromkeys(_WORST)
    for (metric, col), i, val, k in zip(real.items(), flats, vals, kerns):
        worst[metric] = Worst(p.tot[col], val, k, _coords(i, tuple(kern.shape), names))
    return worst


def _histograms(tot: dict, n: int) -> dict:
    rel = Histogram("relDiff_old", REL_LABELS,
                    tuple(int(tot[f"rel_h{i}"]) for i in range(len(REL_LABELS))), n,
                    int(tot["old_excluded"] + (n - tot["n_ok"])), "|val| <= 1e-3 or non-finite")
    eps = Histogram("epsilonDiff", EPS_LABELS,
                    tuple(int(tot[f"eps_h{i}"]) for i in range(len(EPS_LABELS))), n,
                    int(n - tot["n_ok"]), "non-finite")
    return {"relDiff_old": rel, "epsilonDiff": eps}


def _metrics(tot: dict) -> dict:
    scale = max(tot["max_val"], tot["max_kern"])
    n_ok = tot["n_ok"]
    rms = math.sqrt(tot["sum_sq"]) / (math.sqrt(n_ok) * scale) if scale > 0 and n_ok else 0.0
    return {"rms": rms, "bias": tot["sum_sbias"] / n_ok if n_ok else 0.0,
            "bias_magnitude": tot["sum_mbias"] / n_ok if n_ok else 0.0, "max_abs_diff": tot["max_abs"], "max_rel_diff": tot["max_rel"],
            "max_rel_diff_old": tot["max_rel_old"], "max_epsilon_diff": tot["max_eps"]}


# ---- bits and the findings behind them ------------------------------------------

def _first_bad(p: _Pass, kern, ref, names) -> list:
    """A failing Finding per kind of non-finite element, with its first element."""
    out = []
    for col in _BAD_KEYS:
        count = p.tot[col]
        if count:
            i = p.at[col]
            (val,), (k,) = _values_at([i], ref, kern)
            at = Worst(float("nan"), val, k, _coords(i, tuple(kern.shape), names))
            out.append(Finding(col, True, count=int(count), at=at))
    return out


def _rel_passes(th: tolerance.Resolved, metrics: dict, p: _Pass) -> bool:
    if th.rel_auto is None:
        return metrics["max_rel_diff"] <= th.rel
    return p.tot["n_ok"] == 0 or p.tot["max_excess"] <= th.rel_auto[1]


def _count_outside(kern, ref, c: _Consts, th: tolerance.Resolved, chunk: int) -> int:
    """Elements outside the element-wise check, NaN and infinities included: a pass of its
    own, run only when the rel bit is 0 (otherwise the count is 0)."""
    total = 0
    for idx, _ in _chunks(tuple(kern.shape), chunk):
        k, v = kern[idx].reshape(-1), ref[idx].reshape(-1)
        if k.numel() == 0:
            continue
        e = _elementwise(v, k, c)
        off = e["excess"] > th.rel_auto[1] if th.rel_auto is not None else e["rel"] > th.rel
        total += int((off | ~e["ok"]).sum())
    return total


def _judge(p: _Pass, n: int, metrics: dict, th: tolerance.Resolved, worst: dict, kern, ref,
           names, outside) -> tuple[tuple, tuple]:
    """(bits, findings): the one place that decides."""
    findings = []
    if p.tot["int_min"]:
        findings.append(Finding("poison", False, count=int(p.tot["int_min"])))
    if n == 0:
        return (0, 0, 0), tuple(findings) + (Finding("empty", True),)
    bad = _first_bad(p, kern, ref, names)
    if outside is not None and (outside[0] or outside[1]):
        before, after, nearest = outside
        bad.append(Finding("outside", True, count=before + after,
                           detail=f"{before} before the output, {after} after it; the nearest "
                                  f"{abs(nearest)} elements {'past its end' if nearest > 0 else 'before its start'}"))
    if bad:
        return (0, 0, 0), tuple(bad + findings)
    ref_max, kern_max = p.tot["max_val"], p.tot["max_kern"]
    if ref_max == 0:
        findings.append(Finding("ref_zero", False))
    elif kern_max == 0:
        return (0, 0, 0), tuple(findings) + (Finding("kern_zero", True, value=ref_max),)
    # the bias check shares the RMS bit: both judge all elements together
    biased = [(what, metrics[key]) for key, what in (("bias", "toward +inf"),
                                                     ("bias_magnitude", "away from zero"))
              if abs(metrics[key]) > th.bias]
    bits = (int(metrics["rms"] <= th.rms and not biased), int(metrics["max_abs_diff"] <= th.abs),
            int(_rel_passes(th, metrics, p)))
    if metrics["rms"] > th.rms:
        findings.append(Finding("rms", True, value=metrics["rms"], limit=th.rms))
    for what, value in biased:
        findings.append(Finding("bias", True, value=value, limit=th.bias, detail=what))
    if not bits[1]:
        findings.append(Finding("abs", True, value=metrics["max_abs_diff"], limit=th.abs,
                                at=worst["max_abs_diff"]))
    if not bits[2]:
        if th.rel_auto is None:
            findings.append(Finding("rel", True, value=metrics["max_rel_diff"], limit=th.rel,
                                    at=worst["max_rel_diff"]))
        else:
            findings.append(Finding("rel_auto", True, value=p.tot["max_excess"],
                                    limit=th.rel_auto[1], at=worst["rel_auto"]))
    return bits, tuple(findings)


def _check(kern, ref, out: dtypes.ElemType) -> None:
    if tuple(kern.shape) != tuple(ref.shape):
        raise ValueError(f"kern and ref shapes differ: {tuple(kern.shape)} vs {tuple(ref.shape)}")
    if kern.dtype != out.torch_dtype:
        raise ValueError(f"kern is {kern.dtype}, expected the output type {out.name}")
    if kern.device != ref.device:
        raise ValueError(f"kern is on {kern.device}, ref on {ref.device}")


def verify(kern: torch.Tensor, ref: torch.Tensor, out_type, thresholds=None,
           accum: tolerance.Accumulation | None = None, dim_names: str = "ngkhw", *,
           device_path: bool | None = None, chunk: int = CHUNK, bias_check: bool = True,
           outside: tuple | None = None) -> Verdict:
    """Compare `kern` (in the output type) with `ref` (already rounded to the output type,
    in any type that holds those values exactly: that type itself, or float64).

    out_type: an ElemType, its name, or a torch dtype. thresholds: tolerance.Thresholds
    (None: every bit on its default). device_path: None = the Triton pass when the
    tensors are on a GPU; True forces it (in the interpreter, on CPU tensors, for tests);
    False forces the chunked torch pass, which runs on whatever device holds the tensors.
    Tensors of more than 5 dimensions always take the torch pass. bias_check=False leaves
    the mean signed errors out of the verdict (still reported): for a kernel whose output
    cast does not round to nearest by design (Triton's interpreter truncates fp32 to bf16).
    outside: guards.Guard.outside() of the kernel output's allocation: writes outside the
    tensor fail every bit.
    """
    ot = dtypes.of(out_type)
    thresholds = thresholds if thresholds is not None else tolerance.Thresholds()
    _check(kern, ref, ot)
    c = _Consts(tolerance.auto_rtol(ot, accum), ot.is_int, ot.mantissa, ot.emin)
    use_device = kern.is_cuda if device_path is None else device_path
    n = kern.numel()
    if n == 0:
        p = _Pass({k: 0.0 for k in _MAX_KEYS + _SUM_KEYS}, {})
    elif use_device and kern.dim() <= 5:
        p = _device_pass(kern, ref, c)
    else:
        p = _chunked_pass(kern, ref, c, chunk)
    th = tolerance.resolve(thresholds, ot, accum, p.tot["max_val"],
                           int(p.tot["n_ok"]) if bias_check else 0)
    names = _names(dim_names, kern.dim())
    metrics = _metrics(p.tot)
    worst = _worst_elements(p, kern, ref, names)
    bits, findings = _judge(p, n, metrics, th, worst, kern, ref, names, outside)
    out_of_tol = 0 if bits[2] or n == 0 else _count_outside(kern, ref, c, th, chunk)
    return Verdict(
        bits=bits, metrics=metrics, thresholds=th, histograms=_histograms(p.tot, n),
        worst=worst, n=n, out_type=ot, exact_count=int(p.tot["exact"]),
        nan_count=int(p.tot["kern_nan"]), inf_count=int(p.tot["kern_inf"]),
        ref_nan_count=int(p.tot["ref_nan"]), ref_inf_count=int(p.tot["ref_inf"]),
        bad_inf_count=int(p.tot["bad_inf"]), int_min_count=int(p.tot["int_min"]),
        ref_max_abs=p.tot["max_val"], kern_max_abs=p.tot["max_kern"],
        out_of_tolerance=out_of_tol, findings=findings)


# ---- rocMLIR's comparators ------------------------------------------------------------

# findings of convgen's own judgement that stand under rocMLIR's comparators too: NaN
# (which fails those as well), writes outside the output, nothing compared, an all-zero
# output; infinities are compared there as +-65504 instead
_KEPT = ("kern_nan", "ref_nan", "outside", "empty", "kern_zero", "poison")
F32_TINY = 2.0 ** -126
CLAMP = 65504.0


def rocmlir_verdict(v: Verdict, kern, ref, limits: tolerance.RocmlirLimits,
                    dim_names: str = "ngkhw", chunk: int = CHUNK) -> Verdict:
    """v judged by rocMLIR's comparator (tolerance.rocmlir_limits says which and its limits):
    its bits and the findings behind them. convgen's own metrics, histograms and worst
    elements stay in the verdict, for people."""
    f32 = v.out_type.name == "f32"
    tot = {"sum_sq": 0.0, "mag": 0.0, "max_abs": 0.0, "max_rel": 0.0, "fails": 0, "nan": 0,
           "max_excess": -math.inf}
    at: dict = {}
    for idx, start in _chunks(tuple(kern.shape), chunk):
        k = kern[idx].reshape(-1).to(torch.float64)
        r = ref[idx].reshape(-1).to(torch.float64)
        if k.numel() == 0:
            continue
        nan = k.isnan() | r.isnan()
        equal = (k == r) | (f32 & (r != 0) & (r.abs() < F32_TINY))
        kc = k.nan_to_num(nan=0.0, posinf=CLAMP, neginf=-CLAMP)
        rc = r.nan_to_num(nan=0.0, posinf=CLAMP, neginf=-CLAMP)
        d = torch.where(equal | nan, 0.0, (rc - kc).abs())
        rel = torch.where((rc != 0) & ~equal & ~nan, d / rc.abs().clamp_min(1e-8), 0.0)
        if limits.exact:
            excess = torch.where(equal & ~nan, -math.inf, math.inf)
        else:
            excess = torch.where(nan, math.inf, torch.where(
                equal, -math.inf, d - (limits.atol + limits.rtol * rc.abs())))
        cols = {"sum_sq": (d * d).sum(), "mag": torch.where(nan, 0.0, torch.maximum(rc.abs(), kc.abs())).amax(),
                "max_abs": d.amax(), "max_rel": rel.amax(), "fails": (excess > 0).sum(),
                "nan": nan.sum(), "max_excess": excess.amax()}
        where = {"max_abs": d.argmax(), "max_rel": rel.argmax(), "max_excess": excess.argmax()}
        vals = torch.stack([c.to(torch.float64) for c in cols.values()]
                           + [w.to(torch.float64) for w in where.values()]).tolist()
        got = dict(zip(cols, vals))
        for key in ("sum_sq", "fails", "nan"):
            tot[key] += got[key]
        for key in ("mag", "max_abs", "max_rel", "max_excess"):
            if got[key] > tot[key]:
                tot[key] = got[key]
                if key in where:
                    at[key] = start + int(vals[len(cols) + list(where).index(key)])
    n = kern.numel()
    names = _names(dim_names, kern.dim())

    def worst(key: str) -> Worst | None:
        if key not in at:
            return None
        (val,), (k,) = _values_at([at[key]], ref, kern)
        return Worst(tot[key], val, k, _coords(at[key], tuple(kern.shape), names))

    rms = math.sqrt(tot["sum_sq"]) / (tot["mag"] * math.sqrt(n)) if tot["mag"] > 0 and n else 0.0
    metrics = {**v.metrics, "rocmlir_rms": rms, "rocmlir_max_abs_diff": tot["max_abs"],
               "rocmlir_max_rel_diff": tot["max_rel"], "rocmlir_failing": int(tot["fails"])}
    kept = [f for f in v.findings if f.kind in _KEPT]
    findings = list(kept)
    if limits.comparator == "legacy" and not limits.exact:
        if tot["nan"]:
            bits = (0, 0, 0)
        else:
            bits = (int(rms <= limits.rms), int(tot["max_abs"] <= limits.abs),
                    int(tot["max_rel"] <= limits.rel))
        if not bits[0] and not tot["nan"]:
            findings.append(Finding("rocmlir_rms", True, value=rms, limit=limits.rms))
        if not bits[1] and not tot["nan"]:
            findings.append(Finding("rocmlir_abs", True, value=tot["max_abs"], limit=limits.abs,
                                    at=worst("max_abs")))
        if not bits[2] and not tot["nan"]:
            findings.append(Finding("rocmlir_rel", True, value=tot["max_rel"], limit=limits.rel,
                                    at=worst("max_rel")))
    else:
        ok = int(tot["fails"] == 0)
        bits = (ok, ok, ok)
        if not ok:
            findings.append(Finding("allclose", True, count=int(tot["fails"]),
                                    value=tot["max_excess"], at=worst("max_excess"),
                                    detail="exact" if limits.exact else ""))
    if any(f.fails for f in kept):
        bits = (0, 0, 0)
    # allclose is an element-wise check of its own: its failures are the count
    out_of_tol = v.out_of_tolerance if limits.comparator == "legacy" else int(tot["fails"])
    return dataclasses.replace(v, bits=bits, metrics=metrics, findings=tuple(findings), rocmlir=limits,
                               out_of_tolerance=out_of_tol)

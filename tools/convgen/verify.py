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

Elements with a NaN, or an infinity on one side only (or of opposite signs), are
counted apart and left out of the metrics; they fail every bit. Equal infinities
count as equal.

Histograms use the fp16 study's buckets. relDiff_old: 0, (0,1e-6), [1e-6,1e-5),
..., [0.1,1), >=1, over |val| > 1e-3. epsilonDiff is not rounded to an integer;
its buckets are the nearest-integer ranges of the study's labels: 0 exactly 0,
"1" (0,1.5), "2" [1.5,2.5), "[3,10]" [2.5,10.5), "[11,100]" [10.5,100.5),
">100" the rest. Percentages are of all elements.

On the CPU the statistics are computed chunk by chunk, so memory stays bounded;
on a GPU by one fused Triton pass (kernels/verify_stats.py) that sends back only
scalars. Both take the first element in logical row-major order as the worst
one when several tie.
"""
from __future__ import annotations

import functools
import itertools
import math
import os
from dataclasses import dataclass, field

import torch

from convgen import tolerance

REL_OLD_FLOOR = 1e-3
REL_EDGES = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.1, 1.0)
REL_LABELS = ("0", "(0,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)",
              "[1e-2,0.1)", "[0.1,1)", ">=1")
EPS_EDGES = (1.5, 2.5, 10.5, 100.5)
EPS_LABELS = ("0", "1", "2", "[3,10]", "[11,100]", ">100")
CHUNK = 1 << 22
INT32_MIN = -2 ** 31

_MAX_KEYS = ("max_abs", "max_rel", "max_rel_old", "max_eps", "max_excess", "max_val", "max_kern")
_BAD_KEYS = ("kern_nan", "ref_nan", "bad_inf")
_SUM_KEYS = (("sum_sq", "n_ok", "exact", "kern_inf", "int_min", "old_excluded") + _BAD_KEYS
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

    def to_json(self) -> dict:
        return {"value": _json_num(self.value), "val": _json_num(self.val),
                "kern": _json_num(self.kern), "at": dict(self.index)}


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

    def to_json(self) -> dict:
        return {"buckets": [{"label": lab, "count": c, "percent": self.percent(c)}
                            for lab, c in zip(self.labels, self.counts)],
                "excluded": {"label": self.excluded_label, "count": self.excluded,
                             "percent": self.percent(self.excluded)}}


@dataclass
class VerifyResult:
    metrics: dict
    bits: tuple
    thresholds: tolerance.Resolved
    histograms: dict
    worst: dict
    n: int
    nan_count: int           # NaN in the kernel output
    inf_count: int           # infinities in the kernel output
    out_type: str
    exact_count: int = 0
    ref_nan_count: int = 0
    bad_inf_count: int = 0   # infinities on one side only, or of opposite signs
    int_min_count: int = 0   # int32 outputs equal to the poison value
    ref_max_abs: float = 0.0
    kern_max_abs: float = 0.0
    nonfinite: bool = False  # NaN or mismatched infinity: every bit fails
    messages: list = field(default_factory=list)
    warnings: list = field(default_factory=list)

    def to_json(self) -> dict:
        out = {k: _json_num(v) for k, v in self.metrics.items()}
        out.update(bits=list(self.bits), thresholds=_json_tree(self.thresholds.to_json()),
                   histograms={k: h.to_json() for k, h in self.histograms.items()},
                   n=self.n, nan_count=self.nan_count, inf_count=self.inf_count,
                   exact_count=self.exact_count, ref_nan_count=self.ref_nan_count,
                   bad_inf_count=self.bad_inf_count, ref_max_abs=_json_num(self.ref_max_abs),
                   kern_max_abs=_json_num(self.kern_max_abs), out_type=self.out_type,
                   worst={k: (w.to_json() if w else None) for k, w in self.worst.items()},
                   messages=list(self.messages), warnings=list(self.warnings))
        return out


def _json_num(x):
    """Strict JSON has no inf or NaN: write them as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _json_tree(d: dict) -> dict:
    return {k: _json_num(v) for k, v in d.items()}


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


def _ulps(d: torch.Tensor, avf: torch.Tensor, c: _Consts) -> torch.Tensor:
    if c.is_int:
        return d
    # Exponent from the float64 bits: exact, and the same operations as the Triton kernel.
    e = ((avf.contiguous().view(torch.int64) >> 52) & 0x7FF) - 1023
    eps = ((e.clamp_min(c.emin) - c.mantissa + 1023) << 52).view(torch.float64)
    return d / eps


def _elementwise(v: torch.Tensor, k_raw: torch.Tensor, c: _Consts) -> dict:
    """Per-element quantities of two 1-D tensors; excluded elements hold 0 (excess: -inf)."""
    k = k_raw.to(torch.float64)
    v = v.to(torch.float64)
    av, ak = v.abs(), k.abs()
    k_nan, v_nan = k.isnan(), v.isnan()
    k_inf = ak == math.inf
    differ = v != k
    bad_inf = (k_inf | (av == math.inf)) & differ & ~k_nan & ~v_nan
    ok = ~(k_nan | v_nan | bad_inf)
    d = torch.where(ok & differ, (v - k).abs(), 0.0)
    avf = torch.where(ok & (av < math.inf), av, 0.0)
    akf = torch.where(ok & (ak < math.inf), ak, 0.0)
    pos = avf > 0
    rel = torch.where(pos, d / torch.where(pos, avf, 1.0), 0.0)
    in_old = ok & (av > REL_OLD_FLOOR)
    ulps = _ulps(d, avf, c)
    int_min = (k_raw == INT32_MIN) if c.is_int else torch.zeros_like(ok)
    return dict(d=d, rel=rel, rel_old=torch.where(in_old, rel, 0.0), ulps=ulps,
                excess=torch.where(ok, d - c.rtol * avf, -math.inf), avf=avf, akf=akf, ok=ok,
                exact=ok & ~differ, kern_nan=k_nan, ref_nan=v_nan, bad_inf=bad_inf,
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
    col = {"sum_sq": (e["d"] * e["d"]).sum(), "max_abs": e["d"].amax(),
           "max_rel": e["rel"].amax(), "max_rel_old": e["rel_old"].amax(),
           "max_eps": e["ulps"].amax(), "max_excess": e["excess"].amax(),
           "max_val": e["avf"].amax(), "max_kern": e["akf"].amax()}
    for name in ("ok", "exact", "kern_nan", "ref_nan", "bad_inf", "kern_inf", "int_min"):
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
    finite values only; a NaN or an infinity (rare, and a failure unless both sides hold
    the same infinity) sends the whole comparison to the chunked pass, on the device."""
    from convgen import backend
    backend.ensure_interpreter_if_no_gpu()   # must precede the kernel module's import
    if not kern.is_cuda and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
        raise ValueError("the Triton pass on CPU tensors runs only in the interpreter "
                         "(TRITON_INTERPRET=1, set before the kernels are imported)")
    from convgen.kernels import verify_stats as vs
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
    return {"rms": rms, "max_abs_diff": tot["max_abs"], "max_rel_diff": tot["max_rel"],
            "max_rel_diff_old": tot["max_rel_old"], "max_epsilon_diff": tot["max_eps"]}


# ---- bits and the reasons for them ----------------------------------------------

def _g(x: float) -> str:
    return f"{x:.9g}"


def _at(index: dict) -> str:
    return " ".join(f"{k}={i}" for k, i in index.items())


def _nonfinite_messages(r: VerifyResult, p: _Pass, kern, ref, names) -> list:
    out = []
    for col, count, what in (
            ("kern_nan", r.nan_count, "NaN in the kernel output (unwritten or computed)"),
            ("ref_nan", r.ref_nan_count, "NaN in the reference: those elements verify nothing"),
            ("bad_inf", r.bad_inf_count, "infinities on one side only or of opposite signs")):
        if count:
            i = p.at[col]
            (val,), (k,) = _values_at([i], ref, kern)
            out.append(f"{count} {what}; the first at {_at(_coords(i, tuple(kern.shape), names))}: "
                       f"val={_g(val)}, kern={_g(k)}; every bit fails")
    return out


def _spread(r: VerifyResult) -> str:
    far = sum(r.histograms["epsilonDiff"].counts[4:])
    if r.n and far > 0.01 * r.n:
        return (f"{100.0 * far / r.n:.3g}% of the elements are more than 10 ULPs off: a widespread "
                "error, likely a bug (indexing, layout, missing or extra terms)")
    if far:
        return f"{far} elements are more than 10 ULPs off: a few are far off (see the worst elements)"
    return "no element is more than 10 ULPs off: the threshold may be tighter than rounding allows"


def _ulps_at(w: Worst, ot: tolerance.OutType) -> str:
    return f"{abs(w.val - w.kern) / ot.spacing(w.val):.3g} ULPs of {ot.name} at |val|"


def _rel_hint(r: VerifyResult, w: Worst) -> str:
    hint = ""
    if abs(w.val) <= 1e-2 * r.ref_max_abs:
        hint += (f"; a value near zero (|val| is {abs(w.val) / r.ref_max_abs:.1e} of max|val|: "
                 "cancellation)")
    if r.bits[0] and r.bits[1]:
        hint += ("; the RMS and abs bits pass, so this is likely rounding, not a bug; consider a "
                 "same-sign input range or the auto rel check")
    return hint


def _rel_message(r: VerifyResult, ot: tolerance.OutType) -> str:
    th = r.thresholds
    if th.rel_auto is None:
        w = r.worst["max_rel_diff"]
        return (f"rel bit 0: maxRelDiff {r.metrics['max_rel_diff']:.2e} > {th.rel:.2e} at "
                f"{_at(w.index)}: val={_g(w.val)}, kern={_g(w.kern)}" + _rel_hint(r, w)
                + f"; maxRelDiff_old (|val| > 1e-3) is {r.metrics['max_rel_diff_old']:.2e}")
    w = r.worst["rel_auto"]
    rtol, atol = th.rel_auto
    d = abs(w.val - w.kern)
    msg = (f"rel bit 0 (auto): at {_at(w.index)} |val-kern| = {d:.2e} > {rtol:.2e}*|val| + "
           f"{atol:.2e} = {rtol * abs(w.val) + atol:.2e}: val={_g(w.val)}, kern={_g(w.kern)} "
           f"({_ulps_at(w, ot)})")
    if r.bits[0] and r.bits[1]:
        msg += ("; the RMS and abs bits pass: few elements are off by more than rounding explains "
                "(flushed subnormal inputs, a different accumulation, or a local bug)")
    return msg


def _bit_messages(r: VerifyResult, ot: tolerance.OutType) -> list:
    th, m, out = r.thresholds, r.metrics, []
    if not r.bits[0]:
        out.append(f"RMS bit 0: RMS {m['rms']:.2e} > {th.rms:.2e} (relative to max|val| "
                   f"{r.ref_max_abs:.2e}); {_spread(r)}")
    if not r.bits[1]:
        w = r.worst["max_abs_diff"]
        out.append(f"abs bit 0: maxAbsDiff {m['max_abs_diff']:.2e} > {th.abs:.2e} at {_at(w.index)}: "
                   f"val={_g(w.val)}, kern={_g(w.kern)} ({_ulps_at(w, ot)})")
    if not r.bits[2]:
        out.append(_rel_message(r, ot))
    return out


def _rel_passes(r: VerifyResult, p: _Pass) -> bool:
    if r.thresholds.rel_auto is None:
        return r.metrics["max_rel_diff"] <= r.thresholds.rel
    return p.tot["n_ok"] == 0 or p.tot["max_excess"] <= r.thresholds.rel_auto[1]


def _judge(r: VerifyResult, p: _Pass, kern, ref, names, ot: tolerance.OutType) -> None:
    """Set r.bits, r.messages and r.warnings."""
    if r.n == 0:
        r.warnings.append("the output is empty: this test checks nothing")
    elif r.ref_max_abs == 0 and r.ref_nan_count == 0:
        r.warnings.append("the reference is all zeros: this test checks nothing")
    if r.int_min_count:
        r.messages.append(f"{r.int_min_count} element(s) hold the int32 minimum, the poison "
                          "value: probably never written")
    bad = _nonfinite_messages(r, p, kern, ref, names)
    if bad:
        r.nonfinite, r.bits = True, (0, 0, 0)
        r.messages[:0] = bad
        return
    if r.kern_max_abs == 0 and r.ref_max_abs > 0:
        r.bits = (0, 0, 0)
        r.messages.append(f"the kernel output is all zeros while the reference is not (max|val| "
                          f"{r.ref_max_abs:.2e}): did the kernel run and write its output? "
                          "every bit fails")
        return
    th, m = r.thresholds, r.metrics
    r.bits = (int(m["rms"] <= th.rms), int(m["max_abs_diff"] <= th.abs), int(_rel_passes(r, p)))
    r.messages.extend(_bit_messages(r, ot))


def _check(kern, ref, out_dtype) -> None:
    if tuple(kern.shape) != tuple(ref.shape):
        raise ValueError(f"kern and ref shapes differ: {tuple(kern.shape)} vs {tuple(ref.shape)}")
    if kern.dtype != out_dtype:
        raise ValueError(f"kern is {kern.dtype}, expected the output type {out_dtype}")
    if kern.device != ref.device:
        raise ValueError(f"kern is on {kern.device}, ref on {ref.device}")


def verify(kern: torch.Tensor, ref: torch.Tensor, out_dtype: torch.dtype, thresholds,
           accum: tolerance.Accumulation | None = None, dim_names: str = "ngkhw", *,
           device_path: bool | None = None, chunk: int = CHUNK) -> VerifyResult:
    """Compare `kern` (in out_dtype) with `ref` (already rounded to out_dtype, in any
    type that holds those values exactly: out_dtype itself, or float64).

    device_path: None = the Triton pass when the tensors are on a GPU; True forces
    it (in the interpreter, on CPU tensors, for tests); False forces the chunked
    torch pass, which runs on whatever device holds the tensors. Tensors of more
    than 5 dimensions always take the torch pass.
    """
    _check(kern, ref, out_dtype)
    ot = tolerance.out_type(out_dtype)
    c = _Consts(tolerance.auto_rtol(out_dtype, accum), ot.is_int, ot.mantissa, ot.emin)
    use_device = kern.is_cuda if device_path is None else device_path
    n = kern.numel()
    if n == 0:
        p = _Pass({k: 0.0 for k in _MAX_KEYS + _SUM_KEYS}, {})
    elif use_device and kern.dim() <= 5:
        p = _device_pass(kern, ref, c)
    else:
        p = _chunked_pass(kern, ref, c, chunk)
    res = tolerance.resolve(thresholds, out_dtype, accum, p.tot["max_val"])
    names = _names(dim_names, kern.dim())
    result = VerifyResult(
        metrics=_metrics(p.tot), bits=(0, 0, 0), thresholds=res,
        histograms=_histograms(p.tot, n), worst=_worst_elements(p, kern, ref, names), n=n,
        nan_count=int(p.tot["kern_nan"]), inf_count=int(p.tot["kern_inf"]), out_type=ot.name,
        exact_count=int(p.tot["exact"]), ref_nan_count=int(p.tot["ref_nan"]),
        bad_inf_count=int(p.tot["bad_inf"]), ref_max_abs=p.tot["max_val"],
        kern_max_abs=p.tot["max_kern"], int_min_count=int(p.tot["int_min"]))
    _judge(result, p, kern, ref, names, ot)
    return result

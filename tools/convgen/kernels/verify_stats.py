"""The verifier's statistics on the device: one fused pass, a few hundred bytes back.

Each program reads ITERS blocks of BLOCK elements of the kernel output and of the
reference (any strides, up to 5 dimensions, logical row-major order), carries its
maxima (with the flat index of the first maximum) and its sum of squared
differences per lane, and a joint histogram, across the blocks; reduces the
lanes once at the end (1.3x faster on an H100 than reducing every block,
docs/verify-benchmark.md); and writes one row: PCOLS float64 values
and NBINS int32 bin counts. `device_totals` reduces the rows on the device in a
few fixed-order torch reductions and copies back one vector. Rows instead of
atomics: the sums come out in a fixed order (the same result on every run).

Every count is a bin of one joint histogram (tl.histogram, one reduction instead
of one per count). An element's code:
    ok (finite on both sides, or equal infinities):  eb * 10 + rb
        eb = epsilonDiff bucket 0..5; rb = relDiff_old bucket 0..8, or 9 when
        |val| <= 1e-3 (left out of that histogram)
    not ok:  59 + (kern NaN | ref NaN << 1 | one-sided infinity << 2), 60..66
    past the end of the tensor: NBINS - 1
An ok element is exact (val == kern) exactly when eb == 0: with gradual underflow,
x != y implies x - y != 0, and d / eps never underflows to 0.

The element-wise definitions must match verify._elementwise exactly (tests
check it): same comparisons, same float64 operations.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

N_REL_EDGES = 7
N_EPS_EDGES = 4
REL_BUCKETS = N_REL_EDGES + 2   # 0, then one per interval
EPS_BUCKETS = N_EPS_EDGES + 2
RB_OUT = REL_BUCKETS            # rb of an ok element with |val| <= 1e-3
RB_SPAN = REL_BUCKETS + 1
BAD_BASE = EPS_BUCKETS * RB_SPAN - 1   # code = BAD_BASE + bad bits (1..7)
NBINS = 128
# Per-row float64 columns: each "first" maximum with its flat index, then the plain ones.
WORST_COLUMNS = ("max_abs", "max_rel", "max_rel_old", "max_eps", "max_excess")
MAX_COLUMNS = WORST_COLUMNS + ("max_val", "max_kern")
SUM_COLUMNS = ("sum_sq", "kern_inf", "int_min")
PCOLS = 2 * len(WORST_COLUMNS) + 2 + len(SUM_COLUMNS)
BLOCK = 256
ITERS = 64
MIN_PROGRAMS = 64   # below ITERS blocks per program for this many programs: one block each
MAX_DIMS = 5
# No FMA contraction: d - rtol*|val| must round as the CPU path rounds it.
COMPILE_OPTIONS = {"enable_fp_fusion": False, "num_warps": 4}
# Compiled kernels may read module globals only when they are constexpr.
_REL_EDGES_C = tl.constexpr(N_REL_EDGES)
_EPS_EDGES_C = tl.constexpr(N_EPS_EDGES)
_RB_OUT_C = tl.constexpr(RB_OUT)
_RB_SPAN_C = tl.constexpr(RB_SPAN)
_BAD_BASE_C = tl.constexpr(BAD_BASE)
_NBINS_C = tl.constexpr(NBINS)


@triton.jit
def _strided(offs, S1, S2, S3, S4, T0, T1, T2, T3, T4):
    i4 = offs % S4
    t = offs // S4
    i3 = t % S3
    t = t // S3
    i2 = t % S2
    t = t // S2
    return (t // S1) * T0 + (t % S1) * T1 + i2 * T2 + i3 * T3 + i4 * T4


@triton.jit
def _ulps(d, avf, IS_INT: tl.constexpr, MANT: tl.constexpr, EMIN: tl.constexpr):
    """d in units of the output type's spacing at avf (exact: the spacing is a power of two)."""
    if IS_INT:
        return d
    e = ((avf.to(tl.int64, bitcast=True) >> 52) & 0x7FF) - 1023
    e = tl.maximum(e, EMIN)
    # d / 2^(e - MANT) as d * 2^(MANT - e): the same value (a power of two's reciprocal is
    # exact and so is the product), without float64 division, the kernel's costliest step.
    inv_eps = ((MANT - e + 1023) << 52).to(tl.float64, bitcast=True)
    return d * inv_eps


@triton.jit
def _lane_max(x, at, m, i):
    """Fold x into each lane's running maximum; strictly greater, so a lane keeps its first."""
    take = x > m
    return tl.where(take, x, m), tl.where(take, at, i)


@triton.jit
def _first_max(m, i):
    """The program's maximum over its lanes and the smallest flat index that reaches it."""
    bm = tl.max(m, axis=0)
    # lanes off the maximum get the largest index there is: never below a lane on it
    return bm, tl.min(tl.where(m == bm, i, tl.max(i, axis=0)), axis=0)


@triton.jit
def _store_first_max(row, j: tl.constexpr, m, i):
    """Column j: the program's maximum; column 5 + j: the flat index of its first element."""
    bm, bi = _first_max(m, i)
    tl.store(row + j, bm)
    tl.store(row + 5 + j, bi.to(tl.float64))


@triton.jit
def verify_stats_kernel(kern_ptr, ref_ptr, c_ptr, part_ptr, hist_ptr, n,
                        S1, S2, S3, S4, K0, K1, K2, K3, K4, R0, R1, R2, R3, R4,
                        LAYOUT: tl.constexpr, IDX64: tl.constexpr,
                        IS_INT: tl.constexpr, MANT: tl.constexpr, EMIN: tl.constexpr,
                        INT_MIN: tl.constexpr, PCOLS: tl.constexpr,
                        BLOCK: tl.constexpr, ITERS: tl.constexpr):
    pid = tl.program_id(0)
    floor = tl.load(c_ptr)
    rtol = tl.load(c_ptr + 1)
    start = pid.to(tl.int64) * (BLOCK * ITERS)
    lane = tl.arange(0, BLOCK)
    # Every statistic is carried per lane and reduced across lanes once, after the loop:
    # a reduction inside the loop costs shuffles and a barrier per block and statistic.
    first = start + lane
    if not IDX64:
        first = first.to(tl.int32)   # 32-bit division is several times cheaper
    m_abs = tl.full([BLOCK], float("-inf"), tl.float64)
    m_rel = m_abs
    m_old = m_abs
    m_eps = m_abs
    m_exc = m_abs
    i_abs = first
    i_rel = first
    i_old = first
    i_eps = first
    i_exc = first
    m_val = tl.zeros([BLOCK], tl.float64)
    m_kern = m_val
    s_sq = m_val
    n_kinf = tl.zeros([BLOCK], tl.int32)
    n_imin = n_kinf
    hist = tl.zeros([_NBINS_C], dtype=tl.int32)
    for it in range(ITERS):
        offs = first + it * BLOCK
        mask = offs < n
        if LAYOUT == 0:     # both row-major contiguous: the flat index is the offset
            ko = offs
            ro = offs
        elif LAYOUT == 1:   # the same strides: one index computation serves both
            ko = _strided(offs, S1, S2, S3, S4, K0, K1, K2, K3, K4)
            ro = ko
        else:
            ko = _strided(offs, S1, S2, S3, S4, K0, K1, K2, K3, K4)
            ro = _strided(offs, S1, S2, S3, S4, R0, R1, R2, R3, R4)
        k_raw = tl.load(kern_ptr + ko, mask=mask, other=0)
        v = tl.load(ref_ptr + ro, mask=mask, other=0).to(tl.float64)
        k = k_raw.to(tl.float64)
        av = tl.abs(v)
        ak = tl.abs(k)
        k_nan = k != k
        v_nan = v != v
        k_inf = ak == float("inf")
        differ = v != k
        bad_inf = (k_inf | (av == float("inf"))) & differ & (k_nan == 0) & (v_nan == 0)
        ok = mask & (k_nan == 0) & (v_nan == 0) & (bad_inf == 0)
        bad = k_nan.to(tl.int32) | (v_nan.to(tl.int32) << 1) | (bad_inf.to(tl.int32) << 2)
        n_kinf += (mask & k_inf).to(tl.int32)
        if IS_INT:   # the caller poisons int outputs with the int32 minimum; counted apart
            n_imin += (mask & (k_raw == INT_MIN)).to(tl.int32)
        # Where ok and differ, both are finite (a differing infinity is bad_inf); zero the
        # rest first so that inf - inf is never computed. Lanes past the end get d = 0 and
        # excess = -inf, so they never beat a real element.
        cmp = ok & differ
        d = tl.abs(tl.where(cmp, v, 0.0) - tl.where(cmp, k, 0.0))
        m_abs, i_abs = _lane_max(d, offs, m_abs, i_abs)
        s_sq += d * d
        m_kern = tl.maximum(m_kern, tl.where(ok & (ak < float("inf")), ak, 0.0))
        avf = tl.where(ok & (av < float("inf")), av, 0.0)
        m_val = tl.maximum(m_val, avf)
        excess = tl.where(ok, d - rtol * avf, float("-inf"))
        m_exc, i_exc = _lane_max(excess, offs, m_exc, i_exc)
        ulps = _ulps(d, avf, IS_INT, MANT, EMIN)
        m_eps, i_eps = _lane_max(ulps, offs, m_eps, i_eps)
        # Bucket = 0 for an exact match, else 1 + the number of edges <= the value.
        eb = tl.zeros([BLOCK], dtype=tl.int32)
        for j in tl.static_range(_EPS_EDGES_C):
            eb += (ulps >= tl.load(c_ptr + 2 + _REL_EDGES_C + j)).to(tl.int32)
        eb = tl.where(ulps > 0, eb + 1, 0)
        pos = avf > 0
        rel = tl.where(pos, d / tl.where(pos, avf, 1.0), 0.0)
        m_rel, i_rel = _lane_max(rel, offs, m_rel, i_rel)
        in_old = ok & (av > floor)
        rel_old = tl.where(in_old, rel, 0.0)
        m_old, i_old = _lane_max(rel_old, offs, m_old, i_old)
        rb = tl.zeros([BLOCK], dtype=tl.int32)
        for j in tl.static_range(_REL_EDGES_C):
            rb += (rel_old >= tl.load(c_ptr + 2 + j)).to(tl.int32)
        rb = tl.where(in_old, tl.where(rel_old > 0, rb + 1, 0), _RB_OUT_C)
        code = tl.where(ok, eb * _RB_SPAN_C + rb, tl.where(mask, _BAD_BASE_C + bad, _NBINS_C - 1))
        hist += tl.histogram(code, _NBINS_C)

    row = part_ptr + pid.to(tl.int64) * PCOLS
    _store_first_max(row, 0, m_abs, i_abs)
    _store_first_max(row, 1, m_rel, i_rel)
    _store_first_max(row, 2, m_old, i_old)
    _store_first_max(row, 3, m_eps, i_eps)
    _store_first_max(row, 4, m_exc, i_exc)
    tl.store(row + 10, tl.max(m_val, axis=0))
    tl.store(row + 11, tl.max(m_kern, axis=0))
    tl.store(row + 12, tl.sum(s_sq, axis=0))
    tl.store(row + 13, tl.sum(n_kinf, axis=0).to(tl.float64))
    tl.store(row + 14, tl.sum(n_imin, axis=0).to(tl.float64))
    tl.store(hist_ptr + pid.to(tl.int64) * _NBINS_C + tl.arange(0, _NBINS_C), hist)


def _padded(t: torch.Tensor) -> tuple[list[int], list[int]]:
    pad = MAX_DIMS - t.dim()
    return [1] * pad + list(t.shape), [0] * pad + list(t.stride())


def _row_major(shape: list[int]) -> list[int]:
    strides, s = [], 1
    for size in reversed(shape):
        strides.append(s)
        s *= size
    return strides[::-1]


def _span(t: torch.Tensor) -> int:
    """One past the largest element offset of t."""
    return 1 + sum((size - 1) * abs(st) for size, st in zip(t.shape, t.stride()))


def _decode(hist: list[int]) -> dict:
    """The counts of verify's columns from the joint histogram (see the module docstring)."""
    tot = {f"rel_h{b}": 0 for b in range(REL_BUCKETS)}
    tot.update({f"eps_h{b}": 0 for b in range(EPS_BUCKETS)})
    tot.update(n_ok=0, exact=0, old_excluded=0, kern_nan=0, ref_nan=0, bad_inf=0)
    for code, count in enumerate(hist[:BAD_BASE + 8]):
        if code < BAD_BASE + 1:
            eb, rb = divmod(code, RB_SPAN)
            tot["n_ok"] += count
            tot[f"eps_h{eb}"] += count
            tot["exact"] += count if eb == 0 else 0
            if rb == RB_OUT:
                tot["old_excluded"] += count
            else:
                tot[f"rel_h{rb}"] += count
        else:
            bits = code - BAD_BASE
            for bit, name in enumerate(("kern_nan", "ref_nan", "bad_inf")):
                if bits >> bit & 1:
                    tot[name] += count
    return tot


def device_totals(kern: torch.Tensor, ref: torch.Tensor, consts: torch.Tensor, *, is_int: bool,
                  mantissa: int, emin: int) -> tuple[dict, dict]:
    """Totals of verify's columns, and the flat index of the first worst element of each
    WORST_COLUMNS maximum, for two tensors of one shape on one device."""
    n = kern.numel()
    assert kern.dim() <= MAX_DIMS and kern.shape == ref.shape and n > 0
    iters = ITERS if n > MIN_PROGRAMS * ITERS * BLOCK else 1   # small tensors: more, shorter programs
    progs = triton.cdiv(n, BLOCK * iters)
    parts = torch.empty((progs, PCOLS), dtype=torch.float64, device=kern.device)
    hist = torch.empty((progs, NBINS), dtype=torch.int32, device=kern.device)
    shape, ks = _padded(kern)
    _, rs = _padded(ref)
    rows = _row_major(shape)
    layout = 0 if ks == rows and rs == rows else 1 if ks == rs else 2
    idx64 = max(n, _span(kern), _span(ref)) >= 2 ** 31
    verify_stats_kernel[(progs,)](kern, ref, consts, parts, hist, n, *shape[1:], *ks, *rs,
                                  LAYOUT=layout, IDX64=idx64, IS_INT=is_int, MANT=mantissa,
                                  EMIN=emin, INT_MIN=-2 ** 31, PCOLS=PCOLS, BLOCK=BLOCK,
                                  ITERS=iters, **COMPILE_OPTIONS)
    nw = len(WORST_COLUMNS)
    maxima = torch.cat([parts[:, :nw], parts[:, 2 * nw:2 * nw + 2]], dim=1).amax(0)
    # The first worst element: the smallest index among the rows that reach the maximum.
    first = torch.where(parts[:, :nw] == maxima[:nw], parts[:, nw:2 * nw],
                        float("inf")).amin(0)
    sums = parts[:, 2 * nw + 2:].sum(0)
    counts = hist.sum(0, dtype=torch.int64).to(torch.float64)
    host = torch.cat([maxima, first, sums, counts]).tolist()
    nm = len(MAX_COLUMNS)
    tot = dict(zip(MAX_COLUMNS, host[:nm]))
    at = {col: int(i) for col, i in zip(WORST_COLUMNS, host[nm:nm + nw])}
    tot.update(zip(SUM_COLUMNS, host[nm + nw:nm + nw + len(SUM_COLUMNS)]))
    tot.update(_decode([int(c) for c in host[nm + nw + len(SUM_COLUMNS):]]))
    return tot, at

"""The verifier's statistics on the device: one fused pass, per-block partials.

Each program reads BLOCK elements of the kernel output and of the reference
(any strides, up to 5 dimensions, logical row-major order) and writes one row
of COLUMNS to a float64 buffer: its maxima, its sum of squared differences and
its counts. The caller reduces the rows on the device and copies a few numbers
back. Per-block rows instead of atomics: the sums come out in a fixed order
(the same result on every run), every count is exact in float64, and the rows
also tell which block holds the first worst or non-finite element.

The element-wise definitions must match verify._elementwise exactly (tests
check it): same comparisons, same float64 operations.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

# consts buffer: [rel_old floor, rtol, 7 relDiff_old edges, 4 epsilonDiff edges]
N_REL_EDGES = 7
N_EPS_EDGES = 4
REL_BUCKETS = N_REL_EDGES + 2   # 0, then one per interval
EPS_BUCKETS = N_EPS_EDGES + 2
COLUMNS = (("sum_sq", "max_abs", "max_rel", "max_rel_old", "max_eps", "max_excess", "max_val",
            "max_kern", "n_ok", "exact", "kern_nan", "ref_nan", "bad_inf", "kern_inf", "int_min",
            "old_excluded")
           + tuple(f"rel_h{i}" for i in range(REL_BUCKETS))
           + tuple(f"eps_h{i}" for i in range(EPS_BUCKETS)))
NCOL = len(COLUMNS)
BLOCK = 1024
MAX_DIMS = 5
# Compiled kernels may read module globals only when they are constexpr.
_REL_EDGES_C = tl.constexpr(N_REL_EDGES)
_EPS_EDGES_C = tl.constexpr(N_EPS_EDGES)
_REL_BUCKETS_C = tl.constexpr(REL_BUCKETS)
_EPS_BUCKETS_C = tl.constexpr(EPS_BUCKETS)


@triton.jit
def _store(row_ptr, col: tl.constexpr, value):
    tl.store(row_ptr + col, value.to(tl.float64))


@triton.jit
def _count(row_ptr, col: tl.constexpr, cond):
    tl.store(row_ptr + col, tl.sum(cond.to(tl.float64), axis=0))


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
    eps = ((e - MANT + 1023) << 52).to(tl.float64, bitcast=True)
    return d / eps


@triton.jit
def verify_stats_kernel(kern_ptr, ref_ptr, c_ptr, part_ptr, n,
                        S1, S2, S3, S4, K0, K1, K2, K3, K4, R0, R1, R2, R3, R4,
                        IS_INT: tl.constexpr, MANT: tl.constexpr, EMIN: tl.constexpr,
                        INT_MIN: tl.constexpr, NCOL: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    k = tl.load(kern_ptr + _strided(offs, S1, S2, S3, S4, K0, K1, K2, K3, K4), mask=mask, other=0)
    v = tl.load(ref_ptr + _strided(offs, S1, S2, S3, S4, R0, R1, R2, R3, R4), mask=mask, other=0)
    row = part_ptr + pid.to(tl.int64) * NCOL
    # The caller poisons int outputs with the int32 minimum; count it apart (for a message).
    if IS_INT:
        _count(row, 14, mask & (k == INT_MIN))
    else:
        tl.store(row + 14, 0.0)
    k = k.to(tl.float64)
    v = v.to(tl.float64)
    av = tl.abs(v)
    ak = tl.abs(k)
    k_nan = k != k
    v_nan = v != v
    k_inf = ak == float("inf")
    differ = v != k
    bad_inf = (k_inf | (av == float("inf"))) & differ & (k_nan == 0) & (v_nan == 0)
    ok = mask & (k_nan == 0) & (v_nan == 0) & (bad_inf == 0)
    # Where ok and differ, both are finite (a differing infinity is bad_inf); zero the
    # rest first so that inf - inf is never computed.
    cmp = ok & differ
    d = tl.abs(tl.where(cmp, v, 0.0) - tl.where(cmp, k, 0.0))
    avf = tl.where(ok & (av < float("inf")), av, 0.0)
    akf = tl.where(ok & (ak < float("inf")), ak, 0.0)
    pos = avf > 0
    rel = tl.where(pos, d / tl.where(pos, avf, 1.0), 0.0)
    in_old = ok & (av > tl.load(c_ptr))
    rel_old = tl.where(in_old, rel, 0.0)
    ulps = _ulps(d, avf, IS_INT, MANT, EMIN)
    excess = tl.where(ok, d - tl.load(c_ptr + 1) * avf, float("-inf"))

    _store(row, 0, tl.sum(d * d, axis=0))
    _store(row, 1, tl.max(d, axis=0))
    _store(row, 2, tl.max(rel, axis=0))
    _store(row, 3, tl.max(rel_old, axis=0))
    _store(row, 4, tl.max(ulps, axis=0))
    _store(row, 5, tl.max(excess, axis=0))
    _store(row, 6, tl.max(avf, axis=0))
    _store(row, 7, tl.max(akf, axis=0))
    _count(row, 8, ok)
    _count(row, 9, ok & (differ == 0))
    _count(row, 10, mask & k_nan)
    _count(row, 11, mask & v_nan)
    _count(row, 12, mask & bad_inf)
    _count(row, 13, mask & k_inf)
    _count(row, 15, ok & (in_old == 0))

    # Bucket = 0 for an exact match, else 1 + the number of edges <= the value.
    rb = tl.zeros([BLOCK], dtype=tl.int32)
    for j in tl.static_range(_REL_EDGES_C):
        rb += (rel_old >= tl.load(c_ptr + 2 + j)).to(tl.int32)
    rb = tl.where(rel_old > 0, rb + 1, 0)
    for b in tl.static_range(_REL_BUCKETS_C):
        _count(row, 16 + b, in_old & (rb == b))
    eb = tl.zeros([BLOCK], dtype=tl.int32)
    for j in tl.static_range(_EPS_EDGES_C):
        eb += (ulps >= tl.load(c_ptr + 2 + _REL_EDGES_C + j)).to(tl.int32)
    eb = tl.where(ulps > 0, eb + 1, 0)
    for b in tl.static_range(_EPS_BUCKETS_C):
        _count(row, 16 + _REL_BUCKETS_C + b, ok & (eb == b))


def _padded(t: torch.Tensor) -> tuple[list[int], list[int]]:
    pad = MAX_DIMS - t.dim()
    return [1] * pad + list(t.shape), [0] * pad + list(t.stride())


def device_partials(kern: torch.Tensor, ref: torch.Tensor, consts: torch.Tensor, *, is_int: bool,
                    mantissa: int, emin: int) -> torch.Tensor:
    """Rows of COLUMNS, one per block of BLOCK elements, as a float64 tensor on kern's device."""
    n = kern.numel()
    assert kern.dim() <= MAX_DIMS and kern.shape == ref.shape and n > 0
    nblocks = triton.cdiv(n, BLOCK)
    parts = torch.empty((nblocks, NCOL), dtype=torch.float64, device=kern.device)
    shape, ks = _padded(kern)
    _, rs = _padded(ref)
    # No FMA contraction: d - rtol*|val| must round as the CPU path rounds it.
    verify_stats_kernel[(nblocks,)](kern, ref, consts, parts, n, *shape[1:], *ks, *rs,
                                    IS_INT=is_int, MANT=mantissa, EMIN=emin,
                                    INT_MIN=-2 ** 31, NCOL=NCOL, BLOCK=BLOCK,
                                    enable_fp_fusion=False)
    return parts

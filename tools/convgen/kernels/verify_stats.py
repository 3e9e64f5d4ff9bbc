"""The verifier's statistics on the device: one fused pass, a few hundred bytes back.

Kernel 1 (`verify_stats_kernel`): each program reads ITERS tiles of ROWS x VEC
elements of the kernel output and of the reference (any strides, up to 5
dimensions, logical row-major order; a thread owns one row of VEC contiguous
elements, so its reductions stay inside the thread), and writes one row
of PCOLS float64 values: seven maxima, the sums of squared differences and of the two
signed errors of the bias check, and the counts of 15 predicates. Kernel 2 (`finish_kernel`) reduces those rows in a fixed
order (the same result on every run) and finds the worst elements; kernel 3
(`worst_values_kernel`) reads val and kern there; `device_totals` copies back one
vector.

What makes it fast (docs/verify-benchmark.md has the measurements):
* It assumes every element is finite on both sides. A NaN or an infinity makes the
  sum of squared differences non-finite; `device_totals` then returns None and the
  caller runs the exact chunked pass, whose rules for non-finite values are the
  definitions. Such outputs fail anyway, so their speed does not matter.
* No index is carried per element. Kernel 2 rescans, for each worst-element
  maximum, only the first program that reached it.
* Histogram buckets are counts of threshold predicates (how many elements have
  ulps >= 2.5, ...), packed three to an int32 register in 10-bit fields, so
  each costs a compare, a select and an add; no atomics, no barriers. Bucket
  counts are differences of those counts (`_decode`).

The element-wise definitions must match verify._elementwise exactly (tests check
it): same comparisons, same float64 operations, no FMA contraction.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from convgen.tolerance import EPS_EDGES as _EPS
from convgen.tolerance import REL_EDGES as _REL

REL_EDGES = len(_REL)   # bucket edges of the two histograms (tolerance.py holds the values)
EPS_EDGES = len(_EPS)
# Predicates counted per program, in this order (10-bit fields, three per int32 word):
#   d > 0 (not exact), ulps >= each EPS edge, |val| > floor (in relDiff_old),
#   rel_old > 0, rel_old >= each REL edge, kern == int32 minimum (int outputs only)
N_PRED = 1 + EPS_EDGES + 2 + REL_EDGES + 1
FIELD_BITS = 10
# Columns of a program's row: the maxima of WORST_COLUMNS (whose first elements kernel 2
# finds) and of the two plain ones, the sum of squares, the predicate counts.
WORST_COLUMNS = ("max_abs", "max_rel", "max_rel_old", "max_eps", "max_excess")
MAX_COLUMNS = WORST_COLUMNS + ("max_val", "max_kern")
SUM_COLUMNS = ("sum_sq", "sum_sbias", "sum_mbias")
PCOLS = len(MAX_COLUMNS) + len(SUM_COLUMNS) + N_PRED
SUM_COL = len(MAX_COLUMNS)            # the first summed column
ROWS = 128        # one row per thread with 4 warps
ITERS = 64
MAX_VEC = 4       # 4 x fp16 per thread-row: fewer registers beat 16-byte loads on an H100
STAGES = 3        # loads in flight per thread (Triton's software pipeliner)
MIN_PROGRAMS = 264  # two per SM of an H100; smaller tensors get one tile per program
MAX_DIMS = 5
# No FMA contraction: d - rtol*|val| must round as the CPU path rounds it.
COMPILE_OPTIONS = {"enable_fp_fusion": False, "num_warps": 4}
# Compiled kernels may read module globals only when they are constexpr.
_FIELD_C = tl.constexpr(FIELD_BITS)
_ONE_C = tl.constexpr(1)
_REL_C = tl.constexpr(REL_EDGES)
_SUM_COL_C = tl.constexpr(SUM_COL)


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
def _load(kern_ptr, ref_ptr, offs, n, S1, S2, S3, S4, K0, K1, K2, K3, K4, R0, R1, R2, R3, R4,
          LAYOUT: tl.constexpr, MASKED: tl.constexpr):
    """The kernel and reference values at logical flat indices offs."""
    if LAYOUT == 0:     # both row-major contiguous: the flat index is the offset
        ko = offs
        ro = offs
    elif LAYOUT == 1:   # the same strides: one index computation serves both
        ko = _strided(offs, S1, S2, S3, S4, K0, K1, K2, K3, K4)
        ro = ko
    else:
        ko = _strided(offs, S1, S2, S3, S4, K0, K1, K2, K3, K4)
        ro = _strided(offs, S1, S2, S3, S4, R0, R1, R2, R3, R4)
    if MASKED:
        mask = offs < n
        return tl.load(kern_ptr + ko, mask=mask, other=0), tl.load(ref_ptr + ro, mask=mask, other=0)
    return tl.load(kern_ptr + ko), tl.load(ref_ptr + ro)


@triton.jit
def _elementwise(k_raw, v_raw, rtol, IS_INT: tl.constexpr, MANT: tl.constexpr,
                 EMIN: tl.constexpr):
    """verify._elementwise for finite values: d, |val|, |kern|, excess, ulps, rel, and the
    two signed errors of the bias check (clipped ulps of kern - val and of |kern| - |val|)."""
    k = k_raw.to(tl.float64)
    v = v_raw.to(tl.float64)
    d = tl.abs(v - k)
    av = tl.abs(v)
    excess = d - rtol * av
    ak = tl.abs(k)
    if IS_INT:
        ulps = d
        sb = k - v
        mb = ak - av
    else:
        # eps(|val|) = 2^(max(e, EMIN) - MANT); x * 2^(MANT - e) is x / eps exactly (a power
        # of two), without float64 division.
        e = ((av.to(tl.int64, bitcast=True) >> 52) & 0x7FF) - 1023
        e = tl.maximum(e, EMIN)
        inv_eps = ((MANT - e + 1023) << 52).to(tl.float64, bitcast=True)
        ulps = d * inv_eps
        sb = (k - v) * inv_eps
        mb = (ak - av) * inv_eps
    sb = tl.minimum(tl.maximum(sb, -1.0), 1.0)
    mb = tl.minimum(tl.maximum(mb, -1.0), 1.0)
    # d / |val| where both are positive, else 0 (as verify's where(|val| > 0, d / |val|, 0)):
    # dividing 1 by 1 instead keeps 0 / |val| off the float64 division's slow path (a call
    # taken for a zero dividend: every exact element, 4x the whole kernel's time otherwise)
    div = (d > 0) & (av > 0)
    rel = tl.where(div, tl.where(div, d, 1.0) / tl.where(div, av, 1.0), 0.0)
    return d, av, ak, excess, ulps, rel, sb, mb


@triton.jit
def _greater(a, b):
    return tl.where(a > b, a, b)


@triton.jit
def _fold_max(m, x):
    """max(m, the column maxima of x), as compare and select: no NaN handling needed (a NaN
    sends the whole comparison to the chunked pass)."""
    return _greater(m, tl.reduce(x, 0, _greater))


@triton.jit
def _field(p, j: tl.constexpr):
    """Predicate p as an increment of field j of its word."""
    return tl.where(p, _ONE_C << (_FIELD_C * (j % 3)), 0)


@triton.jit
def _tile(kern_ptr, ref_ptr, c_ptr, offs, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
          R0, R1, R2, R3, R4, m_abs, m_rel, m_old, m_eps, m_exc, m_val, m_kern, s_sq, s_sb, s_mb,
          w0, w1, w2, w3, w4, LAYOUT: tl.constexpr, MASKED: tl.constexpr,
          IS_INT: tl.constexpr, MANT: tl.constexpr, EMIN: tl.constexpr,
          INT_MIN: tl.constexpr):
    """Fold one tile into the per-row state; every reduction is along a thread's own row."""
    floor = tl.load(c_ptr)
    rtol = tl.load(c_ptr + 1)
    k_raw, v_raw = _load(kern_ptr, ref_ptr, offs, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
                         R0, R1, R2, R3, R4, LAYOUT, MASKED)
    d, av, ak, excess, ulps, rel, sb, mb = _elementwise(k_raw, v_raw, rtol, IS_INT, MANT, EMIN)
    in_old = av > floor
    rel_old = tl.where(in_old, rel, 0.0)
    if MASKED:   # lanes past the end: d = 0 and so on never beat a real element, but excess can
        excess = tl.where(offs < n, excess, float("-inf"))
    m_abs = _fold_max(m_abs, d)
    m_rel = _fold_max(m_rel, rel)
    m_old = _fold_max(m_old, rel_old)
    m_eps = _fold_max(m_eps, ulps)
    m_exc = _fold_max(m_exc, excess)
    m_val = _fold_max(m_val, av)
    m_kern = _fold_max(m_kern, ak)
    s_sq += tl.sum(d * d, axis=0)
    s_sb += tl.sum(sb, axis=0)   # masked lanes load 0 on both sides: they add 0
    s_mb += tl.sum(mb, axis=0)
    # Predicates as in the module docstring; c_ptr holds floor, rtol, REL edges, EPS edges.
    w0 += tl.sum(_field(d > 0, 0) + _field(ulps >= tl.load(c_ptr + 2 + _REL_C), 1)
                 + _field(ulps >= tl.load(c_ptr + 3 + _REL_C), 2), axis=0)
    w1 += tl.sum(_field(ulps >= tl.load(c_ptr + 4 + _REL_C), 3)
                 + _field(ulps >= tl.load(c_ptr + 5 + _REL_C), 4) + _field(in_old, 5), axis=0)
    w2 += tl.sum(_field(rel_old > 0, 6) + _field(rel_old >= tl.load(c_ptr + 2), 7)
                 + _field(rel_old >= tl.load(c_ptr + 3), 8), axis=0)
    w3 += tl.sum(_field(rel_old >= tl.load(c_ptr + 4), 9) + _field(rel_old >= tl.load(c_ptr + 5), 10)
                 + _field(rel_old >= tl.load(c_ptr + 6), 11), axis=0)
    w4_inc = _field(rel_old >= tl.load(c_ptr + 7), 12) + _field(rel_old >= tl.load(c_ptr + 8), 13)
    if IS_INT:   # the caller poisons int outputs with the int32 minimum; counted apart
        w4_inc += _field(k_raw == INT_MIN, 14)
    w4 += tl.sum(w4_inc, axis=0)
    return m_abs, m_rel, m_old, m_eps, m_exc, m_val, m_kern, s_sq, s_sb, s_mb, w0, w1, w2, w3, w4


@triton.jit
def _rows_state(kern_ptr, ref_ptr, c_ptr, first, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
                R0, R1, R2, R3, R4, LAYOUT: tl.constexpr, MASKED: tl.constexpr,
                IS_INT: tl.constexpr, MANT: tl.constexpr, EMIN: tl.constexpr,
                INT_MIN: tl.constexpr, ROWS: tl.constexpr, VEC: tl.constexpr,
                ITERS: tl.constexpr, STAGES: tl.constexpr):
    """One program's per-row state after its ITERS tiles (MASKED: the last program only)."""
    m_abs = tl.full([ROWS], float("-inf"), tl.float64)
    m_rel = m_abs
    m_old = m_abs
    m_eps = m_abs
    m_exc = m_abs
    m_val = m_abs
    m_kern = m_abs
    s_sq = tl.zeros([ROWS], tl.float64)
    s_sb = s_sq
    s_mb = s_sq
    w0 = tl.zeros([ROWS], tl.int32)
    w1 = w0
    w2 = w0
    w3 = w0
    w4 = w0
    for it in tl.range(ITERS, num_stages=STAGES):
        (m_abs, m_rel, m_old, m_eps, m_exc, m_val, m_kern, s_sq, s_sb, s_mb,
         w0, w1, w2, w3, w4) = _tile(
            kern_ptr, ref_ptr, c_ptr, first + it * (ROWS * VEC), n, S1, S2, S3, S4,
            K0, K1, K2, K3, K4, R0, R1, R2, R3, R4, m_abs, m_rel, m_old, m_eps, m_exc,
            m_val, m_kern, s_sq, s_sb, s_mb, w0, w1, w2, w3, w4, LAYOUT, MASKED, IS_INT, MANT,
            EMIN, INT_MIN)
    return m_abs, m_rel, m_old, m_eps, m_exc, m_val, m_kern, s_sq, s_sb, s_mb, w0, w1, w2, w3, w4


@triton.jit
def _store_fields(col, progs, w, j0: tl.constexpr):
    """The three 10-bit fields of word w (one per row), summed over rows, to columns j0.."""
    mask = (_ONE_C << _FIELD_C) - 1
    tl.store(col + j0 * progs, tl.sum(w & mask, axis=0).to(tl.float64))
    tl.store(col + (j0 + 1) * progs, tl.sum((w >> _FIELD_C) & mask, axis=0).to(tl.float64))
    tl.store(col + (j0 + 2) * progs, tl.sum((w >> (2 * _FIELD_C)) & mask, axis=0).to(tl.float64))


# The pair's sizes and strides (and finish_kernel's program count) change with every
# problem, and Triton compiles a kernel for each pattern of them that are 1 or multiples of
# 16: on the GPU PR set these three kernels were 276 of its 555 compiles, 52 without. The
# kernels' code is the same either way (the sizes and strides index the strided path's
# gathers, which no alignment widens); the launches cost more host time (docs/suite-speed.md).
SHAPE_ARGS = ("S1", "S2", "S3", "S4", "K0", "K1", "K2", "K3", "K4", "R0", "R1", "R2", "R3", "R4")


@triton.jit(do_not_specialize=SHAPE_ARGS)
def verify_stats_kernel(kern_ptr, ref_ptr, c_ptr, part_ptr, out_ptr, n,
                        S1, S2, S3, S4, K0, K1, K2, K3, K4, R0, R1, R2, R3, R4,
                        LAYOUT: tl.constexpr, IDX64: tl.constexpr,
                        IS_INT: tl.constexpr, MANT: tl.constexpr, EMIN: tl.constexpr,
                        INT_MIN: tl.constexpr, NW: tl.constexpr,
                        ROWS: tl.constexpr, VEC: tl.constexpr, ITERS: tl.constexpr,
                        STAGES: tl.constexpr):
    pid = tl.program_id(0)
    start = pid.to(tl.int64) * (ROWS * VEC * ITERS)
    # A thread's row: VEC consecutive flat indices (one vector load when contiguous).
    first = start + tl.arange(0, ROWS)[None, :] * VEC + tl.arange(0, VEC)[:, None]
    if not IDX64:
        first = first.to(tl.int32)   # 32-bit division is several times cheaper
    if start + ROWS * VEC * ITERS <= n:   # every program but the last: no masks
        (m_abs, m_rel, m_old, m_eps, m_exc, m_val, m_kern, s_sq, s_sb, s_mb,
         w0, w1, w2, w3, w4) = _rows_state(
            kern_ptr, ref_ptr, c_ptr, first, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
            R0, R1, R2, R3, R4, LAYOUT, False, IS_INT, MANT, EMIN, INT_MIN, ROWS, VEC, ITERS, STAGES)
    else:
        (m_abs, m_rel, m_old, m_eps, m_exc, m_val, m_kern, s_sq, s_sb, s_mb,
         w0, w1, w2, w3, w4) = _rows_state(
            kern_ptr, ref_ptr, c_ptr, first, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
            R0, R1, R2, R3, R4, LAYOUT, True, IS_INT, MANT, EMIN, INT_MIN, ROWS, VEC, ITERS, STAGES)
    if pid == 0:   # finish_kernel folds its first indices into these with atomic minima
        tl.store(out_ptr + tl.arange(0, 8), tl.zeros([8], tl.int64) + n + 1,
                 mask=tl.arange(0, 8) < NW)
    # column-major (column c of program pid at c * programs + pid): finish_kernel reads
    # each column with coalesced loads
    col = part_ptr + pid
    progs = tl.num_programs(0)
    tl.store(col + 0 * progs, tl.max(m_abs, axis=0))
    tl.store(col + 1 * progs, tl.max(m_rel, axis=0))
    tl.store(col + 2 * progs, tl.max(m_old, axis=0))
    tl.store(col + 3 * progs, tl.max(m_eps, axis=0))
    tl.store(col + 4 * progs, tl.max(m_exc, axis=0))
    tl.store(col + 5 * progs, tl.max(m_val, axis=0))
    tl.store(col + 6 * progs, tl.max(m_kern, axis=0))
    tl.store(col + 7 * progs, tl.sum(s_sq, axis=0))
    tl.store(col + 8 * progs, tl.sum(s_sb, axis=0))
    tl.store(col + 9 * progs, tl.sum(s_mb, axis=0))
    _store_fields(col, progs, w0, 10)
    _store_fields(col, progs, w1, 13)
    _store_fields(col, progs, w2, 16)
    _store_fields(col, progs, w3, 19)
    _store_fields(col, progs, w4, 22)


@triton.jit
def _column_max(part_ptr, c, progs, RBLOCK: tl.constexpr):
    """Column c's maximum over kernel 1's programs, and the first program that reaches it."""
    r = tl.arange(0, RBLOCK)
    best = tl.full([RBLOCK], float("-inf"), tl.float64)
    first = tl.zeros([RBLOCK], tl.int32) + progs
    for r0 in range(0, progs, RBLOCK):
        x = tl.load(part_ptr + c.to(tl.int64) * progs + r0 + r, mask=r0 + r < progs,
                    other=float("-inf"))
        take = x > best   # strictly greater: a lane keeps its first program
        best = tl.where(take, x, best)
        first = tl.where(take, r0 + r, first)
    m = tl.max(best, axis=0)
    return m, tl.min(tl.where(best == m, first, progs), axis=0)


@triton.jit
def _column_sum(part_ptr, c, progs, RBLOCK: tl.constexpr):
    r = tl.arange(0, RBLOCK)
    acc = tl.zeros([RBLOCK], tl.float64)
    for r0 in range(0, progs, RBLOCK):
        acc += tl.load(part_ptr + c.to(tl.int64) * progs + r0 + r, mask=r0 + r < progs, other=0.0)
    return tl.sum(acc, axis=0)


@triton.jit(do_not_specialize=("progs",) + SHAPE_ARGS)
def finish_kernel(kern_ptr, ref_ptr, c_ptr, part_ptr, out_ptr, progs, n,
                  S1, S2, S3, S4, K0, K1, K2, K3, K4, R0, R1, R2, R3, R4,
                  LAYOUT: tl.constexpr, IDX64: tl.constexpr, IS_INT: tl.constexpr,
                  MANT: tl.constexpr, EMIN: tl.constexpr, PCOLS: tl.constexpr,
                  NW: tl.constexpr, ROWS: tl.constexpr, VEC: tl.constexpr,
                  ITERS: tl.constexpr, RBLOCK: tl.constexpr):
    """Program (j, t), j a worst column, t < ITERS: the smallest flat index in tile t of the
    first of kernel 1's programs that reached column j's maximum whose value equals that
    maximum, folded into out[j] with an atomic minimum (out[j] starts past the end).
    Program number f = j * T + t (T = programs along axis 1) < PCOLS also writes column f's
    total, its maximum or its sum, to out[NW + f] as float64 bits: fixed-order reductions,
    so the same numbers on every run."""
    j = tl.program_id(0)
    t = tl.program_id(1)
    if t < ITERS:
        target, p = _column_max(part_ptr, j, progs, RBLOCK)
        rtol = tl.load(c_ptr + 1)
        floor = tl.load(c_ptr)
        # the tile's flat indices: kernel 1's `first + it * (ROWS * VEC)` for program p
        offs = p.to(tl.int64) * (ROWS * VEC * ITERS) + t * (ROWS * VEC) + tl.arange(0, ROWS * VEC)
        if not IDX64:
            offs = offs.to(tl.int32)
        k_raw, v_raw = _load(kern_ptr, ref_ptr, offs, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
                             R0, R1, R2, R3, R4, LAYOUT, True)
        d, av, ak, excess, ulps, rel, sb, mb = _elementwise(k_raw, v_raw, rtol, IS_INT, MANT, EMIN)
        x = tl.where(j == 0, d, tl.where(j == 1, rel, tl.where(j == 2, tl.where(av > floor, rel, 0.0),
                     tl.where(j == 3, ulps, excess))))
        big = tl.zeros([], tl.int64) + n + 1   # n may arrive as a constant (Triton specializes 1)
        at = tl.min(tl.where((x == target) & (offs < n), offs.to(tl.int64), big), axis=0)
        if at < big:
            tl.atomic_min(out_ptr + j, at)
    f = j * tl.num_programs(1) + t
    if f < _SUM_COL_C:
        m, _ = _column_max(part_ptr, f, progs, RBLOCK)
        tl.store(out_ptr + NW + f, m.to(tl.int64, bitcast=True))
    elif f < PCOLS:
        tl.store(out_ptr + NW + f, _column_sum(part_ptr, f, progs, RBLOCK).to(tl.int64, bitcast=True))


@triton.jit(do_not_specialize=SHAPE_ARGS)
def worst_values_kernel(kern_ptr, ref_ptr, out_ptr, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
                        R0, R1, R2, R3, R4, LAYOUT: tl.constexpr, IDX64: tl.constexpr,
                        NW: tl.constexpr, PCOLS: tl.constexpr):
    """val and kern at each worst element found by finish_kernel, as float64 bits after the
    columns: the values verify reports, without another copy back."""
    j = tl.arange(0, 8)
    at = tl.load(out_ptr + j, mask=j < NW, other=0)
    at = tl.where(at < n, at, 0)   # none found (a value was not finite): anything in range
    if not IDX64:
        at = at.to(tl.int32)
    k_raw, v_raw = _load(kern_ptr, ref_ptr, at, n, S1, S2, S3, S4, K0, K1, K2, K3, K4,
                         R0, R1, R2, R3, R4, LAYOUT, True)
    base = out_ptr + NW + PCOLS
    tl.store(base + 2 * j, v_raw.to(tl.float64).to(tl.int64, bitcast=True), mask=j < NW)
    tl.store(base + 2 * j + 1, k_raw.to(tl.float64).to(tl.int64, bitcast=True), mask=j < NW)


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


def _decode(counts: list[float], n: int) -> dict:
    """verify's count columns from the predicate counts (see the module docstring); every
    element is finite, so every element is ok."""
    c = [int(x) for x in counts]
    not_exact, eps_ge, in_old, rel_pos, rel_ge = c[0], c[1:5], c[5], c[6], c[7:14]
    tot = {"n_ok": n, "exact": n - not_exact, "old_excluded": n - in_old, "kern_nan": 0,
           "ref_nan": 0, "ref_inf": 0, "bad_inf": 0, "kern_inf": 0, "int_min": c[14]}
    eps = [n, not_exact] + eps_ge        # cumulative: bucket b = eps[b] - eps[b + 1]
    tot.update({f"eps_h{b}": eps[b] - (eps[b + 1] if b + 1 < len(eps) else 0)
                for b in range(len(eps))})
    rel = [in_old, rel_pos] + rel_ge
    tot.update({f"rel_h{b}": rel[b] - (rel[b + 1] if b + 1 < len(rel) else 0)
                for b in range(len(rel))})
    return tot


def vec_for(kern: torch.Tensor) -> int:
    """Elements per thread-row: MAX_VEC, or fewer where that would pass 16 bytes of the
    kernel output."""
    return max(1, min(MAX_VEC, 16 // kern.element_size()))


def device_totals(kern: torch.Tensor, ref: torch.Tensor, consts: torch.Tensor, *, is_int: bool,
                  mantissa: int, emin: int):
    """Totals of verify's columns, the flat index of the first worst element of each
    WORST_COLUMNS maximum and (val, kern) there, for two tensors of one shape on one
    device; None when some element is not finite (the caller runs the exact chunked pass
    instead)."""
    n = kern.numel()
    assert kern.dim() <= MAX_DIMS and kern.shape == ref.shape and n > 0
    vec = vec_for(kern)
    iters = ITERS if n > MIN_PROGRAMS * ITERS * ROWS * vec else 1   # small tensors: more programs
    assert iters * vec < 1 << FIELD_BITS, "a predicate count would overflow its field"
    progs = triton.cdiv(n, ROWS * vec * iters)
    parts = torch.empty((PCOLS, progs), dtype=torch.float64, device=kern.device)
    shape, ks = _padded(kern)
    _, rs = _padded(ref)
    rows = _row_major(shape)
    layout = 0 if ks == rows and rs == rows else 1 if ks == rs else 2
    idx64 = max(n, _span(kern), _span(ref)) + ROWS * vec * iters >= 2 ** 31
    geometry = (n, *shape[1:], *ks, *rs)
    common = dict(LAYOUT=layout, IDX64=idx64, IS_INT=is_int, MANT=mantissa, EMIN=emin,
                  ROWS=ROWS, VEC=vec, ITERS=iters, **COMPILE_OPTIONS)
    nw = len(WORST_COLUMNS)
    # out: the first index of each worst column, each column's total, val and kern at each
    # worst element; int64, float64 values as their bits
    out = torch.empty(nw + PCOLS + 2 * nw, dtype=torch.int64, device=kern.device)
    verify_stats_kernel[(progs,)](kern, ref, consts, parts, out, *geometry, INT_MIN=-2 ** 31,
                                  NW=nw, STAGES=STAGES, **common)
    finish_kernel[(nw, max(iters, triton.cdiv(PCOLS, nw)))](
        kern, ref, consts, parts, out, progs, *geometry, PCOLS=PCOLS, NW=nw, RBLOCK=1024, **common)
    worst_values_kernel[(1,)](kern, ref, out, *geometry, LAYOUT=layout, IDX64=idx64, NW=nw,
                              PCOLS=PCOLS, num_warps=1)
    host = out.cpu()   # the one copy back
    at = host[:nw].tolist()
    cols = host[nw:].view(torch.float64).tolist()
    if not abs(cols[SUM_COL]) < float("inf"):   # sum_sq: some value is not finite
        return None
    if not all(0 <= i < n for i in at):
        # No element matched its maximum: kernel 1 and finish_kernel computed a value
        # differently (FMA contraction, say). Never report a wrong element: take the exact pass.
        return None
    tot = dict(zip(MAX_COLUMNS, cols[:SUM_COL]))
    tot.update(zip(SUM_COLUMNS, cols[SUM_COL:SUM_COL + len(SUM_COLUMNS)]))
    tot.update(_decode(cols[SUM_COL + len(SUM_COLUMNS):PCOLS], n))
    pairs = cols[PCOLS:]
    values = {col: (pairs[2 * i], pairs[2 * i + 1]) for i, col in enumerate(WORST_COLUMNS)}
    return tot, dict(zip(WORST_COLUMNS, at)), values

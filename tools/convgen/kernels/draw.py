"""Seeded random inputs drawn where they are used: Philox on the device (or in Triton's
interpreter), the same numbers on every backend for the same seed.

Element i of a tensor takes Philox-4x32-10 counter (i, 0, 0, 0) under the key `seed`
(its low and high 32 bits), as Triton's `tl.randint4x` computes it: the stream does not
depend on the block size, the grid or the device. Of the four words,

    float draws   x = lo + r * (hi - lo), r = (word0 >> 8) * 2^-24 (exact), in fp32
                  with fused multiply-add off (every backend rounds the product, then
                  the sum, as the interpreter's numpy does)
    int draws     x = lo + (word0 * count) >> 32, count = hi - lo + 1 <= 2^32 (integer
                  arithmetic only), as float64
    both signs    x = -x where word1's top bit is set

The kernel writes fp32 (float draws) or float64 (int draws, exact below 2^53); torch
then rounds them to the element type (round to nearest even on every device). `philox`
below is the same generator in numpy: tests/test_inputs_philox.py holds the kernel to it
bit for bit.
"""
from __future__ import annotations

import triton
import triton.language as tl

BLOCK_GPU = 1024
BLOCK_INTERPRETER = 1 << 16   # the interpreter pays per program, not per element
MAX_INT_COUNT = 2**32          # integers a draw may choose from (one 32-bit word)


@triton.jit
def uniform_kernel(out_ptr, numel, seed, lo, span, count,
                   INT: tl.constexpr, BOTH_SIGNS: tl.constexpr, BLOCK: tl.constexpr):
    # element index = Philox counter: 32-bit, as in tl.randint4x with int32 offsets
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    w0, w1, _, _ = tl.randint4x(seed, offs)
    if INT:
        # widened by adding zeros, not with .to(): a GPU launch passes an integer argument
        # equal to 1 as a constant, which has no .to() (integer draws with -rand_min 1, or
        # lo == hi)
        lo64 = lo + tl.zeros([BLOCK], dtype=tl.int64)
        count64 = count + tl.zeros([BLOCK], dtype=tl.uint64)
        x = (lo64 + ((w0.to(tl.uint64) * count64) >> 32).to(tl.int64)).to(tl.float64)
    else:
        r = (w0 >> 8).to(tl.float32) * 5.9604644775390625e-08   # 2^-24: exact
        x = lo + r * span
    if BOTH_SIGNS:
        x = tl.where((w1 >> 31) == 1, -x, x)
    tl.store(out_ptr + offs, x, mask=mask)


def fill_uniform(t, seed: int, lo: float, hi: float, integers: bool, both_signs: bool,
                 interpreter: bool) -> None:
    """Fill the contiguous tensor t (any element type) with draws of [lo, hi] (integers) or
    [lo, hi) (floats), element i from Philox counter i under `seed` (< 2^64)."""
    import torch
    numel = t.numel()
    if integers:
        ilo, ihi = int(round(lo)), int(round(hi))
        lo_arg, span, count = ilo, 0.0, ihi - ilo + 1
        scratch = torch.float64
    else:
        lo_arg, span, count = float(lo), float(hi) - float(lo), 1
        scratch = torch.float32
    direct = t.dtype == scratch
    out = t if direct else torch.empty(numel, dtype=scratch, device=t.device)
    block = min(BLOCK_INTERPRETER, triton.next_power_of_2(numel)) if interpreter else BLOCK_GPU
    # fp32 without contraction, so every backend computes lo + r*span as the interpreter does
    options = {} if interpreter else {"enable_fp_fusion": False}
    uniform_kernel[(triton.cdiv(numel, block),)](out, numel, seed, lo_arg, span, count,
                                                 INT=integers, BOTH_SIGNS=both_signs,
                                                 BLOCK=block, **options)
    if not direct:
        t.view(-1).copy_(out)


def philox(seed: int, counters):
    """Philox-4x32-10 of counters (c, 0, 0, 0) under `seed`, in numpy: (w0, w1, w2, w3)."""
    import numpy as np
    m32 = np.uint64(0xFFFFFFFF)
    c0 = np.asarray(counters, dtype=np.uint64)
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    a, b = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(10):
        p0, p2 = a * c0, b * c2
        c0, c1, c2, c3 = ((p2 >> np.uint64(32)) ^ c1 ^ k0) & m32, p2 & m32, \
            ((p0 >> np.uint64(32)) ^ c3 ^ k1) & m32, p0 & m32
        k0 = (k0 + np.uint64(0x9E3779B9)) & m32
        k1 = (k1 + np.uint64(0xBB67AE85)) & m32
    return c0, c1, c2, c3


def uniform_numpy(numel: int, seed: int, lo: float, hi: float, integers: bool, both_signs: bool):
    """What fill_uniform draws, computed in numpy (float32 or float64 values)."""
    import numpy as np
    w0, w1, _, _ = philox(seed, np.arange(numel, dtype=np.uint64))
    if integers:
        ilo, ihi = int(round(lo)), int(round(hi))
        x = (ilo + ((w0 * np.uint64(ihi - ilo + 1)) >> np.uint64(32)).astype(np.int64)).astype(np.float64)
    else:
        r = (w0 >> np.uint64(8)).astype(np.float32) * np.float32(2.0**-24)
        x = np.float32(lo) + r * np.float32(float(hi) - float(lo))
    if both_signs:
        x = np.where((w1 >> np.uint64(31)) == 1, -x, x)
    return x

"""glibc's rand() after srand(seed), in numpy: the numbers rocmlir-gen's harness draws
on Linux (its runtime calls std::srand and std::rand, conv-validation-wrappers.cpp).

glibc's default generator (TYPE_3) is an additive lagged Fibonacci generator,
r[i] = r[i-3] + r[i-31] mod 2^32, seeded by a Lehmer generator (16807 mod 2^31 - 1) and
run 310 steps before the first output; rand() is r[i] >> 1. srand(0) seeds as 1. Checked
against glibc's own for several seeds in tests/test_rocmlir_semantics.py (srand(1) gives
1804289383, 846930886, 1681692777, ...).

The recurrence is linear mod 2^32, so the next BLOCK values are a fixed BLOCK x 31 integer
matrix times the last 31: one matrix-vector product per block instead of one Python step
per value (a batch-256 input of 51M values took 21 s one by one). uint64 products wrap mod
2^64, which keeps every sum right mod 2^32.
"""
from __future__ import annotations

import numpy as np

RAND_MAX = 2**31 - 1
LAG = 31
BLOCK = 4096
_MASK = np.uint64(0xFFFFFFFF)


def _block_matrix(rows: int) -> np.ndarray:
    """Row j: the coefficients of new value j over the 31 values before the block."""
    m = np.zeros((LAG + rows, LAG), dtype=np.uint64)
    m[:LAG] = np.eye(LAG, dtype=np.uint64)
    for j in range(LAG, LAG + rows):
        m[j] = (m[j - 31] + m[j - 3]) & _MASK
    return m[LAG:]


_MATRIX = None


def _matrix() -> np.ndarray:
    global _MATRIX
    if _MATRIX is None:
        _MATRIX = _block_matrix(BLOCK)
    return _MATRIX


class GlibcRand:
    def __init__(self, seed: int):
        seed &= 0xFFFFFFFF
        seed = seed or 1
        r = [0] * 34
        r[0] = seed
        word = seed - (1 << 32) if seed >= (1 << 31) else seed   # srand's int32 view
        for i in range(1, 31):
            hi, lo = int(word / 127773), word - int(word / 127773) * 127773   # C's / and %
            word = 16807 * lo - 2836 * hi
            if word < 0:
                word += 2147483647
            r[i] = word & 0xFFFFFFFF
        for i in range(31, 34):
            r[i] = r[i - 31]
        for _ in range(310):
            r.append((r[-31] + r[-3]) & 0xFFFFFFFF)
        self._state = np.asarray(r[-LAG:], dtype=np.uint64)   # the last 31 values, oldest first

    def take(self, n: int) -> np.ndarray:
        """The next n values of rand(), as int64."""
        out = np.empty(n, dtype=np.int64)
        m = _matrix()
        s = self._state
        for start in range(0, n, BLOCK):
            rows = min(BLOCK, n - start)
            vals = (m[:rows] @ s) & _MASK
            out[start:start + rows] = (vals >> np.uint64(1)).astype(np.int64)
            s = np.concatenate([s, vals])[-LAG:]
        self._state = s
        return out

"""glibc's rand() after srand(seed), in Python: the numbers rocmlir-gen's harness draws
on Linux (its runtime calls std::srand and std::rand, conv-validation-wrappers.cpp).

glibc's default generator (TYPE_3) is an additive lagged Fibonacci generator,
r[i] = r[i-3] + r[i-31] mod 2^32, seeded by a Lehmer generator (16807 mod 2^31 - 1) and
run 310 steps before the first output; rand() is r[i] >> 1. srand(0) seeds as 1. Checked
against glibc's own for several seeds in tests/test_rocmlir_semantics.py (srand(1) gives
1804289383, 846930886, 1681692777, ...).
"""
from __future__ import annotations

RAND_MAX = 2**31 - 1


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
        self._r = r
        for _ in range(310):
            self._step()

    def _step(self) -> int:
        r = self._r
        v = (r[-31] + r[-3]) & 0xFFFFFFFF
        r.append(v)
        del r[0]
        return v

    def take(self, n: int) -> list[int]:
        """The next n values of rand()."""
        r = self._r
        out = [0] * n
        for i in range(n):
            v = (r[-31] + r[-3]) & 0xFFFFFFFF
            r.append(v)
            out[i] = v >> 1
        del r[:-34]
        return out

"""Seeded input tensors: what `-rand`, `-rand_min/_max`, `-rand_type`, `-rand_side` and
`-rand_both_signs` mean.

`-rand_min 1 -rand_max 3 -rand_both_signs` draws from [-3,-1] and [1,3]: the fp16
study's range away from zero. Both signs keep the cancellation that a real layer
has (same-sign inputs make every product positive, so every sum grows and hides
relative errors); |x| >= 1 keeps subnormals and near-zero outputs rare, which
is where fp16's relative differences blow up without any bug.

Inputs are generated on the CPU from a seed (so the same seed gives the same
data on every device), stored in the tensor's memory layout, and returned as
logical-order views (see problem.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from convgen.errors import ConvgenError
from convgen.problem import ConvProblem

# `-rand fixed`: a short repeating pattern, the same for every run (rocmlir-gen style).
FIXED_PATTERN = (0.5, -1.0, 0.75, 2.0, -0.25)


@dataclass(frozen=True)
class DataSpec:
    mode: str = "random"          # "random", "fixed" or "none" (all ones)
    seed: int = 1
    lo: float | None = None        # None: the type's default range
    hi: float | None = None
    rand_type: str | None = None   # "int" or "float"; None: follows the element type
    side: str = "both"             # "both" or the one tensor that gets random data
    both_signs: bool = False       # draw |x| from [lo, hi], then a random sign

    def describe(self) -> str:
        if self.mode != "random":
            return f"-rand {self.mode}"
        return f"-rand {self.seed}"


def _fill(shape, spec: DataSpec, problem: ConvProblem, salt: int) -> torch.Tensor:
    et = problem.dtype
    if spec.mode == "none":
        return torch.ones(shape, dtype=torch.float64)
    if spec.mode == "fixed":
        numel = 1
        for d in shape:
            numel *= d
        pat = torch.tensor(FIXED_PATTERN, dtype=torch.float64)
        idx = (torch.arange(numel) + salt) % len(FIXED_PATTERN)
        return pat[idx].reshape(shape)
    lo, hi = et.default_rand_range
    lo = lo if spec.lo is None else spec.lo
    hi = hi if spec.hi is None else spec.hi
    rtype = spec.rand_type or ("int" if et.is_int else "float")
    gen = torch.Generator().manual_seed(spec.seed * 1000003 + salt)
    if rtype == "int":
        ilo, ihi = int(round(lo)), int(round(hi))
        return torch.randint(ilo, ihi + 1, shape, generator=gen).to(torch.float64)
    x = torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo
    if spec.both_signs:
        x = torch.where(torch.rand(shape, generator=gen) < 0.5, -x, x)
    return x


def validate(spec: DataSpec, problem: ConvProblem) -> None:
    if spec.mode == "random":
        lo, hi = problem.dtype.default_rand_range
        lo = lo if spec.lo is None else spec.lo
        hi = hi if spec.hi is None else spec.hi
        if lo > hi:
            raise ConvgenError(f"-rand_min {lo} is larger than -rand_max {hi}")
        if spec.both_signs and lo < 0:
            raise ConvgenError(f"-rand_both_signs needs -rand_min >= 0 (the magnitude range), "
                               f"got {lo:g}")
        if problem.dtype.is_int and (lo < -128 or hi > 127):
            raise ConvgenError(f"random range [{lo}, {hi}] does not fit in i8")
        if not problem.dtype.is_int:
            top = torch.finfo(problem.dtype.torch_in).max   # fp8 e4m3: 448, fnuz e4m3: 240
            if max(abs(lo), abs(hi)) > top:
                raise ConvgenError(f"random range [{lo:g}, {hi:g}] does not fit in "
                                   f"{problem.dtype.name} (largest finite value {top:g})")
    if spec.side != "both" and spec.side not in problem.reads:
        raise ConvgenError(
            f"-rand_side {spec.side} is not an input of {problem.direction} "
            f"(inputs: {', '.join(problem.reads)})")


def make_inputs(problem: ConvProblem, spec: DataSpec, device: str) -> dict[str, torch.Tensor]:
    """The two tensors the direction reads, as logical views of layout-ordered memory."""
    validate(spec, problem)
    out = {}
    for salt, name in enumerate(problem.reads):
        phys = problem.physical_shape(name)
        if spec.side not in ("both", name):
            data = torch.ones(phys, dtype=torch.float64)
        else:
            data = _fill(phys, spec, problem, salt + 1)
        t = data.to(problem.dtype.torch_in).to(device)
        out[name] = t.permute(problem.to_logical_perm(name))
    return out


def empty_output(problem: ConvProblem, device: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The written tensor, poisoned (NaN, or the int minimum) so an unwritten element cannot pass."""
    name = problem.writes
    dt = dtype or problem.dtype.torch_out
    phys = torch.empty(problem.physical_shape(name), dtype=dt, device=device)
    phys.fill_(float("nan") if dt.is_floating_point else torch.iinfo(dt).min)
    return phys.permute(problem.to_logical_perm(name))

"""Seeded input tensors, drawn as a DataSpec (options.py) says.

A magnitude range with both signs, [1, 3] drawn then given a random sign, is the fp16
study's range away from zero: both signs keep the cancellation that a real layer has
(same-sign inputs make every product positive, so every sum grows and hides relative
errors); |x| >= 1 keeps subnormals and near-zero outputs rare, which is where fp16's
relative differences blow up without any bug.

Inputs are drawn where they are used, from a counter-based generator (Philox, as
`tl.rand` has; kernels/draw.py): the same seed gives the same numbers on the interpreter,
NVIDIA and AMD, and a GPU draws 200M elements in milliseconds where the CPU took seconds.
They are stored in the tensor's memory layout, element i of the layout taking Philox
counter i, and returned as logical-order views (see problem.py). Importing this module
does not import torch; drawing does.

Each input sits inside guard bands of NaN (guards.py: `in_margins`).
"""
from __future__ import annotations

from convgen import backend
from convgen.errors import ConvgenError
from convgen.guards import in_margins
from convgen.options import FIXED_PATTERN, ROCMLIR_FIXED, DataSpec
from convgen.problem import ConvProblem

MAX_SEED = 2**32 - 1   # rocmlir-gen seeds srand(), an unsigned int
MAX_INT_VALUES = 2**32  # integer draws choose among at most this many values (kernels/draw.py)


def _range(spec: DataSpec, problem: ConvProblem) -> tuple[float, float]:
    if spec.generator == "rocmlir" and spec.rand_type != "float":
        return float(spec.int_lo), float(max(spec.int_lo, spec.int_hi - 1))
    lo, hi = problem.dtype.default_rand_range
    return (lo if spec.lo is None else spec.lo), (hi if spec.hi is None else spec.hi)


def _fits(lo: float, hi: float, t) -> bool:
    """Whether every value of [lo, hi] is a finite value of type t."""
    if t.is_int:
        return -t.max_finite - 1 <= lo and hi <= t.max_finite
    return max(abs(lo), abs(hi)) <= t.max_finite


def validate(spec: DataSpec, problem: ConvProblem) -> None:
    """Refuse data that cannot be drawn or stored, naming the option (ConvgenError.field)."""
    rocmlir_ints = spec.generator == "rocmlir" and spec.rand_type != "float"
    if rocmlir_ints and spec.mode != "random":
        # rocmlir-gen's integer range, given for data that does not draw it: still one that
        # the type can hold (a line that later takes -rand N must not fill infinities)
        lo, hi = _range(spec, problem)
        t = problem.dtype
        if not _fits(lo, hi, t):
            raise ConvgenError(f"integer range [{lo:g}, {hi:g}] does not fit in {t.name} "
                               f"(largest finite value {t.max_finite:g})", field="rand_int_range")
    if spec.mode == "random":
        if not 0 <= spec.seed <= MAX_SEED:
            raise ConvgenError(f"seed {spec.seed} is out of range (0 to {MAX_SEED})", field="rand")
        lo, hi = _range(spec, problem)
        t = problem.dtype
        if lo > hi:
            raise ConvgenError(f"the range's minimum {lo:g} is larger than its maximum {hi:g}",
                               field="rand_range")
        if spec.both_signs and lo < 0:
            raise ConvgenError(f"both signs need a magnitude range (minimum >= 0), got minimum "
                               f"{lo:g}", field="rand_both_signs")
        if not _fits(lo, hi, t):
            raise ConvgenError(f"random range [{lo:g}, {hi:g}] does not fit in {t.name} "
                               f"(largest finite value {t.max_finite:g})",
                               field="rand_int_range" if rocmlir_ints else "rand_range")
        if (spec.rand_type or ("int" if t.is_int else "float")) == "int" and \
                round(hi) - round(lo) + 1 > MAX_INT_VALUES:
            raise ConvgenError(f"integer draws choose among at most 2^32 values, got [{lo:g}, {hi:g}]",
                               field="rand_range")
    if spec.side != "both" and spec.side not in problem.reads:
        raise ConvgenError(
            f"{spec.side} is not an input of {problem.direction.name} "
            f"(inputs: {', '.join(problem.reads)})", field="rand_side")


def _fill(t, spec: DataSpec, problem: ConvProblem, salt: int) -> None:
    """Fill t (contiguous, in its layout) as spec says; salt tells the tensors apart."""
    import torch
    if spec.mode == "none":
        t.fill_(1)
        return
    if spec.mode == "fixed":
        pattern = torch.tensor(FIXED_PATTERN, dtype=torch.float64, device=t.device)
        idx = (torch.arange(t.numel(), device=t.device) + salt) % len(FIXED_PATTERN)
        t.view(-1).copy_(pattern[idx])
        return
    from convgen.kernels import draw   # Triton (its kernels, its interpreter set first)
    lo, hi = _range(spec, problem)
    integers = (spec.rand_type or ("int" if problem.dtype.is_int else "float")) == "int"
    seed = spec.seed * 1000003 + salt
    if t.device.type == "cpu" and not backend.interpreter_requested():
        # host tensors on a GPU machine (tests, tools): the same numbers, from numpy
        t.view(-1).copy_(torch.from_numpy(draw.uniform_numpy(t.numel(), seed, lo, hi, integers,
                                                             spec.both_signs)))
        return
    draw.fill_uniform(t, seed, lo, hi, integers, spec.both_signs, t.device.type == "cpu")


def make_inputs(problem: ConvProblem, spec: DataSpec, device: str) -> dict:
    """The tensors the direction reads, as logical views of layout-ordered memory inside
    allocations with NaN margins (integers: their minimum)."""
    import torch
    validate(spec, problem)
    out = {}
    dt = problem.dtype.torch_dtype
    drawn = _rocmlir_values(problem, spec) if spec.generator == "rocmlir" else None
    for salt, name in enumerate(problem.reads):
        t = in_margins(problem, name, dt, device)
        if drawn is not None:
            t.view(-1).copy_(torch.from_numpy(drawn[name]))
        elif spec.side not in ("both", name):
            t.fill_(1)
        else:
            _fill(t, spec, problem, salt + 1)
        out[name] = t.permute(problem.to_logical_perm(name))
    return out


# rocmlir-gen's kernel arguments, in the order its harness fills them (the destination,
# last, draws after the inputs and changes none of their numbers)
ROCMLIR_ARGS = {"fwd": ("filter", "input"), "bwd_data": ("filter", "output"),
                "bwd_weight": ("input", "output")}


def _rocmlir_values(problem: ConvProblem, spec: DataSpec) -> dict:
    """Each input's values in its memory order, as rocmlir-gen's harness fills them
    (--semantics=rocmlir): `fixed` repeats {0.5, -1, 0.75} (integer types {1, -1, 2}) from
    each tensor's first element; `none` is 1 (0.1 for float draws); random data is one
    glibc rand() stream seeded with srand(seed), the tensors in kernel-argument order, one
    call per element: integers (rand() % (max - min)) + min in [-rand_min_int,
    -rand_max_int), floats (max - min) * rand() / RAND_MAX + min in fp32 over
    [-rand_min, -rand_max]; a tensor that -rand_side leaves out holds 1 (0.1 for float
    draws) and draws nothing. The values are then rounded to the element type."""
    import numpy as np

    from convgen.glibc_rand import RAND_MAX, GlibcRand   # numpy: rocMLIR's data rules alone
    floats = spec.rand_type == "float"
    out = {}
    if spec.mode in ("fixed", "none"):
        for name in problem.reads:
            n = problem.elements(name)
            if spec.mode == "none":
                out[name] = np.full(n, np.float32(0.1) if floats else 1.0, dtype=np.float32)
            else:
                pattern = ROCMLIR_FIXED["int" if problem.dtype.is_int else "float"]
                out[name] = np.resize(np.asarray(pattern, dtype=np.float32), n)
        return out
    gen = GlibcRand(spec.seed)
    lo, hi = (spec.lo, spec.hi) if floats else (spec.int_lo, spec.int_hi)
    for name in ROCMLIR_ARGS[problem.direction.name]:
        n = problem.elements(name)
        if spec.side not in ("both", name) or lo == hi:
            const = 1 if spec.side not in ("both", name) else lo   # min == max: no draw
            # the runtime returns float(min) * 0.1 (a double product) for float draws
            out[name] = np.full(n, float(np.float32(const)) * 0.1 if floats else const,
                                dtype=np.float32)
            continue
        r = np.asarray(gen.take(n), dtype=np.int64)
        if floats:
            out[name] = ((hi - lo) * r.astype(np.float64) / RAND_MAX).astype(np.float32) + np.float32(lo)
        else:
            out[name] = ((r % (hi - lo)) + lo).astype(np.float32)
    return out



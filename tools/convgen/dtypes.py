"""Element types: the one table of them. Adding a type is one row.

Each row is a storage type: its spellings, its bits and range, the accumulator and
output a convolution over it uses, and its names in torch, numpy and Triton. The
module imports neither torch nor Triton (the CLI, split-test and lit read it), so
torch dtypes are looked up by name when asked for (`ElemType.torch_dtype`).

Floating-point facts, for a type with `mantissa` stored fraction bits and `emin`
the exponent of its smallest normal number:

    unit roundoff   u          = 2^-(mantissa + 1)
    spacing at x    eps(x)     = 2^(max(floor(log2 |x|), emin) - mantissa)   (one ULP)
    smallest value  denorm_min = 2^(emin - mantissa)

fp8: `fnuz` marks the AMD formats (no negative zero, no infinity, NaN is 0x80) that
MI300 (gfx942) matrix cores take; the others are the OCP formats (e4m3 saturates at 448
and has no infinity, e5m2 is IEEE-like).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from convgen.errors import ConvgenError


@dataclass(frozen=True)
class ElemType:
    name: str                  # the canonical spelling (`-t`, JSON, messages)
    aliases: tuple             # other spellings, lower case (rocMLIR, MLIR, numpy names)
    bits: int
    is_int: bool
    mantissa: int              # stored fraction bits (0 for integers)
    emin: int                  # exponent of the smallest normal (0 for integers)
    max_finite: float
    torch_name: str            # attribute of the torch module
    triton_name: str           # Triton's element name in pointer types ("*fp16")
    numpy_name: str | None     # None: numpy has no such type; saved widened to float32 (exact)
    out: str                   # the output a convolution over this type writes
    acc: str                   # the accumulator it sums in
    conv_input: bool = True    # a convolution may read it (-t); False for output-only types
    fp8: str | None = None     # "e4m3" or "e5m2"
    fnuz: bool = False

    @property
    def is_fp8(self) -> bool:
        return self.fp8 is not None

    @property
    def u(self) -> float:
        """Unit roundoff (0 for integers: exact)."""
        return 0.0 if self.is_int else 2.0 ** -(self.mantissa + 1)

    @property
    def denorm_min(self) -> float:
        return 0.0 if self.is_int else 2.0 ** (self.emin - self.mantissa)

    @property
    def tiny(self) -> float:
        """The smallest normal number (0 for integers)."""
        return 0.0 if self.is_int else 2.0 ** self.emin

    def spacing(self, x: float) -> float:
        """The step between values of this type in the binade of |x| (one ULP)."""
        if self.is_int:
            return 1.0
        e = math.frexp(abs(x))[1] - 1 if x and math.isfinite(x) else self.emin
        return 2.0 ** (max(e, self.emin) - self.mantissa)

    @property
    def out_type(self) -> "ElemType":
        return TYPES[self.out]

    @property
    def acc_type(self) -> "ElemType":
        return TYPES[self.acc]

    @property
    def torch_dtype(self):
        import torch
        return getattr(torch, self.torch_name)

    @property
    def guard_bits(self) -> int:
        """A bit pattern no kernel writes, for the margins around an output (inputs.py): a NaN
        with a payload for floats (a computed NaN has none), an odd value near the minimum
        for integers (the poison of an unwritten element is the minimum itself)."""
        if self.is_int:
            return -(1 << (self.bits - 1)) + 0x5A5A
        exp_bits = self.bits - 1 - self.mantissa
        payload = (0x5A5A5A5A & ((1 << self.mantissa) - 1)) | (1 << (self.mantissa - 1))
        return (((1 << exp_bits) - 1) << self.mantissa) | payload

    @property
    def default_rand_range(self) -> tuple[float, float]:
        return (-5.0, 5.0) if self.is_int else (-1.0, 1.0)


def _row(name, aliases, bits, is_int, mantissa, emin, max_finite, torch_name, triton_name,
         numpy_name, out, acc, **kw) -> ElemType:
    return ElemType(name, tuple(aliases), bits, is_int, mantissa, emin, max_finite, torch_name,
                    triton_name, numpy_name, out, acc, **kw)


_ROWS = (
    _row("f32", ("fp32", "float", "float32"), 32, False, 23, -126, 3.4028234663852886e38,
         "float32", "fp32", "float32", "f32", "f32"),
    _row("f16", ("fp16", "half", "float16"), 16, False, 10, -14, 65504.0,
         "float16", "fp16", "float16", "f16", "f32"),
    _row("bf16", ("bfp16", "bfloat16"), 16, False, 7, -126, 3.3895313892515355e38,
         "bfloat16", "bf16", None, "bf16", "f32"),
    # i8: exact int32 accumulation and output (forward only: problem.py)
    _row("i8", ("int8",), 8, True, 0, 0, 127.0, "int8", "i8", "int8", "i32", "i32"),
    _row("i32", ("int32",), 32, True, 0, 0, 2147483647.0, "int32", "i32", "int32", "i32", "i32",
         conv_input=False),
    # fp8: fp32 accumulation and output (a product of two fp8 values is exact in fp32).
    # rocMLIR says fp8/bf8 (on gfx942 it means the fnuz formats: write those names there);
    # MLIR says f8E4M3FN etc. (MLIR's f8E4M3 is another type).
    _row("fp8_e4m3", ("fp8", "f8e4m3fn", "e4m3"), 8, False, 3, -6, 448.0,
         "float8_e4m3fn", "fp8e4nv", None, "f32", "f32", fp8="e4m3"),
    _row("fp8_e5m2", ("bf8", "f8e5m2", "e5m2"), 8, False, 2, -14, 57344.0,
         "float8_e5m2", "fp8e5", None, "f32", "f32", fp8="e5m2"),
    _row("fp8_e4m3fnuz", ("f8e4m3fnuz",), 8, False, 3, -7, 240.0,
         "float8_e4m3fnuz", "fp8e4b8", None, "f32", "f32", fp8="e4m3", fnuz=True),
    _row("fp8_e5m2fnuz", ("f8e5m2fnuz",), 8, False, 2, -15, 57344.0,
         "float8_e5m2fnuz", "fp8e5b16", None, "f32", "f32", fp8="e5m2", fnuz=True),
)
TYPES: dict[str, ElemType] = {t.name: t for t in _ROWS}
_BY_SPELLING = {s: t for t in _ROWS for s in (t.name, *t.aliases)}
CONV_TYPES = tuple(t.name for t in _ROWS if t.conv_input)
FP8_TYPES = tuple(t.name for t in _ROWS if t.is_fp8)


def find(spelling: str) -> ElemType | None:
    """The type a spelling names (any case), or None."""
    return _BY_SPELLING.get(spelling.strip().lower())


def elem_type(spelling: str, *, conv_input: bool = True) -> ElemType:
    """The type a spelling names, or ConvgenError(field="type") listing the known ones."""
    t = find(spelling)
    if t is None or (conv_input and not t.conv_input):
        known = CONV_TYPES if conv_input else tuple(TYPES)
        raise ConvgenError(f"unknown type '{spelling}' (expected one of: {', '.join(known)})",
                           field="type")
    return t


def of(x) -> ElemType:
    """An ElemType from an ElemType, a spelling, or a torch dtype."""
    if isinstance(x, ElemType):
        return x
    if isinstance(x, str):
        return elem_type(x, conv_input=False)
    name = str(x).removeprefix("torch.")
    for t in _ROWS:
        if t.torch_name == name:
            return t
    raise ValueError(f"no element type for {x!r}")

"""Element types: what each `-t` name means for storage, accumulation and output.

One table, so that the kernel, the reference and the tolerances agree on what a
type is. `mantissa` is the number of stored fraction bits; the unit roundoff is
2^-(mantissa+1).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from convgen.errors import ConvgenError


@dataclass(frozen=True)
class ElemType:
    name: str            # the `-t` spelling
    torch_in: torch.dtype   # inputs as stored
    torch_out: torch.dtype  # the kernel's output
    is_int: bool
    mantissa_in: int     # fraction bits of the input type (0 for integers)
    mantissa_out: int    # fraction bits of the output type
    mantissa_acc: int    # fraction bits of the accumulator (fp32: 23)

    @property
    def u_in(self) -> float:
        return 0.0 if self.is_int else 2.0 ** -(self.mantissa_in + 1)

    @property
    def u_out(self) -> float:
        return 0.0 if self.is_int else 2.0 ** -(self.mantissa_out + 1)

    @property
    def u_acc(self) -> float:
        return 0.0 if self.is_int else 2.0 ** -(self.mantissa_acc + 1)

    @property
    def is_fp8(self) -> bool:
        return self.torch_in.itemsize == 1 and not self.is_int

    @property
    def default_rand_range(self) -> tuple[float, float]:
        return (-5.0, 5.0) if self.is_int else (-1.0, 1.0)


_F32 = torch.float32
TYPES: dict[str, ElemType] = {
    "f32": ElemType("f32", _F32, _F32, False, 23, 23, 23),
    "f16": ElemType("f16", torch.float16, torch.float16, False, 10, 10, 23),
    "bf16": ElemType("bf16", torch.bfloat16, torch.bfloat16, False, 7, 7, 23),
    # i8 forward: int8 inputs, exact int32 accumulation and output.
    "i8": ElemType("i8", torch.int8, torch.int32, True, 0, 0, 0),
    # fp8 inputs, fp32 accumulation and output (products of two fp8 values are exact in fp32).
    # OCP formats (NVIDIA sm89+, AMD gfx950; other AMD matrix cores through an exact fp16 upcast)
    "fp8_e4m3": ElemType("fp8_e4m3", torch.float8_e4m3fn, _F32, False, 3, 23, 23),
    "fp8_e5m2": ElemType("fp8_e5m2", torch.float8_e5m2, _F32, False, 2, 23, 23),
    # the "fnuz" variants that MI300 (gfx942) matrix cores take natively: no -0, no inf
    "fp8_e4m3fnuz": ElemType("fp8_e4m3fnuz", torch.float8_e4m3fnuz, _F32, False, 3, 23, 23),
    "fp8_e5m2fnuz": ElemType("fp8_e5m2fnuz", torch.float8_e5m2fnuz, _F32, False, 2, 23, 23),
}
# rocMLIR says fp8/bf8 (on gfx942 it means the fnuz formats: write those names there)
# and MLIR f8E4M3FN etc.; lower-cased before lookup. MLIR's f8E4M3 is another type.
ALIASES = {"fp32": "f32", "fp16": "f16", "half": "f16", "float": "f32", "int8": "i8",
           "fp8": "fp8_e4m3", "bf8": "fp8_e5m2", "f8e4m3fn": "fp8_e4m3", "f8e5m2": "fp8_e5m2",
           "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2",
           "f8e4m3fnuz": "fp8_e4m3fnuz", "f8e5m2fnuz": "fp8_e5m2fnuz"}


def elem_type(name: str) -> ElemType:
    key = ALIASES.get(name.lower(), name.lower())
    if key not in TYPES:
        raise ConvgenError(f"unknown type '-t {name}' (expected one of: {', '.join(TYPES)})")
    return TYPES[key]


"""The convolution problem: sizes, geometry, layouts and direction, validated.

Everything downstream works on *logical* tensors with a fixed dimension order,
whatever the memory layout:

    input  x: (n, g, c, h, w)   c = channels per group
    filter w: (g, k, c, y, x)   k = output channels per group
    output y: (n, g, k, h, w)

A layout string only decides the order in memory; it becomes a permutation, and
the kernels see it as five strides. So any permutation, with or without `g`, is
the same code path.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from convgen.directions import Direction, direction as _direction
from convgen.dtypes import ElemType
from convgen.errors import ConvgenError

LOGICAL = {"input": "ngchw", "filter": "gkcyx", "output": "ngkhw"}
# The letter that `g` is inserted in front of when a layout omits it: groups are
# the outer part of the channel dimension (channels = g * C + c), as in MIOpen.
_CHANNEL = {"input": "c", "filter": "k", "output": "k"}
MAX_ELEMENTS = 2**31 - 1  # kernels index with 32-bit offsets


def normalize_layout(tensor: str, layout: str) -> str:
    """Return the 5-letter layout (with `g`) for `tensor`, or raise naming the fault."""
    want = LOGICAL[tensor]
    lay = layout.strip().lower()
    if "g" not in lay:
        ch = _CHANNEL[tensor]
        if ch in lay:
            i = lay.index(ch)
            lay = lay[:i] + "g" + lay[i:]
    bad = sorted(set(lay) - set(want))
    if bad:
        raise ConvgenError(
            f"{tensor} layout '{layout}' has unknown letter '{bad[0]}' (letters: {want})",
            field=f"layout.{tensor}")
    for ch in lay:
        if lay.count(ch) > 1:
            raise ConvgenError(f"{tensor} layout '{layout}' repeats letter '{ch}'",
                               field=f"layout.{tensor}")
    if len(lay) != len(want):
        missing = "".join(c for c in want if c not in lay)
        raise ConvgenError(f"{tensor} layout '{layout}' lacks letter(s) '{missing}'",
                           field=f"layout.{tensor}")
    return lay


@dataclass(frozen=True)
class ConvProblem:
    direction: Direction
    dtype: ElemType
    n: int
    g: int
    c: int            # input channels per group
    k: int            # output channels per group
    hi: int
    wi: int
    y: int
    x: int
    stride_h: int = 1
    stride_w: int = 1
    dil_h: int = 1
    dil_w: int = 1
    pad_h_l: int = 0
    pad_h_r: int = 0
    pad_w_l: int = 0
    pad_w_r: int = 0
    layouts: dict = field(default_factory=lambda: dict(LOGICAL))

    # ---- derived sizes -------------------------------------------------
    @property
    def ho(self) -> int:
        return (self.hi + self.pad_h_l + self.pad_h_r - self.dil_h * (self.y - 1) - 1) // self.stride_h + 1

    @property
    def wo(self) -> int:
        return (self.wi + self.pad_w_l + self.pad_w_r - self.dil_w * (self.x - 1) - 1) // self.stride_w + 1

    def elements(self, tensor: str) -> int:
        size = 1
        for d in self.logical_shape(tensor):
            size *= d
        return size

    def logical_shape(self, tensor: str) -> tuple[int, ...]:
        return {
            "input": (self.n, self.g, self.c, self.hi, self.wi),
            "filter": (self.g, self.k, self.c, self.y, self.x),
            "output": (self.n, self.g, self.k, self.ho, self.wo),
        }[tensor]

    def physical_shape(self, tensor: str) -> tuple[int, ...]:
        dims = dict(zip(LOGICAL[tensor], self.logical_shape(tensor)))
        return tuple(dims[ch] for ch in self.layouts[tensor])

    def to_logical_perm(self, tensor: str) -> tuple[int, ...]:
        """Permutation that views a physical (layout-ordered) tensor in logical order."""
        lay = self.layouts[tensor]
        return tuple(lay.index(ch) for ch in LOGICAL[tensor])

    @property
    def reads(self) -> tuple[str, str]:
        return self.direction.reads

    @property
    def writes(self) -> str:
        return self.direction.writes

    @property
    def gemm(self) -> tuple[int, int, int]:
        """(M, N, reduction) of the implicit GEMM, per group."""
        return self.direction.gemm(self)

    @property
    def accumulations(self) -> int:
        """Products summed into one output element (the longest, for bwd_data)."""
        return self.gemm[2]

    @property
    def flops(self) -> int:
        """Useful multiply-adds times two, the same for all three directions: each product of
        the forward convolution is made once. (bwd_data's GEMM shape counts every input
        pixel against the whole filter, about stride_h*stride_w times too many for a strided
        problem, whose taps the kernel skips.)"""
        return 2 * self.n * self.g * self.k * self.c * self.ho * self.wo * self.y * self.x

    def describe(self) -> str:
        lay = self.layouts
        pads = (f"{self.pad_h_l},{self.pad_h_r},{self.pad_w_l},{self.pad_w_r}")
        return (f"{self.direction.name} {self.dtype.name} N={self.n} G={self.g} C={self.c * self.g} "
                f"K={self.k * self.g} {self.hi}x{self.wi} filter {self.y}x{self.x} "
                f"stride {self.stride_h}x{self.stride_w} dil {self.dil_h}x{self.dil_w} pad {pads} "
                f"-> {self.ho}x{self.wo} layouts {lay['filter']}/{lay['input']}/{lay['output']}")


def make_problem(*, direction: Direction | str, dtype: ElemType, n: int, g: int, c_total: int, k_total: int,
                 hi: int, wi: int, y: int, x: int, stride=(1, 1), dilation=(1, 1),
                 pad=(0, 0, 0, 0), layouts: dict | None = None) -> ConvProblem:
    """Build and validate a problem from user-level sizes (total channels, not per group)."""
    direction = _direction(direction)
    for name, val in (("batch size", n), ("group count", g), ("input channels", c_total),
                      ("output channels", k_total), ("input height", hi), ("input width", wi),
                      ("filter height", y), ("filter width", x), ("stride height", stride[0]),
                      ("stride width", stride[1]), ("dilation height", dilation[0]),
                      ("dilation width", dilation[1])):
        if val < 1:
            raise ConvgenError(f"{name} must be positive, got {val}")
    for name, val in zip(("padding_h_l", "padding_h_r", "padding_w_l", "padding_w_r"), pad):
        if val < 0:
            raise ConvgenError(f"{name} must not be negative, got {val}")
    if c_total % g:
        raise ConvgenError(f"input channels {c_total} are not divisible by group count {g}")
    if k_total % g:
        raise ConvgenError(f"output channels {k_total} are not divisible by group count {g}")
    if not dtype.conv_input:
        raise ConvgenError(f"{dtype.name} is an output type; a convolution cannot read it",
                           field="type")
    if dtype.is_int and direction.name != "fwd":
        raise ConvgenError(f"{dtype.name} is supported for forward convolution only, "
                           f"not {direction.name}", field="type")
    lays = {t: normalize_layout(t, (layouts or {}).get(t, LOGICAL[t])) for t in LOGICAL}
    p = ConvProblem(direction, dtype, n, g, c_total // g, k_total // g, hi, wi, y, x,
                    stride[0], stride[1], dilation[0], dilation[1], *pad, layouts=lays)
    if p.ho < 1 or p.wo < 1:
        eff_h, eff_w = p.dil_h * (y - 1) + 1, p.dil_w * (x - 1) + 1
        raise ConvgenError(
            f"empty output ({p.ho}x{p.wo}): dilated filter {eff_h}x{eff_w} is larger than the "
            f"padded input {hi + pad[0] + pad[1]}x{wi + pad[2] + pad[3]}")
    for t in LOGICAL:
        size = p.elements(t)
        if size > MAX_ELEMENTS:
            raise ConvgenError(f"{t} tensor has {size} elements; at most {MAX_ELEMENTS} are supported")
    return p

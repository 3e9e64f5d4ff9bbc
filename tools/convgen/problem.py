"""The convolution problem: sizes, geometry, layouts and direction, validated.

Everything downstream works on *logical* tensors with a fixed dimension order,
whatever the memory layout:

    input  x: (n, g, c, h, w)   c = channels per group
    filter w: (g, k, c, y, x)   k = output channels per group
    output y: (n, g, k, h, w)

A layout string only decides the order in memory; it becomes a permutation, and
the kernels see it as five strides. So any permutation, with or without `g`, is
the same code path.

A 3-D problem (a depth of input, filter or padding above the trivial one) adds a depth
dimension after the channels: x (n, g, c, d, h, w), w (g, k, c, z, y, x), y (n, g, k, d,
h, w). Its kernels and references run it as 2-D problems, one per filter depth tap, on
depth slices gathered into the batch (depth.py): `depth_slice()` is that 2-D problem.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from convgen.directions import Direction, direction as _direction
from convgen.dtypes import ElemType
from convgen.errors import ConvgenError

LOGICAL = {"input": "ngchw", "filter": "gkcyx", "output": "ngkhw"}
LOGICAL_3D = {"input": "ngcdhw", "filter": "gkczyx", "output": "ngkdhw"}
_DEPTH = {"input": "d", "filter": "z", "output": "d"}
# The letter that `g` is inserted in front of when a layout omits it: groups are
# the outer part of the channel dimension (channels = g * C + c), as in MIOpen.
_CHANNEL = {"input": "c", "filter": "k", "output": "k"}
MAX_ELEMENTS = 2**31 - 1  # kernels index with 32-bit offsets


def normalize_layout(tensor: str, layout: str, three_d: bool = False) -> str:
    """Return the 5-letter layout (6 with the depth, for a 3-D problem), with `g`, for
    `tensor`, or raise naming the fault. A 2-D problem drops a depth letter (its depth is 1,
    which leaves the other dimensions' order in memory as it is)."""
    want = (LOGICAL_3D if three_d else LOGICAL)[tensor]
    lay = layout.strip().lower()
    if not three_d:
        lay = lay.replace(_DEPTH[tensor], "")
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
    # kernels/s2d.py's column fold reads its input through a view whose rows overlap (each
    # pixel's channels run into the next pixel's): the pixels are not in dense n, h, w order
    overlapping_input: bool = False
    di: int = 1       # 3-D: input depth, filter depth, and the depth's geometry
    z: int = 1
    stride_d: int = 1
    dil_d: int = 1
    pad_d_l: int = 0
    pad_d_r: int = 0

    # ---- derived sizes -------------------------------------------------
    # cached: a frozen problem's sizes never change, and choosing a config (selector.py)
    # reads them hundreds of thousands of times
    @cached_property
    def is_3d(self) -> bool:
        return len(self.layouts["input"]) == 6

    @cached_property
    def do(self) -> int:
        return (self.di + self.pad_d_l + self.pad_d_r - self.dil_d * (self.z - 1) - 1) // self.stride_d + 1

    def logical(self, tensor: str) -> str:
        """The letters of a tensor's logical dimensions, in order."""
        return (LOGICAL_3D if self.is_3d else LOGICAL)[tensor]

    def depth_slice(self) -> "ConvProblem":
        """The 2-D problem one filter depth tap of a 3-D problem poses: the output's depth
        folded into the batch (depth.py gathers the slices), layouts without the depth."""
        lays = {t: lay.replace(_DEPTH[t], "") for t, lay in self.layouts.items()}
        return replace(self, n=self.n * self.do, di=1, z=1, stride_d=1, dil_d=1, pad_d_l=0,
                       pad_d_r=0, layouts=lays)

    @cached_property
    def ho(self) -> int:
        return (self.hi + self.pad_h_l + self.pad_h_r - self.dil_h * (self.y - 1) - 1) // self.stride_h + 1

    @cached_property
    def wo(self) -> int:
        return (self.wi + self.pad_w_l + self.pad_w_r - self.dil_w * (self.x - 1) - 1) // self.stride_w + 1

    def elements(self, tensor: str) -> int:
        size = 1
        for d in self.logical_shape(tensor):
            size *= d
        return size

    def logical_shape(self, tensor: str) -> tuple[int, ...]:
        if self.is_3d:
            return {
                "input": (self.n, self.g, self.c, self.di, self.hi, self.wi),
                "filter": (self.g, self.k, self.c, self.z, self.y, self.x),
                "output": (self.n, self.g, self.k, self.do, self.ho, self.wo),
            }[tensor]
        return {
            "input": (self.n, self.g, self.c, self.hi, self.wi),
            "filter": (self.g, self.k, self.c, self.y, self.x),
            "output": (self.n, self.g, self.k, self.ho, self.wo),
        }[tensor]

    def physical_shape(self, tensor: str) -> tuple[int, ...]:
        dims = dict(zip(self.logical(tensor), self.logical_shape(tensor)))
        return tuple(dims[ch] for ch in self.layouts[tensor])

    def to_logical_perm(self, tensor: str) -> tuple[int, ...]:
        """Permutation that views a physical (layout-ordered) tensor in logical order."""
        lay = self.layouts[tensor]
        return tuple(lay.index(ch) for ch in self.logical(tensor))

    @property
    def reads(self) -> tuple[str, str]:
        return self.direction.reads

    @property
    def writes(self) -> str:
        return self.direction.writes

    @cached_property
    def gemm(self) -> tuple[int, int, int]:
        """(M, N, reduction) of the implicit GEMM, per group (3-D: of all the depth taps'
        slices together: the reduction, or bwd_weight's columns, times the taps)."""
        if not self.is_3d:
            return self.direction.gemm(self)
        m, n, r = self.direction.gemm(self.depth_slice())
        return (m, n * self.z, r) if self.direction.splits_reduction else (m, n, r * self.z)

    @property
    def accumulations(self) -> int:
        """Products summed into one output element (the longest, for bwd_data)."""
        return self.gemm[2]

    @cached_property
    def flops(self) -> int:
        """Useful multiply-adds times two, the same for all three directions: each product of
        the forward convolution is made once. (bwd_data's GEMM shape counts every input
        pixel against the whole filter, about stride_h*stride_w times too many for a strided
        problem, whose taps the kernel skips.)"""
        return (2 * self.n * self.g * self.k * self.c * self.ho * self.wo * self.y * self.x
                * self.do * self.z)

    def describe(self) -> str:
        lay = self.layouts
        pads = (f"{self.pad_h_l},{self.pad_h_r},{self.pad_w_l},{self.pad_w_r}")
        d = (lambda depth, h, w: f"{depth}x{h}x{w}") if self.is_3d else (lambda depth, h, w: f"{h}x{w}")
        if self.is_3d:
            pads = f"{self.pad_d_l},{self.pad_d_r}," + pads
        return (f"{self.direction.name} {self.dtype.name} N={self.n} G={self.g} C={self.c * self.g} "
                f"K={self.k * self.g} {d(self.di, self.hi, self.wi)} filter {d(self.z, self.y, self.x)} "
                f"stride {d(self.stride_d, self.stride_h, self.stride_w)} "
                f"dil {d(self.dil_d, self.dil_h, self.dil_w)} pad {pads} "
                f"-> {d(self.do, self.ho, self.wo)} layouts {lay['filter']}/{lay['input']}/{lay['output']}")


def make_problem(*, direction: Direction | str, dtype: ElemType, n: int, g: int, c_total: int, k_total: int,
                 hi: int, wi: int, y: int, x: int, stride=(1, 1), dilation=(1, 1),
                 pad=(0, 0, 0, 0), layouts: dict | None = None, depth=(1, 1, 1, 1, 0, 0)) -> ConvProblem:
    """Build and validate a problem from user-level sizes (total channels, not per group).
    depth: (input depth, filter depth, stride, dilation, padding before, after); a problem
    whose depths are 1 and depth padding 0 is 2-D."""
    direction = _direction(direction)
    di, z, stride_d, dil_d, pad_d_l, pad_d_r = depth
    for name, val in (("batch size", n), ("group count", g), ("input channels", c_total),
                      ("output channels", k_total), ("input height", hi), ("input width", wi),
                      ("filter height", y), ("filter width", x), ("stride height", stride[0]),
                      ("stride width", stride[1]), ("dilation height", dilation[0]),
                      ("dilation width", dilation[1]), ("input depth", di), ("filter depth", z),
                      ("stride depth", stride_d), ("dilation depth", dil_d)):
        if val < 1:
            raise ConvgenError(f"{name} must be positive, got {val}")
    for name, val in zip(("padding_h_l", "padding_h_r", "padding_w_l", "padding_w_r",
                          "padding_d_l", "padding_d_r"), (*pad, pad_d_l, pad_d_r)):
        if val < 0:
            raise ConvgenError(f"{name} must not be negative, got {val}")
    three_d = (di, z, pad_d_l, pad_d_r) != (1, 1, 0, 0)
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
    given = {t: (layouts or {}).get(t, (LOGICAL_3D if three_d else LOGICAL)[t]) for t in LOGICAL}
    if three_d:
        for t, lay in given.items():
            if _DEPTH[t] not in lay.lower():
                raise ConvgenError(f"a 3-D problem (depth {di}, filter depth {z}) needs a depth "
                                   f"dimension in the {t} layout, not '{lay}'", field=f"layout.{t}")
    lays = {t: normalize_layout(t, lay, three_d) for t, lay in given.items()}
    p = ConvProblem(direction, dtype, n, g, c_total // g, k_total // g, hi, wi, y, x,
                    stride[0], stride[1], dilation[0], dilation[1], *pad, layouts=lays,
                    di=di, z=z, stride_d=stride_d, dil_d=dil_d, pad_d_l=pad_d_l, pad_d_r=pad_d_r)
    if p.ho < 1 or p.wo < 1 or p.do < 1:
        # name the dimensions that come out empty, with the filter and input extents there
        eff = {"depth": dil_d * (z - 1) + 1, "rows": p.dil_h * (y - 1) + 1,
               "columns": p.dil_w * (x - 1) + 1}
        padded = {"depth": di + pad_d_l + pad_d_r, "rows": hi + pad[0] + pad[1],
                  "columns": wi + pad[2] + pad[3]}
        empty = [d for d, o in (("depth", p.do), ("rows", p.ho), ("columns", p.wo)) if o < 1]
        shape = f"{p.ho}x{p.wo}" + (f", depth {p.do}" if three_d else "")
        raise ConvgenError(f"empty output ({shape}): the dilated filter's "
                           + " and ".join(f"{d} {eff[d]}" for d in empty)
                           + f" {'is' if len(empty) == 1 else 'are'} more than the padded input's "
                           + " and ".join(str(padded[d]) for d in empty))
    for t in LOGICAL:
        size = p.elements(t)
        if size > MAX_ELEMENTS:
            raise ConvgenError(f"{t} tensor has {size} elements; at most {MAX_ELEMENTS} are supported")
    return p

"""The three directions of a convolution, each as the implicit GEMM it is. Adding a
direction is one row here plus the code the row names (its kernel, its references).

Per group, with logical tensors x (n, g, c, h, w), w (g, k, c, y, x), y (n, g, k, h, w):

    direction   A        B        C (written)  M (rows)      N (columns)   R (reduction)
    fwd         input    filter   output       n * ho * wo   k             c * y * x
    bwd_data    output   filter   input        n * hi * wi   c             k * y * x
    bwd_weight  output   input    filter       k             c * y * x     n * ho * wo

bwd_data's reduction counts every tap; with a stride, only the taps where
(hi + pad - y*dil) is divisible by the stride contribute. bwd_weight's reduction is
long (the whole batch), so its kernel may split it over programs (`splits_reduction`)
and sum the parts in a fixed order.

The row names the code that implements the direction as "module:attribute" strings,
resolved on first use, so that the CLI and lit read this table without importing
torch or Triton.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable


# The smallest channel block a kernel walks (a 16-bit matrix instruction's k).
MIN_CHANNEL_BLOCK = 16


def blocks_span_taps(p) -> bool:
    """One filter tap's channels fill less than the smallest channel block (the C = 3 stem),
    so fwd's reduction blocks and bwd_weight's column tiles run across taps over the
    flattened (y, x, c) instead of padding each tap's few channels to a block."""
    return p.c < MIN_CHANNEL_BLOCK


def column_tiles(p, block_n: int) -> int:
    """bwd_weight's output tiles along N (c * y * x) per row of tiles: each tap's channels
    tiled alone, or the flattened (y, x, c) when blocks span taps."""
    if blocks_span_taps(p):
        return -(-(p.c * p.y * p.x) // block_n)
    return p.y * p.x * -(-p.c // block_n)


@dataclass(frozen=True)
class Direction:
    name: str
    summary: str
    reads: tuple                 # the tensors it reads, in the order their data is drawn
    writes: str                  # C: the tensor it writes
    gemm_dims: tuple             # (M, N, R) as words, for people
    gemm: Callable               # problem -> (M, N, R) per group
    # The N extent one output tile spans: bwd_weight's tiles each cover one filter tap's
    # channels, so its tile sizes follow c, not c*y*x (unless blocks_span_taps).
    tile_n: Callable
    # The reduction extent one loop of the kernel walks in BLOCK_K steps: the channels of one
    # filter tap (fwd, bwd_data), the output pixels (bwd_weight).
    tile_k: Callable
    splits_reduction: bool       # the kernel may split R over programs (split-K)
    kernel: str                  # "module:function" building the launch (kernels/launch.py)
    cpu_reference: str           # "module:object" with per_sample() and compute()
    gpu_reference: str           # "module:kernel" of the GPU (FMA) reference
    # The descriptor kernels (kernels/tma.py) of this direction:
    # how a strided input (gradient), other than a strided 1x1 view, is read: "one"
    # descriptor over every phase (fwd; none where rows or columns are not multiples of the
    # stride), "one or each" (bwd_weight: one over every phase where it can, else one per
    # phase), "each" phase its own (bwd_data: it writes the pixels between the strided ones,
    # so no strided view either)
    phase_views: str = "each"
    persistent: bool = False     # a persistent kernel (bwd_data's at stride 1 only)
    streamk: bool = False        # a stream-K kernel
    tail: bool = False           # the tiles after the last whole wave shared
    # a transposed tile (swap_ab): "" none; else the dimension its reduction steps through in
    # the filter's (k, y*x*c) view: "c" (fwd: a step past a tap's channels would read the
    # next tap, so block_k must divide c) or "k" (bwd_data)
    swap_ab: str = ""
    fold_columns: bool = True    # s2d=2 (the filter's columns folded too)

    def load(self, which: str):
        """The object a "module:attribute" field names (kernel, cpu_reference, gpu_reference)."""
        module, _, attr = getattr(self, which).partition(":")
        return getattr(importlib.import_module(module), attr)

    def __str__(self) -> str:
        return self.name


FWD = Direction(
    "fwd", "forward: output = input * filter",
    reads=("input", "filter"), writes="output", gemm_dims=("n*ho*wo", "k", "c*y*x"),
    gemm=lambda p: (p.n * p.ho * p.wo, p.k, p.c * p.y * p.x),
    tile_n=lambda p: p.k, tile_k=lambda p: p.c * p.y * p.x if blocks_span_taps(p) else p.c,
    splits_reduction=False,
    kernel="convgen.kernels.conv_fwd:launch_spec",
    cpu_reference="convgen.reference:FWD",
    gpu_reference="convgen.kernels.gpu_reference:conv_ref_fwd_kernel",
    phase_views="one", persistent=True, tail=True, swap_ab="c")
BWD_DATA = Direction(
    "bwd_data", "backward data: input gradient from the output gradient and the filter",
    reads=("output", "filter"), writes="input", gemm_dims=("n*hi*wi", "c", "k*y*x"),
    gemm=lambda p: (p.n * p.hi * p.wi, p.c, p.k * p.y * p.x),
    tile_n=lambda p: p.c, tile_k=lambda p: p.k, splits_reduction=False,
    kernel="convgen.kernels.conv_bwd_data:launch_spec",
    cpu_reference="convgen.reference:BWD_DATA",
    gpu_reference="convgen.kernels.gpu_reference:conv_ref_bwd_data_kernel",
    phase_views="each", persistent=True, swap_ab="k",
    # its output would be a view whose columns overlap
    fold_columns=False)
BWD_WEIGHT = Direction(
    "bwd_weight", "backward weight: filter gradient from the input and the output gradient",
    reads=("input", "output"), writes="filter", gemm_dims=("k", "c*y*x", "n*ho*wo"),
    gemm=lambda p: (p.k, p.c * p.y * p.x, p.n * p.ho * p.wo),
    tile_n=lambda p: p.c * p.y * p.x if blocks_span_taps(p) else p.c,
    tile_k=lambda p: p.n * p.ho * p.wo, splits_reduction=True,
    kernel="convgen.kernels.conv_bwd_weight:launch_spec",
    cpu_reference="convgen.reference:BWD_WEIGHT",
    gpu_reference="convgen.kernels.gpu_reference:conv_ref_bwd_weight_kernel",
    phase_views="one or each", streamk=True)

DIRECTIONS: dict[str, Direction] = {d.name: d for d in (FWD, BWD_DATA, BWD_WEIGHT)}


def direction(name) -> Direction:
    """The Direction of a name ("fwd", ...) or a Direction itself."""
    if isinstance(name, Direction):
        return name
    return DIRECTIONS[name]

"""Strided convolutions run as stride-1 ones: the stride folded into the channels (space
to depth), for filters whose taps have too few channels to load well (the C = 3 stem).

A filter of stride s (per axis) meets, in every s x s block of input pixels, each pixel
at a fixed offset (a, b) from the block's corner. Regroup the input by block,

    x'[n, i, j, (a, b, c)] = x[n, s_h*i + a, s_w*j + b, c]       (zero past the input)

and the filter by the same offsets, shifted by r = (-pad) mod s so that every tap lands
on a block boundary,

    w'[k, u, v, (a, b, c)] = w[k, s_h*u + a - r_h, s_w*v + b - r_w, c]   (zero past the filter)

and the convolution is a stride-1 one of x' and w' (U = ceil((Y + r_h) / s_h) rows of
taps, padding (r + pad) / s in front) with s_h*s_w*C channels, padded up to a whole
16-byte row and at least one channel block. The 7x7 stride-2 stem on 3 channels becomes
a 4x4 stride-1 filter on 16 channels: each reduction step is a run of contiguous,
aligned channels, which the kernels of kernels/conv_*.py and kernels/tma.py load whole.
Its cost: 256 products per output where the stem has 147 (the zero taps and channels).

Mode 2 (fwd, bwd_weight) also folds the filter's columns into the channels: x' is
written with its padding, and a view of it whose columns overlap (column j, channel
(v, a, b, c) = x' column j + v) makes every row of taps one run of V*C' channels, a
U x 1 filter without padding: 4 reduction steps of 64 channels for the stem, not 16 of 16.
bwd_data cannot take it: its output, the input gradient, would be that overlapping view.

The regrouping is a copy before the convolution (to_depth_kernel: the input, and the
filter for fwd and bwd_data) and, for the backward directions, one after it
(from_depth_kernel: the input gradient, or the filter gradient, back in place). Both
copies are timed with the convolution: they are part of what it costs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import triton
import triton.language as tl

from convgen.directions import MIN_CHANNEL_BLOCK
from convgen.kernels.common import split3
from convgen.kernels.spec import one_group
from convgen.problem import LOGICAL, MAX_ELEMENTS

COPY_BLOCK = 1024


@dataclass(frozen=True)
class Axis:
    """One spatial axis of the fold."""
    s: int         # the stride folded
    r: int         # filter shift: tap f of the original is s*u + a - r
    taps: int      # U: taps of the folded filter
    size: int      # rows (or columns) of x'
    pad_l: int     # the folded problem's padding
    pad_r: int


def _axis(size: int, taps: int, stride: int, pad_l: int, out: int) -> Axis:
    r = (-pad_l) % stride
    pad = (r + pad_l) // stride
    u = -(-(taps + r) // stride)
    rows = -(-size // stride)
    # padding after: whatever gives the same number of outputs; negative means the last
    # rows of x' are read by no output, so x' leaves them out
    after = out + u - 1 - rows - pad
    if after < 0:
        rows, after = rows + after, 0
    return Axis(stride, r, u, rows, pad, after)


@dataclass(frozen=True)
class Fold:
    h: Axis
    w: Axis
    c: int          # channels of a folded pixel (s_h*s_w*C, padded)
    cols: bool      # mode 2: the filter's columns folded into the channels too


def channels(p) -> int:
    """s_h*s_w*C rounded up to a 16-byte row and to at least one channel block."""
    per_row = max(1, 16 * 8 // p.dtype.bits)
    c = p.stride_h * p.stride_w * p.c
    return max(MIN_CHANNEL_BLOCK, -(-c // per_row) * per_row)


def unsupported(p, mode: int) -> str | None:
    """None when mode (1: stride into channels; 2: the filter's columns too) can run p, else
    why not (one phrase)."""
    if mode not in (1, 2):
        return f"s2d={mode} must be 1 or 2"
    if (p.stride_h, p.stride_w) == (1, 1):
        return "stride 1: no stride to fold"
    if (p.dil_h, p.dil_w) != (1, 1):
        return f"dilation {p.dil_h}x{p.dil_w}: the taps of a block must be neighbours"
    if p.g != 1:
        return f"{p.g} groups: one group only"
    if mode == 2 and not p.direction.fold_columns:
        return ("bwd_data cannot fold the filter's columns: its output would be a view whose "
                "columns overlap (s2d=1 can)")
    f = fold(p, mode)
    if min(f.h.size, f.w.size) < 1:
        return "the padding leaves no input pixel to fold"
    rows, cols = f.h.size + f.h.pad_l + f.h.pad_r, f.w.size + f.w.pad_l + f.w.pad_r
    if (p.n * rows * cols * f.c if mode == 2 else p.n * f.h.size * f.w.size * f.c) > MAX_ELEMENTS:
        return "the folded input would pass the 2^31 elements a kernel can index"
    return None


def fold(p, mode: int) -> Fold:
    return Fold(_axis(p.hi, p.y, p.stride_h, p.pad_h_l, p.ho),
                _axis(p.wi, p.x, p.stride_w, p.pad_w_l, p.wo), channels(p), mode == 2)


# the input and filter of the folded problem are ours (x' or dx', w' or dw'), channels
# innermost; the output (or its gradient) is the caller's
_FOLDED = {"input": "nhwgc", "filter": "gkyxc"}


def inner_problem(p, mode: int):
    """The stride-1 problem the folded tensors pose (the same output pixels)."""
    f = fold(p, mode)
    layouts = {**p.layouts, **_FOLDED}
    if f.cols:
        # x' holds its padding; a row of taps reads V columns of it as one run of channels
        rows = f.h.size + f.h.pad_l + f.h.pad_r
        return replace(p, c=f.w.taps * f.c, hi=rows, wi=p.wo, y=f.h.taps, x=1,
                       stride_h=1, stride_w=1, pad_h_l=0, pad_h_r=0, pad_w_l=0, pad_w_r=0,
                       layouts=layouts, overlapping_input=True)
    return replace(p, c=f.c, hi=f.h.size, wi=f.w.size, y=f.h.taps, x=f.w.taps,
                   stride_h=1, stride_w=1, pad_h_l=f.h.pad_l, pad_h_r=f.h.pad_r,
                   pad_w_l=f.w.pad_l, pad_w_r=f.w.pad_r, layouts=layouts)


@triton.jit
def to_depth_kernel(src, dst, N, H, W, C, HD, WD, CD, OFF_H, OFF_W, s_n, s_h, s_w, s_c,
                    SH: tl.constexpr, SW: tl.constexpr, BLOCK: tl.constexpr):
    """dst (N, HD, WD, CD), contiguous, from src (N, H, W, C), any strides:
    dst[n, i, j, (a, b, c)] = src[n, SH*i + a - OFF_H, SW*j + b - OFF_W, c], zero outside
    src and in the channels past SH*SW*C. Every element of dst is written."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < N * HD * WD * CD
    # dst's flat index -> (n, i, j, cd); cd -> the offset (a, b) in the block and c
    cd = idx % CD
    n, i, j = split3(idx // CD, HD, WD)
    c = cd % C
    ab = cd // C
    h = SH * i + ab // SW - OFF_H
    w = SW * j + ab % SW - OFF_W
    inside = ok & (ab < SH * SW) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
    v = tl.load(src + n * s_n + h * s_h + w * s_w + c * s_c, mask=inside, other=0)
    tl.store(dst + idx, v, mask=ok)


@triton.jit
def from_depth_kernel(src, dst, N, H, W, C, HD, WD, CD, OFF_H, OFF_W, d_n, d_h, d_w, d_c,
                      SH: tl.constexpr, SW: tl.constexpr, BLOCK: tl.constexpr):
    """dst (N, H, W, C), any strides, from src (N, HD, WD, CD), contiguous: the inverse of
    to_depth_kernel, dst[n, h, w, c] = src[n, i, j, (a, b, c)] where SH*i + a = h + OFF_H
    and SW*j + b = w + OFF_W; zero where i or j is past src. Every element of dst is written."""
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < N * H * W * C
    # dst's flat index -> (n, h, w, c), c fastest
    c = idx % C
    n, h, w = split3(idx // C, H, W)
    hh = h + OFF_H
    ww = w + OFF_W
    i = hh // SH
    j = ww // SW
    cd = ((hh - i * SH) * SW + ww - j * SW) * C + c
    inside = ok & (i < HD) & (j < WD)
    v = tl.load(src + ((n * HD + i) * WD + j) * CD + cd, mask=inside, other=0)
    tl.store(dst + n * d_n + h * d_h + w * d_w + c * d_c, v, mask=ok)


def _to_depth(src, dst, f: Fold, off_h: int, off_w: int, options):
    n, h, w, c = src.shape
    _, hd, wd, cd = dst.shape
    to_depth_kernel[(triton.cdiv(dst.numel(), COPY_BLOCK),)](
        src, dst, n, h, w, c, hd, wd, cd, off_h, off_w, *src.stride(),
        SH=f.h.s, SW=f.w.s, BLOCK=COPY_BLOCK, **options)


def _from_depth(src, dst, f: Fold, off_h: int, off_w: int, options):
    n, h, w, c = dst.shape
    _, hd, wd, cd = src.shape
    from_depth_kernel[(triton.cdiv(dst.numel(), COPY_BLOCK),)](
        src, dst, n, h, w, c, hd, wd, cd, off_h, off_w, *dst.stride(),
        SH=f.h.s, SW=f.w.s, BLOCK=COPY_BLOCK, **options)


def launch_spec(p, tensors, out, cfg, use_dot, interpreter, input_precision, inner_spec):
    """The stride-1 kernel of the folded problem, with the copies into and out of the
    folded tensors as its first and last launches. `inner_spec` builds the folded
    problem's own launch (launch.launch_spec, passed in: the folded problem takes any
    kernel the dispatch knows)."""
    import torch

    mode = cfg.s2d
    f = fold(p, mode)
    inner = inner_problem(p, mode)
    name = p.direction.name
    full = {**tensors, p.writes: out}
    dev = out.device
    x = one_group(full["input"], LOGICAL["input"], "nhwc")
    w = one_group(full["filter"], LOGICAL["filter"], "kyxc")
    starts, finishes = [], []
    folded = {}

    if name in ("fwd", "bwd_weight"):
        # x' (mode 2 with its padding written, as zeros, around it)
        pads = (f.h.pad_l, f.h.pad_r, f.w.pad_l, f.w.pad_r) if f.cols else (0, 0, 0, 0)
        rows, cols = f.h.size + pads[0] + pads[1], f.w.size + pads[2] + pads[3]
        xd = torch.empty((p.n, rows, cols, f.c), dtype=x.dtype, device=dev)
        starts.append(lambda o: _to_depth(x, xd, f, f.h.s * pads[0], f.w.s * pads[2], o))
        if f.cols:
            # column j, channel (v, a, b, c) of the view = column j + v of x': the runs overlap
            xv = xd.as_strided((p.n, rows, inner.wi, inner.c),
                               (rows * cols * f.c, cols * f.c, f.c, 1))
        else:
            xv = xd
        folded["input"] = xv.permute(0, 3, 1, 2).unsqueeze(1)          # -> (n, g, c, h, w)
    if name in ("fwd", "bwd_data"):
        wd = torch.empty((p.k, f.h.taps, f.w.taps, f.c), dtype=w.dtype, device=dev)
        starts.append(lambda o: _to_depth(w, wd, f, f.h.r, f.w.r, o))
        folded["filter"] = _filter_view(wd, inner)
    if name == "bwd_data":
        dxd = torch.empty((p.n, f.h.size, f.w.size, f.c), dtype=x.dtype, device=dev)
        folded["input"] = dxd.permute(0, 3, 1, 2).unsqueeze(1)
        finishes.append(lambda o: _from_depth(dxd, x, f, 0, 0, o))
    if name == "bwd_weight":
        dwd = torch.empty((p.k, f.h.taps, f.w.taps, f.c), dtype=w.dtype, device=dev)
        folded["filter"] = _filter_view(dwd, inner)
        finishes.append(lambda o: _from_depth(dwd, w, f, f.h.r, f.w.r, o))
    folded.setdefault("output", full["output"])

    inner_tensors = {t: folded[t] for t in p.reads}
    spec = inner_spec(inner, inner_tensors, folded[p.writes], replace(cfg, s2d=None),
                      use_dot, interpreter, input_precision)
    copy = {"num_warps": 4}
    inner_finish = spec.finish

    def start(compile_options):
        for s in starts:
            s(compile_options(copy))

    def finish(compile_options):
        if inner_finish is not None:
            inner_finish(compile_options)
        for s in finishes:
            s(compile_options(copy))

    return replace(spec, workspace=(spec.workspace, folded), start=start, finish=finish)


def _filter_view(t, inner):
    """(k, u, v, c') storage as the inner problem's logical filter (g, k, c, y, x): mode 2's
    U x 1 filter reads each row of taps (v, c') as one run of channels."""
    k, u, v, c = t.shape
    if inner.x == 1 and v > 1:
        t = t.view(k, u, 1, v * c)
    return t.permute(0, 3, 1, 2).unsqueeze(0)

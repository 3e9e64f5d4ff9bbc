"""The CPU reference: float64 convolution in all three directions, as an implicit GEMM on BLAS.

Inputs are widened to float64 and every product and sum is done in float64, so
the result is exact to about 1e-15 relative; the caller rounds it to the output
type, as the kernel's result is. The reduction of each direction is one GEMM
per group, on an im2col matrix built with `unfold` (fwd, bwd_weight), or for
bwd_data a GEMM over k followed by col2im (`fold`) over the taps, in a fixed order:

    fwd         out[n,g,k,ho,wo] = sum over (c, y, x)    c outermost, x innermost
    bwd_data    din[n,g,c,hi,wi] = sum over (y, x) of the sums over k; with block
                                   accumulation, over (k, y, x), k outermost, from a
                                   gather where taps that land on no output add 0
    bwd_weight  dw[g,k,c,y,x]    = sum over (n, ho, wo)  n outermost

Padding is applied explicitly (F.pad), so asymmetric padding is exact.

Memory stays bounded by working on a chunk of the batch at a time (the largest
suite problems would need tens of GiB of im2col matrix otherwise); the chunk
is the largest that keeps the temporaries under `max_temp_bytes`, and at least
one sample (about 80 MiB for the largest suite problem: 256 channels in and
out, 56x56, 3x3). bwd_weight sums its per-chunk partial gradients in chunk
order, so the result is deterministic for a given chunk size.

Emulation options (from the fp16 study, docs/background.md):
  accumulate=N       the reduction, in the order above, is cut into blocks of N
                     consecutive terms; each block is summed in float64 and
                     rounded to fp32, and the blocks are added one after another
                     into an fp32 running sum (acc = fl32(acc + fl32(block))), as
                     hardware dot units with fp32 accumulators do. A last short
                     block is as if padded with zeros.
  flush_subnormals   inputs smaller in magnitude than the smallest normal number
                     of the input type are set to zero first (MI200 matrix cores).
Both are no-ops for integer types: integer dot products are exact on hardware.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from convgen import depth
from convgen.errors import ConvgenError
from convgen.problem import ConvProblem

F64 = torch.float64
# Far below the 2 GiB the suite allows: chunks that stay near the caches are also
# the fastest (64x64x56x56 3x3 forward: ~0.6 s with 32-64 MiB chunks, ~1.5-2.5 s
# with 2 GiB ones, from page faults on fresh memory).
DEFAULT_TEMP_BYTES = 64 * 2**20


def reference(problem: ConvProblem, tensors: dict[str, torch.Tensor], *,
              accumulate: int | None = None, flush_subnormals: bool = False,
              max_temp_bytes: int = DEFAULT_TEMP_BYTES) -> torch.Tensor:
    """The tensor `problem.writes`, in logical order, float64, on the CPU, not rounded.

    `tensors` maps each name in `problem.reads` to a logical-order tensor (any
    strides, any device). `max_temp_bytes` bounds the temporaries (not the result).
    """
    p = problem
    if accumulate is not None and accumulate < 1:
        raise ValueError(f"accumulate must be a positive number of products, got {accumulate}")
    if p.is_3d:
        # one 2-D reference per filter depth tap (depth.py), summed in float64; block
        # accumulation would need blocks that cross the taps
        if accumulate is not None and not p.dtype.is_int:
            raise ConvgenError("block accumulation is not emulated for 3-D problems",
                               field="ref_accumulate")
        out = depth.combine(p, {name: tensors[name].detach().to("cpu") for name in p.reads}, F64,
                            lambda q, tq, z: reference(q, tq, flush_subnormals=flush_subnormals,
                                                       max_temp_bytes=max_temp_bytes))
        assert out.shape == p.logical_shape(p.writes)
        return out
    if p.dtype.is_int:
        accumulate, flush_subnormals = None, False
    tiny = p.dtype.tiny if flush_subnormals else None
    cpu = {name: tensors[name].detach().to("cpu") for name in p.reads}
    nb = batch_chunk(p, max_temp_bytes, accumulate)
    out = p.direction.load("cpu_reference").compute(p, cpu, lambda t: _wide(t, tiny), nb,
                                                    accumulate)
    assert out.shape == p.logical_shape(p.writes)
    return out


def batch_chunk(p: ConvProblem, max_temp_bytes: int = DEFAULT_TEMP_BYTES,
                accumulate: int | None = None) -> int:
    """Samples per chunk: the most whose float64 temporaries fit in `max_temp_bytes` (at least 1)."""
    per = p.direction.load("cpu_reference").per_sample(p, accumulate is not None)
    return max(1, min(p.n, max_temp_bytes // (8 * per)))


def temp_bytes(p: ConvProblem, max_temp_bytes: int = DEFAULT_TEMP_BYTES,
               accumulate: int | None = None) -> int:
    """Bytes the reference holds at once besides its float64 result: one chunk's temporaries."""
    per = p.direction.load("cpu_reference").per_sample(p, accumulate is not None)
    return 8 * per * batch_chunk(p, max_temp_bytes, accumulate)


# float64 elements per sample, counted per temporary each direction makes
def _fwd_per_sample(p: ConvProblem, acc: bool) -> int:
    l_in, l_out, l_pad = p.hi * p.wi, p.ho * p.wo, _padded_pixels(p)
    return (p.g * p.c * (l_in + l_pad)                    # widened input, padded copy
            + p.g * p.c * p.y * p.x * l_out               # im2col matrix
            + p.g * p.k * p.c * p.y * p.x                 # filter broadcast over the batch by matmul
            + p.g * p.k * l_out * (4 if acc else 1))      # GEMM result (+ fp32 sum, block, carry)


def _bwd_data_per_sample(p: ConvProblem, acc: bool) -> int:
    l_in, l_out = p.hi * p.wi, p.ho * p.wo
    if not acc:
        return (p.g * p.k * l_out                         # widened output gradient
                + p.g * p.c * p.y * p.x * l_out           # GEMM result, one column per output pixel
                + p.g * p.c * p.k * p.y * p.x             # filter broadcast
                + p.g * p.c * _padded_pixels(p))          # folded (summed) padded input gradient
    return (p.g * p.k * (2 * l_out + 1)                   # widened output gradient, zero-slot copy
            + p.g * p.k * p.y * p.x * l_in                # gathered matrix
            + p.g * p.c * p.k * p.y * p.x                 # filter broadcast
            + p.g * p.c * l_in * 4)                       # GEMM result, fp32 sum, block, carry


def _bwd_weight_per_sample(p: ConvProblem, acc: bool) -> int:
    l_in, l_out, l_pad = p.hi * p.wi, p.ho * p.wo, _padded_pixels(p)
    return (p.g * p.c * (l_in + l_pad)                    # widened input, padded copy
            + p.g * p.c * p.y * p.x * l_out * (2 if acc else 1)   # im2col (+ flattened copy)
            + p.g * p.k * l_out * (2 if acc else 1)       # widened output gradient (+ copy)
            + p.g * p.k * p.c * p.y * p.x)                # per-sample partial gradients


def _padded_pixels(p: ConvProblem) -> int:
    return (p.hi + p.pad_h_l + p.pad_h_r) * (p.wi + p.pad_w_l + p.pad_w_r)


def _wide(t: torch.Tensor, tiny: float | None) -> torch.Tensor:
    """A contiguous float64 copy, subnormals of the input type flushed when asked."""
    out = t.to(F64, memory_format=torch.contiguous_format, copy=True)
    if tiny is not None:
        out.masked_fill_(out.abs() < tiny, 0.0)
    return out


class _BlockSum:
    """fp32 running sum of fp32-rounded float64 block sums; blocks of `size` terms counted
    across calls, so a block may span two batch chunks (bwd_weight)."""

    def __init__(self, size: int):
        self.size = size
        self.pos = 0
        self.acc: torch.Tensor | None = None
        self.carry: torch.Tensor | None = None

    def add(self, count: int, partial: Callable[[int, int], torch.Tensor]) -> None:
        """Add `count` more terms; `partial(a, b)` is the float64 sum of the terms [a, b) of them."""
        a = 0
        while a < count:
            b = min(count, a + self.size - self.pos % self.size)
            part = partial(a, b)
            self.carry = part if self.carry is None else self.carry.add_(part)
            self.pos += b - a
            if self.pos % self.size == 0:
                self._close()
            a = b

    def _close(self) -> None:
        if self.carry is None:
            return
        block = self.carry.to(torch.float32)
        self.acc = block if self.acc is None else self.acc.add_(block)
        self.carry = None

    def result(self) -> torch.Tensor:
        self._close()
        return self.acc.to(F64)


def _gemm(a: torch.Tensor, b: torch.Tensor, accumulate: int | None) -> torch.Tensor:
    """a (G, M, R) @ b (B, G, R, L) -> (B, G, M, L), the reduction over R in order."""
    if accumulate is None:
        return torch.matmul(a, b)
    s = _BlockSum(accumulate)
    s.add(a.shape[-1], lambda i, j: torch.matmul(a[..., i:j], b[..., i:j, :]))
    return s.result()


def _padded(p: ConvProblem, x: torch.Tensor) -> torch.Tensor:
    """(B, G, C, H, W) float64 -> (B, G*C, H + pads, W + pads)."""
    nb = x.shape[0]
    x = x.reshape(nb, p.g * p.c, p.hi, p.wi)
    return F.pad(x, (p.pad_w_l, p.pad_w_r, p.pad_h_l, p.pad_h_r))


def _im2col(p: ConvProblem, xpad: torch.Tensor) -> torch.Tensor:
    """(B, G*C, Hp, Wp) -> (B, G, C*Y*X, Ho*Wo); unfold orders rows (channel, y, x)."""
    cols = F.unfold(xpad, (p.y, p.x), dilation=(p.dil_h, p.dil_w), stride=(p.stride_h, p.stride_w))
    return cols.view(xpad.shape[0], p.g, p.c * p.y * p.x, p.ho * p.wo)


def _fwd(p, t, wide, nb, accumulate):
    w = wide(t["filter"]).view(p.g, p.k, p.c * p.y * p.x)
    x = t["input"]
    out = torch.empty((p.n, p.g, p.k, p.ho * p.wo), dtype=F64)
    for n0 in range(0, p.n, nb):
        cols = _im2col(p, _padded(p, wide(x[n0:n0 + nb])))
        out[n0:n0 + nb] = _gemm(w, cols, accumulate)
    return out.view(p.logical_shape("output"))


def _bwd_data_index(p: ConvProblem) -> torch.Tensor:
    """For each (y, x, hi, wi): the flat (ho, wo) that tap reads, or Ho*Wo (a zero slot)."""
    def axis(size_in, size_out, taps, pad, stride, dil):
        # rows: tap; columns: input position; t = position in the padded input minus the tap offset
        t = torch.arange(size_in)[None, :] + pad - torch.arange(taps)[:, None] * dil
        ok = (t >= 0) & (t % stride == 0) & (t // stride < size_out)
        return torch.where(ok, t // stride, -1)
    oh = axis(p.hi, p.ho, p.y, p.pad_h_l, p.stride_h, p.dil_h)   # (Y, Hi)
    ow = axis(p.wi, p.wo, p.x, p.pad_w_l, p.stride_w, p.dil_w)   # (X, Wi)
    ok = (oh[:, None, :, None] >= 0) & (ow[None, :, None, :] >= 0)
    flat = oh[:, None, :, None] * p.wo + ow[None, :, None, :]
    return torch.where(ok, flat, p.ho * p.wo).reshape(-1)


def _bwd_data(p, t, wide, nb, accumulate):
    if accumulate is None:
        return _bwd_data_fold(p, t, wide, nb)
    # filter (G, K, C, Y, X) -> (G, C, K*Y*X): the GEMM's A, reduction order (k, y, x)
    w = wide(t["filter"]).permute(0, 2, 1, 3, 4).reshape(p.g, p.c, p.k * p.y * p.x)
    idx = _bwd_data_index(p)
    dy = t["output"]
    out = torch.empty((p.n, p.g, p.c, p.hi * p.wi), dtype=F64)
    for n0 in range(0, p.n, nb):
        d = wide(dy[n0:n0 + nb])
        b = d.shape[0]
        d = F.pad(d.view(b * p.g * p.k, p.ho * p.wo), (0, 1))
        cols = torch.index_select(d, 1, idx).view(b, p.g, p.k * p.y * p.x, p.hi * p.wi)
        del d
        out[n0:n0 + nb] = _gemm(w, cols, accumulate)
    return out.view(p.logical_shape("input"))


def _bwd_data_fold(p, t, wide, nb):
    """bwd_data as the forward pass's transpose: one GEMM over k per output pixel and tap,
    (C*Y*X, K) @ (K, Ho*Wo), then col2im (F.fold) adds each tap's column into the padded
    input gradient. Its work is the forward's; the gather above multiplies by the zeros of
    every tap that lands on no output (3/4 of them at stride 2: the ResNet-50 stem's took
    9-13 s at batch 8, a 1.3 GB gathered matrix per sample). The sum's order differs from
    (k, y, x), which float64 does not see; block accumulation keeps the gather."""
    w = wide(t["filter"]).permute(0, 2, 3, 4, 1).reshape(p.g, p.c * p.y * p.x, p.k)
    dy = t["output"]
    hp, wp = p.hi + p.pad_h_l + p.pad_h_r, p.wi + p.pad_w_l + p.pad_w_r
    out = torch.empty((p.n, p.g, p.c, p.hi, p.wi), dtype=F64)
    for n0 in range(0, p.n, nb):
        d = wide(dy[n0:n0 + nb])
        b = d.shape[0]
        cols = torch.matmul(w, d.view(b, p.g, p.k, p.ho * p.wo))      # (B, G, C*Y*X, Ho*Wo)
        folded = F.fold(cols.view(b, p.g * p.c * p.y * p.x, p.ho * p.wo), (hp, wp), (p.y, p.x),
                        dilation=(p.dil_h, p.dil_w), stride=(p.stride_h, p.stride_w))
        out[n0:n0 + nb] = folded.view(b, p.g, p.c, hp, wp)[..., p.pad_h_l:p.pad_h_l + p.hi,
                                                          p.pad_w_l:p.pad_w_l + p.wi]
    return out.view(p.logical_shape("input"))


def _bwd_weight(p, t, wide, nb, accumulate):
    x, dy = t["input"], t["output"]
    r, l_out = p.c * p.y * p.x, p.ho * p.wo
    total = torch.zeros((p.g, p.k, r), dtype=F64) if accumulate is None else None
    sums = _BlockSum(accumulate) if accumulate is not None else None
    for n0 in range(0, p.n, nb):
        cols = _im2col(p, _padded(p, wide(x[n0:n0 + nb])))           # (B, G, R, L)
        d = wide(dy[n0:n0 + nb]).view(-1, p.g, p.k, l_out)           # (B, G, K, L)
        b = d.shape[0]
        if sums is None:
            part = torch.matmul(d, cols.transpose(-1, -2))           # (B, G, K, R)
            for i in range(b):                                      # fixed order: sample by sample
                total += part[i]
        else:
            # reduction axis (n, ho, wo) flattened, so blocks may span samples
            df = d.permute(1, 2, 0, 3).reshape(p.g, p.k, b * l_out)
            cf = cols.permute(1, 0, 3, 2).reshape(p.g, b * l_out, r)
            del cols, d
            sums.add(b * l_out, lambda i, j: torch.matmul(df[..., i:j], cf[:, i:j, :]))
    res = total if sums is None else sums.result()
    return res.view(p.logical_shape("filter"))


@dataclass(frozen=True)
class DirectionReference:
    """One direction's CPU reference (named by its row in directions.py)."""
    per_sample: Callable      # (problem, accumulate?) -> float64 temporaries per sample
    compute: Callable         # (problem, cpu tensors, widen, batch chunk, accumulate) -> result


FWD = DirectionReference(_fwd_per_sample, _fwd)
BWD_DATA = DirectionReference(_bwd_data_per_sample, _bwd_data)
BWD_WEIGHT = DirectionReference(_bwd_weight_per_sample, _bwd_weight)

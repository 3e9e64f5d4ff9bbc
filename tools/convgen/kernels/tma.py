"""Tensor-descriptor conv kernels (TMA on Hopper): stride 1 (or a strided 1x1 filter), one
group, channels innermost.

The three directions as implicit GEMMs (directions.py), with the pixels of a tile taken
as a box, BI images x BH rows x BW columns (`geometry.pixel_box`), instead of a run of flat
pixel indices (a 1x1 stride-1 unpadded problem, whose pixels meet no neighbour, takes its
n*h*w pixels as BI-long runs: `geometry.flat_pixels`). For stride 1 the input pixels that one filter tap meets are then the same
box shifted by the tap's offset (a 1x1 filter with a stride and no padding reads a
strided view of the input instead: fwd and bwd_weight), so each reduction step is one box
load of the input (or output gradient) and one of the filter, through tensor descriptors.
In bwd_data a stride of 2 takes the input gradient as up to four phase views, the pixels
whose row and column leave remainders (a, b) by the stride: each program writes whole
boxes of one phase, and each phase has its own taps. fwd with a stride takes one
descriptor over all phases at once, (n, i, a, j, b*C + c) for input row SH*i + a and
column SW*j + b, so each tap's pixels are one box of it and the loop stays one loop over
(tap, channel block); bwd_weight takes the same view where the stride divides the
input's rows and columns (`geometry.phase_view`), else four phase views, each tap reading
boxes of one. (Four phase descriptors summed in four pipelined loops in a row compiled
into wrong results on the H100 with Triton 3.6 for 128-row tiles, though the interpreter
agreed; four loops behind a branch each kept their own pipeline buffers; docs/traps.md.)
So:

  * the copy engine (TMA on Hopper) moves whole boxes into shared memory asynchronously,
    so the loop has no address arithmetic, no masks and no per-row gather;
  * a box that reaches past an edge (the padding, the last partial tile, channels past C)
    reads zeros, which is exactly the convolution's zero padding, also for negative
    coordinates; stores clip at the edges the same way.

The filter tap stays outside and channel blocks inside, in one flat loop as in the pointer
kernels. bwd_weight's reduction walks pixel boxes, split into parts as in
conv_bwd_weight.py, whose fp32 sums split_sum_kernel adds in part order, or (`streamk`)
shared out as stream-K, every (tile, box) step in a row and an equal run of it per
program, a tile that programs share summed by the last of them. fwd may share out the
tiles left after its last whole wave the same way (`tail`: conv_fwd_tail_kernel). Where this path
cannot go, `geometry.tma_unsupported` says why and config.validate refuses `tma=1`. Triton
lowers descriptors to TMA copies on sm90+; the interpreter emulates them (CI tests them).
"""
from __future__ import annotations

from dataclasses import dataclass

import triton
import triton.language as tl

from convgen import backend as backends
from convgen.errors import ConvgenError
from convgen.kernels import spec
from convgen.kernels.common import mac, tile_ids
from convgen.kernels.geometry import (bwd_weight_parts, cdiv, flat_pixels, phase_view, pixel_box,
                                      pixel_grid, streamk_steps, strided_view, tail_programs)
from convgen.problem import LOGICAL

SUM_BLOCK = 1024


@triton.jit
def _box(t, th, tw, BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr):
    """Box number t of the (image, row, column) grid -> its first image, row and column."""
    return (t // (th * tw)) * BI, ((t // tw) % th) * BH, (t % tw) * BW


@triton.jit
def _output_tile(N, H, W, COLS, BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's C tile, in GROUP_M order: its box of pixels (first image, row and
    column of an N x H x W grid) and its first column of COLS."""
    return _tile_at(tl.program_id(0), N, H, W, COLS, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)


@triton.jit
def _tile_at(t, N, H, W, COLS, BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """C tile number t, in GROUP_M order: (first image, row, column, first column of COLS)."""
    th = tl.cdiv(H, BH)
    tw = tl.cdiv(W, BW)
    boxes = tl.cdiv(N, BI) * th * tw
    pid_m, pid_n = tile_ids(t, boxes * BLOCK_M, COLS, BLOCK_M, BLOCK_N, GROUP_M)
    n0, h0, w0 = _box(pid_m, th, tw, BI, BH, BW)
    return n0, h0, w0, pid_n * BLOCK_N


@triton.jit
def _tile_count(N, H, W, COLS, BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                BLOCK_N: tl.constexpr):
    """C tiles of an N x H x W grid of pixels (boxes) by COLS columns."""
    return tl.cdiv(N, BI) * tl.cdiv(H, BH) * tl.cdiv(W, BW) * tl.cdiv(COLS, BLOCK_N)


@triton.jit
def _tap_block(r, NB, X: tl.constexpr, BLOCK: tl.constexpr):
    """Reduction step r -> filter tap (fy, fx) and the first channel of its block r % NB."""
    tap = r // NB
    fy = tap // X
    return fy, tap - fy * X, (r - tap * NB) * BLOCK


@triton.jit
def _phase_taps(a, b, PH, PW, Y: tl.constexpr, X: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr):
    """The taps (fy0 + SH*i, fx0 + SW*j), i < ty, j < tx, that meet input rows of remainder
    a and columns of remainder b by the stride: SH*ho + fy - PH = a (mod SH) (no dilation)."""
    fy0 = (a + PH) % SH
    fx0 = (b + PW) % SW
    return fy0, fx0, tl.cdiv(Y - fy0, SH), tl.cdiv(X - fx0, SW)


@triton.jit
def _phase_tap_block(r, NB, tx, fy0, fx0, SH: tl.constexpr, SW: tl.constexpr, BLOCK: tl.constexpr):
    """Reduction step r of one phase -> its filter tap (fy, fx) and first channel."""
    t = r // NB
    ty = t // tx
    return fy0 + ty * SH, fx0 + (t - ty * tx) * SW, (r - t * NB) * BLOCK


@triton.jit
def _tap_phase(fy, fx, PH, PW, SH: tl.constexpr, SW: tl.constexpr):
    """bwd_weight's tap (fy, fx) on a strided input: it reads input rows SH*ho + fy - PH,
    of phase pa (their remainder by SH), at rows ho + dh of that phase (an exact division);
    columns alike. -> (pa, pb, dh, dw)."""
    pa = (fy + SH * PH - PH) % SH
    pb = (fx + SW * PW - PW) % SW
    return pa, pb, (fy - PH - pa) // SH, (fx - PW - pb) // SW


@triton.jit
def _store_tile(desc, acc, n0, h0, w0, c0, BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HALVES: tl.constexpr):
    """A persistent kernel's C tile into its box (first image, row, column, channel): whole,
    or (HALVES = 2) as two halves of its columns, whose store needs half the shared memory
    (room for a fourth pipeline stage of 128x256 tiles on an H100)."""
    if HALVES == 1:
        desc.store([n0, h0, w0, c0], acc.to(desc.dtype).reshape(BI, BH, BW, BLOCK_N))
    else:
        lo, hi = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        desc.store([n0, h0, w0, c0], lo.to(desc.dtype).reshape(BI, BH, BW, BLOCK_N // 2))
        desc.store([n0, h0, w0, c0 + BLOCK_N // 2], hi.to(desc.dtype).reshape(BI, BH, BW, BLOCK_N // 2))


@triton.jit
def _fwd_tile(x_desc, w_desc, n0, ho0, wo0, k0, C, PH, PW,
              Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
              USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
              DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              SH: tl.constexpr, SW: tl.constexpr, SWAP: tl.constexpr):
    """fwd's C tile of output pixels from (n0, ho0, wo0), output channels from k0."""
    return _fwd_steps(x_desc, w_desc, n0, ho0, wo0, k0, C, PH, PW, 0, Y * X * tl.cdiv(C, BLOCK_K),
                      Y, X, DH, DW, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE,
                      BLOCK_M, BLOCK_N, BLOCK_K, SH, SW, SWAP)


@triton.jit
def _fwd_steps(x_desc, w_desc, n0, ho0, wo0, k0, C, PH, PW, r0, r1,
               Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
               USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
               DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               SH: tl.constexpr, SW: tl.constexpr, SWAP: tl.constexpr):
    """fwd's reduction steps r0..r1 of the C tile at (n0, ho0, wo0), k0: its fp32 sum.
    SWAP computes it transposed, the filter's 2-d block first (config.py's swap_ab says why)."""
    CB = tl.cdiv(C, BLOCK_K)
    acc = _acc_zeros(BLOCK_M, BLOCK_N, SWAP)
    for r in range(r0, r1):
        # GEMM reduction R: (tap, channel block); the tap shifts the input box
        fy, fx, c0 = _tap_block(r, CB, X, BLOCK_K)
        if SH * SW == 1:
            a = x_desc.load([n0, ho0 + fy * DH - PH, wo0 + fx * DW - PW, c0]).reshape(BLOCK_M, BLOCK_K)
        else:
            # output row ho reads input row SH*ho + fy*DH - PH = SH*(ho + di) + pa: one phase
            # (pa, pb) per tap, and the box shifted by (di, dj) in it (an exact division)
            pa = (fy * DH - PH + SH * PH) % SH
            pb = (fx * DW - PW + SW * PW) % SW
            a = x_desc.load([n0, ho0 + (fy * DH - PH - pa) // SH, pa,
                             wo0 + (fx * DW - PW - pb) // SW, pb * C + c0]).reshape(BLOCK_M, BLOCK_K)
        if SWAP:
            # GEMM reduction R as a column of the filter's (k, y*x*c) view
            b = w_desc.load([k0, (fy * X + fx) * C + c0])
            acc = mac(acc, b, a.T, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
        else:
            b = w_desc.load([k0, fy, fx, c0]).reshape(BLOCK_N, BLOCK_K)
            acc = mac(acc, a, b.T, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    return _acc_tile(acc, SWAP)


@triton.jit
def _streamk_share(acc, p, start, first, tile_steps, STEPS, tile, ws_ptr, count_ptr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Program p's share (from step `start` on) of a tile (from step `first`, `tile_steps`
    long) that other programs share too (bwd_weight's stream-K): its fp32 partial goes to the workspace, slot 0 of
    p's two if the tile is the one p starts inside of, else slot 1 (a program shares only
    its first and last tiles). Returns (True, the tile's sum: every share's partial added
    in program order, the same sum whoever finishes last) to the last share to finish,
    else (False, zeros)."""
    tile_part = (tl.arange(0, BLOCK_M) * BLOCK_N)[:, None] + tl.arange(0, BLOCK_N)[None, :]
    slot = tl.where(start > first, 0, 1)
    tl.store(ws_ptr + (p * 2 + slot) * (BLOCK_M * BLOCK_N) + tile_part, acc)
    # every thread's partial stored before the count says so (release); the last to count
    # reads the others' (acquire, and through L2: .cg)
    tl.debug_barrier()
    q0 = first // STEPS
    q1 = (first + tile_steps - 1) // STEPS
    last = tl.atomic_add(count_ptr + tile, 1, sem="acq_rel") == q1 - q0
    total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if last:
        for q in range(q0, q1 + 1):
            q_slot = tl.where(q * STEPS > first, 0, 1)
            total += tl.load(ws_ptr + (q * 2 + q_slot) * (BLOCK_M * BLOCK_N) + tile_part,
                             cache_modifier=".cg")
        # the count back to zero for the next launch with this workspace
        tl.atomic_xchg(count_ptr + tile, 0, sem="relaxed")
    return last, total


@triton.jit
def conv_fwd_tma_kernel(
    x_desc, w_desc, y_desc, C, K, N, HO, WO, PH, PW,
    Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
    SH: tl.constexpr = 1, SW: tl.constexpr = 1, NUM_SMS: tl.constexpr = 0,
    HALVES: tl.constexpr = 1, SWAP: tl.constexpr = 0,
):
    # x: (n, h, w, c), w: (k, y, x, c), y: (n, ho, wo, k); with a stride, x is the phase
    # view (n, i, a, j, b*C + c) of input row SH*i + a and column SW*j + b
    if NUM_SMS == 0:
        # GEMM rows M: a box of output pixels; columns N: output channels k0..
        n0, ho0, wo0, k0 = _output_tile(N, HO, WO, K, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)
        acc = _fwd_tile(x_desc, w_desc, n0, ho0, wo0, k0, C, PH, PW, Y, X, DH, DW, USE_DOT,
                        INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE, BLOCK_M, BLOCK_N,
                        BLOCK_K, SH, SW, SWAP)
        y_desc.store([n0, ho0, wo0, k0], acc.to(y_desc.dtype).reshape(BI, BH, BW, BLOCK_N))
    else:
        # persistent: NUM_SMS programs walk the tiles; the flattened loop lets the pipeline
        # load the next tile's first steps while this tile's result is stored (short
        # reductions, 1x1 filters, spend much of a tile there). The store's tile is counted
        # apart (t_out), as in Triton's persistent matmul, so no value spans both ends
        t_out = tl.program_id(0) - NUM_SMS
        tiles = _tile_count(N, HO, WO, K, BI, BH, BW, BLOCK_N)
        for t in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
            # GEMM rows M: tile t's box of output pixels; columns N: output channels k0..
            n0, ho0, wo0, k0 = _tile_at(t, N, HO, WO, K, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)
            acc = _fwd_tile(x_desc, w_desc, n0, ho0, wo0, k0, C, PH, PW, Y, X, DH, DW, USE_DOT,
                            INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE, BLOCK_M, BLOCK_N,
                            BLOCK_K, SH, SW, SWAP)
            t_out += NUM_SMS
            n1, h1, w1, k1 = _tile_at(t_out, N, HO, WO, K, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)
            _store_tile(y_desc, acc, n1, h1, w1, k1, BI, BH, BW, BLOCK_M, BLOCK_N, HALVES)


@triton.jit
def conv_fwd_tail_kernel(
    x_desc, w_desc, y_desc, ws_ptr, count_ptr, C, K, N, HO, WO, PH, PW, FULL,
    Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr, TAIL: tl.constexpr,
    SH: tl.constexpr = 1, SW: tl.constexpr = 1, SWAP: tl.constexpr = 0,
):
    """fwd whose last, partial wave is cut finer (`tail`): programs below FULL (whole waves
    of one per SM) take a whole tile each, as conv_fwd_tma_kernel; each tile after them is
    shared by TAIL programs, one run of its reduction steps each, so the tiles left over
    take 1/TAIL of a wave instead of a whole one (where their TAIL x count programs fit
    one wave). A shared tile's fp32 parts go to its TAIL
    workspace slots; the last part to finish adds them in part order (the same sum
    whoever finishes last), stores the tile and sets its count back to zero."""
    R = Y * X * tl.cdiv(C, BLOCK_K)
    p = tl.program_id(0)
    q = tl.maximum(p - FULL, 0)
    part = q % TAIL
    whole = p < FULL
    tile = tl.where(whole, p, FULL + q // TAIL)
    # GEMM rows M: the tile's box of output pixels; columns N: output channels k0..
    n0, ho0, wo0, k0 = _tile_at(tile, N, HO, WO, K, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)
    # GEMM reduction R: the whole tile's steps, or part `part` of TAIL
    lo = tl.where(whole, 0, part * R // TAIL)
    hi = tl.where(whole, R, (part + 1) * R // TAIL)
    acc = _fwd_steps(x_desc, w_desc, n0, ho0, wo0, k0, C, PH, PW, lo, hi, Y, X, DH, DW,
                     USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE,
                     BLOCK_M, BLOCK_N, BLOCK_K, SH, SW, SWAP)
    store = whole
    if p >= FULL:
        tile_part = (tl.arange(0, BLOCK_M) * BLOCK_N)[:, None] + tl.arange(0, BLOCK_N)[None, :]
        slots = ws_ptr + (tile - FULL) * TAIL * (BLOCK_M * BLOCK_N)
        tl.store(slots + part * (BLOCK_M * BLOCK_N) + tile_part, acc)
        # every thread's part stored before the count says so (release); the last to
        # count reads the others' (acquire, and through L2: .cg)
        tl.debug_barrier()
        store = tl.atomic_add(count_ptr + tile - FULL, 1, sem="acq_rel") == TAIL - 1
        if store:
            acc = tl.load(slots + tile_part, cache_modifier=".cg")
            for j in tl.static_range(1, TAIL):
                acc += tl.load(slots + j * (BLOCK_M * BLOCK_N) + tile_part, cache_modifier=".cg")
            tl.atomic_xchg(count_ptr + tile - FULL, 0, sem="relaxed")
    if store:
        y_desc.store([n0, ho0, wo0, k0], acc.to(y_desc.dtype).reshape(BI, BH, BW, BLOCK_N))


@triton.jit
def _bwd_data_tile(y_desc, w_desc, n0, h0, w0, c0, C, K, PH, PW,
                   Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
                   USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                   DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   SWAP: tl.constexpr):
    """Stride-1 bwd_data's C tile of input pixels from (n0, h0, w0), input channels from c0
    (transposed with SWAP, as _bwd_data_product keeps it)."""
    acc = _acc_zeros(BLOCK_M, BLOCK_N, SWAP)
    KB = tl.cdiv(K, BLOCK_K)
    for r in range(0, Y * X * KB):
        # GEMM reduction R: (tap, output-channel block); the output pixel that tap (fy, fx)
        # takes input pixel h from is h + PH - fy*DH (stride 1)
        fy, fx, k0 = _tap_block(r, KB, X, BLOCK_K)
        a = y_desc.load([n0, h0 + PH - fy * DH, w0 + PW - fx * DW, k0]).reshape(BLOCK_M, BLOCK_K)
        acc = _bwd_data_product(acc, a, w_desc, k0, fy, fx, c0, C, X, USE_DOT, INPUT_PRECISION,
                                DOT_UPCAST, ACC_INT, MAX_IMPRECISE, BLOCK_M, BLOCK_N, BLOCK_K, SWAP)
    return _acc_tile(acc, SWAP)


@triton.jit
def _acc_zeros(BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SWAP: tl.constexpr):
    """The fp32 accumulator of a (pixels x channels) tile, transposed with SWAP."""
    if SWAP:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    return acc


@triton.jit
def _bwd_data_product(acc, a, w_desc, k0, fy, fx, c0, C, X: tl.constexpr,
                      USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                      DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      SWAP: tl.constexpr):
    """acc + the output-gradient block `a` (pixels x k) times tap (fy, fx)'s filter block
    (k0.., c0..). SWAP keeps the tile transposed, the filter's 2-d block first (config.py's
    swap_ab says why); that block's columns past C are the next tap's, and make input
    channels past C, which no store writes."""
    if SWAP:
        # GEMM reduction R: rows k0.. of the (k, y*x*c) view; columns N: the tap's c0..
        b = w_desc.load([k0, (fy * X + fx) * C + c0])
        acc = mac(acc, b.T, a.T, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    else:
        b = w_desc.load([k0, fy, fx, c0]).reshape(BLOCK_K, BLOCK_N)
        acc = mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    return acc


@triton.jit
def _acc_tile(acc, SWAP: tl.constexpr):
    """The (pixels x channels) tile of an accumulator _acc_zeros made."""
    if SWAP:
        out = acc.T
    else:
        out = acc
    return out


@triton.jit
def conv_bwd_data_tma_kernel(
    y_desc, w_desc, x_desc, C, K, N, HI, WI, PH, PW,
    Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
    x_desc1=None, x_desc2=None, x_desc3=None, SH: tl.constexpr = 1, SW: tl.constexpr = 1,
    NUM_SMS: tl.constexpr = 0, HALVES: tl.constexpr = 1, SWAP: tl.constexpr = 0,
):
    # y (output gradient): (n, ho, wo, k), w: (k, y, x, c), x (input gradient): (n, h, w, c)
    if SH * SW == 1 and NUM_SMS == 0:
        # GEMM rows M: a box of input pixels; columns N: input channels c0..
        n0, h0, w0, c0 = _output_tile(N, HI, WI, C, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)
        acc = _bwd_data_tile(y_desc, w_desc, n0, h0, w0, c0, C, K, PH, PW, Y, X, DH, DW, USE_DOT,
                             INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE, BLOCK_M, BLOCK_N,
                             BLOCK_K, SWAP)
        x_desc.store([n0, h0, w0, c0], acc.to(x_desc.dtype).reshape(BI, BH, BW, BLOCK_N))
    elif SH * SW == 1:
        # persistent, as in conv_fwd_tma_kernel
        t_out = tl.program_id(0) - NUM_SMS
        tiles = _tile_count(N, HI, WI, C, BI, BH, BW, BLOCK_N)
        for t in tl.range(tl.program_id(0), tiles, NUM_SMS, flatten=True):
            # GEMM rows M: tile t's box of input pixels; columns N: input channels c0..
            n0, h0, w0, c0 = _tile_at(t, N, HI, WI, C, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)
            acc = _bwd_data_tile(y_desc, w_desc, n0, h0, w0, c0, C, K, PH, PW, Y, X, DH, DW, USE_DOT,
                                 INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE, BLOCK_M,
                                 BLOCK_N, BLOCK_K, SWAP)
            t_out += NUM_SMS
            n1, h1, w1, c1 = _tile_at(t_out, N, HI, WI, C, BI, BH, BW, BLOCK_M, BLOCK_N, GROUP_M)
            _store_tile(x_desc, acc, n1, h1, w1, c1, BI, BH, BW, BLOCK_M, BLOCK_N, HALVES)
    else:
        # GEMM rows M: a box of pixels of phase view ph (grid axis 1), rows SH*i + pa and
        # columns SW*j + pb of the input gradient; columns N: input channels c0..
        ph = tl.program_id(1)
        pa = ph // SW
        pb = ph - pa * SW
        n0, i0, j0, c0 = _output_tile(N, tl.cdiv(HI, SH), tl.cdiv(WI, SW), C, BI, BH, BW,
                                      BLOCK_M, BLOCK_N, GROUP_M)
        acc = _acc_zeros(BLOCK_M, BLOCK_N, SWAP)
        KB = tl.cdiv(K, BLOCK_K)
        fy0, fx0, ty, tx = _phase_taps(pa, pb, PH, PW, Y, X, SH, SW)
        for r in range(0, ty * tx * KB):
            # GEMM reduction R: (tap of this phase, output-channel block); input row SH*i + pa
            # takes output row i + (pa + PH - fy) / SH, an exact division. A phase no tap
            # reaches (a strided 1x1 filter's skipped pixels) keeps its zeros
            fy, fx, k0 = _phase_tap_block(r, KB, tx, fy0, fx0, SH, SW, BLOCK_K)
            a = y_desc.load([n0, i0 + (pa + PH - fy) // SH, j0 + (pb + PW - fx) // SW,
                             k0]).reshape(BLOCK_M, BLOCK_K)
            acc = _bwd_data_product(acc, a, w_desc, k0, fy, fx, c0, C, X, USE_DOT, INPUT_PRECISION,
                                    DOT_UPCAST, ACC_INT, MAX_IMPRECISE, BLOCK_M, BLOCK_N, BLOCK_K,
                                    SWAP)
        out = _acc_tile(acc, SWAP).to(x_desc.dtype).reshape(BI, BH, BW, BLOCK_N)
        if ph == 0:
            x_desc.store([n0, i0, j0, c0], out)
        elif ph == 1:
            x_desc1.store([n0, i0, j0, c0], out)
        elif ph == 2:
            x_desc2.store([n0, i0, j0, c0], out)
        else:
            x_desc3.store([n0, i0, j0, c0], out)


@triton.jit
def _wgmma_wait(ON: tl.constexpr):
    """On sm90, wait for every wgmma in flight. bwd_weight's first dot operand is a box
    reshaped and transposed, which Triton 3.6 feeds from registers (HGMMA R.., R..); it
    leaves a step's wgmma groups in flight at the loop's back edge, and the ptxas it ships
    (CUDA 12.8) then loads the next step's operand into the registers they still read: whole
    16-row bands of a tile came out wrong, a different number each run, on the H100
    (docs/traps.md; convaudit/wgmma_hazard.py finds it in the SASS). Waiting here made a
    config 0-9% slower (docs/data/bwd-weight-wgmma-wait-h100.log)."""
    if ON:
        tl.inline_asm_elementwise("wgmma.wait_group.sync.aligned 0;", "=r", [], dtype=tl.int32,
                                  is_pure=False, pack=1)


@triton.jit
def _wgrad_steps(acc, y_desc, x_desc, t0, t1, th, tw, k0, c0, fy, fx, C, PH, PW,
                 DH: tl.constexpr, DW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                 BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
                 DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
                 WGMMA_WAIT: tl.constexpr = False):
    """bwd_weight's reduction steps t0..t1 (output-pixel boxes) of tap (fy, fx) into acc, on
    one input descriptor: stride 1 (or a strided view), or fwd's phase view (SH*SW > 1).
    WGMMA_WAIT (sm90): each step first waits for the last step's wgmma (_wgmma_wait)."""
    BLOCK_R: tl.constexpr = BI * BH * BW
    if SH * SW == 1:
        for t in range(t0, t1):
            _wgmma_wait(WGMMA_WAIT)
            # GEMM reduction R: output-pixel boxes; the tap shifts the input box
            n0, ho0, wo0 = _box(t, th, tw, BI, BH, BW)
            a = y_desc.load([n0, ho0, wo0, k0]).reshape(BLOCK_R, BLOCK_M)
            b = x_desc.load([n0, ho0 + fy * DH - PH, wo0 + fx * DW - PW, c0]).reshape(BLOCK_R, BLOCK_N)
            acc = mac(acc, a.T, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    else:
        # channels past C in the row of phase pb + 1 meet only columns past C of the tile,
        # which the store leaves out
        pa, pb, dh, dw = _tap_phase(fy, fx, PH, PW, SH, SW)
        for t in range(t0, t1):
            _wgmma_wait(WGMMA_WAIT)
            # GEMM reduction R: output-pixel boxes; the tap's phase and shift
            n0, ho0, wo0 = _box(t, th, tw, BI, BH, BW)
            a = y_desc.load([n0, ho0, wo0, k0]).reshape(BLOCK_R, BLOCK_M)
            b = x_desc.load([n0, ho0 + dh, pa, wo0 + dw, pb * C + c0]).reshape(BLOCK_R, BLOCK_N)
            acc = mac(acc, a.T, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    return acc


@triton.jit
def conv_bwd_weight_tma_kernel(
    y_desc, x_desc, w_ptr, ws_ptr, C, K, N, HO, WO, PH, PW,
    sw_k, sw_c, sw_y, sw_x, PER,
    Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr,
    BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
    x_desc1=None, x_desc2=None, x_desc3=None, SH: tl.constexpr = 1, SW: tl.constexpr = 1,
    PHASE_VIEW: tl.constexpr = False, WGMMA_WAIT: tl.constexpr = False,
):
    # y (output gradient): (n, ho, wo, k), x: (n, h, w, c), or with PHASE_VIEW fwd's phase
    # view (n, i, a, j, b*C + c); grid: (k tile, c tile), tap, part
    tap = tl.program_id(1)
    s = tl.program_id(2)
    tiles_c = tl.cdiv(C, BLOCK_N)
    # GEMM rows M: output channels k0..; columns N: input channels c0.. of filter tap (fy, fx)
    k0 = (tl.program_id(0) // tiles_c) * BLOCK_M
    c0 = (tl.program_id(0) % tiles_c) * BLOCK_N
    fy = tap // X
    fx = tap - fy * X
    th = tl.cdiv(HO, BH)
    tw = tl.cdiv(WO, BW)
    boxes = tl.cdiv(N, BI) * th * tw
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if SH * SW == 1 or PHASE_VIEW:
        # part s's boxes. The phase view keeps a strided problem to one loop: four loops, one
        # per phase view, each kept its own pipeline buffers (4x the shared memory of a
        # stride-1 program: one program per SM where two fit; H100, 3x3 512->512 on 7x7
        # outputs: 0.29 against 0.15 ms)
        acc = _wgrad_steps(acc, y_desc, x_desc, s * PER, tl.minimum(boxes, s * PER + PER), th, tw,
                           k0, c0, fy, fx, C, PH, PW, DH, DW, SH, SW, BI, BH, BW, BLOCK_M, BLOCK_N,
                           USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE, WGMMA_WAIT)
    else:
        # input rows and columns not multiples of the stride: one phase view per remainder,
        # each a stride-1 input that the tap shifts by (dh, dw)
        pa, pb, dh, dw = _tap_phase(fy, fx, PH, PW, SH, SW)
        ph = pa * SW + pb
        t0 = s * PER
        t1 = tl.minimum(boxes, s * PER + PER)
        if ph == 0:
            acc = _wgrad_steps(acc, y_desc, x_desc, t0, t1, th, tw, k0, c0, dh, dw, C, 0, 0, 1, 1, 1, 1,
                               BI, BH, BW, BLOCK_M, BLOCK_N, USE_DOT, INPUT_PRECISION, DOT_UPCAST,
                               ACC_INT, MAX_IMPRECISE, WGMMA_WAIT)
        elif ph == 1:
            acc = _wgrad_steps(acc, y_desc, x_desc1, t0, t1, th, tw, k0, c0, dh, dw, C, 0, 0, 1, 1, 1, 1,
                               BI, BH, BW, BLOCK_M, BLOCK_N, USE_DOT, INPUT_PRECISION, DOT_UPCAST,
                               ACC_INT, MAX_IMPRECISE, WGMMA_WAIT)
        elif ph == 2:
            acc = _wgrad_steps(acc, y_desc, x_desc2, t0, t1, th, tw, k0, c0, dh, dw, C, 0, 0, 1, 1, 1, 1,
                               BI, BH, BW, BLOCK_M, BLOCK_N, USE_DOT, INPUT_PRECISION, DOT_UPCAST,
                               ACC_INT, MAX_IMPRECISE, WGMMA_WAIT)
        else:
            acc = _wgrad_steps(acc, y_desc, x_desc3, t0, t1, th, tw, k0, c0, dh, dw, C, 0, 0, 1, 1, 1, 1,
                               BI, BH, BW, BLOCK_M, BLOCK_N, USE_DOT, INPUT_PRECISION, DOT_UPCAST,
                               ACC_INT, MAX_IMPRECISE, WGMMA_WAIT)
    rm = k0 + tl.arange(0, BLOCK_M)
    rn = c0 + tl.arange(0, BLOCK_N)
    ok = (rm < K)[:, None] & (rn < C)[None, :]
    if SPLIT == 1:
        # C tile -> filter gradient (k, c, y, x)
        out = w_ptr + (rm * sw_k)[:, None] + (rn * sw_c + fy * sw_y + fx * sw_x)[None, :]
        tl.store(out, acc.to(w_ptr.dtype.element_ty), mask=ok)
    else:
        # C tile -> part s's fp32 partials (s, k, tap, c), added up by split_sum_kernel
        part = ws_ptr + ((s * K + rm) * (Y * X * C))[:, None] + (tap * C + rn)[None, :]
        tl.store(part, acc, mask=ok)


@triton.jit
def conv_bwd_weight_streamk_kernel(
    y_desc, x_desc, w_ptr, ws_ptr, count_ptr, C, K, N, HO, WO, PH, PW,
    sw_k, sw_c, sw_y, sw_x, STEPS,
    Y: tl.constexpr, X: tl.constexpr, DH: tl.constexpr, DW: tl.constexpr,
    USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BI: tl.constexpr, BH: tl.constexpr, BW: tl.constexpr,
    SH: tl.constexpr = 1, SW: tl.constexpr = 1, PHASE_VIEW: tl.constexpr = False,
    WGMMA_WAIT: tl.constexpr = False,
):
    """bwd_weight as stream-K (`streamk`): every (tile, reduction box) step in one row, tile
    after tile, cut into equal runs of STEPS, one per program; a tile two or more programs
    share is summed by _streamk_share. One input descriptor: a strided input must come as
    the phase view."""
    tl.static_assert(SH * SW == 1 or PHASE_VIEW)
    tiles_c = tl.cdiv(C, BLOCK_N)
    tiles_kc = tl.cdiv(K, BLOCK_M) * tiles_c
    th = tl.cdiv(HO, BH)
    tw = tl.cdiv(WO, BW)
    boxes = tl.cdiv(N, BI) * th * tw
    p = tl.program_id(0)
    start = p * STEPS
    end = tl.minimum(start + STEPS, tiles_kc * Y * X * boxes)
    for tile in range(start // boxes, tl.cdiv(end, boxes)):
        # tiles in (tap, k tile, c tile) order: programs side by side share a tap's boxes
        tap = tile // tiles_kc
        fy = tap // X
        fx = tap - fy * X
        # GEMM rows M: output channels k0..; columns N: input channels c0.. of tap (fy, fx)
        k0 = (tile % tiles_kc // tiles_c) * BLOCK_M
        c0 = (tile % tiles_c) * BLOCK_N
        # GEMM reduction R: this program's share of the tile's boxes, lo..hi
        first = tile * boxes
        lo = tl.maximum(start - first, 0)
        hi = tl.minimum(end - first, boxes)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        acc = _wgrad_steps(acc, y_desc, x_desc, lo, hi, th, tw, k0, c0, fy, fx, C, PH, PW,
                           DH, DW, SH, SW, BI, BH, BW, BLOCK_M, BLOCK_N,
                           USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE,
                           WGMMA_WAIT)
        rm = k0 + tl.arange(0, BLOCK_M)
        rn = c0 + tl.arange(0, BLOCK_N)
        out = w_ptr + (rm * sw_k)[:, None] + (rn * sw_c + fy * sw_y + fx * sw_x)[None, :]
        ok = (rm < K)[:, None] & (rn < C)[None, :]
        if (lo == 0) & (hi == boxes):
            tl.store(out, acc.to(w_ptr.dtype.element_ty), mask=ok)
        else:
            last, total = _streamk_share(acc, p, start, first, boxes, STEPS, tile, ws_ptr,
                                         count_ptr, BLOCK_M, BLOCK_N)
            if last:
                tl.store(out, total.to(w_ptr.dtype.element_ty), mask=ok)


@triton.jit
def split_sum_kernel(ws_ptr, w_ptr, K, C, sw_k, sw_c, sw_y, sw_x,
                     Y: tl.constexpr, X: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    """The filter gradient from bwd_weight's SPLIT parts, added in part order. A loop, not
    unrolled: the descriptor kernel takes hundreds of parts where a tile has few programs."""
    NCOL = Y * X * C
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < K * NCOL
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(SPLIT):
        acc += tl.load(ws_ptr + s * K * NCOL + idx, mask=ok, other=0.0)
    # flat -> (k, tap, c), the workspace's order -> (k, fy, fx, c)
    k = idx // NCOL
    col = idx - k * NCOL
    tap = col // C
    c = col - tap * C
    fy = tap // X
    fx = tap - fy * X
    tl.store(w_ptr + k * sw_k + c * sw_c + fy * sw_y + fx * sw_x, acc.to(w_ptr.dtype.element_ty),
             mask=ok)


def _descriptor(t, dims: str, letters: str, block: list, step: tuple = (1, 1), start: tuple = (0, 0),
                flat: bool = False):
    """A descriptor over logical view t (letters) with its dims in the order `dims`; `step`
    keeps every step-th row and column from row and column `start` (a strided 1x1
    filter's input: the pixels it reads; a phase view); `flat` takes its pixels as one run
    of n*h*w (geometry.flat_pixels, whose layouts make that a view)."""
    v = spec.one_group(t, letters, dims)[:, start[0]::step[0], start[1]::step[1]]
    if flat:
        v = v.view(-1, 1, 1, v.shape[-1])
    if v.data_ptr() % 16:
        raise ConvgenError("a tensor for the descriptor kernels is not 16-byte aligned",
                           field="perf_config")
    return _tensor_descriptor(v, list(v.shape), list(v.stride()), block)


def _tensor_descriptor(v, shape: list, strides: list, block: list):
    """A descriptor over tensor v's memory as `shape` / `strides`. A size-1 dimension's
    stride addresses nothing, but torch may give it any value and a descriptor wants every
    outer stride a multiple of 16 bytes: such a stride becomes 16 bytes (a stride that
    already is a multiple stays, so every launch that ran before runs as it did)."""
    from triton.tools.tensor_descriptor import TensorDescriptor
    size = v.element_size()
    outer = [s if d > 1 or s * size % 16 == 0 else 16 // size
             for d, s in zip(shape[:-1], strides[:-1])]
    return TensorDescriptor(v, shape, outer + strides[-1:], block)


def _phase_descriptor(t, letters: str, block: list, step: tuple):
    """A strided input as one descriptor over (n, i, a, j, b*C + c), input row SH*i + a
    and column SW*j + b: a tap's pixels are one box of one phase (a, b), and the columns'
    phase joins the channels (a row of SW*C is contiguous). Needs rows and columns that
    are multiples of the stride (geometry.phase_view); fwd also channel blocks that divide C
    (its reduction runs over them; bwd_weight's channels are the tile's columns)."""
    v = spec.one_group(t, letters, "nhwc")
    n, h, w, c = v.shape
    sn, sh, sw, sc = v.stride()
    if sc != 1 or (sw != c and w > 1) or v.data_ptr() % 16:
        raise ConvgenError("a strided input for the descriptor kernels must hold its channels "
                           "densely inside each row, 16-byte aligned", field="perf_config")
    sh_, sw_ = step
    return _tensor_descriptor(v, [n, h // sh_, sh_, w // sw_, sw_ * c],
                              [sn, sh * sh_, sh, sw_ * c, 1], block)


def _filter_rows(w, letters: str, block: list):
    """A descriptor over the filter as (k, y*x*c) (swap_ab), which must be its memory:
    config.swap_ab_refused asks for a k, y, x, c layout; a filter laid out so yet not dense
    (a view another caller made) is refused here."""
    v = spec.one_group(w, letters, "kyxc")
    k, y, x, c = v.shape
    dense = all(s == want for s, want, d in zip(v.stride(), (y * x * c, x * c, c, 1), v.shape)
                if d > 1)
    if not dense or v.data_ptr() % 16:
        raise ConvgenError("swap_ab=1: the filter must be dense k, y, x, c in memory and 16-byte "
                           "aligned (it is read as one (k, y*x*c) matrix)", field="perf_config")
    return _tensor_descriptor(v, [k, y * x * c], [y * x * c, 1], block)


def _store_cols(cfg) -> int:
    """Columns of the output box one store writes: half a tile's with persistent=2."""
    return cfg.block_n // 2 if cfg.persistent == 2 else cfg.block_n


def _persistent(grid: tuple, cfg, out) -> tuple[tuple, dict]:
    """(grid, constexprs) of a launch: one program per tile, or with cfg.persistent one per
    SM (at most one per tile), the SM count a constexpr of the kernel (NUM_SMS); persistent=2
    stores each tile in two halves of its columns (HALVES)."""
    if not cfg.persistent:
        return grid, {}
    sms = spec.units(out.device)
    return (min(sms, grid[0]),), {"NUM_SMS": sms, "HALVES": cfg.persistent}


@dataclass(frozen=True)
class _Launch:
    """What every direction's launch is built from: the problem, its tensors (x, w, y
    logical views, `out` the written one), the config, the geometry constexprs, and how the
    input's pixels are read."""
    p: object
    cfg: object
    out: object
    x: object
    w: object
    y: object
    geo: dict
    step: tuple       # the stride (rows, columns)
    phased: bool      # the input (gradient) taken as phase views
    flat: bool        # the pixels as one run of n*h*w (geometry.flat_pixels)
    grid: tuple       # the output's pixels as the boxes tile them (geometry.pixel_grid)

    @classmethod
    def of(cls, p, tensors, out, cfg, meta) -> "_Launch":
        full = {**tensors, p.writes: out}
        # a strided 1x1 filter without padding reads every stride-th pixel: a strided view
        # of the input, whose pixels then map one to one onto the output's (fwd,
        # bwd_weight); any other stride takes the input (gradient) as phase views (one per
        # remainder (a, b), or one over them all: fwd, and bwd_weight where
        # geometry.phase_view)
        step = (p.stride_h, p.stride_w)
        return cls(p, cfg, out, full["input"], full["filter"], full["output"],
                   {**spec.geometry_args(p, "Y", "X", "DH", "DW"), **meta}, step,
                   step != (1, 1) and not strided_view(p), flat_pixels(p), pixel_grid(p))

    @property
    def strides(self) -> dict:
        return {"SH": self.step[0], "SW": self.step[1]} if self.phased else {}

    def inputs(self, box) -> dict:
        """x_desc, or x_desc .. x_desc3: the phase views (slots past the last unused)."""
        if not self.phased:
            return {"x_desc": _descriptor(self.x, "nhwc", LOGICAL["input"], box, self.step,
                                          flat=self.flat)}
        views = [_descriptor(self.x, "nhwc", LOGICAL["input"], box, self.step, (a, b))
                 for a in range(self.step[0]) for b in range(self.step[1])]
        views += views[:1] * (4 - len(views))
        return dict(zip(("x_desc", "x_desc1", "x_desc2", "x_desc3"), views))


def launch_spec(p, tensors, out, cfg, meta) -> spec.LaunchSpec:
    """The descriptor kernels' launch of problem p: its direction's spec (_SPECS). Each
    direction's tuning rows are keyed on the source that spec reaches (launch.kernel_digest),
    so this dispatch holds nothing else."""
    return _SPECS[p.direction.name](_Launch.of(p, tensors, out, cfg, meta))


def _filter_desc(c: _Launch, rows: int, cols: int) -> tuple:
    """(the filter's descriptor, the kernel's SWAP constexpr if any): blocks of `rows`
    filters (K) by `cols` channels of one tap (C), or with swap_ab of the (k, y*x*c) view,
    whose columns run on into the next tap."""
    if c.cfg.swap_ab:
        return _filter_rows(c.w, LOGICAL["filter"], [rows, cols]), {"SWAP": 1}
    return _descriptor(c.w, "kyxc", LOGICAL["filter"], [rows, 1, 1, cols]), {}


def _fwd_spec(c: _Launch) -> spec.LaunchSpec:
    p, cfg, L = c.p, c.cfg, LOGICAL
    n, ho, wo = c.grid
    bi, bh, bw = pixel_box(n, ho, wo, cfg.block_m)
    x_desc = (_phase_descriptor(c.x, L["input"], [bi, bh, 1, bw, cfg.block_k], c.step) if c.phased
              else _descriptor(c.x, "nhwc", L["input"], [bi, bh, bw, cfg.block_k], c.step, flat=c.flat))
    w_desc, swap = _filter_desc(c, cfg.block_n, cfg.block_k)
    runtime = dict(x_desc=x_desc, w_desc=w_desc,
                   y_desc=_descriptor(c.y, "nhwk", L["output"], [bi, bh, bw, _store_cols(cfg)],
                                      flat=c.flat),
                   C=p.c, K=p.k, N=n, HO=ho, WO=wo, PH=p.pad_h_l, PW=p.pad_w_l)
    tiles = cdiv(n, bi) * cdiv(ho, bh) * cdiv(wo, bw) * cdiv(p.k, cfg.block_n)
    constexprs = {**c.geo, "BI": bi, "BH": bh, "BW": bw, **c.strides, **swap}
    if cfg.tail:
        programs, full, ws, counts = _tail_buffers(cfg, tiles, c.out)
        return spec.LaunchSpec(conv_fwd_tail_kernel, (programs,),
                                 {**runtime, "ws_ptr": ws, "count_ptr": counts, "FULL": full},
                                 {**constexprs, "TAIL": cfg.tail}, (ws, counts))
    grid, persist = _persistent((tiles,), cfg, c.out)
    return spec.LaunchSpec(conv_fwd_tma_kernel, grid, runtime, {**constexprs, **persist})


def _bwd_data_spec(c: _Launch) -> spec.LaunchSpec:
    p, cfg, L, step = c.p, c.cfg, LOGICAL, c.step
    # tiles of the input gradient's pixels (of each phase view: grid axis 1); flat, the
    # output's grid is the input's
    images, rows, cols = c.grid if c.flat else (p.n, cdiv(p.hi, step[0]), cdiv(p.wi, step[1]))
    bi, bh, bw = pixel_box(images, rows, cols, cfg.block_m)
    w_desc, swap = _filter_desc(c, cfg.block_k, cfg.block_n)
    runtime = dict(y_desc=_descriptor(c.y, "nhwk", L["output"], [bi, bh, bw, cfg.block_k],
                                      flat=c.flat),
                   w_desc=w_desc,
                   **c.inputs([bi, bh, bw, _store_cols(cfg)]),
                   C=p.c, K=p.k, N=images, HI=rows if c.flat else p.hi, WI=cols if c.flat else p.wi,
                   PH=p.pad_h_l, PW=p.pad_w_l)
    grid = (cdiv(images, bi) * cdiv(rows, bh) * cdiv(cols, bw) * cdiv(p.c, cfg.block_n),)
    if c.phased:
        grid += (step[0] * step[1],)
    grid, persist = _persistent(grid, cfg, c.out)
    return spec.LaunchSpec(conv_bwd_data_tma_kernel, grid, runtime,
                             {**c.geo, "BI": bi, "BH": bh, "BW": bw, **c.strides, **persist,
                              **swap})


def _bwd_weight_spec(c: _Launch) -> spec.LaunchSpec:
    import torch
    p, cfg, L, out = c.p, c.cfg, LOGICAL, c.out
    n, ho, wo = c.grid
    # block_k is the reduction's box of output pixels
    bi, bh, bw = pixel_box(n, ho, wo, cfg.block_k)
    strides = dict(c.strides)
    if phase_view(p):
        xs = {"x_desc": _phase_descriptor(c.x, L["input"], [bi, bh, 1, bw, cfg.block_n], c.step)}
        strides["PHASE_VIEW"] = True
    elif cfg.streamk and c.phased:
        # config.validate refuses it; a launch without validation must not take four phase
        # views to a kernel that reads one
        raise ConvgenError(f"streamk={cfg.streamk}: bwd_weight with a stride on rows or "
                           "columns that are not multiples of it", field="perf_config")
    else:
        xs = c.inputs([bi, bh, bw, cfg.block_n])
    sw = dict(zip(L["filter"], c.w.stride()))
    runtime = dict(y_desc=_descriptor(c.y, "nhwk", L["output"], [bi, bh, bw, cfg.block_m], flat=c.flat),
                   **xs, w_ptr=c.w,
                   C=p.c, K=p.k, N=n, HO=ho, WO=wo, PH=p.pad_h_l, PW=p.pad_w_l,
                   sw_k=sw["k"], sw_c=sw["c"], sw_y=sw["y"], sw_x=sw["x"])
    constexprs = {**{k: v for k, v in c.geo.items() if k not in ("BLOCK_K", "GROUP_M")},
                  "BI": bi, "BH": bh, "BW": bw, **strides, "WGMMA_WAIT": wgmma_waits(out)}
    if cfg.streamk:
        programs, steps, ws, counts = _streamk_buffers(p, cfg, out)
        return spec.LaunchSpec(conv_bwd_weight_streamk_kernel, (programs,),
                                 {**runtime, "ws_ptr": ws, "count_ptr": counts, "STEPS": steps},
                                 constexprs, (ws, counts))
    split, per = bwd_weight_parts(p, cfg)
    ws = None
    if split > 1:
        ws = torch.empty((split * p.k * p.gemm[1],), dtype=torch.float32, device=out.device)
    runtime.update(ws_ptr=c.w if ws is None else ws, PER=per)
    constexprs["SPLIT"] = split
    grid = (cdiv(p.k, cfg.block_m) * cdiv(p.c, cfg.block_n), p.y * p.x, split)

    def reduce(compile_options):
        split_sum_kernel[(triton.cdiv(p.k * p.gemm[1], SUM_BLOCK),)](
            ws, out, p.k, p.c, sw["k"], sw["c"], sw["y"], sw["x"],
            Y=p.y, X=p.x, SPLIT=split, BLOCK=SUM_BLOCK, **compile_options({"num_warps": 4}))

    return spec.LaunchSpec(conv_bwd_weight_tma_kernel, grid, runtime, constexprs, ws,
                             finish=reduce if ws is not None else None)


def wgmma_waits(t) -> bool:
    """Whether the bwd_weight kernels writing tensor t wait for their wgmma each step
    (_wgmma_wait): on an sm90 GPU, and in a cross-compile for sm90 (convaudit.isa.compile_problem,
    whose tensors, and those kernels/s2d.py makes from them, are meta tensors)."""
    import torch
    if t.device.type == "meta":
        return backends.cross_target() == "sm90"
    return (t.device.type == "cuda" and torch.version.hip is None
            and torch.cuda.get_device_capability(t.device) == (9, 0))


def _tail_buffers(cfg, tiles: int, out) -> tuple[int, int, object, object]:
    """(programs, whole-tile programs, workspace, counts) of a `tail` launch: cfg.tail fp32
    parts of each tile left over, and a count per such tile, zero and left zero by every
    launch."""
    import torch
    programs, full = tail_programs(cfg, tiles, spec.units(out.device))
    shared = max(1, tiles - full)
    ws = torch.empty((shared * cfg.tail * cfg.block_m * cfg.block_n,), dtype=torch.float32,
                     device=out.device)
    counts = torch.zeros((shared,), dtype=torch.int32, device=out.device)
    return programs, full, ws, counts


def _streamk_buffers(p, cfg, out) -> tuple[int, int, object, object]:
    """(programs, steps per program, workspace, counts) of a stream-K launch: two fp32
    partial tiles per program; a count per tile, zero, and left zero by every launch."""
    import torch
    programs, steps, tiles, _ = streamk_steps(p, cfg, spec.units(out.device))
    ws = torch.empty((programs * 2 * cfg.block_m * cfg.block_n,), dtype=torch.float32, device=out.device)
    counts = torch.zeros((tiles,), dtype=torch.int32, device=out.device)
    return programs, steps, ws, counts


# each direction's launch; kernel_digest hashes what each one reaches
_SPECS = {"fwd": _fwd_spec, "bwd_data": _bwd_data_spec, "bwd_weight": _bwd_weight_spec}

"""Backward-weight convolution as an implicit GEMM: the filter gradient from the input
and the output gradient.

Per group g and reduction part s (grid axis 1 holds both):
    M = k   N = (y, x, c): one filter element per column   R = (n, ho, wo)
A = the output gradient; B = the input, gathered; C = the filter gradient.

Each tile's columns belong to one filter tap (fy, fx) and a block of BLOCK_N consecutive
channels, so B is a run of channels per output pixel (contiguous for a channels-last
input) under one spatial mask per pixel, and the tap costs nothing inside the loop.
When a tap has fewer channels than the smallest block (the C = 3 stem), FLAT_N tiles the
flattened (y, x, c) instead: per-tap tiles would be mostly padding, and every tile rereads
the whole output gradient, so fewer tiles also means fewer passes over it.

R covers the whole batch, so it may be split into SPLIT parts (split-K): each part
writes fp32 partial sums to a workspace and `split_reduce_kernel` adds them in part
order, so the result does not depend on which program finished first.
"""
import torch
import triton
import triton.language as tl

from convgen.directions import blocks_span_taps, column_tiles
from convgen.kernels import spec
from convgen.kernels.common import mac, program_ids, split3, tile_ids
from convgen.kernels.geometry import split_parts, split_workspace

REDUCE_BLOCK = 1024


@triton.jit
def conv_bwd_weight_kernel(
    # pointers: input x (B), filter gradient w (C), output gradient y (A), split-K workspace
    x_ptr, w_ptr, y_ptr, ws_ptr,
    # sizes per group; R_CHUNK: reduction length of one part
    N, C, K, HI, WI, HO, WO, PH, PW, R_CHUNK,
    # strides of the logical views (n, g, c, h, w), (g, k, c, y, x), (n, g, k, h, w)
    sx_n, sx_g, sx_c, sx_h, sx_w,
    sw_g, sw_k, sw_c, sw_y, sw_x,
    sy_n, sy_g, sy_k, sy_h, sy_w,
    # geometry: filter size, stride, dilation
    Y: tl.constexpr, X: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr,
    # meta-parameters
    USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr, FLAT_N: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    tile, pid_z = program_ids(NUM_XCDS)
    g = pid_z // SPLIT
    s = pid_z % SPLIT
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if ACC_INT else tl.float32)
    if FLAT_N:
        # a tap has fewer channels than a block (directions.blocks_span_taps): tiles of
        # the flattened (fy, fx, c), so fy, fx and the spatial mask vary per column
        pid_m, pid_n = tile_ids(tile, K, Y * X * C, BLOCK_M, BLOCK_N, GROUP_M)
        j = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)   # GEMM columns N: (fy, fx, c), c fastest
        tap = j // C
        c = j - tap * C
        c_ok = j < Y * X * C
    else:
        CB = tl.cdiv(C, BLOCK_N)
        pid_m, pid_n = tile_ids(tile, K, Y * X * CB * BLOCK_N, BLOCK_M, BLOCK_N, GROUP_M)
        # N tile -> (tap, channel block): one tap per tile, a scalar
        tap = pid_n // CB
        c = (pid_n - tap * CB) * BLOCK_N + tl.arange(0, BLOCK_N)   # GEMM columns N: channels of this tap
        c_ok = c < C
    fy = tap // X
    fx = tap - fy * X
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)   # GEMM rows M: output channels
    ks = tl.arange(0, BLOCK_K)
    R = N * HO * WO
    r_begin = s * R_CHUNK
    r_end = tl.minimum(R, r_begin + R_CHUNK)
    m_ok = rm < K
    y_row = y_ptr + g * sy_g + rm * sy_k
    x_col = x_ptr + g * sx_g + c * sx_c
    for r0 in range(r_begin, r_end, BLOCK_K):
        rk = r0 + ks
        # R -> (n, ho, wo): the output pixels this filter element met
        n_, ho, wo = split3(rk, HO, WO)
        r_ok = rk < r_end
        a = tl.load(y_row[:, None] + (n_ * sy_n + ho * sy_h + wo * sy_w)[None, :],
                    mask=m_ok[:, None] & r_ok[None, :], other=0.0)
        if FLAT_N:
            hi = (ho * SH)[:, None] + (fy * DH - PH)[None, :]
            wi = (wo * SW)[:, None] + (fx * DW - PW)[None, :]
            b_ok = r_ok[:, None] & c_ok[None, :] & (hi >= 0) & (hi < HI) & (wi >= 0) & (wi < WI)
            b = tl.load(x_col[None, :] + (n_ * sx_n)[:, None] + hi * sx_h + wi * sx_w,
                        mask=b_ok, other=0.0)
        else:
            hi = ho * SH + (fy * DH - PH)
            wi = wo * SW + (fx * DW - PW)
            pix_ok = r_ok & (hi >= 0) & (hi < HI) & (wi >= 0) & (wi < WI)
            b = tl.load(x_col[None, :] + (n_ * sx_n + hi * sx_h + wi * sx_w)[:, None],
                        mask=pix_ok[:, None] & c_ok[None, :], other=0.0)
        acc = mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    o_mask = m_ok[:, None] & c_ok[None, :]
    if SPLIT == 1:
        # C tile -> filter gradient (g, k, c, y, x)
        out = w_ptr + g * sw_g + (rm * sw_k)[:, None] + (c * sw_c + fy * sw_y + fx * sw_x)[None, :]
        tl.store(out, acc.to(w_ptr.dtype.element_ty), mask=o_mask)
    else:
        # C tile -> this part's fp32 partials (g, s, k, tap, c), summed by split_reduce_kernel
        part = ws_ptr + ((pid_z * K + rm) * (Y * X * C))[:, None] + (tap * C + c)[None, :]
        tl.store(part, acc, mask=o_mask)


@triton.jit
def split_reduce_kernel(ws_ptr, w_ptr, G, K, C,
                        sw_g, sw_k, sw_c, sw_y, sw_x,
                        Y: tl.constexpr, X: tl.constexpr, SPLIT: tl.constexpr,
                        BLOCK: tl.constexpr):
    NCOL = C * Y * X
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < G * K * NCOL
    # flat -> (g, k, col): the filter-gradient element
    col = idx % NCOL
    gk = idx // NCOL
    k = gk % K
    g = gk // K
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    # a loop, not unrolled: the direct rule takes hundreds of parts on large problems, and
    # unrolled they took minutes to compile; the parts are still summed in order
    for s in range(SPLIT):
        acc += tl.load(ws_ptr + ((g * SPLIT + s) * K + k) * NCOL + col, mask=ok, other=0.0)
    # col -> (tap, c) -> (fy, fx, c), the workspace's column order
    tap = col // C
    c = col - tap * C
    fy = tap // X
    fx = tap - fy * X
    out = w_ptr + g * sw_g + k * sw_k + c * sw_c + fy * sw_y + fx * sw_x
    tl.store(out, acc.to(w_ptr.dtype.element_ty), mask=ok)


def launch_spec(p, tensors, out, cfg, meta) -> spec.LaunchSpec:
    m, n, _ = p.gemm
    split, r_chunk = split_parts(p, cfg)
    ws = None
    if split > 1:
        ws = torch.empty((split_workspace(p, cfg),), dtype=torch.float32, device=out.device)
    runtime = {**spec.tensor_args(p, tensors, out), "ws_ptr": out if ws is None else ws,
               "R_CHUNK": r_chunk}
    constexprs = {**spec.geometry_args(p, "Y", "X", "SH", "SW", "DH", "DW"), **meta, "SPLIT": split,
                  "FLAT_N": blocks_span_taps(p)}
    # one program row per group and reduction part; a tile's columns are one tap's channels
    # (or, FLAT_N, a block of the flattened (y, x, c))
    grid = (triton.cdiv(m, cfg.block_m) * column_tiles(p, cfg.block_n), p.g * split)

    def reduce(compile_options):
        total = p.g * p.k * n
        split_reduce_kernel[(triton.cdiv(total, REDUCE_BLOCK),)](
            ws, out, p.g, p.k, p.c, *out.stride(),
            Y=p.y, X=p.x, SPLIT=split, BLOCK=REDUCE_BLOCK,
            **compile_options({"num_warps": 4}))

    return spec.LaunchSpec(conv_bwd_weight_kernel, grid, runtime, constexprs, ws,
                             finish=reduce if ws is not None else None)

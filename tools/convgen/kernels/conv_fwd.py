"""Forward convolution as an implicit GEMM: output = input * filter.

Per group g (grid axis 1):  M = (n, ho, wo)   N = k   R = (y, x, c)
A = the input, gathered (im2col without the copy); B = the filter; C = the output.
All tensors arrive as logical views with five strides each, so memory layout never
changes the code.

The reduction walks filter taps outside and blocks of BLOCK_K channels inside, in one
flat loop (so Triton pipelines it): per step the tap costs a few scalar operations and one
spatial mask per GEMM row, and the channel block is a run of consecutive channels. With a
channels-last input and filter that run is contiguous memory, and a launch that sees
stride 1 and sizes divisible by 16 (Triton's specialization) loads it 16 bytes at a time.
When a tap has fewer channels than the smallest block (the C = 3 stem), FLAT_R walks
blocks of the flattened (y, x, c) instead, so a block is not mostly padding.
"""
import triton
import triton.language as tl

from convgen.directions import blocks_span_taps
from convgen.kernels import spec
from convgen.kernels.common import mac, program_ids, split3, tile_ids


@triton.jit
def conv_fwd_kernel(
    # pointers: input x (A), filter w (B), output y (C)
    x_ptr, w_ptr, y_ptr,
    # sizes per group
    N, C, K, HI, WI, HO, WO, PH, PW,
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
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    FLAT_R: tl.constexpr, NUM_XCDS: tl.constexpr,
):
    tile, g = program_ids(NUM_XCDS)
    M = N * HO * WO
    pid_m, pid_n = tile_ids(tile, M, K, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if ACC_INT else tl.float32)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)   # GEMM rows M of this tile
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)   # GEMM columns N: output channels
    ks = tl.arange(0, BLOCK_K)
    # M -> (n, ho, wo): one output pixel per GEMM row
    n_, ho, wo = split3(rm, HO, WO)
    m_ok = rm < M
    n_ok = rn < K
    hi0 = ho * SH - PH      # input row of filter row 0
    wi0 = wo * SW - PW      # input column of filter column 0
    x_row = x_ptr + g * sx_g + n_ * sx_n
    w_col = w_ptr + g * sw_g + rn * sw_k
    if FLAT_R:
        # a tap has fewer channels than a block (directions.blocks_span_taps): blocks of
        # the flattened (fy, fx, c), with a spatial mask per element
        for r0 in range(0, Y * X * C, BLOCK_K):
            rr = r0 + ks        # GEMM reduction R: (fy, fx, c) flattened, c fastest
            tap = rr // C
            c = rr - tap * C
            fy = tap // X
            fx = tap - fy * X
            r_ok = rr < Y * X * C
            hi = hi0[:, None] + (fy * DH)[None, :]
            wi = wi0[:, None] + (fx * DW)[None, :]
            a_ok = m_ok[:, None] & r_ok[None, :] & (hi >= 0) & (hi < HI) & (wi >= 0) & (wi < WI)
            a = tl.load(x_row[:, None] + hi * sx_h + wi * sx_w + (c * sx_c)[None, :],
                        mask=a_ok, other=0.0)
            b = tl.load(w_col[None, :] + (fy * sw_y + fx * sw_x + c * sw_c)[:, None],
                        mask=r_ok[:, None] & n_ok[None, :], other=0.0)
            acc = mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    else:
        CB = tl.cdiv(C, BLOCK_K)
        for r in range(0, Y * X * CB):
            # R -> (tap, channel block); tap -> (fy, fx): scalars, once per step
            tap = r // CB
            c = (r - tap * CB) * BLOCK_K + ks
            fy = tap // X
            fx = tap - fy * X
            hi = hi0 + fy * DH
            wi = wi0 + fx * DW
            row_ok = m_ok & (hi >= 0) & (hi < HI) & (wi >= 0) & (wi < WI)
            c_ok = c < C
            a = tl.load((x_row + hi * sx_h + wi * sx_w)[:, None] + (c * sx_c)[None, :],
                        mask=row_ok[:, None] & c_ok[None, :], other=0.0)
            b = tl.load((w_col + fy * sw_y + fx * sw_x)[None, :] + (c * sw_c)[:, None],
                        mask=c_ok[:, None] & n_ok[None, :], other=0.0)
            acc = mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
    # C tile -> output (n, g, k, ho, wo)
    out = y_ptr + g * sy_g + (n_ * sy_n + ho * sy_h + wo * sy_w)[:, None] + (rn * sy_k)[None, :]
    tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def launch_spec(p, tensors, out, cfg, meta) -> spec.LaunchSpec:
    m, n, _ = p.gemm
    runtime = spec.tensor_args(p, tensors, out)
    constexprs = {**spec.geometry_args(p, "Y", "X", "SH", "SW", "DH", "DW"), **meta,
                  "FLAT_R": blocks_span_taps(p)}
    grid = (triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n), p.g)
    return spec.LaunchSpec(conv_fwd_kernel, grid, runtime, constexprs)

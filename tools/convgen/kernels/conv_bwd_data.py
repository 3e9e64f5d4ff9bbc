"""Backward-data convolution as an implicit GEMM: the input gradient from the output
gradient and the filter.

Per group g and stride residue class (ah, aw) (grid axis 2 holds both):
    M = (n, th, tw): input pixel (ah + th*SH, aw + tw*SW)   N = c   R = (k, jy, jx)
A = the output gradient, gathered; B = the filter; C = the input gradient.

Inside one residue class the taps that reach an output pixel are every YSTEP-th
filter row (XSTEP-th column) from the first one that does (y0, x0), so no work goes to
taps the stride skips; a class with no such tap (stride larger than the filter) writes
zeros.
"""
import math

import triton
import triton.language as tl

from convgen.kernels import launch
from convgen.kernels.common import mac, split3


@triton.jit
def conv_bwd_data_kernel(
    # pointers: input gradient x (C), filter w (B), output gradient y (A)
    x_ptr, w_ptr, y_ptr,
    # sizes per group
    N, C, K, HI, WI, HO, WO, PH, PW,
    # strides of the logical views (n, g, c, h, w), (g, k, c, y, x), (n, g, k, h, w)
    sx_n, sx_g, sx_c, sx_h, sx_w,
    sw_g, sw_k, sw_c, sw_y, sw_x,
    sy_n, sy_g, sy_k, sy_h, sy_w,
    # geometry: filter size, stride, dilation; taps between two contributing ones
    Y: tl.constexpr, X: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr, YSTEP: tl.constexpr, XSTEP: tl.constexpr,
    # meta-parameters
    CH_FAST: tl.constexpr, USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_z = tl.program_id(2)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if ACC_INT else tl.float32)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)   # GEMM rows M of this tile
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)   # GEMM columns N: input channels
    ks = tl.arange(0, BLOCK_K)
    g = pid_z // (SH * SW)
    cls = pid_z % (SH * SW)
    ah = cls // SW          # this class's input rows are ah, ah + SH, ...
    aw = cls % SW
    HC = (HI - ah + SH - 1) // SH
    WC = (WI - aw + SW - 1) // SW
    M = N * HC * WC
    if pid_m * BLOCK_M < M:
        # first tap y0 with (ah + PH - y0*DH) divisible by SH; Y when none
        y0 = Y
        for t in tl.static_range(YSTEP):
            hit = ((ah + PH - t * DH) % SH == 0) & (y0 == Y)
            y0 = tl.where(hit, t, y0)
        x0 = X
        for t in tl.static_range(XSTEP):
            hit = ((aw + PW - t * DW) % SW == 0) & (x0 == X)
            x0 = tl.where(hit, t, x0)
        NY = (Y - y0 + YSTEP - 1) // YSTEP
        NX = (X - x0 + XSTEP - 1) // XSTEP
        R = K * NY * NX
        # exact divisions: the numerators are multiples of the stride
        ho_base = (ah + PH - y0 * DH) // SH
        wo_base = (aw + PW - x0 * DW) // SW
        # M -> (n, th, tw): input pixel (ah + th*SH, aw + tw*SW) of this class
        n_, th, tw = split3(rm, HC, WC, False, N)
        m_ok = rm < M
        hi = ah + th * SH
        wi = aw + tw * SW
        a_row = y_ptr + g * sy_g + n_ * sy_n + (ho_base + th) * sy_h + (wo_base + tw) * sy_w
        b_col = w_ptr + g * sw_g + rn * sw_c
        n_ok = rn < C
        for r0 in range(0, R, BLOCK_K):
            rk = r0 + ks
            # R -> (k, jy, jx): output channel and the jy-th/jx-th contributing tap
            k, jy, jx = split3(rk, NY, NX, CH_FAST, K)
            r_ok = rk < R
            ho = (ho_base + th)[:, None] - (jy * (YSTEP * DH // SH))[None, :]
            wo = (wo_base + tw)[:, None] - (jx * (XSTEP * DW // SW))[None, :]
            a_mask = (m_ok[:, None] & r_ok[None, :] & (ho >= 0) & (ho < HO)
                      & (wo >= 0) & (wo < WO))
            a_off = k * sy_k - jy * (YSTEP * DH // SH) * sy_h - jx * (XSTEP * DW // SW) * sy_w
            a = tl.load(a_row[:, None] + a_off[None, :], mask=a_mask, other=0.0)
            fy = y0 + jy * YSTEP
            fx = x0 + jx * XSTEP
            b = tl.load(b_col[None, :] + (k * sw_k + fy * sw_y + fx * sw_x)[:, None],
                        mask=r_ok[:, None] & n_ok[None, :], other=0.0)
            acc = mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
        # C tile -> input gradient (n, g, c, hi, wi)
        out = x_ptr + g * sx_g + (n_ * sx_n + hi * sx_h + wi * sx_w)[:, None] + (rn * sx_c)[None, :]
        tl.store(out, acc.to(x_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def launch_spec(p, tensors, out, cfg, meta) -> launch.LaunchSpec:
    m, n, _ = p.gemm
    runtime = launch.tensor_args(p, tensors, out)
    constexprs = {**launch.geometry(p, "Y", "X", "SH", "SW", "DH", "DW"),
                  "YSTEP": p.stride_h // math.gcd(p.stride_h, p.dil_h),
                  "XSTEP": p.stride_w // math.gcd(p.stride_w, p.dil_w), **meta}
    # one program column per group and stride residue class
    grid = (triton.cdiv(m, cfg.block_m), triton.cdiv(n, cfg.block_n),
            p.g * p.stride_h * p.stride_w)
    return launch.LaunchSpec(conv_bwd_data_kernel, grid, runtime, constexprs)

"""Backward-data convolution as an implicit GEMM: the input gradient from the output
gradient and the filter.

Per group g and stride residue class (ah, aw) (grid axis 1 holds both):
    M = (n, th, tw): input pixel (ah + th*SH, aw + tw*SW)   N = c   R = (jy, jx, k)
A = the output gradient, gathered; B = the filter; C = the input gradient.

Inside one residue class the taps that reach an output pixel are every YSTEP-th
filter row (XSTEP-th column) from the first one that does (y0, x0), so no work goes to
taps the stride skips; a class with no such tap (stride larger than the filter) writes
zeros. As in the forward kernel, the reduction walks those taps outside and blocks of
BLOCK_K output channels inside, in one flat loop: contiguous runs of k for a
channels-last output gradient and filter.
"""
import math

import triton
import triton.language as tl

from convgen.kernels import spec
from convgen.kernels.common import mac, program_ids, split3, tile_ids


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
    USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    NUM_XCDS: tl.constexpr,
):
    tile, pid_z = program_ids(NUM_XCDS)
    g = pid_z // (SH * SW)
    cls = pid_z % (SH * SW)
    ah = cls // SW          # this class's input rows are ah, ah + SH, ...
    aw = cls % SW
    HC = (HI - ah + SH - 1) // SH
    WC = (WI - aw + SW - 1) // SW
    M = N * HC * WC
    # the grid is sized for the largest class; a smaller one has fewer tiles
    if tile < tl.cdiv(M, BLOCK_M) * tl.cdiv(C, BLOCK_N):
        pid_m, pid_n = tile_ids(tile, M, C, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32 if ACC_INT else tl.float32)
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)   # GEMM rows M of this tile
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)   # GEMM columns N: input channels
        ks = tl.arange(0, BLOCK_K)
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
        # exact divisions: the numerators are multiples of the stride
        ho_base = (ah + PH - y0 * DH) // SH
        wo_base = (aw + PW - x0 * DW) // SW
        # M -> (n, th, tw): input pixel (ah + th*SH, aw + tw*SW) of this class
        n_, th, tw = split3(rm, HC, WC)
        m_ok = rm < M
        n_ok = rn < C
        y_row = y_ptr + g * sy_g + n_ * sy_n
        w_col = w_ptr + g * sw_g + rn * sw_c
        KB = tl.cdiv(K, BLOCK_K)
        for r in range(0, NY * NX * KB):
            # R -> (tap, output-channel block); tap -> (jy, jx), the jy-th/jx-th contributing tap
            tap = r // KB
            k = (r - tap * KB) * BLOCK_K + ks
            jy = tap // NX
            jx = tap - jy * NX
            ho = ho_base + th - jy * (YSTEP * DH // SH)
            wo = wo_base + tw - jx * (XSTEP * DW // SW)
            row_ok = m_ok & (ho >= 0) & (ho < HO) & (wo >= 0) & (wo < WO)
            k_ok = k < K
            a = tl.load((y_row + ho * sy_h + wo * sy_w)[:, None] + (k * sy_k)[None, :],
                        mask=row_ok[:, None] & k_ok[None, :], other=0.0)
            fy = y0 + jy * YSTEP
            fx = x0 + jx * XSTEP
            b = tl.load((w_col + fy * sw_y + fx * sw_x)[None, :] + (k * sw_k)[:, None],
                        mask=k_ok[:, None] & n_ok[None, :], other=0.0)
            acc = mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
        # C tile -> input gradient (n, g, c, hi, wi)
        hi = ah + th * SH
        wi = aw + tw * SW
        out = x_ptr + g * sx_g + (n_ * sx_n + hi * sx_h + wi * sx_w)[:, None] + (rn * sx_c)[None, :]
        tl.store(out, acc.to(x_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])


def launch_spec(p, tensors, out, cfg, meta) -> spec.LaunchSpec:
    _, n, _ = p.gemm
    runtime = spec.tensor_args(p, tensors, out)
    constexprs = {**spec.geometry_args(p, "Y", "X", "SH", "SW", "DH", "DW"),
                  "YSTEP": p.stride_h // math.gcd(p.stride_h, p.dil_h),
                  "XSTEP": p.stride_w // math.gcd(p.stride_w, p.dil_w), **meta}
    # one program row per group and stride residue class, with the tiles of the largest
    # class (ceil(hi/stride) x ceil(wi/stride) input pixels)
    m_largest = p.n * triton.cdiv(p.hi, p.stride_h) * triton.cdiv(p.wi, p.stride_w)
    grid = (triton.cdiv(m_largest, cfg.block_m) * triton.cdiv(n, cfg.block_n),
            p.g * p.stride_h * p.stride_w)
    return spec.LaunchSpec(conv_bwd_data_kernel, grid, runtime, constexprs)

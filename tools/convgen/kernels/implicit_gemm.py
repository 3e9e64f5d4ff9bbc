"""The convolution kernel under test: one implicit GEMM for all three directions.

Each direction only decides how GEMM rows (M), columns (N) and the reduction
(R) map onto tensor coordinates; the tile loop and the multiply-accumulate are
shared. Per group g (grid axis 2):

    fwd:        M = (n, ho, wo)  N = k          R = (c, y, x)   A = input,  B = filter
    bwd_data:   M = (n, hi, wi)  N = c          R = (k, y, x)   A = output, B = filter
    bwd_weight: M = k            N = (c, y, x)  R = (n, ho, wo) A = output, B = input

All tensors arrive as logical views with five strides each, so memory layout
never changes the code. USE_DOT picks the matrix-core path (`tl.dot`) or the
FMA path (BLOCK_K = 1 tiles and `acc += a * b`: a rank-1 update per reduction
step, which Triton cannot turn into a dot).
"""
import triton
import triton.language as tl

DIR_FWD, DIR_BWD_DATA, DIR_BWD_WEIGHT = 0, 1, 2


@triton.jit
def _mac(acc, a, b, USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
         DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr):
    if USE_DOT:
        if DOT_UPCAST:  # the interpreter's bf16 dot is wrong; exact products in fp32 instead
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if ACC_INT:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        else:
            # MAX_IMPRECISE: fp8 products summed inside the matrix unit before the sum
            # is added to the fp32 accumulator (Hopper's fp8 units keep fewer bits)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION,
                         max_num_imprecise_acc=MAX_IMPRECISE)
    else:
        if ACC_INT:
            acc += a.to(tl.int32) * b.to(tl.int32)
        else:
            acc += a.to(tl.float32) * b.to(tl.float32)
    return acc


@triton.jit
def _split3(i, D1, D2, FIRST_FASTEST: tl.constexpr, D0):
    """Split a flat index into (i0, i1, i2) with sizes (D0, D1, D2).

    FIRST_FASTEST puts i0 innermost (e.g. channels for channels-last memory),
    otherwise i2 is innermost; either way the same (i0, i1, i2) set is covered.
    """
    if FIRST_FASTEST:
        i0 = i % D0
        t = i // D0
        i2 = t % D2
        i1 = t // D2
    else:
        i2 = i % D2
        t = i // D2
        i1 = t % D1
        i0 = t // D1
    return i0, i1, i2


@triton.jit
def conv_gemm_kernel(
    x_ptr, w_ptr, y_ptr, ws_ptr,
    N, C, K, HI, WI, HO, WO, PH, PW, R_CHUNK,
    sx_n, sx_g, sx_c, sx_h, sx_w,
    sw_g, sw_k, sw_c, sw_y, sw_x,
    sy_n, sy_g, sy_k, sy_h, sy_w,
    Y: tl.constexpr, X: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr,
    YSTEP: tl.constexpr, XSTEP: tl.constexpr,
    DIR: tl.constexpr, USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
    DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, CH_FAST: tl.constexpr,
    MAX_IMPRECISE: tl.constexpr,
    SPLIT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    pid_z = tl.program_id(2)
    acc_ty = tl.int32 if ACC_INT else tl.float32
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_ty)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)

    if DIR == 0:
        g = pid_z
        M = N * HO * WO
        R = C * Y * X
        # M -> (n, ho, wo): one output pixel per GEMM row
        n_, ho, wo = _split3(rm, HO, WO, False, N)
        m_ok = rm < M
        hi0 = ho * SH - PH
        wi0 = wo * SW - PW
        a_row = x_ptr + g * sx_g + n_ * sx_n + hi0 * sx_h + wi0 * sx_w
        b_col = w_ptr + g * sw_g + rn * sw_k
        n_ok = rn < K
        for r0 in range(0, R, BLOCK_K):
            rk = r0 + ks
            # R -> (c, y, x): input channel and filter tap
            c, fy, fx = _split3(rk, Y, X, CH_FAST, C)
            r_ok = rk < R
            hi = hi0[:, None] + (fy * DH)[None, :]
            wi = wi0[:, None] + (fx * DW)[None, :]
            a_mask = (m_ok[:, None] & r_ok[None, :] & (hi >= 0) & (hi < HI)
                      & (wi >= 0) & (wi < WI))
            a = tl.load(a_row[:, None] + (c * sx_c + fy * DH * sx_h + fx * DW * sx_w)[None, :],
                        mask=a_mask, other=0.0)
            b = tl.load(b_col[None, :] + (c * sw_c + fy * sw_y + fx * sw_x)[:, None],
                        mask=r_ok[:, None] & n_ok[None, :], other=0.0)
            acc = _mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
        out = y_ptr + g * sy_g + (n_ * sy_n + ho * sy_h + wo * sy_w)[:, None] + (rn * sy_k)[None, :]
        tl.store(out, acc.to(y_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])

    elif DIR == 1:
        # One program column per stride residue class (ah, aw): inside a class
        # the contributing taps are every YSTEP-th row of the filter, so no
        # work goes to taps the stride skips.
        g = pid_z // (SH * SW)
        cls = pid_z % (SH * SW)
        ah = cls // SW
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
            n_, th, tw = _split3(rm, HC, WC, False, N)
            m_ok = rm < M
            hi = ah + th * SH
            wi = aw + tw * SW
            a_row = y_ptr + g * sy_g + n_ * sy_n + (ho_base + th) * sy_h + (wo_base + tw) * sy_w
            b_col = w_ptr + g * sw_g + rn * sw_c
            n_ok = rn < C
            for r0 in range(0, R, BLOCK_K):
                rk = r0 + ks
                # R -> (k, jy, jx): output channel and the jy-th/jx-th contributing tap
                k, jy, jx = _split3(rk, NY, NX, CH_FAST, K)
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
                acc = _mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
            out = x_ptr + g * sx_g + (n_ * sx_n + hi * sx_h + wi * sx_w)[:, None] + (rn * sx_c)[None, :]
            tl.store(out, acc.to(x_ptr.dtype.element_ty), mask=m_ok[:, None] & n_ok[None, :])

    else:
        g = pid_z // SPLIT
        s = pid_z % SPLIT
        NCOL = C * Y * X
        R = N * HO * WO
        r_begin = s * R_CHUNK
        r_end = tl.minimum(R, r_begin + R_CHUNK)
        m_ok = rm < K
        # N -> (c, y, x): one filter element per GEMM column
        c, fy, fx = _split3(rn, Y, X, CH_FAST, C)
        n_ok = rn < NCOL
        hi_col = fy * DH - PH
        wi_col = fx * DW - PW
        a_row = y_ptr + g * sy_g + rm * sy_k
        b_col = x_ptr + g * sx_g + c * sx_c + hi_col * sx_h + wi_col * sx_w
        for r0 in range(r_begin, r_end, BLOCK_K):
            rk = r0 + ks
            # R -> (n, ho, wo): the output pixels this filter element met
            n_, ho, wo = _split3(rk, HO, WO, False, N)
            r_ok = rk < r_end
            a = tl.load(a_row[:, None] + (n_ * sy_n + ho * sy_h + wo * sy_w)[None, :],
                        mask=m_ok[:, None] & r_ok[None, :], other=0.0)
            hi = (ho * SH)[:, None] + hi_col[None, :]
            wi = (wo * SW)[:, None] + wi_col[None, :]
            b_mask = (r_ok[:, None] & n_ok[None, :] & (hi >= 0) & (hi < HI)
                      & (wi >= 0) & (wi < WI))
            b = tl.load(b_col[None, :] + (n_ * sx_n + ho * SH * sx_h + wo * SW * sx_w)[:, None],
                        mask=b_mask, other=0.0)
            acc = _mac(acc, a, b, USE_DOT, INPUT_PRECISION, DOT_UPCAST, ACC_INT, MAX_IMPRECISE)
        o_mask = m_ok[:, None] & n_ok[None, :]
        if SPLIT == 1:
            out = w_ptr + g * sw_g + (rm * sw_k)[:, None] + (c * sw_c + fy * sw_y + fx * sw_x)[None, :]
            tl.store(out, acc.to(w_ptr.dtype.element_ty), mask=o_mask)
        else:
            # fp32 partials, summed in split order by split_reduce_kernel: deterministic
            part = ws_ptr + ((pid_z * K + rm) * NCOL)[:, None] + rn[None, :]
            tl.store(part, acc, mask=o_mask)


@triton.jit
def split_reduce_kernel(ws_ptr, w_ptr, G, K, C,
                        sw_g, sw_k, sw_c, sw_y, sw_x,
                        Y: tl.constexpr, X: tl.constexpr, CH_FAST: tl.constexpr,
                        SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    NCOL = C * Y * X
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    ok = idx < G * K * NCOL
    # flat -> (g, k, col): the filter-gradient element
    col = idx % NCOL
    gk = idx // NCOL
    k = gk % K
    g = gk // K
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        acc += tl.load(ws_ptr + ((g * SPLIT + s) * K + k) * NCOL + col, mask=ok, other=0.0)
    # col -> (c, y, x), the same split the GEMM used for its columns
    c, fy, fx = _split3(col, Y, X, CH_FAST, C)
    out = w_ptr + g * sw_g + k * sw_k + c * sw_c + fy * sw_y + fx * sw_x
    tl.store(out, acc.to(w_ptr.dtype.element_ty), mask=ok)

"""Direct convolution for groups of few channels (depthwise and small groups): fwd,
bwd_data and bwd_weight without a GEMM, on FMA units.

A depthwise layer (one input channel per group) is an implicit GEMM whose every group is
one column wide: a matrix-core tile of 16 columns does one column of work. These kernels
compute the sums directly instead. A tile is a run of BLOCK_M pixels of one image row
(one (n, h) pair, so the pixel's coordinates are a scalar plus a lane index) by BLOCK_N
channels counted across groups (the flat channel g * CG + c, or g * KG + k): in a
channels-last tensor those channels are consecutive memory, loaded 16 bytes at a time.
The per-group channels (CG, KG, at most config.MAX_GROUP_CHANNELS each) and a filter row's taps
are unrolled at compile time, the filter rows walked in a loop: each tap's filter values
are one short vector, and the taps of one row read the same input row shifted by a pixel,
so the row's lines are fetched once and hit L1 for the other taps.

    direct_fwd_kernel        y[n, g, k, ho, wo] = sum over c, fy, fx of x * w; a program
                             walks ROWS output rows (block_k), so the input rows the next
                             row's taps share with this one's come from L1
    direct_bwd_data_kernel   dx[n, g, c, hi, wi] = sum over k, fy, fx of dy * w, where
                             ho = (hi + PH - fy * DH) / SH is a whole output pixel; ROWS
                             input rows a program
    direct_bwd_weight_kernel dw[g, k, c, fy, fx] = sum over n, ho, wo of dy * x: the image
                             rows are cut into SPLIT parts; each program sums its part's
                             rows for one block of channels and every tap at once, in a
                             BLOCK_M x TAPS x BLOCK_N fp32 tile (TAPS a power of two >= Y * X)
                             summed across its pixels at the end of the part: the output
                             gradient is read once, the input under each tap from L1. The
                             parts are added in part order by
                             conv_bwd_weight.split_reduce_kernel (deterministic)

Products are formed and summed in fp32 (int32 for integer types), one multiply-add at a
time: the FMA path's accumulation (tolerance.accumulation).

Where Triton's specialization (divisibility by 16) cannot tell, the input's and the output's
pixel strides arrive divided by XA and YA, the most elements up to 16 bytes that divide them
all (`pixel_alignment`), and the groups divided by GA (up to 8), and are multiplied back at
the start: so Triton knows that each pixel's channels start
on a 16-byte boundary and that the channel mask is constant over runs of them, and loads 16
bytes at a time where channels are a multiple of 8 but not of 16 (72, 728; Triton's own
specialization proves divisibility by 16 alone).

The unrolled loops call no other Triton function: Triton's interpreter pays about a
third of a millisecond for every such call, which for a 3x3 filter is most of a tile's time.
A row's mask is made over the tile's lanes (`zero + row`): the interpreter cannot combine
a scalar mask with a vector one.
"""
import torch
import triton
import triton.language as tl

from convgen.kernels import spec
from convgen.kernels.conv_bwd_weight import REDUCE_BLOCK, split_reduce_kernel
from convgen.kernels.geometry import direct_channels, direct_parts, direct_pixels, direct_taps


@triton.jit
def _rows(pid, BLOCK_M: tl.constexpr, ROWS: tl.constexpr, W, H):
    """(image, first row, first column) of a program that covers BLOCK_M pixels of ROWS
    rows of a H x W image: programs walk the row's blocks, then the rows, then the images."""
    blocks = tl.cdiv(W, BLOCK_M)
    groups = tl.cdiv(H, ROWS)
    t = pid // blocks
    w0 = (pid - t * blocks) * BLOCK_M
    n = t // groups
    return n, (t - n * groups) * ROWS, w0


@triton.jit
def direct_fwd_kernel(
    x_ptr, w_ptr, y_ptr,
    N, G, HI, WI, HO, WO, PH, PW,
    sx_n, sx_g, sx_c, sx_h, sx_w,
    sw_g, sw_k, sw_c, sw_y, sw_x,
    sy_n, sy_g, sy_k, sy_h, sy_w,
    CG: tl.constexpr, KG: tl.constexpr, XA: tl.constexpr, YA: tl.constexpr, GA: tl.constexpr,
    Y: tl.constexpr, X: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr,
    ACC_INT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):
    G = G * GA
    sx_n, sx_h, sx_w = sx_n * XA, sx_h * XA, sx_w * XA
    sy_n, sy_h, sy_w = sy_n * YA, sy_h * YA, sy_w * YA
    n, ho0, w0 = _rows(tl.program_id(0), BLOCK_M, ROWS, WO, HO)
    wo = w0 + tl.arange(0, BLOCK_M)
    j = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)   # flat output channel g * KG + k
    g = j // KG
    k = j - g * KG
    j_ok = j < G * KG
    acc_t = tl.int32 if ACC_INT else tl.float32
    zero = tl.zeros_like(wo)
    wi0 = wo * SW - PW
    y_ch = y_ptr + n * sy_n + g * sy_g + k * sy_k
    for r in range(ROWS):
        # one output row a step: the next row's taps read two of this row's input rows again,
        # from L1
        ho = ho0 + r
        wo_ok = (wo < WO) & (zero + ho < HO)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_t)
        for c in tl.static_range(CG):
            x_ch = x_ptr + n * sx_n + g * sx_g + c * sx_c
            w_ch = w_ptr + g * sw_g + k * sw_k + c * sw_c
            for fy in range(Y):
                hi = ho * SH - PH + fy * DH    # a scalar: the tile is one output row
                x_row = x_ch[None, :] + hi * sx_h
                row_ok = wo_ok & (zero + hi >= 0) & (zero + hi < HI)
                for fx in tl.static_range(X):
                    wi = wi0 + fx * DW
                    ok = row_ok & (wi >= 0) & (wi < WI)
                    a = tl.load(x_row + (wi * sx_w)[:, None], mask=ok[:, None] & j_ok[None, :],
                                other=0.0)
                    b = tl.load(w_ch + fy * sw_y + fx * sw_x, mask=j_ok, other=0.0)
                    acc += a.to(acc_t) * b.to(acc_t)[None, :]
        tl.store((y_ch + ho * sy_h)[None, :] + (wo * sy_w)[:, None],
                 acc.to(y_ptr.dtype.element_ty), mask=wo_ok[:, None] & j_ok[None, :])


@triton.jit
def direct_bwd_data_kernel(
    x_ptr, w_ptr, y_ptr,
    N, G, HI, WI, HO, WO, PH, PW,
    sx_n, sx_g, sx_c, sx_h, sx_w,
    sw_g, sw_k, sw_c, sw_y, sw_x,
    sy_n, sy_g, sy_k, sy_h, sy_w,
    CG: tl.constexpr, KG: tl.constexpr, XA: tl.constexpr, YA: tl.constexpr, GA: tl.constexpr,
    Y: tl.constexpr, X: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr,
    ACC_INT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):
    # x_ptr is written: the input gradient
    G = G * GA
    sx_n, sx_h, sx_w = sx_n * XA, sx_h * XA, sx_w * XA
    sy_n, sy_h, sy_w = sy_n * YA, sy_h * YA, sy_w * YA
    n, hi0, w0 = _rows(tl.program_id(0), BLOCK_M, ROWS, WI, HI)
    wi = w0 + tl.arange(0, BLOCK_M)
    j = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)   # flat input channel g * CG + c
    g = j // CG
    c = j - g * CG
    j_ok = j < G * CG
    acc_t = tl.int32 if ACC_INT else tl.float32
    zero = tl.zeros_like(wi)
    x_ch = x_ptr + n * sx_n + g * sx_g + c * sx_c
    for r in range(ROWS):
        hi = hi0 + r
        wi_ok = (wi < WI) & (zero + hi < HI)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=acc_t)
        for k in tl.static_range(KG):
            y_ch = y_ptr + n * sy_n + g * sy_g + k * sy_k
            w_ch = w_ptr + g * sw_g + k * sw_k + c * sw_c
            for fy in range(Y):
                th = hi + PH - fy * DH         # ho * SH: a scalar
                ho = th // SH
                y_row = y_ch[None, :] + ho * sy_h
                row_ok = wi_ok & (zero + th >= 0) & (zero + th < HO * SH)
                if SH > 1:
                    row_ok = row_ok & (zero + th % SH == 0)
                for fx in tl.static_range(X):
                    tw = wi + PW - fx * DW
                    wo = tw // SW
                    ok = row_ok & (tw >= 0) & (wo < WO)
                    if SW > 1:
                        ok = ok & (tw % SW == 0)
                    a = tl.load(y_row + (wo * sy_w)[:, None], mask=ok[:, None] & j_ok[None, :],
                                other=0.0)
                    b = tl.load(w_ch + fy * sw_y + fx * sw_x, mask=j_ok, other=0.0)
                    acc += a.to(acc_t) * b.to(acc_t)[None, :]
        tl.store((x_ch + hi * sx_h)[None, :] + (wi * sx_w)[:, None],
                 acc.to(x_ptr.dtype.element_ty), mask=wi_ok[:, None] & j_ok[None, :])


@triton.jit
def direct_bwd_weight_kernel(
    x_ptr, w_ptr, y_ptr, ws_ptr,
    N, G, HI, WI, HO, WO, PH, PW, ROWS_PER_PART,
    sx_n, sx_g, sx_c, sx_h, sx_w,
    sw_g, sw_k, sw_c, sw_y, sw_x,
    sy_n, sy_g, sy_k, sy_h, sy_w,
    CG: tl.constexpr, KG: tl.constexpr, XA: tl.constexpr, YA: tl.constexpr, GA: tl.constexpr,
    Y: tl.constexpr, X: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
    DH: tl.constexpr, DW: tl.constexpr,
    ACC_INT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SPLIT: tl.constexpr, TAPS: tl.constexpr,
):
    # w_ptr is written: the filter gradient
    G = G * GA
    sx_n, sx_h, sx_w = sx_n * XA, sx_h * XA, sx_w * XA
    sy_n, sy_h, sy_w = sy_n * YA, sy_h * YA, sy_w * YA
    j = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)   # flat output channel g * KG + k
    s = tl.program_id(1)                                     # this program's part of the rows
    g = j // KG
    k = j - g * KG
    j_ok = j < G * KG
    row_begin = s * ROWS_PER_PART
    row_end = tl.minimum(N * HO, row_begin + ROWS_PER_PART)
    lanes = tl.arange(0, BLOCK_M)
    # every filter tap at once: a tile's second dimension (TAPS, a power of two >= Y * X)
    taps = tl.arange(0, TAPS)
    fy = taps // X
    fx = taps - fy * X
    t_ok = taps < Y * X
    acc_t = tl.int32 if ACC_INT else tl.float32
    y_ch = y_ptr + g * sy_g + k * sy_k
    for c in tl.static_range(CG):
        x_ch = x_ptr + g * sx_g + c * sx_c
        acc = tl.zeros((BLOCK_M, TAPS, BLOCK_N), dtype=acc_t)
        for row in range(row_begin, row_end):
            n = row // HO
            ho = row - n * HO
            hi = ho * SH - PH + fy * DH                    # per tap
            h_ok = t_ok & (hi >= 0) & (hi < HI)
            y_row = y_ch[None, :] + (n * sy_n + ho * sy_h)
            x_rows = n * sx_n + hi * sx_h
            for w0 in range(0, WO, BLOCK_M):
                wo = w0 + lanes
                wo_ok = wo < WO
                # the output gradient's pixels once, the input's under every tap
                a = tl.load(y_row + (wo * sy_w)[:, None], mask=wo_ok[:, None] & j_ok[None, :],
                            other=0.0)
                wi = (wo * SW - PW)[:, None] + (fx * DW)[None, :]
                ok = wo_ok[:, None] & h_ok[None, :] & (wi >= 0) & (wi < WI)
                b = tl.load(x_ch[None, None, :] + (x_rows[None, :] + wi * sx_w)[:, :, None],
                            mask=ok[:, :, None] & j_ok[None, None, :], other=0.0)
                acc += a.to(acc_t)[:, None, :] * b.to(acc_t)
        total = tl.sum(acc, axis=0)                        # (tap, channel)
        o_ok = t_ok[:, None] & j_ok[None, :]
        if SPLIT == 1:
            out = (w_ptr + g * sw_g + k * sw_k + c * sw_c)[None, :] + (fy * sw_y + fx * sw_x)[:, None]
            tl.store(out, total.to(w_ptr.dtype.element_ty), mask=o_ok)
        else:
            # this part's fp32 sums at (g, s, k, tap, c): split_reduce_kernel's order
            part = (ws_ptr + ((g * SPLIT + s) * KG + k) * (Y * X * CG) + c)[None, :] + (taps * CG)[:, None]
            tl.store(part, total, mask=o_ok)


_KERNELS = {"fwd": direct_fwd_kernel, "bwd_data": direct_bwd_data_kernel,
            "bwd_weight": direct_bwd_weight_kernel}


def pixel_alignment(runtime: dict, prefix: str, t) -> int:
    """The most elements, up to 16 bytes' worth, that divide a tensor's pixel strides (n, h, w):
    1 where one is odd, and 1 where all are multiples of 16 elements, which Triton's own
    specialization proves (the division would only hide that; on the H100 it cost fwd 5-17%
    on MobileNetV2's and ConvNeXt-T's depthwise layers)."""
    strides = [runtime[prefix + d] for d in "nhw"]
    if all(v % 16 == 0 for v in strides):
        return 1
    per = max(1, 16 // t.element_size())
    while per > 1 and any(v % per for v in strides):
        per //= 2
    return per


def launch_spec(p, tensors, out, cfg, meta) -> spec.LaunchSpec:
    runtime = spec.tensor_args(p, tensors, out)
    for name in ("C", "K"):
        del runtime[name]
    ga = 1 if p.g % 16 == 0 else 8   # as pixel_alignment: only where Triton cannot tell
    while p.g % ga:
        ga //= 2
    runtime["G"] = p.g // ga
    aligned = {}
    for prefix, ptr in (("sx_", "x_ptr"), ("sy_", "y_ptr")):
        a = aligned[prefix] = pixel_alignment(runtime, prefix, runtime[ptr])
        for d in "nhw":
            runtime[prefix + d] //= a
    constexprs = {**spec.geometry_args(p, "Y", "X", "SH", "SW", "DH", "DW"),
                  "CG": p.c, "KG": p.k, "XA": aligned["sx_"], "YA": aligned["sy_"], "GA": ga,
                  "ACC_INT": meta["ACC_INT"],
                  "BLOCK_M": cfg.block_m, "BLOCK_N": cfg.block_n}
    kernel = _KERNELS[p.direction.name]
    col_blocks = triton.cdiv(direct_channels(p), cfg.block_n)
    if p.direction.name != "bwd_weight":
        h, w, n = direct_pixels(p)
        constexprs["ROWS"] = cfg.block_k
        grid = (n * triton.cdiv(h, cfg.block_k) * triton.cdiv(w, cfg.block_m), col_blocks)
        return spec.LaunchSpec(kernel, grid, runtime, constexprs)
    split, rows = direct_parts(p, cfg)
    ws = None
    if split > 1:
        ws = torch.empty((p.g * split * p.k * p.c * p.y * p.x,), dtype=torch.float32,
                         device=out.device)
    runtime.update(ws_ptr=out if ws is None else ws, ROWS_PER_PART=rows)
    constexprs.update(SPLIT=split, TAPS=direct_taps(p))

    def reduce(compile_options):
        total = p.g * p.k * p.c * p.y * p.x
        split_reduce_kernel[(triton.cdiv(total, REDUCE_BLOCK),)](
            ws, out, p.g, p.k, p.c, *out.stride(),
            Y=p.y, X=p.x, SPLIT=split, BLOCK=REDUCE_BLOCK,
            **compile_options({"num_warps": 4}))

    return spec.LaunchSpec(kernel, (col_blocks, split), runtime, constexprs, ws,
                           finish=reduce if ws is not None else None)

"""A complete user implementation for `convgen --impl`: a forward convolution in Triton.

    convgen --impl docs/examples/direct_conv.py:conv2d_fwd --operation conv2d -t f16 \
        -batchsize=2 -in_channels=6 -out_channels=5 -in_h=9 -in_w=7 -fil_h=3 -fil_w=3 \
        -padding_h=1 -padding_w=1 -pv

One program computes BLOCK output elements, each a sum over its group's channels and the
filter taps in fp32, read through the logical views' strides (so every layout the suite
draws works unchanged). Without a GPU, convgen runs it in Triton's interpreter.
docs/implementations.md explains the interface; this file is the example it refers to.
"""
import triton
import triton.language as tl

from convgen.implementations import Unsupported

__version__ = "1.0"


@triton.jit
def _fwd_kernel(x_ptr, w_ptr, y_ptr, TOTAL, G, C, K, HI, WI, HO, WO,
                sx_n, sx_g, sx_c, sx_h, sx_w, sw_g, sw_k, sw_c, sw_y, sw_x,
                sy_n, sy_g, sy_k, sy_h, sy_w, SH, SW, PH, PW, DH, DW,
                Y: tl.constexpr, X: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)   # flat (n, g, k, ho, wo)
    ok = i < TOTAL
    wo = i % WO
    ho = (i // WO) % HO
    k = (i // (WO * HO)) % K
    g = (i // (WO * HO * K)) % G
    n = i // (WO * HO * K * G)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for c in range(0, C):
        for fy in tl.static_range(Y):
            hi = ho * SH - PH + fy * DH
            for fx in tl.static_range(X):
                wi = wo * SW - PW + fx * DW
                inside = ok & (hi >= 0) & (hi < HI) & (wi >= 0) & (wi < WI)
                a = tl.load(x_ptr + n * sx_n + g * sx_g + c * sx_c + hi * sx_h + wi * sx_w,
                            mask=inside, other=0.0)
                b = tl.load(w_ptr + g * sw_g + k * sw_k + c * sw_c + fy * sw_y + fx * sw_x,
                            mask=ok, other=0.0)
                acc += a.to(tl.float32) * b.to(tl.float32)
    tl.store(y_ptr + n * sy_n + g * sy_g + k * sy_k + ho * sy_h + wo * sy_w,
             acc.to(y_ptr.dtype.element_ty), mask=ok)


def conv2d_fwd(request):
    """convgen's implementation interface: write request.out from request.inputs."""
    p = request.problem
    if p.direction.name != "fwd":
        raise Unsupported(f"this example computes the forward direction only, not {p.direction.name}")
    if p.dtype.is_int or p.dtype.is_fp8 or p.is_3d:
        raise Unsupported("this example takes 2-D problems of f32, f16 and bf16")
    launch(p, request.inputs["input"], request.inputs["filter"], request.out, p.pad_h_l, p.pad_w_l)


def launch(p, x, w, y, pad_top, pad_left, block=128):
    """The kernel over every output element of y (the padding on the top and left side: the
    output's size already says the rest)."""
    total = y.numel()
    _fwd_kernel[(triton.cdiv(total, block),)](
        x, w, y, total, p.g, p.c, p.k, p.hi, p.wi, p.ho, p.wo,
        *x.stride(), *w.stride(), *y.stride(),
        p.stride_h, p.stride_w, pad_top, pad_left, p.dil_h, p.dil_w,
        Y=p.y, X=p.x, BLOCK=block)

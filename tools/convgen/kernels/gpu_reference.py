"""The GPU reference (`-pv_with_gpu`): a direct convolution on FMA units, fp32 accumulation.

Deliberately unlike the kernel under test: no implicit GEMM, no tl.dot, no
tiles over the reduction, and none of its indexing code, so that a bug shared
by both cannot hide. Each program owns BLOCK consecutive elements of the
written tensor in logical order, recovers their logical coordinates, and walks
the reduction one term at a time with `acc += a * b` (fp32; int32 for integer
inputs). A `tl.sum` of a broadcast product is avoided on purpose: Triton turns
it into tl.dot, which runs on matrix cores.

Reduction order per output element:
    fwd         (c, y, x)       taps outside the input add 0
    bwd_data    (y, x, k)       taps that land between output pixels (stride) or outside add 0
    bwd_weight  (n, ho, wo)     optionally split over n into parts summed afterwards
Index arithmetic is 32-bit (problem.py caps every tensor below 2^31 elements),
except the flat element index, which may pass 2^31 in the last block.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

# imported for its side effect: TRITON_DEFAULT_FP_FUSION set before any compile (acc += a*b is one FMA)
from convgen import backend  # noqa: F401  (sets TRITON_DEFAULT_FP_FUSION)
from convgen import depth
from convgen.problem import LOGICAL, ConvProblem

GPU_BLOCK = 256
INTERPRETER_MAX_BLOCK = 4096   # the interpreter pays per program and per loop step, not per element
SPLIT_TARGET_PROGRAMS = 1024   # bwd_weight splits its batch loop until about this many programs run


@triton.jit
def _mac(acc, a, b, ACC_INT: tl.constexpr):
    if ACC_INT:
        acc += a.to(tl.int32) * b.to(tl.int32)
    else:
        acc += a.to(tl.float32) * b.to(tl.float32)
    return acc


@triton.jit
def _zeros(BLOCK: tl.constexpr, ACC_INT: tl.constexpr):
    # one return: Triton 3.9's compiler rejects a return in each constexpr branch
    return tl.zeros([BLOCK], dtype=tl.int32 if ACC_INT else tl.float32)


@triton.jit
def conv_ref_fwd_kernel(
        x_ptr, w_ptr, y_ptr, numel,
        G, C, K, HI, WI, HO, WO, Y, X, SH, SW, DH, DW, PH, PW,
        sx_n, sx_g, sx_c, sx_h, sx_w,
        sw_g, sw_k, sw_c, sw_y, sw_x,
        sy_n, sy_g, sy_k, sy_h, sy_w,
        ACC_INT: tl.constexpr, BLOCK: tl.constexpr):
    # flat index into the output, logical order (n, g, k, ho, wo)
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = idx < numel
    idx = tl.where(live, idx, 0)
    wo = (idx % WO).to(tl.int32)   # output column
    rest = idx // WO
    ho = (rest % HO).to(tl.int32)  # output row
    rest = rest // HO
    k = (rest % K).to(tl.int32)    # output channel in the group
    rest = rest // K
    g = (rest % G).to(tl.int32)    # group
    n = (rest // G).to(tl.int32)   # sample
    h0 = ho * SH - PH              # input row of filter row 0 (unpadded coordinates)
    w0 = wo * SW - PW              # input column of filter column 0
    x_base = n * sx_n + g * sx_g   # input (n, g)
    w_base = g * sw_g + k * sw_k   # filter (g, k)
    acc = _zeros(BLOCK, ACC_INT)
    for c in range(0, C):
        for fy in range(0, Y):
            hi = h0 + fy * DH      # input row
            ok_h = live & (hi >= 0) & (hi < HI)
            for fx in range(0, X):
                wi = w0 + fx * DW  # input column
                ok = ok_h & (wi >= 0) & (wi < WI)
                x_off = tl.where(ok, x_base + c * sx_c + hi * sx_h + wi * sx_w, 0)  # input (n, g, c, hi, wi)
                w_off = w_base + c * sw_c + fy * sw_y + fx * sw_x                    # filter (g, k, c, y, x)
                a = tl.load(x_ptr + x_off, mask=ok, other=0.0)
                b = tl.load(w_ptr + w_off, mask=live, other=0.0)
                acc = _mac(acc, a, b, ACC_INT)
    y_off = n * sy_n + g * sy_g + k * sy_k + ho * sy_h + wo * sy_w  # output (n, g, k, ho, wo)
    tl.store(y_ptr + y_off, acc.to(y_ptr.dtype.element_ty), mask=live)


@triton.jit
def conv_ref_bwd_data_kernel(
        x_ptr, w_ptr, y_ptr, numel,
        G, C, K, HI, WI, HO, WO, Y, X, SH, SW, DH, DW, PH, PW,
        sx_n, sx_g, sx_c, sx_h, sx_w,
        sw_g, sw_k, sw_c, sw_y, sw_x,
        sy_n, sy_g, sy_k, sy_h, sy_w,
        ACC_INT: tl.constexpr, BLOCK: tl.constexpr):
    # flat index into the input gradient, logical order (n, g, c, hi, wi)
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = idx < numel
    idx = tl.where(live, idx, 0)
    wi = (idx % WI).to(tl.int32)   # input column
    rest = idx // WI
    hi = (rest % HI).to(tl.int32)  # input row
    rest = rest // HI
    c = (rest % C).to(tl.int32)    # input channel in the group
    rest = rest // C
    g = (rest % G).to(tl.int32)    # group
    n = (rest // G).to(tl.int32)   # sample
    y_base = n * sy_n + g * sy_g   # output gradient (n, g)
    w_base = g * sw_g + c * sw_c   # filter (g, c)
    acc = _zeros(BLOCK, ACC_INT)
    for fy in range(0, Y):
        th = hi + PH - fy * DH     # padded input row minus the tap offset: ho * SH when the tap is used
        thc = tl.maximum(th, 0)    # // truncates toward zero: divide only non-negative rows (th<0 masked)
        ho = thc // SH             # output row
        ok_h = live & (th >= 0) & (thc - ho * SH == 0) & (ho < HO)
        for fx in range(0, X):
            tw = wi + PW - fx * DW  # padded input column minus the tap offset
            twc = tl.maximum(tw, 0)
            wo = twc // SW          # output column
            ok = ok_h & (tw >= 0) & (twc - wo * SW == 0) & (wo < WO)
            pix = tl.where(ok, y_base + ho * sy_h + wo * sy_w, 0)   # output gradient (n, g, :, ho, wo)
            tap = w_base + fy * sw_y + fx * sw_x                    # filter (g, :, c, y, x)
            for k in range(0, K):
                a = tl.load(y_ptr + pix + k * sy_k, mask=ok, other=0.0)
                b = tl.load(w_ptr + tap + k * sw_k, mask=live, other=0.0)
                acc = _mac(acc, a, b, ACC_INT)
    x_off = n * sx_n + g * sx_g + c * sx_c + hi * sx_h + wi * sx_w  # input gradient (n, g, c, hi, wi)
    tl.store(x_ptr + x_off, acc.to(x_ptr.dtype.element_ty), mask=live)


@triton.jit
def conv_ref_bwd_weight_kernel(
        x_ptr, w_ptr, y_ptr, numel, N, N_PER, PART_STRIDE,
        G, C, K, HI, WI, HO, WO, Y, X, SH, SW, DH, DW, PH, PW,
        sx_n, sx_g, sx_c, sx_h, sx_w,
        sw_g, sw_k, sw_c, sw_y, sw_x,
        sy_n, sy_g, sy_k, sy_h, sy_w,
        ACC_INT: tl.constexpr, BLOCK: tl.constexpr):
    # flat index into the filter gradient, logical order (g, k, c, y, x)
    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    live = idx < numel
    idx = tl.where(live, idx, 0)
    fx = (idx % X).to(tl.int32)    # filter column
    rest = idx // X
    fy = (rest % Y).to(tl.int32)   # filter row
    rest = rest // Y
    c = (rest % C).to(tl.int32)    # input channel in the group
    rest = rest // C
    k = (rest % K).to(tl.int32)    # output channel in the group
    g = (rest // K).to(tl.int32)   # group
    part = tl.program_id(1)
    n_lo = part * N_PER            # this part's samples: [n_lo, n_hi)
    n_hi = tl.minimum(N, n_lo + N_PER)
    dh = fy * DH - PH              # input row of output row 0 (unpadded coordinates)
    dw = fx * DW - PW              # input column of output column 0
    x_gc = g * sx_g + c * sx_c     # input (g, c)
    y_gk = g * sy_g + k * sy_k     # output gradient (g, k)
    acc = _zeros(BLOCK, ACC_INT)
    for n in range(n_lo, n_hi):
        for ho in range(0, HO):
            hi = ho * SH + dh      # input row
            ok_h = live & (hi >= 0) & (hi < HI)
            for wo in range(0, WO):
                wi = wo * SW + dw  # input column
                ok = ok_h & (wi >= 0) & (wi < WI)
                x_off = tl.where(ok, n * sx_n + x_gc + hi * sx_h + wi * sx_w, 0)  # input (n, g, c, hi, wi)
                y_off = n * sy_n + y_gk + ho * sy_h + wo * sy_w                    # out grad (n, g, k, ho, wo)
                a = tl.load(y_ptr + y_off, mask=live, other=0.0)
                b = tl.load(x_ptr + x_off, mask=ok, other=0.0)
                acc = _mac(acc, a, b, ACC_INT)
    # filter gradient (g, k, c, y, x) of this part; PART_STRIDE is 0 when there is one part
    w_off = part * PART_STRIDE + g * sw_g + k * sw_k + c * sw_c + fy * sw_y + fx * sw_x
    tl.store(w_ptr + w_off, acc.to(w_ptr.dtype.element_ty), mask=live)


class RefLaunch(NamedTuple):   # not a dataclass: isa.compilable() runs this module outside sys.modules
    kernel: object
    grid: tuple
    runtime: dict       # runtime arguments by parameter name
    constexprs: dict
    workspace: torch.Tensor | None   # bwd_weight parts (parts, g, k, c, y, x), summed into `out`


def _interpreting(t: torch.Tensor) -> bool:
    return t.device.type == "cpu"


def launch_spec(p: ConvProblem, tensors: dict[str, torch.Tensor], out: torch.Tensor,
                block: int | None = None, parts: int | None = None) -> RefLaunch:
    """Grid and arguments for `p`; `block` and `parts` (bwd_weight batch split) override the defaults."""
    interp = _interpreting(out)
    numel = out.numel()
    if block is None:
        block = min(INTERPRETER_MAX_BLOCK, triton.next_power_of_2(numel)) if interp else GPU_BLOCK
    programs = triton.cdiv(numel, block)
    ws = None
    dst = out
    if p.direction.splits_reduction:   # bwd_weight: the batch loop may be split into parts
        if parts is None:
            # few programs each walking a long batch loop leave the GPU idle: split the batch
            parts = 1 if interp else max(1, min(p.n, SPLIT_TARGET_PROGRAMS // programs))
        n_per = triton.cdiv(p.n, parts)
        parts = triton.cdiv(p.n, n_per)  # no empty parts
        if parts > 1:
            assert parts * numel < 2**31, "workspace offsets are 32-bit"
            ws = torch.empty((parts, *p.logical_shape("filter")), dtype=torch.float32, device=out.device)
            dst = ws[0]
    else:
        parts, n_per = 1, p.n
    full = {**tensors, p.writes: dst}
    runtime = {"x_ptr": full["input"], "w_ptr": full["filter"], "y_ptr": full["output"], "numel": numel,
               "G": p.g, "C": p.c, "K": p.k, "HI": p.hi, "WI": p.wi, "HO": p.ho, "WO": p.wo,
               "Y": p.y, "X": p.x, "SH": p.stride_h, "SW": p.stride_w, "DH": p.dil_h, "DW": p.dil_w,
               "PH": p.pad_h_l, "PW": p.pad_w_l}
    if p.direction.splits_reduction:
        runtime.update(N=p.n, N_PER=n_per, PART_STRIDE=0 if ws is None else ws.stride(0))
    for name, prefix in (("input", "sx_"), ("filter", "sw_"), ("output", "sy_")):
        runtime.update({prefix + d: s for d, s in zip(LOGICAL[name], full[name].stride())})
    constexprs = {"ACC_INT": p.dtype.is_int, "BLOCK": block}
    return RefLaunch(p.direction.load("gpu_reference"), (programs, parts), runtime, constexprs, ws)


def gpu_reference(problem: ConvProblem, tensors: dict[str, torch.Tensor], out: torch.Tensor,
                  *, block: int | None = None, parts: int | None = None) -> None:
    """Write `problem.writes` into `out` (logical-order view; fp32, or int32 for i8) on the inputs' device."""
    if problem.is_3d:   # one 2-D pass per filter depth tap (depth.py)
        def tap(q, tq, z):
            part, _ = depth.slice_out(q, out.dtype, out.device)
            gpu_reference(q, tq, part, block=block, parts=parts)
            return part
        out.copy_(depth.combine(problem, tensors, out.dtype, tap))
        return
    spec = launch_spec(problem, tensors, out, block, parts)
    spec.kernel[spec.grid](**spec.runtime, **spec.constexprs)
    if spec.workspace is not None:
        # parts summed in a fixed order, on the device
        acc = spec.workspace[0].clone()
        for i in range(1, spec.workspace.shape[0]):
            acc += spec.workspace[i]
        out.copy_(acc)

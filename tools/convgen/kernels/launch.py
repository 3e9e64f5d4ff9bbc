"""Launch the implicit-GEMM kernel for a problem: grid, strides, constexprs, split-K workspace."""
from __future__ import annotations

import math

import torch
import triton

from convgen.backend import Backend
from convgen.kernels.config import KernelConfig
from convgen.kernels.implicit_gemm import (DIR_BWD_DATA, DIR_BWD_WEIGHT, DIR_FWD, conv_gemm_kernel,
                                           split_reduce_kernel)
from convgen.problem import BWD_DATA, BWD_WEIGHT, FWD, ConvProblem

_DIR = {FWD: DIR_FWD, BWD_DATA: DIR_BWD_DATA, BWD_WEIGHT: DIR_BWD_WEIGHT}


def _channels_fastest(problem: ConvProblem) -> bool:
    """Walk the reduction channel-innermost when the tensor read along it is channels-last."""
    tensor, ch = {FWD: ("input", "c"), BWD_DATA: ("output", "k"), BWD_WEIGHT: ("input", "c")}[
        problem.direction]
    return problem.layouts[tensor][-1] == ch


def run_conv(problem: ConvProblem, tensors: dict[str, torch.Tensor], out: torch.Tensor,
             cfg: KernelConfig, use_dot: bool, backend: Backend, input_precision: str = "ieee") -> None:
    """Compute the direction's output into `out` (a logical-order view) from logical-order inputs."""
    p = problem
    full = dict(tensors)
    full[p.writes] = out
    x, w, y = full["input"], full["filter"], full["output"]
    m, n, r = p.gemm
    ystep = p.stride_h // math.gcd(p.stride_h, p.dil_h)
    xstep = p.stride_w // math.gcd(p.stride_w, p.dil_w)
    split = cfg.split if p.direction == BWD_WEIGHT else 1
    r_chunk = triton.cdiv(triton.cdiv(r, split), cfg.block_k) * cfg.block_k
    split = triton.cdiv(r, r_chunk)  # no empty parts
    ws = out
    if split > 1:
        ws = torch.empty((p.g * split * p.k * n,), dtype=torch.float32, device=out.device)
    z = p.g * (p.stride_h * p.stride_w if p.direction == BWD_DATA else split)
    grid = (triton.cdiv(m, cfg.block_m), triton.cdiv(n, cfg.block_n), z)
    is_int = p.dtype.is_int
    conv_gemm_kernel[grid](
        x, w, y, ws,
        p.n, p.c, p.k, p.hi, p.wi, p.ho, p.wo, p.pad_h_l, p.pad_w_l, r_chunk,
        *x.stride(), *w.stride(), *y.stride(),
        Y=p.y, X=p.x, SH=p.stride_h, SW=p.stride_w, DH=p.dil_h, DW=p.dil_w,
        YSTEP=ystep, XSTEP=xstep, DIR=_DIR[p.direction], USE_DOT=use_dot,
        INPUT_PRECISION=input_precision,
        DOT_UPCAST=backend.interpreter and p.dtype.torch_in == torch.bfloat16,
        ACC_INT=is_int, CH_FAST=_channels_fastest(p), SPLIT=split,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
        **backend.launch_options(cfg.compile_options()),
    )
    if split > 1:
        block = 1024
        total = p.g * p.k * n
        split_reduce_kernel[(triton.cdiv(total, block),)](
            ws, w, p.g, p.k, p.c, *w.stride(),
            Y=p.y, X=p.x, CH_FAST=_channels_fastest(p), SPLIT=split, BLOCK=block,
            **backend.launch_options({"num_warps": 4}),
        )

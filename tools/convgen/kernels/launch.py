"""Launch the implicit-GEMM kernel for a problem: grid, strides, constexprs, split-K workspace."""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton

from convgen.backend import Backend
from convgen.kernels.config import KernelConfig
from convgen.kernels.implicit_gemm import (DIR_BWD_DATA, DIR_BWD_WEIGHT, DIR_FWD, conv_gemm_kernel,
                                           split_reduce_kernel)
from convgen.problem import BWD_DATA, BWD_WEIGHT, FWD, ConvProblem

_DIR = {FWD: DIR_FWD, BWD_DATA: DIR_BWD_DATA, BWD_WEIGHT: DIR_BWD_WEIGHT}
_STRIDE_NAMES = {"input": ("sx_n", "sx_g", "sx_c", "sx_h", "sx_w"),
                 "filter": ("sw_g", "sw_k", "sw_c", "sw_y", "sw_x"),
                 "output": ("sy_n", "sy_g", "sy_k", "sy_h", "sy_w")}
REDUCE_BLOCK = 1024


@dataclass
class LaunchSpec:
    grid: tuple
    runtime: dict      # runtime arguments by parameter name
    constexprs: dict
    split: int         # bwd_weight reduction parts (1: the GEMM writes the output itself)
    workspace: torch.Tensor | None


def _channels_fastest(problem: ConvProblem) -> bool:
    """Walk the reduction channel-innermost when the tensor read along it is channels-last."""
    tensor, ch = {FWD: ("input", "c"), BWD_DATA: ("output", "k"), BWD_WEIGHT: ("input", "c")}[
        problem.direction]
    return problem.layouts[tensor][-1] == ch


def _max_imprecise(cfg: KernelConfig) -> int | None:
    """tl.dot's max_num_imprecise_acc. Triton refuses values above the dot's K (BLOCK_K);
    above it means never promote, which is Triton's own default (None): fast fp8 on sm90."""
    v = cfg.max_num_imprecise_acc
    return None if v is None or v > cfg.block_k else v


def gemm_spec(p: ConvProblem, tensors: dict[str, torch.Tensor], out: torch.Tensor, cfg: KernelConfig,
              use_dot: bool, interpreter: bool, input_precision: str = "ieee") -> LaunchSpec:
    full = {**tensors, p.writes: out}
    m, n, r = p.gemm
    split = cfg.split if p.direction == BWD_WEIGHT else 1
    r_chunk = triton.cdiv(triton.cdiv(r, split), cfg.block_k) * cfg.block_k
    split = triton.cdiv(r, r_chunk)  # no empty parts
    ws = None
    if split > 1:
        ws = torch.empty((p.g * split * p.k * n,), dtype=torch.float32, device=out.device)
    z = p.g * (p.stride_h * p.stride_w if p.direction == BWD_DATA else split)
    runtime = {"x_ptr": full["input"], "w_ptr": full["filter"], "y_ptr": full["output"],
               "ws_ptr": out if ws is None else ws,
               "N": p.n, "C": p.c, "K": p.k, "HI": p.hi, "WI": p.wi, "HO": p.ho, "WO": p.wo,
               "PH": p.pad_h_l, "PW": p.pad_w_l, "R_CHUNK": r_chunk}
    for name, t in full.items():
        runtime.update(zip(_STRIDE_NAMES[name], t.stride()))
    constexprs = dict(
        Y=p.y, X=p.x, SH=p.stride_h, SW=p.stride_w, DH=p.dil_h, DW=p.dil_w,
        YSTEP=p.stride_h // math.gcd(p.stride_h, p.dil_h),
        XSTEP=p.stride_w // math.gcd(p.stride_w, p.dil_w),
        DIR=_DIR[p.direction], USE_DOT=use_dot, INPUT_PRECISION=input_precision,
        DOT_UPCAST=interpreter and p.dtype.torch_in == torch.bfloat16,
        ACC_INT=p.dtype.is_int, CH_FAST=_channels_fastest(p), SPLIT=split,
        MAX_IMPRECISE=_max_imprecise(cfg),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k)
    grid = (triton.cdiv(m, cfg.block_m), triton.cdiv(n, cfg.block_n), z)
    return LaunchSpec(grid, runtime, constexprs, split, ws)


def run_conv(problem: ConvProblem, tensors: dict[str, torch.Tensor], out: torch.Tensor,
             cfg: KernelConfig, use_dot: bool, backend: Backend, input_precision: str = "ieee") -> None:
    """Compute the direction's output into `out` (a logical-order view) from logical-order inputs."""
    p = problem
    spec = gemm_spec(p, tensors, out, cfg, use_dot, backend.interpreter, input_precision)
    conv_gemm_kernel[spec.grid](**spec.runtime, **spec.constexprs,
                                **backend.launch_options(cfg.compile_options()))
    if spec.split > 1:
        w = out
        total = p.g * p.k * p.gemm[1]
        split_reduce_kernel[(triton.cdiv(total, REDUCE_BLOCK),)](
            spec.workspace, w, p.g, p.k, p.c, *w.stride(),
            Y=p.y, X=p.x, CH_FAST=spec.constexprs["CH_FAST"], SPLIT=spec.split, BLOCK=REDUCE_BLOCK,
            **backend.launch_options({"num_warps": 4}))

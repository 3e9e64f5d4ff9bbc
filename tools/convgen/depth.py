"""3-D convolution as 2-D ones: one per filter depth tap, on the depth slices that tap
reads, gathered into the batch; the taps' results added in tap order in a wider type.

For filter depth tap z, output depth o reads input depth d(o, z) = o*stride_d +
z*dil_d - pad_d_l (zero where that is outside the input). With q = problem.depth_slice(),
the 2-D problem whose batch is N*Do:

    fwd         y[:, :, :, o] = sum over z of fwd_q(x[:, :, :, d(o, z)], w[:, :, :, z])
    bwd_data    dx[:, :, :, d] = sum over (o, z) with d(o, z) = d of
                                 bwd_data_q(dy[:, :, :, o], w[:, :, :, z])
    bwd_weight  dw[:, :, :, z] = bwd_weight_q(x[:, :, :, d(o, z)], dy[:, :, :, o])

One split serves the kernel under test (kernels/launch.prepare: each tap is a launch of
the 2-D kernel, writing fp32 (int32 for integer types), the sum rounded once to the
output type, as a split reduction is), the CPU float64 reference (reference.py) and the
GPU FMA reference (kernels/gpu_reference.py).

    combine(problem, tensors, acc_dtype, compute) -> the 3-D result, logical, in acc_dtype
"""
from __future__ import annotations

from typing import Callable

from convgen.guards import guarded_output, guarded_zeros


def _slice_buffer(q, tensor: str, dtype, device):
    """A zeroed tensor of q's `tensor` in q's memory order, as a logical-order view, inside
    margins like any input's: a kernel that reads past it reads NaN, not the heap."""
    return guarded_zeros(q, tensor, dtype, str(device))


def _depths(p, z: int):
    """(output depths whose input depth exists for tap z, those input depths), as lists."""
    outs, ins = [], []
    for o in range(p.do):
        d = o * p.stride_d + z * p.dil_d - p.pad_d_l
        if 0 <= d < p.di:
            outs.append(o)
            ins.append(d)
    return outs, ins


def _gather_input(p, q, x, z: int):
    """x's depth slices tap z reads, as q's input: (N*Do, G, C, H, W), zero where the tap
    reads padding."""
    buf = _slice_buffer(q, "input", x.dtype, x.device)
    outs, ins = _depths(p, z)
    if outs:
        # logical (n, g, c, d, h, w) -> batch (n, o) of q
        buf.unflatten(0, (p.n, p.do))[:, outs] = x[:, :, :, ins].permute(0, 3, 1, 2, 4, 5)
    return buf


def _fold_output(p, q, y):
    """The output (gradient) y (n, g, k, o, h, w) as q's output: batch (n, o)."""
    buf = _slice_buffer(q, "output", y.dtype, y.device)
    buf.unflatten(0, (p.n, p.do)).copy_(y.permute(0, 3, 1, 2, 4, 5))
    return buf


def combine(p, tensors: dict, acc_dtype, compute: Callable):
    """The 3-D result of direction p.direction, logical, in acc_dtype, from q's results:
    compute(q, q_tensors, z) returns q's result for tap z (logical, any type that acc_dtype
    holds exactly)."""
    import torch
    q = p.depth_slice()
    name = p.direction.name
    x = tensors.get("input")
    device = next(iter(tensors.values())).device
    acc = torch.zeros(p.logical_shape(p.writes), dtype=acc_dtype, device=device)
    dy = _fold_output(p, q, tensors["output"]) if "output" in p.reads else None
    for z in range(p.z):
        if name == "fwd":
            part = compute(q, {"input": _gather_input(p, q, x, z), "filter": tensors["filter"][:, :, :, z]}, z)
            acc += part.to(acc_dtype).unflatten(0, (p.n, p.do)).permute(0, 2, 3, 1, 4, 5)
        elif name == "bwd_data":
            outs, ins = _depths(p, z)
            if not outs:
                continue
            part = compute(q, {"output": dy, "filter": tensors["filter"][:, :, :, z]}, z)
            part = part.to(acc_dtype).unflatten(0, (p.n, p.do))[:, outs].permute(0, 2, 3, 1, 4, 5)
            # one input depth per output depth for a given tap: no index repeats
            acc[:, :, :, ins] += part
        else:
            part = compute(q, {"input": _gather_input(p, q, x, z), "output": dy}, z)
            acc[:, :, :, z] = part.to(acc_dtype)
    return acc


def slice_out(q, dtype, device):
    """(q's result buffer, its Guard): poisoned like any output, inside guard margins, so
    a tap that writes outside it or leaves an element unwritten is seen, not a corrupted
    heap or a silent zero."""
    return guarded_output(q, str(device), dtype)

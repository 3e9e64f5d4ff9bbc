"""One convgen run, stage by stage: problem -> inputs -> kernel and reference -> metrics -> report.

The stages live in their own modules; this one only wires them together, times
them for people, and decides the exit code (0 whenever something was verified,
whatever the bits say: FileCheck judges).
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from convgen import backend as backends
from convgen.errors import ConvgenError
from convgen.options import RunConfig


def _say(line: str) -> None:
    print(f"# {line}", flush=True)


class _Timer:
    def __init__(self):
        self.parts: list[str] = []

    def __call__(self, name: str, t0: float) -> None:
        self.parts.append(f"{name} {time.perf_counter() - t0:.3f}s")


def _flush_subnormals(t, dtype):
    """Zero inputs below the smallest normal of their type (MI200 matrix-core behaviour)."""
    import torch
    tiny = torch.finfo(dtype).tiny
    wide = t.float()  # torch has no comparisons on fp8; every narrow value is exact in fp32
    return torch.where(wide.abs() < tiny, torch.zeros_like(wide), wide).to(t.dtype)


def _accumulation(config: RunConfig, be, cfg):
    from convgen.tolerance import Accumulation
    p = config.problem
    et = p.dtype
    if et.is_int:
        return Accumulation(n=p.accumulations, u_comp=0.0, u_acc=0.0)
    # Products of fp16/bf16/fp8 inputs are exact in fp32; fp32 products round once,
    # and tf32 drops 13 bits of each operand (up to 2^-10 each: 2^-9 a product).
    dot = config.kernel.use_matrix_cores
    u_comp = 0.0
    if et.name == "f32":
        u_comp = 2.0 ** -9 if (dot and config.kernel.input_precision != "ieee") else 2.0 ** -24
    u_acc = (be.dot_u_acc(et.name, cfg.max_num_imprecise_acc) if dot else None) or et.u_acc
    return Accumulation(n=p.accumulations, u_comp=u_comp, u_acc=u_acc)


def _reference(config: RunConfig, tensors, device: str):
    """The reference, rounded to the output type (as the kernel's result is), in that type:
    the values are exact there, and the verifier reads a quarter of float64's bytes."""
    import torch
    p = config.problem
    ro = config.reference
    if ro.validator == "gpu":  # in the interpreter too, so CI exercises it
        from convgen.kernels.gpu_reference import gpu_reference
        from convgen.inputs import empty_output
        out32 = empty_output(p, device, dtype=torch.int32 if p.dtype.is_int else torch.float32)
        gpu_reference(p, tensors, out32)
        return out32.to(p.dtype.torch_out)
    from convgen.reference import reference
    ref = reference(p, tensors, accumulate=ro.accumulate, flush_subnormals=ro.flush_subnormals)
    return ref.to(p.dtype.torch_out).to(device)


@dataclass
class Outcome:
    """What one run produced; `result` is None when no validation was asked for."""
    kernel_config: object
    tensors: dict
    out: object
    ref: object = None
    result: object = None
    timer: _Timer = field(default_factory=_Timer)


def execute(config: RunConfig, say=_say) -> Outcome:
    """Run the stages of one problem; print nothing but progress lines through `say`."""
    backends.ensure_interpreter_if_no_gpu()
    be = backends.current()
    import torch

    from convgen import inputs, verify
    from convgen.kernels import config as kconfig
    from convgen.kernels.launch import run_conv

    p = config.problem
    why = be.type_unsupported(p.dtype.name)
    if why:
        raise ConvgenError(why)
    device = be.torch_device
    use_dot = config.kernel.use_matrix_cores
    cfg = kconfig.choose(p, be, use_dot, config.kernel.perf_config)
    say(f"convgen: {p.describe()}")
    say(f"convgen: {'matrix-core' if use_dot else 'FMA'} path on {be.kind} ({be.arch}), "
        f"config {cfg.describe()}, data {config.data.describe()}")
    timer = _Timer()

    t0 = time.perf_counter()
    tensors = inputs.make_inputs(p, config.data, device)
    timer("inputs", t0)
    kern_in = tensors
    if config.kernel.flush_subnormals and not p.dtype.is_int:
        kern_in = {k: _flush_subnormals(v, p.dtype.torch_in) for k, v in tensors.items()}

    out = inputs.empty_output(p, device)
    t0 = time.perf_counter()
    run_conv(p, kern_in, out, cfg, use_dot, be, config.kernel.input_precision)
    if device != "cpu":
        torch.cuda.synchronize()
    timer("kernel (first launch, compile included)", t0)
    outcome = Outcome(cfg, tensors, out, timer=timer)
    if config.reference.validator is None:
        return outcome

    t0 = time.perf_counter()
    outcome.ref = _reference(config, tensors, device)
    if device != "cpu":
        torch.cuda.synchronize()
    timer(f"reference ({config.reference.validator})", t0)

    t0 = time.perf_counter()
    outcome.result = verify.verify(out, outcome.ref, p.dtype.torch_out, config.thresholds,
                                   _accumulation(config, be, cfg), dim_names=_dim_names(p.writes))
    timer("verify", t0)
    return outcome


def run(config: RunConfig) -> int:
    from convgen import report

    o = execute(config)
    if o.result is None:
        _say("convgen: no validation requested (-pv or -pv_with_gpu); kernel ran")
        _say("convgen: time " + ", ".join(o.timer.parts))
        return 0
    for line in report.format_report(o.result, config.report.print_results):
        print(line)
    _say("convgen: time " + ", ".join(o.timer.parts))
    if config.report.json_path:
        _write_json(config.report.json_path, o.result.to_json())
    if config.report.dump_dir:
        _dump(config.report.dump_dir, o.tensors, o.out, o.ref)
    if 0 in o.result.bits:
        _say("convgen: reproduce with: " + _reproducer(config))
    print(report.bits_line(o.result.bits), flush=True)
    return 0


def _write_json(path: str, data: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1)
    os.replace(tmp, path)


def _dim_names(tensor: str) -> str:
    from convgen.problem import LOGICAL
    return LOGICAL[tensor]


def _reproducer(config: RunConfig) -> str:
    import shlex
    return "convgen " + " ".join(shlex.quote(a) for a in config.argv)


def _dump(folder: str, tensors, out, ref) -> None:
    """Save inputs, output and reference as .npy (logical order), each file written whole or not at all."""
    import numpy as np
    import torch
    os.makedirs(folder, exist_ok=True)
    items = {**{k: v for k, v in tensors.items()}, "kernel": out, "reference": ref}
    for name, t in items.items():
        arr = t.detach().cpu()
        if arr.dtype == torch.bfloat16 or arr.dtype.itemsize == 1 and arr.dtype.is_floating_point:
            arr = arr.float()  # numpy has no bfloat16 or fp8; every such value is exact in fp32
        path = os.path.join(folder, f"{name}.npy")
        tmp = path + ".tmp.npy"
        np.save(tmp, arr.contiguous().numpy())
        os.replace(tmp, path)
    _say(f"convgen: dumped {', '.join(items)} to {folder}")


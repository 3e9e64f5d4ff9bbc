"""What a kernel launch is made of (LaunchSpec), and the arguments every conv kernel takes
alike: sizes, strides, filter geometry, one-group views, the SMs of a device. Each kernel
module builds its LaunchSpec from these; launch.py picks the module and makes the call."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from convgen import backend as backends
from convgen import gpus
from convgen.problem import LOGICAL, ConvProblem

_STRIDE_PREFIX = {"input": "sx_", "filter": "sw_", "output": "sy_"}


# kernel argument -> problem attribute
_SIZES = {"N": "n", "C": "c", "K": "k", "HI": "hi", "WI": "wi", "HO": "ho", "WO": "wo",
          "PH": "pad_h_l", "PW": "pad_w_l"}


_GEOMETRY = {"Y": "y", "X": "x", "SH": "stride_h", "SW": "stride_w", "DH": "dil_h", "DW": "dil_w"}


@dataclass
class LaunchSpec:
    kernel: object
    grid: tuple
    runtime: dict                  # runtime arguments by parameter name
    constexprs: dict
    workspace: object = None       # torch tensors the launches write, kept alive with the spec
    finish: Callable | None = None  # launches after the kernel, given Backend.compile_options
    start: Callable | None = None   # launches before it (kernels/s2d.py: the folded inputs)


def sizes(p: ConvProblem, *names: str) -> dict:
    return {name: getattr(p, _SIZES[name]) for name in names}


def tensor_args(p: ConvProblem, tensors: dict, out) -> dict:
    """x_ptr, w_ptr, y_ptr (input, filter, output, whichever is written), the sizes per
    group and every stride: the runtime arguments all three conv kernels start with."""
    full = {**tensors, p.writes: out}
    return {"x_ptr": full["input"], "w_ptr": full["filter"], "y_ptr": full["output"],
            **sizes(p, *_SIZES), **strides(full)}


def one_group(t, letters: str, dims: str):
    """Logical view t (its letters, g among them) of a one-group problem without its g
    dimension, its dims in the order `dims` (e.g. "nhwc"): how the descriptor kernels and
    the folded problems (kernels/tma.py, kernels/s2d.py) see a tensor."""
    v = t[:, 0] if letters[1] == "g" else t[0]
    rest = letters.replace("g", "")
    return v.permute(*(rest.index(d) for d in dims))


# programs of a persistent launch where the device cannot say: the interpreter (a few, so
# each program loops over several tiles)
_INTERPRETER_UNITS = 3


def units(device) -> int:
    """SMs (CUs on ROCm) of a tensor's device: a persistent launch runs one program on each.
    Meta tensors (a cross-compile) count the units of the device the target stands for
    (backend.cross_device), an H100's where no target is named."""
    if device.type == "cuda":
        return backends.gpu_units(device.index if device.index is not None else 0)
    if device.type == "cpu":
        return _INTERPRETER_UNITS
    ref = backends.cross_device(backends.cross_target() or "sm90")
    return ref.units if ref else gpus.reference_device("sm90").units


def xcds(device) -> int:
    """Chiplets (XCDs) of a tensor's device, each with its own L2, that its workgroups are
    dealt out to in turn (the pointer kernels' program_ids): gpus.DEVICES's count (an
    MI300X's 8, an MI300A's 6), 1 elsewhere (NVIDIA, the interpreter, an AMD device the
    table lacks, or one partitioned into fewer CUs than the table's, which is not the
    chiplets the table counts). Meta tensors (a cross-compile) count the target's device's
    (backend.cross_device)."""
    if device.type == "cuda":
        be = backends.current()
        index = device.index if device.index is not None else 0
        known = gpus.device(backends._gpu_name(index)) if be.is_hip else None
        if known is not None and known.units != backends.gpu_units(index):
            known = None
    elif device.type == "meta" and backends.cross_target():
        known = backends.cross_device(backends.cross_target())
    else:
        known = None
    return known.xcds if known else 1


def geometry_args(p: ConvProblem, *names: str) -> dict:
    return {name: getattr(p, _GEOMETRY[name]) for name in names}


def strides(full: dict) -> dict:
    """sx_n ... sy_w: the five strides of each logical view (logical letters: problem.LOGICAL)."""
    out = {}
    for name, t in full.items():
        out.update({_STRIDE_PREFIX[name] + d: s for d, s in zip(LOGICAL[name], t.stride())})
    return out

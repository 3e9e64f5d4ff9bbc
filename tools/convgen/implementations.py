"""What computes a run's output: the implementation under test (`--impl`).

Every implementation gets the problem and the inputs as the suite draws them, and writes
the output; the same references and verifier judge them all. Built in:

    convgen     the suite's own Triton kernels (kernels/launch.py), with a config picked by
                the flags, the tuning lab or the rule (picks.py): the default
    aten        torch.ops.aten.convolution / convolution_backward: cuDNN on NVIDIA, MIOpen
                on ROCm, oneDNN (or ATen's own loops) on the CPU
    inductor    the same call compiled by torch.compile with max-autotune: Inductor's
                Triton conv template where one applies (forward on a GPU), else what
                Inductor falls back to; the run says which ran

and a user's own, `--impl MODULE:FUNCTION` or `--impl path/to/file.py:FUNCTION`: a
function that takes a Request and writes `request.out` (docs/implementations.md has the
interface and a complete example kernel). Raising `Unsupported("why")` says the problem
is not one it computes: the run ends with `convgen: unsupported: why` and exit status 77,
and lit reports the test UNSUPPORTED with that reason.

What an implementation accumulates in is not known to the suite (convgen's own kernels
excepted): the auto thresholds assume the most error the type allows a correct
convolution (`accumulation`), fp32 sums of the whole reduction (int32 for integer types),
one after another, on matrix units where the device has them for the type.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

from convgen import dtypes, tolerance
from convgen.errors import ConvgenError

BUILT_IN = ("convgen", "aten", "inductor")
DEFAULT = "convgen"
EXIT_UNSUPPORTED = 77   # a run whose implementation does not compute its problem (autotools' skip)
UNSUPPORTED_LINE = "convgen: unsupported: "   # what such a run prints first (lit_format reads it)
# options (options.py's fields) that configure convgen's own kernels: a run of another
# implementation given one is unsupported (the test asks about a kernel it does not have);
# the CLI puts the flag's spelling in front
CONVGEN_ONLY = {"perf_config": "sets a tile config of convgen's kernels",
                "tuning_db": "picks a tile config of convgen's kernels",
                "selector": "picks a tile config of convgen's kernels",
                "flush_subnormals": "changes what convgen's kernels read"}


class Unsupported(Exception):
    """The implementation does not compute this problem (a type, a layout, a direction it
    lacks): not a failure. The message says why; `field` names the option it is about
    (the CLI spells its flag first)."""

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


@dataclass
class Request:
    """One output to compute, as an implementation sees it.

    problem     the ConvProblem (convgen/problem.py): direction.name ("fwd", "bwd_data",
                "bwd_weight"), dtype (.name, .torch_dtype), n, g, c and k (channels per
                group), hi, wi, y, x, ho, wo, stride_h/w, dil_h/w, pad_h_l/h_r/w_l/w_r (and
                the depth's for a 3-D problem), layouts
    inputs      {"input"|"filter"|"output": tensor} of the tensors the direction reads, in
                logical order: input (n, g, c, h, w), filter (g, k, c, y, x), output
                (n, g, k, h, w) (3-D: a depth after the channels); views of memory in the
                run's layouts, with NaN guard bands around them
    out         the tensor to write (problem.writes), a logical-order view of the same kind,
                filled with NaN; writes outside it are counted and fail the run
    device      the torch device the tensors are on ("cuda" or "cpu")
    input_precision  "ieee", "tf32" or "tf32x3": what the line asks of f32 products
    use_matrix_cores the line's -x2 (convgen's path; others may ignore it)
    kernel_config    convgen's KernelConfig (None for the others)
    """
    problem: Any
    inputs: dict
    out: Any
    device: str
    input_precision: str = "ieee"
    use_matrix_cores: bool = False
    kernel_config: Any = None
    backend: Any = None
    guard: Any = None


class Implementation:
    """A built-in or user implementation: `run` writes request.out."""
    name = ""
    picks_config = False     # convgen's: the driver picks its tile config first

    def version(self, backend) -> str:
        """What the `#` line names beside the implementation (versions, libraries)."""
        return ""

    def check(self, problem, backend) -> None:
        """Raise Unsupported before any data is drawn where the problem is known not to run."""

    def run(self, request: Request) -> None:
        raise NotImplementedError

    def after(self) -> str | None:
        """A line to say after the run (what a compiler chose), or None."""
        return None


class ConvgenKernels(Implementation):
    name = "convgen"
    picks_config = True

    def version(self, backend) -> str:
        import triton   # deferred: a run loads it
        return f"Triton {triton.__version__}"

    def run(self, request: Request) -> None:
        from convgen.kernels.launch import run_conv   # torch and Triton
        run_conv(request.problem, request.inputs, request.out, request.kernel_config,
                 request.use_matrix_cores, request.backend, request.input_precision,
                 request.guard)


def _torch_libraries(device: str) -> str:
    import torch   # deferred: a run loads it
    if device == "cpu":
        found = re.search(r"(?:oneDNN|MKL-DNN) (v[0-9.]+)", torch.__config__.show())
        return f"oneDNN {found.group(1)}" if found else "ATen's CPU kernels"
    version = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if getattr(torch.version, "hip", None):
        return f"MIOpen {version}" if version else "MIOpen"
    return f"cuDNN {version}" if version else "no cuDNN"


def _aten_call(problem):
    """fn(*tensors) -> the written tensor, in aten's (n, channels, spatial) shapes, from the
    tensors `problem.reads` names in logical order; the call aten's autograd makes."""
    import torch   # deferred: a run loads it
    import torch.nn.functional as F   # deferred: a run loads torch

    p = problem
    spatial = 3 if p.is_3d else 2
    pads = ([(p.pad_d_l, p.pad_d_r)] if p.is_3d else []) + [(p.pad_h_l, p.pad_h_r),
                                                            (p.pad_w_l, p.pad_w_r)]
    stride = ([p.stride_d] if p.is_3d else []) + [p.stride_h, p.stride_w]
    dilation = ([p.dil_d] if p.is_3d else []) + [p.dil_h, p.dil_w]
    symmetric = all(a == b for a, b in pads)
    padding = [a for a, _ in pads] if symmetric else [0] * spatial
    # asymmetric padding: the input padded explicitly (F.pad takes the last dimension first)
    explicit = [v for pair in reversed(pads) for v in pair]
    in_shape = (p.n, p.g * p.c, *(([p.di] if p.is_3d else []) + [p.hi, p.wi]))
    in_padded = tuple(in_shape[:2]) + tuple(s + a + b for s, (a, b) in zip(in_shape[2:], pads))
    groups = p.g

    def fwd(x, w):
        if not symmetric:
            x = F.pad(x, explicit)
        return torch.ops.aten.convolution(x, w, None, stride, padding, dilation, False,
                                          [0] * spatial, groups)

    def bwd_data(dy, w):
        shape = in_shape if symmetric else in_padded
        probe = torch.empty(shape, dtype=dy.dtype, device=dy.device)
        dx = torch.ops.aten.convolution_backward(dy, probe, w, None, stride, padding, dilation, False,
                                                 [0] * spatial, groups, [True, False, False])[0]
        if symmetric:
            return dx
        index = [slice(None), slice(None)] + [slice(a, a + s) for (a, _), s in zip(pads, in_shape[2:])]
        return dx[tuple(index)]

    def bwd_weight(x, dy):
        if not symmetric:
            x = F.pad(x, explicit)
        w_shape = (p.g * p.k, p.c, *(([p.z] if p.is_3d else []) + [p.y, p.x]))
        probe = torch.empty(w_shape, dtype=x.dtype, device=x.device)
        return torch.ops.aten.convolution_backward(dy, x, probe, None, stride, padding, dilation,
                                                   False, [0] * spatial, groups,
                                                   [False, True, False])[1]
    return {"fwd": fwd, "bwd_data": bwd_data, "bwd_weight": bwd_weight}[p.direction.name]


def _to_aten(name: str, t):
    """A logical tensor as aten's: the groups folded into the channels ((n, g*c, ...),
    (g*k, c, ...)); a view where the layout allows, else a copy."""
    return t.flatten(0, 1) if name == "filter" else t.flatten(1, 2)


def _aten_inputs(problem, inputs) -> list:
    return [_to_aten(name, inputs[name]) for name in problem.reads]


def _write(problem, out, result) -> None:
    """The aten-shaped result into the logical output view (its groups unfolded)."""
    if problem.writes == "filter":
        out.copy_(result.unflatten(0, (problem.g, problem.k)))
    else:
        out.copy_(result.unflatten(1, (problem.g, problem.k if problem.writes == "output" else problem.c)))


class _Precision:
    """torch's TF32 switch for the call as the line asks (-input_precision), restored after:
    torch lets cuDNN take TF32 for f32 convolutions by default."""

    def __init__(self, precision: str):
        self.allow = precision != "ieee"

    def __enter__(self):
        import torch   # deferred: a run loads it
        self.saved = torch.backends.cudnn.allow_tf32
        torch.backends.cudnn.allow_tf32 = self.allow

    def __exit__(self, *exc):
        import torch   # deferred: a run loads it
        torch.backends.cudnn.allow_tf32 = self.saved
        return False


class Aten(Implementation):
    name = "aten"

    def version(self, backend) -> str:
        import torch   # deferred: a run loads it
        return f"torch {torch.__version__}, {_torch_libraries(backend.torch_device)}"

    def check(self, problem, backend) -> None:
        if problem.dtype.is_int or problem.dtype.is_fp8:
            raise Unsupported(f"{self.name} has no {problem.dtype.name} convolution (torch's "
                              "takes floating types of 16 bits and more)")

    def run(self, request: Request) -> None:
        p = request.problem
        with _Precision(request.input_precision):
            result = _aten_call(p)(*_aten_inputs(p, request.inputs))
        _write(p, request.out, result)


class Inductor(Aten):
    """torch.compile(mode="max-autotune") of aten's call. On a GPU the forward direction
    asks for Inductor's Triton conv template alone first (max_autotune_conv_backends
    "TRITON"), so that the template runs wherever it applies; where no template applies,
    Inductor's default choices (aten among them) are compiled instead. The code Inductor
    generated says what ran (`after`)."""
    name = "inductor"

    def __init__(self):
        self._compiled: dict = {}   # the last problem's compiled call and what it ran
        self._ran: str | None = None

    def version(self, backend) -> str:
        import torch   # deferred: a run loads it
        return f"torch {torch.__version__}, max-autotune, {_torch_libraries(backend.torch_device)} beneath"

    def run(self, request: Request) -> None:
        p = request.problem
        args = _aten_inputs(p, request.inputs)
        key = (repr(p), request.device, request.input_precision,
               tuple((tuple(a.shape), a.stride()) for a in args))
        with _Precision(request.input_precision):
            if key not in self._compiled:
                # compiling resets dynamo, whose caches the earlier calls were: they would
                # recompile without the settings they were compiled under
                self._compiled.clear()
                self._compiled[key] = self._compile(p, args, request.device)
            fn, self._ran = self._compiled[key]
            result = fn(*args)
        _write(p, request.out, result)

    def _compile(self, p, args, device):
        import torch   # deferred: a run loads it
        import torch._inductor.config as inductor_config   # deferred: a run loads torch
        from torch._inductor.utils import run_and_get_code   # deferred: a run loads torch
        call = _aten_call(p)
        tries = ["TRITON", None] if device != "cpu" and p.direction.name == "fwd" else [None]
        for backends in tries:
            torch._dynamo.reset()   # a fresh graph per problem: no recompile limit reached
            compiled = torch.compile(call, mode="max-autotune", dynamic=False, fullgraph=True)
            saved = inductor_config.max_autotune_conv_backends
            if backends:
                inductor_config.max_autotune_conv_backends = backends
            try:
                _, code = run_and_get_code(compiled, *args)
            except Exception as e:   # noqa: BLE001 - no template applies: Inductor's own choice
                if backends and "NoValidChoicesError" in f"{type(e).__name__} {e}":
                    continue
                raise
            finally:
                inductor_config.max_autotune_conv_backends = saved
            return compiled, _what_ran("\n".join(code))
        raise AssertionError("unreachable: the last try has Inductor's default choices")

    def after(self) -> str | None:
        return f"inductor ran {self._ran}" if self._ran else None


def aten_cpu_sums_in_type(type_name: str) -> bool:
    """Whether ATen's CPU convolution backward keeps its f16 or bf16 (`type_name`) partial
    sums in the type on this machine, as torch 2.13 does where the CPU has no dot product
    of the type (oneDNN sums bf16 in fp32 on CPUs with AVX512-BF16). The probe is the
    problem of e2e/regressions/aten_cpu_half_backward.mlir on data away from zero with both
    signs: summed in fp32, every gradient element is within one ulp of the float64 sum of
    the same rounded inputs; summed in f16, hundreds of ulps off where terms cancel."""
    import torch  # torch: only a run against ATen on the CPU asks
    et = dtypes.TYPES[type_name]
    g = torch.Generator().manual_seed(0)

    def data(*shape):
        v = torch.rand(*shape, generator=g, dtype=torch.float64) * 2 + 1
        v = torch.where(torch.rand(*shape, generator=g) < 0.5, -v, v)
        return v.to(et.torch_dtype).contiguous(memory_format=torch.channels_last)
    x, w, dy = data(2, 16, 13, 13), data(8, 16, 3, 3), data(2, 8, 7, 7)
    conv = dict(bias_sizes=None, stride=[2, 2], padding=[1, 1], dilation=[1, 1], transposed=False,
                output_padding=[0, 0], groups=1, output_mask=[True, True, False])
    got = torch.ops.aten.convolution_backward(dy, x, w, **conv)
    want = torch.ops.aten.convolution_backward(dy.double(), x.double(), w.double(), **conv)
    for a, r in zip(got[:2], want[:2]):
        # the type's spacing at each exact value (dtypes.ElemType.spacing, elementwise)
        ulp = torch.exp2(torch.floor(torch.log2(r.abs().clamp_min(et.tiny))) - et.mantissa)
        if ((a.double() - r).abs() / ulp).max().item() > 4:
            return True
    return False


def _what_ran(code: str) -> str:
    """What Inductor's generated code computes the convolution with."""
    template = re.search(r"\b(triton_tem_\w+)", code)
    if template:
        return f"its Triton conv template ({template.group(1)})"
    if "extern_kernels.convolution" in code or "aten.convolution.default" in code:
        return "aten's convolution (extern kernel)"
    if "convolution_backward" in code:
        return "aten's convolution_backward (a fallback)"
    if "mkldnn" in code:
        return "oneDNN (mkldnn) through Inductor's CPU lowering"
    return "code of its own (no template, no extern convolution found)"


class UserFunction(Implementation):
    """A user's function: `fn(request)` writes request.out."""

    def __init__(self, spec: str, fn: Callable):
        self.name = spec
        self.fn = fn

    def version(self, backend) -> str:
        module = sys.modules.get(getattr(self.fn, "__module__", ""), None)
        version = getattr(module, "__version__", None)
        return f"version {version}" if version else "a user's function"

    def run(self, request: Request) -> None:
        self.fn(request)


_BUILT: dict[str, Implementation] = {}


def resolve(spec: str | None) -> Implementation:
    """The implementation a run names: a built-in's name, MODULE:FUNCTION (the module on the
    Python path) or FILE.py:FUNCTION. One instance per process (Inductor's compiled calls
    are kept)."""
    spec = (spec or DEFAULT).strip()
    if spec in _BUILT:
        return _BUILT[spec]
    if spec in BUILT_IN:
        impl = {"convgen": ConvgenKernels, "aten": Aten, "inductor": Inductor}[spec]()
    elif ":" in spec:
        impl = UserFunction(spec, _load(spec))
    else:
        raise ConvgenError(f"unknown implementation '{spec}' (built in: {', '.join(BUILT_IN)}; "
                           "a user's: MODULE:FUNCTION or FILE.py:FUNCTION)", field="impl")
    _BUILT[spec] = impl
    return impl


def _load(spec: str) -> Callable:
    where, _, name = spec.rpartition(":")
    if not where or not name.isidentifier():
        raise ConvgenError(f"implementation '{spec}': expected MODULE:FUNCTION or FILE.py:FUNCTION",
                           field="impl")
    try:
        if where.endswith(".py"):
            if not os.path.isfile(where):
                raise ConvgenError(f"implementation '{spec}': no file {where}", field="impl")
            module_name = "convgen_impl_" + re.sub(r"\W", "_", os.path.abspath(where))
            module = sys.modules.get(module_name)
            if module is None:
                loader = importlib.util.spec_from_file_location(module_name, where)
                module = importlib.util.module_from_spec(loader)
                sys.modules[module_name] = module
                try:
                    loader.loader.exec_module(module)
                except BaseException:
                    del sys.modules[module_name]
                    raise
        else:
            module = importlib.import_module(where)
    except ConvgenError:
        raise
    except ImportError as e:
        raise ConvgenError(f"implementation '{spec}': cannot import {where}: {e}",
                           field="impl") from None
    except SyntaxError as e:
        raise ConvgenError(f"implementation '{spec}': {where} does not parse: {e.msg} (line "
                           f"{e.lineno})", field="impl") from None
    except Exception as e:   # noqa: BLE001 - the user's module failed as it loaded
        raise ConvgenError(f"implementation '{spec}': loading {where} raised "
                           f"{type(e).__name__}: {e}", field="impl") from None
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ConvgenError(f"implementation '{spec}': {where} has no function {name}",
                           field="impl")
    return fn


def convgen_only(kernel) -> str | None:
    """The first option of a run's KernelOptions that configures convgen's kernels and was
    given (a tuning database or model named, not the default ""), which another
    implementation cannot honour; None where none was."""
    given = {"perf_config": bool(kernel.perf_config), "tuning_db": kernel.tuning_db != "",
             "selector": kernel.selector != "", "flush_subnormals": kernel.flush_subnormals}
    return next((field for field in CONVGEN_ONLY if given[field]), None)


def matrix_units(backend) -> bool:
    """Whether another implementation is assumed to sum on matrix units: on a GPU that has them."""
    return bool(not backend.interpreter and backend.has_matrix_cores)


def accumulation(problem, backend, input_precision: str):
    """The accumulation the auto thresholds assume of an implementation whose own is
    unknown: fp32 sums (int32 for integers) of the whole reduction, in one running sum, of
    products as the line's precision makes them, on matrix units where the device has them
    for the type (their sums may round toward zero where the device's do)."""
    matrix = matrix_units(backend)
    return tolerance.accumulation(problem, matrix, input_precision,
                                  backend.dot_u_acc(problem.dtype, None) if matrix else None,
                                  backend.dot_truncates if matrix else False)

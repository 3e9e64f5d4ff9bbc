"""Launch the conv kernel of a problem: pick the kernel variant a config asks for, build its
LaunchSpec (kernel, grid, arguments, workspace, launches before and after), and make the call.

A config runs one of four variants (`variant`): the pointer kernel of the problem's
direction (the module its row in directions.py names: conv_fwd.py, conv_bwd_data.py,
conv_bwd_weight.py), the descriptor kernels of tma.py, a strided problem folded into a
stride-1 one (s2d.py), whose inner problem takes either of the others, or the direct
kernels of direct.py (groups of few channels, no GEMM). Each builds its
LaunchSpec from the shared helpers of spec.py. Also here: the digest of the source a
direction's kernels are built from, which the tuning data is keyed on.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
from typing import Callable

from convgen import depth
from convgen.backend import Backend
from convgen.kernels import common, direct, geometry, s2d, spec, tma
from convgen.kernels.config import KernelConfig
from convgen.kernels.spec import LaunchSpec
from convgen.problem import ConvProblem


def max_imprecise(cfg: KernelConfig) -> int | None:
    """tl.dot's max_num_imprecise_acc. Triton refuses values above the dot's K (BLOCK_K);
    above it means never promote, which is Triton's own default (None): fast fp8 on sm90."""
    v = cfg.max_num_imprecise_acc
    return None if v is None or v > cfg.block_k else v


def meta(p: ConvProblem, cfg: KernelConfig, use_dot: bool, interpreter: bool,
         input_precision: str) -> dict:
    """The meta-parameters every conv kernel takes."""
    # Triton's interpreter gets bf16 dots wrong and loses fp8 products below fp16's range
    # (two e5m2 values near 2^-16): there the dot's operands go to fp32 first (exact)
    return dict(USE_DOT=use_dot, INPUT_PRECISION=input_precision,
                DOT_UPCAST=interpreter and (p.dtype.name == "bf16" or p.dtype.is_fp8),
                ACC_INT=p.dtype.is_int,
                MAX_IMPRECISE=max_imprecise(cfg),
                BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k,
                GROUP_M=cfg.group_m)


def variant(cfg: KernelConfig) -> str:
    """Which kernel variant a config runs: "direct" (kernels/direct.py), "s2d" (folded,
    kernels/s2d.py), "tma" (the descriptor kernels, kernels/tma.py) or "pointer" (the
    direction's own module)."""
    return "direct" if cfg.direct else "s2d" if cfg.s2d else "tma" if cfg.tma else "pointer"


def _pointer(p, tensors, out, cfg, use_dot, interpreter, input_precision) -> LaunchSpec:
    build = p.direction.load("kernel")
    return build(p, tensors, out, cfg, {**meta(p, cfg, use_dot, interpreter, input_precision),
                                        "NUM_XCDS": spec.xcds(out.device)})


def _descriptor(p, tensors, out, cfg, use_dot, interpreter, input_precision) -> LaunchSpec:
    return tma.launch_spec(p, tensors, out, cfg, meta(p, cfg, use_dot, interpreter, input_precision))


def _folded(p, tensors, out, cfg, use_dot, interpreter, input_precision) -> LaunchSpec:
    return s2d.launch_spec(p, tensors, out, cfg, use_dot, interpreter, input_precision,
                           launch_spec)


def _direct(p, tensors, out, cfg, use_dot, interpreter, input_precision) -> LaunchSpec:
    return direct.launch_spec(p, tensors, out, cfg, meta(p, cfg, use_dot, interpreter,
                                                         input_precision))


# variant -> its launch; each direction's kernel within a variant comes from its row in
# directions.py (pointer), tma._SPECS (descriptor) or direct._KERNELS (direct)
VARIANTS = {"pointer": _pointer, "tma": _descriptor, "s2d": _folded, "direct": _direct}


def launch_spec(p: ConvProblem, tensors: dict, out, cfg: KernelConfig, use_dot: bool,
                interpreter: bool, input_precision: str = "ieee") -> LaunchSpec:
    return VARIANTS[variant(cfg)](p, tensors, out, cfg, use_dot, interpreter, input_precision)


def prepare(problem: ConvProblem, tensors: dict, out, cfg: KernelConfig, use_dot: bool,
            backend: Backend, input_precision: str = "ieee", guard=None) -> Callable[[], None]:
    """A call that computes the direction's output into `out` (a logical-order view) from
    logical-order inputs. Its arguments (descriptors, workspace) are built once, so a
    timing loop measures the launches only: building them costs up to ~0.1 ms of Python,
    as much as a fast kernel, and a GPU left waiting for it would be timed too."""
    if problem.is_3d:
        return _prepare_3d(problem, tensors, out, cfg, use_dot, backend, input_precision, guard)
    spec = launch_spec(problem, tensors, out, cfg, use_dot, backend.interpreter, input_precision)
    options = backend.compile_options(cfg.compile_options())
    launch = spec.kernel[spec.grid]

    def run() -> None:
        if spec.start is not None:
            spec.start(backend.compile_options)
        launch(**spec.runtime, **spec.constexprs, **options)
        if spec.finish is not None:
            spec.finish(backend.compile_options)
    return run


def _prepare_3d(problem, tensors, out, cfg, use_dot, backend, input_precision, guard):
    """A 3-D problem: the 2-D kernel of its depth slices (cfg is theirs) once per filter
    depth tap, each writing fp32 (int32 for integer types), the taps summed in order and
    rounded once to the output type (depth.py). Each tap's stray writes count as the
    output's (`guard`, when the caller checks one)."""
    import torch

    wide = torch.int32 if problem.dtype.is_int else torch.float32

    def tap(q, tq, z):
        part, part_guard = depth.slice_out(q, wide, out.device)
        prepare(q, tq, part, cfg, use_dot, backend, input_precision)()
        if guard is not None:
            guard.absorb(part_guard)
        return part

    def run() -> None:
        out.copy_(depth.combine(problem, tensors, wide, tap))
    return run


def run_conv(problem: ConvProblem, tensors: dict, out, cfg: KernelConfig, use_dot: bool,
             backend: Backend, input_precision: str = "ieee", guard=None) -> None:
    """Compute the direction's output into `out` (a logical-order view) from logical-order
    inputs; `guard` (out's, guards.Guard) also hears of writes outside intermediate outputs."""
    prepare(problem, tensors, out, cfg, use_dot, backend, input_precision, guard)()


def triton_failure(e: BaseException) -> str | None:
    """One line for a compile or resource failure of Triton's (what a config broke); None for
    anything else. The CLI, the tuner and the benchmarks word such failures alike."""
    try:
        from triton.compiler.errors import CompilationError
        from triton.runtime.errors import OutOfResources
    except ImportError:   # pragma: no cover - every supported Triton has both
        return None
    if isinstance(e, OutOfResources):
        return (f"it needs {e.required} bytes of {e.name}, the hardware limit is {e.limit}; "
                "smaller blocks or fewer stages fit")
    if isinstance(e, CompilationError):
        # str(e) is "at L:C:", the source, then the reason; error_message is the reason
        reason = getattr(e, "error_message", None) or str(e).strip().splitlines()[-1]
        return f"Triton could not compile it: {' '.join(str(reason).split())}"
    if isinstance(e, RuntimeError) and str(e).startswith("Triton Error"):
        return str(e).splitlines()[0]
    return None


@functools.cache
def kernel_digest(direction) -> str:
    """A short digest of the source a direction's kernels are built from: its module, the
    shared pieces in kernels/common.py, the folded problems of kernels/s2d.py, the direct
    kernels of kernels/direct.py, the box
    shapes and pixel grids of geometry.py, and of kernels/tma.py (the descriptor kernels of
    all three directions) what the direction's launch reaches (`reached`). The tuning
    database keys times on it, so a kernel change never selects a config timed on the old
    code, and an edit of one direction's descriptor kernel leaves the others' keys alone."""
    module = importlib.import_module(direction.kernel.partition(":")[0])
    h = hashlib.sha256()
    for path in (module.__file__, common.__file__, s2d.__file__, direct.__file__):
        with open(path, "rb") as f:
            h.update(f.read())
    # the descriptor kernels' box shapes (geometry.py)
    for fn in (geometry.pixel_box, geometry.pixel_boxes, geometry.flat_pixels, geometry.pixel_grid,
               geometry.strided_view, geometry.phase_view):
        h.update(inspect.getsource(fn).encode())
    for piece in descriptor_pieces(direction.name):
        h.update(piece.encode())
    return h.hexdigest()[:12]


def descriptor_pieces(direction: str) -> list[str]:
    """What of kernels/tma.py a direction's descriptor launch reaches (`reached`): the
    dispatch and the context every spec starts from, then the direction's own spec."""
    return reached(tma, "launch_spec", "_Launch", tma._SPECS[direction].__name__,
                   skip=("_SPECS",))


_PLAIN = (bool, int, float, str, type(None))


def _plain(value) -> bool:
    """A value whose repr is the same in every process: no object addresses, no set order."""
    if isinstance(value, (tuple, list)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return isinstance(value, _PLAIN)


@functools.cache
def _bound_names(module) -> frozenset:
    """The names the module's own source binds at its top level (definitions, imports,
    assignments): what its functions can mean by a global name. Not vars(module), which
    others may add to while the process runs (Triton's interpreter puts TensorDescriptor
    into a kernel module's globals once a kernel has run there)."""
    import ast
    names = set()
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return frozenset(names)


def reached(module, *roots: str, skip: tuple = ()) -> list[str]:
    """The source of every function and class of `module` that the `roots` reach by name,
    through what those reach in turn (Triton kernels and wrapped functions unwrapped), the
    values of the plain constants among those names, and for a name bound to a function,
    class or module of elsewhere which one it is: sorted by name, each once. What lies in
    other modules is not followed (kernel_digest takes those whole); names in `skip` are
    not followed either. Any other kind of value raises: its repr might differ between
    processes or hide source the key must cover."""
    import ast
    import textwrap
    bound = _bound_names(module)
    found, todo = {}, list(roots)
    while todo:
        name = todo.pop()
        if name in found or name in skip:
            continue
        obj = vars(module)[name]
        code = obj
        while hasattr(code, "fn") or hasattr(code, "__wrapped__"):
            # a Triton kernel (autotuned or not) and functools wrappers: their function
            code = getattr(code, "fn", None) or code.__wrapped__
        if inspect.ismodule(obj):
            found[name] = f"module {obj.__name__}"
        elif inspect.isfunction(code) or inspect.isclass(code):
            if code.__module__ != module.__name__:
                found[name] = f"{code.__module__}.{code.__qualname__}"
                continue
            found[name] = inspect.getsource(code)
            for node in ast.walk(ast.parse(textwrap.dedent(found[name]))):
                if isinstance(node, ast.Name) and node.id in bound:
                    todo.append(node.id)
        elif _plain(obj):
            found[name] = repr(obj)
        else:
            raise TypeError(f"{module.__name__}.{name}: a {type(obj).__name__}, which the "
                            "kernel digest cannot take by its source or value")
    return [f"{name}\n{found[name]}" for name in sorted(found)]

"""One convgen run, stage by stage: problem -> inputs -> kernel and reference -> metrics -> report.

The stages live in their own modules; this one wires them together, checks before any
work that the run can finish (device support, output paths, memory), times the stages
for people, and decides the exit code (0 whenever something was verified, whatever the
bits say: FileCheck judges).
"""
from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import dataclass, field

from convgen import backend as backends
from convgen import guards, implementations, report, tolerance
from convgen.errors import ConvgenError
from convgen.guards import empty_output, guard_elements
from convgen.kernels.geometry import loop_steps, split_workspace
from convgen.options import RunConfig

GIB = 2.0 ** 30
# The interpreter runs one program at a time: about this long per program and reduction
# step on a 2-core machine (docs/traps.md); a run predicted longer than INTERPRETER_NOTE_S
# says so before it starts.
INTERPRETER_STEP_S = 0.01
INTERPRETER_NOTE_S = 30.0
HEARTBEAT_S = 30.0   # how often a long interpreter stage says it is still going


@contextlib.contextmanager
def _heartbeat(stage: str, estimate: float):
    """While a stage predicted to take `estimate` seconds runs (0: a short one, nothing is
    said), a line on stderr every HEARTBEAT_S seconds: a long wait is not taken for a hang."""
    if estimate <= 0:
        yield
        return
    stop = threading.Event()

    def beat():
        t0 = time.perf_counter()
        while not stop.wait(HEARTBEAT_S):
            print(f"# convgen: {stage}: {time.perf_counter() - t0:.0f} s of about {estimate:.0f} s",
                  file=sys.stderr, flush=True)
    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class _Timer:
    def __init__(self):
        self.parts: list[str] = []

    def __call__(self, name: str, t0: float) -> None:
        self.parts.append(f"{name} {time.perf_counter() - t0:.3f}s")


def _flush_subnormals(t, et):
    """Zero inputs below the smallest normal of their type (MI200 matrix-core behaviour).
    The copy keeps t's memory exactly (layout strides, margins around it): a fresh tensor
    from torch.where may give a size-1 dimension any stride, which the descriptor kernels
    refuse, and it would drop the NaN margins that catch stray reads."""
    import torch
    base = t if t._base is None else t._base
    copy = base.clone()
    out = copy.as_strided(t.size(), t.stride(), t.storage_offset())
    wide = t.float()  # torch has no comparisons on fp8; every narrow value is exact in fp32
    out.copy_(torch.where(wide.abs() < et.tiny, torch.zeros_like(wide), wide).to(t.dtype))
    return out


class _ConfigFailed(Exception):
    """Triton could not compile or launch a config (launch.triton_failure's line)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def _check_reference(config: RunConfig) -> None:
    ro = config.reference
    if ro.validator == "gpu" and ro.accumulate is not None:
        raise ConvgenError("block accumulation applies to the CPU reference only (the GPU "
                           "reference sums in fp32, one product at a time)",
                           field="ref_accumulate")


def _reference(config: RunConfig, tensors, device: str):
    """The reference, rounded to the output type (as the kernel's result is), in that type:
    the values are exact there, and the verifier reads a quarter of float64's bytes."""
    import torch
    p = config.problem
    ro = config.reference
    out_dtype = p.dtype.out_type.torch_dtype
    if ro.validator == "gpu":  # in the interpreter too, so CI exercises it
        from convgen.kernels.gpu_reference import gpu_reference   # torch and Triton
        if ro.flush_subnormals and not p.dtype.is_int:
            tensors = {k: _flush_subnormals(v, p.dtype) for k, v in tensors.items()}
        out32 = empty_output(p, device, dtype=torch.int32 if p.dtype.is_int else torch.float32)
        gpu_reference(p, tensors, out32)
        return out32.to(out_dtype)
    from convgen.reference import reference   # torch
    ref = reference(p, tensors, accumulate=ro.accumulate, flush_subnormals=ro.flush_subnormals)
    return ref.to(out_dtype).to(device)


def footprint(config: RunConfig, cfg) -> dict:
    """Bytes the run holds at its peak: {"device": {part: bytes}, "host": {part: bytes}}.
    With the interpreter the device is the host."""
    from convgen.reference import temp_bytes   # torch
    p = config.problem
    out_t = p.dtype.out_type

    def with_margins(t):   # guard bands on both sides
        return p.elements(t) + 2 * guard_elements(p.physical_shape(t))
    ins = sum(with_margins(t) for t in p.reads) * p.dtype.bits // 8
    out = with_margins(p.writes) * out_t.bits // 8
    device = {"inputs": ins, "output": out}
    if p.direction.splits_reduction and cfg is not None:
        device["workspace"] = 4 * split_workspace(p, cfg)
    # float64 draw and its copy; both signs add a second draw and the mask
    per_element = 25 if config.data.both_signs else 16
    host = {"input generation": per_element * max(p.elements(t) for t in p.reads)}
    if config.reference.validator == "gpu":
        device["reference"] = out + 4 * p.elements(p.writes)   # fp32 result, then rounded
    elif config.reference.validator == "cpu":
        device["reference"] = out
        host["reference"] = (8 * p.elements(p.writes) + ins
                             + temp_bytes(p, accumulate=config.reference.accumulate))
    return {"device": device, "host": host}


def _check_memory(config: RunConfig, cfg, be) -> None:
    need = footprint(config, cfg)
    if be.interpreter:
        parts = {**need["device"], **{f"{k} (host)": v for k, v in need["host"].items()}}
        places = (("host", parts, backends.host_memory_bytes()),)
    else:
        places = (("device", need["device"], be.memory_bytes()),
                  ("host", need["host"], backends.host_memory_bytes()))
    for where, parts, have in places:
        total = sum(parts.values())
        if total > have:
            items = ", ".join(f"{k} {v / GIB:.2f}" for k, v in parts.items() if v)
            what = "the host" if where == "host" else f"the {be.arch} GPU"
            raise ConvgenError(f"{config.problem.describe()} needs about {total / GIB:.2f} GiB "
                               f"({items}), {what} has {have / GIB:.2f} GiB free")


def interpreter_estimate(p, cfg, use_dot: bool) -> float:
    """Seconds the interpreter's kernel launches of a run take, about."""
    return loop_steps(p, cfg, use_dot) * INTERPRETER_STEP_S


class StageCache:
    """Stage results shared by runs that differ only further down the line: `convgen
    study` runs one test's grid (validators, kernel paths, reference emulations) on one
    draw of inputs, one kernel output per path and one reference per kind. Keys hold
    everything a stage reads, so a hit is the value a fresh run would compute."""

    def __init__(self):
        self._values: dict = {}

    def get(self, key: tuple, make):
        """(the stage's value, whether it came from the cache)."""
        if key in self._values:
            return self._values[key], True
        value = make()
        self._values[key] = value
        return value, False


def _stage(cache: StageCache | None, key: tuple, make):
    return cache.get(key, make) if cache is not None else (make(), False)


@dataclass
class Outcome:
    """What one run produced; `verdict` is None when no validation was asked for."""
    kernel_config: object
    tensors: dict
    out: object
    ref: object = None
    verdict: object = None
    timer: _Timer = field(default_factory=_Timer)


def execute(config: RunConfig, say=report.say, cache: StageCache | None = None) -> Outcome:
    """Run the stages of one problem; print nothing but progress lines through `say`.
    With a `cache`, stages whose inputs an earlier run of the same cache had are reused.
    An implementation that does not compute the problem raises implementations.Unsupported."""
    report.check_paths(config.report.json_path, config.report.dump_dir)
    _check_reference(config)
    backends.ensure_interpreter_if_no_gpu()   # before a user's module decorates its kernels
    impl = implementations.resolve(config.impl)
    be = backends.current()
    import torch

    from convgen import inputs, picks   # torch and Triton: not for a refused run
    from convgen.kernels import config as kconfig   # torch and Triton
    from convgen.kernels.launch import triton_failure   # torch and Triton

    p = config.problem
    why = be.type_unsupported(p.dtype)
    if why:
        raise ConvgenError(why, field="type")
    device = be.torch_device
    use_dot = config.kernel.use_matrix_cores
    if impl.picks_config:
        cfg, source, est = _pick(config, be, say)
    else:
        cfg, est = None, 0.0
        _other(config, impl, be, say)
    timer = _Timer()

    t0 = time.perf_counter()
    problem_key = repr(p)   # ConvProblem holds a dict: its repr is the key
    tensors, hit = _stage(cache, ("inputs", problem_key, config.data),
                          lambda: inputs.make_inputs(p, config.data, device))
    timer("inputs" + " (cached)" * hit, t0)

    def kernel(cfg):
        kern_in = tensors
        if config.kernel.flush_subnormals and not p.dtype.is_int:
            kern_in = {k: _flush_subnormals(v, p.dtype) for k, v in tensors.items()}
        out, guard = guards.guarded_output(p, device)
        request = implementations.Request(
            p, kern_in, out, device, config.kernel.input_precision, use_dot, cfg, be, guard)
        try:
            with _heartbeat("kernel", est if est > INTERPRETER_NOTE_S else 0.0):
                impl.run(request)
            if device != "cpu":
                torch.cuda.synchronize()
        except implementations.Unsupported:
            raise
        except Exception as e:   # noqa: BLE001 - only Triton's config failures are translated
            if not impl.picks_config:
                raise ConvgenError(f"the {impl.name} implementation failed: {type(e).__name__}: "
                                   f"{e}", field="impl") from e
            why = triton_failure(e)
            if why is None:
                raise
            raise _ConfigFailed(why) from None
        return out, guard

    def launch(cfg):
        t0 = time.perf_counter()
        key = ("kernel", problem_key, config.data, config.kernel, config.impl,
               cfg.describe() if cfg is not None else None)
        result, hit = _stage(cache, key, lambda: kernel(cfg))
        timer("kernel" + (" (cached)" if hit else " (first launch, compile included)"), t0)
        return result

    try:
        try:
            out, guard = launch(cfg)
        except _ConfigFailed as failed:
            if not source.startswith(picks.MODEL_SOURCE):
                raise
            # the model learnt speed, not what compiles: a config whose shared memory
            # Triton refuses for this problem (bwd_weight's 128-pixel boxes of 3 stages
            # on a stride-2 phase view) ranks low but not out; the rule's config runs
            picked, cfg = cfg, kconfig.choose(p, be, use_dot)
            if cfg == picked:
                raise
            _check_memory(config, cfg, be)
            say(f"convgen: note: the model's pick {picked.describe()} does not run on {be.arch} "
                f"({failed.why}); the default rule's config {cfg.describe()} runs instead")
            out, guard = launch(cfg)
    except _ConfigFailed as failed:
        given = bool(config.kernel.perf_config)
        raise ConvgenError(f"{'kernel' if given else 'the default kernel'} config "
                           f"{cfg.describe()} does not run on {be.arch}: {failed.why}",
                           field="perf_config" if given else None) from None
    after = impl.after()
    if after:
        say(f"convgen: {after}")
    outcome = Outcome(cfg, tensors, out, timer=timer)
    if config.reference.validator is None:
        return outcome

    def reference():
        ref = _reference(config, tensors, device)
        if device != "cpu":
            torch.cuda.synchronize()
        return ref

    t0 = time.perf_counter()
    outcome.ref, hit = _stage(cache, ("reference", problem_key, config.data, config.reference),
                              reference)
    timer(f"reference ({config.reference.validator})" + " (cached)" * hit, t0)

    t0 = time.perf_counter()
    outcome.verdict = _judge(config, be, cfg, out, outcome.ref, guard, say)
    timer("verify", t0)
    return outcome


def _other(config: RunConfig, impl, be, say) -> None:
    """Another implementation than convgen's kernels: flags that configure those kernels
    make the run unsupported; the implementation's own refusal; the `#` lines; memory."""
    field = implementations.convgen_only(config.kernel)
    if field:
        raise implementations.Unsupported(
            f"{implementations.CONVGEN_ONLY[field]}; the {impl.name} implementation has none",
            field=field)
    impl.check(config.problem, be)
    _check_memory(config, None, be)
    say(f"convgen: {config.problem.describe()}")
    version = impl.version(be)
    say(f"convgen: implementation {impl.name}{f' ({version})' if version else ''} on {be.kind} "
        f"({be.arch}), data {config.data.describe()}")


def _pick(config: RunConfig, be, say) -> tuple:
    """(the config this run takes, where it came from, the interpreter's estimate of the
    kernel's seconds or 0): said on the # lines, its memory checked first."""
    from convgen import picks   # torch and Triton (the kernel modules)
    p, use_dot = config.problem, config.kernel.use_matrix_cores
    cfg, source = picks.select_run(config, be)
    _check_memory(config, cfg, be)
    say(f"convgen: {p.describe()}")
    path = "direct (FMA)" if cfg.direct else "matrix-core" if use_dot else "FMA"
    say(f"convgen: {path} path on {be.kind} ({be.arch}), "
        f"config {cfg.describe()} ({source}), data {config.data.describe()}")
    est = interpreter_estimate(p, cfg, use_dot) if be.interpreter else 0.0
    if est > INTERPRETER_NOTE_S:
        say(f"convgen: note: this problem is large for Triton's interpreter (no GPU here): "
            f"the kernel may take about {est / 60:.0f} minutes")
    return cfg, source, est


def _judge(config: RunConfig, be, cfg, out, ref, guard, say):
    """The verdict on the kernel's output: convgen's checks with the accumulation this run's
    path and device have (the bias check off where a lean is expected), then rocMLIR's
    comparator where the run asked for it."""
    from convgen import verify   # torch
    p = config.problem
    if cfg is None:   # another implementation: what the type allows (implementations.py)
        use_dot, imprecise = implementations.matrix_units(be), None
        accum = implementations.accumulation(p, be, config.kernel.input_precision)
    else:
        # the direct kernels sum on FMA units whichever path the run asked for
        use_dot, imprecise = config.kernel.use_matrix_cores and not cfg.direct, cfg.max_num_imprecise_acc
        accum = tolerance.accumulation(p, use_dot, config.kernel.input_precision,
                                       be.dot_u_acc(p.dtype, imprecise), be.dot_truncates)
    unchecked = (be.bias_unchecked(p.dtype, use_dot, config.kernel.input_precision, imprecise)
                 or tolerance.lean_unchecked(accum, p.dtype.out_type))
    bias_check = unchecked is None
    if not bias_check:
        say(f"convgen: note: {unchecked}: the bias check is off for this run "
            "(its means are still printed)")
    verdict = verify.verify(out, ref, p.dtype.out_type, config.thresholds, accum,
                            dim_names=_dim_names(p, p.writes), bias_check=bias_check,
                            outside=guard.outside())
    cmp = config.comparison
    if cmp.comparator != "convgen":
        limits = tolerance.rocmlir_limits(
            cmp.comparator, p.dtype, config.thresholds, cmp.atol, cmp.rtol,
            tolerance.rocmlir_k_eff(p), config.data.mode == "random",
            cfg.split if cfg is not None and p.direction.splits_reduction else 1)
        verdict = verify.rocmlir_verdict(verdict, out, ref, limits, dim_names=_dim_names(p, p.writes))
    return verdict


def _dim_names(p, tensor: str) -> str:
    return p.logical(tensor)


def _save(config: RunConfig, o: Outcome) -> None:
    """--json (when something was verified) and --dump (the inputs, the output and, when there
    is one, the reference); a write that fails after the run is one error line."""
    ro = config.report
    arrays = {**o.tensors, "kernel": o.out, **({"reference": o.ref} if o.ref is not None else {})}
    for what, path, write in (
            ("json", ro.json_path if o.verdict is not None else None,
             lambda: report.write_json(ro.json_path, report.to_json(o.verdict))),
            ("dump", ro.dump_dir,
             lambda: report.say("convgen: dumped " + ", ".join(report.dump(ro.dump_dir, arrays))))):
        if path:
            try:
                write()
            except OSError as e:   # checked before the run; the disk can still fill up
                raise ConvgenError(f"cannot write '{e.filename or path}': {e.strerror or e}",
                                   field=what) from None


def run(config: RunConfig, program: str = "convgen") -> int:
    o = execute(config)
    if o.verdict is None:
        report.say("convgen: no validation requested; the kernel ran")
    _save(config, o)
    report.say("convgen: time " + ", ".join(o.timer.parts))
    if o.verdict is None:
        return 0
    report.emit(o.verdict, config.report.print_results,
                reproduce=report.reproducer(program, config.argv))
    return 0

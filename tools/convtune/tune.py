"""`convgen tune`: search the kernel config space for problems and record what was measured.

For each problem (a RunConfig built by the CLI): every config of `convtune.space.configs`
(or, with `top`, the first few in the selector model's order: selector.ranked) not yet
in the database is checked (an invalid one is recorded as such and never stops
the run), compiled on all CPU cores at once, then timed on the GPU one at a time (median
of triton.testing.do_bench over a CUDA graph of the launches: the GPU's time, not
Python's). The fastest is run once more through the whole convgen
check (the reference and verifier of a test run); if it passes it becomes the problem's
best, else it is recorded as "wrong" and the next fastest is checked. Every measurement
is committed as it is made, so an interrupted run resumes where it stopped.

Without a GPU the search runs in Triton's interpreter: the flow is the same and the tests
use it, but the times mean nothing, so nothing is marked best unless asked (`allow_cpu`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import signal
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from convgen import backend as backends
from convgen import cli, driver, guards, inputs, report
from convgen.errors import ConvgenError
from convgen.flags import one_line
from convgen.kernels import config as kconfig
from convgen.kernels import launch
from convgen.kernels.config import from_text
from convgen.options import RunConfig
from convtune import selector
from convtune import space as tuning_space
from convtune import store
from convtune.keys import key_for, problem_key
from convtune.tuning_db import SEARCHED_ALL, TuningDB

CHECKS = 3   # how many of the fastest configs may fail the reference check before giving up


@dataclasses.dataclass
class TuneResult:
    problem: str
    best: str | None
    best_ms: float | None
    measured: int          # configs timed in this run
    skipped: int           # already in the database
    invalid: int
    seconds: float
    note: str = ""
    searched: str = SEARCHED_ALL   # what the best is the fastest of (best.searched)
    failed: bool = False   # a --ray task that never finished (note: why)


def tune(configs: list[RunConfig], db_path: str, jobs: int | None = None,
         max_configs: int | None = None, allow_cpu: bool = False, progress: bool = True,
         done=None, retime_before: str | None = None,
         retime_under: float | None = None, top: int | None = None) -> list[TuneResult]:
    """Tune each problem in turn; `done(result)` hears of each as it finishes (a run
    stopped early has said what it did). `retime_before` (a measured_at time): configs
    timed before it count as not measured (a change in how times are taken); with
    `retime_under` (ms), only those whose time was under it. `top`: only the configs the
    selector model (the problem's -selector) ranks first, that many; `max_configs`: the
    first of the space. Either way the best says what it is the fastest of
    (best.searched), and a selector does not train on the problem until its whole space
    is measured."""
    backends.ensure_interpreter_if_no_gpu()
    be = backends.current()
    _refuse(configs, be, top)   # before the database is opened: a refused run leaves it untouched
    results = []
    with TuningDB(db_path) as db:
        for c in configs:
            results.append(_tune_one(c, db, be, jobs or os.cpu_count() or 1, max_configs,
                                     allow_cpu, progress, retime_before, retime_under, top))
            if done is not None:
                done(results[-1])
    return results


def _refuse(configs: list[RunConfig], be, top) -> None:
    """A ConvgenError for a run that cannot start: a 3-D problem, a selector model that
    does not load."""
    for c in configs:
        if c.problem.is_3d:
            raise ConvgenError("3-D problems are not tuned: they run the 2-D kernel of their "
                               "depth slices (depth.py), whose own 2-D problem may be tuned")
        if top:
            selector.model_for(c.problem, be, c.kernel.selector)   # a bad model file: an error


def tune_on_ray(configs: list[RunConfig], words: list[list[str]], db_path: str, fleet,
                jobs: int | None = None, max_configs: int | None = None, allow_cpu: bool = False,
                done=None, retime_before: str | None = None, retime_under: float | None = None,
                top: int | None = None) -> list[TuneResult]:
    """tune() with each problem a task on a Ray cluster (`fleet`, a convtune.cluster.Cluster;
    `words`: each problem's flags, which a task parses where it runs). A task gets the rows
    the database holds for its problem on any device (so a resumed run measures only what
    is missing), searches, times and checks on its own GPU into a database of its own, and
    sends back the rows it added as text (TuningDB.rows_text); each is merged into `db_path`
    as its task finishes, so a stopped driver keeps every finished problem. A task whose
    worker dies is run again by Ray (cluster.RETRIES); one that keeps dying is reported and
    the others go on. -> the results in the order of `configs`; a problem's ConvgenError is
    raised once every other task has been merged."""
    backends.ensure_interpreter_if_no_gpu()
    if top and not fleet.local:
        raise ConvgenError("--top on a cluster reached by address: the selector's model files "
                           "stay in this checkout; use --top with a new local cluster (--ray)",
                           field="top")
    _refuse(configs, backends.current() if top else None, top)
    with TuningDB(db_path) as db:
        known = [db.rows_text(problem_key(c.problem, "", "", "", "")) for c in configs]
    task = fleet.remote(_tune_task)
    options = {"jobs": jobs, "max_configs": max_configs, "allow_cpu": allow_cpu,
               "retime_before": retime_before, "retime_under": retime_under, "top": top}
    refs = [task.remote(w, k, options) for w, k in zip(words, known)]
    results: list = [None] * len(configs)
    error = None
    # open all along: each merge is its own transaction (opening the store costs 80 ms);
    # an interrupt leaves what was merged, and the tasks still running end with the cluster
    with TuningDB(db_path) as db:
        for i, out, failed in fleet.as_completed(refs):
            if failed is None:
                results[i], text = out
                db.merge_text(text)
            else:
                error = error or (failed if isinstance(failed, ConvgenError) else None)
                why = one_line(failed)[:300]
                results[i] = TuneResult(_short(configs[i].problem), None, None, 0, 0, 0, 0.0,
                                        f"the task failed: {why}", failed=True)
            if done is not None:
                done(results[i])
    if error is not None:
        raise error
    return results


def _tune_task(words: list[str], known: str, options: dict) -> tuple[TuneResult, str]:
    """One problem of tune_on_ray, on a Ray worker: -> (its result, the rows it measured)."""
    backends.ensure_interpreter_if_no_gpu()
    be = backends.current()
    config = cli.parse(words)
    _refuse([config], be, options["top"])
    with tempfile.TemporaryDirectory(prefix="convgen-tune-task-") as folder:
        with TuningDB(os.path.join(folder, "task.sqlite")) as db:
            db.merge_text(known, tracked_as="the rows sent with the task")
            result = _tune_one(config, db, be, options["jobs"] or _task_cores(be),
                               options["max_configs"], options["allow_cpu"], False,
                               options["retime_before"], options["retime_under"], options["top"])
            return result, db.rows_text(local_only=True)


def _task_cores(be) -> int:
    """A GPU task's share of its machine's cores for compiling (the machine's CPUs over its
    GPUs, as Ray counts them); the interpreter compiles nothing."""
    if be.interpreter:
        return 1
    import ray  # ray: where this task runs
    node = ray.get_runtime_context().get_node_id()
    res = next((n["Resources"] for n in ray.nodes() if n["NodeID"] == node), {})
    return max(1, int(res.get("CPU", os.cpu_count() or 1) // max(1, res.get("GPU", 1))))


def _tune_one(config: RunConfig, db, be, jobs: int, max_configs, allow_cpu, progress,
              retime_before=None, retime_under=None, top=None) -> TuneResult:
    from tqdm import tqdm


    t_start = time.perf_counter()
    p = config.problem
    why = be.type_unsupported(p.dtype)
    if why:
        raise ConvgenError(why, field="type")
    key = key_for(p, be)
    done = db.measured(key)
    if retime_before:
        for text in db.timed_before(key, retime_before, retime_under):
            del done[text]
    space, searched, note = _searched(config, be, top, max_configs)
    todo = [c for c in space if c.describe() not in done]
    best = db.best(key)
    # a best of the whole space answers any run; a best of a few, only a run of a few
    if (not todo and best is not None
            and (best.searched == SEARCHED_ALL or searched != SEARCHED_ALL)
            and not (retime_before and best.measured_at < retime_before)):
        # a resumed run passes finished problems in milliseconds: no inputs, no second check
        return TuneResult(_short(p), best.config, best.ms, 0, len(space), 0,
                          time.perf_counter() - t_start, "measured and checked before",
                          best.searched)
    device = be.torch_device
    tensors = inputs.make_inputs(p, config.data, device)
    out, _ = guards.guarded_output(p, device)
    invalid = 0

    def check(cfg):
        """None when cfg may run here, else why not (recorded as invalid)."""
        try:
            kconfig.validate(cfg, p, be, True)
        except ConvgenError as e:
            return str(e)
        return None

    def compile_only(cfg):
        if be.interpreter:
            return None
        spec = launch.launch_spec(p, tensors, out, cfg, True, False)
        try:
            spec.kernel.warmup(**spec.runtime, **spec.constexprs, grid=spec.grid,
                               **be.compile_options(cfg.compile_options()))
        except Exception as e:   # noqa: BLE001 - recorded; anything else surfaces at launch
            if stopped_compile(e):
                raise KeyboardInterrupt from e   # never recorded as the config's failure
            return launch.triton_failure(e) or f"{type(e).__name__}: {' '.join(str(e).split())[:300]}"
        return None

    ready = []
    for cfg in todo:
        why = check(cfg)
        if why:
            db.record(key, cfg.describe(), "invalid", error=why)
            invalid += 1
        else:
            ready.append(cfg)
    # compiling is CPU work (Triton's passes, ptxas): all cores at once, then time one by one
    failures = compile_all(compile_only, ready, jobs)
    timed = 0
    bar = tqdm(total=len(ready), desc=_short(p), unit="cfg", disable=not progress, leave=False)
    for cfg, failed in zip(ready, failures):
        bar.update(1)
        if failed:
            db.record(key, cfg.describe(), "invalid", error=failed)
            invalid += 1
            continue

        try:
            ms, how = _time(launch.prepare(p, tensors, out, cfg, True, be, config.kernel.input_precision), be)
        except Exception as e:   # noqa: BLE001 - a launch failure is a config's, recorded
            why = launch.triton_failure(e)
            if why is None:
                raise
            db.record(key, cfg.describe(), "invalid", error=why)
            invalid += 1
            continue
        db.record(key, cfg.describe(), "ok", ms=ms, tflops=p.flops / ms / 1e9, error=how)
        timed += 1
    bar.close()

    result = TuneResult(_short(p), None, None, timed, len(space) - len(todo), invalid, 0.0, note,
                        searched)
    if be.interpreter and not allow_cpu:
        result.note = "; ".join(filter(None, (note, "interpreter: times recorded, no best chosen")))
    else:
        _choose_best(config, db, key, be, result, searched,
                     None if searched == SEARCHED_ALL else {c.describe() for c in space})
    result.seconds = time.perf_counter() - t_start
    return result


def compile_all(compile_one, configs: list, jobs: int) -> list:
    """[compile_one(cfg) for cfg in configs], `jobs` at a time. On an interrupt the configs
    not started are dropped rather than compiled before the run can stop, and what the
    compiles printed is dropped too: a terminal's Ctrl-C (and `timeout -s INT`) reaches
    their ptxas as well, and Triton prints a killed ptxas's whole PTX as a reproducer
    (1,200 lines a config on sm90) before `convgen: interrupted`. The signal may land on a
    compiling thread, which then prints before the run's thread sees the interrupt, so
    what they print is held until all have finished and shown only if none was stopped."""
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    printed = io.StringIO()
    try:
        # the redirect spans the shutdown too: a compile still running while the pool
        # drains (or a second Ctrl-C there) prints into the held text, not the terminal
        with contextlib.redirect_stdout(printed):
            try:
                return list(pool.map(compile_one, configs))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
    except KeyboardInterrupt:
        printed = None
        raise
    finally:
        if printed is not None:
            sys.stdout.write(printed.getvalue())


# ptxas's exit as Triton words it; a negative code is the signal that killed it
_PTXAS_EXIT = re.compile(r"`ptxas` failed with error code (-?\d+)")


def stopped_compile(e: BaseException) -> bool:
    """Whether a compile failed because the run is being stopped (its ptxas killed by the
    SIGINT of Ctrl-C or `timeout -s INT`, or by a SIGTERM sent to ptxas itself: convgen
    has no SIGTERM handler, so a TERM to the whole process group ends Python first) rather
    than because of its config (a SIGKILL, say the kernel's OOM killer on a config's huge
    PTX, stays the config's)."""
    m = _PTXAS_EXIT.search(str(e))
    return bool(m) and -int(m.group(1)) in (signal.SIGINT, signal.SIGTERM)


def _time(run, be) -> tuple[float, str | None]:
    """Median ms of run()'s launches on the GPU, L2 flushed before each (do_bench), timed as
    one CUDA graph's replay: Python's cost of a launch stays out. On the H100's host a
    launch costs 35-400 us of Python (descriptors, a split's second kernel), more than
    do_bench's L2 flush hides, so kernels of a few microseconds were timed as the host's
    time (a 5 us launch measured 70 us) and a config's rank on small problems was noise.
    -> (ms, None), or (ms, why) where the launches could not be captured and were timed
    one by one (the row keeps why)."""
    if be.interpreter:
        t0 = time.perf_counter()
        run()
        return (time.perf_counter() - t0) * 1e3, None
    import triton
    replay, why = graph_replay(run)
    ms = triton.testing.do_bench(replay or run, warmup=10, rep=50, return_mode="median")
    return ms, why and f"timed per launch, not as a CUDA graph: {why}"


def graph_replay(run):
    """run()'s launches captured as one CUDA graph -> (its replay, None), or (None, why)
    when a launch cannot be captured (then run itself is timed). benchmarks/bench_conv.py
    times both sides with it under `--timing graph`."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):   # capture wants the launches warmed on a side stream
        run()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            run()
    except RuntimeError as e:
        torch.cuda.synchronize()
        return None, " ".join(str(e).split())[:200]
    return graph.replay, None


def _searched(config: RunConfig, be, top, max_configs) -> tuple[list, str, str]:
    """(the configs to measure, what the best will be the fastest of, a note): the space;
    the `top` the selector ranks first (the whole space, and the note says why, where no
    model ranks the problem); or the space's first `max_configs`."""
    space = tuning_space.configs(config.problem, be)
    if top:
        ranked, model = selector.ranked(config.problem, be, config.kernel.selector)
        if not ranked:
            return space, SEARCHED_ALL, f"--top: {model}, so the whole space"
        return (ranked[:top], f"the first {min(top, len(ranked))} of {len(ranked)} ranked by "
                f"{os.path.basename(model)}", "")
    if max_configs and max_configs < len(space):
        return space[:max_configs], f"the first {max_configs} of {len(space)} of the space", ""
    return space, SEARCHED_ALL, ""


def _choose_best(config: RunConfig, db, key: dict, be, result: TuneResult,
                 searched: str = SEARCHED_ALL, among: set | None = None) -> None:
    """Check the fastest measured configs with convgen's own reference, fastest first; the
    first that passes becomes the best. A search of a few (`among`: their texts) chooses
    among them alone, so that its best is what `searched` says (rows of an earlier
    search of others stay out)."""
    ok = sorted(((ms, cfg) for cfg, (status, ms, _) in db.measured(key).items()
                 if status == "ok" and (among is None or cfg in among)))
    validator = "cpu" if be.interpreter else "gpu"
    for ms, text in ok[:CHECKS]:
        run = dataclasses.replace(
            config,
            kernel=dataclasses.replace(config.kernel, use_matrix_cores=True,
                                       perf_config=tuple(from_text(text).items())),
            reference=dataclasses.replace(config.reference, validator=validator),
            report=dataclasses.replace(config.report, json_path=None, dump_dir=None))
        verdict = driver.execute(run, say=lambda line: None).verdict
        if tuple(verdict.bits) == (1, 1, 1):
            db.set_best(key, text, ms, config.problem.flops / ms / 1e9,
                        f"{validator} reference [1 1 1]", searched)
            result.best, result.best_ms = text, ms
            return
        db.record(key, text, "wrong", ms=ms, error=f"failed the reference check: bits "
                  f"{list(verdict.bits)}: {report.summary_line(verdict)}")
    result.note = "no measured config passed the reference check" if ok else "no config ran"


_CHANNELS_LAST = {"input": "nhwgc", "filter": "gkyxc", "output": "nhwgk"}


def _short(p) -> str:
    """The problem in a few words for tune's lines. Lists hold problems that differ in one
    field alone (a dilated twin, a grouped one, an NCHW one), so each field is there when it
    is not the usual value and two problems never read the same (tune refuses 3-D ones, so
    depth is not among them)."""
    pair = lambda a, b: f"{a}" if a == b else f"{a}x{b}"  # noqa: E731
    pads = (p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r)
    words = [p.direction.name, p.dtype.name, f"N{p.n}", f"C{p.c * p.g}", f"K{p.k * p.g}"]
    if p.g > 1:
        words.append(f"G{p.g}")
    shape = f"{p.y}x{p.x}/s{pair(p.stride_h, p.stride_w)}"
    if (p.dil_h, p.dil_w) != (1, 1):
        shape += f"/d{pair(p.dil_h, p.dil_w)}"
    words += [f"{p.hi}x{p.wi}", shape,
              f"p{pads[0]}" if len(set(pads)) == 1 else "p" + ",".join(map(str, pads))]
    if p.layouts != _CHANNELS_LAST:
        words.append("/".join(p.layouts[t] for t in ("input", "filter", "output")))
    return " ".join(words)


def report_problem(r: TuneResult) -> None:
    """One line for a problem as it finishes (a problem with no valid config is reported,
    not an error: the database says why for each config)."""
    best = f"best {r.best_ms:.3f} ms {r.best}" if r.best else r.note
    if r.best and r.searched != SEARCHED_ALL:
        best += f" (of {r.searched})"
    report.say(f"convgen tune: {r.problem}: {r.measured} timed, {r.skipped} already "
               f"measured, {r.invalid} invalid, {r.seconds:.1f} s; {best}")


def report_tuning(results: list[TuneResult], db_path: str) -> int:
    """The total, and where the rows go from there; exit 0, or 1 where a --ray task never
    finished (its problem is not tuned: run the command again)."""
    report.say(f"convgen tune: {len(results)} problem(s) in {db_path}")
    if db_path == store.store_path():
        report.say("convgen tune: `convgen tuning-export` writes what this added to the local "
                   "store into tuning/data, to commit")
    lost = sum(r.failed for r in results)
    if lost:
        report.say(f"convgen tune: {lost} problem(s) not tuned: their tasks failed (above); the "
                   "same command tunes them")
    return 1 if lost else 0

"""`convgen fuzz` (convfuzz/fuzz.py), as a command convgen finds (convgen.commands.PLUGINS)."""
from __future__ import annotations

import os
import shlex
import sys
import time

from convgen import report
from convgen.commands import Command
from convgen.errors import ConvgenError
from convgen.flags import (as_text, flag_table, listed, nonneg, one_of, positive, positive_real, scan,
                           switch, switch_or_text)

from convfuzz.space import DIRECTIONS, TYPES

FUZZ_FLAGS = flag_table(
    ("convgen fuzz", [
        ("budget", "budget", positive_real, "search for this many seconds (shrinking a failure "
         "found near the end may run past it)", "60 (without --cases)"),
        ("cases", "cases", positive, "stop after this many cases", "no limit"),
        ("seed", "seed", nonneg, "draw the same cases as another run with this seed (the "
         "database of earlier failures is then not replayed)", "a random seed, printed"),
        ("impl", "impl", as_text, "the implementation under test, as a test run's -impl "
         "(a case it declines is drawn again)", "$CONVGEN_IMPL, else convgen"),
        ("types", "types", listed(one_of(*TYPES)), "only these element types (those the "
         "device runs)", "every type the device runs"),
        ("operations", "operations", listed(one_of(*DIRECTIONS)), "only these directions",
         ",".join(DIRECTIONS)),
        ("reference", "reference", one_of("cpu", "gpu", "both"), "the references a case "
         "checks against: the CPU's float64 (-pv), the GPU reference (-pv_with_gpu; in the "
         "interpreter it runs as slowly as a kernel), or either", "both"),
        ("out", "out", as_text, "the folder the found failures' lit tests are written to",
         ".convgen-fuzz/found"),
        ("state", "state", as_text, "the folder of hypothesis' database of found failures "
         "(local, not committed)", ".convgen-fuzz"),
        ("timeout", "timeout", positive_real, "seconds a case may run before it counts as hung",
         "60"),
        ("shrink-budget", "shrink_budget", positive_real, "seconds spent shrinking one failure; "
         "then the smallest failing case so far is the result", "120"),
        ("max-failures", "max_failures", positive, "stop after this many distinct failures",
         "no limit"),
        ("large", "large", switch(), "on a GPU, problems up to tens of millions of "
         "multiply-adds instead of the interpreter's sizes", "off"),
        ("json", "json", as_text, "also write the summary and each failure to this JSON file",
         "off"),
        ("quiet", "quiet", switch(), "no progress bar", "off"),
        ("ray", "ray", switch_or_text("auto or a cluster's address"),
         "search on a Ray cluster: alone, a new cluster on this "
         "machine ($RAY_ADDRESS: a running one); =auto, the cluster this machine joined; "
         "=HOST:PORT, that cluster's head. One search per GPU (else CPU), task i with seed "
         "--seed + i and the whole --budget (--cases shared out); each failure is shrunk where "
         "it was found and its test written here once (docs/scale-out.md)", "off"),
        ("ray-workers", "ray_workers", positive, "with --ray, a new local cluster's CPUs: "
         "searches at once where there is no GPU", "the machine's CPUs"),
        ("ray-tasks", "ray_tasks", positive, "with --ray, how many searches", "one per GPU, "
         "else per CPU, of the cluster"),
    ]))


def _fuzz(name: str, args: list[str]) -> int:
    values = scan(list(args), FUZZ_FLAGS)
    if values.get("ray") is None and ("ray_workers" in values or "ray_tasks" in values):
        raise ConvgenError("--ray-workers and --ray-tasks: only with --ray")
    if values.get("ray") is not None:
        return _fuzz_on_ray(values)
    from convfuzz import fuzz  # hypothesis, and the run's torch and Triton
    impl, be, limits, strategy = fuzz.search_setup(values)
    budget = values.get("budget")
    cases = values.get("cases")
    if budget is None and cases is None:
        budget = 60.0
    state = values.get("state", ".convgen-fuzz")
    out = values.get("out", os.path.join(state, "found"))
    bar = None
    if not values.get("quiet"):
        from tqdm import tqdm  # the progress bar
        bar = tqdm(total=cases if cases else int(budget), unit="case" if cases else "s",
                   file=sys.stderr, dynamic_ncols=True, mininterval=1.0,
                   bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} {unit} {postfix}")
    def progress(summary, found=None):
        if found is not None:
            print(f"fuzz: found {found.outcome.kind} ({found.outcome.what()}) at case {found.case}, "
                  f"shrunk in {found.shrink_runs} runs: {found.path}", flush=True)
            print("  reproduce: convgen " + " ".join(shlex.quote(f) for f in found.flags), flush=True)
        if bar is None:
            return
        if cases:
            bar.n = summary.cases
        else:
            bar.n = min(int(budget), int(time.monotonic() - summary.started))
        bar.set_postfix_str(f"{summary.cases} cases, {len(summary.found)} failures", refresh=False)
        bar.refresh()

    summary = fuzz.fuzz(strategy, budget=budget, cases=cases, seed=values.get("seed"), state=state,
                        out=out, timeout=values.get("timeout", 60.0),
                        shrink_budget=values.get("shrink_budget", 120.0),
                        max_failures=values.get("max_failures"),
                        note=f" -impl {impl}" if impl != "convgen" else "", progress=progress,
                        limits=limits)
    if bar is not None:
        bar.close()
    print(f"fuzz: seed {summary.seed} on {be.arch} ({impl}); {summary.rejected} cases declined "
          f"by the implementation")
    return _finish(values, summary, be.arch, impl)


def _finish(values: dict, summary, device: str, impl: str, seeds: list | None = None) -> int:
    """The JSON record (--json), the last line, the exit status."""
    from convfuzz import fuzz  # hypothesis
    if values.get("json"):
        record = {"seed": summary.seed, "device": device, "impl": impl, "cases": summary.cases,
                  "rejected": summary.rejected, "seconds": round(summary.seconds, 1),
                  "interrupted": summary.interrupted,
                  "failures": [{"kind": f.outcome.kind, "what": f.outcome.what(),
                                "flags": list(f.flags), "first": list(f.first), "case": f.case,
                                "shrink_runs": f.shrink_runs, "at": round(f.at, 1), "path": f.path,
                                "size": fuzz.size_of(f.flags)} for f in summary.found]}
        if seeds is not None:
            record["seeds"] = seeds
            record["lost"] = [{"seed": s, "why": why} for s, why in summary.lost]
        report.write_json(values["json"], record)
    print(summary.line(), flush=True)
    if summary.interrupted:
        return 130
    return 1 if summary.found or summary.lost else 0


def _fuzz_on_ray(values: dict) -> int:
    """--ray: independent seeded searches as tasks (fuzz.search_task), their failures
    gathered here, each test written once."""
    import random
    from convfuzz import fuzz  # hypothesis
    from convgen import backend, implementations  # torch, to find the device
    try:
        from convtune import cluster  # ray (the lab's Ray runner)
    except ImportError:
        raise ConvgenError("--ray needs convtune (the tuning lab), which runs the tasks",
                           field="ray") from None
    implementations.resolve(fuzz.impl_name(values))
    backend.ensure_interpreter_if_no_gpu()   # the workers take this process's environment
    budget, cases = values.get("budget"), values.get("cases")
    if budget is None and cases is None:
        budget = values["budget"] = 60.0
    seed = values.get("seed")
    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    state = values.get("state", ".convgen-fuzz")
    out = values.get("out", os.path.join(state, "found"))
    with cluster.Cluster(values["ray"], values.get("ray_workers")) as fleet:
        tasks = values.get("ray_tasks") or fleet.slots()
        if cases is not None and cases < tasks:
            tasks = cases
        print(f"fuzz: {tasks} searches on Ray, seeds {seed} to {seed + tasks - 1}"
              + (f", {budget:g} s each" if budget is not None else "")
              + (f", {cases} cases in all" if cases is not None else ""), flush=True)

        def found(task_seed, f):
            print(f"fuzz: seed {task_seed} found {f.outcome.kind} ({f.outcome.what()}) at case "
                  f"{f.case}, shrunk in {f.shrink_runs} runs: {f.path}", flush=True)
            print("  reproduce: convgen " + " ".join(shlex.quote(x) for x in f.flags), flush=True)

        def lost(task_seed, why):
            print(f"fuzz: seed {task_seed}: the search failed: {why}", flush=True)

        summary, device, impl = fuzz.fuzz_on_ray(fleet, values, seed, tasks, state, out, found, lost)
    print(f"fuzz: seeds {seed} to {seed + tasks - 1} on {device} ({impl}); {summary.rejected} "
          f"cases declined by the implementation"
          + (f"; {len(summary.lost)} search(es) failed" if summary.lost else ""))
    return _finish(values, summary, device, impl, list(range(seed, seed + tasks)))


COMMANDS = (
    Command("fuzz", "convgen fuzz [--budget S | --cases N] [--seed N] [--impl NAME] [flags]",
            "Draws problems from the whole supported space (directions, types, layouts, groups, "
            "padding, stride,\ndilation, 1-D/2-D/3-D, tile configs, data ranges), runs each "
            "through the usual run and verifier,\nand shrinks each failure (a 0 bit, a crash, a "
            "refusal, a hang) to the smallest case that still fails,\nwritten as a lit test. "
            "Ends with one line: fuzz: N cases, F failures, T s. Exit 1 when it found any.\n"
            "docs/fuzzing.md.\n", FUZZ_FLAGS, _fuzz),
)

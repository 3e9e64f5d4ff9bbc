"""The search: draw cases (space.py), run each (run.py), and shrink each failure to the
smallest case that still fails in the same way, then write it as a lit test.

hypothesis does the drawing, the shrinking and the database of failures found. The search
runs as batches of cases, each one hypothesis run with its own seed taken from the
fuzzer's: a run of hypothesis stops at its first failure, and the next batch goes on
from there. A run's outcome is kept by its flags, so a case drawn again (shrinking tries
many) is not run again.

Reproducible: the same --seed draws the same cases in the same order (with --cases N, the
same N cases; with --budget, as many of them as the time allows). The database
(state/examples) is only read by a run without --seed, before its first batch: a failure
found earlier is tried again first.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import shlex
import tempfile
import time
from dataclasses import dataclass, field

from convfuzz import space
from convfuzz.run import KINDS, Outcome, run_case
from convgen import report
from convgen.errors import ConvgenError
from convgen.flags import one_line


class Failure(Exception):
    """A case failed; one subclass per kind, so that hypothesis shrinks a wrong result to a
    smaller wrong result, not to a crash."""

    def __init__(self, flags: tuple):
        super().__init__(" ".join(flags))
        self.flags = flags


FAILURES = {kind: type(f"{kind.capitalize()}Run", (Failure,), {}) for kind in KINDS}


@dataclass
class Found:
    flags: tuple          # the shrunk case
    outcome: Outcome
    first: tuple          # the case as first drawn
    case: int             # its number among the cases run
    shrink_runs: int      # runs spent shrinking it
    at: float = 0.0       # seconds into the search when it first failed
    path: str | None = None   # the test file written


@dataclass
class Summary:
    seed: int
    cases: int = 0
    rejected: int = 0         # drawn but not run: declined by the implementation
    seconds: float = 0.0
    started: float = field(default_factory=time.monotonic)
    found: list = field(default_factory=list)
    interrupted: bool = False
    lost: list = field(default_factory=list)   # (seed, why) of --ray searches that never finished

    def line(self) -> str:
        return f"fuzz: {self.cases} cases, {len(self.found)} failures, {self.seconds:.0f} s"


BATCH = 25       # cases per hypothesis run
DECLINED_ALONE = 30   # declined cases before the first that ran: the implementation runs none


class _AllDeclined(BaseException):
    """Ends the search from inside hypothesis' run (a BaseException passes through it)."""


class _ShrinkSpent(BaseException):
    """Ends a shrink at its time limit from inside hypothesis' run: the last failure seen
    (hypothesis tries only cases smaller than its best) is the result."""


def _database(state: str, read: bool):
    from hypothesis.database import DirectoryBasedExampleDatabase, ExampleDatabase  # hypothesis
    db = DirectoryBasedExampleDatabase(os.path.join(state, "examples"))
    if read:
        return db

    class WriteOnly(ExampleDatabase):
        """Saves what is found, replays nothing (a seeded run draws only its own cases)."""

        def __init__(self, inner):
            super().__init__()
            self._inner = inner

        def fetch(self, key):
            return iter(())

        def save(self, key, value):
            self._inner.save(key, value)

        def delete(self, key, value):
            self._inner.delete(key, value)

        def _start_listening(self):
            pass

        def _stop_listening(self):
            pass
    return WriteOnly(db)


def fuzz(strategy, *, budget: float | None, cases: int | None, seed: int | None,
         state: str, out: str, timeout: float = 60.0, shrink_budget: float = 120.0,
         max_failures: int | None = None, note: str = "", progress=None, limits=None) -> Summary:
    """Search until `budget` seconds pass or `cases` cases ran (whichever comes first);
    write each failure found, shrunk, as a test under `out`. `progress(summary)` is
    called after each case."""
    import hypothesis  # hypothesis
    from hypothesis import HealthCheck, Phase, settings  # hypothesis

    seeded = seed is not None
    seed = seed if seeded else random.SystemRandom().randrange(2**32)
    summary = Summary(seed)
    rng = random.Random(seed)
    outcomes: dict[tuple, Outcome] = {}
    start = summary.started
    os.makedirs(state, exist_ok=True)
    log = open(os.path.join(state, "cases.jsonl"), "a")
    written: set = set()

    def spent() -> bool:
        return ((budget is not None and time.monotonic() - start >= budget)
                or (cases is not None and summary.cases >= cases)
                or (max_failures is not None and len(summary.found) >= max_failures))

    batch = 0
    try:
        while not spent():
            shrink = {"first": None, "case": 0, "since": 0.0, "runs": 0, "last": None, "at": 0.0}

            def check(flags):
                shrinking = shrink["first"] is not None
                if not shrinking and spent():
                    return
                if shrinking and time.monotonic() - shrink["since"] > shrink_budget:
                    raise _ShrinkSpent()
                o = outcomes.get(flags)
                if o is None:
                    o = outcomes[flags] = run_case(flags, timeout)
                    log.write(json.dumps({"seed": seed, "shrinking": shrinking, "kind": o.kind,
                                          "seconds": round(o.seconds, 3), "flags": flags}) + "\n")
                    log.flush()
                    if shrinking:
                        shrink["runs"] += 1
                    elif o.kind == "unsupported":
                        summary.rejected += 1
                    else:
                        summary.cases += 1
                        if progress:
                            progress(summary)
                if o.kind == "unsupported":
                    if not summary.cases and summary.rejected >= DECLINED_ALONE:
                        raise _AllDeclined()
                    hypothesis.reject()
                if o.failed and not shrinking and flags in written:
                    return   # a failure found and written already: drawn again, not new
                if o.failed:
                    if not shrinking:
                        shrink.update(first=flags, case=summary.cases, since=time.monotonic(),
                                      at=time.monotonic() - start)
                    shrink["last"] = flags
                    raise FAILURES[o.kind](flags)

            test = hypothesis.given(strategy)(check)
            test = settings(max_examples=BATCH, deadline=None, print_blob=False,
                            database=_database(state, read=not seeded and batch == 0),
                            suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                            phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
                            verbosity=hypothesis.Verbosity.quiet)(test)
            test = hypothesis.seed(rng.getrandbits(64))(test)
            def keep(flags: tuple, first: tuple, why: str = "") -> None:
                """A found failure, written once however often it is found."""
                if flags in written:
                    return
                written.add(flags)
                found = Found(flags, outcomes[flags], first, shrink["case"], shrink["runs"], shrink["at"])
                found.path = write_test(found, out, seed, note + why, limits)
                summary.found.append(found)
                if progress:
                    progress(summary, found)

            try:
                test()
            except Failure as e:
                keep(e.flags, shrink["first"])
            except _ShrinkSpent:
                keep(shrink["last"], shrink["first"], f" (shrinking stopped at its {shrink_budget:g} s limit)")
            except (_AllDeclined, hypothesis.errors.Unsatisfiable):
                if not summary.cases:
                    raise ConvgenError(
                        f"the implementation declined every case drawn ({summary.rejected}): "
                        "narrow the space to what it runs (--types, --operations)") from None
            except hypothesis.errors.Flaky:
                if shrink["first"] is None:
                    raise
                # the failure did not come back when hypothesis ran its case again: keep the
                # case as drawn, unshrunk
                keep(shrink["first"], shrink["first"], " (did not fail again when run again)")
            batch += 1
    except KeyboardInterrupt:
        summary.interrupted = True
    finally:
        log.close()
    summary.seconds = time.monotonic() - start
    return summary


def impl_name(values: dict) -> str:
    """The implementation a search with these flags tests: -impl, else $CONVGEN_IMPL, else
    convgen's kernels."""
    return values.get("impl") or os.environ.get("CONVGEN_IMPL") or "convgen"


def search_setup(values: dict):
    """(the implementation's name, the device, the size limits, the strategy) of a search
    with `convgen fuzz`'s flags (their scanned values), where it runs."""
    from convgen import backend, implementations  # torch, to find the device
    impl = impl_name(values)
    implementations.resolve(impl)   # a bad name: one error line before the search starts
    backend.ensure_interpreter_if_no_gpu()
    be = backend.current()
    large = values.get("large", False)
    if large and be.interpreter:
        raise ConvgenError("--large needs a GPU (the interpreter runs the small sizes)",
                           field="large")
    limits = space.GPU_LIMITS if large else space.INTERPRETER_LIMITS
    strategy = space.case_strategy(be, limits, impl, space.tile_configs(be),
                                   types=values.get("types"), directions=values.get("operations"),
                                   references=space.REFERENCES[values.get("reference", "both")])
    return impl, be, limits, strategy


# ---- on a Ray cluster ------------------------------------------------------------------

def search_task(values: dict, seed: int, cases: int | None) -> dict:
    """One seeded search of fuzz_on_ray, on a Ray worker: fuzz() into a folder of its own,
    each failure shrunk here; -> its summary, the text of each test it wrote, its case log,
    and the device and implementation it searched."""
    impl, be, limits, strategy = search_setup(values)
    with tempfile.TemporaryDirectory(prefix="convgen-fuzz-task-") as state:
        summary = fuzz(strategy, budget=values.get("budget"), cases=cases, seed=seed, state=state,
                       out=os.path.join(state, "found"), timeout=values.get("timeout", 60.0),
                       shrink_budget=values.get("shrink_budget", 120.0),
                       max_failures=values.get("max_failures"),
                       note=f" -impl {impl}" if impl != "convgen" else "", limits=limits)
        texts = []
        for found in summary.found:
            with open(found.path) as f:
                texts.append(f.read())
            found.path = os.path.basename(found.path)
        with open(os.path.join(state, "cases.jsonl")) as f:
            log = f.read()
    return {"summary": summary, "texts": texts, "log": log, "device": be.arch, "impl": impl}


def fuzz_on_ray(fleet, values: dict, seed: int, tasks: int, state: str, out: str,
                progress=None, lost=None) -> tuple[Summary, str, str]:
    """`tasks` independent searches on a Ray cluster (`fleet`, a convtune.cluster.Cluster),
    search i with seed `seed` + i: each as `convgen fuzz --seed SEED+i` would search with the
    whole --budget, or its share of --cases (the first --cases % tasks one more). Their case
    logs go into `state`'s, and each test they wrote is written under `out` once (two
    searches that shrank to the same case write one test). `progress(seed, found)` hears of
    each new failure, and `lost(seed, why)` of each search that failed (Ray ran it again
    if its worker died; the summary lists it, and the others go on). A ConvgenError is
    raised only where every search failed with one (a bad flag for the workers' device).
    -> (the summary of them all, the device, the implementation)."""
    cases = values.get("cases")
    shares = ([cases // tasks + (1 if i < cases % tasks else 0) for i in range(tasks)]
              if cases is not None else [None] * tasks)
    task = fleet.remote(search_task)
    refs = [task.remote(values, seed + i, shares[i]) for i in range(tasks)]
    total = Summary(seed)
    device = impl = ""
    error = None
    os.makedirs(state, exist_ok=True)
    written = set()
    try:
        with open(os.path.join(state, "cases.jsonl"), "a") as log:
            for i, result, failed in fleet.as_completed(refs):
                if failed is not None:   # the others go on; the run says so and exits 1
                    if isinstance(failed, ConvgenError):
                        error = error or failed
                    why = one_line(failed)[:300]
                    total.lost.append((seed + i, why))
                    if lost:
                        lost(seed + i, why)
                    continue
                s = result["summary"]
                device, impl = result["device"], result["impl"]
                log.write(result["log"])
                log.flush()
                total.cases += s.cases
                total.rejected += s.rejected
                total.interrupted |= s.interrupted
                for found, text in zip(s.found, result["texts"]):
                    if found.path in written:
                        continue
                    written.add(found.path)
                    found.path = _write_text(out, found.path, text)
                    total.found.append(found)
                    if progress:
                        progress(seed + i, found)
    except KeyboardInterrupt:   # the searches still running end with the cluster
        total.interrupted = True
    if error is not None and len(total.lost) == tasks:
        raise error
    total.seconds = time.monotonic() - total.started
    return total, device, impl


# ---- the test a failure becomes --------------------------------------------------------

def _value(flags: tuple, name: str, default: str | None = None) -> str | None:
    return flags[flags.index(name) + 1] if name in flags else default


def requires(flags: tuple, limits) -> list[str]:
    """The lit features a found case needs: an fp8 type, the descriptor kernels, or a GPU
    for a problem larger than the interpreter's limits."""
    need = []
    dtype = _value(flags, "-t", "f32")
    if dtype.startswith("fp8"):
        need.append(dtype.replace("_", "-"))
    if "tma=1" in (_value(flags, "-perf_config") or ""):
        need.append("tma")
    if limits is not None and limits != space.INTERPRETER_LIMITS:
        if space.problem_of(flags).flops // 2 > space.INTERPRETER_LIMITS.macs:
            need.append("gpu")
    return need


def test_text(found: Found, seed: int, note: str = "", limits=None) -> str:
    """The lit test of a found failure: what failed, how it was found, the RUN and CHECK
    lines. The implementation is left out of the RUN line (lit's --param impl picks it)."""
    flags = list(found.flags)
    if "-impl" in flags:
        i = flags.index("-impl")
        del flags[i:i + 2]
    what = found.outcome.what()
    metrics = next((ln.strip() for ln in found.outcome.text.splitlines() if ln.startswith("# RMS=")), "")
    lines = [f"// Found by `convgen fuzz --seed {seed}`{note}: case {found.case} {found.outcome.kind}, "
             f"{what}; shrunk in {found.shrink_runs} runs.",
             "// Reproduce: convgen " + " ".join(shlex.quote(f) for f in found.flags)]
    if metrics:
        lines.append("// " + metrics)
    if found.first != found.flags:
        lines.append("// As first drawn: " + " ".join(found.first))
    lines.append("// Before committing: say here why it fails, and fix it or mark it XFAIL.")
    need = requires(found.flags, limits)
    if need:
        lines.append("// REQUIRES: " + ", ".join(need))
    lines.append("// RUN: %convgen " + " ".join(flags) + " | FileCheck %s")
    lines.append("// CHECK: [1 1 1]")
    return "\n".join(lines) + "\n"


def test_name(flags: tuple, kind: str) -> str:
    p = space.problem_of(flags)
    digest = hashlib.sha1(" ".join(flags).encode()).hexdigest()[:8]
    return f"fuzz_{p.direction.name}_{p.dtype.name}_{kind}_{digest}.mlir"


def write_test(found: Found, out: str, seed: int, note: str = "", limits=None) -> str:
    """Write the test (whole or not at all) and return its path."""
    return _write_text(out, test_name(found.flags, found.outcome.kind),
                       test_text(found, seed, note, limits))


def _write_text(out: str, name: str, text: str) -> str:
    """out/name holding `text`, whole or not at all (report.write_atomic); -> its path."""
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, name)

    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    report.write_atomic(path, write, ".tmp")
    return path


def size_of(flags: tuple) -> dict:
    """How large a case is: its problem's sizes and multiply-adds (what the mutant table
    reports for a shrunk case)."""
    p = space.problem_of(flags)
    return {"n": p.n, "g": p.g, "c": p.c, "k": p.k, "input": [p.di, p.hi, p.wi],
            "filter": [p.z, p.y, p.x],
            "macs": p.flops // 2,
            "flags": sum(1 for f in flags if f.startswith("-"))}

"""`convgen study`: the fp16 study's grid, run through convgen's own stages.

The study (docs/fp16-study.md) ran 107 fp16 rocMLIR tests under every pairing of
validator (the CPU float64 reference, or the GPU FMA reference) and kernel path (matrix
cores or FMA) on four input ranges, and looked at five metrics. This module runs that
grid, plus the range away from zero the study recommends, the reference emulations it
tried (sums rounded to fp32 every 4 products, inputs below fp16's smallest normal
flushed) and the device's flushing of subnormal inputs (MI200's matrix cores), on any
device convgen runs on.

A case is one test under one setting. The cases of one test and range share their
stages (driver.StageCache): one draw of inputs, one kernel output per path and flushing,
one reference per kind. Each finished case is one JSON line, appended and flushed at
once; a run that is stopped resumes where it stopped, and a torn last line is dropped.

`study_report.py` turns the lines (and the study's own result files) into tables and
plots. The flags are cli.py's; this module never reads argv.
"""
from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
import re
import time
from dataclasses import dataclass

from convgen import REPO_ROOT
from convgen import backend as backends
from convgen import cli, driver, tolerance
from convgen.errors import ConvgenError
from convgen.options import DataSpec, ReferenceOptions
from convgen.report import json_number

# name: (lo, hi, both_signs, label). The study's r0, r1, r4, r5; "away" is the range it
# recommends, |x| in [1, 3] with either sign.
RANGES = {
    "r0": (-1.0, 1.0, False, "[-1, 1]"),
    "r1": (-10.0, 10.0, False, "[-10, 10]"),
    "r4": (1.0, 5.0, False, "[1, 5]"),
    "r5": (5.0, 10.0, False, "[5, 10]"),
    "away": (1.0, 3.0, True, "[-3, -1] U [1, 3]"),
}
VALIDATORS = ("cpu", "gpu")
PATHS = ("x2", "fma")
# reference emulation: (-ref_accumulate, -ref_flush_subnormals); the CPU reference only,
# as in the study
EMULATIONS = {"none": (None, False), "acc4": (4, False), "flush": (None, True)}
DEVICE_FLUSH = (False, True)
EMULATION_RANGES = ("r0",)   # where the study looked at them
# the five metrics, as verify.py names them and as the study printed them
METRICS = (("max_epsilon_diff", "maxEpsilonDiff"), ("max_abs_diff", "maxAbsDiff"),
           ("max_rel_diff", "maxRelDiff"), ("max_rel_diff_old", "maxRelDiff_old"),
           ("rms", "RMS"))
DEFAULT_TESTS = os.path.join(REPO_ROOT, "study", "fp16", "tests.tsv")
# --small: these tests, shrunk (shrink()), in the interpreter in minutes
# (the stem, backward-data, a 3x3 channels-last backward-weight, a grouped forward)
SMALL_TESTS = ("padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG1",
               "conv2d_host_validation_f16_bwd_CHECK_BWD_DATA1",
               "conv2d_host_validation_f16_bwd_CHECK_ISSUE_127_15",
               "conv2d_host_validation_f16_CHECK_RESNET101_NCHW_CONFIG1_FWD_f16")


@dataclass(frozen=True)
class StudyTest:
    name: str
    flags: tuple            # rocmlir-gen spellings, without data or validator flags
    source: str = ""
    outputs: int = 0        # the study's element count (0: not from the study)
    note: str = ""


@dataclass(frozen=True)
class Case:
    test: StudyTest
    path: str               # "x2" (matrix cores) or "fma"
    validator: str          # "cpu" or "gpu"
    range: str              # a key of RANGES
    emulation: str          # a key of EMULATIONS
    device_flush: bool      # the kernel's subnormal inputs flushed first (MI200)

    @property
    def key(self) -> str:
        return "|".join((self.test.name, self.path, self.validator, self.range, self.emulation,
                         "flush" if self.device_flush else "keep"))


def load_tests(path: str) -> list[StudyTest]:
    """A test list: tab-separated name, flags, source, outputs, note; # starts a comment."""
    try:
        with open(path) as f:
            lines = [line.rstrip("\n") for line in f]
    except OSError as e:
        raise ConvgenError(f"cannot read the test list '{path}': {e.strerror}",
                           field="tests") from None
    tests, header = [], None
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = cells
            if header[:2] != ["name", "flags"]:
                raise ConvgenError(f"{path}:{n}: the header must start with 'name<TAB>flags'",
                                   field="tests")
            continue
        row = dict(zip(header, cells))
        if not row.get("name") or not row.get("flags"):
            raise ConvgenError(f"{path}:{n}: a test needs a name and flags", field="tests")
        tests.append(StudyTest(row["name"], tuple(row["flags"].split()), row.get("source", ""),
                               int(row.get("outputs") or 0), row.get("note", "")))
    if not tests:
        raise ConvgenError(f"the test list '{path}' holds no tests", field="tests")
    return tests


def _flag(flags: tuple, name: str, default: int) -> int:
    for i, tok in enumerate(flags):
        if tok.lstrip("-") == name and i + 1 < len(flags):
            return int(flags[i + 1])
    return default


def _with(flags: tuple, values: dict) -> tuple:
    out = list(flags)
    for i, tok in enumerate(out):
        if tok.lstrip("-") in values and i + 1 < len(out):
            out[i + 1] = str(values[tok.lstrip("-")])
    return tuple(out)


def shrink(t: StudyTest) -> StudyTest:
    """The test at a size the interpreter runs in a second: batch <= 2, at most 8 channels
    (two groups of 4 when grouped), at most 12 pixels a side; filter, stride, padding,
    dilation, layouts and direction kept, so every index path of the original still runs."""
    f = t.flags
    g = _flag(f, "groupsize", 1)
    c, k = _flag(f, "in_channels", 1), _flag(f, "out_channels", 1)
    per, g2 = (4, 2) if g > 1 else (8, 1)
    vals = {"batchsize": min(_flag(f, "batchsize", 1), 2), "groupsize": g2,
            "in_channels": g2 * min(c // g, per), "out_channels": g2 * min(k // g, per)}
    for side, fil, pad, dil in (("in_h", "fil_h", "padding_h", "dilation_h"),
                                ("in_w", "fil_w", "padding_w", "dilation_w")):
        reach = (_flag(f, fil, 1) - 1) * _flag(f, dil, 1) + 1 - 2 * _flag(f, pad, 0)
        vals[side] = max(min(_flag(f, side, 1), 12), reach, 1)
    return dataclasses.replace(t, name=t.name + "_small", flags=_with(f, vals), outputs=0,
                               note="shrunk for --small")


def small_tests(tests: list[StudyTest]) -> list[StudyTest]:
    by_name = {t.name: t for t in tests}
    missing = [n for n in SMALL_TESTS if n not in by_name]
    if missing:
        raise ConvgenError(f"--small needs the study's tests {', '.join(missing)} in the list",
                           field="tests")
    return [shrink(by_name[n]) for n in SMALL_TESTS]


def grid(tests: list[StudyTest], ranges=tuple(RANGES), validators=VALIDATORS, paths=PATHS,
         emulations=tuple(EMULATIONS), device_flush=DEVICE_FLUSH,
         emulation_ranges=EMULATION_RANGES) -> list[Case]:
    """Every case, test by test and range by range (the order the stage cache wants). The
    reference emulations run on `emulation_ranges` only: summing in blocks of 4 costs the
    CPU reference about R/4 passes over the output (docs/fp16-study.md, "Cost")."""
    cases = []
    for t in tests:
        for r in ranges:
            for flush in device_flush:
                for path in paths:
                    for v in validators:
                        for emu in emulations:
                            if emu != "none" and (v != "cpu" or r not in emulation_ranges):
                                continue   # the emulations are the CPU reference's
                            cases.append(Case(t, path, v, r, emu, flush))
    return cases


# ---- running ------------------------------------------------------------------------------

def _config(base, case: Case, seed: int):
    lo, hi, both, _ = RANGES[case.range]
    accumulate, ref_flush = EMULATIONS[case.emulation]
    return dataclasses.replace(
        base,
        data=DataSpec(mode="random", seed=seed, lo=lo, hi=hi, both_signs=both),
        kernel=dataclasses.replace(base.kernel, use_matrix_cores=case.path == "x2",
                                   flush_subnormals=case.device_flush),
        reference=ReferenceOptions(validator=case.validator, accumulate=accumulate,
                                   flush_subnormals=ref_flush))


def _record(case: Case, verdict, seconds: float, device: str, arch: str) -> dict:
    th: tolerance.Resolved = verdict.thresholds
    hist = {name: list(h.counts) for name, h in verdict.histograms.items()}
    return {
        "key": case.key, "device": device, "arch": arch, "test": case.test.name,
        "path": case.path, "validator": case.validator, "range": case.range,
        "emulation": case.emulation, "device_flush": case.device_flush,
        "n": verdict.n, "exact": verdict.exact_count,
        "metrics": {m: json_number(verdict.metrics[m]) for m, _ in METRICS},
        "bits": list(verdict.bits), "out_of_tolerance": verdict.out_of_tolerance,
        "overflow": verdict.ref_inf_count + verdict.bad_inf_count > 0,
        "thresholds": {"rms": json_number(th.rms), "abs": json_number(th.abs)},
        "histograms": hist,
        "worst_eps": _worst(verdict, "max_epsilon_diff"),
        "worst_rel_old": _worst(verdict, "max_rel_diff_old"),
        "seconds": round(seconds, 4),
    }


def _worst(verdict, metric: str):
    w = verdict.worst.get(metric)
    return None if w is None else {"val": json_number(w.val), "kern": json_number(w.kern)}


def done_keys(path: str) -> set:
    """Keys already in a results file. A torn last line (a run killed mid-write) is cut off,
    so the file again holds whole lines only."""
    if not os.path.exists(path):
        return set()
    with open(path, "rb") as f:
        data = f.read()
    keep = data if data.endswith(b"\n") or not data else data[:data.rfind(b"\n") + 1]
    if keep != data:
        with open(path, "r+b") as f:
            f.truncate(len(keep))
    keys = set()
    for n, line in enumerate(keep.decode().splitlines(), 1):
        try:
            keys.add(json.loads(line)["key"])
        except (ValueError, KeyError):
            raise ConvgenError(f"{path}:{n} is not a study result line (another file?)",
                               field="out") from None
    return keys


def _append(out, rec: dict) -> None:
    """One whole line, flushed to the disk at once; several processes append to one file,
    each line under a lock so none is ever cut into another."""
    line = (json.dumps(rec) + "\n").encode()
    fcntl.flock(out.fileno(), fcntl.LOCK_EX)
    try:
        os.write(out.fileno(), line)
        os.fsync(out.fileno())
    finally:
        fcntl.flock(out.fileno(), fcntl.LOCK_UN)


def _run_group(cases: list[Case], out_path: str, seed: int) -> dict:
    """The cases of one test and range (one draw of inputs), appended to `out_path` one
    line each as they finish. Counts. (The test's flags are parsed here: a parsed config
    holds functions, which cannot travel to a worker process.)"""
    base = cli.parse_checked(cases[0].test.flags)
    backends.ensure_interpreter_if_no_gpu()
    be = backends.current()
    device = be.device_name()
    counts = {"ran": 0, "errors": 0, "failed_bits": 0}
    cache = driver.StageCache()
    with open(out_path, "ab") as out:
        for case in cases:
            t0 = time.perf_counter()
            try:
                o = driver.execute(_config(base, case, seed),
                                   say=lambda line: None, cache=cache)
                rec = _record(case, o.verdict, time.perf_counter() - t0, device, be.arch)
                counts["failed_bits"] += 0 in o.verdict.bits
            except ConvgenError as e:   # one case that cannot run is a row, not the end
                rec = {"key": case.key, "device": device, "arch": be.arch,
                       "test": case.test.name, "path": case.path, "validator": case.validator,
                       "range": case.range, "emulation": case.emulation,
                       "device_flush": case.device_flush, "error": str(e)}
                counts["errors"] += 1
            _append(out, rec)
            counts["ran"] += 1
    return counts


def _worker_init(threads: int) -> None:
    """A worker process of `-jobs N`: its share of the CPU cores for the float64 references."""
    import torch
    torch.set_num_threads(threads)


def _groups(todo: list[Case]) -> list[list[Case]]:
    """The cases by draw (test and range), in grid order."""
    groups: dict = {}
    for c in todo:
        groups.setdefault((c.test.name, c.range), []).append(c)
    return list(groups.values())


def _cost(group: list[Case]) -> float:
    """What a group costs, roughly: the CPU references' multiply-adds (outputs times the
    reduction length), acc4's blocked reference counting about three."""
    t = group[0].test
    cpu = sum(3 if c.emulation == "acc4" else 1 for c in group if c.validator == "cpu")
    return max(t.outputs, 1) * _reduction(t) * (cpu + 0.1 * len(group))


def _reduction(t: StudyTest) -> int:
    """C/G*Y*X: the forward reduction length, a proxy good enough to order the draws of
    every direction."""
    g = _flag(t.flags, "groupsize", 1)
    return max(_flag(t.flags, "in_channels", 1) // g, 1) * _flag(t.flags, "fil_h", 1) * \
        _flag(t.flags, "fil_w", 1)


def run(cases: list[Case], out_path: str, seed: int = 1, progress: bool = True,
        jobs: int = 1) -> dict:
    """Run the cases not yet in `out_path`, appending one line each. With jobs > 1, draws
    (a test and a range) run in that many processes at once, the costliest first, each
    process with its share of the CPU cores; the lines go into the one file. Returns counts."""
    from tqdm import tqdm


    folder = os.path.dirname(os.path.abspath(out_path))
    if not os.path.isdir(folder):
        raise ConvgenError(f"cannot write '{out_path}': the folder {folder} does not exist",
                           field="out")
    done = done_keys(out_path)
    todo = [c for c in cases if f"{c.key}" not in done]
    for t in {c.test for c in todo}:   # every test's flags, checked before any runs
        try:
            cli.parse_checked(t.flags)
        except ConvgenError as e:
            raise ConvgenError(f"test {t.name}: {e}", field="tests") from None
    counts = {"cases": len(cases), "done_before": len(cases) - len(todo), "ran": 0, "errors": 0,
              "failed_bits": 0}
    if not todo:
        return counts
    groups = _groups(todo)

    def add(c: dict) -> None:
        for k in ("ran", "errors", "failed_bits"):
            counts[k] += c[k]

    with tqdm(total=len(todo), unit="case", disable=not progress, desc="fp16 study",
              dynamic_ncols=True) as bar:
        if jobs <= 1:
            for g in groups:
                add(_run_group(g, out_path, seed))
                bar.update(len(g))
            return counts
        # spawn, not fork: the parent may hold a CUDA context, which a forked child cannot use
        import concurrent.futures as cf
        import multiprocessing
        threads = max(1, (os.cpu_count() or 1) // jobs)
        with cf.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"),
                                    initializer=_worker_init, initargs=(threads,)) as pool:
            futures = {pool.submit(_run_group, g, out_path, seed): len(g)
                       for g in sorted(groups, key=_cost, reverse=True)}
            try:
                for f in cf.as_completed(futures):
                    add(f.result())
                    bar.update(futures[f])
            except BaseException:
                for f in futures:
                    f.cancel()
                raise
    return counts


def read_results(paths: list[str]) -> list[dict]:
    rows = []
    for path in paths:
        try:
            with open(path) as f:
                for n, line in enumerate(f, 1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except ValueError:
                            raise ConvgenError(f"{path}:{n}: not a JSON line", field="results") from None
        except OSError as e:
            raise ConvgenError(f"cannot read '{path}': {e.strerror}", field="results") from None
    return rows


# ---- the study's own result files ---------------------------------------------------------

_RAW_NAME = re.compile(r"verify_f16_(xdlops|nonxdlops)_(pv|pv-with-gpu)_rand(\d)\.txt$")
_RAW_RANGE = {"0": "r0", "1": "r1", "4": "r4", "5": "r5"}
# rocMLIR's verifier line (conv-validation-wrappers.cpp), without and with the pair at
# maxRelDiff_old: N (exact eps1 large unknown) maxEps (val kern) maxAbs aveAbs maxRel
# maxRelOld [(val kern)] aveRel RMS, then 8 tags, the test's name and "(i of n)"
_RAW_FIELDS = {14: "n exact eps1 large unknown max_epsilon_diff eps_val eps_kern max_abs_diff "
                   "ave_abs max_rel_diff max_rel_diff_old ave_rel rms",
               16: "n exact eps1 large unknown max_epsilon_diff eps_val eps_kern max_abs_diff "
                   "ave_abs max_rel_diff max_rel_diff_old old_val old_kern ave_rel rms"}


def parse_study_line(line: str) -> dict:
    """One line of the study's result files as {field: value, "test": name}."""
    tok = line.split()
    if len(tok) < 12 or not tok[-1].endswith(")") or not tok[-3].startswith("("):
        raise ValueError("not a study result line")
    name, body = tok[-4], tok[:-12]
    vals = " ".join(body).replace("(", " ").replace(")", " ").split()
    fields = _RAW_FIELDS.get(len(vals))
    if fields is None:
        raise ValueError(f"{len(vals)} numbers where the study's lines have 14 or 16")
    out = {k: float(v) for k, v in zip(fields.split(), vals)}
    out["test"] = name
    return out


def read_study(folder: str, run_name: str = "fair_1") -> list[dict]:
    """The study's raw results (zhanglx13/llvm-project-mlir-dev-utils,
    fp16_experiment/raw_results) as records like ours: one per test and setting, for
    every GPU folder `verify_results_<run_name>_<GPU>`."""
    if not os.path.isdir(folder):
        raise ConvgenError(f"no folder '{folder}' (the study's raw_results)", field="study_results")
    rows = []
    prefix = f"verify_results_{run_name}_"
    gpus = sorted(d for d in os.listdir(folder) if d.startswith(prefix))
    if not gpus:
        raise ConvgenError(f"'{folder}' has no {prefix}<GPU> folders", field="study_results")
    for sub in gpus:
        gpu = sub[len(prefix):]
        for fname in sorted(os.listdir(os.path.join(folder, sub))):
            m = _RAW_NAME.match(fname)
            if not m:
                continue
            path = "x2" if m.group(1) == "xdlops" else "fma"
            validator = "cpu" if m.group(2) == "pv" else "gpu"
            with open(os.path.join(folder, sub, fname)) as f:
                for n, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        r = parse_study_line(line)
                    except ValueError as e:
                        raise ConvgenError(f"{sub}/{fname}:{n}: {e}", field="study_results") from None
                    metrics = {k: r[k] for k, _ in METRICS}
                    rows.append({
                        "key": f"{r['test']}|{path}|{validator}|{_RAW_RANGE[m.group(3)]}|none|hw",
                        "device": gpu, "arch": gpu, "test": r["test"], "path": path,
                        "validator": validator, "range": _RAW_RANGE[m.group(3)],
                        "emulation": "none", "device_flush": None, "n": int(r["n"]),
                        "exact": int(r["exact"]), "metrics": metrics,
                        "overflow": not all(math.isfinite(x) for x in metrics.values()),
                        "study_counts": [int(r["exact"]), int(r["eps1"]), int(r["large"])]})
    return rows


# ---- the command ----------------------------------------------------------------------------

RESULTS_DIR = os.path.join(REPO_ROOT, "docs", "data", "fp16-study")


def results_path(v: dict) -> str:
    """A study run's results file: -out, else ARCH.jsonl (ARCH-small.jsonl with -small) in
    the repository's folder of study results."""
    if "out" in v:
        return v["out"]
    small = "-small" * bool(v.get("small"))
    return os.path.join(RESULTS_DIR, f"{backends.current().arch}{small}.jsonl")


def main(v: dict) -> int:
    """`convgen study`, from convstudy.commands.parse_study's values (its report, -report:
    convstudy.commands)."""
    tests = load_tests(v.get("tests", DEFAULT_TESTS))
    if v.get("small"):
        tests = small_tests(tests)
    if "only" in v:
        names = {t.name for t in tests}
        unknown = [n for n in v["only"] if n not in names]
        if unknown:
            raise ConvgenError(f"no test {', '.join(unknown)} in the list", field="only")
        tests = [t for t in tests if t.name in v["only"]]
    cases = grid(tests, v.get("ranges", tuple(RANGES)), v.get("validators", VALIDATORS),
                 v.get("paths", PATHS), v.get("emulations", tuple(EMULATIONS)),
                 tuple(x == "flush" for x in v.get("device_flush", ("keep", "flush"))),
                 v.get("emulation_ranges", EMULATION_RANGES))
    backends.ensure_interpreter_if_no_gpu()
    out = results_path(v)
    if "out" not in v:   # the repository's own folder; a folder the user names must exist
        os.makedirs(RESULTS_DIR, exist_ok=True)
    t0 = time.perf_counter()
    c = run(cases, out, seed=v.get("seed", 1), jobs=v.get("jobs", 1))
    print(f"convgen study: {c['ran']} cases run, {c['done_before']} already in {out}, "
          f"{c['errors']} could not run, {c['failed_bits']} with a 0 bit "
          f"({time.perf_counter() - t0:.0f} s)")
    return 0

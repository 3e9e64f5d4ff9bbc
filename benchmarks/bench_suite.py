"""How fast the suite runs: the PR set cold and warm, the per-test overhead, the kernels it
compiles, and a list of small real configurations.

Usage:

    python benchmarks/bench_suite.py [--configs 1000] [--no-pr] [--lit-args "-j 16"]
        [--json docs/data/suite-bench-h100.json]

1. The PR set (`scripts/lit -s e2e/`, the defaults a user gets) with an empty Triton
   cache (cold), then again (warm). Every in-process convgen run is recorded
   (`--param record_runs`, convgen.lit_format) with the seconds of its stages.
2. Per-test overhead, from the warm run: a test's wall time (lit's) minus the seconds
   its convgen runs spent in their stages (inputs, kernel, reference, verify: the `#
   convgen: time` line); the median over the tests that ran convgen.
3. Compiling: the kernels the cold run compiled (entries of the fresh cache) and the
   seconds the kernel stage took cold beyond warm, summed over the runs.
4. `--configs N`: N small real configurations (models.suite_set: every layer of the
   network tables at batch 1 under 2^32 flops, all directions, f16/bf16/f32, NHWC and
   NCHW), one lit test each, run once with the PR set's cache.

Prints a table; `--json` writes `overhead_median_s`, `pr_suite_s` (warm), `configs_1000_s`
(when N is 1000) and every number behind them. docs/suite-speed.md: the method and the
last measurement. On a CPU machine the kernels run in Triton's interpreter: use a few
configurations (--configs 20).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from convgen import report  # noqa: E402
from convtune import commands as lab_commands  # noqa: E402
from convtune import models  # noqa: E402


def _lit(args: list[str], env: dict) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "lit"), *args], env=env,
                       capture_output=True, text=True)
    return time.perf_counter() - t0, p.returncode, p.stdout + p.stderr


def _results(path: str) -> dict:
    with open(path) as f:
        return {t["name"]: t for t in json.load(f)["tests"]}


def _runs(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _counts(tests: dict) -> dict:
    out: dict = {}
    for t in tests.values():
        out[t["code"]] = out.get(t["code"], 0) + 1
    return out


def _kernels(cache: str) -> int:
    """Kernels in a Triton cache: one metadata file each (group files aside)."""
    return sum(1 for _, _, files in os.walk(cache) for f in files
               if f.endswith(".json") and not f.startswith("__grp__"))


def pr_set(work: str, lit_args: list[str], env: dict) -> dict:
    cache = os.path.join(work, "triton-cache")
    env = {**env, "TRITON_CACHE_DIR": cache}
    out = {}
    for phase in ("cold", "warm"):
        runs, results = os.path.join(work, f"runs-{phase}.jsonl"), os.path.join(work, f"pr-{phase}.json")
        seconds, rc, text = _lit(["-s", *lit_args, "--param", f"record_runs={runs}",
                                  "--param", f"exec_root={os.path.join(work, phase)}",
                                  "-o", results, os.path.join(ROOT, "e2e")], env)
        tests = _results(results)
        out[phase] = {"seconds": seconds, "lit_exit": rc, "tests": _counts(tests),
                      "runs": _runs(runs) if os.path.exists(runs) else [], "results": tests}
        if phase == "cold":
            out["kernels_compiled"] = _kernels(cache)
        if rc not in (0, 1):
            sys.exit(f"bench_suite: lit failed ({rc}):\n{text[-3000:]}")
    return out


def overhead(phase: dict) -> list[float]:
    """Per test that ran convgen in the worker: wall time minus its runs' stage seconds."""
    stages: dict = {}
    for r in phase["runs"]:
        stages[r["test"]] = stages.get(r["test"], 0.0) + r["stage_seconds"]
    return [phase["results"][name]["elapsed"] - s for name, s in stages.items()
            if name in phase["results"]]


def _slowest(phase: dict, count: int = 15) -> list[dict]:
    """The tests that took longest, with the seconds their convgen runs spent in stages."""
    stages: dict = {}
    for r in phase["runs"]:
        stages[r["test"]] = stages.get(r["test"], 0.0) + r["stage_seconds"]
    tests = sorted(phase["results"].values(), key=lambda t: -(t.get("elapsed") or 0))[:count]
    return [{"test": t["name"], "seconds": t.get("elapsed"), "stage_seconds": stages.get(t["name"])}
            for t in tests]


def compile_seconds(cold: list[dict], warm: list[dict]) -> float:
    """The kernel stage's seconds cold beyond warm (the `kernel (first launch, compile
    included)` part of the stage times), paired by arguments."""
    def kernel(r):
        return r["stage_seconds"]
    warm_by = {(r["test"], r["args"]): kernel(r) for r in warm}
    return sum(max(0.0, kernel(r) - warm_by[(r["test"], r["args"])]) for r in cold
               if (r["test"], r["args"]) in warm_by)


def configs(work: str, count: int, lit_args: list[str], env: dict) -> dict:
    suite = os.path.join(work, "configs")
    os.makedirs(suite)
    for i, (net, layer, direction, dtype, layouts) in enumerate(models.suite_set(count)):
        with open(os.path.join(suite, f"c{i:04d}_{net}_{direction}_{dtype}.mlir"), "w") as f:
            f.write(f"// {net} {models.layer_name(layer)} {direction} {dtype} {'/'.join(layouts)}\n"
                    f"// RUN: {lab_commands.model_run_line(layer, 1, direction, dtype, layouts)}\n"
                    "// CHECK: [1 1 1]\n")
    results = os.path.join(work, "configs.json")
    seconds, rc, text = _lit(["-s", *lit_args, "--param", f"exec_root={os.path.join(work, 'cx')}",
                              "-o", results, suite], {**env, "TRITON_CACHE_DIR": os.path.join(work, "triton-cache")})
    tests = _results(results) if os.path.exists(results) else {}
    return {"count": count, "seconds": seconds, "lit_exit": rc, "tests": _counts(tests),
            "failed": sorted(n for n, t in tests.items() if t["code"] not in ("PASS", "UNSUPPORTED", "XFAIL"))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=1000, help="small real configurations (0: none)")
    ap.add_argument("--no-pr", action="store_true", help="skip the PR set")
    ap.add_argument("--lit-args", default="", help="more lit arguments, e.g. \"-j 16\"")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if args.json:
        report.check_paths(args.json, None)
    lit_args = shlex.split(args.lit_args)
    env = dict(os.environ)
    work = tempfile.mkdtemp(prefix="bench-suite-")
    doc: dict = {"command": "python benchmarks/bench_suite.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
                 "lit_args": lit_args}
    try:
        probe = subprocess.run([sys.executable, "-m", "convgen.backend"], capture_output=True, text=True,
                               env={**env, "PYTHONPATH": os.path.join(ROOT, "tools")})
        doc["device"] = json.loads(probe.stdout.strip().splitlines()[-1])
        if not args.no_pr:
            pr = pr_set(work, lit_args, env)
            cold, warm = pr["cold"], pr["warm"]
            over = overhead(warm)
            doc.update({
                "pr_suite_s": warm["seconds"], "pr_suite_cold_s": cold["seconds"],
                "pr_tests": warm["tests"], "pr_tests_cold": cold["tests"],
                "convgen_runs": len(warm["runs"]), "kernels_compiled": pr["kernels_compiled"],
                "compile_s": compile_seconds(cold["runs"], warm["runs"]),
                "overhead_median_s": statistics.median(over) if over else None,
                "overhead_max_s": max(over) if over else None,
                "work_s": sum(r["stage_seconds"] for r in warm["runs"]),
                "slowest_warm": _slowest(warm)})
            print(f"PR set: warm {doc['pr_suite_s']:.1f} s, cold {doc['pr_suite_cold_s']:.1f} s, "
                  f"overhead median {doc['overhead_median_s']}", flush=True)
            if args.json:   # kept if the configurations run past a time limit
                report.write_json(args.json, doc)
        if args.configs:
            c = configs(work, args.configs, lit_args, env)
            doc["configs"] = c
            if args.configs == 1000:
                doc["configs_1000_s"] = c["seconds"]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    rows = [("device", f"{doc['device']['arch']} ({doc['device']['kind']}, {len(doc['device'].get('gpus', []))} GPUs)")]
    if "pr_suite_s" in doc:
        rows += [("PR set, warm", f"{doc['pr_suite_s']:.1f} s  {doc['pr_tests']}"),
                 ("PR set, cold", f"{doc['pr_suite_cold_s']:.1f} s"),
                 ("overhead per test (median / max)",
                  f"{doc['overhead_median_s']:.2f} / {doc['overhead_max_s']:.2f} s" if doc["overhead_median_s"] is not None else "-"),
                 ("convgen work, warm (sum of stages)", f"{doc['work_s']:.1f} s over {doc['convgen_runs']} runs"),
                 ("kernels compiled (cold)", f"{doc['kernels_compiled']}, {doc['compile_s']:.1f} s of kernel stage")]
    if "configs" in doc:
        c = doc["configs"]
        rows.append((f"{c['count']} configurations", f"{c['seconds']:.1f} s  {c['tests']}"))
        if c["failed"]:
            rows.append(("  not passed", ", ".join(c["failed"][:10])))
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    if args.json:
        report.write_json(args.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())

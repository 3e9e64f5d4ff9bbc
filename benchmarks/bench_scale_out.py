#!/usr/bin/env python3
"""What Ray costs and gives on one machine: `convgen tune` of 8 small problems and `convgen
fuzz` for a fixed time, each without Ray, then through a local Ray cluster of 1 and of 2
workers (docs/scale-out.md).

    python benchmarks/bench_scale_out.py [--fuzz-seconds 60] [--max-configs 4] [--json FILE]

Each run is its own `python -m convgen` process, timed from start to end, so a Ray run's
time holds the cluster's start and stop (measured apart, with one trivial task). Ray runs
a task of one CPU on one thread (OMP_NUM_THREADS=1), so the run alone is timed on one
thread too. Without a GPU everything runs in Triton's interpreter: the times are CPU times
of the interpreter, fine for Ray's overhead and for the speed-up of a second worker,
meaningless for kernels. Each tune is run --repeat times, the four kinds in turn, and the
median kept. A fuzz run's work is its cases in the time. The per-task overhead is
(1-worker Ray time - time without Ray on one thread - an empty cluster's start and stop)
/ tasks.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

PROBLEMS = [   # each a few seconds of the interpreter with --max-configs 4
    "--operation conv2d -t f16 -batchsize=8 -in_channels=32 -out_channels=32 -in_h=16 -in_w=16 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1",
    "--operation conv2d -t bf16 -batchsize=8 -in_channels=64 -out_channels=32 -in_h=14 -in_w=14 -fil_h=1 -fil_w=1",
    "--operation conv2d -t f16 -batchsize=4 -in_channels=16 -out_channels=32 -in_h=24 -in_w=24 -fil_h=3 -fil_w=3 -conv_stride_h=2 -conv_stride_w=2 -padding_h=1 -padding_w=1",
    "--operation conv2d_bwd_data -t f16 -batchsize=8 -in_channels=32 -out_channels=32 -in_h=16 -in_w=16 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1",
    "--operation conv2d_bwd_data -t bf16 -batchsize=8 -in_channels=32 -out_channels=64 -in_h=14 -in_w=14 -fil_h=1 -fil_w=1",
    "--operation conv2d_bwd_weight -t f16 -batchsize=8 -in_channels=32 -out_channels=32 -in_h=12 -in_w=12 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1",
    "--operation conv2d_bwd_weight -t bf16 -batchsize=8 -in_channels=64 -out_channels=32 -in_h=12 -in_w=12 -fil_h=1 -fil_w=1",
    "--operation conv2d -t f16 -batchsize=8 -in_channels=48 -out_channels=48 -in_h=12 -in_w=12 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1",
]
FUZZ_LINE = re.compile(r"^fuzz: (\d+) cases, (\d+) failures")


def run(args: list[str], cwd: str, env: dict | None = None) -> tuple[float, str]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "convgen", *args], capture_output=True, text=True,
                       cwd=cwd, env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        sys.exit(f"bench_scale_out: convgen {' '.join(args)} failed ({p.returncode}):\n"
                 f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return seconds, p.stdout


def cluster_start_stop(workers: int) -> float:
    """An empty local cluster's start and stop, and one trivial task, in a fresh process."""
    code = ("import time, sys; t = time.perf_counter(); sys.path.insert(0, %r)\n"
            "from convtune.cluster import Cluster\n"
            "def one():\n"
            "    return 1\n"
            "with Cluster('', %d) as c:\n"
            "    c.ray.get(c.remote(one).remote())\n"
            "print(time.perf_counter() - t)") % (os.path.join(ROOT, "tools"), workers)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fuzz-seconds", type=float, default=60.0)
    ap.add_argument("--max-configs", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="tune runs of each kind (the median is kept)")
    ap.add_argument("--json", default=os.path.join(ROOT, "docs", "data", "scale-out-cpu.json"))
    a = ap.parse_args()
    from convgen import backend
    backend.ensure_interpreter_if_no_gpu()
    device = backend.current().arch
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-scale-out-") as tmp:
        lines = os.path.join(tmp, "lines.txt")
        with open(lines, "w") as f:
            f.write("\n".join(PROBLEMS) + "\n")
        empty = cluster_start_stop(2)
        # Ray gives a task of one CPU one thread (OMP_NUM_THREADS=1): the run alone on one
        # thread is what a 1-worker run adds its overhead to
        one = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        hows = (("alone", [], None), ("alone, 1 thread", [], one),
                ("ray, 1 worker", ["--ray", "--ray-workers", "1"], None),
                ("ray, 2 workers", ["--ray", "--ray-workers", "2"], None))
        times: dict[str, list] = {name: [] for name, _, _ in hows}
        configs: dict[str, int] = {}
        for repeat in range(a.repeat):   # interleaved: a slow spell of the machine hits each kind
            for name, extra, env in hows:
                db = os.path.join(tmp, f"tune-{repeat}-{len(times[name])}-{name[-9:].strip()}.sqlite")
                seconds, out = run(["tune", "--db", db, "--lines", lines, "--max-configs",
                                    str(a.max_configs), "--allow-cpu", *extra], tmp, env)
                timed = sum(int(m) for m in re.findall(r": (\d+) timed,", out))
                times[name].append(round(seconds, 1))
                configs[name] = timed
                print(f"tune  {name:15s} {len(PROBLEMS)} problems, {timed} configs  {seconds:7.1f} s",
                      flush=True)
        for name, _, _ in hows:
            rows.append({"what": "tune", "how": name, "problems": len(PROBLEMS),
                         "configs_timed": configs[name], "seconds": statistics.median(times[name]),
                         "runs_s": times[name]})
        for name, extra in (("alone", []), ("ray, 1 worker", ["--ray", "--ray-workers", "1"]),
                            ("ray, 2 workers", ["--ray", "--ray-workers", "2"])):
            state = os.path.join(tmp, f"fuzz-{len(rows)}")
            seconds, out = run(["fuzz", "--budget", str(a.fuzz_seconds), "--seed", "11", "--quiet",
                                "--state", state, *extra], tmp)
            m = next(FUZZ_LINE.match(ln) for ln in reversed(out.splitlines()) if FUZZ_LINE.match(ln))
            cases = int(m.group(1))
            rows.append({"what": "fuzz", "how": name, "budget_s": a.fuzz_seconds, "cases": cases,
                         "failures": int(m.group(2)), "seconds": round(seconds, 1)})
            print(f"fuzz  {name:15s} {cases} cases in {a.fuzz_seconds:g} s budget  {seconds:7.1f} s",
                  flush=True)
    tune = {r["how"]: r for r in rows if r["what"] == "tune"}
    fuzz = {r["how"]: r for r in rows if r["what"] == "fuzz"}
    summary = {
        "empty_cluster_start_stop_s": round(empty, 1),
        "tune_speedup_2_over_1": round(tune["ray, 1 worker"]["seconds"] / tune["ray, 2 workers"]["seconds"], 2),
        "tune_speedup_2_over_alone": round(tune["alone"]["seconds"] / tune["ray, 2 workers"]["seconds"], 2),
        "tune_overhead_per_task_s": round((tune["ray, 1 worker"]["seconds"]
                                           - tune["alone, 1 thread"]["seconds"] - empty) / len(PROBLEMS), 2),
        "fuzz_cases_2_over_1": round(fuzz["ray, 2 workers"]["cases"] / max(1, fuzz["ray, 1 worker"]["cases"]), 2),
        "fuzz_cases_1_over_alone": round(fuzz["ray, 1 worker"]["cases"] / max(1, fuzz["alone"]["cases"]), 2),
    }
    for k, v in summary.items():
        print(f"{k:32s} {v}")
    record = {"device": device, "cpus": os.cpu_count(), "machine": platform.processor() or platform.machine(),
              "date": time.strftime("%Y-%m-%d"), "command": "python benchmarks/bench_scale_out.py "
              f"--fuzz-seconds {a.fuzz_seconds:g} --max-configs {a.max_configs} --repeat {a.repeat}",
              "rows": rows, "summary": summary}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json + ".tmp", "w") as f:
        json.dump(record, f, indent=1)
    os.replace(a.json + ".tmp", a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())

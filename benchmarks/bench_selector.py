"""The learned selector at run time: loading the shipped model, picking a config, and the
picked configs checked against the reference.

    python benchmarks/bench_selector.py [--json out.json]
    python benchmarks/bench_selector.py --arch sm90 --device "NVIDIA H100 80GB HBM3" [--json ...]

The second form needs no GPU: it times 1 and 2 on this machine's CPU as a run on that
device would choose (the selection is CPU work), and skips 3.

1. Loading: `selector.load` of tuning/models/<arch>.json in this process (torch already
   imported, as in a convgen run).
2. Selection: `selector.choose` (the tuning space built, every candidate's features, the
   ranking model's pick among the runnable candidates) for every layer of the network tables at batch 1, 32 and 256, f16, all
   three directions; median and maximum.
3. End to end: `picks.select`, what a run asks (the local tuning store's lookup, then the
   model where nothing is tuned), for the same problems: median and maximum, the tuned
   and the model's picks apart, and the first pick of a process apart (it opens the
   store; later picks share the connection, as lit's in-process runs do).
4. Checked: convgen runs of a few of those problems with no tuning database (so the model
   picks), against the GPU reference: the `#` config line and the bits.
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import torch  # noqa: E402,F401  (a convgen run has it imported before the selector loads)

from convgen import dtypes, report  # noqa: E402
from convtune import commands as lab_commands  # noqa: E402
from convtune import models, selector  # noqa: E402
from convtune import dataset, features  # noqa: E402
from convgen.backend import current  # noqa: E402
from convgen.errors import ConvgenError  # noqa: E402
from convgen.problem import make_problem  # noqa: E402

LAYOUTS = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}
CHECKED = [("resnet50", 2, 32, "fwd"), ("resnet50", 6, 32, "bwd_weight"), ("mobilenet_v2", 2, 8, "bwd_data"),
           ("efficientnet_b0", 14, 32, "fwd"), ("vgg16", 4, 8, "bwd_weight"), ("unet", 9, 1, "bwd_data")]


def _problem(layer, batch, direction):
    c, k, hw, f, s, pad, g = layer[:7]
    d = models.dilation(layer)
    return make_problem(direction=direction, dtype=dtypes.elem_type("f16"), n=batch, g=g, c_total=c,
                        k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s), dilation=(d, d),
                        pad=(pad,) * 4, layouts=LAYOUTS)


def _stages(problems, be, path) -> dict:
    """selector.choose's steps timed one by one (the same calls, in its order): the tuning
    space built, every candidate's features, the pick (the ranking model's trees, and
    kernels/config.validate and the chain length of the few candidates it chooses among)."""
    import numpy as np
    from convgen.kernels import config as kconfig
    from convtune import space as tuning_space
    model = selector.load(path)
    dev = features.device_of(be)
    spent = dict.fromkeys(("space", "features", "pick"), 0.0)
    for p in problems:
        t0 = time.perf_counter()
        space = tuning_space.configs(p, be)   # as selector.choose builds it
        t1 = time.perf_counter()
        x = np.asarray(features.feature_rows(p, space, dev), dtype=np.float64)
        t2 = time.perf_counter()
        selector.pick_runnable(model, p, be, space, x)
        t3 = time.perf_counter()
        for k, a, b in (("space", t0, t1), ("features", t1, t2), ("pick", t2, t3)):
            spent[k] += b - a
    return {k: 1e3 * v / max(1, len(problems)) for k, v in spent.items()}


def _end_to_end(problems, be) -> dict:
    """picks.select timed per problem with the default store and model; then the first
    pick of a process, as a fresh connection to the store makes it (every 10th problem)."""
    from convgen import picks
    from convtune import store, tuning_db
    picks.select(problems[0], be, True, None, "", "")   # the store built, the model loaded
    times, tuned = [], []
    for p in problems:
        t0 = time.perf_counter()
        _, source = picks.select(p, be, True, None, "", "")
        times.append(time.perf_counter() - t0)
        tuned.append(source.startswith("tuned"))
    first = []
    for p in problems[::10]:
        tuning_db.close_readers(store.resolve(""))
        t0 = time.perf_counter()
        picks.select(p, be, True, None, "", "")
        first.append(time.perf_counter() - t0)
    ms = lambda ts: 1e3 * statistics.median(ts) if ts else float("nan")  # noqa: E731
    return {"median_ms": ms(times), "max_ms": 1e3 * max(times), "tuned": sum(tuned),
            "tuned_median_ms": ms([t for t, k in zip(times, tuned) if k]),
            "model_median_ms": ms([t for t, k in zip(times, tuned) if not k]),
            "first_median_ms": ms(first), "problems": len(times)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json")
    ap.add_argument("--arch", help="time the selection for this arch on the CPU (with --device)")
    ap.add_argument("--device", help="the device name the features see (with --arch)")
    args = ap.parse_args()
    if bool(args.arch) != bool(args.device):
        sys.exit("bench_selector: --arch and --device go together")
    be = current() if not args.arch else dataset.offline_backend(args.arch, args.device)
    path = selector.resolve("", be.arch)
    if path is None:
        sys.exit(f"bench_selector: no model for {be.arch} in {selector.MODELS_DIR}")
    t0 = time.perf_counter()
    selector.load(path)
    load_s = time.perf_counter() - t0
    times, picked, problems, all_problems = [], 0, [], []
    for layers in models.NETWORKS.values():
        for layer in layers:
            for batch in (1, 32, 256):
                for direction in ("fwd", "bwd_data", "bwd_weight"):
                    try:
                        p = _problem(layer, batch, direction)
                    except ConvgenError:   # a tensor past 2^31 elements (U-Net at batch 256)
                        continue
                    all_problems.append(p)
                    t0 = time.perf_counter()
                    cfg, _, _ = selector.choose(p, be, path)
                    times.append(time.perf_counter() - t0)
                    picked += cfg is not None
                    if cfg is not None:
                        problems.append(p)
    print(f"load {1e3 * load_s:.1f} ms; choose: median {1e3 * statistics.median(times):.2f} ms, "
          f"max {1e3 * max(times):.2f} ms over {len(times)} problems ({picked} picked by the model)",
          flush=True)
    stages = _stages(problems, be, path)
    print("where choose's time goes (mean ms per problem the model picks for): "
          + ", ".join(f"{k} {v:.3f}" for k, v in stages.items()), flush=True)
    end_to_end = _end_to_end(all_problems, be)
    print(f"select (store and model): median {end_to_end['median_ms']:.2f} ms, max "
          f"{end_to_end['max_ms']:.2f} ms; tuned {end_to_end['tuned_median_ms']:.2f} ms median "
          f"({end_to_end['tuned']} problems), model {end_to_end['model_median_ms']:.2f} ms; "
          f"first of a process {end_to_end['first_median_ms']:.2f} ms median", flush=True)
    checks = []
    for net, index, batch, direction in ([] if args.arch else CHECKED):
        layer = models.NETWORKS[net][index]
        argv = ["--operation", {"fwd": "conv2d", "bwd_data": "conv2d_bwd_data",
                                "bwd_weight": "conv2d_bwd_weight"}[direction], "-t", "f16",
                "-in_layout=nhwc", "-fil_layout=kyxc", "-out_layout=nhwk",
                *lab_commands.layer_args(layer, batch), "-pv_with_gpu", "-x2", "-tuning_db", "none"]
        p = subprocess.run([sys.executable, "-m", "convgen", *argv], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": os.pathsep.join(
                               p for p in (os.path.join(ROOT, "tools"), os.environ.get("PYTHONPATH")) if p)})
        lines = p.stdout.splitlines()
        config = next((ln for ln in lines if "config " in ln), "")
        bits = lines[-1] if lines else p.stderr.strip()
        checks.append({"problem": f"{net} layer {index + 1} batch {batch} {direction}",
                       "config_line": config, "bits": bits, "exit": p.returncode})
        print(f"{checks[-1]['problem']}: {bits}  {config[config.find('config'):][:160]}", flush=True)
    if args.json:
        report.write_json(args.json, {"device": be.arch, "model": os.path.basename(path),
                                      "load_ms": 1e3 * load_s,
                                      "choose_ms_median": 1e3 * statistics.median(times),
                                      "choose_ms_max": 1e3 * max(times), "problems": len(times),
                                      "stages_ms": stages, "select": end_to_end,
                                      "picked_by_model": picked, "checks": checks,
                                      "command": " ".join(["python", *sys.argv])})
    return 0


if __name__ == "__main__":
    sys.exit(main())

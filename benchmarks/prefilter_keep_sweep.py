#!/usr/bin/env python3
"""How many candidates the selector's prefilter should keep (selector.PREFILTER_KEEP), on CPU.

    PYTHONPATH=.pydeps:tools python3 benchmarks/prefilter_keep_sweep.py [--keep 4 8 12 16] [--shuffles 6] [--test_device NAME]

A pick ranks every candidate by the ranking model's first PREFILTER_TREES trees and lets
the whole model order the PREFILTER_KEEP ranked first (selector.Model.pick_rows): fewer
kept is fewer tree walks. For each of the 1 + N assignments of the shapes to 5 folds
(evaluation.group_folds), one model per fold (selector.train) picks for every held-out
problem among its rankable configs of short chains with each value of --keep (no
validation: the values are compared, not a run's pick reproduced). Prints the mean, P10
and min of the picks' efficiency, overall and per direction, averaged over the
assignments. --test_device judges only that GPU's held-out problems. The numbers behind
PREFILTER_KEEP: docs/config-selection.md, "Model settings".
"""
import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from convtune import selector as S, tuning_db  # noqa: E402
from convtune import store  # noqa: E402
from convtune import dataset, evaluation  # noqa: E402
from convgen.errors import script_main  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=int, nargs="+", default=[4, 8, 12, 16])
    ap.add_argument("--shuffles", type=int, default=6)
    ap.add_argument("--db", default="", help="the tuning database (default: the local store of tuning/data)")
    ap.add_argument("--test_device", help="judge only this GPU's held-out picks (every "
                    "device's problems still train), as eval-selector --test_device does")
    args = ap.parse_args()
    probs = dataset.load_dataset(store.resolve(args.db), "sm90")
    # the held-out problems whose picks count (all, or one GPU's; one it lacks: one error line)
    judged = evaluation.on_device(probs, args.test_device, "test_device")
    t0 = time.time()
    runs = {k: [] for k in args.keep}   # per keep, direction_summaries of each assignment
    shipped = S.PREFILTER_KEEP
    try:
        for seed in evaluation.assignments(args.shuffles):
            effs = {k: [] for k in args.keep}
            for _, train_ix, test_ix in evaluation.fold_splits(probs, 5, "shape", seed, judged):
                model = S.Model.of(S.train([probs[i] for i in train_ix]), {"arch": "sm90"})
                for prob in (judged[i] for i in test_ix):
                    allowed, x = prob.candidate_rows
                    direction = prob.problem.direction.name
                    for k in args.keep:
                        S.PREFILTER_KEEP = k
                        j, _ = model.pick_rows(direction, x)
                        effs[k].append((direction, prob.tflops[allowed[j]] / prob.best))
            for k in args.keep:
                runs[k].append(evaluation.direction_summaries(effs[k]))
            print(f"# assignment {'canonical' if seed is None else seed}: {time.time() - t0:.0f} s",
                  flush=True)
    finally:
        S.PREFILTER_KEEP = shipped
    for k in args.keep:
        print("keep", k, *([args.test_device] if args.test_device else []), 1 + args.shuffles, "assignments", evaluation.averaged_percent(runs[k]), flush=True)
    return 0


if __name__ == "__main__":   # a database that is missing or not one: one error line
    script_main("prefilter_keep_sweep", main, {"test_device": "--test_device"})

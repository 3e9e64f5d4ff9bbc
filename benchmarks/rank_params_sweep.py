#!/usr/bin/env python3
"""Cross-validate the selector's ranking model with other LightGBM parameters, on CPU.

    PYTHONPATH=.pydeps:tools python3 benchmarks/rank_params_sweep.py '{"num_leaves": 63}' [--shuffles 6] [--test_device NAME]

The argument is a JSON object laid over selector.RANK_PARAMS, plus three keys of this
script's own: "_trees" (the ranking model's trees, default selector.rank_trees(TREES)),
"_ens" (that many models of _trees / _ens trees each, seeds 1.., their scores
summed; LightGBM's seeds set per member) and "_qw" (["near", a]: each problem's rows
weighted 1 + a / its configs within 5% of its best; ["gap", a]: 1 + a x (1 - its second
best / its best); ["top5", a]: 1 + a x (1 - the mean of the next five / its best), against
the unweighted rows). --test_device judges only that GPU's
held-out problems. Each of the 1 + N assignments of the shapes to 5 folds (evaluation.group_folds)
trains on four folds and picks, for every held-out problem, the config of the highest
score among its rankable configs of short chains (no prefilter, no validation: the
parameters are compared, not a run's pick reproduced). Prints the mean, P10 and min of
the picks' efficiency, overall and per direction, averaged over the assignments.
The numbers behind RANK_PARAMS: docs/config-selection.md, "Model settings".
"""
import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import numpy as np  # noqa: E402

from convtune import selector as S, tuning_db  # noqa: E402
from convtune import store  # noqa: E402
from convtune import dataset, evaluation, features  # noqa: E402
from convgen.errors import ConvgenError, script_main  # noqa: E402


QUERY_WEIGHTS = ("near", "gap", "top5")   # the "_qw" kinds query_weight knows


def query_weight(kind: str, alpha: float, tflops) -> float:
    """The "_qw" weight of a problem whose configs ran at `tflops`."""
    t = np.sort(np.asarray(tflops, dtype=np.float64))[::-1]
    if kind == "near":
        return 1 + alpha / int((t >= 0.95 * t[0]).sum())
    if len(t) < 2:
        return 1.0
    if kind == "gap":
        return 1 + alpha * (1 - t[1] / t[0])
    return 1 + alpha * (1 - t[1:6].mean() / t[0])   # top5


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("params", nargs="?", default="{}")
    ap.add_argument("--shuffles", type=int, default=6)
    ap.add_argument("--group", default="shape", choices=sorted(dataset.GROUPINGS))
    ap.add_argument("--db", default="", help="the tuning database (default: the local store of tuning/data)")
    ap.add_argument("--test_device", help="judge only this GPU's held-out problems (every "
                    "device's still train), as eval-selector --test_device does")
    args = ap.parse_args()
    import lightgbm as lgb
    try:
        variant = json.loads(args.params)
    except json.JSONDecodeError as e:
        raise ConvgenError(f"params: not a JSON object ({e})") from None
    if not isinstance(variant, dict):
        raise ConvgenError(f"params: not a JSON object: {args.params}")
    trees = variant.pop("_trees", S.rank_trees(S.TREES))
    ens = variant.pop("_ens", 1)
    qw = variant.pop("_qw", None)
    if qw is not None and not (isinstance(qw, list) and len(qw) == 2 and qw[0] in QUERY_WEIGHTS
                               and isinstance(qw[1], (int, float))):
        raise ConvgenError(f"_qw: expected [{' | '.join(map(json.dumps, QUERY_WEIGHTS))}, a number], "
                          f"got {json.dumps(qw)}")
    params = {**S.RANK_PARAMS, **variant}
    probs = dataset.load_dataset(store.resolve(args.db), "sm90")
    # the held-out problems whose picks count (all, or one GPU's; one it lacks: one error line)
    judged = evaluation.on_device(probs, args.test_device, "test_device")
    x_all, _, relevance, groups = S._matrix(probs)
    starts = np.concatenate([[0], np.cumsum(groups)])
    # a query's weight, on each of its rows: None, or from how few of its configs come near its best
    weight = None
    if qw:
        weight = np.ones(len(x_all))
        for i, prob in enumerate(probs):
            weight[starts[i]:starts[i + 1]] = query_weight(*qw, prob.tflops)
    t0 = time.time()
    runs = []   # direction_summaries of each assignment
    for seed in evaluation.assignments(args.shuffles):
        effs = []
        for _, train, test_ix in evaluation.fold_splits(probs, 5, args.group, seed, judged):
            rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in train])
            data = lgb.Dataset(x_all[rows], relevance[rows], group=[groups[i] for i in train],
                               weight=None if weight is None else weight[rows],
                               feature_name=list(features.FEATURE_NAMES))
            # an ensemble's members differ by their seeds; a lone model keeps RANK_PARAMS'
            seeds = [{"seed": 1 + k, "bagging_seed": 1 + k, "feature_fraction_seed": 1 + k}
                     for k in range(ens)] if ens > 1 else [{}]
            boosters = [lgb.train({**params, **s}, data, num_boost_round=trees // ens) for s in seeds]
            for prob in (judged[i] for i in test_ix):
                allowed, x = prob.candidate_rows
                j = int(np.argmax(sum(b.predict(x) for b in boosters)))
                effs.append((prob.problem.direction.name, prob.tflops[allowed[j]] / prob.best))
        runs.append(evaluation.direction_summaries(effs))
    print(args.params, args.group, *([args.test_device] if args.test_device else []), 1 + args.shuffles, "assignments", evaluation.averaged_percent(runs), f"{time.time() - t0:.0f}s", flush=True)
    return 0


if __name__ == "__main__":   # parameters that are not JSON, a database that is missing or not one: one error line
    script_main("rank_params_sweep", main, {"test_device": "--test_device"})

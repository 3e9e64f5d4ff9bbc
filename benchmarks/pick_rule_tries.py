#!/usr/bin/env python3
"""Rules that would change the selector's pick among the ranking model's first few, on CPU.

    PYTHONPATH=.pydeps:tools python3 benchmarks/pick_rule_tries.py [--device NAME] [--shuffles N]

The H100's lowest held-out picks mostly have the best config, or one within 2% of it,
second or third in the model's order, and another batch of their layer measured. Two
kinds of rule try to reach it (docs/config-selection.md, "Model settings"):

- the layer's measured neighbours as a vote: the best config of the nearest batch of the
  same layer (same GPU, training folds only) where it is among the model's first K; or the
  candidate of the first K with the best mean efficiency at the nearest batch below and
  above, where that beats the model's first there by a margin;
- the speed model breaking near ties: the ranking's second where its score is within a
  gap of the first's and the speed model predicts it faster by a margin.

For each of the 1 + N assignments of the shapes to 5 folds (evaluation.group_folds), one
model per fold (selector.train, on every GPU's problems of the other folds) orders the
candidates of each held-out problem of --device (selector.Model.order_rows, as a run
does, no validation); every rule picks from that order. Prints each rule's mean, P10 and
min, overall and per direction, averaged over the assignments.
"""
import argparse
import itertools
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from convtune import selector as S, tuning_db  # noqa: E402
from convtune import store  # noqa: E402
from convtune import dataset, evaluation, features  # noqa: E402
from convgen.errors import script_main  # noqa: E402

FIRST = 8   # how far down the model's order any rule looks


def layer_of(p: dataset.Problem) -> tuple:
    """A problem's GPU, direction, type and layouts, and its layer (the shape less its batch)."""
    return (p.device.name,) + p.key[:3] + p.layer


def nearest(batches, n: int, sides: bool) -> list[int]:
    """The measured batch nearest to n (in ratio; the larger on a tie), or with `sides` the
    nearest below and the nearest above, where there are such."""
    if not batches:
        return []
    if not sides:
        return [min(batches, key=lambda m: (abs(math.log(m / n)), -m))]
    below, above = [m for m in batches if m < n], [m for m in batches if m > n]
    return ([max(below)] if below else []) + ([min(above)] if above else [])


def rules() -> dict:
    """{name: pick(order texts, neighbours {batch: {config: efficiency}}, n, rank scores,
    predicted TFLOPS) -> index into the order}."""
    out = {"the model's first (shipped)": lambda *_: 0}
    for k in (2, 3, 4):
        def in_first(order, nb, n, rank, speed, k=k):
            at = nearest(list(nb), n, False)
            if not at:
                return 0
            best = max(nb[at[0]], key=nb[at[0]].get)
            return order.index(best) if best in order[:k] else 0
        out[f"nearest batch's best if in first {k}"] = in_first
    for k, margin in itertools.product((2, 4), (0.0, 0.1, 0.2)):
        def vote(order, nb, n, rank, speed, k=k, margin=margin):
            at = nearest(list(nb), n, True)
            if not at:
                return 0

            def score(i):
                return sum(nb[m].get(order[i]) or 0.0 for m in at) / len(at)
            j = max(range(min(k, len(order))), key=score)
            return j if score(j) > score(0) + margin else 0
        out[f"batches either side vote, first {k}, margin {margin}"] = vote
    for gap, faster in itertools.product((0.1, 0.4), (0.0, 0.05)):
        def tie(order, nb, n, rank, speed, gap=gap, faster=faster):
            return int(len(rank) > 1 and rank[0] - rank[1] < gap and speed[1] > speed[0] * (1 + faster))
        out[f"second on a rank gap < {gap}, predicted {faster:.0%} faster"] = tie
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="NVIDIA H100 80GB HBM3", help="the GPU whose problems are judged")
    ap.add_argument("--shuffles", type=int, default=0, help="seeded assignments after the canonical one")
    ap.add_argument("--db", default="", help="the tuning database (default: the local store of tuning/data)")
    args = ap.parse_args()
    probs = dataset.load_dataset(store.resolve(args.db), "sm90")
    judged = evaluation.on_device(probs, args.device, "device")   # one it lacks: one error line
    picks = rules()
    runs = {name: [] for name in picks}
    t0 = time.time()
    for seed in evaluation.assignments(args.shuffles):
        effs = {name: [] for name in picks}
        for _, train_ix, test_ix in evaluation.fold_splits(probs, 5, "shape", seed, judged):
            train = [probs[i] for i in train_ix]
            model = S.Model.of(S.train(train), {"arch": "sm90"})
            measured = {}   # layer -> {batch: {config: efficiency}}, of the training folds alone
            for p in train:
                measured.setdefault(layer_of(p), {})[p.problem.n] = {
                    c.describe(): t / p.best for c, t in zip(p.configs, p.tflops)}
            for p in (judged[i] for i in test_ix):
                direction = p.problem.direction.name
                allowed, x = p.candidate_rows   # a float64 array (features.feature_rows)
                rows = list(itertools.islice(model.order_rows(direction, x), FIRST))
                order = [p.configs[allowed[i]].describe() for i in rows]
                rank = model.booster(direction).predict(x[rows])
                speed = [math.expm1(v) for v in model.booster(direction, "speed").predict(x[rows])]
                n = p.problem.n
                nb = {m: v for m, v in measured.get(layer_of(p), {}).items() if m != n}
                for name, pick in picks.items():
                    i = allowed[rows[pick(order, nb, n, rank, speed)]]
                    effs[name].append((direction, p.tflops[i] / p.best))
        for name in picks:
            runs[name].append(evaluation.direction_summaries(effs[name]))
        print(f"# assignment {'canonical' if seed is None else seed}: {time.time() - t0:.0f} s", flush=True)
    for name in picks:
        print(f"{name}: {1 + args.shuffles} assignments", evaluation.averaged_percent(runs[name]), flush=True)
    return 0


if __name__ == "__main__":   # a database that is missing or not one: one error line
    script_main("pick_rule_tries", main, {"device": "--device"})

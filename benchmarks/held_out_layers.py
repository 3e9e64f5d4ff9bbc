"""Does a set of measured problems teach the selector a layer it has never seen? Train on
every problem of the database but the held-out layers (every batch, every GPU), with or
without the problems of the `--drop` layers too, and print the picks for the held-out
layers' problems on one GPU: the same comparison as eval-selector's `--group layer`, with
the one fold fixed, so that the difference two runs show is the dropped problems' alone.

    python benchmarks/held_out_layers.py --hold 116,116,28 --hold 116,116,14
    python benchmarks/held_out_layers.py --hold 116,116,28 --hold 116,116,14 \\
        --drop 122,122,28 --drop 244,244,14 ...

A layer is `C,K,H` (input channels, output channels, input height and width) of an
ungrouped 1x1 convolution: the layers this was written for (docs/config-selection.md,
ShuffleNetV2's unaligned 1x1s). The run trains one model (about 2.5 minutes on the 2-core
CPU machine).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from convtune import selector, tuning_db  # noqa: E402
from convtune import store  # noqa: E402
from convtune import dataset, evaluation  # noqa: E402
from convgen.errors import ConvgenError, script_main  # noqa: E402


def layer(text: str) -> tuple[int, int, int]:
    try:
        c, k, h = (int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not C,K,H") from None
    return c, k, h


def of_layers(prob: dataset.Problem, layers: set) -> bool:
    q = prob.problem
    return q.g == 1 and (q.y, q.x) == (1, 1) and (q.c, q.k, q.hi) in layers


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default="", help="the tuning database (default: the local store of tuning/data)")
    ap.add_argument("--hold", type=layer, action="append", required=True,
                    help="a layer held out of the training and judged (C,K,H; repeatable)")
    ap.add_argument("--drop", type=layer, action="append", default=[],
                    help="a layer left out of the training too, not judged (repeatable)")
    ap.add_argument("--test_device", default="NVIDIA H100 80GB HBM3")
    args = ap.parse_args()
    held, dropped = set(args.hold), set(args.drop)
    problems = dataset.load_dataset(store.resolve(args.db), "sm90")
    train = [p for p in problems if not of_layers(p, held | dropped)]
    # a GPU the database lacks: one error line
    judged = [p for p in evaluation.on_device(problems, args.test_device, "test_device")
              if of_layers(p, held)]
    if not judged:
        raise ConvgenError(f"no problem of those layers measured on {args.test_device}", field="hold")
    print(f"# {len(problems)} problems; trained on {len(train)}; judged on {len(judged)} of "
          f"{args.test_device}; dropped layers: {sorted(dropped) or 'none'}", flush=True)
    model = selector.Model.of(selector.train(train), {"arch": "sm90"})
    effs = []
    for p in sorted(judged, key=lambda p: (p.problem.direction.name, p.problem.hi, p.problem.n)):
        allowed, x = p.candidate_rows
        best, _ = model.pick_rows(p.problem.direction.name, x)
        effs.append(p.tflops[allowed[best]] / p.best)
        print(f"{100 * effs[-1]:6.1f}%  {p.problem.describe()}  {p.configs[allowed[best]].describe()}")
    print(f"# mean {100 * statistics.mean(effs):.1f}%, min {100 * min(effs):.1f}% of {len(effs)}")
    return 0


if __name__ == "__main__":   # a database that is missing or not one: one error line
    script_main("held_out_layers", main, {"test_device": "--test_device", "hold": "--hold"})

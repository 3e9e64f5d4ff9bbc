"""How close `convgen tune --top K` comes to a search of the whole space, on the same GPU.

    python benchmarks/tune_top_compare.py --top TOP.sqlite [--whole DB] \
        --model MODEL.json [--json docs/data/tune-top6-h100.json]

TOP.sqlite is a database that `convgen tune --top K` filled from nothing; the whole
database (by default the local store of tuning/data) holds the same problems searched whole. MODEL.json is the model the --top run
ranked with: the script ranks each problem again with it (selector.ranked, on the CPU, as
that GPU's run would) and refuses a model whose first K are not the configs the --top
run measured. For every problem in both, it reports:

- the model's pick alone: the whole search's best time / its time for the model's first;
- the --top best: the whole search's best time / its time for the config the --top run
  chose (both timings from the one whole search, so no run-to-run noise), and, beside
  it, / the --top run's own time for that config (two runs' timings);
- the tuning time of each search (convgen tune's seconds per problem, from its logs).

Mean, P10 and min overall and per direction; a table, and JSON with --json.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

from convgen import report  # noqa: E402
from convtune import selector  # noqa: E402
from convtune import store  # noqa: E402
from convtune import dataset, evaluation  # noqa: E402
from convgen.errors import ConvgenError  # noqa: E402
from convtune.tuning_db import KEY_COLUMNS, TuningDB  # noqa: E402
from convtune.keys import problem_from_key  # noqa: E402

TUNED = re.compile(r"^# convgen tune: (\w+ .*?): (\d+) timed, .* ([0-9.]+) s; ")


def _seconds(log: str | None) -> dict[str, float]:
    """{problem (tune's short text): seconds} of the problems a tune log says it timed. Both
    logs must come from one version of tune's text (one that names the groups, dilation and
    padding pairs with an older one on no problem)."""
    out = {}
    if log:
        with open(log, errors="replace") as f:
            for line in f.read().replace("\r", "\n").splitlines():
                m = TUNED.match(line)
                if m and int(m.group(2)):
                    out[m.group(1)] = float(m.group(3))
    return out


def compare(top_path: str, whole_path: str, model_path: str, skipped: list | None = None) -> list[dict]:
    """One row per problem in both; `skipped` hears of the others (why, and the problem)."""
    rows = []
    skipped = [] if skipped is None else skipped
    with TuningDB(top_path, readonly=True) as top, TuningDB(whole_path, readonly=True) as whole:
        for best in top.rows("SELECT * FROM best"):
            key = {c: best[c] for c in KEY_COLUMNS}
            whole_best = whole.best(key)
            if whole_best is None or whole_best.searched != "space":
                continue   # not (yet) searched whole
            if best["searched"] == "space":   # no model ranked it: the --top run searched it whole
                skipped.append(("searched whole by the --top run", key))
                continue
            times = {c: ms for c, (status, ms, _) in whole.measured(key).items() if status == "ok"}
            measured = top.measured(key)
            top_times = {c: ms for c, (status, ms, _) in measured.items() if status == "ok"}
            p = problem_from_key(key)
            order, _ = selector.ranked(p, dataset.offline_backend(key["arch"], key["device"]),
                                       model_path)
            k = len(measured)
            first = [c.describe() for c in order[:k]]
            if set(first) != set(measured):
                raise ConvgenError(f"{model_path} does not rank {p.describe()} as the --top run "
                                   "did: its first configs are not the ones measured")
            if first[0] not in times or best["config"] not in times:
                # the whole search found the model's first or the --top best invalid or wrong
                skipped.append(("not timed by the whole search", key))
                continue
            rows.append({"problem": p.describe(), "direction": p.direction.name, "k": k,
                         "searched": best["searched"],
                         "pick": whole_best.ms / times[first[0]],
                         "top": whole_best.ms / times[best["config"]],
                         "top_own_time": whole_best.ms / top_times[best["config"]],
                         "same_config": best["config"] == whole_best.config})
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", required=True, help="the database convgen tune --top filled")
    ap.add_argument("--whole", default="", help="a database with the same problems searched whole "
                    "(default: the local store of tuning/data)")
    ap.add_argument("--model", required=True, help="the model file the --top run ranked with")
    ap.add_argument("--top-log", help="the --top run's convgen tune output (for its seconds)")
    ap.add_argument("--whole-log", help="the whole search's convgen tune output")
    ap.add_argument("--json")
    args = ap.parse_args()
    skipped = []
    try:
        whole = store.resolve(args.whole)
        if whole is None:
            raise ConvgenError(f"no whole search to compare with: {store.why_none()} (give --whole)")
        rows = compare(args.top, whole, args.model, skipped)
    except ConvgenError as e:
        print(f"tune_top_compare: error: {e}", file=sys.stderr)
        return 2
    if not rows:
        print("tune_top_compare: error: no problem is in both databases, searched whole in the second",
              file=sys.stderr)
        return 2
    table = {}
    print("| problems | n | model's pick mean / P10 / min | best of its first K | the same, two runs' times |")
    print("| --- | ---: | --- | --- | --- |")
    for name in ("overall", "fwd", "bwd_data", "bwd_weight"):
        mine = [r for r in rows if name in ("overall", r["direction"])]
        table[name] = {w: evaluation._summary([r[w] for r in mine]) for w in ("pick", "top", "top_own_time")}
        cells = [" / ".join(f"{100 * s[v]:.1f}%" for v in ("mean", "p10", "min")) if s["count"] else "-"
                 for s in table[name].values()]
        print(f"| {name} | {len(mine)} | " + " | ".join(cells) + " |")
    top_s, whole_s = _seconds(args.top_log), _seconds(args.whole_log)
    both = sorted(set(top_s) & set(whole_s))
    tuning = {"problems": len(both), "top_s": sum(top_s[p] for p in both),
              "whole_s": sum(whole_s[p] for p in both)}
    if both:
        print(f"tuning time over the {len(both)} problems both logs time: --top {tuning['top_s']:.0f} s, "
              f"whole {tuning['whole_s']:.0f} s ({tuning['whole_s'] / tuning['top_s']:.1f}x)")
    print(f"the --top best is the whole search's best on {sum(r['same_config'] for r in rows)} of {len(rows)}")
    for why, key in skipped:
        print(f"left out, {why}: {problem_from_key(key).describe()}")
    if args.json:
        report.write_json(args.json, {"summary": table, "tuning_seconds": tuning, "per_problem": rows,
                                      "left_out": [{"why": why, "problem": problem_from_key(key).describe()}
                                                   for why, key in skipped],
                                      "model": os.path.basename(args.model),
                                      "command": " ".join(["python", "benchmarks/tune_top_compare.py"]
                                                          + sys.argv[1:])})
    return 0


if __name__ == "__main__":
    sys.exit(main())

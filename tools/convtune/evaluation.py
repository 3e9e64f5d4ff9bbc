"""How well the selector picks: cross-validation with folds grouped by problem shape (or by
layer), so no shape is both learnt and judged; efficiency against the fastest measured
config (the oracle), the fixed rule and the single best config; and `convgen
train-selector` / `eval-selector`, which print and write it."""
from __future__ import annotations

import functools
import itertools
import os
import time
from collections import defaultdict

from convgen import report
from convgen.errors import ConvgenError
from convgen.kernels import config as kconfig
from convtune import selector
from convtune.dataset import GROUPINGS, Problem, _backend_for, families, load_dataset
from convtune.features import DIRECTIONS, coverage, feature_rows
from convtune.selector import TREES, Model, _lightgbm


def group_folds(problems: list[Problem], folds: int, group: str = "shape",
                shuffle: int | None = None) -> list[int]:
    """A fold per problem, whole groups (GROUPINGS) at a time: each group's fold is a hash of
    its key (and of `shuffle`, a seed, for another assignment), so a group keeps its fold
    whatever else the database holds. A deal that balances the folds' rows (sklearn's
    GroupKFold rule) moves most groups whenever one is added: two evaluations' numbers then
    differ more by the deal than by the data (adding 128 problems to 3931 moved 1148 of
    the 1663 H100 problems to another fold in a by-layer evaluation). Hashed
    folds are even only in expectation (4223 problems: within about a tenth of the mean
    by shape, a fifth by layer); with few groups a fold may judge nothing. The hash is
    of the key's text, so the folds are the same in every process."""
    import hashlib
    key = GROUPINGS[group]
    groups = {key(prob) for prob in problems}
    if len(groups) < folds:
        raise ConvgenError(f"{len(groups)} distinct {group}s cannot fill {folds} folds")
    salt = "" if shuffle is None else f"{shuffle}:"

    @functools.cache
    def fold(one: tuple) -> int:
        digest = hashlib.blake2b(f"{salt}{one!r}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % folds
    return [fold(key(prob)) for prob in problems]


def assignments(shuffles: int) -> list[int | None]:
    """group_folds' `shuffle` for the canonical assignment of the groups to folds, then for
    `shuffles` seeded ones: the seeds every evaluation and benchmark of the selector uses."""
    return [None] + list(range(1, shuffles + 1))


def fold_splits(problems: list[Problem], folds: int, group: str = "shape",
                shuffle: int | None = None, judged: list[Problem] | None = None):
    """Per fold f: (f, the indices of `problems` trained on, the indices of `judged` (default
    `problems`) held out), by group_folds. A judged problem whose group `problems` lacks is
    in no fold's training set; fold 0 judges it. No group is ever on both sides. A fold
    that judges nothing (hashed folds of a few groups) is left out: no model for it."""
    key = GROUPINGS[group]
    fold_of = group_folds(problems, folds, group, shuffle)
    if judged is None:
        judged, judged_fold = problems, fold_of
    else:
        fold_of_group = {key(p): g for p, g in zip(problems, fold_of)}
        judged_fold = [fold_of_group.get(key(p), 0) for p in judged]
    for f in range(folds):
        train_ix = [i for i, g in enumerate(fold_of) if g != f]
        test_ix = [i for i, g in enumerate(judged_fold) if g == f]
        if not test_ix:
            continue
        assert not {key(problems[i]) for i in train_ix} & {key(judged[i]) for i in test_ix}
        yield f, train_ix, test_ix


def _summary(effs: list[float]) -> dict:
    import numpy as np
    if not effs:
        return {"count": 0}
    a = np.asarray(effs)
    return {"count": len(effs), "mean": float(a.mean()), "p10": float(np.percentile(a, 10)),
            "min": float(a.min())}


def direction_summaries(picks: list[tuple[str, float]]) -> dict:
    """_summary of (direction, efficiency) pairs, "overall" and per direction that has any."""
    out = {"overall": _summary([e for _, e in picks])}
    for direction in DIRECTIONS:
        s = _summary([e for d, e in picks if d == direction])
        if s["count"]:
            out[direction] = s
    return out


# A family where the fixed rule beat (or tied) the model in cross-validation keeps the
# rule (the seed's advice for its hardest family, tiny M): with fewer problems than this
# the comparison says nothing.
MIN_FAMILY = 5


def rule_families(per_problem: list[dict]) -> list[str]:
    """The families (of at least MIN_FAMILY problems) in which the rule beat the model in
    cross-validation results (evaluate()'s per_problem), or tied it on every problem
    (below). Beating it takes a higher mean efficiency and being ahead on more of the
    family's problems than behind. The second guards against one
    layer the model misjudges pulling a family's mean under the rule's: held out by layer,
    ResNet-50's 7x7 stem (38% at one batch, the rule 85-97%) did so for the stems in one
    fold, and that fold's other stems, where the model was ahead, then took the rule. The
    price: a family the model mostly gets right but now and then badly wrong keeps the
    model, whose misses then set the family's minimum.

    A family where the rule did exactly as well as the model on every problem keeps the
    rule too: the model adds nothing there, and off its data it can only lose. Depthwise
    is such a family (the rule's config is the best measured for every depthwise problem);
    held out by layer, the model left ConvNeXt's 7x7 depthwise bwd_weight at 74-81% where
    the rule has 100%."""
    out = []
    for name in sorted({fam for r in per_problem for fam in r["families"]}):
        rows = [r for r in per_problem if name in r["families"] and r["rule"] is not None]
        wins = sum(r["rule"] > r["model"] for r in rows)
        losses = sum(r["rule"] < r["model"] for r in rows)
        beat = wins > losses and sum(r["rule"] for r in rows) > sum(r["model"] for r in rows)
        if len(rows) >= MIN_FAMILY and (beat or wins == losses == 0):
            out.append(name)
    return out


def _cross_validate(problems: list[Problem], folds: int, trees: int, inner: bool,
                    group: str = "shape", shuffle: int | None = None,
                    test: list[Problem] | None = None) -> tuple[list, list]:
    """(one row per problem, selection seconds): each fold's model picks for the problems of
    the held-out groups (GROUPINGS; `shuffle`: group_folds'). With `inner`, each fold also
    learns, by cross-validation on its own training problems alone, the families that keep
    the rule (rule_families), and the row's "selector" is what a run with that model would
    take. With `test` (the problems of one device, of `problems` or not), the folds' models,
    trained on `problems` as before, pick for the test problems of their held-out groups
    alone (a group `problems` lacks is in no fold's training set: fold 0's model picks for
    it), and each row's "source" is how the best config measured for the same problem on
    another device of `problems` does there (the last such device in sort order where
    there are several; None where there is none)."""
    judged = problems if test is None else test
    if test is not None:
        judged_on = {p.device for p in test}
        source_best = {p.key: p.configs[p.tflops.index(p.best)].describe() for p in problems
                       if p.device not in judged_on}
    per_problem, select_s = [], []
    for f, train_ix, test_ix in fold_splits(problems, folds, group, shuffle, test):
        train_set = [problems[i] for i in train_ix]
        test_set = [judged[i] for i in test_ix]
        model = Model.of(selector.train(train_set, trees), {"arch": problems[0].device.arch})
        single = _single_best(train_set)
        keep_rule = rule_families(_cross_validate(train_set, folds - 1, trees, False, group)[0]) if inner else []
        for prob in test_set:
            backend = _backend_for(prob.device.arch)
            rule = kconfig.default_config(prob.problem, backend, True).describe()
            texts = [c.describe() for c in prob.configs]
            rule_eff = prob.tflops[texts.index(rule)] / prob.best if rule in texts else None
            prob.rankable   # worked out before the timing: a run builds its space anyway
            t0 = time.perf_counter()
            x = None
            if prob.problem.direction.name in model.directions:
                allowed = prob.candidates()
                x = feature_rows(prob.problem, [prob.configs[i] for i in allowed], prob.device)
                best, predicted = model.pick_rows(prob.problem.direction.name, x)
                chosen = allowed[best]
                select_s.append(time.perf_counter() - t0)
            else:
                # the training shapes held no problem of this direction: a run takes the rule
                chosen, predicted = (texts.index(rule) if rule in texts else None), None
            top = _timed_top(model, prob, allowed, x) if x is not None else None
            one = single.get(prob.problem.direction.name)
            single_eff = prob.tflops[texts.index(one)] / prob.best if one in texts else 0.0
            fams = families(prob)
            model_eff = prob.tflops[chosen] / prob.best if chosen is not None else None
            ruled = bool(set(fams) & set(keep_rule)) and rule_eff is not None
            per_problem.append({
                "problem": prob.problem.describe(), "fold": f, "families": fams,
                "best_tflops": prob.best, "chosen": texts[chosen] if chosen is not None else None,
                "predicted_tflops": predicted, "model": model_eff,
                "rule": rule_eff, "single": single_eff,
                "selector": rule_eff if ruled else model_eff, "rule_families": keep_rule,
                "timed_top": top})
            if test is not None:
                src = source_best.get(prob.key)
                per_problem[-1]["source"] = (prob.tflops[texts.index(src)] / prob.best
                                             if src in texts else None)
    return per_problem, select_s


# `convgen tune --top K` measures the model's first K and keeps the fastest: the evaluation
# reports that best's efficiency for these K
TOP_KS = (2, 4, 6, 8)


def _timed_top(model: Model, prob: Problem, allowed: list[int], x) -> dict[str, float]:
    """{K: the best measured of the model's first K candidates / the best of all} (JSON
    keys); x: the candidates' feature rows."""
    first = [allowed[i] for i in itertools.islice(model.order_rows(prob.problem.direction.name, x),
                                                  max(TOP_KS))]
    return {str(k): max(prob.tflops[i] for i in first[:k]) / prob.best for k in TOP_KS}


def timed_top_summaries(per_problem: list[dict]) -> dict:
    """{K: {"overall" and each direction: mean / P10 / min}} of the timed_top efficiencies."""
    out = {}
    for k in map(str, TOP_KS):
        out[k] = {}
        for name in ("overall",) + DIRECTIONS:
            effs = [r["timed_top"][k] for r in per_problem if r.get("timed_top")
                    and (name == "overall" or name in r["families"])]
            if effs:   # a direction the data lacks has no row (the shuffled means read each)
                out[k][name] = _summary(effs)
    return out


def evaluate(problems: list[Problem], folds: int = 5, trees: int = TREES, group: str = "shape",
             shuffles: int = 0, test: list[Problem] | None = None) -> dict:
    """Cross-validation grouped by shape (or by layer, GROUPINGS): each fold's model picks a
    config for every problem of the held-out groups; efficiency = that config's measured
    TFLOPS / the best measured.
    Beside it: the fixed rule (kernels/config.default_config), the single config that does
    best on the training folds per direction, and the selector as a run uses it (the
    model, or the rule in the families where the training folds' own cross-validation
    preferred it). `overall` is the selector's. With `shuffles`, the selector's numbers
    again over that many other assignments of the groups to folds (group_folds' seeds 1,
    2, ...) and their mean with the first's (`shuffled`). With `test` (_cross_validate's),
    the numbers are the test problems', and `source` is another device's best config on
    them: how much the device changes which config is fastest."""
    per_problem, select_s = _cross_validate(problems, folds, trees, True, group, test=test)
    judged = problems if test is None else test
    out = {"folds": folds, "group": group, "problems": len(judged),
           "shapes": len({p.shape for p in judged}), "layers": len({p.layer for p in judged}),
           "rows": sum(len(p.configs) for p in judged),
           # None where the models learnt none of the judged problems' directions (the rule's)
           "selection_ms": 1e3 * sorted(select_s)[len(select_s) // 2] if select_s else None,
           "selection_ms_max": 1e3 * max(select_s) if select_s else None}
    names = ["overall"] + sorted({fam for r in per_problem for fam in r["families"]})
    table = {}
    for name in names:
        rows = [r for r in per_problem if name == "overall" or name in r["families"]]
        table[name] = {who: _summary([r[who] for r in rows if r[who] is not None])
                       for who in ("selector", "model", "rule", "single")
                       + (("source",) if test is not None else ())}
    out["overall"] = {k: table["overall"]["selector"][k] for k in ("mean", "p10", "min")}
    if test is not None:
        out["test_device"] = ", ".join(sorted({p.device.name for p in test}))
    out["families"] = table
    out["timed_top"] = timed_top_summaries(per_problem)
    if shuffles:
        seeds = assignments(shuffles)[1:]
        runs = [per_problem] + [_cross_validate(problems, folds, trees, True, group, seed, test)[0]
                                for seed in seeds]
        each = [{name: _selector_summary(rows, name) for name in names} for rows in runs]
        out["shuffled"] = {"assignments": len(runs), "seeds": seeds,
                           "families": {name: _mean_summary([one[name] for one in each])
                                        for name in names},
                           "each": each}
        tops = [timed_top_summaries(rows) for rows in runs]
        out["shuffled"]["timed_top"] = {k: {name: _mean_summary([t[k][name] for t in tops])
                                            for name in tops[0][k]} for k in tops[0]}
    out["prediction_error"] = _prediction_error(per_problem)
    out["per_problem"] = per_problem
    return out


def _selector_summary(per_problem: list[dict], family: str) -> dict:
    """The selector's mean, P10 and min in a family (or "overall") of one cross-validation."""
    return _summary([r["selector"] for r in per_problem if r["selector"] is not None
                     and (family == "overall" or family in r["families"])])


def _mean_summary(summaries: list[dict]) -> dict:
    """Mean, P10 and min, each averaged over the summaries (one per assignment of groups
    to folds)."""
    return {"count": summaries[0]["count"],
            **{k: sum(s[k] for s in summaries) / len(summaries) for k in ("mean", "p10", "min")}}


def averaged_percent(runs: list[dict]) -> dict[str, list[float]]:
    """[mean, P10, min] in percent (2 decimals) of each direction_summaries key, averaged
    over the runs (one per assignment of the shapes to folds): what the sweeps of
    benchmarks/ print."""
    out = {}
    for direction in runs[0]:
        m = _mean_summary([one[direction] for one in runs])
        out[direction] = [round(100 * m[k], 2) for k in ("mean", "p10", "min")]
    return out


def _prediction_error(per_problem: list[dict]) -> dict:
    """How far the `#` line's predicted TFLOPS (the speed model's, of the model's pick) is
    from the pick's measured TFLOPS: median and P90 of |predicted - measured| / measured."""
    import numpy as np
    errors = [abs(r["predicted_tflops"] - r["model"] * r["best_tflops"]) / (r["model"] * r["best_tflops"])
              for r in per_problem if r["predicted_tflops"] is not None and r["model"]]
    if not errors:
        return {"count": 0, "median": None, "p90": None}
    return {"count": len(errors), "median": float(np.percentile(errors, 50)),
            "p90": float(np.percentile(errors, 90))}


def _single_best(problems: list[Problem]) -> dict[str, str]:
    """Per direction, the config with the highest mean efficiency over these problems (0
    where it was not measured or not valid)."""
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    count: dict[str, int] = defaultdict(int)
    for prob in problems:
        d = prob.problem.direction.name
        count[d] += 1
        for cfg, t in zip(prob.configs, prob.tflops):
            sums[d][cfg.describe()] += t / prob.best
    return {d: max(s.items(), key=lambda kv: (kv[1], kv[0]))[0] for d, s in sums.items()}


def _pct(summary: dict, what: str) -> str:
    return f"{100 * summary[what]:.1f}%" if summary.get("count") else "-"


def evaluation_table(result: dict) -> list[str]:
    """The evaluation as a Markdown table: per family, the selector's (what a run takes),
    the model's alone, the fixed rule's and the single best config's mean / P10 / min
    efficiency (fractions of the oracle); judged on one device's problems (--test_device),
    also the best config another device measured for them (of how many: fewer where the
    other device measured fewer)."""
    source = "test_device" in result
    lines = ["| family | problems | selector mean | P10 | min | model mean | P10 | min | "
             "rule mean | P10 | min | single best mean |"
             + (" other device's best mean | P10 | min |" if source else ""),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
             + (" ---: | ---: | ---: |" if source else "")]
    for name, row in result["families"].items():
        c, m, r, s = row["selector"], row["model"], row["rule"], row["single"]
        lines.append(f"| {name} | {m['count']} | {_pct(c, 'mean')} | {_pct(c, 'p10')} | "
                     f"{_pct(c, 'min')} | {_pct(m, 'mean')} | {_pct(m, 'p10')} | "
                     f"{_pct(m, 'min')} | {_pct(r, 'mean')} | {_pct(r, 'p10')} | {_pct(r, 'min')} | "
                     f"{_pct(s, 'mean')} |"
                     + (f" {_pct(row['source'], 'mean')} of {row['source']['count']} |"
                        f" {_pct(row['source'], 'p10')} | {_pct(row['source'], 'min')} |"
                        if source else ""))
    return lines


def on_device(problems: list[Problem], name: str | None, what: str) -> list[Problem]:
    """The problems measured on the device `name` (all when None); an error naming the
    devices there are when none is (`what`: the flag, for the message)."""
    if name is None:
        return problems
    out = [p for p in problems if p.device.name == name]
    if not out:
        there = sorted({p.device.name for p in problems})
        raise ConvgenError(f"no measurements on '{name}' (the database has: {', '.join(there)})",
                           field=what)
    return out


def main(command: str, args: dict) -> int:
    """convgen train-selector / eval-selector (convtune.commands.parse_selector gives `args`)."""
    # every path is checked before the work: a bad one costs nothing and leaves nothing
    out = args["out"] or os.path.join(selector.MODELS_DIR, f"{args['arch']}.json")
    if command == "eval-selector" and args["json"]:
        report.check_paths(args["json"], None)
    if command == "train-selector" and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise ConvgenError(f"the folder of '{out}' does not exist", field="out")
    try:
        warm = Model.load(args["warm_start"]) if command == "train-selector" and args["warm_start"] else None
    except ConvgenError as e:
        raise ConvgenError(str(e), field="warm_start") from None
    if warm is not None and warm.arch != args["arch"]:
        raise ConvgenError(f"'{args['warm_start']}' is a model for {warm.arch}, not {args['arch']}",
                           field="warm_start")
    if command == "train-selector" and args["test_device"] is not None:
        raise ConvgenError("only eval-selector judges picks on another device", field="test_device")
    if args["folds"] < 2:   # one fold would hold everything out and train on nothing
        raise ConvgenError(f"cross-validation needs at least 2 folds, not {args['folds']}",
                           field="folds")
    if _lightgbm() is None:   # before the minutes a large database takes to read
        raise ConvgenError(f"{command} needs the lightgbm package (pip install -c "
                           "constraints.txt lightgbm)")
    problems = load_dataset(args["db"], args["arch"])
    if not problems:
        raise ConvgenError(f"the tuning database '{args['db']}' has no problem on {args['arch']} "
                           "whose whole tuning space is measured (a best of `convgen tune --top` "
                           "or --max-configs alone teaches nothing; `convgen tuning-stats` "
                           "counts what there is)")
    test = (on_device(problems, args["test_device"], "test_device")
            if args["test_device"] is not None else None)
    problems = on_device(problems, args["device"], "device")
    devices = sorted({p.device.name for p in problems})
    shapes = len({p.shape for p in problems})
    rows = sum(len(p.configs) for p in problems)
    report.say(f"{command}: {len(problems)} problems ({shapes} shapes of "
               f"{len({p.layer for p in problems})} layers, {rows} measured configs) "
               f"on {args['arch']} ({', '.join(devices)}) "
               f"from {args['db']}")
    if command == "eval-selector":
        t0 = time.perf_counter()
        result = evaluate(problems, args["folds"], args["trees"] or TREES, args["group"],
                          args["shuffles"], test)
        result.update({"arch": args["arch"], "database": os.path.basename(args["db"]),
                       "devices": devices, "trees": args["trees"] or TREES, "seconds": time.perf_counter() - t0})
        if test is not None:
            report.say(f"eval-selector: judged on the {len(test)} problems measured on "
                       f"{args['test_device']}, by models trained on {', '.join(devices)}")
        for line in evaluation_table(result):
            print(line)
        if result["selection_ms"] is None:
            report.say("eval-selector: no model picked: the training problems hold none of the "
                       "judged problems' directions, and each took the rule")
        else:
            report.say(f"eval-selector: selection {result['selection_ms']:.2f} ms per problem "
                       f"(median; the slowest {result['selection_ms_max']:.2f} ms), "
                       f"{args['folds']} folds by {args['group']} in {result['seconds']:.0f} s")
        if "shuffled" in result:
            shuffled = result["shuffled"]
            report.say(f"eval-selector: the selector's mean / P10 / min averaged over "
                       f"{shuffled['assignments']} assignments of the {args['group']}s to folds "
                       f"(the table's and {len(shuffled['seeds'])} seeded): " + "; ".join(
                           f"{name} " + " / ".join(f"{100 * one[k]:.2f}%" for k in ("mean", "p10", "min"))
                           for name, one in shuffled["families"].items()
                           if name in ("overall",) + DIRECTIONS))
        top = result.get("shuffled", result)["timed_top"]
        if all("overall" in one for one in top.values()):
            report.say("eval-selector: the best measured of the model's first K (tune --top K), "
                       "mean / P10 / min" + (" averaged likewise" if "shuffled" in result else "")
                       + ": " + "; ".join(f"K={k} " + " / ".join(
                           f"{100 * one['overall'][w]:.2f}%" for w in ("mean", "p10", "min"))
                           + " (lowest direction min "
                           + f"{100 * min(one[d]['min'] for d in DIRECTIONS if d in one):.1f}%)"
                           for k, one in top.items()))
        error = result["prediction_error"]
        if error["count"]:
            report.say(f"eval-selector: the predicted TFLOPS of a pick is off its measured TFLOPS "
                       f"by {100 * error['median']:.0f}% (median), {100 * error['p90']:.0f}% (P90)")
        if args["json"]:
            try:
                report.write_json(args["json"], result)
            except OSError as e:
                raise ConvgenError(f"cannot write '{args['json']}': {e.strerror}", field="json") from None
        return 0
    t0 = time.perf_counter()
    boosters = selector.train(problems, args["trees"] or TREES, warm)
    trees = max(b.num_trees() for b in boosters["speed"].values())
    # the families where the rule beat or tied the model in cross-validation keep the rule
    keep_rule = rule_families(_cross_validate(problems, args["folds"], args["trees"] or TREES,
                                              False)[0]) if len({p.shape for p in problems}) >= args["folds"] else []
    meta = {"arch": args["arch"], "problems": len(problems), "shapes": shapes, "rows": rows,
            "trees": trees, "rank_trees": boosters["rank"].num_trees(),
            "directions": sorted(boosters["speed"]), "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
            "database": os.path.basename(args["db"]),
            "devices": devices,
            "warm_start": os.path.basename(args["warm_start"]) if warm else None,
            "rule_families": keep_rule,
            # a problem of another type or channel order keeps the rule: the model knows none
            "coverage": sorted({coverage(p.problem) for p in problems})}
    Model.of(boosters, meta).save(out)
    report.say(f"train-selector: {meta['rank_trees']} ranking trees, {trees} speed trees per "
               f"direction ({', '.join(meta['directions'])}) in "
               f"{time.perf_counter() - t0:.1f} s "
               f"-> {out} ({os.path.getsize(out) // 1024} KiB); the rule kept for: "
               f"{', '.join(keep_rule) or 'no family'}")
    return 0

"""The learned config selector: LightGBM models that rank each problem's candidate configs
and predict their speed, so a run without -perf_config and without a tuned entry takes the
config ranked first instead of the fixed rule's.

The idea is CK's dispatcher heuristics (docs/config-selection.md): a regression on
log1p(TFLOPS) over features of the problem, the config and how the two fit, one per
direction, and beside them one ranking model over the same features, trained on every
problem's configs in order of speed, which picks. Why these choices, and the numbers
behind each setting: docs/config-selection.md ("Model settings").

    features.py           the feature table (FEATURES) and a (problem, config) row of it
    dataset.py            load_dataset(db): the database's finished problems, their configs' speeds
    train(dataset)        fitted models: one ranking lightgbm.Booster, a speed one per direction
    Model                 a model file: save, load, rank a problem's candidates
    choose(p, backend)    the run-time question: (config, predicted TFLOPS) or why not
    evaluation.py         grouped cross-validation: efficiency against the oracle, the
                          fixed rule and the single best config; train-selector, eval-selector

A model file is JSON: the schema name and version, the arch it is for, the feature names
it was trained on (a model whose features differ from this module's is refused), what it
was trained on, and LightGBM's own text models: "rank", one for every direction, and
"speed", one per direction it was trained on. `tuning/models/<arch>.json` is the default.
"""
from __future__ import annotations

import functools
import json
import math
import os

from convgen import REPO_ROOT, report
from convgen.errors import ConvgenError
from convgen.kernels import config as kconfig
from convtune import lgbm_c
from convtune import space as tuning_space
from convtune.dataset import Problem, short_chain
from convtune.features import (DIRECTIONS, FEATURE_NAMES, Device, coverage, device_of, families_of,
                               feature_rows)

SCHEMA_NAME = "convgen-selector"
SCHEMA_VERSION = 4   # 4: one ranking model, a speed model per direction; 3: both per direction
MODELS_DIR = os.path.join(REPO_ROOT, "tuning", "models")

# LightGBM settings, each the smallest that picked as well as larger ones in cross-validation
# (docs/config-selection.md, "Model settings", has the measurements): a pick walks every tree
# over its few kept candidates with the model cold in the cache, most of its time.
# Deterministic so that a retrain on the same data writes the same file.
TRAIN_PARAMS = {"objective": "regression", "learning_rate": 0.2, "num_leaves": 31,
                "min_data_in_leaf": 5, "feature_fraction": 0.9, "lambda_l2": 1.0,
                "verbosity": -1, "seed": 1, "deterministic": True, "force_row_wise": True,
                "num_threads": 1}
TREES = 75
# The pick is a ranking model's (LightGBM's lambdarank, the problem's configs one query,
# relevance = RANK_LEVELS * TFLOPS / the problem's best, rounded; gains grow by 2^(1/3) a
# level, the top 8 weighed): a pick needs only each problem's order, where a regression's
# error is spread over every config. The log1p(TFLOPS) regression stays for the TFLOPS a run
# reports for its pick.
RANK_LEVELS = 30
# Deeper trees than the speed model's: on thousands of problems 127 leaves rank better than
# 31 (benchmarks/rank_params_sweep.py)
RANK_PARAMS = {**TRAIN_PARAMS, "num_leaves": 127, "objective": "lambdarank",
               "lambdarank_truncation_level": 8,
               "label_gain": [2 ** (level / 3) - 1 for level in range(RANK_LEVELS + 1)]}
MODEL_KINDS = ("rank", "speed")   # what picks; what says how fast the pick is predicted to run
# A pick ranks every candidate by the first PREFILTER_TREES trees and lets the whole model
# order the PREFILTER_KEEP ranked first: a fraction of the tree walks, picking as well as
# the whole model on every candidate (benchmarks/prefilter_keep_sweep.py). The whole model's
# first of those that `config.validate` and the chain bound accept is the pick (they are
# asked in that order, so most picks validate one config; where none of the kept passes,
# the whole model orders the rest).
PREFILTER_TREES = 30
PREFILTER_KEEP = 8
WARM_TREES = 40   # added on top of a warm start's trees


# ---- training and the model file ------------------------------------------------------------

def _matrix(problems: list[Problem]):
    """(features, log1p(TFLOPS), rank relevance, configs per problem) of every row."""
    import numpy as np
    rows, target, relevance = [], [], []
    for prob in problems:
        rows.append(feature_rows(prob.problem, prob.configs, prob.device))
        target += [math.log1p(t) for t in prob.tflops]
        relevance += [round(RANK_LEVELS * t / prob.best) for t in prob.tflops]
    return (np.concatenate(rows), np.asarray(target, dtype=np.float64),
            np.asarray(relevance, dtype=np.int32), [len(prob.configs) for prob in problems])


def _lightgbm():
    try:
        import lightgbm
    except ImportError:
        return None
    return lightgbm


def train(problems: list[Problem], trees: int = TREES, warm_start: "Model | None" = None) -> dict:
    """{"rank": booster, "speed": {direction: booster}}: LightGBM fitted on every (problem,
    config) row, one ranking of each problem's configs for every direction (RANK_PARAMS,
    rank_trees(trees) trees) and a regression on log1p(TFLOPS) per direction; a warm start
    continues its ranking model, and the speed models of the directions with new rows."""
    import numpy as np
    lgb = _lightgbm()
    if lgb is None:
        raise ConvgenError("training a selector needs the lightgbm package (pip install "
                           "-c constraints.txt lightgbm)")
    if not problems:
        raise ConvgenError("no measurements to train on")

    def fit(params, x, label, groups, rounds, old_text):
        data = lgb.Dataset(x, label, group=groups, feature_name=list(FEATURE_NAMES),
                           free_raw_data=True)
        init = lgb.Booster(model_str=old_text) if old_text else None
        return lgb.train(params, data, num_boost_round=rounds, init_model=init,
                         keep_training_booster=False)
    old = warm_start.texts if warm_start else {"rank": None, "speed": {}}
    x, y, relevance, groups = _matrix(problems)
    # the ranking learns every direction's problems, each problem still one query
    boosters = {"rank": fit(RANK_PARAMS, x, relevance, groups,
                            rank_trees(WARM_TREES if old["rank"] else trees), old["rank"]),
                "speed": {}}
    row_direction = np.repeat([p.problem.direction.name for p in problems], groups)
    for direction in DIRECTIONS:
        mine = row_direction == direction
        before = old["speed"].get(direction)
        if mine.any():
            boosters["speed"][direction] = fit(TRAIN_PARAMS, x[mine], y[mine], None,
                                               WARM_TREES if before else trees, before)
        elif before:   # no new data for it: the warm start's model stays as it was
            boosters["speed"][direction] = lgb.Booster(model_str=before)
    return boosters


def rank_trees(trees: int) -> int:
    """The ranking model's trees: `trees` for each direction it ranks (225 for 75), as many
    as the three per-direction ranking models it replaced had together. One ranking for the three
    directions learns from all 1095 problems where each had a third: six shufflings of the
    shapes into 5 folds, mean / P10 of the oracle 98.25% / 94.57% against 97.98% / 93.98%
    for one model of 75 trees per direction and 98.14% / 94.12% for one of 225 per
    direction (more trees alone are not what moved it)."""
    return len(DIRECTIONS) * trees


class Model:
    """A trained selector for one arch: LightGBM's text models (the ranking that picks, for
    every direction; the regression per direction that predicts TFLOPS), predicted through
    its C library (lgbm_c), so a run never imports the lightgbm package."""

    def __init__(self, texts: dict, meta: dict, path: str | None = None):
        self.texts = {"rank": texts["rank"], "speed": dict(texts["speed"])}   # "speed": {direction: text}
        self.meta = meta
        self.path = path
        self._boosters: dict = {}

    @classmethod
    def of(cls, boosters: dict, meta: dict) -> "Model":
        """The model of the boosters that train() fitted."""
        return cls({"rank": boosters["rank"].model_to_string(),
                    "speed": {d: b.model_to_string() for d, b in boosters["speed"].items()}}, meta)

    @property
    def directions(self) -> tuple:
        """The directions it was trained on (a speed model each): the others keep the rule."""
        return tuple(self.texts["speed"])

    def booster(self, direction: str, kind: str = "rank"):
        """lgbm_c.Booster of the ranking model or a direction's speed model, loaded on first
        use (ImportError without lightgbm)."""
        key = (direction if kind == "speed" else None, kind)
        if key not in self._boosters:
            text = self.texts["speed"][direction] if kind == "speed" else self.texts["rank"]
            self._boosters[key] = lgbm_c.Booster(text)
        return self._boosters[key]

    @property
    def arch(self) -> str:
        return self.meta["arch"]

    def rule_kept_for(self, problem) -> set:
        """The problem's families for which this model keeps the rule (rule_families)."""
        return set(self.meta.get("rule_families") or ()) & set(families_of(problem))

    def save(self, path: str) -> None:
        """Written whole or not at all (report.write_json)."""
        doc = {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION, **self.meta,
               "features": list(FEATURE_NAMES), "models": self.texts}
        try:
            report.write_json(path, doc)
        except OSError as e:
            raise ConvgenError(f"cannot write the selector model '{path}': {e.strerror}",
                               field="selector") from None
        self.path = path

    @classmethod
    def load(cls, path: str) -> "Model":
        def damaged(why: str) -> ConvgenError:
            return ConvgenError(f"selector model '{path}' cannot be used: {why}", field="selector")
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as e:
            raise damaged(e.strerror or str(e)) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise damaged(f"not a model file ({e})") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_NAME:
            raise damaged("not a convgen selector model")
        if doc.get("version") != SCHEMA_VERSION:
            raise damaged(f"schema version {doc.get('version')}; this convgen reads {SCHEMA_VERSION}")
        if doc.get("features") != list(FEATURE_NAMES):
            raise damaged("it was trained on other features than this convgen computes "
                          "(convgen train-selector makes a new one)")
        texts = doc.get("models")
        speed = texts.get("speed") if isinstance(texts, dict) else None
        if (not isinstance(texts, dict) or set(texts) != set(MODEL_KINDS)
                or not isinstance(texts["rank"], str) or not isinstance(speed, dict) or not speed
                or set(speed) - set(DIRECTIONS) or not all(isinstance(v, str) for v in speed.values())):
            raise damaged("it holds no LightGBM ranking model and speed model per direction")
        meta = {k: v for k, v in doc.items() if k not in ("schema", "version", "features", "models")}
        model = cls(texts, meta, path)
        for direction, kind in [(None, "rank")] + [(d, "speed") for d in speed]:
            name = f"{direction} {kind}" if direction else kind
            try:
                booster = model.booster(direction, kind)
            except lgbm_c.LightGBMError as e:
                raise damaged(f"its {name} LightGBM model does not parse "
                              f"({' '.join(str(e).split())[:200]})") from None
            if booster.num_features != len(FEATURE_NAMES):
                raise damaged(f"its {name} LightGBM model reads "
                              f"{booster.num_features} features, not {len(FEATURE_NAMES)}")
        return model

    def predict(self, p, configs, dev: Device):
        """Predicted TFLOPS of each config for problem p (its direction's speed model)."""
        import numpy as np
        x = np.asarray(feature_rows(p, configs, dev), dtype=np.float64)
        return np.expm1(self.booster(p.direction.name, "speed").predict(x))

    def pick(self, p, configs, dev: Device) -> tuple[int, float]:
        """(index, predicted TFLOPS) of the config the model picks for problem p."""
        import numpy as np
        return self.pick_rows(p.direction.name,
                              np.asarray(feature_rows(p, configs, dev), dtype=np.float64))

    def pick_rows(self, direction: str, x, accept=None) -> tuple[int, float] | None:
        """pick() of the candidates' feature rows x: the first of order_rows(direction, x)
        that `accept(i)` takes (every one when accept is None), None when it takes none.
        Its TFLOPS as the speed model predicts them."""
        import numpy as np
        best = next((i for i in self.order_rows(direction, x) if accept is None or accept(i)), None)
        if best is None:
            return None
        return best, float(np.expm1(self.booster(direction, "speed").predict_one(x[best])))

    def order_rows(self, direction: str, x):
        """The candidates (row indices of x) in the order a pick asks for them, lazily: the
        PREFILTER_KEEP that the ranking model's first PREFILTER_TREES trees rank first, in
        the whole model's order; then the rest in the whole model's order (their trees
        are walked only when a caller gets that far)."""
        import numpy as np
        booster = self.booster(direction)
        if len(x) > PREFILTER_KEEP:
            start = PREFILTER_TREES
            first = booster.predict(x, start)
            kept = np.argsort(-first, kind="stable")
            kept, rest = kept[:PREFILTER_KEEP], kept[PREFILTER_KEEP:]
        else:
            start, first, kept, rest = 0, np.zeros(len(x)), np.arange(len(x)), np.arange(0)
        for group in (kept, rest):
            if not len(group):
                continue
            # the whole model's score: the prefilter's trees' sum and the trees after them
            score = first[group] + booster.predict(x[group], start=start)
            yield from (int(i) for i in group[np.argsort(-score, kind="stable")])


# ---- run-time selection ---------------------------------------------------------------------

def resolve(given: str | None, arch: str) -> str | None:
    """The model file a run uses: `given` ("" for the default: $CONVGEN_SELECTOR, else
    tuning/models/<arch>.json; None for none). The shipped default that does not exist is
    none; a file named by -selector or $CONVGEN_SELECTOR must exist (model_for says so)."""
    if given is None:
        return None
    path = given or os.environ.get("CONVGEN_SELECTOR") or os.path.join(MODELS_DIR, f"{arch}.json")
    if not given and not os.environ.get("CONVGEN_SELECTOR") and not os.path.exists(path):
        return None
    return path


_LOADED: dict[str, Model] = {}


def load(path: str) -> Model:
    """A model, loaded once per process."""
    if path not in _LOADED:
        _LOADED[path] = Model.load(path)
    return _LOADED[path]


def choose(problem, backend, given: str | None = ""):
    """(config, predicted TFLOPS, model path), or (None, why not, None): the candidate of
    the tuning space (convtune/space.configs) the model ranks first."""
    model, path, why = model_for(problem, backend, given)
    if model is None:
        return None, why, None
    kept = model.rule_kept_for(problem)
    if kept:
        return None, (f"{os.path.basename(path)} keeps the rule for {', '.join(sorted(kept))} "
                      "problems (it beat or tied the model in cross-validation)"), None
    if kconfig.direct_fits(problem):
        return None, (f"groups of at most {kconfig.MAX_GROUP_CHANNELS} channels take the direct "
                      f"kernels' rule ({os.path.basename(path)} has no feature for them)"), None
    import numpy as np
    space = tuning_space.configs(problem, backend)
    x = np.asarray(feature_rows(problem, space, device_of(backend)),
                   dtype=np.float64)
    picked = pick_runnable(model, problem, backend, space, x)
    if picked is None:
        return None, "no config of the tuning space runs here", None
    return space[picked[0]], picked[1], path


def model_for(problem, backend, given: str | None):
    """(model, its path, None), or (None, None, why no model ranks this problem); a model
    file named but missing, damaged or for another arch is an error."""
    if given is None:
        return None, None, "selector off"
    path = resolve(given, backend.arch)
    if path is None:
        return None, None, f"no selector model for {backend.arch}"
    try:
        model = load(path)
    except ImportError:
        return None, None, "the selector needs lightgbm, which is not installed"
    except ConvgenError as e:
        if not given:   # the path came from $CONVGEN_SELECTOR, not from -selector
            raise ConvgenError(f"$CONVGEN_SELECTOR: {e}") from None
        raise
    if model.arch != backend.arch:
        raise ConvgenError(f"selector model '{path}' is for {model.arch}, not {backend.arch}",
                           field="selector")
    if problem.direction.name not in model.directions:
        return None, None, f"{os.path.basename(path)} has no {problem.direction.name} model"
    kind = coverage(problem)
    if "coverage" in model.meta and kind not in model.meta["coverage"]:
        return None, None, f"{os.path.basename(path)} was trained on no {kind} problem"
    return model, path, None


def ranked(problem, backend, given: str | None = "") -> tuple[list, str]:
    """(configs, model file): the configs of the tuning space a selection may pick (as
    pick_runnable narrows it: valid here, of short chains where any is) in the order it
    asks for them, so what a run takes first (`convgen tune --top` measures the first
    few): choose()'s pick, or the rule's config in a family the model keeps the rule for;
    or ([], why none)."""
    model, path, why = model_for(problem, backend, given)
    if model is None:
        return [], why
    space = tuning_space.configs(problem, backend)
    valid = {i for i, cfg in enumerate(space) if runs_here(cfg, problem, backend)}
    if not valid:
        return [], "no config of the tuning space runs here"
    allowed = {i for i in valid if short_chain(problem, space[i])} or valid
    import numpy as np
    x = np.asarray(feature_rows(problem, space, device_of(backend)),
                   dtype=np.float64)
    order = [space[i] for i in model.order_rows(problem.direction.name, x) if i in allowed]
    if kconfig.direct_fits(problem):
        # the model knows no direct config: those first, in the space's order (the rule's first)
        first = [space[i] for i in sorted(valid) if space[i].direct]
        order = first + [c for c in order if not c.direct]
    elif model.rule_kept_for(problem):
        rule = kconfig.choose(problem, backend, True)
        order = [rule] + [c for c in order if c != rule]
    return order, path


def pick_runnable(model: Model, problem, backend, space: list, x) -> tuple[int, float] | None:
    """model.pick_rows over the configs of `space` a selection may pick: those
    kernels/config.validate accepts here (the model never learnt that the others fail),
    of short chains (short_chain) where any is. Asked in the model's order of the few
    candidates the pick looks at (validation costs more than the trees)."""
    @functools.cache
    def valid(i: int) -> bool:
        return runs_here(space[i], problem, backend)
    direction = problem.direction.name
    return (model.pick_rows(direction, x, lambda i: valid(i) and short_chain(problem, space[i]))
            or model.pick_rows(direction, x, valid))


def runs_here(cfg, problem, backend) -> bool:
    """Whether kernels/config.validate accepts cfg for the problem on this backend."""
    try:
        kconfig.validate(cfg, problem, backend, True)
    except ConvgenError:
        return False
    return True

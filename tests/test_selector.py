"""The learned config selector (selector.py): training and evaluation on recorded H100
measurements (tests/data/selector-measurements.jsonl, no GPU needed), the grouping of
the cross-validation, the model file, and run-time selection with and without lightgbm."""
import contextlib
import io
import json
import os
import subprocess
import sys

import pytest

from convtune import selector
from convtune import dataset, evaluation, features
from convgen.backend import Backend
from convgen import picks
from convgen.errors import ConvgenError
from convgen.kernels import config as kconfig
from convgen.kernels import geometry
from convtune.tuning_db import KEY_COLUMNS, TuningDB
from convtune.keys import problem_from_key
from convtune import space as tuning_space

pytest.importorskip("lightgbm")

FIXTURE = os.path.join(os.path.dirname(__file__), "data", "selector-measurements.jsonl")
H100 = {"arch": "sm90", "device": "NVIDIA H100 80GB HBM3", "triton": "3.6.0", "kernel": "fixture"}
SM90 = Backend("cuda", "sm90", 32)
TREES = 60


def _build_db(path, rows, finished=True):
    """The measurements in a database; with `finished`, each problem's fastest as its best
    row, as a tune run that went through its space leaves it."""
    fastest = {}
    with TuningDB(str(path)) as db:
        for r in rows:
            key = {c: r[c] if c in r else H100[c] for c in KEY_COLUMNS}
            db.record(key, r["config"], r["status"], ms=r["ms"], tflops=r["tflops"])
            k = tuple(key.items())
            if r["status"] == "ok" and r["tflops"] and r["tflops"] > fastest.get(k, (0,))[0]:
                fastest[k] = (r["tflops"], r["config"], r["ms"])
        if finished:
            for k, (tflops, config, ms) in fastest.items():
                db.set_best(dict(k), config, ms, tflops, "fixture")
    return str(path)


def _rows():
    with open(FIXTURE) as f:
        return [json.loads(line) for line in f if not line.startswith("#")]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return _build_db(tmp_path_factory.mktemp("sel") / "t.sqlite", _rows())


@pytest.fixture(scope="module")
def problems(db):
    return dataset.load_dataset(db, "sm90")


@pytest.fixture(scope="module")
def model(problems):
    return selector.Model.of(selector.train(problems, TREES), {"arch": "sm90"})


@pytest.fixture
def on_h100(monkeypatch):
    """Backend questions a CPU machine cannot answer as an H100 would."""
    monkeypatch.setattr(Backend, "device_name", lambda self: H100["device"])
    monkeypatch.setattr(Backend, "units", lambda self: 132)


def test_dataset_holds_every_recorded_problem_with_its_measurements(problems):
    rows = _rows()
    keys = {(r["direction"], r["dtype"], r["n"], r["c"], r["k"], r["h"], r["y"], r["stride_h"]) for r in rows}
    assert len(problems) == len(keys) >= 40
    for prob in problems:
        assert len(prob.configs) == len(prob.tflops) and prob.best > 0
        assert all(t >= 0 for t in prob.tflops)
    # a config that failed to compile counts as 0 TFLOPS (learnt as slow), not dropped
    failed = sum(r["status"] != "ok" for r in rows)
    assert sum(t == 0 for p in problems for t in p.tflops) == failed


def test_a_finished_retime_drops_the_fast_per_launch_rows_it_left(tmp_path):
    # per-launch times under tuning_db.PER_LAUNCH_TRUSTED_MS may be the host's (a 10 us config
    # stored at 75 us). Where every config of today's space has been timed as a graph,
    # those left (configs of older spaces) go; slow rows and failures stay. A problem
    # with only some graph rows, or none, keeps every row: they are its only times
    import sqlite3

    from convtune import tuning_db
    shape = {"direction": "bwd_weight", "dtype": "f16", "layouts": "nhwgc/gkyxc/nhwgk", "n": 1,
             "c": 64, "k": 64, "g": 1, "h": 56, "w": 56, "y": 1, "x": 1, "stride_h": 1,
             "stride_w": 1, "pad": "0,0,0,0", "dil_h": 1, "dil_w": 1}
    p = problem_from_key(shape)
    space = [c.describe() for c in tuning_space.configs(p, dataset._backend_for("sm90"))]
    old_fast, old_slow, old_failed, old_wrong = (
        f"block_m=64,block_n=64,block_k=128,num_warps={w},num_stages=3,split={s},group_m=8,tma=1"
        for w, s in ((4, 14), (4, 56), (8, 14), (8, 56)))
    assert not {old_fast, old_slow, old_failed, old_wrong} & set(space)
    old = [(old_fast, "ok", 0.075), (old_slow, "ok", 0.9), (old_failed, "invalid", None),
           (old_wrong, "wrong", 0.02)]
    since, before = tuning_db.GRAPH_TIMED_SINCE, "2026-11-20T00:00:00"

    def rows(c, graph_timed):
        return ([{**shape, "c": c, "config": t, "status": "ok", "ms": 0.011, "tflops": 2.3,
                  "at": since if t in graph_timed else before} for t in space]
                + [{**shape, "c": c, "config": t, "status": st, "ms": ms,
                    "tflops": ms and 0.0257 / ms, "at": before} for t, st, ms in old])
    done = rows(64, set(space))          # retimed: every config of the space
    partial = rows(128, {space[0]})      # one graph row (as fwd's tail configs were)
    untouched = rows(32, set())          # timed per launch alone
    db = _build_db(tmp_path / "t.sqlite", done + partial + untouched)
    with sqlite3.connect(db) as con:
        con.executemany("UPDATE measurements SET measured_at = ? WHERE c = ? AND config = ?",
                        [(r["at"], r["c"], r["config"]) for r in done + partial + untouched])
    kept = {q.problem.c: {cfg.describe() for cfg in q.configs}
            for q in dataset.load_dataset(db, "sm90")}
    everything = set(space) | {t for t, _, _ in old}
    assert kept[64] == everything - {old_fast}
    assert kept[128] == kept[32] == everything


def test_a_problem_whose_tuning_was_stopped_part_way_is_not_data(tmp_path):
    """A tune run stopped part way (its call's time ran out) leaves some of a problem's
    configs measured and no best row: judged among those few, any pick would look good."""
    rows = _rows()
    first = {c: rows[0][c] for c in KEY_COLUMNS if c in rows[0]}
    same = [r for r in rows if all(r.get(c) == v for c, v in first.items())]
    others = [r for r in rows if r not in same]
    finished = _build_db(tmp_path / "finished.sqlite", rows)
    stopped = _build_db(tmp_path / "stopped.sqlite", others)
    _build_db(tmp_path / "stopped.sqlite", same[:2], finished=False)   # 2 configs, no best
    assert len(same) > 2
    every = {q.key for q in dataset.load_dataset(finished, "sm90")}
    left = {q.key for q in dataset.load_dataset(stopped, "sm90")}
    [gone] = every - left
    assert left < every and gone[0] == first["direction"]


def test_a_best_of_a_few_configs_is_not_data(tmp_path):
    """`tune --top` and `--max-configs` leave a best of the few configs they measured: a
    selector trained on it would learn the fastest of those as the fastest of all."""
    rows = _rows()
    first = {c: rows[0][c] for c in KEY_COLUMNS if c in rows[0]}
    same = [r for r in rows if all(r.get(c) == v for c, v in first.items())]
    path = _build_db(tmp_path / "few.sqlite", [r for r in rows if r not in same])
    _build_db(tmp_path / "few.sqlite", same[:2], finished=False)
    key = {c: first.get(c, H100.get(c)) for c in KEY_COLUMNS}
    ok = [r for r in same[:2] if r["status"] == "ok"]
    with TuningDB(path) as db:
        db.set_best(key, ok[0]["config"], ok[0]["ms"], ok[0]["tflops"], "fixture",
                    searched="the first 2 of 40 ranked by sm90.json")
        assert db.best(key).searched == "the first 2 of 40 ranked by sm90.json"
    few = {q.key for q in dataset.load_dataset(path, "sm90")}
    with TuningDB(path) as db:   # the same best, of the whole space
        db.set_best(key, ok[0]["config"], ok[0]["ms"], ok[0]["tflops"], "fixture")
    every = {q.key for q in dataset.load_dataset(path, "sm90")}
    [gone] = every - few
    assert few < every and gone[0] == first["direction"]


def test_ranked_is_what_a_selection_may_pick_in_the_order_it_asks(tmp_path, problems, model, on_h100):
    path = str(tmp_path / "sm90.json")
    model.save(path)
    dev = features.Device("sm90", H100["device"])
    checked = 0
    for direction in features.DIRECTIONS:
        for prob in [p for p in problems if p.problem.direction.name == direction][:3]:
            order, used = selector.ranked(prob.problem, SM90, path)
            assert used == path and order
            cfg, _, _ = selector.choose(prob.problem, SM90, path)
            assert order[0] == cfg   # the pick first
            space = tuning_space.configs(prob.problem, SM90)
            valid = [c for c in space if selector.runs_here(c, prob.problem, SM90)]
            allowed = [c for c in valid if dataset.short_chain(prob.problem, c)] or valid
            assert sorted(c.describe() for c in order) == sorted(c.describe() for c in allowed)
            # the kept first, each part in the whole model's order
            import numpy as np
            x = np.asarray(features.feature_rows(prob.problem, space, dev))
            booster = model.booster(None)
            full = booster.predict(x)
            index = {c.describe(): i for i, c in enumerate(space)}
            kept = set(np.argsort(-booster.predict(x, selector.PREFILTER_TREES),
                                  kind="stable")[:selector.PREFILTER_KEEP].tolist())
            places = [index[c.describe()] for c in order]
            parts = [[i for i in places if i in kept], [i for i in places if i not in kept]]
            assert places == parts[0] + parts[1]
            for part in parts:
                assert all(full[a] >= full[b] - 1e-9 for a, b in zip(part, part[1:]))
            checked += 1
    assert checked == 9
    # a family the model leaves to the rule: the rule's config first, as a run takes it
    prob = next(p for p in problems if "1x1" in dataset.families(p))
    keeps = str(tmp_path / "keeps.json")
    selector.Model(model.texts, {"arch": "sm90", "rule_families": ["1x1"]}).save(keeps)
    order, _ = selector.ranked(prob.problem, SM90, keeps)
    assert order[0] == kconfig.choose(prob.problem, SM90, True)
    assert selector.choose(prob.problem, SM90, keeps)[0] is None   # the run takes the rule
    assert len(order) == len({c.describe() for c in order})
    # no model: nothing ranked, and why
    assert selector.ranked(problems[0].problem, SM90, None) == ([], "selector off")


def test_tune_top_measures_the_models_first_few_and_marks_its_best(tmp_path, model):
    from convtune import commands as lab_commands
    from convtune import tune
    from convgen.backend import current
    from convtune.keys import key_for
    be = current()
    path = str(tmp_path / "m.json")
    selector.Model(model.texts, {"arch": be.arch}).save(path)   # the fixture's trees, for here
    db = str(tmp_path / "t.sqlite")
    problem = ["--operation", "conv2d", "-t", "f16", "-batchsize", "2", "-in_channels", "5",
               "-out_channels", "7", "-in_h", "6", "-in_w", "5", "-fil_h", "3", "-fil_w", "2",
               "-padding_h", "1", "-in_layout", "nhwc", "-fil_layout", "kyxc", "-out_layout", "nhwk"]
    args = lab_commands.parse_tune(["--db", db, "--top", "2", *problem, "-selector", path])
    (config,) = args["configs"]
    order, _ = selector.ranked(config.problem, be, path)
    assert len(order) > 2
    (r,) = tune.tune(args["configs"], db, jobs=1, allow_cpu=True, progress=False, top=args["top"])
    key = key_for(config.problem, be)
    with TuningDB(db, readonly=True) as t:
        measured, best = t.measured(key), t.best(key)
    assert set(measured) == {c.describe() for c in order[:2]} and r.measured == 2
    assert best.searched == r.searched == f"the first 2 of {len(order)} ranked by m.json"
    assert best.config in measured
    (again,) = tune.tune(args["configs"], db, jobs=1, allow_cpu=True, progress=False, top=2)
    assert again.measured == 0 and again.note == "measured and checked before"
    # a run takes that best, and its # line says what it is the fastest of
    cfg, source = picks.select(config.problem, be, True, None, db, path)
    assert cfg.describe() == best.config
    assert source.startswith(f"tuned: the fastest measured here of the first 2 of {len(order)} ranked by m.json (")


def test_features_are_one_row_per_config_in_the_documented_order(problems):
    names = [n for n, _ in features.FEATURES]
    assert len(names) == len(set(names))
    prob = problems[0]
    row = features.features(prob.problem, prob.configs[0], prob.device)
    assert len(row) == len(names)
    assert all(isinstance(v, (int, float)) for v in row)
    by_name = dict(zip(names, row))
    p, cfg = prob.problem, prob.configs[0]
    assert by_name["block_m"] == cfg.block_m and by_name["n"] == p.n
    assert by_name["units"] == 132 and by_name["arch_number"] == 90
    assert 0 < by_name["fill_m"] <= 1 and 0 < by_name["wave_fill"] <= 1


def test_fill_features_measure_the_partial_tiles():
    from convgen import dtypes
    from convgen.problem import make_problem
    # M = 1 * 7 * 7 = 49 rows in 64-row tiles: 49/64 of the rows hold work
    p = make_problem(direction="fwd", dtype=dtypes.elem_type("f16"), n=1, g=1, c_total=64,
                     k_total=96, hi=7, wi=7, y=1, x=1,
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    cfg = kconfig.KernelConfig(block_m=64, block_n=64, block_k=32)
    f = dict(zip(features.FEATURE_NAMES, features.features(p, cfg, features.Device("sm90", H100["device"]))))
    assert f["fill_m"] == pytest.approx(49 / 64) and f["tiles_m"] == 1
    assert f["fill_n"] == pytest.approx(96 / 128) and f["tiles_n"] == 2
    assert f["programs"] == 2 and f["wave_fill"] == pytest.approx(2 / 132)


def test_a_gpu_the_table_lacks_is_counted_where_it_runs(monkeypatch):
    """gpus.DEVICES names a few GPUs; another one's features count its own SMs
    (Backend.units) where it runs, and match a listed GPU of as many SMs but for its
    bandwidth and L2, which only the table knows (0). Offline, with neither, they count none."""
    from convgen import dtypes
    from convgen.problem import make_problem
    p = make_problem(direction="bwd_weight", dtype=dtypes.elem_type("f16"), n=7, g=1, c_total=96,
                     k_total=40, hi=13, wi=13, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    space = tuning_space.configs(p, SM90)
    listed = features.feature_rows(p, space, features.Device("sm90", H100["device"]))
    be = dataset.offline_backend("sm90", "NVIDIA H100 SXM5 94GB")
    assert be.units() == 0   # not at hand: torch is not asked
    offline = features.feature_rows(p, space, features.device_of(be))
    assert set(offline[:, features.FEATURE_NAMES.index("units")]) == {0}
    assert not (offline == listed).all()
    monkeypatch.setattr(type(be), "units", lambda self: 132)   # as the GPU counts its SMs
    dev = features.device_of(be)
    assert dev == features.Device("sm90", "NVIDIA H100 SXM5 94GB", 132) and dev.units == 132
    # as a listed GPU of as many SMs, but for what only the table knows of a device
    facts = [features.FEATURE_NAMES.index(n) for n in ("bandwidth", "l2_mb")]
    rows = features.feature_rows(p, space, dev)
    assert set(rows[:, facts].ravel()) == {0}
    rows[:, facts] = listed[:, facts]
    assert (rows == listed).all()
    # the table wins over a count where both are known (the name is the database's key)
    assert features.Device("sm90", H100["device"], 114).units == 132


@pytest.mark.parametrize("tile,arch,want", [
    # 3 stages of (64 + 64) x 32 halves, 25 KiB with the 1 KiB a program: 9 fit in 228 KiB;
    # (64 x 64 / 128 + 32) = 64 registers x 128 threads: 8 fit in 64 Ki registers
    ((64, 64, 32, 4, 3), "sm90", 8),
    # 4 stages of (128 + 128) x 64: 129 KiB, one program; two by registers, eight by warps
    ((128, 128, 64, 8, 4), "sm90", 1),
    # 160 registers x 256 threads: one by registers, where shared memory would hold four
    ((128, 256, 32, 8, 2), "sm90", 1),
    # 16 warps a program: warps allow four, the 40 registers of 512 threads three
    ((64, 64, 32, 16, 2), "sm90", 3),
    # the A100's 164 KiB hold one program of 97 KiB
    ((128, 128, 64, 4, 3), "sm80", 1),
    # gfx942: 3 stages keep 2 LDS buffers of (64 + 64) x 32 halves, 16 KiB: 4 in a 64 KiB
    # CU; registers (48 a lane: 8 waves a SIMD) and wave slots allow 8
    ((64, 64, 32, 4, 3), "gfx942", 4),
    ((64, 64, 32, 4, 3), "gfx1100", 0),   # an arch gpus.ARCHS lacks: no limits known
])
def test_occupancy_is_the_tightest_of_shared_memory_warps_and_registers(tile, arch, want):
    from convgen import dtypes
    from convgen.problem import make_problem
    p = make_problem(direction="fwd", dtype=dtypes.elem_type("f16"), n=8, g=1, c_total=256,
                     k_total=256, hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    bm, bn, bk, warps, stages = tile
    cfg = kconfig.KernelConfig(block_m=bm, block_n=bn, block_k=bk, num_warps=warps, num_stages=stages)
    f = dict(zip(features.FEATURE_NAMES, features.features(p, cfg, features.Device(arch, "a GPU"))))
    assert f["occupancy"] == want
    assert f["smem_kb"] == stages * (bm + bn) * bk * 2 / 1024


@pytest.mark.parametrize("n,hw,units", [(32, 7, 132), (8, 13, 132), (3, 11, 7), (256, 14, 114)])
def test_stream_k_and_tail_partials_count_the_pieces_their_kernels_share(n, hw, units):
    """extra_mb of a stream-K config counts one fp32 partial tile, written and read back,
    per program boundary inside a tile (counted here by walking the programs' runs of
    steps, as tma's kernel cuts them); of a tail config, each leftover tile's parts past
    its first."""
    from convgen import dtypes
    from convgen.problem import make_problem
    lay = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}
    p = make_problem(direction="bwd_weight", dtype=dtypes.elem_type("f16"), n=n, g=1, c_total=512,
                     k_total=320, hi=hw, wi=hw, y=3, x=3, pad=(1, 1, 1, 1), layouts=lay)
    be = SM90
    checked = 0
    for cfg in (c for c in tuning_space.configs(p, be) if c.streamk):
        programs, per, tiles, tile_steps = geometry.streamk_steps(p, cfg, units)
        work = tiles * tile_steps
        inside = sum(1 for i in range(1, programs) if i * per < work and i * per % tile_steps)
        assert features.streamk_partials(p, cfg, units) == (programs, inside)
        checked += 1
    assert checked
    fwd = make_problem(direction="fwd", dtype=dtypes.elem_type("f16"), n=n, g=1, c_total=512,
                       k_total=512, hi=hw, wi=hw, y=3, x=3, pad=(1, 1, 1, 1), layouts=lay)
    dev = features.Device("sm90", H100["device"])
    tails = [c for c in tuning_space.configs(fwd, be) if c.tail]
    assert tails
    for cfg in tails:
        f = dict(zip(features.FEATURE_NAMES, features.features(fwd, cfg, dev)))
        tiles = f["tiles_m"] * f["tiles_n"]
        left = tiles % 132
        assert f["extra_mb"] == pytest.approx(2 * 4 * cfg.block_m * cfg.block_n * left * (cfg.tail - 1) / 1e6)


def test_split_and_folded_configs_features_follow_their_kernels():
    """Features of a split bwd_weight config and of a folded (s2d) fwd config against the
    formulas written out with math.ceil: the reduction steps of one part, the parts the
    kernel runs, the launches and the flops per launch, and a folded config's tiles over
    the folded problem."""
    import math
    from convgen import dtypes
    from convgen.kernels import s2d
    from convgen.problem import make_problem
    lay = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}
    dev = features.Device("sm90", H100["device"])
    p = make_problem(direction="bwd_weight", dtype=dtypes.elem_type("f16"), n=3, g=1, c_total=40,
                     k_total=72, hi=13, wi=11, y=3, x=3, pad=(1, 1, 1, 1), layouts=lay)
    for split in (1, 4):
        cfg = kconfig.choose(p, SM90, True, {"block_m": 64, "block_n": 64, "block_k": 32, "split": split})
        f = dict(zip(features.FEATURE_NAMES, features.features(p, cfg, dev)))
        m, _, r = p.gemm
        walk = p.direction.tile_k(p)
        parts = geometry.split_parts(p, cfg)[0] if split > 1 else 1
        assert f["steps_k"] == math.ceil(math.ceil(walk / split) / 32)
        assert f["tiles_m"] == math.ceil(m / 64) and f["fill_m"] == m / (math.ceil(m / 64) * 64)
        assert f["parts"] == parts and f["part_length"] == r / split
        assert f["launches"] == (2 if parts > 1 else 1)
        assert f["log_flops_per_launch"] == math.log2(p.flops / f["launches"])
        assert f["fill_k"] == walk / (math.ceil(walk / 32) * 32)
    stem = make_problem(direction="fwd", dtype=dtypes.elem_type("f16"), n=2, g=1, c_total=3,
                        k_total=32, hi=17, wi=17, y=3, x=3, stride=(2, 2), pad=(1, 1, 1, 1), layouts=lay)
    cfg = kconfig.choose(stem, SM90, True, {"s2d": 1})
    q = s2d.inner_problem(stem, 1)
    f = dict(zip(features.FEATURE_NAMES, features.features(stem, cfg, dev)))
    assert f["s2d"] == 1 and f["tiles_m"] == math.ceil(q.gemm[0] / cfg.block_m)
    assert f["launches"] == 3   # the fold copies the input and the filter, then the conv
    assert f["log_flops_per_launch"] == math.log2(stem.flops / 3)
    assert f["log_flops"] == math.log2(stem.flops)


def test_scalar_loads_marks_pointer_configs_on_strides_triton_cannot_prove_aligned():
    """bwd_weight 1x1 144 -> 40 channels: the output gradient's rows are 40 elements apart,
    not a multiple of 16, and the pointer kernel loads them element by element (sm90 PTX:
    ld.global.b16); at batch 32 its fastest pointer config ran at 0.57x the fastest
    descriptor config on the H100.
    48 channels (and the descriptor kernels anywhere) are not marked; a folded config
    is judged on the folded problem's strides."""
    from convgen import dtypes
    from convgen.kernels import s2d
    from convgen.problem import make_problem
    lay = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}
    dev = features.Device("sm90", H100["device"])

    def problem(c, k, **kw):
        return make_problem(direction="bwd_weight", dtype=dtypes.elem_type("f16"), n=2, g=1,
                            c_total=c, k_total=k, hi=7, wi=7, y=1, x=1, layouts=lay, **kw)

    def marks_of(p, configs):
        column = features.feature_rows(p, configs, dev)[:, features.FEATURE_NAMES.index("scalar_loads")]
        return {(bool(c.tma), int(v)) for c, v in zip(configs, column)}

    def marks(p):
        return marks_of(p, tuning_space.configs(p, SM90))
    assert marks(problem(144, 40)) == {(False, 1), (True, 0)}
    assert marks(problem(144, 48)) == {(False, 0), (True, 0)}
    # the same pointer tile issues 8 times the loads where they are one f16 each
    cfg = kconfig.KernelConfig(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=3, split=4)
    loads = [dict(zip(features.FEATURE_NAMES, features.features(problem(144, k), cfg, dev)))["loads_per_thread"]
             for k in (40, 48)]
    assert loads == [(64 + 64) * 64 / 1 / 128, (64 + 64) * 64 / 8 / 128]
    assert features.unaligned_strides(problem(40, 144))   # the input's and the filter's rows
    assert not features.unaligned_strides(problem(48, 144))
    stem = make_problem(direction="fwd", dtype=dtypes.elem_type("f16"), n=2, g=1, c_total=4,
                        k_total=32, hi=16, wi=16, y=4, x=4, stride=(4, 4), layouts=lay)
    assert features.unaligned_strides(stem)
    assert not features.unaligned_strides(s2d.inner_problem(stem, 1))   # 64 folded channels
    # s2d=2 reads its input through overlapping columns 4 x 5 channels apart, though the
    # folded problem's dense strides are multiples of 16: its pointer configs are marked
    odd = make_problem(direction="fwd", dtype=dtypes.elem_type("f32"), n=2, g=1, c_total=5,
                       k_total=32, hi=20, wi=20, y=7, x=7, stride=(2, 2), pad=(3, 3, 3, 3),
                       layouts=lay)
    assert not features.unaligned_strides(s2d.inner_problem(odd, 2))
    folded = [c for c in tuning_space.configs(odd, SM90) if c.s2d == 2]
    assert folded and marks_of(odd, folded) == {(False, 1)}


def test_folds_never_split_a_shape(problems):
    folds = evaluation.group_folds(problems, 5)
    fold_of_shape = {}
    for prob, f in zip(problems, folds):
        assert fold_of_shape.setdefault(prob.shape, f) == f, prob.shape
    assert set(folds) <= set(range(5)) and len(set(folds)) > 1
    # each direction and type of a shape is the same shape
    assert len(fold_of_shape) < len(problems)
    with pytest.raises(ConvgenError, match="cannot fill"):
        evaluation.group_folds(problems, len(fold_of_shape) + 1)


def test_shuffled_folds_deal_whole_shapes_otherwise(problems):
    canonical = evaluation.group_folds(problems, 5)
    dealt = [evaluation.group_folds(problems, 5, shuffle=seed) for seed in (1, 2)]
    assert dealt[0] == evaluation.group_folds(problems, 5, shuffle=1)   # a seed is one assignment
    assert dealt[0] != canonical and dealt[0] != dealt[1]
    for folds in dealt:
        fold_of_shape = {}
        for prob, f in zip(problems, folds):
            assert fold_of_shape.setdefault(prob.shape, f) == f, prob.shape


@pytest.mark.parametrize("group", ["shape", "layer"])
@pytest.mark.parametrize("seed", [None, 3])
def test_a_group_keeps_its_fold_whatever_else_the_database_holds(problems, group, seed):
    """Two evaluations differ by their data and model, not by a new deal: a group
    added to (or gone from) the database moves no other group to another fold."""
    key = dataset.GROUPINGS[group]
    whole = dict(zip(map(key, problems), evaluation.group_folds(problems, 5, group, seed)))
    groups = sorted(whole)
    for kept in (groups[::2], groups[1::2], groups[len(groups) // 3:]):
        part = [p for p in problems if key(p) in set(kept)]
        assert dict(zip(map(key, part), evaluation.group_folds(part, 5, group, seed))) == \
            {g: whole[g] for g in kept}
    # and the order the problems come in does not matter either
    again = list(reversed(problems))
    assert dict(zip(map(key, again), evaluation.group_folds(again, 5, group, seed))) == whole


def test_folds_are_pinned_to_the_keys_text():
    """A shape's fold is the same in every process and Python (a hash of the key's text, not
    Python's salted hash()): these keys, as the database gives them, have these folds."""
    from types import SimpleNamespace
    keys = [(n, 64, 64, 1, 56, 56, 3, 3, 1, 1, "1,1,1,1", 1, 1) for n in (1, 8, 32, 128, 256)]
    keys.append((256, 512, 512, 32, 14, 14, 3, 3, 1, 1, "1,1,1,1", 1, 1))
    probs = [SimpleNamespace(shape=k) for k in keys]
    assert evaluation.group_folds(probs, 5) == [1, 4, 0, 4, 1, 2]
    assert evaluation.group_folds(probs, 5, shuffle=1) == [0, 4, 2, 2, 4, 4]


def test_cross_validation_skips_a_fold_that_judges_nothing(problems, monkeypatch):
    """Hashed folds of a few groups may leave one empty: no model is trained for it, and
    every problem is still judged once."""
    fold_of = dict(zip((p.shape for p in problems), evaluation.group_folds(problems, 4)))
    # four shapes none of which hashes to fold 3 (a shape's fold is its own: the stability)
    shapes = sorted(one for one, f in fold_of.items() if f != 3)[:4]
    few = [p for p in problems if p.shape in set(shapes)]
    folds = evaluation.group_folds(few, 4)
    assert len(shapes) == 4 and 3 not in folds
    trained = []
    real_train = selector.train
    monkeypatch.setattr(selector, "train", lambda probs, trees: trained.append(len(probs)) or real_train(probs, trees))
    rows, _ = evaluation._cross_validate(few, 4, 10, False)
    assert len(trained) == len(set(folds)) < 4   # a model per fold that judges something
    assert sorted(r["problem"] for r in rows) == sorted(p.problem.describe() for p in few)
    assert {r["fold"] for r in rows} == set(folds)


def test_fold_splits_hold_out_every_problem_once_and_never_a_trained_shape(problems):
    """evaluation.fold_splits, which the evaluation and the benchmarks' loops share."""
    assert evaluation.assignments(2) == [None, 1, 2] and evaluation.assignments(0) == [None]
    for seed in evaluation.assignments(1):
        fold_of = evaluation.group_folds(problems, 5, shuffle=seed)
        held = []
        for f, train_ix, test_ix in evaluation.fold_splits(problems, 5, shuffle=seed):
            assert test_ix == [i for i, g in enumerate(fold_of) if g == f]
            assert sorted(train_ix + test_ix) == list(range(len(problems)))
            held += test_ix
        assert sorted(held) == list(range(len(problems)))
    # judged problems of another list: a shape the training problems lack is judged by
    # fold 0's model, whose training set cannot hold it either
    lone = problems[0].shape
    trained = [p for p in problems if p.shape != lone]
    folds = list(evaluation.fold_splits(trained, 5, judged=problems))
    assert len(folds) == 5
    held = sorted(i for _, _, test_ix in folds for i in test_ix)
    assert held == list(range(len(problems)))
    fold0 = folds[0][2]
    assert {i for i, p in enumerate(problems) if p.shape == lone} <= set(fold0)
    for _, train_ix, test_ix in folds:
        assert not {trained[i].shape for i in train_ix} & {problems[i].shape for i in test_ix}


def test_evaluation_over_shuffled_folds_averages_each_assignments_numbers(problems):
    result = evaluation.evaluate(problems, folds=3, trees=20, shuffles=2)
    shuffled = result["shuffled"]
    assert shuffled["assignments"] == 3 and shuffled["seeds"] == [1, 2]
    runs = [result["per_problem"]] + [evaluation._cross_validate(problems, 3, 20, True, "shape", seed)[0]
                                      for seed in (1, 2)]
    for name in ("overall", "fwd", "bwd_weight"):
        effs = [[r["selector"] for r in run if name == "overall" or name in r["families"]] for run in runs]
        for k, of in (("mean", lambda e: sum(e) / len(e)), ("min", min)):
            assert shuffled["families"][name][k] == pytest.approx(sum(of(e) for e in effs) / 3)
            assert [one[name][k] for one in shuffled["each"]] == pytest.approx([of(e) for e in effs])
    assert shuffled["each"][0] == {name: result["families"][name]["selector"] for name in result["families"]}
    # another assignment judges the problems by other models: some pick differs
    picks = [{r["problem"]: r["chosen"] for r in run} for run in runs]
    assert picks[0].keys() == picks[1].keys() and picks[0] != picks[1]


def test_folds_by_layer_hold_out_a_layer_at_every_batch(problems):
    folds = evaluation.group_folds(problems, 5, "layer")
    fold_of_layer = {}
    for prob, f in zip(problems, folds):
        assert fold_of_layer.setdefault(prob.layer, f) == f, prob.layer
    # the fixture has a layer at two batches: one group by layer, two by shape
    batches = {}
    for prob in problems:
        batches.setdefault(prob.layer, set()).add(prob.problem.n)
    assert any(len(b) > 1 for b in batches.values())
    assert len(fold_of_layer) < len({p.shape for p in problems})
    result = evaluation.evaluate(problems, folds=5, trees=TREES, group="layer")
    assert result["group"] == "layer" and result["layers"] == len(fold_of_layer)
    # each problem was judged by the fold that held its whole layer out
    judged_in = {row["problem"]: row["fold"] for row in result["per_problem"]}
    assert len(judged_in) == len(problems)
    assert all(judged_in[prob.problem.describe()] == f for prob, f in zip(problems, folds))


def test_cross_validation_picks_only_what_a_run_could_pick(problems):
    """A measured config that today's tuning space no longer holds (a run never ranks it:
    convtune/space.configs dropped it) is no pick in cross-validation either, though it is
    every problem's fastest and the model learnt to like it; it still sets the oracle."""
    import dataclasses
    be = dataset._backend_for("sm90")
    extra, dropped = [], {}
    for prob in problems:
        odd = kconfig.choose(prob.problem, be, True, {"block_m": 64, "block_n": 64, "block_k": 32,
                                                       "num_stages": 5, "tma": None})
        assert odd.describe() not in {c.describe() for c in tuning_space.configs(prob.problem, be)}
        dropped[prob.problem.describe()] = odd.describe()
        extra.append(dataclasses.replace(prob, configs=[*prob.configs, odd],
                                         tflops=[*prob.tflops, 2 * prob.best]))
    result = evaluation.evaluate(extra, folds=3, trees=20)
    assert result["per_problem"]
    for row in result["per_problem"]:
        assert row["chosen"] != dropped[row["problem"]]
        assert row["model"] <= 0.5


def test_evaluation_reports_efficiency_against_the_oracle(problems):
    import numpy as np
    result = evaluation.evaluate(problems, folds=5, trees=TREES)
    assert result["problems"] == len(problems) and result["rows"] == sum(len(p.configs) for p in problems)
    for who in ("selector", "model", "rule", "single"):
        s = result["families"]["overall"][who]
        assert 0 <= s["min"] <= s["p10"] <= s["mean"] <= 1
    assert result["overall"] == {k: result["families"]["overall"]["selector"][k] for k in ("mean", "p10", "min")}
    # the selector takes the rule exactly in the families its training folds kept for it
    for row in result["per_problem"]:
        kept = set(row["families"]) & set(row["rule_families"])
        assert row["selector"] == (row["rule"] if kept and row["rule"] is not None else row["model"])
    assert {"fwd", "bwd_data", "bwd_weight", "batch<=8", "1x1", "3x3", "stem"} <= set(result["families"])
    # each efficiency is the chosen config's measured TFLOPS over the best measured
    by_text = {p.problem.describe(): p for p in problems}
    for row in result["per_problem"]:
        prob = by_text[row["problem"]]
        texts = [c.describe() for c in prob.configs]
        assert row["model"] == pytest.approx(prob.tflops[texts.index(row["chosen"])] / prob.best)
    # a useful model: far better than the single config best on the training folds
    assert result["overall"]["mean"] > result["families"]["overall"]["single"]["mean"]
    assert result["selection_ms"] < 50
    # the # line's predicted TFLOPS against the pick's measured TFLOPS, worked out here
    errors = sorted(abs(r["predicted_tflops"] - prob_tflops) / prob_tflops
                    for r in result["per_problem"]
                    for prob_tflops in [by_text[r["problem"]].tflops[
                        [c.describe() for c in by_text[r["problem"]].configs].index(r["chosen"])]])
    error = result["prediction_error"]
    assert error["count"] == len(errors) == len(problems)
    assert error["median"] == pytest.approx(float(np.median(errors)))
    assert error["p90"] == pytest.approx(float(np.percentile(errors, 90)))
    assert 0 < error["median"] < 1 and error["median"] <= error["p90"]   # a speed model, not noise
    # timing the model's first K: the pick is among them, more can only help, and the
    # summary is of these rows
    for row in result["per_problem"]:
        top = [row["timed_top"][str(k)] for k in evaluation.TOP_KS]
        assert row["model"] <= top[0] and top == sorted(top) and top[-1] <= 1
    assert any(row["timed_top"]["8"] > row["model"] for row in result["per_problem"])
    for k in map(str, evaluation.TOP_KS):
        effs = [r["timed_top"][k] for r in result["per_problem"]]
        assert result["timed_top"][k]["overall"]["mean"] == pytest.approx(float(np.mean(effs)))
        assert result["timed_top"][k]["overall"]["min"] == min(effs)
        fwd = [r["timed_top"][k] for r in result["per_problem"] if "fwd" in r["families"]]
        assert result["timed_top"][k]["fwd"]["count"] == len(fwd)
    # a direction the data lacks has no row, and the shuffled means still come out
    fwd_only = [p for p in problems if p.problem.direction.name == "fwd"]
    shuffled = evaluation.evaluate(fwd_only, folds=3, trees=5, shuffles=1)
    assert set(shuffled["shuffled"]["timed_top"]["2"]) == {"overall", "fwd"}


def test_a_model_ranks_the_problems_it_learnt_near_their_best(problems, model):
    picks, fastest = [], []
    for prob in problems:
        picks.append(prob.tflops[model.pick(prob.problem, prob.configs, prob.device)[0]] / prob.best)
        pred = model.predict(prob.problem, prob.configs, prob.device)
        fastest.append(prob.tflops[int(pred.argmax())] / prob.best)
    # in-sample: a broken feature or target (argmin for argmax, TFLOPS for ms, a ranking
    # told the slowest is best) fails this, for the ranking that picks and the speed model
    assert sum(picks) / len(picks) > 0.9 and sum(fastest) / len(fastest) > 0.9


def test_the_model_learns_and_picks_transposed_tiles(problems, model):
    # the fixture's problems whose fastest config is swap_ab: the model picks a swapped
    # config for them, near their best; a model blind to the field (no feature, or the
    # swapped rows dropped from training) scores each twin alike and misses most of them
    swapped = [prob for prob in problems if prob.configs[prob.tflops.index(prob.best)].swap_ab]
    assert len(swapped) >= 3
    picks = [prob.configs[model.pick(prob.problem, prob.configs, prob.device)[0]] for prob in swapped]
    effs = [prob.tflops[prob.configs.index(cfg)] / prob.best for prob, cfg in zip(swapped, picks)]
    assert sum(cfg.swap_ab == 1 for cfg in picks) >= len(swapped) - 1
    assert min(effs) > 0.9


def test_a_pick_is_the_whole_models_best_of_what_the_first_trees_rank_first(problems, model,
                                                                          monkeypatch):
    import numpy as np
    monkeypatch.setattr(selector, "PREFILTER_TREES", 7)   # the fixture's ranking model has 180 trees
    monkeypatch.setattr(selector, "PREFILTER_KEEP", 4)    # fewer than most fixture problems hold
    ranked_first = 0
    for prob in problems[::5]:
        d = prob.problem.direction.name
        x = np.asarray(features.feature_rows(prob.problem, prob.configs, prob.device))
        booster = model.booster(d)
        index, predicted = model.pick(prob.problem, prob.configs, prob.device)
        full = booster.predict(x)
        if len(x) <= selector.PREFILTER_KEEP:
            assert index == int(full.argmax())
        else:
            quick = booster.predict(x, selector.PREFILTER_TREES)
            ranked = set(np.argsort(-quick, kind="stable")[:selector.PREFILTER_KEEP].tolist())
            assert index in ranked and full[index] == max(full[i] for i in ranked)
            ranked_first += 1
        speed = model.booster(d, "speed").predict(x)
        assert predicted == pytest.approx(float(np.expm1(speed[index])))
    assert ranked_first


def test_a_pick_asks_only_what_it_needs_and_takes_the_best_accepted(problems, model, monkeypatch):
    """The check a pick must pass (validation: ~13 us a config on the CPU machine) is asked
    in the whole model's order of the kept candidates, so a pick most often asks it once;
    what it refuses, the next in that order replaces; where it refuses every kept one, the
    whole model's best of the rest is taken; where it refuses all, none."""
    import numpy as np
    monkeypatch.setattr(selector, "PREFILTER_TREES", 7)
    monkeypatch.setattr(selector, "PREFILTER_KEEP", 4)
    prob = max(problems, key=lambda p: len(p.configs))
    d = prob.problem.direction.name
    x = np.asarray(features.feature_rows(prob.problem, prob.configs, prob.device))
    assert len(x) > 2 * selector.PREFILTER_KEEP
    booster = model.booster(d)
    full = booster.predict(x)
    kept = np.argsort(-booster.predict(x, 7), kind="stable")[:4].tolist()
    by_model = sorted(kept, key=lambda i: -full[i])
    asked = []
    def accept_all(i):
        asked.append(i)
        return True
    assert model.pick_rows(d, x, accept_all)[0] == by_model[0] and asked == by_model[:1]
    refused = set(by_model[:2])
    asked.clear()
    def refuse_two(i):
        asked.append(i)
        return i not in refused
    assert model.pick_rows(d, x, refuse_two)[0] == by_model[2] and asked == by_model[:3]
    rest = [i for i in range(len(x)) if i not in kept]
    assert model.pick_rows(d, x, lambda i: i not in kept)[0] == max(rest, key=lambda i: full[i])
    assert model.pick_rows(d, x, lambda i: False) is None


def test_the_c_library_predicts_what_the_lightgbm_package_predicts(problems, model):
    import lightgbm
    import numpy as np
    packages = {(d, "speed"): lightgbm.Booster(model_str=text) for d, text in model.texts["speed"].items()}
    assert set(packages) == {(d, "speed") for d in features.DIRECTIONS}
    for d in features.DIRECTIONS:   # one ranking model for every direction
        packages[d, "rank"] = lightgbm.Booster(model_str=model.texts["rank"])
    for prob in problems[::7]:
        d = prob.problem.direction.name
        x = np.asarray([features.features(prob.problem, c, prob.device) for c in prob.configs])
        for kind in ("rank", "speed"):
            assert np.array_equal(model.booster(d, kind).predict(x),
                                  packages[d, kind].predict(x, num_threads=1))
            assert np.array_equal(model.booster(d, kind).predict(x, 7),
                                  packages[d, kind].predict(x, num_iteration=7, num_threads=1))
            # the single-row fast path (a pick's predicted TFLOPS), row by row and in any
            # order: it keeps its predictor between calls, and must not keep a row
            for i in (len(x) - 1, 0, len(x) // 2):
                assert model.booster(d, kind).predict_one(x[i]) == packages[d, kind].predict(
                    x[i:i + 1], num_threads=1)[0]
    with pytest.raises(ValueError, match="features expected"):
        model.booster("fwd").predict(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="features expected"):
        model.booster("fwd", "speed").predict_one(np.zeros(3))


def test_a_run_selects_without_importing_the_lightgbm_package(tmp_path, model):
    """The package imports scipy (and scikit-learn, pandas where installed): seconds on a
    slow file system. A run loads the library alone (lgbm_c)."""
    path = str(tmp_path / "sm90.json")
    model.save(path)
    code = ("import sys; from convtune import selector; from convgen.backend import Backend; "
            "from convgen.problem import make_problem; from convgen import dtypes; "
            "p = make_problem(direction='fwd', dtype=dtypes.elem_type('f16'), n=8, g=1, c_total=64, "
            "k_total=64, hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1), "
            "layouts={'input': 'nhwc', 'filter': 'kyxc', 'output': 'nhwk'}); "
            "Backend.device_name = lambda self: 'NVIDIA H100 80GB HBM3'; Backend.units = lambda self: 132; "
            "selector.load(sys.argv[1]); "
            "cfg, tflops, _ = selector.choose(p, Backend('cuda', 'sm90', 32), sys.argv[1]); "
            "print(cfg is not None, tflops > 0, 'lightgbm' in sys.modules, 'scipy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    # how long the load takes is benchmarks/bench_selector.py's to say, not a test's
    assert out.stdout.split() == ["True", "True", "False", "False"]


def test_model_file_round_trips(tmp_path, problems, model):
    path = str(tmp_path / "sm90.json")
    model.save(path)
    again = selector.Model.load(path)
    prob = problems[3]
    assert list(again.predict(prob.problem, prob.configs, prob.device)) == pytest.approx(
        list(model.predict(prob.problem, prob.configs, prob.device)))
    assert again.pick(prob.problem, prob.configs, prob.device) == pytest.approx(
        model.pick(prob.problem, prob.configs, prob.device))
    assert again.arch == "sm90"
    assert not [f for f in os.listdir(tmp_path) if f != "sm90.json"]   # no temp file left


@pytest.mark.parametrize("damage,why", [
    (lambda text: text[: len(text) // 2], "not a model file"),
    (lambda text: json.dumps({"schema": "other"}), "not a convgen selector model"),
    (lambda text: text.replace('"block_m"', '"block_m_renamed"', 1), "other features"),
    (lambda text: json.dumps({**json.loads(text), "models": {
        **json.loads(text)["models"], "speed": {"fwd": "tree\ngarbage"}}}),
     "fwd speed LightGBM model does not parse"),
    (lambda text: json.dumps({**json.loads(text), "models": {
        **json.loads(text)["models"], "rank": "tree\ngarbage"}}),
     "its rank LightGBM model does not parse"),
    (lambda text: json.dumps({**json.loads(text), "models": {
        **json.loads(text)["models"], "speed": {"sideways": json.loads(text)["models"]["rank"]}}}),
     "no LightGBM ranking model and speed model per direction"),
    (lambda text: json.dumps({**json.loads(text), "models": {"fwd": json.loads(text)["models"]["rank"]}}),
     "no LightGBM ranking model and speed model per direction"),
    (lambda text: json.dumps({**json.loads(text), "models": {"rank": json.loads(text)["models"]["rank"],
                                                             "speed": {}}}),
     "no LightGBM ranking model and speed model per direction"),
    (lambda text: json.dumps({**{k: v for k, v in json.loads(text).items() if k != "models"},
                              "version": 3, "models": {"fwd": {}}}), "schema version 3; this convgen reads 4"),
])
def test_a_damaged_model_is_one_clear_error_naming_the_file(tmp_path, model, damage, why):
    good = str(tmp_path / "good.json")
    model.save(good)
    bad = tmp_path / "bad.json"
    bad.write_text(damage(open(good).read()))
    with pytest.raises(ConvgenError, match=why) as e:
        selector.Model.load(str(bad))
    assert str(bad) in str(e.value)


def test_a_run_without_a_tuned_entry_takes_the_model_pick(tmp_path, problems, model, on_h100):
    path = str(tmp_path / "sm90.json")
    model.save(path)
    prob = next(p for p in problems if p.problem.direction.name == "bwd_weight")
    cfg, source = picks.select(prob.problem, SM90, True, None, None, path)
    assert source.startswith("selected by model sm90.json: predicted ") and "TFLOPS" in source
    # what a selection may pick, worked out here the eager way: every config validated, then
    # the short chains among them (all of them where none is short); of those, the whole
    # model's first among the ones its first trees rank first in the space, else of all
    import numpy as np
    dev = features.Device("sm90", H100["device"])
    space = tuning_space.configs(prob.problem, SM90)
    valid = []
    for i, c in enumerate(space):
        try:
            kconfig.validate(c, prob.problem, SM90, True)
        except ConvgenError:
            continue
        valid.append(i)
    allowed = [valid[i] for i in dataset.short_chains(prob.problem, [space[i] for i in valid])]
    x = np.asarray(features.feature_rows(prob.problem, space, dev))
    booster = model.booster("bwd_weight")
    full = booster.predict(x)
    kept = np.argsort(-booster.predict(x, selector.PREFILTER_TREES), kind="stable")
    kept = set(kept[:selector.PREFILTER_KEEP].tolist()) & set(allowed) or set(allowed)
    index = max(kept, key=lambda i: (full[i], -i))
    [predicted] = model.predict(prob.problem, [space[index]], dev)
    assert cfg == space[index] and f"predicted {predicted:.1f} TFLOPS" in source
    [speed] = model.predict(prob.problem, [cfg], features.Device("sm90", H100["device"]))
    assert predicted == pytest.approx(speed)
    # -perf_config still forces; -selector none is today's rule
    assert picks.select(prob.problem, SM90, True, {"block_m": 64}, None, path)[1] == "set on the command line"
    rule, source = picks.select(prob.problem, SM90, True, None, None, None)
    assert rule == kconfig.choose(prob.problem, SM90, True) and source.endswith("selector off)")
    # a model for another arch is refused
    with pytest.raises(ConvgenError, match="is for sm90, not sm100"):
        selector.choose(prob.problem, Backend("cuda", "sm100", 32), path)


def test_without_lightgbm_the_rule_is_taken_and_says_why(tmp_path, problems, model, on_h100, monkeypatch):
    path = str(tmp_path / "sm90.json")
    model.save(path)
    from convtune import lgbm_c
    monkeypatch.setitem(sys.modules, "lightgbm", None)   # import lightgbm raises ImportError
    monkeypatch.setattr(lgbm_c, "_LIB", None)            # nor is its library found
    monkeypatch.setattr(selector, "_LOADED", {})
    prob = problems[0]
    cfg, source = picks.select(prob.problem, SM90, True, None, None, path)
    assert cfg == kconfig.choose(prob.problem, SM90, True)
    assert source == ("default rule (no tuning database; the selector needs lightgbm, which is "
                      "not installed)")


def test_no_model_for_the_arch_falls_back_to_the_rule(problems, monkeypatch, tmp_path):
    monkeypatch.setattr(selector, "MODELS_DIR", str(tmp_path))
    monkeypatch.delenv("CONVGEN_SELECTOR", raising=False)
    cfg, why, path = selector.choose(problems[0].problem, Backend("cuda", "sm89", 32), "")
    assert cfg is None and path is None and why == "no selector model for sm89"


def _convgen(*args):
    """convgen's main in this process, its output captured: the exit status and both streams
    as a subprocess gives them, without the seconds a new process spends importing torch."""
    from convgen import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main([str(a) for a in args])
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())


def test_train_and_eval_commands(tmp_path, db):
    out = tmp_path / "m.json"
    p = _convgen("train-selector", "--db", db, "--trees", "40", "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert "120 ranking trees, 40 speed trees per direction" in p.stdout
    assert doc["trees"] == 40 and doc["rank_trees"] == 120
    assert set(doc["models"]) == {"rank", "speed"} and set(doc["models"]["speed"]) == set(features.DIRECTIONS)
    warm = tmp_path / "w.json"
    p = _convgen("train-selector", "--db", db, "--warm_start", str(out), "--out", str(warm))
    assert p.returncode == 0, p.stderr
    doc = json.loads(warm.read_text())
    assert doc["trees"] == 40 + selector.WARM_TREES
    assert doc["rank_trees"] == selector.rank_trees(40 + selector.WARM_TREES)
    report = tmp_path / "eval.json"
    p = _convgen("eval-selector", "--db", db, "--trees", "40", "--json", str(report))
    assert p.returncode == 0, p.stderr
    assert "| overall |" in p.stdout
    doc = json.loads(report.read_text())
    assert set(doc["overall"]) == {"mean", "p10", "min"} and doc["problems"] >= 40
    assert doc["selection_ms"] > 0


def test_eval_of_a_database_with_one_direction_says_its_timed_top(tmp_path):
    # the other directions have no timed-top rows: the printed line takes the ones there are
    path = _build_db(tmp_path / "fwd.sqlite", [r for r in _rows() if r["direction"] == "fwd"])
    p = _convgen("eval-selector", "--db", path, "--trees", "5", "--folds", "3", "--shuffles", "1")
    assert p.returncode == 0, p.stderr
    assert "the best measured of the model's first K" in p.stderr + p.stdout


H200 = "NVIDIA H200"


def _problem_of(r):
    return tuple(r[c] for c in KEY_COLUMNS if c in r)


def _on_h200(rows):
    """Every fixture problem again as if measured on an H200, where the H100's fastest
    config of each problem runs at half its speed: so the H100's best is not always the
    H200's."""
    fastest = {}
    for r in rows:
        if r["status"] == "ok" and r["tflops"] and r["tflops"] > fastest.get(_problem_of(r), (0, None))[0]:
            fastest[_problem_of(r)] = (r["tflops"], r["config"])
    out = []
    for r in rows:
        slow = fastest.get(_problem_of(r), (0, None))[1] == r["config"]
        out.append({**r, "device": H200, "tflops": r["tflops"] and r["tflops"] * (0.5 if slow else 1.0)})
    return out, {k: cfg for k, (_, cfg) in fastest.items()}


@pytest.fixture(scope="module")
def two_devices(tmp_path_factory):
    """The fixture on both GPUs, less the H100's rows of its first problem: a shape only
    the H200 measured."""
    rows = _rows()
    h200, _ = _on_h200(rows)
    h100 = [r for r in rows if _problem_of(r) != _problem_of(rows[0])]
    return _build_db(tmp_path_factory.mktemp("two") / "t.sqlite", h100 + h200)


def test_eval_on_another_device_judges_its_measurements_by_models_of_the_first(two_devices):
    problems = dataset.load_dataset(two_devices, "sm90")
    h100 = evaluation.on_device(problems, H100["device"], "device")
    h200 = evaluation.on_device(problems, H200, "test_device")
    assert len(h100) == len(h200) - 1 == (len(problems) - 1) // 2
    result = evaluation.evaluate(h100, folds=3, trees=20, test=h200)
    assert result["problems"] == len(h200) == len(result["per_problem"])
    by_text = {p.problem.describe(): p for p in h200}
    h100_best = {p.problem.describe(): p.configs[p.tflops.index(p.best)].describe() for p in h100}
    fold_of = dict(zip((p.shape for p in h100), evaluation.group_folds(h100, 3)))
    for row in result["per_problem"]:
        prob = by_text[row["problem"]]
        texts = [c.describe() for c in prob.configs]
        # judged on the H200's times, by the fold whose model never saw the shape (a shape
        # the H100 never measured: fold 0's)
        assert row["model"] == pytest.approx(prob.tflops[texts.index(row["chosen"])] / prob.best)
        assert row["fold"] == fold_of.get(prob.shape, 0)
        if row["problem"] not in h100_best:   # no H100 best to compare
            assert row["source"] is None
            continue
        # the H100's best runs at half its H100 speed there
        assert row["source"] == pytest.approx(prob.tflops[texts.index(h100_best[row["problem"]])] / prob.best)
    assert sum(row["source"] is None for row in result["per_problem"]) == 1
    # the fixture's first problem shares its sizes with others the H100 measured, so
    # here fold 0 is that shape's fold: drop the shape whole for the fold-0 path
    lone = next(p for p in h200 if p.key not in {q.key for q in h100})
    rest = [p for p in h100 if p.shape != lone.shape]
    assert lone.shape not in {p.shape for p in rest}
    alone = evaluation.evaluate(rest, folds=3, trees=5, test=[lone])
    (row,) = alone["per_problem"]
    assert row["fold"] == 0 and row["source"] is None and row["model"] is not None
    # halved, it is no longer the fastest where a second config was within 2x of it
    assert sum(row["source"] is not None and row["source"] < 1 for row in result["per_problem"]) > len(h200) / 2
    assert result["families"]["overall"]["source"]["count"] == len(h200) - 1
    assert result["test_device"] == H200
    table = evaluation.evaluation_table(result)
    assert "other device's best mean" in table[0] and table[0].count("|") == table[2].count("|")
    assert f"of {len(h200) - 1} |" in table[2]   # the source column counts its own problems
    # without a test device nothing changes: the numbers are of the held-out H100 problems
    plain = evaluation.evaluate(h100, folds=3, trees=20)
    assert "source" not in plain["per_problem"][0] and "source" not in plain["families"]["overall"]


def test_eval_on_a_device_whose_directions_no_model_learnt_takes_the_rule(tmp_path):
    rows = _rows()
    h200, _ = _on_h200([r for r in rows if r["direction"] == "bwd_data"])
    path = _build_db(tmp_path / "t.sqlite", [r for r in rows if r["direction"] == "fwd"] + h200)
    report = tmp_path / "e.json"
    p = _convgen("eval-selector", "--db", path, "--trees", "5", "--folds", "3", "--device",
                 H100["device"], "--test_device", H200, "--json", str(report))
    assert p.returncode == 0, p.stderr
    assert "no model picked: the training problems hold none of the judged problems' directions" in p.stdout
    doc = json.loads(report.read_text())
    assert doc["selection_ms"] is None and doc["problems"] == len({_problem_of(r) for r in h200})
    assert all(r["selector"] == r["rule"] for r in doc["per_problem"])


def test_eval_and_train_commands_take_a_device(tmp_path, two_devices):
    p = _convgen("eval-selector", "--db", two_devices, "--trees", "10", "--folds", "3",
                 "--test_device", H200)
    assert p.returncode == 0, p.stderr
    n = len(_on_h200(_rows())[1])
    assert f"judged on the {n} problems measured on {H200}, by models trained on {H100['device']}, " \
           f"{H200}" in p.stdout
    assert "other device's best mean" in p.stdout and f"| overall | {n} |" in p.stdout
    out = tmp_path / "m.json"
    p = _convgen("train-selector", "--db", two_devices, "--trees", "10", "--device", H200, "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["devices"] == [H200] and doc["problems"] == len(_on_h200(_rows())[1])


@pytest.mark.parametrize("args,message", [
    (["train-selector", "--db", "/nonexistent/t.sqlite"], "does not exist"),
    (["eval-selector", "--arch", "gfx942", "--db", "{db}"], "has no problem on gfx942 whose whole tuning space is measured"),
    (["eval-selector", "--db", "{db}", "--group", "batch"], "expected one of shape, layer"),
    (["eval-selector", "--db", "{db}", "--folds", "1"], "-folds: cross-validation needs at least 2 folds, not 1"),
    (["train-selector", "--db", "{db}", "--folds", "1"], "-folds: cross-validation needs at least 2 folds, not 1"),
    (["eval-selector", "--db", "{db}", "--device", "NVIDIA A100"],
     "no measurements on 'NVIDIA A100' (the database has: NVIDIA H100 80GB HBM3)"),
    (["eval-selector", "--db", "{db}", "--test_device", "NVIDIA H200"],
     "no measurements on 'NVIDIA H200' (the database has: NVIDIA H100 80GB HBM3)"),
    (["train-selector", "--db", "{db}", "--test_device", "NVIDIA H200"],
     "only eval-selector judges picks on another device"),
    (["eval-selector", "--db", "{db}", "--test_device", ""], "no measurements on ''"),
    (["train-selector", "--db", "{db}", "--out", "/nonexistent/m.json"], "does not exist"),
    (["train-selector", "--db", "{db}", "--warm_start", "/nonexistent/m.json"],
     "selector model '/nonexistent/m.json' cannot be used"),
])
def test_bad_selector_commands_are_one_error_line(db, args, message):
    p = _convgen(*[a.replace("{db}", db) for a in args])
    assert p.returncode == 2 and message in p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("convgen: error:"), p.stderr


def test_a_damaged_model_named_on_the_command_line_stops_the_run(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = _convgen("-p", "-x2", "-selector", str(bad), "-tuning_db", "none")
    assert p.returncode == 2 and f"selector model '{bad}' cannot be used" in p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("convgen: error: -selector")


def test_rule_families_are_where_the_rule_won_on_enough_problems():
    def row(fams, model, rule):
        return {"families": fams, "model": model, "rule": rule}
    rows = ([row(["fwd", "depthwise"], 0.5, 1.0)] * 5 + [row(["fwd", "1x1"], 1.0, 0.4)] * 5
            + [row(["bwd_data", "stem"], 0.2, 0.9)] * 4)            # 4: too few to judge
    assert evaluation.rule_families(rows) == ["depthwise"]


def test_a_family_where_the_rule_matched_the_model_everywhere_keeps_the_rule():
    def row(fams, model, rule):
        return {"families": fams, "model": model, "rule": rule}
    tied = [row(["bwd_weight", "depthwise"], 1.0, 1.0)] * 5
    assert evaluation.rule_families(tied) == ["bwd_weight", "depthwise"]
    # one problem where the model is ahead: the model keeps the family
    assert evaluation.rule_families(tied + [row(["bwd_weight", "depthwise"], 1.0, 0.9)]) == []
    assert evaluation.rule_families(tied[:4]) == []                  # too few to judge
    # as many wins as losses, and equal sums, is no tie: each side was ahead somewhere
    f = ["bwd_weight", "depthwise"]
    assert evaluation.rule_families(tied[:3] + [row(f, 0.9, 1.0), row(f, 1.0, 0.9)]) == []
    # the direction family, mostly other problems where the model wins, keeps the model
    assert evaluation.rule_families(tied + [row(["bwd_weight", "1x1"], 0.95, 0.6)] * 6) == ["depthwise"]


def test_grouped_is_a_family_of_groups_of_several_channels_only():
    def fams(g, c, n=32):
        from convgen import cli
        return features.families_of(cli.parse([
            "-operation", "conv2d_bwd_weight", "-t", "f16", f"-batchsize={n}", f"-groupsize={g}",
            f"-in_channels={c}", f"-out_channels={c}", "-in_h=14", "-in_w=14", "-fil_h=3",
            "-fil_w=3", "-padding_h=1", "-padding_w=1"]).problem)
    assert fams(32, 512) == ["bwd_weight", "3x3", "grouped"]
    assert fams(512, 512) == ["bwd_weight", "depthwise"]          # one channel a group
    assert fams(1, 512, n=4) == ["bwd_weight", "3x3", "batch<=8"]
    assert fams(2, 8) == ["bwd_weight", "stem", "grouped"]


def test_one_layer_the_model_misjudges_does_not_give_its_family_the_rule():
    """The rule's mean is ahead only through one layer (two problems) the model got badly
    wrong; on the family's other problems the model is ahead: the model keeps the family.
    Both tests must hold: ahead on most problems but behind on the mean, or ahead on as
    many as behind, keeps the model too."""
    def row(model, rule):
        return {"families": ["fwd", "stem"], "model": model, "rule": rule}
    rows = [row(0.3, 0.95), row(0.35, 0.9)] + [row(1.0, 0.9)] * 4
    assert sum(r["rule"] for r in rows) > sum(r["model"] for r in rows)
    assert evaluation.rule_families(rows) == []
    assert evaluation.rule_families(rows + [row(0.5, 1.0)] * 3) == ["fwd", "stem"]
    assert evaluation.rule_families([row(0.99, 1.0)] * 4 + [row(1.0, 0.3)]) == []
    assert evaluation.rule_families([row(1.0, 1.0)] * 3 + [row(0.5, 1.0), row(1.0, 0.9)]) == []


def test_a_family_the_model_keeps_the_rule_for_takes_the_rule(tmp_path, problems, model, on_h100):
    prob = next(p for p in problems if p.problem.direction.name == "fwd")
    kept = features.families_of(prob.problem)[1]
    path = str(tmp_path / "sm90.json")
    selector.Model(model.texts, {"arch": "sm90", "rule_families": [kept]}).save(path)
    monkey_loaded = selector._LOADED.pop(path, None)
    cfg, source = picks.select(prob.problem, SM90, True, None, None, path)
    assert cfg == kconfig.choose(prob.problem, SM90, True)
    assert f"sm90.json keeps the rule for {kept} problems" in source
    assert monkey_loaded is None


def test_each_direction_has_its_own_speed_model_and_a_missing_one_keeps_the_rule(tmp_path, problems,
                                                                                  model, on_h100):
    """One speed model per direction: a problem's TFLOPS are its direction's alone to
    predict, and a file without that direction's model (one trained on no problem of it)
    leaves the problem to the rule, saying so, though its ranking model would rank it."""
    prob = next(p for p in problems if p.problem.direction.name == "bwd_weight")
    alone = selector.Model({"rank": model.texts["rank"], "speed": {"bwd_weight": model.texts["speed"]["bwd_weight"]}},
                           {"arch": "sm90"})
    assert list(alone.predict(prob.problem, prob.configs, prob.device)) == pytest.approx(
        list(model.predict(prob.problem, prob.configs, prob.device)))
    assert alone.pick(prob.problem, prob.configs, prob.device) == model.pick(prob.problem, prob.configs, prob.device)
    path = str(tmp_path / "sm90.json")
    selector.Model({"rank": model.texts["rank"], "speed": {"fwd": model.texts["speed"]["fwd"]}},
                   {"arch": "sm90"}).save(path)
    cfg, source = picks.select(prob.problem, SM90, True, None, None, path)
    assert cfg == kconfig.choose(prob.problem, SM90, True)
    assert "sm90.json has no bwd_weight model" in source


def test_a_direction_no_training_fold_holds_is_the_rules_in_cross_validation(problems):
    """Folds group by shape, not direction: a held-out fold can hold a direction's only
    shapes. Its problems then take the rule, as a run with that model would."""
    fwd = [p for p in problems if p.problem.direction.name == "fwd"]
    shape = next(p.shape for p in problems if p.problem.direction.name == "bwd_data")
    lone = [p for p in problems if p.problem.direction.name == "bwd_data" and p.shape == shape]
    result = evaluation.evaluate(fwd + lone, folds=3, trees=20)
    rows = [r for r in result["per_problem"] if r["problem"].startswith("bwd_data")]
    assert rows and all(r["model"] == r["rule"] for r in rows)


def test_a_warm_start_keeps_the_directions_the_new_data_lacks(problems, model):
    """New rows of one direction continue its speed model and the ranking model (which
    ranks every direction); the other speed models stay as they were."""
    fwd = [p for p in problems if p.problem.direction.name == "fwd"]
    boosters = selector.train(fwd, 20, warm_start=model)
    assert set(boosters["speed"]) == set(features.DIRECTIONS)
    for d in ("bwd_data", "bwd_weight"):
        assert boosters["speed"][d].model_to_string() == model.texts["speed"][d]
    assert boosters["speed"]["fwd"].num_trees() == TREES + selector.WARM_TREES
    assert boosters["rank"].num_trees() == selector.rank_trees(TREES) + selector.rank_trees(selector.WARM_TREES)


def test_a_problem_unlike_any_the_model_learnt_keeps_the_rule(tmp_path, problems, model, on_h100):
    """Trained on channels-last f16/bf16 only: an NCHW or fp8 problem is the rule's."""
    from convgen import dtypes
    from convgen.problem import make_problem
    path = str(tmp_path / "sm90.json")
    covered = sorted({features.coverage(p.problem) for p in problems})
    selector.Model(model.texts, {"arch": "sm90", "coverage": covered}).save(path)
    assert "f16 channels-last" in covered and not any("first" in c for c in covered)
    nchw = make_problem(direction="fwd", dtype=dtypes.elem_type("f16"), n=4, g=1, c_total=64,
                        k_total=64, hi=14, wi=14, y=3, x=3, pad=(1, 1, 1, 1),
                        layouts={"input": "nchw", "filter": "kcyx", "output": "nkhw"})
    cfg, source = picks.select(nchw, SM90, True, None, None, path)
    assert cfg == kconfig.choose(nchw, SM90, True)
    assert "sm90.json was trained on no f16 channels-first problem" in source
    fp8 = make_problem(direction="bwd_data", dtype=dtypes.elem_type("fp8_e4m3"), n=2, g=1, c_total=6,
                       k_total=8, hi=9, wi=9, y=3, x=3, stride=(2, 2), pad=(1, 1, 1, 1),
                       layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    assert "trained on no fp8_e4m3 channels-last problem" in picks.select(fp8, SM90, True, None, None, path)[1]


def test_the_fold_is_no_candidate_for_fp8():
    """Its copy kernels cannot fill fp8 (Triton casts no integer 0 to fp8): seen on the H100,
    where a model picked s2d=1 for an fp8 stem-like problem and the run could not compile."""
    from convgen import dtypes
    from convgen.problem import make_problem
    p = make_problem(direction="bwd_data", dtype=dtypes.elem_type("fp8_e4m3"), n=2, g=1, c_total=6,
                     k_total=8, hi=9, wi=9, y=3, x=3, stride=(2, 2), pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    assert not [c for c in tuning_space.configs(p, SM90) if c.s2d]
    with pytest.raises(ConvgenError, match="s2d=1: fp8_e4m3: the fold's copies move 16- and 32-bit"):
        kconfig.choose(p, SM90, True, {"s2d": 1})


def test_no_candidate_sums_a_longer_chain_than_the_rule_allows():
    """The model learns speed only; a pick of split 1 for a depthwise bwd_weight summed
    802,816 products in one fp32 chain and failed the reference check on the H100. The
    candidates keep to the rule's MAX_CHAIN, and where none does, all stay."""
    from convgen.dtypes import elem_type
    from convgen.problem import make_problem
    be = Backend("cuda", "sm90", 32)
    p = make_problem(direction="bwd_weight", dtype=elem_type("f16"), g=144, n=256, c_total=144,
                     k_total=144, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwgc", "filter": "gkyxc", "output": "nhwgk"})
    space = list(tuning_space.configs(p, be))
    kept = dataset.short_chains(p, space)
    assert 0 < len(kept) < len(space)
    assert all(kconfig.longest_chain(p, space[i]) <= kconfig.MAX_CHAIN for i in kept)
    assert all(space[i].split > 1 for i in kept)
    assert kconfig.longest_chain(p, kconfig.default_config(p, be, True)) <= kconfig.MAX_CHAIN
    fwd = make_problem(direction="fwd", dtype=elem_type("f16"), g=1, n=1, c_total=8192,
                       k_total=16, hi=9, wi=9, y=3, x=3, layouts={"input": "nhwc",
                       "filter": "kyxc", "output": "nhwk"})
    few = list(tuning_space.configs(fwd, be))
    assert kconfig.longest_chain(fwd, few[0]) > kconfig.MAX_CHAIN
    assert dataset.short_chains(fwd, few) == list(range(len(few)))


@pytest.mark.parametrize("direction, c, k, g, hw, f, stride", [
    ("bwd_weight", 144, 144, 144, 56, 3, 1),     # depthwise: the direct and pointer kernels' splits
    ("bwd_weight", 256, 256, 1, 14, 3, 1),       # descriptor kernels, stream-K
    ("bwd_weight", 3, 64, 1, 224, 7, 2),         # a stem: s2d folds
    ("fwd", 3, 64, 1, 224, 7, 2),
])
def test_configs_equal_in_chain_fields_sum_equal_chains(direction, c, k, g, hw, f, stride):
    """short_chains works each chain out once per kconfig.chain_fields: were longest_chain
    to read another field, it would keep or drop a config for another's chain. Each
    config's chain fields put into every other config leave its chain as it was."""
    import dataclasses
    from convgen.dtypes import elem_type
    from convgen.problem import make_problem
    grouped = g > 1
    p = make_problem(direction=direction, dtype=elem_type("f16"), g=g, n=32, c_total=c, k_total=k,
                     hi=hw, wi=hw, y=f, x=f, stride=(stride, stride), pad=(f // 2,) * 4,
                     layouts={"input": "nhwgc" if grouped else "nhwc",
                              "filter": "gkyxc" if grouped else "kyxc",
                              "output": "nhwgk" if grouped else "nhwk"})
    space = list(tuning_space.configs(p, SM90))
    keys = {kconfig.chain_fields(cfg) for cfg in space}
    assert len(keys) > 1
    for a in space:
        for b in space[::7]:
            mixed = dataclasses.replace(b, s2d=a.s2d, tma=a.tma, streamk=a.streamk,
                                        block_k=a.block_k, split=a.split, direct=a.direct)
            assert kconfig.chain_fields(mixed) == kconfig.chain_fields(a)
            assert kconfig.longest_chain(p, mixed) == kconfig.longest_chain(p, a), (a, b)
    one_by_one = [i for i, cfg in enumerate(space) if dataset.short_chain(p, cfg)]
    assert dataset.short_chains(p, space) == (one_by_one or list(range(len(space))))


SMALL = ["-batchsize=1", "-in_channels=4", "-out_channels=4", "-in_h=3", "-in_w=3",
         "-fil_h=1", "-fil_w=1"]


@pytest.mark.parametrize("run", [
    ["-p", "-x2"],                             # the matrix path: it looks the problem up
    ["-p"],                                    # the FMA path: never tuned, never selected
    ["-p", "-x2", "-perf_config", "block_m=64"],   # a forced config
    ["-p", "-x2", "-fil_layout=kczyx", "-in_layout=ncdhw", "-out_layout=nkdhw", "-in_d=3",
     "-fil_d=2"],                              # a 3-D problem (runs its 2-D slices)
])
@pytest.mark.parametrize("flag,message", [
    ("-tuning_db", "tuning database '{bad}' does not exist"),
    ("-selector", "selector model '{bad}' cannot be used"),
])
def test_a_wrong_path_named_on_the_command_line_stops_every_run(tmp_path, run, flag, message):
    """Runs that neither look up a tuned entry nor ask the model still check the paths they
    are given, and the one that does says the same: a typo is one error line, not a run
    that quietly used nothing."""
    bad = str(tmp_path / "missing")
    p = _convgen(*run, *SMALL, flag, bad)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message.format(bad=bad) in p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith(f"convgen: error: {flag}"), p.stderr


@pytest.mark.parametrize("run", [["-p", "-x2"], ["-p"]])
def test_with_both_paths_wrong_every_run_names_the_database(tmp_path, run):
    """The matrix path opens the database for its lookup and the model after it; the
    other paths check both up front, the database first: one message for one mistake."""
    bad_db, bad_model = str(tmp_path / "missing.sqlite"), str(tmp_path / "missing.json")
    p = _convgen(*run, *SMALL, "-tuning_db", bad_db, "-selector", bad_model)
    assert p.returncode == 2 and p.stderr.startswith("convgen: error: -tuning_db"), p.stderr
    assert p.stderr.count("\n") == 1 and bad_db in p.stderr


def test_the_selection_bench_times_a_device_it_is_not_on(tmp_path):
    """benchmarks/bench_selector.py --arch/--device: the shipped model's selection timed on
    this CPU as for that device (the picks are the model's, not the rule's), no GPU run."""
    bench = _bench_path("bench_selector")
    out = tmp_path / "bench.json"
    p = subprocess.run([sys.executable, bench, "--arch", "sm90", "--device", H100["device"],
                        "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["device"] == "sm90" and doc["checks"] == [] and "--arch sm90" in doc["command"]
    # the network layers at three batches in three directions; the model picks for all but
    # the families its file leaves to the rule
    assert doc["problems"] > 1000 and 0 < doc["picked_by_model"] <= doc["problems"]
    assert doc["choose_ms_median"] > 0 and set(doc["stages_ms"]) == {"space", "features", "pick"}
    p = subprocess.run([sys.executable, bench, "--arch", "sm90"], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode != 0 and "--arch and --device go together" in p.stderr


def _bench_path(name: str) -> str:
    """benchmarks/<name>.py of this checkout."""
    return os.path.join(os.path.dirname(os.path.dirname(__file__)), "benchmarks", f"{name}.py")


def _benchmark(name: str):
    """(the module, its path) of benchmarks/<name>.py, which is not a package."""
    import importlib.util
    path = _bench_path(name)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def test_the_top_comparison_judges_the_few_against_the_whole_search(tmp_path, db, problems, model):
    """benchmarks/tune_top_compare.py: the model's first K, as a --top run would have
    measured them (the fixture's times), against the whole search of the same problems."""
    compare, _ = _benchmark("tune_top_compare")
    # a model of a few trees, whose first is not always the fastest
    model_path = str(tmp_path / "few-trees.json")
    selector.Model.of(selector.train(problems, 3), {"arch": "sm90"}).save(model_path)
    backend = dataset.offline_backend("sm90", H100["device"])
    top_path, expected = str(tmp_path / "top.sqlite"), {}
    with TuningDB(db, readonly=True) as whole, TuningDB(top_path) as top:
        for prob in problems[::4]:
            key = {c: H100.get(c) for c in KEY_COLUMNS} | {
                c: v for c, v in zip(("direction", "dtype", "layouts") + dataset.SHAPE_COLUMNS, prob.key)}
            times = {c: ms for c, (status, ms, _) in whole.measured(key).items() if status == "ok"}
            order, _ = selector.ranked(prob.problem, backend, model_path)
            first = [c.describe() for c in order[:3] if c.describe() in times]
            if len(first) < 3:
                continue
            for c in first:   # the --top run's own times: 5% off the whole search's
                top.record(key, c, "ok", ms=1.05 * times[c])
            fastest = min(first, key=times.get)
            top.set_best(key, fastest, 1.05 * times[fastest], None, "fixture", "the first 3 of ...")
            best = whole.best(key).ms
            expected[prob.problem.describe()] = (best / times[first[0]], best / times[fastest])
    rows = compare.compare(top_path, db, model_path)
    assert sorted(r["problem"] for r in rows) == sorted(expected) and len(rows) >= 5
    for r in rows:
        assert (r["pick"], r["top"]) == pytest.approx(expected[r["problem"]])
        assert r["top_own_time"] == pytest.approx(r["top"] / 1.05) and r["k"] == 3
    assert any(r["pick"] < r["top"] for r in rows)   # the first three beat the first alone
    # a model that ranks otherwise is refused, not compared
    other_path = str(tmp_path / "sm90.json")
    model.save(other_path)
    with pytest.raises(ConvgenError, match="does not rank"):
        compare.compare(top_path, db, other_path)


def test_the_pick_rules_read_the_neighbours_and_the_order_as_documented():
    """benchmarks/pick_rule_tries.py: which batch is nearest (in ratio, the larger on a
    tie; below and above), and what each kind of rule takes from a made-up order."""
    tries, _ = _benchmark("pick_rule_tries")
    assert tries.nearest([4, 16, 256], 8, False) == [16]      # 4 and 16 tie at 2x: the larger
    assert tries.nearest([2, 24, 256], 8, False) == [24]      # 3x beats 4x
    assert tries.nearest([4, 16, 256], 8, True) == [4, 16]
    assert tries.nearest([16, 256], 8, True) == [16] and tries.nearest([], 8, True) == []
    rules = tries.rules()
    order = ["a", "b", "c", "d", "e"]
    # batch 16 is nearest to 8; its best is "c", third in the order
    nb = {16: {"a": 0.7, "b": 0.8, "c": 1.0}, 1: {"a": 1.0, "b": 0.5, "c": 0.5}}
    assert rules["nearest batch's best if in first 2"](order, nb, 8, [3, 2, 1], [1, 1, 1]) == 0
    assert rules["nearest batch's best if in first 3"](order, nb, 8, [3, 2, 1], [1, 1, 1]) == 2
    assert rules["nearest batch's best if in first 2"](order, {}, 8, [3, 2], [1, 1]) == 0
    # either side of 8 are 1 and 16: "b" scores (0.5 + 0.8) / 2 against "a"'s (1.0 + 0.7) / 2
    assert rules["batches either side vote, first 2, margin 0.0"](order, nb, 8, [3, 2], [1, 1]) == 0
    nb = {16: {"a": 0.5, "b": 1.0}, 4: {"a": 0.6, "b": 0.9}}   # "b" 0.95 against 0.55
    assert rules["batches either side vote, first 2, margin 0.2"](order, nb, 8, [3, 2], [1, 1]) == 1
    close = {16: {"a": 0.6, "b": 0.65}, 4: {"a": 0.6, "b": 0.65}}
    assert rules["batches either side vote, first 2, margin 0.0"](order, close, 8, [3, 2], [1, 1]) == 1
    assert rules["batches either side vote, first 2, margin 0.1"](order, close, 8, [3, 2], [1, 1]) == 0
    # near ties: the second where its score is close and the speed model has it faster
    tie = rules["second on a rank gap < 0.1, predicted 5% faster"]
    assert tie(order, {}, 8, [1.0, 0.95], [100.0, 106.0]) == 1
    assert tie(order, {}, 8, [1.0, 0.95], [100.0, 104.0]) == 0   # not 5% faster
    assert tie(order, {}, 8, [1.0, 0.85], [100.0, 200.0]) == 0   # not a near tie
    assert rules["the model's first (shipped)"](order, nb, 8, [1, 2], [1, 2]) == 0


def test_the_pick_rule_tries_run_on_recorded_measurements(db):
    """One assignment of the fixture's problems: every rule prints its averages; a GPU the
    database lacks is one error line."""
    _, path = _benchmark("pick_rule_tries")
    p = subprocess.run([sys.executable, path, "--db", db, "--shuffles", "0"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = [ln for ln in p.stdout.splitlines() if ": 1 assignments" in ln]
    assert len(lines) == 14 and lines[0].startswith("the model's first (shipped): 1 assignments {")
    assert all("'overall': [" in ln for ln in lines), p.stdout
    p = subprocess.run([sys.executable, path, "--db", db, "--device", "NVIDIA H999"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and p.stderr.startswith(
        "pick_rule_tries: error: --device: no measurements on 'NVIDIA H999' (the database has: ")
    assert p.stderr.count("\n") == 1, p.stderr


@pytest.mark.parametrize("script,args", [
    ("pick_rule_tries", []),
    ("rank_params_sweep", ["{}"]),
    ("prefilter_keep_sweep", []),
])
@pytest.mark.parametrize("db", ["missing.sqlite", "not-a-database.sqlite"])
def test_the_selector_sweeps_refuse_a_bad_database_in_one_line(tmp_path, script, args, db):
    """benchmarks/rank_params_sweep.py and prefilter_keep_sweep.py: a --db that is missing
    or not SQLite is one `<script>: error:` line naming it and exit 2, not a traceback."""
    path = tmp_path / db
    if db.startswith("not"):
        path.write_text("measurements\n")
    sweep = _bench_path(script)
    p = subprocess.run([sys.executable, sweep, *args, "--shuffles", "0", "--db", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith(f"{script}: error: tuning database '{path}'"), p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


def test_held_out_layers_judges_a_layer_no_training_problem_shares(db, problems):
    """benchmarks/held_out_layers.py: the fixture's 1x1 32->16 layer on 112x112 held out,
    its three H100 problems each picked at a share of their best, the training count one
    layer's problems short; dropping the other 1x1 layer too takes its problems out as
    well. A layer the database lacks, a GPU it lacks, or a layer that is not C,K,H: exit 2."""
    path = _bench_path("held_out_layers")
    held = [p for p in problems if (p.problem.c, p.problem.k, p.problem.hi, p.problem.y) == (32, 16, 112, 1)]
    other = [p for p in problems if (p.problem.c, p.problem.k, p.problem.hi, p.problem.y) == (128, 256, 28, 1)
             and p.problem.g == 1]
    assert len(held) == 3 and other

    def run(*args):
        return subprocess.run([sys.executable, path, "--db", db, *args], capture_output=True,
                              text=True, timeout=600)
    p = run("--hold", "32,16,112")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == (f"# {len(problems)} problems; trained on {len(problems) - 3}; judged on 3 of "
                        "NVIDIA H100 80GB HBM3; dropped layers: none")
    picks = [float(ln.split("%")[0]) for ln in lines[1:-1]]
    assert len(picks) == 3 and all(0 < e <= 100 for e in picks), p.stdout
    assert sorted(ln.split("%", 1)[1].split()[0] for ln in lines[1:-1]) == ["bwd_data", "bwd_weight", "fwd"]
    # the picks of a model trained here on every problem but the held-out layer's (training
    # is deterministic): a script that learnt from them too, or took the wrong config's
    # time, prints other shares
    train = [p for p in problems if p not in held]
    mine = selector.Model.of(selector.train(train), {"arch": "sm90"})
    want = []
    for prob in sorted(held, key=lambda p: (p.problem.direction.name, p.problem.hi, p.problem.n)):
        allowed, x = prob.candidate_rows
        best, _ = mine.pick_rows(prob.problem.direction.name, x)
        want.append(f"{100 * prob.tflops[allowed[best]] / prob.best:6.1f}%  {prob.problem.describe()}")
    assert [ln[:len(w)] for ln, w in zip(lines[1:-1], want)] == want, p.stdout
    # the summary of the unrounded shares: within a rounding of the printed ones
    assert abs(float(lines[-1].split()[2].rstrip("%,")) - sum(picks) / 3) < 0.06, lines[-1]
    assert lines[-1].endswith(f"min {min(picks):.1f}% of 3"), lines[-1]
    p = run("--hold", "32,16,112", "--drop", "128,256,28")
    assert p.returncode == 0 and f"trained on {len(problems) - 3 - len(other)};" in p.stdout, p.stdout
    p = run("--hold", "7,7,7")
    assert p.returncode == 2 and p.stderr.startswith(
        "held_out_layers: error: --hold: no problem of those layers measured on NVIDIA H100"), p.stderr
    p = run("--hold", "32,16,112", "--test_device", "NVIDIA H999")
    assert p.returncode == 2 and p.stderr.startswith(
        "held_out_layers: error: --test_device: no measurements on 'NVIDIA H999'"), p.stderr
    assert p.stderr.count("\n") == 1
    p = run("--hold", "32,16")
    assert p.returncode == 2 and "'32,16' is not C,K,H" in p.stderr
    for bad in ("missing.sqlite", __file__):
        p = subprocess.run([sys.executable, path, "--db", bad, "--hold", "32,16,112"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and p.stderr.startswith(
            f"held_out_layers: error: tuning database '{bad}'"), p.stderr
        assert p.stderr.count("\n") == 1


@pytest.mark.parametrize("params", ["{bad", "[1]"])
def test_the_ranking_sweep_refuses_parameters_that_are_not_a_json_object(tmp_path, params):
    """Checked before the database is opened (here one that does not exist)."""
    sweep = _bench_path("rank_params_sweep")
    p = subprocess.run([sys.executable, sweep, params, "--shuffles", "0", "--db",
                        str(tmp_path / "missing.sqlite")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith("rank_params_sweep: error: params: not a JSON object"), p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


@pytest.mark.parametrize("qw", ['["bogus", 1]', '["near"]', '"near"', '["gap", "x"]'])
def test_the_ranking_sweep_refuses_a_query_weighting_it_does_not_know(tmp_path, qw):
    """"_qw" is checked before the database is opened (here one that does not exist)."""
    sweep = _bench_path("rank_params_sweep")
    p = subprocess.run([sys.executable, sweep, '{"_qw": %s}' % qw, "--shuffles", "0", "--db",
                        str(tmp_path / "missing.sqlite")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith("rank_params_sweep: error: _qw: expected"), p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


def test_the_ranking_sweeps_query_weights_follow_how_few_configs_come_near_the_best():
    """Hand-worked: configs at 100, 97, 90, 80, 50, 40, 10 TFLOPS (shuffled)."""
    query_weight = _benchmark("rank_params_sweep")[0].query_weight
    tflops = [90, 10, 100, 50, 97, 80, 40]
    assert query_weight("near", 2, tflops) == pytest.approx(1 + 2 / 2)     # 100 and 97 within 5%
    assert query_weight("gap", 3, tflops) == pytest.approx(1 + 3 * 0.03)   # 97 / 100
    # the next five: 97, 90, 80, 50, 40, mean 71.4
    assert query_weight("top5", 3, tflops) == pytest.approx(1 + 3 * (1 - 0.714))
    assert query_weight("gap", 3, [42]) == 1.0 and query_weight("near", 2, [42]) == 3.0


def test_the_ranking_sweep_runs_with_query_weights(tmp_path):
    """A weighted run on the recorded fixture ends with its summary line."""
    db = _build_db(tmp_path / "all.sqlite", _rows())
    sweep = _bench_path("rank_params_sweep")
    p = subprocess.run([sys.executable, sweep, '{"_qw": ["gap", 3]}', "--shuffles", "0", "--db", db],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "'overall': [" in p.stdout.strip().splitlines()[-1], p.stdout


@pytest.mark.parametrize("script,args", [
    ("pick_rule_tries", []),
    ("rank_params_sweep", ["{}"]),
    ("prefilter_keep_sweep", ["--keep", "16"]),
])
def test_the_selector_sweeps_report_only_the_directions_a_database_holds(tmp_path, script, args):
    """A database of fwd problems alone: the sweep reports overall and fwd, no traceback
    for the directions it has no problem of."""
    db = _build_db(tmp_path / "fwd.sqlite", [r for r in _rows() if r["direction"] == "fwd"])
    sweep = _bench_path(script)
    p = subprocess.run([sys.executable, sweep, *args, "--shuffles", "0", "--db", db],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    result = p.stdout.strip().splitlines()[-1]
    assert "'overall': [" in result and "'fwd': [" in result and "bwd_data" not in result, result


@pytest.mark.parametrize("script,args", [
    ("rank_params_sweep", ["{}"]),
    ("prefilter_keep_sweep", ["--keep", "16"]),
])
def test_the_selector_sweeps_judge_only_the_test_devices_problems(tmp_path, script, args):
    """--test_device: every device's problems train, only that GPU's held-out picks count.
    The H100 measured fwd alone here and the H200 every direction, so judged on the H100
    the summary has fwd and no other direction; a GPU the database lacks is one error line
    naming the flag."""
    rows = _rows()
    h200, _ = _on_h200(rows)
    db = _build_db(tmp_path / "two.sqlite", [r for r in rows if r["direction"] == "fwd"] + h200)
    sweep = _bench_path(script)
    p = subprocess.run([sys.executable, sweep, *args, "--shuffles", "0", "--db", db,
                        "--test_device", H100["device"]], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    result = p.stdout.strip().splitlines()[-1]
    assert H100["device"] in result and "'fwd': [" in result and "bwd_data" not in result, result
    p = subprocess.run([sys.executable, sweep, *args, "--shuffles", "0", "--db", db,
                        "--test_device", "NVIDIA A100"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith(f"{script}: error: --test_device: no measurements on 'NVIDIA A100'"), p.stderr
    assert p.stderr.count("\n") == 1, p.stderr


_KEY_COLUMNS = ("direction", "dtype", "layouts") + dataset.SHAPE_COLUMNS


def _key_of(row: dict) -> tuple:
    return tuple(row.get(c, H100.get(c)) for c in _KEY_COLUMNS)


def _every_config_timed(key: tuple, rows: list) -> bool:
    """Whether rows time every config of the problem's space (it counts without a best row)."""
    from convgen.kernels import config
    p = problem_from_key(dict(zip(_KEY_COLUMNS, key)))
    space = {c.describe() for c in tuning_space.configs(p, dataset._backend_for("sm90"))}
    return space <= {r["config"] for r in rows if _key_of(r) == key}


def test_a_problem_without_a_best_row_is_data_when_every_config_of_its_space_has_a_time(tmp_path):
    """A kernel edit takes a problem's best row until it is tuned again (tuning/README.md);
    its old times of every config still teach the model. A problem with only some configs
    timed does not (the test above)."""
    rows = _rows()
    every = {q.key: q for q in dataset.load_dataset(_build_db(tmp_path / "a.sqlite", rows), "sm90")}
    unfinished = _build_db(tmp_path / "b.sqlite", rows, finished=False)
    loaded = {q.key for q in dataset.load_dataset(unfinished, "sm90")}
    complete = {key: _every_config_timed(key, rows) for key in every}
    assert loaded == {k for k, done in complete.items() if done}
    assert any(complete.values()) and not all(complete.values()), complete


def test_a_failed_reference_check_of_an_older_kernel_version_is_not_data(tmp_path):
    """A `wrong` row says a config gave wrong results with the kernels it ran; once its
    direction's kernels changed (newer rows under another digest) it says nothing of
    today's, as with the bwd_weight race the per-step wgmma wait fixed. Times of older
    versions still count, and a `wrong` of the newest version counts as 0 TFLOPS."""
    import sqlite3

    rows = _rows()
    key = next(k for k in dict.fromkeys(map(_key_of, rows)) if _every_config_timed(k, rows))
    first = dict(zip(_KEY_COLUMNS, key))
    same = [r for r in rows if _key_of(r) == key]
    bad = same[0]["config"]
    changed = [{**r, "status": "wrong", "ms": 0.01, "tflops": None} if r is same[0] else r
               for r in rows]

    def load(newer_kernel: bool, finished: bool = True):
        db = _build_db(tmp_path / f"t{newer_kernel}{finished}.sqlite", changed, finished)
        with sqlite3.connect(db) as con:
            con.execute("UPDATE measurements SET measured_at = '2026-01-01T00:00:00'")
            if newer_kernel:   # the direction's other problems measured again, later
                con.execute("UPDATE measurements SET kernel = 'newer', measured_at = "
                            "'2026-02-01T00:00:00' WHERE direction = ? AND NOT (" +
                            " AND ".join(f"{c} = ?" for c in first) + ")",
                            [first["direction"], *first.values()])
        (q,) = [q for q in dataset.load_dataset(db, "sm90") if q.key == key]
        return dict(zip((c.describe() for c in q.configs), q.tflops))
    today = load(False)
    assert today[bad] == 0.0                   # the newest version's failure: 0 TFLOPS
    older = load(True)
    assert bad not in older                     # an older version's: no row at all
    assert set(older) == set(today) - {bad} and all(older[c] == today[c] for c in older)
    # and a problem without a best row (its best went with the edit) still counts as
    # finished: the left-out config had been measured
    assert load(True, finished=False) == older


def test_train_and_eval_for_an_amd_arch(tmp_path):
    """train-selector and eval-selector --arch gfx942 work from AMD rows (here synthetic:
    the fixture's problems, each config of its gfx942 space timed by a made-up law that
    favours waves_per_eu=0 and wide tiles): the features count AMD's occupancy, wave size
    and device facts, and the trained model ranks an AMD space."""
    import math
    from convgen import backend as backends
    mi300x = {"arch": "gfx942", "device": "AMD Instinct MI300X", "triton": "3.4.0", "kernel": "fixture"}
    be = backends.of_arch("gfx942")
    seen, rows = set(), []
    for r in _rows():
        key = {c: r[c] for c in KEY_COLUMNS if c in r and c not in mi300x}
        marker = tuple(sorted(key.items()))
        if marker in seen:
            continue
        seen.add(marker)
        p = problem_from_key(r)
        for cfg in tuning_space.configs(p, be):
            speed = (math.log2(cfg.block_m * cfg.block_n) + (2 if cfg.waves_per_eu == 0 else 0)
                     + (1 if cfg.matrix_instr_nonkdim == 16 else 0) - 0.1 * cfg.num_stages)
            tflops = speed * p.flops / 1e12
            rows.append({**key, **mi300x, "config": cfg.describe(), "status": "ok",
                         "ms": p.flops / (tflops * 1e9), "tflops": tflops})
    assert len(seen) >= 40 and len(rows) > 20 * len(seen)
    db = _build_db(tmp_path / "amd.sqlite", rows)
    problems = dataset.load_dataset(db, "gfx942")
    assert len(problems) == len(seen)
    f = dict(zip(features.FEATURE_NAMES, features.feature_rows(
        problems[0].problem, problems[0].configs[:1], features.Device("gfx942", mi300x["device"]))[0]))
    assert (f["wave"], f["units"], f["unit_shared_kb"], f["bandwidth"]) == (64, 304, 64, 5.3)
    assert f["occupancy"] >= 1
    out = tmp_path / "gfx942.json"
    p = _convgen("train-selector", "--db", db, "--arch", "gfx942", "--trees", "20", "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    model = json.loads(out.read_text())
    assert model["arch"] == "gfx942" and model["devices"] == [mi300x["device"]]
    assert {"wave", "bandwidth", "occupancy"} <= set(model["features"])
    p = _convgen("eval-selector", "--db", db, "--arch", "gfx942", "--trees", "20", "--folds", "3")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "gfx942" in p.stdout

"""convgen tune and the tuned selection, in the interpreter (the times mean nothing there,
the flow is the same as on a GPU): every config measured or recorded as invalid, the
fastest checked with the reference before it becomes the best, a second run resuming,
a run without -perf_config taking the best, and bad command lines refused."""
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from convgen import cli, picks, run_flags
from convgen import flags
from convtune import commands as lab_commands
from convtune import store
from convtune import tune
from convgen.backend import current
from convgen.kernels import config as kconfig
from convtune.tuning_db import TuningDB
from convtune.keys import key_for
from convtune import space as tuning_space

ROOT = pathlib.Path(__file__).parent.parent
TUNING = ROOT / "tuning"

PROBLEM = ["--operation", "conv2d", "-t", "f16", "-batchsize", "2", "-in_channels", "5",
           "-out_channels", "7", "-in_h", "6", "-in_w", "5", "-fil_h", "3", "-fil_w", "2",
           "-padding_h", "1", "-in_layout", "nhwc", "-fil_layout", "kyxc", "-out_layout", "nhwk"]


def _key(config):
    return key_for(config.problem, current())


def test_tune_measures_checks_records_and_resumes(tmp_path):
    db = str(tmp_path / "t.sqlite")
    args = lab_commands.parse_tune(["--db", db, "--allow-cpu", *PROBLEM])
    (config,) = args["configs"]
    (first,) = tune.tune(args["configs"], db, jobs=1, allow_cpu=True, progress=False)
    n = len(tuning_space.configs(config.problem, current()))
    assert first.measured + first.invalid == n and first.skipped == 0
    with TuningDB(db, readonly=True) as t:
        best = t.best(_key(config))
        measured = t.measured(_key(config))
    assert best is not None and best.config == first.best and best.checked.endswith("[1 1 1]")
    assert measured[best.config][:2] == ("ok", best.ms)
    assert best.ms == min(ms for status, ms, _ in measured.values() if status == "ok")
    # a resumed run passes a finished problem without drawing inputs or checking again
    from convgen import driver, inputs
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(inputs, "make_inputs", lambda *a, **k: pytest.fail("inputs drawn again"))
        mp.setattr(driver, "execute", lambda *a, **k: pytest.fail("checked again"))
        (again,) = tune.tune(args["configs"], db, jobs=1, allow_cpu=True, progress=False)
    assert again.measured == 0 and again.skipped == n and again.best == first.best
    assert again.note == "measured and checked before"

    # a run without -perf_config takes it, and says so; -perf_config still forces
    cfg, source = picks.select(config.problem, current(), True, None, db)
    assert cfg.describe() == best.config and source.startswith("tuned")
    forced, source = picks.select(config.problem, current(), True, {"block_m": 16}, db)
    assert forced.block_m == 16 and source == "set on the command line"
    default, source = picks.select(config.problem, current(), True, None, None)
    assert default == kconfig.choose(config.problem, current(), True)
    assert source == "default rule (no tuning database; selector off)"
    # the FMA path never takes a matrix-core entry
    assert picks.select(config.problem, current(), False, None, db)[1] == "default rule"


def test_invalid_and_wrong_configs_are_recorded_and_never_chosen(tmp_path, monkeypatch):
    db = str(tmp_path / "t.sqlite")
    (config,) = lab_commands.parse_tune(["--db", db, *PROBLEM])["configs"]
    good = kconfig.choose(config.problem, current(), True)
    bad = kconfig.KernelConfig(block_m=48)          # not a power of two: invalid
    second = kconfig.KernelConfig(block_m=16, block_n=16, block_k=16, num_stages=1)
    monkeypatch.setattr(tuning_space, "configs", lambda p, be: [good, bad, second])
    # the fastest config fails the reference check once: the next one is checked
    from convgen import driver
    real = driver.execute
    calls = []

    def execute(run, say):
        o = real(run, say=say)
        calls.append(run.kernel.perf_config)
        if len(calls) == 1:
            o.verdict = type(o.verdict)(**{**o.verdict.__dict__, "bits": (0, 1, 1)})
        return o
    monkeypatch.setattr(driver, "execute", execute)
    (r,) = tune.tune([config], db, jobs=1, allow_cpu=True, progress=False)
    assert r.invalid == 1 and r.measured == 2
    with TuningDB(db, readonly=True) as t:
        m = t.measured(_key(config))
        best = t.best(_key(config))
    assert m[bad.describe()][0] == "invalid" and "block_m=48" in m[bad.describe()][2]
    assert sorted(s for s, _, _ in m.values()) == ["invalid", "ok", "wrong"]
    assert best is not None and m[best.config][0] == "ok" and len(calls) == 2


def test_a_best_of_the_first_few_says_so_and_a_whole_search_replaces_it(tmp_path):
    db = str(tmp_path / "t.sqlite")
    (config,) = lab_commands.parse_tune(["--db", db, *PROBLEM])["configs"]
    n = len(tuning_space.configs(config.problem, current()))
    (few,) = tune.tune([config], db, max_configs=2, allow_cpu=True, progress=False)
    with TuningDB(db, readonly=True) as t:
        assert t.best(_key(config)).searched == few.searched == f"the first 2 of {n} of the space"
    (whole,) = tune.tune([config], db, allow_cpu=True, progress=False)
    assert whole.skipped == 2 and whole.measured + whole.invalid == n - 2
    with TuningDB(db, readonly=True) as t:
        best = t.best(_key(config))
    assert best.searched == whole.searched == "space"
    # a narrower run again: the whole space's best answers it
    (again,) = tune.tune([config], db, max_configs=2, allow_cpu=True, progress=False)
    assert again.note == "measured and checked before" and again.searched == "space"


def test_a_search_of_a_few_chooses_among_them_and_a_whole_one_with_nothing_left_replaces_it(tmp_path):
    db = str(tmp_path / "t.sqlite")
    (config,) = lab_commands.parse_tune(["--db", db, *PROBLEM])["configs"]
    space = [c.describe() for c in tuning_space.configs(config.problem, current())]
    tune.tune([config], db, allow_cpu=True, progress=False)   # every config timed
    import sqlite3
    with sqlite3.connect(db) as con:   # the fastest of all is outside the first two
        ran = [c for (c,) in con.execute("SELECT config FROM measurements WHERE status = 'ok'")]
        assert set(space[:2]) <= set(ran)
        fastest = next(c for c in reversed(space) if c in ran and c not in space[:2])
        con.execute("UPDATE measurements SET ms = 9.0 WHERE config IN (?, ?)", space[:2])
        con.execute("UPDATE measurements SET ms = 0.001 WHERE config = ?", (fastest,))
        con.execute("DELETE FROM best")
    con.close()
    (few,) = tune.tune([config], db, max_configs=2, allow_cpu=True, progress=False)
    with TuningDB(db, readonly=True) as t:
        best = t.best(_key(config))
    assert best.config in space[:2] and best.searched.startswith("the first 2 of")
    # nothing is left to time, and the whole search still chooses again, of everything
    (whole,) = tune.tune([config], db, allow_cpu=True, progress=False)
    assert whole.measured == 0 and whole.skipped == len(space)
    with TuningDB(db, readonly=True) as t:
        best = t.best(_key(config))
    assert best.config == fastest and best.searched == "space"


def test_top_without_a_model_searches_the_whole_space_and_says_why(tmp_path):
    db = str(tmp_path / "t.sqlite")
    args = lab_commands.parse_tune(["--db", db, "--top", "2", *PROBLEM, "-selector", "none"])
    assert args["top"] == 2
    n = len(tuning_space.configs(args["configs"][0].problem, current()))
    (r,) = tune.tune(args["configs"], db, allow_cpu=True, progress=False, top=args["top"])
    assert r.measured + r.invalid == n and r.searched == "space"
    assert r.note.startswith("--top: selector off, so the whole space")


def test_the_interpreter_chooses_no_best_unless_asked(tmp_path):
    # interpreter times mean nothing, so no best; on a GPU (the unit tests run there too)
    # the fastest config that passes the check is the best
    db = str(tmp_path / "t.sqlite")
    (r,) = tune.tune(lab_commands.parse_tune(["--db", db, "--max-configs", "2", *PROBLEM])["configs"], db,
                     max_configs=2, progress=False)
    assert r.measured == 2
    if current().interpreter:
        assert r.best is None and "interpreter" in r.note
    else:
        assert r.best is not None and r.best_ms > 0 and not r.note


def test_retime_before_times_again_only_what_was_timed_before_it(tmp_path, monkeypatch):
    db = str(tmp_path / "t.sqlite")
    args = lab_commands.parse_tune(["--db", db, "--max-configs", "2", "--retime-before",
                           "2000-01-01T00:00:00", *PROBLEM])
    assert args["retime_before"] == "2000-01-01T00:00:00"
    (first,) = tune.tune(args["configs"], db, max_configs=2, progress=False)
    assert first.measured == 2
    # nothing was timed before 2000: a run with that time measures nothing again
    (same,) = tune.tune(args["configs"], db, max_configs=2, progress=False,
                        retime_before="2000-01-01T00:00:00")
    assert same.measured == 0 and same.skipped == 2
    # both were timed before 2100: both again, their rows replaced by the new times
    monkeypatch.setattr(tune, "_time", lambda run, be: (123.0, None))
    (again,) = tune.tune(args["configs"], db, max_configs=2, progress=False,
                         retime_before="2100-01-01T00:00:00")
    assert again.measured == 2 and again.skipped == 0
    with TuningDB(db, readonly=True) as t:
        rows = t.measured(_key(args["configs"][0]))
    assert sorted(ms for status, ms, _ in rows.values() if status == "ok") == [123.0, 123.0]


def test_retime_under_times_again_only_the_configs_that_took_less(tmp_path, monkeypatch):
    # configs whose Python outlasts their GPU work were timed as the host's time: under a
    # bound, every row may be such a one; above it the GPU's time was measured and stays
    db = str(tmp_path / "t.sqlite")
    args = lab_commands.parse_tune(["--db", db, "--retime-before", "2100-01-01T00:00:00",
                           "--retime-under", "1.5", *PROBLEM])
    assert args["retime_under"] == 1.5
    (config,) = args["configs"]
    tune.tune([config], db, max_configs=2, progress=False)
    import sqlite3
    with sqlite3.connect(db) as con:
        slow, fast = [c for (c,) in con.execute("SELECT config FROM measurements ORDER BY config")]
        con.execute("UPDATE measurements SET ms = 2.0 WHERE config = ?", (slow,))
        con.execute("UPDATE measurements SET ms = 1.0 WHERE config = ?", (fast,))
    monkeypatch.setattr(tune, "_time", lambda run, be: (0.5, None))
    (again,) = tune.tune([config], db, max_configs=2, progress=False,
                         retime_before=args["retime_before"], retime_under=args["retime_under"])
    assert again.measured == 1 and again.skipped == 1
    with TuningDB(db, readonly=True) as t:
        rows = t.measured(_key(config))
    assert rows[slow][1] == 2.0 and rows[fast][1] == 0.5


def test_a_stopped_retime_chooses_the_best_again_when_resumed(tmp_path, monkeypatch):
    # stopped after timing every config again but before choosing: the resumed run has
    # nothing left to time, and must still choose the best from the new times
    db = str(tmp_path / "t.sqlite")
    (config,) = lab_commands.parse_tune(["--db", db, *PROBLEM])["configs"]
    tune.tune([config], db, max_configs=2, allow_cpu=True, progress=False)
    import sqlite3
    with sqlite3.connect(db) as con:   # as if timed per launch long ago
        for table in ("measurements", "best"):
            con.execute(f"UPDATE {table} SET measured_at = '2000-01-01T00:00:00'")
    when = "2001-01-01T00:00:00"

    def stop(*args):
        raise KeyboardInterrupt
    with monkeypatch.context() as mp:
        mp.setattr(tune, "_choose_best", stop)
        with pytest.raises(KeyboardInterrupt):
            tune.tune([config], db, max_configs=2, allow_cpu=True, progress=False,
                      retime_before=when)
    (again,) = tune.tune([config], db, max_configs=2, allow_cpu=True, progress=False,
                         retime_before=when)
    assert again.measured == 0 and again.best is not None
    with TuningDB(db, readonly=True) as t:
        rows = t.measured(_key(config))
        best = t.best(_key(config))
    assert best.ms == min(ms for status, ms, _ in rows.values() if status == "ok")
    assert best.measured_at > when   # chosen again, from the new times


@pytest.mark.skipif(current().interpreter, reason="CUDA graphs: needs a GPU")
def test_tune_times_the_gpu_not_the_python_that_launches():
    # a launch whose Python costs 2 ms: timed per call it measures >= 2 ms (the GPU waits
    # for the host); tune times the GPU's work alone, and that work does run
    import time

    import torch
    x = torch.zeros(1024, device="cuda")

    def run():
        time.sleep(0.002)
        x.add_(1)
    ms, how = tune._time(run, current())
    torch.cuda.synchronize()
    assert ms < 0.5 and how is None, (ms, how)
    assert x[0].item() > 10 and bool((x == x[0]).all())


@pytest.mark.parametrize("argv, message", [
    (["tune"], "no problem to tune"),
    (["tune", "--retime-before", "yesterday", *PROBLEM],
     "invalid value 'yesterday' for --retime-before: expected a time as YYYY-MM-DDTHH:MM:SS"),
    (["tune", "--retime-under", "0.05", *PROBLEM],
     "--retime-under: only with --retime-before (what was timed before it, and took less)"),
    (["tune", "--layers", "vgg"], "invalid value 'vgg' for --layers: expected one of issue, selector, resnet50"),
    (["tune", "--max-configs", "many", *PROBLEM],
     "invalid value 'many' for --max-configs: expected a positive integer"),
    (["tune", "--top", "0", *PROBLEM], "invalid value '0' for --top: expected a positive integer"),
    (["tune", "--top", "4", "--max-configs", "4", *PROBLEM], "--top and --max-configs: one or the other"),

    (["tune", "--layers", "issue", "--directions", "fwd,sideways"], "invalid value 'fwd,sideways' for --directions"),
    (["tune", "--lines", "/nonexistent/lines.txt"], "cannot read"),
    (["tune", "--db", "/nonexistent/t.sqlite", *PROBLEM], "folder /nonexistent does not exist"),
    (["tune", "--operation", "conv2d", "-batchsize", "0"], "batch"),
])
def test_bad_tune_command_lines_are_one_error_line(argv, message):
    p = subprocess.run([sys.executable, "-m", "convgen", *argv], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("convgen: error:") and message in lines[0], p.stderr


def test_a_missing_model_for_top_is_one_error_line_before_the_database_is_made(tmp_path):
    db = tmp_path / "t.sqlite"
    p = subprocess.run([sys.executable, "-m", "convgen", "tune", "--db", str(db), "--top", "4",
                        *PROBLEM, "-selector", str(tmp_path / "absent.json")],
                       capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("convgen: error:")
    assert "absent.json" in lines[0] and not db.exists()


def test_tune_flags_and_problem_flags_never_collide():
    tune_keys = set(lab_commands.TUNE_FLAGS.by_key)
    assert not tune_keys & set(run_flags.ROCMLIR_FLAGS.by_key)
    mine, rest = flags.split_flags(["--db", "x.sqlite", "-t", "f16", "--allow-cpu", "-batchsize=2",
                                   "--jobs=3", "-x2"], lab_commands.TUNE_FLAGS)
    assert mine == ["--db", "x.sqlite", "--allow-cpu", "--jobs=3"]
    assert rest == ["-t", "f16", "-batchsize=2", "-x2"]


def test_layers_expand_to_one_problem_per_layer_direction_type_and_batch(tmp_path):
    from convtune import models
    args = lab_commands.parse_tune(["--db", str(tmp_path / "t.sqlite"), "--layers", "issue", "--batch", "1,32",
                           "--types", "bf16", "--directions", "bwd_data"])
    assert len(args["configs"]) == 2 * len(models.CONV_BENCH_LAYERS)
    assert {c.problem.direction.name for c in args["configs"]} == {"bwd_data"}
    assert {c.problem.n for c in args["configs"]} == {1, 32}
    assert {c.problem.dtype.name for c in args["configs"]} == {"bf16"}


def _lines_problems(name):
    import shlex
    path = TUNING / name
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    out = []
    for ln in lines:
        p = lab_commands.parse_tune(["--db", "x.sqlite", *shlex.split(ln)])["configs"][0].problem
        # a layer as models.py writes it, its dilation the eighth entry where it is not 1
        layer = (p.c * p.g, p.k * p.g, p.hi, p.y, p.stride_h, p.pad_h_l, p.g) + ((p.dil_h,) if p.dil_h > 1 else ())
        out.append((layer, p.n, p.direction.name))
    return out


@pytest.mark.parametrize("make,kind,lines_file,directions", [
    ("unaligned_1x1_set", lambda c, k, f, g: f == 1 and g == 1 and bool(c % 16 or k % 16),
     "unaligned-1x1-batches.lines", ("fwd", "bwd_data", "bwd_weight")),
    ("wide_3x3_set", lambda c, k, f, g: f == 3 and g == 1 and min(c, k) >= 256,
     "wide-3x3-bwd-weight.lines", ("bwd_weight",)),
])
def test_extra_batches_add_only_new_problems_of_their_kind_and_match_their_lines_file(
        make, kind, lines_file, directions):
    from convtune import models
    extra = getattr(models, make)()
    have = {(tuple(layer[:7]), batch) for _, layer, batch, _ in models.selector_set()}
    keys = [(tuple(layer[:7]), batch) for _, layer, batch, _ in extra]
    assert extra and len(set(keys)) == len(keys) and not set(keys) & have
    for _, layer, _, _ in extra:
        c, k, _, f, _, _, g = layer[:7]
        assert kind(c, k, f, g)
    # the committed list is what the generator gives: every layer in its directions
    want = [(tuple(layer), batch, d) for _, layer, batch, _ in extra for d in directions]
    assert sorted(_lines_problems(lines_file)) == sorted(want)


def test_neighbour_batches_add_half_and_twice_a_weak_batch_that_nothing_holds():
    from convtune import models
    stem = tuple(models.RESNET50[0])  # the set has it at batch 1, 32 and 256
    have = models.listed_problems() | {(stem, 64, "bwd_data"), (stem, 128, "bwd_weight")}
    got = models.neighbour_batches_set([(stem, "fwd", 32), (stem, "fwd", 32), (stem, "bwd_data", 256),
                                        (stem, "fwd", 1), (stem, "bwd_data", 32),
                                        (stem, "bwd_weight", 64)], have)
    # 32 -> 16 and 64; a repeat adds nothing; 256 -> 128 and 192 (512 is past the cap);
    # 1 -> 1 (held) and 2; bwd_data's 64 is held, its 16 is not (another direction's is no help)
    assert got == [("resnet50", stem, "fwd", 16), ("resnet50", stem, "fwd", 64),
                   ("resnet50", stem, "bwd_data", 128), ("resnet50", stem, "bwd_data", 192),
                   ("resnet50", stem, "fwd", 2),
                   ("resnet50", stem, "bwd_data", 16),
                   # 64's half (32) and twice (128) both held: three quarters and one and a half
                   ("resnet50", stem, "bwd_weight", 48), ("resnet50", stem, "bwd_weight", 96)]


def test_listed_problems_hold_the_wide_3x3_batches_in_bwd_weight_alone():
    from convtune import models
    listed = models.listed_problems()
    wide = [(tuple(layer), batch) for _, layer, batch, _ in models.wide_3x3_set()]
    assert wide and all((*w, "bwd_weight") in listed for w in wide)
    assert not any((*w, d) in listed for w in wide for d in ("fwd", "bwd_data"))
    assert all((tuple(layer), batch, d) in listed for _, layer, batch, _ in models.selector_set()
               for d in ("fwd", "bwd_data", "bwd_weight"))


def test_the_grouped_bwd_weight_list_is_its_generator_less_what_was_measured():
    """tuning/grouped-bwd-weight.lines is models.grouped_bwd_weight_set in its order, less
    problems measured when it was written: each one left out was first measured before
    any listed one was (the tracked data holds both kinds now)."""
    import contextlib
    import sqlite3

    from convtune import models
    made = [(tuple(layer), batch, "bwd_weight") for _, layer, batch, _ in models.grouped_bwd_weight_set()]
    assert made and len(set(made)) == len(made)
    assert all(layer[6] > 1 and layer[0] // layer[6] > 1 for layer, *_ in made)
    listed = _lines_problems("grouped-bwd-weight.lines")
    assert listed == [m for m in made if m in set(listed)], "not the generator's order"
    assert set(listed) <= set(made)
    left_out = [m for m in made if m not in set(listed)]
    assert left_out, "the database held some of the set when the list was written"
    with contextlib.closing(sqlite3.connect(f"file:{store.open_store()}?mode=ro", uri=True)) as db:
        first = {tuple(key): t for *key, t in db.execute(
            "SELECT p.n, p.c, p.k, p.g, p.h, p.y, p.stride_h, MIN(m.measured_at) FROM problems p "
            "JOIN measurement_rows m ON m.problem = p.id WHERE p.direction = 'bwd_weight' "
            "AND p.dtype = 'f16' GROUP BY p.n, p.c, p.k, p.g, p.h, p.y, p.stride_h")}

    def first_measured(problem):
        layer, batch, _ = problem
        return first[batch, layer[0], layer[1], layer[6], layer[2], layer[3], layer[4]]

    assert max(map(first_measured, left_out)) < min(map(first_measured, listed))


def test_the_later_networks_add_only_new_shapes():
    """The networks after models.FIRST_NETWORKS widen the training set with shapes no
    earlier table has (a repeated shape would be the same problem measured twice), and
    leave the suite benchmark's and the extra-batch lists as they were."""
    from convtune import models
    later = [net for net in models.NETWORKS if net not in models.FIRST_NETWORKS]
    assert later == ["convnext_b", "wide_resnet50_2", "efficientnet_v2_s", "googlenet"]
    seen = {tuple(layer) for net in models.FIRST_NETWORKS for layer in models.NETWORKS[net]}
    for net in later:
        shapes = [tuple(layer) for layer in models.NETWORKS[net]]
        assert shapes and len(set(shapes)) == len(shapes) and not set(shapes) & seen, net
        seen |= set(shapes)
    assert not {n for n, *_ in models.suite_set(10**6)} & set(later)
    assert not {n for n, *_ in models.unaligned_1x1_set() + models.wide_3x3_set()} & set(later)
    want = [(tuple(layer), batch, d) for net, layer, batch, _ in models.selector_set() if net in later
            for d in ("fwd", "bwd_data", "bwd_weight")]
    assert len(want) == 3 * sum(len(models.NETWORKS[net]) for net in later)


@pytest.mark.parametrize("db,why", [
    ("missing.sqlite", "does not exist"),
    ("text.sqlite", "cannot be read"),
    ("foreign.sqlite", "is not a convgen tuning database"),
])
def test_weak_picks_refuses_a_bad_database_in_one_line(tmp_path, db, why):
    """scripts/weak-picks opens --db as every reader does (tuning_db.TuningDB): one
    `weak-picks: error:` line naming it, exit 2."""
    import sqlite3
    path = tmp_path / db
    if db == "text.sqlite":
        path.write_text("measurements\n")
    elif db == "foreign.sqlite":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE best (n INTEGER)")
        con.commit()
        con.close()
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "weak-picks"), "--db", str(path),
                        str(ROOT / "docs" / "data" / "config-selection-h100.json")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.startswith(f"weak-picks: error: tuning database '{path}' {why}"), p.stderr
    assert p.stderr.count("\n") == 1 and not p.stdout, p.stderr


def test_weak_picks_leaves_out_what_the_database_holds(tmp_path):
    """A problem the database holds (measured on any GPU) is not listed: with an empty
    database every neighbour is new; with one of them measured, that one goes. Every
    pick counts as weak (--under 1.01)."""
    import shlex

    from convtune.keys import problem_key

    def listed(db):
        p = subprocess.run([sys.executable, str(ROOT / "scripts" / "weak-picks"), "--db", str(db),
                            "--under", "1.01", str(ROOT / "docs" / "data" / "config-selection-h100.json")],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        return [ln for ln in p.stdout.splitlines() if not ln.startswith("#")]

    empty = tmp_path / "empty.sqlite"
    TuningDB(str(empty)).close()
    new = listed(empty)
    assert new
    first = lab_commands.parse_tune(["--db", "x.sqlite", *shlex.split(new[0])])["configs"][0].problem
    with TuningDB(str(empty)) as db:
        key = problem_key(first, "sm90", "NVIDIA H200", "3.6.0", "0123456789ab")
        db.set_best(key, "block_m=64", 1.0, 1.0, "gpu reference [1 1 1]")
    after = listed(empty)
    assert after and new[0] not in after


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_a_tune_line_parses_back_to_its_layer(direction):
    import shlex
    from convtune import models
    layer = models.DEEPLABV3[-1]   # dilated, so the line must carry the dilation too
    assert models.dilation(layer) > 1
    p = lab_commands.parse_tune(["--db", "x.sqlite", *shlex.split(lab_commands.tune_line(layer, 3, direction, "bf16"))])[
        "configs"][0].problem
    c, k, hw, f, s, pad, g = layer[:7]
    assert (p.direction.name, p.dtype.name, p.n) == (direction, "bf16", 3)
    assert (p.c * p.g, p.k * p.g, p.hi, p.wi, p.y, p.stride_h, p.pad_h_l, p.g, p.dil_h) == (
        c, k, hw, hw, f, s, pad, g, models.dilation(layer))
    assert p.layouts["input"] == "nhwgc"   # channels innermost (the group dimension added)


def _compile_all_interrupted(print_first: bool) -> list:
    """tune.compile_all over 60 configs, 2 at a time, where config 0's ptxas dies of the
    terminal's SIGINT and Triton prints its reproducer: after the run's thread got the
    interrupt, or (print_first) before it. -> the configs started."""
    started = []

    def compile_one(i):
        started.append(i)
        if i == 0:
            if print_first:
                print("ptxas failed with error code -2 ... please share the reproducer above")
            time.sleep(0.1)   # the workers started, the run waiting for the first result
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
            time.sleep(0.2)
            if not print_first:
                print("ptxas failed with error code -2 ... please share the reproducer above")
            return "PTXASError"
        time.sleep(0.05)
        return None

    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            tune.compile_all(compile_one, list(range(60)), 2)
    finally:
        signal.signal(signal.SIGINT, old)
    return started


def test_an_interrupt_while_compiling_drops_the_queue_and_the_reproducers(capsys):
    """Ctrl-C reaches ptxas too, and Triton prints each killed compile's PTX: the run stops
    without compiling the rest of the queue and without those pages."""
    started = _compile_all_interrupted(print_first=False)
    assert "reproducer" not in capsys.readouterr().out
    assert len(started) < 20, f"{len(started)} of 60 compiled after the interrupt"


def test_a_reproducer_printed_before_the_interrupt_is_dropped_too(capsys):
    """The SIGINT can land on a compiling thread: its ptxas dies and Triton prints the
    reproducer before the run's own thread sees the interrupt (a tune log held one page of
    PTX that way)."""
    _compile_all_interrupted(print_first=True)
    assert "reproducer" not in capsys.readouterr().out


def test_what_compiles_print_still_shows_when_no_interrupt_comes(capsys):
    def compile_one(i):
        if i == 3:
            print("`ptxas` failed with error code 1 ... please share the reproducer above")
            return "PTXASError: `ptxas` failed with error code 1"
        return None

    assert tune.compile_all(compile_one, list(range(8)), 2)[3].startswith("PTXASError")
    assert "error code 1 ..." in capsys.readouterr().out


@pytest.mark.parametrize("message, stopped", [
    ("`ptxas` failed with error code -2\n`ptxas` stderr:\n", True),    # Ctrl-C, timeout -s INT
    ("PTXAS error: `ptxas` failed with error code -15\n", True),         # a TERM sent to ptxas
    ("`ptxas` failed with error code 1\n`ptxas` stderr:\n", False),    # the config's own
    ("`ptxas` failed with error code -9\n`ptxas` stderr:\n", False),   # killed, say for memory
    ("Internal Triton PTX codegen error\n`ptxas` stderr:\n", False),  # Triton's word for 255
    ("`ptxas` raised SIGSEGV\n", False),
    ("out of resource: shared memory", False),
])
def test_a_compiler_killed_by_the_stop_is_no_failure_of_the_config(message, stopped):
    """A config whose ptxas the run's own stop killed must not be recorded invalid (a
    resumed run would skip it for good): its compile stops the run instead."""
    class PTXASError(RuntimeError):
        pass

    assert tune.stopped_compile(PTXASError(message)) is stopped


def test_a_config_whose_ptxas_the_stop_killed_stops_the_run_unrecorded(tmp_path, monkeypatch):
    """The GPU's compile path, on the CPU: a warmup failing as a ptxas killed by SIGINT
    stops the tune, and no config is recorded invalid (a resumed run would skip it)."""
    from types import SimpleNamespace

    from convgen import backend as backends
    from convgen.kernels import launch

    real = current()

    class Compiling:   # the interpreter's backend, but compiling as a GPU's does
        interpreter = False

        def __getattr__(self, name):
            return getattr(real, name)

    class PTXASError(RuntimeError):
        pass

    def warmup(**kw):
        raise PTXASError("`ptxas` failed with error code -2\n`ptxas` stderr:\n")

    monkeypatch.setattr(backends, "current", Compiling)
    monkeypatch.setattr(launch, "launch_spec", lambda *a, **k: SimpleNamespace(
        kernel=SimpleNamespace(warmup=warmup), runtime={}, constexprs={}, grid=None))
    db = str(tmp_path / "t.sqlite")
    args = lab_commands.parse_tune(["--db", db, "--allow-cpu", *PROBLEM])
    with pytest.raises(KeyboardInterrupt):
        tune.tune(args["configs"], db, jobs=2, allow_cpu=True, progress=False)
    with TuningDB(db, readonly=True) as t:
        assert not [v for v in t.measured(_key(args["configs"][0])).values()
                    if v[0] == "invalid" and "ptxas" in (v[2] or "")]


def test_compile_all_keeps_the_order_of_its_configs():
    assert tune.compile_all(lambda i: f"why {i}" if i % 3 else None, list(range(10)), 4) == [
        None if i % 3 == 0 else f"why {i}" for i in range(10)]


def test_each_problem_of_a_list_has_its_own_line_label():
    """tune's progress and result lines name the problem; a list's dilated, grouped, padded
    or NCHW twin of a layer must not read like the layer itself (two different bwd_weight
    problems once read as one in a log)."""
    base = ["--operation", "conv2d_bwd_weight", "-t", "f16", "-batchsize", "64", "-in_channels",
            "256", "-out_channels", "256", "-in_h", "64", "-in_w", "64", "-fil_h", "3", "-fil_w",
            "3", "-padding_h", "1", "-padding_w", "1", "-in_layout", "nhwc", "-fil_layout",
            "kyxc", "-out_layout", "nhwk"]

    def label(*change):
        argv = list(base)
        for flag, value in zip(change[::2], change[1::2]):
            if flag in argv:
                argv[argv.index(flag) + 1] = value
            else:
                argv += [flag, value]
        return tune._short(lab_commands.parse_tune(["--db", "x.sqlite", *argv])["configs"][0].problem)

    assert label() == "bwd_weight f16 N64 C256 K256 64x64 3x3/s1 p1"
    twins = [label(), label("-dilation_h", "2", "-dilation_w", "2", "-padding_h", "2", "-padding_w", "2"),
             label("-dilation_h", "2", "-dilation_w", "2"), label("-groupsize", "32"),
             label("-padding_h", "0", "-padding_w", "0"), label("-padding_w", "0"),
             label("-conv_stride_w", "2"), label("-t", "bf16"), label("-in_w", "63"),
             label("-in_layout", "nchw", "-fil_layout", "kcyx", "-out_layout", "nkhw")]
    assert len(set(twins)) == len(twins), twins
    assert "/d2" in twins[1] and "G32" in twins[3] and "/s1x2" in twins[6]

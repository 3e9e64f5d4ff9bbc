"""The tracked tuning data as text and the local store built from it: a batch file holds
exactly the rows it was written from; the store is built on first use, follows added,
changed and removed files, keeps what was measured here, and exports it once; damaged
files are named with their line; interpreter times never reach the tracked data; a
Triton upgrade keeps the tuned picks."""
import json
import os
import subprocess
import sys

import pytest

from convtune import tuning_text
from convtune import keys, store
from convgen.errors import ConvgenError
from convtune.tuning_db import TuningDB
from convtune.keys import nearest_version
from tests.test_tuning_db import _key

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tflops(key, ms):
    """As convgen tune computes it (the text keeps the time, not this)."""
    return keys.problem_from_key(key).flops / ms / 1e9


def _measure(db, key, configs, start_ms=1.0):
    for i, config in enumerate(configs):
        db.record(key, config, "ok", ms=start_ms + i, tflops=_tflops(key, start_ms + i))


@pytest.fixture
def store_env(tmp_path, monkeypatch):
    """A data folder and a cache folder of the test's own: the default store is theirs."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    data.mkdir()
    monkeypatch.setenv("CONVGEN_TUNING_DATA", str(data))
    monkeypatch.setenv("CONVGEN_CACHE_DIR", str(cache))
    monkeypatch.delenv("CONVGEN_TUNING_DB", raising=False)
    store._FRESH.clear()
    yield data
    store._FRESH.clear()


def _dump_rows(path):
    with TuningDB(path, readonly=True) as db:
        return db.dump()


def test_a_batch_reads_back_as_the_rows_it_was_written_from(tmp_path):
    # every column of every row, to the second; tflops follows from the problem and the time
    src = str(tmp_path / "src.sqlite")
    a, b = _key(n=7), _key("bwd_weight", n=3)
    with TuningDB(src) as db:
        _measure(db, a, ["block_m=64", "block_m=128"])
        db.record(a, "block_m=256", "invalid", error="too much shared memory")
        db.record(b, "block_m=32", "ok", ms=0.125, tflops=_tflops(b, 0.125),
                  error="timed per launch, not as a CUDA graph: x")
        db.record(b, "block_m=16", "wrong", ms=0.5, error="failed the reference check: bits [1, 1, 0]")
        db.set_best(a, "block_m=64", 1.0, _tflops(a, 1.0), "gpu reference [1 1 1]")
        db.set_best(b, "block_m=32", 0.125, _tflops(b, 0.125), "gpu reference [1 1 1]",
                    searched="the first 2 of 9")
        written, untimed = db.export(str(tmp_path))
    assert untimed == 0 and [os.path.basename(w).split("-")[5] for w in written] == ["bwd_weight", "fwd"]
    built = str(tmp_path / "built.sqlite")
    with TuningDB(built) as db:
        assert db.sync(str(tmp_path)) == 2
    assert _dump_rows(built) == _dump_rows(src)
    assert "block_m=256" in _dump_rows(built) and "timed per launch" in _dump_rows(built)


def test_the_text_does_not_depend_on_the_rows_order_and_the_name_on_the_text():
    rows = [{**_key(n=n), "config": f"block_m={m}", "status": "ok", "ms": 1.0 / m, "error": None,
             "measured_at": 1_700_000_000 + n + m} for n in (1, 2) for m in (16, 32)]
    one = tuning_text.batch_text(rows, [])
    assert one == tuning_text.batch_text(rows[::-1], [])
    header = json.loads(one.splitlines()[0])
    assert header == {"convgen-tuning-data": 1, "configs": ["block_m=16", "block_m=32"]}
    name = tuning_text.batch_name(one, "sm90", "NVIDIA H100 80GB HBM3", "fwd", 1_700_000_000)
    assert name.startswith("sm90-nvidia-h100-80gb-hbm3-fwd-20231114-") and name.endswith(".jsonl")
    assert name != tuning_text.batch_name(one + "\n", "sm90", "NVIDIA H100 80GB HBM3", "fwd", 1_700_000_000)


def test_the_store_is_built_on_first_use_and_follows_the_text(store_env):
    data = store_env
    a, b = _key(n=7), _key(n=9)
    with TuningDB(str(data / "x.sqlite")) as db:
        _measure(db, a, ["block_m=64", "block_m=128"])
        db.set_best(a, "block_m=64", 1.0, 1.0, "gpu reference [1 1 1]")
        first, _ = db.export(str(data))
    os.unlink(data / "x.sqlite")
    path = store.resolve("")
    assert path == store.store_path() and os.path.dirname(path) == os.environ["CONVGEN_CACHE_DIR"]
    with TuningDB(path, readonly=True) as db:
        assert db.best(a).config == "block_m=64" and db.best(b) is None
    # a file added (another GPU's run, a merge): its rows join, nothing else is read again
    with TuningDB(str(data / "y.sqlite")) as db:
        _measure(db, b, ["block_m=32"])
        db.set_best(b, "block_m=32", 1.0, 1.0, "gpu reference [1 1 1]")
        db.export(str(data))
    os.unlink(data / "y.sqlite")
    with TuningDB(store.resolve(""), readonly=True) as db:
        assert db.best(b).config == "block_m=32"
        assert len(db.synced_with()) == 2
    # a file gone (a branch without it): its rows go with it
    os.unlink(first[0])
    with TuningDB(store.resolve(""), readonly=True) as db:
        assert db.best(a) is None and db.best(b).config == "block_m=32"


def test_rows_measured_here_stay_through_a_rebuild_and_are_exported_once(store_env):
    data = store_env
    a, here = _key(n=7), _key(n=11)
    with TuningDB(str(data / "x.sqlite")) as db:
        _measure(db, a, ["block_m=64"])
        tracked, _ = db.export(str(data))
    os.unlink(data / "x.sqlite")
    with TuningDB(store.resolve("", writing=True)) as db:   # as convgen tune writes
        _measure(db, here, ["block_m=16", "block_m=32"])
        db.set_best(here, "block_m=16", 1.0, 1.0, "gpu reference [1 1 1]")
    os.utime(tracked[0], ns=(1, 1))   # a tracked file changed: every tracked row is read again
    with TuningDB(store.resolve(""), readonly=True) as db:
        assert db.best(here).config == "block_m=16" and set(db.measured(a)) == {"block_m=64"}
    p = subprocess.run([sys.executable, "-m", "convgen", "tuning-export"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "tools")})
    assert p.returncode == 0, p.stderr
    new = sorted(set(tuning_text.data_files(str(data))) - set(tracked))
    assert len(new) == 1 and f"{new[0]}: 1 problem(s)" in p.stdout
    [(key, rows, best)] = list(tuning_text.read_batch(new[0]))
    assert key[7] == 11 and {r[0] for r in rows} == {"block_m=16", "block_m=32"} and best[0] == "block_m=16"
    # a second export finds nothing new, and writes nothing
    p = subprocess.run([sys.executable, "-m", "convgen", "tuning-export"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "tools")})
    assert p.returncode == 0 and "holds nothing that" in p.stdout, p.stdout
    assert len(tuning_text.data_files(str(data))) == 2
    # the store built from the two files alone holds what the old store held
    store._FRESH.clear()
    os.unlink(store.store_path())
    with TuningDB(store.resolve(""), readonly=True) as db:
        assert db.best(here).config == "block_m=16" and set(db.measured(a)) == {"block_m=64"}


def test_a_later_measurement_wins_whichever_file_holds_it(store_env, tmp_path):
    data = store_env
    a = _key(n=7)
    for ms, name in ((2.0, "old"), (1.0, "new")):
        with TuningDB(str(tmp_path / f"{name}.sqlite")) as db:
            db.record(a, "block_m=64", "ok", ms=ms, tflops=1.0)
            db.con.execute("UPDATE measurement_rows SET measured_at = ?", (1_000 if name == "old" else 2_000,))
            db.export(str(data))
    with TuningDB(store.resolve(""), readonly=True) as db:
        assert db.measured(a)["block_m=64"][1] == 1.0
        assert db.measured(a)["block_m=64"] == ("ok", 1.0, None)


def test_interpreter_times_never_reach_the_tracked_data(store_env):
    data = store_env
    key = {**_key(n=5), "arch": "interpreter", "device": "interpreter"}
    with TuningDB(store.resolve("", writing=True)) as db:
        _measure(db, key, ["block_m=64"])
        written, untimed = db.export(str(data))
    assert written == [] and untimed == 1 and tuning_text.data_files(str(data)) == []


def test_a_damaged_data_file_is_named_with_its_line(store_env):
    data = store_env
    with TuningDB(str(data / "x.sqlite")) as db:
        _measure(db, _key(n=7), ["block_m=64"])
        _measure(db, _key(n=8), ["block_m=64"])
        [path], _ = db.export(str(data))
    os.unlink(data / "x.sqlite")
    lines = open(path).read().splitlines()
    with open(path, "w") as f:   # cut in the middle of its last line, as a bad copy leaves it
        f.write("\n".join(lines[:-1] + [lines[-1][:40]]) + "\n")
    with pytest.raises(ConvgenError, match=rf"tuning data '{path}', line 3: .*damaged"):
        store.resolve("")
    p = subprocess.run([sys.executable, "-m", "convgen", "tuning-stats"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "tools")})
    assert p.returncode == 2 and p.stderr.startswith("convgen: error: ") and len(p.stderr.splitlines()) == 1
    assert "line 3" in p.stderr and "Traceback" not in p.stderr
    with open(path, "w") as f:
        f.write('{"convgen-tuning-data": 99, "configs": []}\n')
    with pytest.raises(ConvgenError, match="format version 99; this convgen reads version 1"):
        tuning_text.stats(str(data))


def test_several_processes_open_a_new_store_at_once(store_env):
    # one builds it, the others wait for it and read the same rows
    data = store_env
    with TuningDB(str(data / "x.sqlite")) as db:
        for n in range(1, 40):
            _measure(db, _key(n=n), [f"block_m={m}" for m in (16, 32, 64, 128)])
        db.export(str(data))
    os.unlink(data / "x.sqlite")
    code = ("import sys; from convtune import store; from convtune.tuning_db import TuningDB\n"
            "with TuningDB(store.resolve(''), readonly=True) as db: print(db.counts()['ok'])")
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "tools")})
             for _ in range(4)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert [o.strip() for o, _ in outs] == ["156"] * 4


def test_tuning_stats_reads_the_tracked_text(store_env):
    data = store_env
    with TuningDB(str(data / "x.sqlite")) as db:
        for device in ("NVIDIA H100 80GB HBM3", "NVIDIA H200"):
            for n in (1, 2, 3):
                key = {**_key(n=n), "device": device}
                _measure(db, key, ["block_m=16", "block_m=32"])
                if n < 3 or device == "NVIDIA H200":
                    db.set_best(key, "block_m=16", 1.0, 1.0, "gpu reference [1 1 1]")
        db.export(str(data))
    p = subprocess.run([sys.executable, "-m", "convgen", "tuning-stats"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "tools")})
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["sm90 'NVIDIA H100 80GB HBM3' 3.6.0 problems=2 measurements=6",
                                     "sm90 'NVIDIA H200' 3.6.0 problems=3 measurements=6"]


def test_every_problem_tuned_is_in_the_tracked_data():
    # the data holds every checked best measured: 1663 problems on the H100 and 3513 on
    # the H200 at least (it only grows), each of today's kernels (test_tuning_db)
    got = {(arch, device): problems for arch, device, _, problems, _ in
           tuning_text.stats(os.path.join(ROOT, "tuning", "data"))}
    assert got[("sm90", "NVIDIA H100 80GB HBM3")] >= 1663 and got[("sm90", "NVIDIA H200")] >= 3513


@pytest.mark.parametrize("want, have, near", [
    ("3.6.0", ["3.6.0", "3.5.0"], "3.6.0"),
    ("3.9.0", ["3.6.0", "3.5.0"], "3.6.0"),
    ("3.9.0", ["3.6.0", "3.10.0"], "3.10.0"),   # as near, the newer
    ("3.2.0+gitabcd", ["3.1.0", "2.9.0", "3.4.0"], "3.1.0"),
    ("4.0.0", ["3.6.0", "4.2.0"], "4.2.0"),      # the same major first
])
def test_nearest_version(want, have, near):
    assert nearest_version(want, have) == near


def test_a_run_on_another_triton_takes_the_nearest_version_s_best(tmp_path):
    db_path = str(tmp_path / "t.sqlite")
    key = _key()
    with TuningDB(db_path) as db:
        db.set_best({**key, "triton": "3.5.0"}, "block_m=32", 2.0, 1.0, "gpu reference [1 1 1]")
        db.set_best({**key, "triton": "3.6.0"}, "block_m=64", 1.0, 1.0, "gpu reference [1 1 1]")
        db.set_best({**key, "triton": "3.6.0", "kernel": "ffffffffffff"}, "block_m=16", 0.5, 1.0, "x")
    with TuningDB(db_path, readonly=True) as db:
        assert db.best({**key, "triton": "3.9.0"}) is None
        got = db.best_near({**key, "triton": "3.9.0"})
        assert (got.config, got.triton) == ("block_m=64", "3.6.0")
        assert db.best_near({**key, "triton": "3.5.0"}).config == "block_m=32"
        assert db.best_near({**key, "triton": "3.9.0", "device": "NVIDIA H200"}) is None


def test_tuning_stats_counts_a_list_s_problems_searched_on_each_device(store_env, tmp_path):
    data = store_env
    lines = tmp_path / "two.lines"
    line = ("--operation conv2d -t f16 -batchsize={n} -in_channels=64 -out_channels=64 -in_h=56 -in_w=56 "
            "-fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1 -in_layout=nhwc -fil_layout=kyxc -out_layout=nhwk")
    lines.write_text("# a comment\n" + line.format(n=7) + "\n" + line.format(n=8) + "\n")
    with TuningDB(str(tmp_path / "x.sqlite")) as db:
        _measure(db, _key(n=7), ["block_m=16"])
        db.set_best(_key(n=7), "block_m=16", 1.0, 1.0, "gpu reference [1 1 1]")
        _measure(db, _key(n=8), ["block_m=16"])   # a search stopped before its best
        db.export(str(data))
    p = subprocess.run([sys.executable, "-m", "convgen", "tuning-stats", "--lines", str(lines)],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": os.path.join(ROOT, "tools")})
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["sm90 'NVIDIA H100 80GB HBM3' 3.6.0 searched=1 of=2"]


def test_a_run_s_line_names_the_triton_version_that_measured_its_tuned_entry(tmp_path):
    """A run on this Triton whose problem was tuned only under another version takes that
    version's best, and its `#` line says which."""
    import triton

    from convgen import backend, cli
    from convgen import picks
    from convtune.keys import key_for
    backend.ensure_interpreter_if_no_gpu()
    be = backend.current()
    run = cli.parse(["--operation", "conv2d", "-t", "f16", "-batchsize", "2", "-in_channels", "8",
                     "-out_channels", "16", "-in_h", "5", "-in_w", "5", "-fil_h", "3", "-fil_w", "3",
                     "-in_layout", "nhwc", "-fil_layout", "kyxc", "-out_layout", "nhwk", "-pv", "-x2"])
    key = {**key_for(run.problem, be), "triton": "0.1.0"}
    assert triton.__version__ != "0.1.0"
    rule, _ = picks.select(run.problem, be, True, None, None)
    other = "block_m=32,block_n=16,block_k=16,num_warps=4,num_stages=1,split=1,group_m=8"
    assert rule.describe() != other
    db = str(tmp_path / "t.sqlite")
    with TuningDB(db) as t:
        t.set_best(key, other, 0.5, 1.0, "cpu reference [1 1 1]")
    cfg, source = picks.select(run.problem, be, True, None, db)
    assert cfg.describe() == other
    assert source.startswith("tuned: the fastest measured here (0.500 ms, ") and "Triton 0.1.0, t.sqlite)" in source


def test_a_reader_with_no_data_leaves_no_store_behind(store_env, tmp_path):
    # a copy of the tools without tuning/data (a test's scratch checkout, say): a run finds
    # no tuning database and the cache folder stays empty; a writer still gets its store
    cache = os.environ["CONVGEN_CACHE_DIR"]
    assert store.resolve("") is None and not os.path.exists(cache)
    path = store.resolve("", writing=True)
    assert path == store.store_path() and os.path.exists(path)
    assert store.resolve("") == path   # once it exists, readers take it

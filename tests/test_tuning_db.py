"""The tuning database: keys, measurements, the best config; several writers at once; a
killed writer loses nothing it committed; foreign, damaged and newer files are refused
with one clear error and left untouched."""
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from convgen.dtypes import elem_type
from convgen.errors import ConvgenError
from convgen.problem import make_problem
from convtune.keys import problem_from_key, problem_key
from convtune.tuning_db import (SCHEMA_VERSION, SHAPE_COLUMNS, Best, TuningDB, fold_log,
                                in_wal_mode)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCHEMA_VERSION_TEXT = str(SCHEMA_VERSION)


def _key(direction="fwd", n=256, arch="sm90", kernel="0123456789ab", **kw):
    p = make_problem(direction=direction, dtype=elem_type(kw.pop("dtype", "f16")), n=n, g=1,
                     c_total=64, k_total=64, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    return problem_key(p, arch, "NVIDIA H100 80GB HBM3", "3.6.0", kernel)


def test_records_measurements_and_the_best(tmp_path):
    path = str(tmp_path / "t.sqlite")
    key = _key()
    with TuningDB(path) as db:
        db.record(key, "block_m=128,block_n=128", "ok", ms=1.5, tflops=300.0)
        db.record(key, "block_m=256,block_n=256", "invalid", error="needs 300000 bytes of shared memory")
        db.record(key, "block_m=64,block_n=64", "ok", ms=2.5, tflops=180.0)
        db.set_best(key, "block_m=128,block_n=128", 1.5, 300.0, "pv_with_gpu [1 1 1]")
    with TuningDB(path, readonly=True) as db:
        got = db.measured(key)
        assert got["block_m=256,block_n=256"][0] == "invalid"
        assert got["block_m=64,block_n=64"][:2] == ("ok", 2.5)
        assert db.best(key).config == "block_m=128,block_n=128"
        # every key field matters: another batch, direction, type or arch has nothing
        for other in (_key(n=32), _key("bwd_data"), _key(dtype="bf16"), _key(arch="gfx942")):
            assert db.best(other) is None and db.measured(other) == {}
        assert db.counts() == {"best": 1, "ok": 2, "invalid": 1}
        assert '"table": "best"' in db.dump()


# version 3's two tables, the key and the config spelled out in every row (what files made
# before version 4 hold); version 2 is the same without best.searched
_V3_KEY = ("arch TEXT NOT NULL, device TEXT NOT NULL, triton TEXT NOT NULL, kernel TEXT NOT NULL, "
           "direction TEXT NOT NULL, dtype TEXT NOT NULL, layouts TEXT NOT NULL, n INTEGER NOT NULL, "
           "c INTEGER NOT NULL, k INTEGER NOT NULL, g INTEGER NOT NULL, h INTEGER NOT NULL, "
           "w INTEGER NOT NULL, y INTEGER NOT NULL, x INTEGER NOT NULL, stride_h INTEGER NOT NULL, "
           "stride_w INTEGER NOT NULL, pad TEXT NOT NULL, dil_h INTEGER NOT NULL, dil_w INTEGER NOT NULL")
_V3_PK = ("arch, device, triton, kernel, direction, dtype, layouts, n, c, k, g, h, w, y, x, "
          "stride_h, stride_w, pad, dil_h, dil_w")


def _old_file(path, version, measurements=(), bests=()):
    """A file of schema `version` (2 or 3) with these rows: (key, config, status, ms, error,
    measured_at) and (key, config, ms, checked, measured_at, searched)."""
    searched = ", searched TEXT NOT NULL DEFAULT 'space'" if version == 3 else ""
    con = sqlite3.connect(path)
    con.executescript(f"""
        CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', 'convgen-tuning'), ('version', '{version}');
        CREATE TABLE measurements ({_V3_KEY}, config TEXT NOT NULL, status TEXT NOT NULL, ms REAL,
            tflops REAL, error TEXT, measured_at TEXT NOT NULL, PRIMARY KEY ({_V3_PK}, config)) WITHOUT ROWID;
        CREATE TABLE best ({_V3_KEY}, config TEXT NOT NULL, ms REAL NOT NULL, tflops REAL,
            checked TEXT NOT NULL, measured_at TEXT NOT NULL{searched}, PRIMARY KEY ({_V3_PK})) WITHOUT ROWID;""")
    for key, config, status, ms, error, when in measurements:
        row = {**key, "config": config, "status": status, "ms": ms, "tflops": None, "error": error,
               "measured_at": when}
        con.execute(f"INSERT INTO measurements ({', '.join(row)}) VALUES ({', '.join(':' + c for c in row)})", row)
    for key, config, ms, checked, when, how in bests:
        row = {**key, "config": config, "ms": ms, "tflops": 1.0, "checked": checked, "measured_at": when,
               **({"searched": how} if version == 3 else {})}
        con.execute(f"INSERT INTO best ({', '.join(row)}) VALUES ({', '.join(':' + c for c in row)})", row)
    con.commit()
    con.close()


def _version(path) -> str:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return con.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()[0]
    finally:
        con.close()


def test_devices_searched_names_each_gpu_that_finished_a_whole_search_under_any_kernel(tmp_path):
    path = str(tmp_path / "t.sqlite")
    h100 = _key(n=7)
    h200 = {**h100, "device": "NVIDIA H200"}
    old_kernel = {**_key(n=13), "kernel": "aaaaaaaaaaaa"}
    stopped = _key(n=5)   # timed in part, no best: a search that did not finish
    few = _key(n=3)       # tune --top 2: the best of a few, not of the space
    with TuningDB(path) as db:
        for key in (h100, h200, old_kernel, stopped, few):
            db.record(key, "block_m=64", "ok", ms=1.0, tflops=9.0)
        for key in (h100, h200, old_kernel):
            db.set_best(key, "block_m=64", 1.0, 9.0, "cpu [1 1 1]")
        db.set_best(few, "block_m=64", 1.0, 9.0, "cpu [1 1 1]", searched="the first 2 of 40 of the space")
    shape = lambda key: tuple(key[c] for c in SHAPE_COLUMNS)  # noqa: E731
    with TuningDB(path, readonly=True) as db:
        got = db.devices_searched()
    assert got == {shape(h100): {"NVIDIA H100 80GB HBM3", "NVIDIA H200"},
                   shape(old_kernel): {"NVIDIA H100 80GB HBM3"}}
    assert shape(h100) != shape(old_kernel)
    # any best, a --top run's too (what scripts/weak-picks leaves out); a stopped search none
    with TuningDB(path, readonly=True) as db:
        assert db.devices_searched(whole=False) == {**got, shape(few): {"NVIDIA H100 80GB HBM3"}}


@pytest.mark.parametrize("version", [2, 3])
def test_devices_searched_reads_an_older_file_as_it_is(tmp_path, version):
    path = str(tmp_path / "old.sqlite")
    key = _key(n=11)
    _old_file(path, version, bests=[(key, "block_m=64", 1.0, "cpu [1 1 1]", "2026-11-20T10:00:00", "space")])
    with TuningDB(path, readonly=True) as db:
        assert db.devices_searched() == {tuple(key[c] for c in SHAPE_COLUMNS): {"NVIDIA H100 80GB HBM3"}}
    assert _version(path) == str(version)


def test_a_version_2_file_reads_as_whole_searches_and_its_first_writer_upgrades_it(tmp_path):
    # version 2 had no best.searched: a reader (a run, a read-only checkout) leaves the file
    # as it is; a writer adds the column, every old best of a whole space
    path = str(tmp_path / "old.sqlite")
    key = _key()
    _old_file(path, 2, bests=[(key, "block_m=64", 1.0, "gpu reference [1 1 1]", "2026-01-02T03:04:05", None)])
    before = open(path, "rb").read()
    with TuningDB(path, readonly=True) as db:
        assert db.best(key).searched == "space" and db.rows("SELECT searched FROM best") == [{"searched": "space"}]
    assert open(path, "rb").read() == before
    with TuningDB(path) as db:
        assert db.best(key) == Best("block_m=64", 1.0, 1.0, "gpu reference [1 1 1]", "2026-01-02T03:04:05", "space")
        db.set_best(_key(n=32), "block_m=128", 1.0, 2.0, "gpu reference [1 1 1]",
                    searched="the first 6 of 40 ranked by sm90.json")
    assert _version(path) == SCHEMA_VERSION_TEXT
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        assert sorted(con.execute("SELECT n, searched FROM best")) == [
            (32, "the first 6 of 40 ranked by sm90.json"), (256, "space")]
    con.close()
    with TuningDB(path) as db:   # opened again: nothing left to upgrade
        assert db.best(_key(n=32)).searched.startswith("the first 6")


def test_a_version_3_file_is_read_as_it_is_and_its_first_writer_stores_it_by_number(tmp_path):
    path = str(tmp_path / "v3.sqlite")
    k1, k2 = _key(), _key("bwd_weight", n=7)
    _old_file(path, 3, measurements=[(k1, "block_m=64", "ok", 2.0, None, "2026-01-02T03:04:05"),
                                     (k1, "block_m=128", "invalid", None, "too much shared memory",
                                      "2026-01-02T03:04:06"),
                                     (k2, "block_m=64", "ok", 0.5, None, "2026-02-03T04:05:06")],
              bests=[(k1, "block_m=64", 2.0, "cpu [1 1 1]", "2026-01-02T03:04:07", "space"),
                     (k2, "block_m=64", 0.5, "cpu [1 1 1]", "2026-02-03T04:05:07", "the first 6")])
    before = open(path, "rb").read()
    with TuningDB(path, readonly=True) as db:
        dump = db.dump()
        assert db.measured(k1) == {"block_m=64": ("ok", 2.0, None),
                                   "block_m=128": ("invalid", None, "too much shared memory")}
    assert open(path, "rb").read() == before and _version(path) == "3"
    with TuningDB(path) as db:
        assert db.dump() == dump   # every row and every time, to the second
        assert db.timed_before(k1, "2026-01-02T03:04:06") == ["block_m=64"]
        assert db.best(k2).searched == "the first 6"
    assert _version(path) == SCHEMA_VERSION_TEXT
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        tables = {n for (n,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert con.execute("SELECT count(*) FROM problems").fetchone() == (2,)
        assert con.execute("SELECT count(*) FROM configs").fetchone() == (2,)
    con.close()
    assert not tables & {"measurements_v3", "best_v3"}


def test_a_version_3_file_with_a_time_it_cannot_store_is_refused_and_left_as_it_was(tmp_path):
    path = str(tmp_path / "v3.sqlite")
    _old_file(path, 3, measurements=[(_key(), "a", "ok", 1.0, None, "2026-01-02T03:04:05"),
                                     (_key(), "b", "ok", 2.0, None, "last tuesday")])
    before = open(path, "rb").read()
    with pytest.raises(ConvgenError, match=r"1 row\(s\) of measurements have a measured_at .*'last tuesday'"):
        TuningDB(path)
    assert open(path, "rb").read() == before
    with TuningDB(path, readonly=True) as db:   # still read as it is
        assert set(db.measured(_key())) == {"a", "b"}


def test_a_version_4_file_is_read_as_it_is_and_its_first_writer_marks_its_rows_as_measured_here(tmp_path):
    # version 4 did not say where a row came from: each row is one measured here, which
    # `convgen tuning-export` then writes to the tracked text
    path = str(tmp_path / "v4.sqlite")
    key = _key(n=3)
    with TuningDB(path) as db:
        db.record(key, "block_m=64", "ok", ms=2.0)
        db.set_best(key, "block_m=64", 2.0, None, "cpu reference [1 1 1]")
        dump = db.dump()
    con = sqlite3.connect(path)   # back to version 4: no sources, no text_files
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
        con.execute(f"DROP TRIGGER {name}")
    con.execute("ALTER TABLE measurement_rows DROP COLUMN source")
    con.execute("ALTER TABLE best_rows DROP COLUMN source")
    con.execute("DROP TABLE text_files")
    con.execute("UPDATE meta SET value = '4' WHERE name = 'version'")
    con.commit()
    con.close()
    with TuningDB(path, readonly=True) as db:
        assert db.dump() == dump and db.synced_with() == {}
    assert _version(path) == "4"
    with TuningDB(path) as db:
        assert db.dump() == dump
        db.record(key, "block_m=128", "ok", ms=1.0)   # the triggers work again
        written, _ = db.export(str(tmp_path))
    assert _version(path) == SCHEMA_VERSION_TEXT and len(written) == 1
    with TuningDB(str(tmp_path / "built.sqlite")) as db:
        db.sync(str(tmp_path))
        assert set(db.measured(key)) == {"block_m=64", "block_m=128"}


def test_an_upgraded_file_gives_the_spelled_out_rows_space_back(tmp_path):
    path = str(tmp_path / "v3.sqlite")
    _old_file(path, 3, measurements=[(_key(n=n), f"block_m={m}", "ok", 1.0, None, "2026-01-02T03:04:05")
                                     for n in range(1, 40) for m in range(20)])
    before = os.path.getsize(path)
    TuningDB(path).close()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert con.execute("PRAGMA freelist_count").fetchone() == (0,)
    finally:
        con.close()
    assert os.path.getsize(path) < before


def test_a_writer_s_close_forgets_keys_and_configs_no_row_uses(tmp_path):
    path = str(tmp_path / "t.sqlite")
    with TuningDB(path) as db:
        for n in (1, 2, 3):
            db.record(_key(n=n), f"cfg{n}", "ok", ms=1.0)
        db.set_best(_key(n=3), "cfg3", 1.0, 1.0, "cpu [1 1 1]")
        db.con.execute("DELETE FROM measurements WHERE n = 1")
        db.con.execute("UPDATE measurements SET kernel = 'newer' WHERE n = 2")   # re-keyed
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert sorted(con.execute("SELECT n, kernel FROM problems")) == [(2, "newer"), (3, "0123456789ab")]
        assert sorted(c for (c,) in con.execute("SELECT config FROM configs")) == ["cfg2", "cfg3"]
    finally:
        con.close()


def test_sql_written_for_the_spelled_out_tables_works_through_the_views(tmp_path):
    # merging the rows a GPU machine sent back is `INSERT OR REPLACE INTO measurements
    # SELECT * FROM n.measurements`, from a file of either version; tests and one-off fixes
    # UPDATE and DELETE rows by their spelled-out key
    old, new = str(tmp_path / "old.sqlite"), str(tmp_path / "new.sqlite")
    k1, k2 = _key(), _key(n=3)
    _old_file(old, 3, measurements=[(k1, "a", "ok", 9.0, None, "2026-03-01T00:00:00"),
                                    (k2, "b", "ok", 4.0, None, "2026-03-01T00:00:01")],
              bests=[(k2, "b", 4.0, "cpu [1 1 1]", "2026-03-01T00:00:02", "space")])
    with TuningDB(new) as db:
        db.record(k1, "a", "ok", ms=5.0)
        db.record(k1, "c", "wrong", error="bits [1 0 0]")
        db.set_best(k1, "a", 5.0, 1.0, "cpu [1 1 1]")
    con = sqlite3.connect(new, isolation_level=None)
    try:
        con.execute(f"ATTACH '{old}' AS n")
        con.execute("INSERT OR REPLACE INTO measurements SELECT * FROM n.measurements")
        con.execute("INSERT OR REPLACE INTO best SELECT * FROM n.best")
        con.execute("DETACH n")
        with pytest.raises(sqlite3.IntegrityError):   # a plain INSERT of a measured config
            con.execute("INSERT INTO measurements SELECT * FROM measurements WHERE config = 'c'")
        con.execute("UPDATE measurements SET ms = 1.5 WHERE config = 'b'")
        con.execute("UPDATE best SET config = 'c', ms = 0.5 WHERE n = 256")
        con.execute("UPDATE measurements SET kernel = 'newer' WHERE n = 3")   # re-keyed
        con.execute("DELETE FROM measurements WHERE status = 'wrong'")
    finally:
        con.close()
    with TuningDB(new, readonly=True) as db:
        assert db.measured(k1) == {"a": ("ok", 9.0, None)}   # replaced by the merged row
        assert db.measured(k2) == {} and db.measured({**k2, "kernel": "newer"}) == {"b": ("ok", 1.5, None)}
        assert db.best(k1).config == "c" and db.best(k1).ms == 0.5
        assert db.best(k2).measured_at == "2026-03-01T00:00:02"
        assert db.counts() == {"best": 2, "ok": 2}


def test_a_measurement_of_the_same_config_replaces_the_old_one(tmp_path):
    with TuningDB(str(tmp_path / "t.sqlite")) as db:
        db.record(_key(), "cfg", "ok", ms=2.0)
        db.record(_key(), "cfg", "ok", ms=1.0)
        assert db.measured(_key()) == {"cfg": ("ok", 1.0, None)}


WRITER = """
import os, sys
sys.path.insert(0, sys.argv[1])
from convtune.tuning_db import TuningDB
from tests.test_tuning_db import _key
db = TuningDB(sys.argv[2])
for i in range(int(sys.argv[4])):
    db.record(_key(n=int(sys.argv[3])), f"cfg{i}", "ok", ms=float(i))
    print(i, flush=True)
if sys.argv[5] == "gone":
    os._exit(0)   # killed: gone without its close, which folds the log back
if sys.argv[5] == "close":
    db.close()
"""   # "forgot": the program ends without the close


def _writer(path, n, rows, ending="close"):
    """A process writing `rows` rows, then: "close", "gone" (killed) or "forgot" (no close)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.Popen([sys.executable, "-c", WRITER, os.path.join(ROOT, "tools"), path,
                             str(n), str(rows), ending],
                            stdout=subprocess.PIPE, text=True, env=env)


def test_several_processes_write_at_once(tmp_path):
    path = str(tmp_path / "t.sqlite")
    TuningDB(path).close()
    procs = [_writer(path, n, 40) for n in (1, 2, 3, 4)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    with TuningDB(path, readonly=True) as db:
        assert [len(db.measured(_key(n=n))) for n in (1, 2, 3, 4)] == [40, 40, 40, 40]


def _open_and_record(path: str, n: int) -> str | None:
    try:
        with TuningDB(path) as db:
            db.record(_key(n=n), "cfg", "ok", ms=1.0)
    except Exception as e:   # reported, not raised: the pool would stop at the first
        return str(e)
    return None


def test_several_processes_create_a_new_file_at_once(tmp_path):
    # one writer per GPU on a path that does not exist yet: the schema is made in one
    # transaction, so none of them sees tables without the meta that names them (made
    # statement by statement, most of such starts failed: "not a convgen tuning database")
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(6) as pool:   # forked: they start together
        for trial in range(10):
            path = str(tmp_path / f"new{trial}.sqlite")
            assert pool.starmap(_open_and_record, [(path, n) for n in range(1, 7)]) == [None] * 6
            with TuningDB(path, readonly=True) as db:
                assert [len(db.measured(_key(n=n))) for n in range(1, 7)] == [1] * 6


def test_opening_waits_out_a_lock_sqlite_reports_at_once(tmp_path, monkeypatch):
    """SQLite says "database is locked" without waiting to a connection that opens while
    another folds its log back (seen once in 4 writers on a loaded CI machine); opening
    tries again, and only a lock that outlasts the wait is an error, said as a lock."""
    from convtune import tuning_db
    path = str(tmp_path / "t.sqlite")
    TuningDB(path).close()
    real, tries = TuningDB._open, []

    def locked_twice(self, readonly):
        tries.append(1)
        if len(tries) <= 2:
            raise sqlite3.OperationalError("database is locked")
        real(self, readonly)
    monkeypatch.setattr(TuningDB, "_open", locked_twice)
    with TuningDB(path) as db:
        db.record(_key(), "cfg", "ok", ms=1.0)
    assert len(tries) == 3

    def always_locked(self, readonly):
        raise sqlite3.OperationalError("database is locked")
    monkeypatch.setattr(TuningDB, "_open", always_locked)
    monkeypatch.setattr(tuning_db, "OPEN_WAIT_S", 0.05)
    with pytest.raises(ConvgenError, match="stayed locked by another process"):
        TuningDB(path)


def test_a_killed_writer_loses_nothing_it_committed(tmp_path):
    path = str(tmp_path / "t.sqlite")
    TuningDB(path).close()
    p = _writer(path, 7, 100000)
    done = -1
    deadline = time.time() + 60
    while done < 20 and time.time() < deadline:
        done = int(p.stdout.readline())
    p.send_signal(signal.SIGKILL)
    p.wait()
    with TuningDB(path) as db:
        assert len(db.measured(_key(n=7))) >= done + 1


def test_a_stopped_writer_s_log_folds_back_into_the_file(tmp_path):
    """A writer gone before its close leaves its rows in the -wal file beside the database;
    a copy of the database file alone (what comes back from the GPU machine) misses them
    until fold_log folds the log back."""
    path = tmp_path / "t.sqlite"
    TuningDB(str(path)).close()
    gone = _writer(str(path), 7, 30, ending="gone")
    gone.communicate(timeout=120)
    assert gone.returncode == 0 and (tmp_path / "t.sqlite-wal").exists()

    def rows_in_a_copy_of_the_file_alone() -> int:
        copy = tmp_path / "copy" / "t.sqlite"
        copy.parent.mkdir(exist_ok=True)
        shutil.copyfile(path, copy)
        con = sqlite3.connect(copy)
        try:
            return con.execute("SELECT count(*) FROM measurements").fetchone()[0]
        finally:
            con.close()
    assert rows_in_a_copy_of_the_file_alone() == 0 and in_wal_mode(str(path))
    fold_log(str(path))
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == ["t.sqlite"]
    assert rows_in_a_copy_of_the_file_alone() == 30
    assert not in_wal_mode(str(path))   # a reader in a read-only checkout can open it


def test_a_writer_its_program_forgot_to_close_still_leaves_a_plain_file(tmp_path):
    # opened by hand on the shipped file and never closed, a writer left it in WAL mode
    path = tmp_path / "t.sqlite"
    forgot = _writer(str(path), 7, 30, ending="forgot")
    forgot.communicate(timeout=120)
    assert forgot.returncode == 0
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == ["t.sqlite"]
    assert not in_wal_mode(str(path))
    with TuningDB(str(path), readonly=True) as db:
        assert len(db.measured(_key(n=7))) == 30


def test_folding_the_log_is_refused_while_another_writer_has_it_open(tmp_path):
    path = str(tmp_path / "t.sqlite")
    with pytest.raises(ConvgenError, match="does not exist"):
        fold_log(path)
    assert not os.path.exists(path)
    with TuningDB(path) as holder:
        holder.record(_key(), "cfg", "ok", ms=1.0)
        with pytest.raises(ConvgenError, match="write-ahead log was not folded back"):
            fold_log(path)
    fold_log(path)
    assert not in_wal_mode(path)


def test_a_change_a_stopped_writer_left_half_done_is_named_and_a_writer_rolls_it_back(tmp_path):
    # killed in a transaction outside WAL mode (an upgrade runs before it), a writer leaves
    # a hot journal that a read-only opener may not roll back: the error says who can
    path = str(tmp_path / "t.sqlite")
    with TuningDB(path) as db:
        db.record(_key(), "kept", "ok", ms=1.0)
    gone = subprocess.run([sys.executable, "-c", f"""
import os, sqlite3
con = sqlite3.connect({path!r}, isolation_level=None)
con.execute("PRAGMA cache_size=1")   # the change spills into the file before its commit
con.execute("BEGIN IMMEDIATE")
for i in range(500):
    con.execute("INSERT INTO configs (config) VALUES (?)", ("x" * 900 + str(i),))
os._exit(0)"""], timeout=120)
    assert gone.returncode == 0 and os.path.exists(path + "-journal")
    with pytest.raises(ConvgenError, match="a writer stopped in the middle of a change left .*-journal"):
        TuningDB(path, readonly=True)
    with TuningDB(path) as db:   # rolled back: the committed row is there, the half change not
        assert db.measured(_key()) == {"kept": ("ok", 1.0, None)}
        assert db.rows("SELECT count(*) AS n FROM configs") == [{"n": 1}]
    with TuningDB(path, readonly=True) as db:
        assert db.counts() == {"best": 0, "ok": 1}


def test_refuses_other_files_and_leaves_them_alone(tmp_path):
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(ConvgenError, match="cannot be read"):
        TuningDB(str(junk))
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE meta (name TEXT, value TEXT)")
    con.execute("INSERT INTO meta VALUES ('owner', 'someone else')")
    con.commit()
    con.close()
    before = foreign.read_bytes()
    with pytest.raises(ConvgenError, match="not a convgen tuning database"):
        TuningDB(str(foreign))
    assert foreign.read_bytes() == before
    newer = tmp_path / "newer.sqlite"
    TuningDB(str(newer)).close()
    con = sqlite3.connect(newer)
    con.execute("UPDATE meta SET value = '99' WHERE name = 'version'")
    con.commit()
    con.close()
    with pytest.raises(ConvgenError, match="schema version 99"):
        TuningDB(str(newer))
    with pytest.raises(ConvgenError, match="does not exist"):
        TuningDB(str(tmp_path / "absent.sqlite"), readonly=True)
    with pytest.raises(ConvgenError, match="folder"):
        TuningDB(str(tmp_path / "no" / "such" / "t.sqlite"))


def test_a_key_gives_back_the_problem_it_was_made_from():
    # the selector and the hazard survey rebuild problems from rows; a lost field
    # (groups, an uneven pad, dilation, a channels-first layout) would train on another shape
    p = make_problem(direction="bwd_data", dtype=elem_type("bf16"), n=3, g=7, c_total=21,
                     k_total=35, hi=13, wi=11, y=5, x=3, stride=(2, 1), dilation=(1, 3),
                     pad=(2, 1, 0, 3), layouts={"input": "nchw", "filter": "kcyx",
                                                "output": "nkhw"})
    key = problem_key(p, "sm90", "NVIDIA H100 80GB HBM3", "3.6.0", "0123456789ab")
    back = problem_from_key(key)
    assert back == p
    assert problem_key(back, "sm90", "NVIDIA H100 80GB HBM3", "3.6.0", "0123456789ab") == key


def test_a_kernel_change_keys_apart(tmp_path):
    # times taken on old kernel code are never the best for new code
    with TuningDB(str(tmp_path / "t.sqlite")) as db:
        old, new = _key(kernel="aaaaaaaaaaaa"), _key(kernel="bbbbbbbbbbbb")
        db.record(old, "block_m=64", "ok", ms=1.0)
        db.set_best(old, "block_m=64", 1.0, None, "cpu reference [1 1 1]")
        assert db.best(old) is not None and db.best(new) is None


def test_kernel_digest_follows_the_kernel_source():
    from convgen.directions import direction
    from convgen.kernels.launch import kernel_digest
    digests = {d: kernel_digest(direction(d)) for d in ("fwd", "bwd_data", "bwd_weight")}
    assert len(set(digests.values())) == 3 and all(len(v) == 12 for v in digests.values())
    assert kernel_digest(direction("fwd")) == digests["fwd"]


def test_each_direction_is_keyed_on_the_descriptor_kernels_it_launches():
    # kernels/tma.py holds all three directions' descriptor kernels: a direction's key takes
    # what its launch reaches there, so an edit of another direction's kernel keeps it
    from convgen.kernels.launch import descriptor_pieces

    def names(d):
        return {piece.split("\n")[0] for piece in descriptor_pieces(d)}
    fwd, data, weight = names("fwd"), names("bwd_data"), names("bwd_weight")
    assert {"conv_fwd_tma_kernel", "conv_fwd_tail_kernel", "_fwd_steps", "_store_tile",
            "_filter_rows", "tail_programs", "_Launch"} <= fwd
    assert {"conv_bwd_data_tma_kernel", "_bwd_data_tile", "_phase_taps", "_store_tile"} <= data
    assert {"conv_bwd_weight_tma_kernel", "conv_bwd_weight_streamk_kernel", "split_sum_kernel",
            "_streamk_share", "SUM_BLOCK", "streamk_steps"} <= weight
    assert not fwd & {"conv_bwd_data_tma_kernel", "split_sum_kernel", "_streamk_share"}
    assert not data & {"conv_fwd_tma_kernel", "conv_fwd_tail_kernel", "split_sum_kernel"}
    assert not weight & {"conv_fwd_tma_kernel", "_store_tile", "conv_bwd_data_tma_kernel"}


def test_reached_source_changes_only_where_an_edit_reaches(tmp_path, monkeypatch):
    import importlib
    import sys

    from convgen.kernels.launch import reached
    text = """
LIMIT = 4
def shared(v):
    return v + LIMIT
def only_b(v):
    return 2 * v
def root_a(v):
    return shared(v)
def root_b(v):
    return shared(only_b(v))
def unreached():
    return 0
"""
    monkeypatch.syspath_prepend(str(tmp_path))
    versions = iter(range(100))

    def pieces(source):
        # each version its own module: a rewrite within the same second and of the same
        # size would otherwise import the first version's cached bytecode
        name = f"digest_probe_{next(versions)}"
        (tmp_path / f"{name}.py").write_text(source)
        importlib.invalidate_caches()
        module = importlib.import_module(name)
        return reached(module, "root_a"), reached(module, "root_b")
    a, b = pieces(text)
    assert [p.split("\n")[0] for p in a] == ["LIMIT", "root_a", "shared"]
    assert [p.split("\n")[0] for p in b] == ["LIMIT", "only_b", "root_b", "shared"]
    a2, b2 = pieces(text.replace("2 * v", "3 * v"))          # only root_b reaches it
    assert a2 == a and b2 != b
    a3, b3 = pieces(text.replace("return 0", "return 1"))    # no root reaches it
    assert (a3, b3) == (a, b)
    a4, b4 = pieces(text.replace("LIMIT = 4", "LIMIT = 5"))  # a constant both reach
    assert a4 != a and b4 != b
    # a name the module's source does not bind is not followed, whatever the process has
    # put into its globals since (Triton's interpreter adds TensorDescriptor to a kernel
    # module once a kernel ran: the keys of a lit worker moved between its tests)
    text_local = text.replace("def unreached():", "def root_c(v):\n    injected = v\n    return injected\ndef unreached():")
    (tmp_path / "digest_probe_local.py").write_text(text_local)
    importlib.invalidate_caches()
    module = importlib.import_module("digest_probe_local")
    first = reached(module, "root_c")
    module.injected = object()
    assert reached(module, "root_c") == first == ["root_c\ndef root_c(v):\n    injected = v\n    return injected\n"]
    # what it cannot take by source or value stops it rather than keying on an address
    with pytest.raises(TypeError, match="LIMIT: a object"):
        pieces(text.replace("LIMIT = 4", "LIMIT = object()"))
    # a wrapped helper is read through its wrapper; a name bound elsewhere is named
    wrapped = text.replace("def shared(v):", "import functools\nfrom os.path import join\n"
                           "@functools.lru_cache\ndef shared(v):\n    join\n")
    a5, _ = pieces(wrapped)
    assert "join\nposixpath.join" in a5 and any(p.startswith("shared\n@functools") for p in a5)


def test_the_digest_covers_every_spec_s_context():
    # the dispatch and the context every direction's spec starts from are in all three keys
    from convgen.kernels import tma
    from convgen.kernels.launch import descriptor_pieces
    for d in ("fwd", "bwd_data", "bwd_weight"):
        names = {p.split("\n")[0] for p in descriptor_pieces(d)}
        assert {"launch_spec", "_Launch", tma._SPECS[d].__name__} <= names
        assert not {f.__name__ for f in tma._SPECS.values()} - {tma._SPECS[d].__name__} & names


def test_a_closed_database_is_one_plain_file_a_reader_opens_read_only(tmp_path):
    # committed to the repository and read from a read-only checkout: no -wal, no -shm
    path = tmp_path / "t.sqlite"
    with TuningDB(str(path)) as db:
        db.record(_key(), "block_m=64", "ok", ms=1.0)
        db.set_best(_key(), "block_m=64", 1.0, None, "cpu reference [1 1 1]")
        assert (tmp_path / "t.sqlite-wal").exists()
    assert sorted(f.name for f in tmp_path.iterdir()) == ["t.sqlite"]
    tmp_path.chmod(0o555)
    try:
        with TuningDB(str(path), readonly=True) as db:
            assert db.best(_key()).config == "block_m=64"
    finally:
        tmp_path.chmod(0o755)


def test_the_tracked_data_has_bests_for_todays_kernels():
    # a kernel edit changes its digest, and rows keyed on the old one are never selected
    # again: the tracked data must gain the edited kernel's measurements (tuned again) in the
    # same commit, or, for a change that leaves the kernels as they were (code moved between
    # modules), a line of tuning/data/same-kernels.tsv naming the digest they keep (its proof
    # in the line), or it silently stops being used. Files are never rewritten, so older
    # digests' rows stay as the selector's history (dataset.load_dataset: the latest of a
    # config wins); today's digest, through its same kernels, must hold at least as many
    # checked bests as any other
    from convtune import tuning_text
    from convgen.directions import DIRECTIONS
    from convgen.kernels.launch import kernel_digest
    folder = os.path.join(ROOT, "tuning", "data")
    same = tuning_text.same_kernels(folder)
    today = {name: kernel_digest(d) for name, d in DIRECTIONS.items()}
    bests: dict[tuple, set] = {}
    for path in tuning_text.data_files(folder):
        for key, _, best in tuning_text.read_batch(path):
            if best is not None:
                row = dict(zip(tuning_text.KEY_COLUMNS, key))
                bests.setdefault((row["direction"], row["kernel"]), set()).add(key[4:])
    for name, digest in today.items():
        counts = {kernel: len(shapes) for (d, kernel), shapes in bests.items() if d == name}
        served = max((counts.get(k, 0) for k in (digest, *same.get(digest, ()))), default=0)
        assert served > 0 and served >= max(counts.values()), (name, digest, counts)


def test_same_kernels_lines_are_followed_and_checked(tmp_path, monkeypatch):
    from convtune import tuning_text
    (tmp_path / tuning_text.SAME_KERNELS).write_text(
        "# direction\tdigest\tsame as\twhy\n"
        "fwd\tccc\tbbb\tmoved again\nfwd\tbbb\taaa\tmoved\n")
    assert tuning_text.same_kernels(str(tmp_path)) == {"ccc": ("bbb", "aaa"), "bbb": ("aaa",)}
    # a tuned best under the older digest serves today's key
    monkeypatch.setenv("CONVGEN_TUNING_DATA", str(tmp_path))
    with TuningDB(str(tmp_path / "t.sqlite")) as db:
        db.record(_key(kernel="aaa"), "block_m=64", "ok", ms=1.0)
        db.set_best(_key(kernel="aaa"), "block_m=64", 1.0, None, "cpu reference [1 1 1]")
        assert db.best_near(_key(kernel="ccc")).config == "block_m=64"
        assert db.best_near(_key(kernel="ddd")) is None
    (tmp_path / tuning_text.SAME_KERNELS).write_text("fwd\tccc\n")
    with pytest.raises(ConvgenError, match="expected 'direction"):
        tuning_text.same_kernels(str(tmp_path))


def test_a_new_file_stores_each_key_and_config_once(tmp_path):
    # spelled out in every row, the 20 key columns and the config text were three quarters
    # of a file: a file stores them by number and shows them spelled out through views
    path = str(tmp_path / "fresh.sqlite")
    TuningDB(path).close()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        kinds = dict(con.execute("select name, type from sqlite_master where name not like 'sqlite_%'"))
    finally:
        con.close()
    assert _version(path) == SCHEMA_VERSION_TEXT
    assert {n: kinds.get(n) for n in ("measurements", "best", "problems", "configs", "measurement_rows",
                                      "best_rows", "text_files")} == {
        "measurements": "view", "best": "view", "problems": "table", "configs": "table",
        "measurement_rows": "table", "best_rows": "table", "text_files": "table"}


def test_no_sqlite_file_is_tracked_and_every_data_file_is_text():
    git = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if git.returncode != 0:
        pytest.skip("not a git checkout (a copy of the tree)")
    tracked = git.stdout.split()
    for name in tracked:
        if os.path.isfile(os.path.join(ROOT, name)):
            with open(os.path.join(ROOT, name), "rb") as f:
                head = f.read(16)
            assert not head.startswith(b"SQLite format 3") and not name.endswith((".sqlite", ".db",
                                                                                  ".sqlite.gz")), name
    data = [n for n in tracked if n.startswith("tuning/data/")]
    assert data and all(n.endswith(".jsonl") or n == "tuning/data/same-kernels.tsv"
                        for n in data), data


def test_a_lookup_across_triton_versions_and_digests_is_one_indexed_query(tmp_path):
    # the key's own index starts (arch, device, triton, kernel): best_near's lookup without
    # the Triton version walked every problem of the device; it goes through the shape index
    path = str(tmp_path / "t.sqlite")
    with TuningDB(path) as db:
        db.set_best({**_key(), "triton": "3.5.0"}, "block_m=32", 2.0, 1.0, "gpu reference [1 1 1]")
    con = sqlite3.connect(path)
    con.execute("DROP INDEX problems_by_shape")   # a file written before the index
    con.commit()
    con.close()
    with TuningDB(path, readonly=True) as db:
        assert not db.has_shape_index()
        assert db.best_near(_key()).config == "block_m=32"   # found all the same, by a scan
    with TuningDB(path) as db:   # a writer adds it
        plan = " ".join(str(r) for r in db.con.execute(
            "EXPLAIN QUERY PLAN SELECT config FROM best WHERE "
            + " AND ".join(f"{c} = ?" for c in ("arch", "device", *SHAPE_COLUMNS)) + " AND kernel IN (?, ?)",
            [_key()[c] for c in ("arch", "device", *SHAPE_COLUMNS)] + ["a", "b"]))
    assert "problems_by_shape" in plan, plan
    with TuningDB(path, readonly=True) as db:
        assert db.has_shape_index()
        got = db.best_near(_key())
        assert (got.config, got.triton) == ("block_m=32", "3.5.0")


def test_a_shared_reader_sees_new_rows_and_follows_a_replaced_file(tmp_path):
    from convtune import tuning_db
    path = str(tmp_path / "t.sqlite")
    with TuningDB(path) as db:
        db.set_best(_key(), "block_m=32", 2.0, 1.0, "gpu reference [1 1 1]")
    first = tuning_db.reader(path)
    assert tuning_db.reader(path) is first and first.best(_key()).config == "block_m=32"
    with TuningDB(path) as db:   # a writer of this process: its close still folds the log
        db.set_best(_key(), "block_m=64", 1.0, 1.0, "gpu reference [1 1 1]")
    assert sorted(os.listdir(tmp_path)) == ["t.sqlite"] and not in_wal_mode(path)
    assert tuning_db.reader(path).best(_key()).config == "block_m=64"
    other = str(tmp_path / "other.sqlite")
    with TuningDB(other) as db:
        db.set_best(_key(), "block_m=128", 0.5, 1.0, "gpu reference [1 1 1]")
    os.replace(other, path)   # another file at the same path: opened again
    assert tuning_db.reader(path).best(_key()).config == "block_m=128"
    os.remove(path)
    with pytest.raises(ConvgenError, match="does not exist"):
        tuning_db.reader(path)
    tuning_db.close_readers(path)


def test_the_key_s_own_triton_version_comes_first_even_with_a_local_suffix(tmp_path):
    # nearest_version compares major.minor.patch: "3.6.0" and "3.6.0+gitabc" tie there
    path = str(tmp_path / "t.sqlite")
    with TuningDB(path) as db:
        db.set_best({**_key(), "triton": "3.6.0"}, "block_m=32", 2.0, 1.0, "gpu reference [1 1 1]")
        db.set_best({**_key(), "triton": "3.6.0+gitabc"}, "block_m=64", 1.0, 1.0, "gpu reference [1 1 1]")
    with TuningDB(path, readonly=True) as db:
        assert db.best_near({**_key(), "triton": "3.6.0+gitabc"}).config == "block_m=64"
        assert db.best_near({**_key(), "triton": "3.6.0"}).config == "block_m=32"


def test_a_shared_reader_belongs_to_its_thread(tmp_path):
    import threading
    from convtune import tuning_db
    path = str(tmp_path / "t.sqlite")
    with TuningDB(path) as db:
        db.set_best(_key(), "block_m=32", 2.0, 1.0, "gpu reference [1 1 1]")
    mine = tuning_db.reader(path)
    got = []

    def other():
        got.append(tuning_db.reader(path).best(_key()).config)
        tuning_db.close_readers(path)   # its own, not this thread's
    for _ in range(3):   # thread ids are reused at once: each thread opens its own
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert got == ["block_m=32"] * 3
    assert tuning_db.reader(path) is mine and mine.best(_key()).config == "block_m=32"
    with TuningDB(path) as db:   # a writer in this thread still closes this thread's reader
        db.set_best(_key(), "block_m=64", 1.0, 1.0, "gpu reference [1 1 1]")
    assert not in_wal_mode(path)
    tuning_db.close_readers(path)

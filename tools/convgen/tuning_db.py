"""The tuning database: every kernel config measured for a problem on a device, and the best.

One SQLite file (stdlib sqlite3, write-ahead log), safe for several processes and GPUs
writing at once: each measurement is its own transaction, so an interrupted tuning run
loses nothing it finished and the next run skips what is already there.

A problem's key is everything that changes which config is fastest: the device (arch and
name), the Triton version, the kernel's source (a digest of the direction's kernel module
and the pieces it shares: a kernel change makes old times stale), direction, type,
layouts, N, C, K, G, H, W, Y, X, strides, padding and dilation (`problem_key`, `key_for`). Rows:

    measurements   one per (key, config): its time in ms, or status "invalid" (the config
                   does not compile or does not fit: `error` says why) or "wrong" (it ran
                   and failed the reference check). The training data of a learned selector.
    best           one per key: the fastest config that passed the reference check, and
                   what it was the fastest of (`searched`: the whole tuning space, or the
                   first configs of it that `convgen tune --top` or `--max-configs` measured).
    meta           the schema's name and version; a file without them is refused.

The database never decides anything by itself: kernels/select.py (lookup) and tune.py
(the search) use it.
"""
from __future__ import annotations

import json
import os
import sqlite3
import time
from contextlib import closing
from dataclasses import dataclass

from convgen import REPO_ROOT, dtypes
from convgen.errors import ConvgenError
from convgen.problem import make_problem

SCHEMA_NAME = "convgen-tuning"
SCHEMA_VERSION = 3   # 3: best.searched; a version 2 file is upgraded by its first writer
SEARCHED_ALL = "space"   # best.searched of a search over every config of the tuning space
KEY_COLUMNS = ("arch", "device", "triton", "kernel", "direction", "dtype", "layouts", "n", "c", "k", "g",
               "h", "w", "y", "x", "stride_h", "stride_w", "pad", "dil_h", "dil_w")
_KEY_DDL = ", ".join(f"{c} {'INTEGER' if c in 'n c k g h w y x stride_h stride_w dil_h dil_w'.split() else 'TEXT'} NOT NULL"
                     for c in KEY_COLUMNS)
_KEY_MATCH = " AND ".join(f"{c} = :{c}" for c in KEY_COLUMNS)
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
    {_KEY_DDL},
    config TEXT NOT NULL,            -- KernelConfig.describe()
    status TEXT NOT NULL CHECK (status IN ('ok', 'invalid', 'wrong')),
    ms REAL,                         -- median time, status 'ok' only
    tflops REAL,
    error TEXT,                      -- why, for 'invalid' and 'wrong'
    measured_at TEXT NOT NULL,
    PRIMARY KEY ({", ".join(KEY_COLUMNS)}, config)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS best (
    {_KEY_DDL},
    config TEXT NOT NULL,
    ms REAL NOT NULL,
    tflops REAL,
    checked TEXT NOT NULL,           -- the reference check it passed
    measured_at TEXT NOT NULL,
    searched TEXT NOT NULL DEFAULT '{SEARCHED_ALL}',  -- what it is the fastest of
    PRIMARY KEY ({", ".join(KEY_COLUMNS)})
) WITHOUT ROWID;
"""
# WITHOUT ROWID: a row is stored once, in its key's b-tree. A rowid table keeps the 21 key
# columns twice (the table and the key's index), and the shipped file was twice its size,
# too large to travel to the GPU machine (docs/traps.md). Files made before read and
# write the same; only their size differs.


DEFAULT_PATH = os.path.join(REPO_ROOT, "tuning", "tuning.sqlite")


def resolve(given: str | None, writing: bool = False) -> str | None:
    """The database a run uses: `given` ("" for the default: $CONVGEN_TUNING_DB, else the
    repository's tuning/tuning.sqlite; None for none). A reader takes a default that does
    not exist as none (nothing is tuned yet); a writer creates it."""
    if given is None:
        return None
    path = given or os.environ.get("CONVGEN_TUNING_DB") or DEFAULT_PATH
    if not (given or writing or os.path.exists(path)):
        return None
    return path


def problem_key(problem, arch: str, device: str, triton_version: str, kernel: str) -> dict:
    """The database key of a problem on a device (see the module's docstring)."""
    p = problem
    lay = p.layouts
    return {"arch": arch, "device": device, "triton": triton_version, "kernel": kernel,
            "direction": p.direction.name, "dtype": p.dtype.name,
            "layouts": f"{lay['input']}/{lay['filter']}/{lay['output']}",
            "n": p.n, "c": p.c * p.g, "k": p.k * p.g, "g": p.g, "h": p.hi, "w": p.wi,
            "y": p.y, "x": p.x, "stride_h": p.stride_h, "stride_w": p.stride_w,
            "pad": f"{p.pad_h_l},{p.pad_h_r},{p.pad_w_l},{p.pad_w_r}",
            "dil_h": p.dil_h, "dil_w": p.dil_w}


def problem_from_key(row: dict):
    """The problem a database row's key columns describe: problem_key's inverse."""
    lay_in, lay_fil, lay_out = row["layouts"].split("/")
    pad = tuple(int(v) for v in row["pad"].split(","))
    return make_problem(direction=row["direction"], dtype=dtypes.elem_type(row["dtype"]),
                        n=row["n"], g=row["g"], c_total=row["c"], k_total=row["k"],
                        hi=row["h"], wi=row["w"], y=row["y"], x=row["x"],
                        stride=(row["stride_h"], row["stride_w"]),
                        dilation=(row["dil_h"], row["dil_w"]), pad=pad,
                        layouts={"input": lay_in, "filter": lay_fil, "output": lay_out})


def key_for(problem, backend) -> dict:
    """The key of a problem on this backend, this Triton and these kernels."""
    import triton

    from convgen.kernels.launch import kernel_digest
    return problem_key(problem, backend.arch, backend.device_name(), triton.__version__,
                       kernel_digest(problem.direction))


@dataclass(frozen=True)
class Best:
    config: str
    ms: float
    tflops: float | None
    checked: str
    measured_at: str
    searched: str = SEARCHED_ALL


OPEN_WAIT_S = 60


def in_wal_mode(path: str) -> bool:
    """Whether the file's header says write-ahead-log mode (bytes 18 and 19 are 2, not 1).
    Such a file needs its -shm beside it, which a reader in a read-only checkout cannot
    create: every matrix-core run opens the database read-only."""
    with open(path, "rb") as f:
        head = f.read(20)
    return len(head) == 20 and head[18:20] != b"\x01\x01"


def fold_log(path: str) -> None:
    """Fold the write-ahead log that a writer stopped before its close left beside `path`
    back into the file, leaving one plain file that holds every committed row. A copy of
    the file alone misses the log's rows, and is itself in WAL mode: the GPU machine's
    gzipped copy after a stopped `convgen tune` came back without the last two problems it
    had reported (twenty-first session). Refused, not silently partial, while another
    process still has the database open."""
    if not os.path.exists(path):
        raise ConvgenError(f"tuning database '{path}' does not exist", field="tuning_db")
    TuningDB(path).close()
    if os.path.exists(path + "-wal") or in_wal_mode(path):
        raise ConvgenError(f"tuning database '{path}': its write-ahead log was not folded back "
                           "(another process has the database open)", field="tuning_db")


def _busy(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e) or "busy" in str(e)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())


class TuningDB:
    """An open tuning database. `TuningDB(path)` creates the file when it does not exist;
    `readonly=True` never creates or changes anything (run-time selection)."""

    def __init__(self, path: str, readonly: bool = False):
        self.path = path
        self.readonly = readonly
        if readonly and not os.path.exists(path):
            raise ConvgenError(f"tuning database '{path}' does not exist", field="tuning_db")
        folder = os.path.dirname(os.path.abspath(path))
        if not readonly and not os.path.isdir(folder):
            raise ConvgenError(f"tuning database '{path}': the folder {folder} does not exist",
                               field="tuning_db")
        uri = f"file:{os.path.abspath(path)}{'?mode=ro' if readonly else ''}"
        # SQLite answers "database is locked" at once, without its busy handler, to a
        # connection that opens while another changes the journal mode (every writer's close
        # folds the log back); a fresh connection a moment later gets in, so opening retries
        deadline = time.monotonic() + OPEN_WAIT_S
        delay = 0.01
        while True:
            self.con = None
            try:
                self.con = sqlite3.connect(uri, uri=True, timeout=60, isolation_level=None)
                self._open(readonly)
                break
            except sqlite3.OperationalError as e:
                if self.con is not None:
                    self.con.close()
                if not _busy(e) or time.monotonic() > deadline:
                    why = (f"stayed locked by another process for {OPEN_WAIT_S} s" if _busy(e)
                           else f"cannot be read: {e}")
                    raise ConvgenError(f"tuning database '{path}' {why}", field="tuning_db") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
            except sqlite3.DatabaseError as e:
                if self.con is not None:
                    self.con.close()
                raise ConvgenError(f"tuning database '{path}' cannot be read: {e} (not a SQLite "
                                   "file, or a damaged one)", field="tuning_db") from None

    def _open(self, readonly: bool) -> None:
        self.con.execute("PRAGMA busy_timeout=60000")
        if not readonly and self._empty():   # a new file; a foreign one is never written to
            self.con.executescript(_SCHEMA)
            self.con.execute("INSERT OR IGNORE INTO meta VALUES ('schema', ?), ('version', ?)",
                             (SCHEMA_NAME, str(SCHEMA_VERSION)))
        self._check_schema()
        if not readonly:   # readers never wait for a writer, writers queue
            self.con.execute("PRAGMA journal_mode=WAL")

    # ---- schema --------------------------------------------------------------------------
    def _empty(self) -> bool:
        return not self.con.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()

    def _check_schema(self) -> None:
        try:
            meta = dict(self.con.execute("SELECT name, value FROM meta").fetchall())
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                raise   # a lock is not a foreign file
            meta = {}
        if meta.get("schema") != SCHEMA_NAME:
            raise ConvgenError(f"tuning database '{self.path}' is not a convgen tuning database "
                               "(another program's SQLite file?)", field="tuning_db")
        if meta.get("version") == "2":
            self._upgrade_from_2()
        elif meta.get("version") != str(SCHEMA_VERSION):
            raise ConvgenError(f"tuning database '{self.path}' has schema version "
                               f"{meta.get('version')}; this convgen reads version {SCHEMA_VERSION}",
                               field="tuning_db")

    def _upgrade_from_2(self) -> None:
        """Version 2 had no best.searched, and its bests count as of a whole space (one
        that --max-configs cut short cannot be told apart). A writer adds the column; a
        reader, which may not change the file, sees the table through a view of this
        connection's own (the temp schema is searched first)."""
        if self.readonly:
            self.con.execute(f"CREATE TEMP VIEW best AS SELECT *, '{SEARCHED_ALL}' AS searched "
                             "FROM main.best")
            return
        with self._transaction():   # asked again under the write lock: another writer may be first
            if self.con.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()[0] == "2":
                self.con.execute(f"ALTER TABLE best ADD COLUMN searched TEXT NOT NULL "
                                 f"DEFAULT '{SEARCHED_ALL}'")
                self.con.execute("UPDATE meta SET value = ? WHERE name = 'version'",
                                 (str(SCHEMA_VERSION),))

    def _transaction(self):
        con = self.con

        class _Tx:
            def __enter__(self):
                con.execute("BEGIN IMMEDIATE")

            def __exit__(self, kind, value, tb):
                con.execute("COMMIT" if kind is None else "ROLLBACK")
                return False
        return _Tx()

    def close(self) -> None:
        if not self.readonly:
            # the last writer out folds the write-ahead log back and leaves a plain file, which
            # a read-only checkout can open (a WAL file needs its -shm beside it); while another
            # writer is still open this fails, and that one does it
            try:
                self.con.execute("PRAGMA busy_timeout=0")
                self.con.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.OperationalError:
                pass
        self.con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- writing --------------------------------------------------------------------------
    def record(self, key: dict, config: str, status: str, ms: float | None = None,
               tflops: float | None = None, error: str | None = None) -> None:
        """One measurement, committed at once (a later one of the same config replaces it)."""
        row = {**key, "config": config, "status": status, "ms": ms, "tflops": tflops,
               "error": error, "measured_at": _now()}
        cols = ", ".join(row)
        with self._transaction():
            self.con.execute(f"INSERT OR REPLACE INTO measurements ({cols}) VALUES "
                             f"({', '.join(':' + c for c in row)})", row)

    def set_best(self, key: dict, config: str, ms: float, tflops: float | None, checked: str,
                 searched: str = SEARCHED_ALL) -> None:
        row = {**key, "config": config, "ms": ms, "tflops": tflops, "checked": checked,
               "measured_at": _now(), "searched": searched}
        with self._transaction():
            self.con.execute(f"INSERT OR REPLACE INTO best ({', '.join(row)}) VALUES "
                             f"({', '.join(':' + c for c in row)})", row)

    # ---- reading ----------------------------------------------------------------------------
    def measured(self, key: dict) -> dict[str, tuple]:
        """{config: (status, ms, error)} of everything measured for this key."""
        with closing(self.con.execute(
                f"SELECT config, status, ms, error FROM measurements WHERE {_KEY_MATCH}", key)) as cur:
            return {c: (s, ms, e) for c, s, ms, e in cur}

    def timed_before(self, key: dict, when: str, under_ms: float | None = None) -> list[str]:
        """The configs of this key that ran and were timed before `when` (a measured_at),
        and took less than `under_ms` where given."""
        with closing(self.con.execute(
                f"SELECT config FROM measurements WHERE {_KEY_MATCH} AND status = 'ok' "
                "AND measured_at < :when AND (:under IS NULL OR ms < :under)",
                {**key, "when": when, "under": under_ms})) as cur:
            return [c for (c,) in cur]

    def best(self, key: dict) -> Best | None:
        row = self.con.execute(f"SELECT config, ms, tflops, checked, measured_at, searched FROM best "
                               f"WHERE {_KEY_MATCH}", key).fetchone()
        return Best(*row) if row else None

    def rows(self, sql: str, args=()) -> list[dict]:
        """The rows of a query as dicts keyed by column name (callers read columns by name,
        so a column added to the schema does not shift them)."""
        cur = self.con.execute(sql, args)
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]

    def counts(self) -> dict:
        """How many problems have a best config, and measurements by status (for reports)."""
        out = {"best": self.con.execute("SELECT COUNT(*) FROM best").fetchone()[0]}
        for status, n in self.con.execute("SELECT status, COUNT(*) FROM measurements GROUP BY status"):
            out[status] = n
        return out

    def dump(self) -> str:
        """Every row of both tables as JSON lines, sorted: a text form for review and diffs."""
        lines = []
        for table in ("best", "measurements"):
            rows = sorted(json.dumps({"table": table, **r}, sort_keys=True)
                          for r in self.rows(f"SELECT * FROM {table}"))
            lines += rows
        return "\n".join(lines) + ("\n" if lines else "")

"""The tuning database: every kernel config measured for a problem on a device, and the best.

One SQLite file (stdlib sqlite3, write-ahead log), safe for several processes and GPUs
writing at once: each measurement is its own transaction, so an interrupted tuning run
loses nothing it finished and the next run skips what is already there.

The tracked form of the measurements is text (tuning_text.py, tuning/data/); the database
is the engine built from it. The *local store* (store.py, `open_store`, the default of every
command) is one such database in the user's cache folder: built from the text on first
use, brought up to date when the text changes (`TuningDB.sync`), and holding beside it
what this machine measured, which `TuningDB.export` (`convgen tuning-export`) writes back
as new text files. Each row says where it came from (`source`: a text file, or NULL for
measured here).

A problem's key is everything that changes which config is fastest: the device (arch and
name), the Triton version, the kernel's source (a digest of the direction's kernel module
and the pieces it shares: a kernel change makes old times stale), direction, type,
layouts, N, C, K, G, H, W, Y, X, strides, padding and dilation (`problem_key`, `key_for`).
What a reader sees (two views, with the key and the config spelled out in every row):

    measurements   one per (key, config): its time in ms, or status "invalid" (the config
                   does not compile or does not fit: `error` says why) or "wrong" (it ran
                   and failed the reference check). The training data of a learned selector.
    best           one per key: the fastest config that passed the reference check, and
                   what it was the fastest of (`searched`: the whole tuning space, or the
                   first configs of it that `convgen tune --top` or `--max-configs` measured).
    meta           the schema's name and version; a file without them is refused.

What is stored: `problems` and `configs` (each key and each config text once, by number)
and `measurement_rows` and `best_rows` (the numbers, the times, and measured_at in Unix
seconds). The views take INSERT, UPDATE and DELETE through triggers, so SQL written for
the old tables (copying rows between files, a test's UPDATE) works unchanged, with two
differences: times are kept to the second, in UTC, and a write through a view counts no
rows in `cursor.rowcount` (SQLite does not count what an INSTEAD OF trigger does).

The database never decides anything by itself: picker.py (lookup) and tune.py (the search)
use it; store.py opens the local store, keys.py makes a problem's key.
"""
from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import weakref
from contextlib import closing
from dataclasses import dataclass, field

from convgen.errors import ConvgenError
from convtune import tuning_text
from convtune.keys import nearest_version, problem_from_key
from convtune.tuning_text import KEY_COLUMNS, SEARCHED_ALL

SCHEMA_NAME = "convgen-tuning"
# 5: each row's source (a tracked text file, or none: measured here); 4: problems and
# configs stored once, by number; 3: best.searched
SCHEMA_VERSION = 5
# a key less where and with what it ran: the problem itself
SHAPE_COLUMNS = KEY_COLUMNS[4:]
_KEY_DDL = ", ".join(f"{c} {'INTEGER' if c in tuning_text.INT_COLUMNS else 'TEXT'} NOT NULL"
                     for c in KEY_COLUMNS)
_KEY_MATCH = " AND ".join(f"{c} = :{c}" for c in KEY_COLUMNS)
# a problem on a device whatever the Triton version and kernel source (best_near's lookup)
_SHAPE_MATCH = " AND ".join(f"{c} = :{c}" for c in ("arch", "device", *SHAPE_COLUMNS))
# best_near's one query uses it: the key's own index starts (arch, device, triton, kernel),
# so without it a lookup across Triton versions walks every problem of the device (2.5 ms
# at 5,000 problems, 0.03 ms with it). Writers add it to a file that lacks it.
_SHAPE_INDEX = (f"CREATE INDEX IF NOT EXISTS problems_by_shape ON problems "
                f"(arch, device, {', '.join(SHAPE_COLUMNS)})")

# From this UTC time (a measured_at) `convgen tune` times a CUDA graph of a config's launches (tune._time
# says why); rows before it were timed per launch, and those under PER_LAUNCH_TRUSTED_MS
# may hold the host's time, not the GPU's (--retime-before and --retime-under time them
# again; dataset._drop_host_timed leaves out those a finished retime left behind)
GRAPH_TIMED_SINCE = "2026-11-25T00:00:00"
PER_LAUNCH_TRUSTED_MS = 0.5


def _problem_id(row: str) -> str:
    return f"(SELECT id FROM problems WHERE {' AND '.join(f'{c} = {row}.{c}' for c in KEY_COLUMNS)})"


def _config_id(row: str) -> str:
    return f"(SELECT id FROM configs WHERE config = {row}.config)"


def _add_ids(row: str) -> str:
    # no INSERT OR IGNORE: a trigger takes the conflict policy of the statement that fired
    # it, and an outer OR REPLACE would give an existing problem a new id, orphaning its rows
    return (f"INSERT INTO problems ({', '.join(KEY_COLUMNS)}) SELECT {', '.join(f'{row}.{c}' for c in KEY_COLUMNS)} "
            f"WHERE {_problem_id(row)} IS NULL;\n"
            f"    INSERT INTO configs (config) SELECT {row}.config WHERE {_config_id(row)} IS NULL;")


# the stored columns a row is written with (source stays NULL: measured here)
_MEASUREMENT_COLUMNS = "problem, config, status, ms, tflops, error, measured_at"
_BEST_COLUMNS = "problem, config, ms, tflops, checked, measured_at, searched"
_EPOCH = "CAST(strftime('%s', {}) AS INTEGER)"   # measured_at is stored as Unix seconds
_ISO = "strftime('%Y-%m-%dT%H:%M:%S', {}, 'unixepoch')"   # ... and shown as UTC ISO text

# Stored tables (problems, configs, measurement_rows, best_rows) hold each problem's 20 key
# columns and each config's text once, by number; the views `measurements` and `best` show
# the rows with them spelled out, as version 3's tables did, and take INSERT, UPDATE and
# DELETE through their triggers (a row written through them is one measured here). Spelled
# out in every row, the key and config were three quarters of the file (49.4 MB at 2568
# problems, 8.9 MB this way). The views' columns keep the order of version 3's tables,
# whose files a reader reads as they are and whose rows `INSERT INTO measurements SELECT *
# FROM old.measurements` copies.
_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS problems (
    id INTEGER PRIMARY KEY, {_KEY_DDL}, UNIQUE ({", ".join(KEY_COLUMNS)}));
{_SHAPE_INDEX};
CREATE TABLE IF NOT EXISTS configs (
    id INTEGER PRIMARY KEY,
    config TEXT NOT NULL UNIQUE);    -- KernelConfig.describe()
CREATE TABLE IF NOT EXISTS text_files (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,       -- a batch file of the tracked text (tuning_text.py)
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS measurement_rows (
    problem INTEGER NOT NULL REFERENCES problems,
    config INTEGER NOT NULL REFERENCES configs,
    status TEXT NOT NULL CHECK (status IN ('ok', 'invalid', 'wrong')),
    ms REAL,                         -- median time, status 'ok' only
    tflops REAL,
    error TEXT,                      -- why, for 'invalid' and 'wrong'
    measured_at INTEGER NOT NULL,    -- Unix seconds
    source INTEGER,                  -- text_files.id; NULL: measured here, not exported
    PRIMARY KEY (problem, config)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS best_rows (
    problem INTEGER PRIMARY KEY REFERENCES problems,
    config INTEGER NOT NULL REFERENCES configs,
    ms REAL NOT NULL,
    tflops REAL,
    checked TEXT NOT NULL,           -- the reference check it passed
    measured_at INTEGER NOT NULL,
    searched TEXT NOT NULL DEFAULT '{SEARCHED_ALL}',  -- what it is the fastest of
    source INTEGER                   -- as measurement_rows.source
);
CREATE VIEW IF NOT EXISTS measurements AS
    SELECT {", ".join(f"p.{c}" for c in KEY_COLUMNS)}, f.config, m.status, m.ms, m.tflops, m.error,
           {_ISO.format("m.measured_at")} AS measured_at
    FROM measurement_rows m JOIN problems p ON p.id = m.problem JOIN configs f ON f.id = m.config;
CREATE VIEW IF NOT EXISTS best AS
    SELECT {", ".join(f"p.{c}" for c in KEY_COLUMNS)}, f.config, b.ms, b.tflops, b.checked,
           {_ISO.format("b.measured_at")} AS measured_at, b.searched
    FROM best_rows b JOIN problems p ON p.id = b.problem JOIN configs f ON f.id = b.config;
CREATE TRIGGER IF NOT EXISTS measurements_insert INSTEAD OF INSERT ON measurements BEGIN
    {_add_ids("NEW")}
    INSERT INTO measurement_rows ({_MEASUREMENT_COLUMNS}) VALUES ({_problem_id("NEW")},
        {_config_id("NEW")}, NEW.status, NEW.ms, NEW.tflops, NEW.error, {_EPOCH.format("NEW.measured_at")});
END;
CREATE TRIGGER IF NOT EXISTS measurements_update INSTEAD OF UPDATE ON measurements BEGIN
    {_add_ids("NEW")}
    UPDATE measurement_rows SET problem = {_problem_id("NEW")}, config = {_config_id("NEW")},
        status = NEW.status, ms = NEW.ms, tflops = NEW.tflops, error = NEW.error,
        measured_at = {_EPOCH.format("NEW.measured_at")}, source = NULL
    WHERE problem = {_problem_id("OLD")} AND config = {_config_id("OLD")};
END;
CREATE TRIGGER IF NOT EXISTS measurements_delete INSTEAD OF DELETE ON measurements BEGIN
    DELETE FROM measurement_rows WHERE problem = {_problem_id("OLD")} AND config = {_config_id("OLD")};
END;
CREATE TRIGGER IF NOT EXISTS best_insert INSTEAD OF INSERT ON best BEGIN
    {_add_ids("NEW")}
    INSERT INTO best_rows ({_BEST_COLUMNS}) VALUES ({_problem_id("NEW")}, {_config_id("NEW")}, NEW.ms,
        NEW.tflops, NEW.checked, {_EPOCH.format("NEW.measured_at")}, COALESCE(NEW.searched, '{SEARCHED_ALL}'));
END;
CREATE TRIGGER IF NOT EXISTS best_update INSTEAD OF UPDATE ON best BEGIN
    {_add_ids("NEW")}
    UPDATE best_rows SET problem = {_problem_id("NEW")}, config = {_config_id("NEW")}, ms = NEW.ms,
        tflops = NEW.tflops, checked = NEW.checked, measured_at = {_EPOCH.format("NEW.measured_at")},
        searched = NEW.searched, source = NULL
    WHERE problem = {_problem_id("OLD")};
END;
CREATE TRIGGER IF NOT EXISTS best_delete INSTEAD OF DELETE ON best BEGIN
    DELETE FROM best_rows WHERE problem = {_problem_id("OLD")};
END;
"""


@dataclass(frozen=True)
class Best:
    config: str
    ms: float
    tflops: float | None
    checked: str
    measured_at: str
    searched: str = SEARCHED_ALL
    # the Triton version that measured it (best_near); not part of what the best is
    triton: str | None = field(default=None, compare=False)


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
    the file alone misses the log's rows, and is itself in WAL mode: a copy made after a
    stopped `convgen tune` lacks the last problems it reported. Refused, not silently
    partial, while another process still has the database open."""
    if not os.path.exists(path):
        raise ConvgenError(f"tuning database '{path}' does not exist", field="tuning_db")
    TuningDB(path).close()
    if os.path.exists(path + "-wal") or in_wal_mode(path):
        raise ConvgenError(f"tuning database '{path}': its write-ahead log was not folded back "
                           "(another process has the database open)", field="tuning_db")


_READERS = threading.local()   # .held: {(path, pid): (file identity, TuningDB)} of this thread


def reader(path: str) -> "TuningDB":
    """A read-only TuningDB of `path` kept open for this thread: a run's lookup
    (picker.pick; lit's in-process runs make thousands) costs 0.03 ms on an open connection,
    where opening one costs ~1 ms (SQLite parses the schema, triggers included, at the first
    statement). Opened again when the file at `path` is another one or was rewritten in
    place (its inode, size or change time differ); rows a writer adds to a file in WAL mode
    show at the next query. A writer of the same file in this thread closes it first (its
    close folds the log back, which an open reader would stop); another process's writer
    leaves the log to the last writer out, as with any reader open. Not closed by callers."""
    try:
        st = os.stat(path)
    except OSError:
        return TuningDB(path, readonly=True)   # the error the open gives
    ident = (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns)
    slot = (os.path.abspath(path), os.getpid())
    readers = _READERS.__dict__.setdefault("held", {})
    held = readers.get(slot)
    if held is not None and held[0] == ident:
        return held[1]
    if held is not None:
        held[1].close()
    db = TuningDB(path, readonly=True)
    readers[slot] = (ident, db)
    return db


def close_readers(path: str) -> None:
    """Close this thread's shared reader of `path` (a writer of it is closing; another
    thread's connection is that thread's to use, and SQLite refuses it here)."""
    held = _READERS.__dict__.get("held", {}).pop((os.path.abspath(path), os.getpid()), None)
    if held is not None:
        held[1].close()


def _statements(script: str) -> list[str]:
    """A script's statements one by one: executescript would commit the transaction an
    upgrade runs in, and a trigger's body holds semicolons of its own."""
    out, part = [], ""
    for line in script.splitlines(keepends=True):
        part += line
        if sqlite3.complete_statement(part):
            out.append(part.strip())
            part = ""
    assert not part.strip(), part
    return out


def _busy(e: sqlite3.OperationalError) -> bool:
    return "locked" in str(e) or "busy" in str(e)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())


def _leave(con: sqlite3.Connection, readonly: bool) -> None:
    """Close a connection; a writer's folds the write-ahead log back first. The last writer
    out leaves a plain file, which a read-only checkout can open (a WAL file needs its -shm
    beside it); while another writer is still open this fails, and that one does it."""
    if not readonly:
        try:
            con.execute("PRAGMA busy_timeout=0")
            con.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.Error:
            pass
    con.close()


class _Importer:
    """Reads text files into a store's tables inside the caller's transaction: problems
    and configs by number (added where new), rows merged by key, the later measured
    winning (a tie: the text's), TFLOPS computed from the problem as `convgen tune` does."""

    def __init__(self, con: sqlite3.Connection, preload: bool = True):
        """`preload`: read every problem and config id at once (a whole folder of text),
        else look each up as it comes (a task's few rows into a large store: 30 ms less)."""
        self.con = con
        cols = ", ".join(KEY_COLUMNS)
        self.problems = {tuple(r[1:]): r[0] for r in con.execute(f"SELECT id, {cols} FROM problems")} \
            if preload else {}
        self.configs = dict((c, i) for i, c in con.execute("SELECT id, config FROM configs")) \
            if preload else {}
        self.preloaded = preload
        self.flops: dict[int, int] = {}

    def _problem(self, key: tuple) -> int:
        pid = self.problems.get(key)
        if pid is None and not self.preloaded:
            row = self.con.execute(f"SELECT id FROM problems WHERE {' AND '.join(f'{c} = ?' for c in KEY_COLUMNS)}",
                                   key).fetchone()
            pid = self.problems[key] = row[0] if row else None
        if pid is None:
            pid = self.con.execute(f"INSERT INTO problems ({', '.join(KEY_COLUMNS)}) VALUES "
                                   f"({', '.join('?' * len(KEY_COLUMNS))})", key).lastrowid
            self.problems[key] = pid
        if pid not in self.flops:
            self.flops[pid] = problem_from_key(dict(zip(KEY_COLUMNS, key))).flops
        return pid

    def _config(self, text: str) -> int:
        cid = self.configs.get(text)
        if cid is None and not self.preloaded:
            row = self.con.execute("SELECT id FROM configs WHERE config = ?", (text,)).fetchone()
            cid = self.configs[text] = row[0] if row else None
        if cid is None:
            cid = self.con.execute("INSERT INTO configs (config) VALUES (?)", (text,)).lastrowid
            self.configs[text] = cid
        return cid

    def read(self, path: str, size: int, mtime_ns: int) -> None:
        source = self.con.execute("INSERT INTO text_files (name, size, mtime_ns) VALUES (?, ?, ?)",
                                  (os.path.basename(path), size, mtime_ns)).lastrowid
        self.add(tuning_text.read_batch(path), path, source)

    def add(self, batch, path: str, source: int | None) -> None:
        """The problems of a parsed batch (tuning_text.parse_batch), their rows marked as
        from `source` (a text_files id; None: measured here)."""
        measurements, bests = [], []
        for key, rows, best in batch:
            try:
                pid = self._problem(key)
            except ConvgenError as e:
                raise ConvgenError(f"tuning data '{path}': a problem that is not one ({e})",
                                   field="tuning_db") from None
            flops = self.flops[pid]
            for config, status, ms, error, at in rows:
                tflops = flops / ms / 1e9 if status == "ok" else None
                measurements.append((pid, self._config(config), status, ms, tflops, error, at, source))
            if best is not None:
                config, ms, checked, at, searched = best
                bests.append((pid, self._config(config), ms, flops / ms / 1e9, checked, at, searched,
                              source))
        self.con.executemany(
            f"INSERT INTO measurement_rows ({_MEASUREMENT_COLUMNS}, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (problem, config) DO UPDATE SET status = excluded.status, ms = excluded.ms, "
            "tflops = excluded.tflops, error = excluded.error, measured_at = excluded.measured_at, "
            "source = excluded.source WHERE excluded.measured_at >= measurement_rows.measured_at",
            measurements)
        self.con.executemany(
            f"INSERT INTO best_rows ({_BEST_COLUMNS}, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (problem) DO UPDATE SET config = excluded.config, ms = excluded.ms, "
            "tflops = excluded.tflops, checked = excluded.checked, measured_at = excluded.measured_at, "
            "searched = excluded.searched, source = excluded.source "
            "WHERE excluded.measured_at >= best_rows.measured_at", bests)


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
                # a writer its program forgot to close, or that an interrupt (SIGINT) cut
                # short, still folds the log back as the program ends: one opened by hand
                # left the shipped file in WAL mode (docs/traps.md)
                self._finalizer = weakref.finalize(self, _leave, self.con, readonly)
                break
            except sqlite3.OperationalError as e:
                if self.con is not None:
                    self.con.close()
                if not _busy(e) or time.monotonic() > deadline:
                    why = (f"stayed locked by another process for {OPEN_WAIT_S} s" if _busy(e)
                           else f"cannot be read: {e}")
                    if readonly and os.path.exists(path + "-journal"):
                        # a hot journal: only a writer may roll the stopped change back
                        why += (f" (a writer stopped in the middle of a change left {path}-journal; "
                                "open the database once to write, e.g. with convgen tune, and "
                                "SQLite rolls that change back)")
                    raise ConvgenError(f"tuning database '{path}' {why}", field="tuning_db") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.5)
            except ConvgenError:
                self.con.close()
                raise
            except sqlite3.DatabaseError as e:
                if self.con is not None:
                    self.con.close()
                raise ConvgenError(f"tuning database '{path}' cannot be read: {e} (not a SQLite "
                                   "file, or a damaged one)", field="tuning_db") from None

    def _open(self, readonly: bool) -> None:
        self.con.execute("PRAGMA busy_timeout=60000")
        if not readonly and self._empty():   # a new file; a foreign one is never written to
            # in one transaction: another writer opening the new file at once (one per GPU)
            # sees the whole schema with its meta, or waits, never tables without meta
            with self._transaction():
                if self._empty():
                    for statement in _statements(_SCHEMA):
                        self.con.execute(statement)
                    self.con.execute("INSERT INTO meta VALUES ('schema', ?), ('version', ?)",
                                     (SCHEMA_NAME, str(SCHEMA_VERSION)))
        self._check_schema()
        if not readonly:   # readers never wait for a writer, writers queue
            self.con.execute("PRAGMA journal_mode=WAL")
            if not self.has_shape_index() and self._version() == str(SCHEMA_VERSION):
                self.con.execute(_SHAPE_INDEX)

    def has_shape_index(self) -> bool:
        return self.con.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND "
                                "name = 'problems_by_shape'").fetchone() is not None

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
        version = meta.get("version")
        if version not in ("2", "3", "4", str(SCHEMA_VERSION)):
            raise ConvgenError(f"tuning database '{self.path}' has schema version "
                               f"{version}; this convgen reads versions 2 to {SCHEMA_VERSION}",
                               field="tuning_db")
        if version == "2":
            self._upgrade_from_2()
        if version in ("2", "3") and not self.readonly:
            self._upgrade_from_3()
        if version == "4" and not self.readonly:
            self._upgrade_from_4()

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
            if self._version() == "2":
                self.con.execute(f"ALTER TABLE best ADD COLUMN searched TEXT NOT NULL "
                                 f"DEFAULT '{SEARCHED_ALL}'")
                self.con.execute("UPDATE meta SET value = '3' WHERE name = 'version'")

    def _upgrade_from_3(self) -> None:
        """Version 3 spelled out the key and the config in every row, as tables named as
        today's views are: a reader reads them as they are; the first writer moves the
        rows into today's tables and VACUUMs the file."""
        key = ", ".join(KEY_COLUMNS)
        with self._transaction():
            if self._version() != "3":
                return
            for table in ("measurements", "best"):   # stored as Unix seconds from now on
                bad, example = self.con.execute(
                    f"SELECT count(*), min(measured_at) FROM {table} "
                    f"WHERE {_EPOCH.format('measured_at')} IS NULL").fetchone()
                if bad:
                    raise ConvgenError(
                        f"tuning database '{self.path}': {bad} row(s) of {table} have a measured_at "
                        f"that is not a UTC time YYYY-MM-DDTHH:MM:SS (such as {example!r}); the file "
                        f"is left at schema version 3 (fix or delete those rows to write to it)",
                        field="tuning_db")
            counts = [self.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                      for t in ("measurements", "best")]
            self.con.execute("ALTER TABLE measurements RENAME TO measurements_v3")
            self.con.execute("ALTER TABLE best RENAME TO best_v3")
            for statement in _statements(_SCHEMA):
                self.con.execute(statement)
            self.con.execute(f"INSERT INTO problems ({key}) SELECT {key} FROM measurements_v3 "
                             f"UNION SELECT {key} FROM best_v3")
            self.con.execute("INSERT INTO configs (config) SELECT config FROM measurements_v3 "
                             "UNION SELECT config FROM best_v3")
            self.con.execute(
                f"INSERT INTO measurement_rows ({_MEASUREMENT_COLUMNS}) SELECT p.id, f.id, o.status, "
                f"o.ms, o.tflops, o.error, "
                f"{_EPOCH.format('o.measured_at')} FROM measurements_v3 o JOIN problems p USING ({key}) "
                "JOIN configs f ON f.config = o.config")
            self.con.execute(
                f"INSERT INTO best_rows ({_BEST_COLUMNS}) SELECT p.id, f.id, o.ms, o.tflops, o.checked, "
                f"{_EPOCH.format('o.measured_at')}, o.searched FROM best_v3 o JOIN problems p USING ({key}) "
                "JOIN configs f ON f.config = o.config")
            moved = [self.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("measurement_rows", "best_rows")]
            if moved != counts:   # never drop a row: the transaction rolls back
                raise ConvgenError(f"tuning database '{self.path}': upgrading to schema version {SCHEMA_VERSION} "
                                   f"moved {moved} of {counts} rows; the file is left as it was",
                                   field="tuning_db")
            self.con.execute("DROP TABLE measurements_v3")
            self.con.execute("DROP TABLE best_v3")
            self.con.execute("UPDATE meta SET value = ? WHERE name = 'version'", (str(SCHEMA_VERSION),))
        try:   # give the spelled-out rows' space back (a copy of the file travels); later if busy
            self.con.execute("PRAGMA busy_timeout=0")
            self.con.execute("VACUUM")
        except sqlite3.OperationalError:
            pass
        finally:
            self.con.execute("PRAGMA busy_timeout=60000")

    def _upgrade_from_4(self) -> None:
        """Version 4 did not say where a row came from: each row becomes one measured here
        (source NULL), and the triggers are made again to name the columns they write."""
        with self._transaction():
            if self._version() != "4":
                return
            for table in ("measurement_rows", "best_rows"):
                self.con.execute(f"ALTER TABLE {table} ADD COLUMN source INTEGER")
            for (name,) in self.con.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
                self.con.execute(f"DROP TRIGGER {name}")
            for statement in _statements(_SCHEMA):
                self.con.execute(statement)
            self.con.execute("UPDATE meta SET value = ? WHERE name = 'version'", (str(SCHEMA_VERSION),))

    def _version(self) -> str:
        return self.con.execute("SELECT value FROM meta WHERE name = 'version'").fetchone()[0]

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
        if not self.readonly and self._finalizer.alive:
            close_readers(self.path)   # this thread's shared reader would keep the log
            try:
                self.con.execute("PRAGMA busy_timeout=0")
                self._prune()
            except sqlite3.OperationalError:
                pass
        self._finalizer()

    def _prune(self) -> None:
        """Forget the problems and configs no row uses any more (left by a DELETE, a
        re-keying UPDATE, or a row a constraint refused): only their space. Skipped while
        another writer holds the lock; the next writer's close does it."""
        with self._transaction():
            self.con.execute("DELETE FROM problems WHERE NOT EXISTS (SELECT 1 FROM measurement_rows "
                             "WHERE problem = problems.id) AND id NOT IN (SELECT problem FROM best_rows)")
            self.con.execute("DELETE FROM configs WHERE id NOT IN (SELECT config FROM measurement_rows) "
                             "AND id NOT IN (SELECT config FROM best_rows)")

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

    # ---- the tracked text ---------------------------------------------------------------------
    def synced_with(self) -> dict[str, tuple[int, int]]:
        """{file name: (size, mtime_ns)} of the text files the tracked rows come from."""
        try:
            return {n: (size, mtime) for n, size, mtime in
                    self.con.execute("SELECT name, size, mtime_ns FROM text_files")}
        except sqlite3.OperationalError:   # a file of schema version 4 or older, read as it is
            return {}

    def sync(self, folder: str) -> int:
        """Bring the tracked rows up to date with the text files of `folder` in one
        transaction: the rows of files not read yet are added; where a file read before has
        changed or gone, every tracked row goes first and all the files are read again.
        Of two rows of one (key, config), the later measured wins, a row measured here
        too. Rows measured here stay (source NULL). -> how many files were read."""
        with self._transaction():
            seen = tuning_text.fingerprint(folder)
            known = self.synced_with()
            if known == seen:
                return 0
            if any(seen.get(name) != stat for name, stat in known.items()):
                for table in ("measurement_rows", "best_rows"):
                    self.con.execute(f"DELETE FROM {table} WHERE source IS NOT NULL")
                self.con.execute("DELETE FROM text_files")
                known = {}
            new = sorted(set(seen) - set(known))
            importer = _Importer(self.con)
            for name in new:
                importer.read(os.path.join(folder, name), *seen[name])
            return len(new)

    def merge_text(self, text: str, tracked_as: str | None = None) -> None:
        """Add the rows of a batch's text (tuning_text.batch_text) in one transaction, merged
        by key and config as the tracked text is: of two rows, the later measured wins. The
        rows count as measured here (`convgen tuning-export` writes them), or, with
        `tracked_as`, as from a text file of that name (rows_text leaves them out)."""
        if not text.strip():
            return
        with self._transaction():
            source = None
            if tracked_as is not None:
                source = self.con.execute(
                    "INSERT INTO text_files (name, size, mtime_ns) VALUES (?, 0, 0) ON CONFLICT "
                    "(name) DO UPDATE SET size = 0 RETURNING id", (tracked_as,)).fetchone()[0]
            _Importer(self.con, preload=False).add(
                tuning_text.parse_batch(text.splitlines(), "a tuning task's rows"),
                "a tuning task's rows", source)

    def _rows_of(self, where: str, args: dict) -> tuple[list[dict], list[dict]]:
        """(measurements, bests) as batch_text takes them, of the rows that `where` (SQL on
        m: the stored row, p: its problem) selects."""
        key = ", ".join(f"p.{c}" for c in KEY_COLUMNS)
        out: tuple[list, list] = ([], [])
        for i, (table, columns) in enumerate((("measurement_rows", "m.status, m.ms, m.error"),
                                              ("best_rows", "m.ms, m.checked, m.searched"))):
            out[i].extend(self.rows(
                f"SELECT {key}, f.config, m.measured_at, {columns} FROM {table} m "
                "JOIN problems p ON p.id = m.problem JOIN configs f ON f.id = m.config "
                f"WHERE {where}", args))
        return out

    def rows_text(self, shape: dict | None = None, local_only: bool = False) -> str:
        """The rows as a batch's text (tuning_text.batch_text), "" where there are none: of
        one problem on every device, Triton version and kernel (`shape`: a key's
        SHAPE_COLUMNS), or all; with `local_only`, those measured here alone. What a `convgen
        tune --ray` task is sent (what was measured before) and sends back (what it measured)."""
        where, args = ["1"], {}
        if shape is not None:
            where += [f"p.{c} = :{c}" for c in SHAPE_COLUMNS]
            args = {c: shape[c] for c in SHAPE_COLUMNS}
        if local_only:
            where.append("m.source IS NULL")
        measurements, bests = self._rows_of(" AND ".join(where), args)
        if not measurements and not bests:
            return ""
        return tuning_text.batch_text(measurements, bests)

    def export(self, folder: str, out: str | None = None) -> tuple[list[str], int]:
        """Write every row measured here into new text files, one per (arch, device,
        direction): into `folder`, the tracked data (then read back from there, which marks
        the rows as tracked), or into `out` (to copy into the tracked data elsewhere: the
        rows stay as measured here until a store reads them from there). The store is
        brought up to date with `folder` first, so a row the tracked text holds already is
        not written again. Rows of the interpreter are never written (its times mean
        nothing). -> (the files written, the interpreter rows left out)."""
        self.sync(folder)
        groups: dict[tuple, tuple[list, list]] = {}
        untimed = 0
        for i, rows in enumerate(self._rows_of("m.source IS NULL", {})):
            for row in rows:
                if row["arch"] in tuning_text.UNTIMED_ARCHS:
                    untimed += 1
                    continue
                groups.setdefault((row["arch"], row["device"], row["direction"]), ([], []))[i].append(row)
        written = []
        for where, (measurements, bests) in sorted(groups.items()):
            text = tuning_text.batch_text(measurements, bests)
            newest = max(r["measured_at"] for r in measurements + bests)
            path = os.path.join(out or folder, tuning_text.batch_name(text, *where, newest))
            tuning_text.write_atomic(path, text)
            written.append(path)
        if out is None or os.path.realpath(out) == os.path.realpath(folder):
            self.sync(folder)
        return written, untimed

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

    def devices_searched(self, whole: bool = True) -> dict[tuple, set[str]]:
        """{problem: the devices where a search of its whole tuning space finished}, a
        problem being its key less the arch, device, Triton and kernel (SHAPE_COLUMNS), under
        any Triton and kernel version. A stopped search leaves rows and no best; `tune --top
        K` leaves the best of a few, which `whole=False` counts too."""
        cols = ", ".join(SHAPE_COLUMNS)
        out: dict[tuple, set[str]] = {}
        where, args = ("WHERE searched = ?", (SEARCHED_ALL,)) if whole else ("", ())
        with closing(self.con.execute(f"SELECT DISTINCT device, {cols} FROM best {where}", args)) as cur:
            for device, *shape in cur:
                out.setdefault(tuple(shape), set()).add(device)
        return out

    def best(self, key: dict) -> Best | None:
        row = self.con.execute(f"SELECT config, ms, tflops, checked, measured_at, searched FROM best "
                               f"WHERE {_KEY_MATCH}", key).fetchone()
        return Best(*row, triton=key["triton"]) if row else None

    def best_near(self, key: dict, same_kernels: bool = True) -> Best | None:
        """The best of this key; where this Triton version has none, the best that the
        nearest version measured for the same device, kernel source and problem (a Triton
        upgrade keeps the picks; `triton` says which version measured it); where the kernel
        source has none, that of the same kernels under an older digest (tuning_text.SAME_KERNELS),
        unless `same_kernels` is False. One query over every version and digest."""
        kernels = (key["kernel"], *(tuning_text.same_kernels(tuning_text.data_dir()).get(key["kernel"], ())
                                    if same_kernels else ()))
        args = {c: key[c] for c in ("arch", "device", *SHAPE_COLUMNS)}
        args.update((f"kernel{i}", k) for i, k in enumerate(kernels))
        rows = self.con.execute(
            "SELECT kernel, triton, config, ms, tflops, checked, measured_at, searched FROM best "
            f"WHERE {_SHAPE_MATCH} AND kernel IN ({', '.join(f':kernel{i}' for i in range(len(kernels)))})",
            args).fetchall()
        for kernel in kernels:   # the key's own digest first, then the older ones, nearest first
            mine = [r for r in rows if r[0] == kernel]
            if mine:
                versions = [r[1] for r in mine]
                # this very version first (nearest_version compares major.minor.patch only)
                near = key["triton"] if key["triton"] in versions else nearest_version(key["triton"], versions)
                row = next(r for r in mine if r[1] == near)
                return Best(*row[2:], triton=near)
        return None

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

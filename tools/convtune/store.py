"""The local tuning store: the SQLite database a run and `convgen tune` use by default,
one per checkout in the user's cache folder, built from the tracked text (tuning/data/)
on first use and brought up to date when the text changes; and which database a command
line names (`resolve`)."""
from __future__ import annotations

import functools
import hashlib
import os

from convgen.errors import ConvgenError
from convtune import tuning_text
from convtune.tuning_db import TuningDB
from convtune.tuning_text import data_dir


def cache_dir() -> str:
    """Where the local store lives: $CONVGEN_CACHE_DIR, else $XDG_CACHE_HOME/convgen, else
    ~/.cache/convgen."""
    return (os.environ.get("CONVGEN_CACHE_DIR")
            or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "convgen"))


def store_path(folder: str | None = None) -> str:
    """The local store of a data folder: one file per folder (two checkouts, two stores)."""
    return _store_path(folder or data_dir(), cache_dir())


@functools.lru_cache(maxsize=16)   # each run's lookup asks (a realpath walks the folders)
def _store_path(folder: str, cache: str) -> str:
    folder = os.path.realpath(folder)
    return os.path.join(cache, f"tuning-{hashlib.sha1(folder.encode()).hexdigest()[:12]}.sqlite")


def resolve(given: str | None, writing: bool = False) -> str | None:
    """The database a run uses: `given` a path (used as it is), "" for the default
    ($CONVGEN_TUNING_DB used as it is, else the local store, brought up to date with the
    tracked text first: open_store), None for none. A reader takes a $CONVGEN_TUNING_DB
    that does not exist as none (nothing is tuned yet), and the local store too where
    neither it nor any tracked text exists (a copy of the tools alone); a writer creates
    them."""
    if given is None:
        return None
    path = given or os.environ.get("CONVGEN_TUNING_DB")
    if not path:
        return open_store(create=writing)
    if not (given or writing or os.path.exists(path)):
        return None
    return path


def why_none() -> str:
    """Why resolve("") found no database for a reader."""
    env = os.environ.get("CONVGEN_TUNING_DB")
    return f"{env} does not exist" if env else f"no tracked data in {data_dir()}"


def describe(path: str) -> str:
    """A database as a run's `#` line names it: the local store as such, any other file by
    its name."""
    return "the local tuning store" if path == store_path() else os.path.basename(path)


_FRESH: dict[str, dict] = {}   # store path -> the fingerprint it was last seen up to date with


def open_store(folder: str | None = None, create: bool = True) -> str | None:
    """The local store's path, brought up to date with the tracked text (TuningDB.sync)
    when that changed since it was built: created on first use, its tracked rows built
    again when a file changed or went, the new files' rows added when files were added.
    Rows measured here and not yet exported stay. None where there is neither a store nor
    any text and `create` is off: a reader leaves no empty store behind."""
    folder = folder or data_dir()
    path = store_path(folder)
    seen = tuning_text.fingerprint(folder)
    if _FRESH.get(path) == seen:
        return path
    if not (seen or create or os.path.exists(path)):
        return None
    if os.path.exists(path):
        try:
            with TuningDB(path, readonly=True) as db:
                # an older store without the lookup's index is indexed by its next writer;
                # where none may write (a read-only cache), it serves as it is, by scans
                if db.synced_with() == seen and (db.has_shape_index() or not os.access(
                        os.path.dirname(path), os.W_OK)):
                    _FRESH[path] = seen
                    return path
        except ConvgenError:
            pass   # being created by another process (no schema yet), or damaged: the writer says
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
    except OSError as e:
        raise ConvgenError(f"cannot create the tuning store's folder {os.path.dirname(path)}: "
                           f"{e.strerror} (set CONVGEN_CACHE_DIR to a folder you can write)",
                           field="tuning_db") from None
    with TuningDB(path) as db:
        db.sync(folder)
        _FRESH[path] = db.synced_with()
    return path

"""The tracked form of tuning measurements: text files that grow by what is new.

`tuning/data/` holds JSON Lines files, each one batch of measurements of one (arch,
device, direction), written once and never rewritten: a tuning run that adds 100 problems
adds a file of about 100 problems' worth of text (`convgen tuning-export` writes it from
the local store). The SQLite database (tuning_db.py) is built from these files; they are
the source of truth that is committed.

A file, line by line:

    {"convgen-tuning-data": 1, "configs": [CONFIG, ...]}            the header
    {"key": {...}, "since": T0, "ok": [...], "invalid": [...],       one line per problem
     "wrong": [...], "best": {...}}

- `configs`: every config text (KernelConfig.describe()) the file's rows name, sorted;
  rows name a config by its index there (the text is most of a row's size).
- `key`: the problem's key columns (KEY_COLUMNS: device, Triton, kernel digest, sizes).
- `since`: the UTC time (YYYY-MM-DDTHH:MM:SS) that rows' times count from, in seconds.
- `ok`: [config, ms, seconds] or [config, ms, seconds, note] (the note says how it was timed
  where not as a CUDA graph); `invalid`: [config, seconds, why]; `wrong`: [config, ms,
  seconds, why] (it ran and failed the reference check).
- `best`: {"config", "ms", "checked", "at" (seconds), "searched"}, where there is one.

TFLOPS are not stored: they follow from the problem and the time (flops / ms / 1e9), which
is how `convgen tune` computes them. Reading two files that hold the same (key, config),
the later measurement wins (tuning_db.TuningDB.sync).
"""
from __future__ import annotations

import calendar
import hashlib
import json
import os
import re
import tempfile
import time

from convgen import REPO_ROOT
from convgen.errors import ConvgenError

FORMAT = "convgen-tuning-data"
VERSION = 1
SUFFIX = ".jsonl"
KEY_COLUMNS = ("arch", "device", "triton", "kernel", "direction", "dtype", "layouts", "n", "c", "k", "g",
               "h", "w", "y", "x", "stride_h", "stride_w", "pad", "dil_h", "dil_w")
INT_COLUMNS = frozenset("n c k g h w y x stride_h stride_w dil_h dil_w".split())
SEARCHED_ALL = "space"   # a best's `searched` after a search over every config of the tuning space
# a device whose times mean nothing: the interpreter runs kernels as Python
UNTIMED_ARCHS = ("interpreter",)


def epoch(text: str) -> int:
    """Unix seconds of a UTC time YYYY-MM-DDTHH:MM:SS."""
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def iso(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))


def slug(text: str) -> str:
    """A device name as a file name's part: "NVIDIA H100 80GB HBM3" -> "nvidia-h100-80gb-hbm3"."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "device"


# Kernel sources known to be the same kernels under another digest (launch.kernel_digest
# hashes whole kernel modules, so moving code between modules changes it without changing
# what runs): one line per direction and change, "direction digest same-as why", read by
# best_near, so tuned entries follow kernels that did not change. A line goes in only with
# the proof its `why` names (the Triton functions' source unchanged, the suite's bits equal).
SAME_KERNELS = "same-kernels.tsv"


_SAME_KERNELS_READ: dict[str, tuple[tuple, dict]] = {}   # path -> (its stat, what it says)


def same_kernels(folder: str) -> dict[str, tuple[str, ...]]:
    """{digest: the older digests of the same kernels, nearest first}, from the data folder's
    SAME_KERNELS file (none where it has none); chains are followed. Read again only when
    the file changes (every tuned lookup asks)."""
    path = os.path.join(folder, SAME_KERNELS)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return {}
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    held = _SAME_KERNELS_READ.get(path)
    if held is not None and held[0] == stamp:
        return held[1]
    direct: dict[str, str] = {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip() or line.startswith("#"):
                    continue
                parts = line.rstrip("\n").split("\t")
                if len(parts) < 3 or not all(parts[:3]):
                    raise ConvgenError(f"{f.name}:{n}: expected 'direction<TAB>digest<TAB>same "
                                       "as<TAB>why'")
                direct[parts[1]] = parts[2]
    except FileNotFoundError:
        return {}
    out = {}
    for digest in direct:
        chain, d = [], digest
        while d in direct and direct[d] not in chain and direct[d] != digest:
            d = direct[d]
            chain.append(d)
        out[digest] = tuple(chain)
    _SAME_KERNELS_READ[path] = (stamp, out)
    return out


def data_files(folder: str) -> list[str]:
    """The batch files of a data folder, sorted by name (none where it does not exist)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(os.path.join(folder, n) for n in names if n.endswith(SUFFIX) and not n.startswith("."))


# ---- writing ---------------------------------------------------------------------------------

def batch_text(measurements: list[dict], bests: list[dict]) -> str:
    """The text of one batch. `measurements`: dicts of the key columns, config, status, ms,
    error and measured_at (Unix seconds); `bests`: the key columns, config, ms, checked,
    measured_at and searched. The text depends only on the rows, not on their order."""
    configs = sorted({r["config"] for r in measurements} | {b["config"] for b in bests})
    index = {c: i for i, c in enumerate(configs)}
    problems: dict[tuple, dict] = {}
    for r in measurements + bests:   # each problem's rows, and the time they count from
        key = tuple(r[c] for c in KEY_COLUMNS)
        e = problems.setdefault(key, {"key": dict(zip(KEY_COLUMNS, key)), "since": r["measured_at"],
                                      "ok": [], "invalid": [], "wrong": [], "best": None})
        e["since"] = min(e["since"], r["measured_at"])
    for r in measurements:
        e = problems[tuple(r[c] for c in KEY_COLUMNS)]
        at = r["measured_at"] - e["since"]
        c = index[r["config"]]
        if r["status"] == "ok":
            e["ok"].append([c, r["ms"], at] + ([r["error"]] if r["error"] else []))
        elif r["status"] == "invalid":
            e["invalid"].append([c, at, r["error"] or ""])
        elif r["status"] == "wrong":
            e["wrong"].append([c, r["ms"], at, r["error"] or ""])
        else:
            raise ValueError(f"unknown status {r['status']!r}")
    for b in bests:
        e = problems[tuple(b[c] for c in KEY_COLUMNS)]
        e["best"] = {"config": index[b["config"]], "ms": b["ms"], "checked": b["checked"],
                     "at": b["measured_at"] - e["since"], "searched": b["searched"]}
    lines = [json.dumps({FORMAT: VERSION, "configs": configs})]
    for key in sorted(problems, key=lambda k: json.dumps(k)):
        e = problems[key]
        line = {"key": e["key"], "since": iso(e["since"])}
        for status in ("ok", "invalid", "wrong"):
            if e[status]:
                line[status] = sorted(e[status], key=lambda row: (row[0], json.dumps(row)))
        if e["best"]:
            line["best"] = e["best"]
        lines.append(json.dumps(line, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def batch_name(text: str, arch: str, device: str, direction: str, newest: int) -> str:
    """ARCH-DEVICE-DIRECTION-YYYYMMDD-DIGEST.jsonl: the date of its newest row, and the
    first 8 hex digits of the text's SHA-256 (two exports never take one name)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    day = time.strftime("%Y%m%d", time.gmtime(newest))
    return f"{slug(arch)}-{slug(device)}-{direction}-{day}-{digest}{SUFFIX}"


def write_atomic(path: str, text: str) -> None:
    """The whole file or none: written beside its place, then renamed over it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".", suffix=".part")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)   # as open() would make it, not mkstemp's 0600
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


# ---- reading ---------------------------------------------------------------------------------

def _bad(path: str, line: int, why: str) -> ConvgenError:
    return ConvgenError(f"tuning data '{path}', line {line}: {why} (a damaged or hand-edited "
                        "file: restore it from git)", field="tuning_db")


def _key(raw, path: str, line: int) -> tuple:
    if not isinstance(raw, dict) or set(raw) != set(KEY_COLUMNS):
        raise _bad(path, line, "the key does not have the columns " + ", ".join(KEY_COLUMNS))
    for c in KEY_COLUMNS:
        want = int if c in INT_COLUMNS else str
        if type(raw[c]) is not want:
            raise _bad(path, line, f"key column {c} is not {'an integer' if want is int else 'text'}")
    return tuple(raw[c] for c in KEY_COLUMNS)


def read_batch(path: str):
    """Yield each problem of a batch file as (key tuple, measurements, best): measurements
    a list of (config, status, ms, error, measured_at seconds), best None or (config, ms,
    checked, measured_at seconds, searched). A line that does not parse is an error that
    names the file and the line."""
    with open(path) as f:
        yield from parse_batch(f, path)


def parse_batch(text_lines, path: str):
    """read_batch of a batch's lines (a file, or a batch's text split into lines: what a
    `convgen tune --ray` task sends back); `path` names it in errors."""
    lines = iter(enumerate(text_lines, 1))
    try:
        _, first = next(lines)
        head = json.loads(first)
    except (StopIteration, ValueError):
        raise _bad(path, 1, "no header line") from None
    if not isinstance(head, dict) or FORMAT not in head:
        raise _bad(path, 1, f"not a {FORMAT} file")
    if head[FORMAT] != VERSION:
        raise ConvgenError(f"tuning data '{path}' is format version {head[FORMAT]}; this "
                           f"convgen reads version {VERSION}", field="tuning_db")
    configs = head.get("configs")
    if not isinstance(configs, list) or not all(isinstance(c, str) for c in configs):
        raise _bad(path, 1, "no list of configs")
    for number, text in lines:
        if not text.strip():
            continue
        try:
            e = json.loads(text)
            key = _key(e["key"], path, number)
            t0 = epoch(e["since"])
            rows = [(configs[c], "ok", float(ms), rest[0] if rest else None, t0 + int(at))
                    for c, ms, at, *rest in e.get("ok", [])]
            rows += [(configs[c], "invalid", None, why, t0 + int(at))
                     for c, at, why in e.get("invalid", [])]
            rows += [(configs[c], "wrong", float(ms), why, t0 + int(at))
                     for c, ms, at, why in e.get("wrong", [])]
            b = e.get("best")
            best = (configs[b["config"]], float(b["ms"]), b["checked"], t0 + int(b["at"]),
                    b["searched"]) if b else None
        except ConvgenError:
            raise
        except (ValueError, KeyError, IndexError, TypeError) as err:
            raise _bad(path, number, f"{type(err).__name__}: {err}") from None
        yield key, rows, best


def stats(folder: str) -> list[tuple[str, str, str, int, int]]:
    """(arch, device, Triton, problems with a checked best, measurements) of a data folder,
    sorted; the same (key, config) in two files counts once, as the store keeps one."""
    rows, bests = _census(folder)
    return [(*where, len(bests.get(where, ())), len(rows.get(where, ())))
            for where in sorted(set(rows) | set(bests))]


def searched(folder: str) -> dict[tuple[str, str, str], set[tuple]]:
    """{(arch, device, Triton): the problems (KEY_COLUMNS less the first four: the shape,
    direction, type and layouts) with a best of a search of the whole tuning space}."""
    return {where: {key[4:] for key in keys} for where, keys in _census(folder, whole_only=True)[1].items()}


def _census(folder: str, whole_only: bool = False) -> tuple[dict, dict]:
    rows: dict[tuple, set] = {}
    bests: dict[tuple, set] = {}
    for path in data_files(folder):
        for key, measured, best in read_batch(path):
            where = key[:3]
            rows.setdefault(where, set()).update((key, r[0]) for r in measured)
            got = bests.setdefault(where, set())
            if best is not None and (not whole_only or best[4] == SEARCHED_ALL):
                got.add(key)
    return rows, bests


def data_dir() -> str:
    """The tracked text the local store is built from: $CONVGEN_TUNING_DATA, else the
    repository's tuning/data."""
    return os.environ.get("CONVGEN_TUNING_DATA") or os.path.join(REPO_ROOT, "tuning", "data")


def fingerprint(folder: str) -> dict[str, tuple[int, int]]:
    """{file name: (size, mtime_ns)} of a data folder's batch files: what the store was
    built from, compared at every open (a few stat calls)."""
    out = {}
    for path in data_files(folder):
        st = os.stat(path)
        out[os.path.basename(path)] = (st.st_size, st.st_mtime_ns)
    return out

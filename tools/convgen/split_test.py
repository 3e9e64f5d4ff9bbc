"""split-test: split a multi-RUN lit test into one file per RUN line.

    split-test <input file> <dest dir> [-t TYPE] [--force]

The study's splitTest.sh, for running or timing one problem at a time. Each
output file <stem>_<index>.mlir keeps every line of the input except RUN and
check lines: exactly one RUN (with its `\\` continuation lines) and the check
lines that RUN's FileCheck would use. <index> is the RUN's position among all
RUNs of the input, from 0, so names do not change when -t filters some out.

Which check lines go with which RUN:
* A RUN's check prefixes come from its FileCheck invocation(s):
  --check-prefix=X, --check-prefixes=X,Y (one or two dashes, `=` or a space);
  CHECK when none is given. A RUN without FileCheck gets no check lines.
* A check line is `PREFIX:` or `PREFIX-NEXT|SAME|NOT|DAG|LABEL|EMPTY|COUNT-n:`
  for a prefix that some RUN uses.
* If every RUN that uses prefix P has P lines right after it (after its group of
  consecutive RUN lines, before the next RUN), each P line belongs to the
  RUN(s) it follows: the "RUN / CHECK / RUN / CHECK" layout. P lines above
  the first RUN go to every RUN using P.
* Otherwise the P lines are shared, as FileCheck itself would read them: each
  RUN using P gets all of them (e.g. many RUNs and one CHECK at the end).

-t TYPE keeps only RUNs whose data type is TYPE: the value of `-t` (f16, fp16,
half... are one type), or the MIOpenDriver command (convfp16 -> f16,
convbfp16 -> bf16, convint8 -> i8, conv -> f32); a RUN with neither is f32,
convgen's default. (cli.command_type reads the type; `main` the flags.)

Errors (missing input, no RUN line, unknown type, a file that would be replaced
without --force) are one line on stderr and exit status 2. Files are written to a
temporary folder inside <dest dir> and renamed into place only when all are ready,
so nothing is half-written.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Callable

from convgen import cli, dtypes

RUN_RE = re.compile(r"(?<![\w-])RUN:(.*)$")
CHECK_SUFFIXES = r"(?:-NEXT|-SAME|-NOT|-DAG|-LABEL|-EMPTY|-COUNT-\d+)?"
FILECHECK_NAMES = ("FileCheck", "filecheck")

class SplitError(Exception):
    """A problem with the input; main() prints it as one line."""


@dataclass
class Run:
    index: int                      # among all RUNs of the file, from 0
    lines: list[int]                # line numbers (0-based) of the RUN and its continuations
    command: str
    prefixes: list[str] = field(default_factory=list)
    group: int = 0                  # consecutive RUN lines form one group


def _tokens(command: str) -> list[str]:
    try:
        return shlex.split(command, posix=True)
    except ValueError:
        return command.split()


def check_prefixes(command: str) -> list[str]:
    """The prefixes of every FileCheck in one RUN command ([] if there is none)."""
    words = _tokens(command)
    prefixes: list[str] = []
    found = False
    stage_has_filecheck = False
    explicit = False
    i = 0
    while i < len(words):
        w = words[i]
        if w in ("|", "&&", "||", ";"):
            if stage_has_filecheck and not explicit:
                prefixes.append("CHECK")
            stage_has_filecheck = explicit = False
        elif os.path.basename(w) in FILECHECK_NAMES:
            found = stage_has_filecheck = True
        elif stage_has_filecheck:
            m = re.fullmatch(r"--?check-prefix(es)?(?:=(.*))?", w)
            if m:
                value = m.group(2)
                if value is None and i + 1 < len(words):
                    i += 1
                    value = words[i]
                explicit = True
                prefixes.extend(p for p in (value or "").split(",") if p)
        i += 1
    if stage_has_filecheck and not explicit:
        prefixes.append("CHECK")
    if not found:
        return []
    return list(dict.fromkeys(prefixes))


def parse_runs(lines: list[str]) -> list[Run]:
    runs: list[Run] = []
    i = 0
    group = 0
    last_run_end = None
    while i < len(lines):
        m = RUN_RE.search(lines[i])
        if not m:
            i += 1
            continue
        start = i
        parts = []
        text = m.group(1).rstrip()
        nums = [i]
        while text.endswith("\\"):
            parts.append(text[:-1].strip())
            i += 1
            m2 = RUN_RE.search(lines[i]) if i < len(lines) else None
            if not m2:
                raise SplitError(f"line {i}: the RUN line continued with '\\' has no following RUN: line")
            nums.append(i)
            text = m2.group(1).rstrip()
        parts.append(text.strip())
        if last_run_end is None or start != last_run_end + 1:
            group += 1
        runs.append(Run(index=len(runs), lines=nums, command=" ".join(p for p in parts if p),
                        group=group))
        last_run_end = i
        i += 1
    for run in runs:
        run.prefixes = check_prefixes(run.command)
    return runs


def assign_checks(lines: list[str], runs: list[Run]) -> tuple[dict[int, set[int]], set[int]]:
    """-> ({run index: line numbers of its check lines}, line numbers of all check lines)."""
    all_prefixes = sorted({p for r in runs for p in r.prefixes}, key=len, reverse=True)
    run_lines = {n for r in runs for n in r.lines}
    owned: dict[int, set[int]] = {r.index: set() for r in runs}
    if not all_prefixes:
        return owned, set()
    check_re = re.compile(r"(?<![\w-])(%s)%s:" % ("|".join(map(re.escape, all_prefixes)),
                                                   CHECK_SUFFIXES))
    # Which RUN group does each line follow (0: above the first RUN)?
    follows = [0] * len(lines)
    current = 0
    line_group = {n: r.group for r in runs for n in r.lines}
    for n in range(len(lines)):
        current = line_group.get(n, current)
        follows[n] = current

    by_prefix: dict[str, list[int]] = {}
    for n, text in enumerate(lines):
        if n in run_lines:
            continue
        m = check_re.search(text)
        if m:
            by_prefix.setdefault(m.group(1), []).append(n)

    check_lines: set[int] = set()
    for prefix, nums in by_prefix.items():
        check_lines.update(nums)
        users = [r for r in runs if prefix in r.prefixes]
        groups_with_lines = {follows[n] for n in nums}
        positional = all(r.group in groups_with_lines for r in users)
        for n in nums:
            for r in users:
                if not positional or follows[n] == 0 or follows[n] == r.group:
                    owned[r.index].add(n)
    return owned, check_lines


def split(text: str, type_filter: str | None = None, source: str = "input",
          type_of: Callable[[list[str]], str | None] | None = None) -> list[tuple[int, str]]:
    """-> [(RUN index, file text)] for each RUN kept; `type_of` gives a RUN's type from its
    words (needed with a type filter)."""
    newline_at_end = text.endswith("\n")
    lines = text.splitlines()
    runs = parse_runs(lines)
    if not runs:
        raise SplitError(f"{source}: no RUN line")
    owned, check_lines = assign_checks(lines, runs)
    run_lines = {n for r in runs for n in r.lines}
    out = []
    for run in runs:
        if type_filter is not None and type_of(_tokens(run.command)) != type_filter:
            continue
        keep = set(run.lines) | owned[run.index]
        body = [t for n, t in enumerate(lines)
                if n in keep or (n not in run_lines and n not in check_lines)]
        out.append((run.index, "\n".join(body) + ("\n" if newline_at_end or body else "")))
    return out


def write_all(outputs: list[tuple[str, str]], dest: str) -> list[str]:
    """Write {name: text} into dest atomically: a temp folder, then renames. Files that
    existed (--force) are moved aside first; if a rename fails part-way, the new files are
    taken back and the old ones put back."""
    os.makedirs(dest, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".split-test-", dir=dest)
    try:
        for name, body in outputs:
            with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
                f.write(body)
        backup = os.path.join(tmp, ".old")
        os.mkdir(backup)
        written: list[str] = []
        moved: list[str] = []
        try:
            for name, _ in outputs:
                final = os.path.join(dest, name)
                if os.path.exists(final):
                    os.replace(final, os.path.join(backup, name))
                    moved.append(name)
                os.replace(os.path.join(tmp, name), final)
                written.append(final)
        except OSError:
            for path in written:   # a rename failed part-way: take back the ones done
                try:
                    os.remove(path)
                except OSError:
                    pass
            for name in moved:     # and put back what they replaced
                try:
                    os.replace(os.path.join(backup, name), os.path.join(dest, name))
                except OSError:
                    pass
            raise
        return written
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(input_path: str, dest: str, type_filter: str | None, *, force: bool = False,
        type_of: Callable[[list[str]], str | None] | None = None) -> int:
    """Split `input_path` into `dest`; print the files written. Exit status 0, or 2 after
    one `split-test: error:` line."""
    try:
        try:
            with open(input_path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            raise SplitError(f"{input_path}: no such file") from None
        except IsADirectoryError:
            raise SplitError(f"{input_path}: is a folder, not a test file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise SplitError(f"{input_path}: cannot read: {e}") from None
        if os.path.exists(dest) and not os.path.isdir(dest):
            raise SplitError(f"{dest}: exists and is not a folder")
        pieces = split(text, type_filter, source=input_path, type_of=type_of)
        stem, suffix = os.path.splitext(os.path.basename(input_path))
        outputs = [(f"{stem}_{index}{suffix or '.mlir'}", body) for index, body in pieces]
        if not outputs:
            print(f"split-test: {input_path}: no RUN line of type {type_filter}; nothing written",
                  file=sys.stderr)
            return 0
        existing = [name for name, _ in outputs if os.path.exists(os.path.join(dest, name))]
        if existing and not force:
            raise SplitError(f"{os.path.join(dest, existing[0])} exists"
                             + (f" (and {len(existing) - 1} more)" if len(existing) > 1 else "")
                             + "; give --force to replace them")
        try:
            written = write_all(outputs, dest)
        except OSError as e:
            raise SplitError(f"{dest}: cannot write: {e.strerror or e}") from None
    except SplitError as e:
        print(f"split-test: error: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="split-test",
        description="Split a multi-RUN lit test into one file per RUN line, "
                    "each with the check lines its FileCheck uses.")
    parser.add_argument("input", help="the test file to split")
    parser.add_argument("dest", help="folder for <stem>_<index><suffix> files (created if missing)")
    parser.add_argument("-t", "--type", dest="type", metavar="TYPE",
                        help="keep only RUN lines testing this type: " + ", ".join(dtypes.CONV_TYPES))
    parser.add_argument("-f", "--force", action="store_true",
                        help="replace files that already exist in DEST (default: refuse)")
    args = parser.parse_args(argv)
    type_name = None
    if args.type is not None:
        t = dtypes.find(args.type)
        if t is None or not t.conv_input:
            print(f"split-test: error: -t {args.type}: unknown type (expected one of "
                  f"{', '.join(dtypes.CONV_TYPES)})", file=sys.stderr)
            return 2
        type_name = t.name
    return run(args.input, args.dest, type_name, force=args.force,
                          type_of=cli.command_type)


if __name__ == "__main__":
    raise SystemExit(main())

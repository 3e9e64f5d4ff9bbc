"""Find, in a Hopper kernel's SASS, a register that an in-flight wgmma still reads being
written: the hazard that made bwd_weight's descriptor kernel wrong at random on the H100.

A wgmma whose A operand sits in registers (HGMMA Rd, Ra, gdesc...) reads Ra..Ra+3 while it
runs; PTX leaves it to the program not to write them before a wait retires it. Triton 3.6
pipelines such dots (several groups left in flight at the loop's back edge) and the ptxas of
CUDA 12.8 it ships then loads the next step's A fragments into the same registers at the top
of the loop (LDSM R172 while the HGMMA reading R172 may still run): some warps' rows get
the next step's data. The wrong outputs are whole 16-row bands of a tile, a different
number each run (triton-lang/triton#9433; ptxas 13.3 fixed it). Only the SASS shows it: the
TTGIR of a correct and a wrong kernel are the same, and whether ptxas keeps the groups in
flight (WARPGROUP.DEPBAR.LE gsb0, 0x3) or waits for each (0x0) changed with the epilogue.

The scan follows the code in order, and once more around each backward branch (a loop's
back edge), with the groups still in flight there: groups are closed by an HGMMA that
carries gsb0 and retired by WARPGROUP.DEPBAR.LE gsb0, N (all but the newest N).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from convgen import backend
from convgen.backend import of_arch
from convgen.errors import ConvgenError
from convtune import commands as lab_commands
from convtune.keys import problem_from_key
from convtune.store import resolve
from convtune.tuning_db import TuningDB

A_REGS = 4   # an m64 wgmma's A fragment: 64 rows x 32 bytes over 128 threads
_LABEL = re.compile(r"^\s*(\w+):\s*$")
_HGMMA = re.compile(r"^HGMMA\.\S+\s+R\d+,\s*(R(\d+)(?:\.reuse)?|\S+),")
_DEPBAR = re.compile(r"^WARPGROUP\.DEPBAR\.LE\s+gsb0,\s*(0x[0-9a-fA-F]+|\d+)")
_BRANCH = re.compile(r"^BRA(?:\.\S+)?\s+`?\(?\.?(\w+)")
# the first register written: the first operand, or the one after a predicate written
# first (LOP3.LUT P1, R22, ..; SHFL.IDX PT, R9, ..)
_DEST = re.compile(r"^(\S+)\s+(?:!?U?P(?:T|\d+),\s*)?R(\d+)\b")
# opcodes whose first register operand is read, not written (the compares, PLOP3 and
# R2P write only predicates, and _DEST, which wants a register after them, skips them;
# FCHK writes one predicate, then reads the register _DEST would take)
_NO_DEST = ("ST", "STS", "STG", "STL", "STSM", "RED", "REDG", "BAR", "BRA", "BRX", "JMP",
            "JMX", "EXIT", "HGMMA", "WARPGROUP", "SYNCS", "MEMBAR", "FENCE", "UTMALDG",
            "UTMASTG", "RET", "CALL", "FCHK")


@dataclass(frozen=True)
class Hazard:
    reader: str      # the HGMMA still in flight
    writer: str      # the instruction that writes one of its A registers
    register: int
    line: int        # the writer's line in the SASS (1-based)

    def describe(self) -> str:
        return (f"ptxas writes R{self.register} ({self.writer}, SASS line {self.line}) while a "
                f"wgmma that reads it is in flight ({self.reader}); its outputs may be wrong at "
                f"random (triton-lang/triton#9433)")


def _instructions(sass: str) -> tuple[list[tuple[int, str]], dict[str, int]]:
    """(line number, instruction text without control codes or predicate) and each label's
    index in that list."""
    out, labels = [], {}
    for number, raw in enumerate(sass.splitlines(), 1):
        m = _LABEL.match(raw)
        if m:
            labels[m.group(1)] = len(out)
            continue
        text = raw.split("\t")[-1].strip().rstrip(";").strip()
        if not text or text.startswith(("Function", "//", ".")):
            continue
        if text.startswith("@"):
            text = text.split(None, 1)[1] if " " in text else ""
        out.append((number, text))
    return out, labels


def _written(text: str) -> range:
    """The registers an instruction writes (empty when it writes none or only others)."""
    m = _DEST.match(text)
    if not m:
        return range(0)
    opcode = m.group(1)
    if opcode.split(".")[0] in _NO_DEST:
        return range(0)
    mods = opcode.split(".")
    width = 1
    if opcode.startswith("LDSM"):
        width = 4 if mods[-1] == "4" else 2 if mods[-1] == "2" else 1
    elif "128" in mods or mods[0] == "HMMA":
        width = 4
    elif ("64" in mods or "WIDE" in mods or "F64" in mods or mods[0] in ("DADD", "DMUL", "DFMA")
          or (mods[0] == "CS2R" and "32" not in mods)):
        width = 2
    first = int(m.group(2))
    return range(first, first + width)


def find(sass: str) -> Hazard | None:
    """The first write to a register an in-flight wgmma reads, or None."""
    code, labels = _instructions(sass)
    # groups in flight, oldest first: each a list of (first A register, HGMMA text)
    def scan(start: int, stop: int, groups: list, open_group: list, looped: set):
        i = start
        while i < stop:
            number, text = code[i]
            m = _HGMMA.match(text)
            if m:
                # a wgmma with both operands in shared memory reads no register, but its
                # group counts in the waits
                open_group.append((int(m.group(2)) if m.group(2) else None, text))
                if "gsb0" in text:
                    groups.append(list(open_group))
                    open_group.clear()
            elif (d := _DEPBAR.match(text)):
                keep = int(d.group(1), 0)
                del groups[:max(0, len(groups) - keep)]
            else:
                regs = _written(text)
                for group in groups + [open_group]:
                    for first, reader in group:
                        if first is None:
                            continue
                        hit = set(regs) & set(range(first, first + A_REGS))
                        if hit:
                            return Hazard(reader, text, min(hit), number)
                b = _BRANCH.match(text)
                if b and b.group(1) in labels and labels[b.group(1)] <= i and i not in looped \
                        and (groups or open_group):
                    # a back edge with groups in flight: the loop's next trip runs with them
                    looped.add(i)
                    found = scan(labels[b.group(1)], i, [list(g) for g in groups],
                                 list(open_group), looped)
                    if found:
                        return found
            i += 1
        return None
    return scan(0, len(code), [], [], set())


def register_operand(ttgir: str) -> bool:
    """Whether a Hopper kernel feeds a wgmma's A operand from registers (a tensor, not a
    shared-memory descriptor): the only kernels the SASS scan is needed for."""
    # the first " : " that a type follows (an attribute such as `inputPrecision = 0 : i32`
    # may come before it)
    return any(m.group(1) == "tensor<" for m in re.finditer(
        r"ttng\.warp_group_dot %\S+, %\S+, %\S+[^\n]*? : (tensor<|!ttg\.memdesc<)", ttgir))


# ---- the survey: compile kernels for sm90 here and scan them --------------------------

def _problem(source: tuple):
    """A problem from its picklable form: ("lines", a `convgen tune --lines` file, the
    problem's index there) or ("row", a tuning database row)."""
    if source[0] == "row":
        return problem_from_key(source[1])
    return _lines_problems(source[1])[source[2]]


@functools.cache
def _lines_problems(path: str) -> list:
    """The problems of a `convgen tune --lines` file, read as tune reads them (once per
    process)."""
    return [c.problem for c in lab_commands.parse_tune(["--lines", path])["configs"]]


def _survey_one(item: tuple) -> dict:
    """Compile one (problem source, config text) for sm90 with this machine's Triton and
    ptxas and scan its SASS (a worker of survey()). Every kernel is scanned: the TTGIR's
    register operand is only counted, so a Triton that prints its dots otherwise cannot
    hide a hazard."""
    source, text = item
    row = {"problem": str(source[1]), "config": text}
    try:
        from convaudit import isa  # Triton's compiler, torch
        from convgen.kernels.config import choose, from_text  # torch and Triton
        p = _problem(source)
        row["problem"] = p.describe()
        cfg = choose(p, of_arch("sm90"), True, from_text(text))
        k = isa.compile_problem(p, cfg, "sm90")
        row["register_operand"] = register_operand(k.asm["ttgir"])
        hazard = find(k.asm["sass"])
    except Exception as e:   # noqa: BLE001 - reported as the row's failure, not scanned
        from convgen.kernels.launch import triton_failure  # Triton
        row["failed"] = triton_failure(e) or " ".join(f"{type(e).__name__}: {e}".split())[:300]
        return row
    row["hazard"] = hazard.describe() if hazard else None
    return row


def survey(items: list, jobs: int = 1):
    """Yield _survey_one's row for each (problem source, config text), `jobs` processes at
    once (each compile is a process's whole CPU)."""
    if jobs <= 1:
        yield from map(_survey_one, items)
        return
    import multiprocessing
    with multiprocessing.get_context("spawn").Pool(jobs) as pool:
        yield from pool.imap(_survey_one, items)


def _bests(path: str) -> list:
    """(("row", row), config) of every sm90 best row of a tuning database ("": the local
    store of the tracked data, store.resolve)."""
    with TuningDB(resolve(path) or path, readonly=True) as db:
        rows = db.rows("SELECT * FROM best WHERE arch = 'sm90'")
    return [(("row", r), r["config"]) for r in rows]


def main(argv=None) -> int:
    import argparse
    import json
    import os
    import sys
    ap = argparse.ArgumentParser(
        prog="python -m convaudit.wgmma_hazard",
        description="compile kernels for sm90 with this machine's Triton and its ptxas and find "
                    "a register written while a wgmma that reads it is in flight; exit 1 if any")
    ap.add_argument("--lines", action="append", default=[], metavar="FILE",
                    help="problems as convgen tune --lines takes them: every matrix-core config "
                         "of each one's space (convtune/space.configs)")
    ap.add_argument("--bests", metavar="DB", nargs="?", const="",
                    help="the best config of every sm90 problem of a tuning database (no DB: the "
                         "local store of the tracked data)")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", metavar="FILE", help="every kernel's row, one JSON object a line")
    args = ap.parse_args(argv)

    def fail(message: str) -> int:
        print(f"wgmma-hazard: error: {message}", file=sys.stderr)
        return 2
    if backend.interpreter_requested():
        return fail("unset TRITON_INTERPRET to compile for sm90")
    if not args.lines and args.bests is None:
        return fail("nothing to compile: give --lines FILE or --bests DB")
    from convtune import space as tuning_space  # torch and Triton
    items = []
    try:
        for path in args.lines:
            for i, p in enumerate(_lines_problems(path)):
                items += [(("lines", path, i), c.describe())
                          for c in tuning_space.configs(p, of_arch("sm90"))]
        if args.bests is not None:
            items += _bests(args.bests)
    except OSError as e:
        return fail(f"cannot read '{e.filename}': {e.strerror}")
    except (ConvgenError, ValueError) as e:   # ValueError: shlex's unbalanced quote
        return fail(str(e))
    if not items:
        return fail("no kernel to compile: the lines hold no problem, or the database no sm90 best")
    try:
        out = open(args.json, "w") if args.json else None
    except OSError as e:
        return fail(f"--json: cannot write '{args.json}': {e.strerror}")
    counts = {"kernels": 0, "register_operand": 0, "hazard": 0, "failed": 0}
    try:
        for row in survey(items, args.jobs):
            counts["kernels"] += 1
            counts["register_operand"] += bool(row.get("register_operand"))
            counts["failed"] += "failed" in row
            if row.get("hazard"):
                counts["hazard"] += 1
                print(f"{row['problem']}: {row['config']}: {row['hazard']}")
            if out:
                out.write(json.dumps(row) + "\n")
    finally:
        if out:
            out.close()
    import triton
    print(f"# wgmma-hazard: {counts['kernels']} kernels for sm90 with Triton "
          f"{triton.__version__}, {counts['failed']} of them not compiled or not scanned, "
          f"{counts['register_operand']} with a register wgmma operand, {counts['hazard']} "
          "with the hazard")
    if counts["hazard"]:
        return 1
    if counts["failed"] == counts["kernels"]:
        return fail("no kernel was compiled and scanned (the rows' \"failed\" say why)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Flag tables: what every command of convgen reads its command line with. A flag is one
row (spellings, destination, converter, meaning, default); `flag_table` builds a Table of
rows grouped in sections; `scan` turns words into {destination: value}; `flag_help` prints
a table. A converter turns text into a value or raises ValueError saying what it expected;
`scan` turns that into one ConvgenError line naming the flag.

Spellings: one or two dashes, `-flag value` or `-flag=value`; hyphens and underscores in a
name are the same; a boolean flag alone means true and also takes `=true/false/1/0/on/off/
yes/no` or, as the next word, one of those. A repeated flag is not an error: the last wins.
Importing this module imports neither torch nor Triton.
"""
from __future__ import annotations

import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

from convgen.errors import ConvgenError

TRUE_WORDS = ("true", "1", "on", "yes")


FALSE_WORDS = ("false", "0", "off", "no")


def integer(lo: int | None = None, what: str = "an integer") -> Callable[[str], int]:
    def conv(text: str) -> int:
        if not re.fullmatch(r"[+-]?\d+", text.strip()):
            raise ValueError(f"expected {what}")
        val = int(text)
        if lo is not None and val < lo:
            raise ValueError(f"expected {what}")
        return val
    return conv


positive = integer(1, "a positive integer")


nonneg = integer(0, "a non-negative integer")


def real(text: str) -> float:
    try:
        val = float(text)
    except ValueError:
        raise ValueError("expected a number") from None
    if not math.isfinite(val):
        raise ValueError("expected a finite number")
    return val


def nonneg_real(text: str) -> float:
    val = real(text)
    if val < 0:
        raise ValueError("expected a number >= 0")
    return val


def positive_real(text: str) -> float:
    val = real(text)
    if val <= 0:
        raise ValueError("expected a number > 0")
    return val


def as_text(text: str) -> str:
    return text


def choice(mapping: dict[str, Any]) -> Callable[[str], Any]:
    def conv(text: str) -> Any:
        key = text.strip().lower()
        if key not in mapping:
            raise ValueError(f"expected one of {', '.join(mapping)}")
        return mapping[key]
    return conv


def one_of(*names: str) -> Callable[[str], str]:
    return choice({n: n for n in names})


def bool_word(text: str) -> bool:
    key = text.strip().lower()
    if key in TRUE_WORDS:
        return True
    if key in FALSE_WORDS:
        return False
    raise ValueError("expected true/false, 1/0, on/off")


def switch(on: Any = True, off: Any = False) -> Callable[[str], Any]:
    """A boolean flag: alone it means true; `=false` etc. give `off`."""
    def conv(text: str) -> Any:
        return on if bool_word(text) else off
    conv.boolean = True  # type: ignore[attr-defined]
    return conv


def switch_or_text(what: str) -> Callable[[str], Any]:
    """A flag that may stand alone or take a value (`--ray`, `--ray=auto`): alone (or a
    true word) "", a false word None, else the text; `what` says what text it takes."""
    def conv(text: str) -> Any:
        word = text.strip().lower()
        if word in TRUE_WORDS:
            return ""
        if word in FALSE_WORDS:
            return None
        if not text.strip():
            raise ValueError(f"expected {what}")
        return text.strip()
    conv.boolean = True  # type: ignore[attr-defined]
    return conv


@dataclass(frozen=True)
class Flag:
    names: tuple                     # spellings, the first one shown in help
    dest: str | None                 # key of the collected values; None: read and dropped
    convert: Callable[[str], Any]    # text -> value; ValueError says what was expected
    help: str = ""
    default: str | Callable[[], str] = ""   # shown in help; a callable where another module owns it
    section: str = ""

    @property
    def default_text(self) -> str:
        return self.default() if callable(self.default) else self.default

    @property
    def boolean(self) -> bool:       # value optional: alone it means true
        return getattr(self.convert, "boolean", False)


@dataclass(frozen=True)
class Table:
    flags: tuple                     # Flag rows, in help order
    by_key: dict                     # normalised spelling (lower case with fold_case) -> Flag
    fold_case: bool = False          # -RMS_threshold and -rms_threshold are one flag

    def get(self, name: str) -> Flag | None:
        key = flag_key(name)
        return self.by_key.get(key.lower() if self.fold_case else key)

    def spelling(self, dest: str) -> str | None:
        """How this table spells the flag that fills `dest` (its first name)."""
        for f in self.flags:
            if f.dest == dest:
                return "-" + f.names[0]
        return None


def flag_key(name: str) -> str:
    return name.replace("-", "_")


def flag_table(*sections, fold_case: bool = False) -> Table:
    """sections: (title, [(names, dest, converter, help, default), ...]) pairs."""
    flags, by_key = [], {}
    for title, rows in sections:
        for names, dest, conv, *text in rows:
            names = (names,) if isinstance(names, str) else tuple(names)
            f = Flag(names, dest, conv, *(text + ["", ""])[:2], section=title)
            flags.append(f)
            for name in names:
                key = flag_key(name).lower() if fold_case else flag_key(name)
                assert key not in by_key, f"flag {name} defined twice"
                by_key[key] = f
    return Table(tuple(flags), by_key, fold_case)


def is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def looks_like_flag(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not is_number(tok)


def scan(tokens: list[str], table: Table) -> dict[str, Any]:
    """Collect {dest: value}; the last occurrence of a flag wins."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not looks_like_flag(tok):
            raise ConvgenError(f"unexpected argument '{tok}' (flags start with '-')")
        spelling, eq, text = tok.partition("=")
        name = spelling[2:] if spelling.startswith("--") else spelling[1:]
        flag = table.get(name) if name and not name.startswith("-") else None
        if flag is None:
            raise ConvgenError(f"unknown flag '{spelling}'")
        if not eq:
            nxt = tokens[i] if i < len(tokens) else None
            if flag.boolean:
                text = "true"
                if nxt is not None and nxt.strip().lower() in TRUE_WORDS + FALSE_WORDS:
                    text, i = nxt, i + 1
            elif nxt is None or looks_like_flag(nxt):
                raise ConvgenError(f"flag '{spelling}' is missing its value")
            else:
                text, i = nxt, i + 1
        try:
            val = flag.convert(text)
        except ValueError as e:
            raise ConvgenError(f"invalid value '{text}' for {spelling}: {e}") from None
        if flag.dest is not None:
            values[flag.dest] = val
    return values


def flag_help(table: Table, width: int = 100) -> str:
    import textwrap
    lines, section = [], None
    for f in table.flags:
        if f.section != section:
            section = f.section
            lines.append(f"\n{section}:")
        names = ", ".join("-" + n for n in f.names)
        text = f.help + (f" [default: {f.default_text}]" if f.default_text else "")
        first = f"  {names:<26}"
        body = textwrap.wrap(text, width - 29) or [""]
        if len(first) > 28:
            lines.append(first.rstrip())
            lines += ["  " + " " * 27 + b for b in body]
        else:
            lines.append(first + " " + body[0])
            lines += [" " * 29 + b for b in body[1:]]
    return "\n".join(lines) + "\n"


def usage_text(head: str, table: Table) -> str:
    """A command's --help: its head, its flags, and how flags are spelled."""
    return (head + flag_help(table)
            + "\nFlags take one or two dashes and -flag=value or -flag value; the last of a "
              "repeated flag wins.\n")


def timestamp(text: str) -> str:
    """A time as the tuning database writes it (measured_at), so the two compare as text."""
    import datetime
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").strftime("%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise ValueError("expected a time as YYYY-MM-DDTHH:MM:SS") from None


def listed(conv: Callable[[str], Any]) -> Callable[[str], tuple]:
    """A comma-separated list, each item converted."""
    return lambda text: tuple(conv(item) for item in text.split(","))


def split_flags(tokens: list[str], table: Table) -> tuple[list[str], list[str]]:
    """(the tokens of `table`'s flags with their values, every other token), in order."""
    mine, rest, i = [], [], 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        spelling, eq, _ = tok.partition("=")
        flag = table.get(spelling.lstrip("-")) if looks_like_flag(tok) else None
        if flag is None:
            rest.append(tok)
            continue
        mine.append(tok)
        nxt = tokens[i] if i < len(tokens) else None
        if not eq and nxt is not None and (nxt.strip().lower() in TRUE_WORDS + FALSE_WORDS if flag.boolean
                                           else not looks_like_flag(nxt)):
            mine.append(nxt)
            i += 1
    return mine, rest


def one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def quiet_broken_pipe() -> int:
    """stdout's reader went away (`convgen ... | head -1`): stop without a traceback, with
    the status a shell gives a process killed by SIGPIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 141

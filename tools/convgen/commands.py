"""The commands beside a test run (`convgen compare`, `convgen tune`, ...): each is a
Command row, found by name in the suite's own table (cli.py) or in a plug-in package's
`commands` module (its COMMANDS tuple). The suite never imports a plug-in by name at
import time: `plugin_commands` looks each module up when a command line asks, and leaves
out a package that is not installed. Adding a command touches its own module alone."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from convgen import optional_module
from convgen.flags import Table, usage_text

# packages of commands on top of the suite: the tuning lab, the fp16 study, the ISA audit,
# the fuzzer
PLUGINS = ("convtune.commands", "convstudy.commands", "convaudit.commands", "convfuzz.commands")


@dataclass(frozen=True)
class Command:
    name: str
    synopsis: str                       # "convgen tune [tune flags] PROBLEM | ..."
    about: str                          # what it does, a few lines for --help
    flags: Table
    run: Callable[[str, list[str]], int]   # (name, the words after it); a ConvgenError's
                                           # field names one of `flags`

    def usage(self) -> str:
        return usage_text(f"usage: {self.synopsis}\n\n{self.about}", self.flags)


def plugin_commands() -> list[Command]:
    """Every plug-in package's commands, in PLUGINS order; a package not installed has none."""
    modules = (optional_module(name) for name in PLUGINS)
    return [c for m in modules if m is not None for c in m.COMMANDS]


def find(name: str, own: tuple) -> Command | None:
    """The command called `name`: the suite's own (`own`) first, then the plug-ins'."""
    for c in own:
        if c.name == name:
            return c
    for c in plugin_commands():
        if c.name == name:
            return c
    return None

"""The one exception the CLI turns into a one-line message and exit status 2."""
from __future__ import annotations

import sys
from typing import Callable, NoReturn


class ConvgenError(Exception):
    """A problem the user can fix: bad flag, impossible size, unsupported type, a config
    the device cannot run.

    `field` names the option the problem is about, in the words of options.py ("type",
    "perf_config", "rand_range", "json", ...), so that the CLI, the only module that
    knows flag spellings, can say which flag to change. None: the message stands alone.
    """

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.field = field


def script_main(name: str, main: Callable[[], int], flags: dict[str, str] | None = None) -> NoReturn:
    """Run a standalone script's main (benchmarks/): exit with its status, or with one
    `<name>: error:` line and status 2 where it raises a ConvgenError, as convgen does.
    `flags` spells the script's own flags by field (a `field` it does not name stays unsaid)."""
    try:
        sys.exit(main())
    except ConvgenError as e:
        flag = (flags or {}).get(e.field)
        print(f"{name}: error: {flag + ': ' if flag else ''}{e}", file=sys.stderr)
        sys.exit(2)

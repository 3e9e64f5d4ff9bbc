"""One case through convgen, in this process, and what became of it.

A case fails when its run gives a 0 bit (`wrong`), ends in a traceback (`crashed`),
refuses a problem the fuzzer drew from the supported space with a `convgen: error:` line
(`refused`), or runs past the time limit (`hung`). A run the implementation under test
declines (`convgen: unsupported:`, exit 77) is no failure and no pass: the fuzzer draws
another case.
"""
from __future__ import annotations

import io
import time
from dataclasses import dataclass

from convgen import implementations, in_process
from convgen.report import BITS_LINE

KINDS = ("wrong", "crashed", "refused", "hung")


def _bits(text: str) -> str | None:
    """The run's last bits line, `[1 0 1]`, or None."""
    lines = [ln for ln in text.splitlines() if BITS_LINE.match(ln)]
    return lines[-1] if lines else None


@dataclass(frozen=True)
class Outcome:
    kind: str            # passed, unsupported, or one of KINDS
    status: int          # the exit status (-1: stopped at the time limit)
    text: str            # what the run printed, stdout and stderr together
    seconds: float

    @property
    def failed(self) -> bool:
        return self.kind in KINDS

    def what(self) -> str:
        """One line: how the run failed."""
        if self.kind == "wrong":
            return f"bits {_bits(self.text)}"
        if self.kind == "hung":
            return f"no result in {self.seconds:.0f} s"
        lines = [ln for ln in self.text.strip().splitlines() if ln.strip()]
        if self.kind == "refused":
            return next((ln for ln in lines if ln.startswith("convgen: error:")), lines[-1] if lines else "")
        return lines[-1] if lines else f"exit status {self.status}"


def run_case(flags, timeout: float = 60.0) -> Outcome:
    """Run `convgen FLAGS` here; its output is captured, not printed."""
    out = io.StringIO()
    t0 = time.perf_counter()
    try:
        with in_process.time_limit(timeout):
            status = in_process.run(flags, out, out)
    except in_process.TimeUp:
        status = -1
    seconds = time.perf_counter() - t0
    text = out.getvalue()
    if status == -1:
        kind = "hung"
    elif status == implementations.EXIT_UNSUPPORTED:
        kind = "unsupported"
    elif status == 2 and "convgen: error:" in text:
        kind = "refused"
    elif status:
        kind = "crashed"
    else:
        bits = _bits(text)
        if bits is None:
            kind = "crashed"   # exit 0 without a verdict: -pv is always given
        else:
            kind = "wrong" if "0" in bits else "passed"
    return Outcome(kind, status, text, seconds)

"""One case through convgen, in this process, and what became of it.

A case fails when its run gives a 0 bit (`wrong`), ends in a traceback (`crashed`),
refuses a problem the fuzzer drew from the supported space with a `convgen: error:` line
(`refused`), or runs past the time limit (`hung`). A run the implementation under test
declines (`convgen: unsupported:`, exit 77) is no failure and no pass: the fuzzer draws
another case.
"""
from __future__ import annotations

import contextlib
import io
import re
import signal
import threading
import time
import traceback
from dataclasses import dataclass

from convgen import cli, implementations

BITS = re.compile(r"^\[([01])((?: [01])*)\]\s*$", re.M)
KINDS = ("wrong", "crashed", "refused", "hung")


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
            bits = BITS.findall(self.text)[-1]
            return f"bits [{bits[0]}{bits[1]}]"
        if self.kind == "hung":
            return f"no result in {self.seconds:.0f} s"
        lines = [ln for ln in self.text.strip().splitlines() if ln.strip()]
        if self.kind == "refused":
            return next((ln for ln in lines if ln.startswith("convgen: error:")), lines[-1] if lines else "")
        return lines[-1] if lines else f"exit status {self.status}"


class _Timeout(BaseException):
    """Raised in the main thread when a run's time is up (not an Exception, so that no
    handler of convgen's catches it)."""


@contextlib.contextmanager
def _limit(seconds: float):
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise _Timeout()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(flags, timeout: float = 60.0) -> Outcome:
    """Run `convgen FLAGS` here; its output is captured, not printed."""
    out = io.StringIO()
    t0 = time.perf_counter()
    status = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            with _limit(timeout):
                status = cli.main(list(flags))
        except _Timeout:
            status = -1
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:   # a bug: its traceback, as the process would print it
            traceback.print_exc()
            status = 1
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
        bits = BITS.findall(text)
        if not bits:
            kind = "crashed"   # exit 0 without a verdict: -pv is always given
        else:
            kind = "wrong" if "0" in (bits[-1][0] + bits[-1][1]) else "passed"
    return Outcome(kind, status or 0, text, seconds)

"""convgen's command line run in this process, its output captured, under an optional time
limit: lit's in-process RUN lines (lit_format.py) and `convgen fuzz`'s cases
(convfuzz/run.py) both run it this way."""
from __future__ import annotations

import contextlib
import signal
import threading
import traceback

from convgen import cli


class TimeUp(BaseException):
    """A run's time is up: a BaseException, so that no `except Exception` in the code under
    test swallows it."""


@contextlib.contextmanager
def time_limit(seconds: float | None):
    """Raise TimeUp in this thread when `seconds` pass (the main thread's alarm; in another
    thread, or with no seconds, no limit)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise TimeUp()
    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run(args, out, err) -> int:
    """The exit status of `convgen ARGS` run here, its stdout written to `out` and its
    stderr to `err` (the same stream to merge them); a bug's traceback goes to `err` with
    status 1, as the process would give them. TimeUp passes through."""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(list(args))
        except SystemExit as e:
            status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except Exception:   # a bug
            traceback.print_exc()
            status = 1
    return status or 0

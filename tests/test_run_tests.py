"""scripts/run-tests: which pytest worker count it asks for, and how it totals a runner that
fails without a report. A stand-in Python records the arguments instead of running tests."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Answers "import xdist" as installed, records pytest's arguments and fails the lit step
# without a report; the totals step (python3 - ...) runs in the real interpreter.
FAKE = """#!/usr/bin/env bash
if [ "$1" = -c ]; then exit 0; fi
if [ "$1" = -m ] && [ "$2" = pytest ]; then echo "$@" > "$LOG"; exit 0; fi
if [ "$1" = - ]; then exec {py} "$@"; fi
exit 3
"""


def run(tmp_path, addopts):
    fake = tmp_path / "python"
    fake.write_text(FAKE.format(py=sys.executable))
    fake.chmod(0o755)
    env = dict(os.environ, PYTHON=str(fake), LOG=str(tmp_path / "pytest-args"),
               PYTEST_ADDOPTS=addopts)
    p = subprocess.run(["bash", str(REPO / "scripts" / "run-tests")], env=env,
                       capture_output=True, text=True, timeout=60)
    return p, (tmp_path / "pytest-args").read_text().split()


@pytest.mark.parametrize("addopts,auto", [
    ("", True), ("-x", True), ("--no-header --new-first", True),
    ("-n 4", False), ("-n4", False), ("-nauto", False), ("-p xdist -n 14", False),
    ("--numprocesses=3", False), ("--numprocesses 3", False)])
def test_a_worker_count_of_your_own_is_kept_else_one_per_core(tmp_path, addopts, auto):
    p, args = run(tmp_path, addopts)
    assert (args.count("auto") == 1 and args[args.index("auto") - 1] == "-n") == auto, args
    assert auto or "-n" not in args


def test_a_runner_that_fails_without_a_report_counts_as_one_failure(tmp_path):
    p, _ = run(tmp_path, "")
    assert p.returncode == 1
    assert "run-tests: lit exited with status 3 and wrote no report" in p.stderr
    assert p.stdout.splitlines()[-1] == "0 passed, 1 failed", p.stdout

"""The kernels' coverage table (docs/data/kernel-coverage.json, scripts/kernel-coverage)
describes today's kernels: a kernel branch added, moved into another function or removed
since it was measured fails here until the table is measured again, so a new branch's
tests (or their absence) show in the table's diff."""
import importlib.machinery
import importlib.util
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "docs", "data", "kernel-coverage.json")


def _tool():
    path = os.path.join(ROOT, "scripts", "kernel-coverage")
    loader = importlib.machinery.SourceFileLoader("kernel_coverage", path)
    spec = importlib.util.spec_from_loader("kernel_coverage", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_coverage_table_knows_every_kernel_branch():
    tool = _tool()
    with open(TABLE) as f:
        recorded = set(json.load(f)["branch_points"])
    today = set()
    for path in sorted(os.listdir(tool.KERNELS)):
        if path.endswith(".py"):
            today |= set(tool.branch_points(os.path.join(tool.KERNELS, path)))
    new, gone = sorted(today - recorded), sorted(recorded - today)
    assert not new and not gone, (
        f"kernel branches changed since docs/data/kernel-coverage.json was measured; new: {new}; "
        f"gone: {gone}. Measure again: scripts/kernel-coverage measure && scripts/kernel-coverage "
        "report --json docs/data/kernel-coverage.json")


def test_the_table_counts_every_module_s_lines_and_branches():
    with open(TABLE) as f:
        table = json.load(f)
    # the PR set's tests that ran kernel code, pytest's and lit's (not pytest's alone)
    assert table["tests"] > 500, table["tests"]
    for row in table["modules"]:
        assert len(row["lines"]) == 3 and len(row["branches"]) == 3 and sum(row["lines"]) > 0, row


def test_every_hole_is_closed_or_has_a_reason():
    """Every kernel line and branch way is reached by two CPU PR tests or more, or
    docs/data/kernel-coverage-unreached.tsv says why no CPU PR test can reach it; and each
    reason there still names a hole (a closed hole's line goes)."""
    tool = _tool()
    with open(TABLE) as f:
        holes = {(h["module"], h["at"]): h for h in json.load(f)["holes"]}
    reasons = tool.unreached()
    unexplained = sorted(f"{m}: {at} ({len(holes[m, at]['tests'])} tests)" for m, at in holes
                         if (m, at) not in reasons)
    assert not unexplained, ("kernel code reached by fewer than two PR tests, without a reason "
                             f"in docs/data/kernel-coverage-unreached.tsv: {unexplained}")
    stale = sorted(f"{m}: {at}" for m, at in reasons if (m, at) not in holes)
    assert not stale, f"reasons for holes the table no longer has: {stale}"
    assert all(why.strip() for why in reasons.values())

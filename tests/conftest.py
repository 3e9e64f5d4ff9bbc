import os
import sys

# No GPU here: kernels run in Triton's interpreter, which must be chosen
# before any @triton.jit function is defined.
try:
    import torch
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
except ImportError:  # pragma: no cover
    pass
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# Importable without `pip install -e .` too: here, and in the `python -m convgen` runs the
# tests start (the GPU machine has no network to install with)
TOOLS = os.path.join(os.path.dirname(HERE), "tools")
sys.path.insert(0, TOOLS)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)

# ---- PR and nightly sets -------------------------------------------------------------
# `pytest tests` runs the PR set. Tests marked `nightly` (a slower run of something the PR
# set already checks on a smaller problem or a subset of the suite) run as well when
# CONVGEN_NIGHTLY=1, which `scripts/run-tests --param nightly=1` sets, the same switch as
# lit's nightly set (the marker is registered in pyproject.toml). `-m nightly` runs the
# nightly tests alone.
NIGHTLY = os.environ.get("CONVGEN_NIGHTLY", "0").strip().lower() not in ("", "0", "false", "no", "off")

# Tests that take a minute or more in the interpreter: they start first, so that with
# pytest-xdist (`--dist load --maxschedchunk 1`, scripts/run-tests) the short tests fill
# the other workers meanwhile instead of one long test running alone at the end.
LONG_FIRST = (
    "test_the_pr_set_on_amd_compiles_clean",
    "test_every_mutant_is_killed_twice_and_nothing_cries_wolf",
    "test_the_worker_and_the_shell_give_the_same_results_on_the_pr_set",
    "test_small_runs_the_grid_resumes_and_reports",
)


def pytest_collection_modifyitems(config, items):
    markexpr = config.getoption("markexpr", "") or ""
    if not NIGHTLY and "nightly" not in markexpr:
        kept = [i for i in items if i.get_closest_marker("nightly") is None]
        if len(kept) != len(items):
            config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("nightly")])
            items[:] = kept
    rank = {name: r for r, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda i: rank.get(getattr(i, "originalname", i.name), len(rank)))   # stable


# ---- kernel coverage (scripts/kernel-coverage) ---------------------------------------------
# Under coverage.py each test's lines are recorded under its own context (its node id), so
# the report can say which tests reach each kernel line and branch.
import pytest  # noqa: E402


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = sys.modules.get("coverage")
    current = cov.Coverage.current() if cov is not None else None
    if current is not None:
        current.switch_context(item.nodeid)
    yield
    if current is not None:
        current.switch_context("")

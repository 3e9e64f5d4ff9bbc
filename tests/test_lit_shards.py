"""The suite split across hosts with lit's own sharding: the shards of the PR set together
run every test once, with the verdicts of one unsharded run; the shards are dealt in a
fixed order (scripts/lit adds --order=lexical, lit.cfg.py refuses another order), and
scripts/lit-merge joins their JSON outputs and refuses a test twice or missing.

The PR set runs with `--param impl=aten` here: every test goes through the in-process
format and the expected-failures table as a convgen run does, in seconds on a CPU."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
from convgen import run_lit  # noqa: E402


def lit(*args, env=None, cwd=REPO):
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "lit"), "--no-progress-bar",
                        *map(str, args)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, **(env or {})}, cwd=cwd)
    return p.returncode, p.stdout + p.stderr


def merge(*args):
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "lit-merge"), *map(str, args)],
                       capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


def verdicts(path) -> dict:
    return {t["name"]: t["code"] for t in json.loads(Path(path).read_text())["tests"]}


def test_three_shards_run_the_pr_set_once_with_the_verdicts_of_one_run(tmp_path):
    common = ("--param", "impl=aten", "--param", f"exec_root={tmp_path / 'exec'}")
    rc, out = lit(*common, "-o", tmp_path / "whole.json", "e2e/")
    assert rc == 0, out[-3000:]
    whole = verdicts(tmp_path / "whole.json")
    shards = []
    for i in (1, 2, 3):
        path = tmp_path / f"shard{i}.json"
        if i == 2:   # the environment's form, as a CI matrix sets it
            rc, out = lit(*common, "-o", path, "e2e/",
                          env={"LIT_NUM_SHARDS": "3", "LIT_RUN_SHARD": "2"})
        else:
            rc, out = lit(*common, "--num-shards", 3, "--run-shard", i, "-o", path, "e2e/")
        assert rc == 0, out[-3000:]
        assert f"Selecting shard {i}/3" in out, out[-3000:]
        shards.append(verdicts(path))
    names = [n for s in shards for n in s]
    assert len(names) == len(set(names)), "a test ran in two shards"
    assert all(len(s) >= len(whole) // 3 for s in shards), [len(s) for s in shards]
    assert {n: c for s in shards for n, c in s.items()} == whole
    assert len(whole) == len(run_lit.discovered(["e2e/"]))

    rc, out = merge(tmp_path / "all.json", *(tmp_path / f"shard{i}.json" for i in (1, 2, 3)),
                    "--suite", "e2e/")
    assert rc == 0, out
    assert verdicts(tmp_path / "all.json") == whole
    assert f"lit-merge: {len(whole)} tests from 3 shards" in out


def test_each_host_deals_the_same_shards_whatever_its_history(tmp_path):
    """lit's default order puts this host's slowest and failed tests first: a shard of it
    would hold other tests than the same shard on a fresh host."""
    assert run_lit.with_fixed_order(["--num-shards", "3", "--run-shard", "1", "e2e/"], {})[0] == "--order=lexical"
    assert run_lit.with_fixed_order(["e2e/"], {"LIT_NUM_SHARDS": "3"})[0] == "--order=lexical"
    assert run_lit.with_fixed_order(["e2e/"], {}) == ["e2e/"]
    # lit reads $LIT_OPTS as words of its command line
    assert run_lit.with_fixed_order(["e2e/"], {"LIT_OPTS": "--num-shards=2 --run-shard=1"})[0] == "--order=lexical"
    assert run_lit.with_fixed_order(["e2e/"], {"LIT_OPTS": "--num-shards=2 --order=lexical"}) == ["e2e/"]
    assert run_lit.fixed_order_problem(["--run-shard=1", "--num-shards=2"], "lexical", {}) is None
    assert run_lit.fixed_order_problem(["e2e/"], "smart", {}) is None
    assert "--order=lexical" in run_lit.fixed_order_problem(["--num-shards=2"], "random", {})
    rc, out = lit("--order=random", "--no-execute", "--num-shards", 2, "--run-shard", 1,
                  "--param", f"exec_root={tmp_path}", "e2e/")
    assert rc != 0 and "needs --order=lexical, not random" in out, out[-2000:]


def _result(path, *tests):
    path.write_text(json.dumps({"__version__": [23, 1, 5], "elapsed": 1.0, "tests": [
        {"name": n, "code": c, "output": "", "elapsed": 0.1} for n, c in tests]}))
    return path


def test_the_merge_refuses_a_test_twice_and_says_a_failure(tmp_path):
    a = _result(tmp_path / "a.json", ("s :: x.mlir", "PASS"))
    b = _result(tmp_path / "b.json", ("s :: x.mlir", "PASS"), ("s :: y.mlir", "PASS"))
    rc, out = merge(tmp_path / "all.json", a, b)
    assert rc == 2 and "lit-merge: error: s :: x.mlir ran in two shards" in out, out
    assert not (tmp_path / "all.json").exists()
    c = _result(tmp_path / "c.json", ("s :: y.mlir", "FAIL"))
    rc, out = merge(tmp_path / "all.json", a, c)
    assert rc == 1 and "2 tests from 2 shards: 1 FAIL, 1 PASS" in out, out
    with pytest.raises(ValueError, match="ran in no shard"):
        run_lit.merge([str(a)], ["e2e/"])

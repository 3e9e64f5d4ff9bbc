"""The e2e suite's organisation: generated model tests in sync, coverage of the model
layers, no retries, and a flakiness script that reports a seed-dependent failure."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from test_lit_selftest import LIT, REPO, lit_env, make_suite, pytestmark  # noqa: F401

from convtune import commands as lab_commands
from convtune import models

E2E = REPO / "e2e"


def test_generated_model_tests_are_up_to_date():
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "gen-model-tests"), "--check"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("net,table", [("resnet50", models.RESNET50),
                                       ("mobilenet_v2", models.MOBILENET_V2)])
def test_every_model_layer_has_every_direction_layout_and_two_batches(net, table):
    files = sorted((E2E / "models" / net).glob("*.mlir"))
    assert len(files) == 3 * len(table) and len(table) == len(set(table))
    for i, layer in enumerate(table):
        mine = [p for p in files if p.name.startswith(f"layer{i + 1:02d}_")]
        seen, runs = set(), 0
        for path in mine:
            for run in (l for l in path.read_text().splitlines() if l.startswith("// RUN:")):
                op = re.search(r"--operation (\S+)", run).group(1)
                layout = re.search(r"-in_layout=(\w+)", run).group(1)
                batch = re.search(r"-batchsize=(\d+)", run).group(1)
                assert " ".join(lab_commands.layer_args(layer, int(batch))) in run, path.name
                assert "%random_data %away_from_zero" in run   # fp16/bf16: away from zero
                seen.add((op, layout, batch))
                runs += 1
        assert {o for o, _, _ in seen} == {"conv2d", "conv2d_bwd_data", "conv2d_bwd_weight"}
        assert {l for _, l, _ in seen} == {"nchw", "nhwc"}
        assert len({b for _, _, b in seen}) >= 2
        assert len(seen) == runs == 12, mine


def test_hand_written_16_bit_tests_draw_away_from_zero():
    """The fp16 study: values near zero make relative metrics meaningless, so every
    hand-written f16/bf16 RUN line on random data draws from [-3,-1] and [1,3] unless it
    names its own range; the subnormal tests need values near zero, and imported lines
    keep their own suite's data."""
    missing = []
    for path in sorted(E2E.rglob("*.mlir")):
        rel = path.relative_to(E2E).as_posix()
        if rel.startswith("compat/") or "subnormal" in path.name:
            continue
        for run in (l for l in path.read_text().splitlines() if l.startswith("// RUN:")):
            if (re.search(r"-t[= ]b?f16\b", run) and "%random_data" in run
                    and "%away_from_zero" not in run and "-rand_min" not in run):
                missing.append(rel)
    assert not missing, missing


def _requires(path) -> set:
    return {w.strip() for line in re.findall(r"^// REQUIRES: (.*)$", path.read_text(), re.M)
            for w in line.split(",")}


def test_the_readme_counts_the_pr_and_nightly_sets():
    files = [p for p in E2E.rglob("*.mlir") if "Output" not in p.parts]
    nightly = [p for p in files if "nightly" in _requires(p)]
    pr = [p for p in files if p not in nightly]
    gpu = lambda ps: sum("gpu" in _requires(p) for p in ps)   # noqa: E731
    assert len(nightly) >= 75 and len(pr) >= 50
    readme = " ".join((REPO / "README.md").read_text().split())
    assert (f"every test without `REQUIRES: nightly`: {len(pr)} files, {gpu(pr)} of which need "
            "a GPU") in readme
    assert f"adds the other {len(nightly)} files, {gpu(nightly)} of which need a GPU" in readme


def test_no_test_is_retried():
    texts = [p.read_text() for p in list(E2E.rglob("*.mlir")) + list(REPO.glob("*.py"))
             + list(REPO.glob("*.in")) + [REPO / "CMakeLists.txt"]]
    assert not any("ALLOW_RETRIES" in t or "allow_retries" in t for t in texts)


_BIT = r"(?:[01]|\{\{\[01\]\}\})"
_BITS_LINE = re.compile(rf"\[({_BIT}) ({_BIT}) ({_BIT})\]")


def _expects_a_failure(check: str) -> bool:
    """A check of a bits line with a literal 0 bit, or of a "... bit 0" message."""
    m = _BITS_LINE.search(check)
    return bool(m and "0" in m.groups()) or " bit 0" in check


def test_expected_failure_detector():
    assert _expects_a_failure("// X: [0 {{[01]}} {{[01]}}]")
    assert _expects_a_failure("// X: [1 1 0]") and _expects_a_failure("// X: RMS bit 0")
    assert not _expects_a_failure("// CHECK: [1 1 1]")
    assert not _expects_a_failure("// CHECK: rand=[-rand {{([0-9]+|fixed|none)}}]")


def test_no_expected_failure_depends_on_the_data_stage():
    """A RUN line whose checks expect a failing bit must name its data: under
    random_seed=fixed (the fixed-data stage) %random_data becomes a short pattern of
    exactly representable values that may pass every bit (it did, for fp8 on an H100)."""
    offenders = []
    for path in sorted(E2E.rglob("*.mlir")):
        lines = path.read_text().splitlines()
        for run in (l for l in lines if l.startswith("// RUN:") and "%random_data" in l):
            prefix = (re.search(r"--check-prefix[= ](\S+)", run) or [None, "CHECK"])[1]
            expects = [l for l in lines if l.startswith(f"// {prefix}:") and _expects_a_failure(l)]
            if expects:
                offenders.append(f"{path.relative_to(REPO)}: {prefix}")
    assert offenders == []


def test_flakiness_reports_a_seed_dependent_failure(tmp_path):
    suite = make_suite(tmp_path / "suite", {
        "seed.mlir": "// RUN: echo %random_data | FileCheck %s\n// CHECK: -rand 1{{$}}\n"})
    cmd = [sys.executable, str(REPO / "scripts" / "flakiness"), "--runs", "3",
           "--json", str(tmp_path / "f.json")]
    if LIT.startswith(str(REPO / ".pydeps")):
        cmd += ["--lit", f"{sys.executable} {LIT}"]
    p = subprocess.run(cmd + ["--", str(suite)], capture_output=True, text=True, env=lit_env(),
                       timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "3 runs, 3 test runs, 2 failures" in p.stdout
    assert re.search(r"seed\.mlir: failed with seeds 2, 3", p.stdout), p.stdout
    kept = re.search(r"lit logs and %t files are in (\S+)/seedN", p.stdout).group(1)
    assert sorted(os.listdir(kept)) == ["seed2", "seed3"]          # the passing run's went
    assert "FAIL" in (Path(kept) / "seed2" / "lit.log").read_text()
    data = json.loads((tmp_path / "f.json").read_text())
    assert [r["failed"] != [] for r in data["runs"]] == [False, True, True]

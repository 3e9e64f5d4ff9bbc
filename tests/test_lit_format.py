"""The in-process lit format (convgen/lit_format.py): which RUN lines the lit workers run
themselves, that they give the shell's verdict on the whole PR set, the timeout, a clean
state per test, and the GPU each worker keeps to."""
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.append(str(REPO / ".pydeps"))   # lit, where a machine has it there only
lit = pytest.importorskip("lit")

from convgen import lit_format  # noqa: E402
from convgen.lit_format import ConvgenTest  # noqa: E402

from test_lit_selftest import _scripts_lit, make_suite  # noqa: E402

CONVGEN = "/opt/bin/convgen"
FILECHECK = "/usr/bin/python3 /repo/scripts/filecheck"


def _fake_test(environment=None):
    config = types.SimpleNamespace(pipefail=True, environment=dict(environment or {}))
    return types.SimpleNamespace(config=config, getFullName=lambda: "conv-e2e :: t.mlir")


LIT_CONFIG = types.SimpleNamespace(isWindows=False)


@pytest.mark.parametrize("line,expected", [
    (f"{CONVGEN} -p -x2 | {FILECHECK} /t.mlir", (False, ["-p", "-x2"], False, ["/t.mlir"])),
    (f"not {CONVGEN} --bogus 2>&1 | {FILECHECK} /t.mlir --check-prefix=ERR",
     (True, ["--bogus"], True, ["/t.mlir", "--check-prefix=ERR"])),
    (f"%dbg(RUN: at line 3) {CONVGEN} -p | {FILECHECK} /t.mlir", (False, ["-p"], False, ["/t.mlir"])),
    # anything else goes through lit's shell
    (f"{CONVGEN} -p > /tmp/out.txt", None),
    (f"{CONVGEN} -p 2>/dev/null | {FILECHECK} /t.mlir", None),
    (f"{CONVGEN} -p | {FILECHECK} /t.mlir > /tmp/x", None),
    (f"echo '[1 1 1]' | {FILECHECK} /t.mlir", None),
    (f"{CONVGEN} -p | grep bits | {FILECHECK} /t.mlir", None),
    (f"! {CONVGEN} -p | {FILECHECK} /t.mlir", None),
    (f"{CONVGEN} -p | not {FILECHECK} /t.mlir", None),
    (f"rm -rf /tmp/t && {CONVGEN} -p | {FILECHECK} /t.mlir", None),
    (f"/other/convgen -p | {FILECHECK} /t.mlir", None),
])
def test_which_lines_run_in_the_worker(line, expected):
    fmt = ConvgenTest(CONVGEN, FILECHECK)
    assert fmt._inprocess_line(line, LIT_CONFIG, _fake_test()) == expected


def test_a_test_that_changes_its_shells_state_runs_in_the_shell():
    fmt = ConvgenTest(CONVGEN, FILECHECK)
    assert fmt._stateful("cd /tmp", LIT_CONFIG, _fake_test())
    assert fmt._stateful("mkdir -p x && export A=1", LIT_CONFIG, _fake_test())
    assert not fmt._stateful(f"{CONVGEN} -p | {FILECHECK} /t.mlir", LIT_CONFIG, _fake_test())


def test_each_run_gets_the_tests_environment_and_leaves_the_workers_as_it_was(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKER_ONLY", "1")
    before = dict(os.environ)
    test = _fake_test({"TRITON_INTERPRET": "1", "TEST_ONLY": "yes"})
    with lit_format._clean_state(test, str(tmp_path)):
        assert os.environ.get("TEST_ONLY") == "yes" and "WORKER_ONLY" not in os.environ
        assert os.environ["LIT_CURRENT_TESTCASE"] == "conv-e2e :: t.mlir"
        assert os.getcwd() == str(tmp_path)
        os.environ["LEAKED"] = "1"              # what convgen's own set-up may write
    assert dict(os.environ) == before and os.getcwd() != str(tmp_path)


def test_each_run_gets_its_share_of_the_cores_and_gives_it_back(tmp_path):
    """OMP_NUM_THREADS of the test's environment (lit.cfg.py: cores / tests at once) is
    torch's thread count in the worker while the run lasts."""
    import torch
    before = torch.get_num_threads()
    share = 1 if before > 1 else 2
    with lit_format._clean_state(_fake_test({"OMP_NUM_THREADS": str(share)}), str(tmp_path)):
        assert torch.get_num_threads() == share
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("value", ["\u00b2", "99999999999999999999", "0", "abc", "4,2", ""])
def test_an_odd_thread_count_leaves_the_worker_as_it_was(tmp_path, value):
    """A value int() refuses, one too large for torch, or an OpenMP list: the run goes on
    and the worker's environment, directory and thread count come back."""
    import torch
    before_env, before_cwd, before = dict(os.environ), os.getcwd(), torch.get_num_threads()
    with lit_format._clean_state(_fake_test({"OMP_NUM_THREADS": value}), str(tmp_path)):
        assert os.getcwd() == str(tmp_path)
        if value == "4,2":
            assert torch.get_num_threads() == 4
    assert dict(os.environ) == before_env and os.getcwd() == before_cwd
    assert torch.get_num_threads() == before


def test_the_suite_gives_each_test_a_share_of_the_cores(tmp_path):
    """lit.cfg.py sets OMP_NUM_THREADS (cores / tests at once, at least 1) unless the user
    did; the user's value wins."""
    run = (f"// RUN: {sys.executable} -c \"import os; print('threads=' + os.environ['OMP_NUM_THREADS'])\""
           " | FileCheck %s\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    ours = make_suite(tmp_path / "ours", {"t.mlir": run + "// CHECK: threads={{[1-9][0-9]*$}}\n"})
    rc, out = _scripts_lit("-a", ours, env=env)
    assert rc == 0, out
    mine = make_suite(tmp_path / "mine", {"t.mlir": run + "// CHECK: threads=7{{$}}\n"})
    rc, out = _scripts_lit("-a", mine, env={**env, "OMP_NUM_THREADS": "7"})
    assert rc == 0, out
    rc, out = _scripts_lit("-a", mine, env=env)
    assert rc != 0, out     # and the check can fail


def test_each_worker_keeps_to_one_gpu(monkeypatch):
    fmt = ConvgenTest(CONVGEN, FILECHECK, gpu_env="CUDA_VISIBLE_DEVICES", gpus=("2", "5"))
    seen = []
    for worker in (1, 2, 3, 4):
        process = types.SimpleNamespace(_identity=(worker,))
        monkeypatch.setattr(lit_format.multiprocessing, "current_process", lambda p=process: p)
        test = _fake_test()
        fmt._pin_gpu(test)
        seen.append(test.config.environment["CUDA_VISIBLE_DEVICES"])
    assert seen == ["2", "5", "2", "5"]
    one = ConvgenTest(CONVGEN, FILECHECK, gpu_env="CUDA_VISIBLE_DEVICES", gpus=("0",))
    test = _fake_test()
    one._pin_gpu(test)
    assert "CUDA_VISIBLE_DEVICES" not in test.config.environment   # one GPU: left alone


def test_a_bug_in_convgen_is_its_traceback_and_status_1(monkeypatch):
    from convgen import cli

    def broken(argv):
        raise ZeroDivisionError("planted")
    monkeypatch.setattr(cli, "main", broken)
    status, out, err = lit_format._call_convgen(["-p"], merge=False)
    assert status == 1 and out == "" and "ZeroDivisionError: planted" in err


SMALL = ("// RUN: %convgen --operation conv2d -t f16 -batchsize=1 -in_channels=3 -out_channels=5 "
         "-in_h=5 -in_w=5 -fil_h=3 -fil_w=3 %pv %random_data %xdlops {extra}| FileCheck %s\n")


def test_verdicts_in_the_worker(tmp_path):
    """Passing, failing, `not` with a merged stderr, and a shell line between two worker
    lines: each gives the shell's verdict, and the log says where it ran."""
    suite = make_suite(tmp_path / "s", {
        "pass.mlir": SMALL.format(extra="") + "// CHECK: [1 1 1]\n",
        "fail.mlir": SMALL.format(extra="") + "// CHECK: [0 0 0]\n",
        "error.mlir": "// RUN: not %convgen -p --no_such_flag 2>&1 | FileCheck %s\n"
                      "// CHECK: convgen: error: {{.*}}no_such_flag\n",
        "not-fails.mlir": "// RUN: not %convgen -p -x2 2>&1 | FileCheck %s\n// CHECK: [1 1 1]\n",
        "mixed.mlir": SMALL.format(extra="--json %t.json ") + "// RUN: cat %t.json | FileCheck %s "
                      "--check-prefix=JSON\n" + SMALL.format(extra="-rand 3 ")
                      + "// CHECK: [1 1 1]\n// JSON: \"bits\"\n",
    })
    rc, out = _scripts_lit("-a", suite)
    assert rc == 1, out
    for name, verdict in (("pass", "PASS"), ("fail", "FAIL"), ("error", "PASS"),
                          ("not-fails", "FAIL"), ("mixed", "PASS")):
        assert f"{verdict}: conv-e2e :: {name}.mlir" in out, out
    assert "executed in the lit worker" in out and "executed command: cat" in out, out
    # a failure shows what failed: FileCheck's complaint, convgen's output, `not`'s status
    assert "# .---FileCheck stderr" in out and "# .---convgen stdout" in out, out
    assert "# error: FileCheck failed with exit status: 1" in out, out
    assert "# error: convgen (under not) exited with status 1" in out, out


def test_the_timeout_stops_a_run_and_the_worker_goes_on(tmp_path):
    """The worker's imports happen before the alarm (an import cut short broke the next test
    on the H100); after a timeout its later tests go through the shell, so the next one is
    a light line (`convgen --help` imports no torch) that passes within the same 10 s (2 s
    was too short for a fresh Python on a loaded 2-core machine). The slow line must be slow
    on a GPU machine too: its float64 CPU reference is 10 T multiply-adds (a 23.9M-output
    line passed within the 10 s on the H100's 16 cores)."""
    slow = ("// RUN: %convgen --operation conv2d -t f16 -batchsize=256 -in_channels=512 "
            "-out_channels=512 -in_h=56 -in_w=56 -fil_h=7 -fil_w=7 -padding_h=3 -padding_w=3 "
            "-pv -x2 | FileCheck %s\n// CHECK: [1 1 1]\n")
    after = "// RUN: %convgen --help | FileCheck %s\n// CHECK: usage: convgen\n"
    suite = make_suite(tmp_path / "s", {"a_slow.mlir": slow, "b_after.mlir": after})
    rc, out = _scripts_lit("-a", "-j1", "--param", "timeout=10", suite)
    assert "TIMEOUT: conv-e2e :: a_slow.mlir" in out, out
    assert "PASS: conv-e2e :: b_after.mlir" in out, out
    after_log = out[out.index("conv-e2e :: b_after.mlir"):]
    assert "executed command:" in after_log and "executed in the lit worker" not in after_log, out


def test_inprocess_0_runs_every_line_in_the_shell(tmp_path):
    suite = make_suite(tmp_path / "s", {"pass.mlir": SMALL.format(extra="") + "// CHECK: [1 1 1]\n"})
    rc, out = _scripts_lit("-a", "--param", "inprocess=0", suite)
    assert rc == 0 and "executed in the lit worker" not in out and "executed command:" in out, out


# The PR set's share of what the in-process format must get right, on small problems: a
# bits line, exit status 2 under `not` (refusals), an expected failure, lit's own lines
# beside convgen's, rocmlir-gen spellings, the GPU-validation reference, flush emulation in
# all three directions. Through the shell each convgen line is a fresh Python that imports
# torch: the whole PR set that way is most of an hour on 2 cores (the nightly case).
SHELL_SAMPLE = ("compat/rocmlir_gen_spellings.mlir", "selftest/substitutions.mlir",
                "selftest/wrong-check-fails.mlir", "selftest/right-check-passes.mlir",
                "regressions/s2d_refused.mlir", "regressions/flush_subnormals_channels_last_1x1.mlir",
                "bwd_data/f16_nchw_gpu_validation.mlir", "padding/f16_one_channel_one_pixel.mlir")


@pytest.mark.parametrize("sample", [
    pytest.param(SHELL_SAMPLE, id="sample"),
    pytest.param(None, id="pr_set", marks=pytest.mark.nightly)])
def test_the_worker_and_the_shell_give_the_same_results_on_the_pr_set(tmp_path, sample):
    """Every convgen run of the PR set (in the PR run of pytest, SHELL_SAMPLE's files): the
    same exit status, bits and metrics lines in the lit workers as through the shell, and
    every test the same verdict."""
    runs, verdicts = {}, {}
    # on a GPU the PR set has ~60 more GPU tests; one at a time (the default gpu_jobs=1)
    # through the shell is a quarter of an hour
    import torch
    spread = ["--param", "gpu_jobs=8", "-j", "8"] if torch.cuda.is_available() else []
    paths = [str(REPO / "e2e" / f) for f in sample] if sample else [str(REPO / "e2e")]
    for mode in ("inprocess", "shell"):
        record = tmp_path / f"{mode}.jsonl"
        report = tmp_path / f"{mode}.json"
        argv = [sys.executable, str(REPO / "scripts" / "suite-bits"), "record",
                *(["--shell"] if mode == "shell" else []), str(record),
                "-o", str(report), "--param", f"exec_root={tmp_path / mode}", *spread, *paths]
        subprocess.run(argv, capture_output=True, text=True, timeout=3000)
        verdicts[mode] = {t["name"]: t["code"] for t in json.loads(report.read_text())["tests"]}
        runs[mode] = record
    assert verdicts["inprocess"] == verdicts["shell"]
    if sample:
        assert len(verdicts["shell"]) == len(sample)
        assert sum(code == "PASS" for code in verdicts["shell"].values()) == len(sample) - 1
        assert list(verdicts["shell"].values()).count("XFAIL") == 1
    else:
        assert sum(code == "PASS" for code in verdicts["shell"].values()) >= 40
    compare = subprocess.run([sys.executable, str(REPO / "scripts" / "suite-bits"), "compare",
                              str(runs["shell"]), str(runs["inprocess"])],
                             capture_output=True, text=True, timeout=300)
    assert compare.returncode == 0, compare.stdout
    assert len(runs["inprocess"].read_text().splitlines()) >= (8 if sample else 50)


def test_a_folders_semantics_and_the_runs_comparator_reach_every_convgen_line(tmp_path):
    """lit.local.cfg's convgen_semantics = "rocmlir" gives lines left as rocMLIR wrote them
    rocmlir-gen's rules, through the workers and through the shell alike; --param
    comparator gives a default comparator that a line's own flag overrides."""
    suite = make_suite(tmp_path / "s", {"mine.mlir": SMALL.format(extra="") + "// CHECK: [1 1 1]\n"})
    (suite / "imported").mkdir()
    (suite / "imported" / "lit.local.cfg").write_text('config.convgen_semantics = "rocmlir"\n')
    (suite / "imported" / "line.mlir").write_text(
        SMALL.format(extra="-relDiff_threshold 0.00004 ") + "// CHECK: [1 1 1]\n")
    for mode in ("1", "0"):
        rc, out = _scripts_lit("-a", "--param", f"inprocess={mode}", suite)
        assert rc == 0, out
        imported = out[out.index("conv-e2e :: imported/line.mlir"):]
        imported = imported[:imported.index("********************", 20)] if "********************" in imported[20:] else imported
        assert "--semantics=rocmlir" in imported, out
        mine = out[out.index("conv-e2e :: mine.mlir"):]
        assert "--semantics=rocmlir" not in mine.split("conv-e2e ::")[1], out
    rc, out = _scripts_lit("-a", "--param", "comparator=allclose", suite)
    assert rc == 0 and out.count("--comparator=allclose") >= 2, out
    assert "rocMLIR allclose comparator" in out, out
    rc, out = _scripts_lit("--param", "comparator=nope", suite)
    assert rc != 0 and "comparator='nope'" in out

"""The lit suite itself: a wrong CHECK fails, substitutions and features expand.

Each test builds a throw-away suite in tmp_path whose lit.site.cfg.py points
test_source_root at tmp_path and loads the repository's lit.cfg.py, exactly as
the CMake build tree's site config does. No GPU needed; every lit run is < 10 s.
"""
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _tool(name):
    found = shutil.which(name)
    if found:
        return found
    local = REPO / ".pydeps" / "bin" / name
    return str(local) if local.exists() else None


LIT = _tool("lit")
HAVE_FILECHECK = bool(_tool("filecheck") or _tool("FileCheck"))
pytestmark = [
    pytest.mark.skipif(LIT is None, reason="lit is not installed (pip install lit)"),
    pytest.mark.skipif(not HAVE_FILECHECK, reason="filecheck is not installed (pip install filecheck)"),
]


def lit_env():
    env = dict(os.environ)
    # Skip the device probe (importing torch): these tests are about lit, not the GPU.
    env.setdefault("TRITON_INTERPRET", "1")
    pydeps = REPO / ".pydeps"
    if LIT and LIT.startswith(str(pydeps)):
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pydeps), env.get("PYTHONPATH")) if p)
    return env


def run_lit(*args, timeout=120):
    cmd = [LIT, "--no-progress-bar", *map(str, args)]
    if LIT.startswith(str(REPO / ".pydeps")):
        cmd = [sys.executable, *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=lit_env())
    return p.returncode, p.stdout + p.stderr


def make_suite(root: Path, files: dict) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "lit.site.cfg.py").write_text(textwrap.dedent(f"""\
        import os
        config.test_source_root = {str(root)!r}
        config.test_exec_root = {str(root)!r}
        lit_config.load_config(config, {str(REPO / 'lit.cfg.py')!r})
        """))
    for name, body in files.items():
        (root / name).write_text(textwrap.dedent(body))
    return root


ECHO_SUBST = """\
    // RUN: echo "rms=[%rms_threshold] abs=[%abs_threshold] rel=[%rel_threshold] pv=[%pv] rand=[%random_data] x=[%xdlops] arch=[%arch]" | FileCheck %s
    // CHECK: rms=
    """


def test_wrong_check_fails(tmp_path):
    suite = make_suite(tmp_path / "s", {"bad.mlir": """\
        // RUN: echo "[1 0 1]" | FileCheck %s
        // CHECK: [1 1 1]
        """})
    rc, out = run_lit("-v", suite)
    assert rc == 1, out
    assert "FAIL: conv-e2e :: bad.mlir" in out, out
    assert "Failed: 1" in out or "Failed Tests (1)" in out, out


def test_right_check_passes(tmp_path):
    suite = make_suite(tmp_path / "s", {"good.mlir": """\
        // RUN: echo "[1 1 1]" | FileCheck %s
        // CHECK: [1 1 1]
        """})
    rc, out = run_lit("-v", suite)
    assert rc == 0, out
    assert "PASS: conv-e2e :: good.mlir" in out, out


def test_one_failing_test_among_passing_ones_fails_the_run(tmp_path):
    suite = make_suite(tmp_path / "s", {
        "a.mlir": '// RUN: echo "[1 1 1]" | FileCheck %s\n// CHECK: [1 1 1]\n',
        "b.mlir": '// RUN: echo "[1 1 0]" | FileCheck %s\n// CHECK: [1 1 1]\n',
        "c.mlir": '// RUN: echo "[1 1 1]" | FileCheck %s\n// CHECK: [1 {{.*}} 1]\n',
    })
    rc, out = run_lit("-sv", suite)
    assert rc == 1, out
    assert re.search(r"Passed\s*:\s*2", out) and re.search(r"Failed\s*:\s*1", out), out


def test_default_substitutions(tmp_path):
    suite = make_suite(tmp_path / "s", {"subst.mlir": ECHO_SUBST})
    rc, out = run_lit("-a", suite / "subst.mlir")
    assert rc == 0, out
    assert "rms=[auto] abs=[auto] rel=[auto] pv=[-pv] rand=[-rand 1] x=[-x2] arch=[interpreter]" in out, out
    assert "%" not in re.search(r"^echo .*$", out, re.M).group(0)


def test_param_overrides(tmp_path):
    suite = make_suite(tmp_path / "s", {"subst.mlir": ECHO_SUBST})
    rc, out = run_lit("-a", "--param", "rms_threshold=0.000123", "--param", "abs_threshold=0.5",
                      "--param", "rel_threshold=1e-3", "--param", "validation=gpu",
                      "--param", "random_seed=fixed", "--param", "xdlops=0", suite / "subst.mlir")
    assert rc == 0, out
    assert ("rms=[0.000123] abs=[0.5] rel=[1e-3] pv=[-pv_with_gpu] rand=[-rand fixed] x=[-x2=0]"
            in out), out


def test_ignore_maxabsdiff_param(tmp_path):
    suite = make_suite(tmp_path / "s", {"subst.mlir": ECHO_SUBST})
    rc, out = run_lit("-a", "--param", "ignore_maxabsdiff=1", suite / "subst.mlir")
    assert rc == 0 and "abs=[1000]" in out, out


def test_site_config_values_and_param_precedence(tmp_path):
    """Values a site config sets (as CMake's does) apply; --param still wins."""
    suite = make_suite(tmp_path / "s", {"subst.mlir": ECHO_SUBST})
    site = suite / "lit.site.cfg.py"
    site.write_text('config.e2e_rms_threshold = "7e-7"\nconfig.e2e_random_seed = "42"\n'
                    + site.read_text())
    rc, out = run_lit("-a", suite / "subst.mlir")
    assert rc == 0 and "rms=[7e-7]" in out and "rand=[-rand 42]" in out, out
    rc, out = run_lit("-a", "--param", "rms_threshold=0.000123", suite / "subst.mlir")
    assert rc == 0 and "rms=[0.000123]" in out and "rand=[-rand 42]" in out, out


@pytest.mark.parametrize("param", ["rms_threshold=abc", "abs_threshold=-1", "validation=tpu",
                                   "random_seed=x", "xdlops=maybe", "timeout=-3"])
def test_bad_params_are_fatal(tmp_path, param):
    suite = make_suite(tmp_path / "s", {"subst.mlir": ECHO_SUBST})
    rc, out = run_lit("--param", param, suite)
    assert rc != 0, out
    assert "fatal" in out and param.split("=")[0] in out, out


def test_an_unknown_param_is_named(tmp_path):
    suite = make_suite(tmp_path / "s", {"subst.mlir": ECHO_SUBST})
    rc, out = run_lit("--param", "nigthly=1", suite)
    assert rc == 0, out
    assert "warning: unknown --param nigthly: the suite's are" in out and "nightly" in out, out


def test_an_exec_root_that_cannot_be_made_is_fatal(tmp_path):
    suite = make_suite(tmp_path / "s", {"subst.mlir": ECHO_SUBST})
    blocker = tmp_path / "file"
    blocker.write_text("")
    rc, out = run_lit("--param", f"exec_root={blocker / 'out'}", suite)
    assert rc != 0 and "fatal: exec_root=" in out and "cannot write there" in out, out


def test_features(tmp_path):
    suite = make_suite(tmp_path / "s", {
        "interp.mlir": "// REQUIRES: interpreter\n// RUN: echo ok | FileCheck %s\n// CHECK: ok\n",
        "gpu.mlir": "// REQUIRES: gpu\n// RUN: echo ok | FileCheck %s\n// CHECK: ok\n",
        "nightly.mlir": "// REQUIRES: nightly\n// RUN: echo ok | FileCheck %s\n// CHECK: ok\n",
    })
    rc, out = run_lit("-v", suite)
    assert rc == 0, out
    assert "PASS: conv-e2e :: interp.mlir" in out, out
    assert "UNSUPPORTED: conv-e2e :: gpu.mlir" in out, out
    assert "UNSUPPORTED: conv-e2e :: nightly.mlir" in out, out
    rc, out = run_lit("-v", "--param", "nightly=1", suite)
    assert rc == 0 and "PASS: conv-e2e :: nightly.mlir" in out, out


def test_environment_reaches_tests(tmp_path, monkeypatch):
    suite = make_suite(tmp_path / "s", {"env.mlir": """\
        // RUN: %{python} -c "import os; print('I=' + os.environ['TRITON_INTERPRET'], 'C=' + os.environ['TRITON_CACHE_DIR'], 'P=' + os.environ['PYTHONPATH'], 'V=' + os.environ.get('HIP_VISIBLE_DEVICES', '-'))" | FileCheck %s
        // CHECK: I=1 C={{.+}}triton-cache P={{.*}}tools{{.*}} V=3
        """.replace("%{python}", sys.executable)})
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "3")
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    rc, out = run_lit("-v", suite)
    assert rc == 0, out


def test_source_tree_selftests_pass():
    """`lit e2e/selftest` in the checkout, with no build: all pass, wrong-check-fails expectedly fails."""
    rc, out = run_lit("-sv", REPO / "e2e" / "selftest")
    assert rc == 0, out
    assert re.search(r"Passed\s*:\s*[1-9]", out) and re.search(r"Expectedly Failed\s*:\s*1", out), out


def test_no_env_builtin_in_pipelines():
    """lit 23.1.5 can drop FileCheck after the `env` builtin in a pipeline (DESIGN 7)."""
    offenders = []
    for path in (REPO / "e2e").rglob("*.mlir"):
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if re.search(r"RUN:.*(^|[\s|;&])env\s", line):
                offenders.append(f"{path.relative_to(REPO)}:{n}")
    assert not offenders, "env builtin in RUN lines: " + ", ".join(offenders)


def test_real_convgen_wrong_check_fails(tmp_path):
    """With convgen's real output in the pipe, an impossible CHECK fails and a right one passes."""
    run = ('// RUN: %convgen -p -t f32 -batchsize=1 -in_channels=1 -out_channels=1 -in_h=3 '
           '-in_w=3 -fil_h=1 -fil_w=1 %pv %random_data -RMS_threshold %rms_threshold | FileCheck %s\n')
    suite = make_suite(tmp_path / "s", {
        "wrong.mlir": run + "// CHECK: [9 9 9]\n",
        "right.mlir": run + "// CHECK: [{{[01]( [01])*}}]\n",
    })
    rc, out = _scripts_lit("-v", suite)
    assert rc == 1, out
    assert "FAIL: conv-e2e :: wrong.mlir" in out and "PASS: conv-e2e :: right.mlir" in out, out
    # a failure names the command that reruns just that test
    assert f"# rerun this test alone: scripts/lit -v {suite / 'wrong.mlir'}" in out, out


def test_a_failing_bit_shows_its_reasons_once(tmp_path):
    """convgen copies a failure's reasons to stderr for a shell; the worker's report of the
    failed test shows them once, under convgen's stdout."""
    run = ('// RUN: %convgen -t f32 -batchsize=1 -in_channels=64 -out_channels=16 -in_h=6 '
           '-in_w=6 -fil_h=3 -fil_w=3 -x2 %pv %random_data -RMS_threshold 1e-30 | FileCheck %s\n')
    suite = make_suite(tmp_path / "s", {"bit.mlir": run + "// CHECK: [1 1 1]\n"})
    rc, out = _scripts_lit("-v", suite)
    assert rc == 1 and "FAIL: conv-e2e :: bit.mlir" in out, out
    assert out.count("# convgen: reproduce with:") == 1, out
    assert "RMS bit 0" in out, out


def test_exec_root_keeps_concurrent_runs_apart(tmp_path):
    """Two lit runs of one tree at once, each with its own exec_root: neither deletes the
    other's %t (without it, a `rm -rf %t` test fails at random: seen on the H100)."""
    suite = make_suite(tmp_path / "s", {"t.mlir": """\
        // RUN: rm -rf %t && mkdir -p %t && echo %random_data > %t/seed
        // RUN: %python -c "import time; time.sleep(1)"
        // RUN: cat %t/seed | FileCheck %s
        // CHECK: -rand [[SEED:[0-9]+]]
        """})
    (suite / "lit.local.cfg").write_text(
        "import sys\nconfig.substitutions.append(('%python', sys.executable))\n")
    env = lit_env()
    lit = [sys.executable, LIT] if LIT.startswith(str(REPO / ".pydeps")) else [LIT]
    procs = [subprocess.Popen([*lit, "-v", "--param", f"random_seed={s}",
                               "--param", f"exec_root={tmp_path / f'x{s}'}", str(suite)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
             for s in (1, 2)]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(outs)
    for s in (1, 2):
        seed_files = list((tmp_path / f"x{s}").rglob("seed"))
        assert [f.read_text().strip() for f in seed_files] == [f"-rand {s}"], seed_files
    assert not (suite / "Output").exists()


def _scripts_lit(*args, timeout=300, env=None):
    """scripts/lit with the device lit finds: these tests run real convgen lines (on a GPU
    machine Triton 3.6's interpreter does not run with numpy 2.5)."""
    env = dict(os.environ if env is None else env)
    p = subprocess.run([sys.executable, str(REPO / "scripts" / "lit"), "--no-progress-bar",
                        *map(str, args)], capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout + p.stderr


SMALL_RUN = ("// RUN: %convgen --operation conv2d -t f16 -batchsize=1 -in_channels=3 -out_channels=5 "
             "-in_h=5 -in_w=5 -fil_h=3 -fil_w=3 %pv %random_data %xdlops {extra}| FileCheck %s\n")


def test_a_test_kept_outside_e2e_runs_with_the_suites_configuration(tmp_path):
    """lit finds no configuration above a file outside e2e/; scripts/lit gives it ours."""
    mine = tmp_path / "my_tests"   # lit does not quote %s: no spaces
    (mine / "sub").mkdir(parents=True)
    (mine / "good.mlir").write_text(SMALL_RUN.format(extra="") + "// CHECK: [1 1 1]\n")
    (mine / "sub" / "bad.mlir").write_text(SMALL_RUN.format(extra="") + "// CHECK: [0 0 0]\n")
    rc, out = _scripts_lit("-v", mine / "good.mlir")
    assert rc == 0 and "PASS: conv-e2e :: good.mlir" in out, out
    rc, out = _scripts_lit("-v", mine)
    assert rc == 1 and "PASS: conv-e2e :: good.mlir" in out and "FAIL: conv-e2e :: sub/bad.mlir" in out
    assert not any(p.name == "Output" for p in mine.rglob("*")), "Output/ written beside the tests"


def test_a_failing_test_shows_why_under_lit(tmp_path):
    """FileCheck says only "couldn't match": the reasons, histograms and the reproduce line
    reach lit through stderr."""
    suite = make_suite(tmp_path / "s", {
        "fails.mlir": SMALL_RUN.replace("-t f16", "-t f32").replace("-in_channels=3", "-in_channels=16")
        .format(extra="-RMS_threshold 0 ") + "// CHECK: [1 1 1]\n"})
    rc, out = _scripts_lit("-v", suite)
    assert rc == 1, out
    assert "RMS bit 0" in out and "epsilonDiff histogram" in out and "worst elements" in out, out
    assert "reproduce with: convgen --operation conv2d" in out, out


def test_scripts_lit_runs_the_source_tree_selftests():
    rc, out = _scripts_lit("-sv", REPO / "e2e" / "selftest")
    assert rc == 0 and re.search(r"Expectedly Failed\s*:\s*1", out), out


def test_filecheck_and_convgen_survive_lits_pythonpath_overwrite(tmp_path):
    """lit 23.1.5's out-of-process builtins (cat, diff) set PYTHONPATH to lit's own folder
    for every later command of the test. With no FileCheck on PATH the suite's FileCheck
    and convgen must not need PYTHONPATH (on the GPU machine they came from .pydeps/ and
    tools/ through it, and `cat x | FileCheck` failed)."""
    suite = make_suite(tmp_path / "s", {"t.mlir": """\
        // RUN: cat %s > %t.copy
        // RUN: cat %t.copy | FileCheck %s
        // RUN: %convgen --help | FileCheck %s --check-prefix=HELP
        // CHECK: RUN: cat
        // HELP: usage: convgen
        """})
    env = {k: v for k, v in os.environ.items() if k not in ("PATH", "PYTHONPATH")}
    env["PATH"] = "/usr/bin:/bin"
    env["TRITON_INTERPRET"] = "1"   # no device probe: this is about lit
    rc, out = _scripts_lit("-v", suite, env=env)
    assert rc == 0, out
    assert "scripts/filecheck" in out and "scripts/convgen" in out, out


def test_an_options_value_is_never_taken_for_a_test(tmp_path):
    sys.path.insert(0, str(REPO / ".pydeps"))   # lit, if only there
    from convgen.run_lit import _test_paths
    t = tmp_path / "a.mlir"
    t.write_text("")
    assert _test_paths(["-v", "--path", str(tmp_path), str(t)]) == [str(t)]
    assert _test_paths(["--param", "x=1", "--path=/usr", str(tmp_path)]) == [str(tmp_path)]


def test_random_seed_settings_are_what_convgen_takes():
    from convgen import cli
    with pytest.raises(ValueError, match="random_seed='5000000000'"):
        cli.lit_substitutions(random_seed="5000000000", validation="cpu", xdlops=True)
    assert ("%random_data", "-rand 4294967295") in cli.lit_substitutions(
        random_seed="4294967295", validation="cpu", xdlops=True)

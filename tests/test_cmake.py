"""CMake configures the lit suite: cache options reach %rms_threshold etc. in the build tree."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_lit_selftest import LIT, REPO

CMAKE = shutil.which("cmake")
pytestmark = pytest.mark.skipif(CMAKE is None, reason="cmake is not installed")


def configure(build: Path, *defs):
    p = subprocess.run([CMAKE, "-S", str(REPO), "-B", str(build), *defs],
                       capture_output=True, text=True, timeout=120)
    out = p.stdout + p.stderr
    if p.returncode and re.search(r"CMAKE_MAKE_PROGRAM|unable to find a build program", out):
        pytest.skip("cmake has no build tool (make/ninja) here")
    return p.returncode, out


def site_values(build: Path) -> dict:
    text = (build / "e2e" / "lit.site.cfg.py").read_text()
    return dict(re.findall(r'^config\.e2e_(\w+) = "(.*)"$', text, re.M))


def run_lit(*args):
    cmd = [LIT, "--no-progress-bar", *map(str, args)]
    env = dict(os.environ)
    env.setdefault("TRITON_INTERPRET", "1")   # skip the device probe
    if LIT.startswith(str(REPO / ".pydeps")):
        cmd = [sys.executable, *cmd]
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / ".pydeps"), env.get("PYTHONPATH")) if p)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    return p.returncode, p.stdout + p.stderr


def test_defaults(tmp_path):
    rc, out = configure(tmp_path / "build")
    assert rc == 0, out
    v = site_values(tmp_path / "build")
    assert v["rms_threshold"] == "auto" and v["abs_threshold"] == "auto" and v["rel_threshold"] == "auto"
    assert v["random_seed"] == "1" and v["xdlops"] == "1" and v["validation"] == "cpu"
    assert v["nightly"] == "0" and v["ignore_maxabsdiff"] == "0"
    assert v["inprocess"] == "1" and v["gpu_jobs"] == "8"
    assert not (REPO / "lit.site.cfg.py").exists(), "a generated site config beside lit.cfg.py hides it"


def test_options_reach_the_site_config(tmp_path):
    build = tmp_path / "build"
    rc, out = configure(build, "-DE2E_RMS_THRESHOLD=0.000123", "-DE2E_IGNORE_MAXABSDIFF=ON",
                        "-DE2E_REL_THRESHOLD=1e-3", "-DE2E_RANDOM_SEED=fixed",
                        "-DE2E_XDLOPS=OFF", "-DE2E_VALIDATION=gpu", "-DE2E_NIGHTLY=ON",
                        "-DE2E_INPROCESS=OFF")
    assert rc == 0, out
    v = site_values(build)
    assert v["rms_threshold"] == "0.000123"
    assert v["abs_threshold"] == "1000"          # E2E_IGNORE_MAXABSDIFF, as in the study
    assert v["rel_threshold"] == "1e-3" and v["random_seed"] == "fixed"
    assert v["xdlops"] == "0" and v["validation"] == "gpu" and v["nightly"] == "1"
    assert v["inprocess"] == "0"
    text = (build / "e2e" / "lit.site.cfg.py").read_text()
    assert str(REPO / "lit.cfg.py") in text or "lit.cfg.py" in text
    assert (build / "CTestTestfile.cmake").exists()
    assert re.search(r"add_test\(\S*e2e", (build / "CTestTestfile.cmake").read_text())


@pytest.mark.parametrize("bad", ["-DE2E_RMS_THRESHOLD=tiny", "-DE2E_VALIDATION=tpu",
                                 "-DE2E_RANDOM_SEED=-4", "-DE2E_ABS_THRESHOLD=-1"])
def test_bad_values_are_rejected(tmp_path, bad):
    rc, out = configure(tmp_path / "build", bad)
    assert rc != 0 and bad.split("=")[0][2:] in out, out


@pytest.mark.skipif(LIT is None, reason="lit is not installed")
def test_lit_in_the_build_tree_expands_cmake_values(tmp_path):
    build = tmp_path / "build"
    rc, out = configure(build, "-DE2E_RMS_THRESHOLD=0.000123", "-DE2E_IGNORE_MAXABSDIFF=ON")
    assert rc == 0, out
    test = build / "e2e" / "selftest" / "substitutions.mlir"   # maps to <src>/e2e/selftest/...
    rc, out = run_lit("-a", test)
    assert rc == 0, out
    assert "rms=[0.000123]" in out and "abs=[1000]" in out and "rel=[auto]" in out, out
    # --param still wins over the CMake value.
    rc, out = run_lit("-a", "--param", "rms_threshold=5e-5", test)
    assert rc == 0 and "rms=[5e-5]" in out, out
    # The whole suite is found from the build dir, tests named relative to e2e/.
    rc, out = run_lit("--show-tests", build / "e2e")
    assert rc == 0 and "conv-e2e :: selftest/substitutions.mlir" in out, out
    # lit writes only into the build tree.
    assert (build / "e2e" / "selftest" / "Output").is_dir()


@pytest.mark.skipif(LIT is None, reason="lit is not installed")
def test_check_target_runs_lit(tmp_path):
    build = tmp_path / "build"
    rc, out = configure(build, "-DE2E_LIT_ARGS=-sv --filter selftest")
    assert rc == 0, out
    env = dict(os.environ)
    env.setdefault("TRITON_INTERPRET", "1")
    p = subprocess.run([CMAKE, "--build", str(build), "--target", "check-e2e"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"Passed\s*:\s*[1-9]", p.stdout) and re.search(r"Expectedly Failed\s*:\s*1", p.stdout), p.stdout


def test_check_target_runs_no_lit_script(tmp_path):
    """check-e2e starts lit in the configured Python (scripts/lit), never through a `lit`
    script: a `pip install --target .pydeps lit` script names the Python of the machine
    that installed it (exit 127 on the GPU machine). With no lit script on PATH at all,
    the target still runs."""
    build = tmp_path / "build"
    rc, out = configure(build, "-DE2E_LIT_ARGS=-sv --filter selftest", f"-DE2E_PYTHON={sys.executable}")
    assert rc == 0, out
    env = {k: v for k, v in os.environ.items() if k != "PATH"}
    env["PATH"] = os.pathsep.join(p for p in ("/usr/bin", "/bin", os.path.dirname(CMAKE)) if p)
    env.setdefault("TRITON_INTERPRET", "1")
    assert shutil.which("lit", path=env["PATH"]) is None or "pyenv" not in shutil.which("lit", path=env["PATH"])
    p = subprocess.run([CMAKE, "--build", str(build), "--target", "check-e2e"],
                       capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"Expectedly Failed\s*:\s*1", p.stdout), p.stdout

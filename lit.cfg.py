# -*- Python -*-
"""lit configuration of the conv-e2e suite.

Two ways in, one file:

* Source tree, no build: `lit e2e/` walks up from e2e/ and finds this file.
  Every setting takes its documented default.
* CMake build tree: `lit build/e2e` finds build/e2e/lit.site.cfg.py (configured
  from lit.site.cfg.py.in). That file sets `config.e2e_*` values from the CMake
  cache, points test_source_root at <src>/e2e and test_exec_root at build/e2e,
  and then loads this file.

Every setting can also be given on the lit command line, `--param NAME=VALUE`,
which wins over both CMake and the defaults:

  rms_threshold, abs_threshold, rel_threshold   auto | a number >= 0
  ignore_maxabsdiff  1 -> abs threshold 1000 (unless abs_threshold is given)
  random_seed        N (>0 a seed, 0 time-based) | fixed | none   (%random_data)
  validation         cpu | gpu                                    (%pv)
  xdlops             1 | 0                                        (%xdlops)
  nightly            1 | 0                                        (feature nightly)
  timeout            seconds per test, 0 = none (needs psutil)
  gpu_jobs           how many tests may use each GPU at once (default 8)
  inprocess          1: `%convgen | FileCheck` lines run inside the lit workers
                     (convgen.lit_format); 0: every line through lit's shell
  record_runs        a file each in-process convgen run appends a JSON line to
                     (scripts/suite-bits record)
  comparator         convgen | legacy | allclose: the comparator every convgen line gets
                     unless it names one (default: each semantics' own; %comparator)
  interpreter        1: run Triton's interpreter even if a GPU is present
  convgen            the command %convgen expands to
  filecheck          the FileCheck executable
  python             the Python that runs `-m convgen` and the device probe
  exec_root          where the Output/ folders (each test's %t) go; give each lit
                     run of its own one when several run at once on one tree
                     (scripts/flakiness does): they would delete each other's %t
  list_runs          a file: each convgen run a test would make is written to it as
                     a JSON line, and nothing runs (`convgen audit` reads it)
  features_of        an arch (gfx942, sm90, ...): the tests and RUN lines that device
                     would run, its lit features taken instead of the probed device's
                     (with list_runs; nothing can run on a device that is not here)
  impl               the implementation every convgen run tests (its -impl default,
                     CONVGEN_IMPL in the tests' environment): convgen | aten | inductor |
                     MODULE:FUNCTION | FILE.py:FUNCTION (docs/implementations.md); also the
                     environment's E2E_IMPL. Feature impl-convgen, impl-aten, impl-inductor
                     or impl-user; a run the implementation does not compute is UNSUPPORTED

Facts come from the tool, never from a copy here: the device and its features from
`python -m convgen.backend`, the threshold syntax from convgen.tolerance, the flag
text of %random_data, %pv, %xdlops and %away_from_zero from convgen.cli.

A generated lit.site.cfg.py must never sit beside this file: lit prefers it and
this file would be ignored (.gitignore lists /lit.site.cfg.py).
"""
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import lit.formats
import lit.util

SRC_ROOT = os.path.dirname(os.path.abspath(__file__))
E2E_DIR = os.path.join(SRC_ROOT, "e2e")
# tests another implementation is known to fail, with the features where it does (lit_format)
EXPECTED_FAILURES = os.path.join(E2E_DIR, "expected-failures.tsv")
sys.path.insert(0, os.path.join(SRC_ROOT, "tools"))
from convgen import cli, tolerance  # noqa: E402  (neither imports torch)
from convgen.backend import INTERPRETER, Backend  # noqa: E402
from convgen.backend import of_arch as backend_of_arch  # noqa: E402
from convgen.implementations import BUILT_IN as BUILT_IN_IMPLS  # noqa: E402  (no torch)
from convgen.lit_format import ConvgenTest, read_expected_failures  # noqa: E402  (imports lit, not torch)
from convgen.run_lit import fixed_order_problem  # noqa: E402

DEFAULTS = {
    "rms_threshold": "auto",
    "abs_threshold": "auto",
    "rel_threshold": "auto",
    "ignore_maxabsdiff": "0",
    "random_seed": "1",
    "validation": "cpu",
    "xdlops": "1",
    "nightly": "0",
    "timeout": "600",
    "gpu_jobs": "8",
    "inprocess": "1",
    "record_runs": "",
    "comparator": "",
    "interpreter": "0",
    "convgen": "",
    "filecheck": "",
    "python": "",
    "exec_root": "",
    "list_runs": "",
    "features_of": "",
    "impl": "",
}
IGNORED_ABS_THRESHOLD = "1000"   # E2E_IGNORE_MAXABSDIFF, as in the study's example

# a --param the suite does not know changes nothing: say so (nigthly=1 would otherwise run
# the PR set and look like a nightly run)
for _name in sorted(set(lit_config.params) - set(DEFAULTS)):
    lit_config.warning("unknown --param %s: the suite's are %s" % (_name, ", ".join(sorted(DEFAULTS))))
# shards dealt in an order this host's history decides would differ from host to host
_why = fixed_order_problem(sys.argv[1:], lit_config.order)
if _why:
    lit_config.fatal(_why)


def setting(name):
    """--param NAME=... > config.e2e_NAME (set by the CMake site config) > default."""
    value = lit_config.params.get(name)
    if value is None:
        value = getattr(config, "e2e_" + name, None)
    if value is None or str(value).strip() == "":
        value = DEFAULTS[name]
    return str(value).strip()


def flag(name):
    value = setting(name)
    try:
        return lit.util.pythonize_bool(value)
    except ValueError:
        lit_config.fatal("%s=%r is not a boolean (use 1/0, ON/OFF, true/false)" % (name, value))


def threshold(name):
    value = setting(name)
    try:
        tolerance.parse_limit(value)
    except ValueError as e:
        lit_config.fatal("%s=%r: %s" % (name, value, e))
    return value


# --- the suite -------------------------------------------------------------
config.name = "conv-e2e"
config.suffixes = [".mlir"]   # the format (convgen.lit_format) is set once FileCheck is known

if config.test_source_root is None:
    # Loaded straight from the source tree: the suite is rooted here, so
    # `lit e2e/`, `lit e2e/foo.mlir` and `lit .` all work.
    config.test_source_root = SRC_ROOT
    config.test_exec_root = SRC_ROOT
    excludes = {"build", "tests", "tools", "docs", "scripts", "shared", "benchmarks", "Output"}
    # Any in-tree CMake build dir holds its own suite config: do not run it twice.
    for entry in os.listdir(SRC_ROOT):
        if os.path.exists(os.path.join(SRC_ROOT, entry, "CMakeCache.txt")):
            excludes.add(entry)
    config.excludes = sorted(excludes)
    output_dir = os.path.join(E2E_DIR, "Output")
else:
    if config.test_exec_root is None:
        config.test_exec_root = config.test_source_root
    output_dir = os.path.join(config.test_exec_root, "Output")
# The kernel cache stays where it was: it is safe to share, and a fresh one costs compiles.
cache_dir = getattr(config, "e2e_cache_dir", None) or os.path.join(output_dir, "triton-cache")
if setting("exec_root"):
    config.test_exec_root = os.path.abspath(setting("exec_root"))
    # every test's Output/ folder goes below it: one that cannot be made would leave every
    # test UNRESOLVED with the reason shown only under -v
    try:
        os.makedirs(config.test_exec_root, exist_ok=True)
        tempfile.TemporaryFile(dir=config.test_exec_root).close()
    except OSError as e:
        lit_config.fatal("exec_root=%r: cannot write there: %s" % (setting("exec_root"), e.strerror or e))

# --- environment -----------------------------------------------------------
# lit hands tests only a few variables (PATH, HOME, TMPDIR, ...): pass on what
# Python, Triton and the GPU runtimes need.
PASS_VARS = ("PATH", "HOME", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
             "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
             "GPU_DEVICE_ORDINAL", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "OPENBLAS_NUM_THREADS", "XDG_CACHE_HOME", "USER", "LANG", "LC_ALL")
PASS_PREFIXES = ("TRITON_", "HSA_", "HIP_", "ROCM_", "AMD_", "CUDA_", "NVIDIA_", "TORCH_",
                 "CONVGEN_")
for var, val in os.environ.items():
    if var in PASS_VARS or var.startswith(PASS_PREFIXES):
        if var == "PATH":
            continue  # lit already built PATH (its --path entries first)
        config.environment[var] = val
env_path = config.environment.get("PATH", os.environ.get("PATH", ""))


def prepend_pythonpath(entry, append=False):
    parts = [p for p in config.environment.get("PYTHONPATH", "").split(os.pathsep) if p]
    if entry in parts:
        return
    parts = parts + [entry] if append else [entry] + parts
    config.environment["PYTHONPATH"] = os.pathsep.join(parts)


# The source tree's convgen always wins, even over an installed copy elsewhere.
prepend_pythonpath(os.path.join(SRC_ROOT, "tools"))
PYDEPS = os.path.join(SRC_ROOT, ".pydeps")   # `pip install --target .pydeps lit filecheck`

# --- Python, convgen --------------------------------------------------------
# The installed `convgen` (its Python also runs the device probe), else scripts/convgen in
# the chosen Python: that needs no PYTHONPATH, which lit's cat/diff builtins overwrite.
python = setting("python") or sys.executable
convgen = setting("convgen")
if not convgen:
    installed = shutil.which("convgen", path=env_path)
    if installed:
        convgen = shlex.quote(installed)
    else:
        convgen = "%s %s" % (shlex.quote(python),
                             shlex.quote(os.path.join(SRC_ROOT, "scripts", "convgen")))
    if installed and not setting("python"):
        # The probe below should see the Python that runs convgen.
        try:
            with open(installed, "rb") as f:
                first = f.readline().decode("utf-8", "replace").strip()
            if first.startswith("#!") and "python" in first:
                candidate = first[2:].strip().split()[0]
                if os.path.isfile(candidate):
                    python = candidate
        except OSError:
            pass

# --- FileCheck --------------------------------------------------------------
# An explicit one, else one on PATH (LLVM's, or pip's `filecheck`), else scripts/filecheck
# in this Python, which finds the filecheck package here or in .pydeps/. Not `python -m
# filecheck` with .pydeps on PYTHONPATH: lit 23.1.5's out-of-process builtins (cat, diff)
# overwrite a test's PYTHONPATH for every command after them.
# The filecheck package's FileCheck (pip's lowercase `filecheck`, or scripts/filecheck)
# also runs inside the lit workers when they run convgen there (convgen.lit_format).
import importlib.util  # noqa: E402
if importlib.util.find_spec("filecheck") is None and os.path.isdir(os.path.join(PYDEPS, "filecheck")):
    sys.path.append(PYDEPS)   # the workers are forked from this process: they see it too
filecheck = setting("filecheck") or shutil.which("filecheck", path=env_path) \
    or shutil.which("FileCheck", path=env_path)
if filecheck:
    if not (os.access(filecheck, os.X_OK) or shutil.which(filecheck, path=env_path)):
        lit_config.fatal("filecheck=%r is not an executable" % filecheck)
    filecheck_cmd = shlex.quote(filecheck)
    filecheck_inprocess = (not setting("filecheck") and os.path.basename(filecheck) == "filecheck"
                           and importlib.util.find_spec("filecheck") is not None)
else:
    filecheck_inprocess = True
    if importlib.util.find_spec("filecheck") is None and \
            not os.path.isdir(os.path.join(PYDEPS, "filecheck")):
        lit_config.fatal(
            "FileCheck not found (looked for 'filecheck' and 'FileCheck' on PATH, the filecheck "
            "module of %s, and %s). Install it with `python3 -m pip install filecheck`, or pass "
            "--param filecheck=/path/to/FileCheck (CMake: -DFILECHECK_EXECUTABLE=...)."
            % (sys.executable, PYDEPS))
    filecheck_cmd = "%s %s" % (shlex.quote(sys.executable),
                               shlex.quote(os.path.join(SRC_ROOT, "scripts", "filecheck")))

# --- device -----------------------------------------------------------------
def probe_device():
    """(Backend, GPU ids, note): the device convgen will run on, asked of convgen itself in
    a fresh process (importing torch here would slow every lit start and could hang)."""
    if flag("interpreter") or os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return INTERPRETER, [], ""
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    env["PYTHONPATH"] = config.environment.get("PYTHONPATH", "")
    try:
        out = subprocess.run([python, "-m", "convgen.backend"], env=env, capture_output=True,
                             text=True, timeout=300)
        info = json.loads(out.stdout.strip().splitlines()[-1])
        return (Backend(info["kind"], info["arch"], int(info["warp_size"])),
                [str(g) for g in info.get("gpus", [])], info.get("note", ""))
    except Exception as e:  # no torch, a hung driver, ...
        return INTERPRETER, [], "device probe failed: %s" % e


if setting("features_of"):
    if not setting("list_runs"):
        lit_config.fatal("features_of=%s: only with list_runs (the tests cannot run on a "
                         "device that is not here)" % setting("features_of"))
    try:
        device, gpus, note = backend_of_arch(setting("features_of")), [], ""
    except ValueError as e:
        lit_config.fatal("features_of: %s" % e)
else:
    device, gpus, note = probe_device()
if note:
    lit_config.note("device probe: %s" % note)
arch = device.arch
features = config.available_features
for feature in device.lit_features():
    features.add(feature)
if device.interpreter:
    config.environment["TRITON_INTERPRET"] = "1"
else:
    # Many lit workers: only gpu_jobs tests per GPU hold the GPUs at a time (each worker
    # keeps to one GPU, convgen.lit_format).
    try:
        gpu_jobs = int(setting("gpu_jobs"))
        assert gpu_jobs >= 1
    except (ValueError, AssertionError):
        lit_config.fatal("gpu_jobs=%r: expected an integer >= 1" % setting("gpu_jobs"))
    lit_config.parallelism_groups["gpu"] = gpu_jobs * max(1, len(gpus))
    config.parallelism_group = "gpu"

# Each test's share of the CPU cores for its float64 reference and input draws: torch's
# default (every core in every test) oversubscribed a 16-core GPU machine 12 times over and
# slowed the large imported lines tenfold. At most gpu_jobs tests per GPU run at once on a
# GPU, lit's default of one per core in the interpreter. OMP_NUM_THREADS set by the user wins.
if "OMP_NUM_THREADS" not in config.environment:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    at_once = cores if device.interpreter else gpu_jobs * max(1, len(gpus))
    config.environment["OMP_NUM_THREADS"] = str(max(1, cores // at_once))
if flag("nightly"):
    features.add("nightly")
inprocess = flag("inprocess")
comparator = setting("comparator").lower()
if comparator and comparator not in tolerance.COMPARATORS:
    lit_config.fatal("comparator=%r: expected one of %s" % (comparator, ", ".join(tolerance.COMPARATORS)))
try:
    expected_failures = read_expected_failures(EXPECTED_FAILURES)
except ValueError as e:
    lit_config.fatal(str(e))
config.test_format = ConvgenTest(convgen, filecheck_cmd, inprocess=inprocess,
                                 filecheck_inprocess=filecheck_inprocess,
                                 gpu_env=device.visible_devices_variable, gpus=gpus,
                                 record=os.path.abspath(setting("record_runs")) if setting("record_runs") else None,
                                 comparator=comparator,
                                 expected_failures=expected_failures,
                                 list_runs=os.path.abspath(setting("list_runs")) if setting("list_runs") else None)
lit_config.note("conv-e2e: device %s (%s%s), FileCheck %s, convgen %s%s"
                % (arch, device.kind, ", %d GPUs" % len(gpus) if len(gpus) > 1 else "",
                   filecheck_cmd, convgen, " in the lit workers" if inprocess else ""))

# Share compiled kernels between tests (Triton's cache is safe across processes).
if "TRITON_CACHE_DIR" not in config.environment:
    config.environment["TRITON_CACHE_DIR"] = cache_dir

# --- the implementation under test -------------------------------------------
impl = setting("impl") or os.environ.get("E2E_IMPL", "").strip() or "convgen"
_file, _sep, _function = impl.rpartition(":")
if _file.endswith(".py"):   # the runs happen in each test's folder: the file from where lit started
    impl = os.path.abspath(_file) + ":" + _function
config.environment["CONVGEN_IMPL"] = impl
features.add("impl-" + (impl if impl in BUILT_IN_IMPLS else "user"))
if impl != "convgen":
    lit_config.note("conv-e2e: implementation under test: %s" % impl)
    if device.interpreter and impl in ("aten", "inductor"):
        # whether ATen's CPU convolution backward sums f16 / bf16 in the type here (it
        # depends on the CPU: e2e/expected-failures.tsv)
        from convgen.implementations import aten_cpu_sums_in_type  # noqa: E402
        for _t in ("f16", "bf16"):
            if aten_cpu_sums_in_type(_t):
                features.add("aten-cpu-%s-sums-in-type" % _t)
# torch's version, for the expected failures of the libraries it calls (read without
# importing torch)
try:
    import importlib.metadata  # noqa: E402
    features.add("torch-%s" % ".".join(importlib.metadata.version("torch").split(".")[:2]))
except Exception:   # noqa: BLE001 - no torch here: the runs say so themselves
    pass

# --- per-test timeout ---------------------------------------------------------
try:
    timeout = int(setting("timeout"))
    assert timeout >= 0
except (ValueError, AssertionError):
    lit_config.fatal("timeout=%r: expected an integer >= 0 (seconds)" % setting("timeout"))
try:
    import psutil  # noqa: F401  lit needs it to kill a test's process tree
    have_psutil = True
except ImportError:
    have_psutil = False
if lit_config.maxIndividualTestTime is None:  # --timeout on the command line wins
    if have_psutil:
        config.maxIndividualTestTime = timeout
    elif timeout and "timeout" in lit_config.params:
        lit_config.warning("--param timeout=%d ignored: per-test timeouts need psutil" % timeout)

# --- substitutions ------------------------------------------------------------
try:
    flag_text = cli.lit_substitutions(random_seed=setting("random_seed"),
                                      validation=setting("validation"), xdlops=flag("xdlops"),
                                      comparator=comparator)
except ValueError as e:
    lit_config.fatal(str(e))

rms_threshold = threshold("rms_threshold")
rel_threshold = threshold("rel_threshold")
if "abs_threshold" not in lit_config.params and flag("ignore_maxabsdiff"):
    abs_threshold = IGNORED_ABS_THRESHOLD
else:
    abs_threshold = threshold("abs_threshold")

# Longer names first, so no key is a prefix of one applied before it.
config.substitutions.extend([("%convgen", convgen)] + flag_text + [
    ("%rms_threshold", rms_threshold),
    ("%abs_threshold", abs_threshold),
    ("%rel_threshold", rel_threshold),
    ("%arch", arch),
    # rocMLIR's e2e lines end in %rocmlir_gen_flags (its CMake's extra rocmlir-gen flags)
    ("%rocmlir_gen_flags", ""),
    # `FileCheck` as a word, not inside a path or a longer name.
    (r"(?<![\w./-])FileCheck(?![\w./-])", filecheck_cmd),
])

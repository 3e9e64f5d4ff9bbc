"""The suite's lit test format: `%convgen ... | FileCheck ...` RUN lines run inside the
lit worker process.

A RUN line through lit's shell starts a new Python that imports torch and Triton: 1.3-4 s
before convgen does anything, against a fraction of a second of work for a small test
(docs/suite-speed.md). Here each lit worker imports convgen once, and every RUN line of
the form

    [not] CONVGEN ARGS [2>&1] | FILECHECK ARGS

calls `convgen.cli.main(ARGS)` in the worker with its output captured, then FileCheck on
that text (the filecheck package in-process; any other FileCheck as a program). The
verdict is what the shell gives: same exit codes, same `not`, same stderr merge. Every
other RUN line, and every test that changes its shell's state (`cd`, `export`) or asks
for retries, goes through lit's own shell as ShTest runs it.

A test folder's `lit.local.cfg` may set `config.convgen_semantics = "rocmlir"`: every
convgen line there then runs with `--semantics=rocmlir` (rocmlir-gen's data and
comparator), so lines imported from rocMLIR stay as they were written; `--param
comparator=` gives every line a default comparator the same way.

Each in-process run starts clean: the test's environment (lit's config.environment, as
a subprocess would get it) replaces os.environ and is put back afterwards, the working
directory is the test's, torch's global seed is reset, and CUDA's cached memory is
returned. The per-test timeout is an alarm in the worker: it stops a run at its next
Python step (a call hung inside a driver is stopped by lit's --max-time only).

Several GPUs: worker i runs on GPU i mod n (CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES
narrowed to one of the visible ones), shell lines included, so the gpu parallelism group
may hold gpu_jobs tests per GPU.

With `record` (lit --param record_runs=FILE), each in-process run appends one JSON line
to FILE (run_record: its arguments, exit status, bits and metrics lines), as
scripts/suite-bits records shell runs, so two trees or the two paths can be compared.

    ConvgenTest(convgen, filecheck, inprocess, filecheck_inprocess, gpu_env, gpus, record)
    run_record(argv, status, stdout, stderr)    one record of a convgen run
"""
from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import re
import shlex
import sys
import time

import lit.formats
import lit.Test
import lit.TestRunner as runner
from lit.ShUtil import Pipeline, Seq, ShParser

from convgen import REPO_ROOT, in_process
from convgen.cli import setting_words
from convgen.implementations import EXIT_UNSUPPORTED, UNSUPPORTED_LINE
from convgen.report import BITS_LINE

_MERGE = ((">&", 2), "1")          # 2>&1 as lit's parser gives it
_STATEFUL = ("cd", "export", "unset", "set")
_METRIC = re.compile(r"\b(RMS|maxAbsDiff|maxRelDiff)=([-+0-9.eE]+|inf|nan)")




class ConvgenTest(lit.formats.ShTest):
    """ShTest, with `%convgen | FileCheck` lines run in the worker (see the module's text).

    Args:
        convgen: the command %convgen expands to (a shell word list).
        filecheck: the command FileCheck expands to.
        inprocess: False runs every line through lit's shell (lit -D inprocess=0).
        filecheck_inprocess: the FileCheck command is the filecheck package's, which then
            runs in the worker too.
        gpu_env: CUDA_VISIBLE_DEVICES or HIP_VISIBLE_DEVICES; None without a GPU.
        gpus: the GPUs the workers are spread over (their ids as that variable names them).
        record: a file each in-process convgen run appends its run_record to.
        comparator: the comparator every convgen line gets unless it names one ("": each
            semantics' own).
        list_runs: a file each test's convgen runs are written to (list_runs_record), in
            place of running anything (`convgen audit`: what a device would launch).
    """

    def __init__(self, convgen: str, filecheck: str, inprocess: bool = True,
                 filecheck_inprocess: bool = False, gpu_env: str | None = None,
                 gpus: tuple[str, ...] = (), record: str | None = None, comparator: str = "",
                 list_runs: str | None = None, expected_failures: dict | None = None):
        super().__init__(execute_external=False)
        self.convgen_text = convgen
        self.comparator = comparator
        self.convgen = shlex.split(convgen)
        self.filecheck = shlex.split(filecheck)
        self.inprocess = inprocess
        self.filecheck_inprocess = filecheck_inprocess
        self.gpu_env = gpu_env
        self.gpus = tuple(gpus)
        self.record = record
        self.list_runs = list_runs
        self.expected_failures = expected_failures or {}

    # ---- lit's entry point ------------------------------------------------------------

    def execute(self, test, litConfig):
        self._pin_gpu(test)
        if test.config.unsupported:
            return lit.Test.Result(lit.Test.UNSUPPORTED, "Test is unsupported")
        script = runner.parseIntegratedTestScript(test)
        if isinstance(script, lit.Test.Result):
            return script
        # an implementation's known failures: lit turns FAIL into XFAIL where one holds
        test.xfails = list(test.xfails) + self.expected_failures.get(_below_e2e(test), [])
        if litConfig.noExecute:
            return lit.Test.Result(lit.Test.PASS)
        tmp_dir, tmp_base = runner.getTempPaths(test)
        substitutions = list(self.extra_substitutions) + runner.getDefaultSubstitutions(
            test, tmp_dir, tmp_base,
            normalize_slashes=litConfig.params.get("use_normalized_slashes", False))
        conditions = {feature: True for feature in test.config.available_features}
        script = runner.applySubstitutions(script, substitutions, conditions,
                                           recursion_limit=test.config.recursiveExpansionLimit)
        script = [self._with_settings(line, test.config) for line in script]
        plan = [(line, self._inprocess_line(line, litConfig, test)) for line in script]
        if self.list_runs:
            for line, parts in plan:
                if parts is not None or self.convgen_text in line:
                    _append(self.list_runs, list_runs_record(test.getFullName(), line, parts))
            return lit.Test.Result(lit.Test.PASS)
        if (not self.inprocess or test.allowed_retries or _TAINTED
                or not any(parts for _, parts in plan)
                or any(self._stateful(line, litConfig, test) for line, _ in plan)):
            return _unsupported_run(runner._runShTest(test, litConfig, False, script, tmp_base))
        os.makedirs(os.path.dirname(tmp_base), exist_ok=True)
        return self._run(test, litConfig, tmp_base, plan)

    def _with_settings(self, line: str, config) -> str:
        """The line with the settings its folder and the run give every convgen command:
        `config.convgen_semantics` (a lit.local.cfg's, for imported lines left unchanged)
        and the default comparator (--param comparator, E2E_COMPARATOR). They go first, so
        the line's own flags win."""
        extra = setting_words(getattr(config, "convgen_semantics", None), self.comparator)
        if not extra:
            return line
        head = self.convgen_text + " "
        return line.replace(head, head + " ".join(extra) + " ")

    # ---- which lines run here ---------------------------------------------------------

    @staticmethod
    def _command(line: str) -> tuple[str, str]:
        match = re.fullmatch(runner.kPdbgRegex, line)
        return (match.group(1), match.group(2)) if match else ("command line", line)

    def _parse(self, line, litConfig, test):
        try:
            return ShParser(self._command(line)[1], litConfig.isWindows, test.config.pipefail).parse()
        except Exception:   # lit reports a line it cannot parse itself
            return None

    def _stateful(self, line, litConfig, test) -> bool:
        """A line whose effect the next lines would see through the shell (cd, export)."""
        def commands(node):
            if isinstance(node, Pipeline):
                yield from node.commands
            elif isinstance(node, Seq):
                yield from commands(node.lhs)
                yield from commands(node.rhs)
        tree = self._parse(line, litConfig, test)
        return any(c.args[:1] and c.args[0] in _STATEFUL for c in commands(tree))

    def _inprocess_line(self, line, litConfig, test):
        """(negate, convgen args, merge stderr, FileCheck args) for a line this format runs
        itself; None for any other line."""
        tree = self._parse(line, litConfig, test)
        if not isinstance(tree, Pipeline) or tree.negate or len(tree.commands) != 2:
            return None
        first, second = tree.commands
        args = list(first.args)
        negate = False
        if args[:1] == ["not"]:
            negate, args = True, args[1:]
        n, f = len(self.convgen), len(self.filecheck)
        if args[:n] != self.convgen or list(second.args[:f]) != self.filecheck:
            return None
        if second.redirects or any(r != _MERGE for r in first.redirects) or "not" in args[:1]:
            return None
        return negate, args[n:], bool(first.redirects), list(second.args[f:])

    # ---- running ------------------------------------------------------------------------

    def _run(self, test, litConfig, tmp_base, plan):
        execdir = os.path.dirname(test.getExecPath())
        timeout = test.config.maxIndividualTestTime or 0
        deadline = time.monotonic() + timeout if timeout else None
        log, metrics, code, timed_out = [], {}, 0, None
        shell_lines: list[str] = []

        def flush_shell() -> int:
            if not shell_lines:
                return 0
            out, err, status, timeout_info, _ = runner.executeScriptInternal(
                test, litConfig, tmp_base, list(shell_lines), execdir)
            log.append(out + (f"# shell stderr:\n{err}" if err else ""))
            shell_lines.clear()
            nonlocal timed_out
            timed_out = timed_out or timeout_info
            return status

        try:
            for number, (line, parts) in enumerate(plan, 1):
                if parts is None:
                    shell_lines.append(line)
                    continue
                code = flush_shell()
                if code:
                    break
                dbg, command = self._command(line)
                log.append(f"# {dbg}\n# executed in the lit worker: {command.strip()}\n")
                left = None if deadline is None else max(0.001, deadline - time.monotonic())
                code, text = self._inprocess(test, parts, execdir, left)
                log.append(text)
                if code == EXIT_UNSUPPORTED:   # the implementation does not compute it
                    return lit.Test.Result(lit.Test.UNSUPPORTED, "".join(log))
                for name, value in _METRIC.findall(text):
                    metrics.setdefault(name, float(value))
                if code:
                    break
            else:
                code = flush_shell()
        except in_process.TimeUp:
            code, timed_out = 1, f"Reached timeout of {timeout} seconds"
            log.append(f"# error: the test ran past its timeout of {timeout} s\n")
            # what the run left half done (a lock, a stream, a cache) stays in this worker:
            # its later tests go through the shell
            global _TAINTED
            _TAINTED = True
        status = lit.Test.PASS if code == 0 else (lit.Test.TIMEOUT if timed_out else lit.Test.FAIL)
        output = f"Exit Code: {code}\n"
        if timed_out:
            output += f"Timeout: {timed_out}\n"
        output += "\nCommand Output (stdout):\n--\n" + "".join(log) + "\n--\n"
        result = lit.Test.Result(status, output)
        for name, value in metrics.items():
            result.addMetric(name, lit.Test.RealMetricValue(value))
        return result

    def _inprocess(self, test, parts, execdir, seconds):
        """(exit status of the pipeline, what lit would show of it)."""
        negate, args, merge, check_args = parts
        _coverage_context(f"lit {test.getFullName()}")
        with _clean_state(test, execdir):
            _warm()   # imports are the worker's, not the test's: never cut by its alarm
            with in_process.time_limit(seconds):
                status, out, err = _call_convgen(args, merge)
        if self.record:
            _append(self.record, run_record(args, status, out, err, test.getFullName()))
        if status == EXIT_UNSUPPORTED:   # whatever the line expects: the test is not run
            return status, "".join(line + "\n" for line in out.splitlines()
                                   if line.startswith(UNSUPPORTED_LINE))
        if negate:
            status = 0 if status else 1
        with in_process.time_limit(seconds):
            check_status, check_out, check_err = self._filecheck(check_args, out, test, execdir)
        text = ""
        if status or check_status:
            # a failing run copies its reasons to stderr for a shell (report.py); stdout has
            # them already, so stderr shows only what stdout does not
            said = set(out.splitlines())
            err_only = "".join(line + "\n" for line in err.splitlines() if line not in said)
            text += _section("convgen stdout", out) + _section("convgen stderr", err_only)
            text += _section("FileCheck stdout", check_out) + _section("FileCheck stderr", check_err)
            if status:
                text += f"# error: convgen{' (under not)' if negate else ''} exited with status {status}\n"
            if check_status:
                text += f"# error: FileCheck failed with exit status: {check_status}\n"
            text += f"# rerun this test alone: {rerun_command(test.getSourcePath())}\n"
        else:
            # the verdict's summary: convgen's metrics line, or rocMLIR's comparator line
            text += "".join(line + "\n" for line in out.splitlines()
                            if "RMS=" in line or "comparator:" in line)
        # with pipefail a pipeline's status is its last failing command's
        return (check_status or status), text

    def _filecheck(self, args, text, test, execdir):
        if self.filecheck_inprocess:
            from filecheck.main import main as filecheck_main
            out, err = io.StringIO(), io.StringIO()
            saved = os.getcwd()
            try:
                os.chdir(execdir)
                with _stdin(text), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    try:
                        status = filecheck_main(["filecheck", *args]) or 0
                    except SystemExit as e:
                        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            finally:
                os.chdir(saved)
            return status, out.getvalue(), err.getvalue()
        import subprocess
        p = subprocess.run([*self.filecheck, *args], input=text, capture_output=True, text=True,
                           cwd=execdir, env=dict(test.config.environment))
        return p.returncode, p.stdout, p.stderr

    # ---- several GPUs -------------------------------------------------------------------

    def _pin_gpu(self, test) -> None:
        """Narrow this worker to one GPU, before anything in it touches one."""
        if not self.gpu_env or len(self.gpus) < 2:
            return
        identity = multiprocessing.current_process()._identity
        worker = identity[-1] - 1 if identity else 0
        test.config.environment[self.gpu_env] = self.gpus[worker % len(self.gpus)]


def _below_e2e(test) -> str:
    """A test's path below e2e/, whether lit runs the source tree (rooted above e2e/) or a
    CMake build tree (rooted at it)."""
    parts = list(test.path_in_suite)
    return "/".join(parts[1:] if parts[:1] == ["e2e"] else parts)


def read_expected_failures(path: str) -> dict[str, list[str]]:
    """{test path below e2e/ ("bwd_data/x.mlir"): [XFAIL expressions]} of a
    tab-separated table, one line per test: its path, a lit feature expression naming the
    implementation and the version where it fails (impl-aten && interpreter && torch-2.13),
    and why. Missing file: none."""
    out: dict[str, list[str]] = {}
    try:
        with open(path) as f:
            for n, line in enumerate(f, 1):
                if not line.strip() or line.startswith("#"):
                    continue
                parts = [p.strip() for p in line.rstrip("\n").split("\t")]
                if len(parts) != 3 or not all(parts):
                    raise ValueError(f"{path}:{n}: expected 'test<TAB>features<TAB>why'")
                out.setdefault(parts[0], []).append(parts[1])
    except FileNotFoundError:
        pass
    return out


def _coverage_context(name: str) -> None:
    """Under coverage.py (scripts/kernel-coverage), record what follows as this test's."""
    cov = sys.modules.get("coverage")
    current = cov.Coverage.current() if cov is not None else None
    if current is not None:
        current.switch_context(name)


def _unsupported_run(result):
    """A test through lit's shell whose convgen run said its implementation does not
    compute the problem: UNSUPPORTED, as in the workers (its FileCheck failed on no bits)."""
    if result.code == lit.Test.FAIL and UNSUPPORTED_LINE in (result.output or ""):
        return lit.Test.Result(lit.Test.UNSUPPORTED, result.output)
    return result


def _section(title: str, text: str) -> str:
    if not text.strip():
        return ""
    return f"# .---{title}\n" + "".join(f"# | {line}\n" for line in text.splitlines()) + "# `---\n"


@contextlib.contextmanager
def _stdin(text: str):
    saved = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = saved


_TORCH_SEED = None
_TAINTED = False      # a run of this worker was stopped by its timeout


def _warm() -> None:
    """Import what every run needs (torch, Triton, the stages), once per worker, in the
    test's environment (Triton reads TRITON_INTERPRET when kernels are defined). An import
    cut short by an alarm would leave a half-built module behind for every later test."""
    import torch  # noqa: F401
    import triton  # noqa: F401

    from convgen import cli, driver, inputs, reference, verify  # noqa: F401
    from convgen.kernels import launch  # noqa: F401


@contextlib.contextmanager
def _clean_state(test, execdir):
    """The environment, working directory and global seed a fresh convgen process would
    have, put back afterwards; CUDA's cached blocks freed after the run."""
    import warnings
    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    os.environ.clear()
    os.environ.update(test.config.environment)
    os.environ["LIT_CURRENT_TESTCASE"] = test.getFullName()
    os.chdir(execdir)
    sys.argv = ["convgen"]
    torch = sys.modules.get("torch")
    global _TORCH_SEED
    if torch is not None:
        if _TORCH_SEED is None:
            _TORCH_SEED = torch.initial_seed()
        torch.manual_seed(_TORCH_SEED)
    saved_threads = torch.get_num_threads() if torch is not None else None
    try:
        # the test's share of the cores (lit.cfg.py); an OpenMP list's first level counts
        threads = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
        if torch is not None and threads.isdecimal() and len(threads) < 5 and int(threads) > 0:
            torch.set_num_threads(int(threads))
        with warnings.catch_warnings():
            yield
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        torch = sys.modules.get("torch")
        if torch is not None and saved_threads is not None:
            torch.set_num_threads(saved_threads)
        if torch is not None and torch.cuda.is_initialized():
            torch.cuda.empty_cache()


def _call_convgen(args, merge: bool):
    """(exit status, stdout, stderr) of `convgen ARGS` in this process."""
    global _TORCH_SEED
    out = io.StringIO()
    err = out if merge else io.StringIO()
    status = in_process.run(args, out, err)
    if _TORCH_SEED is None:
        if "torch" in sys.modules:
            _TORCH_SEED = sys.modules["torch"].initial_seed()
    return status, out.getvalue(), "" if merge else err.getvalue()


def rerun_command(path: str) -> str:
    """The command that runs one test file alone, verbosely, from the checkout's root."""
    root = REPO_ROOT + os.sep
    where = path[len(root):] if path.startswith(root) else path
    return f"scripts/lit -v {shlex.quote(where)}"


def list_runs_record(test: str, line: str, parts) -> dict:
    """A convgen run a test would make (`list_runs`): its arguments and whether it runs
    under `not`; a line the workers would hand to the shell keeps only its text."""
    if parts is None:
        return {"test": test, "shell": line}
    negate, args, _, _ = parts
    return {"test": test, "args": list(args), "negate": negate}


def run_record(argv, status: int, stdout: str, stderr: str, test: str | None = None) -> dict:
    """What scripts/suite-bits keeps of one convgen run: its arguments, exit status, last
    bits line, last metrics line and error line; and, for benchmarks/bench_suite.py, the
    lit test it belongs to and the seconds of its stages (the `# convgen: time` line)."""
    lines = stdout.splitlines()
    bits = [ln for ln in lines if BITS_LINE.match(ln)]
    metrics = [ln for ln in lines if ln.startswith("# RMS=")]
    stages = next((ln for ln in lines if ln.startswith("# convgen: time ")), "")
    return {"args": " ".join(argv), "argv": list(argv), "rc": status,
            "bits": bits[-1] if bits else None, "metrics": metrics[-1] if metrics else None,
            "error": next((ln for ln in (stderr or stdout).splitlines() if "convgen: error" in ln), None),
            "test": test or os.environ.get("LIT_CURRENT_TESTCASE"),
            "stage_seconds": sum(float(v) for v in re.findall(r"([0-9.]+)s\b", stages))}


def _append(path: str, record: dict) -> None:
    """One JSON line, whole, however many workers write at once."""
    import fcntl
    import json
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.write(json.dumps(record) + "\n")

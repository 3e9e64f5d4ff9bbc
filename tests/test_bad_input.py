"""Bad input and first use, tried as a new user would: every case gets one
`convgen: error:` line and exit 2 (nothing written), or a correct result; never a
traceback, a hang or a silent wrong pass. Each row is a case once seen to go wrong."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from convgen import backend, cli, driver, guards

REPO = Path(__file__).resolve().parents[1]
TOOLS = str(REPO / "tools")
SMALL = ("--operation conv2d -t f16 -batchsize 1 -in_channels 4 -out_channels 3 -in_h 5 "
         "-in_w 5 -fil_h 3 -fil_w 3 -x2 -pv -rand 3").split()


def run(capsys, argv):
    rc = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(capsys, argv) -> str:
    rc, out, err = run(capsys, argv)
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("convgen: error: "), (rc, out, err)
    assert "Traceback" not in out + err and "[" not in out
    return lines[0]


# ---- refused before any work, one line naming what to change --------------------------

@pytest.mark.parametrize("extra,words", [
    # rocMLIR perf strings are read as rocMLIR's: what cannot run names both forms
    (["-perf_config", "1024,128,8,64,128,1,1,1", "-x2"],
     "-perf_config 1024,128,8,64,128,1,1,1: block_m=1024 must be a power of two from 1 to 512 "
     "(rocMLIR v1 (MFMA) read as block_m=1024,block_n=128,block_k=8,num_warps=16"),
    (["-perf_config", "v2:256,128,8,64,128,1,1,1"], "v2: with 8 values is no rocMLIR perf_config form"),
    (["-perf_config", "v2:256,128,8,64,128,1,1,1,1"], "mnPerXdl=128: Triton's AMD matrix instructions"),
    (["-perf_config", "v7:1,2"], "v7: with 2 values is no rocMLIR perf_config form"),
    (["-perf_config", "block_m=1048576"], "-perf_config: block_m=1048576 must be a power of two"),
    (["-perf_config", "num_stages=100"], "num_stages=100 must be from 1 to 8"),
    (["-perf_config", "block_k=three"], "block_k='three' is not an integer"),
    (["-rand", "1e20"], "invalid value '1e20' for -rand"),
    (["-rand", "99999999999999999999"], "a seed from 0 to 4294967295"),
    (["-rand_type", "int", "-rand_min", "-1e20", "-rand_max", "1e20", "-t", "f32"],
     "-rand_min/-rand_max: integer draws choose among at most 2^32 values"),
    (["-rand_min", "-1e6", "-rand_max", "1e6"], "does not fit in f16 (largest finite value 65504)"),
    (["-pv_with_gpu", "-ref_accumulate", "4"], "-ref_accumulate with -pv_with_gpu"),
    (["--json", ""], "--json: needs a path"),
    (["--dump", ""], "--dump: needs a path"),
    (["-rand_side", "output"], "-rand_side: output is not an input of fwd"),
    (["-input_precision", "tf32"], "-input_precision tf32 sets how f32 dots round their inputs; "
     "a f16 run has none"),
    # rocmlir-gen's integer range must fit the type even where the data does not draw it
    (["--semantics=rocmlir", "-rand", "fixed", "-rand_max_int", "1000000000"],
     "-rand_min_int/-rand_max_int: integer range [-5, 1e+09] does not fit in f16"),
    (["--semantics=rocmlir", "-rand", "1", "-rand_max_int", "1000000000"],
     "-rand_min_int/-rand_max_int: random range [-5, 1e+09] does not fit in f16"),
    (["--json", "/proc/x.json"], "--json: cannot write '/proc/x.json'"),
    (["-fil_h", "9"], "empty output (-3x3): the dilated filter's rows 9 is more than the padded "
     "input's 5"),
])
def test_refused_with_one_line(capsys, extra, words):
    assert words in one_error(capsys, SMALL + extra)


@pytest.mark.parametrize("text,dtype,moved", [
    # lines of rocMLIR's conv_wrw_perf_config.toml: K tiles of 4 and 8 elements
    ("64,64,2,64,64,2,1,1", "f32", "block_k 4 -> 16"),
    ("256,128,8,64,128,1,1,1", "f16", "block_k 8 -> 16"),
])
def test_a_rocmlir_perf_string_runs_on_the_nearest_tile_and_says_so(capsys, text, dtype, moved):
    rc, out, err = run(capsys, SMALL + ["-t", dtype, "--operation", "conv2d_bwd_weight",
                                        "-perf_config", text])
    assert rc == 0 and out.splitlines()[-1] == "[1 1 1]", (out, err)
    line = next(ln for ln in out.splitlines() if "config block_m=" in ln)
    assert f"rocMLIR v1 (MFMA) perf string, moved to the nearest tile convgen's kernels run: {moved}" in line
    assert "block_k=16," in line


def test_output_paths_are_checked_before_the_run(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(driver, "_check_memory", lambda *a: pytest.fail("the run started"))
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x")
    cases = [(["--json", tmp_path / "missing" / "r.json"], "--json: ", "does not exist"),
             (["--json", tmp_path / "adir"], "--json: ", "is a folder, not a file"),
             (["--json", tmp_path / "afile" / "r.json"], "--json: ", "does not exist"),
             (["--dump", tmp_path / "afile"], "--dump: ", "exists and is not a folder"),
             (["--dump", tmp_path / "missing" / "d"], "--dump: ", "does not exist")]
    for extra, flag, words in cases:
        msg = one_error(capsys, SMALL + extra)
        assert flag in msg and words in msg, msg
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "afile"]


def test_a_problem_that_does_not_fit_in_memory_is_refused(capsys, monkeypatch):
    """1x1x46000x46000 once tried to allocate 16.9 GB on a 24 GiB machine."""
    monkeypatch.setattr(backend, "host_memory_bytes", lambda: 4 * 2 ** 30)
    monkeypatch.setattr(backend.Backend, "memory_bytes", lambda self: 4 * 2 ** 30)
    msg = one_error(capsys, "-batchsize 1 -in_channels 1 -out_channels 1 -in_h 46000 -in_w 46000 "
                            "-fil_h 1 -fil_w 1 -pv".split())
    assert "needs about" in msg and "GiB" in msg and "4.00 GiB free" in msg and "inputs" in msg


def test_tritons_resource_failures_become_one_line(capsys, monkeypatch):
    from triton.runtime.errors import OutOfResources
    import convgen.kernels.launch as launch

    def too_big(*a, **kw):
        raise OutOfResources(262144, 232448, "shared memory")
    monkeypatch.setattr(launch, "run_conv", too_big)
    msg = one_error(capsys, SMALL + ["-perf_config", "num_stages=8"])
    assert msg.startswith("convgen: error: -perf_config: kernel config block_m=")
    assert "262144 bytes of shared memory, the hardware limit is 232448" in msg


def test_a_model_pick_triton_refuses_gives_way_to_the_rule(capsys, monkeypatch):
    """The model learns speed, not what compiles: a pick whose shared memory Triton refuses
    (bwd_weight's 3-stage 128-pixel boxes on stride-2 problems, recorded as invalid by the
    tuner) runs the rule's config instead, says so, and checks it; a config forced on the
    command line, or the rule's own, still stops the run (above)."""
    from triton.runtime.errors import OutOfResources
    import convgen.kernels.launch as launch
    from convgen import picks
    from convgen.kernels import config as kconfig
    real_select, real_run = picks.select, launch.run_conv
    picked = {}

    def model_select(p, be, use_dot, *a):
        rule, _ = real_select(p, be, use_dot, None, None, None)
        picked["cfg"] = kconfig.choose(p, be, use_dot, {"block_m": rule.block_m * 2})
        picked["rule"] = rule.describe()
        return picked["cfg"], f"{picks.MODEL_SOURCE} sm90.json: predicted 99.0 TFLOPS; no tuning database"

    def refuse_the_pick(p, tensors, out, cfg, *a, **kw):
        if cfg == picked["cfg"]:
            raise OutOfResources(262240, 232448, "shared memory")
        return real_run(p, tensors, out, cfg, *a, **kw)
    monkeypatch.setattr(picks, "select", model_select)
    monkeypatch.setattr(launch, "run_conv", refuse_the_pick)
    rc, out, err = run(capsys, SMALL)
    assert rc == 0 and out.splitlines()[-1] == "[1 1 1]"
    note = next(line for line in (out + err).splitlines() if "the model's pick" in line)
    assert picked["cfg"].describe() in note and "262240 bytes of shared memory" in note
    assert f"the default rule's config {picked['rule']} runs instead" in note
    # a pick that is the rule's own config has nothing to give way to: one error line
    monkeypatch.setattr(picks, "select", lambda p, be, use_dot, *a: (
        real_select(p, be, use_dot, None, None, None)[0], f"{picks.MODEL_SOURCE} sm90.json"))
    def refuse_all(*a, **kw):
        raise OutOfResources(262240, 232448, "shared memory")
    monkeypatch.setattr(launch, "run_conv", refuse_all)
    msg = one_error(capsys, SMALL)
    assert "does not run" in msg and "262240 bytes of shared memory" in msg


# ---- correct results where there used to be a wrong one -------------------------------

def test_an_overflowing_reference_fails_and_says_why(capsys):
    """Both sides +inf once passed [1 1 1] with 'the reference is all zeros'."""
    rc, out, err = run(capsys, SMALL + ["-rand_min", "200", "-rand_max", "255"])
    assert rc == 0 and out.splitlines()[-1] == "[0 0 0]"
    assert "infinities in the reference" in out and "overflows f16" in out
    assert "all zeros" not in out


def test_rms_threshold_zero_on_a_correct_kernel_blames_the_threshold(capsys):
    """A correct f32 kernel with -RMS_threshold 0 was called 'a widespread error, likely a bug'."""
    rc, out, err = run(capsys, SMALL + ["-t", "f32", "-RMS_threshold", "0", "-in_channels", "16"])
    assert rc == 0 and out.splitlines()[-1].startswith("[0 ")
    assert "within what rounding explains" in out and "likely a bug" not in out


def test_json_and_dump_are_written_whole(capsys, tmp_path):
    js, dump = tmp_path / "r.json", tmp_path / "d"
    rc, out, _ = run(capsys, SMALL + ["--json", js, "--dump", dump])
    assert rc == 0 and out.splitlines()[-1] == "[1 1 1]"
    assert json.loads(js.read_text())["bits"] == [1, 1, 1]
    assert sorted(p.name for p in dump.iterdir()) == ["filter.npy", "input.npy", "kernel.npy",
                                                      "reference.npy"]
    assert np.load(dump / "kernel.npy").shape == (1, 1, 3, 3, 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "r.json"]   # no .tmp left


def test_large_problems_in_the_interpreter_say_so_first(capsys, monkeypatch):
    """-p once ran for minutes in the interpreter without a word."""
    import convgen.inputs as inputs

    class Stop(Exception):
        pass

    def stop(*a, **kw):
        raise Stop
    monkeypatch.setattr(backend, "current", lambda: backend.INTERPRETER)
    monkeypatch.setattr(inputs, "make_inputs", stop)
    with pytest.raises(Stop):
        cli.main(["-p", "-pv"])
    out = capsys.readouterr().out
    assert "large for Triton's interpreter" in out and "minutes" in out


def test_help_gives_each_flag_its_meaning_and_default(capsys):
    for argv, flags in ((["--help"], ("-batchsize", "-rand_min", "-perf_config", "-RMS_threshold")),
                        (["conv", "--help"], ("-n, -batchsize", "-F, -forw", "-rand")),
                        (["compare", "--help"], ("-kern", "-ref", "-RMS_threshold"))):
        rc, out, _ = run(capsys, argv)
        assert rc == 0
        for flag in flags:
            line = next(ln for ln in out.splitlines() if ln.strip().startswith(flag))
            assert len(line.split()) > 2, line     # a meaning, not only the name
        assert "[default: " in out


# ---- in a real process ------------------------------------------------------------------

def _convgen(argv, **kw):
    env = dict(os.environ, PYTHONPATH=TOOLS)
    return subprocess.Popen([sys.executable, "-m", "convgen", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def test_output_piped_into_head_ends_quietly():
    """`convgen ... | head -1` once ended in a BrokenPipeError traceback."""
    p = _convgen(SMALL + ["-print-verify-results", "always"])
    first = p.stdout.readline()
    p.stdout.close()
    err = p.stderr.read()
    rc = p.wait(timeout=120)
    assert first.startswith("# convgen: ")
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert rc in (0, 141)


def test_help_errors_and_split_test_do_not_import_torch(tmp_path):
    src = os.path.join(os.path.dirname(TOOLS), "e2e", "compat", "rocmlir_gen_spellings.mlir")
    code = ("import sys; from convgen import cli, split_test; cli.main(['--help']); "
            "cli.main(['-bogus']); cli.main(['compare', '--help']); cli.main(['tune', '--help']); "
            f"split_test.main([{src!r}, {str(tmp_path / 'split')!r}]); "
            "print('torch' in sys.modules, 'triton' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=TOOLS),
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.splitlines()[-1] == "False False", p.stdout[-300:] + p.stderr
    assert os.listdir(tmp_path / "split")   # split-test did its work


def test_a_write_that_fails_after_the_run_is_one_line(capsys, tmp_path, monkeypatch):
    from convgen import report

    def full(path, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(report, "write_json", full)
    msg = one_error(capsys, SMALL + ["--json", tmp_path / "r.json"])
    assert "--json: cannot write" in msg and "No space left on device" in msg


def test_written_files_get_the_usual_permissions(capsys, tmp_path):
    """mkstemp makes 0600 files; --json and --dump files get what open() would give."""
    mask = os.umask(0o022)
    try:
        rc, _, _ = run(capsys, SMALL + ["--json", tmp_path / "r.json", "--dump", tmp_path / "d"])
    finally:
        os.umask(mask)
    assert rc == 0
    for f in [tmp_path / "r.json", *(tmp_path / "d").iterdir()]:
        assert f.stat().st_mode & 0o777 == 0o644, f


def test_a_dump_file_that_cannot_be_written_is_named(capsys, tmp_path):
    (tmp_path / "d" / "input.npy").mkdir(parents=True)   # a folder where a file must go
    msg = one_error(capsys, SMALL + ["--dump", tmp_path / "d"])
    assert "--dump: cannot write" in msg and "input.npy" in msg


def test_json_without_a_reference_is_refused_and_dump_still_saves_the_output(capsys, tmp_path):
    argv = [a for a in SMALL if a != "-pv"]
    assert "--json needs a reference" in one_error(capsys, argv + ["--json", tmp_path / "r.json"])
    rc, out, _ = run(capsys, argv + ["--dump", tmp_path / "d"])
    assert rc == 0 and "no validation requested" in out
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["filter.npy", "input.npy",
                                                                  "kernel.npy"]


def test_a_compile_failure_gives_its_reason_and_blames_no_flag_unasked(capsys, monkeypatch):
    import ast

    from triton.compiler.errors import CompilationError

    import convgen.kernels.launch as launch

    def broken(*a, **kw):
        raise CompilationError("x = 1\n", ast.parse("x = 1").body[0], "an example reason")
    monkeypatch.setattr(launch, "run_conv", broken)
    msg = one_error(capsys, SMALL)
    assert "the default kernel config block_m=" in msg and "an example reason" in msg
    assert "-perf_config" not in msg


# ---- guard bands -------------------------------------------------------------------------

@pytest.mark.parametrize("where,words", [(+1, "0 before the output, 1 after it; the nearest 1 elements past its end"),
                                         (-3, "1 before the output, 0 after it; the nearest 3 elements before its start")])
def test_a_write_outside_the_output_fails_every_bit(capsys, monkeypatch, where, words):
    """A store mask one row too wide leaves every element inside right: only the guard
    bands around the output see it."""
    import convgen.kernels.launch as launch
    real = launch.run_conv

    def spills(problem, tensors, out, *a, **kw):
        real(problem, tensors, out, *a, **kw)
        flat = out.permute(*[problem.to_logical_perm(problem.writes).index(i) for i in range(5)])
        base = flat.reshape(-1)
        storage = base.untyped_storage()
        import torch
        whole = torch.empty(0, dtype=base.dtype, device=base.device).set_(storage)
        i = base.storage_offset() + (base.numel() - 1 + where if where > 0 else where)
        whole[i] = 1.0
    monkeypatch.setattr(launch, "run_conv", spills)
    rc, out, _ = run(capsys, SMALL)
    assert rc == 0 and out.splitlines()[-1] == "[0 0 0]"
    assert "written outside the output" in out and words in out


def test_inputs_sit_between_margins_of_nan(capsys):
    import torch
    from convgen import inputs
    from convgen.options import DataSpec
    c = cli.parse(SMALL)
    for name, t in inputs.make_inputs(c.problem, DataSpec(seed=3), "cpu").items():
        whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage())
        inside = torch.zeros(whole.numel(), dtype=torch.bool)
        inside[t.storage_offset():t.storage_offset() + t.numel()] = True
        assert whole[~inside].isnan().all() and whole[~inside].numel() >= 2 * guards.GUARD_MIN
        assert not t.isnan().any(), name


def test_the_output_guard_sees_nothing_after_a_correct_kernel(capsys):
    rc, out, _ = run(capsys, SMALL + ["--operation", "conv2d_bwd_weight", "-perf_config", "split=2"])
    assert rc == 0 and out.splitlines()[-1] == "[1 1 1]" and "outside" not in out


def test_an_empty_3d_output_names_the_dimension_that_empties_it(capsys):
    msg = one_error(capsys, ["--operation", "conv", "-t", "f32", "-fil_layout=kczyx",
                             "-in_layout=ncdhw", "-out_layout=nkdhw", "-batchsize", "1",
                             "-in_channels", "4", "-out_channels", "4", "-in_d", "2", "-in_h", "4",
                             "-in_w", "4", "-fil_d", "3", "-fil_h", "3", "-fil_w", "3", "-pv"])
    assert msg.endswith("empty output (2x2, depth 0): the dilated filter's depth 3 is more than "
                        "the padded input's 2"), msg


def test_a_selector_named_by_the_environment_must_exist(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("CONVGEN_SELECTOR", str(tmp_path / "missing.json"))
    msg = one_error(capsys, SMALL)
    assert msg.startswith(f"convgen: error: $CONVGEN_SELECTOR: selector model "
                          f"'{tmp_path / 'missing.json'}' cannot be used"), msg


def test_an_unknown_command_names_the_commands(capsys):
    msg = one_error(capsys, ["tunee", "--lines", "x"])
    assert "unknown command 'tunee' (commands: compare, tune, tuning-stats" in msg, msg


def test_study_report_into_a_folder_it_cannot_make_is_one_line(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    msg = one_error(capsys, ["study-report", "--data_dir", str(blocker / "plots"), "--plots=0"])
    assert msg.startswith(f"convgen: error: -data_dir: cannot write into '{blocker / 'plots'}'"), msg


@pytest.mark.skipif(not backend.current().interpreter,
                    reason="the interpreter's estimate and heartbeat; a GPU runs the kernel at once")
def test_a_long_interpreter_kernel_says_it_is_still_going(capsys, monkeypatch):
    from convgen import driver

    def slow_run(*a, **kw):
        time.sleep(0.3)
        return real_run(*a, **kw)
    import convgen.kernels.launch as launch
    real_run = launch.run_conv
    monkeypatch.setattr(launch, "run_conv", slow_run)
    monkeypatch.setattr(driver, "INTERPRETER_NOTE_S", 0.0)
    monkeypatch.setattr(driver, "HEARTBEAT_S", 0.05)
    rc, out, err = run(capsys, SMALL)
    assert rc == 0 and out.splitlines()[-1] == "[1 1 1]"
    assert "large for Triton's interpreter" in out
    beats = [ln for ln in err.splitlines() if ln.startswith("# convgen: kernel: ")]
    assert beats and all(" s of about " in ln for ln in beats), err

"""convgen fuzz (tools/convfuzz): the cases it draws are valid problems of the whole space;
it finds a planted bug, shrinks it to the smallest failing case and writes a lit test that
fails on the bug and passes without it; a seed reproduces a run; hangs, refusals, crashes
and declined cases are told apart; bad flags give one error line.

Most tests plant bugs in a user implementation around aten's convolution (fast, exact
enough), so the search runs hundreds of cases in seconds; one runs convgen's kernels in
the interpreter."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings

from convfuzz import fuzz, run, space
from convgen import backend, cli, implementations
from convgen.kernels import config as kc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUMMARY = re.compile(r"^fuzz: (\d+) cases, (\d+) failures, (\d+) s$")

PLANTED = """\
import time
from convgen import implementations

ATEN = implementations.Aten()


def right(request):
    ATEN.run(request)


def wrong_when_strided(request):
    # the last output column is off by one whenever the forward width stride is above 1
    ATEN.run(request)
    p = request.problem
    if p.direction.name == "fwd" and p.stride_w > 1:
        request.out[..., -1] += 1


def hangs_on_bwd_weight(request):
    if request.problem.direction.name == "bwd_weight":
        time.sleep(60)
    ATEN.run(request)


def raises_on_groups(request):
    if request.problem.g > 1:
        raise RuntimeError("grouped convolution: no kernel")
    ATEN.run(request)


def fwd_only(request):
    if request.problem.direction.name != "fwd":
        raise implementations.Unsupported("forward only")
    ATEN.run(request)
"""


@pytest.fixture
def planted(tmp_path):
    path = tmp_path / "planted.py"
    path.write_text(PLANTED)
    yield str(path)
    implementations._BUILT.clear()


def fuzz_run(capsys, tmp_path, *args):
    """(exit status, stdout lines, the JSON record) of `convgen fuzz ARGS` in this process,
    f32 and the CPU reference alone unless ARGS name others: aten's CPU gradients in f16 and bf16 sum in the type
    (a real failure the fuzzer finds: e2e/regressions/aten_cpu_half_backward.mlir)."""
    record = tmp_path / "fuzz.json"
    if "--types" not in args:
        args = ("--types", "f32", *args)
    if "--reference" not in args:   # the GPU reference runs as slowly as a kernel here
        args = ("--reference", "cpu", *args)
    rc = cli.main(["fuzz", "--quiet", "--state", str(tmp_path / "state"), "--out",
                   str(tmp_path / "found"), "--json", str(record), *args])
    out = capsys.readouterr().out.splitlines()
    return rc, out, json.loads(record.read_text()) if record.exists() else None


def flag(flags, name):
    return flags[flags.index(name) + 1] if name in flags else None


# ---- the space --------------------------------------------------------------------------

def _draws(n: int, impl: str = "convgen") -> list:
    be = backend.INTERPRETER
    out = []

    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(space.case_strategy(be, space.INTERPRETER_LIMITS, impl, space.tile_configs(be)))
    def collect(flags):
        out.append(flags)
    collect()
    return out


def test_every_drawn_case_is_a_valid_problem_within_the_limits():
    lim = space.INTERPRETER_LIMITS
    for flags in _draws(150):
        config = cli.parse(list(flags))   # the flags convgen takes
        p = config.problem
        assert p.ho >= 1 and p.wo >= 1 and p.do >= 1
        assert p.n <= lim.batch and p.g <= lim.groups and max(p.c, p.k) <= lim.channels
        assert p.n * p.g * p.c * p.k * p.do * p.ho * p.wo * p.z * p.y * p.x <= lim.macs
        assert ("-pv" in flags) != ("-pv_with_gpu" in flags)
        assert p.dtype.name != "i8" or p.direction.name == "fwd"
        text = flag(flags, "-perf_config")
        if text:   # a config of the space, taken for this problem and path as it is
            cfg = kc.choose(p, backend.INTERPRETER, "-x2" in flags, kc.from_text(text))
            kc.validate(cfg, p, backend.INTERPRETER, "-x2" in flags)
        assert space.interpreter_steps(flags, backend.INTERPRETER) <= lim.steps


def test_the_draws_reach_the_corners_of_the_space():
    draws = _draws(300)
    problems = [cli.parse(list(f)).problem for f in draws]
    seen = {
        "three directions": {p.direction.name for p in problems} == {"fwd", "bwd_data", "bwd_weight"},
        "3-D": any(p.is_3d for p in problems),
        "1-D": any(not p.is_3d and p.hi == 1 and p.y == 1 for p in problems),
        "groups": any(p.g > 1 for p in problems),
        "one channel per group": any(p.g > 1 and p.c == 1 for p in problems),
        "one-sided padding": any(p.pad_w_l != p.pad_w_r for p in problems),
        "padding wider than the filter": any(p.pad_w_l >= p.x + 1 for p in problems),
        "stride": any(p.stride_w > 1 for p in problems),
        "dilation": any(p.dil_w > 1 for p in problems),
        "channels in the middle": any(p.layouts["input"].index("c") not in (1, 2, 4)
                                      for p in problems),
        "digits": any(any(ch.isdigit() for ch in flag(f, "-in_layout")) for f in draws),
        "g written": any("g" in flag(f, "-fil_layout") for f in draws),
        "fp8": any(p.dtype.is_fp8 for p in problems),
        "matrix cores and FMA": {"-x2" in f for f in draws} == {True, False},
        "both references": {"-pv" in f for f in draws} == {True, False},
        "a tile config": any("-perf_config" in f for f in draws),
        "a direct config": any("direct=1" in (flag(f, "-perf_config") or "") for f in draws),
        "a descriptor config": any("tma=1" in (flag(f, "-perf_config") or "") for f in draws),
        "a folded config": any("s2d=" in (flag(f, "-perf_config") or "") for f in draws),
        "strided direct kernels": any(p.g > 1 and max(p.c, p.k) <= kc.MAX_GROUP_CHANNELS
                                      and p.stride_h > 1 for p in problems),
        "the data ranges": {tuple(d for d in space.DATA if space.DATA[d] and space.DATA[d][0] in f)
                            for f in draws} >= {(), ("away",), ("int",)},
    }
    assert [k for k, v in seen.items() if not v] == []


def test_the_shaped_forms_draw_what_their_kernels_take():
    """The descriptor form draws what the descriptor kernels run (one group, channels
    last, 16-bit floats, matrix cores, a tma or fold config); the direct form groups of
    at most the direct kernels' channels."""
    assert space.DIRECT_CHANNELS == kc.MAX_GROUP_CHANNELS
    shaped = [f for f in _draws(200) if re.search(r"tma=1|s2d=", flag(f, "-perf_config") or "")]
    assert len(shaped) >= 10
    for f in shaped:
        p = cli.parse(list(f)).problem
        assert p.g == 1 and p.dtype.name in space.DESCRIPTOR_TYPES and "-x2" in f
        assert all(p.layouts[t].endswith(ch) for t, ch in (("input", "c"), ("output", "k")))


def test_loop_steps_count_each_kernel_forms_loops():
    """The interpreter's cost estimate, by hand for each form: a GEMM tile steps through
    its reduction (one element on FMA, block_k on matrix cores), a direct program through
    rows x channels x taps, and a 3-D problem launches once per filter depth tap."""
    from convgen.kernels.geometry import loop_steps
    be = backend.INTERPRETER
    fwd = cli.parse("-t f32 -batchsize 2 -in_channels 12 -out_channels 20 -in_h 9 -in_w 7 "
                    "-fil_h 3 -fil_w 3".split()).problem          # M = 2*7*5, N = 20, K = 108
    cfg = kc.choose(fwd, be, False, {"block_m": 32, "block_n": 16, "block_k": 1})
    assert loop_steps(fwd, cfg, False) == 3 * 2 * 108
    cfg = kc.choose(fwd, be, True, {"block_m": 32, "block_n": 16, "block_k": 16})
    assert loop_steps(fwd, cfg, True) == 3 * 2 * 7
    grouped = cli.parse("-t f32 -batchsize 2 -groupsize 4 -in_channels 12 -out_channels 8 "
                        "-in_h 9 -in_w 7 -fil_h 3 -fil_w 3".split()).problem   # c = 3, k = 2
    cfg = kc.choose(grouped, be, False, {"direct": 1, "block_m": 4, "block_n": 8})
    assert loop_steps(grouped, cfg, False) == 2 * 7 * 2 * 1 * 3 * 9   # n*ho*(wo/4)*(gk/8)*c*taps
    cube = cli.parse("-t f32 -batchsize 1 -in_channels 12 -out_channels 20 -in_d 4 -in_h 9 -in_w 7 "
                     "-fil_d 2 -fil_h 3 -fil_w 3 -in_layout ncdhw -fil_layout kczyx -out_layout nkdhw"
                     .split()).problem    # 3 depths, 2 taps
    cfg = kc.choose(cube.depth_slice(), be, False, {"block_m": 32, "block_n": 16, "block_k": 1})
    assert loop_steps(cube, cfg, False) == 2 * (4 * 2 * 108)   # slices of 3 images: M = 105


def test_another_implementation_is_given_no_tile_config():
    draws = _draws(60, impl="aten")
    assert all(flag(f, "-impl") == "aten" and "-perf_config" not in f for f in draws)


# ---- finding, shrinking, writing -------------------------------------------------------

def test_a_planted_bug_is_found_shrunk_and_written_as_a_failing_test(capsys, tmp_path, planted):
    rc, out, rec = fuzz_run(capsys, tmp_path, "--cases", "40", "--seed", "3", "--impl",
                            f"{planted}:wrong_when_strided")
    assert rc == 1
    m = SUMMARY.match(out[-1])
    assert m and int(m.group(2)) == 1, out
    (f,) = rec["failures"]
    flags = f["flags"]
    assert f["kind"] == "wrong" and f["what"].startswith("bits [")
    # shrunk toward the simplest case that still has the bug: forward, f32, default layouts,
    # one image, one channel, a width stride of 2 and no more
    assert flag(flags, "--operation") == "conv2d" and flag(flags, "-t") == "f32"
    assert flag(flags, "-conv_stride_w") == "2"
    assert (flag(flags, "-in_layout"), flag(flags, "-fil_layout"), flag(flags, "-out_layout")) == \
        ("nchw", "kcyx", "nkhw")
    assert [flag(flags, x) for x in ("-batchsize", "-groupsize", "-in_channels", "-out_channels")] == \
        ["1", "1", "1", "1"]
    assert int(flag(flags, "-in_w")) <= 3 and flag(flags, "-fil_w") == "1"
    assert "-perf_config" not in flags and "-x2" not in flags
    assert f["size"]["macs"] <= 2
    text = open(f["path"]).read()
    assert "convgen fuzz --seed 3" in text and "// CHECK: [1 1 1]" in text
    run_line = next(ln for ln in text.splitlines() if ln.startswith("// RUN:"))
    assert "-impl" not in run_line and "| FileCheck %s" in run_line
    assert f"reproduce: convgen {' '.join(flags)}" in "\n".join(out)

    # the test, run by lit: fails on the planted bug, passes on aten's convolution
    def lit(impl):
        return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "lit"), "-q",
                               "--param", f"impl={impl}", f["path"]], capture_output=True,
                              text=True, cwd=ROOT)
    assert lit(f"{planted}:wrong_when_strided").returncode == 1
    passing = lit("aten")
    assert passing.returncode == 0, passing.stdout + passing.stderr


def test_a_seed_reproduces_the_cases(capsys, tmp_path, planted):
    def cases(seed, where):
        where.mkdir()
        rc, out, rec = fuzz_run(capsys, where, "--cases", "12", "--seed", seed, "--impl",
                                f"{planted}:right")
        assert rc == 0 and rec["failures"] == [] and SUMMARY.match(out[-1])
        with open(where / "state" / "cases.jsonl") as f:
            return [json.loads(line)["flags"] for line in f]
    first = cases("7", tmp_path / "a")
    assert len(first) == 12
    assert cases("7", tmp_path / "b") == first
    assert cases("8", tmp_path / "c") != first


def test_a_hang_is_its_own_kind(capsys, tmp_path, planted):
    rc, out, rec = fuzz_run(capsys, tmp_path, "--cases", "30", "--seed", "1", "--timeout", "3",
                            "--impl", f"{planted}:hangs_on_bwd_weight", "--max-failures", "1",
                            "--shrink-budget", "10")
    assert rc == 1
    (f,) = rec["failures"]
    assert f["kind"] == "hung" and flag(f["flags"], "--operation") == "conv2d_bwd_weight"
    assert "_hung_" in os.path.basename(f["path"])


def test_an_error_on_a_valid_problem_is_a_refusal(capsys, tmp_path, planted):
    rc, out, rec = fuzz_run(capsys, tmp_path, "--cases", "30", "--seed", "2", "--shrink-budget", "8",
                            "--impl", f"{planted}:raises_on_groups")
    assert rc == 1
    (f,) = rec["failures"]
    assert f["kind"] == "refused" and "grouped convolution: no kernel" in f["what"]
    assert int(flag(f["flags"], "-groupsize")) > 1


def test_cases_the_implementation_declines_are_drawn_again(capsys, tmp_path, planted):
    rc, out, rec = fuzz_run(capsys, tmp_path, "--cases", "10", "--seed", "4",
                            "--impl", f"{planted}:fwd_only")
    assert rc == 0 and rec["failures"] == [] and rec["cases"] == 10
    assert rec["rejected"] > 0   # not failures, and not counted as cases


def test_an_implementation_that_declines_everything_is_one_error_line(capsys, tmp_path, planted):
    rc = cli.main(["fuzz", "--quiet", "--state", str(tmp_path / "state"), "--cases", "5", "--seed",
                   "1", "--operations", "conv2d_bwd_data", "--impl", f"{planted}:fwd_only"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1
    assert err.startswith("convgen: error:") and "declined every case drawn" in err


def test_a_traceback_is_a_crash(monkeypatch):
    def broken(argv):
        raise IndexError("tile index out of range")
    monkeypatch.setattr(cli, "main", broken)
    o = run.run_case(("--operation", "conv2d"))
    assert o.kind == "crashed" and o.failed and "IndexError: tile index out of range" in o.what()


def test_a_run_without_a_verdict_is_a_crash(monkeypatch):
    monkeypatch.setattr(cli, "main", lambda argv: print("# no bits") or 0)
    assert run.run_case(("-pv",)).kind == "crashed"


def test_convgens_kernels_are_fuzzed_on_this_device(capsys, tmp_path):
    rc, out, rec = fuzz_run(capsys, tmp_path, "--cases", "3", "--seed", "1")
    assert rc == 0 and SUMMARY.match(out[-1]).group(1) == "3", out
    assert rec["device"] == backend.current().arch and rec["impl"] == "convgen"


def test_found_tests_name_what_they_need():
    assert fuzz.requires(("-t", "fp8_e5m2", "-perf_config", "block_m=64,tma=1"), None) == \
        ["fp8-e5m2", "tma"]
    assert fuzz.requires(("-t", "f16"), space.INTERPRETER_LIMITS) == []
    big = ("--operation", "conv2d", "-t", "f16", "-batchsize", "8", "-in_channels", "48",
           "-out_channels", "48", "-in_h", "40", "-in_w", "40", "-fil_h", "3", "-fil_w", "3", "-pv")
    assert fuzz.requires(big, space.GPU_LIMITS) == ["gpu"]


@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "--budget"),
    (["--cases", "-3"], "--cases"),
    (["--impl", "nosuch"], "unknown implementation 'nosuch'"),
    pytest.param(["--large"], "--large needs a GPU",
                 marks=pytest.mark.skipif(not backend.current().interpreter, reason="a GPU takes --large")),
    (["--bogus"], "--bogus"),
    (["--types", "f64"], "--types"),
    (["--types", "i8", "--operations", "conv2d_bwd_data"], "none of the types i8"),
])
def test_bad_flags_are_one_error_line(capsys, tmp_path, args, message):
    rc = cli.main(["fuzz", "--state", str(tmp_path), *args])
    captured = capsys.readouterr()
    assert rc == 2 and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith("convgen: error:") and message in captured.err
    assert not os.listdir(tmp_path)   # nothing written


def test_fuzz_help_describes_it():
    rc = cli.main(["fuzz", "--help"])
    assert rc == 0


def test_the_summary_line():
    s = fuzz.Summary(seed=1, cases=12, seconds=3.4)
    assert SUMMARY.match(s.line())
    assert s.line() == "fuzz: 12 cases, 0 failures, 3 s"

"""Any implementation under test (`--impl`): the vendor library through aten, Inductor, a
user's function. The same inputs, references and verifier judge them; what one does not
compute is unsupported (exit 77, lit's UNSUPPORTED); a wrong one gets a 0 bit, one that
writes past its output is caught, and a broken plug-in is one error line."""
import os
import sys
import textwrap
from pathlib import Path

import pytest

from convgen import backend, cli, implementations

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = str(REPO / "docs" / "examples" / "direct_conv.py")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_lit_selftest import make_suite, run_lit  # noqa: E402

OPERATION = {"fwd": "conv2d", "bwd_data": "conv2d_bwd_data", "bwd_weight": "conv2d_bwd_weight"}
# odd sizes: primes, 1s, groups, stride that does not divide, dilation, asymmetric padding
ODD = ["-batchsize=3", "-groupsize=2", "-in_channels=6", "-out_channels=10", "-in_h=11",
       "-in_w=7", "-fil_h=3", "-fil_w=2", "-conv_stride_h=2", "-dilation_w=2",
       "-padding_h_l=1", "-padding_h_r=0", "-padding_w=1"]
NHWC = ["-in_layout=nhwc", "-fil_layout=kyxc", "-out_layout=nhwk"]


def run(capsys, args):
    rc = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def bits(out: str) -> str:
    return out.strip().splitlines()[-1]


# ---- aten: torch's own convolution, here oneDNN or ATen's CPU loops ---------------------

@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("layouts", [NHWC, []], ids=["nhwc", "nchw"])
def test_aten_f32_is_right_in_every_direction_on_odd_problems(capsys, direction, layouts):
    rc, out, err = run(capsys, ["--impl", "aten", "--operation", OPERATION[direction], "-t", "f32",
                                *ODD, *layouts, "-pv", "-rand", "7"])
    assert rc == 0 and bits(out) == "[1 1 1]", out + err
    assert "implementation aten (torch " in out


@pytest.mark.parametrize("dtype", ["f16", "bf16"])
def test_aten_half_types_forward_passes_and_the_cpu_backward_is_caught(capsys, dtype):
    rc, out, _ = run(capsys, ["--impl", "aten", "-t", dtype, *ODD, *NHWC, "-pv"])
    assert rc == 0 and bits(out) == "[1 1 1]", out
    # ATen's CPU backward sums f16/bf16 in the type on CPUs without a dot product of the
    # type (e2e/expected-failures.tsv): the same verifier that passes the forward flags it
    # (cuDNN's, on a GPU, sums in fp32 here, and so does oneDNN's bf16 with AVX512-BF16)
    rc, out, _ = run(capsys, ["--impl", "aten", "--operation", "conv2d_bwd_data", "-t", dtype,
                              *ODD, *NHWC, "-pv"])
    in_type = backend.current().interpreter and implementations.aten_cpu_sums_in_type(dtype)
    assert rc == 0 and (bits(out) != "[1 1 1]") == in_type, out


def test_aten_3d(capsys):
    rc, out, err = run(capsys, ["--impl", "aten", "--operation", "conv2d_bwd_weight", "-t", "f32",
                                "-batchsize=2", "-in_channels=3", "-out_channels=5", "-in_d=5",
                                "-in_h=6", "-in_w=4", "-fil_d=2", "-fil_h=3", "-fil_w=1",
                                "-padding_d=1", "-in_layout=ncdhw", "-fil_layout=kczyx",
                                "-out_layout=nkdhw", "-pv"])
    assert rc == 0 and bits(out) == "[1 1 1]", out + err


@pytest.mark.parametrize("extra,why", [
    (["-t", "i8"], "aten has no i8 convolution (torch's takes floating types"),
    (["-t", "f16", "-perf_config", "block_m=32,block_n=32,block_k=32,num_warps=4"],
     "-perf_config sets a tile config of convgen's kernels"),
    (["-t", "f16", "-flush_subnormals"], "-flush_subnormals changes what convgen's kernels read"),
])
def test_what_aten_does_not_compute_is_unsupported(capsys, extra, why):
    rc, out, err = run(capsys, ["--impl", "aten", *ODD, *extra, "-pv"])
    assert rc == implementations.EXIT_UNSUPPORTED, out + err
    assert f"convgen: unsupported: {why}" in out and "[" not in out and not err


def test_the_environment_names_the_default_implementation(capsys, monkeypatch):
    monkeypatch.setenv("CONVGEN_IMPL", "aten")
    rc, out, _ = run(capsys, ["-t", "f32", *ODD, "-pv"])
    assert rc == 0 and "implementation aten" in out and bits(out) == "[1 1 1]"
    rc, out, _ = run(capsys, ["--impl", "convgen", "-t", "f32", *ODD, "-pv"])   # the flag wins
    assert rc == 0 and "implementation aten" not in out and "config block_m=" in out
    # the lab's and the study's runs (cli.parse) test convgen's kernels whatever it says
    assert cli.parse(["-t", "f32", *ODD, "-pv"]).impl == "convgen"


# ---- a user's function: the documented example, a wrong one, one that writes outside ----

def test_the_documented_example_kernel_passes(capsys):
    rc, out, err = run(capsys, ["--impl", f"{EXAMPLE}:conv2d_fwd", "-t", "f16", *ODD, *NHWC,
                                "-pv", "-rand", "3"])
    assert rc == 0 and bits(out) == "[1 1 1]", out + err
    assert "(version 1.0)" in out
    rc, out, _ = run(capsys, ["--impl", f"{EXAMPLE}:conv2d_fwd", "--operation", "conv2d_bwd_data",
                              "-t", "f16", *ODD, "-pv"])
    assert rc == implementations.EXIT_UNSUPPORTED
    assert "forward direction only" in out


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """A module of user functions: right, off by one in the padding, writing past the
    output, raising."""
    (tmp_path / "my_convs.py").write_text(textwrap.dedent(f"""\
        import importlib.util
        spec = importlib.util.spec_from_file_location("example", {EXAMPLE!r})
        example = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(example)

        def right(request):
            example.conv2d_fwd(request)

        def padding_off_by_one(request):
            p, t = request.problem, request.inputs
            example.launch(p, t["input"], t["filter"], request.out, p.pad_h_l + 1, p.pad_w_l)

        def writes_past_the_end(request):
            example.conv2d_fwd(request)
            out = request.out
            last = out.as_strided((1,), (1,), out.storage_offset() + sum(
                (s - 1) * st for s, st in zip(out.shape, out.stride())))
            past = last.as_strided((1,), (1,), last.storage_offset() + 1)
            past.fill_(1.0)

        def raises(request):
            raise RuntimeError("out of registers")
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    sys.modules.pop("my_convs", None)
    implementations._BUILT.clear()


def test_a_user_function_is_judged_like_any_kernel(capsys, plugins):
    rc, out, _ = run(capsys, ["--impl", "my_convs:right", "-t", "f32", *ODD, *NHWC, "-pv"])
    assert rc == 0 and bits(out) == "[1 1 1]", out
    rc, out, err = run(capsys, ["--impl", "my_convs:padding_off_by_one", "-t", "f32", *ODD, *NHWC,
                                "-pv", "-p_verify", "failure"])
    assert rc == 0 and "0" in bits(out), out
    assert "check excess" in out + err, out + err   # the usual diagnosis: where, by how much
    rc, out, err = run(capsys, ["--impl", "my_convs:writes_past_the_end", "-t", "f32", *ODD,
                                *NHWC, "-pv"])
    assert rc == 0 and "0" in bits(out), out
    assert "outside" in out + err, out + err


def test_a_failing_user_function_is_one_error_line(capsys, plugins):
    rc, out, err = run(capsys, ["--impl", "my_convs:raises", "-t", "f32", *ODD, "-pv"])
    assert rc == 2 and err.strip().splitlines() == [
        "convgen: error: -impl: the my_convs:raises implementation failed: RuntimeError: "
        "out of registers"], err


@pytest.mark.parametrize("spec,words", [
    ("cudnn", "unknown implementation 'cudnn' (built in: convgen, aten, inductor"),
    ("no_such_module:f", "cannot import no_such_module"),
    ("my_convs:missing", "my_convs has no function missing"),
    ("/nowhere/x.py:f", "no file /nowhere/x.py"),
    ("my_convs:", "expected MODULE:FUNCTION or FILE.py:FUNCTION"),
])
def test_a_plug_in_that_cannot_be_loaded_is_one_error_line(capsys, plugins, spec, words):
    rc, out, err = run(capsys, ["--impl", spec, "-t", "f32", *ODD, "-pv"])
    assert rc == 2 and len(err.strip().splitlines()) == 1 and words in err, err
    assert "Traceback" not in out + err


@pytest.mark.parametrize("text,words", [("def f(request:\n", "does not parse"),
                                        ("undefined_name\n", "raised NameError: name 'undefined_name'")])
def test_a_plug_in_file_that_does_not_load_is_one_error_line(capsys, tmp_path, text, words):
    bad = tmp_path / "bad.py"
    bad.write_text(text)
    rc, out, err = run(capsys, ["--impl", f"{bad}:f", "-t", "f32", *ODD, "-pv"])
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


# ---- Inductor ---------------------------------------------------------------------------

def test_inductor_says_what_it_ran(capsys):
    rc, out, err = run(capsys, ["--impl", "inductor", "--operation", "conv2d_bwd_data", "-t", "f32",
                                *ODD, "-pv"])
    assert rc == 0 and bits(out) == "[1 1 1]", out + err
    assert "implementation inductor (torch " in out
    assert "convgen: inductor ran aten's convolution_backward" in out


@pytest.mark.nightly
def test_inductor_forward_compiles_on_the_cpu(capsys):
    # Inductor's CPU lowering compiles C++ (about 20 s on the 2-core machine)
    rc, out, err = run(capsys, ["--impl", "inductor", "-t", "f32", *ODD, *NHWC, "-pv"])
    assert rc == 0 and bits(out) == "[1 1 1]", out + err
    assert "convgen: inductor ran" in out


# ---- under lit: --param impl, UNSUPPORTED with the reason, the expected failures --------

def test_lit_runs_the_suite_s_lines_against_another_implementation(tmp_path):
    suite = make_suite(tmp_path / "s", {
        "fwd.mlir": f"""\
            // RUN: %convgen -t f32 {' '.join(ODD)} -pv | FileCheck %s
            // CHECK: implementation aten
            // CHECK: [1 1 1]
            """,
        "tiles.mlir": f"""\
            // RUN: %convgen -t f16 {' '.join(ODD)} -perf_config block_m=32,block_n=32,block_k=32,num_warps=4 -pv | FileCheck %s
            // CHECK: [1 1 1]
            """,
        "negated.mlir": """\
            // RUN: not %convgen -t i8 -batchsize=1 -in_channels=4 -out_channels=4 -in_h=3 -in_w=3 -fil_h=1 -fil_w=1 -pv | FileCheck %s
            // CHECK: error
            """,
        "only_convgen.mlir": """\
            // REQUIRES: impl-convgen
            // RUN: false
            """})
    rc, out = run_lit("-v", "--param", "impl=aten", suite)
    assert rc == 0, out
    assert "PASS: conv-e2e :: fwd.mlir" in out, out
    for name in ("tiles", "negated", "only_convgen"):
        assert f"UNSUPPORTED: conv-e2e :: {name}.mlir" in out, out
    rc, out = run_lit("-a", "--param", "impl=aten", suite / "tiles.mlir")
    assert "convgen: unsupported: -perf_config sets a tile config" in out, out


def test_the_expected_failures_table_names_real_tests_and_implementations():
    from convgen.lit_format import read_expected_failures
    table = read_expected_failures(str(REPO / "e2e" / "expected-failures.tsv"))
    assert table, "the table lists ATen's CPU f16/bf16 backward failures"
    for test, expressions in table.items():
        assert (REPO / "e2e" / test).is_file(), test
        for expr in expressions:
            assert "impl-" in expr and "torch-" in expr, (test, expr)


def test_a_malformed_expected_failures_line_is_named(tmp_path):
    from convgen.lit_format import read_expected_failures
    path = tmp_path / "x.tsv"
    path.write_text("# fine\nfwd/a.mlir\timpl-aten\n")
    with pytest.raises(ValueError, match=r"x.tsv:2: expected 'test<TAB>features<TAB>why'"):
        read_expected_failures(str(path))

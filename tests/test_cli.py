"""Flag spellings -> RunConfig, and one-line errors for bad input (convgen/cli.py)."""
import os
import re
import subprocess
import sys

import pytest

from convgen import cli, run_flags
from convgen.cli import DEFAULT_PROBLEM, parse
from convgen.errors import ConvgenError
from convgen.tolerance import DEFAULT, Limit

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")

SIZES = "-batchsize 2 -in_channels 4 -out_channels 6 -in_h 9 -in_w 8 -fil_h 3 -fil_w 3".split()

# A whole rocmlir-gen line (the suite's first example), with %pv, %random_data, %xdlops and %rms_threshold substituted.
DESIGN_LINE = ("--operation conv -t f16 -fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk "
               "-batchsize=64 -in_channels=64 -in_h=56 -in_w=56 -out_channels=64 -fil_h=3 "
               "-fil_w=3 --padding_h=1 --padding_w=1 -pv -rand 1 -x2 -RMS_threshold 1e-5").split()


def sizes(**over):
    """SIZES with some flags replaced ({"in_h": "5"}) and others added."""
    args, i = [], 0
    while i < len(SIZES):
        name = SIZES[i][1:]
        args += [SIZES[i], over.pop(name, SIZES[i + 1])]
        i += 2
    for name, val in over.items():
        args += [f"-{name}", val]
    return args


def error(argv) -> str:
    with pytest.raises(ConvgenError) as info:
        parse(argv)
    msg = str(info.value)
    assert "\n" not in msg
    return msg


# ---- spellings ----------------------------------------------------------------

@pytest.mark.parametrize("form", [
    ["-in_h", "7"], ["--in_h", "7"], ["-in_h=7"], ["--in_h=7"],
])
def test_dash_and_equals_forms(form):
    argv = sizes()
    i = argv.index("-in_h")
    argv[i:i + 2] = form
    assert parse(argv).problem.hi == 7


def test_design_example_line():
    c = parse(DESIGN_LINE)
    p = c.problem
    assert (p.direction.name, p.dtype.name) == ("fwd", "f16")
    assert (p.n, p.g, p.c, p.k, p.hi, p.wi, p.y, p.x) == (64, 1, 64, 64, 56, 56, 3, 3)
    assert (p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r) == (1, 1, 1, 1)
    assert (p.ho, p.wo) == (56, 56)
    assert p.layouts == {"filter": "gkyxc", "input": "nhwgc", "output": "nhwgk"}
    assert c.reference.validator == "cpu"
    assert (c.data.mode, c.data.seed) == ("random", 1)
    assert c.kernel.use_matrix_cores is True
    assert c.thresholds.rms == Limit("given", 1e-5) and c.thresholds.abs == DEFAULT
    assert c.argv == tuple(DESIGN_LINE)


def test_defaults_without_optional_flags():
    c = parse(sizes())
    p = c.problem
    assert (p.direction.name, p.dtype.name, p.g) == ("fwd", "f32", 1)
    assert (p.stride_h, p.stride_w, p.dil_h, p.dil_w) == (1, 1, 1, 1)
    assert (p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r) == (0, 0, 0, 0)
    assert p.layouts == {"filter": "gkcyx", "input": "ngchw", "output": "ngkhw"}
    assert c.reference.validator is None  # neither -pv nor -pv_with_gpu: kernel only
    assert c.kernel.use_matrix_cores is False and c.kernel.input_precision == "ieee"
    assert c.report.print_results == "summary"


@pytest.mark.parametrize("op,direction", [
    ("conv2d", "fwd"), ("conv", "fwd"), ("conv2d_bwd_data", "bwd_data"),
    ("conv_bwd_data", "bwd_data"), ("conv2d_bwd_weight", "bwd_weight"),
    ("conv_bwd_weight", "bwd_weight"),
])
def test_operations(op, direction):
    assert parse(sizes() + ["--operation", op]).problem.direction.name == direction


@pytest.mark.parametrize("t,name", [("f32", "f32"), ("fp32", "f32"), ("f16", "f16"),
                                    ("fp16", "f16"), ("bf16", "bf16"), ("i8", "i8"),
                                    ("int8", "i8"), ("fp8", "fp8_e4m3"), ("bf8", "fp8_e5m2"),
                                    ("f8E4M3FN", "fp8_e4m3"), ("fp8_e5m2", "fp8_e5m2"),
                                    ("f8E4M3FNUZ", "fp8_e4m3fnuz"), ("f8E5M2FNUZ", "fp8_e5m2fnuz")])
def test_types(t, name):
    assert parse(sizes() + ["-t", t]).problem.dtype.name == name


@pytest.mark.parametrize("fil,inp,out,want", [
    ("kcyx", "nchw", "nkhw", ("gkcyx", "ngchw", "ngkhw")),
    ("kyxc", "nhwc", "nhwk", ("gkyxc", "nhwgc", "nhwgk")),
    ("yxck", "chwn", "khwn", ("yxcgk", "gchwn", "gkhwn")),
    ("gkcyx", "ngchw", "ngkhw", ("gkcyx", "ngchw", "ngkhw")),
    ("gkyxc", "nhwgc", "nhwgk", ("gkyxc", "nhwgc", "nhwgk")),
    ("KYXC", "NHWC", "NHWK", ("gkyxc", "nhwgc", "nhwgk")),
])
def test_layouts_with_and_without_g(fil, inp, out, want):
    p = parse(sizes(groupsize="2") + [f"-fil_layout={fil}", "-in_layout", inp,
                                      f"--out_layout={out}"]).problem
    assert (p.layouts["filter"], p.layouts["input"], p.layouts["output"]) == want
    assert (p.g, p.c, p.k) == (2, 2, 3)


@pytest.mark.parametrize("fil,inp,out,want", [
    # rocmlir-gen numbers the spatial dimensions: 0 = H (y), 1 = W (x), 2 = D (depth 1 here)
    ("gk01c", "n01gc", "ngk01", ("gkyxc", "nhwgc", "ngkhw")),
    ("kc01", "nc01", "nk01", ("gkcyx", "ngchw", "ngkhw")),
    ("g0kc1", "g0nc1", "01ngk", ("gykcx", "ghncw", "hwngk")),
    ("kc012", "nc012", "nk012", ("gkcyx", "ngchw", "ngkhw")),
    ("k201c", "n201c", "n201k", ("gkyxc", "nhwgc", "nhwgk")),
])
def test_numbered_layouts(fil, inp, out, want):
    p = parse(sizes(groupsize="2") + [f"-fil_layout={fil}", "-in_layout", inp,
                                      f"--out_layout={out}"]).problem
    assert (p.layouts["filter"], p.layouts["input"], p.layouts["output"]) == want


def test_3d_lines():
    """A 3-D line of depth 1 is a 2-D problem (rocMLIR's kc012 regression lines); a deeper
    one is 3-D, its layouts naming the depth (digit 2, or MIOpen's D)."""
    p = parse(sizes() + "-fil_layout=gkc012 -in_layout=ngc012 -out_layout=ngk012 -in_d 1 "
              "-fil_d 1 --padding_d 0 --conv_stride_d 1 --dilation_d 1".split()).problem
    assert (p.hi, p.y, p.layouts["input"], p.is_3d) == (9, 3, "ngchw", False)
    q = parse(sizes() + "-fil_layout=gkc012 -in_layout=ngc012 -out_layout=ngk012 -in_d 5 "
              "-fil_d 2 --padding_d_l 1 --padding_d_r 0 --conv_stride_d 2 --dilation_d 1".split()).problem
    assert q.is_3d and (q.di, q.z, q.stride_d, q.pad_d_l, q.pad_d_r, q.do) == (5, 2, 2, 1, 0, 3)
    # digit 2 is the depth, so ngc012 keeps it innermost (MIOpen's NCDHW is rocmlir-gen's nc201)
    assert q.layouts == {"filter": "gkcyxz", "input": "ngchwd", "output": "ngkhwd"}
    assert q.logical_shape("output") == (2, 1, 6, 3, q.ho, q.wo)
    assert "needs a depth dimension in the input layout" in error(sizes() + ["-in_d", "4"])
    assert "-out_d 2 disagrees with the computed output depth 3" in error(
        sizes() + "-fil_layout=kc012 -in_layout=nc012 -out_layout=nk012 -in_d 3 -out_d 2".split())
    # MIOpenDriver: -_ 3 (its defaults: depth 32, filter depth 3) with NCDHW / NDHWC layouts
    m = parse(["conv"] + MIOPEN + "-_ 3 -! 6 -@ 3 -$ 1 -# 1 -^ 1 -I NCDHW -f NCDHW -O NDHWC".split()).problem
    assert m.is_3d and m.layouts == {"filter": "gkczyx", "input": "ngcdhw", "output": "ndhwgk"}
    assert (m.di, m.z, m.do) == (6, 3, 6)
    flat = parse(["conv"] + MIOPEN + "-_ 3 -! 1 -@ 1 -I NCDHW -f NCDHW -O NCDHW".split()).problem
    assert not flat.is_3d and flat.layouts["input"] == "ngchw"
    # its 2-D lines carry depth flags of 0, which count for nothing there
    assert not parse(["conv"] + MIOPEN + "--spatial_dim 2 --in_d 1 --conv_stride_d 0 --dilation_d 0".split()).problem.is_3d
    assert parse(["conv"] + MIOPEN + ["-_", "3", "-I", "NCDHW", "-f", "NCDHW", "-O", "NCDHW"]).problem.di == 32


def test_group_spellings():
    assert parse(sizes(g="2")).problem.g == 2
    assert parse(sizes(groupsize="2")).problem.g == 2


def test_geometry_flags():
    p = parse(sizes(in_h="20", in_w="21") + "-conv_stride_h 2 -conv_stride_w 3 "
              "-dilation_h 2 -dilation_w 1 -padding_h 1 -padding_w 2".split()).problem
    assert (p.stride_h, p.stride_w, p.dil_h, p.dil_w) == (2, 3, 2, 1)
    assert (p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r) == (1, 1, 2, 2)
    assert (p.ho, p.wo) == ((20 + 2 - 4 - 1) // 2 + 1, (21 + 4 - 2 - 1) // 3 + 1)


def test_asymmetric_padding_overrides_symmetric_side():
    p = parse(sizes() + "-padding_h 2 -padding_h_l 1 -padding_w_l 3 -padding_w_r 0".split()).problem
    assert (p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r) == (1, 2, 3, 0)
    assert p.ho == 9 + 1 + 2 - 3 + 1 and p.wo == 8 + 3 + 0 - 3 + 1


def test_out_h_out_w_checked():
    c = parse(sizes() + ["-out_h", "7", "-out_w=6"])
    assert (c.problem.ho, c.problem.wo) == (7, 6)
    msg = error(sizes() + ["-out_h", "8"])
    assert "-out_h 8" in msg and "7" in msg


def test_p_default_problem_and_overrides():
    p = parse(["-p"]).problem
    d = DEFAULT_PROBLEM
    assert (p.n, p.g, p.c, p.k, p.hi, p.wi, p.y, p.x) == (
        d["n"], d["g"], d["c"], d["k"], d["hi"], d["wi"], d["y"], d["x"])
    assert (p.n, p.c, p.k, p.hi, p.wi, p.y, p.x) == (128, 8, 128, 32, 32, 3, 3)
    assert (p.dtype.name, p.direction.name, p.ho) == ("f32", "fwd", 30)
    assert p.layouts == {"filter": "gkcyx", "input": "ngchw", "output": "ngkhw"}
    # The fp16 study's line: -p with layouts and a type; explicit flags win over -p.
    q = parse("-fil_layout=kyxc -in_layout=nhwc -out_layout=nhwk -p -t f16 -batchsize 4 "
              "--rand_type float -RMS 1e-5 -maxRelDiff 1e-3".split())
    assert (q.problem.n, q.problem.c, q.problem.dtype.name) == (4, 8, "f16")
    assert q.data.rand_type == "float" and q.thresholds.rel == Limit("given", 1e-3)
    assert parse(["-p=true"]).problem.n == 128
    assert parse(["-p", "1"]).problem.n == 128


def test_p_false_needs_sizes():
    assert parse(sizes() + ["-p=false"]).problem.n == 2
    assert error(["-p=false"]).startswith("missing -batchsize, -in_channels")
    msg = error([a for a in sizes() if a not in ("-in_channels", "4")])
    assert msg.startswith("missing -in_channels")
    assert "-batchsize" not in msg


def test_data_flags():
    c = parse(sizes() + "-rand 7 -rand_min=-3 -rand_max -1 -rand_type int -rand_side filter".split())
    d = c.data
    assert (d.mode, d.seed, d.lo, d.hi, d.rand_type, d.side) == ("random", 7, -3.0, -1.0, "int", "filter")
    assert parse(sizes() + ["-rand", "fixed"]).data.mode == "fixed"
    assert parse(sizes() + ["-rand=none"]).data.mode == "none"


def test_range_away_from_zero_has_both_signs():
    from convgen.inputs import make_inputs
    c = parse(sizes() + "-t f16 -rand 3 -rand_min 1 -rand_max 3 -rand_both_signs".split())
    assert c.data.both_signs
    for name, t in make_inputs(c.problem, c.data, "cpu").items():
        x = t.double().flatten()
        assert ((x.abs() >= 1) & (x.abs() <= 3)).all(), name
        assert (x < 0).any() and (x > 0).any(), name


def test_both_signs_needs_a_magnitude_range():
    assert error(sizes() + "-rand_min -1 -rand_max 3 -rand_both_signs".split()) == (
        "-rand_both_signs: both signs need a magnitude range (minimum >= 0), got minimum -1")


def test_rand_zero_resolves_a_seed():
    d = parse(sizes() + ["-rand", "0"]).data
    assert d.mode == "random" and d.seed > 0


@pytest.mark.parametrize("flags,want", [
    (["-x2"], True), (["-x2=0"], False), (["-x2=1"], True), (["-x2", "1"], True),
    (["-x2", "0"], False), (["--x2", "1"], True), (["-x2=off"], False), (["-x2=true"], True),
    (["-mfma", "on"], True), (["-mfma=off"], False), (["-x2", "-mfma", "off"], False),
    ([], False),
])
def test_matrix_core_switches(flags, want):
    assert parse(sizes() + flags).kernel.use_matrix_cores is want


def test_x2_followed_by_a_flag_is_bare():
    c = parse(["-x2", "-pv"] + sizes())
    assert c.kernel.use_matrix_cores and c.reference.validator == "cpu"


def test_kernel_reference_threshold_report_flags():
    c = parse(sizes() + ["-perf_config", "block_m=16,block_n=32,block_k=16,num_warps=8,num_stages=2,"
                         "split=1,waves_per_eu=1,matrix_instr_nonkdim=16,kpack=1", "-input_precision", "tf32",
                         "-flush_subnormals", "-pv_with_gpu", "-ref_accumulate", "4",
                         "-ref_flush_subnormals=1", "-absDiff_threshold", "auto",
                         "-relDiff_threshold=0.5", "-maxAbsDiff", "1000",
                         "-print-verify-results", "always", "--dump", "/tmp/d",
                         "--json=/tmp/r.json"])
    k, r, t, rep = c.kernel, c.reference, c.thresholds, c.report
    assert dict(k.perf_config) == {"block_m": 16, "block_n": 32, "block_k": 16, "num_warps": 8,
                                   "num_stages": 2, "split": 1, "waves_per_eu": 1,
                                   "matrix_instr_nonkdim": 16, "kpack": 1}
    assert k.input_precision == "tf32" and k.flush_subnormals
    assert (r.validator, r.accumulate, r.flush_subnormals) == ("gpu", 4, True)
    assert (t.rms, t.abs, t.rel) == (DEFAULT, Limit("given", 1000.0), Limit("given", 0.5))  # -maxAbsDiff came last
    assert (rep.print_results, rep.dump_dir, rep.json_path) == ("always", "/tmp/d", "/tmp/r.json")
    assert parse(sizes() + ["-print_verify_results=failure"]).report.print_results == "failure"


def test_last_validator_wins():
    assert parse(sizes() + ["-pv_with_gpu", "-pv"]).reference.validator == "cpu"
    assert parse(sizes() + ["-pv", "-pv_with_gpu"]).reference.validator == "gpu"
    assert parse(sizes() + ["-pv", "-pv=false"]).reference.validator is None


def test_repeated_flag_last_wins():
    assert parse(sizes() + ["-in_h", "5", "-in_h=6"]).problem.hi == 6


def test_ignored_rocmlir_flags():
    c = parse(sizes() + "-arch gfx90a --arch=gfx942 -num_cu 120 -kernel_name k -c -ph "
              "-fut conv --in_type f16 --fil_type f16 --out_type f16 -t f16".split())
    assert c.problem.dtype.name == "f16"
    c = parse(sizes() + "-t i8 --in_type i8 --fil_type i8 --out_type i32".split())
    assert c.problem.dtype.name == "i8"
    # Without -t, --in_type gives the type.
    assert parse(sizes() + ["--in_type", "bf16"]).problem.dtype.name == "bf16"
    assert "disagrees" in error(sizes() + "-t f16 --out_type f32".split())
    assert "disagrees" in error(sizes() + "-t f32 --in_type f16".split())


# ---- MIOpenDriver lines -----------------------------------------------------------

MIOPEN = "-n 2 -c 4 -H 9 -W 8 -k 6 -y 3 -x 3 -p 1 -q 0 -u 2 -v 1 -l 1 -j 2 -g 2".split()


@pytest.mark.parametrize("forw,direction", [("1", "fwd"), ("2", "bwd_data"), ("4", "bwd_weight"),
                                            ("0", "fwd"), (None, "fwd")])
def test_miopen_directions(forw, direction):
    argv = ["conv"] + MIOPEN + ([] if forw is None else ["-F", forw])
    c = parse(argv)
    p = c.problem
    assert p.direction.name == direction and p.dtype.name == "f32"
    assert (p.n, p.g, p.c, p.k, p.hi, p.wi, p.y, p.x) == (2, 2, 2, 3, 9, 8, 3, 3)
    assert (p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r) == (1, 1, 0, 0)
    assert (p.stride_h, p.stride_w, p.dil_h, p.dil_w) == (2, 1, 1, 2)
    assert p.layouts == {"filter": "gkcyx", "input": "ngchw", "output": "ngkhw"}
    assert c.reference.validator == "cpu"
    assert c.argv[0] == "conv"


@pytest.mark.parametrize("cmd,name", [("convfp16", "f16"), ("convbfp16", "bf16"),
                                      ("convint8", "i8")])
def test_miopen_types(cmd, name):
    assert parse([cmd] + MIOPEN + ["-F", "1"]).problem.dtype.name == name


def test_miopen_layouts_and_own_flags():
    c = parse(["convfp16"] + MIOPEN + "-F 4 -f NHWC -I NHWC -O NHWC -t 1 -V 0 -i 10 -s 0 "
              "-rand 3 -RMS_threshold 1e-5 -pv_with_gpu -x2 --print-verify-results=off".split())
    p = c.problem
    assert p.layouts == {"filter": "gkyxc", "input": "nhwgc", "output": "nhwgk"}
    assert c.data.seed == 3 and c.thresholds.rms == Limit("given", 1e-5)
    assert c.reference.validator == "gpu" and c.kernel.use_matrix_cores
    assert c.report.print_results == "off"
    # Long MIOpen names, and MIOpen's defaults for sizes left out.
    q = parse("conv --forw 2 --batchsize 3 --in_layout NHWC".split()).problem
    assert (q.direction.name, q.n, q.c, q.k, q.hi, q.y) == ("bwd_data", 3, 3, 32, 32, 3)
    assert q.layouts["input"] == "nhwgc" and q.layouts["filter"] == "gkcyx"


def test_miopen_refuses_what_it_cannot_do():
    assert "transposed" in error(["conv"] + MIOPEN + ["-m", "trans"])
    assert "-F" in error(["conv"] + MIOPEN + ["-F", "3"])
    assert "-I" in error(["conv"] + MIOPEN + ["-I", "NCQW"])
    assert parse(["conv"] + MIOPEN + "-f N01GC -I 01NGC -O NGC01".split()).problem.layouts == {
        "filter": "kyxgc", "input": "hwngc", "output": "ngkhw"}   # rocMLIR's numbered lists
    assert "'0' for -c" in error(["conv", "-c", "0"])
    assert "'-p' is missing its value" in error(["conv", "-p"])  # -p is padding here


# ---- errors: one line naming the problem --------------------------------------------

BAD = {
    "unknown flag": (sizes() + ["-foo", "1"], "unknown flag '-foo'"),
    "unknown double-dash flag": (sizes() + ["--foo=1"], "unknown flag '--foo'"),
    "missing value at end": (sizes() + ["-in_h"], "'-in_h' is missing its value"),
    "missing value before a flag": (["-in_h", "-fil_h", "3"] + sizes()[6:],
                                    "'-in_h' is missing its value"),
    "non-integer size": (sizes(in_channels="abc"), "'abc' for -in_channels"),
    "fractional size": (sizes(in_w="1.5"), "'1.5' for -in_w"),
    "unknown layout letter": (sizes() + ["-fil_layout", "kcyq"], "unknown letter 'q'"),
    "repeated layout letter": (sizes() + ["-in_layout=nchh"], "repeats letter 'h'"),
    "channels not divisible": (sizes(g="4"), "not divisible by group count 4"),
    "non-positive size": (sizes() + ["-batchsize=0"], "'0' for -batchsize"),
    "negative padding": (sizes() + ["-padding_h", "-1"], "'-1' for -padding_h"),
    "empty output": (sizes(fil_h="12"), "empty output"),
    "i8 with bwd": (sizes() + ["-t", "i8", "--operation", "conv2d_bwd_data"],
                    "forward convolution only"),
    "rand_min > rand_max": (sizes() + ["-rand_min", "3", "-rand_max=1"],
                            "-rand_min 3 is larger than -rand_max 1"),
    "bad -F": (["conv"] + MIOPEN + ["-F", "8"], "'8' for -F"),
    "unknown type": (sizes() + ["-t", "f64"], "'f64' for -t"),
    "bad operation": (sizes() + ["--operation", "gemm"], "'gemm' for --operation"),
    "bad threshold": (sizes() + ["-RMS_threshold", "-1"], "for -RMS_threshold"),
    "bad rand": (sizes() + ["-rand", "-2"], "for -rand"),
    "bad rand_side": (sizes() + ["-rand_side", "output"], "not an input of fwd"),
    "bad boolean": (sizes() + ["-x2=maybe"], "'maybe' for -x2"),
    "bad mfma": (sizes() + ["-mfma", "maybe"], "'maybe' for -mfma"),
    "stray word": (sizes() + ["extra"], "unexpected argument 'extra'"),
    "zero ref_accumulate": (sizes() + ["-ref_accumulate", "0"], "for -ref_accumulate"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(case):
    argv, want = BAD[case]
    assert want in error(argv)


def test_main_returns_2_without_running(capsys, monkeypatch):
    import convgen.driver as driver
    monkeypatch.setattr(driver, "run", lambda config, program: pytest.fail("driver ran"))
    assert cli.main(sizes() + ["-foo"]) == 2
    err = capsys.readouterr().err
    assert err == "convgen: error: unknown flag '-foo'\n"


def test_main_catches_driver_errors_and_interrupts(capsys, monkeypatch):
    import convgen.driver as driver

    def boom(config):
        raise ConvgenError("no device\nsecond line")
    monkeypatch.setattr(driver, "run", lambda config, program: boom(config))
    assert cli.main(sizes()) == 2
    assert capsys.readouterr().err == "convgen: error: no device second line\n"

    def interrupt(config):
        raise KeyboardInterrupt
    monkeypatch.setattr(driver, "run", lambda config, program: interrupt(config))
    assert cli.main(sizes()) == 130

    seen = []
    monkeypatch.setattr(driver, "run", lambda config, program: seen.append(config) or 0)
    assert cli.main(sizes()) == 0 and seen[0].problem.hi == 9


def test_help(capsys):
    assert cli.main(["--help"]) == 0
    assert "-in_channels" in capsys.readouterr().out


SUBPROCESS_CASES = ["unknown flag", "non-integer size", "bad -F"]


@pytest.fixture(scope="module")
def subprocess_results():
    """`python -m convgen` on each case, all started at once (each imports torch: ~2 s)."""
    env = dict(os.environ, PYTHONPATH=TOOLS)
    procs = {case: subprocess.Popen([sys.executable, "-m", "convgen", *BAD[case][0]], env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for case in SUBPROCESS_CASES}
    results = {}
    for case, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        results[case] = (proc.returncode, out, err)
    return results


@pytest.mark.parametrize("case", SUBPROCESS_CASES)
def test_python_m_convgen_errors(case, subprocess_results):
    rc, out, err = subprocess_results[case]
    assert rc == 2, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("convgen: error:"), err
    assert BAD[case][1] in lines[0]
    assert "Traceback" not in err and out == ""


@pytest.mark.parametrize("backend,t,want", [
    (("cuda", "sm80", 32), "fp8", "-t: fp8_e4m3 needs an NVIDIA GPU of sm89 or newer, this one is sm80"),
    (("cuda", "sm90", 32), "f8E5M2FNUZ", "-t: fp8_e5m2fnuz (AMD's fnuz fp8) is not supported on NVIDIA GPUs (sm90)"),
    (("hip", "gfx1100", 32), "bf8", "-t: fp8_e5m2 is not supported on gfx1100"),
])
def test_fp8_refused_cleanly_where_the_device_has_none(capsys, monkeypatch, backend, t, want):
    """The type is known, the device cannot run it: one line, exit 2, before any kernel or output."""
    import convgen.backend as be
    import convgen.driver as driver
    monkeypatch.setattr(be, "ensure_interpreter_if_no_gpu", lambda: None)
    monkeypatch.setattr(be, "current", lambda: be.Backend(*backend))
    import convgen.inputs as inputs
    monkeypatch.setattr(inputs, "make_inputs", lambda *a: pytest.fail("inputs were made"))
    assert driver.backends is be
    assert cli.main(sizes() + ["-t", t, "-pv"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.startswith("convgen: error: ") and want in cap.err
    assert cap.err.count("\n") == 1


def test_fp8_output_type_is_f32():
    assert parse(sizes() + ["-t", "fp8", "--out_type", "f32"]).problem.dtype.name == "fp8_e4m3"
    assert "disagrees with -t fp8_e4m3" in error(sizes() + ["-t", "fp8", "--out_type", "f16"])
    assert "disagrees with -t f16" in error(sizes() + ["-t", "f16", "--out_type", "f32"])


@pytest.mark.parametrize("t,top", [("fp8_e4m3", "448"), ("fp8_e4m3fnuz", "240"), ("f16", "65504")])
def test_random_range_must_fit_the_type(t, top):
    """fp8 would saturate (e4m3fn), turn into NaN (fnuz) or infinity (e5m2): refused up front."""
    from convgen.inputs import DataSpec, validate
    p = parse(sizes() + ["-t", t]).problem
    with pytest.raises(ConvgenError, match=f"does not fit in {t} .largest finite value {top}"):
        validate(DataSpec(lo=-1000.0, hi=70000.0), p)
    validate(DataSpec(lo=-3.0, hi=3.0), p)


def test_only_the_cli_spells_flags():
    """Every string a module outside cli.py builds (docstrings and comments aside) is free of
    convgen's flag spellings: messages name options by field, the CLI adds the flag."""
    import ast
    from pathlib import Path
    names = set()
    for table in (run_flags.ROCMLIR_FLAGS, run_flags.MIOPEN_FLAGS, run_flags.COMPARE_FLAGS):
        names |= {n for f in table.flags for n in f.names if len(n) > 1 and n.isidentifier()}
    flag = re.compile(r"(?:^|[\s(/'\"])--?(%s)\b" % "|".join(sorted(names, key=len, reverse=True)))
    offenders = []
    for path in sorted(Path(TOOLS, "convgen").rglob("*.py")):
        # the command lines of lit and split-test
        if path.name in ("cli.py", "run_flags.py", "run_lit.py", "split_test.py"):
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                m = flag.search(node.value)
                if m:
                    offenders.append(f"{path.name}:{node.lineno}: {node.value.strip()[:60]}")
    assert not offenders, offenders

"""benchmarks/bench_conv.py without a GPU: its vendor closures compute our convolution (aten on
the CPU against convgen's float64 reference), on our memory, and its summary is right."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from convgen.dtypes import elem_type
from convgen.inputs import make_inputs
from convgen.options import DataSpec
from convgen.problem import make_problem
from convgen.reference import reference

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_conv.py"
_spec = importlib.util.spec_from_file_location("bench_conv", BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

NHWC = bench.NHWC
NCHW = {"filter": "kcyx", "input": "nchw", "output": "nkhw"}
# (what it covers, make_problem's size arguments)
PROBLEMS = [
    ("3x3 stride 2 pad 1 groups 2", dict(n=2, g=2, c_total=6, k_total=4, hi=9, wi=8, y=3, x=3,
                                         stride=(2, 2), pad=(1, 1, 1, 1))),
    ("1x1 stride 2", dict(n=2, g=1, c_total=8, k_total=6, hi=8, wi=7, y=1, x=1, stride=(2, 2))),
    ("7x7 stride 2 pad 3, 3 channels", dict(n=1, g=1, c_total=3, k_total=4, hi=12, wi=12,
                                            y=7, x=7, stride=(2, 2), pad=(3, 3, 3, 3))),
    ("dilation 2, rectangular, groups 2", dict(n=2, g=2, c_total=4, k_total=6, hi=9, wi=10,
                                               y=3, x=2, dilation=(2, 2), pad=(2, 2, 1, 1))),
    # the right pad adds a row no output reads: the same convolution as pad 1 on both sides
    ("asymmetric pad aten can express", dict(n=2, g=1, c_total=4, k_total=4, hi=8, wi=8, y=3, x=3,
                                             stride=(2, 2), pad=(1, 0, 1, 0))),
]


def _problem(direction, sizes, layouts=NHWC):
    return make_problem(direction=direction, dtype=elem_type("f32"), layouts=layouts, **sizes)


@pytest.mark.parametrize("layouts", [NHWC, NCHW], ids=["nhwc", "nchw"])
@pytest.mark.parametrize("sizes", [s for _, s in PROBLEMS], ids=[n for n, _ in PROBLEMS])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_vendor_op_computes_our_convolution(direction, sizes, layouts):
    p = _problem(direction, sizes, layouts)
    t = make_inputs(p, DataSpec(seed=1), "cpu")
    got = bench.vendor_op(p, t)().reshape(p.logical_shape(p.writes)).double()
    want = reference(p, t)
    assert (got - want).abs().max().item() <= 1e-5 * want.abs().max().item()


@pytest.mark.parametrize("sizes", [s for _, s in PROBLEMS], ids=[n for n, _ in PROBLEMS])
def test_nhwc_tensors_reach_aten_as_views_of_our_memory(sizes):
    p = _problem("fwd", sizes)
    t = make_inputs(p, DataSpec(seed=1), "cpu")
    for name, shape in (("input", (p.n, p.g * p.c, p.hi, p.wi)),
                        ("filter", (p.g * p.k, p.c, p.y, p.x))):
        v = bench.nchw(t[name], shape)
        assert v.data_ptr() == t[name].data_ptr(), name
        assert v.is_contiguous(memory_format=torch.channels_last), name


def test_padding_aten_cannot_express_is_refused():
    p = _problem("fwd", dict(n=1, g=1, c_total=2, k_total=2, hi=8, wi=8, y=3, x=3, pad=(1, 2, 1, 1)))
    with pytest.raises(ValueError, match="both sides alike"):
        bench.vendor_op(p, make_inputs(p, DataSpec(seed=1), "cpu"))


def _row(direction, dtype, layer, ratio):
    return {"direction": direction, "dtype": dtype, "layer": layer, "ratio": ratio}


def test_summary_geomeans_lowest_and_errors():
    rows = [_row("fwd", "f16", "a", 2.0), _row("fwd", "f16", "b", 0.5), _row("fwd", "bf16", "a", 4.0),
            _row("bwd_data", "f16", "a", 0.25),
            {"direction": "bwd_data", "dtype": "f16", "layer": "b", "error": "out of shared memory"}]
    s = bench.summarize(rows)
    assert s["geomean"]["fwd"] == pytest.approx(4 ** (1 / 3))
    assert s["geomean"]["bwd_data"] == pytest.approx(0.25)
    assert s["geomean_by_type"]["fwd"] == pytest.approx({"f16": 1.0, "bf16": 4.0})
    assert s["lowest"]["fwd"] == {"ratio": 0.5, "layer": "b", "dtype": "f16"}
    assert s["errors"] == 1 and set(s["geomean"]) == {"fwd", "bwd_data"}


def test_layer_sets_and_names():
    assert len(bench.LAYER_SETS["issue"]) == 7
    assert len(bench.LAYER_SETS["all"]) == len(set(bench.LAYER_SETS["issue"] + bench.LAYER_SETS["resnet50"]))
    assert [bench.layer_label(layer) for layer, _ in bench.LAYER_SETS["issue"]] == [
        "1x1 64->64 56x56", "3x3 64->64 56x56", "1x1 s2 256->128 56x56", "3x3 128->128 28x28",
        "3x3 256->256 14x14", "7x7 s2 3->64 224x224", "1x1 s2 1024->2048 14x14"]


def test_peak_is_looked_up_by_device_name():
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3", "bf16") == 989.4
    assert bench.peak_tflops("NVIDIA H200", "f32") == 66.9
    assert bench.peak_tflops("NVIDIA H200 NVL", "f16") is None
    assert bench.peak_tflops("NVIDIA GeForce RTX 4090", "f16") is None
    assert bench.peak_tflops("AMD Instinct MI300X", "f16") == 1307.4


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without a GPU gets")
def test_without_a_gpu_it_says_so_and_exits_2():
    r = subprocess.run([sys.executable, str(BENCH), "--quick"], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (2, "", "bench_conv: needs a GPU\n")


def test_our_config_is_the_one_convgen_selects_model_first_rule_on_request():
    """The benchmark once asked select() with the selector off and so timed the rule's
    config where convgen ran the model's pick: its rows must come from the same call."""
    from convgen.kernels.config import choose
    from convgen.picks import MODEL_SOURCE, select
    from convtune.dataset import offline_backend
    be = offline_backend("sm90", "NVIDIA H100 80GB HBM3")
    # a layer no table has: no tuned entry in any database
    p = make_problem(direction="fwd", dtype=elem_type("f16"), n=3, g=1, c_total=40, k_total=72,
                     hi=13, wi=11, y=3, x=3, stride=(1, 1), pad=(1, 1, 1, 1), layouts=NHWC)
    cfg, source = bench.our_config(p, be, True, None)
    assert source.startswith(MODEL_SOURCE), source
    assert (cfg, source) == select(p, be, True, None, None, "")
    rule, source = bench.our_config(p, be, True, None, None)
    assert source.startswith("default rule") and rule == choose(p, be, True, None)
    assert cfg != rule   # else the check above could not tell them apart


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_graph_timing_captures_both_sides_and_still_checks_the_result(direction):
    """--timing graph: ours and cuDNN's calls each replayed as one CUDA graph (a side that
    cannot be captured would say "per launch: why"), and the row still compares the two
    results. 3x3 of 16->32 channels on 9x9 at batch 2, the config convgen would select."""
    from convgen.backend import current
    be = current()
    row = bench.bench_one((16, 32, 9, 3, 1, 1, 1), direction, "f16", 2, True, be,
                          torch.cuda.get_device_name(), graph=True)
    assert "error" not in row, row
    assert row["timing"] == {"ours": "cuda graph", "vendor": "cuda graph"}, row["timing"]
    assert row["our_ms"] > 0 and row["vendor_ms"] > 0
    assert row["max_rel_diff"] < 1e-2, row


def _listed_shapes() -> set:
    """(c, k, hw, f, stride, pad, g) of every problem of the tuning lists (tuning/*.lines)."""
    import re
    shapes = set()
    for path in (Path(__file__).resolve().parents[1] / "tuning").glob("*.lines"):
        for line in path.read_text().splitlines():
            f = dict(re.findall(r"-(\w+)=(\S+)", line))
            if "in_channels" in f:
                shapes.add(tuple(int(f.get(name, default)) for name, default in (
                    ("in_channels", 0), ("out_channels", 0), ("in_h", 0), ("fil_h", 0),
                    ("conv_stride_h", 1), ("padding_h", 0), ("groupsize", 1))))
    return shapes


def test_the_untuned_set_is_outside_the_catalogue_and_the_tuning_lists():
    models = bench._MODELS
    catalogue = {tuple(layer[:7]) for layers in models.NETWORKS.values() for layer in layers}
    listed = _listed_shapes()
    assert listed, "no tuning list read"
    networks = {net for net, _, _ in models.UNTUNED}
    assert len(models.UNTUNED) >= 20 and len(networks) >= 4
    assert not networks & set(models.NETWORKS)
    for net, layer, batch in models.UNTUNED:
        assert tuple(layer) not in catalogue, (net, layer)
        assert tuple(layer) not in listed, (net, layer)
    batches = {batch for _, _, batch in models.UNTUNED}
    assert min(batches) == 1 and max(batches) == 256
    assert any(layer[6] > 1 and layer[6] == layer[0] for _, layer, _ in models.UNTUNED)
    # every layer is a problem convgen accepts, at its own batch
    for _, (c, k, hw, f, s, pad, g), batch in models.UNTUNED + models.DEPTHWISE_BENCH:
        make_problem(direction="fwd", dtype=elem_type("f16"), n=batch, g=g, c_total=c,
                     k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s), pad=(pad,) * 4,
                     layouts=NHWC)
    assert all(batch for _, batch in bench.LAYER_SETS["untuned"])


def test_bandwidth_counts_each_tensor_once():
    p = make_problem(direction="bwd_weight", dtype=elem_type("f16"), n=2, g=6, c_total=6,
                     k_total=12, hi=5, wi=7, y=3, x=3, stride=(2, 2), pad=(1, 1, 1, 1))
    # input 2*6*5*7, filter 12*1*3*3, output 2*12*3*4, two bytes each
    assert bench.tensor_bytes(p) == 2 * (420 + 108 + 288)
    assert bench.layer_label((144, 144, 56, 3, 2, 1, 144)) == "3x3 s2 dw 144->144 56x56"

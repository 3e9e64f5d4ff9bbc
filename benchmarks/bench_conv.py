"""Time our Triton conv kernels against the vendor library (cuDNN; MIOpen on ROCm), side by side.

Usage:

    python benchmarks/bench_conv.py [--layers issue|resnet50|untuned|depthwise|all] [--types f16,bf16]
        [--directions fwd,bwd_data,bwd_weight] [--batch 256] [--path dot|fma] [--quick]
        [--tuning-db [PATH]] [--selector MODEL|none] [--timing graph|launch] [--json out.json]

One row per direction x type x layer, NHWC input and output, KYXC filter, inputs drawn
with seed 1. `untuned` is 25 layers of five networks outside the layer catalogue, never
tuned on (convtune.models.UNTUNED), `depthwise` MobileNetV2's and ConvNeXt-T's depthwise
layers (DEPTHWISE_BENCH); each of their layers has its own batch, which `--batch` does not
change. Ours: the kernel and config convgen selects (picks.select): with
`--tuning-db [PATH]`, that database's (no PATH: the local store of tuning/data) best for
the problem when it has one; else the
selector model's pick (the shipped tuning/models/ARCH.json, or `--selector MODEL`); else,
or with `--selector none`, the rule. Each row says which (`config_source`). The vendor's:
torch.ops.aten.convolution (fwd) and
torch.ops.aten.convolution_backward with one output asked for (bwd_data, bwd_weight), on
the same memory, with cudnn.benchmark on and tf32 off. Both are timed in this process, in
three alternating rounds of triton.testing.do_bench (its median), each side's time the
median of its rounds; by default each side's launches as one CUDA graph's replay
(convgen tune's timer: a launch's Python cost stays out, which for kernels of tens of
microseconds is not small and made split-K rows up to 1.6x slow from one run to the
next), or with `--timing launch` each call's launches as Python issues them, which is
what an eager caller sees; each row's `timing` says how each side was timed).
ratio = vendor ms / our ms:
above 1, ours is faster. Each row also gives each side's share of the GPU's memory
bandwidth (gpus.DEVICES): the bytes a convolution must move, its three tensors each read or
written once, over its time and the peak; the measure for memory-bound layers (depthwise).
`--quick` keeps the first three layers and the first type.
Prints a table and the geomeans; `--json` writes them with every row. Needs a GPU: without
one it says so on one line and exits 2. docs/conv-benchmark.md: the method and the last
measurement.
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import shlex
import sys



def _tools() -> str:
    """--tools DIR times the kernels of another source tree (an A/B of a kernel change, e.g.
    the commit before it); read before convgen is imported."""
    if "--tools" in sys.argv[:-1]:
        return os.path.abspath(sys.argv[sys.argv.index("--tools") + 1])
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools")


sys.path.insert(0, _tools())

import torch  # noqa: E402
import triton  # noqa: E402

from convgen.backend import current  # noqa: E402
from convgen.dtypes import elem_type  # noqa: E402
from convgen.inputs import make_inputs  # noqa: E402
try:   # the guard bands' own module (older trees: convgen.inputs)
    from convgen.guards import empty_output  # noqa: E402
except ImportError:
    from convgen.inputs import empty_output  # noqa: E402
from convgen.kernels.config import choose  # noqa: E402
try:   # the pick's one place (older trees: kernels/config.py; before the database, none)
    from convgen.picks import MODEL_SOURCE, select  # noqa: E402
except ImportError:
    try:
        from convgen.kernels.config import select  # noqa: E402
    except ImportError:
        select = None
    MODEL_SOURCE = "selected by model"
try:   # the graph timer (older trees: convgen.tune; before it, none)
    from convtune.tune import graph_replay  # noqa: E402
except ImportError:
    try:
        from convgen.tune import graph_replay  # noqa: E402
    except ImportError:
        graph_replay = None
from convgen.kernels.launch import run_conv  # noqa: E402
try:   # trees before the descriptor kernels build a launch's arguments on every call
    from convgen.kernels.launch import prepare  # noqa: E402
except ImportError:
    prepare = None
try:   # older trees keep these elsewhere or lack them
    from convgen.options import DataSpec  # noqa: E402
    from convgen.kernels.launch import triton_failure  # noqa: E402
except ImportError:
    from convgen.inputs import DataSpec  # noqa: E402

    def triton_failure(e):
        return None


def _models():
    """This tree's layer lists (models.py), whichever tree's kernels are timed."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "convtune", "models.py")
    spec = importlib.util.spec_from_file_location("bench_models", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_MODELS = _models()
CONV_BENCH_LAYERS, RESNET50 = _MODELS.CONV_BENCH_LAYERS, _MODELS.RESNET50
from convgen.problem import make_problem  # noqa: E402

NHWC = {"filter": "kyxc", "input": "nhwc", "output": "nhwk"}
# name -> [(layer, batch)]: None takes --batch
LAYER_SETS = {"issue": [(layer, None) for layer in CONV_BENCH_LAYERS],
              "resnet50": [(layer, None) for layer in RESNET50],
              "all": [(layer, None) for layer in dict.fromkeys(CONV_BENCH_LAYERS + RESNET50)],
              "untuned": [(layer, batch) for _, layer, batch in _MODELS.UNTUNED],
              "depthwise": [(layer, batch) for _, layer, batch in _MODELS.DEPTHWISE_BENCH]}
# Types aten convolves on a GPU in the type itself (no int8 or fp8 convolution there)
VENDOR_TYPES = ("f16", "bf16", "f32")

# Dense peak TFLOPS from the vendors' datasheets, by the precision the products are made in:
# f32 rows run IEEE on both sides (tf32 off), so their peak is the non-tensor f32 one; tf32
# is listed for reading their distance to it. The first name that is a substring of
# torch.cuda.get_device_name() wins: a part sold with lower clocks goes before its family's
# name, with no figures (its % stays empty rather than wrong).
PEAK_TFLOPS = [
    ("H100 80GB HBM3", {"f16": 989.4, "bf16": 989.4, "tf32": 494.7, "f32": 66.9}),  # H100 SXM
    ("H200 NVL", {}),
    ("H200", {"f16": 989.4, "bf16": 989.4, "tf32": 494.7, "f32": 66.9}),
    ("A100-SXM", {"f16": 312.0, "bf16": 312.0}),
    ("MI300X", {"f16": 1307.4, "bf16": 1307.4}),
    ("MI250X", {"f16": 383.0, "bf16": 383.0}),
]


def peak_tflops(device_name: str, dtype: str) -> float | None:
    for key, peaks in PEAK_TFLOPS:
        if key in device_name:
            return peaks.get(dtype)
    return None


def layer_label(layer) -> str:
    """The issue's spelling: 3x3 64->64 56x56, 1x1 s2 256->128 56x56; a depthwise layer
    (groups = channels) dw."""
    c, k, hw, f, s, _pad, g = layer[:7]
    groups = " dw" if g > 1 and g == c else f" g{g}" if g > 1 else ""
    return f"{f}x{f}{f' s{s}' if s > 1 else ''}{groups} {c}->{k} {hw}x{hw}"


def peak_bandwidth_gbs(device_name: str) -> float | None:
    """The device's peak memory bandwidth, GB/s (gpus.DEVICES), None where unknown."""
    try:
        from convgen import gpus
    except ImportError:   # older trees (--tools)
        return None
    known = gpus.device(device_name)
    return known.bandwidth_gbs if known else None


def tensor_bytes(p) -> int:
    """Bytes of the three tensors of a problem: what a convolution must at least move."""
    per = p.dtype.bits // 8
    x = p.n * p.g * p.c * p.hi * p.wi
    w = p.g * p.k * p.c * p.y * p.x
    y = p.n * p.g * p.k * p.ho * p.wo
    return (x + w + y) * per


def nchw(t, shape):
    """`t` (a logical view) as the 4-d tensor aten takes, channels-last in memory. For our
    NHWC/KYXC memory it is a view (g is the outer part of the channels, so merging g with c
    or k keeps the strides) and aten reads the very bytes our kernel reads; other layouts get
    a channels-last copy, made here and not in the timed closure."""
    return t.reshape(shape).contiguous(memory_format=torch.channels_last)


def _padding(p) -> list[int]:
    """aten pads both sides of a dimension alike. The left pad alone serves when it gives our
    output size: then every output reads the same input rows, and rows past the input are
    zero either way."""
    pads = []
    for size, left, taps, dil, stride, out in ((p.hi, p.pad_h_l, p.y, p.dil_h, p.stride_h, p.ho),
                                               (p.wi, p.pad_w_l, p.x, p.dil_w, p.stride_w, p.wo)):
        if (size + 2 * left - dil * (taps - 1) - 1) // stride + 1 != out:
            raise ValueError(f"aten pads both sides alike, which cannot give {p.describe()}")
        pads.append(left)
    return pads


def vendor_op(p, t):
    """A closure that computes problem p's written tensor through aten, returned in aten's
    (n, channels, h, w) shape, from the tensors `t` of make_inputs. The tensor
    convolution_backward only takes the shape of (the input for bwd_data, the weight for
    bwd_weight) is allocated here, once."""
    aten = torch.ops.aten
    geometry = ([p.stride_h, p.stride_w], _padding(p), [p.dil_h, p.dil_w], False, [0, 0], p.g)
    x_shape = (p.n, p.g * p.c, p.hi, p.wi)
    w_shape = (p.g * p.k, p.c, p.y, p.x)
    name = getattr(p.direction, "name", p.direction)   # older trees (--tools) name it by a string
    if name == "fwd":
        x, w = nchw(t["input"], x_shape), nchw(t["filter"], w_shape)
        return lambda: aten.convolution(x, w, None, *geometry)
    dy = nchw(t["output"], (p.n, p.g * p.k, p.ho, p.wo))
    if name == "bwd_data":
        w = nchw(t["filter"], w_shape)
        x = torch.empty(x_shape, dtype=w.dtype, device=w.device, memory_format=torch.channels_last)
        return lambda: aten.convolution_backward(dy, x, w, None, *geometry, [True, False, False])[0]
    x = nchw(t["input"], x_shape)
    w = torch.empty(w_shape, dtype=x.dtype, device=x.device, memory_format=torch.channels_last)
    return lambda: aten.convolution_backward(dy, x, w, None, *geometry, [False, True, False])[1]


ROUNDS = 3


def _as_graphs(ours, vendor) -> tuple:
    """(ours, vendor, how each is timed): each side's launches as one CUDA graph's replay
    (convgen tune's timer), so Python's cost of a launch stays out of both; a side that
    cannot be captured is timed per launch and says why."""
    timed = []
    for fn in (ours, vendor):
        replay, why = graph_replay(fn) if graph_replay else (None, "this tree has no graph timer")
        timed.append((replay or fn, "cuda graph" if replay else f"per launch: {why}"))
    return timed[0][0], timed[1][0], {"ours": timed[0][1], "vendor": timed[1][1]}


def _side_by_side_ms(ours, vendor) -> tuple[float, float]:
    """Median ms of each, timed in ROUNDS alternating rounds (median of the rounds): a
    slow spell of the GPU (seen on the H100: one row 3.5x its tuned time, the vendor's
    right after it normal) then moves one round of each side, not one side's whole time."""
    ours_ms, vendor_ms = [], []
    for _ in range(ROUNDS):
        ours_ms.append(triton.testing.do_bench(ours, warmup=10, rep=40, return_mode="median"))
        vendor_ms.append(triton.testing.do_bench(vendor, warmup=10, rep=40, return_mode="median"))
    return sorted(ours_ms)[ROUNDS // 2], sorted(vendor_ms)[ROUNDS // 2]


def our_config(p, be, use_dot: bool, db: str | None, selector: str | None = ""):
    """(config, where it came from), as convgen selects it: `db` None for no database,
    `selector` "" for the shipped model, None for none (the rule)."""
    if select is None:   # a tree from before the tuning database
        return choose(p, be, use_dot, None), "default rule"
    if "selector_path" not in inspect.signature(select).parameters:   # before the selector
        return select(p, be, use_dot, None, db) if db else (choose(p, be, use_dot, None),
                                                              "default rule")
    return select(p, be, use_dot, None, db, selector)


def bench_one(layer, direction, dtype, batch, use_dot, be, device_name, db=None,
              selector: str | None = "", graph: bool = False) -> dict:
    c, k, hw, f, s, pad, g = layer[:7]
    p = make_problem(direction=direction, dtype=elem_type(dtype), n=batch, g=g, c_total=c,
                     k_total=k, hi=hw, wi=hw, y=f, x=f, stride=(s, s), pad=(pad,) * 4, layouts=NHWC)
    t = make_inputs(p, DataSpec(seed=1), be.torch_device)
    out = empty_output(p, be.torch_device)
    cfg, source = our_config(p, be, use_dot, db, selector)
    row = {"layer": layer_label(layer), "shape": list(layer), "direction": direction,
           "dtype": dtype, "batch": batch, "path": "dot" if use_dot else "fma",
           "config": cfg.describe(), "config_source": source, "flops": p.flops}

    try:
        # arguments built once, launches timed (trees before the descriptor kernels build
        # them on every call)
        ours = (prepare(p, t, out, cfg, use_dot, be) if prepare is not None
                else lambda: run_conv(p, t, out, cfg, use_dot, be))
        ours()   # compiles; a configuration this GPU cannot run fails here
        torch.cuda.synchronize()
    except Exception as e:   # noqa: BLE001 - only Triton's config failures are recorded
        why = triton_failure(e)
        if why is None:
            raise
        return {**row, "error": why}
    vendor = vendor_op(p, t)
    # the calls timed; vendor itself stays for the check below (a replay returns nothing)
    timed_ours, timed_vendor, timing = (
        _as_graphs(ours, vendor) if graph
        else (ours, vendor, {"ours": "per launch", "vendor": "per launch"}))
    our_ms, vendor_ms = _side_by_side_ms(timed_ours, timed_vendor)
    # the GPU-side proof that both compute one convolution (tests/test_bench_conv.py is the CPU one)
    theirs = vendor().float()
    diff = (out.reshape(theirs.shape).float() - theirs).abs().max() / theirs.abs().max()
    peak = peak_tflops(device_name, dtype)
    our_tflops = p.flops / our_ms / 1e9
    bw = peak_bandwidth_gbs(device_name)
    moved = tensor_bytes(p)
    return {**row, "our_ms": our_ms, "vendor_ms": vendor_ms, "ratio": vendor_ms / our_ms,
            "our_tflops": our_tflops, "vendor_tflops": p.flops / vendor_ms / 1e9,
            "our_pct_peak": None if peak is None else 100 * our_tflops / peak,
            "bytes": moved,
            "our_pct_bandwidth": None if bw is None else 100 * moved / (our_ms * 1e6 * bw),
            "vendor_pct_bandwidth": None if bw is None else 100 * moved / (vendor_ms * 1e6 * bw),
            "max_rel_diff": diff.item(), "timing": timing}


def _geomean(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summarize(rows) -> dict:
    """Geomeans of the ratios (vendor ms / our ms) per direction and per direction and type,
    each direction's lowest ratio with its layer, and how many rows failed; a failed row
    counts in no geomean."""
    timed = [r for r in rows if "error" not in r]
    summary = {"geomean": {}, "geomean_by_type": {}, "lowest": {}, "errors": len(rows) - len(timed)}
    for d in dict.fromkeys(r["direction"] for r in timed):
        mine = [r for r in timed if r["direction"] == d]
        summary["geomean"][d] = _geomean(r["ratio"] for r in mine)
        summary["geomean_by_type"][d] = {
            dt: _geomean(r["ratio"] for r in mine if r["dtype"] == dt)
            for dt in dict.fromkeys(r["dtype"] for r in mine)}
        low = min(mine, key=lambda r: r["ratio"])
        summary["lowest"][d] = {"ratio": low["ratio"], "layer": low["layer"], "dtype": low["dtype"]}
    return summary


def print_report(head: dict, rows, summary) -> None:
    print(f"device: {head['device']}, torch {head['torch']}, triton {head['triton']}, "
          f"cudnn {head['cudnn']}")
    print(f"command: {head['command']}")
    print("ratio = vendor ms / our ms (above 1: ours is faster); config from the tuning database (*), "
          "the selector model (m), else the rule")
    print(f"{'layer':26} {'dir':10} {'type':5} {'batch':>5} {'our ms':>8} {'vend ms':>8} "
          f"{'ratio':>6} {'our TF':>7} {'vend TF':>7} {'%peak':>6} {'%bw':>5} {'v%bw':>5} "
          f"{'diff':>7}  config")
    for r in rows:
        lead = f"{r['layer']:26} {r['direction']:10} {r['dtype']:5} {r['batch']:5}"
        if "error" in r:
            print(f"{lead} error: {r['error']}  config {r['config']}")
            continue
        pct = "-" if r["our_pct_peak"] is None else f"{r['our_pct_peak']:.1f}"
        source = r.get("config_source", "")
        tuned = "*" if source.startswith("tuned") else "m" if source.startswith(MODEL_SOURCE) else " "
        bw = ["-" if r.get(key) is None else f"{r[key]:.0f}"
              for key in ("our_pct_bandwidth", "vendor_pct_bandwidth")]
        print(f"{lead} {r['our_ms']:8.3f} {r['vendor_ms']:8.3f} {r['ratio']:6.2f} "
              f"{r['our_tflops']:7.1f} {r['vendor_tflops']:7.1f} {pct:>6} {bw[0]:>5} {bw[1]:>5} "
              f"{r['max_rel_diff']:7.1e} {tuned}{r['config']}")
    for d, g in summary["geomean"].items():
        per_type = ", ".join(f"{dt} {v:.2f}x" for dt, v in summary["geomean_by_type"][d].items())
        low = summary["lowest"][d]
        print(f"geomean {d}: {g:.2f}x ({per_type}); lowest {low['ratio']:.2f}x "
              f"{low['layer']} {low['dtype']}")
    if summary["errors"]:
        print(f"{summary['errors']} row(s) could not run our kernel (in no geomean)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", choices=sorted(LAYER_SETS), default="issue")
    ap.add_argument("--types", default="f16,bf16", help=f"comma-separated, of {', '.join(VENDOR_TYPES)}")
    ap.add_argument("--directions", default="fwd,bwd_data,bwd_weight")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--path", choices=("dot", "fma"), default="dot",
                    help="our kernel's matrix-core (dot) or FMA path")
    ap.add_argument("--quick", action="store_true", help="the first three layers, the first type")
    ap.add_argument("--json", metavar="PATH", help="write the rows and geomeans here")
    ap.add_argument("--tuning-db", metavar="PATH", nargs="?", const="",
                    help="run the configuration convgen selects with this tuning database (no "
                    "PATH: the local store of tuning/data)")
    ap.add_argument("--timing", choices=("graph", "launch"), default="graph",
                    help="time both sides as one CUDA graph's replay each, as convgen tune does "
                    "(graph), or each call's launches as Python issues them (launch)")
    ap.add_argument("--selector", metavar="MODEL|none", default="",
                    help="the selector model for problems without a tuned entry (default: the "
                    "shipped one for the arch); none: the rule")
    ap.add_argument("--tools", metavar="DIR", help="time the kernels of this tools/ folder instead "
                    "(another tree's, for an A/B of a kernel change)")
    args = ap.parse_args()
    types = args.types.split(",")
    directions = args.directions.split(",")
    for dt in types:
        if dt not in VENDOR_TYPES:
            ap.error(f"--types: {dt} is not one of {', '.join(VENDOR_TYPES)}")
    for d in directions:
        if d not in ("fwd", "bwd_data", "bwd_weight"):
            ap.error(f"--directions: {d} is not fwd, bwd_data or bwd_weight")
    if not torch.cuda.is_available():
        print("bench_conv: needs a GPU", file=sys.stderr)
        sys.exit(2)
    layers = LAYER_SETS[args.layers]
    if args.quick:
        layers, types = layers[:3], types[:1]
    torch.backends.cudnn.benchmark = True      # the vendor's fastest algorithm per shape
    torch.backends.cudnn.allow_tf32 = False    # IEEE f32 against our IEEE f32
    be = current()
    device_name = torch.cuda.get_device_name()
    for flag, path in (("--tuning-db", args.tuning_db), ("--selector", args.selector)):
        if path and path != "none" and not os.path.exists(path):
            ap.error(f"{flag}: no file {path}")
    head = {"device": device_name, "torch": torch.__version__, "triton": triton.__version__,
            "cudnn": torch.backends.cudnn.version(), "command": shlex.join(["python", *sys.argv])}
    rows = []
    for d in directions:
        for dt in types:
            for layer, batch in layers:
                rows.append(bench_one(layer, d, dt, batch or args.batch, args.path == "dot", be,
                                      device_name,
                                      args.tuning_db,
                                      None if args.selector == "none" else args.selector,
                                      args.timing == "graph"))
                if args.json:   # after every row: a run stopped by a time limit keeps what it measured
                    _write_json(args.json, {**head, **summarize(rows), "rows": rows})
    summary = summarize(rows)
    print_report(head, rows, summary)
    if args.json:
        _write_json(args.json, {**head, **summary, "rows": rows})


def _write_json(path: str, doc: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()

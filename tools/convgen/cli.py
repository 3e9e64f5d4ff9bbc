"""Command lines -> the frozen records of options.py. The only module that knows flag
spellings: convgen's two dialects, `convgen compare`, `split-test`, the flag text of
lit's substitutions, and the words an error uses to name the flag to change.

Two dialects are accepted:

* rocmlir-gen / miopen-gen (the default): `-flag value`, `-flag=value`, one or
  two dashes (`-in_h 7`, `--in_h=7`); a boolean flag alone means true and also
  takes `=true/false/1/0/on/off/yes/no` or, as the next word, one of those
  (`-x2`, `-x2=0`, `--x2 1`). Hyphens and underscores in a flag's name are the
  same (`-print-verify-results`, `-print_verify_results`).
* MIOpenDriver: when the first word is `conv`, `convfp16`, `convbfp16` or
  `convint8`, the single-letter MIOpenDriver flags (`-n -c -H -W -k -y -x -p -q
  -u -v -l -j -g -F -f -I -O`, or their MIOpen long names with `--`), plus
  convgen's own data, kernel, reference, threshold and report flags by their
  long names (`-rand 3`, `-RMS_threshold 1e-5`).

A repeated flag is not an error: the last one wins (`-x2 -mfma off` is off).
Every mistake raises ConvgenError with one line that names the flag.

Each flag is one row of a table: spellings, destination, converter, meaning, default.
The converter turns the text into a value or raises ValueError saying what it
expected; `_build` turns the collected values into the records of options.py.
Importing this module imports neither torch nor Triton.
"""
from __future__ import annotations

import re
import sys
import time
from typing import Any, Callable

from convgen import commands, driver, dtypes, perf_text, tolerance
from convgen.commands import Command
from convgen.compare import run as compare
from convgen.directions import BWD_DATA, BWD_WEIGHT, FWD
from convgen.errors import ConvgenError
from convgen.flags import (Table, as_text, choice, flag_help, flag_key, flag_table, integer, nonneg,
                           nonneg_real, one_line, one_of, positive, quiet_broken_pipe, real, scan,
                           switch)
from convgen.inputs import MAX_SEED, validate
from convgen.options import (FIXED_PATTERN, CompareConfig, Comparison, DataSpec, KernelOptions,
                             ReferenceOptions, ReportOptions, RunConfig)
from convgen.problem import make_problem, normalize_layout

PROGRAM = "convgen"

# `-p`: rocmlir-gen's populateDefaults() problem (its non-mfma branch). Unlike
# rocmlir-gen, which overwrites explicit sizes with these, explicit flags win here.
DEFAULT_PROBLEM = {"n": 128, "g": 1, "c": 8, "k": 128, "hi": 32, "wi": 32, "y": 3, "x": 3}

# MIOpenDriver's own defaults for sizes that a `conv...` line leaves out.
MIOPEN_DEFAULTS = {"n": 100, "g": 1, "c": 3, "k": 32, "hi": 32, "wi": 32, "y": 3, "x": 3}

# Without -p, these must be given (in this order in messages).
REQUIRED_SIZES = (("n", "-batchsize"), ("c", "-in_channels"), ("k", "-out_channels"),
                  ("hi", "-in_h"), ("wi", "-in_w"), ("y", "-fil_h"), ("x", "-fil_w"))

DEFAULT_LAYOUTS = {"filter": "kcyx", "input": "nchw", "output": "nkhw"}
DEFAULT_LAYOUTS_3D = {"filter": "kczyx", "input": "ncdhw", "output": "nkdhw"}

MIOPEN_COMMANDS = {"conv": "f32", "convfp16": "f16", "convbfp16": "bf16", "convint8": "i8"}

OPERATIONS = {"conv2d": FWD, "conv": FWD,
              "conv2d_bwd_data": BWD_DATA, "conv_bwd_data": BWD_DATA,
              "conv2d_bwd_weight": BWD_WEIGHT, "conv_bwd_weight": BWD_WEIGHT}

# -perf_config's fields (key=value; rocMLIR's strings map onto them: perf_text.py)
PERF_FIELDS = ("block_m", "block_n", "block_k", "num_warps", "num_stages", "split", "group_m",
               "waves_per_eu", "matrix_instr_nonkdim", "kpack", "max_num_imprecise_acc", "tma",
               "s2d", "persistent", "streamk", "tail", "swap_ab")


# ---- converters: text -> value, or ValueError("expected ...") ----------------


def _threshold(text: str) -> tolerance.Limit:
    return tolerance.parse_limit(text)


def dtype_name(text: str) -> str:
    try:
        return dtypes.elem_type(text).name
    except ConvgenError:
        raise ValueError(f"expected one of {', '.join(dtypes.CONV_TYPES)}") from None


def _any_type(text: str) -> str:
    """Any type of the table, output-only ones (i32) included."""
    t = dtypes.find(text)
    if t is None:
        raise ValueError(f"expected one of {', '.join(dtypes.TYPES)}")
    return t.name


def _rand(text: str) -> tuple[str, int | None]:
    key = text.strip().lower()
    if key in ("fixed", "none"):
        return key, None
    if re.fullmatch(r"\+?\d+", key) and int(key) <= MAX_SEED:
        return "random", int(key)
    raise ValueError(f"expected fixed, none, or a seed from 0 to {MAX_SEED} (0: from the time)")


# rocmlir-gen numbers the spatial dimensions: 0 = H (y), 1 = W (x), 2 = D (z). A 2-D
# problem drops a depth letter (problem.normalize_layout).
_DIGITS = {"input": {"0": "h", "1": "w", "2": "d"}, "output": {"0": "h", "1": "w", "2": "d"},
           "filter": {"0": "y", "1": "x", "2": "z"}}


def _layout(tensor: str) -> Callable[[str], str]:
    """Layout text -> letters (problem.normalize_layout checks them once the problem's
    dimensions are known)."""
    def conv(text: str) -> str:
        letters = "".join(_DIGITS[tensor].get(ch, ch) for ch in text.strip().lower())
        try:
            normalize_layout(tensor, letters, three_d="d" in letters or "z" in letters)
        except ConvgenError as e:
            raise ValueError(str(e).replace(f"'{letters}'", f"'{text}'")) from None
        return letters
    return conv


def _perf_config(text: str) -> tuple:
    """convgen's `key=value` fields, or a rocMLIR perf string -> ((field, int), ...)."""
    return perf_text.parse(text, PERF_FIELDS)


# MIOpen spells every layout with the input's letters: NCHW for the filter is
# kcyx, for the output nkhw.
_MIOPEN_LETTERS = {
    "input": {"N": "n", "C": "c", "H": "h", "W": "w", "G": "g", "D": "2"},
    "filter": {"N": "k", "C": "c", "H": "y", "W": "x", "G": "g", "D": "2"},
    "output": {"N": "n", "C": "k", "H": "h", "W": "w", "G": "g", "D": "2"},
}
for _letters in _MIOPEN_LETTERS.values():   # rocMLIR's lists also number them: N01GC
    _letters.update({"0": "0", "1": "1", "2": "2"})


def _tuning_db(text: str) -> str | None:
    return None if text.lower() == "none" else text


# where a command's tuning database is when no flag names one (convtune.store.resolve)
TUNING_DB_DEFAULT = ("$CONVGEN_TUNING_DB, else the local store built from tuning/data "
                  "(in $CONVGEN_CACHE_DIR, default ~/.cache/convgen)")


def _miopen_layout(tensor: str) -> Callable[[str], str]:
    letters = _MIOPEN_LETTERS[tensor]

    def conv(text: str) -> str:
        up = text.strip().upper()
        if not up or any(ch not in letters for ch in up):
            raise ValueError("expected an MIOpen layout of N, C, H, W (and G, D, or the digits "
                             "0, 1, 2 for H, W, D), e.g. NCHW, NHWC, NCDHW or N01GC")
        return _layout(tensor)("".join(letters[ch] for ch in up))
    return conv


def _only(*allowed: str, why: str) -> Callable[[str], None]:
    """An MIOpenDriver flag accepted only at values that change nothing here."""
    def conv(text: str) -> None:
        if text.strip() not in allowed:
            raise ValueError(f"expected {' or '.join(allowed)} ({why})")
        return None
    return conv


# ---- the tables ---------------------------------------------------------------


_IGNORE_VALUE, _IGNORE_BOOL = as_text, switch()

# rocmlir-gen / mlir-miopen-driver flags with no meaning for convgen. They are
# accepted so that RUN lines written for those tools work unchanged.
# (spellings, takes a value, why it is accepted)
COMPAT_FLAGS = (
    ("arch", True, "target GPU: convgen runs on the device Triton finds (lit's %arch)"),
    ("num_cu", True, "compute-unit count, a rocMLIR tuning input"),
    ("kernel_name", True, "name of the generated MLIR kernel"),
    ("c", False, "mlir-miopen-driver: lower to GPU code; convgen always compiles"),
    (("ph", "host_harness"), False, "rocmlir-gen: emit a host harness; convgen is one"),
    (("fut", "func_under_test"), True, "rocmlir-gen: name of the function under test"),
    ("schedule_version", True, "rocMLIR's instruction schedule: code generation, not numbers"),
    # These three are checked against -t (for i8, an i32 output is also fine), then dropped.
    ("in_type", True, "rocmlir-gen per-tensor type: must agree with -t"),
    ("fil_type", True, "rocmlir-gen per-tensor type: must agree with -t"),
    ("out_type", True, "rocmlir-gen per-tensor type: must be -t's output type (i8: i32, fp8: f32)"),
)
_CHECKED_COMPAT = ("in_type", "fil_type", "out_type")


def _compat_rows(flags) -> list:
    rows = []
    for names, takes_value, why in flags:
        first = names if isinstance(names, str) else names[0]
        dest = first if first in _CHECKED_COMPAT else None
        rows.append((names, dest, _IGNORE_VALUE if takes_value else _IGNORE_BOOL,
                     f"accepted, no effect: {why}" if dest is None else why, ""))
    return rows


# convgen's own options, shared by both dialects (no single letters, so no clash
# with MIOpenDriver's).
_COMMON = (
    ("Data", [
        ("rand", "rand", _rand,
         "input data: fixed (the repeating pattern " + ", ".join(f"{x:g}" for x in FIXED_PATTERN)
         + "), none (all ones), or a random seed N (0: a seed from the time, printed in the "
         "reproduce line)", "1"),
        ("rand_min", "rand_min", real, "smallest random value (with -rand_both_signs: "
         "smallest magnitude)", "-1 (integer types: -5)"),
        ("rand_max", "rand_max", real, "largest random value (or magnitude)",
         "1 (integer types: 5)"),
        ("rand_type", "rand_type", one_of("int", "float"),
         "draw integers (exact products) or floats in the range", "the element type's kind"),
        ("rand_side", "rand_side", one_of("both", "input", "filter", "output"),
         "the one tensor that gets random data; the other input is all ones", "both"),
        ("rand_both_signs", "rand_both_signs", switch(),
         "draw each magnitude between -rand_min and -rand_max, then give it a random sign "
         "(-rand_min 1 -rand_max 3: the fp16 study's range away from zero)", "off"),
        ("semantics", "semantics", one_of("convgen", "rocmlir"),
         "whose rules make the data and judge it: convgen's (Philox draws, the auto "
         "thresholds), or rocmlir-gen's, for lines imported from its suites (-rand fixed by "
         "default; integers in [-rand_min_int, -rand_max_int) unless -rand_type float, "
         "floats over [-rand_min, -rand_max] (0, 1); glibc rand(); the matrix-core path "
         "unless -x2=0; its legacy comparator)",
         "convgen"),
        ("rand_min_int", "rand_min_int", integer(), "--semantics=rocmlir: smallest integer drawn", "-5"),
        ("rand_max_int", "rand_max_int", integer(),
         "--semantics=rocmlir: integers are drawn below this", "5"),
    ]),
    ("Kernel", [
        ("x2", "matrix_cores", switch(), "the matrix-core path (tl.dot); off: the FMA path",
         "off"),
        ("mfma", "matrix_cores", choice({"on": True, "off": False}), "on|off: the same as -x2",
         "off"),
        ("perf_config", "perf_config", _perf_config,
         "tile configuration: key=value pairs of " + ",".join(PERF_FIELDS)
         + " (waves_per_eu, matrix_instr_nonkdim, kpack: AMD only), or a rocMLIR perf string "
         "(8 values, v1: to v4:, FMA forms, gemm:v1:/v2:; docs/flags.md)",
         "chosen from the problem"),
        ("input_precision", "input_precision", one_of("ieee", "tf32", "tf32x3"),
         "precision of f32 matrix-core dots", "ieee"),
        ("tuning_db", "tuning_db", _tuning_db,
         "the tuning database a run without -perf_config takes its config from (the fastest "
         "measured for exactly this problem on this device, by the nearest Triton version "
         "where this one measured none); none: no tuned entry",
         TUNING_DB_DEFAULT),
        ("selector", "selector", _tuning_db,
         "the model file that picks a config where the tuning database has no entry (the "
         "candidate its ranking model puts first); none: today's rule",
         "$CONVGEN_SELECTOR, else tuning/models/ARCH.json"),
        ("flush_subnormals", "flush_subnormals", switch(),
         "zero the kernel's subnormal inputs first (how MI200 matrix cores read fp16/bf16)",
         "off"),
    ]),
    ("Reference (the last of -pv / -pv_with_gpu wins; -pv=false turns checking off)", [
        (("pv", "pv_with_cpp", "pv_with_mlir"), "validator", switch("cpu", None),
         "verify against the CPU reference (float64)", "off; MIOpenDriver lines: on"),
        ("pv_with_gpu", "validator", switch("gpu", None),
         "verify against the GPU reference (FMA only, fp32 accumulation)", "off"),
        ("ref_accumulate", "ref_accumulate", positive,
         "CPU reference: sum N products in float64, then round to fp32 and add (how dot "
         "units accumulate)", "off: one float64 sum"),
        ("ref_flush_subnormals", "ref_flush_subnormals", switch(),
         "zero the reference's subnormal inputs first", "off"),
    ]),
    ("Thresholds: a number >= 0, auto (derived from the types and the accumulation length), "
     "or default (what no flag gives)", [
        (("RMS_threshold", "RMS"), "rms", _threshold, "RMS bit threshold",
         "auto (integer outputs: exact)"),
        (("absDiff_threshold", "maxAbsDiff"), "abs", _threshold, "maxAbsDiff bit threshold",
         "auto (integer outputs: exact)"),
        (("relDiff_threshold", "maxRelDiff"), "rel", _threshold,
         "maxRelDiff bit threshold; auto checks |val-kern| <= rtol*|val| + atol element-wise",
         "auto (integer outputs: exact)"),
        ("comparator", "comparator", one_of(*tolerance.COMPARATORS),
         "who judges: convgen's checks, or rocMLIR's legacy (RMS 3e-5, f16/bf16 1e-3; abs 100; "
         "rel 1e-6, forced to 100 for f16/bf16) or allclose (|kern-val| <= atol + rtol*|val| "
         "for every element, rocMLIR's per-type atol and rtol)",
         "convgen; legacy with --semantics=rocmlir; allclose with -atol or -rtol"),
        ("atol", "atol", nonneg_real, "allclose's atol", "rocMLIR's per type and reduction"),
        ("rtol", "rtol", nonneg_real, "allclose's rtol", "rocMLIR's per type"),
    ]),
    ("Report", [
        (("print_verify_results", "p_verify", "pv_results"), "print_results",
         one_of("always", "failure", "summary", "off"),
         "how much to print: the summary line, histograms and worst elements too (always), "
         "only on failure, or nothing but the bits; the reasons for a 0 bit go to stderr", "summary"),
        ("dump", "dump", as_text, "save inputs, kernel output and reference as DIR/NAME.npy", ""),
        ("json", "json", as_text, "save metrics, thresholds, histograms, findings as JSON", ""),
    ]),
)

ROCMLIR_FLAGS = flag_table(
    ("Problem", [
        ("operation", "direction", choice(OPERATIONS),
         "conv2d|conv (forward), conv2d_bwd_data|conv_bwd_data, conv2d_bwd_weight|conv_bwd_weight",
         "conv2d"),
        ("t", "type", dtype_name, "element type: " + ", ".join(dtypes.CONV_TYPES)
         + " (i8: forward, i32 output; fp8: f32 output)", "f32"),
        ("fil_layout", "fil_layout", _layout("filter"), "filter layout, letters g,k,c,y,x",
         "kcyx"),
        ("in_layout", "in_layout", _layout("input"), "input layout, letters n,g,c,h,w", "nchw"),
        ("out_layout", "out_layout", _layout("output"), "output layout, letters n,g,k,h,w",
         "nkhw"),
        ("batchsize", "n", positive, "batch size N", "required, or -p"),
        (("groupsize", "g"), "g", positive, "groups G", "1"),
        ("in_channels", "c", positive, "input channels (all groups)", "required, or -p"),
        ("out_channels", "k", positive, "output channels (all groups)", "required, or -p"),
        ("in_h", "hi", positive, "input height", "required, or -p"),
        ("in_w", "wi", positive, "input width", "required, or -p"),
        ("fil_h", "y", positive, "filter height", "required, or -p"),
        ("fil_w", "x", positive, "filter width", "required, or -p"),
        ("out_h", "out_h", positive, "output height: checked against the computed one",
         "computed"),
        ("out_w", "out_w", positive, "output width: checked against the computed one", "computed"),
        ("dilation_h", "dil_h", positive, "dilation", "1"),
        ("dilation_w", "dil_w", positive, "dilation", "1"),
        ("conv_stride_h", "stride_h", positive, "stride", "1"),
        ("conv_stride_w", "stride_w", positive, "stride", "1"),
        ("padding_h", "pad_h", nonneg, "padding, both sides", "0"),
        ("padding_w", "pad_w", nonneg, "padding, both sides", "0"),
        ("padding_h_l", "pad_h_l", nonneg, "padding on one side (wins over -padding_h)",
         "-padding_h"),
        ("padding_h_r", "pad_h_r", nonneg, "padding on one side", "-padding_h"),
        ("padding_w_l", "pad_w_l", nonneg, "padding on one side", "-padding_w"),
        ("padding_w_r", "pad_w_r", nonneg, "padding on one side", "-padding_w"),
        ("p", "populate", switch(),
         "rocmlir-gen's default problem: N=128 C=8 K=128 32x32 3x3 (explicit sizes win)", "off"),
        ("in_d", "in_d", positive, "input depth: above 1 (or -fil_d, -padding_d) a 3-D problem, "
         "whose layouts name the depth (digit 2: nc012, kc012)", "1"),
        ("fil_d", "fil_d", positive, "filter depth", "1"),
        ("out_d", "out_d", positive, "output depth: checked against the computed one", "computed"),
        ("padding_d", "pad_d", nonneg, "depth padding, both sides", "0"),
        ("padding_d_l", "pad_d_l", nonneg, "depth padding on one side", "-padding_d"),
        ("padding_d_r", "pad_d_r", nonneg, "depth padding on one side", "-padding_d"),
        ("conv_stride_d", "stride_d", nonneg, "depth stride", "1"),
        ("dilation_d", "dil_d", nonneg, "depth dilation", "1"),
    ]),
    *_COMMON,
    ("Accepted for rocmlir-gen lines", _compat_rows(COMPAT_FLAGS)),
)

# MIOpenDriver flags that change nothing here (read and dropped), and flags accepted
# only at their default value. Anything else is an unknown flag.
MIOPEN_IGNORED = (
    (("t", "time"), "time the kernels"),
    (("V", "verify"), "verify: convgen always checks (CPU reference unless -pv_with_gpu)"),
    (("i", "iter"), "iterations"),
    (("s", "search"), "search for the best solution"),
    (("P", "printconv"), "print the convolution sizes"),
    (("w", "wall"), "wall-clock timing"),
    (("S", "solution"), "force a MIOpen solver"),
    (("C", "verification_cache"), "directory caching reference results"),
    (("o", "dump_output"), "dump MIOpen's buffers (convgen has --dump)"),
    (("Y", "trans_output_pad_h"), "output padding of transposed convolution"),
    (("X", "trans_output_pad_w"), "output padding of transposed convolution"),
    (("%", "trans_output_pad_d"), "output padding in depth"),
    ("perf_priority", "rocMLIR's perfRunner: how much tuning a config deserves"),
)

MIOPEN_FLAGS = flag_table(
    ("Problem (the command gives the type: conv f32, convfp16, convbfp16, convint8)", [
        (("F", "forw"), "direction", choice({"0": FWD, "1": FWD, "2": BWD_DATA, "4": BWD_WEIGHT}),
         "direction: 1 (or 0) forward, 2 backward data, 4 backward weight", "1"),
        (("n", "batchsize"), "n", positive, "batch size", str(MIOPEN_DEFAULTS["n"])),
        (("c", "in_channels"), "c", positive, "input channels", str(MIOPEN_DEFAULTS["c"])),
        (("H", "in_h"), "hi", positive, "input height", str(MIOPEN_DEFAULTS["hi"])),
        (("W", "in_w"), "wi", positive, "input width", str(MIOPEN_DEFAULTS["wi"])),
        (("k", "out_channels"), "k", positive, "output channels", str(MIOPEN_DEFAULTS["k"])),
        (("y", "fil_h"), "y", positive, "filter height", str(MIOPEN_DEFAULTS["y"])),
        (("x", "fil_w"), "x", positive, "filter width", str(MIOPEN_DEFAULTS["x"])),
        (("p", "pad_h"), "pad_h", nonneg, "padding height", "0"),
        (("q", "pad_w"), "pad_w", nonneg, "padding width", "0"),
        (("u", "conv_stride_h"), "stride_h", positive, "stride height", "1"),
        (("v", "conv_stride_w"), "stride_w", positive, "stride width", "1"),
        (("l", "dilation_h"), "dil_h", positive, "dilation height", "1"),
        (("j", "dilation_w"), "dil_w", positive, "dilation width", "1"),
        (("g", "group_count"), "g", positive, "groups", "1"),
        (("f", "fil_layout"), "fil_layout", _miopen_layout("filter"),
         "filter layout in MIOpen's letters (NCHW, NHWC)", "NCHW"),
        (("I", "in_layout"), "in_layout", _miopen_layout("input"), "input layout", "NCHW"),
        (("O", "out_layout"), "out_layout", _miopen_layout("output"), "output layout", "NCHW"),
        (("m", "mode"), None, _only("conv", why="transposed convolution is not supported"),
         "conv only", "conv"),
        (("_", "spatial_dim"), "spatial_dim", one_of("2", "3"),
         "2, or 3: a 3-D problem (the depth flags below; layouts NCDHW, NDHWC)", "2"),
        (("!", "in_d"), "in_d", positive, "input depth (with -_ 3)", "32"),
        (("@", "fil_d"), "fil_d", positive, "filter depth (with -_ 3)", "3"),
        (("$", "pad_d"), "pad_d", nonneg, "padding in depth (with -_ 3)", "0"),
        (("#", "conv_stride_d"), "stride_d", nonneg, "stride in depth (with -_ 3)", "1"),
        (("^", "dilation_d"), "dil_d", nonneg, "dilation in depth (with -_ 3)", "1"),
        (("b", "bias"), None, _only("0", why="bias is not supported"), "0 only", "0"),
        (("r", "pad_val"), None, _only("0", why="only zero padding is supported"), "0 only", "0"),
        (("z", "pad_mode"), None, _only("default", why="give the padding with -p/-q"),
         "default only", "default"),
        (("Z", "tensor_vect"), None, _only("0", why="vectorized tensors are not supported"),
         "0 only", "0"),
    ]),
    *_COMMON,
    ("Accepted for MIOpenDriver lines, no effect",
     [(names, None, _IGNORE_VALUE, why, "") for names, why in MIOPEN_IGNORED]),
)

COMPARE_FLAGS = flag_table(
    ("Compare two saved arrays", [
        ("kern", "kern", as_text, "the kernel's output (.npy)", "required"),
        ("ref", "ref", as_text, "the reference (.npy), rounded to the output type before comparing",
         "required"),
        (("t", "type"), "type", _any_type,
         "the convolution's type; the arrays are compared in its output type ("
         + ", ".join(dtypes.TYPES) + ")", "required"),
        ("accumulate", "accumulate", positive,
         "products each output element summed (the reduction length: C*Y*X for fwd); auto "
         "thresholds and allclose's atol grow with it", "1"),
    ]),
    # --dump saves inputs and a reference that compare does not have
    *[(title, [r for r in rows if r[1] != "dump"]) for title, rows in _COMMON
      if title.startswith(("Thresholds", "Report"))],
    fold_case=True,
)


# ---- scanning argv --------------------------------------------------------------


# ---- values -> RunConfig ----------------------------------------------------------

def _check_type_flags(v: dict[str, Any], dtype: str) -> None:
    for dest in _CHECKED_COMPAT:
        if dest not in v:
            continue
        given = dtypes.find(v[dest])
        name = given.name if given else v[dest].strip().lower()
        if dest == "out_type" and given is not None and given is dtypes.TYPES[dtype].out_type:
            continue   # i8 gives i32, fp8 gives f32: naming that output type is right
        if name != dtype:
            raise ConvgenError(f"--{dest} {v[dest]} disagrees with -t {dtype}")


def _resolve_seed(mode: str, seed: int | None) -> int:
    if mode == "random" and seed == 0:  # time-based; the resolved seed is reported
        return time.time_ns() // 1000 % (2**31 - 1) + 1
    return 1 if seed is None else seed


def _depth(v: dict[str, Any], miopen: bool) -> tuple:
    """(input depth, filter depth, stride, dilation, padding before, after). MIOpenDriver's
    depth flags count only with -_ 3 (its 2-D lines carry them as 0)."""
    if miopen and v.get("spatial_dim", "2") != "3":
        return (1, 1, 1, 1, 0, 0)
    di, z = v.get("in_d", 32 if miopen else 1), v.get("fil_d", 3 if miopen else 1)
    stride, dil = v.get("stride_d", 1), v.get("dil_d", 1)
    for flag, x in (("-conv_stride_d", stride), ("-dilation_d", dil)):
        if x < 1 and (di, z) != (1, 1):
            raise ConvgenError(f"{flag} {x}: a 3-D problem needs a positive depth stride and dilation")
    pad = v.get("pad_d", 0)
    return (di, z, max(1, stride), max(1, dil), v.get("pad_d_l", pad), v.get("pad_d_r", pad))


def _build(v: dict[str, Any], miopen: bool, argv: tuple[str, ...]):
    if "type" not in v and "in_type" in v:  # rocmlir-gen lines may give only --in_type
        try:
            v["type"] = dtype_name(v["in_type"])
        except ValueError as e:
            raise ConvgenError(f"invalid value '{v['in_type']}' for --in_type: {e}") from None
    dtype = v.get("type", "f32")
    _check_type_flags(v, dtype)

    if miopen:
        sizes = dict(MIOPEN_DEFAULTS)
    elif v.get("populate"):
        sizes = dict(DEFAULT_PROBLEM)
    else:
        missing = [flag for key, flag in REQUIRED_SIZES if key not in v]
        if missing:
            raise ConvgenError(f"missing {', '.join(missing)} (or give -p for the default problem)")
        sizes = {"g": 1}
    sizes.update({key: v[key] for key in DEFAULT_PROBLEM if key in v})

    depth = _depth(v, miopen)
    pad_h, pad_w = v.get("pad_h", 0), v.get("pad_w", 0)
    pad = (v.get("pad_h_l", pad_h), v.get("pad_h_r", pad_h),
           v.get("pad_w_l", pad_w), v.get("pad_w_r", pad_w))
    # MIOpenDriver's 3-D default is NCDHW
    defaults = DEFAULT_LAYOUTS_3D if miopen and v.get("spatial_dim") == "3" else DEFAULT_LAYOUTS
    layouts = {t: v.get(flag, defaults[t]) for t, flag in (("filter", "fil_layout"),
                                                            ("input", "in_layout"), ("output", "out_layout"))}
    problem = make_problem(
        direction=v.get("direction", FWD), dtype=dtypes.elem_type(dtype),
        n=sizes["n"], g=sizes["g"], c_total=sizes["c"], k_total=sizes["k"],
        hi=sizes["hi"], wi=sizes["wi"], y=sizes["y"], x=sizes["x"],
        stride=(v.get("stride_h", 1), v.get("stride_w", 1)),
        dilation=(v.get("dil_h", 1), v.get("dil_w", 1)), pad=pad, layouts=layouts, depth=depth)
    for key, got, what in (("out_h", problem.ho, "height"), ("out_w", problem.wo, "width"),
                           ("out_d", problem.do, "depth")):
        if key in v and v[key] != got:
            raise ConvgenError(f"-{key} {v[key]} disagrees with the computed output {what} {got}")

    rocmlir = v.get("semantics", "convgen") == "rocmlir"
    mode, seed = v.get("rand", ("fixed", None) if rocmlir else ("random", None))
    if "rand_min" in v and "rand_max" in v and v["rand_min"] > v["rand_max"]:
        raise ConvgenError(f"-rand_min {v['rand_min']:g} is larger than -rand_max {v['rand_max']:g}")
    if rocmlir:
        data = _rocmlir_data(v, mode, seed)
    else:
        for flag in ("rand_min_int", "rand_max_int"):
            if flag in v:
                raise ConvgenError(f"-{flag} is rocmlir-gen's: give --semantics=rocmlir (or "
                                   "-rand_type int with -rand_min and -rand_max)")
        data = DataSpec(mode=mode, seed=_resolve_seed(mode, seed),
                        lo=v.get("rand_min"), hi=v.get("rand_max"),
                        rand_type=v.get("rand_type"), side=v.get("rand_side", "both"),
                        both_signs=bool(v.get("rand_both_signs", False)))
    validate(data, problem)
    precision = v.get("input_precision", "ieee")
    if precision != "ieee" and problem.dtype.name != "f32":
        raise ConvgenError(f"-input_precision {precision} sets how f32 dots round their inputs; "
                           f"a {problem.dtype.name} run has none (give -t f32, or leave it out)")
    comparison = _comparison(v, rocmlir)
    validator = v.get("validator", "cpu" if miopen else None)
    if v.get("json") is not None and validator is None:
        raise ConvgenError("--json needs a reference to compare with (-pv or -pv_with_gpu)")
    if mode == "random" and seed == 0:
        argv = argv + ("-rand", str(data.seed))  # so the printed reproducer reruns this data

    return RunConfig(
        problem=problem,
        data=data,
        # rocmlir-gen takes the matrix units wherever the target has them
        kernel=KernelOptions(use_matrix_cores=v.get("matrix_cores", rocmlir),
                             perf_config=v.get("perf_config", ()),
                             perf_form=(perf_text.form(_last_value(argv, "perf_config"))
                                        if "perf_config" in v else None),
                             input_precision=v.get("input_precision", "ieee"),
                             flush_subnormals=v.get("flush_subnormals", False),
                             tuning_db=v.get("tuning_db", ""),
                             selector=v.get("selector", "")),
        reference=ReferenceOptions(validator=validator,
                                   accumulate=v.get("ref_accumulate"),
                                   flush_subnormals=v.get("ref_flush_subnormals", False)),
        thresholds=tolerance.Thresholds(rms=v.get("rms"), abs=v.get("abs"), rel=v.get("rel")),
        report=ReportOptions(print_results=v.get("print_results", "summary"),
                             dump_dir=v.get("dump"), json_path=v.get("json")),
        argv=argv,
        comparison=comparison,
    )


def _rocmlir_data(v: dict[str, Any], mode: str, seed: int | None):
    """rocmlir-gen's data rules (inputs._rocmlir_values): integer draws unless -rand_type
    float, whose range is -rand_min/-rand_max as integers (0, 1)."""
    if v.get("rand_both_signs"):
        raise ConvgenError("-rand_both_signs is convgen's: rocmlir-gen draws plain ranges")
    lo, hi = v.get("rand_min", 0), v.get("rand_max", 1)
    for flag, x in (("rand_min", lo), ("rand_max", hi)):
        if x != int(x):
            raise ConvgenError(f"-{flag} {x:g}: rocmlir-gen's float range is given as integers")
    ilo, ihi = v.get("rand_min_int", -5), v.get("rand_max_int", 5)
    if ilo > ihi:
        raise ConvgenError(f"-rand_min_int {ilo} is larger than -rand_max_int {ihi}")
    return DataSpec(mode=mode, seed=_resolve_seed(mode, seed), lo=float(int(lo)), hi=float(int(hi)),
                    rand_type=v.get("rand_type", "int"), side=v.get("rand_side", "both"),
                    generator="rocmlir", int_lo=ilo, int_hi=ihi)


def _comparison(v: dict[str, Any], rocmlir: bool):
    """Who judges: --comparator, else allclose when -atol or -rtol is given, else legacy
    under rocmlir-gen's semantics and convgen's own checks under convgen's."""
    given = v.get("comparator")
    if given is None:
        given = "allclose" if ("atol" in v or "rtol" in v) else ("legacy" if rocmlir else "convgen")
    elif given != "allclose" and ("atol" in v or "rtol" in v):
        raise ConvgenError(f"-atol and -rtol are the allclose comparator's, not {given}'s")
    return Comparison(given, v.get("atol"), v.get("rtol"))


def _dialect(argv: list[str]) -> tuple[bool, Table]:
    miopen = bool(argv) and argv[0] in MIOPEN_COMMANDS
    return miopen, (MIOPEN_FLAGS if miopen else ROCMLIR_FLAGS)


def parse(argv: list[str]):
    """Flags (without the program name) -> a validated RunConfig, or ConvgenError."""
    argv = [str(a) for a in argv]
    miopen, table = _dialect(argv)
    try:
        if miopen:
            values = scan(argv[1:], table)
            values["type"] = MIOPEN_COMMANDS[argv[0]]
        else:
            values = scan(argv, table)
        return _build(values, miopen, tuple(argv))
    except ConvgenError as e:
        raise named_error(e, argv) from None


# ---- errors: which flag to change -------------------------------------------------

# ConvgenError.field -> the dests of the flags that set it
_FIELD_DESTS = {"layout.input": ("in_layout",), "layout.filter": ("fil_layout",),
                "layout.output": ("out_layout",), "rand_range": ("rand_min", "rand_max"),
                "rand_int_range": ("rand_min_int", "rand_max_int"),
                "ref_accumulate": ("ref_accumulate", "validator")}


def _where(field: str, argv: list[str], table: Table | None = None) -> str | None:
    miopen, dialect = _dialect(argv)
    table = table or dialect
    if field == "type" and miopen and table is MIOPEN_FLAGS:
        return f"'{argv[0]}'"
    names = [table.spelling(d) for d in _FIELD_DESTS.get(field, (field,))]
    names = [n for n in names if n]
    if field == "ref_accumulate" and names:
        return f"{names[0]} with -pv_with_gpu"
    if field == "perf_config":
        text = _last_value(argv, "perf_config")
        positional = any("=" not in item for item in text.split(",") if item.strip())
        return f"-perf_config {text}" if positional else "-perf_config"
    if field in ("json", "dump", "kern", "ref"):
        return "--" + field
    return "/".join(names) or None


def _last_value(argv: list[str], dest_key: str) -> str:
    """The text the last flag named `dest_key` was given on this command line."""
    text = ""
    for i, a in enumerate(argv):
        name, eq, value = a.lstrip("-").partition("=")
        if a.startswith("-") and flag_key(name) == dest_key:
            text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    return text


def named_error(e: ConvgenError, argv: list[str], table: Table | None = None) -> ConvgenError:
    """e's message prefixed with the flag its field names (as this command line spells it)."""
    where = _where(e.field, argv, table) if e.field else None
    msg = str(e)
    if where and e.field == "perf_config" and where != "-perf_config":
        text = where.split(" ", 1)[-1]
        try:
            form, fields = perf_text.form(text), perf_text.parse(text, PERF_FIELDS)
        except ValueError:
            form = None
        if form:
            msg += f" ({form} read as {','.join(f'{k}={v}' for k, v in fields)})"
    return ConvgenError(f"{where}: {msg}" if where else msg)


# ---- help ------------------------------------------------------------------------------


def flags_markdown() -> str:
    """docs/flags.md: every flag of every dialect and command, its meaning and default
    (scripts/gen-docs)."""
    def table(t: Table) -> list[str]:
        lines, section = [], None
        for f in t.flags:
            if f.section != section:
                section = f.section
                lines += ["", f"**{section}**", "", "| flag | meaning | default |",
                          "| --- | --- | --- |"]
            names = ", ".join(f"`-{n}`" for n in f.names)
            text = f.help.replace("|", "\\|")
            lines.append(f"| {names} | {text} | {f.default_text.replace('|', chr(92) + '|')} |")
        return lines
    out = ["# convgen flags", "",
           "Generated from the flag tables of `tools/convgen/cli.py` and of each command "
           "(`convgen.commands`) by `scripts/gen-docs`; `convgen --help`, `convgen conv --help` "
           "and `convgen COMMAND --help` print the same.",
           "Flags take one or two dashes and `-flag=value` or `-flag value`; the last of a "
           "repeated flag wins; a boolean flag alone means true and also takes `=0/1`, "
           "`=on/off`, `=true/false`.", "",
           "## rocmlir-gen / miopen-gen lines (the default)"]
    out += table(ROCMLIR_FLAGS)
    out += ["", "## MIOpenDriver lines: `convgen conv|convfp16|convbfp16|convint8 ...`",
            "", "convgen's own data, kernel, reference, threshold and report flags (above) work "
            "here too."]
    out += table(Table(tuple(f for f in MIOPEN_FLAGS.flags if f.section not in
                             {t for t, _ in _COMMON}), {}))
    seen = set()
    for c in all_commands():
        if id(c.flags) in seen:
            continue   # train-selector and eval-selector share one table
        seen.add(id(c.flags))
        out += ["", f"## `{c.synopsis}`"]
        out += table(c.flags)
    return "\n".join(out) + "\n"


def usage(table: Table = ROCMLIR_FLAGS) -> str:
    names = " | ".join(c.name for c in all_commands())
    head = {id(ROCMLIR_FLAGS): (
                "usage: convgen [flags]                      rocmlir-gen / miopen-gen spellings\n"
                "       convgen conv|convfp16|convbfp16|convint8 [flags]   MIOpenDriver spellings "
                "(convgen conv --help)\n"
                f"       convgen {names} [flags]   (each --help)\n\n"
                "Builds a Triton conv kernel for the problem, runs it on seeded inputs, checks it "
                "against a reference\nand prints one bit per metric, [RMS maxAbsDiff maxRelDiff]. "
                "Exit 0 when it verified (whatever the bits),\n2 with one 'convgen: error:' line "
                "when it could not run.\n"),
            id(MIOPEN_FLAGS): (
                "usage: convgen conv|convfp16|convbfp16|convint8 [MIOpenDriver flags] "
                "[convgen flags]\n\nMIOpenDriver spellings; the CPU reference is on by default.\n"),
            }[id(table)]
    return (head + flag_help(table)
            + "\nFlags take one or two dashes and -flag=value or -flag value; the last of a "
              "repeated flag wins.\n")


# ---- convgen compare ----------------------------------------------------------------------

def parse_compare(argv: list[str]):
    v = scan([str(a) for a in argv], COMPARE_FLAGS)
    for key, flag in (("kern", "--kern"), ("ref", "--ref"), ("type", "-t")):
        if key not in v:
            raise ConvgenError(f"missing {flag}")
    return CompareConfig(kern_path=v["kern"], ref_path=v["ref"],
                         dtype=dtypes.elem_type(v["type"], conv_input=False),
                         thresholds=tolerance.Thresholds(rms=v.get("rms"), abs=v.get("abs"),
                                                         rel=v.get("rel")),
                         comparison=_comparison(v, rocmlir=False),
                         accumulate=v.get("accumulate"),
                         print_results=v.get("print_results", "summary"),
                         json_path=v.get("json"))


# ---- a test's flags, checked ----------------------------------------------------------------

def parse_checked(words: list[str]):
    """A test's own flags (a study list's line) as a run that is checked against the CPU
    reference; the study then sets the validator, data and path of each case itself."""
    return parse(list(words) + ["-pv"])


# ---- what other tools need spelled --------------------------------------------------------


def command_type(words: list[str]) -> str | None:
    """The element type a convgen command line (as words) tests: its MIOpenDriver command's
    (whose -t is a timing flag), or its -t value; f32 when neither is given; None for an
    unknown -t value."""
    for w in words:
        if w in MIOPEN_COMMANDS:
            return MIOPEN_COMMANDS[w]
        if w in ("|", "&&", "||", ";"):
            break
    for i, w in enumerate(words):
        m = re.fullmatch(r"--?t(?:=(.*))?", w)
        if m:
            value = m.group(1) if m.group(1) is not None else (words[i + 1] if i + 1 < len(words) else "")
            t = dtypes.find(value)
            return t.name if t else None
    return "f32"


def setting_words(semantics: str | None = None, comparator: str | None = None) -> list[str]:
    """The flags that give a convgen line a folder's semantics or a run's default
    comparator (convgen.lit_format puts them before the line's own, which win)."""
    words = []
    if semantics and semantics != "convgen":
        words.append(f"--semantics={semantics}")
    if comparator:
        words.append(f"--comparator={comparator}")
    return words


def lit_substitutions(*, random_seed: str, validation: str, xdlops: bool,
                      comparator: str = "") -> list[tuple[str, str]]:
    """The flag text of the suite's lit substitutions; ValueError names a bad setting."""
    seed = random_seed.strip().lower()
    try:
        _rand(seed)   # what -rand takes, so a setting lit accepts never fails every test
    except ValueError as e:
        raise ValueError(f"random_seed={random_seed!r}: {e}") from None
    if validation.strip().lower() not in ("cpu", "gpu"):
        raise ValueError(f"validation={validation!r}: expected cpu or gpu")
    return [
        ("%random_data", f"-rand {seed}"),
        # fp16/bf16 random tests: the study's range away from zero, [-3,-1] and [1,3]
        # (inputs.py says why both signs). With random_seed=fixed the range is unused.
        ("%away_from_zero", "-rand_min 1 -rand_max 3 -rand_both_signs"),
        ("%xdlops", "-x2" if xdlops else "-x2=0"),
        ("%pv", "-pv" if validation.strip().lower() == "cpu" else "-pv_with_gpu"),
        ("%comparator", " ".join(setting_words(comparator=comparator))),
    ]


# ---- main ---------------------------------------------------------------------------------


def _compare(name: str, args: list[str]) -> int:
    return compare(parse_compare(args))


# the suite's own commands beside a test run; the plug-ins' come from convgen.commands
COMMANDS = (
    Command("compare", "convgen compare --kern KERN.npy --ref REF.npy -t TYPE [flags]",
            "Verifies two saved arrays (for example a --dump) with no kernel and no "
            "convolution.\n", COMPARE_FLAGS, _compare),
)


def all_commands() -> list[Command]:
    """The suite's commands, then those of the plug-ins that are installed."""
    return list(COMMANDS) + commands.plugin_commands()


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        wants_help = any(a in ("-h", "-help", "--help") for a in argv)
        command = commands.find(argv[0], COMMANDS) if argv else None
        if command is not None:
            if wants_help:
                print(command.usage(), end="")
                return 0
            try:
                return command.run(argv[0], [str(a) for a in argv[1:]])
            except ConvgenError as e:
                raise named_error(e, argv[1:], command.flags) from None
        if argv and re.fullmatch(r"[a-z][a-z0-9-]*", argv[0]) and argv[0] not in MIOPEN_COMMANDS:
            names = ", ".join(c.name for c in all_commands())
            raise ConvgenError(f"unknown command '{argv[0]}' (commands: {names}; a test run's "
                               "flags start with '-')")
        if wants_help:
            print(usage(_dialect(argv)[1]), end="")
            return 0
        config = parse(argv)
        try:
            return driver.run(config, program=PROGRAM)
        except ConvgenError as e:
            raise named_error(e, argv) from None
    except ConvgenError as e:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            quiet_broken_pipe()
        print(f"convgen: error: {one_line(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return quiet_broken_pipe()
    except KeyboardInterrupt:
        print("convgen: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

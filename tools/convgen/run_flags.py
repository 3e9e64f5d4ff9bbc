"""convgen's own flags: the tables of a test run's two dialects (rocmlir-gen / miopen-gen
spellings, MIOpenDriver's) and of `convgen compare`, with the converters only they use
and the defaults a line leaves out. cli.py reads command lines with them; every flag's
meaning and default is here, and docs/flags.md is generated from these tables.
Importing this module imports neither torch nor Triton."""
from __future__ import annotations

import re
from typing import Callable

from convgen import dtypes, perf_text, tolerance
from convgen.directions import BWD_DATA, BWD_WEIGHT, FWD
from convgen.errors import ConvgenError
from convgen.flags import (as_text, choice, flag_table, integer, nonneg, nonneg_real, one_of,
                           positive, real, switch)
from convgen.inputs import MAX_SEED
from convgen.options import FIXED_PATTERN
from convgen.problem import normalize_layout

_IGNORE_VALUE, _IGNORE_BOOL = as_text, switch()


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
               "s2d", "persistent", "streamk", "tail", "swap_ab", "direct")


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


def rand(text: str) -> tuple[str, int | None]:
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
MIOPEN_LETTERS = {
    "input": {"N": "n", "C": "c", "H": "h", "W": "w", "G": "g", "D": "2"},
    "filter": {"N": "k", "C": "c", "H": "y", "W": "x", "G": "g", "D": "2"},
    "output": {"N": "n", "C": "k", "H": "h", "W": "w", "G": "g", "D": "2"},
}
for _letters in MIOPEN_LETTERS.values():   # rocMLIR's lists also number them: N01GC
    _letters.update({"0": "0", "1": "1", "2": "2"})


def _tuning_db(text: str) -> str | None:
    return None if text.lower() == "none" else text


# where a command's tuning database is when no flag names one (convtune.store.resolve)
TUNING_DB_DEFAULT = ("$CONVGEN_TUNING_DB, else the local store built from tuning/data "
                  "(in $CONVGEN_CACHE_DIR, default ~/.cache/convgen)")


def _miopen_layout(tensor: str) -> Callable[[str], str]:
    letters = MIOPEN_LETTERS[tensor]

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


CHECKED_COMPAT = ("in_type", "fil_type", "out_type")


def _compat_rows(flags) -> list:
    rows = []
    for names, takes_value, why in flags:
        first = names if isinstance(names, str) else names[0]
        dest = first if first in CHECKED_COMPAT else None
        rows.append((names, dest, _IGNORE_VALUE if takes_value else _IGNORE_BOOL,
                     f"accepted, no effect: {why}" if dest is None else why, ""))
    return rows


# convgen's own options, shared by both dialects (no single letters, so no clash
# with MIOpenDriver's).
COMMON = (
    ("Data", [
        ("rand", "rand", rand,
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
        ("impl", "impl", as_text,
         "the implementation under test: convgen (its Triton kernels), aten (torch's "
         "convolution: cuDNN, MIOpen, oneDNN), inductor (torch.compile, max-autotune), or a "
         "user's MODULE:FUNCTION or FILE.py:FUNCTION (docs/implementations.md); a run another "
         "implementation cannot compute ends `convgen: unsupported:` with exit status 77",
         "$CONVGEN_IMPL, else convgen"),
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
    *COMMON,
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
    *COMMON,
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
    *[(title, [r for r in rows if r[1] != "dump"]) for title, rows in COMMON
      if title.startswith(("Thresholds", "Report"))],
    fold_case=True,
)

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

import math
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from convgen import dtypes, models, tolerance
from convgen.directions import BWD_DATA, BWD_WEIGHT, FWD
from convgen.errors import ConvgenError
from convgen.inputs import MAX_SEED
from convgen.options import FIXED_PATTERN

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

_TRUE = ("true", "1", "on", "yes")
_FALSE = ("false", "0", "off", "no")


# ---- converters: text -> value, or ValueError("expected ...") ----------------

def _int(lo: int | None = None, what: str = "an integer") -> Callable[[str], int]:
    def conv(text: str) -> int:
        if not re.fullmatch(r"[+-]?\d+", text.strip()):
            raise ValueError(f"expected {what}")
        val = int(text)
        if lo is not None and val < lo:
            raise ValueError(f"expected {what}")
        return val
    return conv


_size = _int(1, "a positive integer")
_nonneg = _int(0, "a non-negative integer")


def _float(text: str) -> float:
    try:
        val = float(text)
    except ValueError:
        raise ValueError("expected a number") from None
    if not math.isfinite(val):
        raise ValueError("expected a finite number")
    return val


def _float_nonneg(text: str) -> float:
    val = _float(text)
    if val < 0:
        raise ValueError("expected a number >= 0")
    return val


def _float_pos(text: str) -> float:
    val = _float(text)
    if val <= 0:
        raise ValueError("expected a number > 0")
    return val


def _threshold(text: str) -> tolerance.Limit:
    return tolerance.parse_limit(text)


def _str(text: str) -> str:
    return text


def _choice(mapping: dict[str, Any]) -> Callable[[str], Any]:
    def conv(text: str) -> Any:
        key = text.strip().lower()
        if key not in mapping:
            raise ValueError(f"expected one of {', '.join(mapping)}")
        return mapping[key]
    return conv


def _words(*names: str) -> Callable[[str], str]:
    return _choice({n: n for n in names})


def _bool_word(text: str) -> bool:
    key = text.strip().lower()
    if key in _TRUE:
        return True
    if key in _FALSE:
        return False
    raise ValueError("expected true/false, 1/0, on/off")


def _switch(on: Any = True, off: Any = False) -> Callable[[str], Any]:
    """A boolean flag: alone it means true; `=false` etc. give `off`."""
    def conv(text: str) -> Any:
        return on if _bool_word(text) else off
    conv.boolean = True  # type: ignore[attr-defined]
    return conv


def _dtype(text: str) -> str:
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
    from convgen.problem import normalize_layout

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
    from convgen import perf_text
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


# where a command's tuning database is when no flag names one (tuning_db.resolve)
_STORE_DEFAULT = ("$CONVGEN_TUNING_DB, else the local store built from tuning/data "
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

@dataclass(frozen=True)
class Flag:
    names: tuple                     # spellings, the first one shown in help
    dest: str | None                 # key of the collected values; None: read and dropped
    convert: Callable[[str], Any]    # text -> value; ValueError says what was expected
    help: str = ""
    default: str | Callable[[], str] = ""   # shown in help; a callable where another module owns it
    section: str = ""

    @property
    def default_text(self) -> str:
        return self.default() if callable(self.default) else self.default

    @property
    def boolean(self) -> bool:       # value optional: alone it means true
        return getattr(self.convert, "boolean", False)


@dataclass(frozen=True)
class Table:
    flags: tuple                     # Flag rows, in help order
    by_key: dict                     # normalised spelling (lower case with fold_case) -> Flag
    fold_case: bool = False          # -RMS_threshold and -rms_threshold are one flag

    def get(self, name: str) -> Flag | None:
        key = _key(name)
        return self.by_key.get(key.lower() if self.fold_case else key)

    def spelling(self, dest: str) -> str | None:
        """How this table spells the flag that fills `dest` (its first name)."""
        for f in self.flags:
            if f.dest == dest:
                return "-" + f.names[0]
        return None


def _key(name: str) -> str:
    return name.replace("-", "_")


def _table(*sections, fold_case: bool = False) -> Table:
    """sections: (title, [(names, dest, converter, help, default), ...]) pairs."""
    flags, by_key = [], {}
    for title, rows in sections:
        for names, dest, conv, *text in rows:
            names = (names,) if isinstance(names, str) else tuple(names)
            f = Flag(names, dest, conv, *(text + ["", ""])[:2], section=title)
            flags.append(f)
            for name in names:
                key = _key(name).lower() if fold_case else _key(name)
                assert key not in by_key, f"flag {name} defined twice"
                by_key[key] = f
    return Table(tuple(flags), by_key, fold_case)


_IGNORE_VALUE, _IGNORE_BOOL = _str, _switch()

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
        ("rand_min", "rand_min", _float, "smallest random value (with -rand_both_signs: "
         "smallest magnitude)", "-1 (integer types: -5)"),
        ("rand_max", "rand_max", _float, "largest random value (or magnitude)",
         "1 (integer types: 5)"),
        ("rand_type", "rand_type", _words("int", "float"),
         "draw integers (exact products) or floats in the range", "the element type's kind"),
        ("rand_side", "rand_side", _words("both", "input", "filter", "output"),
         "the one tensor that gets random data; the other input is all ones", "both"),
        ("rand_both_signs", "rand_both_signs", _switch(),
         "draw each magnitude between -rand_min and -rand_max, then give it a random sign "
         "(-rand_min 1 -rand_max 3: the fp16 study's range away from zero)", "off"),
        ("semantics", "semantics", _words("convgen", "rocmlir"),
         "whose rules make the data and judge it: convgen's (Philox draws, the auto "
         "thresholds), or rocmlir-gen's, for lines imported from its suites (-rand fixed by "
         "default; integers in [-rand_min_int, -rand_max_int) unless -rand_type float, "
         "floats over [-rand_min, -rand_max] (0, 1); glibc rand(); the matrix-core path "
         "unless -x2=0; its legacy comparator)",
         "convgen"),
        ("rand_min_int", "rand_min_int", _int(), "--semantics=rocmlir: smallest integer drawn", "-5"),
        ("rand_max_int", "rand_max_int", _int(),
         "--semantics=rocmlir: integers are drawn below this", "5"),
    ]),
    ("Kernel", [
        ("x2", "matrix_cores", _switch(), "the matrix-core path (tl.dot); off: the FMA path",
         "off"),
        ("mfma", "matrix_cores", _choice({"on": True, "off": False}), "on|off: the same as -x2",
         "off"),
        ("perf_config", "perf_config", _perf_config,
         "tile configuration: key=value pairs of " + ",".join(PERF_FIELDS)
         + " (waves_per_eu, matrix_instr_nonkdim, kpack: AMD only), or a rocMLIR perf string "
         "(8 values, v1: to v4:, FMA forms, gemm:v1:/v2:; docs/flags.md)",
         "chosen from the problem"),
        ("input_precision", "input_precision", _words("ieee", "tf32", "tf32x3"),
         "precision of f32 matrix-core dots", "ieee"),
        ("tuning_db", "tuning_db", _tuning_db,
         "the tuning database a run without -perf_config takes its config from (the fastest "
         "measured for exactly this problem on this device, by the nearest Triton version "
         "where this one measured none); none: no tuned entry",
         _STORE_DEFAULT),
        ("selector", "selector", _tuning_db,
         "the model file that picks a config where the tuning database has no entry (the "
         "candidate its ranking model puts first); none: today's rule",
         "$CONVGEN_SELECTOR, else tuning/models/ARCH.json"),
        ("flush_subnormals", "flush_subnormals", _switch(),
         "zero the kernel's subnormal inputs first (how MI200 matrix cores read fp16/bf16)",
         "off"),
    ]),
    ("Reference (the last of -pv / -pv_with_gpu wins; -pv=false turns checking off)", [
        (("pv", "pv_with_cpp", "pv_with_mlir"), "validator", _switch("cpu", None),
         "verify against the CPU reference (float64)", "off; MIOpenDriver lines: on"),
        ("pv_with_gpu", "validator", _switch("gpu", None),
         "verify against the GPU reference (FMA only, fp32 accumulation)", "off"),
        ("ref_accumulate", "ref_accumulate", _size,
         "CPU reference: sum N products in float64, then round to fp32 and add (how dot "
         "units accumulate)", "off: one float64 sum"),
        ("ref_flush_subnormals", "ref_flush_subnormals", _switch(),
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
        ("comparator", "comparator", _words(*tolerance.COMPARATORS),
         "who judges: convgen's checks, or rocMLIR's legacy (RMS 3e-5, f16/bf16 1e-3; abs 100; "
         "rel 1e-6, forced to 100 for f16/bf16) or allclose (|kern-val| <= atol + rtol*|val| "
         "for every element, rocMLIR's per-type atol and rtol)",
         "convgen; legacy with --semantics=rocmlir; allclose with -atol or -rtol"),
        ("atol", "atol", _float_nonneg, "allclose's atol", "rocMLIR's per type and reduction"),
        ("rtol", "rtol", _float_nonneg, "allclose's rtol", "rocMLIR's per type"),
    ]),
    ("Report", [
        (("print_verify_results", "p_verify", "pv_results"), "print_results",
         _words("always", "failure", "summary", "off"),
         "how much to print: the summary line, histograms and worst elements too (always), "
         "only on failure, or nothing but the bits; the reasons for a 0 bit go to stderr", "summary"),
        ("dump", "dump", _str, "save inputs, kernel output and reference as DIR/NAME.npy", ""),
        ("json", "json", _str, "save metrics, thresholds, histograms, findings as JSON", ""),
    ]),
)

ROCMLIR_FLAGS = _table(
    ("Problem", [
        ("operation", "direction", _choice(OPERATIONS),
         "conv2d|conv (forward), conv2d_bwd_data|conv_bwd_data, conv2d_bwd_weight|conv_bwd_weight",
         "conv2d"),
        ("t", "type", _dtype, "element type: " + ", ".join(dtypes.CONV_TYPES)
         + " (i8: forward, i32 output; fp8: f32 output)", "f32"),
        ("fil_layout", "fil_layout", _layout("filter"), "filter layout, letters g,k,c,y,x",
         "kcyx"),
        ("in_layout", "in_layout", _layout("input"), "input layout, letters n,g,c,h,w", "nchw"),
        ("out_layout", "out_layout", _layout("output"), "output layout, letters n,g,k,h,w",
         "nkhw"),
        ("batchsize", "n", _size, "batch size N", "required, or -p"),
        (("groupsize", "g"), "g", _size, "groups G", "1"),
        ("in_channels", "c", _size, "input channels (all groups)", "required, or -p"),
        ("out_channels", "k", _size, "output channels (all groups)", "required, or -p"),
        ("in_h", "hi", _size, "input height", "required, or -p"),
        ("in_w", "wi", _size, "input width", "required, or -p"),
        ("fil_h", "y", _size, "filter height", "required, or -p"),
        ("fil_w", "x", _size, "filter width", "required, or -p"),
        ("out_h", "out_h", _size, "output height: checked against the computed one",
         "computed"),
        ("out_w", "out_w", _size, "output width: checked against the computed one", "computed"),
        ("dilation_h", "dil_h", _size, "dilation", "1"),
        ("dilation_w", "dil_w", _size, "dilation", "1"),
        ("conv_stride_h", "stride_h", _size, "stride", "1"),
        ("conv_stride_w", "stride_w", _size, "stride", "1"),
        ("padding_h", "pad_h", _nonneg, "padding, both sides", "0"),
        ("padding_w", "pad_w", _nonneg, "padding, both sides", "0"),
        ("padding_h_l", "pad_h_l", _nonneg, "padding on one side (wins over -padding_h)",
         "-padding_h"),
        ("padding_h_r", "pad_h_r", _nonneg, "padding on one side", "-padding_h"),
        ("padding_w_l", "pad_w_l", _nonneg, "padding on one side", "-padding_w"),
        ("padding_w_r", "pad_w_r", _nonneg, "padding on one side", "-padding_w"),
        ("p", "populate", _switch(),
         "rocmlir-gen's default problem: N=128 C=8 K=128 32x32 3x3 (explicit sizes win)", "off"),
        ("in_d", "in_d", _size, "input depth: above 1 (or -fil_d, -padding_d) a 3-D problem, "
         "whose layouts name the depth (digit 2: nc012, kc012)", "1"),
        ("fil_d", "fil_d", _size, "filter depth", "1"),
        ("out_d", "out_d", _size, "output depth: checked against the computed one", "computed"),
        ("padding_d", "pad_d", _nonneg, "depth padding, both sides", "0"),
        ("padding_d_l", "pad_d_l", _nonneg, "depth padding on one side", "-padding_d"),
        ("padding_d_r", "pad_d_r", _nonneg, "depth padding on one side", "-padding_d"),
        ("conv_stride_d", "stride_d", _nonneg, "depth stride", "1"),
        ("dilation_d", "dil_d", _nonneg, "depth dilation", "1"),
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

MIOPEN_FLAGS = _table(
    ("Problem (the command gives the type: conv f32, convfp16, convbfp16, convint8)", [
        (("F", "forw"), "direction", _choice({"0": FWD, "1": FWD, "2": BWD_DATA, "4": BWD_WEIGHT}),
         "direction: 1 (or 0) forward, 2 backward data, 4 backward weight", "1"),
        (("n", "batchsize"), "n", _size, "batch size", str(MIOPEN_DEFAULTS["n"])),
        (("c", "in_channels"), "c", _size, "input channels", str(MIOPEN_DEFAULTS["c"])),
        (("H", "in_h"), "hi", _size, "input height", str(MIOPEN_DEFAULTS["hi"])),
        (("W", "in_w"), "wi", _size, "input width", str(MIOPEN_DEFAULTS["wi"])),
        (("k", "out_channels"), "k", _size, "output channels", str(MIOPEN_DEFAULTS["k"])),
        (("y", "fil_h"), "y", _size, "filter height", str(MIOPEN_DEFAULTS["y"])),
        (("x", "fil_w"), "x", _size, "filter width", str(MIOPEN_DEFAULTS["x"])),
        (("p", "pad_h"), "pad_h", _nonneg, "padding height", "0"),
        (("q", "pad_w"), "pad_w", _nonneg, "padding width", "0"),
        (("u", "conv_stride_h"), "stride_h", _size, "stride height", "1"),
        (("v", "conv_stride_w"), "stride_w", _size, "stride width", "1"),
        (("l", "dilation_h"), "dil_h", _size, "dilation height", "1"),
        (("j", "dilation_w"), "dil_w", _size, "dilation width", "1"),
        (("g", "group_count"), "g", _size, "groups", "1"),
        (("f", "fil_layout"), "fil_layout", _miopen_layout("filter"),
         "filter layout in MIOpen's letters (NCHW, NHWC)", "NCHW"),
        (("I", "in_layout"), "in_layout", _miopen_layout("input"), "input layout", "NCHW"),
        (("O", "out_layout"), "out_layout", _miopen_layout("output"), "output layout", "NCHW"),
        (("m", "mode"), None, _only("conv", why="transposed convolution is not supported"),
         "conv only", "conv"),
        (("_", "spatial_dim"), "spatial_dim", _words("2", "3"),
         "2, or 3: a 3-D problem (the depth flags below; layouts NCDHW, NDHWC)", "2"),
        (("!", "in_d"), "in_d", _size, "input depth (with -_ 3)", "32"),
        (("@", "fil_d"), "fil_d", _size, "filter depth (with -_ 3)", "3"),
        (("$", "pad_d"), "pad_d", _nonneg, "padding in depth (with -_ 3)", "0"),
        (("#", "conv_stride_d"), "stride_d", _nonneg, "stride in depth (with -_ 3)", "1"),
        (("^", "dilation_d"), "dil_d", _nonneg, "dilation in depth (with -_ 3)", "1"),
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

COMPARE_FLAGS = _table(
    ("Compare two saved arrays", [
        ("kern", "kern", _str, "the kernel's output (.npy)", "required"),
        ("ref", "ref", _str, "the reference (.npy), rounded to the output type before comparing",
         "required"),
        (("t", "type"), "type", _any_type,
         "the convolution's type; the arrays are compared in its output type ("
         + ", ".join(dtypes.TYPES) + ")", "required"),
        ("accumulate", "accumulate", _size,
         "products each output element summed (the reduction length: C*Y*X for fwd); auto "
         "thresholds and allclose's atol grow with it", "1"),
    ]),
    # --dump saves inputs and a reference that compare does not have
    *[(title, [r for r in rows if r[1] != "dump"]) for title, rows in _COMMON
      if title.startswith(("Thresholds", "Report"))],
    fold_case=True,
)


# ---- scanning argv --------------------------------------------------------------

def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _looks_like_flag(tok: str) -> bool:
    return tok.startswith("-") and len(tok) > 1 and not _is_number(tok)


def _scan(tokens: list[str], table: Table) -> dict[str, Any]:
    """Collect {dest: value}; the last occurrence of a flag wins."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not _looks_like_flag(tok):
            raise ConvgenError(f"unexpected argument '{tok}' (flags start with '-')")
        spelling, eq, text = tok.partition("=")
        name = spelling[2:] if spelling.startswith("--") else spelling[1:]
        flag = table.get(name) if name and not name.startswith("-") else None
        if flag is None:
            raise ConvgenError(f"unknown flag '{spelling}'")
        if not eq:
            nxt = tokens[i] if i < len(tokens) else None
            if flag.boolean:
                text = "true"
                if nxt is not None and nxt.strip().lower() in _TRUE + _FALSE:
                    text, i = nxt, i + 1
            elif nxt is None or _looks_like_flag(nxt):
                raise ConvgenError(f"flag '{spelling}' is missing its value")
            else:
                text, i = nxt, i + 1
        try:
            val = flag.convert(text)
        except ValueError as e:
            raise ConvgenError(f"invalid value '{text}' for {spelling}: {e}") from None
        if flag.dest is not None:
            values[flag.dest] = val
    return values


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
    from convgen.inputs import validate
    from convgen.options import (DataSpec, KernelOptions, ReferenceOptions, ReportOptions,
                                 RunConfig)
    from convgen.problem import make_problem

    if "type" not in v and "in_type" in v:  # rocmlir-gen lines may give only --in_type
        try:
            v["type"] = _dtype(v["in_type"])
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
    from convgen.options import DataSpec
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
    from convgen.options import Comparison
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
            values = _scan(argv[1:], table)
            values["type"] = MIOPEN_COMMANDS[argv[0]]
        else:
            values = _scan(argv, table)
        return _build(values, miopen, tuple(argv))
    except ConvgenError as e:
        raise _named(e, argv) from None


# ---- errors: which flag to change -------------------------------------------------

# ConvgenError.field -> the dests of the flags that set it
_FIELD_DESTS = {"layout.input": ("in_layout",), "layout.filter": ("fil_layout",),
                "layout.output": ("out_layout",), "rand_range": ("rand_min", "rand_max"),
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
        if a.startswith("-") and _key(name) == dest_key:
            text = value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
    return text


def _named(e: ConvgenError, argv: list[str], table: Table | None = None) -> ConvgenError:
    """e's message prefixed with the flag its field names (as this command line spells it)."""
    where = _where(e.field, argv, table) if e.field else None
    msg = str(e)
    if where and e.field == "perf_config" and where != "-perf_config":
        from convgen import perf_text
        text = where.split(" ", 1)[-1]
        try:
            form, fields = perf_text.form(text), perf_text.parse(text, PERF_FIELDS)
        except ValueError:
            form = None
        if form:
            msg += f" ({form} read as {','.join(f'{k}={v}' for k, v in fields)})"
    return ConvgenError(f"{where}: {msg}" if where else msg)


# ---- help ------------------------------------------------------------------------------

def _flag_help(table: Table, width: int = 100) -> str:
    import textwrap
    lines, section = [], None
    for f in table.flags:
        if f.section != section:
            section = f.section
            lines.append(f"\n{section}:")
        names = ", ".join("-" + n for n in f.names)
        text = f.help + (f" [default: {f.default_text}]" if f.default_text else "")
        first = f"  {names:<26}"
        body = textwrap.wrap(text, width - 29) or [""]
        if len(first) > 28:
            lines.append(first.rstrip())
            lines += ["  " + " " * 27 + b for b in body]
        else:
            lines.append(first + " " + body[0])
            lines += [" " * 29 + b for b in body[1:]]
    return "\n".join(lines) + "\n"


def flags_markdown() -> str:
    """docs/flags.md: every flag of every dialect, its meaning and default (scripts/gen-docs)."""
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
           "Generated from the flag tables of `tools/convgen/cli.py` by `scripts/gen-docs`; "
           "`convgen --help`, `convgen conv --help`, `convgen compare --help` and `convgen tune --help` print the same.",
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
    out += ["", "## `convgen compare --kern KERN.npy --ref REF.npy -t TYPE`"]
    out += table(COMPARE_FLAGS)
    out += ["", "## `convgen tune [tune flags] PROBLEM | --lines FILE | --layers NAME`"]
    out += table(TUNE_FLAGS)
    out += ["", "## `convgen tuning-stats [flags]`"]
    out += table(TUNING_STATS_FLAGS)
    out += ["", "## `convgen tuning-export [flags]`"]
    out += table(TUNING_EXPORT_FLAGS)
    out += ["", "## `convgen train-selector [flags]`, `convgen eval-selector [flags]`"]
    out += table(SELECTOR_FLAGS)
    out += ["", "## `convgen study [flags]`"]
    out += table(STUDY_FLAGS)
    out += ["", "## `convgen study-report [flags]`"]
    out += table(STUDY_REPORT_FLAGS)
    return "\n".join(out) + "\n"


def usage(table: Table = ROCMLIR_FLAGS) -> str:
    head = {id(ROCMLIR_FLAGS): (
                "usage: convgen [flags]                      rocmlir-gen / miopen-gen spellings\n"
                "       convgen conv|convfp16|convbfp16|convint8 [flags]   MIOpenDriver spellings "
                "(convgen conv --help)\n"
                "       convgen compare --kern K.npy --ref R.npy -t TYPE [flags]   (convgen compare "
                "--help)\n"
                "       convgen tune | tuning-stats | tuning-export | train-selector | eval-selector | "
                "study | study-report [flags]   (each --help)\n\n"
                "Builds a Triton conv kernel for the problem, runs it on seeded inputs, checks it "
                "against a reference\nand prints one bit per metric, [RMS maxAbsDiff maxRelDiff]. "
                "Exit 0 when it verified (whatever the bits),\n2 with one 'convgen: error:' line "
                "when it could not run.\n"),
            id(MIOPEN_FLAGS): (
                "usage: convgen conv|convfp16|convbfp16|convint8 [MIOpenDriver flags] "
                "[convgen flags]\n\nMIOpenDriver spellings; the CPU reference is on by default.\n"),
            id(TUNE_FLAGS): (
                "usage: convgen tune [tune flags] PROBLEM | --lines FILE | --layers NAME\n\n"
                "Measures every kernel config of the tuning space (kernels/config.py) on this "
                "device for each problem,\nchecks the fastest with the reference and records "
                "all of it in the tuning database (by default\nthe local store); a run without "
                "-perf_config then takes the best. An interrupted run resumes.\n"
                "`convgen tuning-export` writes what it measured into the tracked data (tuning/data).\n"),
            id(SELECTOR_FLAGS): (
                "usage: convgen train-selector [flags]\n       convgen eval-selector [flags]\n\n"
                "train-selector fits the config selector (LightGBM on log1p(TFLOPS)) on every "
                "measurement of\nthe tuning database for one arch and writes the model a run "
                "without a tuned entry uses;\neval-selector cross-validates it with folds "
                "grouped by shape (docs/config-selection.md).\n"),
            id(STUDY_FLAGS): (
                "usage: convgen study [flags]\n\n"
                "Runs the fp16 study's grid (docs/fp16-study.md): each test under each validator, "
                "kernel path,\ninput range, reference emulation and device flushing, one JSON "
                "line per case; then writes\nthe tables and plots. A run that was stopped "
                "resumes.\n"),
            id(STUDY_REPORT_FLAGS): (
                "usage: convgen study-report [flags]\n\n"
                "Writes the fp16 study's tables (markdown blocks of the doc, CSV) and plots (PNG) "
                "from convgen\nstudy's results and the study's own.\n"),
            id(TUNING_STATS_FLAGS): (
                "usage: convgen tuning-stats [--data DIR] [--lines FILE]\n\n"
                "What the tracked tuning data (text, tuning/data) holds, one line per device and "
                "Triton version.\n"),
            id(TUNING_EXPORT_FLAGS): (
                "usage: convgen tuning-export [--db DB] [--data DIR] [--out DIR]\n\n"
                "Writes the rows a tuning database holds beyond the tracked data as new text "
                "files, to commit.\n"),
            id(COMPARE_FLAGS): (
                "usage: convgen compare --kern KERN.npy --ref REF.npy -t TYPE [flags]\n\n"
                "Verifies two saved arrays (for example a --dump) with no kernel and no "
                "convolution.\n")}[id(table)]
    return (head + _flag_help(table)
            + "\nFlags take one or two dashes and -flag=value or -flag value; the last of a "
              "repeated flag wins.\n")


# ---- convgen compare ----------------------------------------------------------------------

def parse_compare(argv: list[str]):
    from convgen.options import CompareConfig
    v = _scan([str(a) for a in argv], COMPARE_FLAGS)
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


# ---- convgen tune -------------------------------------------------------------------------

_DIRECTION_OPERATION = {"fwd": "conv2d", "bwd_data": "conv2d_bwd_data",
                        "bwd_weight": "conv2d_bwd_weight"}


def _timestamp(text: str) -> str:
    """A time as the tuning database writes it (measured_at), so the two compare as text."""
    import datetime
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").strftime("%Y-%m-%dT%H:%M:%S")
    except ValueError:
        raise ValueError("expected a time as YYYY-MM-DDTHH:MM:SS") from None


def _list(conv: Callable[[str], Any]) -> Callable[[str], tuple]:
    """A comma-separated list, each item converted."""
    return lambda text: tuple(conv(item) for item in text.split(","))


TUNE_FLAGS = _table(
    ("convgen tune (every other flag is the problem's, as in a test; -x2 is implied)", [
        ("db", "db", _str, "the tuning database to fill (created when missing); "
         "`convgen tuning-export` then writes what it measured into tuning/data",
         _STORE_DEFAULT),
        ("lines", "lines", _str, "a file of problems: one convgen flag set per line (# starts a "
         "comment line; a pipe and what follows it are dropped)", ""),
        ("layers", "layers", _words("issue", "selector", *models.NETWORKS),
         "a model's layers, NHWC/KYXC: issue (the seven layers of docs/conv-benchmark.md), "
         + ", ".join(models.NETWORKS) + " (models.py), or selector: the selector's training "
         "set (every network, batches 1 to 256; --batch and --types do not apply)", ""),
        ("batch", "batch", _list(_size), "batch sizes of --layers", "256"),
        ("types", "types", _list(_dtype), "types of --layers", "f16,bf16"),
        ("directions", "directions", _list(_choice(_DIRECTION_OPERATION)),
         "directions of --layers: fwd, bwd_data, bwd_weight", "all three"),
        ("max_configs", "max_configs", _size, "measure at most the first N configs of the space",
         "all"),
        ("top", "top", _size, "measure only the N configs the selector model (the problem's "
         "-selector) ranks first, its pick first; a problem no model ranks is searched whole. "
         "The best is marked as of those N, and no selector trains on the problem until its "
         "whole space is measured", "all"),
        ("jobs", "jobs", _size, "configs compiled at once", "the CPU count"),
        ("retime_before", "retime_before", _timestamp,
         "time again every config that ran and was timed before this UTC time "
         "(YYYY-MM-DDTHH:MM:SS, as the database's measured_at; a stopped run given the same "
         "time goes on where it stopped)", "off"),
        ("retime_under", "retime_under", _float_pos,
         "with --retime-before: only the configs whose time was under this many ms (a launch "
         "whose Python outlasts its GPU work was timed as the host's time; above the bound "
         "the GPU's own time was measured)", "every one"),
        ("allow_cpu", "allow_cpu", _switch(),
         "in Triton's interpreter, still choose a best (its times mean nothing)", "off"),
    ]))


TUNING_STATS_FLAGS = _table(
    ("convgen tuning-stats: what the tracked tuning data holds, one line per (arch, device, "
     "Triton version): ARCH DEVICE TRITON problems=N (with a checked best) measurements=M", [
        ("data", "data", _str, "the folder of tracked tuning data (text)",
         "$CONVGEN_TUNING_DATA, else tuning/data"),
        ("lines", "lines", _str, "instead, how many problems of this list (as convgen tune "
         "--lines takes it) each device has searched through the whole tuning space: "
         "ARCH DEVICE TRITON searched=K of=N", "off"),
    ]))

TUNING_EXPORT_FLAGS = _table(
    ("convgen tuning-export: write what a tuning database measured beyond the tracked data "
     "as new text files (one per arch, device and direction), to commit as they are", [
        ("db", "db", _str, "the tuning database whose rows to write", _STORE_DEFAULT),
        ("data", "data", _str, "the folder of tracked tuning data: what it holds is not "
         "written again, and the new files go there", "$CONVGEN_TUNING_DATA, else tuning/data"),
        ("out", "out", _str, "write the new files here instead (a GPU machine's output folder), "
         "to copy into the tracked data", "the -data folder"),
    ]))


def _selector_trees() -> str:
    from convgen import selector   # imported for help alone: a run does not pay for it
    return str(selector.TREES)


SELECTOR_FLAGS = _table(
    ("convgen train-selector / eval-selector", [
        ("db", "db", _str, "the tuning database to learn from", _STORE_DEFAULT),
        ("arch", "arch", _str, "the device arch whose measurements to use (sm90, gfx942, ...)",
         "sm90"),
        ("device", "device", _str, "learn from this device's measurements alone (its name as "
         "the database and nvidia-smi spell it, e.g. 'NVIDIA H100 80GB HBM3'); train-selector "
         "still writes --out, by default the shipped model", "every device of the arch"),
        ("test_device", "test_device", _str,
         "eval-selector: judge the picks on this device's problems alone, each by the fold's "
         "model that learnt from --device's problems of the other folds (a shape is in one fold "
         "on every device; one that --device never measured, fold 0's); the table adds the best "
         "config another device measured for them",
         "none"),
        ("out", "out", _str, "train-selector: the model file to write",
         "tuning/models/ARCH.json"),
        ("warm_start", "warm_start", _str,
         "train-selector: a model to continue from (its trees kept, more added)", "none"),
        ("trees", "trees", _size, "boosting rounds (a warm start adds fewer)", _selector_trees),
        ("folds", "folds", _size, "cross-validation folds, grouped by shape (eval-selector; train-selector learns from them the families that keep the rule)", "5"),
        ("group", "group", _words("shape", "layer"),
         "eval-selector: what a fold holds out whole: shape (a layer at one batch) or layer "
         "(a layer at every batch measured)", "shape"),
        ("shuffles", "shuffles", _nonneg,
         "eval-selector: as many more cross-validations with the groups dealt into folds by "
         "a seeded hash (seeds 1, 2, ...); prints and writes (`shuffled`) the mean of their numbers "
         "with the first's", "0"),
        ("json", "json", _str, "eval-selector: write the evaluation here as JSON", "none"),
    ]))


STUDY_FLAGS = _table(
    ("convgen study", [
        ("tests", "tests", _str, "the test list (tab-separated: name, flags, source, outputs, note)",
         "study/fp16/tests.tsv: the fp16 study's 107 tests"),
        ("small", "small", _switch(),
         "a few of the tests, shrunk to interpreter sizes, over the whole grid (CI runs it)", "off"),
        ("only", "only", _list(_str), "run only these tests (names, comma-separated)", "all"),
        ("out", "out", _str, "the results file (JSON lines; a run that was stopped resumes)",
         "docs/data/fp16-study/ARCH.jsonl (ARCH-small.jsonl with --small)"),
        ("seed", "seed", _size, "the random seed of every draw", "1"),
        ("jobs", "jobs", _size, "processes at once, each with its share of the CPU cores (the "
         "float64 references); the draws of a test and range are split among them", "1"),
        ("ranges", "ranges", _list(_words("r0", "r1", "r4", "r5", "away")),
         "input ranges: r0 [-1,1], r1 [-10,10], r4 [1,5], r5 [5,10], away [-3,-1] U [1,3]",
         "all five"),
        ("validators", "validators", _list(_words("cpu", "gpu")),
         "references: cpu (float64), gpu (the FMA kernel)", "cpu,gpu"),
        ("paths", "paths", _list(_words("x2", "fma")), "kernel paths: x2 (matrix cores), fma",
         "x2,fma"),
        ("emulations", "emulations", _list(_words("none", "acc4", "flush")),
         "CPU reference emulations: none, acc4 (fp32 sums every 4 products), flush (subnormal "
         "inputs zeroed)", "none,acc4,flush"),
        ("emulation_ranges", "emulation_ranges", _list(_words("r0", "r1", "r4", "r5", "away")),
         "the ranges the emulations run on (acc4 costs the CPU reference about R/4 passes over "
         "the output)", "r0, as in the study"),
        ("device_flush", "device_flush", _list(_words("keep", "flush")),
         "the kernel's subnormal inputs: keep, flush (as MI200's matrix cores do)", "keep,flush"),
        ("report", "report", _switch(),
         "then write the tables and plots (convgen study-report): into build/fp16-study, or "
         "with -small or -out into a folder beside the results (FILE-report/tables.md)", "on"),
    ]))

STUDY_REPORT_FLAGS = _table(
    ("convgen study-report", [
        ("results", "results", _list(_str), "result files of convgen study (comma-separated)",
         "every docs/data/fp16-study/*.jsonl but the -small ones"),
        ("study_results", "study_results", _str,
         "the study's raw_results folder (zhanglx13/llvm-project-mlir-dev-utils, "
         "fp16_experiment/raw_results): its tables from its files, and a test-by-test comparison",
         "its aggregates in study/fp16/published.json"),
        ("write_published", "write_published", _switch(),
         "with -study_results: rewrite study/fp16/published.json from the study's files", "off"),
        ("out", "out", _str, "the report's folder: its tables (tables.md and a CSV file each) "
         "and plots", "build/fp16-study"),
        ("update_docs", "update_docs", _switch(),
         "instead, rewrite the study blocks of the tracked page docs/fp16-study.md and the "
         "plots it shows, in docs/data/fp16-study", "off"),
        ("doc", "doc", _str, "a page whose study blocks are rewritten (its plots go to -data_dir)",
         "none; docs/fp16-study.md with -update_docs"),
        ("data_dir", "data_dir", _str, "where a page's plots go",
         "-out; docs/data/fp16-study with -update_docs"),
        ("plots", "plots", _switch(), "draw the PNG plots (matplotlib)", "on"),
    ]))


def parse_checked(words: list[str]):
    """A test's own flags (a study list's line) as a run that is checked against the CPU
    reference; the study then sets the validator, data and path of each case itself."""
    return parse(list(words) + ["-pv"])


def parse_study(argv: list[str]) -> dict:
    v = _scan([str(a) for a in argv], STUDY_FLAGS)
    if "out" in v and not v["out"].endswith(".jsonl"):
        raise ConvgenError(f"'{v['out']}' for -out: a results file ends in .jsonl", field="out")
    return v


def parse_study_report(argv: list[str]) -> dict:
    v = _scan([str(a) for a in argv], STUDY_REPORT_FLAGS)
    if v.get("write_published") and "study_results" not in v:
        raise ConvgenError("-write_published needs -study_results (the study's files)",
                           field="write_published")
    return v


def parse_selector(argv: list[str]) -> dict:
    from convgen import tuning_db
    v = _scan([str(a) for a in argv], SELECTOR_FLAGS)
    db = tuning_db.resolve(v.get("db", ""))
    if db is None:
        raise ConvgenError(f"no tuning database to learn from ({tuning_db.why_none()}; give --db)",
                           field="db")
    return {"db": db, "arch": v.get("arch", "sm90"), "out": v.get("out"),
            "warm_start": v.get("warm_start"), "trees": v.get("trees"),
            "folds": v.get("folds", 5), "group": v.get("group", "shape"),
            "shuffles": v.get("shuffles", 0), "json": v.get("json"),
            "device": v.get("device"), "test_device": v.get("test_device")}


def _split_flags(tokens: list[str], table: Table) -> tuple[list[str], list[str]]:
    """(the tokens of `table`'s flags with their values, every other token), in order."""
    mine, rest, i = [], [], 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        spelling, eq, _ = tok.partition("=")
        flag = table.get(spelling.lstrip("-")) if _looks_like_flag(tok) else None
        if flag is None:
            rest.append(tok)
            continue
        mine.append(tok)
        nxt = tokens[i] if i < len(tokens) else None
        if not eq and nxt is not None and (nxt.strip().lower() in _TRUE + _FALSE if flag.boolean
                                           else not _looks_like_flag(nxt)):
            mine.append(nxt)
            i += 1
    return mine, rest


def parse_tune(argv: list[str]) -> dict:
    """{"configs": [RunConfig, ...], "db": path, "max_configs", "top", "jobs", "allow_cpu",
    "retime_before", "retime_under"}."""
    from convgen import tuning_db
    mine, rest = _split_flags([str(a) for a in argv], TUNE_FLAGS)
    v = _scan(mine, TUNE_FLAGS)
    flag_sets = []
    if "lines" in v:
        try:
            with open(v["lines"]) as f:
                flag_sets += [shlex.split(line.split("|")[0]) for line in f
                              if line.strip() and not line.lstrip().startswith("#")]
        except OSError as e:
            raise ConvgenError(f"--lines: cannot read '{v['lines']}': {e.strerror}") from None
    if "layers" in v:
        directions = v.get("directions", tuple(_DIRECTION_OPERATION.values()))
        if v["layers"] == "selector":
            # each shape's directions together, in the set's order (a stopped run has some
            # of every network)
            flag_sets += [["--operation", op, "-t", t, *layer_args(layer, batch),
                           "-in_layout=nhwc", "-fil_layout=kyxc", "-out_layout=nhwk"]
                          for _, layer, batch, t in models.selector_set() for op in directions]
        else:
            layers = {"issue": models.CONV_BENCH_LAYERS, **models.NETWORKS}[v["layers"]]
            for op in directions:
                for t in v.get("types", ("f16", "bf16")):
                    for batch in v.get("batch", (256,)):
                        flag_sets += [["--operation", op, "-t", t, *layer_args(layer, batch),
                                       "-in_layout=nhwc", "-fil_layout=kyxc", "-out_layout=nhwk"]
                                      for layer in layers]
    if rest:
        flag_sets.append(rest)
    if not flag_sets:
        raise ConvgenError("no problem to tune: give a problem's flags, --lines or --layers")
    configs = []
    for words in flag_sets:
        words = [w for w in words if w not in ("convgen", "%convgen", "rocmlir-gen")]
        try:
            configs.append(parse(words + ["-x2"]))
        except ConvgenError as e:
            raise _named(e, words) from None
    if "top" in v and "max_configs" in v:
        raise ConvgenError("--top and --max-configs: one or the other (the model's first N, "
                           "or the space's)")
    if "retime_under" in v and "retime_before" not in v:
        raise ConvgenError("--retime-under: only with --retime-before (what was timed before it, "
                           "and took less)")
    return {"configs": configs, "db": tuning_db.resolve(v.get("db", ""), writing=True),
            "max_configs": v.get("max_configs"), "top": v.get("top"), "jobs": v.get("jobs"),
            "allow_cpu": v.get("allow_cpu", False), "retime_before": v.get("retime_before"),
            "retime_under": v.get("retime_under")}


# ---- what other tools need spelled --------------------------------------------------------

def layer_args(layer, batch: int) -> list[str]:
    """convgen size flags (rocmlir-gen spellings) for a layer of models.py."""
    from convgen.models import dilation
    c, k, hw, f, s, pad, g = layer[:7]
    out = [f"-batchsize={batch}", f"-groupsize={g}", f"-in_channels={c}", f"-out_channels={k}",
           f"-in_h={hw}", f"-in_w={hw}", f"-fil_h={f}", f"-fil_w={f}",
           f"-conv_stride_h={s}", f"-conv_stride_w={s}", f"-padding_h={pad}", f"-padding_w={pad}"]
    if dilation(layer) > 1:
        out += [f"-dilation_h={dilation(layer)}", f"-dilation_w={dilation(layer)}"]
    return out


def tune_line(layer, batch: int, direction: str, dtype: str = "f16") -> str:
    """A `convgen tune --lines` line of one layer of models.py, channels innermost."""
    return " ".join([f"--operation {_DIRECTION_OPERATION[direction]} -t {dtype}", *layer_args(layer, batch),
                     "-in_layout=nhwc -fil_layout=kyxc -out_layout=nhwk"])


def model_run_line(layer, batch: int, direction: str, dtype: str, layouts: tuple[str, str, str]) -> str:
    """A RUN line testing one layer of models.py with the suite's substitutions (input,
    filter and output layouts given as letters)."""
    lay_in, lay_fil, lay_out = layouts
    return (f"%convgen --operation {_DIRECTION_OPERATION[direction]} -t {dtype} "
            f"-in_layout={lay_in} -fil_layout={lay_fil} -out_layout={lay_out} "
            + " ".join(layer_args(layer, batch))
            + " %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold "
              "%abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s")


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


# ---- split-test's own command line ---------------------------------------------------------

def split_test_main(argv: list[str] | None = None) -> int:
    import argparse

    from convgen import split_test
    parser = argparse.ArgumentParser(
        prog="split-test",
        description="Split a multi-RUN lit test into one file per RUN line, "
                    "each with the check lines its FileCheck uses.")
    parser.add_argument("input", help="the test file to split")
    parser.add_argument("dest", help="folder for <stem>_<index><suffix> files (created if missing)")
    parser.add_argument("-t", "--type", dest="type", metavar="TYPE",
                        help="keep only RUN lines testing this type: " + ", ".join(dtypes.CONV_TYPES))
    parser.add_argument("-f", "--force", action="store_true",
                        help="replace files that already exist in DEST (default: refuse)")
    args = parser.parse_args(argv)
    type_name = None
    if args.type is not None:
        t = dtypes.find(args.type)
        if t is None or not t.conv_input:
            print(f"split-test: error: -t {args.type}: unknown type (expected one of "
                  f"{', '.join(dtypes.CONV_TYPES)})", file=sys.stderr)
            return 2
        type_name = t.name
    return split_test.run(args.input, args.dest, type_name, force=args.force,
                          type_of=command_type)


def _tuning_command(name: str, args: list[str]) -> int:
    """convgen tuning-stats / tuning-export."""
    from convgen import tuning_db, tuning_text
    v = _scan(args, TUNING_STATS_FLAGS if name == "tuning-stats" else TUNING_EXPORT_FLAGS)
    folder = v.get("data") or tuning_db.data_dir()
    if not os.path.isdir(folder):
        raise ConvgenError(f"'{folder}' is not a folder", field="data")
    if name == "tuning-stats" and "lines" in v:
        shapes = {tuple(tuning_db.problem_key(c.problem, "", "", "", "")[k] for k in tuning_db.SHAPE_COLUMNS)
                  for c in parse_tune(["--db", "unused.sqlite", "--lines", v["lines"]])["configs"]}
        for (arch, device, triton), done in sorted(tuning_text.searched(folder).items()):
            print(f"{arch} {shlex.quote(device)} {triton} searched={len(shapes & done)} of={len(shapes)}")
        return 0
    if name == "tuning-stats":
        for arch, device, triton, problems, rows in tuning_text.stats(folder):
            print(f"{arch} {shlex.quote(device)} {triton} problems={problems} measurements={rows}")
        return 0
    db = v.get("db") or os.environ.get("CONVGEN_TUNING_DB")
    if db and not os.path.exists(db):
        raise ConvgenError(f"tuning database '{db}' does not exist", field="db")
    path = db or tuning_db.open_store(folder)
    out = v.get("out")
    if out and not os.path.isdir(out):
        raise ConvgenError(f"'{out}' is not a folder", field="out")
    with tuning_db.TuningDB(path) as store:
        written, untimed = store.export(folder, out)
    for f in written:
        problems = sum(1 for _ in tuning_text.read_batch(f))
        print(f"convgen tuning-export: {f}: {problems} problem(s), {os.path.getsize(f)} bytes")
    if not written:
        print(f"convgen tuning-export: {tuning_db.describe(path)} holds nothing that {folder} does not")
    if untimed:
        print(f"convgen tuning-export: {untimed} row(s) of the interpreter left out (its times mean "
              "nothing: tune on a GPU)")
    return 0


# ---- main ---------------------------------------------------------------------------------

def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def _quiet_broken_pipe() -> int:
    """stdout's reader went away (`convgen ... | head -1`): stop without a traceback, with
    the status a shell gives a process killed by SIGPIPE."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass
    return 141


def _selector(name: str, args: list[str]) -> int:
    from convgen.selector import main as selector_main
    return selector_main(name, parse_selector(args))


def _study(name: str, args: list[str]) -> int:
    from convgen import study
    return study.main(parse_study(args))


def _study_report(name: str, args: list[str]) -> int:
    from convgen import study_report
    return study_report.main(parse_study_report(args))


def _compare(name: str, args: list[str]) -> int:
    from convgen.compare import run as compare
    return compare(parse_compare(args))


# convgen's programs other than a test run and `tune`: their flags and what runs them; a
# ConvgenError they raise names the flag it is about
_PROGRAMS = {
    "tuning-stats": (TUNING_STATS_FLAGS, _tuning_command),
    "tuning-export": (TUNING_EXPORT_FLAGS, _tuning_command),
    "train-selector": (SELECTOR_FLAGS, _selector),
    "eval-selector": (SELECTOR_FLAGS, _selector),
    "study": (STUDY_FLAGS, _study),
    "study-report": (STUDY_REPORT_FLAGS, _study_report),
    "compare": (COMPARE_FLAGS, _compare),
}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        wants_help = any(a in ("-h", "-help", "--help") for a in argv)
        if argv and argv[0] == "tune":
            if wants_help:
                print(usage(TUNE_FLAGS), end="")
                return 0
            from convgen.tune import report_problem, report_tuning, tune
            args = parse_tune(argv[1:])
            return report_tuning(tune(args["configs"], args["db"], args["jobs"],
                                      args["max_configs"], args["allow_cpu"],
                                      done=report_problem,
                                      retime_before=args["retime_before"],
                                      retime_under=args["retime_under"], top=args["top"]),
                                 args["db"])
        if argv and argv[0] in _PROGRAMS:
            table, run = _PROGRAMS[argv[0]]
            if wants_help:
                print(usage(table), end="")
                return 0
            try:
                return run(argv[0], [str(a) for a in argv[1:]])
            except ConvgenError as e:
                raise _named(e, argv[1:], table) from None
        if wants_help:
            print(usage(_dialect(argv)[1]), end="")
            return 0
        config = parse(argv)
        from convgen import driver
        try:
            return driver.run(config, program=PROGRAM)
        except ConvgenError as e:
            raise _named(e, argv) from None
    except ConvgenError as e:
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            _quiet_broken_pipe()
        print(f"convgen: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        print("convgen: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

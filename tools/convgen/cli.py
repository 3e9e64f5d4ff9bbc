"""Command line -> RunConfig. The only module that knows flag spellings.

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

Each flag is one row of a table: spellings, destination, converter. The
converter turns the text into a value or raises ValueError saying what it
expected; `_build` turns the collected values into the records of options.py.
"""
from __future__ import annotations

import math
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

from convgen import inputs
from convgen.dtypes import TYPES, elem_type
from convgen.errors import ConvgenError
from convgen.inputs import DataSpec
from convgen.options import KernelOptions, ReferenceOptions, ReportOptions, RunConfig, Thresholds
from convgen.problem import BWD_DATA, BWD_WEIGHT, FWD, make_problem, normalize_layout

# `-p`: rocmlir-gen's populateDefaults() problem (its non-mfma branch). Unlike
# rocmlir-gen, which overwrites explicit sizes with these, explicit flags win here.
DEFAULT_PROBLEM = {"n": 128, "g": 1, "c": 8, "k": 128, "hi": 32, "wi": 32, "y": 3, "x": 3}

# MIOpenDriver's own defaults for sizes that a `conv...` line leaves out.
MIOPEN_DEFAULTS = {"n": 100, "g": 1, "c": 3, "k": 32, "hi": 32, "wi": 32, "y": 3, "x": 3}

# Without -p, these must be given (in this order in messages).
REQUIRED_SIZES = (("n", "-batchsize"), ("c", "-in_channels"), ("k", "-out_channels"),
                  ("hi", "-in_h"), ("wi", "-in_w"), ("y", "-fil_h"), ("x", "-fil_w"))

DEFAULT_LAYOUTS = {"filter": "kcyx", "input": "nchw", "output": "nkhw"}

MIOPEN_COMMANDS = {"conv": "f32", "convfp16": "f16", "convbfp16": "bf16", "convint8": "i8"}

OPERATIONS = {"conv2d": FWD, "conv": FWD,
              "conv2d_bwd_data": BWD_DATA, "conv_bwd_data": BWD_DATA,
              "conv2d_bwd_weight": BWD_WEIGHT, "conv_bwd_weight": BWD_WEIGHT}

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


def _threshold(text: str) -> float | str:
    if text.strip().lower() == "auto":
        return "auto"
    try:
        val = float(text)
    except ValueError:
        raise ValueError("expected a non-negative number or 'auto'") from None
    if math.isnan(val) or val < 0:
        raise ValueError("expected a non-negative number or 'auto'")
    return val


def _str(text: str) -> str:
    return text


def _optional_str(text: str) -> str | None:
    return text or None


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
        return elem_type(text).name
    except ConvgenError:
        raise ValueError(f"expected one of {', '.join(TYPES)}") from None


def _rand(text: str) -> tuple[str, int | None]:
    key = text.strip().lower()
    if key in ("fixed", "none"):
        return key, None
    if re.fullmatch(r"\+?\d+", key):
        return "random", int(key)
    raise ValueError("expected fixed, none, or a seed N >= 0 (0: seed from the time)")


def _layout(tensor: str) -> Callable[[str], str]:
    def conv(text: str) -> str:
        try:
            return normalize_layout(tensor, text)
        except ConvgenError as e:
            raise ValueError(str(e)) from None
    return conv


# MIOpen spells every layout with the input's letters: NCHW for the filter is
# kcyx, for the output nkhw.
_MIOPEN_LETTERS = {
    "input": {"N": "n", "C": "c", "H": "h", "W": "w", "G": "g"},
    "filter": {"N": "k", "C": "c", "H": "y", "W": "x", "G": "g"},
    "output": {"N": "n", "C": "k", "H": "h", "W": "w", "G": "g"},
}


def _miopen_layout(tensor: str) -> Callable[[str], str]:
    letters = _MIOPEN_LETTERS[tensor]

    def conv(text: str) -> str:
        up = text.strip().upper()
        if not up or any(ch not in letters for ch in up):
            raise ValueError("expected an MIOpen layout of N, C, H, W (and G), e.g. NCHW or NHWC")
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
    dest: str | None                 # key of the collected values; None: read and dropped
    convert: Callable[[str], Any]    # text -> value; ValueError says what was expected

    @property
    def boolean(self) -> bool:       # value optional: alone it means true
        return getattr(self.convert, "boolean", False)


Row = tuple  # (spelling or tuple of spellings, dest, converter)


def _table(*rows: Row) -> dict[str, Flag]:
    table: dict[str, Flag] = {}
    for names, dest, conv in rows:
        for name in (names,) if isinstance(names, str) else names:
            key = _key(name)
            assert key not in table, f"flag {name} defined twice"
            table[key] = Flag(dest, conv)
    return table


def _key(name: str) -> str:
    return name.replace("-", "_")


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
    # These three are checked against -t (for i8, an i32 output is also fine), then dropped.
    ("in_type", True, "rocmlir-gen per-tensor type: must agree with -t"),
    ("fil_type", True, "rocmlir-gen per-tensor type: must agree with -t"),
    ("out_type", True, "rocmlir-gen per-tensor type: must agree with -t"),
)
_CHECKED_COMPAT = ("in_type", "fil_type", "out_type")


def _compat_rows(flags) -> list[Row]:
    rows = []
    for names, takes_value, _why in flags:
        first = names if isinstance(names, str) else names[0]
        dest = first if first in _CHECKED_COMPAT else None
        rows.append((names, dest, _IGNORE_VALUE if takes_value else _IGNORE_BOOL))
    return rows


# convgen's own options, shared by both dialects (no single letters, so no clash
# with MIOpenDriver's).
_COMMON_ROWS: list[Row] = [
    # data
    ("rand", "rand", _rand),
    ("rand_min", "rand_min", _float),
    ("rand_max", "rand_max", _float),
    ("rand_type", "rand_type", _words("int", "float")),
    ("rand_side", "rand_side", _words("both", "input", "filter", "output")),
    ("rand_both_signs", "rand_both_signs", _switch()),
    # kernel
    ("x2", "matrix_cores", _switch()),
    ("mfma", "matrix_cores", _choice({"on": True, "off": False})),
    ("perf_config", "perf_config", _optional_str),
    ("input_precision", "input_precision", _words("ieee", "tf32", "tf32x3")),
    ("flush_subnormals", "flush_subnormals", _switch()),
    # reference (the last of -pv / -pv_with_gpu wins; -pv=false turns checking off)
    (("pv", "pv_with_cpp", "pv_with_mlir"), "validator", _switch("cpu", None)),
    ("pv_with_gpu", "validator", _switch("gpu", None)),
    ("ref_accumulate", "ref_accumulate", _size),
    ("ref_flush_subnormals", "ref_flush_subnormals", _switch()),
    # thresholds
    (("RMS_threshold", "RMS"), "rms", _threshold),
    (("absDiff_threshold", "maxAbsDiff"), "abs", _threshold),
    (("relDiff_threshold", "maxRelDiff"), "rel", _threshold),
    # report
    (("print_verify_results", "p_verify"), "print_results",
     _words("always", "failure", "summary", "off")),
    ("dump", "dump", _str),
    ("json", "json", _str),
]

ROCMLIR_FLAGS = _table(
    ("operation", "direction", _choice(OPERATIONS)),
    ("t", "type", _dtype),
    ("fil_layout", "fil_layout", _layout("filter")),
    ("in_layout", "in_layout", _layout("input")),
    ("out_layout", "out_layout", _layout("output")),
    ("batchsize", "n", _size),
    (("groupsize", "g"), "g", _size),
    ("in_channels", "c", _size),
    ("out_channels", "k", _size),
    ("in_h", "hi", _size),
    ("in_w", "wi", _size),
    ("fil_h", "y", _size),
    ("fil_w", "x", _size),
    ("out_h", "out_h", _size),
    ("out_w", "out_w", _size),
    ("dilation_h", "dil_h", _size),
    ("dilation_w", "dil_w", _size),
    ("conv_stride_h", "stride_h", _size),
    ("conv_stride_w", "stride_w", _size),
    ("padding_h", "pad_h", _nonneg),
    ("padding_w", "pad_w", _nonneg),
    ("padding_h_l", "pad_h_l", _nonneg),
    ("padding_h_r", "pad_h_r", _nonneg),
    ("padding_w_l", "pad_w_l", _nonneg),
    ("padding_w_r", "pad_w_r", _nonneg),
    ("p", "populate", _switch()),
    *_COMMON_ROWS,
    *_compat_rows(COMPAT_FLAGS),
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
    # 3-D sizes, unused unless -_ 3, which is refused
    (("!", "in_d"), "input depth"), (("@", "fil_d"), "filter depth"),
    (("#", "conv_stride_d"), "stride in depth"), (("$", "pad_d"), "padding in depth"),
    (("^", "dilation_d"), "dilation in depth"), (("%", "trans_output_pad_d"), "output padding in depth"),
)

MIOPEN_FLAGS = _table(
    (("F", "forw"), "direction",
     _choice({"0": FWD, "1": FWD, "2": BWD_DATA, "4": BWD_WEIGHT})),
    (("n", "batchsize"), "n", _size),
    (("c", "in_channels"), "c", _size),
    (("H", "in_h"), "hi", _size),
    (("W", "in_w"), "wi", _size),
    (("k", "out_channels"), "k", _size),
    (("y", "fil_h"), "y", _size),
    (("x", "fil_w"), "x", _size),
    (("p", "pad_h"), "pad_h", _nonneg),
    (("q", "pad_w"), "pad_w", _nonneg),
    (("u", "conv_stride_h"), "stride_h", _size),
    (("v", "conv_stride_w"), "stride_w", _size),
    (("l", "dilation_h"), "dil_h", _size),
    (("j", "dilation_w"), "dil_w", _size),
    (("g", "group_count"), "g", _size),
    (("f", "fil_layout"), "fil_layout", _miopen_layout("filter")),
    (("I", "in_layout"), "in_layout", _miopen_layout("input")),
    (("O", "out_layout"), "out_layout", _miopen_layout("output")),
    (("m", "mode"), None, _only("conv", why="transposed convolution is not supported")),
    (("_", "spatial_dim"), None, _only("2", why="only 2-D convolution is supported")),
    (("b", "bias"), None, _only("0", why="bias is not supported")),
    (("r", "pad_val"), None, _only("0", why="only zero padding is supported")),
    (("z", "pad_mode"), None, _only("default", why="give the padding with -p/-q")),
    (("Z", "tensor_vect"), None, _only("0", why="vectorized tensors are not supported")),
    *[(names, None, _IGNORE_VALUE) for names, _why in MIOPEN_IGNORED],
    *_COMMON_ROWS,
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


def _scan(tokens: list[str], table: dict[str, Flag]) -> dict[str, Any]:
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
        flag = table.get(_key(name)) if name and not name.startswith("-") else None
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

# --out_type spellings of the outputs that differ from the input type (i8 -> i32, fp8 -> f32)
_OUT_TYPE_NAMES = {"i32": "int32", "int32": "int32", "f32": "float32", "fp32": "float32",
                   "float": "float32"}


def _check_type_flags(v: dict[str, Any], dtype: str) -> None:
    for dest in _CHECKED_COMPAT:
        if dest not in v:
            continue
        given = v[dest].strip().lower()
        if dest == "out_type" and _OUT_TYPE_NAMES.get(given) == str(
                elem_type(dtype).torch_out).removeprefix("torch."):
            continue   # i8 gives i32, fp8 gives f32: naming that output type is right
        try:
            name = elem_type(given).name
        except ConvgenError:
            name = given
        if name != dtype:
            raise ConvgenError(f"--{dest} {v[dest]} disagrees with -t {dtype}")


def _resolve_seed(mode: str, seed: int | None) -> int:
    if mode == "random" and seed == 0:  # time-based; the resolved seed is reported
        return time.time_ns() // 1000 % (2**31 - 1) + 1
    return 1 if seed is None else seed


def _build(v: dict[str, Any], miopen: bool, argv: tuple[str, ...]) -> RunConfig:
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

    pad_h, pad_w = v.get("pad_h", 0), v.get("pad_w", 0)
    pad = (v.get("pad_h_l", pad_h), v.get("pad_h_r", pad_h),
           v.get("pad_w_l", pad_w), v.get("pad_w_r", pad_w))
    layouts = {"filter": v.get("fil_layout", DEFAULT_LAYOUTS["filter"]),
               "input": v.get("in_layout", DEFAULT_LAYOUTS["input"]),
               "output": v.get("out_layout", DEFAULT_LAYOUTS["output"])}
    problem = make_problem(
        direction=v.get("direction", FWD), dtype=elem_type(dtype),
        n=sizes["n"], g=sizes["g"], c_total=sizes["c"], k_total=sizes["k"],
        hi=sizes["hi"], wi=sizes["wi"], y=sizes["y"], x=sizes["x"],
        stride=(v.get("stride_h", 1), v.get("stride_w", 1)),
        dilation=(v.get("dil_h", 1), v.get("dil_w", 1)), pad=pad, layouts=layouts)
    for key, got, what in (("out_h", problem.ho, "height"), ("out_w", problem.wo, "width")):
        if key in v and v[key] != got:
            raise ConvgenError(f"-{key} {v[key]} disagrees with the computed output {what} {got}")

    mode, seed = v.get("rand", ("random", None))
    if "rand_min" in v and "rand_max" in v and v["rand_min"] > v["rand_max"]:
        raise ConvgenError(f"-rand_min {v['rand_min']:g} is larger than -rand_max {v['rand_max']:g}")
    data = DataSpec(mode=mode, seed=_resolve_seed(mode, seed),
                    lo=v.get("rand_min"), hi=v.get("rand_max"),
                    rand_type=v.get("rand_type"), side=v.get("rand_side", "both"),
                    both_signs=bool(v.get("rand_both_signs", False)))
    inputs.validate(data, problem)
    if mode == "random" and seed == 0:
        argv = argv + ("-rand", str(data.seed))  # so the printed reproducer reruns this data

    return RunConfig(
        problem=problem,
        data=data,
        kernel=KernelOptions(use_matrix_cores=v.get("matrix_cores", False),
                             perf_config=v.get("perf_config"),
                             input_precision=v.get("input_precision", "ieee"),
                             flush_subnormals=v.get("flush_subnormals", False)),
        reference=ReferenceOptions(validator=v.get("validator", "cpu" if miopen else None),
                                   accumulate=v.get("ref_accumulate"),
                                   flush_subnormals=v.get("ref_flush_subnormals", False)),
        thresholds=Thresholds(rms=v.get("rms"), abs=v.get("abs"), rel=v.get("rel")),
        report=ReportOptions(print_results=v.get("print_results", "summary"),
                             dump_dir=v.get("dump"), json_path=v.get("json")),
        argv=argv,
    )


def parse(argv: list[str]) -> RunConfig:
    """Flags (without the program name) -> a validated RunConfig, or ConvgenError."""
    argv = [str(a) for a in argv]
    miopen = bool(argv) and argv[0] in MIOPEN_COMMANDS
    if miopen:
        values = _scan(argv[1:], MIOPEN_FLAGS)
        values["type"] = MIOPEN_COMMANDS[argv[0]]
    else:
        values = _scan(argv, ROCMLIR_FLAGS)
    return _build(values, miopen, tuple(argv))


def usage() -> str:
    def names(table):
        return " ".join(sorted(f"-{k}" for k, f in table.items() if f.dest is not None))
    return ("usage: convgen [flags]            (rocmlir-gen / miopen-gen spellings)\n"
            "       convgen conv|convfp16|convbfp16|convint8 [MIOpenDriver flags]\n"
            "       convgen compare ...\n"
            f"flags: {names(ROCMLIR_FLAGS)}\n"
            f"MIOpenDriver flags: {names(MIOPEN_FLAGS)}\n"
            "-flag=value or -flag value, one or two dashes; the last of a repeated flag wins.\n")


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "compare":
            from convgen.compare import main as cmp
            return cmp(argv[1:])
        if any(a in ("-h", "-help", "--help") for a in argv) and \
                not (argv and argv[0] in MIOPEN_COMMANDS):
            print(usage(), end="")
            return 0
        config = parse(argv)
        from convgen import driver
        return driver.run(config)
    except ConvgenError as e:
        sys.stdout.flush()
        print(f"convgen: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("convgen: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

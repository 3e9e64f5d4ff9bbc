"""Command lines -> the frozen records of options.py, and `convgen`'s main: a test run's
two dialects and `convgen compare` (their flag tables: run_flags.py), the flag text of
lit's substitutions, the words an error uses to name the flag to change, and the commands
beside a run, found through a table (commands.py).

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

Each flag is one row of a table (flags.py): spellings, destination, converter, meaning,
default; `_build` turns the collected values into the records of options.py.
Importing this module imports neither torch nor Triton.
"""
from __future__ import annotations

import os
import re
import sys
import time
from dataclasses import replace
from typing import Any

from convgen import commands, driver, dtypes, implementations, perf_text, tolerance
from convgen.commands import Command
from convgen.compare import run as compare
from convgen.directions import FWD
from convgen.errors import ConvgenError
from convgen.flags import Table, flag_key, one_line, quiet_broken_pipe, scan, usage_text
from convgen.inputs import validate
from convgen.options import (CompareConfig, Comparison, DataSpec, KernelOptions, ReferenceOptions,
                             ReportOptions, RunConfig)
from convgen.problem import make_problem
from convgen.run_flags import (CHECKED_COMPAT, COMMON, COMPARE_FLAGS, DEFAULT_LAYOUTS,
                               DEFAULT_LAYOUTS_3D, DEFAULT_PROBLEM, MIOPEN_COMMANDS,
                               MIOPEN_DEFAULTS, MIOPEN_FLAGS, PERF_FIELDS, REQUIRED_SIZES,
                               ROCMLIR_FLAGS, dtype_name, rand)

PROGRAM = "convgen"


# ---- values -> RunConfig ----------------------------------------------------------

def _check_type_flags(v: dict[str, Any], dtype: str) -> None:
    for dest in CHECKED_COMPAT:
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
        impl=v.get("impl") or implementations.DEFAULT,
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
           "Generated from the flag tables of `tools/convgen/run_flags.py` and of each command "
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
                             {t for t, _ in COMMON}), {}))
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
    return usage_text(head, table)


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
        rand(seed)   # what -rand takes, so a setting lit accepts never fails every test
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
        if os.environ.get("CONVGEN_IMPL") and not _last_value(argv, "impl"):
            # the environment's default, for a run of convgen's command line only (the lab's
            # and the study's runs test convgen's kernels whatever it says)
            config = replace(config, impl=os.environ["CONVGEN_IMPL"])
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
    except implementations.Unsupported as e:
        # not a failure: lit reports the test UNSUPPORTED with this reason (lit_format.py)
        flag = _dialect(argv)[1].spelling(e.field) if e.field else None
        print(f"{implementations.UNSUPPORTED_LINE}{flag + ' ' if flag else ''}{one_line(e)}",
              flush=True)
        return implementations.EXIT_UNSUPPORTED
    except BrokenPipeError:
        return quiet_broken_pipe()
    except KeyboardInterrupt:
        print("convgen: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

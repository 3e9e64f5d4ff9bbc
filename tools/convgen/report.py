"""Everything convgen writes: the one line FileCheck reads, the lines people read, JSON,
dumps. verify.py decides; this module only words and writes.

FileCheck patterns look for the bits line, `[1 1 1]` or `[{{[01]}} {{[01]}} {{[01]}}]`,
anywhere in stdout. So every other line starts with `# ` and never holds a '['
followed by digits and spaces up to ']' (nor "[0 " / "[1 "): a histogram label or a
coordinate must not be mistaken for the verdict.

What stdout holds (`-print-verify-results` chooses how much), the bits line last:
    summary  the summary line; when a bit is 0 also the histograms, the worst elements,
             one sentence per reason and the command that reproduces the run (default)
    always   all of that, on a passing run too
    failure  nothing unless a bit is 0, then as summary
    off      only the reasons when the output holds non-finite values
A test may CHECK a reason line (`// CHECK: RMS bit 0`). When a bit is 0 and stdout is
not a terminal (it goes to FileCheck), the reasons, histograms, worst elements and the
reproducer are copied to stderr: lit shows a failing test's stderr, so they are there
when FileCheck says only "couldn't match".

Files (`--json`, `--dump`) are checked before the run (`check_paths`) and written
whole or not at all (`write_atomic`).
"""
from __future__ import annotations

import math
import os
import re
import shlex
import sys
import tempfile
from typing import Callable

from convgen.errors import ConvgenError

MODES = ("always", "failure", "summary", "off")
PREFIX = "# "
_NAMES = {"max_abs_diff": "maxAbsDiff", "max_rel_diff": "maxRelDiff",
          "max_rel_diff_old": "maxRelDiff_old", "max_epsilon_diff": "maxEpsilonDiff",
          "rel_auto": "rel (auto) check"}
FAR_ULPS_SHARE = 0.01   # more than this share of elements > 10 ULPs off: widespread


# ---- the lines -------------------------------------------------------------------

def bits_line(bits) -> str:
    return "[" + " ".join(str(int(b)) for b in bits) + "]"


BITS_LINE = re.compile(r"^\[[01]( [01])*\]$")   # a line bits_line wrote


def _g(x: float) -> str:
    return f"{x:.9g}"


def _at(index: dict) -> str:
    return " ".join(f"{k}={i}" for k, i in index.items())


def _rel_threshold(th) -> str:
    if th.rel_auto is None:
        return f"(<= {th.rel:.2e})"
    rtol, atol = th.rel_auto
    return f"[auto: |d| <= {rtol:.2e}*|val| + {atol:.2e}]"


def summary_line(v) -> str:
    m, th = v.metrics, v.thresholds
    return (f"RMS={m['rms']:.2e} (<= {th.rms:.2e}) "
            f"maxAbsDiff={m['max_abs_diff']:.2e} (<= {th.abs:.2e}) "
            f"maxRelDiff={m['max_rel_diff']:.2e} {_rel_threshold(th)} "
            f"maxRelDiff_old={m['max_rel_diff_old']:.2e} maxEpsilonDiff={m['max_epsilon_diff']:.3g} "
            f"bias={m['bias']:+.3f}/{m['bias_magnitude']:+.3f} ulp {_bias_limit(th)} "
            f"({v.out_type.name}, {v.n} elements, {v.exact_count} equal, "
            f"{v.out_of_tolerance} out of tolerance)")


def rocmlir_line(v) -> str:
    """What rocMLIR's comparator saw, when it judged (tolerance.rocmlir_limits)."""
    lim, m = v.rocmlir, v.metrics
    if lim.exact:
        return f"rocMLIR {lim.comparator} comparator: integers, {m['rocmlir_failing']} of {v.n} differ"
    if lim.comparator == "legacy":
        forced = f", forced for {v.out_type.name}" if lim.rel_forced else ""
        return (f"rocMLIR legacy comparator: RMS={m['rocmlir_rms']:.2e} (<= {lim.rms:.2e}) "
                f"maxAbsDiff={m['rocmlir_max_abs_diff']:.2e} (<= {lim.abs:g}) "
                f"maxRelDiff={m['rocmlir_max_rel_diff']:.2e} (<= {lim.rel:g}{forced})")
    return (f"rocMLIR allclose comparator: |kern - val| <= {lim.atol:.3e} + {lim.rtol:.3e}*|val|: "
            f"{m['rocmlir_failing']} of {v.n} elements fail")


def _bias_limit(th) -> str:
    return f"(<= {th.bias:.3f})" if math.isfinite(th.bias) else "(not checked)"


def _histogram(h) -> list[str]:
    width = max(len(lab) for lab in h.labels)
    lines = [f"{h.name} histogram ({h.n} elements):"]
    for lab, c in zip(h.labels, h.counts):
        lines.append(f"  {lab:<{width}}  {c:>12} ({h.percent(c):.6f}%)")
    lines.append(f"  left out ({h.excluded_label}): {h.excluded} ({h.percent(h.excluded):.6f}%)")
    return lines


def _worst(v) -> list[str]:
    lines = ["worst elements:"]
    for key, w in v.worst.items():
        # The auto rel check's worst element matters only where it exceeds rtol*|val|.
        if w is None or (key == "rel_auto" and (v.thresholds.rel_auto is None or w.value <= 0)):
            continue
        value = f"{w.value:.3e}" if key != "rel_auto" else f"excess {w.value:.3e}"
        lines.append(f"  {_NAMES[key]} {value} at {_at(w.index)}: val={w.val:.9g} kern={w.kern:.9g}")
    return lines if len(lines) > 1 else []


def details(v) -> list[str]:
    lines = []
    for h in v.histograms.values():
        lines += _histogram(h)
    return lines + _worst(v)


# ---- why: one sentence per finding -----------------------------------------------

def _ulps_at(w, ot) -> str:
    return f"{abs(w.val - w.kern) / ot.spacing(w.val):.3g} ULPs of {ot.name} at |val|"


def _first(f) -> str:
    return f"the first at {_at(f.at.index)}: val={_g(f.at.val)}, kern={_g(f.at.kern)}"


def _spread(v) -> str:
    """Why the RMS is high: rounding (the auto bound holds), a bug (many elements far off)
    or a few elements."""
    auto_rms = v.thresholds.auto[0]
    if v.metrics["rms"] <= auto_rms:
        return (f"that is within what rounding explains (auto allows {auto_rms:.2e}): the "
                "threshold is tighter than this type and accumulation length allow")
    far = sum(v.histograms["epsilonDiff"].counts[4:])
    if v.n and far > FAR_ULPS_SHARE * v.n:
        return (f"{100.0 * far / v.n:.3g}% of the elements are more than 10 ULPs off: a widespread "
                "error, likely a bug (indexing, layout, missing or extra terms)")
    if far:
        return f"{far} elements are more than 10 ULPs off: a few are far off (see the worst elements)"
    return "no element is more than 10 ULPs off: the threshold may be tighter than rounding allows"


def _rel_hint(v, w) -> str:
    hint = ""
    if abs(w.val) <= 1e-2 * v.ref_max_abs:
        hint += (f"; a value near zero (|val| is {abs(w.val) / v.ref_max_abs:.1e} of max|val|: "
                 "cancellation)")
    if v.bits[0] and v.bits[1]:
        hint += ("; the RMS and abs bits pass, so this is likely rounding, not a bug; consider a "
                 "same-sign input range or the auto rel check")
    return hint


def _sentence(f, v) -> str:
    ot, m, th = v.out_type, v.metrics, v.thresholds
    if f.kind == "kern_nan":
        return f"{f.count} NaN in the kernel output (unwritten or computed); {_first(f)}; every bit fails"
    if f.kind == "ref_nan":
        return f"{f.count} NaN in the reference: those elements verify nothing; {_first(f)}; every bit fails"
    if f.kind == "ref_inf":
        return (f"{f.count} infinities in the reference: the exact result overflows {ot.name} "
                f"(largest finite {ot.max_finite:g}) there, so those elements verify nothing; "
                f"{_first(f)}; narrow the input range; every bit fails")
    if f.kind == "bad_inf":
        return (f"{f.count} infinities in the kernel output where the reference is finite; "
                f"{_first(f)}; every bit fails")
    if f.kind == "outside":
        return (f"{f.count} element(s) written outside the output ({f.detail}): a store mask "
                "or an index past the tensor; every bit fails")
    if f.kind == "poison":
        return (f"{f.count} element(s) hold the int32 minimum, the poison value: probably never "
                "written")
    if f.kind in ("rocmlir_rms", "rocmlir_abs", "rocmlir_rel"):
        what = {"rocmlir_rms": "RMS", "rocmlir_abs": "maxAbsDiff", "rocmlir_rel": "maxRelDiff"}[f.kind]
        bit = {"rocmlir_rms": "RMS", "rocmlir_abs": "abs", "rocmlir_rel": "rel"}[f.kind]
        where = (f" at {_at(f.at.index)}: val={_g(f.at.val)}, kern={_g(f.at.kern)}"
                 if f.at is not None else "")
        return f"{bit} bit 0 (rocMLIR legacy comparator): {what} {f.value:.2e} > {f.limit:g}{where}"
    if f.kind == "allclose":
        w = f.at
        where = (f"; the worst at {_at(w.index)}: val={_g(w.val)}, kern={_g(w.kern)}"
                 if w is not None else "")
        if f.detail == "exact":
            return f"every bit 0 (rocMLIR): {f.count} of {v.n} integer elements differ{where}"
        lim = v.rocmlir
        return (f"every bit 0 (rocMLIR allclose comparator): {f.count} of {v.n} elements have "
                f"|kern - val| > {lim.atol:.3e} + {lim.rtol:.3e}*|val| (the worst by "
                f"{f.value:.2e}){where}")
    if f.kind == "empty":
        return "the output is empty: nothing was verified; every bit fails"
    if f.kind == "kern_zero":
        return (f"the kernel output is all zeros while the reference is not (max|val| "
                f"{f.value:.2e}): did the kernel run and write its output? every bit fails")
    if f.kind == "ref_zero":
        return "the reference is all zeros: this test checks only that the kernel writes zeros"
    if f.kind == "rms":
        return (f"RMS bit 0: RMS {f.value:.2e} > {f.limit:.2e} (relative to max|val| "
                f"{v.ref_max_abs:.2e}); {_spread(v)}")
    if f.kind == "bias":
        side = ("toward +inf" if f.value > 0 else "toward -inf") if f.detail == "toward +inf" \
            else ("away from zero" if f.value > 0 else "toward zero")
        return (f"RMS bit 0 (bias): the kernel's results lean {side}: the mean signed error is "
                f"{f.value:+.3f} ulp of {ot.name} over {v.n} elements, more than the {f.limit:.3f} "
                "a kernel that rounds to nearest reaches once in 1e9 runs (a rounding mode, or a "
                "small term added or dropped everywhere)")
    w = f.at
    if f.kind == "abs":
        msg = (f"abs bit 0: maxAbsDiff {f.value:.2e} > {f.limit:.2e} at {_at(w.index)}: "
               f"val={_g(w.val)}, kern={_g(w.kern)} ({_ulps_at(w, ot)})")
        if f.value <= th.auto[1]:
            msg += f"; within what rounding explains (auto allows {th.auto[1]:.2e})"
        return msg
    if f.kind == "rel":
        return (f"rel bit 0: maxRelDiff {f.value:.2e} > {f.limit:.2e} at {_at(w.index)}: "
                f"val={_g(w.val)}, kern={_g(w.kern)}" + _rel_hint(v, w)
                + f"; maxRelDiff_old (|val| > 1e-3) is {m['max_rel_diff_old']:.2e}")
    if f.kind == "rel_auto":
        rtol, atol = th.rel_auto
        d = abs(w.val - w.kern)
        msg = (f"rel bit 0 (auto): at {_at(w.index)} |val-kern| = {d:.2e} > {rtol:.2e}*|val| + "
               f"{atol:.2e} = {rtol * abs(w.val) + atol:.2e}: val={_g(w.val)}, kern={_g(w.kern)} "
               f"({_ulps_at(w, ot)})")
        if v.bits[0] and v.bits[1]:
            msg += ("; the RMS and abs bits pass: few elements are off by more than rounding "
                    "explains (flushed subnormal inputs, a different accumulation, or a local bug)")
        return msg
    raise ValueError(f"unknown finding {f.kind!r}")


def messages(v) -> list[str]:
    """Why bits are 0 (and the poison note), one sentence each."""
    return [_sentence(f, v) for f in v.findings if f.fails or f.kind == "poison"]


def warnings(v) -> list[str]:
    return [_sentence(f, v) for f in v.findings if not f.fails and f.kind != "poison"]


def render(v, mode: str = "summary", reproduce: str | None = None) -> tuple[list, list]:
    """(stdout lines, the lines a failing run also sends to stderr), each starting with
    '# ', without the bits line."""
    if mode not in MODES:
        raise ValueError(f"unknown report mode {mode!r} (expected one of {', '.join(MODES)})")
    failed = not v.passed
    reasons = [f"convgen: {m}" for m in messages(v)]
    repro = [f"convgen: reproduce with: {reproduce}"] if failed and reproduce else []
    more = details(v) if failed or mode == "always" else []
    if mode == "off":
        out = reasons if v.nonfinite else []
    elif mode == "failure" and not failed:
        out = []
    else:
        head = [summary_line(v)] if v.rocmlir is None else [
            rocmlir_line(v), "convgen's own metrics (for people; rocMLIR's comparator judged): "
            + summary_line(v)]
        out = head + [f"warning: {w}" for w in warnings(v)] + more + reasons
    out += repro
    err = reasons + more + repro if failed else []
    return [PREFIX + ln for ln in out], [PREFIX + ln for ln in err]


def say(line: str) -> None:
    """A progress line for people."""
    print(PREFIX + line, flush=True)


def emit(v, mode: str = "summary", reproduce: str | None = None) -> None:
    """Print the report and, last, the bits line; copy a failure's reasons to stderr when
    stdout is not a terminal (a person would not see them otherwise)."""
    out, err = render(v, mode, reproduce)
    for line in out:
        print(line)
    sys.stdout.flush()
    if err and not sys.stdout.isatty():
        for line in err:
            print(line, file=sys.stderr)
        sys.stderr.flush()
    print(bits_line(v.bits), flush=True)


def reproducer(program: str, argv) -> str:
    return " ".join([program] + [shlex.quote(a) for a in argv])


# ---- JSON --------------------------------------------------------------------------

def json_number(x):
    """Strict JSON has no inf or NaN: write them as strings."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def _element(w) -> dict | None:
    if w is None:
        return None
    return {"value": json_number(w.value), "val": json_number(w.val),
            "kern": json_number(w.kern), "at": dict(w.index)}


def _histogram_json(h) -> dict:
    return {"buckets": [{"label": lab, "count": c, "percent": h.percent(c)}
                        for lab, c in zip(h.labels, h.counts)],
            "excluded": {"label": h.excluded_label, "count": h.excluded,
                         "percent": h.percent(h.excluded)}}


def to_json(v) -> dict:
    out = {k: json_number(x) for k, x in v.metrics.items()}
    out.update(
        bits=list(v.bits), thresholds={k: json_number(x) for k, x in v.thresholds.to_json().items()},
        histograms={k: _histogram_json(h) for k, h in v.histograms.items()},
        n=v.n, nan_count=v.nan_count, inf_count=v.inf_count, exact_count=v.exact_count,
        out_of_tolerance=v.out_of_tolerance,
        ref_nan_count=v.ref_nan_count, ref_inf_count=v.ref_inf_count,
        bad_inf_count=v.bad_inf_count, int_min_count=v.int_min_count,
        ref_max_abs=json_number(v.ref_max_abs), kern_max_abs=json_number(v.kern_max_abs),
        out_type=v.out_type.name, worst={k: _element(w) for k, w in v.worst.items()},
        rocmlir=v.rocmlir.to_json() if v.rocmlir is not None else None,
        findings=[{"kind": f.kind, "fails": f.fails, "count": f.count,
                   "value": json_number(f.value), "limit": json_number(f.limit),
                   "at": _element(f.at), "detail": f.detail}
                  for f in v.findings],
        messages=messages(v), warnings=warnings(v))
    return out


# ---- files ---------------------------------------------------------------------------

def check_paths(json_path: str | None, dump_dir: str | None) -> None:
    """Refuse, before any work, output paths that could not be written afterwards."""
    for what, path, is_dir in (("json", json_path, False), ("dump", dump_dir, True)):
        if path is None:
            continue
        if not path.strip():
            raise ConvgenError(field=what, message="needs a path, got an empty one")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise ConvgenError(field=what, message=f"'{path}': the folder {parent} does not exist")
        # files go into the parent (json, a new dump folder); an existing dump folder is enough
        if not (is_dir and os.path.isdir(path)) and not os.access(parent, os.W_OK | os.X_OK):
            raise ConvgenError(field=what, message=f"'{path}': the folder {parent} is not writable")
        if is_dir:
            if os.path.exists(path) and not os.path.isdir(path):
                raise ConvgenError(field=what, message=f"'{path}' exists and is not a folder")
            if os.path.isdir(path) and not os.access(path, os.W_OK | os.X_OK):
                raise ConvgenError(field=what, message=f"'{path}' is not writable")
        else:
            if os.path.isdir(path):
                raise ConvgenError(field=what, message=f"'{path}' is a folder, not a file")
            if os.path.exists(path) and not os.access(path, os.W_OK):
                raise ConvgenError(field=what, message=f"'{path}' is not writable")


def write_atomic(path: str, write: Callable, suffix: str = "") -> None:
    """Call write(temp_path), then rename the temp file onto `path`: the file is whole or
    absent, never half-written; the temp file is removed on any failure."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".convgen-", suffix=suffix, dir=folder)
    except OSError as e:   # name the file the user asked for, not the temp file
        raise OSError(e.errno, e.strerror, path) from e
    os.close(fd)
    try:
        write(tmp)
        # mkstemp makes the file 0600: give it what a plain open() would (or keep the mode of
        # the file it replaces)
        mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError):   # name the file the user asked for, not the temp file
            raise OSError(e.errno, e.strerror, path) from e
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json(path: str, data: dict) -> None:
    import json

    def write(tmp):
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
    write_atomic(path, write, ".json")


def dump(folder: str, arrays: dict) -> list[str]:
    """Save each tensor as FOLDER/NAME.npy in logical order (bf16 and fp8 widened to float32,
    which holds their values exactly); every file whole or absent."""
    import numpy as np
    import torch
    os.makedirs(folder, exist_ok=True)
    written = []
    for name, t in arrays.items():
        arr = t.detach().cpu()
        if arr.dtype == torch.bfloat16 or (arr.dtype.itemsize == 1 and arr.dtype.is_floating_point):
            arr = arr.float()
        path = os.path.join(folder, f"{name}.npy")
        def write(tmp, a=arr):
            with open(tmp, "wb") as f:
                np.save(f, a.contiguous().numpy())
        write_atomic(path, write, ".npy")
        written.append(path)
    return written

"""`convgen compare`: verify two saved arrays, with no kernel and no convolution.

    convgen compare --kern KERN.npy --ref REF.npy -t f32|f16|bf16|i32|i8
        [-RMS_threshold X] [-absDiff_threshold X] [-relDiff_threshold X]
        [-print-verify-results always|failure|summary|off] [--json FILE]

Flags take one or two dashes and `-flag=value` or `-flag value`. The reference
is widened to float64 and rounded to the output type (as a conv reference is);
the kernel array is cast to the output type. Prints the report and the bits
line; exits 0 when it verified (whatever the bits), 2 on bad input with one
`convgen: error: ...` line.
"""
from __future__ import annotations

import os
import sys
import tempfile

from convgen.errors import ConvgenError

USAGE = ("usage: convgen compare --kern KERN.npy --ref REF.npy -t f32|f16|bf16|i32 "
         "[-RMS_threshold X] [-absDiff_threshold X] [-relDiff_threshold X] "
         "[-print-verify-results always|failure|summary|off] [--json FILE]")
_FLAGS = {"kern": "kern", "ref": "ref", "t": "type", "type": "type",
          "rms_threshold": "rms", "rms": "rms",
          "absdiff_threshold": "abs", "maxabsdiff": "abs",
          "reldiff_threshold": "rel", "maxreldiff": "rel",
          "print-verify-results": "mode", "print_verify_results": "mode", "pv-results": "mode",
          "json": "json"}
_TYPES = {"f32": "float32", "fp32": "float32", "f16": "float16", "fp16": "float16",
          "bf16": "bfloat16", "i32": "int32", "i8": "int32"}


def parse(argv: list[str]) -> dict:
    opts, i = {}, 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            raise ConvgenError(f"unexpected argument '{arg}'")
        name, eq, value = arg.lstrip("-").partition("=")
        key = _FLAGS.get(name.lower())
        if key is None:
            raise ConvgenError(f"unknown flag '{arg}'")
        if not eq:
            if i + 1 >= len(argv):
                raise ConvgenError(f"flag '{arg}' needs a value")
            i += 1
            value = argv[i]
        opts[key] = value
        i += 1
    for key, flag in (("kern", "--kern"), ("ref", "--ref"), ("type", "-t")):
        if key not in opts:
            raise ConvgenError(f"missing {flag}")
    return opts


def _threshold(text: str | None):
    """None (the type's default) or the text as given: tolerance.resolve checks it."""
    return None if text is None or text.strip().lower() == "default" else text


def _load(path: str, what: str):
    import numpy as np
    try:
        arr = np.load(path, allow_pickle=False)
    except OSError as e:
        raise ConvgenError(f"cannot read {what} '{path}': {e.strerror or e}") from None
    except (ValueError, EOFError) as e:
        raise ConvgenError(f"cannot read {what} '{path}' as .npy: {e}") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiu":
        raise ConvgenError(f"{what} '{path}' does not hold a real numeric array")
    return arr


def _tensors(opts: dict):
    import numpy as np
    import torch
    name = opts["type"].lower()
    if name not in _TYPES:
        raise ConvgenError(f"unknown type '-t {opts['type']}' (expected f32, f16, bf16, i32 or i8)")
    out_dtype = getattr(torch, _TYPES[name])
    kern, ref = _load(opts["kern"], "--kern"), _load(opts["ref"], "--ref")
    if kern.shape != ref.shape:
        raise ConvgenError(f"shapes differ: --kern {kern.shape} vs --ref {ref.shape}")
    ref64 = torch.from_numpy(np.asarray(ref, dtype=np.float64))
    # Round the reference once to the output type, as the kernel's result was.
    ref64 = ref64.round() if not out_dtype.is_floating_point else ref64.to(out_dtype).to(torch.float64)
    kern_t = torch.from_numpy(np.ascontiguousarray(kern)).to(out_dtype)
    return kern_t, ref64, out_dtype


def _write_json(path: str, data: dict) -> None:
    import json
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".convgen-", suffix=".json", dir=folder)
    except OSError as e:
        raise ConvgenError(f"cannot write --json '{path}': {e.strerror}") from None
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def run(argv: list[str]) -> int:
    from convgen import report, verify
    from convgen.options import Thresholds
    opts = parse(argv)
    mode = opts.get("mode", "summary").lower()
    if mode not in report.MODES:
        raise ConvgenError(f"unknown -print-verify-results '{mode}' "
                           f"(expected one of: {', '.join(report.MODES)})")
    th = Thresholds(*(_threshold(opts.get(k)) for k in ("rms", "abs", "rel")))
    kern, ref, out_dtype = _tensors(opts)
    result = verify.verify(kern, ref, out_dtype, th, accum=None,
                           dim_names="ngkhw" if kern.dim() == 5 else None)
    for line in report.format_report(result, mode):
        print(line)
    if "json" in opts:
        _write_json(opts["json"], result.to_json())
    print(report.bits_line(result.bits), flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in ("-h", "--help", "-help"):
        print(USAGE)
        return 0
    try:
        return run(argv)
    except ConvgenError as e:
        sys.stdout.flush()
        print("convgen: error: " + " ".join(str(e).split()), file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())

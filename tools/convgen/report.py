"""What a person reads after a verification, and the one line FileCheck reads.

FileCheck patterns look for the bits line, `[1 1 1]` or `[{{[01]}} {{[01]}} {{[01]}}]`,
anywhere in the output. So every other line starts with `# ` and never holds a
'[' followed by digits and spaces up to ']' (nor "[0 " / "[1 "): a histogram
label or a coordinate must not be mistaken for the verdict.

Modes (-print-verify-results):
    summary  one line with the three metrics and their thresholds; the details too on failure
    always   the line and the details
    failure  nothing on success; the line and the details on failure
    off      nothing, except the reasons when the output holds non-finite values
"""
from __future__ import annotations

MODES = ("always", "failure", "summary", "off")
PREFIX = "# "
_NAMES = {"max_abs_diff": "maxAbsDiff", "max_rel_diff": "maxRelDiff",
          "max_rel_diff_old": "maxRelDiff_old", "max_epsilon_diff": "maxEpsilonDiff",
          "rel_auto": "rel (auto) check"}


def bits_line(bits) -> str:
    return "[" + " ".join(str(int(b)) for b in bits) + "]"


def _rel_threshold(th) -> str:
    if th.rel_auto is None:
        return f"(<= {th.rel:.2e})"
    rtol, atol = th.rel_auto
    return f"[auto: |d| <= {rtol:.2e}*|val| + {atol:.2e}]"


def summary_line(result) -> str:
    m, th = result.metrics, result.thresholds
    return (f"RMS={m['rms']:.2e} (<= {th.rms:.2e}) "
            f"maxAbsDiff={m['max_abs_diff']:.2e} (<= {th.abs:.2e}) "
            f"maxRelDiff={m['max_rel_diff']:.2e} {_rel_threshold(th)} "
            f"maxRelDiff_old={m['max_rel_diff_old']:.2e} maxEpsilonDiff={m['max_epsilon_diff']:.3g} "
            f"({result.out_type}, {result.n} elements, {result.exact_count} equal)")


def _histogram(h) -> list[str]:
    width = max(len(lab) for lab in h.labels)
    lines = [f"{h.name} histogram ({h.n} elements):"]
    for lab, c in zip(h.labels, h.counts):
        lines.append(f"  {lab:<{width}}  {c:>12} ({h.percent(c):.6f}%)")
    lines.append(f"  left out ({h.excluded_label}): {h.excluded} ({h.percent(h.excluded):.6f}%)")
    return lines


def _worst(result) -> list[str]:
    lines = ["worst elements:"]
    for key, w in result.worst.items():
        # The auto rel check's worst element matters only where it exceeds rtol*|val|.
        if w is None or (key == "rel_auto" and (result.thresholds.rel_auto is None or w.value <= 0)):
            continue
        at = " ".join(f"{k}={i}" for k, i in w.index.items())
        value = f"{w.value:.3e}" if key != "rel_auto" else f"excess {w.value:.3e}"
        lines.append(f"  {_NAMES[key]} {value} at {at}: val={w.val:.9g} kern={w.kern:.9g}")
    return lines if len(lines) > 1 else []


def details(result) -> list[str]:
    lines = []
    for h in result.histograms.values():
        lines += _histogram(h)
    lines += _worst(result)
    return lines


def format_report(result, mode: str = "summary") -> list[str]:
    """Lines for people, each starting with '# '; the bits line is printed by the caller."""
    if mode not in MODES:
        raise ValueError(f"unknown report mode {mode!r} (expected one of {', '.join(MODES)})")
    failed = 0 in result.bits
    if mode == "off":
        body = [f"convgen: {m}" for m in result.messages] if result.nonfinite else []
    elif mode == "failure" and not failed:
        body = []
    else:
        body = [summary_line(result)] + [f"warning: {w}" for w in result.warnings]
        if failed or mode == "always":
            body += details(result)
        body += [f"convgen: {m}" for m in result.messages]
    return [PREFIX + line for line in body]

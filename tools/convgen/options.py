"""What one `convgen` run was asked to do, after the flags are parsed.

The CLI (cli.py) is the only module that knows flag spellings; it fills these
records. Every later stage reads them and never looks at argv.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from convgen.inputs import DataSpec
from convgen.problem import ConvProblem

@dataclass(frozen=True)
class Thresholds:
    """Each is a float, the string "auto" (derived from the types and the number
    of accumulations, see tolerance.py), or None (the type's default)."""

    rms: float | str | None = None
    abs: float | str | None = None
    rel: float | str | None = None


@dataclass(frozen=True)
class KernelOptions:
    use_matrix_cores: bool = False          # -x2 / -mfma on
    perf_config: str | None = None          # -perf_config, parsed by kernels/config.py
    input_precision: str = "ieee"           # fp32 tl.dot precision: ieee | tf32 | tf32x3
    flush_subnormals: bool = False          # -flush_subnormals: MI200 input behaviour


@dataclass(frozen=True)
class ReferenceOptions:
    validator: str | None = "cpu"           # "cpu" (-pv), "gpu" (-pv_with_gpu) or None (no check)
    accumulate: int | None = None           # -ref_accumulate N
    flush_subnormals: bool = False          # -ref_flush_subnormals


@dataclass(frozen=True)
class ReportOptions:
    print_results: str = "summary"          # always | failure | summary | off
    dump_dir: str | None = None             # --dump DIR
    json_path: str | None = None            # --json FILE


@dataclass(frozen=True)
class RunConfig:
    problem: ConvProblem
    data: DataSpec = field(default_factory=DataSpec)
    kernel: KernelOptions = field(default_factory=KernelOptions)
    reference: ReferenceOptions = field(default_factory=ReferenceOptions)
    thresholds: Thresholds = field(default_factory=Thresholds)
    report: ReportOptions = field(default_factory=ReportOptions)
    argv: tuple[str, ...] = ()              # as given, to print a reproducer

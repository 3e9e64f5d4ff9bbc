"""What one `convgen` run was asked to do, after the flags are parsed.

The CLI (cli.py) is the only module that knows flag spellings; it fills these frozen
records. Every later stage reads them and never looks at argv. Field names here are
the words errors use to say which option is wrong (ConvgenError.field).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from convgen.dtypes import ElemType
from convgen.problem import ConvProblem
from convgen.tolerance import Thresholds

# `-rand fixed`: a short repeating pattern, the same for every run (rocmlir-gen style).
FIXED_PATTERN = (0.5, -1.0, 0.75, 2.0, -0.25)
# rocmlir-gen's own (--semantics=rocmlir): by the element type, float or integer
ROCMLIR_FIXED = {"float": (0.5, -1.0, 0.75), "int": (1.0, -1.0, 2.0)}


@dataclass(frozen=True)
class DataSpec:
    """How the inputs are filled (inputs.py draws them)."""
    mode: str = "random"          # "random", "fixed" (FIXED_PATTERN) or "none" (all ones)
    seed: int = 1
    lo: float | None = None        # None: the type's default range
    hi: float | None = None
    rand_type: str | None = None   # "int" or "float"; None: follows the element type
    side: str = "both"             # "both" or the one tensor that gets random data
    both_signs: bool = False       # draw |x| from [lo, hi], then a random sign
    generator: str = "philox"      # "philox" (convgen's) or "rocmlir" (rocmlir-gen's rules)
    int_lo: int = -5               # rocmlir: -rand_min_int, -rand_max_int (int draws in [lo, hi))
    int_hi: int = 5

    def describe(self) -> str:
        if self.mode == "fixed":
            return "a fixed pattern"
        if self.mode == "none":
            return "all ones"
        return f"random, seed {self.seed}"


@dataclass(frozen=True)
class Comparison:
    """Who judges the bits: convgen's own checks, or rocMLIR's legacy or allclose
    comparator (tolerance.rocmlir_limits), with allclose's atol and rtol when given."""
    comparator: str = "convgen"
    atol: float | None = None
    rtol: float | None = None


@dataclass(frozen=True)
class KernelOptions:
    use_matrix_cores: bool = False          # the matrix-core path (tl.dot); else FMA
    perf_config: tuple = ()                 # ((field, value), ...) over the default config
    perf_form: str | None = None            # -perf_config's rocMLIR form (a tuning hint for
                                            # rocMLIR's kernels: picks.py maps it to the
                                            # nearest tile ours run); None: convgen's fields
    input_precision: str = "ieee"           # fp32 tl.dot precision: ieee | tf32 | tf32x3
    flush_subnormals: bool = False          # zero subnormal inputs first (MI200 behaviour)
    tuning_db: str | None = ""              # "": the default database; None: none
    selector: str | None = ""               # "": the default model for the arch; None: none

    @property
    def config_overrides(self) -> dict:
        return dict(self.perf_config)


@dataclass(frozen=True)
class ReferenceOptions:
    validator: str | None = "cpu"           # "cpu" (float64), "gpu" (FMA kernel) or None
    accumulate: int | None = None           # CPU reference: blocks of N products, fp32 sums
    flush_subnormals: bool = False          # zero subnormal inputs of the reference


@dataclass(frozen=True)
class ReportOptions:
    print_results: str = "summary"          # always | failure | summary | off
    dump_dir: str | None = None             # save inputs, output, reference as .npy
    json_path: str | None = None            # save the verdict as JSON


@dataclass(frozen=True)
class RunConfig:
    problem: ConvProblem
    data: DataSpec = field(default_factory=DataSpec)
    kernel: KernelOptions = field(default_factory=KernelOptions)
    reference: ReferenceOptions = field(default_factory=ReferenceOptions)
    thresholds: Thresholds = field(default_factory=Thresholds)
    report: ReportOptions = field(default_factory=ReportOptions)
    argv: tuple[str, ...] = ()              # as given, to print a reproducer
    comparison: Comparison = field(default_factory=Comparison)
    impl: str = "convgen"                   # the implementation under test (implementations.py)


@dataclass(frozen=True)
class CompareConfig:
    """`convgen compare`: two saved arrays, the convolution type whose output they hold."""
    kern_path: str
    ref_path: str
    dtype: ElemType
    thresholds: Thresholds = field(default_factory=Thresholds)
    comparison: Comparison = field(default_factory=Comparison)
    accumulate: int | None = None          # products per output element; None: auto's one
    print_results: str = "summary"
    json_path: str | None = None

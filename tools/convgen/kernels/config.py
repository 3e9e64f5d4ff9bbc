"""Tile configurations: the default chosen per problem and device, and the checks a
configuration must pass before it is compiled.

A configuration's fields:

    block_m, block_n, block_k   the tile: GEMM rows, columns, reduction step
    num_warps, num_stages       warps per program; software-pipelining depth
    split                       bwd_weight: the reduction split over this many programs
    group_m                     output tiles walked GROUP_M tile rows at a time (L2 reuse)
    waves_per_eu, matrix_instr_nonkdim, kpack
                                AMD compile options, used only on a HIP backend
    tma                         1: the tensor-descriptor kernels (kernels/tma.py: boxes of
                                whole pixels copied by TMA on sm90+), where tma_unsupported is None;
                                bwd_weight's block_k is then its box of output pixels
    persistent                  1: fwd and stride-1 bwd_data on the descriptor kernels as
                                one program per SM, each looping over tiles, so a tile's
                                loads overlap the previous tile's store (tma=1 only);
                                2: the same, each tile stored as two halves of its columns
                                (half the store's shared memory: room for another stage)
    streamk                     bwd_weight on the descriptor kernels (split 1): stream-K,
                                `streamk` programs per SM sharing every tile's reduction
                                steps equally, so a few large tiles still fill every SM
                                (tma=1 only)
    tail                        fwd on the descriptor kernels: the tiles left over after the
                                last whole wave (one program per SM) each shared by `tail`
                                programs (2 or 4), one run of its reduction steps each, their
                                fp32 parts added in order by the last to finish, so the
                                leftover tiles take 1/tail of a wave, not a whole one,
                                where their tail x count programs fit one wave (tma=1 only)
    swap_ab                     fwd and bwd_data on the descriptor kernels: 1 computes each
                                tile transposed, filter block times pixel block, the filter
                                read through its (k, y*x*c) view (filter k, y, x, c in
                                memory; fwd: block_k must divide c). Triton 3.6 on Hopper
                                feeds a dot's first operand from registers when it is
                                reshaped from a box and keeps the second in shared memory:
                                so the 2-d filter goes first and the pixel box second
                                (tma=1 only)
    s2d                         1: a strided problem run as a stride-1 one on the stride folded
                                into the channels (kernels/s2d.py); 2: the filter's columns
                                folded in too (fwd, bwd_weight). The other fields then
                                describe the folded problem's kernel (tma=1 included)
    max_num_imprecise_acc       fp8 dots: how many products NVIDIA's fp8 units may sum at
                                their own ~14-bit precision before the sum goes to the
                                fp32 accumulator: 0 (the default for fp8) after every
                                instruction; up to block_k, after that many; above
                                block_k, Triton's own default (never on sm90, every
                                instruction elsewhere). On sm90 any positive value tests
                                that fast accumulation and the auto thresholds allow for
                                it (backend.dot_u_acc). Other devices ignore it.
    direct                      1: the direct kernels (kernels/direct.py) for groups of at
                                most MAX_GROUP_CHANNELS input and output channels (depthwise
                                convolution): FMA sums, no GEMM. block_m is then the pixels of
                                one image row a tile covers, block_n the channels (counted
                                across groups), block_k the rows one program walks (fwd,
                                bwd_data), split bwd_weight's parts of the image rows;
                                group_m has no use. The default wherever a grouped problem
                                fits (direct_fits)

Block sizes are powers of two (>= 16 on the matrix-core path, whose block_k the FMA
path ignores: it steps one reduction element at a time). The CLI turns `-perf_config`
text into a dict of fields (`overrides`); `choose` applies it to the default.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, fields, replace

from convgen import gpus
from convgen.backend import Backend
from convgen.directions import blocks_span_taps, column_tiles
from convgen.errors import ConvgenError
from convgen.kernels import s2d
from convgen.kernels.geometry import (bwd_weight_parts, cdiv, channel_block, direct_channels,
                                      direct_parts, direct_pixels, direct_taps, persistent_fits,
                                      phase_fwd, pixel_boxes, split_parts, streamk_fits,
                                      tma_unsupported)
from convgen.problem import ConvProblem


@dataclass(frozen=True)
class KernelConfig:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 2
    split: int = 1
    group_m: int = 8
    waves_per_eu: int | None = None
    matrix_instr_nonkdim: int | None = None
    kpack: int | None = None
    max_num_imprecise_acc: int | None = None
    tma: int | None = None
    s2d: int | None = None
    persistent: int | None = None
    streamk: int | None = None
    tail: int | None = None
    swap_ab: int | None = None
    direct: int | None = None

    def describe(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                        if getattr(self, f.name) is not None)

    def compile_options(self) -> dict:
        """Triton compile options; Backend.compile_options drops the ones a backend lacks."""
        opts = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        for name in ("waves_per_eu", "matrix_instr_nonkdim", "kpack"):
            if getattr(self, name) is not None:
                opts[name] = getattr(self, name)
        return opts


FIELDS = tuple(f.name for f in fields(KernelConfig))
FIELD_VALUES = operator.attrgetter(*FIELDS)
MIN_BLOCK_K_1BYTE = 32
# Upper bounds: a larger tile fits no GPU's registers, and Triton refuses tensors of more
# than 2^20 elements; a deeper pipeline fits no GPU's shared memory.
MAX_BLOCK_MN = 512
MAX_BLOCK_K = 256
MAX_STAGES = 8
MAX_SPLIT = 1024
MAX_GROUP_M = 64
MAX_WORKSPACE = 2**31 - 1   # the kernels index with 32-bit offsets
# matrix_instr_nonkdim and kpack take only these values in Triton's HIP backend
AMD_CHOICES = {"matrix_instr_nonkdim": (0, 4, 16, 32), "kpack": (1, 2)}
MAX_WAVES_PER_EU = 16


def tma_refused(problem, backend: Backend, use_dot: bool = True) -> str | None:
    """Why the descriptor kernels cannot run this problem on this backend; None: they can."""
    if backend.tma_unavailable:
        return backend.tma_unavailable
    # validate asks once per config of a space, the selector for every candidate: the
    # answer is the problem's, kept for the last problem asked about
    if _LAST_TMA[0] is not problem or _LAST_TMA[1] != use_dot:
        _LAST_TMA[:] = [problem, use_dot, tma_unsupported(problem, use_dot)]
    return _LAST_TMA[2]


_LAST_TMA: list = [None, None, None]


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def _bad(what: str) -> ConvgenError:
    return ConvgenError(what, field="perf_config")


# The descriptor kernels' forms a config may ask for, one at a time (KernelConfig's doc):
# the values each takes besides 0, and what a value counts
_FORMS = {"persistent": ((1, 2), ""), "streamk": ((1, 2), " (programs per SM)"),
          "tail": ((2, 4), " (programs per leftover tile)")}


def _check_powers_of_two(cfg: KernelConfig, backend: Backend, block_k_top: int) -> None:
    """block_m, block_n, block_k (at most block_k_top) and num_warps: powers of two in range."""
    for name, top in (("block_m", MAX_BLOCK_MN), ("block_n", MAX_BLOCK_MN),
                      ("block_k", block_k_top), ("num_warps", backend.max_warps)):
        v = getattr(cfg, name)
        if not _pow2(v) or v > top:
            raise _bad(f"{name}={v} must be a power of two from 1 to {top}"
                       + (f" on {backend.arch}" if name == "num_warps" else ""))


def _check_amd_options(cfg: KernelConfig) -> None:
    """The AMD compile options take the values Triton's HIP backend accepts."""
    for name, choices in AMD_CHOICES.items():
        v = getattr(cfg, name)
        if v is not None and v not in choices:
            raise _bad(f"{name}={v} must be one of {', '.join(map(str, choices))}")
    if cfg.waves_per_eu is not None and not 0 <= cfg.waves_per_eu <= MAX_WAVES_PER_EU:
        raise _bad(f"waves_per_eu={cfg.waves_per_eu} must be from 0 to {MAX_WAVES_PER_EU}")


def validate(cfg: KernelConfig, problem: ConvProblem, backend: Backend, use_dot: bool) -> None:
    """Raise ConvgenError (field "perf_config") naming the first field out of range."""
    if cfg.direct not in (None, 0, 1):
        raise _bad(f"direct={cfg.direct} must be 0 or 1")
    if cfg.direct:
        _validate_direct(cfg, problem, backend)
        return
    if cfg.s2d:
        _validate_s2d(cfg, problem, backend, use_dot)
        return
    _check_powers_of_two(cfg, backend, MAX_BLOCK_K)
    if use_dot and min(cfg.block_m, cfg.block_n, cfg.block_k) < 16:
        small = next(n for n in ("block_m", "block_n", "block_k") if getattr(cfg, n) < 16)
        raise _bad(f"{small}={getattr(cfg, small)}: block sizes must be at least 16 on the "
                   "matrix-core path")
    if use_dot and cfg.block_k < min_block_k(problem):
        raise _bad(f"block_k={cfg.block_k}: {problem.dtype.name} on the matrix-core path needs "
                   f"block_k >= {min_block_k(problem)}")
    if not 1 <= cfg.num_stages <= MAX_STAGES:
        raise _bad(f"num_stages={cfg.num_stages} must be from 1 to {MAX_STAGES}")
    if use_dot:
        need, have = lds_bytes(cfg, problem, backend), backend.facts
        if need is not None and need > have.shared_per_program:
            raise _bad(f"num_stages={cfg.num_stages}: a {cfg.block_m}x{cfg.block_n}x{cfg.block_k} "
                       f"{problem.dtype.name} tile in {cfg.num_stages} stages takes "
                       f"{need / 1024:.0f} KiB of LDS; a {backend.arch} CU has "
                       f"{have.shared_per_program // 1024} KiB")
    if not 1 <= cfg.split <= MAX_SPLIT:
        raise _bad(f"split={cfg.split} must be from 1 to {MAX_SPLIT}")
    if not 1 <= cfg.group_m <= MAX_GROUP_M:
        raise _bad(f"group_m={cfg.group_m} must be from 1 to {MAX_GROUP_M}")
    if cfg.split > 1 and not problem.direction.splits_reduction:
        raise _bad(f"split={cfg.split} applies to bwd_weight only")
    _check_amd_options(cfg)
    if cfg.max_num_imprecise_acc is not None and cfg.max_num_imprecise_acc < 0:
        raise _bad(f"max_num_imprecise_acc={cfg.max_num_imprecise_acc} must be >= 0")
    if cfg.max_num_imprecise_acc and not problem.dtype.is_fp8:
        raise _bad("max_num_imprecise_acc applies to fp8 types only")
    if cfg.tma not in (None, 0, 1):
        raise _bad(f"tma={cfg.tma} must be 0 or 1")
    # the descriptor kernels' other forms: each takes these values, needs tma=1, and
    # excludes the others
    forms = [name for name in _FORMS if getattr(cfg, name)]
    for name, (values, meaning) in _FORMS.items():
        v = getattr(cfg, name)
        if v not in (None, 0, *values):
            raise _bad(f"{name}={v} must be 0, {', '.join(map(str, values[:-1]))} or "
                       f"{values[-1]}{meaning}")
        if v and not cfg.tma:
            raise _bad(f"{name}={v} applies to the descriptor kernels (tma=1) only")
        if v and name != forms[0]:
            raise _bad(f"{name}={v} with {forms[0]}={getattr(cfg, forms[0])}: one or the other")
    if cfg.persistent and not persistent_fits(problem):
        raise _bad(f"persistent={cfg.persistent}: {problem.direction.name} "
                   + ("splits its reduction over programs" if problem.direction.splits_reduction
                      else "with a stride writes one phase view per grid row"))
    if cfg.streamk and not streamk_fits(problem):
        raise _bad(f"streamk={cfg.streamk}: " + (
            "bwd_weight with a stride on rows or columns that are not multiples of it takes "
            "one descriptor per phase" if problem.direction.splits_reduction
            else f"{problem.direction.name} has no stream-K kernel"))
    if cfg.streamk and cfg.split != 1:
        raise _bad(f"split={cfg.split}: stream-K shares every tile's reduction among its "
                   "programs itself; split must be 1")
    if cfg.tail and not problem.direction.tail:
        raise _bad(f"tail={cfg.tail}: {problem.direction.name} has no kernel that shares "
                   "leftover tiles (fwd only)")
    if cfg.swap_ab not in (None, 0, 1):
        raise _bad(f"swap_ab={cfg.swap_ab} must be 0 or 1")
    if cfg.swap_ab:
        why = swap_ab_refused(problem, cfg)
        if why:
            raise _bad(f"swap_ab=1: {why}")
    if cfg.tma:
        why = tma_refused(problem, backend, use_dot)
        if why:
            raise _bad(f"tma=1: {why}")
        if phase_fwd(problem) and problem.c % cfg.block_k:
            raise _bad(f"block_k={cfg.block_k}: a strided fwd on the descriptor kernels takes "
                       f"channel blocks that divide c={problem.c} (each phase's channels are "
                       "one run of its view)")
        if problem.direction.splits_reduction:
            parts = min(cfg.split, pixel_boxes(problem, cfg.block_k))
            if parts * problem.k * problem.gemm[1] > MAX_WORKSPACE:
                raise _bad(f"split={cfg.split}: {parts} parts of {problem.k}x{problem.gemm[1]} "
                           "partial sums exceed the 2^31 elements a kernel can index")


# The per-group channels (c and k) the direct kernels unroll (kernels/direct.py)
MAX_GROUP_CHANNELS = 8
# A direct tile's most elements: its fp32 sums stay in registers (64 a thread at 4 warps)
MAX_DIRECT_TILE = 2**13
# The most image rows one direct fwd or bwd_data program walks (block_k)
MAX_DIRECT_ROWS = 64


def direct_refused(problem: ConvProblem) -> str | None:
    """Why the direct kernels cannot run this problem; None: they can."""
    if max(problem.c, problem.k) > MAX_GROUP_CHANNELS:
        return (f"groups of at most {MAX_GROUP_CHANNELS} input and output channels; this "
                f"problem's have c={problem.c}, k={problem.k} (its GEMM kernels do those)")
    return None


def direct_fits(problem: ConvProblem) -> bool:
    """A grouped problem the direct kernels take by default: depthwise convolution and
    other groups of at most MAX_GROUP_CHANNELS channels, where a GEMM tile would be mostly
    padding (a depthwise group is one column wide)."""
    return problem.g > 1 and direct_refused(problem) is None


def _validate_direct(cfg: KernelConfig, problem: ConvProblem, backend: Backend) -> None:
    why = direct_refused(problem)
    if why:
        raise _bad(f"direct=1: {why}")
    _check_powers_of_two(cfg, backend, MAX_DIRECT_ROWS)
    taps = direct_taps(problem)
    if cfg.block_m * cfg.block_n * taps > MAX_DIRECT_TILE:
        raise _bad(f"block_m={cfg.block_m}, block_n={cfg.block_n}: a direct tile holds at "
                   f"most {MAX_DIRECT_TILE} elements"
                   + (f" ({taps} taps each in bwd_weight)" if taps > 1 else ""))
    if not 1 <= cfg.num_stages <= MAX_STAGES:
        raise _bad(f"num_stages={cfg.num_stages} must be from 1 to {MAX_STAGES}")
    if not 1 <= cfg.split <= MAX_SPLIT:
        raise _bad(f"split={cfg.split} must be from 1 to {MAX_SPLIT}")
    if cfg.split > 1 and not problem.direction.splits_reduction:
        raise _bad(f"split={cfg.split} applies to bwd_weight only")
    for name in ("tma", "s2d", "persistent", "streamk", "tail", "swap_ab"):
        if getattr(cfg, name):
            raise _bad(f"{name}={getattr(cfg, name)} with direct=1: the direct kernels have "
                       "no such form")
    _check_amd_options(cfg)
    if problem.direction.splits_reduction:
        parts, _ = direct_parts(problem, cfg)
        if parts * problem.g * problem.k * problem.c * problem.y * problem.x > MAX_WORKSPACE:
            raise _bad(f"split={cfg.split}: the parts' partial sums exceed the 2^31 elements "
                       "a kernel can index")


def _direct_default(problem: ConvProblem, backend: Backend) -> KernelConfig:
    """The direct kernels' rule, from the H100's tuning of MobileNetV2's and ConvNeXt-T's
    depthwise layers (docs/conv-benchmark.md). fwd and bwd_data: 8 pixels of a row by up to
    64 channels, one warp, 4 rows a program from 28 rows up (the fastest of the space on
    56x56, within 3% on 7x7 filters), 1 below. bwd_weight: 16 channels by as many pixels as
    keep the tile's sums (every tap's) at MAX_DIRECT_TILE, 2 warps, the image rows cut into
    parts enough for about four programs on every unit (the fastest on every layer tuned,
    1.5x the 32-channel, 4-warp tile's speed). In the interpreter, which pays per program:
    whole rows of up to 128 pixels and 64 channels."""
    height, width, _ = direct_pixels(problem)
    taps = direct_taps(problem)
    rows = 1
    if backend.interpreter:
        bn = min(64, next_pow2(direct_channels(problem)))
        bm = max(1, min(128, next_pow2(width), MAX_DIRECT_TILE // (bn * taps)))
        warps = 4
    elif taps > 1:
        bn = min(16, next_pow2(direct_channels(problem)))
        bm = max(1, min(next_pow2(width), MAX_DIRECT_TILE // (bn * taps)))
        warps = 2
    else:
        bm, bn = min(8, next_pow2(width)), min(64, next_pow2(direct_channels(problem)))
        warps = 1
        rows = 4 if height >= 28 else 1
    split = 1
    if problem.direction.splits_reduction:
        ref = gpus.reference_device(backend.arch)
        units = backend.units() or (ref.units if ref else 1)
        col_blocks = cdiv(direct_channels(problem), bn)
        split = max(1, min(MAX_SPLIT, problem.n * problem.ho // 4, cdiv(4 * units, col_blocks)))
    return KernelConfig(block_m=bm, block_n=bn, block_k=rows, num_warps=warps, num_stages=2,
                        split=split, direct=1)


def lds_bytes(cfg: KernelConfig, problem: ConvProblem, backend: Backend) -> int | None:
    """LDS a pointer kernel of `cfg` takes on an AMD GPU for the problem it runs (a folded
    config's inner problem), in bytes (None elsewhere: NVIDIA's
    shared memory is Triton's to check). Triton's AMD pipeliner keeps num_stages - 1 buffers
    of a step's two blocks (one without pipelining); on gfx950 it copies global memory
    straight to LDS and keeps num_stages, each padded by up to 1/32. Cross-compiled with
    Triton 3.9 (gfx90a, gfx942, gfx950): 128x128x64 f16 in 2 stages 32 KiB (gfx950 66 KiB),
    3 stages 64 KiB (99 KiB), 64x128x64 in 4 stages 72 KiB (99 KiB)."""
    a = backend.facts
    if a is None or a.vendor != "amd":
        return None
    step = (cfg.block_m + cfg.block_n) * cfg.block_k * max(8, problem.dtype.bits) // 8
    if a.lds_async:
        return cfg.num_stages * step * 33 // 32
    return max(1, cfg.num_stages - 1) * step


def swap_ab_refused(problem: ConvProblem, cfg: KernelConfig) -> str | None:
    """Why `cfg` with swap_ab=1 cannot run `problem`; None: it can."""
    if not cfg.tma:
        return "applies to the descriptor kernels (tma=1) only"
    if not problem.direction.swap_ab:
        return f"{problem.direction.name} has no swapped kernel (fwd and bwd_data only)"
    if problem.direction.swap_ab == "c" and problem.c % cfg.block_k:
        # a step past the last channel of a tap would read the next tap's filter; the
        # pixel box's zeros there make 0 * inf = NaN of an infinite filter value
        return (f"block_k={cfg.block_k} must divide c={problem.c} (the filter's (k, y*x*c) "
                "view has no zeros past a tap's channels)")
    order = problem.layouts["filter"].replace("g", "")
    if order != "kyxc":
        return (f"filter layout {order}: the swapped kernel reads the filter as (k, y*x*c), "
                "which needs it k, y, x, c in memory")
    return None


def _validate_s2d(cfg: KernelConfig, problem: ConvProblem, backend: Backend, use_dot: bool) -> None:
    """A folded config is the folded problem's config: checked against that problem."""
    why = s2d.unsupported(problem, cfg.s2d)
    if why is None and problem.dtype.is_fp8:
        # its copy kernels fill with an integer 0, which Triton casts to no fp8 type
        why = f"{problem.dtype.name}: the fold's copies move 16- and 32-bit elements only"
    if why:
        raise _bad(f"s2d={cfg.s2d}: {why}")
    inner = s2d.inner_problem(problem, cfg.s2d)
    try:
        validate(replace(cfg, s2d=None), inner, backend, use_dot)
    except ConvgenError as e:
        raise _bad(f"s2d={cfg.s2d} (a {inner.y}x{inner.x} stride-1 filter on {inner.c} "
                   f"channels): {e}") from None


def default_config(problem: ConvProblem, backend: Backend, use_dot: bool,
                   descriptors: bool = True, gemm: bool = False) -> KernelConfig:
    """The rule's config; descriptors=False keeps to the pointer kernels (no tma, no fold);
    gemm=True to the GEMM kernels (no direct kernel, even where direct_fits)."""
    if direct_fits(problem) and not gemm:
        return _direct_default(problem, backend)
    m, _, _ = problem.gemm
    n = problem.direction.tile_n(problem)
    k = problem.direction.tile_k(problem)
    if backend.interpreter:
        # The interpreter pays per program and per loop step, not per element:
        # few, large tiles.
        return KernelConfig(block_m=min(256, max(16, next_pow2(m))),
                            block_n=min(128, max(16, next_pow2(n))),
                            block_k=min(64, max(min_block_k(problem), next_pow2(k))) if use_dot else 1,
                            num_warps=4, num_stages=1, split=1)
    bn = 128 if n >= 128 else max(16, next_pow2(n))
    bm = 128 if m >= 128 else max(16, next_pow2(m))
    if not use_dot:
        return KernelConfig(block_m=min(bm, 64), block_n=min(bn, 64), block_k=1,
                            num_warps=4, num_stages=1, split=_split(problem, bm, bn))
    if descriptors and _tma_by_default(problem, backend):
        return _tma_default(problem)
    mode = _s2d_by_default(problem, backend) if descriptors else None
    if mode:
        return replace(_tma_default(s2d.inner_problem(problem, mode)), s2d=mode)
    # a channel block no wider than the channels (the C = 3 stem wastes less)
    bk = min(64 if problem.dtype.bits <= 16 else 32, max(min_block_k(problem), next_pow2(k)))
    if backend.is_hip:
        return _amd_default(problem, backend, bm, bn, bk)
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk,
                        num_warps=8 if bm * bn >= 128 * 128 else 4, num_stages=3,
                        split=_split(problem, bm, bn))


def _amd_default(problem: ConvProblem, backend: Backend, bm: int, bn: int, bk: int) -> KernelConfig:
    """The rule on AMD (the tuning data holds no AMD rows; these follow from what the
    compiler reports, convgen audit):

    - 64-wide tiles where blocks span filter taps (the C = 3 stem), 128x64 for channels-first
      tensors: both take more registers for their addresses
    - the tile is halved, the longer side first, down to 64x64, while the launch has fewer
      programs than the device has CUs (an MI300X has 304; its guide asks for 1024 and more);
      bwd_weight keeps its tile and splits its reduction instead
    - waves_per_eu=0: the compiler takes the registers it needs. 2 makes LLVM pad a
      128x128 tile to 2 waves a SIMD, one 8-warp program a CU; with 0 the same kernel
      takes 74-116 VGPRs, 4-6 waves, and LDS lets two programs share a CU (docs/amd.md)
    - 16x16 matrix instructions (matrix_instr_nonkdim=16), kpack=1, and 2 stages (one LDS
      buffer: two 128x128x64 programs fit a 64 KB CU); 8 warps on a 128x128 tile, 4 on
      gfx908
    - bwd_weight's split: parts enough for two programs on every CU of the device
    """
    if blocks_span_taps(problem) and problem.direction.name != "bwd_data":
        # blocks across taps gather their (y, x, c) per element: the index arithmetic
        # takes registers. Cross-compiled for gfx942 with Triton 3.6, fwd's 128x64x64 of
        # the C = 3 stem took 284 VGPRs, bwd_weight's 64x128x64 282 (one wave a SIMD);
        # 64x64x64 took 120-164 (3-4 waves)
        bm, bn = min(bm, 64), min(bn, 64)
    elif problem.layouts["input"][-1] != "c" and bm * bn >= 128 * 128:
        # channels-first tensors are read with more address arithmetic: Triton 3.6 gave a
        # strided 1x1 bwd_data on 128x128 tiles 146-172 VGPRs (2-3 waves a SIMD: one
        # 8-warp program a CU), on 128x64 tiles 112-200 (two programs)
        bn = 64
    # a device that cannot say (one the tuning data names but gpus.DEVICES lacks, ranked
    # offline) is taken for its arch's reference device
    ref = gpus.reference_device(backend.arch)
    units = backend.units() or (ref.units if ref else 1)
    m, _, _ = problem.gemm
    for _ in range(4):
        if (problem.direction.splits_reduction or _programs(problem, bm, bn) >= units
                or bm * bn <= 64 * 64):
            break
        if bm >= bn and bm > 64 and m > 64:
            bm //= 2
        elif bn > 64:
            bn //= 2
        else:
            break
    # MI100's (gfx908) 256 VGPRs a lane hold 3 waves of a 128x128 tile a SIMD: one 8-warp
    # program a CU, two of 4 warps (cross-compiled: 69 VGPRs + 32 AGPRs at 8 warps, 109 +
    # 64 at 4); the 512 of gfx90a and later hold 5-6 waves of 8 warps
    small_file = backend.facts is not None and backend.facts.separate_agprs
    return KernelConfig(block_m=bm, block_n=bn, block_k=bk,
                        num_warps=8 if bm * bn >= 128 * 128 and not small_file else 4,
                        num_stages=2, split=_split(problem, bm, bn, 2 * units),
                        **amd_options(bm, bn))


def amd_options(bm: int, bn: int) -> dict:
    """The rule's AMD compile options for a bm x bn tile: the compiler's own register count
    (waves_per_eu=0) up to 128x128; waves_per_eu=2 above, where a tile's fp32 accumulator
    alone would otherwise take more than 256 registers a lane, one wave a SIMD; 16x16
    matrix instructions, kpack 1."""
    return {"waves_per_eu": 0 if bm * bn <= 128 * 128 else 2, "matrix_instr_nonkdim": 16,
            "kpack": 1}


def _programs(problem: ConvProblem, bm: int, bn: int) -> int:
    """Programs of a pointer-kernel launch of bm x bn tiles, before any split."""
    m, _, _ = problem.gemm
    return cdiv(m, bm) * column_tiles(problem, bn) * problem.g


def _tma_by_default(problem: ConvProblem, backend: Backend) -> bool:
    """The descriptor kernels are the default on a GPU with TMA wherever they apply: in the
    H100 tuning database their best beats the pointer kernels' best on every stride-1
    layer (1.3-2.1x on 3x3 filters) but one, a 1x1 bwd_data, where the two tie. The
    interpreter keeps the pointer kernels by default, so CI tests both."""
    # sm120's ~100 KB of shared memory per program holds no 4-stage 128x128 pipeline: the
    # defaults below are for the data-centre parts (sm90, sm100), where they were measured
    return not (backend.interpreter or tma_refused(problem, backend) or backend.sm >= 120)


def _s2d_by_default(problem: ConvProblem, backend: Backend) -> int | None:
    """On a GPU with TMA, a strided filter whose taps hold fewer channels than a block (the
    C = 3 stem) runs folded (kernels/s2d.py) on the descriptor kernels: the columns folded
    too where the direction allows it."""
    if not blocks_span_taps(problem):
        return None
    for mode in (2, 1):
        if (s2d.unsupported(problem, mode) is None
                and _tma_by_default(s2d.inner_problem(problem, mode), backend)):
            return mode
    return None


def _tma_default(problem: ConvProblem) -> KernelConfig:
    """The tiles that won most often in the H100 tuning data (tuning/data)."""
    if problem.direction.splits_reduction:
        bm = 128 if problem.k >= 128 else 64
        bn = 128 if problem.c >= 128 else narrow(problem.c)
        # a deeper box of pixels per step where the tile is small
        box, stages = (64, 4) if bm * bn >= 128 * 128 else (128, 3)
        return KernelConfig(block_m=bm, block_n=bn, block_k=box, num_warps=4, num_stages=stages,
                            split=tma_split(problem, bm, bn, box), tma=1)
    bn = 128 if problem.direction.tile_n(problem) >= 128 else narrow(problem.direction.tile_n(problem))
    return KernelConfig(block_m=128, block_n=bn, block_k=channel_block(problem, 64),
                        num_warps=8 if bn == 128 else 4, num_stages=4, tma=1)


def narrow(n: int, bn: int = 64) -> int:
    """bn tile columns, or as few as 16 where there are fewer columns (a folded stem's 16
    channels, kernels/s2d.py), whose TMA boxes need no more."""
    return min(bn, max(16, next_pow2(n)))


def tma_split(problem: ConvProblem, bm: int, bn: int, box: int) -> int:
    """bwd_weight on the descriptor kernels: parts enough for ~SPLIT_PROGRAMS programs, at
    most one per box of output pixels."""
    tiles = cdiv(problem.k, bm) * cdiv(problem.c, bn) * problem.y * problem.x
    return max(1, min(MAX_SPLIT, pixel_boxes(problem, box), round(SPLIT_PROGRAMS / tiles)))


# bwd_weight's split on NVIDIA aims at this many programs: about two waves of an H100's 132
# SMs (the tuning data's configs were measured around it); AMD's rule aims at two
# programs on every CU of the device instead
SPLIT_PROGRAMS = 256


def min_block_k(problem: ConvProblem) -> int:
    # 8-bit matrix instructions (mma k32, wgmma k32, MFMA x16/x32) reduce 32 at a time
    return MIN_BLOCK_K_1BYTE if problem.dtype.bits == 8 else 16


# The longest reduction one program of the default config sums in its fp32 accumulator.
# On the H100 a depthwise bwd_weight with 802,816 products in one chain (split 1, the
# old rule's pick) leaned -0.6 ulp and failed the rel bit: matrix units do not round
# each addition to nearest. Shorter chains, summed in order by the split's reduction,
# were also twice as fast there (tuning/data).
MAX_CHAIN = 2**16


def longest_chain(problem: ConvProblem, cfg: KernelConfig) -> int:
    """Products one program of `cfg` sums in a row in its fp32 accumulator: the GEMM
    reduction of the problem the kernel runs (the folded one for s2d), or for bwd_weight
    one part of it, as the kernels cut it (the descriptor kernels in whole boxes of
    block_k output pixels). It reads cfg's chain_fields alone."""
    if cfg.direct:
        # fwd and bwd_data: one output's taps and channels; bwd_weight: a part's pixels
        if not problem.direction.splits_reduction:
            return problem.gemm[2]
        return direct_parts(problem, cfg)[1] * problem.wo
    if cfg.s2d:
        problem = s2d.inner_problem(problem, cfg.s2d)
    _, _, r = problem.gemm
    if not problem.direction.splits_reduction:
        return r
    if cfg.tma and cfg.streamk:
        # stream-K: a program's share of a tile is at most the tile's reduction, and how
        # much less depends on the device's SMs
        return r
    if cfg.tma:
        _, per = bwd_weight_parts(problem, cfg)
        return min(r, per * cfg.block_k)
    return split_parts(problem, cfg)[1]


def chain_fields(cfg: KernelConfig) -> tuple:
    """The fields of cfg that longest_chain reads: configs equal in them sum chains as long
    (a space's ~50 configs have a few such keys; the selector asks for every candidate)."""
    return cfg.s2d, cfg.tma, cfg.streamk, cfg.block_k, cfg.split, cfg.direct


def _split(problem: ConvProblem, bm: int, bn: int, programs: int = SPLIT_PROGRAMS) -> int:
    """bwd_weight: enough parts for about `programs` programs, with each part at least a few
    tiles deep, and no part longer than MAX_CHAIN products (at most 64 parts)."""
    if not problem.direction.splits_reduction:
        return 1
    m, _, r = problem.gemm
    tiles = _programs(problem, bm, bn)
    want = max(1, programs // max(1, tiles))
    return max(1, min(want, r // 1024, 64), min(cdiv(r, MAX_CHAIN), 64))


def from_text(text: str) -> dict:
    """Every field of a config from KernelConfig.describe()'s text (how the tuning database
    stores a config): a field the text leaves out was None (describe() omits those), so it
    is None here too and overrides whatever the default rule would set (tma, AMD fields)."""
    out = {f.name: None for f in fields(KernelConfig) if f.default is None}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name not in FIELDS:
            raise ConvgenError(f"unknown kernel config field '{name}' in '{text}'")
        out[name] = int(value)
    return out


def choose(problem: ConvProblem, backend: Backend, use_dot: bool,
           overrides: dict | None = None) -> KernelConfig:
    """The default configuration with the fields `overrides` sets, checked."""
    cfg = default_config(problem, backend, use_dot)
    if overrides and overrides.get("direct") and not cfg.direct and not direct_refused(problem):
        # a direct config's fields describe a direct tile: start from the direct rule
        cfg = _direct_default(problem, backend)
    elif overrides and not overrides.get("direct") and cfg.direct:
        # fields without direct=1: the GEMM kernels' rule
        cfg = default_config(problem, backend, use_dot, gemm=True)
    if overrides and overrides.get("s2d"):
        # a folded config's other fields describe the folded problem's kernel: start there
        if s2d.unsupported(problem, overrides["s2d"]) is None:
            cfg = replace(default_config(s2d.inner_problem(problem, overrides["s2d"]), backend,
                                         use_dot), s2d=overrides["s2d"])
    if problem.dtype.is_fp8:
        # sum fp8 products in fp32 after every matrix instruction (backend.dot_u_acc)
        cfg = replace(cfg, max_num_imprecise_acc=0)
    if overrides:
        unknown = sorted(set(overrides) - set(FIELDS))
        if unknown:
            raise _bad(f"unknown field '{unknown[0]}' (fields: {', '.join(FIELDS)})")
        # fields given without tma describe a pointer-kernel tile (block_k is a reduction
        # step there, a box of pixels in the descriptor bwd_weight): only tma=1 asks for those;
        # likewise only s2d=1 or 2 asks for a folded problem, and only direct=1 for the
        # direct kernels (fields without it describe a GEMM tile, even of a depthwise problem)
        cfg = replace(cfg, **{"tma": None, "s2d": None, "direct": None, **overrides})
        if cfg.streamk and "split" not in overrides:
            cfg = replace(cfg, split=1)   # stream-K shares the reduction itself
    if not use_dot and not cfg.direct:
        cfg = replace(cfg, block_k=1)
    validate(cfg, problem, backend, use_dot)
    return cfg

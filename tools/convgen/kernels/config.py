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

Block sizes are powers of two (>= 16 on the matrix-core path, whose block_k the FMA
path ignores: it steps one reduction element at a time). The CLI turns `-perf_config`
text into a dict of fields (`overrides`); `choose` applies it to the default.
"""
from __future__ import annotations

import functools
import operator
import os
from dataclasses import dataclass, fields, replace

from convgen.backend import Backend
from convgen.directions import blocks_span_taps, column_tiles
from convgen.errors import ConvgenError
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
_FIELD_VALUES = operator.attrgetter(*FIELDS)
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


# The shapes of a pixel box: powers of two (Triton's block shapes), at most 256 per
# dimension (the copy engine's box limit).
_BOX_SIDES = (1, 2, 4, 8, 16, 32)
MAX_BOX = 256


def tma_unsupported(p, use_dot: bool = True) -> str | None:
    """None when the problem can take the descriptor kernels, else why not (one phrase)."""
    if not use_dot:
        return "the FMA path has no descriptor kernels"
    if p.dtype.bits != 16 or p.dtype.is_int:
        return f"{p.dtype.name}: only 16-bit floating-point types"
    if (p.stride_h, p.stride_w) != (1, 1) and not strided_view(p):
        # the other strides take one phase view of the input (gradient) per remainder
        stride = f"stride {p.stride_h}x{p.stride_w}"
        if p.direction.name == "fwd":
            # one descriptor over every phase (tma._phase_descriptor)
            if p.hi % p.stride_h or p.wi % p.stride_w:
                return (f"{stride} on a {p.hi}x{p.wi} input: fwd's phase view needs rows and "
                        "columns that are multiples of the stride")
            if p.c % 16:
                return (f"{stride} with c={p.c}: fwd's phase view needs channels in blocks of "
                        "16 that divide C")
            if not p.layouts["input"].replace("g", "").endswith("wc"):
                return (f"{stride} with input layout {p.layouts['input']}: fwd's phase view "
                        "needs each row's pixels and channels adjacent (...wc)")
        elif max(p.stride_h, p.stride_w) > 2:
            return f"{stride}: phase views take strides up to 2 (four descriptors)"
        elif (p.dil_h, p.dil_w) != (1, 1):
            return f"{stride} with dilation {p.dil_h}x{p.dil_w}: phase views need dilation 1"
        elif p.hi < p.stride_h or p.wi < p.stride_w:
            return f"{stride} on a {p.hi}x{p.wi} input: a phase view would be empty"
    if p.g != 1:
        return f"{p.g} groups: one group only"
    for tensor, channel in (("input", "c"), ("filter", "c"), ("output", "k")):
        if p.layouts[tensor][-1] != channel:
            return f"{tensor} layout {p.layouts[tensor]}: channels must be innermost"
    if blocks_span_taps(p):
        return f"c={p.c}: fewer channels than one block"
    for name, v in (("c", p.c), ("k", p.k)):
        if v * p.dtype.bits // 8 % 16:
            return f"{name}={v}: rows of channels must be a multiple of 16 bytes"
    return None


def strided_view(p) -> bool:
    """A strided 1x1 filter without padding reads every stride-th input pixel, a strided
    view whose pixels map one to one onto the output's (fwd, bwd_weight; bwd_data must
    also write the pixels between, so it takes phase views)."""
    return ((p.stride_h, p.stride_w) != (1, 1) and (p.y, p.x) == (1, 1)
            and not any((p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r))
            and p.direction.name != "bwd_data")


def persistent_fits(p) -> bool:
    """The directions with a persistent descriptor kernel: fwd, and bwd_data whose grid is
    one tile per program (stride 1)."""
    return (p.direction.name == "fwd"
            or (p.direction.name == "bwd_data" and (p.stride_h, p.stride_w) == (1, 1)))


def streamk_fits(p) -> bool:
    """The problems with a stream-K descriptor kernel: bwd_weight on one input descriptor
    (stride 1, a strided view or the phase view). fwd had one: on the H100 it was never the
    fastest (3x3 512->512 7x7: 0.122 against 0.120 ms) and one 128x256 config gave wrong
    results there (docs/conv-benchmark.md)."""
    return p.direction.name == "bwd_weight" and not views_per_phase(p)


def views_per_phase(p) -> bool:
    """bwd_weight's descriptor kernels take the input as one view per phase: a stride
    other than a strided 1x1 view, with input rows or columns not multiples of it (not
    phase_view)."""
    return (p.stride_h, p.stride_w) != (1, 1) and not (strided_view(p) or phase_view(p))


def phase_view(p) -> bool:
    """A strided filter's input taken as one descriptor over every phase (fwd, and bwd_weight
    where it can: tma._phase_descriptor): a stride other than a strided 1x1 view, input rows
    and columns that are multiples of it, each row's pixels and channels adjacent. Else
    bwd_weight takes one descriptor per phase (and fwd no descriptor at all)."""
    return ((p.stride_h, p.stride_w) != (1, 1) and not strided_view(p)
            and p.direction.name != "bwd_data"
            and p.hi % p.stride_h == 0 and p.wi % p.stride_w == 0
            and p.layouts["input"].replace("g", "").endswith("wc"))


# The shared memory one program may take on an H100 (bytes), the most of the GPUs served
# (an MI300's LDS holds 64 KB): a config over it runs nowhere.
MAX_SHARED = 232448


def phased_shared(p, bm: int, bn: int, box: int, stages: int) -> int:
    """Shared memory (bytes) of bwd_weight's descriptor kernel where it takes the input as one
    view per phase (views_per_phase; tma.py's four phase loops). Fitted, not derived: two input
    boxes a stage, the A box, the tile once, 96 bytes. It gives Triton 3.6's counts on the
    H100 for 3 stages of 128-pixel boxes, 262,240 B on 64x128 tiles and 327,776 on
    128x128 (f16 and bf16), and puts every other phased config of the tuning database
    (4-stage 64-pixel boxes, 128x64 tiles), all of which ran, under MAX_SHARED."""
    return (stages * (bm + 2 * bn) * box + bm * bn) * p.dtype.bits // 8 + 96


def phase_fwd(p) -> bool:
    """A strided fwd on the descriptor kernels reads one phase view per tap
    (tma._phase_descriptor), whose channel blocks must divide C."""
    return p.direction.name == "fwd" and (p.stride_h, p.stride_w) != (1, 1) and not strided_view(p)


def _channel_block(p, want: int) -> int:
    """want, or for a strided fwd on the descriptor kernels the largest power of two up to
    it that divides C (phase_fwd)."""
    return min(want, p.c & -p.c) if phase_fwd(p) else want


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


def pixel_box(n: int, h: int, w: int, block_m: int) -> tuple[int, int, int]:
    """(BI, BH, BW) with BI*BH*BW = block_m that wastes least on the edges of an n x h x w
    grid of pixels (28x28 takes 4x4 boxes, 14x14 takes 2x2); ties go to wider rows."""
    best = None
    for bh in _BOX_SIDES:
        for bw in _BOX_SIDES:
            if bh * bw > block_m or block_m // (bh * bw) > MAX_BOX:
                continue
            bi = block_m // (bh * bw)
            used = n * h * w / (cdiv(n, bi) * bi * cdiv(h, bh) * bh * cdiv(w, bw) * bw)
            key = (round(used, 6), bw, bh)
            if best is None or key > best[0]:
                best = (key, (bi, bh, bw))
    return best[1]


# the tuning space and the selector ask for the same boxes thousands of times; a cache
# bound after the definition leaves its source (part of the kernel digest) as it was
pixel_box = functools.lru_cache(maxsize=4096)(pixel_box)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def _bad(what: str) -> ConvgenError:
    return ConvgenError(what, field="perf_config")


# The descriptor kernels' forms a config may ask for, one at a time (KernelConfig's doc):
# the values each takes besides 0, and what a value counts
_FORMS = {"persistent": ((1, 2), ""), "streamk": ((1, 2), " (programs per SM)"),
          "tail": ((2, 4), " (programs per leftover tile)")}


def validate(cfg: KernelConfig, problem: ConvProblem, backend: Backend, use_dot: bool) -> None:
    """Raise ConvgenError (field "perf_config") naming the first field out of range."""
    if cfg.s2d:
        _validate_s2d(cfg, problem, backend, use_dot)
        return
    for name, top in (("block_m", MAX_BLOCK_MN), ("block_n", MAX_BLOCK_MN),
                      ("block_k", MAX_BLOCK_K), ("num_warps", backend.max_warps)):
        v = getattr(cfg, name)
        if not _pow2(v) or v > top:
            raise _bad(f"{name}={v} must be a power of two from 1 to {top}"
                       + (f" on {backend.arch}" if name == "num_warps" else ""))
    if use_dot and min(cfg.block_m, cfg.block_n, cfg.block_k) < 16:
        small = next(n for n in ("block_m", "block_n", "block_k") if getattr(cfg, n) < 16)
        raise _bad(f"{small}={getattr(cfg, small)}: block sizes must be at least 16 on the "
                   "matrix-core path")
    if use_dot and cfg.block_k < min_block_k(problem):
        raise _bad(f"block_k={cfg.block_k}: {problem.dtype.name} on the matrix-core path needs "
                   f"block_k >= {min_block_k(problem)}")
    if not 1 <= cfg.num_stages <= MAX_STAGES:
        raise _bad(f"num_stages={cfg.num_stages} must be from 1 to {MAX_STAGES}")
    if not 1 <= cfg.split <= MAX_SPLIT:
        raise _bad(f"split={cfg.split} must be from 1 to {MAX_SPLIT}")
    if not 1 <= cfg.group_m <= MAX_GROUP_M:
        raise _bad(f"group_m={cfg.group_m} must be from 1 to {MAX_GROUP_M}")
    if cfg.split > 1 and not problem.direction.splits_reduction:
        raise _bad(f"split={cfg.split} applies to bwd_weight only")
    for name, choices in AMD_CHOICES.items():
        v = getattr(cfg, name)
        if v is not None and v not in choices:
            raise _bad(f"{name}={v} must be one of {', '.join(map(str, choices))}")
    if cfg.waves_per_eu is not None and not 0 <= cfg.waves_per_eu <= MAX_WAVES_PER_EU:
        raise _bad(f"waves_per_eu={cfg.waves_per_eu} must be from 0 to {MAX_WAVES_PER_EU}")
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
    if cfg.tail and problem.direction.name != "fwd":
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


def swap_ab_refused(problem: ConvProblem, cfg: KernelConfig) -> str | None:
    """Why `cfg` with swap_ab=1 cannot run `problem`; None: it can."""
    if not cfg.tma:
        return "applies to the descriptor kernels (tma=1) only"
    if problem.direction.splits_reduction:
        return f"{problem.direction.name} has no swapped kernel (fwd and bwd_data only)"
    if problem.direction.name == "fwd" and problem.c % cfg.block_k:
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
    from convgen.kernels import s2d
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
                   descriptors: bool = True) -> KernelConfig:
    """The rule's config; descriptors=False keeps to the pointer kernels (no tma, no fold)."""
    m, _, _ = problem.gemm
    n = problem.direction.tile_n(problem)
    k = problem.direction.tile_k(problem)
    if backend.interpreter:
        # The interpreter pays per program and per loop step, not per element:
        # few, large tiles.
        return KernelConfig(block_m=min(256, max(16, _next_pow2(m))),
                            block_n=min(128, max(16, _next_pow2(n))),
                            block_k=min(64, max(min_block_k(problem), _next_pow2(k))) if use_dot else 1,
                            num_warps=4, num_stages=1, split=1)
    bn = 128 if n >= 128 else max(16, _next_pow2(n))
    bm = 128 if m >= 128 else max(16, _next_pow2(m))
    if not use_dot:
        return KernelConfig(block_m=min(bm, 64), block_n=min(bn, 64), block_k=1,
                            num_warps=4, num_stages=1, split=_split(problem, bm, bn))
    if descriptors and _tma_by_default(problem, backend):
        return _tma_default(problem)
    mode = _s2d_by_default(problem, backend) if descriptors else None
    if mode:
        from convgen.kernels import s2d
        return replace(_tma_default(s2d.inner_problem(problem, mode)), s2d=mode)
    # a channel block no wider than the channels (the C = 3 stem wastes less)
    bk = min(64 if problem.dtype.bits <= 16 else 32, max(min_block_k(problem), _next_pow2(k)))
    cfg = KernelConfig(block_m=bm, block_n=bn, block_k=bk,
                       num_warps=8 if bm * bn >= 128 * 128 else 4,
                       num_stages=2 if backend.is_hip else 3,
                       split=_split(problem, bm, bn))
    if backend.is_hip:
        cfg = replace(cfg, waves_per_eu=2 if bm * bn >= 128 * 128 else 0, matrix_instr_nonkdim=16,
                      kpack=1)
    return cfg


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
    from convgen.kernels import s2d
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
        bn = 128 if problem.c >= 128 else _narrow(problem.c)
        # a deeper box of pixels per step where the tile is small
        box, stages = (64, 4) if bm * bn >= 128 * 128 else (128, 3)
        return KernelConfig(block_m=bm, block_n=bn, block_k=box, num_warps=4, num_stages=stages,
                            split=_tma_split(problem, bm, bn, box), tma=1)
    bn = 128 if problem.direction.tile_n(problem) >= 128 else _narrow(problem.direction.tile_n(problem))
    return KernelConfig(block_m=128, block_n=bn, block_k=_channel_block(problem, 64),
                        num_warps=8 if bn == 128 else 4, num_stages=4, tma=1)


def _narrow(n: int, bn: int = 64) -> int:
    """bn tile columns, or as few as 16 where there are fewer columns (a folded stem's 16
    channels, kernels/s2d.py), whose TMA boxes need no more."""
    return min(bn, max(16, _next_pow2(n)))


def _tma_split(problem: ConvProblem, bm: int, bn: int, box: int) -> int:
    """bwd_weight on the descriptor kernels: parts enough for ~256 programs (two waves of an
    H100), at most one per box of output pixels."""
    tiles = cdiv(problem.k, bm) * cdiv(problem.c, bn) * problem.y * problem.x
    return max(1, min(MAX_SPLIT, pixel_boxes(problem, box), round(256 / tiles)))


def pixel_boxes(problem: ConvProblem, box: int) -> int:
    """How many boxes of `box` output pixels cover bwd_weight's reduction (n x ho x wo)."""
    n, h, w = pixel_grid(problem)
    bi, bh, bw = pixel_box(n, h, w, box)
    return cdiv(n, bi) * cdiv(h, bh) * cdiv(w, bw)


def flat_pixels(p) -> bool:
    """A 1x1 stride-1 filter without padding pairs each input pixel with the output pixel
    at the same place, so the descriptor kernels may take all n*h*w pixels as one run
    (boxes of consecutive pixels: no edge waste on 7x7 or 14x14 images, and each box one
    contiguous block of memory; H100: up to 1.2x on 7x7 and 14x14 layers, the same on
    larger images). Needs n, h, w in that order in memory in both pixel tensors, densely
    (not the overlapping rows of a column fold, kernels/s2d.py)."""
    return ((p.y, p.x) == (1, 1) and (p.stride_h, p.stride_w) == (1, 1)
            and not any((p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r))
            and not p.overlapping_input
            and p.layouts["input"].replace("g", "") == "nhwc"
            and p.layouts["output"].replace("g", "") == "nhwk")


def pixel_grid(p) -> tuple[int, int, int]:
    """The (images, rows, columns) of output pixels that the descriptor kernels tile with
    boxes: (n*ho*wo, 1, 1) where flat_pixels holds, else (n, ho, wo)."""
    if flat_pixels(p):
        return p.n * p.ho * p.wo, 1, 1
    return p.n, p.ho, p.wo


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
    if cfg.s2d:
        from convgen.kernels import s2d
        problem = s2d.inner_problem(problem, cfg.s2d)
    _, _, r = problem.gemm
    if not problem.direction.splits_reduction:
        return r
    if cfg.tma and cfg.streamk:
        # stream-K: a program's share of a tile is at most the tile's reduction, and how
        # much less depends on the device's SMs
        return r
    if cfg.tma:
        from convgen.kernels import tma
        _, per = tma.bwd_weight_parts(problem, cfg)
        return min(r, per * cfg.block_k)
    from convgen.kernels import conv_bwd_weight
    return conv_bwd_weight.parts(problem, cfg)[1]


def chain_fields(cfg: KernelConfig) -> tuple:
    """The fields of cfg that longest_chain reads: configs equal in them sum chains as long
    (a space's ~50 configs have a few such keys; the selector asks for every candidate)."""
    return cfg.s2d, cfg.tma, cfg.streamk, cfg.block_k, cfg.split


def _split(problem: ConvProblem, bm: int, bn: int) -> int:
    """bwd_weight: enough programs to fill ~a GPU, with each part at least a few tiles deep,
    and no part longer than MAX_CHAIN products (at most 64 parts)."""
    if not problem.direction.splits_reduction:
        return 1
    m, _, r = problem.gemm
    tiles = cdiv(m, bm) * column_tiles(problem, bn) * problem.g
    want = max(1, 256 // max(1, tiles))
    return max(1, min(want, r // 1024, 64), min(cdiv(r, MAX_CHAIN), 64))


# The tuning space (convgen tune): tiles, reduction step, pipeline depth, and bwd_weight's
# split. Warps follow the tile (8 from 128x128 up), as in the default rule; a tile much
# larger than the problem's GEMM is left out.
SPACE_MN = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))
SPACE_K = (32, 64)
SPACE_STAGES = {"cuda": (3, 4), "hip": (2,), "interpreter": (1,)}
SPACE_SPLIT = (1, 4, 16, 64)


def _vary(base: KernelConfig, **changes) -> KernelConfig:
    """dataclasses.replace without its field checks or the frozen class's per-field
    __init__, at a tenth of its cost: a selection builds the space of every run
    (selector.py's 1 ms budget). Every name in `changes` is a field."""
    cfg = object.__new__(KernelConfig)
    cfg.__dict__.update(base.__dict__, **changes)
    return cfg


def space(problem: ConvProblem, backend: Backend) -> list[KernelConfig]:
    """The matrix-core configs `convgen tune` measures and the selector ranks for a problem
    on a backend, in a fixed order (the default rule's config first). AMD fields come from
    the default rule."""
    m, _, r = problem.gemm
    n = problem.direction.tile_n(problem)
    # the largest tile kept along M and N: a tile much larger than the GEMM is left out
    m_cap, n_cap = max(64, _next_pow2(m)), max(64, _next_pow2(n))
    base = choose(problem, backend, True)
    out = [base]
    seen = {_FIELD_VALUES(base)}

    def add(cfg: KernelConfig) -> None:
        # by the fields' values, hashed once (the dataclass's own hash is the Python-level
        # tuple of them, taken for the lookup and again for the insert)
        values = _FIELD_VALUES(cfg)
        if values not in seen:
            seen.add(values)
            out.append(cfg)
    for bm, bn in SPACE_MN:
        if bm > m_cap or bn > n_cap:
            continue
        for bk in SPACE_K:
            if bk < min_block_k(problem):
                continue
            for stages in SPACE_STAGES[backend.kind]:
                for split in (SPACE_SPLIT if problem.direction.splits_reduction else (1,)):
                    if split > 1 and r // split < 4 * bk:
                        continue
                    cfg = _vary(base, block_m=bm, block_n=bn, block_k=bk, num_stages=stages,
                                num_warps=8 if bm * bn >= 128 * 128 else 4, split=split,
                                tma=None, s2d=None, persistent=None, streamk=None,
                                tail=None)
                    add(cfg)
    if not tma_refused(problem, backend):
        for cfg in _tma_space(problem, base):
            add(cfg)
    for cfg in _s2d_space(problem, backend):
        add(cfg)
    return out


def _s2d_space(problem: ConvProblem, backend: Backend) -> list[KernelConfig]:
    """Folded configs, for strided filters whose taps hold fewer channels than a block: the
    folded problem's space (its descriptor-kernel share alone where it has one)."""
    from convgen.kernels import s2d
    if not blocks_span_taps(problem) or problem.dtype.is_fp8:
        return []
    out = []
    for mode in (1, 2):
        if s2d.unsupported(problem, mode):
            continue
        inner = s2d.inner_problem(problem, mode)
        configs = space(inner, backend)
        if not tma_refused(inner, backend):
            configs = [cfg for cfg in configs if cfg.tma]
        out += [_vary(cfg, s2d=mode) for cfg in configs]
    return out


def _tma_space(problem: ConvProblem, base: KernelConfig) -> list[KernelConfig]:
    """The descriptor kernels' share of the space: tiles and depth; bwd_weight's box of
    output pixels (block_k) and its split around the default's."""
    out = []
    if problem.direction.splits_reduction:
        # the largest tile kept along the filter gradient's K and C
        k_cap, c_cap = max(64, _next_pow2(problem.k)), max(64, _next_pow2(problem.c))
        phased = views_per_phase(problem)
        for bm, bn in ((64, 64), (128, 64), (64, 128), (128, 128)):
            if bm > k_cap or bn > c_cap:
                continue
            bn = _narrow(problem.c, bn)
            for box in (64, 128):
                stages = 4 if box == 64 else 3
                if phased and phased_shared(problem, bm, bn, box, stages) > MAX_SHARED:
                    continue
                auto = _tma_split(problem, bm, bn, box)
                # four times the rule's parts too: where a few tiles fill most of a wave
                # (3x3 512->512 on 7x7 images: 144 tiles, 132 SMs) the rule's 2 parts leave
                # the last wave nearly empty, and 4 was the fastest measured there
                for split in sorted({max(1, auto // 2), auto, min(MAX_SPLIT, auto * 2),
                                     min(MAX_SPLIT, auto * 4)}):
                    for warps in (4, 8):
                        out.append(_vary(base, block_m=bm, block_n=bn, block_k=box, num_warps=warps,
                                         num_stages=stages, split=split, tma=1))
        if streamk_fits(problem) and problem.gemm[2] <= MAX_CHAIN:
            # stream-K where a few tiles leave a wave part empty (3x3 512->512 on 7x7 images:
            # 144 tiles on 132 SMs) and every part is a short chain; 3 stages of 128x128x64
            # leave room for two programs per SM (streamk=2). There 128x128 tiles gained
            # nothing from it on the H100 (0.159 against 0.154 ms): each step reads 64
            # products per byte, and the SMs together read ~6 TB/s from L2. 128x256 tiles
            # read 85 per byte, and their 72 tiles there would leave half the SMs idle
            # without stream-K (0.136 ms with 256x128).
            # Not here: 128x64 tiles of 128-pixel boxes, 4 warps, 3 stages, two per SM, whose
            # results were wrong on the H100 (Triton 3.6) for 5 of 6 ResNet-50 layers though
            # the interpreter agreed (docs/traps.md)
            for bm, bn, box, warps, stages, per_sm in (
                    (128, 128, 64, 4, 4, 1), (128, 128, 64, 8, 4, 1), (128, 128, 64, 4, 3, 2),
                    (128, 128, 128, 8, 3, 1), (128, 64, 64, 4, 4, 1), (128, 256, 64, 8, 3, 1),
                    (128, 256, 64, 8, 4, 1), (256, 128, 64, 8, 3, 1), (256, 128, 64, 8, 4, 1)):
                if bm > k_cap or bn > c_cap:
                    continue
                out.append(_vary(base, block_m=bm, block_n=_narrow(problem.c, bn), block_k=box,
                                 num_warps=warps, num_stages=stages, split=1, tma=1,
                                 streamk=per_sm))
        return out
    n = problem.direction.tile_n(problem)
    n_cap = max(64, _next_pow2(n))   # the widest tile kept along N
    bk = _channel_block(problem, 64)
    for bm, bn in SPACE_MN:
        if bn > n_cap:
            continue
        bn = _narrow(n, bn)
        # 2 stages: less shared memory, two programs on an SM (on the H100 the fastest for
        # 1x1 and 3x3 64->64 on 56x56 images)
        for stages in (2, 3, 4):
            out.append(_vary(base, block_m=bm, block_n=bn, block_k=bk, num_stages=stages,
                             num_warps=8 if bm * bn >= 128 * 128 else 4, split=1, tma=1))
        if (bm, bn) == (128, 128):
            # one warpgroup on a 128x128 tile with 2 stages: two programs on an SM, each
            # loading while the other multiplies (bwd_weight's fastest 3x3 512->512 7x7 tile);
            # and a fifth stage for 8 warps
            out.append(_vary(base, block_m=bm, block_n=bn, block_k=bk, num_stages=2,
                             num_warps=4, split=1, tma=1))
            out.append(_vary(base, block_m=bm, block_n=bn, block_k=bk, num_stages=5,
                             num_warps=8, split=1, tma=1))
    if problem.direction.tile_k(problem) >= 256 and _channel_block(problem, 128) == 128:
        # 128-channel steps for long reductions: half the loop trips and wgmma waits (the
        # 1x1 layers of 1024 and 2048 channels trailed cuDNN by 0.71-0.79x with 64)
        for bm, bn, stages in ((128, 128, 2), (128, 128, 3), (128, 64, 3), (128, 64, 4),
                               (64, 128, 3), (64, 128, 4)):
            if bn > n_cap:
                continue
            cfg = _vary(base, block_m=bm, block_n=_narrow(n, bn), block_k=128, num_stages=stages,
                        num_warps=8 if bm * bn >= 128 * 128 else 4, split=1, tma=1)
            out.append(cfg)
            if persistent_fits(problem) and (bm, bn) == (128, 128):
                out.append(_vary(cfg, persistent=1))
    if problem.direction.name == "fwd" and problem.gemm[2] >= 1024:
        # large tiles with the leftover wave shared out (`tail`). H100, 3x3 512->512 7x7 fwd,
        # batch 256: a 128x256 tile takes ~65 us whether 56 or 98 run at once, so its
        # 196 tiles took two waves (0.130 ms) for 1.48 waves of work; long reductions only,
        # where the parts' fp32 round trip is small beside the tile's steps
        for bm, bn, step, stages, tail in ((128, 256, 64, 3, 2), (128, 256, 64, 3, 4),
                                            (256, 128, 64, 3, 2), (128, 128, 128, 3, 2)):
            if bn > n_cap or _channel_block(problem, step) != step:
                continue
            out.append(_vary(base, block_m=bm, block_n=_narrow(n, bn), block_k=step,
                             num_stages=stages, num_warps=8, split=1, tma=1, tail=tail))
    if persistent_fits(problem):
        # persistent programs won on 1x1 filters (H100, ResNet-50: 128x256 tiles, 3 stages,
        # up to 1.3x the best above); 128-column tiles for narrow outputs. Four stages of
        # 128x256 need 240 KB of shared memory, more than an H100 has
        for bn in (128, 256):
            if bn > max(128, _next_pow2(n)):
                continue
            whole = _vary(base, block_m=128, block_n=_narrow(n, bn), block_k=bk, num_warps=8,
                          split=1, tma=1, persistent=1)
            out += [_vary(whole, num_stages=s) for s in ((3, 4) if bn == 128 else (3,))]
            # the store in two halves leaves room for a fourth stage (H100: 128x256 1x1
            # 512->256 28x28 fwd 0.138 -> 0.124 ms, 256->512 s2 0.154 -> 0.140 ms)
            out.append(_vary(whole, num_stages=4, persistent=2))
    # every 8-warp tile transposed too (swap_ab). H100, ResNet-50 fwd batch 256, each
    # layer's tuned config (outputs equal bit for bit): 3x3 512->512 7x7 1.17-1.18x,
    # 1x1 2048->512 7x7 1.17x, 1x1 256->1024 14x14 1.11-1.13x faster; 0.78-0.82x where
    # the transposed store's shared memory left room for one program per SM instead of
    # two (3x3 128->128 28x28 with 4 stages), so it is a choice per problem, not a rule.
    # bwd_data's output gradient box is the same first operand (docs/conv-benchmark.md)
    out += [_vary(cfg, swap_ab=1) for cfg in out
            if cfg.num_warps == 8 and swap_ab_refused(problem, cfg) is None]
    return out


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


MODEL_SOURCE = "selected by model"   # how select()'s source begins for the model's pick


def select(problem: ConvProblem, backend: Backend, use_dot: bool, overrides: dict | None,
           db_path: str | None, selector_path: str | None = None) -> tuple[KernelConfig, str]:
    """(the config to run, where it came from). Fields given on the command line force a
    config; without them the tuning database's best for exactly this problem on this
    device (arch, name, Triton version, kernel source) wins, else the config the
    selector model (selector.py) ranks first, else today's rule. The last two are
    matrix-core path only."""
    # the matrix path opens the database itself, below (once is enough), then the model
    if not (use_dot and not overrides and not problem.is_3d):
        _open_given(db_path, selector_path)
    if problem.is_3d:
        return _select_3d(problem, backend, use_dot, overrides)
    if overrides:
        return choose(problem, backend, use_dot, overrides), "set on the command line"
    if not use_dot:
        return choose(problem, backend, use_dot), "default rule"
    from convgen import selector, tuning_db
    path = tuning_db.resolve(db_path)
    best = None
    if path:
        with tuning_db.TuningDB(path, readonly=True) as db:
            best = db.best_near(tuning_db.key_for(problem, backend))
    _open_given(None, selector_path)   # even where a tuned entry wins
    store = tuning_db.describe(path) if path else None
    if best is not None:
        of = "" if best.searched == tuning_db.SEARCHED_ALL else f" of {best.searched}"
        return (choose(problem, backend, use_dot, from_text(best.config)),
                f"tuned: the fastest measured here{of} ({best.ms:.3f} ms, {best.measured_at}, "
                f"Triton {best.triton}, {store})")
    untuned = f"no tuned entry in {store}" if path else "no tuning database"
    cfg, predicted, model = selector.choose(problem, backend, selector_path)
    if cfg is not None:
        return cfg, (f"{MODEL_SOURCE} {os.path.basename(model)}: predicted {predicted:.1f} "
                     f"TFLOPS; {untuned}")
    return choose(problem, backend, use_dot), f"default rule ({untuned}; {predicted})"


def _open_given(db_path: str | None, selector_path: str | None) -> None:
    """Opens a database or model named on the command line even where the run will not
    consult it (the FMA path, a forced config, a 3-D problem, a tuned entry before the
    model): a wrong path is one error line, not a run that quietly used nothing."""
    from convgen import selector, tuning_db
    if db_path:
        with tuning_db.TuningDB(db_path, readonly=True):
            pass
    if selector_path:
        try:
            selector.load(selector_path)
        except ImportError:
            pass   # the matrix path says the selector needs lightgbm; the others never ask it


def _select_3d(problem: ConvProblem, backend: Backend, use_dot: bool,
               overrides: dict | None) -> tuple[KernelConfig, str]:
    """A 3-D problem runs the pointer kernel of its 2-D depth slices once per filter depth
    tap (depth.py): the config is the slices', from the command line or the pointer rule;
    no tuned entry or model knows 3-D problems."""
    q = problem.depth_slice()
    if overrides and (overrides.get("tma") or overrides.get("s2d")):
        raise _bad(f"{'tma' if overrides.get('tma') else 's2d'}={overrides.get('tma') or overrides.get('s2d')}: "
                   "a 3-D problem runs the pointer kernels on its 2-D depth slices")
    what = f"the kernel of its 2-D depth slices ({q.n} images), once per filter depth tap"
    if overrides:
        return choose(q, backend, use_dot, overrides), f"set on the command line; {what}"
    cfg = replace(default_config(q, backend, use_dot, descriptors=False),
                  **({"max_num_imprecise_acc": 0} if q.dtype.is_fp8 else {}))
    validate(cfg, q, backend, use_dot)
    return cfg, f"default rule; {what}"


def choose(problem: ConvProblem, backend: Backend, use_dot: bool,
           overrides: dict | None = None) -> KernelConfig:
    """The default configuration with the fields `overrides` sets, checked."""
    cfg = default_config(problem, backend, use_dot)
    if overrides and overrides.get("s2d"):
        # a folded config's other fields describe the folded problem's kernel: start there
        from convgen.kernels import s2d
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
        # likewise only s2d=1 or 2 asks for a folded problem
        cfg = replace(cfg, **{"tma": None, "s2d": None, **overrides})
        if cfg.streamk and "split" not in overrides:
            cfg = replace(cfg, split=1)   # stream-K shares the reduction itself
    if not use_dot:
        cfg = replace(cfg, block_k=1)
    validate(cfg, problem, backend, use_dot)
    return cfg

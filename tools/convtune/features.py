"""The selector's features: what a (problem, config) pair looks like to the model, in the
model's column order (FEATURES; docs/selector-features.md is generated from it), and the
device a selection is for (Device). A model file names the features it was trained on, and
a model whose features differ from these is refused."""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math

from convgen import backend, gpus
from convgen.directions import blocks_span_taps, column_tiles
from convgen.kernels import geometry, s2d
from convgen.kernels.config import lds_bytes
from convgen.kernels.geometry import streamk_steps, tail_programs

FEATURES = (
    # the problem
    ("direction", "0 fwd, 1 bwd_data, 2 bwd_weight"),
    ("dtype_bits", "bits of the element type"),
    ("is_bf16", "1 for bf16 (its own matrix instructions), else 0"),
    ("n", "batch"),
    ("c", "input channels per group"),
    ("k", "output channels per group"),
    ("g", "groups"),
    ("depthwise", "1 when every group has one input channel"),
    ("hi", "input height"), ("wi", "input width"),
    ("ho", "output height"), ("wo", "output width"),
    ("y", "filter height"), ("x", "filter width"),
    ("stride", "stride_h * stride_w"),
    ("dilation", "dil_h * dil_w"),
    ("padded", "1 when the problem has padding"),
    ("channels_last", "1 when all three tensors keep channels innermost"),
    ("gemm_m", "GEMM rows per group (directions.py)"),
    ("gemm_n", "GEMM columns per group"),
    ("gemm_k", "GEMM reduction per group"),
    ("log_flops", "log2 of the useful flops (Problem.flops)"),
    ("intensity", "flops per byte of the three tensors, each read or written once"),
    # the config
    ("block_m", "tile rows"), ("block_n", "tile columns"),
    ("block_k", "reduction step (bwd_weight's box of pixels with tma=1)"),
    ("num_warps", "warps per program"), ("num_stages", "pipeline depth"),
    ("split", "bwd_weight: reduction parts"),
    ("tma", "1: tensor-descriptor kernels"),
    ("s2d", "0, 1 or 2: how the stride is folded into channels (kernels/s2d.py)"),
    ("persistent", "1: one program per SM looping over the tiles; 2: the same, each tile "
                   "stored in two halves"),
    ("streamk", "programs per SM sharing every tile's reduction steps (stream-K); 0: none"),
    ("tail", "fwd: programs sharing each tile left over after the last whole wave; 0: none"),
    ("swap_ab", "1: the tile computed transposed, the filter the first operand (fwd, bwd_data)"),
    ("scalar_loads", "1: a pointer kernel (tma=0) on tensors with a stride that is not a "
                     "multiple of 16 elements: Triton proves no alignment and loads such an "
                     "operand one element at a time (ld.global.b16, no cp.async); the "
                     "descriptor kernels copy whole boxes whatever the strides"),
    ("loads_per_thread", "load instructions per thread per reduction step as a pointer kernel "
                         "issues them: the tile's (block_m + block_n) x block_k elements over "
                         "wave x num_warps threads, 16 bytes a load, one element where "
                         "scalar_loads (the descriptor kernels counted as 16 bytes)"),
    # how they fit (of the folded problem where s2d is set: the kernel's own problem)
    ("tiles_m", "tiles along the kernel's M"),
    ("tiles_n", "tiles along N (bwd_weight: per tap, or the flattened taps)"),
    ("steps_k", "reduction steps per tile per part"),
    ("fill_m", "fraction of the M tiles' rows that hold work"),
    ("fill_n", "the same along N"),
    ("fill_k", "the same along the reduction walk (a tap's channels, or bwd_weight's pixels)"),
    ("fill_mn", "fill_m * fill_n"),
    ("programs", "programs launched (tiles x parts x groups; persistent: at most one per unit; "
                 "stream-K: streamk per unit, at most one per reduction step; tail: the "
                 "whole waves' tiles, then tail per tile left over)"),
    ("waves", "tiles (x parts x groups) per unit (SM or CU)"),
    ("wave_fill", "fraction of the last wave's units that have work"),
    ("part_length", "reduction length of one split part"),
    ("tile_intensity", "flops per byte loaded by one reduction step of one tile"),
    ("smem_kb", "shared memory the pipeline's stages take, KiB"),
    ("parts", "bwd_weight: the reduction parts the kernel really runs (split, capped by "
              "the reduction's length or its boxes of pixels); 1 elsewhere"),
    ("launches", "kernel launches per convolution: the conv kernel, the split parts' sum, "
                 "the stride fold's copies"),
    ("extra_mb", "MB read and written besides the conv's own tensors: by the launches other "
                 "than the conv kernel (the fold's copies, the fp32 partial sums of the split), "
                 "and by stream-K's and tail's fp32 partial tiles (streamk_partials)"),
    ("log_flops_per_launch", "log2(useful flops / launches): small where a launch's fixed "
                             "cost (microseconds) outweighs its work"),
    ("occupancy", "programs one unit holds at once (gpus.programs_per_unit): the fewest that "
                  "its shared memory (NVIDIA: smem_kb and 1 KiB a program; AMD: the LDS its "
                  "pipeliner keeps, config.lds_bytes), its warps and its registers allow (AMD: "
                  "a program's waves spread over the 4 SIMDs of a CU), a thread's registers "
                  "estimated as its share of the fp32 tile, block_m x block_n / (wave x "
                  "num_warps), and 32 more, in steps of 8, at most the arch's most; at least 1 "
                  "(0 where gpus.ARCHS lacks the arch)"),
    # the device
    ("units", "SMs or CUs (gpus.DEVICES by the GPU's name, else the count the GPU "
              "gives where it runs; 0 when neither knows)"),
    ("arch_number", "the arch's digits (sm90 -> 90; gfx942 -> 942)"),
    ("wave", "threads per warp (wavefront): 32 on NVIDIA, 64 on AMD's CDNA"),
    ("bandwidth", "the device's peak memory bandwidth, TB/s (gpus.DEVICES; 0 where unknown): "
                  "what tells an H200 (4.8) from an H100 (3.35) of as many SMs"),
    ("l2_mb", "the device's L2 cache, MB (all of it; 0 where unknown)"),
    ("unit_shared_kb", "shared memory (LDS) of one SM (CU), KiB (gpus.ARCHS; 0 where unknown)"),
)


FEATURE_NAMES = tuple(name for name, _ in FEATURES)


_DIRECTION_CODE = {"fwd": 0, "bwd_data": 1, "bwd_weight": 2}


DIRECTIONS = tuple(_DIRECTION_CODE)   # a model per direction


@dataclasses.dataclass(frozen=True)
class Device:
    """The GPU a selection is for: its arch, its name, and its own count of SMs (CUs) where
    it is at hand (device_of), 0 where it is not."""
    arch: str
    name: str
    counted_units: int = 0

    @property
    def units(self) -> int:
        """The count gpus.DEVICES gives its name, else its own: a GPU the table
        lacks is still counted where it runs (without it every wave feature would count
        waves of one SM); 0 where neither knows."""
        known = gpus.device(self.name)
        return known.units if known else (1 if self.name == "interpreter" else self.counted_units)

    @functools.cached_property
    def facts(self) -> tuple[float, float]:
        """(bandwidth in TB/s, L2 in MB) of the device, 0s where gpus.DEVICES lacks it."""
        known = gpus.device(self.name)
        return (known.bandwidth_gbs / 1000, known.l2_mb) if known else (0.0, 0.0)

    @functools.cached_property
    def arch_number(self) -> int:
        return int("".join(ch for ch in self.arch if ch.isdigit()) or 0)


def device_of(backend) -> Device:
    """The Device of a backend a run selects for."""
    return Device(backend.arch, backend.device_name(), backend.units())


def problem_features(p) -> list[float]:
    m, n, r = p.gemm
    lay = p.layouts
    channels_last = int(lay["input"][-1] == "c" and lay["filter"][-1] == "c"
                        and lay["output"][-1] == "k")
    nbytes = p.dtype.bits / 8 * sum(p.elements(t) for t in ("input", "filter", "output"))
    return [_DIRECTION_CODE[p.direction.name], p.dtype.bits, int(p.dtype.name == "bf16"),
            p.n, p.c, p.k, p.g, int(p.c == 1 and p.g > 1), p.hi, p.wi, p.ho, p.wo, p.y, p.x,
            p.stride_h * p.stride_w, p.dil_h * p.dil_w,
            int(any((p.pad_h_l, p.pad_h_r, p.pad_w_l, p.pad_w_r))), channels_last,
            m, n, r, math.log2(p.flops), p.flops / nbytes]


def _kernel_problem(p, cfg):
    if not cfg.s2d:
        return p
    return s2d.inner_problem(p, cfg.s2d)


class _KernelFacts:
    """What the config features need of the problem a kernel runs (q: p, or its folded
    problem for s2d), worked out once: a selection asks about ~50 configs of one problem
    (a selection's budget is 1 ms)."""

    def __init__(self, p, q, dev: Device):
        self.q = q
        self.device_units, self.arch_number = dev.units, dev.arch_number
        try:
            self.backend = backend.of_arch(dev.arch)
        except ValueError:   # an arch convgen does not know: no LDS estimate either
            self.backend = None
        self.arch = a = gpus.arch(dev.arch)
        self.wave = self.backend.warp_size if self.backend and not self.backend.interpreter else 32
        self.device = [self.wave, *dev.facts, a.shared_per_unit / 1024 if a else 0]
        self.units = self.device_units or 1
        self.m, _, self.r = q.gemm
        self.walk = q.direction.tile_k(q)   # what BLOCK_K steps over: a tap's channels, or pixels
        self.n_extent = q.direction.tile_n(q)
        self.splits = q.direction.splits_reduction
        self.taps = 1 if blocks_span_taps(q) and q.direction.name == "fwd" else q.y * q.x
        self.elem = p.dtype.bits / 8
        self.unaligned = unaligned_strides(q)
        if q.overlapping_input:
            # s2d=2 reads the folded input through a view whose columns overlap: its
            # column stride is the fold's channels per step, not the dense q's
            self.unaligned = self.unaligned or s2d.fold(p, 2).c % 16 != 0
        self.flops = p.flops
        self.log_flops = math.log2(p.flops / 1)   # of one launch (log_flops_per_launch)
        self._parts: dict = {}

    def parts(self, cfg) -> int:
        """The reduction parts q's bwd_weight kernel runs for cfg (the kernels' own rule),
        worked out once per (tma, block_k, split); 1 where nothing is split."""
        if not self.splits or cfg.split == 1:
            return 1
        key = (cfg.tma, cfg.block_k, cfg.split)
        if key not in self._parts:
            rule = geometry.bwd_weight_parts if cfg.tma else geometry.split_parts
            self._parts[key] = rule(self.q, cfg)[0]
        return self._parts[key]


def streamk_partials(q, cfg, units: int) -> tuple[int, int]:
    """(programs, pieces summed through fp32 partial tiles) of bwd_weight's stream-K launch
    (geometry.streamk_steps): every program boundary inside a tile cuts one more piece, which
    is written to the workspace and read back (tma._streamk_share). H100, 3x3 512->512 at
    7x7, batch 32, 256x128 tiles: 108 pieces, 28 MB, where the problem's tensors hold 8."""
    programs, per, _, tile_steps = streamk_steps(q, cfg, units)
    # the boundaries i * per (0 < i < programs) that fall on a tile's edge cut nothing
    return programs, programs - 1 - (programs - 1) // (tile_steps // math.gcd(per, tile_steps))


def unaligned_strides(q) -> bool:
    """Whether a stride of q's dense tensors is not a multiple of 16 elements. Triton
    specializes an integer argument on that divisibility; without it a pointer kernel cannot
    prove its rows aligned and loads them element by element (sm90 PTX of bwd_weight 1x1,
    144 -> 40 channels: 32 ld.global.b16 and 16 cp.async of 16 bytes, against 32 cp.async
    for 144 -> 48); such problems ran their pointer configs at 0.2-0.9x their descriptor
    twins, where aligned ones of few channels ran them up to 1.5x faster."""
    for tensor in ("input", "filter", "output"):
        stride = 1
        for size in reversed(q.physical_shape(tensor)):
            if stride > 1 and stride % 16:
                return True
            stride *= size
    return False


def config_features(p, cfg, dev: Device, f: _KernelFacts) -> list[float]:
    """The config's fields and how its tiles fit the problem the kernel runs (the folded
    one for s2d, whose facts are f). Ceiling divisions are written out: a selection asks
    this of ~50 configs within its 1 ms budget."""
    q = f.q
    bm, bn, bk, split = cfg.block_m, cfg.block_n, cfg.block_k, cfg.split
    m, r, walk, n_extent = f.m, f.r, f.walk, f.n_extent
    tiles_m, tiles_k, blocks_n = -(-m // bm), -(-walk // bk), -(-n_extent // bn)
    if f.splits:
        tiles_n = column_tiles(q, bn)
        steps = -(-(-(-walk // split)) // bk)   # ceil(ceil(walk / split) / bk)
        part = r / split
    else:
        tiles_n = blocks_n
        steps = f.taps * tiles_k
        part = r
    work = tiles_m * tiles_n * split * q.g     # tiles, each a program unless persistent
    units = f.units
    programs = min(work, units) if cfg.persistent else work
    partial = 0   # tiles of fp32 partials a launch writes and reads back
    if cfg.streamk:
        programs, partial = streamk_partials(q, cfg, units)
    waves = work / units
    # stream-K gives every program an equal share: no last wave part empty
    wave_fill = 1.0 if cfg.streamk else work / (math.ceil(waves) * units)
    if cfg.tail:
        programs, full = tail_programs(cfg, work, units)
        partial = programs - work   # each leftover tile's parts past its first
        # the leftover tiles' parts take 1/tail of a wave each
        wave_fill = waves / (full / units + math.ceil((programs - full) / units) / cfg.tail)
    fill_m, fill_n, fill_k = m / (tiles_m * bm), n_extent / (blocks_n * bn), walk / (tiles_k * bk)
    elem = f.elem
    scalar = int(f.unaligned and not cfg.tma)
    parts = f.parts(cfg)
    if parts > 1 or cfg.s2d:
        launches, extra = _side_launches(p, q, cfg, parts)
        log_per_launch = math.log2(f.flops / (1 + launches))
    else:
        launches, extra, log_per_launch = 0, 0.0, f.log_flops
    extra += 2 * 4 * bm * bn * partial
    smem = cfg.num_stages * (bm + bn) * bk * elem
    threads = f.wave * cfg.num_warps
    return [bm, bn, bk, cfg.num_warps, cfg.num_stages, split, int(bool(cfg.tma)), cfg.s2d or 0,
            cfg.persistent or 0, cfg.streamk or 0, cfg.tail or 0, cfg.swap_ab or 0,
            scalar, (bm + bn) * bk / (1 if scalar else 16 / elem) / threads, tiles_m,
            tiles_n, steps, fill_m, fill_n, fill_k, fill_m * fill_n, programs, waves, wave_fill,
            part, 2 * bm * bn * bk / ((bm + bn) * bk * elem), smem / 1024, parts,
            1 + launches, extra / 1e6, log_per_launch, _occupancy(f, cfg, q, smem),
            f.device_units, f.arch_number, *f.device]


def _occupancy(f: _KernelFacts, cfg, q, smem: float) -> int:
    """The occupancy feature: programs one unit holds at once, 0 without the arch's limits."""
    a = f.arch
    if a is None:
        return 0
    shared = (lds_bytes(cfg, q, f.backend) or 0) if a.vendor == "amd" else smem
    return _programs(a, cfg.block_m, cfg.block_n, cfg.num_warps, int(shared))


# cached: it depends on these alone, and the ~50 configs of a selection share a few tiles
# (a lookup is ~5x cheaper than the arithmetic)
@functools.cache
def _programs(a, bm: int, bn: int, warps: int, shared: int) -> int:
    per_thread = min(a.max_regs_per_thread, -(-(bm * bn // (a.wave * warps) + 32) // 8) * 8)
    return max(1, gpus.programs_per_unit(a, warps, per_thread, shared))


def feature_rows(p, configs, dev: Device):
    """features(p, cfg, dev) of each config, a float64 (configs x features) array: the
    problem's share worked out once and broadcast."""
    import numpy as np
    base = problem_features(p)
    facts: dict = {}
    rows = []
    for cfg in configs:
        f = facts.get(cfg.s2d)
        if f is None:
            f = facts[cfg.s2d] = _KernelFacts(p, _kernel_problem(p, cfg), dev)
        rows.append(config_features(p, cfg, dev, f))
    out = np.empty((len(configs), len(FEATURE_NAMES)))
    if configs:
        out[:, :len(base)] = base
        # one flat pass over the floats: numpy's nested-list conversion took twice as long
        out[:, len(base):] = np.fromiter(itertools.chain.from_iterable(rows), dtype=np.float64,
                                         count=len(rows) * len(rows[0])).reshape(len(rows), -1)
    return out


def _side_launches(p, q, cfg, parts: int) -> tuple[int, float]:
    """(launches besides the conv kernel, bytes they read and write): the fp32 partial
    sums of a split (written by the kernel, read by the sum) and the fold's copies
    (kernels/s2d.py: the input and filter into the folded problem for fwd, the filter in
    and the input gradient out for bwd_data, the input in and the filter gradient out for
    bwd_weight)."""
    launches, nbytes = 0, 0.0
    if parts > 1:
        launches += 1
        nbytes += 2 * 4 * parts * q.k * q.gemm[1] * q.g
    if cfg.s2d:
        elem = p.dtype.bits / 8
        copies = {"fwd": ("input", "filter"), "bwd_data": ("filter", "input"),
                  "bwd_weight": ("input", "filter")}[p.direction.name]
        for tensor in copies:
            launches += 1
            nbytes += elem * (p.elements(tensor) + q.elements(tensor))
    return launches, nbytes


def features(p, cfg, dev: Device) -> list[float]:
    return feature_rows(p, [cfg], dev)[0].tolist()


def coverage(p) -> str:
    """The kind of problem a model must have been trained on to be asked about p: its type
    and whether its tensors keep channels innermost (the kernels open to it differ)."""
    lay = p.layouts
    last = lay["input"][-1] == "c" and lay["filter"][-1] == "c" and lay["output"][-1] == "k"
    return f"{p.dtype.name} {'channels-last' if last else 'channels-first'}"


def families_of(p) -> list[str]:
    """The families of a ConvProblem: its direction, one of depthwise, stem (fewer than 16
    input channels), 1x1, 3x3 or the filter's size, then grouped for groups of more than one
    channel (ResNeXt's, RegNet's) and batch<=8 for small batches."""
    out = [p.direction.name]
    if p.c == 1 and p.g > 1:
        out.append("depthwise")
    elif p.c * p.g < 16:
        out.append("stem")
    elif (p.y, p.x) == (1, 1):
        out.append("1x1")
    elif (p.y, p.x) == (3, 3):
        out.append("3x3")
    else:
        out.append(f"{p.y}x{p.x}")
    # Its own family, as its splits and per-group GEMMs are few in the data (and were among
    # the H100's lowest picks): the report shows it, rule_families can keep the rule there.
    if p.g > 1 and p.c > 1:
        out.append("grouped")
    if p.n <= 8:
        out.append("batch<=8")
    return out


def features_markdown() -> str:
    """docs/selector-features.md (scripts/gen-docs): the feature table, from FEATURES."""
    out = ["# The selector's features", "",
           "Generated from `tools/convtune/features.py` (`FEATURES`) by `scripts/gen-docs`; "
           "docs/config-selection.md says how they are used. One row per (problem, config); "
           "the model's columns are in this order.", "",
           "| # | feature | meaning |", "| ---: | --- | --- |"]
    out += [f"| {i} | `{name}` | {doc} |" for i, (name, doc) in enumerate(FEATURES)]
    return "\n".join(out) + "\n"

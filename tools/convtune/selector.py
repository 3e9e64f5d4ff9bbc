"""The learned config selector: LightGBM models that rank each problem's candidate configs
and predict their speed, so a run without -perf_config and without a tuned entry takes the
config ranked first instead of the fixed rule's.

The idea is CK's dispatcher heuristics (docs/config-selection.md): a regression on
log1p(TFLOPS) over features of the problem, the config and how the two fit, trained on
every measurement of the tuning database, one per direction (the three kernels differ
more than one regression learnt: on 544 problems one for all reached 85.2% mean / 44.6%
P10 of the oracle, one per direction 88.8% / 63.9%); beside them one ranking model over
the same features, trained on every problem's configs in order of speed, which picks (it
picked better than the regression: RANK_PARAMS; one for the three directions, which
share tiles, picked better than one each: rank_trees); evaluated with folds grouped by
problem shape (or by layer: a layer at every batch), so no shape is ever both learnt and
judged.

    FEATURES              the feature table: name and meaning, in the model's column order
    features(p, cfg, dev) one row of it
    load_dataset(db)      the database's measurements as (problem, config, TFLOPS) rows
    train(dataset)        fitted models: one ranking lightgbm.Booster, a speed one per direction
    Model                 a model file: save, load, rank a problem's candidates
    choose(p, backend)    the run-time question: (config, predicted TFLOPS) or why not
    evaluate(dataset)     grouped cross-validation: efficiency against the oracle, the
                          fixed rule and the single best config

A model file is JSON: the schema name and version, the arch it is for, the feature names
it was trained on (a model whose features differ from this module's is refused), what it
was trained on, and LightGBM's own text models: "rank", one for every direction, and
"speed", one per direction it was trained on. `tuning/models/<arch>.json` is the default.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import math
import os
import time
from collections import defaultdict

from convgen import REPO_ROOT, report
from convgen.backend import DEVICE_UNITS, UNIT_LIMITS, Backend
from convgen.directions import blocks_span_taps, column_tiles
from convgen.errors import ConvgenError
from convgen.kernels import config as kconfig
from convgen.kernels import geometry, s2d
from convgen.kernels.geometry import streamk_steps, tail_programs
from convtune import lgbm_c
from convtune import space as tuning_space
from convtune.tuning_db import (GRAPH_TIMED_SINCE, PER_LAUNCH_TRUSTED_MS, SEARCHED_ALL, TuningDB,
                                problem_from_key, why_none)

SCHEMA_NAME = "convgen-selector"
SCHEMA_VERSION = 4   # 4: one ranking model, a speed model per direction; 3: both per direction
MODELS_DIR = os.path.join(REPO_ROOT, "tuning", "models")

# LightGBM settings, each the smallest that picked as well as larger ones in cross-validation
# (docs/config-selection.md, "Model settings", has the measurements): a pick walks every tree
# over its few kept candidates with the model cold in the cache, most of its time.
# Deterministic so that a retrain on the same data writes the same file.
TRAIN_PARAMS = {"objective": "regression", "learning_rate": 0.2, "num_leaves": 31,
                "min_data_in_leaf": 5, "feature_fraction": 0.9, "lambda_l2": 1.0,
                "verbosity": -1, "seed": 1, "deterministic": True, "force_row_wise": True,
                "num_threads": 1}
TREES = 75
# The pick is a ranking model's (LightGBM's lambdarank, the problem's configs one query,
# relevance = RANK_LEVELS * TFLOPS / the problem's best, rounded; gains grow by 2^(1/3) a
# level, the top 8 weighed): a pick needs only each problem's order, where a regression's
# error is spread over every config. The log1p(TFLOPS) regression stays for the TFLOPS a run
# reports for its pick.
RANK_LEVELS = 30
# Deeper trees than the speed model's: on thousands of problems 127 leaves rank better than
# 31 (benchmarks/rank_params_sweep.py)
RANK_PARAMS = {**TRAIN_PARAMS, "num_leaves": 127, "objective": "lambdarank",
               "lambdarank_truncation_level": 8,
               "label_gain": [2 ** (level / 3) - 1 for level in range(RANK_LEVELS + 1)]}
MODEL_KINDS = ("rank", "speed")   # what picks; what says how fast the pick is predicted to run
# A pick ranks every candidate by the first PREFILTER_TREES trees and lets the whole model
# order the PREFILTER_KEEP ranked first: a fraction of the tree walks, picking as well as
# the whole model on every candidate (benchmarks/prefilter_keep_sweep.py). The whole model's
# first of those that `config.validate` and the chain bound accept is the pick (they are
# asked in that order, so most picks validate one config; where none of the kept passes,
# the whole model orders the rest).
PREFILTER_TREES = 30
PREFILTER_KEEP = 8
WARM_TREES = 40   # added on top of a warm start's trees

# ---- features -------------------------------------------------------------------------------

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
                         "32 x num_warps threads, 16 bytes a load, one element where "
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
    ("occupancy", "programs one unit holds at once: the fewest that its shared memory (smem_kb "
                  "and 1 KiB a program), its warps and its registers allow, a thread's registers "
                  "estimated as its share of the fp32 tile, block_m x block_n / (32 x "
                  "num_warps), and 32 more, in steps of 8, at most 255; at least 1 (backend.UNIT_LIMITS; "
                  "0 where the arch's are unknown)"),
    # the device
    ("units", "SMs or CUs (backend.DEVICE_UNITS by the GPU's name, else the count the GPU "
              "gives where it runs; 0 when neither knows)"),
    ("arch_number", "the arch's digits (sm90 -> 90; gfx942 -> 942)"),
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
        """The count backend.DEVICE_UNITS gives its name, else its own: a GPU the table
        lacks is still counted where it runs (without it every wave feature would count
        waves of one SM); 0 where neither knows."""
        return DEVICE_UNITS.get(self.name) or self.counted_units

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
        self.limits = UNIT_LIMITS.get(dev.arch)
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
    threads = 32 * cfg.num_warps
    return [bm, bn, bk, cfg.num_warps, cfg.num_stages, split, int(bool(cfg.tma)), cfg.s2d or 0,
            cfg.persistent or 0, cfg.streamk or 0, cfg.tail or 0, cfg.swap_ab or 0,
            scalar, (bm + bn) * bk / (1 if scalar else 16 / elem) / threads, tiles_m,
            tiles_n, steps, fill_m, fill_n, fill_k, fill_m * fill_n, programs, waves, wave_fill,
            part, 2 * bm * bn * bk / ((bm + bn) * bk * elem), smem / 1024, parts,
            1 + launches, extra / 1e6, log_per_launch, _occupancy(f.limits, bm, bn, cfg.num_warps, smem),
            f.device_units, f.arch_number]


# cached: it depends on these alone, and the ~50 configs of a selection share a few tiles
# (a lookup is ~5x cheaper than the arithmetic)
@functools.cache
def _occupancy(limits, bm: int, bn: int, warps_each: int, smem: float) -> int:
    """The occupancy feature: programs one unit holds at once, 0 without the arch's limits."""
    if not limits:
        return 0
    shared, warps, registers = limits
    threads = 32 * warps_each
    per_thread = min(255, -(-(bm * bn // threads + 32) // 8) * 8)
    return max(1, min(int(shared // (smem + 1024)), warps // warps_each,
                      registers // (per_thread * threads)))


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


# ---- the data -------------------------------------------------------------------------------

SHAPE_COLUMNS = ("n", "c", "k", "g", "h", "w", "y", "x", "stride_h", "stride_w", "pad", "dil_h", "dil_w")


@dataclasses.dataclass
class Problem:
    """One problem of the database on one device, with every config measured for it."""
    key: tuple                 # direction, dtype, layouts and the shape columns
    shape: tuple               # the shape alone: the cross-validation group
    problem: object            # ConvProblem
    device: Device
    configs: list              # KernelConfig, candidates the rule would also accept
    tflops: list               # measured TFLOPS, 0 for a config that failed to compile or check

    @property
    def best(self) -> float:
        return max(self.tflops)

    @property
    def layer(self) -> tuple:
        """The shape less its batch: a network layer at any batch."""
        return self.shape[SHAPE_COLUMNS.index("n") + 1:]

    @functools.cached_property
    def rankable(self) -> list[int]:
        """The configs (indices) a run would rank: those today's tuning space holds (not
        the ones it has dropped since, such as configs that need more shared memory than a
        GPU has; those still set the best), or all where it holds none. Worked out once:
        every cross-validation asks it of every problem it holds out."""
        space = {c.describe() for c in tuning_space.configs(self.problem, _backend_for(self.device.arch))}
        return ([i for i, c in enumerate(self.configs) if c.describe() in space]
                or list(range(len(self.configs))))

    def candidates(self) -> list[int]:
        """The configs (indices) a run picks among: the rankable ones, of short chains where
        any is (as pick_runnable narrows a run's space). Not cached: cross-validation times
        it as part of a selection."""
        ranked = self.rankable
        return [ranked[i] for i in short_chains(self.problem, [self.configs[i] for i in ranked])]

    @functools.cached_property
    def candidate_rows(self) -> tuple:
        """(candidates(), their feature rows), worked out once: the parameter sweeps of
        benchmarks/ rank them under every assignment of the shapes to folds."""
        allowed = self.candidates()
        return allowed, feature_rows(self.problem, [self.configs[i] for i in allowed], self.device)


# What a cross-validation fold holds out whole: a shape (a layer at one batch), or a layer
# at every batch it was measured at (the harder test: a layer never seen at any batch).
GROUPINGS = {"shape": lambda p: p.shape, "layer": lambda p: p.layer}


def _backend_for(arch: str):
    """The Backend the rules of kernels/config.py see for a database's arch (no device needed)."""
    return Backend("hip" if arch.startswith("gfx") else "cuda", arch, 64 if arch.startswith("gfx") else 32)


@functools.cache
def offline_backend(arch: str, device: str):
    """_backend_for(arch), answering `device` for its name: how a selection on that GPU
    ranks, worked out on a machine without it (it asks nothing else of the device)."""
    from dataclasses import astuple

    class Named(type(_backend_for(arch))):
        def device_name(self) -> str:
            return device

        def units(self) -> int:   # not at hand: DEVICE_UNITS's count or none
            return 0
    return Named(*astuple(_backend_for(arch)))


def _drop_host_timed(by_config: dict, space) -> None:
    """One problem's configs are compared with each other. Where its retime is complete
    (every config of today's space, `space()`'s texts, that held a per-launch time under
    tuning_db.PER_LAUNCH_TRUSTED_MS has a graph time), the per-launch times under that bound
    left over go: configs of older spaces, which no retime reaches, would otherwise keep
    times several times too slow beside their neighbours' true ones (a 10 us bwd_weight
    split stored at 75 us). A problem with a few graph rows of another kind (fwd's `tail`
    configs) keeps its per-launch rows: they are the only times of its other configs."""
    def graph_timed(r) -> bool:   # an ok row's error says where capture failed
        return r["status"] == "ok" and r["measured_at"] >= GRAPH_TIMED_SINCE and not r["error"]
    if not any(graph_timed(r) for r in by_config.values()):
        return
    stale = [t for t, r in by_config.items() if r["status"] == "ok" and not graph_timed(r)
             and r["ms"] < PER_LAUNCH_TRUSTED_MS]
    if stale and not set(stale) & set(space()):
        for text in stale:
            del by_config[text]


def load_dataset(db_path: str, arch: str) -> list[Problem]:
    """Every problem measured on `arch` whose tuning finished (it has a best of its whole
    space, or every config of today's space has a time under some kernel version: not a
    `tune --top` or `--max-configs` best alone, whose few configs would teach that the
    fastest of them is the fastest of all), with the configs valid
    for it now. The measurements of all kernel versions count (the latest of each config
    wins; _drop_host_timed leaves out per-launch times a finished retime left behind): a
    kernel edit that changes speed shows up as new rows when its problems are tuned again,
    and a problem whose best went with such an edit still teaches its old times until
    then. A config that compiled but failed, or failed the reference check, counts as 0
    TFLOPS: the model must learn to avoid it; but a failed reference check under an older
    version of its direction's kernels than the newest measured says nothing sure of
    today's (the race docs/traps.md tells of was fixed so), so that config is left out of
    its problem (after the problem counts as finished); the next tune of the problem
    checks it again. A problem whose tuning was stopped part way has only some configs
    measured: its best so far would judge a pick among a few, so it waits for the rest."""
    if db_path is None:   # tuning_db.resolve found none
        raise ConvgenError(f"no tuning database: {why_none()} (give --db)", field="db")
    backend = _backend_for(arch)
    problem_columns = ("device", "direction", "dtype", "layouts") + SHAPE_COLUMNS
    with TuningDB(db_path, readonly=True) as db:
        rows = db.rows("SELECT * FROM measurements WHERE arch = ? ORDER BY measured_at", (arch,))
        finished = set(db.con.execute(f"SELECT DISTINCT {', '.join(problem_columns)} FROM best "
                                      "WHERE arch = ? AND searched = ?", (arch, SEARCHED_ALL)))
    newest = {row["direction"]: row["kernel"] for row in rows}   # rows in time order
    grouped: dict[tuple, dict] = defaultdict(dict)
    latest_row = {}
    for row in rows:
        full_key = tuple(row[c] for c in problem_columns)
        grouped[full_key][row["config"]] = row   # the latest wins
        latest_row[full_key] = row
    out = []
    for full_key, by_config in sorted(grouped.items()):
        latest = latest_row[full_key]
        p = problem_from_key(latest)
        space = functools.cache(lambda: [c.describe() for c in tuning_space.configs(p, backend)])
        if full_key not in finished and not set(space()) <= set(by_config):
            continue
        for text in [t for t, r in by_config.items()
                     if r["status"] == "wrong" and r["kernel"] != newest[r["direction"]]]:
            del by_config[text]
        _drop_host_timed(by_config, space)
        configs, tflops = [], []
        for text, row in sorted(by_config.items()):
            try:
                cfg = kconfig.choose(p, backend, True, kconfig.from_text(text))
            except ConvgenError:
                continue   # no longer a config of this problem (the rules changed)
            configs.append(cfg)
            tflops.append(row["tflops"] if row["status"] == "ok" and row["tflops"] else 0.0)
        if configs and max(tflops) > 0:
            out.append(Problem(full_key[1:], tuple(latest[c] for c in SHAPE_COLUMNS), p,
                               Device(arch, latest["device"]), configs, tflops))
    return out


def _matrix(problems: list[Problem]):
    """(features, log1p(TFLOPS), rank relevance, configs per problem) of every row."""
    import numpy as np
    rows, target, relevance = [], [], []
    for prob in problems:
        rows.append(feature_rows(prob.problem, prob.configs, prob.device))
        target += [math.log1p(t) for t in prob.tflops]
        relevance += [round(RANK_LEVELS * t / prob.best) for t in prob.tflops]
    return (np.concatenate(rows), np.asarray(target, dtype=np.float64),
            np.asarray(relevance, dtype=np.int32), [len(prob.configs) for prob in problems])


# ---- training and the model file ------------------------------------------------------------

def _lightgbm():
    try:
        import lightgbm
    except ImportError:
        return None
    return lightgbm


def train(problems: list[Problem], trees: int = TREES, warm_start: "Model | None" = None) -> dict:
    """{"rank": booster, "speed": {direction: booster}}: LightGBM fitted on every (problem,
    config) row, one ranking of each problem's configs for every direction (RANK_PARAMS,
    rank_trees(trees) trees) and a regression on log1p(TFLOPS) per direction; a warm start
    continues its ranking model, and the speed models of the directions with new rows."""
    import numpy as np
    lgb = _lightgbm()
    if lgb is None:
        raise ConvgenError("training a selector needs the lightgbm package (pip install "
                           "-c constraints.txt lightgbm)")
    if not problems:
        raise ConvgenError("no measurements to train on")

    def fit(params, x, label, groups, rounds, old_text):
        data = lgb.Dataset(x, label, group=groups, feature_name=list(FEATURE_NAMES),
                           free_raw_data=True)
        init = lgb.Booster(model_str=old_text) if old_text else None
        return lgb.train(params, data, num_boost_round=rounds, init_model=init,
                         keep_training_booster=False)
    old = warm_start.texts if warm_start else {"rank": None, "speed": {}}
    x, y, relevance, groups = _matrix(problems)
    # the ranking learns every direction's problems, each problem still one query
    boosters = {"rank": fit(RANK_PARAMS, x, relevance, groups,
                            rank_trees(WARM_TREES if old["rank"] else trees), old["rank"]),
                "speed": {}}
    row_direction = np.repeat([p.problem.direction.name for p in problems], groups)
    for direction in DIRECTIONS:
        mine = row_direction == direction
        before = old["speed"].get(direction)
        if mine.any():
            boosters["speed"][direction] = fit(TRAIN_PARAMS, x[mine], y[mine], None,
                                               WARM_TREES if before else trees, before)
        elif before:   # no new data for it: the warm start's model stays as it was
            boosters["speed"][direction] = lgb.Booster(model_str=before)
    return boosters


def rank_trees(trees: int) -> int:
    """The ranking model's trees: `trees` for each direction it ranks (225 for 75), as many
    as the three per-direction ranking models it replaced had together. One ranking for the three
    directions learns from all 1095 problems where each had a third: six shufflings of the
    shapes into 5 folds, mean / P10 of the oracle 98.25% / 94.57% against 97.98% / 93.98%
    for one model of 75 trees per direction and 98.14% / 94.12% for one of 225 per
    direction (more trees alone are not what moved it)."""
    return len(DIRECTIONS) * trees


class Model:
    """A trained selector for one arch: LightGBM's text models (the ranking that picks, for
    every direction; the regression per direction that predicts TFLOPS), predicted through
    its C library (lgbm_c), so a run never imports the lightgbm package."""

    def __init__(self, texts: dict, meta: dict, path: str | None = None):
        self.texts = {"rank": texts["rank"], "speed": dict(texts["speed"])}   # "speed": {direction: text}
        self.meta = meta
        self.path = path
        self._boosters: dict = {}

    @classmethod
    def of(cls, boosters: dict, meta: dict) -> "Model":
        """The model of the boosters that train() fitted."""
        return cls({"rank": boosters["rank"].model_to_string(),
                    "speed": {d: b.model_to_string() for d, b in boosters["speed"].items()}}, meta)

    @property
    def directions(self) -> tuple:
        """The directions it was trained on (a speed model each): the others keep the rule."""
        return tuple(self.texts["speed"])

    def booster(self, direction: str, kind: str = "rank"):
        """lgbm_c.Booster of the ranking model or a direction's speed model, loaded on first
        use (ImportError without lightgbm)."""
        key = (direction if kind == "speed" else None, kind)
        if key not in self._boosters:
            text = self.texts["speed"][direction] if kind == "speed" else self.texts["rank"]
            self._boosters[key] = lgbm_c.Booster(text)
        return self._boosters[key]

    @property
    def arch(self) -> str:
        return self.meta["arch"]

    def rule_kept_for(self, problem) -> set:
        """The problem's families for which this model keeps the rule (rule_families)."""
        return set(self.meta.get("rule_families") or ()) & set(families_of(problem))

    def save(self, path: str) -> None:
        """Written whole or not at all (report.write_json)."""
        doc = {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION, **self.meta,
               "features": list(FEATURE_NAMES), "models": self.texts}
        try:
            report.write_json(path, doc)
        except OSError as e:
            raise ConvgenError(f"cannot write the selector model '{path}': {e.strerror}",
                               field="selector") from None
        self.path = path

    @classmethod
    def load(cls, path: str) -> "Model":
        def damaged(why: str) -> ConvgenError:
            return ConvgenError(f"selector model '{path}' cannot be used: {why}", field="selector")
        try:
            with open(path) as f:
                doc = json.load(f)
        except OSError as e:
            raise damaged(e.strerror or str(e)) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise damaged(f"not a model file ({e})") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_NAME:
            raise damaged("not a convgen selector model")
        if doc.get("version") != SCHEMA_VERSION:
            raise damaged(f"schema version {doc.get('version')}; this convgen reads {SCHEMA_VERSION}")
        if doc.get("features") != list(FEATURE_NAMES):
            raise damaged("it was trained on other features than this convgen computes "
                          "(convgen train-selector makes a new one)")
        texts = doc.get("models")
        speed = texts.get("speed") if isinstance(texts, dict) else None
        if (not isinstance(texts, dict) or set(texts) != set(MODEL_KINDS)
                or not isinstance(texts["rank"], str) or not isinstance(speed, dict) or not speed
                or set(speed) - set(DIRECTIONS) or not all(isinstance(v, str) for v in speed.values())):
            raise damaged("it holds no LightGBM ranking model and speed model per direction")
        meta = {k: v for k, v in doc.items() if k not in ("schema", "version", "features", "models")}
        model = cls(texts, meta, path)
        for direction, kind in [(None, "rank")] + [(d, "speed") for d in speed]:
            name = f"{direction} {kind}" if direction else kind
            try:
                booster = model.booster(direction, kind)
            except lgbm_c.LightGBMError as e:
                raise damaged(f"its {name} LightGBM model does not parse "
                              f"({' '.join(str(e).split())[:200]})") from None
            if booster.num_features != len(FEATURE_NAMES):
                raise damaged(f"its {name} LightGBM model reads "
                              f"{booster.num_features} features, not {len(FEATURE_NAMES)}")
        return model

    def predict(self, p, configs, dev: Device):
        """Predicted TFLOPS of each config for problem p (its direction's speed model)."""
        import numpy as np
        x = np.asarray(feature_rows(p, configs, dev), dtype=np.float64)
        return np.expm1(self.booster(p.direction.name, "speed").predict(x))

    def pick(self, p, configs, dev: Device) -> tuple[int, float]:
        """(index, predicted TFLOPS) of the config the model picks for problem p."""
        import numpy as np
        return self.pick_rows(p.direction.name,
                              np.asarray(feature_rows(p, configs, dev), dtype=np.float64))

    def pick_rows(self, direction: str, x, accept=None) -> tuple[int, float] | None:
        """pick() of the candidates' feature rows x: the first of order_rows(direction, x)
        that `accept(i)` takes (every one when accept is None), None when it takes none.
        Its TFLOPS as the speed model predicts them."""
        import numpy as np
        best = next((i for i in self.order_rows(direction, x) if accept is None or accept(i)), None)
        if best is None:
            return None
        return best, float(np.expm1(self.booster(direction, "speed").predict_one(x[best])))

    def order_rows(self, direction: str, x):
        """The candidates (row indices of x) in the order a pick asks for them, lazily: the
        PREFILTER_KEEP that the ranking model's first PREFILTER_TREES trees rank first, in
        the whole model's order; then the rest in the whole model's order (their trees
        are walked only when a caller gets that far)."""
        import numpy as np
        booster = self.booster(direction)
        if len(x) > PREFILTER_KEEP:
            start = PREFILTER_TREES
            first = booster.predict(x, start)
            kept = np.argsort(-first, kind="stable")
            kept, rest = kept[:PREFILTER_KEEP], kept[PREFILTER_KEEP:]
        else:
            start, first, kept, rest = 0, np.zeros(len(x)), np.arange(len(x)), np.arange(0)
        for group in (kept, rest):
            if not len(group):
                continue
            # the whole model's score: the prefilter's trees' sum and the trees after them
            score = first[group] + booster.predict(x[group], start=start)
            yield from (int(i) for i in group[np.argsort(-score, kind="stable")])


# ---- run-time selection ---------------------------------------------------------------------

def resolve(given: str | None, arch: str) -> str | None:
    """The model file a run uses: `given` ("" for the default: $CONVGEN_SELECTOR, else
    tuning/models/<arch>.json; None for none). The shipped default that does not exist is
    none; a file named by -selector or $CONVGEN_SELECTOR must exist (model_for says so)."""
    if given is None:
        return None
    path = given or os.environ.get("CONVGEN_SELECTOR") or os.path.join(MODELS_DIR, f"{arch}.json")
    if not given and not os.environ.get("CONVGEN_SELECTOR") and not os.path.exists(path):
        return None
    return path


_LOADED: dict[str, Model] = {}


def load(path: str) -> Model:
    """A model, loaded once per process."""
    if path not in _LOADED:
        _LOADED[path] = Model.load(path)
    return _LOADED[path]


def choose(problem, backend, given: str | None = ""):
    """(config, predicted TFLOPS, model path), or (None, why not, None): the candidate of
    the tuning space (convtune/space.configs) the model ranks first."""
    model, path, why = model_for(problem, backend, given)
    if model is None:
        return None, why, None
    kept = model.rule_kept_for(problem)
    if kept:
        return None, (f"{os.path.basename(path)} keeps the rule for {', '.join(sorted(kept))} "
                      "problems (it beat or tied the model in cross-validation)"), None
    import numpy as np
    space = tuning_space.configs(problem, backend)
    x = np.asarray(feature_rows(problem, space, device_of(backend)),
                   dtype=np.float64)
    picked = pick_runnable(model, problem, backend, space, x)
    if picked is None:
        return None, "no config of the tuning space runs here", None
    return space[picked[0]], picked[1], path


def model_for(problem, backend, given: str | None):
    """(model, its path, None), or (None, None, why no model ranks this problem); a model
    file named but missing, damaged or for another arch is an error."""
    if given is None:
        return None, None, "selector off"
    path = resolve(given, backend.arch)
    if path is None:
        return None, None, f"no selector model for {backend.arch}"
    try:
        model = load(path)
    except ImportError:
        return None, None, "the selector needs lightgbm, which is not installed"
    except ConvgenError as e:
        if not given:   # the path came from $CONVGEN_SELECTOR, not from -selector
            raise ConvgenError(f"$CONVGEN_SELECTOR: {e}") from None
        raise
    if model.arch != backend.arch:
        raise ConvgenError(f"selector model '{path}' is for {model.arch}, not {backend.arch}",
                           field="selector")
    if problem.direction.name not in model.directions:
        return None, None, f"{os.path.basename(path)} has no {problem.direction.name} model"
    kind = coverage(problem)
    if "coverage" in model.meta and kind not in model.meta["coverage"]:
        return None, None, f"{os.path.basename(path)} was trained on no {kind} problem"
    return model, path, None


def ranked(problem, backend, given: str | None = "") -> tuple[list, str]:
    """(configs, model file): the configs of the tuning space a selection may pick (as
    pick_runnable narrows it: valid here, of short chains where any is) in the order it
    asks for them, so what a run takes first (`convgen tune --top` measures the first
    few): choose()'s pick, or the rule's config in a family the model keeps the rule for;
    or ([], why none)."""
    model, path, why = model_for(problem, backend, given)
    if model is None:
        return [], why
    space = tuning_space.configs(problem, backend)
    valid = {i for i, cfg in enumerate(space) if runs_here(cfg, problem, backend)}
    if not valid:
        return [], "no config of the tuning space runs here"
    allowed = {i for i in valid if short_chain(problem, space[i])} or valid
    import numpy as np
    x = np.asarray(feature_rows(problem, space, device_of(backend)),
                   dtype=np.float64)
    order = [space[i] for i in model.order_rows(problem.direction.name, x) if i in allowed]
    if model.rule_kept_for(problem):
        rule = kconfig.choose(problem, backend, True)
        order = [rule] + [c for c in order if c != rule]
    return order, path


def pick_runnable(model: Model, problem, backend, space: list, x) -> tuple[int, float] | None:
    """model.pick_rows over the configs of `space` a selection may pick: those
    kernels/config.validate accepts here (the model never learnt that the others fail),
    of short chains (short_chain) where any is. Asked in the model's order of the few
    candidates the pick looks at (validation costs more than the trees)."""
    @functools.cache
    def valid(i: int) -> bool:
        return runs_here(space[i], problem, backend)
    direction = problem.direction.name
    return (model.pick_rows(direction, x, lambda i: valid(i) and short_chain(problem, space[i]))
            or model.pick_rows(direction, x, valid))


def runs_here(cfg, problem, backend) -> bool:
    """Whether kernels/config.validate accepts cfg for the problem on this backend."""
    try:
        kconfig.validate(cfg, problem, backend, True)
    except ConvgenError:
        return False
    return True


def short_chain(problem, cfg) -> bool:
    """Whether cfg's programs sum at most MAX_CHAIN products in a row. The rule keeps to the
    same bound for accuracy (a depthwise bwd_weight summed 802,816 products in one chain
    and failed the rel bit on the H100); the model, which learns speed only, picked such a
    config and its run failed."""
    return kconfig.longest_chain(problem, cfg) <= kconfig.MAX_CHAIN


def short_chains(problem, configs) -> list[int]:
    """The configs (indices) of short chains (short_chain), or all of them where none is.
    Each chain is worked out once per kconfig.chain_fields: the cross-validation times this
    as part of a selection."""
    short: dict = {}
    keep = []
    for i, cfg in enumerate(configs):
        key = kconfig.chain_fields(cfg)
        if key not in short:
            short[key] = short_chain(problem, cfg)
        if short[key]:
            keep.append(i)
    return keep or list(range(len(configs)))


# ---- evaluation -----------------------------------------------------------------------------

def group_folds(problems: list[Problem], folds: int, group: str = "shape",
                shuffle: int | None = None) -> list[int]:
    """A fold per problem, whole groups (GROUPINGS) at a time: each group's fold is a hash of
    its key (and of `shuffle`, a seed, for another assignment), so a group keeps its fold
    whatever else the database holds. A deal that balances the folds' rows (sklearn's
    GroupKFold rule) moves most groups whenever one is added: two evaluations' numbers then
    differ more by the deal than by the data (adding 128 problems to 3931 moved 1148 of
    the 1663 H100 problems to another fold in a by-layer evaluation). Hashed
    folds are even only in expectation (4223 problems: within about a tenth of the mean
    by shape, a fifth by layer); with few groups a fold may judge nothing. The hash is
    of the key's text, so the folds are the same in every process."""
    import hashlib
    key = GROUPINGS[group]
    groups = {key(prob) for prob in problems}
    if len(groups) < folds:
        raise ConvgenError(f"{len(groups)} distinct {group}s cannot fill {folds} folds")
    salt = "" if shuffle is None else f"{shuffle}:"

    @functools.cache
    def fold(one: tuple) -> int:
        digest = hashlib.blake2b(f"{salt}{one!r}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") % folds
    return [fold(key(prob)) for prob in problems]


def assignments(shuffles: int) -> list[int | None]:
    """group_folds' `shuffle` for the canonical assignment of the groups to folds, then for
    `shuffles` seeded ones: the seeds every evaluation and benchmark of the selector uses."""
    return [None] + list(range(1, shuffles + 1))


def fold_splits(problems: list[Problem], folds: int, group: str = "shape",
                shuffle: int | None = None, judged: list[Problem] | None = None):
    """Per fold f: (f, the indices of `problems` trained on, the indices of `judged` (default
    `problems`) held out), by group_folds. A judged problem whose group `problems` lacks is
    in no fold's training set; fold 0 judges it. No group is ever on both sides. A fold
    that judges nothing (hashed folds of a few groups) is left out: no model for it."""
    key = GROUPINGS[group]
    fold_of = group_folds(problems, folds, group, shuffle)
    if judged is None:
        judged, judged_fold = problems, fold_of
    else:
        fold_of_group = {key(p): g for p, g in zip(problems, fold_of)}
        judged_fold = [fold_of_group.get(key(p), 0) for p in judged]
    for f in range(folds):
        train_ix = [i for i, g in enumerate(fold_of) if g != f]
        test_ix = [i for i, g in enumerate(judged_fold) if g == f]
        if not test_ix:
            continue
        assert not {key(problems[i]) for i in train_ix} & {key(judged[i]) for i in test_ix}
        yield f, train_ix, test_ix


def coverage(p) -> str:
    """The kind of problem a model must have been trained on to be asked about p: its type
    and whether its tensors keep channels innermost (the kernels open to it differ)."""
    lay = p.layouts
    last = lay["input"][-1] == "c" and lay["filter"][-1] == "c" and lay["output"][-1] == "k"
    return f"{p.dtype.name} {'channels-last' if last else 'channels-first'}"


def families(prob: Problem) -> list[str]:
    """The shape families a problem is reported under (besides "overall")."""
    return families_of(prob.problem)


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


def _summary(effs: list[float]) -> dict:
    import numpy as np
    if not effs:
        return {"count": 0}
    a = np.asarray(effs)
    return {"count": len(effs), "mean": float(a.mean()), "p10": float(np.percentile(a, 10)),
            "min": float(a.min())}


def direction_summaries(picks: list[tuple[str, float]]) -> dict:
    """_summary of (direction, efficiency) pairs, "overall" and per direction that has any."""
    out = {"overall": _summary([e for _, e in picks])}
    for direction in DIRECTIONS:
        s = _summary([e for d, e in picks if d == direction])
        if s["count"]:
            out[direction] = s
    return out


# A family where the fixed rule beat (or tied) the model in cross-validation keeps the
# rule (the seed's advice for its hardest family, tiny M): with fewer problems than this
# the comparison says nothing.
MIN_FAMILY = 5


def rule_families(per_problem: list[dict]) -> list[str]:
    """The families (of at least MIN_FAMILY problems) in which the rule beat the model in
    cross-validation results (evaluate()'s per_problem), or tied it on every problem
    (below). Beating it takes a higher mean efficiency and being ahead on more of the
    family's problems than behind. The second guards against one
    layer the model misjudges pulling a family's mean under the rule's: held out by layer,
    ResNet-50's 7x7 stem (38% at one batch, the rule 85-97%) did so for the stems in one
    fold, and that fold's other stems, where the model was ahead, then took the rule. The
    price: a family the model mostly gets right but now and then badly wrong keeps the
    model, whose misses then set the family's minimum.

    A family where the rule did exactly as well as the model on every problem keeps the
    rule too: the model adds nothing there, and off its data it can only lose. Depthwise
    is such a family (the rule's config is the best measured for every depthwise problem);
    held out by layer, the model left ConvNeXt's 7x7 depthwise bwd_weight at 74-81% where
    the rule has 100%."""
    out = []
    for name in sorted({fam for r in per_problem for fam in r["families"]}):
        rows = [r for r in per_problem if name in r["families"] and r["rule"] is not None]
        wins = sum(r["rule"] > r["model"] for r in rows)
        losses = sum(r["rule"] < r["model"] for r in rows)
        beat = wins > losses and sum(r["rule"] for r in rows) > sum(r["model"] for r in rows)
        if len(rows) >= MIN_FAMILY and (beat or wins == losses == 0):
            out.append(name)
    return out


def _cross_validate(problems: list[Problem], folds: int, trees: int, inner: bool,
                    group: str = "shape", shuffle: int | None = None,
                    test: list[Problem] | None = None) -> tuple[list, list]:
    """(one row per problem, selection seconds): each fold's model picks for the problems of
    the held-out groups (GROUPINGS; `shuffle`: group_folds'). With `inner`, each fold also
    learns, by cross-validation on its own training problems alone, the families that keep
    the rule (rule_families), and the row's "selector" is what a run with that model would
    take. With `test` (the problems of one device, of `problems` or not), the folds' models,
    trained on `problems` as before, pick for the test problems of their held-out groups
    alone (a group `problems` lacks is in no fold's training set: fold 0's model picks for
    it), and each row's "source" is how the best config measured for the same problem on
    another device of `problems` does there (the last such device in sort order where
    there are several; None where there is none)."""
    judged = problems if test is None else test
    if test is not None:
        judged_on = {p.device for p in test}
        source_best = {p.key: p.configs[p.tflops.index(p.best)].describe() for p in problems
                       if p.device not in judged_on}
    per_problem, select_s = [], []
    for f, train_ix, test_ix in fold_splits(problems, folds, group, shuffle, test):
        train_set = [problems[i] for i in train_ix]
        test_set = [judged[i] for i in test_ix]
        model = Model.of(train(train_set, trees), {"arch": problems[0].device.arch})
        single = _single_best(train_set)
        keep_rule = rule_families(_cross_validate(train_set, folds - 1, trees, False, group)[0]) if inner else []
        for prob in test_set:
            backend = _backend_for(prob.device.arch)
            rule = kconfig.default_config(prob.problem, backend, True).describe()
            texts = [c.describe() for c in prob.configs]
            rule_eff = prob.tflops[texts.index(rule)] / prob.best if rule in texts else None
            prob.rankable   # worked out before the timing: a run builds its space anyway
            t0 = time.perf_counter()
            x = None
            if prob.problem.direction.name in model.directions:
                allowed = prob.candidates()
                x = feature_rows(prob.problem, [prob.configs[i] for i in allowed], prob.device)
                best, predicted = model.pick_rows(prob.problem.direction.name, x)
                chosen = allowed[best]
                select_s.append(time.perf_counter() - t0)
            else:
                # the training shapes held no problem of this direction: a run takes the rule
                chosen, predicted = (texts.index(rule) if rule in texts else None), None
            top = _timed_top(model, prob, allowed, x) if x is not None else None
            one = single.get(prob.problem.direction.name)
            single_eff = prob.tflops[texts.index(one)] / prob.best if one in texts else 0.0
            fams = families(prob)
            model_eff = prob.tflops[chosen] / prob.best if chosen is not None else None
            ruled = bool(set(fams) & set(keep_rule)) and rule_eff is not None
            per_problem.append({
                "problem": prob.problem.describe(), "fold": f, "families": fams,
                "best_tflops": prob.best, "chosen": texts[chosen] if chosen is not None else None,
                "predicted_tflops": predicted, "model": model_eff,
                "rule": rule_eff, "single": single_eff,
                "selector": rule_eff if ruled else model_eff, "rule_families": keep_rule,
                "timed_top": top})
            if test is not None:
                src = source_best.get(prob.key)
                per_problem[-1]["source"] = (prob.tflops[texts.index(src)] / prob.best
                                             if src in texts else None)
    return per_problem, select_s


# `convgen tune --top K` measures the model's first K and keeps the fastest: the evaluation
# reports that best's efficiency for these K
TOP_KS = (2, 4, 6, 8)


def _timed_top(model: Model, prob: Problem, allowed: list[int], x) -> dict[str, float]:
    """{K: the best measured of the model's first K candidates / the best of all} (JSON
    keys); x: the candidates' feature rows."""
    first = [allowed[i] for i in itertools.islice(model.order_rows(prob.problem.direction.name, x),
                                                  max(TOP_KS))]
    return {str(k): max(prob.tflops[i] for i in first[:k]) / prob.best for k in TOP_KS}


def timed_top_summaries(per_problem: list[dict]) -> dict:
    """{K: {"overall" and each direction: mean / P10 / min}} of the timed_top efficiencies."""
    out = {}
    for k in map(str, TOP_KS):
        out[k] = {}
        for name in ("overall",) + DIRECTIONS:
            effs = [r["timed_top"][k] for r in per_problem if r.get("timed_top")
                    and (name == "overall" or name in r["families"])]
            if effs:   # a direction the data lacks has no row (the shuffled means read each)
                out[k][name] = _summary(effs)
    return out


def evaluate(problems: list[Problem], folds: int = 5, trees: int = TREES, group: str = "shape",
             shuffles: int = 0, test: list[Problem] | None = None) -> dict:
    """Cross-validation grouped by shape (or by layer, GROUPINGS): each fold's model picks a
    config for every problem of the held-out groups; efficiency = that config's measured
    TFLOPS / the best measured.
    Beside it: the fixed rule (kernels/config.default_config), the single config that does
    best on the training folds per direction, and the selector as a run uses it (the
    model, or the rule in the families where the training folds' own cross-validation
    preferred it). `overall` is the selector's. With `shuffles`, the selector's numbers
    again over that many other assignments of the groups to folds (group_folds' seeds 1,
    2, ...) and their mean with the first's (`shuffled`). With `test` (_cross_validate's),
    the numbers are the test problems', and `source` is another device's best config on
    them: how much the device changes which config is fastest."""
    per_problem, select_s = _cross_validate(problems, folds, trees, True, group, test=test)
    judged = problems if test is None else test
    out = {"folds": folds, "group": group, "problems": len(judged),
           "shapes": len({p.shape for p in judged}), "layers": len({p.layer for p in judged}),
           "rows": sum(len(p.configs) for p in judged),
           # None where the models learnt none of the judged problems' directions (the rule's)
           "selection_ms": 1e3 * sorted(select_s)[len(select_s) // 2] if select_s else None,
           "selection_ms_max": 1e3 * max(select_s) if select_s else None}
    names = ["overall"] + sorted({fam for r in per_problem for fam in r["families"]})
    table = {}
    for name in names:
        rows = [r for r in per_problem if name == "overall" or name in r["families"]]
        table[name] = {who: _summary([r[who] for r in rows if r[who] is not None])
                       for who in ("selector", "model", "rule", "single")
                       + (("source",) if test is not None else ())}
    out["overall"] = {k: table["overall"]["selector"][k] for k in ("mean", "p10", "min")}
    if test is not None:
        out["test_device"] = ", ".join(sorted({p.device.name for p in test}))
    out["families"] = table
    out["timed_top"] = timed_top_summaries(per_problem)
    if shuffles:
        seeds = assignments(shuffles)[1:]
        runs = [per_problem] + [_cross_validate(problems, folds, trees, True, group, seed, test)[0]
                                for seed in seeds]
        each = [{name: _selector_summary(rows, name) for name in names} for rows in runs]
        out["shuffled"] = {"assignments": len(runs), "seeds": seeds,
                           "families": {name: _mean_summary([one[name] for one in each])
                                        for name in names},
                           "each": each}
        tops = [timed_top_summaries(rows) for rows in runs]
        out["shuffled"]["timed_top"] = {k: {name: _mean_summary([t[k][name] for t in tops])
                                            for name in tops[0][k]} for k in tops[0]}
    out["prediction_error"] = _prediction_error(per_problem)
    out["per_problem"] = per_problem
    return out


def _selector_summary(per_problem: list[dict], family: str) -> dict:
    """The selector's mean, P10 and min in a family (or "overall") of one cross-validation."""
    return _summary([r["selector"] for r in per_problem if r["selector"] is not None
                     and (family == "overall" or family in r["families"])])


def _mean_summary(summaries: list[dict]) -> dict:
    """Mean, P10 and min, each averaged over the summaries (one per assignment of groups
    to folds)."""
    return {"count": summaries[0]["count"],
            **{k: sum(s[k] for s in summaries) / len(summaries) for k in ("mean", "p10", "min")}}


def averaged_percent(runs: list[dict]) -> dict[str, list[float]]:
    """[mean, P10, min] in percent (2 decimals) of each direction_summaries key, averaged
    over the runs (one per assignment of the shapes to folds): what the sweeps of
    benchmarks/ print."""
    out = {}
    for direction in runs[0]:
        m = _mean_summary([one[direction] for one in runs])
        out[direction] = [round(100 * m[k], 2) for k in ("mean", "p10", "min")]
    return out


def _prediction_error(per_problem: list[dict]) -> dict:
    """How far the `#` line's predicted TFLOPS (the speed model's, of the model's pick) is
    from the pick's measured TFLOPS: median and P90 of |predicted - measured| / measured."""
    import numpy as np
    errors = [abs(r["predicted_tflops"] - r["model"] * r["best_tflops"]) / (r["model"] * r["best_tflops"])
              for r in per_problem if r["predicted_tflops"] is not None and r["model"]]
    if not errors:
        return {"count": 0, "median": None, "p90": None}
    return {"count": len(errors), "median": float(np.percentile(errors, 50)),
            "p90": float(np.percentile(errors, 90))}


def _single_best(problems: list[Problem]) -> dict[str, str]:
    """Per direction, the config with the highest mean efficiency over these problems (0
    where it was not measured or not valid)."""
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    count: dict[str, int] = defaultdict(int)
    for prob in problems:
        d = prob.problem.direction.name
        count[d] += 1
        for cfg, t in zip(prob.configs, prob.tflops):
            sums[d][cfg.describe()] += t / prob.best
    return {d: max(s.items(), key=lambda kv: (kv[1], kv[0]))[0] for d, s in sums.items()}


# ---- what convgen train-selector and eval-selector print ------------------------------------

def _pct(summary: dict, what: str) -> str:
    return f"{100 * summary[what]:.1f}%" if summary.get("count") else "-"


def evaluation_table(result: dict) -> list[str]:
    """The evaluation as a Markdown table: per family, the selector's (what a run takes),
    the model's alone, the fixed rule's and the single best config's mean / P10 / min
    efficiency (fractions of the oracle); judged on one device's problems (--test_device),
    also the best config another device measured for them (of how many: fewer where the
    other device measured fewer)."""
    source = "test_device" in result
    lines = ["| family | problems | selector mean | P10 | min | model mean | P10 | min | "
             "rule mean | P10 | min | single best mean |"
             + (" other device's best mean | P10 | min |" if source else ""),
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
             + (" ---: | ---: | ---: |" if source else "")]
    for name, row in result["families"].items():
        c, m, r, s = row["selector"], row["model"], row["rule"], row["single"]
        lines.append(f"| {name} | {m['count']} | {_pct(c, 'mean')} | {_pct(c, 'p10')} | "
                     f"{_pct(c, 'min')} | {_pct(m, 'mean')} | {_pct(m, 'p10')} | "
                     f"{_pct(m, 'min')} | {_pct(r, 'mean')} | {_pct(r, 'p10')} | {_pct(r, 'min')} | "
                     f"{_pct(s, 'mean')} |"
                     + (f" {_pct(row['source'], 'mean')} of {row['source']['count']} |"
                        f" {_pct(row['source'], 'p10')} | {_pct(row['source'], 'min')} |"
                        if source else ""))
    return lines


def on_device(problems: list[Problem], name: str | None, what: str) -> list[Problem]:
    """The problems measured on the device `name` (all when None); an error naming the
    devices there are when none is (`what`: the flag, for the message)."""
    if name is None:
        return problems
    out = [p for p in problems if p.device.name == name]
    if not out:
        there = sorted({p.device.name for p in problems})
        raise ConvgenError(f"no measurements on '{name}' (the database has: {', '.join(there)})",
                           field=what)
    return out


def main(command: str, args: dict) -> int:
    """convgen train-selector / eval-selector (convtune.commands.parse_selector gives `args`)."""
    # every path is checked before the work: a bad one costs nothing and leaves nothing
    out = args["out"] or os.path.join(MODELS_DIR, f"{args['arch']}.json")
    if command == "eval-selector" and args["json"]:
        report.check_paths(args["json"], None)
    if command == "train-selector" and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise ConvgenError(f"the folder of '{out}' does not exist", field="out")
    try:
        warm = Model.load(args["warm_start"]) if command == "train-selector" and args["warm_start"] else None
    except ConvgenError as e:
        raise ConvgenError(str(e), field="warm_start") from None
    if warm is not None and warm.arch != args["arch"]:
        raise ConvgenError(f"'{args['warm_start']}' is a model for {warm.arch}, not {args['arch']}",
                           field="warm_start")
    if command == "train-selector" and args["test_device"] is not None:
        raise ConvgenError("only eval-selector judges picks on another device", field="test_device")
    if args["folds"] < 2:   # one fold would hold everything out and train on nothing
        raise ConvgenError(f"cross-validation needs at least 2 folds, not {args['folds']}",
                           field="folds")
    if _lightgbm() is None:   # before the minutes a large database takes to read
        raise ConvgenError(f"{command} needs the lightgbm package (pip install -c "
                           "constraints.txt lightgbm)")
    problems = load_dataset(args["db"], args["arch"])
    if not problems:
        raise ConvgenError(f"the tuning database '{args['db']}' has no problem on {args['arch']} "
                           "whose whole tuning space is measured (a best of `convgen tune --top` "
                           "or --max-configs alone teaches nothing; `convgen tuning-stats` "
                           "counts what there is)")
    test = (on_device(problems, args["test_device"], "test_device")
            if args["test_device"] is not None else None)
    problems = on_device(problems, args["device"], "device")
    devices = sorted({p.device.name for p in problems})
    shapes = len({p.shape for p in problems})
    rows = sum(len(p.configs) for p in problems)
    report.say(f"{command}: {len(problems)} problems ({shapes} shapes of "
               f"{len({p.layer for p in problems})} layers, {rows} measured configs) "
               f"on {args['arch']} ({', '.join(devices)}) "
               f"from {args['db']}")
    if command == "eval-selector":
        t0 = time.perf_counter()
        result = evaluate(problems, args["folds"], args["trees"] or TREES, args["group"],
                          args["shuffles"], test)
        result.update({"arch": args["arch"], "database": os.path.basename(args["db"]),
                       "devices": devices, "trees": args["trees"] or TREES, "seconds": time.perf_counter() - t0})
        if test is not None:
            report.say(f"eval-selector: judged on the {len(test)} problems measured on "
                       f"{args['test_device']}, by models trained on {', '.join(devices)}")
        for line in evaluation_table(result):
            print(line)
        if result["selection_ms"] is None:
            report.say("eval-selector: no model picked: the training problems hold none of the "
                       "judged problems' directions, and each took the rule")
        else:
            report.say(f"eval-selector: selection {result['selection_ms']:.2f} ms per problem "
                       f"(median; the slowest {result['selection_ms_max']:.2f} ms), "
                       f"{args['folds']} folds by {args['group']} in {result['seconds']:.0f} s")
        if "shuffled" in result:
            shuffled = result["shuffled"]
            report.say(f"eval-selector: the selector's mean / P10 / min averaged over "
                       f"{shuffled['assignments']} assignments of the {args['group']}s to folds "
                       f"(the table's and {len(shuffled['seeds'])} seeded): " + "; ".join(
                           f"{name} " + " / ".join(f"{100 * one[k]:.2f}%" for k in ("mean", "p10", "min"))
                           for name, one in shuffled["families"].items()
                           if name in ("overall",) + DIRECTIONS))
        top = result.get("shuffled", result)["timed_top"]
        if all("overall" in one for one in top.values()):
            report.say("eval-selector: the best measured of the model's first K (tune --top K), "
                       "mean / P10 / min" + (" averaged likewise" if "shuffled" in result else "")
                       + ": " + "; ".join(f"K={k} " + " / ".join(
                           f"{100 * one['overall'][w]:.2f}%" for w in ("mean", "p10", "min"))
                           + " (lowest direction min "
                           + f"{100 * min(one[d]['min'] for d in DIRECTIONS if d in one):.1f}%)"
                           for k, one in top.items()))
        error = result["prediction_error"]
        if error["count"]:
            report.say(f"eval-selector: the predicted TFLOPS of a pick is off its measured TFLOPS "
                       f"by {100 * error['median']:.0f}% (median), {100 * error['p90']:.0f}% (P90)")
        if args["json"]:
            try:
                report.write_json(args["json"], result)
            except OSError as e:
                raise ConvgenError(f"cannot write '{args['json']}': {e.strerror}", field="json") from None
        return 0
    t0 = time.perf_counter()
    boosters = train(problems, args["trees"] or TREES, warm)
    trees = max(b.num_trees() for b in boosters["speed"].values())
    # the families where the rule beat or tied the model in cross-validation keep the rule
    keep_rule = rule_families(_cross_validate(problems, args["folds"], args["trees"] or TREES,
                                              False)[0]) if len({p.shape for p in problems}) >= args["folds"] else []
    meta = {"arch": args["arch"], "problems": len(problems), "shapes": shapes, "rows": rows,
            "trees": trees, "rank_trees": boosters["rank"].num_trees(),
            "directions": sorted(boosters["speed"]), "trained_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()),
            "database": os.path.basename(args["db"]),
            "devices": devices,
            "warm_start": os.path.basename(args["warm_start"]) if warm else None,
            "rule_families": keep_rule,
            # a problem of another type or channel order keeps the rule: the model knows none
            "coverage": sorted({coverage(p.problem) for p in problems})}
    Model.of(boosters, meta).save(out)
    report.say(f"train-selector: {meta['rank_trees']} ranking trees, {trees} speed trees per "
               f"direction ({', '.join(meta['directions'])}) in "
               f"{time.perf_counter() - t0:.1f} s "
               f"-> {out} ({os.path.getsize(out) // 1024} KiB); the rule kept for: "
               f"{', '.join(keep_rule) or 'no family'}")
    return 0


def features_markdown() -> str:
    """docs/selector-features.md (scripts/gen-docs): the feature table, from FEATURES."""
    out = ["# The selector's features", "",
           "Generated from `tools/convtune/selector.py` (`FEATURES`) by `scripts/gen-docs`; "
           "docs/config-selection.md says how they are used. One row per (problem, config); "
           "the model's columns are in this order.", "",
           "| # | feature | meaning |", "| ---: | --- | --- |"]
    out += [f"| {i} | `{name}` | {doc} |" for i, (name, doc) in enumerate(FEATURES)]
    return "\n".join(out) + "\n"

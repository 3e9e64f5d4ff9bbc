"""The tuning space: the matrix-core configs `convgen tune` measures and the selector ranks
for a problem on a backend. Tiles, reduction step, pipeline depth and bwd_weight's split
vary; warps follow the tile (8 from 128x128 up), as in the default rule; a tile much larger
than the problem's GEMM is left out. The descriptor kernels' forms (persistent, stream-K,
tail, swap_ab) and folded problems (s2d) join where the problem and device take them; the
direct kernels' tiles (kernels/direct.py) go first for groups of few channels."""
from __future__ import annotations

from convgen.backend import Backend
from convgen.directions import blocks_span_taps
from convgen.kernels import s2d
from convgen.kernels.config import (FIELD_VALUES, MAX_CHAIN, MAX_DIRECT_TILE, MAX_SPLIT,
                                    KernelConfig, amd_options, choose, default_config, direct_taps,
                                    lds_bytes, min_block_k, narrow, next_pow2, swap_ab_refused,
                                    tma_refused, tma_split)
from convgen.kernels.geometry import (MAX_SHARED, channel_block, direct_channels, direct_pixels,
                                      persistent_fits, phased_shared, streamk_fits, views_per_phase)
from convgen.problem import ConvProblem

# The tuning space (convgen tune): tiles, reduction step, pipeline depth, and bwd_weight's
# split. Warps follow the tile (8 from 128x128 up), as in the default rule; a tile much
# larger than the problem's GEMM is left out.
SPACE_MN = ((64, 64), (64, 128), (128, 64), (128, 128), (128, 256), (256, 128))


SPACE_K = (32, 64)


SPACE_STAGES = {"cuda": (3, 4), "hip": (2, 3), "interpreter": (1,)}


SPACE_SPLIT = (1, 4, 16, 64)


# The direct kernels' tiles: pixels of a row by channels, and for fwd and bwd_data 1 or 4
# rows a program; warps follow the tile (a thread sums 16 outputs; bwd_weight 64 partial
# sums), and half as many; bwd_weight's parts the rule's, a quarter and four times as many
DIRECT_SIDES = (8, 16, 32, 64, 128)
DIRECT_ROWS = (1, 4)


def _vary(base: KernelConfig, **changes) -> KernelConfig:
    """dataclasses.replace without its field checks or the frozen class's per-field
    __init__, at a tenth of its cost: a selection builds the space of every run
    (selector.py's 1 ms budget). Every name in `changes` is a field."""
    cfg = object.__new__(KernelConfig)
    cfg.__dict__.update(base.__dict__, **changes)
    return cfg


def configs(problem: ConvProblem, backend: Backend) -> list[KernelConfig]:
    """The matrix-core configs `convgen tune` measures and the selector ranks for a problem
    on a backend, in a fixed order (the default rule's config first). On AMD each tile comes
    with its compile options varied (_amd_space)."""
    m, _, r = problem.gemm
    n = problem.direction.tile_n(problem)
    # the largest tile kept along M and N: a tile much larger than the GEMM is left out
    m_cap, n_cap = max(64, next_pow2(m)), max(64, next_pow2(n))
    base = choose(problem, backend, True)
    out = [base]
    seen = {FIELD_VALUES(base)}

    def add(cfg: KernelConfig) -> None:
        # by the fields' values, hashed once (the dataclass's own hash is the Python-level
        # tuple of them, taken for the lookup and again for the insert)
        values = FIELD_VALUES(cfg)
        if values not in seen:
            seen.add(values)
            out.append(cfg)
    if base.direct:
        # the direct tiles first, after the rule's: where they apply they are the ones to beat
        for cfg in _direct_space(problem, base):
            add(cfg)
        # the GEMM kernels' variations start from their own rule
        base = _vary(default_config(problem, backend, True, gemm=True),
                     max_num_imprecise_acc=base.max_num_imprecise_acc)
    # AMD: the compile options vary at one split, the one nearest the rule's
    varied_split = min(SPACE_SPLIT, key=lambda v: abs(v - base.split))
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
                                tail=None, direct=None)
                    if backend.is_hip:
                        for amd in _amd_space(cfg, problem, backend, split == varied_split):
                            add(amd)
                    else:
                        add(cfg)
    if not tma_refused(problem, backend):
        for cfg in _tma_space(problem, base):
            add(cfg)
    for cfg in _s2d_space(problem, backend):
        add(cfg)
    return out


def _direct_space(problem: ConvProblem, base: KernelConfig) -> list[KernelConfig]:
    """The direct kernels' tiles for a problem they take (DIRECT_SIDES), none much wider
    than a row or the channels."""
    _, width, _ = direct_pixels(problem)
    m_cap, n_cap = max(8, next_pow2(width)), max(16, next_pow2(direct_channels(problem)))
    taps = direct_taps(problem)
    splits, rows = (1,), DIRECT_ROWS
    if problem.direction.splits_reduction:
        parts = problem.n * problem.ho
        splits = tuple(dict.fromkeys(max(1, min(MAX_SPLIT, parts, v))
                                     for v in (base.split, base.split // 4, base.split * 4)))
        rows = (1,)
    out = []
    for bm in (1, 2, 4) + DIRECT_SIDES if taps > 1 else DIRECT_SIDES:
        for bn in DIRECT_SIDES[1:]:
            size = bm * bn * taps
            if bm > m_cap or bn > n_cap or size > MAX_DIRECT_TILE or size < 256:
                continue
            warps = max(1, min(8, size // (512 if taps == 1 else 2048)))
            for w in dict.fromkeys((warps, max(1, warps // 2))):
                for r in rows:
                    for split in splits:
                        out.append(_vary(base, block_m=bm, block_n=bn, block_k=r,
                                         num_warps=w, split=split))
    return out


def _amd_space(cfg: KernelConfig, problem: ConvProblem, backend: Backend,
               vary: bool = True) -> list[KernelConfig]:
    """A tile's AMD configs: the rule's compile options, then (`vary`, 2 stages) each varied
    on its own (waves_per_eu 0 or 2, never 1, which holds a 4-warp program to one wave a
    SIMD; 16x16 or 32x32 matrix instructions; kpack 2 on gfx942, which gfx950 ignores), and
    128x128 with 4 warps too. Stages LDS cannot hold are left out."""
    wide = cfg.block_m * cfg.block_n
    base = _vary(cfg, **amd_options(cfg.block_m, cfg.block_n))
    out = [base]
    if vary and cfg.num_stages == 2:
        out += [_vary(base, waves_per_eu=2 if base.waves_per_eu == 0 else 0),
                _vary(base, matrix_instr_nonkdim=32)]
        if backend.arch.startswith("gfx942"):
            out.append(_vary(base, kpack=2))
    if wide == 128 * 128:
        out.append(_vary(base, num_warps=4))
    have = backend.facts.shared_per_program if backend.facts else None
    return [c for c in out if have is None or lds_bytes(c, problem, backend) <= have]


def _s2d_space(problem: ConvProblem, backend: Backend) -> list[KernelConfig]:
    """Folded configs, for strided filters whose taps hold fewer channels than a block: the
    folded problem's space (its descriptor-kernel share alone where it has one)."""
    if not blocks_span_taps(problem) or problem.dtype.is_fp8:
        return []
    out = []
    for mode in (1, 2):
        if s2d.unsupported(problem, mode):
            continue
        inner = s2d.inner_problem(problem, mode)
        inner_space = configs(inner, backend)
        if not tma_refused(inner, backend):
            inner_space = [cfg for cfg in inner_space if cfg.tma]
        out += [_vary(cfg, s2d=mode) for cfg in inner_space]
    return out


def _tma_space(problem: ConvProblem, base: KernelConfig) -> list[KernelConfig]:
    """The descriptor kernels' share of the space: tiles and depth; bwd_weight's box of
    output pixels (block_k) and its split around the default's."""
    out = []
    if problem.direction.splits_reduction:
        # the largest tile kept along the filter gradient's K and C
        k_cap, c_cap = max(64, next_pow2(problem.k)), max(64, next_pow2(problem.c))
        phased = views_per_phase(problem)
        for bm, bn in ((64, 64), (128, 64), (64, 128), (128, 128)):
            if bm > k_cap or bn > c_cap:
                continue
            bn = narrow(problem.c, bn)
            for box in (64, 128):
                stages = 4 if box == 64 else 3
                if phased and phased_shared(problem, bm, bn, box, stages) > MAX_SHARED:
                    continue
                auto = tma_split(problem, bm, bn, box)
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
                out.append(_vary(base, block_m=bm, block_n=narrow(problem.c, bn), block_k=box,
                                 num_warps=warps, num_stages=stages, split=1, tma=1,
                                 streamk=per_sm))
        return out
    n = problem.direction.tile_n(problem)
    n_cap = max(64, next_pow2(n))   # the widest tile kept along N
    bk = channel_block(problem, 64)
    for bm, bn in SPACE_MN:
        if bn > n_cap:
            continue
        bn = narrow(n, bn)
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
    if problem.direction.tile_k(problem) >= 256 and channel_block(problem, 128) == 128:
        # 128-channel steps for long reductions: half the loop trips and wgmma waits (the
        # 1x1 layers of 1024 and 2048 channels trailed cuDNN by 0.71-0.79x with 64)
        for bm, bn, stages in ((128, 128, 2), (128, 128, 3), (128, 64, 3), (128, 64, 4),
                               (64, 128, 3), (64, 128, 4)):
            if bn > n_cap:
                continue
            cfg = _vary(base, block_m=bm, block_n=narrow(n, bn), block_k=128, num_stages=stages,
                        num_warps=8 if bm * bn >= 128 * 128 else 4, split=1, tma=1)
            out.append(cfg)
            if persistent_fits(problem) and (bm, bn) == (128, 128):
                out.append(_vary(cfg, persistent=1))
    if problem.direction.tail and problem.gemm[2] >= 1024:
        # large tiles with the leftover wave shared out (`tail`). H100, 3x3 512->512 7x7 fwd,
        # batch 256: a 128x256 tile takes ~65 us whether 56 or 98 run at once, so its
        # 196 tiles took two waves (0.130 ms) for 1.48 waves of work; long reductions only,
        # where the parts' fp32 round trip is small beside the tile's steps
        for bm, bn, step, stages, tail in ((128, 256, 64, 3, 2), (128, 256, 64, 3, 4),
                                            (256, 128, 64, 3, 2), (128, 128, 128, 3, 2)):
            if bn > n_cap or channel_block(problem, step) != step:
                continue
            out.append(_vary(base, block_m=bm, block_n=narrow(n, bn), block_k=step,
                             num_stages=stages, num_warps=8, split=1, tma=1, tail=tail))
    if persistent_fits(problem):
        # persistent programs won on 1x1 filters (H100, ResNet-50: 128x256 tiles, 3 stages,
        # up to 1.3x the best above); 128-column tiles for narrow outputs. Four stages of
        # 128x256 need 240 KB of shared memory, more than an H100 has
        for bn in (128, 256):
            if bn > max(128, next_pow2(n)):
                continue
            whole = _vary(base, block_m=128, block_n=narrow(n, bn), block_k=bk, num_warps=8,
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

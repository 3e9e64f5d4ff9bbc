"""How the kernels cut a problem, from the problem alone: which problems the descriptor
kernels take (and why not), the boxes of whole pixels they copy and the grid those boxes
tile, the phase views of a strided input, and how bwd_weight's reduction is split into parts
(pointer kernel), boxes (descriptor kernel) or stream-K steps. Pure arithmetic on a
ConvProblem and a config's fields: the default rule (config.py), the launches (tma.py,
conv_bwd_weight.py), the tuning space and the selector's features all read it here."""
from __future__ import annotations

import functools

from convgen.directions import blocks_span_taps
from convgen.problem import ConvProblem

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
        if p.direction.phase_views == "one":
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
            and p.direction.phase_views != "each")


def persistent_fits(p) -> bool:
    """The directions with a persistent descriptor kernel: fwd, and bwd_data whose grid is
    one tile per program (stride 1)."""
    return p.direction.persistent and (p.direction.phase_views != "each"
                                       or (p.stride_h, p.stride_w) == (1, 1))


def streamk_fits(p) -> bool:
    """The problems with a stream-K descriptor kernel: bwd_weight on one input descriptor
    (stride 1, a strided view or the phase view). fwd had one: on the H100 it was never the
    fastest (3x3 512->512 7x7: 0.122 against 0.120 ms) and one 128x256 config gave wrong
    results there (docs/conv-benchmark.md)."""
    return p.direction.streamk and not views_per_phase(p)


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
            and p.direction.phase_views != "each"
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
    return (p.direction.phase_views == "one" and (p.stride_h, p.stride_w) != (1, 1)
            and not strided_view(p))


def channel_block(p, want: int) -> int:
    """want, or for a strided fwd on the descriptor kernels the largest power of two up to
    it that divides C (phase_fwd)."""
    return min(want, p.c & -p.c) if phase_fwd(p) else want


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


MAX_PHASE_STRIDE = 2   # four phase views at most: the kernels take four descriptors


def bwd_weight_parts(p, cfg) -> tuple[int, int]:
    """(parts, boxes per part) of bwd_weight's reduction over output-pixel boxes."""
    boxes = pixel_boxes(p, cfg.block_k)
    per = cdiv(boxes, min(cfg.split, boxes))
    return cdiv(boxes, per), per


def streamk_steps(p, cfg, units: int) -> tuple[int, int, int, int]:
    """(programs, steps per program, tiles, steps per tile) of bwd_weight's stream-K launch
    on a device of `units` SMs: cfg.streamk programs per SM share the tiles' reduction steps
    (boxes of output pixels)."""
    tiles = cdiv(p.k, cfg.block_m) * cdiv(p.c, cfg.block_n) * p.y * p.x
    tile_steps = pixel_boxes(p, cfg.block_k)
    work = tiles * tile_steps
    steps = cdiv(work, min(work, cfg.streamk * units))
    return cdiv(work, steps), steps, tiles, tile_steps


def tail_programs(cfg, tiles: int, units: int) -> tuple[int, int]:
    """(programs, whole-tile programs) of a `tail` launch on a device of `units` SMs: the
    tiles that fill whole waves of one program per SM, then cfg.tail programs per tile left."""
    full = tiles // units * units
    return full + (tiles - full) * cfg.tail, full


def split_parts(p, cfg) -> tuple[int, int]:
    """(split, r_chunk): how many parts the reduction is cut into, and each part's length
    (a multiple of block_k, so no tile straddles two parts; no part is empty)."""
    # config.cdiv, not triton.cdiv (a JIT-function call, 3 us): choosing a config asks this
    # for every candidate
    _, _, r = p.gemm
    r_chunk = cdiv(cdiv(r, cfg.split), cfg.block_k) * cfg.block_k
    return cdiv(r, r_chunk), r_chunk


def direct_channels(p) -> int:
    """The flat channels a direct kernel's tile (kernels/direct.py)'s columns count: output channels for fwd and
    bwd_weight, input channels for bwd_data."""
    return p.g * (p.c if p.direction.name == "bwd_data" else p.k)


def direct_pixels(p) -> tuple[int, int, int]:
    """(rows, columns, images) of the pixels a direct fwd or bwd_data tile walks: the
    output's for fwd, the input's for bwd_data; bwd_weight's parts cut the output's rows."""
    if p.direction.name == "bwd_data":
        return p.hi, p.wi, p.n
    return p.ho, p.wo, p.n


def direct_taps(p) -> int:
    """The filter taps a direct tile holds at once: bwd_weight sums every tap of its pixels
    together (a power of two >= y * x), fwd and bwd_data one at a time."""
    return 1 << (p.y * p.x - 1).bit_length() if p.direction.splits_reduction else 1


def direct_parts(p, cfg) -> tuple[int, int]:
    """(parts, rows per part): how the direct bwd_weight kernel (kernels/direct.py) cuts the
    output's n * ho image rows into at most cfg.split parts, none empty."""
    rows = p.n * p.ho
    per = cdiv(rows, max(1, min(cfg.split, rows)))
    return cdiv(rows, per), per


def loop_steps(p, cfg, use_dot: bool) -> int:
    """The loop steps a run's kernel launches take, summed over their programs: what the
    interpreter's time follows (it runs one program at a time, each step a handful of
    whole-tile operations). The GEMM kernels step through the reduction in each tile (one
    element a step on the FMA path, block_k on matrix cores); the direct kernels walk image
    rows, a step per per-group channel and tap (bwd_weight: all taps at once); a 3-D
    problem launches its 2-D depth slices' kernel once per filter depth tap. The
    descriptor kernels and the fold count as the GEMM kernels: an estimate."""
    q = p.depth_slice() if p.is_3d else p
    if cfg.direct:
        if q.direction.name == "bwd_data":
            steps = q.n * q.hi * cdiv(q.wi, cfg.block_m) * cdiv(q.g * q.c, cfg.block_n) * q.k * q.y * q.x
        else:
            steps = q.n * q.ho * cdiv(q.wo, cfg.block_m) * cdiv(q.g * q.k, cfg.block_n) * q.c
            steps *= 1 if q.direction.splits_reduction else q.y * q.x
    else:
        m, n, r = q.gemm
        steps = (cdiv(m, cfg.block_m) * cdiv(n, cfg.block_n) * q.g
                 * cdiv(r, cfg.block_k if use_dot else 1))
    return steps * (p.z if p.is_3d else 1)


def split_workspace(p, cfg) -> int:
    """fp32 elements of the split-K workspace (0 when the GEMM writes the output itself)."""
    split, _ = split_parts(p, cfg)
    return 0 if split == 1 else p.g * split * p.k * p.gemm[1]

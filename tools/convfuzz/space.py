"""What the fuzzer draws: a case is a convgen command line (its flags, without the program
name), so a failing case is already the RUN line of a lit test.

The strategy covers the space the suite supports: the three directions, every element type
the device runs (i8 forward only), 1-D, 2-D and 3-D problems, any layout permutation (with
or without `g`, spatial dimensions as letters or rocMLIR's digits), groups, one-sided
padding (also wider than the filter), stride, dilation, batch, the kernel path (matrix
cores or FMA), either reference, data ranges, and a tile config from the device's space
(convtune.space, the space `convgen tune` measures) or the rule's.

Some kernels take only a narrow corner of that space, which free draws seldom hit: the
descriptor kernels and the stride fold (one group, channels last, 16-bit floats, the
matrix-core path, a tma or s2d config) and the direct kernels (groups of at most 8
channels). A case is drawn in one of three forms: free, or shaped for one of those kernel
families on purpose.

On the interpreter a case's time follows the loop steps its kernel launches run (a step
is a few whole-tile operations, a few milliseconds): `Limits.steps` bounds them
(geometry.loop_steps), so that the search spends its time on many small cases rather than
a few slow ones.

hypothesis shrinks what it draws toward the simplest choice: integers toward their
minimum, a list's choice toward its first entry, a permutation toward the order given.
So every list here puts the plain case first (the free form, forward, f32, the default
layouts, no padding, stride 1, the FMA path, the CPU reference, the rule's config) and a
shrunk failure keeps only what it needs.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from convgen import dtypes
from convgen.backend import Backend
from convgen.errors import ConvgenError
from convgen.kernels.geometry import cdiv, loop_steps

DIRECTIONS = ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight")
TYPES = ("f32", "f16", "bf16", "i8", "fp8_e4m3", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz")
# the logical letters of each tensor without `g`, spatial dimensions outermost first, and
# how rocMLIR numbers them (run_flags._DIGITS)
LETTERS = {"input": ("n", "c", "d", "h", "w"), "filter": ("k", "c", "z", "y", "x"),
           "output": ("n", "k", "d", "h", "w")}
DIGIT = {"d": "2", "h": "0", "w": "1", "z": "2", "y": "0", "x": "1"}
# the data a run draws: the default range, the fp16 study's range away from zero, integers
DATA = {"default": (), "away": ("-rand_min", "1", "-rand_max", "3", "-rand_both_signs"),
        "int": ("-rand_type", "int")}
REFERENCES = {"cpu": ("-pv",), "gpu": ("-pv_with_gpu",), "both": ("-pv", "-pv_with_gpu")}
LAYOUT_STYLES = ("logical", "channels last", "any")
# how a case is drawn: freely, or shaped for the direct kernels or the descriptor kernels
FORMS = ("free", "direct", "descriptor")
DESCRIPTOR_TYPES = ("f16", "bf16")
DIRECT_CHANNELS = 8   # per group: kernels.config.MAX_GROUP_CHANNELS (test_fuzz checks it)
FLAG_OF_LAYOUT = {"input": "-in_layout", "filter": "-fil_layout", "output": "-out_layout"}


@dataclass(frozen=True)
class Limits:
    """How large a drawn problem may be. The defaults keep a case of the interpreter under
    about a second; a GPU takes larger ones in the same time."""
    batch: int = 3
    groups: int = 4
    channels: int = 24         # per group, input and output (the direct kernels take groups
                               # of up to 8, the GEMM kernels the rest)
    size: int = 13             # an input side
    filter: int = 5
    stride: int = 3
    dilation: int = 3
    padding: int = 4           # each side
    macs: int = 200_000        # multiply-adds of the whole convolution (the step bound
                               # keeps the interpreter's FMA and direct kernels to far fewer)
    elements: int = 20_000     # of each tensor
    pixels: int = 256          # output pixels of the batch: bwd_weight's reduction (the
                               # step bound keeps the FMA path's walk of it short)
    steps: int | None = 500    # the kernels' loop steps (interpreter_steps); None: none


INTERPRETER_LIMITS = Limits()
GPU_LIMITS = Limits(batch=8, groups=8, channels=48, size=40, filter=7, macs=50_000_000,
                    elements=2_000_000, pixels=100_000, steps=None)


def types_of(backend: Backend, direction: str) -> list[str]:
    """The element types the device runs for a direction, f32 first."""
    return [t for t in TYPES if backend.type_unsupported(dtypes.TYPES[t]) is None
            and (t != "i8" or direction == "conv2d")]


def _axis(draw, st, lim: Limits, flat: bool, depth: bool = False) -> dict:
    """One spatial axis: input size, filter, stride, dilation, padding each side; a flat
    axis (a 1-D problem's height, a 2-D problem's depth) is 1 everywhere. A depth is at
    least 2 (convgen takes a depth of 1 everywhere as a 2-D problem) and half the other
    axes' sizes, so that 3-D problems fit the limits as often as the others."""
    if flat:
        return {"size": 1, "fil": 1, "stride": 1, "dil": 1, "pad_l": 0, "pad_r": 0}
    if depth:
        lim = Limits(**{**lim.__dict__, "size": max(2, lim.size // 2), "filter": min(3, lim.filter),
                        "padding": min(2, lim.padding)})
    fil = draw(st.integers(1, lim.filter))
    dil = draw(st.integers(1, lim.dilation)) if fil > 1 else 1
    stride = draw(st.integers(1, lim.stride))
    pad_l = draw(st.integers(0, lim.padding))
    pad_r = pad_l if draw(st.booleans()) is False else draw(st.integers(0, lim.padding))
    span = dil * (fil - 1) + 1
    # the smallest input that leaves one output, then up to `size` more
    least = max(2 if depth else 1, span - pad_l - pad_r)
    size = least + draw(st.integers(0, max(0, lim.size - least)))
    return {"size": size, "fil": fil, "stride": stride, "dil": dil, "pad_l": pad_l, "pad_r": pad_r}


def _out(a: dict) -> int:
    return (a["size"] + a["pad_l"] + a["pad_r"] - a["dil"] * (a["fil"] - 1) - 1) // a["stride"] + 1


def _layout(draw, st, tensor: str, dims: int, style: str) -> str:
    """The tensor's layout in a style: the logical order (nchw, kcyx, nkhw), channels
    last (nhwc, kyxc, nhwk: what the descriptor kernels need), or any permutation of the
    letters, shrinking toward the logical order; then `g` written out at a drawn place or
    left for convgen to put before the channels, and the spatial dimensions as letters or
    digits."""
    letters = [ch for ch in LETTERS[tensor] if dims == 3 or ch not in "dz"]
    if style == "logical":
        order = letters
    elif style == "channels last":
        order = letters[:1] + letters[2:] + letters[1:2]
    else:
        order = list(draw(st.permutations(letters)))
    if draw(st.booleans()):
        order.insert(draw(st.integers(0, len(order))), "g")
    if draw(st.booleans()):
        order = [DIGIT.get(ch, ch) for ch in order]
    return "".join(order)


def _channels(st, most: int):
    """A channel count up to `most`: any, or a multiple of 8 (the aligned rows the
    descriptor kernels and the wide loads need)."""
    if most < 8:
        return st.integers(1, most)
    return st.one_of(st.integers(1, most), st.integers(1, most // 8).map(lambda v: 8 * v))


def case_strategy(backend: Backend, limits: Limits = INTERPRETER_LIMITS, impl: str = "convgen",
                  configs=None, types=None, directions=None, references=REFERENCES["both"]):
    """The hypothesis strategy of a case: a tuple of convgen flags. `configs(problem,
    use_dot)` lists the tile configs a case may name (-perf_config); None or another
    implementation than convgen's: no config is named. `types`, `directions` and
    `references` (flags, REFERENCES) narrow the space (None: all of it)."""
    directions = [d for d in DIRECTIONS if not directions or d in directions]
    if types and not any(t in types for d in directions for t in types_of(backend, d)):
        raise ConvgenError(f"none of the types {', '.join(types)} runs here for "
                           f"{', '.join(directions)}", field="types")
    import hypothesis.strategies as st  # hypothesis: only the fuzzer needs it
    from hypothesis import assume  # hypothesis

    forms = [f for f in FORMS if f != "descriptor" or descriptors_possible(backend, types, configs, impl)]

    @st.composite
    def case(draw):
        form = draw(st.sampled_from(forms))
        direction = draw(st.sampled_from(directions))
        allowed = [t for t in types_of(backend, direction) if (not types or t in types)
                   and (form != "descriptor" or t in DESCRIPTOR_TYPES)]
        assume(allowed)
        dtype = draw(st.sampled_from(allowed))
        if form == "descriptor":
            # 2-D or 1-D (a 3-D problem runs the pointer kernels on its depth slices), one
            # group, the phase views' strides (up to 2)
            lim = replace(limits, stride=min(2, limits.stride), dilation=min(2, limits.dilation))
            dims = draw(st.sampled_from((2, 1)))
            g = 1
        else:
            lim = limits
            dims = draw(st.sampled_from((2, 1, 3)))
            g = draw(st.integers(2 if form == "direct" else 1, max(2, limits.groups)))
        n = draw(st.integers(1, limits.batch))
        axes = {"d": _axis(draw, st, lim, dims < 3, depth=True), "h": _axis(draw, st, lim, dims < 2),
                "w": _axis(draw, st, lim, False)}
        outs = [_out(a) for a in axes.values()]
        volume = math.prod(outs)
        taps = math.prod(a["fil"] for a in axes.values())
        inputs = math.prod(a["size"] for a in axes.values())
        assume(min(outs) >= 1 and (direction != "conv2d_bwd_weight" or n * volume <= limits.pixels))
        # the channels last, within what the sizes leave of the limits (drawn freely and
        # then rejected, most large draws would be thrown away)
        most = DIRECT_CHANNELS if form == "direct" else limits.channels
        c_most = min(most, limits.macs // (n * g * volume * taps),
                     limits.elements // (n * g * inputs), limits.elements // (g * taps))
        assume(c_most >= 1)
        if form == "descriptor":
            # whole 16-byte rows of input channels, or fewer channels than a row (what the
            # stride fold takes)
            c = draw(st.one_of(st.integers(1, c_most // 8).map(lambda v: 8 * v), st.integers(1, min(7, c_most)))
                     if c_most >= 8 else st.integers(1, c_most))
        else:
            c = draw(_channels(st, c_most))
        k_most = min(most, limits.macs // (n * g * c * volume * taps),
                     limits.elements // (n * g * volume), limits.elements // (g * c * taps))
        # the descriptor kernels' rows of output channels are whole 16-byte blocks
        assume(k_most >= (8 if form == "descriptor" else 1))
        k = draw(_channels(st, k_most) if form != "descriptor"
                 else st.integers(1, k_most // 8).map(lambda v: 8 * v))
        flags = ["--operation", direction, "-t", dtype]
        if impl != "convgen":
            flags += ["-impl", impl]
        style = "channels last" if form == "descriptor" else draw(st.sampled_from(LAYOUT_STYLES))
        for tensor in ("input", "filter", "output"):
            lay = _layout(draw, st, tensor, dims, style)
            flags += [FLAG_OF_LAYOUT[tensor], lay]
        flags += ["-batchsize", str(n), "-groupsize", str(g), "-in_channels", str(g * c),
                  "-out_channels", str(g * k)]
        for axis, name, fil in (("d", "d", "d"), ("h", "h", "h"), ("w", "w", "w")):
            a = axes[axis]
            if axis == "d" and dims < 3:
                continue
            flags += [f"-in_{name}", str(a["size"]), f"-fil_{fil}", str(a["fil"])]
            if a["stride"] != 1:
                flags += [f"-conv_stride_{name}", str(a["stride"])]
            if a["dil"] != 1:
                flags += [f"-dilation_{name}", str(a["dil"])]
            if a["pad_l"] == a["pad_r"]:
                if a["pad_l"]:
                    flags += [f"-padding_{name}", str(a["pad_l"])]
            else:
                flags += [f"-padding_{name}_l", str(a["pad_l"]), f"-padding_{name}_r", str(a["pad_r"])]
        data = draw(st.sampled_from(tuple(DATA)))
        flags += ["-rand", str(draw(st.integers(1, 999)))] + list(DATA[data])
        use_dot = form == "descriptor" or draw(st.booleans())
        if use_dot:
            flags.append("-x2")
        flags.append(draw(st.sampled_from(references)))
        if configs is not None and impl == "convgen":
            if form == "descriptor":
                # a descriptor kernel's config, or the stride fold's
                pick = draw(st.integers(0, 10**6))
                choices = [t for t in configs(problem_of(flags), True) if "tma=1" in t or "s2d=" in t]
                assume(choices)
            else:
                pick = draw(st.one_of(st.none(), st.integers(0, 10**6)))
                choices = configs(problem_of(flags), use_dot) if pick is not None else []
            if choices:
                flags += ["-perf_config", choices[pick % len(choices)]]
        if limits.steps is not None and impl == "convgen":
            assume(interpreter_steps(flags, backend) <= limits.steps)
        return tuple(flags)

    return case()


def descriptors_possible(backend: Backend, types, configs, impl: str) -> bool:
    """Whether the descriptor form can draw a case here: convgen's kernels with tile
    configs, a device with descriptors, a 16-bit float type among those asked for."""
    return (impl == "convgen" and configs is not None and backend.tma_unavailable is None
            and any(t in DESCRIPTOR_TYPES for t in (types or DESCRIPTOR_TYPES)))


def interpreter_steps(flags, backend: Backend) -> int:
    """The loop steps of a case's kernel launches (geometry.loop_steps), with the config
    its run takes: the cost Limits.steps bounds."""
    from convgen import cli, picks  # the whole front end: only the fuzzer's strategy needs it here
    config = cli.parse(list(flags))
    p = config.problem
    cfg, _ = picks.select_run(config, backend)
    steps = loop_steps(p, cfg, config.kernel.use_matrix_cores)
    if config.reference.validator == "gpu":
        # the GPU reference: programs of up to INTERPRETER_MAX_BLOCK written elements, each
        # walking its reduction one term a step
        from convgen.kernels.gpu_reference import INTERPRETER_MAX_BLOCK  # Triton: a kernel module
        written = p.elements(p.direction.writes)
        steps += cdiv(written, INTERPRETER_MAX_BLOCK) * p.flops // 2 // written
    return steps


def problem_of(flags) -> "object":
    """The ConvProblem a case poses (convgen's own parsing), or ConvgenError."""
    from convgen import cli  # the whole front end: only the fuzzer's strategy needs it here
    return cli.parse(list(flags)).problem


def tile_configs(backend: Backend):
    """`configs(problem, use_dot)` for case_strategy: the configs of the device's tuning
    space (convtune.space, the rule's first) that convgen takes for the path, as
    -perf_config text; on the FMA path smaller tiles of the rule's config join them. A
    3-D problem takes its depth slices' configs."""
    from convgen.kernels import config as kc  # Triton: the kernels' module
    from convtune import space  # the tuning lab's space: the fuzzer sits on top of both

    def configs(problem, use_dot: bool) -> list[str]:
        if problem.is_3d:
            # a 3-D problem runs its 2-D depth slices' pointer kernels (picks._select_3d):
            # the slices' configs, without the descriptor kernels or a fold
            problem = problem.depth_slice()
            candidates = [c for c in space.configs(problem, backend) if not (c.tma or c.s2d)]
        else:
            candidates = list(space.configs(problem, backend))
        if not use_dot:
            base = kc.default_config(problem, backend, False)
            if not base.direct:
                candidates += [replace(base, block_m=m, block_n=nn, block_k=kk)
                               for m in (16, 32, 64) for nn in (16, 32) for kk in (8, 16)]
        out = []
        for cfg in candidates:
            try:
                kc.validate(cfg, problem, backend, use_dot)
            except ConvgenError:
                continue
            text = cfg.describe()
            if text not in out:
                out.append(text)
        return out
    return configs

"""The CPU reference against torch's float64 conv, and its emulation options against naive loops.

The oracle here is torch.nn.grad.conv2d_input / conv2d_weight (and F.conv2d),
a different path from the reference's own unfold/gather GEMMs.
"""
import itertools
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from convgen.dtypes import elem_type
from convgen.errors import ConvgenError
from convgen.inputs import DataSpec, make_inputs
from convgen.problem import make_problem
from convgen.reference import batch_chunk, reference

IN_LAYOUTS = ["nchw", "nhwc", "ngchw", "nhwgc", "cnhw", "hwnc"]
FIL_LAYOUTS = ["kcyx", "kyxc", "yxck", "gkcyx", "gkyxc", "cyxk"]
OUT_LAYOUTS = ["nkhw", "nhwk", "ngkhw", "nhwgk", "knhw"]
PRIMES_AND_ONE = [1, 2, 3, 5, 7, 11, 13]


def torch_oracle(p, t):
    """Written tensor in logical order, float64, from torch (padding explicit, so asymmetric works)."""
    g, n = p.g, p.n
    pad = (p.pad_w_l, p.pad_w_r, p.pad_h_l, p.pad_h_r)
    hp, wp = p.hi + p.pad_h_l + p.pad_h_r, p.wi + p.pad_w_l + p.pad_w_r
    kw = dict(stride=(p.stride_h, p.stride_w), dilation=(p.dil_h, p.dil_w), groups=g)
    if "filter" in t:
        w = t["filter"].double().reshape(g * p.k, p.c, p.y, p.x)
    if "input" in t:
        xp = F.pad(t["input"].double().reshape(n, g * p.c, p.hi, p.wi), pad)
    if "output" in t:
        dy = t["output"].double().reshape(n, g * p.k, p.ho, p.wo)
    if p.direction.name == "fwd":
        return F.conv2d(xp, w, **kw).reshape(p.logical_shape("output"))
    if p.direction.name == "bwd_data":
        dxp = torch.nn.grad.conv2d_input((n, g * p.c, hp, wp), w, dy, **kw)
        dx = dxp[:, :, p.pad_h_l:p.pad_h_l + p.hi, p.pad_w_l:p.pad_w_l + p.wi]
        return dx.reshape(p.logical_shape("input"))
    dw = torch.nn.grad.conv2d_weight(xp, (g * p.k, p.c, p.y, p.x), dy, **kw)
    return dw.reshape(p.logical_shape("filter"))


def _rel_err(a, b):
    scale = b.abs().max().item()
    if scale == 0:   # e.g. bwd_data where every tap lands in the padding or between strides
        return 0.0 if not a.any() else float("inf")
    return (a - b).abs().max().item() / scale


def random_problem(rng: random.Random, direction=None, dtype=None):
    """A valid random geometry: groups (incl. depthwise), odd sizes, big strides, dilation, pads."""
    while True:
        d = direction or rng.choice(["fwd", "bwd_data", "bwd_weight"])
        t = dtype or rng.choice(["f32", "f16", "bf16"] + (["i8"] if d == "fwd" else []))
        g = rng.choice([1, 1, 2, 3, 4])
        c = rng.choice([1, 2, 3, 5])
        k = rng.choice([1, 2, 3, 4])
        if rng.random() < 0.15:
            g, c, k = rng.choice([3, 5, 8]), 1, 1   # depthwise
        y, x = rng.choice([1, 1, 2, 3, 4, 5]), rng.choice([1, 2, 3, 4, 5])
        s = (rng.choice([1, 1, 2, 3, 5]), rng.choice([1, 1, 2, 3, 5]))
        dil = (rng.choice([1, 1, 2, 3]), rng.choice([1, 1, 2]))
        pad = tuple(rng.choice([0, 0, 1, 2, 3]) for _ in range(4))
        lays = {"input": rng.choice(IN_LAYOUTS), "filter": rng.choice(FIL_LAYOUTS),
                "output": rng.choice(OUT_LAYOUTS)}
        try:
            return make_problem(direction=d, dtype=elem_type(t), n=rng.choice([1, 2, 3]), g=g,
                                c_total=g * c, k_total=g * k, hi=rng.choice(PRIMES_AND_ONE + [8, 10]),
                                wi=rng.choice(PRIMES_AND_ONE + [9]), y=y, x=x, stride=s,
                                dilation=dil, pad=pad, layouts=lays)
        except ConvgenError:
            continue   # empty output: draw again


GEOMETRIES = 240


@pytest.mark.parametrize("batch", range(8))
def test_random_geometries_match_torch(batch):
    rng = random.Random(1000 + batch)
    seen = set()
    for i in range(GEOMETRIES // 8):
        p = random_problem(rng)
        seen.add(p.direction.name)
        spec = DataSpec(seed=rng.randrange(1, 10**6))
        t = make_inputs(p, spec, "cpu")
        assert all(v.abs().max() > 0 for v in t.values())
        ref = reference(p, t)
        assert ref.dtype == torch.float64 and ref.shape == p.logical_shape(p.writes)
        err = _rel_err(ref, torch_oracle(p, t))
        assert err <= 1e-12, f"relative error {err:.3g} for {p.describe()}"
    assert seen == {"fwd", "bwd_data", "bwd_weight"}


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_chosen_edge_geometries(direction):
    """Cases a random draw may miss: stride larger than the filter, 1x1, everything 1, huge pads."""
    cases = [
        dict(hi=11, wi=7, y=2, x=1, stride=(5, 3), dilation=(1, 1), pad=(0, 3, 2, 0)),
        dict(hi=13, wi=13, y=1, x=1, stride=(3, 2), dilation=(1, 1), pad=(0, 0, 0, 0)),
        dict(hi=1, wi=1, y=1, x=1, stride=(1, 1), dilation=(1, 1), pad=(0, 0, 0, 0)),
        dict(hi=1, wi=2, y=3, x=3, stride=(2, 2), dilation=(2, 1), pad=(3, 2, 1, 3)),
        dict(hi=6, wi=5, y=3, x=2, stride=(1, 4), dilation=(3, 2), pad=(2, 2, 1, 0)),
    ]
    for i, geo in enumerate(cases):
        p = make_problem(direction=direction, dtype=elem_type("f32"), n=2, g=2, c_total=6,
                         k_total=4, layouts={"input": "nhwgc", "filter": "yxck", "output": "nhwk"},
                         **geo)
        t = make_inputs(p, DataSpec(seed=7 + i), "cpu")
        assert _rel_err(reference(p, t), torch_oracle(p, t)) <= 1e-12, p.describe()


def test_i8_forward_is_exact_integers():
    p = make_problem(direction="fwd", dtype=elem_type("i8"), n=2, g=2, c_total=6, k_total=4,
                     hi=9, wi=7, y=3, x=3, stride=(2, 1), pad=(1, 2, 0, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    t = make_inputs(p, DataSpec(seed=3, lo=-128, hi=127), "cpu")
    ref = reference(p, t)
    assert ref.dtype == torch.float64
    assert torch.equal(ref, ref.round())
    assert torch.equal(ref, torch_oracle(p, t))


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_layout_does_not_change_the_result(direction):
    """Same logical data in two layouts: bit-identical references."""
    geo = dict(direction=direction, dtype=elem_type("f16"), n=2, g=2, c_total=4, k_total=6,
               hi=7, wi=5, y=3, x=2, pad=(1, 0, 2, 1))
    q1 = make_problem(**geo)
    q2 = make_problem(**geo, layouts={"input": "hwnc", "filter": "yxck", "output": "nhwk"})
    assert q1.layouts != q2.layouts
    t1 = make_inputs(q1, DataSpec(seed=5), "cpu")
    t2 = {name: torch.empty(q2.physical_shape(name), dtype=v.dtype).permute(
        q2.to_logical_perm(name)).copy_(v) for name, v in t1.items()}
    assert torch.equal(reference(q1, t1), reference(q2, t2))


def test_inputs_are_left_untouched():
    p = make_problem(direction="bwd_weight", dtype=elem_type("f32"), n=2, g=1, c_total=3,
                     k_total=2, hi=5, wi=5, y=3, x=3)
    t = make_inputs(p, DataSpec(seed=1), "cpu")
    t["input"][0, 0, 0, 0, 0] = 2.0 ** -140   # an f32 subnormal
    before = {k: v.clone() for k, v in t.items()}
    reference(p, t, flush_subnormals=True, accumulate=4)
    assert all(torch.equal(before[k], t[k]) for k in t)


# ---- chunking ---------------------------------------------------------------------

@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_chunks_agree_with_one_chunk(direction):
    p = make_problem(direction=direction, dtype=elem_type("f16"), n=7, g=2, c_total=6, k_total=4,
                     hi=9, wi=8, y=3, x=3, stride=(2, 1), dilation=(1, 2), pad=(1, 2, 2, 0),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    t = make_inputs(p, DataSpec(seed=11), "cpu")
    assert batch_chunk(p, 2**40) == p.n and batch_chunk(p, 1) == 1
    whole = reference(p, t, max_temp_bytes=2**40)
    # a budget between: uneven chunks with a remainder
    between = next(b for b in (2**i for i in range(8, 40)) if 1 < batch_chunk(p, b) < p.n
                   and p.n % batch_chunk(p, b))
    for budget in (1, between):
        chunked = reference(p, t, max_temp_bytes=budget)
        assert _rel_err(chunked, whole) <= 1e-14
    assert _rel_err(whole, torch_oracle(p, t)) <= 1e-12


def test_chunk_size_bounds_memory():
    """The largest suite problem fits one sample at a time under the default budget,
    and a budget scales the chunk linearly."""
    p = make_problem(direction="fwd", dtype=elem_type("f16"), n=256, g=1, c_total=256,
                     k_total=256, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1))
    assert p.n * p.g * p.k * p.ho * p.wo == 205_520_896
    for d in ("fwd", "bwd_data", "bwd_weight"):
        q = make_problem(direction=d, dtype=elem_type("f16"), n=256, g=1, c_total=256,
                         k_total=256, hi=56, wi=56, y=3, x=3, pad=(1, 1, 1, 1))
        # about 80 MiB of temporaries a sample: one at a time by default, ~25 in 2 GiB
        assert batch_chunk(q) == 1
        assert 20 <= batch_chunk(q, 2**31) <= 30
        assert batch_chunk(q, 2 * 2**31) >= 2 * batch_chunk(q, 2**31)
        assert batch_chunk(q, 2**40) == q.n


# ---- accumulate=N ------------------------------------------------------------------

def _terms(p, t):
    """For each written element (logical order), its reduction terms (a, b) in the documented order,
    by explicit loops: fwd (c, y, x); bwd_data (k, y, x), unused taps as (0, 0); bwd_weight (n, ho, wo)."""
    T = {k: v.double().numpy() for k, v in t.items()}
    out = {}
    if p.direction.name == "fwd":
        x, w = T["input"], T["filter"]
        for n, g, k, ho, wo in itertools.product(*map(range, p.logical_shape("output"))):
            terms = []
            for c, fy, fx in itertools.product(range(p.c), range(p.y), range(p.x)):
                hi = ho * p.stride_h - p.pad_h_l + fy * p.dil_h
                wi = wo * p.stride_w - p.pad_w_l + fx * p.dil_w
                inside = 0 <= hi < p.hi and 0 <= wi < p.wi
                terms.append((x[n, g, c, hi, wi] if inside else 0.0, w[g, k, c, fy, fx]))
            out[n, g, k, ho, wo] = terms
    elif p.direction.name == "bwd_data":
        dy, w = T["output"], T["filter"]
        for n, g, c, hi, wi in itertools.product(*map(range, p.logical_shape("input"))):
            terms = []
            for k, fy, fx in itertools.product(range(p.k), range(p.y), range(p.x)):
                th, tw = hi + p.pad_h_l - fy * p.dil_h, wi + p.pad_w_l - fx * p.dil_w
                ho, wo = th // p.stride_h, tw // p.stride_w
                used = (th >= 0 and tw >= 0 and th % p.stride_h == 0 and tw % p.stride_w == 0
                        and ho < p.ho and wo < p.wo)
                terms.append((dy[n, g, k, ho, wo] if used else 0.0, w[g, k, c, fy, fx]))
            out[n, g, c, hi, wi] = terms
    else:
        x, dy = T["input"], T["output"]
        for g, k, c, fy, fx in itertools.product(*map(range, p.logical_shape("filter"))):
            terms = []
            for n, ho, wo in itertools.product(range(p.n), range(p.ho), range(p.wo)):
                hi = ho * p.stride_h - p.pad_h_l + fy * p.dil_h
                wi = wo * p.stride_w - p.pad_w_l + fx * p.dil_w
                inside = 0 <= hi < p.hi and 0 <= wi < p.wi
                terms.append((dy[n, g, k, ho, wo], x[n, g, c, hi, wi] if inside else 0.0))
            out[g, k, c, fy, fx] = terms
    return out


def naive_accumulate(p, t, block):
    """acc = fl32(acc + fl32(float64 sum of `block` consecutive products)), element by element."""
    res = torch.empty(p.logical_shape(p.writes), dtype=torch.float64)
    for pos, terms in _terms(p, t).items():
        acc = np.float32(0.0)
        for i in range(0, len(terms), block):
            s = 0.0
            for a, b in terms[i:i + block]:
                s += a * b
            acc = np.float32(acc + np.float32(s))
        res[pos] = float(acc)
    return res


def _exact_data_problem(direction, n=3):
    """fp16 data with |v| in [2^-8, 1]: every product is a multiple of 2^-36 below 1, so sums of
    fewer than 2^16 of them are exact in float64 in any order, while fp32 running sums round;
    emulations can be compared bit for bit."""
    p = make_problem(direction=direction, dtype=elem_type("f16"), n=n, g=2, c_total=6, k_total=6,
                     hi=5, wi=4, y=3, x=2, stride=(2, 1), dilation=(1, 2), pad=(1, 2, 2, 1),
                     layouts={"input": "nhwgc", "filter": "yxck", "output": "nkhw"})
    t = make_inputs(p, DataSpec(seed=4), "cpu")
    for v in t.values():
        v[v.abs() < 2.0 ** -8] = 0.5
    return p, t


@pytest.mark.parametrize("block", [1, 3, 4, 7])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_accumulate_matches_naive_loop(direction, block):
    p, t = _exact_data_problem(direction)
    want = naive_accumulate(p, t, block)
    got = reference(p, t, accumulate=block)
    assert torch.equal(got, want)
    # rounding happened: the emulation is not the float64 result
    assert not torch.equal(got, reference(p, t))


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_accumulate_one_is_a_sequential_fp32_sum(direction):
    """fp16 products are exact in fp32, so accumulate=1 is `acc += a*b` in fp32, term by term."""
    p, t = _exact_data_problem(direction, n=2)
    want = torch.empty(p.logical_shape(p.writes), dtype=torch.float64)
    for pos, terms in _terms(p, t).items():
        acc = torch.zeros((), dtype=torch.float32)
        for a, b in terms:
            acc = acc + torch.tensor(a, dtype=torch.float32) * torch.tensor(b, dtype=torch.float32)
        want[pos] = acc.double()
    assert torch.equal(reference(p, t, accumulate=1), want)


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_accumulate_whole_reduction_is_one_rounding(direction):
    p, t = _exact_data_problem(direction, n=2)
    exact = reference(p, t)
    got = reference(p, t, accumulate=10**6)
    assert torch.equal(got, exact.float().double())


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_accumulate_does_not_depend_on_chunks(direction):
    """bwd_weight blocks run across batch chunks (4 products a block, 3x5 per sample)."""
    p, t = _exact_data_problem(direction, n=5)
    assert p.ho * p.wo % 4
    whole = reference(p, t, accumulate=4, max_temp_bytes=2**40)
    assert torch.equal(reference(p, t, accumulate=4, max_temp_bytes=1), whole)
    assert torch.equal(whole, naive_accumulate(p, t, 4))


def test_accumulate_on_random_data_is_close():
    p = make_problem(direction="fwd", dtype=elem_type("f16"), n=2, g=1, c_total=32, k_total=8,
                     hi=6, wi=6, y=3, x=3, pad=(1, 1, 1, 1))
    t = make_inputs(p, DataSpec(seed=2), "cpu")
    exact = reference(p, t)
    emu = reference(p, t, accumulate=4)
    assert 0 < _rel_err(emu, exact) < 288 * 2.0 ** -24


def test_accumulate_rejects_zero():
    p, t = _exact_data_problem("fwd", n=1)
    with pytest.raises(ValueError):
        reference(p, t, accumulate=0)


# ---- flush_subnormals ----------------------------------------------------------------

SMALLEST_NORMAL = {"f16": 2.0 ** -14, "bf16": 2.0 ** -126, "f32": 2.0 ** -126}


def _flush_problem(direction, dtype):
    p = make_problem(direction=direction, dtype=elem_type(dtype), n=2, g=2, c_total=4, k_total=4,
                     hi=5, wi=5, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    return p, make_inputs(p, DataSpec(seed=9), "cpu")


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_flush_subnormals_acts_as_zero(direction, dtype):
    p, t = _flush_problem(direction, dtype)
    tiny = SMALLEST_NORMAL[dtype]
    a, b = p.reads
    # subnormals in both operands, and the smallest normal, which must survive
    t[a][0, 0, 0, 1, 1] = tiny / 4
    t[a][1, 1, 1, 2, 2] = -tiny * 0.75
    t[a][0, 1, 0, 0, 0] = tiny
    t[b][0, 0, 0, 0, 0] = -tiny / 2
    zeroed = {k: v.clone() for k, v in t.items()}
    for v in zeroed.values():
        v[v.abs() < tiny] = 0
    assert zeroed[a][0, 1, 0, 0, 0] == tiny and zeroed[a][0, 0, 0, 1, 1] == 0
    flushed = reference(p, t, flush_subnormals=True)
    assert torch.equal(flushed, reference(p, zeroed))
    if dtype == "f16":   # bf16/f32 subnormals vanish next to O(1) terms even in float64
        assert not torch.equal(reference(p, t), flushed)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_flush_subnormals_all_subnormal_operand(direction, dtype):
    """One operand entirely subnormal: flushed, the result is exactly zero; kept, it is not."""
    p, t = _flush_problem(direction, dtype)
    a = p.reads[0]
    t[a].mul_(SMALLEST_NORMAL[dtype] / 2)
    assert t[a].any() and (t[a].abs() < SMALLEST_NORMAL[dtype]).all()
    assert reference(p, t).any()
    assert not reference(p, t, flush_subnormals=True).any()


def test_flush_subnormals_with_accumulate():
    p, t = _exact_data_problem("fwd", n=1)
    t["input"][0, 0, 0, 0, 0] = 2.0 ** -20
    zeroed = {k: v.clone() for k, v in t.items()}
    zeroed["input"][0, 0, 0, 0, 0] = 0
    assert torch.equal(reference(p, t, accumulate=4, flush_subnormals=True),
                       reference(p, zeroed, accumulate=4))

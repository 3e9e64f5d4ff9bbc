"""3-D convolution (depth.py): the CPU reference against torch's own float64 conv3d and
its gradients (computed apart from the depth split), and the kernels of every direction,
both paths, against that reference, at odd sizes: depth padding, strides and dilations,
groups, depths the filter does not divide."""
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from convgen import dtypes
from convgen.backend import current
from convgen.inputs import make_inputs
from convgen.guards import empty_output
from convgen import picks
from convgen.kernels.launch import run_conv
from convgen.options import DataSpec
from convgen.problem import make_problem
from convgen.reference import reference

LAYOUTS = {"ncdhw": {"input": "ncdhw", "filter": "kczyx", "output": "nkdhw"},
           "ndhwc": {"input": "ndhwc", "filter": "kzyxc", "output": "ndhwk"}}
# (n, g, c, k, (d, h, w), (z, y, x), stride (d, h, w), dilation, padding (d_l, d_r, h, w))
CASES = {
    "plain": (2, 1, 3, 4, (4, 5, 5), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1, 1)),
    "strided": (1, 1, 5, 7, (7, 6, 5), (2, 3, 2), (2, 1, 2), (1, 1, 1), (1, 0, 1, 0)),
    "dilated_groups": (2, 2, 4, 6, (7, 5, 4), (3, 2, 2), (1, 2, 1), (2, 1, 1), (2, 1, 0, 1)),
}


def _problem(direction, case, layouts="ncdhw", dtype="f32"):
    n, g, c, k, (d, h, w), (z, y, x), (sd, sh, sw), (dd, dh, dw), (pdl, pdr, ph, pw) = CASES[case]
    return make_problem(direction=direction, dtype=dtypes.elem_type(dtype), n=n, g=g, c_total=c,
                        k_total=k, hi=h, wi=w, y=y, x=x, stride=(sh, sw), dilation=(dh, dw),
                        pad=(ph, ph, pw, pw), layouts=LAYOUTS[layouts],
                        depth=(d, z, sd, dd, pdl, pdr))


def _flat(t):
    """A logical (n, g, c, d, h, w) tensor as torch's (n, g*c, d, h, w)."""
    return t.reshape(t.shape[0], t.shape[1] * t.shape[2], *t.shape[3:])


def _torch_reference(p, t):
    """torch's float64 conv3d (and its input and weight gradients), padding applied
    explicitly so that it may differ before and after."""
    x = _flat(t["input"].double()) if "input" in t else None
    w = t["filter"].double() if "filter" in t else None
    w5 = w.reshape(p.g * p.k, p.c, p.z, p.y, p.x) if w is not None else None
    pad = (p.pad_w_l, p.pad_w_r, p.pad_h_l, p.pad_h_r, p.pad_d_l, p.pad_d_r)
    stride, dil = (p.stride_d, p.stride_h, p.stride_w), (p.dil_d, p.dil_h, p.dil_w)
    name = p.direction.name
    if name == "fwd":
        out = F.conv3d(F.pad(x, pad), w5, stride=stride, dilation=dil, groups=p.g)
        return out.reshape(p.logical_shape("output"))
    dy = _flat(t["output"].double())
    padded = (p.n, p.g * p.c, p.di + p.pad_d_l + p.pad_d_r, p.hi + p.pad_h_l + p.pad_h_r,
              p.wi + p.pad_w_l + p.pad_w_r)
    if name == "bwd_data":
        dxp = torch.nn.grad.conv3d_input(padded, w5, dy, stride=stride, dilation=dil, groups=p.g)
        dx = dxp[:, :, p.pad_d_l:p.pad_d_l + p.di, p.pad_h_l:p.pad_h_l + p.hi, p.pad_w_l:p.pad_w_l + p.wi]
        return dx.reshape(p.logical_shape("input"))
    xp = F.pad(x, pad)
    dw = torch.nn.grad.conv3d_weight(xp, (p.g * p.k, p.c, p.z, p.y, p.x), dy, stride=stride,
                                     dilation=dil, groups=p.g)
    return dw.reshape(p.logical_shape("filter"))


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
def test_the_cpu_reference_is_torchs_conv3d(direction, case):
    p = _problem(direction, case)
    t = make_inputs(p, DataSpec(seed=3), "cpu")
    ours = reference(p, t)
    theirs = _torch_reference(p, t)
    assert ours.shape == theirs.shape == p.logical_shape(p.writes)
    assert torch.allclose(ours, theirs, rtol=1e-12, atol=1e-12)
    assert ours.abs().max() > 0


# bwd_weight's two largest problems (15-20 s each) run in one layout each in the PR run,
# the other in nightly; the strided case still runs bwd_weight in both layouts.
@pytest.mark.parametrize("direction,case,layouts", [
    pytest.param(d, c, lay, marks=pytest.mark.nightly if (d, c, lay) in (
        ("bwd_weight", "plain", "ncdhw"), ("bwd_weight", "dilated_groups", "ndhwc")) else ())
    for d in ("fwd", "bwd_data", "bwd_weight") for c in CASES for lay in LAYOUTS])
def test_the_kernels_match_the_reference(direction, case, layouts):
    be = current()
    p = _problem(direction, case, layouts)
    dev = be.torch_device
    t = make_inputs(p, DataSpec(seed=5), dev)
    ref = _torch_reference(p, {k: v.cpu() for k, v in t.items()})
    for use_dot in (True, False):
        cfg, source = picks.select(p, be, use_dot, None, None, None)
        assert "once per filter depth tap" in source and not cfg.tma and not cfg.s2d
        out = empty_output(p, dev)
        run_conv(p, t, out, cfg, use_dot, be)
        # fp32 sums, rounded once: within what fp32 accumulation of this length allows
        assert torch.allclose(out.cpu().double(), ref, rtol=1e-5, atol=1e-5 * ref.abs().max()), (use_dot, cfg)


def test_a_wrong_depth_gather_is_caught():
    """Mutation check: shifting the depth each tap reads by one (an off-by-one in d(o, z))
    must move the kernel's result far from the reference."""
    from convgen import depth
    be = current()
    p = _problem("fwd", "strided")
    t = make_inputs(p, DataSpec(seed=9), be.torch_device)
    ref = reference(p, t)
    real = depth._depths
    try:
        depth._depths = lambda prob, z: real(prob, min(z + 1, prob.z - 1))
        out = empty_output(p, be.torch_device)
        cfg, _ = picks.select(p, be, True, None, None, None)
        run_conv(p, t, out, cfg, True, be)
    finally:
        depth._depths = real
    assert not torch.allclose(out.cpu().double(), ref, rtol=1e-3, atol=1e-3)


def test_3d_runs_end_to_end_and_refuses_what_it_cannot_do(tmp_path):
    line = ("--operation conv_bwd_weight -t f16 -fil_layout=gkc012 -in_layout=ngc012 -out_layout=ngk012 "
            "-batchsize=2 -in_channels=4 -out_channels=4 -in_d=4 -in_h=4 -in_w=4 -fil_d=3 -fil_h=3 "
            "-fil_w=3 --padding_d=1 --padding_h=1 --padding_w=1 -pv -rand 1 -x2").split()

    def run(*extra):
        return subprocess.run([sys.executable, "-m", "convgen", *line, *extra], capture_output=True,
                              text=True, timeout=600)
    ok = run()
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1] == "[1 1 1]", ok.stdout + ok.stderr
    assert "4x4x4 filter 3x3x3" in ok.stdout and "once per filter depth tap" in ok.stdout
    gpu_ref = run("-pv_with_gpu")
    assert gpu_ref.stdout.splitlines()[-1] == "[1 1 1]", gpu_ref.stdout
    refused = run("-perf_config", "tma=1")
    assert refused.returncode == 2 and "runs the pointer kernels on its 2-D depth slices" in refused.stderr
    db = tmp_path / "t.sqlite"
    tuned = subprocess.run([sys.executable, "-m", "convgen", "tune", "-db", str(db), "--max-configs",
                            "1", *line], capture_output=True, text=True, timeout=600)
    assert tuned.returncode == 2 and "3-D problems are not tuned" in tuned.stderr
    assert not db.exists()   # refused before the database was opened


def test_a_write_outside_a_depth_slice_fails_every_bit(monkeypatch):
    """Each tap writes into a guarded slice buffer; a stray write there (here made by hand,
    as a kernel bug would) is counted as the output's, not lost or corrupting the heap."""
    from convgen import cli, depth, driver
    real = depth.slice_out

    def dirty(q, dtype, device):
        part, guard = real(q, dtype, device)
        guard.buffer[-1] = 0   # one element just past the slice
        return part, guard
    monkeypatch.setattr(depth, "slice_out", dirty)
    line = ("--operation conv2d -t f16 -fil_layout=gkczyx -in_layout=ngcdhw -out_layout=ngkdhw "
            "-batchsize=1 -in_channels=2 -out_channels=3 -in_d=3 -in_h=4 -in_w=4 -fil_d=2 -fil_h=3 "
            "-fil_w=3 -pv -rand 1").split()
    v = driver.execute(cli.parse(line), say=lambda _: None).verdict
    assert v.bits == (0, 0, 0)
    outside = [f for f in v.findings if f.kind == "outside"]
    assert outside and outside[0].count == 2   # one per filter depth tap

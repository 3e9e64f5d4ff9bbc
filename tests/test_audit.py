"""`convgen audit`: the kernels an AMD GPU (or sm90) would launch for the lit PR set,
compiled on this CPU as a launch there specializes them (convaudit/audit.py)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import triton

HERE = os.path.dirname(os.path.abspath(__file__))
TRITON = tuple(int(v) for v in triton.__version__.split(".")[:2])
REPO = os.path.dirname(HERE)


def audit(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    return subprocess.run([sys.executable, "-m", "convgen", "audit", *args], capture_output=True,
                          text=True, cwd=REPO, env=env, timeout=timeout)


SUMMARY = re.compile(r"audit (\S+): (\d+) kernels, (\d+) spilling, (\d+) without matrix "
                     r"instructions, (\d+) at one program per CU$")


@pytest.mark.parametrize("target", ("gfx942", "gfx90a"))
def test_the_pr_set_on_amd_compiles_clean(target, tmp_path):
    """Every kernel the PR set would launch on an MI300X (gfx942) and an MI250X (gfx90a):
    none spills, every matrix-core kernel has MFMA instructions, no rule config runs one
    program a CU where LDS holds two, and the loads go through buffer instructions (the
    32-bit pointer range a real launch gives tensors under 2 GB)."""
    out = tmp_path / "kernels.json"
    done = audit("--target", target, "--quiet", "--json", str(out))
    last = done.stdout.strip().splitlines()[-1]
    m = SUMMARY.fullmatch(last)
    assert m, done.stdout[-2000:] + done.stderr[-2000:]
    assert (m.group(3), m.group(4), m.group(5)) == ("0", "0", "0"), last
    assert int(m.group(2)) >= 100 and done.returncode == 0
    kernels = json.loads(out.read_text())
    assert len(kernels) == int(m.group(2))
    dot = [k for k in kernels if k["matrix_path"]]
    assert dot and all(k["matrix"] for k in dot)
    assert {k["source"] for k in kernels} >= {"rule", "command line"}
    # a real launch's buffer loads; a global load where the compiler cannot prove a range.
    # Triton 3.6's AMD backend proves fewer ranges: gfx942, 3396 buffer and 1196 global
    # loads (845 of them in conv_fwd_kernel), where the pinned 3.9 keeps globals under a
    # tenth
    loads = {}
    for k in kernels:
        for kind, n in k["loads"].items():
            loads[kind.split("_")[0]] = loads.get(kind.split("_")[0], 0) + n
    assert loads["buffer"] > (10 if TRITON >= (3, 9) else 2) * loads.get("global", 0)


def test_a_spilling_kernel_fails_the_audit(tmp_path):
    """A 256x512 tile over 4 warps holds 512 fp32 sums a lane, the whole register file of
    a gfx942 SIMD lane: it spills (Triton 3.6 and 3.9 alike), and the audit names it and
    exits 1."""
    lines = tmp_path / "runs.lines"
    lines.write_text("# one forced config\n"
                     "--operation conv2d -t f16 --batchsize 2 --in_channels 64 --out_channels 512 "
                     "--in_h 16 --in_w 16 --fil_h 3 --fil_w 3 --padding_h 1 --padding_w 1 "
                     "--in_layout nhwc --fil_layout kyxc --out_layout nhwk -x2 "
                     "-perf_config block_m=256,block_n=512,block_k=32,num_warps=4,num_stages=2,"
                     "waves_per_eu=0\n")
    done = audit("--target", "gfx942", "--lines", str(lines))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "# spilling: conv_fwd_kernel" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == ("audit gfx942: 1 kernels, 1 spilling, 0 without "
                                                   "matrix instructions, 0 at one program per CU")


def test_depthwise_runs_the_direct_kernels_with_16_byte_loads(tmp_path):
    """A depthwise run on the matrix-core path takes the direct kernels (FMA: no matrix
    instructions expected of them), and on gfx942 they read the channels-last input 16 bytes
    at a time (buffer_load_dwordx4), the filter one element at a time, without spilling."""
    lines = tmp_path / "runs.lines"
    lines.write_text("".join(
        f"--operation {op} -t f16 -batchsize=64 -groupsize=144 -in_channels=144 "
        "-out_channels=144 -in_h=56 -in_w=56 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1 "
        "-in_layout=nhwc -fil_layout=kyxc -out_layout=nhwk -x2\n"
        for op in ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight")))
    done = audit("--target", "gfx942", "--lines", str(lines))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for kernel in ("direct_fwd_kernel", "direct_bwd_data_kernel", "direct_bwd_weight_kernel"):
        assert kernel in out
    assert out.count("buffer_load_dwordx4") == 3 and "matrix=-" in out
    assert out.strip().splitlines()[-1] == ("audit gfx942: 3 kernels, 0 spilling, 0 without "
                                            "matrix instructions, 0 at one program per CU")


def test_waves_per_eu_2_holds_a_128x128_tile_to_one_program_per_cu(tmp_path):
    """waves_per_eu=2 on a 128x128 tile: LLVM pads the registers to 2 waves a SIMD, one
    8-warp program a CU where LDS holds two; with waves_per_eu=0 (the rule's) the same
    tile fits two."""
    problem = ("--operation conv2d -t f16 --batchsize 64 --in_channels 256 --out_channels 256 "
               "--in_h 14 --in_w 14 --fil_h 3 --fil_w 3 --padding_h 1 --padding_w 1 "
               "--in_layout nhwc --fil_layout kyxc --out_layout nhwk -x2")
    lines = tmp_path / "runs.lines"
    lines.write_text("".join(f"{problem} -perf_config block_m=128,block_n=128,block_k=64,"
                             f"num_warps=8,num_stages=2,waves_per_eu={w}\n" for w in (2, 0)))
    out = tmp_path / "kernels.json"
    done = audit("--target", "gfx942", "--lines", str(lines), "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    kernels = json.loads(out.read_text())
    found = {int(re.search(r"waves_per_eu=(\d)", k["config"]).group(1)):
             (k["programs_per_unit"], k["two_fit_but_registers"], k["waves_per_simd"])
             for k in kernels}
    assert found[2][:2] == (1, True) and found[2][2] == 2
    assert found[0][:2] == (2, False) and found[0][2] >= 4
    assert all(k["matrix"] for k in kernels)


def test_bad_input_is_one_line():
    for args, said in ((("--target", "gfx1"), "--target"),
                       ((), "--target is required"),
                       (("--target", "gfx942", "--device", "NVIDIA H200"), "is a sm90, not a gfx942"),
                       (("--target", "gfx942", "--lines", "/no/such.lines"), "cannot read")):
        done = audit(*args, timeout=120)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("convgen: error:") == 1 and said in done.stderr
        assert "Traceback" not in done.stderr


def test_every_amd_arch_compiles_the_rules_kernels(tmp_path):
    """The rule's kernels of one 3x3 layer in each direction on MI100 (gfx908, the fp16
    study's GPU), MI200, MI300 and MI350: MFMA instructions of the arch's own shape, no
    spills, two programs a CU, buffer loads."""
    problem = ("-t f16 --batchsize 32 --in_channels 128 --out_channels 128 --in_h 28 --in_w 28 "
               "--fil_h 3 --fil_w 3 --padding_h 1 --padding_w 1 --in_layout nhwc "
               "--fil_layout kyxc --out_layout nhwk -x2")
    lines = tmp_path / "runs.lines"
    lines.write_text("".join(f"--operation {op} {problem}\n"
                             for op in ("conv2d", "conv2d_bwd_data", "conv2d_bwd_weight")))
    shapes = {"gfx908": "16x16x16f16", "gfx90a": "16x16x16f16", "gfx942": "16x16x16_f16",
              "gfx950": "16x16x32_f16"}
    for arch, shape in shapes.items():
        out = tmp_path / f"{arch}.json"
        done = audit("--target", arch, "--lines", str(lines), "--json", str(out))
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.strip().endswith("3 kernels, 0 spilling, 0 without matrix "
                                            "instructions, 0 at one program per CU")
        for k in json.loads(out.read_text()):
            assert k["matrix"] == [f"v_mfma_f32_{shape}"], (arch, k["matrix"])
            assert k["programs_per_unit"] >= 2 and k["source"] == "rule"
            assert any(kind.startswith("buffer_load") for kind in k["loads"])


def test_sm90_registers_come_from_ptxas(tmp_path):
    """--target sm90 compiles PTX and asks ptxas for the registers and spills: the rule's
    descriptor kernel of a 3x3 fwd uses wgmma, its registers counted (not 0), no spill."""
    lines = tmp_path / "runs.lines"
    lines.write_text("--operation conv2d -t f16 --batchsize 32 --in_channels 128 "
                     "--out_channels 128 --in_h 28 --in_w 28 --fil_h 3 --fil_w 3 --padding_h 1 "
                     "--padding_w 1 --in_layout nhwc --fil_layout kyxc --out_layout nhwk -x2\n")
    out = tmp_path / "sm90.json"
    done = audit("--target", "sm90", "--lines", str(lines), "--json", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    (k,) = json.loads(out.read_text())
    assert k["kernel"].endswith("tma_kernel") and any(m.startswith("wgmma") for m in k["matrix"])
    assert 32 <= k["regs"] <= 255 and k["scratch"] == 0 and k["programs_per_unit"] >= 1

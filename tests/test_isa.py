"""Which instructions each kernel path compiles to, on GPUs we do not have.

The matrix-core path must contain matrix instructions (v_mfma on AMD, mma or
wgmma on NVIDIA) and the FMA path and the GPU reference none, for every
direction; otherwise the -x2 switch would test nothing. Compiling needs
Triton's interpreter off, so the survey runs in its own process.
"""
import json
import os
import subprocess
import sys

import pytest

AMD = ["gfx90a", "gfx942", "gfx950"]
NVIDIA = ["sm90"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def compile_here(*args: str) -> subprocess.CompletedProcess:
    """`python ARGS` with this tree's convgen and Triton's interpreter off (so triton.compile
    cross-compiles for a GPU target), its output captured; asserts it exited 0."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.join(ROOT, "tools") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def compiled_once(tmp_path_factory, name: str, *args: str) -> str:
    """compile_here(*args)'s output, made once for the whole pytest run: the workers of
    pytest-xdist share the run's base folder, and the first to ask writes the file while
    the others wait on its lock (each survey is minutes of compiling on a 2-core machine)."""
    import fcntl
    shared = tmp_path_factory.getbasetemp().parent
    path = shared / f"{name}.out"
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            text = compile_here(*args).stdout
            path.with_suffix(".tmp").write_text(text)
            path.with_suffix(".tmp").rename(path)
        return path.read_text()


@pytest.fixture(scope="session")
def survey(tmp_path_factory):
    return json.loads(compiled_once(tmp_path_factory, "isa-survey", "-m", "convaudit.isa",
                                    "--json", "--targets", ",".join(AMD + NVIDIA)))


def _rows(survey, **match):
    rows = [r for r in survey if all(r[k] == v for k, v in match.items())]
    assert rows, f"no survey row for {match}"
    return rows


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_matrix_core_path_uses_matrix_instructions(survey, direction, target):
    for dtype in ("f16", "bf16"):
        (row,) = _rows(survey, kernel="conv", target=target, direction=direction, dtype=dtype,
                       path="dot")
        assert row["matrix"], f"{direction} {dtype} -x2 on {target}: no matrix instruction"
        if target in AMD:
            assert all(i.startswith("v_mfma") for i in row["matrix"])


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_fma_path_has_no_matrix_instructions(survey, direction, target):
    for row in _rows(survey, kernel="conv", target=target, direction=direction, path="fma"):
        assert row["matrix"] == [], row
        assert row["fma"], f"no FMA in the FMA path: {row}"


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_gpu_reference_is_fma_only(survey, direction, target):
    (row,) = _rows(survey, kernel="reference", target=target, direction=direction)
    assert row["matrix"] == [] and row["fma"], row


@pytest.mark.parametrize("target", AMD)
def test_fp32_dot_uses_fp32_mfma_on_amd(survey, target):
    for row in _rows(survey, kernel="conv", target=target, dtype="f32", path="dot"):
        assert any("f32" in i for i in row["matrix"]), row
        # xf32 (gfx942's default for fp32 dot) would show as an xf32 instruction
        assert not any("xf32" in i for i in row["matrix"]), row


def test_fp32_dot_on_nvidia_is_ieee_not_tf32(survey):
    # fp32 tl.dot defaults to tf32 on NVIDIA; the kernel asks for ieee.
    for row in _rows(survey, kernel="conv", target="sm90", dtype="f32", path="dot"):
        assert not row["tf32"] and row["matrix"] == [], row


def test_fp32_dot_on_mi300_is_f32_not_xf32(survey):
    # gfx942 has xf32 MFMA (tf32's kind); an ieee dot must use the f32 one
    for row in _rows(survey, kernel="conv", target="gfx942", dtype="f32", path="dot"):
        assert row["matrix"] and all(m.endswith("_f32") for m in row["matrix"]), row
        assert not any("xf32" in m for m in row["matrix"]), row


@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_i8_dot_uses_integer_matrix_instructions(survey, target):
    (row,) = _rows(survey, kernel="conv", target=target, dtype="i8")
    assert row["matrix"] and any("i8" in i or "s8" in i for i in row["matrix"]), row


@pytest.mark.parametrize("kernel", ["verify", "verify-finish"])
@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_verify_kernel_compiles_without_fused_float64(survey, target, kernel):
    """The device statistics must round as the CPU path does: no contraction into FMA.
    NVIDIA: no fma.rn.f64 at all. AMD: the division's own FMAs only, fewer than when the
    same kernel is compiled with fusion on (so the option reaches the code generator).
    Both kernels: the second recomputes each value to find the element with the maximum."""
    (row,) = _rows(survey, kernel=kernel, target=target)
    assert row["matrix"] == [], row
    assert row["f64_fmas"] < row["f64_fmas_if_fused"], row
    if target in NVIDIA:
        assert row["f64_fmas"] == 0, row


FP8_NATIVE = {  # target -> (type -> the matrix instruction's operand spelling when native)
    "sm90": {"fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2"},
    "gfx942": {"fp8_e4m3fnuz": "fp8_fp8", "fp8_e5m2fnuz": "bf8_bf8"},
    "gfx950": {"fp8_e4m3": "fp8_fp8", "fp8_e5m2": "bf8_bf8"},
}


@pytest.mark.parametrize("target", AMD + NVIDIA)
def test_fp8_claims_compile_and_reach_matrix_cores(survey, target):
    """Every fp8 type the backend accepts compiles on both paths; the dot path uses matrix
    instructions, the FMA path none. With fast accumulation the archs' own fp8
    instructions appear; AMD's are native either way. (convgen's default on NVIDIA,
    promotion after every instruction, is lowered by Triton 3.6 and 3.9 to an exact
    fp16 upcast and mma.sync on sm90; docs/fp8-tf32-h100.md.)"""
    rows = [r for r in survey if r["target"] == target and r["dtype"].startswith("fp8")]
    claimed = {r["dtype"] for r in rows if r["path"] != "unsupported"}
    assert "fp8_e4m3" in claimed and (target == "gfx90a") != ("fp8_e5m2" in claimed), rows
    for row in rows:
        if row["path"].startswith("dot"):
            assert row["matrix"], row
            native = FP8_NATIVE.get(target, {}).get(row["dtype"])
            if native and (row["path"] == "dot-fast" or target in AMD):
                assert any(native in i for i in row["matrix"]), row
        elif row["path"] == "fma":
            assert row["matrix"] == [] and row["fma"], row


# ---- load widths ----------------------------------------------------------------------

LOAD_TARGETS = ["sm90", "gfx90a", "gfx942"]


@pytest.fixture(scope="session")
def loads(tmp_path_factory):
    """`python -m convaudit.isa --loads`, parsed: {(direction, target): counts}."""
    text = compiled_once(tmp_path_factory, "isa-loads", "-m", "convaudit.isa", "--loads",
                         "--targets", ",".join(LOAD_TARGETS))
    out = {}
    for line in text.splitlines():
        direction, target, *counts = line.split()
        out[direction, target] = {k: int(v) for k, v in (c.split("=") for c in counts)}
    return out


@pytest.mark.parametrize("direction", ["fwd", "bwd_data", "bwd_weight"])
@pytest.mark.parametrize("target", LOAD_TARGETS)
def test_channels_last_loads_are_16_bytes_wide(loads, direction, target):
    # taps outside, channel blocks inside: each load is a contiguous run of channels
    row = loads[direction, target]
    assert row["narrow"] == 0 and row["wide"] > 0, row
    if target == "sm90":   # the loads feed the software pipeline through cp.async
        assert row["async"] == row["wide"], row


def test_load_counting_reads_each_form():
    from convaudit.isa import count_loads
    ptx = """
        ld.global.b16 %rs1, [%rd1];
        @%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd2 + 0 ];
        ld.global.L1::evict_last.v2.b32 { %r5, %r6 }, [ %rd3 + 0 ];
        cp.async.cg.shared.global [ %r74 + 0 ], [ %rd14 + 0 ], 0x10, %r75;
        cp.async.ca.shared.global [ %r76 + 0 ], [ %rd15 + 0 ], 4, %r77;
        cp.async.commit_group;
        cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];
        st.global.v4.b32 [ %rd9 + 0 ], { %r1, %r2, %r3, %r4 };
    """
    assert count_loads(ptx, "cuda") == {"wide": 3, "narrow": 3, "async": 3}
    amdgcn = """
        global_load_dwordx4 v[0:3], v[4:5], off
        global_load_ushort v1, v[2:3], off
        buffer_load_dwordx4 v[6:9], v10, s[0:3], 0 offen
        buffer_load_dword v11, v12, s[4:7], 0 offen lds
        global_store_dwordx4 v[4:5], v[0:3], off
    """
    assert count_loads(amdgcn, "hip") == {"wide": 2, "narrow": 2, "async": 1}


def test_cache_survey_counts_only_conv_kernels(tmp_path):
    # a real launch's cache: the loads the GPU runs, not compile_conv's imitation
    from convaudit.isa import cache_survey
    (tmp_path / "h1").mkdir()
    (tmp_path / "h1" / "conv_fwd_kernel.ptx").write_text(
        "ld.global.b16 %rs1, [%rd1];\ncp.async.cg.shared.global [ %r1 + 0 ], [ %rd2 + 0 ], 0x10, %r2;\n")
    (tmp_path / "h1" / "verify_stats.ptx").write_text("ld.global.b16 %rs1, [%rd1];\n")
    (tmp_path / "h2").mkdir()
    (tmp_path / "h2" / "conv_bwd_data_kernel.amdgcn").write_text("global_load_dwordx4 v[0:3], v[4:5], off\n")
    (tmp_path / "h2" / "conv_bwd_data_kernel.json").write_text("{}")
    rows = sorted(cache_survey(str(tmp_path)), key=lambda r: r["kernel"])
    assert [(r["kernel"], r["wide"], r["narrow"], r["async"]) for r in rows] == [
        ("conv_bwd_data_kernel", 1, 0, 0), ("conv_fwd_kernel", 1, 1, 1)]


def test_blocks_across_taps_compile_to_matrix_instructions():
    # the C = 3 stem's paths (FLAT_R, FLAT_N) on AMD and NVIDIA, cross-compiled here
    code = ("from convaudit.isa import CHANNELS_LAST, compile_conv, matrix_instructions\n"
            "for t in ('gfx90a', 'gfx942', 'sm90'):\n"
            "    for d in ('fwd', 'bwd_weight'):\n"
            "        c = compile_conv(d, 'f16', True, t, CHANNELS_LAST, channels=3)\n"
            "        print(d, t, len(matrix_instructions(c, t)))\n")
    proc = compile_here("-c", code)
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert len(rows) == 6 and all(int(n) > 0 for _, _, n in rows), proc.stdout


def test_bwd_weight_descriptor_kernels_wait_for_their_wgmma_each_step_on_sm90():
    # why: with groups left in flight at the loop's back edge, the H100's Triton 3.6 and
    # its ptxas loaded the next step's first operand into registers a wgmma still read
    # (convaudit/wgmma_hazard.py; tests/test_wgmma_hazard.py holds that SASS). The wait
    # must come before the loop's first load of that operand (ldmatrix .trans: the box is
    # transposed), in the split, the stream-K and the folded (s2d) kernel. The SASS scan's
    # column only shows the scan runs here: this machine's Triton and ptxas gave no hazard
    # even without the wait
    code = ("from convaudit.isa import CHANNELS_LAST, compile_conv\n"
            "from convaudit import wgmma_hazard\n"
            "for extra in ({'split': 1}, {'split': 2}, {'streamk': 1}, {'s2d': 2}):\n"
            "    perf = {'tma': 1, 'block_m': 128, 'block_n': 128, 'block_k': 64,\n"
            "            'num_warps': 4, 'num_stages': 4, **extra}\n"
            "    # s2d: the stem's strided 3-channel problem folded into a stride-1 one, whose\n"
            "    # kernel writes a tensor of its own\n"
            "    k = compile_conv('bwd_weight', 'f16', True, 'sm90', CHANNELS_LAST, perf_config=perf,\n"
            "                     channels=3 if 's2d' in extra else 128,\n"
            "                     stride=(2, 2) if 's2d' in extra else (1, 1))\n"
            "    ptx = k.asm['ptx']\n"
            "    wait = ptx.find('wgmma.wait_group.sync.aligned 0;')\n"
            "    first_load = ptx.find('ldmatrix.sync.aligned.m8n8.x4.trans')\n"
            "    print(sorted(extra)[0], 0 <= wait < first_load,\n"
            "          wgmma_hazard.register_operand(k.asm['ttgir']),\n"
            "          wgmma_hazard.find(k.asm['sass']) is None)\n")
    rows = [line.split() for line in compile_here("-c", code).stdout.splitlines()]
    assert rows == ([["split", "True", "True", "True"]] * 2 + [["streamk", "True", "True", "True"]]
                    + [["s2d", "True", "True", "True"]]), rows

"""convaudit/wgmma_hazard.py: the SASS scan for a register an in-flight wgmma still reads.

The two SASS files are the H100's (Triton 3.6, its ptxas 12.8) for bwd_weight's descriptor
kernel, 128x128 tiles of 64 pixels, 4 warps, 4 stages, split 1, before the per-step wait:
storing the fp16 result (`pipelined`: three wgmma groups left in flight at the loop's
back edge; 3 of 8 runs wrong at batch 16 on the GPU) and storing fp32 partials instead
(`serialized`: ptxas waited for each group; 0 of 16 wrong). Their TTGIR was the same."""
import os

import pytest

from convgen import backend
from convaudit import wgmma_hazard
from convaudit.wgmma_hazard import find, register_operand

SASS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "sass")


@pytest.fixture
def compiling(monkeypatch):
    """main as it runs outside the interpreter. Not delenv TRITON_INTERPRET: main's imports
    would then build the kernels as compiled JITFunctions in this process, and every later
    interpreter test here would fail calling them."""
    monkeypatch.setattr(backend, "interpreter_requested", lambda: False)


def _read(name: str) -> str:
    with open(os.path.join(SASS, name)) as f:
        return f.read()


def test_the_h100_kernel_that_gave_wrong_rows_has_the_hazard_and_its_twin_has_none():
    h = find(_read("bwd-weight-sm90-triton3.6-pipelined.sass"))
    assert h is not None
    # the top of the loop loads the next step's A fragment into R172, which the second
    # group of the last step (HGMMA ... R88, R172, ...) may still be reading
    assert h.register == 172 and h.writer.startswith("LDSM.16.MT88.4 R172")
    assert h.reader.startswith("HGMMA.64x128x16.F32 R88, R172,") and h.line == 547
    assert "R172" in h.describe() and "triton-lang/triton#9433" in h.describe()
    assert find(_read("bwd-weight-sm90-triton3.6-serialized.sass")) is None


def _sass(*lines: str) -> str:
    return "\n".join(["Function:k"] + [l if l.endswith(":") else f"--:-:-:-:1\t{l};"
                                       for l in lines])


LOOP_HEAD = ("LBB0:", "LDSM.16.MT88.4 R8, [R2]")


@pytest.mark.parametrize("wait,hazard", [("0x1", True), ("0x0", False)])
def test_groups_left_in_flight_at_a_back_edge_meet_the_next_trips_loads(wait, hazard):
    code = _sass(*LOOP_HEAD,
                 "WARPGROUP.ARRIVE",
                 "HGMMA.64x128x16.F32 R24, R8, gdesc[UR4].tnspB, R24, gsb0",
                 f"WARPGROUP.DEPBAR.LE gsb0, {wait}",
                 "@P0 BRA LBB0",
                 "EXIT")
    h = find(code)
    assert (h is not None) == hazard
    if hazard:
        assert h.register == 8 and h.line == 3   # the LDSM, after "Function" and the label


def test_a_write_after_the_wait_retires_the_group_is_safe_and_one_before_is_not():
    retired = _sass("HGMMA.64x128x16.F32 R24, R8, gdesc[UR4], R24, gsb0",
                    "WARPGROUP.DEPBAR.LE gsb0, 0x0",
                    "MOV R9, R3")
    assert find(retired) is None
    pending = _sass("HGMMA.64x128x16.F32 R24, R8, gdesc[UR4], R24, gsb0",
                    "IMAD.MOV.U32 R11, RZ, RZ, 0x1",        # R8..R11 is the fragment
                    "WARPGROUP.DEPBAR.LE gsb0, 0x0")
    assert find(pending).register == 11
    # a register outside the fragment, or one only read, is no hazard
    assert find(_sass("HGMMA.64x128x16.F32 R24, R8, gdesc[UR4], R24, gsb0",
                      "MOV R12, R8", "STS [R2], R9", "WARPGROUP.DEPBAR.LE gsb0, 0x0")) is None
    # compares and predicate logic write predicates only: the fragment they read is safe
    for reader in ("ISETP.GE.AND P0, PT, R9, 0x1, PT", "FSETP.GT.AND P1, P2, R10, RZ, PT",
                   "HSETP2.GT.AND P0, PT, R11, RZ, PT", "DSETP.GT.AND P0, PT, R8, RZ, PT",
                   "PLOP3.LUT P0, PT, P1, PT, PT, 0x80, 0x0", "R2P PR, R8, 0x7f",
                   "FCHK P0, R9, R10"):
        assert find(_sass("HGMMA.64x128x16.F32 R24, R8, gdesc[UR4], R24, gsb0", reader)) is None, reader


def test_shared_memory_wgmma_groups_count_in_the_waits():
    # two groups in flight: the register one is older; DEPBAR 0x1 retires it
    code = _sass("HGMMA.64x128x16.F32 R24, R8, gdesc[UR4], R24, gsb0",
                 "HGMMA.64x128x16.F32 R88, gdesc[UR8], gdesc[UR4], R88, gsb0",
                 "WARPGROUP.DEPBAR.LE gsb0, 0x1",
                 "LDSM.16.M88.2 R8, [R2]")
    assert find(code) is None
    code = code.replace("0x1", "0x2")
    assert find(code).register == 8


def test_wide_writes_reach_the_fragment_from_below():
    # LDSM .4 and 128-bit loads write four registers, .64 and CS2R two
    for writer, first in (("LDSM.16.M88.4 R6, [R2]", 8), ("LDS.128 R5, [R2]", 8),
                          ("LDS.64 R7, [R2]", 8), ("CS2R R7, SRZ", 8)):
        code = _sass("HGMMA.64x128x16.F32 R24, R8, gdesc[UR4], R24, gsb0", writer)
        assert find(code).register == first, writer
    assert find(_sass("HGMMA.64x128x16.F32 R24, R8, gdesc[UR4], R24, gsb0",
                      "LDS.64 R6, [R2]")) is None


def test_register_operand_reads_the_first_dot_operand_type():
    rs = ("%1 = ttng.warp_group_dot %a, %b, %acc {isAsync = true} : "
          "tensor<128x16xf16, #ttg.dot_op<{opIdx = 0}>> * !ttg.memdesc<16x128xf16> -> tensor<f32>")
    ss = ("%1 = ttng.warp_group_dot %a, %b, %acc {isAsync = true} : "
          "!ttg.memdesc<128x16xf16> * !ttg.memdesc<16x128xf16> -> tensor<f32>")
    assert register_operand(rs) and not register_operand(ss)
    assert not register_operand("tt.dot")
    assert wgmma_hazard.A_REGS == 4


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _survey(*args: str):
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.path.join(ROOT, "tools") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "convaudit.wgmma_hazard", *args],
                          capture_output=True, text=True, env=env, timeout=600)


def test_the_survey_compiles_a_databases_bests_for_sm90_and_scans_them(tmp_path):
    from convgen.dtypes import elem_type
    from convgen.problem import make_problem
    from convtune.tuning_db import TuningDB
    from convtune.keys import problem_key
    p = make_problem(direction="bwd_weight", dtype=elem_type("f16"), n=2, g=1, c_total=128,
                     k_total=128, hi=9, wi=9, y=3, x=3, pad=(1, 1, 1, 1),
                     layouts={"input": "nhwc", "filter": "kyxc", "output": "nhwk"})
    key = problem_key(p, "sm90", "NVIDIA H100 80GB HBM3", "3.6.0", "0123456789ab")
    db_path = str(tmp_path / "t.sqlite")
    text = ("block_m=128,block_n=128,block_k=64,num_warps=4,num_stages=4,split=1,group_m=8,"
            "tma=1")
    with TuningDB(db_path) as db:
        db.record(key, text, "ok", ms=0.1, tflops=100.0)
        db.set_best(key, text, 0.1, 100.0, "gpu reference [1 1 1]")
    rows = tmp_path / "rows.jsonl"
    proc = _survey("--bests", db_path, "-j", "1", "--json", str(rows))
    # the plumbing: this machine's Triton and ptxas give these kernels no hazard, with the
    # per-step wait or without (the H100's gave one without: tests above)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 kernels for sm90" in proc.stdout and "0 of them not compiled" in proc.stdout
    assert "0 with the hazard" in proc.stdout
    import json
    (row,) = [json.loads(line) for line in rows.read_text().splitlines()]
    assert row["config"] == text and row["register_operand"] and row["hazard"] is None


@pytest.mark.parametrize("args,lines,why", [
    ((), None, "nothing to compile"),
    (("--lines", "/no/such.lines"), None, "cannot read '/no/such.lines'"),
    (("--bests", "/no/such.sqlite"), None, "/no/such.sqlite"),
    (("--lines", "{lines}"), "# only a comment\n", "no problem to tune"),
    (("--lines", "{lines}"), "--operation conv2d -t f16 -in_layout='nhwc\n", "quotation"),
    (("--lines", "{lines}"), "--operation conv2d -t f99\n", "f99"),
    (("--lines", "{lines}", "--json", "/no/such/dir/rows.jsonl"),
     "--operation conv2d -t f16 -batchsize=1 -in_channels=64 -out_channels=64 -in_h=5 -in_w=5 -fil_h=3 -fil_w=3\n",
     "--json: cannot write '/no/such/dir/rows.jsonl'"),
])
def test_the_survey_refuses_bad_input_in_one_line(tmp_path, args, lines, why):
    path = tmp_path / "p.lines"
    if lines is not None:
        path.write_text(lines)
    proc = _survey(*(a.format(lines=path) for a in args))
    assert proc.returncode == 2 and why in proc.stderr, proc.stderr
    assert proc.stderr.startswith("wgmma-hazard: error: ") and proc.stderr.count("\n") == 1


@pytest.mark.usefixtures("compiling")
def test_a_survey_that_scanned_nothing_is_no_pass(monkeypatch, capsys, tmp_path):
    lines = tmp_path / "one.lines"
    lines.write_text("--operation conv2d -t f16 -batchsize=1 -in_channels=64 -out_channels=64 -in_h=5 -in_w=5 -fil_h=3 -fil_w=3\n")
    monkeypatch.setattr(wgmma_hazard, "survey", lambda items, jobs: (
        {"problem": "P", "config": text, "failed": "cuobjdump missing"} for _, text in items))
    assert wgmma_hazard.main(["--lines", str(lines)]) == 2
    captured = capsys.readouterr()
    assert "no kernel was compiled and scanned" in captured.err


@pytest.mark.usefixtures("compiling")
def test_the_survey_names_each_hazard_and_exits_1(monkeypatch, capsys, tmp_path):
    lines = tmp_path / "one.lines"
    lines.write_text("# a comment\n--operation conv2d_bwd_weight -t f16 -batchsize=2 -in_channels=64 "
                     "-out_channels=64 -in_h=5 -in_w=5 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1\n")

    def fake(items, jobs):
        assert items and all(source[0] == "lines" for source, _ in items)
        yield {"problem": "P", "config": items[0][1], "register_operand": True,
               "hazard": "ptxas writes R8 (...)"}
        yield {"problem": "P", "config": items[1][1], "register_operand": False, "hazard": None}
    monkeypatch.setattr(wgmma_hazard, "survey", fake)
    assert wgmma_hazard.main(["--lines", str(lines)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("P: ") and "ptxas writes R8" in out and "1 with the hazard" in out

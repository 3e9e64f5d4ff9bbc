"""The verifier's power, in the interpreter: every mutant of scripts/verifier-power is
killed by at least two PR cases (or the ISA checks), and the correct kernels raise no
false alarm on the suite or on a census of seeded runs. The full run, with the GPU's
precision mutants and 1000 seeds, is `scripts/device-run power` (docs/verifier-power.md)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


# The PR run of pytest: four mutants, one per way a bug is caught (a bit over its threshold,
# the guard band around the output, the bias check, the folded strided path), against five
# small PR files that kill each twice, and 20 seeds. Every mutant against the whole PR set
# and 150 seeds, half an hour of the 2-core machine, is the nightly case.
SMOKE_MUTANTS = ("fwd-padding-mask-off-by-one", "fwd-out-of-bounds-write", "fwd-round-toward-zero",
                 "s2d-filter-shift-lost")
SMOKE_FILES = ("compat/rocmlir_gen_spellings.mlir", "fwd/bf16_nhwc_kyxc_pad1.mlir",
               "fwd/f16_nchw_kcyx_1x1_stride2.mlir", "fwd/f16_nhwc_kyxc_stem_folded.mlir",
               "bwd_data/f16_nhwc_kyxc_stem_folded.mlir")


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="on a GPU the full harness runs instead (scripts/device-run power)")
@pytest.mark.parametrize("smoke", [
    pytest.param(True, id="four_mutants"),
    pytest.param(False, id="every_mutant", marks=pytest.mark.nightly)])
def test_every_mutant_is_killed_twice_and_nothing_cries_wolf(tmp_path, smoke):
    out, state = tmp_path / "power.json", tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    seeds = 20 if smoke else 150
    command = [sys.executable, str(REPO / "scripts" / "verifier-power"), "--small", "--census", str(seeds),
               "--enough", "2", "--workers", "2", "--json", str(out), "--state", str(state)]
    if smoke:
        command += ["--mutants", ",".join(SMOKE_MUTANTS), "--", *(str(REPO / "e2e" / f) for f in SMOKE_FILES)]
    p = subprocess.run(command, capture_output=True, text=True, env=env, timeout=2400)
    report = json.loads(out.read_text()) if out.exists() else {}
    assert p.returncode == 0 and report.get("goals_met"), p.stdout[-3000:] + p.stderr[-2000:]
    if smoke:
        assert report["killed"] == report["expressible"] == report["mutants"] == len(SMOKE_MUTANTS)
    else:
        assert report["killed"] == report["expressible"] >= 16
    assert report["false_alarms"] == 0 and report["seeds"] == seeds

    # Run again on the same state: every finished job is taken from it, not run again. A
    # census row marked as a false alarm there must show up in the new report.
    part = state / "census-part0.rows.json"
    saved = json.loads(part.read_text())
    saved["rows"][0]["bits"] = [0, 1, 1]
    part.write_text(json.dumps(saved))
    p = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    again = json.loads(out.read_text())
    assert p.returncode == 1 and again["false_alarms"] == 1, p.stdout[-3000:] + p.stderr[-2000:]
    assert again["matrix"] == report["matrix"] and again["cases"] == report["cases"]


def test_enough_stops_a_mutants_cases_at_that_many_kills():
    """--enough N: a job's rows end at the case that makes the Nth kill (a case that
    cannot even parse is a kill); without it every case runs. Cheap: no kernel runs."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("verifier_power", str(REPO / "scripts" / "verifier-power"))
    spec = importlib.util.spec_from_loader("verifier_power", loader)
    vp = importlib.util.module_from_spec(spec)
    sys.modules["verifier_power"] = vp   # its dataclasses look their module up there
    loader.exec_module(vp)
    cases = [{"id": f"case-{i}", "argv": ["-no_such_flag", str(i)]} for i in range(5)]
    assert [r["case"] for r in vp._run_cases(cases, enough=2)] == ["case-0", "case-1"]
    rows = vp._run_cases(cases)
    assert len(rows) == 5 and all(r["bits"] == [0, 0, 0] and "convgen: error" in r["error"] for r in rows)

"""`convgen study` and `study-report`: the study's test list rebuilt, its result lines read,
its tables reproduced from its aggregates, and --small end to end in the interpreter:
every case a line, a stopped run resumed, a torn line cut, the tables and plots written."""
import json
import math
import os
import subprocess
import sys

import pytest

from convgen import cli
from convstudy import study
from convstudy import report as sr

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_list_holds_the_studys_107_tests_at_their_sizes():
    """Every test parses as a convgen line, and its output has the element count the
    study's files record for it (the check that the flags were rebuilt right)."""
    tests = study.load_tests(study.DEFAULT_TESTS)
    assert len(tests) == 107 and len({t.name for t in tests}) == 107
    for t in tests:
        p = cli.parse(list(t.flags) + ["-pv"]).problem
        assert p.dtype.name == "f16" and t.source.startswith("mlir/test/mlir-miopen-driver/")
        assert p.elements(p.writes) == t.outputs, t.name
    worst = {t.name: t for t in tests}[sr.WORST_TEST]
    assert worst.outputs == 205520896


def test_small_tests_keep_the_shape_and_fit_the_interpreter():
    tests = study.small_tests(study.load_tests(study.DEFAULT_TESTS))
    stem = cli.parse(list(tests[0].flags) + ["-pv"]).problem
    assert (stem.y, stem.x, stem.stride_h, stem.pad_h_l, stem.c) == (7, 7, 2, 3, 3)
    for t in tests:
        p = cli.parse(list(t.flags) + ["-pv"]).problem
        assert p.n <= 2 and p.hi <= 12 and p.elements(p.writes) <= 2 * 8 * 12 * 12


def test_the_grid():
    t = study.load_tests(study.DEFAULT_TESTS)[:1]
    cases = study.grid(t)
    # per range: 2 paths x 2 flushings x (cpu + gpu); on r0 also acc4 and flush on the CPU
    assert len(cases) == 5 * 8 + 2 * 2 * 2
    assert len({c.key for c in cases}) == len(cases)
    assert all(c.validator == "cpu" and c.range == "r0" for c in cases if c.emulation != "none")
    assert len(study.grid(t, emulation_ranges=tuple(study.RANGES))) == 5 * 16


# two lines in the study's verifier format (rocMLIR conv-validation-wrappers.cpp), made up
# here: the 26-field form, and the 28-field one with an overflow
LINE_26 = ("802816     (801811 914 91 0) 128.0 (0.0004749298 0.0004444122) 0.003906 0.000001 "
           "6.4e-02 1.2e-02 1.2e-06 2.3e-06 0 1 1 0 1 0 1 bwd_data some_test_f16 (2 of 107)")
LINE_28 = ("100 (90 5 5 0) inf (inf 65504.0) inf 0.5 inf 3.0e-01 (1.0 2.0) -nan -nan "
           "0 1 1 0 1 0 1 fwd other_test (3 of 107)")


def test_the_studys_lines_are_read():
    a = study.parse_study_line(LINE_26)
    assert a["test"] == "some_test_f16" and a["n"] == 802816 and a["exact"] == 801811
    assert a["max_epsilon_diff"] == 128.0 and a["max_rel_diff_old"] == 1.2e-2 and a["rms"] == 2.3e-6
    b = study.parse_study_line(LINE_28)
    assert math.isinf(b["max_epsilon_diff"]) and b["max_rel_diff_old"] == 0.3 and math.isnan(b["rms"])
    with pytest.raises(ValueError):
        study.parse_study_line("1 2 3")


def test_reading_a_study_folder(tmp_path):
    folder = tmp_path / "raw" / "verify_results_fair_1_MI200"
    folder.mkdir(parents=True)
    (folder / "verify_f16_xdlops_pv_rand0.txt").write_text(LINE_26 + "\n" + LINE_28 + "\n")
    rows = study.read_study(str(tmp_path / "raw"))
    assert [(r["device"], r["path"], r["validator"], r["range"]) for r in rows] == \
        [("MI200", "x2", "cpu", "r0")] * 2
    assert rows[1]["overflow"] and not rows[0]["overflow"]


def _row(test, path, validator, rng, eps, rms=1e-6, device="D"):
    return {"key": f"{test}|{path}|{validator}|{rng}", "device": device, "arch": "a", "test": test,
            "path": path, "validator": validator, "range": rng, "emulation": "none",
            "device_flush": False, "n": 10, "exact": 9, "overflow": False, "bits": [1, 1, 1],
            "metrics": {"max_epsilon_diff": eps, "max_abs_diff": 0.0, "max_rel_diff": 0.0,
                        "max_rel_diff_old": 0.0, "rms": rms},
            "histograms": {"relDiff_old": [9, 0, 0, 0, 1, 0, 0, 0, 0],
                           "epsilonDiff": [9, 1, 0, 0, 0, 0]}}


def test_cells_are_the_mean_over_settings_of_the_average_or_maximum():
    rows = [_row("a", "x2", "cpu", "r0", 1.0), _row("b", "x2", "cpu", "r0", 3.0),
            _row("a", "x2", "gpu", "r0", 10.0), _row("b", "x2", "gpu", "r0", "inf"),
            _row("a", "fma", "cpu", "r0", 0.0), _row("b", "fma", "cpu", "r0", 2.0)]
    src = sr.Source("D", rows)
    # averages 2, 10 (inf left out), 1 -> 13/3; maxima 3, 10, 2 -> 5
    assert sr.cell(src, "max_epsilon_diff", "ave", sr.TABULATED, ("r0",)) == pytest.approx(13 / 3)
    assert sr.cell(src, "max_epsilon_diff", "max", sr.TABULATED, ("r0",)) == 5.0
    assert sr.pass_rate(src, sr.TABULATED, ("r0",)) == pytest.approx(2 / 6)


def test_the_published_aggregates_give_the_studys_tables():
    """study/fp16/published.json, aggregated as the study did, prints the study's numbers."""
    with open(os.path.join(REPO, "study", "fp16", "published.json")) as f:
        pub = json.load(f)
    mi200, mi100 = sr.study_sources(None, pub)
    assert (mi200.name, mi100.name) == ("MI200", "MI100")
    eps = lambda src, stat, r: sr.cell(src, "max_epsilon_diff", stat, sr.TABULATED, (r,))  # noqa: E731
    assert round(eps(mi200, "ave", "r0"), 2) == 314.24 and round(eps(mi200, "max", "r0"), 2) == 2030.33
    assert round(eps(mi200, "ave", "r1"), 2) == 1627.64 and round(eps(mi100, "ave", "r0"), 2) == 90.50
    assert round(sr.cell(mi200, "rms", "ave", sr.TABULATED, ("r0",)), 8) == 2.12e-6
    by_setting = [round(sr.cell(mi200, "max_epsilon_diff", "ave", (s,), sr.STUDY_RANGES), 2)
                  for s in sr.TABULATED]
    assert by_setting == [352.98, 818.53, 285.98]


def test_each_device_gets_its_own_tables(tmp_path):
    rows = [_row(t, p, v, r, eps, device=d) for d, eps in (("D", 1.0), ("E", 4.0))
            for t in ("a", "b") for p, v in sr.TABULATED for r in sr.STUDY_RANGES]
    with open(os.path.join(REPO, "study", "fp16", "published.json")) as f:
        pub = json.load(f)
    blocks = sr.build(rows, None, pub, str(tmp_path), plots=False)
    assert "D: the device as it is" in blocks["ranges"] and "E: the device as it is" in blocks["ranges"]
    header = blocks["devices"].splitlines()[0]
    assert all(f"{name} (r0)" in header for name in ("MI200", "MI100", "D", "E"))
    assert "| maxEpsilonDiff ave | 314.24 | 90.50 | 1.00 | 4.00 |" in blocks["devices"]


def test_fill_doc_rewrites_blocks_and_keeps_the_rest(tmp_path):
    doc = tmp_path / "d.md"
    doc.write_text("intro\n<!-- study:a -->\nold a\n<!-- /study:a -->\nmid\n"
                   "<!-- study:b -->\nold b\n<!-- /study:b -->\nend\n")
    rewritten, kept = sr.fill_doc(str(doc), {"a": "new a\n"})
    assert (rewritten, kept) == (["a"], ["b"])
    assert doc.read_text() == ("intro\n<!-- study:a -->\nnew a\n<!-- /study:a -->\nmid\n"
                               "<!-- study:b -->\nold b\n<!-- /study:b -->\nend\n")
    doc.write_text("<!-- study:a -->\nno end\n")
    with pytest.raises(study.ConvgenError, match="no closing"):
        sr.fill_doc(str(doc), {"a": "x"})


def _study(*argv, cwd=None):
    return subprocess.run([sys.executable, "-m", "convgen", "study", *map(str, argv)],
                          capture_output=True, text=True, timeout=1800, cwd=cwd)


# The PR run of pytest takes one of --small's four tests through the whole grid (every
# range, validator, path and emulation); all four, four times as long, are the nightly case.
@pytest.mark.parametrize("only", [
    pytest.param(["conv2d_host_validation_f16_CHECK_RESNET101_NCHW_CONFIG1_FWD_f16_small"], id="one_test"),
    pytest.param([], id="four_tests", marks=pytest.mark.nightly)])
def test_small_runs_the_grid_resumes_and_reports(tmp_path, only):
    n = len(only) or 4
    only_args = ["-only", ",".join(only)] if only else []
    out = tmp_path / "small.jsonl"
    p = _study("--small", "-out", out, *only_args)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == n * 48 and len({r["key"] for r in rows}) == len(rows)
    assert all("error" not in r for r in rows), [r for r in rows if "error" in r][:2]
    # convgen's own thresholds pass a correct kernel in every setting and range
    assert all(r["bits"] == [1, 1, 1] and r["out_of_tolerance"] == 0 for r in rows)
    assert {r["range"] for r in rows} == set(study.RANGES)
    assert any(r["metrics"]["max_epsilon_diff"] > 0 for r in rows)   # not all trivially exact
    report = tmp_path / "small-report"
    tables = (report / "tables.md").read_text()
    for block in ("ranges", "settings", "emulation", "worst", "devices"):
        assert f"## {block}" in tables
    files = json.loads((report / "files.json").read_text())
    assert any(f.endswith(".png") for f in files) and all((report / f).exists() for f in files)
    # a stopped run resumes: drop the last 5 lines and tear the one before them
    lines = out.read_text().splitlines(keepends=True)
    out.write_text("".join(lines[:-6]) + lines[-6][:20])
    p = _study("--small", "-out", out, "-report", "off", *only_args)
    assert p.returncode == 0 and f"6 cases run, {n * 48 - 6} already in" in p.stdout, p.stdout + p.stderr
    again = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["key"] for r in again) == sorted(r["key"] for r in rows)
    # two processes at once give the same lines as one (the order aside)
    two = tmp_path / "two.jsonl"
    p = _study("--small", "-out", two, "-ranges", "r0,away", "-jobs", 2, "-report", "off", *only_args)
    assert p.returncode == 0, p.stderr
    par = {r["key"]: r for r in map(json.loads, two.read_text().splitlines())}
    seq = {r["key"]: r for r in rows if r["range"] in ("r0", "away")}
    assert par.keys() == seq.keys() and len(par) == n * (16 + 8)
    for k, r in par.items():
        assert {**r, "seconds": 0} == {**seq[k], "seconds": 0}, k


@pytest.mark.parametrize("argv,words", [
    (["-out", "x.json"], "a results file ends in .jsonl"),
    (["-tests", "/nonexistent/tests.tsv"], "cannot read the test list"),
    (["-only", "no_such_test"], "no test no_such_test"),
    (["-ranges", "r9"], "-ranges"),
    (["-out", "no_such_dir/r.jsonl"], "the folder"),
])
def test_bad_input_is_one_error_line(tmp_path, argv, words):
    p = _study(*argv, cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    assert list(tmp_path.iterdir()) == []   # nothing made: no folder, no results file
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("convgen: error: ") and words in lines[0], p.stderr


def test_a_foreign_results_file_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "r.jsonl"
    out.write_text("not json\n")
    p = _study("--small", "-out", out, "-report", "off")
    assert p.returncode == 2 and "not a study result line" in p.stderr
    assert out.read_text() == "not json\n"


def test_a_page_that_cannot_be_filled_stops_the_report_before_it_writes(tmp_path):
    """A missing page, or one whose block does not close, is one error line, and no CSV,
    plot or files.json has been written by then."""
    data = tmp_path / "data"
    broken = tmp_path / "broken.md"
    broken.write_text("<!-- study:ranges -->\nno end\n")
    for doc in (tmp_path / "missing.md", broken):
        p = subprocess.run([sys.executable, "-m", "convgen", "study-report", "-doc", str(doc),
                            "-data_dir", str(data), "-plots", "off"],
                           capture_output=True, text=True, timeout=300)
        lines = p.stderr.splitlines()
        assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("convgen: error: ")
        assert not data.exists(), sorted(data.iterdir())
    assert broken.read_text() == "<!-- study:ranges -->\nno end\n"


def test_the_report_leaves_the_tracked_page_alone_unless_asked(tmp_path):
    """By default study-report writes its folder (build/fp16-study); only -update_docs
    rewrites docs/fp16-study.md and its plots."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    page = os.path.join(root, "docs", "fp16-study.md")
    before = open(page, "rb").read()
    out = tmp_path / "report"
    p = subprocess.run([sys.executable, "-m", "convgen", "study-report", "-out", str(out), "-plots", "off"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "## ranges" in (out / "tables.md").read_text() and (out / "files.json").exists()
    assert open(page, "rb").read() == before
    from convstudy import report as study_report
    assert study_report.REPORT_DIR == os.path.join(root, "build", "fp16-study")

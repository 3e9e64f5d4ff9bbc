"""The fp16 study's commands: `convgen study` and `convgen study-report`, with their flags
(convgen.commands finds them)."""
from __future__ import annotations

from convgen.commands import Command
from convgen.errors import ConvgenError
from convgen.flags import as_text, flag_table, listed, one_of, positive, scan, switch
from convstudy import report, study

STUDY_FLAGS = flag_table(
    ("convgen study", [
        ("tests", "tests", as_text, "the test list (tab-separated: name, flags, source, outputs, note)",
         "study/fp16/tests.tsv: the fp16 study's 107 tests"),
        ("small", "small", switch(),
         "a few of the tests, shrunk to interpreter sizes, over the whole grid (CI runs it)", "off"),
        ("only", "only", listed(as_text), "run only these tests (names, comma-separated)", "all"),
        ("out", "out", as_text, "the results file (JSON lines; a run that was stopped resumes)",
         "docs/data/fp16-study/ARCH.jsonl (ARCH-small.jsonl with --small)"),
        ("seed", "seed", positive, "the random seed of every draw", "1"),
        ("jobs", "jobs", positive, "processes at once, each with its share of the CPU cores (the "
         "float64 references); the draws of a test and range are split among them", "1"),
        ("ranges", "ranges", listed(one_of("r0", "r1", "r4", "r5", "away")),
         "input ranges: r0 [-1,1], r1 [-10,10], r4 [1,5], r5 [5,10], away [-3,-1] U [1,3]",
         "all five"),
        ("validators", "validators", listed(one_of("cpu", "gpu")),
         "references: cpu (float64), gpu (the FMA kernel)", "cpu,gpu"),
        ("paths", "paths", listed(one_of("x2", "fma")), "kernel paths: x2 (matrix cores), fma",
         "x2,fma"),
        ("emulations", "emulations", listed(one_of("none", "acc4", "flush")),
         "CPU reference emulations: none, acc4 (fp32 sums every 4 products), flush (subnormal "
         "inputs zeroed)", "none,acc4,flush"),
        ("emulation_ranges", "emulation_ranges", listed(one_of("r0", "r1", "r4", "r5", "away")),
         "the ranges the emulations run on (acc4 costs the CPU reference about R/4 passes over "
         "the output)", "r0, as in the study"),
        ("device_flush", "device_flush", listed(one_of("keep", "flush")),
         "the kernel's subnormal inputs: keep, flush (as MI200's matrix cores do)", "keep,flush"),
        ("report", "report", switch(),
         "then write the tables and plots (convgen study-report): into build/fp16-study, or "
         "with -small or -out into a folder beside the results (FILE-report/tables.md)", "on"),
    ]))


STUDY_REPORT_FLAGS = flag_table(
    ("convgen study-report", [
        ("results", "results", listed(as_text), "result files of convgen study (comma-separated)",
         "every docs/data/fp16-study/*.jsonl but the -small ones"),
        ("study_results", "study_results", as_text,
         "the study's raw_results folder (zhanglx13/llvm-project-mlir-dev-utils, "
         "fp16_experiment/raw_results): its tables from its files, and a test-by-test comparison",
         "its aggregates in study/fp16/published.json"),
        ("write_published", "write_published", switch(),
         "with -study_results: rewrite study/fp16/published.json from the study's files", "off"),
        ("out", "out", as_text, "the report's folder: its tables (tables.md and a CSV file each) "
         "and plots", "build/fp16-study"),
        ("update_docs", "update_docs", switch(),
         "instead, rewrite the study blocks of the tracked page docs/fp16-study.md and the "
         "plots it shows, in docs/data/fp16-study", "off"),
        ("doc", "doc", as_text, "a page whose study blocks are rewritten (its plots go to -data_dir)",
         "none; docs/fp16-study.md with -update_docs"),
        ("data_dir", "data_dir", as_text, "where a page's plots go",
         "-out; docs/data/fp16-study with -update_docs"),
        ("plots", "plots", switch(), "draw the PNG plots (matplotlib)", "on"),
    ]))


def parse_study(argv: list[str]) -> dict:
    v = scan([str(a) for a in argv], STUDY_FLAGS)
    if "out" in v and not v["out"].endswith(".jsonl"):
        raise ConvgenError(f"'{v['out']}' for -out: a results file ends in .jsonl", field="out")
    return v


def parse_study_report(argv: list[str]) -> dict:
    v = scan([str(a) for a in argv], STUDY_REPORT_FLAGS)
    if v.get("write_published") and "study_results" not in v:
        raise ConvgenError("-write_published needs -study_results (the study's files)",
                           field="write_published")
    return v


def _study(name: str, args: list[str]) -> int:
    v = parse_study(args)
    study.main(v)
    if not v.get("report", True):
        return 0
    if v.get("small") or "out" in v:   # not the page's data: a report of its own beside it
        out = study.results_path(v)
        return report.main({"results": [out], "out": out[:-len(".jsonl")] + "-report"})
    return report.main({})   # the report folder; -update_docs rewrites the page


def _study_report(name: str, args: list[str]) -> int:
    return report.main(parse_study_report(args))


COMMANDS = (
    Command("study", "convgen study [flags]",
            "Runs the fp16 study's grid (docs/fp16-study.md): each test under each validator, "
            "kernel path,\ninput range, reference emulation and device flushing, one JSON "
            "line per case; then writes\nthe tables and plots. A run that was stopped "
            "resumes.\n", STUDY_FLAGS, _study),
    Command("study-report", "convgen study-report [flags]",
            "Writes the fp16 study's tables (markdown blocks of the doc, CSV) and plots (PNG) "
            "from convgen\nstudy's results and the study's own.\n",
            STUDY_REPORT_FLAGS, _study_report),
)

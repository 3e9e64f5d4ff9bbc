"""`convgen study-report`: the fp16 study's tables and plots, from `convgen study`'s result
lines and the study's own result files.

Every cell is aggregated as the study did (its numbers reproduce so): for one source,
setting and range, the average and the maximum of a metric over the tests, leaving out
non-finite values; a range's cell is then the mean of those over the settings the study
tabulated (matrix cores with the CPU and the GPU reference, FMA with the CPU reference:
FMA against the GPU FMA reference was always 0 on AMD); a setting's cell the mean over
the study's four ranges. Pass rate: tests with maxEpsilonDiff <= 1.

Tables go to markdown blocks of docs/fp16-study.md (between `<!-- study:NAME -->` and
`<!-- /study:NAME -->`) and to CSV files; plots to PNG files beside the CSVs. A block
whose inputs are missing (no results for it, or no study files) is left as it stands.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import tempfile
import statistics

from convgen import REPO_ROOT
from convgen.errors import ConvgenError
from convgen.report import write_atomic
from convstudy import study
from convstudy.study import METRICS, RANGES

STUDY_RANGES = ("r0", "r1", "r4", "r5")
TABULATED = (("x2", "cpu"), ("x2", "gpu"), ("fma", "cpu"))
SETTING_NAMES = {("x2", "cpu"): "matrix cores / CPU ref", ("x2", "gpu"): "matrix cores / GPU ref",
                 ("fma", "cpu"): "FMA / CPU ref", ("fma", "gpu"): "FMA / GPU ref"}
WORST_TEST = "padding_kernel_gemmK_CHECK_RESNET50_F16_CONFIG1"
REL_LABELS = ("0", "(0,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)", "[1e-4,1e-3)", "[1e-3,1e-2)",
              "[1e-2,0.1)", "[0.1,1)", ">= 1")
EPS_LABELS = ("0", "1", "2", "[3,10]", "[11,100]", "> 100")


def _f(x) -> float:
    return float(x)   # "inf", "nan" as JSON keeps them: float reads both


def _finite(values) -> list[float]:
    return [v for v in (_f(x) for x in values) if math.isfinite(v)]


def _sel(rows, **want) -> list[dict]:
    return [r for r in rows if "error" not in r and all(r.get(k) == v for k, v in want.items())]


def _group_of(rows: list[dict]) -> dict | None:
    """One (source, setting, range) group's aggregates: per metric (average, maximum) over
    the tests, non-finite values left out; tests with maxEpsilonDiff <= 1; overflows."""
    if not rows:
        return None
    g = {"count": len(rows), "overflow": sum(1 for r in rows if r.get("overflow")),
         "pass": sum(1 for r in rows if _f(r["metrics"]["max_epsilon_diff"]) <= 1)}
    for metric, _ in METRICS:
        vals = _finite(r["metrics"][metric] for r in rows)
        g[metric] = [statistics.fmean(vals), max(vals)] if vals else None
    if any("bits" in r for r in rows):
        g["bits_pass"] = sum(1 for r in rows if r.get("bits") == [1, 1, 1])
    return g


class Source:
    """One column family of the tables: a device's result rows (already narrowed to one
    reference emulation and one flushing), or the study's published aggregates."""

    def __init__(self, name: str, rows: list[dict] | None = None, groups: dict | None = None):
        self.name, self.rows = name, rows
        self.groups = groups if groups is not None else {}
        if rows is not None:
            keys = {(r["path"], r["validator"], r["range"]) for r in rows if "error" not in r}
            self.groups = {"|".join(k): _group_of(_sel(rows, path=k[0], validator=k[1], range=k[2]))
                           for k in keys}

    def group(self, path: str, validator: str, rng: str) -> dict | None:
        return self.groups.get(f"{path}|{validator}|{rng}")

    def has(self, path: str, validator: str) -> bool:
        return any(k.startswith(f"{path}|{validator}|") for k in self.groups)

    def ranges(self) -> list[str]:
        have = {k.split("|")[2] for k in self.groups}
        return [r for r in RANGES if r in have]


def cell(src: Source, metric: str, stat: str, settings, ranges) -> float | None:
    """The study's aggregate: the mean over (setting, range) groups of the group's average
    or maximum."""
    parts = []
    for path, validator in settings:
        for r in ranges:
            g = src.group(path, validator, r)
            if g and g.get(metric):
                parts.append(g[metric][0 if stat == "ave" else 1])
    return statistics.fmean(parts) if parts else None


def _share(src: Source, key: str, settings, ranges) -> float | None:
    groups = [g for g in (src.group(p, v, r) for p, v in settings for r in ranges) if g]
    total = sum(g["count"] for g in groups)
    return sum(g.get(key, 0) for g in groups) / total if total and all(key in g for g in groups) else None


def pass_rate(src: Source, settings, ranges) -> float | None:
    return _share(src, "pass", settings, ranges)


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, int):
        return f"{x:,}"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-2:
        return f"{x:.2e}"
    return f"{x:,.2f}" if abs(x) < 1000 else f"{x:,.0f}"


class Table:
    """A table as rows of cells: written as markdown and as CSV."""

    def __init__(self, name: str, header: list[str]):
        self.name, self.header, self.rows = name, header, []

    def add(self, label: str, cells: list) -> None:
        self.rows.append([label] + list(cells))

    def markdown(self) -> str:
        out = ["| " + " | ".join(self.header) + " |",
               "| " + " | ".join([":---"] + ["---:"] * (len(self.header) - 1)) + " |"]
        out += ["| " + " | ".join([row[0]] + [_fmt(c) for c in row[1:]]) + " |" for row in self.rows]
        return "\n".join(out)

    def csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.header)
        for row in self.rows:
            w.writerow([row[0]] + ["" if c is None else c for c in row[1:]])
        return buf.getvalue()


def _metric_rows(table: Table, columns: list[tuple]) -> None:
    """Rows "metric ave" and "metric max" for each of the five metrics; a column is
    (source, settings, ranges)."""
    for metric, label in METRICS:
        for stat in ("ave", "max"):
            table.add(f"{label} {stat}", [cell(src, metric, stat, s, r) for src, s, r in columns])


def _pct(x):
    return None if x is None else f"{100 * x:.2f}%"


# ---- the tables ---------------------------------------------------------------------------

def ranges_table(src: Source, ranges: list[str]) -> Table:
    """The study's "effects of magnitude / of subnormal numbers" tables, every range."""
    t = Table(f"ranges-{_slug(src.name)}", [src.name] + [f"{r} {RANGES[r][3]}" for r in ranges])
    _metric_rows(t, [(src, TABULATED, (r,)) for r in ranges])
    t.add("pass rate (maxEpsilonDiff <= 1)", [_pct(pass_rate(src, TABULATED, (r,))) for r in ranges])
    t.add("overflows (tests x settings)", [
        sum((g or {}).get("overflow", 0) for g in (src.group(p, v, r) for p, v in TABULATED))
        for r in ranges])
    bits = [_share(src, "bits_pass", TABULATED, (r,)) for r in ranges]
    if any(b is not None for b in bits):
        t.add("convgen's bits [1 1 1]", [_pct(b) for b in bits])
    return t


def settings_table(src: Source, ranges=STUDY_RANGES) -> Table:
    """The study's "effects of validation methods": each setting over the four ranges."""
    settings = [s for s in SETTING_NAMES if src.has(*s)]
    t = Table(f"settings-{_slug(src.name)}", [src.name] + [SETTING_NAMES[s] for s in settings])
    _metric_rows(t, [(src, (s,), ranges) for s in settings])
    t.add("pass rate (maxEpsilonDiff <= 1)", [_pct(pass_rate(src, (s,), ranges)) for s in settings])
    return t


def devices_table(sources: list[Source], ranges=STUDY_RANGES) -> Table:
    """The study's MI100/MI200 table with our devices beside: a column per source and range."""
    t = Table("devices", ["metric"] + [f"{s.name} ({r})" for r in ranges for s in sources])
    _metric_rows(t, [(s, TABULATED, (r,)) for r in ranges for s in sources])
    t.add("pass rate (maxEpsilonDiff <= 1)",
          [_pct(pass_rate(s, TABULATED, (r,))) for r in ranges for s in sources])
    return t


def emulation_table(by_emulation: dict[str, Source], label: str, rng: str = "r0") -> Table:
    """The study's "better validation function": the CPU reference as it is, summing in
    fp32 every 4 products, flushing subnormal inputs; the matrix-core kernel."""
    x2cpu = (("x2", "cpu"),)
    t = Table(f"emulation-{_slug(label)}", [f"{label}, {rng}, matrix cores / CPU ref"]
              + list(by_emulation))
    _metric_rows(t, [(src, x2cpu, (rng,)) for src in by_emulation.values()])
    t.add("pass rate (maxEpsilonDiff <= 1)",
          [_pct(pass_rate(src, x2cpu, (rng,))) for src in by_emulation.values()])
    t.add("elements equal", [_pct(_equal_share(_sel(src.rows, path="x2", validator="cpu", range=rng)))
                             for src in by_emulation.values()])
    return t


def _equal_share(rows):
    n = sum(r["n"] for r in rows)
    return sum(r["exact"] for r in rows) / n if n else None


def _slug(text: str) -> str:
    import re
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def worst_histograms(rows: list[dict], test: str, label: str, rng: str = "r0") -> tuple | None:
    """The worst test's relDiff_old and epsilonDiff histograms, per reference emulation."""
    picked = {}
    for e in ("none", "acc4", "flush"):
        found = _sel(rows, test=test, path="x2", validator="cpu", range=rng, emulation=e)
        if found:
            picked[e] = found[0]
    if not picked:
        return None
    out = []
    for hist, labels in (("relDiff_old", REL_LABELS), ("epsilonDiff", EPS_LABELS)):
        t = Table(f"worst-{hist}-{_slug(label)}", [hist] + list(picked))
        for i, bucket in enumerate(labels):
            t.add(bucket, [_count_pct(r["histograms"][hist][i], r["n"]) for r in picked.values()])
        key = "worst_rel_old" if hist == "relDiff_old" else "worst_eps"
        metric = "max_rel_diff_old" if hist == "relDiff_old" else "max_epsilon_diff"
        t.add("max", [_f(r["metrics"][metric]) for r in picked.values()])
        t.add("val", [_maybe((r.get(key) or {}).get("val")) for r in picked.values()])
        t.add("kern", [_maybe((r.get(key) or {}).get("kern")) for r in picked.values()])
        out.append(t)
    return out[0], out[1]


def _maybe(x):
    return None if x is None else _f(x)


def _count_pct(count: int, n: int) -> str:
    return f"{count} ({100 * count / n:.6f}%)" if n else str(count)


def point_by_point(ours: list[dict], study: list[dict], source: str, gpu: str) -> Table | None:
    """Test by test: our maxEpsilonDiff and the study's on one GPU, for each tabulated
    setting and range; summarised as Spearman's rank correlation and the tests worst in
    both."""
    t = Table(f"points-{_slug(source)}-{_slug(gpu)}", ["setting, range", "tests", "Spearman rho",
                                         f"worst 3 on {gpu}", f"worst 3 on {source}"])
    for s in TABULATED:
        for r in STUDY_RANGES:
            a = {x["test"]: _f(x["metrics"]["max_epsilon_diff"])
                 for x in _sel(ours, path=s[0], validator=s[1], range=r, emulation="none",
                               device_flush=False)}
            b = {x["test"]: _f(x["metrics"]["max_epsilon_diff"])
                 for x in _sel(study, device=gpu, path=s[0], validator=s[1], range=r)}
            both = sorted(n for n in a.keys() & b.keys()
                          if math.isfinite(a[n]) and math.isfinite(b[n]))
            if len(both) < 3:
                continue
            rho = _spearman([a[n] for n in both], [b[n] for n in both])
            top = lambda d: ", ".join(_short(n) for n in sorted(both, key=lambda n: -d[n])[:3])  # noqa: E731
            t.add(f"{SETTING_NAMES[s]}, {r}", [len(both), f"{rho:.2f}", top(b), top(a)])
    return t if t.rows else None


def _short(name: str) -> str:
    for prefix in ("conv2d_host_validation_", "padding_kernel_"):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name.replace("_CHECK_", ":")


def _ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def _spearman(a, b) -> float:
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    sa = math.sqrt(sum((x - ma) ** 2 for x in ra))
    sb = math.sqrt(sum((y - mb) ** 2 for y in rb))
    return cov / (sa * sb) if sa and sb else float("nan")


# ---- plots --------------------------------------------------------------------------------

def _plt():
    try:
        import matplotlib
    except ImportError:
        raise ConvgenError("the plots need matplotlib (scripts/setup.sh installs it); "
                           "without it: -plots off", field="plots") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_histograms(tables: tuple[Table, Table], title: str, path: str) -> None:
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4))
    for ax, t in zip(axes, tables):
        labels = [row[0] for row in t.rows[:-3]]
        series = t.header[1:]
        width = 0.8 / len(series)
        for j, name in enumerate(series):
            counts = [int(str(row[1 + j]).split()[0]) for row in t.rows[:-3]]
            ax.bar([i + j * width for i in range(len(labels))], [max(c, 0.5) for c in counts],
                   width, label=name)
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels, rotation=45,
                      ha="right", fontsize=8)
        ax.set_title(t.header[0])
        ax.set_ylabel("elements")
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_metric_ranges(rows: list[dict], title: str, ranges: list[str], path: str) -> None:
    """Each metric's spread over the tests, per range (matrix cores, CPU reference)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(METRICS), figsize=(4 * len(METRICS), 4))
    for ax, (metric, label) in zip(axes, METRICS):
        data = []
        for r in ranges:
            vals = _finite(x["metrics"][metric] for x in _sel(rows, path="x2", validator="cpu",
                                                              range=r))
            data.append([max(v, 1e-12) for v in vals] or [1e-12])
        ax.boxplot(data, tick_labels=ranges)
        ax.set_yscale("log")
        ax.set_title(label)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_devices(sources: list[Source], path: str) -> None:
    """Average and maximum maxEpsilonDiff and the average RMS per range, a bar per source."""
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (metric, stat, label) in zip(axes, (("max_epsilon_diff", "ave", "maxEpsilonDiff ave"),
                                                ("max_epsilon_diff", "max", "maxEpsilonDiff max"),
                                                ("rms", "ave", "RMS ave"))):
        width = 0.8 / len(sources)
        for j, src in enumerate(sources):
            vals = [cell(src, metric, stat, TABULATED, (r,)) for r in STUDY_RANGES]
            ax.bar([i + j * width for i in range(len(STUDY_RANGES))],
                   [max(v or 0, 1e-9) for v in vals], width, label=src.name)
        ax.set_yscale("log")
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(STUDY_RANGES))], STUDY_RANGES)
        ax.set_title(label)
        ax.legend(fontsize=8)
    fig.suptitle("the study's GPUs and ours (mean over the tabulated settings)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---- the report ---------------------------------------------------------------------------

def study_sources(study_rows: list[dict] | None, published: dict | None) -> list[Source]:
    """The study's GPUs: from its files when given, else from the committed aggregates."""
    if study_rows:
        return [Source(gpu, _sel(study_rows, device=gpu))
                for gpu in sorted({r["device"] for r in study_rows}, reverse=True)]
    gpus = (published or {}).get("gpus", {})
    return [Source(gpu, groups=gpus[gpu]) for gpu in sorted(gpus, reverse=True)]


PUBLISHED_SOURCE = ("aggregates of the fp16 study's result files, run fair_1 "
                    "(zhanglx13/llvm-project-mlir-dev-utils, fp16_experiment/raw_results), "
                    "written by convgen study-report -study_results DIR -write_published")


def published(study_rows: list[dict]) -> dict:
    """The aggregates of the study's files, as committed in study/fp16/published.json:
    per GPU and "path|validator|range" group, each metric's (average, maximum) over the
    tests, the tests with maxEpsilonDiff <= 1, the overflows."""
    return {"source": PUBLISHED_SOURCE,
            "gpus": {s.name: s.groups for s in study_sources(study_rows, None)}}


def build(ours: list[dict], study_rows: list[dict] | None, published_groups: dict | None,
          data_dir: str, plots: bool = True, page_dir: str | None = None,
          tables: bool = True) -> dict[str, str]:
    """{block name: markdown}, with PNG files (and with `tables`, each table as a CSV file
    and files.json naming them all) written under data_dir; images are linked relative to
    page_dir (the folder of the page the blocks go to)."""
    blocks: dict[str, str] = {}
    os.makedirs(data_dir, exist_ok=True)
    files = []

    def add(name: str, text: str) -> None:
        blocks[name] = blocks.get(name, "") + text + "\n\n"

    def emit(name: str, table: Table, caption: str = "") -> None:
        if tables:
            _write(os.path.join(data_dir, f"{table.name}.csv"), table.csv())
            files.append(f"{table.name}.csv")
        if caption:
            add(name, caption)
        add(name, table.markdown())

    def plot(name: str, png: str, draw, alt: str) -> None:
        if plots:
            draw(os.path.join(data_dir, png))
            files.append(png)
            add(name, f"![{alt}]({_rel(data_dir, png, page_dir or data_dir)})")

    good = [r for r in ours if "error" not in r]
    theirs = study_sources(study_rows, published_groups)
    where = "its files, run fair_1" if study_rows else "study/fp16/published.json"
    for src in theirs:
        emit("study", ranges_table(src, list(STUDY_RANGES)),
             f"The study's {src.name} results by input range ({where}):")
    for src in theirs:
        emit("study", settings_table(src), f"The study's {src.name} results by reference and "
             "kernel path, over r0, r1, r4, r5:")
    ours_sources = []
    for dev in sorted({r["device"] for r in good}):   # each device's results apart
        mine = [r for r in good if r["device"] == dev]
        variants = [(False, dev, "the device as it is"),
                    (True, f"{dev} flushing like MI200", "the kernel's subnormal inputs flushed "
                     "first (`-flush_subnormals`, what MI200's matrix cores do)")]
        for flush, name, words in variants:
            rows = [r for r in mine if r.get("device_flush") is flush]
            if not rows:
                continue
            plain = Source(name, _sel(rows, emulation="none"))
            ours_sources.append(plain)
            tests = len({r["test"] for r in rows})
            emit("ranges", ranges_table(plain, plain.ranges()), f"{name}: {words}, {tests} tests.")
            emit("settings", settings_table(plain), f"{name}, over r0, r1, r4, r5:")
            by_emu = {e: Source(e, _sel(rows, emulation=e)) for e in ("none", "acc4", "flush")
                      if _sel(rows, emulation=e)}
            if len(by_emu) > 1:
                emit("emulation", emulation_table(by_emu, name))
            worst = WORST_TEST if _sel(rows, test=WORST_TEST) else _worst_test(plain.rows)
            hist = worst_histograms(rows, worst, name) if worst else None
            if hist:
                emit("worst", hist[0], f"{name}, `{worst}`, r0, matrix cores / CPU ref:")
                emit("worst", hist[1])
                plot("worst", f"worst-histograms-{_slug(name)}.png",
                     lambda path, h=hist, n=name, w=worst: plot_histograms(h, f"{w} on {n}, r0", path),
                     "histograms of the worst test")
            plot("ranges", f"metrics-by-range-{_slug(name)}.png",
                 lambda path, rows=plain.rows, n=name, rr=plain.ranges(): plot_metric_ranges(
                     rows, f"{n}: metrics over the tests, per input range (matrix cores, CPU ref)",
                     rr, path), "metrics by range")
        if study_rows:
            for src in theirs:
                t = point_by_point(mine, study_rows, dev, src.name)
                if t:
                    emit("points", t)
    if ours:
        add("run", _run_summary(ours))
    if theirs and ours_sources:
        everyone = theirs + ours_sources
        emit("devices", devices_table(everyone))
        plot("devices", "devices.png", lambda path: plot_devices(everyone, path),
             "the study's GPUs and ours")
    if tables:
        _write(os.path.join(data_dir, "files.json"), json.dumps(sorted(files), indent=1) + "\n")
    return blocks


def _worst_test(rows):
    r0 = _sel(rows, path="x2", validator="cpu", range="r0")
    return max(r0, key=lambda r: _f(r["metrics"]["max_epsilon_diff"]))["test"] if r0 else None


def _run_summary(rows) -> str:
    good = [r for r in rows if "error" not in r]
    secs = sum(r.get("seconds", 0) for r in good)
    tests = len({r["test"] for r in rows})
    devices = ", ".join(sorted({f"{r['device']} ({r['arch']})" for r in rows}))
    failed = sum(1 for r in good if 0 in r["bits"])
    errors = len(rows) - len(good)
    return (f"{len(rows)} cases of {tests} tests on {devices}: {secs / 60:.1f} minutes of case "
            f"time; {failed} with a 0 bit under convgen's own thresholds; {errors} that could "
            "not run.")


def _rel(data_dir: str, name: str, page_dir: str) -> str:
    return os.path.relpath(os.path.join(data_dir, name), page_dir).replace(os.sep, "/")


def _write(path: str, text: str) -> None:
    """The whole file or none of it (report.write_atomic)."""
    def write(tmp):
        with open(tmp, "w") as f:
            f.write(text)
    write_atomic(path, write)


def read_doc(doc_path: str) -> str:
    """The page's text, once every `<!-- study:NAME -->` block is known to close."""
    try:
        with open(doc_path) as f:
            text = f.read()
    except OSError as e:
        raise ConvgenError(f"cannot read '{doc_path}': {e.strerror}", field="doc") from None
    for name in _block_names(text):
        end = f"<!-- /study:{name} -->"
        if end not in text:
            raise ConvgenError(f"{doc_path}: block '{name}' has no closing {end}", field="doc")
    return text


def fill_doc(doc_path: str, blocks: dict[str, str]) -> tuple[list[str], list[str]]:
    """Replace each `<!-- study:NAME -->...<!-- /study:NAME -->` block that has new content;
    returns the names of the blocks rewritten and of those left as they were."""
    text = read_doc(doc_path)
    kept, rewritten = [], []
    for name in _block_names(text):
        start, end = f"<!-- study:{name} -->", f"<!-- /study:{name} -->"
        if name not in blocks:
            kept.append(name)
            continue
        i, j = text.index(start) + len(start), text.index(end)
        text = text[:i] + "\n" + blocks[name].rstrip() + "\n" + text[j:]
        rewritten.append(name)
    _write(doc_path, text)
    return rewritten, kept


def _block_names(text: str) -> list[str]:
    import re
    return re.findall(r"<!-- study:([\w-]+) -->", text)


# ---- the command ----------------------------------------------------------------------------

DOC = os.path.join(REPO_ROOT, "docs", "fp16-study.md")
REPORT_DIR = os.path.join(REPO_ROOT, "build", "fp16-study")   # not tracked (.gitignore: /build/)

def main(v: dict) -> int:
    """`convgen study-report`, from convstudy.commands.parse_study_report's values."""
    import glob

    if v.get("update_docs"):   # the tracked page and its plots: only when asked
        doc = v.get("doc", DOC)
        data_dir = v.get("data_dir", study.RESULTS_DIR)
    else:
        doc = v.get("doc", "")
        data_dir = v.get("data_dir", v.get("out", REPORT_DIR))
    if doc:
        read_doc(doc)   # a page that cannot be filled stops the run before any file is written
    try:   # a folder that cannot be made stops it too (one line, not a traceback)
        os.makedirs(data_dir, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=data_dir, prefix=".convgen-")
        probe.close()
    except OSError as e:
        field = "data_dir" if "data_dir" in v else "out"
        raise ConvgenError(f"cannot write into '{data_dir}': {e.strerror or e}", field=field) from None
    results = v.get("results") or sorted(p for p in glob.glob(os.path.join(study.RESULTS_DIR, "*.jsonl"))
                                         if not p.endswith("-small.jsonl"))
    ours = study.read_results(results)
    study_rows = study.read_study(v["study_results"]) if "study_results" in v else None
    pub_path = os.path.join(REPO_ROOT, "study", "fp16", "published.json")
    if v.get("write_published"):
        _write(pub_path, json.dumps(published(study_rows), indent=1, sort_keys=True) + "\n")
        print(f"convgen study-report: wrote {pub_path}")
    pub = None
    if study_rows is None and os.path.exists(pub_path):
        with open(pub_path) as f:
            pub = json.load(f)
    blocks = build(ours, study_rows, pub, data_dir, plots=v.get("plots", True),
                   page_dir=os.path.dirname(os.path.abspath(doc)) if doc else data_dir,
                   tables=not doc)
    if doc:
        rewritten, kept = fill_doc(doc, blocks)
        where = (f"{len(rewritten)} blocks of {doc} rewritten"
                 + (f", {', '.join(kept)} left as they were" if kept else ""))
    else:   # no page to fill: the blocks in one file beside the data
        doc = os.path.join(data_dir, "tables.md")
        _write(doc, "".join(f"## {name}\n\n{text}" for name, text in blocks.items()))
        where = f"tables in {doc}"
    print(f"convgen study-report: {len(ours)} result lines from {len(results)} files; {where}; "
          f"files in {data_dir}")
    return 0

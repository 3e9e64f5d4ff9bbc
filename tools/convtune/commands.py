"""The tuning lab's commands: `convgen tune`, `tuning-stats`, `tuning-export`,
`train-selector` and `eval-selector`, with their flags (convgen.commands finds them)."""
from __future__ import annotations

import os
import shlex

from convgen import backend, cli, gpus, run_flags
from convgen.commands import Command
from convgen.errors import ConvgenError
from convgen.flags import (as_text, choice, flag_table, listed, nonneg, one_of, positive,
                           positive_real, scan, split_flags, switch, timestamp)
from convtune import cluster, keys, models, store, tuning_db, tuning_text

DIRECTION_OPERATION = {"fwd": "conv2d", "bwd_data": "conv2d_bwd_data",
                        "bwd_weight": "conv2d_bwd_weight"}


TUNE_FLAGS = flag_table(
    ("convgen tune (every other flag is the problem's, as in a test; -x2 is implied)", [
        ("db", "db", as_text, "the tuning database to fill (created when missing); "
         "`convgen tuning-export` then writes what it measured into tuning/data",
         run_flags.TUNING_DB_DEFAULT),
        ("lines", "lines", as_text, "a file of problems: one convgen flag set per line (# starts a "
         "comment line; a pipe and what follows it are dropped)", ""),
        ("layers", "layers", one_of("issue", "selector", *models.NETWORKS),
         "a model's layers, NHWC/KYXC: issue (the seven layers of docs/conv-benchmark.md), "
         + ", ".join(models.NETWORKS) + " (models.py), or selector: the selector's training "
         "set (every network, batches 1 to 256; --batch and --types do not apply)", ""),
        ("batch", "batch", listed(positive), "batch sizes of --layers", "256"),
        ("types", "types", listed(run_flags.dtype_name), "types of --layers", "f16,bf16"),
        ("directions", "directions", listed(choice(DIRECTION_OPERATION)),
         "directions of --layers: fwd, bwd_data, bwd_weight", "all three"),
        ("max_configs", "max_configs", positive, "measure at most the first N configs of the space",
         "all"),
        ("top", "top", positive, "measure only the N configs the selector model (the problem's "
         "-selector) ranks first, its pick first; a problem no model ranks is searched whole. "
         "The best is marked as of those N, and no selector trains on the problem until its "
         "whole space is measured", "all"),
        ("jobs", "jobs", positive, "configs compiled at once", "the CPU count"),
        ("retime_before", "retime_before", timestamp,
         "time again every config that ran and was timed before this UTC time "
         "(YYYY-MM-DDTHH:MM:SS, as the database's measured_at; a stopped run given the same "
         "time goes on where it stopped)", "off"),
        ("retime_under", "retime_under", positive_real,
         "with --retime-before: only the configs whose time was under this many ms (a launch "
         "whose Python outlasts its GPU work was timed as the host's time; above the bound "
         "the GPU's own time was measured)", "every one"),
        ("allow_cpu", "allow_cpu", switch(),
         "in Triton's interpreter, still choose a best (its times mean nothing)", "off"),
        ("ray", "ray", cluster.address, "run each problem as a task on a Ray cluster: "
         "alone, a new cluster on this machine ($RAY_ADDRESS: a running one); =auto, the "
         "cluster this machine joined; =HOST:PORT, that cluster's head (docs/scale-out.md). "
         "One task per problem and GPU; what a task measured is merged into --db as it "
         "finishes", "off"),
        ("ray_workers", "ray_workers", positive, "with --ray, a new local cluster's CPUs: "
         "tasks at once where there is no GPU", "the machine's CPUs"),
        ("dry_run", "dry_run", switch(), "measure nothing: print each problem's space, one "
         "-perf_config string per line, in the order it would be measured (on any machine)",
         "off"),
        ("target", "target", one_of(*gpus.ARCHS),
         "with --dry-run: the space on this arch (its reference device, convgen/gpus.py), "
         "not this machine's", "this machine's device"),
    ]))


TUNING_STATS_FLAGS = flag_table(
    ("convgen tuning-stats: what the tracked tuning data holds, one line per (arch, device, "
     "Triton version): ARCH DEVICE TRITON problems=N (with a checked best) measurements=M", [
        ("data", "data", as_text, "the folder of tracked tuning data (text)",
         "$CONVGEN_TUNING_DATA, else tuning/data"),
        ("lines", "lines", as_text, "instead, how many problems of this list (as convgen tune "
         "--lines takes it) each device has searched through the whole tuning space: "
         "ARCH DEVICE TRITON searched=K of=N", "off"),
    ]))


TUNING_EXPORT_FLAGS = flag_table(
    ("convgen tuning-export: write what a tuning database measured beyond the tracked data "
     "as new text files (one per arch, device and direction), to commit as they are", [
        ("db", "db", as_text, "the tuning database whose rows to write", run_flags.TUNING_DB_DEFAULT),
        ("data", "data", as_text, "the folder of tracked tuning data: what it holds is not "
         "written again, and the new files go there", "$CONVGEN_TUNING_DATA, else tuning/data"),
        ("out", "out", as_text, "write the new files here instead (a GPU machine's output folder), "
         "to copy into the tracked data", "the -data folder"),
    ]))


def _selector_trees() -> str:
    from convtune import selector  # lightgbm's settings: for --help alone, a run does not pay
    return str(selector.TREES)


SELECTOR_FLAGS = flag_table(
    ("convgen train-selector / eval-selector", [
        ("db", "db", as_text, "the tuning database to learn from", run_flags.TUNING_DB_DEFAULT),
        ("arch", "arch", as_text, "the device arch whose measurements to use (sm90, gfx942, ...)",
         "sm90"),
        ("device", "device", as_text, "learn from this device's measurements alone (its name as "
         "the database and nvidia-smi spell it, e.g. 'NVIDIA H100 80GB HBM3'); train-selector "
         "still writes --out, by default the shipped model", "every device of the arch"),
        ("test_device", "test_device", as_text,
         "eval-selector: judge the picks on this device's problems alone, each by the fold's "
         "model that learnt from --device's problems of the other folds (a shape is in one fold "
         "on every device; one that --device never measured, fold 0's); the table adds the best "
         "config another device measured for them",
         "none"),
        ("out", "out", as_text, "train-selector: the model file to write",
         "tuning/models/ARCH.json"),
        ("warm_start", "warm_start", as_text,
         "train-selector: a model to continue from (its trees kept, more added)", "none"),
        ("trees", "trees", positive, "boosting rounds (a warm start adds fewer)", _selector_trees),
        ("folds", "folds", positive, "cross-validation folds, grouped by shape (eval-selector; train-selector learns from them the families that keep the rule)", "5"),
        ("group", "group", one_of("shape", "layer"),
         "eval-selector: what a fold holds out whole: shape (a layer at one batch) or layer "
         "(a layer at every batch measured)", "shape"),
        ("shuffles", "shuffles", nonneg,
         "eval-selector: as many more cross-validations with the groups dealt into folds by "
         "a seeded hash (seeds 1, 2, ...); prints and writes (`shuffled`) the mean of their numbers "
         "with the first's", "0"),
        ("json", "json", as_text, "eval-selector: write the evaluation here as JSON", "none"),
    ]))


def parse_selector(argv: list[str]) -> dict:
    v = scan([str(a) for a in argv], SELECTOR_FLAGS)
    db = store.resolve(v.get("db", ""))
    if db is None:
        raise ConvgenError(f"no tuning database to learn from ({store.why_none()}; give --db)",
                           field="db")
    return {"db": db, "arch": v.get("arch", "sm90"), "out": v.get("out"),
            "warm_start": v.get("warm_start"), "trees": v.get("trees"),
            "folds": v.get("folds", 5), "group": v.get("group", "shape"),
            "shuffles": v.get("shuffles", 0), "json": v.get("json"),
            "device": v.get("device"), "test_device": v.get("test_device")}


def flag_lines(path: str) -> list[tuple[int, list[str]]]:
    """(line number, words) of each problem line of a `--lines` file: one convgen flag set a
    line, # starting a comment line, a pipe and what follows it dropped."""
    try:
        with open(path) as f:
            return [(number, shlex.split(line.split("|")[0])) for number, line in enumerate(f, 1)
                    if line.strip() and not line.lstrip().startswith("#")]
    except OSError as e:
        raise ConvgenError(f"--lines: cannot read '{path}': {e.strerror}") from None


def parse_tune(argv: list[str]) -> dict:
    """{"configs": [RunConfig, ...], "db": path, "max_configs", "top", "jobs", "allow_cpu",
    "retime_before", "retime_under"}."""
    mine, rest = split_flags([str(a) for a in argv], TUNE_FLAGS)
    v = scan(mine, TUNE_FLAGS)
    flag_sets = []
    if "lines" in v:
        flag_sets += [words for _, words in flag_lines(v["lines"])]
    if "layers" in v:
        directions = v.get("directions", tuple(DIRECTION_OPERATION.values()))
        if v["layers"] == "selector":
            # each shape's directions together, in the set's order (a stopped run has some
            # of every network)
            flag_sets += [["--operation", op, "-t", t, *layer_args(layer, batch),
                           "-in_layout=nhwc", "-fil_layout=kyxc", "-out_layout=nhwk"]
                          for _, layer, batch, t in models.selector_set() for op in directions]
        else:
            layers = {"issue": models.CONV_BENCH_LAYERS, **models.NETWORKS}[v["layers"]]
            for op in directions:
                for t in v.get("types", ("f16", "bf16")):
                    for batch in v.get("batch", (256,)):
                        flag_sets += [["--operation", op, "-t", t, *layer_args(layer, batch),
                                       "-in_layout=nhwc", "-fil_layout=kyxc", "-out_layout=nhwk"]
                                      for layer in layers]
    if rest:
        flag_sets.append(rest)
    if not flag_sets:
        raise ConvgenError("no problem to tune: give a problem's flags, --lines or --layers")
    configs, words_of = [], []
    for words in flag_sets:
        words = [w for w in words if w not in ("convgen", "%convgen", "rocmlir-gen")]
        try:
            configs.append(cli.parse(words + ["-x2"]))
        except ConvgenError as e:
            raise cli.named_error(e, words) from None
        words_of.append(words + ["-x2"])
    if "top" in v and "max_configs" in v:
        raise ConvgenError("--top and --max-configs: one or the other (the model's first N, "
                           "or the space's)")
    if "retime_under" in v and "retime_before" not in v:
        raise ConvgenError("--retime-under: only with --retime-before (what was timed before it, "
                           "and took less)")
    if "target" in v and not v.get("dry_run"):
        raise ConvgenError("--target: only with --dry-run (a space is measured on the device "
                           "that is here)")
    if v.get("dry_run"):
        return {"configs": configs, "dry_run": True, "target": v.get("target"),
                "max_configs": v.get("max_configs")}
    if "ray_workers" in v and v.get("ray") is None:
        raise ConvgenError("--ray-workers: only with --ray (the tasks a new local cluster "
                           "runs at once)")
    return {"configs": configs, "db": store.resolve(v.get("db", ""), writing=True),
            "max_configs": v.get("max_configs"), "top": v.get("top"), "jobs": v.get("jobs"),
            "allow_cpu": v.get("allow_cpu", False), "retime_before": v.get("retime_before"),
            "retime_under": v.get("retime_under"), "ray": v.get("ray"),
            "ray_workers": v.get("ray_workers"), "words": words_of}


def layer_args(layer, batch: int) -> list[str]:
    """convgen size flags (rocmlir-gen spellings) for a layer of models.py."""
    c, k, hw, f, s, pad, g = layer[:7]
    out = [f"-batchsize={batch}", f"-groupsize={g}", f"-in_channels={c}", f"-out_channels={k}",
           f"-in_h={hw}", f"-in_w={hw}", f"-fil_h={f}", f"-fil_w={f}",
           f"-conv_stride_h={s}", f"-conv_stride_w={s}", f"-padding_h={pad}", f"-padding_w={pad}"]
    if models.dilation(layer) > 1:
        out += [f"-dilation_h={models.dilation(layer)}", f"-dilation_w={models.dilation(layer)}"]
    return out


def tune_line(layer, batch: int, direction: str, dtype: str = "f16") -> str:
    """A `convgen tune --lines` line of one layer of models.py, channels innermost."""
    return " ".join([f"--operation {DIRECTION_OPERATION[direction]} -t {dtype}", *layer_args(layer, batch),
                     "-in_layout=nhwc -fil_layout=kyxc -out_layout=nhwk"])


def model_run_line(layer, batch: int, direction: str, dtype: str, layouts: tuple[str, str, str]) -> str:
    """A RUN line testing one layer of models.py with the suite's substitutions (input,
    filter and output layouts given as letters)."""
    lay_in, lay_fil, lay_out = layouts
    return (f"%convgen --operation {DIRECTION_OPERATION[direction]} -t {dtype} "
            f"-in_layout={lay_in} -fil_layout={lay_fil} -out_layout={lay_out} "
            + " ".join(layer_args(layer, batch))
            + " %pv %random_data %xdlops -RMS_threshold %rms_threshold -absDiff_threshold "
              "%abs_threshold -relDiff_threshold %rel_threshold | FileCheck %s")


def _tuning_command(name: str, args: list[str]) -> int:
    """convgen tuning-stats / tuning-export."""
    v = scan(args, TUNING_STATS_FLAGS if name == "tuning-stats" else TUNING_EXPORT_FLAGS)
    folder = v.get("data") or tuning_text.data_dir()
    if not os.path.isdir(folder):
        raise ConvgenError(f"'{folder}' is not a folder", field="data")
    if name == "tuning-stats" and "lines" in v:
        shapes = {tuple(keys.problem_key(c.problem, "", "", "", "")[k] for k in tuning_db.SHAPE_COLUMNS)
                  for c in parse_tune(["--db", "unused.sqlite", "--lines", v["lines"]])["configs"]}
        for (arch, device, triton), done in sorted(tuning_text.searched(folder).items()):
            print(f"{arch} {shlex.quote(device)} {triton} searched={len(shapes & done)} of={len(shapes)}")
        return 0
    if name == "tuning-stats":
        for arch, device, triton, problems, rows in tuning_text.stats(folder):
            print(f"{arch} {shlex.quote(device)} {triton} problems={problems} measurements={rows}")
        return 0
    db = v.get("db") or os.environ.get("CONVGEN_TUNING_DB")
    if db and not os.path.exists(db):
        raise ConvgenError(f"tuning database '{db}' does not exist", field="db")
    path = db or store.open_store(folder)
    out = v.get("out")
    if out and not os.path.isdir(out):
        raise ConvgenError(f"'{out}' is not a folder", field="out")
    with tuning_db.TuningDB(path) as source:
        written, untimed = source.export(folder, out)
    for f in written:
        problems = sum(1 for _ in tuning_text.read_batch(f))
        print(f"convgen tuning-export: {f}: {problems} problem(s), {os.path.getsize(f)} bytes")
    if not written:
        print(f"convgen tuning-export: {store.describe(path)} holds nothing that {folder} does not")
    if untimed:
        print(f"convgen tuning-export: {untimed} row(s) of the interpreter left out (its times mean "
              "nothing: tune on a GPU)")
    return 0


def _selector(name: str, args: list[str]) -> int:
    from convtune.evaluation import main as selector_main  # lightgbm, numpy
    return selector_main(name, parse_selector(args))


def dry_run(configs, target: str | None, max_configs: int | None) -> int:
    """Each problem's tuning space on `target` (else this machine's device): a `#` line
    naming the problem and the device, then one -perf_config string per config."""
    from convtune import space  # torch and Triton (the kernel modules)
    be = backend.of_arch(target) if target else backend.current()
    with backend.cross_compiling(target) if target else _nothing():
        for config in configs:
            p = config.problem
            found = space.configs(p, be) if config.kernel.use_matrix_cores else []
            print(f"# {p.describe()}: {len(found)} configs on {be.arch} ({be.device_name()})"
                  + ("" if config.kernel.use_matrix_cores else " (the FMA path is not tuned)"))
            for cfg in found[:max_configs]:
                print(f"-perf_config={cfg.describe()}")
    return 0


def _nothing():
    import contextlib
    return contextlib.nullcontext()


def _tune(name: str, args: list[str]) -> int:
    v = parse_tune(args)
    if v.get("dry_run"):
        return dry_run(v["configs"], v["target"], v["max_configs"])
    backend.ensure_interpreter_if_no_gpu()   # before Triton is imported: its own jit functions
    from convtune.tune import report_problem, report_tuning, tune, tune_on_ray  # torch and Triton
    options = dict(jobs=v["jobs"], max_configs=v["max_configs"], allow_cpu=v["allow_cpu"],
                   done=report_problem, retime_before=v["retime_before"],
                   retime_under=v["retime_under"], top=v["top"])
    if v["ray"] is None:
        return report_tuning(tune(v["configs"], v["db"], **options), v["db"])
    with cluster.Cluster(v["ray"], v["ray_workers"]) as fleet:
        return report_tuning(tune_on_ray(v["configs"], v["words"], v["db"], fleet, **options),
                             v["db"])


_SELECTOR_ABOUT = ("train-selector fits the config selector (LightGBM on log1p(TFLOPS)) on every "
                   "measurement of\nthe tuning database for one arch and writes the model a run "
                   "without a tuned entry uses;\neval-selector cross-validates it with folds "
                   "grouped by shape (docs/config-selection.md).\n")

COMMANDS = (
    Command("tune", "convgen tune [tune flags] PROBLEM | --lines FILE | --layers NAME",
            "Measures every kernel config of the tuning space (convtune/space.py) on this "
            "device for each problem,\nchecks the fastest with the reference and records "
            "all of it in the tuning database (by default\nthe local store); a run without "
            "-perf_config then takes the best. An interrupted run resumes.\n"
            "`convgen tuning-export` writes what it measured into the tracked data (tuning/data).\n",
            TUNE_FLAGS, _tune),
    Command("tuning-stats", "convgen tuning-stats [--data DIR] [--lines FILE]",
            "What the tracked tuning data (text, tuning/data) holds, one line per device and "
            "Triton version.\n", TUNING_STATS_FLAGS, _tuning_command),
    Command("tuning-export", "convgen tuning-export [--db DB] [--data DIR] [--out DIR]",
            "Writes the rows a tuning database holds beyond the tracked data as new text "
            "files, to commit.\n", TUNING_EXPORT_FLAGS, _tuning_command),
    Command("train-selector", "convgen train-selector [flags]", _SELECTOR_ABOUT,
            SELECTOR_FLAGS, _selector),
    Command("eval-selector", "convgen eval-selector [flags]", _SELECTOR_ABOUT,
            SELECTOR_FLAGS, _selector),
)

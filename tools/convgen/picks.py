"""Which config a run takes, and where it came from (the `#` line says): the fields given
on the command line, else what the tuning lab picks, else the default rule.

The tuning lab (the `convtune` package: tuned bests, the learned selector) sits on top of
the suite, which never imports it by name: `picker()` finds its picker module at run time
(`$CONVGEN_PICKER`, else `convtune.picker`). A picker module has

    pick(problem, backend, tuning_db, selector) -> (KernelConfig | None, source)
        the config for a 2-D matrix-core problem and a phrase saying where it came from;
        None and why not where it has none (the rule is then taken, with that reason); a
        database or model named on the command line that cannot be opened is an error;
    check(tuning_db, selector)
        opens a database or model named on the command line where no pick is asked for (the
        FMA path, a forced config, a 3-D problem), so a wrong path is one error line there too.

Without the lab, every run takes the rule and the `#` line says so; a tuning database or
selector model named on the command line is then an error.
"""
from __future__ import annotations

import os
from dataclasses import replace

from convgen import optional_module
from convgen.backend import Backend
from convgen.errors import ConvgenError
from convgen.kernels.config import KernelConfig, choose, default_config, min_block_k, validate
from convgen.problem import ConvProblem

PICKER = "convtune.picker"
MODEL_SOURCE = "selected by model"   # how a source begins for a model's pick (driver: a pick
                                     # Triton refuses gives way to the rule)


def picker():
    """The picker module ($CONVGEN_PICKER, else convtune.picker), or None where it is not
    importable."""
    return optional_module(os.environ.get("CONVGEN_PICKER") or PICKER)


def _no_lab(what: str) -> str:
    return f"{PICKER.partition('.')[0]} (the tuning lab) is not importable, so {what} has no use"


def nearest_tile(problem: ConvProblem, use_dot: bool, fields: dict) -> tuple[dict, list[str]]:
    """A rocMLIR perf string's fields moved to the nearest tile our kernels run, and what
    moved ("block_k 4 -> 16"). rocMLIR's kernels take K tiles of 4 or 8 elements; the
    matrix-core path here takes blocks of at least 16 (32 for 8-bit types)."""
    moved, out = [], dict(fields)
    if use_dot:
        for name, low in (("block_m", 16), ("block_n", 16), ("block_k", min_block_k(problem))):
            if name in out and out[name] < low:
                moved.append(f"{name} {out[name]} -> {low}")
                out[name] = low
    return out, moved


def select(problem: ConvProblem, backend: Backend, use_dot: bool, overrides: dict | None,
           db_path: str | None, selector_path: str | None = None,
           perf_form: str | None = None) -> tuple[KernelConfig, str]:
    """(the config to run, where it came from). Fields given on the command line force a
    config (a rocMLIR perf string, `perf_form`, is a tuning hint: its tile is moved to the
    nearest one our kernels run, and the source says so); without them the lab's pick (a
    2-D problem on the matrix-core path), else the default rule."""
    lab = picker()
    if lab is None and (db_path or selector_path):
        raise ConvgenError(_no_lab("a tuning database" if db_path else "a selector model"),
                           field="tuning_db" if db_path else "selector")
    lookup = use_dot and not overrides and not problem.is_3d   # the lab opens both itself
    if lab is not None and (db_path or selector_path) and not lookup:
        lab.check(db_path, selector_path)
    moved = []
    if overrides and perf_form:
        overrides, moved = nearest_tile(problem.depth_slice() if problem.is_3d else problem,
                                        use_dot, overrides)
    hint = (f"; {perf_form} perf string, moved to the nearest tile convgen's kernels run: "
            + ", ".join(moved)) if moved else ""
    if problem.is_3d:
        cfg, source = _select_3d(problem, backend, use_dot, overrides)
        return cfg, source + hint
    if overrides:
        return choose(problem, backend, use_dot, overrides), "set on the command line" + hint
    if not use_dot:
        return choose(problem, backend, use_dot), "default rule"
    if lab is None:
        return (choose(problem, backend, use_dot),
                f"default rule ({PICKER.partition('.')[0]}, the tuning lab, is not importable)")
    cfg, source = lab.pick(problem, backend, db_path, selector_path)
    if cfg is None:
        return choose(problem, backend, use_dot), f"default rule ({source})"
    return cfg, source


def select_run(config, backend: Backend) -> tuple[KernelConfig, str]:
    """select() for a parsed run (cli.parse): its problem, path and kernel options."""
    k = config.kernel
    return select(config.problem, backend, k.use_matrix_cores, k.config_overrides, k.tuning_db,
                  k.selector, k.perf_form)


def _select_3d(problem: ConvProblem, backend: Backend, use_dot: bool,
               overrides: dict | None) -> tuple[KernelConfig, str]:
    """A 3-D problem runs the pointer kernel of its 2-D depth slices once per filter depth
    tap (depth.py): the config is the slices', from the command line or the pointer rule;
    no tuned entry or model knows 3-D problems."""
    q = problem.depth_slice()
    if overrides and (overrides.get("tma") or overrides.get("s2d")):
        which = "tma" if overrides.get("tma") else "s2d"
        raise ConvgenError(f"{which}={overrides[which]}: a 3-D problem runs the pointer kernels "
                           "on its 2-D depth slices", field="perf_config")
    what = f"the kernel of its 2-D depth slices ({q.n} images), once per filter depth tap"
    if overrides:
        return choose(q, backend, use_dot, overrides), f"set on the command line; {what}"
    cfg = replace(default_config(q, backend, use_dot, descriptors=False),
                  **({"max_num_imprecise_acc": 0} if q.dtype.is_fp8 else {}))
    validate(cfg, q, backend, use_dot)
    return cfg, f"default rule; {what}"

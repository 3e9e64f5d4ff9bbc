"""The tuning lab's answer to a run's "which config?" (the interface: convgen/picks.py): the
tuning database's best for exactly this problem on this device (arch, name, Triton
version, kernel source; the nearest Triton version's where this one has none), else the
config the selector model ranks first; neither: None and why."""
from __future__ import annotations

import os

from convgen.kernels.config import KernelConfig, choose, direct_fits, from_text
from convgen.picks import MODEL_SOURCE
from convtune import keys, selector, store, tuning_db


def pick(problem, backend, db_path: str | None,
         selector_path: str | None) -> tuple[KernelConfig | None, str]:
    path = store.resolve(db_path)
    best = None
    if path:
        # a small-group problem's entries under an older kernel source were searched
        # without the direct kernels (kernels/direct.py): not the fastest any more
        best = tuning_db.reader(path).best_near(keys.key_for(problem, backend),
                                                same_kernels=not direct_fits(problem))
    check(None, selector_path)   # even where a tuned entry wins: a wrong path is an error
    where = store.describe(path) if path else None
    if best is not None:
        of = "" if best.searched == tuning_db.SEARCHED_ALL else f" of {best.searched}"
        return (choose(problem, backend, True, from_text(best.config)),
                f"tuned: the fastest measured here{of} ({best.ms:.3f} ms, {best.measured_at}, "
                f"Triton {best.triton}, {where})")
    untuned = f"no tuned entry in {where}" if path else "no tuning database"
    cfg, predicted, model = selector.choose(problem, backend, selector_path)
    if cfg is not None:
        return cfg, (f"{MODEL_SOURCE} {os.path.basename(model)}: predicted {predicted:.1f} "
                     f"TFLOPS; {untuned}")
    return None, f"{untuned}; {predicted}"


def check(db_path: str | None, selector_path: str | None) -> None:
    """Opens a database or model named on the command line even where the run will not
    consult it (the FMA path, a forced config, a 3-D problem, a tuned entry before the
    model): a wrong path is one error line, not a run that quietly used nothing."""
    if db_path:
        with tuning_db.TuningDB(db_path, readonly=True):
            pass
    if selector_path:
        try:
            selector.load(selector_path)
        except ImportError:
            pass   # the matrix path says the selector needs lightgbm; the others never ask it

"""What the selector learns from: every problem of the tuning database measured on an arch
whose tuning finished, with its configs' speeds (load_dataset), as feature matrices."""
from __future__ import annotations

import dataclasses
import functools
from collections import defaultdict

from convgen import gpus
from convgen.backend import of_arch
from convgen.errors import ConvgenError
from convgen.kernels import config as kconfig
from convtune import space as tuning_space
from convtune.features import Device, families_of, feature_rows
from convtune.keys import problem_from_key
from convtune.store import why_none
from convtune.tuning_db import GRAPH_TIMED_SINCE, PER_LAUNCH_TRUSTED_MS, SEARCHED_ALL, TuningDB

SHAPE_COLUMNS = ("n", "c", "k", "g", "h", "w", "y", "x", "stride_h", "stride_w", "pad", "dil_h", "dil_w")


@dataclasses.dataclass
class Problem:
    """One problem of the database on one device, with every config measured for it."""
    key: tuple                 # direction, dtype, layouts and the shape columns
    shape: tuple               # the shape alone: the cross-validation group
    problem: object            # ConvProblem
    device: Device
    configs: list              # KernelConfig, candidates the rule would also accept
    tflops: list               # measured TFLOPS, 0 for a config that failed to compile or check

    @property
    def best(self) -> float:
        return max(self.tflops)

    @property
    def layer(self) -> tuple:
        """The shape less its batch: a network layer at any batch."""
        return self.shape[SHAPE_COLUMNS.index("n") + 1:]

    @functools.cached_property
    def rankable(self) -> list[int]:
        """The configs (indices) a run would rank: those today's tuning space holds (not
        the ones it has dropped since, such as configs that need more shared memory than a
        GPU has; those still set the best), or all where it holds none. Worked out once:
        every cross-validation asks it of every problem it holds out."""
        space = {c.describe() for c in tuning_space.configs(self.problem, _backend_for(self.device.arch))}
        return ([i for i, c in enumerate(self.configs) if c.describe() in space]
                or list(range(len(self.configs))))

    def candidates(self) -> list[int]:
        """The configs (indices) a run picks among: the rankable ones, of short chains where
        any is (as pick_runnable narrows a run's space). Not cached: cross-validation times
        it as part of a selection."""
        ranked = self.rankable
        return [ranked[i] for i in short_chains(self.problem, [self.configs[i] for i in ranked])]

    @functools.cached_property
    def candidate_rows(self) -> tuple:
        """(candidates(), their feature rows), worked out once: the parameter sweeps of
        benchmarks/ rank them under every assignment of the shapes to folds."""
        allowed = self.candidates()
        return allowed, feature_rows(self.problem, [self.configs[i] for i in allowed], self.device)


# What a cross-validation fold holds out whole: a shape (a layer at one batch), or a layer
# at every batch it was measured at (the harder test: a layer never seen at any batch).
GROUPINGS = {"shape": lambda p: p.shape, "layer": lambda p: p.layer}


def _backend_for(arch: str):
    """The Backend the rules of kernels/config.py see for a database's arch (no device needed)."""
    return of_arch(arch)


@functools.cache
def offline_backend(arch: str, device: str):
    """_backend_for(arch), answering `device` for its name: how a selection on that GPU
    ranks, worked out on a machine without it (it asks nothing else of the device)."""
    from dataclasses import astuple

    class Named(type(_backend_for(arch))):
        def device_name(self) -> str:
            return device

        def units(self) -> int:   # not at hand: gpus.DEVICES's count, else none
            known = gpus.device(device)
            return known.units if known else 0
    return Named(*astuple(_backend_for(arch)))


def _drop_host_timed(by_config: dict, space) -> None:
    """One problem's configs are compared with each other. Where its retime is complete
    (every config of today's space, `space()`'s texts, that held a per-launch time under
    tuning_db.PER_LAUNCH_TRUSTED_MS has a graph time), the per-launch times under that bound
    left over go: configs of older spaces, which no retime reaches, would otherwise keep
    times several times too slow beside their neighbours' true ones (a 10 us bwd_weight
    split stored at 75 us). A problem with a few graph rows of another kind (fwd's `tail`
    configs) keeps its per-launch rows: they are the only times of its other configs."""
    def graph_timed(r) -> bool:   # an ok row's error says where capture failed
        return r["status"] == "ok" and r["measured_at"] >= GRAPH_TIMED_SINCE and not r["error"]
    if not any(graph_timed(r) for r in by_config.values()):
        return
    stale = [t for t, r in by_config.items() if r["status"] == "ok" and not graph_timed(r)
             and r["ms"] < PER_LAUNCH_TRUSTED_MS]
    if stale and not set(stale) & set(space()):
        for text in stale:
            del by_config[text]


def load_dataset(db_path: str, arch: str) -> list[Problem]:
    """Every problem measured on `arch` whose tuning finished (it has a best of its whole
    space, or every config of today's space has a time under some kernel version: not a
    `tune --top` or `--max-configs` best alone, whose few configs would teach that the
    fastest of them is the fastest of all), with the configs valid
    for it now. The measurements of all kernel versions count (the latest of each config
    wins; _drop_host_timed leaves out per-launch times a finished retime left behind): a
    kernel edit that changes speed shows up as new rows when its problems are tuned again,
    and a problem whose best went with such an edit still teaches its old times until
    then. A config that compiled but failed, or failed the reference check, counts as 0
    TFLOPS: the model must learn to avoid it; but a failed reference check under an older
    version of its direction's kernels than the newest measured says nothing sure of
    today's (the race docs/traps.md tells of was fixed so), so that config is left out of
    its problem (after the problem counts as finished); the next tune of the problem
    checks it again. A problem whose tuning was stopped part way has only some configs
    measured: its best so far would judge a pick among a few, so it waits for the rest."""
    if db_path is None:   # store.resolve found none
        raise ConvgenError(f"no tuning database: {why_none()} (give --db)", field="db")
    backend = _backend_for(arch)
    problem_columns = ("device", "direction", "dtype", "layouts") + SHAPE_COLUMNS
    with TuningDB(db_path, readonly=True) as db:
        rows = db.rows("SELECT * FROM measurements WHERE arch = ? ORDER BY measured_at", (arch,))
        finished = set(db.con.execute(f"SELECT DISTINCT {', '.join(problem_columns)} FROM best "
                                      "WHERE arch = ? AND searched = ?", (arch, SEARCHED_ALL)))
    newest = {row["direction"]: row["kernel"] for row in rows}   # rows in time order
    grouped: dict[tuple, dict] = defaultdict(dict)
    latest_row = {}
    for row in rows:
        full_key = tuple(row[c] for c in problem_columns)
        grouped[full_key][row["config"]] = row   # the latest wins
        latest_row[full_key] = row
    out = []
    for full_key, by_config in sorted(grouped.items()):
        latest = latest_row[full_key]
        p = problem_from_key(latest)
        space = functools.cache(lambda: [c.describe() for c in tuning_space.configs(p, backend)])
        if full_key not in finished and not set(space()) <= set(by_config):
            continue
        for text in [t for t, r in by_config.items()
                     if r["status"] == "wrong" and r["kernel"] != newest[r["direction"]]]:
            del by_config[text]
        _drop_host_timed(by_config, space)
        configs, tflops = [], []
        for text, row in sorted(by_config.items()):
            try:
                cfg = kconfig.choose(p, backend, True, kconfig.from_text(text))
            except ConvgenError:
                continue   # no longer a config of this problem (the rules changed)
            configs.append(cfg)
            tflops.append(row["tflops"] if row["status"] == "ok" and row["tflops"] else 0.0)
        if configs and max(tflops) > 0:
            out.append(Problem(full_key[1:], tuple(latest[c] for c in SHAPE_COLUMNS), p,
                               Device(arch, latest["device"]), configs, tflops))
    return out


def families(prob: Problem) -> list[str]:
    """The shape families a problem is reported under (besides "overall")."""
    return families_of(prob.problem)


def short_chain(problem, cfg) -> bool:
    """Whether cfg's programs sum at most MAX_CHAIN products in a row. The rule keeps to the
    same bound for accuracy (a depthwise bwd_weight summed 802,816 products in one chain
    and failed the rel bit on the H100); the model, which learns speed only, picked such a
    config and its run failed."""
    return kconfig.longest_chain(problem, cfg) <= kconfig.MAX_CHAIN


def short_chains(problem, configs) -> list[int]:
    """The configs (indices) of short chains (short_chain), or all of them where none is.
    Each chain is worked out once per kconfig.chain_fields: the cross-validation times this
    as part of a selection."""
    short: dict = {}
    keep = []
    for i, cfg in enumerate(configs):
        key = kconfig.chain_fields(cfg)
        if key not in short:
            short[key] = short_chain(problem, cfg)
        if short[key]:
            keep.append(i)
    return keep or list(range(len(configs)))

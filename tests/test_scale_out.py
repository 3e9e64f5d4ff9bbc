"""convgen tune --ray and convgen fuzz --ray on a local Ray cluster of 2 CPU workers (the
interpreter): the same measurements and the same cases as the runs without Ray; a resumed
tune measures only what is missing; a task whose worker dies runs again, and one that
keeps dying is reported while the others finish; each test found is written once."""
from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("ray")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBLEMS = [
    "--operation conv2d -t f16 -batchsize=1 -in_channels=8 -out_channels=8 -in_h=5 -in_w=3 "
    "-fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1",
    "--operation conv2d_bwd_data -t f16 -batchsize=2 -in_channels=8 -out_channels=16 -in_h=3 "
    "-in_w=3 -fil_h=1 -fil_w=1",
    "--operation conv2d_bwd_weight -t f32 -batchsize=1 -in_channels=3 -out_channels=5 -in_h=4 "
    "-in_w=4 -fil_h=2 -fil_w=2",
]


def convgen(*args, cwd=None):
    p = subprocess.run([sys.executable, "-m", "convgen", *map(str, args)], capture_output=True,
                       text=True, timeout=900, cwd=cwd or ROOT)
    return p.returncode, p.stdout + p.stderr


def rows(db) -> set:
    with sqlite3.connect(db) as con:
        return set(con.execute("SELECT direction, dtype, n, c, k, h, w, y, x, config, status "
                               "FROM measurements"))


def bests(db) -> dict:
    with sqlite3.connect(db) as con:
        return {r[0]: r[1] for r in con.execute("SELECT direction, checked FROM best")}


def test_tune_on_ray_measures_what_tune_does_and_resumes(tmp_path):
    lines = tmp_path / "lines.txt"
    lines.write_text("\n".join(PROBLEMS) + "\n")
    alone, fleet = tmp_path / "alone.sqlite", tmp_path / "fleet.sqlite"
    rc, out = convgen("tune", "--db", alone, "--lines", lines, "--max-configs", 3, "--allow-cpu")
    assert rc == 0, out
    # the first problem measured before: the Ray run is sent its rows and measures the rest
    rc, out = convgen("tune", "--db", fleet, "--max-configs", 3, "--allow-cpu", *PROBLEMS[0].split())
    assert rc == 0, out
    rc, out = convgen("tune", "--db", fleet, "--lines", lines, "--max-configs", 3, "--allow-cpu",
                      "--ray", "--ray-workers", 2)
    assert rc == 0, out
    said = [ln for ln in out.splitlines() if ln.startswith("# convgen tune: ") and " s; " in ln]
    assert len(said) == 3, out
    assert sum("0 timed, 3 already measured" in ln for ln in said) == 1, out
    assert sum("3 timed, 0 already measured" in ln for ln in said) == 2, out
    assert rows(fleet) == rows(alone) and len(rows(alone)) == 9
    # each best was checked on the worker that measured it, with the CPU reference
    assert bests(fleet) == bests(alone) == {d: "cpu reference [1 1 1]"
                                            for d in ("fwd", "bwd_data", "bwd_weight")}
    # the rows merged from the tasks are this store's own: tuning-export would write them
    with sqlite3.connect(fleet) as con:
        assert con.execute("SELECT COUNT(*) FROM measurement_rows WHERE source IS NOT NULL").fetchone() == (0,)
    rc, out = convgen("tune", "--db", fleet, "--lines", lines, "--max-configs", 3, "--allow-cpu",
                      "--ray", "--ray-workers", 2)
    assert rc == 0 and out.count("0 timed, 3 already measured, 0 invalid") == 3, out


def test_a_stopped_driver_keeps_what_was_merged_and_the_same_command_goes_on(tmp_path):
    """Ctrl-C on the driver: the problems merged so far stay in the database, the cluster
    goes with the run, and the same command measures only the rest."""
    import signal
    import time
    lines = tmp_path / "lines.txt"
    big = [p.replace("-batchsize=1 ", "-batchsize=8 ").replace("-batchsize=2 ", "-batchsize=8 ")
           for p in PROBLEMS]
    big += [big[0].replace("-in_w=3", f"-in_w={w}") for w in (4, 5, 6, 7, 9)]
    lines.write_text("\n".join(big) + "\n")
    db = tmp_path / "fleet.sqlite"
    args = [sys.executable, "-m", "convgen", "tune", "--db", str(db), "--lines", str(lines),
            "--max-configs", "3", "--ray", "--ray-workers", "1"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT)
    deadline = time.monotonic() + 300
    merged = 0
    while time.monotonic() < deadline and p.poll() is None and not merged:
        time.sleep(0.2)
        if db.exists():
            try:
                with sqlite3.connect(db) as con:
                    merged = con.execute("SELECT COUNT(DISTINCT problem) FROM measurement_rows").fetchone()[0]
            except sqlite3.OperationalError:
                pass
    assert merged and p.poll() is None, ("the run ended before a problem was merged", p.poll(),
                                         p.stdout.read() if p.poll() is not None else "")
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 130 and "convgen: interrupted" in out, out
    kept = rows(db)
    assert 3 <= len(kept) < 3 * len(big), (kept, out)
    rc, out = convgen(*args[3:])
    assert rc == 0, out
    said = [ln for ln in out.splitlines() if ln.startswith("# convgen tune: ") and " s; " in ln]
    assert sum("0 timed, 3 already measured" in ln for ln in said) == len(kept) // 3, out
    assert kept < rows(db) and len(rows(db)) == 3 * len(big)


def test_a_dead_task_runs_again_and_one_that_keeps_dying_is_reported(tmp_path):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {os.path.join(ROOT, 'tools')!r})
        from convtune.cluster import Cluster, RETRIES
        marker = {str(tmp_path / 'died')!r}

        def dies_once(x):
            if not os.path.exists(marker):
                open(marker, "w").close()
                os._exit(1)
            return x

        def always_dies(x):
            with open(marker + "-always", "a") as f:
                f.write("x")
            os._exit(1)

        with Cluster("", 2) as fleet:
            refs = [fleet.remote(dies_once).remote(7), fleet.remote(always_dies).remote(8)]
            got = {{i: (r, type(e).__name__ if e else None) for i, r, e in fleet.as_completed(refs)}}
        print(got[0], got[1], RETRIES)
        """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "(7, None)" in p.stdout and "WorkerCrashedError" in p.stdout, p.stdout + p.stderr
    assert (tmp_path / "died").exists()
    # the task that kept dying ran once and was retried RETRIES times
    from convtune.cluster import RETRIES
    assert len((tmp_path / "died-always").read_text()) == 1 + RETRIES


from test_fuzz import PLANTED  # noqa: E402  (its wrong_when_strided: a bug of forward strides)


def test_fuzz_on_ray_searches_the_seeds_a_search_alone_would_and_writes_each_test_once(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(PLANTED)
    common = ("--types", "f32", "--reference", "cpu", "--quiet", "--impl", f"{planted}:wrong_when_strided")

    def search(where, *args):
        rc, out = convgen("fuzz", *common, "--state", where, "--out", where / "found",
                          "--json", where / "record.json", *args)
        record = json.loads((where / "record.json").read_text())
        with open(where / "cases.jsonl") as f:
            cases = sorted(json.dumps(json.loads(ln)["flags"]) for ln in f)
        return rc, out, record, cases

    rc, out, fleet, fleet_cases = search(tmp_path / "fleet", "--cases", 20, "--seed", 3, "--ray",
                                         "--ray-workers", 2)
    assert rc == 1, out
    assert fleet["seeds"] == [3, 4] and fleet["cases"] == 20, out
    alone_cases, alone_found = [], set()
    for seed in (3, 4):
        rc, out, record, cases = search(tmp_path / f"seed{seed}", "--cases", 10, "--seed", seed)
        alone_cases += cases
        alone_found |= {tuple(f["flags"]) for f in record["failures"]}
    assert fleet_cases == sorted(alone_cases)
    found = [tuple(f["flags"]) for f in fleet["failures"]]
    assert found and len(found) == len(set(found)) and set(found) == alone_found
    written = sorted(os.listdir(tmp_path / "fleet" / "found"))
    assert written == sorted(os.path.basename(f["path"]) for f in fleet["failures"])
    for f in fleet["failures"]:   # each test names the seed that reproduces it alone
        assert "convgen fuzz --seed 3" in open(f["path"]).read() or \
            "convgen fuzz --seed 4" in open(f["path"]).read()


@pytest.mark.parametrize("args, message", [
    (["tune", "-p", "--ray=nonsense"], "nonsense: expected auto, HOST:PORT or ray://HOST:PORT"),
    (["tune", "-p", "--ray=127.0.0.1:1"], "nothing answers at 127.0.0.1:1"),
    (["tune", "-p", "--ray-workers", "2"], "--ray-workers: only with --ray"),
    (["fuzz", "--ray=127.0.0.1:1", "--cases", "1"], "nothing answers at 127.0.0.1:1"),
    (["fuzz", "--ray-tasks", "2"], "--ray-workers and --ray-tasks: only with --ray"),
])
def test_a_bad_ray_flag_is_one_error_line(tmp_path, args, message):
    rc, out = convgen(*args, cwd=tmp_path)
    assert rc == 2 and out.strip().splitlines() == [out.strip()] and out.startswith("convgen: error: ")
    assert message in out, out


def test_a_problem_whose_task_never_finished_makes_the_run_exit_1():
    from convtune.tune import TuneResult, report_tuning
    ok = TuneResult("fwd f16 N1", None, None, 3, 0, 0, 1.0)
    lost = TuneResult("fwd f16 N2", None, None, 0, 0, 0, 0.0, "the task failed: WorkerCrashedError",
                      failed=True)
    assert report_tuning([ok], "x.sqlite") == 0
    assert report_tuning([ok, lost], "x.sqlite") == 1


def test_a_search_that_keeps_dying_is_reported_and_the_run_exits_1(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("import os\n\n\ndef dies(request):\n    os._exit(3)\n")
    rc, out = convgen("fuzz", "--types", "f32", "--reference", "cpu", "--quiet", "--impl",
                      f"{planted}:dies", "--cases", 4, "--seed", 5, "--ray", "--ray-workers", 2,
                      "--state", tmp_path / "state", "--json", tmp_path / "record.json")
    assert rc == 1, out
    assert "fuzz: seed 5: the search failed" in out and "fuzz: seed 6: the search failed" in out, out
    record = json.loads((tmp_path / "record.json").read_text())
    assert sorted(x["seed"] for x in record["lost"]) == [5, 6] and record["cases"] == 0
    assert re.fullmatch(r"fuzz: 0 cases, 0 failures, \d+ s", out.strip().splitlines()[-1]), out

"""Run lit on the conv-e2e suite, or on test files kept anywhere else, in this Python.

    scripts/lit [lit options] PATH...       (or: python -m convgen.run_lit ...)

Why not the `lit` script: a `pip install --target .pydeps lit` copy starts with the
path of the Python that installed it, which another machine lacks; this module starts
lit from the running Python (lit 23 has no `python -m lit`).

Why not plain `lit PATH` for a file outside e2e/: lit looks for a lit.cfg.py above
the file and finds none. Each PATH that no lit configuration covers becomes a test of a
throw-away suite whose site configuration points its source root at the PATH's folder
and loads this repository's lit.cfg.py, as a CMake build tree's does: the same
substitutions, features and thresholds apply; the tests' Output/ folders go to a
temporary folder, removed afterwards (give `--param exec_root=DIR` to keep them).

Shards (`--num-shards N --run-shard I`, or LIT_NUM_SHARDS and LIT_RUN_SHARD): lit deals
the tests to shards round-robin in its run order, and its default order ("smart") puts
the tests that failed or took longest on this host first, so two hosts would deal
differently and a test could run twice or never. A sharded run therefore takes
`--order=lexical` (added here when no order is given; lit.cfg.py refuses a sharded run
in any other order, `fixed_order_problem`). `scripts/lit-merge` joins the shards' JSON
outputs (lit's `--output`), checks that no test ran twice and, given the suite's paths,
that every test ran once (`merge`).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile

from convgen import REPO_ROOT as REPO
from convgen import report

LIT_CFG = os.path.join(REPO, "lit.cfg.py")
CONFIG_NAMES = ("lit.site.cfg.py", "lit.cfg.py", "lit.local.cfg")


def _import_lit():
    try:
        import lit.main
    except ImportError:
        pydeps = os.path.join(REPO, ".pydeps")   # pip install --target .pydeps lit filecheck
        if os.path.isdir(pydeps):
            sys.path.append(pydeps)
            os.environ["PYTHONPATH"] = os.pathsep.join(
                p for p in (os.environ.get("PYTHONPATH"), pydeps) if p)
        import lit.main
    return lit.main


def _in_a_suite(path: str) -> bool:
    """Some lit.cfg.py or lit.site.cfg.py covers `path`."""
    d = os.path.abspath(path if os.path.isdir(path) else os.path.dirname(path) or ".")
    while True:
        if any(os.path.exists(os.path.join(d, n)) for n in CONFIG_NAMES[:2]):
            return True
        parent = os.path.dirname(d)
        if parent == d:
            return False
        d = parent


def _test_paths(argv: list[str]) -> list[str]:
    """The test paths of a lit command line, as lit's own parser reads them (an option's
    value, such as --path DIR, is never taken for a test)."""
    import lit.cl_arguments
    saved = sys.argv
    sys.argv = ["lit", *argv]
    try:
        return list(lit.cl_arguments.parse_args().test_paths)
    except SystemExit:        # --help, a bad option: lit itself will say so
        return []
    finally:
        sys.argv = saved


SHARD_FLAGS = ("--num-shards", "--run-shard")
SHARD_ENV = ("LIT_NUM_SHARDS", "LIT_RUN_SHARD")


def _words(argv: list[str], env) -> list[str]:
    """A lit command line's words with those of $LIT_OPTS, which lit reads as its own."""
    return [*argv, *shlex.split(env.get("LIT_OPTS", ""))]


def sharded(argv: list[str], env=os.environ) -> bool:
    """Whether a lit command line (with its environment) runs one shard of the tests."""
    return any(a == f or a.startswith(f + "=") for a in _words(argv, env) for f in SHARD_FLAGS) or any(
        env.get(v) for v in SHARD_ENV)


def _order_given(argv: list[str], env) -> bool:
    return any(a == "--order" or a.startswith("--order=") or a == "--shuffle"
               for a in _words(argv, env))


def with_fixed_order(argv: list[str], env=os.environ) -> list[str]:
    """A sharded command line with `--order=lexical` added where it names no order: every
    host then deals the same tests to the same shard."""
    if sharded(argv, env) and not _order_given(argv, env):
        return ["--order=lexical", *argv]
    return list(argv)


def fixed_order_problem(argv: list[str], order, env=os.environ) -> str | None:
    """Why a lit run cannot be sharded as it is (lit.cfg.py says it and stops), or None:
    a shard in an order other than lexical deals tests by this host's history."""
    name = getattr(order, "value", order)
    if sharded(argv, env) and name != "lexical":
        return (f"a sharded run (--num-shards/--run-shard or {'/'.join(SHARD_ENV)}) needs "
                f"--order=lexical, not {name}: lit deals tests to shards in its run order, and "
                "the other orders differ from host to host, so a test would run twice or never "
                "(scripts/lit adds it)")
    return None


def merge(results: list[str], suite_paths: list[str] | None = None) -> dict:
    """The JSON outputs of a sharded run's shards (lit --output) as one: their tests
    together, elapsed the longest shard's. A test in two shards is an error, and so, with
    `suite_paths` (the paths the shards ran), is a test of the suite in none. Raises
    ValueError saying which."""
    tests, where, elapsed = [], {}, 0.0
    for path in results:
        with open(path) as f:
            data = json.load(f)
        elapsed = max(elapsed, float(data.get("elapsed") or 0.0))
        for t in data.get("tests", []):
            if t["name"] in where:
                raise ValueError(f"{t['name']} ran in two shards: {where[t['name']]} and {path}")
            where[t["name"]] = path
            tests.append(t)
    if suite_paths is not None:
        missing = sorted(set(discovered(suite_paths)) - set(where))
        if missing:
            raise ValueError(f"{len(missing)} test(s) of the suite ran in no shard: "
                             + ", ".join(missing[:10]) + (" ..." if len(missing) > 10 else ""))
    return {"__version__": data.get("__version__") if results else None, "elapsed": elapsed,
            "tests": sorted(tests, key=lambda t: t["name"])}


def discovered(paths: list[str]) -> list[str]:
    """The full names ("conv-e2e :: fwd/x.mlir") of the tests lit finds under `paths`."""
    import subprocess
    out = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "lit"), "--show-tests",
                          *paths], capture_output=True, text=True)
    if out.returncode:
        raise ValueError(f"lit --show-tests {' '.join(paths)} failed: {out.stderr.strip()[-500:]}")
    return [line.strip() for line in out.stdout.splitlines() if " :: " in line]


def merge_main(argv: list[str] | None = None) -> int:
    """scripts/lit-merge OUT.json SHARD.json... [--suite PATH...]"""
    import argparse
    parser = argparse.ArgumentParser(
        prog="lit-merge", description="Join the JSON outputs of a sharded lit run (lit "
        "--output) into one, each test once; with --suite, check that every test ran.")
    parser.add_argument("out", help="the joined JSON output to write")
    parser.add_argument("shards", nargs="+", help="each shard's JSON output")
    parser.add_argument("--suite", nargs="+", metavar="PATH",
                        help="the test paths the shards ran (e2e/): every test must be in one")
    args = parser.parse_args(argv)
    try:
        joined = merge(args.shards, args.suite)
    except (OSError, ValueError, KeyError) as e:
        print(f"lit-merge: error: {e}", file=sys.stderr)
        return 2
    report.write_json(args.out, joined)
    codes: dict[str, int] = {}
    for t in joined["tests"]:
        codes[t["code"]] = codes.get(t["code"], 0) + 1
    print(f"lit-merge: {len(joined['tests'])} tests from {len(args.shards)} shards: "
          + ", ".join(f"{n} {c}" for c, n in sorted(codes.items())))
    bad = {"FAIL", "XPASS", "TIMEOUT", "UNRESOLVED"}
    return 1 if bad & set(codes) else 0


def _site_config(folder: str, source_root: str) -> None:
    with open(os.path.join(folder, "lit.site.cfg.py"), "w") as f:
        f.write("# Written by convgen.run_lit: a suite for tests outside conv-e2e's e2e/.\n"
                f"config.test_source_root = {source_root!r}\n"
                f"config.test_exec_root = {folder!r}\n"
                f"config.e2e_cache_dir = {os.path.join(REPO, 'e2e', 'Output', 'triton-cache')!r}\n"
                f"lit_config.load_config(config, {LIT_CFG!r})\n")


def main(argv: list[str] | None = None) -> int:
    argv = with_fixed_order(list(sys.argv[1:] if argv is None else argv))
    lit_main = _import_lit()
    outside = [t for t in _test_paths(argv) if os.path.exists(t) and not _in_a_suite(t)]
    tmp = None
    try:
        if outside:
            tmp = tempfile.mkdtemp(prefix="conv-e2e-lit-")
            paths = [os.path.abspath(t) for t in outside]
            dirs = [p if os.path.isdir(p) else os.path.dirname(p) for p in paths]
            root = os.path.commonpath(dirs)
            _site_config(tmp, root)
            for t in outside:   # the last occurrence is the positional one
                del argv[len(argv) - 1 - argv[::-1].index(t)]
            for p in paths:
                rel = os.path.relpath(p, root)
                argv.append(tmp if rel == "." else os.path.join(tmp, rel))
        sys.argv = ["lit", *argv]
        try:
            lit_main.main()
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        return 0
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

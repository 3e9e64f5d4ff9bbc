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
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile

from convgen import REPO_ROOT as REPO

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


def _site_config(folder: str, source_root: str) -> None:
    with open(os.path.join(folder, "lit.site.cfg.py"), "w") as f:
        f.write("# Written by convgen.run_lit: a suite for tests outside conv-e2e's e2e/.\n"
                f"config.test_source_root = {source_root!r}\n"
                f"config.test_exec_root = {folder!r}\n"
                f"config.e2e_cache_dir = {os.path.join(REPO, 'e2e', 'Output', 'triton-cache')!r}\n"
                f"lit_config.load_config(config, {LIT_CFG!r})\n")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
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

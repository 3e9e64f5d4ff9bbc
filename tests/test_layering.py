"""The code's shape: the suite (tools/convgen) in layers that import only downward, the lab
packages on top of it (convtune: tuning; convstudy: the fp16 study; convaudit: ISA audits),
which the suite never imports, and no import cycle anywhere in tools/, imports inside
functions counted. A run without the lab takes the rule and says so."""
import ast
import os
import shutil
import subprocess
import sys

import pytest

TOOLS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools")

# The suite's modules, bottom up: a module imports only modules of its own layer or below.
LAYERS = (
    ("facts", ("convgen", "convgen.errors", "convgen.glibc_rand", "convgen.directions", "convgen.gpus",
               "convgen.dtypes", "convgen.perf_text", "convgen.flags", "convgen.kernels",
               "convgen.kernels.common", "convgen.kernels.draw")),
    ("problem, device, thresholds, report", ("convgen.problem", "convgen.backend",
                                             "convgen.tolerance", "convgen.options",
                                             "convgen.report", "convgen.guards")),
    ("kernels", ("convgen.kernels.geometry", "convgen.kernels.spec", "convgen.kernels.s2d",
                 "convgen.kernels.direct", "convgen.kernels.config", "convgen.kernels.conv_fwd",
                 "convgen.kernels.conv_bwd_data", "convgen.kernels.conv_bwd_weight",
                 "convgen.kernels.tma", "convgen.kernels.verify_stats")),
    ("data, launch, references, verdict", ("convgen.inputs", "convgen.depth",
                                           "convgen.kernels.launch", "convgen.implementations", "convgen.reference",
                                           "convgen.kernels.gpu_reference", "convgen.verify")),
    ("the run", ("convgen.picks", "convgen.driver", "convgen.compare", "convgen.commands")),
    ("front ends", ("convgen.run_flags", "convgen.cli", "convgen.in_process", "convgen.split_test",
                    "convgen.lit_format",
                    "convgen.run_lit", "convgen.__main__")),
)
# The packages on top of the suite, and which of the others each may import.
PACKAGES = {"convgen": set(), "convtune": {"convgen"}, "convstudy": {"convgen"},
            "convaudit": {"convgen", "convtune"}, "convfuzz": {"convgen", "convtune"}}
HEAVY = ("torch", "triton", "lightgbm", "matplotlib", "numpy")


def modules(root: str) -> dict:
    """{dotted name: path} of every module under root."""
    out = {}
    for folder, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                out[name[:-len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def imports(root: str) -> dict:
    """{module: {(imported module, line, inside a function, the line's text)}}: every import
    of a module under root, at the top or inside a function, relative ones resolved."""
    mods = modules(root)
    out = {}
    for name, path in mods.items():
        src = open(path).read()
        lines = src.split("\n")
        tree = ast.parse(src)
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        inner = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                 for n in ast.walk(f)}
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for t in targets:
                if t in mods and t != name:
                    found.add((t, node.lineno, id(node) in inner, lines[node.lineno - 1]))
        out[name] = found
    return out


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def problems(root: str) -> list[str]:
    """Everything wrong with the layering of the tree under root, one line each."""
    found = imports(root)
    graph = {m: {t for t, *_ in edges} for m, edges in found.items()}
    rank = {m: i for i, (_, members) in enumerate(LAYERS) for m in members}
    out = [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    for m, edges in sorted(found.items()):
        top = m.split(".")[0]
        if top == "convgen" and m not in rank:
            out.append(f"{m}: in no layer of tests/test_layering.py LAYERS (place it)")
        for t, line, _, _ in sorted(edges):
            other = t.split(".")[0]
            if other != top and other not in PACKAGES.get(top, ()):
                out.append(f"{m}:{line} imports {t}: {top} never imports {other}")
            elif top == other == "convgen" and m in rank and t in rank and rank[t] > rank[m]:
                out.append(f"{m}:{line} imports {t}, a higher layer ({LAYERS[rank[t]][0]})")
    return out


def test_no_cycles_and_every_import_points_down():
    assert problems(TOOLS) == []


def test_the_check_fails_on_an_injected_upward_import(tmp_path):
    tree = tmp_path / "tools"
    shutil.copytree(TOOLS, tree, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    with open(tree / "convgen" / "dtypes.py", "a") as f:
        f.write("\n\ndef _later():\n    from convgen import cli  # noqa: F401\n")
    with open(tree / "convgen" / "problem.py", "a") as f:
        f.write("\n\ndef _tuned():\n    from convtune import tuning_db  # noqa: F401\n")
    found = problems(str(tree))
    assert any(p.startswith("convgen.dtypes:") and "convgen.cli, a higher layer" in p for p in found)
    assert any(p.startswith("convgen.problem:") and "convgen never imports convtune" in p
               for p in found)
    assert any(p.startswith("import cycle:") and "convgen.dtypes" in p for p in found)


def test_imports_inside_functions_defer_a_heavy_module_and_say_so():
    """An import inside a function is there to defer torch, Triton, numpy, lightgbm or
    matplotlib (its line says which), never to dodge a cycle."""
    found = imports(TOOLS)
    loose = [f"{m}:{line}: {text.strip()}" for m, edges in sorted(found.items())
             for _, line, inner, text in sorted(edges) if inner and "#" not in text]
    assert loose == []


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, PYTHONPATH=TOOLS))


SMALL = ["-operation", "conv2d", "-t", "f16", "-batchsize", "2", "-in_channels", "16",
         "-out_channels", "16", "-in_h", "5", "-in_w", "5", "-fil_h", "3", "-fil_w", "3",
         "-pv", "-x2"]
NO_LAB = "import sys; sys.modules.update(convtune=None, convstudy=None, convaudit=None); "


@pytest.mark.parametrize("lab", [False, True])
def test_a_run_without_the_lab_takes_the_rule_and_says_so(lab):
    code = (("" if lab else NO_LAB) + "from convgen import cli; "
            f"raise SystemExit(cli.main({SMALL!r}))")
    p = _run(code)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines()[-1] == "[1 1 1]"
    says = "default rule (convtune, the tuning lab, is not importable)"
    assert (says in p.stdout) != lab, p.stdout


def test_without_the_lab_its_commands_and_flags_are_one_error_line():
    code = (NO_LAB + "from convgen import cli; "
            "print(cli.main(['tune', '--lines', 'x']), cli.main([*" + repr(SMALL) + ", '-tuning_db', 'x.sqlite']))")
    p = _run(code)
    assert p.stdout.split() == ["2", "2"], p.stdout + p.stderr
    errors = p.stderr.strip().splitlines()
    assert len(errors) == 2 and all(e.startswith("convgen: error: ") for e in errors), errors
    assert "unknown command 'tune'" in errors[0]
    assert errors[1].startswith("convgen: error: -tuning_db: convtune (the tuning lab) is not importable")

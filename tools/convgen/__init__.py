"""convgen: compile Triton conv-as-GEMM kernels, run them, and verify them against a reference."""
import functools as _functools
import importlib as _importlib
import os as _os

# The checkout convgen runs from (tools/convgen/ lives two folders below it): the default
# places of the tuning database, the selector's models, the study's files and lit's
# config all hang off it. The one place that knows the layout.
REPO_ROOT = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))


@_functools.cache
def optional_module(name: str):
    """Module `name` of a package on top of the suite (the tuning lab, the study), found at
    run time, or None where that package is not installed; any other import error is raised."""
    try:
        return _importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is not None and (name == e.name or name.startswith(e.name + ".")):
            return None
        raise

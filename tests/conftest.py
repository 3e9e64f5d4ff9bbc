import os
import sys

# No GPU here: kernels run in Triton's interpreter, which must be chosen
# before any @triton.jit function is defined.
try:
    import torch
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
except ImportError:  # pragma: no cover
    pass
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# Importable without `pip install -e .` too: here, and in the `python -m convgen` runs the
# tests start (the GPU machine has no network to install with)
TOOLS = os.path.join(os.path.dirname(HERE), "tools")
sys.path.insert(0, TOOLS)
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (TOOLS, os.environ.get("PYTHONPATH")) if p)

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
# Importable without `pip install -e .` too.
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))

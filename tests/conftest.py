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
sys.path.insert(0, os.path.dirname(__file__))

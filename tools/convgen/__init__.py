"""convgen: compile Triton conv-as-GEMM kernels, run them, and verify them against a reference."""
import os as _os

# The checkout convgen runs from (tools/convgen/ lives two folders below it): the default
# places of the tuning database, the selector's models, the study's files and lit's
# config all hang off it. The one place that knows the layout.
REPO_ROOT = _os.path.dirname(_os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))))

"""convgen: compile Triton conv-as-GEMM kernels, run them, and verify them against a reference."""

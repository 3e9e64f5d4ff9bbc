"""Triton kernels: the conv implicit GEMM under test, and the GPU reference."""

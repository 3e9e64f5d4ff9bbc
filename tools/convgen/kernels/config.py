"""Tile configurations: the `-perf_config` string, and the default chosen per problem.

`-perf_config` takes comma-separated `key=value` pairs, or the same values
positionally in this order:

    block_m, block_n, block_k, num_warps, num_stages, split, waves_per_eu,
    matrix_instr_nonkdim, kpack, max_num_imprecise_acc

e.g. `-perf_config 128,64,32,4,3` or `-perf_config block_m=64,split=8,kpack=2`.
Block sizes are powers of two (>= 16 on the matrix-core path, whose BLOCK_K the
FMA path ignores: it always steps one reduction element at a time). `split`
divides the bwd_weight reduction over programs (other directions need 1).
`waves_per_eu`, `matrix_instr_nonkdim` and `kpack` are AMD compile options and are
applied only on a HIP backend. `max_num_imprecise_acc` (fp8 dots; Triton's
parameter of that name) is how many products NVIDIA's fp8 units may sum at their
own ~14-bit precision before the sum goes to the fp32 accumulator: 0 (the
default for fp8) after every instruction; up to block_k, after that many; above
block_k, Triton's own default (never on sm90, every instruction elsewhere). On
sm90 any positive value tests that fast accumulation (values below the
instruction's 32 act like 0) and the auto thresholds then allow for it
(backend.dot_u_acc). Other devices ignore it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

from convgen.backend import Backend
from convgen.errors import ConvgenError
from convgen.problem import BWD_WEIGHT, ConvProblem


@dataclass(frozen=True)
class KernelConfig:
    block_m: int = 64
    block_n: int = 64
    block_k: int = 32
    num_warps: int = 4
    num_stages: int = 2
    split: int = 1
    waves_per_eu: int | None = None
    matrix_instr_nonkdim: int | None = None
    kpack: int | None = None
    max_num_imprecise_acc: int | None = None

    def describe(self) -> str:
        return ",".join(f"{f.name}={getattr(self, f.name)}" for f in fields(self)
                        if getattr(self, f.name) is not None)

    def compile_options(self) -> dict:
        opts = {"num_warps": self.num_warps, "num_stages": self.num_stages}
        for name in ("waves_per_eu", "matrix_instr_nonkdim", "kpack"):
            if getattr(self, name) is not None:
                opts[name] = getattr(self, name)
        return opts


_ORDER = [f.name for f in fields(KernelConfig)]
MIN_BLOCK_K_1BYTE = 32


def _pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _next_pow2(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def parse_perf_config(text: str) -> dict:
    """Parse `-perf_config` into the fields it sets (the rest keep their defaults)."""
    values: dict = {}
    for pos, item in enumerate(p.strip() for p in text.split(",") if p.strip()):
        key, sep, val = item.partition("=")
        if not sep:
            if pos >= len(_ORDER):
                raise ConvgenError(f"-perf_config '{text}' has more than {len(_ORDER)} values")
            key, val = _ORDER[pos], item
        key = key.strip().lower()
        if key not in _ORDER:
            raise ConvgenError(f"-perf_config key '{key}' is unknown (keys: {', '.join(_ORDER)})")
        try:
            values[key] = int(val)
        except ValueError:
            raise ConvgenError(f"-perf_config {key}='{val}' is not an integer") from None
    return values


def validate(cfg: KernelConfig, problem: ConvProblem, use_dot: bool) -> None:
    for name in ("block_m", "block_n", "block_k", "num_warps"):
        if not _pow2(getattr(cfg, name)):
            raise ConvgenError(f"-perf_config {name}={getattr(cfg, name)} must be a power of two")
    if use_dot and min(cfg.block_m, cfg.block_n, cfg.block_k) < 16:
        raise ConvgenError("-perf_config block sizes must be at least 16 on the matrix-core path")
    if use_dot and cfg.block_k < _min_block_k(problem):
        raise ConvgenError(f"-perf_config block_k={cfg.block_k}: {problem.dtype.name} on the "
                           f"matrix-core path needs block_k >= {_min_block_k(problem)}")
    if cfg.num_stages < 1 or cfg.split < 1:
        raise ConvgenError("-perf_config num_stages and split must be at least 1")
    if cfg.max_num_imprecise_acc is not None and cfg.max_num_imprecise_acc < 0:
        raise ConvgenError(f"-perf_config max_num_imprecise_acc={cfg.max_num_imprecise_acc} "
                           "must be >= 0")
    if cfg.max_num_imprecise_acc and not problem.dtype.is_fp8:
        raise ConvgenError("-perf_config max_num_imprecise_acc applies to fp8 types only")
    if cfg.split > 1 and problem.direction != BWD_WEIGHT:
        raise ConvgenError(f"-perf_config split={cfg.split} applies to bwd_weight only")


def default_config(problem: ConvProblem, backend: Backend, use_dot: bool) -> KernelConfig:
    m, n, r = problem.gemm
    if backend.interpreter:
        # The interpreter pays per program and per loop step, not per element:
        # few, large tiles.
        return KernelConfig(block_m=min(256, max(16, _next_pow2(m))),
                            block_n=min(128, max(16, _next_pow2(n))),
                            block_k=min(64, max(_min_block_k(problem), _next_pow2(r))) if use_dot else 1,
                            num_warps=4, num_stages=1, split=1)
    bn = 128 if n >= 128 else max(16, _next_pow2(n))
    bm = 128 if m >= 128 else max(16, _next_pow2(m))
    if not use_dot:
        return KernelConfig(block_m=min(bm, 64), block_n=min(bn, 64), block_k=1,
                            num_warps=4, num_stages=1, split=_split(problem, bm, bn))
    elem_bytes = problem.dtype.torch_in.itemsize
    bk = 64 if elem_bytes <= 2 else 32
    cfg = KernelConfig(block_m=bm, block_n=bn, block_k=bk,
                       num_warps=8 if bm * bn >= 128 * 128 else 4,
                       num_stages=2 if backend.is_hip else 3,
                       split=_split(problem, bm, bn))
    if backend.is_hip:
        cfg = replace(cfg, waves_per_eu=2 if bm * bn >= 128 * 128 else 0, matrix_instr_nonkdim=16,
                      kpack=1)
    return cfg


def _min_block_k(problem: ConvProblem) -> int:
    # 8-bit matrix instructions (mma k32, wgmma k32, MFMA x16/x32) reduce 32 at a time
    return MIN_BLOCK_K_1BYTE if problem.dtype.torch_in.itemsize == 1 else 16


def _split(problem: ConvProblem, bm: int, bn: int) -> int:
    """bwd_weight: enough programs to fill ~a GPU, with each part at least a few tiles deep."""
    if problem.direction != BWD_WEIGHT:
        return 1
    m, n, r = problem.gemm
    tiles = -(-m // bm) * -(-n // bn) * problem.g
    want = max(1, 256 // max(1, tiles))
    return max(1, min(want, r // 1024, 64))


def choose(problem: ConvProblem, backend: Backend, use_dot: bool, perf_config: str | None) -> KernelConfig:
    cfg = default_config(problem, backend, use_dot)
    if problem.dtype.is_fp8:
        # sum fp8 products in fp32 after every matrix instruction (backend.dot_u_acc)
        cfg = replace(cfg, max_num_imprecise_acc=0)
    if perf_config:
        cfg = replace(cfg, **parse_perf_config(perf_config))
    if not use_dot:
        cfg = replace(cfg, block_k=1)
    validate(cfg, problem, use_dot)
    return cfg

"""Cross-compile the kernels for a GPU that is not here, to prove which instructions they use.

`triton.compile` with an explicit GPUTarget needs no hardware, so CI can check
that the matrix-core path emits `v_mfma` (AMD) or `mma`/`wgmma` (NVIDIA) and
that the FMA path and the GPU reference emit none.

Compiling needs Triton's interpreter off for the whole process (under
TRITON_INTERPRET=1 every @triton.jit function, Triton's own included, is an
interpreter object), so tests run this module as a command:

    python -m convaudit.isa [--targets gfx90a,sm90] [--json]
    python -m convaudit.isa --loads [--targets ...]   # global loads of each conv kernel

Kernels are compiled as a launch would specialize them: integer arguments equal to 1
become constants and those divisible by 16 are marked so, pointers are taken as 16-byte
aligned (convgen's allocations are); without that no load could be proven wide. On HIP a
tensor under 2 GB is marked with a 32-bit pointer range, as Triton's HIP launcher marks it
(HIPBackend.get_tensor_specialization): the compiler then loads through buffer
instructions, with fewer registers.
"""
from __future__ import annotations

import argparse
import collections
import inspect
import json
import os
import re
import sys

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from convgen import backend as backends
from convgen import dtypes, gpus
from convgen.kernels import gpu_reference, launch
from convgen.kernels import verify_stats as vs
from convgen.kernels.config import choose
from convgen.problem import make_problem

# every arch of convgen/gpus.py, as Triton names it
TARGETS = {name: GPUTarget("hip", name, a.wave) if a.vendor == "amd"
           else GPUTarget("cuda", int(name[2:]), a.wave) for name, a in gpus.ARCHS.items()}
MATRIX_RE = {"hip": re.compile(r"\bv_mfma\w*"), "cuda": re.compile(r"\b(?:wgmma|mma)\.[\w.]+")}


def pointer_type(dtype) -> str:
    return "*" + dtypes.of(dtype).triton_name


def compile_kernel(fn, args: dict, constexprs: dict, target: str, options: dict | None = None,
                   aligned: tuple = (), ranged: tuple = ()):
    """Compile `fn` for `target`; `args` maps each runtime parameter to a Triton type string.
    `aligned` names the parameters to treat as multiples of 16, as a launch does for 16-byte
    aligned pointers and such integers (vectorized loads depend on it); `ranged` the
    pointers a HIP launch marks as reaching less than 2 GB (buffer loads depend on it)."""
    declared = inspect.signature(fn.fn if hasattr(fn, "fn") else fn).parameters
    params = list(declared)
    signature, constexprs = {}, dict(constexprs)
    for name in params:
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in args:
            signature[name] = args[name]
        elif declared[name].default is not inspect.Parameter.empty:
            # left out of a launch: its default (None or a constexpr), as a launch binds it
            signature[name] = "constexpr"
            constexprs[name] = declared[name].default
        else:
            raise KeyError(f"no type given for kernel parameter '{name}'")
    attrs: dict = {}
    for a in aligned:
        attrs.setdefault((params.index(a),), []).append(["tt.divisibility", 16])
    for a in ranged:
        attrs.setdefault((params.index(a),), []).append(["tt.pointer_range", 32])
    src = ASTSource(fn, signature, constexprs={k: v for k, v in constexprs.items()}, attrs=attrs)
    opts = backends.of_arch(target).compile_options(dict(options or {}))
    return triton.compile(src, target=TARGETS[target], options=opts)


def assembly(compiled, target: str) -> str:
    return compiled.asm["amdgcn" if TARGETS[target].backend == "hip" else "ptx"]


def matrix_instructions(compiled, target: str) -> list[str]:
    """The distinct matrix-core instructions in the compiled kernel (empty on a pure FMA kernel)."""
    asm = assembly(compiled, target)
    return sorted(set(MATRIX_RE[TARGETS[target].backend].findall(asm)))


def _problem(direction: str, dtype: str, layouts=None, stride=(1, 1), channels: int = 32):
    return make_problem(direction=direction, dtype=dtypes.elem_type(dtype), n=2, g=1, c_total=channels,
                        k_total=64, hi=14, wi=14, y=3, x=3, stride=stride, pad=(1, 1, 1, 1),
                        layouts=layouts)


def _meta_tensors(p, out_dtype):
    """Shape, dtype and strides without memory: enough to build a launch and compile it."""
    import torch
    meta = {}
    for name in p.reads + (p.writes,):
        dt = out_dtype if name == p.writes else p.dtype.torch_dtype
        meta[name] = torch.empty(p.physical_shape(name), dtype=dt, device="meta").permute(
            p.to_logical_perm(name))
    return {k: meta[k] for k in p.reads}, meta[p.writes]


MAX_POINTER_RANGE = 2**31 - 1   # HIPBackend.is_within_2gb


def compile_spec(spec, target: str, options: dict | None = None):
    """A LaunchSpec's kernel compiled for `target` as a launch with its arguments would
    specialize it (_launch_signature; on HIP, the pointer range of tensors under 2 GB)."""
    types, constants, aligned = _launch_signature(spec.runtime)
    ranged = ()
    if TARGETS[target].backend == "hip":
        ranged = tuple(name for name, v in spec.runtime.items()
                       if hasattr(v, "untyped_storage")
                       and v.untyped_storage().nbytes() <= MAX_POINTER_RANGE)
    return compile_kernel(spec.kernel, types, {**spec.constexprs, **constants}, target,
                          options, aligned, ranged)


def _launch_signature(runtime: dict) -> tuple[dict, dict, tuple]:
    """(argument types, arguments that become constants, arguments marked divisible by 16),
    as Triton specializes a launch with these values (every pointer taken as aligned)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    types, constants, aligned = {}, {}, []
    for name, v in runtime.items():
        if isinstance(v, TensorDescriptor):
            block = ",".join(map(str, v.block_shape))
            types[name] = f"tensordesc<{pointer_type(v.base.dtype)[1:]}[{block}]>"
        elif isinstance(v, torch.Tensor):
            types[name] = pointer_type(v.dtype)
            aligned.append(name)
        elif v == 1:
            constants[name] = 1
        else:
            types[name] = "i32"
            if v % 16 == 0:
                aligned.append(name)
    return types, constants, tuple(aligned)


def compile_conv(direction: str, dtype: str, use_dot: bool, target: str, layouts=None,
                 stride=(1, 1), perf_config: dict | None = None, channels: int = 32):
    """The kernel under test for a small problem, as convgen would launch it on `target`;
    `perf_config` holds config fields over the default; `channels` below 16 takes the
    paths whose blocks span filter taps."""
    p = _problem(direction, dtype, layouts, stride, channels)
    cfg = choose(p, backends.of_arch(target), use_dot,
                 perf_config or ({"split": 2} if p.direction.splits_reduction else None))
    return compile_problem(p, cfg, target, use_dot)


def compile_problem(p, cfg, target: str, use_dot: bool = True):
    """The kernel convgen launches for problem `p` with config `cfg` on `target`, compiled
    without memory or a GPU (its tensors are meta tensors)."""
    # what a launch on the GPU decides from its tensors' device (tma.wgmma_waits)
    with backends.cross_compiling(target):
        spec = launch.launch_spec(p, *_meta_tensors(p, p.dtype.out_type.torch_dtype), cfg, use_dot, False)
    return compile_spec(spec, target, cfg.compile_options())


def compile_reference(direction: str, target: str):
    """The GPU reference kernel (the FMA one) for a small problem."""
    import torch
    p = _problem(direction, "f16", stride=(2, 2))
    ins, out = _meta_tensors(p, torch.float32)
    return compile_spec(gpu_reference.launch_spec(p, ins, out), target)


def compile_verify(target: str, layout: int = 2, options: dict | None = None,
                   kernel: str = "verify"):
    """The verifier's statistics kernel ("verify") or its second kernel, which recomputes the
    element-wise values to find the worst elements ("verify-finish"), for fp16 tensors."""
    ints = ("n", "S1", "S2", "S3", "S4", "K0", "K1", "K2", "K3", "K4", "R0", "R1", "R2", "R3", "R4")
    args = dict.fromkeys(ints, "i32")
    args.update(kern_ptr="*fp16", ref_ptr="*fp16", c_ptr="*fp64", part_ptr="*fp64",
                out_ptr="*i64")
    constexprs = dict(LAYOUT=layout, IDX64=False, IS_INT=False, MANT=10, EMIN=-14,
                      NW=len(vs.WORST_COLUMNS), ROWS=vs.ROWS, VEC=vs.MAX_VEC, ITERS=vs.ITERS)
    opts = {**vs.COMPILE_OPTIONS, **(options or {})}
    if kernel == "verify-finish":
        args["progs"] = "i32"
        return compile_kernel(vs.finish_kernel, args, {**constexprs, "PCOLS": vs.PCOLS,
                                                       "RBLOCK": 1024}, target, opts)
    return compile_kernel(vs.verify_stats_kernel, args,
                          {**constexprs, "INT_MIN": -2 ** 31, "STAGES": vs.STAGES}, target, opts,
                          aligned=("kern_ptr", "ref_ptr", "c_ptr", "part_ptr", "n"))


def float64_fmas(compiled, target: str) -> int:
    """How many float64 FMAs the kernel holds. On AMD the IEEE division expands to some
    (correctly rounded); contraction of d - rtol*|val| would add more."""
    pattern = r"\bv_fma_f64\b" if TARGETS[target].backend == "hip" else r"\bfma\.rn\.f64\b"
    return len(re.findall(pattern, assembly(compiled, target)))


CHANNELS_LAST = {"input": "nhwc", "filter": "kyxc", "output": "nhwk"}


def survey(targets) -> list[dict]:
    """Every kernel path x direction (and the reference) on each target: its matrix instructions."""
    rows = []
    for target in targets:
        for direction in ("fwd", "bwd_data", "bwd_weight"):
            for dtype in ("f16", "bf16", "f32"):
                for use_dot in (True, False):
                    k = compile_conv(direction, dtype, use_dot, target, CHANNELS_LAST, (2, 2))
                    asm = assembly(k, target)
                    rows.append({"kernel": "conv", "target": target, "direction": direction,
                                 "dtype": dtype, "path": "dot" if use_dot else "fma",
                                 "matrix": matrix_instructions(k, target),
                                 "tf32": "tf32" in asm, "fma": _has_fma(asm, target)})
            k = compile_reference(direction, target)
            asm = assembly(k, target)
            rows.append({"kernel": "reference", "target": target, "direction": direction,
                         "dtype": "f16", "path": "fma", "matrix": matrix_instructions(k, target),
                         "tf32": "tf32" in asm, "fma": _has_fma(asm, target)})
        for name in ("verify", "verify-finish"):
            k = compile_verify(target, kernel=name)
            fused = compile_verify(target, options={"enable_fp_fusion": True}, kernel=name)
            rows.append({"kernel": name, "target": target, "direction": "-", "dtype": "f16",
                         "path": "-", "matrix": matrix_instructions(k, target), "tf32": False,
                         "fma": _has_fma(assembly(k, target), target),
                         "f64_fmas": float64_fmas(k, target),
                         "f64_fmas_if_fused": float64_fmas(fused, target)})
        k = compile_conv("fwd", "i8", True, target, CHANNELS_LAST)
        rows.append({"kernel": "conv", "target": target, "direction": "fwd", "dtype": "i8",
                     "path": "dot", "matrix": matrix_instructions(k, target), "tf32": False,
                     "fma": False})
        rows.extend(_fp8_rows(target))
    return rows


def _fp8_rows(target: str) -> list[dict]:
    """fp8 forward on both paths, for each fp8 type the backend claims (backend.type_unsupported):
    the claim must compile, and the dot path must reach matrix instructions."""
    be = backends.of_arch(target)
    rows = []
    for dtype in dtypes.FP8_TYPES:
        if be.type_unsupported(dtypes.TYPES[dtype]):
            rows.append({"kernel": "conv", "target": target, "direction": "fwd", "dtype": dtype,
                         "path": "unsupported", "matrix": [], "tf32": False, "fma": False})
            continue
        # "dot-fast": NVIDIA's fp8 units sum on their own (Triton's default on sm90)
        for path, use_dot, perf in (("dot", True, None), ("fma", False, None),
                                    ("dot-fast", True, {"max_num_imprecise_acc": 1 << 30})):
            k = compile_conv("fwd", dtype, use_dot, target, CHANNELS_LAST, perf_config=perf)
            rows.append({"kernel": "conv", "target": target, "direction": "fwd", "dtype": dtype,
                         "path": path, "matrix": matrix_instructions(k, target), "tf32": False,
                         "fma": _has_fma(assembly(k, target), target)})
    return rows


# Global loads in the assembly. NVIDIA: ld.global with an optional vector width and the
# element width (ld.global.v4.b32: 16 bytes); cp.async from global to shared memory with
# its size in bytes (asynchronous); cp.async.bulk.tensor, a TMA load (asynchronous, a whole
# tile). AMD: global_/buffer_load with the size in the name (dwordx4: 16 bytes); one that
# ends in "lds" goes straight to LDS (asynchronous).
_PTX_LOAD = re.compile(r"\bld\.global(?:\.[\w:]+)*?(?:\.v(\d))?\.[bfsu](\d+)\b")
_PTX_CP_ASYNC = re.compile(r"\bcp\.async\.c[ag]\.shared\.global\s*\[[^]]*\],\s*\[[^]]*\],\s*(0x[0-9a-f]+|\d+)")
_PTX_TMA = re.compile(r"\bcp\.async\.bulk\.tensor\.\w+\.shared\S*\.global\b")
_AMD_LOAD = re.compile(r"\b(?:global|buffer)_load_(dwordx(\d)|dword|short_d16\w*|ushort|sshort|"
                       r"ubyte\w*|sbyte\w*|b128|b96|b64|b32|u16|i16|u8|i8)\b([^\n]*)")
_AMD_BYTES = {"dword": 4, "b128": 16, "b96": 12, "b64": 8, "b32": 4}
WIDE = 16   # bytes


def load_widths(compiled, target: str) -> dict:
    """The global loads in a compiled kernel by width (count_loads)."""
    return count_loads(assembly(compiled, target), TARGETS[target].backend)


def load_kinds(asm: str, backend: str) -> dict:
    """The global loads in an assembly text by instruction ("cuda": PTX, "hip": AMDGCN):
    {"buffer_load_dwordx4": 8, "ld.global.v4.b32": 2, "cp.async.cg.shared.global": 16, ...},
    the loads count_loads counts."""
    patterns = (_AMD_LOAD,) if backend == "hip" else (_PTX_LOAD, _PTX_CP_ASYNC, _PTX_TMA)
    return dict(collections.Counter(m.group(0).split()[0] for pattern in patterns
                                    for m in pattern.finditer(asm)))


def count_loads(asm: str, backend: str) -> dict:
    """{"wide": 16-byte global loads (TMA loads included), "narrow": smaller global loads,
    "async": loads that land in shared memory by themselves (cp.async, TMA, AMD's
    direct-to-LDS)} in an assembly text ("cuda": PTX, "hip": AMDGCN)."""
    sizes, asynchronous = [], 0
    if backend == "cuda":
        sizes += [int(vec or 1) * int(bits) // 8 for vec, bits in _PTX_LOAD.findall(asm)]
        copies = [int(n, 0) for n in _PTX_CP_ASYNC.findall(asm)]
        tma = len(_PTX_TMA.findall(asm))
        sizes += copies + [WIDE] * tma
        asynchronous = len(copies) + tma
    else:
        for kind, quads, rest in _AMD_LOAD.findall(asm):
            sizes.append(4 * int(quads) if quads else
                         _AMD_BYTES.get(kind, 2 if ("16" in kind or "short" in kind) else 1))
            asynchronous += rest.rstrip().endswith("lds")
    wide = sum(1 for b in sizes if b >= WIDE)
    return {"wide": wide, "narrow": len(sizes) - wide, "async": asynchronous}


def load_survey(targets, dtype: str = "f16") -> list[dict]:
    """The pointer conv kernel of each direction on each target (matrix-core path,
    channels-last layouts, C = 32, K = 64, 3x3): its global loads by width. (The
    descriptor kernels, sm90's default there, copy whole boxes: tests/test_tma.py.)"""
    return [{"direction": d, "target": t, "dtype": dtype,
             **load_widths(compile_conv(d, dtype, True, t, CHANNELS_LAST, perf_config={
                 "tma": None, **({"split": 2} if d == "bwd_weight" else {})}), t)}
            for t in targets for d in ("fwd", "bwd_data", "bwd_weight")]


def cache_survey(cache_dir: str) -> list[dict]:
    """Global loads of every conv kernel a real run left in a Triton cache directory
    (its .ptx or .amdgcn files): the specialization there is the launch's own, not
    compile_conv's imitation of it."""
    rows = []
    for root, _, files in os.walk(cache_dir):
        for f in sorted(files):
            stem, ext = os.path.splitext(f)
            if ext not in (".ptx", ".amdgcn") or not stem.startswith("conv_"):
                continue
            with open(os.path.join(root, f)) as fh:
                asm = fh.read()
            rows.append({"kernel": stem, "file": os.path.join(root, f),
                         **count_loads(asm, "cuda" if ext == ".ptx" else "hip")})
    return rows


def _has_fma(asm: str, target: str) -> bool:
    if TARGETS[target].backend == "hip":
        return bool(re.search(r"\bv_(?:pk_)?fma|\bv_fmac", asm))
    return "fma.rn.f32" in asm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m convaudit.isa",
                                 description="which instructions each kernel path compiles to")
    ap.add_argument("--targets", default="gfx90a,gfx942,gfx950,sm90")
    ap.add_argument("--json", action="store_true", help="one JSON list on stdout")
    ap.add_argument("--loads", action="store_true",
                    help="global loads of each direction's kernel: DIRECTION TARGET wide=N narrow=N async=N")
    ap.add_argument("--cache", metavar="DIR",
                    help="global loads of the conv kernels compiled into a Triton cache directory "
                         "by real launches: KERNEL wide=N narrow=N async=N FILE")
    args = ap.parse_args(argv)
    if args.cache:
        rows = cache_survey(args.cache)
        if args.json:
            json.dump(rows, sys.stdout)
            return 0
        for r in rows:
            print(f"{r['kernel']} wide={r['wide']} narrow={r['narrow']} async={r['async']} {r['file']}")
        return 0 if rows else 1
    if backends.interpreter_requested():
        print("isa: unset TRITON_INTERPRET to compile for real targets", file=sys.stderr)
        return 2
    targets = [t for t in args.targets.split(",") if t]
    if args.loads:
        rows = load_survey(targets)
        if args.json:
            json.dump(rows, sys.stdout)
            return 0
        for r in rows:
            print(f"{r['direction']} {r['target']} wide={r['wide']} narrow={r['narrow']} async={r['async']}")
        return 0
    rows = survey(targets)
    if args.json:
        json.dump(rows, sys.stdout)
        return 0
    for r in rows:
        print(f"{r['target']:7} {r['kernel']:9} {r['direction']:10} {r['dtype']:4} {r['path']:3} "
              f"{', '.join(r['matrix']) or '(no matrix instructions)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

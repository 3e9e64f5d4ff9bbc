"""`convgen audit --target ARCH`: compile, without the GPU, the conv kernels a device would
launch for the suite's tests (or given command lines), exactly as a real launch on that
target specializes them, and report what the compiler made of each: its matrix
instructions, registers, spills, shared memory (LDS), occupancy, programs per compute unit,
waves on the device, and its global loads.

What a launch specializes, and the audit does too:
- the config a run would take there (the rule, a tuned entry or the model's pick: the same
  `picks.select` a run calls, with the target's Backend and the units of `--device`, else
  of the arch's reference device, convgen/gpus.py);
- integer arguments equal to 1 become constants, those divisible by 16 are marked so,
  pointers are taken as 16-byte aligned, and on HIP a tensor whose storage is under 2 GB
  gets a 32-bit pointer range (convaudit.isa.compile_spec): the compiler then loads
  through buffer instructions, which take fewer registers.

The tests come from lit itself (`--param list_runs` with `--param features_of=ARCH`): the
PR set's RUN lines as the target would run them, its REQUIRES and %if features decided
for that target. Only the conv kernel of each run is compiled (not a split's sum or a
fold's copies) and a 3-D problem's kernel is its 2-D depth slices'.
"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

import torch

from convaudit import isa
from convgen import REPO_ROOT
from convgen import backend as backends
from convgen import cli, gpus, picks
from convgen.errors import ConvgenError
from convgen.kernels import launch
from convtune.commands import flag_lines


@dataclass
class Kernel:
    """One compiled kernel and what the runs that launch it have in common."""
    name: str
    what: str                   # "fwd f16 nhwc 128x128x64 w8 s2 ..."
    config: str
    source: str                 # where the config came from: rule, tuned, model, command line
    matrix_path: bool
    programs: int               # programs of the largest launch (the grid) among its runs
    tests: list = field(default_factory=list)
    run_programs: list = field(default_factory=list)   # each run's programs, as tests
    facts: dict = field(default_factory=dict)
    error: str = ""

    @property
    def from_rule(self) -> bool:
        return self.source == "rule"


# ---- the runs ---------------------------------------------------------------------------

def listed_runs(target: str, paths: list[str], nightly: bool = False) -> list[dict]:
    """The convgen runs lit would make on `target` for the tests under `paths`: JSON records
    of convgen.lit_format.list_runs_record."""
    fd, out = tempfile.mkstemp(prefix="convgen-audit-", suffix=".jsonl")
    os.close(fd)
    try:
        cmd = [sys.executable, "-m", "convgen.run_lit", "-q", "--param", f"list_runs={out}",
               "--param", f"features_of={target}", "--param", f"nightly={int(nightly)}", *paths]
        env = dict(os.environ)
        env.pop("TRITON_INTERPRET", None)
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO_ROOT)
        with open(out) as f:
            runs = [json.loads(line) for line in f if line.strip()]
        if not runs and done.returncode:
            raise ConvgenError(f"lit listed no runs: {(done.stderr or done.stdout).strip()[-300:]}")
        return runs
    finally:
        os.unlink(out)


def line_runs(path: str) -> list[dict]:
    """Runs from a file of convgen flag sets, one per line (`convgen tune --lines`'s form)."""
    return [{"test": f"{path}:{number}", "args": words, "negate": False}
            for number, words in flag_lines(path) if words]


# ---- one run's kernel ---------------------------------------------------------------------

def launch_of(args: list[str], target: str, device: str | None):
    """(problem the kernel runs, config, where it came from, LaunchSpec, whether the kernel
    is on the matrix-core path) of a convgen command line on `target`; ConvgenError where
    convgen would refuse it. The direct kernels (direct=1) sum on FMA units whatever the
    run's path."""
    config = cli.parse(args)
    be = backends.of_arch(target)
    p, use_dot = config.problem, config.kernel.use_matrix_cores
    with backends.cross_compiling(target, device):
        why = be.type_unsupported(p.dtype)
        if why:
            raise ConvgenError(why)
        cfg, source = picks.select(p, be, use_dot, config.kernel.config_overrides,
                                   config.kernel.tuning_db, config.kernel.selector,
                                   config.kernel.perf_form)
        q = p.depth_slice() if p.is_3d else p
        tensors, out = isa._meta_tensors(q, torch_out_dtype(q, p))
        spec = launch.launch_spec(q, tensors, out, cfg, use_dot, False)
    return q, cfg, source, spec, use_dot and not cfg.direct


def torch_out_dtype(q, p):
    """What the kernel writes: the output type, or fp32 (int32) per depth tap of a 3-D one."""
    if p.is_3d:
        return torch.int32 if p.dtype.is_int else torch.float32
    return q.dtype.out_type.torch_dtype


def _grid(spec) -> int:
    """Programs a LaunchSpec's grid launches."""
    return math.prod(spec.grid) if isinstance(spec.grid, (tuple, list)) else int(spec.grid)


# ---- what the compiler made ---------------------------------------------------------------

_AMD_FACTS = {"vgpr": r"\.vgpr_count:\s+(\d+)", "agpr": r"\.agpr_count:\s+(\d+)",
              "sgpr": r"\.sgpr_count:\s+(\d+)", "scratch": r"\.private_segment_fixed_size:\s+(\d+)",
              "vgpr_spills": r"\.vgpr_spill_count:\s+(\d+)", "sgpr_spills": r"\.sgpr_spill_count:\s+(\d+)",
              "waves_per_simd": r"; Occupancy: (\d+)"}

def facts(compiled, target: str, warps: int) -> dict:
    """What the compiler made of one kernel: registers, scratch (spills), shared memory,
    occupancy and programs per unit, matrix instructions, global loads by kind."""
    arch = gpus.arch(target)
    asm = isa.assembly(compiled, target)
    hip = arch.vendor == "amd"
    out = {"shared": int(compiled.metadata.shared), "matrix": isa.matrix_instructions(compiled, target),
           "loads": isa.load_kinds(asm, isa.TARGETS[target].backend)}
    if hip:
        for key, pattern in _AMD_FACTS.items():
            m = re.search(pattern, asm)
            out[key] = int(m.group(1)) if m else 0
        # the registers' limit as LLVM worked it out (its occupancy, waves a SIMD)
        count = dict(regs_per_thread=out["vgpr"], waves_per_simd=out["waves_per_simd"])
    else:
        regs, spill = _ptxas(asm, isa.TARGETS[target].arch)
        out.update(regs=regs, scratch=spill)
        count = dict(regs_per_thread=regs)
    out["programs_per_unit"] = gpus.programs_per_unit(arch, warps, shared=out["shared"], **count)
    # one program a unit where the same kernel with registers to spare would fit two
    roomy = gpus.programs_per_unit(arch, warps, shared=out["shared"], regs_per_thread=1)
    out["two_fit_but_registers"] = out["programs_per_unit"] == 1 and roomy >= 2
    # SGPR spills go to lanes of a VGPR, not memory: shown, not counted as spilling
    out["spills"] = out["scratch"] > 0 or out.get("vgpr_spills", 0) > 0
    return out


def _ptxas(ptx: str, arch: int) -> tuple[int, int]:
    """(registers per thread, spill bytes) ptxas reports for a PTX kernel."""
    from triton.backends.nvidia.compiler import get_ptxas  # NVIDIA's backend alone needs it
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        sm = f"sm_{arch}a" if arch >= 90 else f"sm_{arch}"
        done = subprocess.run([get_ptxas(arch).path, "-v", f"--gpu-name={sm}", src, "-o",
                               os.path.join(d, "k.cubin")], capture_output=True, text=True)
    text = done.stdout + done.stderr
    if done.returncode:
        raise RuntimeError(f"ptxas: {text.strip()[-300:]}")
    regs = re.search(r"Used (\d+) registers", text)
    spill = re.search(r"(\d+) bytes spill stores", text)
    return int(regs.group(1)) if regs else 0, int(spill.group(1)) if spill else 0


# ---- the audit ---------------------------------------------------------------------------

def source_kind(source: str) -> str:
    """rule, tuned, model or command line: where a run's config came from (its # line)."""
    if source.startswith("default rule"):
        return "rule"
    if source.startswith("set on the command line"):
        return "command line"
    return "model" if source.startswith("selected by model") else "tuned"


def describe(q, cfg, use_dot: bool) -> str:
    lay = q.layouts
    return (f"{q.direction.name} {q.dtype.name} {lay['input']}/{lay['filter']}/{lay['output']} "
            f"n{q.n} c{q.c} k{q.k} g{q.g} {q.hi}x{q.wi} f{q.y}x{q.x} s{q.stride_h}"
            f"{' direct' if cfg.direct else '' if use_dot else ' fma'}")


def audit(runs: list[dict], target: str, device: str | None = None, progress=None) -> tuple[list, dict]:
    """(kernels, counts) of the runs on `target`: each distinct kernel compiled once."""
    kernels: dict = {}
    counts = {"runs": 0, "refused": 0, "shell": 0}
    for run in runs:
        if "args" not in run:
            counts["shell"] += 1
            continue
        counts["runs"] += 1
        try:
            q, cfg, source, spec, use_dot = launch_of(run["args"], target, device)
        except ConvgenError:
            counts["refused"] += 1   # a test of convgen's refusals, or a type this target lacks
            continue
        types, constants, _ = isa._launch_signature(spec.runtime)
        name = getattr(getattr(spec.kernel, "fn", spec.kernel), "__name__", "kernel")
        key = (name, tuple(sorted(types.items())),
               repr(sorted({**spec.constexprs, **constants}.items())), cfg.describe())
        k = kernels.get(key)
        if k is None:
            k = kernels[key] = Kernel(name, describe(q, cfg, use_dot), cfg.describe(),
                                      source_kind(source), use_dot, _grid(spec))
            try:
                compiled = isa.compile_spec(spec, target, cfg.compile_options())
                k.facts = facts(compiled, target, cfg.num_warps)
            except Exception as e:   # noqa: BLE001 - a compile error is the audit's finding
                k.error = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:200] if str(e).strip() else ''}"
            if progress:
                progress(k)
        k.tests.append(run["test"])
        k.run_programs.append(_grid(spec))
        k.programs = max(k.programs, k.run_programs[-1])
    return list(kernels.values()), counts


def findings(kernels: list, target: str, device: str | None) -> dict:
    with backends.cross_compiling(target, device):
        ref = backends.cross_device(target)
    units = ref.units if ref else 0
    out = {"kernels": len(kernels), "spilling": [], "no_matrix": [], "one_per_unit": [],
           "errors": [], "units": units, "device": ref.name if ref else target}
    for k in kernels:
        if k.error:
            out["errors"].append(k)
            continue
        f = k.facts
        f["waves"] = (k.programs / (units * f["programs_per_unit"])
                      if units and f["programs_per_unit"] else 0.0)
        if f["spills"]:
            out["spilling"].append(k)
        if k.matrix_path and not f["matrix"]:
            out["no_matrix"].append(k)
        if k.from_rule and f["two_fit_but_registers"]:
            out["one_per_unit"].append(k)
    return out


def row(k: Kernel, target: str) -> str:
    if k.error:
        return f"{k.name:26} {k.what}  {k.config}\n    compile error: {k.error}"
    f = k.facts
    regs = (f"vgpr={f['vgpr']} agpr={f['agpr']} sgpr={f['sgpr']} waves/simd={f['waves_per_simd']}"
            if target.startswith("gfx") else f"regs={f['regs']}")
    loads = " ".join(f"{n}:{c}" for n, c in sorted(f["loads"].items()))
    matrix = ",".join(m.replace("v_mfma_", "") for m in f["matrix"]) or "-"
    return (f"{k.name:26} {k.what}  [{k.config}] ({k.source})\n"
            f"    matrix={matrix} {regs} scratch={f['scratch']}"
            + (f" sgpr_spills={f['sgpr_spills']}" if f.get("sgpr_spills") else "")
            + f" lds={f['shared']} "
            f"programs/unit={f['programs_per_unit']} waves={f['waves']:.2f} "
            f"programs={k.programs}\n    loads: {loads or '-'}")


def summary(target: str, found: dict) -> str:
    return (f"audit {target}: {found['kernels']} kernels, {len(found['spilling'])} spilling, "
            f"{len(found['no_matrix'])} without matrix instructions, "
            f"{len(found['one_per_unit'])} at one program per CU"
            + (f", {len(found['errors'])} not compiled" if found["errors"] else ""))

"""The device: which one runs the kernels, and every fact about it the rest relies on.

The only module that asks "is this the interpreter, CUDA or HIP?". Everything else
asks a `Backend` for a torch device, a capability, the compile options it accepts, or
the lit features it gives (lit.cfg.py runs `python -m convgen.backend`, which prints
the probed device and its features as JSON).

Importing this module imports neither torch nor Triton; `current()` does.
"""
from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from dataclasses import dataclass

from convgen import dtypes, gpus

# Triton 3.9 warns when this is unset; the FMA path is meant to fuse a*b+c.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

# Compile options only Triton's HIP backend takes (CUDA raises KeyError on them).
AMD_COMPILE_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")
MAX_THREADS_PER_PROGRAM = 1024   # NVIDIA and AMD alike

@dataclass(frozen=True)
class Backend:
    kind: str          # "interpreter", "cuda" or "hip"
    arch: str          # "interpreter", "sm90", "gfx90a", ...
    warp_size: int

    @property
    def interpreter(self) -> bool:
        return self.kind == "interpreter"

    @property
    def is_hip(self) -> bool:
        return self.kind == "hip"

    @property
    def visible_devices_variable(self) -> str | None:
        """The variable that narrows a process to some GPUs (lit spreads its workers with it)."""
        if self.interpreter:
            return None
        return "HIP_VISIBLE_DEVICES" if self.is_hip else "CUDA_VISIBLE_DEVICES"

    @property
    def torch_device(self) -> str:
        # ROCm builds of torch call their GPU "cuda" too.
        return "cpu" if self.interpreter else "cuda"

    @functools.cached_property   # the selector asks for each candidate config
    def sm(self) -> int:
        """NVIDIA compute capability as a number (sm90 -> 90); 0 elsewhere."""
        digits = "".join(ch for ch in self.arch if ch.isdigit()) if self.kind == "cuda" else ""
        return int(digits or 0)

    @property
    def has_matrix_cores(self) -> bool:
        if self.kind == "cuda":
            return self.sm >= 70
        if self.kind == "hip":
            return self.arch.startswith(("gfx908", "gfx90a", "gfx94", "gfx95"))
        return True  # the interpreter emulates tl.dot

    @functools.cached_property
    def tma_unavailable(self) -> str | None:
        """None when the descriptor kernels (kernels/tma.py) run here, else why not. sm90+
        copies their boxes with TMA; the interpreter emulates descriptors (CI tests them)."""
        if self.interpreter or (self.kind == "cuda" and self.sm >= 90):
            return None
        return f"{self.arch} has no tensor memory accelerator (NVIDIA sm90 or newer)"

    @property
    def flushes_fp16_subnormals(self) -> bool:
        """MI200 (gfx90a) matrix instructions flush fp16/bf16 subnormal inputs and outputs to
        zero, and no compile option stops it; MI100 (gfx908), MI300 and NVIDIA do not."""
        return self.arch == "gfx90a"

    def bias_unchecked(self, t: dtypes.ElemType, use_dot: bool, input_precision: str,
                       max_num_imprecise_acc: int | None) -> str | None:
        """Why a run's arithmetic does not promise round-to-nearest, so the bias check (which
        assumes it) is off; None when it does.

        - Triton's interpreter truncates fp32 to bf16 (1.0117 becomes 1.0; f16 rounds to
          nearest).
        - A tf32/xf32 dot keeps 10 mantissa bits of each f32 operand, and no vendor promises
          how: Hopper's wgmma drops the low 13 bits, and an H100 run leans -0.74 ulp of f32
          toward zero (e2e/arch/f32_tf32_tensor_cores.mlir). The interpreter computes tf32
          in full fp32, so there it rounds to nearest.
        - Hopper's fast fp8 accumulation (dot_u_acc) truncates its ~14-bit partial sums:
          -0.18 ulp of f32 on an H100 (e2e/arch/fp8_fast_accumulation_nvidia.mlir).
        """
        if self.interpreter and t.out_type.name == "bf16":
            return f"{self.kind} casts fp32 to bf16 by truncation, not to nearest"
        if use_dot and not self.interpreter and t.name == "f32" and input_precision != "ieee":
            return f"a {input_precision} dot on {self.arch} does not round its f32 operands to nearest"
        if use_dot and self.dot_u_acc(t, max_num_imprecise_acc) is not None:
            return f"{self.arch}'s fast fp8 accumulation truncates its partial sums"
        return None

    @property
    def dot_truncates(self) -> bool:
        """The matrix units' fp32 sums may round toward zero (tolerance.bias_lean): NVIDIA's
        tensor cores truncate when they align and add; AMD does not document its MFMA
        rounding, so it is not trusted to round to nearest either. The interpreter's dot is
        numpy's, which rounds to nearest."""
        return not self.interpreter

    @property
    def facts(self) -> gpus.Arch | None:
        """What one SM (CU) of this arch holds (gpus.ARCHS); None for the interpreter and
        an arch the table lacks."""
        return None if self.interpreter else gpus.arch(self.arch)

    def device_name(self) -> str:
        """The GPU's marketing name (the tuning database's key holds it: two parts of one arch
        differ in SMs and clocks); the backend's kind without a GPU; for a GPU that is not
        here, the device its arch stands for (`cross_device`)."""
        if self.interpreter:
            return self.kind
        if not self._here():
            ref = cross_device(self.arch)
            return ref.name if ref else self.arch
        import torch
        return _gpu_name(torch.cuda.current_device())

    def units(self) -> int:
        """SMs (CUs on ROCm) of the device, as it counts them; 0 for the interpreter; for a
        GPU that is not here, the units of the device its arch stands for (0 if none)."""
        if self.interpreter:
            return 0
        if not self._here():
            ref = cross_device(self.arch)
            return ref.units if ref else 0
        import torch
        return gpu_units(torch.cuda.current_device())

    def _here(self) -> bool:
        """Whether this backend is the GPU this process runs on (so torch can answer for
        it): not while cross-compiling, nor for another arch's Backend (`of_arch`: a rule
        or a space asked about a GPU that is not here), which the arch's reference device
        answers for."""
        return _CROSS_TARGET is None and self == current()

    @property
    def max_warps(self) -> int:
        """The most warps (wavefronts) one program may have."""
        return MAX_THREADS_PER_PROGRAM // max(self.warp_size, 32)

    def type_unsupported(self, t: dtypes.ElemType) -> str | None:
        """Why this device cannot run a convolution over `t`, or None when it can.

        Only fp8 is limited. What Triton can compile was checked by cross-compiling
        (tests/test_isa.py): OCP fp8 dots need sm89+ on NVIDIA (sm80 has no e4m3
        conversion); AMD gfx90a/gfx942 run OCP fp8 on fp16 matrix cores after an exact
        upcast (not e5m2 on gfx90a, whose fp16 path flushes e5m2's subnormals), gfx950
        natively; the fnuz formats are gfx942's own (gfx950 upcasts them), and NVIDIA has
        none. The interpreter emulates all of them.
        """
        if not t.is_fp8 or self.interpreter:
            return None
        if self.kind == "cuda":
            if t.fnuz:
                return f"{t.name} (AMD's fnuz fp8) is not supported on NVIDIA GPUs ({self.arch})"
            if self.sm < 89:
                return f"{t.name} needs an NVIDIA GPU of sm89 or newer, this one is {self.arch}"
            return None
        ok = ("gfx94", "gfx95") if t.fnuz else ("gfx90a", "gfx94", "gfx95")
        if not self.arch.startswith(ok):
            return f"{t.name} is not supported on {self.arch} (supported: {', '.join(ok)}*)"
        if t.fp8 == "e5m2" and not t.fnuz and self.flushes_fp16_subnormals:
            # its subnormals become fp16 subnormals, which MI200's fp16 matrix path flushes
            return f"{t.name} is not supported on {self.arch} (its fp16 matrix path flushes e5m2 subnormals)"
        return None

    def dot_u_acc(self, t: dtypes.ElemType, max_num_imprecise_acc: int | None) -> float | None:
        """The accumulator's unit roundoff on the matrix-core path when it is not fp32's.

        Hopper's fp8 units (wgmma, sm90) keep about 14 bits while they sum products,
        then hand the sum to the fp32 accumulator. Triton promotes to fp32 after every
        instruction when max_num_imprecise_acc is 0 (convgen's default for fp8); None is
        Triton's own default, 2^30 on sm90 (never promote) and 0 elsewhere. Measured on
        an H100 (docs/fp8-tf32-h100.md): exact with 0, RMS about 6e-5 of max|val| with
        Triton's default. 2^-15 with the verifier's 2*u_acc for truncation is 14 bits.
        Other NVIDIA archs, AMD's fp8 MFMA and the interpreter accumulate in fp32.
        """
        if (self.kind == "cuda" and self.arch == "sm90" and t.is_fp8
                and (max_num_imprecise_acc is None or max_num_imprecise_acc > 0)):
            return 2.0 ** -15
        return None

    def compile_options(self, options: dict) -> dict:
        """`options` without the ones this backend's compiler does not take (AMD's, off HIP)."""
        if self.is_hip:
            return dict(options)
        return {k: v for k, v in options.items() if k not in AMD_COMPILE_OPTIONS}

    def lit_features(self) -> list[str]:
        """The lit features tests may REQUIRE on this device."""
        if self.interpreter:
            feats = ["interpreter"]
        else:
            feats = ["gpu", "rocm" if self.is_hip else "cuda", self.arch]
            if self.has_matrix_cores:
                feats.append("matrix-cores")
                if self.is_hip:
                    feats.append("mfma")
            if self.flushes_fp16_subnormals:
                feats.append("subnormal-flush")
        if self.tma_unavailable is None:
            feats.append("tma")   # the tensor-descriptor kernels run here (-perf_config tma=1)
        feats += [t.replace("_", "-") for t in dtypes.FP8_TYPES
                  if self.type_unsupported(dtypes.TYPES[t]) is None]
        return feats

    def memory_bytes(self) -> int:
        """Bytes free for this run's tensors: the GPU's free memory, or the host's."""
        if not self.interpreter:
            import torch
            return int(torch.cuda.mem_get_info()[0])
        return host_memory_bytes()


INTERPRETER = Backend("interpreter", "interpreter", 1)


def of_arch(arch: str) -> Backend:
    """The Backend of a GPU of `arch` ("sm90", "gfx942"), for work done without one: a
    cross-compile, the lit features of another device, a rule asked about it."""
    if arch == "interpreter":
        return INTERPRETER
    if arch.startswith("gfx"):
        facts = gpus.arch(arch)
        return Backend("hip", arch, facts.wave if facts else 64)
    if arch.startswith("sm") and arch[2:].isdigit():
        return Backend("cuda", arch, 32)
    raise ValueError(f"unknown arch '{arch}' (sm80, sm90, ..., gfx908, gfx90a, gfx942, gfx950)")


_CROSS_TARGET = None
_CROSS_DEVICE = None


@contextlib.contextmanager
def cross_compiling(target: str, device: str | None = None):
    """While a launch is built for `target` without its GPU (convaudit cross-compiles with
    meta tensors, which have no device to ask): what `cross_target` answers, and the device
    whose units a launch counts (`device`, a gpus.DEVICES name; else the arch's reference
    device)."""
    global _CROSS_TARGET, _CROSS_DEVICE
    before = _CROSS_TARGET, _CROSS_DEVICE
    _CROSS_TARGET, _CROSS_DEVICE = target, device
    try:
        yield
    finally:
        _CROSS_TARGET, _CROSS_DEVICE = before


def cross_target() -> str | None:
    """The target a launch is being built for without its GPU (`cross_compiling`), else None."""
    return _CROSS_TARGET


def cross_device(arch: str) -> gpus.Device | None:
    """The device a GPU of `arch` that is not here stands for: the one `cross_compiling`
    named where it is of that arch, else the arch's reference device (gpus.REFERENCE_DEVICE)."""
    named = gpus.device(_CROSS_DEVICE) if _CROSS_DEVICE else None
    if named is not None and named.arch == arch.split(":")[0]:
        return named
    return gpus.reference_device(arch)


@functools.lru_cache(maxsize=None)
def _gpu_name(index: int) -> str:
    """The name of GPU `index`, asked of torch once: a selection asks for it every run,
    and torch's call goes through its device properties."""
    import torch
    return torch.cuda.get_device_name(index)


@functools.lru_cache(maxsize=None)
def gpu_units(index: int) -> int:
    """SMs (CUs) of GPU `index`, asked of torch once."""
    import torch
    return torch.cuda.get_device_properties(index).multi_processor_count


def host_memory_bytes() -> int:
    """Available host memory (MemAvailable; the physical total where /proc is missing)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def interpreter_requested() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def probe() -> tuple[Backend, str]:
    """The device Triton would use, and a note when something went wrong on the way."""
    if interpreter_requested():
        return INTERPRETER, ""
    try:
        import torch
    except Exception as e:   # noqa: BLE001 - no torch at all: nothing but the interpreter
        return INTERPRETER, f"{type(e).__name__}: {e}"
    if not torch.cuda.is_available():
        return INTERPRETER, ""
    try:
        from triton.runtime import driver
        target = driver.active.get_current_target()
        if target.backend == "hip":
            return Backend("hip", str(target.arch).split(":")[0], target.warp_size), ""
        return Backend("cuda", f"sm{target.arch}", target.warp_size), ""
    except Exception as e:   # noqa: BLE001 - a broken driver still leaves torch's view
        props = torch.cuda.get_device_properties(0)
        if getattr(torch.version, "hip", None):
            arch = str(getattr(props, "gcnArchName", "gfx")).split(":")[0]
            return Backend("hip", arch, 64), f"triton driver: {e}"
        return Backend("cuda", f"sm{props.major}{props.minor}", 32), f"triton driver: {e}"


@functools.lru_cache(maxsize=1)
def current() -> Backend:
    # Check the interpreter first: with no GPU the driver raises.
    return probe()[0]


def ensure_interpreter_if_no_gpu() -> None:
    """Switch Triton to its interpreter when there is no GPU; must run before kernels are defined."""
    if interpreter_requested():
        return
    import torch
    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
        current.cache_clear()


def visible_gpus(be: Backend) -> list[str]:
    """The GPUs this process may use, as its visible-devices variable names them (all of
    them, 0..n-1, where the variable is unset); none for the interpreter."""
    if be.interpreter:
        return []
    import torch
    count = torch.cuda.device_count()
    given = os.environ.get(be.visible_devices_variable, "").strip()
    ids = [d.strip() for d in given.split(",") if d.strip()] if given else []
    return ids[:count] if len(ids) >= count else [str(i) for i in range(count)]


def main() -> int:
    """Print the probed device, its lit features and the visible GPUs as one JSON object
    (lit.cfg.py reads it)."""
    be, note = probe()
    json.dump({"kind": be.kind, "arch": be.arch, "warp_size": be.warp_size,
               "features": be.lit_features(), "gpus": visible_gpus(be), "note": note}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

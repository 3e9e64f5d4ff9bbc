"""What the suite knows about GPUs without asking them: per arch, what one compute unit (an
NVIDIA SM, an AMD CU) holds; per device, its units, memory bandwidth and L2. The rule
(kernels/config.py) sizes launches from them, `validate` checks shared memory (LDS)
against them, the selector's features and the audit (convaudit) count occupancy and waves
with them, and a cross-compile for a GPU that is not here takes its arch's reference
device (REFERENCE_DEVICE). backend.py is the only module that asks a GPU; this one is data.

Sources: the vendors' data sheets and ISA guides (AMD CDNA 1-4 ISA reference guides and
Instinct data sheets; NVIDIA Hopper and Ampere tuning guides and data sheets).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Arch:
    """What one compute unit of an arch holds at once, and how its programs are counted.

    shared_per_unit     shared memory (LDS) of one unit, bytes
    shared_per_program  the most one program may take, bytes
    warps_per_unit      warps (wavefronts) resident on one unit at most
    regs_per_unit       32-bit registers of one unit, all lanes of all its SIMDs (AMD:
                        VGPRs, with the AGPRs where the two share one file)
    simds               SIMDs per unit (AMD; NVIDIA's sub-partitions are not counted)
    reg_granule         registers are handed out in blocks of this many per lane
    max_regs_per_thread the most one thread may address
    wave                threads per warp (wavefront)
    separate_agprs      AMD gfx908: accumulation registers are a file of their own
    lds_async           AMD gfx950: Triton copies global memory straight to LDS, so
                        every pipeline stage holds a buffer (one fewer elsewhere)
    """
    name: str
    vendor: str                 # "nvidia" or "amd"
    shared_per_unit: int
    shared_per_program: int
    warps_per_unit: int
    regs_per_unit: int          # 32-bit registers of one unit, all lanes
    max_regs_per_thread: int
    reg_granule: int
    wave: int = 32
    simds: int = 1
    separate_agprs: bool = False
    lds_async: bool = False

    @property
    def regs_per_simd_lane(self) -> int:
        """Registers one lane of one SIMD has (AMD's VGPR file; an NVIDIA SM as one SIMD)."""
        return self.regs_per_unit // (self.simds * self.wave)


@dataclass(frozen=True)
class Device:
    """A GPU by the name torch gives it (the tuning database's key holds the name)."""
    name: str
    arch: str
    units: int                  # SMs or CUs
    bandwidth_gbs: float        # peak memory bandwidth, GB/s
    l2_mb: float                # L2 cache, MB (all of it; AMD: all XCDs' together)
    xcds: int = 1               # AMD MI300/MI350: chiplets, each with its own L2


KB = 1024
ARCHS = {a.name: a for a in (
    # Ampere A100 and Hopper H100/H200: 164 and 228 KB of shared memory per SM, 1 KB of
    # which each resident block reserves; 64 warps, 64K registers, 255 per thread
    Arch("sm80", "nvidia", 164 * KB, 163 * KB, 64, 65536, 255, 8),
    Arch("sm90", "nvidia", 228 * KB, 227 * KB, 64, 65536, 255, 8),
    # CDNA 1 (MI100): 256 VGPRs and 256 AGPRs per lane, in separate files, allocated in
    # blocks of 4; 10 waves a SIMD
    Arch("gfx908", "amd", 64 * KB, 64 * KB, 40, 4 * 64 * 256, 256, 4, wave=64, simds=4,
         separate_agprs=True),
    # CDNA 2 (MI200) and 3 (MI300): one file of 512 per lane, VGPRs then AGPRs, allocated
    # in blocks of 8; 8 waves a SIMD; 64 KB of LDS a CU
    Arch("gfx90a", "amd", 64 * KB, 64 * KB, 32, 4 * 64 * 512, 512, 8, wave=64, simds=4),
    Arch("gfx942", "amd", 64 * KB, 64 * KB, 32, 4 * 64 * 512, 512, 8, wave=64, simds=4),
    # CDNA 4 (MI350): 160 KB of LDS a CU
    Arch("gfx950", "amd", 160 * KB, 160 * KB, 32, 4 * 64 * 512, 512, 8, wave=64, simds=4,
         lds_async=True),
)}

DEVICES = {d.name: d for d in (
    Device("NVIDIA H100 80GB HBM3", "sm90", 132, 3350, 50),
    Device("NVIDIA H100 PCIe", "sm90", 114, 2000, 50),
    Device("NVIDIA H100 NVL", "sm90", 132, 3900, 50),
    Device("NVIDIA H200", "sm90", 132, 4800, 50),
    Device("NVIDIA A100-SXM4-80GB", "sm80", 108, 2039, 40),
    Device("NVIDIA A100-SXM4-40GB", "sm80", 108, 1555, 40),
    Device("AMD Instinct MI100", "gfx908", 120, 1229, 8),
    Device("AMD Instinct MI210", "gfx90a", 104, 1638, 8),
    # one of an MI250X's two dies (GCDs): ROCm shows each as a GPU of its own
    Device("AMD Instinct MI250X", "gfx90a", 110, 1638, 8),
    Device("AMD Instinct MI250X/MI250", "gfx90a", 110, 1638, 8),
    Device("AMD Instinct MI300X", "gfx942", 304, 5300, 32, xcds=8),
    Device("AMD Instinct MI300A", "gfx942", 228, 5300, 24, xcds=6),
    Device("AMD Instinct MI325X", "gfx942", 304, 6000, 32, xcds=8),
    Device("AMD Instinct MI355X", "gfx950", 256, 8000, 32, xcds=8),
    Device("AMD Instinct MI350X", "gfx950", 256, 8000, 32, xcds=8),
)}

# The device a cross-compile for an arch stands for (convaudit, the space's dry run): the
# one a user of that arch most likely has
REFERENCE_DEVICE = {"sm80": "NVIDIA A100-SXM4-80GB", "sm90": "NVIDIA H100 80GB HBM3",
                    "gfx908": "AMD Instinct MI100", "gfx90a": "AMD Instinct MI250X",
                    "gfx942": "AMD Instinct MI300X", "gfx950": "AMD Instinct MI355X"}


def arch(name: str) -> Arch | None:
    """The facts of an arch ("sm90", "gfx942"; a feature suffix such as ":sramecc+" is
    dropped), or None for one the table lacks."""
    return ARCHS.get(name.split(":")[0])


def device(name: str) -> Device | None:
    return DEVICES.get(name)


def reference_device(arch_name: str) -> Device | None:
    name = REFERENCE_DEVICE.get(arch_name.split(":")[0])
    return DEVICES[name] if name else None


def programs_per_unit(a: Arch, warps: int, regs_per_thread: int, shared: int,
                      agprs: int = 0, waves_per_simd: int | None = None) -> int:
    """Programs of `warps` warps one unit holds at once, from registers (per thread, rounded
    up to the arch's granule; gfx908's AGPRs, a file of their own, too), shared memory
    (bytes per program) and resident warps; at least 0 (a program that fits nowhere).
    AMD: `waves_per_simd`, where the compiler said it (LLVM's occupancy), stands for the
    registers' limit."""
    granule = a.reg_granule
    regs = -(-max(1, regs_per_thread) // granule) * granule
    if a.vendor == "amd":
        if waves_per_simd is None:
            # each SIMD holds as many waves as its lanes' file has room for (gfx908: the
            # larger of its two files decides)
            if a.separate_agprs:
                regs = max(regs, -(-agprs // granule) * granule)
            waves_per_simd = min(a.warps_per_unit // a.simds, a.regs_per_simd_lane // regs)
        # a program's waves are dealt out over the SIMDs
        by_regs = waves_per_simd * a.simds // warps
    else:
        by_regs = a.regs_per_unit // (regs * 32 * warps)
    by_warps = a.warps_per_unit // warps
    by_shared = a.shared_per_unit // (shared + (KB if a.vendor == "nvidia" else 0)) if shared else by_warps
    return max(0, min(by_regs, by_warps, by_shared))

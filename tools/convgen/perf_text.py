"""The text forms of `-perf_config`, read into convgen's tile fields (kernels/config.py).

    key=value,...           convgen's own fields (block_m=128,split=8,tma=1)
    rocMLIR (upstream), MFMA/xdlops kernels, by version and field count:
      v1 (no prefix, 8)     mPerBlock, nPerBlock, kPerBlock, mPerWave, nPerWave, kPack,
                            forceUnroll, bCopyMore
      v2: (9)               mPerBlock, nPerBlock, kPerBlock, mPerWave, mnPerXdl, kPack,
                            splitKFactor, forceUnroll, bCopyMore
      v3: (11)              ... kPack, splitKFactor, scheduleVersion, outputSwizzle,
                            forceUnroll, bCopyMore
      v4: (14)              mPerBlock, nPerBlock, kPerBlock, mPerWave, nPerWave, mnPerXdl,
                            kPack, splitKFactor, scheduleVersion, outputSwizzle, wavesPerEU,
                            gridGroupSize, forceUnroll, bCopyMore
    rocMLIR, non-accelerated (FMA) kernels:
      v1 (no prefix, 6)     blockSize, mPerBlock, nPerBlock, kPerBlock, mPerThread, nPerThread
      v2: (7), v3: (9)      + splitKFactor; + scheduleVersion, outputSwizzle
    rocMLIR's Triton fork (rocmlirTriton):
      gemm:v1: (11)         mPerBlock, nPerBlock, kPerBlock, kpack, numCTAs, numWaves,
                            matrixInstrNonkdim, splitKFactor, numStages, wavesPerEU,
                            gridGroupSize
      gemm:v2: (17)         + useAsyncCopy, useBlockPingpong, useInThreadTranspose,
                            useBufferOps, useBufferAtomics, scheduleHint

Field orders are rocMLIR's own parsers' (Serializable::deserialize and the visit()
orders of InitParamsAccel / InitParamsNonAccel; rocmlirTriton's GemmParamsAttr::get).

How they map: a tile of mPerBlock x nPerBlock; rocMLIR's K step is kPerBlock * kPack
elements (kPerBlock counts kPack-wide slices); the warps are the tile's waves,
(mPerBlock / mPerWave) * (nPerBlock / nPerWave) (nPerWave = mPerWave where the version
has none), or blockSize / 64; mnPerXdl and matrixInstrNonkdim are Triton's
matrix_instr_nonkdim, wavesPerEU its waves_per_eu, gridGroupSize its GROUP_M, splitKFactor
bwd_weight's split. Code-generation hints with no Triton counterpart (forceUnroll,
bCopyMore, scheduleVersion, outputSwizzle, mPerThread, nPerThread, the gemm:v2 switches)
are read and have no effect: they do not change what is computed. A value that has no
meaning here (numCTAs > 1, an mnPerXdl Triton has no instruction for, a wave that does not
divide its tile) is a ValueError naming the field.
"""
from __future__ import annotations

import re

# convgen's own fields, in kernels/config.KernelConfig's order (cli.py shows them)
ACCEL = {
    None: ("mPerBlock", "nPerBlock", "kPerBlock", "mPerWave", "nPerWave", "kPack", "forceUnroll",
           "bCopyMore"),
    1: ("mPerBlock", "nPerBlock", "kPerBlock", "mPerWave", "nPerWave", "kPack", "forceUnroll",
        "bCopyMore"),
    2: ("mPerBlock", "nPerBlock", "kPerBlock", "mPerWave", "mnPerXdl", "kPack", "splitKFactor",
        "forceUnroll", "bCopyMore"),
    3: ("mPerBlock", "nPerBlock", "kPerBlock", "mPerWave", "mnPerXdl", "kPack", "splitKFactor",
        "scheduleVersion", "outputSwizzle", "forceUnroll", "bCopyMore"),
    4: ("mPerBlock", "nPerBlock", "kPerBlock", "mPerWave", "nPerWave", "mnPerXdl", "kPack",
        "splitKFactor", "scheduleVersion", "outputSwizzle", "wavesPerEU", "gridGroupSize",
        "forceUnroll", "bCopyMore"),
}
NON_ACCEL = {
    1: ("blockSize", "mPerBlock", "nPerBlock", "kPerBlock", "mPerThread", "nPerThread"),
    2: ("blockSize", "mPerBlock", "nPerBlock", "kPerBlock", "mPerThread", "nPerThread",
        "splitKFactor"),
    3: ("blockSize", "mPerBlock", "nPerBlock", "kPerBlock", "mPerThread", "nPerThread",
        "splitKFactor", "scheduleVersion", "outputSwizzle"),
}
TRITON_FORK = {
    1: ("mPerBlock", "nPerBlock", "kPerBlock", "kpack", "numCTAs", "numWaves",
        "matrixInstrNonkdim", "splitKFactor", "numStages", "wavesPerEU", "gridGroupSize"),
    2: ("mPerBlock", "nPerBlock", "kPerBlock", "kpack", "numCTAs", "numWaves",
        "matrixInstrNonkdim", "splitKFactor", "numStages", "wavesPerEU", "gridGroupSize",
        "useAsyncCopy", "useBlockPingpong", "useInThreadTranspose", "useBufferOps",
        "useBufferAtomics", "scheduleHint"),
}
AMD_WAVE = 64          # rocMLIR's blockSize counts threads of 64-wide waves
XDL_WIDTHS = (4, 16, 32)


def parse(text: str, fields: tuple[str, ...]) -> tuple:
    """`-perf_config` text -> ((field, int), ...) over convgen's `fields`."""
    text = text.strip()
    if "=" in text:
        return _own(text, fields)
    m = re.fullmatch(r"(gemm:)?v(\d+):(.*)", text) or re.fullmatch(r"()()(.*)", text)
    fork, version, body = m.group(1), m.group(2), m.group(3)
    values = [v.strip() for v in body.split(",")] if body.strip() else []
    for v in values:
        if not re.fullmatch(r"[+-]?\d+", v):
            raise ValueError(f"'{v}' is not an integer (rocMLIR perf strings are integers "
                             "separated by commas; convgen's own fields are key=value)")
    nums = [int(v) for v in values]
    version = int(version) if version else None
    if fork:
        names = TRITON_FORK.get(version)
        if names is None or len(nums) != len(names):
            raise ValueError(_shapes(f"gemm:v{version}:", len(nums)))
        return _fork(dict(zip(names, nums)))
    for table, kind in ((ACCEL, "mfma"), (NON_ACCEL, "fma")):
        names = table.get(version if version else (1 if table is NON_ACCEL else None))
        if names is not None and len(names) == len(nums):
            return (_accel if kind == "mfma" else _non_accel)(dict(zip(names, nums)))
    raise ValueError(_shapes(f"v{version}:" if version else "an unprefixed string", len(nums)))


def form(text: str) -> str | None:
    """Which rocMLIR form `text` is ("rocMLIR v2 (MFMA)"), None for convgen's key=value."""
    text = text.strip()
    if "=" in text:
        return None
    m = re.fullmatch(r"(gemm:)?v(\d+):(.*)", text) or re.fullmatch(r"()()(.*)", text)
    count = len([v for v in m.group(3).split(",") if v.strip()])
    version = int(m.group(2)) if m.group(2) else None
    if m.group(1):
        return f"rocmlirTriton gemm:v{version}"
    if count == len(ACCEL.get(version, ())) or (version is None and count == len(ACCEL[None])):
        return f"rocMLIR v{version or 1} (MFMA)"
    return f"rocMLIR v{version or 1} (FMA)"


def _shapes(what: str, count: int) -> str:
    return (f"{what} with {count} values is no rocMLIR perf_config form (MFMA: 8 values "
            "unprefixed or v1:, v2: 9, v3: 11, v4: 14; FMA: 6 unprefixed, v2: 7, v3: 9; "
            "rocmlirTriton: gemm:v1: 11, gemm:v2: 17; or convgen's key=value fields)")


def _own(text: str, fields: tuple[str, ...]) -> tuple:
    values: dict = {}
    for item in (p.strip() for p in text.split(",") if p.strip()):
        key, sep, val = item.partition("=")
        key = key.strip().lower()
        if not sep:
            raise ValueError(f"'{item}' is not key=value (fields: {', '.join(fields)})")
        if key not in fields:
            raise ValueError(f"unknown field '{key}' (fields: {', '.join(fields)})")
        if not re.fullmatch(r"[+-]?\d+", val.strip()):
            raise ValueError(f"{key}='{val}' is not an integer")
        values[key] = int(val)
    return tuple(values.items())


def _waves(f: dict, n_wave: int) -> int:
    for name, block, wave in (("mPerWave", f["mPerBlock"], f["mPerWave"]),
                              ("nPerWave", f["nPerBlock"], n_wave)):
        if wave <= 0 or block % wave:
            raise ValueError(f"{name}={wave} does not divide its block ({block})")
    return (f["mPerBlock"] // f["mPerWave"]) * (f["nPerBlock"] // n_wave)


def _xdl(name: str, width: int) -> int:
    if width not in XDL_WIDTHS:
        raise ValueError(f"{name}={width}: Triton's AMD matrix instructions are "
                         f"{', '.join(map(str, XDL_WIDTHS))} wide")
    return width


def _accel(f: dict) -> tuple:
    n_wave = f.get("nPerWave", f["mPerWave"])
    out = {"block_m": f["mPerBlock"], "block_n": f["nPerBlock"],
           "block_k": f["kPerBlock"] * f["kPack"], "num_warps": _waves(f, n_wave),
           "split": max(1, f.get("splitKFactor", 1))}
    if "mnPerXdl" in f:
        out["matrix_instr_nonkdim"] = _xdl("mnPerXdl", f["mnPerXdl"])
    if f.get("wavesPerEU"):
        out["waves_per_eu"] = f["wavesPerEU"]
    if f.get("gridGroupSize"):
        out["group_m"] = f["gridGroupSize"]
    return tuple(out.items())


def _non_accel(f: dict) -> tuple:
    if f["blockSize"] % AMD_WAVE:
        raise ValueError(f"blockSize={f['blockSize']} is not a whole number of {AMD_WAVE}-wide waves")
    return (("block_m", f["mPerBlock"]), ("block_n", f["nPerBlock"]), ("block_k", f["kPerBlock"]),
            ("num_warps", f["blockSize"] // AMD_WAVE), ("split", max(1, f.get("splitKFactor", 1))))


def _fork(f: dict) -> tuple:
    if f["numCTAs"] != 1:
        raise ValueError(f"numCTAs={f['numCTAs']}: thread-block clusters are not supported")
    out = {"block_m": f["mPerBlock"], "block_n": f["nPerBlock"], "block_k": f["kPerBlock"],
           "num_warps": f["numWaves"], "num_stages": f["numStages"],
           "split": max(1, f["splitKFactor"])}
    if f["kpack"] > 0:
        out["kpack"] = f["kpack"]
    if f["matrixInstrNonkdim"]:
        out["matrix_instr_nonkdim"] = _xdl("matrixInstrNonkdim", f["matrixInstrNonkdim"])
    if f["wavesPerEU"]:
        out["waves_per_eu"] = f["wavesPerEU"]
    if f["gridGroupSize"]:
        out["group_m"] = f["gridGroupSize"]
    return tuple(out.items())

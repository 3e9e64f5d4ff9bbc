"""A problem's key in the tuning data: everything that changes which config is fastest (the
device's arch and name, the Triton version, the digest of the direction's kernel source,
direction, type, layouts, sizes, strides, padding, dilation), and back; which Triton
version's entry a run on another version takes."""
from __future__ import annotations

import re

from convgen import dtypes
from convgen.problem import make_problem


def problem_key(problem, arch: str, device: str, triton_version: str, kernel: str) -> dict:
    """The database key of a problem on a device (see the module's docstring)."""
    p = problem
    lay = p.layouts
    return {"arch": arch, "device": device, "triton": triton_version, "kernel": kernel,
            "direction": p.direction.name, "dtype": p.dtype.name,
            "layouts": f"{lay['input']}/{lay['filter']}/{lay['output']}",
            "n": p.n, "c": p.c * p.g, "k": p.k * p.g, "g": p.g, "h": p.hi, "w": p.wi,
            "y": p.y, "x": p.x, "stride_h": p.stride_h, "stride_w": p.stride_w,
            "pad": f"{p.pad_h_l},{p.pad_h_r},{p.pad_w_l},{p.pad_w_r}",
            "dil_h": p.dil_h, "dil_w": p.dil_w}


def problem_from_key(row: dict):
    """The problem a database row's key columns describe: problem_key's inverse."""
    lay_in, lay_fil, lay_out = row["layouts"].split("/")
    pad = tuple(int(v) for v in row["pad"].split(","))
    return make_problem(direction=row["direction"], dtype=dtypes.elem_type(row["dtype"]),
                        n=row["n"], g=row["g"], c_total=row["c"], k_total=row["k"],
                        hi=row["h"], wi=row["w"], y=row["y"], x=row["x"],
                        stride=(row["stride_h"], row["stride_w"]),
                        dilation=(row["dil_h"], row["dil_w"]), pad=pad,
                        layouts={"input": lay_in, "filter": lay_fil, "output": lay_out})


def key_for(problem, backend) -> dict:
    """The key of a problem on this backend, this Triton and these kernels."""
    import triton

    # torch and Triton (the kernel modules): a key needs them, a lookup of text does not
    from convgen.kernels.launch import kernel_digest  # deferred: torch, Triton
    return problem_key(problem, backend.arch, backend.device_name(), triton.__version__,
                       kernel_digest(problem.direction))


def _version_tuple(text: str) -> tuple[int, ...]:
    """"3.6.0" -> (3, 6, 0); "3.2.0+gitabc" -> (3, 2, 0): the numbers a version starts with."""
    return tuple(int(part) for part in re.findall(r"\d+", text.split("+")[0])[:3])


def nearest_version(want: str, have: list[str]) -> str:
    """Of `have`, the version nearest to `want`: the same major first, then the closest
    minor, then the closest patch; of two as near, the newer."""
    w = _version_tuple(want)

    def distance(v: str):
        t = _version_tuple(v)
        return tuple(abs(a - b) for a, b in zip(t + (0,) * 3, w + (0,) * 3)), tuple(-x for x in t)
    return min(have, key=distance)

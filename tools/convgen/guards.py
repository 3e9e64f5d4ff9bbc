"""Guard bands: every tensor a kernel reads or writes sits inside one flat allocation with
margins of a known pattern on each side. An input's margins hold NaN (integers: their
minimum), so a kernel that reads past it reads poison; the output's hold its type's guard
pattern, so a write outside it is counted (Guard.outside), and the output itself starts
poisoned, so an element left unwritten cannot pass.

Margins are guard_elements() long on each side. An input's NaN gets into the result of a
kernel that reads outside it and fails it; an output's pattern is one no kernel writes
(ElemType.guard_bits), and `Guard.outside()` counts the margin elements that changed: writes
outside the output, which leave every element inside right and so pass every metric."""
from __future__ import annotations

from dataclasses import dataclass

from convgen import dtypes
from convgen.problem import ConvProblem


# A margin covers one step of the outermost dimension (a GEMM row past the end of a
# row-major tensor lands there), at least GUARD_MIN and at most GUARD_MAX elements.
GUARD_MIN = 4096


GUARD_MAX = 1 << 24


def guard_elements(phys_shape) -> int:
    outer = 1
    for d in phys_shape[1:]:
        outer *= d
    # a multiple of 64 elements keeps the tensor as aligned as its allocation (at least 64
    # bytes): a launch that sees 16-byte aligned pointers may load 16 bytes at a time
    return -(-min(max(GUARD_MIN, outer), GUARD_MAX) // 64) * 64


def _int_view(t):
    import torch
    return t.view({1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


@dataclass
class Guard:
    """An output's allocation: margins of a known pattern around the tensor."""
    buffer: object     # the flat allocation
    margin: int        # elements on each side
    bits: int          # the margins' pattern, as the integer its bits read as
    # writes outside the intermediate outputs this output was summed from (a 3-D problem's
    # depth slices, depth.py), counted as they were freed: (before, after, nearest)
    absorbed: tuple = (0, 0, None)

    def outside(self) -> tuple[int, int, int | None]:
        """(elements changed before the tensor, after it, the offset of the nearest one: -k
        is k elements before the first, +k is k elements past the last)."""
        m = self.margin
        raw = _int_view(self.buffer)
        before = (raw[:m] != self.bits).nonzero().flatten()
        after = (raw[raw.numel() - m:] != self.bits).nonzero().flatten()
        nearest = None
        if after.numel():
            nearest = int(after[0]) + 1
        if before.numel() and (nearest is None or m - int(before[-1]) < nearest):
            nearest = -(m - int(before[-1]))
        return _merge_outside((int(before.numel()), int(after.numel()), nearest), self.absorbed)

    def absorb(self, other: "Guard") -> None:
        """Count another allocation's stray writes as this output's (its own buffer can go)."""
        self.absorbed = _merge_outside(self.absorbed, other.outside())


def _merge_outside(a: tuple, b: tuple) -> tuple:
    near = [x for x in (a[2], b[2]) if x is not None]
    return a[0] + b[0], a[1] + b[1], min(near, key=abs) if near else None


def _guarded(phys_shape, dtype, device):
    """A tensor of phys_shape inside a flat allocation with a margin on each side: (the
    tensor, the allocation, the margin)."""
    import torch
    numel = 1
    for d in phys_shape:
        numel *= d
    m = guard_elements(phys_shape)
    buf = torch.empty((numel + 2 * m,), dtype=dtype, device=device)
    return buf[m:m + numel].view(phys_shape), buf, m


def in_margins(problem: ConvProblem, name: str, dtype, device: str):
    """Tensor `name` of the problem in its memory order (unset) inside margins of NaN
    (integers: their minimum), so a kernel that reads past it reads poison."""
    import torch
    t, buf, _ = _guarded(problem.physical_shape(name), dtype, device)
    buf.fill_(float("nan") if dtype.is_floating_point else torch.iinfo(dtype).min)
    return t


def guarded_zeros(problem: ConvProblem, name: str, dtype, device: str):
    """A zeroed tensor `name` of the problem in its memory order, as a logical view, inside
    NaN margins like an input's (depth.py gathers a 3-D input's depth slices into one)."""
    return in_margins(problem, name, dtype, device).zero_().permute(problem.to_logical_perm(name))


def empty_output(problem: ConvProblem, device: str, dtype=None):
    """The written tensor, poisoned (NaN, or the int minimum) so an unwritten element cannot pass."""
    return guarded_output(problem, device, dtype)[0]


def guarded_output(problem: ConvProblem, device: str, dtype=None):
    """(the written tensor as a logical view, poisoned; its Guard): margins of the output
    type's guard pattern around it."""
    import torch
    name = problem.writes
    dt = dtype or problem.dtype.out_type.torch_dtype
    phys, buf, margin = _guarded(problem.physical_shape(name), dt, device)
    bits = dtypes.of(dt).guard_bits
    _int_view(buf).fill_(bits)
    phys.fill_(float("nan") if dt.is_floating_point else torch.iinfo(dt).min)
    return phys.permute(problem.to_logical_perm(name)), Guard(buf, margin, bits)

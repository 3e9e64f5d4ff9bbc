"""Pieces the three conv kernels share: the order of programs and output tiles, the
multiply-accumulate of one tile and the split of a flat GEMM index into three tensor
coordinates.

USE_DOT picks the matrix-core path (`tl.dot`) or the FMA path (BLOCK_K = 1 tiles and
`acc += a * b`: a rank-1 update per reduction step, which Triton cannot turn into a
dot, so it stays on FMA units).
"""
import triton
import triton.language as tl


@triton.jit
def mac(acc, a, b, USE_DOT: tl.constexpr, INPUT_PRECISION: tl.constexpr,
        DOT_UPCAST: tl.constexpr, ACC_INT: tl.constexpr, MAX_IMPRECISE: tl.constexpr):
    if USE_DOT:
        if DOT_UPCAST:  # the interpreter's bf16 and fp8 dots are wrong; exact products in fp32
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        if ACC_INT:
            acc = tl.dot(a, b, acc, out_dtype=tl.int32)
        else:
            # MAX_IMPRECISE: fp8 products summed inside the matrix unit before the sum
            # is added to the fp32 accumulator (Hopper's fp8 units keep fewer bits)
            acc = tl.dot(a, b, acc, input_precision=INPUT_PRECISION,
                         max_num_imprecise_acc=MAX_IMPRECISE)
    else:
        if ACC_INT:
            acc += a.to(tl.int32) * b.to(tl.int32)
        else:
            acc += a.to(tl.float32) * b.to(tl.float32)
    return acc


@triton.jit
def split3(i, D1, D2):
    """Split a flat index into (i0, i1, i2) with sizes (D0, D1, D2), i2 innermost."""
    i2 = i % D2
    t = i // D2
    i1 = t % D1
    i0 = t // D1
    return i0, i1, i2


@triton.jit
def program_ids(NUM_XCDS: tl.constexpr):
    """(axis-0, axis-1) ids of this program of a 2-D grid. AMD's MI300 and MI350 deal
    workgroups out to their NUM_XCDS chiplets in turn by linear id, and each chiplet has
    its own L2: with NUM_XCDS > 1 the ids are remapped so that programs of consecutive ids
    run on one chiplet and share its L2 (tile_ids then walks them GROUP_M rows together),
    as Triton's AMD GEMM kernels do. NUM_XCDS = 1 is the grid's own order."""
    pid0 = tl.program_id(0)
    pid1 = tl.program_id(1)
    if NUM_XCDS > 1:
        width = tl.num_programs(0)
        total = width * tl.num_programs(1)
        linear = pid0 + pid1 * width
        per_xcd = tl.cdiv(total, NUM_XCDS)
        # the first `tall` chiplets get per_xcd programs, the others one fewer
        tall = total % NUM_XCDS
        tall = tl.where(tall == 0, NUM_XCDS, tall)
        xcd = linear % NUM_XCDS
        local = linear // NUM_XCDS
        linear = tl.where(xcd < tall, xcd * per_xcd + local,
                          tall * per_xcd + (xcd - tall) * (per_xcd - 1) + local)
        pid0 = linear % width
        pid1 = linear // width
    return pid0, pid1


@triton.jit
def tile_ids(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of a flat program id, walking GROUP_M tile rows together column by
    column (Triton's matmul tutorial): programs that run at the same time share A rows and
    B columns in L2. GROUP_M = 1 is plain row-major order."""
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_n
    first_m = (pid // in_group) * GROUP_M
    size_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % size_m
    pid_n = (pid % in_group) // size_m
    return pid_m, pid_n

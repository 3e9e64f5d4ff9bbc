"""rocMLIR's perf_config strings (perf_text.py), each form read in rocMLIR's own field order
onto convgen's tile fields, and the values that cannot be honoured refused naming the
rocMLIR field."""
import pytest

from convgen import perf_text
from convgen.cli import PERF_FIELDS


def read(text):
    return dict(perf_text.parse(text, PERF_FIELDS))


@pytest.mark.parametrize("text,want", [
    # upstream rocMLIR, MFMA: v1 unprefixed mPerBlock,nPerBlock,kPerBlock,mPerWave,nPerWave,kPack,...
    ("128,128,8,64,64,4,1,1", dict(block_m=128, block_n=128, block_k=32, num_warps=4, split=1)),
    ("v1:128,64,4,64,32,8,0,1", dict(block_m=128, block_n=64, block_k=32, num_warps=4, split=1)),
    # v2: ...,mnPerXdl,kPack,splitKFactor,...; nPerWave = mPerWave
    ("v2:256,64,4,64,32,8,1,1,1", dict(block_m=256, block_n=64, block_k=32, num_warps=4, split=1,
                                       matrix_instr_nonkdim=32)),
    ("v3:64,64,8,32,16,4,2,3,2,1,1", dict(block_m=64, block_n=64, block_k=32, num_warps=4, split=2,
                                          matrix_instr_nonkdim=16)),
    ("v4:128,64,8,64,32,32,4,9,2,0,8,64,0,1", dict(block_m=128, block_n=64, block_k=32, num_warps=4,
                                                   split=9, matrix_instr_nonkdim=32, waves_per_eu=8,
                                                   group_m=64)),
    # non-accelerated: blockSize (threads of 64-wide waves), mPerBlock, nPerBlock, kPerBlock, ...
    ("256,128,64,16,4,4", dict(block_m=128, block_n=64, block_k=16, num_warps=4, split=1)),
    ("v2:64,32,32,4,2,2,3", dict(block_m=32, block_n=32, block_k=4, num_warps=1, split=3)),
    ("v3:64,32,32,4,2,4,1,1,2", dict(block_m=32, block_n=32, block_k=4, num_warps=1, split=1)),
    # rocmlirTriton: mPerBlock,nPerBlock,kPerBlock,kpack,numCTAs,numWaves,nonKdim,splitK,numStages,wavesPerEU,gridGroupSize
    ("gemm:v1:64,64,32,1,1,4,16,1,2,0,0", dict(block_m=64, block_n=64, block_k=32, num_warps=4,
                                              num_stages=2, split=1, kpack=1, matrix_instr_nonkdim=16)),
    ("gemm:v2:128,128,64,2,1,8,32,4,3,2,4,1,0,-1,1,1,0",
     dict(block_m=128, block_n=128, block_k=64, num_warps=8, num_stages=3, split=4, kpack=2,
          matrix_instr_nonkdim=32, waves_per_eu=2, group_m=4)),
    # convgen's own
    ("block_m=64,tma=1", dict(block_m=64, tma=1)),
])
def test_each_form_maps_in_rocmlirs_field_order(text, want):
    assert read(text) == want


@pytest.mark.parametrize("text,why", [
    ("gemm:v1:64,64,32,1,2,4,16,1,2,0,0", "numCTAs=2: thread-block clusters"),
    ("v2:128,128,8,64,8,4,1,1,1", "mnPerXdl=8: Triton's AMD matrix instructions are 4, 16, 32 wide"),
    ("128,128,8,48,64,4,1,1", "mPerWave=48 does not divide its block (128)"),
    ("100,32,32,4,2,2", "blockSize=100 is not a whole number of 64-wide waves"),
    ("v3:1,2,3", "v3: with 3 values is no rocMLIR perf_config form"),
    ("1,2,x", "'x' is not an integer"),
    ("gemm:v3:1", "gemm:v3: with 1 values"),
    ("block_m=64,7", "'7' is not key=value"),
    ("blockm=64", "unknown field 'blockm'"),
])
def test_what_cannot_be_honoured_names_the_field(text, why):
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        read(text)


def test_forms_are_named():
    assert perf_text.form("128,128,8,64,64,4,1,1") == "rocMLIR v1 (MFMA)"
    assert perf_text.form("64,32,32,4,2,2") == "rocMLIR v1 (FMA)"
    assert perf_text.form("v3:64,64,8,32,16,4,2,3,2,1,1") == "rocMLIR v3 (MFMA)"
    assert perf_text.form("gemm:v2:1") == "rocmlirTriton gemm:v2"
    assert perf_text.form("block_m=1") is None


def test_perf_config_takes_every_config_field():
    # a config field the command line cannot spell could be tuned and stored, yet no
    # -perf_config (a test line, a rerun of a database's best) could ask for it
    from convgen.kernels.config import FIELDS
    assert PERF_FIELDS == FIELDS

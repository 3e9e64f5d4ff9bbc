"""The one type table: every row's facts against torch's own, spellings, and that the
modules which once kept their own tables (CLI, split-test, compare, tolerance, isa,
backend) read this one."""
import math
import re
from pathlib import Path

import pytest
import torch

from convgen import dtypes

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", list(dtypes.TYPES))
def test_row_facts_match_torch(name):
    t = dtypes.TYPES[name]
    td = t.torch_dtype
    assert t.bits == td.itemsize * 8
    if t.is_int:
        info = torch.iinfo(td)
        assert t.max_finite == info.max and not td.is_floating_point
        return
    info = torch.finfo(td)
    assert t.max_finite == info.max
    assert t.tiny == info.smallest_normal
    # the step after 1.0 is 2^-mantissa, by conversion (torch's finfo(float8_e5m2fnuz).eps
    # says 0.125; 1.125 rounds to 1.0 there)
    def back(x):
        return torch.tensor(x, dtype=torch.float64).to(td).item()
    assert back(1.0 + 2.0 ** -t.mantissa) == 1.0 + 2.0 ** -t.mantissa
    assert back(1.0 + 2.0 ** -(t.mantissa + 1)) == 1.0   # a tie, to even
    assert t.u == 2.0 ** -(t.mantissa + 1)
    assert t.denorm_min == 2.0 ** (math.log2(info.smallest_normal) - t.mantissa)
    # the smallest subnormal is representable, half of it is not
    assert torch.tensor(t.denorm_min, dtype=torch.float64).to(td).item() == t.denorm_min


@pytest.mark.parametrize("name", list(dtypes.TYPES))
def test_output_and_accumulator_rows_exist(name):
    t = dtypes.TYPES[name]
    assert t.out_type.name in dtypes.TYPES and t.acc_type.name in dtypes.TYPES
    assert not t.out_type.is_fp8 and t.out_type.bits >= t.bits or t.is_int


def test_numpy_names():
    np = pytest.importorskip("numpy")
    for t in dtypes.TYPES.values():
        if t.numpy_name is not None:
            assert np.dtype(t.numpy_name).itemsize * 8 == t.bits


@pytest.mark.parametrize("spelling,name", [
    ("f16", "f16"), ("FP16", "f16"), ("half", "f16"), ("float16", "f16"), ("bfloat16", "bf16"),
    ("fp8", "fp8_e4m3"), ("bf8", "fp8_e5m2"), ("f8E4M3FNUZ", "fp8_e4m3fnuz"), ("int8", "i8"),
    ("i32", "i32"), ("float", "f32"),
])
def test_spellings(spelling, name):
    assert dtypes.find(spelling).name == name


def test_output_only_types_are_refused_as_conv_inputs():
    from convgen.errors import ConvgenError
    with pytest.raises(ConvgenError, match="unknown type 'i32'"):
        dtypes.elem_type("i32")
    assert dtypes.elem_type("i32", conv_input=False).name == "i32"
    assert "i32" not in dtypes.CONV_TYPES


def test_of_accepts_every_form():
    f16 = dtypes.TYPES["f16"]
    assert dtypes.of(f16) is dtypes.of("half") is dtypes.of(torch.float16) is f16


def test_no_other_module_keeps_a_type_table():
    """A new type must be one row: no module but dtypes.py names torch dtypes in a table."""
    pattern = re.compile(r"[\"'](float16|bfloat16|float8_e4m3fn|float8_e5m2)[\"']\s*:")
    for path in (REPO / "tools" / "convgen").rglob("*.py"):
        if path.name == "dtypes.py":
            continue
        assert not pattern.search(path.read_text()), path

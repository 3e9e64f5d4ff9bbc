"""split-test: one file per RUN line, each with the check lines its FileCheck uses."""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))

from convgen import split_test  # noqa: E402
from convgen.cli import command_type  # noqa: E402
from convgen.split_test import main  # noqa: E402
from convgen.split_test import _tokens, check_prefixes, split  # noqa: E402


def run_type(command):
    return command_type(_tokens(command))


def pieces(text, type_filter=None):
    return dict(split(textwrap.dedent(text), type_filter, type_of=command_type))


def lines(body):
    return [l for l in body.splitlines() if l.strip()]


def test_prefixes_from_filecheck_invocations():
    assert check_prefixes("a | FileCheck %s") == ["CHECK"]
    assert check_prefixes("a | FileCheck %s --check-prefix=F16") == ["F16"]
    assert check_prefixes("a | FileCheck %s -check-prefix F16") == ["F16"]
    assert check_prefixes("a | FileCheck --check-prefixes=CHECK,F16 %s") == ["CHECK", "F16"]
    assert check_prefixes("a | not /x/bin/filecheck %s") == ["CHECK"]
    assert check_prefixes("a | FileCheck %s && b | FileCheck %s --check-prefix=B") == ["CHECK", "B"]
    assert check_prefixes("%convgen -p -t f16") == []


def test_types():
    assert run_type("%convgen -t f16 -p | FileCheck %s") == "f16"
    assert run_type("%convgen -t=fp16 -p") == "f16"
    assert run_type("%convgen --t bf16") == "bf16"
    assert run_type("%convgen convfp16 -n 1") == "f16"
    assert run_type("%convgen convbfp16 -n 1") == "bf16"
    assert run_type("%convgen conv -n 1") == "f32"
    assert run_type("%convgen -p -in_h 3") == "f32"       # convgen's default
    # the one type table: every spelling -t takes, split-test takes
    assert run_type("%convgen -t float16 -p") == "f16"
    assert run_type("%convgen -t f8E4M3FNUZ -p") == "fp8_e4m3fnuz"
    assert run_type("%convgen -t f64 -p") is None


def test_interleaved_runs_own_the_checks_that_follow():
    out = pieces("""\
        // REQUIRES: gpu
        // RUN: %convgen -t f16 -p | FileCheck %s
        // CHECK: [1 1 1]
        // RUN: %convgen -t f32 -p | FileCheck %s
        // CHECK: [1 {{.*}} 1]
        """)
    assert sorted(out) == [0, 1]
    assert lines(out[0]) == ["// REQUIRES: gpu", "// RUN: %convgen -t f16 -p | FileCheck %s",
                             "// CHECK: [1 1 1]"]
    assert lines(out[1]) == ["// REQUIRES: gpu", "// RUN: %convgen -t f32 -p | FileCheck %s",
                             "// CHECK: [1 {{.*}} 1]"]


def test_shared_checks_go_into_every_file():
    out = pieces("""\
        // RUN: %convgen -t f16 -p | FileCheck %s
        // RUN: %convgen -t f32 -p | FileCheck %s
        // RUN: %convgen -t bf16 -p | FileCheck %s

        // CHECK: [1 1 1]
        """)
    assert len(out) == 3
    for i, body in out.items():
        assert body.count("RUN:") == 1
        assert lines(body)[-1] == "// CHECK: [1 1 1]"


def test_checks_above_the_first_run_are_shared():
    out = pieces("""\
        // CHECK-LABEL: bits
        // RUN: %convgen -t f16 -p | FileCheck %s
        // CHECK-NEXT: [1 1 1]
        // RUN: %convgen -t f32 -p | FileCheck %s
        // CHECK-NEXT: [1 0 1]
        """)
    assert lines(out[0]) == ["// CHECK-LABEL: bits", "// RUN: %convgen -t f16 -p | FileCheck %s",
                             "// CHECK-NEXT: [1 1 1]"]
    assert lines(out[1])[0] == "// CHECK-LABEL: bits"
    assert lines(out[1])[-1] == "// CHECK-NEXT: [1 0 1]"


def test_prefixes_select_check_lines():
    out = pieces("""\
        // RUN: %convgen -t f16 -p | FileCheck %s --check-prefix=F16
        // RUN: %convgen -t f32 -p | FileCheck %s --check-prefix=F32
        // RUN: %convgen -t bf16 -p | FileCheck %s --check-prefixes=ALL,BF16
        // F16: [1 {{.*}} {{.*}}]
        // F32: [1 1 1]
        // BF16: [1 1 {{.*}}]
        // ALL-NOT: nan
        """)
    assert [l for l in lines(out[0]) if "RUN" not in l] == ["// F16: [1 {{.*}} {{.*}}]"]
    assert [l for l in lines(out[1]) if "RUN" not in l] == ["// F32: [1 1 1]"]
    assert [l for l in lines(out[2]) if "RUN" not in l] == ["// BF16: [1 1 {{.*}}]", "// ALL-NOT: nan"]


def test_plain_check_shared_between_prefixed_runs():
    out = pieces("""\
        // RUN: %convgen -t f16 -p | FileCheck %s --check-prefixes=CHECK,F16
        // F16: f16 line
        // RUN: %convgen -t f32 -p | FileCheck %s --check-prefixes=CHECK,F32
        // F32: f32 line
        // CHECK: [1 1 1]
        """)
    assert "// F16: f16 line" in out[0] and "// F32" not in out[0]
    assert "// F32: f32 line" in out[1] and "// F16" not in out[1]
    assert "// CHECK: [1 1 1]" in out[0] and "// CHECK: [1 1 1]" in out[1]


def test_continued_run_lines_stay_together():
    out = pieces("""\
        // RUN: %convgen -t f16 \\
        // RUN:   -p -in_h 3 \\
        // RUN:   | FileCheck %s
        // CHECK: [1 1 1]
        // RUN: %convgen -t f32 -p | FileCheck %s
        // CHECK: [1 1 0]
        """)
    assert len(out) == 2
    assert out[0].count("RUN:") == 3 and "[1 1 0]" not in out[0]
    assert out[1].count("RUN:") == 1 and "[1 1 1]" not in out[1]


def test_type_filter_keeps_original_indices():
    out = pieces("""\
        // RUN: %convgen -t f16 -p | FileCheck %s
        // CHECK: a
        // RUN: %convgen -t f32 -p | FileCheck %s
        // CHECK: b
        // RUN: %convgen -t=fp16 -p | FileCheck %s
        // CHECK: c
        """, type_filter="f16")
    assert sorted(out) == [0, 2]
    assert "CHECK: a" in out[0] and "CHECK: c" in out[2]


def test_other_lines_are_kept(tmp_path):
    out = pieces("""\
        // UNSUPPORTED: interpreter
        // A comment about the suite.
        // RUN: %convgen -t f16 -p | FileCheck %s
        // CHECK: [1 1 1]
        // RUN: %convgen -t f32 -p | FileCheck %s
        // CHECK: [1 1 1]
        """)
    for body in out.values():
        assert body.startswith("// UNSUPPORTED: interpreter\n// A comment about the suite.\n")


def test_main_writes_files(tmp_path, capsys):
    src = tmp_path / "conv_f16.mlir"
    src.write_text("// RUN: %convgen -t f16 -p | FileCheck %s\n// CHECK: a\n"
                   "// RUN: %convgen -t f32 -p | FileCheck %s\n// CHECK: b\n")
    dest = tmp_path / "out" / "nested"
    assert main([str(src), str(dest)]) == 0
    assert sorted(os.listdir(dest)) == ["conv_f16_0.mlir", "conv_f16_1.mlir"]
    assert (dest / "conv_f16_1.mlir").read_text() == "// RUN: %convgen -t f32 -p | FileCheck %s\n// CHECK: b\n"
    assert capsys.readouterr().out.split() == [str(dest / "conv_f16_0.mlir"), str(dest / "conv_f16_1.mlir")]

    dest2 = tmp_path / "only16"
    assert main([str(src), str(dest2), "-t", "f16"]) == 0
    assert os.listdir(dest2) == ["conv_f16_0.mlir"]


def test_main_no_match_writes_nothing(tmp_path, capsys):
    src = tmp_path / "t.mlir"
    src.write_text("// RUN: %convgen -t f32 -p | FileCheck %s\n// CHECK: a\n")
    assert main([str(src), str(tmp_path / "o"), "-t", "bf16"]) == 0
    assert "nothing written" in capsys.readouterr().err
    assert not (tmp_path / "o").exists() or os.listdir(tmp_path / "o") == []


@pytest.mark.parametrize("setup,args,message", [
    ("none", ["{tmp}/missing.mlir", "{tmp}/o"], "no such file"),
    ("norun", ["{tmp}/t.mlir", "{tmp}/o"], "no RUN line"),
    ("ok", ["{tmp}/t.mlir", "{tmp}/o", "-t", "f64"], "unknown type"),
    ("ok", ["{tmp}/t.mlir", "{tmp}/t.mlir"], "not a folder"),
    ("badcont", ["{tmp}/t.mlir", "{tmp}/o"], "continued"),
])
def test_errors_are_one_line_exit_2(tmp_path, capsys, setup, args, message):
    texts = {"norun": "// CHECK: a\n", "ok": "// RUN: echo | FileCheck %s\n// CHECK: a\n",
             "badcont": "// RUN: echo \\\n// CHECK: a\n"}
    if setup in texts:
        (tmp_path / "t.mlir").write_text(texts[setup])
    rc = main([a.format(tmp=tmp_path) for a in args])
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_nothing_half_written(tmp_path, monkeypatch):
    src = tmp_path / "t.mlir"
    src.write_text("// RUN: a | FileCheck %s\n// CHECK: a\n// RUN: b | FileCheck %s\n// CHECK: b\n")
    dest = tmp_path / "o"
    calls = []
    real_replace = os.replace

    def failing_replace(a, b):
        calls.append(b)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(split_test.os, "replace", failing_replace)
    assert main([str(src), str(dest)]) == 2
    monkeypatch.setattr(split_test.os, "replace", real_replace)
    assert os.listdir(dest) == []   # the temporary folder is gone too


def test_console_entry_point_runs_as_module(tmp_path):
    src = tmp_path / "t.mlir"
    src.write_text("// RUN: a | FileCheck %s\n// CHECK: a\n")
    p = subprocess.run([sys.executable, "-m", "convgen.split_test", str(src), str(tmp_path / "o")],
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "tools")})
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "o" / "t_0.mlir").exists()
    p = subprocess.run([sys.executable, "-m", "convgen.split_test"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(REPO / "tools")})
    assert p.returncode == 2 and "usage" in p.stderr


def test_failure_part_way_takes_back_renamed_files(tmp_path, monkeypatch):
    src = tmp_path / "t.mlir"
    src.write_text("// RUN: a | FileCheck %s\n// CHECK: a\n// RUN: b | FileCheck %s\n// CHECK: b\n")
    dest = tmp_path / "o"
    real_replace = os.replace
    count = []

    def second_fails(a, b):
        count.append(b)
        if len(count) == 2:
            raise OSError(28, "No space left on device")
        return real_replace(a, b)

    monkeypatch.setattr(split_test.os, "replace", second_fails)
    assert main([str(src), str(dest)]) == 2
    assert os.listdir(dest) == []


def test_existing_files_are_not_replaced_without_force(tmp_path, capsys):
    src = tmp_path / "t.mlir"
    src.write_text("// RUN: a | FileCheck %s\n// CHECK: a\n// RUN: b | FileCheck %s\n// CHECK: b\n")
    dest = tmp_path / "o"
    dest.mkdir()
    (dest / "t_1.mlir").write_text("mine\n")
    assert main([str(src), str(dest)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "t_1.mlir exists" in err and "--force" in err
    assert sorted(os.listdir(dest)) == ["t_1.mlir"] and (dest / "t_1.mlir").read_text() == "mine\n"
    assert main([str(src), str(dest), "--force"]) == 0
    assert (dest / "t_1.mlir").read_text().startswith("// RUN: b")


def test_type_names_are_the_type_tables(tmp_path, capsys):
    src = tmp_path / "t.mlir"
    src.write_text("// RUN: %convgen -t half -p | FileCheck %s\n// CHECK: a\n")
    assert main([str(src), str(tmp_path / "o"), "-t", "fp16"]) == 0
    assert os.listdir(tmp_path / "o") == ["t_0.mlir"]
    assert main([str(src), str(tmp_path / "p"), "-t", "i32"]) == 2   # an output-only type


def test_force_restores_the_old_files_when_a_rename_fails(tmp_path, monkeypatch):
    src = tmp_path / "t.mlir"
    src.write_text("// RUN: a | FileCheck %s\n// CHECK: a\n// RUN: b | FileCheck %s\n// CHECK: b\n")
    dest = tmp_path / "o"
    dest.mkdir()
    (dest / "t_0.mlir").write_text("old 0\n")
    (dest / "t_1.mlir").write_text("old 1\n")
    real_replace = os.replace
    calls = []

    def fourth_fails(a, b):   # backup 0, new 0, backup 1, then the new t_1 fails
        calls.append(b)
        if len(calls) == 4:
            raise OSError(28, "No space left on device")
        return real_replace(a, b)
    monkeypatch.setattr(split_test.os, "replace", fourth_fails)
    assert main([str(src), str(dest), "--force"]) == 2
    monkeypatch.setattr(split_test.os, "replace", real_replace)
    assert sorted(os.listdir(dest)) == ["t_0.mlir", "t_1.mlir"]
    assert (dest / "t_0.mlir").read_text() == "old 0\n" and (dest / "t_1.mlir").read_text() == "old 1\n"


def test_a_miopen_lines_t_is_its_timing_flag():
    assert run_type("%convgen convfp16 -n 2 -t 1 -F 1 | FileCheck %s") == "f16"

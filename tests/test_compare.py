"""`convgen compare` end to end: .npy files in, report, bits line and JSON out, one-line errors."""
import json

import numpy as np
import pytest

from convgen import cli


@pytest.fixture
def arrays(tmp_path):
    rng = np.random.default_rng(0)
    ref = rng.uniform(1, 3, size=(2, 1, 3, 4, 5))
    kern = ref.astype(np.float16)
    paths = {"ref": tmp_path / "ref.npy", "kern": tmp_path / "kern.npy"}
    np.save(paths["ref"], ref)
    np.save(paths["kern"], kern)
    return paths


def _main(capsys, *argv):
    rc = cli.main(["compare", *[str(a) for a in argv]])
    out, err = capsys.readouterr()
    return rc, out.splitlines(), err


def test_passes_and_writes_json(arrays, tmp_path, capsys):
    js = tmp_path / "out.json"
    rc, out, err = _main(capsys, "--kern", arrays["kern"], "--ref", arrays["ref"], "-t", "f16",
                         "--json", js)
    assert rc == 0 and err == ""
    assert out[-1] == "[1 1 1]"
    assert all(line.startswith("# ") for line in out[:-1])
    data = json.loads(js.read_text())
    for key in ("rms", "max_abs_diff", "max_rel_diff", "max_rel_diff_old", "max_epsilon_diff",
                "bits", "thresholds", "histograms", "n", "nan_count", "inf_count"):
        assert key in data
    assert data["bits"] == [1, 1, 1] and data["n"] == 120
    assert data["worst"]["max_abs_diff"] is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kern.npy", "out.json", "ref.npy"]


def test_flag_spellings_and_failing_bits(arrays, tmp_path, capsys):
    kern = np.load(arrays["kern"]).astype(np.float32)
    kern[1, 0, 2, 3, 4] += 0.5
    np.save(arrays["kern"], kern)
    rc, out, err = _main(capsys, f"-kern={arrays['kern']}", f"--ref={arrays['ref']}", "--t=f16",
                         "-RMS_threshold=1", "--maxAbsDiff", "0.1", "-relDiff_threshold", "auto",
                         "-print-verify-results", "failure")
    assert rc == 0 and out[-1] == "[1 0 0]"
    assert any("abs bit 0" in line and "n=1 g=0 k=2 h=3 w=4" in line for line in err.splitlines())


def test_off_mode_prints_only_the_bits(arrays, capsys):
    rc, out, _ = _main(capsys, "--kern", arrays["kern"], "--ref", arrays["ref"], "-t", "f16",
                       "--print-verify-results=off")
    assert rc == 0 and out == ["[1 1 1]"]


def test_int_types(tmp_path, capsys):
    ref = np.arange(-6, 6, dtype=np.int64).reshape(3, 4)
    np.save(tmp_path / "r.npy", ref)
    np.save(tmp_path / "k.npy", ref.astype(np.int32))
    for t in ("i32", "i8"):
        rc, out, _ = _main(capsys, "--kern", tmp_path / "k.npy", "--ref", tmp_path / "r.npy", "-t", t)
        assert rc == 0 and out[-1] == "[1 1 1]"


def test_reference_is_rounded_to_the_output_type(tmp_path, capsys):
    ref = np.array([1.0 + 2.0 ** -12, 3.0])        # rounds to 1.0 in fp16
    np.save(tmp_path / "r.npy", ref)
    np.save(tmp_path / "k.npy", np.array([1.0, 3.0], dtype=np.float16))
    rc, out, _ = _main(capsys, "--kern", tmp_path / "k.npy", "--ref", tmp_path / "r.npy", "-t", "f16",
                       "-maxAbsDiff", "0")
    assert rc == 0 and out[-1] == "[1 1 1]"


def _error(capsys, *argv):
    rc, out, err = _main(capsys, *argv)
    assert rc == 2 and out == []
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("convgen: error: ")
    return lines[0]


def test_mismatched_shapes(arrays, tmp_path, capsys):
    np.save(tmp_path / "small.npy", np.zeros((2, 3)))
    msg = _error(capsys, "--kern", tmp_path / "small.npy", "--ref", arrays["ref"], "-t", "f16")
    assert "shapes differ" in msg


def test_missing_file(arrays, tmp_path, capsys):
    msg = _error(capsys, "--kern", tmp_path / "nope.npy", "--ref", arrays["ref"], "-t", "f32")
    assert "nope.npy" in msg


@pytest.mark.parametrize("argv,word", [
    (["-t", "f64"], "'f64' for -t"),
    (["-t", "f16", "--bogus", "1"], "--bogus"),
    (["-t", "f16", "-RMS", "tight"], "'tight' for -RMS: expected a number >= 0 or 'auto'"),
    (["-t", "f16", "-RMS", "-1"], "'-1' for -RMS"),
    (["-t", "f16", "-print-verify-results", "loud"], "print-verify-results"),
    (["-t"], "missing its value"),
])
def test_bad_flags(arrays, capsys, argv, word):
    msg = _error(capsys, "--kern", arrays["kern"], "--ref", arrays["ref"], *argv)
    assert word in msg


def test_missing_required_flag(arrays, capsys):
    assert "-t" in _error(capsys, "--kern", arrays["kern"], "--ref", arrays["ref"])


def test_not_an_npy_file(arrays, tmp_path, capsys):
    (tmp_path / "junk.npy").write_text("hello")
    assert "junk.npy" in _error(capsys, "--kern", tmp_path / "junk.npy", "--ref", arrays["ref"],
                                "-t", "f16")


def test_zero_dimensional_arrays(tmp_path, capsys):
    np.save(tmp_path / "r.npy", np.array(2.5))
    np.save(tmp_path / "k.npy", np.array(2.5, dtype=np.float16))
    rc, out, err = _main(capsys, "--kern", tmp_path / "k.npy", "--ref", tmp_path / "r.npy", "-t", "f16")
    assert rc == 0 and out[-1] == "[1 1 1]" and "Traceback" not in err


def test_empty_arrays_are_refused(tmp_path, capsys):
    np.save(tmp_path / "r.npy", np.zeros((0, 3)))
    np.save(tmp_path / "k.npy", np.zeros((0, 3), dtype=np.float16))
    assert "no elements" in _error(capsys, "--kern", tmp_path / "k.npy", "--ref", tmp_path / "r.npy",
                                   "-t", "f16")


def test_infinity_in_both_fails_with_the_reason(tmp_path, capsys):
    """Both sides +inf used to pass [1 1 1] with the false warning 'the reference is all zeros'."""
    np.save(tmp_path / "r.npy", np.array([np.inf, 1.0]))
    np.save(tmp_path / "k.npy", np.array([np.inf, 1.0], dtype=np.float16))
    rc, out, err = _main(capsys, "--kern", tmp_path / "k.npy", "--ref", tmp_path / "r.npy", "-t", "f16")
    assert rc == 0 and out[-1] == "[0 0 0]"
    assert "infinities in the reference" in err and "all zeros" not in out[0] + err


@pytest.mark.parametrize("where", ["missing/out.json", "", "adir"])
def test_bad_json_path_is_refused_before_the_work(arrays, tmp_path, capsys, where):
    (tmp_path / "adir").mkdir()
    target = str(tmp_path / where) if where else ""
    msg = _error(capsys, "--kern", arrays["kern"], "--ref", arrays["ref"], "-t", "f16",
                 "--json", target)
    assert msg.startswith("convgen: error: --json")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adir", "kern.npy", "ref.npy"]


def test_flag_names_in_any_case_and_the_default_word(arrays, capsys):
    rc, out, _ = _main(capsys, "--KERN", arrays["kern"], "--ref", arrays["ref"], "-t", "f16",
                       "-rms_threshold", "default", "-pv-results", "off")
    assert rc == 0 and out == ["[1 1 1]"]


def _perturbed(tmp_path, rel):
    """An f16 result off its reference by `rel` of each value, either way (a one-sided error
    is the bias check's to catch): what a long fp32 sum can do."""
    rng = np.random.default_rng(3)
    ref = rng.uniform(1, 3, size=(4, 64))
    np.save(tmp_path / "r.npy", ref)
    np.save(tmp_path / "k.npy", (ref * (1 + rel * rng.choice([-1, 1], ref.shape))).astype(np.float16))
    return tmp_path / "k.npy", tmp_path / "r.npy"


def test_accumulate_gives_auto_the_reduction_length(tmp_path, capsys):
    """With no convolution compare cannot know how many products an output summed; auto
    assumes one unless -accumulate says how many. An error a sum of 2^24 fp32 products can
    make fails as one product and passes as 2^24."""
    kern, ref = _perturbed(tmp_path, 2e-3)
    rc, out, _ = _main(capsys, "--kern", kern, "--ref", ref, "-t", "f16")
    assert rc == 0 and out[-1] == "[0 0 0]"
    rc, out, _ = _main(capsys, "--kern", kern, "--ref", ref, "-t", "f16", "--accumulate", 2 ** 24)
    assert rc == 0 and out[-1] == "[1 1 1]", out
    assert "accumulate" in _error(capsys, "--kern", kern, "--ref", ref, "-t", "f16",
                                  "--accumulate", "0")


def test_the_comparator_flags_judge(tmp_path, capsys):
    """-comparator, -atol and -rtol are honoured, not only listed in the help."""
    kern, ref = _perturbed(tmp_path, 4e-3)
    loose = _main(capsys, "--kern", kern, "--ref", ref, "-t", "f16", "-atol", "0.1")
    tight = _main(capsys, "--kern", kern, "--ref", ref, "-t", "f16", "-atol", "0", "-rtol", "1e-4")
    assert loose[1][-1] == "[1 1 1]" and tight[1][-1] == "[0 0 0]", (loose, tight)
    own = _main(capsys, "--kern", kern, "--ref", ref, "-t", "f16")
    legacy = _main(capsys, "--kern", kern, "--ref", ref, "-t", "f16", "-comparator", "legacy")
    # rocMLIR's legacy limits for f16: abs 100, rel forced to 100
    assert own[1][-1].endswith("0 0]") and legacy[1][-1].endswith("1 1]"), (own, legacy)
    assert "allclose" in _error(capsys, "--kern", kern, "--ref", ref, "-t", "f16",
                                "-comparator", "legacy", "-atol", "1")


def test_dump_is_not_a_compare_flag(arrays, tmp_path, capsys):
    assert "--dump" in _error(capsys, "--kern", arrays["kern"], "--ref", arrays["ref"], "-t", "f16",
                              "--dump", tmp_path / "d")

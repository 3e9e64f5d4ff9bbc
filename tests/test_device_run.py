"""scripts/device-run's time guard: a device call is killed at its limit, and a tune killed
with it returns no database, so every tune step ends in time to send the database back
(the fortieth session lost a tune that way, after tests that ran long)."""
import gzip
import os
import pathlib
import sqlite3
import subprocess
import time

ROOT = pathlib.Path(__file__).parent.parent

# each a whole tuning space in the interpreter: minutes for the list, were the tune not cut
LINE = ("--operation conv2d -t f16 -batchsize={n} -in_channels=24 -out_channels=40 -in_h=9 "
        "-in_w=9 -fil_h=3 -fil_w=3 -padding_h=1 -padding_w=1 -in_layout=nhwc -fil_layout=kyxc "
        "-out_layout=nhwk")


def test_a_tune_ends_before_the_call_limit_and_sends_the_database_back(tmp_path):
    lines = tmp_path / "list.lines"
    lines.write_text("".join(LINE.format(n=n) + "\n" for n in (2, 3, 5, 7, 11, 13)))
    out, db = tmp_path / "out", tmp_path / "t.sqlite"
    env = dict(os.environ, OUT=str(out), TUNE_DB=str(db), TUNE_SECONDS="300",
               TUNE_ARGS=f"--allow-cpu --lines {lines}", DEVICE_SECONDS="45",
               DEVICE_RUN_START=str(int(time.time())), TUNE_GPUS="1",
               TRITON_CACHE_DIR=str(tmp_path / "cache"))
    t0 = time.monotonic()
    subprocess.run([str(ROOT / "scripts/device-run"), "tune"], env=env, cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=240)
    took = time.monotonic() - t0
    # 45 s less the 30 s kept for the database, and the interrupt's wind-down
    assert took < 40, f"tune ran {took:.0f} s; its cut is 15 s"
    log = (out / "tune.log").read_text()
    assert "convgen tune:" in log
    if os.environ.get("TRITON_INTERPRET") == "1":   # a GPU may finish the list in the 15 s
        assert "interrupted" in log, "the list should have outlasted the cut"
    back = tmp_path / "back.sqlite"
    back.write_bytes(gzip.decompress((out / "tuning.sqlite.gz").read_bytes()))
    with sqlite3.connect(back) as con:
        assert con.execute("pragma integrity_check").fetchone() == ("ok",)
        assert con.execute("select count(*) from measurement_rows").fetchone()[0] > 0

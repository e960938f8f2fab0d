"""benchmarks/real_loop.py, the distortion benchmark, in its smoke mode: it
runs, prints a row per variant for each loop size, and its own check (that
gpuscope recorded every step it ran) passes; with gpuscope switched off by
the environment that check fails the run."""

import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "real_loop.py"
VARIANTS = 9  # rows per size: bare, 5 gpuscope, record_function, profile, control


def run(*args, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), "--quick", *args], capture_output=True,
                          text=True, timeout=120, env=env)


def test_quick_run_prints_every_row():
    r = run()
    assert r.returncode == 0, r.stdout + r.stderr
    out = r.stdout
    assert "`python benchmarks/real_loop.py --quick`" in out
    assert "torch " in out and "intra-op thread" in out
    for size in ("tiny", "medium"):
        assert f"**{size}**" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert len(rows) == 2 * VARIANTS, out
    for name in ("bare loop", "gpuscope: `s.steps()` + 4 `s.phase()`, `Session()` defaults",
                 "telemetry_interval_ms=0", "flush_interval_ms=10000", "`s.steps()` only",
                 "enabled=False", "record_function", "torch.profiler.profile", "control: bare loop"):
        assert sum(name in row for row in rows) >= 2, name
    # every row has numbers: a step time, and added costs except the bare loop's
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 6 and cells[1][0].isdigit(), row
        assert (cells[2] == "—") == row.startswith("| bare loop"), row


def test_gpuscope_recording_nothing_fails_the_run():
    env = dict(os.environ, GPUSCOPE_DISABLE="1")
    r = run("--sizes", "tiny", env=env)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "INVALID" in r.stderr and "recorded 0 steps" in r.stderr

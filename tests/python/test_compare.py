"""session.save(path) and `gpuscope compare BASE NEW --max-regression PCT`:
a planted regression exits 1, the same run exits 0, and bad files get a clear
error (exit 2) and never a traceback."""

import json
import os
import subprocess
import sys

import pytest

import gpuscope as gs
from conftest import MS


def run(tmp_path, name, data_ms=10, compute_ms=40, steps=40, dataset="imagenet-1k@v2", activity=True):
    clock = gs.testing.ManualClock()
    gpu = gs.testing.SimulatedDevice(activity=activity)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(steps):
        with s.step(samples=64):
            with s.phase("data"):
                clock.advance(data_ms * MS)
            with s.phase("forward"):
                gpu.launch(compute_ms * MS)
                clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    path = s.save(tmp_path / f"{name}.json", dataset=dataset)
    s.close()
    return path


def compare(*args):
    p = subprocess.run([sys.executable, "-m", "gpuscope", "compare", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_saved_run_holds_summary_findings_and_metadata(tmp_path):
    path = run(tmp_path, "base")
    doc = json.load(open(path))
    assert doc["schema"] == "gpuscope.run" and doc["schema_version"] == 1
    assert gs.Summary.from_json(json.dumps(doc["summary"])).steps == 40
    meta = doc["metadata"]
    assert meta["dataset"] == "imagenet-1k@v2"
    assert meta["command"] == sys.argv
    assert meta["host"] and meta["libraries"]["gpuscope"] == gs.__version__
    assert meta["libraries"]["python"]
    for key in ("git_commit", "container_image", "gpus", "driver_version", "created", "cwd"):
        assert key in meta
    assert isinstance(doc["findings"], list)


def test_compare_exits_0_without_a_regression_and_1_with_one(tmp_path):
    base = run(tmp_path, "base")
    same = run(tmp_path, "same")
    p = compare(base, same)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no regression past 5%" in p.stdout
    # Planted: a slower loader, 10 -> 20 ms of a 50 ms step.
    slow = run(tmp_path, "slow", data_ms=20)
    p = compare(base, slow, "--max-regression", 5)
    assert p.returncode == 1, p.stdout
    assert "REGRESSION" in p.stdout
    assert "p95 step time grew +20.0%" in p.stdout
    assert "throughput fell -16.7%" in p.stdout
    assert "GPU idle grew" in p.stdout
    # A bound wide enough lets it pass: the bound is honoured, not fixed.
    assert compare(base, slow, "--max-regression", 50).returncode == 0
    # Faster is never a regression.
    assert compare(slow, base).returncode == 0


def test_compare_reports_what_changed_between_the_runs(tmp_path):
    base = run(tmp_path, "base", data_ms=1)
    other = run(tmp_path, "other", data_ms=30, dataset="imagenet-1k@v3")
    p = compare(base, other, "--max-regression", 100)
    assert p.returncode == 0
    assert "dataset: imagenet-1k@v2 -> imagenet-1k@v3" in p.stdout
    assert "new finding: input-bound" in p.stdout
    assert "phase data (% of step)" in p.stdout


@pytest.mark.parametrize("content,message", [
    ("", "empty file"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summ', "corrupt or truncated JSON"),
    ("\x00\xff\xfe binary", "not UTF-8 text"),
    ('{"schema": "gpuscope.run", "schema_version": 99, "summary": {}}', "schema_version 99"),
    ('{"schema": "gpuscope.doctor", "schema_version": 1}', "gpuscope doctor --baseline"),
    ('{"hello": "world"}', "not a gpuscope run file"),
    ('[1, 2, 3]', "not a gpuscope run file"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summary": {"steps": "many"}}', "summary cannot be used"),
    pytest.param("[" * 100000 + "]" * 100000, "gpuscope compare: ", id="deeper-than-the-json-parser-goes"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summary": {"window_time": NaN}}', "holds the number NaN"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summary": {"window_time": 1e400}}', "holds the number 1e400"),
])
def test_bad_files_get_a_clear_error(tmp_path, content, message):
    good = run(tmp_path, "good")
    bad = tmp_path / "bad.json"
    bad.write_bytes(content.encode("latin-1"))
    for args in ((bad, good), (good, bad)):
        p = compare(*args)
        assert p.returncode == 2, p.stdout + p.stderr
        assert message in p.stderr, p.stderr
        assert p.stderr.startswith("gpuscope compare: ")


def test_missing_file_and_bad_bound(tmp_path):
    good = run(tmp_path, "good")
    p = compare(good, tmp_path / "nope.json")
    assert p.returncode == 2 and "no such file" in p.stderr
    p = compare(good, good, "--max-regression", -1)
    assert p.returncode == 2 and "0 or more" in p.stderr
    p = compare(good, good, "--max-regression", "nan")  # would turn the gate off
    assert p.returncode == 2 and "0 or more" in p.stderr
    p = compare(good)
    assert p.returncode == 2  # argparse's usage error

"""gpuscope doctor from the command line: the table, --json, --save and
--baseline with their exit codes, bad baselines, bad commands. (The rules
themselves are tested in C++ against a fake NVML and a fake /proc and /sys.)"""

import json
import shutil
import subprocess
import sys

import pytest


def doctor(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gpuscope", "doctor", *args], capture_output=True,
                          text=True, timeout=120, cwd=cwd)


def test_table_runs_and_checks_the_host():
    r = doctor()
    assert "gpuscope doctor" in r.stdout and "host" in r.stdout and "checks:" in r.stdout
    failed = " 0 failed" not in r.stdout
    assert r.returncode == (1 if failed else 0), r.stdout
    if "no NVIDIA GPU found" in r.stdout:  # a machine without a GPU: said so, host checked, exit 0
        assert r.returncode == 0
    assert all(len(line) <= 80 for line in r.stdout.splitlines())
    assert "Traceback" not in r.stderr


def test_json_report():
    r = doctor("--json")
    report = json.loads(r.stdout)
    assert report["schema"] == "gpuscope.doctor" and report["schema_version"] == 1
    assert {"subject", "id", "status", "value", "reason"} <= set(report["checks"][0])
    assert "gpu_count" in report["facts"]


def test_save_then_baseline(tmp_path):
    saved = tmp_path / "node.json"
    r = doctor("--save", str(saved))
    assert saved.exists() and "saved as a baseline" in r.stdout
    same = doctor("--baseline", str(saved))
    assert "no differences from the baseline" in same.stdout
    assert same.returncode == r.returncode  # 0 unless a check fails on this machine
    # A node that changed since (here: the baseline says one GPU more).
    base = json.loads(saved.read_text())
    base["facts"]["gpu_count"] = str(int(base["facts"]["gpu_count"]) + 1)
    saved.write_text(json.dumps(base))
    changed = doctor("--baseline", str(saved))
    assert changed.returncode == 1
    assert f"gpu_count: {base['facts']['gpu_count']} ->" in changed.stdout
    as_json = json.loads(doctor("--json", "--baseline", str(saved)).stdout)
    assert as_json["baseline_differences"]


@pytest.mark.parametrize("content", ["{\"schema\": \"gpuscope.doc", "[1, 2]", "{\"schema_version\": 1, \"steps\": 3}"])
def test_bad_baselines_are_refused_clearly(tmp_path, content):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    r = doctor("--baseline", str(bad))
    assert r.returncode == 2
    assert "not a gpuscope doctor report" in r.stderr and "Traceback" not in r.stderr
    missing = doctor("--baseline", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "cannot use the baseline" in missing.stderr and "no such file" in missing.stderr


def test_usage():
    r = subprocess.run([sys.executable, "-m", "gpuscope", "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown command" in r.stderr
    r = subprocess.run([sys.executable, "-m", "gpuscope"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: gpuscope doctor" in r.stderr


def test_console_script():
    exe = shutil.which("gpuscope")
    if exe is None:
        pytest.skip("the gpuscope console script is not on PATH")
    r = subprocess.run([exe, "doctor", "--json"], capture_output=True, text=True, timeout=120)
    assert json.loads(r.stdout)["schema"] == "gpuscope.doctor"


def test_binary_baseline_and_unwritable_save(tmp_path):
    binary = tmp_path / "bin.json"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    r = doctor("--baseline", str(binary))
    assert r.returncode == 2 and "not a gpuscope doctor report" in r.stderr and "Traceback" not in r.stderr
    r = doctor("--save", str(tmp_path / "no" / "such" / "dir" / "node.json"))
    assert r.returncode == 2 and "cannot write" in r.stderr
    assert "checks:" in r.stdout  # the report is still printed

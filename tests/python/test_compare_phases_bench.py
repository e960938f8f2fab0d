"""benchmarks/compare_phases.py --quick: the benchmark runs, compares 100
phases and refuses 5000 (more than a session holds), with a row for each."""

import pathlib
import re
import subprocess
import sys

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "compare_phases.py"


def test_compare_phases_quick_run():
    out = subprocess.run([sys.executable, str(_PATH), "--quick"], capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr
    assert ("| phases | run file | read both files (`load_run_file`) | `compare_runs()` | "
            "`gpuscope compare` (a process) | outcome |") in out.stdout
    t = r"[\d.]+ m?s \([\d.]+-[\d.]+\)"
    assert re.search(rf"\| 100 \| [\d.]+ MB \| {t} \| {t} \| {t}, exit [01] \| compared \|", out.stdout), out.stdout
    assert re.search(rf"\| 5000 \| [\d.]+ MB \| refused in {t} \| {t} \| {t}, exit 2 \| "
                     r"refused \(\"its summary lists 5001 phases", out.stdout), out.stdout

"""benchmarks/compare_noise.py --quick: the benchmark runs and prints a row
per window size and statistic; given another _noise.py as --before (here,
the package's own), it times it side by side and checks the numbers agree."""

import pathlib
import re
import subprocess
import sys

import gpuscope._noise

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "compare_noise.py"


def test_compare_noise_quick_run():
    out = subprocess.run([sys.executable, str(_PATH), "--quick", "--before", gpuscope._noise.__file__],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "| steps | statistic | gpuscope | before, numpy | before, no numpy |" in out.stdout
    t = r"[\d.]+ m?s \([\d.]+-[\d.]+\)"
    for n in (100, 2000):
        for st in ("p50", "p95", "mean"):
            assert re.search(rf"\| {n} \| {st} \| {t} \| {t} \| {t} \|", out.stdout), out.stdout
    assert "same numbers as before: yes" in out.stdout

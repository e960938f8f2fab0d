"""benchmarks/series_html.py --quick: the long-window benchmark runs and
prints a row per window with the three calls timed and the HTML's size."""

import pathlib
import re
import subprocess
import sys

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "series_html.py"


def test_series_html_quick_run():
    pytest.importorskip("matplotlib")
    out = subprocess.run([sys.executable, str(_PATH), "--quick"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert "| window x phases | step_series() | step_columns() | save_html() | HTML size |" in out.stdout
    for shape in ("512 x 5", "3000 x 12"):
        assert re.search(re.escape(f"| {shape} |") + r"( [\d.]+ m?s \([\d.]+-[\d.]+\) \|){3} [\d.]+ MB \|",
                         out.stdout), out.stdout

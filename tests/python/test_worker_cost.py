"""benchmarks/worker_cost.py --quick: the worker-cost benchmark runs, finds
the worker thread, prints its tables, and finds the worker asleep once the
only session is closed or gone."""

import pathlib
import re
import subprocess
import sys

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "worker_cost.py"


def test_worker_cost_quick_run():
    # A process of its own: the benchmark finds the worker thread as the one
    # the first session starts.
    out = subprocess.run([sys.executable, str(_PATH), "--quick"], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "| live: worker CPU per completed 5-phase step |" in text
    for rate in ("~130 us", "~13 us"):
        # as measured, then less the idle worker's CPU (may be negative on a noisy machine)
        assert re.search(rf"\| busy-wait, {rate} steps \| [\d.]+ k \| \d+ ns \| \d+ ns \| -?\d+ ns "
                         rf"\| -?\d+ ns \|", text), text
    assert "telemetry share of one core" in text
    # The floor a wake-up costs on this machine, measured beside the worker's.
    assert re.search(r"\| telemetry off \| \d+ us/s \| [\d.]+ /s \| [\d.]+ us \|", text), text
    assert re.search(r"\| no gpuscope: a bare Python thread sleeping 10 ms at a time \| \d+ us/s \| "
                     r"[\d.]+ /s \| [\d.]+ us \|", text), text
    # Once the only session is closed, or dropped, the worker sleeps until
    # another registers: no wake-ups (a few allowed for a loaded machine).
    for case in ("close()", "dropped", "closed, still referenced"):
        m = re.search(r"\| " + re.escape(case) + r" \| ([\d.]+) us/s \| ([\d.]+) /s \|", text)
        assert m, text
        assert float(m.group(2)) < 5, text

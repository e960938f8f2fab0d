"""The Python contract (README, docs/): every name and attribute a user's
script (or an outside test) relies on."""

import json
import re

import pytest

import gpuscope as gs
from conftest import MS


def test_module_exports_the_contract():
    for name in ["Session", "Summary", "Finding", "PhaseStats", "Quantiles", "GpuscopeError",
                 "step", "phase", "steps", "summary", "report", "diagnose", "default_session"]:
        assert hasattr(gs, name), name
    assert issubclass(gs.GpuscopeError, Exception)
    assert re.fullmatch(r"\d+\.\d+\.\d+", gs.__version__)


def test_version_has_a_single_source():
    cmake = open(__file__.rsplit("/tests/", 1)[0] + "/CMakeLists.txt").read()
    assert f"project(gpuscope VERSION {gs.__version__}" in cmake
    assert gs.Session().summary().version == gs.__version__


def test_session_works_with_all_defaults():
    s = gs.Session()
    assert s.window == 512
    assert s.recording
    with s.step(samples=64):
        with s.phase("forward"):
            pass
    assert s.summary().steps == 1


def test_the_design_snippet_runs_as_written(clock):
    s = gs.Session(window=512, clock=clock)

    def loader():
        for i in range(5):
            clock.advance(30 * MS)  # the loader's wait: phase "data"
            yield (list(range(8)), i)

    for x, y in s.steps(loader(), samples=lambda b: len(b[0])):
        with s.phase("h2d"):
            clock.advance(2 * MS)
        with s.phase("forward"):
            clock.advance(8 * MS)
    with s.step(samples=64):
        clock.advance(10 * MS)

    summary = s.summary()
    assert isinstance(summary, gs.Summary)
    assert summary.steps == 6
    for q in (summary.step_time.p50, summary.step_time.p95, summary.step_time.p99,
              summary.step_time.mean, summary.step_time.max):
        assert isinstance(q, float)
    assert summary.step_time.max == pytest.approx(0.040)
    assert 0 <= summary.phases["data"].share <= 1
    assert summary.phases["data"].share == pytest.approx(150 / 210)
    assert summary.phases["data"].p95 == pytest.approx(0.030)
    assert summary.gpu_idle_pct is None  # no GPU timeline source here
    assert summary.idle_by_cause == {}
    assert summary.throughput == pytest.approx((5 * 8 + 64) / 0.210)
    assert summary.source in ("cupti", "events", "host")
    assert isinstance(summary.to_dict(), dict)
    assert json.loads(summary.to_json())["steps"] == 6

    report = s.report()
    assert isinstance(report, str) and "data" in report
    findings = s.diagnose()
    assert findings and all(isinstance(f, gs.Finding) for f in findings)
    top = findings[0]
    for attr in ("id", "title", "severity", "evidence", "recommendation"):
        assert getattr(top, attr) is not None
    assert top.id == "input-bound"


def test_module_level_functions_use_one_lazily_created_default_session():
    default = gs.default_session()
    assert gs.default_session() is default
    before = gs.summary().total_steps
    for _ in gs.steps(range(3)):
        with gs.phase("forward"):
            pass
    with gs.step(samples=1):
        pass
    assert gs.summary().total_steps == before + 4
    assert "forward" in gs.summary().phases
    assert isinstance(gs.report(), str)
    assert isinstance(gs.diagnose(), list)


def test_stubs_and_marker_ship_with_the_package():
    import importlib.resources as resources
    files = {p.name for p in resources.files("gpuscope").iterdir()}
    assert "py.typed" in files
    assert "_gpuscope.pyi" in files


def test_import_never_pulls_in_torch():
    import subprocess
    import sys
    code = "import sys, gpuscope as gs; s = gs.Session(); [None for _ in s.steps(range(3))]; " \
           "s.summary(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_leaves_the_heavy_standard_modules_to_what_needs_them():
    # `import gpuscope` runs in every training job and before every
    # `gpuscope analyze`: the loop watch's bytecode reader (dis), the
    # signature help() shows (inspect), the rank exchange's host name
    # (socket) and the command line's parser and JSON (argparse, json) are
    # imported where they are used, not by the import (docs/benchmarks.md,
    # "The wheel"). -I: no site hooks that import them first.
    import subprocess
    import sys
    heavy = ["argparse", "dis", "inspect", "json", "socket"]
    code = ("import sys; pre = set(sys.modules); import gpuscope; "
            f"print(sorted(m for m in {heavy!r} if m in sys.modules and m not in pre))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    # ... and they still work once asked for.
    code = ("import inspect, gpuscope as gs; s = gs.Session(); [None for _ in s.steps(range(3))]; "
            "print(list(inspect.signature(gs.Session).parameters)[:2], s.summary().steps)")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['window', 'enabled'] 3"

"""The trace and HTML reports: the trace obeys the Chrome trace event format
(what chrome://tracing and Perfetto load), and the HTML report, opened in
headless Chromium, draws its plots."""

import json
import os
import re
import shutil
import subprocess

import pytest

import gpuscope as gs
from conftest import MS

US = 1_000


def starved_loop(clock, gpu, steps=30, trace_steps=8):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0, trace_steps=trace_steps)
    for i in range(steps):
        with s.step(samples=32):
            with s.phase("data"):
                clock.advance((20 + (i % 7)) * MS)
            with s.phase("h2d"):
                gpu.launch_copy("h2d", 8 << 20, 1 * MS, pageable=True)
                clock.advance(gpu.synchronize())
            with s.phase("forward"):
                for _ in range(20):
                    gpu.launch(500 * US, name="ampere_sgemm_128x64_nn")
                    clock.advance(510 * US)
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    return s


# The Chrome trace event format (the "JSON Object Format"): the event phases
# gpuscope writes, and what each requires.
_PHASES = {"X", "M", "B", "E", "i", "C"}
_METADATA = {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}


def check_chrome_trace(doc):
    """Asserts `doc` is a valid Chrome trace; returns its complete events."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    slices = []
    for e in doc["traceEvents"]:
        assert isinstance(e["name"], str) and e["name"], e
        assert e["ph"] in _PHASES, e
        assert isinstance(e["pid"], int) and isinstance(e.get("tid", 0), int), e
        if "args" in e:
            assert isinstance(e["args"], dict), e
        if e["ph"] == "M":
            assert e["name"] in _METADATA and isinstance(e["args"]["name"], str), e
            continue
        assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if "cat" in e:
            assert isinstance(e["cat"], str), e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0, e
            slices.append(e)
    # Complete events on one thread must nest: viewers draw them as a stack.
    by_thread = {}
    for e in slices:
        by_thread.setdefault((e["pid"], e["tid"]), []).append(e)
    eps = 1e-6
    for thread, events in by_thread.items():
        events.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in events:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"] + eps:
                stack.pop()
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + eps, (
                    f"{e['name']} overlaps {parent['name']} on {thread} without nesting")
            stack.append(e)
    return slices


def test_trace_is_a_valid_chrome_trace_of_the_last_steps(clock, tmp_path):
    gpu = gs.testing.SimulatedDevice(activity=True)
    s = starved_loop(clock, gpu, steps=30, trace_steps=8)
    path = s.save_trace(tmp_path / "trace.json")
    with open(path) as f:
        doc = json.load(f)
    slices = check_chrome_trace(doc)
    steps = sorted(e["args"]["index"] for e in slices if e.get("cat") == "step")
    assert steps == list(range(22, 30))
    kinds = {e["name"] for e in slices if e.get("cat") == "activity"}
    # A kernel's slice is named by its kernel, its class beside it.
    assert kinds == {"ampere_sgemm_128x64_nn", "memcpy HtoD (pageable)"}
    assert {e["args"]["what"] for e in slices if e["name"] == "ampere_sgemm_128x64_nn"} == {
        "kernel (FP32 GEMM)"}
    causes = {e["args"]["cause"] for e in slices if e.get("cat") == "idle"}
    assert {"data", "launch"} <= causes
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M"}
    assert {"host: training loop", "GPU 0 (CUPTI activity)", "stream 0", "idle (by cause)"} <= names
    # The idle slices add up to the summary's idle over the kept steps.
    idle_us = sum(e["dur"] for e in slices if e.get("cat") == "idle")
    step_us = sum(e["dur"] for e in slices if e.get("cat") == "step")
    series = s.step_series()[-8:]
    expected = sum(p["gpu_idle_pct"] / 100 * p["duration"] for p in series) * 1e6
    assert idle_us == pytest.approx(expected, rel=1e-6)
    assert 0 < idle_us < step_us
    s.close()


def test_step_series_matches_the_summary(clock):
    gpu = gs.testing.SimulatedDevice(activity=True)
    s = starved_loop(clock, gpu, steps=10)
    series = s.step_series()
    assert [p["index"] for p in series] == list(range(10))
    for p in series:
        assert sum(p["phases"].values()) == pytest.approx(p["duration"])
        assert p["phases"]["data"] == pytest.approx(p["idle_by_cause"]["data"])
    mean = sum(p["duration"] for p in series) / len(series)
    assert s.summary().step_time.mean == pytest.approx(mean)
    s.close()


def test_step_columns_hold_what_the_series_holds(clock):
    """step_columns() is step_series() a column per field: 0 for a phase or
    cause a step lacks, NaN for what was not measured."""
    import math

    gpu = gs.testing.SimulatedDevice(activity=True)
    s = starved_loop(clock, gpu, steps=12)
    with s.step():  # a step without the others' phases, and a new one
        with s.phase("eval"):
            clock.advance(3 * MS)
    series, cols = s.step_series(), s.step_columns()
    # step_series() is made from the columns; the C++ series (StepPoint, as
    # JSON) is the reference, key order included.
    reference = json.loads(s._step_series_json())["steps"]
    assert series == reference
    assert [list(p) for p in series] == [list(p) for p in reference]
    assert [list(p["phases"]) for p in series] == [list(p["phases"]) for p in reference]
    assert list(cols["index"]) == [p["index"] for p in series]
    assert cols["index"].typecode == "Q" and cols["duration"].typecode == "d"
    assert list(cols["duration"]) == [p["duration"] for p in series]
    assert list(cols["begin"]) == [p["begin"] for p in series]
    assert set(cols["phases"]) == {n for p in series for n in p["phases"]}
    assert list(cols["phases"])[-1] == "other"
    for name, column in cols["phases"].items():
        assert list(column) == [p["phases"].get(name, 0.0) for p in series], name
    assert set(cols["idle_by_cause"]) == {c for p in series for c in p["idle_by_cause"]}
    for cause, column in cols["idle_by_cause"].items():
        assert list(column) == [p["idle_by_cause"].get(cause, 0.0) for p in series], cause
    for key in ("gpu_idle_pct", "gpu_utilization_pct", "sm_clock_ratio", "host_cpu_pct",
                "host_iowait_pct", "worker_cores"):
        for got, p in zip(cols[key], series):
            assert (math.isnan(got) and p[key] is None) or got == p[key], key
    s.close()


def test_html_report_of_a_long_window_draws_bins_and_groups_phases(clock, tmp_path):
    """A window far longer than the plots' MAX_POINTS is drawn in bins, and
    phases past MAX_PHASES are stacked as one: the file stays small, and the
    spikes stay visible in the min-max band."""
    pytest.importorskip("matplotlib")
    from gpuscope import _html

    steps, phases = 6 * _html.MAX_POINTS, _html.MAX_PHASES + 6
    s = gs.Session(clock=clock, window=steps)
    for i in range(steps):
        with s.step():
            for p in range(phases):
                with s.phase(f"phase{p:02d}"):
                    clock.advance((1 + p) * US + (50 * MS if i == 4321 and p == 0 else 0))
    text = open(s.save_html(tmp_path / "report.html")).read()
    figure = re.search(r'<figure id="plot-phases">.*?</figure>', text, re.S).group(0)
    # The largest phases by name (phase14 has the most time), the 6 least as one.
    assert "6 more phases" in figure and "phase14" in figure and "phase00" not in figure
    assert "mean of 6 steps" in text and "min to max of 6 steps" in text
    # One point per bin, not per step: far smaller than the same plot of every step.
    assert len(text) < 2_000_000
    # The one slow step shows: the step-time plot's y axis (ms) reaches 50.
    step_fig = re.search(r'<figure id="plot-step-time">.*?</figure>', text, re.S).group(0)
    assert "<!-- 50 -->" in step_fig
    s.close()


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def test_html_report_is_self_contained(clock, tmp_path):
    pytest.importorskip("matplotlib")
    gpu = gs.testing.SimulatedDevice(activity=True)
    s = starved_loop(clock, gpu)
    text = open(s.save_html(tmp_path / "report.html")).read()
    assert text.count("<svg") == 3  # step time, phases, idle by cause (no telemetry in simulation)
    assert 'id="plot-step-time"' in text and 'id="plot-telemetry"' in text
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', text), "loads something from the network"
    assert 'data-id="input-bound"' in text and "pin_memory" in text
    embedded = re.search(r'<script type="application/json" id="gpuscope-summary">(.*?)</script>', text, re.S)
    assert gs.Summary.from_json(embedded.group(1)) == s.summary()  # as a browser's JSON.parse reads it
    s.close()


def test_html_report_plots_telemetry_when_there_is_some(clock, tmp_path):
    """Simulated sessions sample no telemetry; a step series carrying it (as
    one from a GPU machine does) gets the fourth plot."""
    pytest.importorskip("matplotlib")
    from gpuscope import _html

    gpu = gs.testing.SimulatedDevice(activity=True)
    s = starved_loop(clock, gpu, steps=10)
    series = s.step_series()
    for i, p in enumerate(series):
        p.update(gpu_utilization_pct=95.0, sm_clock_ratio=0.7 + 0.01 * i, host_cpu_pct=40.0, host_iowait_pct=2.0)
    text = _html.render_html(s.summary(), series)
    assert text.count("<svg") == 4
    figure = re.search(r'<figure id="plot-telemetry">.*?</figure>', text, re.S).group(0)
    assert "<svg" in figure and "No telemetry" not in figure
    s.close()


def test_html_report_survives_awkward_phase_names(clock, tmp_path):
    pytest.importorskip("matplotlib")
    gpu = gs.testing.SimulatedDevice(activity=True)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    names = ["load&<aug>", "cost$x$", "_hidden", "</script><b>", "<!--<script>"]
    for _ in range(5):
        with s.step():
            for n in names:
                with s.phase(n):
                    clock.advance(2 * MS)
            gpu.launch(1 * MS)
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    text = open(s.save_html(tmp_path / "report.html")).read()
    assert "</script><b>" not in text  # neither closes the script element nor injects markup
    assert text.count("</script>") == 1 and text.rstrip().endswith("</script>\n</body></html>")
    embedded = re.search(r'<script type="application/json" id="gpuscope-summary">(.*?)</script>', text, re.S)
    assert set(names) <= set(json.loads(embedded.group(1))["phases"][i]["name"]
                             for i in range(len(s.summary().phases)))
    assert "load&amp;&lt;aug&gt;" in text  # escaped in the page's own tables
    s.close()


def test_html_report_draws_its_plots_in_headless_chromium(clock, tmp_path):
    """Screenshots the report and looks for each plot's ink: the step-time
    line, its p50 and p95 lines, and the idle bars, in their colours."""
    pytest.importorskip("matplotlib")
    image_mod = pytest.importorskip("PIL.Image")
    browser = _chromium()
    if browser is None:
        if os.environ.get("GPUSCOPE_REQUIRE_CHROMIUM"):
            pytest.fail("no chromium found, and GPUSCOPE_REQUIRE_CHROMIUM is set (CI installs it)")
        pytest.skip("needs chromium (Debian package chromium)")
    from gpuscope import _html

    gpu = gs.testing.SimulatedDevice(activity=True)
    s = starved_loop(clock, gpu)
    page = s.save_html(tmp_path / "report.html")
    text = open(page).read()

    def screenshot(html_path, name):
        shot = tmp_path / f"{name}.png"
        subprocess.run(
            [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1200,2600", f"--screenshot={shot}", f"file://{html_path}"],
            check=True, timeout=120, capture_output=True)
        image = image_mod.open(shot).convert("RGB")
        return image, image.getcolors(image.width * image.height)

    def ink(colors, hex_color, tolerance=30):
        r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
        return sum(n for n, (pr, pg, pb) in colors if abs(pr - r) + abs(pg - g) + abs(pb - b) <= tolerance)

    image, colors = screenshot(page, "report")
    white = sum(n for n, c in colors if c == (255, 255, 255))
    assert white < 0.97 * image.width * image.height, "the page is blank"
    # Each plot alone, as the report holds it: its own ink is drawn.
    expected = {
        "plot-step-time": [_html.STEP_COLOR, _html.P50_COLOR, _html.P95_COLOR],
        "plot-phases": [_html.PHASE_COLORS[0], _html.PHASE_COLORS[1], _html.PHASE_COLORS[2]],
        "plot-idle": [_html.IDLE_COLOR],
    }
    for fig_id, fig_colors in expected.items():
        figure = re.search(rf'<figure id="{fig_id}">.*?</figure>', text, re.S).group(0)
        alone = tmp_path / f"{fig_id}.html"
        alone.write_text(f"<!DOCTYPE html><html><body>{figure}</body></html>")
        _, colors = screenshot(alone, fig_id)
        for color in fig_colors:
            assert ink(colors, color) > 100, f"{fig_id}: nothing drawn in {color}"
        other = {c for cs in expected.values() for c in cs} - set(fig_colors)
        if fig_id == "plot-idle":
            for color in other:
                assert ink(colors, color) < 20, f"{fig_id}: unexpected {color}"
    s.close()

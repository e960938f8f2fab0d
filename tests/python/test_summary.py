"""Summary attributes, JSON, report and findings."""

import json

import pytest

import gpuscope as gs
from conftest import MS


def record(session, clock, steps=10, data_ms=30, compute_ms=10):
    for _ in range(steps):
        with session.step(samples=8, tokens=800):
            with session.phase("data"):
                clock.advance(data_ms * MS)
            with session.phase("forward"):
                clock.advance(compute_ms * MS)
                with session.phase("attention"):
                    clock.advance(MS)


def test_summary_attributes(session, clock):
    record(session, clock)
    s = session.summary()
    assert (s.steps, s.total_steps, s.window, s.pending_steps) == (10, 10, 64, 0)
    assert s.step_time.p50 == pytest.approx(0.041)
    assert s.lifetime_step_time.count == 10
    assert list(s.phases)[0] == "data"  # breakdown order
    assert s.phases["attention"].top_level is False
    assert s.phases["attention"].inclusive_share == pytest.approx(1 / 41)
    assert s.phases["other"].share == pytest.approx(0.0)
    assert s.throughput == pytest.approx(8 / 0.041)
    assert s.samples_per_second == s.throughput
    assert s.tokens_per_second == pytest.approx(800 / 0.041)
    assert s.source == "host" and "host" in s.source_reason
    assert set(s.misuse) >= {"out_of_order_end", "nested_step", "wrong_thread", "dropped_records"}
    assert "steps=10" in repr(s)


def test_json_round_trip(session, clock):
    record(session, clock)
    s = session.summary()
    text = s.to_json()
    d = json.loads(text)
    assert d["schema_version"] == 2
    assert d == s.to_dict()
    back = gs.Summary.from_json(text)
    assert back == s
    assert back.phases["forward"] == s.phases["forward"]
    d2 = s.to_dict()
    d2["steps"] = -1  # to_dict() is a copy
    assert s.to_dict()["steps"] == 10


def test_from_json_rejects_what_is_not_a_summary():
    with pytest.raises(ValueError, match="not a gpuscope summary"):
        gs.Summary.from_json("{}")
    with pytest.raises(ValueError):
        gs.Summary.from_json("not json")
    text = gs.Session().summary().to_json().replace('"schema_version": 2', '"schema_version": 7')
    with pytest.raises(gs.GpuscopeError, match="schema_version 7"):
        gs.Summary.from_json(text)


def test_findings_rank_the_input_pipeline_first(session, clock):
    record(session, clock, data_ms=30, compute_ms=10)
    findings = session.diagnose()
    assert [f.id for f in findings][:1] == ["input-bound"]
    top = findings[0]
    assert top.severity == "high"
    assert top.share == pytest.approx(30 / 41)
    assert top.evidence["data_share"] == pytest.approx(30 / 41)
    assert "num_workers" in top.recommendation
    assert any(f.id == "host-only" for f in findings)
    assert gs.diagnose(session.summary()) == findings


def test_no_input_finding_below_five_percent(session, clock):
    record(session, clock, data_ms=1, compute_ms=40)
    assert "input-bound" not in [f.id for f in session.diagnose()]


def test_report_includes_findings_and_fits_80_columns(session, clock):
    record(session, clock)
    text = session.report()
    assert "1. high     input-bound (73% of step time)" in text
    assert "fix: Feed the GPU faster" in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert str(session.summary()) == text
    assert "\033[" not in text
    colored = session.report(color=True)
    assert "\033[1;31mhigh    \033[0m input-bound" in colored
    assert colored.replace("\033[1;31m", "").replace("\033[0m", "") == text


def test_host_telemetry_is_sampled_while_training():
    """The worker samples /proc (and NVML where there is a GPU) at 10 Hz; each
    step gets its time-weighted share and the summary their window means."""
    import time

    s = gs.Session(window=20, telemetry_interval_ms=5)
    for _ in s.steps(range(20)):
        with s.phase("forward"):
            sum(range(100000))
        time.sleep(0.01)
    t = s.summary().telemetry
    assert isinstance(t, gs.TelemetryStats)
    assert t.steps > 10
    assert t.host_cpu_pct is not None and 0 <= t.host_cpu_pct <= 100
    assert t.process_cores is not None and t.process_cores > 0
    assert t.load1 is not None and t.memory_available_bytes > 0
    assert "/proc" in t.source
    assert gs.Summary.from_json(s.summary().to_json()).telemetry.steps == s.summary().telemetry.steps
    assert "telemetry (" in s.report()
    assert gs.Session(telemetry_interval_ms=0).summary().telemetry is None
    with pytest.raises(ValueError, match="telemetry_interval_ms"):
        gs.Session(telemetry_interval_ms=-5)

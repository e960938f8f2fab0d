"""The Prometheus text exposition: well-formed (format 0.0.4), carrying the
numbers of the summary, written to a file atomically and served on a
localhost endpoint."""

import re
import urllib.error
import urllib.request

import pytest

import gpuscope as gs
from conftest import MS

_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"'
_SAMPLE = re.compile(rf"^({_NAME})(\{{{_LABEL}(,{_LABEL})*\}})? (-?[0-9.e+-]+|NaN|[+-]Inf)$")


def parse_exposition(text):
    """Checks the text format: HELP and TYPE once per family, before its
    samples; every sample line well-formed. Returns {(name, labels): value}."""
    assert text.endswith("\n")
    typed, helped, samples = {}, set(), {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in helped, f"HELP twice for {name}"
            helped.add(name)
        elif line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert kind in ("counter", "gauge", "summary", "histogram", "untyped")
            assert name not in typed, f"TYPE twice for {name}"
            typed[name] = kind
        else:
            m = _SAMPLE.match(line)
            assert m, f"malformed sample line: {line!r}"
            name = m.group(1)
            assert name in typed, f"{name} before its TYPE"
            if typed[name] == "counter":
                assert name.endswith("_total")
            labels = tuple(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            assert (name, labels) not in samples, f"duplicate series {name}{labels}"
            samples[(name, labels)] = float(m.group(4))
    return samples


@pytest.fixture
def starved(clock):
    gpu = gs.testing.SimulatedDevice(activity=True)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(20):
        with s.step(samples=32):
            with s.phase("data"):
                clock.advance(30 * MS)
            with s.phase('forward "main"'):  # a label value that needs escaping
                gpu.launch(10 * MS)
                clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    yield s
    s.close()


def test_exposition_is_well_formed_and_carries_the_summary(starved):
    samples = parse_exposition(starved.prometheus())
    sm = starved.summary()
    assert samples[("gpuscope_steps_total", ())] == 20
    assert samples[("gpuscope_step_time_seconds", (("quantile", "0.95"),))] == pytest.approx(sm.step_time.p95)
    assert samples[("gpuscope_gpu_idle_ratio", ())] == pytest.approx(0.75)
    assert samples[("gpuscope_gpu_idle_by_cause_ratio", (("cause", "data"),))] == pytest.approx(0.75)
    assert samples[("gpuscope_phase_share_ratio", (("phase", 'forward \\"main\\"'),))] == pytest.approx(0.25)
    assert samples[("gpuscope_throughput_samples_per_second", ())] == pytest.approx(800)
    assert samples[("gpuscope_finding_share_ratio", (("id", "input-bound"), ("severity", "high")))] == \
        pytest.approx(0.75)
    assert samples[("gpuscope_info", (("version", gs.__version__), ("source", "cupti")))] == 1
    assert samples[("gpuscope_misuse_total", (("kind", "dropped_records"),))] == 0


def test_written_to_a_file_and_served_on_localhost(starved, tmp_path):
    path = starved.save_prometheus(tmp_path / "gpuscope.prom")
    assert parse_exposition(open(path).read())
    with starved.serve_prometheus() as server:
        assert server.host == "127.0.0.1" and server.port > 0
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            samples = parse_exposition(r.read().decode())
        assert samples[("gpuscope_steps_total", ())] == 20
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/other", timeout=10)
        assert e.value.code == 404
    with pytest.raises(urllib.error.URLError):  # closed: the port is free again
        urllib.request.urlopen(server.url, timeout=2)


def test_host_only_session_exposes_no_gpu_numbers(session, clock):
    with session.step():
        clock.advance(5 * MS)
    samples = parse_exposition(session.prometheus())
    assert ("gpuscope_gpu_idle_ratio", ()) not in samples
    assert samples[("gpuscope_info", (("version", gs.__version__), ("source", "host")))] == 1

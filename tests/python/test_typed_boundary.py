"""Summaries, findings and doctor reports cross between C++ and Python as
objects, not JSON text: the Python types are views over the C++ objects,
their attributes come from the one declaration of the summary's fields, and
a run file is parsed once."""

import ast
import copy
import difflib
import importlib.metadata
import json
import pathlib
import pickle
import subprocess
import sys

import pytest

import gpuscope as gs
from gpuscope import _baseline, _gpuscope, _metadata
from conftest import MS

US = 1_000


def cupti_session(clock, steps=10):
    """A run on the simulated device with activity records, on two GPUs."""
    gpu = gs.testing.SimulatedDevice(activity=True)
    gpu.place_stream(7, 1)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(steps):
        with s.step(samples=64, tokens=640):
            with s.phase("data"):
                clock.advance(10 * MS)
            with s.phase("h2d"):
                gpu.launch_copy("h2d", 1 << 20, 2 * MS, pageable=True)
                clock.advance(gpu.synchronize())
            with s.phase("forward"):
                for _ in range(20):
                    gpu.launch(50 * US, name="ampere_sgemm_128x64_nn")
                    clock.advance(60 * US)
            with s.phase("comm", 7):
                gpu.launch(3 * MS, 7, name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
                clock.advance(3 * MS)
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    return s


@pytest.fixture
def cupti(clock):
    s = cupti_session(clock)
    yield s
    s.close()


@pytest.fixture
def no_json_loads(monkeypatch):
    """Fails any json.loads/json.dumps of the code under test."""
    def refuse(*args, **kwargs):
        raise AssertionError("a summary or findings went through Python's json module")
    monkeypatch.setattr(json, "loads", refuse)
    monkeypatch.setattr(json, "dumps", refuse)


# ------------------------------------------------------ objects, not JSON text


def test_summaries_and_findings_never_go_through_json(cupti, no_json_loads):
    sm = cupti.summary()
    assert sm.steps == 10 and sm.phases["data"].share > 0 and sm.activity.kernels_per_step == 21
    assert sm.devices[1].device == 1 and sm.throughput > 0
    findings = cupti.diagnose()
    assert findings and all(isinstance(f, gs.Finding) for f in findings)
    assert gs.diagnose(sm) == findings
    assert "findings" in cupti.report() and str(sm) == sm.report()
    assert "gpuscope_step_time_seconds" in cupti.prometheus()
    assert gs.Summary.from_json(sm.to_json()) == sm  # one C++ parse


def test_the_python_types_are_the_bound_cpp_types(cupti):
    sm = cupti.summary()
    for name in ("Summary", "Quantiles", "PhaseStats", "DeviceStats", "ActivityStats", "GpuTelemetry",
                 "TelemetryStats", "Finding"):
        assert getattr(gs, name) is getattr(_gpuscope, name), name
        assert getattr(gs, name).__module__ == "gpuscope"
    assert type(sm) is _gpuscope.Summary
    assert type(sm.step_time) is _gpuscope.Quantiles
    assert type(sm.phases["data"]) is _gpuscope.PhaseStats
    assert type(sm.activity) is _gpuscope.ActivityStats
    assert type(cupti.diagnose()[0]) is _gpuscope.Finding
    # Attributes are read-only properties of the class, not data held in Python.
    assert isinstance(gs.Summary.__dict__["steps"], property)
    assert not hasattr(sm, "__dict__") and not hasattr(sm, "_json")
    with pytest.raises(AttributeError):
        sm.steps = 5
    with pytest.raises(AttributeError):
        sm.step_time.p95 = 0.0


def test_session_functions_take_the_session_and_summary_objects(cupti):
    sm = _gpuscope.summarize(cupti)
    assert sm == cupti.summary()
    assert _gpuscope.format_report(sm) == cupti.report()
    from gpuscope._fleet import job_labels

    assert _gpuscope.prometheus_text(sm, job_labels(cupti, sm)) == cupti.prometheus()
    assert _gpuscope.diagnose(sm) == cupti.diagnose()
    with pytest.raises(TypeError):
        _gpuscope.format_report(sm.to_json())  # JSON text is no longer accepted
    with pytest.raises(TypeError):
        _gpuscope.summarize(object())


# ----------------------------------------------------- every field, declared once


def _struct_keys(doc):
    """{struct name: JSON keys} of a summary document."""
    telemetry = doc["telemetry"] or {}
    return {
        "Summary": set(doc) - {"schema_version"},
        "Quantiles": set(doc["step_time"]),
        "WarmupStats": set(doc["warmup"]),
        "PhaseStats": set(doc["phases"][0]),
        "DeviceStats": set(doc["devices"][0]),
        "ActivityStats": set(doc["activity"]),
        "TelemetryStats": set(telemetry),
        "GpuTelemetry": set(telemetry["gpus"][0]) if telemetry.get("gpus") else set(),
    }


def test_every_json_field_is_an_attribute_of_the_same_name(cupti):
    sm = cupti.summary()
    keys = _struct_keys(sm.to_dict())
    for name, fields in keys.items():
        cls = getattr(gs, name)
        missing = {f for f in fields if not isinstance(getattr(cls, f, None), property)}
        assert not missing, f"{name} lacks {missing}"
    # Values follow the JSON, with the Python API's documented exceptions.
    d = sm.to_dict()
    assert sm.step_time.p95 == d["step_time"]["p95"] and sm.steps == d["steps"]
    assert list(sm.phases) == [p["name"] for p in d["phases"]]  # a dict, in breakdown order
    assert sm.throughput == sm.samples_per_second == d["samples_per_second"]
    assert sm.misuse == d["misuse"] and isinstance(sm.misuse, dict)
    assert sm.activity.dropped_records == 0 and isinstance(sm.activity.dropped_records, int)


def test_the_stubs_declare_every_attribute_the_extension_defines():
    stub = pathlib.Path(_gpuscope.__file__).with_name("_gpuscope.pyi")
    if not stub.exists():
        stub = pathlib.Path(gs.__file__).with_name("_gpuscope.pyi")
    tree = ast.parse(stub.read_text())
    classes = {node.name: {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
               for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    for name in ("Summary", "Quantiles", "PhaseStats", "DeviceStats", "ActivityStats", "GpuTelemetry",
                 "TelemetryStats", "Finding", "DoctorCheck", "DoctorReport", "RankIdentity", "RankPhase",
                 "RankRecord", "Straggler", "RanksStats", "WarmupStats", "PeriodicSpike",
                 "OverheadStats", "EfficiencyStats"):
        cls = getattr(_gpuscope, name)
        public = {a for a, v in vars(cls).items() if not a.startswith(("__", "_pybind11"))
                  and (isinstance(v, property) or callable(v) or isinstance(v, staticmethod))}
        assert public <= classes[name], f"{name}: {sorted(public - classes[name])} missing from the stubs"
        # Special methods the stubs declare (RanksStats' sequence protocol)
        # must exist on the class too.
        special = {a for a in vars(cls) if a.startswith("__") and a.endswith("__")}
        assert classes[name] - {"__init__", "__hash__"} <= public | special | {"__init__"}, name
    exported = {n for n, v in vars(_gpuscope).items() if callable(v) and not isinstance(v, type)
                and not n.startswith("__")}
    assert exported <= functions, sorted(exported - functions)
    # The hot types (C API, their part of the stub kept by hand in
    # bindings/hot_types.pyi): every attribute, the private ones the package
    # calls included, and nothing they lack.
    hot = [n for n, v in vars(_gpuscope).items() if isinstance(v, type)
           and type(v).__name__ != "pybind11_type" and not issubclass(v, BaseException)]
    assert {"_Session", "_PhaseScope", "_StepScope", "_StepsIter", "_SizedStepsIter"} <= set(hot)
    bases = {node.name: [b.value if isinstance(b, ast.Subscript) else b for b in node.bases]
             for node in tree.body if isinstance(node, ast.ClassDef)}

    def declared(name):  # with what the stub's base classes declare
        inherited = [declared(b.id) for b in bases[name] if isinstance(b, ast.Name) and b.id in classes]
        return classes[name].union(*inherited)

    for name in hot:
        cls = getattr(_gpuscope, name)
        defined = {a for a in vars(cls) if not a.startswith("__")}
        assert defined <= declared(name), f"{name}: {sorted(defined - declared(name))} missing from the stubs"
        assert all(hasattr(cls, a) for a in classes[name]), name


REPO = pathlib.Path(__file__).resolve().parents[2]
STUBGEN = "2.5.5"  # scripts/gen_stubs.py's STUBGEN_VERSION


def test_the_committed_stub_is_what_gen_stubs_writes():
    """python/gpuscope/_gpuscope.pyi is generated from the extension's
    pybind11 signatures and bindings/hot_types.pyi: a binding changed without
    regenerating it shows here."""
    try:
        version = importlib.metadata.version("pybind11-stubgen")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"needs pip install pybind11-stubgen=={STUBGEN}")
    if version != STUBGEN:
        pytest.skip(f"pybind11-stubgen {version} is installed; the stub is generated with {STUBGEN}")
    run = subprocess.run([sys.executable, str(REPO / "scripts" / "gen_stubs.py"), "--stdout"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    committed = (REPO / "python" / "gpuscope" / "_gpuscope.pyi").read_text()
    diff = "".join(list(difflib.unified_diff(committed.splitlines(True), run.stdout.splitlines(True),
                                             "committed", "generated"))[:60])
    assert run.stdout == committed, (
        f"the stub differs from what {_gpuscope.__file__} gives: run python3 scripts/gen_stubs.py "
        f"(after rebuilding the extension: make python)\n{diff}")


# -------------------------------------------------- values as the dataclasses had


def test_none_for_what_is_not_measured(clock):
    s = gs.Session(clock=clock)
    with s.step():
        clock.advance(MS)
    sm = s.summary()
    assert sm.device_step_time is None and sm.gpu_idle_pct is None and sm.throughput is None
    assert sm.phases["other"].device is None and sm.phases["other"].backlog_p50 is None
    assert sm.activity is None and sm.devices == []
    s.close()


def test_value_semantics(cupti):
    sm = cupti.summary()
    back = gs.Summary.from_json(sm.to_json())
    assert back == sm and back is not sm and not (back != sm)
    assert sm != gs.Summary.from_json(gs.Session().summary().to_json())
    assert sm.phases == back.phases and sm.devices == back.devices and sm.activity == back.activity
    assert hash(sm.step_time) == hash(back.step_time) and hash(sm.phases["data"]) == hash(back.phases["data"])
    for unhashable in (sm, sm.activity, cupti.diagnose()[0]):
        with pytest.raises(TypeError):
            hash(unhashable)
    assert sm != sm.to_json() and sm.step_time != (0,)
    assert copy.deepcopy(sm) == sm and copy.copy(sm.phases["data"]) == sm.phases["data"]
    assert pickle.loads(pickle.dumps(sm)) == sm
    for part in (sm.phases, sm.step_time, sm.devices, sm.activity):
        assert pickle.loads(pickle.dumps(part)) == part
    f = cupti.diagnose()[0]
    assert pickle.loads(pickle.dumps(f)) == f
    assert repr(sm.step_time).startswith("Quantiles(count=10, mean=")
    assert repr(sm.phases["data"]).startswith("PhaseStats(name='data', share=")
    assert repr(sm.devices[0]).startswith("DeviceStats(device=0, gpu_steps=10, gpu_idle_pct=")
    assert repr(f).startswith(f"Finding(id={f.id!r}, title={f.title!r}, severity=")
    assert str(f) == f"[{f.severity}] {f.title}"


def test_nan_telemetry_reads_as_none_and_compares_equal(cupti):
    """GpuTelemetry holds NaN for what a GPU does not report: None in Python,
    and two summaries holding it are still equal (NaN != NaN in C++)."""
    d = cupti.summary().to_dict()
    gpu = {"index": 0, "utilization_pct": 97.5, "sm_clock_mhz": 1410, "sm_clock_max_mhz": 1980,
           "mem_clock_mhz": None, "mem_clock_max_mhz": None, "power_w": 300, "power_limit_w": 400,
           "temperature_c": 60, "memory_used_bytes": 1e9, "memory_total_bytes": 8e10,
           "pcie_rx_bytes_per_s": None, "pcie_tx_bytes_per_s": 0, "clocks_event_reasons": ["sw_power_cap"],
           "pcie_gen": 4, "pcie_gen_max": -1, "pcie_width": 16, "pcie_width_max": 16, "ecc_corrected": 0,
           "ecc_uncorrected": -1, "persistence_mode": 1, "compute_mode": 0, "mig_mode": -1,
           "process_memory_bytes": None}
    d["telemetry"] = {"source": "NVML, /proc", "steps": 3, "gpu_utilization_pct": 97.5, "sm_clock_ratio": 0.7,
                      "throttled_steps": 0.5, "clocks_event_reasons": ["sw_power_cap"], "host_cpu_pct": None,
                      "host_iowait_pct": 1, "process_cores": None, "worker_cores": 2,
                      "memory_available_bytes": None, "memory_pressure_pct": None, "swap_pages_per_s": None,
                      "load1": None, "gpus": [gpu]}
    sm = gs.Summary._from_dict(d)
    g = sm.telemetry.gpus[0]
    assert g.mem_clock_mhz is None and g.pcie_rx_bytes_per_s is None and g.sm_clock_mhz == 1410.0
    assert g.pcie_gen == 4 and g.pcie_gen_max is None and g.mig_mode is None and g.ecc_corrected == 0
    assert repr(g) == "GpuTelemetry(index=0, utilization_pct=97.5)"
    assert repr(sm.telemetry) == "TelemetryStats(source='NVML, /proc', steps=3)"
    again = gs.Summary.from_json(sm.to_json())
    assert again == sm and again.telemetry.gpus == sm.telemetry.gpus
    assert pickle.loads(pickle.dumps(sm.telemetry)) == sm.telemetry
    assert sm.to_dict()["telemetry"]["gpus"][0]["mem_clock_mhz"] is None
    assert set(_struct_keys(sm.to_dict())["GpuTelemetry"]) == set(gpu)
    for key in gpu:
        assert isinstance(getattr(type(g), key), property), key


def test_findings_equal_what_the_cpp_core_writes(cupti, tmp_path):
    path = cupti.save(tmp_path / "run.json")
    written = json.loads(pathlib.Path(path).read_text())["findings"]
    findings = cupti.diagnose()
    assert findings == [gs.Finding(**f) for f in written]
    assert [f.evidence for f in findings] == [f["evidence"] for f in written]
    with pytest.raises(ValueError, match="severity"):
        gs.Finding("x", "t", "urgent", 0.5)


# ------------------------------------------------------------------ run files


def test_a_run_file_is_written_from_the_objects_and_parsed_once(cupti, tmp_path, monkeypatch):
    dumped = []
    real_dumps, real_loads = json.dumps, json.loads

    def dumps(obj, *args, **kwargs):
        dumped.append(obj)
        return real_dumps(obj, *args, **kwargs)

    monkeypatch.setattr(json, "dumps", dumps)
    monkeypatch.setattr(json, "loads", lambda *a, **k: pytest.fail("save() parsed JSON"))
    path = cupti.save(tmp_path / "run.json", dataset="d")
    assert len(dumped) == 1 and set(dumped[0]) == {"schema", "schema_version", "metadata"}

    loads = []

    def counting_loads(*args, **kwargs):
        loads.append(args)
        return real_loads(*args, **kwargs)

    monkeypatch.setattr(json, "loads", counting_loads)
    monkeypatch.setattr(json, "dumps", lambda *a, **k: pytest.fail("load_run() wrote JSON"))
    summary, meta = _baseline.load_run(str(path))
    assert len(loads) == 1  # the file, once; the summary is read from that parse
    assert summary == cupti.summary() and meta["dataset"] == "d"


def test_the_run_file_is_the_document_json_dumps_wrote(cupti, tmp_path):
    """Readable both ways: the same keys, in the same order, and the summary
    and findings exactly as to_json() and the C++ findings writer give them."""
    text = pathlib.Path(cupti.save(tmp_path / "run.json")).read_text()
    doc = json.loads(text)
    assert list(doc) == ["schema", "schema_version", "metadata", "summary", "findings", "step_times"]
    assert doc["summary"] == cupti.summary().to_dict()
    assert [gs.Finding(**f) for f in doc["findings"]] == cupti.diagnose()
    assert text.startswith('{\n  "schema": "gpuscope.run",\n  "schema_version": 1,\n  "metadata": {\n')
    assert '\n  ],\n  "step_times": [' in text and text.endswith("]\n}\n")
    assert '\n  "summary": {\n    "schema_version": 2,\n' in text
    assert doc["step_times"] == list(cupti.step_columns()["duration"])
    # Re-indenting as one json.dumps would have written it changes nothing but spacing.
    assert json.dumps(doc, indent=2) == json.dumps(json.loads(json.dumps(doc, indent=2)), indent=2)


def test_run_file_head_must_be_an_object(cupti):
    sm = cupti.summary()
    for head in ("", "[]", "{", "not json"):
        with pytest.raises(ValueError, match="head"):
            _gpuscope._run_file_json(head, sm, [])
    text = _gpuscope._run_file_json("{}", sm, [])
    assert list(json.loads(text)) == ["summary", "findings"]


@pytest.mark.parametrize("bad,message", [
    (float("nan"), "NaN"),
    (float("inf"), "NaN or infinite"),
    ("\ud800", "lone surrogate"),
    (10 ** 400, "too large"),
    (object(), "which JSON cannot"),
], ids=["nan", "inf", "lone-surrogate", "huge-int", "object"])
def test_summary_from_plain_data_refuses_what_json_cannot_hold(cupti, bad, message):
    d = cupti.summary().to_dict()
    d["source_reason"] = bad
    with pytest.raises(ValueError, match=message):
        gs.Summary._from_dict(d)


def test_summary_from_plain_data_checks_as_from_json_does(cupti):
    d = cupti.summary().to_dict()
    assert gs.Summary._from_dict(d) == cupti.summary()
    d["steps"] = -3
    with pytest.raises(ValueError, match="field 'steps'"):
        gs.Summary._from_dict(d)
    nested = []
    for _ in range(100):
        nested = [nested]
    with pytest.raises(ValueError, match="nested too deeply"):
        gs.Summary._from_dict(dict(d, steps=10, extra=nested))
    looped = {}
    looped["self"] = looped
    with pytest.raises(ValueError, match="nested too deeply"):
        gs.Summary._from_dict(looped)
    with pytest.raises(ValueError, match="not a JSON object"):
        gs.Summary._from_dict([1])


# --------------------------------------------------------------------- doctor


def test_doctor_report_is_an_object():
    report = _gpuscope.run_doctor()
    assert isinstance(report, _gpuscope.DoctorReport)
    assert report.checks and all(c.status in ("OK", "WARN", "FAIL") for c in report.checks)
    assert isinstance(report.facts, dict) and "gpu_count" in report.facts
    assert report.has_failures() == any(c.status == "FAIL" for c in report.checks)
    assert "checks:" in report.format() and "\033[" not in report.format()
    again = _gpuscope.DoctorReport.from_json(report.to_json())
    assert again == report and again.baseline_diff(report) == []
    with pytest.raises(ValueError, match="not a gpuscope doctor report"):
        _gpuscope.DoctorReport.from_json("{}")


def test_run_metadata_reads_the_gpus_from_the_doctor_report(monkeypatch):
    crafted = json.loads(_gpuscope.run_doctor().to_json())
    crafted.update(driver_version="550.54", cuda_driver_version=12040, gpu_count=2)
    crafted["facts"].update({"gpu0.name": "H100", "gpu1.name": "H100"})
    report = _gpuscope.DoctorReport.from_json(json.dumps(crafted))
    monkeypatch.setattr(_gpuscope, "run_doctor", lambda: report)
    monkeypatch.setattr(json, "loads", lambda *a, **k: pytest.fail("the report went through JSON"))
    assert _metadata._gpus_and_driver() == (["H100", "H100"], "550.54", 12040)


def test_findings_are_built_as_the_dataclass_was():
    f = gs.Finding("x", "t", "info", 0.25, {"a": 1.0})
    assert f.share == 0.25 and f.evidence == {"a": 1.0} and f.recommendation == ""
    assert f == gs.Finding(id="x", title="t", severity="info", share=0.25, evidence={"a": 1})

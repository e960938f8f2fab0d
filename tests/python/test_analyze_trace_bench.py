"""benchmarks/analyze_trace.py in a tiny mode (a 5 MiB generated trace, one
run, gpuscope only): the script generates its trace, times gpuscope on every
trace and prints a row per trace with sane numbers; the generated trace is
in the current Kineto layout and gpuscope finds its steps."""

import json
import pathlib
import re
import subprocess
import sys

_BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def test_analyze_trace_bench_tiny(tmp_path):
    out = subprocess.run([sys.executable, str(_BENCH / "analyze_trace.py"), "--size-mb", "5", "--repeats", "1",
                          "--no-hta", "--trace-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "# HTA: skipped (--no-hta)" in out.stdout
    t = r"([\d.]+) (m?s) \[[\d.]+–[\d.]+\]"
    rows = {}
    for line in out.stdout.splitlines():
        m = re.match(rf"\| ([^|]+) \| ([\d.]+) MiB \| {t} \| skipped \| – \| (\d+) MiB \| skipped \| (met|NOT met) \(.*?\) "
                     rf"\| ([\d.]+) % \| – \|$", line)
        if m:
            rows[m.group(1)] = m
    assert set(rows) == {"event_sync_a100", "alexnet", "resnet50_v100_workers4", "resnet50_v100_workers0",
                         "resnet50_v100_workers0, as an object", "generated, 5 MiB"}, out.stdout
    for label, m in rows.items():
        size, wall, unit, rss, _, idle = (float(m.group(2)), float(m.group(3)), m.group(4), float(m.group(5)),
                                          m.group(6), float(m.group(7)))
        wall_s = wall / 1000 if unit == "ms" else wall
        assert 0.005 < wall_s < 60, (label, m.group(0))
        assert 5 < rss < 2000, (label, m.group(0))  # the child's own peak, not the benchmark's
        assert 0 <= idle <= 100, (label, m.group(0))
    assert 5 <= float(rows["generated, 5 MiB"].group(2)) <= 9  # at least the size, within one step (3.5 MiB)
    # The same step repeated: the generated trace's GPU idle is the ResNet-50 step's (about 12 %).
    assert 5 < float(rows["generated, 5 MiB"].group(7)) < 25
    assert "memory goal (≤ 0.25 × size + 200 MiB): met on 6 of 6 traces" in out.stdout


def test_generated_trace_layout(tmp_path):
    sys.path.insert(0, str(_BENCH))
    try:
        import gen_kineto_trace
    finally:
        sys.path.remove(str(_BENCH))
    path = tmp_path / "g.json"
    info = gen_kineto_trace.generate(path, size_mb=2)
    assert path.stat().st_size == info["bytes"] >= 2 << 20
    doc = json.loads(path.read_text())
    assert doc["distributedInfo"]["rank"] == 0 and doc["distributedInfo"]["world_size"] == 1
    assert doc["schemaVersion"] == 1 and doc["deviceProperties"]
    assert '"rank": 0' in path.read_text()[:300]  # where HTA looks for it, line by line
    ev = doc["traceEvents"]
    cats = {e.get("cat") for e in ev}
    assert {"cpu_op", "cuda_runtime", "kernel", "gpu_memcpy", "gpu_memset", "user_annotation", "ac2g"} <= cats
    assert not cats & {"Operator", "Runtime", "Kernel", "Memcpy", "Memset"}
    steps = [e for e in ev if e.get("cat") == "user_annotation"]
    assert [e["name"] for e in steps] == [f"ProfilerStep#{i + 1}" for i in range(info["steps"])]
    # Fresh correlation ids each repeat, each kernel's matching one launch.
    launches = [e["args"]["correlation"] for e in ev if e.get("cat") == "cuda_runtime"]
    assert len(launches) == len(set(launches))
    kernels = [e for e in ev if e.get("cat") == "kernel"]
    assert {e["args"]["correlation"] for e in kernels} <= set(launches)
    # Epoch-scale microseconds with a fractional part, as newer Kineto writes.
    text = path.read_text()
    assert re.search(r'"ts": 17\d{14}\.\d{3},', text)
    assert len(set(re.findall(r'"ts": \d+\.(\d{3})', text))) > 1

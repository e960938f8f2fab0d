"""gpuscope analyze on Nsight Systems SQLite exports: a real one recorded on
an A100 (tests/data/traces/README.md) checked against the same arithmetic
done here on its tables with Python's own sqlite3, and a small export
written here the way nsys records gpuscope's NVTX ranges, whose steps and
phases must come from those ranges."""

import pathlib
import sqlite3
import subprocess
import sys

import pytest

import gpuscope as gs

import _two_gpus

SAXPY = pathlib.Path(__file__).resolve().parents[1] / "data" / "traces" / "saxpy_a100_nsys.sqlite"
MS = 1_000_000


def cli(*args):
    return subprocess.run([sys.executable, "-m", "gpuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=120, check=False)


def union(intervals):
    total, end = 0, None
    for b, e in sorted(intervals):
        if end is None or b > end:
            total, end = total + e - b, e
        elif e > end:
            total, end = total + e - end, e
    return total


def tables_arithmetic(path):
    """The whole export as one step: from the first record (NVTX range,
    runtime call, kernel, copy, memset) to the last; busy is the union of
    kernels, copies and memsets in it, kernel time before copies before
    memsets (docs/definitions.md)."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    have = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}

    def rows(table, where=""):
        if table not in have:
            return []
        return db.execute(f'SELECT start, "end" FROM {table} WHERE "end" IS NOT NULL {where}').fetchall()

    kernels = rows("CUPTI_ACTIVITY_KIND_KERNEL")
    copies = rows("CUPTI_ACTIVITY_KIND_MEMCPY")
    memsets = rows("CUPTI_ACTIVITY_KIND_MEMSET")
    everything = (kernels + copies + memsets + rows("CUPTI_ACTIVITY_KIND_RUNTIME")
                  + rows("NVTX_EVENTS", "AND eventType IN (59, 60)"))
    begin, end = min(b for b, _ in everything), max(e for _, e in everything)
    k = union(kernels)
    km = union(kernels + copies)
    kms = union(kernels + copies + memsets)
    span = end - begin
    return {"idle_pct": 100.0 * (1 - kms / span), "kernel": k / span, "memcpy": (km - k) / span,
            "memset": (kms - km) / span, "kernels": len(kernels), "copies": len(copies), "span": span}


def test_the_saxpy_export_gives_the_idle_its_tables_give():
    expected = tables_arithmetic(SAXPY)
    run = gs.analyze_trace(SAXPY, whole_trace=True)
    s = run.summary
    assert run.format == "Nsight Systems SQLite export"
    assert run.device_records == expected["kernels"] + expected["copies"] == 20
    assert s.steps == 1 and s.step_time.max == pytest.approx(expected["span"] * 1e-9, rel=1e-9)
    assert s.gpu_idle_pct == pytest.approx(expected["idle_pct"], abs=0.01)
    a = s.activity
    assert a.device_share_kernel == pytest.approx(expected["kernel"], abs=1e-4)
    assert a.device_share_memcpy == pytest.approx(expected["memcpy"], abs=1e-4)
    assert a.device_share_memset == pytest.approx(expected["memset"], abs=1e-4)
    assert a.kernels_per_step == expected["kernels"] and a.copies_per_step == expected["copies"]
    assert "Nsight Systems trace saxpy_a100_nsys.sqlite" in s.source_reason


def test_an_export_of_two_gpus_with_several_streams_gives_the_numbers_worked_by_hand(tmp_path):
    # The saxpy export has one GPU and one stream: the same two-GPU timeline
    # test_analyze.py reads as a torch.profiler trace, exported as nsys does.
    path = tmp_path / "two_gpus.sqlite"
    _two_gpus.write_nsys(path)
    run = gs.analyze_trace(path)
    assert run.format == "Nsight Systems SQLite export"
    _two_gpus.check(run.summary, pytest.approx)


def test_an_export_without_step_ranges_names_its_longest_ranges():
    p = cli("analyze", SAXPY)
    assert p.returncode == 2 and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "--whole-trace" in p.stderr and '"MPI:MPI_Init"' in p.stderr
    # MPI's ranges are communication (docs/analyze.md).
    whole = cli("analyze", SAXPY, "--whole-trace")
    assert whole.returncode == 0, whole.stderr
    assert "idle while comm" in whole.stdout


def write_gpuscope_export(path, steps=4):
    """An export as nsys writes gpuscope's NVTX ranges: domain "gpuscope"
    (a domain-create row), registered strings "step", "data", "forward".
    Each 40 ms step: data for 30 ms with the GPU idle, then forward, which
    launches a 10 ms kernel; a custom phase "attention" nested in forward
    for its last 2 ms."""
    db = sqlite3.connect(path)
    db.executescript(_two_gpus.NSYS_TABLES + """
        INSERT INTO StringIds VALUES (1, 'step'), (2, 'data'), (3, 'forward'),
                                     (4, 'cudaLaunchKernel_v7000'), (5, 'sgemm_128x64_nn'),
                                     (6, 'attention');
    """)
    tid = 16777217
    db.execute("INSERT INTO NVTX_EVENTS VALUES (0, NULL, 75, 'gpuscope', ?, NULL, 7)", (tid,))
    for i in range(steps):
        t = 1000 * MS + i * 40 * MS
        db.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, NULL, ?, ?, 7)",
                       [(t, t + 40 * MS, tid, 1), (t, t + 30 * MS, tid, 2), (t + 30 * MS, t + 40 * MS, tid, 3),
                        (t + 38 * MS, t + 40 * MS, tid, 6)])
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, 4)",
                   (t + 30 * MS, t + 30 * MS + 5000, tid, 100 + i))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, 5, 5)",
                   (t + 30 * MS + 10_000, t + 40 * MS, 100 + i))
    db.commit()
    db.close()


def test_gpuscopes_own_nvtx_ranges_are_the_steps_and_phases(tmp_path):
    path = tmp_path / "instrumented.sqlite"
    write_gpuscope_export(path)
    s = gs.analyze_trace(path).summary
    assert s.steps == 4
    assert s.step_time.p50 == pytest.approx(0.040, rel=1e-6)
    phases = s.phases
    assert phases["data"].share == pytest.approx(0.75, rel=1e-6)
    assert phases["forward"].share == pytest.approx(0.25, rel=1e-6)
    # 30 ms of data and the 10 us before the kernel, of each 40 ms step.
    assert s.gpu_idle_pct == pytest.approx(100 * (30 * MS + 10_000) / (40 * MS), abs=1e-6)
    assert s.idle_by_cause["data"] == pytest.approx(75.0, abs=1e-6)
    assert [f.id for f in gs.diagnose(s)][0] == "input-bound"
    # Nesting kept: attention is inside forward, so it has no share of its
    # own but 2 of each 40 ms inclusive; forward keeps its whole share.
    attention = phases["attention"]
    assert not attention.top_level and attention.share == 0
    assert attention.inclusive_share == pytest.approx(2 / 40, rel=1e-6)
    assert attention.time.p50 == pytest.approx(0.002, rel=1e-6)


def test_an_sqlite_file_that_is_not_an_export_is_one_line(tmp_path):
    path = tmp_path / "notes.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE notes (id INTEGER, body TEXT)")
    db.commit()
    db.close()
    p = cli("analyze", path)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "not an Nsight Systems export" in p.stderr

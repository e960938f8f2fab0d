"""gpuscope analyze on bad input (docs/analyze.md, "Limits and bad input"):
what cannot be read is one line on stderr, exit status 2, nothing on
stdout, never a traceback, within seconds and bounded memory (a gzip bomb,
JSON nested a million deep, a string of 64 MiB, a truncated SQLite export);
what can be read with a documented degraded result is (zero and negative
durations, events out of order, correlation ids that match nothing, a trace
without GPU records, an export with only NVTX ranges, a million events).

Time and peak memory are the command's own: each runs in a child process
that reports its own peak."""

import gzip
import json
import os
import pathlib
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
import zlib

import pytest

import gpuscope as gs

TRACES = pathlib.Path(__file__).resolve().parents[1] / "data" / "traces"
SAXPY = TRACES / "saxpy_a100_nsys.sqlite"
MIB = 1 << 20


# `gpuscope ARGS` as `python -m gpuscope` runs it (gpuscope/__main__.py),
# then this process's peak resident memory (VmHWM: the process's own since
# exec; getrusage's ru_maxrss would count the pytest process it was forked
# from) written to $PEAK_FILE.
MEASURED = """
import os, sys
from gpuscope._cli import main
try:
    code = main(sys.argv[1:])
finally:
    with open("/proc/self/status") as status:
        peak_kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["PEAK_FILE"], "w") as out:
        out.write(peak_kib)
sys.exit(code)
"""


class Run:
    def __init__(self, p, seconds, peak_mib):
        self.returncode, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr
        self.seconds, self.peak_mib = seconds, peak_mib


def run(*args, command="analyze", setup="", timeout=120):
    """`gpuscope analyze ARGS` in a child process (`setup`, Python, first):
    its exit status, output, wall time and peak resident memory."""
    with tempfile.TemporaryDirectory() as tmp:
        peak_file = os.path.join(tmp, "peak")
        start = time.monotonic()
        p = subprocess.run([sys.executable, "-c", setup + MEASURED, command, *map(str, args)],
                           capture_output=True, text=True, timeout=timeout, check=False,
                           env={**os.environ, "PEAK_FILE": peak_file})
        seconds = time.monotonic() - start
        with open(peak_file) as f:
            peak_mib = int(f.read()) / 1024
    return Run(p, seconds, peak_mib)


def assert_one_line_exit_2(r, *says):
    """The CLI's answer to input it cannot read."""
    assert r.returncode == 2, (r.returncode, r.stdout[:500], r.stderr[:500])
    assert r.stdout == "", r.stdout[:500]
    assert "Traceback" not in r.stderr, r.stderr[:2000]
    assert r.stderr.count("\n") == 1 and r.stderr.endswith("\n"), r.stderr[:2000]
    assert r.stderr.startswith("gpuscope analyze: "), r.stderr
    assert len(r.stderr) < 400, r.stderr[:2000]
    for text in says:
        assert text in r.stderr, r.stderr


def words(text):
    return " ".join(text.split())


# -- input that cannot be read: one line, exit 2 -----------------------------

def write_bomb(path, prefix, filler, gib):
    """A gzip stream that inflates to `gib` GiB: `prefix`, then `filler` over
    and over. Each MiB of filler is compressed once and its bytes written
    again and again (a full flush makes them the same every time), so that
    the file (about a thousandth of that) is written in a moment, and
    nothing is ever written inflated. Its end (the last block, the CRC of 20
    GiB) is never reached by a reader that refuses it, and is left out."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    head = c.compress(prefix) + c.flush(zlib.Z_FULL_FLUSH)
    mib = (filler * (MIB // len(filler) + 1))[:MIB]
    block = c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH)
    assert c.compress(mib) + c.flush(zlib.Z_FULL_FLUSH) == block
    with open(path, "wb") as f:
        f.write(head)
        for _ in range(gib * 1024):
            f.write(block)
    return path


@pytest.mark.parametrize("filler, says", [
    (b"0,", "a gzip bomb"),  # valid JSON all along: the inflation bound stops it
    (b" ", "more than 16 MiB without a string or a number"),  # the lexer's run bound, first
], ids=["numbers", "spaces"])
def test_a_gzip_bomb_of_20_gib_is_refused_in_seconds(tmp_path, filler, says):
    path = write_bomb(tmp_path / "bomb.json.gz", b'{"traceEvents": [', filler, 20)
    assert path.stat().st_size < 25 * MIB
    r = run(path)
    assert_one_line_exit_2(r, says)
    # Measured here: 0.5-1 s and 80-100 MiB (Python and the extension
    # included); it used to read all 20 GiB (a minute a 4 GiB bomb of
    # spaces, 12 GiB of memory: the JSON lexer held every space).
    assert r.seconds < 15, r.seconds
    assert r.peak_mib < 250, r.peak_mib


def test_a_well_formed_gzip_bomb_is_refused(tmp_path):
    # 256 MiB compressed whole by gzip (a valid stream and CRC): refused
    # once it passes 64 MiB at more than 256-fold.
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b"0," * (128 * MIB) + b"0]}", 6))
    r = run(path)
    assert_one_line_exit_2(r, "the gzip stream inflates more than 256-fold", "gunzip it")
    assert r.peak_mib < 250, r.peak_mib


def test_real_traces_are_not_taken_for_bombs():
    # The four real traces compress 8-27-fold: well under the bound.
    for path in sorted(TRACES.glob("*.json.gz")):
        ratio = len(gzip.decompress(path.read_bytes())) / path.stat().st_size
        assert 5 < ratio < 30, (path.name, ratio)
    assert gs.analyze_trace(TRACES / "resnet50_v100_workers0.pt.trace.json.gz").summary.steps > 0


@pytest.mark.parametrize("opening", ["[", '{"a":', '{"traceEvents": [{"args": '], ids=["arrays", "objects", "events"])
def test_json_nested_a_million_deep_is_refused_at_once(tmp_path, opening):
    path = tmp_path / "deep.json"
    path.write_text(opening * 1_000_000)
    r = run(path)
    assert_one_line_exit_2(r, "nested deeper than 64 levels", "not a trace")
    assert "truncated" not in r.stderr  # the nesting is what is wrong, said so
    assert r.seconds < 10, r.seconds
    assert r.peak_mib < 150, r.peak_mib


LEXER_RUNS = {
    "string": (lambda: b'{"traceEvents": [{"name": "' + b"a" * (64 * MIB) + b'"}]}', "more than 16 MiB in one string"),
    "brackets": (lambda: b'{"traceEvents": [' + b"[]," * (8 * MIB) + b"[]]}", "more than 16 MiB without a string"),
    "open-string": (lambda: b'{"traceEvents": [{"name": "' + b"a" * MIB, "missing closing quote"),
}


@pytest.mark.parametrize("name", LEXER_RUNS)
def test_what_the_json_lexer_would_hold_whole_is_bounded(tmp_path, name):
    """A string, or brackets without a value, that the JSON lexer would hold
    whole (and then quote whole in its error): refused past 16 MiB, and the
    error's quote of what was read cut to its two ends."""
    body, says = LEXER_RUNS[name]
    path = tmp_path / f"{name}.json"
    path.write_bytes(body())
    r = run(path)
    assert_one_line_exit_2(r, says)
    assert r.peak_mib < 300, r.peak_mib


@pytest.mark.parametrize("content, says", [
    (b"", "not a torch.profiler trace"),
    (b"\x00\x01binary\xff", "not valid JSON"),
    (b'[{"ph": "X", "cat": "kernel", "ts": 1, "dur": 2}', "unexpected end of input"),
    (b'{"traceEvents": [], "other": tru', "invalid literal"),
    (b'{"nodes": [{"id": 1}], "edges": []}', 'without a "traceEvents" list'),
    (b'[1, 2, 3]', 'no "ProfilerStep" ranges'),  # a list of events that has none
    (b'{"traceEvents": "not a list"}', 'without a "traceEvents" list'),
], ids=["empty", "binary", "truncated", "bad-literal", "other-tool", "numbers", "events-not-a-list"])
def test_text_that_is_not_a_trace(tmp_path, content, says):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    assert_one_line_exit_2(run(path), says)


def test_a_truncated_gzip_trace(tmp_path):
    data = (TRACES / "resnet50_v100_workers0.pt.trace.json.gz").read_bytes()
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    assert_one_line_exit_2(run(path), "the gzip stream ends early", "truncated")


def test_a_truncated_sqlite_export_is_one_line(tmp_path):
    path = tmp_path / "cut.sqlite"
    path.write_bytes(SAXPY.read_bytes()[:4096])
    assert_one_line_exit_2(run(path, "--whole-trace"), "truncated or corrupt", "nsys export --type sqlite")


def test_a_file_with_sqlites_header_and_nothing_else(tmp_path):
    path = tmp_path / "header.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    assert_one_line_exit_2(run(path))


# -- a million events; the bound on events -----------------------------------

def write_events(path, n):
    """`n` events in the current Kineto format, gzip'ed as written: 1000-event
    steps (a ProfilerStep#N, then an operator, its launch and its kernel,
    333 times)."""
    with gzip.open(path, "wb", compresslevel=1) as f:
        f.write(b'{"traceEvents": [\n')
        written, step, t = 0, 0, 1_000_000
        while written < n:
            parts = [b'{"ph":"X","cat":"user_annotation","name":"ProfilerStep#%d","pid":1,"tid":1,'
                     b'"ts":%d,"dur":10000},\n' % (step, t)]
            for i in range(333):
                c = written + 3 * i + 1
                parts.append(
                    b'{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":%d,"dur":4},'
                    b'{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":%d,"dur":2,'
                    b'"args":{"correlation":%d}},'
                    b'{"ph":"X","cat":"kernel","name":"sgemm","pid":0,"tid":7,"ts":%d,"dur":8,'
                    b'"args":{"device":0,"stream":7,"correlation":%d}},\n'
                    % (t + 30 * i, t + 30 * i + 1, c, t + 30 * i + 5, c))
            f.write(b"".join(parts))
            written += 1000
            step += 1
            t += 10_100
        f.write(b'{"ph":"i","name":"end","ts":%d}]}' % t)
    return path


@pytest.fixture(scope="module")
def million(tmp_path_factory):
    return write_events(tmp_path_factory.mktemp("million") / "million.json.gz", 1_000_000)


def test_a_million_events_cost_under_150_bytes_each(million):
    r = run(million)
    assert r.returncode == 0, r.stderr
    assert "1000 steps in window (1000 total)" in r.stdout
    # Measured here: 1.4 s and 100 MiB; 10 million events took 11-14 s and
    # 0.85-0.9 GiB (about 90 bytes an event: docs/analyze.md).
    baseline = run(command="--help").peak_mib
    per_event = (r.peak_mib - baseline) * MIB / 1_000_000
    assert per_event < 150, (r.peak_mib, baseline, per_event)
    assert r.seconds < 30, r.seconds


def test_past_max_events_is_one_line(million):
    r = run(million, setup="from gpuscope import _analyze\n_analyze.MAX_EVENTS = 100_000\n")
    assert_one_line_exit_2(r, "more than 100000 events (max_events): not read further")


# -- input read with a degraded result, as documented ------------------------

def event(cat, name, ts, dur, tid=1, pid=1, **args):
    e = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        e["args"] = args
    return e


def small_trace(steps=4, gpu=True, correlation_offset=0):
    """Steps of 1000 us: data for 300 us, then forward, which launches a
    500 us kernel at 400 us (its correlation id, plus `correlation_offset`
    on the kernel's side)."""
    events = []
    for i in range(steps):
        t = 10_000 + 1000 * i
        events += [event("user_annotation", f"ProfilerStep#{i}", t, 1000),
                   event("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 300),
                   event("cpu_op", "aten::conv2d", t + 300, 650)]
        if gpu:
            c = 100 + i
            events += [event("cuda_runtime", "cudaLaunchKernel", t + 350, 10, correlation=c),
                       event("kernel", "sgemm_128x64_nn", t + 400, 500, pid=0, tid=7, device=0, stream=7,
                             correlation=c + correlation_offset)]
    return events


def write_trace(path, events):
    path.write_text(json.dumps({"traceEvents": events}))
    return path


def test_events_out_of_order_give_the_same_summary(tmp_path):
    events = small_trace(steps=8)
    ordered = gs.analyze_trace(write_trace(tmp_path / "ordered.json", events)).summary.to_dict()
    ordered.pop("source_reason")  # names the file
    for seed in range(3):
        shuffled = list(events)
        random.Random(seed).shuffle(shuffled)
        got = gs.analyze_trace(write_trace(tmp_path / f"shuffled{seed}.json", shuffled)).summary.to_dict()
        got.pop("source_reason")
        assert got == ordered, seed
    assert gs.analyze_trace(tmp_path / "ordered.json").summary.gpu_idle_pct == pytest.approx(50.0, abs=1e-9)


def test_zero_and_negative_durations_are_points_in_time(tmp_path):
    plain = gs.analyze_trace(write_trace(tmp_path / "plain.json", small_trace())).summary
    points = small_trace() + [
        event("kernel", "zero", 10_100, 0, pid=0, tid=7, device=0, stream=7, correlation=900),
        event("kernel", "negative", 10_150, -40, pid=0, tid=7, device=0, stream=7, correlation=901),
        event("gpu_memcpy", "Memcpy HtoD (Pageable -> Device)", 11_100, -1.5, pid=0, tid=7, device=0, stream=7),
        event("cpu_op", "aten::negative", 11_050, -100),
    ]
    run = gs.analyze_trace(write_trace(tmp_path / "points.json", points))
    # Points take no time: the GPU idle and the step times are the same.
    assert run.summary.gpu_idle_pct == pytest.approx(plain.gpu_idle_pct, abs=1e-9)
    assert run.summary.step_time.p50 == pytest.approx(plain.step_time.p50, rel=1e-12)
    assert run.device_records == 4 + 3


def test_a_step_of_zero_or_negative_length(tmp_path):
    events = small_trace()
    events[0]["dur"] = -1000  # ProfilerStep#0: a point
    r = run(write_trace(tmp_path / "point_step.json", events))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "nan" not in r.stdout.lower(), r.stdout


def test_correlation_ids_that_match_nothing_are_counted(tmp_path):
    matched = gs.analyze_trace(write_trace(tmp_path / "matched.json", small_trace()))
    unmatched = gs.analyze_trace(write_trace(tmp_path / "unmatched.json", small_trace(correlation_offset=10_000)))
    assert matched.unmatched_correlations == 0
    assert unmatched.unmatched_correlations == 4 == unmatched.device_records
    # The device's time does not depend on which call launched it.
    assert unmatched.summary.gpu_idle_pct == pytest.approx(matched.summary.gpu_idle_pct, abs=1e-9)
    r = run(tmp_path / "unmatched.json")
    assert r.returncode == 0, r.stderr


def test_a_trace_without_gpu_records_is_a_host_report_and_says_so(tmp_path):
    path = write_trace(tmp_path / "host_only.json", small_trace(gpu=False))
    s = gs.analyze_trace(path).summary
    assert s.source == "host" and s.gpu_idle_pct is None
    assert s.source_reason.endswith("has no GPU records: a host-only trace")
    r = run(path)
    assert r.returncode == 0, r.stderr
    out = words(r.stdout)
    assert "source: host" in out and "has no GPU records: a host-only trace" in out, r.stdout
    # No GPU idle measured, and a finding that says why.
    assert not any(line.startswith("GPU idle") for line in r.stdout.splitlines()), r.stdout
    assert "host-only (notice)" in out and "GPU busy and idle time are not measured" in out, r.stdout
    assert "phase" in out and "data" in out  # the host's phases still are


def test_a_trace_without_profiler_steps_is_one_line(tmp_path):
    events = [e for e in small_trace() if not e["name"].startswith("ProfilerStep")]
    assert_one_line_exit_2(run(write_trace(tmp_path / "no_steps.json", events)),
                           'no "ProfilerStep" ranges', "--step NAME", "--whole-trace")
    # --whole-trace takes it as one step.
    r = run(tmp_path / "no_steps.json", "--whole-trace")
    assert r.returncode == 0 and "1 steps in window" in r.stdout, r.stderr


def test_an_export_with_only_nvtx_ranges_is_a_host_report(tmp_path):
    path = tmp_path / "nvtx_only.sqlite"
    db = sqlite3.connect(path)
    db.execute('CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, "end" INTEGER, eventType INTEGER NOT NULL, '
               "text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER)")
    db.executemany("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, 16777217, NULL, NULL)",
                   [(i * 10**6, (i + 1) * 10**6, "train_step") for i in range(5)])
    db.commit()
    db.close()
    # No ProfilerStep or gpuscope step ranges: one line naming the one it has.
    assert_one_line_exit_2(run(path), '"train_step"', "--step NAME")
    r = run(path, "--step", "train_step")
    assert r.returncode == 0, r.stderr
    out = words(r.stdout)
    assert "5 steps in window" in out and "source: host" in out and "a host-only trace" in out, r.stdout


def test_an_export_with_only_kernels(tmp_path):
    """No runtime calls or NVTX ranges: nothing marks a step, and nothing
    launched the kernels. One line saying what to do; with --whole-trace, the
    GPU's time, its kernels counted as launched by calls not in the trace."""
    path = tmp_path / "kernels_only.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, \"end\" INTEGER NOT NULL, "
               "deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, "
               "demangledName INTEGER, shortName INTEGER)")
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, NULL, NULL)",
                   [(i * 10**6, i * 10**6 + 250_000, i + 1) for i in range(4)])
    db.commit()
    db.close()
    assert_one_line_exit_2(run(path), "--whole-trace")
    r = run(path, "--whole-trace")
    assert r.returncode == 0, r.stderr
    assert "source: cupti" in words(r.stdout), r.stdout
    analysis = gs.analyze_trace(path, whole_trace=True)
    assert analysis.device_records == 4 == analysis.unmatched_correlations
    # 4 kernels of 250 us in the 3.25 ms from the first to the last.
    assert analysis.summary.gpu_idle_pct == pytest.approx(100 * (1 - 1.0 / 3.25), abs=1e-6)


def test_bytes_that_are_not_utf8_in_a_json_trace(tmp_path):
    # JSON strings must be UTF-8: the parser's error quotes the bytes it
    # read, escaped, so that the line is text (not a UnicodeDecodeError).
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "caf\xe9 \xff", "ts": 1, "dur": 2}]}')
    r = run(path)
    assert_one_line_exit_2(r, "not valid JSON at byte", "ill-formed UTF-8", "'\"caf\\xE9 '")
    assert "codec" not in r.stderr


def test_bytes_that_are_not_utf8_in_an_export(tmp_path):
    """SQLite keeps any bytes as text: names that are not UTF-8 are read
    with U+FFFD for each bad byte, into the report, the run file, the hint
    of the one line, and Python's strings."""
    path = tmp_path / "latin1.sqlite"
    bad = b"caf\xe9 \xff"
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, "end" INTEGER, eventType INTEGER NOT NULL,
          text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, "end" INTEGER NOT NULL,
          deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
          demangledName INTEGER, shortName INTEGER);
        CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT);
    """)
    db.execute("INSERT INTO StringIds VALUES (1, CAST(? AS TEXT))", (bad,))
    db.execute("INSERT INTO TARGET_INFO_GPU VALUES (0, CAST(? AS TEXT))", (bad,))
    for i in range(3):
        db.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, CAST(? AS TEXT), 1, NULL, NULL)",
                   (i * 1000, i * 1000 + 900, bad))
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, 5, 1, 1)",
                   (i * 1000 + 100, i * 1000 + 500))
    db.commit()
    db.close()
    assert_one_line_exit_2(run(path), '"caf\ufffd \ufffd"')
    analysis = gs.analyze_trace(path, step="caf\ufffd \ufffd")
    assert analysis.gpu_names == ["caf\ufffd \ufffd"] and analysis.summary.steps == 3
    r = run(path, "--whole-trace", "--json", tmp_path / "run.json")
    assert r.returncode == 0 and "Traceback" not in r.stderr and "bug" not in r.stderr, r.stderr
    saved = json.loads((tmp_path / "run.json").read_text())
    assert saved["metadata"]["extra"]["trace"]["gpus"] == ["caf\ufffd \ufffd"]

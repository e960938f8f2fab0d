"""session.save(path) and `gpuscope compare BASE NEW --max-regression PCT`:
a planted regression exits 1, the same run exits 0, noise is not called a
regression, and bad files get a clear error (exit 2) and never a
traceback."""

import json
import random
import re
import subprocess
import sys

import pytest

import gpuscope as gs
from conftest import MS


def run(tmp_path, name, data_ms=10, compute_ms=40, steps=40, dataset="imagenet-1k@v2", activity=True):
    clock = gs.testing.ManualClock()
    gpu = gs.testing.SimulatedDevice(activity=activity)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(steps):
        with s.step(samples=64):
            with s.phase("data"):
                clock.advance(data_ms * MS)
            with s.phase("forward"):
                gpu.launch(compute_ms * MS)
                clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    path = s.save(tmp_path / f"{name}.json", dataset=dataset)
    s.close()
    return path


def compare(*args):
    p = subprocess.run([sys.executable, "-m", "gpuscope", "compare", *map(str, args)],
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_saved_run_holds_summary_findings_and_metadata(tmp_path):
    path = run(tmp_path, "base")
    doc = json.load(open(path))
    assert doc["schema"] == "gpuscope.run" and doc["schema_version"] == 1
    assert gs.Summary.from_json(json.dumps(doc["summary"])).steps == 40
    meta = doc["metadata"]
    assert meta["dataset"] == "imagenet-1k@v2"
    assert meta["command"] == sys.argv
    assert meta["host"] and meta["libraries"]["gpuscope"] == gs.__version__
    assert meta["libraries"]["python"]
    for key in ("git_commit", "container_image", "gpus", "driver_version", "created", "cwd"):
        assert key in meta
    assert isinstance(doc["findings"], list)


def test_compare_exits_0_without_a_regression_and_1_with_one(tmp_path):
    base = run(tmp_path, "base")
    same = run(tmp_path, "same")
    p = compare(base, same)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no regression past 5%" in p.stdout
    # Planted: a slower loader, 10 -> 20 ms of a 50 ms step.
    slow = run(tmp_path, "slow", data_ms=20)
    p = compare(base, slow, "--max-regression", 5)
    assert p.returncode == 1, p.stdout
    assert "REGRESSION" in p.stdout
    # Every step 50 -> 60 ms: no noise, so the interval is the change itself.
    assert "p50 step time grew +20.0% (95% CI +20.0% to +20.0%, 40 vs 40 steps; bound 5%)" in p.stdout
    assert "GPU idle grew +13.3 points" in p.stdout  # shown; the step-time test decides
    p = compare(base, slow, "--statistic", "throughput")
    assert p.returncode == 1 and "throughput (samples/s) fell -16.7%" in p.stdout, p.stdout
    # A bound wide enough lets it pass: the bound is honoured, not fixed.
    assert compare(base, slow, "--max-regression", 50).returncode == 0
    # Faster is never a regression.
    assert compare(slow, base).returncode == 0


def test_compare_reports_what_changed_between_the_runs(tmp_path):
    base = run(tmp_path, "base", data_ms=1)
    other = run(tmp_path, "other", data_ms=30, dataset="imagenet-1k@v3")
    p = compare(base, other, "--max-regression", 100)
    assert p.returncode == 0
    assert "dataset: imagenet-1k@v2 -> imagenet-1k@v3" in p.stdout
    assert "new finding: input-bound" in p.stdout
    assert "phase data (% of step)" in p.stdout


@pytest.mark.parametrize("content,message", [
    ("", "empty file"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summ', "corrupt or truncated JSON"),
    ("\x00\xff\xfe binary", "not UTF-8 text"),
    ('{"schema": "gpuscope.run", "schema_version": 99, "summary": {}}', "schema_version 99"),
    ('{"schema": "gpuscope.doctor", "schema_version": 1}', "gpuscope doctor --baseline"),
    ('{"hello": "world"}', "not a gpuscope run file"),
    ('[1, 2, 3]', "not a gpuscope run file"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summary": {"steps": "many"}}', "summary cannot be used"),
    pytest.param("[" * 100000 + "]" * 100000, "gpuscope compare: ", id="deeper-than-the-json-parser-goes"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summary": {"window_time": NaN}}', "holds the number NaN"),
    ('{"schema": "gpuscope.run", "schema_version": 1, "summary": {"window_time": 1e400}}', "holds the number 1e400"),
])
def test_bad_files_get_a_clear_error(tmp_path, content, message):
    good = run(tmp_path, "good")
    bad = tmp_path / "bad.json"
    bad.write_bytes(content.encode("latin-1"))
    for args in ((bad, good), (good, bad)):
        p = compare(*args)
        assert p.returncode == 2, p.stdout + p.stderr
        assert message in p.stderr, p.stderr
        assert p.stderr.startswith("gpuscope compare: ")


def test_missing_file_and_bad_bound(tmp_path):
    good = run(tmp_path, "good")
    p = compare(good, tmp_path / "nope.json")
    assert p.returncode == 2 and "no such file" in p.stderr
    p = compare(good, good, "--max-regression", -1)
    assert p.returncode == 2 and "0 or more" in p.stderr
    p = compare(good, good, "--max-regression", "nan")  # would turn the gate off
    assert p.returncode == 2 and "0 or more" in p.stderr
    p = compare(good)
    assert p.returncode == 2  # argparse's usage error


# Step times as a shared machine gives them: lognormal jitter, and now and
# then a neighbour's burst that makes 3 to 8 steps in a row 2 to 4 times
# slower (a heavy, autocorrelated tail). Seeds fixed: the same files, the
# same answer.
def noisy_times(seed, n=300, slower=1.0, stall_every=0):
    r = random.Random(seed)
    out, burst = [], 0
    for i in range(n):
        if burst == 0 and r.random() < 0.02:
            burst = r.randint(3, 8)
        t = 0.050 * r.lognormvariate(0, 0.25) * (r.uniform(2, 4) if burst else 1.0)
        burst = max(0, burst - 1)
        if stall_every and i % stall_every == stall_every - 1:
            t += 0.250  # a periodic stall: a few steps, not the typical one
        out.append(t * slower)
    return out


def timed_run(tmp_path, name, times, window=512):
    """A run file written through the public API, its steps taking `times`
    (seconds) on a manual clock."""
    clock = gs.testing.ManualClock()
    s = gs.Session(window=window, clock=clock)
    for t in times:
        with s.step(samples=64):
            with s.phase("forward"):
                clock.advance(round(t * 1e9))
    clock.advance(1000 * MS)
    path = s.save(tmp_path / f"{name}.json")
    s.close()
    return path


def verdict(stdout, name):
    """(change, low, high, verdict) from the test's line for `name`."""
    m = re.search(re.escape(name) + r" ([-+][\d.]+)% \(95% CI ([-+][\d.]+)% to ([-+][\d.]+)%, "
                  r"(\d+) vs (\d+) steps\): (.*)", stdout)
    assert m, stdout
    return float(m[1]), float(m[2]), float(m[3]), m[6]


def naive_p95_change(a, b):
    q = lambda xs: sorted(xs)[int(0.95 * (len(xs) - 1))]
    return q(b) / q(a) - 1


def test_saved_run_keeps_the_windows_step_times_in_order(tmp_path):
    times = noisy_times(1, n=100)
    doc = json.load(open(timed_run(tmp_path, "run", times)))
    assert doc["step_times"] == pytest.approx(times, abs=1e-9)  # ns on the clock
    assert list(doc)[-1] == "step_times"
    # A window that has slid: only the last `window` steps, oldest first.
    doc = json.load(open(timed_run(tmp_path, "slid", times, window=64)))
    assert doc["step_times"] == pytest.approx(times[-64:], abs=1e-9)


def test_noise_is_not_called_a_regression(tmp_path):
    a, b = noisy_times(4), noisy_times(5)  # one distribution, two draws
    # The old rule would fail this: p95 "grew" past any usual bound.
    assert naive_p95_change(a, b) > 0.20
    base, new = timed_run(tmp_path, "a", a), timed_run(tmp_path, "b", b)
    for statistic in ("p50", "p95", "mean", "throughput"):
        p = compare(base, new, "--statistic", statistic)
        assert p.returncode == 0, p.stdout + p.stderr
        name = "throughput (samples/s)" if statistic == "throughput" else f"{statistic} step time"
        change, low, high, said = verdict(p.stdout, name)
        assert low <= 0 <= high and said == "within noise", p.stdout
        assert "300 vs 300 steps" in p.stdout
    # The interval says how much noise there is: p95 moves most.
    change, low, high, _ = verdict(compare(base, new, "--statistic", "p95").stdout, "p95 step time")
    assert change > 20 and high - low > 40
    # Reproducible: the same files give the same interval.
    assert compare(base, new).stdout == compare(base, new).stdout


def test_a_real_slowdown_is_a_regression(tmp_path):
    base = timed_run(tmp_path, "base", noisy_times(4))
    slow = timed_run(tmp_path, "slow", noisy_times(5, slower=1.3))
    p = compare(base, slow)
    assert p.returncode == 1, p.stdout
    change, low, high, said = verdict(p.stdout, "p50 step time")
    assert 5 < low < change < high and said == "regression, past the 5% bound"
    assert 20 < change < 40
    assert "REGRESSION:\n  p50 step time grew " in p.stdout
    # The bound is what the whole interval must pass: past 30% it cannot be shown.
    p = compare(base, slow, "--max-regression", 30)
    assert p.returncode == 0 and "no regression past 30%" in p.stdout
    assert verdict(p.stdout, "p50 step time")[3] == "slower, not shown past the 30% bound"
    # The other way round it is faster, never a regression.
    p = compare(slow, base)
    assert p.returncode == 0 and verdict(p.stdout, "p50 step time")[3] == "faster"


def test_the_statistic_decides_what_is_compared(tmp_path):
    # A stall every 20th step: the typical step is unchanged, the mean is not.
    base = timed_run(tmp_path, "base", noisy_times(4))
    stalls = timed_run(tmp_path, "stalls", noisy_times(5, stall_every=20))
    p50 = compare(base, stalls)
    assert p50.returncode == 0, p50.stdout
    assert verdict(p50.stdout, "p50 step time")[3] == "within noise"
    mean = compare(base, stalls, "--statistic", "mean")
    assert mean.returncode == 1, mean.stdout
    assert verdict(mean.stdout, "mean step time")[1] > 5
    thr = compare(base, stalls, "--statistic", "throughput")
    assert thr.returncode == 1 and "throughput (samples/s) fell " in thr.stdout
    assert verdict(thr.stdout, "throughput (samples/s)")[2] < -5
    assert verdict(p50.stdout, "p50 step time")[0] != verdict(mean.stdout, "mean step time")[0]
    p = compare(base, stalls, "--statistic", "p99")
    assert p.returncode == 2 and "invalid choice" in p.stderr


def test_too_few_steps_are_refused(tmp_path):
    short = timed_run(tmp_path, "short", noisy_times(1, n=20))
    full = timed_run(tmp_path, "full", noisy_times(2))
    for args in ((short, full), (full, short)):
        p = compare(*args)
        assert p.returncode == 2, p.stdout
        assert "has 20 steps, fewer than --min-steps 30" in p.stderr
        assert "run it longer" in p.stderr and "lower --min-steps" in p.stderr
        assert p.stderr.startswith("gpuscope compare: ") and not p.stdout
    assert compare(short, full, "--min-steps", 20).returncode in (0, 1)
    for bad in ("1", "-5"):
        p = compare(short, full, "--min-steps", bad)
        assert p.returncode == 2 and "--min-steps must be a whole number, 2 or more" in p.stderr


def without_step_times(path):
    doc = json.load(open(path))
    del doc["step_times"]
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    return path


def test_a_file_without_step_times_compares_by_the_earlier_rule(tmp_path):
    base = without_step_times(run(tmp_path, "base"))
    slow = run(tmp_path, "slow", data_ms=20)  # holds step times; the baseline does not
    p = compare(base, slow)
    assert p.returncode == 1, p.stdout
    assert "note: the baseline has no step times" in p.stdout and "save the runs again" in p.stdout
    assert "p95 step time grew +20.0%" in p.stdout
    assert "throughput fell -16.7%" in p.stdout
    assert "GPU idle grew +13.3 points (bound 5 points)" in p.stdout
    assert compare(base, slow, "--max-regression", 50).returncode == 0
    p = compare(base, without_step_times(run(tmp_path, "same")))
    assert p.returncode == 0 and "the baseline and the new run have no step times" in p.stdout
    # The Python API callers had: no step times given, the earlier rule.
    from gpuscope._baseline import compare_runs, load_run

    (b, bm), (n, nm) = load_run(str(base)), load_run(str(slow))
    lines, regressions = compare_runs(b, n, bm, nm, 5.0)
    assert "p95 step time grew +20.0% (bound 5%)" in regressions


@pytest.mark.parametrize("step_times,message", [
    ("[0.05, NaN, 0.05]", "holds the number NaN"),
    ("[0.05, 0.05, 0.05, -0.05]", "step_times[3] is -0.05, not a step time in seconds"),
    ('[0.05, "fast"]', 'step_times[1] is "fast", not a step time'),
    ("[0.05, true]", "step_times[1] is true, not a step time"),
    ("[0.05, [0.05]]", "step_times[1] is [0.05], not a step time"),
    ('{"0": 0.05}', "step_times is dict, not a list of seconds"),
    ('"0.05 0.05"', "step_times is str, not a list of seconds"),
    ("null", "step_times is NoneType, not a list"),
    ("[" + ", ".join(["0.05"] * 600) + "]", "step_times holds 600 steps, more than the window (512)"),
])
def test_corrupt_step_times_get_a_clear_error(tmp_path, step_times, message):
    good = timed_run(tmp_path, "good", noisy_times(1, n=40))
    text = open(good).read()
    bad = tmp_path / "bad.json"
    bad.write_text(text[:text.rindex('"step_times": ')] + '"step_times": ' + step_times + "\n}\n")
    json.loads(bad.read_text().replace("NaN", "0"))  # otherwise a well-formed run file
    for args in ((bad, good), (good, bad)):
        p = compare(*args)
        assert p.returncode == 2, p.stdout + p.stderr
        assert message in p.stderr, p.stderr
        assert p.stderr.startswith("gpuscope compare: ") and "save the run again" in p.stderr


def _reference_resamples(xs, block, starts, q):
    # The circular block bootstrap as the method states it, written the
    # plain way: each resample strings blocks of `block` steps (wrapping
    # from the last step to the first) from the given starts, cut to n
    # steps; the statistic of each (the mean, or the type-7 q-quantile).
    n = len(xs)
    k = -(-n // block)
    out = []
    for i in range(len(starts) // k):
        sample = [xs[(j + t) % n] for j in starts[i * k:(i + 1) * k] for t in range(block)][:n]
        if q < 0:
            out.append(sum(sample) / n)
        else:
            sample.sort()
            h = (n - 1) * q
            lo = int(h)
            hi = min(lo + 1, n - 1)
            out.append(sample[lo] + (h - lo) * (sample[hi] - sample[lo]))
    return out


@pytest.mark.parametrize("n", [4, 5, 31, 200])
def test_the_resampling_is_the_method_stated(n):
    # The bootstrap runs in C++ (one path, with or without numpy): each
    # resample's statistic must be the one the plain definition gives for
    # the same block starts, and the block length the stated rule's.
    from gpuscope import _gpuscope
    from gpuscope._noise import block_length

    rnd = random.Random(n)
    xs = [0.05 + rnd.random() * 0.01 for _ in range(n)]
    xs[n // 2:n // 2 + n // 8] = [0.2] * (n // 8)  # a burst: longer blocks
    b = block_length(xs)
    assert 1 <= b <= max(1, n // 4)
    assert b >= round(n ** (1 / 3)) or b == n // 4
    words = [rnd.getrandbits(32) for _ in range(50 * -(-n // b))]
    starts = [(w * n) >> 32 for w in words]
    raw = b"".join(w.to_bytes(4, "little") for w in words)
    for q in (-1.0, 0.5, 0.95):
        got = _gpuscope._bootstrap_resamples(xs, b, raw, q)
        assert got == pytest.approx(_reference_resamples(xs, b, starts, q), rel=1e-12), q
        assert len(got) == 50
    # A steady series has no correlation to stretch the blocks over.
    assert block_length([0.05] * 1000) == 10
    # And the ranks' correlation does: a slow drift gets the longest blocks.
    assert block_length([0.05 + i * 1e-6 for i in range(1000)]) == 250


def test_the_interval_is_the_same_without_numpy(monkeypatch):
    # gpuscope does not depend on numpy: where it is missing, the same files
    # must give the same verdict.
    from gpuscope._noise import compare_step_times

    a, b = noisy_times(4), noisy_times(5, slower=1.1)
    with_numpy = [compare_step_times(a, b, st) for st in ("p50", "p95", "mean", "throughput")]
    monkeypatch.setitem(sys.modules, "numpy", None)  # `import numpy` raises ImportError
    without = [compare_step_times(a, b, st) for st in ("p50", "p95", "mean", "throughput")]
    assert with_numpy == without


def test_step_times_of_zero_get_a_clear_error(tmp_path):
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock)
    for _ in range(40):
        with s.step():
            pass  # the manual clock does not move: every step takes 0 s
    clock.advance(1000 * MS)
    zero = s.save(tmp_path / "zero.json")
    s.close()
    good = timed_run(tmp_path, "good", noisy_times(1, n=40))
    p = compare(zero, good)
    assert p.returncode == 2 and "the baseline's p50 step time is 0" in p.stderr, p.stdout + p.stderr
    assert compare(good, zero).returncode == 0  # 0 s steps are not slower
    p = compare(good, zero, "--statistic", "throughput")  # but infinitely many per second
    assert p.returncode == 2 and "the new run's mean step time is 0 s" in p.stderr


# ------------------------------------------- many phases: linear, and bounded


def many_phases_run(path, names, steps=40, slower=1.0):
    """A run file of a real session whose every step opens each of `names`
    once: p0, p1 and p2 for 3, 2 and 1 ms (times `slower`), the others 1 us."""
    big = {"p0": 3 * MS, "p1": 2 * MS, "p2": MS}
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, max_phases=4096, telemetry_interval_ms=0)
    for _ in range(steps):
        with s.step():
            for name in names:
                with s.phase(name):
                    clock.advance(round(big[name] * slower) if name in big else 1000)
        s.flush()  # 4000 records a step: never more than the queue holds
    clock.advance(1000 * MS)
    out = s.save(path)
    s.close()
    return out


def test_comparing_4000_phases_reads_each_runs_phases_once(tmp_path, monkeypatch):
    # Summary.phases builds a dict of every phase on each read; compare read
    # it once per phase, and two runs of 4,000 phases took 35 s to compare.
    from gpuscope._baseline import compare_runs, load_run_file

    names = [f"p{i}" for i in range(4000)]
    base = load_run_file(many_phases_run(tmp_path / "base.json", names))
    new = load_run_file(many_phases_run(tmp_path / "new.json", names, slower=1.5))
    assert len(base.summary.phases) == len(new.summary.phases) == 4001  # and "other"
    reads = []
    phases = gs.Summary.phases
    monkeypatch.setattr(gs.Summary, "phases", property(lambda s: reads.append(s) or phases.fget(s)))
    lines, regressions = compare_runs(base.summary, new.summary, base.metadata, new.metadata,
                                      base_step_times=base.step_times, new_step_times=new.step_times)
    assert len(reads) <= 2, f"Summary.phases read {len(reads)} times for 2 runs of 4,000 phases"
    monkeypatch.undo()
    # The rows are still those of the phases over 0.5 % of a step, largest first.
    rows = [line.split()[1] for line in lines if line.lstrip().startswith("phase ")]
    assert rows == ["p0", "p1", "p2"], rows
    assert regressions and "p50 step time grew" in regressions[0]
    p = compare(tmp_path / "base.json", tmp_path / "new.json")
    assert p.returncode == 1 and "phase p2 (% of step)" in p.stdout, p.stdout + p.stderr


BUILTIN = ("data", "h2d", "forward", "backward", "optimizer", "comm", "sync", "eval", "checkpoint")


def test_the_phase_limit_on_read_is_the_sessions(tmp_path):
    from gpuscope._baseline import BaselineError, load_run_file

    # The limit: max_phases goes up to 4096, not past it, and a session's
    # table holds the nine built-in names whether used or not.
    gs.Session(max_phases=4096).close()
    with pytest.raises(ValueError, match="from 10 to 4096"):
        gs.Session(max_phases=4097)
    custom = [f"p{i}" for i in range(4096 - len(BUILTIN))]
    s = gs.Session(max_phases=4096)
    with pytest.raises(gs.GpuscopeError, match="phase table holds 4096 names"):
        for name in custom + ["one-more"]:
            with s.phase(name):
                pass
    s.close()
    # A session filled to it, every built-in name used: read and compared.
    full = many_phases_run(tmp_path / "full.json", list(BUILTIN) + custom, steps=30)
    summary = load_run_file(full).summary
    assert len(summary.phases) == 4097  # and "other"
    assert {n for n, p in summary.phases.items() if p.builtin} == set(BUILTIN) | {"other"}
    assert compare(full, full).returncode == 0
    # One entry more is not a run gpuscope wrote: refused, file and limit named.
    doc = json.load(open(full))
    extra = dict(doc["summary"]["phases"][-1], share=0.0, inclusive_share=0.0)
    for what, added in (("one more name", [dict(extra, name="one-more")]),
                        ("a built-in name twice", [dict(extra, name="data")])):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps(dict(doc, summary=dict(doc["summary"], phases=doc["summary"]["phases"] + added))))
        p = compare(full, bad)
        assert p.returncode == 2 and p.stderr.startswith(f"gpuscope compare: {bad}: its summary lists 4098 "
                                                         "phases"), (what, p.stdout + p.stderr)
        assert "4096 phase names at most" in p.stderr and "save the run again" in p.stderr, p.stderr
        with pytest.raises(BaselineError, match="its summary lists 4098 phases"):
            load_run_file(str(bad))
    # The reader's constants are the session's.
    from gpuscope._baseline import BUILTIN_PHASES, MAX_PHASE_NAMES

    assert MAX_PHASE_NAMES == 4096 and sorted(BUILTIN_PHASES) == sorted(BUILTIN)

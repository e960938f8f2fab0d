"""gpuscope analyze: real torch.profiler traces, recorded by others on V100s
and A100s (tests/data/traces/README.md), through the same engine a live
session feeds. The GPU numbers are checked against an independent
computation written here from the raw events; the findings and the compare
against what the two ResNet-50 runs are known to differ in (DataLoader
workers); bad input against one clear line and exit 2."""

import gzip
import json
import pathlib
import subprocess
import sys
from decimal import Decimal

import pytest

import gpuscope as gs

import _two_gpus

TRACES = pathlib.Path(__file__).resolve().parents[1] / "data" / "traces"
WORKERS0 = TRACES / "resnet50_v100_workers0.pt.trace.json.gz"
WORKERS4 = TRACES / "resnet50_v100_workers4.pt.trace.json.gz"
EVENT_SYNC = TRACES / "event_sync_a100.pt.trace.json.gz"
ALEXNET = TRACES / "alexnet.pt.trace.json.gz"

KERNEL, MEMCPY, MEMSET = "kernel", "memcpy", "memset"
CATEGORY = {"Kernel": KERNEL, "kernel": KERNEL, "Memcpy": MEMCPY, "gpu_memcpy": MEMCPY,
            "Memset": MEMSET, "gpu_memset": MEMSET}


def cli(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "gpuscope", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, check=False)


def ns(us):
    return int((Decimal(us) * 1000).to_integral_value())


def raw_events(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal, parse_int=Decimal)
    return doc if isinstance(doc, list) else doc["traceEvents"]


def union(intervals):
    total, end = 0, None
    for b, e in sorted(intervals):
        if end is None or b > end:
            total += e - b
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


ALEXNET_STEP = "[param|pytorch.model.alex_net|0|0|0]"  # its model's range: no ProfilerStep


def independent(path, step="ProfilerStep#"):
    """GPU idle % and the device-time split, from the raw events: per step
    (a ProfilerStep range, or the range named `step`) and device (one that has worked by the step's
    end), the union of its kernels, copies and memsets clipped to the step;
    every instant goes to the highest of kernel > memcpy > memset, the rest
    is idle (docs/definitions.md; no collectives in these traces)."""
    events = raw_events(path)
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith(step)
                   and CATEGORY.get(e.get("cat")) is None)
    device = {}
    for e in events:
        kind = CATEGORY.get(e.get("cat"))
        if e.get("ph") == "X" and kind is not None:
            b = ns(e["ts"])
            device.setdefault(int(e["args"]["device"]), []).append((b, b + max(0, ns(e["dur"])), kind))
    step_total = sum(e - b for b, e in steps)
    idle_pcts, split = [], {KERNEL: 0, MEMCPY: 0, MEMSET: 0}
    for dev, intervals in device.items():
        busy = 0
        for b, e in steps:
            if not any(ib < e for ib, _, _ in intervals):
                continue  # the device has not worked yet: no GPU numbers for it
            clipped = {k: [(max(b, ib), min(e, ie)) for ib, ie, kk in intervals
                           if kk == k and ib < e and ie > b] for k in split}
            k = union(clipped[KERNEL])
            km = union(clipped[KERNEL] + clipped[MEMCPY])
            kms = union(clipped[KERNEL] + clipped[MEMCPY] + clipped[MEMSET])
            split[KERNEL] += k
            split[MEMCPY] += km - k
            split[MEMSET] += kms - km
            busy += kms
        idle_pcts.append(100.0 * (1 - busy / step_total))
    shares = {k: v / (step_total * len(device)) for k, v in split.items()}
    return sum(idle_pcts) / len(idle_pcts), shares, len(steps)


@pytest.mark.parametrize("path", [WORKERS0, WORKERS4, EVENT_SYNC, ALEXNET], ids=lambda p: p.name.split(".")[0])
def test_gpu_numbers_match_the_raw_events(path):
    step = ALEXNET_STEP if path == ALEXNET else None
    idle, shares, steps = independent(path, step or "ProfilerStep#")
    s = gs.analyze_trace(path, step=step).summary
    assert s.source == "cupti" and "recorded: torch.profiler trace" in s.source_reason
    assert s.steps == steps
    assert s.gpu_idle_pct == pytest.approx(idle, abs=0.5)
    a = s.activity
    for name, got in ((KERNEL, a.device_share_kernel), (MEMCPY, a.device_share_memcpy),
                      (MEMSET, a.device_share_memset)):
        assert got == pytest.approx(shares[name], abs=0.01), name
    # The categories and idle sum to the step time.
    total = a.device_share_kernel + a.device_share_memcpy + a.device_share_memset + a.device_share_comm
    assert total + a.device_share_idle == pytest.approx(1.0, abs=1e-6)


def test_two_gpus_with_several_streams_each_give_the_numbers_worked_by_hand(tmp_path):
    # The shared traces have one GPU each, and their one multi-stream trace
    # (alexnet) is 99.9 % idle: here overlapping kernels on two streams, a
    # copy half under a kernel and a memset alone, on two GPUs, exactly.
    path = tmp_path / "two_gpus.pt.trace.json.gz"
    _two_gpus.write_kineto(path)
    _two_gpus.check(gs.analyze_trace(path).summary, pytest.approx)
    # The independent computation above agrees.
    idle, shares, steps = independent(path)
    assert steps == _two_gpus.STEPS
    assert idle == pytest.approx(_two_gpus.EXPECTED["gpu_idle_pct"], abs=1e-9)
    assert shares[KERNEL] == pytest.approx(_two_gpus.EXPECTED["share_kernel"], abs=1e-12)


def test_both_kineto_formats_and_what_was_read():
    old = gs.analyze_trace(WORKERS0)
    new = gs.analyze_trace(EVENT_SYNC)
    assert old.format == "Kineto JSON (list of events)" and new.format == "Kineto JSON"
    assert old.device_records > 9000 and old.events > 80000
    assert new.gpu_names[0] == "NVIDIA A100-PG509-200"
    # cuda_sync records: synchronizations counted per step.
    assert new.sync_records > 0 and new.summary.activity.syncs_per_step > 0
    # Phases from what the trace says: the loader's next() is data, the
    # optimizer's step optimizer, autograd's threads backward.
    phases = old.summary.phases
    for name in ("data", "forward", "backward", "optimizer", "h2d"):
        assert name in phases, (name, list(phases))
    assert len(old.step_times) == old.summary.steps == 6
    assert old.summary.step_time.p50 == pytest.approx(sorted(old.step_times)[2:4][0], rel=0.05)


def test_resnet50_zero_workers_is_input_bound_and_four_workers_is_not(tmp_path):
    ranked = gs.diagnose(gs.analyze_trace(WORKERS0).summary)
    zero = {f.id: f for f in ranked}
    four = {f.id: f for f in gs.diagnose(gs.analyze_trace(WORKERS4).summary)}
    # The top finding: two syncs a step (pageable copies) leave the GPU idle
    # for well under 1 % of the step; the loader, for over a fifth of it.
    assert ranked[0].id == "input-bound", [(f.id, f.share) for f in ranked]
    assert zero["input-bound"].severity == "high" and zero["input-bound"].share > 0.15
    assert "sync-bound" not in zero
    assert "input-bound" not in four
    # gpuscope compare of the two saved analyses reports the improvement.
    base, new = tmp_path / "w0.json", tmp_path / "w4.json"
    assert cli("analyze", WORKERS0, "--json", base).returncode == 0
    p = cli("analyze", WORKERS4, "--json", new)
    assert p.returncode == 0, p.stderr
    assert "findings (ranked by the step time they explain)" in p.stdout
    c = cli("compare", base, new, "--min-steps", "5")
    assert c.returncode == 0, c.stdout + c.stderr
    assert "gone: input-bound" in c.stdout and ": faster" in c.stdout, c.stdout


def test_fractional_epoch_timestamps_are_read_to_the_nanosecond(tmp_path):
    # Newer Kineto writes fractional microseconds at epoch scale: a double
    # holds 1712195495505582.988 only to 0.25 us.
    events = []
    for i in range(3):
        t = Decimal("1712195495505582.988") + i * Decimal("1000.001")
        events.append('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "pid": 1, "tid": 1, '
                      '"ts": %s, "dur": 1000.001}' % (i, t))
        events.append('{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %s, "dur": 250.0005, '
                      '"args": {"device": 0, "stream": 7, "correlation": %d}}' % (t + Decimal("0.5"), i + 1))
    text = '{"traceEvents": [%s]}' % ", ".join(events)
    json.loads(text)  # well-formed
    path = tmp_path / "fractional.json"
    path.write_text(text)
    s = gs.analyze_trace(path).summary
    assert s.step_time.p50 == pytest.approx(1.000001e-3, abs=1e-12)
    # 250.0005 us rounds to 250.001 us of 1000.001 us: exact to the nanosecond.
    assert s.gpu_idle_pct == pytest.approx(100 * (1 - 250001 / 1000001), abs=1e-9)


def test_a_trace_without_steps_says_how_to_name_one():
    p = cli("analyze", ALEXNET)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "no \"ProfilerStep\" ranges" in lines[0] and "--step NAME" in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    # Naming a range that occurs once per iteration analyzes it.
    ok = cli("analyze", ALEXNET, "--step", "aten::to")
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("content, message", [
    (b"", "not a torch.profiler trace"),
    (b"this is not json", "not a torch.profiler trace"),
    (b'{"some": "other tool"}', "without a \"traceEvents\" list"),
    (b"[" * 200_000, "nested deeper"),
    (gzip.compress(b'{"traceEvents": [' + b'{"ph": "X"},' * 1000)[:-20], "gzip stream"),
], ids=["empty", "not-json", "other-tool", "deep", "truncated-gzip"])
def test_bad_input_gets_one_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    p = cli("analyze", path)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stderr.count("\n") == 1 and message in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_missing_file_and_a_folder(tmp_path):
    with pytest.raises(FileNotFoundError):
        gs.analyze_trace(tmp_path / "nope.json")
    p = cli("analyze", tmp_path)
    assert p.returncode == 2 and "folder" in p.stderr


def test_top_kernels_match_the_raw_kernel_events():
    """Kernel names, live and from traces: the top kernels by device time
    per step, against the trace's own kernel events summed by name over the
    steps' windows (each kernel that began in a step)."""
    events = raw_events(WORKERS4)
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in events
                   if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#"))
    per_name, count, total = {}, {}, 0
    for e in events:
        if e.get("ph") != "X" or CATEGORY.get(e.get("cat")) != KERNEL:
            continue
        b = ns(e["ts"])
        if any(sb <= b < se for sb, se in steps):
            d = max(0, ns(e["dur"]))
            per_name[e["name"]] = per_name.get(e["name"], 0) + d
            count[e["name"]] = count.get(e["name"], 0) + 1
            total += d
    expected = sorted(per_name, key=lambda n: -per_name[n])[:10]
    s = gs.analyze_trace(WORKERS4).summary
    assert [k.name for k in s.top_kernels] == expected
    for k in s.top_kernels:
        assert k.time_per_step == pytest.approx(per_name[k.name] * 1e-9 / len(steps), rel=1e-9)
        assert k.count_per_step == pytest.approx(count[k.name] / len(steps))
        assert k.share == pytest.approx(per_name[k.name] / total, rel=1e-9)
    assert {k.kernel_class for k in s.top_kernels} >= {"gemm_fp32", "other"}
    # Per phase: backward launched cuDNN's gradient kernels, forward the
    # convolutions; each phase's list is its own launches, largest first.
    phases = s.phases
    assert any("dgrad" in k.name for k in phases["backward"].top_kernels)
    assert all(k.phase == "forward" for k in phases["forward"].top_kernels)
    times = [k.time_per_step for k in phases["forward"].top_kernels]
    assert times == sorted(times, reverse=True) and len(times) == 5
    # The report lists them; the JSON run file keeps them.
    report = cli("analyze", WORKERS4).stdout
    assert "top kernels" in report and "dgrad_engine" in report
    assert gs.Summary.from_json(s.to_json()).top_kernels == s.top_kernels


def test_html_and_chrome_trace_of_a_recorded_trace(tmp_path):
    html, trace = tmp_path / "w0.html", tmp_path / "w0.trace.json"
    p = cli("analyze", WORKERS0, "--html", html, "--trace", trace)
    assert p.returncode == 0, p.stderr
    page = html.read_text()
    # The plots have the trace's steps; the top kernels are listed.
    assert 'id="top-kernels"' in page and "No steps yet" not in page
    doc = json.loads(trace.read_text())
    slices = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in slices if e.get("cat") == "step"]
    assert len(steps) == 6
    kernels = [e for e in slices if e.get("cat") == "activity" and "what" in e.get("args", {})]
    raw = [e for e in raw_events(WORKERS0) if e.get("ph") == "X" and CATEGORY.get(e.get("cat")) == KERNEL]
    assert {e["name"] for e in kernels} <= {e["name"] for e in raw}  # named by their kernel
    causes = {e["args"]["cause"] for e in slices if e.get("cat") == "idle"}
    assert "data" in causes


def test_a_file_name_that_is_not_utf8_is_read(tmp_path):
    name = tmp_path / "run\udcff.pt.trace.json.gz"  # the byte 0xff, as os.fsdecode gives it
    name.write_bytes(EVENT_SYNC.read_bytes())
    run = gs.analyze_trace(name)
    assert run.summary.steps == 1 and "run" in run.summary.source_reason


def job_folder(tmp_path, slow_rank=2, world=4):
    """A job of `world` ranks: ResNet-50 with 4 DataLoader workers on each,
    but one rank whose trace is the 0-worker run (its loader starves it)."""
    folder = tmp_path / "job"
    folder.mkdir()
    for r in range(world):
        src = WORKERS0 if r == slow_rank else WORKERS4
        (folder / f"rank{r}.pt.trace.json.gz").write_bytes(src.read_bytes())
    (folder / "notes.txt").write_text("not a trace: left out")
    return folder


def test_a_folder_of_ranks_names_the_straggler(tmp_path):
    job = gs.analyze_job(job_folder(tmp_path))
    assert [r.rank for r in job] == [0, 1, 2, 3]
    for r in job:
        s = r.summary
        assert s.rank.rank == r.rank and s.rank.world_size == 4
        assert len(s.ranks) == 4 and s.ranks.missing == []
        straggler = s.ranks.stragglers[0]
        assert straggler.rank == 2 and straggler.phase == "data"
    top = gs.diagnose(job[0].summary)[0]
    assert top.id == "straggler" and "rank 2" in top.title
    p = cli("analyze", tmp_path / "job")
    assert p.returncode == 0, p.stderr
    rank_lines = [line for line in p.stdout.splitlines() if line.startswith("  rank ") and " steps " in line]
    assert len(rank_lines) == 4 and "rank2.pt.trace.json.gz" in rank_lines[2]
    assert "straggler" in p.stdout


def test_a_folder_without_traces_or_with_a_rank_twice(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    p = cli("analyze", empty)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "no traces" in p.stderr
    twice = tmp_path / "twice"
    twice.mkdir()
    for name in ("a.json.gz", "b.json.gz"):  # both say distributedInfo rank 0
        (twice / name).write_bytes(EVENT_SYNC.read_bytes())
    p = cli("analyze", twice)
    assert p.returncode == 2 and "both rank 0" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1

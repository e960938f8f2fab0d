"""``gpuscope analyze``: a profiler trace recorded on a real GPU, read
through the same C++ engine a live session feeds (gpuscope/analyze.h), into
the same summary, report, findings and run file (docs/analyze.md).

    gpuscope analyze TRACE [--json FILE] [--html FILE] [--trace FILE]
                           [--step NAME | --whole-trace] [--window N] [--warmup N]

``gs.analyze_trace(path)`` is the same from Python.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, List, Optional

from . import _gpuscope
from ._summary import Summary
from ._text import printable

if TYPE_CHECKING:  # the command line imports argparse; `import gpuscope` does not
    import argparse

USAGE = "[options] TRACE"
HELP = ("Summarize a torch.profiler trace (Kineto JSON, plain or .gz) or an Nsight Systems\n"
        "SQLite export recorded on a GPU: the report and findings a live session gives.")
EPILOG = """\
Steps are the trace's ProfilerStep#N ranges, or gpuscope's own NVTX step
ranges in an Nsight Systems export (--step names another range;
--whole-trace takes the trace as one step);
phases come from what the trace records (the DataLoader's next() is data,
Optimizer.step and zero_grad optimizer, autograd's work backward, the
operators before it forward, record_function ranges their own names;
docs/analyze.md states every rule). --json saves a run file that
`gpuscope compare BEFORE AFTER` compares with its noise test, as it does
live runs; --html the HTML report; --trace a Chrome trace of the last
steps (at most 32) with the GPU's idle gaps labelled by cause.

exit status: 0 analyzed; 2 the trace could not be read (one line says why).
"""

MAX_BYTES = 64 << 30
MAX_EVENTS = 50_000_000
TRACE_STEPS = 32  # --trace: the last steps drawn


def analyze_trace(path: "os.PathLike[str] | str", *, step: Optional[str] = None,
                  whole_trace: bool = False, window: int = 0, warmup_steps: int = 0,
                  launch_threshold_us: float = 20.0, trace_steps: int = 0) -> Any:
    """Reads the trace at ``path`` (torch.profiler's Kineto JSON, plain or
    gzip, or an Nsight Systems SQLite export) through gpuscope's engine.
    Returns a ``TraceAnalysis``: its
    ``summary`` (a ``Summary``, as a live session's; ``gs.diagnose()`` gives
    its findings), ``step_times`` (seconds), ``format``, and counts of what
    was read. ``step`` names the range that marks a step (default
    ``ProfilerStep``, else gpuscope's NVTX steps); ``whole_trace`` takes the
    trace as one step; ``window`` keeps the last N steps (0: all);
    ``trace_steps`` keeps the last N steps' timelines for
    ``result.chrome_trace()``.
    FileNotFoundError for a missing file; ValueError, with one line that
    says what is wrong, for a file that is not a trace or has no steps."""
    p = os.fspath(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"{p}: no such file")
    if os.path.isdir(p):
        raise IsADirectoryError(f"{p} is a folder: give one trace file (one rank)")
    # Bytes: a file name need not be UTF-8.
    return _gpuscope._analyze_trace(os.fsencode(p), step or "", bool(whole_trace), int(window),
                                    int(warmup_steps), int(round(launch_threshold_us * 1000)),
                                    MAX_BYTES, MAX_EVENTS, int(trace_steps))


def analyze_job(folder: "os.PathLike[str] | str", *, step: Optional[str] = None,
                whole_trace: bool = False, window: int = 0, warmup_steps: int = 0,
                launch_threshold_us: float = 20.0, trace_steps: int = 0) -> List[Any]:
    """Reads a folder of per-rank traces (files ending .json, .json.gz or
    .sqlite; one file is one rank) as ``analyze_trace()`` reads each, and
    compares the ranks as a live job's are: a list of ``TraceAnalysis`` by
    rank (``.rank``: the trace's distributedInfo rank, else its place in
    name order), each summary with its ``rank`` and ``ranks`` (the
    comparison), so ``gs.diagnose()`` names a straggler. ValueError, naming
    the file, for a trace that cannot be read."""
    p = os.fspath(folder)
    if not os.path.isdir(p):
        raise NotADirectoryError(f"{p}: not a folder of per-rank traces")
    return list(_gpuscope._analyze_job(os.fsencode(p), step or "", bool(whole_trace), int(window),
                                       int(warmup_steps), int(round(launch_threshold_us * 1000)),
                                       MAX_BYTES, MAX_EVENTS, int(trace_steps)))


def _rank_lines(job: List[Any]) -> str:
    """One line per rank: its file, steps, step time and GPU idle."""
    lines = [f"gpuscope analyze: {len(job)} ranks, one trace each "
             "(the report below is rank 0's, with the ranks compared)"]
    for r in job:
        s = r.summary
        idle = "-" if s.gpu_idle_pct is None else f"{s.gpu_idle_pct:.1f}%"
        lines.append(f"  rank {r.rank:<4} {s.steps:>5} steps  p50 {1e3 * s.step_time.p50:9.1f} ms  "
                     f"GPU idle {idle:>6}  {printable(os.path.basename(os.fsdecode(r._path)))}")
    return "\n".join(lines) + "\n\n"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("trace", metavar="TRACE",
                   help="a torch.profiler trace (.json, .json.gz), an nsys export (.sqlite), or a "
                        "folder of them, one per rank")
    p.add_argument("--json", metavar="FILE", help="also save a run file for gpuscope compare")
    p.add_argument("--html", metavar="FILE", help="also write the HTML report")
    p.add_argument("--trace", dest="trace_out", metavar="FILE",
                   help="also write a Chrome trace of the last steps")
    steps = p.add_mutually_exclusive_group()
    steps.add_argument("--step", metavar="NAME", help="the range that marks one step (default ProfilerStep)")
    steps.add_argument("--whole-trace", action="store_true", help="take the whole trace as one step")
    p.add_argument("--window", type=int, default=0, metavar="N", help="summarize the last N steps (default all)")
    p.add_argument("--warmup", type=int, default=0, metavar="N", help="leave out the first N steps")


def run(args: argparse.Namespace) -> int:
    options = dict(step=args.step, whole_trace=args.whole_trace, window=args.window,
                   warmup_steps=args.warmup, trace_steps=TRACE_STEPS if args.trace_out else 0)
    try:
        if os.path.isdir(args.trace):  # a job: one trace per rank
            job = analyze_job(args.trace, **options)  # type: ignore[arg-type]
            result = job[0]
            sys.stdout.write(_rank_lines(job))
        else:
            result = analyze_trace(args.trace, **options)  # type: ignore[arg-type]
    except (OSError, ValueError, _gpuscope.GpuscopeError) as e:
        print(f"gpuscope analyze: {printable(str(e))}", file=sys.stderr)
        return 2
    summary: Summary = result.summary
    sys.stdout.write(_gpuscope.format_report(summary, False))  # its findings included
    if args.json:
        from ._baseline import save_run

        extra = {"trace": {"path": os.path.abspath(os.fsdecode(result._path)), "format": result.format,
                           "events": result.events, "device_records": result.device_records,
                           "gpus": list(result.gpu_names)}}
        written = save_run(args.json, summary, extra=extra, step_times=list(result.step_times))
        print(f"gpuscope analyze: saved {printable(written)}", file=sys.stderr)
    if args.html:
        from ._html import write_html

        import json

        series = json.loads(result._series_json())["steps"]
        written = write_html(args.html, summary, series,
                             title=f"gpuscope: {os.path.basename(os.fsdecode(result._path))}")
        print(f"gpuscope analyze: wrote {printable(written)}", file=sys.stderr)
    if args.trace_out:
        from ._files import write_atomically

        write_atomically(args.trace_out, result.chrome_trace())
        print(f"gpuscope analyze: wrote {printable(args.trace_out)}", file=sys.stderr)
    return 0

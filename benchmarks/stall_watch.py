"""What watching for stalls costs (docs/definitions.md "Stalls"): the C++
worker's look at the open scopes every pass, and the Python watch thread
that asks every 0.5 s.

    python benchmarks/stall_watch.py [--seconds 3] [--repeat 5]

A session records a loop of steps of 5 phases, each step ~2 ms of
busy-wait, for --seconds; in each of --repeat rounds, one run with the
stall watch (the default, ``stall_after=None``) and one without
(``stall_after=float("inf")``: the worker skips its look and no Python
thread starts), in alternating order. Reported, medians and ranges over the
rounds: the worker thread's CPU per second with and without the watch
(their difference is the look's cost), and the Python watch thread's CPU
per second (read from its per-thread CPU clock). Each run is a fresh
process, so that the watch thread of one is not alive in the other.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)

RUN = textwrap.dedent("""
    import json, os, sys, threading, time
    sys.path.insert(0, {here!r})
    import gpuscope as gs
    from worker_cost import WorkerThread, _thread_clock

    watch = {watch}
    worker = WorkerThread.find()
    s = gs.Session(stall_after=None if watch else float("inf"))
    phases = ("data", "h2d", "forward", "backward", "optimizer")
    with s.step():
        pass
    stalls = [t for t in threading.enumerate() if t.name == "gpuscope-stalls"]
    clock = _thread_clock(stalls[0].native_id) if stalls else None
    w0, p0, t0 = worker.cpu_ns(), time.clock_gettime_ns(clock) if clock else 0, time.monotonic()
    while time.monotonic() - t0 < {seconds}:
        with s.step():
            for name in phases:
                with s.phase(name):
                    end = time.perf_counter() + 0.0004
                    while time.perf_counter() < end:
                        pass
    wall = time.monotonic() - t0
    print(json.dumps({{"worker_ms_per_s": (worker.cpu_ns() - w0) / 1e6 / wall,
                      "watch_ms_per_s": ((time.clock_gettime_ns(clock) - p0) / 1e6 / wall
                                         if clock else None),
                      "steps": s.summary().total_steps}}))
""")


def run(watch: bool, seconds: float) -> dict:
    code = RUN.format(here=os.path.dirname(os.path.abspath(__file__)), watch=watch, seconds=seconds)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def spread(xs: list) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    on, off, watch = [], [], []
    for i in range(a.repeat):
        for w in ((True, False) if i % 2 == 0 else (False, True)):
            r = run(w, a.seconds)
            (on if w else off).append(r["worker_ms_per_s"])
            if w:
                watch.append(r["watch_ms_per_s"])
    print(_machine.describe())
    print(f"worker CPU, ms per s, with the stall watch:    {spread(on)}")
    print(f"worker CPU, ms per s, without it:              {spread(off)}")
    print(f"difference of the medians (the look's cost):   "
          f"{statistics.median(on) - statistics.median(off):+.3f} ms per s")
    print(f"Python watch thread CPU, ms per s:             {spread(watch)}")


if __name__ == "__main__":
    main()

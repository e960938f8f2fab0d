"""What logging to a tracker costs the training loop (docs/benchmarks.md).

A loop of host-only steps that each spin for ``--step-ms`` (a stand-in for
the work a step does; spinning, not sleeping, so that any time the logging
thread takes from the loop, the GIL included, shows in the step time), run
``--rounds`` times in each of three arms, the arms alternated round by
round: no tracker; ``Session.log_to("tensorboard:DIR", every=N)`` (a real
SummaryWriter); the same with a tracker that does nothing (the thread's own
cost: the poll, the summary, the scalars). Prints, per arm, the median over
rounds of the mean step time with the range, and the process's CPU beyond
the loop's own thread per second of loop.

Also prints what one log costs on the logging thread (summary, scalars,
findings, the SummaryWriter's writes) and what ``scalars()`` costs, the
call a framework callback makes on the training thread at its logging step
for ``state.log_history``.

Usage: python benchmarks/tracker_cost.py [--steps 3000] [--step-ms 1] [--every 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import gpuscope as gs
from gpuscope.trackers import Sink, TensorBoardSink, scalars


class Null(Sink):
    name = "null"

    def scalars(self, step, values):
        pass


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def one_round(arm: str, steps: int, step_s: float, every: int, tmp: str) -> tuple:
    s = gs.Session(window=512)
    log = None
    if arm == "tensorboard":
        log = s.log_to(f"tensorboard:{tmp}/{time.monotonic_ns()}", every=every)
    elif arm == "null":
        log = s.log_to(Null(), every=every)
    cpu0, main0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
    for _ in range(steps):
        with s.step():
            with s.phase("data"):
                spin(step_s * 0.3)
            with s.phase("forward"):
                spin(step_s * 0.7)
    wall = time.perf_counter() - t0
    others = (time.process_time() - cpu0) - (time.thread_time() - main0)
    sends = log.sends if log is not None else 0
    if log is not None:
        log.close()
    s.close()
    return wall / steps, others / wall, sends


def per_call(fn, n: int = 50) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--step-ms", type=float, default=1.0)
    ap.add_argument("--every", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    arms = ("none", "tensorboard", "null")
    results = {a: [] for a in arms}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for arm in arms:
                results[arm].append(one_round(arm, args.steps, args.step_ms / 1e3, args.every, tmp))
        print(f"{args.steps} steps of {args.step_ms:g} ms, log every {args.every} steps, {args.rounds} rounds "
              f"({os.cpu_count()} CPUs)")
        print(f"{'arm':<12} {'step us (median, range)':>30} {'other threads CPU/s':>20} {'logs':>6}")
        base = statistics.median(r[0] for r in results["none"])
        for arm in arms:
            step = [r[0] * 1e6 for r in results[arm]]
            cpu = statistics.median(r[1] for r in results[arm])
            logs = statistics.median(r[2] for r in results[arm])
            delta = (statistics.median(step) / 1e6 - base) * 1e6
            print(f"{arm:<12} {statistics.median(step):10.2f} ({min(step):.2f}-{max(step):.2f}) "
                  f"{delta:+7.2f} {cpu * 1e3:14.3f} ms {logs:6.0f}")
        # One log's parts, on a full window.
        s = gs.Session(window=512)
        for _ in range(600):
            with s.step():
                with s.phase("data"):
                    pass
                with s.phase("forward"):
                    pass
        sm = s.summary()
        sink = TensorBoardSink(f"{tmp}/one")
        values = scalars(sm)
        print(f"one log: summary() {per_call(s.summary) * 1e6:.0f} us, scalars() {per_call(lambda: scalars(sm)) * 1e6:.0f} us "
              f"({len(values)} values), diagnose {per_call(lambda: gs._gpuscope.diagnose(sm)) * 1e6:.0f} us, "
              f"SummaryWriter writes {per_call(lambda: sink.scalars(1, values)) * 1e6:.0f} us")
        sink.close()


if __name__ == "__main__":
    main()

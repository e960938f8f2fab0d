"""What the background worker costs: its own CPU time, read from its thread's
CPU clock while a Python loop records steps, while a session sits open, and
after the last session has closed.

    python benchmarks/worker_cost.py [--seconds 1.5] [--repeat 7] [--quick]

Measures, interleaved over --repeat rounds (medians and ranges):

- live: worker CPU per completed step of 5 phases, with the default options
  and with telemetry off (``telemetry_interval_ms=0``), as measured and less
  the same round's idle worker (an open session, no steps: its timed
  wake-ups), at three rates: steps
  of ~130 us of busy-wait, steps of ~130 us of small torch ops (when torch
  imports), and steps of ~13 us of busy-wait (ten times the rate; empty
  phases, as fast as Python records them, overflow the queue on a loaded
  2-CPU machine, and dropped records are work the worker never does);
- telemetry: the worker's CPU per second with one open session and no steps,
  default (10 Hz telemetry) minus telemetry off: what sampling costs, as a
  share of one core;
- the floor: a bare Python thread that only sleeps 10 ms at a time, its CPU
  per wake-up (on a VM a timed wake-up alone can cost tens of microseconds,
  which the worker pays at every pass whatever it does);
- after close: the worker's CPU per second and wake-ups per second once the
  only session is closed (``s.close()`` then dropped), dropped without
  ``close()``, closed but still referenced, and dropped while a phase scope
  taken from it (``ph = s.phase("x")``, a decorator) is still alive.

The worker thread is found by name ("gpuscope") where it sets one, else as
the thread that appears when the first session is created. Its CPU time is
read from its per-thread CPU clock (clock_gettime, ns), its wake-ups from
its voluntary context switches.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import os
import shlex
import statistics
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

import gpuscope as gs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)

PHASES = ("data", "h2d", "forward", "backward", "optimizer")


def _tids() -> set:
    return set(os.listdir("/proc/self/task"))


def _thread_clock(tid: int) -> int:
    # Linux's per-thread CPU clock of `tid` (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)):
    # any thread of the process may read it.
    return ((~tid) << 3) | 6


class WorkerThread:
    """The worker's thread: its CPU time (ns) and voluntary context switches."""

    def __init__(self, tid: int) -> None:
        self.tid = tid
        self.clock = _thread_clock(tid)
        self.comm = open(f"/proc/self/task/{tid}/comm").read().strip()

    @staticmethod
    def find() -> "WorkerThread":
        before = _tids()
        named = [t for t in before if _comm(t) == "gpuscope"]
        probe = None
        if not named:
            # No stall watch: its Python thread would be a second new thread.
            probe = gs.Session(window=8, telemetry_interval_ms=0, stall_after=float("inf"))
            named = [t for t in _tids() - before if _comm(t) == "gpuscope"] or sorted(_tids() - before)
        if len(named) != 1:
            raise SystemExit(f"cannot tell the worker thread apart: candidates {named}")
        w = WorkerThread(int(named[0]))
        if probe is not None:
            probe.close()
        return w

    def cpu_ns(self) -> int:
        return time.clock_gettime_ns(self.clock)

    def wakes(self) -> int:
        with open(f"/proc/self/task/{self.tid}/status") as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
        return 0


def _comm(tid: str) -> str:
    try:
        with open(f"/proc/self/task/{tid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


# ---------------------------------------------------------------------------
# Step bodies: each returns a function that runs one phase's work.

def busy_body(phase_s: float) -> Callable[[], None]:
    clock = time.perf_counter

    def work() -> None:
        end = clock() + phase_s
        while clock() < end:
            pass

    return work


def torch_body(phase_s: float) -> Optional[Callable[[], None]]:
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(1)  # no intra-op pool competing with the worker for 2 CPUs
    a = torch.randn(48, 48)
    b = torch.randn(48, 48)

    def one() -> None:
        torch.relu_(torch.mm(a, b).add_(1.0))

    for _ in range(200):
        one()
    t = time.perf_counter()
    for _ in range(2000):
        one()
    per = (time.perf_counter() - t) / 2000
    n = max(1, round(phase_s / per))

    def work() -> None:
        for _ in range(n):
            one()

    return work


def live(worker: WorkerThread, body: Callable[[], None], seconds: float, **options) -> Dict[str, float]:
    """Records steps of 5 phases for `seconds`; the worker's CPU per
    completed step."""
    s = gs.Session(**options)
    phases = [s.phase(name) for name in PHASES]
    step = s.step
    for _ in range(50):  # warm up: phase ids registered, first steps assembled
        with step():
            for ph in phases:
                with ph:
                    body()
    time.sleep(0.05)
    before = s.summary().total_steps  # (drains here, not on the worker)
    c0, w0, t0 = worker.cpu_ns(), worker.wakes(), time.perf_counter()
    steps = 0
    deadline = t0 + seconds
    clock = time.perf_counter
    while clock() < deadline:
        for _ in range(16):
            with step():
                for ph in phases:
                    with ph:
                        body()
        steps += 16
    time.sleep(0.03)  # the worker takes in the last records (>= 2 flush intervals)
    c1, w1, t1 = worker.cpu_ns(), worker.wakes(), time.perf_counter()
    summary = s.summary()
    completed = summary.total_steps - before
    dropped = summary.misuse["dropped_records"]
    s.close()
    del s, phases, step
    wall = t1 - t0
    if dropped or completed < steps:
        print(f"warning: {dropped} records dropped, {completed} of {steps} steps completed",
              file=sys.stderr)
    return {
        "ns_per_step": (c1 - c0) / max(completed, 1),
        "cpu_per_s_us": (c1 - c0) / wall / 1e3,
        "steps_per_s": steps / seconds,
        "wakes_per_s": (w1 - w0) / wall,
    }


def idle_open(worker: WorkerThread, seconds: float, **options) -> Dict[str, float]:
    """One open session recording nothing: the worker's CPU per second."""
    s = gs.Session(**options)
    time.sleep(0.05)
    c0, w0, t0 = worker.cpu_ns(), worker.wakes(), time.perf_counter()
    time.sleep(seconds)
    c1, w1, t1 = worker.cpu_ns(), worker.wakes(), time.perf_counter()
    s.close()
    return {"cpu_per_s_us": (c1 - c0) / (t1 - t0) / 1e3, "wakes_per_s": (w1 - w0) / (t1 - t0)}


def bare_wakes(seconds: float, interval_s: float = 0.01) -> Dict[str, float]:
    """A thread that only sleeps 10 ms at a time: what a wake-up costs on this
    machine, whatever wakes (the floor under the worker's idle cost)."""
    out: Dict[str, float] = {}

    def run() -> None:
        c0, n, t0 = time.thread_time_ns(), 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            time.sleep(interval_s)
            n += 1
        elapsed = time.perf_counter() - t0
        out["cpu_per_s_us"] = (time.thread_time_ns() - c0) / elapsed / 1e3
        out["wakes_per_s"] = n / elapsed

    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out


def after_close(worker: WorkerThread, seconds: float, case: str) -> Dict[str, float]:
    """The worker's CPU per second once the only session is closed or gone."""
    s = gs.Session()
    for _ in s.steps(range(100)):
        for name in PHASES[1:]:
            with s.phase(name):
                pass
    keep = []
    if case == "close()":
        s.close()
        del s
    elif case == "dropped":
        del s
    elif case == "closed, still referenced":
        s.close()
        keep.append(s)
        del s
    elif case == "dropped, phase scope kept":
        keep.append(s.phase("forward"))
        del s
    else:
        raise ValueError(case)
    gc.collect()
    time.sleep(0.05)  # a pass in progress ends; the worker goes to sleep
    c0, w0, t0 = worker.cpu_ns(), worker.wakes(), time.perf_counter()
    time.sleep(seconds)
    c1, w1, t1 = worker.cpu_ns(), worker.wakes(), time.perf_counter()
    keep.clear()
    gc.collect()
    return {"cpu_per_s_us": (c1 - c0) / (t1 - t0) / 1e3, "wakes_per_s": (w1 - w0) / (t1 - t0)}


AFTER_CASES = ("close()", "dropped", "closed, still referenced", "dropped, phase scope kept")


def fmt(values: List[float], unit: str, digits: int = 0) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.{digits}f} {unit}"
    return f"{med:.{digits}f} {unit} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=1.5, help="per live measurement")
    ap.add_argument("--idle-seconds", type=float, default=1.5, help="per idle/after-close measurement")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--step-us", type=float, default=130.0, help="step length of the paced rates")
    ap.add_argument("--quick", action="store_true", help="smoke run: short and once")
    ap.add_argument("--no-torch", action="store_true", help="skip the torch-op rate")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.idle_seconds, args.repeat = 0.3, 0.25, 1

    worker = WorkerThread.find()
    phase_s = args.step_us * 1e-6 / len(PHASES)
    bodies = {f"busy-wait, ~{args.step_us:.0f} us steps": busy_body(phase_s)}
    tb = None if args.no_torch else torch_body(phase_s)
    if tb is not None:
        bodies[f"torch ops, ~{args.step_us:.0f} us steps"] = tb
    fast_us = args.step_us / 10
    bodies[f"busy-wait, ~{fast_us:.0f} us steps"] = busy_body(fast_us * 1e-6 / len(PHASES))
    configs = {"default": {}, "telemetry off": {"telemetry_interval_ms": 0}}

    live_res: Dict[tuple, List[Dict[str, float]]] = {}
    idle_res: Dict[str, List[Dict[str, float]]] = {}
    after_res: Dict[str, List[Dict[str, float]]] = {}
    for _ in range(args.repeat):
        for rate, body in bodies.items():
            for cname, opts in configs.items():
                live_res.setdefault((rate, cname), []).append(live(worker, body, args.seconds, **opts))
        for cname, opts in configs.items():
            idle_res.setdefault(cname, []).append(idle_open(worker, args.idle_seconds, **opts))
        idle_res.setdefault("bare", []).append(bare_wakes(args.idle_seconds))
        for case in AFTER_CASES:
            after_res.setdefault(case, []).append(after_close(worker, args.idle_seconds, case))

    args_given = argv if argv is not None else sys.argv[1:]
    cmd = " ".join(shlex.quote(a) for a in ["benchmarks/worker_cost.py"] + list(args_given))
    print(f"{_machine.describe()}, gpuscope {gs.__version__}, "
          f"{datetime.date.today().isoformat()}, `python {cmd}`, {args.repeat} interleaved runs, "
          f"worker thread '{worker.comm}'; medians (range)\n")
    def beyond_idle(rate: str, cname: str) -> str:
        # The same round's idle worker (same options, no steps) taken out:
        # what the steps themselves cost it, without its timed wake-ups.
        return fmt([(r["cpu_per_s_us"] - i["cpu_per_s_us"]) * 1e3 / r["steps_per_s"]
                    for r, i in zip(live_res[(rate, cname)], idle_res[cname])], "ns")

    print("| live: worker CPU per completed 5-phase step | steps/s | default | telemetry off "
          "| default, less the idle worker's CPU | telemetry off, less the idle worker's CPU |")
    print("|---|---:|---:|---:|---:|---:|")
    for rate in bodies:
        d = live_res[(rate, "default")]
        o = live_res[(rate, "telemetry off")]
        rate_s = statistics.median([r["steps_per_s"] for r in d])
        print(f"| {rate} | {rate_s / 1e3:.1f} k | {fmt([r['ns_per_step'] for r in d], 'ns')} "
              f"| {fmt([r['ns_per_step'] for r in o], 'ns')} | {beyond_idle(rate, 'default')} "
              f"| {beyond_idle(rate, 'telemetry off')} |")
    print()
    d = [r["cpu_per_s_us"] for r in idle_res["default"]]
    o = [r["cpu_per_s_us"] for r in idle_res["telemetry off"]]
    share = [(a - b) / 1e4 for a, b in zip(d, o)]  # us/s -> % of one core
    def per_wake(rs: List[Dict[str, float]]) -> str:
        return fmt([r["cpu_per_s_us"] / r["wakes_per_s"] for r in rs if r["wakes_per_s"] > 0], "us", 1)

    print("| one open session, no steps | worker CPU | wake-ups | CPU per wake-up |")
    print("|---|---:|---:|---:|")
    print(f"| default (telemetry at 10 Hz) | {fmt(d, 'us/s')} | "
          f"{fmt([r['wakes_per_s'] for r in idle_res['default']], '/s')} | {per_wake(idle_res['default'])} |")
    print(f"| telemetry off | {fmt(o, 'us/s')} | "
          f"{fmt([r['wakes_per_s'] for r in idle_res['telemetry off']], '/s')} | "
          f"{per_wake(idle_res['telemetry off'])} |")
    bare = idle_res["bare"]
    print(f"| no gpuscope: a bare Python thread sleeping 10 ms at a time | "
          f"{fmt([r['cpu_per_s_us'] for r in bare], 'us/s')} | "
          f"{fmt([r['wakes_per_s'] for r in bare], '/s')} | {per_wake(bare)} |")
    print(f"| **telemetry share of one core** (default - off) | {fmt(share, '%', 3)} | | |")
    print()
    print("| after the only session is gone | worker CPU | wake-ups |")
    print("|---|---:|---:|")
    for case in AFTER_CASES:
        rs = after_res[case]
        print(f"| {case} | {fmt([r['cpu_per_s_us'] for r in rs], 'us/s', 1)} | "
              f"{fmt([r['wakes_per_s'] for r in rs], '/s', 1)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

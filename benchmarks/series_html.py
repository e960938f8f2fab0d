"""What reading a long window costs from Python: ``step_series()`` (a dict per
step), ``step_columns()`` (a column per field) and ``save_html()`` (the HTML
report, plots drawn from the columns), on full windows of W steps of P
top-level phases.

    python benchmarks/series_html.py [--repeat 5] [--quick]

Each session is filled once, on a manual clock (phase times spread over
100-150 us, as in aggregator_benchmark's BM_Summarize), then each call is
timed --repeat times, interleaved; medians and ranges (wall clock), and the
HTML file's size.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Tuple

import gpuscope as gs

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)


def filled(window: int, phases: int) -> gs.Session:
    clock = gs.testing.ManualClock()
    s = gs.Session(window=window, clock=clock, telemetry_interval_ms=0)
    names = [f"p{p}" for p in range(phases)]
    for i in range(window):
        with s.step(samples=64):
            for p, name in enumerate(names):
                with s.phase(name):
                    clock.advance(100_000 + (i * 7919 + p * 104729) % 50_000)
    s.flush()
    return s


def timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def fmt(xs: List[float]) -> str:
    med = statistics.median(xs)
    unit, scale = ("s", 1.0) if med >= 1 else ("ms", 1e3)
    return f"{med * scale:.3g} {unit} ({min(xs) * scale:.3g}-{max(xs) * scale:.3g})"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smoke run: small windows, once")
    args = ap.parse_args(argv)
    shapes: List[Tuple[int, int]] = [(4096, 5), (65536, 100)]
    if args.quick:
        shapes, args.repeat = [(512, 5), (3000, 12)], 1
    with tempfile.TemporaryDirectory() as tmp:
        html = os.path.join(tmp, "report.html")
        sessions = {shape: filled(*shape) for shape in shapes}
        calls: Dict[str, Callable[[gs.Session], object]] = {
            "step_series()": lambda s: s.step_series(),
            "step_columns()": lambda s: s.step_columns(),
            "save_html()": lambda s: s.save_html(html),
        }
        res: Dict[Tuple[Tuple[int, int], str], List[float]] = {}
        size: Dict[Tuple[int, int], int] = {}
        for _ in range(args.repeat):
            for shape, s in sessions.items():
                for name, call in calls.items():
                    res.setdefault((shape, name), []).append(timed(lambda: call(s)))
                size[shape] = os.path.getsize(html)
        for s in sessions.values():
            s.close()
    args_given = argv if argv is not None else sys.argv[1:]
    cmd = " ".join(shlex.quote(a) for a in ["benchmarks/series_html.py"] + list(args_given))
    print(f"{_machine.describe()}, gpuscope {gs.__version__}, "
          f"{datetime.date.today().isoformat()}, `python {cmd}`, {args.repeat} interleaved runs, "
          "median (min-max)")
    print()
    print("| window x phases | " + " | ".join(calls) + " | HTML size |")
    print("|---|" + "---:|" * (len(calls) + 1))
    for shape in shapes:
        cells = " | ".join(fmt(res[(shape, name)]) for name in calls)
        print(f"| {shape[0]} x {shape[1]} | {cells} | {size[shape] / 1e6:.2f} MB |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Records dropped at the highest rate a Python thread can record, with the
default options, and with a reader summarizing a large window meanwhile.

    python benchmarks/queue_pressure.py [--steps 2000000] [--repeat 5]

Case 1, "tight loop": a default ``gs.Session()`` and a loop of empty scopes
(``with s.step(): with s.phase("a"): pass``), the fastest a Python thread
produces records. Case 2, "reader": the same loop while another thread calls
``summary()`` every 50 ms on a session whose window is full (``--window``
steps of ``--phases`` phases), which holds the aggregator lock for a long
time per call. Prints, per case, the median records/s and dropped records
over ``--repeat`` runs with their range (Markdown, for docs/benchmarks.md).
Exits 1 if any run dropped a record.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time

import gpuscope as gs


def tight_loop(session: gs.Session, steps: int) -> float:
    phase = session.phase("a")
    t0 = time.perf_counter()
    for _ in range(steps):
        with session.step():
            with phase:
                pass
    return 2 * steps / (time.perf_counter() - t0)


def fill_window(session: gs.Session, window: int, phases: int) -> None:
    names = [session.phase(f"p{i}") for i in range(phases)]
    for _ in range(window):
        with session.step():
            for p in names:
                with p:
                    pass
    session.summary()  # everything aggregated before the measured part


def run_case(name: str, args: argparse.Namespace) -> tuple[list[float], list[int]]:
    rates, drops = [], []
    for _ in range(args.repeat):
        if name == "tight loop":
            s = gs.Session()
            rate = tight_loop(s, args.steps)
        else:
            s = gs.Session(window=args.window, max_phases=args.phases + 16)
            fill_window(s, args.window, args.phases)
            stop = threading.Event()
            held = []

            def reader() -> None:
                while not stop.is_set():
                    t = time.perf_counter()
                    s.summary()
                    held.append(time.perf_counter() - t)
                    stop.wait(0.05)

            t = threading.Thread(target=reader)
            t.start()
            rate = tight_loop(s, args.steps)
            stop.set()
            t.join()
            print(f"  reader: {len(held)} summaries, median {statistics.median(held) * 1e3:.0f} ms each")
        rates.append(rate)
        drops.append(s.summary().misuse["dropped_records"])
        s.close()
    return rates, drops


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--window", type=int, default=16384)
    ap.add_argument("--phases", type=int, default=100)
    args = ap.parse_args()
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    print(f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, gpuscope {gs.__version__}, "
          f"{args.steps} steps x 2 records, {args.repeat} runs")
    rows, failed = [], False
    for name in ("tight loop", "reader"):
        rates, drops = run_case(name, args)
        failed |= any(drops)
        label = name if name == "tight loop" else f"reader (window {args.window} x {args.phases} phases)"
        rows.append(f"| {label} | {statistics.median(rates) / 1e6:.2f} M ({min(rates) / 1e6:.2f}-"
                    f"{max(rates) / 1e6:.2f}) | {statistics.median(drops):.0f} ({min(drops)}-{max(drops)}) |")
    print("\n| default Session(), case | records/s, median (range) | dropped, median (range) |")
    print("|---|---:|---:|")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Records dropped by a default session at the highest rate a Python thread
records, and by a session whose large window a reader keeps summarizing.

    python benchmarks/queue_pressure.py [--steps 2000000] [--repeat 5]
        [--window 65536] [--phases 100] [--seconds 5]

Case 1, "tight loop": a default ``gs.Session()`` and a loop of empty scopes
(``with s.step(): with s.phase("a"): pass``), the fastest a Python thread
produces records. Case 2, "reader": a session whose window is full
(``--window`` steps of ``--phases`` phases each), recording more such steps,
each followed by 100 us of work (about a million records a second), for
``--seconds``, while another thread calls ``summary()`` every 0.5 s, which
holds the aggregator lock for as long as the large window takes. Prints,
per case, the median records/s and dropped records over ``--repeat`` runs
with their range (Markdown, for docs/benchmarks.md). Exits 1 if any run
dropped a record.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import gpuscope as gs

import _machine  # benchmarks/_machine.py, beside this script


def tight_loop(session: gs.Session, steps: int) -> float:
    phase = session.phase("a")
    t0 = time.perf_counter()
    for _ in range(steps):
        with session.step():
            with phase:
                pass
    return 2 * steps / (time.perf_counter() - t0)


def fill_window(session: gs.Session, window: int, phases: int) -> list:
    names = [session.phase(f"p{i}") for i in range(phases)]
    for i in range(window):
        with session.step():
            for p in names:
                with p:
                    pass
        if i % 64 == 63:
            session.flush()  # filling runs at the fastest rate: drain as it goes
    session.summary()  # everything aggregated before the measured part
    return names


def paced_loop(session: gs.Session, names: list, seconds: float) -> float:
    """Steps of len(names) phases, each followed by 100 us of work; returns
    records/s."""
    records = 0
    end = time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        with session.step():
            for p in names:
                with p:
                    pass
        records += len(names) + 1
        busy = time.perf_counter() + 1e-4
        while time.perf_counter() < busy:
            pass
    return records / (time.perf_counter() - t0)


def run_case(name: str, args: argparse.Namespace) -> tuple[list[float], list[int]]:
    rates, drops = [], []
    for _ in range(args.repeat):
        if name == "tight loop":
            s = gs.Session()
            rate = tight_loop(s, args.steps)
        else:
            s = gs.Session(window=args.window, max_phases=args.phases + 16)
            names = fill_window(s, args.window, args.phases)
            stop = threading.Event()
            held = []

            def reader() -> None:
                while not stop.wait(0.5):
                    t = time.perf_counter()
                    s.summary()
                    held.append(time.perf_counter() - t)

            before = s.summary().misuse["dropped_records"]
            assert before == 0, "the window was not filled whole"
            t = threading.Thread(target=reader)
            t.start()
            rate = paced_loop(s, names, args.seconds)
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
    ap.add_argument("--window", type=int, default=65536)
    ap.add_argument("--phases", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=5.0)
    args = ap.parse_args()
    print(f"{_machine.describe()}, gpuscope {gs.__version__}, "
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

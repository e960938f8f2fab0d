"""What open sessions cost when they record nothing: the background
worker's CPU with N idle sessions, and the time to create sessions while
others are open.

    python benchmarks/idle_sessions.py [--sessions 300] [--create 1000] [--repeat 5]

Each session samples telemetry (NVML where present, /proc) at the default
10 Hz; the process samples once for all of them. Prints medians and ranges
over --repeat runs (Markdown, for docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import time

import gpuscope as gs

import _machine  # benchmarks/_machine.py, beside this script


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=300)
    ap.add_argument("--create", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    shares, creates = [], []
    for _ in range(args.repeat):
        t = time.perf_counter()
        live = [gs.Session(window=8) for _ in range(args.create)]
        creates.append(time.perf_counter() - t)
        for s in live[args.sessions:]:
            s.close()
        live = live[: args.sessions]
        c0, t0 = cpu_seconds(), time.perf_counter()
        time.sleep(args.seconds)
        shares.append((cpu_seconds() - c0) / (time.perf_counter() - t0))
        for s in live:
            s.close()
    print(f"{_machine.describe()}, gpuscope {gs.__version__}, "
          f"{args.repeat} runs\n")
    print("| measure | median (range) |")
    print("|---|---:|")
    print(f"| CPU of {args.sessions} idle sessions, share of one core | {statistics.median(shares) * 100:.1f} % "
          f"({min(shares) * 100:.1f}-{max(shares) * 100:.1f}) |")
    print(f"| creating {args.create} sessions, all kept open | {statistics.median(creates):.2f} s "
          f"({min(creates):.2f}-{max(creates):.2f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

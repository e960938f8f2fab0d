"""What sampling PyTorch's allocator costs, and where.

The sampler (gpuscope._memory) is one daemon thread per process: every
``telemetry_interval_ms`` it reads the caching allocator's numbers for each
GPU and hands them to every live session (``Session._record_memory``, a lock
and a copy in C++). Nothing runs on the training thread; what the training
thread can feel is the GIL the sampler takes while it runs. This measures:

* ``record``: one ``Session._record_memory`` call (the C++ push, from Python);
* ``sample``: one ``sample_once()`` of one GPU, gpuscope's side only: the
  allocator read is faked here (a constant tuple), because torch's own read
  (``torch._C._cuda_memoryStats``) needs a GPU: benchmarks/gpu_memory_validate.py
  times it on one;
* ``loop``: a Python training-thread loop (``for x in s.steps(...)`` with one
  phase, ns per iteration, the best of ``--n`` / 50,000 loops of 50,000) with
  the sampler thread off, and on at 1 ms (a hundred times the default rate)
  reading an allocator whose read holds the GIL for ``--read-us``
  microseconds, alternated ``--rounds`` times.

Usage: python benchmarks/memory_sampler.py [--n 200000] [--rounds 5] [--read-us 20]
Prints one line per measure: median and range over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import gpuscope as gs
from gpuscope import _memory

NUMBERS = (2e9, 3e9, 2.5e9, 3e9, 0, 0, 80e9)


def per_call_ns(fn, n: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - t0) / n


LOOP = 50_000  # iterations of a timed loop: 100,000 records, under the queue's 131,072


def loop_ns(n: int) -> float:
    """Best of the loops in `n` iterations, ns per iteration; fails if a
    record was dropped (a full queue would make the loop look cheaper)."""
    best = float("inf")
    for _ in range(max(1, n // LOOP)):
        s = gs.Session(telemetry_interval_ms=0)
        t0 = time.perf_counter_ns()
        for _ in s.steps(range(LOOP)):
            with s.phase("forward"):
                pass
        best = min(best, (time.perf_counter_ns() - t0) / LOOP)
        s.close()
        if s.summary().misuse["dropped_records"]:
            raise SystemExit("records were dropped: the loop outran the worker")
    return best


def busy_read(read_us: float):
    """An allocator read that holds the GIL for about `read_us` us, as
    building torch's nested stats dict does."""
    def read(device: int):
        end = time.perf_counter_ns() + int(read_us * 1000)
        while time.perf_counter_ns() < end:
            pass
        return NUMBERS if device == 0 else None
    return read


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--read-us", type=float, default=20.0)
    args = ap.parse_args()

    _memory.device_count = lambda: 1  # the boundary with torch, faked
    s = gs.Session(telemetry_interval_ms=0)
    sampler = _memory._Sampler()
    sampler.sessions.add(s)
    record, sample, off, on = [], [], [], []
    for _ in range(args.rounds):
        record.append(per_call_ns(lambda: s._record_memory(0, *NUMBERS, "torch.cuda"), args.n))
        _memory.read_allocator = lambda device: NUMBERS if device == 0 else None
        sample.append(per_call_ns(sampler.sample_once, args.n // 10))
        off.append(loop_ns(args.n))
        # The process-wide sampler thread at 1 ms, reading a slow allocator.
        _memory.read_allocator = busy_read(args.read_us)
        _memory._sampler = _memory._Sampler()
        import torch  # noqa: F401 - watch() samples only once torch is imported
        busy = gs.Session(telemetry_interval_ms=1)
        _memory.watch(busy)
        on.append(loop_ns(args.n))
        busy.close()
        _memory._sampler.sessions.discard(busy)
    s.close()

    def line(name: str, values, unit: str) -> None:
        print(f"{name:58} {statistics.median(values):8.1f} {unit} "
              f"({min(values):.1f}-{max(values):.1f}), {len(values)} rounds")

    print(f"python {sys.version.split()[0]}, gpuscope {gs.__version__}")
    line("Session._record_memory (C++ push, from Python)", record, "ns")
    line("sample_once, one GPU, allocator read faked", [v / 1000 for v in sample], "us")
    line("steps() + phase loop, sampler off", off, "ns/iter")
    line(f"steps() + phase loop, sampler at 1 ms, {args.read_us:g} us reads", on, "ns/iter")
    return 0


if __name__ == "__main__":
    sys.exit(main())

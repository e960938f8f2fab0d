"""What the exchange of rank records costs the training loop, under torchrun.

    python benchmarks/rank_exchange.py [--ranks 2] [--rounds 7] [--steps 3000]
                                       [--interval 0.1] [--step-us 200]

Launches itself under ``torch.distributed.run`` (gloo, CPU). Every rank runs
--rounds pairs of loops, A and B in alternating order, each of --steps
steps of --step-us of busy-wait in two phases (no collective in the loop:
what is measured is gpuscope's exchange, not the job's):

- A: a session with ``rank_interval=--interval`` (0.1 s: 300 times the
  default of 30 s, so that a round holds a few exchanges);
- B: the same session with ``rank_interval=None`` (no periodic exchange).

Rank 0 prints, over the rounds (median and range):

- the median step time in A and B, and A - B per round, of the median step
  and of the whole loop (the training thread's cost: an exchange every
  0.1 s touches few steps, so the median hardly sees it and the whole
  loop's time is the number to read);
- the exchanges per round, and each exchange's wall time and CPU time on
  its background thread (``time.thread_time`` around the exchange);
- the training thread's cost per exchange: A - B of the whole loop over the
  exchanges in A.

The scoring's cost as the world grows is BM_CompareRanks in
aggregator_benchmark (8 to 1,024 ranks' records).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def _loop(gs, steps: int, step_s: float, interval):
    s = gs.Session(rank_interval=interval)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        with s.step():
            with s.phase("forward"):
                _spin(step_s / 2)
            with s.phase("backward"):
                _spin(step_s / 2)
        times.append(time.perf_counter() - t0)
    s.close()
    return statistics.median(times), sum(times)


def worker(args) -> None:
    import torch.distributed as dist

    import gpuscope as gs
    from gpuscope import _ranks

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    costs = []  # (wall, thread cpu) per periodic exchange on this rank
    plain = _ranks._exchange

    def timed(*a, **k):
        w0, c0 = time.perf_counter(), time.thread_time()
        out = plain(*a, **k)
        if out is not None:
            costs.append((time.perf_counter() - w0, time.thread_time() - c0))
        return out

    _ranks._exchange = timed
    step_s = args.step_us * 1e-6
    _loop(gs, 300, step_s, None)  # warm-up
    rows = []
    for r in range(args.rounds):
        dist.barrier()
        order = ("A", "B") if r % 2 == 0 else ("B", "A")
        got = {}
        for which in order:
            before = len(costs)
            got[which], got[which + "_total"] = _loop(gs, args.steps, step_s,
                                                      args.interval if which == "A" else None)
            if which == "A":
                got["exchanges"] = len(costs) - before
        rows.append(got)
    dist.barrier()
    if rank == 0:
        def show(values, scale, unit):
            values = sorted(values)
            return (f"{statistics.median(values) * scale:.2f} {unit} "
                    f"({values[0] * scale:.2f} .. {values[-1] * scale:.2f})")

        diffs = [row["A"] - row["B"] for row in rows]
        per_exchange = [(row["A_total"] - row["B_total"]) / row["exchanges"] for row in rows
                        if row["exchanges"] > 0]
        print(f"{_machine.describe()}, gpuscope {gs.__version__}, {dist.get_world_size()} ranks "
              f"(gloo), {time.strftime('%Y-%m-%d')}")
        print(f"steps of {args.step_us:.0f} us, {args.steps} per loop, {args.rounds} rounds, "
              f"rank_interval={args.interval} s in A")
        print(f"  step time A (exchanging)    {show([r['A'] for r in rows], 1e6, 'us')}")
        print(f"  step time B (no exchange)   {show([r['B'] for r in rows], 1e6, 'us')}")
        print(f"  A - B, median step          {show(diffs, 1e6, 'us')}")
        print(f"  A - B, whole loop           "
              f"{show([r['A_total'] - r['B_total'] for r in rows], 1e3, 'ms')}")
        print(f"  exchanges per A loop        {show([r['exchanges'] for r in rows], 1, '')}")
        print(f"  exchange wall time          {show([c[0] for c in costs], 1e3, 'ms')}")
        print(f"  exchange thread CPU         {show([c[1] for c in costs], 1e3, 'ms')}")
        if per_exchange:
            print(f"  training-thread cost per exchange ((A - B) loop / exchanges): "
                  f"{show(per_exchange, 1e3, 'ms')}")
    dist.destroy_process_group()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--interval", type=float, default=0.1)
    p.add_argument("--step-us", type=float, default=200.0)
    args = p.parse_args()
    if "RANK" in os.environ:
        worker(args)
        return
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={args.ranks}",
           "--master_addr=127.0.0.1", "--master_port=29577", os.path.abspath(__file__),
           *sys.argv[1:]]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    sys.exit(subprocess.run(cmd, env=env).returncode)


if __name__ == "__main__":
    main()

"""What `gpuscope run`'s automatic hooks add to a training step, against the
same loop instrumented by hand.

    python benchmarks/auto_overhead.py [--rounds 15] [--block 200] [--seed 0]

One CPU training loop (an MLP 32-64-64-10, batches of 16 from a
``DataLoader`` over in-memory tensors, cross-entropy, backward, SGD), in
three variants training the same model on the same batches:

- bare: no gpuscope;
- hand: ``for x, y in s.steps(loader)`` with ``s.phase("forward")``,
  ``("backward")``, ``("optimizer")`` (``gs.Session()``, default options);
- auto: the loop as written for ``bare``, with the runner's hooks installed
  on a default session (``gpuscope._auto.AutoInstrument``: DataLoader
  ``next()``, module forward hooks on the model trained, ``Tensor.backward``,
  optimizer step hooks).

Each round runs a block of --block steps of every variant in a shuffled
order, each next to a bare block of its own; per variant the median and IQR
over rounds of the per-step median within a block, and of the difference
with its bare partner (us and %). The step count recorded is checked: auto
must record exactly the optimizer steps.
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)


def quantiles(values):
    v = sorted(values)

    def q(p):
        k = (len(v) - 1) * p
        lo = int(k)
        hi = min(lo + 1, len(v) - 1)
        return v[lo] + (v[hi] - v[lo]) * (k - lo)

    return q(0.5), q(0.25), q(0.75)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--block", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    import torch

    import gpuscope as gs
    from gpuscope._auto import AutoInstrument

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = torch.utils.data.TensorDataset(torch.randn(16 * args.block, 32),
                                          torch.randint(0, 10, (16 * args.block,)))
    loader = torch.utils.data.DataLoader(data, batch_size=16)
    loss_fn = torch.nn.functional.cross_entropy

    def bare():
        times = []
        t0 = time.perf_counter_ns()
        for x, y in loader:
            loss_fn(model(x), y).backward()
            opt.step()
            opt.zero_grad()
            t1 = time.perf_counter_ns()
            times.append(t1 - t0)
            t0 = t1
        return times

    def hand():
        s = gs.Session()
        times = []
        t0 = time.perf_counter_ns()
        for x, y in s.steps(loader):
            with s.phase("forward"):
                loss = loss_fn(model(x), y)
            with s.phase("backward"):
                loss.backward()
            with s.phase("optimizer"):
                opt.step()
                opt.zero_grad()
            t1 = time.perf_counter_ns()
            times.append(t1 - t0)
            t0 = t1
        s.close()
        return times

    recorded = []

    def auto():
        s = gs.Session()
        a = AutoInstrument(s)
        a.install()
        try:
            times = bare()
        finally:
            a.finish()
            a.uninstall()
        recorded.append((s.summary().total_steps, a.optimizer_steps))
        s.close()
        return times

    variants = {"hand": hand, "auto": auto}
    for fn in (bare, hand, auto):  # warm-up
        fn()
    rng = random.Random(args.seed)
    per = {name: [] for name in ("bare", *variants)}
    diff = {name: [] for name in variants}
    for _ in range(args.rounds):
        order = list(variants)
        rng.shuffle(order)
        for name in order:
            pair = [("bare", bare), (name, variants[name])]
            rng.shuffle(pair)
            got = {}
            for label, fn in pair:
                gc.collect()
                time.sleep(0.02)
                got[label] = statistics.median(fn()) / 1e3  # us
            per["bare"].append(got["bare"])
            per[name].append(got[name])
            diff[name].append(got[name] - got["bare"])
    assert all(steps == optimizer_steps == args.block for steps, optimizer_steps in recorded), recorded
    print(f"{_machine.describe()}, torch {torch.__version__}, gpuscope {gs.__version__}, "
          f"{time.strftime('%Y-%m-%d')}")
    print(f"{args.rounds} rounds of {args.block} steps per variant; median (IQR) over rounds of the "
          "block's median step")
    print(f"{'variant':8} {'step':>24} {'added':>26} {'added %':>18}")
    for name in ("bare", *variants):
        m, lo, hi = quantiles(per[name])
        row = f"{name:8} {m:9.1f} us ({lo:.1f}-{hi:.1f})"
        if name in diff:
            d, dlo, dhi = quantiles(diff[name])
            b = statistics.median(per["bare"])
            row += f"   {d:+7.1f} us ({dlo:+.1f}..{dhi:+.1f})   {100 * d / b:+5.1f} %"
        print(row)
    print(f"auto recorded {recorded[-1][0]} steps per block = its optimizer steps")


if __name__ == "__main__":
    main()

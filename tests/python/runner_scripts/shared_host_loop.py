"""A training loop for the shared-host tests (test_shared_host.py): a
DataLoader whose items take CPU or sleep, a forward that burns CPU or sleeps,
optional CPU-burning child processes that are not the loader's. Prints the
window's host telemetry and findings as one JSON line.

    python shared_host_loop.py --steps 150 --workers 2 --context forkserver \
        --item busy:4 --forward sleep:3 --burn-children 2 [--cgroup DIR]
"""

import argparse
import json
import multiprocessing as mp
import os
import time

import torch  # noqa: F401 - the DataLoader's
from torch.utils.data import DataLoader, Dataset

import gpuscope as gs


def work(spec: str) -> None:
    """'busy:MS' burns MS ms of CPU, 'sleep:MS' sleeps MS ms."""
    kind, ms = spec.split(":")
    seconds = float(ms) / 1000
    if kind == "sleep":
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Items(Dataset):
    def __init__(self, n: int, spec: str) -> None:
        self.n, self.spec = n, spec

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        work(self.spec)
        return i


def burn() -> None:
    while True:
        pass


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--context", default=None)
    p.add_argument("--item", default="sleep:2")
    p.add_argument("--forward", default="busy:3")
    p.add_argument("--burn-children", type=int, default=0)
    p.add_argument("--cgroup", default=None, help="a cgroup directory to move into first")
    a = p.parse_args()
    if a.cgroup:
        with open(f"{a.cgroup}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
    burners = [mp.get_context("fork").Process(target=burn, daemon=True)
               for _ in range(a.burn_children)]
    for b in burners:
        b.start()
    s = gs.Session(window=a.steps, telemetry_interval_ms=50)
    loader = DataLoader(Items(a.steps + 20, a.item), batch_size=None, num_workers=a.workers,
                        multiprocessing_context=a.context if a.workers else None)
    for i, _ in enumerate(s.steps(loader)):
        with s.phase("forward"):
            work(a.forward)
        if i + 1 >= a.steps:
            break
    # One summary for the numbers and the findings: the sampler runs on
    # (every 50 ms), so two summaries taken apart differ.
    summary = s.summary()
    t = summary.telemetry
    fields = ("host_cpu_pct", "process_cores", "worker_cores", "child_cores", "cpus_available",
              "cpu_wait_share", "worker_cpu_wait_cores", "cpu_pressure_pct", "steal_pct",
              "cpu_throttled_pct")
    out = {k: getattr(t, k) for k in fields}
    out["findings"] = [{"id": f.id, "title": f.title, "share": f.share,
                        "recommendation": f.recommendation} for f in gs.diagnose(summary)]
    out["report"] = s.report()
    out["prometheus"] = s.prometheus()
    for b in burners:
        b.terminate()
    print(json.dumps(out))


if __name__ == "__main__":
    main()

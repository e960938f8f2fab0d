"""One rank of the torchrun jobs in test_distributed.py (gloo on CPU).

A small DDP model trains for STEPS steps with phases data/forward/backward/
comm/optimizer (the gradient all-reduce in "comm"); SLOW_RANK does SLOW_MS of
extra work in forward. MODE says what
else happens:

  straggler  every rank exchanges periodically (RANK_INTERVAL) and at the end
  exit       rank EXIT_RANK leaves right after training, the others sync
  partial    only ranks below SESSIONS create a session

Each rank writes what it saw to OUT/rank<N>.json.
"""

import contextlib
import json
import os
import sys
import time

import torch
import torch.distributed as dist

import gpuscope as gs


def main() -> None:
    mode = os.environ["MODE"]
    out_dir = os.environ["OUT"]
    steps = int(os.environ.get("STEPS", "40"))
    slow_rank = int(os.environ.get("SLOW_RANK", "-1"))
    slow_s = float(os.environ.get("SLOW_MS", "0")) / 1e3
    interval = float(os.environ.get("RANK_INTERVAL", "0")) or None
    sessions = int(os.environ.get("SESSIONS", "99"))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(32, 32))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    s = gs.Session(rank_interval=interval) if rank < sessions else None
    result = {"rank": rank, "world": world}

    def phase(name):
        return s.phase(name) if s is not None else contextlib.nullcontext()

    def train(n: int) -> None:
        for _ in range(n):
            with (s.step() if s is not None else contextlib.nullcontext()):
                with phase("data"):
                    x = torch.randn(16, 32)
                # DDP with its all-reduce taken out of backward (no_sync) and
                # done in a phase of its own, "comm", as a loop that times its
                # communication would: the fast ranks' wait shows there.
                with model.no_sync():
                    with phase("forward"):
                        y = model(x).sum()
                        if rank == slow_rank:
                            end = time.perf_counter() + slow_s  # extra work, not a sleep
                            while time.perf_counter() < end:
                                pass
                    with phase("backward"):
                        y.backward()
                with phase("comm"):
                    grads = [p.grad for p in model.parameters()]
                    flat = torch.cat([g.reshape(-1) for g in grads])
                    dist.all_reduce(flat)
                    flat /= world
                    offset = 0
                    for g in grads:
                        g.copy_(flat[offset:offset + g.numel()].view_as(g))
                        offset += g.numel()
                with phase("optimizer"):
                    opt.step()
                    opt.zero_grad()

    train(steps)
    if mode == "exit" and rank == int(os.environ["EXIT_RANK"]):
        os._exit(0)  # gone without a word: no sync, no session close
    before = s.summary().ranks if s is not None else None
    result["exchanges_before_sync"] = before.exchanges if before is not None else 0
    if s is not None:
        timeout = float(os.environ.get("SYNC_TIMEOUT", "20"))
        t0 = time.monotonic()
        r = s.sync_ranks(timeout_s=timeout)
        result["sync_seconds"] = time.monotonic() - t0
        result["heard"], result["missing"] = list(r.heard), list(r.missing)
        sm = s.summary()
        d = sm.to_dict()
        result["rank_identity"] = d["rank"]
        result["ranks"] = d["ranks"]
        findings = s.diagnose()
        result["findings"] = [{"id": f.id, "title": f.title, "share": f.share,
                               "evidence": dict(f.evidence)} for f in findings]
        result["report"] = s.report()
        result["prometheus"] = s.prometheus()
        result["steps"] = sm.steps
        result["comm_share"] = sm.phases["comm"].share if "comm" in sm.phases else 0.0
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    if mode in ("exit", "partial"):
        os._exit(0)  # a peer is gone or never synced: skip the group's teardown
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

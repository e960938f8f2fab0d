"""One rank of the hung torchrun job in test_stalls.py (gloo on CPU).

Every rank trains STEPS normal steps (data, forward, comm: an all-reduce,
optimizer) under ``gs.Session(stall_after=STALL_AFTER)``; then, in the next
step, HUNG_RANK sleeps in ``forward`` until it is killed (or, with
HUNG_HOW=stop, stops its whole process with SIGSTOP, as a host that stopped
answering would: its gpuscope threads stop too), and the others block in the
all-reduce in ``comm`` waiting for it. Rank 0 serves its Prometheus
metrics and writes the port to OUT/port; HUNG_RANK writes the time it hung
to OUT/hung (Unix seconds). gpuscope's stall messages go to stderr.
"""

import os
import pathlib
import signal
import time

import torch
import torch.distributed as dist

import gpuscope as gs


def main() -> None:
    out = pathlib.Path(os.environ["OUT"])
    steps = int(os.environ.get("STEPS", "15"))
    hung_rank = int(os.environ.get("HUNG_RANK", "2"))
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(16, 16)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    s = gs.Session(stall_after=float(os.environ.get("STALL_AFTER", "2")), rank_interval=1.0)
    if rank == 0:
        server = s.serve_prometheus(0)
        (out / "port.tmp").write_text(str(server.port))
        (out / "port.tmp").rename(out / "port")
    for i in range(steps + 1):
        if i == steps and os.environ.get("HUNG_HOW") == "stop":
            time.sleep(1.5)  # a job that ran a few polls of gpuscope's watch
        with s.step():
            with s.phase("data"):
                x = torch.randn(8, 16)
            with s.phase("forward"):
                loss = model(x).square().mean()
                if i == steps and rank == hung_rank:
                    (out / "hung").write_text(repr(time.time()))
                    if os.environ.get("HUNG_HOW") == "stop":
                        os.kill(os.getpid(), signal.SIGSTOP)
                    while True:
                        time.sleep(1)
            with s.phase("backward"):
                loss.backward()
            with s.phase("comm"):
                for p in model.parameters():
                    dist.all_reduce(p.grad)
            with s.phase("optimizer"):
                opt.step()
                opt.zero_grad()


if __name__ == "__main__":
    main()

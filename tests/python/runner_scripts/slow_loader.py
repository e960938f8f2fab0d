"""A plain PyTorch training loop with a slow Dataset, not instrumented:
`gpuscope run` must find its steps (optimizer steps) and that it waits on
its data. `--accum N` takes N micro-batches per optimizer step; `--hand`
instruments it by hand instead (the reference the runner is compared with);
`--phase` adds an explicit gs.phase("loss") scope; `--fail` raises after
training; `--exit N` ends with sys.exit(N); `--forever` trains until
interrupted; `--save-every N` checkpoints every N optimizer steps; `--wrap-optimizer`
puts the optimizer step in a gs.phase("opt") of the script's own."""

import argparse
import sys
import time

import torch


class SlowDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 96

    def __getitem__(self, i):
        time.sleep(0.002)  # storage, decoding: the loop waits for this
        return torch.randn(16), torch.randn(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--accum", type=int, default=1)
    p.add_argument("--hand", action="store_true")
    p.add_argument("--phase", action="store_true")
    p.add_argument("--fail", action="store_true")
    p.add_argument("--exit", type=int, default=None)
    p.add_argument("--forever", action="store_true")
    p.add_argument("--save-every", type=int, default=0)
    p.add_argument("--wrap-optimizer", action="store_true")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowDataset(), batch_size=4)
    if args.hand:
        import gpuscope as gs

        s = gs.Session()
        for x, y in s.steps(loader):  # accum == 1 only
            with s.phase("forward"):
                loss = torch.nn.functional.mse_loss(model(x), y)
            with s.phase("backward"):
                loss.backward()
            with s.phase("optimizer"):
                opt.step()
                opt.zero_grad()
        print(f"data_share={s.summary().phases['data'].share:.4f}")
        return
    batches = enumerate(loader)
    if args.forever:  # until interrupted
        import itertools

        print("training", flush=True)
        batches = enumerate(itertools.chain.from_iterable(itertools.repeat(loader)))
    for i, (x, y) in batches:
        if args.phase:
            import gpuscope as gs

            with gs.phase("loss"):
                loss = torch.nn.functional.mse_loss(model(x), y) / args.accum
        else:
            loss = torch.nn.functional.mse_loss(model(x), y) / args.accum
        loss.backward()
        if (i + 1) % args.accum == 0:
            if args.wrap_optimizer:  # a scope of the script's own around the optimizer step
                import gpuscope as gs

                with gs.phase("opt"):
                    opt.step()
                    opt.zero_grad()
            else:
                opt.step()
                opt.zero_grad()
            if args.save_every and ((i + 1) // args.accum) % args.save_every == 0:
                import os
                import tempfile

                torch.save(model.state_dict(), os.path.join(tempfile.gettempdir(), "gs_ckpt.pt"))
    print(f"argv={sys.argv[1:]} optimizer_steps={(i + 1) // args.accum}")
    if args.fail:
        raise ValueError("the script failed after training")
    if args.exit is not None:
        sys.exit(args.exit)


if __name__ == "__main__":
    main()

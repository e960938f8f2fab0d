"""A small PyTorch training loop, instrumented with gpuscope.

A real model (an MLP classifier) trains on synthetic data served by a
Dataset that is deliberately slow, the way a dataset is when it decodes
images on the fly or reads from a network filesystem. gpuscope shows where
each step's time goes and names the input pipeline as the bottleneck.

    python examples/torch_training_loop.py [--steps 60] [--batch-size 32]
        [--num-workers 0] [--sample-delay-ms 0.5] [--device cpu|cuda]
        [--html report.html] [--trace trace.json] [--save run.json]
        [--json summary.json]

It prints the report with its ranked findings and writes an HTML report
(plots: step time, phases, idle by cause, telemetry) and a Chrome trace of
the last steps (open it in https://ui.perfetto.dev). --save writes the run
for `gpuscope compare BASE NEW`.

Try --sample-delay-ms 0 to see the finding go away, or --num-workers 4 to see
how much of the wait more workers hide.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import gpuscope as gs


class SlowSyntheticDataset(Dataset):
    """Random features with a learnable label; each item costs `delay_s`."""

    def __init__(self, n: int, features: int, classes: int, delay_s: float) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, features, generator=g)
        self.w = torch.randn(features, classes, generator=g)
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        if self.delay_s > 0:
            time.sleep(self.delay_s)  # decoding / augmentation / storage latency
        x = self.x[i]
        return x, torch.argmax(x @ self.w)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--num-workers", type=int, default=0)
    ap.add_argument("--sample-delay-ms", type=float, default=0.5)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--html", default="report.html", help="write the HTML report here ('' for none)")
    ap.add_argument("--trace", default="trace.json", help="write the Chrome trace here ('' for none)")
    ap.add_argument("--save", help="save the run here, for gpuscope compare")
    ap.add_argument("--json", help="also write the summary as JSON to this file")
    args = ap.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    features, classes = 128, 10
    dataset = SlowSyntheticDataset(args.steps * args.batch_size, features, classes,
                                   args.sample_delay_ms / 1000)
    loader = DataLoader(dataset, batch_size=args.batch_size, shuffle=True,
                        num_workers=args.num_workers, pin_memory=device.type == "cuda")
    model = nn.Sequential(nn.Linear(features, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                          nn.Linear(512, classes)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)

    s = gs.Session(window=512)
    for x, y in s.steps(loader, samples=lambda batch: len(batch[0])):  # next(loader) is "data"
        with s.phase("h2d"):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with s.phase("forward"):
            loss = nn.functional.cross_entropy(model(x), y)
        with s.phase("backward"):
            opt.zero_grad(set_to_none=True)
            loss.backward()
        with s.phase("optimizer"):
            opt.step()

    summary = s.summary()
    print(s.report(color=sys.stdout.isatty() and not os.environ.get("NO_COLOR")))
    findings = s.diagnose()
    print(f"final loss {loss.item():.3f}; top finding: {findings[0].id if findings else 'none'}")
    if args.html:
        print(f"HTML report: {s.save_html(args.html, title='gpuscope demo: a slow input pipeline')}")
    if args.trace:
        print(f"trace of the last steps: {s.save_trace(args.trace)} (open in https://ui.perfetto.dev)")
    if args.save:
        print(f"run saved for gpuscope compare: {s.save(args.save, dataset='synthetic-slow')}")
    if args.json:
        with open(args.json, "w") as f:
            f.write(summary.to_json())


if __name__ == "__main__":
    main()

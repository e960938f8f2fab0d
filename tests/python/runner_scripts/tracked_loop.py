"""A plain PyTorch loop, not instrumented, that logs its loss to the
tracker it is given (``--wandb``: a wandb run; ``--mlflow``: an MLflow run;
neither: none), as a script run under ``gpuscope run --log-to`` would."""

import argparse
import time

import torch


class SlowDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 120

    def __getitem__(self, i):
        time.sleep(0.005)  # the loop waits on its data
        return torch.randn(16), torch.randn(1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wandb", action="store_true")
    p.add_argument("--mlflow", action="store_true")
    args = p.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(SlowDataset(), batch_size=4)
    log = None
    if args.wandb:
        import wandb

        run = wandb.init(project="gpuscope-test")
        log = lambda step, loss: run.log({"loss": loss}, step=step)  # noqa: E731
    elif args.mlflow:
        import mlflow

        mlflow.start_run()
        log = lambda step, loss: mlflow.log_metric("loss", loss, step=step)  # noqa: E731
    for step, (x, y) in enumerate(loader, start=1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if log is not None:
            log(step, loss.item())
    if args.mlflow:
        import mlflow

        mlflow.end_run()


if __name__ == "__main__":
    main()

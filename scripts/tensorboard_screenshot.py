"""docs/images/tensorboard-scalars.png: TensorBoard's scalars page, rendered
in headless Chromium from a real run's event files.

The run: a Hugging Face ``Trainer`` (a one-layer GPT-2 built from a config,
on the CPU, 60 optimizer steps, logging every 5) with
``report_to=["tensorboard"]`` and gpuscope's callback, its Dataset slowed
down on purpose from step 30 (a storage stall: the ``data`` share and the
step time go up, the ``input-bound`` finding appears). Then TensorBoard's
own server (``tensorboard --logdir``, on localhost) and Chromium's
screenshot of its Scalars page, filtered to the loss and gpuscope's p95
step time, data share and input-bound finding.

Usage: python scripts/tensorboard_screenshot.py [--out docs/images/tensorboard-scalars.png]
Needs transformers, tensorboard and chromium (make deps-test).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import torch

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train(out: pathlib.Path) -> pathlib.Path:
    import transformers

    from gpuscope.integrations.huggingface import GpuscopeCallback

    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=32, vocab_size=64, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)
    state = {"served": 0}

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 4096

        def __getitem__(self, i):
            state["served"] += 1
            if state["served"] > 30 * 4:  # from step 30 on, storage slows down
                time.sleep(0.01)
            ids = torch.randint(0, 64, (16,))
            return {"input_ids": ids, "labels": ids}

    args = transformers.TrainingArguments(
        output_dir=str(out), max_steps=60, per_device_train_batch_size=4, logging_steps=5,
        report_to=["tensorboard"], save_strategy="no", use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0)
    transformers.Trainer(model=model, args=args, train_dataset=Tokens(),
                         callbacks=[GpuscopeCallback(report=False)]).train()
    (run_dir,) = (out / "runs").iterdir()
    return run_dir


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "docs" / "images" / "tensorboard-scalars.png"))
    args = ap.parse_args()
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(b)), None)
    if browser is None:
        sys.exit("tensorboard_screenshot: needs chromium (make deps-test)")
    torch.manual_seed(0)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="gpuscope-tb-") as tmp:
        run_dir = train(pathlib.Path(tmp))
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(run_dir.parent),
                                   "--port", str(port), "--host", "127.0.0.1"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    urllib.request.urlopen(base + "/data/runs", timeout=2).read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit("tensorboard_screenshot: TensorBoard's server did not start")
                    time.sleep(0.5)
            # The Scalars page (the Time Series page draws its lines with
            # WebGL, which headless Chromium without a GPU leaves blank).
            pattern = "train/loss$|step_time_seconds/p95|phase_share_ratio/data|input-bound"
            url = base + "/#scalars&_smoothingWeight=0&tagFilter=" + urllib.request.quote(pattern, safe="")
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                            "--window-size=1400,760", "--virtual-time-budget=20000",
                            f"--screenshot={args.out}", url], check=True, timeout=180, capture_output=True)
        finally:
            server.terminate()
            server.wait(10)
    print(f"tensorboard_screenshot: {args.out}")


if __name__ == "__main__":
    main()

"""The tiny framework runs the integration and tracker tests share: a
Lightning ``fit`` and a Hugging Face ``Trainer.train``, models built from
configs (no download), on the CPU."""

from __future__ import annotations

from typing import Any, List, Optional

import torch


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.randn(8)
        return x, (x * x).sum(0, keepdim=True)


def lightning_fit(tmp_path: Any, callback: Any, *, loggers: Any = False, max_steps: int = 6,
                  accumulate: int = 2, log_every_n_steps: int = 50) -> Any:
    """A Lightning fit of a two-layer MLP that logs its loss (``train_loss``)
    every step; returns the trainer."""
    import lightning as L

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = torch.nn.functional.mse_loss(self(x), y)
            self.log("train_loss", loss, on_step=True, on_epoch=False)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    trainer = L.Trainer(max_steps=max_steps, accumulate_grad_batches=accumulate, accelerator="cpu", devices=1,
                        logger=loggers, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=str(tmp_path), callbacks=[callback],
                        log_every_n_steps=log_every_n_steps)
    trainer.fit(Model(), torch.utils.data.DataLoader(Squares(), batch_size=4))
    return trainer


def huggingface_train(tmp_path: Any, callback: Any, *, report_to: Optional[List[str]] = None,
                      max_steps: int = 5, accumulate: int = 3, logging_steps: int = 1) -> Any:
    """A Hugging Face ``Trainer.train`` of a one-layer GPT-2; returns the
    trainer."""
    import transformers

    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 48

        def __getitem__(self, i):
            ids = torch.randint(0, 64, (8,))
            return {"input_ids": ids, "labels": ids}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=max_steps, per_device_train_batch_size=4,
        gradient_accumulation_steps=accumulate, logging_steps=logging_steps, report_to=report_to or [],
        save_strategy="no", use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[callback])
    trainer.train()
    return trainer

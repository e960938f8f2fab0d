"""The framework callbacks: a tiny Lightning ``Trainer.fit`` and a tiny
Hugging Face ``Trainer.train`` (models built from configs, no download),
each with gpuscope's callback. What a user relies on: steps equal the
framework's global steps (gradient accumulation included), the phases are
there, the headline numbers reach the framework's logs, the files are
written, and importing gpuscope imports no framework."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")


class Squares(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        x = torch.randn(8)
        return x, (x * x).sum(0, keepdim=True)


def test_importing_gpuscope_imports_no_framework():
    code = ("import sys, gpuscope, gpuscope.integrations; "
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'transformers', 'accelerate') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_lightning_fit_records_its_global_steps(tmp_path):
    L = pytest.importorskip("lightning")
    from gpuscope.integrations.lightning import GpuscopeCallback

    class Model(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(),
                                           torch.nn.Linear(32, 1))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    cb = GpuscopeCallback(log_every_n_steps=2, report=False)
    trainer = L.Trainer(max_steps=6, accumulate_grad_batches=2, accelerator="cpu", devices=1,
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=str(tmp_path), callbacks=[cb])
    trainer.fit(Model(), torch.utils.data.DataLoader(Squares(), batch_size=4))
    assert trainer.global_step == 6
    s = cb.session.summary()
    assert s.total_steps == 6  # optimizer steps, 2 micro-batches each
    phases = s.phases
    assert phases["optimizer"].count == 6
    assert phases["forward"].count == 12 and phases["backward"].count == 12
    assert phases["data"].count >= 12
    # Forward and backward run inside Lightning's closure, inside step():
    # still phases of their own, not inside "optimizer".
    assert phases["forward"].top_level and phases["backward"].top_level
    assert "gpuscope/step_p95_ms" in trainer.callback_metrics
    run = json.loads((tmp_path / "gpuscope" / "run.json").read_text())
    assert run["summary"]["total_steps"] == 6


def test_huggingface_train_records_its_global_steps(tmp_path):
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from gpuscope.integrations.huggingface import GpuscopeCallback

    config = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64, n_positions=16)
    model = transformers.GPT2LMHeadModel(config)

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 48

        def __getitem__(self, i):
            ids = torch.randint(0, 64, (8,))
            return {"input_ids": ids, "labels": ids}

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=5, per_device_train_batch_size=4,
        gradient_accumulation_steps=3, logging_steps=1, report_to=[], save_strategy="no",
        use_cpu=True, disable_tqdm=True, dataloader_num_workers=0)
    cb = GpuscopeCallback(report=False)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens(), callbacks=[cb])
    trainer.train()
    assert trainer.state.global_step == 5
    s = cb.session.summary()
    assert s.total_steps == 5  # optimizer steps, 3 micro-batches each
    phases = s.phases
    assert phases["optimizer"].count == 5
    assert phases["forward"].count == 15 and phases["backward"].count == 15
    assert "data" in phases
    logged = [h for h in trainer.state.log_history if "gpuscope/step_p95_ms" in h]
    assert logged, trainer.state.log_history
    run = json.loads((tmp_path / "gpuscope" / "run.json").read_text())
    assert run["summary"]["total_steps"] == 5

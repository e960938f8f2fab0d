"""The framework callbacks: a tiny Lightning ``Trainer.fit`` and a tiny
Hugging Face ``Trainer.train`` (models built from configs, no download),
each with gpuscope's callback. What a user relies on: steps equal the
framework's global steps (gradient accumulation included), the phases are
there, the numbers reach the Trainer's log history, the files are written,
and importing gpuscope imports no framework. The trackers the callbacks log
to: tests/python/test_trackers.py."""

import json
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from _frameworks import huggingface_train, lightning_fit  # noqa: E402


def test_importing_gpuscope_imports_no_framework():
    code = ("import sys, gpuscope, gpuscope.integrations; "
            "print(sorted(m for m in ('lightning', 'pytorch_lightning', 'transformers', 'accelerate') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_lightning_fit_records_its_global_steps(tmp_path):
    pytest.importorskip("lightning")
    from gpuscope.integrations.lightning import GpuscopeCallback

    cb = GpuscopeCallback(report=False)
    trainer = lightning_fit(tmp_path, cb)
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
    run = json.loads((tmp_path / "gpuscope" / "run.json").read_text())
    assert run["summary"]["total_steps"] == 6


def test_huggingface_train_records_its_global_steps(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from gpuscope.integrations.huggingface import GpuscopeCallback

    cb = GpuscopeCallback(report=False)
    trainer = huggingface_train(tmp_path, cb)
    assert trainer.state.global_step == 5
    s = cb.session.summary()
    assert s.total_steps == 5  # optimizer steps, 3 micro-batches each
    phases = s.phases
    assert phases["optimizer"].count == 5
    assert phases["forward"].count == 15 and phases["backward"].count == 15
    assert "data" in phases
    logged = [h for h in trainer.state.log_history if "gpuscope/step_time_seconds/p95" in h]
    assert logged, trainer.state.log_history
    run = json.loads((tmp_path / "gpuscope" / "run.json").read_text())
    assert run["summary"]["total_steps"] == 5

"""``GpuscopeCallback`` for Lightning 2.x (``lightning.pytorch``, or the
standalone ``pytorch_lightning``).

    from gpuscope.integrations.lightning import GpuscopeCallback

    cb = GpuscopeCallback()
    trainer = L.Trainer(callbacks=[cb], ...)
    trainer.fit(model, datamodule)
    cb.session.summary()

Steps are optimizer steps (``trainer.global_step``, accumulation counted
right); phases ``data``, ``forward``, ``backward``, ``optimizer`` (the
optimizer phase begins after Lightning's closure has run forward and
backward). Every ``log_every_n_steps`` optimizer steps the headline numbers
go to the LightningModule's ``log_dict`` (``gpuscope/step_p95_ms``, ...).
At the end of fitting the files go to ``out_dir`` (default
``<default_root_dir>/gpuscope``), one set per rank, and the report to
stderr on rank 0.
"""

from __future__ import annotations

import os
from typing import Any, Optional

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the standalone package
    from pytorch_lightning.callbacks import Callback  # type: ignore[no-redef]

from ._common import Recorder


class GpuscopeCallback(Callback):  # type: ignore[misc]
    """Records the fit with gpuscope (see the module comment)."""

    def __init__(self, session: Any = None, out_dir: Optional[str] = None,
                 log_every_n_steps: int = 50, report: bool = True) -> None:
        super().__init__()
        if log_every_n_steps < 0:
            raise ValueError("log_every_n_steps must be >= 0 (0: never)")
        self._recorder = Recorder(session, out_dir, report)
        self.log_every_n_steps = log_every_n_steps
        self._logged_at = -1

    @property
    def session(self) -> Any:
        """The gpuscope.Session recording the fit (made at the start of
        training unless one was given)."""
        return self._recorder.session

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._recorder.start()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        step = trainer.global_step
        n = self.log_every_n_steps
        if n and step > 0 and step % n == 0 and step != self._logged_at:
            self._logged_at = step
            metrics = self._recorder.metrics()
            if metrics:
                pl_module.log_dict(metrics, on_step=True, on_epoch=False)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self._recorder.end(os.path.join(trainer.default_root_dir, "gpuscope"),
                           main_process=trainer.is_global_zero)

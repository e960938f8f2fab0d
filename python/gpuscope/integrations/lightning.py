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
backward).

gpuscope's scalars (``gpuscope.trackers.scalars``:
``gpuscope/step_time_seconds/p95``, ...) go to the LightningModule's
``log_dict`` on the iterations Lightning logs (``log_every_n_steps``, the
trainer's unless given), so that every logger in ``trainer.loggers`` (CSV,
TensorBoard, W&B, MLflow: whatever the user configured) writes them with
the module's own ``self.log()`` values, at the same step, and they are in
``trainer.callback_metrics``. The findings when they change and the report
and trace at the end go, from gpuscope's logging thread, through each
logger's ``experiment`` where it keeps such things. Only global rank zero
sends those. At the end of fitting the files go to ``out_dir`` (default
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
                 log_every_n_steps: Optional[int] = None, report: bool = True, *,
                 alerts: bool = False, artifacts: bool = True) -> None:
        super().__init__()
        if log_every_n_steps is not None and (isinstance(log_every_n_steps, bool)
                                              or not isinstance(log_every_n_steps, int) or log_every_n_steps < 0):
            raise ValueError("log_every_n_steps must be an int >= 0 (0: never; None: the trainer's)")
        self._recorder = Recorder(session, out_dir, report, alerts=alerts, artifacts=artifacts)
        self.log_every_n_steps = log_every_n_steps
        self._logged_at = -1

    @property
    def session(self) -> Any:
        """The gpuscope.Session recording the fit (made at the start of
        training unless one was given)."""
        return self._recorder.session

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._recorder.start()
        if trainer.is_global_zero:
            from gpuscope.trackers import LightningLoggerSink

            self._recorder.log_to([LightningLoggerSink(lg, scalars=False) for lg in trainer.loggers])

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        # Lightning logs after this hook, at the batches that stepped so far
        # (not yet counting this one), when one more is a multiple of
        # log_every_n_steps and the batch ends an accumulation.
        n = trainer.log_every_n_steps if self.log_every_n_steps is None else self.log_every_n_steps
        loop = trainer.fit_loop
        step = getattr(loop.epoch_loop, "_batches_that_stepped", trainer.global_step - 1)
        accumulating = getattr(loop, "_should_accumulate", lambda: False)() and pl_module.automatic_optimization
        if n and not accumulating and (step + 1) % n == 0 and step != self._logged_at:
            self._logged_at = step
            metrics = self._recorder.metrics()
            if metrics:
                pl_module.log_dict(metrics, on_step=True, on_epoch=False)
            self._recorder.log_step(step)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        step = getattr(trainer.fit_loop.epoch_loop, "_batches_that_stepped", trainer.global_step)
        self._recorder.end(os.path.join(trainer.default_root_dir, "gpuscope"),
                           main_process=trainer.is_global_zero, step=step)

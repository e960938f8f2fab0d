"""``GpuscopeCallback`` for the Hugging Face ``transformers.Trainer``.

    from gpuscope.integrations.huggingface import GpuscopeCallback

    cb = GpuscopeCallback()
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[cb])
    trainer.train()
    cb.session.summary()

Steps are optimizer steps (``state.global_step``, gradient accumulation
counted right); phases ``data``, ``forward``, ``backward``, ``optimizer``.

At each of the Trainer's logs (``logging_steps``), gpuscope's scalars
(``gpuscope.trackers.scalars``: ``gpuscope/step_time_seconds/p95``, ...) go
to the trackers ``report_to`` configured, at ``state.global_step``: the
TensorBoard run's log directory, the wandb run (in rows of their own
carrying the Trainer's ``train/global_step``, the x-axis its charts use),
the MLflow run; the findings when they
change, and the report and trace as artifacts at the end. They go to each
tracker's client directly, from gpuscope's logging thread: the Trainer calls
its reporting integrations before any user callback, so values added to the
``logs`` of ``on_log`` would reach none of them (and a tracker that hangs
must not hold the training loop). The same values join
``state.log_history``. Other ``report_to`` integrations get nothing from
gpuscope (said once). Only the main process logs.

At the end of training the files go to ``out_dir`` (default
``<output_dir>/gpuscope``), one set per rank, and the report to stderr on
the main process.
"""

from __future__ import annotations

import os
import sys
from typing import Any, List, Optional

from transformers import TrainerCallback

from ._common import Recorder


class GpuscopeCallback(TrainerCallback):  # type: ignore[misc]
    """Records ``Trainer.train()`` with gpuscope (see the module comment).
    ``alerts=True``: a W&B alert for each new high finding;
    ``artifacts=False``: no files uploaded to the trackers."""

    def __init__(self, session: Any = None, out_dir: Optional[str] = None, report: bool = True, *,
                 alerts: bool = False, artifacts: bool = True) -> None:
        self._recorder = Recorder(session, out_dir, report, alerts=alerts, artifacts=artifacts)

    @property
    def session(self) -> Any:
        """The gpuscope.Session recording the training (made at its start
        unless one was given)."""
        return self._recorder.session

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._recorder.start()
        if state.is_world_process_zero:
            # The reporting integrations ran their on_train_begin already
            # (they come before user callbacks), so their runs exist now.
            self._recorder.log_to(_tracker_sinks(args, _handler_callbacks()))

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if self._recorder.session is None or not state.is_world_process_zero:
            return
        self._recorder.log_step(state.global_step)
        if state.log_history and isinstance(state.log_history[-1], dict):
            state.log_history[-1].update(self._recorder.metrics())

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._recorder.end(os.path.join(args.output_dir, "gpuscope"),
                           main_process=state.is_world_process_zero, step=state.global_step)


def _handler_callbacks() -> List[Any]:
    """The Trainer's callbacks. A callback is handed neither the Trainer nor
    its ``CallbackHandler``; every event is called from
    ``CallbackHandler.call_event``, so the handler is the caller's ``self``
    (checked by type: nothing is found if transformers calls differently)."""
    from transformers.trainer_callback import CallbackHandler

    frame = sys._getframe(1)
    for _ in range(4):  # on_train_begin, call_event (and a subclass's override or two)
        if frame is None:
            break
        owner = frame.f_locals.get("self")
        if isinstance(owner, CallbackHandler):
            return list(owner.callbacks)
        frame = frame.f_back
    return []


def _tracker_sinks(args: Any, callbacks: List[Any]) -> List[Any]:
    """A sink per reporting integration gpuscope knows, from the
    integration's own state."""
    from gpuscope import _gpuscope
    from gpuscope.trackers import MlflowSink, TensorBoardSink, WandbSink

    sinks: List[Any] = []
    known = set()
    for cb in callbacks:
        kind = type(cb).__name__
        try:
            log_dir = getattr(getattr(cb, "tb_writer", None), "log_dir", None) or getattr(cb, "logging_dir", None)
            if kind == "TensorBoardCallback" and log_dir:
                # Its own writer in the integration's log directory: the
                # integration closes its writer at on_train_end, before
                # gpuscope's final log.
                sinks.append(TensorBoardSink(log_dir))
                known.add("tensorboard")
            elif kind == "WandbCallback" and getattr(cb, "_wandb", None) is not None \
                    and cb._wandb.run is not None:
                sinks.append(WandbSink(cb._wandb.run, step_metric="train/global_step"))
                known.add("wandb")
            elif kind == "MLflowCallback" and getattr(cb, "_ml_flow", None) is not None \
                    and cb._ml_flow.active_run() is not None:
                sinks.append(MlflowSink(cb._ml_flow.active_run()))
                known.add("mlflow")
        except Exception as e:  # noqa: BLE001 - the training must not fail for it
            _gpuscope._log_once(f"hf:{kind}", f"gpuscope: could not log to {kind} ({type(e).__name__}: {e})")
    report_to = getattr(args, "report_to", None) or []
    if isinstance(report_to, str):
        report_to = [report_to]
    other = [r for r in report_to if r not in known and r not in ("none", "all")]
    if other:
        _gpuscope._log_once("hf:report_to", f"gpuscope logs to tensorboard, wandb and mlflow; not to "
                            f"{', '.join(other)} (gpuscope's numbers are in state.log_history)")
    return sinks

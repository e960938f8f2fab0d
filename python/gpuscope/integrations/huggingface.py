"""``GpuscopeCallback`` for the Hugging Face ``transformers.Trainer``.

    from gpuscope.integrations.huggingface import GpuscopeCallback

    cb = GpuscopeCallback()
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[cb])
    trainer.train()
    cb.session.summary()

Steps are optimizer steps (``state.global_step``, gradient accumulation
counted right); phases ``data``, ``forward``, ``backward``, ``optimizer``.
The headline numbers (``gpuscope/step_p95_ms``, ...) join every log the
Trainer writes (``logging_steps``): the ``logs`` its reporting integrations
receive after this callback, and ``state.log_history``. At the end of
training the files go to ``out_dir`` (default ``<output_dir>/gpuscope``),
one set per rank, and the report to stderr on the main process.
"""

from __future__ import annotations

import os
from typing import Any, Optional

from transformers import TrainerCallback

from ._common import Recorder


class GpuscopeCallback(TrainerCallback):  # type: ignore[misc]
    """Records ``Trainer.train()`` with gpuscope (see the module comment)."""

    def __init__(self, session: Any = None, out_dir: Optional[str] = None,
                 report: bool = True) -> None:
        self._recorder = Recorder(session, out_dir, report)

    @property
    def session(self) -> Any:
        """The gpuscope.Session recording the training (made at its start
        unless one was given)."""
        return self._recorder.session

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._recorder.start()

    def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kwargs: Any) -> None:
        if logs is None or self._recorder.session is None:
            return
        metrics = self._recorder.metrics()
        logs.update(metrics)
        if state.log_history and isinstance(state.log_history[-1], dict):
            state.log_history[-1].update(metrics)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._recorder.end(os.path.join(args.output_dir, "gpuscope"),
                           main_process=state.is_world_process_zero)

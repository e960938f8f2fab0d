"""The tracker adapters (``Sink``s) and ``sink_for()``, which finds the
adapter for what the user passed. Every method runs on ``TrackerLog``'s
thread; each tracker's package is imported by its adapter only."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Sequence


class Sink:
    """A tracker, as ``TrackerLog`` writes to it. ``scalars`` is the one a
    tracker must have; the others do nothing unless the tracker shows such
    things. A method may raise: the sink is then switched off."""

    name = "tracker"

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        raise NotImplementedError

    def findings(self, step: int, rows: Sequence[Any]) -> None:
        """The current findings (``FindingRow``s), each time one appears or
        changes severity."""

    def artifacts(self, files: Dict[str, str]) -> None:
        """At the end: the report, the trace and the run file (name -> path;
        the files are gone after the call)."""

    def alert(self, title: str, text: str) -> None:
        """A new high finding, when the user asked for alerts."""

    def close(self) -> None:
        """The end of the log: flush (and close what the sink opened)."""


def findings_markdown(step: int, rows: Sequence[Any]) -> str:
    """The findings as a Markdown table (TensorBoard's text plugin and
    MLflow's artifact view both render it)."""
    if not rows:
        return f"No findings at step {step}."
    lines = [f"gpuscope findings at step {step}", "",
             "| finding | severity | share of step time | what | what to do |", "|---|---|---:|---|---|"]
    for r in rows:
        cells = [r.id, r.severity, f"{100 * r.share:.1f}%", r.title, r.fix]
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines)


class TensorBoardSink(Sink):
    """A ``torch.utils.tensorboard.SummaryWriter`` (or tensorboardX's), or a
    log directory for one this sink opens and closes. Scalars at the step;
    the findings as a Markdown table under the text tag
    ``gpuscope/findings``. TensorBoard keeps no artifacts."""

    name = "tensorboard"

    def __init__(self, writer_or_dir: Any) -> None:
        if isinstance(writer_or_dir, (str, os.PathLike)):
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=os.fspath(writer_or_dir))
            self._own = True
        else:
            self.writer = writer_or_dir
            self._own = False
        self.log_dir = getattr(self.writer, "log_dir", None) or getattr(self.writer, "logdir", None)

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def findings(self, step: int, rows: Sequence[Any]) -> None:
        self.writer.add_text("gpuscope/findings", findings_markdown(step, rows), step)
        self.writer.flush()

    def close(self) -> None:
        if self._own:
            self.writer.close()
        else:
            self.writer.flush()


class WandbSink(Sink):
    """A Weights & Biases run (``wandb.init()``'s), or, with ``run=None``,
    whichever run ``wandb.run`` is when the first log is sent (for
    ``gpuscope run --log-to wandb``, whose script starts the run).

    The scalars go with ``commit=False``, so they join the row the run's
    next ``log()`` commits and never add rows of their own (which would move
    the charts of a script that logs without ``step=``, or refuse a script's
    ``step=`` behind them); they carry their own x-axis, ``gpuscope/step``
    (``define_metric``), the loop's step, so the row they land in does not
    matter. Given ``step_metric``, the name of the step the run's charts
    already use, they go in rows of their own that carry it instead. Findings as a
    ``wandb.Table``, the files as one artifact of type ``gpuscope``, and
    ``run.alert()`` for alerts."""

    name = "wandb"

    def __init__(self, run: Any = None, step_metric: Optional[str] = None) -> None:
        self._run = run
        # A run whose charts already use a step metric of their own (the
        # Hugging Face callback's train/global_step, Lightning's
        # trainer/global_step): gpuscope's values go in rows of their own
        # that carry it, placed on the x-axis by it, whatever the rows' order.
        self._step_key = step_metric or "gpuscope/step"
        self._commit = step_metric is not None
        self._defined = step_metric is not None

    def _the_run(self) -> Any:
        if self._run is None:
            import wandb

            self._run = wandb.run
            if self._run is None:
                raise RuntimeError("no wandb run: call wandb.init() before the first log")
        if not self._defined:
            self._run.define_metric("gpuscope/step")
            self._run.define_metric("gpuscope/*", step_metric="gpuscope/step")
            self._defined = True
        return self._run

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        self._the_run().log({**values, self._step_key: step}, commit=self._commit)

    def findings(self, step: int, rows: Sequence[Any]) -> None:
        import wandb

        table = wandb.Table(columns=["id", "severity", "share", "title", "fix"], data=[list(r) for r in rows])
        self._the_run().log({"gpuscope/findings": table, self._step_key: step}, commit=self._commit)

    def artifacts(self, files: Dict[str, str]) -> None:
        import wandb

        run = self._the_run()
        art = wandb.Artifact(f"gpuscope-{run.id}", type="gpuscope")
        for name, path in files.items():
            art.add_file(path, name=name)
        run.log_artifact(art)

    def alert(self, title: str, text: str) -> None:
        import wandb

        self._the_run().alert(title=title, text=text, level=wandb.AlertLevel.WARN)

    def close(self) -> None:
        if self._run is not None and not self._commit:
            self._run.log({}, commit=True)  # the last uncommitted values, in a row


class MlflowSink(Sink):
    """An MLflow run: an ``mlflow.ActiveRun`` or ``Run``, or a run id, with
    an ``MlflowClient`` (default: one for the current tracking URI, made at
    the first log). Scalars through ``log_batch`` at the step; the findings
    as a Markdown file per change under ``gpuscope/findings/``; the files
    under ``gpuscope/``. An MLflow run keeps no alerts.

    ``run=None``: the next run ``mlflow.start_run()`` starts, on any thread
    (``gpuscope run --log-to mlflow``: the script's); nothing is logged
    before it starts."""

    name = "mlflow"

    def __init__(self, run: Any, client: Any = None) -> None:
        info = getattr(run, "info", None)
        self.run_id: Optional[str] = info.run_id if info is not None else (None if run is None else str(run))
        self.client = client
        if run is None:
            _follow_start_run(self)

    def _client(self) -> Any:
        if self.client is None:
            from mlflow.tracking import MlflowClient

            self.client = MlflowClient()
        return self.client

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        if self.run_id is None:
            return
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(key, float(value), now, step) for key, value in values.items()]
        for i in range(0, len(metrics), 1000):  # log_batch's limit
            self._client().log_batch(self.run_id, metrics=metrics[i:i + 1000])

    def findings(self, step: int, rows: Sequence[Any]) -> None:
        if self.run_id is not None:
            self._client().log_text(self.run_id, findings_markdown(step, rows),
                                    f"gpuscope/findings/step-{step:09d}.md")

    def artifacts(self, files: Dict[str, str]) -> None:
        if self.run_id is None:
            raise RuntimeError("no MLflow run was started (mlflow.start_run()), so none has gpuscope's numbers")
        for path in files.values():
            self._client().log_artifact(self.run_id, path, artifact_path="gpuscope")


def _follow_start_run(sink: MlflowSink) -> None:
    """Makes ``mlflow.start_run`` tell ``sink`` the id of the first run it
    starts. MLflow keeps the active run per thread, so gpuscope's thread
    cannot look it up; the script's call is where it is known."""
    import mlflow
    import mlflow.tracking.fluent as fluent

    original = fluent.start_run

    def start_run(*args: Any, **kwargs: Any) -> Any:
        run = original(*args, **kwargs)
        if sink.run_id is None:
            sink.run_id = run.info.run_id
        return run

    start_run.__wrapped__ = original  # type: ignore[attr-defined]
    start_run.__doc__ = original.__doc__
    fluent.start_run = start_run
    mlflow.start_run = start_run


class LightningLoggerSink(Sink):
    """A Lightning logger (``trainer.loggers``). The scalars go through the
    logger's ``experiment`` where it is a tracker gpuscope knows (a
    SummaryWriter, a wandb run charted against ``trainer/global_step``, an
    MlflowClient), which take calls from any thread; else (a CSVLogger, a
    logger of another kind) through its own ``log_metrics()``. The findings
    and the files go through the ``experiment`` only.

    ``scalars=False``: the scalars are not this sink's (the Lightning
    callback logs them on the training thread with ``log_dict``, at
    Lightning's own logging step, since a CSVLogger's file is written there
    and must not be appended to from another thread)."""

    def __init__(self, logger: Any, scalars: bool = True) -> None:
        self.logger = logger
        self.name = f"lightning {type(logger).__name__}"
        self._with_scalars = scalars
        self._inner: Optional[Sink] = None
        self._looked = False

    def _experiment(self) -> Optional[Sink]:
        if not self._looked:
            self._looked = True
            kind = type(self.logger).__name__
            if kind == "TensorBoardLogger":
                self._inner = TensorBoardSink(self.logger.experiment)
            elif kind == "WandbLogger":
                self._inner = WandbSink(self.logger.experiment, step_metric="trainer/global_step")
            elif kind == "MLFlowLogger":
                self._inner = MlflowSink(self.logger.run_id, self.logger.experiment)
        return self._inner

    def scalars(self, step: int, values: Dict[str, float]) -> None:
        if not self._with_scalars:
            return
        inner = self._experiment()
        if inner is not None:
            inner.scalars(step, values)
        else:
            self.logger.log_metrics(values, step=step)

    def findings(self, step: int, rows: Sequence[Any]) -> None:
        inner = self._experiment()
        if inner is not None:
            inner.findings(step, rows)

    def artifacts(self, files: Dict[str, str]) -> None:
        inner = self._experiment()
        if inner is not None:
            inner.artifacts(files)

    def alert(self, title: str, text: str) -> None:
        inner = self._experiment()
        if inner is not None:
            inner.alert(title, text)

    def close(self) -> None:
        inner = self._experiment()
        if inner is not None:
            inner.close()


def sink_for(tracker: Any) -> List[Sink]:
    """The sinks for what ``Session.log_to()`` was given: a ``Sink``; a
    ``SummaryWriter``; a wandb run; an MLflow run; a Lightning logger; the
    strings ``tensorboard:DIR``, ``wandb`` (the run the script starts) and
    ``mlflow`` (the run in ``MLFLOW_RUN_ID``, else a new run in the current
    experiment); or a list of these."""
    if isinstance(tracker, Sink):
        return [tracker]
    if isinstance(tracker, (list, tuple)):
        return [s for t in tracker for s in sink_for(t)]
    if isinstance(tracker, str):
        return [_from_spec(tracker)]
    module = type(tracker).__module__ or ""
    kind = type(tracker).__name__
    if hasattr(tracker, "add_scalar") and hasattr(tracker, "add_text"):
        return [TensorBoardSink(tracker)]
    if module.startswith("wandb"):
        return [WandbSink(tracker)]
    if module.startswith("mlflow") and hasattr(tracker, "info"):
        return [MlflowSink(tracker)]
    if hasattr(tracker, "log_metrics") and (module.startswith(("lightning", "pytorch_lightning"))
                                            or kind.endswith("Logger")):
        return [LightningLoggerSink(tracker)]
    raise TypeError(f"log_to() takes a SummaryWriter, a wandb run, an MLflow run, a Lightning logger, "
                    f"a gpuscope.trackers.Sink, or 'tensorboard:DIR', 'wandb' or 'mlflow'; not {kind}")


SPECS = "tensorboard:DIR, wandb or mlflow"


def _from_spec(spec: str) -> Sink:
    kind, _, arg = spec.partition(":")
    if kind == "tensorboard" and arg:
        return TensorBoardSink(arg)
    if kind == "wandb" and not arg:
        return WandbSink()
    if kind == "mlflow" and not arg:
        return _mlflow_run()
    raise ValueError(f"not a tracker: {spec!r} (one of {SPECS})")


def _mlflow_run() -> "MlflowSink":
    """``mlflow``: the caller's active run (MLflow keeps it per thread, so
    it is looked up here), else the run ``MLFLOW_RUN_ID`` names, else the
    next run the script starts."""
    import mlflow

    active = mlflow.active_run()
    if active is not None:
        return MlflowSink(active)
    if os.environ.get("MLFLOW_RUN_ID"):
        return MlflowSink(os.environ["MLFLOW_RUN_ID"])
    return MlflowSink(None)

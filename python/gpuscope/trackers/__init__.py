"""gpuscope's numbers and findings in the experiment tracker a team already
reads: TensorBoard, Weights & Biases, MLflow, or a Lightning logger
(docs/integrations.md).

    log = s.log_to("tensorboard:runs/exp1", every=100)   # or a SummaryWriter,
    log = s.log_to(wandb.run)                             # a wandb run,
    log = s.log_to(mlflow.active_run())                   # an MLflow run

* **What is logged**, step-aligned with the loop's own step counter (the
  steps the session completed, or the step a framework callback gives):
  the scalars of ``scalars(summary)`` (the same families and values as the
  Prometheus exposition, named ``gpuscope/<family>[/<label>...]``: step time
  quantiles, phase shares, GPU idle and idle by cause, throughput, MFU,
  telemetry, memory, each finding's share); the findings as a table each
  time one appears or changes severity; at the end, the HTML report and the
  Chrome trace as artifacts where the tracker keeps artifacts; and, with
  ``alerts=True``, a W&B alert for each new high finding.
* **Where it runs**: on the logger's one daemon thread, never on the
  recording thread and never per scope. ``log()`` from the training loop
  only queues a request; with ``every=N`` the thread itself looks at the
  session's step count twice a second and logs each time it passes a
  multiple of N.
* **Safety**: a tracker that raises is said once on stderr and switched off
  for the rest of the run; one whose call has not returned after
  ``timeout_s`` is said once and switched off too (its call is left behind
  on the thread: Python cannot stop it); neither ever reaches the training
  loop, and the exit waits at most ``timeout_s`` for the final log.

Each tracker's package is imported only when its adapter is used.
"""

from __future__ import annotations

import atexit
import os
import queue
import tempfile
import threading
import time
import weakref
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Sequence

from .. import _gpuscope
from ._sinks import LightningLoggerSink, MlflowSink, Sink, TensorBoardSink, WandbSink, sink_for

__all__ = ["FindingRow", "LightningLoggerSink", "MlflowSink", "Sink", "TensorBoardSink", "TrackerLog",
           "WandbSink", "findings_rows", "scalars", "sink_for"]

# Families that say nothing about the training loop (gpuscope's own state
# and the exposition's bookkeeping), and the per-rank families, which a
# tracker's one run per job would show as one chart per rank.
_SKIPPED = ("gpuscope_info", "gpuscope_window_steps", "gpuscope_step_in_progress_seconds",
            "gpuscope_misuse_total")
_SKIPPED_PREFIXES = ("gpuscope_self_", "gpuscope_rank_")
_DROPPED_LABELS = ("severity",)  # a finding's share is one series whatever its severity


def _quantile_name(q: str) -> str:
    return "p" + format(float(q) * 100, "g")


def scalars(summary: Any) -> Dict[str, float]:
    """The scalars a tracker gets for ``summary``: every sample of the C++
    Prometheus exposition (``prometheus_text``), less gpuscope's own
    bookkeeping, named ``gpuscope/<family without gpuscope_>`` followed by
    the sample's label values (``quantile="0.95"`` as ``p95``):
    ``gpuscope/step_time_seconds/p95``, ``gpuscope/phase_share_ratio/data``,
    ``gpuscope/gpu_idle_by_cause_ratio/data``. Units are the family's
    (seconds, ratios in 0..1). Empty before the first step."""
    from .._fleet import families

    if summary.total_steps == 0:
        return {}
    out: Dict[str, float] = {}
    for family in families(_gpuscope.prometheus_text(summary)):
        if family.name in _SKIPPED or family.name.startswith(_SKIPPED_PREFIXES):
            continue
        base = "gpuscope/" + family.name[len("gpuscope_"):]
        for labels, value in family.samples:
            if value != value:  # NaN: not measured
                continue
            parts = [base]
            for key, text in labels.items():
                if key in _DROPPED_LABELS or key == "rank":
                    continue
                parts.append(_quantile_name(text) if key == "quantile" else text)
            out["/".join(parts)] = value
    return out


class FindingRow(NamedTuple):
    """One finding as a tracker's table row."""

    id: str
    severity: str
    share: float  # of step time
    title: str
    fix: str


def findings_rows(findings: Iterable[Any]) -> List[FindingRow]:
    """The findings (``Session.diagnose()``) as table rows, in their rank
    order."""
    return [FindingRow(f.id, f.severity, float(f.share), f.title, f.recommendation) for f in findings]


class TrackerLog:
    """What ``Session.log_to()`` returns: the session's numbers sent to the
    sinks from one daemon thread (see the module comment). ``log(step)``
    queues a log now; ``close()`` sends the final numbers, the findings and
    the artifacts, and is run at interpreter exit by itself.

    ``sends`` counts the logs that reached every sink still on;
    ``errors`` names each sink switched off and why."""

    def __init__(self, session: Any, sinks: Sequence[Sink], *, every: int = 100, alerts: bool = False,
                 artifacts: bool = True, timeout_s: float = 10.0, poll_s: float = 0.5) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 0:
            raise ValueError(f"every must be a number of steps >= 0 (0: only when log() is called), not {every!r}")
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0.01 <= timeout_s < 1e6:
            raise ValueError(f"timeout_s must be a number of seconds in [0.01, 1e6), not {timeout_s!r}")
        if not sinks:
            raise ValueError("log_to() needs at least one tracker")
        self._session: Any = session
        self._sinks: List[Sink] = list(sinks)
        self._off: Dict[int, str] = {}  # index -> why
        self._every = every
        self._alerts = bool(alerts)
        self._artifacts = bool(artifacts)
        self._timeout = float(timeout_s)
        self._poll = float(poll_s)
        self._pid = os.getpid()
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=64)
        self._busy_since: Optional[float] = None
        self._busy_sink: Optional[int] = None
        self._seen: Dict[str, str] = {}  # finding id -> severity last logged
        self._logged_step = -1
        self._next_at = every if every else None
        self._closed = False
        self._lock = threading.Lock()
        self.sends = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name="gpuscope-trackers", daemon=True)
        self._thread.start()
        _live.add(self)

    @property
    def errors(self) -> Dict[str, str]:
        """Each sink switched off, by its name: why."""
        return {self._sinks[i].name: why for i, why in self._off.items()}

    def log(self, step: Optional[int] = None) -> None:
        """Queues a log of the session's numbers now, at ``step`` (default:
        the steps the session completed). Returns at once; never raises."""
        self._check_hung()
        if self._closed or os.getpid() != self._pid:
            return
        try:
            self._queue.put_nowait(step)
        except queue.Full:
            self.dropped += 1

    def close(self, step: Optional[int] = None) -> None:
        """The final log at ``step`` (default: the steps the session
        completed; nothing when that step was logged already), the
        artifacts, and each sink flushed and closed: waits at most
        ``timeout_s``. Idempotent; run at exit by itself."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        _live.discard(self)
        if os.getpid() != self._pid:
            return
        try:
            self._queue.put(("close", step), timeout=self._timeout)
        except queue.Full:
            pass
        self._thread.join(self._timeout)
        if self._thread.is_alive():
            self._check_hung(force=True)
        self._session = None

    def __enter__(self) -> "TrackerLog":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        names = ", ".join(s.name for s in self._sinks)
        state = "closed" if self._closed else (f"every {self._every} steps" if self._every else "on log()")
        return f"<gpuscope.TrackerLog to {names}, {state}, {self.sends} sent>"

    # The thread's side.

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self._poll)
            except queue.Empty:
                item = None
                if self._next_at is None:
                    continue
            if isinstance(item, tuple):
                self._final(item[1])
                return
            session = self._session
            if session is None:
                return
            summary = session.summary()
            if item is None:  # a poll: log when the step count passed the next multiple
                if self._next_at is None or summary.total_steps < self._next_at:
                    continue
                self._next_at = (summary.total_steps // self._every + 1) * self._every
                step = summary.total_steps
            else:
                step = int(item)
            self._send(step, summary)

    def _send(self, step: int, summary: Any) -> None:
        values = scalars(summary)
        if not values:
            return
        if step == self._logged_step:
            return
        findings = _gpuscope.diagnose(summary)
        changed = [f for f in findings if self._seen.get(f.id) != f.severity]
        new_high = [f for f in changed if f.severity == "high"]
        ok = self._each(lambda sink: sink.scalars(step, values))
        if changed:
            rows = findings_rows(findings)
            self._each(lambda sink: sink.findings(step, rows))
            self._seen = {f.id: f.severity for f in findings}
        if self._alerts:
            for f in new_high:
                text = f"{f.title}\n\nWhat to do: {f.recommendation}"
                self._each(lambda sink, f=f, text=text: sink.alert(f"gpuscope: {f.id} (step {step})", text))
        self._logged_step = step
        if ok:
            self.sends += 1

    def _final(self, step: Optional[int]) -> None:
        session = self._session
        if session is None:
            return
        try:
            summary = session.summary()
        except Exception:  # noqa: BLE001 - a closed session: nothing more to send
            summary = None
        if summary is not None and summary.total_steps:
            self._send(summary.total_steps if step is None else step, summary)
            if self._artifacts and any(i not in self._off for i in range(len(self._sinks))):
                with tempfile.TemporaryDirectory(prefix="gpuscope-artifacts-") as tmp:
                    files = _write_artifacts(session, tmp)
                    if files:
                        self._each(lambda sink: sink.artifacts(files))
        self._each(lambda sink: sink.close())

    def _each(self, call: Any) -> bool:
        """``call(sink)`` for each sink still on; False when one failed."""
        ok = True
        for i, sink in enumerate(self._sinks):
            if i in self._off:
                continue
            self._busy_sink, self._busy_since = i, time.monotonic()
            try:
                call(sink)
            except Exception as e:  # noqa: BLE001 - a tracker's error never reaches the loop
                self._turn_off(i, f"{type(e).__name__}: {str(e)[:300]}")
                ok = False
            finally:
                self._busy_since = None
            if i in self._off:
                ok = False
        return ok

    def _turn_off(self, i: int, why: str) -> None:
        if i in self._off:
            return
        self._off[i] = why
        _gpuscope._log_once(f"trackers:{id(self)}:{i}",
                            f"logging to {self._sinks[i].name} failed ({why}); gpuscope stops logging to it "
                            "for the rest of the run")

    def _check_hung(self, force: bool = False) -> None:
        since, i = self._busy_since, self._busy_sink
        if since is None or i is None:
            return
        waited = time.monotonic() - since
        if force or waited > self._timeout:
            self._turn_off(i, f"its call has not returned after {waited:.1f} s")


def _write_artifacts(session: Any, directory: str) -> Dict[str, str]:
    """The report and the trace, written under ``directory``: name -> path.
    Each is left out when it cannot be written (the HTML report without
    matplotlib)."""
    out: Dict[str, str] = {}
    for name, write in (("report.html", session.save_html), ("trace.json", session.save_trace),
                        ("run.json", session.save)):
        path = os.path.join(directory, name)
        try:
            write(path)
        except Exception:  # noqa: BLE001 - an artifact left out, not an error
            continue
        out[name] = path
    return out


_live: "weakref.WeakSet[TrackerLog]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    for log in list(_live):
        log.close()

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
* **Where it runs**: on a daemon thread per tracker, never on the
  recording thread and never per scope. ``log()`` from the training loop
  only queues a request (a backlog is sent as one log, of the numbers
  then); with ``every=N`` the thread itself looks at the session's step
  count twice a second and logs each time it passes a multiple of N.
* **Safety**: a tracker that raises is said once on stderr and switched off
  for the rest of the run; one whose call has not returned after
  ``timeout_s`` is said once and switched off too (its call is left behind
  on its thread: Python cannot stop it, and the other trackers go on);
  neither ever reaches the training loop, and the exit waits at most
  ``timeout_s`` for the final logs.

Each tracker's package is imported only when its adapter is used.
"""

from __future__ import annotations

import atexit
import operator
import os
import queue
import re
import tempfile
import threading
import time
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
# Per-kernel families: a name per demangled kernel (long, full of what no
# tracker takes in a metric name) and a chart each; the report and the trace
# artifact have them.
_SKIPPED_LABELS = ("kernel",)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\- ]")


def _component(text: str) -> str:
    """A label value as one part of a metric name every tracker takes
    (MLflow's: letters, digits, ``_ - . /`` and spaces; the ``/`` is the
    separator): anything else becomes ``_``."""
    out = _UNSAFE.sub("_", text).strip() or "_"
    return "_" + out if out in (".", "..") else out


def _quantile_name(q: str) -> str:
    return "p" + format(float(q) * 100, "g")


def scalars(summary: Any) -> Dict[str, float]:
    """The scalars a tracker gets for ``summary``: every sample of the C++
    Prometheus exposition (``prometheus_text``), less gpuscope's own
    bookkeeping and the per-rank and per-kernel families, named
    ``gpuscope/<family without gpuscope_>`` followed by the sample's label
    values (``quantile="0.95"`` as ``p95``; other characters than letters,
    digits, ``_ - .`` and spaces as ``_``):
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
            if value != value or any(k in labels for k in _SKIPPED_LABELS):  # NaN: not measured
                continue
            parts = [base]
            for key, text in labels.items():
                if key in _DROPPED_LABELS or key == "rank":
                    continue
                parts.append(_quantile_name(text) if key == "quantile" else _component(text))
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


def loop_step(summary: Any) -> int:
    """The loop's own step count: the steps completed, warm-up included."""
    return int(summary.total_steps + summary.warmup.steps)


class TrackerLog:
    """What ``Session.log_to()`` returns: the session's numbers sent to each
    sink from a daemon thread of the sink's own, so that one tracker that
    hangs holds up no other (see the module comment). ``log(step)`` queues a
    log now; ``close()`` sends the final numbers, the findings and the
    artifacts, and is run at interpreter exit by itself.

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
        self._every = every
        self._timeout = float(timeout_s)
        self._pid = os.getpid()
        self._closed = False
        self._lock = threading.Lock()
        self._lanes = [_Lane(self, session, sink, every=every, alerts=bool(alerts), artifacts=bool(artifacts),
                             timeout_s=self._timeout, poll_s=float(poll_s)) for sink in sinks]
        # Closed before the exit hooks registered earlier (a wandb run's, an
        # MLflow run's): atexit runs the newest first.
        atexit.register(self.close)

    @property
    def sends(self) -> int:
        """The logs sent, by the sink still on that sent the fewest."""
        on = [lane.sends for lane in self._lanes if lane.off is None]
        return min(on) if on else 0

    @property
    def dropped(self) -> int:
        """Log requests left out because the queue was full."""
        return sum(lane.dropped for lane in self._lanes)

    @property
    def errors(self) -> Dict[str, str]:
        """Each sink switched off, by its name: why."""
        return {lane.sink.name: lane.off for lane in self._lanes if lane.off is not None}

    def log(self, step: Optional[int] = None) -> None:
        """Queues a log of the session's numbers now, at ``step`` (default:
        the loop's step count, warm-up included). Returns at once; never
        raises (a step that is not an int is left out)."""
        if self._closed or os.getpid() != self._pid:
            return
        if step is not None:
            try:
                step = operator.index(step)
            except TypeError:
                return
        for lane in self._lanes:
            lane.check_hung()
            lane.request(step)

    def close(self, step: Optional[int] = None) -> None:
        """The final log at ``step`` (default: the loop's step count;
        nothing when that step was logged already), the artifacts, and each
        sink flushed and closed, every sink at once: waits at most
        ``timeout_s`` in all. Idempotent; run at exit by itself."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        atexit.unregister(self.close)
        if os.getpid() != self._pid:
            return
        deadline = time.monotonic() + self._timeout
        for lane in self._lanes:
            lane.finish(step)
        for lane in self._lanes:
            lane.join(deadline)

    def __enter__(self) -> "TrackerLog":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        names = ", ".join(lane.sink.name for lane in self._lanes)
        state = "closed" if self._closed else (f"every {self._every} steps" if self._every else "on log()")
        return f"<gpuscope.TrackerLog to {names}, {state}, {self.sends} sent>"


class _Lane:
    """One sink and its thread: requests in a bounded queue, taken newest
    first (a backlog is one log, of the numbers then), each sink call timed
    so that a call that does not return can be named."""

    def __init__(self, owner: TrackerLog, session: Any, sink: Sink, *, every: int, alerts: bool,
                 artifacts: bool, timeout_s: float, poll_s: float) -> None:
        self.sink = sink
        self._session: Any = session
        self._every = every
        self._alerts = alerts
        self._artifacts = artifacts
        self._timeout = timeout_s
        self._poll = poll_s
        self._owner_id = id(owner)
        self._queue: "queue.Queue[Any]" = queue.Queue(maxsize=64)
        self._finish = threading.Event()
        self._final_step: Optional[int] = None
        self._busy: Optional[float] = None  # when the sink call now running began
        self._off_lock = threading.Lock()
        self.off: Optional[str] = None  # why the sink is off
        self._seen: Dict[str, str] = {}  # finding id -> severity last logged
        self._logged_step = -1
        self._next_at = every if every else None
        self.sends = 0
        self.dropped = 0
        self._thread = threading.Thread(target=self._run, name=f"gpuscope-{sink.name}", daemon=True)
        self._thread.start()

    def request(self, step: Optional[int]) -> None:
        try:
            self._queue.put_nowait(("log", step))
        except queue.Full:
            self.dropped += 1

    def finish(self, step: Optional[int]) -> None:
        self._final_step = step
        self._finish.set()
        try:
            self._queue.put_nowait(("close", step))  # wakes the thread; the event says it anyway
        except queue.Full:
            pass

    def join(self, deadline: float) -> None:
        if self._thread is threading.current_thread():
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self.check_hung(force=True)
        else:
            self._session = None

    def check_hung(self, force: bool = False) -> None:
        since = self._busy
        if since is None:
            return
        waited = time.monotonic() - since
        if force or waited > self._timeout:
            self.turn_off(f"its call has not returned after {waited:.1f} s")

    def turn_off(self, why: str) -> None:
        with self._off_lock:
            if self.off is not None:
                return
            self.off = why
        _gpuscope._log_once(f"trackers:{self._owner_id}:{id(self)}",
                            f"logging to {self.sink.name} failed ({why}); gpuscope stops logging to it "
                            "for the rest of the run")

    # The thread's side.

    def _next(self) -> Any:
        """The next request, the newest of those queued; None on a poll."""
        try:
            item = self._queue.get(timeout=self._poll)
        except queue.Empty:
            return None
        while item[0] != "close":
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        return item

    def _run(self) -> None:
        while not self._finish.is_set():
            item = self._next()
            if self._finish.is_set() or self.off is not None:
                break
            if item is None and self._next_at is None:
                continue
            try:
                self._once(item)
            except Exception as e:  # noqa: BLE001 - never raise, never die silently
                self.turn_off(f"{type(e).__name__}: {str(e)[:300]}")
        try:
            if self.off is None:
                self._final()
        except Exception as e:  # noqa: BLE001
            self.turn_off(f"{type(e).__name__}: {str(e)[:300]}")
        finally:
            try:  # also for a sink switched off: it may own a file to close
                self.sink.close()
            except Exception:  # noqa: BLE001
                pass

    def _once(self, item: Any) -> None:
        session = self._session
        if session is None:
            return
        summary = session.summary()
        count = loop_step(summary)
        if item is None:  # a poll: log when the count passed the next multiple
            assert self._next_at is not None
            if count < self._next_at - self._every:  # the session was reset
                self._next_at = (count // self._every + 1) * self._every
            if count < self._next_at:
                return
            self._next_at = (count // self._every + 1) * self._every
            step = count
        else:
            step = count if item[1] is None else item[1]
        self._send(step, summary)

    def _send(self, step: int, summary: Any) -> None:
        if step == self._logged_step:
            return
        values = scalars(summary)
        if not values:
            return
        findings = _gpuscope.diagnose(summary)
        changed = [f for f in findings if self._seen.get(f.id) != f.severity]
        ok = self._call(lambda: self.sink.scalars(step, values))
        if changed:
            rows = findings_rows(findings)
            ok = self._call(lambda: self.sink.findings(step, rows)) and ok
            if self._alerts:
                for f in changed:
                    if f.severity == "high" and self._seen.get(f.id) != "high":
                        text = f"{f.title}\n\nWhat to do: {f.recommendation}"
                        ok = self._call(lambda f=f, text=text: self.sink.alert(
                            f"gpuscope: {f.id} (step {step})", text)) and ok
            self._seen = {f.id: f.severity for f in findings}
        self._logged_step = step
        if ok:
            self.sends += 1

    def _final(self) -> None:
        session = self._session
        if session is None:
            return
        summary = session.summary()
        if not loop_step(summary):
            return
        step = self._final_step
        self._send(loop_step(summary) if step is None else step, summary)
        if self._artifacts and self.off is None:
            with tempfile.TemporaryDirectory(prefix="gpuscope-artifacts-") as tmp:
                files = _write_artifacts(session, tmp)
                if files:
                    self._call(lambda: self.sink.artifacts(files))

    def _call(self, call: Any) -> bool:
        """``call()`` on the sink, timed; False (and the sink off) when it
        raised."""
        if self.off is not None:
            return False
        self._busy = time.monotonic()
        try:
            call()
        except Exception as e:  # noqa: BLE001 - a tracker's error never reaches the loop
            self.turn_off(f"{type(e).__name__}: {str(e)[:300]}")
            return False
        finally:
            self._busy = None
        return self.off is None


def _write_artifacts(session: Any, directory: str) -> Dict[str, str]:
    """The report, the trace and the run file, written under ``directory``
    (a distributed job's rank in their names, as the session names them):
    name -> path. Each is left out when it cannot be written (the HTML
    report without matplotlib)."""
    out: Dict[str, str] = {}
    for name, write in (("report.html", session.save_html), ("trace.json", session.save_trace),
                        ("run.json", session.save)):
        try:
            written = write(os.path.join(directory, name))
        except Exception:  # noqa: BLE001 - an artifact left out, not an error
            continue
        out[name] = os.fspath(written)
    return out

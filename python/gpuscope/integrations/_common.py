"""What the framework callbacks share: a session recorded through the
zero-code runner's hooks, its numbers logged to the trackers the framework
was configured with (gpuscope.trackers), and the files at the end."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, List, Optional


class Recorder:
    """Owns (or borrows) a session and the hooks that record into it, from
    ``start()`` to ``end()``."""

    def __init__(self, session: Any = None, out_dir: Optional[str] = None,
                 report: bool = True, alerts: bool = False, artifacts: bool = True) -> None:
        self.session = session
        self.out_dir = out_dir
        self.report = report
        self.alerts = alerts
        self.artifacts = artifacts
        self.trackers: Any = None  # the TrackerLog, once there are sinks
        self._auto: Any = None

    def start(self) -> None:
        import gpuscope as gs
        from gpuscope._auto import AutoInstrument

        if self.session is None:
            self.session = gs.Session()
        if self._auto is None:
            self._auto = AutoInstrument(self.session)
            self._auto.install()

    def log_to(self, sinks: List[Any]) -> None:
        """Logs to ``sinks`` at the steps ``log_step()`` is given (never on a
        poll of its own: the framework's logging step is the step)."""
        if sinks and self.trackers is None:
            from gpuscope.trackers import TrackerLog

            self.trackers = TrackerLog(self.session, sinks, every=0, alerts=self.alerts,
                                       artifacts=self.artifacts)

    def log_step(self, step: int) -> None:
        """Queues a log at ``step``; returns at once."""
        if self.trackers is not None:
            self.trackers.log(step)

    def metrics(self) -> Dict[str, float]:
        """The trackers' scalars now (``gpuscope.trackers.scalars``); empty
        before the first step."""
        from gpuscope.trackers import scalars

        return scalars(self.session.summary())

    def end(self, default_dir: str, main_process: bool = True, step: Optional[int] = None) -> None:
        """Stops the hooks; sends the trackers the final numbers at ``step``
        and the artifacts (waiting at most their timeout); then writes
        run.json, trace.json and (with matplotlib) report.html under
        ``out_dir`` (default ``default_dir``), one set per rank, and the
        report to stderr on the main process. Never raises: the end of
        training must not fail for it."""
        if self._auto is not None:
            self._auto.finish()
            self._auto.uninstall()
            self._auto = None
        if self.trackers is not None:
            self.trackers.close(step)
            self.trackers = None
        if self.session is None:
            return
        try:
            out = self.out_dir or default_dir
            os.makedirs(out, exist_ok=True)
            self.session.save(os.path.join(out, "run.json"))
            self.session.save_trace(os.path.join(out, "trace.json"))
            try:
                self.session.save_html(os.path.join(out, "report.html"))
            except ImportError:
                pass
            if self.report and main_process:
                print(self.session.report(), file=sys.stderr)
        except Exception as e:  # noqa: BLE001
            print(f"gpuscope: could not write the outputs ({type(e).__name__}: {str(e)[:200]})",
                  file=sys.stderr)

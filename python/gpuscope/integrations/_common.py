"""What the framework callbacks share: a session recorded through the
zero-code runner's hooks, the headline numbers, and the files at the end."""

from __future__ import annotations

import os
import sys
from typing import Any, Dict, Optional


class Recorder:
    """Owns (or borrows) a session and the hooks that record into it, from
    ``start()`` to ``end()``."""

    def __init__(self, session: Any = None, out_dir: Optional[str] = None,
                 report: bool = True) -> None:
        self.session = session
        self.out_dir = out_dir
        self.report = report
        self._auto: Any = None

    def start(self) -> None:
        import gpuscope as gs
        from gpuscope._auto import AutoInstrument

        if self.session is None:
            self.session = gs.Session()
        if self._auto is None:
            self._auto = AutoInstrument(self.session)
            self._auto.install()

    def metrics(self) -> Dict[str, float]:
        """The headline numbers, named ``gpuscope/...``: step time p50 and
        p95 (ms), the largest phases' shares (%), GPU idle (%) when measured;
        empty before the first step."""
        sm = self.session.summary()
        if sm.steps == 0:
            return {}
        out = {"gpuscope/step_p50_ms": sm.step_time.p50 * 1e3,
               "gpuscope/step_p95_ms": sm.step_time.p95 * 1e3}
        for name in ("data", "forward", "backward", "optimizer"):
            p = sm.phases.get(name)
            if p is not None:
                out[f"gpuscope/{name}_pct"] = 100 * p.share
        if sm.gpu_idle_pct is not None:
            out["gpuscope/gpu_idle_pct"] = sm.gpu_idle_pct
        return out

    def end(self, default_dir: str, main_process: bool = True) -> None:
        """Stops the hooks, then writes run.json, trace.json and (with
        matplotlib) report.html under ``out_dir`` (default ``default_dir``),
        one set per rank, and the report to stderr on the main process.
        Never raises: the end of training must not fail for it."""
        if self._auto is not None:
            self._auto.finish()
            self._auto.uninstall()
            self._auto = None
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

"""gpuscope for a fleet's Prometheus: the alerting and recording rules and the
Grafana dashboard, over the ``gpuscope_*`` series every instrumented job
exposes (docs/fleet.md).

* ``rules(...)``: a Prometheus rule file (YAML). ``alerts.yml`` beside this
  module is ``rules()`` with the defaults, as shipped; ``gpuscope prometheus
  rules`` prints it, with other thresholds or with recording rules for saved
  baselines (``--baseline run.json``).
* ``dashboard()``: a Grafana dashboard (JSON model) whose panels query those
  series and the recording rules; ``gpuscope prometheus dashboard``.

Every expression here is checked by ``promtool check rules``, unit-tested by
``promtool test rules`` (tests/prometheus/) and evaluated against a real
Prometheus scraping a live loop (tests/python/test_fleet_prometheus.py).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, fields
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["Thresholds", "Baseline", "rules", "dashboard", "panel_queries", "ALERTS"]

_DURATION = re.compile(r"(\d+(ms|s|m|h|d|w|y))+")


@dataclass(frozen=True)
class Thresholds:
    """The alerts' thresholds and how long each must hold (Prometheus
    durations: ``90s``, ``10m``, ``3h``)."""

    idle_ratio: float = 0.5          # GPU idle share of step time
    idle_for: str = "10m"
    hung_after: str = "10m"          # no step completed, or one open, this long
    regression_ratio: float = 1.25   # p95 step time over its own earlier level
    regression_history: str = "3h"   # ... averaged over this long
    regression_offset: str = "1h"    # ... ending this long ago
    regression_for: str = "15m"
    baseline_ratio: float = 1.10     # p95 step time over a saved baseline's
    straggler_ratio: float = 1.2     # a rank's phase time over the others' median
    sm_clock_ratio: float = 0.8      # the slowest GPU's SM clock over its maximum
    throttled_ratio: float = 0.2     # share of steps power- or thermal-capped
    gpu_for: str = "10m"             # straggler, throttling, link, memory alerts
    dropped_window: str = "10m"      # records dropped within this long

    def check(self) -> None:
        """ValueError naming the first threshold that is not one."""
        for f in fields(self):
            v = getattr(self, f.name)
            if isinstance(v, str):
                if not _DURATION.fullmatch(v):
                    raise ValueError(f"{f.name}: {v!r} is not a Prometheus duration (90s, 10m, 3h)")
            elif isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
                raise ValueError(f"{f.name}: {v!r} is not a positive number")
        if self.idle_ratio >= 1 or self.sm_clock_ratio >= 1 or self.throttled_ratio >= 1:
            raise ValueError("idle_ratio, sm_clock_ratio and throttled_ratio are shares below 1")


@dataclass(frozen=True)
class Baseline:
    """A saved run's p95 step time, for jobs whose run_id matches ``runs`` (a
    PromQL regex). ``name`` labels its recording rule."""

    name: str
    p95_seconds: float
    runs: str = ".+"

    @staticmethod
    def from_file(path: str, runs: str = ".+", name: Optional[str] = None) -> "Baseline":
        """From a saved run (``s.save()``, ``gpuscope run --save``)."""
        from .._baseline import load_run

        summary, _ = load_run(path)
        if summary.steps == 0:
            raise ValueError(f"{path}: the saved run has no steps, so no p95 step time to compare with")
        base = name or re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(path).rsplit(".", 1)[0])
        return Baseline(base, float(summary.step_time.p95), runs)


def _q(text: str) -> str:
    """A YAML double-quoted scalar."""
    return json.dumps(text)


def _block(text: str, indent: int) -> str:
    """A YAML literal block scalar (``|-``) at ``indent`` spaces."""
    pad = " " * indent
    return "|-\n" + "\n".join(pad + line for line in text.strip().splitlines())


# The recording rules: what the dashboard's fleet panels and the regression
# alerts read, computed once per evaluation instead of per panel refresh.
RECORDING: List[Tuple[str, str, str]] = [
    ("gpuscope:step_time_p95_seconds:max_by_run",
     'max by (run_id) (gpuscope_step_time_seconds{quantile="0.95"})',
     "the slowest rank's p95 step time, per job"),
    ("gpuscope:gpu_idle_ratio:avg_by_run", "avg by (run_id) (gpuscope_gpu_idle_ratio)",
     "GPU idle share of step time, averaged over the job's ranks"),
    ("gpuscope:gpus:count_by_run", "count by (run_id) (gpuscope_info)",
     "processes (one GPU each) reporting, per job"),
    ("gpuscope:finding_lost_gpus:sum_by_run",
     "sum by (run_id, id) (gpuscope_finding_share_ratio > 0)",
     "GPUs' worth of step time each finding explains, per job (integrate for GPU-hours)"),
    ("gpuscope:steps_per_second:rate5m_by_run", "sum by (run_id) (rate(gpuscope_steps_total[5m]))",
     "steps per second, summed over the job's ranks"),
]

# name -> (expression, for, severity, summary, description): each alert's
# PromQL with {placeholders} from Thresholds.
ALERTS: Dict[str, Tuple[str, str, str, str, str]] = {
    "GpuscopeGpuIdle": (
        "gpuscope_gpu_idle_ratio > {idle_ratio}", "{idle_for}", "warning",
        "GPU idle {{{{ $value | humanizePercentage }}}} of step time on {{{{ $labels.host }}}} "
        "(run {{{{ $labels.run_id }}}})",
        "The GPU waited more than {idle_ratio_pct} of every step for {idle_for}. "
        "gpuscope_gpu_idle_by_cause_ratio and gpuscope_finding_share_ratio say where the time goes."),
    "GpuscopeJobHung": (
        "gpuscope_step_in_progress_seconds > {hung_after_s}\n"
        "or (increase(gpuscope_steps_total[{hung_after}]) == 0 and gpuscope_steps_total > 0\n"
        "    and gpuscope_steps_total offset {hung_after})",
        "0m", "critical",
        "No step completed for {hung_after} on {{{{ $labels.host }}}} (run {{{{ $labels.run_id }}}})",
        "A step has been open for more than {hung_after}, or none ended in the last {hung_after} "
        "(after the first). "
        "The job's log (gpuscope's stall message) names the phase and the Python stack."),
    "GpuscopeStalled": (
        "gpuscope_stalled == 1", "1m", "warning",
        "A step is open past its stall limit on {{{{ $labels.host }}}} (run {{{{ $labels.run_id }}}})",
        "gpuscope's stall watch found a step (or a phase outside steps) open far longer than the "
        "job's steps take; the log names where it waits."),
    "GpuscopeStepTimeRegression": (
        "gpuscope:step_time_p95_seconds:max_by_run\n"
        "> {regression_ratio} * avg_over_time(gpuscope:step_time_p95_seconds:max_by_run[{regression_history}] "
        "offset {regression_offset})",
        "{regression_for}", "warning",
        "p95 step time of run {{{{ $labels.run_id }}}} up to {{{{ $value | humanizeDuration }}}}",
        "The slowest rank's p95 step time is more than {regression_ratio}x its average over "
        "{regression_history} ending {regression_offset} ago."),
    "GpuscopeStraggler": (
        "max by (run_id, straggler_rank, phase) (gpuscope_straggler_slowdown_ratio) > {straggler_ratio}",
        "{gpu_for}", "warning",
        "Rank {{{{ $labels.straggler_rank }}}} straggles in {{{{ $labels.phase }}}} "
        "(run {{{{ $labels.run_id }}}}, {{{{ $value | humanize }}}}x the others)",
        "One rank takes more than {straggler_ratio}x the other ranks' median in a phase; every "
        "rank waits for it at the next collective."),
    "GpuscopeGpuThrottled": (
        "gpuscope_sm_clock_ratio < {sm_clock_ratio} or gpuscope_throttled_steps_ratio > {throttled_ratio}",
        "{gpu_for}", "warning",
        "GPU clocks capped on {{{{ $labels.host }}}} (run {{{{ $labels.run_id }}}})",
        "The slowest GPU's SM clock is below {sm_clock_ratio} of its maximum, or more than "
        "{throttled_ratio_pct} of steps were power- or thermal-capped."),
    "GpuscopePcieLinkDegraded": (
        'max by (run_id, host, rank, gpu) (gpuscope_finding_share_ratio{{id="pcie-link"}}) >= 0',
        "{gpu_for}", "warning",
        "A GPU's PCIe link runs below its maximum on {{{{ $labels.host }}}}",
        "gpuscope's pcie-link finding: the link trained at a lower generation or width than the "
        "GPU and slot support (gpuscope doctor says which)."),
    "GpuscopeRecordsDropped": (
        'increase(gpuscope_misuse_total{{kind="dropped_records"}}[{dropped_window}]) > 0', "0m", "warning",
        "gpuscope dropped records on {{{{ $labels.host }}}} (run {{{{ $labels.run_id }}}})",
        "The recording queue was full: some scopes were not measured. Raise Session(queue_capacity=...)."),
    "GpuscopeMemoryThrash": (
        "gpuscope_memory_alloc_retries > 0\n"
        'or max by (run_id, host, rank, gpu) (gpuscope_finding_share_ratio{{id=~"memory-thrash|oom"}}) >= 0',
        "{gpu_for}", "warning",
        "The allocator is freeing its cache and retrying on {{{{ $labels.host }}}} (run {{{{ $labels.run_id }}}})",
        "Allocation retries (cudaMalloc after freeing the cache) every window: each costs a "
        "synchronization. Lower the batch or set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True."),
}

_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def _seconds(duration: str) -> float:
    return sum(float(n) * _SECONDS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", duration))


def _values(t: Thresholds) -> Dict[str, Any]:
    v: Dict[str, Any] = {f.name: getattr(t, f.name) for f in fields(t)}
    v["hung_after_s"] = f"{_seconds(t.hung_after):g}"
    v["idle_ratio_pct"] = f"{t.idle_ratio:.0%}"
    v["throttled_ratio_pct"] = f"{t.throttled_ratio:.0%}"
    return v


def rules(thresholds: Optional[Thresholds] = None, baselines: Sequence[Baseline] = ()) -> str:
    """The rule file: group ``gpuscope-recording`` (the recording rules),
    ``gpuscope-alerts`` and, with ``baselines``, ``gpuscope-baselines`` (each a
    recording rule of the baseline's p95 and an alert for the runs it
    covers)."""
    t = thresholds or Thresholds()
    t.check()
    v = _values(t)
    out = ["# gpuscope's Prometheus rules (docs/fleet.md): generated by `gpuscope prometheus rules`.",
           "groups:", "  - name: gpuscope-recording", "    rules:"]
    for record, expr, help_text in RECORDING:
        out += [f"      # {help_text}", f"      - record: {record}", f"        expr: {_block(expr, 10)}"]
    out += ["  - name: gpuscope-alerts", "    rules:"]
    for name, (expr, for_, severity, summary, description) in ALERTS.items():
        out += [f"      - alert: {name}", f"        expr: {_block(expr.format(**v), 10)}",
                f"        for: {for_.format(**v)}", "        labels:", f"          severity: {severity}",
                "        annotations:", f"          summary: {_q(summary.format(**v))}",
                f"          description: {_q(description.format(**v))}"]
    if baselines:
        out += ["  - name: gpuscope-baselines", "    rules:"]
        for b in baselines:
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", b.name):
                raise ValueError(f"baseline name {b.name!r}: letters, digits, '_', '.' and '-' only")
            if not 0 < b.p95_seconds < float("inf"):
                raise ValueError(f"baseline {b.name}: p95 {b.p95_seconds!r} is not a positive time")
            out += ["      - record: gpuscope:baseline_step_time_p95_seconds",
                    f"        expr: vector({b.p95_seconds!r})", "        labels:",
                    f"          baseline: {_q(b.name)}",
                    "      - alert: GpuscopeStepTimeAboveBaseline",
                    "        expr: " + _block(
                        f'gpuscope:step_time_p95_seconds:max_by_run{{run_id=~{_q(b.runs)}}}\n'
                        f'> on() group_left() {t.baseline_ratio!r} * '
                        f'gpuscope:baseline_step_time_p95_seconds{{baseline={_q(b.name)}}}', 10),
                    f"        for: {t.regression_for}", "        labels:", "          severity: warning",
                    f"          baseline: {_q(b.name)}", "        annotations:",
                    "          summary: " + _q(f"p95 step time of run {{{{ $labels.run_id }}}} "
                                              f"{{{{ $value | humanizeDuration }}}}, over {t.baseline_ratio!r}x "
                                              f"baseline {b.name}'s {b.p95_seconds:.4g} s"),
                    "          description: " + _q(f"The slowest rank's p95 step time is more than "
                                                  f"{t.baseline_ratio!r}x the saved baseline {b.name}'s. "
                                                  f"gpuscope compare says which phase grew.")]
    return "\n".join(out) + "\n"


def shipped_rules_path() -> str:
    """Where ``alerts.yml`` (``rules()`` with the defaults) is installed."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "alerts.yml")


from ._dashboard import dashboard, panel_queries  # noqa: E402 - after the rules it reads

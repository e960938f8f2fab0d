"""The Grafana dashboard (``gpuscope prometheus dashboard``): three rows over
the ``gpuscope_*`` series and the recording rules of ``rules()``.

* Fleet: jobs by GPU idle, the worst p95 step times, GPU-hours lost by
  finding over the dashboard's range, GPUs reporting.
* Job (``$run_id``): step time quantiles, phase shares stacked, GPU idle by
  cause, ranks side by side, throughput and steps per second, findings,
  telemetry.
* Rank (``$rank`` of ``$run_id``): its phases' time, GPU idle, CPU.

Queries use only Grafana's ``$run_id``, ``$rank``, ``$__range``,
``$__interval`` and ``$__interval_ms`` variables, which
``panel_queries(substitute=...)`` replaces for evaluating them outside
Grafana. GPU-hours lost integrate the GPUs' worth of time each finding
explains over the range, one ``$__interval`` at a time.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

# (title, kind, unit, [(expr, legend)], needs): kind is Grafana's panel type;
# needs names what the series need beyond a CPU loop with a GPU source
# ("nvml": NVML telemetry, "ranks": a distributed job), so a test on a
# machine without it knows which may be empty.
Panel = Tuple[str, str, str, List[Tuple[str, str]], Tuple[str, ...]]

_JOB = 'run_id="$run_id"'
_RANK = 'run_id="$run_id", rank=~"$rank"'

ROWS: List[Tuple[str, List[Panel]]] = [
    ("Fleet", [
        ("Jobs by GPU idle", "bargauge", "percentunit",
         [("sort_desc(gpuscope:gpu_idle_ratio:avg_by_run)", "{{run_id}}")], ()),
        ("Worst p95 step time", "bargauge", "s",
         [("topk(10, gpuscope:step_time_p95_seconds:max_by_run)", "{{run_id}}")], ()),
        ("GPU-hours lost by finding (dashboard range)", "bargauge", "h",
         [("topk(10, sum by (id) (sum_over_time(gpuscope:finding_lost_gpus:sum_by_run[$__range:$__interval]))"
           " * $__interval_ms / 3600000)", "{{id}}")], ()),
        ("GPUs reporting", "stat", "short", [("sum(gpuscope:gpus:count_by_run)", "GPUs")], ()),
    ]),
    ("Job $run_id", [
        ("Step time", "timeseries", "s",
         [(f'max by (quantile) (gpuscope_step_time_seconds{{{_JOB}}})', "p{{quantile}}")], ()),
        ("Phase shares of step time", "timeseries", "percentunit",
         [(f"avg by (phase) (gpuscope_phase_share_ratio{{{_JOB}}})", "{{phase}}")], ()),
        ("GPU idle by cause", "timeseries", "percentunit",
         [(f"avg by (cause) (gpuscope_gpu_idle_by_cause_ratio{{{_JOB}}})", "{{cause}}"),
          (f"avg(gpuscope_gpu_idle_ratio{{{_JOB}}})", "idle")], ()),
        ("p95 step time by rank", "timeseries", "s",
         [(f'gpuscope_step_time_seconds{{{_JOB}, quantile="0.95"}}', "rank {{rank}}")], ()),
        ("Stragglers", "timeseries", "short",
         [(f"gpuscope_straggler_slowdown_ratio{{{_JOB}}}", "rank {{straggler_rank}} {{phase}}")], ("ranks",)),
        ("Throughput", "timeseries", "short",
         [(f"sum(gpuscope_throughput_samples_per_second{{{_JOB}}})", "samples/s"),
          (f"gpuscope:steps_per_second:rate5m_by_run{{{_JOB}}}", "steps/s")], ()),
        ("Findings (share of step time)", "table", "percentunit",
         [(f"max by (id, severity) (gpuscope_finding_share_ratio{{{_JOB}}})", "{{id}}")], ()),
        ("GPU telemetry", "timeseries", "percentunit",
         [(f"min(gpuscope_sm_clock_ratio{{{_JOB}}})", "SM clock / max"),
          (f"max(gpuscope_throttled_steps_ratio{{{_JOB}}})", "steps throttled"),
          (f"avg(gpuscope_nvidia_smi_utilization_ratio{{{_JOB}}})", "nvidia-smi utilization")], ("nvml",)),
        ("Host", "timeseries", "short",
         [(f"avg(gpuscope_host_cpu_ratio{{{_JOB}}})", "host CPU busy"),
          (f"sum(gpuscope_process_cpu_cores{{{_JOB}}})", "training processes (cores)")], ()),
    ]),
    ("Rank $rank", [
        ("Phase time p50", "timeseries", "s",
         [(f'gpuscope_phase_time_seconds{{{_RANK}, quantile="0.5"}}', "{{phase}}")], ()),
        ("GPU idle", "timeseries", "percentunit",
         [(f"gpuscope_gpu_idle_ratio{{{_RANK}}}", "idle")], ()),
        ("Step open now", "timeseries", "s",
         [(f"gpuscope_step_in_progress_seconds{{{_RANK}}}", "open")], ()),
    ]),
]


def dashboard(title: str = "gpuscope", datasource_uid: Optional[str] = None) -> Dict[str, Any]:
    """The dashboard's JSON model, for Grafana's import (``Dashboards > New >
    Import``) or its provisioning. The Prometheus data source is a variable
    unless ``datasource_uid`` names one."""
    ds = {"type": "prometheus", "uid": datasource_uid or "${datasource}"}
    panels: List[Dict[str, Any]] = []
    y = 0
    next_id = 1
    for row_title, row in ROWS:
        panels.append({"id": next_id, "type": "row", "title": row_title, "collapsed": False,
                       "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
        next_id += 1
        y += 1
        for i, (panel_title, kind, unit, targets, _needs) in enumerate(row):
            panel: Dict[str, Any] = {
                "id": next_id, "type": kind, "title": panel_title, "datasource": ds,
                "gridPos": {"x": (i % 3) * 8, "y": y + (i // 3) * 8, "w": 8, "h": 8},
                "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                "targets": [{"refId": chr(ord("A") + k), "datasource": ds, "expr": expr,
                             "legendFormat": legend, "instant": kind in ("bargauge", "stat", "table")}
                            for k, (expr, legend) in enumerate(targets)],
            }
            if panel_title.startswith("Phase shares"):
                panel["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal"}, "fillOpacity": 60}
            panels.append(panel)
            next_id += 1
        y += ((len(row) + 2) // 3) * 8
    variables = [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
        {"name": "run_id", "type": "query", "datasource": ds, "label": "run",
         "query": {"query": "label_values(gpuscope_info, run_id)", "refId": "run_id"},
         "definition": "label_values(gpuscope_info, run_id)", "refresh": 2, "sort": 1},
        {"name": "rank", "type": "query", "datasource": ds, "label": "rank", "includeAll": True,
         "allValue": ".*", "multi": True,
         "query": {"query": 'label_values(gpuscope_info{run_id="$run_id"}, rank)', "refId": "rank"},
         "definition": 'label_values(gpuscope_info{run_id="$run_id"}, rank)', "refresh": 2, "sort": 3},
    ]
    if datasource_uid:
        variables = variables[1:]
    return {"title": title, "uid": "gpuscope", "tags": ["gpuscope", "training"], "editable": True,
            "schemaVersion": 39, "time": {"from": "now-6h", "to": "now"}, "refresh": "30s",
            "templating": {"list": variables}, "panels": panels,
            "description": "gpuscope: where training step time goes and why the GPU is idle."}


def panel_queries(substitute: Optional[Dict[str, str]] = None) -> List[Tuple[str, str, Tuple[str, ...]]]:
    """``(panel title, expr, needs)`` for every target of the dashboard, with
    Grafana's variables replaced by ``substitute`` (``{"$run_id": "job-1",
    "$rank": ".*", "$__range": "5m", "$__interval": "15s", "$__interval_ms":
    "15000"}``) where given."""
    out = []
    for _, row in ROWS:
        for title, _kind, _unit, targets, needs in row:
            for expr, _legend in targets:
                for var, value in sorted((substitute or {}).items(), key=lambda kv: -len(kv[0])):
                    expr = expr.replace(var, value)
                out.append((title, expr, needs))
    return out

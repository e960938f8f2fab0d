"""The HTML report: one self-contained file (no network, no scripts to load)
with the summary, the ranked findings and four plots drawn by matplotlib as
inline SVG: step time over steps with its p50 and p95, the phase breakdown
per step, GPU idle by cause, and telemetry. A window longer than
``MAX_POINTS`` steps is drawn in bins of consecutive steps, and phases past
the ``MAX_PHASES`` largest are stacked as one.

``Session.save_html(path)`` writes it (``write_html(path, summary, series)``
here, for a summary and step series from elsewhere).
"""

from __future__ import annotations

import html
import io
import os
from typing import Any, Dict, List, Optional, Sequence, Union

from ._summary import Finding, Summary, diagnose_summary

# Colours: matplotlib's tab10, in the order phases are usually listed.
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf"]
STEP_COLOR = "#1f77b4"
P50_COLOR = "#2ca02c"
P95_COLOR = "#d62728"
IDLE_COLOR = "#e377c2"
PHASE_COLORS = _PALETTE


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - exercised where matplotlib is missing
        raise ImportError(
            "gpuscope's HTML report draws its plots with matplotlib: pip install matplotlib"
        ) from e
    return plt


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    _pyplot().close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: inline in HTML


def _script_json(text: str) -> str:
    """JSON to embed in a <script> element: browsers do not decode entities
    there, and "</script" or "<!--" would change how the element is parsed.
    Every "<" becomes "\\u003c", which JSON reads as the same string."""
    return text.replace("<", "\\u003c")


def _label(name: str) -> str:
    """A phase name as a matplotlib label: "$" would start mathtext, and a
    leading "_" hides the entry from the legend."""
    name = name.replace("$", r"\$")
    return " " + name if name.startswith("_") else name


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


# Steps drawn one by one up to this many; a longer window is drawn in bins
# of consecutive steps (their mean, and for step time their min-max band),
# so that a 65,536-step window makes a plot as quick and small as 1,500.
MAX_POINTS = 1500
# Phases stacked by name; the rest of a window's phases are stacked as one.
MAX_PHASES = 9

Series = Union[Sequence[Dict[str, Any]], Dict[str, Any]]


def _columns(series: Series) -> Dict[str, Any]:
    """``Session.step_columns()``'s form from either form: a list of steps as
    ``step_series()`` gives them is turned into columns."""
    if isinstance(series, dict):
        return series
    nan = float("nan")
    phases = {name: [0.0] * len(series) for p in series for name in p["phases"]}
    for i, p in enumerate(series):
        for name, seconds in p["phases"].items():
            phases[name][i] = seconds
    cols: Dict[str, Any] = {"index": [p["index"] for p in series],
                            "duration": [p["duration"] for p in series], "phases": phases}
    for key, _, _, _ in _TELEMETRY_LINES:
        cols[key] = [nan if p.get(key) is None else p[key] for p in series]
    return cols


def _binned(values: Any, k: int, how: str = "mean") -> Any:
    """``values`` (numpy array) reduced over bins of ``k`` consecutive steps:
    mean (of the values measured, NaN for a bin with none), min or max."""
    import numpy as np

    n = len(values)
    starts = np.arange(0, n, k)
    if how == "min":
        return np.minimum.reduceat(values, starts)
    if how == "max":
        return np.maximum.reduceat(values, starts)
    measured = ~np.isnan(values)
    sums = np.add.reduceat(np.where(measured, values, 0.0), starts)
    counts = np.add.reduceat(measured.astype(np.int64), starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _bin_size(n: int) -> int:
    return max(1, -(-n // MAX_POINTS))


def _xs(cols: Dict[str, Any], k: int) -> Any:
    import numpy as np

    index = np.asarray(cols["index"], dtype=np.float64)
    return index if k == 1 else index[::k]


def _step_time_plot(summary: Summary, cols: Dict[str, Any]) -> str:
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    ms = np.asarray(cols["duration"], dtype=np.float64) * 1e3
    k = _bin_size(len(ms))
    xs = _xs(cols, k)
    if k == 1:
        ax.plot(xs, ms, color=STEP_COLOR, linewidth=1.2, label="step time")
    else:
        ax.fill_between(xs, _binned(ms, k, "min"), _binned(ms, k, "max"), color=STEP_COLOR,
                        alpha=0.25, linewidth=0, label=f"min to max of {k} steps")
        ax.plot(xs, _binned(ms, k), color=STEP_COLOR, linewidth=1.2,
                label=f"step time, mean of {k} steps")
    ax.axhline(summary.step_time.p50 * 1e3, color=P50_COLOR, linestyle="--", linewidth=1.2,
               label=f"p50 {summary.step_time.p50 * 1e3:.2f} ms")
    ax.axhline(summary.step_time.p95 * 1e3, color=P95_COLOR, linestyle="--", linewidth=1.2,
               label=f"p95 {summary.step_time.p95 * 1e3:.2f} ms")
    ax.set_xlabel("step")
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    return _svg(fig)


def _ordered_phases(summary: Summary, cols: Dict[str, Any]) -> List[str]:
    seen = set(cols["phases"])
    ordered = [name for name in summary.phases if name in seen and name != "other"]
    ordered += sorted(seen - set(ordered) - {"other"})
    return ordered + (["other"] if "other" in seen else [])


def _phase_plot(summary: Summary, cols: Dict[str, Any]) -> str:
    import numpy as np

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    names = _ordered_phases(summary, cols)
    named = [n for n in names if n != "other"]
    shown, rest = named[:MAX_PHASES], named[MAX_PHASES:]
    n = len(cols["index"])
    k = _bin_size(n)
    layers, labels, colors = [], [], []
    for i, name in enumerate(shown):
        layers.append(np.asarray(cols["phases"][name], dtype=np.float64))
        labels.append(_label(name))
        colors.append(_PALETTE[i % len(_PALETTE)])
    if rest:
        layers.append(np.sum([np.asarray(cols["phases"][r], dtype=np.float64) for r in rest], axis=0))
        labels.append(f"{len(rest)} more phases")
        colors.append("#8c8c8c")
    if "other" in cols["phases"]:
        layers.append(np.asarray(cols["phases"]["other"], dtype=np.float64))
        labels.append(_label("other"))
        colors.append("#c7c7c7")
    stacks = [(layer if k == 1 else _binned(layer, k)) * 1e3 for layer in layers]
    ax.stackplot(_xs(cols, k), stacks, labels=labels, colors=colors)
    ax.set_xlabel("step" if k == 1 else f"step (mean of {k} steps)")
    ax.set_ylabel("ms (host, top-level phases)")
    ax.set_ylim(bottom=0)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(alpha=0.3)
    return _svg(fig)


def _idle_plot(summary: Summary) -> Optional[str]:
    if summary.gpu_idle_pct is None or not summary.idle_by_cause:
        return None
    plt = _pyplot()
    causes = sorted(summary.idle_by_cause.items(), key=lambda kv: kv[1])
    fig, ax = plt.subplots(figsize=(9, 0.5 + 0.4 * len(causes)))
    ax.barh([_label(c) for c, _ in causes], [v for _, v in causes], color=IDLE_COLOR)
    for i, (_, v) in enumerate(causes):
        ax.text(v, i, f" {v:.1f}%", va="center", fontsize=8)
    ax.set_xlabel(f"% of step time the GPU was idle (total {summary.gpu_idle_pct:.1f}%, source "
                  f"{summary.source})")
    ax.set_xlim(0, max(5.0, max(v for _, v in causes) * 1.2))
    ax.grid(axis="x", alpha=0.3)
    return _svg(fig)


_TELEMETRY_LINES = [
    ("gpu_utilization_pct", "nvidia-smi utilization %", "#9467bd", 1.0),
    ("sm_clock_ratio", "SM clock % of max", "#ff7f0e", 100.0),
    ("host_cpu_pct", "host CPU busy %", "#2ca02c", 1.0),
    ("host_iowait_pct", "host iowait %", "#8c564b", 1.0),
]


def _telemetry_plot(cols: Dict[str, Any]) -> Optional[str]:
    import numpy as np

    lines = [(key, label, color, scale, np.asarray(cols[key], dtype=np.float64))
             for key, label, color, scale in _TELEMETRY_LINES if key in cols]
    present = [line for line in lines if not np.all(np.isnan(line[4]))]
    if not present:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    k = _bin_size(len(cols["index"]))
    xs = _xs(cols, k)
    for _, label, color, scale, values in present:
        ys = (values if k == 1 else _binned(values, k)) * scale
        measured = ~np.isnan(ys)
        ax.plot(xs[measured], ys[measured], color=color, linewidth=1.2, label=label)
    ax.set_xlabel("step")
    ax.set_ylabel("%")
    ax.set_ylim(0, 105)
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    return _svg(fig)


_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 24px;
       color: #222; max-width: 1100px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
.meta { color: #666; font-size: 13px; }
table { border-collapse: collapse; font-size: 13px; } td, th { padding: 3px 10px; text-align: right; }
th { border-bottom: 1px solid #ccc; } td.name, th.name { text-align: left; }
.finding { border-left: 4px solid #999; padding: 6px 12px; margin: 10px 0; background: #fafafa; }
.finding.high { border-color: #d62728; } .finding.moderate { border-color: #ff9f1c; }
.sev { font-weight: bold; text-transform: uppercase; font-size: 11px; }
.high .sev { color: #d62728; } .moderate .sev { color: #c77700; } .info .sev { color: #666; }
.fix { margin: 4px 0; } .small { color: #666; font-size: 12px; }
figure { margin: 8px 0 20px 0; } figcaption { font-size: 12px; color: #555; }
"""


def _findings_html(findings: Sequence[Finding]) -> str:
    if not findings:
        return "<p>No findings.</p>"
    parts = []
    for rank, f in enumerate(findings, 1):
        evidence = ", ".join(f"{html.escape(k)} = {v:.4g}" for k, v in f.evidence.items())
        explains = f"{100 * f.share:.0f}% of step time" if f.share > 0 else "notice"
        parts.append(
            f'<div class="finding {html.escape(f.severity)}" data-id="{html.escape(f.id)}">'
            f'<div><span class="sev">{rank}. {html.escape(f.severity)}</span> '
            f"<code>{html.escape(f.id)}</code> ({explains})</div>"
            f"<div><b>{html.escape(f.title)}</b></div>"
            f'<div class="fix">Fix: {html.escape(f.recommendation)}</div>'
            f'<div class="small">Evidence: {evidence}</div>'
            f'<div class="small">Confidence: {html.escape(f.confidence)} (source: {html.escape(f.source)})</div>'
            "</div>")
    return "\n".join(parts)


def _figure(fig_id: str, svg: Optional[str], caption: str, missing: str) -> str:
    if svg is None:
        return f'<figure id="{fig_id}"><p class="small">{html.escape(missing)}</p></figure>'
    return f'<figure id="{fig_id}">{svg}<figcaption>{html.escape(caption)}</figcaption></figure>'


def render_html(summary: Summary, series: Series, title: str = "gpuscope report") -> str:
    """The report as one HTML document (str). ``series``: the window's steps,
    as ``Session.step_columns()`` or ``Session.step_series()`` gives them."""
    series = _columns(series)
    has_steps = len(series["index"]) > 0
    findings = diagnose_summary(summary)
    st = summary.step_time
    idle = "not measured (source host)" if summary.gpu_idle_pct is None else f"{summary.gpu_idle_pct:.1f}%"
    throughput = "" if summary.throughput is None else f"{summary.throughput:.1f} samples/s"
    rows = "".join(
        f'<tr><td class="name">{html.escape(p.name)}</td><td>{100 * p.share:.1f}%</td>'
        f"<td>{_ms(p.time.p50)}</td><td>{_ms(p.time.p95)}</td></tr>"
        for p in summary.phases.values() if p.share > 0 or p.name == "other")
    body = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>{_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<div class="meta">gpuscope {html.escape(summary.version)} &middot; source <b>{html.escape(summary.source)}</b>
&middot; {summary.steps} steps in the window ({summary.total_steps} in all)<br>
{html.escape(summary.source_reason)}</div>

<h2>Step time</h2>
<table><tr><th></th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>mean</th><th>max</th></tr>
<tr><td class="name">window</td><td>{_ms(st.p50)}</td><td>{_ms(st.p90)}</td><td>{_ms(st.p95)}</td>
<td>{_ms(st.p99)}</td><td>{_ms(st.mean)}</td><td>{_ms(st.max)}</td></tr></table>
<p>GPU idle: <b>{idle}</b> of step time. {html.escape(throughput)}</p>

<h2>Findings, ranked by the step time they explain</h2>
{_findings_html(findings)}

<h2>Plots</h2>
{_figure("plot-step-time", _step_time_plot(summary, series) if has_steps else None,
         "Step time over the window's steps, with the window's p50 and p95.", "No steps yet.")}
{_figure("plot-phases", _phase_plot(summary, series) if has_steps else None,
         "Where each step's time goes: top-level phases, host time.", "No steps yet.")}
{_figure("plot-idle", _idle_plot(summary),
         "GPU idle time by cause: the host phase open while the GPU idled, 'launch' for gaps "
         "shorter than 20 us between kernels.",
         "GPU idle by cause needs a GPU source (CUDA events or CUPTI); this run had "
         f"'{summary.source}'.")}
{_figure("plot-telemetry", _telemetry_plot(series),
         "Telemetry per step (NVML, /proc). nvidia-smi's utilization is not GPU busy time.",
         "No telemetry was sampled in this run.")}

<h2>Phases</h2>
<table><tr><th class="name">phase</th><th>share</th><th>p50/step</th><th>p95/step</th></tr>{rows}</table>

<script type="application/json" id="gpuscope-summary">{_script_json(summary.to_json())}</script>
</body></html>
"""
    return body


def write_html(path: "os.PathLike[str] | str", summary: Summary, series: Series,
               title: str = "gpuscope report") -> str:
    """Writes ``render_html(...)`` to ``path``; returns the path."""
    from ._files import write_atomically

    return write_atomically(path, render_html(summary, series, title=title))

"""The HTML report: one self-contained file (no network, no scripts to load)
with the summary, the ranked findings and four plots drawn by matplotlib as
inline SVG: step time over steps with its p50 and p95, the phase breakdown
per step, GPU idle by cause, and telemetry. A window longer than
``MAX_POINTS`` steps is drawn in bins of consecutive steps, and phases past
the ``MAX_PHASES`` largest are stacked as one. A summary that compares ranks
(``summary.ranks``) adds a "Ranks" section: the straggler in one line, and
each rank's largest phases and step time side by side.

``Session.save_html(path)`` writes it (``write_html(path, summary, series)``
here, for a summary and step series from elsewhere).
"""

from __future__ import annotations

import html
import io
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _gpuscope
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
    for key in [line[0] for line in _TELEMETRY_LINES] + ["memory_peak_bytes"]:
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


GIB = float(1 << 30)
MEMORY_COLOR = "#d62728"


def _memory_plot(summary: Summary, cols: Dict[str, Any]) -> Optional[str]:
    """Each step's peak GPU memory allocated (GiB, right axis) over its step
    time (ms, left axis), with the GPU's memory as a ceiling: a step that
    is slow because it reached the limit (allocation retries) shows as both
    lines peaking together."""
    import numpy as np

    if summary.memory is None or "memory_peak_bytes" not in cols:
        return None
    peaks = np.asarray(cols["memory_peak_bytes"], dtype=np.float64) / GIB
    if len(peaks) == 0 or np.all(np.isnan(peaks)):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    k = _bin_size(len(peaks))
    xs = _xs(cols, k)
    ms = np.asarray(cols["duration"], dtype=np.float64) * 1e3
    ax.plot(xs, ms if k == 1 else _binned(ms, k), color=STEP_COLOR, linewidth=1.0,
            label="step time (ms)")
    ax.set_xlabel("step")
    ax.set_ylabel("ms")
    ax.set_ylim(bottom=0)
    right = ax.twinx()
    # Max over each bin of the steps sampled in it (fmax skips the NaN of a
    # step no sample fell in).
    ys = peaks if k == 1 else np.fmax.reduceat(peaks, np.arange(0, len(peaks), k))
    measured = ~np.isnan(ys)
    right.plot(xs[measured], ys[measured], color=MEMORY_COLOR, linewidth=1.4,
               label="peak memory allocated (GiB)" + ("" if k == 1 else f", max of {k} steps"))
    totals = [g.total_bytes for g in summary.memory.gpus if g.total_bytes]
    top = float(np.nanmax(ys)) if np.any(measured) else 0.0
    if totals:
        right.axhline(max(totals) / GIB, color=MEMORY_COLOR, linestyle=":", linewidth=1.0,
                      label=f"GPU memory {max(totals) / GIB:.0f} GiB")
        top = max(top, max(totals) / GIB)
    right.set_ylim(0, top * 1.05 if np.isfinite(top) and top > 0 else 1.0)
    right.set_ylabel("GiB")
    lines = ax.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    right.legend(lines[0] + more[0], lines[1] + more[1], loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    return _svg(fig)


def _gib(value: Optional[float]) -> str:
    return "&ndash;" if value is None else f"{value / GIB:.2f} GiB"


def _memory_html(summary: Summary) -> str:
    """The "GPU memory" table (one row per GPU) and the OOM that ended a
    step, or "" without a memory source."""
    m = summary.memory
    if m is None:
        return ""
    rows = "".join(
        f'<tr><td class="name">GPU {g.device}</td><td>{_gib(g.peak_allocated_bytes)}'
        f'{"" if g.peak_exact else " (sampled)"}</td><td>{_gib(g.peak_reserved_bytes)}</td>'
        f"<td>{_gib(g.total_bytes)}</td><td>{html.escape(g.peak_phase or '-')}</td>"
        f"<td>{g.alloc_retries}</td><td>{g.ooms}</td></tr>"
        for g in m.gpus)
    oom = ""
    if m.oom is not None:
        o = m.oom
        where = f"step {o.step}" if o.step is not None and o.step >= 0 else "outside a step"
        if o.phase_path:
            where += f", phase {o.phase_path}"
        oom = (f'<p class="oom"><b>Out of memory</b> in {html.escape(where)}: asked for '
               f"{_gib(o.requested_bytes)} with {_gib(o.allocated_bytes)} allocated of "
               f"{_gib(o.total_bytes)}.{' Snapshot: ' + html.escape(o.snapshot) if o.snapshot else ''}"
               "</p>")
    return f"""<h2>GPU memory</h2>
<p class="small">From {html.escape(m.source)}: what this process's allocator held.</p>
<table><tr><th class="name">GPU</th><th>peak allocated</th><th>peak reserved</th><th>total</th>
<th>peak phase</th><th>alloc retries</th><th>OOMs</th></tr>{rows}</table>
{oom}"""


def _stalls_html(summary: Summary) -> str:
    """The "Stalls" table (docs/definitions.md "Stalls"), or "" without one."""
    if not summary.stalls:
        return ""
    rows = "".join(
        f'<tr><td class="name">{"step " + str(x.step) if x.step >= 0 else "outside steps"}</td>'
        f"<td>{html.escape(x.phase_path or '-')}</td><td>{_duration(x.seconds)}"
        f"{' (ongoing)' if x.ongoing else ''}</td><td>{_duration(x.limit)}</td>"
        f'<td class="name">{html.escape(x.gpu)}</td></tr>'
        for x in summary.stalls)
    return f"""<h2>Stalls</h2>
<p class="small">Steps (or phases outside steps) open past their stall limit: where the job hung.</p>
<table><tr><th class="name">what</th><th>phase</th><th>open</th><th>limit</th>
<th class="name">GPU when found</th></tr>{rows}</table>
"""


def _duration(seconds: float) -> str:
    return _gpuscope._format_duration(seconds)


# The per-rank plot: each rank's largest phases stacked, up to this many by
# name (the rest as "other phases"); every rank of a world up to
# MAX_RANK_BARS ranks is drawn at its rank number, missing ones as gaps, and
# of a larger world only the RANK_BARS_SHOWN slowest by step time p50 (and
# the straggler's rank).
MAX_RANK_PHASES = 4
MAX_RANK_BARS = 64
RANK_BARS_SHOWN = 32
RANK_STEP_COLOR = "#222222"
OTHER_PHASES_COLOR = "#8c8c8c"


def _number(value: Any) -> Optional[float]:
    """A float, or None for what is unknown (None or NaN)."""
    if value is None:
        return None
    value = float(value)
    return None if value != value else value


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    n = len(ordered)
    return ordered[n // 2] if n % 2 else 0.5 * (ordered[n // 2 - 1] + ordered[n // 2])


def _rank_world(summary: Summary, ranks: Any) -> int:
    world = len(ranks.ranks) + len(ranks.missing)
    if summary.rank is not None:
        world = max(world, summary.rank.world_size)
    return max([world] + [r.rank + 1 for r in ranks.ranks])


def _rank_phases(ranks: Any) -> Tuple[List[str], List[str], Dict[str, bool]]:
    """The phases to stack by name (the largest by median share across the
    ranks, a rank without the phase counting 0), the rest, and per phase
    whether its device time is compared: where every rank that has it
    measured some, as the straggler rule scores."""
    shares: Dict[str, List[float]] = {}
    device: Dict[str, bool] = {}
    for r in ranks.ranks:
        for p in r.phases:
            # Nested phases have no share of their own: their time is in
            # their parent's, and stacking them would count it twice.
            if (_number(p.share) or 0.0) > 0:
                shares.setdefault(p.name, []).append(float(p.share))
            d = _number(p.device_p50)
            device[p.name] = device.get(p.name, True) and d is not None and d > 0
    n = len(ranks.ranks)
    order = sorted(shares, key=lambda name: (-_median(shares[name] + [0.0] * (n - len(shares[name]))),
                                            -max(shares[name]), name))
    return order[:MAX_RANK_PHASES], order[MAX_RANK_PHASES:], device


def _rank_phase_time(record: Any, name: str, device: bool) -> float:
    """Seconds per step ``record``'s rank spent in phase ``name`` (0 where
    it has none, or the phase is nested there)."""
    for p in record.phases:
        if p.name == name and (_number(p.share) or 0.0) > 0:
            t = _number(p.device_p50 if device else p.host_p50)
            return t if t is not None and t > 0 else 0.0
    return 0.0


def _rank_time_kind(names: Sequence[str], device: Dict[str, bool]) -> str:
    on_device = [n for n in names if device.get(n)]
    if not on_device:
        return "host time"
    if len(on_device) == len(names):
        return "device time"
    return f"device time for {', '.join(on_device)}, host time for the other phases"


def _rank_plot(summary: Summary, cols: Dict[str, Any]) -> Tuple[Optional[str], str]:
    """The per-rank figure (SVG, or None with fewer than 2 ranks) and its caption."""
    import numpy as np

    ranks = summary.ranks
    records = sorted(ranks.ranks, key=lambda r: r.rank)
    world = _rank_world(summary, ranks)
    missing = sorted(ranks.missing)
    counts = (f"exchange {ranks.exchanges}: {len(records)} of {world} ranks compared, "
              f"{len(missing)} missing")
    if missing:
        listed = ", ".join(str(m) for m in missing[:16])
        counts += f" ({listed}{', ...' if len(missing) > 16 else ''})"
    if len(records) < 2:
        return None, counts
    top = ranks.stragglers[0] if ranks.stragglers else None
    shown, rest, device = _rank_phases(ranks)

    # Which ranks are drawn, and where: every rank of a small world at its
    # rank number; of a large one, the slowest by step time p50.
    large = world > MAX_RANK_BARS
    if large:
        drawn = sorted(records, key=lambda r: (-(_number(r.step_p50) or 0.0), r.rank))[:RANK_BARS_SHOWN]
        if top is not None and all(r.rank != top.rank for r in drawn):
            drawn = drawn[:-1] + [r for r in records if r.rank == top.rank]
        drawn.sort(key=lambda r: r.rank)
        xs = np.arange(len(drawn), dtype=np.float64)
        slots = len(drawn)
    else:
        drawn = records
        xs = np.asarray([r.rank for r in drawn], dtype=np.float64)
        slots = world

    # Colours: a phase the phase plot also draws keeps its colour there.
    named = [n for n in _ordered_phases(summary, cols) if n != "other"][:MAX_PHASES]
    colors = {n: _PALETTE[i % len(_PALETTE)] for i, n in enumerate(named)}
    free = [c for c in _PALETTE if c not in {colors.get(n) for n in shown}]
    for name in shown:
        if name not in colors:
            colors[name] = free.pop(0) if free else OTHER_PHASES_COLOR

    layers, labels, fills, names = [], [], [], []
    for name in shown:
        layers.append(np.asarray([_rank_phase_time(r, name, device[name]) for r in drawn]) * 1e3)
        labels.append(_label(name))
        fills.append(colors[name])
        names.append(name)
    if rest:
        layer = np.asarray([sum(_rank_phase_time(r, n, device[n]) for n in rest) for r in drawn]) * 1e3
        if np.any(layer > 0):
            layers.append(layer)
            labels.append("other phases")
            fills.append(OTHER_PHASES_COLOR)
            names.append(None)
    steps = np.asarray([np.nan if _number(r.step_p50) is None else float(r.step_p50) for r in drawn]) * 1e3

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    width = 0.8
    bottom = np.zeros(len(drawn))
    slow = None if top is None else next((i for i, r in enumerate(drawn) if r.rank == top.rank), None)
    for layer, label, fill, name in zip(layers, labels, fills, names):
        bars = ax.bar(xs, layer, width=width, bottom=bottom, color=fill, label=label, linewidth=0)
        if slow is not None:
            # The straggler's bar: outlined, its slow phase hatched.
            bar = bars[slow]
            bar.set_edgecolor(RANK_STEP_COLOR)
            bar.set_linewidth(1.2)
            if name == top.phase or (name is None and top.phase in rest):
                bar.set_hatch("///")
        bottom = bottom + layer
    marker = max(3.0, min(20.0, 0.8 * 500.0 / max(1, slots)))
    ax.plot(xs, steps, linestyle="none", marker="_", markersize=marker, markeredgewidth=2,
            color=RANK_STEP_COLOR, label="step time p50")
    peak = float(np.nanmax(np.concatenate([bottom, np.nan_to_num(steps)]))) if len(drawn) else 0.0
    peak = peak if peak > 0 else 1.0
    if slow is not None:
        y = max(float(bottom[slow]), float(np.nan_to_num(steps[slow])))
        ax.annotate(_label(f"straggler: {top.phase} x{top.slowdown:.3g}"), xy=(xs[slow], y),
                    xytext=(0, 14), textcoords="offset points", ha="center", fontsize=8,
                    arrowprops={"arrowstyle": "->", "color": RANK_STEP_COLOR})
    if large:
        ax.set_xticks(xs)
        ax.set_xticklabels([str(r.rank) for r in drawn], rotation=90, fontsize=7)
        ax.set_xlabel(f"rank (the {len(drawn)} slowest of {world} by step time p50)")
        ax.set_xlim(-0.6, len(drawn) - 0.4)
    else:
        for m in missing:
            if m < world:
                ax.text(m, 0.02 * peak, "missing", rotation=90, ha="center", va="bottom", fontsize=8,
                        color="#555555")
        if world <= 32:
            ax.set_xticks(range(world))
        else:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("rank")
        ax.set_xlim(-0.6, world - 0.4)
    ax.set_ylabel("ms per step (p50)")
    ax.set_ylim(0, peak * 1.25)
    # The legend lists the phases from the bottom of the stack up, as the
    # phase plot does, then the step time marks.
    from matplotlib.lines import Line2D

    handles, texts = ax.get_legend_handles_labels()
    order = sorted(range(len(texts)), key=lambda i: isinstance(handles[i], Line2D))
    ax.legend([handles[i] for i in order], [texts[i] for i in order], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(axis="y", alpha=0.3)

    stacked = shown + rest
    caption = (f"Per-step time (medians) of each rank's largest phases by median share, "
               f"{_rank_time_kind(stacked, device)}"
               f"{', the rest stacked as other phases' if rest else ''}; the marks are each "
               f"rank's step time p50 (host). {counts[0].upper()}{counts[1:]}.")
    if large:
        caption += (f" A world past {MAX_RANK_BARS} ranks: only the {len(drawn)} slowest ranks by "
                    f"step time p50 are drawn{' (and the straggler)' if top is not None else ''}.")
    elif missing:
        caption += " A missing rank (no record in the exchange) is a gap marked 'missing'."
    if top is not None:
        caption += " The straggler's bar is outlined, its slow phase hatched."
    return _svg(fig), caption


def _straggler_text(summary: Summary) -> str:
    """One line on the straggler, as the straggler finding words it."""
    ranks = summary.ranks
    if not ranks.stragglers:
        return f"No straggler among the {len(ranks.ranks)} ranks compared."
    top = ranks.stragglers[0]
    me = summary.rank is not None and summary.rank.rank == top.rank
    who = f"this rank ({top.rank})" if me else f"rank {top.rank}"
    where = f" on {top.host}" if top.host else ""
    if ranks.recent_exchanges <= 1:
        persistence = "in the one exchange so far"
    else:
        chronic = 2 * ranks.straggler_exchanges > ranks.recent_exchanges
        persistence = (f"{'chronic' if chronic else 'transient'}: slow in "
                       f"{ranks.straggler_exchanges} of the last {ranks.recent_exchanges} exchanges")
    wait = _number(top.others_wait_share)
    wait = 0.0 if wait is None else min(max(wait, 0.0), 1.0)
    text = (f"Straggler: {who}{where}, x{top.slowdown:.3g} slower than the median rank in "
            f"{top.phase} ({'device' if top.device else 'host'} time; {persistence})")
    if not me:
        text += f"; the other ranks wait {100 * wait:.0f}% of step time for it"
    return text + "."


def _ranks_html(summary: Summary, cols: Dict[str, Any]) -> str:
    """The "Ranks" section, or "" in a single process."""
    if getattr(summary, "ranks", None) is None:
        return ""
    svg, caption = _rank_plot(summary, cols)
    figure = _figure("plot-per-rank", svg, caption,
                     f"Fewer than 2 ranks to compare in {caption}." if svg is None else "")
    return (f'\n<h2>Ranks</h2>\n<p id="straggler">{html.escape(_straggler_text(summary))}</p>\n'
            f"{figure}\n")


_CSS = """
body { font-family: -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif; margin: 24px;
       color: #222; max-width: 1100px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 17px; margin-top: 28px; }
table.kernels code { font-size: 11px; word-break: break-all; }
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


def _spikes_html(summary: Summary) -> str:
    """Work every N steps inside the step (``summary.periodic_spikes``): a
    table, or nothing when there is none."""
    if not summary.periodic_spikes:
        return ""
    rows = "".join(
        f'<tr><td class="name">{html.escape(p.phase)}</td><td>{p.period_steps}</td>'
        f"<td>{p.occurrences}</td><td>{p.last_step}</td><td>{_ms(p.excess)}</td>"
        f"<td>{100 * p.share:.1f}%</td></tr>"
        for p in summary.periodic_spikes)
    return ('\n<h2>Periodic spikes</h2>\n<p>Work every N steps inside the step (evaluation, '
            "checkpoints): the phase that grew in the slow steps.</p>\n"
            '<table id="periodic-spikes"><tr><th class="name">phase</th><th>every (steps)</th>'
            "<th>in the window</th><th>last at step</th><th>adds to its step</th>"
            f"<th>share of step time</th></tr>{rows}</table>\n")


def _kernel_rows(kernels: Sequence[Any], with_phase: bool) -> str:
    return "".join(
        f"<tr><td>{100 * k.share:.1f}%</td><td>{_ms(k.time_per_step)}</td>"
        f"<td>{k.count_per_step:.1f}</td><td>{html.escape(k.kernel_class)}</td>"
        + (f'<td class="name">{html.escape(k.phase or "-")}</td>' if with_phase else "")
        + f'<td class="name"><code>{html.escape(k.name)}</code></td></tr>'
        for k in kernels)


def _kernels_html(summary: Summary) -> str:
    """The kernels with the most device time (``summary.top_kernels``), and
    each phase's own (``PhaseStats.top_kernels``); nothing without CUPTI."""
    if not summary.top_kernels:
        return ""
    head = "<tr><th>share of kernel time</th><th>per step</th><th>launches</th><th>class</th>"
    per_phase = "".join(
        f'<details><summary>{html.escape(p.name)}</summary><table class="kernels">{head}'
        f'<th class="name">kernel</th></tr>{_kernel_rows(p.top_kernels, False)}</table></details>'
        for p in summary.phases.values() if p.top_kernels)
    return ('\n<h2>Top kernels</h2>\n<p>Device time per step and GPU, from the activity records; '
            "the phase that launched most of each.</p>\n"
            f'<table id="top-kernels" class="kernels">{head}<th class="name">launched in</th>'
            f'<th class="name">kernel</th></tr>{_kernel_rows(summary.top_kernels, True)}</table>\n'
            f'<div id="phase-kernels">{per_phase}</div>\n')


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
    eff = summary.efficiency
    if eff is not None and eff.mfu is not None:
        throughput += (f"{'; ' if throughput else ''}MFU {100 * eff.mfu:.1f}% "
                       f"({eff.peak_source})")
    w = summary.warmup
    warmup = "" if w.steps == 0 else (
        f" &middot; {w.steps} warm-up step{'s' if w.steps > 1 else ''} excluded ({_ms(w.total)})")
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
&middot; {summary.steps} steps in the window ({summary.total_steps} in all){warmup}<br>
{html.escape(summary.source_reason)}</div>

<h2>Step time</h2>
<table><tr><th></th><th>p50</th><th>p90</th><th>p95</th><th>p99</th><th>mean</th><th>max</th></tr>
<tr><td class="name">window</td><td>{_ms(st.p50)}</td><td>{_ms(st.p90)}</td><td>{_ms(st.p95)}</td>
<td>{_ms(st.p99)}</td><td>{_ms(st.mean)}</td><td>{_ms(st.max)}</td></tr></table>
<p>GPU idle: <b>{idle}</b> of step time. {html.escape(throughput)}</p>
{_spikes_html(summary)}{_stalls_html(summary)}
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
{_memory_html(summary)}{_figure("plot-memory", _memory_plot(summary, series) if has_steps else None,
         "Each step's peak GPU memory allocated, with the step time and the GPU's memory.",
         "No GPU memory was sampled in this run (no allocator source).")}
{_kernels_html(summary)}{_ranks_html(summary, series)}
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

"""gs.Summary and gs.Finding: Python views of the C++ Summary and Finding.

Both are built from the versioned JSON the C++ core writes (docs/json-schema.md),
so field names and meanings have one source. All times are in seconds.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from . import _gpuscope

_QUANTILE_FIELDS = ("count", "mean", "stddev", "min", "max", "p50", "p90", "p95", "p99")


@dataclass(frozen=True)
class Quantiles:
    """A duration's distribution, in seconds (``count == 0``: all zeros)."""

    count: int
    mean: float
    stddev: float
    min: float
    max: float
    p50: float
    p90: float
    p95: float
    p99: float

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> "Quantiles":
        return cls(count=int(d["count"]), **{k: float(d[k]) for k in _QUANTILE_FIELDS[1:]})


@dataclass(frozen=True)
class PhaseStats:
    """One phase over the window; ``"other"`` is step time outside every
    top-level phase.

    ``share`` is the phase's top-level time as a fraction of step time: the
    shares of all phases plus ``other`` sum to 1. ``inclusive_share`` counts
    its time at any depth (a nested phase has share 0 and inclusive_share > 0). ``p50``..``p99``, ``mean``,
    ``max`` are per-step times over the ``steps`` steps that contain it.
    """

    name: str
    share: float
    inclusive_share: float
    top_level: bool
    builtin: bool
    steps: int
    count: int
    total: float
    time: Quantiles
    outside_steps_count: int
    outside_steps_total: float
    device: Optional[Quantiles] = None  # per-step GPU time (GPU source), else None
    backlog_p50: Optional[float] = None  # median GPU lag when the phase began (events)

    @property
    def p50(self) -> float:
        return self.time.p50

    @property
    def p90(self) -> float:
        return self.time.p90

    @property
    def p95(self) -> float:
        return self.time.p95

    @property
    def p99(self) -> float:
        return self.time.p99

    @property
    def mean(self) -> float:
        return self.time.mean

    @property
    def max(self) -> float:
        return self.time.max

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> "PhaseStats":
        return cls(
            name=d["name"],
            share=float(d["share"]),
            inclusive_share=float(d["inclusive_share"]),
            top_level=d["top_level"],
            builtin=d["builtin"],
            steps=d["steps"],
            count=d["count"],
            total=float(d["total"]),
            time=Quantiles._from_dict(d["time"]),
            outside_steps_count=d["outside_steps_count"],
            outside_steps_total=float(d["outside_steps_total"]),
            device=Quantiles._from_dict(d["device"]) if d.get("device", {}).get("count") else None,
            backlog_p50=float(d["backlog_p50"]) if d.get("device", {}).get("count") else None,
        )


class ActivityStats:
    """Per-step means from activity records (``Summary.activity``, source
    ``"cupti"``): ``kernels_per_step``, ``kernel_time_p50`` (s),
    ``h2d_bytes_per_step``, ``d2h_bytes_per_step``, ``copies_per_step``,
    ``pageable_copies_per_step``, ``syncs_per_step``, ``sync_time_per_step``
    (s), ``host_wait_gaps_per_step`` and ``host_wait_time_per_step`` (s: the
    GPU waited for a launch), ``kernel_time_per_step``, ``gemm_time_per_step``,
    ``fp32_gemm_time_per_step`` (GEMMs on FP32 CUDA cores) and
    ``collective_time_per_step`` (NCCL) and ``exposed_collective_time_per_step``
    (the part no other work on its GPU overlapped), all in s per GPU, from
    kernel names; ``pageable_h2d_copies_per_step``;
    ``dropped_records``."""

    _FIELDS = (
        "kernels_per_step",
        "kernel_time_p50",
        "h2d_bytes_per_step",
        "d2h_bytes_per_step",
        "copies_per_step",
        "pageable_copies_per_step",
        "syncs_per_step",
        "sync_time_per_step",
        "host_wait_gaps_per_step",
        "host_wait_time_per_step",
        "kernel_time_per_step",
        "gemm_time_per_step",
        "fp32_gemm_time_per_step",
        "collective_time_per_step",
        "exposed_collective_time_per_step",
        "pageable_h2d_copies_per_step",
        "dropped_records",
    )
    __slots__ = _FIELDS

    def __init__(self, d: Dict[str, Any]) -> None:
        for name in self._FIELDS:
            value = d.get(name, 0)
            setattr(self, name, int(value) if name == "dropped_records" else float(value))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActivityStats) and all(
            getattr(self, n) == getattr(other, n) for n in self._FIELDS
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS)
        return f"ActivityStats({inner})"


class GpuTelemetry:
    """One GPU as NVML saw it over the window (``TelemetryStats.gpus``):
    ``index``, ``utilization_pct`` (as nvidia-smi reports it), ``sm_clock_mhz``,
    ``sm_clock_max_mhz``, ``mem_clock_mhz``, ``mem_clock_max_mhz``,
    ``power_w``, ``power_limit_w``, ``temperature_c``, ``memory_used_bytes``,
    ``memory_total_bytes``, ``pcie_rx_bytes_per_s``, ``pcie_tx_bytes_per_s``
    (means; None where the GPU does not report it), ``clocks_event_reasons``,
    and at the last sample ``pcie_gen``, ``pcie_gen_max``, ``pcie_width``,
    ``pcie_width_max``, ``ecc_corrected``, ``ecc_uncorrected``,
    ``persistence_mode``, ``compute_mode``, ``mig_mode``."""

    def __init__(self, d: Dict[str, Any]) -> None:
        self.index: int = int(d["index"])
        for name in ("utilization_pct", "sm_clock_mhz", "sm_clock_max_mhz", "mem_clock_mhz", "mem_clock_max_mhz",
                     "power_w", "power_limit_w", "temperature_c", "memory_used_bytes", "memory_total_bytes",
                     "pcie_rx_bytes_per_s", "pcie_tx_bytes_per_s"):
            setattr(self, name, _float_or_none(d.get(name)))
        self.clocks_event_reasons: List[str] = list(d["clocks_event_reasons"])
        # State at the window's last sample; None where not available.
        for name in ("pcie_gen", "pcie_gen_max", "pcie_width", "pcie_width_max", "ecc_corrected",
                     "ecc_uncorrected", "persistence_mode", "compute_mode", "mig_mode"):
            v = d.get(name, -1)
            setattr(self, name, None if v is None or v < 0 else int(v))

    def __repr__(self) -> str:
        return f"GpuTelemetry(index={self.index}, utilization_pct={self.utilization_pct})"


class TelemetryStats:
    """Device and host state the worker sampled (``Summary.telemetry``):
    ``source``, ``steps`` (window steps covered), ``gpu_utilization_pct`` (as
    nvidia-smi reports it: not GPU busy), ``sm_clock_ratio`` (the slowest
    GPU's clock over its maximum), ``throttled_steps`` (share of steps with a
    power or thermal cap), ``clocks_event_reasons``, ``host_cpu_pct``,
    ``host_iowait_pct``, ``process_cores``, ``worker_cores`` (DataLoader
    workers), ``memory_available_bytes``, ``memory_pressure_pct`` (PSI),
    ``swap_pages_per_s``, ``load1``, ``cpus_available`` (affinity cut by a
    container limit), ``throttled_sm_clock_ratio`` (the clock ratio over the
    throttled steps only) and ``gpus`` (``GpuTelemetry``); None
    where not sampled."""

    def __init__(self, d: Dict[str, Any]) -> None:
        self.source: str = d["source"]
        self.steps: int = int(d["steps"])
        self.gpu_utilization_pct = _float_or_none(d["gpu_utilization_pct"])
        self.sm_clock_ratio = _float_or_none(d["sm_clock_ratio"])
        self.throttled_steps: float = float(d["throttled_steps"])
        self.clocks_event_reasons: List[str] = list(d["clocks_event_reasons"])
        self.host_cpu_pct = _float_or_none(d["host_cpu_pct"])
        self.host_iowait_pct = _float_or_none(d["host_iowait_pct"])
        self.process_cores = _float_or_none(d["process_cores"])
        self.worker_cores = _float_or_none(d["worker_cores"])
        self.memory_available_bytes = _float_or_none(d.get("memory_available_bytes"))
        self.memory_pressure_pct = _float_or_none(d.get("memory_pressure_pct"))
        self.swap_pages_per_s = _float_or_none(d.get("swap_pages_per_s"))
        self.load1 = _float_or_none(d.get("load1"))
        self.cpus_available = _float_or_none(d.get("cpus_available"))
        self.throttled_sm_clock_ratio = _float_or_none(d.get("throttled_sm_clock_ratio"))
        self.gpus: List[GpuTelemetry] = [GpuTelemetry(g) for g in d["gpus"]]

    def __repr__(self) -> str:
        return f"TelemetryStats(source={self.source!r}, steps={self.steps})"


class DeviceStats:
    """One GPU's share of a session (``Summary.devices``): ``device`` (the
    CUDA ordinal), ``gpu_steps`` (window steps it was timed in) and
    ``gpu_idle_pct`` (0..100 over those steps; a lower bound with
    ``"events"``)."""

    __slots__ = ("device", "gpu_steps", "gpu_idle_pct")

    def __init__(self, device: int, gpu_steps: int, gpu_idle_pct: Optional[float]) -> None:
        self.device = device
        self.gpu_steps = gpu_steps
        self.gpu_idle_pct = gpu_idle_pct

    @classmethod
    def _from_dict(cls, d: Dict[str, Any]) -> "DeviceStats":
        return cls(int(d["device"]), int(d["gpu_steps"]), _float_or_none(d["gpu_idle_pct"]))

    def __repr__(self) -> str:
        return f"DeviceStats(device={self.device}, gpu_steps={self.gpu_steps}, gpu_idle_pct={self.gpu_idle_pct})"


class Summary:
    """What a session knows at one moment (``Session.summary()``).

    ``steps``: completed steps in the window; ``step_time``: exact quantiles
    over the window; ``phases``: name -> ``PhaseStats`` in breakdown order;
    ``gpu_idle_pct``: 0..100 or None without a GPU timeline source (a lower
    bound with ``"events"``), over the ``gpu_steps`` window steps whose GPU
    data is in (``pending_steps`` still wait for the GPU); ``idle_by_cause``:
    cause -> percent of step time, summing to ``gpu_idle_pct``; ``devices``:
    a ``DeviceStats`` per GPU timed (with several, ``gpu_idle_pct`` is their
    mean); ``activity``: per-step counts from CUPTI (``ActivityStats``) or
    None; ``telemetry``: sampled GPU and host state (``TelemetryStats``) or
    None;
    ``device_step_time``: per-step GPU span (or None); ``throughput``:
    samples/s or None; ``source``: ``"cupti"``, ``"events"`` or ``"host"``;
    ``simulated``: True when the GPU numbers come from gpuscope's simulated
    device (``simulated_device=``, ``GPUSCOPE_SIMULATE=1``), not a GPU.
    """

    __slots__ = (
        "_json",
        "_dict",
        "version",
        "source",
        "source_reason",
        "simulated",
        "window",
        "steps",
        "total_steps",
        "pending_steps",
        "window_time",
        "step_time",
        "lifetime_step_time",
        "phases",
        "throughput",
        "tokens_per_second",
        "gpu_idle_pct",
        "idle_by_cause",
        "misuse",
        "gpu_steps",
        "device_step_time",
        "gpu_clock_error",
        "devices",
        "activity",
        "telemetry",
    )

    def __init__(self, json_text: str) -> None:
        d = json.loads(json_text)
        self._json = json_text
        self._dict = d
        self.version: str = d["version"]
        self.source: str = d["source"]
        self.source_reason: str = d["source_reason"]
        self.simulated: bool = bool(d.get("simulated", False))
        self.window: int = d["window"]
        self.steps: int = d["steps"]
        self.total_steps: int = d["total_steps"]
        self.pending_steps: int = d["pending_steps"]
        self.window_time: float = float(d["window_time"])
        self.step_time = Quantiles._from_dict(d["step_time"])
        self.lifetime_step_time = Quantiles._from_dict(d["lifetime_step_time"])
        self.phases: Dict[str, PhaseStats] = {
            p["name"]: PhaseStats._from_dict(p) for p in d["phases"]
        }
        self.throughput: Optional[float] = _float_or_none(d["samples_per_second"])
        self.tokens_per_second: Optional[float] = _float_or_none(d["tokens_per_second"])
        self.gpu_idle_pct: Optional[float] = _float_or_none(d["gpu_idle_pct"])
        self.idle_by_cause: Dict[str, float] = {k: float(v) for k, v in d["idle_by_cause"].items()}
        self.misuse: Dict[str, int] = dict(d["misuse"])
        self.gpu_steps: int = d.get("gpu_steps", 0)
        self.gpu_clock_error: float = float(d.get("gpu_clock_error", 0.0))
        self.devices: List[DeviceStats] = [DeviceStats._from_dict(x) for x in d.get("devices", [])]
        self.telemetry: Optional[TelemetryStats] = (
            TelemetryStats(d["telemetry"]) if d.get("telemetry") is not None else None
        )
        self.activity: Optional[ActivityStats] = (
            ActivityStats(d["activity"]) if d.get("activity") is not None else None
        )
        self.device_step_time: Optional[Quantiles] = (
            Quantiles._from_dict(d["device_step_time"]) if self.gpu_steps else None
        )

    @classmethod
    def _from_json(cls, json_text: str) -> "Summary":
        return cls(json_text)

    @classmethod
    def from_json(cls, json_text: str) -> "Summary":
        """Reads a summary written by ``to_json()`` (by any process). Raises
        ``ValueError`` for text that is not a summary, ``GpuscopeError`` for
        another schema version."""
        return cls(_gpuscope.validate_summary_json(json_text))

    @property
    def samples_per_second(self) -> Optional[float]:
        """Same as ``throughput``."""
        return self.throughput

    def to_dict(self) -> Dict[str, Any]:
        """The summary as plain data (the JSON schema, docs/json-schema.md)."""
        return copy.deepcopy(self._dict)

    def to_json(self) -> str:
        """The summary as versioned JSON, exactly as the C++ core writes it."""
        return self._json

    def report(self, color: bool = False) -> str:
        """The human report for this summary, findings included (``color=True``:
        ANSI colours, for a terminal)."""
        return _gpuscope.format_report(self._json, color)

    def __str__(self) -> str:
        return self.report()

    def __repr__(self) -> str:
        return (
            f"<gpuscope.Summary steps={self.steps} source={self.source!r} "
            f"p50={self.step_time.p50 * 1e3:.3f}ms p95={self.step_time.p95 * 1e3:.3f}ms>"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Summary) and self._dict == other._dict

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Finding:
    """One diagnosis: ``id`` (stable), ``title``, ``severity`` ("info",
    "moderate", "high"), ``share`` of step time it explains, ``evidence``
    (name -> number), ``recommendation``, ``confidence`` and ``source``."""

    id: str
    title: str
    severity: str
    share: float
    evidence: Dict[str, float] = field(default_factory=dict)
    recommendation: str = ""
    confidence: str = ""
    source: str = ""

    def __str__(self) -> str:
        return f"[{self.severity}] {self.title}"


def _float_or_none(v: Any) -> Optional[float]:
    return None if v is None else float(v)


def diagnose_summary(summary: Summary) -> List[Finding]:
    """Ranked findings for ``summary`` (the C++ rules)."""
    findings = []
    for f in json.loads(_gpuscope.diagnose_json(summary.to_json())):
        f["share"] = float(f["share"] or 0.0)
        # Evidence is finite by construction; a null would be a bug, dropped
        # rather than raised inside the user's diagnose() call.
        f["evidence"] = {k: float(v) for k, v in f["evidence"].items() if v is not None}
        findings.append(Finding(**f))
    return findings

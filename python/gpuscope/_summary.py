"""gs.Summary, gs.Finding and the summary's parts: Python views over the C++
objects, bound in the extension (bindings/summary_types.cc,
bindings/finding_types.cc).

Each attribute mirrors a field of the C++ struct and is defined from the one
declaration of those fields (lib/export/summary_fields.h), so field names and
meanings have one source. Summaries and findings cross between C++ and Python
as these objects, never as JSON text. All times are in seconds.
"""

from __future__ import annotations

from typing import List

from . import _gpuscope

ActivityStats = _gpuscope.ActivityStats
DeviceStats = _gpuscope.DeviceStats
EfficiencyStats = _gpuscope.EfficiencyStats
Finding = _gpuscope.Finding
GpuMemory = _gpuscope.GpuMemory
GpuTelemetry = _gpuscope.GpuTelemetry
KernelStats = _gpuscope.KernelStats
MemoryStats = _gpuscope.MemoryStats
OomEvent = _gpuscope.OomEvent
OverheadStats = _gpuscope.OverheadStats
PeriodicSpike = _gpuscope.PeriodicSpike
PhaseStats = _gpuscope.PhaseStats
Quantiles = _gpuscope.Quantiles
RankIdentity = _gpuscope.RankIdentity
RankPhase = _gpuscope.RankPhase
RankRecord = _gpuscope.RankRecord
RanksStats = _gpuscope.RanksStats
Stall = _gpuscope.Stall
Straggler = _gpuscope.Straggler
Summary = _gpuscope.Summary
TelemetryStats = _gpuscope.TelemetryStats
WarmupStats = _gpuscope.WarmupStats


def diagnose_summary(summary: Summary) -> List[Finding]:
    """Ranked findings for ``summary`` (the C++ rules)."""
    return _gpuscope.diagnose(summary)

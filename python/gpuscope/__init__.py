"""gpuscope: an always-on flight recorder for GPU training loops.

Says, every step and at negligible cost, where the step time goes and why the
GPU is idle::

    import gpuscope as gs

    s = gs.Session(window=512)
    for x, y in s.steps(loader, samples=lambda b: len(b[0])):  # next(loader) is phase "data"
        with s.phase("h2d"):
            x = x.to(dev, non_blocking=True)
        with s.phase("forward"):
            loss = model(x, y)
    print(s.report())

``gs.step()``, ``gs.phase()`` and ``gs.steps()`` do the same on a default
session created on first use.
"""

from __future__ import annotations

# Imported under private names (and the typing names hidden by __dir__
# below), so that dir(gpuscope) and tab completion show the API only.
import atexit as _atexit
import importlib.util as _importlib_util
import os as _os
import threading as _threading
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, TypeVar, Union


def _cupti_search_path() -> None:
    """Points the C++ CUPTI loader at PyPI's CUPTI (nvidia-cuda-cupti, or the
    CUDA 13 wheel) when installed, without importing it. A libcupti already
    loaded in the process (torch's) still wins, and GPUSCOPE_CUPTI_PATH set by
    the user is left alone."""
    if _os.environ.get("GPUSCOPE_CUPTI_PATH"):
        return
    try:
        spec = _importlib_util.find_spec("nvidia")
    except (ImportError, ValueError):
        return
    dirs = []
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        for sub in ("cuda_cupti/lib", "cu13/lib", "cu12/lib"):
            d = _os.path.join(root, sub)
            if _os.path.isdir(d):
                dirs.append(d)
    if dirs:
        _os.environ["GPUSCOPE_CUPTI_PATH"] = _os.pathsep.join(dirs)


_cupti_search_path()

from . import _gpuscope, testing  # noqa: E402
from . import _memory  # noqa: E402
from ._loopwatch import _loop_range  # noqa: E402
from ._session import Session, _decorate, _torch_stream  # noqa: E402
from ._summary import (  # noqa: E402
    ActivityStats,
    DeviceStats,
    EfficiencyStats,
    Finding,
    GpuMemory,
    GpuTelemetry,
    KernelStats,
    MemoryStats,
    OomEvent,
    OverheadStats,
    PeriodicSpike,
    PhaseStats,
    Quantiles,
    RankIdentity,
    RankPhase,
    RankRecord,
    RanksStats,
    Stall,
    Straggler,
    Summary,
    TelemetryStats,
    WarmupStats,
    diagnose_summary,
)
from ._ranks import ExchangeResult  # noqa: E402
from ._loader import add_loader_workers  # noqa: E402
from ._flops import count_flops  # noqa: E402
from ._files import FileWriteError, UnsafePathError  # noqa: E402
from ._analyze import analyze_job, analyze_trace  # noqa: E402

TraceAnalysis = _gpuscope.TraceAnalysis

__version__: str = _gpuscope.__version__
GpuscopeError = _gpuscope.GpuscopeError

__all__ = [
    "ActivityStats",
    "DeviceStats",
    "EfficiencyStats",
    "FileWriteError",
    "Finding",
    "GpuMemory",
    "GpuTelemetry",
    "GpuscopeError",
    "KernelStats",
    "MemoryStats",
    "OomEvent",
    "OverheadStats",
    "PeriodicSpike",
    "PhaseStats",
    "ExchangeResult",
    "Quantiles",
    "RankIdentity",
    "RankPhase",
    "RankRecord",
    "RanksStats",
    "Session",
    "Stall",
    "Straggler",
    "Summary",
    "TelemetryStats",
    "TraceAnalysis",
    "UnsafePathError",
    "WarmupStats",
    "__version__",
    "add_loader_workers",
    "analyze_job",
    "analyze_trace",
    "count_flops",
    "default_session",
    "diagnose",
    "phase",
    "prometheus_collector",
    "report",
    "reset",
    "step",
    "steps",
    "summary",
]

_gpuscope._set_decorator(_decorate)
_gpuscope._set_stream_getter(_torch_stream)
_gpuscope._set_loop_range(_loop_range)
_gpuscope._set_oom_details(_memory.oom_details)

_default: Optional[Session] = None
_default_lock = _threading.Lock()

_T = TypeVar("_T")
_CountArg = Union[int, Callable[[Any], int], None]


def __dir__() -> List[str]:
    """The public API (``__all__``) and the ``testing`` module: not the
    names the package uses itself (``os``, ``threading``, ``Any``...)."""
    return sorted(set(__all__) | {"testing"})


def default_session() -> Session:
    """The session behind ``gs.step()``, ``gs.phase()`` and ``gs.steps()``,
    created with default options on first use."""
    global _default
    session = _default
    if session is None:
        with _default_lock:
            if _default is None:
                _default = Session()
            session = _default
    return session


def step(samples: Optional[int] = None, tokens: Optional[int] = None) -> Any:
    """A step of the default session: ``with gs.step(samples=64): ...``."""
    return default_session().step(samples, tokens)


def phase(name: str, stream: Any = None) -> Any:
    """A phase of the default session: ``with gs.phase("forward"): ...``.

    ``stream``: the stream this phase's GPU work goes on when it is not the
    session's (see ``Session.phase``)."""
    if stream is None:
        return default_session().phase(name)
    return default_session().phase(name, stream)


def steps(iterable: Iterable[_T], samples: _CountArg = None, tokens: _CountArg = None) -> Iterator[_T]:
    """One step of the default session per item of ``iterable``."""
    return default_session().steps(iterable, samples=samples, tokens=tokens)


def summary() -> Summary:
    """The default session's summary."""
    return default_session().summary()


def report(color: bool = False) -> str:
    """The default session's report, findings included."""
    return default_session().report(color)


def reset(warmup: Optional[int] = None) -> None:
    """Restarts the default session's measurement (``Session.reset``): its
    window, the run's histogram and totals start afresh, and the next
    ``warmup`` completed steps (None: the session's ``warmup``) are warm-up
    again. For a warm-up the loop defines itself (``gs.reset()`` once the
    first epoch's workers and compilation are done), or between epochs or
    configurations."""
    default_session().reset(warmup=warmup)


def prometheus_collector(session: Optional[Session] = None, labels: Optional[Dict[str, str]] = None) -> Any:
    """A ``prometheus_client`` collector of ``session``'s metrics (default:
    the default session's), to register in the registry the job already
    serves: ``prometheus_client.REGISTRY.register(gs.prometheus_collector(s))``.
    ``labels`` are added to every sample (one set per session sharing a
    registry)."""
    return (session if session is not None else default_session()).prometheus_collector(labels)


def diagnose(summary: Optional[Summary] = None) -> List[Finding]:
    """Findings for ``summary`` (default: the default session's), ranked."""
    if summary is None:
        return default_session().diagnose()
    return diagnose_summary(summary)


@_atexit.register
def _close_default_session() -> None:
    if _default is not None:
        _default.close()

"""gpuscope.Session: the C session (hot path) plus the Python conveniences."""

from __future__ import annotations

import functools
import os
import sys
import textwrap
from array import array
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from . import _gpuscope
from . import _loader  # noqa: F401 - installs the steps() hook that names loader workers
from . import _memory
from ._summary import Finding, Summary, diagnose_summary

if TYPE_CHECKING:
    import inspect

    from ._prometheus import PrometheusServer


_TELEMETRY_KEYS = ("gpu_utilization_pct", "sm_clock_ratio", "host_cpu_pct", "host_iowait_pct",
                   "worker_cores", "memory_peak_bytes")


def _series_from_columns(cols: Dict[str, Any]) -> List[Dict[str, Any]]:
    """``Session.step_series()`` from ``Session.step_columns()``: a phase or
    cause only in the steps where it has time ("other" in every step), None
    for NaN; names in alphabetical order, as the C++ StepPoint maps hold
    them."""
    phases = sorted((name, col.tolist()) for name, col in cols["phases"].items())
    causes = sorted((name, col.tolist()) for name, col in cols["idle_by_cause"].items())
    telemetry = [(key, cols[key].tolist()) for key in _TELEMETRY_KEYS]
    idle = cols["gpu_idle_pct"].tolist()
    out = []
    for i, (index, begin, duration) in enumerate(zip(cols["index"].tolist(), cols["begin"].tolist(),
                                                     cols["duration"].tolist())):
        g = idle[i]
        step = {"index": index, "begin": begin, "duration": duration,
                "phases": {name: col[i] for name, col in phases if col[i] > 0 or name == "other"},
                "gpu_idle_pct": None if g != g else g,
                "idle_by_cause": {name: col[i] for name, col in causes if col[i] > 0}}
        for key, col in telemetry:
            v = col[i]
            step[key] = None if v != v else v  # NaN: not measured
        out.append(step)
    return out


def _torch_device_name() -> Optional[str]:
    """torch.cuda.get_device_name() of the current device, when torch is
    already imported and sees a GPU; None otherwise (never raises)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return str(torch.cuda.get_device_name())
    except Exception:  # noqa: BLE001 - no GPU name is no MFU, never an error in a training job
        return None


# Session(...)'s options, one dict per keyword in the signature's order:
# name, type, default, range, values, doc, flag (gpuscope run's) and the
# default the C++ Options{} holds. Defined once, in C (bindings/session_options.cc);
# the signature, the docstring's argument list and `gpuscope run`'s flags come
# from it.
SESSION_OPTIONS = _gpuscope._SESSION_OPTIONS


def _signature(with_self: bool) -> "inspect.Signature":
    """``Session.__init__``'s signature, from the table: ``window`` by
    position or keyword, every other option keyword-only; ``Session``'s own
    without ``self``."""
    import inspect

    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] if with_self else []
    for i, option in enumerate(SESSION_OPTIONS):
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD if i == 0 else inspect.Parameter.KEYWORD_ONLY
        params.append(inspect.Parameter(option["name"], kind, default=option["default"],
                                        annotation=option["type"]))
    return inspect.Signature(params, return_annotation="None")


class _TableSignature:
    """``__signature__``, made from the table when first asked for
    (``inspect.signature()``, ``help()``): ``inspect`` costs milliseconds
    that ``import gpuscope`` would otherwise pay in every training job."""

    def __init__(self, with_self: bool) -> None:
        self._with_self = with_self
        self._made: "Optional[inspect.Signature]" = None

    def __get__(self, obj: Any, owner: Any = None) -> "inspect.Signature":
        if self._made is None:
            self._made = _signature(self._with_self)
        return self._made


def _doc(head: str, tail: str) -> str:
    """The class docstring: ``head`` with the signature filled in, the
    argument list from the table, then ``tail``."""
    names = [f"{o['name']}={o['default']!r}" for o in SESSION_OPTIONS]
    signature = f"Session({names[0]}, *, {', '.join(names[1:])})"
    items = "\n".join(textwrap.fill(f"* ``{o['name']}``: {o['doc']}", width=74, initial_indent="    ",
                                    subsequent_indent="      ") for o in SESSION_OPTIONS)
    signature = textwrap.fill(f"``{signature}``.", width=74, subsequent_indent="    ")
    return head.format(signature=signature) + "    Arguments:\n\n" + items + "\n\n" + tail


_DOC_HEAD = """Records the steps and phases of one training loop.

    {signature} Every argument has a default;
    only ``window`` may be given by position. Invalid values raise
    ``ValueError`` (saying the accepted range), values of the wrong type
    ``TypeError``; ``GPUSCOPE_DISABLE=1`` makes every scope a no-op.

"""

_DOC_TAIL = """    ``reset(warmup=None)`` restarts measurement (after a warm-up the loop
    defines itself, between epochs or configurations); see its docstring.

    One thread records into a session: the first one that opens a scope. Use
    it from another thread and ``GpuscopeError`` says so. ``summary()``,
    ``report()``, ``diagnose()`` and ``reset()`` are safe from any thread.

    The hot methods come straight from C: ``phase(name)`` returns a cached
    context manager (also a decorator) per name, ``step(samples=None,
    tokens=None)`` a step context manager (also a decorator), and
    ``steps(iterable, samples=None, tokens=None)`` an iterator that makes each
    item one step, the wait inside ``next()`` being phase ``"data"``, and
    whose ``len()`` is the iterable's when it has one (so ``tqdm`` shows a
    total). ``samples``/``tokens`` there may be ints or
    ``callable(batch) -> int``.

    Distributed jobs (docs/distributed.md): under torchrun, Slurm or MPI, or
    once ``torch.distributed`` is initialized, the summary carries the rank
    (``summary().rank``), and every ``rank_interval`` seconds the ranks
    exchange a small record of their windows over torch.distributed's store,
    on a background thread, each waiting at most ``rank_timeout_s`` for the
    others: ``summary().ranks`` compares them and ``diagnose()`` names a
    straggler on every rank.
    """


class Session(_gpuscope._Session):
    __doc__ = _doc(_DOC_HEAD, _DOC_TAIL)
    __signature__ = _TableSignature(with_self=False)

    __slots__ = ()

    if not TYPE_CHECKING:  # type checkers read the signature of _Session.__init__ in the stub
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            # The C type parses and checks every option (SESSION_OPTIONS);
            # only the GPU's name for the peak table comes from Python (torch).
            if (kwargs.get("device_name") is None and not kwargs.get("peak_flops")
                    and (kwargs.get("flops_per_step") or kwargs.get("flops_per_sample"))):
                kwargs["device_name"] = _torch_device_name()
            super().__init__(*args, **kwargs)
            self._join_job()
            try:
                _memory.watch(self)
            except Exception:  # noqa: BLE001 - no thread (a pid limit): no memory, never no session
                pass
            try:
                from . import _stalls

                _stalls.watch(self)
            except Exception:  # noqa: BLE001 - no thread: stalls found, not said; never no session
                _gpuscope._log_once("stalls:thread", "the stall watch could not start a thread: "
                                    "stalls are kept in summary().stalls but not said as they happen")


    def _join_job(self) -> bool:
        """Sets the rank when this process is in a job, and joins the
        periodic exchange once (from then on the exchange keeps the rank up
        to date). Whether it is in a job."""
        from . import _dist, _ranks

        if not self.recording:
            return False
        ident = _dist.identity()
        if ident is None:
            return False
        if _ranks.attached(self):
            return True
        try:
            _gpuscope._set_rank(self, ident.rank, ident.local_rank, ident.world_size,
                                ident.host[:63])
        except ValueError:  # a closed session or an odd identity: nothing to join
            return False
        options = self._options  # rank_interval and rank_timeout_s, None where not set
        return _ranks.attach(self, options["rank_interval"], options["rank_timeout_s"])

    def sync_ranks(self, timeout_s: float = 10.0) -> Any:
        """Exchanges rank records now (every rank calls it, e.g. at the end
        of training) and waits for the other ranks at most ``timeout_s``
        seconds; ``summary().ranks`` then holds what every rank that
        answered sent. Returns ``ExchangeResult(heard, missing, seconds)``
        (``.ok`` when every rank answered), or None outside an initialized
        ``torch.distributed`` job. Never raises for a rank that died or
        never made a session: it is missing."""
        from . import _ranks

        self._join_job()
        return _ranks.sync(self, timeout_s)

    def close(self) -> None:
        """Stops recording and flushes; leaves the rank exchange. Idempotent."""
        from . import _ranks

        super().close()
        _ranks.detach(self)

    def summary(self) -> Summary:
        """A snapshot of the window and the run so far (``gs.Summary``)."""
        self._join_job()
        return _gpuscope.summarize(self)

    def report(self, color: bool = False) -> str:
        """The human report, findings included, at most 80 columns wide
        (``color=True``: ANSI colours, for a terminal)."""
        return _gpuscope.format_report(self.summary(), color)

    def diagnose(self) -> List[Finding]:
        """Findings, ranked by the share of step time they explain."""
        return diagnose_summary(self.summary())

    def step_series(self) -> List[Dict[str, Any]]:
        """The window's steps, oldest first: one dict per step with ``index``,
        ``begin`` and ``duration`` (s), ``phases`` (top-level host time per
        phase, s, ``"other"`` included), ``gpu_idle_pct`` and ``idle_by_cause``
        (s) with a GPU source, and telemetry (``gpu_utilization_pct``,
        ``sm_clock_ratio``, ``host_cpu_pct``, ``host_iowait_pct``,
        ``worker_cores``) and ``memory_peak_bytes`` (the step's peak GPU
        memory allocated, with an allocator source); None where not
        measured."""
        # Built from the columns (a copy of each into Python floats, then a
        # dict per step), four times quicker than parsing the same steps as
        # JSON; key order as ToJson(series) writes them.
        return _series_from_columns(self.step_columns())

    def step_columns(self) -> Dict[str, Any]:
        """The steps ``step_series()`` returns, one column per field: the form
        for long windows and plots (a dict per step is slow to make for
        65,536 steps of 100 phases). A dict of ``array.array``: ``index``
        (``'Q'``), ``begin`` and ``duration`` (``'d'``, s), ``phases`` and
        ``idle_by_cause`` (dicts of name to a column, 0 in a step without
        it; ``"other"`` is the last phase), ``gpu_idle_pct`` and the
        telemetry columns (NaN where not measured). ``numpy.asarray(column)``
        reads one without a copy."""
        raw = self._step_columns()

        def column(data: bytes, code: str = "d") -> "array[Any]":
            a = array(code)
            a.frombytes(data)
            return a

        out: Dict[str, Any] = {k: column(v) for k, v in raw.items() if isinstance(v, bytes)}
        out["index"] = column(raw["index"], "Q")
        for key in ("phases", "idle_by_cause"):
            out[key] = {name: column(data) for name, data in raw[key].items()}
        return out

    def save(self, path: "os.PathLike[str] | str", dataset: Optional[str] = None,
             extra: Optional[Dict[str, Any]] = None, *, mode: Optional[int] = None) -> str:
        """Saves this run (summary, findings, the window's step times, and
        where it ran: command line with secrets redacted, git commit read
        without running git, container image, ``dataset`` id, host, GPUs,
        driver and library versions; see
        docs/baselines.md) for ``gpuscope compare BASE NEW``. Written
        atomically; a new file is private to its owner (0600) unless ``mode``
        says otherwise, an existing one keeps its mode. Under a distributed
        job every rank writes its own file (``run.json`` -> ``run.rank3.json``,
        or say where with ``{rank}``; docs/distributed.md), as every
        ``save_*`` does. Returns the path written.

        A session with no completed step in its window (none ran yet, all
        were warm-up, or ``reset()`` came after the last) still writes the
        file, with a ``UserWarning``: ``gpuscope compare`` refuses such a
        file (exit 2), as a baseline or as the new run."""
        from ._baseline import save_run
        from ._dist import rank_path

        summary = self.summary()
        target = rank_path(path)
        if summary.steps == 0:
            _warn_no_steps(target, summary)
        # The window's step times, for compare's test against noise (a copy
        # of one column; at most `window` doubles).
        times: Optional["array[float]"] = array("d")
        try:
            times.frombytes(self._step_columns()["duration"])  # type: ignore[union-attr]
        except (ValueError, KeyError, _gpuscope.GpuscopeError):  # saved without: compare says so
            times = None
        return save_run(target, summary, dataset=dataset, extra=extra, mode=mode, step_times=times)

    def prometheus(self) -> str:
        """The summary in the Prometheus text exposition format (gauges named
        ``gpuscope_*``; docs/prometheus.md), every sample labelled with the
        job's ``run_id``, ``host`` and ``gpu`` (and ``rank`` in a
        distributed job)."""
        from ._fleet import exposition

        return exposition(self)

    def push_prometheus(self, gateway: Optional[str] = None, *,
                        textfile: "Optional[os.PathLike[str] | str]" = None, job: str = "gpuscope",
                        every: float = 15.0, delete_at_exit: bool = False,
                        timeout_s: float = 5.0) -> Any:
        """Pushes ``prometheus()`` every ``every`` seconds from a daemon thread,
        and once more at exit, for a batch job that nothing scrapes: to a
        Pushgateway (``gateway="http://host:9091"``; grouping key ``job``,
        ``run_id``, ``host`` and ``rank``), and/or atomically to a
        node_exporter textfile (``textfile=".../gpuscope.prom"``, one per
        rank). The final numbers stay unless ``delete_at_exit``. Each request
        is given ``timeout_s``; a failure is said once and tried again, never
        raised. Returns the pusher (``.push()`` now, ``.close()``)."""
        from ._fleet import PrometheusPusher

        return PrometheusPusher(self, gateway, textfile=textfile, job=job, every=every,
                                delete_at_exit=delete_at_exit, timeout_s=timeout_s)

    def export_otlp(self, endpoint: str = "http://localhost:4318/v1/metrics", *, every: float = 15.0,
                    headers: Optional[Dict[str, str]] = None, timeout_s: float = 5.0) -> Any:
        """Sends the same metrics and labels as ``prometheus()`` to an
        OTLP/HTTP receiver (an OpenTelemetry Collector) every ``every``
        seconds from a daemon thread, and once more at exit, through the
        OpenTelemetry SDK (``pip install opentelemetry-sdk
        opentelemetry-exporter-otlp-proto-http``). A failed export is said
        once and tried again, never raised. Returns the exporter
        (``.export()`` now, ``.close()``)."""
        from ._otlp import OtlpExporter

        return OtlpExporter(self, endpoint, every=every, headers=headers, timeout_s=timeout_s)

    def log_to(self, tracker: Any, *, every: int = 100, alerts: bool = False, artifacts: bool = True,
               timeout_s: float = 10.0) -> Any:
        """Logs the session's numbers to an experiment tracker from a daemon
        thread (gpuscope.trackers; docs/integrations.md): a
        ``SummaryWriter`` or ``"tensorboard:DIR"``, a wandb run or
        ``"wandb"``, an MLflow run or ``"mlflow"``, a Lightning logger, or a
        list of these. Every ``every`` steps (0: only on the returned log's
        ``.log(step)``) the scalars at the step, the findings when they
        change; at the end the report and trace as artifacts, and with
        ``alerts`` a W&B alert per new high finding. A tracker that raises
        or takes longer than ``timeout_s`` is said once and switched off,
        never raised. Returns the ``TrackerLog`` (``.log()``,
        ``.close()``)."""
        from .trackers import TrackerLog, sink_for

        return TrackerLog(self, sink_for(tracker), every=every, alerts=alerts, artifacts=artifacts,
                          timeout_s=timeout_s)

    def save_prometheus(self, path: "os.PathLike[str] | str") -> str:
        """Writes ``prometheus()`` to ``path`` atomically (for node_exporter's
        textfile collector: name it ``*.prom``); returns the path. Like every
        file gpuscope writes, it refuses a target that is a link or not a
        regular file (docs/security.md)."""
        from ._dist import rank_path
        from ._files import write_atomically

        return write_atomically(rank_path(path), self.prometheus())

    def serve_prometheus(self, port: int = 0, host: str = "127.0.0.1", *, max_connections: int = 32,
                         timeout_s: float = 10.0) -> "PrometheusServer":
        """Serves ``prometheus()`` at ``http://host:port/metrics`` from one
        daemon thread (``port=0``: any free port; see ``.port``); a summary is
        computed at most every 0.1 s however often it is scraped. Localhost
        only unless ``host`` says otherwise. At most ``max_connections`` open
        at once (a new one closes the oldest), each given ``timeout_s`` to
        send its request and read the answer; nothing is ever printed.
        ``.close()`` stops it. A job that already serves ``prometheus_client``
        can use ``prometheus_collector()`` instead."""
        from ._prometheus import PrometheusServer

        return PrometheusServer(self, host, port, max_connections=max_connections, timeout_s=timeout_s)

    def prometheus_collector(self, labels: Optional[Dict[str, str]] = None) -> Any:
        """A ``prometheus_client`` collector of this session's metrics, for the
        registry the job already serves:
        ``prometheus_client.REGISTRY.register(s.prometheus_collector())``
        (needs ``pip install prometheus-client``). ``labels`` are added to
        every sample: give each session its own when several share a
        registry."""
        from ._prometheus import collector

        return collector(self, labels)

    def save_trace(self, path: "os.PathLike[str] | str") -> str:
        """Writes the last ``trace_steps`` steps as a Chrome trace (open it in
        chrome://tracing or https://ui.perfetto.dev), atomically; returns the
        path."""
        from ._dist import rank_path
        from ._files import write_atomically

        return write_atomically(rank_path(path), self.trace_json())

    def save_html(self, path: "os.PathLike[str] | str", title: str = "gpuscope report") -> str:
        """Writes a self-contained HTML report (summary, findings, and plots:
        step time with p50/p95, phase breakdown, idle by cause, telemetry),
        atomically; needs matplotlib. Returns the path."""
        from ._dist import rank_path
        from ._html import write_html

        return write_html(rank_path(path), self.summary(), self.step_columns(), title=title)

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        state = "recording" if self.recording else "not recording"
        return f"<gpuscope.Session window={self.window} {state}>"


def _warn_no_steps(path: Any, summary: Summary) -> None:
    """``save()``'s warning for a run file that ``gpuscope compare`` will
    refuse: Python's warnings filter shows it once per call site."""
    import warnings

    from ._text import printable

    why = "no step has completed yet"
    if summary.warmup.steps > 0:
        why = (f"every completed step so far ({summary.warmup.steps}) was a warm-up step "
               "(warmup=), which no number counts")
    elif summary.total_steps == 0 and summary.misuse.get("incomplete_steps", 0) > 0:
        why = "every step was left out (records dropped)"
    warnings.warn(
        f"gpuscope: saving {printable(str(path))} with no completed steps ({why}): "
        "`gpuscope compare` will refuse this file as a baseline or new run (exit 2). Save once "
        "the loop has run a step (each step inside s.step() or an iteration of s.steps(loader)), "
        "after the warm-up.", UserWarning, stacklevel=3)


def _torch_stream() -> Optional[int]:
    """torch's current CUDA stream handle, or None. Never imports torch.

    Called from C once per step of a session that times a device and follows
    torch (``stream=None``).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        return int(torch.cuda.current_stream().cuda_stream)
    except Exception:  # an odd torch build: keep the current stream
        return None


def _decorate(cm: Any, fn: Callable[..., Any]) -> Callable[..., Any]:
    """Wraps ``fn`` so every call runs inside context manager ``cm``.

    Called from C when a scope is used as a decorator. Exceptions propagate
    unchanged; the scope is closed on every exit path. Coroutine and
    generator functions are refused: a phase is an interval of the recording
    thread, and one held open across ``await``/``yield`` would interleave with
    whatever else runs meanwhile.
    """
    import inspect

    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn) or inspect.isgeneratorfunction(fn):
        raise TypeError(
            f"gpuscope scopes cannot decorate {fn.__qualname__}: it is a coroutine or generator "
            "function, which would hold the scope open across await/yield. Put "
            "`with s.phase(name):` around the synchronous work inside it instead."
        )

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with cm:
            return fn(*args, **kwargs)

    return wrapper

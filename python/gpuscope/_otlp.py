"""OpenTelemetry metrics out of a session (``Session.export_otlp()``): the
same ``gpuscope_*`` metrics and labels as its Prometheus exposition, sent to
an OTLP/HTTP receiver (an OpenTelemetry Collector, or any backend that takes
OTLP) through the OpenTelemetry SDK, every ``every`` seconds and at exit.

One exposition per export is read back into families (``_fleet.families``):
each family becomes an observable instrument of the SDK, a gauge, or a
counter for the ``*_total`` families (cumulative, monotonic, as Prometheus
reads them), whose data points carry the sample's labels as attributes. The
resource says ``service.name=gpuscope`` and, as ``service.instance.id``, the
job's run id with the rank (or host and pid). Instruments are made on the
exporter's thread before each export (a family can appear later: GPU memory,
stragglers), never inside the SDK's collection; the SDK's own periodic
thread is not used, so that exports happen exactly at ``every`` and at exit.

Needs ``pip install opentelemetry-sdk opentelemetry-exporter-otlp-proto-http``;
gpuscope does not.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from typing import Any, Dict, Iterable, Mapping, Optional

from . import _gpuscope
from ._fleet import Family, Periodic, families, job_labels

# The SDK's loggers that speak of a failed export (a receiver down: a line
# per retry). Without a handler of the job's own, Python's last-resort handler
# would print them on the job's stderr; a NullHandler keeps them to the job's
# logging configuration, and gpuscope says a failure once itself.
_SDK_LOGGERS = ("opentelemetry.exporter.otlp.common.http",
                "opentelemetry.exporter.otlp.proto.http.metric_exporter",
                "opentelemetry.sdk.metrics._internal.export")

_UNITS = (("_seconds", "s"), ("_bytes", "By"), ("_ratio", "1"), ("_cores", "{core}"))


def _unit(name: str) -> str:
    base = name[:-6] if name.endswith("_total") else name
    for suffix, unit in _UNITS:
        if base.endswith(suffix):
            return unit
    return ""


class OtlpExporter(Periodic):
    """``Session.export_otlp()``'s handle: ``export()`` sends now,
    ``close()`` sends the last numbers and shuts the SDK's provider down;
    ``sends`` and ``last_error`` say how it went."""

    what = "exporting OTLP metrics"
    thread_name = "gpuscope-otlp"

    def __init__(self, session: Any, endpoint: str, *, every: float = 15.0,
                 headers: Optional[Mapping[str, str]] = None, timeout_s: float = 5.0) -> None:
        super().__init__(session, every, timeout_s)
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            from opentelemetry.sdk.resources import Resource
        except ImportError as e:
            raise ImportError("gpuscope's OTLP exporter needs the OpenTelemetry SDK: pip install "
                              "opentelemetry-sdk opentelemetry-exporter-otlp-proto-http") from e
        if not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://")):
            raise ValueError(f"endpoint {endpoint!r} is not an http(s):// URL of an OTLP/HTTP receiver "
                             "(an OpenTelemetry Collector's is http://host:4318/v1/metrics)")
        summary = session.summary()
        labels = dict(job_labels(session, summary))
        rank = getattr(summary.rank, "rank", None)
        instance = f"{labels['run_id']}/{rank}" if rank is not None else \
            f"{labels['run_id']}/{labels['host']}/{os.getpid()}"
        resource = Resource.create({"service.name": "gpuscope", "service.instance.id": instance,
                                    "host.name": labels["host"]})
        for name in _SDK_LOGGERS:
            logger = logging.getLogger(name)
            if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
                logger.addHandler(logging.NullHandler())
        exporter = OTLPMetricExporter(endpoint=endpoint, headers=dict(headers or {}), timeout=self._timeout)
        # The reader's force_flush() says True whatever the export did: keep
        # the exporter's own result.
        export = exporter.export
        self._result: Any = None

        def export_and_keep(metrics_data: Any, timeout_millis: float = 10_000, **kwargs: Any) -> Any:
            self._result = export(metrics_data, timeout_millis=timeout_millis, **kwargs)
            return self._result

        exporter.export = export_and_keep  # type: ignore[method-assign]
        self._reader = PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)
        self._provider = MeterProvider(resource=resource, metric_readers=[self._reader], shutdown_on_exit=False)
        from . import __version__

        self._meter = self._provider.get_meter("gpuscope", __version__)
        self._endpoint = endpoint
        self._instruments: Dict[str, Any] = {}
        self._now: Dict[str, Family] = {}  # the families the next collection reports
        self._now_lock = threading.Lock()
        self._start()

    def export(self) -> bool:
        """Exports the session's metrics now; True when the receiver took them."""
        return self.send()

    def _observe(self, name: str) -> Iterable[Any]:
        from opentelemetry.metrics import Observation

        with self._now_lock:
            family = self._now.get(name)
        if family is None:  # gone from this exposition (a GPU number unknown now)
            return []
        return [Observation(value, labels) for labels, value in family.samples]

    def _instrument(self, family: Family) -> None:
        def callback(options: Any, name: str = family.name) -> Iterable[Any]:
            return self._observe(name)

        make = self._meter.create_observable_counter if family.type == "counter" \
            else self._meter.create_observable_gauge
        self._instruments[family.name] = make(family.name, callbacks=[callback], unit=_unit(family.name),
                                              description=family.help)

    def _send(self, session: Any) -> None:
        summary = session.summary()
        text = _gpuscope.prometheus_text(summary, job_labels(session, summary))
        now = {f.name: f for f in families(text)}
        for family in now.values():
            if family.name not in self._instruments:
                self._instrument(family)
        with self._now_lock:
            self._now = now
        from opentelemetry.sdk.metrics.export import MetricExportResult

        self._result = None
        flushed = self._provider.force_flush(timeout_millis=self._timeout * 1000 * 2)
        if not flushed or self._result != MetricExportResult.SUCCESS:
            raise OSError(f"the OTLP receiver at {self._endpoint} did not take the export "
                          f"within {self._timeout:g} s")

    def _end(self) -> None:
        try:
            self._send(self._session)
        finally:
            self._provider.shutdown(timeout_millis=self._timeout * 1000)

    def _where(self) -> str:
        return self._endpoint

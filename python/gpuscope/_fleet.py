"""A job's place in a fleet's metrics, and getting them out where nothing
scrapes (docs/fleet.md).

* ``job_labels(session)``: the labels every Prometheus sample of the session
  carries besides a distributed job's ``rank`` (added by the C++ exposition):
  ``run_id`` (``Session(run_id=...)``, else the launcher's), ``host``, and
  ``gpu`` (the CUDA device the process uses, once torch has initialized
  CUDA). The C++ ``ToPrometheus()`` writes them (``PrometheusOptions``).
* ``PrometheusPusher`` (``Session.push_prometheus()``): the exposition pushed
  to a Pushgateway and/or written to a node_exporter textfile every ``every``
  seconds from one daemon thread, and once more when the process exits (or
  ``close()``), so that a batch job that ends before any scrape still leaves
  its final numbers.

Both run inside someone else's training job: a gateway that is down, slow or
refuses a push is said once on stderr and tried again at the next period,
never raised into the job; every request has a deadline (``timeout_s``), so
the exit push cannot hang the job's exit for longer than that.
"""

from __future__ import annotations

import atexit
import base64
import http.client
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
import weakref
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from . import _gpuscope

_HOST_BYTES = 63  # as a rank record keeps it


def _host() -> str:
    return socket.gethostname()[:_HOST_BYTES]


def run_id(explicit: Optional[str]) -> str:
    """The job's id: ``explicit``, else ``GPUSCOPE_RUN_ID``, torchrun's run
    id, Slurm's job (``<array job>_<task>`` in an array), the Kubernetes
    pod's name, a distributed job's rendezvous address (``MASTER_ADDR:MASTER_PORT``:
    the same on every rank, though not across jobs that reuse it), else one
    made up for this process (``<host>-<pid>-<start time>``)."""
    if explicit:
        return explicit
    # torchrun's TORCHELASTIC_RUN_ID is "none" unless --rdzv-id (or
    # --standalone) gave one.
    env = os.environ
    if env.get("GPUSCOPE_RUN_ID"):
        return env["GPUSCOPE_RUN_ID"][:256]
    torchrun = env.get("TORCHELASTIC_RUN_ID", "")
    if torchrun and torchrun != "none":
        return torchrun[:256]
    if env.get("SLURM_ARRAY_JOB_ID") and env.get("SLURM_ARRAY_TASK_ID"):
        return f"{env['SLURM_ARRAY_JOB_ID']}_{env['SLURM_ARRAY_TASK_ID']}"[:256]
    if env.get("SLURM_JOB_ID"):
        return env["SLURM_JOB_ID"][:256]
    if env.get("KUBERNETES_SERVICE_HOST") and env.get("HOSTNAME"):
        return env["HOSTNAME"][:256]
    if env.get("MASTER_ADDR") and env.get("MASTER_PORT") and env.get("WORLD_SIZE", "1") != "1":
        return f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}"[:256]
    return f"{_host()}-{os.getpid()}-{int(_PROCESS_START)}"


_PROCESS_START = time.time()


def _cuda_device() -> Optional[int]:
    """torch's current CUDA device once torch has initialized CUDA, else
    None. Never imports torch or initializes CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
        return int(torch.cuda.current_device())
    except Exception:  # noqa: BLE001 - no gpu label is no error in a training job
        return None


def job_labels(session: Any, summary: Any = None) -> List[Tuple[str, str]]:
    """``[("run_id", ...), ("host", ...), ("gpu", ...)]`` for ``session``'s
    samples (``gpu`` only once CUDA is in use); the host is the rank's, as
    the ranks exchange it, in a distributed job (``summary.rank``). A few
    environment lookups: cheap next to the summary they label."""
    rank = getattr(summary, "rank", None)
    host = rank.host if rank is not None and rank.host else _host()
    labels = [("run_id", run_id(session._options.get("run_id"))), ("host", host)]
    gpu = _cuda_device()
    if gpu is not None:
        labels.append(("gpu", str(gpu)))
    return labels


def exposition(session: Any) -> str:
    """``session``'s summary as Prometheus text, with its job's labels."""
    summary = session.summary()
    return _gpuscope.prometheus_text(summary, job_labels(session, summary))


# -- Pushing -------------------------------------------------------------------


def _segment(name: str, value: str) -> str:
    """A grouping-key path segment: ``/name/value``, or base64 (URL-safe) when
    the value is empty or holds a character a path segment cannot."""
    if value and all(c.isalnum() or c in "-_.:" for c in value):
        return f"/{name}/{value}"
    return f"/{name}@base64/{base64.urlsafe_b64encode(value.encode()).decode() or '='}"


def _gateway(url: str) -> Tuple[str, str, int, str]:
    """(scheme, host, port, base path) of a Pushgateway URL (``host:port``
    alone means http); ValueError saying what is wrong."""
    if "://" not in url:
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"gateway {url!r} is not an http(s)://host:port address of a Pushgateway")
    if parts.query or parts.fragment or parts.username:
        raise ValueError(f"gateway {url!r}: give http(s)://host:port[/path], without a query, "
                         "fragment or credentials")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as e:
        raise ValueError(f"gateway {url!r}: {e}") from None
    return parts.scheme, parts.hostname, port, parts.path.rstrip("/")


def check_gateway(url: str) -> Optional[str]:
    """What is wrong with a Pushgateway URL, or None."""
    try:
        _gateway(url)
    except ValueError as e:
        return str(e)
    return None


def _check_seconds(name: str, value: Any, low: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= low \
            or value == float("inf"):
        raise ValueError(f"{name} must be a finite number of seconds >= {low}, not {value!r}")
    return float(value)


class Periodic:
    """What the pusher and the OTLP exporter share: ``send()`` every
    ``every`` seconds from one daemon thread and once more at exit (or
    ``close()``), one at a time, never in a forked child; a failure said once
    (``what``), kept in ``last_error``, tried again at the next period; the
    session held until the end, since the final send needs it and a batch
    job's main() has long let it go by then."""

    what = "sending metrics"
    thread_name = "gpuscope-push"

    def __init__(self, session: Any, every: float, timeout_s: float) -> None:
        self._every = _check_seconds("every", every, 0.1)
        self._timeout = _check_seconds("timeout_s", timeout_s, 0.01)
        self._session: Any = session
        self._pid = os.getpid()
        self._lock = threading.Lock()  # one send at a time
        self._stop = threading.Event()
        self._closed = False
        self._said = False
        self.sends = 0
        self.last_error: Optional[str] = None

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)
        self._thread.start()
        _live.add(self)

    # What a subclass does: one send (raises on failure), and the end.
    def _send(self, session: Any) -> None:
        raise NotImplementedError

    def _end(self) -> None:
        """After the thread stopped, instead of the final send (a subclass
        that deletes at exit)."""
        self._send(self._session)

    def send(self) -> bool:
        """Sends now; True when it took. Never raises."""
        with self._lock:
            return self._send_locked()

    def _send_locked(self, final: bool = False) -> bool:
        session = self._session
        if session is None or os.getpid() != self._pid:
            return False
        try:
            if final:
                self._end()
            else:
                self._send(session)
        except Exception as e:  # noqa: BLE001 - never raise into the training job
            self.last_error = f"{type(e).__name__}: {e}"[:500]
            if not self._said:
                self._said = True
                _gpuscope._log_once(f"{self.thread_name}:{id(self)}",
                                    f"{self.what} failed ({self.last_error}); each later one tries again "
                                    f"(every {self._every:g} s and at exit)")
            return False
        self.sends += 1
        self.last_error = None
        return True

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.send()

    def close(self) -> None:
        """The final send (or the subclass's end) and the thread stopped. Runs
        at interpreter exit by itself; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(self._timeout + 1)
        with self._lock:
            self._send_locked(final=True)
            self._session = None  # the session may go now
        _live.discard(self)

    def __enter__(self) -> "Periodic":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def _where(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"every {self._every:g} s"
        return f"<gpuscope.{type(self).__name__} to {self._where()}, {state}, {self.sends} sent>"


class PrometheusPusher(Periodic):
    """``Session.push_prometheus()``'s handle: pushes the session's metrics
    every ``every`` seconds and at exit. ``push()`` pushes now; ``close()``
    pushes the final numbers (or deletes them, with ``delete_at_exit``) and
    stops. ``pushes`` and ``last_error`` say how it went."""

    what = "pushing Prometheus metrics"
    thread_name = "gpuscope-push"

    def __init__(self, session: Any, gateway: Optional[str], *, textfile: Optional[str] = None,
                 job: str = "gpuscope", every: float = 15.0, delete_at_exit: bool = False,
                 timeout_s: float = 5.0) -> None:
        super().__init__(session, every, timeout_s)
        if gateway is None and textfile is None:
            raise ValueError("push_prometheus() needs a gateway (http://host:9091) or a textfile path")
        if not isinstance(job, str) or not job:
            raise ValueError("job must be a non-empty str")
        self._target = _gateway(gateway) if gateway is not None else None
        self._textfile = os.fspath(textfile) if textfile is not None else None
        self._job = job
        self._delete_at_exit = bool(delete_at_exit)
        self._group: Optional[str] = None  # the grouping key's path last pushed
        self._written: Optional[str] = None  # the textfile last written
        self._start()

    @property
    def pushes(self) -> int:
        return self.sends

    def push(self) -> bool:
        """Pushes the session's metrics now (to the gateway, the textfile or
        both); True when everything took. Never raises."""
        return self.send()

    def _group_path(self, labels: List[Tuple[str, str]], rank: Optional[int]) -> str:
        path = "/metrics" + _segment("job", self._job)
        for name, value in labels:
            if name in ("run_id", "host"):
                path += _segment(name, value)
        if rank is not None:
            path += _segment("rank", str(rank))
        return path

    def _request(self, method: str, path: str, body: bytes = b"") -> None:
        assert self._target is not None
        scheme, host, port, base = self._target
        cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
        conn = cls(host, port, timeout=self._timeout)
        try:
            conn.request(method, base + path, body=body,
                         headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})
            reply = conn.getresponse()
            text = reply.read(2048)
            if reply.status // 100 != 2:
                raise OSError(f"{method} {base + path}: HTTP {reply.status} "
                              f"{text.decode('utf-8', 'replace').strip()[:300]}")
        finally:
            conn.close()

    def _send(self, session: Any) -> None:
        summary = session.summary()
        labels = job_labels(session, summary)
        text = _gpuscope.prometheus_text(summary, labels)
        rank = summary.rank.rank if summary.rank is not None else None
        if self._textfile is not None:
            from ._dist import rank_path
            from ._files import write_atomically

            self._written = write_atomically(rank_path(self._textfile), text)
        if self._target is not None:
            group = self._group_path(labels, rank)
            self._request("PUT", group, text.encode())
            if self._group is not None and self._group != group:
                # The key changed (the rank became known): the old group
                # would stay in the gateway as a stale copy.
                self._request("DELETE", self._group)
            self._group = group

    def _end(self) -> None:
        if not self._delete_at_exit:
            self._send(self._session)
            return
        if self._target is not None and self._group is not None:
            self._request("DELETE", self._group)
        if self._written is not None:
            os.unlink(self._written)

    def _where(self) -> str:
        where = []
        if self._target is not None:
            scheme, host, port, base = self._target
            where.append(f"{scheme}://{host}:{port}{base}")
        if self._textfile is not None:
            where.append(self._textfile)
        return " and ".join(where)


# -- The exposition read back (for OTLP) ---------------------------------------

_SAMPLE = re.compile(r'([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


class Family(NamedTuple):
    name: str
    type: str  # "gauge" or "counter"
    help: str
    samples: List[Tuple[Dict[str, str], float]]


def families(text: str) -> List[Family]:
    """The families of an exposition ``ToPrometheus()`` wrote (HELP and TYPE
    before each family's samples; no timestamps)."""
    out: List[Family] = []
    helps: Dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            helps[name] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            out.append(Family(name, kind, helps.get(name, ""), []))
        elif line and not line.startswith("#"):
            m = _SAMPLE.match(line)
            if m is None or not out or m.group(1) != out[-1].name:
                raise ValueError(f"not a sample of the family before it: {line[:200]!r}")
            labels = {k: re.sub(r"\\[\\\"n]", lambda e: _UNESCAPE[e.group(0)], v)
                      for k, v in _LABEL.findall(m.group(2) or "")}
            out[-1].samples.append((labels, float(m.group(3))))
    return out


_live: "weakref.WeakSet[Periodic]" = weakref.WeakSet()


@atexit.register
def _close_at_exit() -> None:
    for pusher in list(_live):
        pusher.close()

"""Prometheus exposition of a session, two ways:

* ``PrometheusServer`` (``Session.serve_prometheus()``): a small scrape
  endpoint serving ``/metrics`` (and ``/``) from inside the training job;
* ``collector(session)``: a ``prometheus_client`` collector, for a job that
  already serves a registry of its own.

The endpoint runs inside someone else's training job, so it must never crash,
hang, slow or leak resources there, whatever its clients do. Hence its design:

* One daemon thread running a ``selectors`` (epoll) loop over non-blocking
  sockets. An idle connection costs one file descriptor and no thread; with
  nothing to do the thread sleeps in ``epoll_wait`` (no polling interval).
* At most ``max_connections`` connections (default 32, and never more than
  1/8 of the process's file-descriptor limit). When one more arrives, the
  oldest connection is closed to make room (one whose request is complete
  and being answered is kept). Connections are read as soon as they are
  accepted, so a real scraper, which sends its request at once, is answered
  while idle connections hold every slot; refusing newcomers instead would let
  a few idle connections lock the scraper out.
* Each connection has one deadline, ``timeout_s`` (default 10 s) after it
  was accepted, for receiving the request head *and* sending the response:
  an idle client, one trickling its request byte by byte, and one that never
  reads the response are all closed by then. Connections are kept in accept
  order, which is also deadline order, so expiry is O(1) and the loop sleeps
  until exactly the next deadline.
* The request head is capped at ``max_request_bytes`` (default 8 KiB; more is
  answered 431). HTTP/1.0 and 1.1 ``GET``/``HEAD`` of ``/metrics`` or ``/``
  get 200; other paths 404, other methods 405, malformed requests 400. Every
  response carries ``Content-Length`` and ``Connection: close``; no
  keep-alive, so a connection serves one request and ends.
* Nothing is ever written to stderr: socket errors (reset, broken pipe,
  ...) close that connection silently, a failing ``session.prometheus()`` is
  a 500 with a short body, and an unexpected error in the loop stops the
  endpoint silently (see ``repr()``) rather than raise in the job. Sends use
  ``MSG_NOSIGNAL``, so even a job that restored the default SIGPIPE action is
  not killed by a client that went away.
* The loop never spins: when ``accept()`` fails for want of resources
  (EMFILE, ENFILE, ENOBUFS, ENOMEM) the listening socket leaves the selector
  for a back-off growing from 20 ms to 0.5 s; connections wait in the
  kernel's backlog meanwhile, costing the job nothing.
* The body is computed on the loop thread without holding the loop's lock
  (``session.prometheus()`` is thread-safe and takes well under a
  millisecond); requests completed in the same pass share one body, and a
  body is reused for ``cache_s`` seconds (default 0.1 s; 0: fresh body per
  scrape), which bounds what a flood of scrapes can cost the job.
* ``close()`` stops accepting, closes the listening socket and every client
  connection and joins the thread; a connection accepted before it gets no
  answer after it (its reply, if not already sent, never is). Idempotent.
* In a forked child (a DataLoader worker, say) the inherited copies of the
  endpoint's sockets are closed at once, so the port is freed when the parent
  closes the endpoint and connections end when the parent ends them.

Why not ``prometheus_client``'s own server: serving ``/metrics`` with
``prometheus_client.start_http_server`` (0.26.0: a ``ThreadingWSGIServer``)
over a registry holding a collector of the session's families, with this
class's argument checks, thread name and ``close()`` (``shutdown()``, then
``server_close()``) around it, fails these tests of
tests/python/test_prometheus.py, and still fails them with a handler
``timeout`` of ``timeout_s`` and wsgiref's error output silenced:

* ``test_idle_connections_cost_no_threads_and_a_scrape_is_still_answered``,
  ``test_idle_connections_never_take_the_jobs_descriptors``: a thread and a
  descriptor per connection, without bound (200 idle clients: 202 threads;
  under a 128-descriptor limit the job's own ``open()`` fails);
* ``test_idle_and_trickling_clients_are_disconnected_after_the_timeout``: no
  deadline; a socket timeout bounds each read, not the request, so a client
  sending a byte every 20 ms keeps its thread for ever;
* ``test_at_the_descriptor_limit_the_accept_loop_backs_off_instead_of_spinning``:
  when ``accept()`` fails (EMFILE) ``serve_forever`` retries at once, 0.65 to
  1 s of CPU a second;
* ``test_close_answers_nobody_frees_the_port_and_joins_the_thread``:
  ``shutdown()`` stops accepting, but a request being read is still answered;
* ``test_a_forked_child_does_not_keep_the_port_open``: the child's copy of the
  listening socket keeps the port open;
* ``test_the_protocol``: ``HEAD`` is 405, every path 200, header lines up to
  64 KiB accepted (no 431), a one-word request line gets an HTTP/0.9 answer,
  and the body is rendered again from the parsed families (``1`` becomes
  ``1.0``, labels sorted) rather than served as ``session.prometheus()``
  wrote it.

The first five points follow from how ``socketserver`` works (one blocking thread per
connection, an accept loop with no back-off), not from options; meeting them
means writing the loop above again. (The other hardening is within reach:
silenced, ``test_nothing_is_printed_whatever_the_clients_do`` passes; with a
timeout, a client that does not read a real exposition is cut off, though
``test_a_client_that_does_not_read_the_response_is_cut_off`` still fails, its
16 MiB of "x" being no exposition the collector can parse, so a 500; the 404
of other paths and errors naming the host and port would be a wrapper's.) So
the endpoint is this module's own, and it does not use
``prometheus_client``: installed or not, ``serve_prometheus()`` serves the same
bytes. Only ``collector()`` needs it (and says how to install it), for a job
that serves a ``prometheus_client`` registry already and wants no second port.
"""

from __future__ import annotations

import errno
import math
import operator
import os
import re
import selectors
import socket
import threading
import time
import weakref
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_THREAD_NAME = "gpuscope-prometheus"
_PATHS = (b"/metrics", b"/")
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_MSG_NOSIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)
_BACKLOG = 1024  # pending connections cost the job nothing (no descriptor); the kernel caps it
_RECV_CHUNK = 65536
_DRAIN_LIMIT = 256 * 1024  # read at most this much unread input before closing
_ACCEPT_BACKOFF_MIN_S = 0.02
_ACCEPT_BACKOFF_MAX_S = 0.5
_CLOSE_TIMEOUT_S = 5.0
_FD_SHARE = 8  # never hold more than 1/8 of the process's file-descriptor limit
_RESOURCE_ERRNOS = frozenset(
    getattr(errno, name) for name in ("EMFILE", "ENFILE", "ENOBUFS", "ENOMEM") if hasattr(errno, name))

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    505: "HTTP Version Not Supported",
}

_READING, _PENDING, _WRITING = 0, 1, 2
_LISTEN, _WAKE = object(), object()  # selector data for the two non-client sockets


class _Conn:
    """One client connection and where its exchange stands."""

    __slots__ = ("sock", "fd", "deadline", "inbuf", "out", "state", "head_only", "writing")

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.deadline = deadline
        self.inbuf = bytearray()
        self.out: Optional[memoryview] = None
        self.state = _READING
        self.head_only = False
        self.writing = False  # registered for EVENT_WRITE


def _response(status: int, body: bytes, head_only: bool, content_type: str = "text/plain; charset=utf-8",
              extra: str = "") -> bytes:
    head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            f"{extra}"
            "Connection: close\r\n\r\n").encode("ascii")
    return head if head_only else head + body


def _check_args(host: Any, port: Any, max_connections: Any, timeout_s: Any, max_request_bytes: Any,
                cache_s: Any) -> Tuple[int, int, float, int, float]:
    if not isinstance(host, str):
        raise TypeError(f"gpuscope: host must be a str such as '127.0.0.1', not {type(host).__name__}")
    if isinstance(port, bool):
        raise TypeError("gpuscope: port must be an int in 0..65535 (0: any free port), not bool")
    try:
        port = operator.index(port)
    except TypeError:
        raise TypeError(f"gpuscope: port must be an int in 0..65535 (0: any free port), "
                        f"not {type(port).__name__}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"gpuscope: port must be in 0..65535 (0: any free port), not {port}")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise ValueError(f"gpuscope: max_connections must be an int >= 1, not {max_connections!r}")
    if isinstance(max_request_bytes, bool) or not isinstance(max_request_bytes, int) or max_request_bytes < 64:
        raise ValueError(f"gpuscope: max_request_bytes must be an int >= 64, not {max_request_bytes!r}")
    try:
        timeout = float(timeout_s)
        cache = float(cache_s)
    except (TypeError, ValueError):
        raise ValueError(f"gpuscope: timeout_s and cache_s must be numbers, not {timeout_s!r}, {cache_s!r}") from None
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"gpuscope: timeout_s must be a finite number of seconds > 0, not {timeout_s!r}")
    if not (math.isfinite(cache) and cache >= 0):
        raise ValueError(f"gpuscope: cache_s must be a finite number of seconds >= 0, not {cache_s!r}")
    return port, max_connections, timeout, max_request_bytes, cache


def _fd_capped(requested: int) -> int:
    """``requested``, lowered to 1/8 of the soft RLIMIT_NOFILE (at least 1)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY or soft <= 0:
            return requested
    except Exception:  # noqa: BLE001 - no resource module (or no limit): nothing to respect
        return requested
    return max(1, min(requested, soft // _FD_SHARE))


def _listen(host: str, port: int) -> socket.socket:
    """A non-blocking socket listening on host:port; a clear error if not."""
    try:
        infos = socket.getaddrinfo(host or None, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                                   socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError, ValueError) as e:
        raise ValueError(f"gpuscope: cannot serve Prometheus on host {host!r}: "
                         f"{getattr(e, 'strerror', None) or e}") from None
    last: Optional[OSError] = None
    for family, kind, proto, _, addr in infos:
        try:
            sock = socket.socket(family, kind, proto)
        except OSError as e:
            last = e
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # rebinding is not blocked by TIME_WAIT
            sock.bind(addr)
            sock.listen(_BACKLOG)
            sock.setblocking(False)
            return sock
        except OSError as e:
            sock.close()
            last = e
    code = last.errno if last is not None and last.errno else errno.EADDRNOTAVAIL
    reason = (last.strerror if last is not None and last.strerror else None) or os.strerror(code)
    raise OSError(code, f"gpuscope: cannot serve Prometheus on {host!r} port {port}: {reason}")


class PrometheusServer:
    """Serves ``session.prometheus()`` at ``url`` (``/metrics``; ``/`` too)
    from one daemon thread; ``close()`` stops it.

    ``PrometheusServer(session, host="127.0.0.1", port=0, *,
    max_connections=32, timeout_s=10.0, max_request_bytes=8192, cache_s=0.1)``:
    ``port=0`` takes any free port (see ``.port``); localhost only unless
    ``host`` says otherwise (``""``: every interface). At most
    ``max_connections`` connections at a time (and at most 1/8 of the file
    descriptor limit; ``.max_connections`` is the number in force), the
    oldest closed to make room for a new one; each must send its request and
    take the response within ``timeout_s`` of being accepted; request heads
    over ``max_request_bytes`` get 431; a body is reused for ``cache_s``
    seconds. A bad host or port raises ``TypeError``/``ValueError``; one that
    cannot be bound (in use, not local) ``OSError``."""

    def __init__(self, session: Any, host: str = "127.0.0.1", port: int = 0, *, max_connections: int = 32,
                 timeout_s: float = 10.0, max_request_bytes: int = 8192, cache_s: float = 0.1) -> None:
        port, max_connections, timeout, max_request, cache = _check_args(
            host, port, max_connections, timeout_s, max_request_bytes, cache_s)
        self._owner = session
        self.host = host
        self.max_connections = _fd_capped(max_connections)
        self.timeout_s = timeout
        self.max_request_bytes = max_request
        self.cache_s = cache

        self._lock = threading.Lock()  # held by the loop while it touches sockets; close() takes it to stop it
        self._closing = False  # set under _lock: the loop sends and accepts nothing more
        self._closed = False  # close() was called (or we are a forked child)
        self._torn_down = False
        self._failure: Optional[str] = None
        self._conns: "OrderedDict[int, _Conn]" = OrderedDict()  # accept order == deadline order
        self._accept_resume_at: Optional[float] = None
        self._accept_backoff = _ACCEPT_BACKOFF_MIN_S
        self._cached_body: Optional[bytes] = None
        self._cached_at = -math.inf
        self._have_cache = False

        self._lsock = _listen(host, port)
        self._wake_r: Optional[socket.socket] = None
        self._wake_w: Optional[socket.socket] = None
        self._sel: Optional[selectors.BaseSelector] = None
        try:
            addr = self._lsock.getsockname()
            self.port = int(addr[1])
            shown = host or addr[0]
            if ":" in shown:
                shown = f"[{shown}]"
            self.url = f"http://{shown}:{self.port}/metrics"
            self._wake_r, self._wake_w = socket.socketpair()
            self._wake_r.setblocking(False)
            self._wake_w.setblocking(False)
            self._sel = selectors.DefaultSelector()
            self._sel.register(self._lsock, selectors.EVENT_READ, _LISTEN)
            self._sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
            self._thread = threading.Thread(target=self._run, name=_THREAD_NAME, daemon=True)
            self._thread.start()
        except BaseException:
            self._closing = self._closed = True
            self._teardown()
            raise
        _LIVE.add(self)

    # -- public -----------------------------------------------------------

    def close(self) -> None:
        """Stops serving: no more accepts, the listening socket and every
        client connection closed (none answered after this), the thread
        joined, the port free. Idempotent."""
        if self._closed:
            return
        self._closed = True
        got = self._lock.acquire(timeout=_CLOSE_TIMEOUT_S)
        try:
            self._closing = True
            if got and self._wake_w is not None:
                try:
                    self._wake_w.send(b"\0")
                except OSError:
                    pass  # full (already woken) or gone
        finally:
            if got:
                self._lock.release()
        thread = self._thread
        if thread is not threading.current_thread() and thread.is_alive():
            thread.join(timeout=_CLOSE_TIMEOUT_S)
        self._teardown()  # normally done by the thread already; a no-op then

    def __enter__(self) -> "PrometheusServer":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        state = ""
        if self._closed:
            state = " (closed)"
        elif self._failure is not None:
            state = f" (stopped: {self._failure})"
        return f"<gpuscope.PrometheusServer {self.url}{state}>"

    # -- the loop -----------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException as e:  # noqa: BLE001 - never a traceback in the job: stop quietly
            self._failure = f"{type(e).__name__}: {e}"
        finally:
            try:
                self._teardown()
            except BaseException:  # noqa: BLE001
                pass

    def _loop(self) -> None:
        sel = self._sel
        assert sel is not None
        timeout: Optional[float] = None
        while True:
            events = sel.select(timeout)
            pending: List[_Conn] = []
            with self._lock:
                if self._closing:
                    return
                now = time.monotonic()
                for key, mask in events:
                    what = key.data
                    if what is _LISTEN:
                        self._accept(now, pending)
                    elif what is _WAKE:
                        self._drain_wake()
                    elif isinstance(what, _Conn) and self._conns.get(what.fd) is what:
                        try:
                            self._service(what, mask, pending)
                        except Exception:  # noqa: BLE001 - whatever went wrong, it ends this connection only
                            self._drop(what)
            if pending:
                body = self._body()  # outside the lock: close() is never held up by it
                with self._lock:
                    if self._closing:
                        return
                    for c in pending:
                        if self._conns.get(c.fd) is c:
                            try:
                                self._respond(c, body)
                            except Exception:  # noqa: BLE001
                                self._drop(c)
            with self._lock:
                if self._closing:
                    return
                now = time.monotonic()
                self._expire(now)
                if self._accept_resume_at is not None and now >= self._accept_resume_at:
                    self._accept_resume_at = None
                    try:
                        sel.register(self._lsock, selectors.EVENT_READ, _LISTEN)
                    except KeyError:
                        pass  # still registered
                    except (OSError, ValueError):
                        self._pause_accept(now)  # try again later
                timeout = self._next_timeout(now)

    def _next_timeout(self, now: float) -> Optional[float]:
        wake: Optional[float] = None
        if self._conns:
            wake = next(iter(self._conns.values())).deadline
        if self._accept_resume_at is not None:
            wake = self._accept_resume_at if wake is None else min(wake, self._accept_resume_at)
        return None if wake is None else max(0.0, wake - now)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r is not None and self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _accept(self, now: float, pending: List[_Conn]) -> None:
        for _ in range(max(8, self.max_connections)):  # then back to the others
            try:
                sock, _addr = self._lsock.accept()
            except (BlockingIOError, InterruptedError):
                self._accept_backoff = _ACCEPT_BACKOFF_MIN_S
                return
            except ConnectionAbortedError:
                continue
            except OSError:
                # EMFILE/ENFILE/ENOBUFS/ENOMEM (the job is out of descriptors or
                # memory) or anything unexpected: the socket stays readable, so
                # retrying now would spin. Leave it in the backlog for a while.
                self._pause_accept(now)
                return
            self._accept_backoff = _ACCEPT_BACKOFF_MIN_S
            try:
                sock.setblocking(False)
            except OSError:
                sock.close()
                continue
            if len(self._conns) >= self.max_connections:
                victim = next((c for c in self._conns.values() if c.state != _PENDING), None)
                if victim is None:  # every slot about to be answered: this one waits no better
                    self._close_sock(sock)
                    continue
                self._drop(victim)
            c = _Conn(sock, now + self.timeout_s)
            self._conns[c.fd] = c
            try:
                self._sel.register(sock, selectors.EVENT_READ, c)  # type: ignore[union-attr]
            except (OSError, ValueError, KeyError):
                self._drop(c)
                continue
            try:
                self._read(c, pending)  # a scraper's request is usually there already
            except Exception:  # noqa: BLE001
                self._drop(c)

    def _pause_accept(self, now: float) -> None:
        try:
            self._sel.unregister(self._lsock)  # type: ignore[union-attr]
        except (KeyError, ValueError, OSError):
            pass
        self._accept_resume_at = now + self._accept_backoff
        self._accept_backoff = min(self._accept_backoff * 2, _ACCEPT_BACKOFF_MAX_S)

    def _service(self, c: _Conn, mask: int, pending: List[_Conn]) -> None:
        if c.state == _READING and mask & selectors.EVENT_READ:
            self._read(c, pending)
        elif c.state == _WRITING and mask & selectors.EVENT_WRITE:
            self._write(c)

    def _read(self, c: _Conn, pending: List[_Conn]) -> None:
        room = self.max_request_bytes + 1 - len(c.inbuf)
        try:
            data = c.sock.recv(max(1, min(_RECV_CHUNK, room)))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(c)
            return
        if not data:  # gone before finishing its request
            self._drop(c)
            return
        c.inbuf += data
        self._parse(c, pending)

    def _parse(self, c: _Conn, pending: List[_Conn]) -> None:
        buf = c.inbuf
        start = 0
        while start < len(buf) and buf[start] in (10, 13):  # empty lines before the request line are allowed
            start += 1
        end = _HEAD_END.search(buf, start)
        if end is None and len(buf) <= self.max_request_bytes:
            return  # not all there yet
        if end is None or end.end() > self.max_request_bytes:
            self._reply(c, _response(431, b"request head too large\n", False))
            return
        line = bytes(buf[start:end.start()]).split(b"\n", 1)[0].rstrip(b"\r")
        parts = line.split()
        if len(parts) != 3:
            self._reply(c, _response(400, b"bad request\n", False))
            return
        method, target, version = parts
        if not version.startswith(b"HTTP/1."):
            if version.startswith(b"HTTP/"):
                self._reply(c, _response(505, b"HTTP/1.0 or HTTP/1.1 only\n", False))
            else:
                self._reply(c, _response(400, b"bad request\n", False))
            return
        head_only = method == b"HEAD"
        if method not in (b"GET", b"HEAD"):
            self._reply(c, _response(405, b"GET or HEAD only\n", False, extra="Allow: GET, HEAD\r\n"))
            return
        if target.startswith((b"http://", b"https://")):  # absolute form
            slash = target.find(b"/", target.index(b"//") + 2)
            target = target[slash:] if slash >= 0 else b"/"
        path = target.split(b"?", 1)[0].split(b"#", 1)[0]
        if path not in _PATHS:
            self._reply(c, _response(404, b"gpuscope serves /metrics\n", head_only))
            return
        c.head_only = head_only
        c.state = _PENDING
        pending.append(c)

    def _body(self) -> Optional[bytes]:
        """The exposition as bytes (None: it could not be computed); reused
        for ``cache_s`` seconds."""
        if self._have_cache and time.monotonic() - self._cached_at < self.cache_s:
            return self._cached_body
        try:
            text = self._owner.prometheus()
            body: Optional[bytes] = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        except Exception:  # noqa: BLE001 - a scrape must never take the job down
            body = None
        self._cached_body, self._cached_at, self._have_cache = body, time.monotonic(), True
        return body

    def _respond(self, c: _Conn, body: Optional[bytes]) -> None:
        if body is None:
            self._reply(c, _response(500, b"gpuscope: could not compute the metrics\n", c.head_only))
        else:
            self._reply(c, _response(200, body, c.head_only, CONTENT_TYPE))

    def _reply(self, c: _Conn, data: bytes) -> None:
        c.state = _WRITING
        c.out = memoryview(data)
        self._write(c)

    def _write(self, c: _Conn) -> None:
        out = c.out
        while out is not None and len(out):
            try:
                sent = c.sock.send(out, _MSG_NOSIGNAL)
            except (BlockingIOError, InterruptedError):
                c.out = out
                if not c.writing:
                    try:
                        self._sel.modify(c.sock, selectors.EVENT_WRITE, c)  # type: ignore[union-attr]
                        c.writing = True
                    except (OSError, ValueError, KeyError):
                        self._drop(c)
                return
            except OSError:  # reset, broken pipe, ...: the client is gone
                self._drop(c)
                return
            out = out[sent:]
        c.out = None
        self._drop(c)  # answered: Connection: close

    def _expire(self, now: float) -> None:
        while self._conns:
            c = next(iter(self._conns.values()))
            if c.deadline > now:
                return
            self._drop(c)

    def _drop(self, c: _Conn) -> None:
        if self._conns.get(c.fd) is c:
            del self._conns[c.fd]
        try:
            self._sel.unregister(c.sock)  # type: ignore[union-attr]
        except (KeyError, ValueError, OSError, AttributeError):
            pass
        c.out = None
        self._close_sock(c.sock)

    @staticmethod
    def _close_sock(sock: socket.socket) -> None:
        """Closes a client socket so that the client sees EOF, not a reset:
        input it sent that was never read is read (up to a bound) first."""
        try:
            drained = 0
            while drained < _DRAIN_LIMIT:
                data = sock.recv(_RECV_CHUNK)
                if not data:
                    break
                drained += len(data)
        except OSError:
            pass
        try:
            sock.close()
        except OSError:
            pass

    def _teardown(self) -> None:
        """Closes every socket and the selector. Idempotent."""
        got = self._lock.acquire(timeout=_CLOSE_TIMEOUT_S)
        try:
            if self._torn_down:
                return
            self._torn_down = True
            self._closing = True
            for c in list(self._conns.values()):
                self._drop(c)
            self._conns.clear()
            self._close_quietly([self._lsock, self._wake_r, self._wake_w])
            self._cached_body = None
        finally:
            if got:
                self._lock.release()

    def _abandon_in_child(self) -> None:
        """In a forked child: closes this process's copies of the sockets
        (without reading or shutting down anything: the parent owns the
        connections) so the parent's close() frees the port."""
        self._lock = threading.Lock()  # may have been held by the loop at fork time
        self._closing = self._closed = self._torn_down = True
        socks = [c.sock for c in list(self._conns.values())] + [self._lsock, self._wake_r, self._wake_w]
        self._conns = OrderedDict()
        self._close_quietly(socks)

    def _close_quietly(self, socks: List[Optional[socket.socket]]) -> None:
        """Closes `socks` (None skipped), the wake-up pair's names and the
        selector, ignoring errors: a teardown never raises."""
        for sock in socks:
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
        self._wake_r = self._wake_w = None
        if self._sel is not None:
            try:
                self._sel.close()
            except Exception:  # noqa: BLE001
                pass


_LIVE: "weakref.WeakSet[PrometheusServer]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for server in list(_LIVE):
        try:
            server._abandon_in_child()
        except Exception:  # noqa: BLE001 - never fail a fork
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


# -- prometheus_client ------------------------------------------------------


class PrometheusCollector:
    """A ``prometheus_client`` collector for one or more sessions:
    ``collect()`` parses a fresh ``session.prometheus()`` of each into metric
    families, the same family of several sessions merged into one (told apart
    by their labels). Made by ``collector(session, labels)``; ``add(session,
    labels)`` puts another session in it."""

    def __init__(self, session: Any, parse: Callable[[str], Iterable[Any]],
                 labels: Optional[Dict[str, str]] = None) -> None:
        self._parse = parse
        self._sources: List[Tuple[Any, Dict[str, str]]] = [(session, dict(labels or {}))]
        self.last_error: Optional[str] = None  # why the last collect() yielded nothing, if it did

    def add(self, session: Any, labels: Dict[str, str]) -> "PrometheusCollector":
        """Exposes ``session`` too, its samples carrying ``labels``, which
        must tell it apart from every session already here (one registry
        holds one family of each name). Returns the collector."""
        _check_labels(labels)
        if any(dict(labels) == known for _, known in self._sources):
            raise ValueError(f"labels {labels!r} are already another session's: give each session its own")
        self._sources.append((session, dict(labels)))
        return self

    def collect(self) -> List[Any]:
        """The sessions' metric families; none (and ``last_error`` set) if
        they cannot be computed, so the job's other metrics are still
        served."""
        merged: "OrderedDict[str, Any]" = OrderedDict()
        try:
            for session, labels in self._sources:
                for family in self._parse(session.prometheus()):
                    if labels:
                        family.samples = [x._replace(labels={**labels, **x.labels}) for x in family.samples]
                    if family.name in merged:
                        merged[family.name].samples.extend(family.samples)
                    else:
                        merged[family.name] = family
        except Exception as e:  # noqa: BLE001 - never break the job's own /metrics
            self.last_error = f"{type(e).__name__}: {e}"
            return []
        self.last_error = None
        return list(merged.values())

    def describe(self) -> List[Any]:
        """Nothing: the families depend on what the session measures (no
        GPU numbers without a GPU source), so none are promised up front and
        registering does not compute a summary."""
        return []

    def __repr__(self) -> str:
        return f"<gpuscope.PrometheusCollector for {len(self._sources)} session(s)>"


_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def _check_labels(labels: Optional[Dict[str, str]]) -> None:
    for name, value in (labels or {}).items():
        if not isinstance(name, str) or not _LABEL_NAME.fullmatch(name) or name.startswith("__"):
            raise ValueError(f"label name {name!r} is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*, "
                             "not starting with __)")
        if not isinstance(value, str):
            raise ValueError(f"label {name!r}: its value must be a str, not {type(value).__name__}")


def collector(session: Any, labels: Optional[Dict[str, str]] = None) -> PrometheusCollector:
    """A ``prometheus_client`` collector exposing ``session``'s metrics
    (the ``gpuscope_*`` families of ``session.prometheus()``) from the
    registry the job already serves::

        registry.register(collector(session))   # or prometheus_client.REGISTRY

    ``labels`` are added to every sample. Several sessions go in one
    collector, each with labels of its own (a registry holds one family of
    each name: two collectors of gpuscope families would clash)::

        registry.register(collector(train, {"loop": "train"}).add(evaluation, {"loop": "eval"}))

    Needs ``prometheus_client`` (``pip install prometheus-client``); gpuscope
    itself does not."""
    _check_labels(labels)
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as e:
        raise ImportError("gpuscope's Prometheus collector needs prometheus_client: "
                          "pip install prometheus-client") from e
    return PrometheusCollector(session, text_string_to_metric_families, labels)

"""A scrape endpoint for a session's Prometheus exposition
(``Session.serve_prometheus()``): a small HTTP server on a daemon thread,
serving ``/metrics`` (and ``/``) with a fresh summary per request."""

from __future__ import annotations

import http.server
import threading
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class PrometheusServer:
    """Serves ``session.prometheus()`` at ``url``; ``close()`` stops it."""

    def __init__(self, session: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        owner = session

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                if self.path.split("?")[0] not in ("/metrics", "/"):
                    self.send_error(404, "gpuscope serves /metrics")
                    return
                try:
                    body = owner.prometheus().encode("utf-8")
                except Exception as e:  # noqa: BLE001 - a scrape must never take the job down
                    self.send_error(500, f"gpuscope: {e}")
                    return
                self.send_response(200)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:  # quiet: scrapes are not news
                pass

        self._server = http.server.ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.host = host
        self.port = int(self._server.server_address[1])
        self.url = f"http://{host}:{self.port}/metrics"
        self._thread = threading.Thread(target=self._server.serve_forever, name="gpuscope-prometheus", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stops serving and frees the port. Idempotent."""
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=5)
        self._server.server_close()

    def __enter__(self) -> "PrometheusServer":
        return self

    def __exit__(self, *exc: Any) -> bool:
        self.close()
        return False

    def __repr__(self) -> str:
        return f"<gpuscope.PrometheusServer {self.url}>"

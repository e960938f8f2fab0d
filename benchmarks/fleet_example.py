"""docs/fleet.md's worked example: a real Prometheus (Debian's ``prometheus``,
on localhost) scraping three live loops on the simulated device with the
shipped rules, then every dashboard panel's queries and the alerts, as a
Grafana would show them.

The loops (tests/python/_fleet_loop.py): ``demo-healthy`` keeps the GPU
busy, ``demo-idle`` waits on its loader (GPU idle most of each step),
``demo-hung`` hangs in ``forward`` after ``--healthy`` seconds, and
``demo-host`` runs without the simulated device, for the host's telemetry
(a simulated session has none). The rules are
``gpuscope prometheus rules`` with the durations shortened so that the
example takes a minute (``--idle-for 20s --hung-after 20s``; the shipped ones
are 10 minutes); the queries take ``$__range`` as the run's length.

Usage: python benchmarks/fleet_example.py [--seconds 50] [--healthy 15]
Prints the panels' results (one line per series) and the alerts firing.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import gpuscope.prometheus as gp

ROOT = pathlib.Path(__file__).resolve().parent.parent
LOOP = ROOT / "tests" / "python" / "_fleet_loop.py"
MODES = ("healthy", "idle", "hung", "host")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(base: str, expr: str) -> list:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())["data"]["result"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=50)
    ap.add_argument("--healthy", type=float, default=15, help="seconds before demo-hung hangs")
    args = ap.parse_args()
    prometheus = shutil.which("prometheus")
    if prometheus is None:
        sys.exit("fleet_example: needs Debian's prometheus (make deps-test)")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gpuscope-fleet-"))
    (tmp / "rules.yml").write_text(gp.rules(gp.Thresholds(idle_for="20s", hung_after="20s")))
    loops, ports = [], []
    try:
        for mode in MODES:
            env = dict(os.environ, MODE=mode, RUN_ID=f"demo-{mode}", PORT_FILE=str(tmp / f"{mode}.port"),
                       OUT=str(tmp), HEALTHY_S=str(args.healthy))
            loops.append(subprocess.Popen([sys.executable, str(LOOP)], env=env, stderr=subprocess.DEVNULL))
        for mode in MODES:
            while not (tmp / f"{mode}.port").exists():
                time.sleep(0.05)
            ports.append(int((tmp / f"{mode}.port").read_text()))
        targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
        (tmp / "prometheus.yml").write_text(
            "global: {scrape_interval: 2s, evaluation_interval: 2s}\nrule_files: [rules.yml]\n"
            f"scrape_configs:\n  - job_name: gpuscope\n    static_configs: [{{targets: [{targets}]}}]\n")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen([prometheus, f"--config.file={tmp / 'prometheus.yml'}",
                                   f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            time.sleep(args.seconds)
            report(base, int(args.seconds))
        finally:
            server.kill()
    finally:
        for p in loops:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def report(base: str, seconds: int) -> None:
    print(f"panels (a job's panels for run demo-idle, else demo-host; $__range={seconds}s):")
    for (title, expr, needs), (_, host_expr, _) in zip(
            gp.panel_queries(substitute(seconds, "demo-idle")), gp.panel_queries(substitute(seconds, "demo-host"))):
        result = query(base, expr) or (query(base, host_expr) if host_expr != expr else [])
        if not result:
            print(f"  {title}: no data" + (f" (needs {', '.join(needs)})" if needs else ""))
            continue
        for series in result[:8]:
            labels = {k: v for k, v in series["metric"].items() if k not in ("instance", "job", "__name__")}
            shown = ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or f"[{' '.join(expr.split())[:70]}]"
            print(f"  {title}: {shown} = {float(series['value'][1]):.4g}")
    print("alerts:")
    with urllib.request.urlopen(base + "/api/v1/alerts", timeout=10) as r:
        alerts = json.loads(r.read())["data"]["alerts"]
    for a in sorted(alerts, key=lambda a: (a["labels"]["alertname"], a["labels"].get("run_id", ""))):
        print(f"  {a['state']}: {a['labels']['alertname']} run_id={a['labels'].get('run_id')}: "
              f"{a['annotations']['summary']}")


def substitute(seconds: int, run: str) -> dict:
    return {"$run_id": run, "$rank": ".*", "$__range": f"{seconds}s", "$__interval": "2s",
            "$__interval_ms": "2000"}


if __name__ == "__main__":
    main()

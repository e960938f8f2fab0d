"""The fleet view against the real servers a fleet runs, started on localhost
(Debian's prometheus, promtool, prometheus-pushgateway and
prometheus-node-exporter; `make deps-test` installs them): the shipped rules
unit-tested by promtool, a real Prometheus scraping live loops with those rules
and every dashboard query, a batch job's pushes to a Pushgateway, and the
node_exporter textfile. Without the servers the tests skip, unless
GPUSCOPE_REQUIRE_FLEET is set (make test sets it), when they fail."""

import json
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest

import gpuscope as gs
import gpuscope.prometheus as gp

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
LOOP = HERE / "_fleet_loop.py"
UNIT_TESTS = ROOT / "tests" / "prometheus" / "alerts_test.yml"
SHIPPED = ROOT / "python" / "gpuscope" / "prometheus" / "alerts.yml"


def tool(name):
    path = shutil.which(name)
    if path is None:
        if os.environ.get("GPUSCOPE_REQUIRE_FLEET"):
            pytest.fail(f"{name} not found, and GPUSCOPE_REQUIRE_FLEET is set (make deps-test installs it)")
        pytest.skip(f"{name} not installed (make deps-test)")
    return path


def need_otel():
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
        import opentelemetry.sdk  # noqa: F401
    except ImportError:
        if os.environ.get("GPUSCOPE_REQUIRE_FLEET"):
            pytest.fail("the OpenTelemetry SDK is not installed, and GPUSCOPE_REQUIRE_FLEET is set")
        pytest.skip("the OpenTelemetry SDK is not installed (make deps-test)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


def start(cmd, ready_url, log, timeout=30.0):
    """A server process, once ready_url answers 200."""
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.poll() is not None:
            pytest.fail(f"{cmd[0]} exited with {p.returncode}: {pathlib.Path(log.name).read_text()[-2000:]}")
        try:
            get(ready_url, timeout=1)
            return p
        except OSError:
            time.sleep(0.1)
    p.kill()
    pytest.fail(f"{cmd[0]} did not answer {ready_url} within {timeout} s")


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGKILL)
    p.wait(10)


def loop_env(**env):
    out = dict(os.environ)
    out.update({k: str(v) for k, v in env.items()})
    return out


def run_loop(**env):
    return subprocess.run([sys.executable, str(LOOP)], env=loop_env(**env), capture_output=True, text=True,
                          timeout=60)


# -- The rules, through promtool ------------------------------------------------


def test_the_shipped_rules_are_the_generated_defaults_and_promtool_accepts_them(tmp_path):
    promtool = tool("promtool")
    assert SHIPPED.read_text() == gp.rules(), "regenerate alerts.yml: gpuscope prometheus rules > ..."
    installed = pathlib.Path(gp.shipped_rules_path())
    assert installed.read_text() == gp.rules(), "the installed package ships alerts.yml"
    r = subprocess.run([promtool, "check", "rules", str(SHIPPED)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 14 rules found" in r.stdout
    cli = subprocess.run([sys.executable, "-m", "gpuscope", "prometheus", "rules"], capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout == gp.rules()


def test_every_alert_fires_on_its_planted_series_and_not_on_healthy_ones(tmp_path):
    promtool = tool("promtool")
    r = subprocess.run([promtool, "test", "rules", str(UNIT_TESTS)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # The unit tests bite: rules with other thresholds fail them.
    (tmp_path / "alerts.yml").write_text(gp.rules(gp.Thresholds(idle_ratio=0.85, hung_after="20m")))
    tests = UNIT_TESTS.read_text().replace("../../python/gpuscope/prometheus/alerts.yml", "alerts.yml")
    (tmp_path / "t.yml").write_text(tests)
    r = subprocess.run([promtool, "test", "rules", str(tmp_path / "t.yml")], capture_output=True, text=True)
    assert r.returncode != 0
    failed = (r.stdout + r.stderr).count("alertname: ")
    assert "alertname: GpuscopeGpuIdle" in r.stdout + r.stderr and "alertname: GpuscopeJobHung" in r.stdout + r.stderr
    assert failed == 3, r.stdout


BASELINE_TEST = """
rule_files: [rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'gpuscope_step_time_seconds{run_id="resnet-7",rank="0",quantile="0.95"}'
        values: '0.25x30'
      - series: 'gpuscope_step_time_seconds{run_id="resnet-8",rank="0",quantile="0.95"}'
        values: '0.21x30'
      - series: 'gpuscope_step_time_seconds{run_id="bert-1",rank="0",quantile="0.95"}'
        values: '0.9x30'
    alert_rule_test:
      - eval_time: 20m
        alertname: GpuscopeStepTimeAboveBaseline
        exp_alerts:
          - exp_labels: {severity: warning, baseline: resnet, run_id: resnet-7}
            exp_annotations:
              summary: "p95 step time of run resnet-7 250ms, over 1.1x baseline resnet's 0.2 s"
              description: "The slowest rank's p95 step time is more than 1.1x the saved baseline resnet's. gpuscope compare says which phase grew."
    promql_expr_test:
      - expr: gpuscope:baseline_step_time_p95_seconds
        eval_time: 1m
        exp_samples:
          - labels: 'gpuscope:baseline_step_time_p95_seconds{baseline="resnet"}'
            value: 0.2
"""


def test_a_saved_baseline_becomes_a_recording_rule_and_an_alert_for_its_runs(tmp_path):
    promtool = tool("promtool")
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock)
    for _ in range(20):
        with s.step():
            clock.advance(200_000_000)
    clock.advance(1_000_000)
    s.save(str(tmp_path / "resnet.json"))
    cli = subprocess.run([sys.executable, "-m", "gpuscope", "prometheus", "rules", "--baseline",
                          f"{tmp_path / 'resnet.json'}=resnet-.*"], capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    (tmp_path / "rules.yml").write_text(cli.stdout)
    (tmp_path / "t.yml").write_text(BASELINE_TEST)
    r = subprocess.run([promtool, "test", "rules", str(tmp_path / "t.yml")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = subprocess.run([sys.executable, "-m", "gpuscope", "prometheus", "rules", "--baseline",
                          str(tmp_path / "missing.json")], capture_output=True, text=True)
    assert bad.returncode == 2 and "missing.json" in bad.stderr and bad.stdout == ""


def test_the_scrape_configuration_in_the_docs_is_one_prometheus_takes(tmp_path):
    promtool = tool("promtool")
    import re

    docs = (ROOT / "docs" / "fleet.md").read_text()
    [config] = re.findall(r"```yaml\n(.*?)```", docs, re.S)
    (tmp_path / "gpuscope.yml").write_text(gp.rules())
    (tmp_path / "prometheus.yml").write_text(config.replace("/etc/prometheus/", f"{tmp_path}/"))
    r = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 14 rules found" in r.stdout


def test_thresholds_that_are_not_ones_are_refused_naming_the_flag():
    for args, said in ((["--hung-after", "5"], "--hung-after: '5' is not a Prometheus duration"),
                       (["--idle-ratio", "1.5"], "shares below 1"),
                       (["--straggler-ratio", "-1"], "--straggler-ratio: -1.0 is not a positive number")):
        r = subprocess.run([sys.executable, "-m", "gpuscope", "prometheus", "rules", *args],
                           capture_output=True, text=True)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)


# -- A real Prometheus, scraping live loops -----------------------------------

HUNG_AFTER_S = 5


def _query(base, expr):
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    answer = json.loads(get(url))
    assert answer["status"] == "success", (expr, answer)
    return answer["data"]["result"]


def _alerts(base):
    return json.loads(get(base + "/api/v1/alerts"))["data"]["alerts"]


def _wait_port(path, proc, timeout=30):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else proc.returncode
        assert time.monotonic() < deadline, f"no {path.name} after {timeout} s"
        time.sleep(0.05)
    return int(path.read_text())


def test_a_real_prometheus_evaluates_every_rule_and_panel_and_the_planted_loops_fire(tmp_path):
    prometheus = tool("prometheus")
    rules = gp.rules(gp.Thresholds(idle_for="4s", hung_after=f"{HUNG_AFTER_S}s", gpu_for="4s"))
    (tmp_path / "rules.yml").write_text(rules)
    loops, ports = {}, {}
    try:
        for mode in ("healthy", "idle", "hung", "host"):
            loops[mode] = subprocess.Popen(
                [sys.executable, str(LOOP)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                env=loop_env(MODE=mode, RUN_ID=f"fleet-{mode}", PORT_FILE=tmp_path / f"{mode}.port",
                             OUT=tmp_path, HEALTHY_S=6))
        for mode, p in loops.items():
            ports[mode] = _wait_port(tmp_path / f"{mode}.port", p)
        targets = ", ".join(f"'127.0.0.1:{port}'" for port in ports.values())
        (tmp_path / "prometheus.yml").write_text(
            "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
            "rule_files: [rules.yml]\n"
            f"scrape_configs:\n  - job_name: gpuscope\n    static_configs: [{{targets: [{targets}]}}]\n")
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        with open(tmp_path / "prometheus.log", "w") as log:
            server = start([prometheus, f"--config.file={tmp_path / 'prometheus.yml'}",
                            f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                           base + "/-/ready", log)
        try:
            _check_prometheus(base, tmp_path)
        finally:
            stop(server)
    finally:
        for p in loops.values():
            stop(p)


def _check_prometheus(base, tmp_path):
    # The hung loop's alert fires within hung_after (the rule's threshold;
    # its for: is 0) plus a scrape and an evaluation, and the idle loop's.
    deadline = time.monotonic() + 60
    while not (tmp_path / "hung").exists():
        assert time.monotonic() < deadline, "the hung loop never hung"
        time.sleep(0.1)
    hung_at = float((tmp_path / "hung").read_text())
    fired_at = None
    while time.monotonic() < deadline:
        firing = {(a["labels"]["alertname"], a["labels"].get("run_id")) for a in _alerts(base)
                  if a["state"] == "firing"}
        if fired_at is None and ("GpuscopeJobHung", "fleet-hung") in firing:
            fired_at = time.time()
        if fired_at is not None and ("GpuscopeGpuIdle", "fleet-idle") in firing:
            break
        time.sleep(0.2)
    assert fired_at is not None, f"GpuscopeJobHung never fired: {_alerts(base)}"
    # The "no step ended for hung_after" branch sees a flat counter over the
    # samples of the last hung_after, which span a scrape interval less.
    latency = fired_at - hung_at
    assert HUNG_AFTER_S - 1.5 < latency < HUNG_AFTER_S + 4, latency
    assert ("GpuscopeGpuIdle", "fleet-idle") in firing, _alerts(base)

    # Nothing else fires, and nothing at all (pending included) for the healthy loop.
    alerts = _alerts(base)
    assert not [a for a in alerts if a["labels"].get("run_id") in ("fleet-healthy", "fleet-host")], alerts
    assert {(a["labels"]["alertname"], a["labels"]["run_id"]) for a in alerts if a["state"] == "firing"} \
        == {("GpuscopeJobHung", "fleet-hung"), ("GpuscopeGpuIdle", "fleet-idle")}, alerts

    # Every rule evaluated without error; every recording rule has data.
    groups = json.loads(get(base + "/api/v1/rules"))["data"]["groups"]
    evaluated = [r for g in groups for r in g["rules"]]
    assert len(evaluated) == 14
    for r in evaluated:
        assert r["health"] == "ok" and not r.get("lastError"), r
        if r["type"] == "recording":
            assert _query(base, r["name"]), f"recording rule {r['name']} has no data"

    # Every dashboard query returns data for one of the loops at least (the
    # host's telemetry comes from the one without the simulated device),
    # but those that need NVML or ranks, which this machine cannot have
    # (evaluated all the same).
    runs = ("fleet-healthy", "fleet-idle", "fleet-host")
    answered = {}
    for run in runs:
        for title, expr, needs in gp.panel_queries({"$run_id": run, "$rank": ".*", "$__range": "5m",
                                                    "$__interval": "1s", "$__interval_ms": "1000"}):
            key = (title, expr.replace(run, "$run_id"))
            answered[key] = answered.get(key, False) or bool(_query(base, expr)) or bool(needs)
    assert len(answered) == len(gp.panel_queries())
    assert all(answered.values()), [k for k, ok in answered.items() if not ok]


# -- Batch jobs: a Pushgateway and node_exporter's textfile -------------------


@pytest.fixture
def gateway(tmp_path):
    binary = tool("prometheus-pushgateway")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "pushgateway.log", "w") as log:
        # Debian's build persists to /var/lib/prometheus by default: not here.
        p = start([binary, f"--web.listen-address=127.0.0.1:{port}",
                   f"--persistence.file={tmp_path / 'pushgateway.data'}"], url + "/-/ready", log)
    yield url
    stop(p)


def _gateway_samples(url, name):
    """{(labels...): value} of metric `name` in the gateway's exposition."""
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for family in text_string_to_metric_families(get(url + "/metrics")):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_a_job_that_exits_before_any_scrape_leaves_its_final_numbers_in_the_gateway(gateway):
    r = run_loop(MODE="healthy", STEPS=40, RUN_ID="batch-1", PUSH=gateway, PUSH_EVERY=600)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    steps = _gateway_samples(gateway, "gpuscope_steps_total")
    host = socket.gethostname()[:63]
    assert steps == {(("host", host), ("instance", ""), ("job", "gpuscope"), ("run_id", "batch-1")): 40.0}
    idle = _gateway_samples(gateway, "gpuscope_gpu_idle_ratio")
    assert len(idle) == 1 and 0 <= next(iter(idle.values())) < 0.5
    # The group's key is the job's identity: the gateway's own API says so.
    groups = json.loads(get(gateway + "/api/v1/metrics"))["data"]
    assert [g["labels"] for g in groups] == [{"job": "gpuscope", "run_id": "batch-1", "host": host}]

    # delete_at_exit: the job's group goes when it ends; the other stays.
    r = run_loop(MODE="healthy", STEPS=10, RUN_ID="batch/2", PUSH=gateway, DELETE=1, PUSH_EVERY=600)
    assert r.returncode == 0, r.stderr
    assert set(_gateway_samples(gateway, "gpuscope_steps_total")) == set(steps)


def test_gpuscope_run_pushes_an_unmodified_scripts_final_numbers(gateway, tmp_path):
    script = HERE / "runner_scripts" / "slow_loader.py"
    r = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--out", str(tmp_path / "out"), "--no-html",
                        "--no-report", "--push-prometheus", gateway, "--run-id", "unmodified-1", str(script)],
                       capture_output=True, text=True, timeout=180, env=loop_env(OMP_NUM_THREADS=1))
    assert r.returncode == 0, r.stderr
    assert f"gpuscope run: pushing metrics to {gateway} every 15 s" in r.stderr
    steps = _gateway_samples(gateway, "gpuscope_steps_total")
    saved = json.loads((tmp_path / "out" / "run.json").read_text())
    assert list(steps.values()) == [saved["summary"]["total_steps"]] and saved["summary"]["total_steps"] > 0
    assert dict(next(iter(steps)))["run_id"] == "unmodified-1"
    bad = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--push-prometheus", "ftp://x", str(script)],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--push-prometheus: gateway 'ftp://x'" in bad.stderr


def test_a_long_job_pushes_every_period_and_a_gateway_that_is_down_never_stops_it(gateway, tmp_path):
    p = subprocess.Popen([sys.executable, str(LOOP)], stderr=subprocess.PIPE, text=True,
                         env=loop_env(MODE="healthy", RUN_ID="periodic", PUSH=gateway, PUSH_EVERY=0.5))
    try:
        seen = []
        deadline = time.monotonic() + 30
        while len(set(seen)) < 3 and time.monotonic() < deadline:
            values = list(_gateway_samples(gateway, "gpuscope_steps_total").values())
            if values:
                seen.append(values[0])
            time.sleep(0.3)
        assert len(set(seen)) >= 3 and seen == sorted(seen), seen
    finally:
        stop(p)
    # A gateway that is not there: the job runs and exits as it would, says so once.
    dead = f"http://127.0.0.1:{free_port()}"
    began = time.monotonic()
    r = run_loop(MODE="healthy", STEPS=30, RUN_ID="nowhere", PUSH=dead, PUSH_EVERY=0.2)
    assert r.returncode == 0
    assert time.monotonic() - began < 20
    assert r.stderr.count("pushing Prometheus metrics failed") == 1, r.stderr
    assert "Connection refused" in r.stderr


def test_node_exporter_serves_the_textfile_a_job_writes(tmp_path):
    binary = tool("prometheus-node-exporter")
    directory = tmp_path / "textfile"
    directory.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "node_exporter.log", "w") as log:
        p = start([binary, "--collector.disable-defaults", "--collector.textfile",
                   f"--collector.textfile.directory={directory}", f"--web.listen-address=127.0.0.1:{port}"],
                  url + "/metrics", log)
    try:
        r = run_loop(MODE="idle", STEPS=30, RUN_ID="node-1", TEXTFILE=directory / "gpuscope.prom")
        assert r.returncode == 0, r.stderr
        text = get(url + "/metrics")
        assert f'gpuscope_steps_total{{host="{socket.gethostname()[:63]}",run_id="node-1"}} 30' in text
        assert "node_textfile_scrape_error 0" in text
        idle = [line for line in text.splitlines() if line.startswith("gpuscope_gpu_idle_ratio{")]
        assert len(idle) == 1 and float(idle[0].split()[-1]) > 0.5
        # delete_at_exit takes the file away with the job.
        r = run_loop(MODE="idle", STEPS=5, RUN_ID="node-2", TEXTFILE=directory / "other.prom", DELETE=1)
        assert r.returncode == 0, r.stderr
        assert sorted(x.name for x in directory.iterdir()) == ["gpuscope.prom"]
    finally:
        stop(p)


# -- OpenTelemetry: a local OTLP/HTTP receiver decodes what was sent -----------


class _Receiver:
    """An OTLP/HTTP metrics receiver on localhost: each POST to /v1/metrics
    decoded as the protocol's ExportMetricsServiceRequest (protobuf)."""

    def __init__(self):
        import gzip
        import http.server
        import threading

        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest, ExportMetricsServiceResponse)

        received = self.requests = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                received.append((self.path, self.headers.get("Content-Type"), request))
                reply = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/metrics"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def _points(request):
    """{(metric name, ((attribute, value), ...)): (kind, value)} of a request,
    and its resource's attributes."""
    out, resource = {}, {}
    for rm in request.resource_metrics:
        resource = {a.key: a.value.string_value for a in rm.resource.attributes}
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                kind = m.WhichOneof("data")
                data = getattr(m, kind)
                for p in data.data_points:
                    attrs = tuple(sorted((a.key, a.value.string_value) for a in p.attributes))
                    value = p.as_double if p.WhichOneof("value") == "as_double" else p.as_int
                    out[(m.name, attrs)] = (kind, value, m.unit, getattr(data, "is_monotonic", None))
    return out, resource


def test_otlp_sends_the_same_metrics_and_labels_as_the_exposition(tmp_path):
    need_otel()
    receiver = _Receiver()
    try:
        r = run_loop(MODE="idle", STEPS=40, RUN_ID="otlp-1", OTLP=receiver.url, PUSH_EVERY=600,
                     FINAL=tmp_path / "final.prom")
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
    finally:
        receiver.close()
    assert len(receiver.requests) == 1  # the export at exit: the job ended before the first period
    path, content_type, request = receiver.requests[0]
    assert path == "/v1/metrics" and content_type == "application/x-protobuf"
    points, resource = _points(request)
    assert resource["service.name"] == "gpuscope"
    assert resource["service.instance.id"].startswith("otlp-1/")
    # Every series of the exposition is a data point with the same labels;
    # the values that cannot move once the loop ended are equal.
    from prometheus_client.parser import text_string_to_metric_families

    exposition = {}
    for family in text_string_to_metric_families((tmp_path / "final.prom").read_text()):
        for sample in family.samples:
            exposition[(sample.name, tuple(sorted(sample.labels.items())))] = (family.type, sample.value)
    assert set(points) == set(exposition)
    steps = ("gpuscope_steps_total", (("host", socket.gethostname()[:63]), ("run_id", "otlp-1")))
    assert points[steps][:2] == ("sum", 40) and points[steps][3] is True
    for key, (kind, value) in exposition.items():
        if key[0] in ("gpuscope_window_steps", "gpuscope_gpu_idle_ratio", "gpuscope_step_time_seconds",
                      "gpuscope_phase_share_ratio"):
            assert points[key][0] == "gauge" and points[key][1] == pytest.approx(value), key
    assert points[steps][2] == ""
    idle = [k for k in points if k[0] == "gpuscope_gpu_idle_ratio"]
    assert len(idle) == 1 and points[idle[0]][2] == "1" and points[idle[0]][1] > 0.5


def test_an_otlp_receiver_that_is_down_never_stops_the_job():
    need_otel()
    began = time.monotonic()
    r = run_loop(MODE="healthy", STEPS=30, RUN_ID="nowhere", OTLP=f"http://127.0.0.1:{free_port()}/v1/metrics",
                 PUSH_EVERY=0.2)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - began < 30
    assert r.stderr.count("exporting OTLP metrics failed") == 1, r.stderr

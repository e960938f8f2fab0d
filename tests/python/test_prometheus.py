"""The Prometheus text exposition: well-formed (format 0.0.4, as
prometheus_client's parser reads it), carrying the numbers of the summary and
the families docs/prometheus.md lists, written to a file atomically, served
on a localhost endpoint that hostile or careless clients cannot turn against
the job, and offered as a prometheus_client collector."""

import errno
import math
import os
import pathlib
import re
import select
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

import gpuscope as gs
from conftest import MS
from gpuscope._prometheus import PrometheusServer

linux_only = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc")
_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")  # format 0.0.4 has no quoted UTF-8 names
_LABEL_NAME = re.compile(r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*")  # names beginning "__" are reserved
# A phase name that must be escaped in a label value: quotes, and a
# backslash (written unescaped, its "\n" would read back as a newline).
ODD_PHASE = 'forward "main" C:\\new'


JOB_LABELS = ("run_id", "host", "gpu")


def parse_exposition(text, job_labels=False, require_job=True):
    """Parses the text format 0.0.4 with prometheus_client's parser, which
    rejects malformed lines, metric and label names, label escaping and
    values, then checks what that lax parser lets through: the format's rules
    (one TYPE line per family, before its samples, or the parser makes them
    an untyped family of their own; a family's lines together; no series
    twice; names in the 0.0.4 charset; a final newline) and the docs' (a
    HELP line for every family; counters named *_total; finite values, since
    unknown ones are left out rather than NaN; no timestamps, the values are
    now's). Every sample carries the job's labels (``run_id``, ``host``;
    ``gpu`` once CUDA is in use), all with one value; they are checked and
    left out of the keys (``job_labels`` keeps them in). Returns {(name,
    ((label, value), ...)): value}, label values unescaped, labels in the
    order written."""
    from prometheus_client.parser import text_string_to_metric_families  # a test dependency

    assert text.endswith("\n"), "no final newline"
    lines = text.splitlines()
    helped = [line.split()[2] for line in lines if line.startswith("# HELP ")]
    typed = [line.split()[2:4] for line in lines if line.startswith("# TYPE ")]
    types = dict(typed)
    for name in set(helped) | set(types):
        assert helped.count(name) == 1, f"{name}: {helped.count(name)} HELP lines"
        assert [n for n, _ in typed].count(name) == 1, f"{name}: not one TYPE line"
    samples, families, jobs = {}, set(), set()
    for family in text_string_to_metric_families(text):
        assert family.type in ("counter", "gauge"), f"{family.name}: {family.type} (a sample before its TYPE?)"
        assert family.name not in families, f"{family.name}: its lines are not together"
        families.add(family.name)
        assert family.documentation, f"{family.name}: empty HELP"
        for sample in family.samples:
            # The parser names a counter's samples <family>_total whatever
            # was written: the TYPE line must name them so itself.
            assert types.get(sample.name) == family.type, f"{sample.name}: not the name its TYPE line gives"
            assert _METRIC_NAME.fullmatch(sample.name), sample.name
            assert family.type != "counter" or sample.name.endswith("_total"), sample.name
            for label in sample.labels:
                assert _LABEL_NAME.fullmatch(label), f"{sample.name}: label name {label!r}"
            assert sample.timestamp is None, sample
            assert isinstance(sample.value, (int, float)) and math.isfinite(sample.value), sample
            job = {k: v for k, v in sample.labels.items() if k in JOB_LABELS}
            if require_job and sample.name.startswith("gpuscope_"):
                assert "run_id" in job and "host" in job, f"{sample.name}: no job labels"
                if not sample.name.startswith("gpuscope_memory_"):  # their gpu is the sample's
                    jobs.add(tuple(sorted(job.items())))
            labels = sample.labels if job_labels else \
                {k: v for k, v in sample.labels.items() if k not in JOB_LABELS}
            key = (sample.name, tuple(labels.items()))
            assert key not in samples, f"duplicate series {key}"
            samples[key] = sample.value
    assert len(jobs) <= 1, f"samples of one session with different job labels: {jobs}"
    return samples


@pytest.fixture
def starved(clock):
    gpu = gs.testing.SimulatedDevice(activity=True)
    # FLOPs and a peak given: the MFU families are exposed too.
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0, flops_per_sample=1e9, peak_flops=1e12)
    for _ in range(20):
        with s.step(samples=32, tokens=4096):
            with s.phase("data"):
                clock.advance(30 * MS)
            with s.phase(ODD_PHASE):
                gpu.launch(10 * MS)
                clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    yield s
    s.close()


def test_exposition_is_well_formed_and_carries_the_summary(starved):
    text = starved.prometheus()
    samples = parse_exposition(text)
    sm = starved.summary()
    assert samples[("gpuscope_steps_total", ())] == 20
    assert samples[("gpuscope_step_time_seconds", (("quantile", "0.95"),))] == pytest.approx(sm.step_time.p95)
    assert samples[("gpuscope_gpu_idle_ratio", ())] == pytest.approx(0.75)
    assert samples[("gpuscope_gpu_idle_by_cause_ratio", (("cause", "data"),))] == pytest.approx(0.75)
    assert samples[("gpuscope_phase_share_ratio", (("phase", ODD_PHASE),))] == pytest.approx(0.25)
    assert 'phase="forward \\"main\\" C:\\\\new"' in text  # escaped as the format says
    assert samples[("gpuscope_throughput_samples_per_second", ())] == pytest.approx(800)
    assert samples[("gpuscope_throughput_tokens_per_second", ())] == pytest.approx(800 * 4096 / 32)
    assert samples[("gpuscope_finding_share_ratio", (("id", "input-bound"), ("severity", "high")))] == \
        pytest.approx(0.75)
    assert samples[("gpuscope_info", (("version", gs.__version__), ("source", "cupti"), ("simulated", "true")))] == 1
    assert samples[("gpuscope_misuse_total", (("kind", "dropped_records"),))] == 0


_BAD = {
    "no TYPE": "gpuscope_x 1\n",
    "no HELP": "# TYPE gpuscope_x gauge\ngpuscope_x 1\n",
    "TYPE twice": "# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\n# TYPE gpuscope_x gauge\ngpuscope_x 1\n",
    "no final newline": "# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x 1",
    "a counter without _total": "# HELP gpuscope_x x.\n# TYPE gpuscope_x counter\ngpuscope_x 1\n",
    "a series twice": '# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x{a="1"} 1\ngpuscope_x{a="1"} 2\n',
    "a family's lines apart": "# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x 1\n"
                              "# HELP gpuscope_y y.\n# TYPE gpuscope_y gauge\ngpuscope_y 1\ngpuscope_x 2\n",
    "an unescaped quote": '# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x{a="q"q"} 1\n',
    "a bad label name": '# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x{a-b="1"} 1\n',
    "a reserved label name": '# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x{__a="1"} 1\n',
    "a bad metric name": "# HELP gpuscope-x x.\n# TYPE gpuscope-x gauge\ngpuscope-x 1\n",
    "a value that is no number": "# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x one\n",
    "NaN (unknown values are left out)": "# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x NaN\n",
    "a timestamp (the values are now's)": "# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x 1 1700000000000\n",
}


@pytest.mark.parametrize("bad", _BAD.values(), ids=_BAD.keys())
def test_the_check_rejects_a_bad_exposition(bad):
    """parse_exposition() itself: what it must refuse, so that the tests
    above would fail on such output."""
    good = "# HELP gpuscope_x x.\n# TYPE gpuscope_x gauge\ngpuscope_x 1\n"
    parse_exposition(good, require_job=False)  # a good one passes
    with pytest.raises((AssertionError, ValueError)):
        parse_exposition(bad, require_job=False)
    with pytest.raises(AssertionError, match="no job labels"):  # a session's carry them
        parse_exposition(good)


# -- the families docs/prometheus.md lists --------------------------------------

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs" / "prometheus.md"
# Families that only sampled telemetry gives: /proc on any Linux host, NVML
# where there is an NVIDIA GPU. The simulated device samples none.
HOST_TELEMETRY = {"gpuscope_throttled_steps_ratio", "gpuscope_host_cpu_ratio", "gpuscope_host_iowait_ratio",
                  "gpuscope_process_cpu_cores", "gpuscope_worker_cpu_cores",
                  "gpuscope_child_process_cpu_cores", "gpuscope_training_thread_cpu_wait_ratio",
                  "gpuscope_worker_cpu_wait_cores", "gpuscope_host_cpu_steal_ratio"}
# Host telemetry only kernels with PSI (Linux 4.20+, psi=1) have.
PSI_TELEMETRY = {"gpuscope_host_cpu_pressure_ratio"}
# Host telemetry only a process under a container CPU limit has (checked in
# test_shared_host.py, in a cgroup with a limit).
CONTAINER_TELEMETRY = {"gpuscope_container_cpu_throttled_ratio"}
# Only a loop with work every N steps has these (test_periodic_spikes.py).
SPIKE_FAMILIES = {"gpuscope_periodic_spike_share_ratio", "gpuscope_periodic_spike_period_steps"}
GPU_TELEMETRY = {"gpuscope_nvidia_smi_utilization_ratio", "gpuscope_sm_clock_ratio"}
# Families only a distributed job has (once ranks have exchanged records).
RANK_FAMILIES = {"gpuscope_ranks_compared", "gpuscope_ranks_missing",
                 "gpuscope_straggler_slowdown_ratio"}


def documented_families(job=False):
    """{name: (type, label names, quantiles or None)} from the table in
    docs/prometheus.md; with `job`, as in a distributed job: the labels the
    table gives "in a job", and the `rank` label every sample carries
    there."""
    families = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `gpuscope_"):
            continue
        names, kind, labels = (cell.strip() for cell in line.strip("| ").split("|")[:3])
        labels, _, in_job = labels.partition("; in a job")
        quantiles = re.search(r"`quantile` \(([^)]*)\)", labels)
        label_names = set(re.findall(r"`(\w+)`", labels))
        if job:
            label_names |= set(re.findall(r"`(\w+)`", in_job)) | {"rank"}
        for name in re.findall(r"`(gpuscope_\w+)`", names):
            families[name] = (kind, label_names,
                              {q.strip() for q in quantiles.group(1).split(",")} if quantiles else None)
    assert len(families) > 10, f"the table in {DOCS.name} was not found"
    return families


def check_documented(text, job=False):
    """Checks every family of `text` against the docs: listed, of the type
    and with the labels (and quantiles) they give (`job`: in a distributed
    job). Returns the names of the families present."""
    documented = documented_families(job)
    samples = parse_exposition(text)
    types = dict(line.split()[2:4] for line in text.splitlines() if line.startswith("# TYPE "))
    quantiles = {}
    for name, labels in samples:
        assert name in documented, f"{name} is not in {DOCS.name}"
        kind, label_names, _ = documented[name]
        assert types[name] == kind, f"{name}: {types[name]}, documented {kind}"
        # The job's labels (host among them) are parse_exposition()'s to check.
        assert {label for label, _ in labels} == label_names - set(JOB_LABELS), \
            f"{name}{labels}: documented labels {label_names}"
        if "quantile" in label_names:
            rest = tuple(label for label in labels if label[0] != "quantile")
            quantiles.setdefault((name, rest), set()).add(dict(labels)["quantile"])
    for (name, rest), qs in quantiles.items():
        assert qs == documented[name][2], f"{name}{rest}: quantiles {qs}"
    return {name for name, _ in samples}


def test_every_documented_family_is_exposed_as_documented(starved):
    """A session on a simulated GPU with activity records, whose steps carry
    counts, exposes every family the docs list but the sampled telemetry's
    (the next tests), each as the docs describe it."""
    text = starved.prometheus()
    present = check_documented(text)
    assert present == (set(documented_families()) - HOST_TELEMETRY - PSI_TELEMETRY - GPU_TELEMETRY
                       - CONTAINER_TELEMETRY - SPIKE_FAMILIES - RANK_FAMILIES)
    samples = parse_exposition(text)
    shares = [v for (name, _), v in samples.items() if name == "gpuscope_phase_share_ratio"]
    assert sum(shares) == pytest.approx(1)  # as documented
    by_cause = [v for (name, _), v in samples.items() if name == "gpuscope_gpu_idle_by_cause_ratio"]
    assert sum(by_cause) == pytest.approx(samples[("gpuscope_gpu_idle_ratio", ())])
    by_category = {dict(labels)["category"]: v for (name, labels), v in samples.items()
                   if name == "gpuscope_gpu_device_time_ratio"}
    assert sum(by_category.values()) == pytest.approx(1)
    assert by_category["idle"] == pytest.approx(samples[("gpuscope_gpu_idle_ratio", ())])


def test_rank_families_and_labels_are_exposed_as_documented(starved):
    """In a distributed job (the rank set, an exchange of 4 ranks' records
    in which rank 2 is slow): every sample carries the rank, the info gauge
    the job's labels, and the rank families appear, all as documented."""
    records = []
    for rank in range(4):
        clock = gs.testing.ManualClock()
        other = gs.Session(clock=clock, rank_interval=None)
        for _ in range(10):
            with other.step():
                with other.phase("forward"):
                    clock.advance((5 if rank == 2 else 1) * 1_000_000)
        gs._gpuscope._set_rank(other, rank, rank, 4, f"node-{rank}")
        records.append(gs._gpuscope._rank_record(other.summary()))
        other.close()
    gs._gpuscope._set_rank(starved, 0, 0, 4, "node-0")
    assert gs._gpuscope._set_rank_records(starved, records) == 0
    text = starved.prometheus()
    present = check_documented(text, job=True)
    assert RANK_FAMILIES <= present
    samples = parse_exposition(text)
    assert all(dict(labels).get("rank") == "0" for _, labels in samples)
    assert samples[("gpuscope_straggler_slowdown_ratio",
                    (("rank", "0"), ("straggler_rank", "2"), ("phase", "forward")))] == pytest.approx(5)


def telemetry_session(ready, deadline_s=60):
    """A real-clock session sampling telemetry every millisecond, stepped
    until its summary's telemetry satisfies `ready` (or the deadline)."""
    s = gs.Session(telemetry_interval_ms=1)
    end = time.monotonic() + deadline_s
    while True:
        with s.step():
            with s.phase("forward"):
                sum(range(10000))
        t = s.summary().telemetry
        if t is not None and ready(t):
            return s
        assert time.monotonic() < end, f"no telemetry in {deadline_s} s: {t!r}"


@linux_only
def test_host_telemetry_families_are_exposed_as_documented():
    gs._gpuscope._add_loader_workers([])  # a loader without workers: worker numbers are known
    s = telemetry_session(lambda t: None not in (t.host_cpu_pct, t.host_iowait_pct, t.process_cores,
                                                 t.worker_cores, t.child_cores, t.cpu_wait_share,
                                                 t.worker_cpu_wait_cores, t.steal_pct,
                                                 t.throttled_steps))
    try:
        present = check_documented(s.prometheus())
        assert HOST_TELEMETRY <= present
        if os.path.exists("/proc/pressure/cpu"):
            assert PSI_TELEMETRY <= present
    finally:
        s.close()


@pytest.mark.gpu
def test_gpu_telemetry_families_are_exposed_as_documented():
    s = telemetry_session(lambda t: t.gpu_utilization_pct is not None and t.sm_clock_ratio is not None)
    try:
        assert GPU_TELEMETRY | HOST_TELEMETRY <= check_documented(s.prometheus())
    finally:
        s.close()


def test_written_to_a_file_and_served_on_localhost(starved, tmp_path):
    path = starved.save_prometheus(tmp_path / "gpuscope.prom")
    assert parse_exposition(open(path).read())
    with starved.serve_prometheus() as server:
        assert server.host == "127.0.0.1" and server.port > 0
        with urllib.request.urlopen(server.url, timeout=10) as r:
            assert r.status == 200
            assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            samples = parse_exposition(r.read().decode())
        assert samples[("gpuscope_steps_total", ())] == 20
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{server.port}/other", timeout=10)
        assert e.value.code == 404
    with pytest.raises(urllib.error.URLError):  # closed: the port is free again
        urllib.request.urlopen(server.url, timeout=2)


def test_the_endpoint_serves_the_exposition_byte_for_byte_without_prometheus_client(starved, monkeypatch):
    """The endpoint is gpuscope's own (see the module docstring of
    gpuscope._prometheus for why not prometheus_client's server): it needs no
    prometheus_client, and serves what session.prometheus() wrote, not a
    rendering of it again (prometheus_client would write "20.0", sort
    labels)."""
    for name in ("prometheus_client", "prometheus_client.exposition", "prometheus_client.parser"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed: importing it raises ImportError
    with starved.serve_prometheus() as server:
        status, text = scrape(server.url)
    assert status == 200
    assert text == starved.prometheus()
    assert re.search(r'^gpuscope_steps_total\{run_id="[^"]+",host="[^"]+"\} 20$', text, re.M), text


def test_host_only_session_exposes_no_gpu_numbers(session, clock):
    with session.step():
        clock.advance(5 * MS)
    samples = parse_exposition(session.prometheus())
    assert ("gpuscope_gpu_idle_ratio", ()) not in samples
    assert samples[("gpuscope_info", (("version", gs.__version__), ("source", "host"), ("simulated", "false")))] == 1


# -- the endpoint under hostile or careless clients ---------------------------
# Real sockets on 127.0.0.1. The endpoint runs inside the training job, so
# whatever its clients do it must keep threads and descriptors bounded, never
# spin, never print, and stop cleanly.

PARTIAL = b"GET /metrics HTTP/1.1\r\n"  # a request head that never ends
THREAD_NAME = "gpuscope-prometheus"


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def thread_cpu_s(tid):
    """User + system CPU seconds of one of this process's threads."""
    with open(f"/proc/self/task/{tid}/stat", "rb") as f:
        data = f.read()
    fields = data[data.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def server_thread():
    return next(t for t in threading.enumerate() if t.name == THREAD_NAME and t.is_alive())


def idle_clients(port, n, budget_s=3.0):
    """Up to n connections that each send PARTIAL and nothing more (fewer if
    the server stops accepting: a bounded wait, so old servers fail fast)."""
    clients, end = [], time.monotonic() + budget_s
    while len(clients) < n and time.monotonic() < end:
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=2.5)
            c.sendall(PARTIAL)
        except OSError:
            continue
        clients.append(c)
    return clients


def close_all(socks):
    for c in socks:
        c.close()


def recv_until_eof(sock, timeout):
    """Everything the peer sends until it closes (a reset counts as a close);
    raises socket.timeout if it does not close in time."""
    end = time.monotonic() + timeout
    data = b""
    while True:
        sock.settimeout(max(0.01, end - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, ConnectionAbortedError):
            return data
        if not chunk:
            return data
        data += chunk


def scrape(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def rst_close(sock):
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close() sends a reset
    sock.close()


class BigSession:
    """A session whose exposition is far larger than the socket buffers."""

    size = 16 << 20

    def prometheus(self):
        return "x" * self.size


class BrokenSession:
    def prometheus(self):
        raise RuntimeError("boom: /very/secret/path")


@linux_only
def test_idle_connections_cost_no_threads_and_a_scrape_is_still_answered(starved):
    with PrometheusServer(starved, max_connections=16) as server:
        threads, fds = threading.active_count(), open_fds()
        clients = idle_clients(server.port, 200)
        try:
            assert threading.active_count() <= threads
            assert len(clients) == 200
            status, text = scrape(server.url)  # behind the 200 in the backlog: they were all seen
            assert status == 200
            assert parse_exposition(text)[("gpuscope_steps_total", ())] == 20
            assert threading.active_count() <= threads
            assert open_fds() - fds - len(clients) <= server.max_connections + 4
            tid = server_thread().native_id
            cpu = thread_cpu_s(tid)
            time.sleep(0.5)  # connections held at the limit: the thread sleeps
            assert thread_cpu_s(tid) - cpu < 0.1
        finally:
            close_all(clients)


def test_idle_and_trickling_clients_are_disconnected_after_the_timeout(starved):
    with PrometheusServer(starved, timeout_s=0.5) as server:
        idle = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        idle.sendall(PARTIAL)
        trickle = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        start, cut = time.monotonic(), False
        try:
            for byte in PARTIAL + b"X-Pad: " + b"a" * 200:  # one byte every 20 ms: never done in time
                if time.monotonic() - start > 2.5:
                    break
                try:
                    trickle.sendall(bytes([byte]))
                except OSError:
                    cut = True
                    break
                time.sleep(0.02)
            if not cut:
                assert recv_until_eof(trickle, 0.5) == b""
            assert time.monotonic() - start < 2.5
            assert recv_until_eof(idle, 2.0) == b""  # EOF, no answer
        finally:
            close_all([idle, trickle])


def test_a_client_that_does_not_read_the_response_is_cut_off():
    with PrometheusServer(BigSession(), timeout_s=0.5) as server:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        try:
            c.connect(("127.0.0.1", server.port))
            c.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            time.sleep(1.2)  # past the deadline, reading nothing
            data = recv_until_eof(c, 5.0)
        finally:
            c.close()
        assert data.startswith(b"HTTP/1.") and b" 200 " in data[:16]
        assert len(data) < BigSession.size  # cut off, not served in full once it finally read


def test_nothing_is_printed_whatever_the_clients_do(starved, capfd):
    capfd.readouterr()
    with PrometheusServer(starved, timeout_s=0.5) as server, \
            PrometheusServer(BigSession(), timeout_s=1.0) as big, \
            PrometheusServer(BrokenSession()) as broken:
        addr, big_addr = ("127.0.0.1", server.port), ("127.0.0.1", big.port)
        socket.create_connection(addr, timeout=5).close()  # connects, says nothing, goes
        c = socket.create_connection(addr, timeout=5)  # gone mid-request, with a reset
        c.sendall(PARTIAL)
        rst_close(c)
        c = socket.create_connection(addr, timeout=5)  # gone before its answer
        c.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        rst_close(c)
        for request in (b"BREW /pot HTTP/1.1\r\n\r\n", b"garbage\r\n\r\n", b"GET / HTTP/1.1\r\nX: " + b"a" * 9000):
            c = socket.create_connection(addr, timeout=5)
            try:
                c.sendall(request)
                recv_until_eof(c, 2.0)
            except OSError:  # this test is about stderr only; test_the_protocol checks the answers
                pass
            c.close()
        c = socket.socket()  # gone mid-response
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(big_addr)
        c.sendall(b"GET /metrics HTTP/1.1\r\n\r\n")
        c.settimeout(5)
        assert c.recv(1024)
        rst_close(c)
        with pytest.raises(urllib.error.HTTPError) as e:  # the session fails: 500, no traceback
            scrape(broken.url)
        time.sleep(0.3)
        assert scrape(server.url)[0] == 200
    out, err = capfd.readouterr()
    assert err == "" and out == ""
    assert e.value.code == 500
    assert b"secret" not in e.value.read()  # a short body, not the exception's text


def test_the_protocol():
    class Tiny:
        def prometheus(self):
            return "gpuscope_steps_total 1\n"

    with PrometheusServer(Tiny()) as server:
        def ask(request):
            c = socket.create_connection(("127.0.0.1", server.port), timeout=5)
            try:
                c.sendall(request)
                data = recv_until_eof(c, 5.0)
            finally:
                c.close()
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            headers = dict(line.split(": ", 1) for line in lines[1:])
            return int(lines[0].split()[1]), headers, body

        status, headers, body = ask(b"GET /metrics HTTP/1.0\r\n\r\n")
        assert (status, body) == (200, b"gpuscope_steps_total 1\n")
        assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        assert headers["Content-Length"] == str(len(body)) and headers["Connection"] == "close"
        assert ask(b"GET /?x=1 HTTP/1.1\r\nHost: a\r\n\r\n")[0] == 200
        status, headers, body = ask(b"HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n")
        assert (status, body, headers["Content-Length"]) == (200, b"", "23")
        status, headers, _ = ask(b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
        assert status == 405 and headers["Allow"] == "GET, HEAD"
        assert ask(b"GET /metrics/x HTTP/1.1\r\n\r\n")[0] == 404
        assert ask(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n")[0] == 431
        assert ask(b"nonsense\r\n\r\n")[0] == 400


def test_close_answers_nobody_frees_the_port_and_joins_the_thread(starved):
    server = PrometheusServer(starved)
    port = server.port
    early = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        early.sendall(PARTIAL)
        time.sleep(0.2)  # accepted and waiting for the rest of its head
        server.close()
        try:
            early.sendall(b"\r\n")  # the rest of the request, after close()
        except OSError:
            pass
        assert b"HTTP" not in recv_until_eof(early, 3.0)
        assert not any(t.name == THREAD_NAME and t.is_alive() for t in threading.enumerate())
        server.close()  # idempotent
        assert "closed" in repr(server)
    finally:
        early.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    with PrometheusServer(starved, port=port) as again:  # the port is free
        assert scrape(again.url)[0] == 200


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_keep_the_port_open(starved):
    server = PrometheusServer(starved)
    port = server.port
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child (a DataLoader worker, say): waits for the parent
        try:
            os.write(ready_w, b"r")
            os.read(go_r, 1)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_r, 1) == b"r"
        server.close()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
    finally:
        server.close()
        os.write(go_w, b"g")
        os.waitpid(pid, 0)
        for fd in (go_r, go_w, ready_r, ready_w):
            os.close(fd)


def test_a_bad_host_or_port_is_a_clear_error_at_construction(starved):
    for port in (-1, 65536, 70000):
        with pytest.raises(ValueError, match="port"):
            PrometheusServer(starved, port=port)
    with pytest.raises(TypeError, match="port"):
        PrometheusServer(starved, port="9100")
    with pytest.raises(TypeError, match="host"):
        PrometheusServer(starved, host=None)
    with pytest.raises(OSError, match="192.0.2.1"):  # not an address of this machine
        PrometheusServer(starved, host="192.0.2.1")
    with PrometheusServer(starved) as server:
        with pytest.raises(OSError) as e:
            PrometheusServer(starved, port=server.port)
        assert e.value.errno == errno.EADDRINUSE and str(server.port) in str(e.value)


# The job itself, in a subprocess limited to 128 descriptors, serving; the
# clients are here.
JOB = r"""
import os, resource, sys, threading, time
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
import gpuscope as gs
from gpuscope._prometheus import PrometheusServer

clock = gs.testing.ManualClock()
session = gs.Session(clock=clock)
for _ in range(3):
    with session.step():
        clock.advance(5_000_000)
server = PrometheusServer(session)
tid = next(t.native_id for t in threading.enumerate() if t.name == "gpuscope-prometheus")
stat = os.open(f"/proc/self/task/{tid}/stat", os.O_RDONLY)

def cpu():
    data = os.pread(stat, 4096, 0)
    fields = data[data.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

hoard = []
if sys.argv[1] == "exhausted":  # the job has used up its descriptors itself
    try:
        while True:
            hoard.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
print(server.port, flush=True)
sys.stdin.readline()  # the clients are connected
before = cpu()
time.sleep(1.0)
spent = cpu() - before
for fd in hoard:
    os.close(fd)
try:
    files = [open(os.devnull) for _ in range(8)]
    for f in files:
        f.close()
    opened = "ok"
except OSError as e:
    opened = type(e).__name__ + ":" + str(e.errno)
# The server's threads: every thread but the stall watch's, which the session has anyway.
threads = sum(1 for t in threading.enumerate() if t.name != "gpuscope-stalls")
print(f"{spent:.3f} {threads} {opened}", flush=True)
sys.stdin.readline()  # scraped
server.close()
print("closed", flush=True)
"""


def read_line(proc, timeout):
    end, data = time.monotonic() + timeout, b""
    while not data.endswith(b"\n"):
        left = end - time.monotonic()
        if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
            raise AssertionError(f"the job said nothing in {timeout} s; so far {data!r}")
        chunk = os.read(proc.stdout.fileno(), 4096)
        if not chunk:
            raise AssertionError(f"the job ended: {data!r} {proc.stderr.read()!r}")
        data += chunk
    return data.decode().strip()


def run_job(mode, n_clients):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.Popen([sys.executable, "-c", JOB, mode], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    clients = []
    try:
        port = int(read_line(proc, 20))
        clients = idle_clients(port, n_clients)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        spent, threads, opened = read_line(proc, 20).split()
        status, text = scrape(f"http://127.0.0.1:{port}/metrics", timeout=10)
        proc.stdin.write(b"go\n")
        proc.stdin.flush()
        assert read_line(proc, 20) == "closed"
        _, err = proc.communicate(timeout=20)
        return len(clients), float(spent), int(threads), opened, status, text, err
    finally:
        close_all(clients)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@linux_only
def test_at_the_descriptor_limit_the_accept_loop_backs_off_instead_of_spinning():
    n, spent, threads, opened, status, text, err = run_job("exhausted", 40)
    assert spent < 0.25  # of 1 s with accept() failing with EMFILE all along
    assert n == 40  # queued in the backlog meanwhile
    assert opened == "ok" and threads <= 2
    assert status == 200 and re.search(r"^gpuscope_steps_total\{.*\} 3$", text, re.M)  # served again once descriptors are free
    assert err == b""


@linux_only
def test_idle_connections_never_take_the_jobs_descriptors():
    n, spent, threads, opened, status, text, err = run_job("idle", 300)
    assert opened == "ok"  # the job's own open() works with 300 connections held against it
    assert threads <= 2
    assert n >= 200
    assert spent < 0.25  # connections held at the limit: no spinning
    assert status == 200 and re.search(r"^gpuscope_steps_total\{.*\} 3$", text, re.M)
    assert err == b""


# -- prometheus_client ---------------------------------------------------------


def test_a_prometheus_client_collector_serves_the_same_numbers(starved):
    import prometheus_client as prom  # a test dependency (`make deps-test`, `pip install '.[test]'`)

    from gpuscope._prometheus import collector

    registry = prom.CollectorRegistry()
    prom.Gauge("job_own_metric", "The job's own metric.", registry=registry).set(7)
    registry.register(collector(starved))
    # The public ways to get one: the session's method and the package function.
    for c in (starved.prometheus_collector(), gs.prometheus_collector(starved)):
        assert any(f.name == "gpuscope_steps" for f in c.collect())
    samples = parse_exposition(prom.generate_latest(registry).decode())
    assert samples[("gpuscope_steps_total", ())] == 20
    assert samples[("gpuscope_step_time_seconds", (("quantile", "0.95"),))] == \
        pytest.approx(starved.summary().step_time.p95)
    assert samples[("job_own_metric", ())] == 7
    # Every series of the session's own exposition, with the same value (and
    # the odd phase name's label escaped again on the way out), and no other;
    # the order of labels is no part of a series.
    def series(samples):
        return {(name, frozenset(labels)): value for (name, labels), value in samples.items()}

    assert series(samples) == series({**parse_exposition(starved.prometheus()), ("job_own_metric", ()): 7})

    failing = prom.CollectorRegistry()  # a failing session costs its own metrics, not the job's
    prom.Gauge("job_own_metric", "The job's own metric.", registry=failing).set(7)
    c = collector(BrokenSession())
    failing.register(c)
    assert parse_exposition(prom.generate_latest(failing).decode()) == {("job_own_metric", ()): 7}
    assert "RuntimeError" in c.last_error


def test_the_collector_says_how_to_get_prometheus_client(starved, monkeypatch):
    from gpuscope import _prometheus

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.setitem(sys.modules, "prometheus_client.parser", None)
    with pytest.raises(ImportError, match="pip install prometheus-client"):
        _prometheus.collector(starved)


def test_two_sessions_share_a_registry_with_labels_of_their_own(starved, clock):
    import prometheus_client as prom

    other = gs.Session(clock=clock)
    with other.step():
        clock.advance(MS)
    registry = prom.CollectorRegistry()
    registry.register(starved.prometheus_collector(labels={"loop": "train"}).add(other, {"loop": "eval"}))
    text = prom.generate_latest(registry).decode()
    samples = parse_exposition(text)  # a family once (HELP and TYPE once, its lines together), two series
    assert text.count("# TYPE gpuscope_steps_total counter") == 1
    assert samples[("gpuscope_steps_total", (("loop", "train"),))] == 20
    assert samples[("gpuscope_steps_total", (("loop", "eval"),))] == 1
    other.close()
    with pytest.raises(ValueError, match="label name"):
        starved.prometheus_collector(labels={"bad-name": "x"})
    with pytest.raises(ValueError, match="already another session's"):
        gs.prometheus_collector(starved, {"loop": "a"}).add(other, {"loop": "a"})

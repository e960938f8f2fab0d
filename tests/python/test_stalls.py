"""A hung job says where it hangs (docs/definitions.md "Stalls"): the step
and phase, for how long, the training thread's Python stack and, across a
real torchrun job, the rank that is somewhere else, while the job still
hangs; the normal long cases say nothing; a hung job still dies on SIGTERM.
"""

import contextlib
import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request

import pytest

import gpuscope as gs

HERE = pathlib.Path(__file__).parent


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    for var in ("GPUSCOPE_DISABLE", "GPUSCOPE_SIMULATE"):
        env.pop(var, None)
    return env


class _Lines:
    """A process's stderr read as it comes, each line with when it came."""

    def __init__(self, proc):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            with self.lock:
                self.lines.append((time.time(), line.rstrip("\n")))

    def text(self):
        with self.lock:
            return "\n".join(line for _, line in self.lines)

    def wait_for(self, pattern, timeout, count=1):
        """The arrival times of the first `count` lines matching `pattern`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                hits = [t for t, line in self.lines if re.search(pattern, line)]
            if len(hits) >= count:
                return hits[:count]
            time.sleep(0.05)
        raise AssertionError(f"no {count} x {pattern!r} in {timeout} s:\n{self.text()[-4000:]}")


@contextlib.contextmanager
def _job(cmd, env):
    """A process group started with `cmd`, its stderr read as it comes;
    killed whole at the end whatever happened."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        yield p, _Lines(p)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()


def _sigterm_ends(p, within):
    """SIGTERM, as a scheduler sends it, ends the hung job within `within`
    seconds: no thread of gpuscope's keeps it alive."""
    t0 = time.monotonic()
    os.killpg(p.pid, signal.SIGTERM)
    p.wait(timeout=within + 10)
    assert time.monotonic() - t0 < within


def _script(tmp_path, body):
    path = tmp_path / "train.py"
    path.write_text(textwrap.dedent(body))
    return path


def test_a_hung_step_is_said_while_it_hangs_with_the_python_stack_and_kept_once_it_ends(tmp_path):
    # A loop of quick steps, then one whose forward sleeps past the 1 s limit.
    script = _script(tmp_path, """
        import json, threading, time
        import gpuscope as gs

        calls = []
        s = gs.Session(stall_after=1.0, on_stall=calls.append)
        gauges = []

        def scrape():  # what a Prometheus scrape sees during the hang
            while not gauges:
                text = s.prometheus()
                if any(l.startswith("gpuscope_stalled{") and l.endswith("} 1") for l in text.splitlines()):
                    gauges.append(text)
                time.sleep(0.05)

        threading.Thread(target=scrape, daemon=True).start()

        def attention_that_waits():
            time.sleep(2.5)

        for i in range(13):
            with s.step():
                with s.phase("forward"):
                    if i == 12:
                        attention_that_waits()
                    else:
                        time.sleep(0.005)
        summary = s.summary()
        print(json.dumps({
            "calls": [(c.step, c.phase, c.ongoing) for c in calls],
            "stalls": [(x.step, x.phase, x.seconds, x.limit, x.ongoing) for x in summary.stalls],
            "findings": [f.id for f in s.diagnose()],
            "gauge": [l for l in gauges[0].splitlines() if l.startswith("gpuscope_step_in_progress")],
            "report": "stalls (1)" in s.report(),
        }))
    """)
    p = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    # Said once, at the warning level, while the step was open.
    assert p.stderr.count("stall: step 12 has been open") == 1, p.stderr
    assert "its stall limit: 1.0 s), in forward for" in p.stderr
    # The training thread's Python stack, taken from the watch thread.
    assert "the training thread (MainThread" in p.stderr
    assert "in attention_that_waits" in p.stderr and "time.sleep(2.5)" in p.stderr
    assert out["calls"] == [[12, "forward", True]]
    # Kept once it ended, with its whole duration.
    [(step, phase, seconds, limit, ongoing)] = out["stalls"]
    assert (step, phase, limit, ongoing) == (12, "forward", 1.0, False)
    assert 2.5 <= seconds < 3.5
    assert out["findings"][0] == "stall"
    assert out["report"]
    [gauge] = out["gauge"]
    assert float(gauge.split()[-1]) > 1.0


def test_a_dataloader_worker_that_hangs_names_data_and_sigterm_still_ends_the_job(tmp_path):
    pytest.importorskip("torch")
    script = _script(tmp_path, """
        import threading, time
        import torch
        import gpuscope as gs

        class Data(torch.utils.data.Dataset):
            def __len__(self):
                return 1000

            def __getitem__(self, i):
                if i >= 24:
                    threading.Event().wait()  # a worker that never answers
                return torch.zeros(4)

        if __name__ == "__main__":
            s = gs.Session(stall_after=1.0)
            loader = torch.utils.data.DataLoader(Data(), batch_size=2, num_workers=1)
            for batch in s.steps(loader):
                with s.phase("forward"):
                    time.sleep(0.01)
    """)
    with _job([sys.executable, str(script)], _env()) as (p, lines):
        lines.wait_for(r"stall: step 12 has been open .* in data for", timeout=60)
        assert "in __next__" in lines.text() or "dataloader" in lines.text().lower()
        _sigterm_ends(p, within=10)


def test_a_long_first_step_and_a_slow_checkpoint_between_steps_are_not_stalls(tmp_path):
    script = _script(tmp_path, """
        import time
        import gpuscope as gs

        s = gs.Session(stall_after=0.5)
        with s.step():
            time.sleep(1.5)  # compilation, autotuning: the first steps wait 300 s
        for _ in range(12):
            with s.step():
                time.sleep(0.005)
        with s.phase("checkpoint"):  # between steps: 10 x 0.5 s
            time.sleep(1.5)
        for _ in range(3):
            with s.step():
                time.sleep(0.005)
        assert s.summary().stalls == [], s.summary().stalls
        assert "stall" not in [f.id for f in s.diagnose()]
        print("quiet")
    """)
    p = subprocess.run([sys.executable, str(script)], env=_env(), capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "quiet"
    assert "stall" not in p.stderr


def test_gpuscope_run_says_the_stall_of_an_unmodified_script_and_keeps_it_in_run_json(tmp_path):
    pytest.importorskip("torch")
    script = _script(tmp_path, """
        import time
        import torch

        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for i in range(16):
            loss = model(torch.randn(4, 8)).square().mean()
            loss.backward()
            if i == 14:
                time.sleep(2.5)  # a filesystem that stops answering, say
            opt.step()
            opt.zero_grad()
    """)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--stall-after", "1", "--out",
                        str(out), "--no-html", str(script)], env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("stall: step 14 has been open") == 1, p.stderr
    assert "time.sleep(2.5)" in p.stderr
    run = json.loads((out / "run.json").read_text())
    [stall] = run["summary"]["stalls"]
    assert stall["step"] == 14 and not stall["ongoing"] and stall["seconds"] >= 2.5


def test_stall_after_is_checked_and_read_back():
    with pytest.raises(ValueError, match="stall_after=0"):
        gs.Session(stall_after=0)
    with pytest.raises(TypeError, match="on_stall"):
        gs.Session(on_stall=3)
    s = gs.Session(stall_after=float("inf"), on_stall=print)
    try:
        assert s._options["stall_after"] == float("inf")
        assert s._options["on_stall"] is print
        assert s.summary().stalls == [] and s.summary().step_in_progress == 0
    finally:
        s.close()


def test_the_ranks_picture_names_who_is_elsewhere_and_who_did_not_answer_with_its_host():
    from gpuscope._stalls import ranks_picture

    def entry(rank, path, seconds=240.0):
        return {"rank": rank, "host": f"node{rank // 4}", "step": 41, "phase_path": path,
                "seconds": seconds}

    # Rank 5 is in data; rank 7 never answered (its host, from the last exchange).
    entries = {r: entry(r, "comm") for r in (0, 1, 2, 3, 4, 6)}
    entries[5] = entry(5, "data/decode", 245)
    lines = ranks_picture(entries, 8, me=0, hosts={7: "node1"})
    assert lines == [
        "rank 5 on node1 has been in `data/decode` for 4 min 05 s (step 41)",
        "ranks 0-4, 6 wait in `comm` for it",
        "rank 7 on node1 reported no stall: unreachable (dead, or its host is), or still running",
    ]
    # Everyone in comm: the rank that did not answer is the one they wait for.
    entries = {r: entry(r, "comm") for r in (0, 1, 3)}
    lines = ranks_picture(entries, 4, me=1, hosts={})
    assert lines == ["ranks 0, 1, 3 are stalled in `comm`",
                     "rank 2 on an unknown host reported no stall: unreachable (dead, or its host "
                     "is), or still running: the one the others wait for"]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_rank_hung_in_forward_is_named_by_every_rank_while_the_others_wait_in_comm(tmp_path):
    pytest.importorskip("torch.distributed")
    out = tmp_path / "out"
    out.mkdir()
    env = dict(_env(), OUT=str(out), STALL_AFTER="2", HUNG_RANK="2", STEPS="15")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=4",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
           str(HERE / "_stall_worker.py")]
    with _job(cmd, env) as (p, lines):
        seen = {}
        deadline = time.monotonic() + 90
        while len(seen) < 4 and time.monotonic() < deadline:
            for t, line in list(lines.lines):
                m = re.search(r"stall on rank (\d) of 4", line)
                if m:
                    seen.setdefault(int(m.group(1)), t)
            time.sleep(0.1)
        text = lines.text()
        assert sorted(seen) == [0, 1, 2, 3], text[-6000:]
        hung_at = float((out / "hung").read_text())
        # Each rank's message names rank 2 in forward, and the others waiting in comm for it.
        assert text.count("rank 2 (this rank) on ") == 1, text[-6000:]
        assert len(re.findall(r"rank 2 (\(this rank\) )?on \S+ has been in `forward` for", text)) == 4
        assert text.count("ranks 0, 1, 3 wait in `comm` for it") == 4, text[-6000:]
        delays = sorted(t - hung_at for t in seen.values())
        print("hang to each rank's message, s:", ", ".join(f"{d:.2f}" for d in delays))
        assert delays[-1] < 2 + 10  # the limit, then the ranks' entries gathered
        # Rank 0's Prometheus gauge reads the stall.
        port = int((out / "port").read_text())
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        metrics = metrics.decode()
        assert re.search(r'^gpuscope_stalled\{rank="0",run_id="[^"]+",host="[^"]+"\} 1$', metrics, re.M), metrics
        gauge = re.search(r'^gpuscope_step_in_progress_seconds\{rank="0",[^}]*\} (\S+)$', metrics, re.M)
        assert gauge and float(gauge.group(1)) > 2
        _sigterm_ends(p, within=20)


def test_a_rank_whose_process_stopped_is_named_unreachable_with_its_host_by_the_others(tmp_path):
    # Rank 2's whole process stops (SIGSTOP) in forward: its stall watch
    # stops with it, so it never says where it is. The ranks waiting for it
    # in comm name it from what is missing: unreachable, on its host.
    pytest.importorskip("torch.distributed")
    out = tmp_path / "out"
    out.mkdir()
    env = dict(_env(), OUT=str(out), STALL_AFTER="2", HUNG_RANK="2", HUNG_HOW="stop", STEPS="15")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=4",
           "--master_addr=127.0.0.1", f"--master_port={_free_port()}",
           str(HERE / "_stall_worker.py")]
    with _job(cmd, env) as (p, lines):
        lines.wait_for(r"stall on rank \d of 4", timeout=90, count=3)
        time.sleep(1)  # a fourth message would come now
        text = lines.text()
        assert sorted(map(int, re.findall(r"stall on rank (\d) of 4", text))) == [0, 1, 3], text[-6000:]
        host = socket.gethostname()
        said = re.findall(r"rank 2 on (\S+) reported no stall: unreachable \(dead, or its host is\), "
                          r"or still running: the one the others wait for", text)
        assert said == [host] * 3, text[-6000:]
        assert text.count("rank 2 on ") == 3, text[-6000:]  # nowhere said to be in a phase

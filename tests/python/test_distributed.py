"""Ranks compared across a real torchrun job: 4 processes, gloo on CPU, a DDP
model (the worker: _dist_worker.py). What a user of a multi-GPU job relies
on: every rank names the same straggler and the phase that makes it slow;
ranks that differ by noise name none; a rank that dies, or never makes a
session, costs the others at most the timeout; a new process group does
not hang the exchange."""

import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

WORKER = pathlib.Path(__file__).with_name("_dist_worker.py")
WORLD = 4


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(tmp_path, mode, *, timeout=150, extra_args=(), **env):
    """Runs the worker under torchrun; returns each rank's result dict and the
    job's wall time."""
    out = tmp_path / "out"
    out.mkdir()
    full = dict(os.environ, MODE=mode, OUT=str(out), OMP_NUM_THREADS="1",
                **{k: str(v) for k, v in env.items()})
    for var in ("GPUSCOPE_DISABLE", "GPUSCOPE_SIMULATE"):
        full.pop(var, None)
    port = _free_port()
    where = ([f"--rdzv-endpoint=127.0.0.1:{port}"] if "--rdzv-backend=c10d" in extra_args
             else ["--master_addr=127.0.0.1", f"--master_port={port}"])
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={WORLD}", *where,
           *extra_args, str(WORKER)]
    t0 = time.monotonic()
    # Its own process group, so that a job that hangs is killed whole.
    p = subprocess.Popen(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        _, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        _, stderr = p.communicate()
        pytest.fail(f"the job hung past {timeout} s: {stderr[-3000:]}")
    wall = time.monotonic() - t0
    assert p.returncode == 0, stderr[-3000:]
    results = {}
    for f in out.glob("rank*.json"):
        r = json.loads(f.read_text())
        results[r["rank"]] = r
    return results, wall


def top(result):
    return result["findings"][0] if result["findings"] else None


def test_every_rank_names_the_slow_rank_and_its_phase(tmp_path):
    # Rank 2 does 12 ms of extra work in forward; the others then wait for it
    # in backward (DDP's all-reduce). A periodic exchange every 0.5 s runs
    # while they train, then all sync at the end.
    results, _ = run_job(tmp_path, "straggler", STEPS=120, SLOW_RANK=2, SLOW_MS=12,
                         RANK_INTERVAL=0.5)
    assert sorted(results) == [0, 1, 2, 3]
    for rank, r in results.items():
        assert r["heard"] == [0, 1, 2, 3] and r["missing"] == []
        assert r["rank_identity"]["rank"] == rank and r["rank_identity"]["world_size"] == WORLD
        f = top(r)
        assert f["id"] == "straggler", r["report"]
        assert f["evidence"]["rank"] == 2
        assert f["evidence"]["slowdown"] > 2
        assert "forward" in f["title"] and ("rank 2" in f["title"] or "this rank (2)" in f["title"])
        # The wait is the straggler's, not communication's; the report shows
        # every rank, the straggler marked.
        assert all(x["id"] != "comm-bound" for x in r["findings"])
        assert "ranks (exchange" in r["report"] and "    2* " in r["report"]
        assert all(len(line) <= 80 for line in r["report"].splitlines())
        assert f'rank="{rank}"' in r["prometheus"]
    # The periodic exchange ran before the final sync (on the background
    # thread: nothing in the loop asked for it).
    assert all(r["exchanges_before_sync"] >= 1 for r in results.values())
    # The same records on every rank once the exchange completed.
    records = [r["ranks"]["ranks"] for r in results.values()]
    assert all(x == records[0] for x in records)
    assert [x["rank"] for x in records[0]] == [0, 1, 2, 3]


def test_no_straggler_when_no_rank_is_slow(tmp_path):
    results, _ = run_job(tmp_path, "straggler", STEPS=60)
    assert sorted(results) == [0, 1, 2, 3]
    for r in results.values():
        assert r["missing"] == [] and len(r["ranks"]["ranks"]) == WORLD
        assert r["ranks"]["stragglers"] == []
        assert all(f["id"] != "straggler" for f in r["findings"]), r["report"]


def test_a_rank_that_exits_costs_the_others_at_most_the_timeout(tmp_path):
    results, _ = run_job(tmp_path, "exit", STEPS=30, EXIT_RANK=3, SYNC_TIMEOUT=3)
    assert sorted(results) == [0, 1, 2]
    for r in results.values():
        assert r["missing"] == [3] and r["heard"] == [0, 1, 2]
        assert r["sync_seconds"] < 3 + 2  # the timeout, and the margin sync_ranks() allows
        assert r["steps"] == 30 and r["ranks"]["missing"] == [3]
        assert "missing (no record within the timeout): 3" in r["report"]


def test_sessions_on_some_ranks_only_do_not_hang(tmp_path):
    results, wall = run_job(tmp_path, "partial", STEPS=30, SESSIONS=2, SYNC_TIMEOUT=2)
    assert sorted(results) == [0, 1, 2, 3]
    for rank in (0, 1):
        r = results[rank]
        assert r["missing"] == [2, 3] and r["sync_seconds"] < 2 + 2
        assert r["steps"] == 30
    for rank in (2, 3):
        assert "findings" not in results[rank]  # no session there, nothing asked of them
    assert wall < 120


def test_an_elastic_restart_does_not_read_the_last_attempts_records():
    # Four ranks in threads of one process over one store, as torchelastic's
    # store outlives a restart. (A real restart of a gloo job fails in
    # gloo's own rendezvous on this machine, before any gpuscope code runs.)
    # Attempt 0 exchanges; attempt 1 runs the same exchange name with rank 3
    # gone: it must not take rank 3's stale record, and must not wait past
    # its timeout.
    import threading

    import gpuscope as gs
    from gpuscope import _ranks

    store = torch.distributed.HashStore()

    def attempt(restart, ranks, steps, timeout):
        sessions, results = {}, {}
        for rank in ranks:
            clock = gs.testing.ManualClock()
            s = gs.Session(clock=clock, rank_interval=None)
            for _ in range(steps):
                with s.step():
                    clock.advance(1_000_000)
            sessions[rank] = s

        def run(rank):
            job = _ranks._Job(store, rank, WORLD, 0, "host", f"gpuscope/v1/{restart}/0/")
            state = _ranks._State(0, float("inf"), timeout)
            results[rank] = _ranks._exchange(sessions[rank], state, "s1", "sync", timeout, job)

        threads = [threading.Thread(target=run, args=(r,)) for r in ranks]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        wall = time.monotonic() - t0
        summaries = {r: s.summary() for r, s in sessions.items()}
        for s in sessions.values():
            s.close()
        return results, summaries, wall

    first, summaries, _ = attempt(0, range(WORLD), steps=5, timeout=10)
    assert all(r.heard == [0, 1, 2, 3] for r in first.values())
    assert all(s.ranks.ranks[3].steps == 5 for s in summaries.values())
    second, summaries, wall = attempt(1, range(3), steps=20, timeout=1.0)
    for rank, r in second.items():
        assert r.heard == [0, 1, 2] and r.missing == [3]
        ranks = summaries[rank].ranks
        assert [x.rank for x in ranks.ranks] == [0, 1, 2] and ranks.missing == [3]
        assert all(x.steps == 20 for x in ranks.ranks)  # this attempt's records only
    assert wall < 1.0 + 2.0

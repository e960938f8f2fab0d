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
        # The fast ranks wait for it in their all-reduce ("comm"). That wait
        # is the straggler's, not communication's: comm-bound, if it fires
        # at all (four ranks on two cores make the all-reduce itself slow),
        # explains only what is left once the wait is taken out.
        comm = [x for x in r["findings"] if x["id"] == "comm-bound"]
        if rank != 2:
            wait = f["evidence"]["others_wait_share"]
            assert r["comm_share"] > 0.3 and wait > 0.3, r["report"]
            if comm:
                assert comm[0]["evidence"]["straggler_wait_share"] == pytest.approx(wait)
                assert comm[0]["share"] == pytest.approx(r["comm_share"] - wait, abs=0.02)
                assert "waiting for the straggler" in comm[0]["title"]
        else:
            assert all("straggler_wait_share" not in x["evidence"] for x in comm)
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
    assert sorted(first) == [0, 1, 2, 3]
    assert all(r.heard == [0, 1, 2, 3] for r in first.values())
    assert all(s.ranks.ranks[3].steps == 5 for s in summaries.values())
    second, summaries, wall = attempt(1, range(3), steps=20, timeout=1.0)
    assert sorted(second) == [0, 1, 2]
    for rank, r in second.items():
        assert r.heard == [0, 1, 2] and r.missing == [3]
        ranks = summaries[rank].ranks
        assert [x.rank for x in ranks.ranks] == [0, 1, 2] and ranks.missing == [3]
        assert all(x.steps == 20 for x in ranks.ranks)  # this attempt's records only
    assert wall < 1.0 + 2.0


def _sessions(n, steps=5):
    import gpuscope as gs

    out = []
    for _ in range(n):
        clock = gs.testing.ManualClock()
        s = gs.Session(clock=clock, rank_interval=None)
        for _ in range(steps):
            with s.step():
                clock.advance(1_000_000)
        out.append(s)
    return out


def test_a_rank_late_to_an_exchange_reads_every_record_without_blocking():
    # Ranks 0-2 finish exchange "s1" without rank 3 (their timeout passes);
    # rank 3 comes to "s1" later (its sync_ranks() count lags) and completes
    # the counter. The keys it then reads must all still be there: a get of a
    # deleted key would block for the store's timeout (here 60 s).
    import datetime
    import threading

    from gpuscope import _ranks

    store = torch.distributed.HashStore()
    store.set_timeout(datetime.timedelta(seconds=60))
    sessions = _sessions(WORLD)
    states = [_ranks._State(0, float("inf"), 0.5) for _ in range(WORLD)]

    def run(rank, name, timeout, results):
        job = _ranks._Job(store, rank, WORLD, 0, "host", "gpuscope/v1/0/0/")
        results[rank] = _ranks._exchange(sessions[rank], states[rank], name, "sync", timeout, job)

    early = {}
    threads = [threading.Thread(target=run, args=(r, "s1", 0.5, early)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(early[r].missing == [3] for r in range(3))
    # The early ranks move on to more exchanges before rank 3 arrives.
    for name in ("s2", "s3"):
        more = {}
        threads = [threading.Thread(target=run, args=(r, name, 0.2, more)) for r in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    late = {}
    t0 = time.monotonic()
    run(3, "s1", 5.0, late)
    assert time.monotonic() - t0 < 5.0
    assert late[3].heard == [0, 1, 2, 3]
    assert [x.rank for x in sessions[3].summary().ranks.ranks] == [0, 1, 2, 3]
    for s in sessions:
        s.close()


def test_the_key_space_follows_the_restart_count_and_the_process_group(monkeypatch):
    # What _job() reads from torch.distributed, faked: the prefix holds
    # torchelastic's restart count and a number that changes with the
    # default store (a new process group), so no key of an earlier group or
    # attempt is read as this one's.
    import types

    from gpuscope import _ranks

    class Store:
        pass

    current = {"store": Store()}
    c10d = types.SimpleNamespace(_get_default_store=lambda: current["store"])
    fake = types.SimpleNamespace(is_available=lambda: True, is_initialized=lambda: True,
                                 get_rank=lambda: 1, get_world_size=lambda: 4,
                                 distributed_c10d=c10d)
    monkeypatch.setitem(sys.modules, "torch.distributed", fake)
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    first = _ranks._job()
    assert first.rank == 1 and first.world_size == 4 and first.local_rank == 1
    assert first.prefix.startswith("gpuscope/v1/3/")
    assert _ranks._job().prefix == first.prefix  # the same group: the same keys
    current["store"] = Store()  # destroy_process_group(), init_process_group()
    second = _ranks._job()
    assert second.prefix != first.prefix and second.prefix.startswith("gpuscope/v1/3/")
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "4")
    assert _ranks._job().prefix.startswith("gpuscope/v1/4/")

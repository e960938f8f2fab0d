"""Under a distributed job every rank writes its own files: the ranks of a
torchrun, Slurm or MPI job saving "run.json" into one shared directory must
not overwrite each other's."""

import json
import os
import socket

import pytest

from gpuscope import _dist

from conftest import MS


@pytest.fixture
def rank3_of_4(monkeypatch):
    # What torchrun sets for its fourth process.
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("LOCAL_RANK", "1")


def _recorded(session, clock):
    for _ in range(3):
        with session.step():
            with session.phase("forward"):
                clock.advance(2 * MS)
    return session


def test_each_rank_saves_under_its_own_name(session, clock, tmp_path, rank3_of_4):
    _recorded(session, clock)
    written = [
        session.save(tmp_path / "run.json"),
        session.save_trace(tmp_path / "trace.json"),
        session.save_prometheus(tmp_path / "gpuscope.prom"),
        session.save(tmp_path / "baseline"),  # no suffix
    ]
    assert [os.path.basename(p) for p in written] == [
        "run.rank3.json", "trace.rank3.json", "gpuscope.rank3.prom", "baseline.rank3"]
    assert sorted(os.listdir(tmp_path)) == sorted(os.path.basename(p) for p in written)
    assert json.loads((tmp_path / "run.rank3.json").read_text())["summary"]["steps"] == 3


def test_a_path_can_say_where_the_rank_goes(session, clock, tmp_path, rank3_of_4):
    _recorded(session, clock)
    (tmp_path / "rank-3").mkdir()
    path = session.save(tmp_path / "rank-{rank}" / "run-{local_rank}-of-{world_size}.json")
    assert path == str(tmp_path / "rank-3" / "run-1-of-4.json")
    assert os.path.isfile(path)
    assert _dist.rank_path("{host}.json") == socket.gethostname() + ".json"
    assert _dist.rank_path("keep-{other}-braces.json") == "keep-{other}-braces.rank3.json"


def test_outside_a_job_names_are_left_alone(session, clock, tmp_path):
    _recorded(session, clock)
    assert session.save(tmp_path / "run.json") == str(tmp_path / "run.json")
    assert _dist.identity() is None
    assert _dist.rank_path("run-{rank}.json") == "run-0.json"  # rank 0 of 1


@pytest.mark.parametrize("env", [
    {"RANK": "0", "WORLD_SIZE": "1"},                 # one process: not a job
    {"RANK": "5", "WORLD_SIZE": "4"},                 # outside its world
    {"RANK": "two", "WORLD_SIZE": "4"},               # not a number
    {"RANK": "1"},                                    # no world size
])
def test_launcher_variables_that_make_no_job(monkeypatch, env):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert _dist.identity() is None
    assert _dist.rank_path("run.json") == "run.json"


def test_slurm_and_mpi_are_read_too(monkeypatch):
    monkeypatch.setenv("SLURM_PROCID", "7")
    monkeypatch.setenv("SLURM_NTASKS", "8")
    monkeypatch.setenv("SLURM_LOCALID", "3")
    assert _dist.identity()[:3] == (7, 3, 8)
    monkeypatch.delenv("SLURM_PROCID")
    monkeypatch.setenv("OMPI_COMM_WORLD_RANK", "2")
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "16")
    assert _dist.identity()[:3] == (2, 0, 16)  # no local rank given


def test_torch_distributed_is_asked_first(monkeypatch, tmp_path):
    dist = pytest.importorskip("torch.distributed")
    if not dist.is_available():
        pytest.skip("torch built without distributed")
    # A launcher says rank 3 of 4, but this process's group (one rank, gloo)
    # is what torch knows: not a job of two or more.
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        assert _dist.identity() is None
    finally:
        dist.destroy_process_group()
    assert _dist.identity()[:3] == (3, 0, 4)

"""Shared fixtures. Tests marked `gpu` need an NVIDIA GPU and are skipped
cleanly without one (the check is here, once); the `gpu` fixture is a
simulated GPU, which every machine has."""

import ctypes

import pytest

import gpuscope as gs

MS = 1_000_000  # nanoseconds


def _have_gpu() -> bool:
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cuda.cuInit(0) == 0 and cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def pytest_collection_modifyitems(config, items):
    if _have_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (none found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def clock():
    return gs.testing.ManualClock()


@pytest.fixture
def gpu(request):
    """A simulated GPU (gs.testing.SimulatedDevice), not a real one. It serves
    the events source unless the test or its module is marked
    ``simulated_device(activity=True)``: then it also delivers activity
    records, and serves the cupti source."""
    marker = request.node.get_closest_marker("simulated_device")
    return gs.testing.SimulatedDevice(**(marker.kwargs if marker is not None else {}))


@pytest.fixture
def session(clock):
    s = gs.Session(window=64, clock=clock)
    yield s
    s.close()


# What launchers set (torchrun, Slurm, Open MPI): run under one, the tests
# would otherwise write per-rank file names (tests/python/test_rank_files.py
# sets them where it means to).
_LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS",
                  "SLURM_LOCALID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                  "OMPI_COMM_WORLD_LOCAL_RANK")


@pytest.fixture(autouse=True)
def _no_disable_env(monkeypatch):
    monkeypatch.delenv("GPUSCOPE_DISABLE", raising=False)
    for var in _LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    yield

"""The cupti source from Python, on the simulated device's activity records:
exact idle %, launch gaps, copies and syncs per step, fallbacks."""

import os

import pytest

import gpuscope as gs
from conftest import MS

US = 1_000


# The `gpu` fixture (conftest.py): a simulated device with activity records.
pytestmark = pytest.mark.simulated_device(activity=True)


def test_exact_idle_pageable_copy_and_item_sync(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    assert s.source == "cupti"

    def loader():
        for i in range(10):
            clock.advance(20 * MS)
            yield i

    for _ in s.steps(loader()):
        with s.phase("h2d"):
            gpu.launch_copy("h2d", 64 << 20, 5 * MS, pageable=True)
            clock.advance(gpu.synchronize())
        with s.phase("forward"):
            for _ in range(100):
                gpu.launch(50 * US)
                clock.advance(60 * US)
        with s.phase("loss.item"):
            gpu.launch_copy("d2h", 4, 10 * US)
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    sm = s.summary()
    assert sm.source == "cupti"
    # Per 31.01 ms step: 5 ms copy, 100 x 50 us kernels, 10 us copy busy.
    busy = 5 * MS + 100 * 50 * US + 10 * US
    assert sm.gpu_idle_pct == pytest.approx(100 * (1 - busy / (31 * MS + 10 * US)), abs=0.01)
    assert sum(sm.idle_by_cause.values()) == pytest.approx(sm.gpu_idle_pct)
    assert sm.idle_by_cause["launch"] > 0  # the 10 us gaps between kernels
    a = sm.activity
    assert isinstance(a, gs.ActivityStats)
    assert a.kernels_per_step == 100 and a.kernel_time_p50 == pytest.approx(50e-6)
    assert a.pageable_copies_per_step == 1 and a.h2d_bytes_per_step == 64 << 20
    # Device time by category: nothing overlaps here, so each is its own
    # busy time; the shares sum to 1 and idle is gpu_idle_pct.
    assert a.device_time_kernel == pytest.approx(100 * 50e-6)
    assert a.device_time_memcpy == pytest.approx(5e-3 + 10e-6)
    assert a.device_time_memset == 0 and a.device_time_comm == 0
    assert a.device_time_idle == pytest.approx((31 * MS + 10 * US - busy) * 1e-9)
    shares = (a.device_share_kernel, a.device_share_memcpy, a.device_share_memset,
              a.device_share_comm, a.device_share_idle)
    assert sum(shares) == pytest.approx(1)
    assert 100 * a.device_share_idle == pytest.approx(sm.gpu_idle_pct)
    assert "device time: kernels" in sm.report()
    assert a.d2h_bytes_per_step == 4 and a.syncs_per_step == 2
    assert a.host_wait_gaps_per_step == pytest.approx(99, abs=1)
    assert a.dropped_records == 0
    assert sm.phases["forward"].device.p50 == pytest.approx(0.005)
    back = gs.Summary.from_json(sm.to_json())
    assert back.activity == a
    report = s.report()
    assert "GPU activity per step" in report and "pageable" in report
    s.close()


def test_refused_subscription_falls_back_to_events(clock, gpu):
    gpu.inject_fault("activity_refused")
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    assert s.source == "events"
    with s.step():
        gpu.launch(MS)
        clock.advance(MS)
    clock.advance(MS)
    sm = s.summary()
    assert "MULTIPLE_SUBSCRIBERS" in sm.source_reason
    assert any(f.id == "events-only" for f in s.diagnose())


def test_no_records_yet_means_no_gpu_numbers(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    with s.step():
        clock.advance(MS)
    sm = s.summary()
    assert s.source == "cupti" and sm.source == "host" and sm.gpu_idle_pct is None
    assert "no activity records have arrived" in sm.source_reason


def test_dropped_records_are_counted(clock):
    gpu = gs.testing.SimulatedDevice(activity=True, activity_capacity=10)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    with s.step():
        for _ in range(30):
            gpu.launch(US)
        clock.advance(MS)
    clock.advance(MS)
    assert gpu.activity_dropped == 20
    assert s.summary().activity.dropped_records == 20


def test_bad_copy_kind(gpu):
    with pytest.raises(ValueError, match="h2d"):
        gpu.launch_copy("sideways", 1, 1)


def test_release_cupti_goes_on_with_events(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(2):
        with s.step():
            gpu.launch(MS)
            clock.advance(gpu.synchronize())
    clock.advance(MS)
    assert s.summary().source == "cupti"
    s.release_cupti()
    assert s.source == "events"
    with s.step():
        gpu.launch(MS)
        clock.advance(gpu.synchronize())
    clock.advance(MS)
    sm = s.summary()
    assert sm.source == "events" and "CUPTI released" in sm.source_reason
    assert sm.gpu_steps == 3
    s.release_cupti()  # again: nothing to do


def test_cupti_argument(clock):
    assert gs.Session(clock=clock, cupti=False).source == "host"
    with pytest.raises(TypeError, match="cupti must be"):
        gs.Session(cupti="yes")


def test_cupti_search_path_points_at_pypi_wheels(tmp_path, monkeypatch):
    nvidia = tmp_path / "nvidia"
    (nvidia / "cuda_cupti" / "lib").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("GPUSCOPE_CUPTI_PATH", raising=False)
    gs._cupti_search_path()
    assert os.environ["GPUSCOPE_CUPTI_PATH"].split(os.pathsep)[0] == str(nvidia / "cuda_cupti" / "lib")
    monkeypatch.setenv("GPUSCOPE_CUPTI_PATH", "/mine")
    gs._cupti_search_path()
    assert os.environ["GPUSCOPE_CUPTI_PATH"] == "/mine"

"""The events source from Python, on the simulated device: idle lower bound,
idle by cause, stream following, faults."""

import os
import subprocess
import sys
import types

import pytest

import gpuscope as gs
from conftest import MS


def starved_loop(s, clock, gpu, steps=20, stream=0):
    """The host waits 30 ms for data, then 10 ms for a 10 ms kernel."""

    def loader():
        for i in range(steps):
            clock.advance(30 * MS)
            yield i

    for _ in s.steps(loader()):
        with s.phase("forward"):
            gpu.launch(10 * MS, stream)
            clock.advance(10 * MS)
    clock.advance(MS)


def test_design_example_from_python(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu)
    assert s.source == "events"
    assert s.simulated_device is gpu
    starved_loop(s, clock, gpu)
    sm = s.summary()
    assert sm.source == "events" and "lower bound" in sm.source_reason
    assert sm.gpu_steps == 20 and sm.pending_steps == 0
    assert sm.gpu_idle_pct == pytest.approx(75.0)
    assert sm.idle_by_cause == pytest.approx({"data": 75.0})
    assert sm.device_step_time.p50 == pytest.approx(0.040)
    assert sm.phases["forward"].device.p50 == pytest.approx(0.010)
    assert sm.phases["data"].backlog_p50 == pytest.approx(0.0)
    assert "GPU idle    at least 75.0%" in s.report()
    back = gs.Summary.from_json(sm.to_json())
    assert back == sm and back.phases["forward"].device == sm.phases["forward"].device
    s.close()
    assert gpu.live_markers == 0


def test_host_only_session_has_no_device_fields(clock):
    s = gs.Session(clock=clock)
    with s.step():
        clock.advance(MS)
    sm = s.summary()
    assert s.source == "host" and sm.gpu_idle_pct is None and sm.gpu_steps == 0
    assert sm.device_step_time is None and sm.phases["other"].device is None


@pytest.mark.parametrize("fault", ["sticky_error", "context_destroyed"])
def test_a_device_fault_lowers_the_source_and_the_loop_goes_on(clock, gpu, fault):
    s = gs.Session(clock=clock, simulated_device=gpu)
    starved_loop(s, clock, gpu, steps=5)
    assert s.summary().source == "events"
    gpu.inject_fault(fault)
    starved_loop(s, clock, gpu, steps=5)
    sm = s.summary()
    assert s.source == "host" and sm.source == "host"
    assert "lowered to host" in sm.source_reason and "CUDA_ERROR" in sm.source_reason
    assert sm.gpu_idle_pct is None
    assert sm.total_steps == 10
    s.close()
    assert gpu.live_markers == 0


def test_no_driver_means_host_from_the_start(clock, gpu):
    gpu.inject_fault("no_driver")
    s = gs.Session(clock=clock, simulated_device=gpu)
    assert s.source == "host"
    assert "libcuda.so.1" in s.summary().source_reason


def test_bad_simulated_device_or_fault(clock):
    with pytest.raises(TypeError):
        gs.Session(simulated_device="yes")
    s = gs.Session(clock=clock, simulated_device=True)
    assert isinstance(s.simulated_device, gs.testing.SimulatedDevice)
    with pytest.raises(ValueError):
        s.simulated_device.inject_fault("melted")
    with pytest.raises(ValueError):
        gs.testing.SimulatedDevice(initial_markers=0)


class FakeTorch(types.ModuleType):
    """Just enough of torch for gpuscope's stream following."""

    def __init__(self, stream):
        super().__init__("torch")
        handle = types.SimpleNamespace(cuda_stream=stream)
        self.cuda = types.SimpleNamespace(is_initialized=lambda: True, current_stream=lambda: handle)


def test_markers_follow_torchs_current_stream(clock, gpu, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", FakeTorch(stream=7))
    s = gs.Session(clock=clock, simulated_device=gpu)  # stream=None: follow torch
    for _ in s.steps(range(5)):
        with s.phase("data"):
            clock.advance(10 * MS)
        with s.phase("forward"):
            gpu.launch(30 * MS, 7)  # more work per step than host time, on torch's stream
            clock.advance(MS)
    clock.advance(1000 * MS)
    assert s.summary().phases["data"].backlog_p50 > 0.01  # markers wait behind stream 7

    fixed = gs.Session(clock=clock, simulated_device=gs.testing.SimulatedDevice(), stream=0)
    other = fixed.simulated_device
    for _ in fixed.steps(range(5)):
        with fixed.phase("data"):
            clock.advance(10 * MS)
        with fixed.phase("forward"):
            other.launch(30 * MS, 7)  # on a stream the session does not mark
            clock.advance(MS)
    clock.advance(1000 * MS)
    assert fixed.summary().phases["data"].backlog_p50 == 0.0


def test_set_stream_stops_following_torch(clock, gpu, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", FakeTorch(stream=7))
    s = gs.Session(clock=clock, simulated_device=gpu)
    s.set_stream(3)
    for _ in s.steps(range(3)):
        with s.phase("forward"):
            gpu.launch(50 * MS, 3)
            clock.advance(MS)
    clock.advance(1000 * MS)
    assert s.summary().phases["forward"].backlog_p50 > 0.01
    with pytest.raises(TypeError):
        s.set_stream("default")


def test_environment_variable_simulates_a_gpu():
    code = "import gpuscope as gs; s = gs.Session(); print(s.source, s.simulated_device)"
    env = dict(os.environ, GPUSCOPE_SIMULATE="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split()[0] == "events"


def test_without_a_driver_import_and_sessions_work_on_host_timing():
    code = (
        "import gpuscope as gs\n"
        "s = gs.Session()\n"
        "for _ in s.steps(range(3)):\n"
        "    with s.phase('forward'): pass\n"
        "sm = s.summary()\n"
        "print(s.source, sm.total_steps, sm.gpu_idle_pct)\n"
        "print(sm.source_reason)\n"
    )
    env = dict(os.environ, GPUSCOPE_LIBCUDA="/nonexistent/no-such-libcuda.so.1")
    env.pop("GPUSCOPE_SIMULATE", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    first, reason = out.stdout.splitlines()[:2]
    assert first == "host 3 None"
    assert "CUDA events unavailable" in reason and "no-such-libcuda.so.1" in reason


def test_closing_mid_loop_returns_every_marker(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu)
    it = s.steps(range(10))
    for i in it:
        with s.phase("forward"):
            gpu.launch(MS)
            clock.advance(2 * MS)
        if i == 3:
            break
    s.close()  # the iterator still holds an open step
    del it
    del s
    assert gpu.live_markers == 0


def test_phases_on_a_copy_stream_and_a_second_device(clock, gpu):
    """Per 50 ms step: data 30 ms; h2d on copy stream 1 (a 2 ms copy), forward
    8 ms on stream 0, stage2 10 ms on stream 7 of device 1, each waited for.
    Device 1's markers show its idle exactly (80 %); device 0's bound cannot
    tell the step's tail from work (60 %); the session's number is their mean."""
    gpu.place_stream(7, 1)
    copy_stream = types.SimpleNamespace(cuda_stream=1)  # as a torch.cuda.Stream looks
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)

    def loader():
        for i in range(10):
            clock.advance(30 * MS)
            yield i

    for _ in s.steps(loader()):
        with s.phase("h2d", stream=copy_stream):
            gpu.launch(2 * MS, 1)
            clock.advance(2 * MS)
        with s.phase("forward"):
            gpu.launch(8 * MS, 0)
            clock.advance(8 * MS)
        with s.phase("stage2", 7):
            gpu.launch(10 * MS, 7)
            clock.advance(10 * MS)
    clock.advance(1000 * MS)
    sm = s.summary()
    assert [d.device for d in sm.devices] == [0, 1]
    assert sm.devices[0].gpu_idle_pct == pytest.approx(60.0)
    assert sm.devices[1].gpu_idle_pct == pytest.approx(80.0)
    assert sm.devices[1].gpu_steps == 10
    assert sm.gpu_idle_pct == pytest.approx(70.0)
    assert sum(sm.idle_by_cause.values()) == pytest.approx(70.0)
    assert sm.phases["h2d"].device.p50 == pytest.approx(0.002)
    assert sm.phases["stage2"].device.p50 == pytest.approx(0.010)
    assert gs.Summary.from_json(sm.to_json()).devices[1].gpu_idle_pct == pytest.approx(80.0)
    assert "device 1" in s.report()
    # The same name with and without a stream are different scopes; each is cached.
    assert s.phase("h2d", stream=copy_stream) is s.phase("h2d", stream=1)
    assert s.phase("h2d") is not s.phase("h2d", stream=1)
    assert s.phase("h2d", stream=None) is s.phase("h2d")
    s.close()
    assert gpu.live_markers == 0


def test_bad_stream_arguments_say_what_is_accepted(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    with pytest.raises(TypeError, match="torch.cuda.Stream"):
        s.phase("h2d", stream="copy")
    with pytest.raises(TypeError, match="torch.cuda.Stream"):
        s.phase("h2d", stream=-1)
    with pytest.raises(TypeError, match="unexpected or repeated"):
        s.phase("h2d", streams=1)
    with pytest.raises(TypeError, match="torch.cuda.Stream"):
        s.set_stream(object())

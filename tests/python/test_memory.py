"""GPU memory from Python: PyTorch's caching allocator faked at the boundary
gpuscope reads (gpuscope._memory.device_count / read_allocator), the sampler
thread that feeds sessions, the CUDA out-of-memory error recorded as it
leaves the scopes (raised for real, by a fake, inside a real CPU training
loop), and memory in every output (JSON, HTML, Prometheus, compare, the
zero-code runner's run.json)."""

import json
import os
import pathlib
import pickle
import re
import subprocess
import sys
import textwrap
import time

import pytest

import gpuscope as gs
from gpuscope import _memory

torch = pytest.importorskip("torch")

GIB = 1 << 30
MS = 1_000_000

# torch's own message, as PyTorch 2.x words it.
OOM_MESSAGE = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB of "
    "which 1.19 GiB is free. Process 4242 has 77.90 GiB memory in use. Of the allocated memory "
    "75.00 GiB is allocated by PyTorch, and 1.50 GiB is reserved by PyTorch but unallocated. If "
    "reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")


class FakeAllocator:
    """PyTorch's caching allocator as gpuscope reads it: allocated and
    reserved bytes with their high-water marks, retries and OOMs."""

    def __init__(self, total=80 * GIB):
        self.allocated = self.reserved = self.peak_allocated = self.peak_reserved = 0
        self.retries = self.ooms = 0
        self.total = total

    def set(self, allocated, reserved=None):
        self.allocated = allocated
        self.reserved = max(self.reserved, allocated if reserved is None else reserved)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def read(self, device):
        if device != 0:
            return None
        return (float(self.allocated), float(self.reserved), float(self.peak_allocated),
                float(self.peak_reserved), self.retries, self.ooms, float(self.total))


@pytest.fixture
def allocator(monkeypatch):
    fake = FakeAllocator()
    monkeypatch.setattr(_memory, "device_count", lambda: 1)
    monkeypatch.setattr(_memory, "read_allocator", fake.read)
    return fake


def test_the_sampler_feeds_the_allocators_numbers_and_the_phase_of_the_peak(allocator):
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, telemetry_interval_ms=0)
    sampler = _sampler_for(s)
    allocator.set(2 * GIB)  # the weights
    for _ in range(5):
        with s.step():
            with s.phase("forward"):
                clock.advance(MS)
                allocator.set(6 * GIB)
                assert sampler.sample_once() == 1  # one GPU sampled
                clock.advance(MS)
            with s.phase("backward"):
                clock.advance(MS)
                allocator.set(4 * GIB)
                assert sampler.sample_once() == 1
                clock.advance(MS)
            allocator.set(2 * GIB)
    m = s.summary().memory
    assert m is not None and m.source == "torch.cuda"
    g = m.gpus[0]
    assert g.peak_allocated_bytes == 6 * GIB
    assert g.peak_phase == "forward"
    assert g.peak_exact  # the sample was at the allocator's high-water mark
    assert g.total_bytes == 80 * GIB
    assert m.peak_by_phase == {"forward": 6 * GIB, "backward": 4 * GIB}
    # Nothing reset or changed on the allocator's side.
    assert allocator.peak_allocated == 6 * GIB


def _sampler_for(session):
    """A sampler of its own for `session` (the process-wide one feeds every
    live session; this keeps the test's samples to its session)."""
    sampler = _memory._Sampler()
    sampler.sessions.add(session)
    return sampler


def test_the_sampler_thread_samples_on_its_own_while_the_loop_runs(allocator):
    s = gs.Session(telemetry_interval_ms=5)
    allocator.set(3 * GIB)
    deadline = time.monotonic() + 10
    with s.step():
        with s.phase("forward"):
            while time.monotonic() < deadline:
                time.sleep(0.02)
                s.flush()
                if _memory._sampler.thread is not None and s.summary().memory is not None:
                    break
    with s.step():
        time.sleep(0.05)
    m = s.summary().memory
    assert m is not None, "the sampler thread never delivered a sample"
    assert m.gpus[0].allocated_bytes == 3 * GIB
    assert _memory._sampler.thread.name == "gpuscope-memory"
    assert _memory._sampler.thread.daemon
    s.close()


def test_no_thread_and_no_memory_without_a_torch_allocator_in_use(monkeypatch):
    monkeypatch.setattr(_memory, "device_count", lambda: 0)
    s = gs.Session(clock=gs.testing.ManualClock())
    with s.step():
        pass
    assert _memory._sampler.sample_once() == 0
    assert s.summary().memory is None


def fake_oom():
    return torch.OutOfMemoryError(OOM_MESSAGE)


def train(s, oom_at=None, nested=False):
    """A real CPU training loop (a small MLP, SGD) whose forward raises a
    CUDA out-of-memory error at step `oom_at`, as torch would on a GPU."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(16, 32), torch.randn(16, 1)) for _ in range(6)]
    for i, (x, y) in enumerate(s.steps(data)):
        with s.phase("forward"):
            if nested:
                with s.phase("attention"):
                    if i == oom_at:
                        raise fake_oom()
            elif i == oom_at:
                raise fake_oom()
            loss = torch.nn.functional.mse_loss(model(x), y)
        with s.phase("backward"):
            loss.backward()
        with s.phase("optimizer"):
            opt.step()
            opt.zero_grad()


def test_an_oom_in_a_real_loop_propagates_unchanged_and_is_the_top_finding(allocator, tmp_path):
    s = gs.Session()
    raised = []
    with pytest.raises(torch.OutOfMemoryError) as info:
        try:
            train(s, oom_at=3)
        except torch.OutOfMemoryError as e:
            raised.append(e)
            raise
    assert info.value is raised[0]  # the same object, its message untouched
    assert str(info.value) == OOM_MESSAGE
    oom = s.summary().memory.oom
    assert oom.step == 3
    assert oom.phase == "forward" and oom.phase_path == "forward"
    assert oom.device == 0
    assert oom.requested_bytes == 2 * GIB
    assert oom.allocated_bytes == 75 * GIB
    assert oom.reserved_bytes == 76.5 * GIB
    assert oom.total_bytes == 80 * GIB  # the allocator's exact total, not the message's rounding
    assert oom.message.startswith("CUDA out of memory. Tried to allocate 2.00 GiB.")
    findings = s.diagnose()
    assert findings[0].id == "oom" and findings[0].severity == "high"
    assert "step 3, phase \"forward\"" in findings[0].title
    report = s.report()
    assert "OUT OF MEMORY in step 3, phase forward: asked for 2.0 GiB" in report
    assert "1. high     oom" in report  # the first finding
    # The saved run keeps it, and reads back.
    path = s.save(tmp_path / "run.json")
    back = json.loads(pathlib.Path(path).read_text())["summary"]["memory"]["oom"]
    assert back["step"] == 3 and back["phase"] == "forward"
    assert gs.Summary.from_json(s.summary().to_json()).memory == s.summary().memory


def test_an_oom_deep_in_nested_phases_names_the_whole_path(allocator):
    s = gs.Session()
    with pytest.raises(torch.OutOfMemoryError):
        train(s, oom_at=2, nested=True)
    oom = s.summary().memory.oom
    assert (oom.step, oom.phase, oom.phase_path) == (2, "attention", "forward/attention")


def test_a_loop_that_retries_after_an_oom_records_the_latest_one(allocator):
    # The second error may reuse the first one's address: it is raised as
    # deep, so it is a new error, not the first one leaving an outer scope.
    s = gs.Session()
    with s.step():
        for size in ("4.00", "2.00"):
            try:
                with s.phase("forward"):
                    raise torch.OutOfMemoryError(OOM_MESSAGE.replace("2.00 GiB.", f"{size} GiB."))
            except torch.OutOfMemoryError:
                pass
    assert s.summary().memory.oom.requested_bytes == 2 * GIB


def test_a_later_oom_raised_less_deep_is_recorded_too(allocator):
    # The first error is caught and freed; the second may take its address.
    s = gs.Session()
    with s.step():
        try:
            with s.phase("forward"):
                with s.phase("attention"):
                    raise fake_oom()
        except torch.OutOfMemoryError:
            pass
        try:
            with s.phase("optimizer"):
                raise torch.OutOfMemoryError(OOM_MESSAGE.replace("2.00 GiB.", "1.00 GiB."))
        except torch.OutOfMemoryError:
            pass
    oom = s.summary().memory.oom
    assert (oom.phase, oom.requested_bytes) == ("optimizer", GIB)


def test_the_oom_step_is_the_windows_own_step_number_after_epochs(allocator):
    # steps() cancels the step it began for an item that never came, once an
    # epoch: the OOM's step is still the number the window gives its step.
    s = gs.Session()
    for _ in range(2):
        for _ in s.steps(range(3)):
            with s.phase("forward"):
                pass
    with pytest.raises(torch.OutOfMemoryError):
        with s.step():
            with s.phase("forward"):
                raise fake_oom()
    oom = s.summary().memory.oom
    assert oom.step == 6 == s.step_series()[-1]["index"]


def test_an_oom_between_steps_keeps_its_phase_and_the_html_renders(allocator, tmp_path):
    pytest.importorskip("matplotlib")
    s = gs.Session()
    with s.step():
        pass
    with pytest.raises(torch.OutOfMemoryError):
        with s.phase("eval"):
            raise fake_oom()
    oom = s.summary().memory.oom
    assert oom.step is None and (oom.phase, oom.phase_path) == ("eval", "eval")
    html = pathlib.Path(s.save_html(tmp_path / "r.html")).read_text()
    assert "Out of memory</b> in outside a step, phase eval" in html


def test_other_errors_are_not_oom_and_record_nothing(allocator):
    s = gs.Session()
    with pytest.raises(ValueError):
        with s.step():
            with s.phase("forward"):
                raise ValueError("not memory")
    with pytest.raises(RuntimeError):
        with s.step():
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
    m = s.summary().memory
    assert m is None or m.oom is None


def test_an_older_torchs_runtime_error_oom_is_recognized(allocator):
    s = gs.Session()
    with pytest.raises(RuntimeError):
        with s.step():
            with s.phase("backward"):
                raise RuntimeError("CUDA out of memory. Tried to allocate 512.00 MiB (GPU 1; "
                                   "15.78 GiB total capacity)")
    oom = s.summary().memory.oom
    assert oom.phase == "backward" and oom.device == 1 and oom.requested_bytes == 512 * 2**20


def test_the_snapshot_path_is_recorded_when_one_is_saved(allocator, monkeypatch, tmp_path):
    saved = tmp_path / "oom_snapshot_rank0.pickle"
    monkeypatch.setattr(_memory, "save_snapshot", lambda device: str(saved))
    s = gs.Session()
    with pytest.raises(torch.OutOfMemoryError):
        with s.step():
            raise fake_oom()
    assert s.summary().memory.oom.snapshot == str(saved)
    assert str(saved) in s.diagnose()[0].recommendation


def test_no_snapshot_without_a_directory_or_without_cuda(monkeypatch):
    monkeypatch.delenv("GPUSCOPE_OOM_SNAPSHOT_DIR", raising=False)
    monkeypatch.setattr(_memory, "snapshot_dir", None)
    assert _memory.save_snapshot(0) == ""
    monkeypatch.setenv("GPUSCOPE_OOM_SNAPSHOT_DIR", "/nonexistent")
    assert _memory.save_snapshot(0) == ""  # CUDA not initialized: nothing to snapshot


def simulated_loop(memory_gib, steps=10, memory_bytes=None):
    """The simulated device's allocator, driven from Python: 2 GiB of weights,
    four 1 GiB activations in forward, a 0.5 GiB buffer in backward."""
    clock = gs.testing.ManualClock()
    gpu = gs.testing.SimulatedDevice(memory_bytes=memory_bytes or memory_gib * GIB)
    s = gs.Session(clock=clock, simulated_device=gpu)
    gpu.allocate(2 * GIB)
    for _ in range(steps):
        with s.step(samples=32):
            with s.phase("data"):
                clock.advance(5 * MS)
            with s.phase("forward"):
                acts = [gpu.allocate(GIB) for _ in range(4)]
                clock.advance(10 * MS)
            with s.phase("backward"):
                grad = gpu.allocate(GIB // 2)
                clock.advance(MS)
                for a in acts:
                    gpu.free(a)
                clock.advance(9 * MS)
                gpu.free(grad)
    clock.advance(MS)
    return s


def test_memory_reaches_json_html_prometheus_and_the_series(tmp_path):
    pytest.importorskip("matplotlib")
    s = simulated_loop(80)
    summary = s.summary()
    g = summary.memory.gpus[0]
    assert (g.peak_allocated_bytes, g.peak_phase) == (6.5 * GIB, "backward")
    assert [f.id for f in s.diagnose()].count("batch-headroom") == 1
    d = summary.to_dict()["memory"]
    assert d["gpus"][0]["peak_phase"] == "backward" and d["oom"] is None
    assert pickle.loads(pickle.dumps(summary.memory)) == summary.memory
    series = s.step_series()
    assert all(p["memory_peak_bytes"] == 6.5 * GIB for p in series)
    assert s.step_columns()["memory_peak_bytes"].tolist() == [6.5 * GIB] * 10
    html = pathlib.Path(s.save_html(tmp_path / "r.html")).read_text()
    assert '<h2>GPU memory</h2>' in html and 'id="plot-memory"><svg' in html
    text = s.prometheus()
    assert re.search(rf'^gpuscope_memory_peak_allocated_bytes{{run_id="[^"]+",host="[^"]+",gpu="0"}} {6.5 * GIB:.17g}$',
                     text, re.M), text
    assert re.search(r'^gpuscope_memory_alloc_retries\{run_id="[^"]+",host="[^"]+",gpu="0"\} 0$', text, re.M)
    assert "peak by phase: backward 6.5 GiB, forward 6.0 GiB" in s.report()


def test_a_run_without_memory_says_so_in_the_html(tmp_path):
    pytest.importorskip("matplotlib")
    s = gs.Session(clock=gs.testing.ManualClock())
    with s.step():
        pass
    html = pathlib.Path(s.save_html(tmp_path / "r.html")).read_text()
    assert "No GPU memory was sampled in this run" in html and "<h2>GPU memory</h2>" not in html


def test_compare_shows_peak_memory_and_does_not_gate_on_it(tmp_path):
    base = simulated_loop(80).save(tmp_path / "base.json")
    # The same loop with twice the activations: more memory, same step time.
    clock = gs.testing.ManualClock()
    gpu = gs.testing.SimulatedDevice(memory_bytes=80 * GIB)
    s = gs.Session(clock=clock, simulated_device=gpu)
    gpu.allocate(2 * GIB)
    for _ in range(10):
        with s.step(samples=32):
            with s.phase("data"):
                clock.advance(5 * MS)
            with s.phase("forward"):
                acts = [gpu.allocate(2 * GIB) for _ in range(4)]
                clock.advance(10 * MS)
            with s.phase("backward"):
                grad = gpu.allocate(GIB // 2)
                clock.advance(MS)
                for a in acts:
                    gpu.free(a)
                clock.advance(9 * MS)
                gpu.free(grad)
    clock.advance(MS)
    new = s.save(tmp_path / "new.json")
    p = subprocess.run([sys.executable, "-m", "gpuscope", "compare", "--min-steps", "5", str(base),
                        str(new)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "peak GPU memory (GiB)" in p.stdout
    row = next(line for line in p.stdout.splitlines() if "peak GPU memory" in line)
    assert "6.50" in row and "10.50" in row and "+61.5%" in row


RUNNER_SCRIPT = textwrap.dedent('''
    import torch

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            if self.calls == 4:
                raise torch.OutOfMemoryError(OOM)
            return self.a(x)

    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.randn(64, 8), batch_size=8)
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
''')


def test_gpuscope_run_records_an_oom_of_an_unmodified_script(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(f"OOM = {OOM_MESSAGE!r}\n" + RUNNER_SCRIPT)
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env.pop("GPUSCOPE_SIMULATE", None)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "gpuscope", "run", "--out", str(out), "--no-html",
                        str(script)], capture_output=True, text=True, timeout=180, env=env)
    assert p.returncode == 1, p.stderr[-3000:]
    assert "torch.OutOfMemoryError: CUDA out of memory" in p.stderr  # its traceback, as Python's
    assert "OUT OF MEMORY in step 3" in p.stderr  # the report
    oom = json.loads((out / "run.json").read_text())["summary"]["memory"]["oom"]
    assert oom["step"] == 3 and oom["phase"] == "forward"
    assert oom["requested_bytes"] == 2 * GIB


def test_memory_pressure_fires_at_its_default_line_and_never_beside_headroom():
    # 6.5 GiB of a 6.6 GiB GPU: 98 % at the peak; the same loop on 80 GiB is quiet.
    full = {f.id: f for f in simulated_loop(0, steps=10, memory_bytes=int(6.6 * GIB)).diagnose()}
    assert "memory-pressure" in full and "batch-headroom" not in full
    assert "phase \"backward\"" in full["memory-pressure"].title
    roomy = {f.id for f in simulated_loop(80).diagnose()}
    assert "memory-pressure" not in roomy and "batch-headroom" in roomy


@pytest.mark.gpu
def test_on_a_real_gpu_the_peak_is_torchs_and_an_oom_is_recorded():
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    dev = torch.device("cuda")
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(),
                                torch.nn.Linear(4096, 1024)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    s = gs.Session(telemetry_interval_ms=2)
    for x in s.steps([torch.randn(2048, 1024, device=dev) for _ in range(40)]):
        with s.phase("forward"):
            loss = model(x).square().mean()
        with s.phase("backward"):
            loss.backward()
        with s.phase("optimizer"):
            opt.step()
            opt.zero_grad()
    torch.cuda.synchronize()
    time.sleep(0.05)
    m = s.summary().memory
    assert m is not None and m.source == "torch.cuda"
    g = m.gpus[0]
    # The window's peak is torch's all-time peak (every step reaches it), or a
    # sampled lower bound of it.
    assert g.peak_allocated_bytes <= torch.cuda.max_memory_allocated()
    assert g.peak_allocated_bytes >= 0.5 * torch.cuda.max_memory_allocated()
    assert g.total_bytes == torch.cuda.get_device_properties(0).total_memory
    total = torch.cuda.get_device_properties(0).total_memory
    with pytest.raises(torch.OutOfMemoryError):
        with s.step():
            with s.phase("forward"):
                torch.empty(int(total * 1.5), dtype=torch.uint8, device=dev)
    oom = s.summary().memory.oom
    assert oom.phase == "forward" and oom.requested_bytes >= total

"""Model FLOPs utilization from Python (docs/mfu.md): gs.count_flops() against
a hand count, and a session's FLOP/s and MFU on a manual clock."""

import re

import pytest

import gpuscope as gs
from conftest import MS

torch = pytest.importorskip("torch")

BATCH, IN, HIDDEN, OUT = 16, 32, 64, 8


def mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(IN, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, OUT))


def test_count_flops_forward_is_two_per_multiply_add():
    model, x = mlp(), torch.randn(BATCH, IN)
    # Each Linear: BATCH x in x out multiply-adds, 2 FLOPs each.
    forward = 2 * BATCH * (IN * HIDDEN + HIDDEN * OUT)
    assert gs.count_flops(model, x, backward=False) == forward


def test_count_flops_backward():
    model = mlp()
    # With an input that needs a gradient every layer's backward is two
    # matmuls as large as its forward: 3x the forward in all.
    x = torch.randn(BATCH, IN, requires_grad=True)
    forward = 2 * BATCH * (IN * HIDDEN + HIDDEN * OUT)
    assert gs.count_flops(model, (x,)) == 3 * forward
    # A plain input: the first layer skips its input gradient.
    plain = torch.randn(BATCH, IN)
    assert gs.count_flops(model, plain) == 3 * forward - 2 * BATCH * IN * HIDDEN
    # Gradients are left as they were.
    assert all(p.grad is None for p in model.parameters())


def test_session_flops_per_second_and_mfu_by_hand(tmp_path):
    model, x = mlp(), torch.randn(BATCH, IN, requires_grad=True)
    per_sample = gs.count_flops(model, x) / BATCH  # 3 * 2 * (32*64 + 64*8) = 15360
    assert per_sample == 15360
    clock = gs.testing.ManualClock()
    s = gs.Session(64, clock=clock, telemetry_interval_ms=0, flops_per_sample=per_sample,
                   peak_flops=1e7)
    accum = 4  # 4 micro-batches of BATCH per optimizer step: one gpuscope step
    for _ in range(5):
        with s.step(samples=accum * BATCH):
            clock.advance(100 * MS)
    e = s.summary().efficiency
    # 15360 FLOPs x 64 samples / 0.1 s = 9,830,400 FLOP/s; / 1e7 = 0.98304.
    assert e.flops_per_second == pytest.approx(9830400, rel=1e-12)
    assert e.mfu == pytest.approx(0.98304, rel=1e-12)
    assert e.peak_source == "options" and e.reason == ""
    assert "efficiency  model FLOPs 9.83 MFLOP/s = 98.3% MFU" in s.report()
    assert re.search(r"^gpuscope_mfu_ratio\{[^}]*\} 0.98304", s.prometheus(), re.M)
    assert s.summary().to_dict()["efficiency"]["mfu"] == pytest.approx(0.98304)
    html = tmp_path / "r.html"
    s.save_html(html)
    assert "MFU 98.3% (options)" in html.read_text()
    s.close()


def test_device_name_table_and_unknown_gpu():
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, telemetry_interval_ms=0, flops_per_step=1e12,
                   device_name="NVIDIA A100-SXM4-80GB", peak_precision="tf32")
    with s.step():
        clock.advance(1000 * MS)
    e = s.summary().efficiency
    assert e.peak_flops == 156e12 and e.peak_source == "table: A100 SXM, tf32 dense"
    assert e.mfu == pytest.approx(1e12 / 156e12)
    s.close()
    # No GPU here: no name from torch, so no MFU, and the reason says what to pass.
    s = gs.Session(clock=clock, telemetry_interval_ms=0, flops_per_step=1e12)
    with s.step():
        clock.advance(1000 * MS)
    e = s.summary().efficiency
    if not torch.cuda.is_available():
        assert e.mfu is None and "peak_flops" in e.reason
    assert e.flops_per_second == pytest.approx(1e12)
    s.close()
    assert gs.Session(telemetry_interval_ms=0).summary().efficiency is None


@pytest.mark.parametrize("kwargs, error", [
    (dict(flops_per_step=-1), ValueError),
    (dict(flops_per_sample=float("nan")), ValueError),
    (dict(flops_per_step=1, flops_per_sample=1), ValueError),
    (dict(peak_flops=float("inf")), ValueError),
    (dict(peak_precision="int8"), ValueError),
    (dict(flops_per_step="1e12"), TypeError),
])
def test_bad_options_are_rejected(kwargs, error):
    with pytest.raises(error) as info:
        gs.Session(telemetry_interval_ms=0, **kwargs)
    assert any(w in str(info.value) for w in ("use", "must be", "give one")), info.value


def test_status_line_shows_throughput_and_mfu():
    from gpuscope._runner import status_line

    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, telemetry_interval_ms=0, flops_per_sample=15360, peak_flops=1e7)
    for _ in range(3):
        with s.step(samples=64, tokens=64 * 1024):
            clock.advance(100 * MS)
    line = status_line(s)
    assert "| 640.0 samples/s, 655.36k tokens/s | MFU 98.3%" in line, line
    s.close()


def test_device_name_comes_from_torch(monkeypatch):
    """With FLOPs given and no device_name, the session asks torch for the
    current GPU's name (here a stand-in for torch.cuda on an H100 SXM)."""
    asked = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name",
                        lambda device=None: asked.append(device) or "NVIDIA H100 80GB HBM3")
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, telemetry_interval_ms=0, flops_per_step=989.5e12)
    with s.step():
        clock.advance(1000 * MS)
    e = s.summary().efficiency
    assert asked == [None]
    assert e.peak_source == "table: H100 SXM, bf16 dense" and e.mfu == pytest.approx(1.0)
    s.close()
    # Without FLOPs it is not asked (nothing needs it); a failing torch is no MFU, not an error.
    gs.Session(telemetry_interval_ms=0).close()
    assert asked == [None]

    def broken(device=None):
        raise RuntimeError("CUDA driver initialization failed")
    monkeypatch.setattr(torch.cuda, "get_device_name", broken)
    s = gs.Session(clock=clock, telemetry_interval_ms=0, flops_per_step=1e12)
    with s.step():
        clock.advance(1000 * MS)
    assert s.summary().efficiency.mfu is None
    s.close()


def test_runner_options():
    from gpuscope._cli import build_parser
    from gpuscope._runner import _options

    def parse(argv):
        return _options(build_parser().parse_args(["run", *argv]))

    o, error = parse(["--flops-per-step", "3.2e15", "--peak-flops=989.5e12", "--peak-precision",
                      "fp8", "train.py", "--flops-per-step", "x"])
    assert error is None and o.script == "train.py" and o.args == ["--flops-per-step", "x"]
    assert o.session_options == {"flops_per_step": 3.2e15, "peak_flops": 989.5e12,
                                 "peak_precision": "fp8"}
    for bad in (["--flops-per-step", "-1"], ["--peak-flops", "nan"], ["--peak-flops", "lots"],
                ["--peak-precision", "int8"]):
        o, error = parse([*bad, "train.py"])
        assert o is None and bad[0] in error, error


def test_runner_status_line_shows_mfu(tmp_path):
    from test_runner import SCRIPT, run

    p = run(["--out", str(tmp_path), "--no-html", "--status", "0.2", "--flops-per-step", "1e9",
             "--peak-flops", "1e12", str(SCRIPT)])
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [line for line in p.stderr.splitlines() if line.startswith("gpuscope: step ")]
    assert lines and "| MFU " in lines[-1], p.stderr[-3000:]
    assert "efficiency  model FLOPs" in p.stderr


def test_efficiency_pickles_and_compares_by_value():
    import pickle

    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, telemetry_interval_ms=0, flops_per_step=1e12, peak_flops=4e12)
    with s.step():
        clock.advance(1000 * MS)
    e = s.summary().efficiency
    assert isinstance(e, gs.EfficiencyStats)
    back = pickle.loads(pickle.dumps(e))
    assert back == e and hash(back) == hash(e) and back.mfu == 0.25
    s.close()

"""benchmarks/gpu_validate.py: the ground truth it computes from a
torch.profiler trace, on hand-made traces (no GPU needed), and the script
itself on a GPU (marked `gpu`)."""

import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_validate.py"
_spec = importlib.util.spec_from_file_location("gpu_validate", _PATH)
gv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gv)


def X(cat, name, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "args": args}


def test_union_length_merges_and_clips():
    assert gv.union_length([(0, 10), (5, 15), (20, 30)], 0, 100) == 25
    assert gv.union_length([(0, 10), (5, 15), (20, 30)], 8, 25) == 12  # [8,15] + [20,25]
    assert gv.union_length([], 0, 10) == 0
    assert gv.union_length([(0, 10)], 10, 20) == 0


def test_truth_from_a_hand_made_trace():
    step = gv.STEP_RANGE
    trace = {"traceEvents": [
        # warm-up step, left out
        X("user_annotation", step, 0, 100),
        X("kernel", "k0", 10, 50, device=0, correlation=1),
        # step 1: [100, 200]; forward [130, 150] launches a 40 us kernel on
        # device 0 (correlation 2) that overlaps a 20 us copy; device 1 runs
        # 50 us, launched outside any phase.
        X("user_annotation", step, 100, 100),
        X("user_annotation", "forward", 130, 20),
        X("cuda_runtime", "cudaLaunchKernel", 135, 2, correlation=2),
        X("kernel", "gemm", 140, 40, device=0, correlation=2),
        X("gpu_memcpy", "Memcpy HtoD", 170, 20, device=0, correlation=3),
        X("cuda_runtime", "cudaLaunchKernel", 110, 2, correlation=4),
        X("kernel", "other", 120, 50, device=1, correlation=4),
        # step 2: [200, 300]; forward [200, 210] launches 10 us on device 0
        # that runs past the window's end by 5 us.
        X("user_annotation", step, 200, 100),
        X("user_annotation", "forward", 200, 10),
        X("cuda_runtime", "cudaLaunchKernel", 205, 2, correlation=5),
        X("kernel", "tail", 295, 10, device=0, correlation=5),
        {"ph": "i", "name": "instant", "ts": 1},  # not a complete event: ignored
    ]}
    t = gv.truth_from_trace(trace, skip_steps=1, phases=["forward", "missing"])
    assert t["steps"] == 2
    # device 0: [140, 190] in step 1 (50), [295, 300] in step 2 (5): 55 of 200
    assert t["idle_pct_by_device"][0] == pytest.approx(100 * (1 - 55 / 200))
    # device 1: 50 of 200
    assert t["idle_pct_by_device"][1] == pytest.approx(75.0)
    assert t["idle_pct"] == pytest.approx((72.5 + 75.0) / 2)
    # forward launched 40 us (step 1) and 10 us (step 2): median of [10, 40] -> 40 (upper)
    assert t["phase_device_s"]["forward"] == pytest.approx(40e-6)
    assert t["phase_device_s"]["missing"] == 0.0


def test_targets_per_source():
    assert gv.check("events", "starved", truth=75.0, got=70.0) == (True, "bound <= truth, within 10 pts")
    assert gv.check("events", "starved", truth=75.0, got=60.0)[0] is False  # too loose
    assert gv.check("events", "starved", truth=75.0, got=76.0)[0] is False  # above the truth
    assert gv.check("events", "mixed", truth=75.0, got=40.0)[0] is True     # no closeness target
    assert gv.check("cupti", "mixed", truth=75.0, got=73.5)[0] is True
    assert gv.check("cupti", "mixed", truth=75.0, got=77.5)[0] is False
    assert gv.check("host", "starved", truth=75.0, got=75.0)[0] is False


def test_a_trace_without_steps_is_an_error():
    with pytest.raises(ValueError, match=gv.STEP_RANGE):
        gv.truth_from_trace({"traceEvents": []})


def test_without_a_gpu_the_script_says_so(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert gv.main(["--steps", "2"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


@pytest.mark.gpu
def test_on_a_gpu_the_events_bound_holds(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "table.md"
    assert gv.main(["--steps", "30", "--warmup", "5", "--out", str(out)]) == 0, out.read_text()

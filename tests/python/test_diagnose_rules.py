"""The diagnosis rules end to end from Python: loops on the simulated
device's activity records, each built to show one bottleneck of the
playbook, get that finding first, with the knob to turn."""

import pytest

import gpuscope as gs
from conftest import MS

US = 1_000


# The `gpu` fixture (conftest.py): a simulated device with activity records.
pytestmark = pytest.mark.simulated_device(activity=True)


def _ids(findings):
    return [f.id for f in findings]


def test_launch_bound_loop_of_tiny_kernels(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(20):
        with s.step():
            with s.phase("forward"):
                for _ in range(200):  # 5 us kernels launched every 15 us
                    gpu.launch(5 * US, name="void at::native::vectorized_elementwise_kernel<4>")
                    clock.advance(15 * US)
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    findings = s.diagnose()
    assert findings[0].id == "launch-bound", _ids(findings)
    assert findings[0].severity == "high"
    assert "batch may be too small" in findings[0].title
    assert "CUDA graphs" in findings[0].recommendation
    s.close()


def test_fp32_gemms_and_nccl_all_reduce(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(20):
        with s.step():
            with s.phase("forward"):
                gpu.launch(30 * MS, name="ampere_sgemm_128x64_nn")
                gpu.launch(10 * MS, name="ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn")
            with s.phase("comm"):
                gpu.launch(15 * MS, name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL")
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    sm = s.summary()
    assert sm.activity.fp32_gemm_time_per_step == pytest.approx(0.030)
    assert sm.activity.collective_time_per_step == pytest.approx(0.015)
    findings = s.diagnose()
    assert _ids(findings)[:2] == ["precision", "comm-bound"], _ids(findings)
    assert "bfloat16" in findings[0].recommendation
    assert findings[1].share == pytest.approx(15 / 55, abs=1e-3)
    s.close()


def test_sync_every_step_drains_the_gpu(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(20):
        with s.step():
            with s.phase("forward"):
                for _ in range(10):
                    gpu.launch(1 * MS)
                clock.advance(gpu.synchronize())  # loss.item()
                clock.advance(5 * MS)  # the host logs, the GPU waits
                for _ in range(10):
                    gpu.launch(1 * MS)
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    findings = s.diagnose()
    assert findings[0].id == "sync-bound", _ids(findings)
    assert "set_sync_debug_mode" in findings[0].recommendation
    s.close()


def test_a_busy_gpu_is_gpu_bound(clock, gpu):
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0)
    for _ in range(20):
        with s.step():
            with s.phase("forward"):
                gpu.launch(50 * MS, name="ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_tn")
            clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    assert _ids(s.diagnose()) == ["gpu-bound"]
    assert "gpu-bound (notice)" in s.report()
    s.close()

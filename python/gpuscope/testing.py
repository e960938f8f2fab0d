"""Helpers for testing code instrumented with gpuscope.

``ManualClock`` makes step times exact; ``SimulatedDevice`` is a GPU model
(in-order streams, kernels, CUDA-event-like markers, injectable faults) so
the GPU side runs without a GPU::

    clock = gpuscope.testing.ManualClock()
    gpu = gpuscope.testing.SimulatedDevice()
    s = gpuscope.Session(clock=clock, simulated_device=gpu)
    with s.step():
        with s.phase("data"):
            clock.advance(30_000_000)       # 30 ms waiting for the loader
        with s.phase("forward"):
            gpu.launch(10_000_000)          # a 10 ms kernel
            clock.advance(10_000_000)       # the host waits for it
    clock.advance(1_000_000)
    s.summary().gpu_idle_pct               # 75.0, a lower bound (source "events")
"""

from ._gpuscope import ManualClock, SimulatedDevice

__all__ = ["ManualClock", "SimulatedDevice"]

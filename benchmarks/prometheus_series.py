"""How many Prometheus series a job exposes, for 1, 8 and 64 ranks
(docs/prometheus.md#labels-and-cardinality).

Each rank is a session on its own simulated device with CUPTI-like activity
(source cupti: device time by category and the top kernels, the most series
a rank can have), GPU memory from the simulated allocator, and a loop of six
phases (data, h2d, forward, backward, comm, optimizer) launching twelve kernel
names; the last rank's GPU is slow in ``forward``, so the exchange names a
straggler. The ranks' records are exchanged in this process as the
torch.distributed exchange would carry them (``_rank_record`` /
``_set_rank_records``), and each rank's exposition is rendered with its
job's labels (``run_id``, ``host``: eight ranks a node, ``gpu``: the local
rank), as ``Session.prometheus()`` does. The series of a job are the sample
lines of all its ranks' expositions (every sample carries ``rank``, so none
repeats across ranks).

Not counted: NVML telemetry, which the simulated device has none of; on a
real GPU it adds at most ``TELEMETRY_FAMILIES`` one-series gauges per rank
(the Telemetry() families of lib/export/prometheus.cc).

Then one rank whose loop names a phase after each step (``f"batch_{i}"``,
the mistake that explodes a Prometheus server), 100 steps (the session's
phase table, 128 names by default, refuses more), with the exposition's
``max_phases`` at 8 and at its default, 32.

Usage: python benchmarks/prometheus_series.py [--ranks 1,8,64]
"""

from __future__ import annotations

import argparse
import collections
from typing import Dict, List

import gpuscope as gs
from gpuscope import _gpuscope

TELEMETRY_FAMILIES = 14
MS = 1_000_000
KERNELS = ["ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", "ampere_bf16_s16816gemm_bf16_64x64_nn",
           "void at::native::vectorized_elementwise_kernel<4>", "void at::native::reduce_kernel<512, 1>",
           "flash_fwd_kernel", "flash_bwd_dq_dk_dv_loop_kernel", "void at::native::softmax_warp_forward",
           "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm>", "layer_norm_fwd_kernel",
           "layer_norm_bwd_kernel", "multi_tensor_apply_kernel", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"]


def rank_session(rank: int, world: int, steps: int = 40) -> gs.Session:
    clock = gs.testing.ManualClock()
    gpu = gs.testing.SimulatedDevice(activity=True)
    s = gs.Session(clock=clock, simulated_device=gpu, stream=0, window=64, run_id="job-7")
    slow = rank == world - 1 and world > 1
    for _ in range(steps):
        with s.step(samples=32):
            with s.phase("data"):
                clock.advance(3 * MS)
            with s.phase("h2d"):
                gpu.launch_copy("h2d", 8 << 20, 1 * MS)
                clock.advance(gpu.synchronize())
            with s.phase("forward"):
                block = gpu.allocate(256 << 20)
                for k in KERNELS[:6]:
                    gpu.launch((5 if slow else 2) * MS, 0, k)  # a slow GPU
                clock.advance(gpu.synchronize())
                gpu.free(block)
            with s.phase("backward"):
                for k in KERNELS[6:11]:
                    gpu.launch(3 * MS, 0, k)
                clock.advance(gpu.synchronize())
            with s.phase("comm"):
                gpu.launch(2 * MS, 0, KERNELS[11])
                clock.advance(gpu.synchronize())
            with s.phase("optimizer"):
                gpu.launch(1 * MS, 0, KERNELS[10])
                clock.advance(gpu.synchronize())
    clock.advance(1000 * MS)
    _gpuscope._set_rank(s, rank, rank % 8, world, f"node{rank // 8}")
    return s


def sample_lines(text: str) -> List[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def job_series(world: int) -> Dict[str, int]:
    sessions = [rank_session(r, world) for r in range(world)]
    records = [_gpuscope._rank_record(s.summary()) for s in sessions]
    for s in sessions:
        refused = _gpuscope._set_rank_records(s, records)
        assert refused == 0, refused
    by_family: Dict[str, int] = collections.Counter()
    seen = set()
    for r, s in enumerate(sessions):
        labels = [("run_id", "job-7"), ("host", f"node{r // 8}"), ("gpu", str(r % 8))]
        for line in sample_lines(_gpuscope.prometheus_text(s.summary(), labels)):
            series = line.rsplit(" ", 1)[0]
            assert series not in seen, f"series repeated across ranks: {series}"
            seen.add(series)
            by_family[series.split("{", 1)[0]] += 1
    stragglers = len(sessions[0].summary().ranks.stragglers) if world > 1 else 0
    return {"series": len(seen), "per_rank": len(seen) / world, "families": len(by_family),
            "stragglers": stragglers, "phase_label": sum(v for k, v in by_family.items() if "phase" in k)}


def varying_phases(steps: int = 100) -> Dict[str, int]:
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, window=64)
    for i in range(steps):
        with s.step():
            with s.phase(f"batch_{i}"):
                clock.advance(5 * MS)
            with s.phase("forward"):
                clock.advance(10 * MS)
    clock.advance(1000 * MS)
    summary = s.summary()
    out = {"phases in summary": len(summary.phases)}
    for bound in (8, 32):
        text = _gpuscope.prometheus_text(summary, [("run_id", "x")], bound)
        out[f"series, max_phases={bound}"] = len(sample_lines(text))
        out[f"phase_share series, max_phases={bound}"] = sum(
            1 for line in sample_lines(text) if line.startswith("gpuscope_phase_share_ratio"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", default="1,8,64")
    args = ap.parse_args()
    print("ranks  series  per rank  families  stragglers  (NVML adds <= "
          f"{TELEMETRY_FAMILIES} per rank)")
    for world in (int(x) for x in args.ranks.split(",")):
        r = job_series(world)
        print(f"{world:5d}  {r['series']:6d}  {r['per_rank']:8.1f}  {r['families']:8d}  {r['stragglers']:10d}")
    print()
    for key, value in varying_phases().items():
        print(f"phase named per step: {key}: {value}")


if __name__ == "__main__":
    main()

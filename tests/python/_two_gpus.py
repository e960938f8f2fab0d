"""One timeline on two GPUs, several streams each, written as a torch.profiler
trace and as an Nsight Systems export, with the numbers it must give worked
out by hand (docs/definitions.md: per device, the union of kernels, copies
and memsets in the step; each instant to the highest of kernel > memcpy >
memset; a device's idle is the rest, the summary's their mean).

Every 10 ms step, times in microseconds from the step's start:

  GPU 0  stream 7   kernel  sgemm_128x64_nn          1000 - 5000
         stream 8   kernel  vectorized_elementwise   3000 - 7000   (2000 us under the first)
         stream 9   copy    host to device, pinned   6000 - 8000   (1 MiB; 1000 us under the kernel)
         stream 7   memset                           8500 - 9000
  GPU 1  stream 20  kernel  sgemm_128x64_nn           500 - 2500
         stream 21  copy    device to host, pageable 2000 - 4000   (4 KiB; 500 us under the kernel)
         stream 20  kernel  vectorized_elementwise   4000 - 4500

GPU 0: kernels 6000, copy alone 1000, memset 500: busy 7500, idle 25 %.
GPU 1: kernels 2500, copy alone 1500: busy 4000, idle 60 %.
"""

import gzip
import json
import sqlite3

STEPS = 4
STEP_US = 10_000
T0_US = 1_712_195_495_505_582  # epoch scale, as Kineto writes

KERNELS = [  # device, stream, begin, end, name
    (0, 7, 1000, 5000, "sgemm_128x64_nn"),
    (0, 8, 3000, 7000, "vectorized_elementwise_kernel"),
    (0, 7, 8500, 9000, None),  # the memset
    (1, 20, 500, 2500, "sgemm_128x64_nn"),
    (1, 20, 4000, 4500, "vectorized_elementwise_kernel"),
]
COPIES = [  # device, stream, begin, end, direction, pageable, bytes
    (0, 9, 6000, 8000, "HtoD", False, 1 << 20),
    (1, 21, 2000, 4000, "DtoH", True, 4096),
]

EXPECTED = {
    "device_idle_pct": {0: 25.0, 1: 60.0},
    "gpu_idle_pct": 42.5,
    "share_kernel": (6000 + 2500) / (2 * STEP_US),
    "share_memcpy": (1000 + 1500) / (2 * STEP_US),
    "share_memset": 500 / (2 * STEP_US),
    "share_idle": (2500 + 6000) / (2 * STEP_US),
    "kernels_per_step": 4,
    "copies_per_step": 2,
    "pageable_copies_per_step": 1,
    "h2d_bytes_per_step": 1 << 20,
    "d2h_bytes_per_step": 4096,
}


def _device_records():
    """(step, device, stream, begin_us, end_us, kind, name, extra) in time order."""
    out = []
    for i in range(STEPS):
        t = T0_US + i * STEP_US
        for dev, stream, b, e, name in KERNELS:
            out.append((i, dev, stream, t + b, t + e, "memset" if name is None else "kernel", name, None))
        for dev, stream, b, e, direction, pageable, nbytes in COPIES:
            out.append((i, dev, stream, t + b, t + e, "memcpy", direction, (pageable, nbytes)))
    return sorted(out, key=lambda r: r[3])


def write_kineto(path):
    """The current Kineto format, gzip'ed: ProfilerStep ranges, a launch
    (cuda_runtime) 200 us before each device record, with its correlation."""
    events = []
    for i in range(STEPS):
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i}", "pid": 1, "tid": 1,
                       "ts": T0_US + i * STEP_US, "dur": STEP_US})
    for n, (_, dev, stream, b, e, kind, name, extra) in enumerate(_device_records(), start=1):
        launch = {"kernel": "cudaLaunchKernel", "memcpy": "cudaMemcpyAsync", "memset": "cudaMemsetAsync"}[kind]
        events.append({"ph": "X", "cat": "cuda_runtime", "name": launch, "pid": 1, "tid": 1, "ts": b - 200,
                       "dur": 5, "args": {"correlation": n}})
        args = {"device": dev, "stream": stream, "correlation": n}
        if kind == "kernel":
            event = {"cat": "kernel", "name": name}
        elif kind == "memset":
            event = {"cat": "gpu_memset", "name": "Memset (Device)"}
            args["bytes"] = 256
        else:
            pageable, nbytes = extra
            host = "Pageable" if pageable else "Pinned"
            event = {"cat": "gpu_memcpy",
                     "name": f"Memcpy HtoD ({host} -> Device)" if name == "HtoD" else f"Memcpy DtoH (Device -> {host})"}
            args["bytes"] = nbytes
        event.update({"ph": "X", "pid": dev, "tid": stream, "ts": b, "dur": e - b, "args": args})
        events.append(event)
    with gzip.open(path, "wt") as f:
        json.dump({"schemaVersion": 1, "traceEvents": events,
                   "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"},
                                        {"id": 1, "name": "NVIDIA A100-SXM4-80GB"}]}, f)


# The tables of an nsys export that strings, NVTX ranges, runtime calls and
# kernels go in, with nsys's column names (test_analyze_nsys.py writes them too).
NSYS_TABLES = """
    CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, "end" INTEGER, eventType INTEGER NOT NULL,
      text TEXT, globalTid INTEGER, textId INTEGER, domainId INTEGER);
    CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, "end" INTEGER NOT NULL,
      eventClass INTEGER NOT NULL, globalTid INTEGER, correlationId INTEGER, nameId INTEGER NOT NULL);
    CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, "end" INTEGER NOT NULL,
      deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
      demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL);
"""


def write_nsys(path):
    """The same timeline as nsys exports it (no ENUM_* tables: nsys 2022's
    numbering, copy kinds HtoD 1 and DtoH 2, memory kinds pageable 0, pinned
    1, device 2), in nanoseconds; the steps are NVTX push/pop ranges."""
    ns = 1000
    db = sqlite3.connect(path)
    db.executescript(NSYS_TABLES + """
        INSERT INTO StringIds VALUES (1, 'cudaLaunchKernel_v7000'), (2, 'cudaMemcpyAsync_v3020'),
                                     (3, 'cudaMemsetAsync_v3020'), (4, 'sgemm_128x64_nn'),
                                     (5, 'vectorized_elementwise_kernel');
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (start INTEGER NOT NULL, "end" INTEGER NOT NULL,
          deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
          bytes INTEGER NOT NULL, copyKind INTEGER NOT NULL, srcKind INTEGER, dstKind INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER NOT NULL, "end" INTEGER NOT NULL,
          deviceId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER,
          bytes INTEGER NOT NULL, memKind INTEGER);
    """)
    tid = 16777217
    for i in range(STEPS):
        t = (T0_US + i * STEP_US) * ns
        db.execute("INSERT INTO NVTX_EVENTS VALUES (?, ?, 59, ?, ?, NULL, NULL)",
                   (t, t + STEP_US * ns, f"ProfilerStep#{i}", tid))
    names = {"sgemm_128x64_nn": 4, "vectorized_elementwise_kernel": 5}
    for n, (_, dev, stream, b, e, kind, name, extra) in enumerate(_device_records(), start=1):
        b, e = b * ns, e * ns
        launch = {"kernel": 1, "memcpy": 2, "memset": 3}[kind]
        db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?)",
                   (b - 200 * ns, b - 195 * ns, tid, n, launch))
        if kind == "kernel":
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (b, e, dev, stream, n, names[name], names[name]))
        elif kind == "memset":
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?, ?, ?, ?, ?, 256, 2)",
                       (b, e, dev, stream, n))
        else:
            pageable, nbytes = extra
            host = 0 if pageable else 1
            copy_kind, src, dst = (1, host, 2) if name == "HtoD" else (2, 2, host)
            db.execute("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                       (b, e, dev, stream, n, nbytes, copy_kind, src, dst))
    db.commit()
    db.close()


def check(summary, approx):
    """Asserts the summary gives EXPECTED exactly (to rounding)."""
    s = summary
    assert s.source == "cupti", s.source_reason
    assert s.steps == STEPS and s.gpu_steps == STEPS
    assert s.step_time.p50 == approx(STEP_US * 1e-6, rel=1e-9)
    assert {d.device: d.gpu_idle_pct for d in s.devices} == {
        dev: approx(v, abs=1e-9) for dev, v in EXPECTED["device_idle_pct"].items()}
    assert s.gpu_idle_pct == approx(EXPECTED["gpu_idle_pct"], abs=1e-9)
    a = s.activity
    assert a.device_share_kernel == approx(EXPECTED["share_kernel"], abs=1e-12)
    assert a.device_share_memcpy == approx(EXPECTED["share_memcpy"], abs=1e-12)
    assert a.device_share_memset == approx(EXPECTED["share_memset"], abs=1e-12)
    assert a.device_share_comm == 0
    assert a.device_share_idle == approx(EXPECTED["share_idle"], abs=1e-12)
    for field in ("kernels_per_step", "copies_per_step", "pageable_copies_per_step",
                  "h2d_bytes_per_step", "d2h_bytes_per_step"):
        assert getattr(a, field) == approx(EXPECTED[field], rel=1e-12), field
    # Kernel time is summed durations, per step and device: (8000 + 2500) / 2.
    assert a.kernel_time_per_step == approx(5250e-6, rel=1e-12)
    # The GEMMs (4000 and 2000 us a step) are the top kernel, the elementwise
    # kernels (4000 and 500 us) next, per step and device as above.
    top = [(k.name, k.count_per_step, round(k.time_per_step * 1e6, 3), round(k.share, 12))
           for k in s.top_kernels]
    assert top == [("sgemm_128x64_nn", 2, 3000.0, round(6000 / 10500, 12)),
                   ("vectorized_elementwise_kernel", 2, 2250.0, round(4500 / 10500, 12))]

"""A large torch.profiler trace in the current Kineto format, for timing
trace readers (benchmarks/analyze_trace.py).

    python benchmarks/gen_kineto_trace.py OUT.json [--size-mb 1024] [--step ProfilerStep#9]

One real training step (by default ``ProfilerStep#9`` of
tests/data/traces/resnet50_v100_workers4.pt.trace.json.gz: ResNet-50 on a
V100, about 6 500 host events and 1 500 device records) is repeated, shifted
in time, until the file reaches the size asked for. The source is the older
Kineto layout (categories ``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``,
``Memset``); what is written is the current one:

- an object with ``schemaVersion``, ``deviceProperties``, ``distributedInfo``
  (rank 0, world size 1; written ``"rank": 0`` near the top, where HTA looks
  for it line by line) and ``traceEvents``;
- categories ``cpu_op``, ``cuda_runtime``, ``kernel``, ``gpu_memcpy``,
  ``gpu_memset``; each step's ``ProfilerStep#N`` range as ``user_annotation``;
- ``ac2g`` flow events (``s`` at the launch, ``f`` at the device record);
- timestamps in microseconds at epoch scale with three decimals (newer
  Kineto writes nanosecond precision), durations with three decimals too;
- fresh correlation and external ids in every repeat.

The repeat period is the source step's period, or longer where the step's
device work outlasts it, so that repeats never overlap on the GPU (for the
default step the GPU tail is 2.1 ms longer than the host step: the steps are
2.1 ms apart). The file is written streaming (memory does not grow with the
size); the size is reached within one step (about 4 MB).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import sys
from typing import Any, Dict, List, Optional, Tuple

REPO = pathlib.Path(__file__).resolve().parents[1]
SOURCE = REPO / "tests" / "data" / "traces" / "resnet50_v100_workers4.pt.trace.json.gz"

CATEGORIES = {"Operator": "cpu_op", "Runtime": "cuda_runtime", "Kernel": "kernel",
              "Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}
DEVICE_CATEGORIES = ("Kernel", "Memcpy", "Memset")
# Args of the older layout that the current one does not write.
DROPPED_ARGS = {"Trace name", "Trace iteration", "Device", "external id", "external ts",
                "correlation", "External id"}
BASE_NS = 1_735_689_600_000_000_000 + 123_456_789  # 2025-01-01 00:00:00.123456789 UTC
PERIOD_FRACTION_NS = 437  # the repeats' timestamps get every sub-microsecond fraction

DEVICE_PROPERTIES = """\
  "deviceProperties": [
    {
      "id": 0, "name": "Tesla V100-DGXS-32GB", "totalGlobalMem": 34089730048,
      "computeMajor": 7, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "regsPerMultiprocessor": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 98304,
      "numSms": 80, "sharedMemPerBlockOptin": 98304
    }
  ],
"""

# Placeholders in an event's text; the text's own braces are doubled first,
# so kernel names such as `{lambda()#1}` survive str.format.
_TS, _C, _X, _N = "\x00ts\x00", "\x00c\x00", "\x00x\x00", "\x00n\x00"


def _template(text: str) -> str:
    text = text.replace("{", "{{").replace("}", "}}")
    return text.replace(_TS, "{ts}").replace(_C, "{c}").replace(_X, "{x}").replace(_N, "{n}")


def _tid(tid: Any) -> int:
    if isinstance(tid, str) and tid.startswith("stream "):
        return int(tid.split()[1])
    return int(tid)


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def _event(e: Dict[str, Any], step_name: Optional[str]) -> str:
    cat = e["cat"]
    name = _N if step_name else json.dumps(e["name"])
    new_cat = "user_annotation" if step_name else CATEGORIES[cat]
    args = e.get("args", {})
    lines = [f'    "ph": "X", "cat": "{new_cat}", "name": {name}, '
             f'"pid": {int(e["pid"])}, "tid": {_tid(e["tid"])},',
             f'    "ts": {_TS}, "dur": {_us(int(e["dur"]) * 1000)},',
             '    "args": {']
    fields: List[str] = []
    ext = args.get("External id", args.get("external id", 0))
    fields.append(f'"External id": {_X if ext else 0}')
    if "correlation" in args:
        fields.append(f'"correlation": {_C}')
    for k, v in args.items():
        if k not in DROPPED_ARGS:
            fields.append(f"{json.dumps(k)}: {json.dumps(v)}")
    lines.append("      " + ",\n      ".join(fields))
    lines.append("    }")
    return "  {\n" + "\n".join(lines) + "\n  }"


def _flow(ph: str, e: Dict[str, Any]) -> str:
    end = ', "bp": "e"' if ph == "f" else ""
    return ("  {\n"
            f'    "ph": "{ph}", "id": {_C}, "pid": {int(e["pid"])}, "tid": {_tid(e["tid"])}, "ts": {_TS},\n'
            f'    "cat": "ac2g", "name": "ac2g"{end}\n'
            "  }")


Template = Tuple[str, int, int, int]  # format string, offset (ns), correlation, external id


def load_step(source: pathlib.Path, step: str) -> Tuple[List[Template], int, int, int, int]:
    """The events of ``step`` in ``source`` as templates, and the period,
    correlation stride, external-id stride (all repeats get fresh ids) and
    the pid of the host process."""
    with gzip.open(source, "rt") if source.suffix == ".gz" else open(source) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    steps = sorted((e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")),
                   key=lambda e: e["ts"])
    chosen = [i for i, e in enumerate(steps) if e["name"] == step]
    if not chosen:
        raise SystemExit(f"{source}: no {step} (it has {', '.join(e['name'] for e in steps)})")
    i = chosen[0]
    s = steps[i]
    begin, end = s["ts"], s["ts"] + s["dur"]
    host = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("Operator", "Runtime")
            and begin <= e["ts"] <= end]
    launches = {e["args"]["correlation"]: e for e in host if e["cat"] == "Runtime"}
    device = [e for e in events if e.get("ph") == "X" and e.get("cat") in DEVICE_CATEGORIES
              and e["args"].get("correlation") in launches]
    host.sort(key=lambda e: (e["ts"], -e["dur"]))
    device.sort(key=lambda e: e["ts"])
    launched = {e["args"]["correlation"] for e in device}

    gpu_begin = min(e["ts"] for e in device)
    gpu_end = max(e["ts"] + e["dur"] for e in device)
    period_us = steps[i + 1]["ts"] - begin if i + 1 < len(steps) else s["dur"]
    period_us = max(period_us, gpu_end - gpu_begin + 5)
    corrs = [e["args"]["correlation"] for e in host if "correlation" in e["args"]]
    exts = [e["args"].get("External id", e["args"].get("external id", 0)) for e in host + device]
    corr0, ext0 = min(corrs), min(x for x in exts if x)
    corr_stride = max(corrs) - corr0 + 1
    ext_stride = max(exts) - ext0 + 1

    out: List[Template] = []
    for e in host:
        is_step = e is s
        a = e["args"]
        corr = a.get("correlation", 0) - corr0 if "correlation" in a else 0
        ext = a.get("External id", a.get("external id", 0))
        rel = (e["ts"] - begin) * 1000
        out.append((_template(_event(e, e["name"] if is_step else None)), rel, corr, ext - ext0 if ext else 0))
        if e["cat"] == "Runtime" and a["correlation"] in launched:
            out.append((_template(_flow("s", e)), rel, corr, 0))
    for e in device:
        a = e["args"]
        corr = a["correlation"] - corr0
        # The device record's external id is its launch's (the older layout
        # often wrote 0 there).
        a = dict(a)
        a["External id"] = a.get("external id") or launches[a["correlation"]]["args"].get("external id", 0)
        e = dict(e, args=a)
        ext = a["External id"]
        rel = (e["ts"] - begin) * 1000
        out.append((_template(_event(e, None)), rel, corr, ext - ext0 if ext else 0))
        out.append((_template(_flow("f", e)), rel, corr, 0))
    pid = int(s["pid"])
    return out, period_us * 1000 + PERIOD_FRACTION_NS, corr_stride, ext_stride, pid


def generate(path: "os.PathLike[str] | str", size_mb: float = 1024, source: pathlib.Path = SOURCE,
             step: str = "ProfilerStep#9") -> Dict[str, int]:
    """Writes the trace to ``path`` (streaming); returns its size in bytes,
    steps and events."""
    templates, period_ns, corr_stride, ext_stride, pid = load_step(source, step)
    target = int(size_mb * (1 << 20))
    header = ("{\n"
              '  "schemaVersion": 1,\n'
              '  "distributedInfo": {"backend": "nccl", "rank": 0, "world_size": 1, "pg_count": 1},\n'
              + DEVICE_PROPERTIES +
              '  "traceEvents": [\n')
    written, n_steps, n_events = 0, 0, 0
    tmp = f"{os.fspath(path)}.part"
    with open(tmp, "w", encoding="ascii", newline="\n", buffering=1 << 22) as f:
        f.write(header)
        written += len(header)
        first = True
        while written < target - 4096 or n_steps == 0:
            base = BASE_NS + n_steps * period_ns
            corr_base = 1000 + n_steps * corr_stride
            ext_base = 1000 + n_steps * ext_stride
            name = f"ProfilerStep#{n_steps + 1}"
            parts = []
            for fmt, rel, corr, ext in templates:
                parts.append(fmt.format(ts=_us(base + rel), c=corr_base + corr, x=ext_base + ext, n=json.dumps(name)))
            chunk = ",\n".join(parts)
            if not first:
                chunk = ",\n" + chunk
            first = False
            f.write(chunk)
            written += len(chunk)
            n_steps += 1
            n_events += len(templates)
        end_ns = BASE_NS + n_steps * period_ns
        trailer = (",\n"
                   "  {\n"
                   f'    "name": "process_name", "ph": "M", "ts": {_us(BASE_NS)}, "pid": {pid}, "tid": 0,\n'
                   '    "args": {\n      "name": "python"\n    }\n  },\n'
                   "  {\n"
                   f'    "name": "process_name", "ph": "M", "ts": {_us(BASE_NS)}, "pid": 0, "tid": 0,\n'
                   '    "args": {\n      "name": "python"\n    }\n  },\n'
                   "  {\n"
                   f'    "name": "process_labels", "ph": "M", "ts": {_us(BASE_NS)}, "pid": 0, "tid": 0,\n'
                   '    "args": {\n      "labels": "GPU 0"\n    }\n  },\n'
                   "  {\n"
                   f'    "ph": "X", "cat": "Trace", "ts": {_us(BASE_NS)}, "dur": {_us(end_ns - BASE_NS)},\n'
                   '    "pid": "Spans", "tid": "PyTorch Profiler",\n'
                   '    "name": "PyTorch Profiler (0)",\n'
                   '    "args": {\n      "Op count": 0\n    }\n  },\n'
                   "  {\n"
                   '    "name": "Iteration Start: PyTorch Profiler", "ph": "i", "s": "g",\n'
                   f'    "pid": "Traces", "tid": "Trace PyTorch Profiler", "ts": {_us(BASE_NS)}\n'
                   "  },\n"
                   "  {\n"
                   '    "name": "Record Window End", "ph": "i", "s": "g",\n'
                   f'    "pid": "", "tid": "", "ts": {_us(end_ns)}\n'
                   "  }\n"
                   "  ],\n"
                   '  "traceName": "gpuscope_generated_trace.json"\n'
                   "}\n")
        f.write(trailer)
        written += len(trailer)
    os.replace(tmp, path)
    return {"bytes": written, "steps": n_steps, "events": n_events + 6}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the trace to write (.json); not in the repository")
    ap.add_argument("--size-mb", type=float, default=1024, help="size of the file in MiB (default 1024)")
    ap.add_argument("--source", type=pathlib.Path, default=SOURCE, help="the trace to take the step from")
    ap.add_argument("--step", default="ProfilerStep#9", help="the step to repeat")
    args = ap.parse_args(argv)
    info = generate(args.out, args.size_mb, args.source, args.step)
    print(f"{args.out}: {info['bytes'] / (1 << 20):.1f} MiB, {info['steps']} steps, {info['events']} events")
    return 0


if __name__ == "__main__":
    sys.exit(main())

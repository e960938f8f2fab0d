"""Checks gpuscope's GPU memory numbers (issue 29) against PyTorch on a real GPU.

Each check runs in a fresh Python process (the caching allocator's peaks and
counters are per process, and its configuration is read once, at start):

* ``peak``: an MLP training loop (data, forward, backward, optimizer; each
  phase ends with a synchronize, so that host time follows the GPU) under
  ``Session(telemetry_interval_ms=5)``. gpuscope's window peak against
  ``torch.cuda.max_memory_allocated()`` read after the loop (never reset:
  gpuscope must not need that), the phase gpuscope names for the peak,
  NVML's entry for this process (``process_used_bytes``) against
  ``nvidia-smi --query-compute-apps`` and ``torch.cuda.memory_reserved()``.
  The peak's phase ("see note" in the table): backward is expected, early in
  it, when the loss's and the last layer's input gradients are allocated
  while every saved activation is still held; forward ends just below it.
  The allocator's high-water mark rises in step 1 (Adam's state exists from
  step 0's optimizer on), and gpuscope places a mark that rose between two
  samples midway between them, so a peak reached right at the boundary may
  be named forward. Then the sampler's cost: ``_memory.read_allocator(0)``
  and ``_memory._sampler.sample_once()``, median of 1000 calls each.
* ``oom``: a tensor of 1.5 times the GPU's memory asked for inside
  ``with s.phase("forward")`` of step 3, with the allocator's history on
  and ``GPUSCOPE_OOM_SNAPSHOT_DIR`` set: the error caught outside the step
  is the one raised (identity), a ``torch.OutOfMemoryError``, and
  ``summary.memory.oom`` has the step, the phase, the size asked for, the
  GPU's memory and the snapshot file; ``diagnose()[0].id == "oom"``.
* ``thrash``: ``PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:20``, most of the
  GPU taken by one tensor, then each step allocates a different size (a
  sawtooth) that the cached block cannot serve, so the allocator empties its
  cache and retries cudaMalloc. gpuscope's ``alloc_retries`` against the
  rise of ``torch.cuda.memory_stats()["num_alloc_retries"]`` over the loop;
  ``memory-thrash`` must fire.
* ``headroom``: a loop that uses a few % of the GPU: ``batch-headroom``
  must fire; then the same loop with the batch scaled by
  floor(batch_growth / 1.5) in a fresh process, and its
  ``max_memory_allocated()`` / total memory reported (an estimate: reported,
  not checked, beyond "it did not run out of memory").

Prints a Markdown report (GPU, driver, CUDA, torch, date, command, a table)
for docs/measurements.md. Exit status: 0 when every check passes, 1 when one
fails, 2 without a CUDA GPU.

    python benchmarks/gpu_memory_validate.py [--out FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

GIB = float(1 << 30)
MIB = float(1 << 20)

# ---- Formatting and parsing, plain Python (dry-run without a GPU).


def fmt_bytes(b: Optional[float]) -> str:
    if b is None or (isinstance(b, float) and math.isnan(b)):
        return "None"
    return f"{b / GIB:.3f} GiB ({int(b)} B)"


_UNIT = {"bytes": 1.0, "B": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40}


def torch_amount(pattern: str, text: str) -> Optional[float]:
    """An amount torch's OOM message states, e.g. pattern 'Tried to allocate {}'."""
    m = re.search(pattern.format(r"([0-9]+(?:\.[0-9]+)?) (bytes|B|KiB|MiB|GiB|TiB)"), text)
    return float(m.group(1)) * _UNIT[m.group(2)] if m else None


def float32_ulp(x: float) -> float:
    """The spacing of float32 numbers at x (gpuscope keeps per-step peaks as float)."""
    if not x > 0:
        return 0.0
    return 2.0 ** (math.floor(math.log2(x)) - 23)


def sawtooth_sizes(steps: int, base: float, step_bytes: float, period: int) -> List[int]:
    """Per-step allocation sizes for the thrash loop, multiples of 2 MiB."""
    two_mib = 2 * 1024 * 1024
    return [int((base + (i % period) * step_bytes) // two_mib * two_mib) for i in range(steps)]


def nvidia_smi_process_mib(pid: int) -> Optional[float]:
    """This process's used GPU memory as nvidia-smi lists it (MiB), or None."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=30).stdout
    except Exception:  # noqa: BLE001
        return None
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0] == str(pid):
            try:
                return float(parts[1])
            except ValueError:
                return None
    return None


def row(check: str, what: str, gpuscope: Any, reference: Any, ok: Optional[bool],
        note: str = "") -> Dict[str, Any]:
    return {"check": check, "what": what, "gpuscope": str(gpuscope), "reference": str(reference),
            "ok": ok, "note": note}


def markdown(header: List[str], rows: List[Dict[str, Any]], notes: List[str]) -> str:
    lines = list(header) + ["", "| check | what | gpuscope | reference | result |",
                            "| --- | --- | --- | --- | --- |"]
    for r in rows:
        res = {True: "pass", False: "FAIL", None: "info"}[r["ok"]]
        if r["note"]:
            res += f" ({r['note']})"
        cells = [r["check"], r["what"], r["gpuscope"], r["reference"], res]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    if notes:
        lines.append("")
        lines.extend(notes)
    return "\n".join(lines)


# ---- The children: each runs in its own process and prints one JSON line.


def _mlp(torch: Any, width: int, layers: int) -> Any:
    mods: List[Any] = []
    for _ in range(layers):
        mods += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*mods[:-1]).cuda()


def _train(s: Any, torch: Any, model: Any, opt: Any, batch: int, width: int, steps: int) -> None:
    """The loop of checks peak and headroom: four phases, each ending with a
    synchronize (host time then follows the GPU's, and so do the phases)."""
    F = torch.nn.functional
    for _ in s.steps(range(steps)):
        with s.phase("data"):
            x = torch.randn(batch, width, device="cuda")
            y = torch.randn(batch, width, device="cuda")
            torch.cuda.synchronize()
        with s.phase("forward"):
            out = model(x)
            loss = F.mse_loss(out, y)
            torch.cuda.synchronize()
        with s.phase("backward"):
            loss.backward()
            torch.cuda.synchronize()
        with s.phase("optimizer"):
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
        del x, y, out, loss


def _median_us(fn: Any, n: int = 1000) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        fn()
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1000.0


def child_peak(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    import gpuscope as gs
    from gpuscope import _memory

    torch.manual_seed(0)
    width, layers, batch, steps = a.width, a.layers, a.batch, a.steps
    model = _mlp(torch, width, layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    s = gs.Session(telemetry_interval_ms=5)
    time.sleep(0.05)  # the sampler's first sample: its baseline
    t0 = time.perf_counter()
    _train(s, torch, model, opt, batch, width, steps)
    loop_s = time.perf_counter() - t0
    torch.cuda.synchronize()
    time.sleep(0.05)
    s.flush()
    summ = s.summary()
    out: Dict[str, Any] = {
        "loop_s": loop_s, "steps": summ.steps, "weights_bytes": weights,
        "activation_bytes_per_layer": batch * width * 4,
        "torch_max_allocated": torch.cuda.max_memory_allocated(),
        "torch_max_reserved": torch.cuda.max_memory_reserved(),
        "torch_reserved": torch.cuda.memory_reserved(),
        "torch_allocated": torch.cuda.memory_allocated(),
        "total": torch.cuda.get_device_properties(0).total_memory,
        "smi_mib": nvidia_smi_process_mib(os.getpid()),
        "source": s.source,
    }
    m = summ.memory
    out["memory"] = None if m is None else {
        "source": m.source, "samples": m.samples, "steps": m.steps,
        "peak_by_phase": dict(m.peak_by_phase),
        "gpus": [{k: getattr(g, k) for k in (
            "device", "allocated_bytes", "reserved_bytes", "peak_allocated_bytes",
            "peak_reserved_bytes", "peak_exact", "peak_step", "peak_phase",
            "min_allocated_bytes", "fragmentation", "alloc_retries", "retry_steps", "retry_time",
            "ooms", "total_bytes", "process_used_bytes")} for g in m.gpus]}
    out["findings"] = [[f.id, f.severity, f.title] for f in s.diagnose()]
    tel = summ.telemetry
    out["telemetry_gpus"] = None if tel is None else [
        {"memory_used_bytes": g.memory_used_bytes, "process_memory_bytes": g.process_memory_bytes}
        for g in tel.gpus]
    # The sampler's cost, on this GPU, with this session live.
    out["read_allocator_us"] = _median_us(lambda: _memory.read_allocator(0))
    out["sample_once_us"] = _median_us(_memory._sampler.sample_once)
    out["sample_once_gpus"] = _memory._sampler.sample_once()
    s.close()
    return out


def child_oom(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    import gpuscope as gs

    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=10000)
    model = _mlp(torch, 1024, 2)
    total = torch.cuda.get_device_properties(0).total_memory
    asked = int(total * 1.5)
    s = gs.Session(telemetry_interval_ms=5)
    time.sleep(0.05)
    raised: List[BaseException] = []
    caught: Optional[BaseException] = None
    try:
        for i in range(5):
            with s.step():
                with s.phase("data"):
                    x = torch.randn(4096, 1024, device="cuda")
                with s.phase("forward"):
                    if i == 3:
                        try:
                            torch.empty(asked, dtype=torch.uint8, device="cuda")
                        except BaseException as e:  # noqa: BLE001 - kept to compare identity
                            raised.append(e)
                            raise
                    y = model(x)
                with s.phase("backward"):
                    y.sum().backward()
                torch.cuda.synchronize()
    except BaseException as e:  # noqa: BLE001
        caught = e
    s.flush()
    summ = s.summary()
    oom = summ.memory.oom if summ.memory is not None else None
    findings = s.diagnose()
    stats = torch.cuda.memory_stats()
    text = str(caught) if caught is not None else ""
    res: Dict[str, Any] = {
        "caught_type": f"{type(caught).__module__}.{type(caught).__qualname__}" if caught else None,
        "is_oom_type": isinstance(caught, torch.OutOfMemoryError),
        "same_object": bool(raised) and caught is raised[0],
        "message_first_line": text.split("\n", 1)[0][:400],
        "asked": asked, "total": total,
        "msg_requested": torch_amount(r"Tried to allocate {}", text),
        "msg_total": torch_amount(r"total capacity of {}", text),
        "torch_num_ooms": stats.get("num_ooms"),
        "torch_num_alloc_retries": stats.get("num_alloc_retries"),
        "snapshot_dir": os.environ.get("GPUSCOPE_OOM_SNAPSHOT_DIR"),
        "findings": [[f.id, f.severity, f.title] for f in findings],
        "steps": summ.steps,
    }
    res["oom"] = None if oom is None else {k: getattr(oom, k) for k in (
        "step", "phase", "phase_path", "device", "requested_bytes", "allocated_bytes",
        "reserved_bytes", "total_bytes", "message", "snapshot")}
    if oom is not None and oom.snapshot:
        res["snapshot_exists"] = os.path.exists(oom.snapshot)
        res["snapshot_size"] = os.path.getsize(oom.snapshot) if res["snapshot_exists"] else None
    if summ.memory is not None and summ.memory.gpus:
        g = summ.memory.gpus[0]
        res["gpu_ooms"] = g.ooms
        res["gpu_alloc_retries"] = g.alloc_retries
    torch.cuda.memory._record_memory_history(enabled=None)
    s.close()
    return res


def child_thrash(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    import gpuscope as gs

    torch.cuda.init()
    free, total = torch.cuda.mem_get_info()
    keep = int(3 * GIB)
    filler = torch.empty(int(free - keep) // (2 << 20) * (2 << 20), dtype=torch.uint8,
                         device="cuda")
    free_after, _ = torch.cuda.mem_get_info()
    sizes = sawtooth_sizes(a.steps, 1.5 * GIB, 160 * MIB, 8)
    s = gs.Session(telemetry_interval_ms=5)
    time.sleep(0.05)  # the baseline sample
    before = torch.cuda.memory_stats()
    per_step = []
    for i in s.steps(range(a.steps)):
        r0 = torch.cuda.memory_stats()["num_alloc_retries"]
        with s.phase("forward"):
            t = torch.empty(sizes[i], dtype=torch.uint8, device="cuda")
            t.fill_(1)
            torch.cuda.synchronize()
        with s.phase("optimizer"):
            del t
            time.sleep(0.02)  # a sample after the retry, inside the step
        per_step.append(torch.cuda.memory_stats()["num_alloc_retries"] - r0)
    after = torch.cuda.memory_stats()
    time.sleep(0.02)
    s.flush()
    summ = s.summary()
    g = summ.memory.gpus[0] if summ.memory is not None and summ.memory.gpus else None
    findings = s.diagnose()
    thrash = [f for f in findings if f.id == "memory-thrash"]
    res = {
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "free_before_fill": free, "free_after_fill": free_after, "total": total,
        "filler": filler.numel(), "sizes_gib": [round(x / GIB, 3) for x in sizes],
        "torch_retries_rise": after["num_alloc_retries"] - before["num_alloc_retries"],
        "torch_retries_before": before["num_alloc_retries"],
        "torch_retries_after": after["num_alloc_retries"],
        "torch_retries_per_step": per_step,
        "torch_ooms_rise": after["num_ooms"] - before["num_ooms"],
        "gpuscope_alloc_retries": None if g is None else g.alloc_retries,
        "gpuscope_retry_steps": None if g is None else g.retry_steps,
        "gpuscope_retry_time": None if g is None else g.retry_time,
        "gpuscope_fragmentation": None if g is None else g.fragmentation,
        "steps": summ.steps,
        "findings": [[f.id, f.severity, f.title] for f in findings],
        "thrash_evidence": dict(thrash[0].evidence) if thrash else None,
    }
    del filler
    s.close()
    return res


def child_headroom(a: argparse.Namespace) -> Dict[str, Any]:
    import torch
    import gpuscope as gs

    torch.manual_seed(0)
    model = _mlp(torch, a.width, a.layers)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    batch = a.batch * a.scale
    s = gs.Session(telemetry_interval_ms=5)
    time.sleep(0.05)
    res: Dict[str, Any] = {"batch": batch, "scale": a.scale}
    t0 = time.perf_counter()
    try:
        _train(s, torch, model, opt, batch, a.width, a.steps)
        res["oom"] = None
    except torch.OutOfMemoryError as e:
        res["oom"] = str(e).split("\n", 1)[0][:300]
    res["loop_s"] = time.perf_counter() - t0
    torch.cuda.synchronize()
    time.sleep(0.02)
    s.flush()
    summ = s.summary()
    total = torch.cuda.get_device_properties(0).total_memory
    res.update({
        "total": total,
        "torch_max_allocated": torch.cuda.max_memory_allocated(),
        "torch_max_reserved": torch.cuda.max_memory_reserved(),
        "smi_mib": nvidia_smi_process_mib(os.getpid()),
        "findings": [[f.id, f.severity, f.title] for f in s.diagnose()],
    })
    hr = [f for f in s.diagnose() if f.id == "batch-headroom"]
    res["headroom"] = None if not hr else {"title": hr[0].title, "evidence": dict(hr[0].evidence)}
    if summ.memory is not None and summ.memory.gpus:
        g = summ.memory.gpus[0]
        res["gpu"] = {k: getattr(g, k) for k in (
            "peak_allocated_bytes", "peak_reserved_bytes", "peak_exact", "min_allocated_bytes",
            "process_used_bytes", "total_bytes", "peak_phase")}
    s.close()
    return res


CHILDREN = {"peak": child_peak, "oom": child_oom, "thrash": child_thrash,
            "headroom": child_headroom}


def _run_child(name: str, extra: List[str], env: Optional[Dict[str, str]] = None,
               timeout: float = 100) -> Dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name] + extra
    e = dict(os.environ)
    e.update(env or {})
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e)
    except subprocess.TimeoutExpired as ex:
        return {"error": f"timed out after {timeout} s", "stderr": str(ex.stderr)[-2000:]}
    wall = time.perf_counter() - t0
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            try:
                res = json.loads(line)
                res["wall_s"] = wall
                if p.stderr.strip():
                    res["stderr_tail"] = p.stderr[-1500:]
                return res
            except json.JSONDecodeError:
                break
    return {"error": f"exit {p.returncode}, no result", "stderr": p.stderr[-3000:],
            "stdout": p.stdout[-1000:], "wall_s": wall}


# ---- Judging the children's results (plain Python: dry-run on fake results).


def judge_peak(r: Dict[str, Any]) -> List[Dict[str, Any]]:
    C = "a. peak"
    if "error" in r:
        return [row(C, "child", r["error"], "", False, r.get("stderr", "")[-300:])]
    m = r.get("memory")
    if not m or not m["gpus"]:
        return [row(C, "summary.memory", None, "a GPU", False)]
    g = m["gpus"][0]
    rows = []
    ref = float(r["torch_max_allocated"])
    gp = g["peak_allocated_bytes"]
    if gp is None:
        rows.append(row(C, "peak_allocated_bytes", None, fmt_bytes(ref), False))
    else:
        diff = ref - gp
        if g["peak_exact"]:
            ok = abs(diff) <= float32_ulp(ref)
            note = f"peak_exact; torch - gpuscope = {diff:.0f} B"
        else:
            ok = 0 <= diff <= 0.05 * ref
            note = f"sampled; torch - gpuscope = {diff:.0f} B ({100 * diff / ref:.2f} %)"
        rows.append(row(C, "peak_allocated_bytes vs max_memory_allocated()", fmt_bytes(gp),
                        fmt_bytes(ref), ok, note))
    rows.append(row(C, "peak_reserved_bytes vs max_memory_reserved()",
                    fmt_bytes(g["peak_reserved_bytes"]), fmt_bytes(r["torch_max_reserved"]),
                    None))
    rows.append(row(C, "peak_step / peak_phase", f"{g['peak_step']} / {g['peak_phase']}",
                    "backward (or forward: see note)",
                    g["peak_phase"] in ("backward", "forward")))
    rows.append(row(C, "peak_by_phase (GiB)",
                    ", ".join(f"{k} {v / GIB:.3f}" for k, v in m["peak_by_phase"].items()), "",
                    None))
    rows.append(row(C, "min_allocated_bytes / fragmentation",
                    f"{fmt_bytes(g['min_allocated_bytes'])} / {g['fragmentation']}",
                    f"weights {fmt_bytes(r['weights_bytes'])}", None))
    smi = r.get("smi_mib")
    pu = g["process_used_bytes"]
    rows.append(row(C, "process_used_bytes vs nvidia-smi (this pid) / memory_reserved()",
                    fmt_bytes(pu), f"{smi} MiB / {fmt_bytes(r['torch_reserved'])}",
                    None if smi is None or pu is None else abs(pu / MIB - smi) <= 2,
                    "nvidia-smi lists no entry for this pid" if smi is None else ""))
    rows.append(row(C, "total_bytes vs total_memory", fmt_bytes(g["total_bytes"]),
                    fmt_bytes(r["total"]), g["total_bytes"] == r["total"]))
    rows.append(row(C, "samples / steps sampled / steps", f"{m['samples']} / {m['steps']}",
                    f"{r['steps']} steps in {r['loop_s']:.2f} s", m["steps"] == r["steps"]))
    rows.append(row(C, "alloc_retries / ooms", f"{g['alloc_retries']} / {g['ooms']}", "0 / 0",
                    g["alloc_retries"] == 0 and g["ooms"] == 0))
    rows.append(row("e. cost", "read_allocator(0), median of 1000",
                    f"{r['read_allocator_us']:.1f} us", "", None))
    rows.append(row("e. cost", "_sampler.sample_once(), median of 1000",
                    f"{r['sample_once_us']:.1f} us", f"{r['sample_once_gpus']} GPU(s) sampled",
                    None))
    return rows


def judge_oom(r: Dict[str, Any]) -> List[Dict[str, Any]]:
    C = "b. oom"
    if "error" in r:
        return [row(C, "child", r["error"], "", False, r.get("stderr", "")[-300:])]
    rows = [row(C, "exception caught outside the step", r["caught_type"],
                "torch.OutOfMemoryError, the same object", r["is_oom_type"] and r["same_object"],
                f"same object: {r['same_object']}")]
    o = r.get("oom")
    if o is None:
        return rows + [row(C, "summary.memory.oom", None, "an OomEvent", False)]
    rows.append(row(C, "oom.step / phase / phase_path",
                    f"{o['step']} / {o['phase']} / {o['phase_path']}", "3 / forward / forward",
                    o["step"] == 3 and o["phase"] == "forward" and o["phase_path"] == "forward"))
    req, asked = o["requested_bytes"], float(r["asked"])
    msg_req = r.get("msg_requested")
    rows.append(row(C, "requested_bytes vs asked (message's 'Tried to allocate')", fmt_bytes(req),
                    f"{fmt_bytes(asked)} ('{fmt_bytes(msg_req)}')",
                    req is not None and abs(req - asked) <= 0.01 * asked))
    tot = o["total_bytes"]
    rows.append(row(C, "total_bytes vs total_memory", fmt_bytes(tot), fmt_bytes(r["total"]),
                    tot is not None and abs(tot - r["total"]) <= 0.005 * r["total"]))
    rows.append(row(C, "allocated / reserved at the OOM",
                    f"{fmt_bytes(o['allocated_bytes'])} / {fmt_bytes(o['reserved_bytes'])}", "",
                    None))
    rows.append(row(C, "diagnose()[0]", r["findings"][0][0] + ": " + r["findings"][0][2]
                    if r["findings"] else None, "oom",
                    bool(r["findings"]) and r["findings"][0][0] == "oom"))
    rows.append(row(C, "oom.snapshot (history on, GPUSCOPE_OOM_SNAPSHOT_DIR set)",
                    o["snapshot"] or '""', f"a file in {r['snapshot_dir']}",
                    bool(o["snapshot"]) and bool(r.get("snapshot_exists"))
                    and os.path.dirname(o["snapshot"]) == r["snapshot_dir"],
                    f"{r.get('snapshot_size')} bytes" if r.get("snapshot_exists") else ""))
    rows.append(row(C, "GpuMemory.ooms / alloc_retries", f"{r.get('gpu_ooms')} / "
                    f"{r.get('gpu_alloc_retries')}",
                    f"torch num_ooms {r['torch_num_ooms']}, num_alloc_retries "
                    f"{r['torch_num_alloc_retries']}", None))
    rows.append(row(C, "message", o["message"][:160], r["message_first_line"][:160],
                    o["message"] == r["message_first_line"][:400]))
    return rows


def judge_thrash(r: Dict[str, Any]) -> List[Dict[str, Any]]:
    C = "c. thrash"
    if "error" in r:
        return [row(C, "child", r["error"], "", False, r.get("stderr", "")[-300:])]
    rise = r["torch_retries_rise"]
    rows = []
    if rise == 0:
        rows.append(row(C, "num_alloc_retries rose", 0, "> 0", None,
                        f"no retries with {r['alloc_conf']}: the check could not run"))
        return rows
    rows.append(row(C, "alloc_retries vs rise of num_alloc_retries",
                    r["gpuscope_alloc_retries"], rise, r["gpuscope_alloc_retries"] == rise,
                    f"per step {r['torch_retries_per_step']}"))
    steps_with = sum(1 for x in r["torch_retries_per_step"] if x > 0)
    rows.append(row(C, "retry_steps vs steps with a retry", r["gpuscope_retry_steps"], steps_with,
                    None, "a retry is counted in the step of the sample that first sees it"))
    th = [f for f in r["findings"] if f[0] == "memory-thrash"]
    rows.append(row(C, "memory-thrash fires", th[0][1] + ": " + th[0][2] if th else None,
                    "fires", bool(th)))
    rows.append(row(C, "other findings", ", ".join(f[0] for f in r["findings"]
                                                  if f[0] != "memory-thrash"), "", None))
    return rows


def judge_headroom(base: Dict[str, Any], big: Optional[Dict[str, Any]],
                   factor: Optional[int]) -> List[Dict[str, Any]]:
    C = "d. headroom"
    if "error" in base:
        return [row(C, "child", base["error"], "", False, base.get("stderr", "")[-300:])]
    rows = []
    hr = base.get("headroom")
    share = base["torch_max_reserved"] / base["total"]
    rows.append(row(C, "batch-headroom fires", hr["title"] if hr else None,
                    f"base batch {base['batch']}: max_memory_reserved {100 * share:.2f} % of "
                    f"total", bool(hr)))
    if not hr:
        return rows
    ev = hr["evidence"]
    rows.append(row(C, "batch_growth", f"{ev['batch_growth']:.2f}", "", None))
    if big is None:
        return rows
    if "error" in big:
        return rows + [row(C, "rerun child", big["error"], "", False,
                           big.get("stderr", "")[-300:])]
    g = base.get("gpu", {})
    pred = (g.get("min_allocated_bytes") or 0) + factor * (
        (g.get("peak_allocated_bytes") or 0) - (g.get("min_allocated_bytes") or 0))
    rows.append(row(C, f"rerun, batch x{factor} (floor(growth/1.5)): max_memory_allocated / total",
                    f"predicted {fmt_bytes(pred)} ({100 * pred / big['total']:.1f} %)",
                    f"{fmt_bytes(big['torch_max_allocated'])} "
                    f"({100 * big['torch_max_allocated'] / big['total']:.1f} %), reserved "
                    f"{100 * big['torch_max_reserved'] / big['total']:.1f} %",
                    big["oom"] is None, "OOM: " + big["oom"] if big["oom"] else "no OOM"))
    fired = [f[0] for f in big["findings"] if f[0] in ("memory-pressure", "batch-headroom")]
    rows.append(row(C, "rerun's memory findings", ", ".join(fired) or "none", "", None))
    return rows


def header() -> List[str]:
    import torch
    try:
        import gpuscope
        version = getattr(gpuscope, "__version__", "?")
    except Exception:  # noqa: BLE001
        version = "?"
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001
        smi = "nvidia-smi failed"
    return [f"GPU memory validation (issue 29), {datetime.date.today().isoformat()}",
            "",
            f"- GPU: {smi}",
            f"- torch {torch.__version__}, CUDA {torch.version.cuda}, gpuscope {version}, "
            f"Python {sys.version.split()[0]}",
            f"- command: `python {' '.join(shlex.quote(x) for x in sys.argv)}`"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", choices=sorted(CHILDREN))
    ap.add_argument("--width", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32768)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--scale", type=int, default=1)
    ap.add_argument("--out", help="also write the Markdown report here")
    ap.add_argument("--json", help="write every child's raw result here")
    a = ap.parse_args()
    if a.child:
        res = CHILDREN[a.child](a)
        print(json.dumps(res, default=str), flush=True)
        return 0

    try:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA GPU")
    except Exception as e:  # noqa: BLE001
        print(f"gpu_memory_validate: {e}", file=sys.stderr)
        return 2
    raw: Dict[str, Any] = {}
    rows: List[Dict[str, Any]] = []

    def run_child(name: str, extra: List[str], env: Optional[Dict[str, str]] = None,
                  key: Optional[str] = None) -> Dict[str, Any]:
        """One child; its result is printed and saved as it comes (a run cut short keeps it)."""
        res = _run_child(name, extra, env)
        raw[key or name] = res
        print(f"[{key or name}] {json.dumps(res, default=str)[:3000]}", file=sys.stderr, flush=True)
        if a.json:
            with open(a.json, "w") as f:
                json.dump(raw, f, indent=1, default=str)
        return res

    t0 = time.perf_counter()
    run_child("peak", [])
    rows += judge_peak(raw["peak"])
    with tempfile.TemporaryDirectory(prefix="gpuscope-oom-") as d:
        run_child("oom", [], env={"GPUSCOPE_OOM_SNAPSHOT_DIR": d})
    rows += judge_oom(raw["oom"])
    run_child("thrash", ["--steps", "16"],
              env={"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:20"})
    rows += judge_thrash(raw["thrash"])
    hargs = ["--width", "512", "--layers", "8", "--batch", "65536", "--steps", "8"]
    run_child("headroom", hargs)
    factor = None
    hr = raw["headroom"].get("headroom")
    if hr:
        # At most 200x: a wild estimate must not make a run of minutes.
        factor = max(1, min(200, int(math.floor(hr["evidence"]["batch_growth"] / 1.5))))
        run_child("headroom", hargs[:-2] + ["--steps", "3", "--scale", str(factor)],
                  key="headroom_rerun")
    rows += judge_headroom(raw["headroom"], raw.get("headroom_rerun"), factor)
    notes = [f"Wall time {time.perf_counter() - t0:.1f} s; child processes: " + ", ".join(
        f"{k} {v.get('wall_s', float('nan')):.1f} s" for k, v in raw.items())]
    text = markdown(header(), rows, notes)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    return 1 if any(r["ok"] is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

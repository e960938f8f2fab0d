"""`gpuscope analyze` against Holistic Trace Analysis (HTA) on the same
torch.profiler traces: wall time and peak memory, side by side.

    python benchmarks/analyze_trace.py [--size-mb 1024] [--repeats 5] [--repeats-large 3]
                                       [--hta-python /tmp/hta-venv/bin/python | --no-hta]
                                       [--trace-dir /tmp/gpuscope-bench] [--regenerate]

The traces: the four in tests/data/traces (alexnet has no ProfilerStep
ranges: gpuscope is given its one model range as the step), the older
list-format ResNet-50 trace again wrapped in an object (HTA reads only the
object layout), and a generated trace of ``--size-mb`` MiB in the current
Kineto format (benchmarks/gen_kineto_trace.py: one real ResNet-50 step
repeated), written under ``--trace-dir`` (never in the repository) and kept
there for the next run.

Each measurement is a fresh subprocess, one at a time, the two tools
alternating (which goes first swaps every repeat): wall time from start to
exit (interpreter start and imports included) and the child's own peak RSS
(``ru_maxrss`` from ``os.wait4`` on that child). The child also reports its
import time and analysis time, and the GPU idle % it found:

- gpuscope: ``gs.analyze_trace(path).summary.gpu_idle_pct``: GPU idle inside
  the steps (``ProfilerStep#N`` host ranges), all steps;
- HTA: ``TraceAnalysis(trace_dir=D).get_temporal_breakdown(visualize=False)``,
  ``idle_time_pctg``: idle over the span from the first to the last GPU
  record of the traced steps (HTA leaves the last ``ProfilerStep`` out by
  default). The two are not the same window, so they differ.

HTA is not a gpuscope dependency. Make a throwaway venv for it:

    python3 -m venv /tmp/hta-venv && /tmp/hta-venv/bin/pip install HolisticTraceAnalysis

(HolisticTraceAnalysis 0.5.0 pulls pandas, numpy, plotly, jupyterlab, not
torch; if a version does pull torch, pin a CPU build in the same command,
e.g. ``torch==2.13.0``.) Without that python (``--hta-python``, default
/tmp/hta-venv/bin/python) HTA is skipped with a line that says so.

Goals (the issue): gpuscope at least 10x HTA's speed; gpuscope's peak memory
at most 0.25 x the uncompressed trace + 200 MiB.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)
import gen_kineto_trace  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[1]
TRACES = REPO / "tests" / "data" / "traces"
MiB = 1 << 20
SPEED_GOAL = 10.0

GPUSCOPE_CHILD = """\
import json, sys, time
t0 = time.perf_counter()
import gpuscope as gs
t1 = time.perf_counter()
r = gs.analyze_trace(sys.argv[1], step=sys.argv[2] or None)
s = r.summary
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "analyze_s": t2 - t1, "idle_pct": s.gpu_idle_pct,
                  "steps": s.steps, "events": r.events, "device_records": r.device_records}))
"""

HTA_CHILD = """\
import json, sys, time
t0 = time.perf_counter()
from hta.trace_analysis import TraceAnalysis
t1 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1])
df = a.get_temporal_breakdown(visualize=False)
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "analyze_s": t2 - t1,
                  "idle_pct": float(df["idle_time_pctg"].iloc[0]), "steps": len(a.t.get_iterations(0))}))
"""

HTA_VERSION = "import hta.version as v; print('.'.join(map(str, v.__version_tuple__)))"


class Trace:
    def __init__(self, label: str, path: pathlib.Path, step: str = "", large: bool = False):
        self.label, self.path, self.step, self.large = label, path, step, large
        self.size = uncompressed_size(path)
        self.hta_dir: Optional[str] = None


def uncompressed_size(path: pathlib.Path) -> int:
    if path.suffix != ".gz":
        return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as f:
        while True:
            b = f.read(1 << 22)
            if not b:
                return n
            n += len(b)


# Runs one command and reports its wall time and its own peak RSS. A child's
# ru_maxrss starts at its parent's RSS at fork (Linux keeps the high-water
# mark across fork and exec), so the command is forked from this small
# process, not from the benchmark (which holds a parsed trace in memory).
LAUNCHER = """\
import json, os, signal, sys, time
out, timeout, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
t0 = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
signal.signal(signal.SIGALRM, lambda *_: os.kill(pid, signal.SIGKILL))
signal.setitimer(signal.ITIMER_REAL, timeout)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - t0
signal.setitimer(signal.ITIMER_REAL, 0)
with open(out, "w") as f:
    json.dump({"wall_s": wall, "rss_kib": usage.ru_maxrss, "rc": os.waitstatus_to_exitcode(status),
               "timed_out": wall >= timeout}, f)
"""


def measure(argv: List[str], timeout: float) -> Dict[str, Any]:
    """Runs ``argv`` alone; its wall time (fork to exit), its own peak RSS
    (MiB, ru_maxrss from wait4 on that one child) and the JSON its last
    stdout line holds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, \
            tempfile.NamedTemporaryFile(suffix=".json") as report:
        subprocess.run([sys.executable, "-c", LAUNCHER, report.name, str(timeout)] + argv,
                       stdout=out, stderr=err, stdin=subprocess.DEVNULL, check=False)
        out.seek(0)
        err.seek(0)
        stdout = out.read().decode(errors="replace")
        stderr = err.read().decode(errors="replace")
        try:
            with open(report.name) as f:
                m = json.load(f)
        except ValueError:
            m = {"wall_s": float("nan"), "rss_kib": 0, "rc": -1, "timed_out": False}
    res: Dict[str, Any] = {"wall_s": m["wall_s"], "rss_mib": m["rss_kib"] / 1024, "rc": m["rc"]}
    lines = stdout.strip().splitlines()
    try:
        res.update(json.loads(lines[-1]))
        res["ok"] = m["rc"] == 0
    except (IndexError, ValueError):
        res["ok"] = False
        why = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        if m["rc"] < 0:
            res["error"] = f"killed by signal {-m['rc']}" + (" (timeout)" if m["timed_out"] else "")
        else:
            res["error"] = why[-1][:160] if why else f"exit {m['rc']}"
    return res


def prepare(args: argparse.Namespace) -> List[Trace]:
    work = pathlib.Path(args.trace_dir)
    work.mkdir(parents=True, exist_ok=True)
    traces = [
        Trace("event_sync_a100", TRACES / "event_sync_a100.pt.trace.json.gz"),
        Trace("alexnet", TRACES / "alexnet.pt.trace.json.gz", step="[param|pytorch.model.alex_net|0|0|0]"),
        Trace("resnet50_v100_workers4", TRACES / "resnet50_v100_workers4.pt.trace.json.gz"),
        Trace("resnet50_v100_workers0", TRACES / "resnet50_v100_workers0.pt.trace.json.gz"),
    ]
    wrapped = work / "resnet50_v100_workers0_object.pt.trace.json.gz"
    if not wrapped.exists():
        with gzip.open(TRACES / "resnet50_v100_workers0.pt.trace.json.gz", "rb") as f:
            text = f.read()
        with gzip.open(f"{wrapped}.part", "wb", compresslevel=6) as f:
            f.write(b'{\n  "schemaVersion": 1,\n  "traceEvents": ' + text.strip() + b"\n}\n")
        os.replace(f"{wrapped}.part", wrapped)
    traces.append(Trace("resnet50_v100_workers0, as an object", wrapped))
    size_tag = f"{args.size_mb:g}".replace(".", "_")
    big = work / f"generated_{size_tag}mib.pt.trace.json"
    if args.regenerate or not big.exists():
        print(f"# generating {big} ({args.size_mb:g} MiB) ...", flush=True)
        t0 = time.perf_counter()
        info = gen_kineto_trace.generate(big, args.size_mb)
        print(f"# generated {info['bytes'] / MiB:.1f} MiB, {info['steps']} steps, {info['events']} events "
              f"in {time.perf_counter() - t0:.0f} s", flush=True)
    traces.append(Trace(f"generated, {args.size_mb:g} MiB", big, large=True))
    for i, t in enumerate(traces):  # HTA reads a folder: one folder (a link) per trace
        d = work / f"hta_{i}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir()
        name = t.path.name if t.path.name.endswith((".json", ".json.gz")) else t.path.name + ".json"
        os.symlink(t.path.resolve(), d / name)
        t.hta_dir = str(d)
    return traces


def warm(path: pathlib.Path) -> None:
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def num(x: float) -> str:
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def fmt_s(xs: List[float]) -> str:
    med = statistics.median(xs)
    unit, scale = ("s", 1.0) if med >= 1 else ("ms", 1e3)
    return f"{num(med * scale)} {unit} [{num(min(xs) * scale)}–{num(max(xs) * scale)}]"


def fmt_mib(xs: List[float]) -> str:
    return f"{statistics.median(xs):.0f} MiB" + (f" [{min(xs):.0f}–{max(xs):.0f}]" if len(xs) > 1 else "")


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=float, default=1024, help="size of the generated trace, MiB (default 1024)")
    ap.add_argument("--repeats", type=int, default=5, help="runs per tool on each real trace (default 5)")
    ap.add_argument("--repeats-large", type=int, default=None,
                    help="runs per tool on the generated trace (default 3, at most --repeats)")
    ap.add_argument("--hta-python", default="/tmp/hta-venv/bin/python",
                    help="the python of a venv with HolisticTraceAnalysis (default /tmp/hta-venv/bin/python)")
    ap.add_argument("--no-hta", action="store_true", help="time gpuscope only")
    ap.add_argument("--trace-dir", default=os.path.join(tempfile.gettempdir(), "gpuscope-bench"),
                    help="where the generated traces go (default /tmp/gpuscope-bench)")
    ap.add_argument("--regenerate", action="store_true", help="write the generated trace again")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds one run may take (default 3600)")
    args = ap.parse_args(argv)
    large_repeats = args.repeats_large if args.repeats_large is not None else min(3, args.repeats)

    hta: Optional[str] = None
    hta_version = ""
    if args.no_hta:
        print("# HTA: skipped (--no-hta)")
    elif not os.access(args.hta_python, os.X_OK):
        print(f"# HTA: skipped: no python at {args.hta_python} (make the venv: python3 -m venv /tmp/hta-venv "
              "&& /tmp/hta-venv/bin/pip install HolisticTraceAnalysis)")
    else:
        v = subprocess.run([args.hta_python, "-c", HTA_VERSION], capture_output=True, text=True, check=False)
        if v.returncode != 0:
            print(f"# HTA: skipped: {args.hta_python} cannot import hta ({v.stderr.strip().splitlines()[-1:]})")
        else:
            hta, hta_version = args.hta_python, v.stdout.strip()

    traces = prepare(args)
    tools = ["gpuscope"] + (["HTA"] if hta else [])
    for t in traces:
        warm(t.path)  # the first timed run does not read the disk; the page cache holds every file
    load_before = loadavg()
    print(f"# {_machine.describe()}; {datetime.date.today()}; load average before {load_before}", flush=True)
    print(f"# gpuscope from {os.path.dirname(__import__('gpuscope').__file__)}"
          + (f"; HTA {hta_version} ({hta})" if hta else ""), flush=True)

    results: Dict[Tuple[str, str], List[Dict[str, Any]]] = {}
    for rep in range(max(args.repeats, large_repeats)):
        for t in traces:
            if rep >= (large_repeats if t.large else args.repeats):
                continue
            order = tools if rep % 2 == 0 else tools[::-1]
            for tool in order:
                if tool == "gpuscope":
                    cmd = [sys.executable, "-c", GPUSCOPE_CHILD, str(t.path), t.step]
                else:
                    cmd = [hta, "-c", HTA_CHILD, t.hta_dir]
                r = measure(cmd, args.timeout)
                results.setdefault((t.label, tool), []).append(r)
                state = f"{r['wall_s']:.2f} s, {r['rss_mib']:.0f} MiB" if r["ok"] else f"failed: {r['error']}"
                print(f"#   run {rep + 1}: {t.label}: {tool}: {state}", flush=True)
    load_after = loadavg()

    print()
    print("| trace | uncompressed | gpuscope wall | HTA wall | HTA ÷ gpuscope | gpuscope peak RSS | HTA peak RSS "
          "| memory goal: gpuscope ≤ 0.25 × size + 200 MiB | GPU idle, gpuscope (in steps) | GPU idle, HTA (GPU span) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    speed_ok: Dict[str, bool] = {}
    mem_ok: List[bool] = []
    for t in traces:
        row = [t.label, f"{t.size / MiB:.1f} MiB" if t.size >= MiB else f"{t.size / MiB:.2g} MiB"]
        ok = {tool: [r for r in results.get((t.label, tool), []) if r["ok"]] for tool in ("gpuscope", "HTA")}
        err = {tool: next((r["error"] for r in results.get((t.label, tool), []) if not r["ok"]), "")
               for tool in ("gpuscope", "HTA")}

        def cell(tool: str, what: str) -> str:
            if ok[tool]:
                xs = [r[what] for r in ok[tool]]
                return fmt_s(xs) if what == "wall_s" else fmt_mib(xs)
            if tool == "HTA" and not hta:
                return "skipped"
            return f"failed: {err[tool]}" if what == "wall_s" else "–"

        row += [cell("gpuscope", "wall_s"), cell("HTA", "wall_s")]
        if ok["gpuscope"] and ok["HTA"]:
            ratio = statistics.median(r["wall_s"] for r in ok["HTA"]) / statistics.median(r["wall_s"] for r in ok["gpuscope"])
            speed_ok[t.label] = ratio >= SPEED_GOAL
            row.append(f"{ratio:.1f}×")
        else:
            row.append("–")
        row += [cell("gpuscope", "rss_mib"), cell("HTA", "rss_mib")]
        limit = 0.25 * t.size / MiB + 200
        if ok["gpuscope"]:
            rss = statistics.median(r["rss_mib"] for r in ok["gpuscope"])
            mem_ok.append(rss <= limit)
            row.append(f"met ({rss:.0f} ≤ {limit:.0f} MiB)" if rss <= limit else f"NOT met ({rss:.0f} > {limit:.0f} MiB)")
        else:
            row.append("–")
        for tool in ("gpuscope", "HTA"):
            row.append(f"{ok[tool][0]['idle_pct']:.1f} %" if ok[tool] else "–")
        print("| " + " | ".join(row) + " |")

    print()
    print("In-process times (medians): import, then reading and analysing the trace.")
    print()
    print("| trace | gpuscope import | gpuscope analyze_trace | gpuscope steps | HTA import "
          "| HTA load + temporal breakdown | HTA steps | HTA ÷ gpuscope, analysis only |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for t in traces:
        row = [t.label]
        med: Dict[str, float] = {}
        for tool in ("gpuscope", "HTA"):
            rs = [r for r in results.get((t.label, tool), []) if r["ok"]]
            if rs:
                row += [fmt_s([r["import_s"] for r in rs]), fmt_s([r["analyze_s"] for r in rs]), str(rs[0]["steps"])]
                med[tool] = statistics.median(r["analyze_s"] for r in rs)
            else:
                row += ["–", "–", "–"]
        row.append(f"{med['HTA'] / med['gpuscope']:.1f}×" if len(med) == 2 and med["gpuscope"] > 0 else "–")
        print("| " + " | ".join(row) + " |")
    print()
    print(f"load average before {load_before}, after {load_after}; repeats {args.repeats} "
          f"(generated trace {large_repeats}); medians [min–max]")
    if speed_ok:
        missed = [label for label, met in speed_ok.items() if not met]
        print(f"speed goal (≥ {SPEED_GOAL:g}× HTA, whole process): met on {len(speed_ok) - len(missed)} of "
              f"{len(speed_ok)} traces both tools read" + (f"; NOT met on {', '.join(missed)}" if missed else ""))
    print(f"memory goal (≤ 0.25 × size + 200 MiB): {'met' if mem_ok and all(mem_ok) else 'NOT met'} "
          f"on {sum(mem_ok)} of {len(traces)} traces")
    failed = [t.label for t in traces if not any(r["ok"] for r in results.get((t.label, "gpuscope"), []))]
    if failed:
        print(f"gpuscope failed on: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""What `gpuscope compare` costs as the runs' phases grow: two run files of
P phases each are read (``load_run_file``) and compared (``compare_runs``),
as the command does, timed apart in this process; and the command itself,
``python -m gpuscope compare BASE NEW`` in a new process (its start-up and
``import gpuscope`` included), as CI runs it.

    python benchmarks/compare_phases.py [--repeat 5] [--phases 100,1000,4000,20000] [--quick]

Runs of up to 4087 phase names (what a session holds besides the nine
built-in ones) are saved by real sessions on a manual clock: 40 steps, each
opening every phase once, three of them 1 to 3 ms, the others 1 us (the new
run's largest phase 10 % slower). Past that, no session can write the file:
it is made from a 1000-phase run by splitting its small phases into equal
parts (a summary as consistent as a session's, with P phases), and
``gpuscope compare`` refuses it. The refusal is timed, and the summaries
are also read without the limit (``Summary._from_dict``) and compared, to
show the comparison itself stays linear.

Each call is timed --repeat times, the phase counts interleaved; medians and
ranges (min-max), wall clock.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import gpuscope as gs
from gpuscope._baseline import BaselineError, RunFile, compare_runs, load_run_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)

SESSION_NAMES = 4096 - 9  # a session's phase table, less the nine built-in names
BIG = {"p0": 3_000_000, "p1": 2_000_000, "p2": 1_000_000}  # ns


def real_run(path: str, phases: int, slower: float) -> str:
    clock = gs.testing.ManualClock()
    s = gs.Session(clock=clock, max_phases=4096, telemetry_interval_ms=0)
    names = [f"p{i}" for i in range(phases)]
    for _ in range(40):
        with s.step(samples=64):
            for name in names:
                with s.phase(name):
                    clock.advance(round(BIG[name] * (slower if name == "p0" else 1)) if name in BIG else 1000)
        s.flush()  # up to 4087 records a step: never more than the queue holds
    clock.advance(1_000_000_000)
    out = s.save(path)
    s.close()
    return out


def split_run(source: str, path: str, phases: int) -> str:
    """`source` (a run file) with its phases other than p0-p2 and "other"
    split into equal parts, `phases` phase names in all (and "other")."""
    with open(source) as f:
        doc = json.load(f)
    keep = [p for p in doc["summary"]["phases"] if p["name"] in BIG or p["name"] == "other"]
    small = [p for p in doc["summary"]["phases"] if p not in keep]
    q, r = divmod(phases - len(BIG), len(small))
    pieces = []
    for i, p in enumerate(small):
        k = q + (i < r)
        one = copy.deepcopy(p)
        for key in ("total", "share", "inclusive_share"):
            one[key] /= k
        one["time"] = {key: v if key == "count" else v / k for key, v in one["time"].items()}
        pieces += [dict(one, name=f"{p['name']}.{j}") for j in range(k)]
    doc["summary"]["phases"] = keep + pieces
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
    return path


def read_unchecked(path: str) -> RunFile:
    """A run file read as load_run_file does, less its checks."""
    with open(path) as f:
        doc = json.load(f)
    return RunFile(gs.Summary._from_dict(doc["summary"]), doc["metadata"], doc.get("step_times"))


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def fmt(xs: List[float]) -> str:
    med = statistics.median(xs)
    unit, scale = ("s", 1.0) if med >= 1 else ("ms", 1e3)
    return f"{med * scale:.3g} {unit} ({min(xs) * scale:.3g}-{max(xs) * scale:.3g})"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--phases", default="100,1000,4000,20000",
                    help="phase counts, comma-separated (past 4087: made by splitting, refused)")
    ap.add_argument("--quick", action="store_true", help="smoke run: 100 and 5000 phases, once")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.phases.split(",")]
    if args.quick:
        counts, args.repeat = [100, 5000], 1
    res: Dict[Tuple[int, str], List[float]] = {}
    size: Dict[int, int] = {}
    outcome: Dict[int, str] = {}
    exits: Dict[int, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        files: Dict[int, Tuple[str, str]] = {}
        sources: Dict[str, str] = {}
        for n in counts:
            pair = []
            for name, slower in (("base", 1.0), ("new", 1.1)):
                path = os.path.join(tmp, f"{name}{n}.json")
                if n <= SESSION_NAMES:
                    pair.append(real_run(path, n, slower))
                else:
                    if name not in sources:
                        sources[name] = real_run(os.path.join(tmp, f"{name}-source.json"), 1000, slower)
                    pair.append(split_run(sources[name], path, n))
            files[n] = (pair[0], pair[1])
            size[n] = os.path.getsize(pair[0])
        # Untimed: the first comparison imports what it needs (the noise test's numpy).
        base_path, new_path = files[counts[0]]
        base, new = read_unchecked(base_path), read_unchecked(new_path)
        compare_runs(base.summary, new.summary, base.metadata, new.metadata,
                     base_step_times=base.step_times, new_step_times=new.step_times)
        for _ in range(args.repeat):
            for n, (base_path, new_path) in files.items():
                t0 = time.perf_counter()
                try:
                    base, new = load_run_file(base_path), load_run_file(new_path)
                    res.setdefault((n, "read"), []).append(time.perf_counter() - t0)
                    outcome[n] = "compared"
                except BaselineError as e:  # the baseline refused: where compare exits 2
                    res.setdefault((n, "refused"), []).append(time.perf_counter() - t0)
                    outcome[n] = f"refused (\"{str(e).split(': ', 1)[1][:52]}...\"); compared read unchecked"
                    base, new = read_unchecked(base_path), read_unchecked(new_path)
                assert len(base.summary.phases) == n + 1, (n, len(base.summary.phases))  # and "other"
                t = timed(lambda: compare_runs(base.summary, new.summary, base.metadata, new.metadata,
                                               base_step_times=base.step_times, new_step_times=new.step_times))
                res.setdefault((n, "compare"), []).append(t)
                t0 = time.perf_counter()
                p = subprocess.run([sys.executable, "-m", "gpuscope", "compare", base_path, new_path],
                                   capture_output=True, text=True, check=False)
                res.setdefault((n, "command"), []).append(time.perf_counter() - t0)
                exits[n] = p.returncode
                assert p.returncode in (0, 1, 2) and "Traceback" not in p.stderr, p.stderr
    args_given = argv if argv is not None else sys.argv[1:]
    cmd = " ".join(shlex.quote(a) for a in ["benchmarks/compare_phases.py"] + list(args_given))
    print(f"{_machine.describe()}, gpuscope {gs.__version__}, {datetime.date.today().isoformat()}, "
          f"`python {cmd}`, {args.repeat} interleaved runs, median (min-max)")
    print()
    print("| phases | run file | read both files (`load_run_file`) | `compare_runs()` | "
          "`gpuscope compare` (a process) | outcome |")
    print("|---:|---:|---:|---:|---:|---|")
    for n in counts:
        read = fmt(res[(n, "read")]) if (n, "read") in res else "refused in " + fmt(res[(n, "refused")])
        print(f"| {n} | {size[n] / 1e6:.2f} MB | {read} | {fmt(res[(n, 'compare')])} | "
              f"{fmt(res[(n, 'command')])}, exit {exits[n]} | {outcome[n]} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

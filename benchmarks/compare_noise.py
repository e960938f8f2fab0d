"""What `gpuscope compare`'s noise test costs as the runs' windows grow:
``compare_step_times()`` (the circular block bootstrap, 2000 resamples per
run) on two runs of N steps each, for each statistic.

    python benchmarks/compare_noise.py [--repeat 5] [--steps 100,1000,10000,65536]
                                       [--before OLD_NOISE_PY] [--quick]

``--before`` times another copy of ``_noise.py`` (a file path, loaded as a
module of the installed gpuscope package) side by side, the runs interleaved: with numpy
importable, and with ``import numpy`` failing (the same process,
``sys.modules["numpy"] = None``). It also checks that both give the same
numbers.

The step times are a seeded random walk around 50 ms with a burst of slow
steps (what the block length is for), the new run 3 % slower. Medians and
ranges (min-max), wall clock.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.util
import os
import random
import statistics
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from gpuscope import _noise

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _machine  # noqa: E402  (benchmarks/_machine.py, beside this script)

STATS = ("p50", "p95", "mean")


def steps(n: int, seed: int, slower: float) -> List[float]:
    rnd = random.Random(seed)
    level, out = 0.05, []
    for i in range(n):
        level += rnd.gauss(0, 0.0002) - (level - 0.05) * 0.05
        burst = 3.0 if (i % 997) < 20 else 1.0
        out.append(max(0.001, level * burst * slower + rnd.gauss(0, 0.002)))
    return out


def load(path: str) -> Any:
    # Loaded as a module of the gpuscope package, so that its relative
    # imports (if any) resolve there.
    spec = importlib.util.spec_from_file_location("gpuscope._noise_before", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def timed(fn: Callable[[], Any]) -> Tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def fmt(xs: List[float]) -> str:
    med = statistics.median(xs)
    unit, scale = ("s", 1.0) if med >= 1 else ("ms", 1e3)
    return f"{med * scale:.3g} {unit} ({min(xs) * scale:.3g}-{max(xs) * scale:.3g})"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--steps", default="100,1000,10000,65536", help="steps per run, comma-separated")
    ap.add_argument("--before", help="another _noise.py to time side by side")
    ap.add_argument("--quick", action="store_true", help="smoke run: 100 and 2000 steps, once")
    args = ap.parse_args(argv)
    counts = [int(x) for x in args.steps.split(",")]
    if args.quick:
        counts, args.repeat = [100, 2000], 1
    variants: Dict[str, Tuple[Any, bool]] = {"gpuscope": (_noise, False)}
    if args.before:
        before = load(args.before)
        variants["before, numpy"] = (before, False)
        variants["before, no numpy"] = (before, True)
    runs = {n: (steps(n, 1, 1.0), steps(n, 2, 1.03)) for n in counts}
    res: Dict[Tuple[int, str, str], List[float]] = {}
    answers: Dict[Tuple[int, str, str], Any] = {}
    for _ in range(args.repeat):
        for n in counts:
            base, new = runs[n]
            for name, (mod, hide_numpy) in variants.items():
                saved = sys.modules.get("numpy", "absent")
                if hide_numpy:
                    sys.modules["numpy"] = None  # type: ignore[assignment]
                try:
                    for st in STATS:
                        t, out = timed(lambda: mod.compare_step_times(base, new, st))
                        res.setdefault((n, name, st), []).append(t)
                        answers[(n, name, st)] = dataclasses.astuple(out)
                finally:
                    if hide_numpy:
                        if saved == "absent":
                            del sys.modules["numpy"]
                        else:
                            sys.modules["numpy"] = saved
    same = all(answers[(n, name, st)] == answers[(n, "gpuscope", st)]
               for n in counts for name in variants for st in STATS)
    print(f"# compare_step_times(), two runs of N steps; {_machine.describe()}; "
          f"{datetime.date.today()}; repeat {args.repeat}")
    print("| steps | statistic | " + " | ".join(variants) + " |")
    print("|---:|---|" + "---:|" * len(variants))
    for n in counts:
        for st in STATS:
            print(f"| {n} | {st} | " + " | ".join(fmt(res[(n, name, st)]) for name in variants) + " |")
    if args.before:
        print(f"same numbers as before: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())

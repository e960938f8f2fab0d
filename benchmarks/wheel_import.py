"""What a wheel weighs and what `import gpuscope` costs from it.

    python benchmarks/wheel_import.py WHEEL [WHEEL...] [--repeat 41]

Each wheel goes into a fresh venv of this Python (a temporary folder), so
that nothing else on the machine is imported with it. Then, interleaved
over --repeat rounds (the wheels in a fresh random order every round, so
that a change of load falls on every wheel alike), each venv's interpreter
is started and times, with time.perf_counter():

- `import gpuscope`: the package, its extension and what they load (with
  the extension's shared libraries found and relocated by the dynamic
  loader: a wheel linked against the system's Abseil loads some twenty
  libabsl_*.so and libstdc++);
- the extension alone, loaded from its file without the package's
  __init__, in its own process;
- `import gpuscope` in a process that imported torch first (torch as this
  Python has it, its folder appended to the venv's path), as in a training
  script: what gpuscope adds there, the standard library modules torch
  already loaded not counted again. Timed in a pass of its own after the
  others (torch's libraries evict the page cache). Skipped without torch.

It prints, per wheel: the file's size, the installed extension's size and
its shared-library count (from ldd), and for each import the median, the
interquartile range and the min-max over the rounds, in milliseconds.
Interpreter start-up is not in the numbers.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import describe  # noqa: E402

TIMED = {
    "import gpuscope":
        "import time; t = time.perf_counter(); import gpuscope; print(time.perf_counter() - t)",
    # The extension by its file, without the package's __init__ (which
    # `import gpuscope._gpuscope` would run first).
    "load _gpuscope*.so":
        "import glob, importlib.util, sysconfig, time; "
        "p = glob.glob(sysconfig.get_paths()['purelib'] + '/gpuscope/_gpuscope*.so')[0]; "
        "t = time.perf_counter(); "
        "spec = importlib.util.spec_from_file_location('gpuscope._gpuscope', p); "
        "spec.loader.exec_module(importlib.util.module_from_spec(spec)); "
        "print(time.perf_counter() - t)",
}
# Appended after the venv's own site-packages: gpuscope is the venv's.
TORCH_FIRST = ("import sys; sys.path.append({path!r}); import torch, time; "
               "t = time.perf_counter(); import gpuscope; print(time.perf_counter() - t)")


def torch_path() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return os.path.dirname(os.path.dirname(os.path.abspath(torch.__file__)))


def install(wheel: str, root: str, index: int) -> str:
    # Numbered: two builds of one version have the same file name.
    venv = os.path.join(root, f"{index}-{os.path.basename(wheel)[:-4]}")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    py = os.path.join(venv, "bin", "python")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check",
                    wheel], check=True)
    return py


def extension_facts(py: str) -> tuple[int, int]:
    path = subprocess.run([py, "-c", "import gpuscope._gpuscope as e; print(e.__file__)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    ldd = subprocess.run(["ldd", path], capture_output=True, text=True, check=True).stdout
    return os.path.getsize(path), len(ldd.strip().splitlines())


def quartiles(xs: list[float]) -> tuple[float, float]:
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("wheels", nargs="+")
    ap.add_argument("--repeat", type=int, default=41)
    a = ap.parse_args()

    print(f"# wheel_import.py, {datetime.date.today()}, {describe()}")
    # Two passes: the rows without torch first, then the one after torch,
    # whose gigabyte of libraries would otherwise push the package's files
    # out of the page cache before the next plain import.
    passes = [dict(TIMED)]
    torch_dir = torch_path()
    if torch_dir is None:
        print("# torch is not installed here: the after-torch row is skipped")
    else:
        passes.append({"import gpuscope after torch": TORCH_FIRST.format(path=torch_dir)})
    timed = {k: v for p in passes for k, v in p.items()}
    with tempfile.TemporaryDirectory() as root:
        pys = {w: install(os.path.abspath(w), root, i) for i, w in enumerate(a.wheels)}
        times: dict[tuple[str, str], list[float]] = {(w, k): [] for w in a.wheels for k in timed}
        for rows in passes:
            for _ in range(a.repeat):
                order = [(w, k) for w in a.wheels for k in rows]
                random.shuffle(order)
                for w, k in order:
                    out = subprocess.run([pys[w], "-c", rows[k]], capture_output=True, text=True,
                                         check=True).stdout
                    times[(w, k)].append(float(out) * 1e3)
        for w in a.wheels:
            so_size, libs = extension_facts(pys[w])
            print(f"\n{w}")
            print(f"  wheel {os.path.getsize(w) / 1e6:.2f} MB; extension {so_size / 1e6:.2f} MB, "
                  f"{libs} entries in its ldd")
            for k in timed:
                xs = times[(w, k)]
                lo, hi = quartiles(xs)
                print(f"  {k:<27} median {statistics.median(xs):6.2f} ms  IQR {lo:.2f}-{hi:.2f}  "
                      f"min-max {min(xs):.2f}-{max(xs):.2f}  ({len(xs)} runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

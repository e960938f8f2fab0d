#!/usr/bin/env python3
"""Builds the wheel pip users install: `make wheel`.

    python3 scripts/build_wheel.py [--out dist] [--build-dir build-python]

1. Abseil's source, as the distribution patches it (scripts/fetch-abseil.sh
   into .devdeps/abseil; `make deps` has fetched it already), built into the
   extension as static, position-independent archives.
2. `pip wheel` with GPUSCOPE_SELF_CONTAINED=ON: Abseil and libstdc++ linked
   in, only PyInit__gpuscope exported (cmake/GpuscopeSelfContained.cmake).
   Without build isolation, so that it builds offline with what `make deps`
   installed and keeps its CMake build in --build-dir between runs.
3. `auditwheel repair` to the manylinux tag the extension's symbols need
   (`auditwheel show` says which, and why). The script fails if that tag is
   newer than manylinux_2_35 (Ubuntu 22.04's glibc), if auditwheel had to
   copy any library into the wheel, or if the extension needs (DT_NEEDED) a
   library other than glibc's and libgcc_s, the unwinder glibc itself
   loads; auditwheel alone would let libstdc++ through, as every manylinux
   policy lists it.

The repaired wheel is the only gpuscope wheel left in --out; its path is
printed last.
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_GLIBC = (2, 35)  # Ubuntu 22.04, the usual base of GPU clusters
# What the extension may need: glibc's libraries and libgcc_s
# (cmake/GpuscopeSelfContained.cmake says why that one stays shared).
ALLOWED_NEEDED = re.compile(
    r"^(libc|libm|libdl|libpthread|librt)\.so\.\d+$|^ld-linux-[\w-]+\.so\.\d+$|^libgcc_s\.so\.1$")


class Failed(Exception):
    pass


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    p = subprocess.run(cmd, **kw)
    if p.returncode != 0:
        if kw.get("capture_output"):
            print(p.stdout, p.stderr, sep="\n", file=sys.stderr)
        raise Failed(f"{cmd[0]} {cmd[1] if len(cmd) > 1 else ''} exited {p.returncode}")
    return p


def one(pattern: str, what: str) -> str:
    found = glob.glob(pattern)
    if len(found) != 1:
        raise Failed(f"expected one {what} ({pattern}), found {len(found)}: {found}")
    return found[0]


def needed_libraries(wheel: str) -> dict[str, list[str]]:
    """DT_NEEDED of every shared object in the wheel."""
    out = {}
    with tempfile.TemporaryDirectory() as d, zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if ".so" in os.path.basename(name):
                path = z.extract(name, d)
                dyn = run(["readelf", "-d", path], capture_output=True, text=True).stdout
                out[name] = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    return out


def build() -> str:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "dist"))
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build-python"))
    ap.add_argument("--abseil-dir", default=os.path.join(ROOT, ".devdeps", "abseil"))
    a = ap.parse_args()

    run(["bash", os.path.join(ROOT, "scripts", "fetch-abseil.sh"), a.abseil_dir])
    raw = os.path.join(a.build_dir, "wheel-raw")
    shutil.rmtree(raw, ignore_errors=True)
    run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
         "-w", raw, f"-Cbuild-dir={a.build_dir}",
         "-Ccmake.define.GPUSCOPE_SELF_CONTAINED=ON",
         f"-Ccmake.define.GPUSCOPE_ABSEIL_SOURCE_DIR={os.path.abspath(a.abseil_dir)}", ROOT])
    built = one(os.path.join(raw, "gpuscope-*.whl"), "built wheel")

    show = run([sys.executable, "-m", "auditwheel", "show", built],
               capture_output=True, text=True).stdout
    print(show.strip())
    os.makedirs(a.out, exist_ok=True)
    for old in glob.glob(os.path.join(a.out, "gpuscope-*.whl")):
        os.remove(old)
    run([sys.executable, "-m", "auditwheel", "repair", "-w", a.out, built])
    wheel = one(os.path.join(a.out, "gpuscope-*.whl"), "repaired wheel")

    tags = re.findall(r"manylinux_(\d+)_(\d+)_", os.path.basename(wheel))
    if not tags:
        raise Failed(f"{wheel} has no manylinux tag: its extension needs something outside "
                     "glibc (auditwheel show, above, says what)")
    lowest = min((int(x), int(y)) for x, y in tags)
    if lowest > MAX_GLIBC:
        raise Failed(f"the wheel needs glibc {lowest[0]}.{lowest[1]}, newer than "
                     f"manylinux_{MAX_GLIBC[0]}_{MAX_GLIBC[1]} (Ubuntu 22.04); auditwheel show, "
                     "above, names the symbols")
    with zipfile.ZipFile(wheel) as z:
        grafted = [n for n in z.namelist() if ".libs/" in n]
    if grafted:
        raise Failed(f"auditwheel copied libraries into the wheel ({', '.join(grafted)}): the "
                     "extension is not self-contained")
    for name, libs in needed_libraries(wheel).items():
        extra = [lib for lib in libs if not ALLOWED_NEEDED.match(lib)]
        if extra:
            raise Failed(f"{name} needs {', '.join(extra)}: only glibc's libraries and libgcc_s "
                         "may stay outside the wheel")
        print(f"build_wheel: {name} needs {', '.join(libs)}")
    print(f"build_wheel: {os.path.relpath(wheel)} ({os.path.getsize(wheel) / 1e6:.2f} MB), "
          f"manylinux_{lowest[0]}_{lowest[1]}, nothing grafted")
    return wheel


def main() -> int:
    try:
        print(build())
    except Failed as e:
        print(f"build_wheel: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

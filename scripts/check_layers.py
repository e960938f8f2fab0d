#!/usr/bin/env python3
"""Fails when an #include in lib/ goes against the library's layering.

The layers, lowest first (docs/architecture.md draws them):

  base       queue, ring, fork generation, dynlib, log, env, strings, JSON
  backends   one interface per data source at backends/*.h; each
             implementation (cuda, cupti, nvml, host, nvtx, sim, telemetry)
             in its own folder, with its fake
  core       step assembly, device resolution, telemetry window, window
             statistics: sees only the backends' interfaces
  session    the recorder (hot path), the pump, the source ladder, the facade
  analysis   diagnosis and the doctor
  export     summary/findings/series JSON, Chrome trace, Prometheus, report

A file may include headers of its own layer and of the layers below it, and
the public headers (include/gpuscope/). Inside backends an implementation
folder may include the interfaces and the folders BACKEND_DEPS lists for it;
core may include only the interfaces. Public headers include no lib/ header.

Usage: check_layers.py [REPO_ROOT]; exit status 1 lists every violation.
"""

import pathlib
import re
import sys

LAYERS = ["base", "backends", "core", "session", "analysis", "export"]

# Which backend implementation folders each one may use (an acyclic graph).
BACKEND_DEPS = {
    "host": set(),
    "nvml": set(),
    "nvtx": set(),
    "cuda": {"host"},
    "cupti": {"cuda", "host"},
    "sim": {"cuda", "host"},
    "telemetry": {"cuda", "host", "nvml"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)


def where(rel: str):
    """(layer, backend folder or None) of a path relative to lib/."""
    parts = rel.split("/")
    layer = parts[0]
    if layer not in LAYERS:
        return None, None
    if layer == "backends" and len(parts) > 2:
        return layer, parts[1]
    return layer, None


def violations(root: pathlib.Path):
    lib = root / "lib"
    out = []
    for path in sorted(list(lib.rglob("*.h")) + list(lib.rglob("*.cc"))):
        rel = path.relative_to(lib).as_posix()
        layer, folder = where(rel)
        if layer is None:
            out.append(f"lib/{rel}: not in a layer folder ({', '.join(LAYERS)})")
            continue
        if folder is not None and folder not in BACKEND_DEPS:
            out.append(f"lib/{rel}: backend folder '{folder}' is not in BACKEND_DEPS")
            continue
        rank = LAYERS.index(layer)
        for m in INCLUDE.finditer(path.read_text()):
            inc = m.group(1)
            if inc.startswith(("gpuscope/", "absl/", "nvtx3/", "nlohmann/")):
                continue
            if "/" not in inc:
                continue  # a vendor header found on the include path
            ilayer, ifolder = where(inc)
            if ilayer is None:
                out.append(f"lib/{rel}: includes \"{inc}\", which is in no layer")
                continue
            irank = LAYERS.index(ilayer)
            bad = None
            if irank > rank:
                bad = f"{layer} may not depend on {ilayer} (a higher layer)"
            elif layer == "core" and ilayer == "backends" and ifolder is not None:
                bad = "core sees only the backends' interfaces (backends/*.h)"
            elif layer == "backends" and ilayer == "backends" and ifolder is not None:
                if folder is None:
                    bad = "a backend interface may not include an implementation"
                elif ifolder != folder and ifolder not in BACKEND_DEPS[folder]:
                    bad = f"backends/{folder} may not use backends/{ifolder}"
            if bad:
                out.append(f"lib/{rel}: includes \"{inc}\": {bad}")
    for path in sorted((root / "include").rglob("*.h")):
        for m in INCLUDE.finditer(path.read_text()):
            if not m.group(1).startswith(("gpuscope/", "absl/")):
                out.append(f"{path.relative_to(root)}: a public header includes \"{m.group(1)}\"")
    return out


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    bad = violations(root.resolve())
    for line in bad:
        print(line)
    if bad:
        print(f"check_layers: {len(bad)} include(s) against the layering (see the docstring of {__file__})")
        return 1
    print("check_layers: every include follows the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Fails when an #include or a definition goes against the library's layering.

The layers, lowest first (docs/architecture.md draws them):

  base       queue, ring, fork generation, dynlib, log, env, strings, JSON
  backends   one interface per data source at backends/*.h; each
             implementation (cuda, cupti, nvml, host, nvtx, sim, telemetry)
             in its own folder, with its fake
  core       step assembly, device resolution, telemetry window, window
             statistics: sees only the backends' interfaces
  trace      recorded traces (torch.profiler) read into the core's engine
  session    the recorder (hot path), the pump, the source ladder, the facade
  analysis   diagnosis and the doctor
  export     summary/findings/series JSON, Chrome trace, Prometheus, report

A file may include headers of its own layer and of the layers below it, and
the public headers (include/gpuscope/). Inside backends an implementation
folder may include the interfaces and the folders BACKEND_DEPS lists for it;
core may include only the interfaces. Public headers include no lib/ header.

Each public header belongs to one layer (PUBLIC_LAYERS): what it declares is
defined in that layer's folder (a function it declares, a member of a type it
declares), and it includes only public headers of its layer or below. So a
type that core computes cannot have its functions defined in export, and the
session cannot be encoded by reading its internals from export.

Usage: check_layers.py [REPO_ROOT]; exit status 1 lists every violation.
"""

import pathlib
import re
import sys

LAYERS = ["base", "backends", "core", "trace", "session", "analysis", "export"]

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

# The layer (and, in backends, the folder) whose sources define what each
# public header declares. gpuscope.h only includes the others; version.h is
# generated.
PUBLIC_LAYERS = {
    "log.h": ("base", None),
    "clock.h": ("backends", "host"),
    "testing.h": ("backends", "sim"),
    "phase.h": ("core", None),
    "options.h": ("core", None),
    "summary.h": ("core", None),
    "ranks.h": ("core", None),
    "timeline.h": ("core", None),
    "analyze.h": ("trace", None),
    "session.h": ("session", None),
    "scopes.h": ("session", None),
    "diagnose.h": ("analysis", None),
    "doctor.h": ("analysis", None),
    "report.h": ("export", None),
}
PUBLIC_UMBRELLAS = {"gpuscope.h", "version.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.MULTILINE)
COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
# A type a header declares (not a forward declaration).
TYPE_DECL = re.compile(r"^\s*(?:class|struct|enum\s+class|enum)\s+(\w+)\b(?![^;{]*;)", re.MULTILINE)
# A function declared at namespace scope (column 0): its name.
FUNC_DECL = re.compile(r"^(?!(?:namespace|using|return|class|struct|enum|template|typedef|inline\s+constexpr|#)\b)"
                       r"[A-Za-z_][\w:<>,*&\s]*?[\s*&]([A-Za-z_]\w*)\s*\(", re.MULTILINE)
# A definition at column 0: [return type] [Type::]name( ... ) ... {
FUNC_DEF = re.compile(r"^(?!(?:namespace|using|return|class|struct|enum|template|typedef|static_assert|#)\b)"
                      r"(?:[A-Za-z_][\w:<>,*&\s]*?[\s*&])?(?:(?:gpuscope::)?(\w+)::)?(~?[A-Za-z_]\w*)\s*\(",
                      re.MULTILINE)



def where(rel: str):
    """(layer, backend folder or None) of a path relative to lib/."""
    parts = rel.split("/")
    layer = parts[0]
    if layer not in LAYERS:
        return None, None
    if layer == "backends" and len(parts) > 2:
        return layer, parts[1]
    return layer, None


def strip(text: str) -> str:
    """The text without comments and string literals (lines kept)."""
    text = STRING.sub('""', text)
    return COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def public_declarations(root: pathlib.Path):
    """{name: header} for the free functions and types each public header declares."""
    functions, types = {}, {}
    for header in PUBLIC_LAYERS:
        path = root / "include" / "gpuscope" / header
        if not path.exists():
            continue
        text = strip(path.read_text())
        for m in TYPE_DECL.finditer(text):
            types.setdefault(m.group(1), header)
        for m in FUNC_DECL.finditer(text):
            functions.setdefault(m.group(1), header)
    return functions, types


def definitions(text: str):
    """(line, type or None, name) of each function defined at namespace scope
    outside `internal` and anonymous namespaces, or as a member of any type."""
    # Namespaces open at column 0 and close at a column-0 brace that
    # clang-format marks "// namespace": tracked on the text with its
    # comments, by line (strip() keeps lines).
    spans = []  # (first line, last line, name)
    stack = []
    for number, raw in enumerate(STRING.sub('""', text).splitlines(), start=1):
        opened = re.match(r"namespace\s*([\w:]*)\s*\{", raw)
        if opened:
            stack.append((number, opened.group(1)))
        elif re.match(r"\}\s*//\s*namespace", raw) and stack:
            first, name = stack.pop()
            spans.append((first, number, name))
    text = strip(text)
    out = []
    for m in FUNC_DEF.finditer(text):
        # A definition: the declarator's parentheses are followed by a body
        # (or a constructor's initializer list), not by a semicolon.
        depth, i = 0, m.end() - 1
        while i < len(text):
            c = text[i]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        rest = text[i + 1:]
        end = re.search(r"[;{]", rest)
        if end is None or end.group(0) != "{":
            continue
        owner, name = m.group(1), m.group(2)
        line = text.count("\n", 0, m.start()) + 1
        inside = [n for (a, b, n) in spans if a < line < b]
        hidden = any(n == "" or n == "internal" or n.endswith("::internal") for n in inside)
        if hidden and owner is None:
            continue
        out.append((line, owner, name))
    return out


def definition_violations(root: pathlib.Path):
    functions, types = public_declarations(root)
    out = []
    lib = root / "lib"
    for path in sorted(lib.rglob("*.cc")):
        rel = path.relative_to(lib).as_posix()
        layer, folder = where(rel)
        if layer is None:
            continue
        for line, owner, name in definitions(path.read_text()):
            header = types.get(owner) if owner else functions.get(name)
            if header is None:
                continue
            want_layer, want_folder = PUBLIC_LAYERS[header]
            if layer != want_layer or (want_folder is not None and folder != want_folder):
                what = f"{owner}::{name}" if owner else name
                place = f"lib/{want_layer}/" + (f"{want_folder}/" if want_folder else "")
                out.append(f"lib/{rel}:{line}: defines {what}, which gpuscope/{header} declares: "
                           f"that header is the {want_layer} layer's, so define it under {place}")
    return out


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
        name = path.name
        if name not in PUBLIC_LAYERS and name not in PUBLIC_UMBRELLAS:
            out.append(f"{path.relative_to(root)}: a public header with no layer: add it to PUBLIC_LAYERS")
            continue
        for m in INCLUDE.finditer(path.read_text()):
            inc = m.group(1)
            if not inc.startswith(("gpuscope/", "absl/")):
                out.append(f"{path.relative_to(root)}: a public header includes \"{inc}\"")
                continue
            if name in PUBLIC_UMBRELLAS or not inc.startswith("gpuscope/"):
                continue
            target = inc.split("/", 1)[1]
            if target in PUBLIC_LAYERS and (LAYERS.index(PUBLIC_LAYERS[target][0]) >
                                            LAYERS.index(PUBLIC_LAYERS[name][0])):
                out.append(f"{path.relative_to(root)}: includes \"{inc}\": the "
                           f"{PUBLIC_LAYERS[name][0]} layer's header may not use the "
                           f"{PUBLIC_LAYERS[target][0]} layer's")
    out.extend(definition_violations(root))
    return out


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
    bad = violations(root.resolve())
    for line in bad:
        print(line)
    if bad:
        print(f"check_layers: {len(bad)} include(s) or definition(s) against the layering (see the docstring of {__file__})")
        return 1
    print("check_layers: every include and definition follows the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())

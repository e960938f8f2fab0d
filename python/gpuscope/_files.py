"""Writing gpuscope's output files."""

from __future__ import annotations

import os


def write_atomically(path: "os.PathLike[str] | str", text: str) -> str:
    """Writes `text` to `path` through a temporary file renamed over it, so a
    reader (a textfile collector, a CI job) never sees half a file. Returns
    the path."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)
    return path

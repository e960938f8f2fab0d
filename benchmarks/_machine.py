"""What the benchmark scripts print about the machine they ran on."""

from __future__ import annotations

import os
import platform


def describe() -> str:
    """The CPU model, CPU count and Python version, for a results header."""
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}"

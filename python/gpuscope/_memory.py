"""GPU memory from PyTorch's caching allocator.

Two things, neither on the training thread's path:

* the sampler: one daemon thread per process that, every
  ``telemetry_interval_ms``, reads the allocator's numbers for each GPU this
  process holds memory on and hands them to every live session
  (``Session._record_memory``); the C++ side finds each step's peak and the
  phase that reached it;
* ``oom_details(exc)``: what a scope ending by a CUDA out-of-memory error
  records (the C scopes call it, on the exception path only), and the
  allocator snapshot saved for it when the user turned PyTorch's allocator
  history on.

The allocator is only read: gpuscope never resets its peak statistics, never
empties its cache, never turns its history recording on, and never
initializes CUDA (nothing is read until torch has).

``device_count``, ``read_allocator`` and ``save_snapshot`` are the boundary
with torch: tests replace them with a fake allocator.
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
import weakref
from typing import Any, Optional, Tuple

_NAN = float("nan")

# (allocated, reserved, peak_allocated, peak_reserved, retries, ooms, total)
AllocatorNumbers = Tuple[float, float, float, float, int, int, float]

# Where the zero-code runner (`gpuscope run --out DIR`) wants an OOM's
# allocator snapshot; GPUSCOPE_OOM_SNAPSHOT_DIR says it for other programs.
snapshot_dir: Optional[str] = None


def _cuda() -> Any:
    """torch.cuda once torch has initialized CUDA in this process, else None."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        cuda = torch.cuda
        return cuda if cuda.is_initialized() else None
    except Exception:  # noqa: BLE001 - an odd torch is no memory source, never an error
        return None


def device_count() -> int:
    """GPUs the allocator may hold memory on (0 before torch initialized CUDA)."""
    cuda = _cuda()
    if cuda is None:
        return 0
    try:
        return int(cuda.device_count())
    except Exception:  # noqa: BLE001
        return 0


_totals: dict = {}


def read_allocator(device: int) -> Optional[AllocatorNumbers]:
    """The caching allocator's numbers for ``device`` now, or None.

    Reads ``torch.cuda.memory_stats`` in its nested form (no flattening:
    this runs every sample) and the device's total memory once."""
    cuda = _cuda()
    if cuda is None:
        return None
    try:
        raw = getattr(getattr(sys.modules["torch"], "_C", None), "_cuda_memoryStats", None)
        stats = raw(device) if raw is not None else cuda.memory_stats_as_nested_dict(device)
        if not stats:
            return None
        allocated = stats["allocated_bytes"]["all"]
        reserved = stats["reserved_bytes"]["all"]
        total = _totals.get(device)
        if total is None:
            total = float(cuda.get_device_properties(device).total_memory)
            _totals[device] = total
        return (float(allocated["current"]), float(reserved["current"]),
                float(allocated["peak"]), float(reserved["peak"]),
                int(stats.get("num_alloc_retries", -1)), int(stats.get("num_ooms", -1)), total)
    except Exception:  # noqa: BLE001 - a torch without these stats: no memory numbers
        return None


class _Sampler:
    """The process's one sampler thread and the sessions it feeds."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._clear()

    def _clear(self) -> None:
        self.sessions: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.interval_s = 0.1
        self.thread: Optional[threading.Thread] = None
        self.pid = os.getpid()

    def add(self, session: Any, interval_s: float) -> None:
        with self.lock:
            if self.pid != os.getpid():  # a forked child: the parent's thread is not here
                self._clear()
            self.sessions.add(session)
            self.interval_s = min(self.interval_s, interval_s) if self.thread else interval_s
            if self.thread is None or not self.thread.is_alive():
                self.thread = threading.Thread(target=self._run, name="gpuscope-memory",
                                               daemon=True)
                self.thread.start()

    def sample_once(self) -> int:
        """One sample of every GPU into every live session; how many GPUs."""
        sessions = [s for s in list(self.sessions) if s.recording]
        if not sessions:
            return 0
        n = 0
        for device in range(device_count()):
            numbers = read_allocator(device)
            if numbers is None or not numbers[1] > 0:  # no memory reserved there
                continue
            n += 1
            for s in sessions:
                try:
                    s._record_memory(device, *numbers, "torch.cuda")
                except Exception:  # noqa: BLE001 - a closed session: skip it
                    pass
        return n

    def _run(self) -> None:
        stop = threading.Event()
        while True:
            stop.wait(self.interval_s)
            with self.lock:
                if not self.sessions:
                    self.thread = None
                    return
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001 - never let the sampler die loudly in a job
                pass


_sampler = _Sampler()


def _after_fork_in_child() -> None:
    # The parent's thread is not in the child, and its lock may have been
    # held when the process forked: the child starts afresh.
    global _sampler
    _sampler = _Sampler()


os.register_at_fork(after_in_child=_after_fork_in_child)


def watch(session: Any) -> None:
    """Feeds ``session`` the allocator's numbers from now on. A no-op for a
    session that records nothing or has telemetry off, and in a process
    that has not imported torch (no thread is started for nothing; the
    zero-code runner calls it again once it has imported torch)."""
    if not session.recording or "torch" not in sys.modules:
        return
    interval_ms = session._options.get("telemetry_interval_ms", 100)
    if not interval_ms or interval_ms <= 0:
        return
    _sampler.add(session, interval_ms / 1000.0)


# ---- The out-of-memory error.

_UNITS = {"B": 1.0, "KiB": 2.0**10, "MiB": 2.0**20, "GiB": 2.0**30, "TiB": 2.0**40,
          "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}
_AMOUNT = r"([0-9]+(?:\.[0-9]+)?) ?(B|KiB|MiB|GiB|TiB|KB|MB|GB|TB)"


def _amount(pattern: str, text: str) -> float:
    m = re.search(pattern.replace("AMOUNT", _AMOUNT), text)
    return float(m.group(1)) * _UNITS[m.group(2)] if m else _NAN


def is_cuda_oom(exc: BaseException) -> bool:
    """torch's OutOfMemoryError (any version), or the RuntimeError older
    torch raised with the same message."""
    for cls in type(exc).__mro__:
        if cls.__name__ == "OutOfMemoryError" and cls.__module__.split(".")[0] == "torch":
            return True
    return isinstance(exc, RuntimeError) and str(exc).startswith("CUDA out of memory")


def save_snapshot(device: int) -> str:
    """The allocator's snapshot saved beside the run's files when the user
    turned history recording on (torch.cuda.memory._record_memory_history)
    and a directory is known; "" otherwise."""
    directory = snapshot_dir or os.environ.get("GPUSCOPE_OOM_SNAPSHOT_DIR")
    cuda = _cuda()
    if not directory or cuda is None:
        return ""
    snap = getattr(getattr(cuda, "memory", None), "_snapshot", None)
    if snap is None:
        return ""
    snapshot = snap()  # taken once (torch's _dump_snapshot would take it again)
    if not any(snapshot.get("device_traces") or []):  # history recording is off
        return ""
    import pickle

    from ._files import write_atomically

    rank = os.environ.get("RANK", "0")
    path = os.path.join(directory, f"oom_snapshot_rank{rank}.pickle")
    os.makedirs(directory, exist_ok=True)
    return str(write_atomically(path, pickle.dumps(snapshot)))


def oom_details(exc: BaseException) -> Optional[Tuple[int, float, float, float, float, str, str]]:
    """None unless ``exc`` is a CUDA out-of-memory error; else (device,
    requested, allocated, reserved, total, message, snapshot): from the
    error's own message where it says them (its numbers are of that
    moment), else from the allocator now. Never raises."""
    try:
        if not is_cuda_oom(exc):
            return None
        text = str(exc)
        m = re.search(r"GPU ([0-9]+)", text)
        device = int(m.group(1)) if m else -1
        requested = _amount(r"Tried to allocate AMOUNT", text)
        total = _amount(r"total capacity of AMOUNT", text)
        allocated = _amount(r"AMOUNT is allocated by PyTorch", text)
        unallocated = _amount(r"AMOUNT is reserved by PyTorch but unallocated", text)
        reserved = allocated + unallocated
        numbers = read_allocator(device if device >= 0 else 0)
        if numbers is not None:
            allocated = numbers[0] if math.isnan(allocated) else allocated
            reserved = numbers[1] if math.isnan(reserved) else reserved
            total = numbers[6]  # exact, where the message rounds it to 0.01 GiB
        message = text.split("\n", 1)[0][:400]
        try:
            snapshot = save_snapshot(max(device, 0))
        except Exception:  # noqa: BLE001 - no snapshot is no reason to fail
            snapshot = ""
        return (device, requested, allocated, reserved, total, message, snapshot)
    except Exception:  # noqa: BLE001 - the user's error must propagate as it is
        return None
